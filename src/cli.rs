//! The command line: clap definitions and the commands that are not long-running loops.
//!
//! `main.rs` only parses [`Cli`], installs tracing and the shutdown signal, and calls
//! [`run`]. Every flag's `///` comment is its help text.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::api::{self, Endpoints, Object, Pod, ReplicationController, Service};
use crate::client::{self, ClientConfig};
use crate::controller_manager;
use crate::endpoints::EndpointsConfig;
use crate::etcd_watcher::{self, Update, WatchEvent, Watcher};
use crate::kubecfg::{
    self, CreateArgs, DeleteArgs, DescribeArgs, GetArgs, ResizeArgs, RunArgs, StopArgs,
};
use crate::labels::Selector;
use crate::registry::Registry;
use crate::replication_manager::ManagerConfig;

/// kcm: the 2014 Kubernetes etcd-backed control loop (replication manager, endpoints
/// controller, etcd watcher) running directly on etcd v3.
#[derive(Parser, Debug)]
#[command(name = "kcm", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command takes.
#[derive(Args, Debug, Clone)]
pub struct GlobalArgs {
    /// etcd member URLs, comma separated.
    #[arg(
        long,
        global = true,
        env = "KCM_ETCD_SERVERS",
        value_delimiter = ',',
        default_value = client::DEFAULT_ETCD_SERVERS
    )]
    pub etcd_servers: Vec<String>,
    /// Key prefix under which objects are stored.
    #[arg(long, global = true, default_value = api::DEFAULT_PREFIX)]
    pub prefix: String,
    /// Interval of HTTP/2 keepalive pings to etcd while a watch or request is open; a
    /// member that misses one for --etcd-keepalive-timeout is abandoned. etcd closes
    /// connections that ping more often than its --grpc-keepalive-min-time (5s by
    /// default).
    #[arg(long, global = true, default_value = "5s", value_parser = parse_duration)]
    pub etcd_keepalive: Duration,
    /// How long a keepalive ping may go unanswered.
    #[arg(long, global = true, default_value = "5s", value_parser = parse_duration)]
    pub etcd_keepalive_timeout: Duration,
    /// Bound on each etcd request (watches excepted).
    #[arg(long, global = true, default_value = "10s", value_parser = parse_duration)]
    pub etcd_request_timeout: Duration,
    /// CA certificate (PEM) that signed etcd's serving certificates; needed for https://
    /// endpoints.
    #[arg(long, global = true, value_name = "FILE")]
    pub etcd_cafile: Option<PathBuf>,
    /// Client certificate (PEM), for an etcd that runs with --client-cert-auth.
    #[arg(long, global = true, value_name = "FILE", requires = "etcd_keyfile")]
    pub etcd_certfile: Option<PathBuf>,
    /// Key (PEM) of --etcd-certfile.
    #[arg(long, global = true, value_name = "FILE", requires = "etcd_certfile")]
    pub etcd_keyfile: Option<PathBuf>,
    /// etcd user, for an etcd with authentication enabled. The password comes from
    /// --etcd-password-file or the KCM_ETCD_PASSWORD environment variable, never from a
    /// flag (flags show in `ps`).
    #[arg(long, global = true, env = "KCM_ETCD_USER")]
    pub etcd_user: Option<String>,
    /// File whose first line is the password of --etcd-user.
    #[arg(long, global = true, value_name = "FILE", requires = "etcd_user")]
    pub etcd_password_file: Option<PathBuf>,
    /// More logging: -v info, -vv debug, -vvv trace (like glog's V levels). RUST_LOG
    /// overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

impl GlobalArgs {
    /// The etcd connection settings these flags describe.
    pub fn client_config(&self) -> ClientConfig {
        ClientConfig {
            endpoints: self.etcd_servers.clone(),
            keepalive_interval: self.etcd_keepalive,
            keepalive_timeout: self.etcd_keepalive_timeout,
            request_timeout: self.etcd_request_timeout,
            tls: client::TlsFiles {
                ca_file: self.etcd_cafile.clone(),
                cert_file: self.etcd_certfile.clone(),
                key_file: self.etcd_keyfile.clone(),
            },
            auth: self.etcd_user.as_ref().map(|user| client::AuthConfig {
                user: user.clone(),
                password_file: self.etcd_password_file.clone(),
            }),
            ..ClientConfig::default()
        }
    }

