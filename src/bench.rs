//! `kcm bench`: how fast kcm converges, beside what etcd itself does on the same machine
//! in the same run.
//!
//! Absolute times on a shared 2-core machine drift by tens of percent from run to run;
//! ratios measured in one run against a raw etcd-client baseline do not. Every scenario
//! prints one row per figure: what was measured, kcm's figure, the baseline's, the ratio
//! and the target. Scenarios (docs/PERFORMANCE.md has the figures and what bounds them):
//! - `scale-up` / `scale-down`: one controller 0 → N → 0 replicas, against create-if-absent
//!   transactions (and guarded deletes) of the same documents at kcm's concurrency;
//! - `heal`: delete one pod of a converged controller, time until its replacement exists;
//! - `resync`: a no-op resync of many controllers against one raw list of all their pods;
//! - `watch`: typed events per second from kcm's resumable watch against a raw watch;
//! - `resume`: catching up after a connection cut, against a raw watch from the revision;
//! - `memory`: peak RSS of a `kcm controller-manager` child against its pods' size.
//!
//! Each scenario works under its own key prefix (`/kcm-bench-{run}/{scenario}`), so an
//! etcd given with `--etcd-servers` is never touched outside it; the prefix is deleted at
//! the end. Without one, a private etcd is started (and stopped) like `kcm up`'s.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use etcd_client::{
    Client, Compare, CompareOp, DeleteOptions, EventType, GetOptions, Txn, TxnOp, WatchOptions,
};
use serde::Serialize;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::api::{
    self, Container, ContainerPort, Object as _, ObjectMeta, Pod, PodSpec, PodTemplateSpec,
    ReplicationController, ReplicationControllerSpec,
};
use crate::client::{self, ClientConfig, Target};
use crate::etcd_process::{local_client_addr, PrivateEtcd};
use crate::etcd_watcher::{self, ResumableWatch, Update, Watcher};
use crate::informer::{ControllerInformer, PodInformer};
use crate::labels::Set;
use crate::registry::Registry;
use crate::replication_manager::{self, ManagerConfig, ReplicationManager};
use crate::status::Metrics;

/// The scenarios, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    ScaleUp,
    ScaleDown,
    Heal,
    Resync,
    Watch,
    Resume,
    Memory,
}

impl Scenario {
    /// Every scenario, in the order they run.
    pub const ALL: [Scenario; 7] = [
        Scenario::ScaleUp,
        Scenario::ScaleDown,
        Scenario::Heal,
        Scenario::Resync,
        Scenario::Watch,
        Scenario::Resume,
        Scenario::Memory,
    ];

    /// The scenario's name on the command line and in the table, e.g. `scale-up`.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::ScaleUp => "scale-up",
            Scenario::ScaleDown => "scale-down",
            Scenario::Heal => "heal",
            Scenario::Resync => "resync",
            Scenario::Watch => "watch",
            Scenario::Resume => "resume",
            Scenario::Memory => "memory",
        }
    }
}

/// What `kcm bench` runs, and against which etcd.
#[derive(Clone, Debug)]
pub struct Config {
    /// The scenarios to run, in this order; never empty.
    pub scenarios: Vec<Scenario>,
    /// The etcd to start, or `None` to use the target's (one named with `--etcd-servers`).
    pub private_etcd: Option<PrivateEtcdConfig>,
    /// Small sizes, for a smoke run of a few seconds.
    pub quick: bool,
    /// Where to write every figure, the sizes and the scale curves as JSON.
    pub json: Option<PathBuf>,
    /// Where to draw pods over time for scale-up and scale-down.
    pub svg: Option<PathBuf>,
    /// Runs of every scenario, at least 1; per figure the median run is reported.
    pub repeat: usize,
    /// The kcm binary whose `controller-manager` the memory scenario measures; `None` for
    /// this one.
    pub manager_binary: Option<PathBuf>,
}

/// The private etcd of a bench run.
#[derive(Clone, Debug)]
pub struct PrivateEtcdConfig {
    pub binary: PathBuf,
    /// Its data dir; `None` for a temporary one (on /dev/shm with `tmpfs`).
    pub data_dir: Option<PathBuf>,
    /// Put the temporary data dir on tmpfs: no fsync cost.
    pub tmpfs: bool,
}

