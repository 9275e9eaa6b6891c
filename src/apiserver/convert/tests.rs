use serde_json::json;

use super::*;

// ---- helpers -----------------------------------------------------------------------

#[track_caller]
fn check_to_served(kind: Kind, stored: Value, expected: Value) {
    let served = to_served(kind, stored.clone());
    assert_eq!(
        served, expected,
        "to_served({kind:?}, {stored:#})\n got {served:#}\nwant {expected:#}"
    );
}

#[track_caller]
fn check_to_stored(kind: Kind, served: Value, expected: Value) {
    let stored = to_stored(kind, served.clone());
    assert_eq!(
        stored, expected,
        "to_stored({kind:?}, {served:#})\n got {stored:#}\nwant {expected:#}"
    );
}

/// stored -> served -> stored gives the stored document back.
#[track_caller]
fn check_stored_round_trip(kind: Kind, stored: Value) {
    let served = to_served(kind, stored.clone());
    let back = to_stored(kind, served.clone());
    assert_eq!(
        back, stored,
        "stored round trip of {kind:?}\nstored {stored:#}\nserved {served:#}\n  back {back:#}"
    );
}

/// served -> stored -> served gives the served object back.
#[track_caller]
fn check_served_round_trip(kind: Kind, served: Value) {
    let stored = to_stored(kind, served.clone());
    let back = to_served(kind, stored.clone());
    assert_eq!(
        back, served,
        "served round trip of {kind:?}\nserved {served:#}\nstored {stored:#}\n  back {back:#}"
    );
}

// ---- real documents as kcm writes them ---------------------------------------------

fn stored_rc() -> Value {
    json!({"kind":"ReplicationController","apiVersion":"v1beta3",
        "metadata":{"name":"web","namespace":"default","uid":"e199","labels":{"name":"web"},
            "creationTimestamp":"2026-11-26T18:01:03Z","generation":1},
        "spec":{"replicas":2,"selector":{"name":"web"},
            "template":{"metadata":{"labels":{"name":"web"}},
                "spec":{"containers":[{"name":"web","image":"nginx",
                    "ports":[{"name":"http","containerPort":80,"protocol":"TCP"}]}]}}},
        "status":{"replicas":2}})
}

fn stored_pod() -> Value {
    json!({"kind":"Pod","apiVersion":"v1beta3",
        "metadata":{"name":"app-6fc9fd9bcf-rfq96","namespace":"default","uid":"7d0e",
            "labels":{"app":"app","pod-template-hash":"6fc9fd9bcf"},
            "creationTimestamp":"2026-11-26T18:01:03Z",
            "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"app-6fc9fd9bcf",
                "uid":"25cb","controller":true,"blockOwnerDeletion":true}]},
        "spec":{"containers":[{"name":"nginx","image":"nginx:1"}],"host":"node-1"},
        "status":{"phase":"Running","host":"node-1","podIP":"10.244.166.4",
            "conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-11-26T18:01:03Z"}],
            "containerStatuses":[{"name":"nginx","image":"nginx:1","ready":true,"restartCount":0,
                "state":{"running":{"startedAt":"2026-11-26T18:01:03Z"}}}]}})
}

fn stored_service() -> Value {
    json!({"kind":"Service","apiVersion":"v1beta3",
        "metadata":{"name":"web","namespace":"default","uid":"5a1f",
            "creationTimestamp":"2026-11-26T18:01:03Z"},
        "spec":{"selector":{"name":"web"},"port":80,"protocol":"TCP","containerPort":80}})
}

fn stored_endpoints() -> Value {
    json!({"kind":"Endpoints","apiVersion":"v1beta3",
        "metadata":{"name":"web","namespace":"default","uid":"9b2c",
            "creationTimestamp":"2026-11-26T18:01:04Z"},
        "endpoints":["10.244.166.2:80","10.244.166.3:80"]})
}

fn stored_deployment() -> Value {
    json!({"kind":"Deployment","apiVersion":"apps/v1",
        "metadata":{"name":"app","namespace":"default","uid":"d3f1","generation":2,
            "creationTimestamp":"2026-11-26T18:01:02Z","labels":{"app":"app"}},
        "spec":{"replicas":2,
            "selector":{"matchLabels":{"app":"app"},
                "matchExpressions":[{"key":"tier","operator":"In","values":["web"]}]},
            "template":{"metadata":{"labels":{"app":"app","tier":"web"}},
                "spec":{"containers":[{"name":"nginx","image":"nginx:1",
                    "ports":[{"containerPort":80,"protocol":"TCP"}]}]}},
            "strategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"25%","maxSurge":"25%"}}},
        "status":{"observedGeneration":2,"replicas":2,"updatedReplicas":2,"readyReplicas":2,
            "availableReplicas":2,
            "conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable"}]}})
}

