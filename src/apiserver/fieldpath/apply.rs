//! Server-side apply of a configuration to the live object: structured-merge-diff's
//! `Updater.Apply`, with kube-apiserver's conflict messages
//! (`staging/src/k8s.io/apimachinery/pkg/util/managedfields/internal/conflict.go`).
//!
//! The steps:
//! 1. the configuration is merged into the live object ([`super::merge`]);
//! 2. the manager's fields become exactly the configuration's paths (less those nobody
//!    owns, [`super::managed::strip`]);
//! 3. what the manager applied last time and leaves out now is removed, unless a manager
//!    (another, or this one's new configuration) owns that very path ([`Set::to_prune`]):
//!    a field that leads to something owned stays with what is owned below it, but a list
//!    item another manager only changed a field of goes with the applier's item
//!    (Kubernetes' `TestApplyCanRemoveMapItemsContributedToByControllers`);
//! 4. every field of another manager that this changes or adds is a conflict: without
//!    `force` the apply fails naming each; with it, the other manager loses the field.
//!    Every manager loses what was removed, and one left with nothing is dropped.
//!
//! Invariants: pure; the live object and the entries are only read; an apply that
//! changes nothing says so ([`Applied::changed`]), so the caller writes nothing and the
//! resourceVersion stays.

use super::compare::compare;
use super::managed::{strip, Entry, Operation, Writer};
use super::merge::{merge, remove};
use super::typed::fields_of;
use super::{display, Set};

use serde_json::{Map, Value};

/// What an apply gives: the object to store, its entries, and whether it differs from the
/// live object.
#[derive(Clone, Debug, PartialEq)]
pub struct Applied {
    pub object: Value,
    pub entries: Vec<Entry>,
    pub changed: bool,
}

/// One field another manager owns that the apply would change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The manager as kube-apiserver prints it: `"kubectl-client-side-apply" using
    /// apps/v1`, `"kubectl" with subresource "scale" using apps/v1`, `"helm"`.
    pub manager: String,
    /// The field, as `.spec.replicas`.
    pub field: String,
    /// The field's path.
    pub path: Vec<super::PathElement>,
}

/// Why an apply failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApplyError {
    /// The object or the configuration does not fit the kind's schema (a 400 or 422).
    Invalid(String),
    /// Fields of other managers the apply would change, without `force` (a 409).
    Conflicts(Vec<Conflict>),
}

impl ApplyError {
    /// kube-apiserver's message: `Apply failed with 1 conflict: conflict with "m" using
    /// apps/v1: .spec.replicas`, or with several, each manager's fields on lines of their
    /// own.
    pub fn message(&self) -> String {
        let conflicts = match self {
            ApplyError::Invalid(why) => return why.clone(),
            ApplyError::Conflicts(conflicts) => conflicts,
        };
        if let [only] = conflicts.as_slice() {
            return format!(
                "Apply failed with 1 conflict: conflict with {}: {}",
                only.manager, only.field
            );
        }
        let mut managers: Vec<&str> = conflicts.iter().map(|c| c.manager.as_str()).collect();
        managers.sort_unstable();
        managers.dedup();
        let mut lines = Vec::new();
        for manager in managers {
            lines.push(format!("conflicts with {manager}:"));
            for conflict in conflicts.iter().filter(|c| c.manager == manager) {
                lines.push(format!("- {}", conflict.field));
            }
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    }
}

/// How kube-apiserver names `entry`'s manager in a conflict.
fn printed(entry: &Entry) -> String {
    let mut text = format!("{:?}", entry.manager);
    if !entry.subresource.is_empty() {
        text = format!("{text} with subresource {:?}", entry.subresource);
    }
    if entry.operation == Operation::Update {
        text = format!("{text} using {}", entry.api_version);
    }
    text
}

/// `config` applied by `writer` to `live` (objects of the served `kind`) whose
/// `metadata.managedFields` are `entries`.
///
/// # Errors
/// [`ApplyError::Invalid`] for an object or configuration that does not fit the schema;
/// [`ApplyError::Conflicts`] for other managers' fields it would change, without `force`.
pub fn apply(
    kind: &str,
    writer: Writer<'_>,
    live: &Value,
    config: &Value,
    entries: Vec<Entry>,
    force: bool,
) -> Result<Applied, ApplyError> {
    let invalid = ApplyError::Invalid;
    let merged = merge(kind, live, config).map_err(invalid)?;
    let applied = strip(&fields_of(kind, config).map_err(invalid)?);
    let mine = Entry {
        manager: writer.manager.to_string(),
        operation: Operation::Apply,
        api_version: writer.api_version.to_string(),
        time: Some(writer.now.to_string()),
        subresource: writer.subresource.to_string(),
        fields: applied.clone(),
    };
    if entries.is_empty() && live.as_object().is_some_and(Map::is_empty) {
        // An apply that creates: nothing to prune, nobody to conflict with, and all of
        // the merge is new.
        let changed = merged.as_object().is_none_or(|merged| !merged.is_empty());
        return Ok(Applied {
            object: merged,
            entries: if mine.fields.is_empty() {
                Vec::new()
            } else {
                vec![mine]
            },
            changed,
        });
    }
    let (earlier, others): (Vec<Entry>, Vec<Entry>) = entries.into_iter().partition(|e| {
        e.manager == mine.manager
            && e.operation == Operation::Apply
            && e.subresource == mine.subresource
    });
    let last_time = earlier.iter().find_map(|entry| entry.time.clone());
    let last = earlier
        .into_iter()
        .fold(Set::new(), |set, entry| set.union(&entry.fields));
    let owned = others
        .iter()
        .fold(applied.clone(), |set, entry| set.union(&entry.fields));
    let pruned = remove(kind, &merged, &last.to_prune(&owned)).map_err(invalid)?;

    let comparison = compare(kind, live, &pruned).map_err(invalid)?;
    let changed = comparison.modified.union(&comparison.added);
    let mut conflicts = Vec::new();
    for entry in &others {
        for path in entry.fields.intersection(&changed).paths() {
            conflicts.push(Conflict {
                manager: printed(entry),
                field: display(&path),
                path,
            });
        }
    }
    if !force && !conflicts.is_empty() {
        return Err(ApplyError::Conflicts(conflicts));
    }
    let mut kept: Vec<Entry> = others
        .into_iter()
        .filter_map(|mut entry| {
            entry.fields = entry
                .fields
                .difference(&changed)
                .difference(&comparison.removed);
            (!entry.fields.is_empty()).then_some(entry)
        })
        .collect();
    let changed = !comparison.is_same();
    if !mine.fields.is_empty() {
        // An apply that changes nothing keeps the time of the applier's last apply.
        let time = if changed {
            mine.time
        } else {
            last_time.or(mine.time)
        };
        kept.push(Entry { time, ..mine });
    }
    Ok(Applied {
        object: pruned,
        entries: kept,
        changed,
    })
}

#[cfg(test)]
mod tests;
