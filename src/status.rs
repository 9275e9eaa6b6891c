//! The status endpoint of `kcm controller-manager`: `/healthz` and `/metrics`.
//!
//! 2014's controller-manager served `/healthz` (pkg/healthz/healthz.go: 200 "ok") on
//! `--address`:`--port` (127.0.0.1:10252, pkg/master/ports/ports.go). kcm keeps that and
//! adds Prometheus metrics; `/healthz` also checks that the loops run and etcd answers.
//! With `--leader-elect`, a healthy standby answers 200 too, and the body's second line
//! (`leader: true` or `leader: false (standby)`) and the `kcm_leader` gauge tell which.
//! In `kcm up`, a simulated node whose registration is lost and not back yet fails it
//! too, named with why ([`NodeRegistrations`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry as PromRegistry;
use tokio_util::sync::CancellationToken;

use crate::etcd_watcher::{LoopReport, WatchMetrics, LOOP_RESTARTS, SHORT_LIVED};
use crate::registry::{active_alarms, EtcdAlarm};

/// Label set for per-watch metrics: the resource watched.
pub type ResourceLabel = Vec<(&'static str, &'static str)>;

/// Reads the length of a work queue.
type QueueDepth = Box<dyn Fn() -> usize + Send + Sync>;

/// Reads whether an informer has listed.
type SyncedProbe = Box<dyn Fn() -> bool + Send + Sync>;

/// One exported watch: its counters, and whether something runs it now (a stopped
/// informer's watch is neither connected nor disconnected).
struct ExportedWatch {
    metrics: Arc<WatchMetrics>,
    active: bool,
}

