//! Acceptance tests of the Deployment controller through the real `kcm controller-manager`
//! (replicaset and deployment controllers) and simulated kubelets, against a real etcd
//! (issue 14). Deployments and their template changes are written raw, as etcdctl would;
//! the bounds are checked at every revision by replaying etcd's own history (the rollout
//! invariant of docs/invariants.md; the checks are labelled D1-D9 where they are made:
//! D1-D4 at every revision, D5, D8 and D9 where the scenario exercises them).

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{Client, GetOptions};
use serde_json::{json, Value};

use crate::support::history::{self, HistoryEvent};
use crate::support::kcm::{kcm_stdin, start_manager, Kcm};
use crate::support::objects::{put_json, update_json};
use crate::support::{eventually, start_etcd, with_timeout, EtcdServer};

const LIMIT: Duration = Duration::from_secs(120);
const SETTLE: Duration = Duration::from_secs(60);
const NS: &str = "deploy";
const UID: &str = "uid-deploy-web";

fn deployment_key(name: &str) -> String {
    format!("/registry/deployments/{NS}/{name}")
}

fn rs_key(name: &str) -> String {
    format!("/registry/replicasets/{NS}/{name}")
}

/// A deployment `web` as etcdctl would write it: `app=web`, one container of `image`.
/// The ReplicaSets' names hash this template as written (raw JSON).
fn deployment_json(replicas: i64, image: &str, strategy: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS, "uid": UID, "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": strategy,
            // kubectl's `creationTimestamp: null` and an empty list: kept in the stored
            // JSON the pod-template-hash is computed over, though kcm's model drops them.
            "template": {
                "metadata": {"labels": {"app": "web"}, "creationTimestamp": null},
                "spec": {"containers": [{"name": "app", "image": image, "ports": []}]}
            }
        }
    })
}

fn rolling(surge: Value, unavailable: Value) -> Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}})
}

/// A controller manager running the ReplicaSet and Deployment controllers with
/// `--sync-period {sync_period}`, and one simulated node whose pods start after 100 ms and
/// turn Ready 200 ms later.
async fn start_cluster(etcd: &EtcdServer, sync_period: &str) -> (Kcm, Kcm) {
    let manager = start_manager(
        &etcd.endpoint(),
        &[
            "--controllers",
            "replicaset,deployment",
            "--sync-period",
            sync_period,
        ],
    )
    .await;
    let kubelet = Kcm::spawn(
        &[
            "--etcd-servers",
            &etcd.endpoint(),
            "kubelet",
            "--node",
            "n1",
            "--start-delay",
            "100ms",
            "--ready-delay",
            "200ms",
        ],
        &[],
    );
    (manager, kubelet)
}

/// A started etcd (`None` when there is none to start, see `start_etcd`), a client of
/// it, and [`start_cluster`] on it with 2 s resyncs.
async fn cluster() -> Option<(EtcdServer, Client, (Kcm, Kcm))> {
    cluster_with_sync_period("2s").await
}

/// [`cluster`] with `--sync-period {sync_period}`.
async fn cluster_with_sync_period(sync_period: &str) -> Option<(EtcdServer, Client, (Kcm, Kcm))> {
    let etcd = start_etcd().await?;
    let client = etcd.client().await;
    let cluster = start_cluster(&etcd, sync_period).await;
    Some((etcd, client, cluster))
}

/// Every stored document under `/registry/{resource}/{NS}/`, by name.
async fn documents(client: &Client, resource: &str) -> BTreeMap<String, Value> {
    let prefix = format!("/registry/{resource}/{NS}/");
    let response = client
        .clone()
        .get(prefix.as_str(), Some(GetOptions::new().with_prefix()))
        .await
        .expect("list");
    response
        .kvs()
        .iter()
        .map(|kv| {
            let name = kv
                .key_str()
                .unwrap()
                .trim_start_matches(&prefix)
                .to_string();
            (
                name,
                serde_json::from_slice(kv.value()).expect("stored JSON"),
            )
        })
        .collect()
}

async fn deployment(client: &Client) -> Value {
    let response = client
        .clone()
        .get(deployment_key("web"), None)
        .await
        .unwrap();
    serde_json::from_slice(response.kvs()[0].value()).unwrap()
}

/// The ReplicaSets the deployment owns, by name.
async fn owned_replica_sets(client: &Client) -> BTreeMap<String, Value> {
    documents(client, "replicasets")
        .await
        .into_iter()
        .filter(|(_, rs)| controller_uid(rs) == Some(UID))
        .collect()
}

