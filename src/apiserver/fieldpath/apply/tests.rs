use serde_json::json;

use super::*;
use crate::apiserver::fieldpath::managed::record_update;
use crate::apiserver::fieldpath::PathElement;

use crate::apiserver::fieldpath::testing::{writer, T1, T2};

fn deployment(replicas: i64, containers: Value, labels: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": labels},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": containers}}},
    })
}

fn web() -> Value {
    json!([{"name": "web", "image": "nginx"}])
}

fn field_path(names: &[&str]) -> Vec<PathElement> {
    names
        .iter()
        .map(|n| PathElement::Field(n.to_string()))
        .collect()
}

#[test]
fn an_apply_to_nothing_creates_and_the_manager_owns_what_it_sent() {
    let config = deployment(1, web(), json!({"app": "web"}));
    let applied = apply(
        "Deployment",
        writer("helm", T1),
        &json!({}),
        &config,
        Vec::new(),
        false,
    )
    .unwrap();
    assert!(applied.changed);
    assert_eq!(applied.object, config);
    assert_eq!(applied.entries.len(), 1);
    let entry = &applied.entries[0];
    assert_eq!(
        (entry.manager.as_str(), entry.operation),
        ("helm", Operation::Apply)
    );
    assert!(entry.fields.has(&field_path(&["spec", "replicas"])));
    assert!(
        !entry.fields.has(&field_path(&["apiVersion"])),
        "never owned"
    );
    // The same apply again changes nothing.
    let again = apply(
        "Deployment",
        writer("helm", T2),
        &applied.object,
        &config,
        applied.entries.clone(),
        false,
    )
    .unwrap();
    assert!(!again.changed);
}

#[test]
fn a_field_another_manager_wrote_is_a_conflict_until_forced() {
    let live = deployment(1, web(), json!({"app": "web"}));
    let entries = record_update(
        "Deployment",
        writer("kubectl-client-side-apply", T1),
        &json!({}),
        &live,
        Vec::new(),
    )
    .unwrap();
    let config = deployment(3, web(), json!({"app": "web"}));
    let refused = apply(
        "Deployment",
        writer("helm", T2),
        &live,
        &config,
        entries.clone(),
        false,
    )
    .unwrap_err();
    assert_eq!(
        refused.message(),
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"
    );
    // Unchanged values are shared, not conflicts; forced, the field changes owner.
    let forced = apply(
        "Deployment",
        writer("helm", T2),
        &live,
        &config,
        entries,
        true,
    )
    .unwrap();
    assert_eq!(forced.object["spec"]["replicas"], 3);
    let by = |manager: &str| {
        forced
            .entries
            .iter()
            .find(|e| e.manager == manager)
            .unwrap()
    };
    assert!(by("helm").fields.has(&field_path(&["spec", "replicas"])));
    assert!(!by("kubectl-client-side-apply")
        .fields
        .has(&field_path(&["spec", "replicas"])));
    assert!(by("kubectl-client-side-apply")
        .fields
        .has(&field_path(&["metadata", "labels", "app"])));
}

#[test]
fn several_conflicts_are_listed_by_manager() {
    let error = ApplyError::Conflicts(vec![
        Conflict {
            manager: "\"b\"".into(),
            field: ".spec.paused".into(),
            path: field_path(&["spec", "paused"]),
        },
        Conflict {
            manager: "\"a\" using apps/v1".into(),
            field: ".spec.replicas".into(),
            path: field_path(&["spec", "replicas"]),
        },
    ]);
    assert_eq!(
        error.message(),
        "Apply failed with 2 conflicts: conflicts with \"a\" using apps/v1:\n- .spec.replicas\nconflicts with \"b\":\n- .spec.paused"
    );
}

#[test]
fn what_an_applier_leaves_out_goes_unless_another_manager_owns_that_path() {
    let first = deployment(
        1,
        json!([{"name": "web", "image": "nginx"}, {"name": "log", "image": "fluent"}]),
        json!({"app": "web", "tier": "front", "zone": "a"}),
    );
    let applied = apply(
        "Deployment",
        writer("a", T1),
        &json!({}),
        &first,
        Vec::new(),
        false,
    )
    .unwrap();
    // A controller changes the log container's image and writes the zone label too.
    let mut touched = applied.object.clone();
    touched["spec"]["template"]["spec"]["containers"][1]["image"] = json!("fluent:2");
    touched["metadata"]["labels"]["zone"] = json!("b");
    let entries = record_update(
        "Deployment",
        writer("controller", T2),
        &applied.object,
        &touched,
        applied.entries,
    )
    .unwrap();
    // The applier drops the tier and zone labels and the log container.
    let second = deployment(1, web(), json!({"app": "web"}));
    let pruned = apply(
        "Deployment",
        writer("a", T2),
        &touched,
        &second,
        entries,
        false,
    )
    .unwrap();
    assert_eq!(
        pruned.object["metadata"]["labels"],
        json!({"app": "web", "zone": "b"}),
        "the zone label is the controller's now, so it stays"
    );
    let containers = &pruned.object["spec"]["template"]["spec"]["containers"];
    assert_eq!(
        containers,
        &web(),
        "the item goes though the controller changed a field of it"
    );
    let controller = pruned
        .entries
        .iter()
        .find(|e| e.manager == "controller")
        .unwrap();
    assert_eq!(
        controller.fields.to_fields_v1(),
        json!({"f:metadata": {"f:labels": {"f:zone": {}}}}),
        "the controller loses the removed item's field"
    );
}
