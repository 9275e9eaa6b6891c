//! The pure core of a Deployment sync: Kubernetes' `syncDeployment` and its parts over
//! (deployment, its ReplicaSets, their pods, now), returning the writes to make. No IO.
//!
//! Mirrors `pkg/controller/deployment/deployment_controller.go` (`syncDeployment`, here
//! [`plan`]); each of its parts sits in the file named after Kubernetes' own:
//!
//! | Kubernetes | kcm |
//! |---|---|
//! | `deployment_controller.go` (`syncDeployment`) | this file: [`plan`], [`Plan`], [`Rollout`] |
//! | `controller_ref_manager.go` (`ClaimReplicaSets`) | `plan/claim.rs` |
//! | `sync.go` | `plan/sync.rs` |
//! | `rolling.go` | `plan/rolling.rs` |
//! | `recreate.go` | `plan/recreate.rs` |
//! | `progress.go` | `plan/progress.rs` |
//! | `util/deployment_util.go` | `plan/util.rs` (the owner check, [`equal_ignore_hash`] and [`revision`] stay here) |
//!
//! `rollback.go` (the deprecated `spec.rollbackTo`) has no counterpart: `kcm rollout
//! undo` rolls back from the client, as kubectl does.
//!
//! One step per sync, as Kubernetes: a sync makes at most one kind of change to the
//! ReplicaSets' sizes (the new one up, or old ones down, or a proportional rescale), then
//! writes the status. The functions work on copies ([`Rollout`]) and record what they
//! changed; [`plan`] turns that into a [`Plan`].
//!
//! kcm's two rules beyond Kubernetes (phase2.md §6.2), which make "active pods ≤
//! replicas + maxSurge" and "ready pods ≥ replicas − maxUnavailable" hold at every etcd
//! revision, where Kubernetes bounds only the sum of ReplicaSet sizes (kubernetes #95498,
//! #107920):
//! - occupancy: a ReplicaSet occupies `max(spec.replicas, status.replicas)`, and the new
//!   ReplicaSet does not grow while any ReplicaSet of the deployment is unsettled
//!   (`status.observedGeneration < metadata.generation`, or `status.replicas >
//!   spec.replicas`) — [`new_rs_new_replicas`];
//! - availability: a ReplicaSet counts `min(status.availableReplicas, spec.replicas)`
//!   available — [`reconcile_old_replica_sets`], [`cleanup_unhealthy_replicas`],
//!   [`scale_down_old_replica_sets_for_rolling_update`].

mod claim;
mod progress;
mod recreate;
mod rolling;
mod sync;
mod util;

use std::sync::Arc;

use crate::api::{self, Deployment, OwnerReference, ReplicaSet};
use crate::informer::CachedPod;

pub use claim::{claim, Claims};
pub use recreate::{old_pods_running, rollout_recreate};
pub use rolling::{
    cleanup_unhealthy_replicas, reconcile_new_replica_set, reconcile_old_replica_sets,
    rollout_rolling, scale_down_old_replica_sets_for_rolling_update,
};
pub use sync::sync_scale;
use util::{by_creation, size};
pub use util::{
    counted_available, deployment_complete, deployment_progressing, deployment_timed_out,
    epoch_seconds, get_proportion, new_condition, new_rs_new_replicas, occupancy, rfc3339,
    set_condition, set_new_replica_set_annotations, unsettled,
};

/// The `apiVersion` a Deployment's controller reference names.
pub const API_VERSION: &str = "apps/v1";
/// The `kind` a Deployment's controller reference names.
pub const KIND: &str = "Deployment";

/// The controller reference a deployment writes into its ReplicaSets.
pub fn controller_ref(d: &Deployment) -> OwnerReference {
    OwnerReference {
        api_version: API_VERSION.to_string(),
        kind: KIND.to_string(),
        name: d.metadata.name.clone(),
        uid: d.metadata.uid.clone(),
        controller: Some(true),
        block_owner_deletion: Some(true),
        ..OwnerReference::default()
    }
}

/// Whether `rs`'s controller reference names `d` by kind, name and uid
/// ([`api::is_controlled_by`], which `kcm rollout` shares).
pub fn owns(d: &Deployment, rs: &ReplicaSet) -> bool {
    api::is_controlled_by(rs, d)
}

/// The `deployment.kubernetes.io/revision` of an object ([`api::revision`]); 0 when
/// absent or unreadable.
pub fn revision(annotations: &std::collections::BTreeMap<String, String>) -> i64 {
    api::revision(annotations).unwrap_or(0)
}

pub use crate::api::equal_ignore_hash;

// ---------------------------------------------------------------------------------------
// The working copy a sync plans on

/// What one sync decided: the writes, in order (create, updates, deletes, then the
/// deployment), and when to look again.
#[derive(Debug, Default, Clone)]
pub struct Plan {
    /// The new ReplicaSet to create (create-if-absent).
    pub create: Option<ReplicaSet>,
    /// ReplicaSets to write over the revision they were read at (scales, annotations).
    pub updates: Vec<ReplicaSet>,
    /// Old ReplicaSets to delete at the revision they were read at (`cleanupDeployment`).
    pub deletes: Vec<ReplicaSet>,
    /// The deployment with its new annotations and status, when they changed.
    pub deployment: Option<Deployment>,
    /// Sync again after this many seconds (`requeueStuckDeployment`).
    pub requeue_after: Option<u64>,
}

