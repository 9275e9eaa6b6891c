//! What a delete writes (kube-apiserver's `registry/generic/registry/store.go` `Delete`
//! and `DeleteOptions.propagationPolicy`): delete the key, or mark the object with a
//! `deletionTimestamp` and the finalizer of a foreground or orphaning delete, for the
//! garbage collector to finish; and a pod's graceful deletion (`gracePeriodSeconds`:
//! `deletionTimestamp` set to the deadline, the kubelet deletes it once its containers
//! stopped). Shared by `kcm delete` and the apiserver's DELETE. Pure.

use std::time::{Duration, SystemTime};

use super::{ObjectMeta, Pod, PodPhase, FINALIZER_FOREGROUND, FINALIZER_ORPHAN};

/// What a delete does to an object's dependents (`--cascade`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cascade {
    /// The object goes now; the garbage collector deletes its dependents afterwards.
    Background,
    /// The object stays (with `foregroundDeletion`) until its blocking dependents are gone.
    Foreground,
    /// The object stays (with `orphan`) until its dependents lost their references to it.
    Orphan,
}

/// The write a delete makes to an object with metadata `meta`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeleteWrite {
    /// Delete the key (at the revision read).
    Delete,
    /// Set `deletionTimestamp` and add the finalizer (if any).
    Mark(Option<&'static str>),
    /// Already in deletion with what this delete asks for: nothing to write.
    Nothing,
}

/// The apiserver's rule: a background delete removes an object without finalizers;
/// otherwise the object is marked, with `foregroundDeletion` or `orphan` for those.
pub fn delete_write(meta: &ObjectMeta, cascade: Cascade) -> DeleteWrite {
    let finalizer = match cascade {
        Cascade::Background if meta.finalizers.is_empty() => return DeleteWrite::Delete,
        Cascade::Background => None,
        Cascade::Foreground => Some(FINALIZER_FOREGROUND),
        Cascade::Orphan => Some(FINALIZER_ORPHAN),
    };
    let has = |f: &str| meta.finalizers.iter().any(|x| x == f);
    if meta.deletion_timestamp.is_some() && finalizer.is_none_or(has) {
        DeleteWrite::Nothing
    } else {
        DeleteWrite::Mark(finalizer)
    }
}

/// A pod's grace period when `metadata.deletionGracePeriodSeconds` is not given
/// (`DefaultTerminationGracePeriodSeconds`).
pub const DEFAULT_GRACE_PERIOD_SECONDS: i64 = 30;

/// The metadata field of a graceful deletion's period (kcm's `ObjectMeta` keeps it in
/// `extra`).
pub const DELETION_GRACE_PERIOD_FIELD: &str = "deletionGracePeriodSeconds";

/// The grace period a delete of `pod` gets (kube-apiserver's pod strategy,
/// `CheckGracefulDelete`): 0 for a pod no node runs (unassigned) or that has terminated;
/// else the request's `gracePeriodSeconds`, or the pod's
/// `spec.terminationGracePeriodSeconds`, or 30.
pub fn pod_grace_period(pod: &Pod, requested: Option<i64>) -> i64 {
    if pod.spec.host.is_empty() || matches!(pod.phase(), PodPhase::Failed | PodPhase::Succeeded) {
        return 0;
    }
    requested
        .or_else(|| {
            pod.spec
                .extra
                .get("terminationGracePeriodSeconds")
                .and_then(serde_json::Value::as_i64)
        })
        .unwrap_or(DEFAULT_GRACE_PERIOD_SECONDS)
        .max(0)
}

/// The `deletionGracePeriodSeconds` an object carries, if any.
pub fn deletion_grace_period(meta: &ObjectMeta) -> Option<i64> {
    meta.extra
        .get(DELETION_GRACE_PERIOD_FIELD)
        .and_then(serde_json::Value::as_i64)
}

