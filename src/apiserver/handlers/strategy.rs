//! One strategy per typed kind (Pod, ReplicationController, Service, Endpoints,
//! ReplicaSet, Deployment: the kinds kcm stores in its 2014 shapes, `convert::Kind`):
//! what the generic write path (`create`, `write`'s read-modify-write, `delete`) does
//! differently for each, as data and pure functions, one file per kind under
//! `strategy/`. Mirrors Kubernetes' per-resource `strategy.go`
//! (`pkg/registry/core/pod/strategy.go`: `PrepareForCreate`'s defaults, what
//! `PrepareForUpdate` keeps, `Validate`, `CheckGracefulDelete`) and the options of
//! `pkg/registry/core/pod/storage/storage.go` (`ReturnDeletedObject`), beside the one
//! generic store (`staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`).
//!
//! What every kind shares stays in the write path: `uid`, `creationTimestamp`,
//! `deletionTimestamp` and `generation` filled by the store on create and kept on
//! update; the status kept as stored through the main resource and the rest kept
//! through `/status` (`update::keep_part`); `api::validate` and the metadata checks.
//!
//! The kinds stored as documents in their served version (ConfigMap, Secret, Lease, ...)
//! have their own, smaller strategies, one file per kind under `resources/`, named by
//! their registry rows: they work on served JSON, these on the stored shapes of typed
//! kinds.
//!
//! Invariants: [`of`] is the one lookup from a kind to its strategy, and every
//! strategy names the kind it is looked up by (tested); a strategy does no IO, so its
//! rules are tested here without etcd.

mod deployment;
mod endpoints;
mod pod;
mod replicaset;
mod replicationcontroller;
mod service;

use std::time::SystemTime;

use serde_json::Value;

use crate::api::{
    delete_write, graceful_delete, start_deletion, start_graceful_deletion, Cascade, DeleteWrite,
    Graceful, Object,
};
use crate::apiserver::convert::Kind;
use crate::apiserver::errors::{ApiError, Cause};
use crate::apiserver::validation;
use crate::labels::Selector;

/// What one typed kind's writes do differently.
pub(super) struct Strategy {
    /// The kind it is the strategy of.
    pub kind: Kind,
    /// `PrepareForCreate`'s defaults, on the stored shape of a created object (the ones
    /// kcm's controllers depend on). An error is a body that does not decode as the kind
    /// (400).
    pub defaults: fn(&mut Value) -> Result<(), ApiError>,
    /// Whether an update keeps, field by field, the stored form of each `spec` field
    /// whose served form it did not change (the kinds whose spec holds a pod template:
    /// the defaults the served template shows are not written into it). Every kind keeps
    /// a whole `spec` and `status` that did not change.
    pub keep_spec_fields: bool,
    /// The validation of the pod spec(s) the stored object holds (its own, or its
    /// template's), run when the spec changes; `None` for a kind without one.
    pub check_pod_spec: Option<fn(&Value, &mut Vec<Cause>)>,
    /// `CheckGracefulDelete`: the grace period of a delete of the stored object, given
    /// the one the request asks for (`gracePeriodSeconds`); `None` for a kind deleted at
    /// once. A period of 0 deletes now.
    pub grace_period: Option<fn(&Value, Option<i64>) -> i64>,
    /// How the objects it owns are found when it is deleted.
    pub dependents: Dependents,
    /// Whether a delete answers with the object (`ReturnDeletedObject`, as pods do)
    /// rather than a `Status` Success once the key is gone.
    pub return_deleted_object: bool,
}

/// The pods a deleted object's label selector names (`None`: an empty selector, which
/// names none); an error is a stored object that does not decode as its kind.
pub(super) type PodSelector = fn(&Value) -> Result<Option<Selector>, ApiError>;