/// The deployment and its ReplicaSets as a sync changes them.
#[derive(Debug, Clone)]
pub struct Rollout {
    /// The deployment as read.
    stored: Deployment,
    /// Its working copy (annotations and status change).
    pub d: Deployment,
    /// Its ReplicaSets, working copies.
    pub rss: Vec<ReplicaSet>,
    /// The new ReplicaSet's index in `rss`.
    pub new: Option<usize>,
    /// `rss[new]` does not exist yet: it is to be created.
    created: bool,
    /// Indices of ReplicaSets changed, in the order first changed.
    touched: Vec<usize>,
    /// Indices of ReplicaSets to delete.
    deleted: Vec<usize>,
    /// Seconds since the Unix epoch.
    pub now: i64,
    /// The pod-template-hash of the deployment's template as stored (its raw JSON), when
    /// the caller has it; else the hash of the typed template ([`api::template_hash`]).
    pub template_hash: Option<String>,
}

impl Rollout {
    /// A sync of `d` over its (claimed) ReplicaSets at `now`.
    pub fn new(d: &Deployment, rss: Vec<ReplicaSet>, now: i64) -> Rollout {
        let mut rss = rss;
        rss.sort_by(by_creation);
        Rollout {
            stored: d.clone(),
            d: d.clone(),
            rss,
            new: None,
            created: false,
            touched: Vec::new(),
            deleted: Vec::new(),
            now,
            template_hash: None,
        }
    }

    fn touch(&mut self, i: usize) {
        if !self.touched.contains(&i) {
            self.touched.push(i);
        }
    }

    /// The new ReplicaSet, if any.
    pub fn new_rs(&self) -> Option<&ReplicaSet> {
        self.new.map(|i| &self.rss[i])
    }

    /// Indices of the old ReplicaSets (all but the new), oldest first.
    fn old(&self) -> Vec<usize> {
        (0..self.rss.len())
            .filter(|i| Some(*i) != self.new)
            .collect()
    }

    /// Indices of the ReplicaSets with `spec.replicas > 0` among `indices`
    /// (`FilterActiveReplicaSets`).
    fn active(&self, indices: &[usize]) -> Vec<usize> {
        indices
            .iter()
            .copied()
            .filter(|i| size(&self.rss[*i]) > 0)
            .collect()
    }

    fn all(&self) -> Vec<usize> {
        (0..self.rss.len()).collect()
    }

    /// The writes this sync planned.
    pub fn into_plan(self, requeue_after: Option<u64>) -> Plan {
        let Rollout {
            stored,
            d,
            rss,
            new,
            created,
            touched,
            deleted,
            ..
        } = self;
        let create = new.filter(|_| created).map(|i| rss[i].clone());
        let updates = touched
            .iter()
            .filter(|i| !(created && Some(**i) == new))
            .map(|i| rss[*i].clone())
            .collect();
        let deletes = deleted.iter().map(|i| rss[*i].clone()).collect();
        let changed =
            d.status != stored.status || d.metadata.annotations != stored.metadata.annotations;
        Plan {
            create,
            updates,
            deletes,
            deployment: changed.then_some(d),
            requeue_after,
        }
    }
}

/// `syncDeployment` after the claim: the writes for `d` over its ReplicaSets `rss` and
/// their pods `pods` at `now` (seconds since the epoch), a new ReplicaSet named by the
/// hash of the typed template.
pub fn plan(d: &Deployment, rss: Vec<ReplicaSet>, pods: &[Arc<CachedPod>], now: i64) -> Plan {
    plan_with_hash(d, rss, pods, now, None)
}

/// [`plan`], a new ReplicaSet named by `template_hash` when given: the
/// [`api::pod_template_hash`] of the deployment's template as stored, which differs from
/// the typed template's where the stored JSON has what kcm's model leaves out (a
/// `creationTimestamp: null`, an empty list).
pub fn plan_with_hash(
    d: &Deployment,
    rss: Vec<ReplicaSet>,
    pods: &[Arc<CachedPod>],
    now: i64,
    template_hash: Option<String>,
) -> Plan {
    let mut r = Rollout::new(d, rss, now);
    r.template_hash = template_hash;
    if d.metadata.deletion_timestamp.is_some() {
        // `syncStatusOnly`: no ReplicaSet writes while the deployment is deleted.
        r.find_new();
        r.sync_status();
        r.touched.clear();
        return r.into_plan(None);
    }
    r.check_paused_conditions();
    if d.spec.paused {
        sync_scale(&mut r);
        return r.into_plan(None);
    }
    let mut probe = r.clone();
    probe.find_new();
    if probe.is_scaling_event() {
        sync_scale(&mut r);
        return r.into_plan(None);
    }
    let requeue = if d.is_rolling_update() {
        rollout_rolling(&mut r)
    } else {
        rollout_recreate(&mut r, pods)
    };
    r.into_plan(requeue)
}

#[cfg(test)]
mod tests;
