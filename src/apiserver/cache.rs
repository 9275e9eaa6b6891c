//! The watch cache of one resource: kube-apiserver's `Cacher` (2015; in 2014 every HTTP
//! watch was its own etcd watch, `pkg/tools/etcd_tools_watch.go`).
//!
//! One list-and-watch of kcm's engine (`etcd_watcher`) feeds an in-memory store of the
//! served (core/v1, apps/v1) objects and a window of the most recent events. Every HTTP
//! watch and every `resourceVersion=0` list is served from here, so a thousand watchers
//! of pods cost one etcd watcher.
//!
//! Invariants:
//! - the store mirrors etcd's range at [`WatchCache::revision`]: every event up to that
//!   revision has been applied and none after it;
//! - the window holds every event with a revision above [`State::window_start`], in
//!   revision order, so a watch from any N ≥ `window_start` is replayed exactly;
//! - events are applied, appended to the window and broadcast under one lock, so a
//!   subscriber that took a snapshot (or a replay) and a receiver under that lock sees
//!   every later event exactly once;
//! - a subscriber that falls more than [`Config::broadcast_capacity`] events behind loses
//!   its receiver (`Lagged`): its stream ends, and memory never grows with a slow client;
//! - a consistent read is served from here only once the store has applied etcd's
//!   revision read after the request arrived ([`ConsistentReads`]), so it reflects every
//!   write acknowledged before it.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use futures::StreamExt as _;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::Value;
use tokio::sync::{broadcast, watch};

use crate::etcd_watcher::{
    BackoffConfig, EngineConfig, ListReason, Range, RawEvent, RawItem, RawKind, Start,
    WatchMetrics, Watcher,
};
use crate::labels::Labels;
use crate::registry::prefix_range_end;

use super::table::{self, Printer};

/// Sizes of the cache's buffers.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Events kept for watches that resume from a resourceVersion (kube-apiserver keeps
    /// 100 to 10,000 per resource, by its event rate).
    pub window: usize,
    /// Events a watcher may fall behind before its stream is ended.
    pub broadcast_capacity: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            window: 10_000,
            broadcast_capacity: 10_000,
        }
    }
}

/// Consistent reads from the watch cache (kube-apiserver 1.31's "consistent reads from
/// cache", KEP-2340). A read that must reflect every write acknowledged before it asks
/// etcd for its current revision (a linearizable read, so at least the revision of any
/// such write), then waits for the cache to have applied that revision: events of the
/// resource move the cache forward, and when there are none the cache's etcd watch asks
/// for a progress notification, which etcd sends once every event up to its revision was
/// delivered. A cache that gets there within [`ConsistentReads::wait`] serves the read at
/// its own revision (at least the one read); one that does not leaves the read to etcd,
/// and the fallback is counted.
pub struct ConsistentReads {
    /// How long a read waits for a cache (3 s, kube-apiserver's `blockTimeout`).
    wait: Duration,
    /// Reads that fell back to etcd, by resource.
    fallbacks: Family<Vec<(&'static str, &'static str)>, Counter>,
}

impl Default for ConsistentReads {
    fn default() -> ConsistentReads {
        ConsistentReads::new(Duration::from_secs(3))
    }
}

impl ConsistentReads {
    /// Reads wait up to `wait` for a cache.
    pub fn new(wait: Duration) -> ConsistentReads {
        ConsistentReads {
            wait,
            fallbacks: Family::default(),
        }
    }

    /// The fallback counter, to register (`apiserver_consistent_list_fallbacks`).
    pub fn fallbacks(&self) -> Family<Vec<(&'static str, &'static str)>, Counter> {
        self.fallbacks.clone()
    }

    /// How many reads of `resource` fell back to etcd.
    #[cfg(test)]
    pub fn fallback_count(&self, resource: &'static str) -> u64 {
        self.fallbacks
            .get_or_create(&vec![("resource", resource)])
            .get()
    }

