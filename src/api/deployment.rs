//! The `Deployment` kind (`apps/v1`): a template rolled out through ReplicaSets, one per
//! template, with a strategy (`RollingUpdate` bounded by `maxSurge`/`maxUnavailable`, or
//! `Recreate`), pause, a revision history, and a status the controller fills with counts
//! and the `Available`/`Progressing` conditions. Mirrors `k8s.io/api/apps/v1/types.go`
//! (`Deployment*`), `SetDefaults_Deployment` (`pkg/apis/apps/v1/defaults.go`),
//! `ValidateDeployment` (`pkg/apis/apps/validation/validation.go`), the int-or-percent
//! arithmetic of `pkg/controller/deployment/util/deployment_util.go` (`ResolveFenceposts`,
//! `MaxSurge`, `MaxUnavailable`) and `intstr.GetScaledValueFromIntOrPercent`, and
//! `controller.ComputeHash` with kcm's exactly specified input (see
//! [`pod_template_hash`]); none of it existed in 2014.
//!
//! Invariants:
//! - Kubernetes' defaults (replicas 1, `RollingUpdate` 25%/25%, `revisionHistoryLimit` 10,
//!   `progressDeadlineSeconds` 600, `minReadySeconds` 0) are read through the accessors
//!   ([`Deployment::replicas`], ...) for a document that lacks them and are never written
//!   back by a controller; only `kcm create` writes them ([`Deployment::set_defaults`]);
//! - unknown fields at every level survive a rewrite (the `extra` maps);
//! - the names, annotations, conditions and reasons below are Kubernetes' exact strings.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::kinds::{impl_object, PodTemplateSpec};
use super::meta::controller_of;
use super::meta::{is_zero, null_as_default};
use super::replicaset::{validate_min_ready_seconds, validate_selector_and_template, ReplicaSet};
use super::validation::validate_replicas;
use super::{Extra, FieldError, IntOrString, LabelSelector, Object, ObjectMeta};

/// The label that ties a ReplicaSet and its pods to one template of a deployment
/// (`DefaultDeploymentUniqueLabelKey`).
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";
/// The revision of a ReplicaSet (and, copied, of its deployment): a decimal number.
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
/// Earlier revisions a ReplicaSet had, comma separated (set when a rollback reuses it).
pub const REVISION_HISTORY_ANNOTATION: &str = "deployment.kubernetes.io/revision-history";
/// The deployment's `spec.replicas` when the ReplicaSet was last scaled for it.
pub const DESIRED_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/desired-replicas";
/// `replicas + maxSurge` of the deployment when the ReplicaSet was last scaled for it.
pub const MAX_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/max-replicas";
/// Why the template changed, as the user recorded it; shown by `rollout history`.
pub const CHANGE_CAUSE_ANNOTATION: &str = "kubernetes.io/change-cause";
/// The old `spec.rollbackTo`, as an annotation (`deprecated.deployment.rollback.to`).
pub const ROLLBACK_TO_ANNOTATION: &str = "deprecated.deployment.rollback.to";
/// kubectl apply's record of the applied configuration.
pub const LAST_APPLIED_CONFIG_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The deployment annotations not copied to its ReplicaSets (`annotationsToSkip`).
pub const ANNOTATIONS_TO_SKIP: [&str; 6] = [
    LAST_APPLIED_CONFIG_ANNOTATION,
    REVISION_ANNOTATION,
    REVISION_HISTORY_ANNOTATION,
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    ROLLBACK_TO_ANNOTATION,
];

/// `spec.strategy.type`: replace pods gradually.
pub const ROLLING_UPDATE: &str = "RollingUpdate";
/// `spec.strategy.type`: kill every old pod before creating new ones.
pub const RECREATE: &str = "Recreate";

/// Condition type: at least `replicas - maxUnavailable` pods are available.
pub const DEPLOYMENT_AVAILABLE: &str = "Available";
/// Condition type: the rollout progresses, completed, or exceeded its deadline.
pub const DEPLOYMENT_PROGRESSING: &str = "Progressing";
/// Condition type: a ReplicaSet of the deployment failed to create or delete pods.
pub const DEPLOYMENT_REPLICA_FAILURE: &str = "ReplicaFailure";

