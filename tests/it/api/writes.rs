//! The Kubernetes API's writes with real clients: kubectl (`create -f` of JSON, several
//! YAML documents and a `List`, `apply` twice, `scale`, `set image`, `label`, `annotate`,
//! `rollout history`, `delete` with each cascade, `--wait`, by selector and `--all`,
//! `--dry-run=server`) against kcm's running controllers, the errors as `Status` bodies
//! over plain HTTP (bad input refused with one Status and nothing written), kube-rs's
//! `Api` writes, and the history check: two clients racing
//! read-modify-write PUTs of one object lose no acknowledged write and get a 409 for every
//! refused one, as etcd's own history of the key shows.
//!
//! Expectations are kube-apiserver's (kubernetes-api.md §2.5–2.11, §4.5, §4.8–4.11 and the
//! kubectl traces beside it); outcomes are read from etcd, not through the API.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::support::history;
use crate::support::kcm::{http_request, HttpResponse};
use crate::support::kubectl::{start_apiserver, start_up, Api as KubectlApi, REPLICA_SET};
use crate::support::objects::{current_revision, pod_documents};
use crate::support::{eventually, with_timeout};

const LIMIT: Duration = Duration::from_secs(150);
const CONVERGE: Duration = Duration::from_secs(40);

const RC: &str = "apiVersion: v1
kind: ReplicationController
metadata:
  name: web
spec:
  replicas: 2
  selector:
    app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
        ports:
        - containerPort: 80
";

fn deployment_yaml(replicas: u32, image: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  labels: {{app: app}}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: app}}
  template:
    metadata:
      labels: {{app: app}}
    spec:
      containers:
      - name: nginx
        image: {image}
"
    )
}

/// The pods of `default` in etcd whose labels have `app`, by name.
async fn pods_of(api: &KubectlApi, app: &str) -> BTreeSet<String> {
    let client = api.etcd.client().await;
    pod_documents(&client, "default")
        .await
        .into_iter()
        .filter(|(_, (pod, _))| pod.pointer("/metadata/labels/app") == Some(&json!(app)))
        .map(|(name, _)| name)
        .collect()
}

/// The ReplicaSets of `default` in etcd: their `deployment.kubernetes.io/revision`
/// annotation and their first container's image.
async fn replica_set_revisions(api: &KubectlApi) -> BTreeMap<u64, String> {
    api.documents("/registry/replicasets/default/")
        .await
        .into_iter()
        .map(|rs| {
            let revision = rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                .as_str()
                .and_then(|r| r.parse().ok())
                .unwrap_or_else(|| panic!("a revision: {rs:#}"));
            let image = rs["spec"]["template"]["spec"]["containers"][0]["image"]
                .as_str()
                .expect("an image")
                .to_string();
            (revision, image)
        })
        .collect()
}

