//! What differs between the kinds stored as documents: Kubernetes' per-resource
//! `strategy.go` (`PrepareForCreate`/`PrepareForUpdate`, `Validate`/`ValidateUpdate`),
//! reduced to three functions, the third the delete override (`BeforeDelete`, and a
//! resource's own `Delete` as the Namespace's). Each kind's registry row names its
//! strategy; one stored as sent (ServiceAccount, Node) takes [`DEFAULT`]: deleted at
//! once. The typed kinds' strategies, over their stored shapes, are `handlers/strategy/`.

use serde_json::Value;

use crate::apiserver::errors::{ApiError, Cause};

/// One kind's strategy.
#[derive(Debug)]
pub(crate) struct Strategy {
    /// Normalises the object to be stored (defaults, derived fields). An error here is a
    /// body that does not decode as the kind (400), as kube-apiserver's decoding fails.
    pub prepare: fn(&mut Value) -> Result<(), ApiError>,
    /// Every problem of the object to be stored (422), against the stored one on an update.
    pub validate: fn(&Value, Option<&Value>) -> Vec<Cause>,
    /// What a delete does instead of removing the key; `None`: it removes it.
    pub delete: Option<DeleteHook>,
}

/// A kind's delete override: given the document's name, the stored document (served;
/// `None` for a name in use by objects though no document is stored) and the time now
/// (RFC 3339), what to leave or write instead of deleting it. An error refuses the
/// delete (nothing is written).
pub(crate) type DeleteHook = fn(&str, Option<Value>, &str) -> Result<Instead, ApiError>;

/// Strategies are statics; one is equal only to itself.
impl PartialEq for Strategy {
    fn eq(&self, other: &Strategy) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Strategy {}

/// What a delete override does.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Instead {
    /// Write this document (served) in the stored one's place.
    Write(Value),
    /// Leave the stored document (served) as it is: already in deletion.
    Keep(Value),
    /// Delete it after all: its deletion is finished (a terminating Namespace whose
    /// `spec.finalizers` are all removed).
    Delete,
}

/// Stored as sent, deleted at once.
pub(crate) static DEFAULT: Strategy = Strategy {
    prepare: |_| Ok(()),
    validate: |_, _| Vec::new(),
    delete: None,
};

/// The largest ConfigMap or Secret, in bytes of data (kube-apiserver's
/// `MaxSecretSize`, which ConfigMaps share: what one etcd value may hold with room).
pub(crate) const MAX_DATA_SIZE: usize = 1024 * 1024;

/// A 422 cause.
pub(crate) fn cause(reason: &'static str, field: impl Into<String>, message: String) -> Cause {
    Cause {
        reason,
        field: field.into(),
        message,
    }
}

/// The problems of a `data`-like map's keys (`IsConfigMapKey`: at most 253 characters of
/// `[-._a-zA-Z0-9]`, not `.` or `..`, not starting with `..`).
pub(crate) fn check_keys(field: &str, map: &serde_json::Map<String, Value>, out: &mut Vec<Cause>) {
    for key in map.keys() {
        let valid_chars = !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        let message = if !valid_chars {
            Some("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")
        } else if key.len() > 253 {
            Some("must be no more than 253 characters")
        } else if key == "." || key == ".." {
            Some("must not be '.' or '..'")
        } else if key.starts_with("..") {
            Some("must not start with '..'")
        } else {
            None
        };
        if let Some(message) = message {
            out.push(cause(
                "FieldValueInvalid",
                format!("{field}[{key}]"),
                format!("Invalid value: {key:?}: {message}"),
            ));
        }
    }
}

/// The `immutable` rule of ConfigMaps and Secrets: once `immutable` is true, neither it
/// nor `fields` may change.
pub(crate) fn check_immutable(
    object: &Value,
    old: Option<&Value>,
    fields: &[&str],
    out: &mut Vec<Cause>,
) {
    let Some(old) = old.filter(|old| old.get("immutable") == Some(&Value::Bool(true))) else {
        return;
    };
    for field in fields.iter().chain(&["immutable"]) {
        if object.get(*field) != old.get(*field) {
            out.push(cause(
                "FieldValueForbidden",
                *field,
                "Forbidden: field is immutable when `immutable` is set".to_string(),
            ));
        }
    }
}

/// The map at `field` of `object`, if it is one (absent and null are empty).
///
/// # Errors
/// 400 when it is something else.
pub(crate) fn map_at<'a>(
    object: &'a Value,
    kind: &str,
    field: &str,
) -> Result<Option<&'a serde_json::Map<String, Value>>, ApiError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(_) => Err(ApiError::bad_request(format!(
            "{kind} in version \"v1\" cannot be handled as a {kind}: {field}: expected a map of strings"
        ))),
    }
}

/// The bytes a base64 value decodes to.
///
/// # Errors
/// 400 naming the field, as kube-apiserver's decoding of a `[]byte` field fails.
pub(crate) fn decode_base64(kind: &str, field: &str, value: &Value) -> Result<Vec<u8>, ApiError> {
    use base64::Engine as _;
    let text = value.as_str().ok_or_else(|| {
        ApiError::bad_request(format!(
            "{kind} in version \"v1\" cannot be handled as a {kind}: {field}: expected a base64 string"
        ))
    })?;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| {
            ApiError::bad_request(format!(
                "{kind} in version \"v1\" cannot be handled as a {kind}: {field}: illegal base64 data: {e}"
            ))
        })
}
