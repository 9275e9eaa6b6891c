//! `kcm apply -f`: create each object of the input, or update the stored one by name,
//! as `kubectl apply` does (2014 kubecfg had only `create` and `update`; `apply` came with
//! kubectl in 2015).
//!
//! An update is kubectl's three-way merge, in JSON merge-patch form: what the manifest
//! sets replaces what is stored; a field the last apply set and this manifest no longer
//! does is removed (the last applied configuration is kept in kubectl's
//! `kubectl.kubernetes.io/last-applied-configuration` annotation); everything else is
//! kept: `status` (the controllers' and kubelets'), uid, creation time, fields written by
//! others, fields kcm does not know. Unlike kubectl's strategic merge, lists (containers,
//! ports) are replaced whole.
//!
//! Invariants: every write is a compare-and-swap on the resourceVersion that was read
//! (a conflict is retried from a fresh read, at most [`MAX_APPLY_ATTEMPTS`] times, or
//! reported when the manifest itself names a resourceVersion); nothing is written when
//! the merge changes nothing (`unchanged`).

use std::collections::HashSet;
use std::fmt;

use anyhow::Context as _;
use futures::stream::{FuturesOrdered, StreamExt as _};
use serde_json::{Map, Value};

use super::input::Manifests;
use super::manifest::{report_failures, with_manifest, FilenameOptions};
use super::overlap::refuse_overlapping_manifests;
use super::print::emit;
use super::resource::reference;
use super::storage::{create_object, storage_error, update_object};
use crate::api::{self, Object, ResourceVersion};
use crate::client::Target;
use crate::registry::{Registry, StorageError};

/// `kcm apply -f FILE`: the same input as `create`, and server-side apply or not.
#[derive(Clone, Debug)]
pub struct ApplyOptions {
    pub files: FilenameOptions,
    /// `--server-side`: the API's server-side apply instead of kubectl's three-way merge.
    pub server_side: Option<ServerSide>,
}

/// `--server-side`'s manager and `--force-conflicts`.
#[derive(Clone, Debug)]
pub struct ServerSide {
    pub manager: String,
    pub force: bool,
}

pub use crate::api::LAST_APPLIED_ANNOTATION;

/// How many times in a row an apply reads and writes again after a conflict.
const MAX_APPLY_ATTEMPTS: usize = 5;

/// How many objects are applied at once: enough to keep etcd's commits batched (5,000
/// pods took 17.8 s one at a time, each read and write waiting for the last, and 5.1 s
/// with 64), few enough that the objects in flight are a small part of the input's memory.
const APPLY_WINDOW: usize = 64;

/// What `apply` did to one object (printed after its reference, as kubectl does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    Created,
    Configured,
    Unchanged,
    /// Server-side applied (created, changed or not), as kubectl prints it.
    ServerSide,
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Applied::Created => "created",
            Applied::Configured => "configured",
            Applied::Unchanged => "unchanged",
            Applied::ServerSide => "serverside-applied",
        })
    }
}

/// `kcm apply -f FILE`: decodes and validates every object, then creates or updates each,
/// printing `replicationcontrollers/web created|configured|unchanged` per object.
///
/// # Errors
/// Bad input (nothing is written), etcd unreachable, or objects that could not be
/// applied (a conflict with the manifest's resourceVersion, an invalid merge result,
/// etcd failing); the others are still applied.
pub async fn apply(target: &Target, options: ApplyOptions) -> anyhow::Result<()> {
    let files = &options.files;
    let manifests = Manifests::read(&files.filename, files.namespace.as_deref())?;
    let server_side = options.server_side.as_ref();
    let (_client, registry) = super::connect(target).await?;
    // As `create`: a controller that would overlap another (stored, or in this input)
    // is refused before anything is written.
    refuse_overlapping_manifests(&registry, manifests.controllers()).await?;
    let mut failures = Vec::new();
    let mut report = |(reference, applied): (String, anyhow::Result<Applied>)| match applied {
        Ok(applied) => emit(&format!("{reference} {applied}\n")),
        Err(e) => {
            failures.push(format!("{e:#}"));
            Ok(())
        }
    };
    // Up to APPLY_WINDOW objects are decoded and being applied at once (`input` decodes
    // one at a time); they finish, and are reported, in the input's order. An object
    // whose name is already being applied waits for that one, so a name given twice is
    // applied twice in turn, as one at a time would.
    let registry = &registry;
    let mut in_flight = FuturesOrdered::new();
    let mut names_in_flight = HashSet::new();
    for p in manifests.iter() {
        let p = p?;
        let name = (
            p.manifest.reference(),
            p.manifest.metadata().namespace.clone(),
        );
        while in_flight.len() >= APPLY_WINDOW || names_in_flight.contains(&name) {
            let (done, outcome) = in_flight.next().await.expect("an object is in flight");
            names_in_flight.remove(&done);
            report(outcome)?;
        }
        names_in_flight.insert(name.clone());
        in_flight.push_back(async move {
            let applied = with_manifest!(&p.manifest, object => {
                match server_side {
                    Some(how) => apply_server_side(registry, object, &p.document, how).await,
                    None => apply_object(registry, object, &p.document).await,
                }
            });
            let reference = name.0.clone();
            (name, (reference, applied))
        });
    }
    while let Some((_, outcome)) = in_flight.next().await {
        report(outcome)?;
    }
    report_failures(failures, manifests.len(), "applied")
}