fn controller_uid(doc: &Value) -> Option<&str> {
    doc["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["controller"] == json!(true))?["uid"]
        .as_str()
}

fn image(rs: &Value) -> &str {
    rs["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
}

fn condition<'a>(doc: &'a Value, type_: &str) -> Option<&'a Value> {
    doc["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Whether the deployment's rollout completed: status observed its generation and says
/// `replicas` updated, available pods, Progressing True `NewReplicaSetAvailable`.
async fn rolled_out(client: &Client, replicas: i64) -> bool {
    let d = deployment(client).await;
    let status = &d["status"];
    let field = |name: &str| status[name].as_i64().unwrap_or(0);
    status["observedGeneration"] == d["metadata"]["generation"]
        && field("replicas") == replicas
        && field("updatedReplicas") == replicas
        && field("availableReplicas") == replicas
        && condition(&d, "Progressing").is_some_and(|c| c["reason"] == "NewReplicaSetAvailable")
}

/// Writes the deployment `d` and waits until it rolled out.
async fn roll_out(client: &Client, d: &Value) {
    put_json(client, &deployment_key("web"), d).await;
    let replicas = d["spec"]["replicas"].as_i64().unwrap_or(1);
    eventually(SETTLE, "the deployment to roll out", || {
        rolled_out(client, replicas)
    })
    .await;
}

/// `(image, spec.replicas)` of every owned ReplicaSet, sorted by image.
async fn sizes(client: &Client) -> Vec<(String, i64)> {
    let mut sizes: Vec<(String, i64)> = owned_replica_sets(client)
        .await
        .values()
        .map(|rs| {
            (
                image(rs).to_string(),
                rs["spec"]["replicas"].as_i64().unwrap_or(1),
            )
        })
        .collect();
    sizes.sort();
    sizes
}

/// Changes the deployment's template image (and bumps its generation, as kcm's writers
/// do).
async fn set_image(client: &Client, image: &str) -> i64 {
    update_json(client, &deployment_key("web"), |d| {
        d["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image);
        bump_generation(d);
    })
    .await
}

fn bump_generation(d: &mut Value) {
    let generation = d["metadata"]["generation"].as_i64().unwrap_or(0);
    d["metadata"]["generation"] = json!(generation + 1);
}

// ---------------------------------------------------------------------------------------
// Replaying etcd's history

/// The namespace's pods and ReplicaSets as of one revision of a replay.
///
/// The pods are counted as they change, per controller uid, so that the counts at a
/// revision cost one look-up per ReplicaSet rather than a pass over every pod: a replay
/// of a 1,000-replica rollout takes counts at thousands of revisions, each of up to
/// 2,000 pods.
struct World<'a> {
    /// The deployment's uid.
    uid: &'a str,
    /// `/registry/pods/{namespace}/` and `/registry/replicasets/{namespace}/`.
    pods_prefix: String,
    replica_sets_prefix: String,
    pods: BTreeMap<String, PodState>,
    /// Controller uid → its active pods and the Ready ones among them.
    by_owner: BTreeMap<String, OwnedPods>,
    replica_sets: BTreeMap<String, Value>,
}

/// What the replay reads of a pod, taken once per event.
struct PodState {
    owner: Option<String>,
    active: bool,
    ready: bool,
}

impl PodState {
    fn of(pod: &Value) -> PodState {
        PodState {
            owner: controller_uid(pod).map(str::to_string),
            active: is_active(pod),
            ready: is_ready(pod),
        }
    }
}

/// The active pods of one controller, and the Ready ones among them.
#[derive(Debug, Default, Clone, Copy)]
struct OwnedPods {
    active: i64,
    ready: i64,
}

/// What the replay counts at one revision.
#[derive(Debug, Clone, Copy)]
pub(super) struct Counts {
    revision: i64,
    /// Σ spec.replicas of the deployment's ReplicaSets.
    spec_sum: i64,
    /// Active pods owned by its ReplicaSets.
    pub(super) active: i64,
    /// Ready ones among them.
    ready: i64,
    /// ReplicaSets of the deployment with active pods.
    sets_with_active_pods: usize,
}

impl<'a> World<'a> {
    fn new(namespace: &str, uid: &'a str) -> World<'a> {
        World {
            uid,
            pods_prefix: format!("/registry/pods/{namespace}/"),
            replica_sets_prefix: format!("/registry/replicasets/{namespace}/"),
            pods: BTreeMap::new(),
            by_owner: BTreeMap::new(),
            replica_sets: BTreeMap::new(),
        }
    }

    fn apply(&mut self, event: &HistoryEvent) {
        if let Some(name) = event.key.strip_prefix(&self.pods_prefix) {
            let new = event.put.then(|| {
                let pod: Value = serde_json::from_slice(&event.value).expect("JSON");
                PodState::of(&pod)
            });
            if let Some(old) = self.pods.remove(name) {
                self.count(&old, -1);
            }
            if let Some(new) = new {
                self.count(&new, 1);
                self.pods.insert(name.to_string(), new);
            }
        } else if let Some(name) = event.key.strip_prefix(&self.replica_sets_prefix) {
            if event.put {
                let rs = serde_json::from_slice(&event.value).expect("JSON");
                self.replica_sets.insert(name.to_string(), rs);
            } else {
                self.replica_sets.remove(name);
            }
        }
    }

    /// Adds (`by` 1) or takes away (-1) `pod` from its controller's counts.
    fn count(&mut self, pod: &PodState, by: i64) {
        let Some(owner) = &pod.owner else {
            return;
        };
        if !pod.active {
            return;
        }
        let owned = self.by_owner.entry(owner.clone()).or_default();
        owned.active += by;
        if pod.ready {
            owned.ready += by;
        }
    }

    fn counts(&self, revision: i64) -> Counts {
        let owned: BTreeMap<&str, &Value> = self
            .replica_sets
            .values()
            .filter(|rs| controller_uid(rs) == Some(self.uid))
            .map(|rs| (rs["metadata"]["uid"].as_str().unwrap_or_default(), rs))
            .collect();
        let spec_sum = owned
            .values()
            .map(|rs| rs["spec"]["replicas"].as_i64().unwrap_or(1))
            .sum();
        let pods: Vec<OwnedPods> = owned
            .keys()
            .filter_map(|uid| self.by_owner.get(*uid).copied())
            .collect();
        Counts {
            revision,
            spec_sum,
            active: pods.iter().map(|p| p.active).sum(),
            ready: pods.iter().map(|p| p.ready).sum(),
            sets_with_active_pods: pods.iter().filter(|p| p.active > 0).count(),
        }
    }
}

/// D1-D3: at every revision Σ spec and active pods ≤ `max`, Ready pods ≥ `min_ready`.
#[track_caller]
pub(super) fn check_bounds(counts: &[Counts], max: i64, min_ready: i64) {
    for c in counts {
        assert!(
            c.spec_sum <= max,
            "Σ spec {} > {max} at {}",
            c.spec_sum,
            c.revision
        );
        assert!(
            c.active <= max,
            "{} active pods > {max} at {}",
            c.active,
            c.revision
        );
        assert!(
            c.ready >= min_ready,
            "{} ready pods < {min_ready} at {}",
            c.ready,
            c.revision
        );
    }
}

fn is_active(pod: &Value) -> bool {
    let phase = pod["status"]["phase"].as_str().unwrap_or("Pending");
    phase != "Succeeded" && phase != "Failed" && pod["metadata"]["deletionTimestamp"].is_null()
}

fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The counts at every revision after `start` (state before it read from etcd's history
/// from revision 1).
async fn replay(client: &Client, start: i64) -> Vec<Counts> {
    replay_of(client, start, NS, UID).await
}

/// [`replay`] of the deployment with `uid` in `namespace`.
pub(super) async fn replay_of(
    client: &Client,
    start: i64,
    namespace: &str,
    uid: &str,
) -> Vec<Counts> {
    let events = history::read(client, "/registry/", "/registry0", 0, "/registry/~end").await;
    let mut world = World::new(namespace, uid);
    let mut counts = Vec::new();
    let mut i = 0;
    while i < events.len() {
        let revision = events[i].revision;
        while i < events.len() && events[i].revision == revision {
            world.apply(&events[i]);
            i += 1;
        }
        if revision > start {
            counts.push(world.counts(revision));
        }
    }
    counts
}

// ---------------------------------------------------------------------------------------
// The tests

/// A new deployment gets one ReplicaSet `web-{hash}` with the hash in its labels, selector
/// and template, the revision annotations and a controller reference; its status
/// converges with the generation observed, Available True and Progressing True
/// `NewReplicaSetAvailable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_converges_with_one_replica_set_named_by_its_template_hash() {
    with_timeout(LIMIT, async {
        let Some((_etcd, client, _cluster)) = cluster().await else {
            return;
        };
        let written = deployment_json(3, "nginx", json!(null));
        roll_out(&client, &written).await;
        let rss = owned_replica_sets(&client).await;
        assert_eq!(rss.len(), 1, "{rss:?}");
        let (name, rs) = rss.iter().next().unwrap();
        // The hash of the template as it was stored when the ReplicaSet was created: the
        // JSON written, `creationTimestamp: null` and `ports: []` included.
        let hash = kcm::api::pod_template_hash(&written["spec"]["template"], None);
        assert_eq!(name, &format!("web-{hash}"));
        let d = deployment(&client).await;
        let normalized = kcm::api::pod_template_hash(&d["spec"]["template"], None);
        assert_ne!(
            normalized, hash,
            "the status writes re-encoded the template"
        );
        assert_eq!(
            rs["metadata"]["labels"],
            json!({"app": "web", "pod-template-hash": hash})
        );
        assert_eq!(
            rs["spec"]["selector"],
            json!({"matchLabels": {"app": "web", "pod-template-hash": hash}})
        );
        assert_eq!(
            rs["spec"]["template"]["metadata"]["labels"]["pod-template-hash"],
            hash
        );
        assert_eq!(
            rs["metadata"]["ownerReferences"],
            json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": UID,
                    "controller": true, "blockOwnerDeletion": true}])
        );
        let annotations = &rs["metadata"]["annotations"];
        assert_eq!(annotations["deployment.kubernetes.io/revision"], "1");
        assert_eq!(
            annotations["deployment.kubernetes.io/desired-replicas"],
            "3"
        );
        assert_eq!(annotations["deployment.kubernetes.io/max-replicas"], "4");
        assert_eq!(
            d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
            "1"
        );
        let available = condition(&d, "Available").expect("Available");
        assert_eq!(available["status"], "True");
        assert_eq!(available["reason"], "MinimumReplicasAvailable");
        let progressing = condition(&d, "Progressing").expect("Progressing");
        assert_eq!(progressing["status"], "True");
        assert_eq!(
            progressing["message"],
            format!("ReplicaSet \"web-{hash}\" has successfully progressed.")
        );
        assert_eq!(d["status"]["readyReplicas"], 3);
        // The stored deployment kept what it was written with (no defaults written back).
        assert!(d["spec"].get("revisionHistoryLimit").is_none(), "{d}");
    })
    .await;
}