fn stored_replica_set() -> Value {
    json!({"kind":"ReplicaSet","apiVersion":"apps/v1",
        "metadata":{"name":"app-6fc9fd9bcf","namespace":"default","uid":"25cb",
            "labels":{"app":"app","pod-template-hash":"6fc9fd9bcf"},
            "ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"app","uid":"d3f1",
                "controller":true,"blockOwnerDeletion":true}]},
        "spec":{"replicas":2,"selector":{"matchLabels":{"app":"app","pod-template-hash":"6fc9fd9bcf"}},
            "template":{"metadata":{"labels":{"app":"app","pod-template-hash":"6fc9fd9bcf"}},
                "spec":{"containers":[{"name":"nginx","image":"nginx:1"}],"host":"ignored-in-templates"}}},
        "status":{"replicas":2,"fullyLabeledReplicas":2,"readyReplicas":2,"availableReplicas":2,
            "observedGeneration":1}})
}

// ---- kinds --------------------------------------------------------------------------

#[test]
fn kinds_map_to_names_resources_and_api_versions() {
    #[track_caller]
    fn check(kind: Kind, name: &str, resource: &str, served: &str, stored: &str) {
        assert_eq!(kind.kind_name(), name);
        assert_eq!(kind.resource(), resource);
        assert_eq!(kind.served_api_version(), served);
        assert_eq!(kind.stored_api_version(), stored);
        assert_eq!(Kind::from_kind_name(name), Some(kind));
        assert_eq!(Kind::from_resource(resource), Some(kind));
    }
    check(Kind::Pod, "Pod", "pods", "v1", "v1beta3");
    check(
        Kind::ReplicationController,
        "ReplicationController",
        "replicationcontrollers",
        "v1",
        "v1beta3",
    );
    check(Kind::Service, "Service", "services", "v1", "v1beta3");
    check(Kind::Endpoints, "Endpoints", "endpoints", "v1", "v1beta3");
    check(
        Kind::ReplicaSet,
        "ReplicaSet",
        "replicasets",
        "apps/v1",
        "apps/v1",
    );
    check(
        Kind::Deployment,
        "Deployment",
        "deployments",
        "apps/v1",
        "apps/v1",
    );
    assert_eq!(Kind::from_kind_name("Node"), None);
    assert_eq!(Kind::from_resource("nodes"), None);
}

// ---- pods ---------------------------------------------------------------------------

#[test]
fn the_real_pod_is_served_with_node_name_and_without_status_host() {
    check_to_served(
        Kind::Pod,
        stored_pod(),
        json!({"kind":"Pod","apiVersion":"v1",
            "metadata":{"name":"app-6fc9fd9bcf-rfq96","namespace":"default","uid":"7d0e",
                "labels":{"app":"app","pod-template-hash":"6fc9fd9bcf"},
                "creationTimestamp":"2026-11-26T18:01:03Z",
                "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"app-6fc9fd9bcf",
                    "uid":"25cb","controller":true,"blockOwnerDeletion":true}]},
            "spec":{"containers":[{"name":"nginx","image":"nginx:1"}],"nodeName":"node-1"},
            "status":{"phase":"Running","podIP":"10.244.166.4",
                "conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-11-26T18:01:03Z"}],
                "containerStatuses":[{"name":"nginx","image":"nginx:1","ready":true,"restartCount":0,
                    "imageID":"","state":{"running":{"startedAt":"2026-11-26T18:01:03Z"}}}]}}),
    );
}

#[test]
fn served_node_name_is_stored_as_host_in_spec_and_status() {
    check_to_stored(
        Kind::Pod,
        json!({"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"},
            "spec":{"nodeName":"node-1","containers":[]},
            "status":{"phase":"Running","hostIP":"10.0.0.1"}}),
        json!({"kind":"Pod","apiVersion":"v1beta3","metadata":{"name":"p"},
            "spec":{"host":"node-1","containers":[]},
            "status":{"phase":"Running","hostIP":"10.0.0.1","host":"node-1"}}),
    );
}

#[test]
fn pod_status_host_rules() {
    #[track_caller]
    fn check(stored_spec: Value, stored_status: Value, served_spec: Value, served_status: Value) {
        let stored =
            json!({"kind":"Pod","apiVersion":"v1beta3","spec":stored_spec,"status":stored_status});
        let served =
            json!({"kind":"Pod","apiVersion":"v1","spec":served_spec,"status":served_status});
        check_to_served(Kind::Pod, stored.clone(), served);
        check_stored_round_trip(Kind::Pod, stored);
    }
    // The kubelet's claim: both set to the node; the served status has no host.
    check(
        json!({"host":"n1"}),
        json!({"phase":"Pending","host":"n1"}),
        json!({"nodeName":"n1"}),
        json!({"phase":"Pending"}),
    );
    // Bound without status.host (kcm's lab binds this way): served as an empty marker.
    check(
        json!({"host":"n1"}),
        json!({"phase":"Running"}),
        json!({"nodeName":"n1"}),
        json!({"phase":"Running","host":""}),
    );
    // A status.host naming another node passes through.
    check(
        json!({"host":"n1"}),
        json!({"host":"n2"}),
        json!({"nodeName":"n1"}),
        json!({"host":"n2"}),
    );
    // Unbound pods: nothing to do.
    check(
        json!({}),
        json!({"phase":"Pending"}),
        json!({}),
        json!({"phase":"Pending"}),
    );
    check(
        json!({}),
        json!({"host":"n2"}),
        json!({}),
        json!({"host":"n2"}),
    );
    // hostIP is a v1 field and passes through.
    check(
        json!({"host":"n1"}),
        json!({"host":"n1","hostIP":"10.0.0.1"}),
        json!({"nodeName":"n1"}),
        json!({"hostIP":"10.0.0.1"}),
    );
}

