//! The Node object a kubelet posts: `{prefix}/nodes/{name}`, written each time the kubelet
//! gains its registration (at start, and after a lapsed registration is taken again), and
//! again when it is deleted while the kubelet holds its registration (`kubectl delete
//! node`: the new one has a new `uid`).
//!
//! Kubernetes' `pkg/kubelet/kubelet_node_status.go` (`registerWithAPIServer`,
//! `initialNode`, `setNodeStatus` and the setters of `pkg/kubelet/nodestatus`); no 2014
//! original: 2014's minions were records the minion controller wrote, without status. The
//! later kubelet also posts its status periodically and renews a Lease; kcm's heartbeat is
//! the registration's etcd lease, so the Node is written once per registration, and the
//! node lifecycle controller (`nodelifecycle`) marks it `Unknown` once the registration has
//! been gone for its grace period.
//!
//! The document is core/v1 JSON (`kind: Node`, `apiVersion: v1`). The kubelet owns
//! `metadata.name`, its three labels, `spec.podCIDR(s)`, `status.capacity.pods` and
//! `status.allocatable.pods`, `status.addresses`, its four conditions and the `nodeInfo`
//! fields it sets; everything else (other labels, annotations, taints, `unschedulable`,
//! fields kcm does not know) is kept, and `uid` and `creationTimestamp` are set only by
//! the first write.
//!
//! Invariants: the document is created only if absent and otherwise replaced by
//! compare-and-swap on the revision read; every write is guarded by the registration's
//! incarnation (the kubelet's registry), so a kubelet whose registration lapsed posts
//! nothing.

use std::net::Ipv4Addr;

use serde_json::{json, Map, Value};

use super::{ids, KubeletConfig};
use crate::api::{
    self, node_condition_mut, object_field, ResourceVersion, CONDITION_FALSE, CONDITION_TRUE,
    NODE_API_VERSION, NODE_KIND, NODE_READY,
};
use crate::registry::{Registry, StorageError};

/// `status.nodeInfo.kubeletVersion`: a Kubernetes version kubectl accepts, then kcm's.
pub const KUBELET_VERSION: &str = concat!("v1.32.0-kcm.", env!("CARGO_PKG_VERSION"));
/// `status.nodeInfo.containerRuntimeVersion`.
pub const CONTAINER_RUNTIME_VERSION: &str = "kcm-simulated";
/// `status.nodeInfo.osImage`.
pub const OS_IMAGE: &str = "kcm simulated node";
/// `status.nodeInfo.kubeProxyVersion`: deprecated, and kcm runs no kube-proxy, but the v1
/// schema requires the field, so it is written empty.
pub const KUBE_PROXY_VERSION: &str = "";
/// `status.nodeInfo.kernelVersion` when the host's cannot be read.
const UNKNOWN_KERNEL: &str = "unknown";

/// What a node reports about its machine in `status.nodeInfo` (every field of which the
/// v1 schema requires): what a real kubelet reads from `/etc/machine-id`, the DMI product
/// UUID, `/proc/sys/kernel/random/boot_id` and `uname -r`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemInfo {
    /// `machineID`: made up from the node's name ([`ids::machine_id`]), so a node keeps
    /// it across restarts, as a machine does.
    pub machine_id: String,
    /// `systemUUID`: made up from the node's name ([`ids::system_uuid`]).
    pub system_uuid: String,
    /// `bootID`: a random UUID per kubelet process, each start being the node's "boot".
    pub boot_id: String,
    /// `kernelVersion`: the host's kernel release (the nodes share the host's kernel).
    pub kernel_version: String,
}

impl SystemInfo {
    /// The system info of node `node` on this host, booted now: a fresh `bootID`, the
    /// kernel release from `/proc/sys/kernel/osrelease` (`unknown` when unreadable).
    pub fn detect(node: &str) -> SystemInfo {
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|release| release.trim().to_string())
            .filter(|release| !release.is_empty())
            .unwrap_or_else(|| UNKNOWN_KERNEL.to_string());
        SystemInfo::new(node, uuid::Uuid::new_v4().to_string(), kernel)
    }

    /// The system info of node `node` with the given boot ID and kernel release.
    pub fn new(node: &str, boot_id: String, kernel_version: String) -> SystemInfo {
        SystemInfo {
            machine_id: ids::machine_id(node),
            system_uuid: ids::system_uuid(node),
            boot_id,
            kernel_version,
        }
    }
}

