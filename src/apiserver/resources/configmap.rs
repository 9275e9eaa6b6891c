//! ConfigMaps (`pkg/registry/core/configmap/strategy.go`, `ValidateConfigMap`): keys of
//! `data` and `binaryData` are config keys and appear in only one of them, `binaryData`
//! is base64, at most 1 MiB of data in all, and `immutable` freezes both maps.

use serde_json::Value;

use super::strategy::{
    cause, check_immutable, check_keys, decode_base64, map_at, Strategy, MAX_DATA_SIZE,
};
use crate::apiserver::errors::Cause;
use crate::apiserver::table::{self, column, Cell, Printer, AGE, NAME};

pub(crate) static STRATEGY: Strategy = Strategy {
    prepare: |object| {
        if let Some(binary) = map_at(object, "ConfigMap", "binaryData")? {
            for (key, value) in binary {
                decode_base64("ConfigMap", &format!("binaryData[{key}]"), value)?;
            }
        }
        if let Some(data) = map_at(object, "ConfigMap", "data")? {
            if let Some((key, _)) = data.iter().find(|(_, value)| !value.is_string()) {
                return Err(crate::apiserver::errors::ApiError::bad_request(format!(
                    "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: data[{key}]: expected a string"
                )));
            }
        }
        Ok(())
    },
    validate,
    delete: None,
};

/// printers.go's `printConfigMap`: NAME, DATA (keys of `data` and `binaryData`), AGE.
pub(crate) static PRINTER: Printer = Printer {
    columns: &[
        NAME,
        column(
            "Data",
            "integer",
            "",
            0,
            "How many keys the ConfigMap holds (data and binaryData).",
        ),
        AGE,
    ],
    cells: |object| {
        let data = table::count(object, "data") + table::count(object, "binaryData");
        let cells = vec![table::name(object), Cell::from(data), table::age(object)];
        (cells, None)
    },
};

fn validate(object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let empty = serde_json::Map::new();
    let data = object
        .get("data")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let binary = object
        .get("binaryData")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    check_keys("data", data, &mut causes);
    check_keys("binaryData", binary, &mut causes);
    for key in data.keys().filter(|key| binary.contains_key(*key)) {
        causes.push(cause(
            "FieldValueInvalid",
            format!("data[{key}]"),
            format!("Invalid value: {key:?}: duplicate of key present in binaryData"),
        ));
    }
    let size: usize = data
        .values()
        .filter_map(Value::as_str)
        .map(str::len)
        // Base64 holds 3 bytes in 4 characters.
        .chain(
            binary
                .values()
                .filter_map(Value::as_str)
                .map(|b| b.len() / 4 * 3),
        )
        .sum();
    if size > MAX_DATA_SIZE {
        causes.push(cause(
            "FieldValueTooLong",
            "data",
            format!("Too long: may not be more than {MAX_DATA_SIZE} bytes"),
        ));
    }
    check_immutable(object, old, &["data", "binaryData"], &mut causes);
    causes
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn problems(object: Value, old: Option<Value>) -> Vec<String> {
        let mut object = object;
        (STRATEGY.prepare)(&mut object).unwrap();
        (STRATEGY.validate)(&object, old.as_ref())
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn keys_size_and_immutability_are_checked() {
        assert!(problems(json!({"data": {"a.b": "1", "C_d-e": "2"}}), None).is_empty());
        assert_eq!(
            problems(json!({"data": {"a b": "1", "..x": "2"}}), None),
            [
                "data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                "data[..x]: Invalid value: \"..x\": must not start with '..'"
            ]
        );
        assert_eq!(
            problems(
                json!({"data": {"x": "1"}, "binaryData": {"x": "AA=="}}),
                None
            ),
            ["data[x]: Invalid value: \"x\": duplicate of key present in binaryData"]
        );
        let big = "x".repeat(MAX_DATA_SIZE + 1);
        assert_eq!(
            problems(json!({"data": {"x": big}}), None),
            ["data: Too long: may not be more than 1048576 bytes"]
        );
        let frozen = json!({"immutable": true, "data": {"x": "1"}});
        assert!(problems(frozen.clone(), Some(frozen.clone())).is_empty());
        assert_eq!(
            problems(
                json!({"immutable": true, "data": {"x": "2"}}),
                Some(frozen.clone())
            ),
            ["data: Forbidden: field is immutable when `immutable` is set"]
        );
        assert_eq!(
            problems(json!({"data": {"x": "1"}}), Some(frozen)),
            ["immutable: Forbidden: field is immutable when `immutable` is set"]
        );
    }

    #[test]
    fn binary_data_must_be_base64() {
        let mut object = json!({"binaryData": {"x": "not base64!"}});
        let error = (STRATEGY.prepare)(&mut object).unwrap_err();
        assert_eq!(error.code, 400);
    }
}
