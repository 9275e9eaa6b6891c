//! The object model: the four kinds kcm stores in etcd, their keys, and their validation.
//!
//! Mirrors the late-2014 `pkg/api/types.go` (in its v1beta3 wire shape) and
//! `pkg/api/validation/validation.go`, and the key layout of `pkg/registry/etcd/etcd.go`.
//!
//! The JSON documents and the keys are a public contract: other tools write them with
//! etcdctl. Two invariants follow from that:
//! - every struct keeps the fields it does not know in a flattened `extra` map, so a
//!   read-modify-write by kcm never drops what a user wrote;
//! - `metadata.resourceVersion` is never trusted from the document: it is the key's etcd
//!   `mod_revision`, filled in by whoever decoded the value ([`decode`]).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::labels::{self, Set};

/// The only wire version kcm reads and writes.
pub const API_VERSION: &str = "v1beta3";
/// The namespace used when none is given (`api.NamespaceDefault`).
pub const DEFAULT_NAMESPACE: &str = "default";
/// The key prefix used when `--prefix` is not given.
pub const DEFAULT_PREFIX: &str = "/registry";

/// Fields of a document that kcm does not model; written back unchanged.
pub type Extra = serde_json::Map<String, Value>;

/// An etcd revision used as an object's or a list's version.
///
/// On the wire it is a decimal string (`metadata.resourceVersion`); in etcd it is the
/// key's `mod_revision` (objects) or the header revision of a read (lists).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ResourceVersion(pub i64);

impl fmt::Display for ResourceVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for ResourceVersion {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(ResourceVersion(n)),
            _ => anyhow::bail!("resourceVersion {s:?} is not a non-negative integer"),
        }
    }
}

impl Serialize for ResourceVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Reads `metadata.resourceVersion` leniently: a stored value is ignored anyway (the
/// decoder overwrites it with the `mod_revision`), so junk must not make the document
/// undecodable.
fn lenient_resource_version<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<ResourceVersion>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_i64().filter(|n| *n >= 0).map(ResourceVersion),
        _ => None,
    })
}

/// Treats an explicit JSON `null` like a missing field, as Go's decoder did.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// `ObjectMeta`: what every kind carries.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// DNS subdomain, unique per kind and namespace; the last key segment.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The namespace; the key segment before the name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Set once at creation (a random UUID).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Set::is_empty"
    )]
    pub labels: Set,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub annotations: BTreeMap<String, String>,
    /// RFC 3339, set at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// The etcd `mod_revision` this copy was read at; `None` for an object never stored.
    #[serde(
        default,
        deserialize_with = "lenient_resource_version",
        skip_serializing_if = "Option::is_none"
    )]
    pub resource_version: Option<ResourceVersion>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl ObjectMeta {
    /// A metadata block with just a namespace and a name.
    pub fn named(namespace: impl Into<String>, name: impl Into<String>) -> ObjectMeta {
        ObjectMeta {
            namespace: namespace.into(),
            name: name.into(),
            ..ObjectMeta::default()
        }
    }

    /// `namespace/name`, the form used in logs, work queues and errors.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// A kind stored under the prefix. Implemented by the four kinds below.
pub trait Object:
    Serialize + DeserializeOwned + Clone + Default + fmt::Debug + Send + Sync + 'static
{
    /// The `kind` field, e.g. `Pod`.
    const KIND: &'static str;
    /// The plural resource name used on the command line, e.g. `pods`.
    const RESOURCE: &'static str;
    /// The directory under the prefix, e.g. `services/specs`.
    const KEY_DIR: &'static str;

    fn metadata(&self) -> &ObjectMeta;
    fn metadata_mut(&mut self) -> &mut ObjectMeta;
    /// Sets `kind` and `apiVersion` to this type's values (done before every write).
    fn set_type_meta(&mut self);
    /// The `kind` the document claimed when it was decoded ("" if absent).
    fn stored_kind(&self) -> &str;
    /// Kind-specific validation; [`validate`] adds the metadata rules.
    fn validate_spec(&self, errors: &mut Vec<FieldError>);
}

macro_rules! impl_object {
    ($ty:ty, $kind:literal, $resource:literal, $dir:literal, $validate:expr) => {
        impl Object for $ty {
            const KIND: &'static str = $kind;
            const RESOURCE: &'static str = $resource;
            const KEY_DIR: &'static str = $dir;

            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
            fn set_type_meta(&mut self) {
                self.kind = $kind.to_string();
                self.api_version = API_VERSION.to_string();
            }
            fn stored_kind(&self) -> &str {
                &self.kind
            }
            fn validate_spec(&self, errors: &mut Vec<FieldError>) {
                #[allow(clippy::redundant_closure_call)]
                ($validate)(self, errors)
            }
        }
    };
}

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
    #[serde(flatten)]
    pub extra: Extra,
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

impl_object!(
    ReplicationController,
    "ReplicationController",
    "replicationcontrollers",
    "controllers",
    validate_controller
);
impl_object!(
    Pod,
    "Pod",
    "pods",
    "pods",
    |_: &Pod, _: &mut Vec<FieldError>| {}
);
impl_object!(
    Service,
    "Service",
    "services",
    "services/specs",
    validate_service
);
impl_object!(
    Endpoints,
    "Endpoints",
    "endpoints",
    "services/endpoints",
    |_: &Endpoints, _: &mut Vec<FieldError>| {}
);

// ---------------------------------------------------------------------------------------
// Keys

/// Normalizes a `--prefix` value: a leading `/`, no trailing `/`.
///
/// # Errors
/// When the prefix is empty or `/` (kcm would then own the whole keyspace).
pub fn normalize_prefix(prefix: &str) -> anyhow::Result<String> {
    let trimmed = prefix.trim().trim_end_matches('/');
    anyhow::ensure!(
        !trimmed.is_empty(),
        "prefix {prefix:?} is empty; use a directory such as {DEFAULT_PREFIX}"
    );
    Ok(if trimmed.starts_with('/') {
        trimmed.to_string()
    } else {
        format!("/{trimmed}")
    })
}

/// `{prefix}/{dir}/{namespace}/{name}`.
pub fn object_key<T: Object>(prefix: &str, namespace: &str, name: &str) -> String {
    format!("{prefix}/{}/{namespace}/{name}", T::KEY_DIR)
}

/// The key prefix a list or watch of `T` ranges over: one namespace, or all of them.
/// Always ends in `/`, so namespace `a` does not also match namespace `ab`.
pub fn list_key<T: Object>(prefix: &str, namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("{prefix}/{}/{ns}/", T::KEY_DIR),
        None => format!("{prefix}/{}/", T::KEY_DIR),
    }
}

