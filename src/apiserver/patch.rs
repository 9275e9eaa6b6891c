//! The three patch formats of `PATCH` requests, as pure functions over [`serde_json::Value`]:
//! JSON merge patch (`application/merge-patch+json`, [`merge_patch`]), JSON patch
//! (`application/json-patch+json`, [`json_patch`]) and strategic merge patch
//! (`application/strategic-merge-patch+json`, [`strategic_merge_patch`]).
//!
//! RFC 7386 and RFC 6902 are the `json-patch` crate's (tested with the RFCs' appendix A and
//! against `github.com/evanphx/json-patch`'s behaviour, what kube-apiserver applies JSON
//! patches with), behind an adapter that keeps kcm's error wording. Strategic merge patch
//! mirrors `staging/src/k8s.io/apimachinery/pkg/util/strategicpatch/patch.go` (`mergeMap`,
//! `mergeSlice`, `mergeSliceWithSpecialElements`, `mergePatchIntoOriginal`,
//! `normalizeElementOrder`, `mergeSortedSlice`, `applyRetainKeysDirective`) with the list
//! strategies of the served schema ([`BuiltinPatchSchema`]).
//!
//! Invariants:
//! - every function is pure: the target is never modified, a failed patch returns an error and
//!   no partial result, so a caller that stores only `Ok` values changes nothing on bad input;
//! - [`json_patch`] applies its operations in order to one working copy, all or nothing; every
//!   error names the operation's index (from 0), its `op` and its `path`;
//! - [`strategic_merge_patch`] never stores a directive: `$patch`, `$retainKeys`,
//!   `$setElementOrder/<field>` and `$deleteFromPrimitiveList/<field>` are consumed wherever
//!   they appear, in values merged into existing ones and in values that are new; other keys
//!   starting with `$` are ordinary fields, as in Kubernetes;
//! - `null` in a merge or strategic patch deletes the key and is never stored, except inside a
//!   list that the patch replaces whole (as Kubernetes stores it);
//! - lists merge only where the [`PatchSchema`] says so; every other list is replaced, and a
//!   value of another JSON type replaces the old one;
//! - object key order is kept (serde_json's `preserve_order`): keys that stay keep their place,
//!   new keys come last, in the patch's order.
//!
//! Limits, as kube-apiserver's: a JSON patch holds at most [`MAX_JSON_PATCH_OPERATIONS`]
//! operations, and its `copy` operations may add at most [`MAX_JSON_PATCH_COPY_BYTES`] of
//! JSON (checked before each copy is made, so a patch that copies a map into itself again
//! and again fails before the memory is spent); beyond kube-apiserver, the copies may also add
//! at most [`cost::MAX_DECODED_BYTES`] of estimated memory, and no patch may produce an object
//! over [`MAX_PATCHED_BYTES`] ([`check_patched_size`]).
//!
//! Departures from Kubernetes (deliberate, all on inputs kubectl never sends): a map's
//! `$patch: delete` removes the field rather than leaving `{}`; `$patch: merge` in a map is
//! accepted as the default it names rather than refused; RFC 6902's duplicate-member check
//! (appendix A.13) cannot be seen once the body is a `Value`.

pub(crate) mod cost;
mod strategic;

use std::fmt;

use json_patch::jsonptr::{ParseError, Pointer};
use json_patch::{PatchErrorKind, PatchOperation};
use serde_json::{Map, Value};