/// Every metric kcm exports. Cheap to share behind an `Arc`.
pub struct Metrics {
    registry: PromRegistry,
    /// Syncs by controller (`replication`, `endpoints`) and result (`ok`, `error`).
    pub syncs: Family<Vec<(&'static str, &'static str)>, Counter>,
    /// Duration of one sync by controller, seconds.
    pub sync_duration: Family<ResourceLabel, Histogram>,
    pub pods_created: Counter,
    pub pods_deleted: Counter,
    /// Replication controllers whose selector overlaps another's (they fight over pods).
    pub replication_overlapping: Gauge,
    /// Keys waiting in the work queues, by controller.
    pub queue_depth: Family<ResourceLabel, Gauge>,
    /// Endpoints objects written (created or updated) and deleted.
    pub endpoints_writes: Counter,
    /// 1 while this process runs the controllers (with `--leader-elect`: while it
    /// leads), else 0.
    pub leader: Gauge,
    watch_restarts: Family<ResourceLabel, Counter>,
    watch_relists: Family<ResourceLabel, Counter>,
    watch_decode_errors: Family<ResourceLabel, Counter>,
    watch_last_revision: Family<ResourceLabel, Gauge>,
    watch_rewinds: Family<ResourceLabel, Counter>,
    watch_skipped_keys: Family<ResourceLabel, Counter>,
    watch_disconnected: Family<ResourceLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    watch_looping: Family<ResourceLabel, Gauge>,
    informer_synced: Family<ResourceLabel, Gauge>,
    // Keyed by name, so that a new leadership term replaces its predecessor's entries
    // instead of adding to them.
    watches: Mutex<BTreeMap<&'static str, ExportedWatch>>,
    queue_sources: Mutex<BTreeMap<&'static str, QueueDepth>>,
    informers: Mutex<BTreeMap<&'static str, SyncedProbe>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = PromRegistry::with_prefix("kcm");
        let metrics = Metrics {
            syncs: Family::default(),
            sync_duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.0005, 2.0, 16))
            }),
            pods_created: Counter::default(),
            pods_deleted: Counter::default(),
            replication_overlapping: Gauge::default(),
            queue_depth: Family::default(),
            endpoints_writes: Counter::default(),
            leader: Gauge::default(),
            watch_restarts: Family::default(),
            watch_relists: Family::default(),
            watch_decode_errors: Family::default(),
            watch_last_revision: Family::default(),
            watch_rewinds: Family::default(),
            watch_skipped_keys: Family::default(),
            watch_disconnected: Family::default(),
            watch_looping: Family::default(),
            informer_synced: Family::default(),
            watches: Mutex::default(),
            queue_sources: Mutex::default(),
            informers: Mutex::default(),
            registry: PromRegistry::default(),
        };
        registry.register(
            "syncs",
            "Controller syncs by controller and result",
            metrics.syncs.clone(),
        );
        registry.register(
            "sync_duration_seconds",
            "Duration of one controller sync",
            metrics.sync_duration.clone(),
        );
        registry.register(
            "pods_created",
            "Pods created by the replication manager",
            metrics.pods_created.clone(),
        );
        registry.register(
            "pods_deleted",
            "Pods deleted by the replication manager",
            metrics.pods_deleted.clone(),
        );
        registry.register(
            "replication_overlapping_controllers",
            "Replication controllers whose pods another controller's selector matches, or whose selector matches another's pods",
            metrics.replication_overlapping.clone(),
        );
        registry.register(
            "workqueue_depth",
            "Keys waiting in a work queue",
            metrics.queue_depth.clone(),
        );
        registry.register(
            "endpoints_writes",
            "Endpoints objects written or deleted",
            metrics.endpoints_writes.clone(),
        );
        registry.register(
            "leader",
            "1 while this process runs the controllers (leads, with --leader-elect)",
            metrics.leader.clone(),
        );
        registry.register(
            "watch_restarts",
            "Watches re-opened from their last resourceVersion",
            metrics.watch_restarts.clone(),
        );
        registry.register(
            "watch_relists",
            "Lists done by watches (at start and after compaction)",
            metrics.watch_relists.clone(),
        );
        registry.register(
            "watch_decode_errors",
            "Stored values skipped because they did not decode",
            metrics.watch_decode_errors.clone(),
        );
        registry.register(
            "watch_last_revision",
            "Last etcd revision a watch delivered or passed",
            metrics.watch_last_revision.clone(),
        );
        registry.register(
            "watch_rewinds",
            "Times etcd's revision went backwards (a restored store) or its cluster changed, each followed by a list from scratch",
            metrics.watch_rewinds.clone(),
        );
        registry.register(
            "watch_skipped_keys",
            "Keys skipped because they have more segments than the key layout allows",
            metrics.watch_skipped_keys.clone(),
        );
        registry.register(
            "watch_disconnected_seconds",
            "How long a watch has been without a live etcd watch (0 while it has one)",
            metrics.watch_disconnected.clone(),
        );
        registry.register(
            "watch_looping",
            format!(
                "1 while a watch restarts in a loop: its last {LOOP_RESTARTS} connections to etcd in a row each ended within {}s of being made; 0 again once one has lived {}s",
                SHORT_LIVED.as_secs(),
                SHORT_LIVED.as_secs()
            ),
            metrics.watch_looping.clone(),
        );
        registry.register(
            "informer_synced",
            "1 once the shared informer of a resource has listed, 0 before and after it runs",
            metrics.informer_synced.clone(),
        );
        Metrics {
            registry,
            ..metrics
        }
    }

    /// Exports a watch's counters under `resource`, replacing any watch exported under
    /// that name before.
    pub fn register_watch(&self, resource: &'static str, watch: Arc<WatchMetrics>) {
        self.watches.lock().expect("metrics lock").insert(
            resource,
            ExportedWatch {
                metrics: watch,
                active: true,
            },
        );
    }

    /// The counters of the watch of `resource`, made on first use and kept for the
    /// process's life: the informers of successive leadership terms count into the
    /// same counters (Prometheus counters never go back).
    pub fn watch_metrics(&self, resource: &'static str) -> Arc<WatchMetrics> {
        let mut watches = self.watches.lock().expect("metrics lock");
        let watch = watches.entry(resource).or_insert_with(|| ExportedWatch {
            metrics: Arc::default(),
            active: true,
        });
        watch.active = true;
        watch.metrics.clone()
    }

    /// Exports whether the informer of `resource` has synced, as `kcm_informer_synced`.
    pub fn register_informer(
        &self,
        resource: &'static str,
        synced: impl Fn() -> bool + Send + Sync + 'static,
    ) {
        self.informer_synced
            .get_or_create(&vec![("resource", resource)])
            .set(0);
        self.informers
            .lock()
            .expect("metrics lock")
            .insert(resource, Box::new(synced));
    }

    /// The informer of `resource` stopped (its term ended): not synced, and its watch
    /// no longer counts for `/healthz`.
    pub fn informer_stopped(&self, resource: &'static str) {
        self.informers
            .lock()
            .expect("metrics lock")
            .remove(resource);
        self.informer_synced
            .get_or_create(&vec![("resource", resource)])
            .set(0);
        if let Some(watch) = self.watches.lock().expect("metrics lock").get_mut(resource) {
            watch.active = false;
        }
    }

    /// Exports the length of a work queue under `controller`, replacing any queue
    /// exported under that name before.
    pub fn register_queue(
        &self,
        controller: &'static str,
        depth: impl Fn() -> usize + Send + Sync + 'static,
    ) {
        self.queue_sources
            .lock()
            .expect("metrics lock")
            .insert(controller, Box::new(depth));
    }

    /// The metrics in Prometheus text format.
    pub fn render(&self) -> String {
        use std::sync::atomic::Ordering::Relaxed;
        for (resource, exported) in self.watches.lock().expect("metrics lock").iter() {
            let labels = vec![("resource", *resource)];
            let watch = &exported.metrics;
            catch_up(
                &self.watch_restarts.get_or_create(&labels),
                watch.restarts.load(Relaxed),
            );
            catch_up(
                &self.watch_relists.get_or_create(&labels),
                watch.relists.load(Relaxed),
            );
            catch_up(
                &self.watch_decode_errors.get_or_create(&labels),
                watch.decode_errors.load(Relaxed),
            );
            self.watch_last_revision
                .get_or_create(&labels)
                .set(watch.last_revision.load(Relaxed));
            catch_up(
                &self.watch_rewinds.get_or_create(&labels),
                watch.rewinds.load(Relaxed),
            );
            catch_up(
                &self.watch_skipped_keys.get_or_create(&labels),
                watch.skipped_keys.load(Relaxed),
            );
            let disconnected = watch
                .disconnected_for()
                .filter(|_| exported.active)
                .map_or(0.0, |(for_, _)| for_.as_secs_f64());
            self.watch_disconnected
                .get_or_create(&labels)
                .set(disconnected);
            let looping = exported.active && watch.looping().is_some();
            self.watch_looping
                .get_or_create(&labels)
                .set(i64::from(looping));
        }
        for (resource, synced) in self.informers.lock().expect("metrics lock").iter() {
            self.informer_synced
                .get_or_create(&vec![("resource", *resource)])
                .set(i64::from(synced()));
        }
        for (controller, depth) in self.queue_sources.lock().expect("metrics lock").iter() {
            self.queue_depth
                .get_or_create(&vec![("controller", *controller)])
                .set(depth() as i64);
        }
        let mut text = String::new();
        encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        text
    }

    /// The watches without a live etcd watch: resource, for how long, and why.
    pub fn disconnected_watches(&self) -> Vec<(&'static str, Duration, String)> {
        self.watches
            .lock()
            .expect("metrics lock")
            .iter()
            .filter(|(_, watch)| watch.active)
            .filter_map(|(resource, watch)| {
                let (for_, reason) = watch.metrics.disconnected_for()?;
                Some((*resource, for_, reason))
            })
            .collect()
    }

    /// The watches restarting in a loop, and how.
    pub fn looping_watches(&self) -> Vec<(&'static str, LoopReport)> {
        self.watches
            .lock()
            .expect("metrics lock")
            .iter()
            .filter(|(_, watch)| watch.active)
            .filter_map(|(resource, watch)| Some((*resource, watch.metrics.looping()?)))
            .collect()
    }

    /// Current value of a watch counter, for tests and `describe`.
    pub fn watch(&self, resource: &str) -> Option<Arc<WatchMetrics>> {
        self.watches
            .lock()
            .expect("metrics lock")
            .get(resource)
            .map(|w| w.metrics.clone())
    }
}

