//! Field ownership on every write: kube-apiserver's field manager
//! (`staging/src/k8s.io/apimachinery/pkg/util/managedfields/internal/fieldmanager.go` and
//! the managers it chains: `lastappliedmanager.go`, `lastappliedupdater.go`,
//! `skipnonapplied.go`, `capmanagers.go`, `managedfieldsupdater.go`, `stripmeta.go` and
//! `structuredmerge.go`), over the pure parts in [`fieldpath`].
//!
//! - **Who writes** ([`Manager`]): the `fieldManager` parameter, else the product of the
//!   User-Agent (`kubectl` of `kubectl/v1.32.0 (linux/amd64) ...`); at most 128 printable
//!   characters. kcm's own components write etcd directly, not through the API, so their
//!   writes record no owner (docs/departures.md).
//! - **An Update** (POST, PUT, a non-apply PATCH, `/status`, `/scale`: [`record`]) takes
//!   the fields it added or modified from every other manager and drops what it removed.
//!   An object created untracked (by kcm's controllers, or before kcm tracked fields)
//!   starts being tracked at its first apply, as kube-apiserver's `skipNonApplied`. A
//!   write that sets `metadata.managedFields` replaces them (kubectl's move from
//!   client-side apply does), and `[{}]` clears them. An Update never fails a write:
//!   entries it cannot compute are dropped, with a log line.
//! - **An Apply** (`application/apply-patch+yaml`: [`apply`]) merges the configuration
//!   into the live object under the schema's list types; the manager then owns exactly
//!   what it sent; another manager's field the apply would change is a 409 `Conflict`
//!   (with `force`, the field changes hands). For manager `kubectl`, the conflicts that
//!   the object's last client-side apply explains are taken without `force`, and that
//!   annotation follows the applied configuration (`lastappliedmanager.go`,
//!   `lastappliedupdater.go`).
//! - **Which part an endpoint owns:** the main resource never owns `status`, `/status`
//!   owns nothing but `status` (the endpoints' reset fields).
//!
//! Invariants: an apply that changes nothing leaves the entries, their times included,
//! as they were, so the write is skipped and the resourceVersion stays; no request can
//! name a manager kcm cannot store (refused with 422, as kube-apiserver's
//! `ValidatePatchOptions`).

use axum::http::{header, HeaderMap};
use serde_json::{Map, Value};

use super::request::Query;
use crate::api::{self, LAST_APPLIED_ANNOTATION};
use crate::apiserver::errors::{ApiError, Cause};
use crate::apiserver::fieldpath::{self, apply::ApplyError, compare, managed, typed, Set};

/// The longest manager name kube-apiserver takes (`FieldManagerMaxLength`).
const MAX_MANAGER_LENGTH: usize = 128;

/// Who a write's fields go to, and whether an apply takes others' fields (`force`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Manager {
    pub name: String,
    pub force: bool,
    /// Whether the request named it (`fieldManager`), which an apply must.
    pub stated: bool,
}

impl Manager {
    /// The request's manager: `fieldManager`, else the User-Agent's product.
    ///
    /// # Errors
    /// 400 for a `force` that is not a boolean; 422 for a manager over 128 bytes or with a
    /// character that does not print.
    pub fn parse(query: &Query, headers: &HeaderMap) -> Result<Manager, ApiError> {
        let force = match query.get("force") {
            None | Some("" | "false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "force: invalid value {other:?}: must be true or false"
                )))
            }
        };
        let stated = query.get("fieldManager").filter(|m| !m.is_empty());
        let name = match stated {
            Some(stated) => {
                let mut causes = Vec::new();
                if stated.len() > MAX_MANAGER_LENGTH {
                    causes.push(options_cause(
                        "FieldValueTooLong",
                        format!("Too long: may not be more than {MAX_MANAGER_LENGTH} bytes"),
                    ));
                }
                if stated.chars().any(|c| c.is_control()) {
                    causes.push(options_cause(
                        "FieldValueInvalid",
                        format!(
                            "Invalid value: {stated:?}: must only contain printable characters"
                        ),
                    ));
                }
                if !causes.is_empty() {
                    return Err(invalid_options(causes));
                }
                stated.to_string()
            }
            None => from_user_agent(headers),
        };
        Ok(Manager {
            name,
            force,
            stated: stated.is_some(),
        })
    }

    /// The checks of a PATCH's options (`ValidatePatchOptions`): an apply names its
    /// manager; only an apply may `force`.
    ///
    /// # Errors
    /// 422 `Invalid`.
    pub fn check_patch(&self, apply: bool) -> Result<(), ApiError> {
        if apply && !self.stated {
            return Err(invalid_options(vec![options_cause(
                "FieldValueRequired",
                "Required value: is required for apply patch".to_string(),
            )]));
        }
        if !apply && self.force {
            return Err(invalid_options(vec![Cause {
                reason: "FieldValueForbidden",
                message: "Forbidden: may not be specified for non-apply patch".to_string(),
                field: "force".to_string(),
            }]));
        }
        Ok(())
    }
}