/// A template change on 10 replicas at 25%/25%, replayed from etcd's history: at every
/// revision Σ ReplicaSet spec ≤ 13, active owned pods ≤ 13 and Ready owned pods ≥ 8; it
/// ends with the new ReplicaSet at 10 Ready and the old at 0 with no pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_update_keeps_pods_within_the_surge_and_unavailability_bounds() {
    with_timeout(LIMIT, async {
        let Some((_etcd, client, _cluster)) = cluster().await else {
            return;
        };
        roll_out(&client, &deployment_json(10, "v1", json!(null))).await;
        let start = set_image(&client, "v2").await;
        eventually(SETTLE, "10 replicas of v2", || rolled_out(&client, 10)).await;
        assert_eq!(sizes(&client).await, [("v1".into(), 0), ("v2".into(), 10)]);
        let rss = owned_replica_sets(&client).await;
        let old_uid = rss.values().find(|rs| image(rs) == "v1").unwrap()["metadata"]["uid"].clone();
        let pods = documents(&client, "pods").await;
        assert!(
            pods.values()
                .all(|p| p["metadata"]["ownerReferences"][0]["uid"] != old_uid),
            "the old ReplicaSet has no pods left"
        );
        let ready = pods.values().filter(|p| is_ready(p)).count();
        assert_eq!(ready, 10);
        let counts = replay(&client, start).await;
        assert!(counts.len() > 10, "{counts:?}");
        check_bounds(&counts, 13, 8);
        assert!(
            counts.iter().any(|c| c.active > 10),
            "the rollout surged: {counts:?}"
        );
    })
    .await;
}