/// Splits an object key back into `(namespace, name)`; `None` for any other key
/// (the directory itself, a deeper key, a key of another kind).
pub fn parse_key<'k, T: Object>(prefix: &str, key: &'k str) -> Option<(&'k str, &'k str)> {
    let rest = key.strip_prefix(prefix)?.strip_prefix('/')?;
    let rest = rest.strip_prefix(T::KEY_DIR)?.strip_prefix('/')?;
    let (namespace, name) = rest.split_once('/')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains('/')).then_some((namespace, name))
}

// ---------------------------------------------------------------------------------------
// Decoding

/// Decodes a stored document of kind `T` read from `key` at `mod_revision`.
///
/// Fills `metadata.resourceVersion` from the revision (a stored value is ignored) and
/// `metadata.namespace`/`name` from the key when the document leaves them out.
///
/// # Errors
/// When the value is not JSON of this kind's shape, names another kind, or names
/// another object than its key.
pub fn decode<T: Object>(
    prefix: &str,
    key: &str,
    value: &[u8],
    mod_revision: i64,
) -> anyhow::Result<T> {
    let mut object: T = serde_json::from_slice(value).map_err(|e| anyhow::anyhow!("{e}"))?;
    let stored_kind = object.stored_kind();
    anyhow::ensure!(
        stored_kind.is_empty() || stored_kind == T::KIND,
        "kind is {stored_kind:?}, expected {:?}",
        T::KIND
    );
    if let Some((namespace, name)) = parse_key::<T>(prefix, key) {
        let meta = object.metadata_mut();
        for (field, stored, from_key) in [
            ("namespace", &mut meta.namespace, namespace),
            ("name", &mut meta.name, name),
        ] {
            if stored.is_empty() {
                *stored = from_key.to_string();
            } else {
                anyhow::ensure!(
                    stored == from_key,
                    "metadata.{field} {stored:?} does not match the key's {from_key:?}"
                );
            }
        }
    }
    object.metadata_mut().resource_version = Some(ResourceVersion(mod_revision));
    Ok(object)
}

/// Encodes an object for storage: `kind` and `apiVersion` set, no `resourceVersion`
/// (the revision lives in etcd, not in the document).
pub fn encode<T: Object>(object: &T) -> anyhow::Result<Vec<u8>> {
    let mut object = object.clone();
    object.set_type_meta();
    object.metadata_mut().resource_version = None;
    Ok(serde_json::to_vec(&object)?)
}

// ---------------------------------------------------------------------------------------
// Validation (late-2014 pkg/api/validation)

