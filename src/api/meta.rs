//! `ObjectMeta` and the fields every kind carries (2014 `pkg/api/types.go`'s `ObjectMeta`,
//! `pkg/api/rest` for the system fields set on create).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::{Extra, Object};
use crate::labels::Set;

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
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
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
    /// The version of the desired state: 1 on create, one more on every write that changes
    /// `spec` (see [`set_generation`]); 0 when missing (a document kcm never wrote).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "is_zero"
    )]
    pub generation: i64,
    /// RFC 3339; set while a deletion waits for its finalizers. `None` for a live object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
    /// What must happen before the object may be deleted (`orphan`, `foregroundDeletion`,
    /// or anyone's own); unknown finalizers are kept.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub finalizers: Vec<String>,
    /// The objects this one depends on; at most one of them is its controller
    /// ([`controller_of`]).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub owner_references: Vec<OwnerReference>,
    /// What this copy knows of the stored spec; never serialized (see [`ReadSpec`]).
    #[serde(skip)]
    pub read_spec: ReadSpec,
    /// Which incarnation of the object this copy is; never serialized (see
    /// [`CreateRevision`]).
    #[serde(skip)]
    pub create_revision: CreateRevision,
    #[serde(flatten)]
    pub extra: Extra,
}

/// The spec a copy was read with (the revision read at, the stored generation, a digest of
/// the stored spec), so that a compare-and-swap can tell whether it changes the spec
/// without reading the stored value again. Set by [`remember_spec`] where a copy is
/// likely to be written back (a registry `get` or write, a typed watch event, the caches
/// that keep whole objects); never serialized, and not part of the object's
/// value: any two compare equal.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadSpec(Option<ReadSpecAt>);

#[derive(Clone, Copy, Debug)]
struct ReadSpecAt {
    revision: i64,
    generation: i64,
    digest: u64,
}

impl PartialEq for ReadSpec {
    fn eq(&self, _: &ReadSpec) -> bool {
        true
    }
}

/// The etcd `create_revision` of the key a copy was read from: what tells the object's
/// incarnations apart (a key deleted and written again gets a new one), so that a write
/// guarded by the object's incarnation compares this one number. Set where a copy is
/// decoded from an etcd key-value (a registry read, a cache's list or watch event);
/// `None` for a copy built by hand or read through an API server. Never serialized, and
/// not part of the object's value: any two compare equal.
#[derive(Clone, Copy, Debug, Default)]
pub struct CreateRevision(pub Option<i64>);

impl CreateRevision {
    /// The create revision of a key-value as etcd reports it: 0 (no key, or a source
    /// that does not know) is `None`.
    pub fn of(create_revision: i64) -> CreateRevision {
        CreateRevision((create_revision > 0).then_some(create_revision))
    }
}

impl PartialEq for CreateRevision {
    fn eq(&self, _: &CreateRevision) -> bool {
        true
    }
}

/// Records the spec `object` holds at its resourceVersion as the stored one (after a read
/// or a write of exactly this object).
pub fn remember_spec<T: Object>(object: &mut T) {
    if !T::HAS_SPEC {
        return;
    }
    let Some(revision) = object.metadata().resource_version else {
        return;
    };
    let at = ReadSpecAt {
        revision: revision.0,
        generation: object.metadata().generation,
        digest: object.spec_digest(),
    };
    object.metadata_mut().read_spec = ReadSpec(Some(at));
}

/// [`set_generation`] against the spec `object` was read with, when it is still at the
/// revision it was read at (so a compare-and-swap on that revision writes over exactly
/// that spec). `false` when the copy cannot tell (built by hand, or its resourceVersion
/// changed since): the caller reads the stored value instead.
pub fn set_generation_from_read<T: Object>(object: &mut T) -> bool {
    if !T::HAS_SPEC {
        return true;
    }
    let meta = object.metadata();
    let (Some(at), Some(revision)) = (meta.read_spec.0, meta.resource_version) else {
        return false;
    };
    if at.revision != revision.0 {
        return false;
    }
    let changed = object.spec_digest() != at.digest;
    object.metadata_mut().generation = at.generation.saturating_add(i64::from(changed));
    true
}

