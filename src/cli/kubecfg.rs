//! The kubecfg verbs' flags (`create`, `get`, `resize`, `scale`, `set image`, `rollout`,
//! `delete`, `stop`, `run`, `describe`, `watch`), kubectl's spelling of kinds, and the
//! [`crate::kubecfg`] options they describe.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Args, Subcommand, ValueEnum};

use super::parse_duration;
use crate::api;
use crate::kubecfg::{
    Cascade, CreateDeploymentOptions, CreateOptions, DeleteOptions, DescribeOptions, GetOptions,
    GetOutput, Kind, ResizeOptions, RolloutOptions, RolloutStatusOptions, RunOptions,
    SetImageOptions, StopOptions, WatchOptions, WatchOutput, Workload, WorkloadKind,
};
use crate::labels::Selector;

impl ValueEnum for Kind {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            Kind::Pods,
            Kind::Replicationcontrollers,
            Kind::Replicasets,
            Kind::Deployments,
            Kind::Services,
            Kind::Endpoints,
        ]
    }

    /// The resource's plural, with the registry's singular and short names as aliases.
    fn to_possible_value(&self) -> Option<PossibleValue> {
        let plural = match self {
            Kind::Pods => "pods",
            Kind::Replicationcontrollers => "replicationcontrollers",
            Kind::Replicasets => "replicasets",
            Kind::Deployments => "deployments",
            Kind::Services => "services",
            Kind::Endpoints => "endpoints",
        };
        Some(PossibleValue::new(plural).aliases(crate::apiserver::aliases_of(plural)))
    }
}

impl ValueEnum for GetOutput {
    fn value_variants<'a>() -> &'a [Self] {
        &[GetOutput::Table, GetOutput::Wide, GetOutput::Json]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            GetOutput::Table => PossibleValue::new("table").help("Aligned columns"),
            GetOutput::Wide => {
                PossibleValue::new("wide").help("The table plus more columns (images, labels)")
            }
            GetOutput::Json => {
                PossibleValue::new("json").help("The object, or a `List` of them, as JSON")
            }
        })
    }
}

impl ValueEnum for WatchOutput {
    fn value_variants<'a>() -> &'a [Self] {
        &[WatchOutput::Text, WatchOutput::Json]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            WatchOutput::Text => {
                PossibleValue::new("text").help("`ADDED pods/default/web-7xk2p rv=1234`")
            }
            WatchOutput::Json => PossibleValue::new("json")
                .help("One wire-form event per line: `{\"type\":\"ADDED\",\"object\":{...}}`"),
        })
    }
}

/// The kind the controller verbs (`resize`, `stop`, `describe`) act on.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControllerKind {
    /// Replication controllers (`rc`).
    #[value(alias = "rc", alias = "replicationcontroller")]
    Replicationcontrollers,
}

/// `kcm create`: `-f FILE`, or a quick start such as `create deployment`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct CreateCommand {
    #[command(subcommand)]
    pub what: Option<CreateWhat>,
    #[command(flatten)]
    pub manifest: CreateArgs,
}

/// What `kcm create` makes without a manifest.
#[derive(Subcommand, Debug)]
pub enum CreateWhat {
    /// Create a Deployment running one image (kubectl's create deployment): labels,
    /// selector and pod labels `app=NAME`, one container named after the image,
    /// Kubernetes' defaults (RollingUpdate 25%/25%). Prints `deployment.apps/NAME created`.
    #[command(visible_alias = "deploy")]
    Deployment(CreateDeploymentArgs),
}

#[derive(Args, Debug)]
pub struct CreateDeploymentArgs {
    /// The deployment's name.
    pub name: String,
    /// The container image.
    #[arg(long)]
    pub image: String,
    /// spec.replicas (at most 2147483647, Kubernetes' int32).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(i64).range(0..=api::MAX_REPLICAS))]
    pub replicas: i64,
    /// The deployment's namespace.
    #[arg(short, long, default_value = api::DEFAULT_NAMESPACE)]
    pub namespace: String,
}

