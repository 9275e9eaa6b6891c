//! Acceptance tests of the garbage collector and `kcm delete --cascade` through the real
//! `kcm controller-manager` against a real etcd (issue 15). Each checks the invariants G1-G4
//! (`ARCHITECTURE.md`) on etcd's own event history, replayed in revision order.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use etcd_client::{Client, GetOptions};
use serde_json::{json, Value};

use crate::support::history::{self, Replay};
use crate::support::kcm::{kcm, start_manager, Kcm};
use crate::support::objects::{current_revision, delete, put_json, update_json};
use crate::support::{eventually, start_etcd, with_timeout, EtcdServer};

const LIMIT: Duration = Duration::from_secs(120);
const SETTLE: Duration = Duration::from_secs(60);

fn rs_key(ns: &str, name: &str) -> String {
    format!("/registry/replicasets/{ns}/{name}")
}

fn pod_key(ns: &str, name: &str) -> String {
    format!("/registry/pods/{ns}/{name}")
}

/// A ReplicaSet selecting `app={name}`, with uid `{uid}`.
fn replica_set(ns: &str, name: &str, uid: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": ns, "uid": uid, "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}
            }
        }
    })
}

fn owner_ref(kind: &str, name: &str, uid: &str, controller: bool) -> Value {
    let api_version = match kind {
        "ReplicaSet" | "Deployment" => "apps/v1",
        _ => "v1",
    };
    json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": uid,
           "controller": controller, "blockOwnerDeletion": true})
}

fn pod(ns: &str, name: &str, labels: Value, owners: Value, extra: Value) -> Value {
    let mut doc = json!({
        "kind": "Pod",
        "apiVersion": "v1beta3",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-pod-{name}"),
                     "labels": labels, "ownerReferences": owners},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    });
    if let (Some(doc), Some(extra)) = (doc.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            doc.insert(k.clone(), v.clone());
        }
    }
    doc
}

/// The stored pods of `ns`: name → document.
async fn pods(client: &Client, ns: &str) -> BTreeMap<String, Value> {
    let prefix = format!("/registry/pods/{ns}/");
    let response = client
        .clone()
        .get(prefix.as_str(), Some(GetOptions::new().with_prefix()))
        .await
        .expect("list pods");
    response
        .kvs()
        .iter()
        .map(|kv| {
            let name = kv
                .key_str()
                .unwrap()
                .trim_start_matches(&prefix)
                .to_string();
            (name, serde_json::from_slice(kv.value()).expect("pod JSON"))
        })
        .collect()
}

