use serde_json::json;

use super::*;

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|item| item["name"].as_str().unwrap())
        .collect()
}

#[test]
fn maps_merge_keyed_items_merge_and_atomic_values_are_replaced() {
    let live = json!({
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 1,
            "paused": false,
            "template": {"spec": {"containers": [{
                "name": "web",
                "image": "nginx:1",
                "command": ["nginx", "-g", "daemon off;"],
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
            }]}},
        },
    });
    let config = json!({
        "metadata": {"labels": {"tier": "front"}},
        "spec": {
            "replicas": 3,
            "template": {"spec": {"containers": [
                {"name": "web", "image": "nginx:2", "command": ["nginx"]},
                {"name": "sidecar", "image": "envoy"},
            ]}},
        },
    });
    let merged = merge("Deployment", &live, &config).unwrap();
    assert_eq!(
        merged["metadata"],
        json!({"name": "web", "labels": {"app": "web", "tier": "front"}})
    );
    assert_eq!(merged["spec"]["replicas"], 3);
    assert_eq!(merged["spec"]["paused"], false, "what only live has stays");
    let containers = &merged["spec"]["template"]["spec"]["containers"];
    assert_eq!(names(containers), ["web", "sidecar"]);
    assert_eq!(containers[0]["image"], "nginx:2");
    assert_eq!(
        containers[0]["command"],
        json!(["nginx"]),
        "an atomic list is replaced"
    );
    assert_eq!(
        containers[0]["ports"],
        live["spec"]["template"]["spec"]["containers"][0]["ports"]
    );
}

#[test]
fn shared_items_take_the_configurations_order_and_the_others_keep_their_place() {
    let pod = |names: &[&str]| {
        let containers: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
        json!({"spec": {"containers": containers}})
    };
    let merged = merge("Pod", &pod(&["a", "b", "c"]), &pod(&["c", "a"])).unwrap();
    assert_eq!(names(&merged["spec"]["containers"]), ["b", "c", "a"]);
    let merged = merge("Pod", &pod(&["a", "b"]), &pod(&["z", "b", "a"])).unwrap();
    assert_eq!(names(&merged["spec"]["containers"]), ["z", "b", "a"]);
    // A name repeated on one side counts once.
    let merged = merge("Pod", &pod(&["a", "a"]), &pod(&["b"])).unwrap();
    assert_eq!(names(&merged["spec"]["containers"]), ["a", "b"]);
}

#[test]
fn sets_are_a_union_and_empty_values_stay_as_written() {
    let live = json!({"metadata": {"finalizers": ["x", "y"]}, "spec": {"containers": []}});
    let config = json!({"metadata": {"finalizers": ["z", "x"]}, "spec": {"containers": []}});
    let merged = merge("Pod", &live, &config).unwrap();
    // z comes before x, as configured; y stays after x, where live had it.
    assert_eq!(merged["metadata"]["finalizers"], json!(["z", "x", "y"]));
    assert_eq!(merged["spec"]["containers"], json!([]));
    let merged = merge("Pod", &json!({}), &json!({"spec": {}})).unwrap();
    assert_eq!(merged, json!({"spec": {}}));
    // A map's entries merge.
    let merged = merge(
        "Pod",
        &json!({"metadata": {"annotations": {"a": "1"}}}),
        &json!({"metadata": {"annotations": {"b": "2"}}}),
    )
    .unwrap();
    assert_eq!(
        merged["metadata"]["annotations"],
        json!({"a": "1", "b": "2"})
    );
}

#[test]
fn a_value_of_another_shape_is_named() {
    let error = merge(
        "Pod",
        &json!({}),
        &json!({"spec": {"containers": {"a": 1}}}),
    )
    .unwrap_err();
    assert_eq!(error, ".spec.containers: expected a list");
    let error = merge("Pod", &json!({}), &json!({"spec": "x"})).unwrap_err();
    assert_eq!(error, ".spec: expected an object");
}

#[test]
fn removing_a_set_drops_its_members_with_what_they_hold_and_nothing_else() {
    let object = json!({
        "metadata": {"labels": {"app": "web", "tier": "front"}, "finalizers": ["x", "y"]},
        "spec": {
            "replicas": 3,
            "template": {"spec": {"containers": [
                {"name": "web", "image": "nginx", "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                {"name": "sidecar", "image": "envoy"},
            ]}},
        },
    });
    let fields = json!({
        "f:metadata": {"f:labels": {"f:tier": {}}, "f:finalizers": {"v:\"y\"": {}}},
        "f:spec": {
            "f:replicas": {},
            "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"sidecar\"}": {".": {}, "f:image": {}},
                "k:{\"name\":\"web\"}": {"f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {}}},
            }}},
        },
    });
    let set = Set::from_fields_v1(&fields).unwrap();
    let left = remove("Deployment", &object, &set).unwrap();
    assert_eq!(
        left,
        json!({
            "metadata": {"labels": {"app": "web"}, "finalizers": ["x"]},
            "spec": {"template": {"spec": {"containers": [
                {"name": "web", "image": "nginx", "ports": []},
            ]}}},
        })
    );
}