#[test]
fn a_pod_without_status_gets_no_status() {
    check_to_stored(
        Kind::Pod,
        json!({"spec":{"nodeName":"n1"}}),
        json!({"kind":"Pod","apiVersion":"v1beta3","spec":{"host":"n1"}}),
    );
    check_to_served(
        Kind::Pod,
        json!({"spec":{"host":"n1"}}),
        json!({"kind":"Pod","apiVersion":"v1","spec":{"nodeName":"n1"}}),
    );
}

#[test]
fn container_ports_default_to_tcp_in_pods_and_every_template() {
    let stored_spec = json!({"containers":[
            {"name":"a","ports":[{"containerPort":80},{"containerPort":53,"protocol":"UDP"}]},
            {"name":"b"}],
        "initContainers":[{"name":"i","ports":[{"containerPort":9000}]}]});
    let served_spec = json!({"containers":[
            {"name":"a","ports":[{"containerPort":80,"protocol":"TCP"},{"containerPort":53,"protocol":"UDP"}]},
            {"name":"b"}],
        "initContainers":[{"name":"i","ports":[{"containerPort":9000,"protocol":"TCP"}]}]});
    check_to_served(
        Kind::Pod,
        json!({"spec":stored_spec.clone()}),
        json!({"kind":"Pod","apiVersion":"v1","spec":served_spec.clone()}),
    );
    for (kind, api_version) in [
        (Kind::ReplicationController, "v1"),
        (Kind::ReplicaSet, "apps/v1"),
        (Kind::Deployment, "apps/v1"),
    ] {
        check_to_served(
            kind,
            json!({"spec":{"template":{"spec":stored_spec.clone()}}}),
            json!({"kind":kind.kind_name(),"apiVersion":api_version,
                "spec":{"template":{"spec":served_spec.clone()}}}),
        );
    }
}

#[test]
fn a_stored_port_without_protocol_gains_tcp_on_the_round_trip() {
    let stored = json!({"kind":"Pod","apiVersion":"v1beta3",
        "spec":{"containers":[{"name":"a","ports":[{"containerPort":80}]}]}});
    let back = to_stored(Kind::Pod, to_served(Kind::Pod, stored));
    assert_eq!(
        back,
        json!({"kind":"Pod","apiVersion":"v1beta3",
            "spec":{"containers":[{"name":"a","ports":[{"containerPort":80,"protocol":"TCP"}]}]}})
    );
}

#[test]
fn templates_rename_host_and_node_name() {
    check_to_served(
        Kind::ReplicationController,
        json!({"spec":{"template":{"spec":{"host":"n1","containers":[]}}}}),
        json!({"kind":"ReplicationController","apiVersion":"v1",
            "spec":{"template":{"spec":{"nodeName":"n1","containers":[]}}}}),
    );
    check_to_stored(
        Kind::Deployment,
        json!({"spec":{"template":{"spec":{"nodeName":"n1"}}}}),
        json!({"kind":"Deployment","apiVersion":"apps/v1","spec":{"template":{"spec":{"host":"n1"}}}}),
    );
}

#[test]
fn the_real_documents_survive_the_stored_round_trip() {
    check_stored_round_trip(Kind::Pod, stored_pod());
    check_stored_round_trip(Kind::ReplicationController, stored_rc());
    check_stored_round_trip(Kind::Service, stored_service());
    check_stored_round_trip(Kind::Endpoints, stored_endpoints());
    check_stored_round_trip(Kind::Deployment, stored_deployment());
    check_stored_round_trip(Kind::ReplicaSet, stored_replica_set());
}

#[test]
fn the_real_documents_served_survive_the_served_round_trip() {
    for (kind, stored) in [
        (Kind::Pod, stored_pod()),
        (Kind::ReplicationController, stored_rc()),
        (Kind::Service, stored_service()),
        (Kind::Endpoints, stored_endpoints()),
        (Kind::Deployment, stored_deployment()),
        (Kind::ReplicaSet, stored_replica_set()),
    ] {
        check_served_round_trip(kind, to_served(kind, stored));
    }
}

#[test]
fn a_container_status_without_an_image_id_is_served_with_an_empty_one() {
    let stored = json!({"kind":"Pod","apiVersion":"v1beta3","metadata":{"name":"p"},
        "spec":{"containers":[{"name":"c","image":"x"}]},
        "status":{"containerStatuses":[{"name":"c","image":"x","ready":true,"restartCount":0},
            {"name":"d","image":"y","imageID":"docker-pullable://y@sha256:00","ready":true,"restartCount":0}],
            "initContainerStatuses":[{"name":"i","image":"z","ready":false,"restartCount":0}]}});
    let served = to_served(Kind::Pod, stored);
    assert_eq!(served["status"]["containerStatuses"][0]["imageID"], "");
    assert_eq!(
        served["status"]["containerStatuses"][1]["imageID"],
        "docker-pullable://y@sha256:00"
    );
    assert_eq!(served["status"]["initContainerStatuses"][0]["imageID"], "");
    check_served_round_trip(Kind::Pod, served);
}

