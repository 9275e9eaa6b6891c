//! `kcm lab`: see a 2014 weakness happen, then see kcm's fix, on the same script.
//!
//! Each scenario runs twice, in turn: once with the late-2014 replication manager
//! (`crate::replication_2014`) and once with kcm's (`crate::replication_manager`), each
//! in a fresh namespace under the run's own key prefix (`/kcm-lab-{run}`), so an etcd
//! given with `--etcd-servers` is never touched outside it (the prefix is deleted at the
//! end). Only one loop runs at a time. Figures come from etcd, not from the loops' own
//! counters: counts from etcd's event history after the scenario's decisive write, times
//! from a watch on etcd, request counts from etcd's own `/metrics` (except `burst`'s
//! creates in flight, which no etcd record holds).
//!
//! Scenarios (the docs/departures.md row each illustrates, by its area):
//! - `overcreate`: two managers of the same kind see one controller scaled 0 → N at once;
//!   figure: the most active pods at any revision (2014: each lists, then creates all it
//!   misses: up to 2N; kcm: deterministic slot names, never more than N) (#8138);
//! - `stale-watch`: the loop's connection is cut while etcd's history moves on and is
//!   compacted; then scale-ups; figure: mean seconds from a scale-up to its first pod
//!   (2014 re-watches from its stale resourceVersion forever, each time a 410, and only
//!   the tick, read in the moment between two failed watches, heals; kcm relists and
//!   reacts at once) (#3829). It refuses to run on an etcd the lab did not start;
//! - `victims`: scale 5 → 2 with 3 running and 2 pending pods, the running ones first in
//!   key order; figure: running pods deleted (2014 deletes the first in list order; kcm
//!   ranks pending and unassigned first) (#3948);
//! - `orphans`: a controller short of pods is deleted (its pods and it, in one
//!   transaction); figure: pods created after the delete (2014 syncs a deleted controller
//!   at its last state; kcm writes nothing for a deleted controller) (weakness 10, docs/2014.md);
//! - `heal`: a converged controller loses a pod, several times; figure: mean seconds from
//!   the delete to the replacement's create, seen by a watch on etcd (2014 does not watch
//!   pods and waits for the tick, about half the period; kcm: milliseconds);
//! - `resync`: many converged controllers; figure: etcd range requests per sync period,
//!   from etcd's own `/metrics` (2014: one controller list plus one pod list per
//!   controller; kcm: none, its caches answer) (#5884).
//! - `burst`: one controller created with many replicas; figure: the most pod creates
//!   in flight at once, counted around each loop's pod-control seam (2014: all at once,
//!   one task per missing pod; kcm: slow-start batches and the burst cap of 500) (#4866).
//!
//! After each run the scenario's namespace is deleted (with the loop stopped), so the
//! next loop lists only its own.
//!
//! With `--svg DIR`, each scenario also keeps its figure's course, for both loops, and
//! `DIR/SCENARIO.svg` draws the two series ("2014" and "kcm") on one chart
//! (`crate::bench::chart`): the counts by etcd revision from the same history replay,
//! `burst`'s creates in flight over time, the timed scenarios' seconds per trial,
//! `resync`'s range requests per period.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use etcd_client::{Client, DeleteOptions, EventType, Txn, TxnOp, WatchOptions};
use futures::future::BoxFuture;
use serde::Serialize;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::api::{
    Container, ObjectMeta, Pod, PodPhase, PodSpec, PodTemplateSpec, ReplicationController,
    ReplicationControllerSpec, ResourceVersion,
};
use crate::bench::chart::{self, Panel, Series};
use crate::bench::proxy::CutProxy;
use crate::client::{self, ClientConfig, Target};
use crate::etcd_process::{local_client_addr, PrivateEtcd};
use crate::etcd_watcher::Watcher;
use crate::labels::{Selector, Set};
use crate::registry::Registry;
use crate::replication_2014;
use crate::replication_manager::{
    CreateOutcome, DeleteOutcome, EtcdPodControl, ManagerConfig, PodControl, ReplicationManager,
    StatusOutcome,
};
use crate::status::Metrics;

/// The lab's default sync period: shorter than 2014's 10 s so a run stays short.
pub const DEFAULT_SYNC_PERIOD: Duration = Duration::from_secs(2);

/// The scenarios, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    Overcreate,
    StaleWatch,
    Victims,
    Orphans,
    Heal,
    Resync,
    Burst,
}

impl Scenario {
    /// Every scenario, in the order they run.
    pub const ALL: [Scenario; 7] = [
        Scenario::Overcreate,
        Scenario::StaleWatch,
        Scenario::Victims,
        Scenario::Orphans,
        Scenario::Heal,
        Scenario::Resync,
        Scenario::Burst,
    ];

    /// The scenario's name on the command line and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Overcreate => "overcreate",
            Scenario::StaleWatch => "stale-watch",
            Scenario::Victims => "victims",
            Scenario::Orphans => "orphans",
            Scenario::Heal => "heal",
            Scenario::Resync => "resync",
            Scenario::Burst => "burst",
        }
    }
}

