//! Unit tests of each kind's cells, as `kubectl get -o wide` prints them; the pods' are in
//! `tests/pods.rs`.

use serde_json::{json, Value};

use super::super::fixtures::{now, printer};
use super::super::{column_definitions, encode_row, row, table_json, IncludeObject, Source};

mod pods;

/// The cells of `object`'s row; checked to be those of its row encoded once (what the
/// watch cache keeps beside each object) and written at the same time.
#[track_caller]
fn cells(resource: &str, object: &Value) -> Vec<Value> {
    let printer = printer(resource);
    let full = row(printer, object, IncludeObject::None, now());
    let mut encoded = Vec::new();
    encode_row(printer, object, &mut encoded);
    let json = serde_json::to_vec(object).unwrap();
    let source = Source {
        row: &encoded,
        object: &json,
        metadata: None,
    };
    let table = table_json(
        printer,
        [source],
        IncludeObject::None,
        now(),
        "",
        None,
        None,
        false,
    );
    let table: Value = serde_json::from_slice(&table).unwrap();
    assert_eq!(
        table["rows"][0], full,
        "{resource}: the encoded row is not the row of {object:#}"
    );
    full["cells"].as_array().unwrap().clone()
}

#[track_caller]
fn check_cells(resource: &str, object: Value, expected: Value) {
    let got = Value::Array(cells(resource, &object));
    assert_eq!(got, expected, "{resource} cells of {object:#}");
    assert_eq!(
        got.as_array().unwrap().len(),
        column_definitions(printer(resource)).len(),
        "one cell per column"
    );
}

// ---- controllers --------------------------------------------------------------------

#[test]
fn replication_controllers_print_counts_containers_and_selector() {
    check_cells(
        "replicationcontrollers",
        json!({"kind":"ReplicationController","apiVersion":"v1",
            "metadata":{"name":"web","creationTimestamp":"2026-11-26T18:01:03Z"},
            "spec":{"replicas":3,"selector":{"name":"web","tier":"fe"},
                "template":{"spec":{"containers":[{"name":"web","image":"nginx"},
                    {"name":"log","image":"busybox"}]}}},
            "status":{"replicas":2,"readyReplicas":1}}),
        json!([
            "web",
            3,
            2,
            1,
            "10m",
            "web,log",
            "nginx,busybox",
            "name=web,tier=fe"
        ]),
    );
    check_cells(
        "replicationcontrollers",
        json!({"metadata":{"name":"bare"},"spec":{"replicas":0}}),
        json!(["bare", 0, 0, 0, "<unknown>", "", "", "<none>"]),
    );
}

#[test]
fn replica_sets_print_counts_and_a_formatted_label_selector() {
    check_cells(
        "replicasets",
        json!({"metadata":{"name":"app-6fc9fd9bcf","creationTimestamp":"2026-11-26T17:11:03Z"},
            "spec":{"replicas":2,"selector":{"matchLabels":{"app":"app","pod-template-hash":"6fc9fd9bcf"}},
                "template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1"}]}}},
            "status":{"replicas":2,"fullyLabeledReplicas":2,"readyReplicas":2,"availableReplicas":2}}),
        json!([
            "app-6fc9fd9bcf",
            2,
            2,
            2,
            "60m",
            "nginx",
            "nginx:1",
            "app=app,pod-template-hash=6fc9fd9bcf"
        ]),
    );
    check_cells(
        "replicasets",
        json!({"metadata":{"name":"x"},"spec":{"replicas":1,"selector":{}}}),
        json!(["x", 1, 0, 0, "<unknown>", "", "", "<none>"]),
    );
}

