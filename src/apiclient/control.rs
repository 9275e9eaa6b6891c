//! The replication manager's writes and fresh reads through the API: what 2014's manager
//! did over HTTP (`pkg/controller/replication_controller.go`'s `RealPodControl` POSTed
//! each pod), with the precondition kube-apiserver offers for each.
//!
//! - A create is a `POST` of the pod under its slot name: a 409 AlreadyExists is
//!   create-if-absent, as in etcd.
//! - A delete is a `DELETE` with the ranked pod's resourceVersion as its precondition and
//!   `gracePeriodSeconds: 0`: the pod goes at once, as kcm's controllers delete from etcd
//!   (a Terminating pod would still count, so a sync would rank more victims).
//! - The status is a `PUT` to `/status` at the controller's resourceVersion.
//!
//! What the API cannot carry is the guard kcm's etcd transactions add: a write made for a
//! controller cannot also require that controller to be unchanged or alive, so a create
//! in flight when its controller is deleted may still land (the pod is then an orphan the
//! selector no longer owns). docs/invariants.md says what that weakens, and to what.

use std::sync::Arc;

use super::ApiClient;
use crate::api::{
    Endpoints, Object, Pod, ReplicaSet, ReplicaSetStatus, ReplicationController, ResourceVersion,
    Service,
};
use crate::controller::replicas::{
    record_create, record_delete, CreateOutcome, DeleteOutcome, StatusOutcome,
};
use crate::controller::NewPod;
use crate::endpoints::EndpointsControl;
use crate::informer::{
    CachedPod, ControllerInformer, InformerFactory, Namespace, ReplicaSetInformer,
};
use crate::labels::Selector;
use crate::record::{Recorder, Reference};
use crate::registry::StorageError;
use crate::replicaset::{
    self, ClaimOutcome, ReplicaSetConfig, ReplicaSetControl, ReplicaSetController, ReplicaSetReads,
};
use crate::replication_manager::{FreshReads, ManagerConfig, PodControl, ReplicationManager};
use crate::status::Metrics;

/// The replication manager reading and writing through `api`, on `informers` (a factory
/// over the same API); its events go to `config.events`.
pub fn replication_manager(
    api: &ApiClient,
    informers: &InformerFactory,
    config: ManagerConfig,
    metrics: Arc<Metrics>,
) -> ReplicationManager<ApiPodControl, ApiClient> {
    let control = ApiPodControl::new(
        api.clone(),
        config.events.clone(),
        informers.replication_controllers(),
    );
    ReplicationManager::with_io(api.clone(), control, config, metrics)
}

/// The ReplicaSet controller reading and writing through `api`, as [`replication_manager`].
pub fn replicaset_controller(
    api: &ApiClient,
    informers: &InformerFactory,
    config: ReplicaSetConfig,
    metrics: Arc<Metrics>,
) -> ReplicaSetController<ApiReplicaSetControl, ApiClient> {
    let control =
        ApiReplicaSetControl::new(api.clone(), config.events.clone(), informers.replica_sets());
    ReplicaSetController::with_io(api.clone(), control, config, metrics)
}

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
        pod: NewPod,
    ) -> anyhow::Result<CreateOutcome> {
        if !self.alive(controller) {
            return Ok(CreateOutcome::ControllerGone);
        }
        let pod = pod.into_pod();
        let created = create(&self.api, &pod).await;
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
        let deleted = delete(&self.api, namespace, name, resource_version).await;
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
        update_status(&self.api, &updated).await
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
        list_pods(self, namespace).await
    }
}

/// Every pod of `namespace` in one consistent list; a pod that does not decode is not an
/// item, but its name is taken (as `controller::replicas::list_pods` from etcd).
pub(super) async fn list_pods(
    api: &ApiClient,
    namespace: &str,
) -> Result<Namespace<CachedPod>, StorageError> {
    let listed = api.list::<Pod>(Some(namespace)).await?;
    let mut pods = Namespace::from_items(listed.items.iter().map(CachedPod::from));
    for error in &listed.errors {
        if let Some(name) = error.key.rsplit('/').next() {
            pods.mark_undecodable(name.into());
        }
    }
    Ok(pods)
}

/// [`ReplicaSetControl`] through the API. Its informer check is stronger than the
/// replication manager's, as the etcd one's guard is: a create or an adoption starts only
/// while the ReplicaSet informer holds the same incarnation at no later version than the
/// sync read (a resize it has seen stops the rest of the window).
#[derive(Clone)]
pub struct ApiReplicaSetControl {
    api: ApiClient,
    events: Recorder,
    replica_sets: ReplicaSetInformer,
}

impl ApiReplicaSetControl {
    pub fn new(
        api: ApiClient,
        events: Recorder,
        replica_sets: ReplicaSetInformer,
    ) -> ApiReplicaSetControl {
        ApiReplicaSetControl {
            api,
            events,
            replica_sets,
        }
    }

    /// Whether the informer holds `rs`'s incarnation, and (with `unchanged`) no later
    /// version of it than `rs`.
    fn holds(&self, rs: &ReplicaSet, unchanged: bool) -> bool {
        let meta = &rs.metadata;
        self.replica_sets
            .get(&meta.namespace, &meta.name)
            .is_some_and(|cached| {
                cached.metadata.uid == meta.uid
                    && (!unchanged || cached.metadata.resource_version <= meta.resource_version)
            })
    }

