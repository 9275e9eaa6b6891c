//! The kubecfg verbs: `create`, `get`, `resize` (`scale`), `delete`, `stop`, `run`,
//! `describe` and `watch`, talking to etcd directly instead of to an apiserver.
//!
//! Mirrors 2014's `cmd/kubecfg/kubecfg.go` and `pkg/kubecfg/` (`kubecfg.go`:
//! `ResizeController`, `StopController`, `RunController`; `resource_printer.go`: the
//! tables), with kubectl's habits for flags and messages (`-f`, `-n`, `-A`, `-l`, `-o`,
//! `pods "x" not found`, `replicationcontrollers/web created`).
//!
//! Invariants:
//! - `create` decodes and validates every object of its input before it writes any, so an
//!   invalid file writes nothing;
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
    self, Container, ContainerPort, Endpoints, IntOrString, Object, ObjectMeta, Pod, PodPhase,
    PodSpec, PodTemplateSpec, ReplicationController, ReplicationControllerSpec, Service,
    ServiceSpec, ValidationError,
};
use crate::client::Target;
use crate::etcd_watcher::{self, Update, WatchEvent, Watcher};
use crate::labels::{Selector, Set};
use crate::registry::{ObjectList, Registry, StorageError};

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

/// `kcm create -f FILE`.
#[derive(Clone, Debug)]
pub struct CreateOptions {
    /// JSON file holding one object or a list; `-` reads stdin.
    pub filename: PathBuf,
    /// Namespace of objects that name none (`default` when `None`); an object naming
    /// another namespace is an error.
    pub namespace: Option<String>,
}

/// `kcm get KIND [NAME]`.
#[derive(Clone, Debug)]
pub struct GetOptions {
    pub kind: Kind,
    /// Print only this object (then `all_namespaces` is false and `selector` is `None`).
    pub name: Option<String>,
    pub namespace: String,
    /// List every namespace (adds a NAMESPACE column); `namespace` is then ignored.
    pub all_namespaces: bool,
    pub selector: Option<Selector>,
    pub output: GetOutput,
}

/// `kcm resize rc NAME --replicas N`.
#[derive(Clone, Debug)]
pub struct ResizeOptions {
    /// The replication controller's name.
    pub name: String,
    /// The new `spec.replicas`, at least 0.
    pub replicas: i64,
    pub namespace: String,
}

/// `kcm delete KIND NAME`.
#[derive(Clone, Debug)]
pub struct DeleteOptions {
    pub kind: Kind,
    pub name: String,
    pub namespace: String,
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
    /// `spec.replicas` of the controller, at least 0.
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

/// `kcm describe rc NAME`.
#[derive(Clone, Debug)]
pub struct DescribeOptions {
    /// The replication controller's name.
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
// create

/// One object of a `create` input, decoded as its kind (boxed: the kinds differ in size).
#[derive(Debug, Clone, PartialEq)]
pub enum Manifest {
    Controller(Box<ReplicationController>),
    Pod(Box<Pod>),
    Service(Box<Service>),
    Endpoints(Box<Endpoints>),
}

/// Runs `$body` with `$object` bound to a reference to the typed object inside a
/// [`Manifest`].
macro_rules! with_manifest {
    ($manifest:expr, $object:ident => $body:expr) => {
        match $manifest {
            Manifest::Controller($object) => {
                let $object: &ReplicationController = $object;
                $body
            }
            Manifest::Pod($object) => {
                let $object: &Pod = $object;
                $body
            }
            Manifest::Service($object) => {
                let $object: &Service = $object;
                $body
            }
            Manifest::Endpoints($object) => {
                let $object: &Endpoints = $object;
                $body
            }
        }
    };
}

impl Manifest {
    /// `replicationcontrollers/web`, as printed after a write.
    pub fn reference(&self) -> String {
        with_manifest!(self, object => reference(object))
    }

    /// # Errors
    /// The object's [`ValidationError`].
    pub fn validate(&self) -> Result<(), ValidationError> {
        with_manifest!(self, object => api::validate(object))
    }