/// The bounds at the size users reach: 1,000 replicas at 25%/25% replaced by a template
/// change, so the ReplicaSet controller's creates and deletes span several slow-start
/// batches and syncs; at every revision Σ spec and active pods ≤ 1,250, Ready ≥ 750.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_update_of_1000_replicas_keeps_the_bounds_at_every_revision() {
    with_timeout(Duration::from_secs(300), async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let _manager = start_manager(
            &etcd.endpoint(),
            &["--controllers", "replicaset,deployment"],
        )
        .await;
        // Two nodes with room for every pod; pods run 50 ms after they are claimed and are
        // Ready 100 ms later.
        let _kubelets: Vec<Kcm> = [("n1", "10.1.0.0/21"), ("n2", "10.2.0.0/21")]
            .iter()
            .map(|(node, cidr)| {
                Kcm::spawn(
                    &[
                        "--etcd-servers",
                        &etcd.endpoint(),
                        "kubelet",
                        "--node",
                        node,
                        "--pod-cidr",
                        cidr,
                        "--start-delay",
                        "50ms",
                        "--ready-delay",
                        "100ms",
                        "--max-pods",
                        "1000",
                    ],
                    &[],
                )
            })
            .collect();
        let settle = Duration::from_secs(240);
        let d = deployment_json(1000, "v1", json!(null));
        put_json(&client, &deployment_key("web"), &d).await;
        eventually(settle, "1,000 replicas of v1", || rolled_out(&client, 1000)).await;
        let start = set_image(&client, "v2").await;
        eventually(settle, "1,000 replicas of v2", || rolled_out(&client, 1000)).await;
        assert_eq!(
            sizes(&client).await,
            [("v1".into(), 0), ("v2".into(), 1000)]
        );
        let counts = replay(&client, start).await;
        assert!(counts.len() > 2000, "{} revisions", counts.len());
        check_bounds(&counts, 1250, 750);
        assert!(counts.iter().any(|c| c.active > 1000), "the rollout surged");
        assert!(
            counts.iter().any(|c| c.sets_with_active_pods == 2),
            "old and new ran side by side"
        );
    })
    .await;
}

