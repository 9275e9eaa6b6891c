//! `DELETE` of an object and of a collection (kube-apiserver's
//! `endpoints/handlers/delete.go` and `registry/generic/registry/store.go` `Delete`,
//! `DeleteCollection`) with `DeleteOptions`: the preconditions (uid, resourceVersion), the
//! propagation policy through kcm's garbage collector and finalizers (the rule `kcm delete`
//! shares: `api::delete_write`), `gracePeriodSeconds` (a kind whose strategy deletes
//! gracefully, a pod: a running one is marked Terminating and its kubelet deletes it),
//! `dryRun`. Each object goes through the one store path's delete (`store::Store::delete`),
//! deciding on each value read with its strategy's delete hook (`Strategy::delete`). A
//! kind whose strategy says `return_deleted_object` (pods) answers with the object; other
//! kinds with a `Status` Success, or with the object while it waits for its finalizers.
//!
//! A ReplicationController is 2014's: its pods have no owner references, only its
//! selector (its strategy's `Dependents::Selector`). Deleting one (but with `Orphan`)
//! deletes the controller's key first, so that the replication manager, whose pod writes
//! carry the controller's incarnation in their transaction, can create no pod for it any
//! more; then it deletes every pod its selector matches that no other controller owns,
//! before answering. `Orphan` deletes the key only.
//! docs/departures.md has the row.

use std::time::SystemTime;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

use super::request::Query;
use super::store::{self, Store};
use super::strategy::{before_delete, PodSelector};
use super::write::{served, Writable};
use super::ApiState;
use crate::api::{controller_of, Cascade, DeleteWrite, Object, Pod, ResourceVersion};
use crate::apiserver::errors::ApiError;
use crate::apiserver::resources::Resource;
use crate::labels::Selector;
use crate::registry::{Deleted, Deletion};

/// What a `DeleteOptions` body and the query ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct DeleteOptions {
    pub cascade: Cascade,
    pub uid: Option<String>,
    pub resource_version: Option<ResourceVersion>,
    pub dry_run: bool,
    /// `gracePeriodSeconds` (pods): `None` takes the pod's own.
    pub grace_period_seconds: Option<i64>,
}

impl DeleteOptions {
    /// The body (`DeleteOptions`, possibly empty) and the query's own parameters.
    ///
    /// # Errors
    /// 400 for a body that is not DeleteOptions or an unknown policy.
    pub fn parse(body: &Value, query: &Query) -> Result<DeleteOptions, ApiError> {
        let field = |name: &str| {
            body.get(name)
                .filter(|v| !v.is_null())
                .cloned()
                .or_else(|| query.get(name).map(|v| Value::String(v.to_string())))
        };
        let cascade = match field("propagationPolicy").as_ref().and_then(Value::as_str) {
            Some("Background") => Cascade::Background,
            Some("Foreground") => Cascade::Foreground,
            Some("Orphan") => Cascade::Orphan,
            None | Some("") => match field("orphanDependents") {
                Some(Value::Bool(true)) => Cascade::Orphan,
                Some(Value::String(s)) if s == "true" => Cascade::Orphan,
                _ => Cascade::Background,
            },
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
                )))
            }
        };
        let precondition = |name: &str| {
            body.pointer(&format!("/preconditions/{name}"))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let resource_version = match precondition("resourceVersion") {
            Some(rv) => Some(rv.parse().map_err(|_| {
                ApiError::bad_request(format!(
                    "preconditions.resourceVersion: invalid value {rv:?}"
                ))
            })?),
            None => None,
        };
        let dry_run = match body.get("dryRun") {
            Some(Value::Array(values)) => values.iter().any(|v| v == "All"),
            _ => query.get("dryRun") == Some("All"),
        };
        let grace_period_seconds = match field("gracePeriodSeconds") {
            None => None,
            Some(Value::Number(n)) if n.is_i64() => n.as_i64(),
            Some(Value::String(s)) if s.parse::<i64>().is_ok() => s.parse().ok(),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "gracePeriodSeconds: invalid value {other}: must be an integer"
                )))
            }
        };
        Ok(DeleteOptions {
            cascade,
            uid: precondition("uid"),
            resource_version,
            dry_run,
            grace_period_seconds,
        })
    }
}

/// What a delete did to one object.
struct Outcome {
    /// The object as last stored, or as marked.
    object: Value,
    /// The key is gone (not just marked).
    deleted: bool,
}