fn owner_uids(doc: &Value) -> Vec<String> {
    doc["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r["uid"].as_str().unwrap_or_default().to_string())
        .collect()
}

async fn owned_by(client: &Client, ns: &str, uid: &str) -> Vec<String> {
    pods(client, ns)
        .await
        .into_iter()
        .filter(|(_, doc)| owner_uids(doc).iter().any(|u| u == uid))
        .map(|(name, _)| name)
        .collect()
}

async fn exists(client: &Client, key: &str) -> bool {
    client.clone().get(key, None).await.unwrap().count() > 0
}

async fn manager(etcd: &EtcdServer, controllers: &str, extra: &[&str]) -> Kcm {
    let mut args = vec!["--controllers", controllers, "--sync-period", "1s"];
    args.extend_from_slice(extra);
    start_manager(&etcd.endpoint(), &args).await
}

async fn wait_for_pods(client: &Client, ns: &str, uid: &str, n: usize) -> Vec<String> {
    eventually(SETTLE, &format!("{n} pods owned by {uid}"), || async {
        owned_by(client, ns, uid).await.len() == n
    })
    .await;
    owned_by(client, ns, uid).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_delete_deletes_the_pods_and_nothing_unrelated() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let ns = "gc-bg";
        put_json(
            &client,
            &rs_key(ns, "web"),
            &replica_set(ns, "web", "uid-web", 3),
        )
        .await;
        put_json(
            &client,
            &rs_key(ns, "api"),
            &replica_set(ns, "api", "uid-api", 2),
        )
        .await;
        // An orphan sharing a label with web's pods but not its selector.
        let stray = pod(ns, "stray", json!({"app": "web-old"}), json!([]), json!({}));
        put_json(&client, &pod_key(ns, "stray"), &stray).await;
        // A reference to a kind kcm does not store is solid.
        let node = json!([{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "uid-n1"}]);
        let by_node = pod(ns, "by-node", json!({}), node, json!({}));
        put_json(&client, &pod_key(ns, "by-node"), &by_node).await;
        // Its owner's name and uid live in another namespace only: it has no owner
        // (kubernetes #65200).
        let other_ns = "gc-bg-other";
        put_json(
            &client,
            &rs_key(other_ns, "far"),
            &replica_set(other_ns, "far", "uid-far", 0),
        )
        .await;
        let far = json!([owner_ref("ReplicaSet", "far", "uid-far", true)]);
        put_json(
            &client,
            &pod_key(ns, "misplaced"),
            &pod(ns, "misplaced", json!({}), far, json!({})),
        )
        .await;
        // An invalid reference (no uid) is solid too.
        let invalid = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone"}]);
        let by_invalid = pod(ns, "by-invalid", json!({}), invalid, json!({}));
        put_json(&client, &pod_key(ns, "by-invalid"), &by_invalid).await;
        let manager = manager(&etcd, "replicaset,garbagecollector", &[]).await;
        eventually(
            SETTLE,
            "the pod owned from another namespace deleted",
            || async { !exists(&client, &pod_key(ns, "misplaced")).await },
        )
        .await;
        let web = wait_for_pods(&client, ns, "uid-web", 3).await;
        let api = wait_for_pods(&client, ns, "uid-api", 2).await;
        let start = current_revision(&client).await;

        let out = kcm(&etcd.endpoint(), &["delete", "rs", "web", "-n", ns]).await;
        assert_eq!(out.success(), "replicaset.apps \"web\" deleted\n");
        eventually(SETTLE, "web's pods deleted", || async {
            owned_by(&client, ns, "uid-web").await.is_empty()
        })
        .await;

        let replay = Replay::read(&client, ns, start).await;
        replay.check_deletes(ns, &BTreeSet::from([rs_key(ns, "web")]));
        for name in &web {
            assert!(
                replay.deleted(&pod_key(ns, name)).is_some(),
                "{name} deleted"
            );
        }
        let left = pods(&client, ns).await;
        assert!(exists(&client, &rs_key(other_ns, "far")).await);
        let reported = manager.warnings_about("owner references to this kind are kept");
        assert_eq!(reported.len(), 1, "reported once: {reported:?}");
        let kept = ["stray", "by-node", "by-invalid"].map(String::from);
        for name in api.iter().chain(&kept) {
            assert!(left.contains_key(name), "{name} kept: {left:?}");
        }
        assert_eq!(
            replay.deletes.len(),
            4,
            "the RS and its 3 pods, nothing else"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_del_of_a_replica_set_deletes_its_pods_and_a_namesake_keeps_its_own() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let ns = "gc-del";
        put_json(
            &client,
            &rs_key(ns, "web"),
            &replica_set(ns, "web", "uid-1", 3),
        )
        .await;
        let _manager = manager(&etcd, "replicaset,garbagecollector", &[]).await;
        let first = wait_for_pods(&client, ns, "uid-1", 3).await;
        let start = current_revision(&client).await;
        // Deleted and written again at once, with another uid, as etcdctl would.
        delete(&client, &rs_key(ns, "web")).await;
        put_json(
            &client,
            &rs_key(ns, "web"),
            &replica_set(ns, "web", "uid-2", 3),
        )
        .await;
        let second = wait_for_pods(&client, ns, "uid-2", 3).await;
        eventually(SETTLE, "the first incarnation's pods deleted", || async {
            owned_by(&client, ns, "uid-1").await.is_empty()
        })
        .await;
        let replay = Replay::read(&client, ns, start).await;
        replay.check_deletes(ns, &BTreeSet::from([rs_key(ns, "web")]));
        for name in &first {
            assert!(replay.deleted(&pod_key(ns, name)).is_some());
        }
        for name in &second {
            assert!(
                replay.deleted(&pod_key(ns, name)).is_none(),
                "the namesake's pod {name} was never deleted"
            );
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphaning_delete_keeps_the_pods_and_a_recreated_owner_adopts_them_without_churn() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let ns = "gc-orphan";
        put_json(
            &client,
            &rs_key(ns, "web"),
            &replica_set(ns, "web", "uid-1", 3),
        )
        .await;
        let _manager = manager(&etcd, "replicaset,garbagecollector", &[]).await;
        let before = wait_for_pods(&client, ns, "uid-1", 3).await;
        let start = current_revision(&client).await;
        let out = kcm(
            &etcd.endpoint(),
            &[
                "delete",
                "rs",
                "web",
                "-n",
                ns,
                "--cascade=orphan",
                "--timeout",
                "30s",
            ],
        )
        .await;
        assert_eq!(out.success(), "replicaset.apps \"web\" deleted\n");
        assert!(
            !exists(&client, &rs_key(ns, "web")).await,
            "--wait waited for the key"
        );
        let left = pods(&client, ns).await;
        assert_eq!(left.keys().cloned().collect::<Vec<_>>(), before);
        assert!(left.values().all(|p| owner_uids(p).is_empty()), "{left:?}");
        let orphaned = current_revision(&client).await;

        // G3: nothing deleted but the owner; no pod gained a reference to it meanwhile.
        let replay = Replay::read(&client, ns, start).await;
        assert_eq!(
            replay
                .deletes
                .iter()
                .map(|d| d.key.clone())
                .collect::<Vec<_>>(),
            [rs_key(ns, "web")]
        );
        let rs_puts = &replay.puts[&rs_key(ns, "web")];
        let marked = rs_puts
            .iter()
            .find(|(_, doc)| doc["metadata"]["deletionTimestamp"].is_string())
            .expect("the owner was marked first")
            .0;
        for (key, puts) in &replay.puts {
            for (revision, doc) in puts {
                if key.contains("/pods/") && *revision > marked {
                    assert!(
                        !owner_uids(doc).contains(&"uid-1".to_string()),
                        "{key} at {revision}"
                    );
                }
            }
        }

        // A recreated owner adopts them: no pod is created or deleted.
        put_json(
            &client,
            &rs_key(ns, "web"),
            &replica_set(ns, "web", "uid-2", 3),
        )
        .await;
        wait_for_pods(&client, ns, "uid-2", 3).await;
        let replay = Replay::read(&client, ns, orphaned).await;
        assert!(replay.deletes.is_empty());
        let created: Vec<_> = replay
            .puts
            .keys()
            .filter(|k| k.contains("/pods/") && !before.iter().any(|n| **k == pod_key(ns, n)))
            .collect();
        assert!(created.is_empty(), "no pod churn: {created:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_with_two_owners_loses_the_deleted_one_and_goes_with_the_second() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let ns = "gc-two";
        put_json(&client, &rs_key(ns, "a"), &replica_set(ns, "a", "uid-a", 0)).await;
        put_json(&client, &rs_key(ns, "b"), &replica_set(ns, "b", "uid-b", 0)).await;
        let owners = json!([
            owner_ref("ReplicaSet", "a", "uid-a", true),
            owner_ref("ReplicaSet", "b", "uid-b", false)
        ]);
        put_json(
            &client,
            &pod_key(ns, "shared"),
            &pod(ns, "shared", json!({}), owners, json!({})),
        )
        .await;
        let start = current_revision(&client).await;
        let _manager = manager(&etcd, "garbagecollector", &[]).await;

        kcm(&etcd.endpoint(), &["delete", "rs", "b", "-n", ns])
            .await
            .success();
        eventually(SETTLE, "the reference to b removed", || async {
            pods(&client, ns).await.get("shared").map(owner_uids) == Some(vec!["uid-a".into()])
        })
        .await;
        kcm(&etcd.endpoint(), &["delete", "rs", "a", "-n", ns])
            .await
            .success();
        eventually(SETTLE, "the pod deleted", || async {
            !exists(&client, &pod_key(ns, "shared")).await
        })
        .await;
        let replay = Replay::read(&client, ns, start).await;
        replay.check_deletes(ns, &BTreeSet::from([rs_key(ns, "a"), rs_key(ns, "b")]));
        assert!(
            replay.deleted(&pod_key(ns, "shared")).unwrap()
                > replay.deleted(&rs_key(ns, "a")).unwrap()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_delete_killed_mid_way_finishes_after_a_restart() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let ns = "gc-fg";
        put_json(
            &client,
            &rs_key(ns, "web"),
            &replica_set(ns, "web", "uid-web", 100),
        )
        .await;
        put_json(
            &client,
            &rs_key(ns, "api"),
            &replica_set(ns, "api", "uid-api", 2),
        )
        .await;
        let mut first = manager(&etcd, "replicaset,garbagecollector", &[]).await;
        let web = wait_for_pods(&client, ns, "uid-web", 100).await;
        wait_for_pods(&client, ns, "uid-api", 2).await;
        let start = current_revision(&client).await;
        let out = kcm(
            &etcd.endpoint(),
            &[
                "delete",
                "rs",
                "web",
                "-n",
                ns,
                "--cascade=foreground",
                "--wait=false",
            ],
        )
        .await;
        assert_eq!(out.success(), "replicaset.apps \"web\" deleted\n");
        eventually(SETTLE, "the first pods deleted", || async {
            owned_by(&client, ns, "uid-web").await.len() < 100
        })
        .await;
        first.signal(libc::SIGKILL);
        first.wait_exit(Duration::from_secs(10)).await;
        let killed_with = owned_by(&client, ns, "uid-web").await.len();
        let _second = manager(&etcd, "replicaset,garbagecollector", &[]).await;
        eventually(SETTLE, "the owner deleted after its pods", || async {
            !exists(&client, &rs_key(ns, "web")).await
        })
        .await;
        assert!(owned_by(&client, ns, "uid-web").await.is_empty());
        assert_eq!(owned_by(&client, ns, "uid-api").await.len(), 2);

        let replay = Replay::read(&client, ns, start).await;
        replay.check_deletes(ns, &BTreeSet::new());
        // G2: the owner went after its last blocking dependent.
        let owner_gone = replay.deleted(&rs_key(ns, "web")).expect("owner deleted");
        for name in &web {
            let at = replay
                .deleted(&pod_key(ns, name))
                .expect("every pod deleted");
            assert!(
                at < owner_gone,
                "{name} deleted at {at}, after its owner at {owner_gone}"
            );
        }
        eprintln!("killed with {killed_with} of 100 pods left");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_pods_beyond_the_threshold_go_oldest_first() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let ns = "gc-podgc";
        for i in 0..30 {
            let created = format!("2026-01-01T00:00:{i:02}Z");
            let extra = json!({"status": {"phase": "Failed"}});
            let mut doc = pod(ns, &format!("p{i:02}"), json!({}), json!([]), extra);
            doc["metadata"]["creationTimestamp"] = json!(created);
            put_json(&client, &pod_key(ns, &format!("p{i:02}")), &doc).await;
        }
        // Running pods do not count.
        let running = pod(
            ns,
            "live",
            json!({}),
            json!([]),
            json!({"status": {"phase": "Running"}}),
        );
        put_json(&client, &pod_key(ns, "live"), &running).await;
        let _manager = manager(
            &etcd,
            "garbagecollector",
            &["--terminated-pod-gc-threshold", "10"],
        )
        .await;
        eventually(SETTLE, "10 terminated pods left", || async {
            pods(&client, ns).await.len() == 11
        })
        .await;
        let left: Vec<String> = pods(&client, ns).await.into_keys().collect();
        let mut expected = vec!["live".to_string()];
        expected.extend((20..30).map(|i| format!("p{i}")));
        assert_eq!(left, expected);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizers_hold_a_delete_and_the_collector_finishes_what_has_none_left() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let endpoint = etcd.endpoint();
        let ns = "gc-fin";
        let held = pod(ns, "held", json!({}), json!([]), json!({}));
        put_json(&client, &pod_key(ns, "held"), &held).await;
        put_json(&client, &rs_key(ns, "web"), &replica_set(ns, "web", "uid-web", 0)).await;
        // No collector yet: a foreground delete waits, and says for what.
        let out = kcm(
            &endpoint,
            &["delete", "rs", "web", "-n", ns, "--cascade=foreground", "--timeout", "1s"],
        )
        .await;
        let stderr = out.failure(1);
        assert_eq!(out.stdout, "replicaset.apps \"web\" deleted\n");
        assert!(
            stderr.contains("timed out after 1s waiting for replicaset.apps \"web\" to be deleted: finalizers foregroundDeletion still pending"),
            "{stderr}"
        );
        // Someone else's finalizer: the delete only marks the pod.
        update_json(&client, &pod_key(ns, "held"), |p| {
            p["metadata"]["finalizers"] = json!(["example.com/hold"])
        })
        .await;
        let out = kcm(&endpoint, &["delete", "pod", "held", "-n", ns, "--wait=false"]).await;
        assert_eq!(out.success(), "pod \"held\" deleted\n");
        let _manager = manager(&etcd, "garbagecollector", &[]).await;
        eventually(SETTLE, "the foreground delete of an RS without pods done", || async {
            !exists(&client, &rs_key(ns, "web")).await
        })
        .await;
        assert!(exists(&client, &pod_key(ns, "held")).await, "unknown finalizers are left alone");
        update_json(&client, &pod_key(ns, "held"), |p| {
            p["metadata"]["finalizers"] = json!([])
        })
        .await;
        eventually(SETTLE, "the pod with no finalizers left deleted", || async {
            !exists(&client, &pod_key(ns, "held")).await
        })
        .await;
    })
    .await;
}

fn deployment_key(ns: &str, name: &str) -> String {
    format!("/registry/deployments/{ns}/{name}")
}

/// A Deployment selecting (and stamping) `app={name}`.
fn deployment_doc(ns: &str, name: &str, uid: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "uid": uid, "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]}
            }
        }
    })
}

