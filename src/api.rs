//! The object model: the kinds kcm stores in etcd, their keys, and their validation.
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
//!
//! The module is split along its seams: `meta` (`ObjectMeta` and what every kind carries),
//! `kinds` (the 2014 kinds and their [`Object`] implementations), `node` (the Node and
//! registration keys and Node conditions; Nodes are JSON values, not a typed kind),
//! `namespace` (the Namespace key, a new and a terminating Namespace, JSON values too), `replicaset` and `deployment` (the apps/v1
//! `ReplicaSet` and `Deployment`), `codec` (keys,
//! `encode`/`decode`), `validation` and `label_selector` (the apps/v1 `LabelSelector`). Everything public is re-exported here, so callers
//! name `api::Pod`, `api::decode`, `api::validate`.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

mod codec;
mod deletion;
mod deployment;
mod kinds;
mod label_selector;
mod meta;
mod namespace;
mod node;
mod overlap;
mod pod_status;
mod replicaset;
#[cfg(test)]
mod tests;
mod validation;

pub use codec::{
    check_type, decode, encode, list_key, normalize_prefix, object_key, parse_key, takes_key_name,
};
pub use deletion::{
    delete_write, deletion_grace_period, grace_remaining, graceful_delete, pod_grace_period,
    start_graceful_deletion, Cascade, DeleteWrite, Graceful, DEFAULT_GRACE_PERIOD_SECONDS,
    DELETION_GRACE_PERIOD_FIELD,
};
pub use deployment::{
    equal_ignore_hash, is_controlled_by, pod_template_hash, resolve_fenceposts, revision,
    scaled_value_from_int_or_percent, template_hash, Deployment, DeploymentCondition,
    DeploymentSpec, DeploymentStatus, DeploymentStrategy, RollingUpdateDeployment,
    ANNOTATIONS_TO_SKIP, CHANGE_CAUSE_ANNOTATION, DEFAULT_MAX_SURGE, DEFAULT_MAX_UNAVAILABLE,
    DEFAULT_PROGRESS_DEADLINE_SECONDS, DEFAULT_REVISION_HISTORY_LIMIT, DEPLOYMENT_AVAILABLE,
    DEPLOYMENT_PROGRESSING, DEPLOYMENT_REPLICA_FAILURE, DESIRED_REPLICAS_ANNOTATION,
    FAILED_RS_CREATE_REASON, FOUND_NEW_RS_REASON, LAST_APPLIED_CONFIG_ANNOTATION,
    MAX_REPLICAS_ANNOTATION, MINIMUM_REPLICAS_AVAILABLE, MINIMUM_REPLICAS_UNAVAILABLE,
    NEW_REPLICA_SET_REASON, NEW_RS_AVAILABLE_REASON, PAUSED_DEPLOY_REASON, POD_TEMPLATE_HASH_LABEL,
    RECREATE, REPLICA_SET_UPDATED_REASON, RESUMED_DEPLOY_REASON, REVISION_ANNOTATION,
    REVISION_HISTORY_ANNOTATION, ROLLBACK_TO_ANNOTATION, ROLLING_UPDATE, TIMED_OUT_REASON,
};
pub use kinds::{
    Container, ContainerPort, Endpoints, IntOrString, Pod, PodPhase, PodSpec, PodStatus,
    PodTemplateSpec, ReplicationController, ReplicationControllerSpec, ReplicationControllerStatus,
    Service, ServiceSpec,
};
pub use label_selector::{
    label_selector_as_selector, validate_label_selector, LabelSelector, LabelSelectorOperator,
    LabelSelectorRequirement, UnrepresentableSelector,
};
pub use meta::{
    controller_of, fill_created, micro_time, now_rfc3339, null_as_default, remember_spec,
    set_generation, set_generation_from_read, start_deletion, CreateRevision, ObjectMeta,
    OwnerReference, ReadSpec, ResourceVersion, FINALIZER_FOREGROUND, FINALIZER_ORPHAN,
    LAST_APPLIED_ANNOTATION,
};
pub use namespace::{
    is_terminating, namespace_key, new_namespace, start_terminating, IMMORTAL_NAMESPACES,
    NAMESPACES_DIR, NAMESPACE_ACTIVE, NAMESPACE_KIND, NAMESPACE_TERMINATING, SYSTEM_NAMESPACES,
};
pub use node::{
    name_under, node_condition, node_condition_mut, node_condition_status, node_key,
    node_lease_directory, node_lease_key, object_field, registration_key, CONDITION_UNKNOWN,
    LEASES_DIR, NODES_DIR, NODE_API_VERSION, NODE_CONDITION_TYPES, NODE_KIND, NODE_LEASE_NAMESPACE,
    NODE_READY, REGISTRATIONS_DIR,
};
pub use overlap::{controllers_overlap, pods_overlap, selection, selector_matches};
pub use pod_status::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, PodCondition, CONDITION_FALSE, CONDITION_TRUE, POD_READY,
};
pub use replicaset::{
    ReplicaSet, ReplicaSetCondition, ReplicaSetSpec, ReplicaSetStatus, REPLICA_FAILURE,
};
pub use validation::{validate, FieldError, ValidationError, MAX_REPLICAS};

