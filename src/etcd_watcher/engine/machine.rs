//! The state machine itself: [`Engine`] and its step from one state to the next.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use etcd_client::{WatchClient, WatchOptions};

use crate::etcd_watcher::event::Status;
use crate::etcd_watcher::translate::RawEvent;
use crate::registry::{self, Registry, StorageError};

use super::backoff::{
    reconnect_delay, wait_before_reopen, wait_until_answering, Backoff, BackoffConfig,
    MAX_RECONNECT_DELAY,
};
use super::items::{ListReason, Range, RawItem, RawWatch, Start};
use super::metrics::WatchMetrics;

/// How a watch or list failed.
#[derive(Debug)]
struct Failure {
    reason: String,
    /// The connection dropped or etcd did not answer (as opposed to: etcd answered and
    /// refused or failed the request).
    disconnected: bool,
    /// List again (and why) instead of resuming.
    relist: Option<ListReason>,
}

enum State {
    Listing {
        reason: ListReason,
        /// Where the next page starts.
        next: Vec<u8>,
        /// The revision every page is read at (0 until the first page fixes it).
        pinned: i64,
        page_size: i64,
        /// Whether a page of this list has been yielded.
        yielded: bool,
    },
    Listed {
        reason: ListReason,
        revision: i64,
    },
    Opening {
        /// Why this open is a resume (None for the first open after a list).
        resumed: Option<String>,
    },
    Watching {
        stream: Box<etcd_client::WatchStream>,
        opened_at: Instant,
    },
    Waiting(Failure),
    Done,
}

/// One list-and-watch: its settings, its progress and its state.
pub(crate) struct Engine {
    watch_client: WatchClient,
    registry: Registry,
    open_timeout: Duration,
    range: Range,
    resume: bool,
    prev_kv: bool,
    metrics: std::sync::Arc<WatchMetrics>,
    backoff: Backoff,
    /// Consecutive watches that lived less than [`MAX_RECONNECT_DELAY`].
    short_lived: u32,
    /// How long the last watch ran before it failed.
    last_healthy: Duration,
    /// The highest revision reported: the next watch starts after it.
    revision: i64,
    /// The cluster that answered first.
    cluster_id: Option<u64>,
    /// Rung by a consumer that wants to know etcd's current revision has been reached:
    /// the open watch asks etcd for a progress notification ([`Engine::with_progress_requests`]).
    progress_requests: Option<std::sync::Arc<tokio::sync::Notify>>,
    state: State,
}

/// The settings of one engine.
pub(crate) struct EngineConfig {
    pub range: Range,
    pub start: Start,
    /// Resume after failures (else: yield [`RawItem::Ended`] and stop).
    pub resume: bool,
    /// Ask etcd for previous values (the 2014 translation needs them; informers do not).
    pub prev_kv: bool,
    pub backoff: BackoffConfig,
    pub metrics: std::sync::Arc<WatchMetrics>,
}

impl Engine {
    pub(crate) fn new(
        watch_client: WatchClient,
        registry: Registry,
        open_timeout: Duration,
        config: EngineConfig,
    ) -> Engine {
        let page_size = registry.page_size();
        let (state, revision) = match config.start {
            Start::List => (
                Engine::listing_with(ListReason::Initial, &config.range, 0, page_size),
                0,
            ),
            Start::StateAt(at) => (
                Engine::listing_with(ListReason::StateAt, &config.range, at, page_size),
                at,
            ),
            Start::After(after) => (State::Opening { resumed: None }, after),
        };
        Engine {
            watch_client,
            registry,
            open_timeout,
            range: config.range,
            resume: config.resume,
            prev_kv: config.prev_kv,
            metrics: config.metrics,
            backoff: Backoff::new(config.backoff),
            short_lived: 0,
            last_healthy: Duration::ZERO,
            revision,
            cluster_id: None,
            progress_requests: None,
            state,
        }
    }

    /// Each `notify_one` on `requests` makes the open watch ask etcd for a progress
    /// notification (etcd's `RequestProgress`): etcd answers, once every event up to its
    /// current revision has been sent, with that revision, which the engine yields as
    /// [`RawItem::Progress`]. KEP-2340's way for a cache to learn that it is as fresh as
    /// etcd when nothing under its range changed.
    pub(crate) fn with_progress_requests(
        mut self,
        requests: std::sync::Arc<tokio::sync::Notify>,
    ) -> Engine {
        self.progress_requests = Some(requests);
        self
    }

