//! The node lifecycle controller through the API (`kcm controller-manager --kubeconfig
//! --controllers nodelifecycle`), against kcm's apiserver over a real etcd: the heartbeat
//! is each kubelet's node Lease in `kube-node-lease`, as in Kubernetes.
//!
//! - Real kubelets and kubectl: each kubelet renews its Lease (holder and owner its Node);
//!   a SIGKILLed kubelet's Node turns `NotReady` (Ready `Unknown`) once its Lease has not
//!   been renewed for the grace period, the other's never; a kubelet whose Node someone
//!   marked while it lives posts it Ready again; a new kubelet of the name brings it back.
//! - At 1,000 nodes (Nodes and Leases the test writes and renews itself), under one
//!   controller and under two unelected ones: every node whose Lease stops is marked in
//!   one write, and none whose Lease is renewed. Both checked from etcd's history: each
//!   marking came at least the grace period after the Lease's last renewal.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use etcd_client::{Client, Txn, TxnOp};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::support::history::{self, HistoryEvent};
use crate::support::kcm::Kcm;
use crate::support::kubectl::{start_apiserver, Api};
use crate::support::objects::current_revision;
use crate::support::{eventually, with_timeout};

const NODES: &str = "/registry/nodes/";
const LEASES: &str = "/registry/leases/kube-node-lease/";
const EVENTS: &str = "/registry/events/";

fn micro(at: SystemTime) -> String {
    humantime::format_rfc3339_micros(at).to_string()
}

