//! What a write changed, as paths: structured-merge-diff's `Compare`, which gives an Update
//! its fields (the writer takes what it added or modified and loses what it removed) and an
//! Apply its conflicts (another manager's fields the apply would add or modify).
//!
//! The walk is the merge's ([`super::merge`]: the same schema, list types and item
//! identities); what it records:
//! - a value that is one value (a scalar, an atomic list or map, a map or list empty or
//!   absent on both sides, anything under no schema but two objects) is *added* when only
//!   the new object has it, *removed* when only the old one does, *modified* when both
//!   have it and it differs (numbers compared as numbers);
//! - a map, a keyed or set list, or a list item that only the new object has is *added*
//!   itself too, beside what it holds (only the old one: *removed*), so a create's
//!   `metadata.labels` is a member of what it added (`"f:labels": {".": {}, ...}`).
//!
//! Invariants: pure; the two objects are only read; the three sets are disjoint.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::typed::{field_schema, item_element, type_of, Type};
use super::{compare_values, display, PathElement, Set};
use crate::apiserver::openapi::definition_of;

/// The paths a write from `old` to `new` added, modified and removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    pub added: Set,
    pub modified: Set,
    pub removed: Set,
}

impl Comparison {
    /// Whether the two objects are the same.
    pub fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }
}

/// The comparison of `old` and `new`, two objects of the served `kind`.
///
/// # Errors
/// A kind kcm does not serve, or a list item without its keys: one message naming the
/// path.
pub fn compare(kind: &str, old: &Value, new: &Value) -> Result<Comparison, String> {
    let definition =
        definition_of(kind).ok_or_else(|| format!("no served schema for kind {kind:?}"))?;
    let mut walk = Walk {
        path: Vec::new(),
        out: Comparison::default(),
    };
    walk.value(Some(definition), Some(old), Some(new))?;
    Ok(walk.out)
}

struct Walk {
    path: Vec<PathElement>,
    out: Comparison,
}

fn is_empty(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::Object(map)) => map.is_empty(),
        Some(Value::Array(list)) => list.is_empty(),
        Some(_) => false,
    }
}

impl Walk {
    fn leaf(&mut self, old: Option<&Value>, new: Option<&Value>) {
        match (old, new) {
            (None, Some(_)) => self.out.added.insert(&self.path),
            (Some(_), None) => self.out.removed.insert(&self.path),
            (Some(old), Some(new)) if compare_values(old, new) != Ordering::Equal => {
                self.out.modified.insert(&self.path);
            }
            _ => {}
        }
    }

    /// After a value that is not one value: itself added or removed.
    fn itself(&mut self, old: Option<&Value>, new: Option<&Value>) {
        match (old, new) {
            (None, Some(_)) => self.out.added.insert(&self.path),
            (Some(_), None) => self.out.removed.insert(&self.path),
            _ => {}
        }
    }

    fn value(
        &mut self,
        schema: Option<&'static Value>,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<(), String> {
        // A subtree the write left as it was holds no change (most of an update).
        if let (Some(old), Some(new)) = (old, new) {
            if old == new {
                return Ok(());
            }
        }
        match type_of(schema) {
            Type::Scalar | Type::Atomic { .. } => self.leaf(old, new),
            Type::Any => match (old, new) {
                (Some(Value::Object(_)) | None, Some(Value::Object(_)))
                | (Some(Value::Object(_)), None) => self.map(None, old, new)?,
                _ => self.leaf(old, new),
            },
            Type::Map(resolved) => self.map(Some(resolved), old, new)?,
            Type::List { keys, items } => {
                if is_empty(old) && is_empty(new) {
                    self.leaf(old, new);
                } else {
                    self.list(keys.as_deref(), items, old, new)?;
                    self.itself(old, new);
                }
            }
        }
        Ok(())
    }

    fn map(
        &mut self,
        resolved: Option<&'static Value>,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<(), String> {
        if is_empty(old) && is_empty(new) {
            self.leaf(old, new);
            return Ok(());
        }
        let empty = Map::new();
        let o = old.and_then(Value::as_object).unwrap_or(&empty);
        let n = new.and_then(Value::as_object).unwrap_or(&empty);
        for name in o
            .keys()
            .chain(n.keys().filter(|name| !o.contains_key(*name)))
        {
            let child_schema = resolved.and_then(|resolved| field_schema(resolved, name).0);
            self.path.push(PathElement::Field(name.clone()));
            self.value(child_schema, o.get(name), n.get(name))?;
            self.path.pop();
        }
        self.itself(old, new);
        Ok(())
    }

    fn list<'v>(
        &mut self,
        keys: Option<&[&str]>,
        items: Option<&'static Value>,
        old: Option<&'v Value>,
        new: Option<&'v Value>,
    ) -> Result<(), String> {
        let index = |list: Option<&'v Value>, path: &[PathElement]| {
            let mut indexed: Vec<(PathElement, &'v Value)> = Vec::new();
            for item in list.and_then(Value::as_array).into_iter().flatten() {
                let element = item_element(keys, items, item)
                    .map_err(|why| format!("{}: {why}", display(path)))?;
                if !indexed.iter().any(|(seen, _)| *seen == element) {
                    indexed.push((element, item));
                }
            }
            Ok::<_, String>(indexed)
        };
        let old_items = index(old, &self.path)?;
        let new_items = index(new, &self.path)?;
        let find = |side: &[(PathElement, &'v Value)], element: &PathElement| {
            side.iter()
                .find(|(e, _)| e == element)
                .map(|(_, item)| *item)
        };
        for (element, item) in &old_items {
            self.path.push(element.clone());
            self.value(items, Some(item), find(&new_items, element))?;
            self.path.pop();
        }
        for (element, item) in &new_items {
            if find(&old_items, element).is_some() {
                continue;
            }
            self.path.push(element.clone());
            self.value(items, None, Some(item))?;
            self.path.pop();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
