//! Shared, indexed caches of one kind, each fed by one list-and-watch: client-go's
//! `SharedIndexInformer` (reflector + indexer + event handlers), which the manager
//! adopted in 2015, for kcm.
//!
//! 2014 had no cache: every sync listed its namespace's pods from the apiserver, so a
//! resync of 1,000 controllers in one namespace read that namespace 1,000 times. Here one
//! [`Informer`] per kind lists once, then follows one etcd watch, and every controller
//! reads from its store: the replication manager and the endpoints controller share the
//! pod informer, so pods are watched once and stored once.
//!
//! The store keeps a compact form of each object ([`Cached`]): for pods, [`CachedPod`]
//! holds only what the controllers read (labels, phase, host, IP, ports, creation time,
//! resourceVersion), with label sets shared between the pods that carry the same ones.
//! A decoded `Pod` costs about six times its JSON document; a `CachedPod` less than one.
//!
//! Invariants:
//! - the store mirrors etcd at [`Informer::revision`]: every event up to that revision has
//!   been applied, and none after it (a value that does not decode is not an object of
//!   the kind: its key is removed, and its name is remembered as taken);
//! - subscribers get a [`Delta`] for every change, after the store has applied it, in
//!   revision order; a subscriber only sees changes made after it subscribed;
//! - the revision never goes backwards; `synced` turns true once, after the first list.
//!
//! Unlike the resumable watch (`etcd_watcher`), the reflector here needs no previous
//! values and no 2014 translation table: it mirrors keys, so a PUT is an upsert and a
//! DELETE a removal.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt as _;
use tokio::sync::{mpsc, watch};

use crate::api::{self, IntOrString, Object, Pod, PodPhase, ReplicationController};
use crate::etcd_watcher::{
    relist_diff, BackoffConfig, EngineConfig, ListChange, ListReason, Range, RawEvent, RawItem,
    RawKind, Start, WatchMetrics, Watcher, WATCH_BUFFER,
};
use crate::labels::{Operator, Selector, Set};
use crate::registry::DecodeError;

// ---------------------------------------------------------------------------------------
// What the store keeps

/// The form in which an informer stores objects of one kind.
pub trait Cached: Send + Sync + Sized + 'static {
    /// The stored kind.
    type Object: Object;
    /// Builds the cached form of a decoded object.
    fn from_object(object: Self::Object) -> Self;
    /// The labels the store groups and indexes items by; `None` for no label index.
    fn labels(&self) -> Option<&Arc<Set>> {
        None
    }
    /// Replaces the labels with an equal, shared copy (called before the item is stored).
    fn share_labels(&mut self, _labels: Arc<Set>) {}
    /// Replaces the namespace and name with the store's copies of them.
    fn share_names(&mut self, _namespace: &Arc<str>, _name: &Arc<str>) {}
    /// The item's `metadata.resourceVersion`.
    fn resource_version(&self) -> i64;
}

/// Controllers are few and small: the store keeps them whole.
impl Cached for ReplicationController {
    type Object = ReplicationController;

    fn from_object(object: ReplicationController) -> Self {
        object
    }

    fn resource_version(&self) -> i64 {
        self.metadata.resource_version.map_or(0, |rv| rv.0)
    }
}

/// What the controllers read of a pod.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedPod {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    /// Shared with every other cached pod that has equal labels.
    pub labels: Arc<Set>,
    pub resource_version: i64,
    pub phase: PodPhase,
    /// `spec.host` is set (the pod is bound to a node).
    pub assigned: bool,
    /// RFC 3339, as stored.
    pub creation_timestamp: Option<Box<str>>,
    /// `status.podIP`, when set and non-empty.
    pub pod_ip: Option<Box<str>>,
    pub ports: PodPorts,
}

