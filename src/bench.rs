//! `kcm bench`: how fast kcm converges, beside what etcd itself does on the same machine
//! in the same run.
//!
//! Absolute times on a shared 2-core machine drift by tens of percent from run to run;
//! ratios measured in one run against a raw etcd-client baseline do not. Every scenario
//! prints one row per figure: what was measured, kcm's figure, the baseline's, the ratio
//! and the target. Scenarios (docs/PERFORMANCE.md has the figures and what bounds them):
//! - `scale-up` / `scale-down`: one controller 0 → N → 0 replicas, against create-if-absent
//!   transactions (and guarded deletes) of the same documents at kcm's concurrency;
//! - `rs-scale-up` / `rs-scale-down`: the same with one ReplicaSet and the ReplicaSet
//!   controller, held to the scale rows' target (ratio ≥ 0.9) and to 0.9 × the
//!   ReplicationController's ratio in the same run (the extra compare of the ReplicaSet's
//!   key must not cost more);
//! - `rollout`: `set image` on a Deployment of 1,000 replicas at 25%/25%, until the
//!   rollout completes, against the same number of raw pod creates and deletes;
//! - `heal`: delete one pod of a converged controller, time until its replacement exists;
//! - `resync`: a no-op resync of many controllers against one raw list of all their pods;
//! - `watch`: typed events per second from kcm's resumable watch against a raw watch;
//! - `resume`: catching up after a connection cut, against a raw watch from the revision;
//! - `memory`: peak RSS of a `kcm controller-manager` child against its pods' size;
//! - `api-list`: a namespace's pods listed through `kcm apiserver` (a consistent JSON list,
//!   served from the watch cache once it reached etcd's revision; JSON at
//!   `resourceVersion=0`; a Table) against one raw range of the keys, values parsed;
//! - `api-watch`: events per second delivered to many HTTP watches against one raw etcd
//!   watch, the etcd watchers they add (none) and the RSS the apiserver adds;
//! - `api-get`: p50/p99 of single-pod GETs (watch cache, consistent read) under a writer,
//!   against raw single-key gets;
//! - `api-create`: pods `POST`ed through the API at 64 in flight against raw
//!   create-if-absent transactions;
//! - `api-update`: read-modify-writes through the API (`GET` + `PUT`, merge `PATCH`)
//!   against raw compare-and-swap;
//! - `api-apply`: Deployments server-side applied through the API at 64 in flight,
//!   created then applied again with a new image, against raw create-if-absent then
//!   compare-and-swap transactions.
//!
//! Each scenario works under its own key prefix (`/kcm-bench-{run}/{scenario}`), so an
//! etcd given with `--etcd-servers` is never touched outside it; the prefix is deleted at
//! the end. Without one, a private etcd is started (and stopped) like `kcm up`'s; the scale
//! rows compact its history before each side they measure, as an apiserver would.

mod api;
mod clock;
mod cpu;
mod fixtures;
mod heal;
mod memory;
mod report;
mod resync;
mod rollout;
mod scale;
pub mod soak;
mod watch;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;
use etcd_client::{Client, Compare, CompareOp, DeleteOptions, EventType, Txn, TxnOp, WatchOptions};
use serde::Serialize;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use self::clock::RevisionClock;
pub use self::report::{median_rows, relative_targets, svg, table};
use self::scale::Kind;
use crate::api::ReplicationController;
use crate::client::{self, ClientConfig, Target};
use crate::etcd_process::PrivateEtcd;
use crate::etcd_watcher::Watcher;
use crate::record::{self, EventBroadcaster};
use crate::registry::Registry;
use crate::replication_manager::{ManagerConfig, ReplicationManager};
use crate::status::Metrics;

/// The scenarios, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    ScaleUp,
    ScaleDown,
    RsScaleUp,
    RsScaleDown,
    Rollout,
    Heal,
    Resync,
    Watch,
    Resume,
    Memory,
    ApiList,
    ApiWatch,
    ApiGet,
    ApiCreate,
    ApiUpdate,
    ApiApply,
}

