//! Unit tests of the object model: validation, round trips, the codec and keys.

use super::*;
use crate::labels;
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
    check_invalid_as::<ReplicationController>(valid_rc(), patch, field, message_part);
}

/// Asserts that `valid` patched by `patch`, decoded as `T`, fails validation with an
/// error on `field` whose message contains `message_part`, the whole error naming the kind.
#[track_caller]
pub(super) fn check_invalid_as<T: Object>(
    valid: Value,
    patch: impl FnOnce(&mut Value),
    field: &str,
    message_part: &str,
) {
    let mut value = valid;
    patch(&mut value);
    let object: T = serde_json::from_value(value).unwrap();
    let err = validate(&object).unwrap_err();
    assert!(
        err.errors
            .iter()
            .any(|e| e.field == field && e.message.contains(message_part)),
        "expected {field}: ..{message_part}.. in {err}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("invalid {} \"", T::KIND)),
        "{err}"
    );
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
        |v| v["metadata"]["generation"] = json!(-1),
        "metadata.generation",
        ">= 0",
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

// ---------------------------------------------------------------------------------------
// LabelSelector

fn label_selector(value: Value) -> LabelSelector {
    serde_json::from_value(value).unwrap()
}

fn label_set(pairs: &[(&str, &str)]) -> labels::Set {
    pairs.iter().copied().collect()
}

/// Converts `value` and checks the result: the selector's string form, or a part of the
/// error. Validation must agree: a selector converts exactly when it validates.
#[track_caller]
fn check_as_selector(value: Value, expected: Result<&str, &str>) {
    let selector = label_selector(value.clone());
    let mut errors = Vec::new();
    validate_label_selector(&selector, "spec.selector", &mut errors);
    match (selector.to_selector(), expected) {
        (Ok(converted), Ok(text)) => {
            assert_eq!(converted.to_string(), text, "{value}");
            assert_eq!(errors, [], "{value} converts, so it must validate");
        }
        (Err(err), Err(part)) => {
            assert!(err.to_string().contains(part), "{value}: {err}");
            assert_ne!(
                errors,
                [],
                "{value} does not convert, so it must not validate"
            );
        }
        (other, expected) => panic!("{value}: {other:?}, expected {expected:?}"),
    }
}

