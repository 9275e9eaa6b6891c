//! The command line: every clap definition, and the dispatch to the commands.
//!
//! `main.rs` only parses [`Cli`], installs tracing and the shutdown signal, and calls
//! [`run`]. Every flag's `///` comment is its help text.
//!
//! Invariant: this is the only module that knows clap (ripgrep's low-level args). Each
//! command receives a validated configuration built here (the high-level args): a
//! [`Target`] from the global flags (`TryFrom<&GlobalArgs>`) plus its own config, e.g.
//! `KubeletConfig` from `KubeletArgs`. No other module imports this one.

mod apiserver;
mod bench;
mod controller_manager;
mod kubecfg;
mod kubelet;
mod lab;
mod process;
mod soak;
mod up;

pub use self::apiserver::ApiserverArgs;
pub use self::bench::BenchArgs;
pub use self::controller_manager::{ControllerManagerArgs, StandaloneControllerManager};
pub use self::kubecfg::{
    ApplyArgs, ControllerKind, CreateArgs, CreateCommand, CreateDeploymentArgs, CreateWhat,
    DeleteArgs, DescribeArgs, GetArgs, ResizeArgs, RolloutCommand, RolloutHistoryArgs,
    RolloutStatusArgs, RolloutTargetArgs, RolloutUndoArgs, RunArgs, SetCommand, SetImageArgs,
    StopArgs, WatchArgs,
};
pub use self::kubelet::KubeletArgs;
pub use self::lab::LabArgs;
pub use self::process::{init_tracing, shutdown_signal};
pub use self::soak::SoakCommand;
pub use self::up::UpArgs;

use std::path::PathBuf;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

use crate::api;
use crate::client::{self, ClientConfig, Target};

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

/// Flags every command takes, shown after the command's own under "Global options".
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Global options")]
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
    #[arg(long, global = true, default_value = "5s", value_parser = parse_keepalive)]
    pub etcd_keepalive: Duration,
    /// How long a keepalive ping may go unanswered.
    #[arg(long, global = true, default_value = "5s", value_parser = parse_timeout)]
    pub etcd_keepalive_timeout: Duration,
    /// Bound on each etcd request (watches excepted).
    #[arg(long, global = true, default_value = "10s", value_parser = parse_timeout)]
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
    /// More logging on stderr: kcm logs at info by default (warn under `up --demo` and
    /// `bench`); -v adds kcm's debug messages, -vv kcm's trace, -vvv every library's
    /// trace too (like glog's V levels, counted rather than -v=N). RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Threads that run kcm's tasks (default: half this machine's cores, at least one).
    /// kcm shares its machine with etcd, whose writes cost three times a controller's:
    /// a thread per core had kcm's threads wake and wait on each other's cores and slowed
    /// both (docs/PERFORMANCE.md). Give it every core when etcd runs elsewhere.
    #[arg(long, global = true, env = "KCM_WORKER_THREADS", value_name = "N")]
    pub worker_threads: Option<std::num::NonZeroUsize>,
    /// Whether `--etcd-servers` or `KCM_ETCD_SERVERS` named the servers, rather than the
    /// default: set by [`Cli::parse_env`] and [`Cli::try_parse_args`] (clap's own
    /// `Parser` methods leave it false). `kcm bench` starts a private etcd without it.
    #[arg(skip)]
    pub etcd_servers_given: bool,
}

impl GlobalArgs {
    /// The async runtime these flags ask for: `--worker-threads`, else
    /// [`default_worker_threads`].
    ///
    /// # Errors
    /// When the operating system refuses the runtime's threads or its I/O driver.
    pub fn runtime(&self) -> std::io::Result<tokio::runtime::Runtime> {
        let threads = self
            .worker_threads
            .map_or_else(default_worker_threads, |n| n.get());
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    }

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
}

impl TryFrom<&GlobalArgs> for Target {
    type Error = anyhow::Error;

    /// The etcd and prefix every command works on.
    ///
    /// # Errors
    /// An empty `--prefix`.
    fn try_from(global: &GlobalArgs) -> anyhow::Result<Target> {
        Target::new(global.client_config(), &global.prefix)
    }
}

