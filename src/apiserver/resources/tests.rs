//! Unit tests of the resource table: each row against an independent list, and the
//! look-ups.

use super::*;

/// What one row of the table must say, written out independently of it.
struct Expected {
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    in_category_all: bool,
    subresources: &'static [(&'static str, &'static str, &'static str)],
    directory: Option<&'static str>,
}

const EXPECTED: &[Expected] = &[
    Expected {
        group: "",
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        in_category_all: false,
        subresources: &[("finalize", "", "Namespace")],
        directory: Some("namespaces"),
    },
    Expected {
        group: "",
        plural: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        short_names: &["no"],
        in_category_all: false,
        subresources: &[("status", "", "Node")],
        directory: Some("nodes"),
    },
    Expected {
        group: "",
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        short_names: &["po"],
        in_category_all: true,
        subresources: &[("binding", "", "Binding"), ("status", "", "Pod")],
        directory: Some("pods"),
    },
    Expected {
        group: "",
        plural: "replicationcontrollers",
        singular: "replicationcontroller",
        kind: "ReplicationController",
        namespaced: true,
        short_names: &["rc"],
        in_category_all: true,
        subresources: &[
            ("scale", "autoscaling", "Scale"),
            ("status", "", "ReplicationController"),
        ],
        directory: Some("controllers"),
    },
    Expected {
        group: "",
        plural: "services",
        singular: "service",
        kind: "Service",
        namespaced: true,
        short_names: &["svc"],
        in_category_all: true,
        subresources: &[("status", "", "Service")],
        directory: Some("services/specs"),
    },
    Expected {
        group: "",
        plural: "endpoints",
        singular: "endpoints",
        kind: "Endpoints",
        namespaced: true,
        short_names: &["ep"],
        in_category_all: false,
        subresources: &[],
        directory: Some("services/endpoints"),
    },
    Expected {
        group: "",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        in_category_all: false,
        subresources: &[],
        directory: Some("events"),
    },
    Expected {
        group: "apps",
        plural: "replicasets",
        singular: "replicaset",
        kind: "ReplicaSet",
        namespaced: true,
        short_names: &["rs"],
        in_category_all: true,
        subresources: &[
            ("scale", "autoscaling", "Scale"),
            ("status", "apps", "ReplicaSet"),
        ],
        directory: Some("replicasets"),
    },
    Expected {
        group: "apps",
        plural: "deployments",
        singular: "deployment",
        kind: "Deployment",
        namespaced: true,
        short_names: &["deploy"],
        in_category_all: true,
        subresources: &[
            ("scale", "autoscaling", "Scale"),
            ("status", "apps", "Deployment"),
        ],
        directory: Some("deployments"),
    },
    Expected {
        group: "",
        plural: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        namespaced: true,
        short_names: &["cm"],
        in_category_all: false,
        subresources: &[],
        directory: Some("configmaps"),
    },
    Expected {
        group: "",
        plural: "secrets",
        singular: "secret",
        kind: "Secret",
        namespaced: true,
        short_names: &[],
        in_category_all: false,
        subresources: &[],
        directory: Some("secrets"),
    },
    Expected {
        group: "",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        kind: "ServiceAccount",
        namespaced: true,
        short_names: &["sa"],
        in_category_all: false,
        subresources: &[],
        directory: Some("serviceaccounts"),
    },
    Expected {
        group: "coordination.k8s.io",
        plural: "leases",
        singular: "lease",
        kind: "Lease",
        namespaced: true,
        short_names: &[],
        in_category_all: false,
        subresources: &[],
        directory: Some("leases"),
    },
];

#[track_caller]
fn check_row(expected: &Expected) {
    let plural = expected.plural;
    let resource = find(expected.group, "v1", plural)
        .unwrap_or_else(|| panic!("{plural} is not in the table"));
    assert_eq!(resource.singular, expected.singular, "{plural}");
    assert_eq!(resource.kind, expected.kind, "{plural}");
    assert_eq!(
        resource.list_kind,
        format!("{}List", expected.kind),
        "{plural}"
    );
    assert_eq!(resource.namespaced, expected.namespaced, "{plural}");
    assert_eq!(resource.short_names, expected.short_names, "{plural}");
    let categories: &[&str] = if expected.in_category_all {
        &["all"]
    } else {
        &[]
    };
    assert_eq!(resource.categories, categories, "{plural}");
    let subresources: Vec<(&str, &str, &str)> = resource
        .subresources
        .iter()
        .map(|sub| (sub.name, sub.group, sub.kind))
        .collect();
    assert_eq!(subresources, expected.subresources, "{plural}");
    for sub in resource.subresources {
        assert_eq!(sub.version, "v1", "{plural}/{}", sub.name);
    }
    assert_eq!(resource.storage.directory(), expected.directory, "{plural}");
    let verbs = match plural {
        "namespaces" => NAMESPACE_VERBS,
        "nodes" => NODE_VERBS,
        "configmaps" | "secrets" | "serviceaccounts" | "leases" | "events" => DOCUMENT_VERBS,
        _ => SERVED_VERBS,
    };
    assert_eq!(resource.verbs, verbs, "{plural}");
}