/// One invalid field: its JSON path and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// An object that failed validation; names the object and every bad field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} {name:?}: {}", .errors.iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>().join("; "))]
pub struct ValidationError {
    pub kind: &'static str,
    /// `namespace/name` of the object.
    pub name: String,
    pub errors: Vec<FieldError>,
}

/// Validates an object as the late-2014 apiserver did on create and update.
///
/// # Errors
/// A [`ValidationError`] listing every invalid field.
pub fn validate<T: Object>(object: &T) -> Result<(), ValidationError> {
    let mut errors = Vec::new();
    let meta = object.metadata();
    for (field, value) in [
        ("metadata.name", &meta.name),
        ("metadata.namespace", &meta.namespace),
    ] {
        if value.is_empty() {
            errors.push(FieldError::new(field, "required"));
        } else if let Err(reason) = labels::validate_dns_subdomain(value) {
            errors.push(FieldError::new(field, format!("{value:?} {reason}")));
        }
    }
    validate_labels("metadata.labels", &meta.labels, &mut errors);
    object.validate_spec(&mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ValidationError {
            kind: T::KIND,
            name: meta.key(),
            errors,
        })
    }
}

fn validate_labels(field: &str, set: &Set, errors: &mut Vec<FieldError>) {
    for (key, value) in set.iter() {
        if let Err(reason) = labels::validate_key(key) {
            errors.push(FieldError::new(field, format!("key {key:?} {reason}")));
        }
        if let Err(reason) = labels::validate_value(value) {
            errors.push(FieldError::new(
                format!("{field}.{key}"),
                format!("value {value:?} {reason}"),
            ));
        }
    }
}