/// Which replication manager a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loop {
    /// `crate::replication_2014`.
    V2014,
    /// `crate::replication_manager`.
    Kcm,
}

impl Loop {
    fn name(self) -> &'static str {
        match self {
            Loop::V2014 => "2014",
            Loop::Kcm => "kcm",
        }
    }
}

/// What `kcm lab` runs, and against which etcd.
#[derive(Clone, Debug)]
pub struct Config {
    /// The scenarios to run, in this order; never empty.
    pub scenarios: Vec<Scenario>,
    /// The etcd binary of a private etcd, or `None` to use the target's (one named with
    /// `--etcd-servers`).
    pub private_etcd: Option<PathBuf>,
    /// Small sizes, for tests.
    pub quick: bool,
    /// Both loops' sync period.
    pub sync_period: Duration,
    /// Where to write the rows as JSON.
    pub json: Option<PathBuf>,
    /// The directory to write one chart per scenario to, `SCENARIO.svg`.
    pub svg: Option<PathBuf>,
}

/// A scenario's figure for one loop, and its course (x, y) for the chart.
type Measured = (f64, Vec<(f64, f64)>);

/// One row of the table: one scenario, both loops' figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub scenario: &'static str,
    /// What was measured.
    pub measure: String,
    pub unit: &'static str,
    /// The 2014 loop's figure.
    pub v2014: f64,
    /// kcm's figure.
    pub kcm: f64,
    /// The "Departures from 2014" row it illustrates (its `area`).
    pub departure: &'static str,
    /// The Kubernetes issues (and the reference's weakness) behind it.
    pub issues: &'static str,
}

/// How big each scenario is.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    /// `orphans`: the controller's replicas, and how many of its pods go with it.
    orphans_replicas: i64,
    orphans_lost: usize,
    /// `victims`: replicas before and after, and how many pods run (the first in key order).
    victims_from: i64,
    victims_to: i64,
    victims_running: usize,
    /// `overcreate`: the replicas two managers scale to.
    overcreate_replicas: i64,
    /// `heal`: the controller's replicas and the pods deleted one at a time.
    heal_replicas: i64,
    heal_trials: usize,
    /// `stale-watch`: scale-ups timed after the compaction.
    stale_watch_trials: usize,
    /// `resync`: converged controllers, and the pods of each.
    resync_controllers: usize,
    resync_pods_each: i64,
    /// `burst`: the replicas one controller is created with.
    burst_replicas: i64,
}

impl Sizes {
    fn new(quick: bool) -> Sizes {
        if quick {
            Sizes {
                orphans_replicas: 3,
                orphans_lost: 2,
                victims_from: 5,
                victims_to: 2,
                victims_running: 3,
                overcreate_replicas: 100,
                heal_replicas: 3,
                heal_trials: 3,
                stale_watch_trials: 2,
                resync_controllers: 10,
                resync_pods_each: 3,
                burst_replicas: 200,
            }
        } else {
            Sizes {
                orphans_replicas: 10,
                orphans_lost: 5,
                victims_from: 5,
                victims_to: 2,
                victims_running: 3,
                overcreate_replicas: 200,
                heal_replicas: 10,
                heal_trials: 10,
                stale_watch_trials: 5,
                resync_controllers: 200,
                resync_pods_each: 10,
                burst_replicas: 2000,
            }
        }
    }
}

/// Runs the selected scenarios, prints the table on stdout and returns its rows.
///
/// # Errors
/// When etcd cannot be started or reached, or a scenario fails (its setup, or it does not
/// reach its state within its time limit).
pub async fn run(target: &Target, config: Config) -> anyhow::Result<Vec<Row>> {
    let started = Instant::now();
    if let Some(dir) = &config.svg {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("create the --svg directory {}", dir.display()))?;
    }
    let private = match &config.private_etcd {
        None => None,
        Some(binary) => {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port();
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            Some(PrivateEtcd::start(binary, addr, None).await?)
        }
    };
    if private.is_none() && config.scenarios.contains(&Scenario::StaleWatch) {
        anyhow::bail!(
            "stale-watch compacts etcd's history, so it runs only on the private etcd kcm lab starts, not on one named with --etcd-servers"
        );
    }
    let endpoints = match &private {
        Some(etcd) => vec![etcd.endpoint().to_string()],
        None => target.client.endpoints.clone(),
    };
    let client_config = ClientConfig {
        endpoints: endpoints.clone(),
        ..target.client.clone()
    };
    let client = client::connect(&client_config).await?;
    let run_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let root = format!("/kcm-lab-{run_id}");
    let lab = Lab {
        registry: Registry::new(&client, &root)?,
        client: client.clone(),
        client_config,
        root: root.clone(),
        period: config.sync_period,
        sizes: Sizes::new(config.quick),
    };
    eprintln!(
        "kcm lab: etcd at {}{}, sync period {} (2014's was 10s), {} scenario(s){}",
        endpoints.join(","),
        if private.is_some() { " (private)" } else { "" },
        humantime::format_duration(config.sync_period),
        config.scenarios.len(),
        if config.quick { ", quick sizes" } else { "" }
    );
    let result = async {
        let mut rows = Vec::new();
        let mut panels = Vec::new();
        for scenario in &config.scenarios {
            eprintln!("kcm lab: {} ...", scenario.name());
            let (row, panel) = lab.scenario(*scenario).await?;
            rows.push(row);
            panels.push(panel);
        }
        anyhow::Ok((rows, panels))
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
    let (rows, panels) = result?;
    print!("{}", table(&rows));
    eprintln!("kcm lab: done in {:.1}s", started.elapsed().as_secs_f64());
    if let Some(path) = &config.json {
        let document = serde_json::json!({ "scenarios": rows });
        std::fs::write(path, serde_json::to_string_pretty(&document)? + "\n")
            .with_context(|| format!("write {}", path.display()))?;
    }
    if let Some(dir) = &config.svg {
        for (row, panel) in rows.iter().zip(panels) {
            let path = dir.join(format!("{}.svg", row.scenario));
            std::fs::write(&path, chart::svg(&[panel]))
                .with_context(|| format!("write the --svg chart {}", path.display()))?;
        }
    }
    Ok(rows)
}

