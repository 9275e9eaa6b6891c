//! The namespace controller as a client of kcm's apiserver (`kcm controller-manager
//! --kubeconfig --controllers replication,namespace`): `kubectl delete namespace` of a
//! namespace holding a replication controller with 300 pods, a ConfigMap and events
//! empties it through the API (discovery, `DELETE`s at the resourceVersion listed,
//! `namespaces/{name}/finalize`) and the Namespace goes; nothing is left under it in
//! etcd, and nothing was created in it after its deletion was asked (etcd's history).

use std::time::Duration;

use crate::support::history;
use crate::support::kcm::Kcm;
use crate::support::kubectl::start_apiserver;
use crate::support::objects::current_revision;
use crate::support::{eventually, with_timeout};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_namespace_is_carried_out_through_the_api() {
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(240), async {
        let etcd = api.etcd.client().await;
        let kubeconfig = api.kubectl.kubeconfig().display().to_string();
        let mut manager = Kcm::start(
            &[
                "--kubeconfig",
                &kubeconfig,
                "--controllers",
                "replication,namespace",
            ],
            &[],
        )
        .await;
        api.kubectl.ok(&["create", "namespace", "doomed"]).await;
        let rc = "apiVersion: v1
kind: ReplicationController
metadata:
  name: web
  namespace: doomed
spec:
  replicas: 300
  selector: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
";
        let file = api.manifest("rc.yaml", rc);
        api.kubectl.ok(&["create", "-f", &file]).await;
        api.kubectl
            .ok(&[
                "create",
                "configmap",
                "settings",
                "-n",
                "doomed",
                "--from-literal=a=1",
            ])
            .await;
        let pods = "/registry/pods/doomed/";
        eventually(Duration::from_secs(60), "300 pods", || async {
            api.count(pods).await == 300
        })
        .await;

        let asked = current_revision(&etcd).await;
        api.kubectl
            .ok(&["delete", "namespace", "doomed", "--wait=false"])
            .await;
        eventually(Duration::from_secs(120), "the namespace gone", || async {
            let out = api.kubectl.run(&["get", "namespace", "doomed"]).await;
            !out.status.success() && out.stderr.contains("NotFound")
        })
        .await;
        // Nothing left under it, of any kind.
        let all = etcd
            .clone()
            .get(
                "/registry/",
                Some(
                    etcd_client::GetOptions::new()
                        .with_prefix()
                        .with_keys_only(),
                ),
            )
            .await
            .expect("etcd list");
        let left: Vec<String> = all
            .kvs()
            .iter()
            .filter_map(|kv| kv.key_str().ok().map(str::to_string))
            .filter(|key| key.contains("/doomed/") || key.ends_with("/namespaces/doomed"))
            .collect();
        assert!(left.is_empty(), "left under the namespace: {left:?}");
        // etcd's history: no pod created in it once its deletion was asked (the apiserver
        // refuses creates in a terminating namespace), and every one deleted.
        let events =
            history::read(&etcd, "/registry/", "/registry0", asked, "/registry/~end").await;
        let created = events
            .iter()
            .filter(|e| e.put && e.key.starts_with(pods) && e.create_revision == e.revision)
            .count();
        let deleted = events
            .iter()
            .filter(|e| !e.put && e.key.starts_with(pods))
            .count();
        assert_eq!(
            created, 0,
            "pods created after the namespace's deletion was asked"
        );
        assert!(deleted >= 300, "{deleted} pod deletes");
        manager.assert_running();
    })
    .await;
}
