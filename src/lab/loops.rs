//! The two replication managers the lab compares, started on the lab's etcd and stopped
//! (joined) when a scenario is done: the late-2014 one (`crate::replication_2014`) and
//! kcm's (`crate::replication_manager`).

use std::sync::Arc;

use anyhow::Context as _;
use etcd_client::Client;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Lab, Loop};
use crate::client;
use crate::etcd_watcher::Watcher;
use crate::registry::Registry;
use crate::replication_2014;
use crate::replication_manager::{ManagerConfig, ReplicationManager};
use crate::status::Metrics;

/// A running loop: stopped and joined by [`RunningLoop::stop`].
pub(super) struct RunningLoop {
    pub(super) stop: CancellationToken,
    pub(super) task: JoinHandle<anyhow::Result<()>>,
}

impl RunningLoop {
    pub(super) async fn stop(self) -> anyhow::Result<()> {
        self.stop.cancel();
        self.task.await.context("the loop's task")?
    }
}

impl Lab {
    /// Starts two managers of kind `which`, each with its own connection to etcd, as two
    /// processes would be (on one shared connection, one manager's list would queue
    /// behind the other's creates).
    pub(super) async fn start_two(&self, which: Loop) -> anyhow::Result<[RunningLoop; 2]> {
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
    pub(super) fn start(&self, which: Loop) -> RunningLoop {
        self.start_on(which, &self.client, self.registry.clone())
    }

    /// Starts `which` on `client`, under `registry`; with `--topology api`, as a client of
    /// the lab's apiserver instead (a connection of its own).
    pub(super) fn start_on(&self, which: Loop, client: &Client, registry: Registry) -> RunningLoop {
        if let Some(target) = &self.api {
            let (stop, task) = super::through::start(which, target.clone(), self.period);
            return RunningLoop { stop, task };
        }
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
}