/// Creates `object`, or merges `document` into the stored object of its name and writes
/// the result over the revision read.
async fn apply_object<T: Object>(
    registry: &Registry,
    object: &T,
    document: &Value,
) -> anyhow::Result<Applied> {
    let meta = object.metadata();
    let (namespace, name) = (meta.namespace.as_str(), meta.name.as_str());
    let precondition = meta.resource_version;
    let applied = applied_configuration(document);
    let last_applied =
        serde_json::to_string(&applied).context("encode the applied configuration")?;
    for attempt in 0..MAX_APPLY_ATTEMPTS {
        let live = match registry.get::<T>(namespace, name).await {
            Ok(live) => live,
            Err(StorageError::NotFound { .. }) => {
                if create_applied(registry, object, &last_applied).await? {
                    return Ok(Applied::Created);
                }
                // Created by someone else since the read: update it instead.
                continue;
            }
            Err(e) => return Err(storage_error::<T>(e, name)),
        };
        let stored = live.metadata();
        let conflict = |stored_rv: Option<ResourceVersion>| {
            anyhow::anyhow!(
                "Operation cannot be fulfilled on {} {name:?}: the object has been modified \
                 (resourceVersion {} in the manifest, {} stored); please apply your changes \
                 to the latest version and try again",
                T::RESOURCE,
                precondition.map_or(0, |rv| rv.0),
                stored_rv.map_or_else(|| "none".to_string(), |rv| rv.0.to_string()),
            )
        };
        if precondition.is_some() && precondition != stored.resource_version {
            return Err(conflict(stored.resource_version));
        }
        anyhow::ensure!(
            meta.uid.is_empty() || meta.uid == stored.uid,
            "{} {name:?}: the manifest's metadata.uid {} is not the stored object's {} \
             (it was deleted and created again); drop metadata.uid to apply to it",
            T::RESOURCE,
            meta.uid,
            stored.uid
        );
        if attempt == 0 && !stored.annotations.contains_key(LAST_APPLIED_ANNOTATION) {
            eprintln!(
                "kcm: warning: {} has no {LAST_APPLIED_ANNOTATION} annotation (it was not \
                 made by apply); fields the manifest leaves out are kept",
                reference(&live)
            );
        }
        let merged = merged_object(&live, &applied, &last_applied)?;
        if api::encode(&merged)? == api::encode(&live)? {
            return Ok(Applied::Unchanged);
        }
        match update_object(registry, &merged).await {
            Ok(()) => return Ok(Applied::Configured),
            Err(e) => match e.downcast_ref::<StorageError>() {
                Some(StorageError::Conflict { actual, .. }) => {
                    if precondition.is_some() {
                        return Err(conflict(*actual));
                    }
                    tracing::debug!(object = %reference(&live), "apply conflict; reading again");
                }
                _ => return Err(e),
            },
        }
    }
    Err(kept_changing::<T>(name))
}