impl From<CreateDeploymentArgs> for CreateDeploymentOptions {
    fn from(args: CreateDeploymentArgs) -> CreateDeploymentOptions {
        CreateDeploymentOptions {
            name: args.name,
            image: args.image,
            replicas: args.replicas,
            namespace: args.namespace,
        }
    }
}

/// The flags of `create` and `apply`.
#[derive(Args, Debug)]
pub struct CreateArgs {
    /// Manifest file: JSON or YAML, several documents separated by `---`, each one object
    /// or a `{"kind": "List", "items": [...]}`. A directory: its .json, .yaml and .yml
    /// files in name order (not its subdirectories). `-` reads stdin. At most 16 MiB in
    /// all.
    #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
    pub filename: Option<PathBuf>,
    /// Namespace of objects that name none [default: default]. An object naming another
    /// namespace is an error.
    #[arg(short, long)]
    pub namespace: Option<String>,
}

/// `kcm apply`'s arguments: `create`'s, and server-side apply.
#[derive(Args, Debug)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub files: CreateArgs,
    /// Server-side apply, as `kubectl apply --server-side` through the API: kcm records
    /// which fields each manager owns (`metadata.managedFields`), removes what this
    /// manager applied before and leaves out now, and refuses to change a field another
    /// manager owns (a conflict).
    #[arg(long)]
    pub server_side: bool,
    /// With --server-side: take the fields other managers own instead of refusing.
    #[arg(long, requires = "server_side")]
    pub force_conflicts: bool,
    /// With --server-side: the manager whose fields these are.
    #[arg(long, default_value = "kcm", requires = "server_side")]
    pub field_manager: String,
}

impl From<ApplyArgs> for crate::kubecfg::ApplyOptions {
    fn from(args: ApplyArgs) -> crate::kubecfg::ApplyOptions {
        crate::kubecfg::ApplyOptions {
            files: args.files.into(),
            server_side: args.server_side.then_some(crate::kubecfg::ServerSide {
                manager: args.field_manager,
                force: args.force_conflicts,
            }),
        }
    }
}

/// Kinds separated by commas (`rs,rc`), in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kinds(pub Vec<Kind>);

fn parse_kinds(text: &str) -> Result<Kinds, String> {
    text.split(',')
        .map(|kind| {
            Kind::from_str(kind, true).map_err(|_| {
                format!(
                    "unknown kind {kind:?}: expected pods (po), replicationcontrollers (rc), \
                     replicasets (rs), deployments (deploy), services (svc) or endpoints (ep), \
                     several separated by commas"
                )
            })
        })
        .collect::<Result<_, _>>()
        .map(Kinds)
}

#[derive(Args, Debug)]
pub struct GetArgs {
    /// pods (po), replicationcontrollers (rc), replicasets (rs), deployments (deploy),
    /// services (svc) or endpoints (ep); several separated by commas (`rs,rc`) print one table each.
    #[arg(value_parser = parse_kinds)]
    pub kind: Kinds,
    /// Print only this object.
    #[arg(conflicts_with_all = ["all_namespaces", "selector"])]
    pub name: Option<String>,
    /// Namespace to read.
    #[arg(short, long, default_value = api::DEFAULT_NAMESPACE, conflicts_with = "all_namespaces")]
    pub namespace: String,
    /// List every namespace (adds a NAMESPACE column).
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Only objects whose labels match, e.g. `app=web,tier!=db` or `env in (a,b)`.
    #[arg(short = 'l', long)]
    pub selector: Option<Selector>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = GetOutput::Table)]
    pub output: GetOutput,
}

/// The kinds `resize` (`scale`) and `describe` act on.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleKind {
    /// Replication controllers (`rc`).
    #[value(alias = "rc", alias = "replicationcontroller")]
    Replicationcontrollers,
    /// ReplicaSets (`rs`).
    #[value(alias = "rs", alias = "replicaset")]
    Replicasets,
    /// Deployments (`deploy`).
    #[value(alias = "deploy", alias = "deployment")]
    Deployments,
}

