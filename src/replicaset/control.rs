//! The ReplicaSet sync's IO seam: [`ReplicaSetControl`] for every write (pod creates,
//! deletes, adoptions, releases, the status write) and [`ReplicaSetReads`] for the reads
//! the caches cannot serve. [`EtcdReplicaSetControl`] and [`Registry`] are the real ones;
//! the unit tests use a recording fake of both.
//!
//! Invariants: a create or an adoption commits only while the ReplicaSet is unchanged
//! since the sync read it (its key's `mod_revision`, compared in the write's own
//! transaction: [`Registry::guarded_unchanged`]); a delete only while the ReplicaSet's
//! incarnation lives and the pod is at the resourceVersion it was ranked at; an adoption
//! or release only while the pod is at the resourceVersion it was claimed at.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use crate::api::{Pod, ReplicaSet, ReplicaSetStatus, ResourceVersion};
use crate::controller::replicas::{
    create_recorded, delete_guarded, list_pods, record_delete, write_status, CreateOutcome,
    DeleteOutcome, StatusOutcome,
};
use crate::controller::NewPod;
use crate::informer::{CachedPod, Handoff, Namespace, PodInformer};
use crate::registry::{Registry, StorageError};

use crate::record::{Recorder, Reference};

use super::plan::controller_ref;

/// What an adoption or a release found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// Written at this revision.
    Done(ResourceVersion),
    /// The pod changed (or is gone) since it was claimed; nothing was written.
    PodChanged,
    /// The ReplicaSet changed or was deleted since it was read; nothing was written.
    OwnerChanged,
}