    async fn create(&self, registry: &Registry) -> anyhow::Result<()> {
        with_manifest!(self, object => create_object(registry, object).await)
    }
}

/// `{resource}/{name}`, kubectl's way of naming an object in output.
fn reference<T: Object>(object: &T) -> String {
    format!("{}/{}", T::RESOURCE, object.metadata().name)
}

/// Decodes a `create` input: one object, or a list (`{"kind": "List", "items": [...]}`,
/// `kind` optional), each item dispatched on its `kind`. Objects without a namespace get
/// `namespace` (or `default`).
///
/// # Errors
/// Invalid JSON (naming `source` and serde's line and column), an item that is not an
/// object or has an unknown kind (naming its index), an item that does not decode as its
/// kind, a namespace that contradicts `namespace`, or a resourceVersion (which only
/// stored objects have).
pub fn parse_manifests(
    source: &str,
    text: &str,
    namespace: Option<&str>,
) -> anyhow::Result<Vec<Manifest>> {
    let document: Value = serde_json::from_str(text).with_context(|| format!("parse {source}"))?;
    let is_list = document.get("items").is_some_and(Value::is_array)
        && document
            .get("kind")
            .and_then(Value::as_str)
            .is_none_or(|kind| kind.ends_with("List"));
    let manifests = if is_list {
        let Some(Value::Array(items)) = document.get("items").cloned() else {
            unreachable!("checked above")
        };
        items
            .into_iter()
            .enumerate()
            .map(|(index, item)| {
                parse_manifest(item, namespace).with_context(|| format!("{source}: item {index}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?
    } else {
        vec![parse_manifest(document, namespace).with_context(|| source.to_string())?]
    };
    anyhow::ensure!(!manifests.is_empty(), "{source}: no objects to create");
    Ok(manifests)
}

fn parse_manifest(value: Value, namespace: Option<&str>) -> anyhow::Result<Manifest> {
    anyhow::ensure!(value.is_object(), "not a JSON object");
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    Ok(match kind {
        "ReplicationController" => {
            Manifest::Controller(Box::new(decode_manifest(value, namespace)?))
        }
        "Pod" => Manifest::Pod(Box::new(decode_manifest(value, namespace)?)),
        "Service" => Manifest::Service(Box::new(decode_manifest(value, namespace)?)),
        "Endpoints" => Manifest::Endpoints(Box::new(decode_manifest(value, namespace)?)),
        "" => anyhow::bail!("no \"kind\" (one of ReplicationController, Pod, Service, Endpoints)"),
        other => anyhow::bail!(
            "unknown kind {other:?} (expected ReplicationController, Pod, Service or Endpoints)"
        ),
    })
}

fn decode_manifest<T: Object>(value: Value, namespace: Option<&str>) -> anyhow::Result<T> {
    let mut object: T =
        serde_json::from_value(value).with_context(|| format!("decode {}", T::KIND))?;
    let meta = object.metadata_mut();
    match namespace {
        Some(flag) if !meta.namespace.is_empty() && meta.namespace != flag => anyhow::bail!(
            "{} {:?} is in namespace {:?}, not --namespace {flag:?}",
            T::KIND,
            meta.name,
            meta.namespace
        ),
        _ if meta.namespace.is_empty() => {
            meta.namespace = namespace.unwrap_or(api::DEFAULT_NAMESPACE).to_string();
        }
        _ => {}
    }
    anyhow::ensure!(
        meta.resource_version.is_none(),
        "{} {:?}: metadata.resourceVersion may not be set on an object to be created",
        T::KIND,
        meta.name
    );
    Ok(object)
}

/// Reads the input of `-f`: a file, or stdin for `-`. Returns the name to use in
/// messages and the text.
fn read_input(path: &Path) -> anyhow::Result<(String, String)> {
    if path == Path::new("-") {
        let text = std::io::read_to_string(std::io::stdin()).context("read stdin")?;
        return Ok(("stdin".to_string(), text));
    }
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("read {name}"))?;
    Ok((name, text))
}

/// `kcm create -f FILE`: decodes and validates every object, then creates each
/// (create-if-absent), printing `replicationcontrollers/web created` per object.
///
/// # Errors
/// Bad input (nothing is written), etcd unreachable, or objects that could not be
/// created (`... already exists`); the others are still created.
pub async fn create(target: &Target, options: CreateOptions) -> anyhow::Result<()> {
    let (source, text) = read_input(&options.filename)?;
    let manifests = parse_manifests(&source, &text, options.namespace.as_deref())?;
    let invalid: Vec<String> = manifests
        .iter()
        .filter_map(|manifest| manifest.validate().err())
        .map(|e| e.to_string())
        .collect();
    anyhow::ensure!(invalid.is_empty(), "{}", invalid.join("; "));

    let (_client, registry) = target.connect().await?;
    let mut failures = Vec::new();
    for manifest in &manifests {
        match manifest.create(&registry).await {
            Ok(()) => emit(&format!("{} created\n", manifest.reference()))?,
            Err(e) => failures.push(format!("{e:#}")),
        }
    }
    match failures.len() {
        0 => Ok(()),
        1 => anyhow::bail!("{}", failures[0]),
        n => anyhow::bail!(
            "{n} of {} objects not created: {}",
            manifests.len(),
            failures.join("; ")
        ),
    }
}

async fn create_object<T: Object>(registry: &Registry, object: &T) -> anyhow::Result<()> {
    registry
        .create(object)
        .await
        .map(drop)
        .map_err(|e| storage_error::<T>(e, &object.metadata().name))
}

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

// ---------------------------------------------------------------------------------------
// get

/// A kind `kcm get` can print as a table.
pub trait Printable: Object {
    /// The column headers (without NAMESPACE).
    fn headers(wide: bool) -> Vec<&'static str>;
    /// One row, matching [`Printable::headers`]; `now` is the reference for AGE.
    fn cells(&self, wide: bool, now: SystemTime) -> Vec<String>;
}

impl Printable for ReplicationController {
    fn headers(wide: bool) -> Vec<&'static str> {
        let mut headers = vec!["NAME", "DESIRED", "CURRENT", "SELECTOR", "AGE"];
        if wide {
            headers.extend(["CONTAINERS", "IMAGES"]);
        }
        headers
    }

    fn cells(&self, wide: bool, now: SystemTime) -> Vec<String> {
        let mut cells = vec![
            self.metadata.name.clone(),
            self.spec.replicas.to_string(),
            self.status.replicas.to_string(),
            or_none(self.spec.selector.to_string()),
            age_of(&self.metadata, now),
        ];
        if wide {
            let containers = self
                .spec
                .template
                .as_ref()
                .map(|t| t.spec.containers.as_slice())
                .unwrap_or_default();
            cells.push(or_none(join(containers.iter().map(|c| c.name.as_str()))));
            cells.push(or_none(join(containers.iter().map(|c| c.image.as_str()))));
        }
        cells
    }
}

impl Printable for Pod {
    fn headers(wide: bool) -> Vec<&'static str> {
        let mut headers = vec!["NAME", "PHASE", "HOST", "IP", "AGE"];
        if wide {
            headers.extend(["IMAGES", "LABELS"]);
        }
        headers
    }

    fn cells(&self, wide: bool, now: SystemTime) -> Vec<String> {
        let mut cells = vec![
            self.metadata.name.clone(),
            self.phase().to_string(),
            or_none(pod_host(self).to_string()),
            or_none(self.pod_ip().unwrap_or_default().to_string()),
            age_of(&self.metadata, now),
        ];
        if wide {
            cells.push(or_none(join(
                self.spec.containers.iter().map(|c| c.image.as_str()),
            )));
            cells.push(or_none(self.metadata.labels.to_string()));
        }
        cells
    }
}

impl Printable for Service {
    fn headers(wide: bool) -> Vec<&'static str> {
        let mut headers = vec!["NAME", "SELECTOR", "PORT", "CONTAINER-PORT"];
        if wide {
            headers.extend(["AGE", "LABELS"]);
        }
        headers
    }

    fn cells(&self, wide: bool, now: SystemTime) -> Vec<String> {
        let protocol = match self.spec.protocol.as_str() {
            "" => "TCP",
            other => other,
        };
        let mut cells = vec![
            self.metadata.name.clone(),
            or_none(self.spec.selector.to_string()),
            format!("{}/{protocol}", self.spec.port),
            match &self.spec.container_port {
                Some(IntOrString::Int(port)) => port.to_string(),
                Some(IntOrString::String(name)) => or_none(name.clone()),
                None => NONE.to_string(),
            },
        ];
        if wide {
            cells.push(age_of(&self.metadata, now));
            cells.push(or_none(self.metadata.labels.to_string()));
        }
        cells
    }
}

impl Printable for Endpoints {
    fn headers(wide: bool) -> Vec<&'static str> {
        if wide {
            vec!["NAME", "ENDPOINTS", "AGE"]
        } else {
            vec!["NAME", "ENDPOINTS"]
        }
    }

