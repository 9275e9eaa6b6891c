//! Server-side `meta.k8s.io/v1` Tables, as kube-apiserver returns them to `kubectl get`.
//!
//! Mirrors: `pkg/printers/internalversion/printers.go` (column definitions and the
//! `printPod`, `printReplicationController`, `printReplicaSet`, `printDeployment`,
//! `printService`, `printEndpoints`, `printNamespace`, `printNode`, `printEvent` cell
//! rules), `staging/src/k8s.io/apimachinery/pkg/api/meta/table` and
//! `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1` (the `Table`, `TableRow` and
//! `PartialObjectMetadata` shapes, `FormatLabelSelector`), and
//! `staging/src/k8s.io/apimachinery/pkg/util/duration` (`HumanDuration`).
//!
//! Each served resource's row (`resources::RESOURCES`) points at its [`Printer`]: the
//! column definitions and the cells function, kube-apiserver's per-resource
//! `TableConvertor`.
//!
//! Invariants:
//! - Pure functions over served-shape objects (after `convert::to_served`); they never
//!   panic. A missing or mistyped field reads as Go's zero value.
//! - Cells are those of kube-apiserver's table convertor, which prints with `Wide: true`:
//!   every row carries the priority-1 (`-o wide`) cells too, and kubectl hides them.
//!   Integer cells are JSON integers; all others are strings.
//! - A printer reads nothing but its object: the cells that depend on the time a row is
//!   served at (an Age, an event's Last Seen, a pod's last restart) are [`Cell::Since`]
//!   and [`Cell::CountSince`], written then ([`row`] encodes a row once for the watch
//!   cache, [`table_json`] writes it).
//! - Column definitions (name, type, format, priority) are printers.go's; descriptions are
//!   the API field docs printers.go points at, abridged where they are long.
//! - Deviations, for kcm's documents: a pod without `status.phase` is printed Pending
//!   (kcm's rule for a pod without status), a namespace without `status.phase` Active, a
//!   missing `spec.replicas` reads as 1 (the v1 default), and a pod's IP falls back from
//!   `status.podIPs[0].ip` to `status.podIP`.

mod cells;
mod format;
mod row;

pub(crate) use row::Cell;

/// What a kind's own printer (in its file under `resources/`) builds its cells from: the
/// Name cell, the Age cell, and how many keys or items a top-level field holds.
pub(crate) use cells::{age, count, name};
use cells::{
    deployment_cells, endpoints_cells, event_cells, namespace_cells, node_cells, pod_cells,
    replica_set_cells, replication_controller_cells, service_cells,
};

use std::time::SystemTime;

use serde_json::{json, Map, Value};

/// Which object each row carries (`?includeObject=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IncludeObject {
    /// No `object` in rows.
    None,
    /// `PartialObjectMetadata` with the object's whole metadata (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter: absent means [`IncludeObject::Metadata`];
    /// `None`, `Metadata` and `Object` are accepted; anything else is `None` (a bad
    /// request).
    #[cfg(test)]
    pub fn from_query_parameter(value: Option<&str>) -> Option<IncludeObject> {
        match value {
            None => Some(IncludeObject::Metadata),
            Some("None") => Some(IncludeObject::None),
            Some("Metadata") => Some(IncludeObject::Metadata),
            Some("Object") => Some(IncludeObject::Object),
            Some(_) => None,
        }
    }
}

/// The `meta.k8s.io/v1` group version of Tables and PartialObjectMetadata.
pub const META_API_VERSION: &str = "meta.k8s.io/v1";

// ---------------------------------------------------------------------------------------
// Column definitions

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const CONTAINERS_DESCRIPTION: &str = "Names of each container in the template.";
const IMAGES_DESCRIPTION: &str = "Images referenced by each container in the template.";
const NODE_ADDRESSES_DESCRIPTION: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses";

/// One `TableColumnDefinition`, as printers.go declares it.
#[derive(Debug)]
pub(crate) struct Column {
    pub name: &'static str,
    /// `string` or `integer`.
    pub type_: &'static str,
    /// `name` for the Name column, else empty.
    pub format: &'static str,
    /// 0, or 1 for a column only `-o wide` shows.
    pub priority: i32,
    pub description: &'static str,
}

pub(crate) const fn column(
    name: &'static str,
    type_: &'static str,
    format: &'static str,
    priority: i32,
    description: &'static str,
) -> Column {
    Column {
        name,
        type_,
        format,
        priority,
        description,
    }
}

pub(crate) const NAME: Column = column("Name", "string", "name", 0, NAME_DESCRIPTION);
pub(crate) const AGE: Column = column("Age", "string", "", 0, AGE_DESCRIPTION);

