//! Strategic merge patch (`application/strategic-merge-patch+json`): the list strategies
//! of the served kinds ([`BuiltinPatchSchema`], read from the served schema's
//! `x-kubernetes-patch-strategy` and `x-kubernetes-patch-merge-key`) and the merge itself,
//! after `staging/src/k8s.io/apimachinery/pkg/util/strategicpatch/patch.go`. The invariants
//! are the patch module's.

use serde_json::{Map, Value};

use super::PatchError;
use crate::apiserver::openapi::schemas;
use crate::apiserver::resources::RESOURCES;
use ListMergeStrategy::{MergeAsSet, MergeByKey};

// ---------------------------------------------------------------------------------------------
// Strategic merge patch: schema
// ---------------------------------------------------------------------------------------------

/// How a list field merges in a strategic merge patch (a Go struct tag `patchStrategy:"merge"`).
/// A list with no strategy is replaced whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListMergeStrategy {
    /// A list of objects merged item by item, identified by this field
    /// (`patchMergeKey:"name"`).
    MergeByKey(&'static str),
    /// A list of primitives merged as a set: new values are appended, duplicates dropped
    /// (`finalizers`).
    MergeAsSet,
}

/// What a strategic merge patch needs to know about an object's type: which list fields merge,
/// and how. `field_path` holds the field names from the object's root; list items add no
/// segment, so a container's ports are `["spec", "template", "spec", "containers", "ports"]`.
pub trait PatchSchema {
    /// The merge strategy of the list at `field_path`, or `None` if that list is replaced.
    fn list_merge_strategy(&self, field_path: &[&str]) -> Option<ListMergeStrategy>;
}

/// A schema under which every list is replaced: a strategic merge patch then behaves like a JSON
/// merge patch plus the `$` directives (what kube-apiserver does for kinds without Go types).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoListMergeStrategies;

impl PatchSchema for NoListMergeStrategies {
    fn list_merge_strategy(&self, _field_path: &[&str]) -> Option<ListMergeStrategy> {
        None
    }
}

/// The list merge strategies of one served kind, read from its definition in the schema kcm
/// serves (Kubernetes 1.32's, `openapi::schemas`, the one parse every reader shares): a list merges where its field
/// carries `x-kubernetes-patch-strategy: merge` (by its `x-kubernetes-patch-merge-key`, or as
/// a set without one), the extensions kube-openapi writes from the `patchStrategy` and
/// `patchMergeKey` struct tags of `k8s.io/api`. A field path is looked up by walking the
/// definitions from the kind's, following `$ref`s and stepping into a list's items.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BuiltinPatchSchema {
    /// The kind's definition (`io.k8s.api.core.v1.Pod`).
    definition: &'static Value,
}

impl BuiltinPatchSchema {
    /// The schema of a kind kcm serves (`Scale` included, with the group and version it is
    /// served in), or `None` for a kind the served schema does not have.
    pub fn for_kind(kind: &str) -> Option<BuiltinPatchSchema> {
        let (group, version) = RESOURCES.iter().find_map(|resource| {
            if resource.kind == kind {
                return Some((resource.group, resource.version));
            }
            let subresource = resource.subresources.iter().find(|sub| sub.kind == kind)?;
            Some((subresource.group, subresource.version))
        })?;
        let schemas = schemas();
        let name = schemas.name_of(group, version, kind)?;
        let definition = schemas.by_name.get(name)?;
        Some(BuiltinPatchSchema { definition })
    }
}

impl PatchSchema for BuiltinPatchSchema {
    fn list_merge_strategy(&self, field_path: &[&str]) -> Option<ListMergeStrategy> {
        let mut field = None;
        let mut schema = self.definition;
        for name in field_path {
            let property = object_schema(schema)?.get("properties")?.get(*name)?;
            field = Some(property);
            schema = property;
        }
        let strategy = field?.get("x-kubernetes-patch-strategy")?.as_str()?;
        if !strategy.split(',').any(|strategy| strategy == "merge") {
            return None;
        }
        match field?.get("x-kubernetes-patch-merge-key") {
            Some(Value::String(merge_key)) => Some(MergeByKey(merge_key)),
            _ => Some(MergeAsSet),
        }
    }
}

