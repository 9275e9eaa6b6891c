//! What an informer's store keeps of each object: the [`Cached`] form of a kind. Pods
//! are kept as a compact [`CachedPod`]; controllers, services and endpoints whole. Every
//! form tells the garbage collector its [`Ownership`].

use std::num::NonZeroU32;
use std::sync::Arc;

use compact_str::CompactString;

use crate::api::{
    controller_of, Deployment, Endpoints, IntOrString, Object, ObjectMeta, OwnerReference, Pod,
    PodPhase, ReplicaSet, ReplicationController, Service,
};
use crate::labels::Set;

use super::intern::Interner;

/// The form in which an informer stores objects of one kind.
pub trait Cached: Send + Sync + Sized + 'static {
    /// The stored kind.
    type Object: Object;
    /// Builds the cached form of a decoded object.
    fn from_object(object: Self::Object) -> Self;
    /// The object's name.
    fn name(&self) -> &str;
    /// The object's name as an `Arc`.
    fn shared_name(&self) -> Arc<str> {
        self.name().into()
    }
    /// The labels the store groups and indexes items by; `None` for no label index.
    fn labels(&self) -> Option<&Arc<Set>> {
        None
    }
    /// Replaces the labels with an equal, shared copy (called before the item is stored).
    fn share_labels(&mut self, _labels: Arc<Set>) {}
    /// Replaces the namespace with the store's copy of it.
    fn share_namespace(&mut self, _namespace: &Arc<str>) {}
    /// Replaces the values many items hold alike with the store's shared copies.
    fn intern(&mut self, _interners: &mut Interners) {}
    /// The item's `metadata.resourceVersion`.
    fn resource_version(&self) -> i64;
    /// What the garbage collector reads of the item.
    fn ownership(&self) -> Ownership;
}

/// The values the items of one informer's store hold alike, one copy of each.
#[derive(Default)]
pub struct Interners {
    ports: Interner<PodPorts>,
    controllers: Interner<ControllerRef>,
    strings: Interner<str>,
}

/// What the garbage collector reads of any object: its identity, its owners and where
/// its deletion stands.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ownership {
    pub uid: String,
    pub resource_version: i64,
    pub owners: Vec<OwnerReference>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    pub finalizers: Vec<String>,
}

impl Ownership {
    pub fn of(meta: &ObjectMeta) -> Ownership {
        Ownership {
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.map_or(0, |rv| rv.0),
            owners: meta.owner_references.clone(),
            deleting: meta.deletion_timestamp.is_some(),
            finalizers: meta.finalizers.clone(),
        }
    }
}

/// Implements [`Cached`] for a kind whose objects are few and small: the store keeps them
/// whole, remembering the spec read, so a write of one can tell a spec change without a
/// read.
macro_rules! kept_whole {
    ($($ty:ty),*) => {$(
        impl Cached for $ty {
            type Object = $ty;

            fn from_object(mut object: $ty) -> Self {
                crate::api::remember_spec(&mut object);
                object
            }

            fn name(&self) -> &str {
                &self.metadata.name
            }

            fn resource_version(&self) -> i64 {
                self.metadata.resource_version.map_or(0, |rv| rv.0)
            }

            fn ownership(&self) -> Ownership {
                Ownership::of(&self.metadata)
            }
        }
    )*};
}

kept_whole!(
    Service,
    ReplicationController,
    ReplicaSet,
    Endpoints,
    Deployment
);

