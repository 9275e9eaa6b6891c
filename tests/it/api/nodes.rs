//! Issue 23's node writes against a real `kcm kubelet` process that claims pods itself (no
//! scheduler: a bare `kcm apiserver` and the kubelet, over one test etcd): `kubectl
//! cordon` stops its claims (its pods keep running, new pods stay unassigned) and `kubectl
//! uncordon` lets it claim again; `kubectl delete node` of the live kubelet's Node brings
//! it back within seconds, with a new uid, while the kubelet keeps its registration and
//! its pods.
//!
//! Outcomes are read from etcd (`{prefix}/nodes/node-1`, the pods, the registration at
//! `{prefix}/minions/node-1`), not through the API.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::support::kcm::{spawn_kubelet, Kcm};
use crate::support::kubectl::{start_apiserver, Api};
use crate::support::objects::pod_documents;
use crate::support::{eventually, with_timeout};

const LIMIT: Duration = Duration::from_secs(120);
const CONVERGE: Duration = Duration::from_secs(30);
const NODE_KEY: &str = "/registry/nodes/node-1";
const REGISTRATION_KEY: &str = "/registry/minions/node-1";

/// An unassigned pod named `name`.
fn pod(name: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: solo}}
spec:
  containers:
  - name: nginx
    image: nginx:1.25
"
    )
}

/// The stored pods of `default`: name → (document, revision).
async fn pods(api: &Api) -> BTreeMap<String, (Value, i64)> {
    pod_documents(&api.etcd.client().await, "default").await
}

/// Whether pod `name` is stored Running on `node-1`.
fn running_on_node_1(pods: &BTreeMap<String, (Value, i64)>, name: &str) -> bool {
    pods.get(name).is_some_and(|(pod, _)| {
        pod["spec"]["host"] == "node-1" && pod["status"]["phase"] == "Running"
    })
}

/// Creates the pods `names` with kubectl.
async fn create_pods(api: &Api, names: &[&str]) {
    for name in names {
        let manifest = api.manifest(&format!("{name}.yaml"), &pod(name));
        assert_eq!(
            api.kubectl.ok(&["create", "-f", &manifest]).await,
            format!("pod/{name} created\n")
        );
    }
}

/// The registration's create revision (`None` when absent).
async fn registration_revision(api: &Api) -> Option<i64> {
    let mut client = api.etcd.client().await;
    let response = client.get(REGISTRATION_KEY, None).await.expect("etcd get");
    response.kvs().first().map(|kv| kv.create_revision())
}

