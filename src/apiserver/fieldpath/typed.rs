//! The paths an object has under the served schema: what an applied configuration makes
//! its manager own (structured-merge-diff's `typed` package, `ToFieldSet`), with each
//! list's semantics read from Kubernetes 1.32's schema (`openapi::schemas`), as kube-openapi's
//! `schemaconv` reads them.
//!
//! The rules, for a value at path `p`:
//! - a scalar (and `null`, where the schema says a scalar or nothing) is the member `p`;
//! - an atomic list or map (`x-kubernetes-list-type: atomic`, a list with no list type and
//!   no merge strategy, `x-kubernetes-map-type: atomic`) is the member `p`, nothing below;
//! - a list of type `map` (`x-kubernetes-list-map-keys`, or the one
//!   `x-kubernetes-patch-merge-key` of a list merged by key) has each item as a member by
//!   its key fields (`p[name="web"]`), an absent key field taking the schema's default or
//!   left out, and an item with no key field at all an error; a list of type `set` (or
//!   merged without a key) has each item by its value (`p[="x"]`); and each item's paths
//!   below it;
//! - a map has each entry's paths; an entry the schema does not declare as a property (a
//!   label, an annotation, anything under a schema that says nothing) is a member too, a
//!   declared one only through what it holds, so `spec: {}` owns nothing;
//! - under no schema the value decides: objects are maps, lists atomic.
//!
//! 1.32's published schema carries no `default` for a port's `protocol`, a key field:
//! [`KEY_DEFAULTS`] completes it as the Go types' `+default` markers complete
//! kube-apiserver's. An applied list with two items of one key is refused (kube-apiserver
//! refuses duplicates in a configuration, and takes them in a live object).
//!
//! What server-side apply does not do as kube-apiserver does:
//! - an Update entry is what a write changed (structured-merge-diff's `Compare`), not these
//!   paths. kube-apiserver compares against the Go zero value of the kind on a create, in
//!   which a struct that is not a pointer (`spec`, `spec.template`, `spec.strategy`) is
//!   already present and a pointer or a map (`spec.strategy.rollingUpdate`,
//!   `metadata.labels`) is not: so only the latter become members (`".": {}`) of a
//!   create's entry. Which is which is in the Go types, not in the schema.
//!
//! Invariants: pure; one walk of the object; an error names the path and what the schema
//! expected there.

use serde_json::Value;

use super::{display, PathElement, Set};
use crate::apiserver::openapi::{definition_of, schemas};

/// The paths of `object`, an object of the served `kind`.
///
/// # Errors
/// A kind kcm does not serve, a value of another shape than its schema's, or a list item
/// without its keys: one message naming the path.
pub fn fields_of(kind: &str, object: &Value) -> Result<Set, String> {
    let definition =
        definition_of(kind).ok_or_else(|| format!("no served schema for kind {kind:?}"))?;
    let mut walk = Walk {
        set: Set::new(),
        path: Vec::new(),
    };
    walk.value(Some(definition), object)?;
    Ok(walk.set)
}

/// How a list's items are told apart.
#[derive(Debug, PartialEq, Eq)]
enum ListType<'s> {
    /// The list is one value.
    Atomic,
    /// By value.
    Set,
    /// By these fields of each item.
    Map(Vec<&'s str>),
}

/// The list type of a list whose field schema is `schema`.
fn list_type(schema: &Value) -> ListType<'_> {
    match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => return ListType::Set,
        Some("map") => {
            let keys = schema["x-kubernetes-list-map-keys"]
                .as_array()
                .map(|keys| keys.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            return ListType::Map(keys);
        }
        Some(_) => return ListType::Atomic,
        None => {}
    }
    let merges = schema
        .get("x-kubernetes-patch-strategy")
        .and_then(Value::as_str)
        .is_some_and(|strategy| strategy.split(',').any(|s| s == "merge"));
    match schema
        .get("x-kubernetes-patch-merge-key")
        .and_then(Value::as_str)
    {
        Some(key) if merges => ListType::Map(vec![key]),
        None if merges => ListType::Set,
        _ => ListType::Atomic,
    }
}

/// What a schema says a value is.
#[derive(Debug, PartialEq, Eq)]
enum Shape {
    List,
    Map,
    Scalar,
    /// Nothing: the value decides.
    Any,
}