impl CachedPod {
    /// Whether the pod counts towards a controller's replicas (`filterActivePods`).
    pub fn is_active(&self) -> bool {
        !matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl From<&Pod> for CachedPod {
    fn from(pod: &Pod) -> CachedPod {
        let meta = &pod.metadata;
        CachedPod {
            namespace: meta.namespace.as_str().into(),
            name: meta.name.as_str().into(),
            labels: Arc::new(meta.labels.clone()),
            resource_version: meta.resource_version.map_or(0, |rv| rv.0),
            phase: pod.phase(),
            assigned: !pod.spec.host.is_empty(),
            creation_timestamp: meta.creation_timestamp.as_deref().map(Box::from),
            pod_ip: pod.pod_ip().map(Box::from),
            ports: PodPorts::of(pod),
        }
    }
}

impl Cached for CachedPod {
    type Object = Pod;

    fn from_object(pod: Pod) -> Self {
        CachedPod::from(&pod)
    }

    fn labels(&self) -> Option<&Arc<Set>> {
        Some(&self.labels)
    }

    fn share_labels(&mut self, labels: Arc<Set>) {
        self.labels = labels;
    }

    fn share_names(&mut self, namespace: &Arc<str>, name: &Arc<str>) {
        self.namespace = namespace.clone();
        self.name = name.clone();
    }

    fn resource_version(&self) -> i64 {
        self.resource_version
    }
}

/// The container ports of a pod, as `findPort` needs them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodPorts {
    /// The first container's first port.
    pub first: Option<i64>,
    /// Every named port of every container, in order.
    pub named: Box<[(Box<str>, i64)]>,
}

impl PodPorts {
    pub fn of(pod: &Pod) -> PodPorts {
        PodPorts {
            first: pod
                .spec
                .containers
                .first()
                .and_then(|c| c.ports.first())
                .map(|p| p.container_port),
            named: pod
                .spec
                .containers
                .iter()
                .flat_map(|c| &c.ports)
                .filter(|p| !p.name.is_empty())
                .map(|p| (Box::from(p.name.as_str()), p.container_port))
                .collect(),
        }
    }

    /// `findPort`: a number is used as given; a name is looked up among every
    /// container's ports; absent, 0 or "" means the first container's first port.
    pub fn find(&self, container_port: Option<&IntOrString>) -> Option<u16> {
        let port = match container_port {
            None | Some(IntOrString::Int(0)) => self.first.filter(|p| *p > 0),
            Some(IntOrString::String(name)) if name.is_empty() => self.first.filter(|p| *p > 0),
            Some(IntOrString::Int(port)) => Some(*port),
            Some(IntOrString::String(name)) => self
                .named
                .iter()
                .find(|(n, _)| **n == **name)
                .map(|(_, port)| *port),
        };
        port.and_then(|p| u16::try_from(p).ok()).filter(|p| *p > 0)
    }
}

// ---------------------------------------------------------------------------------------
// The store

/// One change, as a subscriber sees it: the item before and after (`None` when absent,
/// or when the stored value did not decode).
#[derive(Debug)]
pub struct Delta<I> {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    pub old: Option<Arc<I>>,
    pub new: Option<Arc<I>>,
}

impl<I> Delta<I> {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl<I> Clone for Delta<I> {
    fn clone(&self) -> Self {
        Delta {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            old: self.old.clone(),
            new: self.new.clone(),
        }
    }
}

/// The items of one namespace, with the label index.
pub struct Namespace<I> {
    items: HashMap<Arc<str>, Arc<I>>,
    /// Names whose stored value does not decode: not objects, but the names are taken.
    undecodable: HashSet<Arc<str>>,
    /// Items grouped by their exact label set.
    groups: HashMap<Arc<Set>, HashSet<Arc<str>>>,
    /// For each `key=value` pair, the label sets (groups) that contain it.
    by_pair: HashMap<(String, String), HashSet<Arc<Set>>>,
}

impl<I> Default for Namespace<I> {
    fn default() -> Self {
        Namespace {
            items: HashMap::new(),
            undecodable: HashSet::new(),
            groups: HashMap::new(),
            by_pair: HashMap::new(),
        }
    }
}

impl<I: Cached> Namespace<I> {
    /// A namespace holding `items` (a fresh read, for callers that cannot use the cache).
    pub fn from_items(
        items: impl IntoIterator<Item = I>,
        name_of: impl Fn(&I) -> Arc<str>,
    ) -> Self {
        let mut namespace = Namespace::default();
        for item in items {
            let name = name_of(&item);
            namespace.upsert(name, item);
        }
        namespace
    }

