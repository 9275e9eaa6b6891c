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
//! `TableConvertor`; a resource printers.go has no rule for prints [`NAME_AGE`].
//!
//! Invariants:
//! - Pure functions over served-shape objects (after `convert::to_served`); they never
//!   panic. A missing or mistyped field reads as Go's zero value.
//! - Cells are those of kube-apiserver's table convertor, which prints with `Wide: true`:
//!   every row carries the priority-1 (`-o wide`) cells too, and kubectl hides them.
//!   Integer cells are JSON integers; all others are strings.
//! - Column definitions (name, type, format, priority) are printers.go's; descriptions are
//!   the API field docs printers.go points at, abridged where they are long.
//! - Deviations, for kcm's documents: a pod without `status.phase` is printed Pending
//!   (kcm's rule for a pod without status), a namespace without `status.phase` Active, a
//!   missing `spec.replicas` reads as 1 (the v1 default), and a pod's IP falls back from
//!   `status.podIPs[0].ip` to `status.podIP`.

mod cells;
mod format;

use cells::{
    config_map_cells, deployment_cells, endpoints_cells, event_cells, lease_cells, namespace_cells,
    node_cells, pod_cells, replica_set_cells, replication_controller_cells, secret_cells,
    service_account_cells, service_cells,
};
use format::age;

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

