//! The kubecfg verbs: `create`, `apply`, `get`, `resize`, `delete`, `stop`, `run`,
//! `describe` and `watch`, and kubectl's later ones: `scale`, `set image`, `create
//! deployment` and `rollout` (`rollout.rs`, `set.rs`), talking to etcd directly instead of
//! to an apiserver.
//!
//! Mirrors 2014's `cmd/kubecfg/kubecfg.go` and `pkg/kubecfg/` (`kubecfg.go`:
//! `ResizeController`, `StopController`, `RunController`; `resource_printer.go`: the
//! tables), with kubectl's habits for flags and messages (`-f`, `-n`, `-A`, `-l`, `-o`,
//! `pods "x" not found`, `replicationcontrollers/web created`).
//!
//! Invariants:
//! - `create` and `apply` decode and validate every object of their input before they
//!   write any, so an invalid file writes nothing;
//! - the formatting (tables, ages, `describe`) is pure, over objects already read, and
//!   unit-tested; the verbs only read, write and print;
//! - every verb writes its results to stdout and nothing else there; warnings and notes go
//!   to stderr, errors are returned (and printed once by `main`).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use serde_json::{json, Value};

use crate::api::{
    self, Container, ContainerPort, Deployment, Endpoints, IntOrString, Object, ObjectMeta, Pod,
    PodPhase, PodSpec, PodTemplateSpec, ReplicaSet, ReplicationController,
    ReplicationControllerSpec, Service, ServiceSpec, ValidationError,
};
use crate::client::Target;
use crate::etcd_watcher::{self, Update, WatchEvent, Watcher};
use crate::labels::{Selector, Set};
use crate::registry::{ObjectList, Registry, StorageError};

mod apply;
mod delete;
mod describe;
mod manifest;
mod overlap;
mod print;
pub mod rollout;
mod run;
mod scale;
mod set;
mod watch;

pub use self::apply::{apply, three_way_merge, Applied, LAST_APPLIED_ANNOTATION};
pub use self::delete::{delete, delete_write, kubectl_kind, pending, Cascade, DeleteWrite};
pub use self::describe::{describe, describe_controller, ownership_lines};
pub use self::manifest::{
    create, parse_manifests, Manifest, ETCD_MAX_REQUEST_BYTES, MAX_INPUT_BYTES,
};
pub use self::print::{
    age, get, kind_reference, render_objects, render_objects_as, render_table, Printable,
};
pub use self::rollout::create_deployment;
pub use self::run::{run, run_objects};
pub use self::scale::{resize, stop, Interrupted};
pub use self::set::{parse_image_update, set_image, set_images, Templated};
pub use self::watch::watch;

/// How often `kcm stop` re-lists the controller's pods while it waits for them to go.
const STOP_POLL_INTERVAL: Duration = Duration::from_millis(200);
/// Endpoints shown in the ENDPOINTS column before the rest are summarized (kubectl's 3).
const MAX_ENDPOINTS_SHOWN: usize = 3;
/// What a table shows for an absent value.
const NONE: &str = "<none>";

// ---------------------------------------------------------------------------------------
// What each verb is asked to do (the command line builds these in `cli::kubecfg`)

/// The kinds kcm stores, as named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Pods,
    Replicationcontrollers,
    Replicasets,
    Deployments,
    Services,
    Endpoints,
}

/// How `kcm get` prints what it read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GetOutput {
    /// Aligned columns.
    Table,
    /// The table plus more columns (images, labels).
    Wide,
    /// The object, or a `List` of them, as JSON.
    Json,
}

/// How `kcm watch` prints each event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchOutput {
    /// `ADDED pods/default/web-7xk2p rv=1234`
    Text,
    /// One wire-form event per line: `{"type":"ADDED","object":{...}}`
    Json,
}

