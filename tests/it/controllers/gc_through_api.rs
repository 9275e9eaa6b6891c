//! The garbage collector through the API: `kcm controller-manager --kubeconfig` running the
//! replication manager, the ReplicaSet controller and the garbage collector as clients of
//! kcm's apiserver, driven by kubectl's three cascades, every outcome read from etcd's own
//! history (`support::history::Replay`: G1 and G4 at each delete's revision).
//!
//! - `kubectl delete rs` (background): the pods go, each only once its owner was gone;
//! - `--cascade=orphan`: the pods stay and lose their owner reference, then the ReplicaSet
//!   goes (the apiserver deletes it when the collector removes the `orphan` finalizer);
//! - `--cascade=foreground`: the pods go first, then the ReplicaSet;
//! - a background cascade of 2,000 pods: every one deleted once, none while its owner
//!   lived, nothing created after, an unrelated ReplicaSet's pods untouched;
//! - the apiserver's part of a deletion, which the collector leaves to it: an update that
//!   removes the last finalizer of an object in deletion deletes it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;

use crate::support::history::{self, Replay};
use crate::support::kcm::Kcm;
use crate::support::kubectl::{start_apiserver, Api};
use crate::support::objects::current_revision;
use crate::support::{eventually, with_timeout};

const NS: &str = "default";
const PODS: &str = "/registry/pods/default/";
const CONVERGE: Duration = Duration::from_secs(60);

fn rs_key(name: &str) -> String {
    format!("/registry/replicasets/{NS}/{name}")
}

fn replica_set(name: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
"
    )
}

/// The controller manager through the API with the replication manager, the ReplicaSet
/// controller and the garbage collector.
async fn controllers(api: &Api) -> Kcm {
    let kubeconfig = api.kubectl.kubeconfig().display().to_string();
    Kcm::start(
        &[
            "--kubeconfig",
            &kubeconfig,
            "--controllers",
            "replication,replicaset,garbagecollector",
        ],
        &[],
    )
    .await
}

/// Pod name → the uids of its owner references, as stored.
async fn pod_owners(api: &Api) -> BTreeMap<String, Vec<String>> {
    api.documents(PODS)
        .await
        .iter()
        .map(|pod| {
            let name = pod["metadata"]["name"].as_str().unwrap_or_default();
            (name.to_string(), owner_uids(pod))
        })
        .collect()
}

