//! ReplicationControllers (`pkg/registry/core/replicationcontroller/strategy.go`):
//! `spec.replicas` defaults to 1; the template's container list is validated when the spec
//! changes and each spec field keeps its stored form when unchanged. A 2014 controller's
//! pods hold no reference to it, so deleting it deletes the pods its selector matches
//! ([`Dependents::Selector`]; docs/departures.md has the row).

use serde_json::Value;

use super::{check_template_pod_spec, default_replicas, Dependents, Strategy};
use crate::api::ReplicationController;
use crate::apiserver::convert::Kind;
use crate::apiserver::errors::ApiError;
use crate::labels::Selector;

pub(super) static STRATEGY: Strategy = Strategy {
    kind: Kind::ReplicationController,
    defaults: default_replicas,
    keep_spec_fields: true,
    check_pod_spec: Some(check_template_pod_spec),
    grace_period: None,
    dependents: Dependents::Selector(pod_selector),
    return_deleted_object: false,
};

/// The controller's `spec.selector`; `None` when empty (it names no pod).
fn pod_selector(stored: &Value) -> Result<Option<Selector>, ApiError> {
    let rc: ReplicationController = serde_json::from_value(stored.clone())
        .map_err(|e| ApiError::internal(format!("the deleted controller: {e}")))?;
    if rc.spec.selector.is_empty() {
        return Ok(None);
    }
    Ok(Some(rc.spec.selector.as_selector()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn replicas_default_to_one_and_a_stated_zero_stays() {
        let mut rc = json!({"spec": {"replicas": 0}});
        (STRATEGY.defaults)(&mut rc).unwrap();
        assert_eq!(rc["spec"]["replicas"], 0);
        let mut rc = json!({"spec": {"selector": {"app": "web"}}});
        (STRATEGY.defaults)(&mut rc).unwrap();
        assert_eq!(rc["spec"]["replicas"], 1);
    }

    #[test]
    fn its_pods_are_the_ones_its_selector_names() {
        let rc = json!({"metadata": {"name": "web"},
            "spec": {"replicas": 1, "selector": {"app": "web"}}});
        let selector = pod_selector(&rc).unwrap().expect("a selector");
        assert_eq!(selector.to_string(), "app=web");
        let empty = json!({"metadata": {"name": "web"}, "spec": {"selector": {}}});
        assert!(pod_selector(&empty).unwrap().is_none());
        assert_eq!(pod_selector(&json!({"spec": 1})).unwrap_err().code, 500);
    }
}
