//! The ReplicaSet controller: keeps `spec.replicas` active pods for every ReplicaSet,
//! owning them by controller reference.
//!
//! Mirrors Kubernetes' `pkg/controller/replicaset/replica_set.go` (`syncReplicaSet`,
//! `claimPods` through the `PodControllerRefManager`, `manageReplicas`, `calculateStatus`),
//! which postdates 2014; built like kcm's replication manager (`replication_manager`): on
//! the common [`Runner`] and the shared informers, a sync observes, decides in pure
//! functions (`plan`) and acts only through [`ReplicaSetControl`], and it reuses the
//! manager's idempotent creates (deterministic slot names, create-if-absent, burst cap,
//! slow start), ranked guarded deletes and read-your-writes. Where it goes beyond
//! Kubernetes is in docs/departures.md ("ownership (ReplicaSets)", "RC/RS coexistence",
//! "ReplicaSet adoption and create races", "ReplicaSet expectations").
//!
//! Invariants:
//! - ownership is the controller reference, by kind, name and uid: a pod naming a deleted
//!   namesake is not owned, a pod owned by anything else is invisible;
//! - no pod is created or adopted for a ReplicaSet that changed, began deleting or went
//!   after the sync read it: those writes compare the ReplicaSet's key at the revision the
//!   sync read, in their own transaction (kubernetes #42639, #42938, #43032);
//! - a ReplicaSet with a `deletionTimestamp` gets status writes only;
//! - an orphan that a ReplicationController of the namespace selects is never adopted
//!   (the replication manager in turn ignores pods with a controller reference), so the
//!   two kinds coexist on overlapping selectors;
//! - an invalid ReplicaSet gets no writes and one warning per resourceVersion.
//!
//! Readiness is not modelled yet: every active pod counts as ready and available
//! ([`plan::is_ready`]), and the deletion ranking leaves readiness out.

mod control;
mod plan;
mod sync;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;

use crate::api::{self, ReplicaSet, ReplicationController};
use crate::controller::{
    sync_handler, Action, KeyMemory, ObjectKey, Runner, RunnerConfig, SelectorIndex,
};
use crate::informer::{
    CachedPod, ControllerInformer, Delta, InformerFactory, PodInformer, ReplicaSetInformer,
};
use crate::registry::Registry;
use crate::status::Metrics;

pub use control::{
    adopt, release, ClaimOutcome, EtcdReplicaSetControl, ReplicaSetControl, ReplicaSetReads,
};
pub use plan::{calculate_status, claim, controller_ref, decide, new_pod, owns, Claims, Decision};

use crate::controller::replicas::Written;

/// The controller's settings (Kubernetes' `ReplicaSetControllerConfiguration` beside the
/// shared runner settings). Defaults are Kubernetes'.
#[derive(Clone, Debug)]
pub struct ReplicaSetConfig {
    /// How often every ReplicaSet is synced even without events. Default 10 s.
    pub sync_period: Duration,
    /// ReplicaSets synced in parallel (`--concurrent-replicaset-syncs`). Default 5.
    pub concurrent_syncs: usize,
    /// Most pod creates or deletes in flight for one ReplicaSet. Default 500.
    pub burst_replicas: usize,
    /// How long shutdown waits for in-flight syncs. Default 8 s.
    pub shutdown_timeout: Duration,
    /// How long a sync waits for the caches to apply this controller's own last writes
    /// before it reads etcd instead. Default 500 ms.
    pub cache_wait: Duration,
    /// Count pods from a fresh etcd list in every sync instead of from the shared cache.
    /// Default false.
    pub fresh_reads: bool,
    /// Where its events go (`SuccessfulCreate`, ...). Default: nowhere; the controller
    /// manager gives it its recorder.
    pub events: crate::record::Recorder,
}

impl ReplicaSetConfig {
    /// The runner settings of this controller.
    pub fn runner(&self) -> RunnerConfig {
        RunnerConfig::new(
            self.concurrent_syncs,
            self.sync_period,
            self.shutdown_timeout,
        )
    }
}

impl Default for ReplicaSetConfig {
    fn default() -> Self {
        ReplicaSetConfig {
            sync_period: Duration::from_secs(10),
            concurrent_syncs: 5,
            burst_replicas: 500,
            shutdown_timeout: Duration::from_secs(8),
            cache_wait: Duration::from_millis(500),
            fresh_reads: false,
            events: crate::record::Recorder::discard(),
        }
    }
}

/// `ReplicaSetController`.
pub struct ReplicaSetController<
    C: ReplicaSetControl = EtcdReplicaSetControl,
    R: ReplicaSetReads = Registry,
> {
    inner: Arc<Inner<C, R>>,
}

struct Inner<C, R> {
    reads: R,
    control: C,
    config: ReplicaSetConfig,
    metrics: Arc<Metrics>,
    /// Per ReplicaSet key: the resourceVersion last warned about, and this controller's
    /// writes.
    memory: KeyMemory<Written>,
    pods: OnceLock<PodInformer>,
    /// The ReplicaSet cache; without it (unit tests), syncs read etcd.
    replica_sets: OnceLock<ReplicaSetInformer>,
    /// The ReplicationControllers, for the coexistence rule.
    controllers: OnceLock<ControllerInformer>,
}

impl ReplicaSetController {
    /// A controller reading and writing etcd through `registry`.
    pub fn new(registry: Registry, config: ReplicaSetConfig, metrics: Arc<Metrics>) -> Self {
        let control =
            EtcdReplicaSetControl::new(registry.clone()).with_events(config.events.clone());
        ReplicaSetController::with_io(registry, control, config, metrics)
    }
}

