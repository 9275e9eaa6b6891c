use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::*;

#[test]
fn uuids_are_kept_in_16_bytes_and_other_uids_as_text() {
    let uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
    assert!(matches!(Uid::new(uuid), Uid::Uuid(_)));
    assert!(Uid::new(uuid).is(uuid) && !Uid::new(uuid).is("x"));
    assert_eq!(Uid::new(uuid).to_string(), uuid);
    // Not canonical: kept as written, so it still compares as text.
    let upper = uuid.to_uppercase();
    assert_eq!(Uid::new(&upper), Uid::Text(upper.as_str().into()));
    assert!(!Uid::new(&upper).is(uuid));
    assert_eq!(Uid::new("rs-1").to_string(), "rs-1");
    assert_eq!(Uid::new("").to_string(), "");
    assert_eq!(std::mem::size_of::<Uid>(), 24);
}

#[test]
fn a_cached_pod_with_a_generated_name_is_one_block_of_192_bytes() {
    // jemalloc's size classes step by 32 bytes from 128 to 256 (`alloc.rs`): an `Arc`'s two
    // counts and a `CachedPod` of at most 152 bytes fit one of 192 (of 176 under glibc,
    // which steps by 16 with 8 bytes of its own).
    assert!(std::mem::size_of::<CachedPod>() <= 152);
    // A generated pod name (a ReplicaSet's of a Deployment's, 24 bytes at most)
    // needs no block of its own.
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web-7d4b9c5f6-abcde", "namespace": "default"}
    }))
    .unwrap();
    assert!(!CachedPod::from(&pod).name.is_heap_allocated());
}

#[test]
fn cached_pods_keep_readiness_ownership_and_deletion() {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1",
                     "deletionTimestamp": "2026-01-01T00:00:09Z",
                     "ownerReferences": [
                         {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "n-1"},
                         {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                          "uid": "rs-1", "controller": true}]},
        "status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "1970-01-01T00:01:40Z"}]}
    }))
    .unwrap();
    let cached = CachedPod::from(&pod);
    assert!(
        cached.uid.is("u-1")
            && cached
                .controller
                .as_ref()
                .is_some_and(|c| &*c.uid == "rs-1")
    );
    assert_eq!(cached.uid, Uid::Text("u-1".into()));
    assert_eq!(
        (
            cached.ready,
            cached.not_ready,
            cached.ready_since,
            cached.deleting
        ),
        (true, false, NonZeroU32::new(100), true)
    );
    // Two references: the collector sees both; with one controller reference only,
    // the same from the compact form.
    let owners = cached.ownership().owners;
    assert_eq!(owners.len(), 2);
    assert_eq!(owners[0].kind, "Node");
    let mut single = pod.clone();
    single.metadata.owner_references.remove(0);
    single.metadata.owner_references[0].block_owner_deletion = Some(true);
    let compact = CachedPod::from(&single);
    assert!(compact.owned.is_none());
    assert_eq!(compact.ownership().owners, single.metadata.owner_references);
    // Anything else is kept as written.
    single.metadata.owner_references[0].block_owner_deletion = None;
    let kept = CachedPod::from(&single);
    assert!(kept.owned.is_some());
    assert_eq!(kept.ownership().owners, single.metadata.owner_references);
    let bare = CachedPod::from(&Pod::default());
    assert!(bare.uid.is_empty() && bare.controller.is_none() && bare.uid.is(""));
    assert_eq!(
        (bare.ready, bare.not_ready, bare.ready_since, bare.deleting),
        (false, false, None, false)
    );
}

// ---------------------------------------------------------------------------------------
// A stored pod read field by field (`pod_fields`)

const PREFIX: &str = "/registry";
const KEY: &str = "/registry/pods/ns/p";

/// Both decodes of `value`: this module's, and the whole pod's.
fn both(value: &[u8]) -> (anyhow::Result<CachedPod>, anyhow::Result<CachedPod>) {
    let stored = Stored::new(PREFIX, KEY, value, 42);
    (decode_pod(stored), decode_object::<CachedPod>(stored))
}

