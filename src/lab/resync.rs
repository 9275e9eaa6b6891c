//! `resync`: many converged controllers; figure: etcd range requests per sync period,
//! from etcd's own `/metrics` (2014: one controller list plus one pod list per
//! controller; kcm: none, its caches answer) (#5884).

use std::time::{Duration, Instant};

use super::{Lab, Loop, Measured, Row, Scenario, Sizes};
use crate::api::Pod;
use crate::labels::Selector;

impl Lab {
    /// `resync`: many converged controllers; etcd's own count of range requests (its
    /// `/metrics`) over three sync periods, per period.
    pub(super) async fn resync(&self, which: Loop, namespace: &str) -> anyhow::Result<Measured> {
        let sizes = self.sizes;
        let running = self.start(which);
        // One namespace per controller, so each 2014 pod list reads only its own pods
        // (one namespace would make every list read them all: weakness 2 of docs/2014.md, squared).
        for i in 0..sizes.resync_controllers {
            self.create_controller(
                &format!("{namespace}-{i:04}"),
                "web",
                sizes.resync_pods_each,
            )
            .await?;
        }
        let want = sizes.resync_controllers * sizes.resync_pods_each as usize;
        let deadline = Instant::now() + Duration::from_secs(60) + 3 * self.period;
        loop {
            let all = self
                .registry
                .list::<Pod>(None, &Selector::everything())
                .await?;
            let have = all
                .items
                .iter()
                .filter(|p| p.metadata.namespace.starts_with(namespace) && p.is_active())
                .count();
            if have == want {
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the namespaces {namespace}-* did not reach {want} active pods (they have {have})"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // One quiet period first, so the measured ones hold only periodic work.
        tokio::time::sleep(self.period).await;
        let mut last = self.range_requests().await?;
        let first_served = self.apiserver_requests().await?;
        let mut periods = Vec::new();
        for period in 1..=3 {
            tokio::time::sleep(self.period).await;
            let now = self.range_requests().await?;
            periods.push((period as f64, now - last));
            last = now;
        }
        if let (Some(first), Some(then)) = (first_served, self.apiserver_requests().await?) {
            // With --topology api: what the apiserver served the loop, beside etcd's ranges.
            let per_period = (then - first) / periods.len() as f64;
            self.note(
                "requests the apiserver served per sync period",
                (per_period * 10.0).round() / 10.0,
            );
        }
        running.stop().await?;
        let mean = periods.iter().map(|p| p.1).sum::<f64>() / periods.len() as f64;
        Ok(((mean * 10.0).round() / 10.0, periods))
    }

    /// With `--topology api`, the requests the lab's apiserver has answered
    /// (`apiserver_request_total`, every verb and resource); `None` on etcd.
    async fn apiserver_requests(&self) -> anyhow::Result<Option<f64>> {
        let Some(target) = &self.api else {
            return Ok(None);
        };
        let api = crate::apiclient::connect(target).await?;
        let text = api
            .get_text("/metrics")
            .await
            .map_err(|e| anyhow::anyhow!("read the apiserver's /metrics: {e}"))?;
        let total = text
            .lines()
            .filter(|line| line.starts_with("apiserver_request_total{"))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        Ok(Some(total))
    }

    /// etcd's count of Range requests served (`grpc_server_started_total` of `KV/Range`).
    async fn range_requests(&self) -> anyhow::Result<f64> {
        self.etcd_counter(
            r#"grpc_server_started_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"}"#,
        )
        .await
    }
}

/// The table's row of `resync`: what was measured, both loops' figures, the departure
/// and the issues behind it.
pub(super) fn row(sizes: Sizes, v2014: f64, kcm: f64) -> Row {
    Row {
        scenario: Scenario::Resync.name(),
        measure: format!(
            "etcd range requests per sync period, {} converged controllers × {} pods (a namespace each)",
            sizes.resync_controllers, sizes.resync_pods_each
        ),
        unit: "requests",
        v2014,
        kcm,
        departure: "manager: reads",
        weaknesses: &[2],
        issues: "#5884, #2726",
        also: Vec::new(),
    }
}