pub use strategic::{
    strategic_merge_patch, BuiltinPatchSchema, NoListMergeStrategies, PatchSchema,
};

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Why a patch could not be applied. Every variant is the client's fault: kube-apiserver answers
/// such requests with a 4xx `Status` (422 `Invalid` or 400 `BadRequest`), never a 5xx.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchError {
    /// A JSON patch body that is not a JSON array of operations.
    JsonPatchNotAnArray,
    /// One JSON patch operation failed; nothing of the patch was applied.
    JsonPatchOperation {
        /// The operation's position in the array, from 0.
        index: usize,
        /// Its `op` member (empty when missing).
        op: String,
        /// Its `path` member (empty when missing).
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// A JSON patch of more than [`MAX_JSON_PATCH_OPERATIONS`] operations (kube-apiserver
    /// answers 413).
    JsonPatchTooManyOperations {
        /// How many it holds.
        count: usize,
    },
    /// A patched object over [`MAX_PATCHED_BYTES`] of JSON (kcm answers 413).
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// A strategic merge patch that does not apply to the object.
    StrategicMergePatch {
        /// The field path where it failed, dotted from the object's root (`spec.template.spec.containers`).
        path: String,
        /// What went wrong.
        reason: String,
    },
}

impl fmt::Display for PatchError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatchError::JsonPatchNotAnArray => {
                write!(formatter, "json patch must be a JSON array of operations")
            }
            PatchError::JsonPatchOperation {
                index,
                op,
                path,
                reason,
            } => write!(
                formatter,
                "json patch operation {index} ({op} {path:?}) does not apply: {reason}"
            ),
            PatchError::JsonPatchTooManyOperations { count } => write!(
                formatter,
                "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {count}"
            ),
            PatchError::TooLarge { limit } => write!(
                formatter,
                "the patched object is larger than {limit} bytes of JSON, the most one write may hold (the request body limit)"
            ),
            PatchError::StrategicMergePatch { path, reason } if path.is_empty() => {
                write!(formatter, "strategic merge patch does not apply: {reason}")
            }
            PatchError::StrategicMergePatch { path, reason } => {
                write!(
                    formatter,
                    "strategic merge patch does not apply at {path}: {reason}"
                )
            }
        }
    }
}

impl std::error::Error for PatchError {}

// ---------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------

/// kube-apiserver's most operations in one JSON patch (`maxJSONPatchOperations`).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// kube-apiserver's limit on the bytes the `copy` operations of one JSON patch may add,
/// summed over the patch: the compact JSON of each copied value (its `JSONPatchMaxCopyBytes`,
/// which it hands to json-patch's `AccumulatedCopySizeLimit`), 3 MiB. `add` and `replace`
/// need no such sum: their values are in the body, which is at most 3 MiB itself.
pub const MAX_JSON_PATCH_COPY_BYTES: usize = 3 * 1024 * 1024;

/// The largest object a patch may produce, in bytes of compact JSON: the request body limit
/// (3 MiB), so a patch makes no object a `PUT` could not send. It is measured on the result;
/// building it costs no more than the object and the patch (merge and strategic merge patches
/// place each value of the patch once, and JSON patch's copies are bounded before they are
/// made).
pub const MAX_PATCHED_BYTES: usize = 3 * 1024 * 1024;

