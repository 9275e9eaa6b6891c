//! ReplicaSets (`pkg/registry/apps/replicaset/strategy.go`): `spec.replicas` defaults to
//! 1; the template's container list is validated when the spec changes and each spec
//! field keeps its stored form when unchanged; pods found through owner references.

use super::{check_template_pod_spec, default_replicas, Dependents, Strategy};
use crate::apiserver::convert::Kind;

pub(super) static STRATEGY: Strategy = Strategy {
    kind: Kind::ReplicaSet,
    defaults: default_replicas,
    keep_spec_fields: true,
    check_pod_spec: Some(check_template_pod_spec),
    grace_period: None,
    dependents: Dependents::OwnerReferences,
    return_deleted_object: false,
};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn replicas_default_to_one() {
        let mut rs = json!({"spec": {"template": {}}});
        (STRATEGY.defaults)(&mut rs).unwrap();
        assert_eq!(rs["spec"]["replicas"], 1);
        let mut specless = json!({"metadata": {}});
        (STRATEGY.defaults)(&mut specless).unwrap();
        assert_eq!(specless, json!({"metadata": {}}), "no spec, nothing added");
    }
}
