//! Tests of strategic merge patch: what kubectl's commands send, the directives, and the list
//! strategies of the served kinds.

use serde_json::{json, Value};

use super::super::tests::{deployment_web, with};
use super::ListMergeStrategy::{MergeAsSet, MergeByKey};
use super::*;

#[track_caller]
fn check_no_directives(value: &Value) {
    match value {
        Value::Object(members) => {
            for (key, member) in members {
                assert!(!is_directive_key(key), "directive {key} stored in {value}");
                check_no_directives(member);
            }
        }
        Value::Array(items) => items.iter().for_each(check_no_directives),
        _ => {}
    }
}

#[track_caller]
fn check_strategic(kind: &str, target: Value, patch: Value, expected: Value) {
    let schema = BuiltinPatchSchema::for_kind(kind).expect("a served kind");
    match strategic_merge_patch(&target, &patch, &schema) {
        Ok(patched) => {
            assert_eq!(patched, expected, "strategic patch {patch} onto {target}");
            check_no_directives(&patched);
        }
        Err(error) => panic!("strategic patch {patch} onto {target} failed: {error}"),
    }
}

#[track_caller]
fn check_strategic_fails(kind: &str, target: Value, patch: Value, expected_message: &str) {
    let schema = BuiltinPatchSchema::for_kind(kind).expect("a served kind");
    match strategic_merge_patch(&target, &patch, &schema) {
        Ok(patched) => panic!("strategic patch {patch} onto {target} gave {patched}"),
        Err(error) => assert_eq!(error.to_string(), expected_message),
    }
}

#[test]
fn kubectl_apply_second_time_updates_replicas_image_and_annotation_and_keeps_ports() {
    let live = deployment_web("nginx:1.25");
    let patch = json!({"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"new\":true}\n"}},
        "spec":{"replicas":3,"template":{"spec":{"$setElementOrder/containers":[{"name":"nginx"}],
            "containers":[{"image":"nginx:1.26","name":"nginx"}]}}}});
    let expected = with(
        &live,
        "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration",
        json!("{\"new\":true}\n"),
    );
    let expected = with(&expected, "/spec/replicas", json!(3));
    let expected = with(
        &expected,
        "/spec/template/spec/containers/0/image",
        json!("nginx:1.26"),
    );
    check_strategic("Deployment", live, patch, expected);
}

#[test]
fn kubectl_set_image_changes_one_container_and_keeps_the_others_and_their_order() {
    let live = with(
        &deployment_web("nginx:1.25"),
        "/spec/template/spec/containers",
        json!([
        {"name":"sidecar","image":"busybox","env":[{"name":"A","value":"1"}]},
        {"name":"nginx","image":"nginx:1.25","ports":[{"containerPort":80}]}]),
    );
    let set_image = json!({"spec":{"template":{"spec":{
        "$setElementOrder/containers":[{"name":"sidecar"},{"name":"nginx"}],
        "containers":[{"image":"nginx:1.27","name":"nginx"}]}}}});
    let expected = with(
        &live,
        "/spec/template/spec/containers/1/image",
        json!("nginx:1.27"),
    );
    check_strategic("Deployment", live.clone(), set_image, expected.clone());
    // The body §2.9 recorded names only the patched container.
    let set_image_one = json!({"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"nginx"}],
        "containers":[{"image":"nginx:1.27","name":"nginx"}]}}}});
    check_strategic("Deployment", live.clone(), set_image_one, expected.clone());
    // Without any order directive: a container not named in the patch is kept.
    let bare = json!({"spec":{"template":{"spec":{"containers":[{"image":"nginx:1.27","name":"nginx"}]}}}});
    check_strategic("Deployment", live, bare, expected);
}

