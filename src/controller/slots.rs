//! The pure parts of Kubernetes' `pkg/controller/controller_utils.go` that every replica
//! controller shares: the names of replica slots, the order in which surplus pods are
//! deleted (`ActivePods`), slow-start batch sizes (`slowStartBatch`) and the pod a create
//! writes (`GetPodFromTemplate`), made once for all of a sync's creates ([`PodStamp`]).
//! No IO.
//!
//! Slot names are kcm's, not Kubernetes': replica slot `i` of controller `uid` always gets
//! the same name, so a create is idempotent (docs/departures.md, "manager: creates").

use std::collections::HashSet;
use std::sync::Arc;

use crate::api::{ObjectMeta, Pod, PodPhase, PodStatus, PodTemplateSpec};
use crate::informer::CachedPod;
use crate::registry::{Filled, Stamp};

/// Characters of generated name suffixes (Kubernetes' alphabet: no vowels, no 0/1/3).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
const SUFFIX_LEN: usize = 5;

/// The name of replica slot `slot` of the controller with `uid`: `{controller}-{5 chars}`.
/// The same slot always gets the same name, which makes creates idempotent. Two slots can
/// share a name (there are 27^5 suffixes); [`SlotNames`] skips the repeats.
pub fn pod_name(controller: &str, uid: &str, slot: u64) -> String {
    named(controller, &suffix(uid, slot))
}

