//! Unit tests of field selectors: the grammar, escapes and errors, and each kind's
//! selectable fields and messages.

use serde_json::json;

use super::*;

/// The selectable fields of the served resource `plural`.
fn selectable(plural: &str) -> &'static SelectableFields {
    super::super::resources::find_by_name(plural)
        .filter(|resource| resource.plural == plural)
        .map(|resource| resource.fields)
        .unwrap_or_else(|| panic!("{plural} is not served"))
}

/// The fields `resource` (a served plural) can be selected on.
fn supported_fields(plural: &str) -> &'static [&'static str] {
    selectable(plural).fields
}

fn requirement(field: &str, operator: FieldOperator, value: &str) -> FieldRequirement {
    FieldRequirement {
        field: field.to_string(),
        operator,
        value: value.to_string(),
    }
}

fn eq(field: &str, value: &str) -> FieldRequirement {
    requirement(field, FieldOperator::Equals, value)
}

fn ne(field: &str, value: &str) -> FieldRequirement {
    requirement(field, FieldOperator::NotEquals, value)
}

#[track_caller]
fn check_parse(input: &str, expected: &[FieldRequirement], expected_display: &str) {
    let selector = match FieldSelector::parse(input) {
        Ok(selector) => selector,
        Err(err) => panic!("parsing {input:?} failed: {err}"),
    };
    assert_eq!(selector.requirements(), expected, "input {input:?}");
    assert_eq!(selector.to_string(), expected_display, "input {input:?}");
    let reparsed: FieldSelector = expected_display.parse().unwrap();
    assert_eq!(reparsed, selector, "round trip of {input:?}");
}

#[track_caller]
fn check_parse_error(input: &str, expected: FieldSelectorError, message: &str) {
    match FieldSelector::parse(input) {
        Ok(selector) => panic!("{input:?} parsed as {selector:?}, expected {expected:?}"),
        Err(err) => {
            assert_eq!(err, expected, "input {input:?}");
            assert_eq!(err.to_string(), message, "input {input:?}");
        }
    }
}

#[track_caller]
fn check_matches(resource: &str, selector: &str, object: &Value, expected: bool) {
    let parsed = FieldSelector::parse(selector).unwrap();
    parsed
        .validate(resource, selectable(resource))
        .unwrap_or_else(|err| panic!("{selector:?} on {resource}: {err}"));
    assert_eq!(
        parsed.matches(selectable(resource), object),
        expected,
        "{selector:?} on {resource} {object}"
    );
    // The same from the name and namespace of the object's key, as the watch cache asks.
    let text = |field: &str| object["metadata"][field].as_str().unwrap_or("").to_string();
    assert_eq!(
        parsed.matches_named(
            selectable(resource),
            &text("namespace"),
            &text("name"),
            || object.clone()
        ),
        expected,
        "{selector:?} on {resource} {object}, from its key"
    );
}

