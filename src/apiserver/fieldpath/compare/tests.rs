use serde_json::json;

use super::*;

fn deployment(replicas: i64, image: &str, labels: Value) -> Value {
    json!({
        "metadata": {"name": "web", "labels": labels},
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "web", "image": image}]}},
        },
    })
}

#[test]
fn a_write_is_what_it_added_modified_and_removed() {
    let old = deployment(1, "nginx:1", json!({"app": "web", "tier": "front"}));
    let new = deployment(3, "nginx:2", json!({"app": "web", "zone": "a"}));
    let comparison = compare("Deployment", &old, &new).unwrap();
    assert_eq!(
        comparison.modified.to_fields_v1(),
        json!({"f:spec": {
            "f:replicas": {},
            "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {"f:image": {}}}}},
        }})
    );
    assert_eq!(
        comparison.added.to_fields_v1(),
        json!({"f:metadata": {"f:labels": {"f:zone": {}}}})
    );
    assert_eq!(
        comparison.removed.to_fields_v1(),
        json!({"f:metadata": {"f:labels": {"f:tier": {}}}})
    );
    assert!(compare("Deployment", &new, &new).unwrap().is_same());
    // 3 and 3.0 are one value.
    let float = deployment(3, "nginx:2", json!({"app": "web", "zone": "a"}));
    let mut float = float;
    float["spec"]["replicas"] = json!(3.0);
    assert!(compare("Deployment", &new, &float).unwrap().is_same());
}

#[test]
fn what_a_create_adds_includes_the_maps_lists_and_items_it_brings() {
    let new = deployment(1, "nginx", json!({"app": "web"}));
    let comparison = compare("Deployment", &json!({}), &new).unwrap();
    assert!(comparison.modified.is_empty() && comparison.removed.is_empty());
    assert_eq!(
        comparison.added.to_fields_v1(),
        json!({
            "f:metadata": {".": {}, "f:labels": {".": {}, "f:app": {}}, "f:name": {}},
            "f:spec": {
                ".": {},
                "f:replicas": {},
                "f:template": {".": {}, "f:spec": {".": {}, "f:containers": {
                    ".": {},
                    "k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}},
                }}},
            },
        })
    );
}

#[test]
fn a_removed_item_is_removed_with_what_it_held() {
    let old = json!({"metadata": {"finalizers": ["a", "b"]},
                     "spec": {"containers": [{"name": "x"}, {"name": "y"}]}});
    let new = json!({"metadata": {"finalizers": ["b"]}, "spec": {"containers": [{"name": "y"}]}});
    let comparison = compare("Pod", &old, &new).unwrap();
    assert_eq!(
        comparison.removed.to_fields_v1(),
        json!({
            "f:metadata": {"f:finalizers": {"v:\"a\"": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"x\"}": {".": {}, "f:name": {}}}},
        })
    );
    assert!(comparison.added.is_empty() && comparison.modified.is_empty());
    let error = compare("Pod", &old, &json!({"spec": {"containers": [{}]}})).unwrap_err();
    assert_eq!(
        error,
        ".spec.containers: an item of a list keyed by name has none of its keys"
    );
}