/// Moves a Prometheus counter up to a watch's atomic counter (which only grows).
fn catch_up(counter: &Counter, value: u64) {
    let current = counter.get();
    if value > current {
        counter.inc_by(value - current);
    }
}

/// What `/healthz` reports on.
pub struct Health {
    /// Set while the controller loops run.
    pub loops_running: AtomicBool,
    /// Why the loops are not running (or not leading), when they are not.
    pub reason: Mutex<String>,
    /// Set when the process runs with `--leader-elect`: a standby (not `leading`, loops
    /// not running) is then healthy.
    pub leader_election: AtomicBool,
    /// Set while this process holds the leadership.
    pub leading: AtomicBool,
    /// The etcd alarms last seen raised, by [`Health::watch_alarms`] or `/healthz`.
    alarms: Mutex<AlarmsSeen>,
    /// The node registrations this process holds (`kcm up`'s kubelets).
    pub nodes: NodeRegistrations,
    client: etcd_client::Client,
}

/// The node registrations a process holds, as `/healthz` reports them: each node whose
/// registration is lost and not yet back fails it, named, with how long and why.
/// Cheap to clone; the clones share one table.
#[derive(Clone, Debug, Default)]
pub struct NodeRegistrations(Arc<Mutex<BTreeMap<String, NodeLost>>>);