fn validate_controller(rc: &ReplicationController, errors: &mut Vec<FieldError>) {
    let spec = &rc.spec;
    if spec.replicas < 0 {
        errors.push(FieldError::new(
            "spec.replicas",
            format!("must be >= 0, got {}", spec.replicas),
        ));
    }
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

fn validate_service(service: &Service, errors: &mut Vec<FieldError>) {
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

/// The current time as RFC 3339 (seconds), for `creationTimestamp`.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Fills `uid` and `creationTimestamp` when absent, as the apiserver did on create.
pub fn fill_system_fields(meta: &mut ObjectMeta) {
    if meta.uid.is_empty() {
        meta.uid = uuid::Uuid::new_v4().to_string();
    }
    if meta.creation_timestamp.is_none() {
        meta.creation_timestamp = Some(now_rfc3339());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rc(value: Value) -> ReplicationController {
        serde_json::from_value(value).unwrap()
    }

    fn valid_rc() -> Value {
        json!({
            "kind": "ReplicationController",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 3,
                "selector": {"app": "web"},
                "template": {
                    "metadata": {"labels": {"app": "web", "tier": "front"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx",
                        "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}]}]}
                }
            }
        })
    }

    #[track_caller]
    fn check_invalid(patch: impl FnOnce(&mut Value), field: &str, message_part: &str) {
        let mut value = valid_rc();
        patch(&mut value);
        let err = validate(&rc(value)).unwrap_err();
        assert!(
            err.errors
                .iter()
                .any(|e| e.field == field && e.message.contains(message_part)),
            "expected {field}: ..{message_part}.. in {err}"
        );
        assert!(err
            .to_string()
            .starts_with("invalid ReplicationController \""));
    }

    #[test]
    fn valid_controller_passes() {
        validate(&rc(valid_rc())).unwrap();
    }

    #[test]
    fn controller_validation_rules() {
        check_invalid(
            |v| v["spec"]["selector"] = json!({}),
            "spec.selector",
            "required",
        );
        check_invalid(
            |v| v["spec"]["replicas"] = json!(-1),
            "spec.replicas",
            ">= 0",
        );
        check_invalid(
            |v| {
                v["spec"]
                    .as_object_mut()
                    .unwrap()
                    .remove("template")
                    .map(drop)
                    .unwrap()
            },
            "spec.template",
            "required",
        );
        check_invalid(
            |v| v["spec"]["selector"] = json!({"app": "db"}),
            "spec.template.metadata.labels",
            "does not match",
        );
        check_invalid(
            |v| v["metadata"]["name"] = json!("Web_1"),
            "metadata.name",
            "Web_1",
        );
        check_invalid(
            |v| {
                v["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("namespace")
                    .map(drop)
                    .unwrap()
            },
            "metadata.namespace",
            "required",
        );
        check_invalid(
            |v| v["metadata"]["labels"] = json!({"bad key": "x"}),
            "metadata.labels",
            "bad key",
        );
    }

    #[test]
    fn service_validation_rules() {
        let service = |spec: Value| -> Service {
            serde_json::from_value(
                json!({"metadata": {"name": "s", "namespace": "ns"}, "spec": spec}),
            )
            .unwrap()
        };
        validate(&service(json!({"selector": {"a": "b"}, "port": 80}))).unwrap();
        let fields = |spec| {
            validate(&service(spec))
                .unwrap_err()
                .errors
                .into_iter()
                .map(|e| e.field)
                .collect::<Vec<_>>()
        };
        assert_eq!(fields(json!({"port": 80})), ["spec.selector"]);
        assert_eq!(
            fields(json!({"selector": {"a": "b"}, "port": 0})),
            ["spec.port"]
        );
        assert_eq!(
            fields(json!({"selector": {"a": "b"}, "port": 65536})),
            ["spec.port"]
        );
    }

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let mut value = valid_rc();
        value["futureField"] = json!({"x": [1, 2]});
        value["metadata"]["generation"] = json!(7);
        value["spec"]["minReadySeconds"] = json!(5);
        value["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({"cpu": "1"});
        value["status"] = json!({"replicas": 2, "observedGeneration": 7});
        let decoded: ReplicationController = serde_json::from_value(value.clone()).unwrap();
        let encoded = serde_json::to_value(&decoded).unwrap();
        assert_eq!(encoded, value);
    }

    #[test]
    fn decode_fills_version_and_key_fields_and_ignores_stored_version() {
        let doc = br#"{"metadata": {"resourceVersion": "junk", "labels": null}, "spec": {}}"#;
        let pod: Pod = decode("/registry", "/registry/pods/ns1/p1", doc, 42).unwrap();
        assert_eq!(pod.metadata.resource_version, Some(ResourceVersion(42)));
        assert_eq!(pod.metadata.key(), "ns1/p1");
        assert_eq!(pod.phase(), PodPhase::Pending);
        assert!(pod.is_active());
        let encoded = String::from_utf8(encode(&pod).unwrap()).unwrap();
        assert!(!encoded.contains("resourceVersion"), "{encoded}");
        assert!(
            encoded.contains(r#""kind":"Pod","apiVersion":"v1beta3""#),
            "{encoded}"
        );
    }

    #[test]
    fn decode_errors_name_the_problem() {
        let check = |doc: &str, part: &str| {
            let err = decode::<Pod>("/registry", "/registry/pods/ns/p", doc.as_bytes(), 1)
                .unwrap_err()
                .to_string();
            assert!(err.contains(part), "{err:?} should contain {part:?}");
        };
        check("{not json", "key must be a string");
        check(r#"{"kind": "Service"}"#, "kind is \"Service\"");
        check(
            r#"{"metadata": {"name": "other"}}"#,
            "metadata.name \"other\" does not match",
        );
        check(
            r#"{"status": {"phase": "Waiting"}}"#,
            "unknown variant `Waiting`",
        );
    }

    #[test]
    fn int_or_string() {
        let spec = |v: Value| {
            serde_json::from_value::<ServiceSpec>(json!({"containerPort": v}))
                .unwrap()
                .container_port
        };
        assert_eq!(spec(json!(8080)), Some(IntOrString::Int(8080)));
        assert_eq!(
            spec(json!("http")),
            Some(IntOrString::String("http".into()))
        );
    }

    #[test]
    fn keys() {
        assert_eq!(
            object_key::<Service>("/registry", "ns", "s"),
            "/registry/services/specs/ns/s"
        );
        assert_eq!(
            list_key::<Endpoints>("/registry", Some("ns")),
            "/registry/services/endpoints/ns/"
        );
        assert_eq!(
            list_key::<ReplicationController>("/r", None),
            "/r/controllers/"
        );
        assert_eq!(
            parse_key::<Pod>("/registry", "/registry/pods/ns/p"),
            Some(("ns", "p"))
        );
        for other in [
            "/registry/pods/ns",
            "/registry/pods/",
            "/registry/pods/ns/p/x",
            "/registry/controllers/ns/p",
            "/registry/pods//p",
        ] {
            assert_eq!(parse_key::<Pod>("/registry", other), None, "{other}");
        }
        assert_eq!(normalize_prefix("registry/").unwrap(), "/registry");
        assert!(normalize_prefix("/").is_err());
    }

    #[test]
    fn resource_version_parsing() {
        assert_eq!(
            "17".parse::<ResourceVersion>().unwrap(),
            ResourceVersion(17)
        );
        assert!("abc".parse::<ResourceVersion>().is_err());
        assert!("-1".parse::<ResourceVersion>().is_err());
    }
}
