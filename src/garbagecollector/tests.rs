//! The collector's pure parts: the graph, and the plan's decisions over observed state.

use super::graph::{parse_key, Graph, Resource};
use super::plan::{
    blocks, classify, decide, foreground_dependent, owner_condition, plan_deletion,
    terminated_to_delete, Action, Class, Deletion, Found, InForeground, FOREGROUND, ORPHAN,
};
use crate::api::OwnerReference;
use crate::informer::Ownership;
use crate::registry::{Incarnation, KeyCondition};

fn reference(kind: &str, api_version: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
        ..OwnerReference::default()
    }
}

fn owned(uid: &str, owners: Vec<OwnerReference>) -> Ownership {
    Ownership {
        uid: uid.into(),
        resource_version: 1,
        owners,
        ..Ownership::default()
    }
}

#[test]
fn references_resolve_to_the_kinds_kcm_stores_by_kind_and_group() {
    let of = |kind, version| Resource::of_reference(&reference(kind, version, "x", "u"));
    assert_eq!(of("ReplicaSet", "apps/v1"), Some(Resource::ReplicaSets));
    assert_eq!(
        of("ReplicaSet", "extensions/v1beta1"),
        Some(Resource::ReplicaSets)
    );
    assert_eq!(
        of("ReplicationController", "v1"),
        Some(Resource::ReplicationControllers)
    );
    assert_eq!(of("Pod", "v1beta3"), Some(Resource::Pods));
    assert_eq!(of("Deployment", "apps/v1"), Some(Resource::Deployments));
    // Another group's ReplicaSet, or a kind kcm does not store: solid.
    assert_eq!(of("ReplicaSet", "example.com/v1"), None);
    assert_eq!(of("Node", "v1"), None);
    assert_eq!(
        parse_key("replicasets/ns/web"),
        Some((Resource::ReplicaSets, "ns", "web"))
    );
    assert_eq!(parse_key("nodes/ns/web"), None);
}

#[test]
fn an_owner_counts_only_with_the_referenced_uid() {
    let r = reference("ReplicaSet", "apps/v1", "web", "u1");
    let object = |uid: &str, deletion: Option<Vec<String>>| Found::Object {
        uid: uid.into(),
        resource_version: 7,
        deletion,
    };
    assert_eq!(classify(&r, None), Class::Solid);
    assert_eq!(
        classify(&r, Some(&Found::Absent)),
        Class::Dangling { at: None }
    );
    assert_eq!(
        classify(&r, Some(&object("u2", None))),
        Class::Dangling { at: Some(7) }
    );
    assert_eq!(classify(&r, Some(&object("u1", None))), Class::Solid);
    assert_eq!(
        classify(&r, Some(&object("u1", Some(vec![FOREGROUND.into()])))),
        Class::Waiting { at: 7 }
    );
    // An orphaning owner removes its references itself.
    assert_eq!(
        classify(&r, Some(&object("u1", Some(vec![ORPHAN.into()])))),
        Class::Solid
    );
}

#[test]
fn dependents_go_when_no_owner_is_solid_and_lose_references_otherwise() {
    let dangling = Class::Dangling { at: None };
    let waiting = Class::Waiting { at: 3 };
    assert_eq!(decide(&[], false), Action::Keep);
    assert_eq!(decide(&[Class::Solid], false), Action::Keep);
    assert_eq!(
        decide(std::slice::from_ref(&dangling), true),
        Action::Delete { foreground: false }
    );
    assert_eq!(
        decide(std::slice::from_ref(&waiting), true),
        Action::Delete { foreground: true }
    );
    assert_eq!(
        decide(std::slice::from_ref(&waiting), false),
        Action::Delete { foreground: false }
    );
    assert_eq!(
        decide(&[Class::Solid, dangling, waiting], false),
        Action::RemoveReferences(vec![1, 2])
    );
}

