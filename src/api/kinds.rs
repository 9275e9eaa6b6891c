//! The four kinds kcm stores (2014 `pkg/api/types.go` in its v1beta3 wire shape) and their
//! [`Object`] implementations.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::meta::null_as_default;
use super::pod_status::{ContainerStatus, PodCondition, CONDITION_TRUE, POD_READY};
use super::validation::{validate_labels, validate_replicas};
use super::{Extra, FieldError, Object, ObjectMeta, API_VERSION};
use crate::labels::Set;

/// Implements [`Object`] for a kind: `spec: spec` for a kind whose `spec` field is its
/// desired state (and so has a generation), `spec: none` for one without.
macro_rules! impl_object {
    ($ty:ident {
        kind: $kind:literal,
        api_version: $api_version:expr,
        resource: $resource:literal,
        key_dir: $dir:literal,
        $(read_api_versions: $read:expr,)?
        spec: $spec:tt,
        validate: $validate:expr $(,)?
    }) => {
        impl Object for $ty {
            const KIND: &'static str = $kind;
            const API_VERSION: &'static str = $api_version;
            $(const READ_API_VERSIONS: &'static [&'static str] = $read;)?
            const RESOURCE: &'static str = $resource;
            const KEY_DIR: &'static str = $dir;
            const HAS_SPEC: bool = impl_object!(@has_spec $spec);

            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
            fn set_type_meta(&mut self) {
                self.kind = $kind.to_string();
                self.api_version = Self::API_VERSION.to_string();
            }
            fn stored_kind(&self) -> &str {
                &self.kind
            }
            fn stored_api_version(&self) -> &str {
                &self.api_version
            }
            fn spec_digest(&self) -> u64 {
                #[allow(clippy::redundant_closure_call)]
                (impl_object!(@spec_digest $spec))(self)
            }
            fn same_spec(&self, other: &Self) -> bool {
                #[allow(clippy::redundant_closure_call)]
                (impl_object!(@same_spec $spec))(self, other)
            }
            fn validate_spec(&self, errors: &mut Vec<FieldError>) {
                #[allow(clippy::redundant_closure_call)]
                ($validate)(self, errors)
            }
        }
    };
    (@has_spec spec) => { true };
    (@has_spec none) => { false };
    (@spec_digest spec) => {
        |object: &Self| {
            use std::hash::{Hash as _, Hasher as _};
            let mut hasher = std::hash::DefaultHasher::new();
            serde_json::to_vec(&object.spec)
                .expect("a spec always encodes")
                .hash(&mut hasher);
            hasher.finish()
        }
    };
    (@spec_digest none) => { |_: &Self| 0 };
    (@same_spec spec) => { |a: &Self, b: &Self| a.spec == b.spec };
    (@same_spec none) => { |_: &Self, _: &Self| true };
}
pub(super) use impl_object;

