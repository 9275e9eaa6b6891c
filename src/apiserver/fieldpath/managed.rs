//! `metadata.managedFields`: its entries read and written, and what a write other than an
//! apply (POST, PUT, a non-apply PATCH: an Update) does to them. kube-apiserver's
//! `staging/src/k8s.io/apimachinery/pkg/util/managedfields` (`managedfields.go`:
//! `BuildManagerIdentifier`, the entries' order; `internal/stripmeta.go`;
//! `internal/capmanagers.go`) over structured-merge-diff's `Updater.Update`.
//!
//! The rules:
//! - an entry is one manager's fields under one identity: manager, operation, and, for an
//!   Update, the apiVersion it wrote, and the subresource (`""`, `status`, `scale`);
//! - an Update takes what it added or modified from every other entry (an Update is
//!   always forced) and what it removed from every entry; its own entry gets its earlier
//!   fields minus what it removed, plus what it added or modified, and the time (a write
//!   that added or modified nothing keeps the entry's time);
//! - never owned: `apiVersion`, `kind`, and `metadata`'s `name`, `namespace`, `uid`,
//!   `resourceVersion`, `generation`, `creationTimestamp`, `selfLink` and `managedFields`;
//! - an entry left with no field is dropped; beyond 10 Update entries, the oldest merge,
//!   per apiVersion, into one entry of manager `ancient-changes`;
//! - entries are written Apply before Update, then by time, manager, apiVersion and
//!   subresource (times compare as their RFC 3339 text, which is the order of the
//!   seconds kube-apiserver compares for the UTC times it writes).
//!
//! Not here: whether a write starts tracking at all (kube-apiserver's `skipNonApplied`:
//! an object without entries gets them on create, and on a later write only once an apply
//! made some), which is the caller's; and apply itself.

use serde_json::{json, Map, Value};

use super::compare::compare;
use super::{PathElement, Set};

/// The most Update entries an object keeps (kube-apiserver's `DefaultMaxUpdateManagers`).
pub const MAX_UPDATE_ENTRIES: usize = 10;

/// The manager the oldest Update entries merge into beyond [`MAX_UPDATE_ENTRIES`].
pub const ANCIENT_CHANGES: &str = "ancient-changes";

/// How an entry's fields were written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One entry of `metadata.managedFields`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub manager: String,
    pub operation: Operation,
    /// The apiVersion of the object the fields were written in.
    pub api_version: String,
    /// RFC 3339, UTC (`2024-05-01T10:00:00Z`).
    pub time: Option<String>,
    /// `""`, `status` or `scale`.
    pub subresource: String,
    pub fields: Set,
}

impl Entry {
    /// Whether `other` is the same manager's entry: kube-apiserver's manager identifier,
    /// in which an Apply entry's apiVersion plays no part.
    fn is(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == Operation::Apply || self.api_version == other.api_version)
    }
}

/// One write's identity: who writes, in which apiVersion, through which subresource, when.
#[derive(Clone, Copy, Debug)]
pub struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    pub subresource: &'a str,
    /// RFC 3339, UTC.
    pub now: &'a str,
}

/// The entries of `managed_fields` (an object's `metadata.managedFields`; absent or null
/// is none).
///
/// # Errors
/// An entry that is not an object, an unknown operation, a `fieldsType` other than
/// `FieldsV1`, or fields that do not parse: one message naming the entry.
pub fn decode(managed_fields: Option<&Value>) -> Result<Vec<Entry>, String> {
    let entries = match managed_fields {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(entries)) => entries,
        Some(_) => return Err("metadata.managedFields must be a list".to_string()),
    };
    let mut decoded = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let invalid = |why: String| format!("metadata.managedFields[{index}]: {why}");
        let text = |field: &str| entry.get(field).and_then(Value::as_str).unwrap_or("");
        let operation = match text("operation") {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            other => return Err(invalid(format!("unknown operation {other:?}"))),
        };
        match entry.get("fieldsType").and_then(Value::as_str) {
            None | Some("FieldsV1") => {}
            Some(other) => return Err(invalid(format!("unknown fieldsType {other:?}"))),
        }
        let fields = match entry.get("fieldsV1") {
            None | Some(Value::Null) => Set::new(),
            Some(fields) => Set::from_fields_v1(fields).map_err(invalid)?,
        };
        decoded.push(Entry {
            manager: text("manager").to_string(),
            operation,
            api_version: text("apiVersion").to_string(),
            time: entry
                .get("time")
                .and_then(Value::as_str)
                .map(str::to_string),
            subresource: text("subresource").to_string(),
            fields,
        });
    }
    Ok(decoded)
}

/// `entries` as `metadata.managedFields` holds them, in kube-apiserver's order.
pub fn encode(entries: &[Entry]) -> Value {
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort_by(|p, q| {
        p.operation
            .cmp(&q.operation)
            .then_with(|| p.time.cmp(&q.time))
            .then_with(|| p.manager.cmp(&q.manager))
            .then_with(|| p.api_version.cmp(&q.api_version))
            .then_with(|| p.subresource.cmp(&q.subresource))
    });
    let encoded = sorted.into_iter().map(|entry| {
        let mut object = Map::new();
        object.insert("manager".into(), json!(entry.manager));
        object.insert("operation".into(), json!(entry.operation.as_str()));
        object.insert("apiVersion".into(), json!(entry.api_version));
        if let Some(time) = &entry.time {
            object.insert("time".into(), json!(time));
        }
        object.insert("fieldsType".into(), json!("FieldsV1"));
        object.insert("fieldsV1".into(), entry.fields.to_fields_v1());
        if !entry.subresource.is_empty() {
            object.insert("subresource".into(), json!(entry.subresource));
        }
        Value::Object(object)
    });
    Value::Array(encoded.collect())
}

