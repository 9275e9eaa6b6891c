//! The HTTP watch (2014's `watch.go`): from the watch cache's window and broadcast, or
//! from an etcd watch of its own for a start before the window; the 2014 filter
//! transitions, bookmarks, `sendInitialEvents` and timeouts.
//!
//! Invariants (one etcd transaction may write several objects at one revision, which
//! Kubernetes never does):
//! - the server ends a stream (timeout, a client too far behind) and sends a BOOKMARK only
//!   between revisions: each revision's events are queued together, and a BOOKMARK names
//!   a revision whose events have all been queued;
//! - a watch from resourceVersion R sends R's events again when two or more of them pass
//!   its filter: a client cut off inside R (a network cut, an apiserver killed) resumes
//!   from R having seen only part of it, so the rest would otherwise be lost. A client
//!   that had all of R then gets some events again, at R only: repeating is safe for a
//!   level-triggered client, losing is not. A revision with one event of the watch
//!   (every write through the API, every single-object watch) is never repeated.

use std::borrow::Borrow;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use serde_json::json;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::OwnedSemaphorePermit;

use super::read::{
    cache_of, include_object, item_metadata, item_table, list, namespace_item, namespaces, synced,
    Filter, CACHE_WAIT,
};
use super::request::{Format, Query, Target};
use super::ApiState;
use crate::apiserver::cache::{Event, Item, NotInWindow, Subscription, WatchCache};
use crate::apiserver::errors::ApiError;
use crate::apiserver::resources::Resource;
use crate::apiserver::table;
use crate::etcd_watcher::RawItem;
use crate::registry::prefix_range_end;
use futures::StreamExt as _;

mod plan;

use plan::{plan_watch, watch_timeout, WatchStart};

/// How often a watch with `allowWatchBookmarks` gets a BOOKMARK.
pub(super) const BOOKMARK_PERIOD: Duration = Duration::from_secs(30);

/// Events written to a watch per chunk at most.
pub(super) const EVENTS_PER_CHUNK: usize = 256;