/// The schema of the objects `schema` holds: itself, or what its `$ref` names, or its items'
/// schema for a list (a list item adds no segment to a field path).
fn object_schema(mut schema: &'static Value) -> Option<&'static Value> {
    // A bound, not a loop guard the data needs: every `$ref` names a definition with
    // properties or a type, so two steps (a list of references) are the most it takes.
    for _ in 0..8 {
        if let Some(Value::String(reference)) = schema.get("$ref") {
            schema = schemas().resolve(reference)?;
        } else if let Some(items) = schema.get("items") {
            schema = items;
        } else {
            return Some(schema);
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Strategic merge patch: application
// ---------------------------------------------------------------------------------------------

const PATCH_DIRECTIVE: &str = "$patch";
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList/";

/// Applies a strategic merge patch to `target` (an object) and returns the result.
///
/// Maps merge and `null` deletes a key; a list merges by the strategy `schema` gives its field
/// path (patch items update the item with the same key or are appended) and is replaced
/// otherwise. Directives: `$patch: replace` on a map or as a list item replaces the map or list,
/// `$patch: delete` on a map removes it and on a list item removes the item with that key,
/// `$patch: merge` is the default; `$deleteFromPrimitiveList/<field>: [..]` removes values from a
/// primitive list; `$setElementOrder/<field>: [..]` orders a merged list (its items first in that
/// order, the items only the target has kept in their place among them); `$retainKeys: [..]`
/// keeps only the listed keys of the target's map. Directives are never stored.
pub fn strategic_merge_patch(
    target: &Value,
    patch: &Value,
    schema: &dyn PatchSchema,
) -> Result<Value, PatchError> {
    let mut walk = StrategicWalk {
        schema,
        field_path: Vec::new(),
    };
    let Value::Object(patch) = patch else {
        return Err(walk.error("a strategic merge patch must be a JSON object"));
    };
    let Value::Object(target) = target else {
        return Err(walk.error("the patched object must be a JSON object"));
    };
    match walk.merge_map(target.clone(), patch)? {
        MapOutcome::Keep(merged) => Ok(Value::Object(merged)),
        MapOutcome::Delete => Ok(Value::Object(Map::new())),
    }
}

enum MapOutcome {
    Keep(Map<String, Value>),
    Delete,
}

struct StrategicWalk<'schema> {
    schema: &'schema dyn PatchSchema,
    field_path: Vec<String>,
}

pub(super) fn is_directive_key(key: &str) -> bool {
    key == PATCH_DIRECTIVE
        || key == RETAIN_KEYS_DIRECTIVE
        || key.starts_with(SET_ELEMENT_ORDER_PREFIX)
        || key.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
}

impl StrategicWalk<'_> {
    fn error(&self, reason: impl Into<String>) -> PatchError {
        PatchError::StrategicMergePatch {
            path: self.field_path.join("."),
            reason: reason.into(),
        }
    }

    fn list_strategy_of(&self, field: &str) -> Option<ListMergeStrategy> {
        let mut path: Vec<&str> = self.field_path.iter().map(String::as_str).collect();
        path.push(field);
        self.schema.list_merge_strategy(&path)
    }

    fn with_field<T>(
        &mut self,
        field: &str,
        step: impl FnOnce(&mut Self) -> Result<T, PatchError>,
    ) -> Result<T, PatchError> {
        self.field_path.push(field.to_string());
        let result = step(self);
        self.field_path.pop();
        result
    }

    /// `mergeMap`: merges `patch` into `original`.
    fn merge_map(
        &mut self,
        mut original: Map<String, Value>,
        patch: &Map<String, Value>,
    ) -> Result<MapOutcome, PatchError> {
        match patch.get(PATCH_DIRECTIVE) {
            None => {}
            Some(Value::String(directive)) if directive == "replace" => {
                let mut replacement = patch.clone();
                replacement.shift_remove(PATCH_DIRECTIVE);
                return self.merge_map(Map::new(), &replacement);
            }
            Some(Value::String(directive)) if directive == "delete" => {
                return Ok(MapOutcome::Delete);
            }
            Some(Value::String(directive)) if directive == "merge" => {}
            Some(other) => {
                return Err(self.error(format!("unknown patch type {other} in map")));
            }
        }

        self.retain_keys(&mut original, patch)?;
        self.delete_from_primitive_lists(&mut original, patch)?;

        // The target's lists as they were, for `$setElementOrder`'s interleaving.
        let lists_before_patch: Vec<(&str, Vec<Value>)> = patch
            .keys()
            .filter_map(|key| key.strip_prefix(SET_ELEMENT_ORDER_PREFIX))
            .map(|field| {
                let items = match original.get(field) {
                    Some(Value::Array(items)) => items.clone(),
                    _ => Vec::new(),
                };
                (field, items)
            })
            .collect();

        for (key, patch_value) in patch {
            if is_directive_key(key) {
                continue;
            }
            if patch_value.is_null() {
                original.shift_remove(key);
                continue;
            }
            let existing = original.get_mut(key).map(Value::take);
            let merged = self.with_field(key, |walk| walk.merge_value(existing, patch_value))?;
            match merged {
                Some(value) => {
                    original.insert(key.clone(), value);
                }
                None => {
                    original.shift_remove(key);
                }
            }
        }

        self.set_element_orders(&mut original, patch, &lists_before_patch)?;
        Ok(MapOutcome::Keep(original))
    }

    /// `$retainKeys`: keeps only the listed fields of `original`; a field the patch sets
    /// must be listed.
    fn retain_keys(
        &self,
        original: &mut Map<String, Value>,
        patch: &Map<String, Value>,
    ) -> Result<(), PatchError> {
        let Some(retained) = patch.get(RETAIN_KEYS_DIRECTIVE) else {
            return Ok(());
        };
        let Value::Array(retained) = retained else {
            return Err(self.error("$retainKeys must be a list of field names"));
        };
        let retained: Vec<&str> = retained.iter().filter_map(Value::as_str).collect();
        for (key, value) in patch {
            if !value.is_null() && !is_directive_key(key) && !retained.contains(&key.as_str()) {
                return Err(self.error(format!(
                    "field {key:?} is in the patch but not in its $retainKeys list"
                )));
            }
        }
        original.retain(|key, _| retained.contains(&key.as_str()));
        Ok(())
    }

    /// `$deleteFromPrimitiveList/FIELD`: removes the listed values from `original`'s list.
    fn delete_from_primitive_lists(
        &self,
        original: &mut Map<String, Value>,
        patch: &Map<String, Value>,
    ) -> Result<(), PatchError> {
        for (key, deleted) in patch {
            let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST_PREFIX) else {
                continue;
            };
            let Value::Array(deleted) = deleted else {
                return Err(self.error(format!("{key} must be a list")));
            };
            if let Some(Value::Array(items)) = original.get_mut(field) {
                items.retain(|item| !deleted.contains(item));
            }
        }
        Ok(())
    }

    /// `$setElementOrder/FIELD`: orders each merged list as the patch says, interleaving the
    /// items it does not name from `lists_before_patch`.
    fn set_element_orders(
        &mut self,
        original: &mut Map<String, Value>,
        patch: &Map<String, Value>,
        lists_before_patch: &[(&str, Vec<Value>)],
    ) -> Result<(), PatchError> {
        for (key, order) in patch {
            let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER_PREFIX) else {
                continue;
            };
            let Value::Array(order) = order else {
                return Err(self.error(format!("{key} must be a list")));
            };
            let Some(strategy) = self.list_strategy_of(field) else {
                continue;
            };
            let Some(Value::Array(merged)) = original.get_mut(field) else {
                continue;
            };
            let patch_items = match patch.get(field) {
                Some(Value::Array(items)) => items.as_slice(),
                _ => &[],
            };
            let before_patch = lists_before_patch
                .iter()
                .find(|(listed, _)| *listed == field)
                .map(|(_, items)| items.as_slice())
                .unwrap_or_default();
            self.with_field(field, |walk| {
                walk.apply_element_order(merged, before_patch, patch_items, order, strategy)
            })?;
        }

        Ok(())
    }

    /// Merges one field's patch value into its current value (`None` when absent); `Ok(None)`
    /// means the field goes away.
    fn merge_value(
        &mut self,
        existing: Option<Value>,
        patch_value: &Value,
    ) -> Result<Option<Value>, PatchError> {
        let strategy = {
            let path: Vec<&str> = self.field_path.iter().map(String::as_str).collect();
            self.schema.list_merge_strategy(&path)
        };
        match (existing, patch_value) {
            (existing, Value::Object(patch_members)) => {
                let original = match existing {
                    Some(Value::Object(members)) => members,
                    _ => Map::new(),
                };
                Ok(match self.merge_map(original, patch_members)? {
                    MapOutcome::Keep(merged) => Some(Value::Object(merged)),
                    MapOutcome::Delete => None,
                })
            }
            (existing, Value::Array(patch_items)) => match strategy {
                Some(strategy) => {
                    let original = match existing {
                        Some(Value::Array(items)) => items,
                        _ => Vec::new(),
                    };
                    self.merge_list(original, patch_items, strategy)
                        .map(|items| Some(Value::Array(items)))
                }
                None => Ok(Some(patch_value.clone())),
            },
            (_, scalar) => Ok(Some(scalar.clone())),
        }
    }

    /// `mergeSlice`: merges a patch list into a list with a merge strategy.
    fn merge_list(
        &mut self,
        mut original: Vec<Value>,
        patch: &[Value],
        strategy: ListMergeStrategy,
    ) -> Result<Vec<Value>, PatchError> {
        let merge_key = match strategy {
            ListMergeStrategy::MergeAsSet => {
                if patch.iter().any(|item| item.is_object() || item.is_array()) {
                    return Err(self.error("a list merged as a set takes only primitive values"));
                }
                for item in patch {
                    if !original.contains(item) {
                        original.push(item.clone());
                    }
                }
                let mut unique: Vec<Value> = Vec::with_capacity(original.len());
                for item in original {
                    if !unique.contains(&item) {
                        unique.push(item);
                    }
                }
                return Ok(unique);
            }
            ListMergeStrategy::MergeByKey(merge_key) => merge_key,
        };

        let mut plain_items: Vec<&Map<String, Value>> = Vec::with_capacity(patch.len());
        let mut replace = false;
        for item in patch {
            let Value::Object(members) = item else {
                return Err(self.error(format!(
                    "the items of a list merged by {merge_key:?} must be objects, not {item}"
                )));
            };
            match members.get(PATCH_DIRECTIVE) {
                None => plain_items.push(members),
                Some(Value::String(directive)) if directive == "replace" => replace = true,
                Some(Value::String(directive)) if directive == "delete" => {
                    let Some(key_value) = members.get(merge_key) else {
                        return Err(self.error(format!(
                            "delete patch type with no merge key {merge_key:?} defined"
                        )));
                    };
                    original.retain(|existing| existing.get(merge_key) != Some(key_value));
                }
                Some(Value::String(directive)) if directive == "merge" => {
                    return Err(self.error("merging lists cannot yet be specified in the patch"));
                }
                Some(other) => {
                    return Err(self.error(format!("unknown patch type {other} in list")));
                }
            }
        }
        if replace {
            original.clear();
        }

        for item in plain_items {
            let Some(key_value) = item.get(merge_key) else {
                return Err(self.error(format!(
                    "map {} does not contain declared merge key: {merge_key}",
                    Value::Object(item.clone())
                )));
            };
            let position = original
                .iter()
                .position(|existing| existing.get(merge_key) == Some(key_value));
            match position {
                Some(position) => {
                    let existing = match original[position].take() {
                        Value::Object(members) => members,
                        _ => Map::new(),
                    };
                    match self.merge_map(existing, item)? {
                        MapOutcome::Keep(merged) => original[position] = Value::Object(merged),
                        MapOutcome::Delete => {
                            original.remove(position);
                        }
                    }
                }
                None => {
                    if let MapOutcome::Keep(created) = self.merge_map(Map::new(), item)? {
                        original.push(Value::Object(created));
                    }
                }
            }
        }
        Ok(original)
    }

    /// `mergePatchIntoOriginal`'s ordering: the items named in `order` come in that order, and
    /// the items only the target had are put back among them by their place in the target.
    fn apply_element_order(
        &self,
        merged: &mut Vec<Value>,
        before_patch: &[Value],
        patch_items: &[Value],
        order: &[Value],
        strategy: ListMergeStrategy,
    ) -> Result<(), PatchError> {
        let identity = |item: &Value| -> Option<Value> {
            match strategy {
                ListMergeStrategy::MergeAsSet => Some(item.clone()),
                ListMergeStrategy::MergeByKey(key) => item.get(key).cloned(),
            }
        };
        let order_identities: Vec<Value> = order
            .iter()
            .map(|item| {
                identity(item).ok_or_else(|| {
                    self.error(format!("$setElementOrder item {item} has no merge key"))
                })
            })
            .collect::<Result<_, _>>()?;
        let mut last_position = 0;
        for item in patch_items {
            if item.get(PATCH_DIRECTIVE).is_some() {
                continue;
            }
            let position = identity(item)
                .and_then(|id| order_identities.iter().position(|named| *named == id));
            match position {
                Some(position) if position >= last_position => last_position = position,
                _ => {
                    return Err(self.error(format!(
                        "the patch list does not match the $setElementOrder list at {item}"
                    )));
                }
            }
        }

        // The merged list keeps the target's items in the target's order, so the server-only
        // items are already sorted by `serverOrder`, as `normalizeSliceOrder` would leave them.
        let server_order: Vec<Option<Value>> = before_patch.iter().map(identity).collect();
        let (mut named, server_only): (Vec<Value>, Vec<Value>) = std::mem::take(merged)
            .into_iter()
            .partition(|item| identity(item).is_some_and(|id| order_identities.contains(&id)));
        named.sort_by_key(|item| {
            identity(item).and_then(|id| order_identities.iter().position(|named| *named == id))
        });
        let server_position = |item: &Value| -> Option<usize> {
            let id = identity(item)?;
            server_order
                .iter()
                .position(|existing| existing.as_ref() == Some(&id))
        };

        // `mergeSortedSlice(serverOnly, patch, serverOrder)`.
        let mut left = server_only.into_iter().peekable();
        let mut right = named.into_iter().peekable();
        loop {
            let take_left = match (left.peek(), right.peek()) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(left_item), Some(right_item)) => {
                    match (server_position(left_item), server_position(right_item)) {
                        (Some(left_index), Some(right_index)) => left_index < right_index,
                        _ => false,
                    }
                }
            };
            let next = if take_left { left.next() } else { right.next() };
            merged.extend(next);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