/// `set` without the paths no manager owns.
pub fn strip(set: &Set) -> Set {
    strip_owned(set.clone())
}

/// [`strip`], reusing `set`.
fn strip_owned(set: Set) -> Set {
    set.without(never_owned())
}

/// The paths no manager owns, made once.
fn never_owned() -> &'static Set {
    static NEVER: std::sync::OnceLock<Set> = std::sync::OnceLock::new();
    NEVER.get_or_init(never_owned_set)
}

fn never_owned_set() -> Set {
    let field = |name: &str| PathElement::Field(name.to_string());
    let mut never = Set::new();
    never.insert(&[field("apiVersion")]);
    never.insert(&[field("kind")]);
    never.insert(&[field("metadata")]);
    for name in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "selfLink",
        "managedFields",
    ] {
        never.insert(&[field("metadata"), field(name)]);
    }
    // `metadata` itself is never a member, but what else it holds (labels, annotations,
    // finalizers, ownerReferences) is owned.
    never
}

/// The entries after a write from `old` to `new` (two objects of the served `kind`) by
/// `writer`, an Update.
///
/// # Errors
/// What [`compare`] refuses.
pub fn record_update(
    kind: &str,
    writer: Writer<'_>,
    old: &Value,
    new: &Value,
    entries: Vec<Entry>,
) -> Result<Vec<Entry>, String> {
    let comparison = compare(kind, old, new)?;
    let changed = comparison.modified.merged(&comparison.added);
    let mine = Entry {
        manager: writer.manager.to_string(),
        operation: Operation::Update,
        api_version: writer.api_version.to_string(),
        time: Some(writer.now.to_string()),
        subresource: writer.subresource.to_string(),
        fields: Set::new(),
    };
    let mut earlier = None;
    let mut kept = Vec::with_capacity(entries.len() + 1);
    for mut entry in entries {
        if entry.is(&mine) {
            earlier = Some(entry);
            continue;
        }
        entry.fields = std::mem::take(&mut entry.fields)
            .without(&changed)
            .without(&comparison.removed);
        if !entry.fields.is_empty() {
            kept.push(entry);
        }
    }
    // A write that took no field leaves the writer's entry as it was, time included
    // (kube-apiserver's `managedFieldsUpdater`), less what it removed.
    let entry = match earlier {
        Some(mut earlier) if changed.is_empty() => {
            earlier.fields = std::mem::take(&mut earlier.fields).without(&comparison.removed);
            earlier
        }
        earlier => Entry {
            fields: strip_owned(
                earlier
                    .map(|e| e.fields)
                    .unwrap_or_default()
                    .without(&comparison.removed)
                    .merged(&changed),
            ),
            ..mine
        },
    };
    if !entry.fields.is_empty() {
        kept.push(entry);
    }
    cap_updates(&mut kept);
    Ok(kept)
}

/// Merges the oldest Update entries, per apiVersion, into one of manager
/// [`ANCIENT_CHANGES`] until at most [`MAX_UPDATE_ENTRIES`] remain: the bucket is the
/// `ancient-changes` entry of that apiVersion, or else its oldest entry once a second one
/// joins it, and takes the time of the latest entry merged.
pub fn cap_updates(entries: &mut Vec<Entry>) {
    let mut updates: Vec<usize> = (0..entries.len())
        .filter(|&i| entries[i].operation == Operation::Update)
        .collect();
    if updates.len() <= MAX_UPDATE_ENTRIES {
        return;
    }
    updates.sort_by(|&i, &j| {
        let (p, q) = (&entries[i], &entries[j]);
        p.time.cmp(&q.time).then_with(|| p.manager.cmp(&q.manager))
    });
    let mut length = updates.len();
    // The bucket of each apiVersion: an `ancient-changes` entry already there, else the
    // oldest entry of that apiVersion once a second one joins it.
    let mut buckets: Vec<(String, usize)> = updates
        .iter()
        .filter(|&&i| entries[i].manager == ANCIENT_CHANGES && entries[i].subresource.is_empty())
        .map(|&i| (entries[i].api_version.clone(), i))
        .collect();
    let mut gone = vec![false; entries.len()];
    for &i in &updates {
        if length <= MAX_UPDATE_ENTRIES {
            break;
        }
        let version = entries[i].api_version.clone();
        match buckets.iter().find(|(v, _)| *v == version) {
            Some(&(_, bucket)) if bucket == i => {}
            Some(&(_, bucket)) => {
                let merged = entries[i].fields.union(&entries[bucket].fields);
                let time = entries[i].time.clone();
                let bucket_entry = &mut entries[bucket];
                bucket_entry.manager = ANCIENT_CHANGES.to_string();
                bucket_entry.subresource = String::new();
                bucket_entry.fields = merged;
                bucket_entry.time = time;
                gone[i] = true;
                length -= 1;
            }
            None => buckets.push((version, i)),
        }
    }
    let mut index = 0;
    entries.retain(|_| {
        index += 1;
        !gone[index - 1]
    });
}

#[cfg(test)]
mod tests;