    fn listing(&self, reason: ListReason, at: i64) -> State {
        Engine::listing_with(reason, &self.range, at, self.registry.page_size())
    }

    fn listing_with(reason: ListReason, range: &Range, at: i64, page_size: i64) -> State {
        State::Listing {
            reason,
            next: range.start.clone().into_bytes(),
            pinned: at,
            page_size,
            yielded: false,
        }
    }

    /// Replaces the backoff between re-opens after a refusal.
    pub(crate) fn set_backoff(&mut self, config: BackoffConfig) {
        self.backoff = Backoff::new(config);
    }

    /// The engine as a stream.
    pub(crate) fn into_stream(self) -> RawWatch {
        Box::pin(futures::stream::unfold(self, |engine| engine.step()))
    }

    /// Runs the state machine until it has something to yield.
    async fn step(mut self) -> Option<(RawItem, Engine)> {
        loop {
            match std::mem::replace(&mut self.state, State::Done) {
                State::Done => return None,
                State::Listing {
                    reason,
                    next,
                    pinned,
                    mut page_size,
                    yielded,
                } => {
                    // Boxed, like the open and the wait below: the step future is rebuilt
                    // for every item the stream yields, so it stays small.
                    let page = Box::pin(self.registry.range_page(
                        &next,
                        &self.range.end,
                        pinned,
                        &mut page_size,
                    ))
                    .await;
                    let page = match page {
                        Ok(page) => page,
                        Err(e) => {
                            let end = self.list_failed(reason, pinned, &e);
                            if let Some(item) = end {
                                return Some((item, self));
                            }
                            if yielded {
                                return Some((RawItem::ListFailed, self));
                            }
                            continue;
                        }
                    };
                    self.metrics.set_connected();
                    if let Some(rewind) = self.rewound(page.revision, page.cluster_id) {
                        self.rewind(&rewind);
                        if yielded {
                            return Some((RawItem::ListFailed, self));
                        }
                        continue;
                    }
                    let pinned = if pinned == 0 { page.revision } else { pinned };
                    let watched = self.range.watched_key.as_deref().map(str::as_bytes);
                    let kvs: Vec<RawEvent> = page
                        .kvs
                        .iter()
                        .filter(|kv| Some(kv.key()) != watched)
                        .map(RawEvent::from_kv)
                        .collect();
                    self.state = match page.next_start() {
                        Some(next) => State::Listing {
                            reason,
                            next,
                            pinned,
                            page_size,
                            yielded: yielded || !kvs.is_empty(),
                        },
                        None => State::Listed {
                            reason,
                            revision: pinned,
                        },
                    };
                    if !kvs.is_empty() {
                        return Some((RawItem::Page { kvs }, self));
                    }
                }
                State::Listed { reason, revision } => {
                    if reason != ListReason::StateAt {
                        self.metrics.relists.fetch_add(1, Ordering::Relaxed);
                    }
                    // Only a rewind moves the revision backwards (said so when found).
                    self.revision = revision;
                    self.metrics.observe_revision(revision);
                    self.state = State::Opening { resumed: None };
                    return Some((RawItem::Listed { reason, revision }, self));
                }
                State::Opening { resumed } => {
                    if let Some(reason) = resumed {
                        self.metrics.restarts.fetch_add(1, Ordering::Relaxed);
                        self.state = State::Opening { resumed: None };
                        let from = self.revision;
                        return Some((RawItem::Resumed { from, reason }, self));
                    }
                    match Box::pin(self.open()).await {
                        Ok(stream) => {
                            self.state = State::Watching {
                                stream: Box::new(stream),
                                opened_at: Instant::now(),
                            }
                        }
                        Err(failure) => {
                            self.last_healthy = Duration::ZERO;
                            if let Some(item) = self.fail(failure) {
                                return Some((item, self));
                            }
                        }
                    }
                }
                State::Watching {
                    mut stream,
                    opened_at,
                } => match self.read_or_asked(&mut stream).await {
                    Asked::Progress => {
                        if let Err(e) = stream.request_progress().await {
                            tracing::debug!(key = %self.range.start, "request watch progress: {e}");
                        }
                        self.state = State::Watching { stream, opened_at };
                    }
                    Asked::Read(None) => self.state = State::Watching { stream, opened_at },
                    Asked::Read(Some(Read::Created {
                        revision,
                        cluster_id,
                    })) => {
                        self.metrics.set_connected();
                        if let Some(rewind) = self.rewound(revision, cluster_id) {
                            self.rewind(&rewind);
                            continue;
                        }
                        self.state = State::Watching { stream, opened_at };
                    }
                    Asked::Read(Some(Read::Progress {
                        revision,
                        cluster_id,
                    })) => {
                        if let Some(rewind) = self.rewound(revision, cluster_id) {
                            self.rewind(&rewind);
                            continue;
                        }
                        self.state = State::Watching { stream, opened_at };
                        if revision > self.revision {
                            self.revision = revision;
                            self.metrics.observe_revision(revision);
                            return Some((RawItem::Progress(revision), self));
                        }
                    }
                    Asked::Read(Some(Read::Events { events, cluster_id })) => {
                        if let Some(rewind) = self.rewound(i64::MAX, cluster_id) {
                            self.rewind(&rewind);
                            continue;
                        }
                        self.state = State::Watching { stream, opened_at };
                        let highest = events.iter().map(|e| e.mod_revision).max().unwrap_or(0);
                        self.revision = self.revision.max(highest);
                        self.metrics.observe_revision(highest);
                        let watched = self.range.watched_key.as_deref();
                        let mut events: Vec<RawEvent> = events
                            .into_iter()
                            .filter(|e| Some(e.key.as_str()) != watched)
                            .collect();
                        if self.prev_kv {
                            fill_missing_prev(&self.registry, &mut events).await;
                        }
                        return Some((RawItem::Events(events), self));
                    }
                    Asked::Read(Some(Read::End(failure))) => {
                        self.last_healthy = opened_at.elapsed();
                        if let Some(item) = self.fail(failure) {
                            return Some((item, self));
                        }
                    }
                },
                State::Waiting(failure) => {
                    Box::pin(self.wait(&failure)).await;
                    self.state = match failure.relist {
                        Some(ListReason::StateAt) => {
                            self.listing(ListReason::StateAt, self.revision)
                        }
                        Some(reason) => self.listing(reason, 0),
                        None => State::Opening {
                            resumed: Some(failure.reason),
                        },
                    };
                }
            }
        }
    }

