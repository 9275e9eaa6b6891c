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
//! - `names`: a controller scaled 0 → N; figure: pods named after their controller
//!   (2014: none, UUIDs; kcm: every one) (weakness 12, docs/2014.md);
//! - `status`: a controller scaled 0 → N; figure: the controller's writes a watcher sees
//!   (2014: none, status was computed at read time; kcm: its status writes) (weakness 11).
//! - `overlap`: two controllers with one selector and different replicas; figure: pod
//!   creates and deletes per minute once settled (2014's ReplicationControllers fight
//!   forever; kcm's ReplicaSets settle at 0; beside it, kcm's ReplicationControllers fight
//!   as 2014's, on purpose) (weakness 5);
//! - `event-wait`: many converged controllers in one namespace and a probe scaled just
//!   after a tick; figure: mean seconds to the probe's first pod (2014's event waits for
//!   its resync, every controller listing the namespace; kcm's resync reads its caches)
//!   (weaknesses 7 and 2);
//! - `failing-create`: a controller whose pod creates etcd's RBAC refuses; figure: creates
//!   refused per minute, from etcd's `/metrics` (2014: every missing pod every tick; kcm:
//!   slow start and backoff, about one a period) (weakness 8). Like `stale-watch`, it runs
//!   only on the lab's own etcd (it turns authentication on);
//! - `watch-cut`: the loop's controller watch cut while its lists and writes go on, and a
//!   pod deleted; figure: seconds to the replacement (2014 runs no tick without a watch
//!   and heals only after the cut; kcm heals from its pod watch) (weakness 13).
//!
//! With `--topology api` both loops run in their 2014 place, as clients of an apiserver
//! the lab serves over its etcd (`lab/through.rs`); the scenarios that act at the loop's
//! etcd connection (`stale-watch`, `watch-cut`, `failing-create`, `burst`) are refused.
//!
//! Rows may carry secondary figures (`also`, a `↳` line in the table) that show the
//! weakness happened: `stale-watch`'s watches opened per period, `overlap`'s kcm
//! ReplicationControllers.
//!
//! After each run the scenario's namespace is deleted (with the loop stopped), so the
//! next loop lists only its own.
//!
//! With `--svg DIR`, each scenario also keeps its figure's course, for both loops, and
//! `DIR/SCENARIO.svg` draws the two series ("2014" and "kcm") on one chart
//! (`crate::measure::chart`): the counts by etcd revision from the same history replay,
//! `burst`'s creates in flight over time, the timed scenarios' seconds per trial,
//! `resync`'s range requests per period.
//!
//! In `bench/`'s shape: this file holds the scenarios' list, the runner, the table, the
//! JSON and the charts; each scenario is a file of its own (`lab/overcreate.rs`, ...)
//! with its script and its table row; `lab/loops.rs` starts and stops the two managers,
//! `lab/fixtures.rs` holds what every scenario does to etcd, `lab/history.rs` reads the
//! figures from etcd's history. The charts and the cut proxy come from `crate::measure`,
//! which `kcm bench` uses too.

mod burst;
mod etcd_metrics;
mod event_wait;
mod failing_create;
mod fixtures;
mod heal;
mod history;
mod loops;
mod names;
mod orphans;
mod overcreate;
mod overlap;
mod resync;
mod stale_watch;
mod status;
mod through;
mod victims;
mod watch_cut;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use etcd_client::{Client, DeleteOptions};
use serde::Serialize;

use crate::client::{self, ClientConfig, Target};
use crate::etcd_process::PrivateEtcd;
use crate::measure::chart::{self, Panel, Series};
use crate::registry::Registry;

/// The lab's default sync period: shorter than 2014's 10 s so a run stays short.
pub const DEFAULT_SYNC_PERIOD: Duration = Duration::from_secs(2);
/// The period of `--quick` runs.
pub const QUICK_SYNC_PERIOD: Duration = Duration::from_secs(1);

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
    Names,
    Status,
    Overlap,
    EventWait,
    FailingCreate,
    WatchCut,
}

