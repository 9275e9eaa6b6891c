//! The replication manager: keeps `spec.replicas` active pods for every controller.
//!
//! Mirrors 2014's `pkg/controller/replication_controller.go` (late 2014): a loop over a
//! resync tick and controller watch events, `syncReplicationController` listing the
//! controller's pods by selector, `filterActivePods`, and creating or deleting the
//! difference through a `PodControl`. Go → Rust (the 2014 code itself, line for line, is
//! `crate::replication_2014`):
//!
//! | 2014 | kcm |
//! |---|---|
//! | `NewReplicationManager`, `Run(period)` | [`ReplicationManager::new`], [`ReplicationManager::start`] (or `run`) on a `controller::Runner` |
//! | `watchControllers` (`select` over tick and watch, resourceVersion kept) | the runner's loop over the shared informers (`informer`, which keep the resourceVersion); `controller_changed` and `pod_changed` turn changes into keys |
//! | `synchronize` (list all, sync each in parallel) | the runner's resync tick, queueing every known key; [`ReplicationManager::sync_all`] for one pass |
//! | `syncReplicationController` | `sync_replication_controller` (`sync.rs`): observe, [`decide`], act |
//! | `filterActivePods` | `plan::filter_active_pods` |
//! | the `diff` arithmetic | [`decide`], returning a [`Decision`] |
//! | one goroutine per create or delete, `WaitGroup` | the replica writer every replica controller shares: [`create_replicas`](crate::controller::replicas::create_replicas) (slow-start batches) and [`delete_pods`](crate::controller::replicas::delete_pods), called from `sync.rs` |
//! | `PodControlInterface`, `RealPodControl` | [`PodControl`], [`EtcdPodControl`] |
//! | `createReplica` (template labels and spec, no name) | [`PodControl::create_pod`] of [`new_pod_from_template`], named by [`crate::controller::pod_name`] |
//! | `deletePod` | [`PodControl::delete_pod`], ranked first by [`crate::controller::rank_for_deletion`] |
//! | (none: the apiserver computed status) | [`PodControl::update_status`], through [`write_status`](crate::controller::replicas::write_status) |
//!
//! What 2014 got wrong is fixed as listed in docs/departures.md (the `manager:` rows; the
//! weaknesses are numbered in docs/2014.md); the short version:
//! - syncs go through a deduplicating [`WorkQueue`] with N workers and per-key backoff,
//!   so a slow resync never holds back event work and a key never syncs twice at once;
//! - a pod watch heals within milliseconds instead of the next tick;
//! - a sync observes once, decides in a pure function ([`decide`]) and acts only through
//!   [`PodControl`], status write included;
//! - creates are idempotent: replica slot `i` of controller `uid` always gets the same
//!   pod name, written create-if-absent, so concurrent syncs or two kcm processes cannot
//!   create the same replica twice; creates are capped per sync and slow-started;
//! - scale-down deletes the lowest-ranked pods, each guarded by its resourceVersion;
//! - a deleted controller creates and deletes nothing; status.replicas is written;
//! - controllers and pods are read from shared informer caches (`informer`), not listed
//!   per sync: a resync of 1,000 controllers reads no etcd at all;
//! - a controller that validation rejects (replicas beyond int32, a template without
//!   labels, ...) gets no writes and one warning per resourceVersion;
//! - pods that carry a controller reference (a ReplicaSet's) are not the manager's: it
//!   neither counts nor deletes them, so it coexists with ReplicaSets (`replicaset`);
//! - controllers whose selectors overlap still fight, as in 2014 (kubernetes #2210), but
//!   each overlapping pair is warned about once (`overlap`, as Kubernetes did from 2015)
//!   and counted in `kcm_replication_overlapping_controllers`.
//!
//! Invariants:
//! - one view: a sync's count of active pods and its free slot names come from one
//!   consistent view of the namespace (one read of the cache, or one etcd list), and it
//!   creates only the first `spec.replicas - active` free names of the slot sequence; so
//!   two managers deciding from different views either pick the same name (create-if-absent
//!   refuses the second) or account for each other's pods (ARCHITECTURE.md, "Invariants");
//! - one incarnation: every pod write commits only while the controller it was decided
//!   for still exists as the same incarnation (its key's create revision);
//! - read-your-writes: a sync counts pods from the cache only once the cache has applied
//!   every write this manager made for that controller (the header revision of each
//!   create, delete and status write is recorded per controller); a cache that does not
//!   catch up within `cache_wait` is bypassed for a fresh etcd read;
//! - a controller with a `deletionTimestamp` (a delete waiting for finalizers) gets status
//!   writes only.

