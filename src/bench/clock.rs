//! When etcd reached each revision: the clock the scale rows time their pods by.
//!
//! A watch tells which revision holds the N-th pod, but not when etcd committed it. Under
//! a write load near etcd's limit a watcher falls behind for tens to hundreds of
//! milliseconds at a time: etcd 3.4 buffers 128 responses a watcher, a watcher whose
//! buffer is full waits for etcd's resync of slow watchers, which runs every 100 ms, and
//! the events then arrive in one burst. docs/PERFORMANCE.md shows etcd's own count of
//! slow watchers during the scale rows. Timed by the watch, a run ends at the first
//! resync after its last write, and either side of a row could lose up to a tenth of a
//! second that way.
//!
//! The clock asks etcd for its current revision every [`TICK`] (the maintenance `Status`
//! call, which reads no keys) from a thread and a connection of its own, so neither the
//! writes under test nor a busy runtime delay its answers. A revision was committed no
//! later than the first answer that shows it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::client::{self, ClientConfig};

/// How often the clock asks etcd: the resolution of the times it gives.
pub(super) const TICK: Duration = Duration::from_millis(5);

/// A running clock; [`RevisionClock::stop`] ends it and returns what it saw. Dropped
/// unstopped, it stops after its next answer.
pub(super) struct RevisionClock {
    stop: Arc<AtomicBool>,
    ticks: tokio::sync::oneshot::Receiver<anyhow::Result<Ticks>>,
}

impl RevisionClock {
    /// Starts asking the etcd of `config` for its revision, and returns once the first
    /// answer is in.
    pub(super) async fn start(config: &ClientConfig) -> anyhow::Result<RevisionClock> {
        let stop = Arc::new(AtomicBool::new(false));
        let (started, first) = tokio::sync::oneshot::channel();
        let (done, ticks) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("bench-clock".into())
            .spawn({
                let (config, stop) = (config.clone(), stop.clone());
                move || {
                    let _ = done.send(run(&config, &stop, started));
                }
            })
            .context("start the bench's revision clock")?;
        let mut clock = RevisionClock { stop, ticks };
        if first.await.is_err() {
            // The thread ended before its first answer: its error says why.
            return Err(clock.stop().await.err().unwrap_or_else(|| {
                anyhow::anyhow!("the revision clock stopped before its first answer")
            }));
        }
        Ok(clock)
    }

    /// Stops the clock after one more answer, so that every revision etcd had reached
    /// by now has a time.
    pub(super) async fn stop(&mut self) -> anyhow::Result<Ticks> {
        self.stop.store(true, Ordering::Relaxed);
        (&mut self.ticks)
            .await
            .map_err(|_| anyhow::anyhow!("the revision clock panicked"))?
    }
}

impl Drop for RevisionClock {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The clock's thread: its own runtime and connection, one `Status` a tick.
fn run(
    config: &ClientConfig,
    stop: &AtomicBool,
    started: tokio::sync::oneshot::Sender<()>,
) -> anyhow::Result<Ticks> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("the revision clock's runtime")?;
    runtime.block_on(async {
        let client = client::connect(config).await?;
        let mut maintenance = client.maintenance_client();
        let mut ticks = Ticks::default();
        let mut started = Some(started);
        loop {
            // Read before the call: the last answer comes after the stop.
            let last = stop.load(Ordering::Relaxed);
            let status = maintenance
                .status()
                .await
                .context("the revision clock's status call")?;
            let revision = status.header().map_or(0, |h| h.revision());
            ticks.push(Instant::now(), revision);
            if let Some(started) = started.take() {
                let _ = started.send(());
            }
            if last {
                return Ok(ticks);
            }
            tokio::time::sleep(TICK).await;
        }
    })
}

/// The clock's answers: (when, etcd's revision then), in order.
#[derive(Debug, Default)]
pub(super) struct Ticks(Vec<(Instant, i64)>);

impl Ticks {
    fn push(&mut self, at: Instant, revision: i64) {
        self.0.push((at, revision));
    }

    /// When etcd had reached `revision`: the first answer that shows it. `None` when no
    /// answer does (the clock stopped before it).
    pub(super) fn reached(&self, revision: i64) -> Option<Instant> {
        // Revisions only grow, so the answers are sorted by revision too.
        let i = self.0.partition_point(|&(_, r)| r < revision);
        self.0.get(i).map(|&(at, _)| at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_is_reached_at_the_first_answer_that_shows_it() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut ticks = Ticks::default();
        for (ms, revision) in [(0, 10), (2, 10), (4, 15), (6, 40)] {
            ticks.push(at(ms), revision);
        }
        assert_eq!(ticks.reached(5), Some(at(0)));
        assert_eq!(ticks.reached(10), Some(at(0)));
        assert_eq!(ticks.reached(11), Some(at(4)));
        assert_eq!(ticks.reached(15), Some(at(4)));
        assert_eq!(ticks.reached(16), Some(at(6)));
        assert_eq!(ticks.reached(41), None);
    }
}
