//! `kcm get` and the tables: `Printable` for each kind, `render_table`, kubectl's `age`;
//! 2014's `pkg/kubecfg/resource_printer.go`. The formatting is pure.

use super::*;

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
            cells.extend(container_cells(self.spec.template.as_ref()));
        }
        cells
    }
}

/// The wide CONTAINERS and IMAGES cells of a controller's template.
fn container_cells(template: Option<&PodTemplateSpec>) -> [String; 2] {
    let containers = template
        .map(|t| t.spec.containers.as_slice())
        .unwrap_or_default();
    [
        or_none(join(containers.iter().map(|c| c.name.as_str()))),
        or_none(join(containers.iter().map(|c| c.image.as_str()))),
    ]
}

/// A ReplicaSet's selector in selector syntax (`app=web,tier in (front)`), `<none>` when
/// missing or unreadable.
pub(super) fn selector_text(rs: &ReplicaSet) -> String {
    label_selector_text(rs.spec.selector.as_ref())
}

/// A label selector in selector syntax, `<none>` when missing or unreadable.
pub(super) fn label_selector_text(selector: Option<&api::LabelSelector>) -> String {
    let selector = selector
        .and_then(|s| s.to_selector().ok())
        .map(|s| s.to_string())
        .unwrap_or_default();
    or_none(selector)
}

impl Printable for ReplicaSet {
    fn headers(wide: bool) -> Vec<&'static str> {
        let mut headers = vec!["NAME", "DESIRED", "CURRENT", "READY", "AGE"];
        if wide {
            headers.extend(["CONTAINERS", "IMAGES", "SELECTOR"]);
        }
        headers
    }

    fn cells(&self, wide: bool, now: SystemTime) -> Vec<String> {
        let mut cells = vec![
            self.metadata.name.clone(),
            self.replicas().to_string(),
            self.status.replicas.to_string(),
            self.status.ready_replicas.to_string(),
            age_of(&self.metadata, now),
        ];
        if wide {
            cells.extend(container_cells(self.spec.template.as_ref()));
            cells.push(selector_text(self));
        }
        cells
    }
}

impl Printable for Deployment {
    fn headers(wide: bool) -> Vec<&'static str> {
        let mut headers = vec!["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"];
        if wide {
            headers.extend(["CONTAINERS", "IMAGES", "SELECTOR"]);
        }
        headers
    }

    fn cells(&self, wide: bool, now: SystemTime) -> Vec<String> {
        let status = &self.status;
        let mut cells = vec![
            self.metadata.name.clone(),
            format!("{}/{}", status.ready_replicas, self.replicas()),
            status.updated_replicas.to_string(),
            status.available_replicas.to_string(),
            age_of(&self.metadata, now),
        ];
        if wide {
            cells.extend(container_cells(self.spec.template.as_ref()));
            cells.push(label_selector_text(self.spec.selector.as_ref()));
        }
        cells
    }
}

impl Printable for Pod {
    fn headers(wide: bool) -> Vec<&'static str> {
        let mut headers = vec!["NAME", "READY", "STATUS", "RESTARTS", "HOST", "IP", "AGE"];
        if wide {
            headers.extend(["IMAGES", "LABELS"]);
        }
        headers
    }

    fn cells(&self, wide: bool, now: SystemTime) -> Vec<String> {
        let summary = PodSummary::of(self);
        let mut cells = vec![
            self.metadata.name.clone(),
            format!("{}/{}", summary.ready, summary.containers),
            summary.status,
            summary.restarts.to_string(),
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

/// What kubectl's pod table shows of a pod's containers (`printPod`).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct PodSummary {
    /// Containers ready and running.
    pub ready: usize,
    /// Containers in the spec.
    pub containers: usize,
    /// The phase, or the reason of a waiting (`ImagePullBackOff`, `CrashLoopBackOff`) or
    /// terminated container (the first container's wins), or `Terminating`.
    pub status: String,
    /// Restarts of every container.
    pub restarts: i64,
}

impl PodSummary {
    pub fn of(pod: &Pod) -> PodSummary {
        let containers = pod.spec.containers.len();
        let statuses = pod
            .status
            .as_ref()
            .map(|s| s.container_statuses.as_slice())
            .unwrap_or_default();
        let mut status = pod.phase().to_string();
        let (mut ready, mut restarts) = (0, 0);
        for container in statuses.iter().rev() {
            restarts += container.restart_count;
            let state = &container.state;
            if let Some(reason) = state.waiting_reason() {
                status = reason.to_string();
            } else if let Some(terminated) = &state.terminated {
                status = if terminated.reason.is_empty() {
                    format!("ExitCode:{}", terminated.exit_code)
                } else {
                    terminated.reason.clone()
                };
            } else if container.ready && state.running.is_some() {
                ready += 1;
            }
        }
        // A pod that reports no containers (a 2014 document) is as ready as its phase says.
        if statuses.is_empty() && pod.is_ready() {
            ready = containers;
        }
        if pod.metadata.deletion_timestamp.is_some() {
            status = "Terminating".to_string();
        }
        PodSummary {
            ready,
            containers,
            status,
            restarts,
        }
    }
}

/// The node a pod is bound to: `spec.host`, else what its status reports.
pub(super) fn pod_host(pod: &Pod) -> &str {
    if pod.spec.host.is_empty() {
        pod.status.as_ref().map_or("", |s| s.host.as_str())
    } else {
        &pod.spec.host
    }
}

pub(super) fn join<'a>(parts: impl Iterator<Item = &'a str>) -> String {
    parts.collect::<Vec<_>>().join(",")
}