fn parse_time(text: &str) -> SystemTime {
    humantime::parse_rfc3339(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn ready_condition(node: &Value) -> &Value {
    node["status"]["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().rev().find(|c| c["type"] == "Ready"))
        .unwrap_or(&Value::Null)
}

/// `kcm kubelet --node {node}` whose Lease lasts 4 s (renewed every second).
fn spawn_kubelet(etcd: &str, node: &str, cidr: &str) -> Kcm {
    Kcm::spawn(
        &[
            "--etcd-servers",
            etcd,
            "kubelet",
            "--node",
            node,
            "--pod-cidr",
            cidr,
            "--node-lease-duration-seconds",
            "4",
        ],
        &[],
    )
}

/// `kcm controller-manager --kubeconfig {api's} --controllers nodelifecycle` with grace
/// period `grace`.
async fn start_node_lifecycle(api: &Api, grace: Duration) -> Kcm {
    let kubeconfig = api.kubectl.kubeconfig().display().to_string();
    let grace = format!("{}s", grace.as_secs());
    Kcm::start(
        &[
            "--kubeconfig",
            &kubeconfig,
            "--controllers",
            "nodelifecycle",
            "--node-monitor-grace-period",
            &grace,
        ],
        &[],
    )
    .await
}

/// The STATUS kubectl shows for Node `node` (`Ready`, `NotReady`).
async fn status_of(api: &Api, node: &str) -> String {
    let out = api
        .kubectl
        .run(&["get", "node", node, "--no-headers"])
        .await;
    out.stdout
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .to_string()
}

/// What etcd's history says of the node Leases and the Nodes, replayed in order.
#[derive(Default)]
struct Heartbeats {
    /// Per node, the renewal time of its Lease as of now in the replay.
    renewed: BTreeMap<String, SystemTime>,
    /// Per node, the markings: (the Lease's last renewal before it, the marking's time).
    markings: BTreeMap<String, Vec<(Option<SystemTime>, SystemTime)>>,
    /// Per node, the Ready statuses written, in order (one per write of the Node).
    ready: BTreeMap<String, Vec<String>>,
}

impl Heartbeats {
    fn replay(events: &[HistoryEvent]) -> Heartbeats {
        let mut seen = Heartbeats::default();
        for event in events.iter().filter(|e| e.put) {
            if let Some(name) = event.key.strip_prefix(LEASES) {
                let lease: Value = serde_json::from_slice(&event.value).expect("a Lease is JSON");
                let renewed = parse_time(lease["spec"]["renewTime"].as_str().expect("renewTime"));
                seen.renewed.insert(name.to_string(), renewed);
            } else if let Some(name) = event.key.strip_prefix(NODES) {
                let node: Value = serde_json::from_slice(&event.value).expect("a Node is JSON");
                let ready = ready_condition(&node);
                let status = ready["status"].as_str().unwrap_or("").to_string();
                let marked = ready["reason"] == "NodeStatusUnknown";
                let record = seen.ready.entry(name.to_string()).or_default();
                // A marking is written once; the versions after it (until Ready again)
                // carry the same condition.
                let newly =
                    status == "Unknown" && record.last().map(String::as_str) != Some("Unknown");
                record.push(status);
                if marked && newly {
                    let at = parse_time(ready["lastTransitionTime"].as_str().expect("transition"));
                    let last = seen.renewed.get(name).copied();
                    seen.markings
                        .entry(name.to_string())
                        .or_default()
                        .push((last, at));
                }
            }
        }
        seen
    }

    /// Every marking came at least `grace` after its node's last renewal (the marking's
    /// time is written in whole seconds: one second of slack).
    fn check_grace(&self, grace: Duration) {
        for (node, markings) in &self.markings {
            for (renewed, at) in markings {
                let renewed = renewed.unwrap_or_else(|| panic!("{node} marked with no Lease"));
                let waited = (*at + Duration::from_secs(1))
                    .duration_since(renewed)
                    .unwrap_or_default();
                assert!(
                    waited >= grace,
                    "{node} marked Unknown {waited:?} after its Lease's last renewal, within the grace period {grace:?}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_kubelets_node_turns_not_ready_through_the_api_and_a_live_ones_never() {
    const GRACE: Duration = Duration::from_secs(6);
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(240), async {
        let etcd = api.etcd.client().await;
        let start = current_revision(&etcd).await;
        let mut n1 = spawn_kubelet(&api.etcd_url(), "n1", "10.1.0.0/24");
        let mut n2 = spawn_kubelet(&api.etcd_url(), "n2", "10.2.0.0/24");
        let mut manager = start_node_lifecycle(&api, GRACE).await;

        // Each kubelet renews its Lease, held by its node and owned by its Node.
        eventually(Duration::from_secs(60), "both node Leases, renewed", || async {
            let out = api
                .kubectl
                .run(&["get", "leases", "-n", "kube-node-lease", "-o", "json"])
                .await;
            let list = serde_json::from_str::<Value>(&out.stdout).unwrap_or(Value::Null);
            let items = list["items"].as_array().cloned().unwrap_or_default();
            items.len() == 2
                && items.iter().all(|l| {
                    let name = l["metadata"]["name"].as_str().unwrap_or("");
                    l["spec"]["holderIdentity"] == name
                        && l["spec"]["leaseDurationSeconds"] == 4
                        && l["metadata"]["ownerReferences"][0]["kind"] == "Node"
                })
        })
        .await;
        let node_uid = |node: Value| node["metadata"]["uid"].as_str().unwrap_or("").to_string();
        let n2_node: Value = serde_json::from_str(
            &api.kubectl.ok(&["get", "node", "n2", "-o", "json"]).await,
        )
        .expect("JSON");
        let lease: Value = serde_json::from_str(
            &api.kubectl
                .ok(&["get", "lease", "n2", "-n", "kube-node-lease", "-o", "json"])
                .await,
        )
        .expect("JSON");
        assert_eq!(
            lease["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "Node", "name": "n2", "uid": node_uid(n2_node)}])
        );
        let first = lease["spec"]["renewTime"].as_str().unwrap_or("").to_string();
        eventually(Duration::from_secs(30), "n2's Lease renewed again", || async {
            let out = api
                .kubectl
                .run(&["get", "lease", "n2", "-n", "kube-node-lease", "-o", "jsonpath={.spec.renewTime}"])
                .await;
            !out.stdout.is_empty() && out.stdout != first
        })
        .await;
        eventually(Duration::from_secs(30), "both nodes Ready", || async {
            status_of(&api, "n1").await == "Ready" && status_of(&api, "n2").await == "Ready"
        })
        .await;

        // Someone marks n2 while its kubelet lives (kubectl through nodes/status): the
        // kubelet, which watches its Node, posts it Ready again.
        api.kubectl
            .ok(&[
                "patch", "node", "n2", "--subresource=status", "--type=merge", "-p",
                r#"{"status":{"conditions":[{"type":"Ready","status":"Unknown","reason":"ByHand","message":"test"}]}}"#,
            ])
            .await;
        eventually(Duration::from_secs(30), "n2 posted Ready again by its kubelet", || async {
            let node = api.stored("/registry/nodes/n2").await.unwrap_or(Value::Null);
            let ready = ready_condition(&node);
            ready["status"] == "True" && ready["reason"] == "KubeletReady"
        })
        .await;

        // SIGKILL n1: its Lease stops; after the grace period its Node is NotReady.
        n1.signal(libc::SIGKILL);
        n1.wait_exit(Duration::from_secs(15)).await;
        eventually(Duration::from_secs(60), "n1 NotReady", || async {
            status_of(&api, "n1").await == "NotReady"
        })
        .await;
        let n1_node = api.stored("/registry/nodes/n1").await.expect("n1 stays");
        assert_eq!(ready_condition(&n1_node)["status"], "Unknown");
        assert_eq!(ready_condition(&n1_node)["reason"], "NodeStatusUnknown");
        assert_eq!(status_of(&api, "n2").await, "Ready");
        eventually(Duration::from_secs(30), "a NodeNotReady event for n1", || async {
            api.documents(EVENTS).await.iter().any(|e| {
                e["reason"] == "NodeNotReady" && e["involvedObject"]["name"] == "n1"
            })
        })
        .await;

        // A new kubelet of the name: Ready again.
        let mut n1_again = spawn_kubelet(&api.etcd_url(), "n1", "10.1.0.0/24");
        eventually(Duration::from_secs(60), "n1 Ready again", || async {
            status_of(&api, "n1").await == "Ready"
        })
        .await;
        manager.assert_running();
        n1_again.assert_running();
        n2.assert_running();

        // From etcd's history: n1 was marked once, at least the grace period after its
        // Lease's last renewal; n2, whose kubelet lived throughout, never by the
        // controller.
        let events = history::read(&etcd, "/registry/", "/registry0", start, "/registry/~end").await;
        let seen = Heartbeats::replay(&events);
        seen.check_grace(GRACE);
        assert_eq!(seen.markings.get("n1").map(Vec::len), Some(1), "{:?}", seen.ready);
        assert_eq!(seen.markings.get("n2"), None, "{:?}", seen.ready.get("n2"));
        assert!(manager.terminate().await.success());
    })
    .await;
}

/// The test's own fleet: `count` Nodes and their Leases, written straight to etcd.
async fn write_fleet(etcd: &Client, names: &[String]) {
    let now = SystemTime::now();
    for chunk in names.chunks(50) {
        let mut ops = Vec::new();
        for name in chunk {
            let created = humantime::format_rfc3339_seconds(now).to_string();
            let node = json!({
                "kind": "Node", "apiVersion": "v1",
                "metadata": {"name": name, "uid": format!("uid-{name}"), "creationTimestamp": created},
                "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                    "message": "test", "lastHeartbeatTime": created, "lastTransitionTime": created}]},
            });
            ops.push(TxnOp::put(format!("{NODES}{name}"), node.to_string(), None));
            ops.push(TxnOp::put(
                format!("{LEASES}{name}"),
                lease(name, now).to_string(),
                None,
            ));
        }
        etcd.clone()
            .txn(Txn::new().and_then(ops))
            .await
            .expect("write the fleet");
    }
}

fn lease(name: &str, renewed: SystemTime) -> Value {
    json!({
        "kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
        "metadata": {"name": name, "namespace": "kube-node-lease", "uid": format!("lease-{name}"),
            "creationTimestamp": humantime::format_rfc3339_seconds(renewed).to_string()},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 4, "renewTime": micro(renewed)},
    })
}

/// Renews the Leases of `names` every second until `stop`.
async fn renew(etcd: Client, names: Arc<Vec<String>>, stop: CancellationToken) {
    while !stop.is_cancelled() {
        let now = SystemTime::now();
        for chunk in names.chunks(100) {
            let ops = chunk
                .iter()
                .map(|name| {
                    TxnOp::put(
                        format!("{LEASES}{name}"),
                        lease(name, now).to_string(),
                        None,
                    )
                })
                .collect::<Vec<_>>();
            etcd.clone()
                .txn(Txn::new().and_then(ops))
                .await
                .expect("renew Leases");
        }
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_1000_nodes_through_the_api_each_silent_one_is_marked_once_and_no_renewed_one() {
    fleet_of_1000(1).await;
}

/// Two unelected controllers: each marking is a `PUT` at the resourceVersion read, so the
/// second finds the Node marked already (its informer) or changed (409).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_unelected_controllers_through_the_api_mark_each_silent_node_once() {
    fleet_of_1000(2).await;
}

/// 1,000 Nodes, half of them silent, under `managers` node lifecycle controllers through
/// the API: exactly the silent ones marked, each in one write, each at least the grace
/// period after its Lease's last renewal (etcd's history).
async fn fleet_of_1000(managers: usize) {
    const COUNT: usize = 1_000;
    const GRACE: Duration = Duration::from_secs(8);
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(300), async {
        let etcd = api.etcd.client().await;
        let start = current_revision(&etcd).await;
        let names: Vec<String> = (0..COUNT).map(|i| format!("node-{i:04}")).collect();
        write_fleet(&etcd, &names).await;
        // The even nodes live (their Leases renewed each second); the odd ones fall
        // silent at once.
        let (live, silent): (Vec<_>, Vec<_>) = names
            .iter()
            .cloned()
            .enumerate()
            .partition(|(i, _)| i % 2 == 0);
        let live: Vec<String> = live.into_iter().map(|(_, n)| n).collect();
        let silent: BTreeSet<String> = silent.into_iter().map(|(_, n)| n).collect();
        let stop = CancellationToken::new();
        let renewing = tokio::spawn(renew(etcd.clone(), Arc::new(live.clone()), stop.clone()));
        let mut running = Vec::new();
        for _ in 0..managers {
            running.push(start_node_lifecycle(&api, GRACE).await);
        }
        eventually(
            Duration::from_secs(120),
            "the 500 silent nodes NotReady",
            || async {
                let nodes = api.documents(NODES).await;
                let unknown = nodes
                    .iter()
                    .filter(|n| ready_condition(n)["status"] == "Unknown")
                    .count();
                unknown >= silent.len()
            },
        )
        .await;
        stop.cancel();
        renewing.await.expect("the renewals");
        for manager in &mut running {
            manager.assert_running();
        }

        let events =
            history::read(&etcd, "/registry/", "/registry0", start, "/registry/~end").await;
        let seen = Heartbeats::replay(&events);
        seen.check_grace(GRACE);
        let marked: BTreeSet<String> = seen.markings.keys().cloned().collect();
        assert_eq!(marked, silent, "exactly the silent nodes were marked");
        assert!(
            seen.markings.values().all(|m| m.len() == 1),
            "each marked once"
        );
        // One write each by the test, and one marking of each silent Node: no second
        // controller wrote a marking again.
        for name in &names {
            let writes = seen.ready.get(name).map_or(0, Vec::len);
            let expected = if silent.contains(name) { 2 } else { 1 };
            assert_eq!(writes, expected, "{name}: {:?}", seen.ready.get(name));
        }
        for manager in &mut running {
            assert!(manager.terminate().await.success());
        }
    })
    .await;
}
