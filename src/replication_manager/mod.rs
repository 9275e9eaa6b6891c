//! The replication manager: keeps `spec.replicas` active pods for every controller.
//!
//! Mirrors 2014's `pkg/controller/replication_controller.go` (late 2014): a loop over a
//! resync tick and controller watch events, `syncReplicationController` listing the
//! controller's pods by selector, `filterActivePods`, and creating or deleting the
//! difference through a `PodControl`. What 2014 got wrong is fixed as listed in
//! ARCHITECTURE.md's "Departures from 2014"; the short version:
//! - syncs go through a deduplicating [`WorkQueue`] with N workers and per-key backoff,
//!   so a slow resync never holds back event work and a key never syncs twice at once;
//! - a pod watch heals within milliseconds instead of the next tick;
//! - creates are idempotent: replica slot `i` of controller `uid` always gets the same
//!   pod name, written create-if-absent, so concurrent syncs or two kcm processes cannot
//!   create the same replica twice; creates are capped per sync and slow-started;
//! - scale-down deletes the lowest-ranked pods, each guarded by its resourceVersion;
//! - a deleted controller creates and deletes nothing; status.replicas is written;
//! - controllers and pods are read from shared informer caches (`informer`), not listed
//!   per sync: a resync of 1,000 controllers reads no etcd at all.
//!
//! Invariant (read-your-writes): a sync counts pods from the cache only once the cache
//! has applied every write this manager made for that controller (the header revision of
//! each create, delete and status write is recorded per controller); a cache that does
//! not catch up within `cache_wait` is bypassed for a fresh etcd read. Creates stay
//! idempotent (deterministic slot names, create-if-absent), so even a view that misses
//! another writer's pods can only try names that are taken, never over-create.

use std::cmp::Ordering as CmpOrdering;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::api::{
    self, ObjectMeta, Pod, PodPhase, PodStatus, ReplicationController, ResourceVersion,
};
use crate::controller::{worker, SyncHandler};
use crate::etcd_watcher::{BackoffConfig, Watcher};
use crate::informer::{CachedPod, ControllerInformer, Delta, Informer, Namespace, PodInformer};
use crate::labels::Selector;
use crate::registry::{Registry, StorageError};
use crate::status::Metrics;
use crate::workqueue::WorkQueue;

/// The annotation naming the controller that created a pod.
pub const CREATED_BY_ANNOTATION: &str = "kubernetes.io/created-by";

/// Characters of generated name suffixes (Kubernetes' alphabet: no vowels, no 0/1/3).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
const SUFFIX_LEN: usize = 5;

/// Settings of the replication manager. Defaults are 2014's where 2014 had them.
#[derive(Clone, Debug)]
pub struct ManagerConfig {
    /// How often every controller is synced even without events. Default 10 s (2014).
    pub sync_period: Duration,
    /// Workers syncing controllers in parallel. Default 5.
    pub concurrent_syncs: usize,
    /// Most pods created or deleted for one controller in one sync. Default 500.
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
        }
    }
}

// ---------------------------------------------------------------------------------------
// PodControl: the seam at the IO boundary (2014's PodControlInterface)

/// What a create found.
#[derive(Debug, Clone, PartialEq)]
pub enum CreateOutcome {
    /// Created at this revision.
    Created(ResourceVersion),
    /// The name was taken; the pod holding it, if it could be read.
    Exists(Option<Box<Pod>>),
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
}

/// Creates and deletes pods for the manager.
pub trait PodControl: Send + Sync + 'static {
    /// Creates `pod` if its name is free.
    fn create_pod(&self, pod: Pod) -> impl Future<Output = anyhow::Result<CreateOutcome>> + Send;
    /// Deletes `namespace/name` if it is still at `resource_version`.
    fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> impl Future<Output = anyhow::Result<DeleteOutcome>> + Send;
}

/// The real `PodControl`: create-if-absent and guarded deletes in etcd.
#[derive(Clone)]
pub struct EtcdPodControl {
    registry: Registry,
}

impl EtcdPodControl {
    pub fn new(registry: Registry) -> EtcdPodControl {
        EtcdPodControl { registry }
    }
}