/// Deployment `name` (uid `uid-{name}`) and two ReplicaSets it controls, `{name}-1` and
/// `{name}-2`, of 2 pods each, as the deployment controller would have written them.
async fn put_tree(client: &Client, ns: &str, name: &str) {
    let deployment = deployment_doc(ns, name, &format!("uid-{name}"), 4);
    put_json(client, &deployment_key(ns, name), &deployment).await;
    for i in 1..=2 {
        let rs_name = format!("{name}-{i}");
        let mut rs = replica_set(ns, &rs_name, &format!("uid-{rs_name}"), 2);
        rs["metadata"]["ownerReferences"] =
            json!([owner_ref("Deployment", name, &format!("uid-{name}"), true)]);
        put_json(client, &rs_key(ns, &rs_name), &rs).await;
    }
}

/// The deployment trees of three deployments: one deleted in the background, one in the
/// foreground, one orphaning; a fourth is never touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_trees_unwind_in_the_background_in_the_foreground_or_are_orphaned() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let endpoint = etcd.endpoint();
        let ns = "gc-tree";
        for name in ["bg", "fg", "or", "keep"] {
            put_tree(&client, ns, name).await;
        }
        let _manager = manager(&etcd, "replicaset,garbagecollector", &[]).await;
        let mut pods_of = BTreeMap::new();
        for name in ["bg", "fg", "or", "keep"] {
            for i in 1..=2 {
                let rs = format!("{name}-{i}");
                pods_of.insert(
                    rs.clone(),
                    wait_for_pods(&client, ns, &format!("uid-{rs}"), 2).await,
                );
            }
        }
        let start = current_revision(&client).await;
        let delete = |name: &'static str, cascade: &'static str| {
            let endpoint = endpoint.clone();
            async move {
                let cascade = format!("--cascade={cascade}");
                let args = [
                    "delete",
                    "deploy",
                    name,
                    "-n",
                    ns,
                    &cascade,
                    "--timeout",
                    "30s",
                ];
                let out = kcm(&endpoint, &args).await;
                assert_eq!(
                    out.success(),
                    format!("deployment.apps \"{name}\" deleted\n")
                );
            }
        };
        delete("bg", "background").await;
        delete("fg", "foreground").await;
        delete("or", "orphan").await;
        // Foreground: --wait returned once the Deployment was gone, so its tree is too.
        for i in 1..=2 {
            assert!(!exists(&client, &rs_key(ns, &format!("fg-{i}"))).await);
        }
        eventually(SETTLE, "the background tree gone", || async {
            owned_by(&client, ns, "uid-bg-1").await.is_empty()
                && owned_by(&client, ns, "uid-bg-2").await.is_empty()
        })
        .await;

        let replay = Replay::read(&client, ns, start).await;
        let by_test = ["bg", "fg", "or"].map(|n| deployment_key(ns, n));
        replay.check_deletes(ns, &BTreeSet::from(by_test));
        let gone = |key: &str| replay.deleted(key);
        // Background and foreground: every RS and pod deleted; foreground bottom up (G2).
        for name in ["bg", "fg"] {
            let deployment_at = gone(&deployment_key(ns, name)).expect("deployment deleted");
            for i in 1..=2 {
                let rs = format!("{name}-{i}");
                let rs_at = gone(&rs_key(ns, &rs)).unwrap_or_else(|| panic!("{rs} deleted"));
                for pod in &pods_of[&rs] {
                    let pod_at = gone(&pod_key(ns, pod)).unwrap_or_else(|| panic!("{pod} deleted"));
                    if name == "fg" {
                        assert!(pod_at < rs_at, "G2: {pod} at {pod_at}, {rs} at {rs_at}");
                    }
                }
                if name == "fg" {
                    assert!(
                        rs_at < deployment_at,
                        "G2: {rs} at {rs_at}, {name} at {deployment_at}"
                    );
                }
            }
        }
        // Orphan (G3) and the untouched tree: nothing deleted; the orphans lost the
        // reference and keep their pods.
        for name in ["or", "keep"] {
            for i in 1..=2 {
                let rs = format!("{name}-{i}");
                assert!(gone(&rs_key(ns, &rs)).is_none(), "{rs} kept");
                for pod in &pods_of[&rs] {
                    assert!(gone(&pod_key(ns, pod)).is_none(), "{pod} kept");
                }
                let response = client.clone().get(rs_key(ns, &rs), None).await.unwrap();
                let doc: Value = serde_json::from_slice(response.kvs()[0].value()).unwrap();
                let expected: Vec<String> = if name == "or" {
                    vec![]
                } else {
                    vec![format!("uid-{name}")]
                };
                assert_eq!(owner_uids(&doc), expected, "{rs}");
            }
        }
        assert!(exists(&client, &deployment_key(ns, "keep")).await);
    })
    .await;
}