/// kcm's core wire version: the `apiVersion` of its 2014 kinds (ReplicationController, Pod,
/// Service, Endpoints) and of the `List` and `Status` documents it prints. Each kind's own
/// version is [`Object::API_VERSION`].
pub const API_VERSION: &str = "v1beta3";
/// The namespace used when none is given (`api.NamespaceDefault`).
pub const DEFAULT_NAMESPACE: &str = "default";
/// The key prefix used when `--prefix` is not given.
pub const DEFAULT_PREFIX: &str = "/registry";

/// Fields of a document that kcm does not model; written back unchanged.
pub type Extra = serde_json::Map<String, Value>;

/// A kind stored under the prefix. Implemented by the kinds in `kinds` and `replicaset`.
pub trait Object:
    Serialize + DeserializeOwned + Clone + Default + fmt::Debug + Send + Sync + 'static
{
    /// The `kind` field, e.g. `Pod`.
    const KIND: &'static str;
    /// The `apiVersion` this kind is stored with, e.g. `v1beta3` or `apps/v1`: written by
    /// [`encode`], and the one [`decode`] accepts besides a missing one and
    /// [`Object::READ_API_VERSIONS`].
    const API_VERSION: &'static str;
    /// Older versions of the same JSON shape that [`decode`] also accepts (and [`encode`]
    /// rewrites as [`Object::API_VERSION`]); none by default.
    const READ_API_VERSIONS: &'static [&'static str] = &[];
    /// The plural resource name used on the command line, e.g. `pods`.
    const RESOURCE: &'static str;
    /// The directory under the prefix, e.g. `services/specs`.
    const KEY_DIR: &'static str;
    /// Whether the kind has a `spec` (its desired state), and so a `metadata.generation`
    /// that kcm maintains ([`set_generation`]). Endpoints has none.
    const HAS_SPEC: bool;

    fn metadata(&self) -> &ObjectMeta;
    fn metadata_mut(&mut self) -> &mut ObjectMeta;
    /// Sets `kind` and `apiVersion` to this type's values (done before every write).
    fn set_type_meta(&mut self);
    /// The `kind` the document claimed when it was decoded ("" if absent).
    fn stored_kind(&self) -> &str;
    /// The `apiVersion` the document claimed when it was decoded ("" if absent).
    fn stored_api_version(&self) -> &str;
    /// Whether `self` and `other` have equal specs, unknown fields included (Kubernetes'
    /// `apiequality.Semantic.DeepEqual(old.Spec, new.Spec)`); true for a kind without one.
    fn same_spec(&self, other: &Self) -> bool;
    /// A digest of the encoded `spec` (0 for a kind without one): equal specs, equal
    /// digests, within one process.
    fn spec_digest(&self) -> u64;
    /// Kind-specific validation; [`validate`] adds the metadata rules.
    fn validate_spec(&self, errors: &mut Vec<FieldError>);
}
