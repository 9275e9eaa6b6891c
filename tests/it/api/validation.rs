//! kube-apiserver's validation and status codes where kcm used to differ (issue 35), over
//! plain HTTP against `kcm apiserver` on a real etcd: metadata checked on every write of
//! every kind (annotation keys, the 256 KiB annotation total, label and finalizer
//! syntax), a pod's container list (at least one, names unique, in pods and in the
//! templates of the replicated kinds), 413 for an object over etcd's request limit, a
//! negative watch `timeoutSeconds`, and percent-escaped path segments. Each refusal is
//! one 422 (or 400, 413) `Status` with kube-apiserver's causes, and nothing is written.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::apiserver::apiserver;
use crate::support::kcm::{http_get, http_request, HttpResponse};
use crate::support::objects::current_revision;
use crate::support::{start_etcd, start_etcd_with, with_timeout};

const LIMIT: Duration = Duration::from_secs(90);

const PODS: &str = "/api/v1/namespaces/default/pods";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
           "data": {"k": "v"}})
}

/// A replicated kind's object (`kind` of `apiVersion`) whose pod template has `containers`.
fn replicated(api_version: &str, kind: &str, name: &str, containers: Value) -> Value {
    let selector = if kind == "ReplicationController" {
        json!({"app": name})
    } else {
        json!({"matchLabels": {"app": name}})
    };
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name},
           "spec": {"replicas": 1, "selector": selector,
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": containers}}}})
}

fn body(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).expect("encode")
}

async fn post(port: u16, path: &str, object: &Value) -> HttpResponse {
    http_request(port, "POST", path, None, &body(object)).await
}

