use serde_json::{json, Value};

use super::*;
use crate::api::{decode, encode, object_key, validate};

fn valid() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 10,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}
            }
        }
    })
}

fn deployment(value: Value) -> Deployment {
    serde_json::from_value(value).unwrap()
}

#[track_caller]
fn check_invalid(patch: impl FnOnce(&mut Value), field: &str, message_part: &str) {
    crate::api::tests::check_invalid_as::<Deployment>(valid(), patch, field, message_part);
}

#[test]
fn a_valid_deployment_passes_and_keys_under_deployments() {
    validate(&deployment(valid())).unwrap();
    assert_eq!(
        object_key::<Deployment>("/registry", "default", "web"),
        "/registry/deployments/default/web"
    );
    assert_eq!(Deployment::RESOURCE, "deployments");
    assert_eq!(Deployment::API_VERSION, "apps/v1");
}

#[test]
fn defaults_read_in_memory_and_written_only_by_set_defaults() {
    let mut value = valid();
    value["spec"].as_object_mut().unwrap().remove("replicas");
    let d = deployment(value);
    assert_eq!(d.replicas(), 1);
    assert_eq!(d.strategy_type(), ROLLING_UPDATE);
    assert!(d.is_rolling_update());
    assert_eq!(d.max_surge_value(), IntOrString::String("25%".into()));
    assert_eq!(d.max_unavailable_value(), IntOrString::String("25%".into()));
    assert_eq!(d.revision_history_limit(), 10);
    assert_eq!(d.progress_deadline_seconds(), 600);
    assert_eq!(d.spec.min_ready_seconds, 0);
    let written: Value = serde_json::from_slice(&encode(&d).unwrap()).unwrap();
    assert_eq!(written["spec"].get("replicas"), None, "{written}");
    assert_eq!(written["spec"].get("strategy"), None, "{written}");

    let mut d = d;
    d.set_defaults();
    let written: Value = serde_json::from_slice(&encode(&d).unwrap()).unwrap();
    assert_eq!(written["spec"]["replicas"], 1);
    assert_eq!(
        written["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
    );
    assert_eq!(written["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(written["spec"]["progressDeadlineSeconds"], 600);

    // Recreate gets no rollingUpdate; a partial rollingUpdate is completed.
    let mut value = valid();
    value["spec"]["strategy"] = json!({"type": "Recreate"});
    let mut d = deployment(value);
    d.set_defaults();
    assert_eq!(d.spec.strategy.as_ref().unwrap().rolling_update, None);
    assert_eq!(d.max_surge(), 0);
    assert_eq!(d.max_unavailable(), 0);
    let mut value = valid();
    value["spec"]["strategy"] = json!({"rollingUpdate": {"maxSurge": 3}});
    let mut d = deployment(value);
    d.set_defaults();
    let rolling = d
        .spec
        .strategy
        .as_ref()
        .unwrap()
        .rolling_update
        .clone()
        .unwrap();
    assert_eq!(rolling.max_surge, Some(IntOrString::Int(3)));
    assert_eq!(
        rolling.max_unavailable,
        Some(IntOrString::String("25%".into()))
    );
}

#[test]
fn validation_rules() {
    check_invalid(
        |v| v["spec"]["replicas"] = json!(-1),
        "spec.replicas",
        ">= 0",
    );
    check_invalid(
        |v| v["spec"]["selector"] = json!({}),
        "spec.selector",
        "empty",
    );
    check_invalid(
        |v| v["spec"]["template"]["metadata"]["labels"]["app"] = json!("db"),
        "spec.template.metadata.labels",
        "does not match",
    );
    check_invalid(
        |v| {
            v["spec"].as_object_mut().unwrap().remove("template");
        },
        "spec.template",
        "required",
    );
    check_invalid(
        |v| v["spec"]["strategy"] = json!({"type": "BlueGreen"}),
        "spec.strategy.type",
        "supported values: \"Recreate\", \"RollingUpdate\"",
    );
    check_invalid(
        |v| v["spec"]["strategy"] = json!({"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}),
        "spec.strategy.rollingUpdate",
        "may not be specified when strategy `type` is 'Recreate'",
    );
    check_invalid(
        |v| {
            v["spec"]["strategy"] =
                json!({"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}})
        },
        "spec.strategy.rollingUpdate.maxUnavailable",
        "may not be 0 when `maxSurge` is 0",
    );
    check_invalid(
        |v| v["spec"]["strategy"] = json!({"rollingUpdate": {"maxSurge": -1}}),
        "spec.strategy.rollingUpdate.maxSurge",
        ">= 0",
    );
    check_invalid(
        |v| v["spec"]["strategy"] = json!({"rollingUpdate": {"maxSurge": "x%"}}),
        "spec.strategy.rollingUpdate.maxSurge",
        "a valid percent string",
    );
    check_invalid(
        |v| v["spec"]["strategy"] = json!({"rollingUpdate": {"maxSurge": "3"}}),
        "spec.strategy.rollingUpdate.maxSurge",
        "percentage",
    );
    check_invalid(
        |v| v["spec"]["strategy"] = json!({"rollingUpdate": {"maxUnavailable": "101%"}}),
        "spec.strategy.rollingUpdate.maxUnavailable",
        "greater than 100%",
    );
    check_invalid(
        |v| v["spec"]["revisionHistoryLimit"] = json!(-1),
        "spec.revisionHistoryLimit",
        ">= 0",
    );
    check_invalid(
        |v| v["spec"]["minReadySeconds"] = json!(-1),
        "spec.minReadySeconds",
        ">= 0",
    );
    check_invalid(
        |v| {
            v["spec"]["minReadySeconds"] = json!(10);
            v["spec"]["progressDeadlineSeconds"] = json!(10);
        },
        "spec.progressDeadlineSeconds",
        "must be greater than minReadySeconds",
    );
    // The default deadline (600) counts too.
    check_invalid(
        |v| v["spec"]["minReadySeconds"] = json!(600),
        "spec.progressDeadlineSeconds",
        "must be greater than minReadySeconds",
    );
    // Allowed: one of the two at 0, 100% unavailable, Recreate alone.
    for strategy in [
        json!({"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}),
        json!({"rollingUpdate": {"maxSurge": "0%", "maxUnavailable": "100%"}}),
        json!({"rollingUpdate": {"maxUnavailable": 0}}),
        json!({"type": "Recreate"}),
    ] {
        let mut value = valid();
        value["spec"]["strategy"] = strategy.clone();
        validate(&deployment(value)).unwrap_or_else(|e| panic!("{strategy}: {e}"));
    }
    // An unknown operator does not decode.
    let mut value = valid();
    value["spec"]["selector"] = json!({"matchExpressions": [{"key": "a", "operator": "Gt"}]});
    assert!(serde_json::from_value::<Deployment>(value).is_err());
}

#[test]
fn scaled_values_from_int_or_percent() {
    let int = IntOrString::Int;
    let pct = |s: &str| IntOrString::String(s.to_string());
    // (value, total, round up, expected)
    let table = [
        (int(3), 10, true, 3),
        (int(3), 10, false, 3),
        (pct("25%"), 10, true, 3),
        (pct("25%"), 10, false, 2),
        (pct("25%"), 4, true, 1),
        (pct("25%"), 4, false, 1),
        (pct("25%"), 3, true, 1),
        (pct("25%"), 3, false, 0),
        (pct("0%"), 10, true, 0),
        (pct("100%"), 7, false, 7),
        (pct("25%"), 0, true, 0),
        (pct("30%"), 15, true, 5),
        (pct("30%"), 15, false, 4),
    ];
    for (value, total, round_up, expected) in table {
        assert_eq!(
            scaled_value_from_int_or_percent(&value, total, round_up),
            Ok(expected),
            "{value:?} of {total}, round up {round_up}"
        );
    }
    for bad in ["3", "%", "a%", "-1%", "1.5%"] {
        assert!(
            scaled_value_from_int_or_percent(&pct(bad), 10, true).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn fenceposts_max_surge_and_max_unavailable() {
    // (maxSurge, maxUnavailable, replicas, expected surge, expected unavailable)
    let table = [
        (json!("25%"), json!("25%"), 10, 3, 2),
        (json!("25%"), json!("25%"), 3, 1, 0),
        (json!("25%"), json!("25%"), 1, 1, 0),
        (json!(3), json!(2), 10, 3, 2),
        (json!(0), json!("10%"), 5, 0, 1), // both resolve to 0: unavailable becomes 1
        (json!(0), json!(20), 5, 0, 5),    // MaxUnavailable is capped at replicas
        (json!("25%"), json!("25%"), 0, 0, 0), // 0 replicas: nothing unavailable
        (json!("100%"), json!(0), 4, 4, 0),
    ];
    for (surge, unavailable, replicas, expected_surge, expected_unavailable) in table {
        let mut value = valid();
        value["spec"]["replicas"] = json!(replicas);
        value["spec"]["strategy"] =
            json!({"rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}});
        let d = deployment(value);
        assert_eq!(
            (d.max_surge(), d.max_unavailable()),
            (expected_surge, expected_unavailable),
            "{surge}/{unavailable} of {replicas}"
        );
    }
    assert_eq!(
        resolve_fenceposts(&IntOrString::Int(0), &IntOrString::Int(0), 10),
        Ok((0, 1))
    );
}

/// The golden values were computed independently of this code, by a short Python
/// script: `json.dumps(template, sort_keys=True, separators=(',', ':'),
/// ensure_ascii=False)` with the `pod-template-hash` label popped, FNV-1a 32 (offset
/// 0x811c9dc5, prime 16777619) over its UTF-8 bytes, then, for a collision count,
/// `struct.pack('<I', count) + b'\0' * 4`, the decimal sum mapped through
/// `bcdfghjklmnpqrstvwxz2456789[ord(c) % 27]`. They pin the names of ReplicaSets across
/// kcm versions: never change them.
#[test]
fn pod_template_hash_golden_values() {
    let template = json!({
        "metadata": {"labels": {"app": "web", "pod-template-hash": "old"}},
        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}
    });
    assert_eq!(pod_template_hash(&template, None), "5b9cc8f5fc");
    assert_eq!(pod_template_hash(&template, Some(0)), "7f64cbcd97");
    assert_eq!(pod_template_hash(&template, Some(1)), "6798549864");
    // Key order and the hash label do not matter; the empty labels map is kept; unknown
    // fields, escapes and floats are hashed as serde_json prints them.
    let other = json!({
        "spec": {"containers": [{"image": "nginx", "name": "n", "x": "é\"\n", "n": 1.5}]},
        "metadata": {"labels": {"pod-template-hash": "a"}}
    });
    assert_eq!(pod_template_hash(&other, None), "7867c69cc4");
    // The typed template hashes as it is written.
    let typed: PodTemplateSpec = serde_json::from_value(json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}
    }))
    .unwrap();
    assert_eq!(template_hash(&typed, None), "5b9cc8f5fc");
}

#[test]
fn status_and_unknown_fields_survive_a_rewrite() {
    let mut value = valid();
    value["spec"]["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": "10%", "future": 1}});
    value["spec"]["paused"] = json!(true);
    value["spec"]["future"] = json!("kept");
    value["status"] = json!({
        "observedGeneration": 4, "replicas": 10, "updatedReplicas": 10, "readyReplicas": 10,
        "availableReplicas": 10, "unavailableReplicas": 1, "collisionCount": 0,
        "terminatingReplicas": 0,
        "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
            "message": "Deployment has minimum availability.",
            "lastUpdateTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    });
    let encoded = encode(&deployment(value.clone())).unwrap();
    let decoded = decode::<Deployment>(
        "/registry",
        "/registry/deployments/default/web",
        &encoded,
        7,
    )
    .unwrap();
    assert_eq!(decoded.status.collision_count, Some(0));
    assert!(decoded.spec.paused);
    assert_eq!(
        decoded.condition(DEPLOYMENT_AVAILABLE).unwrap().reason,
        MINIMUM_REPLICAS_AVAILABLE
    );
    let back: Value = serde_json::from_slice(&encode(&decoded).unwrap()).unwrap();
    assert_eq!(back["spec"], value["spec"]);
    assert_eq!(back["status"], value["status"]);
    for version in ["apps/v1beta2", "apps/v1beta1", "extensions/v1beta1"] {
        let mut value = valid();
        value["apiVersion"] = json!(version);
        let bytes = serde_json::to_vec(&value).unwrap();
        let d = decode::<Deployment>("/registry", "/registry/deployments/default/web", &bytes, 3)
            .unwrap();
        let back: Value = serde_json::from_slice(&encode(&d).unwrap()).unwrap();
        assert_eq!(back["apiVersion"], "apps/v1");
    }
}

#[test]
fn the_new_replica_set_is_found_by_template_ignoring_the_hash_and_owned_by_uid() {
    let d = deployment(valid());
    let template = d.spec.template.clone().unwrap();
    let mut hashed = template.clone();
    hashed
        .metadata
        .labels
        .insert(POD_TEMPLATE_HASH_LABEL, "5d4c8f7b9");
    assert!(equal_ignore_hash(&hashed, &template));
    let mut relabelled = hashed.clone();
    relabelled.metadata.labels.insert("tier", "front");
    assert!(!equal_ignore_hash(&relabelled, &template));
    // What a Go client writes back (`kubectl rollout undo`): empty resources are none.
    for (resources, equal) in [
        (json!({}), true),
        (Value::Null, true),
        (json!({"limits": {"cpu": "1"}}), false),
    ] {
        let mut written_back = hashed.clone();
        written_back.spec.containers[0]
            .extra
            .insert("resources".to_string(), resources.clone());
        assert_eq!(
            equal_ignore_hash(&written_back, &template),
            equal,
            "{resources}"
        );
    }

    let mut rs = ReplicaSet::default();
    rs.metadata
        .annotations
        .insert(REVISION_ANNOTATION.to_string(), "3".to_string());
    assert_eq!(revision(&rs.metadata.annotations), Some(3));
    assert_eq!(revision(&d.metadata.annotations), None);

    let mut d = d;
    d.metadata.uid = "d-uid".to_string();
    let reference = |kind: &str, name: &str, uid: &str| crate::api::OwnerReference {
        kind: kind.to_string(),
        name: name.to_string(),
        uid: uid.to_string(),
        controller: Some(true),
        ..Default::default()
    };
    for (owner, owned) in [
        (reference("Deployment", "web", "d-uid"), true),
        (reference("Deployment", "web", "other"), false),
        (reference("Deployment", "api", "d-uid"), false),
        (reference("ReplicaSet", "web", "d-uid"), false),
    ] {
        rs.metadata.owner_references = vec![owner];
        assert_eq!(is_controlled_by(&rs, &d), owned);
    }
}