#[test]
fn a_selector_of_names_alone_decodes_no_object() {
    let never = || -> Value { panic!("decoded for a selector of names alone") };
    for (resource, selector, expected) in [
        ("pods", "metadata.name=web", true),
        ("pods", "metadata.name!=web", false),
        ("pods", "metadata.name=web,metadata.namespace=default", true),
        ("pods", "metadata.namespace=other", false),
        ("nodes", "metadata.name=web", true),
    ] {
        let parsed = FieldSelector::parse(selector).unwrap();
        assert_eq!(
            parsed.matches_named(selectable(resource), "default", "web", never),
            expected,
            "{selector:?} on {resource}"
        );
    }
    // Another field decodes the object, once for all the requirements that read it.
    let decoded = std::cell::Cell::new(0);
    let selector =
        FieldSelector::parse("metadata.name=web,spec.nodeName=n1,status.phase!=Failed").unwrap();
    let matched = selector.matches_named(selectable("pods"), "default", "web", || {
        decoded.set(decoded.get() + 1);
        json!({"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})
    });
    assert!(matched);
    assert_eq!(decoded.get(), 1);
}

#[track_caller]
fn check_unsupported(resource: &str, selector: &str, message: &str) {
    let parsed = FieldSelector::parse(selector).unwrap();
    match parsed.validate(resource, selectable(resource)) {
        Ok(()) => panic!("{selector:?} was accepted for {resource}"),
        Err(err) => assert_eq!(err.to_string(), message, "{selector:?} on {resource}"),
    }
}

#[test]
fn selectors_parse_into_sorted_requirements() {
    use FieldOperator::*;
    let cases: &[(&str, &[FieldRequirement], &str)] = &[
        (
            "metadata.name=web",
            &[eq("metadata.name", "web")],
            "metadata.name=web",
        ),
        (
            "metadata.name==web",
            &[eq("metadata.name", "web")],
            "metadata.name=web",
        ),
        (
            "status.phase!=Failed",
            &[ne("status.phase", "Failed")],
            "status.phase!=Failed",
        ),
        (
            // kubectl describe node
            "spec.nodeName=node-1,status.phase!=Succeeded,status.phase!=Failed",
            &[
                eq("spec.nodeName", "node-1"),
                ne("status.phase", "Failed"),
                ne("status.phase", "Succeeded"),
            ],
            "spec.nodeName=node-1,status.phase!=Failed,status.phase!=Succeeded",
        ),
        (
            // kubectl describe on a node's events: an empty value
            "involvedObject.name=node-1,involvedObject.namespace=,involvedObject.kind=Node",
            &[
                eq("involvedObject.kind", "Node"),
                eq("involvedObject.name", "node-1"),
                eq("involvedObject.namespace", ""),
            ],
            "involvedObject.kind=Node,involvedObject.name=node-1,involvedObject.namespace=",
        ),
        ("a=b,a=b,a==b", &[eq("a", "b")], "a=b"),
        ("a=b,", &[eq("a", "b")], "a=b"),
        (",a=b,,", &[eq("a", "b")], "a=b"),
        ("a=", &[eq("a", "")], "a="),
        ("a!=", &[ne("a", "")], "a!="),
        // the value may start with an operator character
        ("a=!b", &[eq("a", "!b")], "a=!b"),
        // the first operator splits; the field takes no escapes
        ("a!b!=c", &[ne("a!b", "c")], "a!b!=c"),
        // Kubernetes accepts an empty field name; validation refuses it
        ("=b", &[eq("", "b")], "=b"),
        // no whitespace is trimmed
        (
            "metadata.name = web",
            &[eq("metadata.name ", " web")],
            "metadata.name = web",
        ),
        (" a=b", &[eq(" a", "b")], " a=b"),
    ];
    for (input, expected, display) in cases {
        check_parse(input, expected, display);
    }
    assert_eq!(ne("a", "b").operator, NotEquals);
}

#[test]
fn empty_selectors_select_everything() {
    for input in ["", ",", ",,,"] {
        let selector = FieldSelector::parse(input).unwrap();
        assert!(selector.is_empty(), "{input:?}");
        assert_eq!(selector, FieldSelector::everything());
        assert_eq!(selector.to_string(), "");
        assert!(selector.matches(selectable("pods"), &json!({})));
        assert_eq!(selector.validate("nodes", selectable("nodes")), Ok(()));
    }
}

#[test]
fn escaped_values_parse_to_their_literals() {
    let cases: &[(&str, &[FieldRequirement], &str)] = &[
        (r"a=x\,y", &[eq("a", "x,y")], r"a=x\,y"),
        (r"a=x\=y", &[eq("a", "x=y")], r"a=x\=y"),
        (r"a=x\\y", &[eq("a", r"x\y")], r"a=x\\y"),
        (r"a=\\,b=c", &[eq("a", r"\"), eq("b", "c")], r"a=\\,b=c"),
        (
            r"a=\\\,,b=c",
            &[eq("a", r"\,"), eq("b", "c")],
            r"a=\\\,,b=c",
        ),
        (
            r"k=\,,k2=v2",
            &[eq("k", ","), eq("k2", "v2")],
            r"k=\,,k2=v2",
        ),
        (r"a!=\=\=", &[ne("a", "==")], r"a!=\=\="),
    ];
    for (input, expected, display) in cases {
        check_parse(input, expected, display);
    }
}

#[test]
fn malformed_selectors_are_refused_with_kubernetes_messages() {
    check_parse_error(
        "a",
        FieldSelectorError::UnparsableTerm {
            selector: "a".into(),
            term: "a".into(),
        },
        "invalid selector: 'a'; can't understand 'a'",
    );
    check_parse_error(
        "a=b,,c",
        FieldSelectorError::UnparsableTerm {
            selector: "a=b,,c".into(),
            term: "c".into(),
        },
        "invalid selector: 'a=b,,c'; can't understand 'c'",
    );
    // terms are checked in sorted order, so the first bad one in that order is named
    check_parse_error(
        "z,a=b,m",
        FieldSelectorError::UnparsableTerm {
            selector: "z,a=b,m".into(),
            term: "m".into(),
        },
        "invalid selector: 'z,a=b,m'; can't understand 'm'",
    );
    check_parse_error(
        "a=b=c",
        FieldSelectorError::UnescapedCharacter { character: '=' },
        "invalid field selector: unescaped character in value: 61",
    );
    check_parse_error(
        "a===b",
        FieldSelectorError::UnescapedCharacter { character: '=' },
        "invalid field selector: unescaped character in value: 61",
    );
    check_parse_error(
        r"a=x\y",
        FieldSelectorError::InvalidEscapeSequence {
            sequence: r"\y".into(),
        },
        r"invalid field selector: invalid escape sequence: \y",
    );
    check_parse_error(
        r"a=x\",
        FieldSelectorError::InvalidEscapeSequence {
            sequence: r"\".into(),
        },
        r"invalid field selector: invalid escape sequence: \",
    );
    // an escaped `=` in the field part does not hide the operator after it
    check_parse_error(
        r"a\=b=c",
        FieldSelectorError::UnescapedCharacter { character: '=' },
        "invalid field selector: unescaped character in value: 61",
    );
}

#[test]
fn display_round_trips_any_value() {
    let values = [
        "",
        "plain",
        ",",
        "=",
        r"\",
        r"a\,b=c,,\\",
        "spaces are kept ",
        "ünïcödé,=",
    ];
    for value in values {
        for operator in [FieldOperator::Equals, FieldOperator::NotEquals] {
            let selector = FieldSelector::from_requirements(vec![
                requirement("metadata.name", operator, value),
                eq("spec.nodeName", value),
            ]);
            let written = selector.to_string();
            let reparsed =
                FieldSelector::parse(&written).unwrap_or_else(|err| panic!("{written:?}: {err}"));
            assert_eq!(reparsed, selector, "{written:?}");
        }
    }
    assert_eq!(escape_value(r"a\b,c=d"), r"a\\b\,c\=d");
    assert_eq!(unescape_value(r"a\\b\,c\=d").unwrap(), r"a\b,c=d");
}

#[test]
fn requirement_order_does_not_change_the_selector() {
    let a = FieldSelector::parse("status.phase!=Failed,spec.nodeName=n1").unwrap();
    let b = FieldSelector::parse("spec.nodeName==n1,status.phase!=Failed").unwrap();
    assert_eq!(a, b);
    assert_eq!(a.to_string(), "spec.nodeName=n1,status.phase!=Failed");
}

#[test]
fn exact_matches_come_from_equality_requirements_only() {
    let selector: FieldSelector = "metadata.name=web,status.phase!=Failed".parse().unwrap();
    assert_eq!(selector.requires_exact_match("metadata.name"), Some("web"));
    assert_eq!(selector.requires_exact_match("status.phase"), None);
    assert_eq!(selector.requires_exact_match("spec.nodeName"), None);
    let empty_value: FieldSelector = "spec.nodeName=".parse().unwrap();
    assert_eq!(empty_value.requires_exact_match("spec.nodeName"), Some(""));
    assert_eq!(
        FieldSelector::everything().requires_exact_match("metadata.name"),
        None
    );
    // after conversion a legacy alias counts under its new name
    let legacy: FieldSelector = "spec.host=node-1".parse().unwrap();
    let converted = legacy.convert("pods", selectable("pods")).unwrap();
    assert_eq!(converted.to_string(), "spec.nodeName=node-1");
    assert_eq!(
        converted.requires_exact_match("spec.nodeName"),
        Some("node-1")
    );
}

fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "frontend-hcfvf", "namespace": "default"},
        "spec": {
            "nodeName": "node-1",
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "serviceAccountName": "builder",
            "hostNetwork": true,
        },
        "status": {
            "phase": "Running",
            "podIP": "10.244.0.13",
            "podIPs": [{"ip": "10.244.0.13"}, {"ip": "fd00::13"}],
            "nominatedNodeName": "node-2",
        },
    })
}

#[test]
fn every_pod_field_matches_its_served_value() {
    let pod = pod();
    let cases = [
        ("metadata.name=frontend-hcfvf", true),
        ("metadata.name=other", false),
        ("metadata.namespace=default", true),
        ("metadata.namespace!=default", false),
        ("spec.nodeName=node-1", true),
        ("spec.nodeName=node-2", false),
        ("spec.host=node-1", true),
        ("spec.restartPolicy=Always", true),
        ("spec.schedulerName=default-scheduler", true),
        ("spec.serviceAccountName=builder", true),
        ("spec.hostNetwork=true", true),
        ("spec.hostNetwork=false", false),
        ("status.phase=Running", true),
        ("status.phase!=Running", false),
        ("status.podIP=10.244.0.13", true),
        ("status.podIP=fd00::13", false),
        // accepted, but Kubernetes never fills it in: it reads as ""
        ("status.podIPs=10.244.0.13", false),
        ("status.podIPs=", true),
        ("status.nominatedNodeName=node-2", true),
        (
            "spec.nodeName=node-1,status.phase!=Succeeded,status.phase!=Failed",
            true,
        ),
        ("spec.nodeName=node-1,status.phase=Pending", false),
    ];
    for (selector, expected) in cases {
        check_matches("pods", selector, &pod, expected);
    }
}

#[test]
fn missing_pod_fields_read_as_kubernetes_defaults() {
    let bare = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {}, "status": {}});
    let cases = [
        ("spec.nodeName=", true),
        ("spec.restartPolicy=", true),
        ("spec.schedulerName=", true),
        ("spec.serviceAccountName=", true),
        ("spec.hostNetwork=false", true),
        ("status.phase=", true),
        ("status.podIP=", true),
        ("status.nominatedNodeName=", true),
    ];
    for (selector, expected) in cases {
        check_matches("pods", selector, &bare, expected);
    }
    // podIP without podIPs, and the deprecated serviceAccount alias
    let legacy = json!({
        "metadata": {"name": "p"},
        "spec": {"serviceAccount": "old-style"},
        "status": {"podIP": "10.0.0.9", "podIPs": []},
    });
    check_matches("pods", "status.podIP=10.0.0.9", &legacy, true);
    check_matches("pods", "spec.serviceAccountName=old-style", &legacy, true);
    check_matches("pods", "metadata.namespace=", &legacy, true);
}

