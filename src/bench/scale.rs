//! `scale-up` and `scale-down`: one controller 0 → N → 0 replicas, against create-if-absent
//! transactions (and guarded deletes) of the same documents at kcm's concurrency;
//! `rs-scale-up` and `rs-scale-down`: the same with one ReplicaSet and the ReplicaSet
//! controller (whose pod writes also compare the ReplicaSet's key), against the same
//! baseline on the ReplicaSet's pod documents. Each run measures each side twice, the
//! two orders balanced ([`Bench::scale`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use etcd_client::{GetOptions, WatchOptions};

use super::cpu::{self, CpuMark};
use super::fixtures::{controller, pod_document, poll_until, replica_set, rs_pod_document};
use super::report::{row, SCALE_TARGET};
use super::{Bench, ControllerGuard, PodCounter, Row, RunningManager};
use crate::api::{self, Pod, ReplicaSet, ReplicationController};
use crate::apiclient::{self, control, ApiSource, ApiTarget};
use crate::etcd_watcher::Watcher;
use crate::informer::InformerFactory;
use crate::record::EventBroadcaster;
use crate::registry::Registry;
use crate::replicaset::{ReplicaSetConfig, ReplicaSetController};
use crate::replication_manager::ManagerConfig;
use crate::status::Metrics;

/// Which controller a scale scenario scales: the 2014 ReplicationController with the
/// replication manager, or a ReplicaSet with the ReplicaSet controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    ReplicationController,
    ReplicaSet,
}

impl Kind {
    /// The scenario's name, e.g. `rs-scale-up`.
    pub(super) fn scenario(self, up: bool) -> &'static str {
        match (self, up) {
            (Kind::ReplicationController, true) => "scale-up",
            (Kind::ReplicationController, false) => "scale-down",
            (Kind::ReplicaSet, true) => "rs-scale-up",
            (Kind::ReplicaSet, false) => "rs-scale-down",
        }
    }

    /// The `n` pod documents (key, value) the controller `web` in `namespace` would
    /// create, as the baseline writes them.
    fn pod_documents(self, prefix: &str, namespace: &str, n: usize) -> Vec<(String, Vec<u8>)> {
        let key = |(name, value): (String, Vec<u8>)| {
            (api::object_key::<Pod>(prefix, namespace, &name), value)
        };
        match self {
            Kind::ReplicationController => {
                let rc = controller(namespace, "web", n as i64, 0);
                (0..n as u64).map(|s| key(pod_document(&rc, s))).collect()
            }
            Kind::ReplicaSet => {
                let rs = replica_set(namespace, "web", n as i64, 0);
                (0..n as u64)
                    .map(|s| key(rs_pod_document(&rs, s)))
                    .collect()
            }
        }
    }

    /// Writes the controller `web` in `namespace` with `replicas`; returns its key.
    async fn put(
        self,
        bench: &Bench,
        prefix: &str,
        namespace: &str,
        replicas: i64,
    ) -> anyhow::Result<String> {
        let (key, value) = match self {
            Kind::ReplicationController => (
                api::object_key::<ReplicationController>(prefix, namespace, "web"),
                api::encode(&controller(namespace, "web", replicas, 0))?,
            ),
            Kind::ReplicaSet => (
                api::object_key::<ReplicaSet>(prefix, namespace, "web"),
                api::encode(&replica_set(namespace, "web", replicas, 0))?,
            ),
        };
        bench.put(&key, value).await?;
        Ok(key)
    }

    /// The controller `namespace/web`'s `status.replicas`.
    async fn status_replicas(self, registry: &Registry, namespace: &str) -> anyhow::Result<i64> {
        Ok(match self {
            Kind::ReplicationController => {
                let rc: ReplicationController = registry.get(namespace, "web").await?;
                rc.status.replicas
            }
            Kind::ReplicaSet => {
                let rs: ReplicaSet = registry.get(namespace, "web").await?;
                rs.status.replicas
            }
        })
    }

    /// Sets `namespace/web`'s `spec.replicas`, as `kcm scale` would.
    async fn scale(
        self,
        registry: &Registry,
        namespace: &str,
        replicas: i64,
    ) -> anyhow::Result<()> {
        match self {
            Kind::ReplicationController => {
                registry
                    .guaranteed_update::<ReplicationController, _>(namespace, "web", |mut rc| {
                        rc.spec.replicas = replicas;
                        Ok(rc)
                    })
                    .await?;
            }
            Kind::ReplicaSet => {
                registry
                    .guaranteed_update::<ReplicaSet, _>(namespace, "web", |mut rs| {
                        rs.spec.replicas = Some(replicas);
                        Ok(rs)
                    })
                    .await?;
            }
        }
        Ok(())
    }

    /// The controller running in-process under `prefix`: on etcd, or with `--api` as a
    /// client of an apiserver over `prefix` started for it.
    async fn start(
        self,
        bench: &Bench,
        prefix: &str,
        config: ManagerConfig,
    ) -> anyhow::Result<RunningManager> {
        if bench.through_api {
            return self.start_through_api(bench, prefix, config).await;
        }
        match self {
            Kind::ReplicationController => bench.start_manager(prefix, config).await,
            Kind::ReplicaSet => {
                let registry = bench.registry(prefix).await?;
                let watcher = Watcher::new(&bench.client, registry.clone());
                let stop = tokio_util::sync::CancellationToken::new();
                let metrics = Arc::new(Metrics::new());
                let informers =
                    InformerFactory::new(watcher, config.watch_backoff.clone(), metrics.clone());
                let (events, events_writer) = EventBroadcaster::start(
                    &bench.client,
                    prefix,
                    crate::record::Counts::default(),
                );
                // The ReplicaSet controller's defaults are the manager's.
                let config = ReplicaSetConfig {
                    burst_replicas: config.burst_replicas,
                    events: events.recorder("replicaset-controller", None),
                    ..ReplicaSetConfig::default()
                };
                let running = ReplicaSetController::new(registry, config, metrics)
                    .start(&informers, stop.clone().cancelled_owned());
                let task = tokio::spawn(informers.serve(running));
                Ok(RunningManager {
                    stop,
                    task,
                    events_writer,
                    apiserver: None,
                })
            }
        }
    }
}