impl From<ScaleKind> for WorkloadKind {
    fn from(kind: ScaleKind) -> WorkloadKind {
        match kind {
            ScaleKind::Replicationcontrollers => WorkloadKind::ReplicationController,
            ScaleKind::Replicasets => WorkloadKind::ReplicaSet,
            ScaleKind::Deployments => WorkloadKind::Deployment,
        }
    }
}

#[derive(Args, Debug)]
pub struct ResizeArgs {
    /// replicationcontrollers (rc), replicasets (rs) or deployments (deploy).
    pub kind: ScaleKind,
    /// The controller's name.
    pub name: String,
    /// The new spec.replicas (at most 2147483647, Kubernetes' int32).
    #[arg(long, value_parser = clap::value_parser!(i64).range(0..=api::MAX_REPLICAS))]
    pub replicas: i64,
    /// Precondition: change nothing and fail unless spec.replicas is this now.
    #[arg(long, value_parser = clap::value_parser!(i64).range(0..=api::MAX_REPLICAS))]
    pub current_replicas: Option<i64>,
    /// The controller's namespace.
    #[arg(short, long, default_value = api::DEFAULT_NAMESPACE)]
    pub namespace: String,
}

/// The rollout verbs, all on `deploy/NAME`.
#[derive(Subcommand, Debug)]
pub enum RolloutCommand {
    /// Follow a deployment's rollout until it completes (exit 0), exceeds its progress
    /// deadline or --timeout passes (exit 1), printing kubectl's progress lines as they
    /// change. Watches the deployment; never polls.
    Status(RolloutStatusArgs),
    /// List a deployment's revisions (`REVISION  CHANGE-CAUSE`), or with --revision the
    /// pod template of one.
    History(RolloutHistoryArgs),
    /// Roll a deployment back to the revision before the current, or to --to-revision:
    /// its template is set to that revision's, and the controller rolls it out as a new
    /// revision. Refuses a paused deployment.
    Undo(RolloutUndoArgs),
    /// Pause a deployment: template changes roll nothing out until resume (scaling still
    /// applies).
    Pause(RolloutTargetArgs),
    /// Resume a paused deployment.
    Resume(RolloutTargetArgs),
    /// Roll out new pods with the same template (stamps it with
    /// kubectl.kubernetes.io/restartedAt).
    Restart(RolloutTargetArgs),
}

/// `deploy/NAME` and its namespace.
#[derive(Args, Debug)]
pub struct RolloutTargetArgs {
    /// deploy/NAME (also deployment/NAME, deployment.apps/NAME).
    #[arg(value_parser = parse_deployment)]
    pub deployment: String,
    /// The deployment's namespace.
    #[arg(short, long, default_value = api::DEFAULT_NAMESPACE)]
    pub namespace: String,
}

#[derive(Args, Debug)]
pub struct RolloutStatusArgs {
    #[command(flatten)]
    pub target: RolloutTargetArgs,
    /// Give up after this long (exit 1, `timed out waiting for the condition`); 0 waits
    /// for ever.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Follow the rollout; --watch=false prints the current line once and exits 0.
    #[arg(short, long, default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    pub watch: bool,
    /// Fail unless the deployment is at this revision (0: any).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..))]
    pub revision: i64,
}

#[derive(Args, Debug)]
pub struct RolloutHistoryArgs {
    #[command(flatten)]
    pub target: RolloutTargetArgs,
    /// Print the pod template of this revision (0: the table of all).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..))]
    pub revision: i64,
}

#[derive(Args, Debug)]
pub struct RolloutUndoArgs {
    #[command(flatten)]
    pub target: RolloutTargetArgs,
    /// The revision to roll back to (0: the one before the current).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..))]
    pub to_revision: i64,
}