/// `kcm create -f FILE` (and `kcm apply -f FILE`).
#[derive(Clone, Debug)]
pub struct CreateOptions {
    /// A manifest file (JSON or YAML, one or more documents, each one object or a
    /// `List`), a directory of `.json`/`.yaml`/`.yml` files (not its subdirectories), or
    /// `-` for stdin.
    pub filename: PathBuf,
    /// Namespace of objects that name none (`default` when `None`); an object naming
    /// another namespace is an error.
    pub namespace: Option<String>,
}

/// `kcm apply -f FILE`: the same input as `create`.
pub type ApplyOptions = CreateOptions;

/// `kcm get KIND[,KIND...] [NAME]`.
#[derive(Clone, Debug)]
pub struct GetOptions {
    /// One or more kinds (`rs,rc`), each printed as its own table, in this order.
    pub kinds: Vec<Kind>,
    /// Print only this object (then `all_namespaces` is false and `selector` is `None`).
    pub name: Option<String>,
    pub namespace: String,
    /// List every namespace (adds a NAMESPACE column); `namespace` is then ignored.
    pub all_namespaces: bool,
    pub selector: Option<Selector>,
    pub output: GetOutput,
}

/// `kcm resize rc NAME --replicas N` (and `kcm scale`).
#[derive(Clone, Debug)]
pub struct ResizeOptions {
    pub kind: WorkloadKind,
    /// The controller's name.
    pub name: String,
    /// The new `spec.replicas`, 0 to [`api::MAX_REPLICAS`].
    pub replicas: i64,
    /// kubectl's precondition: refuse unless `spec.replicas` is this now.
    pub current_replicas: Option<i64>,
    pub namespace: String,
    /// Print kubectl's `replicaset.apps/web scaled` (`kcm scale`) instead of 2014's
    /// `replicasets/web resized to 3` (`kcm resize`).
    pub kubectl_output: bool,
}

/// The kinds with a pod template, named `TYPE/NAME` by `set image` and `rollout`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadKind {
    ReplicationController,
    ReplicaSet,
    Deployment,
}

/// `TYPE/NAME` on the command line: `deploy/web`, `rc/web`, `replicaset/web`,
/// `deployment.apps/web`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    pub kind: WorkloadKind,
    pub name: String,
}

impl std::str::FromStr for Workload {
    type Err = String;

    /// kubectl's spellings of each kind, with or without the `.apps` group.
    fn from_str(text: &str) -> Result<Workload, String> {
        let Some((kind, name)) = text.split_once('/') else {
            return Err(format!("expected TYPE/NAME (e.g. rs/web), got {text:?}"));
        };
        if name.is_empty() || name.contains('/') {
            return Err(format!("expected TYPE/NAME (e.g. rs/web), got {text:?}"));
        }
        let kind = match kind.strip_suffix(".apps").unwrap_or(kind) {
            "rc" | "replicationcontroller" | "replicationcontrollers" => {
                WorkloadKind::ReplicationController
            }
            "rs" | "replicaset" | "replicasets" => WorkloadKind::ReplicaSet,
            "deploy" | "deployment" | "deployments" => WorkloadKind::Deployment,
            other => {
                return Err(format!(
                    "unknown resource type {other:?}: expected deploy (deployment), rs \
                     (replicaset) or rc (replicationcontroller)"
                ))
            }
        };
        Ok(Workload {
            kind,
            name: name.to_string(),
        })
    }
}

/// `kcm rollout history|undo|pause|resume|restart deploy/NAME`.
#[derive(Clone, Debug)]
pub struct RolloutOptions {
    /// The deployment's name.
    pub name: String,
    pub namespace: String,
    /// `history --revision N` (the template of revision N) or `undo --to-revision N`; 0
    /// for none (history: the table; undo: the revision before the current).
    pub revision: i64,
}

