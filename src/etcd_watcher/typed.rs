//! Typed watches over the engine: the resumable watch every kcm tool uses, and the 2014
//! one-shot stream (`etcdWatcher`: a reader goroutine, a buffer of 100, an ERROR event
//! and the end on failure).

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::diff::{relist_diff, ListChange};
use super::engine::{BackoffConfig, Engine, EngineConfig, ListReason, RawItem, RawWatch};
use super::event::{Filter, Status, WatchEvent};
use super::translate::{translate, RawEvent, RawInfo, RawKind, Translation};
use super::{WatchMetrics, Watcher, WATCH_BUFFER};
use crate::api::{Object, ObjectMeta, ResourceVersion};

/// What a resumable watch delivers.
#[derive(Clone, Debug, PartialEq)]
pub enum Update<T> {
    /// An Added, Modified or Deleted event (never Error), with the etcd event it came
    /// from when there was one (not for list results).
    Event(WatchEvent<T>, Option<RawInfo>),
    /// The watch was re-opened after revision `from` after `reason`.
    Resumed { from: i64, reason: String },
    /// The watch listed again at `revision` (at start, after compaction, or after etcd's
    /// revision went backwards) and delivered the differences as events.
    Relisted {
        revision: i64,
        added: usize,
        modified: usize,
        deleted: usize,
    },
    /// The watch cannot go on: the caller's start revision has been compacted (410),
    /// or, for a one-shot watch, etcd failed. Nothing follows.
    Error(Status),
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

/// A reflector-style watch that resumes after disconnects and relists after compaction
/// or a rewound store, delivering a gap-free stream of events.
///
/// From `""` it lists first (an Added per object); from a resourceVersion N it first
/// reads the state at N, so that a relist after compaction is diffed against what the
/// caller holds: replaying its events onto etcd's filtered state at N yields etcd's
/// filtered state. A start revision already compacted is [`Update::Error`] with a 410.
///
/// As a [`Stream`] it is cancel-safe: the work in flight lives in the stream, so it can
/// be polled from a `select!` arm.
pub struct ResumableWatch<T> {
    engine: Option<Engine>,
    raw: Option<RawWatch>,
    prefix: String,
    filter: Filter<T>,
    metrics: Arc<WatchMetrics>,
    /// Keep `known` and fix events up against it (resumable), or pass them through as
    /// the 2014 one-shot watch did.
    track: bool,
    /// The last revision delivered or passed.
    revision: Option<i64>,
    /// Every object currently delivered and not deleted, by etcd key: what a relist
    /// diffs against, and the last state for Deleted events without a previous value
    /// (whole, or only its names, as `names_only` says).
    known: HashMap<String, T>,
    /// Keep only each delivered object's names in `known` ([`ResumableWatch::keeping_names`]).
    names_only: bool,
    /// Whether `known` is the whole filtered state (true once a list or the state at the
    /// start revision has been read).
    complete: bool,
    /// The pages of a list in progress.
    listing: Vec<(String, T)>,
    pending: VecDeque<Update<T>>,
    ended: bool,
}

impl<T: Object> ResumableWatch<T> {
    pub(super) fn new(
        watcher: &Watcher,
        config: EngineConfig,
        filter: Filter<T>,
        track: bool,
    ) -> ResumableWatch<T> {
        let metrics = config.metrics.clone();
        ResumableWatch {
            engine: Some(watcher.engine(config)),
            raw: None,
            prefix: watcher.registry().prefix().to_string(),
            filter,
            metrics,
            track,
            revision: None,
            known: HashMap::new(),
            names_only: false,
            complete: false,
            listing: Vec::new(),
            pending: VecDeque::new(),
            ended: false,
        }
    }

    /// Replaces the backoff between re-opens (before the first `next`).
    pub fn with_backoff(mut self, config: BackoffConfig) -> Self {
        if let Some(engine) = &mut self.engine {
            engine.set_backoff(config);
        }
        self
    }