/// A bare API and a claiming `kcm kubelet --node node-1` whose Node is posted, with the
/// pods `names` created and Running on it. `None` when kubectl or etcd is missing.
async fn api_and_kubelet(names: &[&str]) -> Option<(Api, Kcm)> {
    let api = start_apiserver().await?;
    let kubelet = spawn_kubelet(&api.etcd_url(), "node-1", "100ms");
    eventually(CONVERGE, "the kubelet to post its Node", || async {
        api.stored(NODE_KEY).await.is_some()
    })
    .await;
    create_pods(&api, names).await;
    eventually(
        CONVERGE,
        "the kubelet to claim and run the pods",
        || async {
            let pods = pods(&api).await;
            names.iter().all(|name| running_on_node_1(&pods, name))
        },
    )
    .await;
    Some((api, kubelet))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cordoned_kubelet_claims_no_new_pod_until_uncordoned() {
    with_timeout(LIMIT, async {
        let Some((api, mut kubelet)) = api_and_kubelet(&["keep", "barrier"]).await else {
            return;
        };
        let kubectl = &api.kubectl;
        let before = pods(&api).await;

        assert_eq!(
            kubectl.ok(&["cordon", "node-1"]).await,
            "node/node-1 cordoned\n"
        );
        assert_eq!(
            api.stored(NODE_KEY).await.unwrap()["spec"]["unschedulable"],
            true
        );
        eventually(CONVERGE, "the kubelet to see the cordon", || async {
            kubelet.log().contains("node cordoned")
        })
        .await;
        create_pods(&api, &["new-1", "new-2"]).await;
        // A barrier: the kubelet handles its pods' events in order, so once it has
        // stopped and deleted `barrier` (marked after the new pods were created), it has
        // seen the new pods and would have claimed them by now.
        kubectl
            .ok(&["delete", "pod", "barrier", "--wait=false"])
            .await;
        eventually(
            CONVERGE,
            "the kubelet to delete the barrier pod",
            || async { !pods(&api).await.contains_key("barrier") },
        )
        .await;
        let during = pods(&api).await;
        for name in ["new-1", "new-2"] {
            let (pod, _) = &during[name];
            assert_eq!(pod["spec"]["host"].as_str().unwrap_or(""), "", "{pod:#}");
            assert!(
                matches!(pod["status"]["phase"].as_str(), None | Some("Pending")),
                "{pod:#}"
            );
        }
        assert_eq!(
            during["keep"], before["keep"],
            "the pod it runs is not touched"
        );
        let table = kubectl.table(&["get", "pods"]).await;
        assert_eq!(table.cell("new-1", "STATUS"), "Pending", "{table:?}");
        assert_eq!(table.cell("keep", "STATUS"), "Running", "{table:?}");

        assert_eq!(
            kubectl.ok(&["uncordon", "node-1"]).await,
            "node/node-1 uncordoned\n"
        );
        eventually(
            CONVERGE,
            "the kubelet to claim and run the new pods",
            || async {
                let pods = pods(&api).await;
                running_on_node_1(&pods, "new-1") && running_on_node_1(&pods, "new-2")
            },
        )
        .await;
        assert!(kubelet
            .log()
            .contains("node uncordoned: claiming pods again"));
        kubelet.assert_running();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_kubelets_deleted_node_comes_back_with_a_new_uid() {
    with_timeout(LIMIT, async {
        let Some((api, mut kubelet)) = api_and_kubelet(&["web"]).await else {
            return;
        };
        let kubectl = &api.kubectl;
        let node = api.stored(NODE_KEY).await.unwrap();
        let uid = node["metadata"]["uid"].as_str().unwrap().to_string();
        let registered = registration_revision(&api).await;
        assert!(registered.is_some(), "the kubelet is registered");
        let before = pods(&api).await;

        assert_eq!(
            kubectl.ok(&["delete", "node", "node-1"]).await,
            "node \"node-1\" deleted\n"
        );
        // Well within the registration's 10 s lease: the kubelet posts it again because
        // it saw the delete, not because it registered again.
        eventually(
            Duration::from_secs(5),
            "the Node to be posted again",
            || async {
                api.stored(NODE_KEY)
                    .await
                    .is_some_and(|node| node["metadata"]["uid"] != uid.as_str())
            },
        )
        .await;
        let node = api.stored(NODE_KEY).await.unwrap();
        assert!(
            node["metadata"]["uid"]
                .as_str()
                .is_some_and(|new| !new.is_empty()),
            "{node:#}"
        );
        assert_eq!(
            registration_revision(&api).await,
            registered,
            "the same registration"
        );
        let table = kubectl.table(&["get", "node", "node-1"]).await;
        assert_eq!(table.cell("node-1", "STATUS"), "Ready", "{table:?}");
        assert_eq!(pods(&api).await, before, "its pods are not touched");
        assert!(
            kubelet
                .log()
                .contains("Node deleted while this kubelet runs; posting it again"),
            "{}",
            kubelet.log()
        );
        kubelet.assert_running();
    })
    .await;
}

/// A Node applied to through the API (so it carries entries) that its kubelet posts
/// again, after registering again: the kubelet's write is recorded as `kcm-kubelet`'s,
/// through `status`, and the apply's entry stays.
const ZONE_A: &str = "apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels: {zone: a}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubelets_post_of_a_node_made_through_the_api_is_recorded_as_its_own() {
    with_timeout(LIMIT, async {
        let Some((api, mut kubelet)) = api_and_kubelet(&[]).await else {
            return;
        };
        let labels = api.manifest("zone.yaml", ZONE_A);
        api.kubectl
            .ok(&["apply", "--server-side", "-f", &labels])
            .await;
        let managers = |node: &Value| -> Vec<(String, String)> {
            node["metadata"]["managedFields"]
                .as_array()
                .map(|entries| {
                    entries
                        .iter()
                        .map(|e| {
                            let text = |field: &str| e[field].as_str().unwrap_or("").to_string();
                            (text("manager"), text("subresource"))
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let labelled = api.stored(NODE_KEY).await.unwrap();
        assert_eq!(
            managers(&labelled),
            [("kubectl".to_string(), String::new())]
        );

        // Its registration gone, the kubelet registers again and posts its Node.
        let mut client = api.etcd.client().await;
        client.delete(REGISTRATION_KEY, None).await.unwrap();
        let kubelets = ("kcm-kubelet".to_string(), "status".to_string());
        eventually(CONVERGE, "the kubelet's post recorded", || async {
            api.stored(NODE_KEY)
                .await
                .is_some_and(|node| managers(&node).contains(&kubelets))
        })
        .await;
        let node = api.stored(NODE_KEY).await.unwrap();
        assert_eq!(node["metadata"]["labels"]["zone"], "a", "{node:#}");
        assert_eq!(node["metadata"]["uid"], labelled["metadata"]["uid"]);
        assert!(managers(&node).contains(&("kubectl".to_string(), String::new())));
        kubelet.assert_running();
    })
    .await;
}