/// `line` with each run of whitespace as one space, trimmed.
fn squash(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

async fn wait_pods(api: &KubectlApi, app: &str, n: usize) {
    eventually(CONVERGE, &format!("{n} pods of {app} in etcd"), || async {
        pods_of(api, app).await.len() == n
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_apply_scale_set_image_label_and_annotate_run_the_loop() {
    with_timeout(LIMIT, async {
        let Some(api) = start_up(2).await else {
            return;
        };
        let rc = api.manifest("rc.yaml", RC);
        assert_eq!(
            api.kubectl.ok(&["create", "-f", &rc]).await,
            "replicationcontroller/web created\n"
        );
        wait_pods(&api, "web", 2).await;
        let stored_rc = api
            .stored("/registry/controllers/default/web")
            .await
            .unwrap();
        assert_eq!(stored_rc["metadata"]["generation"], 1, "{stored_rc:#}");
        assert!(stored_rc["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty()));

        // apply twice: created, then configured, the last-applied annotation kept.
        let deploy = api.manifest("deploy.yaml", &deployment_yaml(2, "nginx:1.25"));
        assert_eq!(
            api.kubectl.ok(&["apply", "-f", &deploy]).await,
            "deployment.apps/app created\n"
        );
        let deploy = api.manifest("deploy.yaml", &deployment_yaml(3, "nginx:1.26"));
        assert_eq!(
            api.kubectl.ok(&["apply", "-f", &deploy]).await,
            "deployment.apps/app configured\n"
        );
        let key = "/registry/deployments/default/app";
        let stored_deploy = api.stored(key).await.unwrap();
        let last_applied = stored_deploy["metadata"]["annotations"]
            ["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .expect("the last-applied annotation is kept");
        assert!(last_applied.contains("nginx:1.26"), "{last_applied}");
        assert_eq!(stored_deploy["spec"]["replicas"], 3);
        assert_eq!(
            stored_deploy["metadata"]["generation"], 2,
            "{stored_deploy:#}"
        );
        wait_pods(&api, "app", 3).await;

        // scale rc, deployment and a ReplicaSet through /scale.
        let rs = api.manifest("rs.yaml", REPLICA_SET);
        api.kubectl.ok(&["create", "-f", &rs]).await;
        for (what, app, n) in [
            ("rc/web", "web", 3),
            ("deployment/app", "app", 4),
            ("rs/solo", "solo", 2),
        ] {
            let replicas = format!("--replicas={n}");
            let out = api.kubectl.ok(&["scale", what, &replicas]).await;
            assert!(out.ends_with(" scaled\n"), "{out}");
            wait_pods(&api, app, n).await;
        }
        // A stale --current-replicas is refused, and nothing changes.
        let out = api
            .kubectl
            .run(&["scale", "rc/web", "--replicas=5", "--current-replicas=1"])
            .await;
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let stored_rc = api
            .stored("/registry/controllers/default/web")
            .await
            .unwrap();
        assert_eq!(stored_rc["spec"]["replicas"], 3);

        // set image: the template changes, the generation follows.
        api.kubectl
            .ok(&["set", "image", "deployment/app", "nginx=nginx:1.27"])
            .await;
        let stored_deploy = api.stored(key).await.unwrap();
        assert_eq!(
            stored_deploy["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:1.27"
        );
        eventually(CONVERGE, "the pods of app to run nginx:1.27", || async {
            let client = api.etcd.client().await;
            let docs = pod_documents(&client, "default").await;
            let app: Vec<&Value> = docs
                .values()
                .map(|(pod, _)| pod)
                .filter(|pod| pod.pointer("/metadata/labels/app") == Some(&json!("app")))
                .collect();
            app.len() == 4
                && app.iter().all(|pod| {
                    pod.pointer("/spec/containers/0/image") == Some(&json!("nginx:1.27"))
                })
        })
        .await;

        // label and annotate: metadata only, the generation stays.
        let generation = stored_rc["metadata"]["generation"].clone();
        api.kubectl.ok(&["label", "rc", "web", "tier=front"]).await;
        api.kubectl
            .ok(&["annotate", "rc", "web", "note=hello"])
            .await;
        let out = api.kubectl.run(&["label", "rc", "web", "tier=back"]).await;
        assert_eq!(out.status.code(), Some(1), "no --overwrite: {out:?}");
        api.kubectl
            .ok(&["label", "rc", "web", "tier=back", "--overwrite"])
            .await;
        let stored_rc = api
            .stored("/registry/controllers/default/web")
            .await
            .unwrap();
        assert_eq!(stored_rc["metadata"]["labels"]["tier"], "back");
        assert_eq!(stored_rc["metadata"]["annotations"]["note"], "hello");
        assert_eq!(stored_rc["metadata"]["generation"], generation);
        assert!(
            stored_rc["spec"]["template"]["spec"]["containers"][0]["ports"][0]
                .get("protocol")
                .is_none(),
            "a label patch does not rewrite the spec with served defaults: {stored_rc:#}"
        );
        // annotate refuses to change a value without --overwrite, as label does.
        let out = api
            .kubectl
            .run(&["annotate", "rc", "web", "note=bye"])
            .await;
        assert_eq!(out.status.code(), Some(1), "no --overwrite: {out:?}");
        let key_rc = "/registry/controllers/default/web";
        assert_eq!(
            api.stored(key_rc).await.unwrap()["metadata"]["annotations"]["note"],
            "hello"
        );
        api.kubectl
            .ok(&["annotate", "rc", "web", "note=bye", "--overwrite"])
            .await;
        assert_eq!(
            api.stored(key_rc).await.unwrap()["metadata"]["annotations"]["note"],
            "bye"
        );

        // The right --current-replicas is a met precondition: the scale goes through.
        let out = api
            .kubectl
            .ok(&["scale", "rc/web", "--replicas=1", "--current-replicas=3"])
            .await;
        assert_eq!(out, "replicationcontroller/web scaled\n");
        assert_eq!(api.stored(key_rc).await.unwrap()["spec"]["replicas"], 1);
        wait_pods(&api, "web", 1).await;
    })
    .await;
}

/// A ReplicationController of one pod labelled `app: {name}`, as a JSON value.
fn rc_json(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"app": name},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]},
            },
        },
    })
}

/// A Service of port 80 selecting `app: {name}`, as a JSON value.
fn service_json(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80}]},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_f_takes_json_several_documents_and_a_list() {
    with_timeout(LIMIT, async {
        let Some(api) = start_up(1).await else {
            return;
        };
        // JSON.
        let json_rc = api.manifest("rc.json", &rc_json("from-json").to_string());
        assert_eq!(
            api.kubectl.ok(&["create", "-f", &json_rc]).await,
            "replicationcontroller/from-json created\n"
        );
        wait_pods(&api, "from-json", 1).await;

        // Several YAML documents in one file, created in order.
        let service = serde_yaml_ng::to_string(&service_json("multi")).unwrap();
        let documents = format!("{service}---\n{REPLICA_SET}");
        let multi = api.manifest("multi.yaml", &documents);
        assert_eq!(
            api.kubectl.ok(&["create", "-f", &multi]).await,
            "service/multi created\nreplicaset.apps/solo created\n"
        );
        assert!(api
            .stored("/registry/services/specs/default/multi")
            .await
            .is_some());
        wait_pods(&api, "solo", 1).await;

        // A List: each item created.
        let list = json!({"apiVersion": "v1", "kind": "List",
                          "items": [service_json("listed"), rc_json("listed")]});
        let list = api.manifest("list.yaml", &serde_yaml_ng::to_string(&list).unwrap());
        assert_eq!(
            api.kubectl.ok(&["create", "-f", &list]).await,
            "service/listed created\nreplicationcontroller/listed created\n"
        );
        assert!(api
            .stored("/registry/services/specs/default/listed")
            .await
            .is_some());
        assert_eq!(
            api.stored("/registry/controllers/default/listed")
                .await
                .unwrap()["spec"]["replicas"],
            1
        );
        wait_pods(&api, "listed", 1).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_cascades_to_a_controllers_pods_or_orphans_them() {
    with_timeout(LIMIT, async {
        let Some(api) = start_up(2).await else {
            return;
        };
        let rc = api.manifest("rc.yaml", RC);
        api.kubectl.ok(&["create", "-f", &rc]).await;
        wait_pods(&api, "web", 2).await;
        assert_eq!(
            api.kubectl.ok(&["delete", "rc", "web"]).await,
            "replicationcontroller \"web\" deleted\n"
        );
        assert_eq!(
            pods_of(&api, "web").await,
            BTreeSet::new(),
            "no pod of web is left"
        );
        assert!(api
            .stored("/registry/controllers/default/web")
            .await
            .is_none());

        // --cascade=orphan keeps them, and nothing recreates or deletes them.
        api.kubectl.ok(&["create", "-f", &rc]).await;
        wait_pods(&api, "web", 2).await;
        let before = pods_of(&api, "web").await;
        api.kubectl
            .ok(&["delete", "rc", "web", "--cascade=orphan"])
            .await;
        assert!(api
            .stored("/registry/controllers/default/web")
            .await
            .is_none());
        assert_eq!(pods_of(&api, "web").await, before);

        // delete pods -l: every pod of the selector.
        let out = api.kubectl.ok(&["delete", "pods", "-l", "app=web"]).await;
        assert_eq!(out.lines().count(), 2, "{out}");
        assert_eq!(pods_of(&api, "web").await, BTreeSet::new());

        // A Deployment's cascade goes through the garbage collector.
        let deploy = api.manifest("deploy.yaml", &deployment_yaml(2, "nginx:1.25"));
        api.kubectl.ok(&["apply", "-f", &deploy]).await;
        wait_pods(&api, "app", 2).await;
        api.kubectl.ok(&["delete", "deployment", "app"]).await;
        wait_pods(&api, "app", 0).await;

        // --cascade=foreground --wait: when kubectl returns, the Deployment is gone, and
        // its ReplicaSet and pods went before it.
        api.kubectl.ok(&["apply", "-f", &deploy]).await;
        wait_pods(&api, "app", 2).await;
        assert_eq!(
            api.kubectl
                .ok(&[
                    "delete",
                    "deployment",
                    "app",
                    "--cascade=foreground",
                    "--wait"
                ])
                .await,
            "deployment.apps \"app\" deleted\n"
        );
        assert!(api
            .stored("/registry/deployments/default/app")
            .await
            .is_none());
        assert_eq!(api.count("/registry/replicasets/default/").await, 0);
        assert_eq!(pods_of(&api, "app").await, BTreeSet::new());

        // --all: every controller of the namespace, each with its pods.
        api.kubectl.ok(&["create", "-f", &rc]).await;
        let other = api.manifest("other.json", &rc_json("other").to_string());
        api.kubectl.ok(&["create", "-f", &other]).await;
        wait_pods(&api, "web", 2).await;
        wait_pods(&api, "other", 1).await;
        let out = api.kubectl.ok(&["delete", "rc", "--all"]).await;
        assert_eq!(
            out,
            "replicationcontroller \"other\" deleted\nreplicationcontroller \"web\" deleted\n"
        );
        assert_eq!(api.count("/registry/controllers/default/").await, 0);
        assert_eq!(pods_of(&api, "web").await, BTreeSet::new());
        assert_eq!(pods_of(&api, "other").await, BTreeSet::new());

        // --dry-run=server writes nothing.
        let client = api.etcd.client().await;
        let revision = current_revision(&client).await;
        let out = api
            .kubectl
            .ok(&["create", "-f", &rc, "--dry-run=server"])
            .await;
        assert_eq!(out, "replicationcontroller/web created (server dry run)\n");
        assert_eq!(current_revision(&client).await, revision, "nothing written");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_errors_are_statuses_with_kube_apiservers_reasons() {
    with_timeout(LIMIT, async {
        let Some(api) = start_apiserver().await else {
            return;
        };
        let port = api.port;
        let pods = "/api/v1/namespaces/default/pods";
        let pod = |name: &str| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                   "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
        };
        let body = |value: &Value| value.to_string().into_bytes();

        // 201 with no Content-Type (the Python client sends none): JSON.
        let created = http_request(port, "POST", pods, None, &body(&pod("a"))).await;
        assert_eq!(created.status, 201, "{created:?}");
        let created = created.json();
        assert_eq!(created["metadata"]["namespace"], "default");
        let rv = created["metadata"]["resourceVersion"].as_str().unwrap().to_string();

        // YAML.
        let yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: y\nspec:\n  containers:\n  - name: c\n    image: nginx\n";
        let created_yaml = http_request(port, "POST", pods, Some("application/yaml"), yaml.as_bytes()).await;
        assert_eq!(created_yaml.status, 201, "{created_yaml:?}");

        // 422 Invalid, a cause per field.
        let invalid = http_request(port, "POST", pods, Some("application/json"), &body(&pod("Bad_Name"))).await;
        assert_eq!(invalid.status, 422, "{invalid:?}");
        let status = invalid.json();
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["reason"], "Invalid");
        assert_eq!(status["details"]["causes"][0]["field"], "metadata.name", "{status:#}");
        assert_eq!(status["details"]["kind"], "Pod");

        // 409 Conflict on a stale resourceVersion, with kube-apiserver's message.
        let mut update = created.clone();
        update["metadata"]["labels"] = json!({"x": "1"});
        let path = format!("{pods}/a");
        let ok = http_request(port, "PUT", &path, Some("application/json"), &body(&update)).await;
        assert_eq!(ok.status, 200, "{ok:?}");
        assert_ne!(ok.json()["metadata"]["resourceVersion"], json!(rv));
        let stale = http_request(port, "PUT", &path, Some("application/json"), &body(&update)).await;
        assert_eq!(stale.status, 409, "{stale:?}");
        let status = stale.json();
        assert_eq!(status["reason"], "Conflict");
        assert_eq!(
            status["message"],
            "Operation cannot be fulfilled on pods \"a\": the object has been modified; please apply your changes to the latest version and try again"
        );
        // The same for PUT /scale with a stale resourceVersion.
        let rcs = "/api/v1/namespaces/default/replicationcontrollers";
        let rc = json!({"metadata": {"name": "web"}, "spec": {"replicas": 1, "selector": {"app": "web"},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
        assert_eq!(http_request(port, "POST", rcs, None, &body(&rc)).await.status, 201);
        let scale_path = format!("{rcs}/web/scale");
        let scale = http_request(port, "PUT", &scale_path, None,
            &body(&json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                          "metadata": {"name": "web", "resourceVersion": "1"}, "spec": {"replicas": 3}}))).await;
        assert_eq!(scale.status, 409, "{scale:?}");

        // 409 AlreadyExists, 400 for another namespace, strict unknown fields, 415, 422.
        let again = http_request(port, "POST", pods, None, &body(&pod("a"))).await;
        assert_eq!((again.status, again.json()["reason"].clone()), (409, json!("AlreadyExists")));
        let mut elsewhere = pod("b");
        elsewhere["metadata"]["namespace"] = json!("other");
        assert_eq!(http_request(port, "POST", pods, None, &body(&elsewhere)).await.status, 400);
        let mut typo = pod("c");
        typo["spec"]["containers"][0]["imagee"] = json!("x");
        let strict = http_request(port, "POST", &format!("{pods}?fieldValidation=Strict"), None, &body(&typo)).await;
        assert_eq!(strict.status, 400, "{strict:?}");
        assert!(strict.json()["message"].as_str().unwrap().contains("spec.containers[0].imagee"));
        let warned = http_request(port, "POST", &format!("{pods}?fieldValidation=Warn"), None, &body(&typo)).await;
        assert_eq!(warned.status, 201, "{warned:?}");
        assert!(warned.head.to_ascii_lowercase().contains("warning: 299 - "), "{}", warned.head);
        assert!(
            warned.head.contains(r#"299 - "unknown field \"spec.containers[0].imagee\"""#),
            "the warning quoted as kube-apiserver quotes it: {}",
            warned.head
        );
        let other = http_request(port, "POST", pods, Some("application/cbor"), b"").await;
        assert_eq!(other.status, 415);
        // An apply without a fieldManager is 422, as kube-apiserver's ValidatePatchOptions.
        let ssa = http_request(port, "PATCH", &path, Some("application/apply-patch+yaml"), b"{}").await;
        assert_eq!(ssa.status, 422, "{ssa:?}");
        assert!(ssa.json()["message"].as_str().unwrap().contains("fieldManager: Required value"));

        // Bad input gets one Status and changes nothing.
        let client = api.etcd.client().await;
        let revision = current_revision(&client).await;
        let (code, status) = too_large(port, pods).await;
        assert_eq!(code, 413);
        assert_refusal("a 10 MiB body", &status, 413, "RequestEntityTooLarge");
        let malformed = http_request(port, "POST", pods, None, b"{\"metadata\": ").await;
        assert_refused("malformed JSON", &malformed, 400, "BadRequest");
        let bad_yaml = http_request(port, "POST", pods, Some("application/yaml"), b"a: [").await;
        assert_refused("malformed YAML", &bad_yaml, 400, "BadRequest");
        let protobuf = http_request(port, "POST", pods, Some("application/vnd.kubernetes.protobuf"), b"k8s\0\xff").await;
        assert_refused("malformed protobuf", &protobuf, 400, "BadRequest");
        let mut wrong_kind = pod("k");
        wrong_kind["kind"] = json!("Service");
        let wrong_kind = http_request(port, "POST", pods, None, &body(&wrong_kind)).await;
        assert_refused("a Service posted as a pod", &wrong_kind, 400, "BadRequest");
        let not_dns = http_request(port, "POST", pods, None, &body(&pod("-web.x"))).await;
        assert_refused("a name that is not a DNS subdomain", &not_dns, 422, "Invalid");
        let mut unselected = rc.clone();
        unselected["metadata"]["name"] = json!("unselected");
        unselected["spec"]["selector"] = json!({"app": "other"});
        let invalid_rc = http_request(port, "POST", rcs, None, &body(&unselected)).await;
        assert_refused("a selector that misses its template", &invalid_rc, 422, "Invalid");
        let bad_operator = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "bad-operator"},
            "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Sometimes", "values": ["x"]}]},
                     "template": {"metadata": {"labels": {"app": "x"}},
                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
        let bad_operator = http_request(port, "POST", "/apis/apps/v1/namespaces/default/replicasets",
            None, &body(&bad_operator)).await;
        // kcm's typed selector refuses the operator as it decodes (kube-apiserver decodes
        // it as a string and answers 422 from validation); either way one Status names it.
        assert_refused("a selector with an unknown operator", &bad_operator, 400, "BadRequest");
        let message = bad_operator.json()["message"].as_str().unwrap_or_default().to_string();
        assert!(message.contains("spec.selector.matchExpressions[0].operator"), "{message}");
        let unparsable = http_request(port, "DELETE", &format!("{pods}?labelSelector=app%20in%20(a"), None, b"").await;
        assert_refused("a labelSelector that does not parse", &unparsable, 400, "BadRequest");
        let unmergeable = http_request(port, "PATCH", &format!("{rcs}/web"),
            Some("application/strategic-merge-patch+json"),
            br#"{"spec":{"template":{"spec":{"containers":[{"image":"no-name"}]}}}}"#).await;
        assert_eq!(unmergeable.status, 422, "{unmergeable:?}");
        assert_eq!(unmergeable.json()["kind"], "Status", "{unmergeable:?}");
        assert_eq!(current_revision(&client).await, revision, "nothing written");

        // dryRun=All: the answer, and nothing written.
        let dry = http_request(port, "POST", &format!("{pods}?dryRun=All"), None, &body(&pod("dry"))).await;
        assert_eq!(dry.status, 201, "{dry:?}");
        let would_be = dry.json();
        assert!(would_be["metadata"]["uid"].is_string(), "{would_be:#}");
        assert!(would_be["metadata"]["creationTimestamp"].is_string(), "{would_be:#}");
        let dry_delete = http_request(port, "DELETE", &format!("{path}?dryRun=All"), None, b"").await;
        assert_eq!(dry_delete.status, 200, "{dry_delete:?}");
        assert_eq!(current_revision(&client).await, revision, "nothing written");

        // A pod's delete answers with the pod; preconditions are checked.
        let wrong_uid = http_request(port, "DELETE", &path, None,
            &body(&json!({"preconditions": {"uid": "nope"}}))).await;
        assert_eq!(wrong_uid.status, 409, "{wrong_uid:?}");
        let deleted = http_request(port, "DELETE", &path, None, b"").await;
        assert_eq!((deleted.status, deleted.json()["kind"].clone()), (200, json!("Pod")));
        let deleted = http_request(port, "DELETE", &format!("{rcs}/web"), None, b"").await;
        assert_eq!(deleted.json()["status"], "Success", "{deleted:?}");
    })
    .await;
}

/// POSTs a body declared as 10 MiB and sends none of it: the answer's status and body,
/// which must come before the body does.
async fn too_large(port: u16, path: &str) -> (u16, Value) {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{{",
        10 * 1024 * 1024
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("an answer before the body")
        .expect("read the answer");
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("not an HTTP response: {answer:?}"));
    let status = head[9..12].parse().expect("a status");
    let body = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body:?}"));
    (status, body)
}

/// `response` is one `Status` refusing the request with `code` and `reason`, and a
/// message that says why.
#[track_caller]
fn assert_refused(what: &str, response: &HttpResponse, code: u16, reason: &str) {
    assert_eq!(response.status, code, "{what}: {response:?}");
    let status = response.json();
    assert_refusal(what, &status, code, reason);
}

#[track_caller]
fn assert_refusal(what: &str, status: &Value, code: u16, reason: &str) {
    assert_eq!(
        (
            &status["kind"],
            &status["status"],
            &status["code"],
            &status["reason"]
        ),
        (
            &json!("Status"),
            &json!("Failure"),
            &json!(code),
            &json!(reason)
        ),
        "{what}: {status:#}"
    );
    assert!(
        status["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: a message: {status:#}"
    );
}

/// A kube client of the API at `port`.
fn kube_client(port: u16) -> kube::Client {
    let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
    kube::Client::try_from(config).expect("a kube client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_creates_replaces_patches_scales_and_deletes() {
    with_timeout(LIMIT, async {
        let Some(api) = start_apiserver().await else {
            return;
        };
        let deployments: Api<Deployment> = Api::namespaced(kube_client(api.port), "default");
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "kube"},
            "spec": {"selector": {"matchLabels": {"app": "kube"}},
                     "template": {"metadata": {"labels": {"app": "kube"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}},
        }))
        .unwrap();
        let created = deployments
            .create(&PostParams::default(), &deployment)
            .await
            .unwrap();
        assert_eq!(created.metadata.generation, Some(1));
        assert_eq!(
            created.spec.as_ref().unwrap().replicas,
            Some(1),
            "defaulted"
        );

        // replace: with the current resourceVersion, then a conflict with the stale one.
        let mut changed = created.clone();
        changed.spec.as_mut().unwrap().replicas = Some(2);
        let replaced = deployments
            .replace("kube", &PostParams::default(), &changed)
            .await
            .unwrap();
        assert_eq!(replaced.metadata.generation, Some(2));
        match deployments
            .replace("kube", &PostParams::default(), &changed)
            .await
        {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 409, "{status:?}"),
            other => panic!("a stale replace: {other:?}"),
        }

        // patch: merge, JSON (with a test) and strategic.
        let params = PatchParams::default();
        let merged = deployments
            .patch(
                "kube",
                &params,
                &Patch::Merge(json!({"metadata": {"labels": {"m": "1"}}})),
            )
            .await
            .unwrap();
        assert_eq!(merged.metadata.labels.unwrap()["m"], "1");
        let operations = serde_json::from_value(json!([
            {"op": "test", "path": "/spec/replicas", "value": 2},
            {"op": "replace", "path": "/spec/replicas", "value": 3},
        ]))
        .unwrap();
        let patched = deployments
            .patch("kube", &params, &Patch::Json::<()>(operations))
            .await
            .unwrap();
        assert_eq!(patched.spec.unwrap().replicas, Some(3));
        let strategic = deployments
            .patch(
                "kube",
                &params,
                &Patch::Strategic(json!({"spec": {"template": {"spec": {
                "containers": [{"name": "c", "image": "nginx:2"}]}}}})),
            )
            .await
            .unwrap();
        let containers = strategic.spec.unwrap().template.spec.unwrap().containers;
        assert_eq!(
            (containers.len(), containers[0].image.as_deref()),
            (1, Some("nginx:2"))
        );

        // status: only through /status; the main resource ignores it.
        let with_status = deployments
            .patch_status(
                "kube",
                &params,
                &Patch::Merge(
                    json!({"spec": {"replicas": 7}, "status": {"observedGeneration": 42}}),
                ),
            )
            .await
            .unwrap();
        assert_eq!(
            with_status.status.as_ref().unwrap().observed_generation,
            Some(42)
        );
        assert_eq!(
            with_status.spec.as_ref().unwrap().replicas,
            Some(3),
            "spec kept"
        );
        let mut ignored = with_status.clone();
        ignored.status.as_mut().unwrap().observed_generation = Some(1);
        ignored.metadata.labels = Some([("put".to_string(), "1".to_string())].into());
        let put = deployments
            .replace("kube", &PostParams::default(), &ignored)
            .await
            .unwrap();
        assert_eq!(
            put.status.unwrap().observed_generation,
            Some(42),
            "status kept"
        );
        assert_eq!(put.metadata.labels.unwrap()["put"], "1");

        // scale.
        let scale = deployments.get_scale("kube").await.unwrap();
        assert_eq!(scale.spec.unwrap().replicas, Some(3));
        let scaled = deployments
            .patch_scale(
                "kube",
                &params,
                &Patch::Merge(json!({"spec": {"replicas": 5}})),
            )
            .await
            .unwrap();
        assert_eq!(scaled.spec.unwrap().replicas, Some(5));
        assert_eq!(scaled.status.unwrap().selector.as_deref(), Some("app=kube"));

        // delete: a Status for a deployment, the object for a pod.
        let deleted = deployments
            .delete("kube", &DeleteParams::background())
            .await
            .unwrap();
        assert!(deleted.is_right(), "a Status: {deleted:?}");
        let pods: Api<Pod> = Api::namespaced(kube_client(api.port), "default");
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        let deleted = pods.delete("p", &DeleteParams::default()).await.unwrap();
        assert!(deleted.is_left(), "the pod: {deleted:?}");
        // Bound to a node, it terminates gracefully: its kubelet deletes it.
        eventually(CONVERGE, "the pod to go", || async {
            api.stored("/registry/pods/default/p").await.is_none()
        })
        .await;

        // A collection by label selector.
        for name in ["c1", "c2", "keep"] {
            let mut pod = pod.clone();
            pod.metadata.name = Some(name.to_string());
            let group = if name == "keep" { "other" } else { "batch" };
            pod.metadata.labels = Some([("group".to_string(), group.to_string())].into());
            pods.create(&PostParams::default(), &pod).await.unwrap();
        }
        let selected = kube::api::ListParams::default().labels("group=batch");
        let deleted = pods
            .delete_collection(&DeleteParams::default(), &selected)
            .await
            .unwrap();
        let names: BTreeSet<String> = deleted
            .left()
            .expect("the deleted pods")
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        assert_eq!(names, BTreeSet::from(["c1".to_string(), "c2".to_string()]));
        eventually(CONVERGE, "c1 to go", || async {
            api.stored("/registry/pods/default/c1").await.is_none()
        })
        .await;
        assert!(api.stored("/registry/pods/default/keep").await.is_some());
        // Across namespaces.
        let other: Api<Pod> = Api::namespaced(kube_client(api.port), "other");
        other.create(&PostParams::default(), &pod).await.unwrap();
        let everywhere: Api<Pod> = Api::all(kube_client(api.port));
        let deleted = everywhere
            .delete_collection(&DeleteParams::default(), &kube::api::ListParams::default())
            .await
            .unwrap();
        assert_eq!(deleted.left().expect("the deleted pods").items.len(), 2);
        eventually(CONVERGE, "other/p to go", || async {
            api.stored("/registry/pods/other/p").await.is_none()
        })
        .await;
    })
    .await;
}

/// 2 clients × [`WRITES`] read-modify-write PUTs of one pod through the API: each PUT the
/// API acknowledged is in etcd's history of the key exactly once (at the resourceVersion
/// it answered, with the value it carried), every refused one got a 409, and the history
/// holds no write nobody was acknowledged for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_read_modify_writes_lose_no_acknowledged_write() {
    const WRITES: usize = 1_000;
    with_timeout(Duration::from_secs(300), async {
        let Some(api) = start_apiserver().await else {
            return;
        };
        let pods: Api<Pod> = Api::namespaced(kube_client(api.port), "default");
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "race"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))
        .unwrap();
        let created = pods.create(&PostParams::default(), &pod).await.unwrap();
        let start: i64 = created.metadata.resource_version.unwrap().parse().unwrap();
        let client = |id: usize| {
            let pods = pods.clone();
            async move {
                let (mut acknowledged, mut refused) = (BTreeMap::new(), 0usize);
                let mut i = 0;
                while i < WRITES {
                    let mut current = pods.get("race").await.expect("get");
                    let value = format!("{id}-{i}");
                    current
                        .metadata
                        .annotations
                        .get_or_insert_with(Default::default)
                        .insert("writer".into(), value.clone());
                    match pods.replace("race", &PostParams::default(), &current).await {
                        Ok(written) => {
                            let rv: i64 =
                                written.metadata.resource_version.unwrap().parse().unwrap();
                            assert!(acknowledged.insert(rv, value).is_none(), "rv {rv} twice");
                            i += 1;
                        }
                        Err(kube::Error::Api(status)) if status.code == 409 => refused += 1,
                        Err(e) => panic!("client {id}: {e}"),
                    }
                }
                (acknowledged, refused)
            }
        };
        let ((a, refused_a), (b, refused_b)) = tokio::join!(client(0), client(1));
        let mut acknowledged = a;
        for (rv, value) in b {
            assert!(
                acknowledged.insert(rv, value).is_none(),
                "two writes acknowledged at {rv}"
            );
        }
        assert_eq!(acknowledged.len(), 2 * WRITES);

        let etcd = api.etcd.client().await;
        let events = history::read(
            &etcd,
            "/registry/pods/default/race",
            "/registry/podt",
            start,
            // Inside the range, outside the apiserver's `/registry/pods/`.
            "/registry/podsx",
        )
        .await;
        let written: BTreeMap<i64, String> = events
            .iter()
            .filter(|e| e.key == "/registry/pods/default/race")
            .map(|e| {
                assert!(e.put, "the pod is never deleted");
                let doc: Value = serde_json::from_slice(&e.value).unwrap();
                let writer = doc["metadata"]["annotations"]["writer"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                (e.revision, writer)
            })
            .collect();
        assert_eq!(
            written, acknowledged,
            "etcd's history is exactly the acknowledged writes"
        );
        eprintln!(
            "{} writes acknowledged, {} refused with 409",
            acknowledged.len(),
            refused_a + refused_b
        );
    })
    .await;
}

const SERVICE: &str = "apiVersion: v1
kind: Service
metadata:
  name: front
spec:
  selector: {app: app}
  ports:
  - port: 80
    targetPort: 80
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_patch_replace_diff_rollout_undo_and_kube_rs_cascades() {
    with_timeout(LIMIT, async {
        let Some(api) = start_up(2).await else {
            return;
        };
        let key = "/registry/deployments/default/app";
        let deploy = api.manifest("deploy.yaml", &deployment_yaml(2, "nginx:1.25"));
        api.kubectl.ok(&["apply", "-f", &deploy]).await;
        wait_pods(&api, "app", 2).await;

        // rollout undo sends a JSON patch of the template and the annotations.
        api.kubectl.ok(&["set", "image", "deploy/app", "nginx=nginx:1.26"]).await;
        api.kubectl.ok(&["rollout", "status", "deploy/app", "--timeout=30s"]).await;
        let out = api.kubectl.ok(&["rollout", "undo", "deploy/app"]).await;
        assert_eq!(out, "deployment.apps/app rolled back\n");
        let image = |doc: &Value| doc["spec"]["template"]["spec"]["containers"][0]["image"].clone();
        assert_eq!(image(&api.stored(key).await.unwrap()), "nginx:1.25");
        api.kubectl.ok(&["rollout", "status", "deploy/app", "--timeout=30s"]).await;

        // rollout history: the undo made revision 1 revision 3, as each ReplicaSet's
        // annotation in etcd says.
        let revisions = replica_set_revisions(&api).await;
        assert_eq!(
            revisions,
            BTreeMap::from([(2, "nginx:1.26".to_string()), (3, "nginx:1.25".to_string())])
        );
        let history = api.kubectl.ok(&["rollout", "history", "deploy/app"]).await;
        let rows: Vec<String> = history.lines().skip(1).map(squash).filter(|l| !l.is_empty()).collect();
        assert_eq!(rows, ["REVISION CHANGE-CAUSE", "2 <none>", "3 <none>"], "{history}");
        for (revision, image) in &revisions {
            let revision = format!("--revision={revision}");
            let template = api.kubectl.ok(&["rollout", "history", "deploy/app", &revision]).await;
            assert!(squash(&template).contains(&format!("Image: {image}")), "{template}");
        }

        // patch, each type.
        api.kubectl
            .ok(&["patch", "deploy", "app", "--type", "merge", "-p", r#"{"metadata":{"labels":{"m":"1"}}}"#])
            .await;
        api.kubectl
            .ok(&["patch", "deploy", "app", "--type", "json", "-p", r#"[{"op":"replace","path":"/spec/replicas","value":3}]"#])
            .await;
        api.kubectl
            .ok(&["patch", "deploy", "app", "--type", "strategic", "-p",
                  r#"{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.27"}]}}}}"#])
            .await;
        let doc = api.stored(key).await.unwrap();
        assert_eq!(doc["metadata"]["labels"]["m"], "1");
        assert_eq!(doc["spec"]["replicas"], 3);
        assert_eq!(image(&doc), "nginx:1.27");
        let failed = api
            .kubectl
            .run(&["patch", "deploy", "app", "--type", "json", "-p", r#"[{"op":"test","path":"/spec/replicas","value":9}]"#])
            .await;
        assert_eq!(failed.status.code(), Some(1), "{failed:?}");

        // replace -f, then diff -f writes nothing. kubectl reads the object's
        // resourceVersion and PUTs with it, so a status write of the Deployment controller
        // in between is a 409, as against kube-apiserver: a user runs it again.
        api.kubectl.ok(&["rollout", "status", "deploy/app", "--timeout=30s"]).await;
        eventually(Duration::from_secs(30), "kubectl replace", || async {
            let out = api.kubectl.run(&["replace", "-f", &deploy]).await;
            assert!(
                out.status.success() || out.stderr.contains("Conflict"),
                "kubectl replace: {out:?}"
            );
            out.status.success()
        })
        .await;
        let doc = api.stored(key).await.unwrap();
        assert_eq!((doc["spec"]["replicas"].clone(), image(&doc)), (json!(2), json!("nginx:1.25")));
        api.kubectl
            .ok(&["rollout", "status", "deploy/app", "--timeout=30s"])
            .await;
        let changed = api.manifest("deploy-3.yaml", &deployment_yaml(4, "nginx:1.25"));
        let diff = api.kubectl.run(&["diff", "-f", &changed]).await;
        assert_eq!(diff.status.code(), Some(1), "{diff:?}");
        assert!(diff.stdout.contains("+  replicas: 4"), "{}", diff.stdout);
        assert_eq!(api.stored(key).await.unwrap()["spec"]["replicas"], 2);

        // A Service created and applied again: the endpoints controller follows it.
        let service = api.manifest("svc.yaml", SERVICE);
        assert_eq!(
            api.kubectl.ok(&["apply", "-f", &service]).await,
            "service/front created\n"
        );
        let labelled = SERVICE.replace("  name: front\n", "  name: front\n  labels: {tier: web}\n");
        let service = api.manifest("svc.yaml", &labelled);
        assert_eq!(
            api.kubectl.ok(&["apply", "-f", &service]).await,
            "service/front configured\n"
        );
        eventually(CONVERGE, "the endpoints of front to list app's 2 pods", || async {
            let out = api.kubectl.run(&["get", "endpoints", "front", "-o", "json"]).await;
            let endpoints: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
            endpoints
                .pointer("/subsets/0/addresses")
                .and_then(Value::as_array)
                .is_some_and(|a| a.len() == 2)
        })
        .await;

        // kube-rs deletes with each propagation policy; the garbage collector finishes them.
        let deployments: Api<Deployment> = Api::namespaced(kube_client(api.port), "default");
        wait_pods(&api, "app", 2).await;
        let orphaned = deployments.delete("app", &DeleteParams::orphan()).await.unwrap();
        assert!(orphaned.is_left(), "marked, not yet gone: {orphaned:?}");
        eventually(CONVERGE, "the deployment to go, its ReplicaSets kept", || async {
            api.stored(key).await.is_none()
        })
        .await;
        assert_eq!(pods_of(&api, "app").await.len(), 2, "orphaned pods stay");
        api.kubectl.ok(&["delete", "rs", "--all", "--cascade=orphan"]).await;
        assert_eq!(api.count("/registry/replicasets/default/").await, 0);
        assert_eq!(pods_of(&api, "app").await.len(), 2, "orphaned again");
        api.kubectl.ok(&["delete", "pods", "-l", "app=app"]).await;
        api.kubectl.ok(&["apply", "-f", &deploy]).await;
        wait_pods(&api, "app", 2).await;
        let foreground = deployments.delete("app", &DeleteParams::foreground()).await.unwrap();
        assert!(foreground.is_left(), "marked: {foreground:?}");
        eventually(CONVERGE, "the deployment and its pods to go", || async {
            api.stored(key).await.is_none() && pods_of(&api, "app").await.is_empty()
        })
        .await;
        // Background: gone at once (a Status), the collector deletes what it owned.
        api.kubectl.ok(&["apply", "-f", &deploy]).await;
        wait_pods(&api, "app", 2).await;
        let background = deployments.delete("app", &DeleteParams::background()).await.unwrap();
        assert!(background.is_right(), "a Status: {background:?}");
        assert!(api.stored(key).await.is_none());
        eventually(CONVERGE, "its ReplicaSet and pods to go", || async {
            api.count("/registry/replicasets/default/").await == 0
                && pods_of(&api, "app").await.is_empty()
        })
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_run_expose_edit_and_wait() {
    with_timeout(LIMIT, async {
        let Some(api) = start_up(2).await else {
            return;
        };
        // run and expose POST JSON built by kubectl (`"creationTimestamp":null`, `"status":{}`).
        assert_eq!(
            api.kubectl.ok(&["run", "solo", "--image=nginx"]).await,
            "pod/solo created\n"
        );
        let solo = api.stored("/registry/pods/default/solo").await.unwrap();
        assert_eq!(solo["spec"]["containers"][0]["image"], "nginx", "{solo:#}");
        assert_eq!(solo["metadata"]["labels"]["run"], "solo", "{solo:#}");
        let deploy = api.manifest("deploy.yaml", &deployment_yaml(2, "nginx:1.25"));
        api.kubectl.ok(&["apply", "-f", &deploy]).await;
        assert_eq!(
            api.kubectl
                .ok(&["expose", "deploy", "app", "--port=8080", "--target-port=80"])
                .await,
            "service/app exposed\n"
        );
        assert!(api
            .stored("/registry/services/specs/default/app")
            .await
            .is_some());
        api.kubectl
            .ok(&[
                "wait",
                "--for=condition=Available",
                "deploy/app",
                "--timeout=30s",
            ])
            .await;

        // edit: kubectl's PATCH from what a scripted editor changed.
        let editor = api.kubectl.kubeconfig().with_file_name("editor.sh");
        std::fs::write(
            &editor,
            "#!/bin/sh\nsed -i 's/replicas: 2/replicas: 1/' \"$1\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let edited = api
            .kubectl
            .command(&["edit", "deploy", "app"])
            .env("KUBE_EDITOR", &editor)
            .output()
            .await
            .expect("run kubectl edit");
        assert!(edited.status.success(), "kubectl edit: {edited:?}");
        let key = "/registry/deployments/default/app";
        assert_eq!(api.stored(key).await.unwrap()["spec"]["replicas"], 1);
        wait_pods(&api, "app", 1).await;

        // wait --for=delete follows the pod's delete.
        api.kubectl
            .ok(&["delete", "pod", "solo", "--wait=false"])
            .await;
        api.kubectl
            .ok(&["wait", "--for=delete", "pod/solo", "--timeout=20s"])
            .await;
        assert!(api.stored("/registry/pods/default/solo").await.is_none());
    })
    .await;
}
