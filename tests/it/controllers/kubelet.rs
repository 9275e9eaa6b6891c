//! Integration tests of the simulated kubelet (`Kubelet::run`, in-process) against a real
//! etcd: two nodes racing for fifty pods, checked against etcd's own history (every pod
//! claimed once, by one node), unique addresses, `--fail-rate 1`, `--max-pods`, and a restart
//! that keeps the addresses its pods hold; readiness (issue 13): `--ready-delay` and its
//! annotation, failing, crashing and unready images (from etcd's history, and as `kcm get
//! pods` shows them), and a restart that re-arms a pending Ready.
//!
//! Pods are written and read as raw JSON with etcd-client: the key layout and document shape
//! are the contract.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::time::Duration;

use etcd_client::Client;
use etcd_client::{Compare, CompareOp, Txn, TxnOp};
use kcm::etcd_watcher::Watcher;
use kcm::kubelet::{registration_key, Ipv4Cidr, Kubelet, KubeletConfig, Registration};
use kcm::registry::Registry;
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::support::history;
use crate::support::kcm::{run_kcm, Kcm};
use crate::support::objects::{current_revision, delete, pod_documents, pod_key};
use crate::support::{eventually, init_tracing, start_etcd, with_timeout, EtcdServer};

const LIMIT: Duration = Duration::from_secs(120);
/// How long nodes may take to settle after a change (generous: tests run in parallel).
const SETTLE: Duration = Duration::from_secs(60);
const NAMESPACE: &str = "sim";

// ---------------------------------------------------------------------------------------------
// Nodes running in-process

