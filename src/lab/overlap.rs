//! `overlap`: two controllers with the same selector and different replicas (3 and 5 at
//! the quick size); figure: pod creates and deletes per minute once they have had two
//! periods to settle. Nothing in a 2014 pod said which controller made it, so each of
//! the two counted every pod of both and neither could ever be satisfied: one deletes
//! what the other creates, every tick, forever (weakness 5, docs/2014.md). kcm keeps
//! 2014's ReplicationControllers on purpose, so two of them fight under kcm too (kcm
//! warns of the overlap and its CLI refuses to make one; docs/departures.md, "manager:
//! overlapping selectors"); the same pair as ReplicaSets, under kcm's ReplicaSet
//! controller, settles: each owns its pods by controller reference and ignores the
//! other's.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use super::history::course;
use super::loops::RunningLoop;
use super::{Lab, Loop, Measured, Row, Scenario, Sizes};
use crate::etcd_watcher::{BackoffConfig, Watcher};
use crate::informer::InformerFactory;
use crate::replicaset::{ReplicaSetConfig, ReplicaSetController};
use crate::status::Metrics;

impl Lab {
    /// `overlap`: two controllers selecting `app: web` (2014: ReplicationControllers
    /// under the 2014 loop; kcm: ReplicaSets under kcm's ReplicaSet controller), left two
    /// periods, then the pod creates and deletes of [`Lab::overlap_window`], per minute.
    /// Beside it ([`Lab::note`]): the same pair as ReplicationControllers in each loop.
    pub(super) async fn overlap(&self, which: Loop, namespace: &str) -> anyhow::Result<Measured> {
        const CONTROLLERS: &str = "two ReplicationControllers: pod creates and deletes per minute";
        match which {
            Loop::V2014 => {
                let fight = self
                    .churn(Pair::Controllers, self.start(Loop::V2014), namespace)
                    .await?;
                self.note(CONTROLLERS, fight.0);
                Ok(fight)
            }
            Loop::Kcm => {
                // kcm's ReplicationControllers keep 2014's semantics: they fight too.
                let rc = format!("{namespace}-rc");
                let fight = self
                    .churn(Pair::Controllers, self.start(Loop::Kcm), &rc)
                    .await?;
                self.note(CONTROLLERS, fight.0);
                self.churn(Pair::ReplicaSets, self.start_replica_sets(), namespace)
                    .await
            }
        }
    }

    /// Creates the pair in `namespace` with `running` (a loop that runs them) started,
    /// lets it settle two periods (a ReplicaSet pair first makes all its pods), then
    /// counts the pod creates and deletes of [`Lab::overlap_window`], per minute.
    async fn churn(
        &self,
        pair: Pair,
        running: RunningLoop,
        namespace: &str,
    ) -> anyhow::Result<Measured> {
        let [fewer, more] = self.sizes.overlap_replicas;
        for (name, replicas) in [("web-a", fewer), ("web-b", more)] {
            match pair {
                Pair::Controllers => {
                    self.create_controller_of(namespace, name, replicas, "web")
                        .await?
                }
                Pair::ReplicaSets => {
                    self.create_replica_set_of(namespace, name, replicas, "web")
                        .await?
                }
            }
        }
        if pair == Pair::ReplicaSets {
            self.wait_pods(namespace, (fewer + more) as usize).await?;
        }
        tokio::time::sleep(2 * self.period).await;
        let from = self.revision().await?;
        let window = self.overlap_window();
        tokio::time::sleep(window).await;
        running.stop().await?;
        let (events, end) = self.history(from).await?;
        let pods_dir = self.pods_dir(namespace);
        let churn = events
            .iter()
            .filter(|e| e.key.starts_with(&pods_dir) && (e.created || !e.put));
        let (writes, points) = course(from, end, 0, churn, |_, n| n + 1);
        let per_minute = writes * 60.0 / window.as_secs_f64();
        Ok(((per_minute * 10.0).round() / 10.0, points))
    }

    /// How long `overlap` counts: three periods.
    fn overlap_window(&self) -> Duration {
        3 * self.period
    }

    /// etcd's revision now.
    pub(super) async fn revision(&self) -> anyhow::Result<i64> {
        let response = self
            .client
            .kv_client()
            .get(self.root.as_str(), None)
            .await
            .context("read etcd's revision")?;
        Ok(response.header().context("get header")?.revision())
    }

    /// kcm's ReplicaSet controller on the lab's prefix (through the lab's apiserver with
    /// `--topology api`).
    fn start_replica_sets(&self) -> RunningLoop {
        if let Some(target) = &self.api {
            let (stop, task) = super::through::start_replica_sets(target.clone(), self.period);
            return RunningLoop { stop, task };
        }
        let metrics = Arc::new(Metrics::new());
        let informers = InformerFactory::new(
            Watcher::new(&self.client, self.registry.clone()),
            BackoffConfig::default(),
            metrics.clone(),
        );
        let config = ReplicaSetConfig {
            sync_period: self.period,
            ..ReplicaSetConfig::default()
        };
        let controller = ReplicaSetController::new(self.registry.clone(), config, metrics);
        let stop = CancellationToken::new();
        let running = controller.start(&informers, stop.clone().cancelled_owned());
        let task = tokio::spawn(informers.serve(running));
        RunningLoop { stop, task }
    }
}

/// The kind of the overlapping pair.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pair {
    Controllers,
    ReplicaSets,
}

/// The table's row of `overlap`.
pub(super) fn row(sizes: Sizes, v2014: f64, kcm: f64) -> Row {
    let [fewer, more] = sizes.overlap_replicas;
    Row {
        scenario: Scenario::Overlap.name(),
        measure: format!(
            "pod creates and deletes per minute, two controllers of {fewer} and {more} replicas with one selector (2014: ReplicationControllers; kcm: ReplicaSets)"
        ),
        unit: "writes/min",
        v2014,
        kcm,
        departure: "ownership (ReplicaSets)",
        weaknesses: &[5],
        issues: "#2210, #11981, #14961",
        also: Vec::new(),
    }
}
