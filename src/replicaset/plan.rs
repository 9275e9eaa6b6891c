//! The pure core of a ReplicaSet sync: which pods it owns, adopts and releases
//! (`ClaimPods`), what `manageReplicas` creates or deletes, and `calculateStatus`. No IO.
//!
//! Invariant (the decision): as in the replication manager, the count of active owned pods
//! and the free slot names come from one view, and at most `spec.replicas` minus that
//! count are created; adoptions a sync makes are counted as owned before they commit, so a
//! failed adoption can only make the sync create fewer pods, never more.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::api::{
    OwnerReference, Pod, ReplicaSet, ReplicaSetCondition, ReplicaSetStatus, REPLICA_FAILURE,
};
use crate::controller::{free_slots, phase_rank, pod_from_template, rank_for_deletion};
use crate::informer::{CachedPod, Namespace};
use crate::labels::{Selector, Set};

/// The `apiVersion` a ReplicaSet's controller reference names.
pub const API_VERSION: &str = "apps/v1";
/// The `kind` a ReplicaSet's controller reference names.
pub const KIND: &str = "ReplicaSet";

/// Whether `pod`'s controller reference names `rs` by kind, name and uid. A reference to a
/// deleted namesake (same name, another uid) does not.
pub fn owns(rs: &ReplicaSet, pod: &CachedPod) -> bool {
    pod.controller.as_deref().is_some_and(|r| {
        &*r.kind == KIND && *r.name == rs.metadata.name && *r.uid == rs.metadata.uid
    })
}

/// The controller reference a ReplicaSet writes into the pods it creates or adopts.
pub fn controller_ref(rs: &ReplicaSet) -> OwnerReference {
    OwnerReference {
        api_version: API_VERSION.to_string(),
        kind: KIND.to_string(),
        name: rs.metadata.name.clone(),
        uid: rs.metadata.uid.clone(),
        controller: Some(true),
        block_owner_deletion: Some(true),
        ..OwnerReference::default()
    }
}

/// Whether a pod counts towards replicas: active (not Succeeded or Failed) and not being
/// deleted (`controller.FilterActivePods`).
pub fn is_active(pod: &CachedPod) -> bool {
    pod.is_active() && !pod.deleting
}

/// Whether a pod counts as ready: `Pod::is_ready` as the pod cache holds it (the Ready
/// condition is True; a pod without one counts once Running).
pub fn is_ready(pod: &CachedPod) -> bool {
    pod.ready
}

/// Sorts active pods so that the ones to delete first come first, in Kubernetes'
/// `ActivePodsWithRanks` order as far as the pod cache knows it: the replication
/// manager's order (unassigned before assigned; Pending before Unknown before Running;
/// newer before older; then by name) with readiness inserted after the phase: not ready
/// before ready, ready for less time before ready for longer, more restarts before fewer.
pub fn rank_with_readiness(pods: &mut [Arc<CachedPod>]) {
    rank_for_deletion(pods);
    // A stable sort on the readiness keys keeps the replication manager's order inside
    // each group; `phase` and `assigned` come first again so they still dominate.
    pods.sort_by(|a, b| {
        a.assigned()
            .cmp(&b.assigned())
            .then(phase_rank(a.phase).cmp(&phase_rank(b.phase)))
            .then(a.ready.cmp(&b.ready))
            // Ready more recently (a larger `ready_since`) goes first.
            .then(b.ready_since.cmp(&a.ready_since))
            // More restarts first.
            .then(b.restarts.cmp(&a.restarts))
    });
}

