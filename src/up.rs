//! `kcm up`: the whole loop on one machine, one command away.
//!
//! Binds the status port first (a busy port ends it before anything starts), then uses
//! the etcd that answers at `--etcd-servers` (docker compose's, a real cluster), or
//! starts a private one from PATH on that address with a temporary data dir, removing the
//! dirs that killed `kcm up`s left behind. Then registers and runs `--nodes` simulated
//! kubelets and the controller manager in this process until Ctrl-C, and shuts everything
//! down: controllers first, then kubelets (releasing their names), then the private etcd,
//! whose temporary data dir is removed. `--demo` narrates a guided tour of the 2014 loop,
//! then of a Deployment's rolling update (`tour`, `rollout_tour`).
//!
//! Invariants: a private etcd ([`PrivateEtcd`]) never outlives kcm: it is stopped on every
//! exit path, and the kernel kills it if kcm itself is killed; its temporary data dir
//! goes with it, or with the next `kcm up` if kcm was killed.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::client::{self, ClientConfig, Target};
use crate::etcd_process::{local_client_addr, remove_stale_data_dirs, PrivateEtcd};

mod rollout_tour;
mod tour;

/// The namespace the tours write to.
const DEMO_NAMESPACE: &str = "demo";

/// What `kcm up` runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Simulated kubelets (nodes) to run, `node-1` to `node-N`.
    pub nodes: u16,
    /// Data dir of the private etcd; `None` for a temporary dir removed on exit.
    pub data_dir: Option<PathBuf>,
    /// etcd binary for the private etcd.
    pub etcd_binary: PathBuf,
    /// Run the guided tour, then shut down.
    pub demo: bool,
    /// Port of the status endpoint (/healthz, /metrics), on 127.0.0.1.
    pub port: u16,
    /// Port of the Kubernetes API on 127.0.0.1 (0: a free one).
    pub apiserver_port: u16,
    /// Where to write the kubeconfig (kept); `None` for a temporary file removed on exit.
    pub kubeconfig: Option<PathBuf>,
    /// How often every controller is synced even without events.
    pub sync_period: Duration,
    /// The kubelets' ready delay (`kcm kubelet --ready-delay`).
    pub ready_delay: Duration,
    /// The kubelets' failing images (`kcm kubelet --pull-fail-images` and the others).
    pub images: ImageRules,
    /// Most active pods each kubelet holds (`kcm kubelet --max-pods`).
    pub max_pods: usize,
    /// Where the controllers run: on etcd, or as clients of the API it serves.
    pub topology: Topology,
}

/// Prints one narration line.
pub fn say(line: impl std::fmt::Display) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// A one-line progress indicator on stderr for steps that take more than a moment.
pub struct Progress {
    what: String,
    started: Instant,
    frame: usize,
    tty: bool,
}

impl Progress {
    pub fn new(what: impl Into<String>) -> Progress {
        Progress {
            what: what.into(),
            started: Instant::now(),
            frame: 0,
            tty: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        }
    }

    /// Redraws the line with the current state (only on a terminal).
    pub fn tick(&mut self, state: impl std::fmt::Display) {
        if !self.tty {
            return;
        }
        const FRAMES: [char; 4] = ['|', '/', '-', '\\'];
        self.frame += 1;
        eprint!(
            "\r{} {} {} ({:.1}s)   ",
            FRAMES[self.frame % FRAMES.len()],
            self.what,
            state,
            self.started.elapsed().as_secs_f64()
        );
    }