/// How big each scenario is.
#[derive(Clone, Debug, Serialize)]
pub struct Sizes {
    pub scale_replicas: usize,
    pub heal_replicas: usize,
    pub heal_trials: usize,
    pub resync_controllers: usize,
    pub resync_pods_each: usize,
    /// Controllers synced with fresh reads, to extrapolate the 2014 resync from.
    pub resync_fresh_sample: usize,
    pub watch_events: usize,
    pub resume_events: usize,
    pub memory_controllers: usize,
    pub memory_pods_each: usize,
    /// Repetitions of the short measurements (the median is reported).
    pub repeats: usize,
}

impl Sizes {
    pub fn full() -> Sizes {
        Sizes {
            scale_replicas: 10_000,
            heal_replicas: 100,
            heal_trials: 200,
            resync_controllers: 1_000,
            resync_pods_each: 10,
            resync_fresh_sample: 50,
            watch_events: 20_000,
            resume_events: 10_000,
            memory_controllers: 100,
            memory_pods_each: 1_000,
            repeats: 3,
        }
    }

    pub fn quick() -> Sizes {
        Sizes {
            scale_replicas: 300,
            heal_replicas: 10,
            heal_trials: 10,
            resync_controllers: 20,
            resync_pods_each: 5,
            resync_fresh_sample: 5,
            watch_events: 500,
            resume_events: 300,
            memory_controllers: 4,
            memory_pods_each: 50,
            repeats: 1,
        }
    }
}

/// One figure of the table.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub scenario: &'static str,
    /// What was measured, e.g. "pods/s, 0 → 10000".
    pub measure: String,
    pub unit: &'static str,
    pub kcm: f64,
    pub baseline: Option<f64>,
    /// What the baseline is.
    pub baseline_is: String,
    /// kcm / baseline.
    pub ratio: Option<f64>,
    /// The target, e.g. "ratio ≥ 0.7".
    pub target: String,
    pub met: Option<bool>,
    /// The ratio of every run, with `--repeat` (this row is the median one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ratios: Vec<f64>,
}

/// Pods over time for one run: (seconds since start, pods).
pub type Curve = Vec<(f64, usize)>;

/// Everything one run measured.
#[derive(Debug, Serialize)]
pub struct Report {
    pub date: String,
    pub cores: usize,
    pub etcd_version: String,
    pub etcd: String,
    pub quick: bool,
    pub sizes: Sizes,
    pub rows: Vec<Row>,
    /// "scale-up" / "scale-down" → "kcm" / "baseline" → curve.
    pub curves: HashMap<String, HashMap<String, Curve>>,
    pub seconds: f64,
}