    /// Reads the pod, checks it is still at `resource_version`, changes it with `change`
    /// and writes it back at that version.
    async fn rewrite_pod(
        &self,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
        change: impl FnOnce(&mut Pod) -> bool,
    ) -> anyhow::Result<ClaimOutcome> {
        let mut pod = match self.api.get::<Pod>(namespace, name).await {
            Ok(pod) => pod,
            Err(StorageError::NotFound { .. } | StorageError::Decode(_)) => {
                return Ok(ClaimOutcome::PodChanged)
            }
            Err(e) => return Err(e.into()),
        };
        if pod.metadata.resource_version != Some(resource_version) || !change(&mut pod) {
            return Ok(ClaimOutcome::PodChanged);
        }
        match self.api.update(&pod, false).await {
            Ok(stored) => Ok(ClaimOutcome::Done(
                stored.metadata.resource_version.unwrap_or_default(),
            )),
            Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => {
                Ok(ClaimOutcome::PodChanged)
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl ReplicaSetControl for ApiReplicaSetControl {
    async fn create_pod(&self, rs: &ReplicaSet, pod: NewPod) -> anyhow::Result<CreateOutcome> {
        if !self.holds(rs, true) {
            return Ok(CreateOutcome::ControllerGone);
        }
        let pod = pod.into_pod();
        let created = create(&self.api, &pod).await;
        record_create(
            &self.events,
            Reference::of(rs),
            &pod.metadata.name,
            &created,
        );
        created
    }

    async fn delete_pod(
        &self,
        rs: &ReplicaSet,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> anyhow::Result<DeleteOutcome> {
        if !self.holds(rs, false) {
            return Ok(DeleteOutcome::ControllerGone);
        }
        let deleted = delete(&self.api, namespace, name, resource_version).await;
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
        if !self.holds(rs, true) {
            return Ok(ClaimOutcome::OwnerChanged);
        }
        self.rewrite_pod(namespace, name, resource_version, |pod| {
            replicaset::adopt(pod, rs)
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
        self.rewrite_pod(namespace, name, resource_version, |pod| {
            replicaset::release(pod, rs)
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
        update_status(&self.api, &updated).await
    }
}

impl ReplicaSetReads for ApiClient {
    async fn replica_set(&self, namespace: &str, name: &str) -> Result<ReplicaSet, StorageError> {
        self.get(namespace, name).await
    }

    async fn pods(&self, namespace: &str) -> Result<Namespace<CachedPod>, StorageError> {
        list_pods(self, namespace).await
    }
}

/// A `POST` of `pod` under its name: a 409 AlreadyExists is create-if-absent.
async fn create(api: &ApiClient, pod: &Pod) -> anyhow::Result<CreateOutcome> {
    match api.create(pod).await {
        Ok(created) => Ok(CreateOutcome::Created(
            created.metadata.resource_version.unwrap_or_default(),
        )),
        Err(StorageError::AlreadyExists { .. }) => {
            let meta = &pod.metadata;
            let existing = api.get::<Pod>(&meta.namespace, &meta.name).await.ok();
            Ok(CreateOutcome::Exists(existing.map(Box::new)))
        }
        Err(e) => Err(e.into()),
    }
}

/// A `DELETE` of the ranked pod at the resourceVersion it was ranked at.
async fn delete(
    api: &ApiClient,
    namespace: &str,
    name: &str,
    resource_version: ResourceVersion,
) -> anyhow::Result<DeleteOutcome> {
    match api
        .delete::<Pod>(namespace, name, Some(resource_version), true)
        .await
    {
        Ok(revision) => Ok(DeleteOutcome::Deleted(revision)),
        Err(StorageError::Conflict { .. }) => Ok(DeleteOutcome::Changed),
        Err(StorageError::NotFound { .. }) => Ok(DeleteOutcome::Gone),
        Err(e) => Err(e.into()),
    }
}

/// A `PUT` of `updated` to its `/status` at the resourceVersion it was read at.
async fn update_status<T: Object>(api: &ApiClient, updated: &T) -> anyhow::Result<StatusOutcome> {
    match api.update(updated, true).await {
        Ok(stored) => Ok(StatusOutcome::Written(
            stored.metadata().resource_version.unwrap_or_default(),
        )),
        Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => {
            Ok(StatusOutcome::Changed)
        }
        Err(e) => Err(anyhow::Error::from(e).context("update status")),
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
                    // Without the uid the recorder gave it: the server gave the stored one
                    // its own, and a stated uid is a precondition.
                    let mut event = event;
                    if let Some(meta) = event.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                        meta.remove("uid");
                        meta.remove("resourceVersion");
                    }
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

impl EndpointsControl for ApiClient {
    async fn service(&self, namespace: &str, name: &str) -> Result<Service, StorageError> {
        self.get(namespace, name).await
    }

    async fn pods(&self, namespace: &str, selector: &Selector) -> Result<Vec<Pod>, StorageError> {
        let listed = self.list::<Pod>(Some(namespace)).await?;
        Ok(listed
            .items
            .into_iter()
            .filter(|pod| selector.matches(&pod.metadata.labels))
            .collect())
    }

    async fn endpoints(&self, namespace: &str, name: &str) -> Result<Endpoints, StorageError> {
        self.get(namespace, name).await
    }

    async fn create(&self, endpoints: &Endpoints) -> Result<(), StorageError> {
        ApiClient::create(self, endpoints).await.map(drop)
    }

    async fn update(&self, endpoints: &Endpoints) -> Result<(), StorageError> {
        ApiClient::update(self, endpoints, false).await.map(drop)
    }

    async fn delete(&self, namespace: &str, name: &str) -> Result<(), StorageError> {
        ApiClient::delete::<Endpoints>(self, namespace, name, None, false)
            .await
            .map(drop)
    }

    async fn list_endpoints(&self) -> Result<Vec<Endpoints>, StorageError> {
        Ok(self.list::<Endpoints>(None).await?.items)
    }
}