/// Pod creates in flight: now, the most at once, and each change (seconds since `start`,
/// creates in flight).
struct InFlight {
    start: Instant,
    now: AtomicUsize,
    peak: AtomicUsize,
    course: Mutex<Vec<(f64, f64)>>,
}

impl InFlight {
    fn new() -> InFlight {
        InFlight {
            start: Instant::now(),
            now: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            course: Mutex::new(vec![(0.0, 0.0)]),
        }
    }

    fn enter(&self) {
        let mut course = self.course.lock().expect("in-flight course lock");
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        course.push((self.start.elapsed().as_secs_f64(), now as f64));
    }

    fn exit(&self) {
        let mut course = self.course.lock().expect("in-flight course lock");
        let now = self.now.fetch_sub(1, Ordering::SeqCst) - 1;
        course.push((self.start.elapsed().as_secs_f64(), now as f64));
    }
}

/// A pod control that counts the creates in flight through it, for `burst`.
struct Counting<P> {
    inner: P,
    in_flight: Arc<InFlight>,
}

impl<P: replication_2014::PodControl> replication_2014::PodControl for Counting<P> {
    fn create_replica(
        &self,
        namespace: &str,
        controller: &ReplicationController,
    ) -> BoxFuture<'static, ()> {
        let create = self.inner.create_replica(namespace, controller);
        let in_flight = self.in_flight.clone();
        Box::pin(async move {
            in_flight.enter();
            create.await;
            in_flight.exit();
        })
    }

    fn delete_pod(&self, namespace: &str, name: &str) -> BoxFuture<'static, anyhow::Result<()>> {
        self.inner.delete_pod(namespace, name)
    }
}

impl<P: PodControl> PodControl for Counting<P> {
    async fn create_pod(
        &self,
        controller: &ReplicationController,
        pod: Pod,
    ) -> anyhow::Result<CreateOutcome> {
        self.in_flight.enter();
        let outcome = self.inner.create_pod(controller, pod).await;
        self.in_flight.exit();
        outcome
    }

    async fn delete_pod(
        &self,
        controller: &ReplicationController,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> anyhow::Result<DeleteOutcome> {
        self.inner
            .delete_pod(controller, namespace, name, resource_version)
            .await
    }

    async fn update_status(
        &self,
        controller: &ReplicationController,
        replicas: i64,
        ready: i64,
    ) -> anyhow::Result<StatusOutcome> {
        self.inner.update_status(controller, replicas, ready).await
    }
}

/// A plain HTTP/1.0 GET; the body.
async fn http_get(addr: SocketAddr, path: &str) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let read = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await?;
        anyhow::Ok(response)
    };
    let response = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .context("no answer within 10s")??;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    anyhow::ensure!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{}",
        head.lines().next().unwrap_or("no status line")
    );
    Ok(body.to_string())
}

/// Waits for the first event on `watch` that creates a key.
///
/// # Errors
/// When none comes within `limit`, or the watch fails.
async fn wait_for_a_create(
    watch: &mut etcd_client::WatchStream,
    limit: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let response = tokio::time::timeout_at(deadline, watch.message())
            .await
            .context("no pod was created within the scenario's time limit")?
            .context("pods watch")?
            .context("pods watch closed")?;
        let created = response.events().iter().any(|event| {
            event.event_type() == EventType::Put && event.kv().is_some_and(|kv| kv.version() == 1)
        });
        if created {
            return Ok(());
        }
    }
}

