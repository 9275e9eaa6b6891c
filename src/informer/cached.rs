//! What an informer's store keeps of each object: the [`Cached`] form of a kind. Pods
//! are kept as a compact [`CachedPod`]; controllers, services and endpoints whole. Every
//! form tells the garbage collector its [`Ownership`].

use std::borrow::Cow;
use std::cell::RefCell;
use std::num::NonZeroU32;
use std::sync::Arc;

use compact_str::CompactString;

use crate::api::{
    self, Deployment, Endpoints, IntOrString, Object, ObjectMeta, OwnerReference, Pod, PodPhase,
    ReplicaSet, ReplicationController, Service, CONDITION_TRUE, POD_READY,
};
use crate::labels::Set;

use super::intern::Interner;
use super::pod_fields::{
    ContainerFields, Labels, MapOnly, OwnerView, PodFields, PortFields, SpecFields,
};
use super::stored::Stored;

/// The form in which an informer stores objects of one kind.
pub trait Cached: Send + Sync + Sized + 'static {
    /// The stored kind.
    type Object: Object;
    /// Builds the cached form of a decoded object.
    fn from_object(object: Self::Object) -> Self;
    /// Decodes a stored value into the cached form: the whole object, then
    /// [`Cached::from_object`], unless the kind reads its values its own way.
    ///
    /// # Errors
    /// When the value is not an object of the kind.
    fn decode_stored(stored: Stored<'_>) -> anyhow::Result<Self> {
        decode_object(stored)
    }
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

/// Decodes a stored value into the whole object, then its cached form
/// ([`Cached::from_object`]): [`Cached::decode_stored`] unless a kind reads its own way.
///
/// # Errors
/// As [`api::decode`].
pub fn decode_object<C: Cached>(stored: Stored<'_>) -> anyhow::Result<C> {
    let mut object =
        api::decode::<C::Object>(stored.prefix, stored.key, stored.value, stored.mod_revision)?;
    object.metadata_mut().create_revision = api::CreateRevision::of(stored.create_revision);
    Ok(C::from_object(object))
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

/// Whether `references` are just what a ReplicaSet controller writes: one controller
/// reference to a ReplicaSet, `apps/v1`, with `blockOwnerDeletion`, and nothing else. The
/// pod cache keeps only its kind, name and uid then (`controller`), and rebuilds the rest.
fn just_a_replica_set_controller<'r>(mut references: impl Iterator<Item = OwnerView<'r>>) -> bool {
    match (references.next(), references.next()) {
        (None, _) => true,
        (Some(only), None) => {
            only.controller == Some(true)
                && only.kind == "ReplicaSet"
                && only.api_version == APPS_V1
                && only.block_owner_deletion == Some(true)
                && !only.more
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
        let resource_version = pod.metadata.resource_version.map_or(0, |rv| rv.0);
        CachedPod::from_fields(PodFields::from(pod), resource_version, &mut None)
    }
}

impl CachedPod {
    /// The cached form of `pod` as it is about to be written (a pod this thread creates),
    /// sharing the parts pods alike share with the last pod this thread decoded or made,
    /// as a decoded pod does ([`SharedParts`]).
    pub fn of_written(pod: &Pod) -> CachedPod {
        let resource_version = pod.metadata.resource_version.map_or(0, |rv| rv.0);
        RECENT.with_borrow_mut(|recent| {
            CachedPod::from_fields(PodFields::from(pod), resource_version, recent)
        })
    }

    /// This pod as another made from the same template by the same create path (a
    /// [`crate::controller::slots::PodStamp`]'s): the same but for `name`, `uid` and
    /// `creation_timestamp`.
    pub fn stamped(&self, name: &str, uid: &str, creation_timestamp: &str) -> CachedPod {
        CachedPod {
            name: name.into(),
            uid: Uid::new(uid),
            creation_timestamp: epoch_seconds(creation_timestamp),
            ..self.clone()
        }
    }

    /// The cached form of what was read of a pod at `resource_version` (a decoded
    /// [`Pod`]'s fields, or a stored one's). The parts pods share are taken from `recent`
    /// where they are equal, and left there for the next pod.
    pub(super) fn from_fields(
        fields: PodFields<'_>,
        resource_version: i64,
        recent: &mut Option<SharedParts>,
    ) -> CachedPod {
        let meta = fields.metadata.0;
        let spec = fields.spec.0;
        let status = fields.status.map(|status| status.0);
        let phase = status.as_ref().map_or(PodPhase::Pending, |s| s.phase);
        // `Pod::ready_condition`: the first `Ready` condition's status.
        let ready_condition = status.as_ref().and_then(|s| {
            (s.conditions.iter())
                .map(|c| &c.0)
                .find(|c| c.type_ == POD_READY)
        });
        let ready = ready_condition.map(|c| c.status == CONDITION_TRUE);
        // `metav1.GetControllerOf`: the first reference with `controller: true`.
        let controller = (meta.owner_references.views()).find(|r| r.controller == Some(true));
        let shared = match recent.take() {
            Some(last) => SharedParts {
                namespace: if *last.namespace == *meta.namespace {
                    last.namespace
                } else {
                    (*meta.namespace).into()
                },
                labels: if meta.labels.are(&last.labels) {
                    last.labels
                } else {
                    Arc::new(meta.labels.into_set())
                },
                ports: if last.ports.is_of(&spec) {
                    last.ports
                } else {
                    Arc::new(PodPorts::from_spec(&spec))
                },
                controller: match (last.controller, &controller) {
                    (Some(last), Some(c)) if last.is(c) => Some(last),
                    (_, c) => c.as_ref().map(ControllerRef::of),
                },
            },
            None => SharedParts {
                namespace: (*meta.namespace).into(),
                labels: Arc::new(meta.labels.into_set()),
                ports: Arc::new(PodPorts::from_spec(&spec)),
                controller: controller.as_ref().map(ControllerRef::of),
            },
        };
        *recent = Some(shared.clone());
        let compact = just_a_replica_set_controller(meta.owner_references.views());
        CachedPod {
            namespace: shared.namespace,
            name: (*meta.name).into(),
            labels: shared.labels,
            resource_version,
            phase,
            host: (!spec.host.is_empty()).then(|| (*spec.host).into()),
            creation_timestamp: meta.creation_timestamp.as_deref().and_then(epoch_seconds),
            pod_ip: status
                .as_ref()
                .map(|s| &*s.pod_ip)
                .filter(|ip| !ip.is_empty())
                .map(Box::from),
            ports: shared.ports,
            uid: Uid::new(&meta.uid),
            ready: ready.unwrap_or(phase == PodPhase::Running),
            not_ready: ready == Some(false),
            ready_since: ready_condition
                .filter(|c| c.status == CONDITION_TRUE)
                .and_then(|c| c.last_transition_time.as_deref())
                .and_then(epoch_seconds),
            controller: shared.controller,
            deleting: meta.deletion_timestamp.is_some(),
            restarts: status.as_ref().map_or(0, |status| {
                let total: i64 = (status.container_statuses.iter())
                    .map(|c| c.0.restart_count.max(0))
                    .sum();
                u32::try_from(total).unwrap_or(u32::MAX)
            }),
            owned: (!compact || !meta.finalizers.is_empty()).then(|| {
                Box::new(PodOwnership {
                    owners: meta.owner_references.into_references().into(),
                    finalizers: meta.finalizers.into_owned().into(),
                })
            }),
        }
    }
}

/// Decodes a stored pod into its cached form, checked as [`api::decode`] checks it (its
/// kind, its version, its name against its key).
///
/// # Errors
/// As [`api::decode`], with its words.
fn decode_pod(stored: Stored<'_>) -> anyhow::Result<CachedPod> {
    let Ok(mut fields) = serde_json::from_slice::<PodFields<'_>>(stored.value) else {
        // The whole decode's error (or the pod, should it decode after all).
        return decode_object(stored);
    };
    api::check_type::<Pod>(&fields.kind, &fields.api_version)?;
    if let Some((namespace, name)) = api::parse_key::<Pod>(stored.prefix, stored.key) {
        let meta = &mut fields.metadata.0;
        for (field, stored, from_key) in [
            ("namespace", &mut meta.namespace, namespace),
            ("name", &mut meta.name, name),
        ] {
            if api::takes_key_name(field, stored, from_key)? {
                *stored = Cow::Borrowed(from_key);
            }
        }
    }
    Ok(
        RECENT
            .with_borrow_mut(|recent| CachedPod::from_fields(fields, stored.mod_revision, recent)),
    )
}

