//! `kcm controller-manager --kubeconfig`/`--master`: the controllers as clients of a
//! Kubernetes API server, 2014's topology (controllers → apiserver → etcd). The informers
//! list and watch through the API and the controllers write through it
//! (`apiclient`); the controllers themselves are the same code as against etcd.
//!
//! The replication manager runs this way; a controller that still needs etcd's
//! transactions (or its leader election) is refused at start, naming it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{Config, Controller, EVENTS_FLUSH_LIMIT};
use crate::apiclient::{self, control::ApiPodControl, ApiSource, ApiTarget};
use crate::informer::InformerFactory;
use crate::record::{self, EventBroadcaster};
use crate::replication_manager::ReplicationManager;
use crate::status::{self, Health, Metrics};

/// The controllers that run through the API.
pub const API_CONTROLLERS: &[Controller] = &[Controller::Replication];

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
    let informers = InformerFactory::remote(
        Arc::new(ApiSource::new(api.clone())),
        config.manager.watch_backoff.clone(),
        metrics.clone(),
    );
    let stop = CancellationToken::new();
    let mut running = Vec::new();
    if config.controllers.contains(&Controller::Replication) {
        let mut settings = config.manager.clone();
        settings.events = events.recorder("replication-controller", None);
        let control = ApiPodControl::new(api.clone(), settings.events.clone());
        let manager = ReplicationManager::with_io(api.clone(), control, settings, metrics.clone());
        running.push(manager.start(&informers, stop.clone().cancelled_owned()));
    }
    health.loops_running.store(true, Ordering::SeqCst);
    metrics.leader.set(1);
    let work = {
        let informers = informers.clone();
        let stop = stop.clone();
        async move {
            let run_informers = informers.run();
            let controllers = async {
                let results = futures::future::join_all(running).await;
                stop.cancel();
                informers.shutdown().await;
                results
            };
            let (results, ()) = futures::future::join(controllers, run_informers).await;
            results
                .into_iter()
                .collect::<anyhow::Result<Vec<()>>>()
                .map(|_| ())
        }
    };
    tokio::pin!(work, shutdown);
    let result = tokio::select! {
        result = &mut work => result,
        _ = &mut shutdown => {
            stop.cancel();
            work.await
        }
    };
    metrics.leader.set(0);
    health.loops_running.store(false, Ordering::SeqCst);
    *health.reason.lock().expect("health lock") = "shutting down".to_string();
    events.flush(events_writer, EVENTS_FLUSH_LIMIT).await;
    stop_server.cancel();
    server.await??;
    tracing::info!("controller manager stopped");
    result
}

/// Refuses what cannot run through the API yet, naming it.
fn check(config: &Config, target: &ApiTarget) -> anyhow::Result<()> {
    let refused: Vec<&str> = config
        .controllers
        .iter()
        .filter(|c| !API_CONTROLLERS.contains(c))
        .filter_map(|c| super::DESCRIPTORS.iter().find(|d| d.controller == *c))
        .map(|d| d.name)
        .collect();
    anyhow::ensure!(
        refused.is_empty(),
        "{target}: the {} controller{} still read{} and write{} etcd directly; through the API only {} run{} so far (select it with --controllers {})",
        refused.join(", "),
        if refused.len() == 1 { "" } else { "s" },
        if refused.len() == 1 { "s" } else { "" },
        if refused.len() == 1 { "s" } else { "" },
        api_controller_names().join(", "),
        if API_CONTROLLERS.len() == 1 { "s" } else { "" },
        api_controller_names().join(","),
    );
    anyhow::ensure!(
        !config.controllers.is_empty(),
        "{target}: no controller selected (--controllers {})",
        api_controller_names().join(",")
    );
    anyhow::ensure!(
        config.leader_election.is_none(),
        "{target}: --leader-elect runs through etcd's election only so far; run one controller manager through the API without it"
    );
    Ok(())
}

fn api_controller_names() -> Vec<&'static str> {
    API_CONTROLLERS
        .iter()
        .filter_map(|c| super::DESCRIPTORS.iter().find(|d| d.controller == *c))
        .map(|d| d.name)
        .collect()
}