/// A ReplicationController: keep `spec.replicas` pods matching `spec.selector` alive.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicationController {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ReplicationControllerSpec,
    #[serde(default, deserialize_with = "null_as_default")]
    pub status: ReplicationControllerStatus,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicationControllerSpec {
    /// Desired number of active pods. Signed so that a negative value can be reported
    /// by validation instead of failing to decode.
    #[serde(default)]
    pub replicas: i64,
    #[serde(default, deserialize_with = "null_as_default")]
    pub selector: Set,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplateSpec>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicationControllerStatus {
    /// Active pods the manager counted at its last sync (written by the manager).
    #[serde(default)]
    pub replicas: i64,
    /// Of those, the ready ones (v1's `readyReplicas`; 2014 had no such field). Read by
    /// the API's READY column.
    #[serde(default, skip_serializing_if = "super::meta::is_zero")]
    pub ready_replicas: i64,
    #[serde(flatten)]
    pub extra: Extra,
}

/// The pod a controller stamps out: labels in `metadata`, containers in `spec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplateSpec {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PodSpec,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default, deserialize_with = "null_as_default")]
    pub containers: Vec<Container>,
    /// The node the pod is bound to; empty while unassigned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub image: String,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub ports: Vec<ContainerPort>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default)]
    pub container_port: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A Pod. One without `status` is Pending.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PodSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PodStatus>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Pod {
    /// The pod's phase; a pod without status is Pending.
    pub fn phase(&self) -> PodPhase {
        self.status.as_ref().map_or(PodPhase::Pending, |s| s.phase)
    }

    /// `status.podIP`, if set and non-empty.
    pub fn pod_ip(&self) -> Option<&str> {
        self.status
            .as_ref()
            .map(|s| s.pod_ip.as_str())
            .filter(|ip| !ip.is_empty())
    }

    /// Whether the pod counts towards a controller's replicas (`filterActivePods`):
    /// everything except Succeeded and Failed.
    pub fn is_active(&self) -> bool {
        !matches!(self.phase(), PodPhase::Succeeded | PodPhase::Failed)
    }

    /// The `Ready` condition's status: `Some(true)` for "True", `Some(false)` for any
    /// other value, `None` when the pod reports no `Ready` condition (a 2014 document).
    pub fn ready_condition(&self) -> Option<bool> {
        self.status
            .as_ref()
            .and_then(PodStatus::ready_condition)
            .map(|c| c.status == CONDITION_TRUE)
    }

    /// Whether the pod is ready (`podutil.IsPodReady`): its `Ready` condition is "True".
    /// A pod without a `Ready` condition (written before kcm reported readiness, as in
    /// 2014) counts as ready once Running.
    pub fn is_ready(&self) -> bool {
        self.ready_condition()
            .unwrap_or(self.phase() == PodPhase::Running)
    }

    /// The `Ready` condition's `lastTransitionTime` (RFC 3339) when it is "True": the
    /// moment the pod became ready, from which availability is measured.
    pub fn ready_since(&self) -> Option<&str> {
        let condition = self.status.as_ref()?.ready_condition()?;
        (condition.status == CONDITION_TRUE)
            .then_some(condition.last_transition_time.as_deref())
            .flatten()
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    #[serde(default)]
    pub phase: PodPhase,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    #[serde(rename = "podIP", default, skip_serializing_if = "String::is_empty")]
    pub pod_ip: String,
    /// Written by kcm's kubelet from issue 13 on; absent in 2014 documents.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<PodCondition>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub container_statuses: Vec<ContainerStatus>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl PodStatus {
    /// The `Ready` condition, if reported.
    pub fn ready_condition(&self) -> Option<&PodCondition> {
        self.conditions.iter().find(|c| c.type_ == POD_READY)
    }
}

/// `PodPhase`. An unknown string makes the document undecodable rather than being
/// rewritten as something else.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
pub enum PodPhase {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl fmt::Display for PodPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A Service: a port in front of the pods its selector matches.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ServiceSpec,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    #[serde(default, deserialize_with = "null_as_default")]
    pub selector: Set,
    #[serde(default)]
    pub port: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    /// The pods' port: a number, or the name of a container port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_port: Option<IntOrString>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `util.IntOrString`: a JSON string is a name, a JSON number is a number.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(untagged)]
pub enum IntOrString {
    Int(i64),
    String(String),
}

/// The `ip:port` pairs currently behind a Service of the same namespace and name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Endpoints {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_as_default")]
    pub endpoints: Vec<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl_object!(ReplicationController {
    kind: "ReplicationController",
    api_version: API_VERSION,
    resource: "replicationcontrollers",
    key_dir: "controllers",
    spec: spec,
    validate: validate_controller,
});
impl_object!(Pod {
    kind: "Pod",
    api_version: API_VERSION,
    resource: "pods",
    key_dir: "pods",
    spec: spec,
    validate: |_: &Pod, _: &mut Vec<FieldError>| {},
});
impl_object!(Service {
    kind: "Service",
    api_version: API_VERSION,
    resource: "services",
    key_dir: "services/specs",
    spec: spec,
    validate: validate_service,
});
impl_object!(Endpoints {
    kind: "Endpoints",
    api_version: API_VERSION,
    resource: "endpoints",
    key_dir: "services/endpoints",
    spec: none,
    validate: |_: &Endpoints, _: &mut Vec<FieldError>| {},
});

pub(super) fn validate_controller(rc: &ReplicationController, errors: &mut Vec<FieldError>) {
    let spec = &rc.spec;
    validate_replicas(spec.replicas, errors);
    // An empty selector is Everything: the controller would count every pod in its
    // namespace as its own.
    if spec.selector.is_empty() {
        errors.push(FieldError::new(
            "spec.selector",
            "required (must not be empty)",
        ));
    }
    validate_labels("spec.selector", &spec.selector, errors);
    match &spec.template {
        None => errors.push(FieldError::new("spec.template", "required")),
        // A pod without labels could never be counted: 2014's manager refused to create
        // one ("Unable to create pod replica, no labels"). Without this rule a selector
        // `{"app": ""}` (which, as in 2014, matches a pod without `app`) would pass the
        // match below and the manager would create label-less pods.
        Some(template) if template.metadata.labels.is_empty() => errors.push(FieldError::new(
            "spec.template.metadata.labels",
            "required (must not be empty): a pod without labels could never be counted",
        )),
        Some(template) => {
            validate_labels(
                "spec.template.metadata.labels",
                &template.metadata.labels,
                errors,
            );
            // A template whose pods the selector does not match would make the
            // controller create pods forever.
            if !spec.selector.is_empty()
                && !spec
                    .selector
                    .as_selector()
                    .matches(&template.metadata.labels)
            {
                errors.push(FieldError::new(
                    "spec.template.metadata.labels",
                    format!(
                        "selector {} does not match template labels {{{}}}",
                        spec.selector, template.metadata.labels
                    ),
                ));
            }
        }
    }
}

pub(super) fn validate_service(service: &Service, errors: &mut Vec<FieldError>) {
    let spec = &service.spec;
    if spec.selector.is_empty() {
        errors.push(FieldError::new(
            "spec.selector",
            "required (must not be empty)",
        ));
    }
    validate_labels("spec.selector", &spec.selector, errors);
    if !(1..=65535).contains(&spec.port) {
        errors.push(FieldError::new(
            "spec.port",
            format!("must be between 1 and 65535, got {}", spec.port),
        ));
    }
    match &spec.container_port {
        Some(IntOrString::Int(port)) if !(0..=65535).contains(port) => {
            errors.push(FieldError::new(
                "spec.containerPort",
                format!("must be between 0 and 65535, got {port}"),
            ))
        }
        _ => {}
    }
}