#[derive(Debug)]
struct NodeLost {
    since: std::time::Instant,
    why: String,
}

impl NodeRegistrations {
    /// Node `node` lost its registration (`why`) or cannot get it back (`why` then
    /// says the latest error); the time it was first lost is kept.
    pub fn lost(&self, node: &str, why: impl Into<String>) {
        let why = why.into();
        let mut lost = self.0.lock().expect("node registrations lock");
        match lost.get_mut(node) {
            Some(entry) => entry.why = why,
            None => {
                lost.insert(
                    node.to_string(),
                    NodeLost {
                        since: std::time::Instant::now(),
                        why,
                    },
                );
            }
        }
    }

    /// Node `node` holds its registration (again).
    pub fn held(&self, node: &str) {
        self.0.lock().expect("node registrations lock").remove(node);
    }

    /// One line per node whose registration is lost, by name.
    pub fn report(&self) -> Vec<String> {
        self.0
            .lock()
            .expect("node registrations lock")
            .iter()
            .map(|(node, lost)| {
                format!(
                    "node {node}: registration lost for {:.1}s ({}); registering again",
                    lost.since.elapsed().as_secs_f64(),
                    lost.why
                )
            })
            .collect()
    }
}

/// How long `/healthz` waits for each of its etcd probes.
const ETCD_PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// How often [`Health::watch_alarms`] reads etcd's alarms.
pub const ALARM_POLL_INTERVAL: Duration = Duration::from_secs(5);

impl Health {
    pub fn new(client: etcd_client::Client) -> Health {
        Health {
            loops_running: AtomicBool::new(false),
            reason: Mutex::new("starting".to_string()),
            leader_election: AtomicBool::new(false),
            leading: AtomicBool::new(false),
            alarms: Mutex::default(),
            nodes: NodeRegistrations::default(),
            client,
        }
    }

    /// Reads etcd's alarms every `period`, forever, so that a raised alarm is logged
    /// even when nobody asks `/healthz` (see [`Health::read_alarms`]).
    pub async fn watch_alarms(&self, period: Duration) -> std::convert::Infallible {
        loop {
            if let Err(e) = self.read_alarms().await {
                tracing::debug!(error = %e, "reading etcd's alarms failed");
            }
            tokio::time::sleep(period).await;
        }
    }

    /// etcd's raised alarms, and one log line per change since the last read: a warning
    /// naming the fix when an alarm is raised, a line when it is cleared. So a NOSPACE
    /// alarm is said once at warn, not once per refused write (those stay at debug).
    ///
    /// # Errors
    /// When etcd does not answer within a second or refuses.
    pub async fn read_alarms(&self) -> Result<Vec<EtcdAlarm>, String> {
        let started = std::time::Instant::now();
        let alarms = active_alarms(&self.client, ETCD_PROBE_TIMEOUT).await?;
        let changes = self
            .alarms
            .lock()
            .expect("health lock")
            .observe(started, &alarms);
        for change in changes {
            match change {
                AlarmChange::Raised(alarm) => tracing::warn!(%alarm, "{}", alarm.explain()),
                AlarmChange::Cleared(alarm) => {
                    tracing::info!(%alarm, "etcd's alarm {alarm} is cleared; writes work again")
                }
            }
        }
        Ok(alarms)
    }