/// `response` is a 422 `Invalid` Status whose causes include `(field, message)`, the
/// message starting as given.
#[track_caller]
fn assert_invalid(what: &str, response: &HttpResponse, field: &str, message: &str) {
    assert_eq!(response.status, 422, "{what}: {response:?}");
    let status = response.json();
    assert_eq!(
        (&status["kind"], &status["reason"], &status["code"]),
        (&json!("Status"), &json!("Invalid"), &json!(422)),
        "{what}: {status}"
    );
    let causes = status["details"]["causes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        causes.iter().any(|cause| cause["field"] == field
            && cause["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(message))),
        "{what}: no cause {field}: {message}... in {status}"
    );
    let text = status["message"].as_str().unwrap_or_default();
    assert!(
        text.contains(&format!("{field}: {message}")),
        "{what}: the message names the field: {text}"
    );
}

#[tokio::test]
async fn metadata_is_validated_on_every_write_of_every_kind() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (_apiserver, port) = apiserver(&etcd, &[]).await;
        let client = etcd.client().await;
        let revision = current_revision(&client).await;

        // Creates of a typed kind, a document, a Namespace and an apps kind.
        let bad_annotation = json!({"a b/c": "x"});
        let deployments = "/apis/apps/v1/namespaces/default/deployments";
        let deployment = replicated(
            "apps/v1",
            "Deployment",
            "web",
            json!([{"name": "c", "image": "i"}]),
        );
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}});
        for (path, mut object) in [
            (PODS, pod("p")),
            (CONFIGMAPS, configmap("cm")),
            ("/api/v1/namespaces", namespace.clone()),
            (deployments, deployment.clone()),
        ] {
            object["metadata"]["annotations"] = bad_annotation.clone();
            let response = post(port, path, &object).await;
            assert_invalid(
                path,
                &response,
                "metadata.annotations",
                "Invalid value: \"a b/c\": ",
            );
        }
        // The total of keys and values: 256 KiB passes, one byte more does not.
        let mut big = configmap("big");
        big["metadata"]["annotations"] = json!({"k": "x".repeat(256 * 1024)});
        let response = post(port, CONFIGMAPS, &big).await;
        assert_invalid(
            "annotations over 256 KiB",
            &response,
            "metadata.annotations",
            "Too long: may not be more than 262144 bytes",
        );
        let mut big_pod = pod("big");
        big_pod["metadata"]["annotations"] = json!({"k": "x".repeat(256 * 1024)});
        let response = post(port, PODS, &big_pod).await;
        assert_invalid(
            "a pod's annotations over 256 KiB",
            &response,
            "metadata.annotations",
            "Too long",
        );
        // Labels and finalizers.
        let mut labelled = configmap("labelled");
        labelled["metadata"]["labels"] = json!({"app": "not valid"});
        let response = post(port, CONFIGMAPS, &labelled).await;
        assert_invalid(
            "a label value",
            &response,
            "metadata.labels",
            "Invalid value: \"not valid\": ",
        );
        let mut long_label = namespace.clone();
        long_label["metadata"]["labels"] = json!({"k": "x".repeat(64)});
        let response = post(port, "/api/v1/namespaces", &long_label).await;
        assert_invalid(
            "a 64-character label value",
            &response,
            "metadata.labels",
            "Invalid value: \"xxx",
        );
        for (path, mut object) in [(PODS, pod("f")), (CONFIGMAPS, configmap("f"))] {
            object["metadata"]["finalizers"] = json!(["example.com/ok", "not ok"]);
            let response = post(port, path, &object).await;
            assert_invalid(
                path,
                &response,
                "metadata.finalizers",
                "Invalid value: \"not ok\": ",
            );
        }
        assert_eq!(current_revision(&client).await, revision, "nothing written");

        // What passes: annotation keys compared in lower case, 256 KiB exactly.
        let mut fine = pod("fine");
        fine["metadata"]["annotations"] =
            json!({"Example.com/Key": "x", "k": "x".repeat(256 * 1024 - 16 - 1 - 1)});
        fine["metadata"]["finalizers"] = json!(["example.com/f"]);
        let response = post(port, PODS, &fine).await;
        assert_eq!(response.status, 201, "{response:?}");
        let response = post(port, CONFIGMAPS, &configmap("cm")).await;
        assert_eq!(response.status, 201, "{response:?}");

        // Updates: PUT and the three patch types, typed kinds and documents alike.
        let revision = current_revision(&client).await;
        let merge = Some("application/merge-patch+json");
        let annotate = br#"{"metadata": {"annotations": {"a b/c": "x"}}}"#;
        for path in [format!("{PODS}/fine"), format!("{CONFIGMAPS}/cm")] {
            let response = http_request(port, "PATCH", &path, merge, annotate).await;
            assert_invalid(
                &path,
                &response,
                "metadata.annotations",
                "Invalid value: \"a b/c\": ",
            );
            let json_patch =
                br#"[{"op": "add", "path": "/metadata/labels", "value": {"-bad": "x"}}]"#;
            let response = http_request(
                port,
                "PATCH",
                &path,
                Some("application/json-patch+json"),
                json_patch,
            )
            .await;
            assert_invalid(
                &path,
                &response,
                "metadata.labels",
                "Invalid value: \"-bad\": ",
            );
        }
        let (status, current) = http_get(port, &format!("{CONFIGMAPS}/cm"))
            .await
            .expect("get");
        assert_eq!(status, 200);
        let mut current: Value = serde_json::from_str(&current).expect("JSON");
        current["metadata"]["finalizers"] = json!(["a/b/c"]);
        let response = http_request(
            port,
            "PUT",
            &format!("{CONFIGMAPS}/cm"),
            None,
            &body(&current),
        )
        .await;
        assert_invalid(
            "a PUT",
            &response,
            "metadata.finalizers",
            "Invalid value: \"a/b/c\": ",
        );
        assert_eq!(current_revision(&client).await, revision, "nothing written");
        // A valid label patch still applies.
        let response = http_request(
            port,
            "PATCH",
            &format!("{PODS}/fine"),
            merge,
            br#"{"metadata": {"labels": {"tier": "web"}}}"#,
        )
        .await;
        assert_eq!(response.status, 200, "{response:?}");
    })
    .await;
}