/// `kcm rollout status deploy/NAME`.
#[derive(Clone, Debug)]
pub struct RolloutStatusOptions {
    /// The deployment's name.
    pub name: String,
    pub namespace: String,
    /// `--revision N`: fail unless the deployment's revision is N; 0 for any.
    pub revision: i64,
    /// Follow the rollout until it ends (else print the current line once).
    pub watch: bool,
    /// Give up after this long; `None` (or zero) waits for ever.
    pub timeout: Option<Duration>,
}

/// `kcm create deployment NAME --image IMG --replicas N`.
#[derive(Clone, Debug)]
pub struct CreateDeploymentOptions {
    pub name: String,
    pub image: String,
    /// `spec.replicas`, 0 to [`api::MAX_REPLICAS`].
    pub replicas: i64,
    pub namespace: String,
}

/// `kcm set image TYPE/NAME CONTAINER=IMAGE...`.
#[derive(Clone, Debug)]
pub struct SetImageOptions {
    pub workload: Workload,
    /// `(container, image)` pairs; container `*` is every container.
    pub images: Vec<(String, String)>,
    pub namespace: String,
    /// With `--record`: the command line, for the `kubernetes.io/change-cause` annotation
    /// (written only when an image changes).
    pub change_cause: Option<String>,
}

/// `kcm delete KIND NAME`.
#[derive(Clone, Debug)]
pub struct DeleteOptions {
    pub kind: Kind,
    pub name: String,
    pub namespace: String,
    /// What happens to the object's dependents (`--cascade`, default background).
    pub cascade: Cascade,
    /// Return only once the key is gone (`--wait`, default true).
    pub wait: bool,
    /// How long `wait` waits; `None`: no limit.
    pub timeout: Option<Duration>,
}

/// `kcm stop rc NAME`.
#[derive(Clone, Debug)]
pub struct StopOptions {
    /// The replication controller's name.
    pub name: String,
    pub namespace: String,
    /// How long to wait for the controller's pods to be deleted.
    pub timeout: Duration,
}

/// `kcm run NAME --image IMG`.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Name of the controller (and of the service with `expose`); its pods are labelled
    /// `name=NAME`.
    pub name: String,
    pub image: String,
    /// `spec.replicas` of the controller, 0 to [`api::MAX_REPLICAS`].
    pub replicas: i64,
    /// The container port (named `http`).
    pub port: Option<u16>,
    /// Also create a Service NAME selecting `name=NAME`, forwarding to `port` (only
    /// with a `port`).
    pub expose: bool,
    /// The service's port; default `port`.
    pub service_port: Option<u16>,
    pub namespace: String,
}

/// `kcm describe rc|rs|deploy NAME`.
#[derive(Clone, Debug)]
pub struct DescribeOptions {
    pub kind: WorkloadKind,
    /// The controller's name.
    pub name: String,
    pub namespace: String,
}

/// `kcm watch KIND [NAME]`.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    pub kind: Kind,
    /// Watch only this object (needs one namespace and no selector).
    pub name: Option<String>,
    pub namespace: String,
    /// Watch every namespace; `namespace` is then ignored.
    pub all_namespaces: bool,
    pub selector: Option<Selector>,
    /// Start after this revision; empty lists the current objects first (as ADDED).
    pub resource_version: String,
    pub output: WatchOutput,
    /// Also print the etcd event each event came from.
    pub raw: bool,
}

// ---------------------------------------------------------------------------------------
// Output

/// Turns the storage errors a user can act on into kubectl's wording
/// (`pods "x" not found`); the others keep their own message.
fn storage_error<T: Object>(error: StorageError, name: &str) -> anyhow::Error {
    match error {
        StorageError::NotFound { .. } => anyhow::anyhow!("{} {name:?} not found", T::RESOURCE),
        StorageError::AlreadyExists { .. } => {
            anyhow::anyhow!("{} {name:?} already exists", T::RESOURCE)
        }
        other => other.into(),
    }
}

/// Writes `text` to stdout. A closed pipe (`kcm get pods | head -1`) is not an error.
fn emit(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("write to stdout"),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