    /// Whether `cache` may serve a read that must be consistent at etcd revision
    /// `current`: true once it has applied `current` (waiting, and asking etcd for
    /// progress, up to the wait); false, counted as a fallback, when it has not.
    pub async fn fresh(&self, cache: &WatchCache, current: i64) -> bool {
        if cache.wait_fresh(current, self.wait).await {
            return true;
        }
        self.fallbacks
            .get_or_create(&vec![("resource", cache.codec.resource)])
            .inc();
        tracing::debug!(
            resource = cache.codec.resource,
            wanted = current,
            reached = cache.revision(),
            "consistent read from etcd: the watch cache did not catch up"
        );
        false
    }
}

/// How a stored value becomes a served object: the key layout of its directory and the
/// conversion of its value.
pub(crate) struct Codec {
    /// The resource served (`pods`).
    pub resource: &'static str,
    /// Its directory under the prefix (`pods`, `services/specs`, `nodes`).
    pub dir: &'static str,
    /// Whether its keys are `{dir}/{namespace}/{name}` (else `{dir}/{name}`).
    pub namespaced: bool,
    /// Decodes one stored key-value, given its key's `(namespace, name)`, into the served
    /// object (kind, apiVersion, `metadata.name`, `namespace` and `resourceVersion` set).
    pub decode: &'static (dyn Fn(&str, &str, &RawEvent) -> anyhow::Result<Value> + Sync),
    /// How its objects print as a Table: each item keeps its row.
    pub printer: &'static Printer,
}

impl Codec {
    /// The directory prefix of this codec's keys, ending in `/`.
    pub fn dir_key(&self, prefix: &str) -> String {
        format!("{prefix}/{}/", self.dir)
    }

    /// `(namespace, name)` of a key under `dir_key` (the part after it); namespace is ""
    /// for a cluster-scoped resource. `None` for a key of another layout.
    pub fn parse(&self, rest: &str) -> Option<(String, String)> {
        if self.namespaced {
            let (namespace, name) = rest.split_once('/')?;
            (!namespace.is_empty() && !name.is_empty() && !name.contains('/'))
                .then(|| (namespace.to_string(), name.to_string()))
        } else {
            (!rest.is_empty() && !rest.contains('/')).then(|| (String::new(), rest.to_string()))
        }
    }

    /// Decodes a key-value read at `key` (already parsed) into an [`Item`].
    pub fn item(&self, namespace: &str, name: &str, kv: &RawEvent) -> anyhow::Result<Item> {
        let object = (self.decode)(namespace, name, kv)?;
        Ok(Item::new(
            namespace,
            name,
            kv.mod_revision,
            object,
            self.printer,
        ))
    }
}

/// One object as served: its served JSON (encoded once, shared by every watcher), its
/// labels for selectors, its Table row, and the revision it was written at.
///
/// Kept compact, for the cache holds one per object. The decoded object is not kept (as
/// a `serde_json::Value` a pod took about 9 KB against its 700 bytes of JSON): what needs
/// it decodes it again ([`Item::object`]). Its Table row is made once, with the item,
/// the cells that depend on the time left open ([`table::encode_row`]): a Table is then
/// built by copying bytes, where decoding each object for its cells made a Table list
/// five times the JSON list. The key, the labels, the JSON and the row share one buffer,
/// `key ++ labels ++ json ++ row`, so an item is two allocations (this, in its `Arc`,
/// and the buffer).
#[derive(Debug)]
pub struct Item {
    /// The revision of the write (of the delete, for a deleted object's last state).
    pub revision: i64,
    /// `namespace/name` (or `name` for a cluster-scoped object), then the labels
    /// ([`PackedLabels`]), then the object encoded as JSON.
    data: Box<[u8]>,
    /// Where the key ends and the labels start.
    key_end: u32,
    /// Where the labels end and the JSON starts.
    json_start: u32,
    /// Where the JSON ends and the row starts.
    row_start: u32,
    /// Where the object's `metadata` (an object) sits in the JSON, for the Tables'
    /// `PartialObjectMetadata` rows; empty when it has none.
    metadata: (u32, u32),
}