#[test]
fn every_event_field_matches_its_served_value() {
    let event = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "web.17f0", "namespace": "default"},
        "involvedObject": {
            "kind": "Deployment",
            "namespace": "default",
            "name": "web",
            "uid": "37177d16-6fac-496b-aed2-d4d31a1d7f48",
            "apiVersion": "apps/v1",
            "resourceVersion": "144",
            "fieldPath": "spec.template",
        },
        "reason": "ScalingReplicaSet",
        "source": {"component": "deployment-controller"},
        "reportingComponent": "kcm-deployment",
        "type": "Normal",
    });
    let cases = [
        ("metadata.name=web.17f0", true),
        ("metadata.namespace=default", true),
        ("involvedObject.kind=Deployment", true),
        ("involvedObject.namespace=default", true),
        ("involvedObject.name=web", true),
        ("involvedObject.uid=37177d16-6fac-496b-aed2-d4d31a1d7f48", true),
        ("involvedObject.apiVersion=apps/v1", true),
        ("involvedObject.resourceVersion=144", true),
        ("involvedObject.fieldPath=spec.template", true),
        ("reason=ScalingReplicaSet", true),
        ("reportingComponent=kcm-deployment", true),
        ("source=deployment-controller", true),
        ("source=kcm-deployment", false),
        ("type=Normal", true),
        ("type=Warning", false),
        // kubectl describe deployment
        (
            "involvedObject.name=web,involvedObject.namespace=default,involvedObject.kind=Deployment,involvedObject.uid=37177d16-6fac-496b-aed2-d4d31a1d7f48",
            true,
        ),
        ("involvedObject.name=web,involvedObject.kind=Pod", false),
    ];
    for (selector, expected) in cases {
        check_matches("events", selector, &event, expected);
    }
    // source falls back to reportingComponent when source.component is empty
    let new_style = json!({"metadata": {"name": "e"}, "reportingComponent": "kubelet"});
    check_matches("events", "source=kubelet", &new_style, true);
    check_matches("events", "involvedObject.namespace=", &new_style, true);
}

