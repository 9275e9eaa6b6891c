//! `resync`: a no-op resync of many converged controllers against one raw list of all
//! their pods, and the 2014 way (a fresh list per controller), extrapolated.

use std::sync::Arc;
use std::time::Instant;

use etcd_client::GetOptions;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::fixtures::{controller, pod_document};
use super::report::{median, row};
use super::{Bench, Row};
use crate::api::{self, Pod};
use crate::etcd_watcher::Watcher;
use crate::informer::{ControllerInformer, ObjectKey, PodInformer};
use crate::replication_manager::{ManagerConfig, ReplicationManager};
use crate::status::Metrics;

impl Bench {
    /// resync: a no-op resync of many converged controllers against one raw list of all
    /// their pods; and the 2014 way (a fresh list per controller), extrapolated.
    pub(super) async fn resync(&self) -> anyhow::Result<Vec<Row>> {
        let prefix = self.prefix("resync");
        let (n_controllers, each) = (self.sizes.resync_controllers, self.sizes.resync_pods_each);
        let mut documents = Vec::new();
        for i in 0..n_controllers {
            let rc = controller("resync", &format!("rc-{i:04}"), each as i64, each as i64);
            self.put_controller(&prefix, &rc).await?;
            for slot in 0..each as u64 {
                let (name, value) = pod_document(&rc, slot);
                documents.push((api::object_key::<Pod>(&prefix, "resync", &name), value));
            }
        }
        self.create_all(documents, 256).await?;
        let registry = self.registry(&prefix).await?;
        let watcher = Watcher::new(&self.client, registry.clone());
        let stop = CancellationToken::new();
        let controllers = ControllerInformer::new(watcher.clone());
        let pods = PodInformer::new(watcher);
        let mut informers = JoinSet::new();
        informers.spawn(controllers.clone().run(stop.clone().cancelled_owned()));
        informers.spawn(pods.clone().run(stop.clone().cancelled_owned()));
        controllers.wait_synced().await;
        pods.wait_synced().await;
        let metrics = Arc::new(Metrics::new());
        let manager =
            ReplicationManager::new(registry.clone(), ManagerConfig::default(), metrics.clone())
                .with_caches(controllers.clone(), pods.clone());
        let keys = controllers.keys();
        anyhow::ensure!(
            keys.len() == n_controllers,
            "{} controllers cached",
            keys.len()
        );
        // Warm up (and check that there is nothing to do).
        anyhow::ensure!(
            manager.sync_all(keys.clone()).await == 0,
            "resync syncs failed"
        );
        let mut kcm = Vec::new();
        for _ in 0..self.sizes.repeats {
            let started = Instant::now();
            manager.sync_all(keys.clone()).await;
            kcm.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        anyhow::ensure!(
            metrics.pods_created.get() == 0 && metrics.pods_deleted.get() == 0,
            "the resync was not a no-op"
        );
        let mut raw = Vec::new();
        let dir = self.pod_dir(&prefix, "resync");
        let mut kv = registry.kv();
        for _ in 0..self.sizes.repeats {
            let started = Instant::now();
            let listed = kv
                .get(dir.as_str(), Some(GetOptions::new().with_prefix()))
                .await?;
            anyhow::ensure!(
                listed.kvs().len() == n_controllers * each,
                "listed {}",
                listed.kvs().len()
            );
            raw.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        // The 2014 way: every sync lists the namespace. Measured on a sample.
        let fresh = ReplicationManager::new(
            registry.clone(),
            ManagerConfig {
                fresh_reads: true,
                ..ManagerConfig::default()
            },
            metrics.clone(),
        );
        let sample: Vec<ObjectKey> = keys
            .iter()
            .take(self.sizes.resync_fresh_sample)
            .cloned()
            .collect();
        let started = Instant::now();
        fresh.sync_all(sample.clone()).await;
        let fresh_ms = started.elapsed().as_secs_f64() * 1000.0 * keys.len() as f64
            / sample.len().max(1) as f64;
        stop.cancel();
        while informers.join_next().await.is_some() {}
        let raw_ms = median(raw);
        let baseline_is = format!("one raw list of {} pods", n_controllers * each);
        Ok(vec![
            row(
                "resync",
                format!("no-op resync, {n_controllers} controllers × {each} pods, from the cache"),
                "ms",
                median(kcm),
                raw_ms,
                baseline_is.clone(),
                Some((1.0, false)),
            ),
            row(
                "resync",
                format!(
                    "the same with a fresh list per sync (2014), extrapolated from {}",
                    sample.len()
                ),
                "ms",
                fresh_ms,
                raw_ms,
                baseline_is,
                None,
            ),
        ])
    }
}
