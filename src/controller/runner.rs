//! The controller runner: what every controller repeats, written once. client-go's
//! pattern (`Run(workers, stopCh)`: `WaitForCacheSync`, N `worker`s draining a rate
//! limited queue, `processNextWorkItem`, `HandleCrash`) in the shape of kube-runtime's
//! `Controller`: a controller says which informer changes map to which keys, which keys
//! a resync queues, and how to sync one key; the runner does the rest.
//!
//! The runner's loop only classifies and queues: it waits on shutdown, the resync tick
//! and the controller's sources, and turns each into keys for the queue. No IO runs in
//! the loop; syncs run on the workers.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::{self, BoxStream, SelectAll};
use futures::{FutureExt as _, Stream, StreamExt as _};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::Instrument as _;

use crate::registry::StorageError;

use super::warn_if_stale;
use crate::api::Object;
use crate::etcd_watcher::WatchMetrics;
use crate::informer::{Cached, Delta, Informer, ObjectKey};
use crate::status::Metrics;
use crate::workqueue::WorkQueue;

/// Syncs one object `namespace/name` (2014's injectable `syncHandler`, so loops can be
/// tested without etcd) and says what should happen to its key next. An error retries the
/// key with its backoff.
pub type SyncHandler<K = ObjectKey> =
    Arc<dyn Fn(K) -> Pin<Box<dyn Future<Output = anyhow::Result<Action>> + Send>> + Send + Sync>;

/// What a runner queues: a namespaced object's [`ObjectKey`] for most controllers, a node
/// name, or a collector's resource-qualified key.
pub trait Key:
    Clone + Eq + std::hash::Hash + Ord + std::fmt::Display + Send + Sync + 'static
{
}

impl<K: Clone + Eq + std::hash::Hash + Ord + std::fmt::Display + Send + Sync + 'static> Key for K {}

/// What a successful sync asks of the runner (kube-runtime's `Action`): nothing until the
/// object changes again, or a sync of its key after a delay (client-go's `AddAfter`), for
/// work that becomes due later (a pod's minimum ready time, a progress deadline, a node's
/// grace period). The runner queues it with [`WorkQueue::add_after`]: no task waits for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing more to do.
    Done,
    /// Sync the key again after this long (sooner if it changes).
    RequeueAfter(Duration),
}

impl Action {
    /// [`Action::RequeueAfter`] `delay` when there is one, else [`Action::Done`].
    pub fn requeue_after(delay: Option<Duration>) -> Action {
        delay.map_or(Action::Done, Action::RequeueAfter)
    }
}

/// The [`SyncHandler`] that runs `sync` on `inner` for each key: how a controller hands
/// its sync function to a runner.
pub fn sync_handler<K, T, F, Fut>(inner: Arc<T>, sync: F) -> SyncHandler<K>
where
    K: Key,
    T: Send + Sync + 'static,
    F: Fn(Arc<T>, K) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<Action>> + Send + 'static,
{
    let sync = Arc::new(sync);
    Arc::new(move |key: K| {
        let (inner, sync) = (inner.clone(), sync.clone());
        Box::pin(async move { sync(inner, key).await })
    })
}

/// How a runner runs its controller.
#[derive(Clone, Debug)]
pub struct RunnerConfig {
    /// Keys synced in parallel (`--concurrent-*-syncs`).
    pub workers: usize,
    /// Every key the resync returns is queued once per period; the first resync comes
    /// one period after the caches synced (their first list queued everything).
    pub sync_period: Duration,
    /// How long shutdown waits for in-flight syncs.
    pub shutdown_timeout: Duration,
}

impl RunnerConfig {
    /// `workers` workers, a resync every `sync_period`, `shutdown_timeout` to drain.
    pub fn new(workers: usize, sync_period: Duration, shutdown_timeout: Duration) -> Self {
        RunnerConfig {
            workers,
            sync_period,
            shutdown_timeout,
        }
    }
}

