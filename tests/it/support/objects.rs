//! Controllers and pods as raw JSON documents in etcd, written and read with etcd-client the
//! way other tools write them with etcdctl (the key layout and the document shape are the
//! contract), and a namespace replayed revision by revision from etcd's own history.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, GetOptions, KeyValue, KvClient, Txn, TxnOp};
use serde_json::{json, Value};

use super::eventually;
use super::history::{self, HistoryEvent};

/// How long a manager may take to converge after a change (generous: tests run in parallel).
pub const CONVERGE: Duration = Duration::from_secs(60);

pub fn controller_key(namespace: &str, name: &str) -> String {
    format!("/registry/controllers/{namespace}/{name}")
}

pub fn pod_key(namespace: &str, name: &str) -> String {
    format!("/registry/pods/{namespace}/{name}")
}

/// A controller document with `selector` and template labels given separately.
pub fn controller_json(
    namespace: &str,
    name: &str,
    replicas: i64,
    selector: Value,
    template_labels: Value,
) -> Value {
    json!({
        "kind": "ReplicationController",
        "apiVersion": "v1beta3",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": format!("uid-{namespace}-{name}"),
            "creationTimestamp": "2014-11-01T00:00:00Z",
        },
        "spec": {
            "replicas": replicas,
            "selector": selector,
            "template": {
                "metadata": { "labels": template_labels },
                "spec": { "containers": [{ "name": "web", "image": "nginx" }] },
            },
        },
    })
}

pub fn service_key(namespace: &str, name: &str) -> String {
    format!("/registry/services/specs/{namespace}/{name}")
}

pub fn endpoints_key(namespace: &str, name: &str) -> String {
    format!("/registry/services/endpoints/{namespace}/{name}")
}

/// A pod document labelled `app={app}`, without status.
pub fn pod_json(namespace: &str, name: &str, app: &str) -> Value {
    json!({
        "kind": "Pod",
        "apiVersion": "v1beta3",
        "metadata": { "name": name, "namespace": namespace, "labels": { "app": app } },
        "spec": { "containers": [{ "name": "c", "image": "busybox" }] },
    })
}

/// A pod labelled `app={app}` with ports `http` 8080 and `metrics` 9090 on `node-1`,
/// Running with `ip` (no status at all when `ip` is empty): what a service can select.
pub fn serving_pod_json(namespace: &str, name: &str, app: &str, ip: &str) -> Value {
    let mut pod = json!({
        "kind": "Pod",
        "apiVersion": "v1beta3",
        "metadata": { "name": name, "namespace": namespace, "labels": { "app": app } },
        "spec": {
            "host": "node-1",
            "containers": [{
                "name": "web",
                "image": "nginx",
                "ports": [
                    { "name": "http", "containerPort": 8080 },
                    { "name": "metrics", "containerPort": 9090 },
                ],
            }],
        },
    });
    if !ip.is_empty() {
        pod["status"] = json!({ "phase": "Running", "host": "node-1", "podIP": ip });
    }
    pod
}

/// A service on port 80 selecting `app={app}`, forwarding to `container_port` (a number or
/// a port name).
pub fn service_json(namespace: &str, name: &str, app: &str, container_port: Value) -> Value {
    json!({
        "kind": "Service",
        "apiVersion": "v1beta3",
        "metadata": { "name": name, "namespace": namespace },
        "spec": { "selector": { "app": app }, "port": 80, "containerPort": container_port },
    })
}

/// Puts `value` at `key` and returns the revision etcd acknowledged.
pub async fn put(client: &Client, key: &str, value: impl Into<Vec<u8>>) -> i64 {
    client
        .clone()
        .put(key, value, None)
        .await
        .unwrap_or_else(|e| panic!("put {key}: {e}"))
        .header()
        .expect("responses carry a header")
        .revision()
}

/// Puts the JSON document `value` at `key`; returns the revision.
pub async fn put_json(client: &Client, key: &str, value: &Value) -> i64 {
    put(client, key, value.to_string()).await
}

