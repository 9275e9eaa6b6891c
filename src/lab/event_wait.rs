//! `event-wait`: many converged controllers whose pods share one namespace, and one more
//! controller (`probe`) scaled up at random moments; figure: mean seconds from a scale-up
//! to its first pod. 2014 read watch events and the resync tick in one loop: while a
//! resync ran (every controller listing the whole namespace's pods, weakness 2), the
//! probe's event waited for all of it (weakness 7, docs/2014.md). kcm's resync reads
//! its caches and its work queue hands the probe's key to the next free worker.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use etcd_client::{Txn, TxnOp};

use super::fixtures::{mean_seconds, wait_for_a_create};
use super::{Lab, Loop, Measured, Row, Scenario, Sizes};
use crate::api::{self, ObjectMeta, Pod, PodPhase, PodStatus};

/// How long after a tick `event-wait` scales the probe: time for the 2014 loop to have
/// read the tick and begun its resync.
const RESYNC_BEGUN: Duration = Duration::from_millis(20);

impl Lab {
    /// `event-wait`: `event_wait_controllers` converged controllers of
    /// `event_wait_pods_each` pods in `namespace`, written before the loop starts; then
    /// the probe scaled up one pod at a time, at random moments of the period.
    pub(super) async fn event_wait(
        &self,
        which: Loop,
        namespace: &str,
    ) -> anyhow::Result<Measured> {
        let sizes = self.sizes;
        self.write_converged(
            namespace,
            sizes.event_wait_controllers,
            sizes.event_wait_pods_each,
        )
        .await?;
        self.create_controller(namespace, "probe", 0).await?;
        // Both loops tick at `started` + k periods (2014's `time.Tick`; kcm's resync).
        let started = tokio::time::Instant::now();
        let running = self.start(which);
        let pods_dir = self.pods_dir(namespace);
        let total = sizes.event_wait_controllers * sizes.event_wait_pods_each as usize;
        // The loop has started and handled the probe once (2014 syncs every listed
        // controller first, one after another).
        let mut watch = self.at_a_random_moment_watch(&pods_dir).await?;
        self.scale(namespace, "probe", 1).await?;
        wait_for_a_create(&mut watch, Duration::from_secs(60) + 3 * self.period).await?;
        let mut trials = Vec::new();
        for trial in 1..=sizes.event_wait_trials {
            let mut watch = self.watch_dir(&pods_dir).await?;
            // Just after a tick: 2014's resync has begun (the random moments of `heal`
            // would land in it only as often as it fills the period).
            let elapsed = started.elapsed().as_secs_f64() / self.period.as_secs_f64();
            let tick = started + self.period.mul_f64(elapsed.floor() + 1.0);
            tokio::time::sleep_until(tick + RESYNC_BEGUN).await;
            let scaled_at = Instant::now();
            self.scale(namespace, "probe", 1 + trial as i64).await?;
            wait_for_a_create(&mut watch, Duration::from_secs(60) + 3 * self.period).await?;
            trials.push((trial as f64, scaled_at.elapsed().as_secs_f64()));
            self.wait_pods(namespace, total + 1 + trial).await?;
        }
        running.stop().await?;
        Ok((mean_seconds(&trials), trials))
    }

    /// Writes `controllers` controllers `web-NNNN` of `pods_each` replicas, and their
    /// pods, straight to etcd (a hundred keys a transaction): converged before any loop
    /// looks.
    async fn write_converged(
        &self,
        namespace: &str,
        controllers: usize,
        pods_each: i64,
    ) -> anyhow::Result<()> {
        let mut puts = Vec::new();
        for c in 0..controllers {
            let name = format!("web-{c:04}");
            self.create_controller(namespace, &name, pods_each).await?;
            for p in 0..pods_each {
                let pod = Pod {
                    metadata: ObjectMeta {
                        labels: [("app", name.as_str())].into_iter().collect(),
                        uid: uuid::Uuid::new_v4().to_string(),
                        ..ObjectMeta::named(namespace, format!("{name}-{p:04}"))
                    },
                    status: Some(PodStatus {
                        phase: PodPhase::Running,
                        ..PodStatus::default()
                    }),
                    ..Pod::default()
                };
                let key = self.registry.key::<Pod>(namespace, &pod.metadata.name);
                puts.push(TxnOp::put(key, api::encode(&pod)?, None));
            }
        }
        while !puts.is_empty() {
            let batch: Vec<TxnOp> = puts.drain(..puts.len().min(100)).collect();
            self.client
                .kv_client()
                .txn(Txn::new().and_then(batch))
                .await
                .context("write the converged controllers' pods")?;
        }
        Ok(())
    }
}

/// The table's row of `event-wait`.
pub(super) fn row(sizes: Sizes, v2014: f64, kcm: f64) -> Row {
    Row {
        scenario: Scenario::EventWait.name(),
        measure: format!(
            "mean time from a scale-up to its first pod while {} controllers × {} pods of one namespace resync, {} trials",
            sizes.event_wait_controllers, sizes.event_wait_pods_each, sizes.event_wait_trials
        ),
        unit: "s",
        v2014,
        kcm,
        departure: "manager: one loop",
        weaknesses: &[7, 2],
        issues: "#25563, #6866",
        also: Vec::new(),
    }
}