fn parse_deployment(text: &str) -> Result<String, String> {
    let workload: Workload = text.parse()?;
    match workload.kind {
        WorkloadKind::Deployment => Ok(workload.name),
        _ => Err(format!(
            "kcm rollout works on deployments only (deploy/NAME), got {text:?}"
        )),
    }
}

impl RolloutTargetArgs {
    /// The options of a rollout verb on this deployment.
    pub fn options(self, revision: i64) -> RolloutOptions {
        RolloutOptions {
            name: self.deployment,
            namespace: self.namespace,
            revision,
        }
    }
}

impl From<RolloutStatusArgs> for RolloutStatusOptions {
    fn from(args: RolloutStatusArgs) -> RolloutStatusOptions {
        RolloutStatusOptions {
            name: args.target.deployment,
            namespace: args.target.namespace,
            revision: args.revision,
            watch: args.watch,
            timeout: (!args.timeout.is_zero()).then_some(args.timeout),
        }
    }
}

/// What `kcm set` changes.
#[derive(Subcommand, Debug)]
pub enum SetCommand {
    /// Change container images of a controller's pod template (kubectl's set image).
    ///
    /// `kcm set image rs/web web=nginx:1.25 sidecar=envoy:1.30`; `*=IMAGE` sets every
    /// container. A container name the template lacks is an error and nothing is written.
    /// Prints `replicaset.apps/web image updated`; when every image is already the one
    /// asked for, prints nothing (as kubectl) and says so on stderr.
    Image(SetImageArgs),
}

#[derive(Args, Debug)]
pub struct SetImageArgs {
    /// deploy/NAME (deployment), rs/NAME (replicaset) or rc/NAME
    /// (replicationcontroller).
    pub workload: Workload,
    /// CONTAINER=IMAGE, one or more; `*=IMAGE` for every container.
    #[arg(required = true, value_name = "CONTAINER=IMAGE", value_parser = parse_image_update)]
    pub images: Vec<(String, String)>,
    /// The controller's namespace.
    #[arg(short, long, default_value = api::DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// Record this command line in the kubernetes.io/change-cause annotation (kubectl's
    /// --record): the deployment controller copies it to the new ReplicaSet, and
    /// `rollout history` shows it as the revision's CHANGE-CAUSE.
    #[arg(long)]
    pub record: bool,
}

fn parse_image_update(text: &str) -> Result<(String, String), String> {
    crate::kubecfg::parse_image_update(text).map_err(|e| e.to_string())
}

impl SetImageArgs {
    /// The options, `command_line` (the process's arguments) recorded with --record.
    pub fn options(self, command_line: impl FnOnce() -> String) -> SetImageOptions {
        SetImageOptions {
            change_cause: self.record.then(command_line),
            workload: self.workload,
            images: self.images,
            namespace: self.namespace,
        }
    }
}

/// `kcm ARGS...` as the process was started (the program's path replaced by `kcm`), for
/// kubectl's `--record`.
pub fn command_line() -> String {
    std::iter::once("kcm".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Args, Debug)]
pub struct DeleteArgs {
    /// pods (po), replicationcontrollers (rc), replicasets (rs), deployments (deploy),
    /// services (svc) or endpoints (ep).
    pub kind: Kind,
    /// The object's name.
    pub name: String,
    /// The object's namespace.
    #[arg(short, long, default_value = api::DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// What happens to the objects it owns (through their ownerReferences): background
    /// deletes it now and the garbage collector deletes them after; foreground keeps it
    /// (with a deletionTimestamp) until they are gone; orphan keeps it until they no longer
    /// reference it, and leaves them. A ReplicationController's pods carry no references,
    /// so nothing cascades from one (`kcm stop rc` deletes them).
    #[arg(long, value_enum, default_value = "background")]
    pub cascade: CascadeArg,
    /// Wait until the object is gone (it stays while it has finalizers) before returning.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "true",
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub wait: bool,
    /// How long --wait waits (0: no limit); when it expires the command fails, saying
    /// what is still pending.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// `--cascade`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CascadeArg {
    Background,
    Foreground,
    Orphan,
}