/// The table: one row per scenario.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| scenario | measure | 2014 | kcm | departure | issues |\n|---|---|---|---|---|---|\n",
    );
    for row in rows {
        out.push_str(&format!(
            "| {} | {} ({}) | {} | {} | {} | {} |\n",
            row.scenario, row.measure, row.unit, row.v2014, row.kcm, row.departure, row.issues
        ));
    }
    out
}

/// The mean of the trials' seconds, to the millisecond.
fn mean_seconds(trials: &[(f64, f64)]) -> f64 {
    let mean = trials.iter().map(|t| t.1).sum::<f64>() / trials.len().max(1) as f64;
    (mean * 1000.0).round() / 1000.0
}

/// A count's course over etcd's history from revision `from` to `end`: `start` at 0, then
/// `step` at each of `events` (x: revisions since `from`), held to `end`. Returns the
/// final count and the points.
fn course<'e>(
    from: i64,
    end: i64,
    start: i64,
    events: impl Iterator<Item = &'e Event>,
    step: impl Fn(&Event, i64) -> i64,
) -> (f64, Vec<(f64, f64)>) {
    let mut n = start;
    let mut points = vec![(0.0, n as f64)];
    for event in events {
        n = step(event, n);
        points.push(((event.revision - from) as f64, n as f64));
    }
    points.push(((end - from) as f64, n as f64));
    (n as f64, points)
}

/// The chart of `scenario`: its figure's course for each loop.
fn panel(scenario: Scenario, series: Vec<Series>) -> Panel {
    let by_revision = |title: &str, since: &str| Panel {
        title: format!("{}: {title}", scenario.name()),
        x_label: format!("etcd revisions since {since}"),
        x_unit: "",
        x_decimals: 0,
        y_decimals: 0,
        series: series.clone(),
    };
    let per_trial = |title: &str| Panel {
        title: format!("{}: {title}", scenario.name()),
        x_label: "trial".into(),
        x_unit: "",
        x_decimals: 0,
        y_decimals: 2,
        series: series.clone(),
    };
    match scenario {
        Scenario::Overcreate => by_revision("active pods", "the scale-up"),
        Scenario::Victims => by_revision("running pods left", "the scale-down"),
        Scenario::Orphans => by_revision("pods created", "the delete"),
        Scenario::StaleWatch => per_trial("seconds to the first pod"),
        Scenario::Heal => per_trial("seconds to the replacement"),
        Scenario::Resync => Panel {
            title: "resync: etcd range requests".into(),
            x_label: "sync period".into(),
            x_unit: "",
            x_decimals: 0,
            y_decimals: 0,
            series,
        },
        Scenario::Burst => Panel {
            title: "burst: pod creates in flight".into(),
            x_label: "seconds since the controller's create".into(),
            x_unit: "s",
            x_decimals: 2,
            y_decimals: 0,
            series,
        },
    }
}

/// A running loop: stopped and joined by [`RunningLoop::stop`].
struct RunningLoop {
    stop: CancellationToken,
    task: JoinHandle<anyhow::Result<()>>,
}

impl RunningLoop {
    async fn stop(self) -> anyhow::Result<()> {
        self.stop.cancel();
        self.task.await.context("the loop's task")?
    }
}

/// One etcd event of the lab's history.
#[derive(Debug, Clone)]
struct Event {
    key: String,
    /// The revision of the write.
    revision: i64,
    put: bool,
    /// A PUT that created the key.
    created: bool,
}

struct Lab {
    client: Client,
    client_config: ClientConfig,
    registry: Registry,
    root: String,
    period: Duration,
    sizes: Sizes,
}