mod overlap;
mod plan;
mod pod_control;
mod sync;

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::api::ReplicationController;
use crate::controller::{
    sync_handler, Action, KeyMemory, ObjectKey, Runner, RunnerConfig, SelectorIndex, SyncHandler,
};
use crate::etcd_watcher::{BackoffConfig, Watcher};
use crate::informer::{CachedPod, ControllerInformer, Delta, InformerFactory, PodInformer};
use crate::registry::Registry;
use crate::status::Metrics;

pub use plan::{decide, new_pod_from_template, Decision};
pub use pod_control::{EtcdPodControl, FreshReads, PodControl};

use crate::controller::replicas::Written;

/// The annotation naming the controller that created a pod.
pub const CREATED_BY_ANNOTATION: &str = "kubernetes.io/created-by";

/// Settings of the replication manager. Defaults are 2014's where 2014 had them.
#[derive(Clone, Debug)]
pub struct ManagerConfig {
    /// How often every controller is synced even without events. Default 10 s (2014).
    pub sync_period: Duration,
    /// Workers syncing controllers in parallel. Default 5.
    pub concurrent_syncs: usize,
    /// Most pod creates or deletes in flight for one controller. Default 500.
    pub burst_replicas: usize,
    /// How long shutdown waits for in-flight syncs. Default 8 s.
    pub shutdown_timeout: Duration,
    /// Backoff of the controller and pod watches.
    pub watch_backoff: BackoffConfig,
    /// How long a sync waits for the caches to apply this manager's own last writes for
    /// the controller before it reads etcd instead. Default 500 ms.
    pub cache_wait: Duration,
    /// Count pods from a fresh etcd list of the namespace in every sync, as 2014 did,
    /// instead of from the shared cache. Default false; `kcm bench` measures both.
    pub fresh_reads: bool,
    /// Where its events go (`SuccessfulCreate`, ...). Default: nowhere; the controller
    /// manager gives it its recorder.
    pub events: crate::record::Recorder,
}

impl ManagerConfig {
    /// The runner settings of this controller.
    pub fn runner(&self) -> RunnerConfig {
        RunnerConfig::new(
            self.concurrent_syncs,
            self.sync_period,
            self.shutdown_timeout,
        )
    }
}

