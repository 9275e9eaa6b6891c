//! `kcm controller-manager --kubeconfig`/`--master`: the controllers as clients of a
//! Kubernetes API server, 2014's topology (controllers → apiserver → etcd). The informers
//! list and watch through the API and the controllers write through it
//! (`apiclient`); the controllers themselves are the same code as against etcd.
//!
//! Every controller runs this way: the replication manager, the ReplicaSet and Deployment
//! controllers, the endpoints controller, the garbage collector (the API server then does
//! the apiserver's part of a deletion), the scheduler, the namespace controller, node
//! lifecycle (which reads the kubelets' node Leases instead of their registrations) and
//! the late-2014 replication manager (`replication-2014`, in its 2014 place). `--leader-elect`
//! elects through a Lease (`apiclient::lease`), each term on a fresh informer factory, as
//! against etcd.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{Config, Controller, EVENTS_FLUSH_LIMIT};
use crate::apiclient::client_2014::Client2014;
use crate::apiclient::deployment::ApiDeploymentControl;
use crate::apiclient::lease::LeaseElector;
use crate::apiclient::namespace::ApiNamespaceController;
use crate::apiclient::{self, control, ApiClient, ApiSource, ApiTarget};
use crate::deployment::DeploymentController;
use crate::endpoints::EndpointsController;
use crate::garbagecollector::GarbageCollector;
use crate::informer::InformerFactory;
use crate::nodelifecycle::NodeLifecycleController;
use crate::record::{self, EventBroadcaster};
use crate::replication_2014::ReplicationManager as ReplicationManager2014;
use crate::scheduler::Scheduler;
use crate::status::{self, Health, Metrics};