/// Whether two decodes came out alike: equal pods, or errors in equal words.
fn alike(a: &anyhow::Result<CachedPod>, b: &anyhow::Result<CachedPod>) -> bool {
    match (a, b) {
        (Ok(a), Ok(b)) => a == b,
        (Err(a), Err(b)) => format!("{a:#}") == format!("{b:#}"),
        _ => false,
    }
}

/// A field's choices: `None` leaves it out.
fn field(choices: Vec<Option<Value>>) -> impl Strategy<Value = Option<Value>> {
    prop::sample::select(choices)
}

fn object(fields: Vec<(&'static str, Option<Value>)>) -> Value {
    Value::Object(
        fields
            .into_iter()
            .filter_map(|(name, value)| Some((name.to_string(), value?)))
            .collect::<Map<String, Value>>(),
    )
}

/// Owner references: a ReplicaSet's controller reference, the same without
/// `blockOwnerDeletion`, the same with a field no version knows, and a Node's.
fn owner_references() -> [Value; 4] {
    let controller = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                            "uid": "0f8fad5b-d9cb-469f-a165-70867728950e",
                            "controller": true, "blockOwnerDeletion": true});
    let mut unblocked = controller.clone();
    unblocked["blockOwnerDeletion"] = json!(null);
    let mut extended = controller.clone();
    extended["future"] = json!({"x": 1});
    let node = json!({"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "n-1"});
    [controller, unblocked, extended, node]
}

fn metadata() -> impl Strategy<Value = Option<Value>> {
    let [controller, unblocked, extended, node] = owner_references();
    (
        (
            field(vec![
                None,
                Some(json!("p")),
                Some(json!("q")),
                Some(json!("")),
                Some(json!(null)),
                Some(json!(7)),
            ]),
            field(vec![
                None,
                Some(json!("ns")),
                Some(json!("other")),
                Some(json!("")),
            ]),
            field(vec![
                None,
                Some(json!("0f8fad5b-d9cb-469f-a165-70867728950e")),
                Some(json!("u \"1\"")),
                Some(json!(null)),
            ]),
            field(vec![
                None,
                Some(json!(null)),
                Some(json!({})),
                Some(json!({"app": "web", "tier": "a\nb"})),
                Some(json!({"app": 5})),
                Some(json!([])),
            ]),
            field(vec![
                None,
                Some(json!("2026-01-01T00:00:00Z")),
                Some(json!(null)),
                Some(json!("junk")),
                Some(json!(5)),
            ]),
            field(vec![
                None,
                Some(json!("2026-01-01T00:00:09Z")),
                Some(json!(null)),
                Some(json!(5)),
            ]),
        ),
        (
            field(vec![
                None,
                Some(json!(null)),
                Some(json!([])),
                Some(json!(["orphan"])),
                Some(json!([5])),
            ]),
            field(vec![
                None,
                Some(json!(null)),
                Some(json!([])),
                Some(json!([controller.clone()])),
                Some(json!([unblocked])),
                Some(json!([node, controller])),
                Some(json!([extended])),
                Some(json!([{"controller": "yes"}])),
                Some(json!({"kind": "ReplicaSet"})),
            ]),
            field(vec![
                None,
                Some(json!("17")),
                Some(json!("junk")),
                Some(json!(null)),
            ]),
            field(vec![
                None,
                Some(json!(null)),
                Some(json!({})),
                Some(json!([])),
                Some(json!("m")),
            ]),
        ),
    )
        .prop_map(
            |(
                (name, namespace, uid, labels, created, deleted),
                (finalizers, owners, version, whole),
            )| {
                match whole {
                    Some(Value::Object(_)) | None => Some(object(vec![
                        ("name", name),
                        ("namespace", namespace),
                        ("uid", uid),
                        ("labels", labels),
                        ("creationTimestamp", created),
                        ("deletionTimestamp", deleted),
                        ("finalizers", finalizers),
                        ("ownerReferences", owners),
                        ("resourceVersion", version),
                    ])),
                    other => other,
                }
            },
        )
}

fn spec() -> impl Strategy<Value = Option<Value>> {
    let ports = vec![
        None,
        Some(json!(null)),
        Some(
            json!([{"name": "http", "containerPort": 80, "protocol": "TCP"}, {"containerPort": 81}]),
        ),
        Some(json!([{"containerPort": "80"}])),
        Some(json!([{"name": 5}])),
        Some(json!([[80]])),
    ];
    (
        field(ports.clone()),
        field(ports),
        field(vec![
            None,
            Some(json!("n1")),
            Some(json!("")),
            Some(json!(null)),
            Some(json!(5)),
        ]),
        field(vec![
            None,
            Some(json!(null)),
            Some(json!({})),
            Some(json!(["x"])),
            Some(json!("containers")),
        ]),
    )
        .prop_map(|(first, second, host, shape)| match shape {
            Some(Value::Object(_)) | None => Some(object(vec![
                (
                    "containers",
                    Some(json!([
                        object(vec![
                            ("name", Some(json!("a"))),
                            ("image", Some(json!("i"))),
                            ("ports", first)
                        ]),
                        object(vec![("name", Some(json!("b"))), ("ports", second)]),
                    ])),
                ),
                ("host", host),
            ])),
            other => other,
        })
}

fn status() -> impl Strategy<Value = Option<Value>> {
    (
        field(vec![None, Some(json!("Running")), Some(json!("Succeeded")), Some(json!("Bogus")), Some(json!(null))]),
        field(vec![None, Some(json!("10.0.0.1")), Some(json!("")), Some(json!(null))]),
        field(vec![
            None,
            Some(json!(null)),
            Some(json!([])),
            Some(json!([{"type": "PodScheduled", "status": "True"},
                        {"type": "Ready", "status": "True", "lastTransitionTime": "1970-01-01T00:01:40Z"}])),
            Some(json!([{"type": "Ready", "status": "False", "reason": "r"}])),
            Some(json!([{"type": 5}])),
        ]),
        field(vec![
            None,
            Some(json!(null)),
            Some(json!([{"name": "a", "restartCount": 3}, {"restartCount": -1}])),
            Some(json!([{"restartCount": "x"}])),
        ]),
        field(vec![None, Some(json!(null)), Some(json!({})), Some(json!(5))]),
    )
        .prop_map(|(phase, ip, conditions, statuses, shape)| match shape {
            Some(Value::Object(_)) | None => Some(object(vec![
                ("phase", phase),
                ("podIP", ip),
                ("conditions", conditions),
                ("containerStatuses", statuses),
            ])),
            other => other,
        })
}

fn pod() -> impl Strategy<Value = Value> {
    (
        field(vec![
            None,
            Some(json!("Pod")),
            Some(json!("Node")),
            Some(json!(null)),
        ]),
        field(vec![
            None,
            Some(json!("v1")),
            Some(json!("v1beta3")),
            Some(json!("apps/v1")),
        ]),
        metadata(),
        spec(),
        status(),
    )
        .prop_map(|(kind, version, metadata, spec, status)| {
            object(vec![
                ("kind", kind),
                ("apiVersion", version),
                ("metadata", metadata),
                ("spec", spec),
                ("status", status),
                ("unknown", Some(json!({"kept": [1, 2]}))),
            ])
        })
}

/// Puts a malformed value in each field the cache does not read, wherever its object
/// is there.
fn with_unread_junk(pod: &Value) -> Value {
    let mut pod = pod.clone();
    if let Some(meta) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("annotations".into(), json!(5));
    }
    if let Some(containers) = pod
        .pointer_mut("/spec/containers")
        .and_then(Value::as_array_mut)
    {
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            container.insert("image".into(), json!(5));
        }
    }
    if let Some(status) = pod.get_mut("status").and_then(Value::as_object_mut) {
        status.insert("hostIP".into(), json!(false));
        status.insert("host".into(), json!(5));
    }
    pod
}