impl Kind {
    /// The controller as an API client of an apiserver over `prefix`, both in-process.
    async fn start_through_api(
        self,
        bench: &Bench,
        prefix: &str,
        config: ManagerConfig,
    ) -> anyhow::Result<RunningManager> {
        let apiserver = bench.start_apiserver(prefix).await?;
        let target = ApiTarget::Master(format!("http://{}", apiserver.addr));
        let api = apiclient::connect(&target).await?;
        let metrics = Arc::new(Metrics::new());
        let informers = InformerFactory::remote(
            Arc::new(ApiSource::new(api.clone())),
            config.watch_backoff.clone(),
            metrics.clone(),
        );
        let (events, events_writer) =
            EventBroadcaster::start_remote(Arc::new(api.clone()), crate::record::Counts::default());
        let stop = tokio_util::sync::CancellationToken::new();
        let shutdown = stop.clone().cancelled_owned();
        let running = match self {
            Kind::ReplicationController => {
                let config = ManagerConfig {
                    events: events.recorder("replication-controller", None),
                    ..config
                };
                control::replication_manager(&api, &informers, config, metrics)
                    .start(&informers, shutdown)
            }
            Kind::ReplicaSet => {
                let config = ReplicaSetConfig {
                    burst_replicas: config.burst_replicas,
                    events: events.recorder("replicaset-controller", None),
                    ..ReplicaSetConfig::default()
                };
                control::replicaset_controller(&api, &informers, config, metrics)
                    .start(&informers, shutdown)
            }
        };
        let task = tokio::spawn(informers.serve(running));
        Ok(RunningManager {
            stop,
            task,
            events_writer,
            apiserver: Some(apiserver),
        })
    }
}