/// The suffix of slot `slot`'s name.
fn suffix(uid: &str, slot: u64) -> [u8; SUFFIX_LEN] {
    // FNV-1a: stable across processes, versions and platforms (std's hasher is not).
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in uid.bytes().chain(*b"/").chain(slot.to_le_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let mut suffix = [0; SUFFIX_LEN];
    for c in &mut suffix {
        *c = SUFFIX_ALPHABET[(hash % SUFFIX_ALPHABET.len() as u64) as usize];
        hash /= SUFFIX_ALPHABET.len() as u64;
    }
    suffix
}

/// `{controller}-{suffix}`.
fn named(controller: &str, suffix: &[u8; SUFFIX_LEN]) -> String {
    let mut name = String::with_capacity(controller.len() + 1 + SUFFIX_LEN);
    name.push_str(controller);
    name.push('-');
    name.extend(suffix.iter().map(|&c| char::from(c)));
    name
}

/// A controller's slot sequence: the distinct names of slots 0, 1, 2, ... in order, so that
/// "the first n slots" always means n different names.
pub struct SlotNames<'a> {
    controller: &'a str,
    uid: &'a str,
    next_slot: u64,
    /// The suffixes given so far (a name differs from another by its suffix alone).
    seen: HashSet<[u8; SUFFIX_LEN]>,
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
            let suffix = suffix(self.uid, self.next_slot);
            self.next_slot += 1;
            if self.seen.insert(suffix) {
                return Some(named(self.controller, &suffix));
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

/// Sorts active pods so that the ones to delete first come first: unassigned before
/// assigned, Pending before Unknown before Running, newer before older, then by name
/// (PR #6992's rule).
pub fn rank_for_deletion(pods: &mut [Arc<CachedPod>]) {
    pods.sort_by(|a, b| {
        a.assigned()
            .cmp(&b.assigned())
            .then(phase_rank(a.phase).cmp(&phase_rank(b.phase)))
            // Newer first.
            .then(b.creation_timestamp.cmp(&a.creation_timestamp))
            .then(a.name.cmp(&b.name))
    });
}

/// Slow start as a window of writes in flight: Kubernetes' `slowStartBatch` (batches of 1,
/// 2, 4, ... stopping at the first failure) without the barrier between its batches. The
/// window opens at `first` (1 for a new scale-up) and grows by one with each write that
/// succeeds, so it doubles with each round of writes as the batches did, up to `limit`
/// (`--burst-replicas`); a write that completes lets the next one start at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowStart {
    size: usize,
    limit: usize,
}

impl SlowStart {
    /// A window of `first` writes in flight (at least 1), growing up to `limit`.
    pub fn new(first: usize, limit: usize) -> SlowStart {
        let limit = limit.max(1);
        SlowStart {
            size: first.clamp(1, limit),
            limit,
        }
    }

    /// How many writes may be in flight now.
    pub fn size(self) -> usize {
        self.size
    }

    /// A write succeeded: one more may be in flight, up to the limit.
    pub fn succeeded(&mut self) {
        self.size = (self.size + 1).min(self.limit);
    }
}

/// Where a phase ranks for deletion: Pending first, then Unknown, then Running.
pub fn phase_rank(phase: PodPhase) -> u8 {
    match phase {
        PodPhase::Pending => 0,
        PodPhase::Unknown => 1,
        PodPhase::Running => 2,
        PodPhase::Succeeded | PodPhase::Failed => 3,
    }
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

/// The pods one sync creates, all alike but for their names: the pod made once, with its
/// encoding ([`Stamp`]) and its cached form. A create takes a name ([`PodStamp::pod`]).
#[derive(Debug)]
pub struct PodStamp {
    stamp: Stamp<Pod>,
    /// The cached form of each, but for its name, uid and creation time.
    cached: CachedPod,
}

impl PodStamp {
    /// The stamp of `pod` (its name is ignored).
    pub fn new(pod: Pod) -> Arc<PodStamp> {
        let cached = CachedPod::of_written(&pod);
        Arc::new(PodStamp {
            stamp: Stamp::new(pod),
            cached,
        })
    }

    /// The pod named `name`.
    pub fn pod(self: &Arc<Self>, name: String) -> NewPod {
        NewPod {
            stamp: self.clone(),
            name,
        }
    }
}

/// A pod a sync creates: its stamp and its name.
#[derive(Clone, Debug)]
pub struct NewPod {
    stamp: Arc<PodStamp>,
    name: String,
}

impl NewPod {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the registry encodes it from ([`crate::registry::Registry::encode_create_stamped`]).
    pub fn stamp(&self) -> &Stamp<Pod> {
        &self.stamp.stamp
    }

    /// The pod itself, for a writer that sends it whole (an API client).
    pub fn into_pod(self) -> Pod {
        self.stamp.stamp.object(&self.name)
    }

    /// Its cached form once created with what the create `filled` in.
    pub fn cached(&self, filled: &Filled) -> CachedPod {
        (self.stamp.cached).stamped(&self.name, &filled.uid, &filled.creation_timestamp)
    }
}

impl From<Pod> for NewPod {
    fn from(pod: Pod) -> NewPod {
        let name = pod.metadata.name.clone();
        PodStamp::new(pod).pod(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{self, ReplicaSet};

    #[tokio::test]
    async fn a_stamped_pods_cached_form_is_that_of_the_document_it_stores() {
        // Encoding asks no etcd: nothing listens on port 1.
        let client = etcd_client::Client::connect(["http://127.0.0.1:1"], None)
            .await
            .unwrap();
        let registry = crate::registry::Registry::new(&client, "/registry").unwrap();
        let rs: ReplicaSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "rs-uid"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx",
                        "ports": [{"name": "http", "containerPort": 80}]}]}}}
        }))
        .unwrap();
        let stamp = PodStamp::new(crate::replicaset::new_pod(&rs, String::new()));
        for name in ["web-bcdfg", "web-hjklm"] {
            let pod = stamp.pod(name.to_string());
            let (encoded, filled) = registry.encode_create_stamped(pod.stamp(), name).unwrap();
            let stored: Pod = api::decode("/registry", encoded.key(), encoded.value(), 0).unwrap();
            assert_eq!(stored.metadata.name, name);
            assert_eq!(pod.cached(&filled), CachedPod::from(&stored));
        }
    }
}
