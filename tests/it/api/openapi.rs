//! The published schema, served and kept: `kubectl explain` shows every served kind's fields
//! and types at several depths from kcm's `/openapi/v3`, and after a `kcm up` tour
//! (controllers, scheduler, kubelets, events, a rollout, a scale, a deleted namespace) every
//! object of every served kind, as the API lists it, validates against the Kubernetes 1.32
//! schema (`kcm::apiserver::openapi::validate`), required fields included, as are the
//! objects embedded in the Tables kubectl reads and the `/scale` answers.

use std::time::Duration;

use kcm::apiserver::openapi::validate::validate;
use serde_json::Value;

use crate::support::kcm::http_get;
use crate::support::kubectl::{start_apiserver, start_up, Api};
use crate::support::{eventually, with_timeout};

const LIMIT: Duration = Duration::from_secs(150);
const CONVERGE: Duration = Duration::from_secs(60);

/// A line with its runs of whitespace made one space (kubectl separates a field's name from
/// its type with a tab).
fn squash(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A served resource, as discovery lists it.
struct Served {
    /// `v1`, `apps/v1`.
    api_version: String,
    plural: String,
    kind: String,
}

/// GET `path` on the API, which must answer 200 with JSON.
async fn get_json(api: &Api, path: &str) -> Value {
    match http_get(api.port, path).await {
        Some((200, body)) => serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("GET {path}: not JSON ({e}): {body}")),
        other => panic!("GET {path}: {other:?}"),
    }
}

/// GET `path` on the API as a `meta.k8s.io/v1` Table, with each row's whole object.
async fn get_table(api: &Api, path: &str) -> Value {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let request = format!(
        "GET {path}?includeObject=Object HTTP/1.0\r\nHost: 127.0.0.1\r\n\
         Accept: application/json;as=Table;v=v1;g=meta.k8s.io\r\n\r\n"
    );
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", api.port)).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&response).into_owned())
    };
    let text = tokio::time::timeout(Duration::from_secs(10), attempt)
        .await
        .unwrap_or_else(|_| panic!("GET {path} as a Table: no answer within 10s"))
        .unwrap_or_else(|e| panic!("GET {path} as a Table: {e}"));
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{text}"
    );
    serde_json::from_str(body).unwrap_or_else(|e| panic!("GET {path} as a Table ({e}): {body}"))
}