impl<C: ReplicaSetControl, R: ReplicaSetReads> ReplicaSetController<C, R> {
    /// A controller on the given IO (the unit tests pass a recording fake).
    pub fn with_io(reads: R, control: C, config: ReplicaSetConfig, metrics: Arc<Metrics>) -> Self {
        ReplicaSetController {
            inner: Arc::new(Inner {
                reads,
                control,
                config,
                metrics,
                memory: KeyMemory::default(),
                pods: OnceLock::new(),
                replica_sets: OnceLock::new(),
                controllers: OnceLock::new(),
            }),
        }
    }

    /// Syncs one ReplicaSet `namespace/name` (tests and `kcm bench`).
    ///
    /// # Errors
    /// As the sync: etcd failures and failed writes.
    pub async fn sync(&self, key: &ObjectKey) -> anyhow::Result<Action> {
        self.inner.sync_replica_set(key).await
    }

    /// Sets the controller up on `informers` (ReplicaSets, pods, ReplicationControllers)
    /// and returns it running until `shutdown` resolves. Subscribes at once: call it
    /// before the factory starts.
    pub fn start(
        self,
        informers: &InformerFactory,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        let replica_sets = informers.replica_sets();
        let pods = informers.pods();
        let _ = self.inner.pods.set(pods.clone());
        self.inner.control.hand_created_pods_to(&pods);
        let _ = self.inner.replica_sets.set(replica_sets.clone());
        let controllers = informers.replication_controllers();
        let _ = self.inner.controllers.set(controllers.clone());
        let config = &self.inner.config;
        let routes = Routes {
            index: Arc::default(),
            replica_sets: replica_sets.clone(),
        };
        let inner = self.inner.clone();
        let runner = Runner::new("replicaset", config.runner(), self.inner.metrics.clone())
            .resync({
                let routes = routes.clone();
                move || routes.keys()
            })
            .watches(&replica_sets, {
                let routes = routes.clone();
                move |delta| routes.replica_set_changed(delta, &inner)
            })
            .watches(&pods, {
                let routes = routes.clone();
                move |delta| routes.pod_changed(delta)
            })
            // The coexistence rule reads the ReplicationControllers: no sync before they are
            // listed (else an RC's pods could be adopted at startup), and a changed RC
            // (deleted, or its selector changed) may free orphans for the namespace's
            // ReplicaSets.
            .watches(&controllers, move |delta| {
                let selector = |rc: &Arc<ReplicationController>| rc.spec.selector.clone();
                if delta.old.as_ref().map(selector) == delta.new.as_ref().map(selector) {
                    return Vec::new();
                }
                routes.namespace_keys(&delta.namespace)
            });
        Box::pin(runner.run(
            sync_handler(self.inner.clone(), |inner, key| async move {
                inner.sync_replica_set(&key).await
            }),
            shutdown,
        ))
    }
}

/// Maps informer changes to the ReplicaSets to sync.
#[derive(Clone)]
struct Routes {
    /// The selectors of the valid ReplicaSets, for orphans.
    index: Arc<Mutex<SelectorIndex>>,
    /// To check a controller reference's uid.
    replica_sets: ReplicaSetInformer,
}

impl Routes {
    fn index(&self) -> std::sync::MutexGuard<'_, SelectorIndex> {
        self.index.lock().expect("routes lock")
    }

    fn keys(&self) -> Vec<ObjectKey> {
        self.replica_sets.keys()
    }

    /// Every ReplicaSet of `namespace`.
    fn namespace_keys(&self, namespace: &str) -> Vec<ObjectKey> {
        self.replica_sets
            .read(namespace, |ns| {
                ns.map(|ns| {
                    ns.items()
                        .map(|rs| ObjectKey::new(namespace, rs.metadata.name.as_str()))
                        .collect()
                })
            })
            .unwrap_or_default()
    }

    fn replica_set_changed<C: ReplicaSetControl, R: ReplicaSetReads>(
        &self,
        delta: &Delta<ReplicaSet>,
        inner: &Inner<C, R>,
    ) -> Vec<ObjectKey> {
        let key = delta.key();
        match &delta.new {
            Some(rs) => {
                match rs
                    .spec
                    .selector
                    .as_ref()
                    .map(api::LabelSelector::to_selector)
                {
                    Some(Ok(selector)) => {
                        self.index().upsert(&delta.namespace, &delta.name, selector)
                    }
                    _ => self.index().remove(&delta.namespace, &delta.name),
                }
                vec![key]
            }
            None => {
                self.index().remove(&delta.namespace, &delta.name);
                inner.forget(&key);
                Vec::new()
            }
        }
    }

    /// The ReplicaSets a pod change concerns: the owner its controller reference names
    /// (before or after, uid-checked against the cache), and, while it is an orphan, those
    /// whose selector matches its old or new labels.
    fn pod_changed(&self, delta: &Delta<CachedPod>) -> Vec<ObjectKey> {
        let mut keys = Vec::new();
        let mut orphan = false;
        for pod in [&delta.old, &delta.new].into_iter().flatten() {
            match pod.controller.as_deref() {
                Some(r) if &*r.kind == plan::KIND => {
                    let owner = self.replica_sets.get(&delta.namespace, &r.name);
                    if owner.is_some_and(|rs| *rs.metadata.uid == *r.uid) {
                        keys.push(ObjectKey::new(delta.namespace.clone(), &*r.name));
                    }
                }
                Some(_) => {}
                None => orphan = true,
            }
        }
        if orphan {
            keys.extend(self.index().selecting_change(delta));
        }
        keys.sort();
        keys.dedup();
        keys
    }
}