pub(super) async fn watch(
    state: &Arc<ApiState>,
    target: &Target,
    query: &Query,
    format: Format,
) -> Result<Response, ApiError> {
    let resource = target.resource;
    let filter = Filter::new(target, query)?;
    let start = plan_watch(query)?;
    let permit = state.watches.clone().try_acquire_owned().map_err(|_| {
        ApiError::too_many_requests(format!(
            "too many watches: this apiserver serves at most {} at once (--max-watches)",
            state.max_watches
        ))
    })?;
    let timeout = watch_timeout(query)?;
    let Some(cache) = cache_of(state, resource).cloned() else {
        // A resource without a cache (none is served today): its current state, then nothing.
        let page = list(state, target, &filter, &Query::default()).await?;
        let mut watch = Watch::new(resource, format, query, None, page.revision);
        let mut lines = VecDeque::new();
        if !matches!(start, WatchStart::After(_)) {
            for item in &page.items {
                lines.push_back(watch.line("ADDED", item));
            }
        }
        if let WatchStart::InitialEvents(_) = start {
            lines.push_back(watch.bookmark(page.revision, true));
        }
        return Ok(watch_response(
            state, watch, lines, None, permit, timeout, format,
        ));
    };
    synced(&cache).await?;
    let (subscription, start_revision) = match start {
        WatchStart::Snapshot | WatchStart::InitialEvents(_) => {
            if let WatchStart::InitialEvents(revision @ 1..) = start {
                if !cache.wait_fresh(revision, CACHE_WAIT).await {
                    let current = cache.revision();
                    return Err(ApiError::too_large_resource_version(revision, current));
                }
            }
            let subscription = cache.subscribe_snapshot(filter.namespace.as_deref());
            let revision = subscription.revision;
            (subscription, revision)
        }
        // Ahead of the cache: it waits (asking etcd for progress) up to 3 s, then 504
        // "Too large resource version", as kube-apiserver; never an etcd watch of its own.
        WatchStart::After(revision) if !cache.wait_fresh(revision, CACHE_WAIT).await => {
            return Err(ApiError::too_large_resource_version(
                revision,
                cache.revision(),
            ));
        }
        // R's own events decide whether R is sent again (`Watch::resume_at`).
        WatchStart::After(revision) => match subscribe_at(state, &cache, revision).await {
            Ok(subscription) => (subscription, revision),
            Err(oldest) => {
                // Before the window: an etcd watch of its own from N (etcd still holds
                // the history unless it compacted it; then one ERROR 410).
                tracing::debug!(
                    resource = resource.plural,
                    revision,
                    oldest,
                    "watch from before the cache's window; watching etcd from it"
                );
                let source = etcd_source(state, &cache, revision - 1);
                let watch =
                    Watch::new(resource, format, query, Some(filter), revision).resume_at(revision);
                return Ok(watch_response(
                    state,
                    watch,
                    VecDeque::new(),
                    Some(source),
                    permit,
                    timeout,
                    format,
                ));
            }
        },
    };
    let mut watch = Watch::new(resource, format, query, Some(filter), start_revision);
    let mut lines = VecDeque::new();
    if let WatchStart::After(revision) = start {
        // The window holds whole revisions, so the initial events end at a revision's end.
        watch = watch.resume_at(revision);
        watch.take(subscription.initial, |line| lines.push_back(line));
    } else {
        // A snapshot: every object as it is, each at its own revision (at or below the
        // watch's start).
        for event in &subscription.initial {
            if let Some(line) = watch.event_line(event) {
                lines.push_back(line);
            }
        }
        if resource.plural == "namespaces" {
            // The namespaces nobody created (default, kube-system, ...) are listed, so
            // they are in a watch's current state too.
            let stored: std::collections::BTreeSet<&str> = subscription
                .initial
                .iter()
                .map(|event| event.object.name())
                .collect();
            for name in namespaces(state) {
                if stored.contains(name.as_str()) {
                    continue;
                }
                let event = Event {
                    object: Arc::new(namespace_item(&name, start_revision)),
                    prev: None,
                    deleted: false,
                };
                if let Some(line) = watch.event_line(&event) {
                    lines.push_back(line);
                }
            }
        }
    }
    if query.get("sendInitialEvents") == Some("true") {
        lines.push_back(watch.bookmark(start_revision, true));
    }
    let id = state.watch_ids.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(
        id,
        resource = resource.plural,
        start_revision,
        "watch started"
    );
    Ok(watch_response(
        state,
        watch,
        lines,
        Some(Source::Cache(cache, subscription.rx)),
        permit,
        timeout,
        format,
    ))
}

/// The cache's subscription for a watch from resourceVersion `revision`: from the window,
/// reading the window's first revision back from etcd when that is the one asked for (a
/// list's resourceVersion on a quiet store, or a freshly started apiserver's).
///
/// # Errors
/// The oldest revision the cache serves, when `revision` is before it (or the read-back
/// failed: the caller then watches etcd, which answers the same events or 410).
async fn subscribe_at(
    state: &ApiState,
    cache: &WatchCache,
    revision: i64,
) -> Result<Subscription, i64> {
    match cache.subscribe_at(revision) {
        Ok(subscription) => return Ok(subscription),
        Err(NotInWindow::TooOld(too_old)) => return Err(too_old.oldest),
        Err(NotInWindow::StartUnread(_)) => {}
    }
    if let Err(e) = cache.read_start(&state.registry, revision).await {
        tracing::debug!(
            resource = cache.codec().resource,
            revision,
            "could not read the window's first revision back from etcd: {e:#}"
        );
        return Err(revision);
    }
    match cache.subscribe_at(revision) {
        Ok(subscription) => Ok(subscription),
        Err(NotInWindow::TooOld(too_old)) => Err(too_old.oldest),
        // The window moved on while it was read: so far that the revision is before it.
        Err(NotInWindow::StartUnread(start)) => Err(start + 1),
    }
}

pub(super) fn watch_content_type(format: Format) -> &'static str {
    match format {
        Format::Table => "application/json;as=Table;v=v1;g=meta.k8s.io",
        _ => "application/json",
    }
}

