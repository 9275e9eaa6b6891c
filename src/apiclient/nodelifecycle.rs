//! The node lifecycle controller through the API ([`NodeHealth`] for [`ApiClient`]), as
//! Kubernetes' `pkg/controller/nodelifecycle` does it: the heartbeat is the kubelet's
//! node Lease in `kube-node-lease` (which the controller's informer lists and watches in
//! that namespace), and a Node is marked by a `PUT` of its `/status` at the
//! resourceVersion the informer read, so a Node that changed since (its kubelet posted it
//! Ready) is not overwritten: the server answers 409 and the watch brings the new
//! version.
//!
//! What the etcd mode's transaction adds and this cannot: there the marking also finds
//! the registration absent, so a kubelet that is back is never marked. Here a Lease
//! renewed between the decision and the write does not stop it; the kubelet, which
//! watches its Node, posts it Ready again at once (docs/invariants.md, "Through the API").

use http::Method;
use serde_json::Value;

use super::ApiClient;
use crate::informer::CachedNode;
use crate::nodelifecycle::{Heartbeat, NodeHealth};

impl NodeHealth for ApiClient {
    const HEARTBEAT: Heartbeat = Heartbeat::Lease;

    async fn mark_unknown(
        &self,
        name: &str,
        node: &CachedNode,
        mut marked: Value,
    ) -> anyhow::Result<bool> {
        if let Some(meta) = marked.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert(
                "resourceVersion".into(),
                Value::from(node.revision.to_string()),
            );
        }
        let path = format!("/api/v1/nodes/{name}/status");
        match self.request(Method::PUT, &path, Some(&marked), None).await {
            Ok(_) => Ok(true),
            // Changed since the informer read it (its kubelet posted it), or deleted.
            Err(e) if matches!(e.code(), Some(404 | 409)) => {
                tracing::debug!(node = name, error = %e, "not marked Unknown");
                Ok(false)
            }
            Err(e) => Err(anyhow::anyhow!("mark Node {name} Unknown: {e}")),
        }
    }
}
