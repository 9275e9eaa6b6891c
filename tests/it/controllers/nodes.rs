//! Node objects against a real etcd: `kcm kubelet` posts its Node (`{prefix}/nodes/{name}`,
//! core/v1 JSON) Ready with `capacity.pods` = `--max-pods`, its pod CIDR and addresses; the
//! node lifecycle controller of `kcm controller-manager` marks it Ready Unknown once its
//! registration (`{prefix}/minions/{name}`) has been gone for `--node-monitor-grace-period`,
//! and never deletes it; a new kubelet of the name posts Ready again under the same uid.
//! Checked from the documents and from etcd's own history: every Unknown was written while
//! the registration was absent, every Ready while it was present.
//!
//! Documents are read as raw JSON with etcd-client: the key layout and document shape are
//! the contract the apiserver serves.

use std::time::Duration;

use etcd_client::Client;
use serde_json::{json, Value};

use crate::support::history;
use crate::support::kcm::{start_manager, Kcm};
use crate::support::objects::update_json;
use crate::support::{eventually, start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(180);
/// The grace period the manager runs with: short, so the test does not wait 40 s.
const GRACE: &str = "2s";
/// Registration lease TTL (10 s) + grace + slack for a loaded machine.
const LAPSE: Duration = Duration::from_secs(60);
const SETTLE: Duration = Duration::from_secs(60);

const NODE_KEY: &str = "/registry/nodes/n1";
const REGISTRATION_KEY: &str = "/registry/minions/n1";

/// `kcm kubelet --node n1 --pod-cidr 10.244.1.0/24 --max-pods 7` against `endpoint`.
fn spawn_kubelet(endpoint: &str) -> Kcm {
    Kcm::spawn(
        &[
            "--etcd-servers",
            endpoint,
            "kubelet",
            "--node",
            "n1",
            "--pod-cidr",
            "10.244.1.0/24",
            "--max-pods",
            "7",
        ],
        &[],
    )
}

/// The stored Node n1 and its revision, if any.
async fn node(client: &Client) -> Option<(Value, i64)> {
    let response = client
        .clone()
        .get(NODE_KEY, None)
        .await
        .expect("read the Node");
    response.kvs().first().map(|kv| {
        (
            serde_json::from_slice(kv.value()).expect("the Node is JSON"),
            kv.mod_revision(),
        )
    })
}

async fn registered(client: &Client) -> bool {
    let response = client
        .clone()
        .get(REGISTRATION_KEY, None)
        .await
        .expect("read the registration");
    !response.kvs().is_empty()
}

fn condition<'a>(node: &'a Value, type_: &str) -> &'a Value {
    node["status"]["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == type_))
        .unwrap_or(&Value::Null)
}

fn ready(node: &Value) -> &str {
    condition(node, "Ready")["status"].as_str().unwrap_or("")
}