impl Lab {
    async fn scenario(&self, scenario: Scenario) -> anyhow::Result<(Row, Panel)> {
        let mut figures = [0.0; 2];
        let mut series = Vec::new();
        for (i, which) in [Loop::V2014, Loop::Kcm].into_iter().enumerate() {
            let namespace = format!("{}-{}", scenario.name(), which.name());
            let (figure, points) = match scenario {
                Scenario::Overcreate => self.overcreate(which, &namespace).await?,
                Scenario::StaleWatch => self.stale_watch(which, &namespace).await?,
                Scenario::Victims => self.victims(which, &namespace).await?,
                Scenario::Orphans => self.orphans(which, &namespace).await?,
                Scenario::Heal => self.heal(which, &namespace).await?,
                Scenario::Resync => self.resync(which, &namespace).await?,
                Scenario::Burst => self.burst(which, &namespace).await?,
            };
            figures[i] = figure;
            series.push(Series {
                name: which.name().to_string(),
                points,
            });
            // The next loop lists every namespace: leave it only its own.
            self.cleanup(&namespace).await?;
        }
        let [v2014, kcm] = figures;
        let sizes = self.sizes;
        let panel = panel(scenario, series);
        let row = match scenario {
            Scenario::Overcreate => Row {
                scenario: scenario.name(),
                measure: format!(
                    "peak active pods, two managers scaling one controller 0 → {}",
                    sizes.overcreate_replicas
                ),
                unit: "pods",
                v2014,
                kcm,
                departure: "manager: creates",
                issues: "#8138, #7369 (reference weakness 4)",
            },
            Scenario::StaleWatch => Row {
                scenario: scenario.name(),
                measure: format!(
                    "mean time from a scale-up to its first pod, after a compaction during a cut watch, {} trials",
                    sizes.stale_watch_trials
                ),
                unit: "s",
                v2014,
                kcm,
                departure: "watch: compacted history",
                issues: "#3829, #1405 (reference weakness 1)",
            },
            Scenario::Heal => Row {
                scenario: scenario.name(),
                measure: format!(
                    "mean time from a pod's delete to its replacement, {} trials",
                    sizes.heal_trials
                ),
                unit: "s",
                v2014,
                kcm,
                departure: "manager: healing",
                issues: "reference weakness 13 (the tick)",
            },
            Scenario::Resync => Row {
                scenario: scenario.name(),
                measure: format!(
                    "etcd range requests per sync period, {} converged controllers × {} pods (a namespace each)",
                    sizes.resync_controllers, sizes.resync_pods_each
                ),
                unit: "requests",
                v2014,
                kcm,
                departure: "manager: reads",
                issues: "#5884, #2726 (reference weakness 2)",
            },
            Scenario::Burst => Row {
                scenario: scenario.name(),
                measure: format!(
                    "peak pod creates in flight, one controller 0 → {}",
                    sizes.burst_replicas
                ),
                unit: "creates",
                v2014,
                kcm,
                departure: "manager: creates",
                issues: "#4866, #33041 (reference weakness 3)",
            },
            Scenario::Orphans => Row {
                scenario: scenario.name(),
                measure: format!(
                    "pods created after deleting a controller short of {} of {} pods",
                    sizes.orphans_lost, sizes.orphans_replicas
                ),
                unit: "pods",
                v2014,
                kcm,
                departure: "manager: deleted controller",
                issues: "reference weakness 10",
            },
            Scenario::Victims => Row {
                scenario: scenario.name(),
                measure: format!(
                    "running pods deleted scaling {} → {} ({} running first in key order)",
                    sizes.victims_from, sizes.victims_to, sizes.victims_running
                ),
                unit: "pods",
                v2014,
                kcm,
                departure: "manager: deletes",
                issues: "#3948 (reference weakness 6)",
            },
        };
        Ok((row, panel))
    }

    /// Starts two managers of kind `which`, each with its own connection to etcd, as two
    /// processes would be (on one shared connection, one manager's list would queue
    /// behind the other's creates).
    async fn start_two(&self, which: Loop) -> anyhow::Result<[RunningLoop; 2]> {
        let mut managers = Vec::new();
        for _ in 0..2 {
            let client = client::connect(&self.client_config).await?;
            let registry = Registry::new(&client, &self.root)?;
            managers.push(self.start_on(which, &client, registry));
        }
        let [a, b] =
            <[RunningLoop; 2]>::try_from(managers).map_err(|_| anyhow::anyhow!("two managers"))?;
        Ok([a, b])
    }

    /// Starts `which` on the lab's prefix.
    fn start(&self, which: Loop) -> RunningLoop {
        self.start_on(which, &self.client, self.registry.clone())
    }

    /// Starts `which` on `client`, under `registry`.
    fn start_on(&self, which: Loop, client: &Client, registry: Registry) -> RunningLoop {
        let watcher = Watcher::new(client, registry.clone());
        let stop = CancellationToken::new();
        let task = match which {
            Loop::V2014 => {
                let manager = replication_2014::ReplicationManager::new(registry, watcher);
                tokio::spawn(manager.run(self.period, stop.clone()))
            }
            Loop::Kcm => {
                let config = ManagerConfig {
                    sync_period: self.period,
                    ..ManagerConfig::default()
                };
                let manager = ReplicationManager::new(registry, config, Arc::new(Metrics::new()));
                tokio::spawn(manager.run(watcher, stop.clone().cancelled_owned()))
            }
        };
        RunningLoop { stop, task }
    }

    /// `orphans`: a converged controller, then (in one transaction) some of its pods and
    /// the controller deleted; the pods created after that.
    async fn orphans(&self, which: Loop, namespace: &str) -> anyhow::Result<Measured> {
        let sizes = self.sizes;
        let running = self.start(which);
        self.create_controller(namespace, "web", sizes.orphans_replicas)
            .await?;
        self.wait_pods(namespace, sizes.orphans_replicas as usize)
            .await?;
        let pods = self.pods(namespace).await?;
        let mut deletes: Vec<TxnOp> = pods
            .iter()
            .take(sizes.orphans_lost)
            .map(|p| TxnOp::delete(self.registry.key::<Pod>(namespace, &p.metadata.name), None))
            .collect();
        deletes.push(TxnOp::delete(
            self.registry.key::<ReplicationController>(namespace, "web"),
            None,
        ));
        let response = self
            .client
            .kv_client()
            .txn(Txn::new().and_then(deletes))
            .await
            .context("delete the controller and some of its pods")?;
        let deleted_at = response.header().context("txn header")?.revision();
        // The 2014 loop reacts to the DELETED event at once; a tick and a second let
        // either loop do whatever it will do.
        tokio::time::sleep(self.period + Duration::from_secs(1)).await;
        running.stop().await?;
        let pods_dir = self.pods_dir(namespace);
        let (events, end) = self.history(deleted_at).await?;
        let created = events
            .iter()
            .filter(|e| e.created && e.key.starts_with(&pods_dir));
        Ok(course(deleted_at, end, 0, created, |_, n| n + 1))
    }