/// The cells of one object's row, and the row's `conditions` (a finished pod's).
pub(crate) type Cells = (Vec<Cell>, Option<Value>);

/// How one resource prints as a Table (kube-apiserver's `TableConvertor`): its column
/// definitions and the cells of one served object, one cell per column. Each
/// [`Resource`](super::resources::Resource) row points at its own.
#[derive(Debug)]
pub(crate) struct Printer {
    pub columns: &'static [Column],
    /// The cells of an object's row. Those that depend on the time it is served at (an
    /// Age) are left open as [`Cell::Since`], so the watch cache makes each object's
    /// row once ([`encode_row`]).
    pub cells: fn(&Value) -> Cells,
}

/// Printers are statics; one is equal only to itself.
impl PartialEq for Printer {
    fn eq(&self, other: &Printer) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Printer {}

/// Name and Age only: kube-apiserver's default table convertor, for a resource printers.go
/// has no rule for.
#[cfg(test)]
pub(crate) static NAME_AGE: Printer = Printer {
    columns: &[NAME, AGE],
    cells: |object| (vec![name(object), age(object)], None),
};

/// pods: printers.go's `printPod`.
pub(crate) static PODS: Printer = Printer {
    columns: &[
        NAME,
        column("Ready", "string", "", 0, "The aggregate readiness state of this pod for accepting traffic."),
        column("Status", "string", "", 0, "The aggregate status of the containers in this pod."),
        column("Restarts", "string", "", 0, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
        AGE,
        column("IP", "string", "", 1, "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."),
        column("Node", "string", "", 1, "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename"),
        column("Nominated Node", "string", "", 1, "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled."),
        column("Readiness Gates", "string", "", 1, "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates"),
    ],
    cells: pod_cells,
};

/// replicationcontrollers: printers.go's `printReplicationController`.
pub(crate) static REPLICATION_CONTROLLERS: Printer = Printer {
    columns: &[
        NAME,
        column("Desired", "integer", "", 0, "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller"),
        column("Current", "integer", "", 0, "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller"),
        column("Ready", "integer", "", 0, "The number of ready replicas for this replication controller."),
        AGE,
        column("Containers", "string", "", 1, CONTAINERS_DESCRIPTION),
        column("Images", "string", "", 1, IMAGES_DESCRIPTION),
        column("Selector", "string", "", 1, "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template. Label keys and values that must match in order to be controlled by this replication controller, if empty defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"),
    ],
    cells: |o| (replication_controller_cells(o), None),
};

/// replicasets: printers.go's `printReplicaSet`.
pub(crate) static REPLICA_SETS: Printer = Printer {
    columns: &[
        NAME,
        column("Desired", "integer", "", 0, "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller"),
        column("Current", "integer", "", 0, "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller"),
        column("Ready", "integer", "", 0, "readyReplicas is the number of pods targeted by this ReplicaSet with a Ready Condition."),
        AGE,
        column("Containers", "string", "", 1, CONTAINERS_DESCRIPTION),
        column("Images", "string", "", 1, IMAGES_DESCRIPTION),
        column("Selector", "string", "", 1, "Selector is a label query over pods that should match the replica count. If the selector is empty, it is defaulted to the labels present on the pod template. Label keys and values that must match in order to be controlled by this replica set. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"),
    ],
    cells: |o| (replica_set_cells(o), None),
};

/// deployments: printers.go's `printDeployment`.
pub(crate) static DEPLOYMENTS: Printer = Printer {
    columns: &[
        NAME,
        column("Ready", "string", "", 0, "Number of the pod with ready state"),
        column("Up-to-date", "string", "", 0, "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
        column("Available", "string", "", 0, "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
        AGE,
        column("Containers", "string", "", 1, CONTAINERS_DESCRIPTION),
        column("Images", "string", "", 1, IMAGES_DESCRIPTION),
        column("Selector", "string", "", 1, "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment."),
    ],
    cells: |o| (deployment_cells(o), None),
};

/// services: printers.go's `printService`.
pub(crate) static SERVICES: Printer = Printer {
    columns: &[
        NAME,
        column("Type", "string", "", 0, "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types"),
        column("Cluster-IP", "string", "", 0, "clusterIP is the IP address of the service and is usually assigned randomly. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies"),
        column("External-IP", "string", "", 0, "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system."),
        column("Port(s)", "string", "", 0, "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies"),
        AGE,
        column("Selector", "string", "", 1, "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/"),
    ],
    cells: |o| (service_cells(o), None),
};

/// endpoints: printers.go's `printEndpoints`.
pub(crate) static ENDPOINTS: Printer = Printer {
    columns: &[
        NAME,
        column("Endpoints", "string", "", 0, "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service."),
        AGE,
    ],
    cells: |o| (endpoints_cells(o), None),
};

/// namespaces: printers.go's `printNamespace`.
pub(crate) static NAMESPACES: Printer = Printer {
    columns: &[
        NAME,
        column("Status", "string", "", 0, "The status of the namespace"),
        AGE,
    ],
    cells: |o| (namespace_cells(o), None),
};

/// nodes: printers.go's `printNode`.
pub(crate) static NODES: Printer = Printer {
    columns: &[
        NAME,
        column("Status", "string", "", 0, "The status of the node"),
        column("Roles", "string", "", 0, "The roles of the node"),
        AGE,
        column("Version", "string", "", 0, "Kubelet Version reported by the node."),
        column("Internal-IP", "string", "", 1, NODE_ADDRESSES_DESCRIPTION),
        column("External-IP", "string", "", 1, NODE_ADDRESSES_DESCRIPTION),
        column("OS-Image", "string", "", 1, "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."),
        column("Kernel-Version", "string", "", 1, "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."),
        column("Container-Runtime", "string", "", 1, "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2)."),
    ],
    cells: |o| (node_cells(o), None),
};

/// events: printers.go's `printEvent`.
pub(crate) static EVENTS: Printer = Printer {
    columns: &[
        column("Last Seen", "string", "", 0, "The time at which the most recent occurrence of this event was recorded."),
        column("Type", "string", "", 0, "Type of this event (Normal, Warning), new types could be added in the future"),
        column("Reason", "string", "", 0, "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
        column("Object", "string", "", 0, "The object that this event is about."),
        column("Subobject", "string", "", 1, "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]."),
        column("Source", "string", "", 1, "The component reporting this event. Should be a short machine understandable string."),
        column("Message", "string", "", 0, "A human-readable description of the status of this operation."),
        column("First Seen", "string", "", 1, "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)"),
        column("Count", "string", "", 1, "The number of times this event has occurred."),
        column("Name", "string", "name", 1, NAME_DESCRIPTION),
    ],
    cells: |o| (event_cells(o), None),
};

/// The `TableColumnDefinition`s of `printer`.
pub fn column_definitions(printer: &Printer) -> Vec<Value> {
    printer
        .columns
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.type_,
                "format": c.format,
                "description": c.description,
                "priority": c.priority,
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Tables and rows

/// One `TableRow` for `object` (served shape): `{"cells": [...], "object": ...}`, plus
/// `conditions` for a Succeeded or Failed pod, as `printPod` adds them.
pub fn row(printer: &Printer, object: &Value, include: IncludeObject, now: SystemTime) -> Value {
    let (cells, conditions) = (printer.cells)(object);
    let mut row = Map::new();
    row.insert("cells".into(), Value::Array(row::render(&cells, now)));
    if let Some(conditions) = conditions {
        row.insert("conditions".into(), conditions);
    }
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            let metadata = object
                .get("metadata")
                .filter(|m| m.is_object())
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new()));
            row.insert(
                "object".into(),
                json!({
                    "kind": "PartialObjectMetadata",
                    "apiVersion": META_API_VERSION,
                    "metadata": metadata,
                }),
            );
        }
        IncludeObject::Object => {
            row.insert("object".into(), object.clone());
        }
    }
    Value::Object(row)
}

/// A whole `Table` of `objects` (served shape). `resource_version` fills
/// `metadata.resourceVersion` (omitted when empty), `continue_token` and `remaining`
/// fill `metadata.continue` and `metadata.remainingItemCount` (omitted when `None` or
/// empty). `with_columns: false` leaves out `columnDefinitions`, as kube-apiserver does
/// for every watch event after the first.
#[allow(clippy::too_many_arguments)] // the shape the API server asked for
pub fn table(
    printer: &Printer,
    objects: &[Value],
    include: IncludeObject,
    now: SystemTime,
    resource_version: &str,
    continue_token: Option<&str>,
    remaining: Option<i64>,
    with_columns: bool,
) -> Value {
    let mut metadata = Map::new();
    if !resource_version.is_empty() {
        metadata.insert("resourceVersion".into(), Value::from(resource_version));
    }
    if let Some(token) = continue_token.filter(|t| !t.is_empty()) {
        metadata.insert("continue".into(), Value::from(token));
    }
    if let Some(remaining) = remaining {
        metadata.insert("remainingItemCount".into(), Value::from(remaining));
    }
    let mut table = Map::new();
    table.insert("kind".into(), Value::from("Table"));
    table.insert("apiVersion".into(), Value::from(META_API_VERSION));
    table.insert("metadata".into(), Value::Object(metadata));
    if with_columns {
        table.insert(
            "columnDefinitions".into(),
            Value::Array(column_definitions(printer)),
        );
    }
    let rows = objects
        .iter()
        .map(|object| row(printer, object, include, now))
        .collect();
    table.insert("rows".into(), Value::Array(rows));
    Value::Object(table)
}

/// `object`'s row (its cells and conditions) encoded once, with the cells that depend on
/// the time left open: what [`table_json`] builds a row from. The watch cache keeps one
/// beside each object.
pub fn encode_row(printer: &Printer, object: &Value, out: &mut Vec<u8>) {
    row::encode(&(printer.cells)(object), out);
}

/// [`table`] encoded straight to JSON, byte for byte the same, from each object's
/// encodings ([`Source`]): a row is its encoded cells, written at `now`, and its object
/// copied, so a list of thousands costs little more than copying what it returns.
#[allow(clippy::too_many_arguments)] // the shape the API server asked for
pub fn table_json<'a>(
    printer: &Printer,
    objects: impl IntoIterator<Item = Source<'a>>,
    include: IncludeObject,
    now: SystemTime,
    resource_version: &str,
    continue_token: Option<&str>,
    remaining: Option<i64>,
    with_columns: bool,
) -> Vec<u8> {
    // Everything but the rows, then the rows (always the last key) written by hand.
    let head = table(
        printer,
        &[],
        include,
        now,
        resource_version,
        continue_token,
        remaining,
        with_columns,
    );
    let mut out = serde_json::to_vec(&head).expect("a JSON value always encodes");
    let empty_rows = b"[]}";
    debug_assert!(out.ends_with(empty_rows));
    out.truncate(out.len() - empty_rows.len());
    // Sized once, as a JSON list's body (`handlers::read::list_response`): each row is its
    // encoded cells, the time cells (a few bytes each) and what it includes of its object.
    let objects: Vec<Source<'a>> = objects.into_iter().collect();
    let rows: usize = objects
        .iter()
        .map(|source| {
            ROW_OVERHEAD
                + source.row.len()
                + match include {
                    IncludeObject::None => 0,
                    IncludeObject::Metadata => source.metadata.map_or(2, <[u8]>::len),
                    IncludeObject::Object => source.object.len(),
                }
        })
        .sum();
    out.reserve(rows + 3);
    out.push(b'[');
    for (index, source) in objects.into_iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        out.push(b'{');
        row::write(source.row, now, &mut out);
        match include {
            IncludeObject::None => {}
            IncludeObject::Metadata => {
                out.extend_from_slice(
                    br#","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#,
                );
                out.extend_from_slice(source.metadata.unwrap_or(b"{}"));
                out.push(b'}');
            }
            IncludeObject::Object => {
                out.extend_from_slice(br#","object":"#);
                out.extend_from_slice(source.object);
            }
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"]}");
    out
}

/// A row's bytes beyond its encoded cells and its object: the braces, the separator, the
/// key and envelope of what it includes, and the cells written at the time (an age).
const ROW_OVERHEAD: usize = 128;

/// One object of a [`table_json`], as encodings (the watch cache's items keep them).
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    /// Its row, from [`encode_row`].
    pub row: &'a [u8],
    /// The object (served shape) as JSON, as `serde_json::to_vec` encodes it.
    pub object: &'a [u8],
    /// Its `metadata` as JSON, when that is an object.
    pub metadata: Option<&'a [u8]>,
}

// ---------------------------------------------------------------------------------------
// JSON access with Go zero values

fn value_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |value, key| member(value, key))
}

/// The member `key` of an object. Served objects have a few to a few dozen members, where
/// comparing keys beats hashing one for the map's index (SipHash): the lookups were 40%
/// of a Table list's time before this.
fn member<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    let map = value.as_object()?;
    if map.len() > 32 {
        return map.get(key);
    }
    map.iter().find_map(|(k, v)| (k == key).then_some(v))
}

fn string_at<'a>(value: &'a Value, path: &[&str]) -> &'a str {
    value_at(value, path).and_then(Value::as_str).unwrap_or("")
}

fn integer_at(value: &Value, path: &[&str]) -> i64 {
    value_at(value, path).and_then(Value::as_i64).unwrap_or(0)
}

fn bool_at(value: &Value, path: &[&str]) -> bool {
    value_at(value, path)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn array_at<'a>(value: &'a Value, path: &[&str]) -> &'a [Value] {
    value_at(value, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// `spec.replicas`, or 1 (the v1 default) when absent.
fn desired_replicas(object: &Value) -> i64 {
    value_at(object, &["spec", "replicas"])
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;
