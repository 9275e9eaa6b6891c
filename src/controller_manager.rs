//! `kcm controller-manager`: runs the controller loops and the status endpoint, and with
//! `--leader-elect` only while this process leads.
//!
//! Mirrors 2014's `cmd/controller-manager/controller-manager.go`: each controller by
//! name (like the later `NewControllerInitializers` map), plus `/healthz` on
//! `--address`:`--port`. Leader election is a departure (see `leader`): the controllers
//! run under a token that is cancelled the moment the term is lost, their registry is
//! fenced with the term's token, and a lost term is followed by a new campaign.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::client::{self, ClientConfig};
use crate::endpoints::{EndpointsConfig, EndpointsController};
use crate::etcd_watcher::Watcher;
use crate::informer::PodInformer;
use crate::leader::{Elector, LeaderElectionConfig};
use crate::registry::{FenceSlot, Registry};
use crate::replication_manager::{ManagerConfig, ReplicationManager};
use crate::status::{self, Health, Metrics};

/// The controllers `kcm controller-manager` can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Controller {
    /// The replication manager.
    Replication,
    /// The endpoints controller.
    Endpoints,
}

/// One row of the controller table (the kube-controller-manager's
/// `NewControllerDescriptors()`): the name `--controllers` knows it by, its aliases, and
/// whether `*` enables it.
#[derive(Clone, Copy, Debug)]
pub struct Descriptor {
    pub controller: Controller,
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub disabled_by_default: bool,
}

/// Every controller kcm has, in the order they start.
pub const DESCRIPTORS: &[Descriptor] = &[
    Descriptor {
        controller: Controller::Replication,
        name: "replication",
        aliases: &["replicationcontroller", "replicationcontroller-controller"],
        disabled_by_default: false,
    },
    Descriptor {
        controller: Controller::Endpoints,
        name: "endpoints",
        aliases: &["endpoint", "endpoints-controller"],
        disabled_by_default: false,
    },
];

/// The descriptor a `--controllers` entry names (by name or alias), if any.
pub fn descriptor(name: &str) -> Option<&'static Descriptor> {
    DESCRIPTORS
        .iter()
        .find(|d| d.name == name || d.aliases.contains(&name))
}

/// Checks one `--controllers` entry: `*`, a known name or alias, or one prefixed by `-`.
///
/// # Errors
/// `"foo" is not in the list of known controllers` (the kube-controller-manager's words).
pub fn check_controller_entry(entry: &str) -> Result<String, String> {
    let entry = entry.trim();
    let name = entry.strip_prefix('-').unwrap_or(entry);
    if entry == "*" || descriptor(name).is_some() {
        Ok(entry.to_string())
    } else {
        Err(format!("{name:?} is not in the list of known controllers"))
    }
}

/// The controllers a `--controllers` list enables, in table order, with Kubernetes'
/// rule (`IsControllerEnabled`): the first entry that names a controller (`name` or
/// `-name`, by name or alias) decides; otherwise `*` enables it unless it is off by
/// default; otherwise it is off. Entries must have passed [`check_controller_entry`].
pub fn enabled_controllers(entries: &[String]) -> Vec<Controller> {
    let star = entries.iter().any(|e| e.trim() == "*");
    DESCRIPTORS
        .iter()
        .filter(|d| {
            let explicit = entries.iter().find_map(|entry| {
                let entry = entry.trim();
                let (on, name) = match entry.strip_prefix('-') {
                    Some(name) => (false, name),
                    None => (true, entry),
                };
                (name == d.name || d.aliases.contains(&name)).then_some(on)
            });
            explicit.unwrap_or(star && !d.disabled_by_default)
        })
        .map(|d| d.controller)
        .collect()
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
    /// `--leader-elect`: run the controllers only while leading. Default off.
    pub leader_election: Option<LeaderElectionConfig>,
}

