//! The late-2014 replication manager (`kcm controller-manager --controllers
//! replication-2014,-replication`, `src/replication_2014.rs`) against a real etcd: it
//! converges a controller with UUID-named pods and never writes the controller, and it
//! shows weakness 10 of docs/2014.md (a deleted controller is synced at its last state, so one
//! deleted while short of pods gets pods created after its delete), counted from etcd's
//! own history.

use std::time::Duration;

use etcd_client::{Txn, TxnOp};

use crate::support::history;
use crate::support::kcm::{start_manager, Kcm};
use crate::support::objects::{controller_key, pod_key, pods, put_controller};
use crate::support::{eventually, start_etcd, with_timeout, EtcdServer};

const LIMIT: Duration = Duration::from_secs(60);
const SETTLE: Duration = Duration::from_secs(30);

/// The 2014 loop alone, with a one-second tick.
async fn manager_2014(etcd: &EtcdServer) -> Kcm {
    let args = [
        "--controllers",
        "replication-2014,-replication",
        "--sync-period",
        "1s",
    ];
    start_manager(&etcd.endpoint(), &args).await
}

/// Waits until `namespace` holds exactly `n` pods.
async fn wait_pods(client: &etcd_client::Client, namespace: &str, n: usize) {
    eventually(SETTLE, &format!("{n} pods in {namespace}"), || async {
        pods(client, namespace).await.len() == n
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_2014_loop_converges_a_controller_with_uuid_pod_names_and_never_writes_it() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let _manager = manager_2014(&etcd).await;
        put_controller(&client, "lab", "web", "web", 3).await;
        let written = client
            .clone()
            .get(controller_key("lab", "web"), None)
            .await
            .unwrap()
            .kvs()[0]
            .mod_revision();
        wait_pods(&client, "lab", 3).await;
        for (name, pod) in pods(&client, "lab").await {
            uuid::Uuid::parse_str(&name)
                .unwrap_or_else(|e| panic!("pod {name} is named with a UUID: {e}"));
            assert_eq!(
                pod.labels["app"], "web",
                "{name} carries the template's labels"
            );
            assert!(
                pod.created_by.is_empty(),
                "2014 pods carry no created-by: {pod:?}"
            );
        }
        // Scaled down: two pods go, and the controller is still as the test wrote it.
        crate::support::objects::scale(&client, "lab", "web", 1).await;
        wait_pods(&client, "lab", 1).await;
        let scaled = client
            .clone()
            .get(controller_key("lab", "web"), None)
            .await
            .unwrap()
            .kvs()[0]
            .mod_revision();
        assert!(scaled > written);
        let after = history::read(
            &client,
            "/registry/",
            "/registry0",
            scaled,
            "/registry/pods~end",
        )
        .await;
        assert!(
            after
                .iter()
                .all(|e| !e.key.starts_with("/registry/controllers/")),
            "the 2014 loop never writes a controller: {after:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_deleted_short_of_pods_gets_a_pod_after_its_delete() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let _manager = manager_2014(&etcd).await;
        put_controller(&client, "lab", "web", "web", 3).await;
        wait_pods(&client, "lab", 3).await;

        // One pod and the controller go in one transaction: the controller's last state
        // wants 3 and only 2 are left.
        let victim = pods(&client, "lab").await.into_keys().next().unwrap();
        let response = client
            .kv_client()
            .txn(Txn::new().and_then([
                TxnOp::delete(pod_key("lab", &victim), None),
                TxnOp::delete(controller_key("lab", "web"), None),
            ]))
            .await
            .unwrap();
        let deleted_at = response.header().unwrap().revision();

        // The DELETED event syncs the controller at its last state: a pod is created for
        // a controller that no longer exists (weakness 10, docs/2014.md).
        wait_pods(&client, "lab", 3).await;
        let events = history::read(
            &client,
            "/registry/",
            "/registry0",
            deleted_at,
            "/registry/pods~end",
        )
        .await;
        let creates: Vec<_> = events
            .iter()
            .filter(|e| {
                e.put && e.create_revision == e.revision && e.key.starts_with("/registry/pods/lab/")
            })
            .collect();
        assert_eq!(
            creates.len(),
            1,
            "one pod created after the delete: {creates:?}"
        );
    })
    .await;
}