/// What the controllers read of a pod.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedPod {
    pub namespace: Arc<str>,
    /// Held inline up to 24 bytes (generated pod names are shorter), so a pod is one
    /// allocation, not two.
    pub name: CompactString,
    /// Shared with every other cached pod that has equal labels.
    pub labels: Arc<Set>,
    pub resource_version: i64,
    pub phase: PodPhase,
    /// `spec.host`: the node the pod is bound to, if any (shared with the node's other
    /// pods).
    pub host: Option<Arc<str>>,
    /// `metadata.creationTimestamp` as seconds since the Unix epoch (its own precision;
    /// kept as text it cost a 32-byte allocation a pod, 3 MiB at 100,000 pods), in 32
    /// bits like the other time below, with no room for a tag: 12 bytes a pod less, and
    /// a time outside 1970 to 2106, or the epoch itself, reads as unknown.
    pub creation_timestamp: Option<NonZeroU32>,
    /// `status.podIP`, when set and non-empty.
    pub pod_ip: Option<Box<str>>,
    /// Shared with every other cached pod that has equal ports (a template's pods).
    pub ports: Arc<PodPorts>,
    /// `metadata.uid` (empty when absent).
    pub uid: Uid,
    /// [`Pod::is_ready`]: the Ready condition is True (or, without one, Running).
    pub ready: bool,
    /// The pod reports a Ready condition that is not True (a 2014 document reports none).
    pub not_ready: bool,
    /// [`Pod::ready_since`] as seconds since the Unix epoch.
    pub ready_since: Option<NonZeroU32>,
    /// The pod's controller reference (`metav1.GetControllerOf`), if it has one (shared
    /// with the controller's other pods).
    pub controller: Option<Arc<ControllerRef>>,
    /// `metadata.deletionTimestamp` is set: the pod is being deleted.
    pub deleting: bool,
    /// The sum of its containers' `restartCount` (for the deletion ranking).
    pub restarts: u32,
    /// Every owner reference and finalizer, for the garbage collector, when the pod has
    /// more than a ReplicaSet controller's reference: `None` for a pod with none (a 2014
    /// pod) or with just the reference a ReplicaSet controller writes (`controller` holds
    /// it), so the common pods cost a pointer.
    pub owned: Option<Box<PodOwnership>>,
}

/// A pod's owner references and finalizers.
#[derive(Clone, Debug, PartialEq)]
pub struct PodOwnership {
    pub owners: Box<[OwnerReference]>,
    pub finalizers: Box<[String]>,
}

/// What the controllers read of a pod's controller reference: its owner by kind, name
/// and uid (the owner is in the pod's namespace).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ControllerRef {
    pub kind: Box<str>,
    pub name: Box<str>,
    pub uid: Box<str>,
}

/// The `apiVersion` a ReplicaSet's controller reference carries (as kcm's ReplicaSet
/// controller and Kubernetes' write it).
const APPS_V1: &str = "apps/v1";

/// Whether `references` is just what a ReplicaSet controller writes: one controller
/// reference to a ReplicaSet, `apps/v1`, with `blockOwnerDeletion`, and nothing else. The
/// pod cache keeps only its kind, name and uid then (`controller`), and rebuilds the rest.
fn just_a_replica_set_controller(references: &[OwnerReference]) -> bool {
    match references {
        [] => true,
        [only] => {
            only.is_controller()
                && only.kind == "ReplicaSet"
                && only.api_version == APPS_V1
                && only.block_owner_deletion == Some(true)
                && only.extra.is_empty()
        }
        _ => false,
    }
}

impl CachedPod {
    /// Whether the pod counts towards a controller's replicas (`filterActivePods`).
    pub fn is_active(&self) -> bool {
        !matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// `spec.host` is set: the pod is bound to a node.
    pub fn assigned(&self) -> bool {
        self.host.is_some()
    }
}

impl From<&Pod> for CachedPod {
    fn from(pod: &Pod) -> CachedPod {
        let meta = &pod.metadata;
        CachedPod {
            namespace: meta.namespace.as_str().into(),
            name: meta.name.as_str().into(),
            labels: Arc::new(meta.labels.clone()),
            resource_version: meta.resource_version.map_or(0, |rv| rv.0),
            phase: pod.phase(),
            host: (!pod.spec.host.is_empty()).then(|| pod.spec.host.as_str().into()),
            creation_timestamp: meta.creation_timestamp.as_deref().and_then(epoch_seconds),
            pod_ip: pod.pod_ip().map(Box::from),
            ports: Arc::new(PodPorts::of(pod)),
            uid: Uid::new(&meta.uid),
            ready: pod.is_ready(),
            not_ready: pod.ready_condition() == Some(false),
            ready_since: pod.ready_since().and_then(epoch_seconds),
            controller: controller_of(meta).map(|r| {
                Arc::new(ControllerRef {
                    kind: r.kind.as_str().into(),
                    name: r.name.as_str().into(),
                    uid: r.uid.as_str().into(),
                })
            }),
            deleting: meta.deletion_timestamp.is_some(),
            restarts: pod.status.as_ref().map_or(0, |status| {
                let total: i64 = status
                    .container_statuses
                    .iter()
                    .map(|c| c.restart_count.max(0))
                    .sum();
                u32::try_from(total).unwrap_or(u32::MAX)
            }),
            owned: {
                let compact = just_a_replica_set_controller(&meta.owner_references);
                (!compact || !meta.finalizers.is_empty()).then(|| {
                    Box::new(PodOwnership {
                        owners: meta.owner_references.clone().into(),
                        finalizers: meta.finalizers.clone().into(),
                    })
                })
            },
        }
    }
}

/// A uid kept compactly: the 16 bytes of a UUID in its canonical text (as kcm and the
/// apiserver make uids), else the text itself. Compare with [`Uid::is`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Uid {
    #[default]
    Empty,
    Uuid([u8; 16]),
    Text(Box<str>),
}

