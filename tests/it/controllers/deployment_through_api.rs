//! The Deployment controller as a client of kcm's apiserver (`kcm controller-manager
//! --kubeconfig`, 2014's topology), driven by kubectl: `create`, `scale`, `set image`,
//! `rollout undo` and `rollout status`, on simulated kubelets; every outcome read from
//! etcd, and the rollout's surge and availability bounds checked at every revision of
//! etcd's history (D1-D3 of tests/it/controllers/deployment.rs), also with the apiserver
//! restarted mid-rollout at 1,000 replicas.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::deployment::{check_bounds, replay_of};
use crate::support::apiserver::{spawn_apiserver, wait_ready};
use crate::support::etcd::start_etcd;
use crate::support::kcm::Kcm;
use crate::support::kubectl::{kubectl_binary, start_apiserver, Kubectl};
use crate::support::objects::current_revision;
use crate::support::{eventually, free_port, with_timeout};

const NS: &str = "default";
const DEPLOYMENT: &str = "/registry/deployments/default/web";
const SETTLE: Duration = Duration::from_secs(90);

fn deployment(replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: web}}
  strategy:
    type: RollingUpdate
    rollingUpdate: {{maxSurge: 25%, maxUnavailable: 25%}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
"
    )
}

/// The ReplicaSet and Deployment controllers and the garbage collector through the API at
/// `kubeconfig`.
async fn controllers(kubeconfig: &str) -> Kcm {
    Kcm::start(
        &[
            "--kubeconfig",
            kubeconfig,
            "--controllers",
            "replicaset,deployment,garbagecollector",
            "--sync-period",
            "2s",
        ],
        &[],
    )
    .await
}