    /// Handles a failed list page: the caller's start revision compacted ends the watch
    /// (a 410 for the caller, whose state cannot be diffed any more); otherwise it ends
    /// (one-shot) or waits and lists again.
    fn list_failed(
        &mut self,
        reason: ListReason,
        pinned: i64,
        e: &StorageError,
    ) -> Option<RawItem> {
        if reason == ListReason::StateAt && e.is_compacted() {
            self.state = State::Done;
            return Some(RawItem::Ended(Status::gone(format!(
                "resourceVersion too old: revision {pinned} of {} has been compacted; list again (resourceVersion \"\" or 0)",
                self.range.start
            ))));
        }
        if !self.resume {
            self.metrics
                .set_disconnected(&self.range.start, &e.to_string());
            self.state = State::Done;
            return Some(RawItem::Ended(status_of(e)));
        }
        // A list that fails is retried as a list: a StateAt list at the caller's revision
        // again, any other at a fresh revision. (A list error does not tell a dropped
        // connection from a refusal; the wait probes etcd to tell.)
        let failure = Failure {
            reason: format!("list {}: {e}", self.range.start),
            disconnected: false,
            relist: Some(reason),
        };
        self.fail(failure)
    }

    /// Records a failure: ends a one-shot watch, else waits before the next attempt.
    fn fail(&mut self, failure: Failure) -> Option<RawItem> {
        self.metrics
            .set_disconnected(&self.range.start, &failure.reason);
        if !self.resume {
            self.state = State::Done;
            let status = match failure.relist {
                Some(ListReason::Compacted) => Status::gone(failure.reason),
                _ => Status::internal(failure.reason),
            };
            return Some(RawItem::Ended(status));
        }
        if failure.relist == Some(ListReason::Compacted) {
            tracing::debug!(key = %self.range.start, reason = %failure.reason, "watch revision compacted; listing again");
        } else {
            tracing::debug!(key = %self.range.start, reason = %failure.reason, "watch ended; resuming");
        }
        self.state = State::Waiting(failure);
        None
    }

