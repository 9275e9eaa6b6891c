//! `kubectl rollout pause|resume|restart` against `kcm up`'s running Deployment controller
//! (issue 23): each is a strategic merge patch of the Deployment (kubernetes-api.md §4.8:
//! `{"spec":{"paused":true}}`, `{"spec":{"paused":null}}`, the template's
//! `kubectl.kubernetes.io/restartedAt` annotation). A paused Deployment takes a new template
//! and makes no ReplicaSet for it; resumed, it rolls the template out; restarted, it rolls
//! out a new ReplicaSet whose pods carry the annotation.
//!
//! Outcomes are read from etcd (the Deployment, its ReplicaSets, the pods).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::support::kubectl::{start_up, Api};
use crate::support::objects::pod_documents;
use crate::support::{eventually, with_timeout};

const LIMIT: Duration = Duration::from_secs(150);
const CONVERGE: Duration = Duration::from_secs(40);
const DEPLOYMENT_KEY: &str = "/registry/deployments/default/app";
const RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
spec:
  replicas: 2
  selector:
    matchLabels: {app: app}
  template:
    metadata:
      labels: {app: app}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
";

/// A ReplicaSet as stored: its image, `spec.replicas` and the template's restartedAt
/// annotation.
#[derive(Clone, Debug, PartialEq, Eq)]
struct StoredReplicaSet {
    image: String,
    replicas: i64,
    restarted_at: Option<String>,
}

