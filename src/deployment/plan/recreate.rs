//! Kubernetes' `pkg/controller/deployment/recreate.go`: the `Recreate` strategy, every
//! old ReplicaSet to 0, then (once no old pod runs, `oldPodsRunning`) the new one to
//! `replicas`. Pure.

use std::sync::Arc;

use crate::api::PodPhase;
use crate::informer::CachedPod;

use super::util::deployment_complete;
use super::Rollout;

/// `oldPodsRunning`: an old ReplicaSet still reports pods, or has not settled (kcm), or
/// a pod of one that is neither Succeeded nor Failed remains.
pub fn old_pods_running(r: &Rollout, pods: &[Arc<CachedPod>]) -> bool {
    let old = r.old();
    if old.iter().any(|i| {
        let rs = &r.rss[*i];
        rs.status.replicas > 0 || rs.status.observed_generation < rs.metadata.generation
    }) {
        return true;
    }
    pods.iter().any(|pod| {
        let Some(owner) = pod.controller.as_deref() else {
            return false;
        };
        let of_old = old
            .iter()
            .any(|i| *owner.uid == r.rss[*i].metadata.uid && &*owner.kind == "ReplicaSet");
        of_old && !matches!(pod.phase, PodPhase::Succeeded | PodPhase::Failed)
    })
}

/// `rolloutRecreate`: every old ReplicaSet to 0; wait until no old pod runs; only then
/// create the new ReplicaSet and scale it to `replicas`.
pub fn rollout_recreate(r: &mut Rollout, pods: &[Arc<CachedPod>]) -> Option<u64> {
    r.sync_revision(false);
    let mut scaled = false;
    for i in r.active(&r.old()) {
        scaled |= r.scale_and_record(i, 0);
    }
    if scaled || old_pods_running(r, pods) {
        return r.sync_rollout_status();
    }
    if r.new.is_none() {
        r.sync_revision(true);
    }
    if let Some(new) = r.new {
        let replicas = r.d.replicas();
        r.scale_and_record(new, replicas);
    }
    if deployment_complete(&r.d, &r.d.status) {
        r.cleanup();
    }
    r.sync_rollout_status()
}