fn shape(schema: &Value) -> Shape {
    match schema.get("type").and_then(Value::as_str) {
        Some("array") => Shape::List,
        Some("object") => Shape::Map,
        Some(_) => Shape::Scalar,
        None if schema.get("items").is_some() => Shape::List,
        None if schema.get("properties").is_some()
            || schema.get("additionalProperties").is_some() =>
        {
            Shape::Map
        }
        None if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) => {
            Shape::Scalar
        }
        None => Shape::Any,
    }
}

/// What the schema says one value is: what the walks over objects (this one, the merge,
/// the comparison) decide by.
#[derive(Debug)]
pub(super) enum Type {
    /// A scalar: one value.
    Scalar,
    /// An atomic list (`list`) or map: one value.
    Atomic { list: bool },
    /// A map whose entries are told apart, with its schema (resolved).
    Map(&'static Value),
    /// A list whose items are told apart: a set (`keys: None`) or a list keyed by fields,
    /// with its items' schema.
    List {
        keys: Option<Vec<&'static str>>,
        items: Option<&'static Value>,
    },
    /// No schema: the value decides (objects are maps, anything else one value).
    Any,
}

/// The type of a value whose field's schema is `schema` (`None`: no schema).
pub(super) fn type_of(schema: Option<&'static Value>) -> Type {
    let Some(field) = schema else {
        return Type::Any;
    };
    let resolved = schemas().dereference(field);
    match shape(resolved) {
        Shape::Scalar => Type::Scalar,
        Shape::Any => Type::Any,
        Shape::Map if is_atomic_map(field) || is_atomic_map(resolved) => {
            Type::Atomic { list: false }
        }
        Shape::Map => Type::Map(resolved),
        Shape::List => match list_type_of(field, resolved) {
            ListType::Atomic => Type::Atomic { list: true },
            ListType::Set => Type::List {
                keys: None,
                items: resolved.get("items"),
            },
            ListType::Map(keys) => Type::List {
                keys: Some(keys),
                items: resolved.get("items"),
            },
        },
    }
}

impl Type {
    /// What the schema expected where `value` has another shape (`null` fits any).
    pub(super) fn mismatch(&self, value: &Value) -> Option<&'static str> {
        let list = match self {
            Type::Any => return None,
            Type::Scalar => {
                return matches!(value, Value::Array(_) | Value::Object(_)).then_some("a scalar")
            }
            Type::Atomic { list } => *list,
            Type::List { .. } => true,
            Type::Map(_) => false,
        };
        match value {
            Value::Null => None,
            Value::Array(_) if list => None,
            Value::Object(_) if !list => None,
            _ if list => Some("a list"),
            _ => Some("an object"),
        }
    }
}

struct Walk {
    set: Set,
    path: Vec<PathElement>,
}

impl Walk {
    /// Adds the paths of `value`, whose schema is `schema` (`None`: no schema).
    fn value(&mut self, schema: Option<&'static Value>, value: &Value) -> Result<(), String> {
        let value_type = type_of(schema);
        if let Some(what) = value_type.mismatch(value) {
            return Err(self.expected(what));
        }
        match (value_type, value) {
            (Type::List { keys, items }, Value::Array(values)) => {
                self.list(keys.as_deref(), items, values)
            }
            // A map or list told apart by its entries owns nothing of its own.
            (Type::List { .. } | Type::Map(_), Value::Null) => Ok(()),
            (Type::Map(resolved), Value::Object(fields)) => {
                for (name, child) in fields {
                    let (child_schema, declared) = field_schema(resolved, name);
                    self.path.push(PathElement::Field(name.clone()));
                    self.value(child_schema, child)?;
                    if !declared {
                        self.set.insert(&self.path);
                    }
                    self.path.pop();
                }
                Ok(())
            }
            (Type::Any, Value::Object(fields)) => {
                for (name, child) in fields {
                    self.path.push(PathElement::Field(name.clone()));
                    self.value(None, child)?;
                    self.set.insert(&self.path);
                    self.path.pop();
                }
                Ok(())
            }
            // A scalar, an atomic list or map, anything else under no schema.
            _ => {
                self.set.insert(&self.path);
                Ok(())
            }
        }
    }

