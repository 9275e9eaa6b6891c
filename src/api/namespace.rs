//! Namespaces: where a Namespace document lives, what a new one and a terminating one
//! look like, and which directories hold a namespace's objects.
//!
//! 2014 had no Namespace objects: a namespace was the key segment of the objects in it.
//! kcm keeps that (every namespace holding an object exists, see `apiserver`) and since
//! issue 23 also stores Namespaces as core/v1 JSON at `{prefix}/namespaces/{name}`
//! (Kubernetes' `pkg/registry/core/namespace`): cluster-scoped, read-modify-written as
//! `serde_json::Value` like Nodes, so every field someone else wrote is kept. A deleted
//! Namespace is first marked (`deletionTimestamp`, `status.phase: Terminating`); the
//! namespace controller (`crate::namespace`) deletes what it holds, then the key.

use serde_json::{json, Value};

/// The directory of Namespace documents under the prefix.
pub const NAMESPACES_DIR: &str = "namespaces";
/// The `kind` of a Namespace document.
pub const NAMESPACE_KIND: &str = "Namespace";
/// `status.phase` of a namespace being deleted.
pub const NAMESPACE_TERMINATING: &str = "Terminating";
/// `status.phase` of a live namespace.
pub const NAMESPACE_ACTIVE: &str = "Active";
/// The namespaces that always exist (kube-apiserver creates them at start).
pub const SYSTEM_NAMESPACES: [&str; 4] =
    ["default", "kube-node-lease", "kube-public", "kube-system"];
/// The namespaces that may not be deleted (kube-apiserver's `NamespaceLifecycle`
/// admission: `immortalNamespaces`).
pub const IMMORTAL_NAMESPACES: [&str; 3] = ["default", "kube-public", "kube-system"];

/// The key of namespace `name`'s document: `{prefix}/namespaces/{name}`.
pub fn namespace_key(prefix: &str, name: &str) -> String {
    format!("{prefix}/{NAMESPACES_DIR}/{name}")
}

/// A new Namespace as kube-apiserver stores it: the `kubernetes.io/metadata.name` label,
/// the `kubernetes` finalizer in its spec, phase Active; `uid` and `creationTimestamp`
/// from the caller. Fields `object` already has are kept.
pub fn new_namespace(mut object: Value, name: &str, uid: &str, now: &str) -> Value {
    if !object.is_object() {
        object = json!({});
    }
    object["kind"] = json!(NAMESPACE_KIND);
    object["apiVersion"] = json!("v1");
    let metadata = object
        .as_object_mut()
        .expect("an object")
        .entry("metadata")
        .or_insert_with(|| json!({}));
    if !metadata.is_object() {
        *metadata = json!({});
    }
    metadata["name"] = json!(name);
    metadata["uid"] = json!(uid);
    metadata["creationTimestamp"] = json!(now);
    if let Some(metadata) = metadata.as_object_mut() {
        for field in [
            "namespace",
            "resourceVersion",
            "deletionTimestamp",
            "generation",
        ] {
            metadata.shift_remove(field);
        }
    }
    if !metadata["labels"].is_object() {
        metadata["labels"] = json!({});
    }
    metadata["labels"]["kubernetes.io/metadata.name"] = json!(name);
    if !object["spec"].is_object() {
        object["spec"] = json!({});
    }
    if object["spec"].get("finalizers").is_none() {
        object["spec"]["finalizers"] = json!(["kubernetes"]);
    }
    object["status"] = json!({ "phase": NAMESPACE_ACTIVE });
    object
}

/// Whether a Namespace document is being deleted (`deletionTimestamp` set, or phase
/// Terminating).
pub fn is_terminating(namespace: &Value) -> bool {
    namespace
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
        || namespace.pointer("/status/phase").and_then(Value::as_str) == Some(NAMESPACE_TERMINATING)
}

/// Marks a Namespace document as being deleted at `now` (kept when already marked).
pub fn start_terminating(namespace: &mut Value, now: &str) {
    if let Some(metadata) = namespace.get_mut("metadata").filter(|m| m.is_object()) {
        if metadata.get("deletionTimestamp").is_none_or(Value::is_null) {
            metadata["deletionTimestamp"] = json!(now);
        }
    }
    if !namespace["status"].is_object() {
        namespace["status"] = json!({});
    }
    namespace["status"]["phase"] = json!(NAMESPACE_TERMINATING);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_namespace_is_active_labelled_and_keeps_what_it_was_given() {
        let given = json!({"metadata": {"name": "x", "labels": {"team": "a"},
                                        "resourceVersion": "3", "namespace": "y"},
                           "spec": {"finalizers": []}, "status": {"phase": "Terminating"}});
        let ns = new_namespace(given, "x", "u-1", "2026-01-01T00:00:00Z");
        assert_eq!(ns["metadata"]["labels"]["team"], "a");
        assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "x");
        assert_eq!(ns["metadata"]["uid"], "u-1");
        assert!(ns["metadata"].get("resourceVersion").is_none());
        assert!(ns["metadata"].get("namespace").is_none());
        assert_eq!(ns["spec"]["finalizers"], json!([]));
        assert_eq!(ns["status"]["phase"], "Active");
        assert!(!is_terminating(&ns));
        let defaulted = new_namespace(json!({}), "z", "u", "t");
        assert_eq!(defaulted["spec"]["finalizers"], json!(["kubernetes"]));
    }

    #[test]
    fn terminating_keeps_the_first_deletion_timestamp() {
        let mut ns = new_namespace(json!({}), "x", "u", "t0");
        start_terminating(&mut ns, "t1");
        start_terminating(&mut ns, "t2");
        assert_eq!(ns["metadata"]["deletionTimestamp"], "t1");
        assert_eq!(ns["status"]["phase"], "Terminating");
        assert!(is_terminating(&ns));
    }
}