    /// Clears the line.
    pub fn done(self) {
        if self.tty {
            eprint!("\r\x1b[2K");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Orchestration

use tokio_util::sync::CancellationToken;

use crate::apiclient::{ApiTarget, Topology};
use crate::controller_manager::{self, Controller};
use crate::deployment::DeploymentConfig;
use crate::endpoints::EndpointsConfig;
use crate::etcd_watcher::Watcher;
use crate::garbagecollector::GcConfig;
use crate::kubelet::{ImageRules, Ipv4Cidr, Kubelet, KubeletConfig, NodeTaken, Registration};
use crate::nodelifecycle::NodeLifecycleConfig;
use crate::record::{self, EventBroadcaster};
use crate::replicaset::ReplicaSetConfig;
use crate::replication_manager::ManagerConfig;
use crate::{apiserver, status};

/// Runs `kcm up` until `shutdown` resolves (or the demo finishes).
///
/// The status port is bound first, so a second `kcm up` on a busy port fails at once,
/// having started nothing; then the data dirs of earlier `kcm up`s that were killed are
/// removed; the nodes are registered before any loop starts, so one whose names are
/// taken fails before it writes anything.
///
/// # Errors
/// When the status port is taken, no etcd answers and a private one cannot be started,
/// a node name is taken, or a component fails to start.
pub async fn run(
    target: &Target,
    config: Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let listener = status::bind(
        SocketAddr::from(([127, 0, 0, 1], config.port)),
        "another kcm up",
        "--port",
    )
    .await?;
    let api_listener = apiserver::bind_port_flag(
        &apiserver::Config {
            address: SocketAddr::from(([127, 0, 0, 1], config.apiserver_port)),
            ..apiserver::Config::default()
        },
        "--apiserver-port",
    )
    .await?;
    let removed = remove_stale_data_dirs(&std::env::temp_dir());
    if !removed.is_empty() {
        let dirs: Vec<String> = removed
            .iter()
            .map(|dir| dir.display().to_string())
            .collect();
        say(format!(
            "kcm up: removed {} etcd data dir(s) left by kcm processes that are gone: {}",
            dirs.len(),
            dirs.join(", ")
        ));
    }
    let client_config = &target.client;
    let url = client_config
        .endpoints
        .first()
        .cloned()
        .context("no etcd endpoint given")?;
    let quick = ClientConfig {
        connect_timeout: Duration::from_millis(700),
        request_timeout: Duration::from_millis(700),
        ..client_config.clone()
    };
    let private = match client::connect(&quick).await {
        Ok(_) => {
            say(format!(
                "kcm up: using the etcd that answers at {}",
                client_config.endpoints_display()
            ));
            None
        }
        Err(_) => {
            let addr = local_client_addr(&url).with_context(|| {
                format!("no etcd answers at {url}, and it is not a local http address kcm could start one on")
            })?;
            let etcd =
                PrivateEtcd::start(&config.etcd_binary, addr, config.data_dir.as_deref()).await?;
            say(format!(
                "kcm up: started a private etcd at {} (data dir {}{})",
                etcd.endpoint(),
                etcd.data_dir().display(),
                if config.data_dir.is_some() {
                    ""
                } else {
                    ", removed on exit"
                }
            ));
            Some(etcd)
        }
    };
    let result = run_cluster(target, &config, listener, api_listener, shutdown).await;
    if let Some(etcd) = private {
        etcd.stop().await;
        say("kcm up: private etcd stopped");
    }
    result
}

async fn run_cluster(
    target: &Target,
    config: &Config,
    listener: tokio::net::TcpListener,
    api_listener: apiserver::Listener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (client, registry) = target.connect().await?;
    let api_url = api_listener.bound().url.clone();
    let kubeconfig = Kubeconfig::write(config.kubeconfig.as_deref(), &api_url)?;
    // The kubelets' events; the controllers record through the manager's own writer.
    let (events, events_writer) =
        EventBroadcaster::start(&client, registry.prefix(), record::Counts::default());
    let nodes = register_nodes(config, target, &events).await?;
    let node_registrations = status::NodeRegistrations::default();
    let token = CancellationToken::new();
    // The port actually bound (`--port 0` lets the kernel choose).
    let status_addr = listener.local_addr()?;
    let mut manager_config =
        manager_config(target, config, status_addr, node_registrations.clone());
    if config.topology == Topology::Api {
        // 2014's topology: the controllers as clients of the API served here.
        manager_config.api = Some(ApiTarget::Master(api_url.clone()));
        say(format!(
            "kcm up: the controllers run as clients of the API at {api_url} (--topology api, 2014's topology): {}",
            manager_config
                .controllers
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let manager =
        controller_manager::run_on(manager_config, listener, token.clone().cancelled_owned());
    let kubelets = run_nodes(nodes, node_registrations, &token);
    // The API stops after the controllers, which may be its clients (`--topology api`)
    // with events to flush.
    let api_stop = CancellationToken::new();
    let manager = async {
        let stopped = manager.await;
        api_stop.cancel();
        stopped
    };
    let api = apiserver::serve(
        api_listener,
        &client,
        registry.clone(),
        apiserver::Config::default(),
        api_stop.clone().cancelled_owned(),
    );
    let endpoints = target.client.endpoints_display();
    let driver = async {
        if config.demo {
            tokio::pin!(shutdown);
            tokio::select! {
                result = tour::demo(&registry, config.nodes, kubeconfig.path()) => {
                    if let Err(e) = &result {
                        say(format!("demo failed: {e:#}"));
                    }
                    token.cancel();
                    result
                }
                _ = &mut shutdown => {
                    token.cancel();
                    Ok(())
                }
            }
        } else {
            say_how_to_try(
                config.nodes,
                status_addr,
                &api_url,
                kubeconfig.path(),
                &endpoints,
            );
            shutdown.await;
            token.cancel();
            Ok(())
        }
    };
    let (manager, (), driver, api) = tokio::join!(manager, kubelets, driver, api);
    events.flush(events_writer, Duration::from_secs(2)).await;
    say("kcm up: controllers, kubelets and the API stopped");
    drop(kubeconfig);
    manager.and(driver).and(api)
}

/// What `kcm up` runs of the controller manager: every controller, each synced every
/// `config.sync_period`, its status on `status_addr`.
fn manager_config(
    target: &Target,
    config: &Config,
    status_addr: SocketAddr,
    node_registrations: status::NodeRegistrations,
) -> controller_manager::Config {
    controller_manager::Config {
        api: None,
        client: target.client.clone(),
        prefix: target.prefix.clone(),
        controllers: vec![
            Controller::Replication,
            Controller::ReplicaSet,
            Controller::Deployment,
            Controller::Endpoints,
            Controller::GarbageCollector,
            Controller::NodeLifecycle,
            Controller::Namespace,
            Controller::Scheduler,
        ],
        manager: ManagerConfig {
            sync_period: config.sync_period,
            ..ManagerConfig::default()
        },
        replicaset: ReplicaSetConfig {
            sync_period: config.sync_period,
            ..ReplicaSetConfig::default()
        },
        deployment: DeploymentConfig {
            sync_period: config.sync_period,
            ..DeploymentConfig::default()
        },
        endpoints: EndpointsConfig::default(),
        garbagecollector: GcConfig::default(),
        nodelifecycle: NodeLifecycleConfig::default(),
        status_addr,
        leader_election: None,
        nodes: node_registrations,
    }
}

/// What `kcm up` says when it runs without `--demo`: where everything listens, what to try.
fn say_how_to_try(
    nodes: u16,
    status_addr: SocketAddr,
    api_url: &str,
    kubeconfig: &Path,
    endpoints: &str,
) {
    say(format!(
        "kcm up: controller manager and {} simulated kubelet(s) running; status on http://{status_addr}/healthz",
        nodes
    ));
    say(format!(
        "kcm up: Kubernetes API on {api_url}; kubeconfig {}",
        kubeconfig.display()
    ));
    say(format!(
        "  try:  export KUBECONFIG={}",
        kubeconfig.display()
    ));
    say(format!("        kcm --etcd-servers {endpoints} run web --image nginx --replicas 3 --port 80 --expose"));
    say("        kubectl get pods -o wide -w");
    say(format!("        kcm --etcd-servers {endpoints} get pods"));
    say(format!(
        "        kcm --etcd-servers {endpoints} watch pods --raw"
    ));
    say(format!("        kcm --etcd-servers {endpoints} create deployment app --image nginx:1 --replicas 10"));
    say(format!(
        "        kcm --etcd-servers {endpoints} set image deploy/app '*=nginx:2'"
    ));
    say(format!(
        "        kcm --etcd-servers {endpoints} rollout status deploy/app"
    ));
    say("  Ctrl-C stops everything.");
}

/// A registered simulated kubelet, with the watcher it reads its pods through.
struct Node {
    kubelet: Kubelet,
    registration: Registration,
    watcher: Watcher,
}

/// Registers `nodes` simulated kubelets named `node-1`, `node-2`, ...
///
/// Each has two etcd connections of its own, as a `kcm kubelet` process has: one for
/// its pod watch and writes, one for its registration's lease renewals. On one shared
/// connection, the pod watches of all nodes filled HTTP/2's connection window while
/// their kubelets were busy writing, and every other answer on it, lease renewals
/// included, waited behind them: all nodes lost their registrations at once.
///
/// # Errors
/// When a name is taken (another `kcm up` or `kcm kubelet` uses this etcd and prefix) or
/// etcd fails; the names registered so far are released.
async fn register_nodes(
    config: &Config,
    target: &Target,
    events: &EventBroadcaster,
) -> anyhow::Result<Vec<Node>> {
    let mut registered: Vec<Node> = Vec::new();
    for i in 1..=config.nodes {
        let node = format!("node-{i}");
        let registration = async {
            let kubelet_config = KubeletConfig {
                ready_delay: config.ready_delay,
                images: config.images.clone(),
                max_pods: config.max_pods,
                pod_cidr: pod_cidr(i, &node, config.max_pods)?,
                // The scheduler binds the pods, spreading them over the nodes.
                claim_unassigned: false,
                events: events.recorder(crate::kubelet::EVENT_COMPONENT, Some(node.clone())),
                ..KubeletConfig::new(node.clone())
            };
            let (client, registry) = target.connect().await?;
            let registry = registry.with_field_manager(
                std::sync::Arc::new(crate::apiserver::FieldOwnership),
                crate::kubelet::KUBELET_FIELD_MANAGER,
            );
            let kubelet = Kubelet::new(registry.clone(), kubelet_config)?;
            let heartbeats = client::connect(&target.client).await?;
            let registration = Registration::register(
                &heartbeats,
                registry.prefix(),
                &node,
                target.client.request_timeout,
            )
            .await?;
            anyhow::Ok(Node {
                kubelet,
                registration,
                watcher: Watcher::new(&client, registry),
            })
        }
        .await;
        match registration {
            Ok(registered_node) => registered.push(registered_node),
            Err(e) => {
                futures::future::join_all(
                    registered
                        .into_iter()
                        .map(|node| node.registration.release()),
                )
                .await;
                return Err(match e.downcast::<NodeTaken>() {
                    Ok(taken) => anyhow::anyhow!(
                        "{taken}; another kcm up or kcm kubelet uses this etcd: \
                         use another --prefix, or --nodes 0"
                    ),
                    Err(e) => e,
                });
            }
        }
    }
    Ok(registered)
}

/// The pod range of node `index` (from 1) named `node`: the name's default /24 while
/// `max_pods` fits in one, else the `index`th block of 10.0.0.0/8 just big enough.
fn pod_cidr(index: u16, node: &str, max_pods: usize) -> anyhow::Result<Ipv4Cidr> {
    let default = crate::kubelet::default_pod_cidr(node);
    if max_pods as u64 <= default.pod_addresses() {
        return Ok(default);
    }
    for prefix_len in (8..24u8).rev() {
        let block = 1u64 << (32 - u32::from(prefix_len));
        if block - 3 < max_pods as u64 {
            continue;
        }
        let offset = u64::from(index - 1) * block;
        anyhow::ensure!(
            offset + block <= 1 << 24,
            "--max-pods {max_pods} on {index} nodes needs more addresses than 10.0.0.0/8 has"
        );
        let network = std::net::Ipv4Addr::from(0x0a00_0000 + u32::try_from(offset)?);
        return Ipv4Cidr::new(network, prefix_len).map_err(anyhow::Error::msg);
    }
    anyhow::bail!("--max-pods {max_pods} needs more addresses than 10.0.0.0/8 has")
}

/// Runs the registered kubelets until `token` is cancelled, each on a task of its own,
/// keeping `registrations` (what `/healthz` reports) in step with their registrations.
/// A kubelet that stops early (its name was taken over) is logged; the others go on.
async fn run_nodes(
    nodes: Vec<Node>,
    registrations: status::NodeRegistrations,
    token: &CancellationToken,
) {
    let runs = nodes.into_iter().map(|node| {
        let Node {
            kubelet,
            registration,
            watcher,
        } = node;
        let name = registration.node().to_string();
        let report = tokio::spawn(crate::kubelet::report_to(
            name.clone(),
            registration.status(),
            registrations.clone(),
        ));
        let run = tokio::spawn(kubelet.run(watcher, registration, token.clone().cancelled_owned()));
        async move {
            match run.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!(node = %name, error = %format!("{e:#}"), "kubelet stopped")
                }
                Err(e) => tracing::error!(node = %name, error = %e, "kubelet task failed"),
            }
            report.abort();
        }
    });
    futures::future::join_all(runs).await;
}

/// The kubeconfig `kcm up` writes for its API: at `--kubeconfig` (kept), or in a
/// temporary dir removed when this is dropped.
struct Kubeconfig {
    path: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl Kubeconfig {
    fn write(path: Option<&Path>, url: &str) -> anyhow::Result<Kubeconfig> {
        let (path, dir) = match path {
            Some(path) => (path.to_path_buf(), None),
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("kcm-up-kubeconfig-")
                    .tempdir()
                    .context("create a temporary dir for the kubeconfig")?;
                (dir.path().join("kubeconfig"), Some(dir))
            }
        };
        std::fs::write(&path, apiserver::kubeconfig(url))
            .with_context(|| format!("write the kubeconfig {}", path.display()))?;
        Ok(Kubeconfig { path, _dir: dir })
    }

    fn path(&self) -> &Path {
        &self.path
    }
}
