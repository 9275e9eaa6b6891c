//! Tables and worked examples of the Deployment sync's pure core. The simulated
//! ReplicaSet controller ([`World::settle`]) settles every ReplicaSet at once: its pods
//! match its spec, and the template's image decides whether they become available.

use std::sync::Arc;

use serde_json::json;

use super::{
    claim, controller_ref, counted_available, epoch_seconds, get_proportion, new_condition,
    new_rs_new_replicas, occupancy, plan, reconcile_old_replica_sets, rfc3339, set_condition,
    set_new_replica_set_annotations, Plan, Rollout,
};
use crate::api::{
    self, Deployment, PodPhase, PodTemplateSpec, ReplicaSet, ReplicaSetSpec, ReplicaSetStatus,
    DEPLOYMENT_PROGRESSING,
};
use crate::informer::CachedPod;

const NOW: i64 = 1_800_000_000;

fn template(image: &str) -> PodTemplateSpec {
    serde_json::from_value(json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": image}]}
    }))
    .unwrap()
}

fn deployment(replicas: i64, strategy: serde_json::Value, image: &str) -> Deployment {
    let mut d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "d-uid", "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": strategy,
        }
    }))
    .unwrap();
    d.spec.template = Some(template(image));
    d
}

fn rolling(surge: serde_json::Value, unavailable: serde_json::Value) -> serde_json::Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}})
}

fn image_of(rs: &ReplicaSet) -> &str {
    &rs.spec.template.as_ref().unwrap().spec.containers[0].image
}

/// A deployment's world: it, its ReplicaSets, and a clock; failing images contain "fail".
struct World {
    d: Deployment,
    rss: Vec<ReplicaSet>,
    clock: i64,
    next_uid: usize,
}

impl World {
    fn new(d: Deployment) -> World {
        World {
            d,
            rss: Vec::new(),
            clock: NOW,
            next_uid: 0,
        }
    }

    /// Plans one sync, applies its writes, returns the plan.
    fn sync(&mut self) -> Plan {
        self.clock += 1;
        let plan = plan(&self.d, self.rss.clone(), &[], self.clock);
        if let Some(mut rs) = plan.create.clone() {
            assert!(
                !self.rss.iter().any(|o| o.metadata.name == rs.metadata.name),
                "{} created twice",
                rs.metadata.name
            );
            self.next_uid += 1;
            rs.metadata.uid = format!("rs-{}", self.next_uid);
            rs.metadata.generation = 1;
            rs.metadata.creation_timestamp = Some(rfc3339(self.clock));
            self.rss.push(rs);
        }
        for rs in &plan.updates {
            let stored = self
                .rss
                .iter_mut()
                .find(|o| o.metadata.name == rs.metadata.name)
                .unwrap();
            let generation = stored.metadata.generation + i64::from(stored.spec != rs.spec);
            *stored = rs.clone();
            stored.metadata.generation = generation;
        }
        for rs in &plan.deletes {
            self.rss.retain(|o| o.metadata.name != rs.metadata.name);
        }
        if let Some(d) = &plan.deployment {
            self.d.status = d.status.clone();
            self.d.metadata.annotations = d.metadata.annotations.clone();
        }
        plan
    }

    /// The ReplicaSet controller catches up with every ReplicaSet.
    fn settle(&mut self) {
        for rs in &mut self.rss {
            let replicas = rs.replicas();
            let available = if image_of(rs).contains("fail") {
                0
            } else {
                replicas
            };
            rs.status = ReplicaSetStatus {
                replicas,
                ready_replicas: available,
                available_replicas: available,
                observed_generation: rs.metadata.generation,
                ..ReplicaSetStatus::default()
            };
        }
    }

