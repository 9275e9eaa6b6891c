//! Protobuf request bodies with the real kubectl: its generator commands (`kubectl create
//! deployment`, `kubectl create service`, `kubectl create namespace`) send
//! `application/vnd.kubernetes.protobuf` and never fall back to JSON (kubernetes-api.md §2.11, kubectl-traces/10). The objects they
//! create run kcm's loop; outcomes are read from etcd.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::kcm::http_request;
use crate::support::kubectl::start_up;
use crate::support::objects::pod_documents;
use crate::support::{eventually, with_timeout};

const LIMIT: Duration = Duration::from_secs(150);
const CONVERGE: Duration = Duration::from_secs(40);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_deployment_and_service_send_protobuf_that_runs_the_loop() {
    with_timeout(LIMIT, async {
        let Some(api) = start_up(2).await else {
            return;
        };
        assert_eq!(
            api.kubectl
                .ok(&[
                    "create",
                    "deployment",
                    "web",
                    "--image",
                    "nginx",
                    "--replicas",
                    "3"
                ])
                .await,
            "deployment.apps/web created\n"
        );
        let client = api.etcd.client().await;
        let deployment = api
            .stored("/registry/deployments/default/web")
            .await
            .unwrap();
        assert_eq!(deployment["spec"]["replicas"], 3);
        assert_eq!(deployment["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx"
        );
        // The deployment controller's ReplicaSet runs three pods of web.
        eventually(CONVERGE, "3 pods of web in etcd", || async {
            pod_documents(&client, "default")
                .await
                .values()
                .filter(|(pod, _)| pod.pointer("/metadata/labels/app") == Some(&json!("web")))
                .count()
                == 3
        })
        .await;

        assert_eq!(
            api.kubectl
                .ok(&["create", "service", "clusterip", "web", "--tcp=80:8080"])
                .await,
            "service/web created\n"
        );
        let service = api
            .stored("/registry/services/specs/default/web")
            .await
            .unwrap();
        let served = api.kubectl.ok(&["get", "svc", "web", "-o", "json"]).await;
        let served: Value = serde_json::from_str(&served).unwrap();
        let port = &served["spec"]["ports"][0];
        for (field, value) in [
            ("name", json!("80-8080")),
            ("port", json!(80)),
            ("protocol", json!("TCP")),
            ("targetPort", json!(8080)),
        ] {
            assert_eq!(port[field], value, "{field} of {port}; stored: {service}");
        }
        assert_eq!(served["spec"]["selector"], json!({"app": "web"}));

        // create namespace: a protobuf Namespace, stored Active.
        assert_eq!(
            api.kubectl.ok(&["create", "namespace", "team"]).await,
            "namespace/team created\n"
        );
        let namespace = api.stored("/registry/namespaces/team").await.unwrap();
        assert_eq!(namespace["status"]["phase"], "Active", "{namespace:#}");
        assert_eq!(
            namespace["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "team"
        );
        assert!(namespace["metadata"]["uid"].is_string(), "{namespace:#}");

        // --dry-run=server sends protobuf too, and stores nothing.
        api.kubectl
            .ok(&[
                "create",
                "deployment",
                "dry",
                "--image=nginx",
                "--dry-run=server",
            ])
            .await;
        assert!(api
            .stored("/registry/deployments/default/dry")
            .await
            .is_none());

        // A body that is not protobuf is one 400 Status.
        let broken = http_request(
            api.port,
            "POST",
            "/apis/apps/v1/namespaces/default/deployments",
            Some("application/vnd.kubernetes.protobuf"),
            b"k8s\0\x0a\x05\x0a\x03",
        )
        .await;
        assert_eq!(broken.status, 400, "{broken:?}");
        assert_eq!(broken.json()["kind"], "Status");
    })
    .await;
}
