//! `api-apply`: server-side apply through `kcm apiserver` against etcd-client doing the
//! same writes directly, at the same number in flight (issue 32).
//!
//! N Deployments (apps/v1, one container, labels, selector, replicas) are applied as
//! `kubectl apply --server-side` sends them: `PATCH` with `application/apply-patch+yaml`
//! (a JSON body) and `?fieldManager=bench`. The first pass creates each (an apply to a
//! missing object creates it, 201); the second applies each again with its image changed
//! (200). The baseline: create-if-absent transactions of the same Deployments as kcm
//! stores them (defaults, uid and timestamp written, no `managedFields`), then per
//! Deployment a get and a compare-and-swap transaction on its `mod_revision` writing the
//! new image (as `api-update`'s). Figure per pass: Deployments/s.
//!
//! Each pass touches each Deployment once (the workers take the next name in turn), so
//! no write meets a conflict.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use serde_json::{json, Value};
use tokio::task::JoinSet;

use super::http::HttpClient;
use super::write::{raw_cas, IN_FLIGHT};
use crate::api::{self, Deployment, Object as _};
use crate::bench::report::row;
use crate::bench::{Bench, Row};

/// The field manager of every apply.
const MANAGER: &str = "bench";
/// The image the first pass applies, and the one the second changes it to.
const IMAGES: [&str; 2] = ["nginx:1.7.9", "nginx:1.9.1"];
/// Where a Deployment's (only) container image is, served and stored alike.
const IMAGE_POINTER: &str = "/spec/template/spec/containers/0/image";

impl Bench {
    /// api-apply: N Deployments server-side applied (created, then applied again with a
    /// new image), against raw create-if-absent and compare-and-swap transactions.
    pub(in crate::bench) async fn api_apply(&self) -> anyhow::Result<Vec<Row>> {
        let prefix = self.prefix("api-apply");
        let (namespace, n) = ("api-apply", self.sizes.api_applies);
        let names = deployment_names(n);
        // The baseline under its own prefix, which the apiserver never sees.
        let raw_prefix = format!("{prefix}-raw");
        let documents = names
            .iter()
            .map(|name| deployment_document(&raw_prefix, namespace, name))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let raw_keys: Vec<String> = documents.iter().map(|(key, _)| key.clone()).collect();

        let api = self.start_apiserver(&prefix).await?;
        let measured = async {
            // Each pass raw, then through the API: the pair measured side by side.
            let started = Instant::now();
            self.create_all(documents, IN_FLIGHT).await?;
            let raw_create = started.elapsed().as_secs_f64();
            let api_create = apply_all(api.addr, namespace, &names, IMAGES[0], 201).await?;
            let raw_update = self.set_image_all(&raw_keys, IMAGES[1]).await?;
            let api_update = apply_all(api.addr, namespace, &names, IMAGES[1], 200).await?;
            check_applied(api.addr, namespace, &names[n - 1]).await?;
            anyhow::Ok([raw_create, api_create, raw_update, api_update])
        }
        .await;
        api.stop().await?;
        let [raw_create, api_create, raw_update, api_update] = measured?;
        let dir = api::list_key::<Deployment>(&prefix, Some(namespace));
        let stored = self.count(&dir).await?;
        anyhow::ensure!(
            stored == n,
            "{stored} of {n} Deployments stored through the API"
        );
        let rate = |seconds: f64| n as f64 / seconds.max(1e-9);
        let how = format!("PATCH apply-patch+yaml, fieldManager={MANAGER}, {IN_FLIGHT} in flight");
        Ok(vec![
            row(
                "api-apply",
                format!(
                    "Deployments/s, {n} applies creating them, {how} ({api_create:.2}s vs {raw_create:.2}s)"
                ),
                "Deployments/s",
                rate(api_create),
                rate(raw_create),
                format!(
                    "raw create-if-absent transactions of the Deployments as kcm stores them, without managedFields, {IN_FLIGHT} in flight"
                ),
                Some((0.3, true)),
            ),
            row(
                "api-apply",
                format!(
                    "Deployments/s, {n} re-applies changing the image, {how} ({api_update:.2}s vs {raw_update:.2}s)"
                ),
                "Deployments/s",
                rate(api_update),
                rate(raw_update),
                format!("raw get + compare-and-swap transaction of the image, {IN_FLIGHT} in flight"),
                Some((0.3, true)),
            ),
        ])
    }

