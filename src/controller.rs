//! The runtime every controller runs on: the [`Runner`] (work queue, workers, resync
//! tick, metrics, panic recovery, drain), the [`SelectorIndex`] that maps a changed
//! object to the objects that select it, and the stale-cache warning; and the toolkit of
//! the replica controllers, what Kubernetes keeps in `controller_utils.go`: slot names,
//! deletion ranking and slow start ([`slots`]), and the replica writer ([`replicas`]).
//!
//! 2014 had none of this: each controller was one `util.Forever` loop over a full
//! list. kcm's controllers (`replication_manager`, `endpoints`) each give a runner their
//! mapping from informer changes to keys and their sync function, and nothing else.

#[cfg(test)]
pub(crate) mod fixtures;
mod key_memory;
pub mod replicas;
mod runner;
mod selector_index;
pub mod slots;

use std::time::Duration;

use crate::etcd_watcher::{Update, WatchMetrics};

pub use crate::informer::ObjectKey;
pub use key_memory::KeyMemory;
pub use runner::{sync_handler, Action, Key, Runner, RunnerConfig, SyncHandler};
pub use selector_index::SelectorIndex;
pub use slots::{
    free_slots, phase_rank, pod_from_template, pod_name, rank_for_deletion, NewPod, PodStamp,
    SlotNames, SlowStart,
};

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