/// A simulated node on `etcd` whose pods run 50 ms after they are claimed and are Ready
/// 100 ms later.
fn kubelet(etcd: &str, node: &str, cidr: &str) -> Kcm {
    Kcm::spawn(
        &[
            "--etcd-servers",
            etcd,
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
}

/// The stored deployment `web`.
async fn stored(etcd: &etcd_client::Client) -> Option<Value> {
    let response = etcd.clone().get(DEPLOYMENT, None).await.expect("etcd get");
    response
        .kvs()
        .first()
        .map(|kv| serde_json::from_slice(kv.value()).expect("stored JSON"))
}

/// Whether `web`'s rollout completed at `replicas`: its status observed its generation and
/// says every replica updated and available.
async fn rolled_out(etcd: &etcd_client::Client, replicas: i64) -> bool {
    let Some(d) = stored(etcd).await else {
        return false;
    };
    let status = &d["status"];
    let field = |name: &str| status[name].as_i64().unwrap_or(0);
    status["observedGeneration"] == d["metadata"]["generation"]
        && field("replicas") == replicas
        && field("updatedReplicas") == replicas
        && field("availableReplicas") == replicas
}

/// `image → spec.replicas` of the ReplicaSets `uid` controls, with their names.
async fn replica_sets(
    api_etcd: &etcd_client::Client,
    uid: &str,
) -> BTreeMap<String, (String, i64)> {
    let prefix = format!("/registry/replicasets/{NS}/");
    let options = etcd_client::GetOptions::new().with_prefix();
    let response = api_etcd
        .clone()
        .get(prefix.as_str(), Some(options))
        .await
        .expect("etcd list");
    response
        .kvs()
        .iter()
        .map(|kv| serde_json::from_slice::<Value>(kv.value()).expect("stored JSON"))
        .filter(|rs| {
            rs["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| r["uid"] == uid && r["controller"] == true)
        })
        .map(|rs| {
            let image = rs["spec"]["template"]["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let name = rs["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            (image, (name, rs["spec"]["replicas"].as_i64().unwrap_or(1)))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drives_a_deployment_through_the_api() {
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(300), async {
        let etcd = api.etcd.client().await;
        let _node = kubelet(&api.etcd_url(), "n1", "10.1.0.0/21");
        let kubeconfig = api.kubectl.kubeconfig().display().to_string();
        let mut manager = controllers(&kubeconfig).await;
        let file = api.manifest("deployment.yaml", &deployment(10));
        api.kubectl.ok(&["create", "-f", &file]).await;
        eventually(SETTLE, "10 replicas rolled out", || rolled_out(&etcd, 10)).await;
        let uid = stored(&etcd).await.expect("the deployment")["metadata"]["uid"]
            .as_str()
            .expect("a uid")
            .to_string();
        let first = replica_sets(&etcd, &uid).await;
        assert_eq!(first.len(), 1, "{first:?}");
        let (first_name, _) = first["nginx:1.25"].clone();

        api.kubectl
            .ok(&["scale", "deployment", "web", "--replicas=12"])
            .await;
        eventually(SETTLE, "12 replicas after kubectl scale", || {
            rolled_out(&etcd, 12)
        })
        .await;

        // set image: a new ReplicaSet, the old one scaled to 0, within 12 + 3 active and
        // 12 - 3 Ready at every revision.
        let start = current_revision(&etcd).await;
        api.kubectl
            .ok(&["set", "image", "deployment/web", "nginx=nginx:1.26"])
            .await;
        eventually(SETTLE, "nginx:1.26 rolled out", || async {
            rolled_out(&etcd, 12).await
                && replica_sets(&etcd, &uid)
                    .await
                    .get("nginx:1.26")
                    .map(|(_, n)| *n)
                    == Some(12)
        })
        .await;
        let sets = replica_sets(&etcd, &uid).await;
        assert_eq!(sets["nginx:1.25"], (first_name.clone(), 0), "{sets:?}");
        let counts = replay_of(&etcd, start, NS, &uid).await;
        check_bounds(&counts, 15, 9);
        assert!(counts.iter().any(|c| c.active > 12), "the rollout surged");
        let out = api
            .kubectl
            .ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
            .await;
        assert!(out.contains("successfully rolled out"), "{out}");

        // rollout undo: back to the first template, in the first ReplicaSet (same name),
        // as revision 3, within the same bounds.
        let start = current_revision(&etcd).await;
        api.kubectl.ok(&["rollout", "undo", "deployment/web"]).await;
        eventually(SETTLE, "nginx:1.25 rolled out again", || async {
            rolled_out(&etcd, 12).await
                && replica_sets(&etcd, &uid)
                    .await
                    .get("nginx:1.25")
                    .map(|(_, n)| *n)
                    == Some(12)
        })
        .await;
        let sets = replica_sets(&etcd, &uid).await;
        assert_eq!(sets["nginx:1.25"], (first_name, 12), "{sets:?}");
        assert_eq!(sets["nginx:1.26"].1, 0, "{sets:?}");
        let d = stored(&etcd).await.expect("the deployment");
        assert_eq!(
            d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
            "3"
        );
        check_bounds(&replay_of(&etcd, start, NS, &uid).await, 15, 9);
        let history = api
            .kubectl
            .ok(&["rollout", "history", "deployment/web"])
            .await;
        assert!(history.contains('2') && history.contains('3'), "{history}");

        // Its events, written through the API.
        eventually(SETTLE, "ScalingReplicaSet events", || async {
            api.documents("/registry/events/default/")
                .await
                .iter()
                .any(|e| e["reason"] == "ScalingReplicaSet")
        })
        .await;
        // kubectl delete: a background cascade, carried out by the garbage collector
        // through the API: the ReplicaSets go, then their pods.
        api.kubectl.ok(&["delete", "deployment", "web"]).await;
        eventually(SETTLE, "no ReplicaSet and no pod left", || async {
            api.count("/registry/replicasets/default/").await == 0
                && api.count("/registry/pods/default/").await == 0
        })
        .await;
        manager.assert_running();
        assert!(
            manager.log().contains("through the API"),
            "{}",
            manager.log()
        );
    })
    .await;
}

/// At 1,000 replicas, with the apiserver restarted while `set image` rolls out (every
/// watch of the controllers cut and resumed): the rollout completes, and at every
/// revision of etcd's history Σ spec and active pods ≤ 1,250 and Ready ≥ 750.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_of_1000_through_a_restarted_apiserver_keeps_the_bounds() {
    let Some(binary) = kubectl_binary() else {
        return;
    };
    let Some(etcd_server) = start_etcd().await else {
        return;
    };
    with_timeout(Duration::from_secs(420), async {
        let kubectl = Kubectl::new(binary);
        let port = free_port();
        let mut apiserver = spawn_apiserver(&etcd_server.endpoint(), port, &[]);
        wait_ready(&mut apiserver, port).await;
        kubectl.write_kubeconfig(&format!("http://127.0.0.1:{port}"));
        let etcd = etcd_server.client().await;
        let _nodes = [
            kubelet(&etcd_server.endpoint(), "n1", "10.1.0.0/21"),
            kubelet(&etcd_server.endpoint(), "n2", "10.2.0.0/21"),
        ];
        let kubeconfig = kubectl.kubeconfig().display().to_string();
        let mut manager = controllers(&kubeconfig).await;
        let file = kubectl.kubeconfig().with_file_name("deployment.yaml");
        std::fs::write(&file, deployment(1000)).expect("write the manifest");
        kubectl
            .ok(&["create", "-f", &file.display().to_string()])
            .await;
        let settle = Duration::from_secs(240);
        eventually(settle, "1,000 replicas rolled out", || {
            rolled_out(&etcd, 1000)
        })
        .await;
        let uid = stored(&etcd).await.expect("the deployment")["metadata"]["uid"]
            .as_str()
            .expect("a uid")
            .to_string();

        let start = current_revision(&etcd).await;
        kubectl
            .ok(&["set", "image", "deployment/web", "nginx=nginx:1.26"])
            .await;
        eventually(settle, "the new ReplicaSet past 300", || async {
            replica_sets(&etcd, &uid)
                .await
                .get("nginx:1.26")
                .is_some_and(|(_, n)| *n >= 300)
        })
        .await;
        apiserver.terminate().await;
        let mut apiserver = spawn_apiserver(&etcd_server.endpoint(), port, &[]);
        wait_ready(&mut apiserver, port).await;
        eventually(settle, "nginx:1.26 rolled out", || async {
            rolled_out(&etcd, 1000).await
                && replica_sets(&etcd, &uid)
                    .await
                    .get("nginx:1.26")
                    .map(|(_, n)| *n)
                    == Some(1000)
        })
        .await;
        let counts = replay_of(&etcd, start, NS, &uid).await;
        assert!(counts.len() > 2000, "{} revisions", counts.len());
        check_bounds(&counts, 1250, 750);
        assert!(counts.iter().any(|c| c.active > 1000), "the rollout surged");
        manager.assert_running();
        apiserver.assert_running();
    })
    .await;
}