#[test]
fn kubectl_rollout_and_cordon_bodies_do_what_kubectl_means() {
    let live = deployment_web("nginx:1.25");
    let restart = json!({"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2025-01-01T00:00:00Z"}}}}});
    let restarted = with(
        &live,
        "/spec/template/metadata",
        json!({"labels":{"app":"web"},
        "annotations":{"kubectl.kubernetes.io/restartedAt":"2025-01-01T00:00:00Z"}}),
    );
    check_strategic("Deployment", live.clone(), restart, restarted);
    let paused = with(&live, "/spec", {
        let mut spec = live["spec"].clone();
        spec["paused"] = json!(true);
        spec
    });
    check_strategic(
        "Deployment",
        live.clone(),
        json!({"spec":{"paused":true}}),
        paused.clone(),
    );
    check_strategic("Deployment", paused, json!({"spec":{"paused":null}}), live);
    check_strategic(
        "Node",
        json!({"metadata":{"name":"node-1"},"spec":{"podCIDR":"10.0.0.0/24"}}),
        json!({"spec":{"unschedulable":true}}),
        json!({"metadata":{"name":"node-1"},"spec":{"podCIDR":"10.0.0.0/24","unschedulable":true}}),
    );
    check_strategic(
        "Node",
        json!({"spec":{"unschedulable":true}}),
        json!({"spec":{"unschedulable":null}}),
        json!({"spec":{}}),
    );
}

#[test]
fn merge_lists_merge_items_by_their_keys() {
    let pod = json!({"metadata":{"name":"p"},"spec":{"containers":[
        {"name":"a","image":"a:1","ports":[{"containerPort":80,"name":"http"},{"containerPort":443}],
         "env":[{"name":"X","value":"1"},{"name":"Y","value":"2"}],
         "volumeMounts":[{"name":"data","mountPath":"/data"}]},
        {"name":"b","image":"b:1","ports":[{"containerPort":9090}]}],
        "volumes":[{"name":"data","emptyDir":{}}],
        "tolerations":[{"key":"k","operator":"Exists"}],
        "imagePullSecrets":[{"name":"s1"}],
        "hostAliases":[{"ip":"10.0.0.1","hostnames":["a"]}]}});
    let cases = [
        // ports of an untouched container are kept; a touched container's ports merge by containerPort
        (
            json!({"spec":{"containers":[{"name":"b","ports":[{"containerPort":9090,"name":"metrics"}]}]}}),
            with(
                &pod,
                "/spec/containers/1/ports/0",
                json!({"containerPort":9090,"name":"metrics"}),
            ),
        ),
        (
            json!({"spec":{"containers":[{"name":"a","ports":[{"containerPort":8080}]}]}}),
            with(
                &pod,
                "/spec/containers/0/ports",
                json!([{"containerPort":80,"name":"http"},{"containerPort":443},{"containerPort":8080}]),
            ),
        ),
        // env by name, null deletes a field of an item
        (
            json!({"spec":{"containers":[{"name":"a","env":[{"name":"Y","value":"3"},{"name":"Z","value":"4"}]}]}}),
            with(
                &pod,
                "/spec/containers/0/env",
                json!([{"name":"X","value":"1"},{"name":"Y","value":"3"},{"name":"Z","value":"4"}]),
            ),
        ),
        (
            json!({"spec":{"containers":[{"name":"a","env":[{"name":"X","value":null}]}]}}),
            with(&pod, "/spec/containers/0/env/0", json!({"name":"X"})),
        ),
        // volumeMounts by mountPath, volumes and imagePullSecrets by name, hostAliases by ip
        (
            json!({"spec":{"containers":[{"name":"a","volumeMounts":[{"name":"cache","mountPath":"/cache"}]}]}}),
            with(
                &pod,
                "/spec/containers/0/volumeMounts",
                json!([{"name":"data","mountPath":"/data"},{"name":"cache","mountPath":"/cache"}]),
            ),
        ),
        (
            json!({"spec":{"volumes":[{"name":"cache","emptyDir":{}}],"imagePullSecrets":[{"name":"s2"}]}}),
            with(
                &with(
                    &pod,
                    "/spec/volumes",
                    json!([{"name":"data","emptyDir":{}},{"name":"cache","emptyDir":{}}]),
                ),
                "/spec/imagePullSecrets",
                json!([{"name":"s1"},{"name":"s2"}]),
            ),
        ),
        (
            json!({"spec":{"hostAliases":[{"ip":"10.0.0.1","hostnames":["b"]},{"ip":"10.0.0.2","hostnames":["c"]}]}}),
            with(
                &pod,
                "/spec/hostAliases",
                json!([{"ip":"10.0.0.1","hostnames":["b"]},{"ip":"10.0.0.2","hostnames":["c"]}]),
            ),
        ),
        // a new container is appended
        (
            json!({"spec":{"containers":[{"name":"c","image":"c:1"}]}}),
            with(&pod, "/spec/containers", {
                let mut containers = pod["spec"]["containers"].clone();
                containers
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"name":"c","image":"c:1"}));
                containers
            }),
        ),
        // lists without a strategy are replaced: tolerations, a container's args
        (
            json!({"spec":{"tolerations":[{"key":"other","operator":"Exists"}]}}),
            with(
                &pod,
                "/spec/tolerations",
                json!([{"key":"other","operator":"Exists"}]),
            ),
        ),
        (
            json!({"spec":{"tolerations":[]}}),
            with(&pod, "/spec/tolerations", json!([])),
        ),
    ];
    for (patch, expected) in cases {
        check_strategic("Pod", pod.clone(), patch, expected);
    }
}