#[test]
fn every_served_resource_is_in_the_table_as_listed() {
    for expected in EXPECTED {
        check_row(expected);
    }
    assert_eq!(
        RESOURCES.len(),
        EXPECTED.len(),
        "no resource beyond those listed"
    );
}

#[test]
fn names_resolve_to_exactly_one_resource() {
    let mut seen: Vec<&str> = Vec::new();
    for resource in RESOURCES {
        let mut names = vec![resource.plural, resource.singular];
        names.extend(resource.short_names);
        names.dedup(); // endpoints' singular is its plural
        for name in names {
            assert!(!seen.contains(&name), "{name} names two resources");
            seen.push(name);
            assert_eq!(find_by_name(name), Some(resource), "{name}");
        }
    }
    assert_eq!(find_by_name("PO").map(|r| r.plural), Some("pods"));
    assert_eq!(
        find_by_name("Deploy").map(|r| r.plural),
        Some("deployments")
    );
    assert_eq!(find_by_name("daemonsets"), None);
}

#[test]
fn lookup_needs_the_right_group_and_version() {
    assert_eq!(
        find("apps", "v1", "deployments").map(|r| r.kind),
        Some("Deployment")
    );
    assert_eq!(find("", "v1", "deployments"), None);
    assert_eq!(find("apps", "v1beta1", "deployments"), None);
    assert_eq!(
        find("", "v1", "pods").map(|r| r.api_version()),
        Some("v1".into())
    );
    assert_eq!(
        find("apps", "v1", "replicasets").map(|r| r.api_version()),
        Some("apps/v1".into())
    );
    assert_eq!(find_by_kind("", "Node").map(|r| r.plural), Some("nodes"));
    assert_eq!(find_by_kind("apps", "Pod"), None);
}

#[test]
fn the_table_is_ordered_by_group_then_plural() {
    let order: Vec<(&str, &str)> = RESOURCES.iter().map(|r| (r.group, r.plural)).collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted);
    for resource in RESOURCES {
        let names: Vec<&str> = resource.subresources.iter().map(|s| s.name).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "{}", resource.plural);
    }
}

#[test]
fn groups_and_versions_are_core_then_apps_then_coordination_at_v1() {
    assert_eq!(groups(), ["", "apps", "coordination.k8s.io"]);
    assert_eq!(versions_of(""), ["v1"]);
    assert_eq!(versions_of("apps"), ["v1"]);
    assert!(versions_of("batch").is_empty());
    assert!(serves_group_version("", "v1"));
    assert!(serves_group_version("apps", "v1"));
    assert!(!serves_group_version("apps", "v1beta2"));
    let apps: Vec<&str> = resources_in("apps", "v1").map(|r| r.plural).collect();
    assert_eq!(apps, ["deployments", "replicasets"]);
    let coordination: Vec<&str> = resources_in("coordination.k8s.io", "v1")
        .map(|r| r.plural)
        .collect();
    assert_eq!(coordination, ["leases"]);
}

#[test]
fn subresources_answer_with_their_own_kind_or_scale() {
    let deployments = find("apps", "v1", "deployments").unwrap();
    let scale = deployments.subresource("scale").unwrap();
    assert_eq!(
        (scale.group, scale.version, scale.kind),
        ("autoscaling", "v1", "Scale")
    );
    let status = deployments.subresource("status").unwrap();
    assert_eq!(
        (status.group, status.version, status.kind),
        ("apps", "v1", "Deployment")
    );
    assert_eq!(status.verbs, ["get", "patch", "update"]);
    assert!(find("", "v1", "pods")
        .unwrap()
        .subresource("scale")
        .is_none());
}

#[test]
fn scope_and_storage_agree_with_namespacing() {
    for resource in RESOURCES {
        let expected = if resource.namespaced {
            "Namespaced"
        } else {
            "Cluster"
        };
        assert_eq!(resource.scope(), expected, "{}", resource.plural);
        if let Storage::Objects { .. } = resource.storage {
            assert!(
                resource.namespaced,
                "{} is stored per namespace",
                resource.plural
            );
        }
    }
    assert_eq!(
        find("", "v1", "nodes").unwrap().storage,
        Storage::Documents {
            directory: "nodes",
            strategy: &strategy::DEFAULT,
        }
    );
}

#[test]
fn stable_uids_are_uuids_that_depend_only_on_the_seed() {
    let a = stable_uid("node/node-1/5");
    assert_eq!(a, stable_uid("node/node-1/5"));
    assert_ne!(a, stable_uid("node/node-1/6"));
    assert!(uuid::Uuid::parse_str(&a).is_ok(), "{a}");
}

#[test]
fn the_namespace_controller_empties_every_namespaced_resource_and_no_other() {
    let directories = crate::apiserver::namespaced_directories();
    for expected in [
        "controllers",
        "pods",
        "services/specs",
        "services/endpoints",
        "replicasets",
        "deployments",
        "configmaps",
        "secrets",
        "serviceaccounts",
        "leases",
    ] {
        assert!(
            directories.contains(&expected),
            "{expected}: {directories:?}"
        );
    }
    for cluster_scoped in ["nodes", "namespaces", "minions"] {
        assert!(!directories.contains(&cluster_scoped), "{cluster_scoped}");
    }
}