/// Runs the selected scenarios and prints the table.
///
/// # Errors
/// When etcd cannot be started or reached, or a scenario fails (its setup, or it does
/// not converge within its time limit).
pub async fn run(target: &Target, config: Config) -> anyhow::Result<()> {
    let started = Instant::now();
    let sizes = if config.quick {
        Sizes::quick()
    } else {
        Sizes::full()
    };
    let scenarios = config.scenarios.clone();
    // Held until the end: the tmpfs data dir is removed on drop.
    let mut _tmpfs_dir = None;
    let private = match &config.private_etcd {
        None => None,
        Some(private) => {
            let data_dir = match (&private.data_dir, private.tmpfs) {
                (Some(dir), _) => Some(dir.clone()),
                (None, true) => {
                    let dir = tempfile::Builder::new()
                        .prefix("kcm-bench-etcd-")
                        .tempdir_in("/dev/shm")
                        .context("create a data dir on /dev/shm")?;
                    let path = dir.path().to_path_buf();
                    _tmpfs_dir = Some(dir);
                    Some(path)
                }
                (None, false) => None,
            };
            let port = std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port();
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            Some(PrivateEtcd::start(&private.binary, addr, data_dir.as_deref()).await?)
        }
    };
    let given = private.is_none();
    let tmpfs = config.private_etcd.as_ref().is_some_and(|p| p.tmpfs);
    let endpoints = match &private {
        Some(etcd) => vec![etcd.endpoint().to_string()],
        None => target.client.endpoints.clone(),
    };
    let client_config = ClientConfig {
        endpoints: endpoints.clone(),
        ..target.client.clone()
    };
    let client = client::connect(&client_config).await?;
    let etcd_version = client
        .clone()
        .status()
        .await
        .map(|s| s.version().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let run_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let root = format!("/kcm-bench-{run_id}");
    let bench = Bench {
        client: client.clone(),
        client_config,
        root: root.clone(),
        sizes: sizes.clone(),
        manager_binary: config.manager_binary.clone(),
        curves: Mutex::default(),
        run: Default::default(),
    };
    eprintln!(
        "kcm bench: etcd {etcd_version} at {}{}, {} scenario(s){}",
        endpoints.join(","),
        match (&private, tmpfs) {
            (Some(_), true) => " (private, tmpfs)",
            (Some(_), false) => " (private, disk)",
            (None, _) => "",
        },
        scenarios.len(),
        if config.quick { ", quick sizes" } else { "" }
    );
    let mut rows = Vec::new();
    let repeat = config.repeat.max(1);
    let result = async {
        for scenario in &scenarios {
            let mut runs: Vec<Vec<Row>> = Vec::with_capacity(repeat);
            for run in 0..repeat {
                bench.run.store(run, std::sync::atomic::Ordering::Relaxed);
                let scenario_started = Instant::now();
                if repeat > 1 {
                    eprintln!(
                        "kcm bench: {} (run {} of {repeat}) ...",
                        scenario.name(),
                        run + 1
                    );
                } else {
                    eprintln!("kcm bench: {} ...", scenario.name());
                }
                let new_rows = match scenario {
                    Scenario::ScaleUp => bench.scale(true).await?,
                    Scenario::ScaleDown => bench.scale(false).await?,
                    Scenario::Heal => bench.heal().await?,
                    Scenario::Resync => bench.resync().await?,
                    Scenario::Watch => bench.watch().await?,
                    Scenario::Resume => bench.resume().await?,
                    Scenario::Memory => bench.memory().await?,
                };
                eprintln!(
                    "kcm bench: {} done in {:.1}s",
                    scenario.name(),
                    scenario_started.elapsed().as_secs_f64()
                );
                runs.push(new_rows);
            }
            rows.extend(median_rows(runs));
        }
        anyhow::Ok(())
    }
    .await;
    // Leave nothing behind in a given etcd.
    let _ = client
        .clone()
        .delete(root.as_str(), Some(DeleteOptions::new().with_prefix()))
        .await;
    if let Some(etcd) = private {
        etcd.stop().await;
    }
    result?;
    let report = Report {
        date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        etcd_version,
        etcd: if given {
            endpoints.join(",")
        } else if tmpfs {
            "private, tmpfs".into()
        } else {
            "private, disk".into()
        },
        quick: config.quick,
        sizes,
        rows,
        curves: bench.curves.into_inner().expect("curves lock"),
        seconds: started.elapsed().as_secs_f64(),
    };
    print!("{}", table(&report));
    if let Some(path) = &config.json {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json).with_context(|| format!("write {}", path.display()))?;
    }
    if let Some(path) = &config.svg {
        std::fs::write(path, svg(&report)).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(())
}

/// The table as printed: one line per row, columns aligned.
pub fn table(report: &Report) -> String {
    let header = [
        "scenario", "measure", "kcm", "baseline", "ratio", "target", "met",
    ];
    let mut lines: Vec<[String; 7]> = vec![header.map(String::from)];
    for row in &report.rows {
        lines.push([
            row.scenario.to_string(),
            row.measure.clone(),
            format!("{} {}", figure(row.kcm), row.unit),
            match row.baseline {
                Some(b) => format!("{} {} ({})", figure(b), row.unit, row.baseline_is),
                None => row.baseline_is.clone(),
            },
            row.ratio.map_or("-".into(), |r| {
                let ratio = |r: f64| {
                    if r >= 0.01 {
                        format!("{r:.2}")
                    } else {
                        format!("{r:.5}")
                    }
                };
                match spread(&row.ratios) {
                    Some((low, high)) => {
                        format!(
                            "{} ({}–{}, n={})",
                            ratio(r),
                            ratio(low),
                            ratio(high),
                            row.ratios.len()
                        )
                    }
                    None => ratio(r),
                }
            }),
            row.target.clone(),
            match row.met {
                Some(true) => "yes".into(),
                Some(false) => "NO".into(),
                None => "-".into(),
            },
        ]);
    }
    let widths: Vec<usize> = (0..7)
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (n, line) in lines.iter().enumerate() {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
        if n == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            let _ = writeln!(out, "{}", rule.join("  "));
        }
    }
    let _ = writeln!(
        out,
        "{} cores, etcd {} ({}), {:.0}s{}",
        report.cores,
        report.etcd_version,
        report.etcd,
        report.seconds,
        if report.quick { ", quick sizes" } else { "" }
    );
    out
}