#[test]
fn deployments_print_ready_over_desired_and_a_selector() {
    check_cells(
        "deployments",
        json!({"metadata":{"name":"app","creationTimestamp":"2026-11-24T18:11:03Z"},
            "spec":{"replicas":3,"selector":{"matchLabels":{"app":"app"},
                    "matchExpressions":[{"key":"tier","operator":"In","values":["web"]}]},
                "template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1"}]}}},
            "status":{"replicas":3,"updatedReplicas":2,"readyReplicas":1,"availableReplicas":1}}),
        json!([
            "app",
            "1/3",
            2,
            1,
            "2d",
            "nginx",
            "nginx:1",
            "app=app,tier in (web)"
        ]),
    );
    // An empty selector prints as nothing, an invalid one as <invalid>.
    check_cells(
        "deployments",
        json!({"metadata":{"name":"d"},"spec":{"selector":{}}}),
        json!(["d", "0/1", 0, 0, "<unknown>", "", "", ""]),
    );
    check_cells(
        "deployments",
        json!({"metadata":{"name":"d"},"spec":{"replicas":0,
            "selector":{"matchExpressions":[{"key":"a","operator":"Bad"}]}}}),
        json!(["d", "0/0", 0, 0, "<unknown>", "", "", "<invalid>"]),
    );
}

// ---- services and endpoints ---------------------------------------------------------

#[test]
fn services_print_type_ips_ports_and_selector() {
    #[track_caller]
    fn check(spec: Value, status: Value, expected: Value) {
        check_cells(
            "services",
            json!({"metadata":{"name":"web","creationTimestamp":"2026-11-26T18:01:03Z"},
                "spec":spec,"status":status}),
            expected,
        );
    }
    check(
        json!({"selector":{"name":"web"},"ports":[{"port":80,"protocol":"TCP","targetPort":80}],
            "type":"ClusterIP"}),
        json!({}),
        json!([
            "web",
            "ClusterIP",
            "<none>",
            "<none>",
            "80/TCP",
            "10m",
            "name=web"
        ]),
    );
    check(
        json!({"selector":{"app":"web","tier":"fe"},"type":"NodePort","clusterIP":"10.96.0.10",
            "clusterIPs":["10.96.0.10"],"externalIPs":["1.2.3.4","5.6.7.8"],
            "ports":[{"port":80,"protocol":"TCP","nodePort":30080},{"port":443,"protocol":"TCP"}]}),
        json!({}),
        json!([
            "web",
            "NodePort",
            "10.96.0.10",
            "1.2.3.4,5.6.7.8",
            "80:30080/TCP,443/TCP",
            "10m",
            "app=web,tier=fe"
        ]),
    );
    check(
        json!({"type":"LoadBalancer","clusterIP":"10.96.0.11","ports":[{"port":53,"protocol":"UDP"}]}),
        json!({"loadBalancer":{"ingress":[{"ip":"9.9.9.9"},{"hostname":"lb.example"},{"ip":"1.1.1.1"}]}}),
        json!([
            "web",
            "LoadBalancer",
            "10.96.0.11",
            "1.1.1.1,9.9.9.9,lb.example",
            "53/UDP",
            "10m",
            "<none>"
        ]),
    );
    check(
        json!({"type":"LoadBalancer","ports":[]}),
        json!({}),
        json!([
            "web",
            "LoadBalancer",
            "<none>",
            "<pending>",
            "<none>",
            "10m",
            "<none>"
        ]),
    );
    check(
        json!({"type":"ExternalName","externalName":"db.example.com"}),
        json!({}),
        json!([
            "web",
            "ExternalName",
            "<none>",
            "db.example.com",
            "<none>",
            "10m",
            "<none>"
        ]),
    );
}

