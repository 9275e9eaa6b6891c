//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`) turned into the JSON
//! the JSON path decodes, so every write handler takes them unchanged.
//!
//! Mirrors `staging/src/k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go`:
//! a body is the magic `k8s\0` and a `runtime.Unknown` whose `typeMeta` names the kind and
//! whose `raw` is the kind's message. kubectl's generator commands (`kubectl create
//! deployment|service|namespace`, `autoscale`) and client-go ≥ 1.31 typed clients send
//! protobuf and never fall back to JSON.
//!
//! The messages are k8s-pb's (prost); k8s-pb has no serde, so `protobuf/*.rs`, generated
//! by `scripts/gen-protobuf-json.py`, gives each message reachable from a served kind a
//! [`ToJson`] naming its fields' JSON names. Time, Quantity, IntOrString, FieldsV1 and
//! RawExtension are written here: their JSON is not their fields.
//!
//! Invariants: the JSON is what Go's `encoding/json` writes for the same object with
//! `omitempty`: fields that are unset, empty strings, empty lists, maps and objects are
//! left out (Go's protobuf writes every non-pointer field, empty or not, and which field
//! is a pointer is not in the message); numbers and booleans are kept, so `replicas: 0`
//! stays. The envelope's `apiVersion` and `kind` are the object's.

use std::collections::BTreeMap;