/// How a deleted object's dependents are found.
#[derive(Clone, Copy, Debug)]
pub(super) enum Dependents {
    /// Through their owner references: kcm's garbage collector, as the request's
    /// propagation policy says (`api::delete_write`).
    OwnerReferences,
    /// Through the object's label selector: a 2014 ReplicationController, whose pods
    /// hold no reference to it. Its key is deleted at once (nothing to orphan through
    /// references), then the pods its selector matches that no other controller owns,
    /// unless the policy is `Orphan`.
    Selector(PodSelector),
}

impl Strategy {
    /// The propagation policy the object's own delete takes when `requested` was asked.
    pub(super) fn cascade(&self, requested: Cascade) -> Cascade {
        match self.dependents {
            Dependents::OwnerReferences => requested,
            Dependents::Selector(_) => Cascade::Background,
        }
    }

    /// The delete hook (kube-apiserver's `BeforeDelete` with the strategy's
    /// `CheckGracefulDelete`): what a delete under `requested` (with the request's
    /// `gracePeriodSeconds`) writes to `object`, which it marks in place when the answer
    /// is [`DeleteWrite::Mark`]: finalizers keep it with a `deletionTimestamp`
    /// ([`before_delete`]); a kind that deletes gracefully (a pod) is marked with its
    /// grace period where it would go now, and goes now with a period of 0.
    pub(super) fn delete<T: Object>(
        &self,
        object: &mut T,
        requested: Cascade,
        grace_period_seconds: Option<i64>,
        now: SystemTime,
    ) -> DeleteWrite {
        let write = before_delete(object, self.cascade(requested));
        let Some(grace_period) = self.grace_period.filter(|_| write == DeleteWrite::Delete) else {
            return write;
        };
        let stored = serde_json::to_value(&*object).expect("a stored kind always encodes");
        match graceful_delete(
            object.metadata(),
            grace_period(&stored, grace_period_seconds),
        ) {
            Graceful::Now => DeleteWrite::Delete,
            Graceful::Unchanged => DeleteWrite::Nothing,
            Graceful::Mark(grace) => {
                start_graceful_deletion(object.metadata_mut(), grace, now);
                DeleteWrite::Mark(None)
            }
        }
    }

    /// How to find the pods a delete of the object under `requested` also deletes: by its
    /// selector, unless orphaned; `None` when its pods are the garbage collector's.
    pub(super) fn selected_pods(&self, requested: Cascade) -> Option<PodSelector> {
        match self.dependents {
            Dependents::Selector(selector) if requested != Cascade::Orphan => Some(selector),
            _ => None,
        }
    }
}

/// What a delete under `cascade` writes to `object`, which it marks in place
/// (`api::start_deletion`) when the answer is [`DeleteWrite::Mark`]: a background
/// delete removes an object without finalizers; otherwise it stays, with a
/// `deletionTimestamp` and the finalizer of a foreground or orphaning delete
/// (`api::delete_write`, the rule `kcm delete` shares).
pub(super) fn before_delete<T: Object>(object: &mut T, cascade: Cascade) -> DeleteWrite {
    let write = delete_write(object.metadata(), cascade);
    if let DeleteWrite::Mark(finalizer) = write {
        start_deletion(object.metadata_mut(), finalizer);
    }
    write
}

/// The strategy of `kind`: the one lookup, a file per kind under `strategy/`.
pub(super) fn of(kind: Kind) -> &'static Strategy {
    match kind {
        Kind::Pod => &pod::STRATEGY,
        Kind::ReplicationController => &replicationcontroller::STRATEGY,
        Kind::Service => &service::STRATEGY,
        Kind::Endpoints => &endpoints::STRATEGY,
        Kind::ReplicaSet => &replicaset::STRATEGY,
        Kind::Deployment => &deployment::STRATEGY,
    }
}

/// No defaults.
fn no_defaults(_: &mut Value) -> Result<(), ApiError> {
    Ok(())
}

/// `spec.replicas` 1 when absent (the replica kinds' `SetDefaults_*`).
fn default_replicas(stored: &mut Value) -> Result<(), ApiError> {
    if let Some(spec) = stored.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry("replicas").or_insert(Value::from(1));
    }
    Ok(())
}