    /// Connects (checking that etcd answers and the user may read the prefix) and
    /// builds the registry.
    ///
    /// # Errors
    /// One line when etcd is unreachable, refuses us, or the prefix is invalid.
    pub async fn registry(&self) -> anyhow::Result<(etcd_client::Client, Registry)> {
        let config = self.client_config();
        let client = client::connect(&config).await?;
        let registry =
            Registry::new(&client, &self.prefix)?.with_request_timeout(config.request_timeout);
        client::check_access(&client, &config, registry.prefix(), false).await?;
        Ok((client, registry))
    }
}

/// Parses `10s`, `500ms`, `1m30s`.
///
/// # Errors
/// A message naming the accepted units.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (use e.g. 10s, 500ms, 1m)"))
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// The whole loop on one machine: a private etcd (unless one answers at
    /// --etcd-servers), the controller manager and simulated kubelets, until Ctrl-C.
    /// `--demo` runs a one-minute guided tour and exits.
    Up(crate::up::UpArgs),
    /// Run the controller loops (replication manager, endpoints controller) and the status endpoint
    /// (/healthz, /metrics) until SIGINT or SIGTERM.
    ControllerManager(ControllerManagerArgs),
    /// Run a simulated node until SIGINT or SIGTERM: claim unassigned pods (at most
    /// --max-pods), turn them Running with an address from --pod-cidr after
    /// --start-delay, and fail a --fail-rate share of them after --fail-after.
    Kubelet(crate::kubelet::KubeletArgs),
    /// Print the typed watch events of one kind, as the 2014 apiserver's watch did.
    ///
    /// Follows the resumable watch until Ctrl-C; says on stderr when it resumes after a
    /// disconnect or lists again after compaction.
    Watch(WatchArgs),
    /// Create objects from a JSON file.
    ///
    /// The file holds one object or a `{"items": [...]}` list of ReplicationControllers,
    /// Pods, Services and Endpoints. Every object is validated before any is written.
    Create(CreateArgs),
    /// Print objects of one kind as a table or as JSON.
    Get(GetArgs),
    /// Set a replication controller's desired replicas (2014 kubecfg's `resize`).
    #[command(visible_alias = "scale")]
    Resize(ResizeArgs),
    /// Delete one object.
    ///
    /// Deleting a replication controller leaves its pods; `stop` deletes them too.
    Delete(DeleteArgs),
    /// Delete a replication controller and its pods.
    ///
    /// Resizes it to 0, waits until no active pod matches its selector (a running
    /// controller-manager deletes them), then deletes it.
    Stop(StopArgs),
    /// Run an image under a new replication controller (2014 kubecfg's `run`).
    ///
    /// The controller, its pods and (with --expose) a service in front of them are all
    /// labelled and selected by `name=NAME`.
    Run(RunArgs),
    /// Show a replication controller's spec, status and pods, and what looks wrong.
    Describe(DescribeArgs),
    /// Measure kcm against raw etcd on this machine: scale-up, scale-down, heal, resync,
    /// watch, resume and memory, each with a baseline measured in the same run, and the
    /// ratios against the targets in docs/PERFORMANCE.md.
    ///
    /// Starts a private etcd unless --etcd-servers (or KCM_ETCD_SERVERS) names one; works
    /// under its own key prefix, deleted at the end.
    Bench(crate::bench::BenchArgs),
}