    /// `victims`: a converged controller whose first pods in key order run on a node, the
    /// others pending and unassigned; scaled down; the running pods deleted.
    async fn victims(&self, which: Loop, namespace: &str) -> anyhow::Result<Measured> {
        let sizes = self.sizes;
        let running = self.start(which);
        self.create_controller(namespace, "web", sizes.victims_from)
            .await?;
        self.wait_pods(namespace, sizes.victims_from as usize)
            .await?;
        let mut running_pods = BTreeSet::new();
        for pod in self
            .pods(namespace)
            .await?
            .iter()
            .take(sizes.victims_running)
        {
            self.registry
                .guaranteed_update::<Pod, _>(namespace, &pod.metadata.name, |mut pod| {
                    pod.spec.host = "lab-node".into();
                    pod.status.get_or_insert_with(Default::default).phase = PodPhase::Running;
                    Ok(pod)
                })
                .await?;
            running_pods.insert(self.registry.key::<Pod>(namespace, &pod.metadata.name));
        }
        // kcm ranks from its pod cache: let it see the phases before the scale-down.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let scaled_at = self.scale(namespace, "web", sizes.victims_to).await?;
        self.wait_pods(namespace, sizes.victims_to as usize).await?;
        running.stop().await?;
        let (events, end) = self.history(scaled_at).await?;
        let deleted = events
            .iter()
            .filter(|e| !e.put && running_pods.contains(&e.key));
        // The figure: running pods deleted; the course: running pods left.
        let running = sizes.victims_running as i64;
        let (left, course) = course(scaled_at, end, running, deleted, |_, n| n - 1);
        Ok(((running as f64 - left), course))
    }

    /// `overcreate`: two managers at once see one controller scaled 0 → N; the most
    /// active pods at any revision of etcd's history.
    async fn overcreate(&self, which: Loop, namespace: &str) -> anyhow::Result<Measured> {
        let replicas = self.sizes.overcreate_replicas;
        let managers = self.start_two(which).await?;
        self.create_controller(namespace, "web", 0).await?;
        // Both managers have seen the controller at 0 once their first sync is done;
        // a short pause lets both watches reach it.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let scaled = self.scale(namespace, "web", replicas).await?;
        // 2014's managers over-create at once, then (each on its tick) delete back down;
        // a period and a second let that show, whether or not they settle.
        let _ = self.wait_pods(namespace, replicas as usize).await;
        tokio::time::sleep(self.period + Duration::from_secs(1)).await;
        for manager in managers {
            manager.stop().await?;
        }
        let pods_dir = self.pods_dir(namespace);
        let (events, end) = self.history(scaled).await?;
        let changes = events
            .iter()
            .filter(|e| e.key.starts_with(&pods_dir) && (e.created || !e.put));
        let (_, course) = course(scaled, end, 0, changes, |e, n| {
            if e.created {
                n + 1
            } else {
                n - 1
            }
        });
        let peak = course.iter().map(|p| p.1).fold(0.0, f64::max);
        Ok((peak, course))
    }

    /// `heal`: a converged controller loses one pod at a time; the mean seconds from
    /// each delete to the replacement's create, as a watch on etcd sees them.
    async fn heal(&self, which: Loop, namespace: &str) -> anyhow::Result<Measured> {
        let sizes = self.sizes;
        let running = self.start(which);
        self.create_controller(namespace, "web", sizes.heal_replicas)
            .await?;
        self.wait_pods(namespace, sizes.heal_replicas as usize)
            .await?;
        let pods_dir = self.pods_dir(namespace);
        let mut trials = Vec::new();
        for trial in 1..=sizes.heal_trials {
            let mut watch = self.at_a_random_moment_watch(&pods_dir).await?;
            let victim = self.pods(namespace).await?.remove(0);
            let deleted_at = Instant::now();
            self.registry
                .delete::<Pod>(namespace, &victim.metadata.name, None)
                .await?;
            wait_for_a_create(&mut watch, Duration::from_secs(30) + 3 * self.period).await?;
            trials.push((trial as f64, deleted_at.elapsed().as_secs_f64()));
            self.wait_pods(namespace, sizes.heal_replicas as usize)
                .await?;
        }
        running.stop().await?;
        Ok((mean_seconds(&trials), trials))
    }