const fn column(
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

const NAME: Column = column("Name", "string", "name", 0, NAME_DESCRIPTION);
const AGE: Column = column("Age", "string", "", 0, AGE_DESCRIPTION);

/// The cells of one object's row, and the row's `conditions` (a finished pod's).
pub(crate) type Cells = (Vec<Value>, Option<Value>);

/// How one resource prints as a Table (kube-apiserver's `TableConvertor`): its column
/// definitions and the cells of one served object, one cell per column. Each
/// [`Resource`](super::resources::Resource) row points at its own.
#[derive(Debug)]
pub(crate) struct Printer {
    pub columns: &'static [Column],
    pub cells: fn(&Value, SystemTime) -> Cells,
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
pub(crate) static NAME_AGE: Printer = Printer {
    columns: &[NAME, AGE],
    cells: |object, now| {
        let name = Value::from(string_at(object, &["metadata", "name"]));
        (vec![name, Value::from(age(object, now))], None)
    },
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
    cells: |o, now| (replication_controller_cells(o, now), None),
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
    cells: |o, now| (replica_set_cells(o, now), None),
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
    cells: |o, now| (deployment_cells(o, now), None),
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
    cells: |o, now| (service_cells(o, now), None),
};

/// endpoints: printers.go's `printEndpoints`.
pub(crate) static ENDPOINTS: Printer = Printer {
    columns: &[
        NAME,
        column("Endpoints", "string", "", 0, "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service."),
        AGE,
    ],
    cells: |o, now| (endpoints_cells(o, now), None),
};

/// namespaces: printers.go's `printNamespace`.
pub(crate) static NAMESPACES: Printer = Printer {
    columns: &[
        NAME,
        column("Status", "string", "", 0, "The status of the namespace"),
        AGE,
    ],
    cells: |o, now| (namespace_cells(o, now), None),
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
    cells: |o, now| (node_cells(o, now), None),
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
    cells: |o, now| (event_cells(o, now), None),
};

/// configmaps: printers.go's `printConfigMap`.
pub(crate) static CONFIG_MAPS: Printer = Printer {
    columns: &[
        NAME,
        column(
            "Data",
            "integer",
            "",
            0,
            "How many keys the ConfigMap holds (data and binaryData).",
        ),
        AGE,
    ],
    cells: |o, now| (config_map_cells(o, now), None),
};

/// secrets: printers.go's `printSecret`.
pub(crate) static SECRETS: Printer = Printer {
    columns: &[
        NAME,
        column("Type", "string", "", 0, "The Secret's type."),
        column("Data", "integer", "", 0, "How many keys the Secret holds."),
        AGE,
    ],
    cells: |o, now| (secret_cells(o, now), None),
};

/// serviceaccounts: printers.go's `printServiceAccount`.
pub(crate) static SERVICE_ACCOUNTS: Printer = Printer {
    columns: &[
        NAME,
        column(
            "Secrets",
            "integer",
            "",
            0,
            "How many Secrets the ServiceAccount names.",
        ),
        AGE,
    ],
    cells: |o, now| (service_account_cells(o, now), None),
};

/// leases: printers.go's `printLease`.
pub(crate) static LEASES: Printer = Printer {
    columns: &[
        NAME,
        column("Holder", "string", "", 0, "Who holds the Lease."),
        AGE,
    ],
    cells: |o, now| (lease_cells(o, now), None),
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
    let (cells, conditions) = (printer.cells)(object, now);
    let mut row = Map::new();
    row.insert("cells".into(), Value::Array(cells));
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

// ---------------------------------------------------------------------------------------
// JSON access with Go zero values

fn value_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |value, key| value.get(key))
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
mod tests {
    use super::format::*;
    use super::*;

    const SECOND: i64 = 1_000_000_000;
    const MINUTE: i64 = 60 * SECOND;
    const HOUR: i64 = 60 * MINUTE;
    const DAY: i64 = 24 * HOUR;
    const MILLISECOND: i64 = 1_000_000;

    /// 2026-11-26T18:11:03Z: ten minutes after the fixtures were created.
    fn now() -> SystemTime {
        parse_timestamp("2026-11-26T18:11:03Z").unwrap()
    }

    /// The printer of the served resource `plural`; [`NAME_AGE`] for any other.
    fn printer(plural: &str) -> &'static Printer {
        super::super::resources::find_by_name(plural)
            .filter(|resource| resource.plural == plural)
            .map_or(&NAME_AGE, |resource| resource.printer)
    }

    fn cells(resource: &str, object: &Value) -> Vec<Value> {
        row(printer(resource), object, IncludeObject::None, now())["cells"]
            .as_array()
            .unwrap()
            .clone()
    }

    #[track_caller]
    fn check_cells(resource: &str, object: Value, expected: Value) {
        let got = Value::Array(cells(resource, &object));
        assert_eq!(got, expected, "{resource} cells of {object:#}");
        assert_eq!(
            got.as_array().unwrap().len(),
            column_definitions(printer(resource)).len(),
            "one cell per column"
        );
    }

    // ---- HumanDuration ------------------------------------------------------------------

    #[test]
    fn human_duration_matches_kubernetes_test_human_duration() {
        #[track_caller]
        fn check(nanoseconds: i64, expected: &str) {
            assert_eq!(human_duration(nanoseconds), expected, "{nanoseconds}ns");
        }
        check(SECOND, "1s");
        check(70 * SECOND, "70s");
        check(190 * SECOND, "3m10s");
        check(70 * MINUTE, "70m");
        check(47 * HOUR, "47h");
        check(49 * HOUR, "2d1h");
        check((8 * 24 + 2) * HOUR, "8d");
        check(367 * DAY, "367d");
        check((365 * 2 * 24 + 25) * HOUR, "2y1d");
        check((365 * 8 * 24 + 2) * HOUR, "8y");
    }

    #[test]
    fn human_duration_matches_kubernetes_test_human_duration_boundaries() {
        #[track_caller]
        fn check(nanoseconds: i64, expected: &str) {
            assert_eq!(human_duration(nanoseconds), expected, "{nanoseconds}ns");
        }
        let year = 365 * DAY;
        check(-2 * SECOND, "<invalid>");
        check(-2 * SECOND + 1, "0s");
        check(0, "0s");
        check(SECOND - MILLISECOND, "0s");
        check(2 * MINUTE - MILLISECOND, "119s");
        check(2 * MINUTE, "2m");
        check(2 * MINUTE + SECOND, "2m1s");
        check(10 * MINUTE - MILLISECOND, "9m59s");
        check(10 * MINUTE, "10m");
        check(10 * MINUTE + SECOND, "10m");
        check(3 * HOUR - MILLISECOND, "179m");
        check(3 * HOUR, "3h");
        check(3 * HOUR + MINUTE, "3h1m");
        check(8 * HOUR - MILLISECOND, "7h59m");
        check(8 * HOUR, "8h");
        check(8 * HOUR + 59 * MINUTE, "8h");
        check(2 * DAY - MILLISECOND, "47h");
        check(2 * DAY, "2d");
        check(2 * DAY + HOUR, "2d1h");
        check(8 * DAY - MILLISECOND, "7d23h");
        check(8 * DAY, "8d");
        check(8 * DAY + 23 * HOUR, "8d");
        check(2 * year - MILLISECOND, "729d");
        check(2 * year, "2y");
        check(2 * year + 23 * HOUR, "2y");
        check(2 * year + 23 * HOUR + 59 * MINUTE, "2y");
        check(2 * year + DAY - MILLISECOND, "2y");
        check(2 * year + DAY, "2y1d");
        check(3 * year, "3y");
        check(4 * year, "4y");
        check(5 * year, "5y");
        check(6 * year, "6y");
        check(7 * year, "7y");
        check(8 * year - MILLISECOND, "7y364d");
        check(8 * year, "8y");
        check(8 * year + 364 * DAY, "8y");
        check(9 * year, "9y");
        check(i64::MAX, "292y");
        check(i64::MIN, "<invalid>");
    }

    #[test]
    fn ages_come_from_the_creation_timestamp() {
        #[track_caller]
        fn check(timestamp: Option<&str>, expected: &str) {
            assert_eq!(
                translate_timestamp_since(timestamp, now()),
                expected,
                "{timestamp:?}"
            );
        }
        check(Some("2026-11-26T18:01:03Z"), "10m");
        check(Some("2026-11-26T18:11:00Z"), "3s");
        check(Some("2026-11-26T18:11:03.999999Z"), "0s");
        check(Some("2026-11-26T18:11:04Z"), "0s"); // a second in the future
        check(Some("2026-11-26T18:11:06Z"), "<invalid>");
        check(Some("2026-11-26T19:01:03+01:00"), "10m");
        check(Some("2026-11-26T17:01:03-01:00"), "10m");
        check(Some("2026-11-25T18:11:03Z"), "24h");
        check(Some("2024-11-26T18:11:03Z"), "2y");
        check(Some("2024-11-25T18:11:03Z"), "2y1d");
        check(Some("not a time"), "<unknown>");
        check(Some("2026-11-26"), "<unknown>");
        check(Some("2026-11-26T18:01:03+1:00"), "<unknown>");
        check(Some(""), "<unknown>");
        check(None, "<unknown>");
    }

    // ---- selectors ----------------------------------------------------------------------

    #[test]
    fn format_label_selector_matches_metav1() {
        #[track_caller]
        fn check(selector: Value, expected: &str) {
            assert_eq!(
                format_label_selector(Some(&selector)),
                expected,
                "{selector}"
            );
        }
        check(json!({"matchLabels":{"app":"web"}}), "app=web");
        check(
            json!({"matchLabels":{"tier":"fe","app":"web"}}),
            "app=web,tier=fe",
        );
        check(
            json!({"matchLabels":{"app":"web"},"matchExpressions":[
                {"key":"env","operator":"In","values":["prod","dev"]},
                {"key":"zone","operator":"NotIn","values":["b","a"]},
                {"key":"canary","operator":"Exists"},
                {"key":"legacy","operator":"DoesNotExist","values":[]}]}),
            "app=web,canary,env in (dev,prod),!legacy,zone notin (a,b)",
        );
        check(
            json!({"matchExpressions":[{"key":"example.com/x","operator":"In","values":["1"]}]}),
            "example.com/x in (1)",
        );
        check(json!({}), "<none>");
        check(json!({"matchLabels":{},"matchExpressions":[]}), "<none>");
        check(json!(null), "<none>");
        check(
            json!({"matchExpressions":[{"key":"a","operator":"Near","values":["1"]}]}),
            "<error>",
        );
        check(
            json!({"matchExpressions":[{"key":"a","operator":"In","values":[]}]}),
            "<error>",
        );
        check(
            json!({"matchExpressions":[{"key":"a","operator":"Exists","values":["x"]}]}),
            "<error>",
        );
        check(json!({"matchLabels":{"bad key":"x"}}), "<error>");
        check(json!({"matchLabels":{"a":"bad value!"}}), "<error>");
        check(json!({"matchLabels":{"a":1}}), "<error>");
        check(json!({"matchLabels":{"Example.com/a":"x"}}), "<error>");
        check(json!("app=web"), "<error>");
        assert_eq!(format_label_selector(None), "<none>");
        assert_eq!(label_selector_string(None), Ok(String::new()));
    }

    #[test]
    fn format_labels_sorts_and_says_none_when_empty() {
        assert_eq!(
            format_labels(Some(&json!({"name":"web","app":"x"}))),
            "app=x,name=web"
        );
        assert_eq!(format_labels(Some(&json!({}))), "<none>");
        assert_eq!(format_labels(None), "<none>");
        assert_eq!(format_labels(Some(&json!("x"))), "<none>");
    }

    // ---- pods ---------------------------------------------------------------------------

    fn served_pod() -> Value {
        json!({"kind":"Pod","apiVersion":"v1",
            "metadata":{"name":"app-6fc9fd9bcf-rfq96","namespace":"default","uid":"7d0e",
                "resourceVersion":"141","labels":{"app":"app"},
                "creationTimestamp":"2026-11-26T18:01:03Z"},
            "spec":{"containers":[{"name":"nginx","image":"nginx:1"}],"nodeName":"node-1"},
            "status":{"phase":"Running","podIP":"10.244.166.4",
                "conditions":[{"type":"Ready","status":"True"}],
                "containerStatuses":[{"name":"nginx","ready":true,"restartCount":0,
                    "state":{"running":{"startedAt":"2026-11-26T18:01:03Z"}}}]}})
    }

    #[test]
    fn a_running_pod_prints_like_kubectl_get_pods_wide() {
        check_cells(
            "pods",
            served_pod(),
            json!([
                "app-6fc9fd9bcf-rfq96",
                "1/1",
                "Running",
                "0",
                "10m",
                "10.244.166.4",
                "node-1",
                "<none>",
                "<none>"
            ]),
        );
    }

    /// A pod with the given container statuses (and phase Running unless overridden).
    fn pod_with(statuses: Value, extra_status: Value, extra_metadata: Value) -> Value {
        let mut pod = json!({"metadata":{"name":"p","creationTimestamp":"2026-11-26T18:01:03Z"},
            "spec":{"containers":[{"name":"a"},{"name":"b"}]},
            "status":{"phase":"Running","containerStatuses":statuses}});
        for (key, value) in extra_status.as_object().unwrap() {
            pod["status"][key] = value.clone();
        }
        for (key, value) in extra_metadata.as_object().unwrap() {
            pod["metadata"][key] = value.clone();
        }
        pod
    }

    #[test]
    fn pod_status_ready_and_restarts_follow_print_pod() {
        #[track_caller]
        fn check(pod: Value, ready: &str, status: &str, restarts: &str) {
            let got = cells("pods", &pod);
            assert_eq!(
                (
                    got[1].as_str().unwrap(),
                    got[2].as_str().unwrap(),
                    got[3].as_str().unwrap()
                ),
                (ready, status, restarts),
                "{pod:#}"
            );
        }
        let running = json!({"running":{"startedAt":"2026-11-26T18:01:03Z"}});
        let none = json!({});
        // Both ready and running.
        check(
            pod_with(
                json!([{"name":"a","ready":true,"state":running},{"name":"b","ready":true,"state":running}]),
                none.clone(),
                none.clone(),
            ),
            "2/2",
            "Running",
            "0",
        );
        // Running but not ready counts as not ready.
        check(
            pod_with(
                json!([{"name":"a","ready":false,"state":running},{"name":"b","ready":true,"state":running}]),
                none.clone(),
                none.clone(),
            ),
            "1/2",
            "Running",
            "0",
        );
        // Waiting reasons win, the first container's last.
        check(
            pod_with(
                json!([{"name":"a","state":{"waiting":{"reason":"ImagePullBackOff"}}},
                    {"name":"b","state":{"waiting":{"reason":"ErrImagePull"}}}]),
                json!({"phase":"Pending"}),
                none.clone(),
            ),
            "0/2",
            "ImagePullBackOff",
            "0",
        );
        check(
            pod_with(
                json!([{"name":"a","ready":true,"state":running},
                    {"name":"b","restartCount":4,"state":{"waiting":{"reason":"CrashLoopBackOff"}},
                     "lastState":{"terminated":{"exitCode":1,"finishedAt":"2026-11-26T18:06:03Z"}}}]),
                none.clone(),
                none.clone(),
            ),
            "1/2",
            "CrashLoopBackOff",
            "4 (5m ago)",
        );
        // Restarts without a last termination time print just the number; several add up.
        check(
            pod_with(
                json!([{"name":"a","ready":true,"restartCount":2,"state":running},
                    {"name":"b","ready":true,"restartCount":1,"state":running,
                     "lastState":{"terminated":{"exitCode":137,"finishedAt":"2026-11-26T16:11:03Z"}}}]),
                none.clone(),
                none.clone(),
            ),
            "2/2",
            "Running",
            "3 (120m ago)",
        );
        check(
            pod_with(
                json!([{"name":"a","ready":true,"restartCount":2,"state":running}]),
                none.clone(),
                none.clone(),
            ),
            "1/2",
            "Running",
            "2",
        );
        // Terminated: the reason, else Signal:N, else ExitCode:N.
        check(
            pod_with(
                json!([{"name":"a","state":{"terminated":{"exitCode":0,"reason":"Completed"}}},
                    {"name":"b","state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]),
                json!({"phase":"Succeeded"}),
                none.clone(),
            ),
            "0/2",
            "Completed",
            "0",
        );
        check(
            pod_with(
                json!([{"name":"a","state":{"terminated":{"exitCode":2,"reason":"Error"}}}]),
                json!({"phase":"Failed"}),
                none.clone(),
            ),
            "0/2",
            "Error",
            "0",
        );
        check(
            pod_with(
                json!([{"name":"a","state":{"terminated":{"exitCode":1}}}]),
                json!({"phase":"Failed"}),
                none.clone(),
            ),
            "0/2",
            "ExitCode:1",
            "0",
        );
        check(
            pod_with(
                json!([{"name":"a","state":{"terminated":{"exitCode":137,"signal":9}}}]),
                json!({"phase":"Failed"}),
                none.clone(),
            ),
            "0/2",
            "Signal:9",
            "0",
        );
        // Completed with a container still running is Running if Ready, else NotReady.
        let completed_and_running = json!([{"name":"a","state":{"terminated":{"exitCode":0,"reason":"Completed"}}},
            {"name":"b","ready":true,"state":running}]);
        check(
            pod_with(
                completed_and_running.clone(),
                json!({"conditions":[{"type":"Ready","status":"True"}]}),
                none.clone(),
            ),
            "1/2",
            "Running",
            "0",
        );
        check(
            pod_with(completed_and_running, none.clone(), none.clone()),
            "1/2",
            "NotReady",
            "0",
        );
        // status.reason overrides the phase.
        check(
            pod_with(
                json!([]),
                json!({"phase":"Failed","reason":"Evicted"}),
                none.clone(),
            ),
            "0/2",
            "Evicted",
            "0",
        );
        // Deletion: Terminating, unless the node was lost or the pod already finished.
        check(
            pod_with(
                json!([{"name":"a","ready":true,"state":running}]),
                none.clone(),
                json!({"deletionTimestamp":"2026-11-26T18:10:00Z"}),
            ),
            "1/2",
            "Terminating",
            "0",
        );
        check(
            pod_with(
                json!([]),
                json!({"reason":"NodeLost"}),
                json!({"deletionTimestamp":"2026-11-26T18:10:00Z"}),
            ),
            "0/2",
            "Unknown",
            "0",
        );
        check(
            pod_with(
                json!([{"name":"a","state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]),
                json!({"phase":"Succeeded"}),
                json!({"deletionTimestamp":"2026-11-26T18:10:00Z"}),
            ),
            "0/2",
            "Completed",
            "0",
        );
        // Scheduling gates.
        check(
            pod_with(
                json!([]),
                json!({"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False",
                    "reason":"SchedulingGated"}]}),
                none.clone(),
            ),
            "0/2",
            "SchedulingGated",
            "0",
        );
        // kcm: a pod without status is Pending.
        check(
            json!({"metadata":{"name":"p"},"spec":{"containers":[{"name":"a"}]}}),
            "0/1",
            "Pending",
            "0",
        );
    }

    #[test]
    fn init_containers_print_init_progress() {
        #[track_caller]
        fn check(
            init_statuses: Value,
            extra_status: Value,
            ready: &str,
            status: &str,
            restarts: &str,
        ) {
            let mut pod = json!({"metadata":{"name":"p"},
                "spec":{"initContainers":[{"name":"i1"},{"name":"i2"},{"name":"side","restartPolicy":"Always"}],
                    "containers":[{"name":"c"}]},
                "status":{"phase":"Pending","initContainerStatuses":init_statuses,
                    "containerStatuses":[{"name":"c","state":{"waiting":{"reason":"PodInitializing"}}}]}});
            for (key, value) in extra_status.as_object().unwrap() {
                pod["status"][key] = value.clone();
            }
            let got = cells("pods", &pod);
            assert_eq!(
                (
                    got[1].as_str().unwrap(),
                    got[2].as_str().unwrap(),
                    got[3].as_str().unwrap()
                ),
                (ready, status, restarts),
                "{pod:#}"
            );
        }
        let done = json!({"terminated":{"exitCode":0,"reason":"Completed"}});
        let none = json!({});
        check(
            json!([{"name":"i1","state":{"running":{}}}]),
            none.clone(),
            "0/2",
            "Init:0/3",
            "0",
        );
        check(
            json!([{"name":"i1","state":done},{"name":"i2","state":{"waiting":{"reason":"PodInitializing"}}}]),
            none.clone(),
            "0/2",
            "Init:1/3",
            "0",
        );
        check(
            json!([{"name":"i1","restartCount":3,"state":{"waiting":{"reason":"CrashLoopBackOff"}},
                "lastState":{"terminated":{"exitCode":1,"finishedAt":"2026-11-26T18:10:03Z"}}}]),
            none.clone(),
            "0/2",
            "Init:CrashLoopBackOff",
            "3 (60s ago)",
        );
        check(
            json!([{"name":"i1","state":{"terminated":{"exitCode":1,"reason":"Error"}}}]),
            none.clone(),
            "0/2",
            "Init:Error",
            "0",
        );
        check(
            json!([{"name":"i1","state":{"terminated":{"exitCode":3}}}]),
            none.clone(),
            "0/2",
            "Init:ExitCode:3",
            "0",
        );
        check(
            json!([{"name":"i1","state":{"terminated":{"exitCode":137,"signal":9}}}]),
            none.clone(),
            "0/2",
            "Init:Signal:9",
            "0",
        );
        // Every init container done and the sidecar started and ready: the main containers
        // decide, and the sidecar counts towards ready.
        check(
            json!([{"name":"i1","state":done},{"name":"i2","state":done},
                {"name":"side","started":true,"ready":true,"restartCount":1,"state":{"running":{}}}]),
            json!({"phase":"Running","containerStatuses":[{"name":"c","ready":true,"state":{"running":{}}}]}),
            "2/2",
            "Running",
            "1",
        );
    }

    #[test]
    fn pod_rows_carry_completed_conditions_for_finished_pods() {
        let succeeded = json!({"metadata":{"name":"p"},"status":{"phase":"Succeeded"}});
        assert_eq!(
            row(printer("pods"), &succeeded, IncludeObject::None, now())["conditions"],
            json!([{"type":"Completed","status":"True","reason":"Succeeded",
                "message":"The pod has completed successfully."}])
        );
        let failed = json!({"metadata":{"name":"p"},"status":{"phase":"Failed"}});
        assert_eq!(
            row(printer("pods"), &failed, IncludeObject::None, now())["conditions"],
            json!([{"type":"Completed","status":"True","reason":"Failed","message":"The pod failed."}])
        );
        assert_eq!(
            row(printer("pods"), &served_pod(), IncludeObject::None, now()).get("conditions"),
            None
        );
    }

    #[test]
    fn pod_wide_cells_use_pod_ips_nominated_node_and_readiness_gates() {
        let pod = json!({"metadata":{"name":"p"},
            "spec":{"containers":[],
                "readinessGates":[{"conditionType":"example.com/a"},{"conditionType":"example.com/b"}]},
            "status":{"phase":"Pending","podIP":"10.0.0.9","podIPs":[{"ip":"10.0.0.1"},{"ip":"fd00::1"}],
                "nominatedNodeName":"node-2",
                "conditions":[{"type":"example.com/a","status":"True"},{"type":"example.com/b","status":"False"}]}});
        check_cells(
            "pods",
            pod,
            json!([
                "p",
                "0/0",
                "Pending",
                "0",
                "<unknown>",
                "10.0.0.1",
                "<none>",
                "node-2",
                "1/2"
            ]),
        );
    }

    // ---- controllers --------------------------------------------------------------------

    #[test]
    fn replication_controllers_print_counts_containers_and_selector() {
        check_cells(
            "replicationcontrollers",
            json!({"kind":"ReplicationController","apiVersion":"v1",
                "metadata":{"name":"web","creationTimestamp":"2026-11-26T18:01:03Z"},
                "spec":{"replicas":3,"selector":{"name":"web","tier":"fe"},
                    "template":{"spec":{"containers":[{"name":"web","image":"nginx"},
                        {"name":"log","image":"busybox"}]}}},
                "status":{"replicas":2,"readyReplicas":1}}),
            json!([
                "web",
                3,
                2,
                1,
                "10m",
                "web,log",
                "nginx,busybox",
                "name=web,tier=fe"
            ]),
        );
        check_cells(
            "replicationcontrollers",
            json!({"metadata":{"name":"bare"},"spec":{"replicas":0}}),
            json!(["bare", 0, 0, 0, "<unknown>", "", "", "<none>"]),
        );
    }

    #[test]
    fn replica_sets_print_counts_and_a_formatted_label_selector() {
        check_cells(
            "replicasets",
            json!({"metadata":{"name":"app-6fc9fd9bcf","creationTimestamp":"2026-11-26T17:11:03Z"},
                "spec":{"replicas":2,"selector":{"matchLabels":{"app":"app","pod-template-hash":"6fc9fd9bcf"}},
                    "template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1"}]}}},
                "status":{"replicas":2,"fullyLabeledReplicas":2,"readyReplicas":2,"availableReplicas":2}}),
            json!([
                "app-6fc9fd9bcf",
                2,
                2,
                2,
                "60m",
                "nginx",
                "nginx:1",
                "app=app,pod-template-hash=6fc9fd9bcf"
            ]),
        );
        check_cells(
            "replicasets",
            json!({"metadata":{"name":"x"},"spec":{"replicas":1,"selector":{}}}),
            json!(["x", 1, 0, 0, "<unknown>", "", "", "<none>"]),
        );
    }

    #[test]
    fn deployments_print_ready_over_desired_and_a_selector() {
        check_cells(
            "deployments",
            json!({"metadata":{"name":"app","creationTimestamp":"2026-11-24T18:11:03Z"},
                "spec":{"replicas":3,"selector":{"matchLabels":{"app":"app"},
                        "matchExpressions":[{"key":"tier","operator":"In","values":["web"]}]},
                    "template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1"}]}}},
                "status":{"replicas":3,"updatedReplicas":2,"readyReplicas":1,"availableReplicas":1}}),
            json!([
                "app",
                "1/3",
                2,
                1,
                "2d",
                "nginx",
                "nginx:1",
                "app=app,tier in (web)"
            ]),
        );
        // An empty selector prints as nothing, an invalid one as <invalid>.
        check_cells(
            "deployments",
            json!({"metadata":{"name":"d"},"spec":{"selector":{}}}),
            json!(["d", "0/1", 0, 0, "<unknown>", "", "", ""]),
        );
        check_cells(
            "deployments",
            json!({"metadata":{"name":"d"},"spec":{"replicas":0,
                "selector":{"matchExpressions":[{"key":"a","operator":"Bad"}]}}}),
            json!(["d", "0/0", 0, 0, "<unknown>", "", "", "<invalid>"]),
        );
    }

    // ---- services and endpoints ---------------------------------------------------------

    #[test]
    fn services_print_type_ips_ports_and_selector() {
        #[track_caller]
        fn check(spec: Value, status: Value, expected: Value) {
            check_cells(
                "services",
                json!({"metadata":{"name":"web","creationTimestamp":"2026-11-26T18:01:03Z"},
                    "spec":spec,"status":status}),
                expected,
            );
        }
        check(
            json!({"selector":{"name":"web"},"ports":[{"port":80,"protocol":"TCP","targetPort":80}],
                "type":"ClusterIP"}),
            json!({}),
            json!([
                "web",
                "ClusterIP",
                "<none>",
                "<none>",
                "80/TCP",
                "10m",
                "name=web"
            ]),
        );
        check(
            json!({"selector":{"app":"web","tier":"fe"},"type":"NodePort","clusterIP":"10.96.0.10",
                "clusterIPs":["10.96.0.10"],"externalIPs":["1.2.3.4","5.6.7.8"],
                "ports":[{"port":80,"protocol":"TCP","nodePort":30080},{"port":443,"protocol":"TCP"}]}),
            json!({}),
            json!([
                "web",
                "NodePort",
                "10.96.0.10",
                "1.2.3.4,5.6.7.8",
                "80:30080/TCP,443/TCP",
                "10m",
                "app=web,tier=fe"
            ]),
        );
        check(
            json!({"type":"LoadBalancer","clusterIP":"10.96.0.11","ports":[{"port":53,"protocol":"UDP"}]}),
            json!({"loadBalancer":{"ingress":[{"ip":"9.9.9.9"},{"hostname":"lb.example"},{"ip":"1.1.1.1"}]}}),
            json!([
                "web",
                "LoadBalancer",
                "10.96.0.11",
                "1.1.1.1,9.9.9.9,lb.example",
                "53/UDP",
                "10m",
                "<none>"
            ]),
        );
        check(
            json!({"type":"LoadBalancer","ports":[]}),
            json!({}),
            json!([
                "web",
                "LoadBalancer",
                "<none>",
                "<pending>",
                "<none>",
                "10m",
                "<none>"
            ]),
        );
        check(
            json!({"type":"ExternalName","externalName":"db.example.com"}),
            json!({}),
            json!([
                "web",
                "ExternalName",
                "<none>",
                "db.example.com",
                "<none>",
                "10m",
                "<none>"
            ]),
        );
    }

    #[test]
    fn endpoints_print_up_to_three_then_more() {
        #[track_caller]
        fn check(subsets: Value, expected: &str) {
            let got = cells(
                "endpoints",
                &json!({"metadata":{"name":"web"},"subsets":subsets}),
            );
            assert_eq!(got[1], json!(expected), "{subsets}");
        }
        check(json!(null), "<none>");
        check(json!([]), "<none>");
        check(
            json!([{"addresses":[{"ip":"10.0.0.1"},{"ip":"10.0.0.2"}],"ports":[{"port":80}]}]),
            "10.0.0.1:80,10.0.0.2:80",
        );
        check(
            json!([{"addresses":[{"ip":"10.0.0.1"},{"ip":"10.0.0.2"}],"ports":[{"port":80},{"port":81}]}]),
            "10.0.0.1:80,10.0.0.2:80,10.0.0.1:81 + 1 more...",
        );
        check(
            json!([{"addresses":[{"ip":"10.0.0.1"},{"ip":"10.0.0.2"},{"ip":"10.0.0.3"}],"ports":[{"port":80}]},
                {"addresses":[{"ip":"10.0.0.4"},{"ip":"10.0.0.5"}],"ports":[{"port":80}]}]),
            "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 2 more...",
        );
        check(
            json!([{"addresses":[{"ip":"10.0.0.1"},{"ip":"10.0.0.2"},{"ip":"10.0.0.3"}],"ports":[{"port":80}]}]),
            "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80",
        );
        check(
            json!([{"addresses":[{"ip":"fd00::1"}],"ports":[{"port":80}]}]),
            "[fd00::1]:80",
        );
        check(
            json!([{"addresses":[{"ip":"10.0.0.1"},{"ip":"10.0.0.2"}]}]),
            "10.0.0.1,10.0.0.2",
        );
        check(
            json!([{"notReadyAddresses":[{"ip":"10.0.0.1"}],"ports":[{"port":80}]}]),
            "",
        );
        check_cells(
            "endpoints",
            json!({"metadata":{"name":"web","creationTimestamp":"2026-11-26T18:11:00Z"},
                "subsets":[{"addresses":[{"ip":"10.244.166.2"}],"ports":[{"port":80,"protocol":"TCP"}]}]}),
            json!(["web", "10.244.166.2:80", "3s"]),
        );
    }

    // ---- namespaces, nodes, events ------------------------------------------------------

    #[test]
    fn namespaces_print_their_phase_defaulting_to_active() {
        check_cells(
            "namespaces",
            json!({"metadata":{"name":"default","creationTimestamp":"2026-11-26T18:01:03Z"}}),
            json!(["default", "Active", "10m"]),
        );
        check_cells(
            "namespaces",
            json!({"metadata":{"name":"old"},"status":{"phase":"Terminating"}}),
            json!(["old", "Terminating", "<unknown>"]),
        );
    }

    #[test]
    fn nodes_print_readiness_roles_version_and_wide_info() {
        check_cells(
            "nodes",
            json!({"metadata":{"name":"node-1","creationTimestamp":"2026-11-26T18:01:03Z",
                    "labels":{"node-role.kubernetes.io/control-plane":"","kubernetes.io/role":"worker",
                        "node-role.kubernetes.io/":"x"}},
                "spec":{"unschedulable":true},
                "status":{"conditions":[{"type":"MemoryPressure","status":"False"},{"type":"Ready","status":"True"}],
                    "addresses":[{"type":"Hostname","address":"node-1"},{"type":"InternalIP","address":"10.0.0.1"}],
                    "nodeInfo":{"kubeletVersion":"v1.32.0-kcm","osImage":"Debian GNU/Linux 12 (bookworm)",
                        "kernelVersion":"6.1.0","containerRuntimeVersion":"kcm://0.1.0"}}}),
            json!([
                "node-1",
                "Ready,SchedulingDisabled",
                "control-plane,worker",
                "10m",
                "v1.32.0-kcm",
                "10.0.0.1",
                "<none>",
                "Debian GNU/Linux 12 (bookworm)",
                "6.1.0",
                "kcm://0.1.0"
            ]),
        );
        check_cells(
            "nodes",
            json!({"metadata":{"name":"node-2"},
                "status":{"conditions":[{"type":"Ready","status":"Unknown"}],
                    "addresses":[{"type":"ExternalIP","address":"34.1.2.3"}]}}),
            json!([
                "node-2",
                "NotReady",
                "<none>",
                "<unknown>",
                "",
                "<none>",
                "34.1.2.3",
                "<unknown>",
                "<unknown>",
                "<unknown>"
            ]),
        );
        check_cells(
            "nodes",
            json!({"metadata":{"name":"node-3"}}),
            json!([
                "node-3",
                "Unknown",
                "<none>",
                "<unknown>",
                "",
                "<none>",
                "<none>",
                "<unknown>",
                "<unknown>",
                "<unknown>"
            ]),
        );
    }

    #[test]
    fn events_print_last_seen_type_reason_object_and_message() {
        check_cells(
            "events",
            json!({"metadata":{"name":"web.17a","namespace":"default"},
                "involvedObject":{"kind":"ReplicationController","name":"web","fieldPath":""},
                "reason":"SuccessfulCreate","message":"Created pod: web-abcde\n","type":"Normal",
                "source":{"component":"replication-controller"},
                "firstTimestamp":"2026-11-26T18:01:03Z","lastTimestamp":"2026-11-26T18:10:03Z","count":3}),
            json!([
                "60s",
                "Normal",
                "SuccessfulCreate",
                "replicationcontroller/web",
                "",
                "replication-controller",
                "Created pod: web-abcde",
                "10m",
                3,
                "web.17a"
            ]),
        );
        // events.k8s.io-style: eventTime, series, reporting controller and instance.
        check_cells(
            "events",
            json!({"metadata":{"name":"e2"},"involvedObject":{"kind":"Pod","name":"p",
                    "fieldPath":"spec.containers{c}"},
                "reason":"Pulled","type":"Normal","message":"ok",
                "eventTime":"2026-11-26T18:01:03.000000Z","reportingController":"kubelet",
                "reportingInstance":"node-1",
                "series":{"count":5,"lastObservedTime":"2026-11-26T18:11:00.000000Z"}}),
            json!([
                "3s",
                "Normal",
                "Pulled",
                "pod/p",
                "spec.containers{c}",
                "kubelet, node-1",
                "ok",
                "10m",
                5,
                "e2"
            ]),
        );
        // Singleton without count or timestamps, about an object without a name.
        check_cells(
            "events",
            json!({"metadata":{"name":"e3"},"involvedObject":{"kind":"Node"},"type":"Warning",
                "source":{"component":"kubelet","host":"node-1"}}),
            json!([
                "<unknown>",
                "Warning",
                "",
                "node",
                "",
                "kubelet, node-1",
                "",
                "<unknown>",
                1,
                "e3"
            ]),
        );
    }

    #[test]
    fn unknown_resources_print_name_and_age() {
        check_cells(
            "widgets",
            json!({"metadata":{"name":"w","creationTimestamp":"2026-11-26T18:01:03Z"}}),
            json!(["w", "10m"]),
        );
    }

    #[test]
    fn every_served_resource_prints_one_cell_per_column() {
        for resource in super::super::resources::RESOURCES {
            let object = json!({"metadata": {"name": "x"}});
            let cells = (resource.printer.cells)(&object, now()).0;
            assert_eq!(
                cells.len(),
                resource.printer.columns.len(),
                "{}",
                resource.plural
            );
        }
    }

    #[test]
    fn garbage_objects_print_zero_values_without_panicking() {
        let resources = [
            "pods",
            "replicationcontrollers",
            "replicasets",
            "deployments",
            "services",
            "endpoints",
            "namespaces",
            "nodes",
            "events",
            "other",
        ];
        for resource in resources {
            for object in [
                json!(null),
                json!(7),
                json!("x"),
                json!([1]),
                json!({}),
                json!({"metadata":"x","spec":[],"status":7}),
                json!({"metadata":{"name":5,"creationTimestamp":9},
                    "spec":{"containers":"x","replicas":"3","ports":[1,"x"],"selector":[1],
                        "template":{"spec":{"containers":[1]}}},
                    "status":{"containerStatuses":[1,{"state":"x"}],"conditions":"x",
                        "initContainerStatuses":[null],"podIPs":[3]},
                    "subsets":[1,{"addresses":[2],"ports":[3]}],
                    "series":{"count":"x"}}),
            ] {
                for include in [
                    IncludeObject::None,
                    IncludeObject::Metadata,
                    IncludeObject::Object,
                ] {
                    let row = row(printer(resource), &object, include, now());
                    assert_eq!(
                        row["cells"].as_array().unwrap().len(),
                        column_definitions(printer(resource)).len(),
                        "{resource} {object}"
                    );
                }
            }
        }
    }

    // ---- rows, tables, includeObject ----------------------------------------------------

    #[test]
    fn include_object_parses_the_query_parameter() {
        #[track_caller]
        fn check(value: Option<&str>, expected: Option<IncludeObject>) {
            assert_eq!(
                IncludeObject::from_query_parameter(value),
                expected,
                "{value:?}"
            );
        }
        check(None, Some(IncludeObject::Metadata));
        check(Some("None"), Some(IncludeObject::None));
        check(Some("Metadata"), Some(IncludeObject::Metadata));
        check(Some("Object"), Some(IncludeObject::Object));
        check(Some("object"), None);
        check(Some(""), None);
        assert_eq!(IncludeObject::default(), IncludeObject::Metadata);
    }

    #[test]
    fn rows_carry_partial_object_metadata_the_whole_object_or_nothing() {
        let pod = served_pod();
        let metadata_row = row(printer("pods"), &pod, IncludeObject::Metadata, now());
        assert_eq!(
            metadata_row["object"],
            json!({"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",
                "metadata":pod["metadata"].clone()})
        );
        assert_eq!(
            row(printer("pods"), &pod, IncludeObject::Object, now())["object"],
            pod
        );
        let none_row = row(printer("pods"), &pod, IncludeObject::None, now());
        assert_eq!(none_row.get("object"), None);
        assert_eq!(none_row.as_object().unwrap().len(), 1);
        // An object without metadata still gets PartialObjectMetadata.
        assert_eq!(
            row(
                printer("namespaces"),
                &json!({}),
                IncludeObject::Metadata,
                now()
            )["object"]["metadata"],
            json!({})
        );
    }

    #[test]
    fn tables_carry_list_metadata_columns_and_rows() {
        let pods = [served_pod(), served_pod()];
        let table = table(
            printer("pods"),
            &pods,
            IncludeObject::Metadata,
            now(),
            "144",
            Some("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTQ0LCJzdGFydCI6Mn0="),
            Some(3),
            true,
        );
        assert_eq!(table["kind"], json!("Table"));
        assert_eq!(table["apiVersion"], json!("meta.k8s.io/v1"));
        assert_eq!(
            table["metadata"],
            json!({"resourceVersion":"144",
                "continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTQ0LCJzdGFydCI6Mn0=",
                "remainingItemCount":3})
        );
        assert_eq!(table["columnDefinitions"].as_array().unwrap().len(), 9);
        assert_eq!(table["rows"].as_array().unwrap().len(), 2);
        assert_eq!(table["rows"][0]["cells"][0], json!("app-6fc9fd9bcf-rfq96"));
    }

    #[test]
    fn watch_event_tables_after_the_first_leave_out_column_definitions() {
        let table = table(
            printer("pods"),
            &[served_pod()],
            IncludeObject::Metadata,
            now(),
            "",
            None,
            None,
            false,
        );
        assert_eq!(
            table.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["kind", "apiVersion", "metadata", "rows"]
        );
        assert_eq!(table["metadata"], json!({}));
        let empty = super::table(
            printer("pods"),
            &[],
            IncludeObject::None,
            now(),
            "7",
            Some(""),
            None,
            true,
        );
        assert_eq!(empty["rows"], json!([]));
        assert_eq!(empty["metadata"], json!({"resourceVersion":"7"}));
    }

    #[test]
    fn column_definitions_follow_printers_go() {
        #[track_caller]
        fn check(resource: &str, expected: &[(&str, &str, i64)]) {
            let columns = column_definitions(printer(resource));
            let got: Vec<(&str, &str, i64)> = columns
                .iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap(),
                        c["type"].as_str().unwrap(),
                        c["priority"].as_i64().unwrap(),
                    )
                })
                .collect();
            assert_eq!(got, expected, "{resource}");
            for column in &columns {
                let keys: Vec<&String> = column.as_object().unwrap().keys().collect();
                assert_eq!(keys, ["name", "type", "format", "description", "priority"]);
                assert!(!column["description"].as_str().unwrap().is_empty());
                let format = if column["name"] == "Name" { "name" } else { "" };
                assert_eq!(column["format"], json!(format), "{resource} {column}");
            }
        }
        let s = "string";
        let i = "integer";
        check(
            "pods",
            &[
                ("Name", s, 0),
                ("Ready", s, 0),
                ("Status", s, 0),
                ("Restarts", s, 0),
                ("Age", s, 0),
                ("IP", s, 1),
                ("Node", s, 1),
                ("Nominated Node", s, 1),
                ("Readiness Gates", s, 1),
            ],
        );
        for resource in ["replicationcontrollers", "replicasets"] {
            check(
                resource,
                &[
                    ("Name", s, 0),
                    ("Desired", i, 0),
                    ("Current", i, 0),
                    ("Ready", i, 0),
                    ("Age", s, 0),
                    ("Containers", s, 1),
                    ("Images", s, 1),
                    ("Selector", s, 1),
                ],
            );
        }
        check(
            "deployments",
            &[
                ("Name", s, 0),
                ("Ready", s, 0),
                ("Up-to-date", s, 0),
                ("Available", s, 0),
                ("Age", s, 0),
                ("Containers", s, 1),
                ("Images", s, 1),
                ("Selector", s, 1),
            ],
        );
        check(
            "services",
            &[
                ("Name", s, 0),
                ("Type", s, 0),
                ("Cluster-IP", s, 0),
                ("External-IP", s, 0),
                ("Port(s)", s, 0),
                ("Age", s, 0),
                ("Selector", s, 1),
            ],
        );
        check(
            "endpoints",
            &[("Name", s, 0), ("Endpoints", s, 0), ("Age", s, 0)],
        );
        check(
            "namespaces",
            &[("Name", s, 0), ("Status", s, 0), ("Age", s, 0)],
        );
        check(
            "nodes",
            &[
                ("Name", s, 0),
                ("Status", s, 0),
                ("Roles", s, 0),
                ("Age", s, 0),
                ("Version", s, 0),
                ("Internal-IP", s, 1),
                ("External-IP", s, 1),
                ("OS-Image", s, 1),
                ("Kernel-Version", s, 1),
                ("Container-Runtime", s, 1),
            ],
        );
        check(
            "events",
            &[
                ("Last Seen", s, 0),
                ("Type", s, 0),
                ("Reason", s, 0),
                ("Object", s, 0),
                ("Subobject", s, 1),
                ("Source", s, 1),
                ("Message", s, 0),
                ("First Seen", s, 1),
                ("Count", s, 1),
                ("Name", s, 1),
            ],
        );
        check("anything", &[("Name", s, 0), ("Age", s, 0)]);
    }
}