    fn list(
        &mut self,
        keys: Option<&[&str]>,
        items: Option<&'static Value>,
        values: &[Value],
    ) -> Result<(), String> {
        let mut seen = Set::new();
        for item in values {
            let element = item_element(keys, items, item)
                .map_err(|why| format!("{}: {why}", display(&self.path)))?;
            let one = std::slice::from_ref(&element);
            if seen.has(one) {
                return Err(format!(
                    "{}: duplicate entries for key {}",
                    display(&self.path),
                    display(one)
                ));
            }
            seen.insert(one);
            self.path.push(element);
            self.value(items, item)?;
            self.set.insert(&self.path);
            self.path.pop();
        }
        Ok(())
    }

    fn expected(&self, what: &str) -> String {
        let at = display(&self.path);
        let at = if at.is_empty() { "the object" } else { &at };
        format!("{at}: expected {what}")
    }
}

/// The path element of `item`, an item of a list keyed by `keys` (`None`: a set) whose
/// items' schema is `items`: its key fields, an absent one taking its schema's default.
///
/// # Errors
/// A set item that is not a scalar, a keyed item with none of its keys.
pub(super) fn item_element(
    keys: Option<&[&str]>,
    items: Option<&'static Value>,
    item: &Value,
) -> Result<PathElement, String> {
    let Some(keys) = keys else {
        return match item {
            Value::Array(_) | Value::Object(_) => Err("expected a set of scalars".to_string()),
            _ => Ok(PathElement::Value(item.clone())),
        };
    };
    let item_fields = items
        .map(|items| schemas().dereference(items))
        .and_then(|items| items.get("properties"));
    let mut fields = Vec::new();
    for key in keys {
        let default = item_fields
            .and_then(|p| p.get(*key))
            .map(|schema| schemas().dereference(schema))
            .and_then(|schema| schema.get("default"))
            .or_else(|| key_default(items, key));
        if let Some(value) = item.get(*key).or(default) {
            fields.push(((*key).to_string(), value.clone()));
        }
    }
    if fields.is_empty() {
        return Err(format!(
            "an item of a list keyed by {} has none of its keys",
            keys.join(", ")
        ));
    }
    Ok(PathElement::key(fields))
}

/// The defaults of key fields that the Go types declare (`+default="TCP"`) and the
/// published 1.32 schema leaves out: a port's `protocol`, so that a port applied without
/// one is the item kube-apiserver keys as `{"containerPort":80,"protocol":"TCP"}`.
const KEY_DEFAULTS: &[(&str, &str)] = &[
    ("io.k8s.api.core.v1.ContainerPort", "protocol"),
    ("io.k8s.api.core.v1.ServicePort", "protocol"),
    ("io.k8s.api.core.v1.EndpointPort", "protocol"),
];

/// The default of key field `key` of the items `items` refers to, from [`KEY_DEFAULTS`].
fn key_default(items: Option<&'static Value>, key: &str) -> Option<&'static Value> {
    let reference = items?.get("$ref")?.as_str()?;
    let definition = reference.rsplit('/').next()?;
    KEY_DEFAULTS
        .iter()
        .any(|&(d, k)| d == definition && k == key)
        .then(tcp)
}

fn tcp() -> &'static Value {
    static TCP: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    TCP.get_or_init(|| Value::String("TCP".to_string()))
}

/// The schema of field `name` of an object whose (resolved) schema is `object`, and
/// whether the schema declares it (a property, not a map entry or an unknown field).
pub(super) fn field_schema(object: &'static Value, name: &str) -> (Option<&'static Value>, bool) {
    match object.get("properties").and_then(|p| p.get(name)) {
        Some(declared) => (Some(declared), true),
        None => {
            let values = object
                .get("additionalProperties")
                .filter(|values| values.is_object());
            (values, false)
        }
    }
}

/// `x-kubernetes-map-type: atomic`.
fn is_atomic_map(schema: &Value) -> bool {
    schema.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic")
}

/// The list type of a list field: on the field's own schema (beside its `$ref`, if any),
/// else on what it refers to.
fn list_type_of<'s>(field: &'s Value, resolved: &'s Value) -> ListType<'s> {
    match list_type(field) {
        ListType::Atomic => list_type(resolved),
        other => other,
    }
}

#[cfg(test)]
mod tests;