/// How often one post re-reads the document after losing a compare-and-swap.
const MAX_ATTEMPTS: usize = 5;

/// The conditions the kubelet posts besides Ready (Kubernetes' `MemoryPressureCondition`,
/// `DiskPressureCondition`, `PIDPressureCondition` setters): type, reason, message. A
/// simulated node has no pressure of any kind.
const PRESSURE_CONDITIONS: [(&str, &str, &str); 3] = [
    (
        "MemoryPressure",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    (
        "DiskPressure",
        "KubeletHasNoDiskPressure",
        "kubelet has no disk pressure",
    ),
    (
        "PIDPressure",
        "KubeletHasSufficientPID",
        "kubelet has sufficient PID available",
    ),
];

/// `GOARCH` of this machine, for `nodeInfo.architecture` and the `kubernetes.io/arch`
/// label.
pub fn architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    }
}

/// The node's address (`InternalIP`): the first address of its pod CIDR, which the IP
/// allocator never hands to a pod (the bridge's address on a real node).
pub fn internal_ip(config: &KubeletConfig) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(config.pod_cidr.network()) + 1)
}

/// The Node document node `config.node` on machine `system` posts at `now` (RFC 3339)
/// over `existing` (the stored document, if any): `existing` with the fields the kubelet
/// owns set, a new `uid` (from `new_uid`) and `creationTimestamp` only when it has none.
/// Pure.
pub fn node_document(
    existing: Option<&Value>,
    config: &KubeletConfig,
    system: &SystemInfo,
    now: &str,
    new_uid: impl FnOnce() -> String,
) -> Value {
    let mut node = match existing {
        Some(Value::Object(fields)) => fields.clone(),
        _ => Map::new(),
    };
    node.insert("kind".into(), Value::from(NODE_KIND));
    node.insert("apiVersion".into(), Value::from(NODE_API_VERSION));

    let meta = object_field(&mut node, "metadata");
    meta.insert("name".into(), Value::from(config.node.as_str()));
    // Cluster-scoped; the revision lives in etcd, not in the document.
    meta.remove("namespace");
    meta.remove("resourceVersion");
    if !has_text(meta.get("uid")) {
        meta.insert("uid".into(), Value::from(new_uid()));
    }
    if !has_text(meta.get("creationTimestamp")) {
        meta.insert("creationTimestamp".into(), Value::from(now));
    }
    let labels = object_field(meta, "labels");
    for (key, value) in [
        ("kubernetes.io/hostname", config.node.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", architecture()),
    ] {
        labels.insert(key.into(), Value::from(value));
    }

    let cidr = config.pod_cidr.to_string();
    let spec = object_field(&mut node, "spec");
    spec.insert("podCIDR".into(), Value::from(cidr.as_str()));
    spec.insert("podCIDRs".into(), json!([cidr]));

    let status = object_field(&mut node, "status");
    let pods = config.max_pods.to_string();
    for field in ["capacity", "allocatable"] {
        object_field(status, field).insert("pods".into(), Value::from(pods.as_str()));
    }
    status.insert(
        "addresses".into(),
        json!([
            {"type": "InternalIP", "address": internal_ip(config).to_string()},
            {"type": "Hostname", "address": config.node},
        ]),
    );
    let info = object_field(status, "nodeInfo");
    for (key, value) in [
        ("machineID", system.machine_id.as_str()),
        ("systemUUID", system.system_uuid.as_str()),
        ("bootID", system.boot_id.as_str()),
        ("kernelVersion", system.kernel_version.as_str()),
        ("osImage", OS_IMAGE),
        ("containerRuntimeVersion", CONTAINER_RUNTIME_VERSION),
        ("kubeletVersion", KUBELET_VERSION),
        ("kubeProxyVersion", KUBE_PROXY_VERSION),
        ("operatingSystem", "linux"),
        ("architecture", architecture()),
    ] {
        info.insert(key.into(), Value::from(value));
    }

    for (type_, reason, message) in PRESSURE_CONDITIONS {
        post_condition(&mut node, type_, CONDITION_FALSE, reason, message, now);
    }
    post_condition(
        &mut node,
        NODE_READY,
        CONDITION_TRUE,
        "KubeletReady",
        "kubelet is posting ready status",
        now,
    );
    Value::Object(node)
}

/// Sets condition `type_` of `node` as the kubelet reports it at `now`: the heartbeat is
/// now, the transition is now unless the status is unchanged.
fn post_condition(
    node: &mut Map<String, Value>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
) {
    let condition = node_condition_mut(node, type_);
    let unchanged = condition.get("status").and_then(Value::as_str) == Some(status)
        && has_text(condition.get("lastTransitionTime"));
    condition.insert("status".into(), Value::from(status));
    condition.insert("lastHeartbeatTime".into(), Value::from(now));
    if !unchanged {
        condition.insert("lastTransitionTime".into(), Value::from(now));
    }
    condition.insert("reason".into(), Value::from(reason));
    condition.insert("message".into(), Value::from(message));
}

fn has_text(value: Option<&Value>) -> bool {
    value
        .and_then(Value::as_str)
        .is_some_and(|text| !text.is_empty())
}

/// What a post did: whether it created the document, the revision it wrote, and the
/// document written.
#[derive(Debug, PartialEq)]
pub(super) struct Posted {
    pub created: bool,
    pub revision: ResourceVersion,
    pub document: Value,
}

/// Posts the Node document of `config.node` on `system` through `registry` (the kubelet's
/// guarded registry), as [`write_document`] writes.
///
/// # Errors
/// As [`write_document`].
pub(super) async fn post_node(
    registry: &Registry,
    config: &KubeletConfig,
    system: &SystemInfo,
) -> Result<Posted, StorageError> {
    let key = api::node_key(registry.prefix(), &config.node);
    let new_uid = || uuid::Uuid::new_v4().to_string();
    write_document(registry, &key, NODE_KIND, |existing| {
        node_document(existing, config, system, &api::now_rfc3339(), new_uid)
    })
    .await
}

/// Writes at `key` the document of kind `kind` that `build` makes of the one stored there
/// (`None` when there is none): created if absent, else replaced by compare-and-swap on the
/// revision read, read again after a conflict. A stored value that is not a JSON object
/// is replaced. Field ownership is recorded when the stored document tracks it.
///
/// # Errors
/// `OwnerGone` when the registration is gone; `Conflict` after [`MAX_ATTEMPTS`] lost
/// races; etcd failures.
pub(super) async fn write_document(
    registry: &Registry,
    key: &str,
    kind: &str,
    mut build: impl FnMut(Option<&Value>) -> Value,
) -> Result<Posted, StorageError> {
    let mut last_error = None;
    for _ in 0..MAX_ATTEMPTS {
        let error = match registry.get_raw(key).await? {
            None => {
                let document = build(None);
                match registry.create_raw(key, encode(&document)).await {
                    Ok(revision) => {
                        return Ok(Posted {
                            created: true,
                            revision,
                            document,
                        })
                    }
                    Err(e) => e,
                }
            }
            Some(stored) => {
                let existing = match serde_json::from_slice::<Value>(&stored.value) {
                    Ok(value @ Value::Object(_)) => Some(value),
                    Ok(_) | Err(_) => {
                        tracing::warn!(%key, revision = stored.mod_revision,
                            "the stored {kind} is not a JSON object; replacing it");
                        None
                    }
                };
                let mut document = build(existing.as_ref());
                if let Some(existing) = &existing {
                    registry.record_document(kind, existing, &mut document);
                }
                let expected = ResourceVersion(stored.mod_revision);
                match registry.update_raw(key, expected, encode(&document)).await {
                    Ok(revision) => {
                        return Ok(Posted {
                            created: false,
                            revision,
                            document,
                        })
                    }
                    Err(e) => e,
                }
            }
        };
        match error {
            StorageError::AlreadyExists { .. } | StorageError::Conflict { .. } => {
                tracing::debug!(%key, error = %error, "{kind} changed while writing it; reading it again");
                last_error = Some(error);
            }
            error => return Err(error),
        }
    }
    Err(last_error.expect("the loop ran at least once"))
}

fn encode(document: &Value) -> Vec<u8> {
    serde_json::to_vec(document).expect("a JSON value encodes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> KubeletConfig {
        KubeletConfig {
            pod_cidr: "10.244.7.0/24".parse().unwrap(),
            max_pods: 42,
            ..KubeletConfig::new("n1")
        }
    }

    fn system() -> SystemInfo {
        SystemInfo::new("n1", "boot-1".into(), "6.1.0-test".into())
    }

    #[test]
    fn the_first_post_is_a_ready_core_v1_node_with_capacity_cidr_and_addresses() {
        let node = node_document(None, &config(), &system(), "2025-01-02T03:04:05Z", || {
            "uid-1".into()
        });
        let arch = architecture();
        assert_eq!(
            node,
            json!({
                "kind": "Node",
                "apiVersion": "v1",
                "metadata": {
                    "name": "n1",
                    "uid": "uid-1",
                    "creationTimestamp": "2025-01-02T03:04:05Z",
                    "labels": {
                        "kubernetes.io/hostname": "n1",
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": arch,
                    },
                },
                "spec": {"podCIDR": "10.244.7.0/24", "podCIDRs": ["10.244.7.0/24"]},
                "status": {
                    "capacity": {"pods": "42"},
                    "allocatable": {"pods": "42"},
                    "addresses": [
                        {"type": "InternalIP", "address": "10.244.7.1"},
                        {"type": "Hostname", "address": "n1"},
                    ],
                    "nodeInfo": {
                        "machineID": ids::machine_id("n1"),
                        "systemUUID": ids::system_uuid("n1"),
                        "bootID": "boot-1",
                        "kernelVersion": "6.1.0-test",
                        "osImage": "kcm simulated node",
                        "containerRuntimeVersion": "kcm-simulated",
                        "kubeletVersion": KUBELET_VERSION,
                        "kubeProxyVersion": "",
                        "operatingSystem": "linux",
                        "architecture": arch,
                    },
                    "conditions": [
                        {"type": "MemoryPressure", "status": "False",
                            "lastHeartbeatTime": "2025-01-02T03:04:05Z",
                            "lastTransitionTime": "2025-01-02T03:04:05Z",
                            "reason": "KubeletHasSufficientMemory",
                            "message": "kubelet has sufficient memory available"},
                        {"type": "DiskPressure", "status": "False",
                            "lastHeartbeatTime": "2025-01-02T03:04:05Z",
                            "lastTransitionTime": "2025-01-02T03:04:05Z",
                            "reason": "KubeletHasNoDiskPressure",
                            "message": "kubelet has no disk pressure"},
                        {"type": "PIDPressure", "status": "False",
                            "lastHeartbeatTime": "2025-01-02T03:04:05Z",
                            "lastTransitionTime": "2025-01-02T03:04:05Z",
                            "reason": "KubeletHasSufficientPID",
                            "message": "kubelet has sufficient PID available"},
                        {"type": "Ready", "status": "True",
                            "lastHeartbeatTime": "2025-01-02T03:04:05Z",
                            "lastTransitionTime": "2025-01-02T03:04:05Z",
                            "reason": "KubeletReady",
                            "message": "kubelet is posting ready status"},
                    ],
                },
            })
        );
        assert!(
            KUBELET_VERSION.starts_with("v1.32.0-kcm."),
            "{KUBELET_VERSION}"
        );
    }

    #[test]
    fn a_later_post_keeps_identity_and_what_others_wrote() {
        let first = node_document(None, &config(), &system(), "2025-01-01T00:00:00Z", || {
            "uid-1".into()
        });
        // What others did meanwhile: a label, a taint, a field kcm does not know, the
        // lifecycle controller's Unknown, and a stale resourceVersion in the document.
        let mut stored = first.clone();
        stored["metadata"]["labels"]["team"] = json!("a");
        stored["metadata"]["resourceVersion"] = json!("17");
        stored["spec"]["taints"] = json!([{"key": "k", "effect": "NoSchedule"}]);
        stored["status"]["capacity"]["cpu"] = json!("4");
        stored["futureField"] = json!({"x": 1});
        let conditions = stored["status"]["conditions"].as_array_mut().unwrap();
        let ready = conditions
            .iter_mut()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        ready["status"] = json!("Unknown");
        ready["reason"] = json!("NodeStatusUnknown");
        ready["lastTransitionTime"] = json!("2025-01-01T00:01:00Z");

        let config = KubeletConfig {
            max_pods: 7,
            ..config()
        };
        let node = node_document(
            Some(&stored),
            &config,
            &system(),
            "2025-01-01T00:05:00Z",
            || panic!("the stored uid is kept"),
        );
        assert_eq!(node["metadata"]["uid"], "uid-1");
        assert_eq!(
            node["metadata"]["creationTimestamp"],
            "2025-01-01T00:00:00Z"
        );
        assert_eq!(node["metadata"].get("resourceVersion"), None);
        assert_eq!(node["metadata"]["labels"]["team"], "a");
        assert_eq!(node["metadata"]["labels"]["kubernetes.io/hostname"], "n1");
        assert_eq!(node["spec"]["taints"], stored["spec"]["taints"]);
        assert_eq!(node["status"]["capacity"], json!({"pods": "7", "cpu": "4"}));
        assert_eq!(node["status"]["allocatable"], json!({"pods": "7"}));
        assert_eq!(node["futureField"], json!({"x": 1}));
        let condition = |type_: &str| {
            node["status"]["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["type"] == type_)
                .unwrap()
                .clone()
        };
        // Ready again: a transition now; the pressure conditions did not change.
        let ready = condition("Ready");
        assert_eq!(ready["status"], "True");
        assert_eq!(ready["reason"], "KubeletReady");
        assert_eq!(ready["lastHeartbeatTime"], "2025-01-01T00:05:00Z");
        assert_eq!(ready["lastTransitionTime"], "2025-01-01T00:05:00Z");
        let memory = condition("MemoryPressure");
        assert_eq!(memory["lastHeartbeatTime"], "2025-01-01T00:05:00Z");
        assert_eq!(memory["lastTransitionTime"], "2025-01-01T00:00:00Z");
        assert_eq!(node["status"]["conditions"].as_array().unwrap().len(), 4);
    }

    #[test]
    fn system_info_is_per_node_and_the_boot_id_per_start() {
        let (a, b) = (SystemInfo::detect("n1"), SystemInfo::detect("n1"));
        assert_eq!(
            (&a.machine_id, &a.system_uuid),
            (&b.machine_id, &b.system_uuid)
        );
        assert_ne!(a.boot_id, b.boot_id, "each start is a boot");
        assert!(!a.kernel_version.is_empty());
        assert_ne!(a.machine_id, SystemInfo::detect("n2").machine_id);
        // A restarted kubelet posts its new boot ID over the stored one.
        let first = node_document(None, &config(), &a, "2025-01-01T00:00:00Z", || {
            "uid-1".into()
        });
        let again = node_document(Some(&first), &config(), &b, "2025-01-01T00:01:00Z", || {
            panic!("the stored uid is kept")
        });
        assert_eq!(again["status"]["nodeInfo"]["bootID"], b.boot_id.as_str());
        assert_eq!(
            again["status"]["nodeInfo"]["machineID"],
            first["status"]["nodeInfo"]["machineID"]
        );
    }

    #[test]
    fn a_stored_value_of_another_shape_is_replaced_by_a_fresh_node() {
        for junk in [json!("text"), json!({"metadata": 3, "status": [1]})] {
            let node = node_document(
                Some(&junk),
                &config(),
                &system(),
                "2025-01-01T00:00:00Z",
                || "fresh".into(),
            );
            assert_eq!(node["metadata"]["uid"], "fresh");
            assert_eq!(node["status"]["capacity"]["pods"], "42");
        }
    }
}