/// Runs the selected controllers through the API server `target` names until `shutdown`
/// resolves, with the status endpoint on `listener`.
///
/// # Errors
/// When a selected controller or `--leader-elect` cannot run through the API, the
/// kubeconfig cannot be used, or the API server does not answer at start.
pub(super) async fn run(
    config: Config,
    target: ApiTarget,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    check(&config, &target)?;
    let status_addr = listener.local_addr()?;
    let api = apiclient::connect(&target).await?;
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::without_etcd());
    tracing::info!(
        server = api.server(),
        status = %status_addr,
        controllers = ?config.controllers,
        "controller manager starting, through the API"
    );
    let stop_server = CancellationToken::new();
    let server = tokio::spawn(status::serve(
        listener,
        metrics.clone(),
        health.clone(),
        stop_server.clone().cancelled_owned(),
    ));
    let (events, events_writer) = EventBroadcaster::start_remote(
        Arc::new(api.clone()),
        record::Counts::new(metrics.events.clone()),
    );
    let stop = CancellationToken::new();
    let result = {
        let term = Term {
            config: &config,
            api: &api,
            events: events.clone(),
            metrics: &metrics,
            health: &health,
        };
        let work = async {
            match &config.leader_election {
                None => term.run(stop.clone()).await,
                Some(election) => {
                    health.leader_election.store(true, Ordering::SeqCst);
                    let elector = LeaseElector::new(api.clone(), election);
                    lead(&elector, &term, &stop).await
                }
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
    events.flush(events_writer, EVENTS_FLUSH_LIMIT).await;
    stop_server.cancel();
    server.await??;
    tracing::info!("controller manager stopped");
    result
}

/// Refuses a selection of no controller.
fn check(config: &Config, target: &ApiTarget) -> anyhow::Result<()> {
    anyhow::ensure!(
        !config.controllers.is_empty(),
        "{target}: no controller selected (--controllers {})",
        super::DESCRIPTORS
            .iter()
            .map(|d| d.name)
            .collect::<Vec<_>>()
            .join(",")
    );
    Ok(())
}

/// Campaigns for the Lease, runs the controllers while leading, and campaigns again after
/// a lost term, until `stop` is cancelled (the etcd mode's `lead`, over a Lease).
async fn lead(
    elector: &LeaseElector,
    term: &Term<'_>,
    stop: &CancellationToken,
) -> anyhow::Result<()> {
    loop {
        *term.health.reason.lock().expect("health lock") =
            "standby: waiting for leadership".to_string();
        let leadership = tokio::select! {
            biased;
            _ = stop.cancelled() => return Ok(()),
            leadership = elector.campaign() => leadership,
        };
        term.health.leading.store(true, Ordering::SeqCst);
        let token = stop.child_token();
        let running = term.run(token.clone());
        tokio::pin!(running);
        let result = tokio::select! {
            result = &mut running => result,
            _ = leadership.lost() => {
                term.health.leading.store(false, Ordering::SeqCst);
                token.cancel();
                running.await
            }
        };
        term.health.leading.store(false, Ordering::SeqCst);
        if stop.is_cancelled() || result.is_err() {
            elector.resign(leadership).await;
            return result;
        }
        tracing::warn!(lease = %elector.lease(), "leadership lost; controllers stopped; campaigning again");
        elector.resign(leadership).await;
    }
}

/// What one term's controllers share.
struct Term<'a> {
    config: &'a Config,
    api: &'a ApiClient,
    events: EventBroadcaster,
    metrics: &'a Arc<Metrics>,
    health: &'a Health,
}

impl Term<'_> {
    /// Runs the selected controllers on a fresh informer factory until `token` is
    /// cancelled.
    async fn run(&self, token: CancellationToken) -> anyhow::Result<()> {
        let Term {
            config,
            api,
            events,
            metrics,
            health,
        } = self;
        let informers = InformerFactory::remote(
            Arc::new(ApiSource::new((*api).clone())),
            config.manager.watch_backoff.clone(),
            (*metrics).clone(),
        );
        let mut running = Vec::new();
        if config.controllers.contains(&Controller::Replication) {
            let mut settings = config.manager.clone();
            settings.events = events.recorder("replication-controller", None);
            let manager =
                control::replication_manager(api, &informers, settings, (*metrics).clone());
            running.push(manager.start(&informers, token.clone().cancelled_owned()));
        }
        if config.controllers.contains(&Controller::ReplicaSet) {
            let mut settings = config.replicaset.clone();
            settings.events = events.recorder("replicaset-controller", None);
            let controller =
                control::replicaset_controller(api, &informers, settings, (*metrics).clone());
            running.push(controller.start(&informers, token.clone().cancelled_owned()));
        }
        if config.controllers.contains(&Controller::Deployment) {
            let mut settings = config.deployment.clone();
            settings.events = events.recorder("deployment-controller", None);
            let control = ApiDeploymentControl::new((*api).clone(), informers.deployments());
            let controller = DeploymentController::with_io(control, settings, (*metrics).clone());
            running.push(controller.start(&informers, token.clone().cancelled_owned()));
        }
        if config.controllers.contains(&Controller::Endpoints) {
            let controller = EndpointsController::new(
                (*api).clone(),
                config.endpoints.clone(),
                (*metrics).clone(),
            );
            running.push(controller.start(&informers, token.clone().cancelled_owned()));
        }
        if config.controllers.contains(&Controller::Scheduler) {
            let settings = crate::scheduler::SchedulerConfig {
                events: events.recorder("default-scheduler", None),
                ..Default::default()
            };
            let scheduler = Scheduler::with_binder((*api).clone(), settings);
            running.push(scheduler.start(&informers, token.clone().cancelled_owned()));
        }
        if config.controllers.contains(&Controller::NodeLifecycle) {
            let mut settings = config.nodelifecycle.clone();
            settings.events = events.recorder("node-controller", None);
            let controller =
                NodeLifecycleController::with_io((*api).clone(), settings, (*metrics).clone());
            running.push(controller.start(&informers, token.clone().cancelled_owned()));
        }
        if config.controllers.contains(&Controller::Namespace) {
            let controller =
                ApiNamespaceController::new((*api).clone(), crate::namespace::DEFAULT_SYNC_PERIOD);
            running.push(controller.start(token.clone().cancelled_owned()));
        }
        if config.controllers.contains(&Controller::Replication2014) {
            let client = Arc::new(Client2014::new((*api).clone()));
            let manager = ReplicationManager2014::with_parts(client.clone(), client);
            let period = config.manager.sync_period;
            running.push(Box::pin(manager.run(period, token.clone())));
        }
        if config.controllers.contains(&Controller::GarbageCollector) {
            let store = apiclient::gc::ApiGc::new((*api).clone());
            let settings = config.garbagecollector.clone();
            let collector = GarbageCollector::with_store(store, settings, (*metrics).clone());
            running.push(collector.start(&informers, token.clone()));
        }
        health.loops_running.store(true, Ordering::SeqCst);
        metrics.leader.set(1);
        let run_informers = informers.run();
        let controllers = async {
            let results = futures::future::join_all(running).await;
            token.cancel();
            informers.shutdown().await;
            results
        };
        let (results, ()) = futures::future::join(controllers, run_informers).await;
        metrics.leader.set(0);
        health.loops_running.store(false, Ordering::SeqCst);
        results
            .into_iter()
            .collect::<anyhow::Result<Vec<()>>>()
            .map(|_| ())
    }
}
