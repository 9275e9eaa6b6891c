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

/// Metadata with every field kcm models, plus unknown ones at each level.
fn full_metadata() -> Value {
    json!({
        "name": "web-7c5d79b5bb-x2k9b",
        "namespace": "default",
        "uid": "8d1c",
        "labels": {"app": "web"},
        "annotations": {"note": "x"},
        "creationTimestamp": "2026-11-23T16:00:00Z",
        "generation": 3,
        "deletionTimestamp": "2026-11-23T16:05:00Z",
        "finalizers": ["foregroundDeletion", "example.com/keep"],
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7c5d79b5bb",
             "uid": "41f0", "controller": true, "blockOwnerDeletion": true,
             "futureRefField": {"a": 1}},
            {"apiVersion": "v1beta3", "kind": "Service", "name": "web", "uid": "99aa",
             "controller": false}
        ],
        "managedFields": [{"manager": "kubectl"}]
    })
}

#[test]
fn new_metadata_fields_round_trip_with_unknown_fields() {
    let mut value = valid_rc();
    value["metadata"] = full_metadata();
    value["status"] = json!({"replicas": 2});
    value["futureField"] = json!(true);
    let decoded: ReplicationController = serde_json::from_value(value.clone()).unwrap();
    let meta = &decoded.metadata;
    assert_eq!(meta.generation, 3);
    assert_eq!(
        meta.deletion_timestamp.as_deref(),
        Some("2026-11-23T16:05:00Z")
    );
    assert_eq!(meta.finalizers, ["foregroundDeletion", "example.com/keep"]);
    assert_eq!(meta.owner_references.len(), 2);
    assert_eq!(meta.owner_references[0].block_owner_deletion, Some(true));
    assert_eq!(meta.owner_references[1].controller, Some(false));
    assert!(meta.extra.contains_key("managedFields"));
    assert_eq!(serde_json::to_value(&decoded).unwrap(), value);

    // Through the storage codec too (which adds `apiVersion` and drops nothing else).
    let bytes = serde_json::to_vec(&value).unwrap();
    let key = "/registry/controllers/default/web-7c5d79b5bb-x2k9b";
    let stored: ReplicationController = decode("/registry", key, &bytes, 5).unwrap();
    let mut expected = value.clone();
    expected["apiVersion"] = json!(API_VERSION);
    let encoded: Value = serde_json::from_slice(&encode(&stored).unwrap()).unwrap();
    assert_eq!(encoded, expected);
}

#[test]
fn missing_new_metadata_fields_read_as_empty_and_stay_missing() {
    let mut value = valid_rc();
    value["status"] = json!({"replicas": 0});
    let decoded: ReplicationController = serde_json::from_value(value.clone()).unwrap();
    assert_eq!(decoded.metadata.generation, 0);
    assert_eq!(decoded.metadata.deletion_timestamp, None);
    assert!(decoded.metadata.finalizers.is_empty());
    assert!(decoded.metadata.owner_references.is_empty());
    assert_eq!(serde_json::to_value(&decoded).unwrap(), value);

    let nulls = json!({"generation": null, "finalizers": null, "ownerReferences": null});
    let meta: ObjectMeta = serde_json::from_value(nulls).unwrap();
    assert_eq!(meta, ObjectMeta::default());
}

fn owner(kind: &str, name: &str, controller: Option<bool>) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        controller,
        ..OwnerReference::default()
    }
}

#[track_caller]
fn check_controller_of(references: Vec<OwnerReference>, expected: Option<&str>) {
    let meta = ObjectMeta {
        owner_references: references,
        ..ObjectMeta::default()
    };
    assert_eq!(controller_of(&meta).map(|r| r.name.as_str()), expected);
}

#[test]
fn controller_of_is_the_reference_with_controller_true() {
    check_controller_of(vec![], None);
    check_controller_of(vec![owner("ReplicaSet", "a", None)], None);
    check_controller_of(vec![owner("ReplicaSet", "a", Some(false))], None);
    check_controller_of(vec![owner("ReplicaSet", "a", Some(true))], Some("a"));
    check_controller_of(
        vec![
            owner("Service", "s", Some(false)),
            owner("ReplicaSet", "b", Some(true)),
        ],
        Some("b"),
    );
    // Invalid, but if etcdctl wrote it anyway: the first one, as GetControllerOf.
    check_controller_of(
        vec![
            owner("ReplicaSet", "c", Some(true)),
            owner("Deployment", "d", Some(true)),
        ],
        Some("c"),
    );
}