    fn cells(&self, wide: bool, now: SystemTime) -> Vec<String> {
        let endpoints = if wide || self.endpoints.len() <= MAX_ENDPOINTS_SHOWN {
            join(self.endpoints.iter().map(String::as_str))
        } else {
            format!(
                "{} + {} more...",
                join(
                    self.endpoints[..MAX_ENDPOINTS_SHOWN]
                        .iter()
                        .map(String::as_str)
                ),
                self.endpoints.len() - MAX_ENDPOINTS_SHOWN
            )
        };
        let mut cells = vec![self.metadata.name.clone(), or_none(endpoints)];
        if wide {
            cells.push(age_of(&self.metadata, now));
        }
        cells
    }
}

/// The node a pod is bound to: `spec.host`, else what its status reports.
fn pod_host(pod: &Pod) -> &str {
    if pod.spec.host.is_empty() {
        pod.status.as_ref().map_or("", |s| s.host.as_str())
    } else {
        &pod.spec.host
    }
}

fn join<'a>(parts: impl Iterator<Item = &'a str>) -> String {
    parts.collect::<Vec<_>>().join(",")
}

fn or_none(text: String) -> String {
    if text.is_empty() {
        NONE.to_string()
    } else {
        text
    }
}

/// The table of `objects`: a NAMESPACE column first when `all_namespaces`.
pub fn render_objects<T: Printable>(
    objects: &[T],
    wide: bool,
    all_namespaces: bool,
    now: SystemTime,
) -> String {
    let mut headers = T::headers(wide);
    if all_namespaces {
        headers.insert(0, "NAMESPACE");
    }
    let rows: Vec<Vec<String>> = objects
        .iter()
        .map(|object| {
            let mut cells = object.cells(wide, now);
            if all_namespaces {
                cells.insert(0, object.metadata().namespace.clone());
            }
            cells
        })
        .collect();
    render_table(&headers, &rows)
}