    /// Marks `name` as taken by a value that does not decode.
    pub fn mark_undecodable(&mut self, name: Arc<str>) -> Option<Arc<I>> {
        let old = self.remove(&name);
        self.undecodable.insert(name);
        old
    }

    pub fn get(&self, name: &str) -> Option<&Arc<I>> {
        self.items.get(name)
    }

    /// Whether `name` is held by an item or by a value that does not decode.
    pub fn is_taken(&self, name: &str) -> bool {
        self.items.contains_key(name) || self.undecodable.contains(name)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn items(&self) -> impl Iterator<Item = &Arc<I>> {
        self.items.values()
    }

    fn upsert(&mut self, name: Arc<str>, mut item: I) -> (Arc<I>, Option<Arc<I>>) {
        self.undecodable.remove(&name);
        if let Some(labels) = item.labels() {
            if let Some((shared, _)) = self.groups.get_key_value(&**labels) {
                let shared = shared.clone();
                item.share_labels(shared);
            }
        }
        let item = Arc::new(item);
        let old = self.items.insert(name.clone(), item.clone());
        let same_group = match (&old, item.labels()) {
            (Some(old), Some(labels)) => old.labels().is_some_and(|o| Arc::ptr_eq(o, labels)),
            _ => false,
        };
        if !same_group {
            if let Some(old) = &old {
                self.ungroup(&name, old);
            }
            if let Some(labels) = item.labels() {
                let members = self.groups.entry(labels.clone()).or_default();
                if members.is_empty() {
                    for (key, value) in labels.iter() {
                        self.by_pair
                            .entry((key.clone(), value.clone()))
                            .or_default()
                            .insert(labels.clone());
                    }
                }
                self.groups
                    .get_mut(&**labels)
                    .expect("inserted above")
                    .insert(name);
            }
        }
        (item, old)
    }

    fn remove(&mut self, name: &str) -> Option<Arc<I>> {
        self.undecodable.remove(name);
        let old = self.items.remove(name)?;
        self.ungroup(name, &old);
        Some(old)
    }

    fn ungroup(&mut self, name: &str, item: &Arc<I>) {
        let Some(labels) = item.labels() else {
            return;
        };
        let Some(members) = self.groups.get_mut(&**labels) else {
            return;
        };
        members.remove(name);
        if members.is_empty() {
            self.groups.remove(&**labels);
            for (key, value) in labels.iter() {
                let pair = (key.clone(), value.clone());
                if let Some(sets) = self.by_pair.get_mut(&pair) {
                    sets.remove(&**labels);
                    if sets.is_empty() {
                        self.by_pair.remove(&pair);
                    }
                }
            }
        }
    }

    /// The items whose labels match `selector`. Uses the index when the selector has a
    /// `key=value` requirement with a non-empty value (`key=` also matches objects without
    /// `key`, which no pair index can find); otherwise looks at every label set once.
    pub fn select(&self, selector: &Selector) -> Vec<Arc<I>> {
        let indexed = selector.requirements().iter().find_map(|requirement| {
            let value = requirement.values().first()?;
            (matches!(
                requirement.operator(),
                Operator::Equals | Operator::DoubleEquals
            ) && !value.is_empty())
            .then(|| (requirement.key().to_string(), value.clone()))
        });
        let mut selected = Vec::new();
        let mut take = |labels: &Arc<Set>| {
            if selector.matches(labels) {
                if let Some(members) = self.groups.get(&**labels) {
                    selected.extend(
                        members
                            .iter()
                            .filter_map(|name| self.items.get(name))
                            .cloned(),
                    );
                }
            }
        };
        match indexed {
            Some(pair) => {
                if let Some(sets) = self.by_pair.get(&pair) {
                    sets.iter().for_each(&mut take);
                }
            }
            None => self.groups.keys().for_each(&mut take),
        }
        selected
    }
}

struct Store<I> {
    namespaces: HashMap<Arc<str>, Namespace<I>>,
}

impl<I: Cached> Store<I> {
    fn namespace_entry(&mut self, namespace: &str) {
        if !self.namespaces.contains_key(namespace) {
            self.namespaces
                .insert(namespace.into(), Namespace::default());
        }
    }