/// Checks that `patched`, a patch's result, is at most [`MAX_PATCHED_BYTES`] of JSON.
///
/// # Errors
/// [`PatchError::TooLarge`] when it is larger.
pub fn check_patched_size(patched: &Value) -> Result<(), PatchError> {
    match cost::json_len_within(patched, MAX_PATCHED_BYTES) {
        Some(_) => Ok(()),
        None => Err(PatchError::TooLarge {
            limit: MAX_PATCHED_BYTES,
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// RFC 7386 JSON merge patch
// ---------------------------------------------------------------------------------------------

/// Applies a JSON merge patch (RFC 7386) to `target` and returns the result: objects merge
/// recursively, `null` deletes a key, any other value replaces, and a patch that is not an object
/// replaces the whole target.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let mut merged = target.clone();
    json_patch::merge(&mut merged, patch);
    restore_merge_order(&mut merged, target, patch);
    merged
}

/// Puts `merged`'s keys back in kcm's order: the target's keys where they were, then the new
/// ones in the patch's order. `json_patch::merge` deletes with serde_json's `remove`, which
/// under `preserve_order` moves the map's last key into the deleted one's place.
fn restore_merge_order(merged: &mut Value, target: &Value, patch: &Value) {
    let (Value::Object(merged), Value::Object(patch)) = (merged, patch) else {
        return;
    };
    let target_keys = target.as_object().map(|target| target.keys());
    let order: Vec<String> = target_keys
        .into_iter()
        .flatten()
        .chain(patch.keys())
        .cloned()
        .collect();
    reorder(merged, &order);
    for (name, patch_value) in patch {
        if let Some(merged_value) = merged.get_mut(name) {
            let target_value = target.get(name).unwrap_or(&Value::Null);
            restore_merge_order(merged_value, target_value, patch_value);
        }
    }
}

/// Orders `map`'s keys as they first appear in `order`; keys `order` does not name go last,
/// in the order they have.
fn reorder(map: &mut Map<String, Value>, order: &[String]) {
    let mut rest = std::mem::take(map);
    for name in order {
        if let Some(value) = rest.shift_remove(name) {
            map.insert(name.clone(), value);
        }
    }
    map.append(&mut rest);
}

// ---------------------------------------------------------------------------------------------
// RFC 6902 JSON patch
// ---------------------------------------------------------------------------------------------

/// Applies a JSON patch (RFC 6902): `operations` is an array of `add`, `remove`, `replace`,
/// `move`, `copy` and `test` operations, applied in order to a copy of `target`. Paths are JSON
/// pointers (RFC 6901, `~1` for `/` and `~0` for `~`, `-` for the end of an array). `remove` and
/// `replace` of a missing path fail, as does a failed `test`; the first failure is returned and
/// nothing is applied. At most [`MAX_JSON_PATCH_OPERATIONS`] operations, and copies that
/// add at most [`MAX_JSON_PATCH_COPY_BYTES`] of JSON (and [`cost::MAX_DECODED_BYTES`] of
/// memory) in all.
///
/// The `json-patch` crate applies the operations; this adapter decodes them, words their
/// failures as kcm always has, compares `test` values as RFC 6902 says (`1` equals `1.0`, which
/// serde_json's equality does not) and keeps an object's key order when a member is removed.
pub fn json_patch(target: &Value, operations: &Value) -> Result<Value, PatchError> {
    let Value::Array(operations) = operations else {
        return Err(PatchError::JsonPatchNotAnArray);
    };
    if operations.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::JsonPatchTooManyOperations {
            count: operations.len(),
        });
    }
    let mut document = target.clone();
    let mut copied = Copied::default();
    for (index, operation) in operations.iter().enumerate() {
        apply_json_patch_operation(&mut document, operation, &mut copied).map_err(|failure| {
            let member = |name: &str| {
                operation
                    .get(name)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            PatchError::JsonPatchOperation {
                index,
                op: member("op"),
                path: member("path"),
                reason: failure,
            }
        })?;
    }
    Ok(document)
}

/// What the `copy` operations of a JSON patch added so far.
#[derive(Debug, Default)]
struct Copied {
    /// Bytes of compact JSON, against [`MAX_JSON_PATCH_COPY_BYTES`].
    json_bytes: usize,
    /// Estimated memory, against [`cost::MAX_DECODED_BYTES`].
    memory: usize,
}

impl Copied {
    /// Charges a copy of `value`, or says why it would pass a limit. The measures stop at
    /// the limit, so a refused copy costs no more work than the limit's bytes.
    fn charge(&mut self, value: &Value) -> Result<(), String> {
        let json_left = MAX_JSON_PATCH_COPY_BYTES - self.json_bytes;
        let Some(json_bytes) = cost::json_len_within(value, json_left) else {
            return Err(format!(
                "unable to complete the copy: the copies of this patch would add more than \
                 {MAX_JSON_PATCH_COPY_BYTES} bytes, the limit on what the copy operations \
                 of one JSON patch may add"
            ));
        };
        let memory_left = cost::MAX_DECODED_BYTES - self.memory;
        let Some(memory) = cost::memory_within(value, memory_left) else {
            return Err(format!(
                "unable to complete the copy: the copies of this patch would take more than \
                 {} bytes of memory, the limit on what one request may decode to",
                cost::MAX_DECODED_BYTES
            ));
        };
        self.json_bytes += json_bytes;
        self.memory += memory;
        Ok(())
    }
}

fn apply_json_patch_operation(
    document: &mut Value,
    operation: &Value,
    copied: &mut Copied,
) -> Result<(), String> {
    let decoded = decode_operation(operation)?;
    if let PatchOperation::Copy(copy) = &decoded {
        // Charged before the copy is made; a missing `from` fails below, as before.
        if let Some(value) = document.pointer(copy.from.as_str()) {
            copied.charge(value)?;
        }
    }
    if let PatchOperation::Test(test) = &decoded {
        let actual = document
            .pointer(test.path.as_str())
            .ok_or_else(|| lookup_failure(document, &test.path))?;
        return if json_values_equal(actual, &test.value) {
            Ok(())
        } else {
            Err(format!(
                "test failed: the value is {actual}, not {}",
                test.value
            ))
        };
    }
    // The member a `remove` or `move` takes out, and its object's keys before, so the object
    // keeps its order (serde_json's `remove` swaps the last key into the removed one's place).
    let removed_from = match &decoded {
        PatchOperation::Remove(remove) => Some(&remove.path),
        PatchOperation::Move(mv) => Some(&mv.from),
        _ => None,
    };
    let parent_keys = removed_from.and_then(|path| {
        let (parent, _) = path.split_back()?;
        let keys = document.pointer(parent.as_str())?.as_object()?.keys();
        Some((parent, keys.cloned().collect::<Vec<_>>()))
    });
    json_patch::patch_unsafe(document, std::slice::from_ref(&decoded))
        .map_err(|error| failure_reason(document, &decoded, &error.kind))?;
    if let Some((parent, keys)) = parent_keys {
        // A move onto the parent itself (or above it) leaves another object there.
        let replaced = matches!(&decoded, PatchOperation::Move(mv) if parent.starts_with(&mv.path));
        if let Some(Value::Object(members)) = document.pointer_mut(parent.as_str()) {
            if !replaced {
                reorder(members, &keys);
            }
        }
    }
    Ok(())
}

/// Checks an operation's members in kcm's order (`op`, `path`, then what the `op` needs) and
/// decodes it.
fn decode_operation(operation: &Value) -> Result<PatchOperation, String> {
    let Value::Object(members) = operation else {
        return Err("an operation must be a JSON object".to_string());
    };
    let pointer_member = |name: &str| -> Result<(), String> {
        let pointer = match members.get(name) {
            Some(Value::String(text)) => text,
            Some(_) => return Err(format!("member {name:?} must be a string")),
            None => return Err(format!("missing member {name:?}")),
        };
        Pointer::parse(pointer)
            .map(drop)
            .map_err(|error| match error {
                ParseError::NoLeadingSlash => {
                    format!("invalid JSON pointer {pointer:?}: it must start with \"/\"")
                }
                ParseError::InvalidEncoding { .. } => {
                    format!("invalid JSON pointer {pointer:?}: \"~\" must be followed by 0 or 1")
                }
            })
    };
    let op = match members.get("op") {
        Some(Value::String(op)) => op.as_str(),
        Some(_) => return Err("member \"op\" must be a string".to_string()),
        None => return Err("missing member \"op\"".to_string()),
    };
    pointer_member("path")?;
    match op {
        "add" | "replace" | "test" if !members.contains_key("value") => {
            return Err("missing member \"value\"".to_string());
        }
        "move" | "copy" => pointer_member("from")?,
        "add" | "remove" | "replace" | "test" => {}
        unknown => return Err(format!("unknown operation {unknown:?}")),
    }
    serde_json::from_value(operation.clone()).map_err(|error| error.to_string())
}

/// Words why `operation` failed on `document` (as it is after the failure; a `move` has then
/// removed its value), the way kcm words it.
fn failure_reason(document: &Value, operation: &PatchOperation, kind: &PatchErrorKind) -> String {
    if let PatchErrorKind::CannotMoveInsideItself = kind {
        return "cannot move a value into one of its own children".to_string();
    }
    match operation {
        PatchOperation::Add(add) => insert_failure(document, &add.path),
        PatchOperation::Remove(remove) if remove.path.is_root() => {
            "cannot remove the whole document".to_string()
        }
        PatchOperation::Copy(copy) => match document.pointer(copy.from.as_str()) {
            None => lookup_failure(document, &copy.from),
            Some(_) => insert_failure(document, &copy.path),
        },
        PatchOperation::Move(mv) => match kind {
            PatchErrorKind::InvalidFromPointer => lookup_failure(document, &mv.from),
            _ => insert_failure(document, &mv.path),
        },
        other => lookup_failure(document, other.path()),
    }
}

/// Why `path` does not name a value of `document`: its first token that names nothing.
fn lookup_failure(document: &Value, path: &Pointer) -> String {
    let mut current = document;
    for (depth, token) in path.tokens().enumerate() {
        let found = match current {
            Value::Object(members) => members.get(token.decoded().as_ref()),
            Value::Array(items) => match array_index(&token.decoded(), items.len(), false) {
                Ok(index) => items.get(index),
                Err(reason) => return reason,
            },
            _ => None,
        };
        match found {
            Some(value) => current = value,
            None => return format!("path not found: {}", prefix(path, depth + 1)),
        }
    }
    format!("path not found: {path}")
}

/// Why a value cannot be put at `path` of `document`.
fn insert_failure(document: &Value, path: &Pointer) -> String {
    let Some((parent, last)) = path.split_back() else {
        return format!("cannot add at {path}");
    };
    match document.pointer(parent.as_str()) {
        None => lookup_failure(document, parent),
        Some(Value::Array(items)) if last.encoded() != "-" => {
            array_index(&last.decoded(), items.len(), true)
                .err()
                .unwrap_or_default()
        }
        Some(_) => format!("{parent} is not an object or an array"),
    }
}

/// Reads an array index token, decimal digits without leading zeros, or words why it is none.
fn array_index(token: &str, length: usize, allow_end: bool) -> Result<usize, String> {
    let valid = !token.is_empty()
        && token.bytes().all(|byte| byte.is_ascii_digit())
        && (token == "0" || !token.starts_with('0'));
    match token.parse::<usize>() {
        Ok(index) if valid && (index < length || (allow_end && index == length)) => Ok(index),
        Ok(index) if valid => Err(format!(
            "array index {index} is out of bounds (length {length})"
        )),
        _ => Err(format!("{token:?} is not an array index")),
    }
}

/// The first `depth` tokens of `path`.
fn prefix(path: &Pointer, depth: usize) -> String {
    path.tokens()
        .take(depth)
        .map(|token| format!("/{}", token.encoded()))
        .collect()
}

/// JSON equality as RFC 6902's `test` defines it: numbers compare by value (`1` equals `1.0`),
/// objects regardless of member order, arrays item by item.
fn json_values_equal(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Number(left), Value::Number(right)) => {
            left == right || (left.as_f64().is_some() && left.as_f64() == right.as_f64())
        }
        (Value::Array(left), Value::Array(right)) => {
            left.len() == right.len()
                && left
                    .iter()
                    .zip(right)
                    .all(|(left, right)| json_values_equal(left, right))
        }
        (Value::Object(left), Value::Object(right)) => {
            left.len() == right.len()
                && left.iter().all(|(name, value)| {
                    right
                        .get(name)
                        .is_some_and(|other| json_values_equal(value, other))
                })
        }
        _ => left == right,
    }
}

#[cfg(test)]
mod tests;