/// Runs the selected controllers until `shutdown` resolves, then stops them in order:
/// no new syncs, in-flight writes finish (bounded), the status endpoint closes.
///
/// With leader election, the controllers run only while this process leads: a lost term
/// stops them at once (their writes are fenced, so one that is in flight fails) and the
/// process campaigns again; at shutdown a leader resigns after its controllers stopped,
/// so a standby takes over without waiting for the lease to expire.
///
/// # Errors
/// When etcd is unreachable at start, the user may not read and write the prefix, or
/// the status address cannot be bound. Once running, etcd failures are retried and never
/// end the process.
pub async fn run(
    config: Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let client = client::connect(&config.client).await?;
    // Owned here, so it runs exactly as long as the controllers.
    let _monitor = client::EndpointMonitor::start(&client, &config.client);
    let fence = FenceSlot::default();
    let mut registry =
        Registry::new(&client, &config.prefix)?.with_request_timeout(config.client.request_timeout);
    client::check_access(&client, &config.client, registry.prefix(), true).await?;
    if config.leader_election.is_some() {
        registry = registry.with_fence(fence.clone());
    }
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::new(client.clone()));
    health
        .leader_election
        .store(config.leader_election.is_some(), Ordering::SeqCst);
    let listener = status::bind(config.status_addr).await?;
    tracing::info!(
        etcd = %config.client.endpoints_display(),
        prefix = registry.prefix(),
        status = %config.status_addr,
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
    let controllers = Controllers {
        config: &config,
        registry: &registry,
        watcher: &watcher,
        metrics: &metrics,
        health: &health,
    };
    let stop = CancellationToken::new();
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
    tokio::pin!(work, shutdown);
    let result = tokio::select! {
        result = &mut work => result,
        _ = &mut shutdown => {
            stop.cancel();
            work.await
        }
    };
    *health.reason.lock().expect("health lock") = "shutting down".to_string();
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
}

impl Controllers<'_> {
    /// Runs every selected controller until `token` is cancelled; each drains its own
    /// workers before it returns.
    async fn run(&self, token: CancellationToken) -> anyhow::Result<()> {
        let Controllers {
            config,
            registry,
            watcher,
            metrics,
            health,
        } = self;
        // One pod informer for both controllers: pods are watched and stored once.
        let pods =
            PodInformer::new((*watcher).clone()).with_backoff(config.manager.watch_backoff.clone());
        metrics.register_watch("pods", pods.metrics());
        let informer_stop = CancellationToken::new();
        let replication = async {
            if config.controllers.contains(&Controller::Replication) {
                ReplicationManager::new(
                    (*registry).clone(),
                    config.manager.clone(),
                    (*metrics).clone(),
                )
                .with_pod_informer(pods.clone())
                .run((*watcher).clone(), token.clone().cancelled_owned())
                .await
            } else {
                Ok(())
            }
        };
        let endpoints = async {
            if config.controllers.contains(&Controller::Endpoints) {
                EndpointsController::new(
                    (*registry).clone(),
                    config.endpoints.clone(),
                    (*metrics).clone(),
                )
                .with_pod_informer(pods.clone())
                .run((*watcher).clone(), token.clone().cancelled_owned())
                .await
            } else {
                Ok(())
            }
        };
        health.loops_running.store(true, Ordering::SeqCst);
        metrics.leader.set(1);
        let controllers = async {
            let results = tokio::join!(replication, endpoints);
            informer_stop.cancel();
            results
        };
        let informer = async {
            if !config.controllers.is_empty() {
                pods.clone().run(informer_stop.cancelled()).await;
            }
        };
        let ((replication, endpoints), ()) = tokio::join!(controllers, informer);
        metrics.leader.set(0);
        health.loops_running.store(false, Ordering::SeqCst);
        replication.and(endpoints)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(spec: &str, expected: &[Controller]) {
        let entries: Vec<String> = spec.split(',').map(String::from).collect();
        for entry in &entries {
            check_controller_entry(entry).unwrap();
        }
        assert_eq!(
            enabled_controllers(&entries),
            expected,
            "--controllers {spec}"
        );
    }

    #[test]
    fn the_kubernetes_controllers_grammar() {
        use Controller::{Endpoints, Replication};
        check("*", &[Replication, Endpoints]);
        check("replication", &[Replication]);
        check("-endpoints,*", &[Replication]);
        check("*,-endpoints", &[Replication]);
        check("endpoints-controller", &[Endpoints]);
        check("replication,endpoints", &[Replication, Endpoints]);
        // The first explicit mention wins.
        check("replication,-replication", &[Replication]);
        check("-replicationcontroller,replication,*", &[Endpoints]);
        // Without `*`, only what is named runs.
        check("-endpoints", &[]);
    }

    #[test]
    fn unknown_entries_are_refused_with_the_kubernetes_message() {
        for entry in ["foo", "-foo"] {
            assert_eq!(
                check_controller_entry(entry).unwrap_err(),
                r#""foo" is not in the list of known controllers"#
            );
        }
        assert!(check_controller_entry("-endpoint").is_ok());
    }
}