    /// Syncs and settles until a sync writes nothing, checking after every write
    /// the bounds kcm keeps: occupancy ≤ replicas + surge, counted availability ≥
    /// replicas − unavailable (once reached).
    fn run(&mut self, max_pods: i64, min_available: i64) {
        for _ in 0..100 {
            let plan = self.sync();
            let occupied: i64 = self.rss.iter().map(occupancy).sum();
            assert!(
                occupied <= max_pods,
                "{occupied} > {max_pods}: {:?}",
                self.sizes()
            );
            self.settle();
            let available: i64 = self.rss.iter().map(counted_available).sum();
            assert!(
                available >= min_available,
                "{available} < {min_available}: {:?}",
                self.sizes()
            );
            if plan.create.is_none()
                && plan.updates.is_empty()
                && plan.deletes.is_empty()
                && plan.deployment.is_none()
            {
                return;
            }
        }
        panic!("no fixpoint: {:?}", self.sizes());
    }

    /// `(image, spec.replicas)` of each ReplicaSet, oldest first.
    fn sizes(&self) -> Vec<(String, i64)> {
        self.rss
            .iter()
            .map(|rs| (image_of(rs).to_string(), rs.replicas()))
            .collect()
    }

    #[track_caller]
    fn check_sizes(&self, expected: &[(&str, i64)]) {
        let expected: Vec<(String, i64)> = expected
            .iter()
            .map(|(image, size)| (image.to_string(), *size))
            .collect();
        assert_eq!(self.sizes(), expected);
    }

    fn set_image(&mut self, image: &str) {
        self.d.spec.template = Some(template(image));
        self.d.metadata.generation += 1;
    }
}

fn world_at(replicas: i64, strategy: serde_json::Value, image: &str) -> World {
    let mut world = World::new(deployment(replicas, strategy, image));
    world.run(i64::MAX, 0);
    world
}

#[test]
fn a_new_deployment_creates_its_replica_set_named_by_the_template_hash() {
    let d = deployment(3, json!(null), "nginx");
    let plan = plan(&d, Vec::new(), &[], NOW);
    let rs = plan.create.expect("a new replica set");
    let hash = api::template_hash(&template("nginx"), None);
    assert_eq!(rs.metadata.name, format!("web-{hash}"));
    assert_eq!(
        rs.metadata.labels.get("pod-template-hash"),
        Some(hash.as_str())
    );
    assert_eq!(rs.metadata.labels.get("app"), Some("web"));
    let selector = rs.spec.selector.as_ref().unwrap();
    assert_eq!(
        selector.match_labels.get("pod-template-hash"),
        Some(hash.as_str())
    );
    let t = rs.spec.template.as_ref().unwrap();
    assert_eq!(
        t.metadata.labels.get("pod-template-hash"),
        Some(hash.as_str())
    );
    assert_eq!(rs.metadata.owner_references, vec![controller_ref(&d)]);
    assert_eq!(rs.metadata.owner_references[0].kind, "Deployment");
    assert_eq!(
        rs.metadata.owner_references[0].block_owner_deletion,
        Some(true)
    );
    let annotations = &rs.metadata.annotations;
    assert_eq!(annotations[api::REVISION_ANNOTATION], "1");
    assert_eq!(annotations[api::DESIRED_REPLICAS_ANNOTATION], "3");
    // 25% of 3 rounds up to a surge of 1.
    assert_eq!(annotations[api::MAX_REPLICAS_ANNOTATION], "4");
    assert_eq!(rs.spec.replicas, Some(3));
    let written = plan.deployment.expect("status");
    assert_eq!(written.metadata.annotations[api::REVISION_ANNOTATION], "1");
    let progressing = written.condition(DEPLOYMENT_PROGRESSING).unwrap();
    assert_eq!(progressing.reason, api::NEW_REPLICA_SET_REASON);
    assert_eq!(
        progressing.message,
        format!("Created new replica set \"web-{hash}\"")
    );
    // A collision count changes the name.
    let mut collided = d.clone();
    collided.status.collision_count = Some(1);
    let other = super::plan(&collided, Vec::new(), &[], NOW).create.unwrap();
    assert_ne!(other.metadata.name, format!("web-{hash}"));
}