/// Progressing True: a ReplicaSet of the deployment changed size or availability.
pub const REPLICA_SET_UPDATED_REASON: &str = "ReplicaSetUpdated";
/// Progressing False: the new ReplicaSet could not be created.
pub const FAILED_RS_CREATE_REASON: &str = "ReplicaSetCreateError";
/// Progressing True: the new ReplicaSet was created.
pub const NEW_REPLICA_SET_REASON: &str = "NewReplicaSetCreated";
/// Progressing True: the new ReplicaSet already existed.
pub const FOUND_NEW_RS_REASON: &str = "FoundNewReplicaSet";
/// Progressing True: the rollout is complete.
pub const NEW_RS_AVAILABLE_REASON: &str = "NewReplicaSetAvailable";
/// Progressing False: no progress for `progressDeadlineSeconds`.
pub const TIMED_OUT_REASON: &str = "ProgressDeadlineExceeded";
/// Progressing Unknown: `spec.paused` was set.
pub const PAUSED_DEPLOY_REASON: &str = "DeploymentPaused";
/// Progressing Unknown: `spec.paused` was cleared (the deadline restarts).
pub const RESUMED_DEPLOY_REASON: &str = "DeploymentResumed";
/// Available True.
pub const MINIMUM_REPLICAS_AVAILABLE: &str = "MinimumReplicasAvailable";
/// Available False.
pub const MINIMUM_REPLICAS_UNAVAILABLE: &str = "MinimumReplicasUnavailable";

/// The defaults of `SetDefaults_Deployment`.
pub const DEFAULT_MAX_SURGE: &str = "25%";
pub const DEFAULT_MAX_UNAVAILABLE: &str = "25%";
pub const DEFAULT_REVISION_HISTORY_LIMIT: i64 = 10;
pub const DEFAULT_PROGRESS_DEADLINE_SECONDS: i64 = 600;

