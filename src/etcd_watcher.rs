//! Typed, filtered watches on etcd v3: the 2014 one-shot watch, and the resumable watch
//! and list-and-watch engine every controller in kcm uses.
//!
//! Go → Rust, from 2014's `pkg/tools/etcd_tools_watch.go` (and the `ParseWatchResourceVersion`
//! of `pkg/registry/etcd/etcd.go`):
//!
//! | 2014 | kcm |
//! |---|---|
//! | `EtcdHelper.WatchList(key, rv, filter)` | [`Watcher::watch_list`] |
//! | `EtcdHelper.Watch(key, rv)` | [`Watcher::watch`] |
//! | `etcdWatcher` (`ResultChan`, `Stop`) | [`WatchStream`] (a `Stream`; [`WatchStream::stop`], or drop) |
//! | `etcdWatch` + `etcdGetInitialWatchState` (GET, then watch from its index + 1) | `engine` (`Engine::step`: `Listing`, `Listed`, `Opening`, `Watching`) |
//! | `translate` goroutine, `sendResult` | `typed` (the consumer of the engine's raw items) calling [`translate`] |
//! | `sendAdd`, `sendModify`, `sendDelete` | the three arms of [`translate`] (`translate.rs`) |
//! | `exceptKey` (skip the directory's own key) | the `watched_key` argument of [`translate`] |
//! | `FilterFunc`, `Everything` | [`Filter`], [`everything`], [`selector_filter`] |
//! | `ParseWatchResourceVersion` (+1) | [`parse_watch_resource_version`] |
//! | `watch.Event`, `api.Status` | [`WatchEvent`], [`Status`] |
//! | (none: a client listed again by hand) | [`ResumableWatch`], [`relist_diff`] |
//!
//! etcd v2 actions become v3 events: a PUT whose `create_revision == mod_revision` is
//! 2014's `create`, any other PUT is `set`/`compareAndSwap` (translated with the same filter
//! transition table on the previous value), a DELETE is `delete`. Where kcm departs from
//! 2014 (resume, compaction, buffering, initial state, ...) is the `watch:` rows of
//! docs/departures.md; behaviours 1-23 of docs/2014.md are the 2014 rules.
//!
//! Layout:
//! - [`event`](WatchEvent): `watch.Event`, `api.Status`, filters;
//! - `translate`: a pure function from one [`RawEvent`] to at most one [`WatchEvent`]; all
//!   the 2014 rules live there and are table-tested without etcd;
//! - `engine`: the one list-and-watch state machine (list at R page by page, watch from
//!   R + 1, resume, relist after compaction or a rewound store), a cancel-safe stream of
//!   raw items. Everything else is built on it;
//! - `diff`: the relist diff, one pure function;
//! - `typed`: [`ResumableWatch`] (engine + translation + the diff against what was
//!   delivered) and the 2014 one-shot [`WatchStream`] (the same, without resume).
//!   The informers (`crate::informer`) are the third consumer of the engine.
//!
//! Invariants: every object delivered carries `metadata.resourceVersion` (a Deleted
//! object carries the revision of the delete); revisions delivered by one stream never
//! go backwards (except after a logged rewind of etcd itself); no event at or below the
//! starting revision is delivered twice; a key deeper than `{kind}/{namespace}/{name}`
//! is skipped, never shown as another object.

mod diff;
mod engine;
mod event;
mod translate;
mod typed;

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, WatchClient};

pub use diff::{relist_diff, ListChange};
pub use engine::{
    fill_missing_prev, BackoffConfig, LoopReport, WatchMetrics, LOOP_RESTARTS, SHORT_LIVED,
};
pub(crate) use engine::{Engine, EngineConfig, Range, Start};
pub use engine::{ListReason, RawItem, RawWatch};
pub use event::{everything, selector_filter, Filter, Status, WatchEvent};
pub use translate::{
    parse_watch_resource_version, translate, RawEvent, RawInfo, RawKind, Translation,
};
pub use typed::{ResumableWatch, TaskProbe, Update, WatchStream};

use crate::api::Object;
use crate::registry::{self, Registry};