#[test]
fn a_completed_rollout_reports_available_and_new_replica_set_available() {
    let world = world_at(3, json!(null), "nginx");
    let status = &world.d.status;
    assert_eq!(
        (
            status.replicas,
            status.updated_replicas,
            status.available_replicas
        ),
        (3, 3, 3)
    );
    assert_eq!(status.observed_generation, 1);
    let available = world.d.condition(api::DEPLOYMENT_AVAILABLE).unwrap();
    assert_eq!(
        (available.status.as_str(), available.reason.as_str()),
        ("True", api::MINIMUM_REPLICAS_AVAILABLE)
    );
    let progressing = world.d.condition(DEPLOYMENT_PROGRESSING).unwrap();
    assert_eq!(progressing.reason, api::NEW_RS_AVAILABLE_REASON);
    assert_eq!(
        progressing.message,
        format!(
            "ReplicaSet {:?} has successfully progressed.",
            world.rss[0].metadata.name
        )
    );
}

#[test]
fn a_rolling_update_of_ten_at_25_percent_stays_within_13_pods_and_8_available() {
    let mut world = world_at(10, json!(null), "v1");
    world.set_image("v2");
    world.run(13, 8);
    world.check_sizes(&[("v1", 0), ("v2", 10)]);
    assert_eq!(world.d.status.updated_replicas, 10);
    assert_eq!(world.d.metadata.annotations[api::REVISION_ANNOTATION], "2");
    assert_eq!(
        world.rss[1].metadata.annotations[api::REVISION_ANNOTATION],
        "2"
    );
}

/// The canonical worked example (the comment in `reconcileOldReplicaSets`): a failing
/// image stops at old 8 / new 5 with 10 replicas at 25%/25% (surge 3, unavailable 2).
#[test]
fn a_failing_image_stops_at_old_8_new_5() {
    let mut world = world_at(10, json!(null), "v1");
    world.set_image("v2-fail");
    world.run(13, 8);
    world.check_sizes(&[("v1", 8), ("v2-fail", 5)]);
    // The same with maxSurge 3 / maxUnavailable 2 given as counts.
    let mut world = world_at(10, rolling(json!(3), json!(2)), "v1");
    world.set_image("v2-fail");
    world.run(13, 8);
    world.check_sizes(&[("v1", 8), ("v2-fail", 5)]);

    // Putting the old template back: the failing replicas go first, and the old
    // ReplicaSet becomes the new one with revision 3 (history "1").
    world.set_image("v1");
    world.run(13, 8);
    world.check_sizes(&[("v1", 10), ("v2-fail", 0)]);
    let old = &world.rss[0].metadata.annotations;
    assert_eq!(old[api::REVISION_ANNOTATION], "3");
    assert_eq!(old[api::REVISION_HISTORY_ANNOTATION], "1");
}

#[test]
fn the_failing_rollout_times_out_once_the_deadline_passes_and_requeues_until_then() {
    let mut d = deployment(10, json!(null), "v1");
    d.spec.progress_deadline_seconds = Some(5);
    let mut world = World::new(d);
    world.run(i64::MAX, 0);
    world.set_image("v2-fail");
    world.run(13, 8);
    let progressing = world.d.condition(DEPLOYMENT_PROGRESSING).unwrap().clone();
    assert_eq!(progressing.reason, api::REPLICA_SET_UPDATED_REASON);
    // No progress: a sync now asks to come back one second after the deadline.
    let last = epoch_seconds(progressing.last_update_time.as_deref().unwrap()).unwrap();
    let now = world.clock + 1;
    let plan = super::plan(&world.d, world.rss.clone(), &[], now);
    assert_eq!(plan.requeue_after, Some((last + 5 + 1 - now).max(1) as u64));
    assert!(plan.deployment.is_none());
    // After the deadline: False ProgressDeadlineExceeded.
    let plan = super::plan(&world.d, world.rss.clone(), &[], last + 6);
    let written = plan.deployment.unwrap();
    let condition = written.condition(DEPLOYMENT_PROGRESSING).unwrap();
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", api::TIMED_OUT_REASON)
    );
    assert!(
        condition.message.ends_with("has timed out progressing."),
        "{}",
        condition.message
    );
    assert_eq!(plan.requeue_after, None);
}

