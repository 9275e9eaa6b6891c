use super::*;

/// kubectl 1.32's (and kube-rs's) Accept for `/api` and `/apis` (traces/01).
const KUBECTL_DISCOVERY_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
/// kubectl's Accept for the legacy `/api/v1` and `/apis/apps/v1` (traces/01).
const KUBECTL_LEGACY_ACCEPT: &str = "application/json, */*";

#[track_caller]
fn check_accept(header: &str, expected: Option<&str>) {
    assert_eq!(accepts_aggregated(header), expected, "Accept: {header}");
}

#[test]
fn kubectls_discovery_accept_selects_v2() {
    check_accept(KUBECTL_DISCOVERY_ACCEPT, Some("v2"));
}

#[test]
fn accept_headers_select_the_first_form_kcm_can_serve() {
    let cases: &[(&str, Option<&str>)] = &[
        ("application/json", None),
        (KUBECTL_LEGACY_ACCEPT, None),
        ("application/json, */*", None),
        ("*/*", None),
        ("", None),
        (
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
            Some("v2beta1"),
        ),
        // parameters in any order, spaces and quotes tolerated, names any case
        (
            "application/json; as=APIGroupDiscoveryList ; v=v2 ;g=apidiscovery.k8s.io",
            Some("v2"),
        ),
        (
            " Application/JSON;AS=\"APIGroupDiscoveryList\";G=apidiscovery.k8s.io;V=v2 ",
            Some("v2"),
        ),
        // plain JSON written first wins over a later aggregated range
        (
            "application/json,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            None,
        ),
        // unknown discovery version, group or kind are skipped, not fatal
        (
            "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
            Some("v2beta1"),
        ),
        (
            "application/json;g=example.com;v=v2;as=APIGroupDiscoveryList,application/json",
            None,
        ),
        ("application/json;g=apidiscovery.k8s.io;v=v2", None),
        ("application/json;as=Table;v=v1;g=meta.k8s.io", None),
        // protobuf cannot be served: skipped, then JSON aggregated is taken
        (
            "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            Some("v2"),
        ),
        ("application/vnd.kubernetes.protobuf", None),
        // q=0 means "not acceptable"
        (
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0,application/json",
            None,
        ),
        (
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0.5",
            Some("v2"),
        ),
    ];
    for (header, expected) in cases {
        check_accept(header, *expected);
    }
}

#[test]
fn version_reports_kubernetes_1_32_with_kcms_version() {
    let document = version("0.1.0");
    assert_eq!(document["major"], "1");
    assert_eq!(document["minor"], "32");
    assert_eq!(document["gitVersion"], "v1.32.0-kcm.0.1.0");
    assert_eq!(document["gitTreeState"], "clean");
    assert_eq!(document["goVersion"], "rust");
    assert_eq!(document["compiler"], "rustc");
    let keys: Vec<&str> = document
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "major",
            "minor",
            "gitVersion",
            "gitCommit",
            "gitTreeState",
            "buildDate",
            "goVersion",
            "compiler",
            "platform"
        ]
    );
    let platform = document["platform"].as_str().unwrap();
    assert!(platform.starts_with(std::env::consts::OS), "{platform}");
    assert!(!platform.contains("x86_64") && !platform.contains("aarch64"));
}

#[test]
fn platforms_are_spelled_as_go_spells_them() {
    let cases = [
        ("linux", "x86_64", "linux/amd64"),
        ("linux", "aarch64", "linux/arm64"),
        ("linux", "x86", "linux/386"),
        ("linux", "s390x", "linux/s390x"),
        ("linux", "riscv64", "linux/riscv64"),
        ("macos", "aarch64", "macos/arm64"),
    ];
    for (os, arch, expected) in cases {
        assert_eq!(go_platform(os, arch), expected, "{os} {arch}");
    }
}