/// The uids of a stored document's owner references.
fn owner_uids(doc: &Value) -> Vec<String> {
    doc["metadata"]["ownerReferences"]
        .as_array()
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r["uid"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The names of the pods owned by `uid`.
async fn owned_by(api: &Api, uid: &str) -> BTreeSet<String> {
    pod_owners(api)
        .await
        .into_iter()
        .filter(|(_, owners)| owners.iter().any(|o| o == uid))
        .map(|(name, _)| name)
        .collect()
}

async fn uid_of(api: &Api, key: &str) -> String {
    let stored = api.stored(key).await.expect("stored");
    stored["metadata"]["uid"]
        .as_str()
        .expect("a uid")
        .to_string()
}

async fn revision(api: &Api) -> i64 {
    current_revision(&api.etcd.client().await).await
}

/// Creates the ReplicaSet `name` of `replicas` through kubectl and waits for its pods;
/// its uid and its pods' names.
async fn create_replica_set(
    api: &Api,
    name: &str,
    replicas: u32,
    limit: Duration,
) -> (String, BTreeSet<String>) {
    let file = api.manifest(&format!("{name}.yaml"), &replica_set(name, replicas));
    api.kubectl.ok(&["create", "-f", &file]).await;
    let uid = uid_of(api, &rs_key(name)).await;
    let what = format!("{replicas} pods of {name}, owned by it");
    eventually(limit, &what, || async {
        // Counting the keys first spares parsing every pod at each poll until there
        // are enough of them (at 2,000 pods, a poll every 20 ms).
        api.count(PODS).await >= replicas as usize
            && owned_by(api, &uid).await.len() == replicas as usize
    })
    .await;
    let pods = owned_by(api, &uid).await;
    (uid, pods)
}

/// Every pod key deleted in the replay.
fn deleted_pods(replay: &Replay) -> Vec<(String, i64)> {
    replay
        .deletes
        .iter()
        .filter(|d| d.key.starts_with(PODS))
        .map(|d| (d.key[PODS.len()..].to_string(), d.revision))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_rs_deletes_its_pods_in_the_background_through_the_api() {
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(180), async {
        let mut manager = controllers(&api).await;
        let (_, pods) = create_replica_set(&api, "web", 5, CONVERGE).await;
        let start = revision(&api).await;

        api.kubectl.ok(&["delete", "rs", "web"]).await;
        eventually(CONVERGE, "the pods deleted by the collector", || async {
            api.count(PODS).await == 0
        })
        .await;

        let client = api.etcd.client().await;
        let replay = Replay::read(&client, NS, start).await;
        replay.check_deletes(NS, &BTreeSet::from([rs_key("web")]));
        let rs_deleted = replay.deleted(&rs_key("web")).expect("the rs deleted");
        let deleted = deleted_pods(&replay);
        assert_eq!(
            deleted
                .iter()
                .map(|(n, _)| n.clone())
                .collect::<BTreeSet<_>>(),
            pods
        );
        assert!(
            deleted.iter().all(|(_, at)| *at > rs_deleted),
            "background: the pods go after their owner: {deleted:?}, rs at {rs_deleted}"
        );
        manager.assert_running();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_rs_cascade_orphan_keeps_the_pods_without_their_owner_through_the_api() {
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(180), async {
        let mut manager = controllers(&api).await;
        let (uid, pods) = create_replica_set(&api, "web", 4, CONVERGE).await;
        let start = revision(&api).await;

        // kubectl waits for the ReplicaSet to be gone: the collector orphans the pods and
        // removes the `orphan` finalizer, and the apiserver then deletes it.
        api.kubectl
            .ok(&["delete", "rs", "web", "--cascade=orphan", "--timeout=60s"])
            .await;
        assert!(api.stored(&rs_key("web")).await.is_none());
        let now = pod_owners(&api).await;
        assert_eq!(now.keys().cloned().collect::<BTreeSet<_>>(), pods);
        assert!(
            now.values().all(|owners| !owners.contains(&uid)),
            "every pod lost its reference to the deleted owner: {now:?}"
        );

        let client = api.etcd.client().await;
        let replay = Replay::read(&client, NS, start).await;
        replay.check_deletes(NS, &BTreeSet::new());
        assert!(deleted_pods(&replay).is_empty(), "no pod deleted");
        // G3: each pod lost its reference before the owner went.
        let rs_deleted = replay.deleted(&rs_key("web")).expect("the rs deleted");
        for pod in &pods {
            let puts = &replay.puts[&format!("{PODS}{pod}")];
            let orphaned_at = puts
                .iter()
                .find(|(_, doc)| {
                    let refs = doc["metadata"]["ownerReferences"].as_array();
                    !refs.is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid.as_str()))
                })
                .map(|(at, _)| *at)
                .expect("the pod written without its reference");
            assert!(orphaned_at < rs_deleted, "{pod} orphaned at {orphaned_at}");
        }
        manager.assert_running();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_rs_cascade_foreground_deletes_the_pods_first_through_the_api() {
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(180), async {
        let mut manager = controllers(&api).await;
        let (_, pods) = create_replica_set(&api, "web", 5, CONVERGE).await;
        let start = revision(&api).await;

        // kubectl waits for the ReplicaSet to be gone.
        api.kubectl
            .ok(&[
                "delete",
                "rs",
                "web",
                "--cascade=foreground",
                "--timeout=60s",
            ])
            .await;
        assert!(api.stored(&rs_key("web")).await.is_none());
        assert_eq!(api.count(PODS).await, 0);

        let client = api.etcd.client().await;
        let replay = Replay::read(&client, NS, start).await;
        // G1 (each pod deleted while its owner was in its foreground deletion) and the
        // apiserver's rule for the owner (deleted once no finalizer was left).
        replay.check_deletes(NS, &BTreeSet::new());
        let rs_deleted = replay.deleted(&rs_key("web")).expect("the rs deleted");
        let deleted = deleted_pods(&replay);
        assert_eq!(
            deleted
                .iter()
                .map(|(n, _)| n.clone())
                .collect::<BTreeSet<_>>(),
            pods
        );
        assert!(
            deleted.iter().all(|(_, at)| *at < rs_deleted),
            "G2: every pod goes before its owner: {deleted:?}, rs at {rs_deleted}"
        );
        manager.assert_running();
    })
    .await;
}

/// G1 through the API at the size users reach: a ReplicaSet of 2,000 pods deleted with a
/// background cascade, beside an unrelated one of 20. From etcd's history: every pod of
/// the deleted one deleted exactly once, each at a revision where its owner's key was
/// gone; no other pod deleted and none created after the delete; the other ReplicaSet's
/// pods untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_cascade_of_2000_pods_through_the_api_deletes_each_once_after_its_owner() {
    const REPLICAS: u32 = 2_000;
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(420), async {
        let settle = Duration::from_secs(240);
        let mut manager = controllers(&api).await;
        let (web_uid, web_pods) = create_replica_set(&api, "web", REPLICAS, settle).await;
        let (other_uid, other_pods) = create_replica_set(&api, "other", 20, CONVERGE).await;
        let start = revision(&api).await;

        api.kubectl.ok(&["delete", "rs", "web"]).await;
        eventually(settle, "the 2,000 pods deleted", || async {
            api.count(PODS).await == other_pods.len()
        })
        .await;
        assert_eq!(owned_by(&api, &other_uid).await, other_pods);

        // Replayed from etcd's history in revision order, tracking only the uid stored at
        // web's key and each pod's owner uids (`Replay` keeps a copy of every key per
        // delete: too much at this size).
        let client = api.etcd.client().await;
        let at_start = client
            .clone()
            .get(
                PODS,
                Some(
                    etcd_client::GetOptions::new()
                        .with_prefix()
                        .with_revision(start),
                ),
            )
            .await
            .expect("the pods at the start");
        let mut owners: BTreeMap<String, Vec<String>> = at_start
            .kvs()
            .iter()
            .map(|kv| {
                let doc: Value = serde_json::from_slice(kv.value()).expect("a pod");
                (kv.key_str().expect("a key").to_string(), owner_uids(&doc))
            })
            .collect();
        let events = history::read(
            &client,
            "/registry/",
            "/registry0",
            start,
            "/registry/zz-end",
        )
        .await;
        let web_key = rs_key("web");
        let mut web_stored = Some(web_uid.clone());
        let (mut deleted, mut created) = (BTreeSet::new(), Vec::new());
        for event in &events {
            if event.key == web_key {
                web_stored = event.put.then(|| {
                    let doc: Value = serde_json::from_slice(&event.value).expect("the rs");
                    doc["metadata"]["uid"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                });
            } else if let Some(name) = event.key.strip_prefix(PODS) {
                if event.put {
                    if event.create_revision == event.revision {
                        created.push(name.to_string());
                    }
                    let doc: Value = serde_json::from_slice(&event.value).expect("a pod");
                    owners.insert(event.key.clone(), owner_uids(&doc));
                } else {
                    let owner = owners.remove(&event.key).unwrap_or_default();
                    assert_eq!(
                        owner,
                        std::slice::from_ref(&web_uid),
                        "G4: only the deleted owner's pods are deleted: {name} at {}",
                        event.revision
                    );
                    assert_ne!(
                        web_stored.as_deref(),
                        Some(web_uid.as_str()),
                        "G1: {name} deleted at {} while its owner lived",
                        event.revision
                    );
                    assert!(deleted.insert(name.to_string()), "{name} deleted twice");
                }
            }
        }
        assert_eq!(
            deleted, web_pods,
            "exactly the deleted owner's pods, each once"
        );
        assert!(
            created.is_empty(),
            "pods created after the delete: {created:?}"
        );
        manager.assert_running();
    })
    .await;
}

/// The apiserver's part of a deletion, which the collector leaves to an API server: the
/// update that removes the last finalizer of an object in deletion deletes it
/// (kube-apiserver's `ShouldDeleteDuringUpdate`); one that leaves a finalizer does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_the_last_finalizer_through_the_api_deletes_an_object_in_deletion() {
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(120), async {
        let manifest = replica_set("held", 0).replace(
            "metadata:\n  name: held\n",
            "metadata:\n  name: held\n  finalizers: [example.com/a, example.com/b]\n",
        );
        let file = api.manifest("held.yaml", &manifest);
        api.kubectl.ok(&["create", "-f", &file]).await;
        api.kubectl
            .ok(&["delete", "rs", "held", "--wait=false"])
            .await;
        let key = rs_key("held");
        let held = api.stored(&key).await.expect("held by its finalizers");
        assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");

        let patch = |finalizers: &str| format!(r#"{{"metadata":{{"finalizers":{finalizers}}}}}"#);
        let one_left = patch(r#"["example.com/b"]"#);
        api.kubectl
            .ok(&["patch", "rs", "held", "--type=merge", "-p", &one_left])
            .await;
        let stored: Value = api.stored(&key).await.expect("one finalizer left");
        assert_eq!(
            stored["metadata"]["finalizers"],
            serde_json::json!(["example.com/b"])
        );

        api.kubectl
            .ok(&["patch", "rs", "held", "--type=merge", "-p", &patch("null")])
            .await;
        assert!(
            api.stored(&key).await.is_none(),
            "the update that removed the last finalizer deleted it"
        );
    })
    .await;
}
