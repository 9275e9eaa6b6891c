//! The replication manager's writes and fresh reads through the API: what 2014's manager
//! did over HTTP (`pkg/controller/replication_controller.go`'s `RealPodControl` POSTed
//! each pod), with the precondition kube-apiserver offers for each.
//!
//! - A create is a `POST` of the pod under its slot name: a 409 AlreadyExists is
//!   create-if-absent, as in etcd.
//! - A delete is a `DELETE` with the ranked pod's resourceVersion as its precondition.
//! - The status is a `PUT` to `/status` at the controller's resourceVersion.
//!
//! What the API cannot carry is the guard kcm's etcd transactions add: a write made for a
//! controller cannot also require that controller to be unchanged or alive, so a create
//! in flight when its controller is deleted may still land (the pod is then an orphan the
//! selector no longer owns). docs/invariants.md says what that weakens, and to what.

use super::ApiClient;
use crate::api::{Pod, ReplicationController, ResourceVersion};
use crate::controller::replicas::{
    record_create, record_delete, CreateOutcome, DeleteOutcome, StatusOutcome,
};
use crate::informer::{CachedPod, ControllerInformer, Namespace};
use crate::record::{Recorder, Reference};
use crate::registry::StorageError;
use crate::replication_manager::{FreshReads, PodControl};

/// [`PodControl`] through the API, recording an event about the controller for each pod
/// written, as the etcd one does.
///
/// In place of the etcd transaction's guard, each write first checks the controller
/// informer: once it has seen the controller deleted (or replaced by a namesake), no
/// write starts for it (`ControllerGone`), so what lands after a delete is what was in
/// flight, or started, before the delete's event reached this process.
#[derive(Clone)]
pub struct ApiPodControl {
    api: ApiClient,
    events: Recorder,
    controllers: ControllerInformer,
}

impl ApiPodControl {
    pub fn new(api: ApiClient, events: Recorder, controllers: ControllerInformer) -> ApiPodControl {
        ApiPodControl {
            api,
            events,
            controllers,
        }
    }

    /// Whether the controller informer still holds `controller`'s incarnation.
    fn alive(&self, controller: &ReplicationController) -> bool {
        let meta = &controller.metadata;
        self.controllers
            .get(&meta.namespace, &meta.name)
            .is_some_and(|cached| cached.metadata.uid == meta.uid)
    }
}

impl PodControl for ApiPodControl {
    async fn create_pod(
        &self,
        controller: &ReplicationController,
        pod: Pod,
    ) -> anyhow::Result<CreateOutcome> {
        if !self.alive(controller) {
            return Ok(CreateOutcome::ControllerGone);
        }
        let created = match self.api.create(&pod).await {
            Ok(created) => Ok(CreateOutcome::Created(
                created.metadata.resource_version.unwrap_or_default(),
            )),
            Err(StorageError::AlreadyExists { .. }) => {
                let meta = &pod.metadata;
                let existing = self.api.get::<Pod>(&meta.namespace, &meta.name).await.ok();
                Ok(CreateOutcome::Exists(existing.map(Box::new)))
            }
            Err(e) => Err(e.into()),
        };
        let owner = Reference::of(controller);
        record_create(&self.events, owner, &pod.metadata.name, &created);
        created
    }

    async fn delete_pod(
        &self,
        controller: &ReplicationController,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> anyhow::Result<DeleteOutcome> {
        if !self.alive(controller) {
            return Ok(DeleteOutcome::ControllerGone);
        }
        let deleted = match self
            .api
            .delete::<Pod>(namespace, name, Some(resource_version))
            .await
        {
            Ok(revision) => Ok(DeleteOutcome::Deleted(revision)),
            Err(StorageError::Conflict { .. }) => Ok(DeleteOutcome::Changed),
            Err(StorageError::NotFound { .. }) => Ok(DeleteOutcome::Gone),
            Err(e) => Err(e.into()),
        };
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
        match self.api.update(&updated, true).await {
            Ok(stored) => Ok(StatusOutcome::Written(
                stored.metadata.resource_version.unwrap_or_default(),
            )),
            Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => {
                Ok(StatusOutcome::Changed)
            }
            Err(e) => Err(anyhow::Error::from(e).context("update status")),
        }
    }
}

impl FreshReads for ApiClient {
    async fn controller(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<ReplicationController, StorageError> {
        self.get(namespace, name).await
    }

    async fn pods(&self, namespace: &str) -> Result<Namespace<CachedPod>, StorageError> {
        let listed = self.list::<Pod>(Some(namespace)).await?;
        let mut pods = Namespace::from_items(listed.items.iter().map(CachedPod::from), |pod| {
            pod.name.clone()
        });
        for error in &listed.errors {
            if let Some(name) = error.key.rsplit('/').next() {
                pods.mark_undecodable(name.into());
            }
        }
        Ok(pods)
    }
}

impl crate::record::EventTarget for ApiClient {
    /// A `POST`; when the name is taken (the correlator counted the event again), a merge
    /// patch of the whole document, which needs no resourceVersion.
    fn write(
        &self,
        namespace: String,
        name: String,
        event: serde_json::Value,
    ) -> futures::future::BoxFuture<'static, anyhow::Result<()>> {
        let api = self.clone();
        Box::pin(async move {
            let events = format!("/api/v1/namespaces/{namespace}/events");
            match api
                .request(http::Method::POST, &events, Some(&event), None)
                .await
            {
                Ok(_) => Ok(()),
                Err(e) if e.code() == Some(409) => {
                    let path = format!("{events}/{name}");
                    let patch = Some("application/merge-patch+json");
                    api.request(http::Method::PATCH, &path, Some(&event), patch)
                        .await
                        .map(|_| ())
                        .map_err(|e| anyhow::anyhow!("update event {namespace}/{name}: {e}"))
                }
                Err(e) => Err(anyhow::anyhow!("create event {namespace}/{name}: {e}")),
            }
        })
    }
}
