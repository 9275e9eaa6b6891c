//! Acceptance tests of the ReplicaSet controller through the real `kcm controller-manager`
//! against a real etcd (issue 13): a ReplicaSet written raw converges with pods carrying
//! exactly one correct controller reference, orphans are adopted (not re-created), a
//! relabelled pod is released and replaced, and a ReplicationController and a ReplicaSet
//! with overlapping selectors are stable once converged (etcd's own history says so).

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{Client, GetOptions};
use serde_json::{json, Value};

use crate::support::history;
use crate::support::kcm::{kcm, kcm_stdin, start_manager, Kcm};
use crate::support::objects::{
    controller_json, controller_key, current_revision, pod_key, put_json, update_json,
};
use crate::support::{eventually, start_etcd, with_timeout, EtcdServer};

const LIMIT: Duration = Duration::from_secs(120);
const SETTLE: Duration = Duration::from_secs(60);
const NS: &str = "rs";

fn rs_key(name: &str) -> String {
    format!("/registry/replicasets/{NS}/{name}")
}

/// A ReplicaSet as etcdctl would write it: no defaults, `app={name}` by matchLabels and
/// `tier In (front)` by matchExpressions.
fn replica_set_json(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-rs-{name}"), "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {
                "matchLabels": {"app": name},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]
            },
            "template": {
                "metadata": {"labels": {"app": name, "tier": "front"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}
            }
        }
    })
}

fn orphan_json(name: &str, labels: Value) -> Value {
    json!({
        "kind": "Pod",
        "apiVersion": "v1beta3",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    })
}

/// A stored pod: its document and create revision.
struct StoredPod {
    doc: Value,
    create_revision: i64,
}

