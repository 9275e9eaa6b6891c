//! What an informer's store keeps of each object: the [`Cached`] form of a kind. Pods
//! are kept as a compact [`CachedPod`]; controllers and services whole.

use std::sync::Arc;

use crate::api::{
    controller_of, IntOrString, Object, Pod, PodPhase, ReplicationController, Service,
};
use crate::labels::Set;

/// The form in which an informer stores objects of one kind.
pub trait Cached: Send + Sync + Sized + 'static {
    /// The stored kind.
    type Object: Object;
    /// Builds the cached form of a decoded object.
    fn from_object(object: Self::Object) -> Self;
    /// The labels the store groups and indexes items by; `None` for no label index.
    fn labels(&self) -> Option<&Arc<Set>> {
        None
    }
    /// Replaces the labels with an equal, shared copy (called before the item is stored).
    fn share_labels(&mut self, _labels: Arc<Set>) {}
    /// Replaces the namespace and name with the store's copies of them.
    fn share_names(&mut self, _namespace: &Arc<str>, _name: &Arc<str>) {}
    /// The item's `metadata.resourceVersion`.
    fn resource_version(&self) -> i64;
}

/// Services are few and small: the store keeps them whole.
impl Cached for Service {
    type Object = Service;

    fn from_object(mut object: Service) -> Self {
        crate::api::remember_spec(&mut object);
        object
    }

    fn resource_version(&self) -> i64 {
        self.metadata.resource_version.map_or(0, |rv| rv.0)
    }
}

/// Controllers are few and small: the store keeps them whole.
impl Cached for ReplicationController {
    type Object = ReplicationController;

    fn from_object(mut object: ReplicationController) -> Self {
        // Kept whole, so a write of it can tell a spec change without a read.
        crate::api::remember_spec(&mut object);
        object
    }

    fn resource_version(&self) -> i64 {
        self.metadata.resource_version.map_or(0, |rv| rv.0)
    }
}

/// What the controllers read of a pod.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedPod {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    /// Shared with every other cached pod that has equal labels.
    pub labels: Arc<Set>,
    pub resource_version: i64,
    pub phase: PodPhase,
    /// `spec.host` is set (the pod is bound to a node).
    pub assigned: bool,
    /// RFC 3339, as stored.
    pub creation_timestamp: Option<Box<str>>,
    /// `status.podIP`, when set and non-empty.
    pub pod_ip: Option<Box<str>>,
    pub ports: PodPorts,
    /// `metadata.uid` ("" when absent).
    pub uid: Box<str>,
    /// The uid of the controller owner reference ("" without one).
    pub controller_uid: Box<str>,
    /// [`Pod::is_ready`]: the Ready condition is True (or, without one, Running).
    pub ready: bool,
    /// The pod reports a Ready condition that is not True (a 2014 document reports none).
    pub not_ready: bool,
    /// [`Pod::ready_since`] as seconds since the Unix epoch.
    pub ready_since: Option<i64>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
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
            assigned: !pod.spec.host.is_empty(),
            creation_timestamp: meta.creation_timestamp.as_deref().map(Box::from),
            pod_ip: pod.pod_ip().map(Box::from),
            ports: PodPorts::of(pod),
            uid: meta.uid.as_str().into(),
            controller_uid: controller_of(meta).map_or("", |r| r.uid.as_str()).into(),
            ready: pod.is_ready(),
            not_ready: pod.ready_condition() == Some(false),
            ready_since: pod.ready_since().and_then(epoch_seconds),
            deleting: meta.deletion_timestamp.is_some(),
        }
    }
}

/// Seconds since the Unix epoch of an RFC 3339 time; `None` when unreadable.
fn epoch_seconds(time: &str) -> Option<i64> {
    let time = humantime::parse_rfc3339_weak(time).ok()?;
    let seconds = time.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
    i64::try_from(seconds).ok()
}

impl Cached for CachedPod {
    type Object = Pod;

    fn from_object(pod: Pod) -> Self {
        CachedPod::from(&pod)
    }

    fn labels(&self) -> Option<&Arc<Set>> {
        Some(&self.labels)
    }

    fn share_labels(&mut self, labels: Arc<Set>) {
        self.labels = labels;
    }

    fn share_names(&mut self, namespace: &Arc<str>, name: &Arc<str>) {
        self.namespace = namespace.clone();
        self.name = name.clone();
    }

    fn resource_version(&self) -> i64 {
        self.resource_version
    }
}

/// The container ports of a pod, as `findPort` needs them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
        assert_eq!((&*cached.uid, &*cached.controller_uid), ("u-1", "rs-1"));
        assert_eq!(
            (
                cached.ready,
                cached.not_ready,
                cached.ready_since,
                cached.deleting
            ),
            (true, false, Some(100), true)
        );
        let bare = CachedPod::from(&Pod::default());
        assert_eq!((&*bare.uid, &*bare.controller_uid), ("", ""));
        assert_eq!(
            (bare.ready, bare.not_ready, bare.ready_since, bare.deleting),
            (false, false, None, false)
        );
    }
}
