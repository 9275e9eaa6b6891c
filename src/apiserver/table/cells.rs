//! The cells of each served kind's row: printers.go's `printPod`,
//! `printReplicationController`, `printReplicaSet`, `printDeployment`, `printService`,
//! `printEndpoints`, `printNamespace`, `printNode`, `printEvent`, `printConfigMap`,
//! `printSecret`, `printServiceAccount` and `printLease`.

use std::time::SystemTime;

use serde_json::{json, Value};

use super::format::{
    format_label_selector, format_labels, label_selector_string, parse_timestamp, plain_string,
};
use super::{array_at, bool_at, desired_replicas, integer_at, string_at, value_at, Cell};

/// `layoutContainerCells`: container names and images, comma-separated.
pub(super) fn container_cells(pod_spec: Option<&Value>) -> (String, String) {
    let containers = pod_spec
        .and_then(|spec| spec.get("containers"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let names: Vec<&str> = containers.iter().map(|c| string_at(c, &["name"])).collect();
    let images: Vec<&str> = containers
        .iter()
        .map(|c| string_at(c, &["image"]))
        .collect();
    (names.join(","), images.join(","))
}

/// A pod's `lastState.terminated.finishedAt`, if set and parsable.
pub(super) fn last_termination_time(container_status: &Value) -> Option<SystemTime> {
    value_at(container_status, &["lastState", "terminated", "finishedAt"])
        .and_then(Value::as_str)
        .and_then(parse_timestamp)
}

pub(super) fn later(
    current: Option<SystemTime>,
    candidate: Option<SystemTime>,
) -> Option<SystemTime> {
    match (current, candidate) {
        (Some(current), Some(candidate)) if candidate > current => Some(candidate),
        (None, candidate) => candidate,
        (current, _) => current,
    }
}

pub(super) fn has_condition(pod: &Value, condition_type: &str) -> bool {
    array_at(pod, &["status", "conditions"])
        .iter()
        .any(|c| string_at(c, &["type"]) == condition_type && string_at(c, &["status"]) == "True")
}

/// Restarts counted over a pod's containers, and the last time one of them terminated.
#[derive(Clone, Copy, Default)]
struct Restarts {
    count: i64,
    last: Option<SystemTime>,
}

impl Restarts {
    fn add(&mut self, container: &Value) {
        self.count += integer_at(container, &["restartCount"]);
        self.last = later(self.last, last_termination_time(container));
    }
}

/// What `printPod` gathers from a pod's container statuses.
struct PodProgress {
    reason: String,
    ready: i64,
    restarts: Restarts,
}

/// `printPod`.
pub(super) fn pod_cells(pod: &Value) -> (Vec<Cell>, Option<Value>) {
    let phase = value_at(pod, &["status", "phase"])
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    let status_reason = string_at(pod, &["status", "reason"]);
    let conditions = match phase {
        "Succeeded" => Some(
            json!([{"type": "Completed", "status": "True", "reason": "Succeeded",
            "message": "The pod has completed successfully."}]),
        ),
        "Failed" => Some(
            json!([{"type": "Completed", "status": "True", "reason": "Failed",
            "message": "The pod failed."}]),
        ),
        _ => None,
    };
    let init_containers = array_at(pod, &["spec", "initContainers"]);
    let total_containers = array_at(pod, &["spec", "containers"]).len()
        + init_containers
            .iter()
            .filter(|c| string_at(c, &["restartPolicy"]) == "Always")
            .count();
    let PodProgress {
        mut reason,
        ready,
        restarts,
    } = container_progress(pod, phase_reason(pod, phase, status_reason));

    let deleting = value_at(pod, &["metadata", "deletionTimestamp"]).is_some_and(|t| !t.is_null());
    if deleting && status_reason == "NodeLost" {
        reason = "Unknown".to_string();
    } else if deleting && !matches!(phase, "Succeeded" | "Failed") {
        reason = "Terminating".to_string();
    }

    let restarts_cell = match restarts.last {
        Some(date) if restarts.count != 0 => Cell::CountSince(restarts.count, date),
        _ => Cell::from(restarts.count.to_string()),
    };
    let pod_ip = array_at(pod, &["status", "podIPs"])
        .first()
        .map(|ip| string_at(ip, &["ip"]))
        .filter(|ip| !ip.is_empty())
        .or_else(|| Some(string_at(pod, &["status", "podIP"])).filter(|ip| !ip.is_empty()))
        .unwrap_or("<none>");
    let or_none = |path: &[&str]| Some(string_at(pod, path)).filter(|n| !n.is_empty());
    let cells = vec![
        Cell::from(string_at(pod, &["metadata", "name"])),
        Cell::from(format!("{ready}/{total_containers}")),
        Cell::from(reason),
        restarts_cell,
        age(pod),
        Cell::from(pod_ip),
        Cell::from(or_none(&["spec", "nodeName"]).unwrap_or("<none>")),
        Cell::from(or_none(&["status", "nominatedNodeName"]).unwrap_or("<none>")),
        Cell::from(readiness_gates(pod)),
    ];
    (cells, conditions)
}

/// The reason printed before any container is looked at: the phase, or the pod's
/// `status.reason`, or `SchedulingGated`.
fn phase_reason(pod: &Value, phase: &str, status_reason: &str) -> String {
    let mut reason = phase.to_string();
    if !status_reason.is_empty() {
        reason = status_reason.to_string();
    }
    for condition in array_at(pod, &["status", "conditions"]) {
        if string_at(condition, &["type"]) == "PodScheduled"
            && string_at(condition, &["reason"]) == "SchedulingGated"
        {
            reason = "SchedulingGated".to_string();
        }
    }
    reason
}

/// `printPod`'s walk over the init containers, then (once they are done) the containers:
/// the reason to print, ready containers and restarts.
fn container_progress(pod: &Value, reason: String) -> PodProgress {
    let mut progress = PodProgress {
        reason,
        ready: 0,
        restarts: Restarts::default(),
    };
    let mut restartable_restarts = Restarts::default();
    let initializing = init_container_progress(pod, &mut progress, &mut restartable_restarts);
    if initializing && !has_condition(pod, "Initialized") {
        return progress;
    }
    progress.restarts = restartable_restarts;
    let mut has_running = false;
    for container in array_at(pod, &["status", "containerStatuses"]).iter().rev() {
        progress.restarts.add(container);
        let waiting_reason = string_at(container, &["state", "waiting", "reason"]);
        let terminated = value_at(container, &["state", "terminated"]).filter(|t| t.is_object());
        if !waiting_reason.is_empty() {
            progress.reason = waiting_reason.to_string();
        } else if let Some(terminated) = terminated {
            let terminated_reason = string_at(terminated, &["reason"]);
            progress.reason = if !terminated_reason.is_empty() {
                terminated_reason.to_string()
            } else if integer_at(terminated, &["signal"]) != 0 {
                format!("Signal:{}", integer_at(terminated, &["signal"]))
            } else {
                format!("ExitCode:{}", integer_at(terminated, &["exitCode"]))
            };
        } else if bool_at(container, &["ready"])
            && value_at(container, &["state", "running"]).is_some_and(Value::is_object)
        {
            has_running = true;
            progress.ready += 1;
        }
    }
    if progress.reason == "Completed" && has_running {
        progress.reason = if has_condition(pod, "Ready") {
            "Running".to_string()
        } else {
            "NotReady".to_string()
        };
    }
    progress
}

/// The init containers' part of `printPod`: counts their restarts (those of restartable
/// ones, sidecars, also into `restartable`) and ready sidecars; returns whether the pod is
/// still initializing, with the `Init:` reason set.
fn init_container_progress(
    pod: &Value,
    progress: &mut PodProgress,
    restartable: &mut Restarts,
) -> bool {
    let init_containers = array_at(pod, &["spec", "initContainers"]);
    let is_restartable = |name: &str| {
        init_containers.iter().any(|c| {
            string_at(c, &["name"]) == name && string_at(c, &["restartPolicy"]) == "Always"
        })
    };
    for (index, container) in array_at(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        progress.restarts.add(container);
        let sidecar = is_restartable(string_at(container, &["name"]));
        if sidecar {
            restartable.add(container);
        }
        let terminated = value_at(container, &["state", "terminated"]).filter(|t| t.is_object());
        let waiting_reason = string_at(container, &["state", "waiting", "reason"]);
        if terminated.is_some_and(|t| integer_at(t, &["exitCode"]) == 0) {
            continue;
        }
        if sidecar && bool_at(container, &["started"]) {
            if bool_at(container, &["ready"]) {
                progress.ready += 1;
            }
            continue;
        }
        progress.reason = if let Some(terminated) = terminated {
            let terminated_reason = string_at(terminated, &["reason"]);
            if terminated_reason.is_empty() {
                let signal = integer_at(terminated, &["signal"]);
                if signal != 0 {
                    format!("Init:Signal:{signal}")
                } else {
                    format!("Init:ExitCode:{}", integer_at(terminated, &["exitCode"]))
                }
            } else {
                format!("Init:{terminated_reason}")
            }
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{index}/{}", init_containers.len())
        };
        return true;
    }
    false
}

/// The READINESS GATES cell: how many of the pod's readiness gates are True, of how many.
fn readiness_gates(pod: &Value) -> String {
    let gates = array_at(pod, &["spec", "readinessGates"]);
    if gates.is_empty() {
        return "<none>".to_string();
    }
    let conditions = array_at(pod, &["status", "conditions"]);
    let true_conditions = gates
        .iter()
        .filter(|gate| {
            let condition_type = string_at(gate, &["conditionType"]);
            conditions
                .iter()
                .find(|c| string_at(c, &["type"]) == condition_type)
                .is_some_and(|c| string_at(c, &["status"]) == "True")
        })
        .count();
    format!("{true_conditions}/{}", gates.len())
}

/// `printReplicationController`.
pub(super) fn replication_controller_cells(rc: &Value) -> Vec<Cell> {
    let (names, images) = container_cells(value_at(rc, &["spec", "template", "spec"]));
    vec![
        Cell::from(string_at(rc, &["metadata", "name"])),
        Cell::from(desired_replicas(rc)),
        Cell::from(integer_at(rc, &["status", "replicas"])),
        Cell::from(integer_at(rc, &["status", "readyReplicas"])),
        age(rc),
        Cell::from(names),
        Cell::from(images),
        Cell::from(format_labels(value_at(rc, &["spec", "selector"]))),
    ]
}

/// `printReplicaSet`.
pub(super) fn replica_set_cells(rs: &Value) -> Vec<Cell> {
    let (names, images) = container_cells(value_at(rs, &["spec", "template", "spec"]));
    vec![
        Cell::from(string_at(rs, &["metadata", "name"])),
        Cell::from(desired_replicas(rs)),
        Cell::from(integer_at(rs, &["status", "replicas"])),
        Cell::from(integer_at(rs, &["status", "readyReplicas"])),
        age(rs),
        Cell::from(names),
        Cell::from(images),
        Cell::from(format_label_selector(value_at(rs, &["spec", "selector"]))),
    ]
}

/// `printDeployment`.
pub(super) fn deployment_cells(deployment: &Value) -> Vec<Cell> {
    let (names, images) = container_cells(value_at(deployment, &["spec", "template", "spec"]));
    let selector = label_selector_string(value_at(deployment, &["spec", "selector"]))
        .unwrap_or_else(|_| "<invalid>".to_string());
    vec![
        Cell::from(string_at(deployment, &["metadata", "name"])),
        Cell::from(format!(
            "{}/{}",
            integer_at(deployment, &["status", "readyReplicas"]),
            desired_replicas(deployment)
        )),
        Cell::from(integer_at(deployment, &["status", "updatedReplicas"])),
        Cell::from(integer_at(deployment, &["status", "availableReplicas"])),
        age(deployment),
        Cell::from(names),
        Cell::from(images),
        Cell::from(selector),
    ]
}

pub(super) fn strings_at<'a>(value: &'a Value, path: &[&str]) -> Vec<&'a str> {
    array_at(value, path)
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

/// `getServiceExternalIP` (wide).
pub(super) fn service_external_ip(service: &Value) -> String {
    let external_ips = strings_at(service, &["spec", "externalIPs"]);
    match string_at(service, &["spec", "type"]) {
        "ClusterIP" | "NodePort" => {
            if external_ips.is_empty() {
                "<none>".to_string()
            } else {
                external_ips.join(",")
            }
        }
        "LoadBalancer" => {
            let mut ingress: Vec<&str> = array_at(service, &["status", "loadBalancer", "ingress"])
                .iter()
                .filter_map(|i| {
                    let ip = string_at(i, &["ip"]);
                    let hostname = string_at(i, &["hostname"]);
                    if !ip.is_empty() {
                        Some(ip)
                    } else if !hostname.is_empty() {
                        Some(hostname)
                    } else {
                        None
                    }
                })
                .collect();
            ingress.sort_unstable();
            ingress.dedup();
            if !external_ips.is_empty() {
                ingress.extend(external_ips);
                return ingress.join(",");
            }
            if ingress.is_empty() {
                "<pending>".to_string()
            } else {
                ingress.join(",")
            }
        }
        "ExternalName" => string_at(service, &["spec", "externalName"]).to_string(),
        _ => "<unknown>".to_string(),
    }
}

/// `makePortString`: `80/TCP`, `80:30080/TCP`, comma-separated.
pub(super) fn service_ports(service: &Value) -> String {
    array_at(service, &["spec", "ports"])
        .iter()
        .map(|port| {
            let number = integer_at(port, &["port"]);
            let protocol = string_at(port, &["protocol"]);
            let node_port = integer_at(port, &["nodePort"]);
            if node_port > 0 {
                format!("{number}:{node_port}/{protocol}")
            } else {
                format!("{number}/{protocol}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `printService`.
pub(super) fn service_cells(service: &Value) -> Vec<Cell> {
    let cluster_ip = match array_at(service, &["spec", "clusterIPs"]).first() {
        Some(ip) => ip.as_str().unwrap_or("").to_string(),
        None => Some(string_at(service, &["spec", "clusterIP"]))
            .filter(|ip| !ip.is_empty())
            .unwrap_or("<none>")
            .to_string(),
    };
    let ports = Some(service_ports(service))
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "<none>".to_string());
    vec![
        Cell::from(string_at(service, &["metadata", "name"])),
        Cell::from(string_at(service, &["spec", "type"])),
        Cell::from(cluster_ip),
        Cell::from(service_external_ip(service)),
        Cell::from(ports),
        age(service),
        Cell::from(format_labels(value_at(service, &["spec", "selector"]))),
    ]
}

/// `formatEndpoints(endpoints, nil)`: up to three `ip:port`, then `+ N more...`.
pub(super) fn format_endpoints(endpoints: &Value) -> String {
    let subsets = array_at(endpoints, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    const MAX: usize = 3;
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0usize;
    for subset in subsets {
        let addresses = array_at(subset, &["addresses"]);
        let ports = array_at(subset, &["ports"]);
        if ports.is_empty() {
            // Headless services with no ports.
            count += addresses.len();
            for address in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(string_at(address, &["ip"]).to_string());
            }
            continue;
        }
        for port in ports {
            count += addresses.len();
            for address in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                let ip = string_at(address, &["ip"]);
                let number = integer_at(port, &["port"]);
                list.push(if ip.contains(':') {
                    format!("[{ip}]:{number}")
                } else {
                    format!("{ip}:{number}")
                });
            }
        }
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", count - MAX)
    } else {
        joined
    }
}

/// `printEndpoints`.
pub(super) fn endpoints_cells(endpoints: &Value) -> Vec<Cell> {
    vec![
        Cell::from(string_at(endpoints, &["metadata", "name"])),
        Cell::from(format_endpoints(endpoints)),
        age(endpoints),
    ]
}

/// `printNamespace`.
pub(super) fn namespace_cells(namespace: &Value) -> Vec<Cell> {
    let phase = value_at(namespace, &["status", "phase"])
        .and_then(Value::as_str)
        .unwrap_or("Active");
    vec![
        Cell::from(string_at(namespace, &["metadata", "name"])),
        Cell::from(phase),
        age(namespace),
    ]
}

/// `findNodeRoles`: `node-role.kubernetes.io/<role>` labels and `kubernetes.io/role`.
pub(super) fn node_roles(node: &Value) -> String {
    let mut roles: Vec<String> = Vec::new();
    if let Some(labels) = value_at(node, &["metadata", "labels"]).and_then(Value::as_object) {
        for (key, value) in labels {
            if let Some(role) = key.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.push(role.to_string());
                }
            } else if key == "kubernetes.io/role" {
                let role = plain_string(value);
                if !role.is_empty() && !value.is_null() {
                    roles.push(role);
                }
            }
        }
    }
    roles.sort();
    roles.dedup();
    if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    }
}

pub(super) fn node_address(node: &Value, address_type: &str) -> String {
    array_at(node, &["status", "addresses"])
        .iter()
        .find(|a| string_at(a, &["type"]) == address_type)
        .map(|a| string_at(a, &["address"]).to_string())
        .unwrap_or_else(|| "<none>".to_string())
}

/// `printNode`.
pub(super) fn node_cells(node: &Value) -> Vec<Cell> {
    let mut status: Vec<&str> = Vec::new();
    // The last Ready condition wins, as in printNode's condition map.
    if let Some(ready) = array_at(node, &["status", "conditions"])
        .iter()
        .rev()
        .find(|c| string_at(c, &["type"]) == "Ready")
    {
        status.push(if string_at(ready, &["status"]) == "True" {
            "Ready"
        } else {
            "NotReady"
        });
    }
    if status.is_empty() {
        status.push("Unknown");
    }
    if bool_at(node, &["spec", "unschedulable"]) {
        status.push("SchedulingDisabled");
    }
    let node_info = |field: &str| {
        Some(string_at(node, &["status", "nodeInfo", field]))
            .filter(|s| !s.is_empty())
            .unwrap_or("<unknown>")
            .to_string()
    };
    vec![
        Cell::from(string_at(node, &["metadata", "name"])),
        Cell::from(status.join(",")),
        Cell::from(node_roles(node)),
        age(node),
        Cell::from(string_at(node, &["status", "nodeInfo", "kubeletVersion"])),
        Cell::from(node_address(node, "InternalIP")),
        Cell::from(node_address(node, "ExternalIP")),
        Cell::from(node_info("osImage")),
        Cell::from(node_info("kernelVersion")),
        Cell::from(node_info("containerRuntimeVersion")),
    ]
}

/// A timestamp field that is set (not missing, null or empty).
pub(super) fn set_timestamp<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    value_at(value, path)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// `formatEventSource`: component (or reportingController), then host (or
/// reportingInstance) when set.
pub(super) fn event_source(event: &Value) -> String {
    let first_non_empty = |a: &str, b: &str| {
        if a.is_empty() {
            b.to_string()
        } else {
            a.to_string()
        }
    };
    let component = first_non_empty(
        string_at(event, &["source", "component"]),
        string_at(event, &["reportingController"]),
    );
    let host = first_non_empty(
        string_at(event, &["source", "host"]),
        string_at(event, &["reportingInstance"]),
    );
    if host.is_empty() {
        component
    } else {
        format!("{component}, {host}")
    }
}

/// `printEvent` (wide).
pub(super) fn event_cells(event: &Value) -> Vec<Cell> {
    let first_timestamp = match set_timestamp(event, &["firstTimestamp"]) {
        Some(first) => Cell::since(Some(first)),
        None => Cell::since(set_timestamp(event, &["eventTime"])),
    };
    let mut last_timestamp = match set_timestamp(event, &["lastTimestamp"]) {
        Some(last) => Cell::since(Some(last)),
        None => first_timestamp.clone(),
    };
    let mut count = integer_at(event, &["count"]);
    if let Some(series) = value_at(event, &["series"]).filter(|s| s.is_object()) {
        last_timestamp = Cell::since(set_timestamp(series, &["lastObservedTime"]));
        count = integer_at(series, &["count"]);
    } else if count == 0 {
        count = 1;
    }
    let kind = string_at(event, &["involvedObject", "kind"]).to_lowercase();
    let name = string_at(event, &["involvedObject", "name"]);
    let target = if name.is_empty() {
        kind
    } else {
        format!("{kind}/{name}")
    };
    vec![
        last_timestamp,
        Cell::from(string_at(event, &["type"])),
        Cell::from(string_at(event, &["reason"])),
        Cell::from(target),
        Cell::from(string_at(event, &["involvedObject", "fieldPath"])),
        Cell::from(event_source(event)),
        Cell::from(string_at(event, &["message"]).trim()),
        first_timestamp,
        Cell::from(count),
        Cell::from(string_at(event, &["metadata", "name"])),
    ]
}

/// How many keys or items `object[field]` holds (0 when it is neither a map nor a list).
pub(crate) fn count(object: &Value, field: &str) -> usize {
    match object.get(field) {
        Some(Value::Object(map)) => map.len(),
        Some(Value::Array(items)) => items.len(),
        _ => 0,
    }
}

/// The Age cell: `translateTimestampSince(metadata.creationTimestamp)`.
pub(crate) fn age(object: &Value) -> Cell {
    Cell::since(value_at(object, &["metadata", "creationTimestamp"]).and_then(Value::as_str))
}

/// The Name cell.
pub(crate) fn name(object: &Value) -> Cell {
    Cell::from(string_at(object, &["metadata", "name"]))
}

#[cfg(test)]
mod tests;