#[test]
fn every_node_field_matches_its_served_value() {
    let cordoned = json!({"metadata": {"name": "node-1"}, "spec": {"unschedulable": true}});
    let schedulable = json!({"metadata": {"name": "node-2"}, "spec": {}});
    let cases = [
        ("metadata.name=node-1", &cordoned, true),
        ("metadata.name=node-1", &schedulable, false),
        ("spec.unschedulable=true", &cordoned, true),
        ("spec.unschedulable=false", &cordoned, false),
        ("spec.unschedulable=false", &schedulable, true),
        ("spec.unschedulable!=true", &schedulable, true),
    ];
    for (selector, object, expected) in cases {
        check_matches("nodes", selector, object, expected);
    }
}

#[test]
fn other_kinds_match_their_own_fields() {
    let rc = json!({"metadata": {"name": "frontend", "namespace": "default"},
                    "status": {"replicas": 2}});
    check_matches("replicationcontrollers", "status.replicas=2", &rc, true);
    check_matches("replicationcontrollers", "status.replicas!=2", &rc, false);
    let new_rc = json!({"metadata": {"name": "new"}, "status": {}});
    check_matches("replicationcontrollers", "status.replicas=0", &new_rc, true);

    let namespace = json!({"metadata": {"name": "default"}, "status": {"phase": "Active"}});
    check_matches("namespaces", "status.phase=Active", &namespace, true);
    check_matches("namespaces", "metadata.name=kube-system", &namespace, false);

    let service = json!({"metadata": {"name": "web", "namespace": "default"},
                         "spec": {"clusterIP": "10.96.215.222", "type": "ClusterIP"}});
    check_matches("services", "spec.clusterIP=10.96.215.222", &service, true);
    check_matches("services", "spec.type=NodePort", &service, false);

    let deployment = json!({"metadata": {"name": "web", "namespace": "default"}});
    check_matches("deployments", "metadata.name=web", &deployment, true);
    check_matches(
        "deployments",
        "metadata.namespace=kube-system",
        &deployment,
        false,
    );
    check_matches("replicasets", "metadata.name=web", &deployment, true);
    check_matches("endpoints", "metadata.namespace=default", &deployment, true);
}

