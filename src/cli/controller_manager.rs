//! `kcm controller-manager`'s flags, and the [`controller_manager::Config`] they describe.

use std::time::Duration;

use clap::{Args, Parser};

use super::{parse_duration, parse_sync_period, GlobalArgs};
use crate::apiclient::ApiTarget;
use crate::client::Target;
use crate::controller_manager;
use crate::deployment::DeploymentConfig;
use crate::endpoints::EndpointsConfig;
use crate::garbagecollector::GcConfig;
use crate::leader;
use crate::nodelifecycle::NodeLifecycleConfig;
use crate::replicaset::ReplicaSetConfig;
use crate::replication_manager::ManagerConfig;

/// The controller manager alone: `kcm controller-manager` in a binary of its own, as
/// Kubernetes ships kube-controller-manager.
///
/// Runs the controller loops (replication manager, endpoints controller and the later
/// ones) and the status endpoint (/healthz, /metrics) until SIGINT or SIGTERM, with
/// `kcm controller-manager`'s flags. The binary holds only the controller manager's code,
/// so the process maps less of it.
#[derive(Parser, Debug)]
#[command(name = "kcm-controller-manager", version)]
pub struct StandaloneControllerManager {
    #[command(flatten)]
    pub args: ControllerManagerArgs,
    #[command(flatten)]
    pub global: GlobalArgs,
}

#[derive(Args, Debug)]
pub struct ControllerManagerArgs {
    // The help text is built from the controller table, so it lists every controller.
    #[arg(
        long,
        help = controller_manager::controllers_help(),
        value_delimiter = ',',
        default_value = "*",
        allow_hyphen_values = true,
        value_parser = controller_manager::check_controller_entry
    )]
    pub controllers: Vec<String>,
    /// How often every controller is synced even without events (2014: 10s; at least
    /// 100ms).
    #[arg(long, default_value = "10s", value_parser = parse_sync_period)]
    pub sync_period: Duration,
    /// Replication controllers synced in parallel.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub concurrent_rc_syncs: u32,
    /// ReplicaSets synced in parallel.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub concurrent_replicaset_syncs: u32,
    /// Deployments synced in parallel.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub concurrent_deployment_syncs: u32,
    /// Objects the garbage collector syncs in parallel.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub concurrent_gc_syncs: u32,
    /// Terminated (Succeeded or Failed) pods kept before the garbage collector deletes the
    /// oldest, checked every 20s; 0 disables.
    #[arg(long, default_value_t = 12500)]
    pub terminated_pod_gc_threshold: u32,
    /// Most pod creates or deletes in flight for one controller (the slow-start window's
    /// limit).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..))]
    pub burst_replicas: u32,
    /// Period of the endpoints controller's full pass over every Service (2014: 10s; at
    /// least 100ms).
    #[arg(long, default_value = "10s", value_parser = parse_sync_period)]
    pub endpoint_sync_period: Duration,
    /// How long a node's registration may be gone (its kubelet stopped, or its lease
    /// lapsed) before the node lifecycle controller marks its Node Ready Unknown.
    #[arg(long, default_value = "40s", value_parser = parse_duration)]
    pub node_monitor_grace_period: Duration,
    /// Address of the status endpoint; anything but loopback exposes it.
    #[arg(long, default_value = "127.0.0.1")]
    pub address: std::net::IpAddr,
    /// Port of the status endpoint (2014's controller-manager port).
    #[arg(long, default_value_t = 10252)]
    pub port: u16,
    /// Run the controllers only while this process is the leader, elected through etcd's
    /// election API among the managers with the same --leader-elect-name and --prefix.
    /// Every write is fenced with the leadership term, so a deposed leader cannot write.
    #[arg(long)]
    pub leader_elect: bool,
    /// TTL of the leader's etcd lease (whole seconds), renewed every third of it: how long
    /// standbys wait after a leader dies without resigning.
    #[arg(long, default_value = "15s", value_parser = parse_lease_duration)]
    pub leader_elect_lease_duration: Duration,
    /// Name of the election; its keys live under PREFIX/elections/NAME/.
    #[arg(long, default_value = leader::DEFAULT_ELECTION_NAME, value_parser = parse_election_name)]
    pub leader_elect_name: String,
    /// Run the controllers as clients of the Kubernetes API server this kubeconfig's
    /// current context names (2014's topology), instead of reading and writing etcd;
    /// the etcd flags are then unused. Only the replication manager runs this way so far.
    #[arg(long, value_name = "FILE", conflicts_with = "master")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// 2014's flag: the URL of the API server to run the controllers through, without
    /// credentials (e.g. http://127.0.0.1:8080); as --kubeconfig otherwise.
    #[arg(long, value_name = "URL")]
    pub master: Option<String>,
}