    /// Seconds to set the image of the Deployment at each of `keys` by raw get +
    /// compare-and-swap, [`IN_FLIGHT`] at once.
    async fn set_image_all(&self, keys: &[String], image: &'static str) -> anyhow::Result<f64> {
        let keys = Arc::new(keys.to_vec());
        let next = Arc::new(AtomicUsize::new(0));
        let mut workers = JoinSet::new();
        let started = Instant::now();
        for _ in 0..IN_FLIGHT {
            let (keys, next, mut kv) = (keys.clone(), next.clone(), self.client.kv_client());
            workers.spawn(async move {
                while let Some(key) = keys.get(next.fetch_add(1, Ordering::Relaxed)) {
                    raw_cas(&mut kv, key, |deployment| set_image(deployment, image)).await?;
                }
                anyhow::Ok(())
            });
        }
        while let Some(result) = workers.join_next().await {
            result.context("raw compare-and-swap worker")??;
        }
        Ok(started.elapsed().as_secs_f64())
    }
}

/// Seconds to apply the Deployment of each name with `image`, [`IN_FLIGHT`] connections
/// at once, each answer checked to be `status`.
async fn apply_all(
    addr: SocketAddr,
    namespace: &str,
    names: &[String],
    image: &str,
    status: u16,
) -> anyhow::Result<f64> {
    let names = Arc::new(names.to_vec());
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = JoinSet::new();
    let started = Instant::now();
    for _ in 0..IN_FLIGHT {
        let (names, next) = (names.clone(), next.clone());
        let (namespace, image) = (namespace.to_string(), image.to_string());
        workers.spawn(async move {
            let mut http = HttpClient::new(addr);
            while let Some(name) = names.get(next.fetch_add(1, Ordering::Relaxed)) {
                let path = apply_path(&namespace, name);
                let body = deployment_body(name, &image).to_string().into_bytes();
                let body = Some(("application/apply-patch+yaml", body.as_slice()));
                let response = http.send("PATCH", &path, None, body).await?;
                anyhow::ensure!(
                    response.status == status,
                    "apply {name}: {} (expected {status}) {}",
                    response.status,
                    String::from_utf8_lossy(&response.body)
                );
            }
            anyhow::Ok(())
        });
    }
    while let Some(result) = workers.join_next().await {
        result.context("apply worker")??;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Reads Deployment `name` back: the second pass's image, a second generation, and the
/// bench's `Apply` entry in `managedFields`.
async fn check_applied(addr: SocketAddr, namespace: &str, name: &str) -> anyhow::Result<()> {
    let path = format!("/apis/apps/v1/namespaces/{namespace}/deployments/{name}");
    let deployment = HttpClient::new(addr).get(&path, None).await?.json()?;
    let image = deployment.pointer(IMAGE_POINTER).and_then(Value::as_str);
    anyhow::ensure!(
        image == Some(IMAGES[1]),
        "{name}'s image is {image:?} after the re-apply, not {:?}",
        IMAGES[1]
    );
    let generation = deployment.pointer("/metadata/generation");
    anyhow::ensure!(
        generation == Some(&json!(2)),
        "{name}'s generation is {generation:?} after the re-apply, not 2"
    );
    let managed = deployment["metadata"]["managedFields"].as_array();
    let applied = managed.is_some_and(|entries| {
        entries
            .iter()
            .any(|e| e["manager"] == MANAGER && e["operation"] == "Apply")
    });
    anyhow::ensure!(
        applied,
        "{name} has no Apply entry of {MANAGER}: {deployment}"
    );
    Ok(())
}

/// `web-00000`, `web-00001`, ...: `n` Deployment names.
fn deployment_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("web-{i:05}")).collect()
}

/// The path of a server-side apply of Deployment `name` by the bench's manager.
fn apply_path(namespace: &str, name: &str) -> String {
    format!("/apis/apps/v1/namespaces/{namespace}/deployments/{name}?fieldManager={MANAGER}")
}