/// kubernetes #49637: a completed rollout never times out, however old its condition.
#[test]
fn a_completed_rollout_never_times_out() {
    let mut d = deployment(2, json!(null), "v1");
    d.spec.progress_deadline_seconds = Some(5);
    let mut world = World::new(d);
    world.run(i64::MAX, 0);
    let plan = super::plan(&world.d, world.rss.clone(), &[], world.clock + 10_000);
    assert!(plan.deployment.is_none(), "{:?}", plan.deployment);
    assert_eq!(plan.requeue_after, None);
}

/// A ReplicaSet `name` of `image` at `size`, generation `generation`, whose status says
/// `(replicas, available, observedGeneration)`.
fn replica_set(
    name: &str,
    image: &str,
    size: i64,
    generation: i64,
    (replicas, available, observed): (i64, i64, i64),
) -> ReplicaSet {
    let mut rs = ReplicaSet {
        spec: ReplicaSetSpec {
            replicas: Some(size),
            template: Some(template(image)),
            ..ReplicaSetSpec::default()
        },
        status: ReplicaSetStatus {
            replicas,
            available_replicas: available,
            observed_generation: observed,
            ..ReplicaSetStatus::default()
        },
        ..ReplicaSet::default()
    };
    rs.metadata.name = name.into();
    rs.metadata.generation = generation;
    rs.metadata.creation_timestamp = Some(rfc3339(NOW + i64::from(image == "v2")));
    rs
}

#[test]
fn the_new_replica_set_does_not_grow_while_any_replica_set_is_unsettled() {
    let d = deployment(10, json!(null), "v2");
    let new = replica_set("new", "v2", 3, 1, (3, 0, 1));
    // The old ReplicaSet was scaled to 8 but still has 10 pods: Kubernetes (Σ spec 11)
    // would add 2; kcm adds none.
    let old = replica_set("old", "v1", 8, 2, (10, 10, 2));
    assert_eq!(new_rs_new_replicas(&d, &[old, new.clone()], 1), 3);
    // Settled at 8: 13 - 11 = 2 more.
    let old = replica_set("old", "v1", 8, 2, (8, 8, 2));
    assert_eq!(new_rs_new_replicas(&d, &[old, new.clone()], 1), 5);
    // Its new size not observed yet: none.
    let old = replica_set("old", "v1", 8, 3, (8, 8, 2));
    assert_eq!(new_rs_new_replicas(&d, &[old, new], 1), 3);
}

/// An old ReplicaSet that reports more available pods than its (already lowered) spec
/// counts only up to its spec: kcm's availability rule.
#[test]
fn availability_counts_at_most_the_spec() {
    let d = deployment(10, json!(null), "v2");
    let old = replica_set("old", "v1", 8, 2, (10, 10, 1));
    let new = replica_set("new", "v2", 3, 1, (3, 0, 1));
    let mut r = Rollout::new(&d, vec![old, new], NOW);
    r.find_new();
    // Kubernetes would count 10 available and scale the old one down by 2 more.
    assert!(!reconcile_old_replica_sets(&mut r));
    assert_eq!(r.rss[0].replicas(), 8);
}

