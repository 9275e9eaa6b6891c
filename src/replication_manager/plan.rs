//! The pure core of a sync: the decision over one view of a controller's pods and the pod a
//! create writes. No IO. Slot names, the deletion ranking and slow-start batches are every
//! replica controller's (`controller::slots`).
//!
//! Invariant (the decision): the count of active pods and the free slot names come from the
//! same view, and the names to create are the first free names of the controller's slot
//! sequence, never more than `spec.replicas` minus the active count. docs/invariants.md
//! gives the argument that this bounds the controller's pods by its largest
//! `spec.replicas`, whatever two managers see.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::api::{Pod, ReplicationController};
use crate::controller::{free_slots, pod_from_template, rank_for_deletion};
use crate::informer::{CachedPod, Namespace};

use super::CREATED_BY_ANNOTATION;

/// `filterActivePods`: drops Succeeded and Failed pods, pods being deleted (a
/// `deletionTimestamp`: terminating gracefully, so a replacement is made at once, as
/// Kubernetes' `FilterActivePods`; 2014 had no graceful deletion), and (kcm's coexistence
/// rule with ReplicaSets) pods that carry a controller reference: those belong to their
/// controller, and a ReplicationController, which owns by selector alone, neither counts
/// nor deletes them.
pub fn filter_active_pods(mut pods: Vec<Arc<CachedPod>>) -> Vec<Arc<CachedPod>> {
    pods.retain(|pod| pod.is_active() && !pod.deleting && pod.controller.is_none());
    pods
}

/// What one sync will do, decided from one view before anything is written.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The controller's active pods in the view (2014's `len(filterActivePods(pods))`).
    pub active: usize,
    /// Of those, the ready ones (for `status.readyReplicas`).
    pub ready: usize,
    /// The replica slots to create, by name, in slot order; at most the decision's limit.
    pub creates: Vec<String>,
    /// The pods to delete, lowest rank first; each is deleted only if it is still at the
    /// resourceVersion it was ranked at. At most the decision's limit.
    pub deletes: Vec<Arc<CachedPod>>,
}

impl Decision {
    /// Whether the decision writes pods (a status write alone does not count).
    pub fn writes_pods(&self) -> bool {
        !self.creates.is_empty() || !self.deletes.is_empty()
    }
}

/// `syncReplicationController`'s arithmetic over one view of the controller's namespace
/// (`None`: it holds nothing): count the active pods the selector matches (those without a
/// controller reference); create the
/// first `spec.replicas - active` free names of the slot sequence, or delete the
/// `active - spec.replicas` lowest-ranked active pods; either capped at `limit`.
///
/// Taking the count and the free names from the same view is what bounds the pods: see
/// the module header.
pub fn decide(
    controller: &ReplicationController,
    pods: Option<&Namespace<CachedPod>>,
    limit: usize,
) -> Decision {
    let selector = controller.spec.selector.as_selector();
    let active = filter_active_pods(pods.map(|ns| ns.select(&selector)).unwrap_or_default());
    let replicas = usize::try_from(controller.spec.replicas).unwrap_or(0);
    let mut decision = Decision {
        active: active.len(),
        ready: active.iter().filter(|pod| pod.ready).count(),
        creates: Vec::new(),
        deletes: Vec::new(),
    };
    // A controller in deletion (a foreground or orphaning delete, or someone's finalizer)
    // gets its status written and nothing else, as Kubernetes' managers do.
    if controller.metadata.deletion_timestamp.is_some() {
        return decision;
    }
    match active.len().cmp(&replicas) {
        Ordering::Less => {
            let need = (replicas - active.len()).min(limit);
            let is_taken = |name: &str| pods.is_some_and(|ns| ns.is_taken(name));
            let meta = &controller.metadata;
            decision.creates = free_slots(&meta.name, &meta.uid, is_taken, need);
        }
        Ordering::Greater => {
            let mut ranked = active;
            rank_for_deletion(&mut ranked);
            ranked.truncate((ranked.len() - replicas).min(limit));
            decision.deletes = ranked;
        }
        Ordering::Equal => {}
    }
    decision
}

/// A new pod for `controller` from its template: exactly the template's labels and
/// spec, the created-by annotation, phase Pending.
pub fn new_pod_from_template(controller: &ReplicationController, name: String) -> Pod {
    let mut pod = pod_from_template(
        controller.spec.template.as_ref(),
        &controller.metadata.namespace,
        name,
    );
    pod.metadata.annotations.insert(
        CREATED_BY_ANNOTATION.to_string(),
        format!(
            r#"{{"kind":"ReplicationController","namespace":"{}","name":"{}","uid":"{}"}}"#,
            controller.metadata.namespace, controller.metadata.name, controller.metadata.uid
        ),
    );
    pod
}