impl Scenario {
    /// Every scenario, in the order they run.
    pub const ALL: [Scenario; 16] = [
        Scenario::ScaleUp,
        Scenario::ScaleDown,
        Scenario::RsScaleUp,
        Scenario::RsScaleDown,
        Scenario::Rollout,
        Scenario::Heal,
        Scenario::Resync,
        Scenario::Watch,
        Scenario::Resume,
        Scenario::Memory,
        Scenario::ApiList,
        Scenario::ApiWatch,
        Scenario::ApiGet,
        Scenario::ApiCreate,
        Scenario::ApiUpdate,
        Scenario::ApiApply,
    ];

    /// The scenario's name on the command line and in the table, e.g. `scale-up`.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::ScaleUp => "scale-up",
            Scenario::ScaleDown => "scale-down",
            Scenario::RsScaleUp => "rs-scale-up",
            Scenario::RsScaleDown => "rs-scale-down",
            Scenario::Rollout => "rollout",
            Scenario::Heal => "heal",
            Scenario::Resync => "resync",
            Scenario::Watch => "watch",
            Scenario::Resume => "resume",
            Scenario::Memory => "memory",
            Scenario::ApiList => "api-list",
            Scenario::ApiWatch => "api-watch",
            Scenario::ApiGet => "api-get",
            Scenario::ApiCreate => "api-create",
            Scenario::ApiUpdate => "api-update",
            Scenario::ApiApply => "api-apply",
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
    /// Pods of the memory scenario instead of its size's (rounded down to whole controllers).
    pub memory_pods: Option<usize>,
    /// `--api`: the scale scenarios' controllers run through an apiserver.
    pub through_api: bool,
    /// `--controller-baseline`: the scale rows' baseline writes also cost etcd what any
    /// controller's must ([`ControllerGuard`]).
    pub controller_baseline: bool,
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
    /// Replicas of the deployment the rollout scenario updates.
    pub rollout_replicas: usize,
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
    /// Pods listed through the API.
    pub api_list_pods: usize,
    /// Lists of each kind timed (the median is reported).
    pub api_list_repeats: usize,
    /// HTTP watches open at once, and the pods created while they watch.
    pub api_watchers: usize,
    pub api_watch_pods: usize,
    /// Pods read by single GETs, and GETs of each kind timed.
    pub api_get_pods: usize,
    pub api_gets: usize,
    /// Pods created through the API (and raw).
    pub api_creates: usize,
    /// Pods updated through the API (and raw), and the updates of each kind timed.
    pub api_update_pods: usize,
    pub api_updates: usize,
    /// Deployments server-side applied through the API (and raw), each twice.
    pub api_applies: usize,
    /// Repetitions of the short measurements (the median is reported).
    pub repeats: usize,
}

impl Sizes {
    pub fn full() -> Sizes {
        Sizes {
            scale_replicas: 10_000,
            rollout_replicas: 1_000,
            heal_replicas: 100,
            heal_trials: 200,
            resync_controllers: 1_000,
            resync_pods_each: 10,
            resync_fresh_sample: 50,
            watch_events: 20_000,
            resume_events: 10_000,
            memory_controllers: 100,
            memory_pods_each: 1_000,
            api_list_pods: 10_000,
            api_list_repeats: 5,
            api_watchers: 1_000,
            api_watch_pods: 10_000,
            api_get_pods: 1_000,
            api_gets: 2_000,
            api_creates: 10_000,
            api_update_pods: 1_000,
            api_updates: 10_000,
            api_applies: 10_000,
            repeats: 3,
        }
    }

