use serde_json::json;

use super::*;

#[test]
fn an_applied_deployment_owns_its_leaves_list_items_by_key_and_label_entries() {
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 3,
            "template": {"spec": {"containers": [{
                "name": "web",
                "image": "nginx",
                "command": ["nginx", "-g"],
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
            }]}},
        },
    });
    let set = fields_of("Deployment", &deployment).unwrap();
    assert_eq!(
        set.to_fields_v1(),
        json!({
            "f:apiVersion": {},
            "f:kind": {},
            "f:metadata": {"f:labels": {"f:app": {}}, "f:name": {}},
            "f:spec": {
                "f:replicas": {},
                "f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"web\"}": {
                        ".": {},
                        "f:command": {},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {
                            "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                                ".": {},
                                "f:containerPort": {},
                                "f:protocol": {},
                            },
                        },
                    },
                }}},
            },
        })
    );
}

#[test]
fn sets_own_values_atomic_maps_and_lists_own_themselves_and_empty_structs_nothing() {
    let pod = json!({
        "metadata": {"finalizers": ["example.com/a", "example.com/b"]},
        "spec": {
            "nodeSelector": {"disk": "ssd"},
            "securityContext": {},
            "containers": [{"name": "c", "args": []}],
        },
    });
    let set = fields_of("Pod", &pod).unwrap();
    assert_eq!(
        set.to_fields_v1(),
        json!({
            "f:metadata": {"f:finalizers": {
                "v:\"example.com/a\"": {},
                "v:\"example.com/b\"": {},
            }},
            "f:spec": {
                "f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:args": {}, "f:name": {}}},
                // `x-kubernetes-map-type: atomic`: the map is one value.
                "f:nodeSelector": {},
            },
        })
    );
}

#[test]
fn a_keyed_item_without_its_keys_and_a_value_of_another_shape_are_named() {
    let no_name = json!({"spec": {"containers": [{"image": "nginx"}]}});
    assert_eq!(
        fields_of("Pod", &no_name).unwrap_err(),
        ".spec.containers: an item of a list keyed by name has none of its keys"
    );
    let scalar_spec = json!({"spec": 3});
    assert_eq!(
        fields_of("Pod", &scalar_spec).unwrap_err(),
        ".spec: expected an object"
    );
    let listed_replicas = json!({"spec": {"replicas": [1]}});
    assert_eq!(
        fields_of("Deployment", &listed_replicas).unwrap_err(),
        ".spec.replicas: expected a scalar"
    );
    assert_eq!(
        fields_of("Widget", &json!({})).unwrap_err(),
        "no served schema for kind \"Widget\""
    );
}

#[test]
fn a_missing_key_field_takes_its_default_or_is_left_out_and_an_unknown_subtree_is_deduced() {
    // A port without a protocol is the item kube-apiserver keys with `protocol: TCP` (the
    // Go types' default, which the published schema leaves out).
    let pod = json!({
        "metadata": {"annotations": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 8080}]}],
                 "topologySpreadConstraints": [{"topologyKey": "zone", "maxSkew": 1}]},
    });
    let set = fields_of("Pod", &pod).unwrap();
    let port = [
        PathElement::Field("spec".into()),
        PathElement::Field("containers".into()),
        PathElement::key(vec![("name".into(), json!("c"))]),
        PathElement::Field("ports".into()),
        PathElement::key(vec![
            ("containerPort".into(), json!(8080)),
            ("protocol".into(), json!("TCP")),
        ]),
    ];
    assert!(set.has(&port), "{}", set.to_fields_v1());
    // A key field with no default is left out of the item's key.
    let constraint = [
        PathElement::Field("spec".into()),
        PathElement::Field("topologySpreadConstraints".into()),
        PathElement::key(vec![("topologyKey".into(), json!("zone"))]),
    ];
    assert!(set.has(&constraint), "{}", set.to_fields_v1());
    assert!(set.has(&[
        PathElement::Field("metadata".into()),
        PathElement::Field("annotations".into()),
        PathElement::Field("a".into()),
    ]));
}

#[test]
fn an_applied_list_with_two_items_of_one_key_is_refused() {
    let pod = json!({"spec": {"containers": [{"name": "c"}, {"name": "c", "image": "x"}]}});
    assert_eq!(
        fields_of("Pod", &pod).unwrap_err(),
        ".spec.containers: duplicate entries for key [name=\"c\"]"
    );
}