#[derive(Args, Debug)]
pub struct StopArgs {
    /// replicationcontrollers (rc).
    pub kind: ControllerKind,
    /// The controller's name.
    pub name: String,
    /// The controller's namespace.
    #[arg(short, long, default_value = api::DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// How long to wait for the controller's pods to be deleted.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Name of the controller (and of the service with --expose); its pods are labelled
    /// `name=NAME`.
    pub name: String,
    /// The container image.
    #[arg(long)]
    pub image: String,
    /// spec.replicas of the controller (at most 2147483647, Kubernetes' int32).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(i64).range(0..=api::MAX_REPLICAS))]
    pub replicas: i64,
    /// The container port (named `http`).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
    /// Also create a Service NAME selecting `name=NAME`, forwarding to --port.
    #[arg(long, requires = "port")]
    pub expose: bool,
    /// The service's port [default: --port].
    #[arg(long, requires = "expose", value_parser = clap::value_parser!(u16).range(1..))]
    pub service_port: Option<u16>,
    /// Namespace of the controller and service.
    #[arg(short, long, default_value = api::DEFAULT_NAMESPACE)]
    pub namespace: String,
}

#[derive(Args, Debug)]
pub struct DescribeArgs {
    /// replicationcontrollers (rc), replicasets (rs) or deployments (deploy).
    pub kind: ScaleKind,
    /// The controller's name.
    pub name: String,
    /// The controller's namespace.
    #[arg(short, long, default_value = api::DEFAULT_NAMESPACE)]
    pub namespace: String,
}

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// pods (po), replicationcontrollers (rc), replicasets (rs), deployments (deploy), services
    /// (svc) or endpoints (ep).
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
    /// Start after this revision; empty lists the current objects first (as ADDED). A
    /// revision etcd has compacted ends the watch with "too old resource version"; one
    /// ahead of etcd's current revision is waited for, saying so on stderr.
    #[arg(long, default_value = "")]
    pub resource_version: String,
    #[arg(short, long, value_enum, default_value_t = WatchOutput::Text)]
    pub output: WatchOutput,
    /// Also print the etcd event each event came from (type, key, revisions, version,
    /// whether a previous value came with it).
    #[arg(long)]
    pub raw: bool,
}

impl From<CreateArgs> for CreateOptions {
    fn from(args: CreateArgs) -> CreateOptions {
        CreateOptions {
            // clap requires --filename whenever these arguments are used.
            filename: args.filename.unwrap_or_default(),
            namespace: args.namespace,
        }
    }
}

impl From<GetArgs> for GetOptions {
    fn from(args: GetArgs) -> GetOptions {
        GetOptions {
            kinds: args.kind.0,
            name: args.name,
            namespace: args.namespace,
            all_namespaces: args.all_namespaces,
            selector: args.selector,
            output: args.output,
        }
    }
}

impl ResizeArgs {
    /// What `kcm resize` (`kubectl_output` false) or `kcm scale` (true) is asked to do.
    pub fn options(self, kubectl_output: bool) -> ResizeOptions {
        let ResizeArgs {
            kind,
            name,
            replicas,
            current_replicas,
            namespace,
        } = self;
        ResizeOptions {
            kind: kind.into(),
            name,
            replicas,
            current_replicas,
            namespace,
            kubectl_output,
        }
    }
}

impl From<DeleteArgs> for DeleteOptions {
    fn from(args: DeleteArgs) -> DeleteOptions {
        DeleteOptions {
            kind: args.kind,
            name: args.name,
            namespace: args.namespace,
            cascade: match args.cascade {
                CascadeArg::Background => Cascade::Background,
                CascadeArg::Foreground => Cascade::Foreground,
                CascadeArg::Orphan => Cascade::Orphan,
            },
            wait: args.wait,
            timeout: (!args.timeout.is_zero()).then_some(args.timeout),
        }
    }
}

