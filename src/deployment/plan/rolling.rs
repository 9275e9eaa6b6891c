//! Kubernetes' `pkg/controller/deployment/rolling.go`: the `RollingUpdate` strategy,
//! the new ReplicaSet up (`reconcileNewReplicaSet`) and the old ones down
//! (`reconcileOldReplicaSets`) within maxSurge and maxUnavailable, with kcm's
//! availability rule. Pure.

use super::util::{counted_available, deployment_complete, new_rs_new_replicas, size};
use super::Rollout;

/// `reconcileNewReplicaSet`: scales the new ReplicaSet down to `replicas`, or up by
/// [`new_rs_new_replicas`]; whether it scaled.
pub fn reconcile_new_replica_set(r: &mut Rollout) -> bool {
    let Some(new) = r.new else {
        return false;
    };
    let replicas = r.d.replicas();
    let current = size(&r.rss[new]);
    if current == replicas {
        return false;
    }
    if current > replicas {
        return r.scale_and_record(new, replicas);
    }
    let target = new_rs_new_replicas(&r.d, &r.rss, new);
    r.scale_and_record(new, target)
}

/// `reconcileOldReplicaSets`: scales old ReplicaSets down as far as availability allows:
/// first their unhealthy replicas ([`cleanup_unhealthy_replicas`]), then available ones
/// above `replicas − maxUnavailable`
/// ([`scale_down_old_replica_sets_for_rolling_update`]); whether it scaled.
pub fn reconcile_old_replica_sets(r: &mut Rollout) -> bool {
    let old = r.active(&r.old());
    let old_count: i64 = old.iter().map(|i| size(&r.rss[*i])).sum();
    if old_count == 0 {
        return false;
    }
    let all_count: i64 = r.rss.iter().map(size).sum();
    let min_available = r.d.replicas() - r.d.max_unavailable();
    let new_unavailable = r.new_rs().map_or(0, |rs| size(rs) - counted_available(rs));
    let max_scaled_down = all_count - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return false;
    }
    let cleaned = cleanup_unhealthy_replicas(r, &old, max_scaled_down);
    let scaled = scale_down_old_replica_sets_for_rolling_update(r, &old);
    cleaned + scaled > 0
}

/// `cleanupUnhealthyReplicas`: removes up to `max_cleanup` unavailable replicas from the
/// old ReplicaSets, oldest first (kubernetes #16737); how many.
pub fn cleanup_unhealthy_replicas(r: &mut Rollout, old: &[usize], max_cleanup: i64) -> i64 {
    let mut total = 0;
    for &i in old {
        if total >= max_cleanup {
            break;
        }
        let rs = &r.rss[i];
        let unhealthy = size(rs) - counted_available(rs);
        if size(rs) == 0 || unhealthy == 0 {
            continue;
        }
        let count = (max_cleanup - total).min(unhealthy);
        let target = size(rs) - count;
        r.scale_and_record(i, target);
        total += count;
    }
    total
}

/// `scaleDownOldReplicaSetsForRollingUpdate`: removes available replicas above
/// `replicas − maxUnavailable` from the old ReplicaSets, oldest first; how many.
pub fn scale_down_old_replica_sets_for_rolling_update(r: &mut Rollout, old: &[usize]) -> i64 {
    let min_available = r.d.replicas() - r.d.max_unavailable();
    let available: i64 = r.rss.iter().map(counted_available).sum();
    if available <= min_available {
        return 0;
    }
    let to_scale_down = available - min_available;
    let mut total = 0;
    for &i in old {
        if total >= to_scale_down {
            break;
        }
        let current = size(&r.rss[i]);
        if current == 0 {
            continue;
        }
        let count = current.min(to_scale_down - total);
        r.scale_and_record(i, current - count);
        total += count;
    }
    total
}

/// `rolloutRolling`.
pub fn rollout_rolling(r: &mut Rollout) -> Option<u64> {
    r.sync_revision(true);
    if reconcile_new_replica_set(r) {
        return r.sync_rollout_status();
    }
    if reconcile_old_replica_sets(r) {
        return r.sync_rollout_status();
    }
    if deployment_complete(&r.d, &r.d.status) {
        r.cleanup();
    }
    r.sync_rollout_status()
}