/// The `spec.replicas` changes of ReplicaSets in `events` after revision `after`, in
/// order: `(image, from, to)`.
fn rs_scalings(events: &[HistoryEvent], after: i64) -> Vec<(String, i64, i64)> {
    let prefix = format!("/registry/replicasets/{NS}/");
    let mut sizes: BTreeMap<String, i64> = BTreeMap::new();
    let mut scalings = Vec::new();
    for event in events
        .iter()
        .filter(|e| e.key.starts_with(&prefix) && e.put)
    {
        let rs: Value = serde_json::from_slice(&event.value).expect("JSON");
        let size = rs["spec"]["replicas"].as_i64().unwrap_or(1);
        if let Some(before) = sizes.insert(event.key.clone(), size) {
            if before != size && event.revision > after {
                scalings.push((image(&rs).to_string(), before, size));
            }
        }
    }
    scalings
}

/// A failing image stops where Kubernetes stops (old 8 / new 5 at 25%/25% of 10), and
/// Progressing turns False `ProgressDeadlineExceeded` after the deadline — with the
/// resync five minutes away, so the delayed sync (`requeueStuckDeployment`) does it; writing
/// the old template back rolls the old ReplicaSet forward as revision 3 (history "1"), the
/// failing (never ready) replicas going first, and Ready pods never below 8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_image_stops_at_the_bound_times_out_and_the_old_template_recovers() {
    with_timeout(LIMIT, async {
        let Some((_etcd, client, _cluster)) = cluster_with_sync_period("300s").await else {
            return;
        };
        let mut d = deployment_json(10, "v1", json!(null));
        d["spec"]["progressDeadlineSeconds"] = json!(2);
        roll_out(&client, &d).await;
        set_image(&client, "nginx:fail").await;
        eventually(
            SETTLE,
            "Progressing False ProgressDeadlineExceeded",
            || async {
                let d = deployment(&client).await;
                condition(&d, "Progressing").is_some_and(|c| {
                    c["status"] == "False" && c["reason"] == "ProgressDeadlineExceeded"
                })
            },
        )
        .await;
        assert_eq!(
            sizes(&client).await,
            [("nginx:fail".into(), 5), ("v1".into(), 8)]
        );
        let d = deployment(&client).await;
        let progressing = condition(&d, "Progressing").unwrap();
        let failing = owned_replica_sets(&client)
            .await
            .into_iter()
            .find(|(_, rs)| image(rs) == "nginx:fail")
            .unwrap()
            .0;
        assert_eq!(
            progressing["message"],
            format!("ReplicaSet \"{failing}\" has timed out progressing.")
        );
        assert_eq!(d["status"]["availableReplicas"], 8);
        // D9: written no sooner than the deadline after the last progress.
        let events = history::read(&client, "/registry/", "/registry0", 0, "/registry/~end").await;
        let mut last_progress = None;
        for event in events
            .iter()
            .filter(|e| e.key == deployment_key("web") && e.put)
        {
            let doc: Value = serde_json::from_slice(&event.value).unwrap();
            let Some(c) = condition(&doc, "Progressing") else {
                continue;
            };
            let at = |field: &str| {
                let time = c[field].as_str().expect("a condition time");
                humantime::parse_rfc3339(time).expect("RFC 3339")
            };
            if c["reason"] == "ProgressDeadlineExceeded" {
                let last: std::time::SystemTime = last_progress.expect("progress before");
                let timed_out = at("lastUpdateTime");
                assert!(
                    timed_out >= last + Duration::from_secs(3),
                    "timed out at {timed_out:?}, last progress {last:?}"
                );
                break;
            }
            last_progress = Some(at("lastUpdateTime"));
        }
        assert!(last_progress.is_some());

        let start = set_image(&client, "v1").await;
        eventually(SETTLE, "10 replicas of v1 again", || {
            rolled_out(&client, 10)
        })
        .await;
        assert_eq!(
            sizes(&client).await,
            [("nginx:fail".into(), 0), ("v1".into(), 10)]
        );
        let rss = owned_replica_sets(&client).await;
        let v1 = rss.values().find(|rs| image(rs) == "v1").unwrap();
        assert_eq!(
            v1["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
            "3"
        );
        assert_eq!(
            v1["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"],
            "1"
        );
        let d = deployment(&client).await;
        assert_eq!(
            d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
            "3"
        );
        let events = history::read(&client, "/registry/", "/registry0", 0, "/registry/~end").await;
        let scalings = rs_scalings(&events, start);
        assert_eq!(
            scalings.first(),
            Some(&("nginx:fail".to_string(), 5, 0)),
            "the failing replicas go first: {scalings:?}"
        );
        check_bounds(&replay(&client, start).await, 13, 8);
    })
    .await;
}