    /// The body of a healthy answer: `ok`, plus with `--leader-elect` a line saying
    /// whether this process leads. `Err` with the reason when the loops should run but
    /// do not, etcd does not answer within a second, or etcd has raised an alarm
    /// (NOSPACE: its space quota is exhausted).
    pub async fn check(&self) -> Result<String, String> {
        let role = self
            .leader_election
            .load(Ordering::SeqCst)
            .then(|| self.leading.load(Ordering::SeqCst));
        if role != Some(false) && !self.loops_running.load(Ordering::SeqCst) {
            return Err(self.reason.lock().expect("health lock").clone());
        }
        let body = match role {
            None => "ok".to_string(),
            Some(true) => "ok\nleader: true".to_string(),
            Some(false) => "ok\nleader: false (standby)".to_string(),
        };
        let mut kv = self.client.kv_client();
        let probe = kv.get("/", Some(etcd_client::GetOptions::new().with_count_only()));
        let (probe, alarms) = tokio::join!(
            tokio::time::timeout(ETCD_PROBE_TIMEOUT, probe),
            self.read_alarms()
        );
        // An alarm makes etcd refuse writes (NOSPACE) or everything (CORRUPT): the
        // controllers cannot act. Alarms that cannot be read are left to the probe.
        let alarms = alarms.unwrap_or_default();
        if !alarms.is_empty() {
            let reasons: Vec<String> = alarms.iter().map(|alarm| alarm.explain()).collect();
            return Err(reasons.join("\n"));
        }
        match probe {
            Ok(Ok(_)) => Ok(body),
            // etcd answered; a user restricted to kcm's prefix may not read "/".
            Ok(Err(etcd_client::Error::GRpcStatus(status)))
                if status.code() == tonic::Code::PermissionDenied =>
            {
                Ok(body)
            }
            Ok(Err(e)) => Err(format!(
                "etcd unreachable: {}",
                crate::registry::describe_etcd_error(&e)
            )),
            Err(_) => Err("etcd unreachable: no answer within 1s".to_string()),
        }
    }
}

/// The etcd alarms last seen raised, and when the read that saw them started.
#[derive(Debug, Default)]
struct AlarmsSeen {
    read_at: Option<std::time::Instant>,
    raised: Vec<EtcdAlarm>,
}

/// A change in etcd's raised alarms.
#[derive(Debug, PartialEq, Eq)]
enum AlarmChange {
    Raised(EtcdAlarm),
    Cleared(EtcdAlarm),
}

impl AlarmsSeen {
    /// Records `alarms`, read by a request that started at `read_at`; the changes since
    /// the last record. A read that started before the last recorded one is stale (two
    /// reads overlapped, `/healthz` and the periodic one) and changes nothing, so a
    /// change is reported once.
    fn observe(&mut self, read_at: std::time::Instant, alarms: &[EtcdAlarm]) -> Vec<AlarmChange> {
        if self.read_at.is_some_and(|last| read_at < last) {
            return Vec::new();
        }
        self.read_at = Some(read_at);
        let raised = alarms
            .iter()
            .filter(|alarm| !self.raised.contains(alarm))
            .map(|alarm| AlarmChange::Raised(*alarm));
        let cleared = self
            .raised
            .iter()
            .filter(|alarm| !alarms.contains(alarm))
            .map(|alarm| AlarmChange::Cleared(*alarm));
        let changes = raised.chain(cleared).collect();
        self.raised = alarms.to_vec();
        changes
    }
}

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    health: Arc<Health>,
}

/// How long a watch may be without a live etcd watch before `/healthz` fails: longer
/// than a reconnect after a blip or an etcd restart takes.
pub const WATCH_DISCONNECTED_UNHEALTHY: Duration = Duration::from_secs(10);