impl Item {
    /// An item of `object` (whose `metadata.resourceVersion` is set to `revision`), with
    /// its row as `printer` prints it. Neither `namespace` nor `name` holds a `/`
    /// (`Codec::parse` makes sure), so the key splits back into the two.
    pub fn new(
        namespace: &str,
        name: &str,
        revision: i64,
        mut object: Value,
        printer: &Printer,
    ) -> Item {
        set_resource_version(&mut object, revision);
        Item::build(namespace, name, revision, &object, |data| {
            table::encode_row(printer, &object, data)
        })
    }

    /// An item of `object` (its resourceVersion set), the row appended by `row`.
    fn build(
        namespace: &str,
        name: &str,
        revision: i64,
        object: &Value,
        row: impl FnOnce(&mut Vec<u8>),
    ) -> Item {
        debug_assert!(!namespace.contains('/') && !name.contains('/'));
        let key = store_key(namespace, name);
        let mut data = Vec::with_capacity(key.len() + 1024);
        data.extend_from_slice(key.as_bytes());
        let key_end = data.len();
        PackedLabels::pack(object, &mut data);
        let json_start = data.len();
        let metadata = encode(object, &mut data);
        let row_start = data.len();
        row(&mut data);
        let at = |i: usize| u32::try_from(i).expect("an object smaller than 4 GiB");
        Item {
            revision,
            data: data.into_boxed_slice(),
            key_end: at(key_end),
            json_start: at(json_start),
            row_start: at(row_start),
            metadata: metadata.map_or((0, 0), |span| (at(span.start), at(span.end))),
        }
    }

    /// `namespace/name`, or `name` for a cluster-scoped object: the store's key, ordered
    /// as etcd orders the keys.
    pub fn key(&self) -> &str {
        std::str::from_utf8(self.key_bytes()).expect("the key was a string")
    }

    fn key_bytes(&self) -> &[u8] {
        &self.data[..self.key_end as usize]
    }

    /// The namespace; "" for a cluster-scoped object.
    pub fn namespace(&self) -> &str {
        self.key()
            .split_once('/')
            .map_or("", |(namespace, _)| namespace)
    }

    pub fn name(&self) -> &str {
        let key = self.key();
        key.split_once('/').map_or(key, |(_, name)| name)
    }

    /// `metadata.labels`, for selectors (values that are not strings are left out).
    pub fn labels(&self) -> PackedLabels<'_> {
        PackedLabels(&self.data[self.key_end as usize..self.json_start as usize])
    }

    /// The object encoded as JSON (as `serde_json::to_vec` encodes it).
    pub fn json(&self) -> &[u8] {
        &self.data[self.json_start as usize..self.row_start as usize]
    }

    /// What [`table::table_json`] makes its row of: the encoded row, the JSON and the
    /// metadata's.
    pub fn table_source(&self) -> table::Source<'_> {
        table::Source {
            row: &self.data[self.row_start as usize..],
            object: self.json(),
            metadata: self.metadata_json(),
        }
    }

    /// The object, decoded from its JSON.
    pub fn object(&self) -> Value {
        serde_json::from_slice(self.json()).expect("the cache's own encoding decodes")
    }

    /// `object`'s `metadata` as JSON (a slice of the item's JSON); `None` when it has
    /// none that is an object.
    pub fn metadata_json(&self) -> Option<&[u8]> {
        let (start, end) = self.metadata;
        (end > start).then(|| &self.json()[start as usize..end as usize])
    }

    /// The same object stamped with another revision (a deleted object's last state
    /// carries the revision of its delete).
    pub fn stamped(&self, revision: i64) -> Item {
        let mut object = self.object();
        set_resource_version(&mut object, revision);
        // The row does not read the resourceVersion.
        let row = &self.data[self.row_start as usize..];
        Item::build(self.namespace(), self.name(), revision, &object, |data| {
            data.extend_from_slice(row)
        })
    }
}

/// The store's items, ordered (and found) by their key's bytes (the order of the keys
/// as strings, and etcd's).
#[derive(Clone, Debug)]
struct ByKey(Arc<Item>);

impl std::borrow::Borrow<[u8]> for ByKey {
    fn borrow(&self) -> &[u8] {
        self.0.key_bytes()
    }
}

impl PartialEq for ByKey {
    fn eq(&self, other: &ByKey) -> bool {
        self.0.key_bytes() == other.0.key_bytes()
    }
}