/// Puts pod `namespace/name` labelled `app={app}` ([`pod_json`]); returns the revision.
pub async fn put_pod(client: &Client, namespace: &str, name: &str, app: &str) -> i64 {
    put_json(
        client,
        &pod_key(namespace, name),
        &pod_json(namespace, name, app),
    )
    .await
}

/// Deletes `key`, which must exist; returns the revision of the delete.
pub async fn delete(client: &Client, key: &str) -> i64 {
    let response = client
        .clone()
        .delete(key, None)
        .await
        .unwrap_or_else(|e| panic!("delete {key}: {e}"));
    assert_eq!(response.deleted(), 1, "{key} existed");
    response.header().expect("header").revision()
}

/// Puts a valid controller selecting (and stamping) `app={app}`.
pub async fn put_controller(
    client: &Client,
    namespace: &str,
    name: &str,
    app: &str,
    replicas: i64,
) {
    let labels = json!({ "app": app });
    let document = controller_json(namespace, name, replicas, labels.clone(), labels);
    put(
        client,
        &controller_key(namespace, name),
        document.to_string(),
    )
    .await;
}

/// Rewrites the JSON document at `key` with `change`, compare-and-swap on its mod revision,
/// retrying on conflicts (the manager writes controller status concurrently). Returns the
/// revision of the write.
pub async fn update_json(client: &Client, key: &str, mut change: impl FnMut(&mut Value)) -> i64 {
    let mut client = client.clone();
    for _ in 0..100 {
        let response = client.get(key, None).await.expect("get for update");
        let kv = response
            .kvs()
            .first()
            .unwrap_or_else(|| panic!("{key} not found"));
        let mut document: Value = serde_json::from_slice(kv.value()).expect("stored JSON");
        change(&mut document);
        let txn = Txn::new()
            .when([Compare::mod_revision(
                key,
                CompareOp::Equal,
                kv.mod_revision(),
            )])
            .and_then([TxnOp::put(key, document.to_string(), None)]);
        let response = client.txn(txn).await.expect("update txn");
        if response.succeeded() {
            return response.header().expect("header").revision();
        }
    }
    panic!("{key} kept changing under 100 updates");
}

pub async fn scale(client: &Client, namespace: &str, name: &str, replicas: i64) {
    update_json(client, &controller_key(namespace, name), |rc| {
        rc["spec"]["replicas"] = json!(replicas)
    })
    .await;
}

/// The stored controller document, `None` if absent.
pub async fn controller(client: &Client, namespace: &str, name: &str) -> Option<Value> {
    let response = client
        .clone()
        .get(controller_key(namespace, name), None)
        .await
        .expect("get controller");
    let kv = response.kvs().first()?;
    Some(serde_json::from_slice(kv.value()).expect("stored controller JSON"))
}

