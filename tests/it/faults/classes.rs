//! Issue 25's cheap fault classes, checked from etcd's own history (the larger sizes and
//! the costly classes are `scripts/soak.sh`): two ReplicaSets with overlapping selectors
//! scaled at once by two managers, and the garbage collector cut off while owners die and
//! etcd is compacted.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use etcd_client::{Client, GetOptions};
use serde_json::{json, Value};

use crate::support::history;
use crate::support::kcm::start_manager;
use crate::support::objects::{current_revision, delete, pod_documents, put_json, update_json};
use crate::support::proxy::FaultProxy;
use crate::support::{eventually, start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(100);
const SETTLE: Duration = Duration::from_secs(60);
const NS: &str = "faults";
const SYNCS_OK: &str = r#"kcm_syncs_total{controller="replicaset",result="ok"}"#;

fn rs_key(name: &str) -> String {
    format!("/registry/replicasets/{NS}/{name}")
}

fn replica_set(name: &str, uid: &str, replicas: i64, selector: Value, labels: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": NS, "uid": uid, "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}
            }
        }
    })
}

/// The namespace's pods: name → document.
async fn pods(client: &Client) -> BTreeMap<String, Value> {
    pod_documents(client, NS)
        .await
        .into_iter()
        .map(|(name, (doc, _))| (name, doc))
        .collect()
}

fn owner_uids(pod: &Value, controllers_only: bool) -> Vec<String> {
    pod["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| !controllers_only || r["controller"] == json!(true))
        .map(|r| r["uid"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Pods per controller uid.
async fn owned(client: &Client) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for pod in pods(client).await.values() {
        for uid in owner_uids(pod, true) {
            *counts.entry(uid).or_default() += 1;
        }
    }
    counts
}

async fn history_of_pods(client: &Client) -> Vec<history::HistoryEvent> {
    history::read(client, "/registry/", "/registry0", 0, "/registry/~end").await
}

/// Two ReplicaSets whose selectors overlap (a's `app=web` matches b's pods), scaled at once
/// by two unelected managers, twice: in etcd's history no pod ever has two controllers,
/// each ends with its own count, and once settled three resyncs of both managers create,
/// delete and re-own nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_replica_sets_scaled_at_once_never_share_a_pod_and_settle_without_churn() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let endpoint = etcd.endpoint();
        let args = [
            "--controllers",
            "replicaset",
            "--burst-replicas",
            "50",
            "--sync-period",
            "1s",
        ];
        let managers = tokio::join!(
            start_manager(&endpoint, &args),
            start_manager(&endpoint, &args)
        );
        let web = json!({"app": "web"});
        let (a_labels, b_labels) = (
            json!({"app": "web", "tier": "a"}),
            json!({"app": "web", "tier": "b"}),
        );
        put_json(
            &client,
            &rs_key("a"),
            &replica_set("a", "uid-a", 0, web, a_labels),
        )
        .await;
        let b = replica_set("b", "uid-b", 0, b_labels.clone(), b_labels);
        put_json(&client, &rs_key("b"), &b).await;
        for (a, b) in [(150, 150), (100, 200)] {
            let (key_a, key_b) = (rs_key("a"), rs_key("b"));
            tokio::join!(
                update_json(&client, &key_a, |rs| rs["spec"]["replicas"] = json!(a)),
                update_json(&client, &key_b, |rs| rs["spec"]["replicas"] = json!(b)),
            );
            let want = BTreeMap::from([("uid-a".to_string(), a), ("uid-b".to_string(), b)]);
            eventually(SETTLE, &format!("a {a} and b {b} pods"), || async {
                owned(&client).await == want && pods(&client).await.len() == a + b
            })
            .await;
        }
        let settled = current_revision(&client).await;
        // Three resyncs of both ReplicaSets by each manager (1 s period).
        for manager in [&managers.0, &managers.1] {
            let syncs = manager.metric(SYNCS_OK).await;
            eventually(SETTLE, "three resyncs", || async move {
                manager.metric(SYNCS_OK).await >= syncs + 6.0
            })
            .await;
        }

        let prefix = format!("/registry/pods/{NS}/");
        let (mut creates, mut after) = (0, Vec::new());
        for event in history_of_pods(&client).await {
            if !event.key.starts_with(&prefix) {
                continue;
            }
            if event.revision > settled {
                after.push(format!("{} at {}", event.key, event.revision));
            }
            if event.put {
                let pod: Value = serde_json::from_slice(&event.value).expect("pod JSON");
                let controllers = owner_uids(&pod, true);
                assert!(
                    controllers.len() <= 1,
                    "two controllers at {}: {pod}",
                    event.revision
                );
                creates += usize::from(event.create_revision == event.revision);
            }
        }
        assert!(creates >= 300, "{creates} creates");
        assert!(
            after.is_empty(),
            "pod writes after settling at {settled}: {after:?}"
        );
    })
    .await;
}

