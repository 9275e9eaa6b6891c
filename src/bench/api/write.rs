//! `api-create` and `api-update`: writes through `kcm apiserver` against etcd-client doing
//! the same writes directly, at the same number in flight.
//!
//! - `api-create`: N pods `POST`ed as kubectl sends them (core/v1 JSON), against N
//!   create-if-absent transactions of the same pods as kcm stores them; figure: pods/s.
//! - `api-update`: read-modify-writes of a label on M pods, as client-go's `Update` loop
//!   does (`GET`, then `PUT` with the object's resourceVersion) and as one merge `PATCH`
//!   (kcm's `guaranteed_update` reads and writes), against raw compare-and-swap (a get,
//!   then a transaction on the key's `mod_revision`); figure: updates/s.
//!
//! Each in-flight worker owns its own objects (worker `w` of `IN_FLIGHT` updates the
//! objects `i` with `i % IN_FLIGHT == w`), so no write meets a conflict and every figure
//! is a write's own cost, not a retry's.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use etcd_client::{Compare, CompareOp, Txn, TxnOp};
use serde_json::{json, Value};
use tokio::task::JoinSet;

use super::http::HttpClient;
use super::pod_documents;
use crate::bench::report::row;
use crate::bench::{Bench, Row};

/// Writes in flight at once, through the API and raw alike (issue 23: 64).
pub(super) const IN_FLIGHT: usize = 64;

/// The three ways an update is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Update {
    /// `GET` then `PUT` with the resourceVersion read.
    GetPut,
    /// One merge `PATCH` of the label.
    Patch,
    /// etcd-client: a get, then a transaction comparing the key's `mod_revision`.
    RawCas,
}

impl Bench {
    /// api-create: N pods through `POST`, against N raw create-if-absent transactions.
    pub(in crate::bench) async fn api_create(&self) -> anyhow::Result<Vec<Row>> {
        let prefix = self.prefix("api-create");
        let (namespace, n) = ("api-create", self.sizes.api_creates);
        // The baseline under its own prefix, which the apiserver never sees.
        let raw = pod_documents(&format!("{prefix}-raw"), namespace, n).documents;
        let started = Instant::now();
        self.create_all(raw, IN_FLIGHT).await?;
        let raw_seconds = started.elapsed().as_secs_f64();

        let names = pod_documents(&prefix, namespace, n).names;
        let api = self.start_apiserver(&prefix).await?;
        let posted = post_all(api.addr, namespace, names).await;
        api.stop().await?;
        let api_seconds = posted?;
        let stored = self.count(&self.pod_dir(&prefix, namespace)).await?;
        anyhow::ensure!(stored == n, "{stored} of {n} pods stored through the API");
        let rate = |seconds: f64| n as f64 / seconds.max(1e-9);
        Ok(vec![row(
            "api-create",
            format!(
                "pods/s, {n} POSTs at {IN_FLIGHT} in flight ({api_seconds:.2}s vs {raw_seconds:.2}s)"
            ),
            "pods/s",
            rate(api_seconds),
            rate(raw_seconds),
            format!("{n} raw create-if-absent transactions at {IN_FLIGHT} in flight"),
            Some((0.35, true)),
        )])
    }

    /// api-update: read-modify-writes through the API (`GET` + `PUT`, merge `PATCH`)
    /// against raw compare-and-swap, on the same pods.
    pub(in crate::bench) async fn api_update(&self) -> anyhow::Result<Vec<Row>> {
        let prefix = self.prefix("api-update");
        let namespace = "api-update";
        let (objects, updates) = (self.sizes.api_update_pods, self.sizes.api_updates);
        anyhow::ensure!(objects >= IN_FLIGHT, "api-update needs {IN_FLIGHT} pods");
        let pods = pod_documents(&prefix, namespace, objects);
        self.create_all(pods.documents.clone(), 256).await?;
        let keys: Vec<String> = pods.documents.into_iter().map(|(key, _)| key).collect();
        let api = self.start_apiserver(&prefix).await?;
        let mut seconds = Vec::new();
        let mut measured = Ok(());
        // Raw first and last: their mean is the baseline, fair to a machine that drifts.
        for how in [
            Update::RawCas,
            Update::GetPut,
            Update::Patch,
            Update::RawCas,
        ] {
            let target = Target {
                addr: api.addr,
                namespace,
                names: &pods.names,
                keys: &keys,
            };
            match self.update_all(how, &target, updates).await {
                Ok(s) => seconds.push(s),
                Err(e) => {
                    measured = Err(e.context(format!("api-update {how:?}")));
                    break;
                }
            }
        }
        api.stop().await?;
        measured?;
        let rate = |s: f64| updates as f64 / s.max(1e-9);
        let raw = (seconds[0] + seconds[3]) / 2.0;
        let baseline_is = format!("raw get + compare-and-swap transaction, {IN_FLIGHT} in flight");
        let rows = [
            (seconds[1], "GET + PUT with its resourceVersion", 0.25),
            (seconds[2], "merge PATCH", 0.4),
        ];
        Ok(rows
            .into_iter()
            .map(|(s, how, target)| {
                row(
                    "api-update",
                    format!(
                        "updates/s, {updates} read-modify-writes of {objects} pods, {how} ({s:.2}s vs {raw:.2}s)"
                    ),
                    "updates/s",
                    rate(s),
                    rate(raw),
                    baseline_is.clone(),
                    Some((target, true)),
                )
            })
            .collect())
    }