/// A Deployment: roll `spec.template` out to `spec.replicas` pods through ReplicaSets it
/// owns by controller reference.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Deployment {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: DeploymentSpec,
    #[serde(default, deserialize_with = "null_as_default")]
    pub status: DeploymentStatus,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentSpec {
    /// Desired number of pods; absent means 1 ([`Deployment::replicas`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
    /// Required and non-empty; immutable in Kubernetes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplateSpec>,
    /// Absent means `RollingUpdate` 25%/25% ([`Deployment::strategy_type`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<DeploymentStrategy>,
    /// Seconds a pod must have been ready to count as available.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub min_ready_seconds: i64,
    /// Old ReplicaSets kept for rollback; absent means 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i64>,
    /// Seconds without progress before Progressing turns False; absent means 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline_seconds: Option<i64>,
    /// While true, template changes roll nothing out (scaling still applies).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStrategy {
    /// [`ROLLING_UPDATE`] or [`RECREATE`]; absent means [`ROLLING_UPDATE`]. A string, so
    /// that an unknown type is reported by validation instead of failing to decode.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Only with `RollingUpdate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateDeployment>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateDeployment {
    /// Pods above `replicas` allowed during a rollout: a count or `N%` (rounded up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// Pods below `replicas` allowed during a rollout: a count or `N%` (rounded down).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStatus {
    /// The `metadata.generation` the controller last acted on.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observed_generation: i64,
    /// Pods of all its ReplicaSets (Σ `status.replicas`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicas: i64,
    /// Pods of the new ReplicaSet.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub updated_replicas: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ready_replicas: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub available_replicas: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unavailable_replicas: i64,
    /// Bumped when the new ReplicaSet's name is taken by another template; part of the
    /// pod-template-hash once present (0 included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i64>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<DeploymentCondition>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `DeploymentCondition`: [`DEPLOYMENT_AVAILABLE`], [`DEPLOYMENT_PROGRESSING`] or
/// [`DEPLOYMENT_REPLICA_FAILURE`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentCondition {
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,
    /// RFC 3339: the last time the controller wrote this condition with progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<String>,
    /// RFC 3339: the last time `status` changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Deployment {
    /// `spec.replicas`, 1 when absent.
    pub fn replicas(&self) -> i64 {
        self.spec.replicas.unwrap_or(1)
    }

    /// `spec.strategy.type`, [`ROLLING_UPDATE`] when absent (or empty).
    pub fn strategy_type(&self) -> &str {
        self.spec
            .strategy
            .as_ref()
            .and_then(|s| s.type_.as_deref())
            .filter(|t| !t.is_empty())
            .unwrap_or(ROLLING_UPDATE)
    }

    /// Whether the strategy is `RollingUpdate` (`IsRollingUpdate`).
    pub fn is_rolling_update(&self) -> bool {
        self.strategy_type() == ROLLING_UPDATE
    }

    /// `maxSurge` as defaulted: the stored value, or `25%`.
    pub fn max_surge_value(&self) -> IntOrString {
        self.rolling_update()
            .and_then(|r| r.max_surge.clone())
            .unwrap_or_else(|| IntOrString::String(DEFAULT_MAX_SURGE.to_string()))
    }

    /// `maxUnavailable` as defaulted: the stored value, or `25%`.
    pub fn max_unavailable_value(&self) -> IntOrString {
        self.rolling_update()
            .and_then(|r| r.max_unavailable.clone())
            .unwrap_or_else(|| IntOrString::String(DEFAULT_MAX_UNAVAILABLE.to_string()))
    }

    fn rolling_update(&self) -> Option<&RollingUpdateDeployment> {
        self.spec.strategy.as_ref()?.rolling_update.as_ref()
    }

    /// `MaxSurge`: the surge in pods; 0 for `Recreate` (or an invalid value).
    pub fn max_surge(&self) -> i64 {
        if !self.is_rolling_update() {
            return 0;
        }
        resolve_fenceposts(
            &self.max_surge_value(),
            &self.max_unavailable_value(),
            self.replicas(),
        )
        .map_or(0, |(surge, _)| surge)
    }

    /// `MaxUnavailable`: the unavailability allowed in pods, at most `replicas`; 0 for
    /// `Recreate`, for 0 replicas (or an invalid value).
    pub fn max_unavailable(&self) -> i64 {
        let replicas = self.replicas();
        if !self.is_rolling_update() || replicas == 0 {
            return 0;
        }
        resolve_fenceposts(
            &self.max_surge_value(),
            &self.max_unavailable_value(),
            replicas,
        )
        .map_or(0, |(_, unavailable)| unavailable.min(replicas))
    }

    /// `spec.revisionHistoryLimit`, 10 when absent.
    pub fn revision_history_limit(&self) -> i64 {
        self.spec
            .revision_history_limit
            .unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT)
    }

    /// `spec.progressDeadlineSeconds`, 600 when absent.
    pub fn progress_deadline_seconds(&self) -> i64 {
        self.spec
            .progress_deadline_seconds
            .unwrap_or(DEFAULT_PROGRESS_DEADLINE_SECONDS)
    }

    /// The condition of type `type_`, if any (`GetDeploymentCondition`).
    pub fn condition(&self, type_: &str) -> Option<&DeploymentCondition> {
        self.status.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Writes Kubernetes' defaults into the document, as the apiserver's defaulting does
    /// on create (`SetDefaults_Deployment`); only `kcm create` calls it.
    pub fn set_defaults(&mut self) {
        let spec = &mut self.spec;
        spec.replicas.get_or_insert(1);
        let strategy = spec.strategy.get_or_insert_with(Default::default);
        let type_ = strategy.type_.get_or_insert_with(String::new);
        if type_.is_empty() {
            *type_ = ROLLING_UPDATE.to_string();
        }
        if type_ == ROLLING_UPDATE {
            let rolling = strategy.rolling_update.get_or_insert_with(Default::default);
            rolling
                .max_surge
                .get_or_insert_with(|| IntOrString::String(DEFAULT_MAX_SURGE.to_string()));
            rolling
                .max_unavailable
                .get_or_insert_with(|| IntOrString::String(DEFAULT_MAX_UNAVAILABLE.to_string()));
        }
        spec.revision_history_limit
            .get_or_insert(DEFAULT_REVISION_HISTORY_LIMIT);
        spec.progress_deadline_seconds
            .get_or_insert(DEFAULT_PROGRESS_DEADLINE_SECONDS);
    }
}

// ---------------------------------------------------------------------------------------
// Int-or-percent arithmetic

/// `intstr.GetScaledValueFromIntOrPercent`: a count as it is, or `N%` of `total` rounded
/// up or down.
///
/// # Errors
/// A string that is not `N%` with `N` a non-negative integer.
pub fn scaled_value_from_int_or_percent(
    value: &IntOrString,
    total: i64,
    round_up: bool,
) -> Result<i64, String> {
    match value {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let percent = parse_percent(s)?;
            let scaled = percent.saturating_mul(total);
            Ok(if round_up {
                scaled.div_euclid(100) + i64::from(scaled.rem_euclid(100) != 0)
            } else {
                scaled.div_euclid(100)
            })
        }
    }
}