#[test]
fn endpoints_print_up_to_three_then_more() {
    #[track_caller]
    fn check(subsets: Value, expected: &str) {
        let got = cells(
            "endpoints",
            &json!({"metadata":{"name":"web"},"subsets":subsets}),
        );
        assert_eq!(got[1], json!(expected), "{subsets}");
    }
    check(json!(null), "<none>");
    check(json!([]), "<none>");
    check(
        json!([{"addresses":[{"ip":"10.0.0.1"},{"ip":"10.0.0.2"}],"ports":[{"port":80}]}]),
        "10.0.0.1:80,10.0.0.2:80",
    );
    check(
        json!([{"addresses":[{"ip":"10.0.0.1"},{"ip":"10.0.0.2"}],"ports":[{"port":80},{"port":81}]}]),
        "10.0.0.1:80,10.0.0.2:80,10.0.0.1:81 + 1 more...",
    );
    check(
        json!([{"addresses":[{"ip":"10.0.0.1"},{"ip":"10.0.0.2"},{"ip":"10.0.0.3"}],"ports":[{"port":80}]},
            {"addresses":[{"ip":"10.0.0.4"},{"ip":"10.0.0.5"}],"ports":[{"port":80}]}]),
        "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 2 more...",
    );
    check(
        json!([{"addresses":[{"ip":"10.0.0.1"},{"ip":"10.0.0.2"},{"ip":"10.0.0.3"}],"ports":[{"port":80}]}]),
        "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80",
    );
    check(
        json!([{"addresses":[{"ip":"fd00::1"}],"ports":[{"port":80}]}]),
        "[fd00::1]:80",
    );
    check(
        json!([{"addresses":[{"ip":"10.0.0.1"},{"ip":"10.0.0.2"}]}]),
        "10.0.0.1,10.0.0.2",
    );
    check(
        json!([{"notReadyAddresses":[{"ip":"10.0.0.1"}],"ports":[{"port":80}]}]),
        "",
    );
    check_cells(
        "endpoints",
        json!({"metadata":{"name":"web","creationTimestamp":"2026-11-26T18:11:00Z"},
            "subsets":[{"addresses":[{"ip":"10.244.166.2"}],"ports":[{"port":80,"protocol":"TCP"}]}]}),
        json!(["web", "10.244.166.2:80", "3s"]),
    );
}

// ---- namespaces, nodes, events ------------------------------------------------------

#[test]
fn namespaces_print_their_phase_defaulting_to_active() {
    check_cells(
        "namespaces",
        json!({"metadata":{"name":"default","creationTimestamp":"2026-11-26T18:01:03Z"}}),
        json!(["default", "Active", "10m"]),
    );
    check_cells(
        "namespaces",
        json!({"metadata":{"name":"old"},"status":{"phase":"Terminating"}}),
        json!(["old", "Terminating", "<unknown>"]),
    );
}

#[test]
fn nodes_print_readiness_roles_version_and_wide_info() {
    check_cells(
        "nodes",
        json!({"metadata":{"name":"node-1","creationTimestamp":"2026-11-26T18:01:03Z",
                "labels":{"node-role.kubernetes.io/control-plane":"","kubernetes.io/role":"worker",
                    "node-role.kubernetes.io/":"x"}},
            "spec":{"unschedulable":true},
            "status":{"conditions":[{"type":"MemoryPressure","status":"False"},{"type":"Ready","status":"True"}],
                "addresses":[{"type":"Hostname","address":"node-1"},{"type":"InternalIP","address":"10.0.0.1"}],
                "nodeInfo":{"kubeletVersion":"v1.32.0-kcm","osImage":"Debian GNU/Linux 12 (bookworm)",
                    "kernelVersion":"6.1.0","containerRuntimeVersion":"kcm://0.1.0"}}}),
        json!([
            "node-1",
            "Ready,SchedulingDisabled",
            "control-plane,worker",
            "10m",
            "v1.32.0-kcm",
            "10.0.0.1",
            "<none>",
            "Debian GNU/Linux 12 (bookworm)",
            "6.1.0",
            "kcm://0.1.0"
        ]),
    );
    check_cells(
        "nodes",
        json!({"metadata":{"name":"node-2"},
            "status":{"conditions":[{"type":"Ready","status":"Unknown"}],
                "addresses":[{"type":"ExternalIP","address":"34.1.2.3"}]}}),
        json!([
            "node-2",
            "NotReady",
            "<none>",
            "<unknown>",
            "",
            "<none>",
            "34.1.2.3",
            "<unknown>",
            "<unknown>",
            "<unknown>"
        ]),
    );
    check_cells(
        "nodes",
        json!({"metadata":{"name":"node-3"}}),
        json!([
            "node-3",
            "Unknown",
            "<none>",
            "<unknown>",
            "",
            "<none>",
            "<none>",
            "<unknown>",
            "<unknown>",
            "<unknown>"
        ]),
    );
}