/// `podutil.IsPodAvailable` over `pods` at `now_secs` (seconds since the Unix epoch): how
/// many are available (ready for at least `min_ready_seconds`, one-second granularity, from
/// the Ready condition's `lastTransitionTime`), and, when some ready pods are not available
/// yet, in how many seconds the first of them will be, so the caller can sync again then
/// without waiting for any other event. With `min_ready_seconds` 0 every ready pod is
/// available; a ready pod without a transition time (a 2014 document) counts at once.
pub fn availability(
    pods: &[Arc<CachedPod>],
    min_ready_seconds: i64,
    now_secs: i64,
) -> (usize, Option<u64>) {
    let mut available = 0;
    let mut next: Option<u64> = None;
    for pod in pods.iter().filter(|pod| is_ready(pod)) {
        let since = match pod.ready_since {
            Some(since) if min_ready_seconds > 0 => i64::from(since.get()),
            _ => {
                available += 1;
                continue;
            }
        };
        let at = since.saturating_add(min_ready_seconds);
        if at <= now_secs {
            available += 1;
        } else {
            let wait = u64::try_from(at - now_secs).unwrap_or(u64::MAX);
            next = Some(next.map_or(wait, |n| n.min(wait)));
        }
    }
    (available, next)
}

/// What `ClaimPods` decided over one view: the pods the ReplicaSet owns and keeps, the
/// orphans it adopts and the owned pods it releases.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Claims {
    pub owned: Vec<Arc<CachedPod>>,
    pub adopt: Vec<Arc<CachedPod>>,
    pub release: Vec<Arc<CachedPod>>,
    /// Pods whose controller reference names a namesake: a ReplicaSet of this name with
    /// another uid (one deleted and recreated). A cache that shows some may not yet show
    /// the orphaning that removed those references.
    pub namesakes: usize,
}

/// `ClaimPods` (the `PodControllerRefManager`): of the namespace's pods, those `rs` owns
/// and `selector` still matches are kept; those it owns that no longer match are
/// released; orphans that match are adopted, unless being deleted or selected by a
/// ReplicationController (`rc_selects`, kcm's coexistence rule). A ReplicaSet being
/// deleted neither adopts nor releases. Pods owned by anything else are invisible.
pub fn claim(
    rs: &ReplicaSet,
    selector: &Selector,
    pods: Option<&Namespace<CachedPod>>,
    rc_selects: impl Fn(&Set) -> bool,
) -> Claims {
    let deleting = rs.metadata.deletion_timestamp.is_some();
    let mut claims = Claims::default();
    for pod in pods.into_iter().flat_map(Namespace::items) {
        let matches = selector.matches(&pod.labels);
        if owns(rs, pod) {
            if matches || deleting {
                claims.owned.push(pod.clone());
            } else {
                claims.release.push(pod.clone());
            }
        } else if pod.controller.is_none()
            && matches
            && !deleting
            && !pod.deleting
            && !rc_selects(&pod.labels)
        {
            claims.adopt.push(pod.clone());
        } else if pod
            .controller
            .as_deref()
            .is_some_and(|r| &*r.kind == KIND && *r.name == rs.metadata.name)
        {
            claims.namesakes += 1;
        }
    }
    // A stable order for the writes and the tests.
    for list in [&mut claims.owned, &mut claims.adopt, &mut claims.release] {
        list.sort_by(|a, b| a.name.cmp(&b.name));
    }
    claims
}

/// What one sync will do.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Decision {
    pub claims: Claims,
    /// Active pods the ReplicaSet owns once its adoptions and releases commit.
    pub active: Vec<Arc<CachedPod>>,
    /// Replica slots to create, by name, in slot order; at most the decision's limit.
    pub creates: Vec<String>,
    /// Pods to delete, lowest rank first, each guarded by its resourceVersion.
    pub deletes: Vec<Arc<CachedPod>>,
}

impl Decision {
    /// Whether the decision writes pods (a status write alone does not count).
    pub fn writes_pods(&self) -> bool {
        !self.creates.is_empty()
            || !self.deletes.is_empty()
            || !self.claims.adopt.is_empty()
            || !self.claims.release.is_empty()
    }
}