/// Every write a ReplicaSet sync makes, each for `rs` at the version the sync read.
pub trait ReplicaSetControl: Send + Sync + 'static {
    /// `pods` is the informer that sees the pods this control creates: a control that
    /// can offers it each one's cached form ([`Handoff`]). By default, nothing.
    fn hand_created_pods_to(&self, pods: &PodInformer) {
        let _ = pods;
    }

    /// Creates `pod` if its name is free, while `rs` is unchanged.
    fn create_pod(
        &self,
        rs: &ReplicaSet,
        pod: NewPod,
    ) -> impl Future<Output = anyhow::Result<CreateOutcome>> + Send;

    /// Deletes `namespace/name` if it is still at `resource_version`.
    fn delete_pod(
        &self,
        rs: &ReplicaSet,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> impl Future<Output = anyhow::Result<DeleteOutcome>> + Send;

    /// Adds `rs`'s controller reference to the orphan `namespace/name`, if it is still at
    /// `resource_version` and `rs` is unchanged.
    fn adopt(
        &self,
        rs: &ReplicaSet,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> impl Future<Output = anyhow::Result<ClaimOutcome>> + Send;

    /// Removes `rs`'s controller reference from `namespace/name`, if it is still at
    /// `resource_version`; the pod is kept.
    fn release(
        &self,
        rs: &ReplicaSet,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> impl Future<Output = anyhow::Result<ClaimOutcome>> + Send;

    /// Writes `status` of `rs` if `rs` is still at its resourceVersion.
    fn update_status(
        &self,
        rs: &ReplicaSet,
        status: ReplicaSetStatus,
    ) -> impl Future<Output = anyhow::Result<StatusOutcome>> + Send;
}

/// The reads a sync makes from etcd.
pub trait ReplicaSetReads: Send + Sync + 'static {
    /// The ReplicaSet as stored now.
    ///
    /// # Errors
    /// `NotFound`, `Decode`, `Etcd`.
    fn replica_set(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<ReplicaSet, StorageError>> + Send;

    /// Every pod of `namespace` as stored now, in one consistent read.
    ///
    /// # Errors
    /// `Etcd` when the read fails.
    fn pods(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Namespace<CachedPod>, StorageError>> + Send;
}

impl ReplicaSetReads for Registry {
    async fn replica_set(&self, namespace: &str, name: &str) -> Result<ReplicaSet, StorageError> {
        self.get(namespace, name).await
    }

    async fn pods(&self, namespace: &str) -> Result<Namespace<CachedPod>, StorageError> {
        list_pods(self, namespace).await
    }
}

/// Adds `rs`'s controller reference to `pod`; false (nothing changed) when another
/// controller owns it already.
pub fn adopt(pod: &mut Pod, rs: &ReplicaSet) -> bool {
    if crate::api::controller_of(&pod.metadata).is_some() {
        return false;
    }
    pod.metadata.owner_references.push(controller_ref(rs));
    true
}

/// Removes `rs`'s references from `pod`; false when it had none.
pub fn release(pod: &mut Pod, rs: &ReplicaSet) -> bool {
    let before = pod.metadata.owner_references.len();
    pod.metadata
        .owner_references
        .retain(|r| r.uid != rs.metadata.uid);
    pod.metadata.owner_references.len() != before
}

/// The real [`ReplicaSetControl`], on etcd. Like Kubernetes' `RealPodControl`, it records
/// an event about the ReplicaSet for each pod it creates or deletes, or fails to.
#[derive(Clone)]
pub struct EtcdReplicaSetControl {
    registry: Registry,
    events: Recorder,
    /// The pod informer's offers for the pods this control creates, once it is set
    /// ([`Handoff`]).
    handoff: Arc<OnceLock<Handoff<CachedPod>>>,
}

impl EtcdReplicaSetControl {
    pub fn new(registry: Registry) -> Self {
        EtcdReplicaSetControl {
            registry,
            events: Recorder::discard(),
            handoff: Arc::default(),
        }
    }

    /// Records its pod writes' events through `events`.
    pub fn with_events(mut self, events: Recorder) -> Self {
        self.events = events;
        self
    }

    /// The registry whose writes require `rs` unchanged since it was read.
    fn while_unchanged(&self, rs: &ReplicaSet) -> anyhow::Result<Registry> {
        Ok(self.registry.guarded_unchanged(self.incarnation(rs)?))
    }

    /// The registry whose writes require `rs`'s incarnation alive.
    fn while_alive(&self, rs: &ReplicaSet) -> anyhow::Result<Registry> {
        Ok(self.registry.guarded_by(self.incarnation(rs)?))
    }

    fn incarnation(&self, rs: &ReplicaSet) -> anyhow::Result<crate::registry::Incarnation> {
        self.registry.incarnation(rs).ok_or_else(|| {
            anyhow::anyhow!("replica set {} was never read from etcd", rs.metadata.key())
        })
    }

    /// Reads the pod, checks it is still at `resource_version`, changes it with `change`
    /// and writes it back through `registry` (compare-and-swap on the pod).
    async fn rewrite_pod(
        &self,
        registry: Registry,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
        change: impl FnOnce(&mut Pod) -> bool,
    ) -> anyhow::Result<ClaimOutcome> {
        let mut pod = match self.registry.get::<Pod>(namespace, name).await {
            Ok(pod) => pod,
            Err(StorageError::NotFound { .. } | StorageError::Decode(_)) => {
                return Ok(ClaimOutcome::PodChanged)
            }
            Err(e) => return Err(e.into()),
        };
        if pod.metadata.resource_version != Some(resource_version) || !change(&mut pod) {
            return Ok(ClaimOutcome::PodChanged);
        }
        match registry.update(&pod).await {
            Ok(stored) => Ok(ClaimOutcome::Done(
                stored.metadata.resource_version.unwrap_or_default(),
            )),
            Err(StorageError::OwnerGone { .. }) => Ok(ClaimOutcome::OwnerChanged),
            Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => {
                Ok(ClaimOutcome::PodChanged)
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl ReplicaSetControl for EtcdReplicaSetControl {
    fn hand_created_pods_to(&self, pods: &PodInformer) {
        let _ = self.handoff.set(pods.handoff());
    }

    fn create_pod(
        &self,
        rs: &ReplicaSet,
        pod: NewPod,
    ) -> impl Future<Output = anyhow::Result<CreateOutcome>> + Send {
        create_recorded(
            &self.registry,
            self.while_unchanged(rs),
            self.handoff.get(),
            &self.events,
            rs,
            pod,
        )
    }

    async fn delete_pod(
        &self,
        rs: &ReplicaSet,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> anyhow::Result<DeleteOutcome> {
        let deleted =
            delete_guarded(&self.while_alive(rs)?, namespace, name, resource_version).await;
        record_delete(&self.events, Reference::of(rs), name, &deleted);
        deleted
    }

    async fn adopt(
        &self,
        rs: &ReplicaSet,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> anyhow::Result<ClaimOutcome> {
        let registry = self.while_unchanged(rs)?;
        self.rewrite_pod(registry, namespace, name, resource_version, |pod| {
            adopt(pod, rs)
        })
        .await
    }

    async fn release(
        &self,
        rs: &ReplicaSet,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> anyhow::Result<ClaimOutcome> {
        let registry = self.registry.clone();
        self.rewrite_pod(registry, namespace, name, resource_version, |pod| {
            release(pod, rs)
        })
        .await
    }

    async fn update_status(
        &self,
        rs: &ReplicaSet,
        status: ReplicaSetStatus,
    ) -> anyhow::Result<StatusOutcome> {
        let mut updated = rs.clone();
        updated.status = status;
        write_status(&self.registry, &updated).await
    }
}
