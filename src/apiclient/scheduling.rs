//! The scheduler's nodes and binds through the API ([`Binder`] for [`ApiClient`]), as
//! kube-scheduler does them: the Nodes listed each round, a node taking pods while its
//! Ready condition is `True` and it is not cordoned (kube-scheduler skips a node with the
//! `not-ready` or `unreachable` taint the node lifecycle controller sets, and one with
//! `spec.unschedulable`); a bind is a `POST` of a `Binding` to the pod's `binding`
//! subresource, which the server refuses with a 409 when the pod is bound already.
//!
//! Where etcd's registrations say a kubelet is gone at once (its lease expired), through
//! the API a node stops taking pods once its Ready condition is no longer `True`: after the
//! node lifecycle controller's grace period.

use http::Method;
use serde_json::{json, Value};

use super::ApiClient;
use crate::api::{node_condition_status, NODE_READY};
use crate::informer::CachedPod;
use crate::record::Reference;
use crate::scheduler::{pods_capacity, Binder, Placement, DEFAULT_CAPACITY};

impl Binder for ApiClient {
    async fn nodes(&self) -> anyhow::Result<Placement> {
        let list = self
            .request(Method::GET, "/api/v1/nodes", None, None)
            .await
            .map_err(|e| anyhow::anyhow!("list nodes: {e}"))?;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let mut ready = Vec::new();
        let mut cordoned = Vec::new();
        for node in &items {
            let Some(name) = node.pointer("/metadata/name").and_then(Value::as_str) else {
                continue;
            };
            if node_condition_status(node, NODE_READY) != Some("True") {
                continue;
            }
            let pods = pods_capacity(node).unwrap_or(DEFAULT_CAPACITY);
            ready.push((name.to_string(), pods));
            if node.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
                cordoned.push(name.to_string());
            }
        }
        Ok(Placement::new(ready).with_unschedulable(cordoned.iter().map(String::as_str)))
    }

    async fn bind(&self, pod: &CachedPod, node: &str) -> anyhow::Result<Option<Reference>> {
        let (namespace, name) = (&*pod.namespace, &*pod.name);
        let path = format!("/api/v1/namespaces/{namespace}/pods/{name}/binding");
        let mut binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        if !pod.uid.is_empty() {
            binding["metadata"]["uid"] = Value::from(pod.uid.to_string());
        }
        match self
            .request(Method::POST, &path, Some(&binding), None)
            .await
        {
            Ok(_) => Ok(Some(Reference {
                kind: "Pod".into(),
                api_version: "v1".into(),
                namespace: namespace.to_string(),
                name: name.to_string(),
                uid: pod.uid.to_string(),
                resource_version: String::new(),
            })),
            // Bound meanwhile, being deleted, or gone.
            Err(e) if matches!(e.code(), Some(404 | 409)) => Ok(None),
            Err(e) => Err(anyhow::anyhow!("bind {namespace}/{name} to {node}: {e}")),
        }
    }
}