    /// Seconds for `updates` updates made `how`, [`IN_FLIGHT`] workers each updating its
    /// own pods in turn.
    async fn update_all(
        &self,
        how: Update,
        target: &Target<'_>,
        updates: usize,
    ) -> anyhow::Result<f64> {
        let done = Arc::new(AtomicUsize::new(0));
        let mut workers = JoinSet::new();
        let started = Instant::now();
        for worker in 0..IN_FLIGHT {
            let mine: Vec<(String, String)> = (worker..target.names.len())
                .step_by(IN_FLIGHT)
                .map(|i| (target.names[i].clone(), target.keys[i].clone()))
                .collect();
            let (done, addr, namespace) = (done.clone(), target.addr, target.namespace);
            let mut kv = self.client.kv_client();
            workers.spawn(async move {
                let mut http = HttpClient::new(addr);
                for (name, key) in mine.iter().cycle() {
                    let round = done.fetch_add(1, Ordering::Relaxed);
                    if round >= updates {
                        break;
                    }
                    let path = format!("/api/v1/namespaces/{namespace}/pods/{name}");
                    let label = round.to_string();
                    match how {
                        Update::GetPut => get_put(&mut http, &path, &label).await?,
                        Update::Patch => patch(&mut http, &path, &label).await?,
                        Update::RawCas => {
                            let set = |pod: &mut Value| set_label(pod, &label);
                            raw_cas(&mut kv, key, set).await?
                        }
                    }
                }
                anyhow::Ok(())
            });
        }
        while let Some(result) = workers.join_next().await {
            result.context("update worker")??;
        }
        Ok(started.elapsed().as_secs_f64())
    }

    /// Keys under `dir`.
    pub(super) async fn count(&self, dir: &str) -> anyhow::Result<usize> {
        let options = etcd_client::GetOptions::new()
            .with_prefix()
            .with_count_only();
        let response = self.client.kv_client().get(dir, Some(options)).await?;
        Ok(usize::try_from(response.count()).unwrap_or(0))
    }
}

/// What an update round works on.
struct Target<'a> {
    addr: SocketAddr,
    namespace: &'static str,
    names: &'a [String],
    /// Each name's etcd key, for the raw baseline.
    keys: &'a [String],
}

/// Seconds to `POST` a pod of each name, [`IN_FLIGHT`] connections at once.
async fn post_all(addr: SocketAddr, namespace: &str, names: Vec<String>) -> anyhow::Result<f64> {
    let names = Arc::new(names);
    let next = Arc::new(AtomicUsize::new(0));
    let path = Arc::new(format!("/api/v1/namespaces/{namespace}/pods"));
    let mut workers = JoinSet::new();
    let started = Instant::now();
    for _ in 0..IN_FLIGHT {
        let (names, next, path) = (names.clone(), next.clone(), path.clone());
        workers.spawn(async move {
            let mut http = HttpClient::new(addr);
            while let Some(name) = names.get(next.fetch_add(1, Ordering::Relaxed)) {
                let body = pod_body(name).to_string().into_bytes();
                let body = Some(("application/json", body.as_slice()));
                let response = http.send("POST", &path, None, body).await?;
                anyhow::ensure!(
                    response.status == 201,
                    "POST {name}: {} {}",
                    response.status,
                    String::from_utf8_lossy(&response.body)
                );
            }
            anyhow::Ok(())
        });
    }
    while let Some(result) = workers.join_next().await {
        result.context("POST worker")??;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// The pod `kubectl create -f` would send for the bench's controller's pod `name`.
fn pod_body(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "api", "tier": "web"}},
        "spec": {"containers": [{
            "name": "web",
            "image": "nginx:1.7.9",
            "ports": [{"name": "http", "containerPort": 80}],
        }]},
    })
}

/// `GET` the pod, set its `round` label, `PUT` it back with the resourceVersion read.
async fn get_put(http: &mut HttpClient, path: &str, label: &str) -> anyhow::Result<()> {
    let mut pod = http.get(path, None).await?.json()?;
    pod["metadata"]["labels"]["round"] = json!(label);
    let body = pod.to_string().into_bytes();
    let response = http
        .send("PUT", path, None, Some(("application/json", &body)))
        .await?;
    anyhow::ensure!(response.status == 200, "PUT {path}: {}", response.status);
    Ok(())
}

/// One merge `PATCH` of the pod's `round` label.
async fn patch(http: &mut HttpClient, path: &str, label: &str) -> anyhow::Result<()> {
    let body = json!({"metadata": {"labels": {"round": label}}}).to_string();
    let body = Some(("application/merge-patch+json", body.as_bytes()));
    let response = http.send("PATCH", path, None, body).await?;
    anyhow::ensure!(response.status == 200, "PATCH {path}: {}", response.status);
    Ok(())
}

/// Sets the pod's `round` label.
fn set_label(pod: &mut Value, label: &str) -> anyhow::Result<()> {
    pod["metadata"]["labels"]["round"] = json!(label);
    Ok(())
}

/// A get of `key`, `change` made to the parsed value, a transaction comparing the key's
/// `mod_revision` with the one read.
pub(super) async fn raw_cas(
    kv: &mut etcd_client::KvClient,
    key: &str,
    change: impl FnOnce(&mut Value) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let got = kv.get(key, None).await?;
    let current = got
        .kvs()
        .first()
        .with_context(|| format!("{key} is gone"))?;
    let mut object: Value = serde_json::from_slice(current.value())?;
    change(&mut object).with_context(|| format!("change {key}"))?;
    let txn = Txn::new()
        .when([Compare::mod_revision(
            key,
            CompareOp::Equal,
            current.mod_revision(),
        )])
        .and_then([TxnOp::put(key, serde_json::to_vec(&object)?, None)]);
    anyhow::ensure!(
        kv.txn(txn).await?.succeeded(),
        "{key} changed under its CAS"
    );
    Ok(())
}