#[test]
fn unsupported_fields_are_refused_with_kube_apiservers_message() {
    let cases = [
        (
            "pods",
            "status.hostIP=1.2.3.4",
            "field label not supported: status.hostIP",
        ),
        ("pods", "=b", "field label not supported: "),
        (
            "pods",
            "metadata.name = web",
            "field label not supported: metadata.name ",
        ),
        ("events", "message=x", "field label not supported: message"),
        (
            "nodes",
            "metadata.namespace=",
            "field label not supported: metadata.namespace",
        ),
        (
            "nodes",
            "spec.nodeName=x",
            "field label not supported: spec.nodeName",
        ),
        (
            "namespaces",
            "name=default",
            "field label not supported: name",
        ),
        (
            "replicationcontrollers",
            "spec.replicas=1",
            "field label not supported: spec.replicas",
        ),
        (
            "services",
            "spec.ports=80",
            "field label not supported: spec.ports",
        ),
        (
            "replicasets",
            "status.replicas=0",
            r#""status.replicas" is not a known field selector: only "metadata.name", "metadata.namespace""#,
        ),
        (
            "deployments",
            "spec.paused=true",
            r#""spec.paused" is not a known field selector: only "metadata.name", "metadata.namespace""#,
        ),
        (
            "endpoints",
            "subsets=x",
            r#""subsets" is not a known field selector: only "metadata.name", "metadata.namespace""#,
        ),
        (
            "deployments",
            "a\"b=x",
            r#""a\"b" is not a known field selector: only "metadata.name", "metadata.namespace""#,
        ),
    ];
    for (resource, selector, message) in cases {
        check_unsupported(resource, selector, message);
    }
    let err = FieldSelector::parse("metadata.name=web,status.hostIP=1.2.3.4")
        .unwrap()
        .validate("pods", selectable("pods"))
        .unwrap_err();
    assert_eq!(
        err,
        FieldSelectorError::UnsupportedField {
            resource: "pods".into(),
            field: "status.hostIP".into(),
            rejection: Rejection::FieldLabelNotSupported,
        }
    );
}