thread_local! {
    /// The shared parts of the last pod this thread decoded ([`SharedParts`]).
    static RECENT: RefCell<Option<SharedParts>> = const { RefCell::new(None) };
}

/// The parts of a cached pod that pods alike share, one copy in the store: its namespace,
/// its label set and its interners' values. A controller's pods arrive one after another
/// with equal ones; taking the last pod's where they are equal saves making them (eleven
/// allocations a pod) only for the store to swap them for its own.
#[derive(Clone)]
pub(super) struct SharedParts {
    namespace: Arc<str>,
    labels: Arc<Set>,
    ports: Arc<PodPorts>,
    controller: Option<Arc<ControllerRef>>,
}

impl ControllerRef {
    fn of(reference: &OwnerView<'_>) -> Arc<ControllerRef> {
        Arc::new(ControllerRef {
            kind: reference.kind.into(),
            name: reference.name.into(),
            uid: reference.uid.into(),
        })
    }

    fn is(&self, reference: &OwnerView<'_>) -> bool {
        *self.kind == *reference.kind
            && *self.name == *reference.name
            && *self.uid == *reference.uid
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
        let resource_version = pod.metadata.resource_version.map_or(0, |rv| rv.0);
        let mut fields = PodFields::from(&pod);
        fields.metadata.0.labels = Labels::Set(Cow::Owned(labels));
        CachedPod::from_fields(fields, resource_version, &mut None)
    }

    /// Reads only what the cache keeps (`pod_fields`).
    fn decode_stored(stored: Stored<'_>) -> anyhow::Result<Self> {
        decode_pod(stored)
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

fn container_ports<'c, 'a>(
    container: &'c MapOnly<ContainerFields<'a>>,
) -> impl Iterator<Item = &'c PortFields<'a>> {
    container.0.ports.iter().map(|port| &port.0)
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
        PodPorts::from_spec(&PodFields::from(pod).spec.0)
    }

    /// Whether these are the ports of `spec`.
    fn is_of(&self, spec: &SpecFields<'_>) -> bool {
        let mut named = self.named.iter();
        let first = (spec.containers.first())
            .and_then(|c| container_ports(c).next())
            .map(|p| p.container_port);
        first == self.first
            && (spec.containers.iter())
                .flat_map(container_ports)
                .filter(|p| !p.name.is_empty())
                .all(|p| {
                    named
                        .next()
                        .is_some_and(|(n, port)| **n == *p.name && *port == p.container_port)
                })
            && named.next().is_none()
    }

    fn from_spec(spec: &SpecFields<'_>) -> PodPorts {
        PodPorts {
            first: (spec.containers.first())
                .and_then(|c| container_ports(c).next())
                .map(|p| p.container_port),
            named: (spec.containers.iter())
                .flat_map(container_ports)
                .filter(|p| !p.name.is_empty())
                .map(|p| (Box::from(&*p.name), p.container_port))
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
mod tests;
