//! The namespace controller through the API, as Kubernetes' (`pkg/controller/namespace`,
//! `deletion/namespaced_resources_deleter.go`) runs it against kube-apiserver: each period
//! it lists the Namespaces; for each Terminating one it finds the namespaced resources by
//! discovery, lists each in the namespace and deletes what it finds (the server marks
//! what has finalizers: [`crate::namespace::object_step`]'s `Mark` is then a `DELETE`
//! too), each at the resourceVersion listed and pods without grace, as the etcd
//! controller does; a pass that found nothing left removes its `kubernetes` finalizer
//! through `namespaces/{name}/finalize` and deletes the Namespace, which the server then
//! removes. Events are deleted each pass but do not hold the namespace.
//!
//! The etcd controller ([`crate::namespace::NamespaceController`]) works on the stored
//! keys; both share the per-object decision ([`crate::namespace::object_step`]).

use std::future::Future;
use std::time::Duration;

use futures::future::BoxFuture;
use http::Method;
use serde_json::{json, Value};

use super::ApiClient;
use crate::api;
use crate::namespace::{every, object_step, ObjectStep};

/// The finalizer the namespace controller owns.
const FINALIZER: &str = "kubernetes";

/// The namespace controller as a client of `api`.
pub struct ApiNamespaceController {
    api: ApiClient,
    period: Duration,
}

/// One namespaced resource discovery found: its collection path's parts.
struct Collection {
    /// `/api/v1` or `/apis/{group}/{version}`.
    group_version: String,
    plural: String,
}

impl ApiNamespaceController {
    pub fn new(api: ApiClient, period: Duration) -> ApiNamespaceController {
        ApiNamespaceController { api, period }
    }

    /// Runs a pass each period until `shutdown` resolves.
    pub fn start(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        let period = self.period;
        let controller = std::sync::Arc::new(self);
        every(period, shutdown, move || {
            let controller = controller.clone();
            async move { controller.sync().await }
        })
    }

    /// One pass over the Terminating Namespaces.
    ///
    /// # Errors
    /// When a list or a discovery request fails.
    pub async fn sync(&self) -> anyhow::Result<()> {
        let namespaces = self.get("/api/v1/namespaces").await?;
        let terminating: Vec<Value> = items(namespaces)
            .into_iter()
            .filter(api::is_terminating)
            .collect();
        if terminating.is_empty() {
            return Ok(());
        }
        let collections = self.discover().await?;
        for namespace in terminating {
            let Some(name) = namespace.pointer("/metadata/name").and_then(Value::as_str) else {
                continue;
            };
            self.sync_namespace(name, &namespace, &collections).await?;
        }
        Ok(())
    }

    async fn sync_namespace(
        &self,
        name: &str,
        namespace: &Value,
        collections: &[Collection],
    ) -> anyhow::Result<()> {
        let mut remaining = 0;
        for collection in collections {
            let path = format!(
                "{}/namespaces/{name}/{}",
                collection.group_version, collection.plural
            );
            let events = collection.plural == "events";
            for object in items(self.get(&path).await?) {
                if !events {
                    remaining += 1;
                }
                if events || object_step(&object) != ObjectStep::Wait {
                    self.delete(&path, &object).await?;
                }
            }
        }
        if remaining > 0 {
            tracing::debug!(namespace = name, remaining, "namespace terminating");
            return Ok(());
        }
        // `finalize`: its own finalizer goes (others keep the namespace), then the delete
        // that removes a finalized namespace.
        let finalizers: Vec<Value> = namespace
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|f| f.as_str() != Some(FINALIZER))
            .cloned()
            .collect();
        let mut finalized = namespace.clone();
        finalized["spec"]["finalizers"] = json!(finalizers);
        let path = format!("/api/v1/namespaces/{name}");
        match self
            .api
            .request(
                Method::PUT,
                &format!("{path}/finalize"),
                Some(&finalized),
                None,
            )
            .await
        {
            Ok(_) => {}
            Err(e) if matches!(e.code(), Some(404 | 409)) => return Ok(()),
            Err(e) => return Err(anyhow::anyhow!("finalize namespace {name}: {e}")),
        }
        if !finalizers.is_empty() {
            return Ok(());
        }
        match self.api.request(Method::DELETE, &path, None, None).await {
            Ok(_) => {
                tracing::info!(
                    namespace = name,
                    "namespace deleted: it held nothing any more"
                );
                Ok(())
            }
            Err(e) if matches!(e.code(), Some(404 | 409)) => Ok(()),
            Err(e) => Err(anyhow::anyhow!("delete namespace {name}: {e}")),
        }
    }

    /// Deletes `object` of the collection at `path` at the resourceVersion listed; one
    /// changed or gone meanwhile is looked at next pass.
    async fn delete(&self, path: &str, object: &Value) -> anyhow::Result<()> {
        let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str) else {
            return Ok(());
        };
        let mut options = json!({"kind": "DeleteOptions", "apiVersion": "v1",
                                 "gracePeriodSeconds": 0, "propagationPolicy": "Background"});
        if let Some(rv) = object.pointer("/metadata/resourceVersion") {
            options["preconditions"] = json!({"resourceVersion": rv});
        }
        let target = format!("{path}/{name}");
        match self
            .api
            .request(Method::DELETE, &target, Some(&options), None)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.code(), Some(404 | 409)) => Ok(()),
            Err(e) => Err(anyhow::anyhow!("delete {target}: {e}")),
        }
    }

    /// Every namespaced resource the server lists and deletes (no subresources), the
    /// controllers' first (so that they create no pods the pass then deletes again) and
    /// events last.
    async fn discover(&self) -> anyhow::Result<Vec<Collection>> {
        let mut group_versions = vec!["/api/v1".to_string()];
        let groups = self.get("/apis").await?;
        for group in groups["groups"].as_array().into_iter().flatten() {
            if let Some(gv) = group
                .pointer("/preferredVersion/groupVersion")
                .and_then(Value::as_str)
            {
                group_versions.push(format!("/apis/{gv}"));
            }
        }
        let mut collections = Vec::new();
        for group_version in group_versions {
            let list = self.get(&group_version).await?;
            for resource in list["resources"].as_array().into_iter().flatten() {
                let plural = resource["name"].as_str().unwrap_or_default();
                let verbs = resource["verbs"].as_array().cloned().unwrap_or_default();
                let can = |verb: &str| verbs.iter().any(|v| v.as_str() == Some(verb));
                if resource["namespaced"] == true
                    && !plural.contains('/')
                    && can("list")
                    && can("delete")
                {
                    collections.push(Collection {
                        group_version: group_version.clone(),
                        plural: plural.to_string(),
                    });
                }
            }
        }
        let rank = |plural: &str| match plural {
            "deployments" => 0,
            "replicasets" => 1,
            "replicationcontrollers" => 2,
            "events" => 4,
            _ => 3,
        };
        collections.sort_by_key(|c| rank(&c.plural));
        Ok(collections)
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.api
            .request(Method::GET, path, None, None)
            .await
            .map_err(|e| anyhow::anyhow!("GET {path}: {e}"))
    }
}

/// A list's `items`.
fn items(list: Value) -> Vec<Value> {
    match list {
        Value::Object(mut list) => match list.remove("items") {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}