/// Runs one controller: its queue, workers, resync tick, metrics and drain.
pub struct Runner<K = ObjectKey> {
    name: &'static str,
    config: RunnerConfig,
    metrics: Arc<Metrics>,
    sources: SelectAll<BoxStream<'static, Vec<K>>>,
    /// Resolve once the informers the controller reads have listed.
    synced: Vec<BoxFuture<'static, ()>>,
    /// The watches of those informers, for the stale-cache warning at resync.
    watches: Vec<(&'static str, Arc<WatchMetrics>)>,
    resync: Option<Box<dyn FnMut() -> Vec<K> + Send>>,
}

impl<K: Key> Runner<K> {
    /// A runner for the controller `name` (its label in metrics and logs).
    pub fn new(name: &'static str, config: RunnerConfig, metrics: Arc<Metrics>) -> Runner<K> {
        Runner {
            name,
            config,
            metrics,
            sources: SelectAll::new(),
            synced: Vec::new(),
            watches: Vec::new(),
            resync: None,
        }
    }

    /// Queues the keys `map` returns for each change of `informer`, and waits for it to
    /// list before the first sync. Subscribes at once: call it before the informer
    /// starts, so its first list reaches the controller.
    pub fn watches<I: Cached>(
        mut self,
        informer: &Informer<I>,
        map: impl FnMut(&Delta<I>) -> Vec<K> + Send + 'static,
    ) -> Runner<K> {
        let synced = informer.clone();
        self.synced
            .push(Box::pin(async move { synced.wait_synced().await }));
        self.watches
            .push((<I::Object as Object>::RESOURCE, informer.metrics()));
        self.on(informer.subscribe(), map)
    }

    /// Queues the keys `map` returns for each item received on `changes` (the unit tests
    /// feed channels).
    pub fn on<T: Send + 'static>(
        self,
        changes: mpsc::Receiver<T>,
        mut map: impl FnMut(&T) -> Vec<K> + Send + 'static,
    ) -> Runner<K> {
        let items = stream::unfold(changes, |mut changes| async move {
            changes.recv().await.map(|item| (item, changes))
        });
        self.source(items.map(move |item| map(&item)))
    }

    /// Queues the keys `keys` yields. The stream is polled by the runner's loop: it may
    /// read (it is cancel-safe by being a stream), but should not block for long.
    pub fn source(mut self, keys: impl Stream<Item = Vec<K>> + Send + 'static) -> Runner<K> {
        self.sources.push(keys.boxed());
        self
    }

    /// Every sync period, queues the keys `keys` returns (read from caches: no IO).
    pub fn resync(mut self, keys: impl FnMut() -> Vec<K> + Send + 'static) -> Runner<K> {
        self.resync = Some(Box::new(keys));
        self
    }

    /// Runs until `shutdown` resolves: waits for the caches to list (client-go's
    /// `WaitForCacheSync`: no sync reads a cache that has not listed), starts the
    /// workers, and queues keys from the sources and the resync.
    ///
    /// Shutdown contract: after `shutdown` resolves no new sync starts, the sources are
    /// dropped (unsubscribing from shared informers), in-flight syncs get up to
    /// `shutdown_timeout` to finish, then `run` returns.
    ///
    /// # Errors
    /// Never at present; kept fallible for setup steps to come.
    pub async fn run(
        self,
        sync: SyncHandler<K>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        let Runner {
            name,
            config,
            metrics,
            mut sources,
            synced,
            watches,
            mut resync,
        } = self;
        tokio::pin!(shutdown);
        tokio::select! {
            biased;
            _ = &mut shutdown => return Ok(()),
            _ = futures::future::join_all(synced) => {}
        }
        let queue = Arc::new(WorkQueue::<K>::new());
        {
            let queue = queue.clone();
            metrics.register_queue(name, move || queue.len());
        }
        let mut workers = JoinSet::new();
        for _ in 0..config.workers.max(1) {
            workers.spawn(worker(name, queue.clone(), sync.clone(), metrics.clone()));
        }
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::now() + config.sync_period,
            config.sync_period,
        );
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let trigger = tokio::select! {
                biased;
                _ = &mut shutdown => Trigger::Shutdown,
                _ = tick.tick() => Trigger::Resync,
                Some(keys) = sources.next() => Trigger::Keys(keys),
            };
            let keys = match trigger {
                Trigger::Shutdown => break,
                Trigger::Resync => {
                    for (resource, watch) in &watches {
                        warn_if_stale(name, resource, watch, config.sync_period);
                    }
                    let keys = resync.as_mut().map(|keys| keys()).unwrap_or_default();
                    tracing::debug!(controller = name, keys = keys.len(), "resync");
                    keys
                }
                Trigger::Keys(keys) => keys,
            };
            for key in keys {
                queue.add(key);
            }
        }
        tracing::info!(controller = name, "shutting down");
        // Unsubscribe first, so shared informers are not held back by this controller.
        drop(sources);
        queue.shut_down();
        let drained = tokio::time::timeout(config.shutdown_timeout, async {
            while workers.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                controller = name,
                timeout = ?config.shutdown_timeout,
                "in-flight syncs did not finish in time; abandoning them"
            );
            workers.shutdown().await;
        }
        Ok(())
    }
}

