//! Machinery the controller loops share: the worker that drains a work queue through a
//! sync handler, and the log line of a watch's notices.
//!
//! 2014 had none of this: each controller was one `util.Forever` loop. kcm's
//! controllers (`replication_manager`, `endpoints`) are each a `select!` loop that only
//! classifies what arrived and queues keys, plus N workers from here that sync them.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use tracing::Instrument as _;

use crate::etcd_watcher::{Update, WatchMetrics};
use crate::status::Metrics;
use crate::workqueue::WorkQueue;

/// Syncs one object `namespace/name` (2014's injectable `syncHandler`, so loops can be
/// tested without etcd).
pub type SyncHandler =
    Arc<dyn Fn(String) -> Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>> + Send + Sync>;

/// One worker of `controller`: takes keys from the queue until it shuts down, syncs
/// each, and re-queues failures with the key's backoff.
pub async fn worker(
    controller: &'static str,
    queue: Arc<WorkQueue<String>>,
    handler: SyncHandler,
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
            Ok(()) => queue.forget(&key),
            Err(e) => {
                let delay = queue.add_rate_limited(key.clone());
                tracing::debug!(controller, %key, error = format!("{e:#}"), ?delay, "sync failed; retrying");
            }
        }
        queue.done(&key);
    }
}

/// Before a resync acts on a cache: warns when the cache's watch has been disconnected for
/// longer than the sync period, so a resync from a stale view is never silent. Returns
/// whether it warned.
pub fn warn_if_stale(
    controller: &'static str,
    resource: &str,
    watch: &WatchMetrics,
    sync_period: Duration,
) -> bool {
    match watch.disconnected_for() {
        Some((for_, reason)) if for_ > sync_period => {
            tracing::warn!(
                controller,
                resource,
                disconnected_for = ?for_,
                %reason,
                "resyncing from a cache whose watch is disconnected; it may be stale"
            );
            true
        }
        _ => false,
    }
}

/// Logs a resumable watch's resume and relist notices.
pub fn log_notice<T>(resource: &str, update: &Update<T>) {
    match update {
        Update::Resumed { from, reason } => {
            tracing::info!(resource, from, %reason, "watch resumed from its last resourceVersion")
        }
        Update::Relisted {
            revision,
            added,
            modified,
            deleted,
        } => tracing::info!(resource, revision, added, modified, deleted, "watch listed"),
        Update::Error(status) => tracing::warn!(resource, %status, "watch ended"),
        Update::Event(..) => {}
    }
}
