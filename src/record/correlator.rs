//! What becomes of each recorded event before it is written: client-go's `EventCorrelator`
//! (`tools/record/events_cache.go`), pure.
//!
//! Three stages, in client-go's order:
//! 1. **Aggregation** ([`AGGREGATE_MAX_EVENTS`], [`AGGREGATE_INTERVAL`]): events that
//!    differ only in their message (same source, object, type and reason) are counted by
//!    distinct message; from the tenth distinct message within ten minutes on, each is
//!    replaced by one combined event, `(combined from similar events): <message>`, keyed by
//!    what they share, so a 10,000-pod scale-up's `Created pod: …` messages become one
//!    event with a count.
//! 2. **Deduplication**: an event equal to an earlier one (same source, object, type,
//!    reason and message) is not written anew: the earlier one's `count` goes up and its
//!    `lastTimestamp` moves (an update of the same name).
//! 3. **Spam filter** ([`SPAM_BURST`], [`SPAM_REFILL`]): a token bucket per source and
//!    object. A burst of 25 writes, then one every five minutes; what the filter skips is
//!    still counted by stage 2, so the next write carries the true count.
//!
//! The filter's decision rests on the source and the object alone, so it is taken first:
//! an event it holds back goes through stages 1 and 2 as in client-go (its message
//! remembered, its count raised) without the event it would have become being built.
//!
//! Invariants: every cache is bounded ([`MAX_CACHE_ENTRIES`] entries each, least recently
//! used evicted), so memory does not grow with the number of objects ever seen; time only
//! enters as the `now` argument, so the whole module is a function of its inputs.

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::time::Duration;

use lru::LruCache;

use super::Event;

/// Distinct messages of one aggregate key after which events are combined (client-go's
/// `defaultAggregateMaxEvents`).
pub const AGGREGATE_MAX_EVENTS: usize = 10;

/// How long an aggregate key's messages are remembered since its last event
/// (`defaultAggregateIntervalInSeconds`, 600).
pub const AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);

/// Writes one source may make about one object at once (`defaultSpamBurst`).
pub const SPAM_BURST: f64 = 25.0;

/// One more write allowed per this long, after the burst (`defaultSpamQPS`, 1/300).
pub const SPAM_REFILL: Duration = Duration::from_secs(300);

/// Entries each cache keeps (`maxLruCacheEntries`).
pub const MAX_CACHE_ENTRIES: usize = 4096;

/// The prefix of a combined event's message (`EventAggregatorByReasonMessageFunc`).
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// What to do with one recorded event.
#[derive(Debug, Clone, PartialEq)]
pub enum Correlated {
    /// Write it as a new event.
    Create(Event),
    /// Write it over the earlier event of the same name (its count went up).
    Update(Event),
    /// Write nothing: the spam filter holds it back.
    Skip,
}

/// The aggregation record of one aggregate key.
struct Aggregate {
    messages: BTreeSet<String>,
    last_seen: Duration,
}

/// What was last written (or counted) for one event key.
#[derive(Clone)]
struct Observation {
    name: String,
    uid: String,
    count: i64,
    first_timestamp: Duration,
    creation_timestamp: Duration,
}

/// A token bucket: [`SPAM_BURST`] tokens, refilled one per [`SPAM_REFILL`].
struct Bucket {
    tokens: f64,
    at: Duration,
}

impl Bucket {
    fn full(now: Duration) -> Bucket {
        Bucket {
            tokens: SPAM_BURST,
            at: now,
        }
    }