/// What the aggregated entry of one resource must be, written out in full.
#[track_caller]
fn check_aggregated_resource(document: &Value, plural: &str, expected: Value) {
    let entries = document["items"][0]["versions"][0]["resources"]
        .as_array()
        .expect("resources");
    let entry = entries
        .iter()
        .find(|entry| entry["resource"] == plural)
        .unwrap_or_else(|| panic!("{plural} missing from {document}"));
    assert_eq!(*entry, expected, "{plural}");
}

#[test]
fn aggregated_core_lists_every_core_resource() {
    let document = aggregated_core("v2");
    assert_eq!(document["kind"], "APIGroupDiscoveryList");
    assert_eq!(document["apiVersion"], "apidiscovery.k8s.io/v2");
    assert_eq!(document["metadata"], json!({}));
    let items = document["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["metadata"]["name"], "");
    let versions = items[0]["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 1);
    assert_eq!(versions[0]["version"], "v1");
    assert_eq!(versions[0]["freshness"], "Current");
    let plurals: Vec<&str> = versions[0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["resource"].as_str().unwrap())
        .collect();
    assert_eq!(
        plurals,
        [
            "configmaps",
            "endpoints",
            "events",
            "namespaces",
            "nodes",
            "pods",
            "replicationcontrollers",
            "secrets",
            "serviceaccounts",
            "services"
        ]
    );
    let get = json!(["get", "patch", "update"]);
    let documents = json!(["create", "delete", "get", "list", "patch", "update", "watch"]);
    let write = json!([
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch"
    ]);
    check_aggregated_resource(
        &document,
        "pods",
        json!({
            "resource": "pods",
            "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
            "scope": "Namespaced",
            "singularResource": "pod",
            "verbs": write,
            "shortNames": ["po"],
            "categories": ["all"],
            "subresources": [
                {"subresource": "binding",
                 "responseKind": {"group": "", "version": "v1", "kind": "Binding"},
                 "verbs": ["create"]},
                {"subresource": "status",
                 "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                 "verbs": get},
            ],
        }),
    );
    check_aggregated_resource(
        &document,
        "replicationcontrollers",
        json!({
            "resource": "replicationcontrollers",
            "responseKind": {"group": "", "version": "v1", "kind": "ReplicationController"},
            "scope": "Namespaced",
            "singularResource": "replicationcontroller",
            "verbs": write,
            "shortNames": ["rc"],
            "categories": ["all"],
            "subresources": [
                {"subresource": "scale",
                 "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                 "verbs": get},
                {"subresource": "status",
                 "responseKind": {"group": "", "version": "v1", "kind": "ReplicationController"},
                 "verbs": get},
            ],
        }),
    );
    check_aggregated_resource(
        &document,
        "services",
        json!({
            "resource": "services",
            "responseKind": {"group": "", "version": "v1", "kind": "Service"},
            "scope": "Namespaced",
            "singularResource": "service",
            "verbs": write,
            "shortNames": ["svc"],
            "categories": ["all"],
            "subresources": [
                {"subresource": "status",
                 "responseKind": {"group": "", "version": "v1", "kind": "Service"},
                 "verbs": get},
            ],
        }),
    );
    check_aggregated_resource(
        &document,
        "endpoints",
        json!({
            "resource": "endpoints",
            "responseKind": {"group": "", "version": "v1", "kind": "Endpoints"},
            "scope": "Namespaced",
            "singularResource": "endpoints",
            "verbs": write,
            "shortNames": ["ep"],
        }),
    );
    check_aggregated_resource(
        &document,
        "events",
        json!({
            "resource": "events",
            "responseKind": {"group": "", "version": "v1", "kind": "Event"},
            "scope": "Namespaced",
            "singularResource": "event",
            "verbs": documents,
            "shortNames": ["ev"],
        }),
    );
    check_aggregated_resource(
        &document,
        "namespaces",
        json!({
            "resource": "namespaces",
            "responseKind": {"group": "", "version": "v1", "kind": "Namespace"},
            "scope": "Cluster",
            "singularResource": "namespace",
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            "shortNames": ["ns"],
            "subresources": [
                {"subresource": "finalize",
                 "responseKind": {"group": "", "version": "v1", "kind": "Namespace"},
                 "verbs": ["update"]},
            ],
        }),
    );
    check_aggregated_resource(
        &document,
        "nodes",
        json!({
            "resource": "nodes",
            "responseKind": {"group": "", "version": "v1", "kind": "Node"},
            "scope": "Cluster",
            "singularResource": "node",
            "verbs": ["delete", "get", "list", "patch", "update", "watch"],
            "shortNames": ["no"],
            "subresources": [
                {"subresource": "status",
                 "responseKind": {"group": "", "version": "v1", "kind": "Node"},
                 "verbs": ["get", "patch", "update"]},
            ],
        }),
    );
}

#[test]
fn aggregated_groups_lists_apps_with_scale_and_status() {
    let document = aggregated_groups("v2");
    let items = document["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(
        items[0]["metadata"],
        json!({"name": "apps", "creationTimestamp": null})
    );
    assert_eq!(
        items[1]["metadata"],
        json!({"name": "coordination.k8s.io", "creationTimestamp": null})
    );
    let get = json!(["get", "patch", "update"]);
    let write = json!([
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch"
    ]);
    for (plural, singular, kind, short) in [
        ("deployments", "deployment", "Deployment", "deploy"),
        ("replicasets", "replicaset", "ReplicaSet", "rs"),
    ] {
        check_aggregated_resource(
            &document,
            plural,
            json!({
                "resource": plural,
                "responseKind": {"group": "apps", "version": "v1", "kind": kind},
                "scope": "Namespaced",
                "singularResource": singular,
                "verbs": write,
                "shortNames": [short],
                "categories": ["all"],
                "subresources": [
                    {"subresource": "scale",
                     "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                     "verbs": get},
                    {"subresource": "status",
                     "responseKind": {"group": "apps", "version": "v1", "kind": kind},
                     "verbs": get},
                ],
            }),
        );
    }
    assert_eq!(
        document["items"][0]["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn aggregated_documents_keep_go_field_order() {
    let document = aggregated_groups("v2");
    let keys =
        |value: &Value| -> Vec<String> { value.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(keys(&document), ["kind", "apiVersion", "metadata", "items"]);
    let version = &document["items"][0]["versions"][0];
    assert_eq!(keys(version), ["version", "resources", "freshness"]);
    assert_eq!(
        keys(&version["resources"][0]),
        [
            "resource",
            "responseKind",
            "scope",
            "singularResource",
            "verbs",
            "shortNames",
            "categories",
            "subresources"
        ]
    );
    assert_eq!(
        keys(&version["resources"][0]["subresources"][0]),
        ["subresource", "responseKind", "verbs"]
    );
}

#[test]
fn v2beta1_has_the_same_shape_under_its_own_api_version() {
    for (v2, v2beta1) in [
        (aggregated_core("v2"), aggregated_core("v2beta1")),
        (aggregated_groups("v2"), aggregated_groups("v2beta1")),
    ] {
        assert_eq!(v2beta1["apiVersion"], "apidiscovery.k8s.io/v2beta1");
        assert_eq!(v2beta1["items"], v2["items"]);
    }
    assert_eq!(
        aggregated_content_type("v2beta1"),
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
    );
    // what kcm answers, the server sends back as the Content-Type kubectl checks
    let answer = accepts_aggregated(KUBECTL_DISCOVERY_ACCEPT).unwrap();
    assert_eq!(
        aggregated_content_type(answer),
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
}

#[test]
fn every_resource_is_in_exactly_one_aggregated_document() {
    let core = aggregated_core("v2");
    let groups = aggregated_groups("v2");
    let mut listed = 0;
    for resource in resources::RESOURCES {
        let (document, other) = if resource.is_core() {
            (&core, &groups)
        } else {
            (&groups, &core)
        };
        let contains = |document: &Value| {
            document["items"].as_array().unwrap().iter().any(|item| {
                item["versions"][0]["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["resource"] == resource.plural)
            })
        };
        assert!(contains(document), "{}", resource.plural);
        assert!(!contains(other), "{}", resource.plural);
        listed += 1;
    }
    assert_eq!(listed, resources::RESOURCES.len());
}

#[test]
fn legacy_api_lists_v1_at_the_server_address() {
    assert_eq!(
        api_versions("127.0.0.1:8080"),
        json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:8080"}
            ],
        })
    );
}

#[test]
fn legacy_apis_lists_apps_v1_preferred() {
    let apps = json!({
        "name": "apps",
        "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"},
    });
    let coordination = json!({
        "name": "coordination.k8s.io",
        "versions": [{"groupVersion": "coordination.k8s.io/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "coordination.k8s.io/v1", "version": "v1"},
    });
    assert_eq!(
        api_group_list(),
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [apps, coordination]})
    );
    let mut group = json!({"kind": "APIGroup", "apiVersion": "v1"});
    group
        .as_object_mut()
        .unwrap()
        .extend(apps.as_object().unwrap().clone());
    assert_eq!(api_group("apps"), Some(group));
    assert_eq!(api_group(""), None);
    assert_eq!(api_group("batch"), None);
}

#[test]
fn legacy_resource_lists_have_resources_then_their_subresources() {
    let core = api_resource_list("", "v1").unwrap();
    assert_eq!(core["kind"], "APIResourceList");
    assert_eq!(core["apiVersion"], "v1");
    assert_eq!(core["groupVersion"], "v1");
    let names: Vec<&str> = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "configmaps",
            "endpoints",
            "events",
            "namespaces",
            "namespaces/finalize",
            "nodes",
            "nodes/status",
            "pods",
            "pods/binding",
            "pods/status",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "replicationcontrollers/status",
            "secrets",
            "serviceaccounts",
            "services",
            "services/status"
        ]
    );
    let entry = |list: &Value, name: &str| -> Value {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} missing"))
    };
    let write = json!([
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch"
    ]);
    let sub = json!(["get", "patch", "update"]);
    assert_eq!(
        entry(&core, "pods"),
        json!({"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
               "verbs": write, "shortNames": ["po"], "categories": ["all"]})
    );
    assert_eq!(
        entry(&core, "nodes"),
        json!({"name": "nodes", "singularName": "node", "namespaced": false, "kind": "Node",
               "verbs": ["delete", "get", "list", "patch", "update", "watch"],
               "shortNames": ["no"]})
    );
    assert_eq!(
        entry(&core, "pods/status"),
        json!({"name": "pods/status", "singularName": "", "namespaced": true, "kind": "Pod",
               "verbs": sub})
    );
    assert_eq!(
        entry(&core, "replicationcontrollers/scale"),
        json!({"name": "replicationcontrollers/scale", "singularName": "", "namespaced": true,
               "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": sub})
    );

    let apps = api_resource_list("apps", "v1").unwrap();
    assert_eq!(apps["groupVersion"], "apps/v1");
    assert_eq!(
        entry(&apps, "deployments"),
        json!({"name": "deployments", "singularName": "deployment", "namespaced": true,
               "kind": "Deployment", "verbs": write, "shortNames": ["deploy"],
               "categories": ["all"]})
    );
    assert_eq!(
        entry(&apps, "deployments/scale"),
        json!({"name": "deployments/scale", "singularName": "", "namespaced": true,
               "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": sub})
    );
    assert_eq!(
        entry(&apps, "replicasets/status"),
        json!({"name": "replicasets/status", "singularName": "", "namespaced": true,
               "kind": "ReplicaSet", "verbs": sub})
    );
    assert_eq!(apps["resources"].as_array().unwrap().len(), 6);
}

#[test]
fn unknown_group_versions_have_no_resource_list() {
    for (group, version) in [("", "v2"), ("apps", "v1beta1"), ("batch", "v1"), ("", "")] {
        assert_eq!(api_resource_list(group, version), None, "{group}/{version}");
    }
}
