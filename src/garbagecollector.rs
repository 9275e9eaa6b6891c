//! The garbage collector: deletes objects whose owners are gone, carries out foreground
//! and orphaning deletions, deletes what has a `deletionTimestamp` and no finalizers left,
//! and collects terminated pods beyond a threshold.
//!
//! Mirrors Kubernetes' `pkg/controller/garbagecollector/` (`GraphBuilder`,
//! `attemptToDeleteItem`, `classifyReferences`, `processDeletingDependentsItem`,
//! `orphanDependents`) and `pkg/controller/podgc/gc_controller.go` (`gcTerminated`),
//! which postdate 2014 (2014 left a deleted controller's pods running: weakness 10 of
//! docs/2014.md; the collector's rows are in docs/departures.md). Against etcd kcm
//! has no apiserver, so the collector also does the apiserver's part of a deletion: an
//! object with a `deletionTimestamp` and no finalizers is deleted, but for a pod in its
//! grace period (`deletionGracePeriodSeconds`, the deadline in `deletionTimestamp`),
//! which is its kubelet's to delete until the deadline passes.
//!
//! Its IO goes through one seam, [`GcStore`] (`store.rs`): fresh gets and lists, deletes
//! at a resourceVersion, metadata updates, each write with the [`OwnerGuard`]s (G1) it was
//! decided on. [`EtcdGc`] checks the guards in the write's own etcd transaction
//! (`KeyCondition`s); `apiclient::gc::ApiGc` runs the same collector through a Kubernetes
//! API server (`kcm controller-manager --kubeconfig`), where the guards become fresh
//! reads of the owners just before the write and the server does the apiserver's part
//! (docs/invariants.md, "Through the API", says what holds there).
//!
//! Its graph ([`graph::Graph`]) is built from the shared informers of every kind kcm
//! stores; owners are looked up in the dependent's namespace, by name, and count only
//! with the referenced uid (kubernetes #65200). A reference to any other kind is solid.
//! As the other controllers, a sync observes (the caches, and etcd where an invariant
//! asks for a fresh read), decides in pure functions (`plan.rs`: [`decide`],
//! [`plan_deletion`], [`foreground_dependent`], ...) and writes here.
//!
//! Invariants against etcd (`tests/it/controllers/gc.rs` checks them against etcd's
//! history; `tests/it/controllers/gc_through_api.rs` through the API):
//! - G1: a dependent is deleted only in a transaction that also finds each of its owners
//!   absent, still the other incarnation the collector read (same `mod_revision`), or
//!   alive in a foreground deletion: a stale or partial cache never deletes a live
//!   object's dependent (kubernetes #88097);
//! - G2: an owner in a foreground deletion is deleted only after a fresh etcd read found
//!   no dependent with `blockOwnerDeletion` left;
//! - G3: an orphaning owner's dependents are found by a fresh etcd read (so at a revision
//!   after its `deletionTimestamp`), lose the reference, and none is deleted for it;
//! - G4: the collector deletes no object without owner references, except one with a
//!   `deletionTimestamp` and no finalizers (the apiserver's part; a gracefully
//!   terminating pod only once its deadline passed) and terminated pods beyond the
//!   threshold;
//! - unknown finalizers are left alone; all state is in etcd, so a collector killed
//!   mid-way finishes after a restart.

mod graph;
mod plan;
mod store;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::api::{grace_remaining, ObjectMeta, ResourceVersion};
use crate::controller::{self, sync_handler, Runner, RunnerConfig};
use crate::informer::{
    Cached, ControllerInformer, Delta, DeploymentInformer, EndpointsInformer, Informer,
    InformerFactory, ObjectKey, Ownership, PodInformer, ReplicaSetInformer, ServiceInformer,
};
use crate::registry::{Registry, StorageError};
use crate::status::Metrics;

pub use graph::{object_key, parse_key, Graph, Resource};
pub use plan::{
    blocks, classify, decide, foreground_dependent, owner_condition, plan_deletion,
    terminated_to_delete, Action, Class, Deletion, Found, InForeground, FOREGROUND, ORPHAN,
};
pub(crate) use store::with_type;
pub use store::{is_expected, EtcdGc, Expect, GcStore, OwnerGuard, Propagation, Updated};

/// How often a write the collector owes an owner in deletion is tried again at once after
/// a conflict (status writes to it may race).
const MAX_WRITE_ATTEMPTS: usize = 5;

