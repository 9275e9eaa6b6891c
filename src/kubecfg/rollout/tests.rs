//! Unit tests of the rollout verbs' pure parts: kubectl's status lines, history, the
//! rollback choice and patch, `describe deploy`, `create deployment`'s object.

use serde_json::{json, Value};

use super::*;
use crate::api::PodTemplateSpec;
use crate::kubecfg::create::{container_name_for, new_deployment};
use crate::kubecfg::deployments::split_replica_sets;
use crate::kubecfg::describe::describe_deployment;

fn deployment(value: Value) -> Deployment {
    let mut base = json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "d-uid", "generation": 2,
            "creationTimestamp": "2024-03-10T11:55:00Z",
            "annotations": {"deployment.kubernetes.io/revision": "2"}},
        "spec": {"replicas": 10, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:2"}]}}},
        "status": {"observedGeneration": 2}
    });
    merge(&mut base, value);
    serde_json::from_value(base).unwrap()
}

fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(base), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (base, patch) => *base = patch,
    }
}

/// A ReplicaSet of `web` at `revision` running `image`, `spec`/`status` replicas.
fn rs(hash: &str, revision: i64, image: &str, replicas: (i64, i64)) -> ReplicaSet {
    serde_json::from_value(json!({
        "metadata": {"name": format!("web-{hash}"), "namespace": "default",
            "creationTimestamp": format!("2024-03-10T11:5{revision}:00Z"),
            "annotations": {"deployment.kubernetes.io/revision": revision.to_string(),
                "kubernetes.io/change-cause": if revision == 1 { "first" } else { "" },
                "deployment.kubernetes.io/desired-replicas": "10"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                "uid": "d-uid", "controller": true}]},
        "spec": {"replicas": replicas.0, "selector": {"matchLabels": {"app": "web", "pod-template-hash": hash}},
            "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": hash}},
                "spec": {"containers": [{"name": "nginx", "image": image}]}}},
        "status": {"replicas": replicas.1}
    }))
    .unwrap()
}

#[track_caller]
fn check_status(status: Value, expected: Result<(&str, bool), &str>) {
    let d = deployment(json!({"status": status}));
    let got = rollout_status(&d, 0);
    let got = got
        .as_ref()
        .map(|(line, done)| (line.as_str(), *done))
        .map_err(String::as_str);
    assert_eq!(got, expected);
}

