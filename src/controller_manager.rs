//! `kcm controller-manager`: runs the controller loops and the status endpoint, and with
//! `--leader-elect` only while this process leads.
//!
//! Mirrors 2014's `cmd/controller-manager/controller-manager.go`, in the shape the
//! kube-controller-manager took later (`cmd/kube-controller-manager/app`): a table of
//! named controllers with init functions ([`descriptors`]), a `ControllerContext` with
//! one shared informer factory per term, `StartControllers`, then the factory's start;
//! plus `/healthz` and `/metrics` on `--address`:`--port`. Leader election is a departure (see `leader`,
//! docs/departures.md): the controllers
//! run under a token that is cancelled the moment the term is lost, their registry is
//! fenced with the term's token, and a lost term is followed by a new campaign.

mod api;
mod descriptors;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::client::{self, ClientConfig};
use crate::deployment::DeploymentConfig;
use crate::endpoints::EndpointsConfig;
use crate::etcd_watcher::Watcher;
use crate::garbagecollector::GcConfig;
use crate::informer::InformerFactory;
use crate::leader::{Elector, LeaderElectionConfig};
use crate::nodelifecycle::NodeLifecycleConfig;
use crate::record::{self, EventBroadcaster};
use crate::registry::{FenceSlot, Registry};
use crate::replicaset::ReplicaSetConfig;
use crate::replication_manager::ManagerConfig;
use crate::scheduler::SchedulerConfig;
use crate::status::{self, Health, Metrics};

pub use descriptors::{
    check_controller_entry, controllers_help, descriptor, enabled_controllers, start_controllers,
    Controller, ControllerContext, ControllerFuture, Descriptor, Init, InitFn, Settings,
    DESCRIPTORS,
};

/// How long shutdown waits for queued events to be written.
/// The manager the controllers' writes are recorded as in `metadata.managedFields` (kube's
/// are `kube-controller-manager`'s).
pub const CONTROLLER_MANAGER_FIELD_MANAGER: &str = "kcm-controller-manager";

const EVENTS_FLUSH_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Everything `run` needs, validated.
#[derive(Clone, Debug)]
pub struct Config {
    pub client: ClientConfig,
    /// `--kubeconfig`/`--master`: run the controllers as clients of this API server
    /// instead of reading and writing etcd (`client` and `prefix` are then unused).
    pub api: Option<crate::apiclient::ApiTarget>,
    pub prefix: String,
    pub controllers: Vec<Controller>,
    pub manager: ManagerConfig,
    /// The ReplicaSet controller's settings.
    pub replicaset: ReplicaSetConfig,
    /// The Deployment controller's settings.
    pub deployment: DeploymentConfig,
    pub endpoints: EndpointsConfig,
    /// The garbage collector's settings.
    pub garbagecollector: GcConfig,
    /// The node lifecycle controller's settings.
    pub nodelifecycle: NodeLifecycleConfig,
    /// Where `/healthz` and `/metrics` listen. Default 127.0.0.1:10252 (2014's port).
    pub status_addr: SocketAddr,
    /// `--leader-elect`: run the controllers only while leading. Default off.
    pub leader_election: Option<LeaderElectionConfig>,
    /// Node registrations held in this process (`kcm up`'s kubelets), for `/healthz`;
    /// empty for `kcm controller-manager`.
    pub nodes: status::NodeRegistrations,
}

/// Runs the selected controllers until `shutdown` resolves, then stops them in order:
/// no new syncs, in-flight writes finish (bounded), the status endpoint closes.
///
/// With leader election, the controllers run only while this process leads: a lost term
/// stops them at once (their writes are fenced, so one that is in flight fails) and the
/// process campaigns again; at shutdown a leader resigns after its controllers stopped,
/// so a standby takes over without waiting for the lease to expire.
///
/// The status address is bound first, before anything else starts, so a second manager
/// on a busy port fails at once, having done nothing.
///
/// # Errors
/// When the status address cannot be bound, etcd is unreachable at start, or the user
/// may not read and write the prefix. Once running, etcd failures are retried and never
/// end the process.
pub async fn run(
    config: Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let listener = status::bind(
        config.status_addr,
        "another controller manager",
        "--address/--port",
    )
    .await?;
    run_on(config, listener, shutdown).await
}