impl Cli {
    /// Parses the process's arguments as [`Parser::parse`] does (printing usage errors and
    /// exiting 2, or printing help and exiting 0), and records where the connection flags
    /// came from.
    pub fn parse_env() -> Cli {
        Cli::try_parse_args(std::env::args_os()).unwrap_or_else(|e| e.exit())
    }

    /// Parses `args` (the program name first) as [`Parser::try_parse_from`] does, and
    /// records where the connection flags came from
    /// ([`GlobalArgs::etcd_servers_given`]).
    ///
    /// # Errors
    /// clap's usage error, or its help or version "error".
    pub fn try_parse_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let mut command = Cli::command();
        let mut matches = command.try_get_matches_from_mut(args)?;
        let given = was_given(&matches, "etcd_servers");
        let mut cli =
            Cli::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut command))?;
        cli.global.etcd_servers_given = given;
        Ok(cli)
    }
}

/// Whether the argument `id` came from the command line or the environment, at the top
/// level or in the subcommand (a global flag may be given on either side).
fn was_given(matches: &ArgMatches, id: &str) -> bool {
    let from_user = |matches: &ArgMatches| {
        matches!(
            matches.value_source(id),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        )
    };
    from_user(matches) || matches.subcommand().is_some_and(|(_, sub)| from_user(sub))
}

/// Parses `10s`, `500ms`, `1m30s`.
///
/// # Errors
/// A message naming the accepted units.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let duration =
        humantime::parse_duration(s).map_err(|e| format!("{e} (use e.g. 10s, 500ms, 1m)"))?;
    if duration > MAX_DURATION {
        return Err(format!(
            "{s} is longer than the longest duration kcm accepts, {} days",
            MAX_DURATION.as_secs() / 86_400
        ));
    }
    Ok(duration)
}

/// The longest duration any flag accepts: far beyond any useful period, and far below
/// where adding it to a clock reading overflows (which panicked).
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// The shortest sync period: below it a resync of every object runs back to back, and 0
/// panicked (a zero-period interval).
pub const MIN_SYNC_PERIOD: Duration = Duration::from_millis(100);

/// The shortest keepalive interval: etcd closes connections that ping more often than
/// its `--grpc-keepalive-min-time`, 5s by default, so every watch would restart forever.
pub const MIN_KEEPALIVE: Duration = Duration::from_secs(5);

/// A duration of at least `min`, for a flag where a smaller value is harmful.
fn at_least(s: &str, min: Duration, why: &str) -> Result<Duration, String> {
    let duration = parse_duration(s)?;
    if duration < min {
        return Err(format!(
            "must be at least {} ({why})",
            humantime::format_duration(min)
        ));
    }
    Ok(duration)
}

/// A sync period (`--sync-period`, `--endpoint-sync-period`): at least 100ms.
pub fn parse_sync_period(s: &str) -> Result<Duration, String> {
    at_least(
        s,
        MIN_SYNC_PERIOD,
        "a shorter period resyncs every object back to back",
    )
}

/// `--etcd-keepalive`: at least 5s.
pub fn parse_keepalive(s: &str) -> Result<Duration, String> {
    at_least(
        s,
        MIN_KEEPALIVE,
        "etcd closes connections that ping more often than its --grpc-keepalive-min-time, 5s by default",
    )
}

/// Half of `available_parallelism` (the cores this process may use), at least one: the
/// other half is etcd's, which on a shared machine spends about three times kcm's CPU on
/// each of kcm's writes.
pub fn default_worker_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / 2).max(1)
}

