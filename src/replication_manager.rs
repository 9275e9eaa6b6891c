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
//! - a deleted controller creates and deletes nothing; status.replicas is written.
//!
//! Invariant: a sync counts pods from a fresh etcd read, which includes every write this
//! manager made for the controller (its own creates returned before the read began).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::api::{
    self, ObjectMeta, Pod, PodPhase, PodStatus, ReplicationController, ResourceVersion,
};
use crate::controller::{forward, log_notice, worker, SyncHandler};
use crate::etcd_watcher::{self, BackoffConfig, Update, WatchEvent, Watcher};
use crate::labels::{Selector, Set};
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
}

impl Default for ManagerConfig {
    fn default() -> Self {
        ManagerConfig {
            sync_period: Duration::from_secs(10),
            concurrent_syncs: 5,
            burst_replicas: 500,
            shutdown_timeout: Duration::from_secs(8),
            watch_backoff: BackoffConfig::default(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// PodControl: the seam at the IO boundary (2014's PodControlInterface)

/// What a create found.
#[derive(Debug, Clone, PartialEq)]
pub enum CreateOutcome {
    Created,
    /// The name was taken; the pod holding it, if it could be read.
    Exists(Option<Box<Pod>>),
}

/// What a guarded delete found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    Deleted,
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
            Ok(_) => Ok(CreateOutcome::Created),
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
            Ok(_) => Ok(DeleteOutcome::Deleted),
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
    let mut names = Vec::with_capacity(n);
    let mut chosen = HashSet::with_capacity(n);
    let mut slot = 0u64;
    while names.len() < n {
        let name = pod_name(controller, uid, slot);
        if !existing.contains(name.as_str()) && chosen.insert(name.clone()) {
            names.push(name);
        }
        slot += 1;
    }
    names
}

/// Sizes of slow-start batches for `n` creates: 1, 2, 4, ... (the ReplicaSet rule).
pub fn slow_start_batches(n: usize) -> Vec<usize> {
    let mut batches = Vec::new();
    let (mut size, mut left) = (1, n);
    while left > 0 {
        let batch = size.min(left);
        batches.push(batch);
        left -= batch;
        size *= 2;
    }
    batches
}

/// Sorts active pods so that the ones to delete first come first: unassigned before
/// assigned, Pending before Unknown before Running, newer before older, then by name.
pub fn rank_for_deletion(pods: &mut [Pod]) {
    fn phase_rank(phase: PodPhase) -> u8 {
        match phase {
            PodPhase::Pending => 0,
            PodPhase::Unknown => 1,
            PodPhase::Running => 2,
            PodPhase::Succeeded | PodPhase::Failed => 3,
        }
    }
    pods.sort_by(|a, b| {
        let assigned = |p: &Pod| !p.spec.host.is_empty();
        assigned(a)
            .cmp(&assigned(b))
            .then(phase_rank(a.phase()).cmp(&phase_rank(b.phase())))
            // RFC 3339 timestamps of one format sort as strings; newer first.
            .then(
                b.metadata
                    .creation_timestamp
                    .cmp(&a.metadata.creation_timestamp),
            )
            .then(a.metadata.name.cmp(&b.metadata.name))
    });
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
}

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
            }),
            sync_handler: self.sync_handler,
        }
    }

    /// Replaces the sync handler (tests count syncs without touching etcd).
    pub fn with_sync_handler(mut self, handler: SyncHandler) -> Self {
        self.sync_handler = Some(handler);
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

    /// Runs the manager until `shutdown` resolves.
    ///
    /// Watches controllers and pods in all namespaces from `""` (so every existing
    /// controller syncs at start), resyncs every controller each sync period, and syncs
    /// a controller on each of its events and on relevant pod events.
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
        let rc_watch = watcher
            .resumable_list::<ReplicationController>(None, "", etcd_watcher::everything())?
            .with_backoff(backoff.clone());
        let pod_watch = watcher
            .resumable_list::<Pod>(None, "", etcd_watcher::everything())?
            .with_backoff(backoff);
        self.inner
            .metrics
            .register_watch("replicationcontrollers", rc_watch.metrics());
        self.inner
            .metrics
            .register_watch("pods", pod_watch.metrics());
        let mut watch_tasks = JoinSet::<()>::new();
        let rc_events = forward(rc_watch, &mut watch_tasks);
        let pod_events = forward(pod_watch, &mut watch_tasks);
        let result = self.run_loop(rc_events, pod_events, shutdown).await;
        watch_tasks.shutdown().await;
        result
    }

    /// The loop itself, over any source of controller and pod updates (tests feed
    /// channels).
    ///
    /// # Errors
    /// Never at present; kept fallible for future setup steps.
    pub async fn run_loop(
        &self,
        mut rc_events: mpsc::Receiver<Update<ReplicationController>>,
        mut pod_events: mpsc::Receiver<Update<Pod>>,
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
                Some(update) = rc_events.recv() => Trigger::Controller(Box::new(update)),
                Some(update) = pod_events.recv() => Trigger::Pod(Box::new(update)),
            };
            match trigger {
                Trigger::Shutdown => break,
                Trigger::Resync => {
                    tracing::debug!(controllers = index.len(), "resync");
                    for key in index.keys() {
                        queue.add(key);
                    }
                }
                Trigger::Controller(update) if matches!(*update, Update::Event(..)) => {
                    match update.into_event() {
                        Some(WatchEvent::Added(rc) | WatchEvent::Modified(rc)) => {
                            let key = rc.metadata.key();
                            index.upsert(&rc);
                            queue.add(key);
                        }
                        // 2014 synced a deleted controller at its last state, which could
                        // create orphans; a deleted controller gets no more writes.
                        Some(WatchEvent::Deleted(rc)) => {
                            index.remove(&rc.metadata);
                            self.inner.forget_warning(&rc.metadata.key());
                        }
                        _ => {}
                    }
                }
                Trigger::Pod(update) if matches!(*update, Update::Event(..)) => {
                    let event = update.into_event().expect("checked to be an event");
                    for key in index.controllers_to_sync_for(&event) {
                        queue.add(key);
                    }
                }
                Trigger::Controller(notice) => log_notice("replicationcontrollers", &notice),
                Trigger::Pod(notice) => log_notice("pods", &notice),
            }
        }
        tracing::info!("replication manager shutting down");
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
    Controller(Box<Update<ReplicationController>>),
    Pod(Box<Update<Pod>>),
}