#[test]
fn rich_v1_pods_survive_the_served_round_trip() {
    check_served_round_trip(
        Kind::Pod,
        json!({"kind":"Pod","apiVersion":"v1",
            "metadata":{"name":"p","namespace":"default","resourceVersion":"12",
                "annotations":{"a":"b"},"finalizers":["x"],"deletionTimestamp":"2026-11-26T18:05:00Z"},
            "spec":{"nodeName":"node-1","restartPolicy":"Always","dnsPolicy":"ClusterFirst",
                "containers":[{"name":"c","image":"busybox","imagePullPolicy":"IfNotPresent",
                    "ports":[{"name":"http","containerPort":8080,"protocol":"TCP","hostPort":0}],
                    "resources":{},"x-unknown":{"deep":[1,2,{"deeper":true}]}}],
                "initContainers":[{"name":"init","image":"busybox","restartPolicy":"Always",
                    "ports":[{"containerPort":9000,"protocol":"SCTP"}]}],
                "readinessGates":[{"conditionType":"example.com/ready"}],
                "unknownSpecField":"kept"},
            "status":{"phase":"Running","hostIP":"10.0.0.1","podIP":"10.244.0.5",
                "podIPs":[{"ip":"10.244.0.5"}],"nominatedNodeName":"node-2",
                "containerStatuses":[{"name":"c","ready":false,"restartCount":3,"imageID":"",
                    "state":{"waiting":{"reason":"CrashLoopBackOff"}},
                    "lastState":{"terminated":{"exitCode":1,"finishedAt":"2026-11-26T18:04:00Z"}}}],
                "unknownStatusField":{"a":1}}}),
    );
    // A pod not yet bound, and one bound with a status that has no host.
    check_served_round_trip(
        Kind::Pod,
        json!({"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"},
            "spec":{"containers":[{"name":"c"}]},"status":{"phase":"Pending"}}),
    );
    check_served_round_trip(
        Kind::Pod,
        json!({"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"},
            "spec":{"nodeName":"n1","containers":[{"name":"c"}]},"status":{"phase":"Pending"}}),
    );
}

// ---- services -----------------------------------------------------------------------

#[test]
fn the_real_service_is_served_with_ports_type_and_target_port() {
    check_to_served(
        Kind::Service,
        stored_service(),
        json!({"kind":"Service","apiVersion":"v1",
            "metadata":{"name":"web","namespace":"default","uid":"5a1f",
                "creationTimestamp":"2026-11-26T18:01:03Z"},
            "spec":{"selector":{"name":"web"},
                "ports":[{"port":80,"protocol":"TCP","targetPort":80}],"type":"ClusterIP"}}),
    );
}

#[test]
fn service_singular_port_conversion_rules() {
    #[track_caller]
    fn check(stored_spec: Value, served_spec: Value) {
        check_to_served(
            Kind::Service,
            json!({"kind":"Service","apiVersion":"v1beta3","metadata":{"name":"s"},"spec":stored_spec}),
            json!({"kind":"Service","apiVersion":"v1","metadata":{"name":"s"},"spec":served_spec}),
        );
    }
    // A named container port becomes a named target port.
    check(
        json!({"port":80,"containerPort":"http"}),
        json!({"ports":[{"port":80,"protocol":"TCP","targetPort":"http"}],"type":"ClusterIP"}),
    );
    check(
        json!({"port":53,"protocol":"UDP","containerPort":5353}),
        json!({"ports":[{"port":53,"protocol":"UDP","targetPort":5353}],"type":"ClusterIP"}),
    );
    // The 2014 portalIP fills clusterIP and is kept; a set type is kept.
    check(
        json!({"port":80,"containerPort":80,"portalIP":"10.0.0.9","type":"NodePort"}),
        json!({"portalIP":"10.0.0.9","ports":[{"port":80,"protocol":"TCP","targetPort":80}],
            "type":"NodePort","clusterIP":"10.0.0.9"}),
    );
    check(
        json!({"port":80,"containerPort":80,"clusterIP":"10.0.0.7"}),
        json!({"clusterIP":"10.0.0.7","ports":[{"port":80,"protocol":"TCP","targetPort":80}],
            "type":"ClusterIP"}),
    );
}

#[test]
fn a_service_without_container_port_is_served_with_target_port_and_a_marker() {
    let stored = json!({"kind":"Service","apiVersion":"v1beta3","metadata":{"name":"s"},
        "spec":{"selector":{"app":"a"},"port":8080}});
    check_to_served(
        Kind::Service,
        stored.clone(),
        json!({"kind":"Service","apiVersion":"v1",
            "metadata":{"name":"s","annotations":{SERVICE_CONTAINER_PORT_UNSET_ANNOTATION:"true"}},
            "spec":{"selector":{"app":"a"},
                "ports":[{"port":8080,"protocol":"TCP","targetPort":8080}],"type":"ClusterIP"}}),
    );
    // Back to stored: no containerPort, and protocol gained (the accepted difference).
    check_to_stored(
        Kind::Service,
        to_served(Kind::Service, stored.clone()),
        json!({"kind":"Service","apiVersion":"v1beta3","metadata":{"name":"s"},
            "spec":{"selector":{"app":"a"},"port":8080,"protocol":"TCP"}}),
    );
    // Other annotations stay.
    check_stored_round_trip(
        Kind::Service,
        json!({"kind":"Service","apiVersion":"v1beta3","metadata":{"name":"s","annotations":{"x":"y"}},
            "spec":{"selector":{"app":"a"},"port":8080,"protocol":"TCP"}}),
    );
}