impl Eq for ByKey {}

impl PartialOrd for ByKey {
    fn partial_cmp(&self, other: &ByKey) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByKey {
    fn cmp(&self, other: &ByKey) -> std::cmp::Ordering {
        self.0.key_bytes().cmp(other.0.key_bytes())
    }
}

/// An object's labels, packed: for each label, its key's length and its value's (each a
/// little-endian `u32`), then the key and the value. A `BTreeMap` of `String`s took
/// about 600 bytes for a pod's two labels (a B-tree node has room for eleven); packed,
/// they take their bytes and 8 more each. Selectors read them through [`Labels`], by a
/// scan (objects carry a few labels).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedLabels<'a>(&'a [u8]);

impl<'a> PackedLabels<'a> {
    /// Appends `metadata.labels` of `object` to `out`, packed (values that are not
    /// strings are left out).
    fn pack(object: &Value, out: &mut Vec<u8>) {
        let Some(map) = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
        else {
            return;
        };
        for (key, value) in map {
            if let Some(value) = value.as_str() {
                for part in [key.as_str(), value] {
                    let len = u32::try_from(part.len()).expect("a label shorter than 4 GiB");
                    out.extend_from_slice(&len.to_le_bytes());
                }
                out.extend_from_slice(key.as_bytes());
                out.extend_from_slice(value.as_bytes());
            }
        }
    }

    /// The `(key, value)` pairs, in the object's order.
    pub fn iter(self) -> impl Iterator<Item = (&'a str, &'a str)> {
        let mut rest = self.0;
        std::iter::from_fn(move || {
            let (lens, after) = rest.split_first_chunk::<8>()?;
            let len = |at: usize| {
                u32::from_le_bytes(lens[at..at + 4].try_into().expect("4 bytes")) as usize
            };
            let (key, after) = after.split_at(len(0));
            let (value, after) = after.split_at(len(4));
            rest = after;
            // Packed from `&str`s by `pack`.
            let text = |bytes| std::str::from_utf8(bytes).expect("packed from strings");
            Some((text(key), text(value)))
        })
    }
}

impl Labels for PackedLabels<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.iter().find_map(|(k, v)| (k == key).then_some(v))
    }
}

/// Appends `object` encoded as JSON (exactly as `serde_json::to_vec`) to `out`, and says
/// where its `metadata` member sits in the encoding (from its start) when that is an
/// object.
fn encode(object: &Value, out: &mut Vec<u8>) -> Option<std::ops::Range<usize>> {
    const ENCODES: &str = "a JSON value always encodes";
    let start = out.len();
    let Value::Object(map) = object else {
        serde_json::to_writer(&mut *out, object).expect(ENCODES);
        return None;
    };
    let mut metadata = None;
    out.push(b'{');
    for (index, (key, value)) in map.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, key).expect(ENCODES);
        out.push(b':');
        let at = out.len() - start;
        serde_json::to_writer(&mut *out, value).expect(ENCODES);
        if key == "metadata" && value.is_object() {
            metadata = Some(at..out.len() - start);
        }
    }
    out.push(b'}');
    metadata
}

/// `namespace/name`, or `name` when `namespace` is "".
pub fn store_key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

/// Sets `metadata.resourceVersion` to `revision` (as a string, as on the wire).
pub fn set_resource_version(object: &mut Value, revision: i64) {
    if let Some(object) = object.as_object_mut() {
        let metadata = object
            .entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(metadata) = metadata.as_object_mut() {
            metadata.insert(
                "resourceVersion".to_string(),
                Value::String(revision.to_string()),
            );
        }
    }
}

/// A change to one object.
#[derive(Debug)]
pub struct Event {
    /// The new state; for a delete, the last state stamped with the delete's revision.
    pub object: Arc<Item>,
    /// The state before (None for a create).
    pub prev: Option<Arc<Item>>,
    pub deleted: bool,
}

impl Event {
    pub fn revision(&self) -> i64 {
        self.object.revision
    }
}