/// Pods a controller could write: every field [`pod`] varies, well-formed (its name and
/// namespace are the key's).
fn well_formed_pod() -> impl Strategy<Value = Value> {
    let [controller, unblocked, extended, node] = owner_references();
    let ports = vec![
        None,
        Some(json!([])),
        Some(
            json!([{"name": "http", "containerPort": 80, "protocol": "TCP"}, {"containerPort": 81}]),
        ),
    ];
    let metadata = (
        field(vec![
            None,
            Some(json!("0f8fad5b-d9cb-469f-a165-70867728950e")),
            Some(json!("u \"1\"")),
        ]),
        field(vec![
            None,
            Some(json!({})),
            Some(json!({"app": "web", "tier": "a\nb"})),
        ]),
        field(vec![
            None,
            Some(json!("2026-01-01T00:00:00Z")),
            Some(json!("junk")),
        ]),
        field(vec![None, Some(json!("2026-01-01T00:00:09Z"))]),
        field(vec![None, Some(json!([])), Some(json!(["orphan"]))]),
        field(vec![
            None,
            Some(json!([controller.clone()])),
            Some(json!([unblocked])),
            Some(json!([node, controller])),
            Some(json!([extended])),
        ]),
    );
    let spec = (
        field(ports.clone()),
        field(ports),
        field(vec![None, Some(json!("n1")), Some(json!(""))]),
    );
    let status = (
        field(vec![None, Some(json!("Running")), Some(json!("Succeeded"))]),
        field(vec![None, Some(json!("10.0.0.1")), Some(json!(""))]),
        field(vec![
            None,
            Some(json!([])),
            Some(json!([{"type": "PodScheduled", "status": "True"},
                        {"type": "Ready", "status": "True", "lastTransitionTime": "1970-01-01T00:01:40Z"}])),
            Some(json!([{"type": "Ready", "status": "False", "reason": "r"}])),
        ]),
        field(vec![None, Some(json!([{"name": "a", "restartCount": 3}]))]),
    );
    (metadata, spec, status).prop_map(
        |(
            (uid, labels, created, deleted, finalizers, owners),
            (first, second, host),
            (phase, ip, conditions, statuses),
        )| {
            object(vec![
                (
                    "metadata",
                    Some(object(vec![
                        ("uid", uid),
                        ("labels", labels),
                        ("creationTimestamp", created),
                        ("deletionTimestamp", deleted),
                        ("finalizers", finalizers),
                        ("ownerReferences", owners),
                    ])),
                ),
                (
                    "spec",
                    Some(object(vec![
                        (
                            "containers",
                            Some(json!([
                                object(vec![("name", Some(json!("a"))), ("ports", first)]),
                                object(vec![("name", Some(json!("b"))), ("ports", second)]),
                            ])),
                        ),
                        ("host", host),
                    ])),
                ),
                (
                    "status",
                    Some(object(vec![
                        ("phase", phase),
                        ("podIP", ip),
                        ("conditions", conditions),
                        ("containerStatuses", statuses),
                    ])),
                ),
                ("unknown", Some(json!({"kept": [1, 2]}))),
            ])
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// What the whole decode reads, this decode reads alike, errors word for word.
    #[test]
    fn reads_what_the_whole_decode_reads(pod in pod()) {
        let value = serde_json::to_vec(&pod).unwrap();
        let (fields, whole) = both(&value);
        prop_assert!(alike(&fields, &whole), "{pod}\nfields: {fields:?}\nwhole: {whole:?}");
    }

    /// A pod this process writes is cached as its bytes decode (a [`Handoff`]'s
    /// invariant): the form made from the pod, at the event's revision, is the form its
    /// encoded bytes decode to.
    #[test]
    fn a_written_pod_is_cached_as_its_bytes_decode(pod in well_formed_pod()) {
        let mut pod: Pod = serde_json::from_value(pod).unwrap();
        // As a create writes it: named by its key, with its type set.
        pod.metadata.namespace = "ns".into();
        pod.metadata.name = "p".into();
        pod.metadata.resource_version = None;
        pod.set_type_meta();
        let value = crate::api::encode(&pod).unwrap();
        let mut written = CachedPod::of_written(&pod);
        written.resource_version = 42;
        let decoded = decode_pod(Stored::new(PREFIX, KEY, &value, 42)).unwrap();
        prop_assert_eq!(written, decoded);
    }

    /// A malformed field it does not read leaves its answer as it was; the whole
    /// decode refuses the pod.
    #[test]
    fn a_malformed_field_it_does_not_read_changes_nothing(pod in pod()) {
        let junk = with_unread_junk(&pod);
        prop_assume!(junk != pod);
        let (fields, _) = both(&serde_json::to_vec(&pod).unwrap());
        let (junk_fields, junk_whole) = both(&serde_json::to_vec(&junk).unwrap());
        match (&fields, &junk_fields) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (a, b) => prop_assert!(a.is_err() && b.is_err(), "{pod}\n{a:?}\n{b:?}"),
        }
        prop_assert!(junk_whole.is_err());
    }
}

#[test]
fn a_created_pod_is_read_with_its_strings_borrowed() {
    let pod = json!({"kind": "Pod", "apiVersion": "v1beta3",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1",
                     "labels": {"app": "web"}, "creationTimestamp": "2026-12-01T04:00:34Z"},
        "spec": {"containers": [{"name": "web", "image": "nginx",
                                 "ports": [{"name": "http", "containerPort": 80}]}]},
        "status": {"phase": "Pending"}});
    let value = serde_json::to_vec(&pod).unwrap();
    let fields: PodFields<'_> = serde_json::from_slice(&value).unwrap();
    let meta = &fields.metadata.0;
    assert!(matches!(
        (
            &meta.name,
            &meta.uid,
            &fields.spec.0.containers[0].0.ports[0].0.name
        ),
        (
            Cow::Borrowed("p"),
            Cow::Borrowed("u-1"),
            Cow::Borrowed("http")
        )
    ));
    let (fields, whole) = both(&value);
    assert!(alike(&fields, &whole));
    assert_eq!(fields.unwrap().ports.find(None), Some(80));
}