impl StoredPod {
    /// The uids of its controller references.
    fn controllers(&self) -> Vec<String> {
        self.doc["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["controller"] == json!(true))
            .map(|r| r["uid"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

async fn stored_pods(client: &Client) -> BTreeMap<String, StoredPod> {
    let prefix = format!("/registry/pods/{NS}/");
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
            let doc = serde_json::from_slice(kv.value()).expect("pod JSON");
            (
                name,
                StoredPod {
                    doc,
                    create_revision: kv.create_revision(),
                },
            )
        })
        .collect()
}

/// The names of the pods whose one controller reference names `uid`.
async fn owned_by(client: &Client, uid: &str) -> Vec<String> {
    stored_pods(client)
        .await
        .into_iter()
        .filter(|(_, pod)| pod.controllers() == [uid])
        .map(|(name, _)| name)
        .collect()
}

async fn rs_status(client: &Client, name: &str) -> Value {
    let response = client.clone().get(rs_key(name), None).await.unwrap();
    let kv = response.kvs().first().expect("replica set stored");
    serde_json::from_slice::<Value>(kv.value()).unwrap()["status"].clone()
}

async fn manager(etcd: &EtcdServer, controllers: &str) -> Kcm {
    start_manager(
        &etcd.endpoint(),
        &["--controllers", controllers, "--sync-period", "1s"],
    )
    .await
}

/// Waits until each of `controllers` has synced `syncs` more times (they resync every
/// second), then asserts from etcd's history that no pod was written meanwhile.
///
/// Every controller's count is read before waiting for any: the controllers resync side
/// by side, so the waits overlap (read one after another's wait, two controllers' 30
/// resyncs took 60 s).
async fn assert_stable(client: &Client, manager: &Kcm, controllers: &[&str], syncs: usize) {
    let converged = current_revision(client).await;
    let mut counts = Vec::new();
    for controller in controllers {
        let series = format!(r#"kcm_syncs_total{{controller="{controller}",result="ok"}}"#);
        let at = manager.metric(&series).await;
        counts.push((controller, series, at));
    }
    for (controller, series, at) in counts {
        eventually(
            SETTLE,
            &format!("{syncs} more {controller} syncs"),
            || async { manager.metric(&series).await >= at + syncs as f64 },
        )
        .await;
    }
    let events = history::read(
        client,
        "/registry/pods/",
        "/registry/pods\x7f",
        converged,
        "/registry/pods~end",
    )
    .await;
    assert!(
        events.is_empty(),
        "no pod written after converging: {events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_replica_set_converges_with_one_controller_reference_per_pod() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let _manager = manager(&etcd, "replicaset").await;
        put_json(&client, &rs_key("web"), &replica_set_json("web", 3)).await;
        eventually(SETTLE, "3 pods owned by rs/web", || async {
            owned_by(&client, "uid-rs-web").await.len() == 3
        })
        .await;
        for (name, pod) in stored_pods(&client).await {
            assert_eq!(
                pod.doc["metadata"]["ownerReferences"],
                json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                    "uid": "uid-rs-web", "controller": true, "blockOwnerDeletion": true}]),
                "{name}"
            );
            assert_eq!(
                pod.doc["metadata"]["labels"],
                json!({"app": "web", "tier": "front"})
            );
        }
        eventually(SETTLE, "status of rs/web", || async {
            let status = rs_status(&client, "web").await;
            status["replicas"] == 3
                && status["fullyLabeledReplicas"] == 3
                && status["observedGeneration"] == 1
        })
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_are_adopted_a_relabelled_pod_released_and_replaced() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let front = json!({"app": "web", "tier": "front"});
        for i in 0..3 {
            put_json(
                &client,
                &pod_key(NS, &format!("old-{i}")),
                &orphan_json(&format!("old-{i}"), front.clone()),
            )
            .await;
        }
        let before = stored_pods(&client).await;
        let start = current_revision(&client).await;
        let _manager = manager(&etcd, "replicaset").await;
        put_json(&client, &rs_key("web"), &replica_set_json("web", 5)).await;
        eventually(SETTLE, "5 pods owned by rs/web", || async {
            owned_by(&client, "uid-rs-web").await.len() == 5
        })
        .await;
        let after = stored_pods(&client).await;
        for (name, pod) in &before {
            assert_eq!(
                after[name].create_revision, pod.create_revision,
                "{name} adopted, not re-created"
            );
            assert_eq!(after[name].controllers(), ["uid-rs-web"]);
        }
        let events = history::read(
            &client,
            "/registry/pods/",
            "/registry/pods\x7f",
            start,
            "/registry/pods~end",
        )
        .await;
        let creates = events
            .iter()
            .filter(|e| e.put && e.create_revision == e.revision)
            .count();
        assert_eq!(creates, 2, "exactly 2 created: {events:?}");
        assert!(events.iter().all(|e| e.put), "nothing deleted");

        // Relabelled: released (kept, no controller reference) and replaced.
        update_json(&client, &pod_key(NS, "old-0"), |pod| {
            pod["metadata"]["labels"]["tier"] = json!("back")
        })
        .await;
        eventually(SETTLE, "old-0 released and replaced", || async {
            let pods = stored_pods(&client).await;
            pods.get("old-0")
                .is_some_and(|p| p.controllers().is_empty())
                && owned_by(&client, "uid-rs-web").await.len() == 5
                && pods.len() == 6
        })
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rc_and_an_rs_with_overlapping_selectors_are_stable() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let manager = manager(&etcd, "replication,replicaset").await;
        // The RC selects app=web; the RS app=web,tier=front: the RS's pods match the RC's
        // selector, and the RC's pods (labelled app=web,tier=front too) the RS's.
        let labels = json!({"app": "web", "tier": "front"});
        let rc = controller_json(NS, "web-rc", 2, json!({"app": "web"}), labels);
        put_json(&client, &controller_key(NS, "web-rc"), &rc).await;
        put_json(&client, &rs_key("web"), &replica_set_json("web", 3)).await;
        eventually(SETTLE, "2 RC pods and 3 RS pods", || async {
            let pods = stored_pods(&client).await;
            let orphans = pods.values().filter(|p| p.controllers().is_empty()).count();
            let owned = owned_by(&client, "uid-rs-web").await.len();
            pods.len() == 5 && orphans == 2 && owned == 3
        })
        .await;
        // The issue's 30 s: thirty resyncs of each controller (1 s period), no pod written.
        assert_stable(&client, &manager, &["replication", "replicaset"], 30).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcm_create_writes_a_replica_set_with_defaults_and_get_rs_prints_it() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let endpoint = etcd.endpoint();
        let manifest = "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: web}\n\
            spec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: nginx}]}\n";
        let created = kcm_stdin(&endpoint, &["create", "-n", NS, "-f", "-"], manifest).await;
        assert_eq!(created.success(), "replicasets/web created\n");
        let response = client.clone().get(rs_key("web"), None).await.unwrap();
        let stored: Value = serde_json::from_slice(response.kvs()[0].value()).unwrap();
        assert_eq!(stored["apiVersion"], "apps/v1");
        assert_eq!(stored["spec"]["replicas"], 1, "{stored}");
        assert_eq!(stored["metadata"]["generation"], 1, "{stored}");

        let _manager = manager(&etcd, "replicaset").await;
        eventually(SETTLE, "status.replicas 1", || async {
            rs_status(&client, "web").await["replicas"] == 1
        })
        .await;
        for kind in ["rs", "replicaset", "replicasets"] {
            let table = kcm(&endpoint, &["get", kind, "-n", NS]).await;
            let lines: Vec<&str> = table.success().lines().collect();
            assert_eq!(
                lines[0].split_whitespace().collect::<Vec<_>>(),
                ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
            );
            assert_eq!(lines[1].split_whitespace().take(3).collect::<Vec<_>>(), ["web", "1", "1"]);
        }
        let scaled = kcm(&endpoint, &["scale", "rs", "web", "--replicas", "2", "-n", NS]).await;
        assert_eq!(scaled.success(), "replicaset.apps/web scaled\n");
        let uid = stored["metadata"]["uid"].as_str().expect("a uid").to_string();
        eventually(SETTLE, "2 pods owned by rs/web", || async {
            owned_by(&client, &uid).await.len() == 2
        })
        .await;
        eventually(SETTLE, "status.replicas 2", || async {
            rs_status(&client, "web").await["replicas"] == 2
        })
        .await;
        let described = kcm(&endpoint, &["describe", "rs", "web", "-n", NS]).await;
        let text = described.success();
        assert!(text.contains("Replicas:     2 current / 2 desired"), "{text}");
        assert!(text.contains("Selector:     app=web"), "{text}");
        assert!(text.contains("Pods:         2"), "{text}");
        let json = kcm(&endpoint, &["get", "rs", "web", "-n", NS, "-o", "json"]).await;
        let object: Value = serde_json::from_str(json.success()).unwrap();
        assert_eq!(object["kind"], "ReplicaSet");
        assert_eq!(object["status"]["replicas"], 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_unelected_managers_scaling_to_300_never_exceed_300_in_etcds_history() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        const REPLICAS: usize = 300;
        let client = etcd.client().await;
        // Bursts of 50: several syncs per scale-up, so the two managers' views interleave.
        let args = [
            "--controllers",
            "replicaset",
            "--burst-replicas",
            "50",
            "--sync-period",
            "1s",
        ];
        let endpoint = etcd.endpoint();
        let _managers = tokio::join!(
            start_manager(&endpoint, &args),
            start_manager(&endpoint, &args)
        );
        let start = current_revision(&client).await;
        put_json(&client, &rs_key("web"), &replica_set_json("web", 0)).await;
        update_json(&client, &rs_key("web"), |rs| {
            rs["spec"]["replicas"] = json!(REPLICAS)
        })
        .await;
        eventually(SETTLE, "300 pods owned by rs/web", || async {
            owned_by(&client, "uid-rs-web").await.len() == REPLICAS
        })
        .await;

        // Replay etcd's history of the namespace's pods: the active owned pods after every
        // revision.
        let prefix = format!("/registry/pods/{NS}/");
        let events = history::read(
            &client,
            "/registry/pods/",
            "/registry/pods\x7f",
            start,
            "/registry/pods~end",
        )
        .await;
        let mut active = std::collections::BTreeSet::new();
        let (mut peak, mut peak_at) = (0, 0);
        for event in &events {
            let Some(name) = event.key.strip_prefix(&prefix) else {
                continue;
            };
            let counts = event.put && {
                let pod: Value = serde_json::from_slice(&event.value).expect("pod JSON");
                let controllers: Vec<_> = pod["metadata"]["ownerReferences"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| r["controller"] == json!(true))
                    .collect();
                assert!(controllers.len() <= 1, "two controller references: {pod}");
                let phase = pod["status"]["phase"].as_str().unwrap_or("Pending");
                controllers
                    .first()
                    .is_some_and(|r| r["uid"] == "uid-rs-web")
                    && !matches!(phase, "Succeeded" | "Failed")
                    && pod["metadata"]["deletionTimestamp"].is_null()
            };
            if counts {
                active.insert(name.to_string());
            } else {
                active.remove(name);
            }
            if active.len() > peak {
                (peak, peak_at) = (active.len(), event.revision);
            }
        }
        assert_eq!(active.len(), REPLICAS);
        assert!(
            peak <= REPLICAS,
            "{peak} active owned pods at revision {peak_at}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_during_a_large_scale_down_stops_its_deletes_and_etcds_history_shows_it() {
    // The ReplicaSet's deletes are guarded only by its incarnation, so no guard stops them
    // when it is resized: scaled from 5,000 to 0 and back to 5,000 as its first pod is
    // deleted, the sync stops starting deletes once the ReplicaSet cache shows the resize,
    // instead of deleting the 5,000 it decided (and the next sync re-creating them). (At
    // 5,000 the pods fit the test client's 4 MiB answer.)
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        const REPLICAS: usize = 5_000;
        let client = etcd.client().await;
        let _manager = manager(&etcd, "replicaset").await;
        put_json(
            &client,
            &rs_key("web"),
            &replica_set_json("web", REPLICAS as i64),
        )
        .await;
        eventually(SETTLE, "5,000 pods owned by rs/web", || async {
            owned_by(&client, "uid-rs-web").await.len() == REPLICAS
        })
        .await;

        let mut pods = client
            .watch_client()
            .watch(
                format!("/registry/pods/{NS}/"),
                Some(etcd_client::WatchOptions::new().with_prefix()),
            )
            .await
            .expect("watch the pods");
        let start = current_revision(&client).await;
        update_json(&client, &rs_key("web"), |rs| {
            rs["spec"]["replicas"] = json!(0)
        })
        .await;
        loop {
            let response = tokio::time::timeout(SETTLE, pods.message())
                .await
                .expect("a delete within the settling time")
                .expect("the pod watch")
                .expect("the pod watch open");
            let deleted = response
                .events()
                .iter()
                .any(|e| e.event_type() == etcd_client::EventType::Delete);
            if deleted {
                break;
            }
        }
        update_json(&client, &rs_key("web"), |rs| {
            rs["spec"]["replicas"] = json!(REPLICAS)
        })
        .await;
        let resized = current_revision(&client).await;
        eventually(SETTLE, "rs/web back at 5,000 pods", || async {
            owned_by(&client, "uid-rs-web").await.len() == REPLICAS
        })
        .await;

        let events = history::read(
            &client,
            "/registry/pods/",
            "/registry/pods\x7f",
            start,
            "/registry/pods~end",
        )
        .await;
        let deleted = |after: bool| {
            events
                .iter()
                .filter(|e| !e.put && (e.revision > resized) == after)
                .count()
        };
        let (before, after) = (deleted(false), deleted(true));
        // What the deletes in flight (the burst limit, 500) and the cache's lag allow after
        // the resize, far below the 5,000 decided.
        assert!(
            after <= 1_500,
            "{after} pods deleted after the resize, {before} before"
        );
    })
    .await;
}

/// What the ReplicaSet controller's creates and adoptions rely on: a registry guarded by an
/// object's unchanged version commits nothing once that object was updated (a status
/// write, a deletionTimestamp) or deleted, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_guarded_by_an_unchanged_replica_set_stop_at_its_next_write() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let registry = kcm::registry::Registry::new(&client, "/registry").unwrap();
        put_json(&client, &rs_key("web"), &replica_set_json("web", 1)).await;
        let rs: kcm::api::ReplicaSet = registry.get(NS, "web").await.unwrap();
        let guarded = registry.guarded_unchanged(registry.incarnation(&rs).unwrap());
        let pod = |name: &str| -> kcm::api::Pod {
            serde_json::from_value(orphan_json(name, json!({"app": "web"}))).unwrap()
        };
        guarded.create(&pod("a")).await.unwrap();
        // Writing pods does not change the ReplicaSet: the guard still holds.
        guarded.create(&pod("b")).await.unwrap();
        let mut status = rs.clone();
        status.status.replicas = 2;
        registry.update(&status).await.unwrap();
        let err = guarded.create(&pod("c")).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "create /registry/pods/rs/c: refused, /registry/replicasets/rs/web was changed \
             or deleted since it was read"
        );
        assert!(matches!(err, kcm::registry::StorageError::OwnerGone { .. }));
        assert!(!stored_pods(&client).await.contains_key("c"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replica_sets_with_one_selector_split_the_pods_stably() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let manager = manager(&etcd, "replicaset").await;
        // Both select app=web,tier=front (the second by its own name only in its uid).
        let mut b = replica_set_json("web", 3);
        b["metadata"]["name"] = json!("web-b");
        b["metadata"]["uid"] = json!("uid-rs-web-b");
        put_json(&client, &rs_key("web"), &replica_set_json("web", 2)).await;
        put_json(&client, &rs_key("web-b"), &b).await;
        eventually(SETTLE, "2 + 3 pods, each owned by one", || async {
            owned_by(&client, "uid-rs-web").await.len() == 2
                && owned_by(&client, "uid-rs-web-b").await.len() == 3
                && stored_pods(&client).await.len() == 5
        })
        .await;
        assert_stable(&client, &manager, &["replicaset"], 4).await;
    })
    .await;
}