    /// `stale-watch`: the loop's connection is cut while etcd's history moves on and is
    /// compacted, then restored; then scale-ups at random moments of the period; the mean
    /// seconds from each to the first pod it creates, as a watch on etcd sees them.
    async fn stale_watch(&self, which: Loop, namespace: &str) -> anyhow::Result<Measured> {
        let upstream = self
            .client_config
            .endpoints
            .first()
            .and_then(|url| local_client_addr(url))
            .context("stale-watch needs the private etcd's http:// endpoint")?;
        let proxy = CutProxy::start(upstream).await?;
        let config = ClientConfig {
            endpoints: vec![format!("http://{}", proxy.addr)],
            keepalive_interval: Duration::from_secs(1),
            keepalive_timeout: Duration::from_secs(1),
            ..self.client_config.clone()
        };
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
        let mut trials = Vec::new();
        for trial in 0..self.sizes.stale_watch_trials {
            let mut watch = self.at_a_random_moment_watch(&pods_dir).await?;
            let scaled_at = Instant::now();
            self.scale(namespace, "web", 2 + trial as i64).await?;
            wait_for_a_create(&mut watch, Duration::from_secs(30) + 3 * self.period).await?;
            trials.push(((trial + 1) as f64, scaled_at.elapsed().as_secs_f64()));
            self.wait_pods(namespace, 2 + trial).await?;
        }
        running.stop().await?;
        proxy.stop();
        Ok((mean_seconds(&trials), trials))
    }

    /// Waits a random part of the period (a pod dies, or a user scales, at any moment of
    /// it, not just after a tick), then watches the keys under `dir` from now.
    async fn at_a_random_moment_watch(
        &self,
        dir: &str,
    ) -> anyhow::Result<etcd_client::WatchStream> {
        tokio::time::sleep(self.period.mul_f64(rand::random::<f64>())).await;
        let watch = self
            .client
            .watch_client()
            .watch(dir, Some(WatchOptions::new().with_prefix()))
            .await
            .with_context(|| format!("watch {dir}"))?;
        Ok(watch)
    }

    /// `resync`: many converged controllers; etcd's own count of range requests (its
    /// `/metrics`) over three sync periods, per period.
    async fn resync(&self, which: Loop, namespace: &str) -> anyhow::Result<Measured> {
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
        let mut periods = Vec::new();
        for period in 1..=3 {
            tokio::time::sleep(self.period).await;
            let now = self.range_requests().await?;
            periods.push((period as f64, now - last));
            last = now;
        }
        running.stop().await?;
        let mean = periods.iter().map(|p| p.1).sum::<f64>() / periods.len() as f64;
        Ok(((mean * 10.0).round() / 10.0, periods))
    }

    /// etcd's count of Range requests served (`grpc_server_started_total` of `KV/Range`,
    /// from its `/metrics` on the client URL).
    async fn range_requests(&self) -> anyhow::Result<f64> {
        const SERIES: &str = r#"grpc_server_started_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"}"#;
        let endpoint = self
            .client_config
            .endpoints
            .first()
            .cloned()
            .unwrap_or_default();
        let addr = local_client_addr(&endpoint)
            .or_else(|| {
                endpoint
                    .strip_prefix("http://")
                    .and_then(|a| a.parse().ok())
            })
            .with_context(|| {
                format!("resync reads etcd's /metrics over plain http://, not {endpoint}")
            })?;
        let text = http_get(addr, "/metrics")
            .await
            .with_context(|| format!("read etcd's /metrics at {addr}"))?;
        text.lines()
            .find_map(|line| line.strip_prefix(SERIES))
            .and_then(|value| value.trim().parse().ok())
            .with_context(|| format!("etcd's /metrics at {addr} has no {SERIES}"))
    }

    /// Deletes everything of `namespace` and of the namespaces `{namespace}-*`: their
    /// controllers, then their pods. (No scenario's namespace is a prefix of another's.)
    async fn cleanup(&self, namespace: &str) -> anyhow::Result<()> {
        for dir in [
            self.registry.key::<ReplicationController>(namespace, "x"),
            self.registry.key::<Pod>(namespace, "x"),
        ] {
            // Without the `/`: `resync` uses `{namespace}-{i}` namespaces too.
            let dir = &dir[..dir.len() - 2];
            self.client
                .kv_client()
                .delete(dir, Some(DeleteOptions::new().with_prefix()))
                .await
                .with_context(|| format!("delete {dir}"))?;
        }
        Ok(())
    }