#[test]
fn label_selector_as_selector_ands_labels_and_expressions() {
    check_as_selector(json!({}), Ok(""));
    check_as_selector(
        json!({"matchLabels": null, "matchExpressions": null}),
        Ok(""),
    );
    check_as_selector(json!({"matchLabels": {"app": "web"}}), Ok("app=web"));
    check_as_selector(
        json!({"matchLabels": {"tier": "front", "app": "web"},
               "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]}]}),
        Ok("app=web,env in (dev,prod),tier=front"),
    );
    check_as_selector(
        json!({"matchExpressions": [
            {"key": "a", "operator": "NotIn", "values": ["x"]},
            {"key": "b", "operator": "Exists"},
            {"key": "c", "operator": "DoesNotExist", "values": []}]}),
        Ok("a notin (x),b,!c"),
    );
    // `k: ""` must exist with the empty value, not read a missing key as "".
    check_as_selector(json!({"matchLabels": {"k": ""}}), Ok("k=,k"));

    check_as_selector(
        json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
        Err(r#"operator "in" on key "a" takes at least one value, got 0"#),
    );
    check_as_selector(
        json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
        Err(r#"operator "exists" on key "a" takes no values, got 1"#),
    );
    check_as_selector(
        json!({"matchExpressions": [{"key": "a", "operator": "In", "values": [""]}]}),
        Err("must not be empty inside a value set"),
    );
    check_as_selector(
        json!({"matchExpressions": [{"key": "a b", "operator": "Exists"}]}),
        Err(r#"invalid key "a b""#),
    );
    check_as_selector(
        json!({"matchLabels": {"-a": "x"}}),
        Err(r#"invalid key "-a""#),
    );
    check_as_selector(
        json!({"matchLabels": {"a": "x y"}}),
        Err(r#"invalid value "x y""#),
    );
}

#[test]
fn a_missing_label_selector_selects_nothing_an_empty_one_everything() {
    assert_eq!(label_selector_as_selector(None), Ok(None));
    let everything = label_selector_as_selector(Some(&LabelSelector::default())).unwrap();
    assert_eq!(everything, Some(labels::Selector::everything()));
    assert!(LabelSelector::default().is_empty());
    assert!(!label_selector(json!({"matchLabels": {"a": "b"}})).is_empty());
}

#[track_caller]
fn check_selects(value: Value, labels: &[(&str, &str)], expected: bool) {
    let selector = label_selector(value.clone()).to_selector().unwrap();
    assert_eq!(
        selector.matches(&label_set(labels)),
        expected,
        "{value} on {labels:?}"
    );
}

#[test]
fn label_selector_matching_follows_kubernetes() {
    let web = json!({"matchLabels": {"app": "web"}});
    check_selects(web.clone(), &[("app", "web"), ("x", "y")], true);
    check_selects(web.clone(), &[("app", "db")], false);
    check_selects(web, &[], false);
    let empty_value = json!({"matchLabels": {"k": ""}});
    check_selects(empty_value.clone(), &[("k", "")], true);
    check_selects(empty_value.clone(), &[], false);
    check_selects(empty_value, &[("k", "v")], false);
    let not_in = json!({"matchExpressions": [{"key": "k", "operator": "NotIn", "values": ["a"]}]});
    check_selects(not_in.clone(), &[], true);
    check_selects(not_in.clone(), &[("k", "b")], true);
    check_selects(not_in, &[("k", "a")], false);
    let exists = json!({"matchExpressions": [{"key": "k", "operator": "Exists"},
                                             {"key": "g", "operator": "DoesNotExist"}]});
    check_selects(exists.clone(), &[("k", "")], true);
    check_selects(exists.clone(), &[("k", ""), ("g", "x")], false);
    check_selects(exists, &[], false);
    check_selects(json!({}), &[], true);
}

/// Label sets over keys `a` and `k` with values "", `1`, `2`, for comparing selectors.
fn sample_label_sets() -> Vec<labels::Set> {
    let choices = [None, Some(""), Some("1"), Some("2")];
    let mut sets = Vec::new();
    for a in choices {
        for k in choices {
            let mut set = labels::Set::new();
            if let Some(v) = a {
                set.insert("a", v);
            }
            if let Some(v) = k {
                set.insert("k", v);
            }
            sets.push(set);
        }
    }
    sets
}

#[track_caller]
fn check_from_selector(text: &str, expected: Result<Value, &str>) {
    let selector: labels::Selector = text.parse().unwrap();
    match (LabelSelector::from_selector(&selector), expected) {
        (Ok(converted), Ok(json)) => {
            assert_eq!(serde_json::to_value(&converted).unwrap(), json, "{text}");
            let back = converted.to_selector().unwrap();
            for labels in sample_label_sets() {
                assert_eq!(
                    back.matches(&labels),
                    selector.matches(&labels),
                    "{text} and {back} on {{{labels}}}"
                );
            }
        }
        (Err(err), Err(part)) => assert!(err.to_string().contains(part), "{text}: {err}"),
        (other, expected) => panic!("{text}: {other:?}, expected {expected:?}"),
    }
}

#[test]
fn selectors_convert_to_label_selectors_that_match_the_same() {
    check_from_selector("", Ok(json!({})));
    check_from_selector("a=1,k==2", Ok(json!({"matchLabels": {"a": "1", "k": "2"}})));
    check_from_selector(
        "a=1,a=2",
        Ok(json!({"matchLabels": {"a": "1"},
                  "matchExpressions": [{"key": "a", "operator": "In", "values": ["2"]}]})),
    );
    check_from_selector(
        "a!=1,k in (1,2)",
        Ok(json!({"matchExpressions": [
            {"key": "a", "operator": "NotIn", "values": ["1"]},
            {"key": "k", "operator": "In", "values": ["1", "2"]}]})),
    );
    check_from_selector(
        "a notin (1),k,!x",
        Ok(json!({"matchExpressions": [
            {"key": "a", "operator": "NotIn", "values": ["1"]},
            {"key": "k", "operator": "Exists"},
            {"key": "x", "operator": "DoesNotExist"}]})),
    );
    check_from_selector("k,k=", Ok(json!({"matchLabels": {"k": ""}})));
    check_from_selector("k=", Err("it also matches objects without the key"));
    check_from_selector("a!=", Err("no expression requires a non-empty value"));
}

#[test]
fn label_selectors_round_trip_and_reject_unknown_operators() {
    let value = json!({
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "edge"],
                              "futureField": 1},
                             {"key": "canary", "operator": "DoesNotExist"}],
        "futureTop": {"x": true}
    });
    let decoded = label_selector(value.clone());
    assert_eq!(
        decoded.match_expressions[1].operator,
        LabelSelectorOperator::DoesNotExist
    );
    assert_eq!(serde_json::to_value(&decoded).unwrap(), value);

    let unknown = json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]});
    let err = serde_json::from_value::<LabelSelector>(unknown).unwrap_err();
    assert!(err.to_string().contains("unknown variant `Gt`"), "{err}");
}

#[track_caller]
fn check_label_selector_errors(value: Value, expected: &[(&str, &str)]) {
    let mut errors = Vec::new();
    validate_label_selector(&label_selector(value.clone()), "spec.selector", &mut errors);
    let found: Vec<(&str, &str)> = errors
        .iter()
        .map(|e| (e.field.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(found.len(), expected.len(), "{value}: {found:?}");
    for ((field, message), (expected_field, part)) in found.iter().zip(expected) {
        assert_eq!(field, expected_field, "{value}");
        assert!(
            message.contains(part),
            "{value}: {message:?} lacks {part:?}"
        );
    }
}

#[test]
fn label_selector_validation_rules() {
    check_label_selector_errors(json!({}), &[]);
    check_label_selector_errors(
        json!({"matchLabels": {"a": "b"},
               "matchExpressions": [{"key": "x/y", "operator": "NotIn", "values": ["1"]}]}),
        &[],
    );
    check_label_selector_errors(
        json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []},
                                    {"key": "b", "operator": "NotIn"}]}),
        &[
            (
                "spec.selector.matchExpressions[0].values",
                "must be specified when `operator` is 'In' or 'NotIn'",
            ),
            (
                "spec.selector.matchExpressions[1].values",
                "must be specified",
            ),
        ],
    );
    check_label_selector_errors(
        json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["1"]},
                                    {"key": "b", "operator": "DoesNotExist", "values": ["1"]}]}),
        &[
            (
                "spec.selector.matchExpressions[0].values",
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            ),
            (
                "spec.selector.matchExpressions[1].values",
                "may not be specified",
            ),
        ],
    );
    check_label_selector_errors(
        json!({"matchLabels": {"bad key": "v", "k": "-v"},
               "matchExpressions": [{"key": "", "operator": "In", "values": ["ok", "a b", ""]}]}),
        &[
            ("spec.selector.matchLabels", "key \"bad key\""),
            ("spec.selector.matchLabels.k", "value \"-v\""),
            ("spec.selector.matchExpressions[0].key", "must not be empty"),
            (
                "spec.selector.matchExpressions[0].values[1]",
                "\"a b\" must be empty or consist",
            ),
            (
                "spec.selector.matchExpressions[0].values[2]",
                "\"\" must not be empty",
            ),
        ],
    );
}