impl Uid {
    pub fn new(text: &str) -> Uid {
        if text.is_empty() {
            return Uid::Empty;
        }
        match uuid::Uuid::try_parse(text) {
            Ok(uuid)
                if uuid
                    .hyphenated()
                    .encode_lower(&mut uuid::Uuid::encode_buffer())
                    == text =>
            {
                Uid::Uuid(uuid.into_bytes())
            }
            _ => Uid::Text(text.into()),
        }
    }

    /// Whether this is the uid `text`.
    pub fn is(&self, text: &str) -> bool {
        *self == Uid::new(text)
    }

    pub fn is_empty(&self) -> bool {
        *self == Uid::Empty
    }
}

impl std::fmt::Display for Uid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Uid::Empty => Ok(()),
            Uid::Uuid(bytes) => uuid::Uuid::from_bytes(*bytes).hyphenated().fmt(f),
            Uid::Text(text) => f.write_str(text),
        }
    }
}

/// Seconds since the Unix epoch of an RFC 3339 time; `None` when unreadable, at the epoch
/// itself or outside what 32 bits hold (1970 to 2106).
fn epoch_seconds(time: &str) -> Option<NonZeroU32> {
    let time = humantime::parse_rfc3339_weak(time).ok()?;
    let seconds = time.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
    u32::try_from(seconds).ok().and_then(NonZeroU32::new)
}

impl Cached for CachedPod {
    type Object = Pod;

    fn from_object(mut pod: Pod) -> Self {
        // The decoded labels move in rather than being copied.
        let labels = std::mem::take(&mut pod.metadata.labels);
        CachedPod {
            labels: Arc::new(labels),
            ..CachedPod::from(&pod)
        }
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn labels(&self) -> Option<&Arc<Set>> {
        Some(&self.labels)
    }

    fn share_labels(&mut self, labels: Arc<Set>) {
        self.labels = labels;
    }

    fn share_namespace(&mut self, namespace: &Arc<str>) {
        self.namespace = namespace.clone();
    }

    fn intern(&mut self, interners: &mut Interners) {
        self.ports = interners.ports.share(&self.ports);
        if let Some(controller) = &self.controller {
            self.controller = Some(interners.controllers.share(controller));
        }
        if let Some(host) = &self.host {
            self.host = Some(interners.strings.share(host));
        }
    }

    fn resource_version(&self) -> i64 {
        self.resource_version
    }

    fn ownership(&self) -> Ownership {
        let (owners, finalizers) = match (self.owned.as_deref(), self.controller.as_deref()) {
            (Some(o), _) => (o.owners.to_vec(), o.finalizers.to_vec()),
            (None, Some(c)) => {
                let reference = OwnerReference {
                    api_version: APPS_V1.to_string(),
                    kind: c.kind.to_string(),
                    name: c.name.to_string(),
                    uid: c.uid.to_string(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                    ..OwnerReference::default()
                };
                (vec![reference], vec![])
            }
            (None, None) => (vec![], vec![]),
        };
        Ownership {
            uid: self.uid.to_string(),
            resource_version: self.resource_version,
            owners,
            deleting: self.deleting,
            finalizers,
        }
    }
}

/// The container ports of a pod, as `findPort` needs them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PodPorts {
    /// The first container's first port.
    pub first: Option<i64>,
    /// Every named port of every container, in order.
    pub named: Box<[(Box<str>, i64)]>,
}

impl PodPorts {
    pub fn of(pod: &Pod) -> PodPorts {
        PodPorts {
            first: pod
                .spec
                .containers
                .first()
                .and_then(|c| c.ports.first())
                .map(|p| p.container_port),
            named: pod
                .spec
                .containers
                .iter()
                .flat_map(|c| &c.ports)
                .filter(|p| !p.name.is_empty())
                .map(|p| (Box::from(p.name.as_str()), p.container_port))
                .collect(),
        }
    }