/// `availableReplicas` counts pods Ready for `minReadySeconds`: with 3 s it trails
/// `readyReplicas`, then catches up by itself, with no pod written in between and the
/// manager's periodic resync far away (a minute): the controller re-queued the
/// ReplicaSet for the moment its pods became available (Kubernetes' `AddAfter`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn available_replicas_trail_ready_ones_by_min_ready_seconds_and_catch_up_alone() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let _manager = start_manager(
            &etcd.endpoint(),
            &["--controllers", "replicaset", "--sync-period", "60s"],
        )
        .await;
        let _kubelet = Kcm::spawn(
            &[
                "--etcd-servers",
                &etcd.endpoint(),
                "kubelet",
                "--node",
                "n1",
                "--start-delay",
                "100ms",
            ],
            &[],
        );
        let mut rs = replica_set_json("slow", 2);
        rs["spec"]["minReadySeconds"] = json!(3);
        put_json(&client, &rs_key("slow"), &rs).await;

        eventually(SETTLE, "2 ready pods, not yet available", || async {
            let status = rs_status(&client, "slow").await;
            status["readyReplicas"] == json!(2)
                && status["availableReplicas"].as_i64().unwrap_or(0) < 2
        })
        .await;
        let pods_at_ready = current_revision(&client).await;
        let pods_before = pod_revisions(&client).await;
        eventually(
            Duration::from_secs(10),
            "availableReplicas to catch up with readyReplicas",
            || async { rs_status(&client, "slow").await["availableReplicas"] == json!(2) },
        )
        .await;
        let pods_after = pod_revisions(&client).await;
        assert_eq!(pods_after.len(), 2);
        assert!(
            pods_after.values().all(|&rev| rev <= pods_at_ready),
            "{pods_after:?} after {pods_at_ready}"
        );
        assert_eq!(
            pods_before, pods_after,
            "no pod changed after revision {pods_at_ready}: the catch-up came from the re-queue"
        );
    })
    .await;
}