/// The lowest and highest of several ratios (`None` for fewer than two).
fn spread(ratios: &[f64]) -> Option<(f64, f64)> {
    if ratios.len() < 2 {
        return None;
    }
    let low = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let high = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((low, high))
}

fn figure(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// A row with a baseline; `higher_is_better` decides which way the target compares.
#[allow(clippy::too_many_arguments)]
fn row(
    scenario: &'static str,
    measure: impl Into<String>,
    unit: &'static str,
    kcm: f64,
    baseline: f64,
    baseline_is: impl Into<String>,
    target: Option<(f64, bool)>,
) -> Row {
    let ratio = if baseline > 0.0 { kcm / baseline } else { 0.0 };
    Row {
        scenario,
        measure: measure.into(),
        unit,
        kcm,
        baseline: Some(baseline),
        baseline_is: baseline_is.into(),
        ratio: Some(ratio),
        target: match target {
            Some((t, true)) => format!("ratio ≥ {t}"),
            Some((t, false)) => format!("ratio ≤ {t}"),
            None => "-".into(),
        },
        met: target.map(|(t, higher)| if higher { ratio >= t } else { ratio <= t }),
        ratios: Vec::new(),
    }
}

/// Combines the rows of several runs of one scenario: for each figure, the row of the run
/// with the median ratio (by kcm's figure for rows without a ratio), carrying every run's
/// ratio so the table can show the spread.
pub fn median_rows(runs: Vec<Vec<Row>>) -> Vec<Row> {
    if runs.len() <= 1 {
        return runs.into_iter().flatten().collect();
    }
    let figures = runs.iter().map(Vec::len).min().unwrap_or(0);
    let mut columns: Vec<Vec<Row>> = (0..figures).map(|_| Vec::new()).collect();
    for run in runs {
        for (i, row) in run.into_iter().take(figures).enumerate() {
            columns[i].push(row);
        }
    }
    columns
        .into_iter()
        .map(|mut column| {
            let ratios: Vec<f64> = column.iter().filter_map(|r| r.ratio).collect();
            column.sort_by(|a, b| {
                let key = |r: &Row| r.ratio.unwrap_or(r.kcm);
                key(a).total_cmp(&key(b))
            });
            let mut median = column.swap_remove(column.len() / 2);
            median.ratios = ratios;
            median
        })
        .collect()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A bounded wait for a condition the bench cannot observe by events.
async fn poll_until<F, Fut>(limit: Duration, what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if check().await? {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ---------------------------------------------------------------------------------------
// Documents

/// A controller in `namespace` selecting `app={name}`, with `replicas` and the given
/// `status.replicas`; its template is an nginx pod with one named port.
fn controller(namespace: &str, name: &str, replicas: i64, status: i64) -> ReplicationController {
    let labels: Set = [("app", name), ("tier", "web")].into_iter().collect();
    let mut rc = ReplicationController {
        metadata: ObjectMeta {
            uid: format!("{name}-{}", uuid::Uuid::new_v4().simple()),
            creation_timestamp: Some("2014-11-01T00:00:00Z".into()),
            ..ObjectMeta::named(namespace, name)
        },
        spec: ReplicationControllerSpec {
            replicas,
            selector: [("app", name)].into_iter().collect(),
            template: Some(PodTemplateSpec {
                metadata: ObjectMeta {
                    labels,
                    ..ObjectMeta::default()
                },
                spec: PodSpec {
                    containers: vec![Container {
                        name: "web".into(),
                        image: "nginx:1.7.9".into(),
                        ports: vec![ContainerPort {
                            name: "http".into(),
                            container_port: 80,
                            ..ContainerPort::default()
                        }],
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                },
                ..PodTemplateSpec::default()
            }),
            ..ReplicationControllerSpec::default()
        },
        ..ReplicationController::default()
    };
    rc.status.replicas = status;
    rc.set_type_meta();
    rc
}

/// The document of replica slot `slot` of `rc`, exactly as the manager would create it.
fn pod_document(rc: &ReplicationController, slot: u64) -> (String, Vec<u8>) {
    let name = replication_manager::pod_name(&rc.metadata.name, &rc.metadata.uid, slot);
    let mut pod = replication_manager::new_pod_from_template(rc, name);
    api::fill_system_fields(&mut pod.metadata);
    pod.set_type_meta();
    let value = api::encode(&pod).expect("a pod encodes");
    (pod.metadata.name, value)
}

// ---------------------------------------------------------------------------------------
// The scenarios

struct Bench {
    client: Client,
    client_config: ClientConfig,
    root: String,
    sizes: Sizes,
    manager_binary: Option<PathBuf>,
    curves: Mutex<HashMap<String, HashMap<String, Curve>>>,
    /// Which run of `--repeat` is going: each works under its own prefix.
    run: std::sync::atomic::AtomicUsize,
}

/// An in-process replication manager under one prefix, stopped on `stop`.
struct RunningManager {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl RunningManager {
    async fn stop(self) -> anyhow::Result<()> {
        self.stop.cancel();
        self.task.await.context("manager task")?
    }
}

impl Bench {
    fn prefix(&self, scenario: &str) -> String {
        match self.run.load(std::sync::atomic::Ordering::Relaxed) {
            0 => format!("{}/{scenario}", self.root),
            run => format!("{}/{scenario}-{run}", self.root),
        }
    }

    async fn registry(&self, prefix: &str) -> anyhow::Result<Registry> {
        Registry::new(&self.client, prefix)
    }

    fn pod_dir(&self, prefix: &str, namespace: &str) -> String {
        format!("{prefix}/pods/{namespace}/")
    }

    async fn put(&self, key: &str, value: Vec<u8>) -> anyhow::Result<i64> {
        let response = self
            .client
            .clone()
            .put(key, value, None)
            .await
            .with_context(|| format!("put {key}"))?;
        Ok(response.header().map_or(0, |h| h.revision()))
    }

    async fn put_controller(&self, prefix: &str, rc: &ReplicationController) -> anyhow::Result<()> {
        let key = api::object_key::<ReplicationController>(
            prefix,
            &rc.metadata.namespace,
            &rc.metadata.name,
        );
        self.put(&key, api::encode(rc)?).await?;
        Ok(())
    }

    /// Writes `documents` (key, value) create-if-absent, `concurrency` at a time; returns
    /// the revision each was created at.
    async fn create_all(
        &self,
        documents: Vec<(String, Vec<u8>)>,
        concurrency: usize,
    ) -> anyhow::Result<Vec<(String, i64)>> {
        let limit = Arc::new(Semaphore::new(concurrency.max(1)));
        let mut creates = JoinSet::new();
        for (key, value) in documents {
            let permit = limit.clone().acquire_owned().await?;
            let mut kv = self.client.kv_client();
            creates.spawn(async move {
                let txn = Txn::new()
                    .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
                    .and_then([TxnOp::put(key.as_str(), value, None)]);
                let response = kv.txn(txn).await.with_context(|| format!("create {key}"));
                drop(permit);
                let response = response?;
                anyhow::ensure!(response.succeeded(), "{key} already exists");
                Ok((key, response.header().map_or(0, |h| h.revision())))
            });
        }
        let mut created = Vec::new();
        while let Some(result) = creates.join_next().await {
            created.push(result??);
        }
        Ok(created)
    }

    /// Deletes `keys` each guarded by its revision, `concurrency` at a time.
    async fn delete_all(&self, keys: Vec<(String, i64)>, concurrency: usize) -> anyhow::Result<()> {
        let limit = Arc::new(Semaphore::new(concurrency.max(1)));
        let mut deletes = JoinSet::new();
        for (key, revision) in keys {
            let permit = limit.clone().acquire_owned().await?;
            let mut kv = self.client.kv_client();
            deletes.spawn(async move {
                let txn = Txn::new()
                    .when([Compare::mod_revision(
                        key.as_str(),
                        CompareOp::Equal,
                        revision,
                    )])
                    .and_then([TxnOp::delete(key.as_str(), None)]);
                let response = kv.txn(txn).await.with_context(|| format!("delete {key}"));
                drop(permit);
                anyhow::ensure!(response?.succeeded(), "{key} changed");
                Ok(())
            });
        }
        while let Some(result) = deletes.join_next().await {
            result??;
        }
        Ok(())
    }

    async fn start_manager(
        &self,
        prefix: &str,
        config: ManagerConfig,
    ) -> anyhow::Result<RunningManager> {
        let registry = self.registry(prefix).await?;
        let watcher = Watcher::new(&self.client, registry.clone());
        let stop = CancellationToken::new();
        let manager = ReplicationManager::new(registry, config, Arc::new(Metrics::new()));
        let task = tokio::spawn(manager.run(watcher, stop.clone().cancelled_owned()));
        Ok(RunningManager { stop, task })
    }

    /// Counts pods under `dir` as a raw watch sees them from `after`, until `done(count)`;
    /// returns the curve (seconds since `since`, count), sampled at every change.
    fn count_pods(
        &self,
        dir: String,
        after: i64,
        initial: usize,
        done: impl Fn(usize) -> bool + Send + 'static,
        since: Arc<Mutex<Option<Instant>>>,
    ) -> tokio::task::JoinHandle<anyhow::Result<Curve>> {
        let client = self.client.clone();
        tokio::spawn(async move {
            let options = WatchOptions::new()
                .with_prefix()
                .with_start_revision(after + 1);
            let mut stream = client
                .watch_client()
                .watch(dir.as_str(), Some(options))
                .await
                .context("open counting watch")?;
            let mut count = initial;
            let mut curve = Vec::new();
            while !done(count) {
                let response = stream
                    .message()
                    .await
                    .context("counting watch")?
                    .context("counting watch closed")?;
                for event in response.events() {
                    match event.event_type() {
                        EventType::Put => {
                            if event.kv().is_some_and(|kv| kv.version() == 1) {
                                count += 1;
                            }
                        }
                        EventType::Delete => count = count.saturating_sub(1),
                    }
                }
                let t0 = *since.lock().expect("since lock");
                let t = t0.map_or(0.0, |t0| t0.elapsed().as_secs_f64());
                curve.push((t, count));
            }
            Ok(curve)
        })
    }

    async fn revision(&self) -> anyhow::Result<i64> {
        let response = self
            .client
            .clone()
            .get("/kcm-bench-revision-probe", None)
            .await?;
        Ok(response.header().map_or(0, |h| h.revision()))
    }

    fn store_curve(&self, scenario: &str, who: &str, curve: Curve) {
        // At most ~400 points per curve: enough for the picture, small in the JSON.
        let step = (curve.len() / 400).max(1);
        let mut sampled: Curve = curve.iter().step_by(step).copied().collect();
        if let Some(last) = curve.last() {
            if sampled.last() != Some(last) {
                sampled.push(*last);
            }
        }
        self.curves
            .lock()
            .expect("curves lock")
            .entry(scenario.to_string())
            .or_default()
            .insert(who.to_string(), sampled);
    }

    /// scale-up (`up`) or scale-down: kcm against the raw baseline.
    async fn scale(&self, up: bool) -> anyhow::Result<Vec<Row>> {
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

    /// heal: delete one pod of a converged controller; time until its replacement exists.
    async fn heal(&self) -> anyhow::Result<Vec<Row>> {
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

    /// resync: a no-op resync of many converged controllers against one raw list of all
    /// their pods; and the 2014 way (a fresh list per controller), extrapolated.
    async fn resync(&self) -> anyhow::Result<Vec<Row>> {
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
        let sample: Vec<String> = keys
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
    async fn watch(&self) -> anyhow::Result<Vec<Row>> {
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
    async fn resume(&self) -> anyhow::Result<Vec<Row>> {
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
        let config = ClientConfig {
            endpoints: vec![format!("http://{}", proxy.addr)],
            keepalive_interval: Duration::from_secs(1),
            keepalive_timeout: Duration::from_secs(1),
            ..self.client_config.clone()
        };
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

    /// memory: peak RSS of a `kcm controller-manager` child managing the pods.
    async fn memory(&self) -> anyhow::Result<Vec<Row>> {
        let prefix = self.prefix("memory");
        let (n_controllers, each) = (self.sizes.memory_controllers, self.sizes.memory_pods_each);
        let mut documents = Vec::new();
        let mut bytes = 0usize;
        for i in 0..n_controllers {
            let rc = controller("memory", &format!("rc-{i:03}"), each as i64, 0);
            self.put_controller(&prefix, &rc).await?;
            for slot in 0..each as u64 {
                let (name, value) = pod_document(&rc, slot);
                bytes += value.len();
                documents.push((api::object_key::<Pod>(&prefix, "memory", &name), value));
            }
        }
        self.create_all(documents, 256).await?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let log = tempfile::NamedTempFile::new()?;
        let exe = match &self.manager_binary {
            Some(binary) => binary.clone(),
            None => std::env::current_exe().context("find the kcm binary")?,
        };
        let mut child = tokio::process::Command::new(exe)
            .args([
                "controller-manager",
                "--prefix",
                &prefix,
                "--port",
                &port.to_string(),
            ])
            .arg("--etcd-servers")
            .arg(self.client_config.endpoints.join(","))
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log.reopen()?)
            .kill_on_drop(true)
            .spawn()
            .context("start kcm controller-manager")?;
        let pid = child.id().context("child pid")?;
        let registry = self.registry(&prefix).await?;
        let converged = poll_until(
            Duration::from_secs(300),
            "the manager to sync every controller",
            || {
                let registry = registry.clone();
                async move {
                    let listed = registry
                        .list::<ReplicationController>(
                            Some("memory"),
                            &crate::labels::Selector::everything(),
                        )
                        .await?;
                    Ok(listed.items.len() == n_controllers
                        && listed
                            .items
                            .iter()
                            .all(|rc| rc.status.replicas == each as i64))
                }
            },
        )
        .await;
        let peak = vm_hwm(pid);
        // SIGTERM, as an operator would stop it.
        // SAFETY: kill(2) on our own unreaped child.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGTERM);
        }
        let _ = tokio::time::timeout(Duration::from_secs(15), child.wait()).await;
        if let Err(e) = converged {
            let tail = std::fs::read_to_string(log.path()).unwrap_or_default();
            anyhow::bail!("{e}; manager log:\n{tail}");
        }
        let peak = peak?;
        let mib = |b: usize| b as f64 / (1024.0 * 1024.0);
        Ok(vec![row(
            "memory",
            format!("peak RSS (VmHWM), controller-manager, {n_controllers} × {each} pods"),
            "MiB",
            mib(peak),
            mib(bytes),
            format!("size of the {} pod documents", n_controllers * each),
            Some((2.0, false)),
        )])
    }
}

/// Seconds a raw watch from `before` takes to deliver every event up to `after`.
async fn raw_catch_up(client: &Client, dir: &str, before: i64, after: i64) -> anyhow::Result<f64> {
    let options = WatchOptions::new()
        .with_prefix()
        .with_prev_key()
        .with_start_revision(before + 1);
    let started = Instant::now();
    let mut stream = client.watch_client().watch(dir, Some(options)).await?;
    loop {
        let response = tokio::time::timeout(Duration::from_secs(120), stream.message())
            .await
            .context("raw watch stalled")??
            .context("raw watch closed")?;
        if response
            .events()
            .iter()
            .filter_map(|e| e.kv())
            .any(|kv| kv.mod_revision() >= after)
        {
            return Ok(started.elapsed().as_secs_f64());
        }
    }
}

/// Peak resident set size of process `pid`, from `/proc/PID/status`.
fn vm_hwm(pid: u32) -> anyhow::Result<usize> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("read /proc/{pid}/status"))?;
    let kib: usize = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .context("no VmHWM in /proc/PID/status")?;
    Ok(kib * 1024)
}

/// A TCP proxy in front of etcd whose connections can be cut and restored. A cut resets
/// every open connection (RST, as a crashed peer or a middlebox would; the tests'
/// `FaultProxy` does the same) and refuses new ones until restored.
struct CutProxy {
    addr: SocketAddr,
    /// Cancelled by a cut; replaced by a fresh token on restore.
    cut: Arc<Mutex<CancellationToken>>,
    accept: tokio::task::JoinHandle<()>,
}

impl CutProxy {
    async fn start(upstream: SocketAddr) -> anyhow::Result<CutProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let cut = Arc::new(Mutex::new(CancellationToken::new()));
        let accept = {
            let cut = cut.clone();
            tokio::spawn(async move {
                let mut connections = JoinSet::new();
                loop {
                    let Ok((mut inbound, _)) = listener.accept().await else {
                        continue;
                    };
                    while connections.try_join_next().is_some() {}
                    let token = cut.lock().expect("proxy lock").clone();
                    if token.is_cancelled() {
                        let _ = inbound.set_zero_linger();
                        continue;
                    }
                    connections.spawn(async move {
                        let Ok(mut outbound) = TcpStream::connect(upstream).await else {
                            return;
                        };
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                            _ = token.cancelled() => {
                                let _ = inbound.set_zero_linger();
                                let _ = outbound.set_zero_linger();
                            }
                        }
                    });
                }
            })
        };
        Ok(CutProxy { addr, cut, accept })
    }

    /// Resets every open connection and refuses new ones.
    fn cut(&self) {
        self.cut.lock().expect("proxy lock").cancel();
    }

    fn restore(&self) {
        *self.cut.lock().expect("proxy lock") = CancellationToken::new();
    }

    fn stop(self) {
        self.cut();
        self.accept.abort();
    }
}

// ---------------------------------------------------------------------------------------
// The picture

/// Pods over time for scale-up and scale-down, kcm against the baseline: one panel per
/// scenario, polylines, no dependencies.
pub fn svg(report: &Report) -> String {
    let (panel_w, panel_h, margin) = (520.0, 300.0, 50.0);
    let panels: Vec<&str> = ["scale-up", "scale-down"]
        .into_iter()
        .filter(|s| report.curves.contains_key(*s))
        .collect();
    let width = panel_w * panels.len().max(1) as f64;
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{panel_h}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
"#
    );
    for (i, scenario) in panels.iter().enumerate() {
        let curves = &report.curves[*scenario];
        let x0 = i as f64 * panel_w + margin;
        let (plot_w, plot_h) = (panel_w - 1.5 * margin, panel_h - 2.0 * margin);
        let y0 = margin + plot_h;
        let max_t = curves
            .values()
            .flat_map(|c| c.iter().map(|p| p.0))
            .fold(0.0f64, f64::max)
            .max(0.001);
        let max_n = curves
            .values()
            .flat_map(|c| c.iter().map(|p| p.1))
            .max()
            .unwrap_or(1)
            .max(1) as f64;
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" font-weight="bold">{scenario}: pods over time</text>"#,
            x0,
            margin - 20.0
        );
        let _ = writeln!(
            out,
            r#"<line x1="{x0}" y1="{y0}" x2="{}" y2="{y0}" stroke="black"/><line x1="{x0}" y1="{margin}" x2="{x0}" y2="{y0}" stroke="black"/>"#,
            x0 + plot_w
        );
        for tick in 0..=4 {
            let f = tick as f64 / 4.0;
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{:.2}s</text><text x="{:.1}" y="{:.1}" text-anchor="end">{:.0}</text>"#,
                x0 + f * plot_w,
                y0 + 16.0,
                f * max_t,
                x0 - 4.0,
                y0 - f * plot_h + 4.0,
                f * max_n
            );
        }
        for (j, (who, color)) in [("baseline", "#888888"), ("kcm", "#d62728")]
            .iter()
            .enumerate()
        {
            let Some(curve) = curves.get(*who) else {
                continue;
            };
            let points: Vec<String> = curve
                .iter()
                .map(|(t, n)| {
                    format!(
                        "{:.1},{:.1}",
                        x0 + t / max_t * plot_w,
                        y0 - *n as f64 / max_n * plot_h
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
                points.join(" ")
            );
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" fill="{color}">{who}</text>"#,
                x0 + plot_w - 120.0 + 70.0 * j as f64,
                margin - 20.0
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

/// Runs a watch on its own task (owned by `tasks`) feeding a channel, so that it is
/// polled all the time, as a controller's loop polls it, while the bench waits elsewhere.
fn drive<T: api::Object>(
    mut watch: ResumableWatch<T>,
    tasks: &mut JoinSet<()>,
) -> tokio::sync::mpsc::Receiver<Update<T>> {
    let (tx, rx) = tokio::sync::mpsc::channel(etcd_watcher::WATCH_BUFFER);
    tasks.spawn(async move {
        loop {
            let update = watch.next().await;
            if tx.send(update).await.is_err() {
                return;
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_ratio(kcm: f64, baseline: f64) -> Row {
        row(
            "scale-up",
            format!("{kcm}"),
            "pods/s",
            kcm,
            baseline,
            "raw",
            Some((0.7, true)),
        )
    }

    #[test]
    fn repeated_runs_report_the_median_row_and_every_ratio() {
        let runs = vec![
            vec![with_ratio(90.0, 100.0), with_ratio(1.0, 1.0)],
            vec![with_ratio(50.0, 100.0), with_ratio(2.0, 1.0)],
            vec![with_ratio(70.0, 100.0), with_ratio(3.0, 1.0)],
        ];
        let rows = median_rows(runs);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].kcm, 70.0, "the median run's own figures");
        assert_eq!(rows[0].ratios, vec![0.9, 0.5, 0.7]);
        assert_eq!(spread(&rows[0].ratios), Some((0.5, 0.9)));
        assert_eq!(rows[1].ratio, Some(2.0));
    }

    #[test]
    fn one_run_is_reported_as_it_is() {
        let rows = median_rows(vec![vec![with_ratio(90.0, 100.0)]]);
        assert!(rows[0].ratios.is_empty());
        assert_eq!(spread(&rows[0].ratios), None);
    }
}
