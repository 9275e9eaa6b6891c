//! The `ReplicaSet` kind (`apps/v1`), the ReplicationController's successor: a
//! [`LabelSelector`] instead of a label set, and a status the controller fills with counts
//! and conditions. Mirrors `k8s.io/api/apps/v1/types.go` (`ReplicaSet`, `ReplicaSetSpec`,
//! `ReplicaSetStatus`, `ReplicaSetCondition`) and `ValidateReplicaSet` of
//! `pkg/apis/apps/validation/validation.go`; none of it existed in 2014.
//!
//! Invariants:
//! - `spec.replicas` absent reads as 1 ([`ReplicaSet::replicas`]) and stays absent when the
//!   document is written back (only `kcm create` writes the default);
//! - unknown fields at every level survive a rewrite (the `extra` maps).

use serde::{Deserialize, Serialize};

use super::kinds::{impl_object, PodTemplateSpec};
use super::label_selector::validate_label_selector;
use super::meta::{is_zero, null_as_default};
use super::validation::{validate_labels, validate_replicas};
use super::{Extra, FieldError, LabelSelector, Object, ObjectMeta};

/// The condition type the ReplicaSet controller sets when a create or delete fails.
pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// A ReplicaSet: keep `spec.replicas` pods matching `spec.selector` alive, owning them
/// by controller reference.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSet {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ReplicaSetSpec,
    #[serde(default, deserialize_with = "null_as_default")]
    pub status: ReplicaSetStatus,
    #[serde(flatten)]
    pub extra: Extra,
}