impl Bench {
    /// scale-up (`up`) or scale-down of one controller of `kind`: kcm against the raw
    /// baseline, each side measured twice, in the order baseline, kcm, kcm, baseline (kcm
    /// first on odd runs of `--repeat`), the row's times and CPU those of both. A side
    /// finds etcd holding the history of the one before it, and which one went first
    /// moved scale-down's ratio by 0.1 to 0.2 (docs/PERFORMANCE.md): in this order each
    /// side goes first once and second once, and a drift of the machine's speed over the
    /// run falls on both alike.
    pub(super) async fn scale(&self, kind: Kind, up: bool) -> anyhow::Result<Vec<Row>> {
        let scenario = kind.scenario(up);
        let n = self.sizes.scale_replicas;
        let config = ManagerConfig::default();
        self.warm_up(kind).await?;
        // kcm's concurrency: at most the burst limit in flight, creates in slow-start
        // batches that grow up to it, deletes all at once up to it.
        let create_concurrency = config.burst_replicas;
        let delete_concurrency = config.burst_replicas;
        let kcm_first = self.run.load(std::sync::atomic::Ordering::Relaxed) % 2 == 1;
        // Each pair of sides under a prefix of its own: a controller left at N replicas
        // by the first scale-up is not in the second's way.
        let first = self.prefix(scenario);
        let second = format!("{first}-again");
        let order = [
            (kcm_first, &first),
            (!kcm_first, &first),
            (!kcm_first, &second),
            (kcm_first, &second),
        ];
        let (mut kcm, mut baseline) = (Vec::with_capacity(2), Vec::with_capacity(2));
        for (is_kcm, prefix) in order {
            if is_kcm {
                kcm.push(self.scale_kcm(kind, up, prefix, config.clone()).await?);
            } else {
                baseline.push(
                    self.scale_baseline(kind, up, prefix, create_concurrency)
                        .await?,
                );
            }
        }
        let (kcm_seconds, kcm_cpu) = both(&kcm);
        let (baseline_seconds, baseline_cpu) = both(&baseline);
        let target = if up { n } else { 0 };
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
        let controllers = if self.controller_baseline {
            ", each also comparing its controller's key, watched twice"
        } else {
            ""
        };
        Ok(vec![row(
            scenario,
            format!(
                "pods/s, {} → {} ({:.2}s vs {:.2}s, each side twice{}){}",
                if up { 0 } else { n },
                target,
                kcm_seconds,
                baseline_seconds,
                cpu::describe(kcm_cpu, baseline_cpu),
                if self.through_api {
                    ", through the API"
                } else {
                    ""
                }
            ),
            "pods/s",
            rate(kcm_seconds),
            rate(baseline_seconds),
            format!("{what}, {concurrency} in flight{controllers}"),
            // The target is the etcd mode's against raw writes (issue 33's); through the
            // API there is none yet, nor against the controller baseline.
            (!self.through_api && !self.controller_baseline).then_some((SCALE_TARGET, true)),
        )])
    }
}

/// How many times the warm-up writes and deletes the baseline's pods.
const WARM_UP_ROUNDS: usize = 4;