#[tokio::test]
async fn a_pod_needs_containers_with_unique_names_in_pods_and_templates() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (_apiserver, port) = apiserver(&etcd, &[]).await;
        let client = etcd.client().await;
        let revision = current_revision(&client).await;

        let mut none = pod("none");
        none["spec"] = json!({});
        assert_invalid(
            "no containers",
            &post(port, PODS, &none).await,
            "spec.containers",
            "Required value",
        );
        none["spec"] = json!({"containers": []});
        assert_invalid(
            "an empty list",
            &post(port, PODS, &none).await,
            "spec.containers",
            "Required value",
        );
        let mut twice = pod("twice");
        twice["spec"]["containers"] =
            json!([{"name": "x", "image": "a"}, {"name": "x", "image": "b"}]);
        assert_invalid(
            "two containers named x",
            &post(port, PODS, &twice).await,
            "spec.containers[1].name",
            "Duplicate value: \"x\"",
        );
        let mut init = pod("init");
        init["spec"]["initContainers"] = json!([{"name": "c", "image": "busybox"}]);
        assert_invalid(
            "an init container named as a container",
            &post(port, PODS, &init).await,
            "spec.initContainers[0].name",
            "Duplicate value: \"c\"",
        );
        let duplicate = json!([{"name": "x", "image": "a"}, {"name": "x", "image": "b"}]);
        for (path, api_version, kind) in [
            (
                "/api/v1/namespaces/default/replicationcontrollers",
                "v1",
                "ReplicationController",
            ),
            (
                "/apis/apps/v1/namespaces/default/replicasets",
                "apps/v1",
                "ReplicaSet",
            ),
            (
                "/apis/apps/v1/namespaces/default/deployments",
                "apps/v1",
                "Deployment",
            ),
        ] {
            let object = replicated(api_version, kind, "dup", duplicate.clone());
            let response = post(port, path, &object).await;
            assert_invalid(
                kind,
                &response,
                "spec.template.spec.containers[1].name",
                "Duplicate value: \"x\"",
            );
            let object = replicated(api_version, kind, "empty", json!([]));
            let response = post(port, path, &object).await;
            assert_invalid(
                kind,
                &response,
                "spec.template.spec.containers",
                "Required value",
            );
        }
        assert_eq!(current_revision(&client).await, revision, "nothing written");

        // An update that changes the template is checked too.
        let rcs = "/api/v1/namespaces/default/replicationcontrollers";
        let rc = replicated(
            "v1",
            "ReplicationController",
            "web",
            json!([{"name": "c", "image": "i"}]),
        );
        assert_eq!(post(port, rcs, &rc).await.status, 201);
        let response = http_request(
            port,
            "PATCH",
            &format!("{rcs}/web"),
            Some("application/merge-patch+json"),
            br#"{"spec": {"template": {"spec": {"containers": []}}}}"#,
        )
        .await;
        assert_invalid(
            "a patch emptying the template",
            &response,
            "spec.template.spec.containers",
            "Required value",
        );
    })
    .await;
}

#[tokio::test]
async fn an_object_over_etcds_request_limit_is_413_not_503() {
    with_timeout(LIMIT, async {
        // etcd's --max-request-bytes (1.5 MiB unless set) lowered, so that an object under
        // the apiserver's 3 MiB body limit and its 256 KiB annotation total exceeds it.
        let Some(etcd) = start_etcd_with(&["--max-request-bytes", "65536"]).await else {
            return;
        };
        let (_apiserver, port) = apiserver(&etcd, &[]).await;
        let mut big = configmap("big");
        big["data"] = json!({"k": "x".repeat(100 * 1024)});
        let mut big_pod = pod("big");
        big_pod["metadata"]["annotations"] = json!({"note": "x".repeat(100 * 1024)});
        for (path, object) in [(CONFIGMAPS, &big), (PODS, &big_pod)] {
            let response = post(port, path, object).await;
            assert_too_large(path, &response);
        }
        // An update that grows a small object past the limit.
        for (path, object) in [(CONFIGMAPS, configmap("small")), (PODS, pod("small"))] {
            assert_eq!(post(port, path, &object).await.status, 201, "{path}");
            let patch = json!({"metadata": {"annotations": {"note": "x".repeat(100 * 1024)}}});
            let response = http_request(
                port,
                "PATCH",
                &format!("{path}/small"),
                Some("application/merge-patch+json"),
                &body(&patch),
            )
            .await;
            assert_too_large(path, &response);
        }
    })
    .await;
}