fn options_cause(reason: &'static str, message: String) -> Cause {
    Cause {
        reason,
        message,
        field: "fieldManager".to_string(),
    }
}

/// 422 `PatchOptions.meta.k8s.io "" is invalid: ...`, as kube-apiserver words it.
fn invalid_options(causes: Vec<Cause>) -> ApiError {
    ApiError::invalid("meta.k8s.io", "PatchOptions", "", causes)
}

/// The User-Agent's product (what comes before its first `/`), without the characters
/// that do not print, at most 128 bytes (kube-apiserver's `prefixFromUserAgent`).
fn from_user_agent(headers: &HeaderMap) -> String {
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mut name = String::new();
    for c in agent.split('/').next().unwrap_or("").chars() {
        if c.is_control() {
            continue;
        }
        if name.len() >= MAX_MANAGER_LENGTH {
            break;
        }
        name.push(c);
    }
    name
}

/// One write's identity as its entries record it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Writer<'a> {
    /// The served kind (`Deployment`).
    pub kind: &'static str,
    /// The served apiVersion (`apps/v1`).
    pub api_version: &'a str,
    pub manager: &'a str,
    /// `""`, `status` or `scale`.
    pub subresource: &'static str,
}

impl Writer<'_> {
    fn at<'t>(&'t self, now: &'t str) -> managed::Writer<'t> {
        managed::Writer {
            manager: self.manager,
            api_version: self.api_version,
            subresource: self.subresource,
            now,
        }
    }
}

/// The entries `object` states (none when absent or unreadable).
fn entries_of(object: &Value) -> Option<Vec<managed::Entry>> {
    managed::decode(object.pointer("/metadata/managedFields")).ok()
}

/// Sets `object`'s `metadata.managedFields` to `entries`; none removes the field.
fn set_entries(object: &mut Value, entries: &[managed::Entry]) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if entries.is_empty() {
        metadata.shift_remove("managedFields");
    } else {
        metadata.insert("managedFields".into(), managed::encode(entries));
    }
}

/// Whether a write asks its entries cleared: `managedFields: [{}]`.
fn clears(object: &Value) -> bool {
    matches!(
        object.pointer("/metadata/managedFields"),
        Some(Value::Array(entries)) if entries.len() == 1 && entries[0].as_object().is_some_and(Map::is_empty)
    )
}

/// Records an Update by `writer` from `old` (`None`: a create) to `new`, both served, in
/// `new`'s `metadata.managedFields`.
pub(super) fn record(writer: Writer<'_>, old: Option<&Value>, new: &mut Value) {
    if clears(new) {
        set_entries(new, &[]);
        return;
    }
    // Entries the write states replace the stored ones, but through a subresource.
    let stated = entries_of(new).filter(|e| !e.is_empty() && writer.subresource.is_empty());
    let entries = match stated {
        Some(entries) => entries,
        None => old.and_then(entries_of).unwrap_or_default(),
    };
    if old.is_some() && entries.is_empty() {
        // Untracked until an apply (`skipNonApplied`).
        set_entries(new, &[]);
        return;
    }
    let empty = Value::Object(Map::new());
    let now = api::now_rfc3339();
    let recorded = match old {
        Some(old) => managed::record_update(writer.kind, writer.at(&now), old, new, entries),
        // A create owns no status (the main resource's reset field).
        None if new.get("status").is_some() => {
            let mut created = new.clone();
            if let Some(object) = created.as_object_mut() {
                object.shift_remove("status");
            }
            managed::record_update(writer.kind, writer.at(&now), &empty, &created, entries)
        }
        None => managed::record_update(writer.kind, writer.at(&now), &empty, new, entries),
    };
    match recorded {
        Ok(entries) => set_entries(new, &entries),
        Err(why) => {
            tracing::warn!(
                kind = writer.kind,
                manager = writer.manager,
                "managedFields dropped: {why}"
            );
            set_entries(new, &[]);
        }
    }
}

/// Checks an applied configuration against the endpoint (kube-apiserver's
/// `structuredmerge.go`): an object, in the endpoint's apiVersion and kind, without
/// `managedFields`.
///
/// # Errors
/// 400 naming the problem.
pub(super) fn check_config(writer: Writer<'_>, config: &Value) -> Result<(), ApiError> {
    if !config.is_object() {
        return Err(ApiError::bad_request(
            "an apply patch must be an object (YAML or JSON)",
        ));
    }
    if config
        .pointer("/metadata/managedFields")
        .is_some_and(|m| !m.is_null())
    {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    let stated = |field: &str| config.get(field).and_then(Value::as_str).unwrap_or("");
    if stated("apiVersion") != writer.api_version {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {}, expected: {}",
            stated("apiVersion"),
            writer.api_version
        )));
    }
    if !matches!(stated("kind"), "" | "Scale") && stated("kind") != writer.kind {
        return Err(ApiError::bad_request(format!(
            "Incorrect kind specified in apply patch. Specified patch kind: {}, expected: {}",
            stated("kind"),
            writer.kind
        )));
    }
    Ok(())
}