/// `DELETE .../NAME`.
///
/// # Errors
/// 404, 409 (a precondition failed).
pub(super) async fn delete<T: Object>(
    state: &ApiState,
    writable: Writable,
    (namespace, name): (&str, &str),
    options: &DeleteOptions,
) -> Result<Response, ApiError> {
    let outcome = delete_one::<T>(state, writable, namespace, name, options).await?;
    if writable.strategy.return_deleted_object || !outcome.deleted {
        return Ok(super::json_response(StatusCode::OK, &outcome.object));
    }
    let uid = outcome
        .object
        .pointer("/metadata/uid")
        .cloned()
        .unwrap_or(Value::Null);
    Ok(super::json_response(
        StatusCode::OK,
        &deleted_status(writable.resource, name, uid),
    ))
}

/// The `Status` Success kube-apiserver answers a delete of an object that is gone
/// (`details.kind` is the resource).
pub(super) fn deleted_status(resource: &Resource, name: &str, uid: Value) -> Value {
    let mut details = json!({"name": name, "kind": resource.plural, "uid": uid});
    if !resource.group.is_empty() {
        details["group"] = json!(resource.group);
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}

/// `DELETE` of a collection (`?labelSelector=`): each object as [`delete`] deletes it;
/// answers the list of what was deleted or marked.
///
/// # Errors
/// 400 for a bad selector or a field selector; what a delete fails with.
pub(super) async fn delete_collection<T: Object>(
    state: &ApiState,
    writable: Writable,
    namespace: Option<&str>,
    query: &Query,
    options: &DeleteOptions,
) -> Result<Response, ApiError> {
    if query.get("fieldSelector").is_some_and(|f| !f.is_empty()) {
        return Err(ApiError::bad_request(
            "kcm does not delete collections by fieldSelector; use labelSelector",
        ));
    }
    let selector: Selector = query
        .get("labelSelector")
        .unwrap_or("")
        .parse()
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
    let list = state
        .registry
        .list::<T>(namespace, &selector)
        .await
        .map_err(|e| writable.store(state).error("", e))?;
    let mut items = Vec::new();
    for object in &list.items {
        let meta = object.metadata();
        match delete_one::<T>(state, writable, &meta.namespace, &meta.name, options).await {
            Ok(outcome) => items.push(outcome.object),
            // Gone meanwhile: someone else deleted it.
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let revision = list.resource_version;
    let resource = writable.resource;
    Ok(super::json_response(
        StatusCode::OK,
        &json!({
            "kind": resource.list_kind,
            "apiVersion": resource.api_version(),
            "metadata": {"resourceVersion": revision.to_string()},
            "items": items,
        }),
    ))
}

/// Deletes (or marks) one object through the one store path ([`Store::delete`]): each
/// value read is checked against the preconditions and given to its strategy's delete
/// hook (`Strategy::delete`), whose answer is written at the revision read.
async fn delete_one<T: Object>(
    state: &ApiState,
    writable: Writable,
    namespace: &str,
    name: &str,
    options: &DeleteOptions,
) -> Result<Outcome, ApiError> {
    let key = state.registry.key::<T>(namespace, name);
    let store = writable.store(state);
    let now = SystemTime::now();
    let mut last: Option<T> = None;
    let how = (options.dry_run, options.resource_version);
    let deleted = store
        .delete(&key, name, how, |raw| {
            let Some(raw) = raw else {
                return Err(writable.not_found(name));
            };
            let mut object: T = store::decode(state, &key, raw)?;
            check_preconditions(writable, &object, options)?;
            let (cascade, grace) = (options.cascade, options.grace_period_seconds);
            let write = writable.strategy.delete(&mut object, cascade, grace, now);
            let deletion = deletion(&write, &object)?;
            last = Some(object);
            Ok(deletion)
        })
        .await?;
    let mut object = last.expect("a delete decided on a value read");
    let gone = matches!(deleted, Deleted::Gone(_));
    // The answer carries the revision of the write, a delete's too (a client waiting
    // for its caches to see the delete waits for that revision).
    if let Deleted::Gone(raw) | Deleted::Written(raw) = &deleted {
        if !options.dry_run {
            object.metadata_mut().resource_version = Some(ResourceVersion(raw.mod_revision));
        }
    }
    if gone && !options.dry_run {
        if let Some(selector) = writable.strategy.selected_pods(options.cascade) {
            delete_selected_pods(state, writable, &object, selector).await?;
        }
    }
    Ok(Outcome {
        object: served(writable.kind(), &object),
        deleted: gone,
    })
}

/// The store's [`Deletion`] for a delete hook's answer about `object` (as marked).
fn deletion<T: Object>(write: &DeleteWrite, object: &T) -> Result<Deletion, ApiError> {
    Ok(match write {
        DeleteWrite::Delete => Deletion::Delete,
        DeleteWrite::Nothing => Deletion::Keep,
        DeleteWrite::Mark(_) => Deletion::Write(store::encode(object)?),
    })
}

fn check_preconditions<T: Object>(
    writable: Writable,
    object: &T,
    options: &DeleteOptions,
) -> Result<(), ApiError> {
    let meta = object.metadata();
    let failed = |what: &str, wanted: &str, found: &str| {
        ApiError::conflict_because(
            writable.resource.group,
            writable.resource.plural,
            &meta.name,
            &format!("Precondition failed: {what} in precondition: {wanted}, {what} in object meta: {found}"),
        )
    };
    if let Some(uid) = options.uid.as_deref().filter(|uid| *uid != meta.uid) {
        return Err(failed("UID", uid, &meta.uid));
    }
    if let Some(rv) = options
        .resource_version
        .filter(|rv| Some(*rv) != meta.resource_version)
    {
        let found = meta
            .resource_version
            .map(|r| r.to_string())
            .unwrap_or_default();
        return Err(failed("ResourceVersion", &rv.to_string(), &found));
    }
    Ok(())
}

/// After a 2014 ReplicationController's key is gone (its strategy's
/// `Dependents::Selector`): deletes every pod of its namespace its selector matches that
/// no other controller owns (what kubectl 1.0's reaper left behind none of, by scaling
/// to 0 first). The key went first, so the replication manager can create none of them
/// again: its creates compare the controller's incarnation.
async fn delete_selected_pods<T: Object>(
    state: &ApiState,
    writable: Writable,
    object: &T,
    selector: PodSelector,
) -> Result<(), ApiError> {
    let stored = serde_json::to_value(object).expect("a stored kind always encodes");
    let Some(selector) = selector(&stored)? else {
        return Ok(());
    };
    let meta = object.metadata();
    let pods = state
        .registry
        .list::<Pod>(Some(&meta.namespace), &selector)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    for pod in pods.items {
        let owned_elsewhere = controller_of(&pod.metadata)
            .is_some_and(|owner| owner.kind != writable.resource.kind || owner.uid != meta.uid);
        if owned_elsewhere {
            continue;
        }
        delete_pod(state, &pod).await?;
    }
    Ok(())
}

/// Deletes one pod as a background delete does (marked instead while it has finalizers),
/// through the one store path; a pod already gone is fine.
async fn delete_pod(state: &ApiState, pod: &Pod) -> Result<(), ApiError> {
    let (namespace, name) = (&pod.metadata.namespace, &pod.metadata.name);
    let key = state.registry.key::<Pod>(namespace, name);
    let pods = crate::apiserver::resources::find("", "v1", "pods").expect("pods are served");
    let store = Store {
        state,
        resource: pods,
    };
    let deleted = store
        .delete(&key, name, (false, None), |raw| {
            let Some(raw) = raw else {
                return Ok(Deletion::Keep);
            };
            let mut pod: Pod = store::decode(state, &key, raw)?;
            let write = before_delete(&mut pod, Cascade::Background);
            deletion(&write, &pod)
        })
        .await;
    match deleted {
        Err(e) if e.code == 404 => Ok(()),
        other => other.map(drop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::handlers::request::query;

    #[test]
    fn delete_options_come_from_the_body_or_the_query() {
        let parsed = DeleteOptions::parse(
            &json!({"propagationPolicy": "Orphan", "preconditions": {"uid": "u", "resourceVersion": "7"}, "dryRun": ["All"]}),
            &query(""),
        )
        .unwrap();
        assert_eq!(
            parsed,
            DeleteOptions {
                cascade: Cascade::Orphan,
                uid: Some("u".into()),
                resource_version: Some(ResourceVersion(7)),
                dry_run: true,
                grace_period_seconds: None,
            }
        );
        let graceful = DeleteOptions::parse(&json!({"gracePeriodSeconds": 0}), &query(""));
        assert_eq!(graceful.unwrap().grace_period_seconds, Some(0));
        let graceful = DeleteOptions::parse(&json!({}), &query("gracePeriodSeconds=5"));
        assert_eq!(graceful.unwrap().grace_period_seconds, Some(5));
        let defaults = DeleteOptions::parse(&Value::Null, &query("")).unwrap();
        assert_eq!(defaults.cascade, Cascade::Background);
        assert!(!defaults.dry_run);
        let from_query = DeleteOptions::parse(
            &json!({}),
            &query("propagationPolicy=Foreground&dryRun=All"),
        )
        .unwrap();
        assert_eq!(from_query.cascade, Cascade::Foreground);
        assert!(from_query.dry_run);
        let legacy = DeleteOptions::parse(&json!({"orphanDependents": true}), &query("")).unwrap();
        assert_eq!(legacy.cascade, Cascade::Orphan);
        assert_eq!(
            DeleteOptions::parse(&json!({"propagationPolicy": "Later"}), &query(""))
                .unwrap_err()
                .code,
            400
        );
    }
}