impl From<StopArgs> for StopOptions {
    fn from(args: StopArgs) -> StopOptions {
        let StopArgs {
            kind: ControllerKind::Replicationcontrollers,
            name,
            namespace,
            timeout,
        } = args;
        StopOptions {
            name,
            namespace,
            timeout,
        }
    }
}

impl From<RunArgs> for RunOptions {
    fn from(args: RunArgs) -> RunOptions {
        RunOptions {
            name: args.name,
            image: args.image,
            replicas: args.replicas,
            port: args.port,
            expose: args.expose,
            service_port: args.service_port,
            namespace: args.namespace,
        }
    }
}

impl From<DescribeArgs> for DescribeOptions {
    fn from(args: DescribeArgs) -> DescribeOptions {
        let DescribeArgs {
            kind,
            name,
            namespace,
        } = args;
        DescribeOptions {
            kind: kind.into(),
            name,
            namespace,
        }
    }
}

impl From<WatchArgs> for WatchOptions {
    fn from(args: WatchArgs) -> WatchOptions {
        WatchOptions {
            kind: args.kind,
            name: args.name,
            namespace: args.namespace,
            all_namespaces: args.all_namespaces,
            selector: args.selector,
            resource_version: args.resource_version,
            output: args.output,
            raw: args.raw,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser as _;

    #[test]
    fn a_kind_is_named_as_the_registry_names_it() {
        for (name, kind) in [
            ("po", Kind::Pods),
            ("pod", Kind::Pods),
            ("rc", Kind::Replicationcontrollers),
            ("replicaset", Kind::Replicasets),
            ("rs", Kind::Replicasets),
            ("deploy", Kind::Deployments),
            ("svc", Kind::Services),
            ("ep", Kind::Endpoints),
            ("endpoints", Kind::Endpoints),
        ] {
            assert_eq!(Kind::from_str(name, true), Ok(kind), "{name}");
        }
        assert!(
            Kind::from_str("cm", true).is_err(),
            "kcm's get prints typed kinds"
        );
    }

    #[test]
    fn verbs_parse_with_kubectls_flags() {
        let parse = |args: &[&str]| Cli::try_parse_from([&["kcm"], args].concat());
        let cli = parse(&["scale", "rc", "web", "--replicas", "3", "-n", "prod"]).unwrap();
        let Command::Scale(resize) = cli.command else {
            panic!("parsed as another command")
        };
        assert_eq!((resize.replicas, resize.namespace.as_str()), (3, "prod"));
        let cli = parse(&["get", "svc", "-A", "-l", "a=b", "-o", "wide"]).unwrap();
        let Command::Get(get) = cli.command else {
            panic!("parsed as another command")
        };
        assert_eq!(get.kind.0, [Kind::Services]);
        assert!(get.all_namespaces && get.output == GetOutput::Wide);
        let Command::Stop(stop) = parse(&["stop", "rc", "web"]).unwrap().command else {
            panic!("parsed as another command")
        };
        assert_eq!(stop.timeout, Duration::from_secs(60));

        let Command::Get(get) = parse(&["get", "rs,rc,po"]).unwrap().command else {
            panic!("parsed as another command")
        };
        assert_eq!(
            get.kind.0,
            [Kind::Replicasets, Kind::Replicationcontrollers, Kind::Pods]
        );
        let cli = parse(&[
            "scale",
            "rs",
            "web",
            "--replicas",
            "3",
            "--current-replicas",
            "2",
        ]);
        let Command::Scale(scale) = cli.unwrap().command else {
            panic!("parsed as another command")
        };
        assert_eq!(scale.current_replicas, Some(2));
        let cli = parse(&["set", "image", "rs/web", "web=nginx:2", "*=busybox"]).unwrap();
        let Command::Set(crate::cli::SetCommand::Image(set)) = cli.command else {
            panic!("parsed as another command")
        };
        assert_eq!(set.workload.name, "web");
        assert_eq!(set.images[1], ("*".to_string(), "busybox".to_string()));
        assert_eq!(set.options(|| unreachable!()).change_cause, None);
        let cli = parse(&["set", "image", "deploy/web", "a=b", "--record"]).unwrap();
        let Command::Set(crate::cli::SetCommand::Image(set)) = cli.command else {
            panic!("parsed as another command")
        };
        let options = set.options(|| "kcm set image deploy/web a=b --record".into());
        assert_eq!(
            options.change_cause.as_deref(),
            Some("kcm set image deploy/web a=b --record")
        );

        let cli = parse(&[
            "rollout",
            "status",
            "deploy/web",
            "--watch=false",
            "--timeout",
            "5s",
        ]);
        let Command::Rollout(RolloutCommand::Status(status)) = cli.unwrap().command else {
            panic!("parsed as another command")
        };
        let options = RolloutStatusOptions::from(status);
        assert_eq!((options.name.as_str(), options.watch), ("web", false));
        assert_eq!(options.timeout, Some(Duration::from_secs(5)));
        let cli = parse(&["rollout", "status", "deployment.apps/web", "-w"]).unwrap();
        let Command::Rollout(RolloutCommand::Status(status)) = cli.command else {
            panic!("parsed as another command")
        };
        assert!(status.watch && status.timeout.is_zero());
        let cli = parse(&["rollout", "undo", "deploy/web", "--to-revision", "2"]).unwrap();
        let Command::Rollout(RolloutCommand::Undo(undo)) = cli.command else {
            panic!("parsed as another command")
        };
        assert_eq!(undo.to_revision, 2);
        let cli = parse(&[
            "create",
            "deployment",
            "web",
            "--image",
            "nginx",
            "--replicas",
            "3",
        ]);
        let Command::Create(CreateCommand {
            what: Some(CreateWhat::Deployment(create)),
            ..
        }) = cli.unwrap().command
        else {
            panic!("parsed as another command")
        };
        assert_eq!(create.replicas, 3);
        let Command::Create(create) = parse(&["create", "-f", "x.yaml"]).unwrap().command else {
            panic!("parsed as another command")
        };
        assert!(create.what.is_none());

        for (args, expected) in [
            (&["rollout", "status", "rs/web"][..], "deployments only"),
            (&["rollout", "pause", "web"], "expected TYPE/NAME"),
            (&["create", "deployment", "web"], "--image"),
            (&["set", "image", "rs/web"][..], "CONTAINER=IMAGE"),
            (
                &["set", "image", "rs/web", "nginx"],
                "expected CONTAINER=IMAGE",
            ),
            (&["set", "image", "web", "a=b"], "expected TYPE/NAME"),
            (&["get", "rs,widgets"], r#"unknown kind "widgets""#),
            (&["get", "pods", "p", "-A"][..], "cannot be used with"),
            (&["get", "pods", "p", "-l", "a=b"], "cannot be used with"),
            (&["run", "web", "--image", "i", "--expose"], "--port"),
            (
                &["run", "web", "--image", "i", "--service-port", "80"],
                "--expose",
            ),
            (
                &["run", "web", "--image", "i", "--port", "0"],
                "0 is not in 1..=65535",
            ),
            (
                &["resize", "rc", "web", "--replicas", "2147483648"],
                "2147483648 is not in 0..=2147483647",
            ),
            (
                &["run", "web", "--image", "i", "--replicas", "2147483648"],
                "2147483648 is not in 0..=2147483647",
            ),
            (&["stop", "svc", "web"], "invalid value 'svc'"),
            (&["describe", "pods", "web"], "invalid value 'pods'"),
            (&["create"], "--filename"),
        ] {
            let err = parse(args).unwrap_err().to_string();
            assert!(err.contains(expected), "{args:?}: {err}");
        }
    }
}
