//! How long the engine waits before it re-opens: the growing backoff for an etcd that
//! refuses, and the short probes for one that dropped the connection.

use std::time::Duration;

use rand::Rng;

use crate::registry::Registry;

/// Backoff between re-opens of a watch that etcd refused or failed: exponential from
/// `min` to `max`, jittered, back to `min` after a watch has been healthy for
/// `reset_after`. A dropped connection does not use it (see [`super::Engine`]).
#[derive(Clone, Debug)]
pub struct BackoffConfig {
    /// Default 800 ms (client-go's reflector).
    pub min: Duration,
    /// Default 30 s.
    pub max: Duration,
    /// Default 2 min.
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            min: Duration::from_millis(800),
            max: Duration::from_secs(30),
            reset_after: Duration::from_secs(120),
        }
    }
}

#[derive(Debug)]
pub(crate) struct Backoff {
    config: BackoffConfig,
    next: Duration,
}

impl Backoff {
    pub(crate) fn new(config: BackoffConfig) -> Backoff {
        Backoff {
            next: config.min,
            config,
        }
    }

    /// The delay before the next attempt; `healthy_for` is how long the last watch ran.
    pub(crate) fn delay(&mut self, healthy_for: Duration) -> Duration {
        if healthy_for >= self.config.reset_after {
            self.next = self.config.min;
        }
        let base = self.next;
        self.next = (self.next * 2).min(self.config.max);
        // Jitter up to +50%, so many watchers do not reconnect in lockstep.
        let jitter = rand::thread_rng().gen_range(0.0..0.5);
        base.mul_f64(1.0 + jitter).min(self.config.max)
    }
}

/// The most a watch waits after a dropped connection once etcd answers again.
pub(crate) const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// The delay before re-opening after a dropped connection: none when the last watch
/// lived at least [`MAX_RECONNECT_DELAY`]; otherwise 100 ms doubling to
/// [`MAX_RECONNECT_DELAY`] over consecutive short-lived ones, so a connection that drops
/// at once is not re-opened in a hot loop.
pub(crate) fn reconnect_delay(short_lived: u32) -> Duration {
    if short_lived == 0 {
        return Duration::ZERO;
    }
    (PROBE_INTERVAL * 2u32.saturating_pow(short_lived - 1)).min(MAX_RECONNECT_DELAY)
}

/// How often a watch whose etcd stopped answering checks whether it answers again.
const PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// Whether etcd answers a cheap single-key read within `limit`.
async fn answers(registry: &Registry, key: &str, limit: Duration) -> bool {
    let mut kv = registry.kv();
    let probe = kv.get(key, Some(etcd_client::GetOptions::new().with_count_only()));
    matches!(tokio::time::timeout(limit, probe).await, Ok(Ok(_)))
}

/// Waits out `delay`, the backoff before re-opening a watch etcd refused, with one
/// exception: when etcd did not answer at first and answers again, the wait ends at once.
///
/// The backoff protects an etcd that answers but fails watches (overloaded, say): it gets
/// the whole delay. An etcd that could not be reached lost a connection, not its
/// patience.
pub(super) async fn wait_before_reopen(registry: &Registry, key: &str, delay: Duration) {
    let deadline = tokio::time::Instant::now() + delay;
    let mut unreachable = false;
    loop {
        if answers(registry, key, PROBE_INTERVAL * 2).await {
            if !unreachable {
                tokio::time::sleep_until(deadline).await;
            }
            return;
        }
        unreachable = true;
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return;
        }
        tokio::time::sleep_until(deadline.min(now + PROBE_INTERVAL)).await;
    }
}

/// How long a watch whose connection dropped probes etcd before it tries to re-open
/// anyway (the open itself is the real test; the probe only makes the re-open prompt).
const PROBE_FOR: Duration = Duration::from_secs(3);

/// Waits `delay`, then until etcd answers (probing every 100 ms), for at most
/// [`PROBE_FOR`].
pub(super) async fn wait_until_answering(registry: &Registry, key: &str, delay: Duration) {
    tokio::time::sleep(delay).await;
    let deadline = tokio::time::Instant::now() + PROBE_FOR;
    while tokio::time::Instant::now() < deadline {
        // A generous limit: a probe under load, on a connection being re-established,
        // may take longer than a probe interval and still mean "etcd is back".
        if answers(registry, key, Duration::from_secs(1)).await {
            return;
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_and_resets_after_a_healthy_period() {
        let mut backoff = Backoff::new(BackoffConfig {
            min: Duration::from_millis(100),
            max: Duration::from_millis(1000),
            reset_after: Duration::from_secs(60),
        });
        let delays: Vec<_> = (0..6).map(|_| backoff.delay(Duration::ZERO)).collect();
        for (delay, base) in delays.iter().zip([100, 200, 400, 800, 1000, 1000]) {
            let base = Duration::from_millis(base);
            assert!(
                *delay >= base && *delay <= (base * 3 / 2).min(Duration::from_millis(1000)),
                "{delays:?}"
            );
        }
        assert!(backoff.delay(Duration::from_secs(61)) < Duration::from_millis(151));
    }

    #[test]
    fn a_dropped_connection_waits_at_most_a_second_however_often_it_dropped() {
        assert_eq!(reconnect_delay(0), Duration::ZERO);
        assert_eq!(reconnect_delay(1), Duration::from_millis(100));
        assert_eq!(reconnect_delay(2), Duration::from_millis(200));
        assert_eq!(reconnect_delay(5), MAX_RECONNECT_DELAY);
        assert_eq!(reconnect_delay(u32::MAX), MAX_RECONNECT_DELAY);
    }
}