#[test]
fn rollout_status_follows_kubectls_order_of_checks() {
    check_status(
        json!({"observedGeneration": 1, "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}),
        Ok((
            "Waiting for deployment spec update to be observed...",
            false,
        )),
    );
    check_status(
        json!({"conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}],
            "updatedReplicas": 5, "replicas": 13}),
        Err(r#"deployment "web" exceeded its progress deadline"#),
    );
    check_status(
        json!({"updatedReplicas": 3, "replicas": 11}),
        Ok((
            r#"Waiting for deployment "web" rollout to finish: 3 out of 10 new replicas have been updated..."#,
            false,
        )),
    );
    check_status(
        json!({"updatedReplicas": 10, "replicas": 12}),
        Ok((
            r#"Waiting for deployment "web" rollout to finish: 2 old replicas are pending termination..."#,
            false,
        )),
    );
    check_status(
        json!({"updatedReplicas": 10, "replicas": 10, "availableReplicas": 8}),
        Ok((
            r#"Waiting for deployment "web" rollout to finish: 8 of 10 updated replicas are available..."#,
            false,
        )),
    );
    check_status(
        json!({"updatedReplicas": 10, "replicas": 10, "availableReplicas": 10,
            "conditions": [{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]}),
        Ok((r#"deployment "web" successfully rolled out"#, true)),
    );
    let d = deployment(json!({}));
    assert_eq!(
        rollout_status(&d, 3).unwrap_err(),
        "desired revision (3) is different from the running revision (2)"
    );
    assert!(rollout_status(&d, 2).is_ok());
}

#[test]
fn the_new_replica_set_is_the_oldest_with_the_template_ignoring_the_hash() {
    let d = deployment(json!({}));
    let owned = [
        rs("aaa", 1, "nginx:1", (0, 0)),
        rs("bbb", 2, "nginx:2", (10, 10)),
    ];
    let (old, new) = split_replica_sets(&d, &owned);
    assert_eq!(new.unwrap().metadata.name, "web-bbb");
    assert_eq!(old.len(), 1);
    assert_eq!(old[0].metadata.name, "web-aaa");
    let template = |rs: &ReplicaSet| rs.spec.template.clone().unwrap();
    let current = d.spec.template.clone().unwrap();
    assert!(api::equal_ignore_hash(&template(&owned[1]), &current));
    assert!(!api::equal_ignore_hash(&template(&owned[0]), &current));
}

/// The CLI used to compare templates as JSON, a missing one as `null`, and so disagreed
/// with the controller's `FindNewReplicaSet` about a deployment without a template: it
/// took a ReplicaSet without a template for the new one (the controller finds none), and
/// not one with the empty template (the controller's new one: a missing template is the
/// empty one). Both now decide with `api::equal_ignore_hash`, as the controller does.
#[test]
fn without_templates_the_new_replica_set_is_the_controllers() {
    let mut d = deployment(json!({}));
    d.spec.template = None;
    let mut bare = rs("aaa", 1, "nginx:1", (0, 0));
    bare.spec.template = None;
    let (old, new) = split_replica_sets(&d, std::slice::from_ref(&bare));
    assert!(
        new.is_none(),
        "a ReplicaSet without a template is never new"
    );
    assert_eq!(old.len(), 1);

    let mut empty = rs("bbb", 2, "nginx:2", (0, 0));
    empty.spec.template = Some(PodTemplateSpec::default());
    let owned = [bare, empty];
    let (old, new) = split_replica_sets(&d, &owned);
    assert_eq!(new.map(|rs| rs.metadata.name.as_str()), Some("web-bbb"));
    assert_eq!(old.len(), 1);
}

#[test]
fn undo_picks_the_previous_revision_or_the_one_asked_for() {
    let d = deployment(json!({}));
    let owned = [
        rs("aaa", 1, "nginx:1", (0, 0)),
        rs("ccc", 3, "nginx:3", (0, 0)),
        rs("bbb", 2, "nginx:2", (10, 10)),
    ];
    let pick = |n| revision_to_roll_back_to(&d, &owned, n).map(|rs| rs.metadata.name.clone());
    assert_eq!(pick(0).unwrap(), "web-bbb", "the second-highest revision");
    assert_eq!(pick(1).unwrap(), "web-aaa");
    assert_eq!(
        pick(7).unwrap_err().to_string(),
        "unable to find specified revision 7 in history"
    );
    assert_eq!(
        revision_to_roll_back_to(&d, &owned[..1], 0)
            .unwrap_err()
            .to_string(),
        r#"no rollout history found for deployment "web""#
    );
}

#[test]
fn undo_restores_the_template_without_the_hash_and_the_replica_sets_annotations() {
    let mut d = deployment(json!({"metadata": {"annotations": {"team": "a",
        "kubectl.kubernetes.io/last-applied-configuration": "{}"}}}));
    d.metadata
        .annotations
        .insert("deployment.kubernetes.io/revision".into(), "2".into());
    let old = rs("aaa", 1, "nginx:1", (0, 0));
    let back = rolled_back(d.clone(), &old).unwrap().expect("a change");
    let template = back.spec.template.as_ref().unwrap();
    assert_eq!(template.spec.containers[0].image, "nginx:1");
    assert_eq!(template.metadata.labels.get("pod-template-hash"), None);
    assert_eq!(template.metadata.labels.get("app"), Some("web"));
    let annotations = &back.metadata.annotations;
    // The deployment's own revision and last-applied stay; its other annotations give way
    // to the ReplicaSet's (minus the controller's bookkeeping).
    assert_eq!(annotations["deployment.kubernetes.io/revision"], "2");
    assert!(annotations.contains_key("kubectl.kubernetes.io/last-applied-configuration"));
    assert_eq!(annotations["kubernetes.io/change-cause"], "first");
    assert!(!annotations.contains_key("team"));
    assert!(!annotations.contains_key("deployment.kubernetes.io/desired-replicas"));

    let current = rs("bbb", 2, "nginx:2", (10, 10));
    assert!(
        rolled_back(d.clone(), &current).unwrap().is_none(),
        "already matches"
    );
    d.spec.paused = true;
    let err = rolled_back(d, &old).unwrap_err().to_string();
    assert!(
        err.starts_with("you cannot rollback a paused deployment"),
        "{err}"
    );
}

#[test]
fn history_lists_revisions_in_ascending_order_with_change_causes() {
    let d = deployment(json!({}));
    let owned = [
        rs("ccc", 3, "nginx:3", (0, 0)),
        rs("aaa", 1, "nginx:1", (0, 0)),
    ];
    assert_eq!(
        history_text(&d, &owned),
        "deployment.apps/web\n\
         REVISION  CHANGE-CAUSE\n\
         1         first\n\
         3         <none>\n"
    );
    assert_eq!(
        history_text(&d, &[]),
        "deployment.apps/web\nNo rollout history found.\n"
    );
}

#[test]
fn describe_shows_replicas_strategy_conditions_and_replica_sets() {
    let d = deployment(json!({
        "spec": {"strategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}},
        "status": {"replicas": 13, "updatedReplicas": 5, "availableReplicas": 8,
            "unavailableReplicas": 5,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                    "message": "ReplicaSet \"web-bbb\" has timed out progressing."}]}
    }));
    let owned = [
        rs("aaa", 1, "nginx:1", (8, 8)),
        rs("bbb", 2, "nginx:2", (5, 5)),
    ];
    let now = humantime::parse_rfc3339("2024-03-10T12:00:00Z").unwrap();
    let text = describe_deployment(&d, &owned, now);
    for expected in [
        "Name:                   web\n",
        "Replicas:               10 desired | 5 updated | 13 total | 8 available | 5 unavailable\n",
        "StrategyType:           RollingUpdate\n",
        "RollingUpdateStrategy:  2 max unavailable, 3 max surge\n",
        "  Type         Status  Reason\n  ----         ------  ------\n",
        "  Progressing  False   ProgressDeadlineExceeded\n",
        "OldReplicaSets:         web-aaa (8/8 replicas created)\n",
        "NewReplicaSet:          web-bbb (5/5 replicas created)\n",
        "  - Progressing False: ProgressDeadlineExceeded ReplicaSet \"web-bbb\" has timed out progressing.\n",
        "      Image:  nginx:2\n",
    ] {
        assert!(text.contains(expected), "{expected:?} missing from:\n{text}");
    }
    let unobserved = deployment(json!({"metadata": {"generation": 3}}));
    let text = describe_deployment(&unobserved, &[], now);
    assert!(text.contains("generation 3 not yet observed"), "{text}");
    assert!(text.contains("NewReplicaSet:          <none>"), "{text}");
}

#[test]
fn create_deployment_builds_a_valid_defaulted_object() {
    assert_eq!(container_name_for("nginx:1.25"), "nginx");
    assert_eq!(
        container_name_for("registry:5000/team/my_app@sha256:ab"),
        "my-app"
    );
    assert_eq!(container_name_for(":"), "container");
    let d = new_deployment("prod", "web", "nginx:1.25", 3);
    api::validate(&d).unwrap();
    assert_eq!(d.replicas(), 3);
    assert_eq!(d.metadata.namespace, "prod");
    assert_eq!(d.spec.revision_history_limit, Some(10));
    assert_eq!(d.max_surge(), 1);
    let template = d.spec.template.as_ref().unwrap();
    assert_eq!(template.metadata.labels.get("app"), Some("web"));
    assert_eq!(template.spec.containers[0].name, "nginx");
}
