//! `stale-watch`: the loop's connection is cut while etcd's history moves on and is
//! compacted; then scale-ups; figure: mean seconds from a scale-up to its first pod (2014
//! re-watches from its stale resourceVersion forever, each time a 410, and only the tick,
//! read in the moment between two failed watches, heals; kcm relists and reacts at once)
//! (#3829). It runs only on an etcd the lab started.

use std::time::{Duration, Instant};

use anyhow::Context as _;

use super::fixtures::{mean_seconds, wait_for_a_create};
use super::{Lab, Loop, Measured, Row, Scenario, Sizes};
use crate::client;
use crate::etcd_process::local_client_addr;
use crate::measure::proxy::CutProxy;
use crate::registry::Registry;

/// etcd's count of watch streams opened.
const WATCHES_OPENED: &str = r#"grpc_server_started_total{grpc_method="Watch""#;

impl Lab {
    /// `stale-watch`: the loop's connection is cut while etcd's history moves on and is
    /// compacted, then restored; then scale-ups at random moments of the period; the mean
    /// seconds from each to the first pod it creates, as a watch on etcd sees them.
    pub(super) async fn stale_watch(
        &self,
        which: Loop,
        namespace: &str,
    ) -> anyhow::Result<Measured> {
        let upstream = self
            .client_config
            .endpoints
            .first()
            .and_then(|url| local_client_addr(url))
            .context("stale-watch needs the private etcd's http:// endpoint")?;
        let proxy = CutProxy::start(upstream).await?;
        let config = proxy.client_config(&self.client_config);
        let proxied = client::connect(&config).await?;
        let running = self.start_on(which, &proxied, Registry::new(&proxied, &self.root)?);
        self.create_controller(namespace, "web", 1).await?;
        self.wait_pods(namespace, 1).await?;

        proxy.cut();
        // The history the loop has not seen moves on, and is compacted away.
        let filler = format!("{}/~filler", self.root);
        for i in 0..10 {
            self.client
                .kv_client()
                .put(filler.as_str(), i.to_string(), None)
                .await
                .context("write past the loop's last revision")?;
        }
        let now = self
            .client
            .kv_client()
            .get(filler.as_str(), None)
            .await?
            .header()
            .context("get header")?
            .revision();
        self.client
            .kv_client()
            .compact(
                now,
                Some(etcd_client::CompactionOptions::new().with_physical()),
            )
            .await
            .context("compact etcd's history")?;
        proxy.restore();
        // Both loops may reconnect (2014's `Forever` waits a period first).
        tokio::time::sleep(self.period + Duration::from_secs(1)).await;

        let pods_dir = self.pods_dir(namespace);
        let opened_before = self.etcd_counter(WATCHES_OPENED).await?;
        let trials_from = Instant::now();
        let mut trials = Vec::new();
        for trial in 0..self.sizes.stale_watch_trials {
            let mut watch = self.at_a_random_moment_watch(&pods_dir).await?;
            let scaled_at = Instant::now();
            self.scale(namespace, "web", 2 + trial as i64).await?;
            wait_for_a_create(&mut watch, Duration::from_secs(30) + 3 * self.period).await?;
            trials.push(((trial + 1) as f64, scaled_at.elapsed().as_secs_f64()));
            self.wait_pods(namespace, 2 + trial).await?;
        }
        // The watches the loop opened meanwhile (the lab opened one per trial): 2014's
        // dead watch is opened again every period, and fails again.
        let opened = self.etcd_counter(WATCHES_OPENED).await? - opened_before - trials.len() as f64;
        let periods = trials_from.elapsed().as_secs_f64() / self.period.as_secs_f64();
        self.note(
            "watches the loop opened per period after the compaction",
            (opened / periods * 10.0).round() / 10.0,
        );
        running.stop().await?;
        proxy.stop();
        Ok((mean_seconds(&trials), trials))
    }
}

/// The table's row of `stale-watch`: what was measured, both loops' figures, the departure
/// and the issues behind it.
pub(super) fn row(sizes: Sizes, v2014: f64, kcm: f64) -> Row {
    Row {
        scenario: Scenario::StaleWatch.name(),
        measure: format!(
            "mean time from a scale-up to its first pod, after a compaction during a cut watch, {} trials",
            sizes.stale_watch_trials
        ),
        unit: "s",
        v2014,
        kcm,
        departure: "watch: compacted history",
        weaknesses: &[1],
        issues: "#3829, #1405",
        also: Vec::new(),
    }
}