#[test]
fn patch_directives_delete_and_replace_items_lists_and_maps() {
    let pod = json!({"metadata":{"labels":{"a":"1","b":"2"}},"spec":{"containers":[
        {"name":"a","image":"a:1"},{"name":"b","image":"b:1"},{"name":"c","image":"c:1"}]}});
    let cases = [
        (
            json!({"spec":{"containers":[{"$patch":"delete","name":"b"}]}}),
            with(
                &pod,
                "/spec/containers",
                json!([{"name":"a","image":"a:1"},{"name":"c","image":"c:1"}]),
            ),
        ),
        (
            json!({"spec":{"containers":[{"$patch":"delete","name":"nope"}]}}),
            pod.clone(),
        ),
        (
            json!({"spec":{"containers":[{"name":"z","image":"z:1"},{"$patch":"replace"}]}}),
            with(
                &pod,
                "/spec/containers",
                json!([{"name":"z","image":"z:1"}]),
            ),
        ),
        (
            json!({"metadata":{"labels":{"$patch":"replace","c":"3"}}}),
            with(&pod, "/metadata/labels", json!({"c":"3"})),
        ),
        (
            json!({"metadata":{"labels":{"$patch":"delete"}}}),
            json!({"metadata":{},"spec":pod["spec"]}),
        ),
        (
            json!({"metadata":{"labels":{"$patch":"merge","c":"3"}}}),
            with(&pod, "/metadata/labels", json!({"a":"1","b":"2","c":"3"})),
        ),
        (
            json!({"$patch":"replace","kind":"Pod"}),
            json!({"kind":"Pod"}),
        ),
    ];
    for (patch, expected) in cases {
        check_strategic("Pod", pod.clone(), patch, expected);
    }
}

#[test]
fn set_element_order_orders_merged_lists_and_keeps_server_only_items_in_place() {
    let pod = json!({"spec":{"containers":[{"name":"a"},{"name":"b"},{"name":"c"}]}});
    let names = |names: &[&str]| {
        json!({"spec":{"containers":
        names.iter().map(|name| json!({"name":name})).collect::<Vec<_>>()}})
    };
    let order = |names: &[&str]| {
        names
            .iter()
            .map(|name| json!({"name":name}))
            .collect::<Vec<_>>()
    };
    let cases = [
        (
            json!({"spec":{"$setElementOrder/containers":order(&["c","a","b"])}}),
            names(&["c", "a", "b"]),
        ),
        (
            json!({"spec":{"$setElementOrder/containers":order(&["c","a"])}}),
            names(&["b", "c", "a"]),
        ),
        (
            json!({"spec":{"$setElementOrder/containers":order(&["c","d"]),"containers":[{"name":"d"}]}}),
            names(&["a", "b", "c", "d"]),
        ),
        (
            json!({"spec":{"$setElementOrder/containers":order(&["d","b"]),"containers":[{"name":"d"}]}}),
            names(&["d", "a", "b", "c"]),
        ),
        (
            json!({"spec":{"$setElementOrder/containers":order(&["b","d","a"]),"containers":[{"name":"d"},{"$patch":"delete","name":"c"}]}}),
            names(&["b", "d", "a"]),
        ),
    ];
    for (patch, expected) in cases {
        check_strategic("Pod", pod.clone(), patch, expected);
    }
    check_strategic(
        "Pod",
        json!({"metadata":{"name":"p"}}),
        json!({"spec":{"$setElementOrder/containers":order(&["y","x"]),"containers":[{"name":"y"},{"name":"x"}]}}),
        json!({"metadata":{"name":"p"},"spec":{"containers":[{"name":"y"},{"name":"x"}]}}),
    );
}

