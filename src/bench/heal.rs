//! `heal`: delete one pod of a converged controller; time until its replacement exists.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use etcd_client::{EventType, GetOptions, WatchOptions};

use super::fixtures::{controller, poll_until};
use super::report::{percentile, row};
use super::{Bench, Row};
use crate::api::ReplicationController;
use crate::replication_manager::ManagerConfig;

impl Bench {
    /// heal: delete one pod of a converged controller; time until its replacement exists.
    pub(super) async fn heal(&self) -> anyhow::Result<Vec<Row>> {
        let prefix = self.prefix("heal");
        let replicas = self.sizes.heal_replicas;
        let config = ManagerConfig::default();
        let sync_period = config.sync_period;
        let manager = self.start_manager(&prefix, config).await?;
        let registry = self.registry(&prefix).await?;
        self.put_controller(&prefix, &controller("heal", "web", replicas as i64, 0))
            .await?;
        poll_until(
            Duration::from_secs(120),
            "the heal controller to converge",
            || {
                let registry = registry.clone();
                async move {
                    let rc: ReplicationController = registry.get("heal", "web").await?;
                    Ok(rc.status.replicas == replicas as i64)
                }
            },
        )
        .await?;
        let dir = self.pod_dir(&prefix, "heal");
        let mut kv = self.client.kv_client();
        let mut watch = self.client.watch_client();
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(self.revision().await? + 1);
        let mut stream = watch.watch(dir.as_str(), Some(options)).await?;
        let mut latencies = Vec::with_capacity(self.sizes.heal_trials);
        for trial in 0..self.sizes.heal_trials {
            let listed = kv
                .get(
                    dir.as_str(),
                    Some(GetOptions::new().with_prefix().with_keys_only()),
                )
                .await?;
            let victim = listed
                .kvs()
                .get(trial % listed.kvs().len().max(1))
                .map(|kv| kv.key().to_vec())
                .context("no pod to delete")?;
            kv.delete(victim, None).await?;
            let deleted_at = Instant::now();
            'replaced: loop {
                let response = tokio::time::timeout(Duration::from_secs(30), stream.message())
                    .await
                    .context("no replacement within 30s")??
                    .context("heal watch closed")?;
                for event in response.events() {
                    if event.event_type() == EventType::Put
                        && event.kv().is_some_and(|kv| kv.version() == 1)
                    {
                        break 'replaced;
                    }
                }
            }
            latencies.push(deleted_at.elapsed().as_secs_f64() * 1000.0);
        }
        manager.stop().await?;
        latencies.sort_by(f64::total_cmp);
        let expectation = sync_period.as_secs_f64() * 1000.0 / 2.0;
        let p50 = percentile(&latencies, 50.0);
        let p99 = percentile(&latencies, 99.0);
        let baseline_is = "2014: half the 10s sync period".to_string();
        let mut p99_row = row(
            "heal",
            format!("p99 delete → replacement, {} trials", latencies.len()),
            "ms",
            p99,
            expectation,
            baseline_is.clone(),
            None,
        );
        p99_row.target = "p99 ≤ 50 ms".into();
        p99_row.met = Some(p99 <= 50.0);
        Ok(vec![
            row(
                "heal",
                format!("p50 delete → replacement, {} trials", latencies.len()),
                "ms",
                p50,
                expectation,
                baseline_is,
                None,
            ),
            p99_row,
        ])
    }
}
