//! Typed, filtered watches on etcd v3: the 2014 one-shot watch and the resumable layer
//! every controller in kcm uses.
//!
//! Mirrors 2014's `pkg/tools/etcd_tools_watch.go` (`etcdWatcher`: `WatchList`, `Watch`,
//! `sendAdd`/`sendModify`/`sendDelete`, `ParseWatchResourceVersion`'s +1 rule). etcd v2
//! actions become v3 events: a PUT whose `create_revision == mod_revision` is 2014's
//! `create`, any other PUT is `set`/`compareAndSwap` (translated with the same filter
//! transition table on the previous value), a DELETE is `delete`.
//!
//! Three layers:
//! - [`translate`]: a pure function from one [`RawEvent`] to at most one [`WatchEvent`];
//!   all the 2014 rules live here and are table-tested without etcd.
//! - [`WatchStream`]: the one-shot watch. One reader task per stream feeds a bounded
//!   buffer of [`WATCH_BUFFER`] events; an error is delivered as `WatchEvent::Error` and
//!   ends the stream, as in 2014. `stop()` and drop end the task.
//! - [`ResumableWatch`]: what 2014 lacked. It re-opens the one-shot watch from the last
//!   delivered revision after a disconnect, and after compaction (410) lists again and
//!   emits the difference, so a consumer sees a gap-free stream.
//!
//! Invariants: every object delivered carries `metadata.resourceVersion` (a Deleted
//! object carries the revision of the delete); revisions delivered by one stream never
//! go backwards; no event at or below the starting revision is delivered twice.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use etcd_client::{Client, EventType, WatchClient, WatchOptions};
use futures::Stream;
use rand::Rng;
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::api::{self, Object, ObjectMeta, ResourceVersion};
use crate::labels::Selector;
use crate::registry::{self, DecodeError, Registry, StorageError};

/// Events buffered between the etcd reader and the consumer (the apiserver's 100). A
/// slower consumer slows the reader instead of growing memory.
pub const WATCH_BUFFER: usize = 100;

// ---------------------------------------------------------------------------------------
// Events

/// `api.Status` as carried by an ERROR event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// HTTP-style code: 410 when the requested revision was compacted, 500 otherwise.
    pub code: u16,
    /// `Expired` (410) or `InternalError`.
    pub reason: &'static str,
    pub message: String,
}

impl Status {
    /// 410: the requested resourceVersion has been compacted away; list again.
    pub fn gone(message: impl Into<String>) -> Status {
        Status {
            code: 410,
            reason: "Expired",
            message: message.into(),
        }
    }

    /// 500: any other etcd failure.
    pub fn internal(message: impl Into<String>) -> Status {
        Status {
            code: 500,
            reason: "InternalError",
            message: message.into(),
        }
    }

    /// True for the 410 "resourceVersion too old" status.
    pub fn is_gone(&self) -> bool {
        self.code == 410
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl Serialize for Status {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Status", 6)?;
        s.serialize_field("kind", "Status")?;
        s.serialize_field("apiVersion", api::API_VERSION)?;
        s.serialize_field("status", "Failure")?;
        s.serialize_field("message", &self.message)?;
        s.serialize_field("reason", self.reason)?;
        s.serialize_field("code", &self.code)?;
        s.end()
    }
}

/// `watch.Event`. Serialized as the Kubernetes wire form `{"type":"ADDED","object":{..}}`.
#[derive(Clone, Debug, PartialEq)]
pub enum WatchEvent<T> {
    Added(T),
    Modified(T),
    /// The last state of the object, stamped with the revision of the delete.
    Deleted(T),
    /// The watch failed; the stream ends after this event.
    Error(Status),
}

impl<T: Object> WatchEvent<T> {
    /// `ADDED`, `MODIFIED`, `DELETED` or `ERROR`.
    pub fn type_name(&self) -> &'static str {
        match self {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Error(_) => "ERROR",
        }
    }

    /// The object, for every type but Error.
    pub fn object(&self) -> Option<&T> {
        match self {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => Some(o),
            WatchEvent::Error(_) => None,
        }
    }

    /// The revision the event happened at (the object's resourceVersion).
    pub fn revision(&self) -> Option<i64> {
        self.object()
            .and_then(|o| o.metadata().resource_version)
            .map(|rv| rv.0)
    }
}

impl<T: Object> Serialize for WatchEvent<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("WatchEvent", 2)?;
        s.serialize_field("type", self.type_name())?;
        match self {
            WatchEvent::Error(status) => s.serialize_field("object", status)?,
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                // Objects are emitted with their kind and apiVersion, as on the wire.
                let mut o = o.clone();
                o.set_type_meta();
                s.serialize_field("object", &o)?
            }
        }
        s.end()
    }
}

/// A filter: `true` keeps the object (2014's `FilterFunc`).
pub type Filter<T> = Arc<dyn Fn(&T) -> bool + Send + Sync>;

/// The filter that keeps everything (2014's `Everything`).
pub fn everything<T>() -> Filter<T> {
    Arc::new(|_| true)
}

/// A label selector as a filter.
pub fn selector_filter<T: Object>(selector: Selector) -> Filter<T> {
    if selector.is_empty() {
        return everything();
    }
    Arc::new(move |object: &T| selector.matches(&object.metadata().labels))
}

// ---------------------------------------------------------------------------------------
// Translation: the pure core

/// PUT or DELETE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawKind {
    Put,
    Delete,
}

/// One etcd watch event, reduced to what translation needs. Built once, at the
/// boundary, so that [`translate`] can be tested without etcd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawEvent {
    pub kind: RawKind,
    pub key: String,
    /// Empty for a DELETE.
    pub value: Vec<u8>,
    pub create_revision: i64,
    /// The revision of this event (of the delete, for a DELETE).
    pub mod_revision: i64,
    pub version: i64,
    /// The previous value and its `mod_revision`, when etcd sent one (`prev_kv`).
    pub prev: Option<(Vec<u8>, i64)>,
}