#[test]
fn supported_fields_are_kube_apiservers_1_32_lists() {
    let metadata = ["metadata.name", "metadata.namespace"];
    let cases: &[(&str, &[&str])] = &[
        ("pods", POD_FIELDS),
        ("events", EVENT_FIELDS),
        ("nodes", &["metadata.name", "spec.unschedulable"]),
        ("namespaces", &["metadata.name", "status.phase"]),
        (
            "replicationcontrollers",
            &["metadata.name", "metadata.namespace", "status.replicas"],
        ),
        (
            "services",
            &[
                "metadata.name",
                "metadata.namespace",
                "spec.clusterIP",
                "spec.type",
            ],
        ),
        ("endpoints", &metadata),
        ("deployments", &metadata),
        ("replicasets", &metadata),
    ];
    for (resource, expected) in cases {
        assert_eq!(supported_fields(resource), *expected, "{resource}");
        for field in supported_fields(resource) {
            let selector = FieldSelector::from_requirements(vec![eq(field, "x")]);
            assert_eq!(
                selector.validate(resource, selectable(resource)),
                Ok(()),
                "{resource} {field}"
            );
        }
    }
    assert!(POD_FIELDS.contains(&"spec.hostNetwork"));
    assert_eq!(EVENT_FIELDS.len(), 13);
}

#[test]
fn every_served_resource_has_a_field_table() {
    for resource in super::super::resources::RESOURCES {
        let fields = supported_fields(resource.plural);
        assert!(fields.contains(&"metadata.name"), "{}", resource.plural);
        assert_eq!(
            fields.contains(&"metadata.namespace"),
            resource.namespaced,
            "{}",
            resource.plural
        );
    }
}

#[test]
fn go_quoting_escapes_like_percent_q() {
    assert_eq!(go_quote("spec.x"), r#""spec.x""#);
    assert_eq!(go_quote("a\"b\\c"), r#""a\"b\\c""#);
    assert_eq!(go_quote("tab\there\n"), r#""tab\there\n""#);
    assert_eq!(go_quote("\u{1}"), r#""\x01""#);
    assert_eq!(go_quote("é"), "\"é\"");
}
