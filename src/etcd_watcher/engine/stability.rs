//! Whether a watch restarts in a loop: the rule behind the "restarting in a loop"
//! warning, `kcm_watch_looping` and `/healthz`. Pure: every call takes the time.
//!
//! The rule: a watch is *looping* once [`LOOP_RESTARTS`] of its connections to etcd in a
//! row each ended less than [`SHORT_LIVED`] after they were made (a connection is made
//! when etcd answers a list page or confirms a watch, and ends when the engine sees it
//! fail); it is *stable* again once one connection has lived [`SHORT_LIVED`]. A watch
//! that cannot connect at all is not looping: it is disconnected, which `/healthz`
//! reports on its own (`WatchMetrics::disconnected_for`).
//!
//! Why: a watch whose connections keep dropping (etcd closing them for pinging too
//! often, a proxy cutting idle streams, a compaction faster than the relist) reconnects
//! within a second each time, so it is never disconnected for long, yet it may never
//! stay up long enough to deliver; before this rule nothing said so above debug.

use std::time::{Duration, Instant};

/// How many short-lived connections in a row make a loop.
pub const LOOP_RESTARTS: u32 = 3;

/// A connection that ends sooner than this after it was made is short-lived; one that
/// lives this long makes a looping watch stable again.
pub const SHORT_LIVED: Duration = Duration::from_secs(10);

/// A change of state worth one log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Transition {
    /// The watch started looping: `restarts` short-lived connections in a row over
    /// `over`, the last one ending with `last_error`.
    Looping {
        restarts: u32,
        over: Duration,
        last_error: String,
    },
    /// A looping watch has had a connection live [`SHORT_LIVED`]: `restarts`
    /// short-lived connections in all, over `looped_for`.
    Stable { restarts: u32, looped_for: Duration },
}

/// What `/healthz` and the metrics say about a looping watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopReport {
    /// Short-lived connections in a row so far.
    pub restarts: u32,
    /// Since the first of them was made.
    pub over: Duration,
    /// Why the last one ended.
    pub last_error: String,
}

impl std::fmt::Display for LoopReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "restarted {} times in the last {:.1}s, each connection to etcd lived under {}s; last error: {}",
            self.restarts,
            self.over.as_secs_f64(),
            SHORT_LIVED.as_secs(),
            self.last_error
        )
    }
}

/// The connection history of one watch, as far as the rule needs it.
#[derive(Debug, Default)]
pub(crate) struct Stability {
    /// When the current connection was made; `None` while disconnected.
    connected_since: Option<Instant>,
    /// Short-lived connections in a row, and when the first of them was made.
    streak: u32,
    streak_since: Option<Instant>,
    /// Why the last connection ended.
    last_error: String,
    /// Whether the watch is looping (it warned, and has not said it is stable since).
    looping: bool,
}

impl Stability {
    /// A connection is up (again); a no-op while one is.
    pub(crate) fn connected(&mut self, now: Instant) {
        self.connected_since.get_or_insert(now);
    }

    /// The connection failed with `reason`; a no-op while there was none.
    pub(crate) fn ended(&mut self, now: Instant, reason: &str) -> Option<Transition> {
        let since = self.connected_since.take()?;
        if now.saturating_duration_since(since) >= SHORT_LIVED {
            // A long-lived connection: whatever came before is over.
            let stable = self.stable(since + SHORT_LIVED);
            self.streak = 0;
            self.streak_since = None;
            return stable;
        }
        self.streak += 1;
        let first = *self.streak_since.get_or_insert(since);
        self.last_error = reason.to_string();
        if self.looping || self.streak < LOOP_RESTARTS {
            return None;
        }
        self.looping = true;
        Some(Transition::Looping {
            restarts: self.streak,
            over: now.saturating_duration_since(first),
            last_error: self.last_error.clone(),
        })
    }

    /// Forgets the current connection without counting it (the watch was stopped).
    pub(crate) fn stopped(&mut self) {
        self.connected_since = None;
    }

    /// `Stable` once a looping watch's current connection has lived [`SHORT_LIVED`].
    pub(crate) fn check_stable(&mut self, now: Instant) -> Option<Transition> {
        let since = self.connected_since?;
        if now.saturating_duration_since(since) < SHORT_LIVED {
            return None;
        }
        let stable = self.stable(now);
        self.streak = 0;
        self.streak_since = None;
        stable
    }

    /// Ends a loop at `now`, if there is one.
    fn stable(&mut self, now: Instant) -> Option<Transition> {
        if !std::mem::take(&mut self.looping) {
            return None;
        }
        Some(Transition::Stable {
            restarts: self.streak,
            looped_for: self
                .streak_since
                .map_or(Duration::ZERO, |first| now.saturating_duration_since(first)),
        })
    }

