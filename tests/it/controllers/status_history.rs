//! A scale-up's status never runs backwards (issue 33): a Deployment of 10,000 replicas,
//! and etcd's history of its ReplicaSet's and its own status, in which `replicas`,
//! `readyReplicas` and `availableReplicas` never fall while no pod turned unready or was
//! deleted. The pods are run by the test itself, a node that binds each new pod and makes
//! it Running and Ready in transactions of up to 100 pods as they appear: kcm's kubelets
//! (one write per pod and step) would take minutes over 10,000 pods in the debug build,
//! and what the test checks is the controllers' counting.
//!
//! Before the fix, a sync whose pod cache was behind its own creates counted from a fresh
//! etcd list, and a later sync from the cache, older than that list: `kcm get deployment`
//! showed 7,597 Ready, then 4,774, then 10,000. Now each status write remembers the
//! revision of the view it came from, and a later sync reads the cache only once the cache
//! has reached it. The defect needs the controllers' pod cache to fall behind their own
//! writes by more than their half-second wait: against the build before the fix, this
//! test (with 1,000 other pods rewritten in a loop to load the controllers' pod watch)
//! found `readyReplicas` falling from 2,923 to 2,909 in one of four runs, each taking
//! minutes; without that load it runs in seconds and guards the rule.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, EventType, Txn, TxnOp, WatchOptions};
use serde_json::{json, Value};

use crate::support::history;
use crate::support::kcm::start_manager;
use crate::support::objects::{current_revision, put_json};
use crate::support::{eventually, start_etcd, with_timeout};

const REPLICAS: i64 = 10_000;
/// Pods bound and made ready in one transaction (etcd allows 128 operations).
const BATCH: usize = 100;
const NS: &str = "default";
const DEPLOYMENT: &str = "/registry/deployments/default/big";
const REPLICA_SETS: &str = "/registry/replicasets/default/";
const PODS: &str = "/registry/pods/default/";

/// The status counts of one stored ReplicaSet or Deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Counts {
    replicas: i64,
    ready: i64,
    available: i64,
}

impl Counts {
    fn of(document: &Value) -> Counts {
        let count = |field: &str| document["status"][field].as_i64().unwrap_or(0);
        Counts {
            replicas: count("replicas"),
            ready: count("readyReplicas"),
            available: count("availableReplicas"),
        }
    }

    /// The first count that is lower in `self` than in `before`.
    fn fell_from(self, before: Counts) -> Option<&'static str> {
        [
            ("replicas", self.replicas, before.replicas),
            ("readyReplicas", self.ready, before.ready),
            ("availableReplicas", self.available, before.available),
        ]
        .into_iter()
        .find(|(_, now, then)| now < then)
        .map(|(field, ..)| field)
    }
}

fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10000_replica_scale_up_never_shows_fewer_ready_or_available_than_before() {
    with_timeout(Duration::from_secs(420), async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let endpoint = etcd.endpoint();
        let _manager = start_manager(
            &endpoint,
            &[
                "--controllers",
                "replicaset,deployment",
                "--sync-period",
                "10s",
            ],
        )
        .await;
        let start = current_revision(&client).await;
        let node = tokio::spawn(run_pods(client.clone(), start));
        let deployment = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "big", "namespace": NS, "uid": "uid-big", "generation": 1},
            "spec": {
                "replicas": REPLICAS,
                "selector": {"matchLabels": {"app": "big"}},
                "template": {
                    "metadata": {"labels": {"app": "big"}},
                    "spec": {"containers": [{"name": "app", "image": "nginx"}]}
                }
            }
        });
        put_json(&client, DEPLOYMENT, &deployment).await;

        let began = Instant::now();
        eventually(
            Duration::from_secs(360),
            "every replica available in the deployment's status",
            || {
                let (client, node) = (client.clone(), &node);
                async move {
                    assert!(!node.is_finished(), "the test's node stopped");
                    let stored = client.clone().get(DEPLOYMENT, None).await.expect("get");
                    stored.kvs().first().is_some_and(|kv| {
                        let document = serde_json::from_slice(kv.value()).expect("JSON");
                        Counts::of(&document).available == REPLICAS
                    })
                }
            },
        )
        .await;
        eprintln!(
            "{REPLICAS} available after {:.1}s",
            began.elapsed().as_secs_f64()
        );

        let events =
            history::read(&client, "/registry/", "/registry0", start, "/registry/~end").await;
        let mut last: HashMap<String, Counts> = HashMap::new();
        let mut ready: HashMap<String, bool> = HashMap::new();
        let mut status_writes = 0;
        for event in &events {
            if event.key.starts_with(PODS) {
                assert!(
                    event.put,
                    "pod {} deleted at revision {}",
                    event.key, event.revision
                );
                let pod: Value = serde_json::from_slice(&event.value).expect("pod JSON");
                let now = is_ready(&pod);
                let was = ready.insert(event.key.clone(), now).unwrap_or(false);
                assert!(
                    now || !was,
                    "pod {} turned unready at revision {}",
                    event.key,
                    event.revision
                );
                continue;
            }
            if event.key != DEPLOYMENT && !event.key.starts_with(REPLICA_SETS) {
                continue;
            }
            assert!(
                event.put,
                "{} deleted at revision {}",
                event.key, event.revision
            );
            let document: Value = serde_json::from_slice(&event.value).expect("JSON");
            let counts = Counts::of(&document);
            let before = last.insert(event.key.clone(), counts).unwrap_or_default();
            if counts != before {
                status_writes += 1;
            }
            if let Some(field) = counts.fell_from(before) {
                panic!(
                    "{} status.{field} fell at revision {}: {before:?} -> {counts:?}",
                    event.key, event.revision
                );
            }
        }
        assert_eq!(ready.len(), REPLICAS as usize, "every pod in the history");
        assert_eq!(
            last.len(),
            2,
            "one ReplicaSet and the Deployment: {:?}",
            last.keys()
        );
        assert!(
            last.values().all(|c| c.available == REPLICAS),
            "the last status of each: {last:?}"
        );
        eprintln!(
            "{status_writes} status changes checked in {} events",
            events.len()
        );
    })
    .await;
}

/// The test's node: every pod created under `PODS` after `start`, bound to `node-0` and
/// made Running and Ready, up to [`BATCH`] pods per transaction, each guarded by the
/// revision it was seen at. Runs until aborted.
async fn run_pods(client: Client, start: i64) {
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(start + 1);
    let mut stream = client
        .clone()
        .watch(PODS, Some(options))
        .await
        .expect("watch pods");
    let mut ip = 0u32;
    loop {
        // Ends with etcd, when the test is over.
        let Ok(Some(response)) = stream.message().await else {
            return;
        };
        let created: Vec<(String, i64, Value)> = response
            .events()
            .iter()
            .filter(|e| e.event_type() == EventType::Put)
            .filter_map(|e| e.kv())
            .filter(|kv| kv.create_revision() == kv.mod_revision())
            .map(|kv| {
                let key = kv.key_str().expect("key").to_owned();
                let pod: Value = serde_json::from_slice(kv.value()).expect("pod JSON");
                (key, kv.mod_revision(), pod)
            })
            .collect();
        for batch in created.chunks(BATCH) {
            let mut compares = Vec::new();
            let mut puts = Vec::new();
            for (key, revision, pod) in batch {
                ip += 1;
                let mut pod = pod.clone();
                let now = "2026-01-01T00:00:00Z";
                pod["spec"]["host"] = json!("node-0");
                pod["status"] = json!({
                    "phase": "Running",
                    "host": "node-0",
                    "podIP": format!("10.{}.{}.{}", ip >> 16 & 255, ip >> 8 & 255, ip & 255),
                    "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
                });
                let value = serde_json::to_vec(&pod).expect("encode");
                compares.push(Compare::mod_revision(
                    key.as_str(),
                    CompareOp::Equal,
                    *revision,
                ));
                puts.push(TxnOp::put(key.as_str(), value, None));
            }
            let txn = Txn::new().when(compares).and_then(puts);
            let response = client.kv_client().txn(txn).await.expect("run pods");
            assert!(
                response.succeeded(),
                "a new pod changed before the node ran it (the test's node assumes no other writer)"
            );
        }
    }
}