/// The container list of the pod template of a replicated kind (`spec.template.spec`);
/// a kind without a template is refused by `api::validate` already.
fn check_template_pod_spec(stored: &Value, causes: &mut Vec<Cause>) {
    if let Some(template) = stored.pointer("/spec/template").filter(|v| v.is_object()) {
        validation::check_pod_spec("spec.template.spec", &template["spec"], causes);
    }
}

/// A stored-shape document as the typed kind; a field of the wrong type is a 400 naming
/// it (`spec.replicas: invalid type: string "3", expected i64`).
pub(super) fn typed<T: Object>(stored: Value) -> Result<T, ApiError> {
    // Untracked first: a tracked decode costs twice as much, and only a refusal needs
    // the path.
    if let Ok(object) = T::deserialize(&stored) {
        return Ok(object);
    }
    serde_path_to_error::deserialize(stored).map_err(|e| {
        ApiError::bad_request(format!(
            "the {} does not decode: {}: {}",
            T::KIND,
            e.path(),
            e.inner()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_kind_has_the_strategy_that_names_it() {
        for kind in Kind::ALL {
            assert_eq!(of(kind).kind, kind);
        }
    }

    #[test]
    fn only_templates_keep_spec_fields_and_only_pods_delete_gracefully() {
        let keeps: Vec<Kind> = Kind::ALL
            .into_iter()
            .filter(|k| of(*k).keep_spec_fields)
            .collect();
        assert_eq!(
            keeps,
            [
                Kind::ReplicationController,
                Kind::ReplicaSet,
                Kind::Deployment
            ]
        );
        let graceful: Vec<Kind> = Kind::ALL
            .into_iter()
            .filter(|k| of(*k).grace_period.is_some())
            .collect();
        assert_eq!(graceful, [Kind::Pod]);
        let returned: Vec<Kind> = Kind::ALL
            .into_iter()
            .filter(|k| of(*k).return_deleted_object)
            .collect();
        assert_eq!(returned, [Kind::Pod]);
        let unchecked: Vec<Kind> = Kind::ALL
            .into_iter()
            .filter(|k| of(*k).check_pod_spec.is_none())
            .collect();
        assert_eq!(unchecked, [Kind::Service, Kind::Endpoints]);
    }

    #[test]
    fn a_replication_controller_deletes_its_pods_by_selector_unless_orphaned() {
        let rc = of(Kind::ReplicationController);
        for requested in [Cascade::Background, Cascade::Foreground, Cascade::Orphan] {
            assert_eq!(rc.cascade(requested), Cascade::Background);
        }
        assert!(rc.selected_pods(Cascade::Foreground).is_some());
        assert!(rc.selected_pods(Cascade::Orphan).is_none());
        let rs = of(Kind::ReplicaSet);
        assert_eq!(rs.cascade(Cascade::Orphan), Cascade::Orphan);
        assert!(rs.selected_pods(Cascade::Background).is_none());
    }

    /// What `kind`'s delete hook answers for `object` under `requested` and the request's
    /// grace period, and the object as it leaves it.
    #[track_caller]
    fn check_delete<T: Object>(
        kind: Kind,
        object: Value,
        (requested, grace): (Cascade, Option<i64>),
        expected: DeleteWrite,
    ) -> T {
        let mut object: T = serde_json::from_value(object).unwrap();
        let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        assert_eq!(
            of(kind).delete(&mut object, requested, grace, now),
            expected
        );
        object
    }

    #[test]
    fn a_delete_goes_now_or_marks_the_object_for_its_finalizers() {
        use crate::api::{ReplicaSet, FINALIZER_FOREGROUND};
        let rs = json!({"metadata": {"name": "web", "namespace": "default"}});
        let gone: ReplicaSet = check_delete(
            Kind::ReplicaSet,
            rs.clone(),
            (Cascade::Background, None),
            DeleteWrite::Delete,
        );
        assert!(gone.metadata.deletion_timestamp.is_none());
        let marked: ReplicaSet = check_delete(
            Kind::ReplicaSet,
            rs,
            (Cascade::Foreground, None),
            DeleteWrite::Mark(Some(FINALIZER_FOREGROUND)),
        );
        assert!(marked.metadata.deletion_timestamp.is_some());
        assert_eq!(marked.metadata.finalizers, [FINALIZER_FOREGROUND]);
        let again = serde_json::to_value(&marked).unwrap();
        let _: ReplicaSet = check_delete(
            Kind::ReplicaSet,
            again,
            (Cascade::Foreground, None),
            DeleteWrite::Nothing,
        );
        // A 2014 ReplicationController's own delete is a background one, orphaning or not.
        let rc = json!({"metadata": {"name": "web", "namespace": "default"}});
        let _: crate::api::ReplicationController = check_delete(
            Kind::ReplicationController,
            rc,
            (Cascade::Orphan, None),
            DeleteWrite::Delete,
        );
    }

    #[test]
    fn a_running_pods_delete_marks_it_with_its_grace_period() {
        use crate::api::{deletion_grace_period, Pod};
        let running = json!({"metadata": {"name": "web", "namespace": "default"},
            "spec": {"host": "node-1", "terminationGracePeriodSeconds": 5,
                     "containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Running"}});
        let marked: Pod = check_delete(
            Kind::Pod,
            running.clone(),
            (Cascade::Background, None),
            DeleteWrite::Mark(None),
        );
        assert_eq!(deletion_grace_period(&marked.metadata), Some(5));
        assert_eq!(
            marked.metadata.deletion_timestamp.as_deref(),
            Some("2023-11-14T22:13:25Z"),
            "now plus its grace period"
        );
        // Asked again for a longer period, it keeps its deadline; for 0 it goes now.
        let terminating = serde_json::to_value(&marked).unwrap();
        let _: Pod = check_delete(
            Kind::Pod,
            terminating.clone(),
            (Cascade::Background, Some(10)),
            DeleteWrite::Nothing,
        );
        let _: Pod = check_delete(
            Kind::Pod,
            terminating,
            (Cascade::Background, Some(0)),
            DeleteWrite::Delete,
        );
        let unassigned = json!({"metadata": {"name": "web", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x"}]}});
        let _: Pod = check_delete(
            Kind::Pod,
            unassigned,
            (Cascade::Background, None),
            DeleteWrite::Delete,
        );
        // Finalizers hold it without a grace period.
        let mut held = running;
        held["metadata"]["finalizers"] = json!(["example.com/hold"]);
        let held: Pod = check_delete(
            Kind::Pod,
            held,
            (Cascade::Background, None),
            DeleteWrite::Mark(None),
        );
        assert!(held.metadata.deletion_timestamp.is_some());
        assert_eq!(deletion_grace_period(&held.metadata), None);
    }

    #[test]
    fn a_template_without_containers_is_invalid() {
        let mut causes = Vec::new();
        let stored = json!({"spec": {"template": {"spec": {"containers": []}}}});
        check_template_pod_spec(&stored, &mut causes);
        assert!(
            causes
                .iter()
                .any(|c| c.field.starts_with("spec.template.spec")),
            "{causes:?}"
        );
        let mut causes = Vec::new();
        check_template_pod_spec(&json!({"spec": {}}), &mut causes);
        assert!(causes.is_empty(), "no template: api::validate refuses it");
    }

    #[test]
    fn a_stored_document_of_the_wrong_shape_is_a_400_naming_the_field() {
        let error =
            typed::<crate::api::ReplicaSet>(json!({"spec": {"replicas": "3"}})).unwrap_err();
        assert_eq!(error.code, 400);
        assert!(error.message.contains("spec.replicas"), "{}", error.message);
    }
}