pub(super) fn or_none(text: String) -> String {
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
    render_objects_as(objects, wide, all_namespaces, false, now)
}

/// [`render_objects`], with names prefixed by kubectl's kind (`replicaset.apps/web`) when
/// `show_kind`, as `kcm get rs,rc` prints them.
pub fn render_objects_as<T: Printable>(
    objects: &[T],
    wide: bool,
    all_namespaces: bool,
    show_kind: bool,
    now: SystemTime,
) -> String {
    let mut headers = T::headers(wide);
    if wide {
        headers.extend(OWNERSHIP_HEADERS);
    }
    if all_namespaces {
        headers.insert(0, "NAMESPACE");
    }
    let rows: Vec<Vec<String>> = objects
        .iter()
        .map(|object| {
            let mut cells = object.cells(wide, now);
            if wide {
                cells.extend(ownership_cells(object.metadata(), now));
            }
            if show_kind {
                cells[0] = kind_reference::<T>(&cells[0]);
            }
            if all_namespaces {
                cells.insert(0, object.metadata().namespace.clone());
            }
            cells
        })
        .collect();
    render_table(&headers, &rows)
}

/// The last columns of every `-o wide` table: what the garbage collector reads.
const OWNERSHIP_HEADERS: [&str; 3] = ["OWNER", "FINALIZERS", "DELETING"];