/// With the deployment controller: an orphaning delete leaves the ReplicaSet and its pods,
/// a recreated Deployment adopts them without creating or deleting a pod, and a foreground
/// delete then unwinds the tree bottom up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_deployment_adopts_its_orphans_and_a_foreground_delete_unwinds_it() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let endpoint = etcd.endpoint();
        let ns = "gc-deploy";
        let deployment = |uid: &str| deployment_doc(ns, "web", uid, 3);
        put_json(&client, &deployment_key(ns, "web"), &deployment("uid-d1")).await;
        let _manager = manager(&etcd, "replicaset,deployment,garbagecollector", &[]).await;
        let rs_of = |uid: &'static str| {
            let client = client.clone();
            async move {
                let prefix = format!("/registry/replicasets/{ns}/");
                let response = client
                    .clone()
                    .get(prefix.as_str(), Some(GetOptions::new().with_prefix()))
                    .await
                    .unwrap();
                response
                    .kvs()
                    .iter()
                    .filter_map(|kv| {
                        let doc: Value = serde_json::from_slice(kv.value()).ok()?;
                        owner_uids(&doc).contains(&uid.to_string()).then(|| {
                            let uid = doc["metadata"]["uid"].as_str().unwrap().to_string();
                            (doc["metadata"]["name"].as_str().unwrap().to_string(), uid)
                        })
                    })
                    .collect::<Vec<_>>()
            }
        };
        eventually(SETTLE, "the deployment's ReplicaSet", || async {
            rs_of("uid-d1").await.len() == 1
        })
        .await;
        let (rs_name, rs_uid) = rs_of("uid-d1").await.remove(0);
        let pods_before = wait_for_pods(&client, ns, &rs_uid, 3).await;
        let start = current_revision(&client).await;

        let orphan = ["delete", "deploy", "web", "-n", ns, "--cascade=orphan"];
        let out = kcm(&endpoint, &orphan).await;
        assert_eq!(out.success(), "deployment.apps \"web\" deleted\n");
        put_json(&client, &deployment_key(ns, "web"), &deployment("uid-d2")).await;
        eventually(
            SETTLE,
            "the recreated deployment adopts the ReplicaSet",
            || async { rs_of("uid-d2").await == [(rs_name.clone(), rs_uid.clone())] },
        )
        .await;
        assert_eq!(owned_by(&client, ns, &rs_uid).await, pods_before);
        let adopted = current_revision(&client).await;
        let replay = Replay::read(&client, ns, start).await;
        assert_eq!(
            replay
                .deletes
                .iter()
                .map(|d| d.key.clone())
                .collect::<Vec<_>>(),
            [deployment_key(ns, "web")],
            "G3: the orphaning delete deleted nothing but the deployment"
        );
        let pods_written: Vec<&String> = replay
            .puts
            .keys()
            .filter(|k| k.contains("/pods/") && !pods_before.iter().any(|p| **k == pod_key(ns, p)))
            .collect();
        assert!(pods_written.is_empty(), "no pod churn: {pods_written:?}");

        let foreground = ["delete", "deploy", "web", "-n", ns, "--cascade=foreground"];
        let out = kcm(
            &endpoint,
            &[&foreground[..], &["--timeout", "30s"]].concat(),
        )
        .await;
        assert_eq!(out.success(), "deployment.apps \"web\" deleted\n");
        assert!(!exists(&client, &rs_key(ns, &rs_name)).await);
        assert!(pods(&client, ns).await.is_empty());
        let replay = Replay::read(&client, ns, adopted).await;
        replay.check_deletes(ns, &BTreeSet::new());
        let deployment_at = replay.deleted(&deployment_key(ns, "web")).unwrap();
        let rs_at = replay.deleted(&rs_key(ns, &rs_name)).unwrap();
        assert!(
            rs_at < deployment_at,
            "G2: the ReplicaSet before the deployment"
        );
        for pod in &pods_before {
            assert!(
                replay.deleted(&pod_key(ns, pod)).unwrap() < rs_at,
                "G2: {pod}"
            );
        }
    })
    .await;
}