#[derive(Args, Debug)]
pub struct ControllerManagerArgs {
    /// Controllers to run, comma separated, as the kube-controller-manager spells it: `*`
    /// enables every controller that is on by default, `NAME` enables one, `-NAME` disables
    /// one; the first mention of a controller wins. Known: replication (aliases
    /// replicationcontroller, replicationcontroller-controller), endpoints (aliases
    /// endpoint, endpoints-controller); both on by default.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "*",
        allow_hyphen_values = true,
        value_parser = controller_manager::check_controller_entry
    )]
    pub controllers: Vec<String>,
    /// How often every controller is synced even without events (2014: 10s).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub sync_period: Duration,
    /// Replication controllers synced in parallel.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub concurrent_rc_syncs: u32,
    /// Most pods created or deleted for one controller in one sync.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..))]
    pub burst_replicas: u32,
    /// Period of the endpoints controller's full pass over every Service (2014: 10s).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub endpoint_sync_period: Duration,
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
    #[arg(long, default_value = crate::leader::DEFAULT_ELECTION_NAME, value_parser = parse_election_name)]
    pub leader_elect_name: String,
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

impl ControllerManagerArgs {
    /// The validated configuration of `kcm controller-manager`.
    pub fn config(&self, global: &GlobalArgs) -> controller_manager::Config {
        controller_manager::Config {
            client: global.client_config(),
            prefix: global.prefix.clone(),
            controllers: controller_manager::enabled_controllers(&self.controllers),
            manager: ManagerConfig {
                sync_period: self.sync_period,
                concurrent_syncs: self.concurrent_rc_syncs as usize,
                burst_replicas: self.burst_replicas as usize,
                ..ManagerConfig::default()
            },
            endpoints: EndpointsConfig {
                sync_period: self.endpoint_sync_period,
                ..EndpointsConfig::default()
            },
            status_addr: std::net::SocketAddr::new(self.address, self.port),
            leader_election: self
                .leader_elect
                .then(|| crate::leader::LeaderElectionConfig {
                    name: self.leader_elect_name.clone(),
                    lease_duration: self.leader_elect_lease_duration,
                    ..crate::leader::LeaderElectionConfig::new()
                }),
        }
    }
}

/// The kinds kcm stores, as named on the command line.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    #[value(alias = "pod", alias = "po")]
    Pods,
    #[value(alias = "rc", alias = "replicationcontroller")]
    Replicationcontrollers,
    #[value(alias = "service", alias = "svc")]
    Services,
    #[value(alias = "ep")]
    Endpoints,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchOutput {
    /// `ADDED pods/default/web-7xk2p rv=1234`
    Text,
    /// One wire-form event per line: `{"type":"ADDED","object":{...}}`
    Json,
}

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// pods, replicationcontrollers (rc), services or endpoints.
    pub kind: Kind,
    /// Watch only this object.
    pub name: Option<String>,
    /// Namespace to watch.
    #[arg(short, long, default_value = api::DEFAULT_NAMESPACE, conflicts_with = "all_namespaces")]
    pub namespace: String,
    /// Watch every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Only objects whose labels match, e.g. `app=web,tier!=db` or `env in (a,b)`.
    #[arg(short = 'l', long)]
    pub selector: Option<Selector>,
    /// Start after this revision; empty lists the current objects first (as ADDED).
    #[arg(long, default_value = "")]
    pub resource_version: String,
    #[arg(short, long, value_enum, default_value_t = WatchOutput::Text)]
    pub output: WatchOutput,
    /// Also print the etcd event each event came from (type, key, revisions, version,
    /// whether a previous value came with it).
    #[arg(long)]
    pub raw: bool,
}

