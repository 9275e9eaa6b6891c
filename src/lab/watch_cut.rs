//! `watch-cut`: the loop's watch of controllers is cut (its lists and writes still reach
//! etcd) and a pod of a converged controller is deleted; figure: seconds from the delete
//! to the replacement. 2014 read its tick only inside the watch loop, so while no watch
//! could open no periodic sync ran at all (weakness 13, docs/2014.md): the pod comes
//! back only after the watch does. kcm's pods are watched on their own and its runner's
//! tick runs whatever the watches do: the pod comes back while the cut lasts. Like
//! `stale-watch`, it needs an etcd reachable over plain `http://` to put its proxy in
//! front of.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use super::fixtures::wait_for_a_create;
use super::loops::RunningLoop;
use super::{Lab, Loop, Measured, Row, Scenario, Sizes};
use crate::api::{Pod, ReplicationController};
use crate::client;
use crate::etcd_process::local_client_addr;
use crate::etcd_watcher::{BackoffConfig, Watcher};
use crate::informer::InformerFactory;
use crate::measure::proxy::CutProxy;
use crate::replication_2014;
use crate::replication_manager::{ManagerConfig, ReplicationManager};
use crate::status::Metrics;

impl Lab {
    /// `watch-cut`: a converged controller; its loop's controller watch cut; one of its
    /// pods deleted; the watch restored [`Lab::cut_for`] after the delete; the seconds from
    /// the delete to the replacement's create, as a watch on etcd sees it.
    pub(super) async fn watch_cut(&self, which: Loop, namespace: &str) -> anyhow::Result<Measured> {
        let upstream = self
            .client_config
            .endpoints
            .first()
            .and_then(|url| local_client_addr(url))
            .context("watch-cut needs an etcd reachable over plain http:// for its proxy")?;
        let proxy = CutProxy::start(upstream).await?;
        let proxied = client::connect(&proxy.client_config(&self.client_config)).await?;
        let cut_watcher = Watcher::new(&proxied, self.registry.clone());
        let running = match which {
            Loop::V2014 => self.start_2014_watching(cut_watcher),
            Loop::Kcm => self.start_kcm_watching_controllers(cut_watcher),
        };
        let replicas = self.sizes.watch_cut_replicas;
        self.create_controller(namespace, "web", replicas).await?;
        self.wait_pods(namespace, replicas as usize).await?;

        proxy.cut();
        // The cut resets the watch's connection at once; a second lets the loop see it.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let pods_dir = self.pods_dir(namespace);
        let mut watch = self.at_a_random_moment_watch(&pods_dir).await?;
        let victim = self.pods(namespace).await?.remove(0);
        let deleted_at = Instant::now();
        self.registry
            .delete::<Pod>(namespace, &victim.metadata.name, None)
            .await?;
        let cut = self.cut_for();
        // Not replaced within the cut (or the watch failed): wait on, with the watch back.
        let replaced = wait_for_a_create(&mut watch, cut).await.is_ok();
        proxy.restore();
        if !replaced {
            wait_for_a_create(&mut watch, Duration::from_secs(30) + 3 * self.period).await?;
        }
        let seconds = deleted_at.elapsed().as_secs_f64();
        self.wait_pods(namespace, replicas as usize).await?;
        running.stop().await?;
        proxy.stop();
        let seconds = (seconds * 1000.0).round() / 1000.0;
        Ok((seconds, vec![(1.0, seconds)]))
    }

    /// How long `watch-cut` keeps the controller watch cut after the delete: three
    /// periods, so a loop whose tick ran without a watch would heal well within it.
    pub(super) fn cut_for(&self) -> Duration {
        3 * self.period
    }

    /// The 2014 loop with its watch through `watcher`, its lists and writes on the lab's
    /// connection.
    fn start_2014_watching(&self, watcher: Watcher) -> RunningLoop {
        let manager = replication_2014::ReplicationManager::new(self.registry.clone(), watcher);
        let stop = CancellationToken::new();
        let task = tokio::spawn(manager.run(self.period, stop.clone()));
        RunningLoop { stop, task }
    }

    /// kcm's manager with its controller informer reading through `watcher`, its pod
    /// informer and its writes on the lab's connection.
    fn start_kcm_watching_controllers(&self, watcher: Watcher) -> RunningLoop {
        let metrics = Arc::new(Metrics::new());
        let informers = InformerFactory::new(
            Watcher::new(&self.client, self.registry.clone()),
            BackoffConfig::default(),
            metrics.clone(),
        )
        .with_watcher_for::<ReplicationController>(watcher);
        let config = ManagerConfig {
            sync_period: self.period,
            ..ManagerConfig::default()
        };
        let manager = ReplicationManager::new(self.registry.clone(), config, metrics);
        let stop = CancellationToken::new();
        let running = manager.start(&informers, stop.clone().cancelled_owned());
        let task = tokio::spawn(informers.serve(running));
        RunningLoop { stop, task }
    }
}

/// The table's row of `watch-cut`.
pub(super) fn row(sizes: Sizes, v2014: f64, kcm: f64) -> Row {
    Row {
        scenario: Scenario::WatchCut.name(),
        measure: format!(
            "time from a pod's delete to its replacement, {} replicas, the controller watch cut for 3 periods",
            sizes.watch_cut_replicas
        ),
        unit: "s",
        v2014,
        kcm,
        departure: "manager: one loop",
        weaknesses: &[13],
        issues: "#6866",
        also: Vec::new(),
    }
}