/// Aligns `rows` under `headers`: each column as wide as its widest cell, columns three
/// spaces apart (kubectl's tabwriter padding), no trailing spaces.
pub fn render_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header_row: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    let mut out = String::new();
    for row in std::iter::once(&header_row).chain(rows) {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(&widths) {
            let _ = write!(line, "{cell:<width$}   ");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// AGE of an object: how long ago its `creationTimestamp` was.
fn age_of(meta: &ObjectMeta, now: SystemTime) -> String {
    age(meta.creation_timestamp.as_deref(), now)
}

/// kubectl's `ShortHumanDuration` of `now - created`: `12s`, `5m`, `3h`, `2d`, `3y`;
/// `<unknown>` without a timestamp, `<invalid>` for one that does not parse as RFC 3339
/// or lies more than a second in the future (a little clock skew reads as `0s`).
pub fn age(created: Option<&str>, now: SystemTime) -> String {
    let Some(created) = created else {
        return "<unknown>".to_string();
    };
    let Ok(created) = humantime::parse_rfc3339_weak(created) else {
        return "<invalid>".to_string();
    };
    let seconds = match now.duration_since(created) {
        Ok(elapsed) => elapsed.as_secs(),
        Err(e) if e.duration() < Duration::from_secs(2) => 0,
        Err(_) => return "<invalid>".to_string(),
    };
    let (minutes, hours) = (seconds / 60, seconds / 3600);
    if seconds < 60 {
        format!("{seconds}s")
    } else if minutes < 60 {
        format!("{minutes}m")
    } else if hours < 24 {
        format!("{hours}h")
    } else if hours < 24 * 365 {
        format!("{}d", hours / 24)
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

/// An object as printed by `-o json`: with its `kind` and `apiVersion`.
fn to_json<T: Object>(mut object: T) -> anyhow::Result<Value> {
    object.set_type_meta();
    serde_json::to_value(&object).with_context(|| format!("encode {}", T::KIND))
}

/// `kcm get KIND [NAME]`.
///
/// # Errors
/// `pods "x" not found`, a malformed NAME, or etcd failing. Malformed objects in a list
/// are warnings on stderr, not errors.
pub async fn get(target: &Target, options: GetOptions) -> anyhow::Result<()> {
    match options.kind {
        Kind::Pods => get_kind::<Pod>(target, &options).await,
        Kind::Replicationcontrollers => get_kind::<ReplicationController>(target, &options).await,
        Kind::Services => get_kind::<Service>(target, &options).await,
        Kind::Endpoints => get_kind::<Endpoints>(target, &options).await,
    }
}

async fn get_kind<T: Printable>(target: &Target, options: &GetOptions) -> anyhow::Result<()> {
    let (_client, registry) = target.connect().await?;
    let now = SystemTime::now();
    let wide = options.output == GetOutput::Wide;
    if let Some(name) = &options.name {
        let object: T = registry
            .get(&options.namespace, name)
            .await
            .map_err(|e| storage_error::<T>(e, name))?;
        return emit(&match options.output {
            GetOutput::Json => format!("{:#}\n", to_json(object)?),
            GetOutput::Table | GetOutput::Wide => render_objects(&[object], wide, false, now),
        });
    }
    let namespace = (!options.all_namespaces).then_some(options.namespace.as_str());
    let selector = options.selector.clone().unwrap_or_default();
    let list: ObjectList<T> = registry.list(namespace, &selector).await?;
    for error in &list.errors {
        eprintln!("kcm: warning: skipping {error}");
    }
    match options.output {
        GetOutput::Json => {
            let items = list
                .items
                .into_iter()
                .map(to_json)
                .collect::<anyhow::Result<Vec<_>>>()?;
            let document = json!({
                "kind": "List",
                "apiVersion": api::API_VERSION,
                "metadata": {"resourceVersion": list.resource_version.to_string()},
                "items": items,
            });
            emit(&format!("{document:#}\n"))
        }
        GetOutput::Table | GetOutput::Wide if list.items.is_empty() => {
            match namespace {
                Some(namespace) => eprintln!("No resources found in {namespace} namespace."),
                None => eprintln!("No resources found."),
            }
            Ok(())
        }
        GetOutput::Table | GetOutput::Wide => emit(&render_objects(
            &list.items,
            wide,
            options.all_namespaces,
            now,
        )),
    }
}

// ---------------------------------------------------------------------------------------
// resize, delete, stop

/// `kcm resize rc NAME --replicas N` (2014's `ResizeController`): sets `spec.replicas`
/// with a compare-and-swap retried on conflict.
///
/// # Errors
/// `replicationcontrollers "x" not found`, or etcd failing.
pub async fn resize(target: &Target, options: ResizeOptions) -> anyhow::Result<()> {
    let ResizeOptions {
        name,
        replicas,
        namespace,
    } = options;
    let (_client, registry) = target.connect().await?;
    set_replicas(&registry, &namespace, &name, replicas).await?;
    emit(&format!(
        "{}/{name} resized to {replicas}\n",
        ReplicationController::RESOURCE
    ))
}

async fn set_replicas(
    registry: &Registry,
    namespace: &str,
    name: &str,
    replicas: i64,
) -> anyhow::Result<ReplicationController> {
    registry
        .guaranteed_update::<ReplicationController, _>(namespace, name, |mut rc| {
            rc.spec.replicas = replicas;
            Ok(rc)
        })
        .await
        .map_err(|e| storage_error::<ReplicationController>(e, name))
}

/// `kcm delete KIND NAME`. Deleting a controller leaves its pods; a note on stderr says
/// so when it had replicas.
///
/// # Errors
/// `pods "x" not found`, or etcd failing.
pub async fn delete(target: &Target, options: DeleteOptions) -> anyhow::Result<()> {
    let (_client, registry) = target.connect().await?;
    let (namespace, name) = (options.namespace.as_str(), options.name.as_str());
    match options.kind {
        Kind::Pods => delete_kind::<Pod>(&registry, namespace, name).await,
        Kind::Services => delete_kind::<Service>(&registry, namespace, name).await,
        Kind::Endpoints => delete_kind::<Endpoints>(&registry, namespace, name).await,
        Kind::Replicationcontrollers => {
            // Read first only for the note; the delete itself is unconditional.
            let before = registry
                .get::<ReplicationController>(namespace, name)
                .await
                .ok();
            delete_kind::<ReplicationController>(&registry, namespace, name).await?;
            if let Some(rc) = before.filter(|rc| rc.spec.replicas > 0 || rc.status.replicas > 0) {
                eprintln!(
                    "kcm: note: pods matching its selector {} are left running; \
                     `kcm stop rc` deletes a controller together with its pods",
                    rc.spec.selector
                );
            }
            Ok(())
        }
    }
}

async fn delete_kind<T: Object>(
    registry: &Registry,
    namespace: &str,
    name: &str,
) -> anyhow::Result<()> {
    registry
        .delete::<T>(namespace, name, None)
        .await
        .map_err(|e| storage_error::<T>(e, name))?;
    emit(&format!("{}/{name} deleted\n", T::RESOURCE))
}

/// `kcm stop rc NAME` (2014's `StopController`): resizes the controller to 0, waits until
/// no active pod matches its selector (the replication manager deletes them; Failed and
/// Succeeded pods are never deleted by it, so they are not waited for), then deletes the
/// controller.
///
/// # Errors
/// Not found; an invalid controller (the manager ignores it, so its pods would never
/// go); pods still active after `--timeout` (the controller is left at 0 replicas); etcd
/// failing.
pub async fn stop(target: &Target, options: StopOptions) -> anyhow::Result<()> {
    let StopOptions {
        name,
        namespace,
        timeout,
    } = options;
    let reference = format!("{}/{name}", ReplicationController::RESOURCE);
    let (_client, registry) = target.connect().await?;
    let rc: ReplicationController = registry
        .get(&namespace, &name)
        .await
        .map_err(|e| storage_error::<ReplicationController>(e, &name))?;
    if let Err(e) = api::validate(&rc) {
        anyhow::bail!(
            "cannot stop {reference}: {e}; the controller-manager ignores it, so its pods \
             would not be deleted (`kcm delete rc {name}` deletes just the controller)"
        );
    }
    let rc = set_replicas(&registry, &namespace, &name, 0).await?;
    let selector = rc.spec.selector.as_selector();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let pods: ObjectList<Pod> = registry
            .list(Some(&namespace), &selector)
            .await
            .with_context(|| format!("list the pods of {reference}"))?;
        let active: Vec<&str> = pods
            .items
            .iter()
            .filter(|pod| pod.is_active())
            .map(|pod| pod.metadata.name.as_str())
            .collect();
        if active.is_empty() {
            break;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            anyhow::bail!(
                "timed out after {} waiting for the pods of {reference} to be deleted: \
                 {} active {} remain ({}); is a controller-manager running? \
                 The controller is left with 0 replicas",
                humantime::format_duration(timeout),
                active.len(),
                if active.len() == 1 { "pod" } else { "pods" },
                summarize_names(&active)
            );
        }
        tokio::time::sleep(STOP_POLL_INTERVAL.min(deadline - now)).await;
    }
    match registry
        .delete::<ReplicationController>(&namespace, &name, None)
        .await
    {
        // Someone else deleted it meanwhile: it is stopped all the same.
        Ok(_) | Err(StorageError::NotFound { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    emit(&format!("{reference} stopped\n"))
}

/// `a, b, c and 4 more`.
fn summarize_names(names: &[&str]) -> String {
    const SHOWN: usize = 3;
    let shown = names[..names.len().min(SHOWN)].join(", ");
    if names.len() > SHOWN {
        format!("{shown} and {} more", names.len() - SHOWN)
    } else {
        shown
    }
}

// ---------------------------------------------------------------------------------------
// run

/// The controller (and, with `--expose`, the service) `kcm run` creates, as 2014's
/// `RunController` built them: everything labelled and selected by `name=NAME`.
pub fn run_objects(options: &RunOptions) -> (ReplicationController, Option<Service>) {
    let labels: Set = [("name", options.name.as_str())].into_iter().collect();
    let meta = ObjectMeta {
        labels: labels.clone(),
        ..ObjectMeta::named(&options.namespace, &options.name)
    };
    let ports = options
        .port
        .map(|port| ContainerPort {
            name: "http".to_string(),
            container_port: i64::from(port),
            protocol: "TCP".to_string(),
            ..ContainerPort::default()
        })
        .into_iter()
        .collect();
    let controller = ReplicationController {
        metadata: meta.clone(),
        spec: ReplicationControllerSpec {
            replicas: options.replicas,
            selector: labels.clone(),
            template: Some(PodTemplateSpec {
                metadata: ObjectMeta {
                    labels: labels.clone(),
                    ..ObjectMeta::default()
                },
                spec: PodSpec {
                    containers: vec![Container {
                        name: options.name.clone(),
                        image: options.image.clone(),
                        ports,
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                },
                ..PodTemplateSpec::default()
            }),
            ..ReplicationControllerSpec::default()
        },
        ..ReplicationController::default()
    };
    let service = match (options.expose, options.port) {
        (true, Some(port)) => Some(Service {
            metadata: meta,
            spec: ServiceSpec {
                selector: labels,
                port: i64::from(options.service_port.unwrap_or(port)),
                protocol: "TCP".to_string(),
                container_port: Some(IntOrString::Int(i64::from(port))),
                ..ServiceSpec::default()
            },
            ..Service::default()
        }),
        _ => None,
    };
    (controller, service)
}

/// `kcm run NAME --image IMG`: creates the controller, and with `--expose` its service.
/// Both are validated before either is written.
///
/// # Errors
/// An invalid name or image, `... already exists`, or etcd failing.
pub async fn run(target: &Target, options: RunOptions) -> anyhow::Result<()> {
    anyhow::ensure!(
        !options.image.trim().is_empty(),
        "--image must not be empty"
    );
    let (controller, service) = run_objects(&options);
    api::validate(&controller)?;
    if let Some(service) = &service {
        api::validate(service)?;
    }
    let (_client, registry) = target.connect().await?;
    create_object(&registry, &controller).await?;
    emit(&format!("{} created\n", reference(&controller)))?;
    if let Some(service) = &service {
        create_object(&registry, service).await.with_context(|| {
            format!(
                "{} was created, but not its service",
                reference(&controller)
            )
        })?;
        emit(&format!("{} created\n", reference(service)))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// describe

/// `kcm describe rc NAME`: the controller's spec and status, its pods, and what looks
/// wrong.
///
/// # Errors
/// Not found, a malformed controller, or etcd failing.
pub async fn describe(target: &Target, options: DescribeOptions) -> anyhow::Result<()> {
    let DescribeOptions { name, namespace } = options;
    let (_client, registry) = target.connect().await?;
    let rc: ReplicationController = registry
        .get(&namespace, &name)
        .await
        .map_err(|e| storage_error::<ReplicationController>(e, &name))?;
    // An empty selector would match every pod in the namespace; such a controller is
    // invalid and owns none.
    let pods = if rc.spec.selector.is_empty() {
        None
    } else {
        Some(
            registry
                .list::<Pod>(Some(&namespace), &rc.spec.selector.as_selector())
                .await
                .context("list its pods")?,
        )
    };
    emit(&describe_controller(&rc, pods.as_ref(), SystemTime::now()))
}

/// The text of `kcm describe rc`: `pods` are those matching the selector (`None` when the
/// selector is empty).
pub fn describe_controller(
    rc: &ReplicationController,
    pods: Option<&ObjectList<Pod>>,
    now: SystemTime,
) -> String {
    let mut out = String::new();
    let meta = &rc.metadata;
    let field = |out: &mut String, label: &str, value: &str| {
        let _ = writeln!(out, "{:<14}{value}", format!("{label}:"));
    };
    field(&mut out, "Name", &meta.name);
    field(&mut out, "Namespace", &meta.namespace);
    field(&mut out, "Labels", &or_none(meta.labels.to_string()));
    field(&mut out, "Selector", &or_none(rc.spec.selector.to_string()));
    field(
        &mut out,
        "Replicas",
        &format!(
            "{} desired, {} current",
            rc.spec.replicas, rc.status.replicas
        ),
    );
    let created = match &meta.creation_timestamp {
        Some(timestamp) => format!("{timestamp} ({} ago)", age_of(meta, now)),
        None => NONE.to_string(),
    };
    field(&mut out, "Created", &created);

    match &rc.spec.template {
        None => field(&mut out, "Pod Template", NONE),
        Some(template) => {
            out.push_str("Pod Template:\n");
            let _ = writeln!(
                out,
                "  {:<12}{}",
                "Labels:",
                or_none(template.metadata.labels.to_string())
            );
            if template.spec.containers.is_empty() {
                let _ = writeln!(out, "  {:<12}{NONE}", "Containers:");
            } else {
                out.push_str("  Containers:\n");
            }
            for container in &template.spec.containers {
                let _ = writeln!(out, "    {}:", or_none(container.name.clone()));
                let _ = writeln!(
                    out,
                    "      {:<8}{}",
                    "Image:",
                    or_none(container.image.clone())
                );
                let ports: Vec<String> = container.ports.iter().map(port_text).collect();
                let _ = writeln!(out, "      {:<8}{}", "Ports:", or_none(ports.join(", ")));
            }
        }
    }

    let mut problems = Vec::new();
    if let Err(e) = api::validate(rc) {
        problems.push(format!("the controller-manager skips this controller: {e}"));
    }
    match pods {
        None => field(&mut out, "Pods", "<none> (no selector)"),
        Some(pods) => {
            let active = pods.items.iter().filter(|p| p.is_active()).count();
            let failed: Vec<&Pod> = pods
                .items
                .iter()
                .filter(|p| p.phase() == PodPhase::Failed)
                .collect();
            field(
                &mut out,
                "Pods",
                &format!(
                    "{active} active, {} failed, {} in all",
                    failed.len(),
                    pods.items.len()
                ),
            );
            if !pods.items.is_empty() {
                let rows: Vec<Vec<String>> = pods
                    .items
                    .iter()
                    .map(|pod| {
                        vec![
                            pod.metadata.name.clone(),
                            pod.phase().to_string(),
                            or_none(pod_host(pod).to_string()),
                            or_none(pod.pod_ip().unwrap_or_default().to_string()),
                            age_of(&pod.metadata, now),
                        ]
                    })
                    .collect();
                let table = render_table(&["NAME", "PHASE", "HOST", "IP", "AGE"], &rows);
                for line in table.lines() {
                    let _ = writeln!(out, "  {line}");
                }
            }
            for pod in failed {
                problems.push(format!(
                    "pod {} Failed (the manager replaces it but does not delete it)",
                    pod.metadata.name
                ));
            }
            for error in &pods.errors {
                problems.push(format!("{error}"));
            }
        }
    }
    if rc.spec.replicas != rc.status.replicas {
        problems.push(format!(
            "{} replicas desired but {} current: the replication manager has not caught \
             up yet; is `kcm controller-manager` running?",
            rc.spec.replicas, rc.status.replicas
        ));
    }
    if problems.is_empty() {
        field(&mut out, "Problems", NONE);
    } else {
        out.push_str("Problems:\n");
        for problem in problems {
            let _ = writeln!(out, "  - {problem}");
        }
    }
    out
}

/// `80/TCP (http)`.
fn port_text(port: &ContainerPort) -> String {
    let protocol = if port.protocol.is_empty() {
        "TCP"
    } else {
        &port.protocol
    };
    if port.name.is_empty() {
        format!("{}/{protocol}", port.container_port)
    } else {
        format!("{}/{protocol} ({})", port.container_port, port.name)
    }
}

// ---------------------------------------------------------------------------------------
// watch

/// `kcm watch KIND [NAME]`: prints the typed events of one kind until the process ends;
/// resumes after a disconnect and lists again after compaction, saying so on stderr.
///
/// # Errors
/// A NAME with `--all-namespaces` or `--selector`, etcd unreachable at start, or the
/// watch failing for good (e.g. its starting revision was compacted).
pub async fn watch(target: &Target, options: WatchOptions) -> anyhow::Result<()> {
    match options.kind {
        Kind::Pods => watch_kind::<Pod>(target, options).await,
        Kind::Replicationcontrollers => watch_kind::<ReplicationController>(target, options).await,
        Kind::Services => watch_kind::<Service>(target, options).await,
        Kind::Endpoints => watch_kind::<Endpoints>(target, options).await,
    }
}

async fn watch_kind<T: Object>(target: &Target, options: WatchOptions) -> anyhow::Result<()> {
    let (client, registry) = target.connect().await?;
    let watcher = Watcher::new(&client, registry);
    let filter = etcd_watcher::selector_filter::<T>(options.selector.clone().unwrap_or_default());
    let mut watch = match &options.name {
        Some(name) => {
            anyhow::ensure!(
                !options.all_namespaces,
                "a NAME needs one namespace; drop --all-namespaces"
            );
            anyhow::ensure!(
                options.selector.is_none(),
                "a NAME names one object; drop --selector"
            );
            watcher.resumable_object::<T>(&options.namespace, name, &options.resource_version)?
        }
        None => {
            let namespace = (!options.all_namespaces).then_some(options.namespace.as_str());
            watcher.resumable_list::<T>(namespace, &options.resource_version, filter)?
        }
    };
    let mut stdout = std::io::stdout().lock();
    loop {
        match watch.next().await {
            Update::Event(event, raw) => {
                print_event(&mut stdout, &event, raw.as_ref(), &options)
                    .context("write to stdout")?;
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
    options: &WatchOptions,
) -> std::io::Result<()> {
    match options.output {
        WatchOutput::Text => {
            if options.raw {
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
            if options.raw {
                value["raw"] = serde_json::to_value(raw).map_err(std::io::Error::other)?;
            }
            writeln!(out, "{value}")?;
        }
    }
    out.flush()
}

// ---------------------------------------------------------------------------------------
// Output

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
mod tests {
    use super::*;
    use crate::api::{PodStatus, ResourceVersion};
    use crate::registry::DecodeError;

    const NOW: &str = "2024-03-10T12:00:00Z";

    fn now() -> SystemTime {
        humantime::parse_rfc3339(NOW).unwrap()
    }

    #[track_caller]
    fn check_age(created: Option<&str>, expected: &str) {
        assert_eq!(age(created, now()), expected, "age of {created:?}");
    }

    #[test]
    fn age_is_kubectls_short_human_duration() {
        check_age(Some("2024-03-10T12:00:00Z"), "0s");
        check_age(Some("2024-03-10T11:59:48Z"), "12s");
        check_age(Some("2024-03-10T11:59:00Z"), "1m");
        check_age(Some("2024-03-10T11:55:00.5Z"), "4m");
        check_age(Some("2024-03-10T09:00:00Z"), "3h");
        check_age(Some("2024-03-09T12:00:01Z"), "23h");
        check_age(Some("2024-03-08T12:00:00Z"), "2d");
        check_age(Some("2021-03-10T12:00:00Z"), "3y");
        // A second of clock skew is "now"; more is a bad timestamp.
        check_age(Some("2024-03-10T12:00:01Z"), "0s");
        check_age(Some("2024-03-10T12:05:00Z"), "<invalid>");
        check_age(Some("yesterday"), "<invalid>");
        check_age(None, "<unknown>");
    }

    #[test]
    fn table_columns_are_aligned_without_trailing_spaces() {
        let rows = vec![
            vec!["web".to_string(), "3".to_string(), String::new()],
            vec![
                "a-longer-name".to_string(),
                "10".to_string(),
                "x".to_string(),
            ],
        ];
        assert_eq!(
            render_table(&["NAME", "DESIRED", "LAST"], &rows),
            "NAME            DESIRED   LAST\n\
             web             3\n\
             a-longer-name   10        x\n"
        );
        assert_eq!(render_table(&["NAME"], &[]), "NAME\n");
    }

    fn controller(value: Value) -> ReplicationController {
        serde_json::from_value(value).unwrap()
    }

    fn web_controller() -> ReplicationController {
        controller(json!({
            "metadata": {"name": "web", "namespace": "default",
                "creationTimestamp": "2024-03-10T11:55:00Z"},
            "spec": {"replicas": 3, "selector": {"name": "web"},
                "template": {"metadata": {"labels": {"name": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx",
                        "ports": [{"name": "http", "containerPort": 80}]}]}}},
            "status": {"replicas": 2}
        }))
    }

    fn pod(name: &str, phase: PodPhase, host: &str, ip: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: "prod".into(),
                creation_timestamp: Some("2024-03-10T11:59:30Z".into()),
                labels: [("name", "web")].into_iter().collect(),
                ..ObjectMeta::named("prod", name)
            },
            spec: PodSpec {
                containers: vec![Container {
                    image: "nginx:1.7".into(),
                    ..Container::default()
                }],
                ..PodSpec::default()
            },
            status: Some(PodStatus {
                phase,
                host: host.into(),
                pod_ip: ip.into(),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn controller_table_and_wide_and_all_namespaces() {
        let rc = web_controller();
        assert_eq!(
            render_objects(std::slice::from_ref(&rc), false, false, now()),
            "NAME   DESIRED   CURRENT   SELECTOR   AGE\n\
             web    3         2         name=web   5m\n"
        );
        assert_eq!(
            render_objects(&[rc], true, true, now()),
            "NAMESPACE   NAME   DESIRED   CURRENT   SELECTOR   AGE   CONTAINERS   IMAGES\n\
             default     web    3         2         name=web   5m    web          nginx\n"
        );
    }

    #[test]
    fn pod_table_shows_phase_host_and_ip() {
        let pods = [
            pod("web-1", PodPhase::Running, "node-1", "10.0.0.7"),
            pod("web-2", PodPhase::Pending, "", ""),
        ];
        assert_eq!(
            render_objects(&pods, false, false, now()),
            "NAME    PHASE     HOST     IP         AGE\n\
             web-1   Running   node-1   10.0.0.7   30s\n\
             web-2   Pending   <none>   <none>     30s\n"
        );
        assert_eq!(
            render_objects(&pods[..1], true, false, now()),
            "NAME    PHASE     HOST     IP         AGE   IMAGES      LABELS\n\
             web-1   Running   node-1   10.0.0.7   30s   nginx:1.7   name=web\n"
        );
    }

    #[test]
    fn service_and_endpoints_tables() {
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"name": "web"}, "port": 8080, "containerPort": "http"}
        }))
        .unwrap();
        assert_eq!(
            render_objects(&[service], false, false, now()),
            "NAME   SELECTOR   PORT       CONTAINER-PORT\n\
             web    name=web   8080/TCP   http\n"
        );
        let endpoints: Endpoints = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default"},
            "endpoints": ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80"]
        }))
        .unwrap();
        let empty = Endpoints {
            metadata: ObjectMeta::named("default", "db"),
            ..Endpoints::default()
        };
        assert_eq!(
            render_objects(&[endpoints.clone(), empty], false, false, now()),
            "NAME   ENDPOINTS\n\
             web    10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 1 more...\n\
             db     <none>\n"
        );
        assert!(render_objects(&[endpoints], true, false, now()).contains("10.0.0.4:80"));
    }

    #[track_caller]
    fn check_parse_error(text: &str, namespace: Option<&str>, expected: &str) {
        let err = parse_manifests("in.json", text, namespace).unwrap_err();
        let message = format!("{err:#}");
        assert!(
            message.contains(expected),
            "{message:?} should contain {expected:?}"
        );
    }

    #[test]
    fn manifests_dispatch_on_kind_and_default_the_namespace() {
        let text = r#"{"kind": "List", "items": [
            {"kind": "Service", "metadata": {"name": "web"}, "spec": {"port": 80}},
            {"kind": "Pod", "metadata": {"name": "p", "namespace": "prod"}},
            {"kind": "Endpoints", "metadata": {"name": "web"}}
        ]}"#;
        let manifests = parse_manifests("in.json", text, None).unwrap();
        let references: Vec<String> = manifests.iter().map(Manifest::reference).collect();
        assert_eq!(references, ["services/web", "pods/p", "endpoints/web"]);
        let Manifest::Service(service) = &manifests[0] else {
            panic!("not a service")
        };
        assert_eq!(service.metadata.namespace, "default");
        let Manifest::Pod(pod) = &manifests[1] else {
            panic!("not a pod")
        };
        assert_eq!(pod.metadata.namespace, "prod");

        let single = r#"{"kind": "ReplicationController", "metadata": {"name": "web"}}"#;
        let manifests = parse_manifests("in.json", single, Some("staging")).unwrap();
        let Manifest::Controller(rc) = &manifests[0] else {
            panic!("not a controller")
        };
        assert_eq!(rc.metadata.key(), "staging/web");
        // A list without a kind is a list too.
        assert_eq!(
            parse_manifests("in.json", r#"{"items": [{"kind": "Pod"}]}"#, None)
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn manifest_errors_name_the_source_the_item_and_the_problem() {
        check_parse_error(
            "{\"kind\": \n",
            None,
            "parse in.json: EOF while parsing a value at line 2 column 0",
        );
        check_parse_error(
            r#"{"items": [{"kind": "Pod"}, {"kind": "Widget"}]}"#,
            None,
            "in.json: item 1: unknown kind \"Widget\"",
        );
        check_parse_error(r#"{"metadata": {}}"#, None, "in.json: no \"kind\"");
        check_parse_error(r#"{"items": [7]}"#, None, "item 0: not a JSON object");
        check_parse_error(r#"{"items": []}"#, None, "in.json: no objects to create");
        check_parse_error(
            r#"{"kind": "Pod", "status": {"phase": "Waiting"}}"#,
            None,
            "in.json: decode Pod: unknown variant `Waiting`",
        );
        check_parse_error(
            r#"{"kind": "Pod", "metadata": {"name": "p", "namespace": "a"}}"#,
            Some("b"),
            "Pod \"p\" is in namespace \"a\", not --namespace \"b\"",
        );
        check_parse_error(
            r#"{"kind": "Pod", "metadata": {"name": "p", "resourceVersion": "5"}}"#,
            None,
            "resourceVersion may not be set",
        );
    }

    #[test]
    fn run_builds_valid_objects_selected_by_name() {
        let args = RunOptions {
            name: "web".into(),
            image: "nginx".into(),
            replicas: 2,
            port: Some(80),
            expose: true,
            service_port: Some(8080),
            namespace: "default".into(),
        };
        let (rc, service) = run_objects(&args);
        api::validate(&rc).unwrap();
        let service = service.expect("--expose makes a service");
        api::validate(&service).unwrap();
        assert_eq!(rc.spec.selector.to_string(), "name=web");
        let template = rc.spec.template.as_ref().unwrap();
        assert_eq!(template.metadata.labels.to_string(), "name=web");
        let container = &template.spec.containers[0];
        assert_eq!(
            (container.name.as_str(), container.image.as_str()),
            ("web", "nginx")
        );
        assert_eq!(port_text(&container.ports[0]), "80/TCP (http)");
        assert_eq!(service.spec.port, 8080);
        assert_eq!(service.spec.container_port, Some(IntOrString::Int(80)));
        assert_eq!(service.spec.selector.to_string(), "name=web");

        let (rc, service) = run_objects(&RunOptions {
            port: None,
            expose: false,
            service_port: None,
            ..args
        });
        assert!(service.is_none());
        assert!(rc.spec.template.unwrap().spec.containers[0]
            .ports
            .is_empty());
    }

    #[test]
    fn describe_shows_spec_pods_and_problems() {
        let rc = web_controller();
        let pods = ObjectList {
            items: vec![
                pod("web-1", PodPhase::Running, "node-1", "10.0.0.7"),
                pod("web-2", PodPhase::Failed, "node-2", ""),
            ],
            resource_version: ResourceVersion(9),
            errors: vec![DecodeError {
                kind: "Pod",
                key: "/registry/pods/default/junk".into(),
                revision: 4,
                message: "expected value".into(),
            }],
        };
        let text = describe_controller(&rc, Some(&pods), now());
        let expected = "\
Name:         web
Namespace:    default
Labels:       <none>
Selector:     name=web
Replicas:     3 desired, 2 current
Created:      2024-03-10T11:55:00Z (5m ago)
Pod Template:
  Labels:     name=web
  Containers:
    web:
      Image:  nginx
      Ports:  80/TCP (http)
Pods:         1 active, 1 failed, 2 in all
  NAME    PHASE     HOST     IP         AGE
  web-1   Running   node-1   10.0.0.7   30s
  web-2   Failed    node-2   <none>     30s
Problems:
  - pod web-2 Failed (the manager replaces it but does not delete it)
  - malformed Pod at /registry/pods/default/junk (revision 4): expected value
  - 3 replicas desired but 2 current: the replication manager has not caught up yet; is `kcm controller-manager` running?
";
        assert_eq!(text, expected);
    }

    #[test]
    fn describe_reports_an_invalid_spec() {
        let mut rc = web_controller();
        rc.spec.selector = Set::new();
        rc.status.replicas = 3;
        let text = describe_controller(&rc, None, now());
        assert!(
            text.contains("Pods:         <none> (no selector)\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "  - the controller-manager skips this controller: invalid \
                 ReplicationController \"default/web\": spec.selector: required"
            ),
            "{text}"
        );
        assert!(!text.contains("desired but"), "{text}");
    }
}