#[test]
fn owner_reference_validation_rules() {
    let references = |refs: Vec<OwnerReference>| {
        move |v: &mut Value| v["metadata"]["ownerReferences"] = serde_json::to_value(&refs).unwrap()
    };
    let mut two = valid_rc();
    references(vec![
        owner("ReplicaSet", "a", Some(true)),
        owner("Service", "s", Some(false)),
        owner("Deployment", "d", None),
    ])(&mut two);
    validate(&rc(two)).unwrap();

    check_invalid(
        references(vec![
            owner("ReplicaSet", "a", Some(true)),
            owner("Deployment", "d", Some(true)),
        ]),
        "metadata.ownerReferences",
        "only one reference can have controller set to true, found 2: ReplicaSet/a, Deployment/d",
    );
    for (field, clear) in [
        (
            "apiVersion",
            (|r: &mut OwnerReference| r.api_version.clear()) as fn(&mut _),
        ),
        ("kind", |r| r.kind.clear()),
        ("name", |r| r.name.clear()),
        ("uid", |r| r.uid.clear()),
    ] {
        let mut reference = owner("ReplicaSet", "a", Some(true));
        clear(&mut reference);
        check_invalid(
            references(vec![owner("Service", "s", None), reference]),
            &format!("metadata.ownerReferences[1].{field}"),
            "required",
        );
    }
}

#[track_caller]
fn check_generation(old: Option<Value>, new: Value, expected: i64) {
    let old: Option<ReplicationController> = old.map(rc);
    let mut new = rc(new);
    set_generation(old.as_ref(), &mut new);
    assert_eq!(new.metadata.generation, expected);
}

#[test]
fn generation_is_one_on_create_and_counts_spec_changes() {
    let stored = |generation: i64| {
        let mut value = valid_rc();
        value["metadata"]["generation"] = json!(generation);
        value
    };
    let changed = |patch: fn(&mut Value)| {
        let mut value = stored(4);
        patch(&mut value);
        value
    };
    // Create: 1, whatever the document says.
    check_generation(None, valid_rc(), 1);
    check_generation(None, stored(9), 1);
    // Same spec: unchanged, also when the writer forged another number.
    check_generation(Some(stored(4)), stored(4), 4);
    check_generation(Some(stored(4)), stored(17), 4);
    // Status, labels, annotations, owners and unknown top-level fields are not spec.
    check_generation(
        Some(stored(4)),
        changed(|v| v["status"] = json!({"replicas": 2})),
        4,
    );
    check_generation(
        Some(stored(4)),
        changed(|v| v["metadata"]["labels"] = json!({"a": "b"})),
        4,
    );
    check_generation(Some(stored(4)), changed(|v| v["futureField"] = json!(1)), 4);
    // Any spec change, unknown spec fields included: +1.
    check_generation(
        Some(stored(4)),
        changed(|v| v["spec"]["replicas"] = json!(7)),
        5,
    );
    check_generation(
        Some(stored(4)),
        changed(|v| v["spec"]["minReadySeconds"] = json!(5)),
        5,
    );
    check_generation(
        Some(stored(4)),
        changed(|v| v["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2")),
        5,
    );
    // A document kcm never wrote has generation 0; its first spec change makes it 1.
    check_generation(
        Some(valid_rc()),
        changed(|v| v["spec"]["replicas"] = json!(7)),
        1,
    );
    check_generation(Some(valid_rc()), valid_rc(), 0);
}

#[test]
fn generation_leaves_kinds_without_a_spec_alone() {
    let old = Endpoints::default();
    let mut new = Endpoints {
        endpoints: vec!["10.0.0.1:80".into()],
        ..Endpoints::default()
    };
    new.metadata.generation = 3;
    set_generation(Some(&old), &mut new);
    assert_eq!(new.metadata.generation, 3);
    set_generation(None, &mut new);
    assert_eq!(new.metadata.generation, 3);

    let mut pod = Pod::default();
    set_generation(None, &mut pod);
    assert_eq!(pod.metadata.generation, 1);
}

#[test]
fn api_version_is_per_kind_and_checked_on_decode() {
    assert_eq!(<Pod as Object>::API_VERSION, "v1beta3");
    assert_eq!(<ReplicationController as Object>::API_VERSION, API_VERSION);
    assert_eq!(<Service as Object>::API_VERSION, API_VERSION);
    assert_eq!(<Endpoints as Object>::API_VERSION, API_VERSION);
    let check = |doc: &str, expected: Result<(), &str>| {
        let decoded = decode::<Pod>("/registry", "/registry/pods/ns/p", doc.as_bytes(), 1);
        match (decoded, expected) {
            (Ok(_), Ok(())) => {}
            (Err(e), Err(part)) => assert!(e.to_string().contains(part), "{e:#}"),
            (other, expected) => panic!("{doc}: {other:?}, expected {expected:?}"),
        }
    };
    check("{}", Ok(()));
    check(r#"{"apiVersion": "v1beta3"}"#, Ok(()));
    check(
        r#"{"apiVersion": "v1"}"#,
        Err(r#"apiVersion is "v1", expected "v1beta3""#),
    );
    check(
        r#"{"apiVersion": "apps/v1"}"#,
        Err("apiVersion is \"apps/v1\""),
    );
}