    /// Whether an etcd answer at `revision` from `cluster_id` shows a rewound or replaced
    /// store; the explanation if so.
    fn rewound(&mut self, revision: i64, cluster_id: u64) -> Option<String> {
        match self.cluster_id {
            None if cluster_id != 0 => self.cluster_id = Some(cluster_id),
            Some(known) if cluster_id != 0 && known != cluster_id => {
                self.cluster_id = Some(cluster_id);
                return Some(format!(
                    "etcd's cluster changed (id {known:x} → {cluster_id:x})"
                ));
            }
            _ => {}
        }
        (revision < self.revision).then(|| {
            format!(
                "etcd's revision went backwards ({} → {revision}): the store was restored from a snapshot or replaced",
                self.revision
            )
        })
    }

    /// Lists from scratch after a rewind, saying so.
    fn rewind(&mut self, why: &str) {
        self.metrics.rewinds.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(key = %self.range.start, "{why}; listing again from scratch");
        // The old revisions mean nothing in the new history: start over from the list.
        self.revision = 0;
        self.metrics.last_revision.store(0, Ordering::Relaxed);
        self.state = self.listing(ListReason::Rewound, 0);
    }

    async fn wait(&mut self, failure: &Failure) {
        let key = &self.range.start;
        if failure.disconnected {
            if self.last_healthy >= MAX_RECONNECT_DELAY {
                self.short_lived = 0;
            } else {
                self.short_lived = self.short_lived.saturating_add(1);
            }
            let delay = reconnect_delay(self.short_lived);
            tracing::debug!(%key, ?delay, "connection lost; re-opening once etcd answers");
            wait_until_answering(&self.registry, key, delay).await;
        } else {
            let delay = self.backoff.delay(self.last_healthy);
            tracing::debug!(%key, ?delay, "waiting before re-opening watch");
            wait_before_reopen(&self.registry, key, delay).await;
        }
    }

    /// Opens an etcd watch on the range after the reported revision.
    async fn open(&mut self) -> Result<etcd_client::WatchStream, Failure> {
        let key = &self.range.start;
        let mut options = WatchOptions::new()
            .with_range(self.range.end.clone())
            .with_start_revision(self.revision + 1)
            .with_progress_notify();
        if self.prev_kv {
            options = options.with_prev_key();
        }
        let opened = tokio::time::timeout(
            self.open_timeout,
            self.watch_client.watch(key.as_str(), Some(options)),
        )
        .await;
        match opened {
            Ok(Ok(stream)) => Ok(stream),
            Ok(Err(e)) => Err(Failure {
                reason: format!("open watch on {key}: {}", registry::describe_etcd_error(&e)),
                disconnected: is_disconnect(&e),
                relist: None,
            }),
            Err(_) => Err(Failure {
                reason: format!(
                    "open watch on {key}: etcd did not answer within {}",
                    humantime::format_duration(self.open_timeout)
                ),
                disconnected: true,
                relist: None,
            }),
        }
    }

    /// [`Engine::read_or_stable`], or [`Asked::Progress`] when a consumer asked for
    /// progress first.
    async fn read_or_asked(&self, stream: &mut etcd_client::WatchStream) -> Asked {
        let Some(requests) = self.progress_requests.clone() else {
            return Asked::Read(self.read_or_stable(stream).await);
        };
        // Both are cancel-safe: `read` awaits the stream's next message, `notified` a permit.
        tokio::select! {
            read = self.read_or_stable(stream) => Asked::Read(read),
            () = requests.notified() => Asked::Progress,
        }
    }

    /// Reads one response of an open watch; `None` when, first, a looping watch's
    /// connection has lived long enough to count as stable again (said so).
    async fn read_or_stable(&self, stream: &mut etcd_client::WatchStream) -> Option<Read> {
        let Some(stable_at) = self.metrics.stable_at() else {
            return Some(self.read(stream).await);
        };
        // `read` only awaits the stream's next message, which is cancel-safe.
        let deadline = tokio::time::Instant::from_std(stable_at);
        match tokio::time::timeout_at(deadline, self.read(stream)).await {
            Ok(read) => Some(read),
            Err(_) => {
                self.metrics.check_stable(&self.range.start);
                None
            }
        }
    }