/// What a watch from a resourceVersion cannot be served from the window.
#[derive(Debug)]
pub struct TooOld {
    /// The oldest resourceVersion the window can serve a watch from.
    pub oldest: i64,
}

/// Why a watch that needs the events of one revision onwards is not served from the cache
/// as it stands ([`WatchCache::subscribe_at`]).
#[derive(Debug)]
pub enum NotInWindow {
    /// The revision is where the window starts (the cache's list, or its last eviction):
    /// everything after it is in the window but not its own events. They are read back
    /// from etcd once ([`WatchCache::read_start`]) and the subscription is asked again.
    StartUnread(i64),
    /// Before the window.
    TooOld(TooOld),
}

struct State {
    items: BTreeSet<ByKey>,
    revision: i64,
    window: VecDeque<Arc<Event>>,
    /// A watch from N ≥ this is served from the window.
    window_start: i64,
    /// The events of the revision `window_start` once read back from etcd, with that
    /// revision (ignored once the window has moved on from it).
    start_events: Option<(i64, Vec<Arc<Event>>)>,
    synced: bool,
    /// The channel to the subscribers, made by the first of them and dropped with the
    /// last: its ring of [`Config::broadcast_capacity`] slots (400 KB at 10,000) is held
    /// only while someone watches.
    tx: OnceLock<broadcast::Sender<Arc<Event>>>,
}

impl State {
    /// A receiver of every event published from now on (under the lock, so after what
    /// the subscriber read of the state).
    fn subscribe(&self, capacity: usize) -> broadcast::Receiver<Arc<Event>> {
        self.tx
            .get_or_init(|| broadcast::channel(capacity.max(1)).0)
            .subscribe()
    }
}

/// The watch cache of one resource. Cheap to share behind an `Arc`.
pub struct WatchCache {
    codec: &'static Codec,
    config: Config,
    state: RwLock<State>,
    /// The applied revision, for waits.
    progress: watch::Sender<i64>,
    metrics: Arc<WatchMetrics>,
    /// Held while the window's first revision is read back from etcd, so a thousand
    /// watches from it read it once.
    reading_start: tokio::sync::Mutex<()>,
    /// Rung to make the cache's etcd watch ask for a progress notification.
    progress_requests: Arc<tokio::sync::Notify>,
}

/// A live subscription: what to send first, then the receiver of later events.
#[derive(Debug)]
pub struct Subscription {
    /// The events (or, from a snapshot, the current objects as creates) to send first.
    pub initial: Vec<Arc<Event>>,
    /// The revision the initial part ends at: later events are above it.
    pub revision: i64,
    pub rx: broadcast::Receiver<Arc<Event>>,
}

impl WatchCache {
    pub fn new(codec: &'static Codec, config: Config, metrics: Arc<WatchMetrics>) -> WatchCache {
        WatchCache {
            codec,
            config,
            state: RwLock::new(State {
                items: BTreeSet::new(),
                revision: 0,
                window: VecDeque::new(),
                window_start: 0,
                start_events: None,
                synced: false,
                tx: OnceLock::new(),
            }),
            progress: watch::Sender::new(0),
            metrics,
            reading_start: tokio::sync::Mutex::new(()),
            progress_requests: Arc::new(tokio::sync::Notify::new()),
        }
    }

