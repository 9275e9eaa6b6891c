//! The counters of one watch or informer, read by `crate::status` for `/metrics`.

use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::stability::{LoopReport, Stability, Transition};
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
    /// Whether its connections keep dropping (see `super::stability` for the rule).
    stability: Mutex<Stability>,
    /// Keys already logged as skipped (each is logged once; at most [`MAX_LOGGED_KEYS`]).
    logged_keys: Mutex<HashSet<String>>,
}

/// One line per change of a watch's looping state.
fn log_transition(key: &str, transition: Option<Transition>) {
    match transition {
        None => {}
        Some(Transition::Looping {
            restarts,
            over,
            last_error,
        }) => tracing::warn!(
            %key,
            "watch restarting in a loop: {}; check etcd's log, and anything between kcm and etcd that closes connections (a proxy, a load balancer)",
            LoopReport { restarts, over, last_error }
        ),
        Some(Transition::Stable {
            restarts,
            looped_for,
        }) => tracing::info!(
            %key,
            "watch stable again: its connection to etcd has lived {}s, after {restarts} restarts in {:.1}s",
            super::stability::SHORT_LIVED.as_secs(),
            looped_for.as_secs_f64()
        ),
    }
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

    /// The watch of `key` lost its connection (or failed to make one) because of
    /// `reason`; warns when that makes it loop.
    pub(crate) fn set_disconnected(&self, key: &str, reason: &str) {
        let now = Instant::now();
        let mut disconnected = self.disconnected.lock().expect("metrics lock");
        if disconnected.is_none() {
            *disconnected = Some((now, reason.to_string()));
        }
        drop(disconnected);
        let transition = self.stability().ended(now, reason);
        log_transition(key, transition);
    }

    /// The watch has a live connection to etcd (a list page or a confirmed watch).
    pub(crate) fn set_connected(&self) {
        *self.disconnected.lock().expect("metrics lock") = None;
        self.stability().connected(Instant::now());
    }

    /// The watch was stopped: neither connected nor disconnected.
    pub(crate) fn set_stopped(&self) {
        *self.disconnected.lock().expect("metrics lock") = None;
        self.stability().stopped();
    }

    /// How the watch is restarting in a loop, while it is (see `super::stability`).
    pub fn looping(&self) -> Option<LoopReport> {
        self.stability().looping(Instant::now())
    }

    /// When the looping watch's current connection will have lived long enough to count
    /// as stable; `None` unless it is looping and connected.
    pub(super) fn stable_at(&self) -> Option<Instant> {
        self.stability().stable_at()
    }

    /// Says so once a looping watch of `key` is stable again.
    pub(super) fn check_stable(&self, key: &str) {
        let transition = self.stability().check_stable(Instant::now());
        log_transition(key, transition);
    }

    fn stability(&self) -> std::sync::MutexGuard<'_, Stability> {
        self.stability.lock().expect("metrics lock")
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