/// The stored Endpoints of service `namespace/name`: its entries, mod revision and version
/// (the number of writes since it was created); `None` if absent.
pub async fn endpoints(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Option<(Vec<String>, i64, i64)> {
    let response = client
        .clone()
        .get(endpoints_key(namespace, name), None)
        .await
        .expect("get endpoints");
    let kv = response.kvs().first()?;
    let document: Value = serde_json::from_slice(kv.value()).expect("endpoints JSON");
    let entries = serde_json::from_value(document["endpoints"].clone()).unwrap_or_default();
    Some((entries, kv.mod_revision(), kv.version()))
}

/// One stored pod, as much of it as the tests look at.
#[derive(Debug, Clone, PartialEq)]
pub struct PodInfo {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub phase: String,
    pub host: String,
    /// `status.podIP` ("" when unset).
    pub pod_ip: String,
    pub created_by: String,
    pub mod_revision: i64,
}

impl PodInfo {
    pub fn parse(name: String, value: &[u8], mod_revision: i64) -> PodInfo {
        let pod: Value = serde_json::from_slice(value).expect("stored pod JSON");
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        PodInfo {
            name,
            labels: serde_json::from_value(pod["metadata"]["labels"].clone()).unwrap_or_default(),
            phase: pod["status"]["phase"]
                .as_str()
                .unwrap_or("Pending")
                .to_owned(),
            host: text(&pod["spec"]["host"]),
            pod_ip: text(&pod["status"]["podIP"]),
            created_by: text(&pod["metadata"]["annotations"]["kubernetes.io/created-by"]),
            mod_revision,
        }
    }

    /// Pending, Running or Unknown. Failed and Succeeded pods are done, and a phase kcm
    /// does not know makes the pod undecodable, so uncountable.
    pub fn is_active(&self) -> bool {
        matches!(self.phase.as_str(), "Pending" | "Running" | "Unknown")
    }

    /// Active and labelled `app={app}`: what a controller selecting `app={app}` counts.
    pub fn counts_for(&self, app: &str) -> bool {
        self.is_active() && self.labels.get("app").map(String::as_str) == Some(app)
    }
}

/// A KV client that takes responses of thousands of pods (etcd-client's default limit is
/// 4 MiB).
fn kv(client: &Client) -> KvClient {
    client
        .kv_client()
        .max_decoding_message_size(256 * 1024 * 1024)
}

/// Every pod in `namespace`, by name, made by `parse` from its name and stored key-value.
async fn list_pods<T>(
    client: &Client,
    namespace: &str,
    parse: impl Fn(&str, &KeyValue) -> T,
) -> BTreeMap<String, T> {
    let prefix = pod_key(namespace, "");
    let response = kv(client)
        .get(prefix.as_str(), Some(GetOptions::new().with_prefix()))
        .await
        .expect("list pods");
    response
        .kvs()
        .iter()
        .map(|kv| {
            let key = kv.key_str().expect("utf-8 key");
            let name = key.strip_prefix(&prefix).expect("listed under prefix");
            (name.to_owned(), parse(name, kv))
        })
        .collect()
}

/// Every pod in `namespace`, by name.
pub async fn pods(client: &Client, namespace: &str) -> BTreeMap<String, PodInfo> {
    list_pods(client, namespace, |name, kv| {
        PodInfo::parse(name.to_owned(), kv.value(), kv.mod_revision())
    })
    .await
}

/// Every pod document in `namespace` as stored, whole, with its mod revision, by name.
pub async fn pod_documents(client: &Client, namespace: &str) -> BTreeMap<String, (Value, i64)> {
    list_pods(client, namespace, |_, kv| {
        let pod = serde_json::from_slice(kv.value()).expect("stored pod JSON");
        (pod, kv.mod_revision())
    })
    .await
}

/// The names of the pods in `namespace` that a controller selecting `app={app}` counts.
pub async fn active_pods(client: &Client, namespace: &str, app: &str) -> BTreeSet<String> {
    pods(client, namespace)
        .await
        .into_values()
        .filter(|pod| pod.counts_for(app))
        .map(|pod| pod.name)
        .collect()
}

/// How many pods in `namespace` are active (Pending, Running or Unknown), whatever their
/// labels.
pub async fn n_active(client: &Client, namespace: &str) -> usize {
    pods(client, namespace)
        .await
        .values()
        .filter(|pod| pod.is_active())
        .count()
}

/// Whether controller `namespace/name` (selecting `app={app}`) wants `replicas`, has exactly
/// that many active pods and has written that count to its status.
pub async fn is_converged(client: Client, namespace: &str, name: &str, app: &str, n: i64) -> bool {
    let Some(rc) = controller(&client, namespace, name).await else {
        return false;
    };
    rc["spec"]["replicas"] == json!(n)
        && rc["status"]["replicas"].as_i64().unwrap_or(0) == n
        && active_pods(&client, namespace, app).await.len() as i64 == n
}

/// Waits up to [`CONVERGE`] for [`is_converged`].
pub async fn wait_converged(client: &Client, namespace: &str, name: &str, app: &str, n: i64) {
    wait_converged_within(CONVERGE, client, namespace, name, app, n).await;
}

/// Waits up to `timeout` for [`is_converged`].
pub async fn wait_converged_within(
    timeout: Duration,
    client: &Client,
    namespace: &str,
    name: &str,
    app: &str,
    n: i64,
) {
    eventually(
        timeout,
        &format!("{namespace}/{name} to converge on {n} active pods with status.replicas {n}"),
        || is_converged(client.clone(), namespace, name, app, n),
    )
    .await;
}

/// How long each read of [`is_converged_bounded`] may take.
pub const BOUNDED_READ: Duration = Duration::from_secs(2);

/// The number of pods in `namespace`, whatever their labels and phase; `None` when etcd
/// fails or does not answer within [`BOUNDED_READ`].
pub async fn pod_count_bounded(client: &Client, namespace: &str) -> Option<usize> {
    let prefix = format!("/registry/pods/{namespace}/");
    let mut client = client.clone();
    let read = client.get(
        prefix.as_str(),
        Some(GetOptions::new().with_prefix().with_count_only()),
    );
    match tokio::time::timeout(BOUNDED_READ, read).await {
        Ok(Ok(response)) => Some(response.count() as usize),
        _ => None,
    }
}

/// Like [`is_converged`], for clusters whose members may hang or die: every read is bounded
/// to [`BOUNDED_READ`] and a failed or late read only makes it false; and it counts every pod
/// in `namespace`, whatever its labels and phase.
pub async fn is_converged_bounded(client: &Client, namespace: &str, name: &str, n: i64) -> bool {
    let mut kv = client.clone();
    let read = kv.get(controller_key(namespace, name), None);
    let Ok(Ok(response)) = tokio::time::timeout(BOUNDED_READ, read).await else {
        return false;
    };
    let Some(kv) = response.kvs().first() else {
        return false;
    };
    let rc: Value = serde_json::from_slice(kv.value()).expect("stored controller JSON");
    rc["spec"]["replicas"] == json!(n)
        && rc["status"]["replicas"].as_i64().unwrap_or(0) == n
        && pod_count_bounded(client, namespace).await == Some(n as usize)
}

/// Waits up to [`CONVERGE`] for [`is_converged_bounded`].
pub async fn wait_converged_bounded(client: &Client, namespace: &str, name: &str, n: i64) {
    eventually(
        CONVERGE,
        &format!("{namespace}/{name} to converge on {n} pods with status.replicas {n}"),
        || is_converged_bounded(client, namespace, name, n),
    )
    .await;
}

/// The current revision of etcd.
pub async fn current_revision(client: &Client) -> i64 {
    client
        .clone()
        .get("/kcm-test/revision-probe", None)
        .await
        .expect("read revision")
        .header()
        .expect("header")
        .revision()
}

/// One namespace's controllers and pods at one revision, as replayed by [`replay`].
#[derive(Debug, Default)]
pub struct Replayed {
    pods: HashMap<String, PodInfo>,
    /// Active pods by their `app` label, kept as pods change.
    active: HashMap<String, usize>,
    controllers: HashMap<String, Value>,
}

impl Replayed {
    /// How many pods a controller selecting `app={app}` counts.
    pub fn active(&self, app: &str) -> usize {
        self.active.get(app).copied().unwrap_or(0)
    }

    /// `spec.replicas` of controller `name`; `None` while it does not exist.
    pub fn replicas(&self, name: &str) -> Option<i64> {
        self.controllers.get(name)?["spec"]["replicas"].as_i64()
    }

    fn put_pod(&mut self, name: &str, pod: Option<PodInfo>) {
        let old = match pod {
            Some(pod) => self.pods.insert(name.to_owned(), pod),
            None => self.pods.remove(name),
        };
        fn counted(pod: &PodInfo) -> Option<&String> {
            pod.labels.get("app").filter(|_| pod.is_active())
        }
        if let Some(app) = old.as_ref().and_then(counted) {
            *self.active.get_mut(app).expect("counted when added") -= 1;
        }
        if let Some(app) = self.pods.get(name).and_then(counted) {
            *self.active.entry(app.clone()).or_default() += 1;
        }
    }
}

/// Replays namespace `namespace` from etcd's own history, so nothing a poller could miss:
/// calls `visit(start, [], state)` with its controllers and pods at revision `start`, then
/// `visit(revision, events, state)` after every later revision that touched them, with that
/// revision's events (one transaction is one revision), up to now.
pub async fn replay(
    client: &Client,
    namespace: &str,
    start: i64,
    mut visit: impl FnMut(i64, &[HistoryEvent], &Replayed),
) {
    // Inside the range read but outside every directory kcm watches: marks the history's end.
    const SENTINEL: &str = "/registry/pods~end";
    let pods = format!("/registry/pods/{namespace}/");
    let controllers = format!("/registry/controllers/{namespace}/");
    let mut state = Replayed::default();
    let apply = |state: &mut Replayed, key: &str, value: Option<&[u8]>, revision: i64| {
        if let Some(name) = key.strip_prefix(&pods) {
            let pod = value.map(|value| PodInfo::parse(name.to_owned(), value, revision));
            state.put_pod(name, pod);
        } else if let Some(name) = key.strip_prefix(&controllers) {
            match value {
                Some(value) => {
                    let document = serde_json::from_slice(value).expect("stored controller JSON");
                    state.controllers.insert(name.to_owned(), document);
                }
                None => {
                    state.controllers.remove(name);
                }
            }
        }
    };
    for prefix in [&pods, &controllers] {
        let options = GetOptions::new().with_prefix().with_revision(start);
        let snapshot = kv(client)
            .get(prefix.as_str(), Some(options))
            .await
            .expect("list at the start revision");
        for kv in snapshot.kvs() {
            let key = kv.key_str().expect("utf-8 key");
            apply(&mut state, key, Some(kv.value()), kv.mod_revision());
        }
    }
    visit(start, &[], &state);

    let events = history::read(client, "/registry/", "/registry0", start, SENTINEL).await;
    let ours =
        |event: &&HistoryEvent| event.key.starts_with(&pods) || event.key.starts_with(&controllers);
    let mut events = events.iter().filter(ours).peekable();
    let mut batch = Vec::new();
    while let Some(event) = events.next() {
        apply(
            &mut state,
            &event.key,
            event.put.then_some(&event.value[..]),
            event.revision,
        );
        batch.push(event.clone());
        if events
            .peek()
            .is_none_or(|next| next.revision != event.revision)
        {
            visit(event.revision, &batch, &state);
            batch.clear();
        }
    }
}

/// The count of active `app={app}` pods in `namespace` at `start` and after every later
/// revision that touched the namespace, from etcd's own history (see [`replay`]).
pub async fn replay_active_counts(
    client: &Client,
    namespace: &str,
    app: &str,
    start: i64,
) -> Vec<(i64, usize)> {
    let mut counts = Vec::new();
    replay(client, namespace, start, |revision, _, state| {
        counts.push((revision, state.active(app)))
    })
    .await;
    counts
}

/// ReplicationController `web` as `kcm create -f` reads it (no namespace): `replicas` of
/// `name=web`, one nginx container with a port named `http`.
pub fn web_controller(replicas: i64) -> Value {
    json!({
        "kind": "ReplicationController",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "selector": {"name": "web"},
            "template": {
                "metadata": {"labels": {"name": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.7",
                    "ports": [{"name": "http", "containerPort": 80}]}]}
            }
        }
    })
}

/// The JSON document stored at `key` (`None` when absent).
pub async fn raw(client: &mut Client, key: &str) -> Option<Value> {
    let response = client.get(key, None).await.expect("get");
    response
        .kvs()
        .first()
        .map(|kv| serde_json::from_slice(kv.value()).expect("stored JSON"))
}

/// How many keys etcd holds, under any prefix.
pub async fn key_count(client: &mut Client) -> i64 {
    client
        .get(
            "",
            Some(GetOptions::new().with_all_keys().with_count_only()),
        )
        .await
        .expect("count keys")
        .count()
}