#[test]
fn primitive_merge_lists_are_sets_with_deletions() {
    let pod = json!({"metadata":{"finalizers":["a","b"]}});
    let cases = [
        (
            json!({"metadata":{"finalizers":["c","a"]}}),
            json!({"metadata":{"finalizers":["a","b","c"]}}),
        ),
        (
            json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["a"]}}),
            json!({"metadata":{"finalizers":["b"]}}),
        ),
        (
            json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["a"],"finalizers":["d"]}}),
            json!({"metadata":{"finalizers":["b","d"]}}),
        ),
        (
            json!({"metadata":{"$setElementOrder/finalizers":["b","a"]}}),
            json!({"metadata":{"finalizers":["b","a"]}}),
        ),
        (
            json!({"metadata":{"finalizers":null}}),
            json!({"metadata":{}}),
        ),
    ];
    for (patch, expected) in cases {
        check_strategic("Pod", pod.clone(), patch, expected);
    }
}

#[test]
fn retain_keys_keeps_only_the_listed_fields() {
    let deployment = deployment_web("nginx:1.25");
    let recreate = json!({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate","rollingUpdate":null}}});
    check_strategic(
        "Deployment",
        deployment.clone(),
        recreate,
        with(&deployment, "/spec/strategy", json!({"type":"Recreate"})),
    );
    let pod = json!({"spec":{"volumes":[{"name":"v","emptyDir":{}},{"name":"w","emptyDir":{}}]}});
    let to_host_path = json!({"spec":{"$setElementOrder/volumes":[{"name":"v"},{"name":"w"}],
        "volumes":[{"$retainKeys":["hostPath","name"],"hostPath":{"path":"/x"},"name":"v"}]}});
    check_strategic(
        "Pod",
        pod,
        to_host_path,
        json!({"spec":{"volumes":[{"name":"v","hostPath":{"path":"/x"}},{"name":"w","emptyDir":{}}]}}),
    );
}

#[test]
fn other_served_kinds_merge_their_tagged_lists() {
    check_strategic(
        "Service",
        json!({"spec":{"ports":[{"port":80,"targetPort":8080},{"port":443}],"selector":{"app":"web"}}}),
        json!({"spec":{"ports":[{"port":80,"targetPort":9090},{"port":8443}],"selector":{"app":"api"}}}),
        json!({"spec":{"ports":[{"port":80,"targetPort":9090},{"port":443},{"port":8443}],"selector":{"app":"api"}}}),
    );
    check_strategic(
        "Node",
        json!({"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"MemoryPressure","status":"False"}],
            "addresses":[{"type":"InternalIP","address":"10.0.0.1"}]}}),
        json!({"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletDown"}]}}),
        json!({"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletDown"},{"type":"MemoryPressure","status":"False"}],
            "addresses":[{"type":"InternalIP","address":"10.0.0.1"}]}}),
    );
    check_strategic(
        "ReplicaSet",
        json!({"metadata":{"ownerReferences":[{"uid":"d1","kind":"Deployment","name":"web"}]}}),
        json!({"metadata":{"ownerReferences":[{"uid":"d1","controller":true},{"uid":"d2","kind":"Deployment","name":"other"}]}}),
        json!({"metadata":{"ownerReferences":[{"uid":"d1","kind":"Deployment","name":"web","controller":true},
            {"uid":"d2","kind":"Deployment","name":"other"}]}}),
    );
    // Endpoints' subsets carry no strategy: replaced whole.
    check_strategic(
        "Endpoints",
        json!({"subsets":[{"addresses":[{"ip":"10.0.0.1"}]}]}),
        json!({"subsets":[{"addresses":[{"ip":"10.0.0.2"}]}]}),
        json!({"subsets":[{"addresses":[{"ip":"10.0.0.2"}]}]}),
    );
}