/// What a delete with a grace period of `grace` seconds writes (`BeforeDelete`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Graceful {
    /// Delete the key now (a grace period of 0).
    Now,
    /// Set `deletionTimestamp` to now + `grace` and `deletionGracePeriodSeconds`.
    Mark(i64),
    /// Already terminating with a grace period no longer than this one: nothing changes.
    Unchanged,
}

/// The graceful deletion rule: 0 deletes now; a pod already terminating keeps its
/// deadline unless this delete asks for a shorter grace period.
pub fn graceful_delete(meta: &ObjectMeta, grace: i64) -> Graceful {
    if grace <= 0 {
        return Graceful::Now;
    }
    match (
        meta.deletion_timestamp.as_ref(),
        deletion_grace_period(meta),
    ) {
        (Some(_), Some(current)) if current <= grace => Graceful::Unchanged,
        _ => Graceful::Mark(grace),
    }
}

/// Marks `meta` as terminating gracefully: `deletionTimestamp` = `now` + `grace`
/// seconds (the moment it may be deleted without its kubelet), and
/// `deletionGracePeriodSeconds`.
pub fn start_graceful_deletion(meta: &mut ObjectMeta, grace: i64, now: SystemTime) {
    let deadline = now + Duration::from_secs(grace.max(0).unsigned_abs());
    meta.deletion_timestamp = Some(humantime::format_rfc3339_seconds(deadline).to_string());
    meta.extra.insert(
        DELETION_GRACE_PERIOD_FIELD.to_string(),
        serde_json::Value::from(grace),
    );
}

/// How long a gracefully terminating object still has before anyone but its kubelet may
/// delete it: `None` when it is not terminating gracefully or its deadline has passed.
pub fn grace_remaining(meta: &ObjectMeta, now: SystemTime) -> Option<Duration> {
    deletion_grace_period(meta).filter(|g| *g > 0)?;
    let deadline = humantime::parse_rfc3339_weak(meta.deletion_timestamp.as_deref()?).ok()?;
    deadline.duration_since(now).ok().filter(|d| !d.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(host: &str, phase: PodPhase, spec_grace: Option<i64>) -> Pod {
        let mut pod = Pod::default();
        pod.spec.host = host.to_string();
        pod.status = Some(crate::api::PodStatus {
            phase,
            ..Default::default()
        });
        if let Some(grace) = spec_grace {
            pod.spec.extra.insert(
                "terminationGracePeriodSeconds".into(),
                serde_json::Value::from(grace),
            );
        }
        pod
    }

    #[test]
    fn only_a_running_pods_delete_is_graceful() {
        assert_eq!(pod_grace_period(&pod("", PodPhase::Pending, None), None), 0);
        assert_eq!(
            pod_grace_period(&pod("n", PodPhase::Failed, None), Some(10)),
            0
        );
        assert_eq!(
            pod_grace_period(&pod("n", PodPhase::Running, None), None),
            30
        );
        assert_eq!(
            pod_grace_period(&pod("n", PodPhase::Running, Some(5)), None),
            5
        );
        assert_eq!(
            pod_grace_period(&pod("n", PodPhase::Running, Some(5)), Some(0)),
            0
        );
    }

    #[test]
    fn a_terminating_pod_keeps_its_deadline_unless_asked_for_a_shorter_one() {
        let mut meta = ObjectMeta::default();
        assert_eq!(graceful_delete(&meta, 30), Graceful::Mark(30));
        assert_eq!(graceful_delete(&meta, 0), Graceful::Now);
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        start_graceful_deletion(&mut meta, 30, now);
        assert_eq!(deletion_grace_period(&meta), Some(30));
        assert_eq!(graceful_delete(&meta, 30), Graceful::Unchanged);
        assert_eq!(graceful_delete(&meta, 5), Graceful::Mark(5));
        assert_eq!(
            grace_remaining(&meta, now + Duration::from_secs(10)),
            Some(Duration::from_secs(20))
        );
        assert_eq!(grace_remaining(&meta, now + Duration::from_secs(30)), None);
        assert_eq!(grace_remaining(&ObjectMeta::default(), now), None);
    }
}