    pub fn codec(&self) -> &'static Codec {
        self.codec
    }

    pub fn metrics(&self) -> &Arc<WatchMetrics> {
        &self.metrics
    }

    /// Whether the first list has been applied.
    pub fn is_synced(&self) -> bool {
        self.state.read().expect("cache lock").synced
    }

    /// The revision the store mirrors etcd at.
    pub fn revision(&self) -> i64 {
        self.state.read().expect("cache lock").revision
    }

    /// Waits until the store has applied `revision`, asking etcd for a progress
    /// notification first when it has not (kube-apiserver's `waitUntilFreshAndBlock`): a
    /// revision etcd has reached is reached by the cache as soon as etcd confirms that
    /// every event up to it was sent, even when none of them was under this resource.
    /// False after `timeout` (a revision etcd has not reached).
    pub async fn wait_fresh(&self, revision: i64, timeout: Duration) -> bool {
        if self.is_synced() && self.revision() >= revision {
            return true;
        }
        self.progress_requests.notify_one();
        self.wait_for(revision, timeout).await
    }

    /// Waits until the store has applied `revision` (and is synced); false after `timeout`.
    pub async fn wait_for(&self, revision: i64, timeout: Duration) -> bool {
        let mut rx = self.progress.subscribe();
        let reached = async {
            rx.wait_for(|applied| *applied >= revision && *applied > 0)
                .await
                .is_ok()
        };
        tokio::time::timeout(timeout, reached)
            .await
            .unwrap_or(false)
    }

    /// The objects in `namespace` (all with `None`), in key order, and the revision they
    /// are the state at.
    pub fn list(&self, namespace: Option<&str>) -> (Vec<Arc<Item>>, i64) {
        let state = self.state.read().expect("cache lock");
        (Self::range(&state, namespace), state.revision)
    }

    /// One object.
    pub fn get(&self, namespace: &str, name: &str) -> (Option<Arc<Item>>, i64) {
        let state = self.state.read().expect("cache lock");
        (
            state
                .items
                .get(store_key(namespace, name).as_bytes())
                .map(|item| item.0.clone()),
            state.revision,
        )
    }

    /// Every namespace holding an object of this resource (the store is in key order,
    /// so one namespace's items are adjacent).
    pub fn namespaces(&self) -> Vec<String> {
        let state = self.state.read().expect("cache lock");
        let mut namespaces: Vec<String> = Vec::new();
        for ByKey(item) in &state.items {
            if namespaces.last().map(String::as_str) != Some(item.namespace()) {
                namespaces.push(item.namespace().to_string());
            }
        }
        namespaces
    }

    fn range(state: &State, namespace: Option<&str>) -> Vec<Arc<Item>> {
        match namespace {
            None => state.items.iter().map(|item| item.0.clone()).collect(),
            Some(namespace) => {
                let start = format!("{namespace}/");
                state
                    .items
                    .range::<[u8], _>((
                        std::ops::Bound::Included(start.as_bytes()),
                        std::ops::Bound::Unbounded,
                    ))
                    .take_while(|item| item.0.key_bytes().starts_with(start.as_bytes()))
                    .map(|item| item.0.clone())
                    .collect()
            }
        }
    }

    /// The current objects in `namespace` as creates, then every later event.
    pub fn subscribe_snapshot(&self, namespace: Option<&str>) -> Subscription {
        let state = self.state.read().expect("cache lock");
        let initial = Self::range(&state, namespace)
            .into_iter()
            .map(|object| {
                Arc::new(Event {
                    object,
                    prev: None,
                    deleted: false,
                })
            })
            .collect();
        Subscription {
            initial,
            revision: state.revision,
            rx: state.subscribe(self.config.broadcast_capacity),
        }
    }

    /// The events after `revision` (from the window), then every later event.
    ///
    /// # Errors
    /// [`TooOld`] when the window no longer holds every event after `revision`.
    pub fn subscribe_from(&self, revision: i64) -> Result<Subscription, TooOld> {
        let state = self.state.read().expect("cache lock");
        if revision < state.window_start {
            return Err(TooOld {
                oldest: state.window_start,
            });
        }
        let first = state.window.partition_point(|e| e.revision() <= revision);
        Ok(Subscription {
            initial: state.window.range(first..).cloned().collect(),
            revision: state.revision.max(revision),
            rx: state.subscribe(self.config.broadcast_capacity),
        })
    }

    /// The events of `revision` and every later one, then every later event: what a watch
    /// from resourceVersion `revision` needs (its own revision's events decide whether
    /// they are sent again, see the watch handler's `Watch::resume_at`).
    ///
    /// # Errors
    /// [`NotInWindow::StartUnread`] when `revision` is where the window starts and its
    /// events have not been read back yet; [`NotInWindow::TooOld`] before that.
    pub fn subscribe_at(&self, revision: i64) -> Result<Subscription, NotInWindow> {
        let state = self.state.read().expect("cache lock");
        if revision > state.window_start {
            drop(state);
            return self
                .subscribe_from(revision - 1)
                .map_err(NotInWindow::TooOld);
        }
        if revision < state.window_start || revision < 1 {
            return Err(NotInWindow::TooOld(TooOld {
                oldest: state.window_start,
            }));
        }
        let Some((_, own)) = state
            .start_events
            .as_ref()
            .filter(|(read, _)| *read == revision)
        else {
            return Err(NotInWindow::StartUnread(revision));
        };
        // The window may still hold some of the revision's events (an eviction stopped
        // inside it): the read-back ones replace them.
        let first = state.window.partition_point(|e| e.revision() <= revision);
        Ok(Subscription {
            initial: own
                .iter()
                .cloned()
                .chain(state.window.range(first..).cloned())
                .collect(),
            revision: state.revision.max(revision),
            rx: state.subscribe(self.config.broadcast_capacity),
        })
    }

    /// Lists, then follows the watch until `shutdown` resolves (the engine resumes,
    /// relists after compaction and rewinds on its own; this never returns early).
    pub async fn run(
        self: Arc<Self>,
        watcher: Watcher,
        backoff: BackoffConfig,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) {
        tokio::select! {
            _ = shutdown => {}
            _ = self.reflect(watcher, backoff) => {}
        }
        self.metrics.set_stopped();
    }

    async fn reflect(&self, watcher: Watcher, backoff: BackoffConfig) {
        let start = self.codec.dir_key(watcher.registry().prefix());
        let config = EngineConfig {
            range: Range {
                end: prefix_range_end(start.as_bytes()),
                watched_key: Some(start.clone()),
                start: start.clone(),
            },
            start: Start::List,
            resume: true,
            // The store holds every previous state.
            prev_kv: false,
            backoff,
            metrics: self.metrics.clone(),
        };
        let mut raw = watcher
            .engine(config)
            .with_progress_requests(self.progress_requests.clone())
            .into_stream();
        let mut listed: BTreeSet<ByKey> = BTreeSet::new();
        while let Some(item) = raw.next().await {
            match item {
                RawItem::Page { kvs } => {
                    for kv in &kvs {
                        if let Some(item) = self.decode(&start, kv) {
                            listed.replace(ByKey(Arc::new(item)));
                        }
                    }
                }
                RawItem::ListFailed => listed.clear(),
                RawItem::Listed { reason, revision } => {
                    let listed = std::mem::take(&mut listed);
                    let changes = self.replace(listed, reason, revision);
                    tracing::info!(
                        resource = self.codec.resource,
                        revision,
                        changes,
                        ?reason,
                        "watch cache listed"
                    );
                }
                RawItem::Events(events) => self.apply(&start, &events),
                RawItem::Progress(revision) => self.advance(revision),
                RawItem::Resumed { from, reason } => {
                    tracing::info!(resource = self.codec.resource, from, %reason, "watch cache resumed from its last resourceVersion");
                }
                RawItem::Ended(status) => {
                    tracing::error!(resource = self.codec.resource, %status, "watch cache's etcd watch ended");
                    return;
                }
            }
        }
    }

    /// Decodes one key-value; `None` (counted, warned once per key) for a key of another
    /// layout or a value that does not decode.
    fn decode(&self, start: &str, kv: &RawEvent) -> Option<Item> {
        let rest = kv.key.strip_prefix(start)?;
        let Some((namespace, name)) = self.codec.parse(rest) else {
            self.metrics.skip_key(&kv.key);
            return None;
        };
        match self.codec.item(&namespace, &name, kv) {
            Ok(item) => Some(item),
            Err(e) => {
                self.metrics
                    .decode_errors
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::warn!(
                    key = %kv.key,
                    revision = kv.mod_revision,
                    "{} {}: not served: the stored value does not decode: {e:#}",
                    self.codec.resource,
                    store_key(&namespace, &name)
                );
                None
            }
        }
    }

    /// Applies a complete list at `revision`: the first one fills the store; a later one
    /// (after compaction) becomes the events that turn the old store into it; one after
    /// a rewind of etcd starts a new history, ending every watcher. Returns how many
    /// objects changed.
    fn replace(&self, listed: BTreeSet<ByKey>, reason: ListReason, revision: i64) -> usize {
        let mut state = self.state.write().expect("cache lock");
        if !state.synced || reason == ListReason::Rewound {
            let changes = listed.len();
            state.items = listed;
            state.window.clear();
            state.window_start = revision;
            state.start_events = None;
            state.revision = revision;
            if state.synced {
                // A new history: every watcher's resourceVersion means nothing now; a new
                // channel ends their streams (they relist).
                state.tx = OnceLock::new();
            }
            state.synced = true;
            drop(state);
            self.advance(revision);
            return changes;
        }
        let mut puts: Vec<Event> = Vec::new();
        for ByKey(item) in &listed {
            match state.items.get(item.key_bytes()) {
                Some(ByKey(old)) if old.revision == item.revision => {}
                old => puts.push(Event {
                    object: item.clone(),
                    prev: old.map(|old| old.0.clone()),
                    deleted: false,
                }),
            }
        }
        puts.sort_by_key(Event::revision);
        let deletes: Vec<Event> = state
            .items
            .iter()
            .filter(|old| !listed.contains(old.0.key_bytes()))
            .map(|ByKey(old)| Event {
                object: Arc::new(old.stamped(revision)),
                prev: Some(old.clone()),
                deleted: true,
            })
            .collect();
        let changes = puts.len() + deletes.len();
        state.items = listed;
        for event in puts.into_iter().chain(deletes) {
            self.publish(&mut state, event);
        }
        state.revision = state.revision.max(revision);
        drop(state);
        self.advance(revision);
        changes
    }

    /// Applies one watch response's events.
    fn apply(&self, start: &str, events: &[RawEvent]) {
        let mut state = self.state.write().expect("cache lock");
        let mut highest = state.revision;
        for raw in events {
            highest = highest.max(raw.mod_revision);
            let Some(rest) = raw.key.strip_prefix(start) else {
                continue;
            };
            let Some((namespace, name)) = self.codec.parse(rest) else {
                self.metrics.skip_key(&raw.key);
                continue;
            };
            let key = store_key(&namespace, &name);
            let decoded = match raw.kind {
                RawKind::Put => self.decode(start, raw),
                RawKind::Delete => None,
            };
            let event = match decoded {
                Some(item) => {
                    let item = Arc::new(item);
                    let prev = state.items.replace(ByKey(item.clone())).map(|old| old.0);
                    Event {
                        object: item,
                        prev,
                        deleted: false,
                    }
                }
                // A delete, or a value that no longer decodes: either way the object is
                // no longer served.
                None => match state.items.take(key.as_bytes()).map(|old| old.0) {
                    Some(old) => Event {
                        object: Arc::new(old.stamped(raw.mod_revision)),
                        prev: Some(old),
                        deleted: true,
                    },
                    None => continue,
                },
            };
            self.metrics
                .events
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.publish(&mut state, event);
        }
        state.revision = highest;
        drop(state);
        self.advance(highest);
    }

    /// Appends one event to the window (evicting the oldest beyond its size) and sends it
    /// to every subscriber. Called under the write lock.
    fn publish(&self, state: &mut State, event: Event) {
        let event = Arc::new(event);
        state.window.push_back(event.clone());
        while state.window.len() > self.config.window {
            if let Some(evicted) = state.window.pop_front() {
                state.window_start = state.window_start.max(evicted.revision());
            }
        }
        if let Some(tx) = state.tx.get() {
            if tx.receiver_count() == 0 {
                // The last subscriber is gone: so is the ring, until the next one.
                state.tx = OnceLock::new();
            } else {
                // A receiver dropped since is not an error.
                let _ = tx.send(event);
            }
        }
    }

    fn advance(&self, revision: i64) {
        {
            let mut state = self.state.write().expect("cache lock");
            state.revision = state.revision.max(revision);
        }
        self.metrics
            .last_revision
            .fetch_max(revision, std::sync::atomic::Ordering::Relaxed);
        self.progress.send_if_modified(|applied| {
            let advanced = revision > *applied;
            *applied = (*applied).max(revision);
            advanced
        });
    }
}

mod read_back;
#[cfg(test)]
mod tests;