/// Every listable resource discovery serves (subresources left out).
async fn served(api: &Api) -> Vec<Served> {
    let mut lists = vec![get_json(api, "/api/v1").await];
    let groups = get_json(api, "/apis").await;
    for group in groups["groups"].as_array().expect("groups") {
        let version = group["preferredVersion"]["groupVersion"]
            .as_str()
            .expect("a preferred version");
        lists.push(get_json(api, &format!("/apis/{version}")).await);
    }
    let mut found = Vec::new();
    for list in lists {
        let api_version = list["groupVersion"].as_str().expect("groupVersion");
        for resource in list["resources"].as_array().expect("resources") {
            let plural = resource["name"].as_str().expect("name");
            let lists = resource["verbs"]
                .as_array()
                .is_some_and(|verbs| verbs.iter().any(|verb| verb == "list"));
            if !plural.contains('/') && lists {
                found.push(Served {
                    api_version: api_version.to_string(),
                    plural: plural.to_string(),
                    kind: resource["kind"].as_str().expect("kind").to_string(),
                });
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_shows_every_served_kinds_fields_and_types_at_any_depth() {
    with_timeout(LIMIT, async {
        let Some(api) = start_apiserver().await else {
            return;
        };
        // (what to explain, a line its output must have, squashed).
        let cases = [
            ("pods", "KIND: Pod"),
            ("pods", "spec <PodSpec>"),
            ("pods.spec.containers", "name <string> -required-"),
            ("pods.spec.containers", "ports <[]ContainerPort>"),
            (
                "pods.spec.containers.ports",
                "containerPort <integer> -required-",
            ),
            ("pods.spec.containers.ports", "protocol <string>"),
            (
                "pods.status.containerStatuses",
                "imageID <string> -required-",
            ),
            ("pods.metadata", "labels <map[string]string>"),
            ("pods.metadata", "ownerReferences <[]OwnerReference>"),
            ("deployments", "GROUP: apps"),
            (
                "deployments.spec.strategy.rollingUpdate",
                "maxSurge <IntOrString>",
            ),
            ("deployments.spec", "selector <LabelSelector> -required-"),
            (
                "nodes.status.nodeInfo",
                "kubeletVersion <string> -required-",
            ),
            ("nodes.status.nodeInfo", "bootID <string> -required-"),
            ("replicasets", "KIND: ReplicaSet"),
            ("replicasets.spec", "replicas <integer>"),
            ("services", "KIND: Service"),
            ("services.spec.ports", "port <integer> -required-"),
            ("services.spec.ports", "targetPort <IntOrString>"),
            ("endpoints", "subsets <[]EndpointSubset>"),
            ("endpoints.subsets.addresses", "ip <string> -required-"),
            ("events", "involvedObject <ObjectReference> -required-"),
            ("events", "count <integer>"),
            ("namespaces", "KIND: Namespace"),
            ("namespaces.status", "phase <string>"),
            ("replicationcontrollers", "KIND: ReplicationController"),
            ("configmaps", "data <map[string]string>"),
            ("secrets", "stringData <map[string]string>"),
            ("serviceaccounts", "KIND: ServiceAccount"),
            ("leases", "GROUP: coordination.k8s.io"),
            ("leases.spec", "holderIdentity <string>"),
            (
                "replicationcontrollers.spec",
                "selector <map[string]string>",
            ),
        ];
        for (what, expected) in cases {
            let out = api.kubectl.ok(&["explain", what]).await;
            assert!(
                out.lines().any(|line| squash(line) == expected),
                "kubectl explain {what}: no line {expected:?} in\n{out}"
            );
        }

        // Every kind discovery serves, whatever was added since the cases above.
        let served = served(&api).await;
        assert!(served.len() >= 9, "discovery lists too few kinds");
        for resource in served {
            let out = api.kubectl.ok(&["explain", &resource.plural]).await;
            let lines: Vec<String> = out.lines().map(squash).collect();
            let kind_line = format!("KIND: {}", resource.kind);
            assert!(
                lines.contains(&kind_line)
                    && lines
                        .iter()
                        .any(|line| line.starts_with("metadata <ObjectMeta>")),
                "kubectl explain {} ({}): \n{out}",
                resource.plural,
                resource.api_version
            );
        }

        // And the whole tree at once.
        let out = api
            .kubectl
            .ok(&["explain", "deployments.spec", "--recursive"])
            .await;
        assert!(
            out.lines()
                .any(|line| squash(line) == "containerPort <integer> -required-"),
            "{out}"
        );
    })
    .await;
}

const RC: &str = "apiVersion: v1
kind: ReplicationController
metadata:
  name: legacy
spec:
  replicas: 2
  selector:
    app: legacy
  template:
    metadata:
      labels:
        app: legacy
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
        ports:
        - containerPort: 80
";

/// Waits until `kubectl get pods -l {selector}` lists `n` pods, all Running.
async fn wait_running(api: &Api, selector: &str, n: usize) {
    eventually(
        CONVERGE,
        &format!("{n} running pods {selector}"),
        || async {
            let out = api
                .kubectl
                .run(&[
                    "get",
                    "pods",
                    "-l",
                    selector,
                    "-o",
                    "jsonpath={.items[*].status.phase}",
                ])
                .await;
            let phases: Vec<&str> = out.stdout.split_whitespace().collect();
            phases.len() == n && phases.iter().all(|phase| *phase == "Running")
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_after_a_kcm_up_tour_validates_against_the_1_32_schema() {
    with_timeout(LIMIT, async {
        let Some(api) = start_up(2).await else {
            return;
        };
        let kubectl = &api.kubectl;

        // A deployment, rolled out to a new image, then scaled.
        kubectl
            .ok(&[
                "create",
                "deployment",
                "web",
                "--image=nginx:1.25",
                "--replicas=2",
            ])
            .await;
        kubectl
            .ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
            .await;
        kubectl
            .ok(&["set", "image", "deployment/web", "nginx=nginx:1.26"])
            .await;
        kubectl
            .ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
            .await;
        kubectl
            .ok(&["scale", "deployment/web", "--replicas=3"])
            .await;
        wait_running(&api, "app=web", 3).await;

        // A replication controller and a service in front of it.
        let rc = api.manifest("rc.yaml", RC);
        kubectl.ok(&["create", "-f", &rc]).await;
        kubectl
            .ok(&["expose", "rc", "legacy", "--port=80", "--name=legacy"])
            .await;
        wait_running(&api, "app=legacy", 2).await;

        // A namespace with a pod in it, created and deleted.
        kubectl.ok(&["create", "namespace", "passing"]).await;
        kubectl
            .ok(&["run", "visitor", "--image=nginx:1.25", "-n", "passing"])
            .await;
        kubectl
            .ok(&["delete", "namespace", "passing", "--timeout=60s"])
            .await;

        // What other tools keep: a ConfigMap, a Secret from stringData, a ServiceAccount
        // and a Lease, each written through the API.
        kubectl
            .ok(&["create", "configmap", "settings", "--from-literal=a=b"])
            .await;
        kubectl
            .ok(&["create", "secret", "generic", "token", "--from-literal=k=v"])
            .await;
        kubectl.ok(&["create", "serviceaccount", "robot"]).await;
        let lease = api.manifest(
            "lease.yaml",
            "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: leader\nspec:\n  holderIdentity: me\n  leaseDurationSeconds: 15\n",
        );
        kubectl.ok(&["create", "-f", &lease]).await;

        // Endpoints filled in for the service, and events recorded.
        eventually(CONVERGE, "the service's endpoints", || async {
            let endpoints = get_json(&api, "/api/v1/namespaces/default/endpoints/legacy").await;
            endpoints["subsets"][0]["addresses"]
                .as_array()
                .is_some_and(|addresses| addresses.len() == 2)
        })
        .await;

        let mut violations = Vec::new();
        let mut seen = Vec::new();
        for resource in served(&api).await {
            let prefix = if resource.api_version == "v1" {
                "/api/v1".to_string()
            } else {
                format!("/apis/{}", resource.api_version)
            };
            let list = get_json(&api, &format!("{prefix}/{}", resource.plural)).await;
            let items = list["items"].as_array().expect("a list's items");
            seen.push(format!("{} {}", items.len(), resource.plural));
            for item in items {
                let name = format!(
                    "{}/{}",
                    item["metadata"]["namespace"].as_str().unwrap_or(""),
                    item["metadata"]["name"].as_str().unwrap_or("?")
                );
                let found = validate(&resource.api_version, &resource.kind, item)
                    .unwrap_or_else(|e| panic!("{e}"));
                violations.extend(
                    found
                        .iter()
                        .map(|v| format!("{} {name} {v}", resource.kind)),
                );
            }
            // The same objects embedded in the rows of the Table kubectl asks for.
            let table = get_table(&api, &format!("{prefix}/{}", resource.plural)).await;
            for row in table["rows"].as_array().expect("a Table's rows") {
                let object = &row["object"];
                assert_eq!(object["kind"], resource.kind.as_str(), "a Table row: {row}");
                let name = object["metadata"]["name"].as_str().unwrap_or("?");
                let found = validate(&resource.api_version, &resource.kind, object)
                    .unwrap_or_else(|e| panic!("{e}"));
                violations.extend(
                    found
                        .iter()
                        .map(|v| format!("{} {name} (in a Table) {v}", resource.kind)),
                );
            }
            // The list itself, without its items (checked above, by name).
            let mut list = list.clone();
            list["items"] = Value::Array(Vec::new());
            let list_kind = format!("{}List", resource.kind);
            let found = validate(&resource.api_version, &list_kind, &list)
                .unwrap_or_else(|e| panic!("{e}"));
            violations.extend(found.iter().map(|v| format!("{list_kind} {v}")));
        }
        // The synthesized `/scale` of a deployment, a replica set and a controller.
        let rs_name = get_json(&api, "/apis/apps/v1/namespaces/default/replicasets").await["items"]
            [0]["metadata"]["name"]
            .as_str()
            .expect("a replica set")
            .to_string();
        for path in [
            "/apis/apps/v1/namespaces/default/deployments/web/scale".to_string(),
            format!("/apis/apps/v1/namespaces/default/replicasets/{rs_name}/scale"),
            "/api/v1/namespaces/default/replicationcontrollers/legacy/scale".to_string(),
        ] {
            let scale = get_json(&api, &path).await;
            let found = validate("autoscaling/v1", "Scale", &scale).expect("Scale's schema");
            violations.extend(found.iter().map(|v| format!("Scale {path} {v}")));
        }

        // The check has teeth: a served pod without the field the kubelet once left out.
        let pods = get_json(&api, "/api/v1/pods").await;
        let mut pod = pods["items"][0].clone();
        pod["status"]["containerStatuses"][0]
            .as_object_mut()
            .expect("a container status")
            .remove("imageID");
        let found: Vec<String> = validate("v1", "Pod", &pod)
            .expect("Pod's schema")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(found, ["status.containerStatuses[0].imageID: required"]);

        eprintln!("validated: {seen:?}");
        for kind in ["pods", "deployments", "replicasets", "events", "nodes"] {
            assert!(
                seen.iter()
                    .any(|line| line.ends_with(&format!(" {kind}")) && !line.starts_with("0 ")),
                "the tour left no {kind}: {seen:?}"
            );
        }
        assert!(
            violations.is_empty(),
            "{} violations of the 1.32 schema (objects seen: {seen:?}):\n{}",
            violations.len(),
            violations.join("\n")
        );
    })
    .await;
}
