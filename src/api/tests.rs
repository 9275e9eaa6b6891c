//! Unit tests of the object model: validation, round trips, the codec and keys.

use super::*;
use serde_json::json;

fn rc(value: Value) -> ReplicationController {
    serde_json::from_value(value).unwrap()
}

fn valid_rc() -> Value {
    json!({
        "kind": "ReplicationController",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 3,
            "selector": {"app": "web"},
            "template": {
                "metadata": {"labels": {"app": "web", "tier": "front"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx",
                    "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}]}]}
            }
        }
    })
}

#[track_caller]
fn check_invalid(patch: impl FnOnce(&mut Value), field: &str, message_part: &str) {
    let mut value = valid_rc();
    patch(&mut value);
    let err = validate(&rc(value)).unwrap_err();
    assert!(
        err.errors
            .iter()
            .any(|e| e.field == field && e.message.contains(message_part)),
        "expected {field}: ..{message_part}.. in {err}"
    );
    assert!(err
        .to_string()
        .starts_with("invalid ReplicationController \""));
}

#[test]
fn valid_controller_passes() {
    validate(&rc(valid_rc())).unwrap();
}

#[test]
fn controller_validation_rules() {
    check_invalid(
        |v| v["spec"]["selector"] = json!({}),
        "spec.selector",
        "required",
    );
    check_invalid(
        |v| v["spec"]["replicas"] = json!(-1),
        "spec.replicas",
        ">= 0",
    );
    check_invalid(
        |v| {
            v["spec"]
                .as_object_mut()
                .unwrap()
                .remove("template")
                .map(drop)
                .unwrap()
        },
        "spec.template",
        "required",
    );
    check_invalid(
        |v| v["spec"]["selector"] = json!({"app": "db"}),
        "spec.template.metadata.labels",
        "does not match",
    );
    check_invalid(
        |v| v["metadata"]["name"] = json!("Web_1"),
        "metadata.name",
        "Web_1",
    );
    check_invalid(
        |v| {
            v["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("namespace")
                .map(drop)
                .unwrap()
        },
        "metadata.namespace",
        "required",
    );
    check_invalid(
        |v| v["metadata"]["labels"] = json!({"bad key": "x"}),
        "metadata.labels",
        "bad key",
    );
}

#[test]
fn service_validation_rules() {
    let service = |spec: Value| -> Service {
        serde_json::from_value(json!({"metadata": {"name": "s", "namespace": "ns"}, "spec": spec}))
            .unwrap()
    };
    validate(&service(json!({"selector": {"a": "b"}, "port": 80}))).unwrap();
    let fields = |spec| {
        validate(&service(spec))
            .unwrap_err()
            .errors
            .into_iter()
            .map(|e| e.field)
            .collect::<Vec<_>>()
    };
    assert_eq!(fields(json!({"port": 80})), ["spec.selector"]);
    assert_eq!(
        fields(json!({"selector": {"a": "b"}, "port": 0})),
        ["spec.port"]
    );
    assert_eq!(
        fields(json!({"selector": {"a": "b"}, "port": 65536})),
        ["spec.port"]
    );
}

#[test]
fn unknown_fields_survive_a_round_trip() {
    let mut value = valid_rc();
    value["futureField"] = json!({"x": [1, 2]});
    value["metadata"]["generation"] = json!(7);
    value["spec"]["minReadySeconds"] = json!(5);
    value["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({"cpu": "1"});
    value["status"] = json!({"replicas": 2, "observedGeneration": 7});
    let decoded: ReplicationController = serde_json::from_value(value.clone()).unwrap();
    let encoded = serde_json::to_value(&decoded).unwrap();
    assert_eq!(encoded, value);
}

#[test]
fn decode_fills_version_and_key_fields_and_ignores_stored_version() {
    let doc = br#"{"metadata": {"resourceVersion": "junk", "labels": null}, "spec": {}}"#;
    let pod: Pod = decode("/registry", "/registry/pods/ns1/p1", doc, 42).unwrap();
    assert_eq!(pod.metadata.resource_version, Some(ResourceVersion(42)));
    assert_eq!(pod.metadata.key(), "ns1/p1");
    assert_eq!(pod.phase(), PodPhase::Pending);
    assert!(pod.is_active());
    let encoded = String::from_utf8(encode(&pod).unwrap()).unwrap();
    assert!(!encoded.contains("resourceVersion"), "{encoded}");
    assert!(
        encoded.contains(r#""kind":"Pod","apiVersion":"v1beta3""#),
        "{encoded}"
    );
}

#[test]
fn decode_errors_name_the_problem() {
    let check = |doc: &str, part: &str| {
        let err = decode::<Pod>("/registry", "/registry/pods/ns/p", doc.as_bytes(), 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains(part), "{err:?} should contain {part:?}");
    };
    check("{not json", "key must be a string");
    check(r#"{"kind": "Service"}"#, "kind is \"Service\"");
    check(
        r#"{"metadata": {"name": "other"}}"#,
        "metadata.name \"other\" does not match",
    );
    check(
        r#"{"status": {"phase": "Waiting"}}"#,
        "unknown variant `Waiting`",
    );
}

#[test]
fn int_or_string() {
    let spec = |v: Value| {
        serde_json::from_value::<ServiceSpec>(json!({"containerPort": v}))
            .unwrap()
            .container_port
    };
    assert_eq!(spec(json!(8080)), Some(IntOrString::Int(8080)));
    assert_eq!(
        spec(json!("http")),
        Some(IntOrString::String("http".into()))
    );
}

#[test]
fn keys() {
    assert_eq!(
        object_key::<Service>("/registry", "ns", "s"),
        "/registry/services/specs/ns/s"
    );
    assert_eq!(
        list_key::<Endpoints>("/registry", Some("ns")),
        "/registry/services/endpoints/ns/"
    );
    assert_eq!(
        list_key::<ReplicationController>("/r", None),
        "/r/controllers/"
    );
    assert_eq!(
        parse_key::<Pod>("/registry", "/registry/pods/ns/p"),
        Some(("ns", "p"))
    );
    for other in [
        "/registry/pods/ns",
        "/registry/pods/",
        "/registry/pods/ns/p/x",
        "/registry/controllers/ns/p",
        "/registry/pods//p",
    ] {
        assert_eq!(parse_key::<Pod>("/registry", other), None, "{other}");
    }
    assert_eq!(normalize_prefix("registry/").unwrap(), "/registry");
    assert!(normalize_prefix("/").is_err());
}

#[test]
fn resource_version_parsing() {
    assert_eq!(
        "17".parse::<ResourceVersion>().unwrap(),
        ResourceVersion(17)
    );
    assert!("abc".parse::<ResourceVersion>().is_err());
    assert!("-1".parse::<ResourceVersion>().is_err());
}