impl RawEvent {
    /// Converts an etcd-client event; `None` for an event without a key-value.
    pub fn from_etcd(event: &etcd_client::Event) -> Option<RawEvent> {
        let kv = event.kv()?;
        Some(RawEvent {
            kind: match event.event_type() {
                EventType::Put => RawKind::Put,
                EventType::Delete => RawKind::Delete,
            },
            key: String::from_utf8_lossy(kv.key()).into_owned(),
            value: kv.value().to_vec(),
            create_revision: kv.create_revision(),
            mod_revision: kv.mod_revision(),
            version: kv.version(),
            // etcd sends an empty prev_kv when the previous revision is compacted.
            prev: event
                .prev_kv()
                .filter(|p| p.mod_revision() > 0)
                .map(|p| (p.value().to_vec(), p.mod_revision())),
        })
    }

    /// What `kcm watch --raw` prints: the etcd event an event came from.
    pub fn info(&self) -> RawInfo {
        RawInfo {
            kind: self.kind,
            key: self.key.clone(),
            create_revision: self.create_revision,
            mod_revision: self.mod_revision,
            version: self.version,
            has_prev: self.prev.is_some(),
        }
    }
}

/// The etcd-level facts about a delivered event (no values).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RawInfo {
    #[serde(serialize_with = "serialize_raw_kind")]
    pub kind: RawKind,
    pub key: String,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub version: i64,
    /// Whether etcd sent the previous value with the event.
    pub has_prev: bool,
}

fn serialize_raw_kind<S: Serializer>(kind: &RawKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match kind {
        RawKind::Put => "PUT",
        RawKind::Delete => "DELETE",
    })
}

impl fmt::Display for RawInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} create_revision={} mod_revision={} version={} prev_kv={}",
            match self.kind {
                RawKind::Put => "PUT",
                RawKind::Delete => "DELETE",
            },
            self.key,
            self.create_revision,
            self.mod_revision,
            self.version,
            if self.has_prev { "yes" } else { "no" }
        )
    }
}

/// What one raw event becomes.
#[derive(Debug, PartialEq)]
pub enum Translation<T> {
    Emit(WatchEvent<T>),
    /// Filtered out, or an event for the watched directory key itself.
    Nothing,
    /// The value did not decode; the event is skipped and the watch goes on.
    Undecodable(DecodeError),
}

/// Translates one etcd event with the 2014 rules (`sendAdd`, `sendModify`, `sendDelete`).
///
/// - PUT with `create_revision == mod_revision` → Added, if the object passes.
/// - other PUT → with the previous value: old and new pass → Modified(new); only new →
///   Added(new); only old → Deleted(old) stamped with the new revision; neither →
///   nothing. Without a previous value (compacted) → Modified(new) if new passes. A
///   previous value that does not decode counts as "did not pass", as in 2014.
/// - DELETE → Deleted(previous object, stamped with the delete's revision) if it
///   passes; without a previous value, Deleted of an object carrying only the name and
///   namespace from the key.
/// - Events for `watched_key` itself (the directory of a list watch) → nothing.
pub fn translate<T: Object>(
    prefix: &str,
    watched_key: Option<&str>,
    filter: &(dyn Fn(&T) -> bool + Send + Sync),
    raw: &RawEvent,
) -> Translation<T> {
    if watched_key == Some(raw.key.as_str()) {
        return Translation::Nothing;
    }
    let decode = |value: &[u8], revision: i64| {
        api::decode::<T>(prefix, &raw.key, value, revision).map_err(|e| DecodeError {
            kind: T::KIND,
            key: raw.key.clone(),
            revision: raw.mod_revision,
            message: format!("{e:#}"),
        })
    };
    let stamp = |mut object: T, revision: i64| {
        object.metadata_mut().resource_version = Some(ResourceVersion(revision));
        object
    };
    match raw.kind {
        RawKind::Put => {
            let new = match decode(&raw.value, raw.mod_revision) {
                Ok(new) => new,
                Err(e) => return Translation::Undecodable(e),
            };
            let new_passes = filter(&new);
            if raw.create_revision == raw.mod_revision {
                return if new_passes {
                    Translation::Emit(WatchEvent::Added(new))
                } else {
                    Translation::Nothing
                };
            }
            let Some((prev_value, prev_revision)) = &raw.prev else {
                return if new_passes {
                    Translation::Emit(WatchEvent::Modified(new))
                } else {
                    Translation::Nothing
                };
            };
            let old = decode(prev_value, *prev_revision).ok();
            let old_passes = old.as_ref().is_some_and(filter);
            match (old_passes, new_passes) {
                (true, true) => Translation::Emit(WatchEvent::Modified(new)),
                (false, true) => Translation::Emit(WatchEvent::Added(new)),
                (true, false) => Translation::Emit(WatchEvent::Deleted(stamp(
                    old.expect("old passed the filter"),
                    raw.mod_revision,
                ))),
                (false, false) => Translation::Nothing,
            }
        }
        RawKind::Delete => match &raw.prev {
            Some((prev_value, prev_revision)) => match decode(prev_value, *prev_revision) {
                Ok(old) if filter(&old) => {
                    Translation::Emit(WatchEvent::Deleted(stamp(old, raw.mod_revision)))
                }
                Ok(_) => Translation::Nothing,
                Err(e) => Translation::Undecodable(e),
            },
            None => {
                let Some((namespace, name)) = api::parse_key::<T>(prefix, &raw.key) else {
                    return Translation::Nothing;
                };
                let mut object = T::default();
                *object.metadata_mut() = ObjectMeta::named(namespace, name);
                object.set_type_meta();
                Translation::Emit(WatchEvent::Deleted(stamp(object, raw.mod_revision)))
            }
        },
    }
}