#[test]
fn editing_the_target_port_of_a_marked_service_stores_a_container_port() {
    let mut served = to_served(
        Kind::Service,
        json!({"metadata":{"name":"s"},"spec":{"port":80,"protocol":"TCP"}}),
    );
    served["spec"]["ports"][0]["targetPort"] = json!(8080);
    check_to_stored(
        Kind::Service,
        served,
        json!({"kind":"Service","apiVersion":"v1beta3","metadata":{"name":"s"},
            "spec":{"port":80,"protocol":"TCP","containerPort":8080}}),
    );
}

#[test]
fn a_multi_port_v1_service_keeps_its_ports_in_the_stored_document() {
    let served = json!({"kind":"Service","apiVersion":"v1",
        "metadata":{"name":"web","namespace":"default","labels":{"app":"web"}},
        "spec":{"selector":{"app":"web"},"type":"NodePort","clusterIP":"10.96.0.10",
            "clusterIPs":["10.96.0.10"],"sessionAffinity":"None",
            "ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":"http","nodePort":30080},
                {"name":"https","port":443,"protocol":"TCP","targetPort":8443,"appProtocol":"https"}]},
        "status":{"loadBalancer":{}}});
    check_to_stored(
        Kind::Service,
        served.clone(),
        json!({"kind":"Service","apiVersion":"v1beta3",
            "metadata":{"name":"web","namespace":"default","labels":{"app":"web"}},
            "spec":{"selector":{"app":"web"},"type":"NodePort","clusterIP":"10.96.0.10",
                "clusterIPs":["10.96.0.10"],"sessionAffinity":"None",
                "ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":"http","nodePort":30080},
                    {"name":"https","port":443,"protocol":"TCP","targetPort":8443,"appProtocol":"https"}],
                "port":80,"protocol":"TCP","containerPort":"http"},
            "status":{"loadBalancer":{}}}),
    );
    check_served_round_trip(Kind::Service, served);
}

#[test]
fn kcm_edits_to_the_singular_fields_win_over_a_stale_ports_array() {
    let stored = json!({"kind":"Service","apiVersion":"v1beta3","metadata":{"name":"s"},
        "spec":{"port":81,"protocol":"TCP","containerPort":9090,
            "ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":8080},
                {"name":"metrics","port":9100,"protocol":"TCP","targetPort":9100}]}});
    check_to_served(
        Kind::Service,
        stored,
        json!({"kind":"Service","apiVersion":"v1","metadata":{"name":"s"},
            "spec":{"ports":[{"name":"http","port":81,"protocol":"TCP","targetPort":9090},
                {"name":"metrics","port":9100,"protocol":"TCP","targetPort":9100}],
                "type":"ClusterIP"}}),
    );
}

#[test]
fn served_services_get_port_defaults_on_every_entry() {
    check_to_served(
        Kind::Service,
        json!({"spec":{"ports":[{"port":80},{"port":53,"protocol":"UDP","targetPort":5353}]}}),
        json!({"kind":"Service","apiVersion":"v1",
            "spec":{"ports":[{"port":80,"protocol":"TCP","targetPort":80},
                {"port":53,"protocol":"UDP","targetPort":5353}],"type":"ClusterIP"}}),
    );
}

#[test]
fn v1_services_survive_the_served_round_trip() {
    for served in [
        json!({"kind":"Service","apiVersion":"v1","metadata":{"name":"a"},
            "spec":{"selector":{"app":"a"},"ports":[{"port":80,"protocol":"TCP","targetPort":8080}],
                "type":"ClusterIP"}}),
        json!({"kind":"Service","apiVersion":"v1","metadata":{"name":"b"},
            "spec":{"selector":{"app":"b"},"ports":[{"port":80,"protocol":"TCP","targetPort":80}],
                "type":"ClusterIP","clusterIP":"10.96.1.1","x-unknown":{"kept":[1]}}}),
        json!({"kind":"Service","apiVersion":"v1","metadata":{"name":"c"},
            "spec":{"ports":[{"name":"dns","port":53,"protocol":"UDP","targetPort":53}],
                "type":"LoadBalancer","externalIPs":["1.2.3.4"]},
            "status":{"loadBalancer":{"ingress":[{"ip":"5.6.7.8"}]}}}),
        json!({"kind":"Service","apiVersion":"v1","metadata":{"name":"headless"},
            "spec":{"clusterIP":"None","ports":[],"type":"ClusterIP"}}),
        json!({"kind":"Service","apiVersion":"v1","metadata":{"name":"ext"},
            "spec":{"type":"ExternalName","externalName":"example.com"}}),
    ] {
        check_served_round_trip(Kind::Service, served);
    }
}