/// How often terminated pods are counted (Kubernetes' `gcCheckPeriod`).
pub const POD_GC_PERIOD: Duration = Duration::from_secs(20);

/// The collector's settings.
#[derive(Clone, Debug)]
pub struct GcConfig {
    /// Keys synced in parallel (`--concurrent-gc-syncs`, default 20).
    pub concurrent_syncs: usize,
    /// Terminated pods kept before the oldest are deleted
    /// (`--terminated-pod-gc-threshold`, default 12500; 0 disables).
    pub terminated_pod_gc_threshold: usize,
    /// How often every object with owners or in deletion is looked at again (default 5
    /// min: a safety net; changes and failed syncs are queued on their own).
    pub sync_period: Duration,
    /// How long shutdown waits for in-flight syncs.
    pub shutdown_timeout: Duration,
}

impl Default for GcConfig {
    fn default() -> Self {
        GcConfig {
            concurrent_syncs: 20,
            terminated_pod_gc_threshold: 12_500,
            sync_period: Duration::from_secs(300),
            shutdown_timeout: Duration::from_secs(8),
        }
    }
}

/// The informers of every kind the collector watches.
#[derive(Clone)]
struct Caches {
    pods: PodInformer,
    controllers: ControllerInformer,
    services: ServiceInformer,
    endpoints: EndpointsInformer,
    replica_sets: ReplicaSetInformer,
    deployments: DeploymentInformer,
}

impl Caches {
    fn new(informers: &InformerFactory) -> Caches {
        Caches {
            pods: informers.pods(),
            controllers: informers.replication_controllers(),
            services: informers.services(),
            endpoints: informers.endpoints(),
            replica_sets: informers.replica_sets(),
            deployments: informers.deployments(),
        }
    }

    fn ownership(&self, resource: Resource, namespace: &str, name: &str) -> Option<Ownership> {
        fn get<I: Cached>(i: &Informer<I>, namespace: &str, name: &str) -> Option<Ownership> {
            i.get(namespace, name).map(|item| item.ownership())
        }
        match resource {
            Resource::Pods => get(&self.pods, namespace, name),
            Resource::ReplicationControllers => get(&self.controllers, namespace, name),
            Resource::Services => get(&self.services, namespace, name),
            Resource::Endpoints => get(&self.endpoints, namespace, name),
            Resource::ReplicaSets => get(&self.replica_sets, namespace, name),
            Resource::Deployments => get(&self.deployments, namespace, name),
        }
    }
}

/// `GarbageCollector`, over a [`GcStore`] (etcd's by default).
pub struct GarbageCollector<S: GcStore = EtcdGc> {
    inner: Arc<Inner<S>>,
}

struct Inner<S> {
    store: S,
    config: GcConfig,
    metrics: Arc<Metrics>,
    graph: Mutex<Graph>,
    caches: std::sync::OnceLock<Caches>,
    /// The `(apiVersion, kind)` of references to kinds kcm does not store, reported once.
    reported: Mutex<HashSet<(String, String)>>,
}

impl GarbageCollector {
    /// The collector reading and writing etcd through `registry`.
    pub fn new(registry: Registry, config: GcConfig, metrics: Arc<Metrics>) -> Self {
        GarbageCollector::with_store(EtcdGc::new(registry), config, metrics)
    }
}

impl<S: GcStore> GarbageCollector<S> {
    /// The collector reading and writing through `store`.
    pub fn with_store(store: S, config: GcConfig, metrics: Arc<Metrics>) -> Self {
        GarbageCollector {
            inner: Arc::new(Inner {
                store,
                config,
                metrics,
                graph: Mutex::default(),
                caches: std::sync::OnceLock::new(),
                reported: Mutex::default(),
            }),
        }
    }

