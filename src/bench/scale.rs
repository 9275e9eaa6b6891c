//! `scale-up` and `scale-down`: one controller 0 → N → 0 replicas, against create-if-absent
//! transactions (and guarded deletes) of the same documents at kcm's concurrency.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use super::fixtures::{controller, pod_document, poll_until};
use super::report::row;
use super::{Bench, Row};
use crate::api::{self, Pod, ReplicationController};
use crate::registry::Registry;
use crate::replication_manager::ManagerConfig;

impl Bench {
    /// scale-up (`up`) or scale-down: kcm against the raw baseline.
    pub(super) async fn scale(&self, up: bool) -> anyhow::Result<Vec<Row>> {
        let scenario = if up { "scale-up" } else { "scale-down" };
        let n = self.sizes.scale_replicas;
        let prefix = self.prefix(scenario);
        let config = ManagerConfig::default();
        // kcm's concurrency: at most the burst limit in flight, creates in slow-start
        // batches that grow up to it, deletes all at once up to it.
        let create_concurrency = config.burst_replicas;
        let delete_concurrency = config.burst_replicas;
        let limit = Duration::from_secs(300);

        // The baseline: the same documents, written by etcd-client directly.
        let rc = controller("base", "web", n as i64, 0);
        let documents: Vec<(String, Vec<u8>)> = (0..n as u64)
            .map(|slot| {
                let (name, value) = pod_document(&rc, slot);
                (api::object_key::<Pod>(&prefix, "base", &name), value)
            })
            .collect();
        let dir = self.pod_dir(&prefix, "base");
        let since = Arc::new(Mutex::new(None));
        let created = if up {
            let counter = self.count_pods(
                dir.clone(),
                self.revision().await?,
                0,
                move |c| c >= n,
                since.clone(),
            );
            let started = Instant::now();
            *since.lock().expect("since lock") = Some(started);
            let created = self.create_all(documents, create_concurrency).await?;
            let curve = tokio::time::timeout(limit, counter)
                .await
                .context("baseline scale-up")???;
            let seconds = curve
                .last()
                .map_or(started.elapsed().as_secs_f64(), |p| p.0);
            self.store_curve(scenario, "baseline", curve);
            (created, seconds)
        } else {
            let created = self.create_all(documents, create_concurrency).await?;
            (created, 0.0)
        };
        let (created, mut baseline_seconds) = created;
        if !up {
            let counter = self.count_pods(
                dir.clone(),
                self.revision().await?,
                n,
                |c| c == 0,
                since.clone(),
            );
            let started = Instant::now();
            *since.lock().expect("since lock") = Some(started);
            self.delete_all(created, delete_concurrency).await?;
            let curve = tokio::time::timeout(limit, counter)
                .await
                .context("baseline scale-down")???;
            baseline_seconds = curve
                .last()
                .map_or(started.elapsed().as_secs_f64(), |p| p.0);
            self.store_curve(scenario, "baseline", curve);
        } else {
            // Clean up for the kcm run (not measured).
            self.delete_all(created, delete_concurrency).await?;
        }

        // kcm: one controller, scaled by writing spec.replicas as kubecfg would.
        let manager = self.start_manager(&prefix, config.clone()).await?;
        let registry = self.registry(&prefix).await?;
        let start_replicas = if up { 0 } else { n as i64 };
        self.put_controller(&prefix, &controller("kcm", "web", start_replicas, 0))
            .await?;
        let dir = self.pod_dir(&prefix, "kcm");
        let count_now = |registry: Registry| async move {
            let listed = registry
                .list::<Pod>(Some("kcm"), &crate::labels::Selector::everything())
                .await?;
            anyhow::Ok(listed.items.len())
        };
        // Converge on the starting point (for scale-down: n pods, not measured).
        poll_until(limit, "the starting pods", || {
            let registry = registry.clone();
            async move {
                let rc: ReplicationController = registry.get("kcm", "web").await?;
                Ok(count_now(registry).await? == start_replicas as usize
                    && rc.status.replicas == start_replicas)
            }
        })
        .await?;
        let target = if up { n } else { 0 };
        let counter = self.count_pods(
            dir,
            self.revision().await?,
            start_replicas as usize,
            move |c| c == target,
            since.clone(),
        );
        let started = Instant::now();
        *since.lock().expect("since lock") = Some(started);
        registry
            .guaranteed_update::<ReplicationController, _>("kcm", "web", |mut rc| {
                rc.spec.replicas = target as i64;
                Ok(rc)
            })
            .await?;
        let curve = tokio::time::timeout(limit, counter)
            .await
            .context("kcm scale")???;
        let kcm_seconds = curve
            .last()
            .map_or(started.elapsed().as_secs_f64(), |p| p.0);
        self.store_curve(scenario, "kcm", curve);
        manager.stop().await?;
        let rate = |seconds: f64| {
            if seconds > 0.0 {
                n as f64 / seconds
            } else {
                0.0
            }
        };
        let (what, concurrency) = if up {
            ("create-if-absent txns", create_concurrency)
        } else {
            ("guarded delete txns", delete_concurrency)
        };
        Ok(vec![row(
            if up { "scale-up" } else { "scale-down" },
            format!(
                "pods/s, {} → {} ({:.2}s vs {:.2}s)",
                if up { 0 } else { n },
                target,
                kcm_seconds,
                baseline_seconds
            ),
            "pods/s",
            rate(kcm_seconds),
            rate(baseline_seconds),
            format!("{what}, {concurrency} in flight"),
            Some((0.7, true)),
        )])
    }
}