/// `Recreate` never has active pods of two ReplicaSets at one revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_never_runs_pods_of_two_replica_sets_at_once() {
    with_timeout(LIMIT, async {
        let Some((_etcd, client, _cluster)) = cluster().await else {
            return;
        };
        let d = deployment_json(3, "v1", json!({"type": "Recreate"}));
        roll_out(&client, &d).await;
        let start = set_image(&client, "v2").await;
        eventually(SETTLE, "3 replicas of v2", || rolled_out(&client, 3)).await;
        assert_eq!(sizes(&client).await, [("v1".into(), 0), ("v2".into(), 3)]);
        let counts = replay(&client, start).await;
        for c in &counts {
            assert!(
                c.sets_with_active_pods <= 1,
                "active pods of {} ReplicaSets at {}",
                c.sets_with_active_pods,
                c.revision
            );
        }
        assert!(
            counts.iter().any(|c| c.active == 0),
            "all old pods stopped first"
        );
    })
    .await;
}

/// A paused deployment creates no ReplicaSet for a new template (Progressing Unknown
/// `DeploymentPaused`); resumed, it rolls out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_deployment_creates_no_replica_set_and_resuming_rolls_out() {
    with_timeout(LIMIT, async {
        let Some((_etcd, client, _cluster)) = cluster().await else {
            return;
        };
        roll_out(&client, &deployment_json(2, "v1", json!(null))).await;
        let paused_at = update_json(&client, &deployment_key("web"), |d| {
            d["spec"]["paused"] = json!(true);
            d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("v2");
            bump_generation(d);
        })
        .await;
        eventually(SETTLE, "the paused generation observed", || async {
            let d = deployment(&client).await;
            d["status"]["observedGeneration"] == d["metadata"]["generation"]
                && condition(&d, "Progressing")
                    .is_some_and(|c| c["status"] == "Unknown" && c["reason"] == "DeploymentPaused")
        })
        .await;
        let d = deployment(&client).await;
        assert!(d["status"]["updatedReplicas"].is_null(), "{d}");
        let resumed_at = update_json(&client, &deployment_key("web"), |d| {
            d["spec"]["paused"] = json!(false);
            bump_generation(d);
        })
        .await;
        eventually(SETTLE, "2 replicas of v2", || rolled_out(&client, 2)).await;
        assert_eq!(sizes(&client).await, [("v1".into(), 0), ("v2".into(), 2)]);
        let prefix = format!("/registry/replicasets/{NS}/");
        let events = history::read(
            &client,
            "/registry/",
            "/registry0",
            paused_at,
            "/registry/~end",
        )
        .await;
        let created: Vec<i64> = events
            .iter()
            .filter(|e| e.key.starts_with(&prefix) && e.put && e.create_revision == e.revision)
            .map(|e| e.revision)
            .collect();
        assert_eq!(created.len(), 1, "{created:?}");
        assert!(
            created[0] > resumed_at,
            "created at {created:?}, resumed at {resumed_at}"
        );
    })
    .await;
}

/// `revisionHistoryLimit: 2` keeps the two newest old ReplicaSets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_revision_history_limit_keeps_the_two_newest_old_replica_sets() {
    with_timeout(LIMIT, async {
        let Some((_etcd, client, _cluster)) = cluster().await else {
            return;
        };
        let mut d = deployment_json(1, "v1", json!(null));
        d["spec"]["revisionHistoryLimit"] = json!(2);
        roll_out(&client, &d).await;
        for version in ["v2", "v3", "v4"] {
            set_image(&client, version).await;
            eventually(SETTLE, "the next version", || rolled_out(&client, 1)).await;
        }
        eventually(SETTLE, "v1 cleaned up", || async {
            let images: Vec<String> = sizes(&client).await.into_iter().map(|s| s.0).collect();
            images == ["v2", "v3", "v4"]
        })
        .await;
        let revisions: Vec<String> = owned_replica_sets(&client)
            .await
            .values()
            .map(|rs| {
                rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        let mut revisions = revisions;
        revisions.sort();
        assert_eq!(revisions, ["2", "3", "4"]);
        let d = deployment(&client).await;
        assert_eq!(
            d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
            "4"
        );
        // D8: the ReplicaSet deleted had size 0, no pods by its status, and none stored.
        let events = history::read(&client, "/registry/", "/registry0", 0, "/registry/~end").await;
        let mut world = World::new(NS, UID);
        let mut deleted = Vec::new();
        for event in &events {
            if !event.put
                && event
                    .key
                    .starts_with(&format!("/registry/replicasets/{NS}/"))
            {
                let name = event.key.rsplit('/').next().unwrap();
                let rs = &world.replica_sets[name];
                assert_eq!(rs["spec"]["replicas"], 0, "{name} deleted at size 0");
                assert!(rs["status"]["replicas"].as_i64().unwrap_or(0) == 0, "{rs}");
                let uid = rs["metadata"]["uid"].as_str().unwrap();
                assert!(
                    world.pods.values().all(|p| p.owner.as_deref() != Some(uid)),
                    "{name} deleted with pods"
                );
                deleted.push(image(rs).to_string());
            }
            world.apply(event);
        }
        assert_eq!(deleted, ["v1"]);
    })
    .await;
}

/// A ReplicaSet squatting on the new ReplicaSet's name with another template bumps
/// `status.collisionCount`; the rollout completes under the next hash, the squatter
/// untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_squatter_bumps_the_collision_count_and_the_rollout_completes() {
    with_timeout(LIMIT, async {
        let Some((_etcd, client, _cluster)) = cluster().await else {
            return;
        };
        let d = deployment_json(2, "nginx", json!(null));
        let taken = kcm::api::pod_template_hash(&d["spec"]["template"], None);
        let squatter = json!({
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": format!("web-{taken}"), "namespace": NS, "uid": "uid-squatter"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "other"}},
                "template": {
                    "metadata": {"labels": {"app": "other"}},
                    "spec": {"containers": [{"name": "app", "image": "squat"}]}
                }
            }
        });
        put_json(&client, &rs_key(&format!("web-{taken}")), &squatter).await;
        roll_out(&client, &d).await;
        let stored = deployment(&client).await;
        assert_eq!(stored["status"]["collisionCount"], 1);
        // The collision count was written with the status, which re-encoded the
        // template as kcm models it: the next name hashes that.
        let next = kcm::api::pod_template_hash(&stored["spec"]["template"], Some(1));
        let names: Vec<String> = owned_replica_sets(&client).await.into_keys().collect();
        assert_eq!(names, [format!("web-{next}")]);
        let all = documents(&client, "replicasets").await;
        let still = &all[&format!("web-{taken}")];
        assert_eq!(still["spec"], squatter["spec"]);
        assert!(still["metadata"]["ownerReferences"].is_null());
    })
    .await;
}

