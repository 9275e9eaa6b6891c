//! Nodes: where a Node document and a kubelet's registration live, and the Node
//! conditions that the kubelet and the node lifecycle controller write.
//!
//! 2014 kept minions under `/registry/minions/<name>`, records written by the minion
//! controller, without status. kcm keeps that directory for the kubelets' registrations (a
//! liveness key on an etcd lease, see `kubelet::registration`) and stores Node objects as
//! core/v1 JSON (`kind: Node`, `apiVersion: v1`) under `{prefix}/nodes/{name}`:
//! cluster-scoped, so no namespace segment, and on no lease, so a Node outlives its
//! kubelet. Nodes are not a typed kind here: their writers read-modify-write the document
//! as a `serde_json::Value`, so every field someone else wrote is kept. A kubelet also
//! renews a Lease of its node's name in `kube-node-lease` (`kubelet::node_lease`), the
//! heartbeat the API serves.

use serde_json::{Map, Value};

/// The `kind` of a Node document.
pub const NODE_KIND: &str = "Node";
/// The `apiVersion` a Node document is stored with (core/v1, as served).
pub const NODE_API_VERSION: &str = "v1";
/// The directory of Node documents under the prefix.
pub const NODES_DIR: &str = "nodes";
/// The directory of the kubelets' registrations under the prefix (2014's minions).
pub const REGISTRATIONS_DIR: &str = "minions";

/// The directory of Lease documents (`coordination.k8s.io/v1`) under the prefix, as the
/// apiserver stores them: `{prefix}/leases/{namespace}/{name}`.
pub const LEASES_DIR: &str = "leases";
/// The namespace of the kubelets' node Leases (Kubernetes' `kube-node-lease`).
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// `status.conditions[].type` of a Node's readiness.
pub const NODE_READY: &str = "Ready";
/// The conditions a kubelet posts and the node lifecycle controller marks `Unknown`
/// (Kubernetes' `nodeConditionTypes`), Ready first.
pub const NODE_CONDITION_TYPES: [&str; 4] =
    [NODE_READY, "MemoryPressure", "DiskPressure", "PIDPressure"];
/// A condition status: the state is not known (nobody reports it).
pub const CONDITION_UNKNOWN: &str = "Unknown";

/// The key of node `name`'s Node document: `{prefix}/nodes/{name}`.
pub fn node_key(prefix: &str, name: &str) -> String {
    format!("{prefix}/{NODES_DIR}/{name}")
}

/// The key of node `name`'s registration: `{prefix}/minions/{name}` (2014's `NodePath`).
pub fn registration_key(prefix: &str, name: &str) -> String {
    format!("{prefix}/{REGISTRATIONS_DIR}/{name}")
}

/// The directory key of the node Leases: `{prefix}/leases/kube-node-lease/`.
pub fn node_lease_directory(prefix: &str) -> String {
    format!("{prefix}/{LEASES_DIR}/{NODE_LEASE_NAMESPACE}/")
}

/// The key of node `name`'s Lease, which its kubelet renews:
/// `{prefix}/leases/kube-node-lease/{name}`.
pub fn node_lease_key(prefix: &str, name: &str) -> String {
    format!("{}{name}", node_lease_directory(prefix))
}

/// The name in `key` under the directory key `dir` (ending in `/`); `None` for the
/// directory itself or a deeper key.
pub fn name_under<'k>(dir: &str, key: &'k str) -> Option<&'k str> {
    let name = key.strip_prefix(dir)?;
    (!name.is_empty() && !name.contains('/')).then_some(name)
}

/// The condition of type `type_` in `status.conditions` of a Node document (the last one,
/// if several: as kubectl's `printNode` reads them).
pub fn node_condition<'a>(node: &'a Value, type_: &str) -> Option<&'a Map<String, Value>> {
    node.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .filter_map(Value::as_object)
        .rfind(|condition| condition.get("type").and_then(Value::as_str) == Some(type_))
}

/// The status (`True`, `False`, `Unknown`) of the condition of type `type_`, if any.
pub fn node_condition_status<'a>(node: &'a Value, type_: &str) -> Option<&'a str> {
    node_condition(node, type_)?.get("status")?.as_str()
}

/// The object at `field` of `map`, made an empty object first if it is missing or is not
/// an object.
pub fn object_field<'a>(
    map: &'a mut Map<String, Value>,
    field: &str,
) -> &'a mut Map<String, Value> {
    let entry = map
        .entry(field.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut().expect("made an object above")
}

/// The condition of type `type_` in `status.conditions` of `node` (an object), added
/// (`{type}` alone) when there is none; `status` and `conditions` are made when missing.
/// With several of the type, the last one (the one readers take).
pub fn node_condition_mut<'a>(
    node: &'a mut Map<String, Value>,
    type_: &str,
) -> &'a mut Map<String, Value> {
    let status = object_field(node, "status");
    let conditions = status
        .entry("conditions".to_string())
        .or_insert_with(|| Value::Array(Vec::new()));
    if !conditions.is_array() {
        *conditions = Value::Array(Vec::new());
    }
    let conditions = conditions.as_array_mut().expect("made an array above");
    let found = conditions
        .iter()
        .rposition(|condition| condition.get("type").and_then(Value::as_str) == Some(type_));
    let index = match found {
        Some(index) if conditions[index].is_object() => index,
        _ => {
            let mut condition = Map::new();
            condition.insert("type".into(), Value::from(type_));
            conditions.push(Value::Object(condition));
            conditions.len() - 1
        }
    };
    conditions[index]
        .as_object_mut()
        .expect("an object by construction")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_cluster_scoped() {
        assert_eq!(node_key("/registry", "n1"), "/registry/nodes/n1");
        assert_eq!(registration_key("/registry", "n1"), "/registry/minions/n1");
        let dir = "/registry/nodes/";
        assert_eq!(name_under(dir, "/registry/nodes/n1"), Some("n1"));
        assert_eq!(name_under(dir, "/registry/nodes/"), None);
        assert_eq!(name_under(dir, "/registry/nodes/a/b"), None);
        assert_eq!(name_under(dir, "/registry/nodesx"), None);
    }

    #[test]
    fn conditions_are_found_by_type_and_added_when_missing() {
        let node = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "DiskPressure", "status": "False"},
            {"type": "Ready", "status": "True"},
        ]}});
        assert_eq!(node_condition_status(&node, "Ready"), Some("True"));
        assert_eq!(node_condition_status(&node, "PIDPressure"), None);
        assert_eq!(node_condition_status(&json!({"status": 3}), "Ready"), None);

        let mut node = json!({"status": {"conditions": "junk"}, "other": 1});
        let map = node.as_object_mut().unwrap();
        node_condition_mut(map, "Ready").insert("status".into(), json!("True"));
        node_condition_mut(map, "Ready").insert("reason".into(), json!("R"));
        assert_eq!(
            node,
            json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "R"}]},
                "other": 1})
        );
    }
}
