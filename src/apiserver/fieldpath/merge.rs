//! Merging an applied configuration into the live object, and removing a set of paths
//! from an object: the two edits server-side apply makes (structured-merge-diff's
//! `typed` package, `Merge` with the applied side winning, and `RemoveItems`).
//!
//! Merge rules, under the served schema (the list types [`super::typed`] reads):
//! - a scalar, an atomic list or an atomic map is one value: the configuration's, where
//!   it has one;
//! - maps merge entry by entry; an entry only one side has is kept as it is;
//! - a keyed list (`map`) or a `set` merges item by item, an item identified by its key
//!   fields or its value; the items the live list has and the configuration does not keep
//!   their place, and the shared ones take the configuration's order (live `[a, b, c]`
//!   with configuration `[c, a]` is `[b, c, a]`); an item repeated on one side counts
//!   once, its first occurrence;
//! - a map or list that is empty or absent on both sides is one value, so `{}` and `[]`
//!   stay as the configuration writes them; `null` where the schema says a map or a list
//!   is empty;
//! - under no schema the values decide: two objects merge as maps, anything else is one
//!   value.
//!
//! Invariants: pure; neither input changes; an error names the path.

use serde_json::{Map, Value};

use super::typed::{field_schema, item_element, type_of, Type};
use super::{display, PathElement, Set};
use crate::apiserver::openapi::definition_of;

/// `config` merged into `live`, both objects of the served `kind`.
///
/// # Errors
/// A kind kcm does not serve, a value of another shape than its schema's, or a list item
/// without its keys: one message naming the path.
pub fn merge(kind: &str, live: &Value, config: &Value) -> Result<Value, String> {
    let definition =
        definition_of(kind).ok_or_else(|| format!("no served schema for kind {kind:?}"))?;
    let mut path = Vec::new();
    let merged = merge_value(&mut path, Some(definition), Some(live), Some(config))?;
    Ok(merged.unwrap_or_else(|| Value::Object(Map::new())))
}

/// `object` without the members of `set` (a member's whole value goes, with what it holds).
///
/// # Errors
/// A kind kcm does not serve, or a list item without its keys.
pub fn remove(kind: &str, object: &Value, set: &Set) -> Result<Value, String> {
    let definition =
        definition_of(kind).ok_or_else(|| format!("no served schema for kind {kind:?}"))?;
    let mut out = object.clone();
    remove_in(&mut Vec::new(), Some(definition), &mut out, set)?;
    Ok(out)
}

/// The map or list `value` holds, `None` for null, absent or empty.
fn non_empty_map(value: Option<&Value>) -> Option<&Map<String, Value>> {
    value
        .and_then(Value::as_object)
        .filter(|map| !map.is_empty())
}

fn non_empty_list(value: Option<&Value>) -> Option<&Vec<Value>> {
    value
        .and_then(Value::as_array)
        .filter(|list| !list.is_empty())
}

/// The configuration's value where it has one, else the live one.
fn leaf(lhs: Option<&Value>, rhs: Option<&Value>) -> Option<Value> {
    rhs.or(lhs).cloned()
}

fn merge_value(
    path: &mut Vec<PathElement>,
    schema: Option<&'static Value>,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
) -> Result<Option<Value>, String> {
    let value_type = type_of(schema);
    if let Some(what) = rhs.and_then(|rhs| value_type.mismatch(rhs)) {
        return Err(format!("{}: expected {what}", display(path)));
    }
    match value_type {
        Type::Scalar | Type::Atomic { .. } => Ok(leaf(lhs, rhs)),
        Type::Any => match (lhs, rhs) {
            (Some(Value::Object(_)) | None, Some(Value::Object(_)))
            | (Some(Value::Object(_)), None) => merge_map(path, None, lhs, rhs),
            _ => Ok(leaf(lhs, rhs)),
        },
        Type::Map(resolved) => merge_map(path, Some(resolved), lhs, rhs),
        Type::List { keys, items } => {
            let (l, r) = (non_empty_list(lhs), non_empty_list(rhs));
            if l.is_none() && r.is_none() {
                return Ok(leaf(lhs, rhs));
            }
            merge_list(path, keys.as_deref(), items, l, r).map(Some)
        }
    }
}

fn merge_map(
    path: &mut Vec<PathElement>,
    resolved: Option<&'static Value>,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
) -> Result<Option<Value>, String> {
    let (l, r) = (non_empty_map(lhs), non_empty_map(rhs));
    if l.is_none() && r.is_none() {
        return Ok(leaf(lhs, rhs));
    }
    let empty = Map::new();
    let (l, r) = (l.unwrap_or(&empty), r.unwrap_or(&empty));
    let names = l
        .keys()
        .chain(r.keys().filter(|name| !l.contains_key(*name)));
    let mut out = Map::new();
    for name in names {
        let child_schema = resolved.and_then(|resolved| field_schema(resolved, name).0);
        path.push(PathElement::Field(name.clone()));
        let merged = merge_value(path, child_schema, l.get(name), r.get(name))?;
        path.pop();
        if let Some(merged) = merged {
            out.insert(name.clone(), merged);
        }
    }
    Ok(Some(Value::Object(out)))
}