#[test]
fn the_graph_queues_dependents_when_their_owner_goes() {
    let mut graph = Graph::default();
    let pod = owned("p1", vec![reference("ReplicaSet", "apps/v1", "web", "rs1")]);
    let keys = graph.apply(Resource::Pods, "ns", "a", None, Some(&pod));
    assert_eq!(keys, ["pods/ns/a"]);
    let rs = owned("rs1", vec![]);
    assert!(graph
        .apply(Resource::ReplicaSets, "ns", "web", None, Some(&rs))
        .is_empty());
    // Same ownership, new resourceVersion: nothing to do.
    let mut later = pod.clone();
    later.resource_version = 9;
    assert!(graph
        .apply(Resource::Pods, "ns", "a", Some(&pod), Some(&later))
        .is_empty());
    assert!(graph.has_dependents("ns", "rs1") && !graph.has_dependents("other", "rs1"));
    // The owner goes: its dependents are queued.
    assert_eq!(
        graph.apply(Resource::ReplicaSets, "ns", "web", Some(&rs), None),
        ["pods/ns/a"]
    );
    // The dependent goes: its owner is queued (a foreground deletion may go on).
    assert_eq!(
        graph.apply(Resource::Pods, "ns", "a", Some(&later), None),
        ["replicasets/ns/web"]
    );
    assert!(!graph.has_dependents("ns", "rs1") && graph.keys().is_empty());
}

#[test]
fn terminated_pods_beyond_the_threshold_go_oldest_first() {
    use std::time::{Duration, UNIX_EPOCH};
    let at = |s| Some(UNIX_EPOCH + Duration::from_secs(s));
    let pods = vec![
        (at(30), "c".to_string(), ()),
        (at(10), "a".to_string(), ()),
        (None, "z".to_string(), ()),
        (at(20), "b".to_string(), ()),
    ];
    let names = |v: Vec<(String, ())>| v.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
    assert_eq!(names(terminated_to_delete(pods.clone(), 2)), ["z", "a"]);
    assert!(terminated_to_delete(pods.clone(), 4).is_empty());
    assert!(terminated_to_delete(pods, 0).is_empty());
}

#[test]
fn an_owner_replaced_by_a_namesake_queues_the_old_ones_dependents() {
    let mut graph = Graph::default();
    let pod = owned("p1", vec![reference("ReplicaSet", "apps/v1", "web", "rs1")]);
    graph.apply(Resource::Pods, "ns", "a", None, Some(&pod));
    let (first, second) = (owned("rs1", vec![]), owned("rs2", vec![]));
    graph.apply(Resource::ReplicaSets, "ns", "web", None, Some(&first));
    // The watch saw the key written again with another uid, and no delete between.
    assert_eq!(
        graph.apply(
            Resource::ReplicaSets,
            "ns",
            "web",
            Some(&first),
            Some(&second)
        ),
        ["pods/ns/a"]
    );
    // A deletionTimestamp queues the object itself, and a resync keeps it.
    let mut deleting = second.clone();
    deleting.deleting = true;
    deleting.finalizers = vec![FOREGROUND.into()];
    assert_eq!(
        graph.apply(
            Resource::ReplicaSets,
            "ns",
            "web",
            Some(&second),
            Some(&deleting)
        ),
        ["replicasets/ns/web"]
    );
    assert_eq!(graph.keys(), ["pods/ns/a", "replicasets/ns/web"]);
}

/// Plans a live dependent with one owner reference to `found` (`None`: a kind kcm does
/// not store) and checks the action and the condition its write requires.
#[track_caller]
fn check_dependent(
    found: Option<Found>,
    has_dependents: bool,
    action: Action,
    condition: Option<KeyCondition>,
) {
    let r = reference("ReplicaSet", "apps/v1", "web", "u1");
    let class = classify(&r, found.as_ref());
    assert_eq!(decide(std::slice::from_ref(&class), has_dependents), action);
    assert_eq!(owner_condition(&class, "/rs/web".into()), condition);
}