/// The ReplicaSets of `default`, by name.
async fn replica_sets(api: &Api) -> BTreeMap<String, StoredReplicaSet> {
    api.documents("/registry/replicasets/default/")
        .await
        .into_iter()
        .map(|rs| {
            let template = &rs["spec"]["template"];
            let name = rs["metadata"]["name"].as_str().expect("a name").to_string();
            let stored = StoredReplicaSet {
                image: template["spec"]["containers"][0]["image"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                replicas: rs["spec"]["replicas"].as_i64().unwrap_or(1),
                restarted_at: template["metadata"]["annotations"][RESTARTED_AT]
                    .as_str()
                    .map(str::to_string),
            };
            (name, stored)
        })
        .collect()
}

/// The stored Deployment.
async fn deployment(api: &Api) -> Value {
    api.stored(DEPLOYMENT_KEY).await.expect("the Deployment")
}

/// `kubectl rollout status deploy/app`, which must succeed.
async fn rolled_out(api: &Api) {
    let out = api
        .kubectl
        .ok(&["rollout", "status", "deploy/app", "--timeout=60s"])
        .await;
    assert!(
        out.ends_with("deployment \"app\" successfully rolled out\n"),
        "{out}"
    );
}

/// The one ReplicaSet holding replicas, which every pod of `app` runs; the others are at
/// 0.
async fn only_scaled_replica_set(api: &Api) -> (String, StoredReplicaSet) {
    let sets = replica_sets(api).await;
    let scaled: Vec<_> = sets.iter().filter(|(_, rs)| rs.replicas > 0).collect();
    assert_eq!(scaled.len(), 1, "one ReplicaSet holds replicas: {sets:?}");
    let (name, rs) = scaled[0];
    assert_eq!(rs.replicas, 2, "{sets:?}");
    (name.clone(), rs.clone())
}

/// The stored pods labelled `app: app`.
async fn app_pods(api: &Api) -> Vec<Value> {
    pod_documents(&api.etcd.client().await, "default")
        .await
        .into_values()
        .map(|(pod, _)| pod)
        .filter(|pod| pod["metadata"]["labels"]["app"] == "app")
        .collect()
}

/// Whether `app`'s pods are exactly 2, all Running with `image`.
async fn pods_run(api: &Api, image: &str) -> bool {
    let app = app_pods(api).await;
    app.len() == 2
        && app.iter().all(|pod| {
            pod["status"]["phase"] == "Running"
                && pod["metadata"]["deletionTimestamp"].is_null()
                && pod.to_string().contains(&format!("\"{image}\""))
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_rollout_pause_resume_and_restart_drive_the_deployment_controller() {
    with_timeout(LIMIT, async {
        let Some(api) = start_up(2).await else {
            return;
        };
        let kubectl = &api.kubectl;
        let manifest = api.manifest("deploy.yaml", DEPLOYMENT);
        kubectl.ok(&["apply", "-f", &manifest]).await;
        rolled_out(&api).await;
        let (first, first_rs) = only_scaled_replica_set(&api).await;
        assert_eq!(first_rs.image, "nginx:1.25");

        // Paused: the new template is stored and observed, and no ReplicaSet is made.
        assert_eq!(
            kubectl.ok(&["rollout", "pause", "deploy/app"]).await,
            "deployment.apps/app paused\n"
        );
        assert_eq!(deployment(&api).await["spec"]["paused"], true);
        assert_eq!(
            kubectl
                .ok(&["set", "image", "deploy/app", "nginx=nginx:1.26"])
                .await,
            "deployment.apps/app image updated\n"
        );
        let generation = deployment(&api).await["metadata"]["generation"].clone();
        eventually(
            CONVERGE,
            "the controller to observe the paused change",
            || async { deployment(&api).await["status"]["observedGeneration"] == generation },
        )
        .await;
        let progressing = kubectl
            .ok(&[
                "get",
                "deploy/app",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Progressing\")].reason}",
            ])
            .await;
        assert_eq!(progressing, "DeploymentPaused");
        let sets = replica_sets(&api).await;
        assert_eq!(sets.len(), 1, "no new ReplicaSet while paused: {sets:?}");
        assert_eq!(sets[&first], first_rs, "the old one untouched");
        assert!(pods_run(&api, "nginx:1.25").await, "the old pods run");

        // Resumed: the template rolls out.
        assert_eq!(
            kubectl.ok(&["rollout", "resume", "deploy/app"]).await,
            "deployment.apps/app resumed\n"
        );
        let resumed = deployment(&api).await;
        assert!(resumed["spec"].get("paused").is_none(), "{resumed:#}");
        rolled_out(&api).await;
        let (second, second_rs) = only_scaled_replica_set(&api).await;
        assert_ne!(second, first);
        assert_eq!(second_rs.image, "nginx:1.26");
        eventually(CONVERGE, "2 pods of nginx:1.26 only", || async {
            pods_run(&api, "nginx:1.26").await
        })
        .await;

        // Restarted: the template's annotation, and a new ReplicaSet rolled out.
        assert_eq!(
            kubectl.ok(&["rollout", "restart", "deploy/app"]).await,
            "deployment.apps/app restarted\n"
        );
        let restarted = deployment(&api).await;
        let at = restarted["spec"]["template"]["metadata"]["annotations"][RESTARTED_AT]
            .as_str()
            .unwrap_or_else(|| panic!("no {RESTARTED_AT}: {restarted:#}"))
            .to_string();
        // RFC 3339 (`2025-01-02T03:04:05Z`, or with the local offset).
        assert!(
            at.len() >= 20 && at.as_bytes()[4] == b'-' && at.as_bytes()[10] == b'T',
            "{at:?} is RFC 3339"
        );
        rolled_out(&api).await;
        let (third, third_rs) = only_scaled_replica_set(&api).await;
        assert!(![&first, &second].contains(&&third), "a new ReplicaSet");
        assert_eq!(
            third_rs,
            StoredReplicaSet {
                image: "nginx:1.26".into(),
                replicas: 2,
                restarted_at: Some(at.clone()),
            }
        );
        assert_eq!(replica_sets(&api).await.len(), 3);
        eventually(
            CONVERGE,
            "the restarted pods to replace the others",
            || async {
                let app = app_pods(&api).await;
                app.len() == 2
                    && app
                        .iter()
                        .all(|pod| pod["metadata"]["annotations"][RESTARTED_AT] == at.as_str())
            },
        )
        .await;
    })
    .await;
}