/// An object's OWNER (its controller reference as `Kind/name`, `+N` for its other
/// owners), FINALIZERS, and DELETING (how long ago its `deletionTimestamp` was set), each
/// `<none>` when empty.
pub(super) fn ownership_cells(meta: &ObjectMeta, now: SystemTime) -> [String; 3] {
    let others = meta
        .owner_references
        .iter()
        .filter(|r| !r.is_controller())
        .count();
    let owner = match (api::controller_of(meta), others) {
        (Some(c), 0) => format!("{}/{}", c.kind, c.name),
        (Some(c), n) => format!("{}/{}+{n}", c.kind, c.name),
        (None, 0) => String::new(),
        (None, n) => format!("+{n}"),
    };
    [
        or_none(owner),
        or_none(meta.finalizers.join(",")),
        meta.deletion_timestamp
            .as_deref()
            .map_or_else(|| "<none>".to_string(), |at| age(Some(at), now)),
    ]
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
pub(super) fn age_of(meta: &ObjectMeta, now: SystemTime) -> String {
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
pub(super) fn to_json<T: Object>(mut object: T) -> anyhow::Result<Value> {
    object.set_type_meta();
    serde_json::to_value(&object).with_context(|| format!("encode {}", T::KIND))
}

/// What `kcm get` read of one kind: the rendered table (without a trailing blank line)
/// or the JSON objects.
struct Part {
    /// Rows rendered, `None` when nothing matched (then the table is not printed).
    table: Option<String>,
    /// The objects, for `-o json`.
    items: Vec<Value>,
    /// The etcd revision of the read.
    resource_version: i64,
    /// The named object is not stored: kubectl's `replicasets "web" not found`.
    missing: Option<String>,
}

/// `kcm get KIND[,KIND...] [NAME]`: one table per kind, separated by a blank line; with
/// more than one kind, names carry kubectl's kind prefix (`replicaset.apps/web`) and
/// `-o json` prints one `List` of everything.
///
/// # Errors
/// `pods "x" not found`, a malformed NAME, or etcd failing. Malformed objects in a list
/// are warnings on stderr, not errors.
pub async fn get(target: &Target, options: GetOptions) -> anyhow::Result<()> {
    let (_client, registry) = target.connect().await?;
    let show_kind = options.kinds.len() > 1;
    let mut parts = Vec::with_capacity(options.kinds.len());
    for kind in &options.kinds {
        let part = match kind {
            Kind::Pods => read_kind::<Pod>(&registry, &options, show_kind).await,
            Kind::Replicationcontrollers => {
                read_kind::<ReplicationController>(&registry, &options, show_kind).await
            }
            Kind::Replicasets => read_kind::<ReplicaSet>(&registry, &options, show_kind).await,
            Kind::Deployments => read_kind::<Deployment>(&registry, &options, show_kind).await,
            Kind::Services => read_kind::<Service>(&registry, &options, show_kind).await,
            Kind::Endpoints => read_kind::<Endpoints>(&registry, &options, show_kind).await,
        }?;
        parts.push(part);
    }
    // Like kubectl, what was found is printed and what was not is the error (exit 1).
    let missing: Vec<String> = parts.iter().filter_map(|p| p.missing.clone()).collect();
    let result = if missing.is_empty() {
        Ok(())
    } else {
        Err(anyhow::anyhow!(missing.join("; ")))
    };
    if missing.len() == parts.len() {
        return result;
    }
    parts.retain(|p| p.missing.is_none());
    print_parts(parts, &options)?;
    result
}

/// Prints what `kcm get` read: the tables, or the JSON.
fn print_parts(mut parts: Vec<Part>, options: &GetOptions) -> anyhow::Result<()> {
    if options.output == GetOutput::Json {
        // One named object of one kind prints as itself, as kubectl does.
        if options.name.is_some() && options.kinds.len() == 1 {
            let item = parts.pop().and_then(|mut p| p.items.pop());
            return emit(&format!("{:#}\n", item.unwrap_or_default()));
        }
        let resource_version = parts.iter().map(|p| p.resource_version).max();
        let items: Vec<Value> = parts.into_iter().flat_map(|p| p.items).collect();
        let document = json!({
            "kind": "List",
            "apiVersion": api::API_VERSION,
            "metadata": {"resourceVersion": resource_version.unwrap_or_default().to_string()},
            "items": items,
        });
        return emit(&format!("{document:#}\n"));
    }
    let tables: Vec<String> = parts.into_iter().filter_map(|p| p.table).collect();
    if tables.is_empty() {
        match (!options.all_namespaces).then_some(options.namespace.as_str()) {
            Some(namespace) => eprintln!("No resources found in {namespace} namespace."),
            None => eprintln!("No resources found."),
        }
        return Ok(());
    }
    emit(&tables.join("\n"))
}

/// kubectl's name of an object of kind `T`: the kind in lower case, its API group when it
/// has one, and the name (`replicaset.apps/web`, `replicationcontroller/web`, `pod/p`).
pub fn kind_reference<T: Object>(name: &str) -> String {
    let kind = T::KIND.to_lowercase();
    match T::API_VERSION.split_once('/') {
        Some((group, _)) => format!("{kind}.{group}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

/// Reads what `options` asks of kind `T`: the named object or the matching list.
async fn read_kind<T: Printable>(
    registry: &Registry,
    options: &GetOptions,
    show_kind: bool,
) -> anyhow::Result<Part> {
    let now = SystemTime::now();
    let wide = options.output == GetOutput::Wide;
    let (objects, resource_version) = if let Some(name) = &options.name {
        let object: T = match registry.get(&options.namespace, name).await {
            Ok(object) => object,
            Err(e @ StorageError::NotFound { .. }) => {
                return Ok(Part {
                    table: None,
                    items: Vec::new(),
                    resource_version: 0,
                    missing: Some(storage_error::<T>(e, name).to_string()),
                })
            }
            Err(e) => return Err(storage_error::<T>(e, name)),
        };
        let revision = object.metadata().resource_version.map_or(0, |rv| rv.0);
        (vec![object], revision)
    } else {
        let namespace = (!options.all_namespaces).then_some(options.namespace.as_str());
        let selector = options.selector.clone().unwrap_or_default();
        let list: ObjectList<T> = registry.list(namespace, &selector).await?;
        for error in &list.errors {
            eprintln!("kcm: warning: skipping {error}");
        }
        (list.items, list.resource_version.0)
    };
    if options.output == GetOutput::Json {
        return Ok(Part {
            table: None,
            items: objects
                .into_iter()
                .map(to_json)
                .collect::<anyhow::Result<_>>()?,
            resource_version,
            missing: None,
        });
    }
    let table = (!objects.is_empty())
        .then(|| render_objects_as(&objects, wide, options.all_namespaces, show_kind, now));
    Ok(Part {
        table,
        items: Vec::new(),
        resource_version,
        missing: None,
    })
}