#[test]
fn stored_services_survive_the_stored_round_trip() {
    for spec in [
        json!({"selector":{"name":"web"},"port":80,"protocol":"TCP","containerPort":80}),
        json!({"selector":{"name":"web"},"port":80,"protocol":"TCP","containerPort":"http"}),
        json!({"selector":{"name":"web"},"port":80,"protocol":"TCP"}),
        json!({"selector":{"name":"web"},"port":80,"protocol":"UDP","portalIP":"10.0.0.3"}),
        json!({"selector":{"name":"web"},"port":80,"protocol":"TCP","containerPort":80,
            "sessionAffinity":"ClientIP","createExternalLoadBalancer":true}),
    ] {
        check_stored_round_trip(
            Kind::Service,
            json!({"kind":"Service","apiVersion":"v1beta3","metadata":{"name":"s"},"spec":spec}),
        );
    }
}

// ---- endpoints ----------------------------------------------------------------------

#[test]
fn the_real_endpoints_are_served_as_one_subset() {
    check_to_served(
        Kind::Endpoints,
        stored_endpoints(),
        json!({"kind":"Endpoints","apiVersion":"v1",
            "metadata":{"name":"web","namespace":"default","uid":"9b2c",
                "creationTimestamp":"2026-11-26T18:01:04Z"},
            "subsets":[{"addresses":[{"ip":"10.244.166.2"},{"ip":"10.244.166.3"}],
                "ports":[{"port":80,"protocol":"TCP"}]}]}),
    );
}

#[test]
fn stored_endpoints_make_one_subset_per_port_in_stored_order() {
    #[track_caller]
    fn check(endpoints: Value, subsets: Value) {
        let served = to_served(Kind::Endpoints, json!({"endpoints": endpoints}));
        assert_eq!(
            served.get("subsets"),
            subsets.as_array().map(|_| &subsets),
            "{served:#}"
        );
        assert_eq!(served.get("endpoints"), None);
    }
    check(
        json!(["10.0.0.2:80", "10.0.0.1:8080", "10.0.0.1:80"]),
        json!([{"addresses":[{"ip":"10.0.0.2"},{"ip":"10.0.0.1"}],"ports":[{"port":80,"protocol":"TCP"}]},
            {"addresses":[{"ip":"10.0.0.1"}],"ports":[{"port":8080,"protocol":"TCP"}]}]),
    );
    check(
        json!(["[::1]:80", "[fd00::2]:80", "10.0.0.1:80"]),
        json!([{"addresses":[{"ip":"::1"},{"ip":"fd00::2"},{"ip":"10.0.0.1"}],
            "ports":[{"port":80,"protocol":"TCP"}]}]),
    );
    // No endpoints: no subsets (v1 omits an empty list).
    check(json!([]), Value::Null);
}

#[test]
fn subsets_flatten_to_sorted_ready_endpoints_and_are_kept() {
    let served = json!({"kind":"Endpoints","apiVersion":"v1","metadata":{"name":"web"},
        "subsets":[
            {"addresses":[{"ip":"10.0.0.3","nodeName":"n1",
                    "targetRef":{"kind":"Pod","name":"web-1","namespace":"default","uid":"u1"}},
                {"ip":"10.0.0.1","targetRef":{"kind":"Pod","name":"web-2"}}],
             "notReadyAddresses":[{"ip":"10.0.0.9"}],
             "ports":[{"name":"http","port":80,"protocol":"TCP"},{"name":"metrics","port":9100,"protocol":"TCP"}]},
            {"addresses":[{"ip":"fd00::5"}],"ports":[{"port":80,"protocol":"TCP"}]}]});
    let stored = to_stored(Kind::Endpoints, served.clone());
    assert_eq!(
        stored["endpoints"],
        json!([
            "10.0.0.1:80",
            "10.0.0.1:9100",
            "10.0.0.3:80",
            "10.0.0.3:9100",
            "[fd00::5]:80"
        ])
    );
    assert_eq!(stored["subsets"], served["subsets"]);
    assert_eq!(stored["apiVersion"], json!("v1beta3"));
    check_served_round_trip(Kind::Endpoints, served);
}

#[test]
fn stale_stored_subsets_are_regenerated_from_endpoints() {
    // kcm's endpoints controller rewrote `endpoints` after a client wrote subsets.
    let stored = json!({"kind":"Endpoints","apiVersion":"v1beta3","metadata":{"name":"web"},
        "endpoints":["10.0.0.7:80"],
        "subsets":[{"addresses":[{"ip":"10.0.0.1","targetRef":{"name":"old"}}],
            "ports":[{"name":"http","port":80,"protocol":"TCP"}]}]});
    check_to_served(
        Kind::Endpoints,
        stored.clone(),
        json!({"kind":"Endpoints","apiVersion":"v1","metadata":{"name":"web"},
            "subsets":[{"addresses":[{"ip":"10.0.0.7"}],"ports":[{"port":80,"protocol":"TCP"}]}]}),
    );
    // And the stale copy is dropped on the next write.
    check_to_stored(
        Kind::Endpoints,
        to_served(Kind::Endpoints, stored),
        json!({"kind":"Endpoints","apiVersion":"v1beta3","metadata":{"name":"web"},
            "endpoints":["10.0.0.7:80"]}),
    );
}