/// `kcm apply --server-side` of one object: the API's server-side apply
/// (`apiserver::apply_stored`) of the manifest to the stored object, created when there is
/// none, each write a compare-and-swap on the revision read (retried after a conflict
/// with another writer). A field another manager owns and the manifest changes is an
/// error naming it, unless `force`.
async fn apply_server_side<T: Object>(
    registry: &Registry,
    object: &T,
    document: &Value,
    how: &ServerSide,
) -> anyhow::Result<Applied> {
    let meta = object.metadata();
    let (namespace, name) = (meta.namespace.as_str(), meta.name.as_str());
    let mut config = applied_configuration(document);
    config["metadata"]["namespace"] = Value::String(namespace.to_string());
    // The apply sets the entries itself: no Update is recorded on top.
    let registry = &registry.without_field_manager();
    let apply = |live: Option<&T>| -> anyhow::Result<T> {
        let live = live
            .map(serde_json::to_value)
            .transpose()
            .context("encode the stored object")?;
        let stored = crate::apiserver::apply_stored(
            T::KIND,
            &how.manager,
            live,
            config.clone(),
            how.force,
        )
        .map_err(|e| {
            let advice = if e.starts_with("Apply failed") {
                " (take the fields with --force-conflicts, or leave them out of the manifest)"
            } else {
                ""
            };
            anyhow::anyhow!("{} {name:?}: {e}{advice}", T::RESOURCE)
        })?;
        let applied: T = serde_path_to_error::deserialize(&stored).map_err(|e| {
            anyhow::anyhow!(
                "{} {name:?}: the applied object does not decode: {e}",
                T::RESOURCE
            )
        })?;
        api::validate(&applied)?;
        Ok(applied)
    };
    for _ in 0..MAX_APPLY_ATTEMPTS {
        let live = match registry.get::<T>(namespace, name).await {
            Ok(live) => live,
            Err(StorageError::NotFound { .. }) => {
                let new = apply(None)?;
                match create_object(registry, &new).await {
                    Ok(()) => return Ok(Applied::ServerSide),
                    // Created by someone else since the read: apply to it instead.
                    Err(_) if registry.get::<T>(namespace, name).await.is_ok() => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(storage_error::<T>(e, name)),
        };
        let mut next = apply(Some(&live))?;
        let stored = live.metadata();
        next.metadata_mut().resource_version = stored.resource_version;
        next.metadata_mut().read_spec = stored.read_spec;
        if api::encode(&next)? == api::encode(&live)? {
            return Ok(Applied::ServerSide);
        }
        match update_object(registry, &next).await {
            Ok(()) => return Ok(Applied::ServerSide),
            Err(e) => match e.downcast_ref::<StorageError>() {
                Some(StorageError::Conflict { .. }) => {
                    tracing::debug!(object = %reference(&live), "apply conflict; reading again");
                }
                _ => return Err(e),
            },
        }
    }
    Err(kept_changing::<T>(name))
}

/// The error of an apply that met a conflict [`MAX_APPLY_ATTEMPTS`] times in a row.
fn kept_changing<T: Object>(name: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{} {name:?} kept changing while it was applied ({MAX_APPLY_ATTEMPTS} conflicts in a \
         row); try again",
        T::RESOURCE
    )
}

/// Creates `object` with `last_applied` as its last-applied annotation: `true` when
/// created, `false` when someone else created it since it was found missing (then it is
/// to be updated instead).
///
/// # Errors
/// The manifest names a resourceVersion (it is not found, so it cannot be that one), or
/// the create failing for another reason.
async fn create_applied<T: Object>(
    registry: &Registry,
    object: &T,
    last_applied: &str,
) -> anyhow::Result<bool> {
    let meta = object.metadata();
    let (namespace, name) = (meta.namespace.as_str(), meta.name.as_str());
    if let Some(rv) = meta.resource_version {
        anyhow::bail!(
            "{} {name:?} not found, but the manifest names its resourceVersion {rv}; \
             drop metadata.resourceVersion to create it",
            T::RESOURCE
        );
    }
    let mut new = object.clone();
    new.metadata_mut().annotations.insert(
        LAST_APPLIED_ANNOTATION.to_string(),
        last_applied.to_string(),
    );
    match create_object(registry, &new).await {
        Ok(()) => Ok(true),
        Err(_) if registry.get::<T>(namespace, name).await.is_ok() => Ok(false),
        Err(e) => Err(e),
    }
}

/// The object `apply` writes over `live`: the `applied` configuration merged in (against
/// the one `live` records as last applied), `last_applied` recorded, at `live`'s revision.
///
/// # Errors
/// The merge result does not decode as `T`, or is invalid.
fn merged_object<T: Object>(live: &T, applied: &Value, last_applied: &str) -> anyhow::Result<T> {
    let stored = live.metadata();
    let last: Option<Value> = stored
        .annotations
        .get(LAST_APPLIED_ANNOTATION)
        .and_then(|text| serde_json::from_str(text).ok());
    let mut merged = serde_json::to_value(live).context("encode the stored object")?;
    three_way_merge(&mut merged, last.as_ref(), applied);
    merged["metadata"]["annotations"][LAST_APPLIED_ANNOTATION] =
        Value::String(last_applied.to_string());
    let mut merged: T = serde_path_to_error::deserialize(&merged).map_err(|e| {
        anyhow::anyhow!(
            "{} {:?}: the manifest merged into the stored object does not decode: {e}",
            T::RESOURCE,
            stored.name
        )
    })?;
    merged.metadata_mut().resource_version = stored.resource_version;
    merged.metadata_mut().read_spec = stored.read_spec;
    api::validate(&merged)?;
    Ok(merged)
}

/// The part of a manifest that `apply` merges and records: the document without `status`
/// (the controllers' and kubelets', kept from the stored object), without the system
/// fields of `metadata` (resourceVersion, uid, creationTimestamp, generation: checked or
/// kept) and without the last-applied annotation itself.
fn applied_configuration(document: &Value) -> Value {
    let mut applied = document.clone();
    if let Some(object) = applied.as_object_mut() {
        object.shift_remove("status");
    }
    if let Some(meta) = applied.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["resourceVersion", "uid", "creationTimestamp", "generation"] {
            meta.shift_remove(field);
        }
        if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            annotations.shift_remove(LAST_APPLIED_ANNOTATION);
            if annotations.is_empty() {
                meta.shift_remove("annotations");
            }
        }
    }
    applied
}