/// Whether a key's `failures`-th consecutive failure is logged at warn: from the 4th on
/// (one or two conflicts are routine under compare-and-swap, four in a row are not), then
/// at every doubling, so a key that never succeeds stays visible without flooding the log
/// (its backoff doubles too).
fn is_persistent(failures: u32) -> bool {
    failures >= 4 && failures.is_power_of_two()
}

/// Whether `error` comes from a state the process reports once, when it starts and when
/// it ends, rather than per key: etcd's NOSPACE alarm (see `status`). Warning about each
/// key refused meanwhile would repeat that one cause thousands of times.
fn reported_elsewhere(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<StorageError>()
            .is_some_and(StorageError::is_no_space)
    })
}

/// What woke the runner's loop.
enum Trigger<K> {
    Shutdown,
    Resync,
    Keys(Vec<K>),
}

/// One worker of `controller`: takes keys from the queue until it shuts down, syncs
/// each, and re-queues failures with the key's backoff.
async fn worker<K: Key>(
    controller: &'static str,
    queue: Arc<WorkQueue<K>>,
    handler: SyncHandler<K>,
    metrics: Arc<Metrics>,
) {
    while let Some(key) = queue.get().await {
        let started = Instant::now();
        // Like 2014's util.HandleCrash: a panicking sync is logged and retried with
        // backoff; it does not take the worker (or the process) down.
        let result = AssertUnwindSafe(handler(key.clone()))
            .catch_unwind()
            .instrument(tracing::info_span!("sync", controller, key = %key))
            .await
            .unwrap_or_else(|panic| {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_string());
                tracing::error!(controller, %key, %message, "sync panicked");
                Err(anyhow::anyhow!("sync panicked: {message}"))
            });
        metrics
            .sync_duration
            .get_or_create(&vec![("controller", controller)])
            .observe(started.elapsed().as_secs_f64());
        let outcome = if result.is_ok() { "ok" } else { "error" };
        metrics
            .syncs
            .get_or_create(&vec![("controller", controller), ("result", outcome)])
            .inc();
        match result {
            Ok(Action::Done) => queue.forget(&key),
            Ok(Action::RequeueAfter(delay)) => {
                queue.forget(&key);
                queue.add_after(key.clone(), delay);
            }
            Err(e) => {
                let delay = queue.add_rate_limited(key.clone());
                let failures = queue.failures(&key);
                let error = format!("{e:#}");
                if is_persistent(failures) && !reported_elsewhere(&e) {
                    tracing::warn!(controller, %key, %error, failures, ?delay, "sync keeps failing; retrying with backoff");
                } else {
                    tracing::debug!(controller, %key, %error, failures, ?delay, "sync failed; retrying");
                }
            }
        }
        queue.done(&key);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tokio_util::sync::CancellationToken;

    use super::*;

    /// Runs a runner over one channel of keys with `handler`; returns the sender and what
    /// stops it.
    fn run_on_channel(
        handler: SyncHandler<String>,
    ) -> (
        mpsc::Sender<String>,
        CancellationToken,
        tokio::task::JoinHandle<()>,
    ) {
        let (keys, rx) = mpsc::channel(8);
        let config = RunnerConfig {
            workers: 1,
            sync_period: Duration::from_secs(3600),
            shutdown_timeout: Duration::from_secs(1),
        };
        let runner = Runner::new("test", config, Arc::new(Metrics::new()))
            .on(rx, |key: &String| vec![key.clone()]);
        let stop = CancellationToken::new();
        let shutdown = stop.clone().cancelled_owned();
        let task = tokio::spawn(async move {
            runner.run(handler, shutdown).await.unwrap();
        });
        (keys, stop, task)
    }

    #[tokio::test(start_paused = true)]
    async fn a_sync_that_asks_to_be_requeued_runs_again_after_its_delay_and_only_then() {
        let synced: Arc<Mutex<Vec<tokio::time::Instant>>> = Arc::default();
        let handler: SyncHandler<String> = {
            let synced = synced.clone();
            Arc::new(move |_key: String| {
                let synced = synced.clone();
                Box::pin(async move {
                    let mut synced = synced.lock().unwrap();
                    synced.push(tokio::time::Instant::now());
                    // The first sync asks for another in 5 s; the second is done.
                    Ok(match synced.len() {
                        1 => Action::RequeueAfter(Duration::from_secs(5)),
                        _ => Action::Done,
                    })
                })
            })
        };
        let (keys, stop, task) = run_on_channel(handler);
        keys.send("ns/a".to_string()).await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while synced.lock().unwrap().len() < 2 {
            assert!(tokio::time::Instant::now() < deadline, "no second sync");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Nothing more is queued once a sync says it is done.
        tokio::time::sleep(Duration::from_secs(30)).await;
        stop.cancel();
        task.await.unwrap();
        let synced = synced.lock().unwrap();
        assert_eq!(synced.len(), 2, "{synced:?}");
        assert!(
            synced[1] - synced[0] >= Duration::from_secs(5),
            "{synced:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_resync_sync_does_not_hold_back_another_keys_event() {
        // Behaviour 30, where kcm departs (weakness 7): the tick only queues keys, so an
        // event that arrives while a resync's sync runs for an hour is synced at once by
        // a free worker. (2014 handled it only after the whole resync.)
        let synced: Arc<Mutex<Vec<(String, tokio::time::Instant)>>> = Arc::default();
        let handler: SyncHandler<String> = {
            let synced = synced.clone();
            Arc::new(move |key: String| {
                let synced = synced.clone();
                Box::pin(async move {
                    synced
                        .lock()
                        .unwrap()
                        .push((key.clone(), tokio::time::Instant::now()));
                    if key == "ns/slow" {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                    }
                    Ok(Action::Done)
                })
            })
        };
        let (keys, rx) = mpsc::channel(8);
        let config = RunnerConfig::new(2, Duration::from_secs(10), Duration::from_secs(1));
        let runner = Runner::new("test", config, Arc::new(Metrics::new()))
            .on(rx, |key: &String| vec![key.clone()])
            .resync(|| vec!["ns/slow".to_string()]);
        let stop = CancellationToken::new();
        let task = tokio::spawn(runner.run(handler, stop.clone().cancelled_owned()));
        // The first resync, 10 s in, starts the slow sync; the event comes 1 s later.
        let start = tokio::time::Instant::now();
        tokio::time::sleep(Duration::from_secs(11)).await;
        keys.send("ns/fast".to_string()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let synced_at = |name: &str| {
            let synced = synced.lock().unwrap();
            synced
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, at)| *at - start)
        };
        assert_eq!(synced_at("ns/slow"), Some(Duration::from_secs(10)));
        let fast = synced_at("ns/fast").expect("the event's key was synced");
        assert!(fast < Duration::from_secs(12), "synced {fast:?} in");
        stop.cancel();
        task.await.unwrap().unwrap();
    }

    #[test]
    fn a_key_that_keeps_failing_is_warned_about_at_4_8_16_failures_and_not_before() {
        let warned: Vec<u32> = (1..=70).filter(|&n| is_persistent(n)).collect();
        assert_eq!(warned, [4, 8, 16, 32, 64]);
    }
}
