//! `kcm lab --topology api`: both loops as clients of an apiserver the lab serves over its
//! etcd, 2014's topology. The 2014 loop lists, watches and POSTs through it
//! (`apiclient::client_2014`), kcm's loop lists and watches through its informers over
//! HTTP and writes through the API (`apiclient::control`); the scenarios' scripts and
//! figures stay on etcd, so what moves is what the tier changes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::Client;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::Loop;
use crate::apiclient::{self, client_2014::Client2014, control, ApiSource, ApiTarget};
use crate::apiserver;
use crate::informer::InformerFactory;
use crate::registry::Registry;
use crate::replicaset::ReplicaSetConfig;
use crate::replication_2014;
use crate::replication_manager::ManagerConfig;
use crate::status::Metrics;

/// The lab's apiserver, served from the lab's process on a free loopback port.
pub(super) struct Apiserver {
    addr: SocketAddr,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Apiserver {
    /// Serves the objects under `registry`'s prefix, and waits until it answers.
    pub(super) async fn start(client: &Client, registry: Registry) -> anyhow::Result<Apiserver> {
        let config = apiserver::Config {
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..apiserver::Config::default()
        };
        let listener = apiserver::bind(&config).await?;
        let addr = listener.bound().address;
        let (client, stop) = (client.clone(), CancellationToken::new());
        let shutdown = stop.clone().cancelled_owned();
        let task = tokio::spawn(async move {
            apiserver::serve(listener, &client, registry, config, shutdown).await
        });
        let server = Apiserver { addr, stop, task };
        // `connect` asks `/version`: the server answers once it listens.
        apiclient::connect(&server.target()).await?;
        Ok(server)
    }

    pub(super) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub(super) fn target(&self) -> ApiTarget {
        ApiTarget::Master(self.url())
    }

    pub(super) async fn stop(self) {
        self.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(30), self.task).await;
    }
}

/// A loop's stop token and task.
pub(super) type Started = (CancellationToken, JoinHandle<anyhow::Result<()>>);

/// Starts `which` as a client of the apiserver at `target`.
pub(super) fn start(which: Loop, target: ApiTarget, period: Duration) -> Started {
    let stop = CancellationToken::new();
    let token = stop.clone();
    let task = tokio::spawn(async move {
        let api = apiclient::connect(&target).await?;
        match which {
            Loop::V2014 => {
                let client = Arc::new(Client2014::new(api));
                let manager =
                    replication_2014::ReplicationManager::with_parts(client.clone(), client);
                manager.run(period, token).await
            }
            Loop::Kcm => {
                let metrics = Arc::new(Metrics::new());
                let config = ManagerConfig {
                    sync_period: period,
                    ..ManagerConfig::default()
                };
                let informers = InformerFactory::remote(
                    Arc::new(ApiSource::new(api.clone())),
                    config.watch_backoff.clone(),
                    metrics.clone(),
                );
                let manager = control::replication_manager(&api, &informers, config, metrics);
                let running = manager.start(&informers, token.cancelled_owned());
                informers.serve(running).await
            }
        }
    });
    (stop, task)
}

/// kcm's ReplicaSet controller as a client of the apiserver at `target`.
pub(super) fn start_replica_sets(target: ApiTarget, period: Duration) -> Started {
    let stop = CancellationToken::new();
    let token = stop.clone();
    let task = tokio::spawn(async move {
        let api = apiclient::connect(&target).await?;
        let metrics = Arc::new(Metrics::new());
        let config = ReplicaSetConfig {
            sync_period: period,
            ..ReplicaSetConfig::default()
        };
        let informers = InformerFactory::remote(
            Arc::new(ApiSource::new(api.clone())),
            crate::etcd_watcher::BackoffConfig::default(),
            metrics.clone(),
        );
        let controller = control::replicaset_controller(&api, &informers, config, metrics);
        let running = controller.start(&informers, token.cancelled_owned());
        informers.serve(running).await
    });
    (stop, task)
}