/// The part of `config` an endpoint applies: all but `status` through the main resource,
/// only `status` (and the object's identity) through `/status`.
fn part_of(subresource: &str, config: &Value) -> Value {
    let mut part = config.clone();
    let Some(object) = part.as_object_mut() else {
        return part;
    };
    if subresource == "status" {
        object.retain(|field, _| matches!(field.as_str(), "apiVersion" | "kind" | "status"));
        let identity: Map<String, Value> = config
            .get("metadata")
            .and_then(Value::as_object)
            .map(|metadata| {
                metadata
                    .iter()
                    .filter(|(field, _)| matches!(field.as_str(), "name" | "namespace"))
                    .map(|(field, value)| (field.clone(), value.clone()))
                    .collect()
            })
            .unwrap_or_default();
        object.insert("metadata".into(), Value::Object(identity));
    } else {
        object.shift_remove("status");
    }
    part
}

/// `config` applied by `writer` to `live` (`None`: nothing there yet, a create), both
/// served. Returns the object to store, with its entries.
///
/// # Errors
/// 409 `Conflict` naming each field of another manager the apply would change (without
/// `force`); 422 for a configuration or object that does not fit the kind's schema.
pub(super) fn apply(
    writer: Writer<'_>,
    live: Option<&Value>,
    config: &Value,
    force: bool,
) -> Result<Value, ApiError> {
    let config = part_of(writer.subresource, config);
    let empty = Value::Object(Map::new());
    let live = live.unwrap_or(&empty);
    let entries = entries_of(live).unwrap_or_default();
    let now = api::now_rfc3339();
    let kind = writer.kind;
    let run = |force: bool| {
        fieldpath::apply::apply(kind, writer.at(&now), live, &config, entries.clone(), force)
    };
    let applied = match run(force) {
        Err(ApplyError::Conflicts(conflicts)) if writer.manager == "kubectl" => {
            // Moving from client-side apply: what the last one explains is not a conflict.
            let allowed = allowed_by_last_applied(kind, live).unwrap_or_default();
            let left: Vec<_> = conflicts
                .into_iter()
                .filter(|c| !allowed.has(&c.path))
                .collect();
            if left.is_empty() {
                run(true)
            } else {
                Err(ApplyError::Conflicts(left))
            }
        }
        other => other,
    };
    let applied = applied.map_err(|error| match &error {
        ApplyError::Conflicts(conflicts) => ApiError::apply_conflict(
            error.message(),
            conflicts
                .iter()
                .map(|c| Cause {
                    reason: "FieldManagerConflict",
                    message: format!("conflict with {}", c.manager),
                    field: c.field.clone(),
                })
                .collect(),
        ),
        ApplyError::Invalid(why) => ApiError::unprocessable(format!(
            "the apply does not fit the {} schema: {why}",
            writer.kind
        )),
    })?;
    let mut object = applied.object;
    set_entries(&mut object, &applied.entries);
    if writer.manager == "kubectl" {
        follow_last_applied(&mut object, &config);
    }
    Ok(object)
}

/// The fields whose live value is the one the object's last client-side apply (its
/// `last-applied-configuration`) set: `lastappliedmanager.go`'s allowed conflicts.
fn allowed_by_last_applied(kind: &str, live: &Value) -> Option<Set> {
    let text = live
        .pointer("/metadata/annotations")?
        .get(LAST_APPLIED_ANNOTATION)?
        .as_str()?;
    let last: Value = serde_json::from_str(text).ok()?;
    let fields = typed::fields_of(kind, &last).ok()?;
    let comparison = compare::compare(kind, &last, live).ok()?;
    Some(fields.difference(&comparison.modified))
}

/// Where the applied object keeps a `last-applied-configuration`, it becomes the applied
/// configuration (without that annotation), as compact JSON with sorted keys
/// (`lastappliedupdater.go`), so a later client-side apply starts from it.
fn follow_last_applied(object: &mut Value, config: &Value) {
    let Some(annotations) = object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
        .filter(|a| a.contains_key(LAST_APPLIED_ANNOTATION))
    else {
        return;
    };
    let mut last = config.clone();
    if let Some(own) = last
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        own.shift_remove(LAST_APPLIED_ANNOTATION);
    }
    if let Some(metadata) = last.get_mut("metadata").and_then(Value::as_object_mut) {
        if metadata
            .get("annotations")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
        {
            metadata.shift_remove("annotations");
        }
    }
    let text = format!("{}\n", sorted(last));
    annotations.insert(LAST_APPLIED_ANNOTATION.into(), Value::String(text));
}

/// `value` with every object's keys sorted, as Go writes a map.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests;
