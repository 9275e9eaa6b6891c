//! `ObjectMeta` and the fields every kind carries (2014 `pkg/api/types.go`'s `ObjectMeta`,
//! `pkg/api/rest` for the system fields set on create).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::Extra;
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
pub(super) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
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