#[test]
fn strategic_merge_patch_refuses_patches_that_do_not_apply() {
    let pod = json!({"spec":{"containers":[{"name":"a"}]}});
    let cases = [
        (
            json!({"spec":{"containers":[{"image":"x"}]}}),
            "strategic merge patch does not apply at spec.containers: map {\"image\":\"x\"} does not contain declared merge key: name",
        ),
        (
            json!({"spec":{"containers":[{"$patch":"delete"}]}}),
            "strategic merge patch does not apply at spec.containers: delete patch type with no merge key \"name\" defined",
        ),
        (
            json!({"spec":{"containers":[{"$patch":"merge","name":"a"}]}}),
            "strategic merge patch does not apply at spec.containers: merging lists cannot yet be specified in the patch",
        ),
        (
            json!({"spec":{"containers":["a"]}}),
            "strategic merge patch does not apply at spec.containers: the items of a list merged by \"name\" must be objects, not \"a\"",
        ),
        (
            json!({"spec":{"$patch":"remove"}}),
            "strategic merge patch does not apply at spec: unknown patch type \"remove\" in map",
        ),
        (
            json!({"spec":{"$retainKeys":"containers"}}),
            "strategic merge patch does not apply at spec: $retainKeys must be a list of field names",
        ),
        (
            json!({"spec":{"$retainKeys":["nodeName"],"containers":[]}}),
            "strategic merge patch does not apply at spec: field \"containers\" is in the patch but not in its $retainKeys list",
        ),
        (
            json!({"spec":{"$setElementOrder/containers":[{"name":"a"}],"containers":[{"name":"b"}]}}),
            "strategic merge patch does not apply at spec.containers: the patch list does not match the $setElementOrder list at {\"name\":\"b\"}",
        ),
        (
            json!({"metadata":{"finalizers":[{"a":1}]}}),
            "strategic merge patch does not apply at metadata.finalizers: a list merged as a set takes only primitive values",
        ),
        (
            json!([]),
            "strategic merge patch does not apply: a strategic merge patch must be a JSON object",
        ),
    ];
    for (patch, message) in cases {
        check_strategic_fails("Pod", pod.clone(), patch, message);
    }
}

#[test]
fn directives_in_new_values_are_consumed_not_stored() {
    check_strategic(
        "Deployment",
        json!({"metadata":{"name":"d"}}),
        json!({"spec":{"template":{"metadata":{"labels":{"$patch":"replace","a":"1"}},
            "spec":{"$setElementOrder/containers":[{"name":"x"}],"containers":[{"name":"x","env":[{"name":"E","value":null}]},{"$patch":"delete","name":"y"}],
            "$deleteFromPrimitiveList/finalizers":["z"],"gone":null}}}}),
        json!({"metadata":{"name":"d"},"spec":{"template":{"metadata":{"labels":{"a":"1"}},
            "spec":{"containers":[{"name":"x","env":[{"name":"E"}]}]}}}}),
    );
}