/// The documented example: 10 replicas, maxSurge 3, stuck at old 8 / new 5, scaled to 15
/// → old 11 / new 7.
#[test]
fn scaling_mid_rollout_is_proportional() {
    let mut world = world_at(10, rolling(json!(3), json!(2)), "v1");
    world.set_image("v2-fail");
    world.run(13, 8);
    world.check_sizes(&[("v1", 8), ("v2-fail", 5)]);
    world.d.spec.replicas = Some(15);
    world.d.metadata.generation += 1;
    let plan = world.sync();
    world.check_sizes(&[("v1", 11), ("v2-fail", 7)]);
    for rs in &plan.updates {
        assert_eq!(
            rs.metadata.annotations[api::DESIRED_REPLICAS_ANNOTATION],
            "15"
        );
        assert_eq!(rs.metadata.annotations[api::MAX_REPLICAS_ANNOTATION], "18");
    }
    // And back down to 10: 8 / 5 again (older first when removing).
    world.settle();
    world.d.spec.replicas = Some(10);
    world.d.metadata.generation += 1;
    world.sync();
    world.check_sizes(&[("v1", 8), ("v2-fail", 5)]);
}

#[test]
fn get_proportion_table() {
    let d = deployment(15, rolling(json!(3), json!(2)), "v1");
    let rs = |size: i64, max: &str| {
        let mut rs = ReplicaSet::default();
        rs.spec.replicas = Some(size);
        rs.metadata
            .annotations
            .insert(api::MAX_REPLICAS_ANNOTATION.into(), max.into());
        rs
    };
    // (rs size, its max-replicas, to add, added so far, expected)
    let table = [
        (8, "13", 5, 0, 3),
        (5, "13", 5, 3, 2),
        (5, "13", 5, 5, 0),
        (0, "13", 5, 0, 0),
        (8, "13", 1, 0, 1),
        (11, "18", -5, 0, -3),
        (7, "18", -5, -3, -2),
    ];
    for (size, max, to_add, added, expected) in table {
        let d = if to_add < 0 {
            deployment(10, rolling(json!(3), json!(2)), "v1")
        } else {
            d.clone()
        };
        assert_eq!(
            get_proportion(&rs(size, max), &d, to_add, added),
            expected,
            "{size} of {max}, {to_add} ({added} added)"
        );
    }
}

#[test]
fn recreate_scales_old_to_zero_waits_for_their_pods_then_creates_the_new() {
    let mut world = world_at(3, json!({"type": "Recreate"}), "v1");
    world.set_image("v2");
    let plan = world.sync();
    assert!(
        plan.create.is_none(),
        "no new replica set before the old pods are gone"
    );
    world.check_sizes(&[("v1", 0)]);
    // The old ReplicaSet has not deleted its pods yet: still nothing.
    let plan = world.sync();
    assert!(plan.create.is_none());
    // An old pod still running (the ReplicaSet reports none): still nothing.
    world.settle();
    let pod = Arc::new(CachedPod {
        phase: PodPhase::Running,
        controller: Some(std::sync::Arc::new(crate::informer::ControllerRef {
            kind: "ReplicaSet".into(),
            name: world.rss[0].metadata.name.as_str().into(),
            uid: world.rss[0].metadata.uid.as_str().into(),
        })),
        ..test_pod()
    });
    let p = plan_with_pods(&world, std::slice::from_ref(&pod));
    assert!(p.create.is_none());
    // A Failed one does not block.
    let failed = Arc::new(CachedPod {
        phase: PodPhase::Failed,
        ..(*pod).clone()
    });
    let p = plan_with_pods(&world, &[failed]);
    assert_eq!(p.create.unwrap().spec.replicas, Some(3));
    world.run(3, 0);
    world.check_sizes(&[("v1", 0), ("v2", 3)]);
}

fn plan_with_pods(world: &World, pods: &[Arc<CachedPod>]) -> Plan {
    plan(&world.d, world.rss.clone(), pods, world.clock + 1)
}

fn test_pod() -> CachedPod {
    let pod = api::Pod::default();
    CachedPod::from(&pod)
}