    /// Takes a token if there is one.
    fn try_take(&mut self, now: Duration) -> bool {
        let elapsed = now.saturating_sub(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed / SPAM_REFILL.as_secs_f64()).min(SPAM_BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// client-go's `EventCorrelator`: aggregation, deduplication and the spam filter.
pub struct Correlator {
    aggregates: LruCache<String, Aggregate>,
    observations: LruCache<String, Observation>,
    buckets: LruCache<String, Bucket>,
}

impl Default for Correlator {
    fn default() -> Correlator {
        let size = NonZeroUsize::new(MAX_CACHE_ENTRIES).expect("a non-zero cache size");
        Correlator {
            aggregates: LruCache::new(size),
            observations: LruCache::new(size),
            buckets: LruCache::new(size),
        }
    }
}

impl Correlator {
    /// Decides what to write for `event`, recorded at `now` (since the Unix epoch; the
    /// event's own timestamps are `now` too).
    pub fn correlate(&mut self, event: Event, now: Duration) -> Correlated {
        // The source and the object stay through aggregation: one spam key for all three
        // stages.
        let spam_key = event.spam_key();
        let aggregate_key = event.aggregate_key(&spam_key);
        // Stage 3 decides on the source and the object alone, so it decides first: what it
        // holds back is still aggregated and counted, but never built (after a scale-up's
        // first 25 pods, every event of the controller's).
        let allowed = match self.buckets.get_mut(&spam_key) {
            Some(bucket) => bucket.try_take(now),
            None => {
                let mut bucket = Bucket::full(now);
                let allowed = bucket.try_take(now);
                self.buckets.put(spam_key, bucket);
                allowed
            }
        };
        let (event, key) = self.aggregate(event, aggregate_key, allowed, now);
        match self.observe(event, key, allowed) {
            None => Correlated::Skip,
            Some(observed) if observed.count > 1 => Correlated::Update(observed),
            Some(observed) => Correlated::Create(observed),
        }
    }

    /// Stage 1: the event itself and its event key, or, from the tenth distinct message
    /// of its aggregate key on, a combined event and the aggregate key. The combined
    /// event keeps the event's own name (like client-go's, the object's name and the
    /// time); its message is left empty when it will not be written.
    fn aggregate(
        &mut self,
        mut event: Event,
        aggregate_key: String,
        allowed: bool,
        now: Duration,
    ) -> (Event, String) {
        if !self.aggregates.contains(&aggregate_key) {
            self.aggregates.put(
                aggregate_key.clone(),
                Aggregate {
                    messages: BTreeSet::new(),
                    last_seen: now,
                },
            );
        }
        let record = self
            .aggregates
            .get_mut(&aggregate_key)
            .expect("inserted above");
        if now.saturating_sub(record.last_seen) > AGGREGATE_INTERVAL {
            record.messages.clear();
        }
        record.last_seen = now;
        let known = record.messages.contains(&event.message);
        if record.messages.len() + usize::from(!known) < AGGREGATE_MAX_EVENTS {
            if !known {
                record.messages.insert(event.message.clone());
            }
            let key = event.event_key(&aggregate_key);
            return (event, key);
        }
        let message = std::mem::take(&mut event.message);
        if allowed {
            event.message = format!("{COMBINED_PREFIX}{message}");
        }
        // Keep the set from growing past the limit (client-go pops any one).
        record.messages.insert(message);
        record.messages.pop_first();
        (event, aggregate_key)
    }

    /// Stage 2: an event seen before under `key` takes the earlier one's name, uid and
    /// first timestamp, with its count plus one; a new one gets its uid. The count goes
    /// up either way; the event is returned only when `allowed`.
    fn observe(&mut self, mut event: Event, key: String, allowed: bool) -> Option<Event> {
        if let Some(seen) = self.observations.get_mut(&key) {
            seen.count += 1;
            if !allowed {
                return None;
            }
            event.name = seen.name.clone();
            event.uid = seen.uid.clone();
            event.first_timestamp = seen.first_timestamp;
            event.creation_timestamp = seen.creation_timestamp;
            event.count = seen.count;
            return Some(event);
        }
        if event.uid.is_empty() {
            event.uid = uuid::Uuid::new_v4().to_string();
        }
        self.observations.put(
            key,
            Observation {
                name: event.name.clone(),
                uid: event.uid.clone(),
                count: event.count,
                first_timestamp: event.first_timestamp,
                creation_timestamp: event.creation_timestamp,
            },
        );
        allowed.then_some(event)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{EventType, Reference, Source};
    use super::*;

    fn rs() -> Reference {
        Reference {
            kind: "ReplicaSet".into(),
            api_version: "apps/v1".into(),
            namespace: "default".into(),
            name: "web-7d4f".into(),
            uid: "u1".into(),
            resource_version: String::new(),
        }
    }

    fn event(object: Reference, reason: &str, message: &str, now: Duration) -> Event {
        Event::new(
            &Source::new("replicaset-controller", None),
            object,
            EventType::Normal,
            reason,
            message.to_string(),
            now,
        )
    }

    fn at(seconds: u64) -> Duration {
        Duration::from_secs(1_800_000_000 + seconds)
    }

    /// Feeds `messages` (one a second from `at(0)`) and returns what each became: `C`
    /// create, `U` update, `-` skip, with the count written.
    #[track_caller]
    fn check(correlator: &mut Correlator, messages: &[&str], expected: &str) {
        let mut got = String::new();
        for (i, message) in messages.iter().enumerate() {
            let now = at(i as u64);
            match correlator.correlate(event(rs(), "SuccessfulCreate", message, now), now) {
                Correlated::Create(e) => got.push_str(&format!("C{} ", e.count)),
                Correlated::Update(e) => got.push_str(&format!("U{} ", e.count)),
                Correlated::Skip => got.push_str("- "),
            }
        }
        assert_eq!(got.trim_end(), expected);
    }

    #[test]
    fn a_repeated_event_updates_the_first_with_its_count() {
        let mut correlator = Correlator::default();
        check(&mut correlator, &["a", "a", "a"], "C1 U2 U3");
    }

    #[test]
    fn the_tenth_distinct_message_is_combined_and_later_ones_count_on_it() {
        let mut correlator = Correlator::default();
        let names: Vec<String> = (0..13).map(|i| format!("Created pod: web-{i}")).collect();
        let messages: Vec<&str> = names.iter().map(String::as_str).collect();
        check(
            &mut correlator,
            &messages,
            "C1 C1 C1 C1 C1 C1 C1 C1 C1 C1 U2 U3 U4",
        );
        let last = correlator.correlate(
            event(rs(), "SuccessfulCreate", "Created pod: web-99", at(20)),
            at(20),
        );
        let Correlated::Update(last) = last else {
            panic!("expected an update, got {last:?}");
        };
        assert_eq!(
            last.message,
            "(combined from similar events): Created pod: web-99"
        );
        assert_eq!(last.count, 5);
        assert!(
            last.name.starts_with("web-7d4f."),
            "the combined event is named after its object: {}",
            last.name
        );
    }

    #[test]
    fn a_burst_of_25_writes_then_one_every_five_minutes() {
        let mut correlator = Correlator::default();
        let mut written = 0;
        let mut last_count = 0;
        for i in 0..10_000u64 {
            // 10,000 creates within 100 s: a large scale-up.
            let now = Duration::from_millis(1_800_000_000_000 + i * 10);
            let message = format!("Created pod: web-{i}");
            match correlator.correlate(event(rs(), "SuccessfulCreate", &message, now), now) {
                Correlated::Create(e) | Correlated::Update(e) => {
                    written += 1;
                    last_count = e.count;
                }
                Correlated::Skip => {}
            }
        }
        assert_eq!(written, 25, "the burst, and nothing more within 100 s");
        // Five minutes later one more write goes through, carrying every occurrence.
        let now = at(400);
        let more = correlator.correlate(
            event(rs(), "SuccessfulCreate", "Created pod: web-x", now),
            now,
        );
        let Correlated::Update(more) = more else {
            panic!("expected an update, got {more:?}");
        };
        assert!(more.count > last_count + 9_000, "count {}", more.count);
    }

    #[test]
    fn buckets_are_per_object_and_aggregation_per_reason() {
        let mut correlator = Correlator::default();
        for i in 0..30 {
            let now = at(0);
            let _ = correlator.correlate(
                event(rs(), "SuccessfulCreate", &format!("Created pod: p{i}"), now),
                now,
            );
        }
        let other = Reference {
            name: "other".into(),
            uid: "u2".into(),
            ..rs()
        };
        let now = at(1);
        assert!(matches!(
            correlator.correlate(event(other, "SuccessfulCreate", "Created pod: q", now), now),
            Correlated::Create(_)
        ));
        // The same object, another reason: its own aggregate, but the object's bucket is
        // empty.
        assert_eq!(
            correlator.correlate(event(rs(), "SuccessfulDelete", "Deleted pod: p1", now), now),
            Correlated::Skip
        );
    }

    #[test]
    fn an_aggregate_forgets_its_messages_after_ten_quiet_minutes() {
        let mut correlator = Correlator::default();
        for i in 0..9u64 {
            let now = at(i);
            let e = event(rs(), "SuccessfulCreate", &format!("m{i}"), now);
            assert!(matches!(
                correlator.correlate(e, now),
                Correlated::Create(_)
            ));
        }
        let now = at(9 + 601);
        let e = event(rs(), "SuccessfulCreate", "m9", now);
        let Correlated::Create(e) = correlator.correlate(e, now) else {
            panic!("a new event after the interval");
        };
        assert_eq!(e.message, "m9", "not combined");
    }

    #[test]
    fn the_caches_stay_bounded() {
        let mut correlator = Correlator::default();
        for i in 0..(MAX_CACHE_ENTRIES as u64 * 2) {
            let object = Reference {
                name: format!("pod-{i}"),
                uid: format!("u{i}"),
                ..rs()
            };
            let now = at(i);
            let _ = correlator.correlate(event(object, "Scheduled", "assigned", now), now);
        }
        assert_eq!(correlator.aggregates.len(), MAX_CACHE_ENTRIES);
        assert_eq!(correlator.observations.len(), MAX_CACHE_ENTRIES);
        assert_eq!(correlator.buckets.len(), MAX_CACHE_ENTRIES);
    }
}