#[test]
fn stored_subsets_are_served_when_they_flatten_to_the_same_set_in_another_order() {
    let subsets = json!([{"addresses":[{"ip":"10.0.0.2"},{"ip":"10.0.0.1"}],
        "ports":[{"name":"http","port":80,"protocol":"TCP"}]}]);
    check_to_served(
        Kind::Endpoints,
        json!({"endpoints":["10.0.0.1:80","10.0.0.2:80"],"subsets":subsets.clone()}),
        json!({"kind":"Endpoints","apiVersion":"v1","subsets":subsets}),
    );
}

#[test]
fn endpoints_survive_both_round_trips() {
    for endpoints in [
        json!([]),
        json!(["10.244.166.2:80"]),
        json!(["10.0.0.1:80", "10.0.0.1:8080", "10.0.0.2:80"]),
        json!(["10.0.0.1:80", "[::1]:80"]),
    ] {
        check_stored_round_trip(
            Kind::Endpoints,
            json!({"kind":"Endpoints","apiVersion":"v1beta3","metadata":{"name":"e"},
                "endpoints":endpoints}),
        );
    }
    for served in [
        json!({"kind":"Endpoints","apiVersion":"v1","metadata":{"name":"e"}}),
        json!({"kind":"Endpoints","apiVersion":"v1","metadata":{"name":"e"},"subsets":[]}),
        json!({"kind":"Endpoints","apiVersion":"v1","metadata":{"name":"e"},
            "subsets":[{"notReadyAddresses":[{"ip":"10.0.0.1"}],"ports":[{"port":80,"protocol":"TCP"}]}]}),
        json!({"kind":"Endpoints","apiVersion":"v1","metadata":{"name":"e"},
            "subsets":[{"addresses":[{"ip":"10.0.0.1"}],"ports":[{"port":80,"protocol":"UDP"}]}]}),
        json!({"kind":"Endpoints","apiVersion":"v1","metadata":{"name":"e","labels":{"a":"b"}},
            "subsets":[{"addresses":[{"ip":"10.0.0.1"}]}]}),
    ] {
        check_served_round_trip(Kind::Endpoints, served);
    }
}

#[test]
fn host_ports_parse_and_join_like_go() {
    #[track_caller]
    fn check(endpoint: &str, expected: Option<(&str, u16)>) {
        let parsed = HostPort::parse(endpoint);
        assert_eq!(
            parsed.as_ref().map(|h| (h.ip.as_str(), h.port)),
            expected,
            "{endpoint}"
        );
        if let Some(parsed) = parsed {
            assert_eq!(parsed.join(), endpoint);
        }
    }
    check("10.0.0.1:80", Some(("10.0.0.1", 80)));
    check("[::1]:80", Some(("::1", 80)));
    check("[fd00::1:2]:65535", Some(("fd00::1:2", 65535)));
    check("host.example:8080", Some(("host.example", 8080)));
    check("::1:80", None);
    check("10.0.0.1", None);
    check("10.0.0.1:", None);
    check(":80", None);
    check("10.0.0.1:65536", None);
    check("10.0.0.1:+80", None);
    check("[::1]80", None);
    check("", None);
}

#[test]
fn serving_a_served_object_again_changes_nothing() {
    for (kind, stored) in [
        (Kind::Pod, stored_pod()),
        (Kind::ReplicationController, stored_rc()),
        (Kind::Service, stored_service()),
        (
            Kind::Service,
            json!({"metadata":{"name":"s"},"spec":{"port":80,"portalIP":"10.0.0.1"}}),
        ),
        (Kind::Endpoints, stored_endpoints()),
        (Kind::Deployment, stored_deployment()),
        (Kind::ReplicaSet, stored_replica_set()),
    ] {
        let served = to_served(kind, stored);
        assert_eq!(to_served(kind, served.clone()), served, "{kind:?}");
    }
}

// ---- malformed input ----------------------------------------------------------------