/// The item of `side` at `element`.
fn find<'v>(side: &[(PathElement, &'v Value)], element: &PathElement) -> Option<&'v Value> {
    side.iter()
        .find(|(e, _)| e == element)
        .map(|(_, item)| *item)
}

/// The items of `list` by element, each once (its first occurrence), in order.
fn index<'v>(
    path: &[PathElement],
    keys: Option<&[&str]>,
    items: Option<&'static Value>,
    list: Option<&'v Vec<Value>>,
) -> Result<Vec<(PathElement, &'v Value)>, String> {
    let mut indexed: Vec<(PathElement, &Value)> = Vec::new();
    for item in list.into_iter().flatten() {
        let element =
            item_element(keys, items, item).map_err(|why| format!("{}: {why}", display(path)))?;
        if !indexed.iter().any(|(seen, _)| *seen == element) {
            indexed.push((element, item));
        }
    }
    Ok(indexed)
}

fn merge_list(
    path: &mut Vec<PathElement>,
    keys: Option<&[&str]>,
    items: Option<&'static Value>,
    lhs: Option<&Vec<Value>>,
    rhs: Option<&Vec<Value>>,
) -> Result<Value, String> {
    let lhs = index(path, keys, items, lhs)?;
    let rhs = index(path, keys, items, rhs)?;
    // The shared items, in the configuration's order: each is written when its turn in
    // that order comes, so a shared live item met early waits.
    let mut shared = rhs
        .iter()
        .filter(|(e, _)| find(&lhs, e).is_some())
        .map(|(e, _)| e);
    let mut next_shared = shared.next();
    let mut out = Vec::new();
    let (mut l, mut r) = (0, 0);
    let mut merge_item = |path: &mut Vec<PathElement>,
                          element: &PathElement,
                          a: Option<&Value>,
                          b: Option<&Value>| {
        path.push(element.clone());
        let merged = merge_value(path, items, a, b);
        path.pop();
        merged.map(|merged| out.extend(merged))
    };
    while l < lhs.len() || r < rhs.len() {
        if l < lhs.len() && r < rhs.len() {
            let element = &lhs[l].0;
            if *element == rhs[r].0 {
                merge_item(path, element, Some(lhs[l].1), Some(rhs[r].1))?;
                l += 1;
                r += 1;
                next_shared = shared.next();
                continue;
            }
            if find(&rhs, element).is_some() && next_shared.is_some_and(|next| next != element) {
                l += 1;
                continue;
            }
        }
        if l < lhs.len() && find(&rhs, &lhs[l].0).is_none() {
            merge_item(path, &lhs[l].0, Some(lhs[l].1), None)?;
            l += 1;
            continue;
        }
        if r < rhs.len() {
            let element = &rhs[r].0;
            merge_item(path, element, find(&lhs, element), Some(rhs[r].1))?;
            r += 1;
            if next_shared == Some(element) {
                next_shared = shared.next();
            }
        } else {
            // Only shared live items are left, each already written in its turn.
            l += 1;
        }
    }
    Ok(Value::Array(out))
}

fn remove_in(
    path: &mut Vec<PathElement>,
    schema: Option<&'static Value>,
    value: &mut Value,
    set: &Set,
) -> Result<(), String> {
    let value_type = type_of(schema);
    match value {
        Value::Object(fields) => {
            fields.retain(|name, _| {
                !set.get(&PathElement::Field(name.clone()))
                    .is_some_and(|(member, _)| member)
            });
            let resolved = match value_type {
                Type::Map(resolved) => Some(resolved),
                _ => None,
            };
            for (name, child) in fields.iter_mut() {
                let element = PathElement::Field(name.clone());
                let Some((_, below)) = set.get(&element) else {
                    continue;
                };
                let child_schema = resolved.and_then(|resolved| field_schema(resolved, name).0);
                path.push(element);
                remove_in(path, child_schema, child, below)?;
                path.pop();
            }
        }
        Value::Array(list) => {
            let Type::List { keys, items } = value_type else {
                return Ok(());
            };
            let mut kept = Vec::with_capacity(list.len());
            for mut item in std::mem::take(list) {
                let element = item_element(keys.as_deref(), items, &item)
                    .map_err(|why| format!("{}: {why}", display(path)))?;
                match set.get(&element) {
                    Some((true, _)) => continue,
                    Some((false, below)) => {
                        path.push(element);
                        remove_in(path, items, &mut item, below)?;
                        path.pop();
                    }
                    None => {}
                }
                kept.push(item);
            }
            *list = kept;
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests;