    fn shared_namespace(&self, namespace: &str) -> Arc<str> {
        self.namespaces
            .get_key_value(namespace)
            .map_or_else(|| namespace.into(), |(ns, _)| ns.clone())
    }

    /// Applies one change and returns its delta (`None` when nothing changed).
    /// `force` replaces an item even at an equal resourceVersion (after a rewind).
    fn apply(
        &mut self,
        namespace: &str,
        name: &str,
        change: Change<I>,
        force: bool,
    ) -> Option<Delta<I>> {
        self.namespace_entry(namespace);
        let shared_namespace = self.shared_namespace(namespace);
        let ns = self
            .namespaces
            .get_mut(namespace)
            .expect("entry made above");
        let shared_name: Arc<str> = ns
            .items
            .get_key_value(name)
            .map(|(n, _)| n.clone())
            .or_else(|| ns.undecodable.get(name).cloned())
            .unwrap_or_else(|| name.into());
        let (old, new) = match change {
            Change::Upsert(mut item) => {
                item.share_names(&shared_namespace, &shared_name);
                if !force
                    && ns
                        .items
                        .get(name)
                        .is_some_and(|old| old.resource_version() == item.resource_version())
                {
                    return None;
                }
                let (new, old) = ns.upsert(shared_name.clone(), item);
                (old, Some(new))
            }
            // Subscribers only hear of items: a name taken or freed by a value that does
            // not decode changes no item, so it has no delta.
            Change::Undecodable => (ns.mark_undecodable(shared_name.clone()), None),
            Change::Remove => (ns.remove(name), None),
        };
        if ns.items.is_empty() && ns.undecodable.is_empty() {
            self.namespaces.remove(namespace);
        }
        if old.is_none() && new.is_none() {
            return None;
        }
        Some(Delta {
            namespace: shared_namespace,
            name: shared_name,
            old,
            new,
        })
    }
}

enum Change<I> {
    Upsert(I),
    Undecodable,
    Remove,
}

// ---------------------------------------------------------------------------------------
// The informer

/// One listed key: namespace, name, its revision, and what it becomes in the store.
type Listed<I> = (String, String, i64, Change<I>);

/// How far the store has got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Progress {
    /// Every event up to this revision has been applied.
    revision: i64,
    /// The first list has been applied.
    synced: bool,
}

struct Shared<I> {
    watcher: Watcher,
    store: RwLock<Store<I>>,
    progress: watch::Sender<Progress>,
    subscribers: Mutex<Vec<mpsc::Sender<Delta<I>>>>,
    metrics: Arc<WatchMetrics>,
    backoff: BackoffConfig,
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
/// The replication manager's controller informer.
pub type ControllerInformer = Informer<ReplicationController>;

impl<I: Cached> Informer<I> {
    /// An informer reading through `watcher`; empty and not synced until [`Informer::run`].
    pub fn new(watcher: Watcher) -> Informer<I> {
        Informer {
            shared: Arc::new(Shared {
                watcher,
                store: RwLock::new(Store {
                    namespaces: HashMap::new(),
                }),
                progress: watch::Sender::new(Progress::default()),
                subscribers: Mutex::new(Vec::new()),
                metrics: Arc::default(),
                backoff: BackoffConfig::default(),
            }),
        }
    }