/// Runs a parsed command until it finishes or `shutdown` resolves.
///
/// # Errors
/// The command's error, with its context chain.
pub async fn run(
    cli: Cli,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    match cli.command {
        Command::Up(args) => crate::up::run(&cli.global, args, shutdown).await,
        Command::ControllerManager(args) => {
            api::normalize_prefix(&cli.global.prefix)?;
            controller_manager::run(args.config(&cli.global), shutdown).await
        }
        Command::Kubelet(args) => crate::kubelet::run(&cli.global, args.config()?, shutdown).await,
        Command::Watch(args) => {
            tokio::select! {
                result = watch(&cli.global, args) => result,
                _ = shutdown => Ok(()),
            }
        }
        // The one-shot verbs never poll `shutdown`, so no signal handler is installed and
        // Ctrl-C ends them at once (a `stop` interrupted while waiting leaves the
        // controller at 0 replicas).
        Command::Create(args) => kubecfg::create(&cli.global, args).await,
        Command::Get(args) => kubecfg::get(&cli.global, args).await,
        Command::Resize(args) => kubecfg::resize(&cli.global, args).await,
        Command::Delete(args) => kubecfg::delete(&cli.global, args).await,
        Command::Stop(args) => kubecfg::stop(&cli.global, args).await,
        Command::Run(args) => kubecfg::run(&cli.global, args).await,
        Command::Describe(args) => kubecfg::describe(&cli.global, args).await,
        Command::Bench(args) => {
            tokio::select! {
                result = crate::bench::run(&cli.global, args) => result,
                _ = shutdown => Ok(()),
            }
        }
    }
}

async fn watch(global: &GlobalArgs, args: WatchArgs) -> anyhow::Result<()> {
    match args.kind {
        Kind::Pods => watch_kind::<Pod>(global, args).await,
        Kind::Replicationcontrollers => watch_kind::<ReplicationController>(global, args).await,
        Kind::Services => watch_kind::<Service>(global, args).await,
        Kind::Endpoints => watch_kind::<Endpoints>(global, args).await,
    }
}

async fn watch_kind<T: Object>(global: &GlobalArgs, args: WatchArgs) -> anyhow::Result<()> {
    let (client, registry) = global.registry().await?;
    let watcher = Watcher::new(&client, registry);
    let filter = etcd_watcher::selector_filter::<T>(args.selector.clone().unwrap_or_default());
    let mut watch = match &args.name {
        Some(name) => {
            anyhow::ensure!(
                !args.all_namespaces,
                "a NAME needs one namespace; drop --all-namespaces"
            );
            anyhow::ensure!(
                args.selector.is_none(),
                "a NAME names one object; drop --selector"
            );
            watcher.resumable_object::<T>(&args.namespace, name, &args.resource_version)?
        }
        None => {
            let namespace = (!args.all_namespaces).then_some(args.namespace.as_str());
            watcher.resumable_list::<T>(namespace, &args.resource_version, filter)?
        }
    };
    let mut stdout = std::io::stdout().lock();
    loop {
        match watch.next().await {
            Update::Event(event, raw) => {
                print_event(&mut stdout, &event, raw.as_ref(), &args).context("write to stdout")?;
            }
            Update::Resumed { from, reason } => {
                eprintln!("kcm watch: resuming after revision {from} ({reason})");
            }
            Update::Error(status) => anyhow::bail!("watch {}: {}", T::RESOURCE, status.message),
            Update::Relisted {
                revision,
                added,
                modified,
                deleted,
            } => {
                eprintln!(
                    "kcm watch: listed at revision {revision} ({added} added, {modified} modified, {deleted} deleted)"
                );
            }
        }
    }
}