    /// Sets the collector up on `informers` (every kind kcm stores) and returns it running
    /// until `stop` is cancelled. Subscribes at once: call it before the factory starts.
    pub fn start(
        self,
        informers: &InformerFactory,
        stop: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        let caches = Caches::new(informers);
        let _ = self.inner.caches.set(caches.clone());
        let config = &self.inner.config;
        let mut runner = Runner::new(
            "garbagecollector",
            RunnerConfig::new(
                config.concurrent_syncs,
                config.sync_period,
                config.shutdown_timeout,
            ),
            self.inner.metrics.clone(),
        );
        {
            let inner = self.inner.clone();
            runner = runner.resync(move || inner.graph().keys());
        }
        runner = watch(runner, &caches.pods, Resource::Pods, &self.inner);
        runner = watch(
            runner,
            &caches.controllers,
            Resource::ReplicationControllers,
            &self.inner,
        );
        runner = watch(runner, &caches.services, Resource::Services, &self.inner);
        runner = watch(runner, &caches.endpoints, Resource::Endpoints, &self.inner);
        runner = watch(
            runner,
            &caches.replica_sets,
            Resource::ReplicaSets,
            &self.inner,
        );
        runner = watch(
            runner,
            &caches.deployments,
            Resource::Deployments,
            &self.inner,
        );
        let handler = sync_handler(self.inner.clone(), |inner, key: String| async move {
            // A pod within its grace period is looked at again when it ends.
            let grace = inner.sync(&key).await?;
            Ok(controller::Action::requeue_after(grace))
        });
        let pod_gc = self.inner.clone().collect_terminated_pods(stop.clone());
        let run = runner.run(handler, stop.cancelled_owned());
        Box::pin(async move {
            let (result, ()) = futures::future::join(run, pod_gc).await;
            result
        })
    }

    /// Syncs one object `resource/namespace/name` (tests).
    ///
    /// # Errors
    /// As the sync.
    pub async fn sync(&self, key: &str) -> anyhow::Result<()> {
        self.inner.sync(key).await.map(drop)
    }
}

/// Feeds `informer`'s changes into the graph and queues what they concern.
fn watch<I: Cached, S: GcStore>(
    runner: Runner<String>,
    informer: &Informer<I>,
    resource: Resource,
    inner: &Arc<Inner<S>>,
) -> Runner<String> {
    let inner = inner.clone();
    runner.watches(informer, move |delta: &Delta<I>| {
        let old = delta.old.as_ref().map(|o| o.ownership());
        let new = delta.new.as_ref().map(|o| o.ownership());
        inner.graph().apply(
            resource,
            &delta.namespace,
            &delta.name,
            old.as_ref(),
            new.as_ref(),
        )
    })
}