#[test]
fn events_print_last_seen_type_reason_object_and_message() {
    check_cells(
        "events",
        json!({"metadata":{"name":"web.17a","namespace":"default"},
            "involvedObject":{"kind":"ReplicationController","name":"web","fieldPath":""},
            "reason":"SuccessfulCreate","message":"Created pod: web-abcde\n","type":"Normal",
            "source":{"component":"replication-controller"},
            "firstTimestamp":"2026-11-26T18:01:03Z","lastTimestamp":"2026-11-26T18:10:03Z","count":3}),
        json!([
            "60s",
            "Normal",
            "SuccessfulCreate",
            "replicationcontroller/web",
            "",
            "replication-controller",
            "Created pod: web-abcde",
            "10m",
            3,
            "web.17a"
        ]),
    );
    // events.k8s.io-style: eventTime, series, reporting controller and instance.
    check_cells(
        "events",
        json!({"metadata":{"name":"e2"},"involvedObject":{"kind":"Pod","name":"p",
                "fieldPath":"spec.containers{c}"},
            "reason":"Pulled","type":"Normal","message":"ok",
            "eventTime":"2026-11-26T18:01:03.000000Z","reportingController":"kubelet",
            "reportingInstance":"node-1",
            "series":{"count":5,"lastObservedTime":"2026-11-26T18:11:00.000000Z"}}),
        json!([
            "3s",
            "Normal",
            "Pulled",
            "pod/p",
            "spec.containers{c}",
            "kubelet, node-1",
            "ok",
            "10m",
            5,
            "e2"
        ]),
    );
    // Singleton without count or timestamps, about an object without a name.
    check_cells(
        "events",
        json!({"metadata":{"name":"e3"},"involvedObject":{"kind":"Node"},"type":"Warning",
            "source":{"component":"kubelet","host":"node-1"}}),
        json!([
            "<unknown>",
            "Warning",
            "",
            "node",
            "",
            "kubelet, node-1",
            "",
            "<unknown>",
            1,
            "e3"
        ]),
    );
}

#[test]
fn unknown_resources_print_name_and_age() {
    check_cells(
        "widgets",
        json!({"metadata":{"name":"w","creationTimestamp":"2026-11-26T18:01:03Z"}}),
        json!(["w", "10m"]),
    );
}

#[test]
fn every_served_resource_prints_one_cell_per_column() {
    for resource in crate::apiserver::resources::RESOURCES {
        let object = json!({"metadata": {"name": "x"}});
        let cells = super::super::row::render(&(resource.printer.cells)(&object).0, now());
        assert_eq!(
            cells.len(),
            resource.printer.columns.len(),
            "{}",
            resource.plural
        );
    }
}

#[test]
fn garbage_objects_print_zero_values_without_panicking() {
    let resources = [
        "pods",
        "replicationcontrollers",
        "replicasets",
        "deployments",
        "services",
        "endpoints",
        "namespaces",
        "nodes",
        "events",
        "other",
    ];
    for resource in resources {
        for object in [
            json!(null),
            json!(7),
            json!("x"),
            json!([1]),
            json!({}),
            json!({"metadata":"x","spec":[],"status":7}),
            json!({"metadata":{"name":5,"creationTimestamp":9},
                "spec":{"containers":"x","replicas":"3","ports":[1,"x"],"selector":[1],
                    "template":{"spec":{"containers":[1]}}},
                "status":{"containerStatuses":[1,{"state":"x"}],"conditions":"x",
                    "initContainerStatuses":[null],"podIPs":[3]},
                "subsets":[1,{"addresses":[2],"ports":[3]}],
                "series":{"count":"x"}}),
        ] {
            for include in [
                IncludeObject::None,
                IncludeObject::Metadata,
                IncludeObject::Object,
            ] {
                let row = row(printer(resource), &object, include, now());
                assert_eq!(
                    row["cells"].as_array().unwrap().len(),
                    column_definitions(printer(resource)).len(),
                    "{resource} {object}"
                );
            }
        }
    }
}