#[test]
fn a_paused_deployment_rolls_nothing_out_but_scales() {
    let mut world = world_at(3, json!(null), "v1");
    world.d.spec.paused = true;
    world.set_image("v2");
    let plan = world.sync();
    assert!(plan.create.is_none());
    let progressing = world.d.condition(DEPLOYMENT_PROGRESSING).unwrap();
    assert_eq!(
        (progressing.status.as_str(), progressing.reason.as_str()),
        ("Unknown", api::PAUSED_DEPLOY_REASON)
    );
    assert_eq!(world.d.status.updated_replicas, 0);
    world.d.spec.replicas = Some(5);
    world.run(i64::MAX, 0);
    world.check_sizes(&[("v1", 5)]);
    // Resumed: DeploymentResumed, then the rollout.
    world.d.spec.paused = false;
    world.sync();
    assert_eq!(world.rss.len(), 2);
    world.settle();
    world.run(7, 4);
    world.check_sizes(&[("v1", 0), ("v2", 5)]);
}

#[test]
fn the_revision_history_limit_keeps_the_newest_old_replica_sets() {
    let mut d = deployment(1, json!(null), "v0");
    d.spec.revision_history_limit = Some(2);
    let mut world = World::new(d);
    world.run(i64::MAX, 0);
    for image in ["v1", "v2", "v3", "v4"] {
        world.set_image(image);
        world.run(i64::MAX, 0);
    }
    let images: Vec<String> = world.sizes().into_iter().map(|(image, _)| image).collect();
    assert_eq!(images, ["v2", "v3", "v4"]);
}

#[test]
fn a_deleting_deployment_gets_status_only() {
    let mut world = world_at(3, json!(null), "v1");
    world.d.metadata.deletion_timestamp = Some(rfc3339(NOW));
    world.set_image("v2");
    world.d.spec.replicas = Some(5);
    let plan = world.sync();
    assert!(plan.create.is_none() && plan.updates.is_empty() && plan.deletes.is_empty());
    assert_eq!(
        world.d.status.observed_generation,
        world.d.metadata.generation
    );
}

#[test]
fn claims_adopt_matching_orphans_release_owned_that_stop_matching_and_ignore_others() {
    let d = deployment(1, json!(null), "v1");
    let selector = d.spec.selector.as_ref().unwrap().to_selector().unwrap();
    let rs = |name: &str, app: &str, owner: Option<&str>| {
        let mut rs = ReplicaSet::default();
        rs.metadata.name = name.into();
        rs.metadata.labels.insert("app", app);
        if let Some(uid) = owner {
            let mut reference = controller_ref(&d);
            reference.uid = uid.into();
            rs.metadata.owner_references.push(reference);
        }
        Arc::new(rs)
    };
    let candidates = vec![
        rs("owned", "web", Some("d-uid")),
        rs("strayed", "db", Some("d-uid")),
        rs("orphan", "web", None),
        rs("other-orphan", "db", None),
        rs("namesake", "web", Some("another-uid")),
    ];
    let names = |v: &[Arc<ReplicaSet>]| {
        v.iter()
            .map(|r| r.metadata.name.clone())
            .collect::<Vec<_>>()
    };
    let claims = claim(&d, &selector, &candidates);
    assert_eq!(names(&claims.owned), ["owned"]);
    assert_eq!(names(&claims.adopt), ["orphan"]);
    assert_eq!(names(&claims.release), ["strayed"]);
    // A deleting deployment neither adopts nor releases.
    let mut deleting = d.clone();
    deleting.metadata.deletion_timestamp = Some(rfc3339(NOW));
    let claims = claim(&deleting, &selector, &candidates);
    assert_eq!(names(&claims.owned), ["owned"]);
    assert!(claims.adopt.is_empty() && claims.release.is_empty());
    // A deleting orphan is not adopted.
    let mut gone = (*rs("orphan", "web", None)).clone();
    gone.metadata.deletion_timestamp = Some(rfc3339(NOW));
    assert!(claim(&d, &selector, &[Arc::new(gone)]).adopt.is_empty());
}