/// `N` of `N%`.
fn parse_percent(s: &str) -> Result<i64, String> {
    let digits = s
        .strip_suffix('%')
        .ok_or_else(|| format!("invalid value {s:?}: a string must be a percentage (N%)"))?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "invalid value {s:?}: a valid percent string must be a numeric string followed by an ending '%'"
        ));
    }
    digits
        .parse()
        .map_err(|e| format!("invalid value {s:?}: {e}"))
}

/// `ResolveFenceposts`: `(surge, unavailable)` in pods for `desired` replicas, surge
/// rounded up and unavailability down; when both come to 0, unavailability is 1 (so a
/// rollout can always proceed).
///
/// # Errors
/// An invalid percent string.
pub fn resolve_fenceposts(
    max_surge: &IntOrString,
    max_unavailable: &IntOrString,
    desired: i64,
) -> Result<(i64, i64), String> {
    let surge = scaled_value_from_int_or_percent(max_surge, desired, true)?;
    let unavailable = scaled_value_from_int_or_percent(max_unavailable, desired, false)?;
    if surge == 0 && unavailable == 0 {
        return Ok((0, 1));
    }
    Ok((surge, unavailable))
}

// ---------------------------------------------------------------------------------------
// The pod-template-hash

/// The characters `SafeEncodeString` maps bytes to (`byte % 27`): no vowels, no `0`,
/// `1` or `3`, so no words and no look-alikes.
const SAFE_ALPHANUMS: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

/// The `pod-template-hash` of a deployment's `spec.template` (`controller.ComputeHash`
/// with an exactly specified input, so that anyone can compute it):
/// FNV-1a 32-bit over `template` with the `pod-template-hash` label removed (the labels
/// map kept, even if empty), serialized as compact JSON with object keys sorted
/// (serde_json's escaping and number format), followed, when `collision_count` is
/// present (0 included), by the count as `u32` little-endian and 4 zero bytes; the sum
/// printed in decimal, each digit mapped to `bcdfghjklmnpqrstvwxz2456789[byte % 27]`
/// (`SafeEncodeString`).
pub fn pod_template_hash(template: &Value, collision_count: Option<i64>) -> String {
    let mut template = template.clone();
    if let Some(labels) = template
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.shift_remove(POD_TEMPLATE_HASH_LABEL);
    }
    let mut canonical = String::new();
    write_canonical_json(&template, &mut canonical);
    let mut hash = fnv1a32(0x811c_9dc5, canonical.as_bytes());
    if let Some(count) = collision_count {
        // Go's `uint32(*collisionCount)`: the low 32 bits.
        let mut bytes = [0_u8; 8];
        bytes[..4].copy_from_slice(&(count as u32).to_le_bytes());
        hash = fnv1a32(hash, &bytes);
    }
    hash.to_string()
        .bytes()
        .map(|b| char::from(SAFE_ALPHANUMS[usize::from(b) % SAFE_ALPHANUMS.len()]))
        .collect()
}

/// [`pod_template_hash`] of a typed template, as kcm writes it.
pub fn template_hash(template: &PodTemplateSpec, collision_count: Option<i64>) -> String {
    let value = serde_json::to_value(template).expect("a template always encodes");
    pod_template_hash(&value, collision_count)
}

