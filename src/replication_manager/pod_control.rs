//! The sync's IO seam (2014's `PodControlInterface`, "to allow testing"): [`PodControl`]
//! for every write (pod creates and deletes, the status write), [`FreshReads`] for the
//! reads the caches cannot serve. [`EtcdPodControl`] and [`Registry`] are the real ones;
//! the unit tests use a recording fake of both.
//!
//! Invariant: every pod write is guarded by the incarnation of the controller it is made
//! for (the controller key's create revision, compared in the write's own transaction), so
//! nothing is written for a controller after its delete, whatever was in flight.

use std::future::Future;

use crate::api::{self, Object, Pod, ReplicationController, ResourceVersion};
use crate::informer::{CachedPod, Namespace};
use crate::labels::Selector;
use crate::registry::{Registry, StorageError};

/// What a create found.
#[derive(Debug, Clone, PartialEq)]
pub enum CreateOutcome {
    /// Created at this revision.
    Created(ResourceVersion),
    /// The name was taken; the pod holding it, if it could be read.
    Exists(Option<Box<Pod>>),
    /// The controller was deleted (and maybe re-created) since it was read; nothing was
    /// written.
    ControllerGone,
}

/// What a guarded delete found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// Deleted at this revision.
    Deleted(ResourceVersion),
    /// The pod changed since it was ranked; nothing was deleted.
    Changed,
    /// The pod was already gone.
    Gone,
    /// The controller was deleted (and maybe re-created) since it was read; nothing was
    /// deleted.
    ControllerGone,
}

/// What a status write found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusOutcome {
    /// Written at this revision.
    Written(ResourceVersion),
    /// The controller changed (or was deleted) since it was read; its own event syncs it
    /// again.
    Changed,
}

/// Every write a sync makes. Each is made for `controller`, the version the sync decided
/// from, and commits only while that controller's incarnation lives.
pub trait PodControl: Send + Sync + 'static {
    /// Creates `pod` if its name is free.
    fn create_pod(
        &self,
        controller: &ReplicationController,
        pod: Pod,
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
#[derive(Clone)]
pub struct EtcdPodControl {
    registry: Registry,
}

impl EtcdPodControl {
    pub fn new(registry: Registry) -> EtcdPodControl {
        EtcdPodControl { registry }
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
    async fn create_pod(
        &self,
        controller: &ReplicationController,
        pod: Pod,
    ) -> anyhow::Result<CreateOutcome> {
        create_guarded(&self.registry, &self.on_behalf_of(controller)?, &pod).await
    }

    async fn delete_pod(
        &self,
        controller: &ReplicationController,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> anyhow::Result<DeleteOutcome> {
        delete_guarded(
            &self.on_behalf_of(controller)?,
            namespace,
            name,
            resource_version,
        )
        .await
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

/// Creates `pod` through `guarded` (a registry guarded by the controller it is made for),
/// reading the pod holding the name through `registry` when it is taken.
///
/// # Errors
/// When etcd fails.
pub async fn create_guarded(
    registry: &Registry,
    guarded: &Registry,
    pod: &Pod,
) -> anyhow::Result<CreateOutcome> {
    match guarded.create(pod).await {
        Ok(created) => Ok(CreateOutcome::Created(
            created.metadata.resource_version.unwrap_or_default(),
        )),
        Err(StorageError::OwnerGone { .. }) => Ok(CreateOutcome::ControllerGone),
        Err(StorageError::AlreadyExists { .. }) => {
            let meta = &pod.metadata;
            let existing = registry.get::<Pod>(&meta.namespace, &meta.name).await.ok();
            Ok(CreateOutcome::Exists(existing.map(Box::new)))
        }
        Err(e) => Err(e.into()),
    }
}

/// Deletes `namespace/name` through `guarded` if it is still at `resource_version`.
///
/// # Errors
/// When etcd fails.
pub async fn delete_guarded(
    guarded: &Registry,
    namespace: &str,
    name: &str,
    resource_version: ResourceVersion,
) -> anyhow::Result<DeleteOutcome> {
    match guarded
        .delete::<Pod>(namespace, name, Some(resource_version))
        .await
    {
        Ok(revision) => Ok(DeleteOutcome::Deleted(revision)),
        Err(StorageError::OwnerGone { .. }) => Ok(DeleteOutcome::ControllerGone),
        Err(StorageError::Conflict { .. }) => Ok(DeleteOutcome::Changed),
        Err(StorageError::NotFound { .. }) => Ok(DeleteOutcome::Gone),
        Err(e) => Err(e.into()),
    }
}

/// Writes `updated`, a controller with its new status, by compare-and-swap on the
/// resourceVersion it was read at.
///
/// # Errors
/// When etcd fails.
pub async fn write_status<T: Object>(
    registry: &Registry,
    updated: &T,
) -> anyhow::Result<StatusOutcome> {
    match registry.update(updated).await {
        Ok(stored) => Ok(StatusOutcome::Written(
            stored.metadata().resource_version.unwrap_or_default(),
        )),
        Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => {
            Ok(StatusOutcome::Changed)
        }
        Err(e) => Err(anyhow::Error::from(e).context("update status")),
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
        let listed = self
            .list::<Pod>(Some(namespace), &Selector::everything())
            .await?;
        let mut pods = Namespace::from_items(listed.items.iter().map(CachedPod::from), |pod| {
            pod.name.clone()
        });
        // A pod that does not decode is not counted, but its name is taken all the same:
        // left out here, its slot would be chosen (and found taken) by every sync.
        for error in &listed.errors {
            if let Some((_, name)) = api::parse_key::<Pod>(self.prefix(), &error.key) {
                pods.mark_undecodable(name.into());
            }
        }
        Ok(pods)
    }
}