#[test]
fn revision_history_is_capped_at_2000_characters() {
    let d = deployment(1, json!(null), "v1");
    let mut rs = ReplicaSet::default();
    rs.metadata
        .annotations
        .insert(api::REVISION_ANNOTATION.into(), "5".into());
    let long: Vec<String> = (0..600).map(|n| n.to_string()).collect();
    rs.metadata
        .annotations
        .insert(api::REVISION_HISTORY_ANNOTATION.into(), long.join(","));
    assert!(set_new_replica_set_annotations(&d, &mut rs, 9, true));
    let history = &rs.metadata.annotations[api::REVISION_HISTORY_ANNOTATION];
    assert!(history.len() <= 2000, "{}", history.len());
    assert!(history.ends_with(",599,5"), "{history}");
    assert_eq!(rs.metadata.annotations[api::REVISION_ANNOTATION], "9");
    // A lower revision never lowers it.
    assert!(!set_new_replica_set_annotations(&d, &mut rs, 3, true));
}

/// `checkPausedConditions`: pausing writes Progressing Unknown `DeploymentPaused`,
/// resuming `DeploymentResumed`; a `ProgressDeadlineExceeded` is never overwritten.
#[test]
fn pause_and_resume_conditions_never_overwrite_a_timeout() {
    let mut d = deployment(2, json!(null), "v1");
    d.spec.paused = true;
    let mut r = Rollout::new(&d, Vec::new(), NOW);
    r.check_paused_conditions();
    let paused = r.d.condition(DEPLOYMENT_PROGRESSING).unwrap().clone();
    assert_eq!(
        (
            paused.status.as_str(),
            paused.reason.as_str(),
            paused.message.as_str()
        ),
        ("Unknown", api::PAUSED_DEPLOY_REASON, "Deployment is paused")
    );
    let mut resumed = r.d.clone();
    resumed.spec.paused = false;
    let mut r = Rollout::new(&resumed, Vec::new(), NOW + 5);
    r.check_paused_conditions();
    let condition = r.d.condition(DEPLOYMENT_PROGRESSING).unwrap();
    assert_eq!(
        (condition.reason.as_str(), condition.message.as_str()),
        (api::RESUMED_DEPLOY_REASON, "Deployment is resumed")
    );
    // The deadline restarts from the resume.
    assert_eq!(condition.last_update_time, Some(rfc3339(NOW + 5)));

    let mut timed_out = d.clone();
    set_condition(
        &mut timed_out.status,
        new_condition(
            DEPLOYMENT_PROGRESSING,
            "False",
            api::TIMED_OUT_REASON,
            "x".into(),
            NOW,
        ),
    );
    let mut r = Rollout::new(&timed_out, Vec::new(), NOW + 5);
    r.check_paused_conditions();
    assert_eq!(
        r.d.condition(DEPLOYMENT_PROGRESSING).unwrap().reason,
        api::TIMED_OUT_REASON
    );
}

/// `getNewReplicaSet` on an existing new ReplicaSet: the deployment's annotations (but the
/// skipped ones) and `minReadySeconds` are copied to it, and its revision to the
/// deployment.
#[test]
fn the_new_replica_set_gets_the_deployments_annotations_and_min_ready_seconds() {
    let mut world = world_at(2, json!(null), "v1");
    world.d.spec.min_ready_seconds = 5;
    world
        .d
        .metadata
        .annotations
        .insert(api::CHANGE_CAUSE_ANNOTATION.into(), "kcm set image".into());
    world
        .d
        .metadata
        .annotations
        .insert(api::LAST_APPLIED_CONFIG_ANNOTATION.into(), "{}".into());
    let plan = world.sync();
    assert_eq!(plan.updates.len(), 1, "{plan:?}");
    let rs = &plan.updates[0];
    assert_eq!(rs.spec.min_ready_seconds, 5);
    assert_eq!(
        rs.metadata.annotations[api::CHANGE_CAUSE_ANNOTATION],
        "kcm set image"
    );
    assert!(!rs
        .metadata
        .annotations
        .contains_key(api::LAST_APPLIED_CONFIG_ANNOTATION));
    assert_eq!(world.d.metadata.annotations[api::REVISION_ANNOTATION], "1");
}