/// Parses a watch resourceVersion: `""` or `"0"` mean "list first"; `N` means "events
/// after N" (2014's `ParseWatchResourceVersion`, which returned N + 1).
///
/// # Errors
/// When the string is not a non-negative integer.
pub fn parse_watch_resource_version(resource_version: &str) -> anyhow::Result<Option<i64>> {
    let trimmed = resource_version.trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    let rv: ResourceVersion = trimmed
        .parse()
        .map_err(|e| anyhow::anyhow!("invalid watch resourceVersion: {e}"))?;
    Ok((rv.0 > 0).then_some(rv.0))
}

// ---------------------------------------------------------------------------------------
// Metrics

/// Counters of one watch (shared by the one-shot streams a resumable watch opens).
#[derive(Debug, Default)]
pub struct WatchMetrics {
    /// Re-opens from the last delivered revision after a disconnect or error.
    pub restarts: AtomicU64,
    /// Lists after compaction (410) or at start from `""`.
    pub relists: AtomicU64,
    /// Values skipped because they did not decode.
    pub decode_errors: AtomicU64,
    /// Events delivered to the consumer.
    pub events: AtomicU64,
    /// The highest revision delivered (or known to be passed) so far.
    pub last_revision: AtomicI64,
}

impl WatchMetrics {
    pub(crate) fn observe_revision(&self, revision: i64) {
        self.last_revision.fetch_max(revision, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------------------
// The one-shot watch

/// What a list or object watch ranges over.
#[derive(Clone, Debug)]
struct Target {
    /// First key of the range (the list prefix, or the object key).
    start: String,
    /// End of the range (exclusive).
    end: Vec<u8>,
    /// The directory key a list watch ignores events for.
    watched_key: Option<String>,
}

impl Target {
    fn list<T: Object>(prefix: &str, namespace: Option<&str>) -> Target {
        let start = api::list_key::<T>(prefix, namespace);
        Target {
            end: registry::prefix_range_end(start.as_bytes()),
            watched_key: Some(start.clone()),
            start,
        }
    }

    fn object<T: Object>(prefix: &str, namespace: &str, name: &str) -> Target {
        let start = api::object_key::<T>(prefix, namespace, name);
        let mut end = start.clone().into_bytes();
        end.push(0);
        Target {
            start,
            end,
            watched_key: None,
        }
    }
}

/// Items on the channel between a reader task and its stream.
#[derive(Debug)]
enum Item<T> {
    Event(WatchEvent<T>, Option<RawInfo>),
    /// Every revision up to this one has been delivered (or filtered out).
    Progress(i64),
}

/// Opens typed watches against one etcd. Cheap to clone.
#[derive(Clone)]
pub struct Watcher {
    watch_client: WatchClient,
    registry: Registry,
    open_timeout: Duration,
}

impl Watcher {
    /// A watcher reading through `client`, decoding under `registry`'s prefix.
    pub fn new(client: &Client, registry: Registry) -> Watcher {
        Watcher {
            watch_client: client
                .watch_client()
                .max_decoding_message_size(registry::MAX_RESPONSE_BYTES),
            registry,
            open_timeout: Duration::from_secs(10),
        }
    }

    /// The registry whose prefix and KV client this watcher uses.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The watch client (with the raised message limit), for the informers.
    pub(crate) fn watch_client(&self) -> WatchClient {
        self.watch_client.clone()
    }

    /// How long opening a watch may take before it counts as failed.
    pub(crate) fn open_timeout(&self) -> Duration {
        self.open_timeout
    }

    /// Watches every object of kind `T` in one namespace (or all, with `None`) that
    /// passes `filter` (2014's `WatchList`).
    ///
    /// `resource_version` `""` or `"0"`: list at one revision R, deliver an Added event
    /// per existing object (oldest revision first), then the events after R. `N`: the
    /// events after N.
    ///
    /// # Errors
    /// A non-numeric `resource_version`, before anything starts.
    pub fn watch_list<T: Object>(
        &self,
        namespace: Option<&str>,
        resource_version: &str,
        filter: Filter<T>,
    ) -> anyhow::Result<WatchStream<T>> {
        let start = parse_watch_resource_version(resource_version)?;
        let target = Target::list::<T>(self.registry.prefix(), namespace);
        Ok(self.open(target, start, filter, Arc::default()))
    }

    /// Watches one object (2014's `Watch`), with the same resourceVersion rules.
    ///
    /// # Errors
    /// A non-numeric `resource_version`, before anything starts.
    pub fn watch<T: Object>(
        &self,
        namespace: &str,
        name: &str,
        resource_version: &str,
    ) -> anyhow::Result<WatchStream<T>> {
        let start = parse_watch_resource_version(resource_version)?;
        let target = Target::object::<T>(self.registry.prefix(), namespace, name);
        Ok(self.open(target, start, everything(), Arc::default()))
    }

    fn open<T: Object>(
        &self,
        target: Target,
        after: Option<i64>,
        filter: Filter<T>,
        metrics: Arc<WatchMetrics>,
    ) -> WatchStream<T> {
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        let cancel = CancellationToken::new();
        let alive = Arc::new(());
        let reader = Reader {
            watcher: self.clone(),
            target,
            filter,
            metrics,
            tx,
        };
        let task_cancel = cancel.clone();
        let task_alive = alive.clone();
        // The task is owned by the stream: dropping or stopping the stream cancels it,
        // and it holds `alive` until it has returned.
        tokio::spawn(async move {
            let _alive = task_alive;
            tokio::select! {
                biased;
                _ = task_cancel.cancelled() => {}
                _ = reader.run(after) => {}
            }
        });
        WatchStream {
            rx,
            cancel,
            alive: Arc::downgrade(&alive),
            stopped: false,
        }
    }
}

/// The reader task of one one-shot watch.
struct Reader<T> {
    watcher: Watcher,
    target: Target,
    filter: Filter<T>,
    metrics: Arc<WatchMetrics>,
    tx: mpsc::Sender<Item<T>>,
}

/// Why a reader stopped before etcd failed: the consumer went away.
struct Gone;

impl<T: Object> Reader<T> {
    async fn run(self, after: Option<i64>) {
        let result = self.read(after).await;
        if let Ok(Err(status)) = result {
            if status.is_gone() {
                tracing::debug!(key = %self.target.start, %status, "watch start revision compacted");
            } else {
                tracing::debug!(key = %self.target.start, %status, "watch failed");
            }
            let _ = self
                .tx
                .send(Item::Event(WatchEvent::Error(status), None))
                .await;
        }
    }

    async fn send(&self, item: Item<T>) -> Result<(), Gone> {
        self.tx.send(item).await.map_err(|_| Gone)
    }

    /// Lists (when `after` is None), then watches. The outer `Result` is the consumer
    /// going away; the inner one is etcd failing.
    async fn read(&self, after: Option<i64>) -> Result<Result<(), Status>, Gone> {
        let after = match after {
            Some(revision) => revision,
            None => match self.initial_list().await? {
                Ok(revision) => revision,
                Err(status) => return Ok(Err(status)),
            },
        };
        self.watch_from(after + 1).await
    }

    /// Delivers an Added event per existing object, returns the list revision.
    async fn initial_list(&self) -> Result<Result<i64, Status>, Gone> {
        let registry = &self.watcher.registry;
        let mut events = Vec::new();
        let listed = registry
            .for_each_page_in_range(&self.target.start, &self.target.end, None, |page| {
                for kv in page {
                    if self.target.watched_key.as_deref().map(str::as_bytes) == Some(kv.key()) {
                        continue;
                    }
                    match registry.decode::<T>(kv) {
                        Ok(object) if (self.filter)(&object) => events.push(object),
                        Ok(_) => {}
                        Err(e) => {
                            self.metrics.decode_errors.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!(key = %e.key, revision = e.revision, error = %e.message, "skipping undecodable value");
                        }
                    }
                }
            })
            .await;
        let revision = match listed {
            Ok(revision) => revision,
            Err(e) => return Ok(Err(status_of(&e))),
        };
        // Deliver in revision order, not key order, so that revisions never go backwards
        // (a consumer may resume from the last one it saw). The sort is stable: objects
        // written by one transaction stay in key order.
        events.sort_by_key(|object: &T| object.metadata().resource_version);
        for object in events {
            self.send(Item::Event(WatchEvent::Added(object), None))
                .await?;
        }
        self.send(Item::Progress(revision)).await?;
        Ok(Ok(revision))
    }

    async fn watch_from(&self, start_revision: i64) -> Result<Result<(), Status>, Gone> {
        let options = WatchOptions::new()
            .with_range(self.target.end.clone())
            .with_start_revision(start_revision)
            .with_prev_key()
            .with_progress_notify();
        let mut client = self.watcher.watch_client.clone();
        let opened = tokio::time::timeout(
            self.watcher.open_timeout,
            client.watch(self.target.start.as_str(), Some(options)),
        )
        .await;
        let mut stream = match opened {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                return Ok(Err(Status::internal(format!(
                    "open watch on {}: {}",
                    self.target.start,
                    registry::describe_etcd_error(&e)
                ))))
            }
            Err(_) => {
                return Ok(Err(Status::internal(format!(
                    "open watch on {}: etcd did not answer within {}",
                    self.target.start,
                    humantime::format_duration(self.watcher.open_timeout)
                ))))
            }
        };
        loop {
            let response = match stream.message().await {
                Ok(Some(response)) => response,
                Ok(None) => {
                    return Ok(Err(Status::internal(format!(
                        "watch on {} closed by etcd",
                        self.target.start
                    ))))
                }
                Err(e) => {
                    return Ok(Err(Status::internal(format!(
                        "watch on {}: {}",
                        self.target.start,
                        registry::describe_etcd_error(&e)
                    ))))
                }
            };
            if response.canceled() {
                let compacted = response.compact_revision();
                return Ok(Err(if compacted > 0 {
                    Status::gone(format!(
                        "resourceVersion too old: revision {start_revision} of {} has been compacted (oldest available {compacted})",
                        self.target.start
                    ))
                } else {
                    Status::internal(format!(
                        "watch on {} canceled by etcd: {}",
                        self.target.start,
                        response.cancel_reason()
                    ))
                }));
            }
            if response.created() {
                continue;
            }
            let events = response.events();
            if events.is_empty() {
                // A progress notification: every event up to the header revision has
                // been sent. (Never taken from `created`, whose header may be ahead of
                // events still to come from the past.)
                if let Some(header) = response.header() {
                    self.send(Item::Progress(header.revision())).await?;
                }
                continue;
            }
            let mut delivered = false;
            let mut highest = 0;
            for event in events {
                let Some(raw) = RawEvent::from_etcd(event) else {
                    continue;
                };
                highest = highest.max(raw.mod_revision);
                match translate::<T>(
                    self.watcher.registry.prefix(),
                    self.target.watched_key.as_deref(),
                    self.filter.as_ref(),
                    &raw,
                ) {
                    Translation::Emit(event) => {
                        delivered = true;
                        self.send(Item::Event(event, Some(raw.info()))).await?;
                    }
                    Translation::Nothing => {}
                    Translation::Undecodable(e) => {
                        self.metrics.decode_errors.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(key = %e.key, revision = e.revision, error = %e.message, "skipping undecodable value");
                    }
                }
            }
            if !delivered {
                // Nothing passed: still tell the consumer how far the watch has read,
                // so a resume does not start before revisions it has already seen.
                self.send(Item::Progress(highest)).await?;
            }
        }
    }
}

fn status_of(error: &StorageError) -> Status {
    if error.is_compacted() {
        Status::gone(format!("resourceVersion too old: {error}"))
    } else {
        Status::internal(error.to_string())
    }
}

/// A one-shot watch: typed events until an Error, `stop()` or drop.
///
/// `stop()` is idempotent and ends the stream without an Error; dropping the stream
/// stops its reader task too.
pub struct WatchStream<T> {
    rx: mpsc::Receiver<Item<T>>,
    cancel: CancellationToken,
    alive: Weak<()>,
    stopped: bool,
}

impl<T> WatchStream<T> {
    /// Stops the watch: the reader task ends and the stream yields no more events.
    /// Calling it again does nothing.
    pub fn stop(&mut self) {
        self.cancel.cancel();
        self.stopped = true;
        self.rx.close();
    }

    /// A probe that reports whether the reader task is still running; lets tests
    /// check that no task outlives its stream.
    pub fn task_probe(&self) -> TaskProbe {
        TaskProbe(self.alive.clone())
    }

    fn poll_item(&mut self, cx: &mut Context<'_>) -> Poll<Option<Item<T>>> {
        if self.stopped {
            return Poll::Ready(None);
        }
        self.rx.poll_recv(cx)
    }

    async fn next_item(&mut self) -> Option<Item<T>> {
        futures::future::poll_fn(|cx| self.poll_item(cx)).await
    }

    /// The next event with the etcd event it came from (`None` for events of the
    /// initial list and for errors).
    pub async fn next_with_raw(&mut self) -> Option<(WatchEvent<T>, Option<RawInfo>)> {
        loop {
            match self.next_item().await? {
                Item::Event(event, raw) => return Some((event, raw)),
                Item::Progress(_) => continue,
            }
        }
    }
}

impl<T> Drop for WatchStream<T> {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl<T> Stream for WatchStream<T> {
    type Item = WatchEvent<T>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match self.poll_item(cx) {
                Poll::Ready(Some(Item::Event(event, _))) => return Poll::Ready(Some(event)),
                Poll::Ready(Some(Item::Progress(_))) => continue,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// Whether a watch's background task is still running.
#[derive(Clone, Debug)]
pub struct TaskProbe(Weak<()>);

impl TaskProbe {
    pub fn is_running(&self) -> bool {
        self.0.strong_count() > 0
    }
}

// ---------------------------------------------------------------------------------------
// The resumable watch

/// Backoff between re-opens: exponential from `min` to `max`, jittered, back to `min`
/// after a watch has been healthy for `reset_after`.
#[derive(Clone, Debug)]
pub struct BackoffConfig {
    /// Default 800 ms (client-go's reflector).
    pub min: Duration,
    /// Default 30 s.
    pub max: Duration,
    /// Default 2 min.
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            min: Duration::from_millis(800),
            max: Duration::from_secs(30),
            reset_after: Duration::from_secs(120),
        }
    }
}

#[derive(Debug)]
pub(crate) struct Backoff {
    config: BackoffConfig,
    next: Duration,
}

impl Backoff {
    pub(crate) fn new(config: BackoffConfig) -> Backoff {
        Backoff {
            next: config.min,
            config,
        }
    }

    /// The delay before the next attempt; `healthy_for` is how long the last watch ran.
    pub(crate) fn delay(&mut self, healthy_for: Duration) -> Duration {
        if healthy_for >= self.config.reset_after {
            self.next = self.config.min;
        }
        let base = self.next;
        self.next = (self.next * 2).min(self.config.max);
        // Jitter up to +50%, so many watchers do not reconnect in lockstep.
        let jitter = rand::thread_rng().gen_range(0.0..0.5);
        base.mul_f64(1.0 + jitter).min(self.config.max)
    }
}

/// How often a watch whose etcd stopped answering checks whether it answers again.
const PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// Waits out `delay`, the backoff before re-opening a watch, with one exception: when
/// etcd did not answer at first and answers again, the wait ends at once.
///
/// The backoff protects an etcd that answers but fails watches (overloaded, say): it gets
/// the whole delay. An etcd that could not be reached lost a connection, not its
/// patience; a cheap single-key read every 100 ms tells when it is back, so a watch
/// catches up within 100 ms of a restored connection instead of up to a whole (growing)
/// backoff later. Reads to an unreachable etcd cost it nothing.
pub(crate) async fn wait_before_reopen(registry: &Registry, key: &str, delay: Duration) {
    let deadline = tokio::time::Instant::now() + delay;
    let mut kv = registry.kv();
    let mut unreachable = false;
    loop {
        let probe = kv.get(key, Some(etcd_client::GetOptions::new().with_count_only()));
        let answered = matches!(
            tokio::time::timeout(PROBE_INTERVAL * 2, probe).await,
            Ok(Ok(_))
        );
        if answered {
            if unreachable {
                return;
            }
            tokio::time::sleep_until(deadline).await;
            return;
        }
        unreachable = true;
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return;
        }
        tokio::time::sleep_until(deadline.min(now + PROBE_INTERVAL)).await;
    }
}

/// What a resumable watch delivers.
#[derive(Clone, Debug, PartialEq)]
pub enum Update<T> {
    /// An Added, Modified or Deleted event (never Error), with the etcd event it came
    /// from when there was one (not for list results).
    Event(WatchEvent<T>, Option<RawInfo>),
    /// The watch was re-opened from `from` after `reason`.
    Resumed { from: i64, reason: String },
    /// The watch listed again at `revision` (after compaction, or at start) and
    /// delivered the differences as events.
    Relisted {
        revision: i64,
        added: usize,
        modified: usize,
        deleted: usize,
    },
}

impl<T> Update<T> {
    /// The event, for `Update::Event`.
    pub fn into_event(self) -> Option<WatchEvent<T>> {
        match self {
            Update::Event(event, _) => Some(event),
            _ => None,
        }
    }
}

/// A reflector-style watch that never ends on its own: it resumes after disconnects and
/// relists after compaction, delivering a gap-free stream of events.
///
/// Replaying its events onto an empty map (Added/Modified insert, Deleted removes)
/// reproduces the filtered etcd state at every revision it reports.
pub struct ResumableWatch<T> {
    watcher: Watcher,
    target: Target,
    filter: Filter<T>,
    metrics: Arc<WatchMetrics>,
    backoff: Backoff,
    /// The last revision delivered or passed; the next watch starts after it.
    revision: Option<i64>,
    /// Every object currently delivered and not deleted, by etcd key: what a relist
    /// diffs against, and the last state for Deleted events without a previous value.
    known: HashMap<String, T>,
    /// Whether `known` is the whole filtered state (true once a list has been done).
    /// Started from a resourceVersion, the watch has not seen objects older than it,
    /// so it passes events through as the one-shot watch delivered them.
    complete: bool,
    inner: Option<WatchStream<T>>,
    opened_at: Instant,
    pending: VecDeque<Update<T>>,
    /// Why the next open is a resume (None for the first open).
    resume_reason: Option<String>,
    need_relist: bool,
}

impl Watcher {
    /// A resumable watch of kind `T` in one namespace (or all), from `resource_version`
    /// (`""` lists first).
    ///
    /// # Errors
    /// A non-numeric `resource_version`.
    pub fn resumable_list<T: Object>(
        &self,
        namespace: Option<&str>,
        resource_version: &str,
        filter: Filter<T>,
    ) -> anyhow::Result<ResumableWatch<T>> {
        let start = parse_watch_resource_version(resource_version)?;
        Ok(self.resumable(
            Target::list::<T>(self.registry.prefix(), namespace),
            start,
            filter,
        ))
    }

    /// A resumable watch of one object.
    ///
    /// # Errors
    /// A non-numeric `resource_version`.
    pub fn resumable_object<T: Object>(
        &self,
        namespace: &str,
        name: &str,
        resource_version: &str,
    ) -> anyhow::Result<ResumableWatch<T>> {
        let start = parse_watch_resource_version(resource_version)?;
        let target = Target::object::<T>(self.registry.prefix(), namespace, name);
        Ok(self.resumable(target, start, everything()))
    }

    fn resumable<T: Object>(
        &self,
        target: Target,
        start: Option<i64>,
        filter: Filter<T>,
    ) -> ResumableWatch<T> {
        ResumableWatch {
            watcher: self.clone(),
            target,
            filter,
            metrics: Arc::default(),
            backoff: Backoff::new(BackoffConfig::default()),
            revision: start,
            known: HashMap::new(),
            complete: false,
            inner: None,
            opened_at: Instant::now(),
            pending: VecDeque::new(),
            resume_reason: None,
            need_relist: start.is_none(),
        }
    }
}

impl<T: Object> ResumableWatch<T> {
    /// Replaces the backoff between re-opens.
    pub fn with_backoff(mut self, config: BackoffConfig) -> Self {
        self.backoff = Backoff::new(config);
        self
    }

    /// The counters of this watch (restarts, relists, decode errors, last revision).
    pub fn metrics(&self) -> Arc<WatchMetrics> {
        self.metrics.clone()
    }

    /// The last revision delivered or passed.
    pub fn revision(&self) -> Option<i64> {
        self.revision
    }

    /// The objects delivered so far and not deleted, by etcd key.
    pub fn known(&self) -> &HashMap<String, T> {
        &self.known
    }

    /// The next update. Never returns `None`: the watch retries until dropped.
    pub async fn next(&mut self) -> Update<T> {
        loop {
            if let Some(update) = self.pending.pop_front() {
                return update;
            }
            if self.inner.is_none() {
                self.open().await;
                continue;
            }
            let inner = self.inner.as_mut().expect("checked above");
            match inner.next_item().await {
                Some(Item::Progress(revision)) => self.advance(revision),
                Some(Item::Event(WatchEvent::Error(status), _)) => self.fail(status),
                Some(Item::Event(event, raw)) => {
                    if let Some(update) = self.apply(event, raw) {
                        return update;
                    }
                }
                None => self.fail(Status::internal("watch stream ended")),
            }
        }
    }

    fn advance(&mut self, revision: i64) {
        if self.revision.is_none_or(|r| revision > r) {
            self.revision = Some(revision);
            self.metrics.observe_revision(revision);
        }
    }

    fn fail(&mut self, status: Status) {
        self.inner = None;
        if status.is_gone() {
            tracing::debug!(key = %self.target.start, %status, "watch revision compacted; listing again");
            self.need_relist = true;
        } else {
            tracing::debug!(key = %self.target.start, %status, "watch ended; resuming");
        }
        self.resume_reason = Some(status.to_string());
    }

    /// Fixes up an event from the one-shot watch against what has been delivered, so
    /// that the stream stays a faithful replay even without previous values.
    fn apply(&mut self, event: WatchEvent<T>, raw: Option<RawInfo>) -> Option<Update<T>> {
        let revision = event.revision().unwrap_or(0);
        let key = key_of::<T>(self.watcher.registry.prefix(), event.object()?);
        let event = match event {
            // Without a previous value the one-shot watch cannot tell Modified from
            // Added; we can.
            WatchEvent::Modified(object) if self.complete && !self.known.contains_key(&key) => {
                WatchEvent::Added(object)
            }
            WatchEvent::Deleted(object) => match self.known.remove(&key) {
                // A delete without a previous value carries only the name: deliver the
                // last state we delivered instead.
                Some(mut last) if raw.as_ref().is_some_and(|r| !r.has_prev) => {
                    last.metadata_mut().resource_version = Some(ResourceVersion(revision));
                    WatchEvent::Deleted(last)
                }
                Some(_) => WatchEvent::Deleted(object),
                None if !self.complete => WatchEvent::Deleted(object),
                // A delete of something never delivered (filtered, or a skeleton).
                None => {
                    self.advance(revision);
                    return None;
                }
            },
            other => other,
        };
        if let WatchEvent::Added(o) | WatchEvent::Modified(o) = &event {
            self.known.insert(key, o.clone());
        }
        self.advance(revision);
        self.metrics.events.fetch_add(1, Ordering::Relaxed);
        Some(Update::Event(event, raw))
    }

    async fn open(&mut self) {
        if let Some(reason) = self.resume_reason.take() {
            let delay = self.backoff.delay(self.opened_at.elapsed());
            tracing::debug!(key = %self.target.start, ?delay, "waiting before re-opening watch");
            wait_before_reopen(&self.watcher.registry, &self.target.start, delay).await;
            if !self.need_relist {
                let from = self.revision.unwrap_or(0);
                self.metrics.restarts.fetch_add(1, Ordering::Relaxed);
                self.pending.push_back(Update::Resumed { from, reason });
            }
        }
        if self.need_relist {
            match self.relist().await {
                Ok(()) => self.need_relist = false,
                Err(e) => {
                    tracing::info!(key = %self.target.start, error = %e, "list failed; retrying");
                    self.resume_reason = Some(e.to_string());
                    return;
                }
            }
        }
        self.opened_at = Instant::now();
        self.inner = Some(self.watcher.open(
            self.target.clone(),
            Some(self.revision.unwrap_or(0)),
            self.filter.clone(),
            self.metrics.clone(),
        ));
    }

    /// Lists the target at a fresh revision and queues the differences against what has
    /// been delivered: Added for new keys, Modified for changed ones, Deleted (stamped
    /// with the list revision) for keys that vanished.
    async fn relist(&mut self) -> Result<(), StorageError> {
        let registry = self.watcher.registry.clone();
        let mut listed: Vec<(String, T)> = Vec::new();
        let metrics = &self.metrics;
        let filter = &self.filter;
        let watched_key = self.target.watched_key.as_deref();
        let revision = registry
            .for_each_page_in_range(&self.target.start, &self.target.end, None, |page| {
                for kv in page {
                    if watched_key.map(str::as_bytes) == Some(kv.key()) {
                        continue;
                    }
                    match registry.decode::<T>(kv) {
                        Ok(object) if filter(&object) => {
                            listed.push((String::from_utf8_lossy(kv.key()).into_owned(), object))
                        }
                        Ok(_) => {}
                        Err(e) => {
                            metrics.decode_errors.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!(key = %e.key, revision = e.revision, error = %e.message, "skipping undecodable value");
                        }
                    }
                }
            })
            .await?;
        self.metrics.relists.fetch_add(1, Ordering::Relaxed);
        // Added and Modified in revision order, then Deleted at the list revision, so that
        // revisions never go backwards (as in `Reader::initial_list`).
        listed.sort_by_key(|(_, object)| object.metadata().resource_version);
        let (mut added, mut modified) = (0, 0);
        let mut still_there = HashMap::with_capacity(listed.len());
        let mut events = Vec::new();
        for (key, object) in listed {
            let version = object.metadata().resource_version;
            match self.known.get(&key) {
                None => {
                    added += 1;
                    events.push(WatchEvent::Added(object.clone()));
                }
                Some(old) if old.metadata().resource_version != version => {
                    modified += 1;
                    events.push(WatchEvent::Modified(object.clone()));
                }
                Some(_) => {}
            }
            still_there.insert(key, object);
        }
        let mut vanished: Vec<(String, T)> = self
            .known
            .drain()
            .filter(|(key, _)| !still_there.contains_key(key))
            .collect();
        vanished.sort_by(|a, b| a.0.cmp(&b.0));
        let deleted = vanished.len();
        for (_, mut object) in vanished {
            object.metadata_mut().resource_version = Some(ResourceVersion(revision));
            events.push(WatchEvent::Deleted(object));
        }
        self.known = still_there;
        self.complete = true;
        self.pending.push_back(Update::Relisted {
            revision,
            added,
            modified,
            deleted,
        });
        self.metrics
            .events
            .fetch_add(events.len() as u64, Ordering::Relaxed);
        self.pending
            .extend(events.into_iter().map(|event| Update::Event(event, None)));
        self.revision = Some(revision);
        self.metrics.observe_revision(revision);
        Ok(())
    }
}

fn key_of<T: Object>(prefix: &str, object: &T) -> String {
    let meta = object.metadata();
    api::object_key::<T>(prefix, &meta.namespace, &meta.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Pod;

    const PREFIX: &str = "/registry";
    const DIR: &str = "/registry/pods/";

    /// Pod `ns/p` labelled `app={app}`: in v3 the key fixes the name, so the 2014
    /// table's "name starts with b" filter becomes a label filter.
    fn pod_json(app: &str) -> Vec<u8> {
        format!(r#"{{"metadata":{{"name":"p","namespace":"ns","labels":{{"app":"{app}"}}}}}}"#)
            .into_bytes()
    }

    fn put(name: &str, create: i64, modified: i64, prev: Option<(&str, i64)>) -> RawEvent {
        RawEvent {
            kind: RawKind::Put,
            key: format!("{DIR}ns/p"),
            value: pod_json(name),
            create_revision: create,
            mod_revision: modified,
            version: 1,
            prev: prev.map(|(n, r)| (pod_json(n), r)),
        }
    }

    fn delete(key_name: &str, at: i64, prev: Option<(&str, i64)>) -> RawEvent {
        RawEvent {
            kind: RawKind::Delete,
            key: format!("{DIR}ns/{key_name}"),
            value: Vec::new(),
            create_revision: 0,
            mod_revision: at,
            version: 0,
            prev: prev.map(|(n, r)| (pod_json(n), r)),
        }
    }

    /// The 2014 test filter ("the name starts with b"), on the `app` label.
    fn starts_with_b(pod: &Pod) -> bool {
        pod.metadata
            .labels
            .get("app")
            .is_some_and(|app| app.starts_with('b'))
    }

    /// Translates `raw` and returns `TYPE app-label rv`, or "nothing"/"undecodable".
    #[track_caller]
    fn check(raw: RawEvent, expected: &str) {
        let got = match translate::<Pod>(PREFIX, Some(DIR), &starts_with_b, &raw) {
            Translation::Emit(event) => {
                let object = event.object().unwrap();
                format!(
                    "{} {} {}",
                    event.type_name(),
                    object
                        .metadata
                        .labels
                        .get("app")
                        .unwrap_or(object.metadata.name.as_str()),
                    object.metadata.resource_version.unwrap()
                )
            }
            Translation::Nothing => "nothing".to_string(),
            Translation::Undecodable(_) => "undecodable".to_string(),
        };
        assert_eq!(got, expected, "for {raw:?}");
    }

    #[test]
    fn the_2014_translation_table_on_v3() {
        // create (create_revision == mod_revision)
        check(put("bar", 5, 5, None), "ADDED bar 5");
        check(put("foo", 5, 5, None), "nothing");
        // set/compareAndSwap with a previous value: the filter transition table
        check(put("bar", 5, 7, Some(("foo", 5))), "ADDED bar 7");
        check(put("foo", 5, 7, Some(("bar", 5))), "DELETED bar 7");
        check(put("baz", 5, 7, Some(("bar", 5))), "MODIFIED baz 7");
        check(put("foo", 5, 7, Some(("fob", 5))), "nothing");
        // without a previous value (compacted): Modified if the new object passes
        check(put("bar", 5, 7, None), "MODIFIED bar 7");
        check(put("foo", 5, 7, None), "nothing");
        // delete: the previous object, stamped with the delete's revision
        check(delete("p", 9, Some(("bar", 7))), "DELETED bar 9");
        check(delete("p", 9, Some(("foo", 7))), "nothing");
        // delete without a previous value: a skeleton carrying the key's name
        check(delete("qux", 9, None), "DELETED qux 9");
    }

    #[test]
    fn the_watched_directory_key_itself_is_ignored() {
        let mut raw = put("bar", 5, 5, None);
        raw.key = DIR.to_string();
        check(raw, "nothing");
    }

    #[test]
    fn undecodable_values_are_reported_not_emitted() {
        let mut raw = put("bar", 5, 5, None);
        raw.value = b"{not json".to_vec();
        check(raw, "undecodable");
        // An undecodable previous value counts as "did not pass" (2014).
        let mut raw = put("bar", 5, 7, Some(("bar", 5)));
        raw.prev = Some((b"garbage".to_vec(), 5));
        check(raw, "ADDED bar 7");
    }

    #[test]
    fn watch_resource_version_rules() {
        assert_eq!(parse_watch_resource_version("").unwrap(), None);
        assert_eq!(parse_watch_resource_version("0").unwrap(), None);
        assert_eq!(parse_watch_resource_version("42").unwrap(), Some(42));
        assert!(parse_watch_resource_version("abc").is_err());
        assert!(parse_watch_resource_version("-3").is_err());
    }

    #[test]
    fn events_serialize_to_the_wire_form() {
        let pod: Pod = api::decode(PREFIX, "/registry/pods/ns/p", &pod_json("bar"), 3).unwrap();
        let json = serde_json::to_value(WatchEvent::Added(pod)).unwrap();
        assert_eq!(json["type"], "ADDED");
        assert_eq!(json["object"]["kind"], "Pod");
        assert_eq!(json["object"]["metadata"]["resourceVersion"], "3");
        let json = serde_json::to_value(WatchEvent::<Pod>::Error(Status::gone("too old"))).unwrap();
        assert_eq!(json["type"], "ERROR");
        assert_eq!(json["object"]["code"], 410);
        assert_eq!(json["object"]["kind"], "Status");
    }

    #[test]
    fn backoff_doubles_to_the_cap_and_resets_after_a_healthy_period() {
        let mut backoff = Backoff::new(BackoffConfig {
            min: Duration::from_millis(100),
            max: Duration::from_millis(1000),
            reset_after: Duration::from_secs(60),
        });
        let delays: Vec<_> = (0..6).map(|_| backoff.delay(Duration::ZERO)).collect();
        for (delay, base) in delays.iter().zip([100, 200, 400, 800, 1000, 1000]) {
            let base = Duration::from_millis(base);
            assert!(
                *delay >= base && *delay <= (base * 3 / 2).min(Duration::from_millis(1000)),
                "{delays:?}"
            );
        }
        assert!(backoff.delay(Duration::from_secs(61)) < Duration::from_millis(151));
    }
}