fn print_event<T: Object>(
    out: &mut impl std::io::Write,
    event: &WatchEvent<T>,
    raw: Option<&etcd_watcher::RawInfo>,
    args: &WatchArgs,
) -> std::io::Result<()> {
    match args.output {
        WatchOutput::Text => {
            if args.raw {
                match raw {
                    Some(raw) => writeln!(out, "  etcd: {raw}")?,
                    None => writeln!(out, "  etcd: (from a list)")?,
                }
            }
            let object = event.object();
            let meta = object.map(|o| o.metadata());
            writeln!(
                out,
                "{} {}/{}/{} rv={}",
                event.type_name(),
                T::RESOURCE,
                meta.map_or("", |m| m.namespace.as_str()),
                meta.map_or("", |m| m.name.as_str()),
                event.revision().unwrap_or(0)
            )?;
        }
        WatchOutput::Json => {
            let mut value = serde_json::to_value(event).map_err(std::io::Error::other)?;
            if args.raw {
                value["raw"] = serde_json::to_value(raw).map_err(std::io::Error::other)?;
            }
            writeln!(out, "{value}")?;
        }
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn watch_flags_parse() {
        let cli = Cli::try_parse_from([
            "kcm",
            "watch",
            "rc",
            "-A",
            "-l",
            "app=web",
            "-o",
            "json",
            "--raw",
            "--etcd-servers",
            "http://a:2379,http://b:2379",
        ])
        .unwrap();
        assert_eq!(cli.global.etcd_servers, ["http://a:2379", "http://b:2379"]);
        let Command::Watch(args) = cli.command else {
            panic!("parsed as another command")
        };
        assert_eq!(args.kind, Kind::Replicationcontrollers);
        assert!(args.all_namespaces && args.raw);
        assert_eq!(args.selector.unwrap().to_string(), "app=web");
    }

    #[test]
    fn leader_election_and_security_flags_parse() {
        let cli = Cli::try_parse_from([
            "kcm",
            "controller-manager",
            "--leader-elect",
            "--leader-elect-lease-duration",
            "3s",
            "--etcd-servers",
            "https://a:2379",
            "--etcd-cafile",
            "ca.pem",
            "--etcd-certfile",
            "c.pem",
            "--etcd-keyfile",
            "k.pem",
            "--etcd-user",
            "kcm",
            "--etcd-password-file",
            "pw",
        ])
        .unwrap();
        let Command::ControllerManager(args) = &cli.command else {
            panic!("parsed as another command")
        };
        let config = args.config(&cli.global);
        let election = config.leader_election.expect("--leader-elect");
        assert_eq!(election.name, "kcm-controller-manager");
        assert_eq!(election.lease_duration, Duration::from_secs(3));
        assert_eq!(config.client.tls.ca_file, Some(PathBuf::from("ca.pem")));
        assert_eq!(config.client.tls.key_file, Some(PathBuf::from("k.pem")));
        let auth = config.client.auth.expect("--etcd-user");
        assert_eq!(auth.user, "kcm");
        assert_eq!(auth.password_file, Some(PathBuf::from("pw")));

        let cli = Cli::try_parse_from(["kcm", "controller-manager"]).unwrap();
        let Command::ControllerManager(args) = &cli.command else {
            panic!("parsed as another command")
        };
        assert!(args.config(&cli.global).leader_election.is_none());
        assert_eq!(args.leader_elect_lease_duration, Duration::from_secs(15));
    }

    #[test]
    fn bad_leader_and_security_flags_are_rejected() {
        let check = |args: &[&str], expected: &str| {
            let err = Cli::try_parse_from(args).unwrap_err().to_string();
            assert!(err.contains(expected), "{err}");
        };
        check(
            &["kcm", "--etcd-password-file", "pw", "get", "pods"],
            "--etcd-user",
        );
        check(
            &["kcm", "--etcd-certfile", "c.pem", "get", "pods"],
            "--etcd-keyfile",
        );
        check(
            &[
                "kcm",
                "controller-manager",
                "--leader-elect-lease-duration",
                "500ms",
            ],
            "at least 1s",
        );
        check(
            &["kcm", "controller-manager", "--leader-elect-name", "a/b"],
            "no '/'",
        );
        // There is no password flag at all.
        check(
            &["kcm", "--etcd-password", "x", "get", "pods"],
            "unexpected argument",
        );
    }

    #[test]
    fn bad_flags_are_rejected_with_the_reason() {
        let err = Cli::try_parse_from(["kcm", "watch", "pods", "-l", "a=b,,c"]).unwrap_err();
        assert!(err.to_string().contains("empty requirement"), "{err}");
        let err = Cli::try_parse_from(["kcm", "watch", "widgets"]).unwrap_err();
        assert!(err.to_string().contains("invalid value 'widgets'"), "{err}");
        let err =
            Cli::try_parse_from(["kcm", "--etcd-keepalive", "soon", "watch", "pods"]).unwrap_err();
        assert!(err.to_string().contains("10s"), "{err}");
    }
}
