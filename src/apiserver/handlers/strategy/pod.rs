//! Pods (`pkg/registry/core/pod/strategy.go` and `storage/storage.go`): no create
//! defaults kcm's controllers need; the container list validated when the spec changes;
//! graceful deletion (`CheckGracefulDelete`: a pod bound to a node and still running is
//! only marked, for its kubelet to delete once its containers stopped), and a delete
//! answers with the pod (`ReturnDeletedObject`).

use serde_json::Value;

use super::{no_defaults, Dependents, Strategy};
use crate::api::{pod_grace_period, Pod};
use crate::apiserver::convert::Kind;
use crate::apiserver::errors::Cause;
use crate::apiserver::validation;

pub(super) static STRATEGY: Strategy = Strategy {
    kind: Kind::Pod,
    defaults: no_defaults,
    keep_spec_fields: false,
    check_pod_spec: Some(check_pod_spec),
    grace_period: Some(grace_period),
    dependents: Dependents::OwnerReferences,
    return_deleted_object: true,
};

/// The pod's own container list (`spec`).
fn check_pod_spec(stored: &Value, causes: &mut Vec<Cause>) {
    if let Some(spec) = stored.get("spec").filter(|v| v.is_object()) {
        validation::check_pod_spec("spec", spec, causes);
    }
}

/// The pod's grace period ([`pod_grace_period`]: 0 for an unassigned or terminated pod,
/// else the request's, the pod's `terminationGracePeriodSeconds`, or 30 s); 0 for a
/// document that does not decode as a pod.
fn grace_period(stored: &Value, requested: Option<i64>) -> i64 {
    match serde_json::from_value::<Pod>(stored.clone()) {
        Ok(pod) => pod_grace_period(&pod, requested),
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_running_pod_takes_the_requested_or_its_own_grace_period() {
        let running = json!({"metadata": {"name": "web"},
            "spec": {"host": "node-1", "terminationGracePeriodSeconds": 5,
                     "containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Running"}});
        assert_eq!(grace_period(&running, None), 5);
        assert_eq!(grace_period(&running, Some(0)), 0);
        assert_eq!(grace_period(&running, Some(12)), 12);
        let unassigned = json!({"metadata": {"name": "web"},
            "spec": {"containers": [{"name": "c", "image": "x"}]}});
        assert_eq!(grace_period(&unassigned, Some(12)), 0);
        assert_eq!(grace_period(&json!({"spec": 3}), Some(12)), 0);
    }

    #[test]
    fn the_pods_own_container_list_is_checked() {
        let mut causes = Vec::new();
        check_pod_spec(
            &json!({"spec": {"containers": [{"image": "x"}]}}),
            &mut causes,
        );
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["spec.containers[0].name"]);
    }
}