/// The garbage collector's connection is cut (a proxy) while five of ten ReplicaSets are
/// deleted, one of them recreated as a namesake (new uid) and etcd compacted past all of
/// it; reconnected, it lists again and deletes exactly the dead owners' pods: in etcd's
/// history no pod is deleted while an owner of it lives, and none is left whose owner died.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_collector_cut_off_across_a_compaction_deletes_only_the_dead_owners_pods() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        const EACH: usize = 100;
        let client = etcd.client().await;
        let proxy = FaultProxy::start(etcd.client_addr()).await;
        let _rs = start_manager(&etcd.endpoint(), &["--controllers", "replicaset"]).await;
        let through_proxy = proxy.endpoint();
        let collector = start_manager(&through_proxy, &["--controllers", "garbagecollector"]).await;
        let owner = |name: &str, uid: &str| {
            let labels = json!({"app": name});
            replica_set(name, uid, EACH as i64, labels.clone(), labels)
        };
        for i in 0..10 {
            let name = format!("rs-{i}");
            put_json(&client, &rs_key(&name), &owner(&name, &format!("uid-{i}"))).await;
        }
        eventually(SETTLE, "1,000 pods", || async {
            pods(&client).await.len() == 10 * EACH
        })
        .await;

        proxy.cut();
        for i in 0..5 {
            delete(&client, &rs_key(&format!("rs-{i}"))).await;
        }
        put_json(&client, &rs_key("rs-0"), &owner("rs-0", "uid-0-again")).await;
        eventually(SETTLE, "the namesake's pods", || async {
            owned(&client).await.get("uid-0-again") == Some(&EACH)
        })
        .await;
        let compacted = etcd.compact().await;
        proxy.restore();

        let live: BTreeSet<String> = (5..10)
            .map(|i| format!("uid-{i}"))
            .chain(["uid-0-again".to_string()])
            .collect();
        eventually(SETTLE, "only the live owners' pods", || async {
            let counts = owned(&client).await;
            counts.len() == live.len() && counts.values().all(|n| *n == EACH)
        })
        .await;
        assert!(
            collector.log().contains("reason=Compacted"),
            "the collector lists again after the compaction at {compacted}:\n{}",
            collector.log()
        );

        // G1 from the history (it survives the compaction: read from a watch at revision
        // `compacted`, it covers what the collector did after the reconnect).
        let prefix = format!("/registry/pods/{NS}/");
        let mut deleted = 0;
        let events = history::read(
            &client,
            "/registry/",
            "/registry0",
            compacted,
            "/registry/~end",
        )
        .await;
        let mut owners_of: BTreeMap<String, Vec<String>> = pods_before(&client, compacted).await;
        for event in events {
            if !event.key.starts_with(&prefix) {
                continue;
            }
            if event.put {
                let pod: Value = serde_json::from_slice(&event.value).expect("pod JSON");
                owners_of.insert(event.key.clone(), owner_uids(&pod, false));
                continue;
            }
            deleted += 1;
            let owners = owners_of.remove(&event.key).unwrap_or_default();
            assert!(!owners.is_empty(), "{} had no owner", event.key);
            assert!(
                owners.iter().all(|uid| !live.contains(uid)),
                "{} deleted at {} with a live owner {owners:?}",
                event.key,
                event.revision
            );
        }
        assert_eq!(deleted, 5 * EACH, "the dead owners' pods, each once");
    })
    .await;
}

/// Pod key → owner uids at revision `at`.
async fn pods_before(client: &Client, at: i64) -> BTreeMap<String, Vec<String>> {
    let prefix = format!("/registry/pods/{NS}/");
    let response = client
        .clone()
        .get(
            prefix.as_str(),
            Some(GetOptions::new().with_prefix().with_revision(at)),
        )
        .await
        .expect("list pods at the compaction");
    response
        .kvs()
        .iter()
        .map(|kv| {
            let pod: Value = serde_json::from_slice(kv.value()).expect("pod JSON");
            (
                kv.key_str().expect("utf-8").to_string(),
                owner_uids(&pod, false),
            )
        })
        .collect()
}