    /// Replaces the backoff between re-opens (before the informer is shared).
    pub fn with_backoff(self, backoff: BackoffConfig) -> Self {
        match Arc::try_unwrap(self.shared) {
            Ok(mut shared) => {
                shared.backoff = backoff;
                Informer {
                    shared: Arc::new(shared),
                }
            }
            Err(shared) => Informer { shared },
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

    /// `namespace/name` of every item.
    pub fn keys(&self) -> Vec<String> {
        let store = self.shared.store.read().expect("store lock");
        store
            .namespaces
            .iter()
            .flat_map(|(ns, items)| items.items.keys().map(move |name| format!("{ns}/{name}")))
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
    }

    /// The reflector: applies the engine's items to the store.
    async fn reflect(&self) {
        let shared = &self.shared;
        let config = EngineConfig {
            range: Range::list::<I::Object>(shared.watcher.registry().prefix(), None),
            start: Start::List,
            resume: true,
            // A PUT is an upsert and a DELETE a removal: no previous values needed.
            prev_kv: false,
            backoff: shared.backoff.clone(),
            metrics: shared.metrics.clone(),
        };
        let mut raw = shared.watcher.engine(config).into_stream();
        // The changes of a relist in progress (not the first list, which goes straight
        // into the empty store).
        let mut listed: Vec<Listed<I>> = Vec::new();
        // The deltas of the first list, published once it is complete.
        let mut first_deltas: Vec<Delta<I>> = Vec::new();
        while let Some(item) = raw.next().await {
            match item {
                RawItem::Page { kvs, .. } => {
                    let changes = kvs.iter().filter_map(|kv| self.decode(kv));
                    if self.is_synced() {
                        listed.extend(changes);
                    } else {
                        // The first list goes into the (empty) store page by page, so that
                        // each page's pods share their label sets at once: collected
                        // first, 100,000 pods would hold 100,000 copies of a few label
                        // sets at the peak. Nobody reads the store before it is synced.
                        let changes: Vec<_> = changes.collect();
                        let mut store = shared.store.write().expect("store lock");
                        for (namespace, name, _, change) in changes {
                            first_deltas.extend(store.apply(&namespace, &name, change, false));
                        }
                    }
                }
                RawItem::ListFailed => {
                    listed.clear();
                    first_deltas.clear();
                    if !self.is_synced() {
                        // Start the next attempt from an empty store again.
                        shared.store.write().expect("store lock").namespaces.clear();
                    }
                }
                RawItem::Listed { reason, revision } => {
                    let deltas = if self.is_synced() {
                        self.replace(std::mem::take(&mut listed), reason == ListReason::Rewound)
                    } else {
                        std::mem::take(&mut first_deltas)
                    };
                    tracing::info!(
                        resource = I::Object::RESOURCE,
                        revision,
                        changes = deltas.len(),
                        ?reason,
                        "watch listed"
                    );
                    if reason == ListReason::Rewound {
                        // A new history: the old revisions mean nothing any more.
                        self.shared.progress.send_modify(|p| p.revision = revision);
                    }
                    self.advance(revision, true);
                    self.publish(deltas).await;
                }
                RawItem::Events(events) => {
                    let mut highest = 0;
                    let mut changes = Vec::with_capacity(events.len());
                    for event in &events {
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
                            .filter_map(|(ns, name, _, change)| {
                                store.apply(&ns, &name, change, false)
                            })
                            .collect()
                    };
                    shared
                        .metrics
                        .events
                        .fetch_add(deltas.len() as u64, Ordering::Relaxed);
                    self.advance(highest, false);
                    self.publish(deltas).await;
                }
                RawItem::Progress(revision) => self.advance(revision, false),
                RawItem::Resumed { from, reason } => {
                    tracing::info!(resource = I::Object::RESOURCE, from, %reason, "watch resumed from its last resourceVersion");
                }
                // A resuming engine never ends on its own.
                RawItem::Ended(status) => {
                    tracing::error!(resource = I::Object::RESOURCE, %status, "informer watch ended");
                    return;
                }
            }
        }
    }

    /// `namespace` and `name` of a key of this kind; `None` (counted, logged once) for a
    /// key deeper than the layout allows.
    fn parse(&self, key: &str) -> Option<(String, String)> {
        let prefix = self.shared.watcher.registry().prefix();
        match api::parse_key::<I::Object>(prefix, key) {
            Some((namespace, name)) => Some((namespace.to_string(), name.to_string())),
            None => {
                self.shared.metrics.skip_key(key);
                None
            }
        }
    }

    /// Decodes one stored value into a change.
    fn decode(&self, raw: &RawEvent) -> Option<Listed<I>> {
        let registry = self.shared.watcher.registry();
        let (namespace, name) = self.parse(&raw.key)?;
        let change = match api::decode::<I::Object>(
            registry.prefix(),
            &raw.key,
            &raw.value,
            raw.mod_revision,
        ) {
            Ok(object) => Change::Upsert(I::from_object(object)),
            Err(e) => {
                self.shared.metrics.undecodable(&DecodeError {
                    kind: <I::Object as Object>::KIND,
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
                let decoded = items.items.iter().map(move |(name, item)| {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Container, ContainerPort, ObjectMeta, PodSpec, PodStatus};

    fn pod(name: &str, app: &str, rv: i64) -> CachedPod {
        let pod = Pod {
            metadata: ObjectMeta {
                labels: [("app", app)].into_iter().collect(),
                resource_version: Some(api::ResourceVersion(rv)),
                ..ObjectMeta::named("ns", name)
            },
            spec: PodSpec {
                containers: vec![Container {
                    ports: vec![ContainerPort {
                        name: "http".into(),
                        container_port: 8080,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            },
            status: Some(PodStatus::default()),
            ..Pod::default()
        };
        CachedPod::from(&pod)
    }

    fn names(mut pods: Vec<Arc<CachedPod>>) -> Vec<String> {
        pods.sort_by(|a, b| a.name.cmp(&b.name));
        pods.iter().map(|p| p.name.to_string()).collect()
    }

    #[track_caller]
    fn check_select(store: &Store<CachedPod>, selector: &str, expected: &[&str]) {
        let selector: Selector = selector.parse().unwrap();
        let got = store
            .namespaces
            .get("ns")
            .map(|ns| names(ns.select(&selector)))
            .unwrap_or_default();
        assert_eq!(got, expected, "selector {selector}");
    }

    #[test]
    fn selection_uses_the_label_index_and_follows_changes() {
        let mut store = Store {
            namespaces: HashMap::new(),
        };
        store.apply("ns", "a", Change::Upsert(pod("a", "web", 1)), false);
        store.apply("ns", "b", Change::Upsert(pod("b", "web", 2)), false);
        store.apply("ns", "c", Change::Upsert(pod("c", "db", 3)), false);
        check_select(&store, "app=web", &["a", "b"]);
        check_select(&store, "app!=web", &["c"]);
        check_select(&store, "", &["a", "b", "c"]);
        check_select(&store, "app=", &[]);
        // Relabelled: moves between groups.
        let delta = store
            .apply("ns", "b", Change::Upsert(pod("b", "db", 4)), false)
            .unwrap();
        assert_eq!(delta.old.unwrap().labels.get("app"), Some("web"));
        check_select(&store, "app=web", &["a"]);
        check_select(&store, "app=db", &["b", "c"]);
        // Pods with equal labels share one label set.
        let ns = &store.namespaces["ns"];
        assert!(Arc::ptr_eq(
            &ns.get("b").unwrap().labels,
            &ns.get("c").unwrap().labels
        ));
        // The same revision again is no change.
        assert!(store
            .apply("ns", "b", Change::Upsert(pod("b", "db", 4)), false)
            .is_none());
    }

    #[test]
    fn an_undecodable_value_removes_the_item_and_keeps_the_name_taken() {
        let mut store = Store {
            namespaces: HashMap::new(),
        };
        store.apply("ns", "a", Change::Upsert(pod("a", "web", 1)), false);
        let delta = store.apply("ns", "a", Change::Undecodable, false).unwrap();
        assert!(delta.old.is_some() && delta.new.is_none());
        let ns = &store.namespaces["ns"];
        assert!(ns.get("a").is_none() && ns.is_taken("a"));
        check_select(&store, "app=web", &[]);
        // Deleted for real: the name is free again (no item changed, so no delta), and
        // the namespace goes away.
        assert!(store.apply("ns", "a", Change::Remove, false).is_none());
        assert!(store.namespaces.is_empty());
    }

    #[test]
    fn find_port_on_cached_ports() {
        let ports = pod("a", "web", 1).ports;
        assert_eq!(ports.find(None), Some(8080));
        assert_eq!(
            ports.find(Some(&IntOrString::String("http".into()))),
            Some(8080)
        );
        assert_eq!(ports.find(Some(&IntOrString::String("grpc".into()))), None);
        assert_eq!(ports.find(Some(&IntOrString::Int(70000))), None);
    }
}