#[test]
fn a_decoded_copy_tells_a_spec_change_from_what_it_was_read_with() {
    let doc = serde_json::json!({
        "metadata": {"name": "web", "namespace": "ns", "generation": 2},
        "spec": {"replicas": 3, "selector": {"app": "web"}},
        "status": {"replicas": 1}
    });
    // As the registry and the caches that keep whole objects read it.
    let read = || -> ReplicationController {
        let mut rc: ReplicationController = super::decode(
            "/registry",
            "/registry/controllers/ns/web",
            doc.to_string().as_bytes(),
            5,
        )
        .unwrap();
        remember_spec(&mut rc);
        rc
    };
    // Status only: the stored generation stays.
    let mut status_only = read();
    status_only.status.replicas = 3;
    assert!(set_generation_from_read(&mut status_only));
    assert_eq!(status_only.metadata.generation, 2);
    // A spec change: one more, whatever the writer put in `generation`.
    let mut scaled = read();
    scaled.spec.replicas = 5;
    scaled.metadata.generation = 40;
    assert!(set_generation_from_read(&mut scaled));
    assert_eq!(scaled.metadata.generation, 3);
    // A copy that moved to another revision, or one built by hand, cannot tell.
    let mut moved = read();
    moved.metadata.resource_version = Some(ResourceVersion(6));
    assert!(!set_generation_from_read(&mut moved));
    let mut by_hand = ReplicationController {
        metadata: ObjectMeta {
            resource_version: Some(ResourceVersion(5)),
            ..ObjectMeta::named("ns", "web")
        },
        ..ReplicationController::default()
    };
    assert!(!set_generation_from_read(&mut by_hand));
    // What a copy remembers is not part of its value.
    let mut remembered = by_hand.clone();
    remember_spec(&mut remembered);
    assert_eq!(remembered, by_hand);
    assert_eq!(
        serde_json::to_value(&remembered).unwrap(),
        serde_json::to_value(&by_hand).unwrap()
    );
}
