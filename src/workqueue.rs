//! A deduplicating work queue with per-key exponential backoff: the fix for 2014's single
//! loop (client-go's `util/workqueue`, which the 2015 manager adopted in PR #6866).
//!
//! Invariants:
//! - a key is queued at most once at a time (adding it again while queued is a no-op);
//! - a key is never handed to two workers at once: added while being processed, it is
//!   queued again when the worker calls [`WorkQueue::done`];
//! - a key re-added with [`WorkQueue::add_rate_limited`] waits 5 ms × 2^failures (capped
//!   at 1000 s) before it is handed out; [`WorkQueue::forget`] resets the count;
//! - a key added with [`WorkQueue::add_after`] is handed out once its delay has passed,
//!   unless a plain add or an earlier delayed add brings it forward.
//!
//! Only attempts that failed count towards the backoff: an event that re-adds a key during
//! its backoff window makes it run earlier, without raising its next delay
//! (kubernetes #132805 counted those too, growing delays super-exponentially).

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// First retry delay after a failure.
pub const BASE_DELAY: Duration = Duration::from_millis(5);
/// Longest retry delay.
pub const MAX_DELAY: Duration = Duration::from_secs(1000);

/// The delay before retry number `failures` (1-based): 5 ms doubling to 1000 s.
pub fn backoff_delay(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(40);
    BASE_DELAY
        .checked_mul(1u32 << exponent.min(31))
        .map_or(MAX_DELAY, |d| d.min(MAX_DELAY))
}

/// A queue of keys for N workers. Share it behind an `Arc`.
pub struct WorkQueue<K> {
    state: Mutex<State<K>>,
    ready: Notify,
}

struct State<K> {
    queue: VecDeque<K>,
    /// Keys in `queue` or waiting to be re-queued after processing.
    dirty: HashSet<K>,
    processing: HashSet<K>,
    /// Keys waiting out a backoff, by when they are due.
    delayed: BTreeSet<(Instant, u64, K)>,
    delayed_at: HashMap<K, (Instant, u64)>,
    failures: HashMap<K, u32>,
    sequence: u64,
    shutting_down: bool,
}

impl<K: Clone + Eq + Hash + Ord> Default for WorkQueue<K> {
    fn default() -> Self {
        WorkQueue::new()
    }
}