/// G1 at the size users reach: a ReplicaSet of 2,000 pods deleted in the background, and a
/// namesake (same name, another uid) written while the collector is deleting them. From
/// etcd's history: every pod deleted belonged to the old incarnation, and at its delete's
/// revision the ReplicaSet key was absent or the namesake; the namesake's 200 pods and an
/// unrelated ReplicaSet's pods are never deleted; all 2,000 old pods go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_delete_of_2000_pods_with_a_namesake_written_mid_way_deletes_only_the_old_ones(
) {
    with_timeout(Duration::from_secs(240), async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let ns = "gc-big";
        let settle = Duration::from_secs(180);
        let _manager = manager(&etcd, "replicaset,garbagecollector", &[]).await;
        put_json(
            &client,
            &rs_key(ns, "web"),
            &replica_set(ns, "web", "uid-old", 2000),
        )
        .await;
        put_json(
            &client,
            &rs_key(ns, "api"),
            &replica_set(ns, "api", "uid-api", 50),
        )
        .await;
        eventually(settle, "2,000 pods of the old web", || async {
            owned_by(&client, ns, "uid-old").await.len() == 2000
        })
        .await;
        wait_for_pods(&client, ns, "uid-api", 50).await;
        let start = current_revision(&client).await;

        delete(&client, &rs_key(ns, "web")).await;
        // The namesake as soon as the collector has begun.
        eventually(SETTLE, "the collector to begin", || async {
            owned_by(&client, ns, "uid-old").await.len() < 2000
        })
        .await;
        put_json(
            &client,
            &rs_key(ns, "web"),
            &replica_set(ns, "web", "uid-new", 200),
        )
        .await;
        eventually(
            settle,
            "the old pods gone and the namesake's 200 made",
            || async {
                owned_by(&client, ns, "uid-old").await.is_empty()
                    && owned_by(&client, ns, "uid-new").await.len() == 200
            },
        )
        .await;

        // Replay: the uid stored at web's key, and each pod's owner uid, at every revision.
        let events = history::read(
            &client,
            "/registry/",
            "/registry0",
            start,
            "/registry/zz-end",
        )
        .await;
        let web_key = rs_key(ns, "web");
        let pod_dir = format!("/registry/pods/{ns}/");
        let mut web_uid: Option<String> = Some("uid-old".into());
        let mut owners: BTreeMap<String, String> = BTreeMap::new();
        // Owners as of `start`: every pod that existed then was the old web's or api's.
        for (name, doc) in client
            .clone()
            .get(
                pod_dir.as_str(),
                Some(GetOptions::new().with_prefix().with_revision(start)),
            )
            .await
            .unwrap()
            .kvs()
            .iter()
            .map(|kv| {
                (
                    kv.key_str().unwrap().to_string(),
                    serde_json::from_slice::<Value>(kv.value()).unwrap(),
                )
            })
        {
            owners.insert(name, owner_uids(&doc).join(","));
        }
        let mut deleted = 0;
        let mut left_at_namesake = 0;
        for event in &events {
            if event.key == web_key {
                web_uid = event.put.then(|| {
                    let doc: Value = serde_json::from_slice(&event.value).unwrap();
                    doc["metadata"]["uid"].as_str().unwrap().to_string()
                });
                if web_uid.as_deref() == Some("uid-new") {
                    left_at_namesake = owners.values().filter(|o| *o == "uid-old").count();
                }
            } else if event.key.starts_with(&pod_dir) {
                if event.put {
                    let doc: Value = serde_json::from_slice(&event.value).unwrap();
                    owners.insert(event.key.clone(), owner_uids(&doc).join(","));
                } else {
                    let owner = owners.remove(&event.key).unwrap_or_default();
                    assert_eq!(
                        owner, "uid-old",
                        "only the old web's pods are deleted: {} at {}",
                        event.key, event.revision
                    );
                    assert_ne!(
                        web_uid.as_deref(),
                        Some("uid-old"),
                        "G1: {} deleted at {} while its owner lived",
                        event.key,
                        event.revision
                    );
                    deleted += 1;
                }
            }
        }
        assert_eq!(deleted, 2000, "every old pod deleted once");
        assert!(
            left_at_namesake > 0,
            "the namesake was written while the old pods were being deleted"
        );
        assert_eq!(owned_by(&client, ns, "uid-api").await.len(), 50);
    })
    .await;
}
