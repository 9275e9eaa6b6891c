//! Validates a JSON object against the published schema of its kind (Kubernetes 1.32, from
//! [`super::schemas`]) and returns every violation, each with its field path and the rule it
//! breaks: `status.containerStatuses[0].imageID: required`.
//!
//! The rules are the ones a typed client enforces when it reads an object (the Python
//! client's pydantic models, Go's `encoding/json` into the generated types): each field's
//! type (`string`, `integer`, `number`, `boolean`, `object`, `array`, and IntOrString's
//! either-of-two), required fields, enums, formats (`int32` ranges, RFC 3339 `date-time`,
//! base64 `byte`), `additionalProperties` maps, and no field a kind does not have. A `null` is an absent field, as Go reads it: allowed where
//! the field is optional, a violation where it is required.
//!
//! Invariant: validation is a pure function of the schema and the object; it never stops at
//! the first violation.

use std::fmt;

use serde_json::Value;

use super::schemas::{field, schemas, Field, Schemas};

/// One way an object breaks its schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// Where: `spec.template.spec.containers[0].ports[1].containerPort`, map keys in
    /// brackets (`metadata.labels[app]`); empty for the object itself.
    pub path: String,
    /// What.
    pub rule: Rule,
}

/// A rule of the schema.
#[derive(Debug, Clone, PartialEq)]
pub enum Rule {
    /// A required field is absent or `null`.
    Required,
    /// The value is not of the field's type.
    Type {
        /// The type the schema says (`integer`, `integer or string`).
        expected: String,
        /// The JSON type found.
        found: &'static str,
    },
    /// The value is not one of the field's enum values.
    Enum {
        /// The values allowed.
        allowed: Vec<Value>,
    },
    /// A value not in its format: an `int32` out of range, a `date-time` not in RFC 3339,
    /// `byte` not base64.
    Format {
        /// The format (`int32`).
        format: String,
    },
    /// A field the kind does not have.
    UnknownField,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Required => f.write_str("required"),
            Rule::Type { expected, found } => write!(f, "type {expected} (found {found})"),
            Rule::Enum { allowed } => {
                let allowed: Vec<String> = allowed.iter().map(Value::to_string).collect();
                write!(f, "enum [{}]", allowed.join(", "))
            }
            Rule::Format { format } => write!(f, "format {format}"),
            Rule::UnknownField => f.write_str("unknown field"),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "(object)"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.rule)
    }
}

/// The schema holds no definition of the kind asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKind {
    /// The `apiVersion` asked for.
    pub api_version: String,
    /// The kind asked for.
    pub kind: String,
}

impl fmt::Display for UnknownKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no schema for kind {} of {}",
            self.kind, self.api_version
        )
    }
}

impl std::error::Error for UnknownKind {}

/// Every violation of `object` against the schema of `kind` in `api_version` (`v1`,
/// `apps/v1`); the object's own `apiVersion` and `kind` are not read (a List's items carry
/// none).
///
/// # Errors
///
/// [`UnknownKind`] when the schema has no definition of the kind.
pub fn validate(
    api_version: &str,
    kind: &str,
    object: &Value,
) -> Result<Vec<Violation>, UnknownKind> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let schemas = schemas();
    let schema = schemas
        .name_of(group, version, kind)
        .and_then(|name| schemas.by_name.get(name))
        .ok_or_else(|| UnknownKind {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        })?;
    Ok(validate_against(schemas, schema, object))
}

/// Every violation of `value` against `schema`, whose references `schemas` resolves.
fn validate_against(schemas: &Schemas, schema: &Value, value: &Value) -> Vec<Violation> {
    let mut walk = Walk {
        schemas,
        path: String::new(),
        violations: Vec::new(),
    };
    walk.check(schema, value);
    walk.violations
}

/// One validation: the path of the value being checked and what was found so far.
struct Walk<'a> {
    schemas: &'a Schemas,
    path: String,
    violations: Vec<Violation>,
}