/// A lease TTL: a duration of at least one second.
fn parse_lease_duration(s: &str) -> Result<Duration, String> {
    let duration = parse_duration(s)?;
    if duration < Duration::from_secs(1) {
        return Err("a lease lasts at least 1s".to_string());
    }
    Ok(duration)
}

/// An election name: non-empty, without `/`.
fn parse_election_name(s: &str) -> Result<String, String> {
    if s.is_empty() || s.contains('/') {
        return Err("an election name is non-empty and has no '/'".to_string());
    }
    Ok(s.to_string())
}

impl StandaloneControllerManager {
    /// Parses the process's arguments as [`Parser::parse`] does (printing usage errors and
    /// exiting 2, or printing help and exiting 0).
    pub fn parse_env() -> StandaloneControllerManager {
        StandaloneControllerManager::parse()
    }
}

impl ControllerManagerArgs {
    /// The validated configuration of `kcm controller-manager` on `target`.
    pub fn config(&self, target: &Target) -> controller_manager::Config {
        controller_manager::Config {
            api: match (&self.kubeconfig, &self.master) {
                (Some(file), _) => Some(ApiTarget::Kubeconfig(file.clone())),
                (None, Some(url)) => Some(ApiTarget::Master(url.clone())),
                (None, None) => None,
            },
            client: target.client.clone(),
            prefix: target.prefix.clone(),
            controllers: controller_manager::enabled_controllers(&self.controllers),
            manager: ManagerConfig {
                sync_period: self.sync_period,
                concurrent_syncs: self.concurrent_rc_syncs as usize,
                burst_replicas: self.burst_replicas as usize,
                ..ManagerConfig::default()
            },
            replicaset: ReplicaSetConfig {
                sync_period: self.sync_period,
                concurrent_syncs: self.concurrent_replicaset_syncs as usize,
                burst_replicas: self.burst_replicas as usize,
                ..ReplicaSetConfig::default()
            },
            deployment: DeploymentConfig {
                sync_period: self.sync_period,
                concurrent_syncs: self.concurrent_deployment_syncs as usize,
                ..DeploymentConfig::default()
            },
            endpoints: EndpointsConfig {
                sync_period: self.endpoint_sync_period,
                ..EndpointsConfig::default()
            },
            garbagecollector: GcConfig {
                concurrent_syncs: self.concurrent_gc_syncs as usize,
                terminated_pod_gc_threshold: self.terminated_pod_gc_threshold as usize,
                ..GcConfig::default()
            },
            nodelifecycle: NodeLifecycleConfig {
                grace_period: self.node_monitor_grace_period,
                ..NodeLifecycleConfig::default()
            },
            status_addr: std::net::SocketAddr::new(self.address, self.port),
            leader_election: self.leader_elect.then(|| leader::LeaderElectionConfig {
                name: self.leader_elect_name.clone(),
                lease_duration: self.leader_elect_lease_duration,
                ..leader::LeaderElectionConfig::new()
            }),
            nodes: crate::status::NodeRegistrations::default(),
        }
    }
}