/// `syncReplicaSet`'s decision over one view of the namespace: claim, then
/// `manageReplicas` (too few: the first free slot names; too many: the lowest ranked,
/// `ActivePodsWithRanks` without readiness for now). A ReplicaSet being deleted only
/// counts. A sync that adopts or releases deletes nothing: the adoption itself changes the
/// pods' resourceVersions, and the next sync (their events queue it) ranks them anew.
pub fn decide(
    rs: &ReplicaSet,
    selector: &Selector,
    pods: Option<&Namespace<CachedPod>>,
    limit: usize,
    rc_selects: impl Fn(&Set) -> bool,
) -> Decision {
    let claims = claim(rs, selector, pods, rc_selects);
    let active: Vec<_> = claims
        .owned
        .iter()
        .chain(&claims.adopt)
        .filter(|pod| is_active(pod))
        .cloned()
        .collect();
    let mut decision = Decision {
        claims,
        active,
        ..Decision::default()
    };
    if rs.metadata.deletion_timestamp.is_some() {
        return decision;
    }
    let replicas = usize::try_from(rs.replicas()).unwrap_or(0);
    let have = decision.active.len();
    match have.cmp(&replicas) {
        Ordering::Less => {
            let need = (replicas - have).min(limit);
            let is_taken = |name: &str| pods.is_some_and(|ns| ns.is_taken(name));
            decision.creates = free_slots(&rs.metadata.name, &rs.metadata.uid, is_taken, need);
        }
        Ordering::Greater
            if decision.claims.adopt.is_empty() && decision.claims.release.is_empty() =>
        {
            let mut ranked = decision.active.clone();
            rank_with_readiness(&mut ranked);
            ranked.truncate((have - replicas).min(limit));
            decision.deletes = ranked;
        }
        _ => {}
    }
    decision
}

/// A new pod for `rs` from its template, owned by its controller reference.
pub fn new_pod(rs: &ReplicaSet, name: String) -> Pod {
    let mut pod = pod_from_template(rs.spec.template.as_ref(), &rs.metadata.namespace, name);
    pod.metadata.owner_references = vec![controller_ref(rs)];
    pod
}

/// A failed create or delete, for the `ReplicaFailure` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// `FailedCreate` or `FailedDelete`.
    pub reason: &'static str,
    pub message: String,
}