impl Scenario {
    /// Every scenario, in the order they run.
    pub const ALL: [Scenario; 13] = [
        Scenario::Overcreate,
        Scenario::StaleWatch,
        Scenario::Victims,
        Scenario::Orphans,
        Scenario::Heal,
        Scenario::Resync,
        Scenario::Burst,
        Scenario::Names,
        Scenario::Status,
        Scenario::Overlap,
        Scenario::EventWait,
        Scenario::FailingCreate,
        Scenario::WatchCut,
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
            Scenario::Names => "names",
            Scenario::Status => "status",
            Scenario::Overlap => "overlap",
            Scenario::EventWait => "event-wait",
            Scenario::FailingCreate => "failing-create",
            Scenario::WatchCut => "watch-cut",
        }
    }

    /// Whether the scenario changes etcd beyond the lab's prefix (compacts its history,
    /// turns its authentication on), so that it runs only on the private etcd `kcm lab`
    /// starts.
    pub fn needs_private_etcd(self) -> bool {
        matches!(self, Scenario::StaleWatch | Scenario::FailingCreate)
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

/// Where the loops run: on etcd (kcm's default), or as clients of an apiserver over the
/// lab's etcd (2014's topology).
pub use crate::apiclient::Topology;

impl Scenario {
    /// Whether the scenario runs with `--topology api`: not those that cut, count or
    /// refuse at the loop's etcd connection, which the API puts the apiserver behind.
    pub fn runs_through_the_api(self) -> bool {
        !matches!(
            self,
            Scenario::StaleWatch | Scenario::WatchCut | Scenario::FailingCreate | Scenario::Burst
        )
    }
}

/// What `kcm lab` runs, and against which etcd.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where the loops run.
    pub topology: Topology,
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
    /// The docs/departures.md row it illustrates (its area).
    pub departure: &'static str,
    /// The numbered weaknesses of docs/2014.md it shows (none for a scenario that shows a
    /// 2014 behaviour the list does not number).
    pub weaknesses: &'static [u8],
    /// The Kubernetes issues (and the weakness of docs/2014.md) behind it.
    pub issues: &'static str,
    /// Figures beside the main one that show the weakness happened (or did not): the
    /// 2014 watch's re-opens in `stale-watch`, kcm's own ReplicationControllers in
    /// `overlap`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<Also>,
}