    /// Keeps of each delivered object only its name, namespace, uid and resourceVersion
    /// (before the first `next`), so that a Deleted without a previous value, or of an
    /// object that left the filter, carries those alone: for a consumer that keeps what it
    /// needs of each object itself and knows a deleted one by its key, as a kubelet does.
    /// A watch of many objects then holds each one's empty shape and names (under a
    /// kilobyte for a pod), not the objects.
    pub fn keeping_names(mut self) -> Self {
        self.names_only = true;
        self
    }

    /// What `known` keeps of a delivered object.
    fn kept(&self, object: T) -> T {
        if self.names_only {
            names_of(&object)
        } else {
            object
        }
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

    /// The next update. After [`Update::Error`] the watch is over and this never
    /// returns again; a watch from `""` never ends on its own.
    pub async fn next(&mut self) -> Update<T> {
        match StreamExt::next(self).await {
            Some(update) => update,
            None => std::future::pending().await,
        }
    }

    /// Follows a watch of one object: `check` sees each state it is added or modified
    /// to, until it returns true; resumes and relists pass unnoticed.
    ///
    /// # Errors
    /// `check`'s error, `object has been deleted` (kubectl's words) when it is deleted,
    /// or the watch failing for good.
    pub async fn until(
        &mut self,
        mut check: impl FnMut(&T) -> anyhow::Result<bool>,
    ) -> anyhow::Result<()> {
        loop {
            match self.next().await {
                Update::Event(WatchEvent::Added(object) | WatchEvent::Modified(object), _) => {
                    if check(&object)? {
                        return Ok(());
                    }
                }
                Update::Event(WatchEvent::Deleted(_), _) => {
                    anyhow::bail!("object has been deleted")
                }
                Update::Event(WatchEvent::Error(status), _) | Update::Error(status) => {
                    anyhow::bail!("watch {}: {}", T::RESOURCE, status.message)
                }
                Update::Resumed { .. } | Update::Relisted { .. } => {}
            }
        }
    }

    fn advance(&mut self, revision: i64) {
        if self.revision.is_none_or(|r| revision > r) {
            self.revision = Some(revision);
        }
    }

    /// Turns one engine item into updates.
    fn process(&mut self, item: RawItem) {
        match item {
            RawItem::Page { kvs, .. } => {
                for raw in &kvs {
                    if let Some(object) = self.decode_listed(raw) {
                        self.listing.push((raw.key.clone(), object));
                    }
                }
            }
            RawItem::ListFailed => self.listing.clear(),
            RawItem::Listed { reason, revision } => self.listed(reason, revision),
            RawItem::Events(events) => {
                for raw in events {
                    self.event(raw);
                }
            }
            RawItem::Progress(revision) => self.advance(revision),
            RawItem::Resumed { from, reason } => {
                self.pending.push_back(Update::Resumed { from, reason })
            }
            RawItem::Ended(status) => {
                self.ended = true;
                self.pending.push_back(Update::Error(status));
            }
        }
    }

    fn decode_listed(&self, raw: &RawEvent) -> Option<T> {
        match translate::<T>(&self.prefix, None, self.filter.as_ref(), raw) {
            Translation::Emit(WatchEvent::Added(object) | WatchEvent::Modified(object)) => {
                Some(object)
            }
            Translation::BadKey => {
                self.metrics.skip_key(&raw.key);
                None
            }
            Translation::Undecodable(e) => {
                self.metrics.undecodable(&e);
                None
            }
            _ => None,
        }
    }

    /// A list is complete: seed `known` (the state at the caller's start revision), or
    /// deliver the differences against it.
    fn listed(&mut self, reason: ListReason, revision: i64) {
        let mut listing = std::mem::take(&mut self.listing);
        if reason == ListReason::StateAt {
            self.known = listing
                .into_iter()
                .map(|(key, object)| (key, self.kept(object)))
                .collect();
            self.complete = true;
            self.revision = Some(revision);
            return;
        }
        if !self.track {
            // The 2014 list: an Added per object, oldest revision first.
            listing.sort_by_key(|(_, object)| object.metadata().resource_version);
            self.metrics
                .events
                .fetch_add(listing.len() as u64, Ordering::Relaxed);
            self.pending.extend(
                listing
                    .into_iter()
                    .map(|(_, object)| Update::Event(WatchEvent::Added(object), None)),
            );
            self.revision = Some(revision);
            return;
        }
        // After a rewind equal revisions do not mean equal objects: deliver all again.
        let rewound = reason == ListReason::Rewound;
        let version = |object: &T| object.metadata().resource_version.map(|rv| rv.0);
        let listed: Vec<(&str, Option<i64>, i64)> = listing
            .iter()
            .map(|(key, object)| {
                let v = version(object);
                (key.as_str(), v, v.unwrap_or(0))
            })
            .collect();
        let known = self
            .known
            .iter()
            .map(|(key, object)| (key.as_str(), if rewound { None } else { version(object) }));
        let changes = relist_diff(known, &listed);
        drop(listed);
        let (mut added, mut modified, mut deleted) = (0, 0, 0);
        let mut events = Vec::with_capacity(changes.len());
        for change in changes {
            match change {
                ListChange::Added(i) => {
                    added += 1;
                    events.push(WatchEvent::Added(listing[i].1.clone()));
                }
                ListChange::Modified(i) => {
                    modified += 1;
                    events.push(WatchEvent::Modified(listing[i].1.clone()));
                }
                ListChange::Deleted(key) => {
                    deleted += 1;
                    let mut last = self.known.remove(&key).expect("deleted keys are known");
                    last.metadata_mut().resource_version = Some(ResourceVersion(revision));
                    events.push(WatchEvent::Deleted(last));
                }
            }
        }
        self.known = listing
            .into_iter()
            .map(|(key, object)| (key, self.kept(object)))
            .collect();
        self.complete = true;
        self.revision = Some(revision);
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
    }

    fn event(&mut self, raw: RawEvent) {
        let revision = raw.mod_revision;
        match translate::<T>(&self.prefix, None, self.filter.as_ref(), &raw) {
            Translation::Emit(event) => {
                let info = raw.info();
                if let Some(event) = self.fix_up(event, &info) {
                    self.metrics.events.fetch_add(1, Ordering::Relaxed);
                    self.pending.push_back(Update::Event(event, Some(info)));
                }
            }
            Translation::Nothing => {
                if let Some(event) = self.left_filter(&raw) {
                    self.metrics.events.fetch_add(1, Ordering::Relaxed);
                    self.pending
                        .push_back(Update::Event(event, Some(raw.info())));
                }
            }
            Translation::BadKey => self.metrics.skip_key(&raw.key),
            Translation::Undecodable(e) => self.metrics.undecodable(&e),
        }
        self.advance(revision);
    }

    /// A put whose new value fails the filter, without a previous value to say whether the
    /// old one passed: if this watch delivered the object, it left the filter, and is
    /// Deleted with the last state delivered (stamped with the put's revision), as the
    /// 2014 table does from a previous value.
    fn left_filter(&mut self, raw: &RawEvent) -> Option<WatchEvent<T>> {
        if !self.track || raw.kind != RawKind::Put || raw.prev.is_some() {
            return None;
        }
        let mut last = self.known.remove(&raw.key)?;
        last.metadata_mut().resource_version = Some(ResourceVersion(raw.mod_revision));
        Some(WatchEvent::Deleted(last))
    }

    /// Fixes up a translated event against what has been delivered, so that the stream
    /// stays a faithful replay even without previous values; `None` drops it.
    fn fix_up(&mut self, event: WatchEvent<T>, raw: &RawInfo) -> Option<WatchEvent<T>> {
        if !self.track {
            return Some(event);
        }
        let revision = event.revision().unwrap_or(0);
        let key = raw.key.clone();
        let event = match event {
            // Without a previous value the 2014 table cannot tell Modified from Added;
            // a complete `known` can.
            WatchEvent::Modified(object) if self.complete && !self.known.contains_key(&key) => {
                WatchEvent::Added(object)
            }
            WatchEvent::Deleted(object) => match self.known.remove(&key) {
                // A delete without a previous value carries only the name: deliver the
                // last state delivered instead.
                Some(mut last) if !raw.has_prev => {
                    last.metadata_mut().resource_version = Some(ResourceVersion(revision));
                    WatchEvent::Deleted(last)
                }
                Some(_) => WatchEvent::Deleted(object),
                None if !self.complete => WatchEvent::Deleted(object),
                // A delete of something never delivered (filtered, or a skeleton).
                None => return None,
            },
            other => other,
        };
        if let WatchEvent::Added(o) | WatchEvent::Modified(o) = &event {
            let kept = if self.names_only {
                names_of(o)
            } else {
                o.clone()
            };
            self.known.insert(key, kept);
        }
        Some(event)
    }
}

/// An object of `object`'s kind carrying only its name, namespace, uid and
/// resourceVersion.
fn names_of<T: Object>(object: &T) -> T {
    let meta = object.metadata();
    let mut names = T::default();
    *names.metadata_mut() = ObjectMeta {
        uid: meta.uid.clone(),
        resource_version: meta.resource_version,
        ..ObjectMeta::named(meta.namespace.as_str(), meta.name.as_str())
    };
    names.set_type_meta();
    names
}

impl<T: Object> Stream for ResumableWatch<T> {
    type Item = Update<T>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Update<T>>> {
        let this = &mut *self;
        loop {
            if let Some(update) = this.pending.pop_front() {
                return Poll::Ready(Some(update));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            if this.raw.is_none() {
                let engine = this.engine.take().expect("engine until the stream starts");
                this.raw = Some(engine.into_stream());
            }
            let raw = this.raw.as_mut().expect("set above");
            match raw.poll_next_unpin(cx) {
                Poll::Ready(Some(item)) => this.process(item),
                Poll::Ready(None) => this.ended = true,
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl<T> Unpin for ResumableWatch<T> {}

// ---------------------------------------------------------------------------------------
// The 2014 one-shot stream

/// A one-shot watch: typed events until an Error, `stop()` or drop.
///
/// One reader task per stream feeds a bounded buffer of [`WATCH_BUFFER`] events (a slower
/// consumer slows the reader instead of growing memory); a failure is delivered as
/// `WatchEvent::Error` (410 when the start revision was compacted) and ends the stream,
/// as in 2014. `stop()` is idempotent and ends the stream without an Error; dropping the
/// stream stops its reader task too.
pub struct WatchStream<T> {
    rx: mpsc::Receiver<(WatchEvent<T>, Option<RawInfo>)>,
    cancel: CancellationToken,
    alive: Weak<()>,
    stopped: bool,
}

impl<T: Object> WatchStream<T> {
    pub(super) fn spawn(mut watch: ResumableWatch<T>) -> WatchStream<T> {
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        let cancel = CancellationToken::new();
        let alive = Arc::new(());
        let task_cancel = cancel.clone();
        let task_alive = alive.clone();
        // The task is owned by the stream: dropping or stopping the stream cancels it,
        // and it holds `alive` until it has returned.
        tokio::spawn(async move {
            let _alive = task_alive;
            let read = async {
                while let Some(update) = StreamExt::next(&mut watch).await {
                    let item = match update {
                        Update::Event(event, raw) => (event, raw),
                        Update::Error(status) => (WatchEvent::Error(status), None),
                        Update::Resumed { .. } | Update::Relisted { .. } => continue,
                    };
                    if tx.send(item).await.is_err() {
                        return;
                    }
                }
            };
            tokio::select! {
                biased;
                _ = task_cancel.cancelled() => {}
                _ = read => {}
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

    fn poll_item(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<(WatchEvent<T>, Option<RawInfo>)>> {
        if self.stopped {
            return Poll::Ready(None);
        }
        self.rx.poll_recv(cx)
    }

    /// The next event with the etcd event it came from (`None` for events of the
    /// initial list and for errors).
    pub async fn next_with_raw(&mut self) -> Option<(WatchEvent<T>, Option<RawInfo>)> {
        futures::future::poll_fn(|cx| self.poll_item(cx)).await
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
        self.poll_item(cx).map(|item| item.map(|(event, _)| event))
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