/// Waits until Node n1's Ready condition is `status`; returns the Node.
async fn wait_ready(client: &Client, status: &str, limit: Duration) -> Value {
    eventually(limit, &format!("Node n1 Ready {status}"), || async {
        node(client)
            .await
            .is_some_and(|(node, _)| ready(&node) == status)
    })
    .await;
    node(client).await.expect("the Node exists").0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_ready_condition_follows_its_kubelets_registration_and_the_node_stays() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let endpoint = etcd.endpoint();
        let mut manager = start_manager(
            &endpoint,
            &[
                "--controllers",
                "nodelifecycle",
                "--node-monitor-grace-period",
                GRACE,
            ],
        )
        .await;

        // A kubelet registers: its Node is posted Ready, with what the flags say.
        let mut first = spawn_kubelet(&endpoint);
        let posted = wait_ready(&client, "True", SETTLE).await;
        assert_eq!(posted["kind"], "Node");
        assert_eq!(posted["apiVersion"], "v1");
        let meta = &posted["metadata"];
        assert_eq!(meta["name"], "n1");
        assert_eq!(meta.get("namespace"), None);
        let uid = meta["uid"].as_str().expect("a uid").to_owned();
        assert!(!uid.is_empty());
        let created = meta["creationTimestamp"]
            .as_str()
            .expect("created")
            .to_owned();
        assert_eq!(meta["labels"]["kubernetes.io/hostname"], "n1");
        assert_eq!(meta["labels"]["kubernetes.io/os"], "linux");
        assert_eq!(
            posted["spec"],
            json!({"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]})
        );
        assert_eq!(posted["status"]["capacity"]["pods"], "7");
        assert_eq!(posted["status"]["allocatable"]["pods"], "7");
        assert_eq!(
            posted["status"]["addresses"],
            json!([{"type": "InternalIP", "address": "10.244.1.1"},
                {"type": "Hostname", "address": "n1"}])
        );
        let info = &posted["status"]["nodeInfo"];
        assert!(
            info["kubeletVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("v1.32.0-kcm.")),
            "{info}"
        );
        assert_eq!(info["operatingSystem"], "linux");
        assert_eq!(info["containerRuntimeVersion"], "kcm-simulated");
        assert_eq!(info["osImage"], "kcm simulated node");
        let first_ready = condition(&posted, "Ready").clone();
        assert_eq!(first_ready["reason"], "KubeletReady");
        assert_eq!(first_ready["message"], "kubelet is posting ready status");
        // Someone else's fields, which every later write must keep.
        update_json(&client, NODE_KEY, |node| {
            node["metadata"]["labels"]["team"] = json!("a");
            node["spec"]["unschedulable"] = json!(true);
        })
        .await;

        // SIGKILL: nobody releases the registration; its lease lapses within 10 s, and the
        // grace period later the Node says Unknown, and is still there.
        first.signal(libc::SIGKILL);
        first.wait_exit(Duration::from_secs(15)).await;
        let lost = wait_ready(&client, "Unknown", LAPSE).await;
        assert!(!registered(&client).await);
        let unknown = condition(&lost, "Ready");
        assert_eq!(unknown["reason"], "NodeStatusUnknown");
        assert_eq!(unknown["message"], "Kubelet stopped posting node status.");
        assert_eq!(
            unknown["lastHeartbeatTime"],
            first_ready["lastHeartbeatTime"]
        );
        for type_ in ["MemoryPressure", "DiskPressure", "PIDPressure"] {
            assert_eq!(condition(&lost, type_)["status"], "Unknown", "{type_}");
        }
        assert_eq!(lost["metadata"]["uid"], uid.as_str());
        assert_eq!(lost["metadata"]["labels"]["team"], "a");
        assert_eq!(lost["status"]["capacity"]["pods"], "7");

        // A new kubelet of the name: Ready again, the same Node (uid, creation), others'
        // fields kept.
        let mut second = spawn_kubelet(&endpoint);
        let back = wait_ready(&client, "True", SETTLE).await;
        assert_eq!(back["metadata"]["uid"], uid.as_str());
        assert_eq!(back["metadata"]["creationTimestamp"], created.as_str());
        assert_eq!(back["metadata"]["labels"]["team"], "a");
        assert_eq!(back["spec"]["unschedulable"], true);
        assert_eq!(condition(&back, "Ready")["reason"], "KubeletReady");
        second.assert_running();

        // A clean stop releases the registration at once: Unknown after the grace period.
        assert!(second.terminate().await.success());
        wait_ready(&client, "Unknown", SETTLE).await;
        manager.assert_running();
        assert!(
            node(&client).await.is_some(),
            "the Node is listed until deleted"
        );

        // From etcd's history: Unknown written only while unregistered, Ready only while
        // registered; two kubelet posts (create, then update) and two markings in all.
        let events = history::read(
            &client,
            "/registry/",
            "/registry0",
            0,
            "/registry/~nodes-end",
        )
        .await;
        let mut registration = false;
        let mut writes = Vec::new();
        for event in &events {
            if event.key == REGISTRATION_KEY {
                registration = event.put;
            } else if event.key == NODE_KEY && event.put {
                let node: Value = serde_json::from_slice(&event.value).expect("JSON");
                let status = ready(&node).to_owned();
                match status.as_str() {
                    "True" => assert!(registration, "Ready posted while unregistered: {node}"),
                    "Unknown" => assert!(!registration, "Unknown while registered: {node}"),
                    other => panic!("Ready {other:?}"),
                }
                writes.push(status);
            }
        }
        // The test's own update (labels) came between the first two.
        assert_eq!(writes, ["True", "True", "Unknown", "True", "Unknown"]);
        assert!(manager.terminate().await.success());
    })
    .await;
}