/// A secondary figure of a row, for both loops.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Also {
    pub measure: &'static str,
    pub v2014: f64,
    pub kcm: f64,
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
    /// `names`: the replicas one controller scales to.
    names_replicas: i64,
    /// `status`: the replicas one controller scales to.
    status_replicas: i64,
    /// `overlap`: the two controllers' replicas.
    overlap_replicas: [i64; 2],
    /// `event-wait`: converged controllers, the pods of each (all in one namespace), and
    /// the probe's scale-ups timed.
    event_wait_controllers: usize,
    event_wait_pods_each: i64,
    event_wait_trials: usize,
    /// `failing-create`: the replicas of the controller whose creates fail.
    failing_replicas: i64,
    /// `watch-cut`: the controller's replicas.
    watch_cut_replicas: i64,
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
                names_replicas: 3,
                status_replicas: 3,
                overlap_replicas: [3, 5],
                event_wait_controllers: 100,
                event_wait_pods_each: 20,
                event_wait_trials: 3,
                failing_replicas: 10,
                watch_cut_replicas: 3,
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
                names_replicas: 10,
                status_replicas: 10,
                overlap_replicas: [5, 10],
                event_wait_controllers: 50,
                event_wait_pods_each: 100,
                event_wait_trials: 5,
                failing_replicas: 20,
                watch_cut_replicas: 10,
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
    if config.topology == Topology::Api {
        let refused: Vec<&str> = config
            .scenarios
            .iter()
            .filter(|s| !s.runs_through_the_api())
            .map(|s| s.name())
            .collect();
        anyhow::ensure!(
            refused.is_empty(),
            "{} cut, count or refuse at the loop's own etcd connection, so they run only with --topology etcd (the default)",
            refused.join(", ")
        );
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
    if private.is_none() {
        if config.scenarios.contains(&Scenario::StaleWatch) {
            anyhow::bail!(
                "stale-watch compacts etcd's history, so it runs only on the private etcd kcm lab starts, not on one named with --etcd-servers"
            );
        }
        if config.scenarios.contains(&Scenario::FailingCreate) {
            anyhow::bail!(
                "failing-create turns etcd's authentication on, so it runs only on the private etcd kcm lab starts, not on one named with --etcd-servers"
            );
        }
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
    let registry = Registry::new(&client, &root)?;
    let apiserver = match config.topology {
        Topology::Etcd => None,
        Topology::Api => Some(through::Apiserver::start(&client, registry.clone()).await?),
    };
    let lab = Lab {
        notes: std::sync::Mutex::default(),
        registry,
        client: client.clone(),
        client_config,
        root: root.clone(),
        period: config.sync_period,
        sizes: Sizes::new(config.quick),
        api: apiserver.as_ref().map(through::Apiserver::target),
    };
    eprintln!(
        "kcm lab: etcd at {}{}{}, sync period {} (2014's was 10s), {} scenario(s){}",
        endpoints.join(","),
        if private.is_some() { " (private)" } else { "" },
        match &apiserver {
            Some(api) => format!(", the loops through an apiserver at {}", api.url()),
            None => String::new(),
        },
        humantime::format_duration(config.sync_period),
        config.scenarios.len(),
        if config.quick { ", quick sizes" } else { "" }
    );
    let result = async {
        let mut rows = Vec::new();
        let mut panels = Vec::new();
        for scenario in &config.scenarios {
            eprintln!("kcm lab: {} ...", scenario.name());
            let began = Instant::now();
            let (row, panel) = lab.scenario(*scenario).await?;
            eprintln!(
                "kcm lab: {} done in {:.1}s",
                scenario.name(),
                began.elapsed().as_secs_f64()
            );
            rows.push(row);
            panels.push(panel);
        }
        anyhow::Ok((rows, panels))
    }
    .await;
    if let Some(apiserver) = apiserver {
        apiserver.stop().await;
    }
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

/// The table: one row per scenario.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| scenario | measure | 2014 | kcm | departure | weaknesses | issues |\n|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        let weaknesses: Vec<String> = row.weaknesses.iter().map(u8::to_string).collect();
        let weaknesses = match weaknesses.is_empty() {
            true => "none".to_string(),
            false => weaknesses.join(", "),
        };
        out.push_str(&format!(
            "| {} | {} ({}) | {} | {} | {} | {weaknesses} | {} |\n",
            row.scenario, row.measure, row.unit, row.v2014, row.kcm, row.departure, row.issues
        ));
        for also in &row.also {
            out.push_str(&format!(
                "| ↳ {} | {} | {} | {} | | | |\n",
                row.scenario, also.measure, also.v2014, also.kcm
            ));
        }
    }
    out
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
        Scenario::Names => by_revision("pods named after their controller", "the scale-up"),
        Scenario::Status => by_revision("controller writes seen", "the scale-up"),
        Scenario::Overlap => by_revision("pod creates and deletes", "the window's start"),
        Scenario::EventWait => per_trial("seconds to the first pod"),
        Scenario::WatchCut => per_trial("seconds to the replacement"),
        Scenario::FailingCreate => Panel {
            title: "failing-create: creates etcd refused".into(),
            x_label: "sync period".into(),
            x_unit: "",
            x_decimals: 0,
            y_decimals: 0,
            series,
        },
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

struct Lab {
    /// The secondary figures the running scenario noted ([`Lab::note`]).
    notes: std::sync::Mutex<Vec<(&'static str, f64)>>,
    client: Client,
    client_config: ClientConfig,
    registry: Registry,
    root: String,
    period: Duration,
    sizes: Sizes,
    /// With `--topology api`, the apiserver the loops are clients of.
    api: Option<crate::apiclient::ApiTarget>,
}

impl Lab {
    /// The same lab through another connection to its etcd (`failing-create`'s, as
    /// etcd's root user).
    fn through(&self, client: Client) -> anyhow::Result<Lab> {
        Ok(Lab {
            notes: std::sync::Mutex::default(),
            registry: Registry::new(&client, &self.root)?,
            client,
            client_config: self.client_config.clone(),
            root: self.root.clone(),
            period: self.period,
            sizes: self.sizes,
            api: self.api.clone(),
        })
    }

    /// Notes a secondary figure of the running scenario for the loop running now.
    fn note(&self, measure: &'static str, value: f64) {
        self.notes
            .lock()
            .expect("notes lock")
            .push((measure, value));
    }

    async fn scenario(&self, scenario: Scenario) -> anyhow::Result<(Row, Panel)> {
        let mut figures = [0.0; 2];
        let mut series = Vec::new();
        let mut also: Vec<Also> = Vec::new();
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
                Scenario::Names => self.names(which, &namespace).await?,
                Scenario::Status => self.status(which, &namespace).await?,
                Scenario::Overlap => self.overlap(which, &namespace).await?,
                Scenario::EventWait => self.event_wait(which, &namespace).await?,
                Scenario::FailingCreate => self.failing_create(which, &namespace).await?,
                Scenario::WatchCut => self.watch_cut(which, &namespace).await?,
            };
            figures[i] = figure;
            for (measure, value) in self.notes.lock().expect("notes lock").drain(..) {
                match also.iter_mut().find(|a: &&mut Also| a.measure == measure) {
                    Some(a) if i == 0 => a.v2014 = value,
                    Some(a) => a.kcm = value,
                    None if i == 0 => also.push(Also {
                        measure,
                        v2014: value,
                        kcm: 0.0,
                    }),
                    None => also.push(Also {
                        measure,
                        v2014: 0.0,
                        kcm: value,
                    }),
                }
            }
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
        let row = Row {
            also,
            ..scenario.row(sizes, v2014, kcm)
        };
        Ok((row, panel))
    }
}

impl Scenario {
    /// The table's row of this scenario, with both loops' figures.
    fn row(self, sizes: Sizes, v2014: f64, kcm: f64) -> Row {
        match self {
            Scenario::Overcreate => overcreate::row(sizes, v2014, kcm),
            Scenario::StaleWatch => stale_watch::row(sizes, v2014, kcm),
            Scenario::Victims => victims::row(sizes, v2014, kcm),
            Scenario::Orphans => orphans::row(sizes, v2014, kcm),
            Scenario::Heal => heal::row(sizes, v2014, kcm),
            Scenario::Resync => resync::row(sizes, v2014, kcm),
            Scenario::Burst => burst::row(sizes, v2014, kcm),
            Scenario::Names => names::row(sizes, v2014, kcm),
            Scenario::Status => status::row(sizes, v2014, kcm),
            Scenario::Overlap => overlap::row(sizes, v2014, kcm),
            Scenario::EventWait => event_wait::row(sizes, v2014, kcm),
            Scenario::FailingCreate => failing_create::row(sizes, v2014, kcm),
            Scenario::WatchCut => watch_cut::row(sizes, v2014, kcm),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_names_the_weaknesses_it_shows_and_heal_names_none() {
        let sizes = Sizes::new(true);
        for scenario in Scenario::ALL {
            let row = scenario.row(sizes, 1.0, 0.0);
            assert!(
                row.weaknesses.iter().all(|n| (1..=13).contains(n)),
                "{row:?}"
            );
            // `heal` shows that 2014 did not watch pods, which docs/2014.md does not
            // number; every other scenario shows a numbered weakness.
            assert_eq!(
                row.weaknesses.is_empty(),
                scenario == Scenario::Heal,
                "{row:?}"
            );
            assert!(!row.issues.contains("weakness"), "{row:?}");
        }
        let overcreate = table(&[Scenario::Overcreate.row(sizes, 400.0, 200.0)]);
        assert!(
            overcreate.contains("| departure | weaknesses | issues |"),
            "{overcreate}"
        );
        assert!(
            overcreate.contains("| manager: creates | 4 | #8138, #7369 |"),
            "{overcreate}"
        );
        let heal = table(&[Scenario::Heal.row(sizes, 0.9, 0.0)]);
        assert!(heal.contains("| none |"), "{heal}");
    }
}
