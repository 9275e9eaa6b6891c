//! ReplicationControllers (`pkg/registry/core/replicationcontroller/strategy.go`):
//! `spec.replicas` defaults to 1; the template's container list is validated when the spec
//! changes and each spec field keeps its stored form when unchanged. A 2014 controller's
//! pods hold no reference to it, so deleting it deletes the pods its selector matches
//! ([`Dependents::Selector`]; docs/departures.md has the row).

use super::{check_template_pod_spec, default_replicas, Dependents, Strategy};
use crate::apiserver::convert::Kind;

pub(super) static STRATEGY: Strategy = Strategy {
    kind: Kind::ReplicationController,
    defaults: default_replicas,
    keep_spec_fields: true,
    check_pod_spec: Some(check_template_pod_spec),
    grace_period: None,
    dependents: Dependents::Selector,
    return_deleted_object: false,
};

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
}
