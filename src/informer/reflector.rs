//! The [`Informer`]: a shared store fed by one list-and-watch of `etcd_watcher`'s
//! engine (client-go's reflector), with subscribers that hear of every change.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use futures::StreamExt as _;
use tokio::sync::{mpsc, watch};

use super::store::{Change, Store};
use super::{
    CachedNode, CachedPod, Delta, Handoff, Namespace, NodeLease, ObjectKey, Reflected,
    Registration, Stored,
};
use crate::api::{Deployment, Endpoints, ReplicaSet, ReplicationController, Service};
use crate::etcd_watcher::{
    relist_diff, BackoffConfig, EngineConfig, ListChange, ListReason, Range, RawEvent, RawItem,
    RawKind, RawWatch, Start, WatchMetrics, Watcher, WATCH_BUFFER,
};
use crate::labels::Selector;
use crate::registry::{prefix_range_end, DecodeError};

/// One listed key: namespace, name, its revision, and what it becomes in the store.
type Listed<I> = (String, String, i64, Change<I>);

/// How many of the first list's deltas are made at a time.
const ADDED_CHUNK: usize = 1024;

/// How far the store has got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Progress {
    /// Every event up to this revision has been applied.
    revision: i64,
    /// The first list has been applied.
    synced: bool,
}

/// Where an informer lists and watches: etcd, through `etcd_watcher`'s engine, or a
/// [`RemoteSource`] (a Kubernetes API server) yielding the same items.
#[derive(Clone)]
pub enum Source {
    Etcd(Box<Watcher>),
    Remote(Arc<dyn RemoteSource>),
}

impl Source {
    /// The key prefix the items' keys are under.
    fn prefix(&self) -> &str {
        match self {
            Source::Etcd(watcher) => watcher.registry().prefix(),
            Source::Remote(remote) => remote.prefix(),
        }
    }
}

impl From<Watcher> for Source {
    fn from(watcher: Watcher) -> Source {
        Source::Etcd(Box::new(watcher))
    }
}

/// A list-and-watch that is not etcd's: it yields the engine's items for every object of
/// one resource, each under the key it would have in etcd (`{directory}{namespace}/{name}`)
/// with the value as kcm stores it and its resourceVersion as its revision, and keeps
/// going (resuming, relisting after a 410) until it is dropped.
pub trait RemoteSource: Send + Sync {
    /// The prefix the keys are made under.
    fn prefix(&self) -> &str;
    /// The items of `resource` (plural), whose keys start with `directory`.
    fn list_watch(
        &self,
        resource: &'static str,
        directory: String,
        backoff: BackoffConfig,
        metrics: Arc<WatchMetrics>,
    ) -> RawWatch;
}

struct Shared<I> {
    source: Source,
    store: RwLock<Store<I>>,
    progress: watch::Sender<Progress>,
    subscribers: Mutex<Vec<mpsc::Sender<Delta<I>>>>,
    metrics: Arc<WatchMetrics>,
    backoff: BackoffConfig,
    /// The items this process offers for its own writes, once a writer asks
    /// ([`Informer::handoff`]).
    handoff: OnceLock<Handoff<I>>,
}

/// A shared cache of every object of one kind under the prefix. Cheap to clone; every
/// clone reads the same store. [`Informer::run`] feeds it; run it once.
pub struct Informer<I> {
    shared: Arc<Shared<I>>,
}

impl<I> Clone for Informer<I> {
    fn clone(&self) -> Self {
        Informer {
            shared: self.shared.clone(),
        }
    }
}

/// The pod informer the controllers share.
pub type PodInformer = Informer<CachedPod>;

impl PodInformer {
    /// Where a writer of pods offers each pod it creates, in cached form, for its watch
    /// event to take rather than decode ([`Handoff`]).
    pub fn handoff(&self) -> Handoff<CachedPod> {
        (self.shared.handoff)
            .get_or_init(|| Handoff::new(|pod, revision| pod.resource_version = revision))
            .clone()
    }
}