impl<S: GcStore> Inner<S> {
    fn graph(&self) -> std::sync::MutexGuard<'_, Graph> {
        self.graph.lock().expect("graph lock")
    }

    fn caches(&self) -> &Caches {
        self.caches
            .get()
            .expect("the collector reads caches once started")
    }

    /// Syncs one object; `Some(remaining)` for a pod left to its kubelet for what remains
    /// of its grace period.
    async fn sync(&self, key: &str) -> anyhow::Result<Option<Duration>> {
        let Some((resource, namespace, name)) = parse_key(key) else {
            return Ok(None);
        };
        let Some(object) = self.caches().ownership(resource, namespace, name) else {
            return Ok(None);
        };
        if object.deleting {
            return self.deleting(resource, namespace, name, &object).await;
        }
        if object.owners.is_empty() {
            return Ok(None);
        }
        self.attempt_to_delete(resource, namespace, name, &object, None)
            .await
            .map(|()| None)
    }

    /// What stands at the name an owner reference gives, in the cache; `None` for a
    /// kind kcm does not store (reported once).
    fn found(&self, namespace: &str, reference: &crate::api::OwnerReference) -> Option<Found> {
        if reference.name.is_empty() || reference.uid.is_empty() {
            // Invalid (the apiserver would have refused it): never a reason to delete.
            let first = self
                .reported
                .lock()
                .expect("reported lock")
                .insert(("".into(), "invalid".into()));
            if first {
                tracing::warn!(
                    kind = %reference.kind, name = %reference.name, uid = %reference.uid,
                    "owner references without a name or uid are kept; reported once"
                );
            }
            return None;
        }
        let Some(resource) = Resource::of_reference(reference) else {
            let first = self
                .reported
                .lock()
                .expect("reported lock")
                .insert((reference.api_version.clone(), reference.kind.clone()));
            if first {
                tracing::warn!(
                    api_version = %reference.api_version, kind = %reference.kind,
                    "owner references to this kind are kept (kcm does not store it); reported once"
                );
            }
            return None;
        };
        Some(
            match self
                .caches()
                .ownership(resource, namespace, &reference.name)
            {
                None => Found::Absent,
                Some(owner) => Found::Object {
                    uid: owner.uid,
                    resource_version: owner.resource_version,
                    deletion: owner.deleting.then_some(owner.finalizers),
                },
            },
        )
    }

    /// `attemptToDeleteItem`: classifies a live dependent's owners and deletes it, removes
    /// its dangling references, or keeps it. `foreground_owner` is the guard of an owner
    /// whose foreground deletion asks (its reference then counts as waiting, whatever the
    /// cache says of it).
    async fn attempt_to_delete(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
        object: &Ownership,
        foreground_owner: Option<&OwnerGuard>,
    ) -> anyhow::Result<()> {
        let mut classes = Vec::new();
        let mut guards = Vec::new();
        for reference in &object.owners {
            if let Some(owner) = foreground_owner.filter(|owner| owner.uid == reference.uid) {
                classes.push(owner.class.clone());
                guards.push(owner.clone());
                continue;
            }
            let found = self.found(namespace, reference);
            let class = classify(reference, found.as_ref());
            if let Some(owner) = Resource::of_reference(reference) {
                if class != Class::Solid {
                    guards.push(OwnerGuard {
                        resource: owner,
                        name: reference.name.clone(),
                        uid: reference.uid.clone(),
                        class: class.clone(),
                    });
                }
            }
            classes.push(class);
        }
        let has_dependents = self.graph().has_dependents(namespace, &object.uid);
        let rv = ResourceVersion(object.resource_version);
        let key = object_key(resource, namespace, name);
        match decide(&classes, has_dependents) {
            Action::Keep => Ok(()),
            Action::Delete { foreground } => {
                let propagation = if foreground {
                    Propagation::Foreground
                } else {
                    Propagation::Background
                };
                let deleted = self
                    .store
                    .delete(resource, namespace, name, rv, propagation, &guards)
                    .await;
                match deleted {
                    Ok(at) if foreground => {
                        tracing::info!(%key, revision = at.0, "garbage collector started a foreground deletion of a dependent that owns others");
                        Ok(())
                    }
                    Ok(at) => {
                        tracing::info!(%key, revision = at.0, "garbage collector deleted a dependent whose owners are gone or deleting");
                        Ok(())
                    }
                    Err(StorageError::NotFound { .. }) => Ok(()),
                    Err(e) => Err(e.into()),
                }
            }
            Action::RemoveReferences(indexes) => {
                let uids: Vec<String> = indexes
                    .iter()
                    .map(|&i| object.owners[i].uid.clone())
                    .collect();
                self.update_meta(resource, namespace, name, Expect::At(rv), &guards, |meta| {
                    meta.owner_references.retain(|r| !uids.contains(&r.uid));
                })
                .await?;
                tracing::info!(%key, removed = ?uids, "garbage collector removed references to owners that are gone");
                Ok(())
            }
        }
    }

    /// An object with a `deletionTimestamp`: deleted when no finalizer is left; its
    /// dependents orphaned or deleted for `orphan` and `foregroundDeletion`, then that
    /// finalizer removed; otherwise left to whoever owns its finalizers
    /// ([`plan_deletion`]). A gracefully terminating pod is left to its kubelet until its
    /// grace period is over: `Some` of what remains of it.
    async fn deleting(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
        object: &Ownership,
    ) -> anyhow::Result<Option<Duration>> {
        let deletion = plan_deletion(&object.finalizers);
        match deletion {
            // Through an API server, the server deletes it itself (or it is a pod in
            // its grace period, its kubelet's).
            Deletion::Delete if self.store.deletes_finalized() => return Ok(None),
            Deletion::Delete => {
                return self
                    .delete_finished(resource, namespace, name, &object.uid)
                    .await
            }
            // Someone else's finalizers: the object waits for them.
            Deletion::Wait => return Ok(None),
            Deletion::Orphan => {
                self.orphan_dependents(resource, namespace, name, object)
                    .await?
            }
            Deletion::Foreground => {
                if !self
                    .delete_dependents(resource, namespace, name, object)
                    .await?
                {
                    return Ok(None);
                }
            }
        }
        let Some(finalizer) = deletion.finalizer() else {
            return Ok(None);
        };
        // The finalizer goes (from the same incarnation, whatever status writes came
        // meanwhile), then the owner when it was the last.
        let updated = self
            .update_meta(
                resource,
                namespace,
                name,
                Expect::Deleting(&object.uid),
                &[],
                |meta| meta.finalizers.retain(|f| f != finalizer),
            )
            .await?;
        let key = object_key(resource, namespace, name);
        tracing::info!(%key, finalizer, "garbage collector removed a finalizer");
        if let (Some((_, true)), false) = (updated, self.store.deletes_finalized()) {
            return self
                .delete_finished(resource, namespace, name, &object.uid)
                .await;
        }
        Ok(None)
    }

    /// `orphanDependents`: every dependent of the owner `object` loses its reference to
    /// it. They are read fresh from etcd, at a revision after the deletionTimestamp: no
    /// dependent that referenced the owner then is missed, and none gains a reference
    /// since (adoption requires a live owner without a deletionTimestamp).
    async fn orphan_dependents(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
        object: &Ownership,
    ) -> anyhow::Result<()> {
        let key = object_key(resource, namespace, name);
        for (dep_resource, dep_name, dep) in self.fresh_dependents(namespace, &object.uid).await? {
            let uid = object.uid.clone();
            self.update_meta(
                dep_resource,
                namespace,
                &dep_name,
                Expect::At(ResourceVersion(dep.resource_version)),
                &[],
                |meta| meta.owner_references.retain(|r| r.uid != uid),
            )
            .await?;
            tracing::info!(key = %object_key(dep_resource, namespace, &dep_name), owner = %key, "garbage collector orphaned a dependent");
        }
        Ok(())
    }

    /// `processDeletingDependentsItem`: asks every dependent of the owner `object` (from
    /// the cache) to go, those with another live owner losing the reference instead;
    /// whether none blocks the owner's deletion any more (the cache shows none, then a
    /// fresh etcd read finds none).
    async fn delete_dependents(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
        object: &Ownership,
    ) -> anyhow::Result<bool> {
        let key = object_key(resource, namespace, name);
        let owner = OwnerGuard {
            resource,
            name: name.to_string(),
            uid: object.uid.clone(),
            class: Class::Waiting {
                at: object.resource_version,
            },
        };
        let mut failed = None;
        // Blocking dependents the cache still shows (those asked to go just now
        // included): their deletes queue the owner again, so the etcd list below runs
        // once the cache shows none, not once per dependent.
        let mut blocking_in_cache = 0;
        let dependents = self.graph().dependents_of(namespace, &object.uid);
        for dep_key in dependents {
            let Some((dep_resource, _, dep_name)) = parse_key(&dep_key) else {
                continue;
            };
            let Some(dep) = self.caches().ownership(dep_resource, namespace, dep_name) else {
                continue;
            };
            let Some(stands) = foreground_dependent(&object.uid, &dep) else {
                continue;
            };
            if stands.blocks {
                blocking_in_cache += 1;
            }
            if !stands.ask {
                continue;
            }
            if let Err(e) = self
                .attempt_to_delete(dep_resource, namespace, dep_name, &dep, Some(&owner))
                .await
            {
                tracing::debug!(key = %dep_key, error = %format!("{e:#}"), "foreground: a dependent's delete failed; retrying");
                failed = Some(e);
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        if blocking_in_cache > 0 {
            tracing::debug!(%key, blocking_in_cache, "foreground deletion waits for blocking dependents");
            return Ok(false);
        }
        let blocking = self
            .fresh_dependents(namespace, &object.uid)
            .await?
            .into_iter()
            .filter(|(_, _, dep)| blocks(&object.uid, dep))
            .count();
        if blocking > 0 {
            tracing::debug!(%key, blocking, "foreground deletion waits for blocking dependents");
            return Ok(false);
        }
        Ok(true)
    }

    /// The apiserver's part of a deletion: deletes `resource/namespace/name` if it is still
    /// the incarnation `uid`, in deletion, with no finalizer left, at the revision read
    /// (read again after a conflict with, say, a status write). A pod within its grace
    /// period is its kubelet's to delete: `Some` of what remains of the period.
    async fn delete_finished(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> anyhow::Result<Option<Duration>> {
        let key = object_key(resource, namespace, name);
        for _ in 0..MAX_WRITE_ATTEMPTS {
            let Some(meta) = self.store.get(resource, namespace, name).await? else {
                return Ok(None);
            };
            let (fresh, grace) = (
                Ownership::of(&meta),
                grace_remaining(&meta, SystemTime::now()),
            );
            if fresh.uid != uid || !fresh.deleting || !fresh.finalizers.is_empty() {
                return Ok(None);
            }
            if grace.is_some() {
                return Ok(grace);
            }
            let rv = ResourceVersion(fresh.resource_version);
            let background = Propagation::Background;
            match self
                .store
                .delete(resource, namespace, name, rv, background, &[])
                .await
            {
                Ok(at) => {
                    tracing::info!(%key, revision = at.0, "deleted an object in deletion with no finalizers left");
                    return Ok(None);
                }
                Err(StorageError::NotFound { .. }) => return Ok(None),
                Err(StorageError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        anyhow::bail!("{key} kept changing; deleting it later")
    }

    /// The objects of `namespace` that reference the owner `uid`, read fresh (from etcd,
    /// or a consistent list through the API).
    async fn fresh_dependents(
        &self,
        namespace: &str,
        uid: &str,
    ) -> anyhow::Result<Vec<(Resource, String, Ownership)>> {
        let mut found = Vec::new();
        for resource in Resource::ALL {
            let list: Vec<_> = self
                .store
                .list(resource, namespace)
                .await?
                .into_iter()
                .map(|meta| (meta.name.clone(), Ownership::of(&meta)))
                .collect();
            found.extend(
                list.into_iter()
                    .filter(|(_, o)| o.owners.iter().any(|r| r.uid == uid))
                    .map(|(name, o)| (resource, name, o)),
            );
        }
        Ok(found)
    }

    /// Changes the metadata of `resource/namespace/name` (while `guards` hold), if it is
    /// as `expect` says. Returns the new resourceVersion and whether it has a
    /// deletionTimestamp and no finalizers; `None` when it was gone (or, for
    /// [`Expect::Deleting`], is not that incarnation in deletion any more).
    ///
    /// # Errors
    /// When it changed since the revision [`Expect::At`] gives (it will be synced again),
    /// or a write fails.
    async fn update_meta(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
        expect: Expect<'_>,
        guards: &[OwnerGuard],
        change: impl Fn(&mut ObjectMeta) + Sync,
    ) -> anyhow::Result<Option<(ResourceVersion, bool)>> {
        let key = object_key(resource, namespace, name);
        for _ in 0..MAX_WRITE_ATTEMPTS {
            let written = self
                .store
                .update_meta(resource, namespace, name, expect, guards, &change)
                .await;
            match written {
                Ok(Updated::Absent) => return Ok(None),
                Ok(Updated::Unexpected) => match expect {
                    Expect::At(rv) => {
                        anyhow::bail!("{key} changed since the garbage collector read it at {rv}")
                    }
                    Expect::Deleting(_) => return Ok(None),
                },
                Ok(Updated::Written {
                    resource_version,
                    finished,
                }) => return Ok(Some((resource_version, finished))),
                Err(StorageError::Conflict { .. }) if matches!(expect, Expect::Deleting(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        anyhow::bail!("{key} kept changing; updating it later")
    }

    /// Every [`POD_GC_PERIOD`], deletes the oldest terminated pods beyond the threshold.
    async fn collect_terminated_pods(self: Arc<Self>, stop: CancellationToken) {
        let threshold = self.config.terminated_pod_gc_threshold;
        if threshold == 0 {
            return;
        }
        let pods = self.caches().pods.clone();
        tokio::select! {
            () = stop.cancelled() => return,
            () = pods.wait_synced() => {}
        }
        loop {
            let terminated = pods.filter_map(|namespace, pod| {
                (!pod.is_active()).then(|| {
                    let created = pod.creation_timestamp.map(|seconds| {
                        std::time::UNIX_EPOCH + Duration::from_secs(u64::from(seconds.get()))
                    });
                    let key = ObjectKey::new(namespace.clone(), pod.name.clone());
                    (created, key, pod.resource_version)
                })
            });
            for (key, rv) in terminated_to_delete(terminated, threshold) {
                let rv = ResourceVersion(rv);
                let background = Propagation::Background;
                match self
                    .store
                    .delete(
                        Resource::Pods,
                        &key.namespace,
                        &key.name,
                        rv,
                        background,
                        &[],
                    )
                    .await
                {
                    Ok(_) => {
                        tracing::info!(pod = %key, threshold, "deleted a terminated pod beyond --terminated-pod-gc-threshold")
                    }
                    Err(e) => {
                        tracing::debug!(pod = %key, error = %e, "terminated pod not deleted; next round")
                    }
                }
                if stop.is_cancelled() {
                    return;
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(POD_GC_PERIOD) => {}
            }
        }
    }
}