/// One HTTP watch's translation of cache events into lines.
pub(super) struct Watch {
    resource: &'static Resource,
    format: Format,
    include: table::IncludeObject,
    filter: Option<Filter>,
    bookmarks: bool,
    /// The revision the watch starts after: events at or below it are not its own (a
    /// live event can be, when the client asked for a revision the cache had not reached).
    /// Compared with this and not with the last revision delivered, since one etcd
    /// transaction writes several keys at one revision.
    start: i64,
    /// The revision a watch from a resourceVersion resumes at, until its events are in.
    resume: Option<Resume>,
    /// The highest revision delivered so far (for bookmarks).
    revision: i64,
    /// Whether the Table's column definitions went out (in the first event only).
    columns_sent: bool,
}

impl Watch {
    pub(super) fn new(
        resource: &'static Resource,
        format: Format,
        query: &Query,
        filter: Option<Filter>,
        revision: i64,
    ) -> Watch {
        Watch {
            resource,
            format,
            include: include_object(query),
            filter,
            bookmarks: query.flag("allowWatchBookmarks"),
            start: revision,
            resume: None,
            revision,
            columns_sent: false,
        }
    }

    /// A watch from resourceVersion `revision` (≥ 1): that revision's events are held back
    /// until all of them are in, then sent again if two or more pass the filter (the
    /// client may have been cut off among them) and dropped if one does (the client had
    /// it: one event is delivered whole or not at all).
    pub(super) fn resume_at(mut self, revision: i64) -> Watch {
        self.start = revision - 1;
        self.revision = self.revision.max(revision);
        self.resume = Some(Resume {
            revision,
            held: Vec::new(),
        });
        self
    }

    /// The lines of `events`, in order, to `out`: those after the watch's start that its
    /// filter lets through, with the resume revision's held back (see [`Watch::resume_at`]).
    /// `events` must end at the end of a revision (a batch of whole revisions), so the
    /// resume revision is complete once a batch holds any of it.
    pub(super) fn take<E: Borrow<Event> + Into<Arc<Event>>>(
        &mut self,
        events: impl IntoIterator<Item = E>,
        mut out: impl FnMut(Bytes),
    ) {
        for event in events {
            let revision = event.borrow().revision();
            if revision <= self.start {
                continue;
            }
            if let Some(resume) = &mut self.resume {
                if revision == resume.revision {
                    resume.held.push(event.into());
                    continue;
                }
                self.release_resumed(&mut out);
            }
            if let Some(line) = self.event_line(event.borrow()) {
                out(line);
            }
        }
        if self
            .resume
            .as_ref()
            .is_some_and(|resume| !resume.held.is_empty())
        {
            self.release_resumed(&mut out);
        }
    }

    /// Sends the resume revision's held events again if two or more pass the filter;
    /// from now on the watch is an ordinary one.
    fn release_resumed(&mut self, out: &mut impl FnMut(Bytes)) {
        let Some(resume) = self.resume.take() else {
            return;
        };
        let passing: Vec<&Arc<Event>> = resume
            .held
            .iter()
            .filter(|event| self.kind(event).is_some())
            .collect();
        if passing.len() < 2 {
            return;
        }
        for event in passing {
            if let Some(line) = self.event_line(event) {
                out(line);
            }
        }
    }

    /// The 2014 translation (`etcd_tools_watch.go`'s `sendModify` on the filter): a
    /// change that moves an object into the selection is ADDED, out of it DELETED.
    pub(super) fn event_line(&mut self, event: &Event) -> Option<Bytes> {
        let kind = self.kind(event)?;
        Some(self.line(kind, &event.object))
    }

