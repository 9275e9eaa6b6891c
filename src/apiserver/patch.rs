//! The three patch formats of `PATCH` requests, as pure functions over [`serde_json::Value`]:
//! JSON merge patch (`application/merge-patch+json`, [`merge_patch`]), JSON patch
//! (`application/json-patch+json`, [`json_patch`]) and strategic merge patch
//! (`application/strategic-merge-patch+json`, [`strategic_merge_patch`]).
//!
//! Mirrors RFC 7386 (its section 2 pseudo-code, tested with its appendix A), RFC 6902 and
//! `github.com/evanphx/json-patch` (what kube-apiserver applies JSON patches with, tested with
//! RFC 6902's appendix A), and `staging/src/k8s.io/apimachinery/pkg/util/strategicpatch/patch.go`
//! (`mergeMap`, `mergeSlice`, `mergeSliceWithSpecialElements`, `mergePatchIntoOriginal`,
//! `normalizeElementOrder`, `mergeSortedSlice`, `applyRetainKeysDirective`) with the
//! `patchStrategy`/`patchMergeKey` struct tags of `k8s.io/api` `core/v1` and `apps/v1` for the
//! kinds kcm serves ([`BuiltinPatchSchema`]).
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
//! Departures from Kubernetes (deliberate, all on inputs kubectl never sends): a map's
//! `$patch: delete` removes the field rather than leaving `{}`; `$patch: merge` in a map is
//! accepted as the default it names rather than refused; RFC 6902's duplicate-member check
//! (appendix A.13) cannot be seen once the body is a `Value`.

mod strategic;

use std::fmt;

use json_patch::jsonptr::{ParseError, Pointer};
use json_patch::{PatchErrorKind, PatchOperation};
use serde_json::{Map, Value};

