use serde_json::json;

use super::*;
use crate::api::Pod;

#[test]
fn paths_are_kube_apiservers() {
    assert_eq!(
        collection_path(StoredKind::Pod, Some("default")),
        "/api/v1/namespaces/default/pods"
    );
    assert_eq!(
        object_path(StoredKind::ReplicaSet, "ns", "web"),
        "/apis/apps/v1/namespaces/ns/replicasets/web"
    );
    assert_eq!(
        collection_path(StoredKind::ReplicationController, None),
        "/api/v1/replicationcontrollers"
    );
}

#[test]
fn a_served_pod_decodes_as_its_stored_document_at_its_resource_version() {
    let served = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "prod", "resourceVersion": "42",
                     "labels": {"app": "web"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx"}]},
    });
    let pod: Pod = decode(StoredKind::Pod, served.clone()).unwrap();
    assert_eq!(pod.metadata.resource_version, Some(ResourceVersion(42)));
    assert_eq!(
        (pod.metadata.namespace.as_str(), pod.metadata.name.as_str()),
        ("prod", "web-1")
    );
    // Stored as kcm stores it (v1beta3: the node is `spec.host`), without the version.
    let (bytes, namespace, name, revision) = stored_value(StoredKind::Pod, served);
    let stored: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        (namespace.as_str(), name.as_str(), revision),
        ("prod", "web-1", 42)
    );
    assert_eq!(stored["spec"]["host"], "node-1");
    assert!(
        stored["metadata"].get("resourceVersion").is_none(),
        "{stored}"
    );
    // And back: what a write sends carries the version as its precondition.
    let body = super::served(StoredKind::Pod, &pod);
    assert_eq!(body["metadata"]["resourceVersion"], "42");
    assert_eq!(body["spec"]["nodeName"], "node-1");
    assert_eq!(body["apiVersion"], "v1");
}

#[test]
fn an_answer_that_is_not_the_kind_is_a_decode_error_naming_it() {
    let served = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "x"}, "spec": 7});
    let error = decode::<Pod>(StoredKind::Pod, served).unwrap_err();
    assert!(matches!(error, StorageError::Decode(_)), "{error}");
}

#[test]
fn statuses_map_to_the_registrys_errors() {
    let status = |code: u16, reason: &str| RequestError::Status {
        code,
        reason: reason.to_string(),
        message: "m".to_string(),
    };
    let key = || "k".to_string();
    assert!(matches!(
        status(404, "NotFound").into_storage("get", key()),
        StorageError::NotFound { .. }
    ));
    assert!(matches!(
        status(409, "AlreadyExists").into_storage("create", key()),
        StorageError::AlreadyExists { .. }
    ));
    assert!(matches!(
        status(409, "Conflict").into_storage("update", key()),
        StorageError::Conflict { .. }
    ));
    assert!(matches!(
        status(403, "Forbidden").into_storage("create", key()),
        StorageError::BadRequest { .. }
    ));
    let other = RequestError::Transport("connection refused".into()).into_storage("get", key());
    assert!(
        other
            .to_string()
            .contains("through the API: connection refused"),
        "{other}"
    );
}

#[test]
fn a_revision_is_the_resource_version_or_zero() {
    assert_eq!(
        revision_of(&json!({"metadata": {"resourceVersion": "7"}})),
        7
    );
    assert_eq!(
        revision_of(&json!({"metadata": {"resourceVersion": "x"}})),
        0
    );
    assert_eq!(revision_of(&json!({})), 0);
}

#[test]
fn a_429_or_5xx_with_retry_after_is_sent_again_after_it_and_nothing_else_is() {
    let header = |value: &str| http::HeaderValue::from_str(value).unwrap();
    let one = Some(Duration::from_secs(1));
    assert_eq!(retry_after(429, Some(&header("1"))), one);
    assert_eq!(retry_after(503, Some(&header(" 1 "))), one);
    assert_eq!(retry_after(500, Some(&header("0"))), Some(Duration::ZERO));
    // A long wait is cut to the most a request may wait for.
    assert_eq!(
        retry_after(429, Some(&header("3600"))),
        Some(MAX_RETRY_AFTER)
    );
    // Without a Retry-After in seconds, or for any other code, the answer is final.
    assert_eq!(retry_after(429, None), None);
    assert_eq!(
        retry_after(503, Some(&header("Wed, 21 Oct 2015 07:28:00 GMT"))),
        None
    );
    for code in [200, 201, 400, 404, 409, 422] {
        assert_eq!(retry_after(code, Some(&header("1"))), None, "{code}");
    }
}

#[test]
fn a_refusal_is_the_servers_status_or_the_http_status_with_its_body() {
    let status = refusal(
        http::StatusCode::TOO_MANY_REQUESTS,
        br#"{"kind":"Status","code":429,"reason":"TooManyRequests","message":"too many"}"#,
    );
    assert_eq!(status.to_string(), "429 TooManyRequests: too many");
    // kube-apiserver's in-flight 429 is plain text.
    let text = refusal(
        http::StatusCode::TOO_MANY_REQUESTS,
        b"Too many requests, please try again later.\n",
    );
    assert_eq!(
        text.to_string(),
        "429 Too Many Requests: Too many requests, please try again later."
    );
    assert_eq!(text.code(), Some(429));
}

#[test]
fn a_429_cuts_the_cap_a_failed_connection_or_a_5xx_leaves_it_and_any_other_answer_grows_it() {
    let status = |code: u16| RequestError::Status {
        code,
        reason: String::new(),
        message: String::new(),
    };
    let lost = RequestError::Transport("connection refused".to_string());
    assert_eq!(counts_as(None), gate::Answer::Served);
    assert_eq!(counts_as(Some(&status(429))), gate::Answer::Refused);
    assert_eq!(counts_as(Some(&lost)), gate::Answer::Lost);
    for code in [500, 503, 504] {
        assert_eq!(counts_as(Some(&status(code))), gate::Answer::Lost, "{code}");
    }
    for code in [400, 404, 409, 422] {
        assert_eq!(
            counts_as(Some(&status(code))),
            gate::Answer::Served,
            "{code}"
        );
    }
}