/// Events buffered between the etcd reader and the consumer (the apiserver's 100). A
/// slower consumer slows the reader instead of growing memory.
pub const WATCH_BUFFER: usize = 100;

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

    /// The same watcher listing `page_size` objects per range (the registry's page size).
    pub fn with_page_size(mut self, page_size: i64) -> Watcher {
        self.registry = self.registry.with_page_size(page_size);
        self
    }

    /// The registry whose prefix and KV client this watcher uses.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Whether etcd answers a watch request on this watcher's connection now: one watch
    /// of the prefix opened (etcd confirms it) and cancelled, within the open timeout.
    /// 2014's one-shot `Watch` failed at once when its server did not answer;
    /// `replication_2014` asks this before each of its watches.
    ///
    /// # Errors
    /// When etcd refuses or does not confirm the watch within the open timeout.
    pub async fn reachable(&self) -> anyhow::Result<()> {
        let mut client = self.watch_client.clone();
        let prefix = self.registry.prefix().to_string();
        let open = async {
            let mut stream = client
                .watch(
                    prefix.as_str(),
                    Some(etcd_client::WatchOptions::new().with_prefix()),
                )
                .await?;
            // Dropping the stream ends the watch.
            stream.message().await
        };
        match tokio::time::timeout(self.open_timeout, open).await {
            Err(_) => anyhow::bail!(
                "etcd did not confirm a watch of {prefix} within {:?}",
                self.open_timeout
            ),
            Ok(Err(e)) => anyhow::bail!("open a watch of {prefix}: {e}"),
            Ok(Ok(Some(response))) if response.created() => Ok(()),
            Ok(Ok(_)) => anyhow::bail!("etcd did not confirm a watch of {prefix}"),
        }
    }

    /// A list-and-watch engine over `config`'s range.
    pub(crate) fn engine(&self, config: EngineConfig) -> Engine {
        Engine::new(
            self.watch_client.clone(),
            self.registry.clone(),
            self.open_timeout,
            config,
        )
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
        let range = Range::list::<T>(self.registry.prefix(), namespace);
        Ok(self.one_shot(range, start, filter))
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
        let range = Range::object::<T>(self.registry.prefix(), namespace, name);
        Ok(self.one_shot(range, start, everything()))
    }

    fn one_shot<T: Object>(
        &self,
        range: Range,
        after: Option<i64>,
        filter: Filter<T>,
    ) -> WatchStream<T> {
        let config = EngineConfig {
            range,
            start: after.map_or(Start::List, Start::After),
            resume: false,
            prev_kv: true,
            backoff: BackoffConfig::default(),
            metrics: Arc::default(),
        };
        WatchStream::spawn(ResumableWatch::new(self, config, filter, false))
    }

    /// A resumable watch of kind `T` in one namespace (or all), from `resource_version`
    /// (`""` lists first; `N` reads the state at N first, see [`ResumableWatch`]).
    ///
    /// # Errors
    /// A non-numeric `resource_version`.
    pub fn resumable_list<T: Object>(
        &self,
        namespace: Option<&str>,
        resource_version: &str,
        filter: Filter<T>,
    ) -> anyhow::Result<ResumableWatch<T>> {
        self.resumable_list_with(namespace, resource_version, filter, true)
    }

    /// [`Watcher::resumable_list`] without asking etcd for previous values. What they
    /// would have told comes from the objects this watch delivered (which it keeps anyway):
    /// a Deleted carries the last state delivered, stamped with the delete's revision; a
    /// put whose new value fails `filter` is a Deleted of the object when it was
    /// delivered (it left the filter), nothing otherwise.
    ///
    /// etcd reads the previous value from its store for each event and each watch that
    /// asks for one, so every watch of all pods that asks adds a read in etcd to every pod
    /// write.
    ///
    /// # Errors
    /// A non-numeric `resource_version`.
    pub fn resumable_list_without_previous<T: Object>(
        &self,
        namespace: Option<&str>,
        resource_version: &str,
        filter: Filter<T>,
    ) -> anyhow::Result<ResumableWatch<T>> {
        self.resumable_list_with(namespace, resource_version, filter, false)
    }

    fn resumable_list_with<T: Object>(
        &self,
        namespace: Option<&str>,
        resource_version: &str,
        filter: Filter<T>,
        prev_kv: bool,
    ) -> anyhow::Result<ResumableWatch<T>> {
        let start = parse_watch_resource_version(resource_version)?;
        let range = Range::list::<T>(self.registry.prefix(), namespace);
        Ok(self.resumable_with(range, start, filter, prev_kv))
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
        let range = Range::object::<T>(self.registry.prefix(), namespace, name);
        Ok(self.resumable(range, start, everything()))
    }

    fn resumable<T: Object>(
        &self,
        range: Range,
        start: Option<i64>,
        filter: Filter<T>,
    ) -> ResumableWatch<T> {
        self.resumable_with(range, start, filter, true)
    }

    /// A resumable watch; `prev_kv` asks etcd for each event's previous value, which a
    /// filter's transitions and a Deleted's object come from.
    fn resumable_with<T: Object>(
        &self,
        range: Range,
        start: Option<i64>,
        filter: Filter<T>,
        prev_kv: bool,
    ) -> ResumableWatch<T> {
        let config = EngineConfig {
            range,
            start: start.map_or(Start::List, Start::StateAt),
            resume: true,
            prev_kv,
            backoff: BackoffConfig::default(),
            metrics: Arc::default(),
        };
        ResumableWatch::new(self, config, filter, true)
    }
}