/// [`run`] with the status endpoint on `listener`, already bound (`config.status_addr`
/// is not used).
///
/// # Errors
/// As [`run`].
pub async fn run_on(
    config: Config,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    if let Some(target) = config.api.clone() {
        return api::run(config, target, listener, shutdown).await;
    }
    // `--port 0` binds a port of the kernel's choosing: say which.
    let status_addr = listener.local_addr()?;
    let client = client::connect(&config.client).await?;
    // Owned here, so it runs exactly as long as the controllers.
    let _monitor = client::EndpointMonitor::start(&client, &config.client);
    let fence = FenceSlot::default();
    // The controllers' updates of objects made through the API are recorded as theirs.
    let ownership = Arc::new(crate::apiserver::FieldOwnership);
    let mut registry = Registry::new(&client, &config.prefix)?
        .with_request_timeout(config.client.request_timeout)
        .with_field_manager(ownership, CONTROLLER_MANAGER_FIELD_MANAGER);
    client::check_access(&client, &config.client, registry.prefix(), true).await?;
    if config.leader_election.is_some() {
        registry = registry.with_fence(fence.clone());
    }
    let metrics = Arc::new(Metrics::new());
    let mut health = Health::new(client.clone());
    health.nodes = config.nodes.clone();
    let health = Arc::new(health);
    health
        .leader_election
        .store(config.leader_election.is_some(), Ordering::SeqCst);
    tracing::info!(
        etcd = %config.client.endpoints_display(),
        prefix = registry.prefix(),
        status = %status_addr,
        controllers = ?config.controllers,
        leader_elect = config.leader_election.is_some(),
        "controller manager starting"
    );

    let stop_server = CancellationToken::new();
    let server = tokio::spawn(status::serve(
        listener,
        metrics.clone(),
        health.clone(),
        stop_server.clone().cancelled_owned(),
    ));
    let watcher = Watcher::new(&client, registry.clone());
    let (events, events_writer) = EventBroadcaster::start(
        &client,
        registry.prefix(),
        record::Counts::new(metrics.events.clone()),
    );
    let controllers = Controllers {
        config: &config,
        registry: &registry,
        watcher: &watcher,
        metrics: &metrics,
        health: &health,
        events: events.clone(),
    };
    let stop = CancellationToken::new();
    let result = {
        let work = async {
            let work = async {
                match &config.leader_election {
                    None => controllers.run(stop.clone()).await,
                    Some(election) => {
                        let elector = Elector::new(
                            client.clone(),
                            registry.prefix(),
                            election.clone(),
                            fence.clone(),
                            config.client.request_timeout,
                        );
                        lead(&elector, &controllers, &stop).await
                    }
                }
            };
            // etcd's alarms are watched whether or not this process leads: a NOSPACE alarm
            // also keeps a standby from ever taking over.
            tokio::select! {
                result = work => result,
                never = health.watch_alarms(status::ALARM_POLL_INTERVAL) => match never {},
            }
        };
        tokio::pin!(work, shutdown);
        tokio::select! {
            result = &mut work => result,
            _ = &mut shutdown => {
                stop.cancel();
                work.await
            }
        }
    };
    *health.reason.lock().expect("health lock") = "shutting down".to_string();
    // The controllers' recorders are gone with them: what they queued is written now.
    drop(controllers);
    events.flush(events_writer, EVENTS_FLUSH_LIMIT).await;
    stop_server.cancel();
    server.await??;
    tracing::info!("controller manager stopped");
    result
}