impl<K: Clone + Eq + Hash + Ord> WorkQueue<K> {
    pub fn new() -> WorkQueue<K> {
        WorkQueue {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                delayed: BTreeSet::new(),
                delayed_at: HashMap::new(),
                failures: HashMap::new(),
                sequence: 0,
                shutting_down: false,
            }),
            ready: Notify::new(),
        }
    }

    /// Queues `key` now, unless it is already queued.
    pub fn add(&self, key: K) {
        let mut state = self.state.lock().expect("work queue lock");
        if state.shutting_down {
            return;
        }
        if let Some((due, seq)) = state.delayed_at.remove(&key) {
            state.delayed.remove(&(due, seq, key.clone()));
        }
        state.enqueue(key);
        drop(state);
        self.ready.notify_one();
    }

    /// Queues `key` after its backoff: 5 ms × 2^(failures so far), counting this one.
    pub fn add_rate_limited(&self, key: K) -> Duration {
        let mut state = self.state.lock().expect("work queue lock");
        let failures = state.failures.entry(key.clone()).or_insert(0);
        *failures += 1;
        let delay = backoff_delay(*failures);
        if state.shutting_down {
            return delay;
        }
        state.schedule(key, Instant::now() + delay);
        drop(state);
        // Wake a waiting worker so it re-computes its sleep deadline.
        self.ready.notify_one();
        delay
    }

    /// Queues `key` once `delay` has passed (client-go's `AddAfter`), without counting a
    /// failure: for work that is due later, such as a minimum ready time running out. A
    /// plain [`WorkQueue::add`] of the same key meanwhile overtakes it, and an earlier
    /// pending add covers a later one.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let mut state = self.state.lock().expect("work queue lock");
        if state.shutting_down {
            return;
        }
        state.schedule(key, Instant::now() + delay);
        drop(state);
        self.ready.notify_one();
    }

    /// Clears the failure count of `key` (after a successful sync).
    pub fn forget(&self, key: &K) {
        self.state
            .lock()
            .expect("work queue lock")
            .failures
            .remove(key);
    }

    /// How many times `key` has failed since it was last forgotten.
    pub fn failures(&self, key: &K) -> u32 {
        let state = self.state.lock().expect("work queue lock");
        state.failures.get(key).copied().unwrap_or(0)
    }

    /// Keys queued or waiting out a backoff (not those being processed).
    pub fn len(&self) -> usize {
        let state = self.state.lock().expect("work queue lock");
        state.queue.len() + state.delayed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits for the next key; `None` once the queue is shut down. The caller must call
    /// [`WorkQueue::done`] with the key when it has finished with it.
    pub async fn get(&self) -> Option<K> {
        loop {
            // Register interest before checking, so a notify between the check and the
            // wait is not lost.
            let notified = self.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next_due = {
                let mut state = self.state.lock().expect("work queue lock");
                state.promote_due(Instant::now());
                if state.shutting_down {
                    return None;
                }
                if let Some(key) = state.queue.pop_front() {
                    state.dirty.remove(&key);
                    state.processing.insert(key.clone());
                    // More work may be waiting for another worker.
                    if !state.queue.is_empty() {
                        self.ready.notify_one();
                    }
                    return Some(key);
                }
                state.delayed.first().map(|(due, _, _)| *due)
            };
            match next_due {
                Some(due) => {
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep_until(due) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Marks `key` finished; if it was added again meanwhile, it is queued now.
    pub fn done(&self, key: &K) {
        let mut state = self.state.lock().expect("work queue lock");
        state.processing.remove(key);
        if state.dirty.contains(key) && !state.shutting_down {
            state.queue.push_back(key.clone());
            drop(state);
            self.ready.notify_one();
        }
    }

    /// Stops handing out keys: every pending and future `get` returns `None`.
    pub fn shut_down(&self) {
        self.state.lock().expect("work queue lock").shutting_down = true;
        self.ready.notify_waiters();
    }
}

impl<K: Clone + Eq + Hash + Ord> State<K> {
    fn enqueue(&mut self, key: K) {
        if !self.dirty.insert(key.clone()) {
            return;
        }
        // A key being processed is queued again by `done`, never handed out twice.
        if !self.processing.contains(&key) {
            self.queue.push_back(key);
        }
    }

    /// Makes `key` due at `due`, unless it is queued already or due earlier.
    fn schedule(&mut self, key: K, due: Instant) {
        let covered = self.dirty.contains(&key)
            || self.delayed_at.get(&key).is_some_and(|(at, _)| *at <= due);
        if covered {
            return;
        }
        if let Some((at, seq)) = self.delayed_at.remove(&key) {
            self.delayed.remove(&(at, seq, key.clone()));
        }
        self.sequence += 1;
        let seq = self.sequence;
        self.delayed.insert((due, seq, key.clone()));
        self.delayed_at.insert(key, (due, seq));
    }

    fn promote_due(&mut self, now: Instant) {
        while let Some(first) = self.delayed.first() {
            if first.0 > now {
                break;
            }
            let (_, _, key) = self.delayed.pop_first().expect("checked non-empty");
            self.delayed_at.remove(&key);
            self.enqueue(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn backoff_doubles_from_5ms_to_1000s() {
        let delays: Vec<_> = [1, 2, 3, 10].into_iter().map(backoff_delay).collect();
        assert_eq!(
            delays,
            [5, 10, 20, 2560].map(Duration::from_millis).to_vec()
        );
        assert_eq!(backoff_delay(30), MAX_DELAY);
        assert_eq!(backoff_delay(u32::MAX), MAX_DELAY);
    }

    #[tokio::test(start_paused = true)]
    async fn keys_are_deduplicated_while_queued() {
        let queue = WorkQueue::new();
        queue.add("a");
        queue.add("a");
        queue.add("b");
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(queue.get().await, Some("b"));
        assert!(queue.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_is_never_handed_out_twice_at_once() {
        let queue = Arc::new(WorkQueue::new());
        queue.add("a");
        assert_eq!(queue.get().await, Some("a"));
        // Re-added while processing: not handed to a second worker...
        queue.add("a");
        let second = tokio::time::timeout(Duration::from_secs(1), queue.get()).await;
        assert!(second.is_err(), "a was handed out while still processing");
        // ...but queued again once the first worker is done.
        queue.done(&"a");
        assert_eq!(queue.get().await, Some("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_exponentially_and_forget_resets() {
        let queue = WorkQueue::new();
        let start = Instant::now();
        for expected_ms in [5u64, 10, 20] {
            queue.add_rate_limited("a");
            assert_eq!(queue.get().await, Some("a"));
            queue.done(&"a");
            assert!(start.elapsed() >= Duration::from_millis(expected_ms));
        }
        assert_eq!(queue.failures(&"a"), 3);
        queue.forget(&"a");
        assert_eq!(queue.failures(&"a"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_during_backoff_runs_the_key_without_counting_a_failure() {
        let queue = WorkQueue::new();
        for _ in 0..5 {
            queue.add_rate_limited("a");
        }
        queue.add("a");
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(queue.failures(&"a"), 5);
        assert!(
            queue.is_empty(),
            "the delayed retry was superseded by the add"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_wakes_waiting_workers() {
        let queue = Arc::new(WorkQueue::<&str>::new());
        let waiter = tokio::spawn({
            let queue = queue.clone();
            async move { queue.get().await }
        });
        tokio::task::yield_now().await;
        queue.shut_down();
        assert_eq!(waiter.await.unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_hands_the_key_out_once_its_delay_has_passed_without_a_failure() {
        let queue = WorkQueue::new();
        let start = Instant::now();
        queue.add_after("a", Duration::from_secs(30));
        // A later delayed add does not postpone it; an earlier one brings it forward.
        queue.add_after("a", Duration::from_secs(60));
        queue.add_after("a", Duration::from_secs(10));
        assert_eq!(queue.len(), 1);
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        assert_eq!(queue.failures(&"a"), 0);
        queue.done(&"a");
        assert!(queue.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_plain_add_overtakes_a_delayed_one() {
        let queue = WorkQueue::new();
        let start = Instant::now();
        queue.add_after("a", Duration::from_secs(30));
        queue.add("a");
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(start.elapsed(), Duration::ZERO);
        queue.done(&"a");
        assert!(queue.is_empty(), "the delayed add was superseded");
        // And a key already queued is not delayed by a later add_after.
        queue.add("b");
        queue.add_after("b", Duration::from_secs(5));
        assert_eq!(queue.get().await, Some("b"));
        assert_eq!(start.elapsed(), Duration::ZERO);
    }
}
