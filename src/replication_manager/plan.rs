//! The pure core of a sync: replica slot names, the decision over one view of a controller's
//! pods, deletion ranking, slow-start batches and the pod a create writes. No IO.
//!
//! Invariant (the decision): the count of active pods and the free slot names come from the
//! same view, and the names to create are the first free names of the controller's slot
//! sequence, never more than `spec.replicas` minus the active count. docs/invariants.md
//! gives the argument that this bounds the controller's pods by its largest
//! `spec.replicas`, whatever two managers see.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::sync::Arc;

use crate::api::{ObjectMeta, Pod, PodPhase, PodStatus, PodTemplateSpec, ReplicationController};
use crate::informer::{CachedPod, Namespace};

use super::CREATED_BY_ANNOTATION;

/// Characters of generated name suffixes (Kubernetes' alphabet: no vowels, no 0/1/3).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
const SUFFIX_LEN: usize = 5;

/// The name of replica slot `slot` of the controller with `uid`: `{controller}-{5 chars}`.
/// The same slot always gets the same name, which makes creates idempotent. Two slots can
/// share a name (there are 27^5 suffixes); [`SlotNames`] skips the repeats.
pub fn pod_name(controller: &str, uid: &str, slot: u64) -> String {
    // FNV-1a: stable across processes, versions and platforms (std's hasher is not).
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in uid.bytes().chain(*b"/").chain(slot.to_le_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let mut suffix = String::with_capacity(SUFFIX_LEN);
    for _ in 0..SUFFIX_LEN {
        suffix.push(SUFFIX_ALPHABET[(hash % SUFFIX_ALPHABET.len() as u64) as usize] as char);
        hash /= SUFFIX_ALPHABET.len() as u64;
    }
    format!("{controller}-{suffix}")
}

/// A controller's slot sequence: the distinct names of slots 0, 1, 2, ... in order, so that
/// "the first n slots" always means n different names.
pub struct SlotNames<'a> {
    controller: &'a str,
    uid: &'a str,
    next_slot: u64,
    seen: HashSet<String>,
}

impl<'a> SlotNames<'a> {
    /// The slot sequence of the controller named `controller` with `uid`.
    pub fn new(controller: &'a str, uid: &'a str) -> Self {
        SlotNames {
            controller,
            uid,
            next_slot: 0,
            seen: HashSet::new(),
        }
    }
}

impl Iterator for SlotNames<'_> {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        loop {
            let name = pod_name(self.controller, self.uid, self.next_slot);
            self.next_slot += 1;
            if self.seen.insert(name.clone()) {
                return Some(name);
            }
        }
    }
}

/// The first `n` names of the controller's slot sequence that no pod holds.
pub fn free_slots(
    controller: &str,
    uid: &str,
    is_taken: impl Fn(&str) -> bool,
    n: usize,
) -> Vec<String> {
    SlotNames::new(controller, uid)
        .filter(|name| !is_taken(name))
        .take(n)
        .collect()
}

/// `filterActivePods`: drops Succeeded and Failed pods, and (kcm's coexistence rule with
/// ReplicaSets) pods that carry a controller reference: those belong to their controller,
/// and a ReplicationController, which owns by selector alone, neither counts nor deletes
/// them.
pub fn filter_active_pods(mut pods: Vec<Arc<CachedPod>>) -> Vec<Arc<CachedPod>> {
    pods.retain(|pod| pod.is_active() && pod.controller.is_none());
    pods
}

/// What one sync will do, decided from one view before anything is written.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The controller's active pods in the view (2014's `len(filterActivePods(pods))`).
    pub active: usize,
    /// Of those, the ready ones (for `status.readyReplicas`).
    pub ready: usize,
    /// The replica slots to create, by name, in slot order; at most the burst limit.
    pub creates: Vec<String>,
    /// The pods to delete, lowest rank first; each is deleted only if it is still at the
    /// resourceVersion it was ranked at. At most the burst limit.
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
/// `active - spec.replicas` lowest-ranked active pods; either capped at `burst`.
///
/// Taking the count and the free names from the same view is what bounds the pods: see
/// the module header.
pub fn decide(
    controller: &ReplicationController,
    pods: Option<&Namespace<CachedPod>>,
    burst: usize,
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
            let need = (replicas - active.len()).min(burst);
            let is_taken = |name: &str| pods.is_some_and(|ns| ns.is_taken(name));
            let meta = &controller.metadata;
            decision.creates = free_slots(&meta.name, &meta.uid, is_taken, need);
        }
        Ordering::Greater => {
            let mut ranked = active;
            rank_for_deletion(&mut ranked);
            ranked.truncate((ranked.len() - replicas).min(burst));
            decision.deletes = ranked;
        }
        Ordering::Equal => {}
    }
    decision
}

/// Sorts active pods so that the ones to delete first come first: unassigned before
/// assigned, Pending before Unknown before Running, newer before older, then by name
/// (PR #6992's rule).
pub fn rank_for_deletion(pods: &mut [Arc<CachedPod>]) {
    fn phase_rank(phase: PodPhase) -> u8 {
        match phase {
            PodPhase::Pending => 0,
            PodPhase::Unknown => 1,
            PodPhase::Running => 2,
            PodPhase::Succeeded | PodPhase::Failed => 3,
        }
    }
    pods.sort_by(|a, b| {
        a.assigned
            .cmp(&b.assigned)
            .then(phase_rank(a.phase).cmp(&phase_rank(b.phase)))
            // RFC 3339 timestamps of one format sort as strings; newer first.
            .then(b.creation_timestamp.cmp(&a.creation_timestamp))
            .then(a.name.cmp(&b.name))
    });
}

/// Sizes of slow-start batches for `n` creates beginning at `first`: first, 2 first,
/// 4 first, ... (the ReplicaSet rule, which starts at 1).
pub fn slow_start_batches(first: usize, n: usize) -> Vec<usize> {
    let mut batches = Vec::new();
    let (mut size, mut left) = (first.max(1), n);
    while left > 0 {
        let batch = size.min(left);
        batches.push(batch);
        left -= batch;
        size *= 2;
    }
    batches
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

/// A new pod `namespace/name` from `template` (a missing one is empty): exactly the
/// template's labels, annotations and spec, unbound, phase Pending. What every
/// controller's create writes, before it adds how it owns the pod.
pub fn pod_from_template(template: Option<&PodTemplateSpec>, namespace: &str, name: String) -> Pod {
    let template = template.cloned().unwrap_or_default();
    let mut spec = template.spec;
    spec.host.clear();
    Pod {
        metadata: ObjectMeta {
            name,
            namespace: namespace.to_string(),
            labels: template.metadata.labels,
            annotations: template.metadata.annotations,
            ..ObjectMeta::default()
        },
        spec,
        status: Some(PodStatus {
            phase: PodPhase::Pending,
            ..PodStatus::default()
        }),
        ..Pod::default()
    }
}