#[track_caller]
fn assert_too_large(what: &str, response: &HttpResponse) {
    assert_eq!(response.status, 413, "{what}: {response:?}");
    let status = response.json();
    assert_eq!(
        status["reason"], "RequestEntityTooLarge",
        "{what}: {status}"
    );
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Request entity too large: ")
            && message.contains("request is too large")
            && message.contains("--max-request-bytes"),
        "{what}: the message names etcd's limit: {message}"
    );
}

#[tokio::test]
async fn a_negative_watch_timeout_ends_the_watch_at_once() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (_apiserver, port) = apiserver(&etcd, &[]).await;
        assert_eq!(post(port, PODS, &pod("p")).await.status, 201);
        for kind in [PODS, CONFIGMAPS] {
            // `http_get` gives up after 5 s: a watch that stays open answers nothing.
            let path = format!("{kind}?watch=true&timeoutSeconds=-5");
            let (status, body) = http_get(port, &path)
                .await
                .unwrap_or_else(|| panic!("{path}: the watch did not end"));
            assert_eq!(status, 200, "{path}: {body}");
            for line in body.lines().filter(|l| !l.trim().is_empty()) {
                let event: Value = serde_json::from_str(line).expect("a watch event");
                assert_eq!(
                    event["type"], "ADDED",
                    "{path}: only the initial state: {line}"
                );
            }
        }
    })
    .await;
}

#[tokio::test]
async fn percent_escaped_path_segments_name_the_decoded_object_and_no_other() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (_apiserver, port) = apiserver(&etcd, &[]).await;
        assert_eq!(post(port, PODS, &pod("abc")).await.status, 201);
        assert_eq!(post(port, CONFIGMAPS, &configmap("abc")).await.status, 201);
        for path in [
            "/api/v1/namespaces/default/pods/%61bc",
            "/api/v1/namespaces/%64efault/pods/abc",
            "/api/v1/namespaces/default/%70ods/a%62%63",
            "/api/v1/namespaces/default/configmaps/%61bc",
        ] {
            let (status, body) = http_get(port, path).await.expect("an answer");
            assert_eq!(status, 200, "{path}: {body}");
            let object: Value = serde_json::from_str(&body).expect("JSON");
            assert_eq!(object["metadata"]["name"], "abc", "{path}");
            assert_eq!(object["metadata"]["namespace"], "default", "{path}");
        }
        // A decoded `/`, `.` or `..` is no name; an encoded slash never separates segments.
        for path in [
            "/api/v1/namespaces/default/pods/x%2F..%2Fabc",
            "/api/v1/namespaces/kube-system%2F..%2Fdefault/pods/abc",
            "/api/v1/namespaces/default/pods/%2E%2E",
            "/api/v1/namespaces/default/configmaps/abc%2Fstatus",
            "/api/v1/namespaces/default/pods/abc%zz",
        ] {
            let (status, body) = http_get(port, path).await.expect("an answer");
            assert_eq!(status, 400, "{path}: {body}");
            let status: Value = serde_json::from_str(&body).expect("a Status");
            assert_eq!(status["reason"], "BadRequest", "{path}: {status}");
            let response = http_request(port, "DELETE", path, None, b"").await;
            assert_eq!(response.status, 400, "DELETE {path}: {response:?}");
        }
        let response = http_request(
            port,
            "DELETE",
            "/api/v1/namespaces/default/pods/%61bc",
            None,
            b"",
        )
        .await;
        assert_eq!(response.status, 200, "{response:?}");
        let (status, _) = http_get(port, "/api/v1/namespaces/default/configmaps/abc")
            .await
            .expect("get");
        assert_eq!(status, 200, "the configmap of the same name is untouched");
    })
    .await;
}