/// A timeout of an etcd request or ping: at least 100ms (0 would fail every call).
pub fn parse_timeout(s: &str) -> Result<Duration, String> {
    at_least(
        s,
        Duration::from_millis(100),
        "a shorter timeout fails calls that etcd answers in time",
    )
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// The whole loop on one machine: a private etcd (unless one answers at
    /// --etcd-servers), the controller manager and simulated kubelets, until Ctrl-C.
    /// `--demo` runs a one-minute guided tour and exits.
    Up(UpArgs),
    /// Serve the Kubernetes API (discovery, get, list, watch, and the writes: create,
    /// update, patch, delete, status, scale) over kcm's objects, for kubectl and every
    /// Kubernetes client, until SIGINT or SIGTERM.
    ///
    /// Plain HTTP on 127.0.0.1:8080 by default; HTTPS with bearer tokens beyond
    /// loopback.
    Apiserver(ApiserverArgs),
    /// Run the controller loops (replication manager, endpoints controller) and the status endpoint
    /// (/healthz, /metrics) until SIGINT or SIGTERM.
    ControllerManager(ControllerManagerArgs),
    /// Run a simulated node until SIGINT or SIGTERM: claim unassigned pods (at most
    /// --max-pods), turn them Running with an address from --pod-cidr after
    /// --start-delay, and fail a --fail-rate share of them after --fail-after.
    Kubelet(KubeletArgs),
    /// Print the typed watch events of one kind, as the 2014 apiserver's watch did.
    ///
    /// Follows the resumable watch until Ctrl-C; says on stderr when it resumes after a
    /// disconnect, lists again after compaction, or waits for a --resource-version ahead
    /// of etcd.
    Watch(WatchArgs),
    /// Create objects from manifests (JSON or YAML), or a deployment from an image.
    ///
    /// Deployments, ReplicaSets, ReplicationControllers, Pods, Services and Endpoints,
    /// from a file, a directory or stdin. Every object is validated before any is
    /// written; an object that exists already is an error (`apply` updates it).
    /// `kcm create deployment NAME --image IMG` makes one without a manifest.
    Create(CreateCommand),
    /// Create objects from manifests, or update the stored ones of the same name
    /// (kubectl's apply).
    ///
    /// The same input as `create`. An update merges the manifest into the stored object:
    /// what the manifest sets replaces what is stored, a field the last apply set and the
    /// manifest no longer does is removed (the last applied manifest is kept in the
    /// kubectl.kubernetes.io/last-applied-configuration annotation), the rest (status,
    /// fields set by others) is kept; lists are replaced whole. Each write is a
    /// compare-and-swap on the revision read, retried after a conflict, or refused when
    /// the manifest names a resourceVersion that is no longer stored. Prints
    /// `KIND/NAME created`, `configured` or `unchanged` per object.
    ///
    /// With --server-side, server-side apply instead, as the API serves it (`kubectl apply
    /// --server-side`): the same fields owned and the same conflicts; prints
    /// `KIND/NAME serverside-applied`.
    Apply(ApplyArgs),
    /// Print objects as a table or as JSON; several kinds (`rs,deploy`) print one table
    /// each.
    Get(GetArgs),
    /// Set a replication controller's or ReplicaSet's desired replicas (2014 kubecfg's
    /// `resize`; prints `replicationcontrollers/web resized to 3`).
    Resize(ResizeArgs),
    /// Set a controller's desired replicas, as kubectl's scale: prints
    /// `replicaset.apps/web scaled`; with --current-replicas, refuses unless the count is
    /// that now.
    Scale(ResizeArgs),
    /// Follow, list, undo, pause, resume or restart a deployment's rollouts (kubectl's
    /// rollout): `kcm rollout status deploy/web`.
    #[command(subcommand)]
    Rollout(RolloutCommand),
    /// Change a field of a controller's spec (kubectl's set): `set image`.
    #[command(subcommand)]
    Set(SetCommand),
    /// Delete one object; the garbage collector deletes what it owns (--cascade).
    ///
    /// As kubectl: the default is a background cascade; an object with finalizers only
    /// gets a deletionTimestamp, and goes when they do. Deleting a replication controller
    /// leaves its pods (they carry no owner references); `stop` deletes them too.
    Delete(DeleteArgs),
    /// Delete a replication controller and its pods.
    ///
    /// Resizes it to 0, waits until no active pod matches its selector (a running
    /// controller-manager deletes them), then deletes it. Refuses a controller whose
    /// selector overlaps another's (it would delete the other's pods too). Ctrl-C while it
    /// waits puts the controller back to its old replica count and exits 130.
    Stop(StopArgs),
    /// Run an image under a new replication controller (2014 kubecfg's `run`).
    ///
    /// The controller, its pods and (with --expose) a service in front of them are all
    /// labelled and selected by `name=NAME`.
    Run(RunArgs),
    /// Show a controller's spec and status, and what looks wrong: a replication
    /// controller or ReplicaSet with its pods, a deployment with its conditions and its
    /// old and new ReplicaSets; then its events, as kubectl describe lists them.
    Describe(DescribeArgs),
    /// Measure kcm against raw etcd on this machine: scale-up, scale-down (a
    /// ReplicationController), rs-scale-up, rs-scale-down (a ReplicaSet), rollout (a
    /// Deployment's set image), heal, resync, watch, resume, memory, and api-list, api-watch,
    /// api-get, api-create, api-update, api-apply (the apiserver), each with a baseline
    /// measured in the same run, and the ratios against the targets in docs/PERFORMANCE.md.
    ///
    /// Starts a private etcd unless --etcd-servers (or KCM_ETCD_SERVERS) names one; works
    /// under its own key prefix, deleted at the end.
    Bench(BenchArgs),
    /// See each 2014 weakness beside its fix: every scenario runs once with the late-2014
    /// replication manager and once with kcm's, in fresh namespaces, and one row per
    /// scenario shows both figures, counted from etcd's history.
    ///
    /// Starts a private etcd unless --etcd-servers (or KCM_ETCD_SERVERS) names one; works
    /// under its own key prefix, deleted at the end.
    Lab(LabArgs),
    /// The checkers and instruments of scripts/soak.sh (issue 25's fault classes).
    #[command(subcommand, hide = true)]
    SoakCheck(SoakCommand),
}