/// Scaling a deployment mid-rollout is proportional: stuck at old 8 / new 5 with
/// maxSurge 3 and maxUnavailable 2, scaled to 15 → old 11 / new 7 (Kubernetes' documented
/// example).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_mid_rollout_is_proportional() {
    with_timeout(LIMIT, async {
        let Some((_etcd, client, _cluster)) = cluster().await else {
            return;
        };
        let d = deployment_json(10, "v1", rolling(json!(3), json!(2)));
        roll_out(&client, &d).await;
        set_image(&client, "nginx:fail").await;
        eventually(SETTLE, "stuck at 8 / 5", || async {
            sizes(&client).await == [("nginx:fail".into(), 5), ("v1".into(), 8)]
        })
        .await;
        update_json(&client, &deployment_key("web"), |d| {
            d["spec"]["replicas"] = json!(15);
            bump_generation(d);
        })
        .await;
        eventually(SETTLE, "11 / 7", || async {
            sizes(&client).await == [("nginx:fail".into(), 7), ("v1".into(), 11)]
        })
        .await;
        for rs in owned_replica_sets(&client).await.values() {
            let annotations = &rs["metadata"]["annotations"];
            assert_eq!(
                annotations["deployment.kubernetes.io/desired-replicas"],
                "15"
            );
            assert_eq!(annotations["deployment.kubernetes.io/max-replicas"], "18");
        }
    })
    .await;
}

/// `kcm create -f` writes a Deployment with Kubernetes' defaults and generation 1, and
/// the controller rolls it out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcm_create_writes_a_deployment_with_defaults_that_rolls_out() {
    with_timeout(LIMIT, async {
        let Some((etcd, client, _cluster)) = cluster().await else {
            return;
        };
        let manifest = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n\
            spec:\n  replicas: 2\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: app, image: nginx}]}\n";
        let created =
            kcm_stdin(&etcd.endpoint(), &["create", "-n", NS, "-f", "-"], manifest)
                .await;
        assert_eq!(created.success(), "deployments/web created\n");
        let stored = deployment(&client).await;
        assert_eq!(stored["apiVersion"], "apps/v1");
        assert_eq!(stored["metadata"]["generation"], 1, "{stored}");
        assert_eq!(
            stored["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
        );
        assert_eq!(stored["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(stored["spec"]["progressDeadlineSeconds"], 600);
        eventually(SETTLE, "2 replicas", || rolled_out(&client, 2)).await;
    })
    .await;
}