#[test]
fn malformed_documents_are_left_alone_and_never_panic() {
    #[track_caller]
    fn check_unchanged_except_type_meta(kind: Kind, document: Value) {
        let served = to_served(kind, document.clone());
        let mut expected = document.clone();
        expected["kind"] = json!(kind.kind_name());
        expected["apiVersion"] = json!(kind.served_api_version());
        if kind == Kind::Service && document["spec"].is_object() {
            // The one default that applies to any service spec.
            expected["spec"]["type"] = json!("ClusterIP");
        }
        assert_eq!(served, expected, "to_served({kind:?}, {document:#})");
        if kind == Kind::Service && document["spec"].is_object() {
            expected["spec"] = document["spec"].clone();
        }
        let stored = to_stored(kind, document.clone());
        expected["apiVersion"] = json!(kind.stored_api_version());
        if kind == Kind::Endpoints
            && document.get("subsets").is_none()
            && document.get("endpoints").is_none()
        {
            // A v1 Endpoints without subsets is stored with no endpoints.
            expected["endpoints"] = json!([]);
        }
        assert_eq!(stored, expected, "to_stored({kind:?}, {document:#})");
    }
    for kind in Kind::ALL {
        for not_an_object in [json!(null), json!(3), json!("pod"), json!([1, 2])] {
            assert_eq!(to_served(kind, not_an_object.clone()), not_an_object);
            assert_eq!(to_stored(kind, not_an_object.clone()), not_an_object);
        }
        for document in [
            json!({}),
            json!({"spec":null}),
            json!({"spec":"text"}),
            json!({"spec":{"template":7}}),
            json!({"spec":{"template":{"spec":[]}}}),
            json!({"metadata":[],"status":"x"}),
        ] {
            check_unchanged_except_type_meta(kind, document);
        }
    }
    // Pods: wrong types inside the spec.
    for document in [
        json!({"spec":{"host":5,"containers":"x"}}),
        json!({"spec":{"containers":[1,{"ports":"x"},{"ports":[null,{"protocol":"UDP"}]}]}}),
        json!({"spec":{"host":["n1"]},"status":{"host":3}}),
        json!({"status":{"host":"n1"}}),
    ] {
        check_unchanged_except_type_meta(Kind::Pod, document);
    }
    // Services: a spec without a port, an unreadable ports field.
    check_to_served(
        Kind::Service,
        json!({"spec":{"selector":{"a":"b"},"port":80,"ports":"garbage"}}),
        json!({"kind":"Service","apiVersion":"v1",
            "spec":{"selector":{"a":"b"},"port":80,"ports":"garbage","type":"ClusterIP"}}),
    );
    check_to_stored(
        Kind::Service,
        json!({"spec":{"ports":[7],"port":80}}),
        json!({"kind":"Service","apiVersion":"v1beta3","spec":{"ports":[7],"port":80}}),
    );
    // Endpoints: unparsable entries leave the document alone.
    for endpoints in [
        json!(["garbage"]),
        json!([1]),
        json!("10.0.0.1:80"),
        json!(null),
    ] {
        check_unchanged_except_type_meta(
            Kind::Endpoints,
            json!({"endpoints": endpoints, "subsets": "x"}),
        );
    }
    check_to_stored(
        Kind::Endpoints,
        json!({"subsets":[1,{"addresses":"x"},{"addresses":[{"ip":7}],"ports":[{"port":"80"}]}]}),
        json!({"kind":"Endpoints","apiVersion":"v1beta3",
            "subsets":[1,{"addresses":"x"},{"addresses":[{"ip":7}],"ports":[{"port":"80"}]}],
            "endpoints":[]}),
    );
}

#[test]
fn type_meta_is_set_first_when_missing_and_in_place_when_present() {
    let served = to_served(Kind::Pod, json!({"metadata":{"name":"p"}}));
    let keys: Vec<&str> = served
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["kind", "apiVersion", "metadata"]);
    let stored = to_stored(
        Kind::Pod,
        json!({"metadata":{"name":"p"},"apiVersion":"v1","kind":"Pod"}),
    );
    let keys: Vec<&str> = stored
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["metadata", "apiVersion", "kind"]);
    assert_eq!(stored["apiVersion"], json!("v1beta3"));
}

#[test]
fn renames_keep_the_field_position() {
    let served = to_served(
        Kind::Pod,
        json!({"kind":"Pod","apiVersion":"v1beta3","spec":{"a":1,"host":"n","b":2}}),
    );
    let keys: Vec<&str> = served["spec"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["a", "nodeName", "b"]);
}

#[test]
fn a_2014_replication_controllers_pods_are_served_with_its_controller_reference_never_stored() {
    let created_by =
        r#"{"kind":"ReplicationController","namespace":"default","name":"web","uid":"u-1"}"#;
    let stored = json!({
        "kind": "Pod", "apiVersion": "v1beta3",
        "metadata": {"name": "web-abcde", "annotations": {"kubernetes.io/created-by": created_by}},
        "spec": {"containers": []},
    });
    let served = to_served(Kind::Pod, stored.clone());
    assert_eq!(
        served["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "ReplicationController", "name": "web", "uid": "u-1", "controller": true}])
    );
    assert_eq!(to_stored(Kind::Pod, served.clone()), stored);
    assert_eq!(
        to_served(Kind::Pod, to_stored(Kind::Pod, served.clone())),
        served
    );
    // A pod with a controller reference of its own keeps only that one.
    let mut owned = stored.clone();
    owned["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u-2", "controller": true}]);
    let served = to_served(Kind::Pod, owned.clone());
    assert_eq!(
        served["metadata"]["ownerReferences"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(to_stored(Kind::Pod, served), owned);
    // Kubernetes' SerializedReference form is read too; other kinds are left alone.
    let wrapped =
        format!(r#"{{"kind":"SerializedReference","apiVersion":"v1","reference":{created_by}}}"#);
    let mut pod = stored.clone();
    pod["metadata"]["annotations"]["kubernetes.io/created-by"] = json!(wrapped);
    assert_eq!(
        to_served(Kind::Pod, pod)["metadata"]["ownerReferences"][0]["uid"],
        "u-1"
    );
    let mut pod = stored;
    pod["metadata"]["annotations"]["kubernetes.io/created-by"] =
        json!(r#"{"kind":"Job","name":"j","uid":"u"}"#);
    assert!(to_served(Kind::Pod, pod)["metadata"]
        .get("ownerReferences")
        .is_none());
}
