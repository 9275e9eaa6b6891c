//! Tests of JSON merge patch and JSON patch: the RFC appendices, key order, and what kubectl
//! sends.

use super::*;
use serde_json::json;

#[track_caller]
fn check_merge_patch(target: Value, patch: Value, expected: Value) {
    assert_eq!(
        merge_patch(&target, &patch),
        expected,
        "merge patch {patch} onto {target}"
    );
}

#[test]
fn merge_patch_follows_rfc_7386_appendix_a() {
    let cases = [
        (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
        (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
        (json!({"a":"b"}), json!({"a":null}), json!({})),
        (
            json!({"a":"b","b":"c"}),
            json!({"a":null}),
            json!({"b":"c"}),
        ),
        (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
        (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
        (
            json!({"a":{"b":"c"}}),
            json!({"a":{"b":"d","c":null}}),
            json!({"a":{"b":"d"}}),
        ),
        (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
        (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
        (json!({"a":"b"}), json!(["c"]), json!(["c"])),
        (json!({"a":"foo"}), json!(null), json!(null)),
        (json!({"a":"foo"}), json!("bar"), json!("bar")),
        (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
        (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
        (
            json!({}),
            json!({"a":{"bb":{"ccc":null}}}),
            json!({"a":{"bb":{}}}),
        ),
    ];
    for (target, patch, expected) in cases {
        check_merge_patch(target, patch, expected);
    }
}

#[test]
fn merge_patch_keeps_key_order_and_appends_new_keys() {
    let merged = merge_patch(&json!({"b":1,"a":2,"c":3}), &json!({"a":null,"d":4,"b":5}));
    let keys: Vec<&String> = merged.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["b", "c", "d"]);
}

#[track_caller]
fn check_keys(value: &Value, expected: &[&str]) {
    let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
    assert_eq!(keys, expected, "keys of {value}");
}

#[test]
fn merge_patch_keeps_key_order_when_an_early_key_goes() {
    let target = json!({"a":1,"b":2,"c":3,"d":{"p":1,"q":2,"r":3}});
    let merged = merge_patch(&target, &json!({"a":null,"x":1,"d":{"p":null,"s":4},"y":2}));
    check_keys(&merged, &["b", "c", "d", "x", "y"]);
    check_keys(&merged["d"], &["q", "r", "s"]);
}

#[test]
fn json_patch_keeps_key_order_when_a_member_goes() {
    let target = json!({"a":1,"b":2,"c":3,"d":4});
    let cases: [(Value, &[&str]); 5] = [
        (json!([{"op":"remove","path":"/a"}]), &["b", "c", "d"]),
        (
            json!([{"op":"move","from":"/b","path":"/e"}]),
            &["a", "c", "d", "e"],
        ),
        (
            json!([{"op":"move","from":"/a","path":"/a"}]),
            &["a", "b", "c", "d"],
        ),
        (
            json!([{"op":"move","from":"/a","path":"/c"}]),
            &["b", "c", "d"],
        ),
        (
            json!([{"op":"add","path":"/e","value":5},{"op":"add","path":"/f","value":6},
                {"op":"remove","path":"/b"}]),
            &["a", "c", "d", "e", "f"],
        ),
    ];
    for (operations, keys) in cases {
        let patched = json_patch(&target, &operations).unwrap();
        check_keys(&patched, keys);
    }
}

#[test]
fn merge_patch_does_what_kubectl_label_and_scale_send() {
    check_merge_patch(
        json!({"metadata":{"name":"x","labels":{"app":"web"}}}),
        json!({"metadata":{"labels":{"a":"b"}}}),
        json!({"metadata":{"name":"x","labels":{"app":"web","a":"b"}}}),
    );
    check_merge_patch(
        json!({"spec":{"replicas":2,"selector":"app=web"}}),
        json!({"spec":{"replicas":3}}),
        json!({"spec":{"replicas":3,"selector":"app=web"}}),
    );
}

#[track_caller]
fn check_json_patch(target: Value, operations: Value, expected: Value) {
    match json_patch(&target, &operations) {
        Ok(patched) => assert_eq!(patched, expected, "json patch {operations} onto {target}"),
        Err(error) => panic!("json patch {operations} onto {target} failed: {error}"),
    }
}

#[track_caller]
fn check_json_patch_fails(target: Value, operations: Value, expected_message: &str) {
    match json_patch(&target, &operations) {
        Ok(patched) => panic!("json patch {operations} onto {target} gave {patched}"),
        Err(error) => assert_eq!(error.to_string(), expected_message),
    }
}

#[test]
fn json_patch_follows_rfc_6902_appendix_a() {
    let cases = [
        // A.1 adding an object member
        (
            json!({"foo":"bar"}),
            json!([{"op":"add","path":"/baz","value":"qux"}]),
            json!({"baz":"qux","foo":"bar"}),
        ),
        // A.2 adding an array element
        (
            json!({"foo":["bar","baz"]}),
            json!([{"op":"add","path":"/foo/1","value":"qux"}]),
            json!({"foo":["bar","qux","baz"]}),
        ),
        // A.3 removing an object member
        (
            json!({"baz":"qux","foo":"bar"}),
            json!([{"op":"remove","path":"/baz"}]),
            json!({"foo":"bar"}),
        ),
        // A.4 removing an array element
        (
            json!({"foo":["bar","qux","baz"]}),
            json!([{"op":"remove","path":"/foo/1"}]),
            json!({"foo":["bar","baz"]}),
        ),
        // A.5 replacing a value
        (
            json!({"baz":"qux","foo":"bar"}),
            json!([{"op":"replace","path":"/baz","value":"boo"}]),
            json!({"baz":"boo","foo":"bar"}),
        ),
        // A.6 moving a value
        (
            json!({"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}}),
            json!([{"op":"move","from":"/foo/waldo","path":"/qux/thud"}]),
            json!({"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}}),
        ),
        // A.7 moving an array element
        (
            json!({"foo":["all","grass","cows","eat"]}),
            json!([{"op":"move","from":"/foo/1","path":"/foo/3"}]),
            json!({"foo":["all","cows","eat","grass"]}),
        ),
        // A.8 testing a value: success
        (
            json!({"baz":"qux","foo":["a",2,"c"]}),
            json!([{"op":"test","path":"/baz","value":"qux"},{"op":"test","path":"/foo/1","value":2}]),
            json!({"baz":"qux","foo":["a",2,"c"]}),
        ),
        // A.10 adding a nested member object
        (
            json!({"foo":"bar"}),
            json!([{"op":"add","path":"/child","value":{"grandchild":{}}}]),
            json!({"foo":"bar","child":{"grandchild":{}}}),
        ),
        // A.11 ignoring unrecognized elements
        (
            json!({"foo":"bar"}),
            json!([{"op":"add","path":"/baz","value":"qux","xyz":123}]),
            json!({"foo":"bar","baz":"qux"}),
        ),
        // A.14 ~ escape ordering
        (
            json!({"/":9,"~1":10}),
            json!([{"op":"test","path":"/~01","value":10}]),
            json!({"/":9,"~1":10}),
        ),
        // A.16 adding an array value
        (
            json!({"foo":["bar"]}),
            json!([{"op":"add","path":"/foo/-","value":["abc","def"]}]),
            json!({"foo":["bar",["abc","def"]]}),
        ),
    ];
    for (target, operations, expected) in cases {
        check_json_patch(target, operations, expected);
    }
}

#[test]
fn json_patch_errors_of_rfc_6902_appendix_a() {
    // A.9 testing a value: error
    check_json_patch_fails(
        json!({"baz":"qux"}),
        json!([{"op":"test","path":"/baz","value":"bar"}]),
        "json patch operation 0 (test \"/baz\") does not apply: test failed: the value is \"qux\", not \"bar\"",
    );
    // A.12 adding to a nonexistent target
    check_json_patch_fails(
        json!({"foo":"bar"}),
        json!([{"op":"add","path":"/baz/bat","value":"qux"}]),
        "json patch operation 0 (add \"/baz/bat\") does not apply: path not found: /baz",
    );
    // A.15 comparing strings and numbers
    check_json_patch_fails(
        json!({"/":9,"~1":10}),
        json!([{"op":"test","path":"/~01","value":"10"}]),
        "json patch operation 0 (test \"/~01\") does not apply: test failed: the value is 10, not \"10\"",
    );
}

#[test]
fn json_patch_refuses_what_rfc_6902_refuses() {
    let target = json!({"a":{"b":[1,2]},"s":"x"});
    let cases = [
        (
            json!({"op":"add"}),
            json!([{"op":"replace","path":"/missing","value":1}]),
            "json patch operation 0 (replace \"/missing\") does not apply: path not found: /missing",
        ),
        (
            json!({}),
            json!([{"op":"remove","path":"/missing"}]),
            "json patch operation 0 (remove \"/missing\") does not apply: path not found: /missing",
        ),
        (
            json!({}),
            json!([{"op":"test","path":"/a","value":1},{"op":"frobnicate","path":"/a"}]),
            "json patch operation 0 (test \"/a\") does not apply: test failed: the value is {\"b\":[1,2]}, not 1",
        ),
        (
            json!({}),
            json!([{"op":"add","path":"/s","value":1},{"op":"frobnicate","path":"/a"}]),
            "json patch operation 1 (frobnicate \"/a\") does not apply: unknown operation \"frobnicate\"",
        ),
        (
            json!({}),
            json!([{"path":"/a"}]),
            "json patch operation 0 ( \"/a\") does not apply: missing member \"op\"",
        ),
        (
            json!({}),
            json!([{"op":"add","path":"/a"}]),
            "json patch operation 0 (add \"/a\") does not apply: missing member \"value\"",
        ),
        (
            json!({}),
            json!([{"op":"move","path":"/a/b/c"}]),
            "json patch operation 0 (move \"/a/b/c\") does not apply: missing member \"from\"",
        ),
        (
            json!({}),
            json!([{"op":"move","from":"/a","path":"/a/c"}]),
            "json patch operation 0 (move \"/a/c\") does not apply: cannot move a value into one of its own children",
        ),
        (
            json!({}),
            json!([{"op":"add","path":"a","value":1}]),
            "json patch operation 0 (add \"a\") does not apply: invalid JSON pointer \"a\": it must start with \"/\"",
        ),
        (
            json!({}),
            json!([{"op":"add","path":"/a~2","value":1}]),
            "json patch operation 0 (add \"/a~2\") does not apply: invalid JSON pointer \"/a~2\": \"~\" must be followed by 0 or 1",
        ),
        (
            json!({}),
            json!([{"op":"add","path":"/a/b/3","value":1}]),
            "json patch operation 0 (add \"/a/b/3\") does not apply: array index 3 is out of bounds (length 2)",
        ),
        (
            json!({}),
            json!([{"op":"add","path":"/a/b/01","value":1}]),
            "json patch operation 0 (add \"/a/b/01\") does not apply: \"01\" is not an array index",
        ),
        (
            json!({}),
            json!([{"op":"replace","path":"/a/b/-","value":1}]),
            "json patch operation 0 (replace \"/a/b/-\") does not apply: \"-\" is not an array index",
        ),
        (
            json!({}),
            json!([{"op":"add","path":"/s/t","value":1}]),
            "json patch operation 0 (add \"/s/t\") does not apply: /s is not an object or an array",
        ),
        (
            json!({}),
            json!([{"op":"remove","path":""}]),
            "json patch operation 0 (remove \"\") does not apply: cannot remove the whole document",
        ),
        (
            json!({}),
            json!(["add"]),
            "json patch operation 0 ( \"\") does not apply: an operation must be a JSON object",
        ),
        (
            json!({}),
            json!({"op":"add","path":"/a","value":1}),
            "json patch must be a JSON array of operations",
        ),
    ];
    for (_, operations, message) in cases {
        check_json_patch_fails(target.clone(), operations, message);
    }
}

#[test]
fn json_patch_applies_all_operations_in_order_or_none() {
    let cases = [
        (
            json!({"a":1}),
            json!([{"op":"add","path":"","value":{"b":2}}]),
            json!({"b":2}),
        ),
        (
            json!({"a":1}),
            json!([{"op":"replace","path":"","value":[1]}]),
            json!([1]),
        ),
        (
            json!({"a":{"b":1}}),
            json!([{"op":"copy","from":"/a","path":"/c"},{"op":"replace","path":"/c/b","value":2}]),
            json!({"a":{"b":1},"c":{"b":2}}),
        ),
        (
            json!({"a":[1,2,3]}),
            json!([{"op":"remove","path":"/a/0"},{"op":"add","path":"/a/2","value":4}]),
            json!({"a":[2,3,4]}),
        ),
        (
            json!({"a":1}),
            json!([{"op":"move","from":"/a","path":"/a"}]),
            json!({"a":1}),
        ),
        (
            json!({"a":1.0}),
            json!([{"op":"test","path":"/a","value":1}]),
            json!({"a":1.0}),
        ),
        (
            json!({"a":{"x":1,"y":[1]}}),
            json!([{"op":"test","path":"/a","value":{"y":[1],"x":1}}]),
            json!({"a":{"x":1,"y":[1]}}),
        ),
        (
            json!({"a/b":{"m~n":1}}),
            json!([{"op":"replace","path":"/a~1b/m~0n","value":2}]),
            json!({"a/b":{"m~n":2}}),
        ),
        (
            json!({"a":null}),
            json!([{"op":"test","path":"/a","value":null},{"op":"add","path":"/b","value":null}]),
            json!({"a":null,"b":null}),
        ),
    ];
    for (target, operations, expected) in cases {
        check_json_patch(target, operations, expected);
    }
    let target = json!({"a":1});
    let failing = json!([{"op":"replace","path":"/a","value":2},{"op":"remove","path":"/zzz"}]);
    assert!(json_patch(&target, &failing).is_err());
    assert_eq!(target, json!({"a":1}));
}

/// A Deployment as `kubectl` reads it back; strategic patch tests share it.
pub(super) fn deployment_web(image: &str) -> Value {
    json!({
        "apiVersion":"apps/v1","kind":"Deployment",
        "metadata":{"name":"web","namespace":"default","uid":"u1","generation":2,
            "annotations":{"deployment.kubernetes.io/revision":"1",
                "kubectl.kubernetes.io/last-applied-configuration":"{\"old\":true}\n"}},
        "spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},
            "strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%","maxUnavailable":"25%"}},
            "template":{"metadata":{"labels":{"app":"web"}},
                "spec":{"containers":[{"name":"nginx","image":image,
                    "ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{}}]}}},
        "status":{"observedGeneration":2,"replicas":2}
    })
}

/// Sets `value` at the JSON pointer `pointer` of a copy of `document`.
pub(super) fn with(document: &Value, pointer: &str, value: Value) -> Value {
    let mut changed = document.clone();
    *changed.pointer_mut(pointer).expect("the pointer exists") = value;
    changed
}

#[test]
fn rollout_undo_json_patch_replaces_template_and_annotations() {
    let live = deployment_web("nginx:1.26");
    let template = json!({"metadata":{"creationTimestamp":null,"labels":{"app":"web"}},
        "spec":{"containers":[{"name":"nginx","image":"nginx:1.25","ports":[{"containerPort":80}],"resources":{}}]}});
    let annotations = json!({"deployment.kubernetes.io/revision":"2",
        "kubectl.kubernetes.io/last-applied-configuration":"{\"old\":true}\n"});
    let undo = json!([{"op":"replace","path":"/spec/template","value":template},
        {"op":"replace","path":"/metadata/annotations","value":annotations}]);
    let expected = with(
        &with(&live, "/spec/template", template),
        "/metadata/annotations",
        annotations,
    );
    check_json_patch(live, undo, expected);
}