/// `calculateStatus`: the counts over the active pods the ReplicaSet owns after the sync
/// (`pods`, plus `created` new pods not yet in any view: counted as replicas and fully
/// labeled, not yet ready), `observedGeneration`, and the `ReplicaFailure` condition set
/// on a failure (its transition time kept while it stays) and removed without one.
pub fn calculate_status(
    rs: &ReplicaSet,
    pods: &[Arc<CachedPod>],
    created: usize,
    failure: Option<&Failure>,
    now: &str,
    now_secs: i64,
) -> ReplicaSetStatus {
    let template_labels = rs
        .spec
        .template
        .as_ref()
        .map(|t| t.metadata.labels.clone())
        .unwrap_or_default();
    let fully_labeled = pods
        .iter()
        .filter(|pod| {
            template_labels
                .iter()
                .all(|(k, v)| pod.labels.get(k) == Some(v.as_str()))
        })
        .count();
    let ready = pods.iter().filter(|pod| is_ready(pod)).count();
    let mut status = rs.status.clone();
    status.replicas = (pods.len() + created) as i64;
    status.fully_labeled_replicas = (fully_labeled + created) as i64;
    status.ready_replicas = ready as i64;
    status.available_replicas = availability(pods, rs.spec.min_ready_seconds, now_secs).0 as i64;
    status.observed_generation = rs.metadata.generation;
    let existing = status
        .conditions
        .iter()
        .position(|c| c.type_ == REPLICA_FAILURE);
    match (failure, existing) {
        (Some(failure), Some(i)) => {
            let condition = &mut status.conditions[i];
            if condition.status != "True" {
                condition.status = "True".to_string();
                condition.last_transition_time = Some(now.to_string());
            }
            condition.reason = failure.reason.to_string();
            condition.message = failure.message.clone();
        }
        (Some(failure), None) => status.conditions.push(ReplicaSetCondition {
            type_: REPLICA_FAILURE.to_string(),
            status: "True".to_string(),
            last_transition_time: Some(now.to_string()),
            reason: failure.reason.to_string(),
            message: failure.message.clone(),
            ..ReplicaSetCondition::default()
        }),
        (None, Some(i)) => {
            status.conditions.remove(i);
        }
        (None, None) => {}
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached(name: &str, host: &str, phase: &str, ready: Option<(&str, &str)>) -> Arc<CachedPod> {
        let mut status = serde_json::json!({ "phase": phase });
        if let Some((ready, since)) = ready {
            status["conditions"] = serde_json::json!([
                { "type": "Ready", "status": ready, "lastTransitionTime": since }
            ]);
        }
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": name, "namespace": "ns",
                "creationTimestamp": "2026-01-01T00:00:00Z"
            },
            "spec": { "host": host, "containers": [{ "name": "c", "image": "nginx" }] },
            "status": status,
        }))
        .unwrap();
        Arc::new(CachedPod::from(&pod))
    }

    #[test]
    fn pods_are_available_once_ready_for_min_ready_seconds_and_the_next_one_is_timed() {
        // 2026-01-01T00:00:00Z
        let t0 = 1_767_225_600;
        let pods = vec![
            cached(
                "old",
                "n1",
                "Running",
                Some(("True", "2026-01-01T00:00:00Z")),
            ),
            cached(
                "new",
                "n1",
                "Running",
                Some(("True", "2026-01-01T00:00:08Z")),
            ),
            cached(
                "newer",
                "n1",
                "Running",
                Some(("True", "2026-01-01T00:00:09Z")),
            ),
            cached(
                "unready",
                "n1",
                "Running",
                Some(("False", "2026-01-01T00:00:01Z")),
            ),
            cached("no-conditions", "n1", "Running", None),
        ];
        // Without minReadySeconds every ready pod is available.
        assert_eq!(availability(&pods, 0, t0 + 10), (4, None));
        // With 5 s: `old` and the 2014 pod are; `new` is in 3 s, `newer` in 4 s.
        assert_eq!(availability(&pods, 5, t0 + 10), (2, Some(3)));
        assert_eq!(availability(&pods, 5, t0 + 13), (3, Some(1)));
        assert_eq!(availability(&pods, 5, t0 + 14), (4, None));
    }

    #[test]
    fn among_equally_ready_pods_the_one_with_more_restarts_is_deleted_first() {
        let with_restarts = |name: &str, restarts: i64| {
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": { "name": name, "namespace": "ns",
                    "creationTimestamp": "2026-01-01T00:00:00Z" },
                "spec": { "host": "n1", "containers": [{ "name": "c", "image": "x:crash" }] },
                "status": { "phase": "Running",
                    "conditions": [{ "type": "Ready", "status": "False" }],
                    "containerStatuses": [{ "name": "c", "image": "x:crash", "ready": false,
                        "restartCount": restarts }] },
            }))
            .unwrap();
            Arc::new(CachedPod::from(&pod))
        };
        let mut pods = vec![with_restarts("a-few", 1), with_restarts("b-many", 7)];
        rank_with_readiness(&mut pods);
        assert_eq!(&*pods[0].name, "b-many");
        assert_eq!(pods[0].restarts, 7);
    }

    #[test]
    fn deletion_ranks_not_ready_and_recently_ready_pods_first_after_phase() {
        let mut pods = vec![
            cached(
                "ready-long",
                "n1",
                "Running",
                Some(("True", "2026-01-01T00:01:00Z")),
            ),
            cached(
                "ready-recent",
                "n1",
                "Running",
                Some(("True", "2026-01-01T00:05:00Z")),
            ),
            cached(
                "not-ready",
                "n1",
                "Running",
                Some(("False", "2026-01-01T00:00:30Z")),
            ),
            cached("pending", "n1", "Pending", None),
            cached("unassigned", "", "Pending", None),
        ];
        rank_with_readiness(&mut pods);
        let names: Vec<&str> = pods.iter().map(|p| &*p.name).collect();
        assert_eq!(
            names,
            [
                "unassigned",
                "pending",
                "not-ready",
                "ready-recent",
                "ready-long"
            ]
        );
    }
}
