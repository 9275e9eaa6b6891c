//! The sync's IO seam (2014's `PodControlInterface`, "to allow testing"): [`PodControl`]
//! for every write (pod creates and deletes, the status write), [`FreshReads`] for the
//! reads the caches cannot serve. [`EtcdPodControl`] and [`Registry`] are the real ones;
//! the unit tests use a recording fake of both.
//!
//! Invariant: every pod write is guarded by the incarnation of the controller it is made
//! for (the controller key's create revision, compared in the write's own transaction), so
//! nothing is written for a controller after its delete, whatever was in flight.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use crate::api::{ReplicationController, ResourceVersion};
use crate::controller::replicas::{
    create_recorded, delete_guarded, list_pods, record_delete, write_status, CreateOutcome,
    DeleteOutcome, StatusOutcome,
};
use crate::controller::NewPod;
use crate::informer::{CachedPod, Handoff, Namespace, PodInformer};
use crate::record::{Recorder, Reference};
use crate::registry::{Registry, StorageError};

/// Every write a sync makes. Each is made for `controller`, the version the sync decided
/// from, and commits only while that controller's incarnation lives.
pub trait PodControl: Send + Sync + 'static {
    /// `pods` is the informer that sees the pods this control creates: a control that
    /// can offers it each one's cached form ([`Handoff`]). By default, nothing.
    fn hand_created_pods_to(&self, pods: &PodInformer) {
        let _ = pods;
    }

    /// Creates `pod` if its name is free.
    fn create_pod(
        &self,
        controller: &ReplicationController,
        pod: NewPod,
    ) -> impl Future<Output = anyhow::Result<CreateOutcome>> + Send;

    /// Deletes `namespace/name` if it is still at `resource_version`.
    fn delete_pod(
        &self,
        controller: &ReplicationController,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> impl Future<Output = anyhow::Result<DeleteOutcome>> + Send;

    /// Writes `status.replicas` and `status.readyReplicas` of `controller` if it is still
    /// at its resourceVersion.
    fn update_status(
        &self,
        controller: &ReplicationController,
        replicas: i64,
        ready: i64,
    ) -> impl Future<Output = anyhow::Result<StatusOutcome>> + Send;
}

/// The real `PodControl`: create-if-absent, guarded deletes and compare-and-swap status
/// writes in etcd, each in one transaction that also requires the controller's incarnation.
/// Like Kubernetes' `RealPodControl`, it records an event about the controller for each
/// pod it creates or deletes, or fails to.
#[derive(Clone)]
pub struct EtcdPodControl {
    registry: Registry,
    events: Recorder,
    /// The pod informer's offers for the pods this control creates, once it is set
    /// ([`Handoff`]).
    handoff: Arc<OnceLock<Handoff<CachedPod>>>,
}

impl EtcdPodControl {
    pub fn new(registry: Registry) -> EtcdPodControl {
        EtcdPodControl {
            registry,
            events: Recorder::discard(),
            handoff: Arc::default(),
        }
    }

    /// Records its pod writes' events through `events`.
    pub fn with_events(mut self, events: Recorder) -> EtcdPodControl {
        self.events = events;
        self
    }

    /// The registry writing on `controller`'s behalf.
    fn on_behalf_of(&self, controller: &ReplicationController) -> anyhow::Result<Registry> {
        let incarnation = self.registry.incarnation(controller).ok_or_else(|| {
            anyhow::anyhow!(
                "controller {} was never read from etcd",
                controller.metadata.key()
            )
        })?;
        Ok(self.registry.guarded_by(incarnation))
    }
}

impl PodControl for EtcdPodControl {
    fn hand_created_pods_to(&self, pods: &PodInformer) {
        let _ = self.handoff.set(pods.handoff());
    }

    fn create_pod(
        &self,
        controller: &ReplicationController,
        pod: NewPod,
    ) -> impl Future<Output = anyhow::Result<CreateOutcome>> + Send {
        create_recorded(
            &self.registry,
            self.on_behalf_of(controller),
            self.handoff.get(),
            &self.events,
            controller,
            pod,
        )
    }

    async fn delete_pod(
        &self,
        controller: &ReplicationController,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> anyhow::Result<DeleteOutcome> {
        let deleted = delete_guarded(
            &self.on_behalf_of(controller)?,
            namespace,
            name,
            resource_version,
        )
        .await;
        record_delete(&self.events, Reference::of(controller), name, &deleted);
        deleted
    }

    async fn update_status(
        &self,
        controller: &ReplicationController,
        replicas: i64,
        ready: i64,
    ) -> anyhow::Result<StatusOutcome> {
        let mut updated = controller.clone();
        updated.status.replicas = replicas;
        updated.status.ready_replicas = ready;
        // A compare-and-swap on the controller's own resourceVersion: stronger than the
        // incarnation guard, so none is needed.
        write_status(&self.registry, &updated).await
    }
}

/// The reads a sync makes when the caches cannot serve it (they are behind its own writes,
/// or `fresh_reads` is set), and to confirm a cached controller before writing.
pub trait FreshReads: Send + Sync + 'static {
    /// The controller as stored now.
    ///
    /// # Errors
    /// `NotFound` when it does not exist, `Decode` when it does not decode, `Etcd`.
    fn controller(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<ReplicationController, StorageError>> + Send;

    /// Every pod of `namespace` as stored now, in one consistent read; a pod that does not
    /// decode is not an item, but its name is taken.
    ///
    /// # Errors
    /// `Etcd` when the read fails.
    fn pods(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Namespace<CachedPod>, StorageError>> + Send;
}

impl FreshReads for Registry {
    async fn controller(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<ReplicationController, StorageError> {
        self.get(namespace, name).await
    }

    async fn pods(&self, namespace: &str) -> Result<Namespace<CachedPod>, StorageError> {
        list_pods(self, namespace).await
    }
}