impl Default for ManagerConfig {
    fn default() -> Self {
        ManagerConfig {
            sync_period: Duration::from_secs(10),
            concurrent_syncs: 5,
            burst_replicas: 500,
            shutdown_timeout: Duration::from_secs(8),
            watch_backoff: BackoffConfig::default(),
            cache_wait: Duration::from_millis(500),
            fresh_reads: false,
            events: crate::record::Recorder::discard(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The manager

/// `ReplicationManager`.
pub struct ReplicationManager<P: PodControl = EtcdPodControl, R: FreshReads = Registry> {
    inner: Arc<Inner<P, R>>,
    sync_handler: Option<SyncHandler>,
}

/// What the workers share.
struct Inner<P, R> {
    /// Where syncs read what the caches cannot serve.
    reads: R,
    /// Where syncs write.
    pod_control: P,
    config: ManagerConfig,
    metrics: Arc<Metrics>,
    /// Per controller key: the resourceVersion last warned about (invalid or malformed), so
    /// each bad version is reported once, and the revisions of this manager's last writes.
    memory: KeyMemory<Written>,
    /// The controller cache; set by `run` (or `with_caches`). Without it, syncs read etcd.
    controllers: OnceLock<ControllerInformer>,
    /// The pod cache, shared with the endpoints controller when given.
    pods: OnceLock<PodInformer>,
    /// Which valid controllers overlap, updated on every controller change.
    overlaps: Mutex<overlap::Overlaps>,
}

impl ReplicationManager {
    /// A manager reading and writing etcd through `registry`.
    pub fn new(registry: Registry, config: ManagerConfig, metrics: Arc<Metrics>) -> Self {
        let pod_control = EtcdPodControl::new(registry.clone()).with_events(config.events.clone());
        ReplicationManager::with_io(registry, pod_control, config, metrics)
    }
}

impl<P: PodControl, R: FreshReads> ReplicationManager<P, R> {
    /// A manager reading through `reads` when its caches cannot serve it and writing
    /// through `pod_control` (the unit tests pass a recording fake for both).
    pub fn with_io(reads: R, pod_control: P, config: ManagerConfig, metrics: Arc<Metrics>) -> Self {
        ReplicationManager {
            inner: Arc::new(Inner {
                reads,
                pod_control,
                config,
                metrics,
                memory: KeyMemory::default(),
                controllers: OnceLock::new(),
                pods: OnceLock::new(),
                overlaps: Mutex::default(),
            }),
            sync_handler: None,
        }
    }

    /// Replaces the sync handler (tests count syncs without touching etcd).
    pub fn with_sync_handler(mut self, handler: SyncHandler) -> Self {
        self.sync_handler = Some(handler);
        self
    }

    /// Reads pods from `pods`, an informer the caller runs and may share (the controller
    /// manager shares one with the endpoints controller). Without it, `run` runs its own.
    pub fn with_pod_informer(self, pods: PodInformer) -> Self {
        self.inner.pod_control.hand_created_pods_to(&pods);
        let _ = self.inner.pods.set(pods);
        self
    }

    /// Reads controllers and pods from informers the caller runs, for syncs outside
    /// [`ReplicationManager::run`] ([`ReplicationManager::sync_all`], as `kcm bench` does).
    pub fn with_caches(self, controllers: ControllerInformer, pods: PodInformer) -> Self {
        let _ = self.inner.controllers.set(controllers);
        self.inner.pod_control.hand_created_pods_to(&pods);
        let _ = self.inner.pods.set(pods);
        self
    }

    fn handler(&self) -> SyncHandler {
        if let Some(handler) = &self.sync_handler {
            return handler.clone();
        }
        sync_handler(self.inner.clone(), |inner, key| async move {
            inner.sync_replication_controller(&key).await?;
            Ok(Action::Done)
        })
    }

    /// Syncs each controller in `keys` once, `concurrent_syncs` at a time, and returns
    /// when all are done: the work of one resync tick, without the queue. Returns how
    /// many syncs failed.
    pub async fn sync_all(&self, keys: Vec<ObjectKey>) -> usize {
        let handler = self.handler();
        let limit = Arc::new(tokio::sync::Semaphore::new(
            self.inner.config.concurrent_syncs.max(1),
        ));
        let mut syncs = JoinSet::new();
        for key in keys {
            let permit = limit.clone().acquire_owned().await.expect("never closed");
            let handler = handler.clone();
            syncs.spawn(async move {
                let result = handler(key).await;
                drop(permit);
                result
            });
        }
        let mut failures = 0;
        while let Some(result) = syncs.join_next().await {
            if !matches!(result, Ok(Ok(_))) {
                failures += 1;
            }
        }
        failures
    }

    /// Runs the manager until `shutdown` resolves, on informers of its own (the
    /// controller manager shares one factory between its controllers instead, through
    /// [`ReplicationManager::start`]).
    ///
    /// # Errors
    /// Only for a broken setup; etcd failures are retried, never returned.
    pub async fn run(
        self,
        watcher: Watcher,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let informers = InformerFactory::new(
            watcher,
            self.inner.config.watch_backoff.clone(),
            self.inner.metrics.clone(),
        );
        let running = self.start(&informers, shutdown);
        informers.serve(running).await
    }

    /// Sets the manager up on `informers` (controllers and pods) and returns it running,
    /// until `shutdown` resolves: it waits until both caches have listed, then syncs
    /// every controller, resyncs every controller each sync period, and syncs a
    /// controller on each of its changes and on relevant pod changes. Subscribes at
    /// once: call it before the factory starts.
    ///
    /// Shutdown contract: after `shutdown` resolves no new sync starts, in-flight syncs
    /// (and their creates and deletes) get up to `shutdown_timeout` to finish.
    pub fn start(
        self,
        informers: &InformerFactory,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        let controllers = informers.replication_controllers();
        let pods = informers.pods();
        let _ = self.inner.controllers.set(controllers.clone());
        let _ = self.inner.pods.set(pods.clone());
        self.inner.pod_control.hand_created_pods_to(&pods);
        let (runner, routes) = self.runner();
        let inner = self.inner.clone();
        let runner = runner
            .watches(&controllers, {
                let routes = routes.clone();
                move |delta| routes.controller_changed(delta, &inner)
            })
            .watches(&pods, move |delta| routes.pod_changed(delta));
        let handler = self.handler();
        Box::pin(runner.run(handler, shutdown))
    }

    /// The loop over any source of controller and pod changes (tests feed channels).
    ///
    /// # Errors
    /// Never at present; kept fallible for future setup steps.
    pub async fn run_loop(
        &self,
        rc_events: mpsc::Receiver<Delta<ReplicationController>>,
        pod_events: mpsc::Receiver<Delta<CachedPod>>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        let (runner, routes) = self.runner();
        let inner = self.inner.clone();
        let runner = runner
            .on(rc_events, {
                let routes = routes.clone();
                move |delta| routes.controller_changed(delta, &inner)
            })
            .on(pod_events, move |delta| routes.pod_changed(delta));
        runner.run(self.handler(), shutdown).await
    }

    /// The manager's runner, resyncing every controller the routes know.
    fn runner(&self) -> (Runner, Routes) {
        let config = &self.inner.config;
        let routes = Routes::default();
        let runner = Runner::new("replication", config.runner(), self.inner.metrics.clone())
            .resync({
                let routes = routes.clone();
                move || routes.keys()
            });
        (runner, routes)
    }
}

/// Maps informer changes to the controllers to sync, through the controllers'
/// selectors. The runner's loop is its only user; the lock is never contended.
#[derive(Clone, Default)]
struct Routes {
    index: Arc<Mutex<SelectorIndex>>,
}

impl Routes {
    fn index(&self) -> std::sync::MutexGuard<'_, SelectorIndex> {
        self.index.lock().expect("routes lock")
    }

    fn keys(&self) -> Vec<ObjectKey> {
        self.index().keys()
    }

    fn upsert(&self, rc: &ReplicationController) {
        let meta = &rc.metadata;
        self.index()
            .upsert(&meta.namespace, &meta.name, rc.spec.selector.as_selector());
    }

    /// A changed controller is synced. 2014 synced a deleted controller at its last
    /// state, which could create orphans; a deleted (or undecodable) controller gets no
    /// more writes, and the manager forgets what it wrote for it.
    fn controller_changed<P: PodControl, R: FreshReads>(
        &self,
        delta: &Delta<ReplicationController>,
        inner: &Inner<P, R>,
    ) -> Vec<ObjectKey> {
        let key = delta.key();
        inner.note_overlaps(&delta.namespace, &delta.name, delta.new.as_deref());
        match &delta.new {
            Some(rc) => {
                self.upsert(rc);
                vec![key]
            }
            None => {
                self.index().remove(&delta.namespace, &delta.name);
                inner.forget(&key);
                Vec::new()
            }
        }
    }

    /// The controllers a pod change should sync: those in the pod's namespace whose
    /// selector matches its old or new labels, when the pod was deleted (or stopped
    /// decoding), stopped being active, changed labels, or became ready or unready (for
    /// `status.readyReplicas`).
    fn pod_changed(&self, delta: &Delta<CachedPod>) -> Vec<ObjectKey> {
        let relevant = match (&delta.old, &delta.new) {
            (_, None) => true,
            (Some(old), Some(new)) => {
                old.labels != new.labels
                    || (old.is_active() && !new.is_active())
                    || old.controller != new.controller
                    || old.ready != new.ready
            }
            // First sight of an inactive pod (e.g. after a relist).
            (None, Some(new)) => !new.is_active(),
        };
        if !relevant {
            return Vec::new();
        }
        self.index().selecting_change(delta)
    }
}