/// Each pod's `mod_revision`, by name.
async fn pod_revisions(client: &Client) -> BTreeMap<String, i64> {
    let prefix = format!("/registry/pods/{NS}/");
    let response = client
        .clone()
        .get(prefix.as_str(), Some(GetOptions::new().with_prefix()))
        .await
        .expect("list pods");
    response
        .kvs()
        .iter()
        .map(|kv| (kv.key_str().unwrap().to_string(), kv.mod_revision()))
        .collect()
}

/// What etcd's history says of a ReplicaSet at some revision.
#[derive(Clone, Copy, Debug, PartialEq)]
enum RsState {
    Absent,
    Live,
    Deleting,
}

/// No pod is ever created or adopted for a ReplicaSet at a revision where it is being
/// deleted or gone, whatever two unelected managers saw: the ReplicaSet is scaled to 2,000
/// (bursts of 50, so each manager's work spans many syncs), marked for deletion mid-way,
/// then deleted; etcd's history of the pods and the ReplicaSet, replayed in revision order,
/// shows every create and adoption at a revision where it was live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_pod_is_created_or_adopted_for_a_replica_set_that_is_deleting_or_gone() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let args = [
            "--controllers",
            "replicaset",
            "--burst-replicas",
            "50",
            "--sync-period",
            "1s",
        ];
        let endpoint = etcd.endpoint();
        let managers = tokio::join!(
            start_manager(&endpoint, &args),
            start_manager(&endpoint, &args)
        );
        let managers = [managers.0, managers.1];
        let start = current_revision(&client).await;
        // Orphans to adopt while it lives, and a few more written after the delete mark.
        for i in 0..20 {
            put_json(
                &client,
                &pod_key(NS, &format!("orphan-{i}")),
                &orphan_json(
                    &format!("orphan-{i}"),
                    json!({"app": "web", "tier": "front"}),
                ),
            )
            .await;
        }
        put_json(&client, &rs_key("web"), &replica_set_json("web", 2000)).await;
        eventually(SETTLE, "some hundreds of pods owned by rs/web", || async {
            owned_by(&client, "uid-rs-web").await.len() >= 300
        })
        .await;
        update_json(&client, &rs_key("web"), |rs| {
            rs["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z")
        })
        .await;
        for i in 20..25 {
            put_json(
                &client,
                &pod_key(NS, &format!("orphan-{i}")),
                &orphan_json(
                    &format!("orphan-{i}"),
                    json!({"app": "web", "tier": "front"}),
                ),
            )
            .await;
        }
        // Each manager syncs it at least twice more while it is deleting, then it goes.
        let series = r#"kcm_syncs_total{controller="replicaset",result="ok"}"#;
        let mut before = Vec::new();
        for manager in &managers {
            before.push(manager.metric(series).await);
        }
        for (manager, before) in managers.iter().zip(&before) {
            eventually(
                SETTLE,
                "two more syncs of the deleting replica set",
                || async { manager.metric(series).await >= before + 2.0 },
            )
            .await;
        }
        crate::support::objects::delete(&client, &rs_key("web")).await;
        // A ReplicaSet written after the delete: once each manager has synced it twice,
        // each has seen the delete (its watch delivers in revision order).
        put_json(&client, &rs_key("probe"), &replica_set_json("probe", 1)).await;
        for manager in &managers {
            let before = manager.metric(series).await;
            eventually(SETTLE, "two syncs after the delete", || async {
                manager.metric(series).await >= before + 2.0
            })
            .await;
        }

        let events =
            history::read(&client, "/registry/", "/registry0", start, "/registry/~end").await;
        let prefix = format!("/registry/pods/{NS}/");
        let owners = |value: &[u8]| -> Vec<String> {
            let pod: Value = serde_json::from_slice(value).expect("pod JSON");
            pod["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["controller"] == json!(true))
                .map(|r| r["uid"].as_str().unwrap_or_default().to_string())
                .collect()
        };
        let mut state = RsState::Absent;
        let mut owned_before: BTreeMap<String, bool> = BTreeMap::new();
        let (mut creates, mut adoptions, mut checked_deleting) = (0, 0, false);
        for event in &events {
            if event.key == rs_key("web") {
                state = match (
                    event.put,
                    event.put && {
                        let rs: Value = serde_json::from_slice(&event.value).expect("rs JSON");
                        !rs["metadata"]["deletionTimestamp"].is_null()
                    },
                ) {
                    (false, _) => RsState::Absent,
                    (true, true) => RsState::Deleting,
                    (true, false) => RsState::Live,
                };
                checked_deleting |= state != RsState::Live;
                continue;
            }
            let Some(name) = event.key.strip_prefix(&prefix) else {
                continue;
            };
            if !event.put {
                owned_before.remove(name);
                continue;
            }
            let owned = owners(&event.value).contains(&"uid-rs-web".to_string());
            let was_owned = owned_before
                .insert(name.to_string(), owned)
                .unwrap_or(false);
            if owned && !was_owned {
                if event.create_revision == event.revision {
                    creates += 1;
                } else {
                    adoptions += 1;
                }
                assert_eq!(
                    state,
                    RsState::Live,
                    "pod {name} {} for rs/web at revision {} while it was {state:?}",
                    if event.create_revision == event.revision {
                        "created"
                    } else {
                        "adopted"
                    },
                    event.revision
                );
            }
        }
        assert!(
            checked_deleting,
            "the history covers the deleting and deleted states"
        );
        assert!(
            creates >= 280 && adoptions == 20,
            "{creates} creates, {adoptions} adoptions"
        );
    })
    .await;
}