/// Runs a parsed command until it finishes or `shutdown` resolves.
///
/// # Errors
/// The command's error, with its context chain.
pub async fn run(
    cli: Cli,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let global = &cli.global;
    match cli.command {
        Command::Up(args) => crate::up::run(&global.try_into()?, (&args).into(), shutdown).await,
        Command::Apiserver(args) => {
            crate::apiserver::run(&global.try_into()?, args.config(), shutdown).await
        }
        Command::ControllerManager(args) => {
            let target = global.try_into()?;
            crate::controller_manager::run(args.config(&target), shutdown).await
        }
        Command::Kubelet(args) => {
            let config = (&args).try_into()?;
            let fields = std::sync::Arc::new(crate::apiserver::FieldOwnership);
            let target = global.try_into()?;
            crate::kubelet::run(&target, config, args.healthz(), fields, shutdown).await
        }
        Command::Watch(args) => {
            let target = global.try_into()?;
            tokio::select! {
                result = crate::kubecfg::watch(&target, args.into()) => result,
                _ = shutdown => Ok(()),
            }
        }
        // The one-shot verbs other than `stop` never poll `shutdown`, so no signal handler
        // is installed and Ctrl-C ends them at once. `stop` puts the controller back.
        Command::Create(CreateCommand {
            what: Some(CreateWhat::Deployment(args)),
            ..
        }) => crate::kubecfg::create_deployment(&global.try_into()?, args.into()).await,
        Command::Create(CreateCommand { manifest, .. }) => {
            crate::kubecfg::create(&global.try_into()?, manifest.into()).await
        }
        Command::Rollout(command) => {
            use crate::kubecfg::rollout;
            let target = global.try_into()?;
            match command {
                RolloutCommand::Status(args) => rollout::status(&target, args.into()).await,
                RolloutCommand::History(RolloutHistoryArgs {
                    target: t,
                    revision,
                }) => rollout::history(&target, t.options(revision)).await,
                RolloutCommand::Undo(RolloutUndoArgs {
                    target: t,
                    to_revision,
                }) => rollout::undo(&target, t.options(to_revision)).await,
                RolloutCommand::Pause(t) => rollout::set_paused(&target, t.options(0), true).await,
                RolloutCommand::Resume(t) => {
                    rollout::set_paused(&target, t.options(0), false).await
                }
                RolloutCommand::Restart(t) => rollout::restart(&target, t.options(0)).await,
            }
        }
        Command::Apply(args) => crate::kubecfg::apply(&global.try_into()?, args.into()).await,
        Command::Get(args) => crate::kubecfg::get(&global.try_into()?, args.into()).await,
        Command::Resize(args) => {
            crate::kubecfg::resize(&global.try_into()?, args.options(false)).await
        }
        Command::Scale(args) => {
            crate::kubecfg::resize(&global.try_into()?, args.options(true)).await
        }
        Command::Set(SetCommand::Image(args)) => {
            let options = args.options(self::kubecfg::command_line);
            crate::kubecfg::set_image(&global.try_into()?, options).await
        }
        Command::Delete(args) => crate::kubecfg::delete(&global.try_into()?, args.into()).await,
        Command::Stop(args) => {
            crate::kubecfg::stop(&global.try_into()?, args.into(), shutdown).await
        }
        Command::Run(args) => crate::kubecfg::run(&global.try_into()?, args.into()).await,
        Command::Describe(args) => crate::kubecfg::describe(&global.try_into()?, args.into()).await,
        Command::Bench(args) => {
            let config = args.config(global.etcd_servers_given);
            let target = global.try_into()?;
            tokio::select! {
                result = crate::bench::run(&target, config) => result,
                _ = shutdown => Ok(()),
            }
        }
        Command::Lab(args) => {
            let config = args.config(global.etcd_servers_given);
            let target = global.try_into()?;
            tokio::select! {
                result = crate::lab::run(&target, config) => result.map(drop),
                _ = shutdown => Ok(()),
            }
        }
        Command::SoakCheck(command) => crate::bench::soak::run(command.into()).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubecfg::Kind;
    use std::time::Duration;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn worker_threads_default_to_half_the_cores_and_refuse_zero() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(default_worker_threads(), (cores / 2).max(1));
        let cli = Cli::try_parse_from(["kcm", "get", "pods", "--worker-threads", "3"]).unwrap();
        assert_eq!(cli.global.worker_threads.map(|n| n.get()), Some(3));
        let runtime = cli.global.runtime().unwrap();
        assert_eq!(runtime.metrics().num_workers(), 3);
        let default = Cli::try_parse_from(["kcm", "get", "pods"]).unwrap();
        let runtime = default.global.runtime().unwrap();
        assert_eq!(runtime.metrics().num_workers(), default_worker_threads());
        let zero = Cli::try_parse_from(["kcm", "get", "pods", "--worker-threads", "0"])
            .unwrap_err()
            .to_string();
        assert!(
            zero.contains("invalid value '0' for '--worker-threads <N>'"),
            "{zero}"
        );
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
        let config = args.config(&Target::try_from(&cli.global).unwrap());
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
        let target = Target::try_from(&cli.global).unwrap();
        assert!(args.config(&target).leader_election.is_none());
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

    #[test]
    fn durations_are_bounded_where_a_value_is_harmful_or_overflows() {
        use std::time::Duration;
        #[track_caller]
        fn check(
            parse: fn(&str) -> Result<Duration, String>,
            input: &str,
            expected: Result<u64, &str>,
        ) {
            match (parse(input), expected) {
                (Ok(got), Ok(ms)) => assert_eq!(got, Duration::from_millis(ms), "{input}"),
                (Err(message), Err(part)) => assert!(message.contains(part), "{input}: {message}"),
                (got, expected) => panic!("{input}: got {got:?}, expected {expected:?}"),
            }
        }
        check(parse_sync_period, "10s", Ok(10_000));
        check(parse_sync_period, "100ms", Ok(100));
        check(parse_sync_period, "0s", Err("at least 100ms"));
        check(parse_sync_period, "99ms", Err("at least 100ms"));
        check(
            parse_sync_period,
            "100000000000s",
            Err("longest duration kcm accepts, 365 days"),
        );
        check(parse_sync_period, "10", Err("time unit needed"));
        check(parse_keepalive, "5s", Ok(5_000));
        check(parse_keepalive, "1ms", Err("--grpc-keepalive-min-time"));
        check(parse_timeout, "0s", Err("at least 100ms"));
        check(parse_timeout, "2s", Ok(2_000));
        // Durations without a harmful floor still get the ceiling.
        check(parse_duration, "0s", Ok(0));
        check(parse_duration, "366days", Err("365 days"));
    }
}
