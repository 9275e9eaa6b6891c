//! Issue 23's namespaces, graceful pod deletion and node writes with real clients against
//! `kcm up`: `kubectl create -f ns.yaml` and kube-rs create Namespaces, `kubectl delete
//! namespace` empties one (Terminating meanwhile; creates in it are 403) and then removes
//! it, a namespace that only holds objects is listed and deleted too, `default` may not be
//! deleted; a pod's delete marks it Terminating and its kubelet deletes it (the garbage
//! collector, after the grace period, when no kubelet runs it), `--grace-period=0
//! --force` deletes at once; `kubectl cordon` keeps the scheduler's new pods off a node
//! (`Ready,SchedulingDisabled`), `uncordon` lets them back, `kubectl delete node` removes
//! the Node, which its live kubelet posts again.
//!
//! Expectations are kube-apiserver's (kubernetes-api.md §2.8, §2.10, §4.10); outcomes are
//! read from etcd.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{json, Value};

use crate::support::history;
use crate::support::kcm::http_request;
use crate::support::kubectl::start_up;
use crate::support::objects::pod_documents;
use crate::support::{eventually, with_timeout};

const LIMIT: Duration = Duration::from_secs(150);
const CONVERGE: Duration = Duration::from_secs(40);

const NAMESPACE: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  labels: {team: a}
";

fn deployment(namespace: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: {namespace}
spec:
  replicas: 2
  selector:
    matchLabels: {{app: app}}
  template:
    metadata:
      labels: {{app: app}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
"
    )
}

/// A Service holding a finalizer nobody removes but the test: its namespace stays
/// Terminating until it is gone.
const HELD_SERVICE: &str = "apiVersion: v1
kind: Service
metadata:
  name: held
  namespace: team-a
  finalizers: [example.com/hold]
spec:
  selector: {app: app}
  ports:
  - port: 80
";

const LEASE: &str = "apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: lock
  namespace: team-a