/// The replication manager's controller informer.
pub type ControllerInformer = Informer<ReplicationController>;
/// The ReplicaSet controller's informer.
pub type ReplicaSetInformer = Informer<ReplicaSet>;
/// The Deployment controller's informer.
pub type DeploymentInformer = Informer<Deployment>;
/// The endpoints controller's service informer.
pub type ServiceInformer = Informer<Service>;
/// The informer of endpoints (kept whole).
pub type EndpointsInformer = Informer<Endpoints>;
/// The informer of Node documents (kept as stored).
pub type NodeInformer = Informer<CachedNode>;
/// The informer of the kubelets' registrations (kept by name).
pub type RegistrationInformer = Informer<Registration>;
/// The informer of the kubelets' node Leases.
pub type NodeLeaseInformer = Informer<NodeLease>;

impl<I: Reflected> Informer<I> {
    /// An informer reading through `source` (a [`Watcher`] for etcd); empty and not synced
    /// until [`Informer::run`].
    pub fn new(source: impl Into<Source>) -> Informer<I> {
        Informer {
            shared: Arc::new(Shared {
                source: source.into(),
                store: RwLock::new(Store::default()),
                progress: watch::Sender::new(Progress::default()),
                subscribers: Mutex::new(Vec::new()),
                metrics: Arc::default(),
                backoff: BackoffConfig::default(),
                handoff: OnceLock::new(),
            }),
        }
    }

    /// Replaces the backoff between re-opens.
    ///
    /// # Panics
    /// When the informer has been cloned already: configure it before sharing it.
    pub fn with_backoff(self, backoff: BackoffConfig) -> Self {
        self.configure(|shared| shared.backoff = backoff)
    }

    /// Counts into `metrics` (kept across informers of the same resource, so counters
    /// survive a new leadership term) instead of counters of its own.
    ///
    /// # Panics
    /// When the informer has been cloned already.
    pub fn with_metrics(self, metrics: Arc<WatchMetrics>) -> Self {
        self.configure(|shared| shared.metrics = metrics)
    }

    fn configure(self, change: impl FnOnce(&mut Shared<I>)) -> Self {
        let mut shared = Arc::try_unwrap(self.shared)
            .unwrap_or_else(|_| panic!("configure an informer before sharing it"));
        change(&mut shared);
        Informer {
            shared: Arc::new(shared),
        }
    }

    /// The counters of the informer's watch (relists, restarts, decode errors, revision).
    pub fn metrics(&self) -> Arc<WatchMetrics> {
        self.shared.metrics.clone()
    }

    /// Every change from now on, after the store has applied it. A subscriber that stops
    /// reading holds the informer back (the buffer is [`WATCH_BUFFER`]); drop the receiver
    /// to unsubscribe.
    pub fn subscribe(&self) -> mpsc::Receiver<Delta<I>> {
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        self.shared
            .subscribers
            .lock()
            .expect("subscribers lock")
            .push(tx);
        rx
    }

    /// The revision up to which every event has been applied (0 before the first list).
    pub fn revision(&self) -> i64 {
        self.shared.progress.borrow().revision
    }

    /// Whether the first list has been applied.
    pub fn is_synced(&self) -> bool {
        self.shared.progress.borrow().synced
    }

    /// Waits until the store has synced and applied every event up to `revision`;
    /// `false` if that takes longer than `timeout`.
    pub async fn wait_for(&self, revision: i64, timeout: Duration) -> bool {
        let mut progress = self.shared.progress.subscribe();
        let reached = |p: &Progress| p.synced && p.revision >= revision;
        if reached(&progress.borrow()) {
            return true;
        }
        let reached = tokio::time::timeout(timeout, progress.wait_for(reached))
            .await
            .is_ok_and(|r| r.is_ok());
        reached
    }

    /// Waits until the first list has been applied (client-go's `WaitForCacheSync`).
    pub async fn wait_synced(&self) {
        let mut progress = self.shared.progress.subscribe();
        let _ = progress.wait_for(|p| p.synced).await;
    }