#[test]
fn a_dependent_goes_only_while_its_owner_is_absent_replaced_or_waiting_for_it() {
    let object = |uid: &str, deletion: Option<Vec<String>>| Found::Object {
        uid: uid.into(),
        resource_version: 7,
        deletion,
    };
    // The owner lives, or orphans its dependents itself, or is of a kind kcm does not
    // store: kept, no write.
    check_dependent(Some(object("u1", None)), false, Action::Keep, None);
    check_dependent(
        Some(object("u1", Some(vec![ORPHAN.into()]))),
        false,
        Action::Keep,
        None,
    );
    check_dependent(None, false, Action::Keep, None);
    // Absent: deleted in the background while the owner's key stays absent.
    check_dependent(
        Some(Found::Absent),
        true,
        Action::Delete { foreground: false },
        Some(KeyCondition::Absent("/rs/web".into())),
    );
    // A namesake with another uid: deleted while the namesake is the one read.
    check_dependent(
        Some(object("u2", None)),
        false,
        Action::Delete { foreground: false },
        Some(KeyCondition::At("/rs/web".into(), 7)),
    );
    // The owner waits in a foreground deletion: a dependent owning others goes in the
    // foreground itself, one owning none at once; both while the owner lives.
    let alive = KeyCondition::Alive(Incarnation {
        key: "/rs/web".into(),
        read_at: 7,
        created: None,
    });
    for (has_dependents, foreground) in [(true, true), (false, false)] {
        check_dependent(
            Some(object("u1", Some(vec![FOREGROUND.into()]))),
            has_dependents,
            Action::Delete { foreground },
            Some(alive.clone()),
        );
    }
}

#[test]
fn an_object_in_deletion_is_deleted_orphans_waits_for_its_dependents_or_for_others() {
    let plan = |finalizers: &[&str]| {
        let finalizers: Vec<String> = finalizers.iter().map(|f| f.to_string()).collect();
        let deletion = plan_deletion(&finalizers);
        (deletion, deletion.finalizer())
    };
    assert_eq!(plan(&[]), (Deletion::Delete, None));
    assert_eq!(plan(&[ORPHAN]), (Deletion::Orphan, Some(ORPHAN)));
    assert_eq!(
        plan(&[FOREGROUND]),
        (Deletion::Foreground, Some(FOREGROUND))
    );
    // Orphaning first when it has both.
    assert_eq!(
        plan(&[FOREGROUND, ORPHAN]),
        (Deletion::Orphan, Some(ORPHAN))
    );
    // Someone else's finalizers are theirs to remove.
    assert_eq!(plan(&["example.com/keep"]), (Deletion::Wait, None));
    assert_eq!(
        plan(&["example.com/keep", FOREGROUND]),
        (Deletion::Foreground, Some(FOREGROUND))
    );
}

#[test]
fn a_foreground_owner_asks_its_live_dependents_and_waits_for_the_blocking_ones() {
    let mut blocking = owned("p1", vec![reference("ReplicaSet", "apps/v1", "web", "u1")]);
    assert_eq!(
        foreground_dependent("u1", &blocking),
        Some(InForeground {
            blocks: true,
            ask: true
        })
    );
    assert!(blocks("u1", &blocking));
    // Already in deletion: not asked again, still blocking.
    blocking.deleting = true;
    assert_eq!(
        foreground_dependent("u1", &blocking),
        Some(InForeground {
            blocks: true,
            ask: false
        })
    );
    // Without blockOwnerDeletion: asked, not blocking.
    let mut free = reference("ReplicaSet", "apps/v1", "web", "u1");
    free.block_owner_deletion = None;
    let dependent = owned("p2", vec![free.clone()]);
    assert_eq!(
        foreground_dependent("u1", &dependent),
        Some(InForeground {
            blocks: false,
            ask: true
        })
    );
    assert!(!blocks("u1", &dependent));
    // No longer a dependent of this owner.
    let other = owned("p3", vec![reference("ReplicaSet", "apps/v1", "web", "u2")]);
    assert_eq!(foreground_dependent("u1", &other), None);
    assert!(!blocks("u1", &other));
    // Two references to the owner: the cache's look reads the first, the fresh read any.
    let twice = owned(
        "p4",
        vec![free, reference("ReplicaSet", "apps/v1", "web", "u1")],
    );
    assert_eq!(
        foreground_dependent("u1", &twice).map(|d| d.blocks),
        Some(false)
    );
    assert!(blocks("u1", &twice));
}