/// Merges the `applied` configuration into `live` (kubectl apply's three-way merge, in
/// JSON merge-patch form): a value `applied` sets replaces `live`'s (objects are merged key
/// by key; arrays and scalars replaced whole); `null` removes; a key `last` (the
/// configuration applied before) set and `applied` no longer does is removed; anything
/// else `live` holds is kept.
pub fn three_way_merge(live: &mut Value, last: Option<&Value>, applied: &Value) {
    match (live.as_object_mut(), applied.as_object()) {
        (Some(live), Some(applied)) => {
            merge_objects(live, last.and_then(Value::as_object), applied)
        }
        _ => *live = without_nulls(applied),
    }
}

fn merge_objects(
    live: &mut Map<String, Value>,
    last: Option<&Map<String, Value>>,
    applied: &Map<String, Value>,
) {
    for key in last.into_iter().flat_map(Map::keys) {
        if !applied.contains_key(key) {
            live.shift_remove(key);
        }
    }
    for (key, value) in applied {
        let last = last.and_then(|last| last.get(key));
        match value {
            Value::Null => {
                live.shift_remove(key);
            }
            Value::Object(_) => three_way_merge(
                live.entry(key.clone())
                    .or_insert_with(|| Value::Object(Map::new())),
                last,
                value,
            ),
            _ => {
                live.insert(key.clone(), value.clone());
            }
        }
    }
}

/// `value` without the `null` members of its objects (a `null` in a manifest removes).
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[track_caller]
    fn check_merge(live: Value, last: Option<Value>, applied: Value, expected: Value) {
        let mut merged = live;
        three_way_merge(&mut merged, last.as_ref(), &applied);
        assert_eq!(merged, expected);
    }

    #[test]
    fn apply_sets_what_the_manifest_says_and_keeps_the_rest() {
        // First apply to an object made otherwise: nothing to remove.
        check_merge(
            json!({"metadata": {"name": "web", "uid": "u", "labels": {"a": "1", "b": "2"}},
                   "spec": {"replicas": 1, "selector": {"a": "1"}, "unknownField": true},
                   "status": {"replicas": 1}}),
            None,
            json!({"metadata": {"name": "web", "labels": {"a": "3"}}, "spec": {"replicas": 3}}),
            json!({"metadata": {"name": "web", "uid": "u", "labels": {"a": "3", "b": "2"}},
                   "spec": {"replicas": 3, "selector": {"a": "1"}, "unknownField": true},
                   "status": {"replicas": 1}}),
        );
    }

    #[test]
    fn a_field_dropped_since_the_last_apply_is_removed() {
        check_merge(
            json!({"metadata": {"labels": {"a": "1", "b": "2", "by-others": "x"}},
                   "spec": {"replicas": 2, "template": {"containers": [{"name": "c"}, {"name": "d"}]}}}),
            Some(json!({"metadata": {"labels": {"a": "1", "b": "2"}},
                        "spec": {"replicas": 2, "template": {"containers": [{"name": "c"}, {"name": "d"}]}}})),
            json!({"metadata": {"labels": {"a": "1"}},
                   "spec": {"template": {"containers": [{"name": "c"}]}}}),
            json!({"metadata": {"labels": {"a": "1", "by-others": "x"}},
                   "spec": {"template": {"containers": [{"name": "c"}]}}}),
        );
    }

    #[test]
    fn null_removes_and_objects_replace_scalars() {
        check_merge(
            json!({"a": 1, "b": {"c": 2}, "d": "x"}),
            None,
            json!({"a": null, "b": null, "d": {"e": null, "f": 1}, "g": {"h": null}}),
            json!({"d": {"f": 1}, "g": {}}),
        );
    }

    #[test]
    fn the_applied_configuration_leaves_out_status_and_system_fields() {
        let document = json!({
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "uid": "u", "resourceVersion": "5",
                "creationTimestamp": "t", "generation": 2,
                "annotations": {LAST_APPLIED_ANNOTATION: "{}"}, "labels": {"a": "b"}},
            "spec": {"containers": []},
            "status": {"phase": "Running"}
        });
        assert_eq!(
            applied_configuration(&document),
            json!({"kind": "Pod", "metadata": {"name": "p", "namespace": "default",
                "labels": {"a": "b"}}, "spec": {"containers": []}})
        );
    }
}