    /// Reads the namespace under the store's read lock (`None` when it holds nothing).
    /// Keep `read` short: the informer waits for it to apply new events.
    pub fn read<R>(&self, namespace: &str, read: impl FnOnce(Option<&Namespace<I>>) -> R) -> R {
        let store = self.shared.store.read().expect("store lock");
        read(store.namespaces.get(namespace))
    }

    /// One item.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<I>> {
        self.read(namespace, |ns| ns.and_then(|ns| ns.get(name)).cloned())
    }

    /// The items of `namespace` whose labels match `selector`.
    pub fn select(&self, namespace: &str, selector: &Selector) -> Vec<Arc<I>> {
        self.read(namespace, |ns| {
            ns.map(|ns| ns.select(selector)).unwrap_or_default()
        })
    }

    /// The namespace and name of every item.
    pub fn keys(&self) -> Vec<ObjectKey> {
        let store = self.shared.store.read().expect("store lock");
        store
            .namespaces
            .iter()
            .flat_map(|(ns, items)| {
                items
                    .items()
                    .map(move |item| ObjectKey::new(ns.clone(), item.shared_name()))
            })
            .collect()
    }

    /// What `f` makes of each item (given its namespace), for the items it makes
    /// something of, in one pass over the store: no copy of every key (100,000 pods'
    /// keys were 3 MiB at the controller manager's peak).
    pub fn filter_map<R>(&self, mut f: impl FnMut(&Arc<str>, &Arc<I>) -> Option<R>) -> Vec<R> {
        let store = self.shared.store.read().expect("store lock");
        store
            .namespaces
            .iter()
            .flat_map(|(namespace, ns)| ns.items().map(move |item| (namespace, item)))
            .filter_map(|(namespace, item)| f(namespace, item))
            .collect()
    }

    /// How many items the store holds.
    pub fn len(&self) -> usize {
        let store = self.shared.store.read().expect("store lock");
        store.namespaces.values().map(Namespace::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Lists, then follows the watch, until `shutdown` resolves: resumes from the last
    /// applied revision after a disconnect, lists again after compaction (410) or when
    /// etcd's revision went backwards, with the engine's backoff between attempts
    /// (`etcd_watcher`'s list-and-watch engine). Never returns an error: etcd failures
    /// are retried.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        tokio::select! {
            _ = shutdown => {}
            _ = self.reflect() => {}
        }
        // Stopped, not disconnected: `/healthz` must not report it.
        self.shared.metrics.set_stopped();
    }

    /// The reflector: applies the engine's items to the store.
    async fn reflect(&self) {
        let shared = &self.shared;
        let directory = I::directory(shared.source.prefix());
        let watcher = match &shared.source {
            Source::Etcd(watcher) => watcher,
            Source::Remote(remote) => {
                let raw = remote.list_watch(
                    I::RESOURCE,
                    directory,
                    shared.backoff.clone(),
                    shared.metrics.clone(),
                );
                return self.follow(raw).await;
            }
        };
        let config = EngineConfig {
            range: {
                let start = directory;
                Range {
                    end: prefix_range_end(start.as_bytes()),
                    watched_key: Some(start.clone()),
                    start,
                }
            },
            start: Start::List,
            resume: true,
            // A PUT is an upsert and a DELETE a removal: no previous values needed.
            prev_kv: false,
            backoff: shared.backoff.clone(),
            metrics: shared.metrics.clone(),
        };
        self.follow(watcher.engine(config).into_stream()).await;
    }

    /// Applies the items of `raw` until it ends.
    async fn follow(&self, mut raw: RawWatch) {
        let shared = &self.shared;
        // The changes of a relist in progress (not the first list, which goes straight
        // into the empty store; its deltas are made from the store once it is complete).
        let mut listed: Vec<Listed<I>> = Vec::new();
        while let Some(item) = raw.next().await {
            match item {
                RawItem::Page { kvs, .. } => {
                    let changes = kvs.iter().filter_map(|kv| self.decode(kv));
                    if self.is_synced() {
                        listed.extend(changes.map(|(namespace, name, revision, change)| {
                            (namespace.to_string(), name.to_string(), revision, change)
                        }));
                    } else {
                        // The first list goes into the (empty) store page by page, so that
                        // each page's pods share their label sets at once: collected
                        // first, 100,000 pods would hold 100,000 copies of a few label
                        // sets at the peak. Nobody reads the store before it is synced.
                        let changes: Vec<_> = changes.collect();
                        let mut store = shared.store.write().expect("store lock");
                        for (namespace, name, _, change) in changes {
                            store.apply(namespace, name, change, false);
                        }
                    }
                }
                RawItem::ListFailed => {
                    listed.clear();
                    if !self.is_synced() {
                        // Start the next attempt from an empty store again.
                        shared.store.write().expect("store lock").namespaces.clear();
                    }
                }
                RawItem::Listed { reason, revision } => {
                    // A relist's deltas, or the first list's items in key order.
                    let (deltas, added) = if self.is_synced() {
                        let deltas = std::mem::take(&mut listed);
                        let rewound = reason == ListReason::Rewound;
                        (self.replace(deltas, rewound), Vec::new())
                    } else {
                        let added = shared.store.read().expect("store lock").added_items();
                        (Vec::new(), added)
                    };
                    let added_count: usize = added.iter().map(|(_, items)| items.len()).sum();
                    tracing::info!(
                        resource = I::RESOURCE,
                        revision,
                        changes = deltas.len() + added_count,
                        ?reason,
                        "watch listed"
                    );
                    if reason == ListReason::Rewound {
                        // A new history: the old revisions mean nothing any more.
                        self.shared.progress.send_modify(|p| p.revision = revision);
                    }
                    self.advance(revision, true);
                    self.publish(deltas).await;
                    // Nothing else writes the store while this runs: the items are
                    // still the store's.
                    for (namespace, items) in &added {
                        for chunk in items.chunks(ADDED_CHUNK) {
                            self.publish(Store::added(namespace, chunk)).await;
                        }
                    }
                }
                RawItem::Events(events) => self.apply_events(&events).await,
                RawItem::Progress(revision) => self.advance(revision, false),
                RawItem::Resumed { from, reason } => {
                    tracing::info!(resource = I::RESOURCE, from, %reason, "watch resumed from its last resourceVersion");
                }
                // A resuming engine never ends on its own.
                RawItem::Ended(status) => {
                    tracing::error!(resource = I::RESOURCE, %status, "informer watch ended");
                    return;
                }
            }
        }
    }

    /// Applies a batch of watch events to the store and publishes the deltas.
    async fn apply_events(&self, events: &[RawEvent]) {
        let shared = &self.shared;
        let mut highest = 0;
        let mut changes = Vec::with_capacity(events.len());
        for event in events {
            highest = highest.max(event.mod_revision);
            let change = match event.kind {
                RawKind::Put => self.decode(event),
                RawKind::Delete => self
                    .parse(&event.key)
                    .map(|(ns, name)| (ns, name, event.mod_revision, Change::Remove)),
            };
            changes.extend(change);
        }
        let deltas: Vec<Delta<I>> = {
            let mut store = shared.store.write().expect("store lock");
            changes
                .into_iter()
                .filter_map(|(ns, name, _, change)| store.apply(ns, name, change, false))
                .collect()
        };
        shared
            .metrics
            .events
            .fetch_add(deltas.len() as u64, Ordering::Relaxed);
        self.advance(highest, false);
        self.publish(deltas).await;
    }

    /// `namespace` and `name` of a key of this kind; `None` (counted, logged once) for a
    /// key deeper than the layout allows.
    fn parse<'k>(&self, key: &'k str) -> Option<(&'k str, &'k str)> {
        let prefix = self.shared.source.prefix();
        match I::parse_key(prefix, key) {
            Some(parsed) => Some(parsed),
            None => {
                self.shared.metrics.skip_key(key);
                None
            }
        }
    }

    /// Decodes one stored value into a change, its namespace and name borrowed from its
    /// key.
    fn decode<'r>(&self, raw: &'r RawEvent) -> Option<(&'r str, &'r str, i64, Change<I>)> {
        let (namespace, name) = self.parse(&raw.key)?;
        let prefix = self.shared.source.prefix();
        let stored = Stored {
            create_revision: raw.create_revision,
            ..Stored::new(prefix, &raw.key, &raw.value, raw.mod_revision)
        };
        let offered = (self.shared.handoff.get())
            .and_then(|handoff| handoff.take(&raw.key, &raw.value, raw.mod_revision));
        let change = match offered.map_or_else(|| I::decode(stored), Ok) {
            Ok(item) => Change::Upsert(item),
            Err(e) => {
                self.shared.metrics.undecodable(&DecodeError {
                    kind: I::KIND,
                    key: raw.key.clone(),
                    revision: raw.mod_revision,
                    message: format!("{e:#}"),
                });
                Change::Undecodable
            }
        };
        Some((namespace, name, raw.mod_revision, change))
    }

    /// Replaces the store's contents with a relist, through the one relist diff, and
    /// returns the deltas. After a rewind every listed item replaces its namesake, even
    /// at an equal revision (two histories reuse revision numbers).
    fn replace(&self, listed: Vec<Listed<I>>, rewound: bool) -> Vec<Delta<I>> {
        let mut store = self.shared.store.write().expect("store lock");
        let keys: Vec<String> = listed
            .iter()
            .map(|(namespace, name, _, _)| format!("{namespace}/{name}"))
            .collect();
        let known: Vec<(String, Option<i64>)> = store
            .namespaces
            .iter()
            .flat_map(|(ns, items)| {
                let decoded = items.items().map(move |item| {
                    let name = item.name();
                    (format!("{ns}/{name}"), Some(item.resource_version()))
                });
                // An undecodable name has no version: it never compares equal.
                let undecodable = items
                    .undecodable
                    .iter()
                    .map(move |name| (format!("{ns}/{name}"), None));
                decoded.chain(undecodable)
            })
            .map(|(key, version)| (key, if rewound { None } else { version }))
            .collect();
        let listed_versions: Vec<(&str, Option<i64>, i64)> = listed
            .iter()
            .zip(&keys)
            .map(|((_, _, revision, change), key)| {
                let version = matches!(change, Change::Upsert(_)).then_some(*revision);
                (key.as_str(), version, *revision)
            })
            .collect();
        let changes = relist_diff(
            known.iter().map(|(key, version)| (key.as_str(), *version)),
            &listed_versions,
        );
        drop(listed_versions);
        let mut listed: Vec<Option<Listed<I>>> = listed.into_iter().map(Some).collect();
        let mut deltas = Vec::new();
        for change in changes {
            match change {
                ListChange::Added(i) | ListChange::Modified(i) => {
                    let (namespace, name, _, change) = listed[i].take().expect("each once");
                    deltas.extend(store.apply(&namespace, &name, change, rewound));
                }
                ListChange::Deleted(key) => {
                    let (namespace, name) = key.split_once('/').expect("ns/name");
                    deltas.extend(store.apply(namespace, name, Change::Remove, false));
                }
            }
        }
        deltas
    }

    fn advance(&self, revision: i64, synced: bool) {
        self.shared.metrics.observe_revision(revision);
        self.shared.progress.send_if_modified(|progress| {
            let before = *progress;
            progress.revision = progress.revision.max(revision);
            progress.synced |= synced;
            *progress != before
        });
    }

    /// Sends deltas to every subscriber, dropping those that went away.
    async fn publish(&self, deltas: Vec<Delta<I>>) {
        if deltas.is_empty() {
            return;
        }
        let subscribers = self
            .shared
            .subscribers
            .lock()
            .expect("subscribers lock")
            .clone();
        let mut gone = false;
        for subscriber in &subscribers {
            for delta in &deltas {
                if subscriber.send(delta.clone()).await.is_err() {
                    gone = true;
                    break;
                }
            }
        }
        if gone {
            self.shared
                .subscribers
                .lock()
                .expect("subscribers lock")
                .retain(|s| !s.is_closed());
        }
    }
}