impl Bench {
    /// Before the first scale row: the baseline's creates and deletes, [`WARM_UP_ROUNDS`]
    /// times, not measured. Without it the first run's baseline, the first writes of the
    /// bench, took more CPU a pod than any later side (etcd's 130 to 150 µs against 105 to
    /// 125), and lifted that run's ratio above 1 (docs/PERFORMANCE.md).
    async fn warm_up(&self, kind: Kind) -> anyhow::Result<()> {
        if self.warmed.swap(true, std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        let prefix = self.prefix("warm-up");
        let documents = kind.pod_documents(&prefix, "warm-up", self.sizes.scale_replicas);
        let concurrency = ManagerConfig::default().burst_replicas;
        for _ in 0..WARM_UP_ROUNDS {
            let created = self.create_all(documents.clone(), concurrency).await?;
            self.delete_all(created, concurrency).await?;
        }
        Ok(())
    }
}

/// One side's measured span: its seconds and its CPU a pod (this process, etcd).
type Side = (f64, (Option<Duration>, Option<Duration>));

/// Two measurements of one side as one: the mean of their seconds (a rate over it is
/// the rate over both) and of their CPU a pod.
fn both(sides: &[Side]) -> Side {
    let n = sides.len().max(1);
    let seconds = sides.iter().map(|side| side.0).sum::<f64>() / n as f64;
    let mean = |cpu: fn(&Side) -> Option<Duration>| {
        let total = sides
            .iter()
            .try_fold(Duration::ZERO, |sum, side| Some(sum + cpu(side)?))?;
        Some(total / u32::try_from(n).ok()?)
    };
    let this = mean(|side| side.1 .0);
    let etcd = mean(|side| side.1 .1);
    (seconds, (this, etcd))
}

/// How long either side may take to converge.
const SIDE_LIMIT: Duration = Duration::from_secs(300);

impl Bench {
    /// The baseline's side: the same documents, written by etcd-client directly (the
    /// unmeasured writes before a scale-down, and the clean-up after a scale-up, included).
    async fn scale_baseline(
        &self,
        kind: Kind,
        up: bool,
        prefix: &str,
        concurrency: usize,
    ) -> anyhow::Result<Side> {
        let scenario = kind.scenario(up);
        let n = self.sizes.scale_replicas;
        let documents = kind.pod_documents(prefix, "base", n);
        let dir = self.pod_dir(prefix, "base");
        // The history before this side, compacted before it measures (its own starting
        // pods, for a scale-down, stay, as on kcm's side).
        let began = self.revision().await?;
        let guard = self.controller_guard(kind, prefix).await?;
        let guard = guard.as_ref();
        if up {
            self.compact_history(began).await?;
            let after = self.revision().await?;
            let counter = self
                .count_pods(dir.clone(), after, 0, move |c| c >= n)
                .await?;
            let writes = self.create_all_guarded(documents, concurrency, guard);
            let (side, created) = self
                .measure_baseline(scenario, &dir, after, counter, writes)
                .await?;
            // Clean up (not measured).
            self.delete_all(created, concurrency).await?;
            return Ok(side);
        }
        let created = self
            .create_all_guarded(documents, concurrency, guard)
            .await?;
        self.compact_history(began).await?;
        let after = self.revision().await?;
        let counter = self.count_pods(dir.clone(), after, n, |c| c == 0).await?;
        let writes = self.delete_all_guarded(created, concurrency, guard);
        Ok(self
            .measure_baseline(scenario, &dir, after, counter, writes)
            .await?
            .0)
    }

    /// The baseline's measured span, with `--controller-baseline` a second watch of `dir`
    /// from `after` receiving its writes throughout.
    async fn measure_baseline<T>(
        &self,
        scenario: &str,
        dir: &str,
        after: i64,
        counter: PodCounter,
        writes: impl std::future::Future<Output = anyhow::Result<T>>,
    ) -> anyhow::Result<(Side, T)> {
        let informer = self.second_watch(dir, after).await?;
        let measured = self.measure(scenario, "baseline", counter, writes).await;
        informer.inspect(|watch| watch.abort());
        measured
    }

    /// With `--controller-baseline`, the baseline's controller: written (no manager runs
    /// on the baseline's side), and its incarnation guard for the baseline's writes.
    async fn controller_guard(
        &self,
        kind: Kind,
        prefix: &str,
    ) -> anyhow::Result<Option<ControllerGuard>> {
        if !self.controller_baseline {
            return Ok(None);
        }
        let key = kind.put(self, prefix, "base", 0).await?;
        let read = self.client.clone().get(key.as_str(), None).await?;
        let create_revision = read
            .kvs()
            .first()
            .map(|kv| kv.create_revision())
            .with_context(|| format!("{key} vanished"))?;
        Ok(Some(ControllerGuard {
            key,
            create_revision,
        }))
    }

    /// With `--controller-baseline`, a second watch of the baseline's pods from `after`,
    /// receiving every change with its value as a controller's pod informer does (without
    /// decoding it), until aborted. Open when this returns.
    async fn second_watch(
        &self,
        dir: &str,
        after: i64,
    ) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
        if !self.controller_baseline {
            return Ok(None);
        }
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(after + 1);
        let mut stream = self
            .client
            .watch_client()
            .watch(dir, Some(options))
            .await
            .context("open the baseline's second watch")?;
        Ok(Some(tokio::spawn(async move {
            while let Ok(Some(_)) = stream.message().await {}
        })))
    }

