//! Request bodies of the writes: read up to kube-apiserver's limit, decoded by their
//! `Content-Type` (JSON, YAML, protobuf, the three patch types; none is JSON, as the Python
//! client sends none), with duplicate fields found on the way for `fieldValidation`.
//! Protobuf bodies become the JSON of the same object (`apiserver::protobuf`), so every
//! handler sees JSON.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go` (`limitedReadBody`,
//! 3 MiB), `handlers/patch.go` (the patch types, server-side apply's) and the
//! `fieldValidation` query parameter (`handlers/create.go`, `update.go`: `Ignore`, `Warn`,
//! `Strict`; `Warn` when unset).
//!
//! Invariants: a body over [`MAX_BODY_BYTES`] is refused with 413 before more than the
//! limit is read (at once when its `Content-Length` says so); every refusal is a `Status`.

use std::collections::BTreeSet;

use axum::body::Body;
use axum::http::{header, HeaderMap};
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::apiserver::errors::ApiError;
use crate::apiserver::protobuf;

/// kube-apiserver's largest request body (`MaxRequestBodyBytes`, 3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The media types a write body may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyType {
    Json,
    Yaml,
    /// `application/vnd.kubernetes.protobuf`: kubectl's generator commands, client-go's
    /// typed clients.
    Protobuf,
    MergePatch,
    JsonPatch,
    StrategicMergePatch,
}

/// The accepted media types, as kube-apiserver lists them in its 415.
const ACCEPTED: &str = "application/json, application/yaml, application/vnd.kubernetes.protobuf";
const ACCEPTED_PATCHES: &str = "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json";

/// Reads a body of at most [`MAX_BODY_BYTES`].
///
/// # Errors
/// 413 when it is larger (its `Content-Length` is believed, so such a body is not read at
/// all); 400 when the connection fails while it is read.
pub async fn read(headers: &HeaderMap, body: Body) -> Result<Vec<u8>, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(ApiError::too_large(MAX_BODY_BYTES));
    }
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = futures::StreamExt::next(&mut stream).await {
        let chunk =
            chunk.map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))?;
        if bytes.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(ApiError::too_large(MAX_BODY_BYTES));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// The body type of a create or update (`patch` false) or a patch.
///
/// # Errors
/// 415 for anything else; for server-side apply, saying kcm does not implement it.
pub fn body_type(headers: &HeaderMap, patch: bool) -> Result<BodyType, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let found = match (media.as_str(), patch) {
        ("" | "application/json", false) => Some(BodyType::Json),
        ("application/yaml", false) => Some(BodyType::Yaml),
        (protobuf::MEDIA_TYPE, false) => Some(BodyType::Protobuf),
        ("application/merge-patch+json", true) => Some(BodyType::MergePatch),
        ("application/json-patch+json", true) => Some(BodyType::JsonPatch),
        ("application/strategic-merge-patch+json", true) => Some(BodyType::StrategicMergePatch),
        ("application/apply-patch+yaml", true) => {
            return Err(ApiError::unsupported_media_type(
                "the body of the request was in an unknown format - kcm does not implement server-side apply (application/apply-patch+yaml); use client-side `kubectl apply` (without --server-side) - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json",
            ))
        }
        _ => None,
    };
    found.ok_or_else(|| {
        ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            if patch { ACCEPTED_PATCHES } else { ACCEPTED }
        ))
    })
}

/// What a write does with unknown and duplicate fields (`?fieldValidation=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    /// The query parameter's value; `Warn` when unset, as kube-apiserver.
    ///
    /// # Errors
    /// 400 for another value.
    pub fn parse(value: Option<&str>) -> Result<FieldValidation, ApiError> {
        match value.unwrap_or("") {
            "" | "Warn" => Ok(FieldValidation::Warn),
            "Ignore" => Ok(FieldValidation::Ignore),
            "Strict" => Ok(FieldValidation::Strict),
            other => Err(ApiError::bad_request(format!(
                "fieldValidation must be one of Ignore, Warn or Strict, not {other:?}"
            ))),
        }
    }
}

/// A decoded body and the paths of the fields it held twice (the last one wins, as in
/// Go's decoder).
#[derive(Debug)]
pub struct Decoded {
    pub value: Value,
    pub duplicates: Vec<String>,
}