    /// `burst`: one controller created with many replicas; the most pod creates in
    /// flight at once, counted around each loop's pod-control seam (the one figure that
    /// is not etcd's: in-flight requests are not in its history).
    async fn burst(&self, which: Loop, namespace: &str) -> anyhow::Result<Measured> {
        let replicas = self.sizes.burst_replicas;
        let in_flight = Arc::new(InFlight::new());
        let watcher = Watcher::new(&self.client, self.registry.clone());
        let stop = CancellationToken::new();
        let task = match which {
            Loop::V2014 => {
                let client = replication_2014::EtcdClient {
                    registry: self.registry.clone(),
                    watcher,
                };
                let pod_control = Counting {
                    inner: replication_2014::RealPodControl {
                        registry: self.registry.clone(),
                    },
                    in_flight: in_flight.clone(),
                };
                let manager = replication_2014::ReplicationManager::with_parts(
                    Arc::new(client),
                    Arc::new(pod_control),
                );
                tokio::spawn(manager.run(self.period, stop.clone()))
            }
            Loop::Kcm => {
                let config = ManagerConfig {
                    sync_period: self.period,
                    ..ManagerConfig::default()
                };
                let pod_control = Counting {
                    inner: EtcdPodControl::new(self.registry.clone()),
                    in_flight: in_flight.clone(),
                };
                let manager = ReplicationManager::with_io(
                    self.registry.clone(),
                    pod_control,
                    config,
                    Arc::new(Metrics::new()),
                );
                tokio::spawn(manager.run(watcher, stop.clone().cancelled_owned()))
            }
        };
        let running = RunningLoop { stop, task };
        self.create_controller(namespace, "web", replicas).await?;
        self.wait_pods(namespace, replicas as usize).await?;
        running.stop().await?;
        let course = std::mem::take(&mut *in_flight.course.lock().expect("in-flight course lock"));
        Ok((in_flight.peak.load(Ordering::SeqCst) as f64, course))
    }

    /// Sets a controller's replicas; returns the revision of the write.
    async fn scale(&self, namespace: &str, name: &str, replicas: i64) -> anyhow::Result<i64> {
        let scaled = self
            .registry
            .guaranteed_update::<ReplicationController, _>(namespace, name, |mut rc| {
                rc.spec.replicas = replicas;
                Ok(rc)
            })
            .await?;
        Ok(scaled.metadata.resource_version.map_or(0, |rv| rv.0))
    }

    /// The key prefix of `namespace`'s pods.
    fn pods_dir(&self, namespace: &str) -> String {
        let probe = self.registry.key::<Pod>(namespace, "x");
        probe[..probe.len() - 1].to_string()
    }

    async fn create_controller(
        &self,
        namespace: &str,
        name: &str,
        replicas: i64,
    ) -> anyhow::Result<()> {
        let labels: Set = [("app", name)].into_iter().collect();
        let controller = ReplicationController {
            metadata: ObjectMeta::named(namespace, name),
            spec: ReplicationControllerSpec {
                replicas,
                selector: labels.clone(),
                template: Some(PodTemplateSpec {
                    metadata: ObjectMeta {
                        labels,
                        ..ObjectMeta::default()
                    },
                    spec: PodSpec {
                        containers: vec![Container {
                            name: "web".into(),
                            image: "nginx".into(),
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
        self.registry
            .create(&controller)
            .await
            .with_context(|| format!("create controller {namespace}/{name}"))?;
        Ok(())
    }

    /// The pods of `namespace`, in key order.
    async fn pods(&self, namespace: &str) -> anyhow::Result<Vec<Pod>> {
        Ok(self
            .registry
            .list::<Pod>(Some(namespace), &Selector::everything())
            .await?
            .items)
    }

    /// Waits until `namespace` holds exactly `n` active pods, for at most 30 s plus three
    /// periods.
    async fn wait_pods(&self, namespace: &str, n: usize) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30) + 3 * self.period;
        loop {
            let active = self
                .pods(namespace)
                .await?
                .iter()
                .filter(|p| p.is_active())
                .count();
            if active == n {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "namespace {namespace} did not reach {n} active pods (it has {active})"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Every event under the lab's prefix after revision `after`, up to now, read from
    /// etcd's history with a watch. "Now" is a sentinel key written under the prefix.
    /// Returns the events and the sentinel's revision.
    async fn history(&self, after: i64) -> anyhow::Result<(Vec<Event>, i64)> {
        let sentinel = format!("{}/~history-end", self.root);
        let now = self
            .client
            .kv_client()
            .put(sentinel.as_str(), "end", None)
            .await
            .context("write the history sentinel")?
            .header()
            .context("put header")?
            .revision();
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(after + 1);
        let mut stream = self
            .client
            .watch_client()
            .watch(format!("{}/", self.root), Some(options))
            .await
            .context("watch the lab's history")?;
        let mut events = Vec::new();
        loop {
            let response = tokio::time::timeout(Duration::from_secs(30), stream.message())
                .await
                .context("the lab's history did not arrive within 30s")?
                .context("history watch")?
                .context("history watch closed")?;
            anyhow::ensure!(!response.canceled(), "history watch canceled");
            for event in response.events() {
                let Some(kv) = event.kv() else { continue };
                let key = String::from_utf8_lossy(kv.key()).into_owned();
                if key == sentinel && kv.mod_revision() == now {
                    return Ok((events, now));
                }
                let put = event.event_type() == EventType::Put;
                events.push(Event {
                    revision: kv.mod_revision(),
                    created: put && kv.create_revision() == kv.mod_revision(),
                    key,
                    put,
                });
            }
        }
    }
}