    /// One side's measured span: from the start of `writes` until `counter` is done.
    /// Returns its seconds and CPU a pod (the curve is kept for `--svg`), and what
    /// `writes` returned.
    async fn measure<T>(
        &self,
        scenario: &str,
        who: &str,
        counter: PodCounter,
        writes: impl std::future::Future<Output = anyhow::Result<T>>,
    ) -> anyhow::Result<(Side, T)> {
        let started = Instant::now();
        // The span's ends, to cut a profile's samples by side (docs/PERFORMANCE.md).
        tracing::debug!(scenario, who, "measuring");
        let cpu = CpuMark::now(self.etcd_pid);
        let written = writes.await?;
        let curve = counter
            .curve(SIDE_LIMIT, started)
            .await
            .with_context(|| format!("{who} {scenario}"))?;
        let cpu = cpu.per_item_since(self.etcd_pid, self.sizes.scale_replicas);
        tracing::debug!(scenario, who, "measured");
        let seconds = curve
            .last()
            .map_or(started.elapsed().as_secs_f64(), |p| p.0);
        self.store_curve(scenario, who, curve);
        Ok(((seconds, cpu), written))
    }

    /// kcm's side: one controller, scaled by writing spec.replicas as kubecfg would (its
    /// start at 0 or at `n`, and the clean-up after a scale-up, not measured).
    async fn scale_kcm(
        &self,
        kind: Kind,
        up: bool,
        prefix: &str,
        config: ManagerConfig,
    ) -> anyhow::Result<Side> {
        let scenario = kind.scenario(up);
        let n = self.sizes.scale_replicas;
        let burst = config.burst_replicas;
        // Where this side began: its history is compacted up to here before it measures,
        // never past what its controller's watches have read.
        let began = self.revision().await?;
        let manager = kind.start(self, prefix, config).await?;
        let registry = self.registry(prefix).await?;
        let start_replicas = if up { 0 } else { n as i64 };
        kind.put(self, prefix, "kcm", start_replicas).await?;
        let dir = self.pod_dir(prefix, "kcm");
        let count_now = |registry: Registry| async move {
            let listed = registry
                .list::<Pod>(Some("kcm"), &crate::labels::Selector::everything())
                .await?;
            anyhow::Ok(listed.items.len())
        };
        // Converge on the starting point (for scale-down: n pods, not measured).
        poll_until(SIDE_LIMIT, "the starting pods", || {
            let registry = registry.clone();
            async move {
                let status = kind.status_replicas(&registry, "kcm").await?;
                Ok(count_now(registry).await? == start_replicas as usize
                    && status == start_replicas)
            }
        })
        .await?;
        let target = if up { n } else { 0 };
        self.compact_history(began).await?;
        let counter = self
            .count_pods(
                dir.clone(),
                self.revision().await?,
                start_replicas as usize,
                move |c| c == target,
            )
            .await?;
        let scale = kind.scale(&registry, "kcm", target as i64);
        let (side, ()) = self.measure(scenario, "kcm", counter, scale).await?;
        manager.stop().await?;
        if up {
            // Clean up (not measured) as the baseline does, one guarded delete a pod: the
            // manager has stopped, so nothing re-creates them. Not one range delete: etcd
            // 3.4 keeps its write buffer at the largest batch it has held, and copies all
            // of it for every transaction after (10,000 deletes at once tripled etcd's CPU
            // a pod in every later row).
            let listed = self
                .client
                .clone()
                .get(
                    dir.as_str(),
                    Some(GetOptions::new().with_prefix().with_keys_only()),
                )
                .await
                .context("list kcm's pods")?;
            let pods = listed
                .kvs()
                .iter()
                .map(|kv| {
                    (
                        String::from_utf8_lossy(kv.key()).into_owned(),
                        kv.mod_revision(),
                    )
                })
                .collect();
            self.delete_all(pods, burst).await?;
        }
        Ok(side)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_measurements_of_a_side_are_their_means() {
        let ms = Duration::from_micros;
        let sides = [
            (1.0, (Some(ms(40)), Some(ms(200)))),
            (2.0, (Some(ms(60)), Some(ms(100)))),
        ];
        assert_eq!(both(&sides), (1.5, (Some(ms(50)), Some(ms(150)))));
        // A CPU figure one measurement lacks (no private etcd) is unknown for both.
        let sides = [(1.0, (Some(ms(40)), None)), (2.0, (Some(ms(60)), None))];
        assert_eq!(both(&sides), (1.5, (Some(ms(50)), None)));
    }
}