async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    let (mut healthy, mut body) = match state.health.check().await {
        Ok(body) => (true, body),
        Err(reason) => (false, reason),
    };
    // A watch that is disconnected while etcd answers is a controller working from a
    // stale cache: say so (with how long), and fail once it lasts.
    for (resource, for_, reason) in state.metrics.disconnected_watches() {
        healthy &= for_ < WATCH_DISCONNECTED_UNHEALTHY;
        body.push_str(&format!(
            "\nwatch {resource}: disconnected for {:.1}s ({reason})",
            for_.as_secs_f64()
        ));
    }
    // A watch that reconnects at once every time is never disconnected for long, but
    // may never stay up long enough to deliver: fail while it loops.
    for (resource, report) in state.metrics.looping_watches() {
        healthy = false;
        body.push_str(&format!(
            "\nwatch {resource}: restarting in a loop: {report}"
        ));
    }
    // A node of this process that cannot get its registration back runs no pod.
    for line in state.health.nodes.report() {
        healthy = false;
        body.push('\n');
        body.push_str(&line);
    }
    if healthy {
        (StatusCode::OK, body)
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, body)
    }
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
}

/// Binds the status endpoint on `addr`, warning when the address is reachable from other
/// hosts (the endpoint has no authentication). Callers bind before they start anything
/// else, so that a busy port fails fast, having done nothing.
///
/// `holder` names who else may hold the port ("another kcm up") and `flags` the flags
/// that choose another ("--port"), for the error message.
///
/// # Errors
/// When the address cannot be bound (in use, not an address of this host).
pub async fn bind(
    addr: SocketAddr,
    holder: &str,
    flags: &str,
) -> anyhow::Result<tokio::net::TcpListener> {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => anyhow::bail!(
            "the status port {addr} is in use ({holder}?); use {flags} to choose another"
        ),
        Err(e) => anyhow::bail!(
            "cannot serve status on {addr}: {e}; use {flags} to choose another address"
        ),
    };
    if !addr.ip().is_loopback() {
        tracing::warn!(
            address = %listener.local_addr().unwrap_or(addr),
            "the status endpoint (/healthz, /metrics) has no authentication and is reachable from other hosts; \
             use --address 127.0.0.1 unless that is intended"
        );
    }
    Ok(listener)
}

/// How long a client may take to send a request's headers, counted from when the
/// connection opens or its previous response was sent: hyper's header timer also runs
/// while a kept-alive connection waits for its next request, so this is the idle timeout
/// too. A status endpoint is asked small questions; a probe or scraper that needs longer
/// is stuck.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest any one connection lives, whatever it is doing (a body trickled byte by
/// byte, a response never read): far more than a `/metrics` scrape needs.
pub const MAX_CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

/// Most connections served at once. A connection beyond it closes the oldest one, which
/// is far more likely a stuck client than a live request (those take milliseconds), so
/// `/healthz` answers at once even while stuck clients fill every slot, and the process
/// never holds more than this many sockets for the endpoint.
pub const MAX_CONNECTIONS: usize = 128;

/// The connections being served, oldest first, each with the token that closes it.
#[derive(Default)]
struct Connections {
    next_id: u64,
    open: BTreeMap<u64, CancellationToken>,
}

impl Connections {
    /// Admits a connection; closes the oldest ones beyond `limit`. Returns its id and
    /// token.
    fn admit(&mut self, limit: usize) -> (u64, CancellationToken) {
        let id = self.next_id;
        self.next_id += 1;
        let token = CancellationToken::new();
        self.open.insert(id, token.clone());
        while self.open.len() > limit {
            if let Some((_, oldest)) = self.open.pop_first() {
                oldest.cancel();
            }
        }
        (id, token)
    }

    fn remove(&mut self, id: u64) {
        self.open.remove(&id);
    }
}