/// The controllers the loop knows of, by namespace, with what it needs to map pod
/// events to them; and the last labels and activity of every pod.
#[derive(Default)]
struct ControllerIndex {
    selectors: HashMap<String, HashMap<String, Selector>>,
    pods: HashMap<String, (Set, bool)>,
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

    fn remove(&mut self, meta: &ObjectMeta) {
        if let Some(names) = self.selectors.get_mut(&meta.namespace) {
            names.remove(&meta.name);
            if names.is_empty() {
                self.selectors.remove(&meta.namespace);
            }
        }
    }

    /// The controllers a pod event should sync: those in the pod's namespace whose
    /// selector matches its old or new labels, when the pod was deleted, stopped being
    /// active, or changed labels.
    fn controllers_to_sync_for(&mut self, event: &WatchEvent<Pod>) -> Vec<String> {
        let Some(pod) = event.object() else {
            return Vec::new();
        };
        let key = pod.metadata.key();
        let new_state = (pod.metadata.labels.clone(), pod.is_active());
        let old_state = match event {
            WatchEvent::Deleted(_) => self.pods.remove(&key),
            _ => self.pods.insert(key, new_state.clone()),
        };
        let relevant = match (event, &old_state) {
            (WatchEvent::Deleted(_), _) => true,
            (_, Some((old_labels, old_active))) => {
                *old_labels != new_state.0 || (*old_active && !new_state.1)
            }
            // First sight of an inactive pod (e.g. after a relist).
            (_, None) => !new_state.1,
        };
        if !relevant {
            return Vec::new();
        }
        let Some(controllers) = self.selectors.get(&pod.metadata.namespace) else {
            return Vec::new();
        };
        controllers
            .iter()
            .filter(|(_, selector)| {
                selector.matches(&pod.metadata.labels)
                    || old_state
                        .as_ref()
                        .is_some_and(|(old, _)| selector.matches(old))
            })
            .map(|(name, _)| format!("{}/{name}", pod.metadata.namespace))
            .collect()
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

    fn forget_warning(&self, key: &str) {
        self.warned.lock().expect("warned lock").remove(key);
    }

    /// `syncReplicationController`: reads the controller, counts its active pods from a
    /// fresh read, creates or deletes the difference, and writes `status.replicas`.
    ///
    /// # Errors
    /// When etcd fails, or a create or delete fails (the key is retried with backoff).
    /// An invalid or malformed controller is not an error: it is skipped, with one
    /// warning per bad version (for a malformed one, the controller watch's).
    pub async fn sync_replication_controller(&self, key: &str) -> anyhow::Result<()> {
        let Some((namespace, name)) = key.split_once('/') else {
            anyhow::bail!("invalid controller key {key:?}");
        };
        let rc = match self
            .registry
            .get::<ReplicationController>(namespace, name)
            .await
        {
            Ok(rc) => rc,
            // Deleted since it was queued: nothing to do (2014 synced it anyway).
            Err(StorageError::NotFound { .. }) => return Ok(()),
            // The controller watch has already warned about this very value (it meets
            // every stored revision, by event or by list, and reports each it cannot
            // decode); a second warning here would report one bad write twice.
            Err(StorageError::Decode(e)) => {
                tracing::debug!(error = %e, "skipping malformed controller");
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        let version = rc.metadata.resource_version.unwrap_or_default().to_string();
        if let Err(e) = api::validate(&rc) {
            self.warn_once(key, &version, &format!("skipping controller: {e}"));
            return Ok(());
        }
        let selector = rc.spec.selector.as_selector();
        let listed = self
            .registry
            .list::<Pod>(Some(namespace), &Selector::everything())
            .await?;
        // A pod that does not decode is not counted, but its name is taken all the same:
        // left out here, its slot would be chosen (and found taken) by every sync.
        let undecodable_names = listed
            .errors
            .iter()
            .filter_map(|e| api::parse_key::<Pod>(self.registry.prefix(), &e.key))
            .map(|(_, name)| name);
        let existing_names: HashSet<&str> = listed
            .items
            .iter()
            .map(|p| p.metadata.name.as_str())
            .chain(undecodable_names)
            .collect();
        let active: Vec<Pod> = filter_active_pods(
            listed
                .items
                .iter()
                .filter(|p| selector.matches(&p.metadata.labels))
                .cloned()
                .collect(),
        );
        let n_active = active.len();
        let (mut created, mut deleted, mut failures) = (0usize, 0usize, Vec::new());
        match plan(rc.spec.replicas, n_active, self.config.burst_replicas) {
            Plan::Nothing => {}
            Plan::Create(n) => {
                tracing::info!(
                    want = rc.spec.replicas,
                    have = n_active,
                    creating = n,
                    "scaling up"
                );
                let names =
                    names_to_create(&rc.metadata.name, &rc.metadata.uid, &existing_names, n);
                (created, failures) = self.create_replicas(&rc, &selector, names).await;
            }
            Plan::Delete(n) => {
                tracing::info!(
                    want = rc.spec.replicas,
                    have = n_active,
                    deleting = n,
                    "scaling down"
                );
                let mut ranked = active;
                rank_for_deletion(&mut ranked);
                ranked.truncate(n);
                (deleted, failures) = self.delete_pods(ranked).await;
            }
        }
        self.metrics.pods_created.inc_by(created as u64);
        self.metrics.pods_deleted.inc_by(deleted as u64);
        let now_active = (n_active + created).saturating_sub(deleted) as i64;
        if rc.status.replicas != now_active {
            let mut updated = rc.clone();
            updated.status.replicas = now_active;
            match self.registry.update(&updated).await {
                Ok(_) => {}
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

    /// Creates pods in slow-start batches of 1, 2, 4, ... stopping after a batch with an
    /// error. Returns how many now exist for the controller, and the errors.
    async fn create_replicas(
        &self,
        rc: &ReplicationController,
        selector: &Selector,
        names: Vec<String>,
    ) -> (usize, Vec<anyhow::Error>) {
        let mut names = names.into_iter();
        let mut created = 0;
        for batch_size in slow_start_batches(names.len()) {
            let creates = names.by_ref().take(batch_size).map(|name| async move {
                let pod = new_pod_from_template(rc, name.clone());
                (name, self.pod_control.create_pod(pod).await)
            });
            let results = futures::future::join_all(creates).await;
            let mut errors = Vec::new();
            for (name, result) in results {
                match result {
                    Ok(CreateOutcome::Created) => created += 1,
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
            if !errors.is_empty() {
                return (created, errors);
            }
        }
        (created, Vec::new())
    }

    /// Deletes the given pods in parallel, each guarded by its resourceVersion.
    async fn delete_pods(&self, victims: Vec<Pod>) -> (usize, Vec<anyhow::Error>) {
        let deletes = victims.iter().map(|pod| async move {
            let meta = &pod.metadata;
            let result = self
                .pod_control
                .delete_pod(
                    &meta.namespace,
                    &meta.name,
                    meta.resource_version.unwrap_or_default(),
                )
                .await;
            (meta.key(), result)
        });
        let mut deleted = 0;
        let mut errors = Vec::new();
        for (key, result) in futures::future::join_all(deletes).await {
            match result {
                Ok(DeleteOutcome::Deleted | DeleteOutcome::Gone) => deleted += 1,
                Ok(DeleteOutcome::Changed) => {
                    tracing::debug!(pod = %key, "pod changed since it was ranked; skipped")
                }
                Err(e) => errors.push(e.context(format!("delete pod {key}"))),
            }
        }
        (deleted, errors)
    }
}

#[cfg(test)]
mod tests;