pub(super) fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// `metav1.OwnerReference`: an object this one depends on. It has no namespace: the owner
/// is always in the dependent's namespace, found by name, and is the owner only if its uid
/// matches (a same-named object with another uid is a later incarnation, not the owner).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    /// The owner's `apiVersion`, e.g. `apps/v1`.
    #[serde(default)]
    pub api_version: String,
    /// The owner's `kind`, e.g. `ReplicaSet`.
    #[serde(default)]
    pub kind: String,
    /// The owner's name, in the dependent's namespace.
    #[serde(default)]
    pub name: String,
    /// The owner's uid.
    #[serde(default)]
    pub uid: String,
    /// Whether the owner is the dependent's managing controller; `None` (absent) is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
    /// Whether a foreground deletion of the owner waits for this dependent; `None` (absent)
    /// is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_owner_deletion: Option<bool>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl OwnerReference {
    /// Whether this reference names the managing controller (`controller: true`).
    pub fn is_controller(&self) -> bool {
        self.controller == Some(true)
    }
}

/// The owner reference of `meta` that is its managing controller, if any
/// (`metav1.GetControllerOf`). Validation allows at most one; should a document written by
/// someone else carry several, the first one counts, as in Kubernetes.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references.iter().find(|r| r.is_controller())
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

/// The finalizer of a foreground deletion: the object goes after every dependent whose
/// reference has `blockOwnerDeletion` (Kubernetes' `metav1.FinalizerDeleteDependents`).
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";
/// The finalizer of an orphaning deletion: the object goes after its dependents lost their
/// references to it (Kubernetes' `metav1.FinalizerOrphanDependents`).
pub const FINALIZER_ORPHAN: &str = "orphan";

/// Marks `meta` for deletion, as the apiserver does for a delete that must wait: sets
/// `deletionTimestamp` (unless set) and adds `finalizer` (unless present; `None` adds
/// none).
pub fn start_deletion(meta: &mut ObjectMeta, finalizer: Option<&str>) {
    if meta.deletion_timestamp.is_none() {
        meta.deletion_timestamp = Some(now_rfc3339());
    }
    if let Some(finalizer) = finalizer {
        if !meta.finalizers.iter().any(|f| f == finalizer) {
            meta.finalizers.push(finalizer.to_string());
        }
    }
}

/// kubectl's annotation holding the configuration last applied, as compact JSON: written by
/// client-side apply (`kcm apply`, `kubectl apply`), read by the apiserver when kubectl
/// moves an object to server-side apply.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The current time as RFC 3339 (seconds), for `creationTimestamp`.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// `at` as a `MicroTime`: RFC 3339 in UTC with microseconds (a Lease's `renewTime`).
pub fn micro_time(at: std::time::SystemTime) -> String {
    humantime::format_rfc3339_micros(at).to_string()
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

/// What every create stores beyond the object it was given, as the apiserver's
/// `PrepareForCreate`: its system fields ([`fill_system_fields`]) and generation 1
/// ([`set_generation`]). The registry's creates, the apiserver's and the bench's baseline
/// documents all go through it, so what they store cannot drift apart.
pub fn fill_created<T: Object>(object: &mut T) {
    fill_system_fields(object.metadata_mut());
    set_generation(None, object);
}

/// Sets `metadata.generation` of `new`, about to be written over `old` (`None` on create),
/// as Kubernetes' apiserver does in its registry strategies (`PrepareForCreate`,
/// `PrepareForUpdate`): 1 on create, and on update the stored generation plus one exactly
/// when `spec` changed. kcm has no apiserver, so the registry calls this on every create
/// and compare-and-swap; no writer sets a generation itself, and whatever `new` carries is
/// overwritten. A stored document without a generation counts as 0. Kinds without a spec
/// ([`Object::HAS_SPEC`] false) are left alone.
pub fn set_generation<T: Object>(old: Option<&T>, new: &mut T) {
    if !T::HAS_SPEC {
        return;
    }
    let generation = match old {
        None => 1,
        Some(old) if old.same_spec(new) => old.metadata().generation,
        Some(old) => old.metadata().generation.saturating_add(1),
    };
    new.metadata_mut().generation = generation;
}