impl ReplicaSet {
    /// `spec.replicas`, 1 when absent (the apps/v1 default).
    pub fn replicas(&self) -> i64 {
        self.spec.replicas.unwrap_or(1)
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSetSpec {
    /// Desired number of active pods; absent means 1 ([`ReplicaSet::replicas`]). Signed so
    /// that a negative value is reported by validation instead of failing to decode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
    /// Seconds a pod must have been ready to count as available.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub min_ready_seconds: i64,
    /// Required; a missing selector is reported by validation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplateSpec>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSetStatus {
    /// Active pods the ReplicaSet owns.
    #[serde(default)]
    pub replicas: i64,
    /// Of those, the pods whose labels match the template's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fully_labeled_replicas: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ready_replicas: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub available_replicas: i64,
    /// The `metadata.generation` the controller last acted on.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observed_generation: i64,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<ReplicaSetCondition>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `ReplicaSetCondition`: kcm sets only [`REPLICA_FAILURE`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSetCondition {
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `ValidateReplicaSetSpec`: replicas and minReadySeconds not negative, a non-empty valid
/// selector that matches the template's labels, a template.
pub(super) fn validate_replica_set(rs: &ReplicaSet, errors: &mut Vec<FieldError>) {
    let spec = &rs.spec;
    validate_replicas(rs.replicas(), errors);
    validate_min_ready_seconds(spec.min_ready_seconds, errors);
    validate_selector_and_template(spec.selector.as_ref(), spec.template.as_ref(), errors);
}

/// `spec.minReadySeconds` is not negative.
pub(super) fn validate_min_ready_seconds(min_ready_seconds: i64, errors: &mut Vec<FieldError>) {
    if min_ready_seconds < 0 {
        errors.push(FieldError::new(
            "spec.minReadySeconds",
            format!("must be >= 0, got {min_ready_seconds}"),
        ));
    }
}

/// The selector and template rules shared by the apps/v1 workloads: a non-empty valid
/// `spec.selector` that matches the labels of a present `spec.template`.
pub(super) fn validate_selector_and_template(
    selector: Option<&LabelSelector>,
    template: Option<&PodTemplateSpec>,
    errors: &mut Vec<FieldError>,
) {
    let selector = match selector {
        None => {
            errors.push(FieldError::new("spec.selector", "required"));
            None
        }
        // `{}` selects everything: the controller would adopt every orphan of its namespace.
        Some(selector) if selector.is_empty() => {
            errors.push(FieldError::new(
                "spec.selector",
                "required (must not be empty): an empty selector selects every pod",
            ));
            None
        }
        Some(selector) => {
            let before = errors.len();
            validate_label_selector(selector, "spec.selector", errors);
            (errors.len() == before)
                .then(|| selector.to_selector().ok())
                .flatten()
        }
    };
    match template {
        None => errors.push(FieldError::new("spec.template", "required")),
        Some(template) => {
            validate_labels(
                "spec.template.metadata.labels",
                &template.metadata.labels,
                errors,
            );
            // A template whose pods the selector does not match would make the
            // controller create pods forever.
            if let Some(selector) = selector {
                if !selector.matches(&template.metadata.labels) {
                    errors.push(FieldError::new(
                        "spec.template.metadata.labels",
                        format!(
                            "`selector` does not match template `labels`: selector {selector} does not match {{{}}}",
                            template.metadata.labels
                        ),
                    ));
                }
            }
        }
    }
}

impl_object!(ReplicaSet {
    kind: "ReplicaSet",
    api_version: "apps/v1",
    resource: "replicasets",
    key_dir: "replicasets",
    // The same JSON shape for every field kcm models; rewritten as apps/v1.
    read_api_versions: &["apps/v1beta2", "extensions/v1beta1"],
    spec: spec,
    validate: validate_replica_set,
});

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::api::{decode, encode, object_key, validate, ResourceVersion};

    fn valid() -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 3,
                "minReadySeconds": 2,
                "selector": {
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}]
                },
                "template": {
                    "metadata": {"labels": {"app": "web", "tier": "front"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}
                }
            }
        })
    }

    fn rs(value: Value) -> ReplicaSet {
        serde_json::from_value(value).unwrap()
    }

    #[track_caller]
    fn check_invalid(patch: impl FnOnce(&mut Value), field: &str, message_part: &str) {
        crate::api::tests::check_invalid_as::<ReplicaSet>(valid(), patch, field, message_part);
    }

    #[test]
    fn a_valid_replica_set_passes_and_keys_under_replicasets() {
        validate(&rs(valid())).unwrap();
        assert_eq!(
            object_key::<ReplicaSet>("/registry", "default", "web"),
            "/registry/replicasets/default/web"
        );
    }

    #[test]
    fn validation_rules() {
        check_invalid(
            |v| v["spec"]["replicas"] = json!(-1),
            "spec.replicas",
            ">= 0",
        );
        check_invalid(
            |v| v["spec"]["replicas"] = json!(1_i64 << 31),
            "spec.replicas",
            "int32",
        );
        check_invalid(
            |v| v["spec"]["minReadySeconds"] = json!(-2),
            "spec.minReadySeconds",
            ">= 0",
        );
        check_invalid(
            |v| {
                v["spec"]
                    .as_object_mut()
                    .unwrap()
                    .remove("selector")
                    .unwrap();
            },
            "spec.selector",
            "required",
        );
        check_invalid(
            |v| v["spec"]["selector"] = json!({}),
            "spec.selector",
            "empty",
        );
        check_invalid(
            |v| v["spec"]["selector"]["matchExpressions"][0]["values"] = json!([]),
            "spec.selector.matchExpressions[0].values",
            "must be specified",
        );
        check_invalid(
            |v| {
                v["spec"]["selector"]["matchExpressions"][0] =
                    json!({"key": "tier", "operator": "Exists", "values": ["x"]})
            },
            "spec.selector.matchExpressions[0].values",
            "may not be specified",
        );
        check_invalid(
            |v| v["spec"]["template"]["metadata"]["labels"]["tier"] = json!("db"),
            "spec.template.metadata.labels",
            "does not match",
        );
        check_invalid(
            |v| {
                v["spec"]
                    .as_object_mut()
                    .unwrap()
                    .remove("template")
                    .unwrap();
            },
            "spec.template",
            "required",
        );
        // An unknown operator does not decode at all.
        let mut value = valid();
        value["spec"]["selector"]["matchExpressions"][0]["operator"] = json!("Gt");
        assert!(serde_json::from_value::<ReplicaSet>(value).is_err());
    }

    #[test]
    fn replicas_default_to_one_in_memory_only() {
        let mut value = valid();
        value["spec"].as_object_mut().unwrap().remove("replicas");
        let rs = rs(value);
        assert_eq!(rs.replicas(), 1);
        validate(&rs).unwrap();
        let written: Value = serde_json::from_slice(&encode(&rs).unwrap()).unwrap();
        assert!(written["spec"].get("replicas").is_none(), "{written}");
        assert_eq!(written["apiVersion"], "apps/v1");
    }

    #[test]
    fn unknown_fields_and_status_survive_a_rewrite() {
        let mut value = valid();
        value["spec"]["paused"] = json!(true);
        value["spec"]["selector"]["future"] = json!(1);
        value["status"] = json!({
            "replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 2,
            "availableReplicas": 1, "observedGeneration": 4, "terminatingReplicas": 0,
            "conditions": [{"type": "ReplicaFailure", "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "FailedCreate",
                "message": "quota", "observedBy": "x"}]
        });
        value["topLevel"] = json!("kept");
        let encoded = encode(&rs(value.clone())).unwrap();
        let decoded = decode::<ReplicaSet>(
            "/registry",
            "/registry/replicasets/default/web",
            &encoded,
            7,
        )
        .unwrap();
        assert_eq!(decoded.metadata.resource_version, Some(ResourceVersion(7)));
        let back: Value = serde_json::from_slice(&encode(&decoded).unwrap()).unwrap();
        assert_eq!(back["spec"]["paused"], true);
        assert_eq!(back["spec"]["selector"]["future"], 1);
        assert_eq!(back["status"], value["status"]);
        assert_eq!(back["topLevel"], "kept");
        assert_eq!(decoded.status.conditions[0].reason, "FailedCreate");
    }

    #[test]
    fn older_api_versions_are_read_and_rewritten_as_apps_v1() {
        for version in ["apps/v1beta2", "extensions/v1beta1"] {
            let mut value = valid();
            value["apiVersion"] = json!(version);
            let bytes = serde_json::to_vec(&value).unwrap();
            let key = "/registry/replicasets/default/web";
            let rs = decode::<ReplicaSet>("/registry", key, &bytes, 3).unwrap();
            let back: Value = serde_json::from_slice(&encode(&rs).unwrap()).unwrap();
            assert_eq!(back["apiVersion"], "apps/v1");
        }
        let mut value = valid();
        value["apiVersion"] = json!("v1beta3");
        let bytes = serde_json::to_vec(&value).unwrap();
        let key = "/registry/replicasets/default/web";
        assert!(decode::<ReplicaSet>("/registry", key, &bytes, 3).is_err());
    }
}