    /// When [`Stability::check_stable`] will report a looping watch stable, if its
    /// current connection lasts; `None` unless it is looping and connected.
    pub(crate) fn stable_at(&self) -> Option<Instant> {
        self.connected_since
            .filter(|_| self.looping)
            .map(|since| since + SHORT_LIVED)
    }

    /// The loop, while the watch is looping (a current connection that has lived
    /// [`SHORT_LIVED`] already counts as stable, even before anyone checked).
    pub(crate) fn looping(&self, now: Instant) -> Option<LoopReport> {
        if !self.looping || self.stable_at().is_some_and(|at| now >= at) {
            return None;
        }
        Some(LoopReport {
            restarts: self.streak,
            over: self
                .streak_since
                .map_or(Duration::ZERO, |first| now.saturating_duration_since(first)),
            last_error: self.last_error.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs connections of the given lifetimes (ms), each re-made 100 ms after the last
    /// ended, and returns the transitions and whether the watch loops at the end.
    #[track_caller]
    fn check(lifetimes_ms: &[u64], transitions: &[&str], looping_at_end: bool) {
        let start = Instant::now();
        let mut now = start;
        let mut stability = Stability::default();
        let mut seen = Vec::new();
        for (i, lived) in lifetimes_ms.iter().enumerate() {
            stability.connected(now);
            // Someone (the engine's timer) checks whenever the connection could be stable.
            if let Some(at) = stability.stable_at() {
                if *lived >= SHORT_LIVED.as_millis() as u64 {
                    seen.extend(stability.check_stable(at));
                }
            }
            now += Duration::from_millis(*lived);
            seen.extend(stability.ended(now, &format!("drop {i}")));
            now += Duration::from_millis(100);
        }
        stability.connected(now);
        let names: Vec<String> = seen
            .iter()
            .map(|t| match t {
                Transition::Looping { restarts, .. } => format!("looping {restarts}"),
                Transition::Stable { restarts, .. } => format!("stable {restarts}"),
            })
            .collect();
        assert_eq!(names, transitions);
        assert_eq!(stability.looping(now).is_some(), looping_at_end);
    }

    #[test]
    fn three_short_lived_connections_in_a_row_are_a_loop_reported_once() {
        check(&[500, 500], &[], false);
        check(&[500, 500, 500], &["looping 3"], true);
        check(&[500; 8], &["looping 3"], true);
        check(&[9_999, 9_999, 9_999], &["looping 3"], true);
    }

    #[test]
    fn a_long_lived_connection_breaks_the_streak_and_ends_a_loop() {
        check(&[500, 500, 10_000, 500, 500], &[], false);
        check(&[500, 500, 500, 10_000], &["looping 3", "stable 3"], false);
        check(
            &[500, 500, 500, 500, 60_000, 500, 500, 500],
            &["looping 3", "stable 4", "looping 3"],
            true,
        );
    }

    #[test]
    fn a_loop_ends_when_the_current_connection_has_lived_long_enough() {
        let start = Instant::now();
        let mut stability = Stability::default();
        let mut now = start;
        for _ in 0..3 {
            stability.connected(now);
            now += Duration::from_millis(200);
            stability.ended(now, "goaway");
        }
        stability.connected(now);
        let report = stability.looping(now).expect("looping");
        assert_eq!(report.restarts, 3);
        assert_eq!(report.over, Duration::from_millis(600));
        assert_eq!(report.last_error, "goaway");
        assert_eq!(
            report.to_string(),
            "restarted 3 times in the last 0.6s, each connection to etcd lived under 10s; last error: goaway"
        );
        assert_eq!(stability.stable_at(), Some(now + SHORT_LIVED));
        assert_eq!(stability.check_stable(now + SHORT_LIVED / 2), None);
        // Unchecked, it is already not looping once the connection has lived long enough.
        assert_eq!(stability.looping(now + SHORT_LIVED), None);
        assert_eq!(
            stability.check_stable(now + SHORT_LIVED),
            Some(Transition::Stable {
                restarts: 3,
                looped_for: Duration::from_millis(600) + SHORT_LIVED
            })
        );
        assert_eq!(stability.check_stable(now + SHORT_LIVED * 2), None);
    }

    #[test]
    fn failures_while_disconnected_and_stops_are_not_connections() {
        let now = Instant::now();
        let mut stability = Stability::default();
        for i in 0..5 {
            assert_eq!(
                stability.ended(now + Duration::from_secs(i), "refused"),
                None
            );
        }
        stability.connected(now);
        stability.stopped();
        assert_eq!(stability.ended(now, "refused"), None);
        assert_eq!(stability.looping(now), None);
    }
}