/// A `Kubelet::run` on its own task, stopped by [`Node::stop`] (or aborted on drop).
struct Node {
    stop: CancellationToken,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Node {
    async fn start(client: &Client, config: KubeletConfig) -> Node {
        init_tracing();
        let registry = Registry::new(client, "/registry").expect("registry");
        let watcher = Watcher::new(client, registry.clone());
        let registration =
            Registration::register(client, "/registry", &config.node, Duration::from_secs(5))
                .await
                .expect("register the node");
        let kubelet = Kubelet::new(registry, config).expect("valid kubelet config");
        let stop = CancellationToken::new();
        let task = tokio::spawn(kubelet.run(watcher, registration, stop.clone().cancelled_owned()));
        Node { stop, task }
    }

    /// Resolves the shutdown future and checks that `run` returns `Ok` promptly.
    async fn stop(mut self) {
        self.stop.cancel();
        let result = tokio::time::timeout(Duration::from_secs(15), &mut self.task)
            .await
            .expect("the kubelet stops within 15s of shutdown")
            .expect("the kubelet task does not panic");
        result.expect("the kubelet returns Ok on shutdown");
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn config(node: &str, cidr: &str) -> KubeletConfig {
    KubeletConfig {
        pod_cidr: cidr.parse().expect("test CIDR"),
        start_delay: Duration::from_millis(100),
        ..KubeletConfig::new(node)
    }
}

// ---------------------------------------------------------------------------------------------
// Pods as raw JSON in etcd

/// An unassigned pod without status, carrying fields kcm does not model.
fn unassigned_pod(name: &str) -> Value {
    json!({
        "kind": "Pod",
        "apiVersion": "v1beta3",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": { "app": "sim" },
            "generation": 3,
        },
        "spec": {
            "containers": [{ "name": "c", "image": "busybox", "resources": { "cpu": "1" } }],
            "restartPolicy": { "always": {} },
        },
        "futureField": [1, 2],
    })
}

async fn put_pods(client: &Client, names: impl IntoIterator<Item = String>) {
    for name in names {
        client
            .clone()
            .put(
                pod_key(NAMESPACE, &name),
                unassigned_pod(&name).to_string(),
                None,
            )
            .await
            .unwrap_or_else(|e| panic!("put pod {name}: {e}"));
    }
}

fn names(range: std::ops::Range<usize>) -> impl Iterator<Item = String> {
    range.map(|i| format!("pod-{i:02}"))
}

fn text<'a>(pod: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .fold(pod, |value, field| &value[field])
        .as_str()
        .unwrap_or_default()
}

fn phase(pod: &Value) -> &str {
    match text(pod, &["status", "phase"]) {
        "" => "Pending",
        phase => phase,
    }
}

fn host(pod: &Value) -> &str {
    text(pod, &["spec", "host"])
}

/// How many pods are in `phase`, by host ("" for unassigned).
async fn count_by_host(client: &Client, wanted: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for (pod, _) in pod_documents(client, NAMESPACE).await.values() {
        if phase(pod) == wanted {
            *counts.entry(host(pod).to_owned()).or_default() += 1;
        }
    }
    counts
}

/// Every write to the test namespace's pods after `start`, in order, from etcd's own history
/// (nothing a poller could miss): `(revision, name, document)`, `None` for a delete.
async fn history(client: &Client, start: i64) -> Vec<(i64, String, Option<Value>)> {
    // Just outside the kubelets' `/registry/pods/` range but inside the read one: marks the
    // end of the history to read.
    let events = history::read(
        client,
        "/registry/pods/",
        "/registry/pods\x7f",
        start,
        "/registry/pods~end",
    )
    .await;
    let prefix = pod_key(NAMESPACE, "");
    events
        .into_iter()
        .filter_map(|event| {
            let name = event.key.strip_prefix(&prefix)?.to_owned();
            let document = event
                .put
                .then(|| serde_json::from_slice(&event.value).expect("pod JSON"));
            Some((event.revision, name, document))
        })
        .collect()
}

/// Checks that every pod's `spec.host` went from empty to a node in one write and never
/// changed again, and that `status.host` always agrees with it once set. Returns each pod's
/// node.
#[track_caller]
fn assert_claimed_once(writes: &[(i64, String, Option<Value>)]) -> BTreeMap<String, String> {
    let mut hosts: BTreeMap<String, String> = BTreeMap::new();
    let mut claims: BTreeMap<String, usize> = BTreeMap::new();
    for (revision, name, document) in writes {
        let Some(pod) = document else {
            hosts.remove(name);
            continue;
        };
        let before = hosts.get(name).map(String::as_str).unwrap_or_default();
        let after = host(pod);
        if after != before {
            assert!(
                before.is_empty(),
                "pod {name} re-claimed at revision {revision}: host {before:?} became {after:?}"
            );
            *claims.entry(name.clone()).or_default() += 1;
            hosts.insert(name.clone(), after.to_owned());
        }
        let status_host = text(pod, &["status", "host"]);
        assert!(
            status_host.is_empty() || status_host == after,
            "pod {name} at revision {revision}: status.host {status_host:?}, spec.host {after:?}"
        );
    }
    for (name, n) in &claims {
        assert_eq!(*n, 1, "pod {name} was claimed {n} times");
    }
    hosts
}

/// The most active pods each node held at any revision of `writes`, starting from `initial`.
fn max_active_by_host(
    initial: &BTreeMap<String, (Value, i64)>,
    writes: &[(i64, String, Option<Value>)],
) -> BTreeMap<String, usize> {
    let is_active = |pod: &Value| !matches!(phase(pod), "Failed" | "Succeeded");
    let mut current: HashMap<String, Value> = initial
        .iter()
        .map(|(name, (pod, _))| (name.clone(), pod.clone()))
        .collect();
    let mut max: BTreeMap<String, usize> = BTreeMap::new();
    for (_, name, document) in writes {
        match document {
            Some(pod) => current.insert(name.clone(), pod.clone()),
            None => current.remove(name),
        };
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for pod in current.values().filter(|pod| is_active(pod)) {
            *counts.entry(host(pod)).or_default() += 1;
        }
        for (node, n) in counts {
            let entry = max.entry(node.to_owned()).or_default();
            *entry = (*entry).max(n);
        }
    }
    max.remove("");
    max
}

/// Checks the Running pods' addresses: present, distinct, and inside their node's range.
#[track_caller]
fn assert_addresses(pods: &BTreeMap<String, (Value, i64)>, cidrs: &[(&str, &str)]) {
    let mut seen: BTreeMap<Ipv4Addr, &str> = BTreeMap::new();
    for (name, (pod, _)) in pods.iter().filter(|(_, (pod, _))| phase(pod) == "Running") {
        let ip: Ipv4Addr = text(pod, &["status", "podIP"])
            .parse()
            .unwrap_or_else(|_| panic!("running pod {name} has no IPv4 podIP: {pod}"));
        if let Some(other) = seen.insert(ip, name) {
            panic!("pods {other} and {name} share the address {ip}");
        }
        let node = host(pod);
        let (_, cidr) = cidrs
            .iter()
            .find(|(n, _)| *n == node)
            .unwrap_or_else(|| panic!("pod {name} runs on unknown node {node:?}"));
        let cidr: Ipv4Cidr = cidr.parse().expect("test CIDR");
        assert!(
            cidr.is_pod_address(ip),
            "pod {name} on {node} has {ip}, outside {cidr}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_claim_fifty_pods_each_exactly_once_with_unique_addresses() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let start = current_revision(&client).await;
        // Half the pods are there before the nodes start (their first list), half arrive
        // while they run (the watch), so both paths race.
        put_pods(&client, names(0..25)).await;
        let nodes = [("node-a", "10.244.1.0/24"), ("node-b", "10.244.2.0/24")];
        let a = Node::start(&client, config(nodes[0].0, nodes[0].1)).await;
        let b = Node::start(&client, config(nodes[1].0, nodes[1].1)).await;
        put_pods(&client, names(25..50)).await;

        eventually(SETTLE, "all 50 pods to be Running", || async {
            count_by_host(&client, "Running")
                .await
                .values()
                .sum::<usize>()
                == 50
        })
        .await;
        let pods = pod_documents(&client, NAMESPACE).await;
        assert_addresses(&pods, &nodes);
        for (name, (pod, _)) in &pods {
            assert!(
                nodes.iter().any(|(node, _)| *node == host(pod)),
                "{name}: {pod}"
            );
            assert_eq!(text(pod, &["status", "host"]), host(pod), "{name}: {pod}");
            // Fields kcm does not model survive the claim and the start.
            assert_eq!(pod["futureField"], json!([1, 2]), "{name}: {pod}");
            // The claim wrote `spec.host`, a spec change: the registry added one.
            assert_eq!(pod["metadata"]["generation"], json!(4), "{name}: {pod}");
            assert_eq!(pod["spec"]["restartPolicy"], json!({ "always": {} }));
            assert_eq!(
                pod["spec"]["containers"][0]["resources"],
                json!({ "cpu": "1" })
            );
        }

        let writes = history(&client, start).await;
        let hosts = assert_claimed_once(&writes);
        assert_eq!(hosts.len(), 50, "every pod was claimed: {hosts:?}");
        // Each pod: created, claimed, started; nothing else (no lost-race overwrites).
        let mut writes_per_pod: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, name, _) in &writes {
            *writes_per_pod.entry(name).or_default() += 1;
        }
        for (name, n) in writes_per_pod {
            assert_eq!(n, 3, "pod {name} was written {n} times");
        }
        a.stop().await;
        b.stop().await;
    })
    .await;
}