#[test]
fn builtin_schemas_give_the_kubernetes_struct_tags() {
    let cases: &[(&str, &[&str], Option<ListMergeStrategy>)] = &[
        ("Pod", &["spec", "containers"], Some(MergeByKey("name"))),
        (
            "Pod",
            &["spec", "initContainers", "env"],
            Some(MergeByKey("name")),
        ),
        (
            "Pod",
            &["spec", "ephemeralContainers", "ports"],
            Some(MergeByKey("containerPort")),
        ),
        (
            "Pod",
            &["spec", "containers", "volumeMounts"],
            Some(MergeByKey("mountPath")),
        ),
        ("Pod", &["spec", "volumes"], Some(MergeByKey("name"))),
        ("Pod", &["spec", "tolerations"], None),
        ("Pod", &["spec", "containers", "args"], None),
        ("Pod", &["status", "conditions"], Some(MergeByKey("type"))),
        ("Pod", &["metadata", "finalizers"], Some(MergeAsSet)),
        (
            "Deployment",
            &["spec", "template", "spec", "containers"],
            Some(MergeByKey("name")),
        ),
        (
            "Deployment",
            &["spec", "template", "spec", "hostAliases"],
            Some(MergeByKey("ip")),
        ),
        (
            "Deployment",
            &["spec", "template", "metadata", "ownerReferences"],
            Some(MergeByKey("uid")),
        ),
        ("Deployment", &["spec", "containers"], None),
        (
            "ReplicationController",
            &["status", "conditions"],
            Some(MergeByKey("type")),
        ),
        (
            "ReplicaSet",
            &["metadata", "ownerReferences"],
            Some(MergeByKey("uid")),
        ),
        ("Service", &["spec", "ports"], Some(MergeByKey("port"))),
        ("Endpoints", &["subsets"], None),
        ("Node", &["status", "addresses"], Some(MergeByKey("type"))),
        ("Node", &["spec", "taints"], None),
        (
            "Namespace",
            &["status", "conditions"],
            Some(MergeByKey("type")),
        ),
        ("Node", &["spec", "podCIDRs"], Some(MergeAsSet)),
        ("Pod", &["status", "podIPs"], Some(MergeByKey("ip"))),
        (
            "Service",
            &["status", "conditions"],
            Some(MergeByKey("type")),
        ),
        ("ConfigMap", &["metadata", "finalizers"], Some(MergeAsSet)),
        ("ConfigMap", &["data"], None),
        (
            "Secret",
            &["metadata", "ownerReferences"],
            Some(MergeByKey("uid")),
        ),
        ("ServiceAccount", &["secrets"], Some(MergeByKey("name"))),
        ("ServiceAccount", &["imagePullSecrets"], None),
        ("Lease", &["metadata", "finalizers"], Some(MergeAsSet)),
        ("Lease", &["spec", "holderIdentity"], None),
        (
            "Scale",
            &["metadata", "ownerReferences"],
            Some(MergeByKey("uid")),
        ),
        ("Scale", &["spec", "replicas"], None),
        ("Pod", &["spec", "nope", "containers"], None),
        ("Pod", &[], None),
    ];
    for (kind, path, expected) in cases {
        let schema = BuiltinPatchSchema::for_kind(kind).unwrap();
        assert_eq!(
            schema.list_merge_strategy(path),
            *expected,
            "{kind} {path:?}"
        );
    }
    // A kind the served schema does not have gets none: its lists are replaced.
    assert_eq!(BuiltinPatchSchema::for_kind("Frobnicator"), None);
    assert_eq!(
        NoListMergeStrategies.list_merge_strategy(&["spec", "containers"]),
        None
    );
}

#[test]
fn kinds_stored_as_documents_merge_the_lists_their_schema_tags() {
    check_strategic(
        "ServiceAccount",
        json!({"metadata":{"name":"robot","finalizers":["a"]},"secrets":[{"name":"s1"}],
            "imagePullSecrets":[{"name":"p1"}]}),
        json!({"metadata":{"finalizers":["b"]},"secrets":[{"name":"s2"}],
            "imagePullSecrets":[{"name":"p2"}]}),
        json!({"metadata":{"name":"robot","finalizers":["a","b"]},"secrets":[{"name":"s1"},{"name":"s2"}],
            "imagePullSecrets":[{"name":"p2"}]}),
    );
    check_strategic(
        "Lease",
        json!({"metadata":{"name":"leader"},"spec":{"holderIdentity":"a","leaseDurationSeconds":15}}),
        json!({"spec":{"holderIdentity":"b"}}),
        json!({"metadata":{"name":"leader"},"spec":{"holderIdentity":"b","leaseDurationSeconds":15}}),
    );
}
