//! `watch` and `resume`: typed events per second from kcm's resumable watch against a raw
//! watch, and catching up after a connection cut against a raw watch from the revision.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::task::JoinSet;

use super::fixtures::{controller, drive, pod_document, raw_catch_up};
use super::report::{median, row};
use super::{Bench, Row};
use crate::api::{self, Pod};
use crate::client;
use crate::etcd_process::local_client_addr;
use crate::etcd_watcher::{self, Update, Watcher};
use crate::measure::proxy::CutProxy;
use crate::registry::Registry;

impl Bench {
    /// Writes `n` pods under `namespace` and returns the revisions before and after.
    async fn write_stream(
        &self,
        prefix: &str,
        namespace: &str,
        n: usize,
    ) -> anyhow::Result<(i64, i64)> {
        let rc = controller(namespace, "stream", n as i64, 0);
        let documents: Vec<(String, Vec<u8>)> = (0..n as u64)
            .map(|slot| {
                let (name, value) = pod_document(&rc, slot);
                (api::object_key::<Pod>(prefix, namespace, &name), value)
            })
            .collect();
        let before = self.revision().await?;
        self.create_all(documents, 256).await?;
        Ok((before, self.revision().await?))
    }

    /// watch: typed events per second from kcm's resumable watch against a raw watch of
    /// the same stream (both read the stored history from the same revision).
    pub(super) async fn watch(&self) -> anyhow::Result<Vec<Row>> {
        let prefix = self.prefix("watch");
        let n = self.sizes.watch_events;
        let (before, after) = self.write_stream(&prefix, "watch", n).await?;
        let registry = self.registry(&prefix).await?;
        let watcher = Watcher::new(&self.client, registry);
        let dir = self.pod_dir(&prefix, "watch");
        let (mut kcm, mut raw) = (Vec::new(), Vec::new());
        for _ in 0..self.sizes.repeats {
            let seconds = raw_catch_up(&self.client, &dir, before, after).await?;
            raw.push(n as f64 / seconds);
            let mut tasks = JoinSet::new();
            let started = Instant::now();
            // On its own task feeding a channel, polled all the time as a controller's loop
            // polls it.
            let mut watch = drive(
                watcher.resumable_list::<Pod>(
                    Some("watch"),
                    &before.to_string(),
                    etcd_watcher::everything(),
                )?,
                &mut tasks,
            );
            let mut events = 0;
            loop {
                if let Some(Update::Event(event, _)) = watch.recv().await {
                    events += 1;
                    if event.revision().unwrap_or(0) >= after {
                        break;
                    }
                }
            }
            anyhow::ensure!(events == n, "kcm's watch delivered {events} of {n} events");
            kcm.push(n as f64 / started.elapsed().as_secs_f64());
            tasks.shutdown().await;
        }
        Ok(vec![row(
            "watch",
            format!("events/s, {n} pod creates, decoded and typed"),
            "events/s",
            median(kcm),
            median(raw),
            "raw etcd-client watch, prev_kv",
            Some((0.9, true)),
        )])
    }

    /// resume: a watch cut off while `n` events are written; time from restore until it
    /// has caught up, against a raw watch from the same revision.
    pub(super) async fn resume(&self) -> anyhow::Result<Vec<Row>> {
        let prefix = self.prefix("resume");
        let n = self.sizes.resume_events;
        let etcd_addr = self
            .client_config
            .endpoints
            .first()
            .and_then(|url| {
                local_client_addr(url)
                    .or_else(|| url.strip_prefix("http://").and_then(|a| a.parse().ok()))
            })
            .context("resume needs an http:// etcd endpoint")?;
        let proxy = CutProxy::start(etcd_addr).await?;
        let config = proxy.client_config(&self.client_config);
        let proxied = client::connect(&config).await?;
        let registry = Registry::new(&proxied, &prefix)?;
        let watcher = Watcher::new(&proxied, registry);
        let start = self.revision().await?;
        // On its own task, as the controllers run it: it notices the cut, and retries,
        // while nobody reads from it.
        let mut tasks = JoinSet::new();
        let mut watch = drive(
            watcher.resumable_list::<Pod>(
                Some("resume"),
                &start.to_string(),
                etcd_watcher::everything(),
            )?,
            &mut tasks,
        );
        // One event before the cut, so the watch is surely open and delivering.
        let warm_rc = controller("resume", "warm", 1, 0);
        let (name, value) = pod_document(&warm_rc, 0);
        self.put(&api::object_key::<Pod>(&prefix, "resume", &name), value)
            .await?;
        loop {
            if let Some(Update::Event(..)) = watch.recv().await {
                break;
            }
        }
        proxy.cut();
        let (before, after) = self.write_stream(&prefix, "resume", n).await?;
        let restored = Instant::now();
        proxy.restore();
        let mut events = 0;
        loop {
            if let Some(Update::Event(event, _)) =
                tokio::time::timeout(Duration::from_secs(120), watch.recv())
                    .await
                    .context("the watch did not catch up within 120s")?
            {
                events += 1;
                if event.revision().unwrap_or(0) >= after {
                    break;
                }
            }
        }
        let kcm_seconds = restored.elapsed().as_secs_f64();
        anyhow::ensure!(events == n, "kcm's watch delivered {events} of {n} events");
        let dir = self.pod_dir(&prefix, "resume");
        let raw_seconds = raw_catch_up(&proxied, &dir, before, after).await?;
        tasks.shutdown().await;
        proxy.stop();
        Ok(vec![row(
            "resume",
            format!("s from restore to caught up, {n} events missed"),
            "s",
            kcm_seconds,
            raw_seconds,
            "raw watch from the same revision",
            Some((1.5, false)),
        )])
    }
}
