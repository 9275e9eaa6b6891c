//! Secrets (`pkg/registry/core/secret/strategy.go`, `ValidateSecret`): `stringData` is
//! merged into `data` (base64-encoded, winning over `data`'s own key) and dropped, as
//! kube-apiserver's conversion does; `type` defaults to `Opaque` and never changes; `data`
//! is base64 with config keys, at most 1 MiB decoded; `kubernetes.io/tls` needs `tls.crt`
//! and `tls.key`; `immutable` freezes `data`.

use base64::Engine as _;
use serde_json::Value;

use super::strategy::{
    cause, check_immutable, check_keys, decode_base64, map_at, Strategy, MAX_DATA_SIZE,
};
use crate::apiserver::errors::{ApiError, Cause};
use crate::apiserver::fields::{self, SelectableFields};
use crate::apiserver::table::{self, column, Cell, Printer, AGE, NAME};

pub(crate) static STRATEGY: Strategy = Strategy {
    prepare,
    validate,
    delete: None,
};

/// printers.go's `printSecret`: NAME, TYPE, DATA, AGE.
pub(crate) static PRINTER: Printer = Printer {
    columns: &[
        NAME,
        column("Type", "string", "", 0, "The Secret's type."),
        column("Data", "integer", "", 0, "How many keys the Secret holds."),
        AGE,
    ],
    cells: |object| {
        let cells = vec![
            table::name(object),
            Cell::from(fields::string_at(object, &["type"])),
            Cell::from(table::count(object, "data")),
            table::age(object),
        ];
        (cells, None)
    },
};

/// The secret strategy's `SelectableFields`: the metadata's and `type`.
pub(crate) static FIELDS: SelectableFields = fields::own(
    &["metadata.name", "metadata.namespace", "type"],
    |field, secret| match field {
        "type" => fields::string_at(secret, &["type"]).to_string(),
        _ => fields::metadata_value(field, secret),
    },
);

fn prepare(object: &mut Value) -> Result<(), ApiError> {
    if let Some(data) = map_at(object, "Secret", "data")? {
        for (key, value) in data {
            decode_base64("Secret", &format!("data[{key}]"), value)?;
        }
    }
    let string_data = map_at(object, "Secret", "stringData")?.cloned();
    if let Some(string_data) = string_data {
        let data = object
            .as_object_mut()
            .expect("a document is an object")
            .entry("data")
            .or_insert_with(|| Value::Object(Default::default()));
        if !data.is_object() {
            *data = Value::Object(Default::default());
        }
        let data = data.as_object_mut().expect("just made an object");
        for (key, value) in string_data {
            let Value::String(text) = value else {
                return Err(ApiError::bad_request(format!(
                    "Secret in version \"v1\" cannot be handled as a Secret: stringData[{key}]: expected a string"
                )));
            };
            let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
            data.insert(key, Value::String(encoded));
        }
        object
            .as_object_mut()
            .expect("a document is an object")
            .shift_remove("stringData");
    }
    if object
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        object["type"] = Value::String("Opaque".into());
    }
    Ok(())
}

fn validate(object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let empty = serde_json::Map::new();
    let data = object
        .get("data")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    check_keys("data", data, &mut causes);
    let size: usize = data
        .values()
        .filter_map(Value::as_str)
        .filter_map(|v| base64::engine::general_purpose::STANDARD.decode(v).ok())
        .map(|bytes| bytes.len())
        .sum();
    if size > MAX_DATA_SIZE {
        causes.push(cause(
            "FieldValueTooLong",
            "data",
            format!("Too long: may not be more than {MAX_DATA_SIZE} bytes"),
        ));
    }
    let kind = object.get("type").and_then(Value::as_str).unwrap_or("");
    if kind == "kubernetes.io/tls" {
        for key in ["tls.crt", "tls.key"] {
            if !data.contains_key(key) {
                causes.push(cause(
                    "FieldValueRequired",
                    format!("data[{key}]"),
                    "Required value".to_string(),
                ));
            }
        }
    }
    if let Some(old) = old {
        let old_kind = old.get("type").and_then(Value::as_str).unwrap_or("");
        if kind != old_kind {
            causes.push(cause(
                "FieldValueInvalid",
                "type",
                format!("Invalid value: {kind:?}: field is immutable"),
            ));
        }
    }
    check_immutable(object, old, &["data"], &mut causes);
    causes
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn string_data_is_merged_into_data_and_type_defaults_to_opaque() {
        let mut secret =
            json!({"data": {"a": "eA==", "b": "eQ=="}, "stringData": {"b": "z", "c": "w"}});
        prepare(&mut secret).unwrap();
        assert_eq!(
            secret,
            json!({"data": {"a": "eA==", "b": "eg==", "c": "dw=="}, "type": "Opaque"})
        );
        assert!(validate(&secret, None).is_empty());
    }

    #[test]
    fn data_must_be_base64() {
        let mut secret = json!({"data": {"a": "not base64!"}});
        let error = prepare(&mut secret).unwrap_err();
        assert_eq!(error.code, 400);
        assert!(error.message.contains("data[a]"), "{}", error.message);
    }

    #[test]
    fn type_never_changes_and_tls_needs_its_keys() {
        let old = json!({"type": "Opaque", "data": {}});
        let causes = validate(
            &json!({"type": "kubernetes.io/tls", "data": {}}),
            Some(&old),
        );
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["data[tls.crt]", "data[tls.key]", "type"]);
    }
}