use k8s_pb::api::autoscaling;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{RawExtension, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{Map, Value};

use super::errors::ApiError;

mod apps_v1;
mod autoscaling_v1;
mod coordination_v1;
mod core_v1;
mod meta_v1;

/// The four bytes before every protobuf body (`k8s\0`).
pub const MAGIC: &[u8] = b"k8s\0";

/// The media type of protobuf bodies.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Decodes a protobuf body into the object's JSON, `apiVersion` and `kind` included;
/// `served` says how a served kind's message decodes (`resources::protobuf_of`: the
/// registry row's), given the envelope's `apiVersion` and `kind`.
///
/// # Errors
/// 400 for a body without the magic, one that is not protobuf, or a kind kcm does not
/// decode; 415 for a compressed one (`contentEncoding`).
pub fn decode(
    bytes: &[u8],
    served: impl Fn(&str, &str) -> Option<FromProtobuf>,
) -> Result<Value, ApiError> {
    let message = bytes.strip_prefix(MAGIC).ok_or_else(|| {
        ApiError::bad_request("the protobuf body does not start with the k8s\\0 prefix")
    })?;
    let unknown = Unknown::decode(message)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid protobuf: {e}")))?;
    if let Some(encoding) = unknown
        .content_encoding
        .as_deref()
        .filter(|e| !e.is_empty())
    {
        return Err(ApiError::unsupported_media_type(format!(
            "protobuf bodies with contentEncoding {encoding:?} are not supported"
        )));
    }
    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    let raw = unknown.raw.unwrap_or_default();
    // A served kind decodes as its registry row says; the kind of a subresource and the
    // options of a delete are not resources.
    let served = served(&api_version, &kind);
    let mut object = match (served, api_version.as_str(), kind.as_str()) {
        (Some(from_protobuf), _, _) => from_protobuf(&raw),
        (None, "autoscaling/v1", "Scale") => json_of::<autoscaling::v1::Scale>(&raw),
        // DeleteOptions are sent as meta.k8s.io/v1, or as the group of the object.
        (None, _, "DeleteOptions") => json_of::<meta::DeleteOptions>(&raw),
        _ => {
            return Err(ApiError::bad_request(format!(
                "no kind {kind:?} is registered for version {api_version:?} in protobuf bodies"
            )))
        }
    }?;
    // apiVersion and kind first, as kubectl's JSON has them.
    let mut with_type = Map::new();
    with_type.insert("apiVersion".into(), Value::String(api_version));
    with_type.insert("kind".into(), Value::String(kind));
    if let Value::Object(fields) = &mut object {
        with_type.append(fields);
    }
    Ok(Value::Object(with_type))
}

/// How a protobuf message of one kind becomes its JSON: a registry row's
/// [`json_of`] for its kind's message.
pub(crate) type FromProtobuf = fn(&[u8]) -> Result<Value, ApiError>;

/// The JSON of `raw`, a message `M`.
///
/// # Errors
/// 400 when `raw` is not an `M`.
pub(crate) fn json_of<M: Message + Default + ToJson>(raw: &[u8]) -> Result<Value, ApiError> {
    let message = M::decode(raw)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid protobuf: {e}")))?;
    Ok(match message.to_json() {
        Value::Null => Value::Object(Map::new()),
        value => value,
    })
}

/// A message's JSON, as Go's `encoding/json` writes the same object; `Null` when it is
/// empty (see the module's invariants).
pub trait ToJson {
    fn to_json(&self) -> Value;
}

/// `ToJson` for messages: `to_json! { path::Type { "jsonName": rust_field, ... } ... }`;
/// `"jsonName": @bytes rust_field` for a map of bytes (a Secret's `data`, a ConfigMap's
/// `binaryData`), whose JSON values are base64.
macro_rules! to_json {
    ($($ty:path { $($json:literal: $(@$conv:ident)? $field:ident),* $(,)? })*) => {
        $(impl $crate::apiserver::protobuf::ToJson for $ty {
            fn to_json(&self) -> serde_json::Value {
                $crate::apiserver::protobuf::object([
                    $(($json, to_json!(@field self $(@$conv)? $field)),)*
                ])
            }
        })*
    };
    (@field $self:ident $field:ident) => {
        $crate::apiserver::protobuf::ToJson::to_json(&$self.$field)
    };
    (@field $self:ident @bytes $field:ident) => {
        $crate::apiserver::protobuf::bytes_map(&$self.$field)
    };
}
use to_json;

/// A map of bytes as JSON: each value base64 (Go's `encoding/json` of `[]byte`); `Null`
/// when empty.
pub(crate) fn bytes_map(map: &BTreeMap<String, Vec<u8>>) -> Value {
    use base64::Engine as _;
    if map.is_empty() {
        return Value::Null;
    }
    Value::Object(
        map.iter()
            .map(|(key, bytes)| {
                let text = base64::engine::general_purpose::STANDARD.encode(bytes);
                (key.clone(), Value::String(text))
            })
            .collect(),
    )
}

/// An object of the fields that are not empty; `Null` when none is left. A field named
/// `""` is a Go struct embedded `json:",inline"` (a Probe's handler, a Volume's source):
/// its fields are the object's own.
pub fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    let mut map = Map::new();
    for (name, value) in fields {
        match (name, value) {
            ("", Value::Object(inline)) => map.extend(inline),
            (_, value) if is_empty(&value) => {}
            (name, value) => {
                map.insert(name.to_string(), value);
            }
        }
    }
    if map.is_empty() {
        Value::Null
    } else {
        Value::Object(map)
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

impl ToJson for String {
    fn to_json(&self) -> Value {
        Value::String(self.clone())
    }
}

impl ToJson for bool {
    fn to_json(&self) -> Value {
        Value::Bool(*self)
    }
}

impl ToJson for i32 {
    fn to_json(&self) -> Value {
        Value::from(*self)
    }
}

impl ToJson for i64 {
    fn to_json(&self) -> Value {
        Value::from(*self)
    }
}

impl ToJson for f64 {
    fn to_json(&self) -> Value {
        Value::from(*self)
    }
}

impl<T: ToJson> ToJson for Option<T> {
    fn to_json(&self) -> Value {
        self.as_ref().map_or(Value::Null, ToJson::to_json)
    }
}

impl<T: ToJson> ToJson for Vec<T> {
    fn to_json(&self) -> Value {
        // Items stay even when empty (`{}` is an item), as Go writes them.
        Value::Array(
            self.iter()
                .map(|item| match item.to_json() {
                    Value::Null => Value::Object(Map::new()),
                    value => value,
                })
                .collect(),
        )
    }
}

impl<T: ToJson> ToJson for BTreeMap<String, T> {
    fn to_json(&self) -> Value {
        Value::Object(
            self.iter()
                .map(|(key, value)| (key.clone(), value.to_json()))
                .collect(),
        )
    }
}

/// `metav1.Time`: RFC 3339 in seconds; the zero time is `null`.
impl ToJson for meta::Time {
    fn to_json(&self) -> Value {
        time(self.seconds, self.nanos, false)
    }
}

/// `metav1.MicroTime`: RFC 3339 in microseconds.
impl ToJson for meta::MicroTime {
    fn to_json(&self) -> Value {
        time(self.seconds, self.nanos, true)
    }
}

fn time(seconds: Option<i64>, nanos: Option<i32>, micros: bool) -> Value {
    let seconds = seconds.unwrap_or(0);
    let nanos = nanos.unwrap_or(0);
    if seconds <= 0 && nanos <= 0 {
        return Value::Null;
    }
    let at = std::time::UNIX_EPOCH
        + std::time::Duration::new(seconds.unsigned_abs(), nanos.unsigned_abs());
    Value::String(if micros {
        humantime::format_rfc3339_micros(at).to_string()
    } else {
        humantime::format_rfc3339_seconds(at).to_string()
    })
}

/// `metav1.Duration`: Go's duration string, which kcm's objects never hold.
impl ToJson for meta::Duration {
    fn to_json(&self) -> Value {
        self.duration
            .map_or(Value::Null, |nanos| Value::String(format!("{nanos}ns")))
    }
}

/// A quantity is its string (`100m`, `1Gi`).
impl ToJson for Quantity {
    fn to_json(&self) -> Value {
        self.string.to_json()
    }
}

/// `intstr.IntOrString`: type 0 is the number, 1 the string.
impl ToJson for IntOrString {
    fn to_json(&self) -> Value {
        match self.r#type.unwrap_or(0) {
            0 => Value::from(self.int_val.unwrap_or(0)),
            _ => Value::String(self.str_val.clone().unwrap_or_default()),
        }
    }
}

/// `metav1.FieldsV1` (managedFields): its raw bytes are JSON.
impl ToJson for meta::FieldsV1 {
    fn to_json(&self) -> Value {
        raw_json(self.raw.as_deref())
    }
}

/// `runtime.RawExtension`: its raw bytes are JSON (clients write it as JSON).
impl ToJson for RawExtension {
    fn to_json(&self) -> Value {
        raw_json(self.raw.as_deref())
    }
}

fn raw_json(raw: Option<&[u8]>) -> Value {
    raw.and_then(|raw| serde_json::from_slice(raw).ok())
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests;