/// Serves `/healthz` and `/metrics` (HTTP/1.1) until `shutdown` resolves, then lets the
/// requests in flight finish (at most [`HEADER_READ_TIMEOUT`] more) and returns.
///
/// Each connection has [`HEADER_READ_TIMEOUT`] to send its headers (and as idle time
/// between requests) and lives at most [`MAX_CONNECTION_LIFETIME`]; at most
/// [`MAX_CONNECTIONS`] are served at once. axum's own `serve` has none of these limits,
/// so connections are served by hyper directly.
///
/// # Errors
/// None so far: a failed accept (say, out of descriptors) is logged and retried.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let app = axum::Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(self::metrics))
        .with_state(AppState { metrics, health });
    let service = hyper_util::service::TowerToHyperService::new(app);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let connections = Arc::new(Mutex::new(Connections::default()));
    let stop = CancellationToken::new();
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            biased;
            _ = &mut shutdown => break,
            // Reap finished connections as they end.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, or a connection reset before it was accepted:
                    // wait a moment rather than spin.
                    tracing::debug!(error = %e, "accept a status connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (id, close) = connections
            .lock()
            .expect("connections lock")
            .admit(MAX_CONNECTIONS);
        let connection =
            http.serve_connection(hyper_util::rt::TokioIo::new(stream), service.clone());
        let (connections, stop) = (connections.clone(), stop.clone());
        tasks.spawn(async move {
            tokio::pin!(connection);
            let lifetime = tokio::time::sleep(MAX_CONNECTION_LIFETIME);
            tokio::pin!(lifetime);
            tokio::select! {
                _ = &mut connection => {}
                // Evicted or too old: dropping the connection closes its socket.
                _ = close.cancelled() => {}
                _ = &mut lifetime => {}
                _ = stop.cancelled() => {
                    // Finish the request in flight, take no more.
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(HEADER_READ_TIMEOUT, connection).await;
                }
            }
            connections.lock().expect("connections lock").remove(id);
        });
    }
    drop(listener);
    stop.cancel();
    while tasks.join_next().await.is_some() {}
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(text: &str, name: &str) -> Vec<String> {
        text.lines()
            .filter(|line| line.starts_with(name))
            .map(String::from)
            .collect()
    }

    #[test]
    fn each_change_of_etcds_alarms_is_reported_once_and_stale_reads_change_nothing() {
        use AlarmChange::{Cleared, Raised};
        use EtcdAlarm::{Corrupt, NoSpace};
        let start = std::time::Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut seen = AlarmsSeen::default();
        assert_eq!(seen.observe(at(0), &[]), []);
        assert_eq!(seen.observe(at(10), &[NoSpace]), [Raised(NoSpace)]);
        assert_eq!(seen.observe(at(20), &[NoSpace]), []);
        assert_eq!(seen.observe(at(30), &[NoSpace]), []);
        // A read that started before the last one, answered after it.
        assert_eq!(seen.observe(at(25), &[]), []);
        assert_eq!(
            seen.observe(at(40), &[Corrupt]),
            [Raised(Corrupt), Cleared(NoSpace)]
        );
        assert_eq!(seen.observe(at(50), &[]), [Cleared(Corrupt)]);
        assert_eq!(seen.observe(at(60), &[]), []);
    }

    #[test]
    fn a_second_term_replaces_the_first_terms_series_instead_of_adding_to_them() {
        let metrics = Metrics::new();
        for term in 0..3 {
            let watch = metrics.watch_metrics("pods");
            watch.restarts.fetch_add(1, Ordering::Relaxed);
            metrics.register_informer("pods", move || term >= 1);
            metrics.register_queue("replication", move || term);
            let text = metrics.render();
            assert_eq!(
                series(&text, "kcm_workqueue_depth"),
                [format!(
                    "kcm_workqueue_depth{{controller=\"replication\"}} {term}"
                )]
            );
            assert_eq!(
                series(&text, "kcm_informer_synced"),
                [format!(
                    "kcm_informer_synced{{resource=\"pods\"}} {}",
                    i64::from(term >= 1)
                )]
            );
            // The counter goes on counting across terms; it never goes back.
            assert_eq!(
                series(&text, "kcm_watch_restarts_total"),
                [format!(
                    "kcm_watch_restarts_total{{resource=\"pods\"}} {}",
                    term + 1
                )]
            );
            metrics.informer_stopped("pods");
            assert_eq!(
                series(&metrics.render(), "kcm_informer_synced"),
                ["kcm_informer_synced{resource=\"pods\"} 0"]
            );
        }
    }
}
