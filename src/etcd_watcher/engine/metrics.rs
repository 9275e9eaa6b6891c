//! The counters of one watch or informer, read by `crate::status` for `/metrics`.

use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::registry::DecodeError;

/// Counters of one watch or informer.
#[derive(Debug, Default)]
pub struct WatchMetrics {
    /// Re-opens from the last delivered revision after a disconnect or error.
    pub restarts: AtomicU64,
    /// Lists after compaction (410), after a rewind, or at start.
    pub relists: AtomicU64,
    /// Values skipped because they did not decode.
    pub decode_errors: AtomicU64,
    /// Events delivered to the consumer.
    pub events: AtomicU64,
    /// The highest revision delivered (or known to be passed) so far.
    pub last_revision: AtomicI64,
    /// Times etcd's revision went backwards (a restored store) or its cluster changed.
    pub rewinds: AtomicU64,
    /// Keys skipped because they have more segments than the key layout allows.
    pub skipped_keys: AtomicU64,
    /// Since when, and why, the watch has had no live etcd watch (None while it has one).
    disconnected: Mutex<Option<(Instant, String)>>,
    /// Keys already logged as skipped (each is logged once; at most [`MAX_LOGGED_KEYS`]).
    logged_keys: Mutex<HashSet<String>>,
}

/// How many distinct skipped keys one watch logs.
const MAX_LOGGED_KEYS: usize = 1000;

impl WatchMetrics {
    pub(crate) fn observe_revision(&self, revision: i64) {
        self.last_revision.fetch_max(revision, Ordering::Relaxed);
    }

    /// How long the watch has been without a live etcd watch, and why; `None` while it
    /// has one (or before it first tried).
    pub fn disconnected_for(&self) -> Option<(Duration, String)> {
        self.disconnected
            .lock()
            .expect("metrics lock")
            .as_ref()
            .map(|(since, reason)| (since.elapsed(), reason.clone()))
    }

    pub(super) fn set_disconnected(&self, reason: &str) {
        let mut disconnected = self.disconnected.lock().expect("metrics lock");
        if disconnected.is_none() {
            *disconnected = Some((Instant::now(), reason.to_string()));
        }
    }

    pub(crate) fn set_connected(&self) {
        *self.disconnected.lock().expect("metrics lock") = None;
    }

    /// Counts a value that does not decode, with one warning.
    pub(crate) fn undecodable(&self, e: &DecodeError) {
        self.decode_errors.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(key = %e.key, revision = e.revision, error = %e.message, "skipping undecodable value");
    }

    /// Counts a key deeper than the layout allows; warns once per key.
    pub(crate) fn skip_key(&self, key: &str) {
        self.skipped_keys.fetch_add(1, Ordering::Relaxed);
        let mut logged = self.logged_keys.lock().expect("metrics lock");
        if logged.len() < MAX_LOGGED_KEYS && logged.insert(key.to_string()) {
            tracing::warn!(%key, "skipping a key with more segments than {{prefix}}/{{kind}}/{{namespace}}/{{name}}; it is not an object");
        }
    }
}
