//! `kcm controller-manager`: runs the controller loops and the status endpoint.
//!
//! Mirrors 2014's `cmd/controller-manager/controller-manager.go`: each controller by
//! name (like the later `NewControllerInitializers` map), plus `/healthz` on
//! `--address`:`--port`.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::client::{self, ClientConfig};
use crate::endpoints::{EndpointsConfig, EndpointsController};
use crate::etcd_watcher::Watcher;
use crate::registry::Registry;
use crate::replication_manager::{ManagerConfig, ReplicationManager};
use crate::status::{self, Health, Metrics};

/// The controllers `kcm controller-manager` can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Controller {
    /// The replication manager.
    Replication,
    /// The endpoints controller.
    Endpoints,
}

/// Everything `run` needs, validated.
#[derive(Clone, Debug)]
pub struct Config {
    pub client: ClientConfig,
    pub prefix: String,
    pub controllers: Vec<Controller>,
    pub manager: ManagerConfig,
    pub endpoints: EndpointsConfig,
    /// Where `/healthz` and `/metrics` listen. Default 127.0.0.1:10252 (2014's port).
    pub status_addr: SocketAddr,
}

/// Runs the selected controllers until `shutdown` resolves, then stops them in order:
/// no new syncs, in-flight writes finish (bounded), the status endpoint closes.
///
/// # Errors
/// When etcd is unreachable at start or the status address cannot be bound. Once
/// running, etcd failures are retried and never end the process.
pub async fn run(
    config: Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let client = client::connect(&config.client).await?;
    let registry =
        Registry::new(&client, &config.prefix)?.with_request_timeout(config.client.request_timeout);
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::new(client.clone()));
    let listener = status::bind(config.status_addr).await?;
    tracing::info!(
        etcd = %config.client.endpoints_display(),
        prefix = registry.prefix(),
        status = %config.status_addr,
        controllers = ?config.controllers,
        "controller manager starting"
    );

    let stop = CancellationToken::new();
    let server = tokio::spawn(status::serve(
        listener,
        metrics.clone(),
        health.clone(),
        stop.clone().cancelled_owned(),
    ));
    let watcher = Watcher::new(&client, registry.clone());
    health.loops_running.store(true, Ordering::SeqCst);
    // Every controller waits on the same token; each drains its own workers.
    let token = CancellationToken::new();
    let replication = async {
        if config.controllers.contains(&Controller::Replication) {
            ReplicationManager::new(registry.clone(), config.manager.clone(), metrics.clone())
                .run(watcher.clone(), token.clone().cancelled_owned())
                .await
        } else {
            Ok(())
        }
    };
    let endpoints = async {
        if config.controllers.contains(&Controller::Endpoints) {
            EndpointsController::new(registry.clone(), config.endpoints.clone(), metrics.clone())
                .run(watcher.clone(), token.clone().cancelled_owned())
                .await
        } else {
            Ok(())
        }
    };
    let controllers = async {
        let (replication, endpoints) = tokio::join!(replication, endpoints);
        replication.and(endpoints)
    };
    tokio::pin!(controllers, shutdown);
    let result = tokio::select! {
        result = &mut controllers => result,
        _ = &mut shutdown => {
            token.cancel();
            controllers.await
        }
    };
    health.loops_running.store(false, Ordering::SeqCst);
    *health.reason.lock().expect("health lock") = "shutting down".to_string();
    stop.cancel();
    server.await??;
    tracing::info!("controller manager stopped");
    result
}