impl Walk<'_> {
    fn violation(&mut self, rule: Rule) {
        self.violations.push(Violation {
            path: self.path.clone(),
            rule,
        });
    }

    /// Checks `value` (never `null`: the caller skips those) against `schema`.
    fn check(&mut self, schema: &Value, value: &Value) {
        let schemas = self.schemas;
        let schema = schemas.dereference(schema);
        if let Some(branches) = schema["oneOf"].as_array() {
            if !branches.iter().any(|branch| self.matches(branch, value)) {
                let expected: Vec<&str> = branches
                    .iter()
                    .filter_map(|branch| branch["type"].as_str())
                    .collect();
                self.violation(Rule::Type {
                    expected: expected.join(" or "),
                    found: json_type(value),
                });
            }
            return;
        }
        if let Some(expected) = schema["type"].as_str() {
            if !has_type(value, expected) {
                self.violation(Rule::Type {
                    expected: expected.to_string(),
                    found: json_type(value),
                });
                return;
            }
        }
        if let Some(allowed) = schema["enum"].as_array() {
            if !allowed.contains(value) {
                self.violation(Rule::Enum {
                    allowed: allowed.clone(),
                });
            }
        }
        if let Some(format) = schema["format"].as_str() {
            if !has_format(value, format) {
                self.violation(Rule::Format {
                    format: format.to_string(),
                });
            }
        }
        match value {
            Value::Object(fields) => self.check_object(schema, fields),
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for (index, item) in items.iter().enumerate() {
                        self.at(&format!("[{index}]"), |walk| {
                            walk.check_value(item_schema, item)
                        });
                    }
                }
            }
            _ => {}
        }
    }

    fn check_object(&mut self, schema: &Value, fields: &serde_json::Map<String, Value>) {
        for required in schema["required"].as_array().into_iter().flatten() {
            let Some(name) = required.as_str() else {
                continue;
            };
            if fields.get(name).is_none_or(Value::is_null) {
                self.at(&self.field(name), |walk| walk.violation(Rule::Required));
            }
        }
        for (name, value) in fields {
            match field(schema, name) {
                Field::Property(field_schema) => self.at(&self.field(name), |walk| {
                    walk.check_value(field_schema, value)
                }),
                Field::Entry(values) => {
                    self.at(&format!("[{name}]"), |walk| walk.check_value(values, value))
                }
                Field::Any => {}
                Field::Unknown => {
                    self.at(&self.field(name), |walk| walk.violation(Rule::UnknownField))
                }
            }
        }
    }

    /// Checks a field's or an item's value: `null` is an absent value.
    fn check_value(&mut self, schema: &Value, value: &Value) {
        if !value.is_null() {
            self.check(schema, value);
        }
    }

    /// Whether `value` breaks none of `branch`'s rules (found with a scratch walk).
    fn matches(&self, branch: &Value, value: &Value) -> bool {
        let mut scratch = Walk {
            schemas: self.schemas,
            path: String::new(),
            violations: Vec::new(),
        };
        scratch.check(branch, value);
        scratch.violations.is_empty()
    }

    /// The path segment of field `name`: `.name`, or `name` at the top.
    fn field(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_string()
        } else {
            format!(".{name}")
        }
    }

    /// Runs `f` with `segment` appended to the path.
    fn at(&mut self, segment: &str, f: impl FnOnce(&mut Self)) {
        let length = self.path.len();
        self.path.push_str(segment);
        f(self);
        self.path.truncate(length);
    }
}

/// Whether `value` (of its schema's type) is in `format`: an `int32` in range, a
/// `date-time` in RFC 3339, `byte` in standard base64; other formats constrain nothing.
fn has_format(value: &Value, format: &str) -> bool {
    match (format, value) {
        ("int32", Value::Number(n)) => n.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
        ("date-time", Value::String(text)) => is_rfc3339(text),
        ("byte", Value::String(text)) => {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .is_ok()
        }
        _ => true,
    }
}

/// `2006-01-02T15:04:05Z`, with optional fractional seconds and a `Z` or `±hh:mm` offset
/// (RFC 3339's `date-time`, which Go's `time.Time` reads).
fn is_rfc3339(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        bytes
            .get(range)
            .is_some_and(|part| part.iter().all(u8::is_ascii_digit))
    };
    let numbers = [0..4, 5..7, 8..10, 11..13, 14..16, 17..19];
    let separators = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    let well_formed = numbers.into_iter().all(digits)
        && separators
            .iter()
            .all(|&(at, byte)| bytes.get(at) == Some(&byte))
        && matches!(bytes.get(10), Some(b'T' | b't'));
    if !well_formed {
        return false;
    }
    let mut rest = &bytes[19..];
    if let Some(fraction) = rest.strip_prefix(b".") {
        let n = fraction.iter().take_while(|b| b.is_ascii_digit()).count();
        if n == 0 {
            return false;
        }
        rest = &fraction[n..];
    }
    match rest {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => [h1, h2, m1, m2].iter().all(|b| b.is_ascii_digit()),
        _ => false,
    }
}