    /// The type `event` has for this watch; `None` when it does not pass the filter.
    fn kind(&self, event: &Event) -> Option<&'static str> {
        let passes = |item: &Item| self.filter.as_ref().is_none_or(|f| f.matches(item));
        if event.deleted {
            passes(&event.object).then_some("DELETED")
        } else {
            match &event.prev {
                None => passes(&event.object).then_some("ADDED"),
                Some(prev) => match (passes(prev), passes(&event.object)) {
                    (true, true) => Some("MODIFIED"),
                    (false, true) => Some("ADDED"),
                    (true, false) => Some("DELETED"),
                    (false, false) => None,
                },
            }
        }
    }

    pub(super) fn line(&mut self, kind: &str, item: &Item) -> Bytes {
        self.revision = self.revision.max(item.revision);
        let mut line = format!(r#"{{"type":"{kind}","object":"#).into_bytes();
        match self.format {
            Format::Json => line.extend_from_slice(item.json()),
            Format::Table => {
                let table = item_table(self.resource, item, self.include, !self.columns_sent);
                self.columns_sent = true;
                line.extend_from_slice(&table);
            }
            Format::Metadata => line.extend_from_slice(item_metadata(item).to_string().as_bytes()),
        }
        line.extend_from_slice(b"}\n");
        Bytes::from(line)
    }

    pub(super) fn bookmark(&mut self, revision: i64, initial_events_end: bool) -> Bytes {
        self.revision = self.revision.max(revision);
        let mut metadata = json!({ "resourceVersion": revision.to_string() });
        if initial_events_end {
            metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        let object = json!({
            "kind": self.resource.kind,
            "apiVersion": self.resource.api_version(),
            "metadata": metadata,
        });
        Bytes::from(format!(
            "{}\n",
            json!({ "type": "BOOKMARK", "object": object })
        ))
    }
}

/// The events of the revision a watch resumes at, held until all of them are in.
struct Resume {
    revision: i64,
    held: Vec<Arc<Event>>,
}

/// Where a watch's events come from.
pub(super) enum Source {
    /// The resource's watch cache (every watch from inside its window).
    Cache(
        Arc<WatchCache>,
        tokio::sync::broadcast::Receiver<Arc<Event>>,
    ),
    /// An etcd watch of its own, for a watch from before the cache's window.
    Etcd {
        cache: Arc<WatchCache>,
        /// The resource's directory key (`{prefix}/pods/`).
        start: String,
        raw: crate::etcd_watcher::RawWatch,
    },
}

/// An etcd watch of `cache`'s resource from after `revision`, with previous values (for
/// the filter transitions).
pub(super) fn etcd_source(state: &ApiState, cache: &Arc<WatchCache>, revision: i64) -> Source {
    let start = cache.codec().dir_key(state.registry.prefix());
    let config = crate::etcd_watcher::EngineConfig {
        range: crate::etcd_watcher::Range {
            end: prefix_range_end(start.as_bytes()),
            watched_key: Some(start.clone()),
            start: start.clone(),
        },
        start: crate::etcd_watcher::Start::After(revision),
        resume: true,
        prev_kv: true,
        backoff: crate::etcd_watcher::BackoffConfig::default(),
        metrics: Arc::default(),
    };
    Source::Etcd {
        cache: cache.clone(),
        start,
        raw: state.watcher.engine(config).into_stream(),
    }
}

/// The 410 that ends a watch when the cache starts a new history.
fn reset() -> ApiError {
    ApiError::expired("the watch cache was reset: etcd's revision went backwards; list again")
}

/// A batch of events from the cache's broadcast.
enum Batch {
    /// Whole revisions.
    Whole(Vec<Arc<Event>>),
    /// Whole revisions, after which the receiver fell too far behind: the stream ends.
    Lagged(Vec<Arc<Event>>),
    /// Whole revisions, after which the cache started a new history.
    Closed(Vec<Arc<Event>>),
}

/// `first` and the events after it that the receiver holds, about [`EVENTS_PER_CHUNK`]
/// of them, ending at the end of a revision: a revision is never split between batches,
/// so nothing the stream does between batches (end at its timeout, send a BOOKMARK) falls
/// inside one. An event of the next revision that arrives after the batch is full goes to
/// `carry`.
fn whole_revisions(
    cache: &WatchCache,
    rx: &mut tokio::sync::broadcast::Receiver<Arc<Event>>,
    first: Arc<Event>,
    carry: &mut Option<Arc<Event>>,
) -> Batch {
    let mut events = vec![first];
    // The cache's revision read after the last event arrived: the cache sends a
    // revision's events under its write lock and moves to the revision before releasing
    // it, so once it is at a revision every event of it is in the receiver.
    let mut complete_to = i64::MIN;
    loop {
        let last = events.last().map_or(i64::MIN, |e| e.revision());
        match rx.try_recv() {
            Ok(event) => {
                if events.len() >= EVENTS_PER_CHUNK && event.revision() != last {
                    *carry = Some(event);
                    return Batch::Whole(events);
                }
                events.push(event);
            }
            Err(TryRecvError::Empty) if complete_to >= last => return Batch::Whole(events),
            Err(TryRecvError::Empty) => complete_to = cache.revision(),
            Err(TryRecvError::Lagged(_)) => {
                // The events lost come right after these: the last revision may be cut.
                events.retain(|e| e.revision() != last);
                return Batch::Lagged(events);
            }
            Err(TryRecvError::Closed) => return Batch::Closed(events),
        }
    }
}

/// What a watch's body stream holds between chunks.
pub(super) struct WatchBody {
    watch: Watch,
    pending: VecDeque<Bytes>,
    source: Option<Source>,
    /// The first event of a revision received while the batch before it was full.
    carry: Option<Arc<Event>>,
    deadline: tokio::time::Instant,
    next_bookmark: tokio::time::Instant,
    done: bool,
    _permit: OwnedSemaphorePermit,
    _gauge: GaugeGuard,
    sent: Counter,
}

/// Counts a watch in `apiserver_longrunning_requests` while it lives.
pub(super) struct GaugeGuard(Gauge);

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

pub(super) fn watch_response(
    state: &ApiState,
    watch: Watch,
    pending: VecDeque<Bytes>,
    source: Option<Source>,
    permit: OwnedSemaphorePermit,
    timeout: Duration,
    format: Format,
) -> Response {
    let labels = vec![("resource", watch.resource.plural), ("verb", "WATCH")];
    let gauge = state.longrunning.get_or_create(&labels).clone();
    gauge.inc();
    let sent = state
        .events_sent
        .get_or_create(&vec![
            ("resource", watch.resource.plural),
            ("verb", "WATCH"),
        ])
        .clone();
    let now = tokio::time::Instant::now();
    let body = WatchBody {
        watch,
        pending,
        source,
        carry: None,
        deadline: now + timeout,
        next_bookmark: now + BOOKMARK_PERIOD,
        done: false,
        _permit: permit,
        _gauge: GaugeGuard(gauge),
        sent,
    };
    let stream = futures::stream::unfold(body, |mut body| async move {
        let chunk = body.next_chunk().await?;
        Some((Ok::<_, std::convert::Infallible>(chunk), body))
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, watch_content_type(format))],
        Body::from_stream(stream),
    )
        .into_response()
}