#[test]
fn pods_alike_share_the_last_pods_parts_and_others_get_their_own() {
    let pod = |name: &str, tier: &str| {
        let value = json!({"metadata": {"name": name, "namespace": "ns",
            "labels": {"app": "web", "tier": tier},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "rs", "uid": "u", "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"containers": [{"ports": [{"name": "http", "containerPort": 80}]}]}});
        let value = serde_json::to_vec(&value).unwrap();
        let key = format!("/registry/pods/ns/{name}");
        decode_pod(Stored::new(PREFIX, &key, &value, 1)).unwrap()
    };
    let (a, b, c) = (pod("a", "front"), pod("b", "front"), pod("c", "back"));
    let controller = |p: &CachedPod| p.controller.clone().unwrap();
    assert!(Arc::ptr_eq(&a.namespace, &b.namespace) && Arc::ptr_eq(&a.labels, &b.labels));
    assert!(Arc::ptr_eq(&a.ports, &b.ports) && Arc::ptr_eq(&controller(&a), &controller(&b)));
    assert!(a.owned.is_none());
    // Other labels: a set of its own; the rest is still the last pod's.
    assert!(!Arc::ptr_eq(&b.labels, &c.labels) && c.labels.get("tier") == Some("back"));
    assert!(Arc::ptr_eq(&b.ports, &c.ports) && Arc::ptr_eq(&controller(&b), &controller(&c)));
}

#[test]
fn labels_out_of_order_or_twice_make_the_set_serde_makes() {
    let pod = |labels: &str| {
        let value = format!(r#"{{"metadata": {{"labels": {labels}}}}}"#);
        let (fields, whole) = both(value.as_bytes());
        assert!(alike(&fields, &whole), "{labels}");
        fields.unwrap().labels
    };
    assert_eq!(pod(r#"{"a": "1", "b": "2"}"#).len(), 2);
    assert_eq!(pod(r#"{"b": "2", "a": "1"}"#).len(), 2);
    assert_eq!(pod(r#"{"a": "1", "a": "2"}"#).get("a"), Some("2"));
    assert_eq!(pod(r#"{"a": "1"}"#).get("a"), Some("1"));
}

#[test]
fn an_object_field_given_as_an_array_is_refused_as_the_whole_decode_refuses_it() {
    // serde reads a derived struct from an array, field by field.
    for pod in [
        json!({"metadata": ["p", "ns"]}),
        json!({"spec": {"containers": [[[{"containerPort": 80}]]]}}),
        json!({"status": {"conditions": [["Ready", "True"]]}}),
    ] {
        let (fields, whole) = both(&serde_json::to_vec(&pod).unwrap());
        assert!(
            fields.is_err() && alike(&fields, &whole),
            "{pod}: {fields:?}"
        );
    }
}