fn has_type(value: &Value, expected: &str) -> bool {
    match expected {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        // A type this validator does not know constrains nothing.
        _ => true,
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Validates `object` as `kind` of `api_version` and compares the violations, as text.
    #[track_caller]
    fn check(api_version: &str, kind: &str, object: Value, expected: &[&str]) {
        let found: Vec<String> = validate(api_version, kind, &object)
            .expect("a known kind")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(found, expected, "{object}");
    }

    fn pod(status: Value) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx",
                                     "ports": [{"containerPort": 80, "protocol": "TCP"}]}]},
            "status": status,
        })
    }

    #[test]
    fn a_valid_pod_has_no_violation() {
        check("v1", "Pod", pod(json!({"phase": "Running"})), &[]);
    }

    #[test]
    fn a_missing_required_field_is_named_by_its_path() {
        check(
            "v1",
            "Pod",
            pod(json!({"containerStatuses": [
                {"name": "web", "image": "nginx", "ready": true, "restartCount": 0},
            ]})),
            &["status.containerStatuses[0].imageID: required"],
        );
        // `null` is as absent as a missing field.
        check(
            "v1",
            "Pod",
            pod(json!({"containerStatuses": [
                {"name": "web", "image": "nginx", "imageID": null, "ready": true, "restartCount": 0},
            ]})),
            &["status.containerStatuses[0].imageID: required"],
        );
    }

    #[test]
    fn every_violation_is_returned() {
        let mut object = pod(json!({"phase": 3}));
        object["spec"]["containers"][0]["ports"][0]["containerPort"] = json!("80");
        object["spec"]["replicaz"] = json!(1);
        object["metadata"]["labels"]["app"] = json!(true);
        check(
            "v1",
            "Pod",
            object,
            &[
                "metadata.labels[app]: type string (found boolean)",
                "spec.containers[0].ports[0].containerPort: type integer (found string)",
                "spec.replicaz: unknown field",
                "status.phase: type string (found integer)",
            ],
        );
    }

    #[test]
    fn optional_fields_may_be_null() {
        let mut object = pod(json!(null));
        object["metadata"]["creationTimestamp"] = json!(null);
        object["spec"]["containers"][0]["resources"] = json!(null);
        check("v1", "Pod", object, &[]);
    }

    #[test]
    fn int_or_string_takes_either_and_nothing_else() {
        let deployment = |max_surge: Value| {
            json!({
                "metadata": {"name": "web"},
                "spec": {
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": [{"name": "web", "image": "nginx"}]}},
                    "strategy": {"type": "RollingUpdate",
                                 "rollingUpdate": {"maxSurge": max_surge, "maxUnavailable": 0}},
                },
            })
        };
        check("apps/v1", "Deployment", deployment(json!("25%")), &[]);
        check("apps/v1", "Deployment", deployment(json!(1)), &[]);
        check(
            "apps/v1",
            "Deployment",
            deployment(json!(1.5)),
            &["spec.strategy.rollingUpdate.maxSurge: type string or integer (found number)"],
        );
    }

    #[test]
    fn quantities_are_strings_or_numbers_and_int32_is_bounded() {
        let mut object = pod(json!(null));
        object["spec"]["containers"][0]["resources"] =
            json!({"limits": {"cpu": 1, "memory": "64Mi"}, "requests": {"cpu": [1]}});
        object["spec"]["containers"][0]["ports"][0]["containerPort"] = json!(1_i64 << 40);
        check(
            "v1",
            "Pod",
            object,
            &[
                "spec.containers[0].ports[0].containerPort: format int32",
                "spec.containers[0].resources.requests[cpu]: type string or number (found array)",
            ],
        );
    }

    #[test]
    fn enums_and_the_top_level_are_checked() {
        // The 1.32 data holds no enum (its source lost them), so a schema of our own.
        let schema = json!({"type": "object", "properties": {
            "protocol": {"type": "string", "enum": ["TCP", "UDP"]},
        }});
        let violations = |value: Value| -> Vec<String> {
            validate_against(schemas(), &schema, &value)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert!(violations(json!({"protocol": "UDP"})).is_empty());
        assert_eq!(
            violations(json!({"protocol": "tcp"})),
            ["protocol: enum [\"TCP\", \"UDP\"]"]
        );
        check(
            "v1",
            "Event",
            json!([]),
            &["(object): type object (found array)"],
        );
    }

    #[test]
    fn maps_check_their_values_and_objects_without_properties_take_anything() {
        check(
            "v1",
            "Event",
            json!({"metadata": {"name": "e", "managedFields": [{"fieldsV1": {"f:x": {}}}]},
                   "involvedObject": {"kind": "Pod"}, "count": "3"}),
            &["count: type integer (found string)"],
        );
    }

    #[test]
    fn timestamps_are_rfc_3339_and_bytes_base64() {
        for good in [
            "2026-11-28T15:00:00Z",
            "2026-11-28T15:00:00.123456Z",
            "2026-11-28T15:00:00+02:00",
        ] {
            assert!(is_rfc3339(good), "{good}");
        }
        for bad in [
            "2026-11-28 15:00:00Z",
            "2026-11-28T15:00:00",
            "2026-11-28T15:00:00.Z",
            "28/11/2026",
            "",
        ] {
            assert!(!is_rfc3339(bad), "{bad}");
        }
        let mut object = pod(json!({"startTime": "yesterday"}));
        object["metadata"]["creationTimestamp"] = json!("2026-11-28T15:00:00Z");
        check("v1", "Pod", object, &["status.startTime: format date-time"]);
        check(
            "v1",
            "Secret",
            json!({"metadata": {"name": "s"}, "data": {"a": "YWJj", "b": "not base64!"}}),
            &["data[b]: format byte"],
        );
    }

    #[test]
    fn an_unknown_kind_is_an_error() {
        assert_eq!(
            validate("batch/v1", "Job", &json!({})),
            Err(UnknownKind {
                api_version: "batch/v1".to_string(),
                kind: "Job".to_string()
            })
        );
    }
}
