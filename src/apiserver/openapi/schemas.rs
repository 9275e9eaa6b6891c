//! The published OpenAPI schemas of the kinds kcm serves, for Kubernetes 1.32: the
//! definitions of `k8s-1.32.json` (written by `scripts/gen-openapi.py` from PyPI's
//! `kubernetes-validate`, without descriptions), parsed once, found by name or by the
//! group, version and kind they are tagged with (`x-kubernetes-group-version-kind`).
//!
//! Invariant: every `$ref` in the data names a definition it holds (the generator takes the
//! closure of the kinds it starts from; a unit test checks it), written in OpenAPI v3 form,
//! `#/components/schemas/NAME`.

use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

use serde_json::{Map, Value};

/// The generated data: `{"source": "...", "schemas": {NAME: schema}}`.
const DATA: &str = include_str!("k8s-1.32.json");

/// Where a reference's definition name starts in the data.
pub(crate) const REF_PREFIX: &str = "#/components/schemas/";

/// The definitions, by name and by the kinds they are tagged with.
pub(crate) struct Schemas {
    /// Definition name (`io.k8s.api.core.v1.Pod`) → its schema.
    pub by_name: Map<String, Value>,
    /// (group, version, kind) → the definition name tagged with it.
    by_kind: HashMap<(String, String, String), String>,
}

/// The schemas, parsed on first use.
pub(crate) fn schemas() -> &'static Schemas {
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let mut data: Value = serde_json::from_str(DATA).expect("k8s-1.32.json is JSON");
        let Some(Value::Object(by_name)) = data.get_mut("schemas").map(Value::take) else {
            panic!("k8s-1.32.json has no schemas object");
        };
        let mut by_kind = HashMap::new();
        for (name, schema) in &by_name {
            for tag in schema["x-kubernetes-group-version-kind"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let field = |key: &str| tag[key].as_str().unwrap_or_default().to_string();
                by_kind.insert(
                    (field("group"), field("version"), field("kind")),
                    name.clone(),
                );
            }
        }
        Schemas { by_name, by_kind }
    })
}

impl Schemas {
    /// The name of the definition of `kind` in `group`/`version` (`""`, `v1`, `Pod` →
    /// `io.k8s.api.core.v1.Pod`), if the data has one.
    pub(crate) fn name_of(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.by_kind
            .get(&(group.to_string(), version.to_string(), kind.to_string()))
            .map(String::as_str)
    }

    /// The definition a `$ref` value points to.
    pub(crate) fn resolve(&self, reference: &str) -> Option<&Value> {
        self.by_name.get(reference.strip_prefix(REF_PREFIX)?)
    }

    /// `schema`, or the definition its `$ref` names (followed to one without a `$ref`); an
    /// unknown reference (the data has none) constrains nothing, as an empty schema.
    pub(crate) fn dereference<'s>(&'s self, mut schema: &'s Value) -> &'s Value {
        while let Some(Value::String(reference)) = schema.get("$ref") {
            schema = self.resolve(reference).unwrap_or(&Value::Null);
        }
        schema
    }

    /// `names` and every definition they refer to, directly or not.
    pub(crate) fn closure<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<String> = names.into_iter().map(str::to_string).collect();
        while let Some(name) = todo.pop() {
            let Some(schema) = self.by_name.get(&name) else {
                continue;
            };
            if seen.insert(name) {
                references(schema, &mut todo);
            }
        }
        seen
    }
}

/// Where a field of an object goes in the object's schema (one without a `$ref`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Field<'s> {
    /// One of its properties, with the property's schema.
    Property(&'s Value),
    /// An entry of a map (`additionalProperties`), with the values' schema.
    Entry(&'s Value),
    /// Anything goes: the object keeps what it is sent (`x-kubernetes-preserve-unknown-fields`,
    /// `additionalProperties: true`, or an object schema without properties: `FieldsV1`,
    /// `RawExtension`).
    Any,
    /// A field the object does not have.
    Unknown,
}

/// Where field `name` of an object of schema `object` goes.
pub(crate) fn field<'s>(object: &'s Value, name: &str) -> Field<'s> {
    match object
        .get("properties")
        .and_then(|properties| properties.get(name))
    {
        Some(property) => Field::Property(property),
        None => other_field(object),
    }
}

/// Where a field of an object of schema `object` that is not one of its properties goes:
/// an [`Field::Entry`], [`Field::Any`] or [`Field::Unknown`].
pub(crate) fn other_field(object: &Value) -> Field<'_> {
    match object.get("additionalProperties") {
        Some(values) if values.is_object() => Field::Entry(values),
        Some(_) => Field::Any,
        None if !object["properties"].is_object()
            || object["x-kubernetes-preserve-unknown-fields"] == true =>
        {
            Field::Any
        }
        None => Field::Unknown,
    }
}

/// Pushes the definition names `schema` refers to onto `out`.
fn references(schema: &Value, out: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("$ref", Value::String(reference)) => {
                        if let Some(name) = reference.strip_prefix(REF_PREFIX) {
                            out.push(name.to_string());
                        }
                    }
                    _ => references(value, out),
                }
            }
        }
        Value::Array(values) => values.iter().for_each(|value| references(value, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reference_names_a_definition() {
        let schemas = schemas();
        let mut names = Vec::new();
        for schema in schemas.by_name.values() {
            references(schema, &mut names);
        }
        for name in names {
            assert!(schemas.by_name.contains_key(&name), "{name} is missing");
        }
    }

    #[test]
    fn kinds_are_found_by_their_group_version_and_kind() {
        let schemas = schemas();
        assert_eq!(
            schemas.name_of("", "v1", "Pod"),
            Some("io.k8s.api.core.v1.Pod")
        );
        assert_eq!(
            schemas.name_of("apps", "v1", "DeploymentList"),
            Some("io.k8s.api.apps.v1.DeploymentList")
        );
        assert_eq!(schemas.name_of("apps", "v1", "Pod"), None);
        let closure = schemas.closure(["io.k8s.api.core.v1.Pod"]);
        assert!(closure.contains("io.k8s.api.core.v1.ContainerPort"));
        assert!(closure.contains("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        assert!(!closure.contains("io.k8s.api.apps.v1.Deployment"));
    }

    #[test]
    fn no_description_is_carried() {
        assert!(!DATA.contains("\"description\""));
    }
}