    pub fn quick() -> Sizes {
        Sizes {
            scale_replicas: 300,
            rollout_replicas: 50,
            heal_replicas: 10,
            heal_trials: 10,
            resync_controllers: 20,
            resync_pods_each: 5,
            resync_fresh_sample: 5,
            watch_events: 500,
            resume_events: 300,
            memory_controllers: 4,
            memory_pods_each: 50,
            api_list_pods: 1_000,
            api_list_repeats: 3,
            api_watchers: 100,
            api_watch_pods: 1_000,
            api_get_pods: 100,
            api_gets: 200,
            api_creates: 300,
            api_update_pods: 100,
            api_updates: 500,
            api_applies: 300,
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
    /// The threads of the async runtime the bench (both sides) ran on (`--worker-threads`).
    pub worker_threads: usize,
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
    let mut sizes = if config.quick {
        Sizes::quick()
    } else {
        Sizes::full()
    };
    if let Some(pods) = config.memory_pods {
        sizes.memory_controllers = (pods / sizes.memory_pods_each).max(1);
    }
    let scenarios = config.scenarios.clone();
    // `_tmpfs_dir` is held until the end: the tmpfs data dir is removed on drop.
    let (private, _tmpfs_dir) = match &config.private_etcd {
        None => (None, None),
        Some(private) => {
            let (etcd, dir) = start_private_etcd(private).await?;
            (Some(etcd), dir)
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
    let etcd_version = etcd_version(&client).await;
    let run_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let root = format!("/kcm-bench-{run_id}");
    let bench = Bench {
        client: client.clone(),
        client_config,
        root: root.clone(),
        sizes: sizes.clone(),
        manager_binary: config.manager_binary.clone(),
        through_api: config.through_api,
        controller_baseline: config.controller_baseline,
        curves: Mutex::default(),
        run: Default::default(),
        etcd_pid: private.as_ref().and_then(PrivateEtcd::pid),
        private_etcd: private.is_some(),
        warmed: Default::default(),
    };
    let private_kind = match (given, tmpfs) {
        (true, _) => None,
        (false, true) => Some("private, tmpfs"),
        (false, false) => Some("private, disk"),
    };
    let quick = if config.quick { ", quick sizes" } else { "" };
    let (addresses, count) = (endpoints.join(","), scenarios.len());
    let shown = private_kind.map(|k| format!(" ({k})")).unwrap_or_default();
    eprintln!("kcm bench: etcd {etcd_version} at {addresses}{shown}, {count} scenario(s){quick}");
    let mut rows = Vec::new();
    let repeat = config.repeat.max(1);
    let result = async {
        for scenario in &scenarios {
            let mut runs: Vec<Vec<Row>> = Vec::with_capacity(repeat);
            for run in 0..repeat {
                bench.run.store(run, std::sync::atomic::Ordering::Relaxed);
                let scenario_started = Instant::now();
                let name = scenario.name();
                match repeat {
                    1 => eprintln!("kcm bench: {name} ..."),
                    _ => eprintln!("kcm bench: {name} (run {} of {repeat}) ...", run + 1),
                }
                let new_rows = bench.scenario(*scenario).await?;
                eprintln!(
                    "kcm bench: {} done in {:.1}s",
                    scenario.name(),
                    scenario_started.elapsed().as_secs_f64()
                );
                if repeat > 1 {
                    // The table shows the median run's measure; each run's is here.
                    for row in &new_rows {
                        if let Some(ratio) = row.ratio {
                            eprintln!("kcm bench:   {} {ratio:.2}: {}", row.scenario, row.measure);
                        }
                    }
                }
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
    // The targets are the etcd mode's against raw writes; through the API, or against the
    // controller baseline, the scale rows have none.
    if !config.through_api && !config.controller_baseline {
        relative_targets(&mut rows);
    }
    let report = Report {
        date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        worker_threads: tokio::runtime::Handle::current().metrics().num_workers(),
        etcd_version,
        etcd: private_kind.map_or(addresses, String::from),
        quick: config.quick,
        sizes,
        rows,
        curves: bench.curves.into_inner().expect("curves lock"),
        seconds: started.elapsed().as_secs_f64(),
    };
    write_report(&config, &report)
}

/// The version etcd reports ("unknown" when it does not answer).
async fn etcd_version(client: &etcd_client::Client) -> String {
    let status = client.clone().status().await;
    status.map_or_else(|_| "unknown".into(), |s| s.version().to_string())
}

/// Prints the report's table, and writes its JSON and SVG where the config asks.
fn write_report(config: &Config, report: &Report) -> anyhow::Result<()> {
    print!("{}", table(report));
    if let Some(path) = &config.json {
        let json = serde_json::to_string_pretty(report)?;
        std::fs::write(path, json).with_context(|| format!("write {}", path.display()))?;
    }
    if let Some(path) = &config.svg {
        std::fs::write(path, svg(report)).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(())
}

/// Starts the private etcd `private` asks for, on a free loopback port; with its tmpfs
/// data dir when it asks for one (removed when the returned dir drops).
async fn start_private_etcd(
    private: &PrivateEtcdConfig,
) -> anyhow::Result<(PrivateEtcd, Option<tempfile::TempDir>)> {
    let mut tmpfs_dir = None;
    let data_dir = match (&private.data_dir, private.tmpfs) {
        (Some(dir), _) => Some(dir.clone()),
        (None, true) => {
            let dir = tempfile::Builder::new()
                .prefix("kcm-bench-etcd-")
                .tempdir_in("/dev/shm")
                .context("create a data dir on /dev/shm")?;
            let path = dir.path().to_path_buf();
            tmpfs_dir = Some(dir);
            Some(path)
        }
        (None, false) => None,
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let etcd = PrivateEtcd::start(&private.binary, addr, data_dir.as_deref()).await?;
    Ok((etcd, tmpfs_dir))
}

impl Bench {
    /// Runs one scenario once.
    async fn scenario(&self, scenario: Scenario) -> anyhow::Result<Vec<Row>> {
        match scenario {
            Scenario::ScaleUp => self.scale(Kind::ReplicationController, true).await,
            Scenario::ScaleDown => self.scale(Kind::ReplicationController, false).await,
            Scenario::RsScaleUp => self.scale(Kind::ReplicaSet, true).await,
            Scenario::RsScaleDown => self.scale(Kind::ReplicaSet, false).await,
            Scenario::Rollout => self.rollout().await,
            Scenario::Heal => self.heal().await,
            Scenario::Resync => self.resync().await,
            Scenario::Watch => self.watch().await,
            Scenario::Resume => self.resume().await,
            Scenario::Memory => self.memory().await,
            Scenario::ApiList => self.api_list().await,
            Scenario::ApiWatch => self.api_watch().await,
            Scenario::ApiGet => self.api_get().await,
            Scenario::ApiCreate => self.api_create().await,
            Scenario::ApiUpdate => self.api_update().await,
            Scenario::ApiApply => self.api_apply().await,
        }
    }
}

// ---------------------------------------------------------------------------------------
// The runner (each scenario is an `impl Bench` block in its own file)

struct Bench {
    client: Client,
    client_config: ClientConfig,
    root: String,
    sizes: Sizes,
    manager_binary: Option<PathBuf>,
    /// `--api`: the scale scenarios' controllers run through an apiserver.
    through_api: bool,
    /// `--controller-baseline`: the scale rows' baseline writes are guarded and watched.
    controller_baseline: bool,
    curves: Mutex<HashMap<String, HashMap<String, Curve>>>,
    /// Which run of `--repeat` is going: each works under its own prefix.
    run: std::sync::atomic::AtomicUsize,
    /// The private etcd's process, whose CPU time the scale rows split out; `None` for an
    /// etcd named with `--etcd-servers`.
    etcd_pid: Option<u32>,
    /// Whether the etcd is the bench's own, whose history it may compact
    /// ([`Bench::compact_history`]); one named with `--etcd-servers` is left as it is.
    private_etcd: bool,
    /// Whether the scale rows' warm-up has run ([`Bench::warm_up`]).
    warmed: std::sync::atomic::AtomicBool,
}

/// With `--controller-baseline`, what the scale rows' baseline writes add to raw ones, as
/// every pod write of a kcm controller does: a compare of its controller's key (the
/// incarnation guard, which etcd answers by reading that key), while a second watch (the
/// controller's pod informer) receives every write.
struct ControllerGuard {
    key: String,
    create_revision: i64,
}

impl ControllerGuard {
    fn compare(&self) -> Compare {
        Compare::create_revision(self.key.as_str(), CompareOp::Equal, self.create_revision)
    }
}

/// An in-process replication manager under one prefix, stopped on `stop`.
struct RunningManager {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    /// The event writer of its recorder (the controller manager records events; so does
    /// the bench's, so its ratio includes them).
    events_writer: tokio::task::JoinHandle<()>,
    /// With `--api`, the apiserver it runs through, stopped after it.
    apiserver: Option<api::RunningApi>,
}

impl RunningManager {
    async fn stop(self) -> anyhow::Result<()> {
        self.stop.cancel();
        let stopped = self.task.await.context("manager task")?;
        // Its recorder went with it: the writer ends once the queue is written.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), self.events_writer).await;
        if let Some(apiserver) = self.apiserver {
            apiserver.stop().await?;
        }
        stopped
    }
}

/// A count of pods as etcd commits them ([`Bench::count_pods`]).
struct PodCounter {
    /// The count after each change, by the change's revision.
    watch: tokio::task::JoinHandle<anyhow::Result<Vec<(i64, usize)>>>,
    clock: RevisionClock,
}

impl PodCounter {
    /// Waits up to `limit` for the count to be done; returns the curve in seconds since
    /// `started`, each change at the time etcd had committed it.
    async fn curve(
        mut self,
        limit: std::time::Duration,
        started: Instant,
    ) -> anyhow::Result<Curve> {
        let changes = tokio::time::timeout(limit, &mut self.watch)
            .await
            .context("timed out")?
            .context("counting watch")??;
        let ticks = self.clock.stop().await?;
        changes
            .into_iter()
            .map(|(revision, count)| {
                let at = ticks
                    .reached(revision)
                    .with_context(|| format!("the revision clock never saw revision {revision}"))?;
                Ok((at.saturating_duration_since(started).as_secs_f64(), count))
            })
            .collect()
    }
}

impl Drop for PodCounter {
    fn drop(&mut self) {
        self.watch.abort();
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
        let key = crate::api::object_key::<ReplicationController>(
            prefix,
            &rc.metadata.namespace,
            &rc.metadata.name,
        );
        self.put(&key, crate::api::encode(rc)?).await?;
        Ok(())
    }

    /// Writes `documents` (key, value) create-if-absent, `concurrency` at a time; returns
    /// the revision each was created at.
    async fn create_all(
        &self,
        documents: Vec<(String, Vec<u8>)>,
        concurrency: usize,
    ) -> anyhow::Result<Vec<(String, i64)>> {
        self.create_all_guarded(documents, concurrency, None).await
    }

    /// [`Bench::create_all`], each create also requiring `guard`'s controller alive.
    async fn create_all_guarded(
        &self,
        documents: Vec<(String, Vec<u8>)>,
        concurrency: usize,
        guard: Option<&ControllerGuard>,
    ) -> anyhow::Result<Vec<(String, i64)>> {
        let limit = Arc::new(Semaphore::new(concurrency.max(1)));
        let mut creates = JoinSet::new();
        for (key, value) in documents {
            let permit = limit.clone().acquire_owned().await?;
            let mut kv = self.client.kv_client();
            let guard = guard.map(ControllerGuard::compare);
            creates.spawn(async move {
                let absent = Compare::create_revision(key.as_str(), CompareOp::Equal, 0);
                let txn = Txn::new()
                    .when(std::iter::once(absent).chain(guard).collect::<Vec<_>>())
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
        self.delete_all_guarded(keys, concurrency, None).await
    }

    /// [`Bench::delete_all`], each delete also requiring `guard`'s controller alive.
    async fn delete_all_guarded(
        &self,
        keys: Vec<(String, i64)>,
        concurrency: usize,
        guard: Option<&ControllerGuard>,
    ) -> anyhow::Result<()> {
        let limit = Arc::new(Semaphore::new(concurrency.max(1)));
        let mut deletes = JoinSet::new();
        for (key, revision) in keys {
            let permit = limit.clone().acquire_owned().await?;
            let mut kv = self.client.kv_client();
            let guard = guard.map(ControllerGuard::compare);
            deletes.spawn(async move {
                let unchanged = Compare::mod_revision(key.as_str(), CompareOp::Equal, revision);
                let txn = Txn::new()
                    .when(std::iter::once(unchanged).chain(guard).collect::<Vec<_>>())
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
        let (events, events_writer) =
            EventBroadcaster::start(&self.client, prefix, record::Counts::default());
        let config = ManagerConfig {
            events: events.recorder("replication-controller", None),
            ..config
        };
        let manager = ReplicationManager::new(registry, config, Arc::new(Metrics::new()));
        let task = tokio::spawn(manager.run(watcher, stop.clone().cancelled_owned()));
        Ok(RunningManager {
            stop,
            task,
            events_writer,
            apiserver: None,
        })
    }

    /// Counts pods under `dir` from `after` as etcd commits them, until `done(count)`: a
    /// raw watch tells the revision of every change and a [`RevisionClock`] when etcd
    /// reached it. The counter is ready when this returns.
    async fn count_pods(
        &self,
        dir: String,
        after: i64,
        initial: usize,
        done: impl Fn(usize) -> bool + Send + 'static,
    ) -> anyhow::Result<PodCounter> {
        let client = self.client.clone();
        let clock = RevisionClock::start(&self.client_config).await?;
        let watch = tokio::spawn(async move {
            let options = WatchOptions::new()
                .with_prefix()
                .with_start_revision(after + 1);
            let mut stream = client
                .watch_client()
                .watch(dir.as_str(), Some(options))
                .await
                .context("open counting watch")?;
            let mut count = initial;
            let mut changes = Vec::new();
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
                    // A delete's kv carries the delete's revision.
                    let revision = event.kv().map_or(0, |kv| kv.mod_revision());
                    changes.push((revision, count));
                }
            }
            Ok(changes)
        });
        Ok(PodCounter { watch, clock })
    }

    /// Compacts a private etcd's history up to `revision` and waits until the compaction
    /// has been applied, as an apiserver compacts every 5 minutes; an etcd named with
    /// `--etcd-servers` is not touched. Before each measured side of a scale row, so that
    /// neither side pays for the history the rows before it left: uncompacted, etcd's CPU
    /// for the same 0 → 10,000 → 0 grew by 40 % over eight runs (docs/PERFORMANCE.md), and
    /// the side that runs second met more of it. `revision` is where the side began, before
    /// its controller started: a watch of that controller that had fallen behind the
    /// compaction had to list again within the measured span (its runs took twice as long).
    async fn compact_history(&self, revision: i64) -> anyhow::Result<()> {
        if !self.private_etcd {
            return Ok(());
        }
        let compacted = self
            .client
            .kv_client()
            .compact(
                revision,
                Some(etcd_client::CompactionOptions::new().with_physical()),
            )
            .await;
        match compacted {
            Ok(_) => Ok(()),
            // Nothing written since the last compaction.
            Err(e) if crate::registry::is_compacted(&e) => Ok(()),
            Err(e) => Err(anyhow::Error::from(e).context("compact the bench etcd's history")),
        }
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
}