fn fnv1a32(mut hash: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// Compact JSON with object keys sorted (byte order), serde_json's escaping and numbers.
fn write_canonical_json(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical_json(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical_json(item, out);
            }
            out.push(']');
        }
        scalar => {
            let _ = write!(out, "{scalar}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// A deployment's ReplicaSets: what the controller and the CLI both read

/// `deploymentutil.Revision`: the `deployment.kubernetes.io/revision` annotation of an
/// object (a ReplicaSet, or the deployment it was copied to), when it is a number.
pub fn revision(annotations: &BTreeMap<String, String>) -> Option<i64> {
    annotations.get(REVISION_ANNOTATION)?.parse().ok()
}

/// `EqualIgnoreHash`: the templates are equal once the `pod-template-hash` label is
/// removed from both. The deployment controller (`FindNewReplicaSet`) and `kcm rollout`
/// and `describe deploy` decide with it which ReplicaSet is the new one.
///
/// A container's `resources` of `{}` or `null` is equal to none, as in Go, where the field
/// is a struct that is never absent: a template a Go client read and wrote back (`kubectl
/// rollout undo` sends the old ReplicaSet's template so) carries `"resources":{}` where
/// the stored one has nothing, and is still the same template.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    let strip = |t: &PodTemplateSpec| {
        let mut t = t.clone();
        t.metadata.labels.remove(POD_TEMPLATE_HASH_LABEL);
        for container in &mut t.spec.containers {
            let empty = container
                .extra
                .get("resources")
                .is_some_and(|r| r.is_null() || r.as_object().is_some_and(|r| r.is_empty()));
            if empty {
                container.extra.remove("resources");
            }
        }
        t
    };
    strip(a) == strip(b)
}

/// `metav1.IsControlledBy` for a deployment's ReplicaSets: `rs`'s controller reference
/// names `d` by kind, name and uid.
pub fn is_controlled_by(rs: &ReplicaSet, d: &Deployment) -> bool {
    controller_of(&rs.metadata).is_some_and(|r| {
        r.kind == Deployment::KIND && r.name == d.metadata.name && r.uid == d.metadata.uid
    })
}

// ---------------------------------------------------------------------------------------
// Validation

/// `ValidateDeploymentSpec`: replicas, selector and template as for a ReplicaSet; a known
/// strategy; `rollingUpdate` only with `RollingUpdate`, its values non-negative counts or
/// percentages, `maxUnavailable` at most 100% and not 0 together with `maxSurge`;
/// `revisionHistoryLimit` and `minReadySeconds` not negative; `progressDeadlineSeconds`
/// (as defaulted) greater than `minReadySeconds`.
fn validate_deployment(d: &Deployment, errors: &mut Vec<FieldError>) {
    let spec = &d.spec;
    validate_replicas(d.replicas(), errors);
    validate_selector_and_template(spec.selector.as_ref(), spec.template.as_ref(), errors);
    validate_strategy(d, errors);
    validate_min_ready_seconds(spec.min_ready_seconds, errors);
    if let Some(limit) = spec.revision_history_limit.filter(|l| *l < 0) {
        errors.push(FieldError::new(
            "spec.revisionHistoryLimit",
            format!("must be >= 0, got {limit}"),
        ));
    }
    let deadline = d.progress_deadline_seconds();
    if deadline < 0 {
        errors.push(FieldError::new(
            "spec.progressDeadlineSeconds",
            format!("must be >= 0, got {deadline}"),
        ));
    } else if deadline <= spec.min_ready_seconds {
        errors.push(FieldError::new(
            "spec.progressDeadlineSeconds",
            format!(
                "must be greater than minReadySeconds ({deadline} <= {})",
                spec.min_ready_seconds
            ),
        ));
    }
}

fn validate_strategy(d: &Deployment, errors: &mut Vec<FieldError>) {
    let type_ = d.strategy_type();
    let rolling = d.rolling_update();
    match type_ {
        RECREATE => {
            if rolling.is_some() {
                errors.push(FieldError::new(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        ROLLING_UPDATE => {
            let surge = check_int_or_percent(
                "spec.strategy.rollingUpdate.maxSurge",
                &d.max_surge_value(),
                errors,
            );
            let field = "spec.strategy.rollingUpdate.maxUnavailable";
            let unavailable = check_int_or_percent(field, &d.max_unavailable_value(), errors);
            if let IntOrString::String(s) = d.max_unavailable_value() {
                if unavailable.is_some_and(|n| n > 100) {
                    errors.push(FieldError::new(
                        field,
                        format!("{s:?}: must not be greater than 100%"),
                    ));
                }
            }
            if surge == Some(0) && unavailable == Some(0) {
                errors.push(FieldError::new(field, "may not be 0 when `maxSurge` is 0"));
            }
        }
        other => errors.push(FieldError::new(
            "spec.strategy.type",
            format!(
                "unsupported value {other:?}: supported values: \"Recreate\", \"RollingUpdate\""
            ),
        )),
    }
}

/// `ValidatePositiveIntOrPercent`: the count or the percentage, if valid.
fn check_int_or_percent(
    field: &str,
    value: &IntOrString,
    errors: &mut Vec<FieldError>,
) -> Option<i64> {
    let n = match value {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => match parse_percent(s) {
            Ok(n) => n,
            Err(e) => {
                errors.push(FieldError::new(field, e));
                return None;
            }
        },
    };
    if n < 0 {
        errors.push(FieldError::new(field, format!("must be >= 0, got {n}")));
        return None;
    }
    Some(n)
}

impl_object!(Deployment {
    kind: "Deployment",
    api_version: "apps/v1",
    resource: "deployments",
    key_dir: "deployments",
    // The same JSON shape for every field kcm models; rewritten as apps/v1.
    read_api_versions: &["apps/v1beta2", "apps/v1beta1", "extensions/v1beta1"],
    spec: spec,
    validate: validate_deployment,
});

#[cfg(test)]
mod tests;