#[cfg(test)]
use strategic::ListMergeStrategy;
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
/// nothing is applied.
///
/// The `json-patch` crate applies the operations; this adapter decodes them, words their
/// failures as kcm always has, compares `test` values as RFC 6902 says (`1` equals `1.0`, which
/// serde_json's equality does not) and keeps an object's key order when a member is removed.
pub fn json_patch(target: &Value, operations: &Value) -> Result<Value, PatchError> {
    let Value::Array(operations) = operations else {
        return Err(PatchError::JsonPatchNotAnArray);
    };
    let mut document = target.clone();
    for (index, operation) in operations.iter().enumerate() {
        apply_json_patch_operation(&mut document, operation).map_err(|failure| {
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

fn apply_json_patch_operation(document: &mut Value, operation: &Value) -> Result<(), String> {
    let decoded = decode_operation(operation)?;
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
mod tests {
    use super::strategic::is_directive_key;
    use super::ListMergeStrategy::{MergeAsSet, MergeByKey};
    use super::*;
    use serde_json::json;

    #[track_caller]
    fn check_merge_patch(target: Value, patch: Value, expected: Value) {
        assert_eq!(
            merge_patch(&target, &patch),
            expected,
            "merge patch {patch} onto {target}"
        );
    }

    #[test]
    fn merge_patch_follows_rfc_7386_appendix_a() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (
                json!({"a":"b","b":"c"}),
                json!({"a":null}),
                json!({"b":"c"}),
            ),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (
                json!({"a":{"b":"c"}}),
                json!({"a":{"b":"d","c":null}}),
                json!({"a":{"b":"d"}}),
            ),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (target, patch, expected) in cases {
            check_merge_patch(target, patch, expected);
        }
    }

    #[test]
    fn merge_patch_keeps_key_order_and_appends_new_keys() {
        let merged = merge_patch(&json!({"b":1,"a":2,"c":3}), &json!({"a":null,"d":4,"b":5}));
        let keys: Vec<&String> = merged.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["b", "c", "d"]);
    }

    #[track_caller]
    fn check_keys(value: &Value, expected: &[&str]) {
        let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
        assert_eq!(keys, expected, "keys of {value}");
    }

    #[test]
    fn merge_patch_keeps_key_order_when_an_early_key_goes() {
        let target = json!({"a":1,"b":2,"c":3,"d":{"p":1,"q":2,"r":3}});
        let merged = merge_patch(&target, &json!({"a":null,"x":1,"d":{"p":null,"s":4},"y":2}));
        check_keys(&merged, &["b", "c", "d", "x", "y"]);
        check_keys(&merged["d"], &["q", "r", "s"]);
    }

    #[test]
    fn json_patch_keeps_key_order_when_a_member_goes() {
        let target = json!({"a":1,"b":2,"c":3,"d":4});
        let cases: [(Value, &[&str]); 5] = [
            (json!([{"op":"remove","path":"/a"}]), &["b", "c", "d"]),
            (
                json!([{"op":"move","from":"/b","path":"/e"}]),
                &["a", "c", "d", "e"],
            ),
            (
                json!([{"op":"move","from":"/a","path":"/a"}]),
                &["a", "b", "c", "d"],
            ),
            (
                json!([{"op":"move","from":"/a","path":"/c"}]),
                &["b", "c", "d"],
            ),
            (
                json!([{"op":"add","path":"/e","value":5},{"op":"add","path":"/f","value":6},
                    {"op":"remove","path":"/b"}]),
                &["a", "c", "d", "e", "f"],
            ),
        ];
        for (operations, keys) in cases {
            let patched = json_patch(&target, &operations).unwrap();
            check_keys(&patched, keys);
        }
    }

    #[test]
    fn merge_patch_does_what_kubectl_label_and_scale_send() {
        check_merge_patch(
            json!({"metadata":{"name":"x","labels":{"app":"web"}}}),
            json!({"metadata":{"labels":{"a":"b"}}}),
            json!({"metadata":{"name":"x","labels":{"app":"web","a":"b"}}}),
        );
        check_merge_patch(
            json!({"spec":{"replicas":2,"selector":"app=web"}}),
            json!({"spec":{"replicas":3}}),
            json!({"spec":{"replicas":3,"selector":"app=web"}}),
        );
    }

    #[track_caller]
    fn check_json_patch(target: Value, operations: Value, expected: Value) {
        match json_patch(&target, &operations) {
            Ok(patched) => assert_eq!(patched, expected, "json patch {operations} onto {target}"),
            Err(error) => panic!("json patch {operations} onto {target} failed: {error}"),
        }
    }

    #[track_caller]
    fn check_json_patch_fails(target: Value, operations: Value, expected_message: &str) {
        match json_patch(&target, &operations) {
            Ok(patched) => panic!("json patch {operations} onto {target} gave {patched}"),
            Err(error) => assert_eq!(error.to_string(), expected_message),
        }
    }

    #[test]
    fn json_patch_follows_rfc_6902_appendix_a() {
        let cases = [
            // A.1 adding an object member
            (
                json!({"foo":"bar"}),
                json!([{"op":"add","path":"/baz","value":"qux"}]),
                json!({"baz":"qux","foo":"bar"}),
            ),
            // A.2 adding an array element
            (
                json!({"foo":["bar","baz"]}),
                json!([{"op":"add","path":"/foo/1","value":"qux"}]),
                json!({"foo":["bar","qux","baz"]}),
            ),
            // A.3 removing an object member
            (
                json!({"baz":"qux","foo":"bar"}),
                json!([{"op":"remove","path":"/baz"}]),
                json!({"foo":"bar"}),
            ),
            // A.4 removing an array element
            (
                json!({"foo":["bar","qux","baz"]}),
                json!([{"op":"remove","path":"/foo/1"}]),
                json!({"foo":["bar","baz"]}),
            ),
            // A.5 replacing a value
            (
                json!({"baz":"qux","foo":"bar"}),
                json!([{"op":"replace","path":"/baz","value":"boo"}]),
                json!({"baz":"boo","foo":"bar"}),
            ),
            // A.6 moving a value
            (
                json!({"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}}),
                json!([{"op":"move","from":"/foo/waldo","path":"/qux/thud"}]),
                json!({"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}}),
            ),
            // A.7 moving an array element
            (
                json!({"foo":["all","grass","cows","eat"]}),
                json!([{"op":"move","from":"/foo/1","path":"/foo/3"}]),
                json!({"foo":["all","cows","eat","grass"]}),
            ),
            // A.8 testing a value: success
            (
                json!({"baz":"qux","foo":["a",2,"c"]}),
                json!([{"op":"test","path":"/baz","value":"qux"},{"op":"test","path":"/foo/1","value":2}]),
                json!({"baz":"qux","foo":["a",2,"c"]}),
            ),
            // A.10 adding a nested member object
            (
                json!({"foo":"bar"}),
                json!([{"op":"add","path":"/child","value":{"grandchild":{}}}]),
                json!({"foo":"bar","child":{"grandchild":{}}}),
            ),
            // A.11 ignoring unrecognized elements
            (
                json!({"foo":"bar"}),
                json!([{"op":"add","path":"/baz","value":"qux","xyz":123}]),
                json!({"foo":"bar","baz":"qux"}),
            ),
            // A.14 ~ escape ordering
            (
                json!({"/":9,"~1":10}),
                json!([{"op":"test","path":"/~01","value":10}]),
                json!({"/":9,"~1":10}),
            ),
            // A.16 adding an array value
            (
                json!({"foo":["bar"]}),
                json!([{"op":"add","path":"/foo/-","value":["abc","def"]}]),
                json!({"foo":["bar",["abc","def"]]}),
            ),
        ];
        for (target, operations, expected) in cases {
            check_json_patch(target, operations, expected);
        }
    }

    #[test]
    fn json_patch_errors_of_rfc_6902_appendix_a() {
        // A.9 testing a value: error
        check_json_patch_fails(
            json!({"baz":"qux"}),
            json!([{"op":"test","path":"/baz","value":"bar"}]),
            "json patch operation 0 (test \"/baz\") does not apply: test failed: the value is \"qux\", not \"bar\"",
        );
        // A.12 adding to a nonexistent target
        check_json_patch_fails(
            json!({"foo":"bar"}),
            json!([{"op":"add","path":"/baz/bat","value":"qux"}]),
            "json patch operation 0 (add \"/baz/bat\") does not apply: path not found: /baz",
        );
        // A.15 comparing strings and numbers
        check_json_patch_fails(
            json!({"/":9,"~1":10}),
            json!([{"op":"test","path":"/~01","value":"10"}]),
            "json patch operation 0 (test \"/~01\") does not apply: test failed: the value is 10, not \"10\"",
        );
    }

    #[test]
    fn json_patch_refuses_what_rfc_6902_refuses() {
        let target = json!({"a":{"b":[1,2]},"s":"x"});
        let cases = [
            (
                json!({"op":"add"}),
                json!([{"op":"replace","path":"/missing","value":1}]),
                "json patch operation 0 (replace \"/missing\") does not apply: path not found: /missing",
            ),
            (
                json!({}),
                json!([{"op":"remove","path":"/missing"}]),
                "json patch operation 0 (remove \"/missing\") does not apply: path not found: /missing",
            ),
            (
                json!({}),
                json!([{"op":"test","path":"/a","value":1},{"op":"frobnicate","path":"/a"}]),
                "json patch operation 0 (test \"/a\") does not apply: test failed: the value is {\"b\":[1,2]}, not 1",
            ),
            (
                json!({}),
                json!([{"op":"add","path":"/s","value":1},{"op":"frobnicate","path":"/a"}]),
                "json patch operation 1 (frobnicate \"/a\") does not apply: unknown operation \"frobnicate\"",
            ),
            (
                json!({}),
                json!([{"path":"/a"}]),
                "json patch operation 0 ( \"/a\") does not apply: missing member \"op\"",
            ),
            (
                json!({}),
                json!([{"op":"add","path":"/a"}]),
                "json patch operation 0 (add \"/a\") does not apply: missing member \"value\"",
            ),
            (
                json!({}),
                json!([{"op":"move","path":"/a/b/c"}]),
                "json patch operation 0 (move \"/a/b/c\") does not apply: missing member \"from\"",
            ),
            (
                json!({}),
                json!([{"op":"move","from":"/a","path":"/a/c"}]),
                "json patch operation 0 (move \"/a/c\") does not apply: cannot move a value into one of its own children",
            ),
            (
                json!({}),
                json!([{"op":"add","path":"a","value":1}]),
                "json patch operation 0 (add \"a\") does not apply: invalid JSON pointer \"a\": it must start with \"/\"",
            ),
            (
                json!({}),
                json!([{"op":"add","path":"/a~2","value":1}]),
                "json patch operation 0 (add \"/a~2\") does not apply: invalid JSON pointer \"/a~2\": \"~\" must be followed by 0 or 1",
            ),
            (
                json!({}),
                json!([{"op":"add","path":"/a/b/3","value":1}]),
                "json patch operation 0 (add \"/a/b/3\") does not apply: array index 3 is out of bounds (length 2)",
            ),
            (
                json!({}),
                json!([{"op":"add","path":"/a/b/01","value":1}]),
                "json patch operation 0 (add \"/a/b/01\") does not apply: \"01\" is not an array index",
            ),
            (
                json!({}),
                json!([{"op":"replace","path":"/a/b/-","value":1}]),
                "json patch operation 0 (replace \"/a/b/-\") does not apply: \"-\" is not an array index",
            ),
            (
                json!({}),
                json!([{"op":"add","path":"/s/t","value":1}]),
                "json patch operation 0 (add \"/s/t\") does not apply: /s is not an object or an array",
            ),
            (
                json!({}),
                json!([{"op":"remove","path":""}]),
                "json patch operation 0 (remove \"\") does not apply: cannot remove the whole document",
            ),
            (
                json!({}),
                json!(["add"]),
                "json patch operation 0 ( \"\") does not apply: an operation must be a JSON object",
            ),
            (
                json!({}),
                json!({"op":"add","path":"/a","value":1}),
                "json patch must be a JSON array of operations",
            ),
        ];
        for (_, operations, message) in cases {
            check_json_patch_fails(target.clone(), operations, message);
        }
    }

    #[test]
    fn json_patch_applies_all_operations_in_order_or_none() {
        let cases = [
            (
                json!({"a":1}),
                json!([{"op":"add","path":"","value":{"b":2}}]),
                json!({"b":2}),
            ),
            (
                json!({"a":1}),
                json!([{"op":"replace","path":"","value":[1]}]),
                json!([1]),
            ),
            (
                json!({"a":{"b":1}}),
                json!([{"op":"copy","from":"/a","path":"/c"},{"op":"replace","path":"/c/b","value":2}]),
                json!({"a":{"b":1},"c":{"b":2}}),
            ),
            (
                json!({"a":[1,2,3]}),
                json!([{"op":"remove","path":"/a/0"},{"op":"add","path":"/a/2","value":4}]),
                json!({"a":[2,3,4]}),
            ),
            (
                json!({"a":1}),
                json!([{"op":"move","from":"/a","path":"/a"}]),
                json!({"a":1}),
            ),
            (
                json!({"a":1.0}),
                json!([{"op":"test","path":"/a","value":1}]),
                json!({"a":1.0}),
            ),
            (
                json!({"a":{"x":1,"y":[1]}}),
                json!([{"op":"test","path":"/a","value":{"y":[1],"x":1}}]),
                json!({"a":{"x":1,"y":[1]}}),
            ),
            (
                json!({"a/b":{"m~n":1}}),
                json!([{"op":"replace","path":"/a~1b/m~0n","value":2}]),
                json!({"a/b":{"m~n":2}}),
            ),
            (
                json!({"a":null}),
                json!([{"op":"test","path":"/a","value":null},{"op":"add","path":"/b","value":null}]),
                json!({"a":null,"b":null}),
            ),
        ];
        for (target, operations, expected) in cases {
            check_json_patch(target, operations, expected);
        }
        let target = json!({"a":1});
        let failing = json!([{"op":"replace","path":"/a","value":2},{"op":"remove","path":"/zzz"}]);
        assert!(json_patch(&target, &failing).is_err());
        assert_eq!(target, json!({"a":1}));
    }

    fn deployment_web(image: &str) -> Value {
        json!({
            "apiVersion":"apps/v1","kind":"Deployment",
            "metadata":{"name":"web","namespace":"default","uid":"u1","generation":2,
                "annotations":{"deployment.kubernetes.io/revision":"1",
                    "kubectl.kubernetes.io/last-applied-configuration":"{\"old\":true}\n"}},
            "spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},
                "strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%","maxUnavailable":"25%"}},
                "template":{"metadata":{"labels":{"app":"web"}},
                    "spec":{"containers":[{"name":"nginx","image":image,
                        "ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{}}]}}},
            "status":{"observedGeneration":2,"replicas":2}
        })
    }

    #[track_caller]
    fn check_no_directives(value: &Value) {
        match value {
            Value::Object(members) => {
                for (key, member) in members {
                    assert!(!is_directive_key(key), "directive {key} stored in {value}");
                    check_no_directives(member);
                }
            }
            Value::Array(items) => items.iter().for_each(check_no_directives),
            _ => {}
        }
    }

    #[track_caller]
    fn check_strategic(kind: &str, target: Value, patch: Value, expected: Value) {
        let schema = BuiltinPatchSchema::for_kind(kind).expect("a served kind");
        match strategic_merge_patch(&target, &patch, &schema) {
            Ok(patched) => {
                assert_eq!(patched, expected, "strategic patch {patch} onto {target}");
                check_no_directives(&patched);
            }
            Err(error) => panic!("strategic patch {patch} onto {target} failed: {error}"),
        }
    }

    #[track_caller]
    fn check_strategic_fails(kind: &str, target: Value, patch: Value, expected_message: &str) {
        let schema = BuiltinPatchSchema::for_kind(kind).expect("a served kind");
        match strategic_merge_patch(&target, &patch, &schema) {
            Ok(patched) => panic!("strategic patch {patch} onto {target} gave {patched}"),
            Err(error) => assert_eq!(error.to_string(), expected_message),
        }
    }

    /// Sets `value` at the JSON pointer `pointer` of a copy of `document`.
    fn with(document: &Value, pointer: &str, value: Value) -> Value {
        let mut changed = document.clone();
        *changed.pointer_mut(pointer).expect("the pointer exists") = value;
        changed
    }

    #[test]
    fn kubectl_apply_second_time_updates_replicas_image_and_annotation_and_keeps_ports() {
        let live = deployment_web("nginx:1.25");
        let patch = json!({"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"new\":true}\n"}},
            "spec":{"replicas":3,"template":{"spec":{"$setElementOrder/containers":[{"name":"nginx"}],
                "containers":[{"image":"nginx:1.26","name":"nginx"}]}}}});
        let expected = with(
            &live,
            "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration",
            json!("{\"new\":true}\n"),
        );
        let expected = with(&expected, "/spec/replicas", json!(3));
        let expected = with(
            &expected,
            "/spec/template/spec/containers/0/image",
            json!("nginx:1.26"),
        );
        check_strategic("Deployment", live, patch, expected);
    }

    #[test]
    fn kubectl_set_image_changes_one_container_and_keeps_the_others_and_their_order() {
        let live = with(
            &deployment_web("nginx:1.25"),
            "/spec/template/spec/containers",
            json!([
            {"name":"sidecar","image":"busybox","env":[{"name":"A","value":"1"}]},
            {"name":"nginx","image":"nginx:1.25","ports":[{"containerPort":80}]}]),
        );
        let set_image = json!({"spec":{"template":{"spec":{
            "$setElementOrder/containers":[{"name":"sidecar"},{"name":"nginx"}],
            "containers":[{"image":"nginx:1.27","name":"nginx"}]}}}});
        let expected = with(
            &live,
            "/spec/template/spec/containers/1/image",
            json!("nginx:1.27"),
        );
        check_strategic("Deployment", live.clone(), set_image, expected.clone());
        // The body §2.9 recorded names only the patched container.
        let set_image_one = json!({"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"nginx"}],
            "containers":[{"image":"nginx:1.27","name":"nginx"}]}}}});
        check_strategic("Deployment", live.clone(), set_image_one, expected.clone());
        // Without any order directive: a container not named in the patch is kept.
        let bare = json!({"spec":{"template":{"spec":{"containers":[{"image":"nginx:1.27","name":"nginx"}]}}}});
        check_strategic("Deployment", live, bare, expected);
    }

    #[test]
    fn kubectl_rollout_and_cordon_bodies_do_what_kubectl_means() {
        let live = deployment_web("nginx:1.25");
        let restart = json!({"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2025-01-01T00:00:00Z"}}}}});
        let restarted = with(
            &live,
            "/spec/template/metadata",
            json!({"labels":{"app":"web"},
            "annotations":{"kubectl.kubernetes.io/restartedAt":"2025-01-01T00:00:00Z"}}),
        );
        check_strategic("Deployment", live.clone(), restart, restarted);
        let paused = with(&live, "/spec", {
            let mut spec = live["spec"].clone();
            spec["paused"] = json!(true);
            spec
        });
        check_strategic(
            "Deployment",
            live.clone(),
            json!({"spec":{"paused":true}}),
            paused.clone(),
        );
        check_strategic("Deployment", paused, json!({"spec":{"paused":null}}), live);
        check_strategic(
            "Node",
            json!({"metadata":{"name":"node-1"},"spec":{"podCIDR":"10.0.0.0/24"}}),
            json!({"spec":{"unschedulable":true}}),
            json!({"metadata":{"name":"node-1"},"spec":{"podCIDR":"10.0.0.0/24","unschedulable":true}}),
        );
        check_strategic(
            "Node",
            json!({"spec":{"unschedulable":true}}),
            json!({"spec":{"unschedulable":null}}),
            json!({"spec":{}}),
        );
    }

    #[test]
    fn merge_lists_merge_items_by_their_keys() {
        let pod = json!({"metadata":{"name":"p"},"spec":{"containers":[
            {"name":"a","image":"a:1","ports":[{"containerPort":80,"name":"http"},{"containerPort":443}],
             "env":[{"name":"X","value":"1"},{"name":"Y","value":"2"}],
             "volumeMounts":[{"name":"data","mountPath":"/data"}]},
            {"name":"b","image":"b:1","ports":[{"containerPort":9090}]}],
            "volumes":[{"name":"data","emptyDir":{}}],
            "tolerations":[{"key":"k","operator":"Exists"}],
            "imagePullSecrets":[{"name":"s1"}],
            "hostAliases":[{"ip":"10.0.0.1","hostnames":["a"]}]}});
        let cases = [
            // ports of an untouched container are kept; a touched container's ports merge by containerPort
            (
                json!({"spec":{"containers":[{"name":"b","ports":[{"containerPort":9090,"name":"metrics"}]}]}}),
                with(
                    &pod,
                    "/spec/containers/1/ports/0",
                    json!({"containerPort":9090,"name":"metrics"}),
                ),
            ),
            (
                json!({"spec":{"containers":[{"name":"a","ports":[{"containerPort":8080}]}]}}),
                with(
                    &pod,
                    "/spec/containers/0/ports",
                    json!([{"containerPort":80,"name":"http"},{"containerPort":443},{"containerPort":8080}]),
                ),
            ),
            // env by name, null deletes a field of an item
            (
                json!({"spec":{"containers":[{"name":"a","env":[{"name":"Y","value":"3"},{"name":"Z","value":"4"}]}]}}),
                with(
                    &pod,
                    "/spec/containers/0/env",
                    json!([{"name":"X","value":"1"},{"name":"Y","value":"3"},{"name":"Z","value":"4"}]),
                ),
            ),
            (
                json!({"spec":{"containers":[{"name":"a","env":[{"name":"X","value":null}]}]}}),
                with(&pod, "/spec/containers/0/env/0", json!({"name":"X"})),
            ),
            // volumeMounts by mountPath, volumes and imagePullSecrets by name, hostAliases by ip
            (
                json!({"spec":{"containers":[{"name":"a","volumeMounts":[{"name":"cache","mountPath":"/cache"}]}]}}),
                with(
                    &pod,
                    "/spec/containers/0/volumeMounts",
                    json!([{"name":"data","mountPath":"/data"},{"name":"cache","mountPath":"/cache"}]),
                ),
            ),
            (
                json!({"spec":{"volumes":[{"name":"cache","emptyDir":{}}],"imagePullSecrets":[{"name":"s2"}]}}),
                with(
                    &with(
                        &pod,
                        "/spec/volumes",
                        json!([{"name":"data","emptyDir":{}},{"name":"cache","emptyDir":{}}]),
                    ),
                    "/spec/imagePullSecrets",
                    json!([{"name":"s1"},{"name":"s2"}]),
                ),
            ),
            (
                json!({"spec":{"hostAliases":[{"ip":"10.0.0.1","hostnames":["b"]},{"ip":"10.0.0.2","hostnames":["c"]}]}}),
                with(
                    &pod,
                    "/spec/hostAliases",
                    json!([{"ip":"10.0.0.1","hostnames":["b"]},{"ip":"10.0.0.2","hostnames":["c"]}]),
                ),
            ),
            // a new container is appended
            (
                json!({"spec":{"containers":[{"name":"c","image":"c:1"}]}}),
                with(&pod, "/spec/containers", {
                    let mut containers = pod["spec"]["containers"].clone();
                    containers
                        .as_array_mut()
                        .unwrap()
                        .push(json!({"name":"c","image":"c:1"}));
                    containers
                }),
            ),
            // lists without a strategy are replaced: tolerations, a container's args
            (
                json!({"spec":{"tolerations":[{"key":"other","operator":"Exists"}]}}),
                with(
                    &pod,
                    "/spec/tolerations",
                    json!([{"key":"other","operator":"Exists"}]),
                ),
            ),
            (
                json!({"spec":{"tolerations":[]}}),
                with(&pod, "/spec/tolerations", json!([])),
            ),
        ];
        for (patch, expected) in cases {
            check_strategic("Pod", pod.clone(), patch, expected);
        }
    }

    #[test]
    fn patch_directives_delete_and_replace_items_lists_and_maps() {
        let pod = json!({"metadata":{"labels":{"a":"1","b":"2"}},"spec":{"containers":[
            {"name":"a","image":"a:1"},{"name":"b","image":"b:1"},{"name":"c","image":"c:1"}]}});
        let cases = [
            (
                json!({"spec":{"containers":[{"$patch":"delete","name":"b"}]}}),
                with(
                    &pod,
                    "/spec/containers",
                    json!([{"name":"a","image":"a:1"},{"name":"c","image":"c:1"}]),
                ),
            ),
            (
                json!({"spec":{"containers":[{"$patch":"delete","name":"nope"}]}}),
                pod.clone(),
            ),
            (
                json!({"spec":{"containers":[{"name":"z","image":"z:1"},{"$patch":"replace"}]}}),
                with(
                    &pod,
                    "/spec/containers",
                    json!([{"name":"z","image":"z:1"}]),
                ),
            ),
            (
                json!({"metadata":{"labels":{"$patch":"replace","c":"3"}}}),
                with(&pod, "/metadata/labels", json!({"c":"3"})),
            ),
            (
                json!({"metadata":{"labels":{"$patch":"delete"}}}),
                json!({"metadata":{},"spec":pod["spec"]}),
            ),
            (
                json!({"metadata":{"labels":{"$patch":"merge","c":"3"}}}),
                with(&pod, "/metadata/labels", json!({"a":"1","b":"2","c":"3"})),
            ),
            (
                json!({"$patch":"replace","kind":"Pod"}),
                json!({"kind":"Pod"}),
            ),
        ];
        for (patch, expected) in cases {
            check_strategic("Pod", pod.clone(), patch, expected);
        }
    }

    #[test]
    fn set_element_order_orders_merged_lists_and_keeps_server_only_items_in_place() {
        let pod = json!({"spec":{"containers":[{"name":"a"},{"name":"b"},{"name":"c"}]}});
        let names = |names: &[&str]| {
            json!({"spec":{"containers":
            names.iter().map(|name| json!({"name":name})).collect::<Vec<_>>()}})
        };
        let order = |names: &[&str]| {
            names
                .iter()
                .map(|name| json!({"name":name}))
                .collect::<Vec<_>>()
        };
        let cases = [
            (
                json!({"spec":{"$setElementOrder/containers":order(&["c","a","b"])}}),
                names(&["c", "a", "b"]),
            ),
            (
                json!({"spec":{"$setElementOrder/containers":order(&["c","a"])}}),
                names(&["b", "c", "a"]),
            ),
            (
                json!({"spec":{"$setElementOrder/containers":order(&["c","d"]),"containers":[{"name":"d"}]}}),
                names(&["a", "b", "c", "d"]),
            ),
            (
                json!({"spec":{"$setElementOrder/containers":order(&["d","b"]),"containers":[{"name":"d"}]}}),
                names(&["d", "a", "b", "c"]),
            ),
            (
                json!({"spec":{"$setElementOrder/containers":order(&["b","d","a"]),"containers":[{"name":"d"},{"$patch":"delete","name":"c"}]}}),
                names(&["b", "d", "a"]),
            ),
        ];
        for (patch, expected) in cases {
            check_strategic("Pod", pod.clone(), patch, expected);
        }
        check_strategic(
            "Pod",
            json!({"metadata":{"name":"p"}}),
            json!({"spec":{"$setElementOrder/containers":order(&["y","x"]),"containers":[{"name":"y"},{"name":"x"}]}}),
            json!({"metadata":{"name":"p"},"spec":{"containers":[{"name":"y"},{"name":"x"}]}}),
        );
    }

    #[test]
    fn primitive_merge_lists_are_sets_with_deletions() {
        let pod = json!({"metadata":{"finalizers":["a","b"]}});
        let cases = [
            (
                json!({"metadata":{"finalizers":["c","a"]}}),
                json!({"metadata":{"finalizers":["a","b","c"]}}),
            ),
            (
                json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["a"]}}),
                json!({"metadata":{"finalizers":["b"]}}),
            ),
            (
                json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["a"],"finalizers":["d"]}}),
                json!({"metadata":{"finalizers":["b","d"]}}),
            ),
            (
                json!({"metadata":{"$setElementOrder/finalizers":["b","a"]}}),
                json!({"metadata":{"finalizers":["b","a"]}}),
            ),
            (
                json!({"metadata":{"finalizers":null}}),
                json!({"metadata":{}}),
            ),
        ];
        for (patch, expected) in cases {
            check_strategic("Pod", pod.clone(), patch, expected);
        }
    }

    #[test]
    fn retain_keys_keeps_only_the_listed_fields() {
        let deployment = deployment_web("nginx:1.25");
        let recreate = json!({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate","rollingUpdate":null}}});
        check_strategic(
            "Deployment",
            deployment.clone(),
            recreate,
            with(&deployment, "/spec/strategy", json!({"type":"Recreate"})),
        );
        let pod =
            json!({"spec":{"volumes":[{"name":"v","emptyDir":{}},{"name":"w","emptyDir":{}}]}});
        let to_host_path = json!({"spec":{"$setElementOrder/volumes":[{"name":"v"},{"name":"w"}],
            "volumes":[{"$retainKeys":["hostPath","name"],"hostPath":{"path":"/x"},"name":"v"}]}});
        check_strategic(
            "Pod",
            pod,
            to_host_path,
            json!({"spec":{"volumes":[{"name":"v","hostPath":{"path":"/x"}},{"name":"w","emptyDir":{}}]}}),
        );
    }

    #[test]
    fn other_served_kinds_merge_their_tagged_lists() {
        check_strategic(
            "Service",
            json!({"spec":{"ports":[{"port":80,"targetPort":8080},{"port":443}],"selector":{"app":"web"}}}),
            json!({"spec":{"ports":[{"port":80,"targetPort":9090},{"port":8443}],"selector":{"app":"api"}}}),
            json!({"spec":{"ports":[{"port":80,"targetPort":9090},{"port":443},{"port":8443}],"selector":{"app":"api"}}}),
        );
        check_strategic(
            "Node",
            json!({"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"MemoryPressure","status":"False"}],
                "addresses":[{"type":"InternalIP","address":"10.0.0.1"}]}}),
            json!({"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletDown"}]}}),
            json!({"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletDown"},{"type":"MemoryPressure","status":"False"}],
                "addresses":[{"type":"InternalIP","address":"10.0.0.1"}]}}),
        );
        check_strategic(
            "ReplicaSet",
            json!({"metadata":{"ownerReferences":[{"uid":"d1","kind":"Deployment","name":"web"}]}}),
            json!({"metadata":{"ownerReferences":[{"uid":"d1","controller":true},{"uid":"d2","kind":"Deployment","name":"other"}]}}),
            json!({"metadata":{"ownerReferences":[{"uid":"d1","kind":"Deployment","name":"web","controller":true},
                {"uid":"d2","kind":"Deployment","name":"other"}]}}),
        );
        // Endpoints' subsets carry no strategy: replaced whole.
        check_strategic(
            "Endpoints",
            json!({"subsets":[{"addresses":[{"ip":"10.0.0.1"}]}]}),
            json!({"subsets":[{"addresses":[{"ip":"10.0.0.2"}]}]}),
            json!({"subsets":[{"addresses":[{"ip":"10.0.0.2"}]}]}),
        );
    }

    #[test]
    fn strategic_merge_patch_refuses_patches_that_do_not_apply() {
        let pod = json!({"spec":{"containers":[{"name":"a"}]}});
        let cases = [
            (
                json!({"spec":{"containers":[{"image":"x"}]}}),
                "strategic merge patch does not apply at spec.containers: map {\"image\":\"x\"} does not contain declared merge key: name",
            ),
            (
                json!({"spec":{"containers":[{"$patch":"delete"}]}}),
                "strategic merge patch does not apply at spec.containers: delete patch type with no merge key \"name\" defined",
            ),
            (
                json!({"spec":{"containers":[{"$patch":"merge","name":"a"}]}}),
                "strategic merge patch does not apply at spec.containers: merging lists cannot yet be specified in the patch",
            ),
            (
                json!({"spec":{"containers":["a"]}}),
                "strategic merge patch does not apply at spec.containers: the items of a list merged by \"name\" must be objects, not \"a\"",
            ),
            (
                json!({"spec":{"$patch":"remove"}}),
                "strategic merge patch does not apply at spec: unknown patch type \"remove\" in map",
            ),
            (
                json!({"spec":{"$retainKeys":"containers"}}),
                "strategic merge patch does not apply at spec: $retainKeys must be a list of field names",
            ),
            (
                json!({"spec":{"$retainKeys":["nodeName"],"containers":[]}}),
                "strategic merge patch does not apply at spec: field \"containers\" is in the patch but not in its $retainKeys list",
            ),
            (
                json!({"spec":{"$setElementOrder/containers":[{"name":"a"}],"containers":[{"name":"b"}]}}),
                "strategic merge patch does not apply at spec.containers: the patch list does not match the $setElementOrder list at {\"name\":\"b\"}",
            ),
            (
                json!({"metadata":{"finalizers":[{"a":1}]}}),
                "strategic merge patch does not apply at metadata.finalizers: a list merged as a set takes only primitive values",
            ),
            (
                json!([]),
                "strategic merge patch does not apply: a strategic merge patch must be a JSON object",
            ),
        ];
        for (patch, message) in cases {
            check_strategic_fails("Pod", pod.clone(), patch, message);
        }
    }

    #[test]
    fn directives_in_new_values_are_consumed_not_stored() {
        check_strategic(
            "Deployment",
            json!({"metadata":{"name":"d"}}),
            json!({"spec":{"template":{"metadata":{"labels":{"$patch":"replace","a":"1"}},
                "spec":{"$setElementOrder/containers":[{"name":"x"}],"containers":[{"name":"x","env":[{"name":"E","value":null}]},{"$patch":"delete","name":"y"}],
                "$deleteFromPrimitiveList/finalizers":["z"],"gone":null}}}}),
            json!({"metadata":{"name":"d"},"spec":{"template":{"metadata":{"labels":{"a":"1"}},
                "spec":{"containers":[{"name":"x","env":[{"name":"E"}]}]}}}}),
        );
    }

    #[test]
    fn builtin_schemas_give_the_kubernetes_struct_tags() {
        let cases: &[(&str, &[&str], Option<ListMergeStrategy>)] = &[
            ("Pod", &["spec", "containers"], Some(MergeByKey("name"))),
            (
                "Pod",
                &["spec", "initContainers", "env"],
                Some(MergeByKey("name")),
            ),
            (
                "Pod",
                &["spec", "ephemeralContainers", "ports"],
                Some(MergeByKey("containerPort")),
            ),
            (
                "Pod",
                &["spec", "containers", "volumeMounts"],
                Some(MergeByKey("mountPath")),
            ),
            ("Pod", &["spec", "volumes"], Some(MergeByKey("name"))),
            ("Pod", &["spec", "tolerations"], None),
            ("Pod", &["spec", "containers", "args"], None),
            ("Pod", &["status", "conditions"], Some(MergeByKey("type"))),
            ("Pod", &["metadata", "finalizers"], Some(MergeAsSet)),
            (
                "Deployment",
                &["spec", "template", "spec", "containers"],
                Some(MergeByKey("name")),
            ),
            (
                "Deployment",
                &["spec", "template", "spec", "hostAliases"],
                Some(MergeByKey("ip")),
            ),
            (
                "Deployment",
                &["spec", "template", "metadata", "ownerReferences"],
                Some(MergeByKey("uid")),
            ),
            ("Deployment", &["spec", "containers"], None),
            (
                "ReplicationController",
                &["status", "conditions"],
                Some(MergeByKey("type")),
            ),
            (
                "ReplicaSet",
                &["metadata", "ownerReferences"],
                Some(MergeByKey("uid")),
            ),
            ("Service", &["spec", "ports"], Some(MergeByKey("port"))),
            ("Endpoints", &["subsets"], None),
            ("Node", &["status", "addresses"], Some(MergeByKey("type"))),
            ("Node", &["spec", "taints"], None),
            (
                "Namespace",
                &["status", "conditions"],
                Some(MergeByKey("type")),
            ),
        ];
        for (kind, path, expected) in cases {
            let schema = BuiltinPatchSchema::for_kind(kind).unwrap();
            assert_eq!(
                schema.list_merge_strategy(path),
                *expected,
                "{kind} {path:?}"
            );
        }
        assert_eq!(BuiltinPatchSchema::for_kind("ConfigMap"), None);
        assert_eq!(
            NoListMergeStrategies.list_merge_strategy(&["spec", "containers"]),
            None
        );
    }

    #[test]
    fn rollout_undo_json_patch_replaces_template_and_annotations() {
        let live = deployment_web("nginx:1.26");
        let template = json!({"metadata":{"creationTimestamp":null,"labels":{"app":"web"}},
            "spec":{"containers":[{"name":"nginx","image":"nginx:1.25","ports":[{"containerPort":80}],"resources":{}}]}});
        let annotations = json!({"deployment.kubernetes.io/revision":"2",
            "kubectl.kubernetes.io/last-applied-configuration":"{\"old\":true}\n"});
        let undo = json!([{"op":"replace","path":"/spec/template","value":template},
            {"op":"replace","path":"/metadata/annotations","value":annotations}]);
        let expected = with(
            &with(&live, "/spec/template", template),
            "/metadata/annotations",
            annotations,
        );
        check_json_patch(live, undo, expected);
    }
}