/// A pod bound to `node`, as raw JSON.
fn pod_on(name: &str, node: &str) -> Value {
    let mut pod = unassigned_pod(name);
    pod["spec"]["host"] = json!(node);
    pod
}

/// Puts each of `pods` (key, document), 100 at a time.
async fn put_all(client: &Client, pods: Vec<(String, Value)>) {
    for chunk in pods.chunks(100) {
        futures::future::join_all(chunk.iter().map(|(key, pod)| {
            let mut client = client.clone();
            async move {
                client
                    .put(key.as_str(), pod.to_string(), None)
                    .await
                    .unwrap_or_else(|e| panic!("put {key}: {e}"));
            }
        }))
        .await;
    }
}

/// Every kubelet watches every pod, so a watch that asked etcd for previous values would
/// cost etcd a read of the previous value for each pod write and each kubelet (etcd's
/// `etcd_mvcc_range_total`): 3 kubelets and 2,000 writes of pods bound elsewhere would be
/// 6,000 reads. A deleted pod still leaves its node (the test above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelets_watching_every_pod_cost_etcd_no_read_per_pod_write() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let nodes = [
            ("node-a", "10.244.1.0/24"),
            ("node-b", "10.244.2.0/24"),
            ("node-c", "10.244.3.0/24"),
        ];
        let mut running = Vec::new();
        for (node, cidr) in nodes {
            running.push(Node::start(&client, config(node, cidr)).await);
        }
        // One pod on each node, Running once its kubelet's watch is open and read.
        let run_one_each = |round: &'static str| {
            let client = client.clone();
            async move {
                let pods = nodes
                    .iter()
                    .map(|(node, _)| {
                        let name = format!("{round}-{node}");
                        (pod_key(NAMESPACE, &name), pod_on(&name, node))
                    })
                    .collect();
                put_all(&client, pods).await;
                eventually(SETTLE, "a pod Running on each node", || async {
                    let running = pod_documents(&client, NAMESPACE).await;
                    nodes.iter().all(|(node, _)| {
                        running
                            .get(&format!("{round}-{node}"))
                            .is_some_and(|(pod, _)| phase(pod) == "Running")
                    })
                })
                .await;
            }
        };
        run_one_each("first").await;
        let before = etcd.metric("etcd_mvcc_range_total").await;

        // 1,000 pods bound to a node none of them runs: created, changed, deleted.
        const PODS: usize = 1_000;
        let elsewhere = |generation: i64| {
            (0..PODS)
                .map(|i| {
                    let name = format!("elsewhere-{i:04}");
                    let mut pod = pod_on(&name, "node-z");
                    pod["metadata"]["labels"]["generation"] = json!(generation.to_string());
                    (pod_key(NAMESPACE, &name), pod)
                })
                .collect::<Vec<_>>()
        };
        put_all(&client, elsewhere(1)).await;
        put_all(&client, elsewhere(2)).await;
        for chunk in elsewhere(2).chunks(100) {
            futures::future::join_all(chunk.iter().map(|(key, _)| delete(&client, key))).await;
        }
        // Each kubelet's watch is past every write above once it runs its next pod.
        run_one_each("last").await;
        let reads = etcd.metric("etcd_mvcc_range_total").await - before;
        // The kubelets' own reads (the three starts, lease renewals) are a few dozen.
        assert!(
            reads < 300.0,
            "etcd read {reads} times during {} pod writes watched by 3 kubelets",
            2 * PODS
        );
        for node in running {
            node.stop().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_rate_one_fails_every_started_pod_and_frees_its_address() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let start = current_revision(&client).await;
        let node = Node::start(
            &client,
            KubeletConfig {
                fail_rate: 1.0,
                fail_after: Duration::from_millis(300),
                // Failed pods free their slot, so all six get their turn.
                max_pods: 2,
                ..config("node-a", "10.244.1.0/24")
            },
        )
        .await;
        put_pods(&client, names(0..6)).await;

        eventually(SETTLE, "all 6 pods to be Failed on node-a", || async {
            count_by_host(&client, "Failed").await == BTreeMap::from([("node-a".into(), 6)])
        })
        .await;
        for (name, (pod, _)) in pod_documents(&client, NAMESPACE).await {
            assert_eq!(
                text(&pod, &["status", "podIP"]),
                "",
                "{name} kept its address"
            );
        }
        let writes = history(&client, start).await;
        assert_claimed_once(&writes);
        let mut phases: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (_, name, document) in &writes {
            phases
                .entry(name)
                .or_default()
                .push(phase(document.as_ref().expect("no pod is deleted")));
        }
        for (name, phases) in phases {
            assert_eq!(
                phases,
                ["Pending", "Pending", "Running", "Failed"],
                "pod {name}: created, claimed, started, failed"
            );
        }
        assert_eq!(
            max_active_by_host(&BTreeMap::new(), &writes),
            BTreeMap::from([("node-a".into(), 2)])
        );
        node.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_pods_caps_each_node_and_a_freed_slot_is_taken_again() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let start = current_revision(&client).await;
        put_pods(&client, names(0..8)).await;
        let a = Node::start(
            &client,
            KubeletConfig {
                max_pods: 3,
                ..config("node-a", "10.244.1.0/24")
            },
        )
        .await;
        let b = Node::start(
            &client,
            KubeletConfig {
                max_pods: 2,
                ..config("node-b", "10.244.2.0/24")
            },
        )
        .await;
        let full = BTreeMap::from([("node-a".into(), 3), ("node-b".into(), 2)]);
        eventually(SETTLE, "3 pods Running on node-a, 2 on node-b", || async {
            count_by_host(&client, "Running").await == full
        })
        .await;
        assert_eq!(
            count_by_host(&client, "Pending").await,
            BTreeMap::from([(String::new(), 3)]),
            "the rest wait unassigned"
        );

        // Deleting one of node-a's pods frees a slot; one of the waiting pods takes it.
        let (victim, _) = pod_documents(&client, NAMESPACE)
            .await
            .into_iter()
            .find(|(_, (pod, _))| host(pod) == "node-a")
            .expect("node-a has pods");
        client
            .clone()
            .delete(pod_key(NAMESPACE, &victim), None)
            .await
            .expect("delete a pod");
        eventually(SETTLE, "node-a to fill its freed slot", || async {
            count_by_host(&client, "Running").await == full
                && count_by_host(&client, "Pending").await == BTreeMap::from([(String::new(), 2)])
        })
        .await;

        let writes = history(&client, start).await;
        assert_claimed_once(&writes);
        assert_eq!(max_active_by_host(&BTreeMap::new(), &writes), full);
        a.stop().await;
        b.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_keeps_its_pods_addresses_and_hands_out_fresh_ones() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let nodes = [("node-a", "10.244.1.0/24")];
        let node = Node::start(&client, config(nodes[0].0, nodes[0].1)).await;
        put_pods(&client, names(0..5)).await;
        eventually(SETTLE, "5 pods Running", || async {
            count_by_host(&client, "Running").await == BTreeMap::from([("node-a".into(), 5)])
        })
        .await;
        node.stop().await;

        // While the node is down: one of its pods goes away (its address is free again) and
        // new pods arrive.
        let before = pod_documents(&client, NAMESPACE).await;
        client
            .clone()
            .delete(pod_key(NAMESPACE, "pod-00"), None)
            .await
            .expect("delete pod-00");
        put_pods(&client, names(5..10)).await;
        let start = current_revision(&client).await;

        let node = Node::start(&client, config(nodes[0].0, nodes[0].1)).await;
        eventually(SETTLE, "9 pods Running after the restart", || async {
            count_by_host(&client, "Running").await == BTreeMap::from([("node-a".into(), 9)])
        })
        .await;
        let after = pod_documents(&client, NAMESPACE).await;
        assert_addresses(&after, &nodes);
        // The pods that were running are left as they were.
        for name in names(1..5) {
            assert_eq!(after[&name], before[&name], "{name} was rewritten");
        }
        let writes = history(&client, start).await;
        assert_claimed_once(&writes);
        let rewritten: BTreeSet<&str> = writes.iter().map(|(_, name, _)| name.as_str()).collect();
        assert_eq!(
            rewritten,
            names(5..10)
                .collect::<BTreeSet<_>>()
                .iter()
                .map(String::as_str)
                .collect(),
        );
        node.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Node registration: one name, one kubelet

/// The registration of `node`: its value (`{pid}@{host}`), create revision and lease.
async fn registration(client: &Client, node: &str) -> Option<(String, i64, i64)> {
    let response = client
        .clone()
        .get(registration_key("/registry", node), None)
        .await
        .expect("read the registration");
    response.kvs().first().map(|kv| {
        (
            kv.value_str().expect("utf-8 value").to_owned(),
            kv.create_revision(),
            kv.lease(),
        )
    })
}

/// Waits until `kubelet` holds a registration of `node` created after revision `after`;
/// returns its create revision.
async fn wait_registered(client: &Client, kubelet: &mut Kcm, node: &str, after: i64) -> i64 {
    let holder = format!("{}@", kubelet.pid());
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        kubelet.assert_running();
        if let Some((value, create, _)) = registration(client, node).await {
            if create > after && value.starts_with(&holder) {
                return create;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {holder} to register {node}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `kcm kubelet --node {node}` against `endpoint`, starting pods after 100 ms.
fn spawn_kubelet(endpoint: &str, node: &str, cidr: &str) -> Kcm {
    Kcm::spawn(
        &[
            "--etcd-servers",
            endpoint,
            "kubelet",
            "--node",
            node,
            "--pod-cidr",
            cidr,
            "--start-delay",
            "100ms",
        ],
        &[],
    )
}

/// A test etcd, a client, and `kcm kubelet --node n1` registered on it (at the revision
/// returned); `None` without etcd.
async fn n1_on_etcd() -> Option<(EtcdServer, Client, Kcm, i64)> {
    let etcd = start_etcd().await?;
    let client = etcd.client().await;
    let mut kubelet = spawn_kubelet(&etcd.endpoint(), "n1", "10.244.1.0/24");
    let registered = wait_registered(&client, &mut kubelet, "n1", 0).await;
    Some((etcd, client, kubelet, registered))
}

/// The one line a failed `kcm` printed on stderr.
#[track_caller]
fn one_line(stderr: &str) -> &str {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {stderr:?}");
    lines[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_kubelet_with_a_name_in_use_is_refused_and_the_first_keeps_working() {
    with_timeout(LIMIT, async {
        let Some((etcd, client, mut first, _)) = n1_on_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        // The first kubelet posts its Node after it registers: its write, not the
        // second's, must come before `start`.
        crate::support::eventually(Duration::from_secs(30), "n1's Node posted", || {
            let client = client.clone();
            async move {
                let node = client.clone().get("/registry/nodes/n1", None).await;
                node.is_ok_and(|node| node.count() == 1)
            }
        })
        .await;
        let start = current_revision(&client).await;
        let second = run_kcm(
            &["--etcd-servers", &endpoint, "kubelet", "--node", "n1"],
            &[],
        )
        .await;
        assert_eq!(second.status.code(), Some(1), "{second:?}");
        let line = one_line(&second.stderr);
        let holder = format!("registered by {}@", first.pid());
        for part in ["node n1 is taken", holder.as_str(), "use another --node"] {
            assert!(line.contains(part), "{line:?} should contain {part:?}");
        }
        assert_eq!(
            current_revision(&client).await,
            start,
            "the refused kubelet wrote nothing"
        );

        // The first goes on: a new pod runs on n1.
        put_pods(&client, names(0..1)).await;
        eventually(SETTLE, "pod-00 Running on n1", || async {
            count_by_host(&client, "Running").await == BTreeMap::from([("n1".into(), 1)])
        })
        .await;
        first.assert_running();

        // A clean stop gives the name back at once (no waiting for the lease to expire).
        assert!(first.terminate().await.success());
        assert_eq!(registration(&client, "n1").await, None, "released on exit");
        let mut third = spawn_kubelet(&endpoint, "n1", "10.244.1.0/24");
        wait_registered(&client, &mut third, "n1", 0).await;
        assert!(third.terminate().await.success());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_kubelets_name_is_taken_back_by_its_successor_on_the_same_host() {
    with_timeout(LIMIT, async {
        let Some((etcd, client, mut first, old)) = n1_on_etcd().await else {
            return;
        };
        first.signal(libc::SIGKILL);
        first.wait_exit(Duration::from_secs(15)).await;
        let (_, create, lease) = registration(&client, "n1").await.expect("left behind");
        assert_eq!(create, old);
        assert_ne!(lease, 0);

        // Its lease still runs, but its process is gone: the successor replaces it.
        let mut second = spawn_kubelet(&etcd.endpoint(), "n1", "10.244.1.0/24");
        let new = wait_registered(&client, &mut second, "n1", old).await;
        assert!(new > old);
        let stale = format!("holder={}@", first.pid());
        assert_eq!(
            second
                .warnings_about("replacing a stale node registration")
                .iter()
                .filter(|line| line.contains(&stale) && line.contains("its process is gone"))
                .count(),
            1,
            "{}",
            second.log()
        );
        assert!(second.terminate().await.success());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubelet_whose_name_was_taken_over_writes_nothing_more_and_exits() {
    with_timeout(LIMIT, async {
        let Some((_etcd, client, mut kubelet, _)) = n1_on_etcd().await else {
            return;
        };
        put_pods(&client, names(0..1)).await;
        eventually(SETTLE, "pod-00 Running on n1", || async {
            count_by_host(&client, "Running").await == BTreeMap::from([("n1".into(), 1)])
        })
        .await;

        // As if its lease had run out and another host's kubelet had registered n1: the key
        // is deleted and created again by someone else.
        let key = registration_key("/registry", "n1");
        let taken_at = loop {
            client.clone().delete(key.as_str(), None).await.expect("delete");
            let create = Txn::new()
                .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(key.as_str(), "1@elsewhere", None)]);
            let response = client.clone().txn(create).await.expect("create");
            if response.succeeded() {
                break response.header().expect("header").revision();
            }
        };
        // Work it would do if it still wrote: a pod to claim, one of its own to start.
        put_pods(&client, names(1..2)).await;
        let mut own = unassigned_pod("pod-02");
        own["spec"]["host"] = json!("n1");
        client
            .clone()
            .put(pod_key(NAMESPACE, "pod-02"), own.to_string(), None)
            .await
            .expect("put pod-02");

        let status = kubelet.wait_exit(SETTLE).await;
        assert_eq!(status.code(), Some(1), "{}", kubelet.log());
        let last = kubelet.log().lines().last().unwrap_or_default().to_owned();
        assert!(
            last.starts_with("kcm: this kubelet lost its registration and stopped writing: node n1 is taken: registered by 1@elsewhere"),
            "{last:?}"
        );
        // Nothing but the test's own two pods was written after the takeover.
        let writes: Vec<(String, Option<String>)> = history(&client, taken_at)
            .await
            .into_iter()
            .map(|(_, name, pod)| (name, pod.map(|pod| host(&pod).to_owned())))
            .collect();
        assert_eq!(
            writes,
            [
                ("pod-01".to_owned(), Some(String::new())),
                ("pod-02".to_owned(), Some("n1".to_owned()))
            ]
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubelet_whose_registration_was_deleted_or_revoked_registers_again_before_writing() {
    with_timeout(LIMIT, async {
        let Some((_etcd, client, mut kubelet, mut registered)) = n1_on_etcd().await else {
            return;
        };
        for (round, how) in ["delete", "revoke"].into_iter().enumerate() {
            let (_, _, lease) = registration(&client, "n1").await.expect("registered");
            let lost_at = if how == "delete" {
                delete(&client, &registration_key("/registry", "n1")).await
            } else {
                client.clone().lease_revoke(lease).await.expect("revoke");
                current_revision(&client).await
            };
            // A pod to claim at once: the claim must wait for the new registration.
            let pod = format!("pod-{round:02}");
            put_pods(&client, [pod.clone()]).await;
            registered = wait_registered(&client, &mut kubelet, "n1", registered).await;
            eventually(SETTLE, &format!("{pod} Running on n1"), || async {
                count_by_host(&client, "Running").await.get("n1") == Some(&(round + 1))
            })
            .await;
            let claimed_at = history(&client, lost_at)
                .await
                .into_iter()
                .find(|(_, name, document)| {
                    *name == pod && document.as_ref().is_some_and(|d| host(d) == "n1")
                })
                .map(|(revision, _, _)| revision)
                .expect("the claim is in the history");
            assert!(
                claimed_at > registered,
                "{pod} was claimed at revision {claimed_at}, before n1 registered again at {registered}"
            );
            let losses = kubelet
                .log()
                .lines()
                .filter(|line| line.contains(" WARN ") && line.contains("node registration lost"))
                .count();
            assert!(losses > round, "the {how} is logged: {}", kubelet.log());
        }
        assert!(kubelet.terminate().await.success());
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Readiness and failing images (issue 13)

/// An unassigned pod running `image`, with `annotations`.
async fn put_pod_with_image(client: &Client, name: &str, image: &str, annotations: Value) {
    let mut pod = unassigned_pod(name);
    pod["spec"]["containers"][0]["image"] = json!(image);
    pod["metadata"]["annotations"] = annotations;
    client
        .clone()
        .put(pod_key(NAMESPACE, name), pod.to_string(), None)
        .await
        .unwrap_or_else(|e| panic!("put pod {name}: {e}"));
}

/// The Ready condition's status ("" without one).
fn ready(pod: &Value) -> &str {
    pod["status"]["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == "Ready"))
        .map_or("", |c| c["status"].as_str().unwrap_or_default())
}

fn container(pod: &Value) -> &Value {
    &pod["status"]["containerStatuses"][0]
}

/// `(phase, Ready, waiting reason, restartCount, has an IP)` of each write to pod `name`.
fn states<'a>(
    writes: &'a [(i64, String, Option<Value>)],
    name: &str,
) -> Vec<(&'a str, &'a str, &'a str, i64, bool)> {
    writes
        .iter()
        .filter(|(_, n, _)| n == name)
        .filter_map(|(_, _, document)| document.as_ref())
        .map(|pod| {
            (
                phase(pod),
                ready(pod),
                text(container(pod), &["state", "waiting", "reason"]),
                container(pod)["restartCount"].as_i64().unwrap_or_default(),
                !text(pod, &["status", "podIP"]).is_empty(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_delay_reports_running_unready_first_and_ready_in_a_later_write() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let start = current_revision(&client).await;
        let node = Node::start(
            &client,
            KubeletConfig {
                ready_delay: Duration::from_secs(1),
                ..config("node-a", "10.244.1.0/24")
            },
        )
        .await;
        put_pod_with_image(&client, "slow", "nginx:1", json!({})).await;
        put_pod_with_image(
            &client,
            "quick",
            "nginx:1",
            json!({"kcm.io/ready-delay": "0s"}),
        )
        .await;
        eventually(SETTLE, "both pods to be Ready", || async {
            let pods = pod_documents(&client, NAMESPACE).await;
            pods.len() == 2 && pods.values().all(|(pod, _)| ready(pod) == "True")
        })
        .await;
        let writes = history(&client, start).await;
        let running: Vec<_> = states(&writes, "slow")
            .into_iter()
            .filter(|(phase, ..)| *phase == "Running")
            .collect();
        assert_eq!(
            running,
            [
                ("Running", "False", "", 0, true),
                ("Running", "True", "", 0, true)
            ],
            "slow: Running unready, then Ready in a later write"
        );
        let quick = states(&writes, "quick");
        assert_eq!(
            quick.iter().find(|(phase, ..)| *phase == "Running"),
            Some(&("Running", "True", "", 0, true)),
            "the annotation's 0s: Ready in the Running write ({quick:?})"
        );
        let (pod, _) = &pod_documents(&client, NAMESPACE).await["slow"];
        assert_eq!(container(pod)["ready"], json!(true));
        assert!(container(pod)["state"]["running"]["startedAt"].is_string());
        node.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_crashing_and_unready_images_never_turn_ready() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let start = current_revision(&client).await;
        let node = Node::start(&client, config("node-a", "10.244.1.0/24")).await;
        put_pod_with_image(&client, "pull", "nginx:doesnotexist", json!({})).await;
        put_pod_with_image(&client, "crash", "nginx:crash", json!({})).await;
        put_pod_with_image(&client, "unready", "nginx:unready", json!({})).await;
        eventually(
            SETTLE,
            "ImagePullBackOff, a restarted crashing pod and a running unready one",
            || async {
                let pods = pod_documents(&client, NAMESPACE).await;
                let get = |name: &str| pods.get(name).map(|(pod, _)| pod.clone());
                let (Some(pull), Some(crash), Some(unready)) =
                    (get("pull"), get("crash"), get("unready"))
                else {
                    return false;
                };
                text(container(&pull), &["state", "waiting", "reason"]) == "ImagePullBackOff"
                    && container(&crash)["restartCount"].as_i64() >= Some(1)
                    && phase(&unready) == "Running"
            },
        )
        .await;
        let writes = history(&client, start).await;
        let pull = states(&writes, "pull");
        assert!(
            pull.iter()
                .all(|(phase, ready, ..)| *phase == "Pending" && *ready != "True"),
            "never Running: {pull:?}"
        );
        let reasons: Vec<&str> = pull
            .iter()
            .map(|(_, _, reason, ..)| *reason)
            .filter(|r| !r.is_empty())
            .collect();
        assert_eq!(reasons, ["ErrImagePull", "ImagePullBackOff"]);
        let crash = states(&writes, "crash");
        assert!(
            crash.iter().all(|(_, ready, ..)| *ready != "True"),
            "never Ready: {crash:?}"
        );
        let last = crash.last().expect("crash was written");
        assert_eq!(
            (last.0, last.2, last.4),
            ("Running", "CrashLoopBackOff", true),
            "{crash:?}"
        );
        let unready = states(&writes, "unready");
        assert!(
            unready
                .iter()
                .all(|(_, ready, _, restarts, _)| *ready != "True" && *restarts == 0),
            "{unready:?}"
        );
        assert_eq!(unready.last(), Some(&("Running", "False", "", 0, true)));

        // The pod table shows them as kubectl would.
        let table = run_kcm(
            &[
                "--etcd-servers",
                &etcd.endpoint(),
                "get",
                "pods",
                "-n",
                NAMESPACE,
            ],
            &[],
        )
        .await;
        assert!(table.status.success(), "{table:?}");
        let rows: BTreeMap<&str, Vec<&str>> = table
            .stdout
            .lines()
            .skip(1)
            .map(|line| {
                let cells: Vec<&str> = line.split_whitespace().collect();
                (cells[0], cells[1..4].to_vec())
            })
            .collect();
        assert_eq!(
            rows["pull"],
            ["0/1", "ImagePullBackOff", "0"],
            "{}",
            table.stdout
        );
        assert_eq!(
            rows["crash"][..2],
            ["0/1", "CrashLoopBackOff"],
            "{}",
            table.stdout
        );
        assert_eq!(rows["unready"], ["0/1", "Running", "0"], "{}", table.stdout);
        node.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_turns_its_unready_pods_ready_when_their_delay_is_over() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let slow = KubeletConfig {
            ready_delay: Duration::from_secs(3),
            ..config("node-a", "10.244.1.0/24")
        };
        let node = Node::start(&client, slow.clone()).await;
        put_pod_with_image(&client, "slow", "nginx:1", json!({})).await;
        eventually(SETTLE, "slow to be Running and unready", || async {
            pod_documents(&client, NAMESPACE)
                .await
                .get("slow")
                .is_some_and(|(pod, _)| phase(pod) == "Running" && ready(pod) == "False")
        })
        .await;
        node.stop().await;
        let node = Node::start(&client, slow).await;
        eventually(SETTLE, "slow to turn Ready after the restart", || async {
            pod_documents(&client, NAMESPACE)
                .await
                .get("slow")
                .is_some_and(|(pod, _)| ready(pod) == "True")
        })
        .await;
        node.stop().await;
    })
    .await;
}

/// A node at `--max-pods` while unassigned pods wait says why they stay Pending, once, and
/// once more when none waits any more (a 1,000-replica deployment on two default nodes would
/// otherwise sit at 220 pods without a word).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_node_says_once_that_pods_wait_for_room_and_once_when_none_waits() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let kubelet = Kcm::spawn(
            &[
                "--etcd-servers",
                &etcd.endpoint(),
                "kubelet",
                "--node",
                "n1",
                "--max-pods",
                "2",
                "--start-delay",
                "50ms",
            ],
            &[],
        );
        put_pods(&client, names(0..3)).await;
        eventually(SETTLE, "the node full with 2 running pods", || async {
            count_by_host(&client, "Running").await.get("n1") == Some(&2)
                && !kubelet.warnings_about("node is full").is_empty()
        })
        .await;
        let warning = kubelet.warnings_about("node is full");
        assert_eq!(warning.len(), 1, "said once: {warning:?}");
        assert!(warning[0].contains("max_pods=2"), "{warning:?}");
        assert!(warning[0].contains("--max-pods"), "{warning:?}");
        // Free a place: the node claims the pod that waited and says none waits now.
        let (name, _) = pod_documents(&client, NAMESPACE)
            .await
            .into_iter()
            .find(|(_, (pod, _))| host(pod) == "n1")
            .expect("a claimed pod");
        delete(&client, &pod_key(NAMESPACE, &name)).await;
        eventually(SETTLE, "the waiting pod claimed", || async {
            count_by_host(&client, "Running").await.get("n1") == Some(&2)
                && kubelet.log().contains("no pod waits for room any more")
        })
        .await;
        assert_eq!(kubelet.warnings_about("node is full").len(), 1);
    })
    .await;
}