/// Campaigns, runs the controllers while leading, and campaigns again after a lost term,
/// until `stop` is cancelled.
async fn lead(
    elector: &Elector,
    controllers: &Controllers<'_>,
    stop: &CancellationToken,
) -> anyhow::Result<()> {
    loop {
        *controllers.health.reason.lock().expect("health lock") =
            "standby: waiting for leadership".to_string();
        let leadership = tokio::select! {
            biased;
            _ = stop.cancelled() => return Ok(()),
            leadership = elector.campaign() => leadership,
        };
        controllers.health.leading.store(true, Ordering::SeqCst);
        let term = stop.child_token();
        let running = controllers.run(term.clone());
        tokio::pin!(running);
        let result = tokio::select! {
            result = &mut running => result,
            _ = leadership.lost() => {
                // Stop at once: no new syncs; in-flight writes are already refused.
                controllers.health.leading.store(false, Ordering::SeqCst);
                controllers.metrics.leader.set(0);
                term.cancel();
                running.await
            }
            _ = term.cancelled() => running.await,
        };
        if result.is_ok() && !term.is_cancelled() {
            // No controller selected: hold the term until it is lost or we stop.
            tokio::select! {
                _ = leadership.lost() => {}
                _ = stop.cancelled() => {}
            }
        }
        controllers.health.leading.store(false, Ordering::SeqCst);
        if stop.is_cancelled() || result.is_err() {
            elector.resign(leadership).await;
            return result;
        }
        tracing::warn!(
            election = elector.election(),
            term = leadership.term(),
            "leadership lost; controllers stopped; campaigning again"
        );
        elector.release(leadership).await;
    }
}

/// The controllers selected by `--controllers`, and what they share.
struct Controllers<'a> {
    config: &'a Config,
    registry: &'a Registry,
    watcher: &'a Watcher,
    metrics: &'a Arc<Metrics>,
    health: &'a Health,
    events: EventBroadcaster,
}

impl Controllers<'_> {
    /// Runs every selected controller until `token` is cancelled, on one informer
    /// factory: every init function runs first (each asks for the informers it reads),
    /// then the factory starts, so each kind is listed and watched once. Each controller
    /// drains its own workers before it returns; the informers stop after the last one.
    async fn run(&self, token: CancellationToken) -> anyhow::Result<()> {
        let Controllers {
            config,
            registry,
            watcher,
            metrics,
            health,
            events,
        } = self;
        let ctx = ControllerContext {
            registry: (*registry).clone(),
            watcher: (*watcher).clone(),
            informers: InformerFactory::new(
                (*watcher).clone(),
                config.manager.watch_backoff.clone(),
                (*metrics).clone(),
            ),
            metrics: (*metrics).clone(),
            settings: Settings {
                replication: config.manager.clone(),
                replicaset: config.replicaset.clone(),
                deployment: config.deployment.clone(),
                endpoints: config.endpoints.clone(),
                garbagecollector: config.garbagecollector.clone(),
                nodelifecycle: config.nodelifecycle.clone(),
                scheduler: SchedulerConfig::default(),
                namespace: Settings::default().namespace,
            },
            events: events.clone(),
            stop: token.clone(),
        };
        let started = start_controllers(&ctx, DESCRIPTORS, &config.controllers);
        // The informers run in this task, beside the controllers' loops (see
        // `InformerFactory::run`).
        let informers = ctx.informers.run();
        tracing::debug!(informers = ?ctx.informers.resources(), "informers started");
        let controllers = async {
            let results: Vec<(&str, anyhow::Result<()>)> = match started {
                Ok(started) => {
                    health.loops_running.store(true, Ordering::SeqCst);
                    metrics.leader.set(1);
                    let (names, running): (Vec<_>, Vec<_>) = started.into_iter().unzip();
                    let results = futures::future::join_all(running).await;
                    names.into_iter().zip(results).collect()
                }
                Err(e) => vec![("init", Err(e))],
            };
            token.cancel();
            ctx.informers.shutdown().await;
            results
        };
        let (results, ()) = futures::future::join(controllers, informers).await;
        metrics.leader.set(0);
        health.loops_running.store(false, Ordering::SeqCst);
        results.into_iter().try_for_each(|(name, result)| {
            result.map_err(|e| e.context(format!("{name} controller")))
        })
    }
}