/// Decodes a body of `body_type`.
///
/// # Errors
/// 400 for a body that is not JSON (or YAML, or protobuf), naming where it breaks.
pub fn decode(body_type: BodyType, bytes: &[u8]) -> Result<Decoded, ApiError> {
    if body_type == BodyType::Protobuf {
        // A protobuf message cannot hold a field twice (the last one wins on the wire).
        return Ok(Decoded {
            value: protobuf::decode(bytes)?,
            duplicates: Vec::new(),
        });
    }
    let mut duplicates = BTreeSet::new();
    let tracking = Tracking {
        path: String::new(),
        duplicates: &mut duplicates,
    };
    let value = if body_type == BodyType::Yaml {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| ApiError::bad_request("the YAML body is not UTF-8"))?;
        tracking
            .deserialize(serde_yaml_ng::Deserializer::from_str(text))
            .map_err(|e| ApiError::bad_request(format!("the body is not valid YAML: {e}")))?
    } else {
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        tracking
            .deserialize(&mut deserializer)
            .and_then(|v| deserializer.end().map(|()| v))
            .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?
    };
    Ok(Decoded {
        value,
        duplicates: duplicates.into_iter().collect(),
    })
}

/// Builds a [`Value`] and records the path of every key an object repeats.
struct Tracking<'a> {
    path: String,
    duplicates: &'a mut BTreeSet<String>,
}

impl Tracking<'_> {
    fn child(&mut self, segment: &str) -> Tracking<'_> {
        let path = if self.path.is_empty() {
            segment.to_string()
        } else if segment.starts_with('[') {
            format!("{}{segment}", self.path)
        } else {
            format!("{}.{segment}", self.path)
        };
        Tracking {
            path,
            duplicates: self.duplicates,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Tracking<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Tracking<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.child(&format!("[{}]", items.len())))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(self.child(&key))?;
            if object.insert(key.clone(), value).is_some() {
                let path = self.child(&key).path;
                self.duplicates.insert(path);
            }
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_fields_are_found_with_their_paths_and_the_last_wins() {
        let decoded = decode(
            BodyType::Json,
            br#"{"metadata":{"name":"a","name":"b"},"spec":{"containers":[{"image":"x","image":"y"}]}}"#,
        )
        .unwrap();
        assert_eq!(decoded.value["metadata"]["name"], "b");
        assert_eq!(
            decoded.duplicates,
            ["metadata.name", "spec.containers[0].image"]
        );
        assert!(decode(BodyType::Json, b"{").is_err());
        let yaml = decode(
            BodyType::Yaml,
            b"metadata:\n  name: a\n  name: b\nspec:\n  replicas: 3\n",
        )
        .unwrap();
        assert_eq!(yaml.value["metadata"]["name"], "b");
        assert_eq!(yaml.value["spec"]["replicas"], 3);
        assert_eq!(yaml.duplicates, ["metadata.name"]);
        assert!(decode(BodyType::Json, b"{} x").is_err());
    }

    #[test]
    fn content_types_choose_the_decoder_and_server_side_apply_is_refused() {
        let with = |ct: &str| {
            let mut headers = HeaderMap::new();
            if !ct.is_empty() {
                headers.insert(header::CONTENT_TYPE, ct.parse().unwrap());
            }
            headers
        };
        assert_eq!(body_type(&with(""), false), Ok(BodyType::Json));
        assert_eq!(
            body_type(&with("application/json; charset=utf-8"), false),
            Ok(BodyType::Json)
        );
        assert_eq!(
            body_type(&with("application/yaml"), false),
            Ok(BodyType::Yaml)
        );
        assert_eq!(
            body_type(&with("application/strategic-merge-patch+json"), true),
            Ok(BodyType::StrategicMergePatch)
        );
        let ssa = body_type(&with("application/apply-patch+yaml"), true).unwrap_err();
        assert_eq!(ssa.code, 415);
        assert!(ssa.message.contains("server-side apply"), "{}", ssa.message);
        assert_eq!(
            body_type(&with("application/vnd.kubernetes.protobuf"), false),
            Ok(BodyType::Protobuf)
        );
        assert_eq!(
            body_type(&with("application/vnd.kubernetes.protobuf"), true)
                .unwrap_err()
                .code,
            415
        );
        assert_eq!(
            body_type(&with("application/json"), true).unwrap_err().code,
            415
        );
    }
}
