//! The scheduler as a client of kcm's apiserver (`kcm controller-manager --kubeconfig
//! --controllers ...,scheduler`), and the `pods/binding` subresource it binds through:
//! - `kubectl create --raw .../binding` binds an unassigned pod, and a second Binding is
//!   a 409 naming the node it is bound to (kube-apiserver's answer);
//! - the replication manager and the scheduler through the API keep 1,000 replicas on
//!   two `--no-claim` kubelets: every pod bound once (etcd's history: no pod's node ever
//!   changes), spread evenly, and Running on its node.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::support::history;
use crate::support::kcm::Kcm;
use crate::support::kubectl::start_apiserver;
use crate::support::objects::current_revision;
use crate::support::{eventually, with_timeout};

const PODS: &str = "/registry/pods/default/";

fn pod(name: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: nginx
    image: nginx:1.25
"
    )
}

fn binding(pod: &str, node: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Binding", "metadata": {{"name": "{pod}"}},
            "target": {{"apiVersion": "v1", "kind": "Node", "name": "{node}"}}}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_assigns_an_unassigned_pod_once() {
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(60), async {
        let file = api.manifest("pod.yaml", &pod("p"));
        api.kubectl.ok(&["create", "-f", &file]).await;
        let path = "/api/v1/namespaces/default/pods/p/binding";
        let first = api.manifest("binding.json", &binding("p", "n1"));
        let out = api
            .kubectl
            .ok(&["create", "--raw", path, "-f", &first])
            .await;
        assert!(out.contains("\"Success\""), "{out}");
        let stored = api.stored(&format!("{PODS}p")).await.expect("the pod");
        assert_eq!(stored["spec"]["host"], "n1", "{stored}");
        let served = api
            .kubectl
            .ok(&["get", "pod", "p", "-o", "jsonpath={.spec.nodeName}"])
            .await;
        assert_eq!(served.trim(), "n1");

        let second = api.manifest("binding2.json", &binding("p", "n2"));
        let refused = api
            .kubectl
            .run(&["create", "--raw", path, "-f", &second])
            .await;
        assert!(!refused.status.success(), "{refused:?}");
        assert!(
            refused
                .stderr
                .contains("pod p is already assigned to node \\\"n1\\\"")
                || refused
                    .stderr
                    .contains("pod p is already assigned to node \"n1\""),
            "{}",
            refused.stderr
        );
        let stored = api.stored(&format!("{PODS}p")).await.expect("the pod");
        assert_eq!(
            stored["spec"]["host"], "n1",
            "unchanged by the refused Binding"
        );

        let missing = api
            .kubectl
            .run(&[
                "create",
                "--raw",
                "/api/v1/namespaces/default/pods/nope/binding",
                "-f",
                &first,
            ])
            .await;
        assert!(!missing.status.success(), "{missing:?}");
        assert!(
            missing.stderr.contains("NotFound") || missing.stderr.contains("not found"),
            "{}",
            missing.stderr
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_through_the_api_binds_1000_pods_once_each_and_spreads_them() {
    const REPLICAS: usize = 1_000;
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(300), async {
        let etcd = api.etcd.client().await;
        let nodes: Vec<Kcm> = ["n1", "n2"]
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let cidr = format!("10.{}.0.0/21", i + 1);
                Kcm::spawn(
                    &[
                        "--etcd-servers",
                        &api.etcd_url(),
                        "kubelet",
                        "--node",
                        node,
                        "--pod-cidr",
                        &cidr,
                        "--max-pods",
                        "1000",
                        "--no-claim",
                    ],
                    &[],
                )
            })
            .collect();
        let kubeconfig = api.kubectl.kubeconfig().display().to_string();
        let mut manager = Kcm::start(
            &[
                "--kubeconfig",
                &kubeconfig,
                "--controllers",
                "replication,scheduler",
            ],
            &[],
        )
        .await;
        let start = current_revision(&etcd).await;
        let rc = format!(
            "apiVersion: v1
kind: ReplicationController
metadata:
  name: web
spec:
  replicas: {REPLICAS}
  selector: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
"
        );
        let file = api.manifest("rc.yaml", &rc);
        api.kubectl.ok(&["create", "-f", &file]).await;
        eventually(
            Duration::from_secs(240),
            "1,000 pods Running on their nodes",
            || async {
                let pods = api.documents(PODS).await;
                pods.len() == REPLICAS
                    && pods.iter().all(|p| {
                        p["status"]["phase"] == "Running"
                            && p["spec"]["host"].as_str().is_some_and(|h| !h.is_empty())
                    })
            },
        )
        .await;
        let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
        for pod in api.documents(PODS).await {
            *per_node
                .entry(pod["spec"]["host"].as_str().unwrap_or_default().to_string())
                .or_default() += 1;
        }
        assert_eq!(
            per_node,
            BTreeMap::from([("n1".to_string(), 500), ("n2".to_string(), 500)]),
            "spread evenly"
        );
        // etcd's history: no pod's node ever changes once set.
        let events =
            history::read(&etcd, "/registry/", "/registry0", start, "/registry/~end").await;
        let mut hosts: HashMap<String, String> = HashMap::new();
        for event in events.iter().filter(|e| e.put && e.key.starts_with(PODS)) {
            let pod: serde_json::Value = serde_json::from_slice(&event.value).expect("JSON");
            let Some(host) = pod["spec"]["host"].as_str().filter(|h| !h.is_empty()) else {
                continue;
            };
            let uid = pod["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if let Some(before) = hosts.insert(uid.clone(), host.to_string()) {
                assert_eq!(
                    before, host,
                    "pod {uid} moved at revision {}",
                    event.revision
                );
            }
        }
        assert_eq!(hosts.len(), REPLICAS, "every pod bound");
        eventually(Duration::from_secs(30), "Scheduled events", || async {
            api.documents("/registry/events/default/")
                .await
                .iter()
                .any(|e| e["reason"] == "Scheduled")
        })
        .await;
        manager.assert_running();
        drop(nodes);
    })
    .await;
}