impl WatchBody {
    /// A periodic BOOKMARK at `revision`, and the next one a period later.
    pub(super) fn bookmark(&mut self, revision: i64) {
        self.next_bookmark += BOOKMARK_PERIOD;
        let line = self.watch.bookmark(revision, false);
        self.pending.push_back(line);
    }

    /// The next bytes to write; `None` ends the stream.
    pub(super) async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            if let Some(chunk) = self.take_pending() {
                return Some(chunk);
            }
            if self.done {
                return None;
            }
            let source = match &mut self.source {
                None => {
                    // Nothing changes: wait for the end (or bookmarks).
                    tokio::select! {
                        _ = tokio::time::sleep_until(self.deadline) => return None,
                        _ = tokio::time::sleep_until(self.next_bookmark), if self.watch.bookmarks => {
                            self.bookmark(self.watch.revision);
                            continue;
                        }
                    }
                }
                Some(source) => source,
            };
            let (cache, rx) = match source {
                Source::Cache(cache, rx) => (cache, rx),
                Source::Etcd { cache, start, raw } => {
                    let item = tokio::select! {
                        biased;
                        _ = tokio::time::sleep_until(self.deadline) => return None,
                        _ = tokio::time::sleep_until(self.next_bookmark), if self.watch.bookmarks => {
                            self.bookmark(self.watch.revision);
                            continue;
                        }
                        item = raw.next() => item,
                    };
                    let (cache, start) = (cache.clone(), start.clone());
                    self.etcd_item(&cache, &start, item);
                    continue;
                }
            };
            let first = match self.carry.take() {
                Some(event) => event,
                None => {
                    let received = tokio::select! {
                        biased;
                        _ = tokio::time::sleep_until(self.deadline) => return None,
                        _ = tokio::time::sleep_until(self.next_bookmark), if self.watch.bookmarks => {
                            // The revision first: the cache sends a revision's events before
                            // it moves to it, so with nothing waiting in the receiver every
                            // event up to it has been queued. With events waiting the watch
                            // is busy, and they move the client on.
                            let revision = cache.revision().max(self.watch.revision);
                            if rx.is_empty() {
                                self.bookmark(revision);
                            } else {
                                self.next_bookmark += BOOKMARK_PERIOD;
                            }
                            continue;
                        }
                        received = rx.recv() => received,
                    };
                    match received {
                        Ok(event) => event,
                        Err(RecvError::Lagged(missed)) => {
                            // Too slow: end the stream (between revisions: every batch
                            // queued was whole revisions); the client watches again from
                            // the last resourceVersion it saw (still in the window, most
                            // likely).
                            tracing::debug!(
                                resource = self.watch.resource.plural,
                                missed,
                                "watch too far behind; ending it"
                            );
                            return None;
                        }
                        Err(RecvError::Closed) => {
                            // The cache started a new history (etcd's revision went
                            // backwards).
                            self.end_with(reset());
                            continue;
                        }
                    }
                }
            };
            match whole_revisions(cache, rx, first, &mut self.carry) {
                Batch::Whole(events) => self.push_events(events),
                Batch::Lagged(events) => {
                    tracing::debug!(
                        resource = self.watch.resource.plural,
                        "watch too far behind; ending it"
                    );
                    self.push_events(events);
                    self.done = true;
                }
                Batch::Closed(events) => {
                    self.push_events(events);
                    self.end_with(reset());
                }
            }
        }
    }

    /// The pending lines as one chunk of about 64 KiB at most; `None` when there are none.
    fn take_pending(&mut self) -> Option<Bytes> {
        if self.pending.is_empty() {
            return None;
        }
        let mut chunk = Vec::new();
        while let Some(line) = self.pending.pop_front() {
            chunk.extend_from_slice(&line);
            if chunk.len() > 64 * 1024 {
                break;
            }
        }
        Some(Bytes::from(chunk))
    }

    /// Queues the lines of `events` (whole revisions) that are the watch's own
    /// ([`Watch::take`]).
    fn push_events<E: Borrow<Event> + Into<Arc<Event>>>(
        &mut self,
        events: impl IntoIterator<Item = E>,
    ) {
        let (sent, pending) = (&self.sent, &mut self.pending);
        self.watch.take(events, |line| {
            sent.inc();
            pending.push_back(line);
        });
    }

    /// Ends the watch with an ERROR event carrying `error`'s Status.
    fn end_with(&mut self, error: ApiError) {
        self.done = true;
        self.pending.push_back(Bytes::from(format!(
            "{}\n",
            json!({ "type": "ERROR", "object": error.status() })
        )));
    }

    /// Handles what the watch's own etcd watch delivered.
    fn etcd_item(&mut self, cache: &WatchCache, start: &str, item: Option<RawItem>) {
        match item {
            Some(RawItem::Events(raw_events)) => {
                // One etcd watch response holds whole revisions.
                let events = raw_events
                    .iter()
                    .filter_map(|raw_event| cache.event_from_raw(start, raw_event))
                    .map(Arc::new)
                    .collect::<Vec<_>>();
                self.push_events(events);
            }
            Some(RawItem::Progress(_) | RawItem::Resumed { .. }) => {}
            // Compacted (at the start, or later while resuming): the client must list
            // again.
            Some(
                RawItem::Ended(_)
                | RawItem::Page { .. }
                | RawItem::Listed { .. }
                | RawItem::ListFailed,
            )
            | None => self.end_with(ApiError::expired(format!(
                "too old resource version: {} ({})",
                self.watch.revision,
                cache.revision()
            ))),
        }
    }
}

#[cfg(test)]
mod tests;