/// A new template mid-rollout (a rollover, three ReplicaSets): the middle one is only
/// scaled down once the newest exists, and the bounds hold at every revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollover_keeps_the_bounds_and_never_grows_the_middle_replica_set() {
    with_timeout(LIMIT, async {
        let Some((_etcd, client, _cluster)) = cluster().await else {
            return;
        };
        roll_out(&client, &deployment_json(10, "v1", json!(null))).await;
        let start = set_image(&client, "v2").await;
        eventually(SETTLE, "v2 under way", || async {
            sizes(&client)
                .await
                .iter()
                .any(|(image, size)| image == "v2" && *size >= 3)
        })
        .await;
        let rollover = set_image(&client, "v3").await;
        eventually(SETTLE, "10 replicas of v3", || rolled_out(&client, 10)).await;
        assert_eq!(
            sizes(&client).await,
            [("v1".into(), 0), ("v2".into(), 0), ("v3".into(), 10)]
        );
        let events = history::read(&client, "/registry/", "/registry0", 0, "/registry/~end").await;
        let grown: Vec<_> = rs_scalings(&events, rollover)
            .into_iter()
            .filter(|(image, from, to)| image == "v2" && to > from)
            .collect();
        assert!(grown.is_empty(), "v2 grew after the rollover: {grown:?}");
        check_bounds(&replay(&client, start).await, 13, 8);
    })
    .await;
}

/// An invalid deployment gets no writes and one warning naming the field; fixed, it
/// rolls out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_deployment_is_skipped_with_one_warning_until_fixed() {
    with_timeout(LIMIT, async {
        let Some((_etcd, client, (manager, _kubelet))) = cluster().await else {
            return;
        };
        let d = deployment_json(2, "v1", rolling(json!(0), json!("0%")));
        put_json(&client, &deployment_key("web"), &d).await;
        let needle = "skipping deployment: invalid Deployment \"deploy/web\": \
            spec.strategy.rollingUpdate.maxUnavailable: may not be 0 when `maxSurge` is 0";
        eventually(SETTLE, "the warning", || async {
            !manager.warnings_about(needle).is_empty()
        })
        .await;
        // Synced again (the 2 s resync): still one warning, nothing written.
        let series = r#"kcm_syncs_total{controller="deployment",result="ok"}"#;
        let synced = manager.metric(series).await;
        eventually(SETTLE, "two more syncs", || async {
            manager.metric(series).await >= synced + 2.0
        })
        .await;
        assert_eq!(manager.warnings_about("skipping deployment").len(), 1);
        assert!(owned_replica_sets(&client).await.is_empty());
        assert!(deployment(&client).await["status"].is_null());
        update_json(&client, &deployment_key("web"), |d| {
            d["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] = json!(1);
            bump_generation(d);
        })
        .await;
        eventually(SETTLE, "2 replicas", || rolled_out(&client, 2)).await;
        assert_eq!(manager.warnings_about("skipping deployment").len(), 1);
    })
    .await;
}

/// A matching orphan ReplicaSet with the deployment's template is adopted and used as the
/// new ReplicaSet: no other one is created, and it gets the revision annotations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_matching_orphan_replica_set_is_adopted_as_the_new_one() {
    with_timeout(LIMIT, async {
        let Some((_etcd, client, _cluster)) = cluster().await else {
            return;
        };
        let d = deployment_json(2, "nginx", json!(null));
        let orphan = json!({
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web-by-hand", "namespace": NS, "uid": "uid-orphan",
                         "labels": {"app": "web"}},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": d["spec"]["template"],
            }
        });
        put_json(&client, &rs_key("web-by-hand"), &orphan).await;
        roll_out(&client, &d).await;
        let rss = owned_replica_sets(&client).await;
        let names: Vec<&String> = rss.keys().collect();
        assert_eq!(names, ["web-by-hand"]);
        let annotations = &rss["web-by-hand"]["metadata"]["annotations"];
        assert_eq!(annotations["deployment.kubernetes.io/revision"], "1");
        assert_eq!(documents(&client, "replicasets").await.len(), 1);
    })
    .await;
}

/// A deployment with a `deletionTimestamp` (an unknown finalizer holding it) gets status
/// writes only: a new template creates no ReplicaSet and scales none, and the finalizer
/// is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleting_deployment_gets_status_only() {
    with_timeout(LIMIT, async {
        let Some((_etcd, client, _cluster)) = cluster().await else {
            return;
        };
        roll_out(&client, &deployment_json(2, "v1", json!(null))).await;
        let before = owned_replica_sets(&client).await;
        update_json(&client, &deployment_key("web"), |d| {
            d["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            d["metadata"]["finalizers"] = json!(["example.com/hold"]);
            d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("v2");
            d["spec"]["replicas"] = json!(3);
            bump_generation(d);
        })
        .await;
        eventually(SETTLE, "the new generation observed", || async {
            let d = deployment(&client).await;
            d["status"]["observedGeneration"] == d["metadata"]["generation"]
        })
        .await;
        let d = deployment(&client).await;
        assert_eq!(d["metadata"]["finalizers"], json!(["example.com/hold"]));
        assert_eq!(d["status"]["updatedReplicas"], json!(null), "{d}");
        let after = owned_replica_sets(&client).await;
        assert_eq!(
            after.keys().collect::<Vec<_>>(),
            before.keys().collect::<Vec<_>>()
        );
        for (name, rs) in &after {
            assert_eq!(rs["spec"], before[name]["spec"], "{name} unchanged");
        }
    })
    .await;
}