spec:
  holderIdentity: one
  leaseDurationSeconds: 15
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_are_created_listed_and_deleted_with_what_they_hold() {
    with_timeout(LIMIT, async {
        let Some(api) = start_up(1).await else {
            return;
        };
        let kubectl = &api.kubectl;
        let ns = api.manifest("ns.yaml", NAMESPACE);
        assert_eq!(
            kubectl.ok(&["create", "-f", &ns]).await,
            "namespace/team-a created\n"
        );
        let key = "/registry/namespaces/team-a";
        let document = api.stored(key).await.expect("the Namespace is stored");
        assert_eq!(document["status"]["phase"], "Active", "{document:#}");
        assert_eq!(document["metadata"]["labels"]["team"], "a");
        assert_eq!(
            document["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "team-a"
        );
        let out = kubectl.run(&["create", "-f", &ns]).await;
        assert!(
            out.stderr.contains("AlreadyExists"),
            "a second create: {out:?}"
        );

        // Objects in it, and in a namespace nobody created (listed all the same).
        let deploy = api.manifest("deploy.yaml", &deployment("team-a"));
        kubectl.ok(&["apply", "-f", &deploy]).await;
        kubectl
            .ok(&["apply", "-f", &api.manifest("held.yaml", HELD_SERVICE)])
            .await;
        let loose = api.manifest("loose.yaml", &deployment("loose"));
        kubectl.ok(&["apply", "-f", &loose]).await;
        // The kinds tools keep their state in, each a registry row: the namespace
        // controller empties every namespaced resource the registry serves.
        for create in [
            &["create", "configmap", "settings", "--from-literal=a=b"][..],
            &["create", "secret", "generic", "token", "--from-literal=t=s"],
            &["create", "serviceaccount", "builder"],
        ] {
            kubectl.ok(&[create, &["-n", "team-a"]].concat()).await;
        }
        kubectl
            .ok(&["create", "-f", &api.manifest("lease.yaml", LEASE)])
            .await;
        const DOCUMENTS: [&str; 4] = [
            "/registry/configmaps/team-a/settings",
            "/registry/secrets/team-a/token",
            "/registry/serviceaccounts/team-a/builder",
            "/registry/leases/team-a/lock",
        ];
        for key in DOCUMENTS {
            assert!(api.stored(key).await.is_some(), "{key} is stored");
        }
        eventually(CONVERGE, "2 pods in each namespace", || async {
            api.count("/registry/pods/team-a/").await == 2
                && api.count("/registry/pods/loose/").await == 2
        })
        .await;
        let names = kubectl
            .ok(&["get", "namespaces", "-o", "name"])
            .await;
        for name in ["default", "kube-system", "loose", "team-a"] {
            assert!(names.contains(&format!("namespace/{name}\n")), "{names}");
        }
        let phase = ["-o", "jsonpath={.status.phase}"];
        let get_team = ["get", "namespace", "team-a", phase[0], phase[1]];
        assert_eq!(kubectl.ok(&get_team).await, "Active");

        // Deleting it: Terminating while the held Service waits, everything else goes,
        // and nothing new may be created in it.
        let out = kubectl
            .ok(&["delete", "namespace", "team-a", "--wait=false"])
            .await;
        assert_eq!(out, "namespace \"team-a\" deleted\n");
        eventually(CONVERGE, "team-a emptied but for the held Service", || async {
            let mut emptied = api.count("/registry/pods/team-a/").await == 0
                && api.count("/registry/deployments/team-a/").await == 0
                && api.count("/registry/replicasets/team-a/").await == 0;
            for key in DOCUMENTS {
                emptied = emptied && api.stored(key).await.is_none();
            }
            emptied
        })
        .await;
        assert_eq!(kubectl.ok(&get_team).await, "Terminating");
        let held = api.stored("/registry/services/specs/team-a/held")
            .await
            .expect("the held Service waits for its finalizer");
        assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held:#}");
        let out = kubectl.run(&["apply", "-f", &deploy]).await;
        assert!(
            out.stderr.contains(
                "is forbidden: unable to create new content in namespace team-a because it is being terminated"
            ),
            "a create in a terminating namespace: {out:?}"
        );
        kubectl
            .ok(&[
                "patch", "service", "held", "-n", "team-a", "--type", "merge", "-p",
                r#"{"metadata":{"finalizers":null}}"#,
            ])
            .await;
        kubectl
            .ok(&["wait", "--for=delete", "namespace/team-a", "--timeout=30s"])
            .await;
        assert_eq!(api.stored(key).await, None);

        // A namespace that only held objects is emptied the same way, and then no
        // longer listed.
        kubectl.ok(&["delete", "namespace", "loose"]).await;
        assert_eq!(api.count("/registry/pods/loose/").await, 0);
        assert_eq!(api.count("/registry/deployments/loose/").await, 0);
        let names = kubectl
            .ok(&["get", "namespaces", "-o", "name"])
            .await;
        assert!(!names.contains("namespace/loose\n"), "{names}");

        let out = kubectl.run(&["delete", "namespace", "default"]).await;
        assert!(
            out.stderr
                .contains(r#"namespaces "default" is forbidden: this namespace may not be deleted"#),
            "{out:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_creates_gets_and_deletes_a_namespace() {
    with_timeout(LIMIT, async {
        let Some(api) = start_up(1).await else {
            return;
        };
        let namespaces: Api<Namespace> = Api::all(api.kube_client());
        let namespace: Namespace = serde_json::from_value(json!({
            "metadata": {"name": "from-rust"}
        }))
        .unwrap();
        let created = namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .expect("create");
        assert_eq!(
            created.status.and_then(|s| s.phase).as_deref(),
            Some("Active")
        );
        assert!(created.metadata.uid.is_some());
        let got = namespaces.get("from-rust").await.expect("get");
        assert_eq!(got.metadata.uid, created.metadata.uid);
        let deleted = namespaces
            .delete("from-rust", &DeleteParams::default())
            .await
            .expect("delete");
        let terminating = deleted.left().expect("the Namespace, Terminating");
        assert_eq!(
            terminating.status.and_then(|s| s.phase).as_deref(),
            Some("Terminating")
        );
        eventually(CONVERGE, "the empty namespace to go", || async {
            api.stored("/registry/namespaces/from-rust").await.is_none()
        })
        .await;
    })
    .await;
}

/// One replica of `app: solo` (api_writes' manifest).
use crate::support::kubectl::REPLICA_SET;

/// A pod bound to a node no kubelet runs: nobody stops it.
const GHOST_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: ghost
spec:
  nodeName: gone
  containers:
  - name: nginx
    image: nginx:1.25
";

/// The stored pods of `default`: name → (document, revision).
async fn pods(api: &crate::support::kubectl::Api) -> BTreeMap<String, (Value, i64)> {
    pod_documents(&api.etcd.client().await, "default").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_delete_is_graceful_its_kubelet_deletes_it_and_a_replacement_comes() {
    with_timeout(LIMIT, async {
        let Some(api) = start_up(1).await else {
            return;
        };
        let kubectl = &api.kubectl;
        kubectl
            .ok(&["apply", "-f", &api.manifest("rs.yaml", REPLICA_SET)])
            .await;
        let running = |pods: &BTreeMap<String, (Value, i64)>| -> Option<String> {
            pods.iter()
                .find(|(_, (pod, _))| pod.pointer("/status/phase") == Some(&json!("Running")))
                .map(|(name, _)| name.clone())
        };
        eventually(CONVERGE, "the ReplicaSet's pod Running", || async {
            running(&pods(&api).await).is_some()
        })
        .await;
        let first = running(&pods(&api).await).unwrap();

        // kubectl's body: the pod answers, marked with its grace period's deadline.
        let path = format!("/api/v1/namespaces/default/pods/{first}");
        let body = br#"{"propagationPolicy":"Background"}"#;
        let answer = http_request(api.port, "DELETE", &path, Some("application/json"), body).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        let pod = answer.json();
        assert_eq!(pod["kind"], "Pod");
        assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 30, "{pod:#}");
        assert!(pod["metadata"]["deletionTimestamp"].is_string(), "{pod:#}");
        // Its kubelet stops it and deletes it, long before the 30 s; the ReplicaSet
        // replaced it as soon as it was terminating.
        eventually(
            Duration::from_secs(10),
            "the kubelet to delete the pod",
            || async {
                let pods = pods(&api).await;
                !pods.contains_key(&first) && pods.len() == 1
            },
        )
        .await;

        // Nobody runs a pod bound to a node that is gone: Terminating (the server's
        // Table says so) until its grace period is over, then the collector deletes it.
        kubectl
            .ok(&["create", "-f", &api.manifest("ghost.yaml", GHOST_POD)])
            .await;
        kubectl
            .ok(&["delete", "pod", "ghost", "--grace-period=3", "--wait=false"])
            .await;
        let table = kubectl.table(&["get", "pod", "ghost"]).await;
        assert_eq!(table.cell("ghost", "STATUS"), "Terminating", "{table:?}");
        let ghost = api.stored("/registry/pods/default/ghost").await.unwrap();
        assert_eq!(ghost["metadata"]["deletionGracePeriodSeconds"], 3);
        kubectl
            .ok(&["wait", "--for=delete", "pod/ghost", "--timeout=20s"])
            .await;

        // --grace-period=0 --force: gone at once.
        kubectl
            .ok(&["create", "-f", &api.manifest("ghost.yaml", GHOST_POD)])
            .await;
        let out = kubectl
            .run(&[
                "delete",
                "pod",
                "ghost",
                "--grace-period=0",
                "--force",
                "--wait=false",
            ])
            .await;
        assert!(out.status.success(), "{out:?}");
        assert_eq!(api.stored("/registry/pods/default/ghost").await, None);
    })
    .await;
}

fn replica_set(replicas: u32) -> String {
    REPLICA_SET.replace("replicas: 1", &format!("replicas: {replicas}"))
}

/// Pods of `default` per node (`spec.host`), counting only bound ones.
async fn pods_per_node(api: &crate::support::kubectl::Api) -> BTreeMap<String, usize> {
    let mut per_node = BTreeMap::new();
    for (pod, _) in pods(api).await.values() {
        if let Some(host) = pod.pointer("/spec/host").and_then(Value::as_str) {
            *per_node.entry(host.to_string()).or_default() += 1;
        }
    }
    per_node
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_cordon_keeps_new_pods_off_a_node_and_a_deleted_node_comes_back() {
    with_timeout(LIMIT, async {
        let Some(api) = start_up(2).await else {
            return;
        };
        let kubectl = &api.kubectl;
        assert_eq!(
            kubectl.ok(&["cordon", "node-1"]).await,
            "node/node-1 cordoned\n"
        );
        let node = api.stored("/registry/nodes/node-1").await.unwrap();
        assert_eq!(node["spec"]["unschedulable"], true, "{node:#}");
        assert!(
            node["status"]["conditions"].is_array(),
            "the status is kept"
        );
        let table = kubectl.table(&["get", "node", "node-1"]).await;
        assert_eq!(table.cell("node-1", "STATUS"), "Ready,SchedulingDisabled");

        let rs = api.manifest("rs.yaml", &replica_set(4));
        kubectl.ok(&["apply", "-f", &rs]).await;
        eventually(CONVERGE, "4 pods bound", || async {
            pods_per_node(&api).await.values().sum::<usize>() == 4
        })
        .await;
        assert_eq!(
            pods_per_node(&api).await,
            BTreeMap::from([("node-2".to_string(), 4)]),
            "nothing new on the cordoned node"
        );

        assert_eq!(
            kubectl.ok(&["uncordon", "node-1"]).await,
            "node/node-1 uncordoned\n"
        );
        let node = api.stored("/registry/nodes/node-1").await.unwrap();
        assert!(node["spec"].get("unschedulable").is_none(), "{node:#}");
        kubectl
            .ok(&["apply", "-f", &api.manifest("rs.yaml", &replica_set(8))])
            .await;
        eventually(CONVERGE, "the new pods on node-1", || async {
            pods_per_node(&api).await.get("node-1") == Some(&4)
        })
        .await;

        // Its kubelet lives: it posts the Node again, a new one.
        let uid = api.stored("/registry/nodes/node-1").await.unwrap()["metadata"]["uid"].clone();
        assert_eq!(
            kubectl.ok(&["delete", "node", "node-1"]).await,
            "node \"node-1\" deleted\n"
        );
        eventually(
            CONVERGE,
            "node-1's kubelet to post its Node again",
            || async {
                api.stored("/registry/nodes/node-1")
                    .await
                    .is_some_and(|node| node["metadata"]["uid"] != uid)
            },
        )
        .await;
    })
    .await;
}

/// A create admitted by the namespaces' watch cache commits only while etcd's Namespace
/// is still the one the cache held: [`NAMESPACES`] times, a Namespace is marked
/// terminating directly in etcd (the apiserver's cache learns it from its watch, later)
/// while a pod is `POST`ed into it. Each such create is either 403 or committed before
/// the mark; and etcd's history holds no pod created in a namespace after its mark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_racing_its_namespaces_termination_never_lands_after_it() {
    const NAMESPACES: usize = 1_000;
    with_timeout(Duration::from_secs(300), async {
        let Some(api) = crate::support::kubectl::start_apiserver().await else {
            return;
        };
        let etcd = api.etcd.client().await;
        let post = |path: String, body: Value| async move {
            let body = body.to_string().into_bytes();
            http_request(api.port, "POST", &path, Some("application/json"), &body).await
        };
        let pod = |name: &str| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
        };
        let (mut refused, mut before_the_mark) = (0, 0);
        for i in 0..NAMESPACES {
            let ns = format!("race-{i}");
            let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns}});
            let created = post("/api/v1/namespaces".into(), namespace).await;
            assert_eq!(created.status, 201, "{}", created.body);
            let pods = format!("/api/v1/namespaces/{ns}/pods");
            let first = post(pods.clone(), pod("first")).await;
            assert_eq!(first.status, 201, "{}", first.body);

            let key = format!("/registry/namespaces/{ns}");
            let read = etcd.kv_client().get(key.as_str(), None).await.unwrap();
            let mut document: Value = serde_json::from_slice(read.kvs()[0].value()).unwrap();
            document["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            document["status"]["phase"] = json!("Terminating");
            let mut kv = etcd.kv_client();
            let mark = async move {
                let put = kv.put(key.as_str(), document.to_string(), None).await;
                put.unwrap().header().unwrap().revision()
            };
            let (marked_at, racing) = tokio::join!(mark, post(pods, pod("racing")));
            match racing.status {
                403 => {
                    assert!(racing.body.contains("being terminated"), "{}", racing.body);
                    refused += 1;
                }
                201 => {
                    let created: i64 = racing.json()["metadata"]["resourceVersion"]
                        .as_str()
                        .and_then(|rv| rv.parse().ok())
                        .expect("a resourceVersion");
                    assert!(
                        created < marked_at,
                        "a pod created in {ns} at {created}, after its Namespace was marked \
                         terminating at {marked_at}"
                    );
                    before_the_mark += 1;
                }
                other => panic!("a create racing the mark in {ns}: {other} {}", racing.body),
            }
        }
        eprintln!("{refused} racing creates refused, {before_the_mark} committed before the mark");
        assert_eq!(refused + before_the_mark, NAMESPACES);

        // The same from etcd's history: each namespace's mark, and no pod created after.
        let events = history::read(&etcd, "/registry/", "/registry0", 0, "/registry/~end").await;
        let mut marked: BTreeMap<String, i64> = BTreeMap::new();
        let mut checked = 0;
        for event in &events {
            if let Some(ns) = event.key.strip_prefix("/registry/namespaces/") {
                let document: Value = serde_json::from_slice(&event.value).unwrap_or_default();
                if event.put && kcm::api::is_terminating(&document) {
                    marked.entry(ns.to_string()).or_insert(event.revision);
                }
            } else if let Some(rest) = event.key.strip_prefix("/registry/pods/") {
                let ns = rest.split('/').next().unwrap_or_default();
                if event.put && event.create_revision == event.revision {
                    if let Some(mark) = marked.get(ns) {
                        panic!(
                            "{} created at {} after {ns} was marked at {mark}",
                            event.key, event.revision
                        );
                    }
                    checked += 1;
                }
            }
        }
        assert_eq!(marked.len(), NAMESPACES, "every namespace marked once");
        assert_eq!(
            checked,
            NAMESPACES + before_the_mark,
            "every pod created is in the history"
        );
    })
    .await;
}