/// The configuration `kubectl apply --server-side` would send for Deployment `name`: one
/// replica of one nginx container at `image`, selected by `app={name}`.
fn deployment_body(name: &str, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, "tier": "web"}},
                "spec": {"containers": [{
                    "name": "web",
                    "image": image,
                    "ports": [{"name": "http", "containerPort": 80}],
                }]},
            },
        },
    })
}

/// (key, value) of Deployment `name` of the first pass as kcm stores it: the body with
/// the apiserver's defaults, a uid, a creation timestamp and generation 1 (no
/// `managedFields`).
fn deployment_document(
    prefix: &str,
    namespace: &str,
    name: &str,
) -> anyhow::Result<(String, Vec<u8>)> {
    let mut deployment: Deployment = serde_json::from_value(deployment_body(name, IMAGES[0]))?;
    deployment.metadata.namespace = namespace.to_string();
    deployment.set_defaults();
    api::fill_created(&mut deployment);
    deployment.set_type_meta();
    let key = api::object_key::<Deployment>(prefix, namespace, name);
    Ok((key, api::encode(&deployment)?))
}

/// Sets the image of a Deployment document's container, and its generation one higher
/// (the spec changed).
fn set_image(deployment: &mut Value, image: &str) -> anyhow::Result<()> {
    let current = deployment
        .pointer_mut(IMAGE_POINTER)
        .context("the Deployment has no container image")?;
    *current = json!(image);
    if let Some(generation) = deployment.pointer_mut("/metadata/generation") {
        *generation = json!(generation.as_i64().unwrap_or(0) + 1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_applied_configuration_is_a_valid_deployment() {
        let body = deployment_body("web-00007", "nginx:1.7.9");
        assert_eq!(body.pointer(IMAGE_POINTER), Some(&json!("nginx:1.7.9")));
        let mut deployment: Deployment = serde_json::from_value(body).unwrap();
        deployment.metadata.namespace = "api-apply".into();
        api::validate(&deployment).unwrap();
        assert_eq!(deployment.replicas(), 1);
        assert_eq!(
            apply_path("api-apply", "web-00007"),
            "/apis/apps/v1/namespaces/api-apply/deployments/web-00007?fieldManager=bench"
        );
        assert_eq!(deployment_names(3), ["web-00000", "web-00001", "web-00002"]);
    }

    #[test]
    fn the_raw_document_is_the_deployment_as_stored() {
        let (key, value) = deployment_document("/p", "api-apply", "web-00001").unwrap();
        assert_eq!(key, "/p/deployments/api-apply/web-00001");
        let deployment: Deployment = api::decode("/p", &key, &value, 5).unwrap();
        assert_eq!(deployment.metadata.name, "web-00001");
        assert_eq!(deployment.metadata.generation, 1);
        assert!(!deployment.metadata.uid.is_empty());
        assert_eq!(deployment.revision_history_limit(), 10);
        let stored: Value = serde_json::from_slice(&value).unwrap();
        assert_eq!(stored["apiVersion"], "apps/v1");
        assert_eq!(stored["kind"], "Deployment");
        assert_eq!(stored["spec"]["strategy"]["type"], "RollingUpdate");
        assert_eq!(stored.pointer(IMAGE_POINTER), Some(&json!(IMAGES[0])));
        assert!(stored["metadata"].get("managedFields").is_none());
    }

    #[test]
    fn setting_the_image_changes_it_and_the_generation_only() {
        let (_, value) = deployment_document("/p", "ns", "web-00000").unwrap();
        let before: Value = serde_json::from_slice(&value).unwrap();
        let mut after = before.clone();
        set_image(&mut after, IMAGES[1]).unwrap();
        assert_eq!(after.pointer(IMAGE_POINTER), Some(&json!(IMAGES[1])));
        assert_eq!(after["metadata"]["generation"], 2);
        let mut back = after.clone();
        *back.pointer_mut(IMAGE_POINTER).unwrap() = json!(IMAGES[0]);
        back["metadata"]["generation"] = json!(1);
        assert_eq!(back, before);
        assert!(set_image(&mut json!({"spec": {}}), IMAGES[1]).is_err());
    }
}
