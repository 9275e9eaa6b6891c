use serde_json::json;

use super::*;

use crate::apiserver::fieldpath::testing::{writer, T1, T2};

fn deployment(replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "u", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "web", "image": image}]}},
        },
    })
}

#[test]
fn a_create_records_one_update_entry_without_the_fields_nobody_owns() {
    let created = deployment(1, "nginx");
    let entries = record_update(
        "Deployment",
        writer("kubectl-create", T1),
        &json!({}),
        &created,
        Vec::new(),
    )
    .unwrap();
    let encoded = encode(&entries);
    assert_eq!(encoded.as_array().unwrap().len(), 1);
    let entry = &encoded[0];
    assert_eq!(
        (
            &entry["manager"],
            &entry["operation"],
            &entry["apiVersion"],
            &entry["time"]
        ),
        (
            &json!("kubectl-create"),
            &json!("Update"),
            &json!("apps/v1"),
            &json!(T1)
        )
    );
    assert_eq!(entry["fieldsType"], "FieldsV1");
    let fields = &entry["fieldsV1"];
    assert!(fields.get("f:apiVersion").is_none() && fields.get("f:kind").is_none());
    assert_eq!(
        fields["f:metadata"],
        json!({"f:labels": {".": {}, "f:app": {}}}),
        "name, namespace and uid are never owned; metadata is not a member"
    );
    assert!(fields["f:spec"]["f:replicas"].is_object());
    assert_eq!(decode(Some(&encoded)).unwrap(), entries, "a round trip");
}

#[test]
fn a_later_update_takes_what_it_changed_from_the_others_and_keeps_its_own() {
    let created = deployment(1, "nginx");
    let entries = record_update(
        "Deployment",
        writer("kubectl-create", T1),
        &json!({}),
        &created,
        Vec::new(),
    )
    .unwrap();
    let scaled = deployment(3, "nginx");
    let entries = record_update(
        "Deployment",
        writer("kubectl-scale", T2),
        &created,
        &scaled,
        entries,
    )
    .unwrap();
    let replicas = [
        PathElement::Field("spec".into()),
        PathElement::Field("replicas".into()),
    ];
    let by = |manager: &str| entries.iter().find(|e| e.manager == manager).unwrap();
    assert!(by("kubectl-scale").fields.has(&replicas));
    assert_eq!(by("kubectl-scale").fields.paths(), vec![replicas.to_vec()]);
    assert!(
        !by("kubectl-create").fields.has(&replicas),
        "taken, as Updates are forced"
    );
    assert!(by("kubectl-create").fields.has(&[
        PathElement::Field("metadata".into()),
        PathElement::Field("labels".into()),
        PathElement::Field("app".into()),
    ]));
    // Writing the same value again changes nothing but the writer's time.
    let again = record_update(
        "Deployment",
        writer("kubectl-scale", T2),
        &scaled,
        &scaled,
        entries.clone(),
    )
    .unwrap();
    assert_eq!(again.len(), 2);
}

#[test]
fn entries_sort_apply_first_then_by_time_and_manager() {
    let entry = |manager: &str, operation, time: &str| Entry {
        manager: manager.into(),
        operation,
        api_version: "v1".into(),
        time: Some(time.into()),
        subresource: String::new(),
        fields: Set::from_fields_v1(&json!({"f:data": {}})).unwrap(),
    };
    let encoded = encode(&[
        entry("b", Operation::Update, T1),
        entry("a", Operation::Update, T2),
        entry("z", Operation::Apply, T2),
        entry("a", Operation::Update, T1),
    ]);
    let order: Vec<(&str, &str)> = encoded
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["manager"].as_str().unwrap(), e["time"].as_str().unwrap()))
        .collect();
    assert_eq!(order, [("z", T2), ("a", T1), ("b", T1), ("a", T2)]);
}

#[test]
fn beyond_ten_update_entries_the_oldest_merge_into_ancient_changes() {
    let mut entries: Vec<Entry> = (0..12)
        .map(|i| Entry {
            manager: format!("m{i:02}"),
            operation: Operation::Update,
            api_version: "v1".into(),
            time: Some(format!("2024-05-01T10:{i:02}:00Z")),
            subresource: String::new(),
            fields: Set::from_fields_v1(&json!({ format!("f:k{i}"): {} })).unwrap(),
        })
        .collect();
    cap_updates(&mut entries);
    assert_eq!(entries.len(), MAX_UPDATE_ENTRIES);
    let bucket = entries
        .iter()
        .find(|e| e.manager == ANCIENT_CHANGES)
        .unwrap();
    assert_eq!(
        bucket.fields.to_fields_v1(),
        json!({"f:k0": {}, "f:k1": {}, "f:k2": {}})
    );
    assert_eq!(bucket.time.as_deref(), Some("2024-05-01T10:02:00Z"));
    assert!(entries
        .iter()
        .all(|e| !["m00", "m01", "m02"].contains(&e.manager.as_str())));
}

#[test]
fn what_does_not_decode_is_named() {
    let error = decode(Some(&json!([{"manager": "m", "operation": "Replace"}]))).unwrap_err();
    assert_eq!(
        error,
        "metadata.managedFields[0]: unknown operation \"Replace\""
    );
    let error = decode(Some(
        &json!([{"operation": "Apply", "fieldsType": "FieldsV2"}]),
    ))
    .unwrap_err();
    assert!(error.contains("unknown fieldsType \"FieldsV2\""), "{error}");
    let error = decode(Some(
        &json!([{"operation": "Apply", "fieldsV1": {"spec": {}}}]),
    ))
    .unwrap_err();
    assert!(error.starts_with("metadata.managedFields[0]: invalid field path element"));
    assert_eq!(decode(None).unwrap(), Vec::new());
}
