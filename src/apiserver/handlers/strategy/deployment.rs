//! Deployments (`pkg/registry/apps/deployment/strategy.go` with
//! `pkg/apis/apps/v1/defaults.go` `SetDefaults_Deployment`): on create, the replicas,
//! strategy (RollingUpdate, 25 % / 25 %), revision history limit and progress deadline
//! kcm's deployment controller depends on, as `kcm create` applies them; the template's
//! container list validated when the spec changes and each spec field keeps its stored
//! form when unchanged; its ReplicaSets found through owner references.

use serde_json::Value;

use super::{check_template_pod_spec, typed, Dependents, Strategy};
use crate::api;
use crate::apiserver::convert::Kind;
use crate::apiserver::errors::ApiError;

pub(super) static STRATEGY: Strategy = Strategy {
    kind: Kind::Deployment,
    defaults,
    keep_spec_fields: true,
    check_pod_spec: Some(check_template_pod_spec),
    grace_period: None,
    dependents: Dependents::OwnerReferences,
    return_deleted_object: false,
};

/// `api::Deployment::set_defaults`, writing only the defaulted spec fields into the
/// stored document (the rest keeps its form).
fn defaults(stored: &mut Value) -> Result<(), ApiError> {
    let mut deployment: api::Deployment = typed(stored.clone())?;
    deployment.set_defaults();
    let defaulted = serde_json::to_value(&deployment.spec).expect("a spec always encodes");
    if let (Some(spec), Value::Object(defaulted)) = (
        stored
            .as_object_mut()
            .map(|o| o.entry("spec").or_insert_with(|| serde_json::json!({})))
            .and_then(Value::as_object_mut),
        defaulted,
    ) {
        for field in [
            "replicas",
            "strategy",
            "revisionHistoryLimit",
            "progressDeadlineSeconds",
        ] {
            if let Some(value) = defaulted.get(field) {
                spec.insert(field.to_string(), value.clone());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_created_deployment_gets_kubernetes_defaults() {
        let mut stored = json!({"spec": {"template": {}}});
        defaults(&mut stored).unwrap();
        assert_eq!(stored["spec"]["replicas"], 1);
        assert_eq!(stored["spec"]["strategy"]["type"], "RollingUpdate");
        assert_eq!(
            stored["spec"]["strategy"]["rollingUpdate"]["maxSurge"],
            "25%"
        );
        assert_eq!(stored["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(stored["spec"]["progressDeadlineSeconds"], 600);
    }

    #[test]
    fn a_deployment_that_does_not_decode_is_a_400() {
        let mut stored = json!({"spec": {"replicas": "three"}});
        assert_eq!(defaults(&mut stored).unwrap_err().code, 400);
    }
}
