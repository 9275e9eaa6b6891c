//! A real controller framework on kcm's API: kube-runtime's `Controller` (its reflector's
//! list and watch, its work queue, its reconciler) keeps every Deployment of `default`
//! labelled `reconciled-by: kube-runtime` and at two replicas at least, written through
//! kcm (a merge patch of the object, a merge patch of its `scale` subresource). What the
//! controller achieved is read from etcd, never through the API.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::ResourceExt as _;
use serde_json::{json, Value};

use crate::support::apiserver::apiserver;
use crate::support::{eventually, start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(120);
const CONVERGE: Duration = Duration::from_secs(30);
const LABEL: &str = "reconciled-by";
const MIN_REPLICAS: i32 = 2;

/// What the reconciler shares: the API it writes through and how often it ran.
struct Context {
    deployments: Api<Deployment>,
    reconciles: AtomicUsize,
}

/// Labels the deployment and raises it to [`MIN_REPLICAS`]; writes nothing when both hold
/// (a level-triggered reconciler: the watch event that follows its own write finds
/// nothing to do).
async fn reconcile(deployment: Arc<Deployment>, context: Arc<Context>) -> kube::Result<Action> {
    context.reconciles.fetch_add(1, Ordering::Relaxed);
    let name = deployment.name_any();
    if deployment.labels().get(LABEL).map(String::as_str) != Some("kube-runtime") {
        let patch = json!({"metadata": {"labels": {LABEL: "kube-runtime"}}});
        context
            .deployments
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    let replicas = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    if replicas < MIN_REPLICAS {
        let patch = json!({"spec": {"replicas": MIN_REPLICAS}});
        context
            .deployments
            .patch_scale(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Deployment>, error: &kube::Error, _: Arc<Context>) -> Action {
    eprintln!("reconcile failed: {error}");
    Action::requeue(Duration::from_millis(200))
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": replicas,
                 "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kube_runtime_controller_reconciles_deployments_through_kcm() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (_kcm, port) = apiserver(&etcd, &[]).await;
        let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
        let client = kube::Client::try_from(config).expect("a kube client");
        let deployments: Api<Deployment> = Api::namespaced(client, "default");
        let etcd_client = etcd.client().await;
        let stored = |name: &str| {
            let key = format!("/registry/deployments/default/{name}");
            let mut etcd_client = etcd_client.clone();
            async move {
                let response = etcd_client.get(key, None).await.expect("etcd get");
                response
                    .kvs()
                    .first()
                    .map(|kv| serde_json::from_slice::<Value>(kv.value()).expect("JSON"))
            }
        };
        let reconciled = |name: &'static str, replicas: i64| {
            let stored = &stored;
            async move {
                eventually(CONVERGE, &format!("{name} reconciled in etcd"), || async {
                    stored(name).await.is_some_and(|d| {
                        d["metadata"]["labels"][LABEL] == "kube-runtime"
                            && d["spec"]["replicas"] == replicas
                    })
                })
                .await;
            }
        };

        // One deployment before the controller starts (its initial list), one after (its
        // watch).
        let post = PostParams::default();
        deployments
            .create(&post, &deployment("early", 1))
            .await
            .unwrap();
        let context = Arc::new(Context {
            deployments: deployments.clone(),
            reconciles: AtomicUsize::new(0),
        });
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let controller = tokio::spawn(
            Controller::new(deployments.clone(), watcher::Config::default())
                .graceful_shutdown_on(async {
                    let _ = stop_rx.await;
                })
                .run(reconcile, error_policy, Arc::clone(&context))
                .for_each(|_| async {}),
        );
        reconciled("early", 2).await;
        deployments
            .create(&post, &deployment("late", 5))
            .await
            .unwrap();
        reconciled("late", 5).await;

        // Someone takes the label off and scales to 0: the watch brings it back.
        let undo = json!({"metadata": {"labels": {LABEL: null}}, "spec": {"replicas": 0}});
        deployments
            .patch("early", &PatchParams::default(), &Patch::Merge(&undo))
            .await
            .unwrap();
        reconciled("early", 2).await;
        assert!(context.reconciles.load(Ordering::Relaxed) >= 3);

        stop_tx.send(()).unwrap();
        controller
            .await
            .expect("the controller stops on its shutdown signal");
    })
    .await;
}