impl PodControl for EtcdPodControl {
    async fn create_pod(&self, pod: Pod) -> anyhow::Result<CreateOutcome> {
        match self.registry.create(&pod).await {
            Ok(created) => Ok(CreateOutcome::Created(
                created.metadata.resource_version.unwrap_or_default(),
            )),
            Err(StorageError::AlreadyExists { .. }) => {
                let meta = &pod.metadata;
                let existing = self
                    .registry
                    .get::<Pod>(&meta.namespace, &meta.name)
                    .await
                    .ok();
                Ok(CreateOutcome::Exists(existing.map(Box::new)))
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> anyhow::Result<DeleteOutcome> {
        match self
            .registry
            .delete::<Pod>(namespace, name, Some(resource_version))
            .await
        {
            Ok(revision) => Ok(DeleteOutcome::Deleted(revision)),
            Err(StorageError::Conflict { .. }) => Ok(DeleteOutcome::Changed),
            Err(StorageError::NotFound { .. }) => Ok(DeleteOutcome::Gone),
            Err(e) => Err(e.into()),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The pure core: replica arithmetic, names, ranking

/// `filterActivePods`: drops Succeeded and Failed pods.
pub fn filter_active_pods(pods: Vec<Pod>) -> Vec<Pod> {
    pods.into_iter().filter(Pod::is_active).collect()
}

/// The name of replica slot `slot` of the controller with `uid`: `{controller}-{5 chars}`.
/// The same slot always gets the same name, which makes creates idempotent.
pub fn pod_name(controller: &str, uid: &str, slot: u64) -> String {
    // FNV-1a: stable across processes, versions and platforms (std's hasher is not).
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in uid.bytes().chain(*b"/").chain(slot.to_le_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let mut suffix = String::with_capacity(SUFFIX_LEN);
    for _ in 0..SUFFIX_LEN {
        suffix.push(SUFFIX_ALPHABET[(hash % SUFFIX_ALPHABET.len() as u64) as usize] as char);
        hash /= SUFFIX_ALPHABET.len() as u64;
    }
    format!("{controller}-{suffix}")
}

/// The names of the `n` lowest replica slots whose names no existing pod holds.
pub fn names_to_create(
    controller: &str,
    uid: &str,
    existing: &HashSet<&str>,
    n: usize,
) -> Vec<String> {
    names_to_create_with(controller, uid, |name| existing.contains(name), n)
}

/// [`names_to_create`] with any test for a taken name (e.g. a cache lookup).
pub fn names_to_create_with(
    controller: &str,
    uid: &str,
    is_taken: impl Fn(&str) -> bool,
    n: usize,
) -> Vec<String> {
    let mut names = Vec::with_capacity(n);
    let mut chosen = HashSet::with_capacity(n);
    let mut slot = 0u64;
    while names.len() < n {
        let name = pod_name(controller, uid, slot);
        if !is_taken(name.as_str()) && chosen.insert(name.clone()) {
            names.push(name);
        }
        slot += 1;
    }
    names
}

/// Sizes of slow-start batches for `n` creates: 1, 2, 4, ... (the ReplicaSet rule).
pub fn slow_start_batches(n: usize) -> Vec<usize> {
    slow_start_batches_from(1, n)
}

/// Slow-start batches for `n` creates beginning at `first`: first, 2 first, 4 first, ...
pub fn slow_start_batches_from(first: usize, n: usize) -> Vec<usize> {
    let mut batches = Vec::new();
    let (mut size, mut left) = (first.max(1), n);
    while left > 0 {
        let batch = size.min(left);
        batches.push(batch);
        left -= batch;
        size *= 2;
    }
    batches
}

/// What deletion ranking looks at: assigned, phase, creation time, name.
type RankKey<'a> = (bool, PodPhase, Option<&'a str>, &'a str);

/// Unassigned before assigned, Pending before Unknown before Running, newer before
/// older, then by name.
fn deletion_order(a: RankKey<'_>, b: RankKey<'_>) -> CmpOrdering {
    fn phase_rank(phase: PodPhase) -> u8 {
        match phase {
            PodPhase::Pending => 0,
            PodPhase::Unknown => 1,
            PodPhase::Running => 2,
            PodPhase::Succeeded | PodPhase::Failed => 3,
        }
    }
    a.0.cmp(&b.0)
        .then(phase_rank(a.1).cmp(&phase_rank(b.1)))
        // RFC 3339 timestamps of one format sort as strings; newer first.
        .then(b.2.cmp(&a.2))
        .then(a.3.cmp(b.3))
}

/// Sorts active pods so that the ones to delete first come first: unassigned before
/// assigned, Pending before Unknown before Running, newer before older, then by name.
pub fn rank_for_deletion(pods: &mut [Pod]) {
    fn key(p: &Pod) -> RankKey<'_> {
        (
            !p.spec.host.is_empty(),
            p.phase(),
            p.metadata.creation_timestamp.as_deref(),
            &p.metadata.name,
        )
    }
    pods.sort_by(|a, b| deletion_order(key(a), key(b)));
}

/// [`rank_for_deletion`] for cached pods.
pub fn rank_cached_for_deletion(pods: &mut [Arc<CachedPod>]) {
    fn key(p: &CachedPod) -> RankKey<'_> {
        (
            p.assigned,
            p.phase,
            p.creation_timestamp.as_deref(),
            &p.name,
        )
    }
    pods.sort_by(|a, b| deletion_order(key(a), key(b)));
}

/// What one sync will do, before it does it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    Nothing,
    /// Create this many (already capped by the burst limit).
    Create(usize),
    /// Delete this many of the ranked active pods (already capped).
    Delete(usize),
}

/// The replica arithmetic: compare active pods with the desired count.
pub fn plan(replicas: i64, n_active: usize, burst: usize) -> Plan {
    let replicas = usize::try_from(replicas).unwrap_or(0);
    match n_active.cmp(&replicas) {
        std::cmp::Ordering::Less => Plan::Create((replicas - n_active).min(burst)),
        std::cmp::Ordering::Greater => Plan::Delete((n_active - replicas).min(burst)),
        std::cmp::Ordering::Equal => Plan::Nothing,
    }
}

/// A new pod for `controller` from its template: exactly the template's labels and
/// spec, the created-by annotation, phase Pending.
pub fn new_pod_from_template(controller: &ReplicationController, name: String) -> Pod {
    let template = controller.spec.template.clone().unwrap_or_default();
    let mut annotations = template.metadata.annotations.clone();
    annotations.insert(
        CREATED_BY_ANNOTATION.to_string(),
        format!(
            r#"{{"kind":"ReplicationController","namespace":"{}","name":"{}","uid":"{}"}}"#,
            controller.metadata.namespace, controller.metadata.name, controller.metadata.uid
        ),
    );
    let mut spec = template.spec;
    spec.host.clear();
    Pod {
        metadata: ObjectMeta {
            name,
            namespace: controller.metadata.namespace.clone(),
            labels: template.metadata.labels.clone(),
            annotations,
            ..ObjectMeta::default()
        },
        spec,
        status: Some(PodStatus {
            phase: PodPhase::Pending,
            ..PodStatus::default()
        }),
        ..Pod::default()
    }
}

// ---------------------------------------------------------------------------------------
// The manager

/// `ReplicationManager`.
pub struct ReplicationManager<P: PodControl = EtcdPodControl> {
    inner: Arc<Inner<P>>,
    sync_handler: Option<SyncHandler>,
}

struct Inner<P> {
    registry: Registry,
    pod_control: P,
    config: ManagerConfig,
    metrics: Arc<Metrics>,
    /// The resourceVersion a controller was last warned about (invalid or malformed),
    /// so each bad version is reported once.
    warned: Mutex<HashMap<String, String>>,
    /// The controller cache; set by `run` (or `with_caches`). Without it, syncs read etcd.
    controllers: OnceLock<ControllerInformer>,
    /// The pod cache, shared with the endpoints controller when given.
    pods: OnceLock<PodInformer>,
    /// Per controller key, the revisions of this manager's last writes for it.
    written: Mutex<HashMap<String, Written>>,
}

/// The header revisions of a manager's last writes for one controller: what its caches
/// must have applied before a sync may count from them (read-your-writes).
#[derive(Clone, Copy, Debug, Default)]
struct Written {
    /// Last pod create or delete.
    pods: i64,
    /// Last `status.replicas` write.
    status: i64,
    /// The slow-start batch the controller's next creates begin with, and when that was
    /// earned: after a sync whose creates all succeeded, double its last batch (capped at
    /// the burst limit), good for [`SLOW_START_MEMORY`]; otherwise 1. A scale-up spread
    /// over many syncs ramps up once, not once per sync; a failure still costs at most
    /// one batch before creates start again from 1, and a controller that was quiet for
    /// a while starts from 1 too.
    slow_start: Option<(usize, tokio::time::Instant)>,
}

/// How long a controller's slow-start progress carries over to its next sync. The next
/// sync of a continuing scale-up follows within milliseconds (its status write wakes it).
const SLOW_START_MEMORY: Duration = Duration::from_secs(1);

impl ReplicationManager<EtcdPodControl> {
    /// A manager writing pods through etcd.
    pub fn new(registry: Registry, config: ManagerConfig, metrics: Arc<Metrics>) -> Self {
        let pod_control = EtcdPodControl::new(registry.clone());
        ReplicationManager {
            inner: Arc::new(Inner {
                registry,
                pod_control,
                config,
                metrics,
                warned: Mutex::default(),
                controllers: OnceLock::new(),
                pods: OnceLock::new(),
                written: Mutex::default(),
            }),
            sync_handler: None,
        }
    }
}

impl<P: PodControl> ReplicationManager<P> {
    /// Replaces the pod control (tests inject a recording fake).
    pub fn with_pod_control<Q: PodControl>(self, pod_control: Q) -> ReplicationManager<Q> {
        let inner = Arc::try_unwrap(self.inner)
            .unwrap_or_else(|_| panic!("with_pod_control before the manager is shared"));
        ReplicationManager {
            inner: Arc::new(Inner {
                registry: inner.registry,
                pod_control,
                config: inner.config,
                metrics: inner.metrics,
                warned: inner.warned,
                controllers: inner.controllers,
                pods: inner.pods,
                written: inner.written,
            }),
            sync_handler: self.sync_handler,
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
        let _ = self.inner.pods.set(pods);
        self
    }

    /// Reads controllers and pods from informers the caller runs, for syncs outside
    /// [`ReplicationManager::run`] ([`ReplicationManager::sync_all`], as `kcm bench` does).
    pub fn with_caches(self, controllers: ControllerInformer, pods: PodInformer) -> Self {
        let _ = self.inner.controllers.set(controllers);
        let _ = self.inner.pods.set(pods);
        self
    }

    fn handler(&self) -> SyncHandler {
        if let Some(handler) = &self.sync_handler {
            return handler.clone();
        }
        let inner = self.inner.clone();
        Arc::new(move |key: String| {
            let inner = inner.clone();
            Box::pin(async move { inner.sync_replication_controller(&key).await })
        })
    }

    /// Syncs each controller in `keys` once, `concurrent_syncs` at a time, and returns
    /// when all are done: the work of one resync tick, without the queue. Returns how
    /// many syncs failed.
    pub async fn sync_all(&self, keys: Vec<String>) -> usize {
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
            if !matches!(result, Ok(Ok(()))) {
                failures += 1;
            }
        }
        failures
    }

    /// Runs the manager until `shutdown` resolves.
    ///
    /// Lists and watches controllers and pods in all namespaces through informers (the
    /// pod informer may be shared, see [`ReplicationManager::with_pod_informer`]), waits
    /// until both have listed, then syncs every controller, resyncs every controller each
    /// sync period, and syncs a controller on each of its changes and on relevant pod
    /// changes.
    ///
    /// Shutdown contract: after `shutdown` resolves no new sync starts, the watches are
    /// dropped, in-flight syncs (and their creates and deletes) get up to
    /// `shutdown_timeout` to finish, then `run` returns.
    ///
    /// # Errors
    /// Only for a broken setup; etcd failures are retried, never returned.
    pub async fn run(
        self,
        watcher: Watcher,
        shutdown: impl Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        let backoff = self.inner.config.watch_backoff.clone();
        let stop = CancellationToken::new();
        let mut informer_tasks = JoinSet::<()>::new();
        let (controllers, own_controllers) = match self.inner.controllers.get() {
            Some(controllers) => (controllers.clone(), false),
            None => {
                let controllers =
                    ControllerInformer::new(watcher.clone()).with_backoff(backoff.clone());
                self.inner
                    .metrics
                    .register_watch("replicationcontrollers", controllers.metrics());
                let _ = self.inner.controllers.set(controllers.clone());
                (controllers, true)
            }
        };
        let pods = match self.inner.pods.get() {
            Some(pods) => pods.clone(),
            None => {
                let pods = Informer::new(watcher.clone()).with_backoff(backoff);
                self.inner.metrics.register_watch("pods", pods.metrics());
                let _ = self.inner.pods.set(pods.clone());
                informer_tasks.spawn(pods.clone().run(stop.clone().cancelled_owned()));
                pods
            }
        };
        // Subscribed before the controller informer lists, so its first list queues every
        // controller.
        let rc_events = controllers.subscribe();
        let pod_events = pods.subscribe();
        if own_controllers {
            informer_tasks.spawn(controllers.clone().run(stop.clone().cancelled_owned()));
        }
        tokio::pin!(shutdown);
        // client-go's WaitForCacheSync: no sync counts from a cache that has not listed.
        let synced = async {
            controllers.wait_synced().await;
            pods.wait_synced().await;
        };
        let result = tokio::select! {
            _ = &mut shutdown => Ok(()),
            _ = synced => self.run_loop(rc_events, pod_events, shutdown).await,
        };
        stop.cancel();
        informer_tasks.shutdown().await;
        result
    }

    /// The loop itself, over any source of controller and pod changes (tests feed
    /// channels).
    ///
    /// # Errors
    /// Never at present; kept fallible for future setup steps.
    pub async fn run_loop(
        &self,
        mut rc_events: mpsc::Receiver<Delta<ReplicationController>>,
        mut pod_events: mpsc::Receiver<Delta<CachedPod>>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        let config = &self.inner.config;
        let queue = Arc::new(WorkQueue::<String>::new());
        {
            let queue = queue.clone();
            self.inner
                .metrics
                .register_queue("replication", move || queue.len());
        }
        let mut workers = JoinSet::new();
        for _ in 0..config.concurrent_syncs.max(1) {
            workers.spawn(worker(
                "replication",
                queue.clone(),
                self.handler(),
                self.inner.metrics.clone(),
            ));
        }
        let mut index = ControllerIndex::default();
        let mut resync = tokio::time::interval_at(
            tokio::time::Instant::now() + config.sync_period,
            config.sync_period,
        );
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        loop {
            let trigger = tokio::select! {
                biased;
                _ = &mut shutdown => Trigger::Shutdown,
                _ = resync.tick() => Trigger::Resync,
                Some(delta) = rc_events.recv() => Trigger::Controller(delta),
                Some(delta) = pod_events.recv() => Trigger::Pod(delta),
            };
            match trigger {
                Trigger::Shutdown => break,
                Trigger::Resync => {
                    tracing::debug!(controllers = index.len(), "resync");
                    for key in index.keys() {
                        queue.add(key);
                    }
                }
                Trigger::Controller(delta) => match &delta.new {
                    Some(rc) => {
                        index.upsert(rc);
                        queue.add(delta.key());
                    }
                    // 2014 synced a deleted controller at its last state, which could
                    // create orphans; a deleted (or undecodable) controller gets no more
                    // writes.
                    None => {
                        let key = delta.key();
                        index.remove(&delta.namespace, &delta.name);
                        self.inner.forget(&key);
                    }
                },
                Trigger::Pod(delta) => {
                    for key in index.controllers_to_sync_for(&delta) {
                        queue.add(key);
                    }
                }
            }
        }
        tracing::info!("replication manager shutting down");
        // Unsubscribe first, so a shared informer is not held back by this loop.
        drop(rc_events);
        drop(pod_events);
        queue.shut_down();
        let drained = tokio::time::timeout(config.shutdown_timeout, async {
            while workers.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                timeout = ?config.shutdown_timeout,
                "in-flight syncs did not finish in time; abandoning them"
            );
            workers.shutdown().await;
        }
        Ok(())
    }
}

/// What woke the loop.
enum Trigger {
    Shutdown,
    Resync,
    Controller(Delta<ReplicationController>),
    Pod(Delta<CachedPod>),
}

/// The controllers the loop knows of, by namespace, with the selectors it needs to map
/// pod changes to them.
#[derive(Default)]
struct ControllerIndex {
    selectors: HashMap<String, HashMap<String, Selector>>,
}

impl ControllerIndex {
    fn len(&self) -> usize {
        self.selectors.values().map(HashMap::len).sum()
    }

    fn keys(&self) -> Vec<String> {
        self.selectors
            .iter()
            .flat_map(|(ns, names)| names.keys().map(move |name| format!("{ns}/{name}")))
            .collect()
    }

    fn upsert(&mut self, rc: &ReplicationController) {
        self.selectors
            .entry(rc.metadata.namespace.clone())
            .or_default()
            .insert(rc.metadata.name.clone(), rc.spec.selector.as_selector());
    }

    fn remove(&mut self, namespace: &str, name: &str) {
        if let Some(names) = self.selectors.get_mut(namespace) {
            names.remove(name);
            if names.is_empty() {
                self.selectors.remove(namespace);
            }
        }
    }

    /// The controllers a pod change should sync: those in the pod's namespace whose
    /// selector matches its old or new labels, when the pod was deleted (or stopped
    /// decoding), stopped being active, or changed labels.
    fn controllers_to_sync_for(&self, delta: &Delta<CachedPod>) -> Vec<String> {
        let relevant = match (&delta.old, &delta.new) {
            (_, None) => true,
            (Some(old), Some(new)) => {
                old.labels != new.labels || (old.is_active() && !new.is_active())
            }
            // First sight of an inactive pod (e.g. after a relist).
            (None, Some(new)) => !new.is_active(),
        };
        if !relevant {
            return Vec::new();
        }
        let Some(controllers) = self.selectors.get(&*delta.namespace) else {
            return Vec::new();
        };
        let matches = |selector: &Selector, pod: &Option<Arc<CachedPod>>| {
            pod.as_ref()
                .is_some_and(|pod| selector.matches(&pod.labels))
        };
        controllers
            .iter()
            .filter(|(_, selector)| matches(selector, &delta.new) || matches(selector, &delta.old))
            .map(|(name, _)| format!("{}/{name}", delta.namespace))
            .collect()
    }
}

/// What a sync found and will do.
struct Assessment {
    selector: Selector,
    /// The controller's active pods.
    active: Vec<Arc<CachedPod>>,
    plan: Plan,
}

/// The pods a sync counts: the shared cache, or a fresh read when the cache is behind.
enum PodView {
    Cache(PodInformer, String),
    Fresh(Namespace<CachedPod>),
}

impl PodView {
    fn select(&self, selector: &Selector) -> Vec<Arc<CachedPod>> {
        match self {
            PodView::Cache(pods, namespace) => pods.select(namespace, selector),
            PodView::Fresh(namespace) => namespace.select(selector),
        }
    }

    /// Whether a pod (decodable or not) holds `name`.
    fn is_taken(&self, name: &str) -> bool {
        match self {
            PodView::Cache(pods, namespace) => {
                pods.read(namespace, |ns| ns.is_some_and(|ns| ns.is_taken(name)))
            }
            PodView::Fresh(namespace) => namespace.is_taken(name),
        }
    }
}

impl<P: PodControl> Inner<P> {
    /// Warns about `key` at `version` unless it was already warned about at it.
    fn warn_once(&self, key: &str, version: &str, message: &str) {
        let mut warned = self.warned.lock().expect("warned lock");
        if warned.get(key).map(String::as_str) != Some(version) {
            warned.insert(key.to_string(), version.to_string());
            tracing::warn!(controller = %key, resource_version = %version, "{message}");
        }
    }

    /// Forgets what the manager remembers of a deleted controller.
    fn forget(&self, key: &str) {
        self.warned.lock().expect("warned lock").remove(key);
        self.written.lock().expect("written lock").remove(key);
    }

    fn written(&self, key: &str) -> Written {
        self.written
            .lock()
            .expect("written lock")
            .get(key)
            .copied()
            .unwrap_or_default()
    }

    fn record(&self, key: &str, record: impl FnOnce(&mut Written)) {
        let mut written = self.written.lock().expect("written lock");
        record(written.entry(key.to_string()).or_default());
    }

    /// The controller to sync, and whether it came from the cache: from the cache once
    /// it has applied this manager's last status write, else from etcd. `None` when it
    /// does not exist (or does not decode).
    async fn controller(
        &self,
        namespace: &str,
        name: &str,
        written: Written,
    ) -> Result<Option<(Arc<ReplicationController>, bool)>, StorageError> {
        if let Some(cache) = self.controllers.get() {
            if !self.config.fresh_reads
                && cache.wait_for(written.status, self.config.cache_wait).await
            {
                return Ok(cache.get(namespace, name).map(|rc| (rc, true)));
            }
        }
        Ok(self
            .fresh_controller(namespace, name)
            .await?
            .map(|rc| (rc, false)))
    }

    /// The controller as etcd has it now; `None` when it does not exist (or does not
    /// decode).
    async fn fresh_controller(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<ReplicationController>>, StorageError> {
        match self
            .registry
            .get::<ReplicationController>(namespace, name)
            .await
        {
            Ok(rc) => Ok(Some(Arc::new(rc))),
            // Deleted since it was queued: nothing to do (2014 synced it anyway).
            Err(StorageError::NotFound { .. }) => Ok(None),
            // The controller informer has already warned about this very value (it meets
            // every stored revision, by event or by list, and reports each it cannot
            // decode); a second warning here would report one bad write twice.
            Err(StorageError::Decode(e)) => {
                tracing::debug!(error = %e, "skipping malformed controller");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The namespace's pods: the cache once it has applied this manager's last pod write
    /// for the controller, else a fresh list.
    async fn pods(&self, namespace: &str, written: Written) -> Result<PodView, StorageError> {
        if let Some(cache) = self.pods.get() {
            if !self.config.fresh_reads
                && cache.wait_for(written.pods, self.config.cache_wait).await
            {
                return Ok(PodView::Cache(cache.clone(), namespace.to_string()));
            }
            if !self.config.fresh_reads {
                tracing::debug!(
                    namespace,
                    revision = written.pods,
                    "pod cache behind; reading etcd"
                );
            }
        }
        let listed = self
            .registry
            .list::<Pod>(Some(namespace), &Selector::everything())
            .await?;
        let mut fresh = Namespace::from_items(
            listed.items.iter().map(CachedPod::from),
            |pod: &CachedPod| pod.name.clone(),
        );
        // A pod that does not decode is not counted, but its name is taken all the same:
        // left out here, its slot would be chosen (and found taken) by every sync.
        for error in &listed.errors {
            if let Some((_, name)) = api::parse_key::<Pod>(self.registry.prefix(), &error.key) {
                fresh.mark_undecodable(name.into());
            }
        }
        Ok(PodView::Fresh(fresh))
    }

    /// Validates the controller and plans its sync over `pods`; `None` (after one
    /// warning per version) for an invalid controller.
    fn assess(&self, key: &str, rc: &ReplicationController, pods: &PodView) -> Option<Assessment> {
        if let Err(e) = api::validate(rc) {
            let version = rc.metadata.resource_version.unwrap_or_default().to_string();
            self.warn_once(key, &version, &format!("skipping controller: {e}"));
            return None;
        }
        let selector = rc.spec.selector.as_selector();
        let mut active = pods.select(&selector);
        active.retain(|pod| pod.is_active());
        let plan = plan(rc.spec.replicas, active.len(), self.config.burst_replicas);
        Some(Assessment {
            selector,
            active,
            plan,
        })
    }

    /// `syncReplicationController`: reads the controller, counts its active pods,
    /// creates or deletes the difference, and writes `status.replicas`.
    ///
    /// # Errors
    /// When etcd fails, or a create or delete fails (the key is retried with backoff).
    /// An invalid or malformed controller is not an error: it is skipped, with one
    /// warning per bad version (for a malformed one, the controller informer's).
    pub async fn sync_replication_controller(&self, key: &str) -> anyhow::Result<()> {
        let Some((namespace, name)) = key.split_once('/') else {
            anyhow::bail!("invalid controller key {key:?}");
        };
        let written = self.written(key);
        let Some((mut rc, from_cache)) = self.controller(namespace, name, written).await? else {
            return Ok(());
        };
        let pods = self.pods(namespace, written).await?;
        let Some(mut assessed) = self.assess(key, &rc, &pods) else {
            return Ok(());
        };
        if from_cache && assessed.plan != Plan::Nothing {
            // The controller and pod caches follow two watches, so a pod change can arrive
            // before the change to its controller that came first (its deletion, say).
            // Before writing, confirm the controller from etcd, as 2014's get-then-act did.
            let Some(fresh) = self.fresh_controller(namespace, name).await? else {
                return Ok(());
            };
            if fresh.metadata.resource_version != rc.metadata.resource_version {
                rc = fresh;
                let Some(again) = self.assess(key, &rc, &pods) else {
                    return Ok(());
                };
                assessed = again;
            }
        }
        let Assessment {
            selector,
            active,
            plan,
        } = assessed;
        let n_active = active.len();
        let (mut created, mut deleted, mut failures) = (0usize, 0usize, Vec::new());
        match plan {
            Plan::Nothing => {}
            Plan::Create(n) => {
                tracing::info!(
                    want = rc.spec.replicas,
                    have = n_active,
                    creating = n,
                    "scaling up"
                );
                let names = names_to_create_with(
                    &rc.metadata.name,
                    &rc.metadata.uid,
                    |name| pods.is_taken(name),
                    n,
                );
                (created, failures) = self.create_replicas(key, &rc, &selector, names).await;
            }
            Plan::Delete(n) => {
                tracing::info!(
                    want = rc.spec.replicas,
                    have = n_active,
                    deleting = n,
                    "scaling down"
                );
                let mut ranked = active;
                rank_cached_for_deletion(&mut ranked);
                ranked.truncate(n);
                (deleted, failures) = self.delete_pods(key, ranked).await;
            }
        }
        drop(pods);
        self.metrics.pods_created.inc_by(created as u64);
        self.metrics.pods_deleted.inc_by(deleted as u64);
        let now_active = (n_active + created).saturating_sub(deleted) as i64;
        if rc.status.replicas != now_active {
            let mut updated = (*rc).clone();
            updated.status.replicas = now_active;
            match self.registry.update(&updated).await {
                Ok(stored) => {
                    let revision = stored.metadata.resource_version.unwrap_or_default().0;
                    self.record(key, |w| w.status = w.status.max(revision));
                }
                // The controller changed meanwhile; its event syncs it again.
                Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => {}
                Err(e) => failures.push(anyhow::Error::from(e).context("update status")),
            }
        }
        match failures.into_iter().next() {
            None => Ok(()),
            Some(first) => Err(first),
        }
    }

    /// Creates pods in slow-start batches of 1, 2, 4, ... (continuing from where the
    /// controller's last successful creates got to), stopping after a batch with an
    /// error. Returns how many now exist for the controller, and the errors.
    async fn create_replicas(
        &self,
        key: &str,
        rc: &ReplicationController,
        selector: &Selector,
        names: Vec<String>,
    ) -> (usize, Vec<anyhow::Error>) {
        let mut names = names.into_iter();
        let mut created = 0;
        let first = match self.written(key).slow_start {
            Some((batch, at)) if at.elapsed() < SLOW_START_MEMORY => batch,
            _ => 1,
        };
        let mut last_batch = 0;
        for batch_size in slow_start_batches_from(first, names.len()) {
            last_batch = batch_size;
            let creates = names.by_ref().take(batch_size).map(|name| async move {
                let pod = new_pod_from_template(rc, name.clone());
                (name, self.pod_control.create_pod(pod).await)
            });
            let results = futures::future::join_all(creates).await;
            let mut errors = Vec::new();
            let mut highest = 0;
            for (name, result) in results {
                match result {
                    Ok(CreateOutcome::Created(revision)) => {
                        created += 1;
                        highest = highest.max(revision.0);
                    }
                    // A concurrent sync (or another kcm) created this very replica.
                    Ok(CreateOutcome::Exists(Some(pod)))
                        if pod.is_active() && selector.matches(&pod.metadata.labels) =>
                    {
                        created += 1
                    }
                    Ok(CreateOutcome::Exists(_)) => {
                        tracing::debug!(pod = %name, "name taken by another pod; the next sync picks another slot")
                    }
                    Err(e) => errors
                        .push(e.context(format!("create pod {}/{name}", rc.metadata.namespace))),
                }
            }
            self.record(key, |w| w.pods = w.pods.max(highest));
            if !errors.is_empty() {
                self.record(key, |w| w.slow_start = None);
                return (created, errors);
            }
        }
        let burst = self.config.burst_replicas.max(1);
        let next = (last_batch * 2).clamp(1, burst);
        self.record(key, |w| {
            w.slow_start = Some((next, tokio::time::Instant::now()))
        });
        (created, Vec::new())
    }

    /// Deletes the given pods in parallel, each guarded by its resourceVersion.
    async fn delete_pods(
        &self,
        key: &str,
        victims: Vec<Arc<CachedPod>>,
    ) -> (usize, Vec<anyhow::Error>) {
        let deletes = victims.iter().map(|pod| async move {
            let result = self
                .pod_control
                .delete_pod(
                    &pod.namespace,
                    &pod.name,
                    ResourceVersion(pod.resource_version),
                )
                .await;
            (pod.key(), result)
        });
        let mut deleted = 0;
        let mut highest = 0;
        let mut errors = Vec::new();
        for (pod, result) in futures::future::join_all(deletes).await {
            match result {
                Ok(DeleteOutcome::Deleted(revision)) => {
                    deleted += 1;
                    highest = highest.max(revision.0);
                }
                Ok(DeleteOutcome::Gone) => deleted += 1,
                Ok(DeleteOutcome::Changed) => {
                    tracing::debug!(%pod, "pod changed since it was ranked; skipped")
                }
                Err(e) => errors.push(e.context(format!("delete pod {pod}"))),
            }
        }
        self.record(key, |w| w.pods = w.pods.max(highest));
        (deleted, errors)
    }
}

#[cfg(test)]
mod tests;
