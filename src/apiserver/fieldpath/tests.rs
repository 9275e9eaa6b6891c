use serde_json::json;

use super::*;

fn field(name: &str) -> PathElement {
    PathElement::Field(name.to_string())
}

fn key(name: &str, value: Value) -> PathElement {
    PathElement::key(vec![(name.to_string(), value)])
}

/// An entry as kube-apiserver writes one for `kubectl create` of a Deployment.
const KUBECTL_ENTRY: &str = r#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}}}}}}}}"#;

#[test]
fn fields_v1_parses_and_serializes_to_the_same_text() {
    let fields: Value = serde_json::from_str(KUBECTL_ENTRY).unwrap();
    let set = Set::from_fields_v1(&fields).unwrap();
    assert_eq!(set.to_fields_v1().to_string(), KUBECTL_ENTRY);
    let containers = [
        field("spec"),
        field("template"),
        field("spec"),
        field("containers"),
    ];
    let web = [&containers[..], &[key("name", json!("web"))]].concat();
    assert!(set.has(&web), "the item is a member");
    assert!(set.has(&[&web[..], &[field("image")]].concat()));
    assert!(!set.has(&containers), "the list itself is not");
    assert!(
        set.has(&[field("metadata"), field("labels")]),
        "\".\" makes a member"
    );
    assert!(!set.has(&[field("spec")]));
    let ports = PathElement::key(vec![
        ("protocol".to_string(), json!("TCP")),
        ("containerPort".to_string(), json!(80)),
    ]);
    let port = [&web[..], &[field("ports"), ports]].concat();
    assert!(set.has(&port), "key fields are found in any order");
    assert_eq!(
        display(&port),
        r#".spec.template.spec.containers[name="web"].ports[containerPort=80,protocol="TCP"]"#
    );
    assert_eq!(set.paths().len(), 10);
}

#[test]
fn paths_inserted_are_members_and_their_parents_are_not() {
    let mut set = Set::new();
    let replicas = [field("spec"), field("replicas")];
    set.insert(&replicas);
    set.insert(&[]);
    assert!(set.has(&replicas) && !set.has(&[field("spec")]) && !set.has(&[]));
    assert_eq!(set.to_fields_v1(), json!({"f:spec": {"f:replicas": {}}}));
    set.insert(&[field("spec")]);
    assert_eq!(
        set.to_fields_v1(),
        json!({"f:spec": {".": {}, "f:replicas": {}}})
    );
    assert_eq!(set.paths(), vec![vec![field("spec")], replicas.to_vec()]);
}

#[test]
fn elements_sort_fields_keys_values_then_indexes_and_values_by_kind() {
    let mut elements = vec![
        PathElement::Index(0),
        PathElement::Value(json!(null)),
        PathElement::Value(json!(true)),
        PathElement::Value(json!("a")),
        PathElement::Value(json!(2)),
        PathElement::Value(json!(1.5)),
        key("name", json!("b")),
        key("name", json!("a")),
        field("b"),
        field("a"),
    ];
    elements.sort();
    let serialized: Vec<String> = elements.iter().map(PathElement::serialize).collect();
    assert_eq!(
        serialized,
        [
            "f:a",
            "f:b",
            r#"k:{"name":"a"}"#,
            r#"k:{"name":"b"}"#,
            "v:1.5",
            "v:2",
            r#"v:"a""#,
            "v:true",
            "v:null",
            "i:0",
        ]
    );
    assert_eq!(PathElement::Value(json!(1)), PathElement::Value(json!(1.0)));
}

#[test]
fn union_intersection_and_difference_keep_sets_normalised() {
    let path = |names: &[&str]| names.iter().map(|n| field(n)).collect::<Vec<_>>();
    let mut a = Set::new();
    a.insert(&path(&["spec", "replicas"]));
    a.insert(&path(&["spec", "paused"]));
    let mut b = Set::new();
    b.insert(&path(&["spec", "replicas"]));
    b.insert(&path(&["metadata", "labels", "app"]));

    let union = a.union(&b);
    assert_eq!(union.paths().len(), 3);
    assert_eq!(
        a.intersection(&b).paths(),
        vec![path(&["spec", "replicas"])]
    );
    assert_eq!(a.difference(&b).paths(), vec![path(&["spec", "paused"])]);
    // Nothing left under metadata: no empty node stays behind.
    assert_eq!(b.difference(&union), Set::new());
    assert!(b.difference(&union).is_empty());
    assert_eq!(
        b.difference(&a).to_fields_v1(),
        json!({"f:metadata": {"f:labels": {"f:app": {}}}})
    );
    // A member with paths below it loses only what the other set has.
    let mut parent = Set::new();
    parent.insert(&path(&["spec"]));
    parent.insert(&path(&["spec", "replicas"]));
    assert_eq!(parent.difference(&a).to_fields_v1(), json!({"f:spec": {}}));
}

#[test]
fn what_does_not_parse_is_named() {
    let error = |fields: Value| Set::from_fields_v1(&fields).unwrap_err();
    assert_eq!(
        error(json!({"spec": {}})),
        r#"invalid field path element "spec": no type prefix (f:, k:, v: or i:)"#
    );
    assert_eq!(
        error(json!({"f:spec": {"x:y": {}}})),
        r#"invalid field path element "x:y": unknown type prefix"#
    );
    assert!(error(json!({"k:[1]": {}})).contains("a key must be a JSON object"));
    assert!(error(json!({"i:one": {}})).contains("the index is not a number"));
    assert!(error(json!({"f:spec": 1})).contains("must be an object"));
    assert_eq!(error(json!([])), "fieldsV1 must be a JSON object");
}