    /// `findPort`: a number is used as given; a name is looked up among every
    /// container's ports; absent, 0 or "" means the first container's first port.
    pub fn find(&self, container_port: Option<&IntOrString>) -> Option<u16> {
        let port = match container_port {
            None | Some(IntOrString::Int(0)) => self.first.filter(|p| *p > 0),
            Some(IntOrString::String(name)) if name.is_empty() => self.first.filter(|p| *p > 0),
            Some(IntOrString::Int(port)) => Some(*port),
            Some(IntOrString::String(name)) => self
                .named
                .iter()
                .find(|(n, _)| **n == **name)
                .map(|(_, port)| *port),
        };
        port.and_then(|p| u16::try_from(p).ok()).filter(|p| *p > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_kept_in_16_bytes_and_other_uids_as_text() {
        let uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
        assert!(matches!(Uid::new(uuid), Uid::Uuid(_)));
        assert!(Uid::new(uuid).is(uuid) && !Uid::new(uuid).is("x"));
        assert_eq!(Uid::new(uuid).to_string(), uuid);
        // Not canonical: kept as written, so it still compares as text.
        let upper = uuid.to_uppercase();
        assert_eq!(Uid::new(&upper), Uid::Text(upper.as_str().into()));
        assert!(!Uid::new(&upper).is(uuid));
        assert_eq!(Uid::new("rs-1").to_string(), "rs-1");
        assert_eq!(Uid::new("").to_string(), "");
        assert_eq!(std::mem::size_of::<Uid>(), 24);
    }

    #[test]
    fn a_cached_pod_with_a_generated_name_is_one_block_of_176_bytes() {
        // glibc hands out blocks of 16-byte steps with 8 bytes of its own: an `Arc`'s two
        // counts and a `CachedPod` of at most 152 bytes fit one of 176.
        assert!(std::mem::size_of::<CachedPod>() <= 152);
        // A generated pod name (a ReplicaSet's of a Deployment's, 24 bytes at most)
        // needs no block of its own.
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-7d4b9c5f6-abcde", "namespace": "default"}
        }))
        .unwrap();
        assert!(!CachedPod::from(&pod).name.is_heap_allocated());
    }

    #[test]
    fn cached_pods_keep_readiness_ownership_and_deletion() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-1",
                         "deletionTimestamp": "2026-01-01T00:00:09Z",
                         "ownerReferences": [
                             {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "n-1"},
                             {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                              "uid": "rs-1", "controller": true}]},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "1970-01-01T00:01:40Z"}]}
        }))
        .unwrap();
        let cached = CachedPod::from(&pod);
        assert!(
            cached.uid.is("u-1")
                && cached
                    .controller
                    .as_ref()
                    .is_some_and(|c| &*c.uid == "rs-1")
        );
        assert_eq!(cached.uid, Uid::Text("u-1".into()));
        assert_eq!(
            (
                cached.ready,
                cached.not_ready,
                cached.ready_since,
                cached.deleting
            ),
            (true, false, NonZeroU32::new(100), true)
        );
        // Two references: the collector sees both; with one controller reference only,
        // the same from the compact form.
        let owners = cached.ownership().owners;
        assert_eq!(owners.len(), 2);
        assert_eq!(owners[0].kind, "Node");
        let mut single = pod.clone();
        single.metadata.owner_references.remove(0);
        single.metadata.owner_references[0].block_owner_deletion = Some(true);
        let compact = CachedPod::from(&single);
        assert!(compact.owned.is_none());
        assert_eq!(compact.ownership().owners, single.metadata.owner_references);
        // Anything else is kept as written.
        single.metadata.owner_references[0].block_owner_deletion = None;
        let kept = CachedPod::from(&single);
        assert!(kept.owned.is_some());
        assert_eq!(kept.ownership().owners, single.metadata.owner_references);
        let bare = CachedPod::from(&Pod::default());
        assert!(bare.uid.is_empty() && bare.controller.is_none() && bare.uid.is(""));
        assert_eq!(
            (bare.ready, bare.not_ready, bare.ready_since, bare.deleting),
            (false, false, None, false)
        );
    }
}