    /// Reads one response of an open watch.
    async fn read(&self, stream: &mut etcd_client::WatchStream) -> Read {
        let key = &self.range.start;
        let response = match stream.message().await {
            Ok(Some(response)) => response,
            Ok(None) => {
                return Read::End(Failure {
                    reason: format!("watch on {key} closed by etcd"),
                    disconnected: true,
                    relist: None,
                })
            }
            Err(e) => {
                return Read::End(Failure {
                    reason: format!("watch on {key}: {}", registry::describe_etcd_error(&e)),
                    disconnected: is_disconnect(&e),
                    relist: None,
                })
            }
        };
        let (revision, cluster_id) = response
            .header()
            .map_or((0, 0), |h| (h.revision(), h.cluster_id()));
        if response.canceled() {
            let compacted = response.compact_revision();
            return Read::End(if compacted > 0 {
                Failure {
                    reason: format!(
                        "resourceVersion too old: revision {} of {key} has been compacted (oldest available {compacted})",
                        self.revision + 1
                    ),
                    disconnected: false,
                    relist: Some(ListReason::Compacted),
                }
            } else {
                Failure {
                    reason: format!(
                        "watch on {key} canceled by etcd: {}",
                        response.cancel_reason()
                    ),
                    disconnected: false,
                    relist: None,
                }
            });
        }
        if response.created() {
            // The header of `created` is etcd's current revision (events from the past may
            // still follow), so it only tells whether the store went backwards.
            return Read::Created {
                revision,
                cluster_id,
            };
        }
        let events: Vec<RawEvent> = response
            .events()
            .iter()
            .filter_map(RawEvent::from_etcd)
            .collect();
        if events.is_empty() {
            // A progress notification: every event up to the header revision was sent.
            return Read::Progress {
                revision,
                cluster_id,
            };
        }
        Read::Events { events, cluster_id }
    }
}

/// Reads the previous value of each event that lacks one ([`RawEvent::lacks_prev`]) at
/// the revision before the event, for a watch that asked etcd for previous values.
///
/// etcd 3.4 does not always send them: a watch from a past revision is registered before
/// the request's `prev_kv` is recorded, and the events it is sent in between go without
/// (seen as a DELETED without its object, once in a CI run of
/// `storage::watcher::delete_is_deleted_with_the_previous_object_at_the_delete_revision`).
/// A value that cannot be read (compacted since, or etcd failing) stays missing, as a
/// compacted one does in etcd's own answer.
pub async fn fill_missing_prev(registry: &Registry, events: &mut [RawEvent]) {
    for event in events.iter_mut().filter(|e| e.lacks_prev()) {
        match registry
            .get_raw_at(&event.key, event.mod_revision - 1)
            .await
        {
            Ok(Some(prev)) => event.prev = Some((prev.value, prev.mod_revision)),
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(key = %event.key, revision = event.mod_revision, error = %e, "previous value not read");
            }
        }
    }
}

/// What an open watch got first: a response (or nothing, see `read_or_stable`), or a
/// consumer's request for progress.
enum Asked {
    Read(Option<Read>),
    Progress,
}

/// One read of an open watch.
enum Read {
    Created {
        revision: i64,
        cluster_id: u64,
    },
    /// A progress notification: every event up to `revision` has been sent.
    Progress {
        revision: i64,
        cluster_id: u64,
    },
    Events {
        events: Vec<RawEvent>,
        cluster_id: u64,
    },
    End(Failure),
}

/// Whether an etcd-client error means the connection dropped or etcd did not answer,
/// as opposed to etcd answering with a refusal.
fn is_disconnect(error: &etcd_client::Error) -> bool {
    match error {
        etcd_client::Error::GRpcStatus(status) => matches!(
            status.code(),
            tonic::Code::Unavailable
                | tonic::Code::Cancelled
                | tonic::Code::Unknown
                | tonic::Code::DeadlineExceeded
        ),
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
        _ => false,
    }
}

fn status_of(error: &StorageError) -> Status {
    if error.is_compacted() {
        Status::gone(format!("resourceVersion too old: {error}"))
    } else {
        Status::internal(error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_not_disconnects() {
        let refused = etcd_client::Error::GRpcStatus(tonic::Status::permission_denied("no"));
        assert!(!is_disconnect(&refused));
        let dropped = etcd_client::Error::GRpcStatus(tonic::Status::unavailable("reset"));
        assert!(is_disconnect(&dropped));
    }
}
