//! What every write of a typed kind shares: the resource written and its kind's strategy
//! ([`Writable`]), the conversion of a written object to its stored shape and back,
//! validation (kcm's own, as `kcm create`'s, with the strategy's pod spec check, answered
//! as 422 `Invalid`), `fieldValidation`, `dryRun`, and the one
//! read-modify-write every update, patch, status and scale write is
//! ([`update`]: the one store path's update, `store::Store::update`, one compare-and-swap
//! transaction on the key's `mod_revision`, with the request's preconditions checked
//! against each value read).
//!
//! Mirrors kube-apiserver's `registry/generic/registry/store.go` (`Create`, `Update`:
//! `GuaranteedUpdate` with `Preconditions`) and what every strategy's `PrepareForUpdate`
//! does (`metadata.uid`, `creationTimestamp`, `deletionTimestamp` and
//! `deletionGracePeriodSeconds` kept from the stored object; `generation` set here as
//! the registry sets it, `api::set_generation`); what one kind's does besides is in its strategy (`strategy/`).
//!
//! Invariants: nothing is written when a check fails or `dryRun=All` is asked; what is
//! stored keeps every field kcm does not model (the kinds keep unknown fields, and a
//! subtree whose served form did not change keeps its stored form exactly, so a label
//! patch never rewrites, and never bumps the generation of, a spec).

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::body::{Decoded, FieldValidation};
use super::managed::{self, Manager};
use super::request::Query;
use super::store::{self, Store};
use super::strategy::{self, typed, Strategy};
use super::ApiState;
use crate::api::{self, Object, ResourceVersion};
use crate::apiserver::convert::{self, Kind};
use crate::apiserver::errors::{ApiError, Cause};
use crate::apiserver::openapi::strict;
use crate::apiserver::resources::{Decode, Resource};
use crate::apiserver::validation;
use crate::registry::{Deletion, RawValue, StorageError};

/// The query parameters every write takes.
#[derive(Clone, Debug)]
pub(super) struct WriteOptions {
    /// `dryRun=All`: everything but the write.
    pub dry_run: bool,
    pub validation: FieldValidation,
    /// Who the write's fields go to (`fieldManager`, else the User-Agent), and `force`.
    pub manager: Manager,
}

impl WriteOptions {
    /// # Errors
    /// 400 for a `dryRun` other than `All`, a bad `fieldValidation` or `force`; 422 for a
    /// `fieldManager` kube-apiserver would refuse.
    pub fn parse(query: &Query, headers: &HeaderMap) -> Result<WriteOptions, ApiError> {
        let dry_run = match query.get("dryRun") {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "dryRun: Unsupported value: {other:?}: supported values: \"All\""
                )))
            }
        };
        Ok(WriteOptions {
            dry_run,
            validation: FieldValidation::parse(query.get("fieldValidation"))?,
            manager: Manager::parse(query, headers)?,
        })
    }
}

/// The resource a request writes: its served description, its stored kind and that
/// kind's strategy.
#[derive(Clone, Copy)]
pub(super) struct Writable {
    pub resource: &'static Resource,
    pub strategy: &'static Strategy,
}

impl Writable {
    /// # Errors
    /// 405 for a resource kcm serves read-only (namespaces, nodes, events).
    pub fn of(resource: &'static Resource, method: &str) -> Result<Writable, ApiError> {
        match resource.decode {
            Decode::Converted(kind) if resource.verbs.contains(&"create") => Ok(Writable {
                resource,
                strategy: strategy::of(kind),
            }),
            _ => Err(ApiError::method_not_allowed(
                method,
                &crate::apiserver::errors::qualified(resource.group, resource.plural),
            )),
        }
    }

    /// The kind stored behind the resource.
    pub fn kind(&self) -> Kind {
        self.strategy.kind
    }

    /// Its objects' store path.
    pub fn store<'a>(&self, state: &'a ApiState) -> Store<'a> {
        Store {
            state,
            resource: self.resource,
        }
    }

    /// Who a write through `subresource` is, as its entries record it.
    pub fn writer<'a>(
        &self,
        api_version: &'a str,
        manager: &'a Manager,
        subresource: &'static str,
    ) -> managed::Writer<'a> {
        managed::Writer {
            kind: self.resource.kind,
            api_version,
            manager: &manager.name,
            subresource,
        }
    }

    pub fn not_found(&self, name: &str) -> ApiError {
        ApiError::not_found(self.resource.group, self.resource.plural, name)
    }

    pub fn conflict(&self, name: &str) -> ApiError {
        ApiError::conflict(self.resource.group, self.resource.plural, name)
    }
}

/// An object as it is served (with its resourceVersion, when it has one).
pub(super) fn served<T: Object>(kind: Kind, object: &T) -> Value {
    let stored = serde_json::to_value(object).expect("a stored kind always encodes");
    convert::to_served(kind, stored)
}

/// kcm's validation (`api::validate`, as `kcm create`'s) and kube-apiserver's checks of
/// the metadata (annotations, finalizers) and of a pod spec's container list
/// ([`validation`]), as one 422 `Invalid` with a cause per field. `current` is the stored
/// object an update replaces: the container list is checked when the spec changes, so
/// that a pod stored before the check (by `kcm create`, which does not make it) can still
/// be labelled or have its status written.
pub(super) fn validate<T: Object>(
    writable: Writable,
    object: &T,
    current: Option<&T>,
) -> Result<(), ApiError> {
    let mut causes: Vec<Cause> = match api::validate(object) {
        Ok(()) => Vec::new(),
        Err(invalid) => invalid
            .errors
            .iter()
            // The object's own labels: `validation::check_typed_metadata` reports them in
            // kube-apiserver's words.
            .filter(|e| e.field != "metadata.labels" && !e.field.starts_with("metadata.labels."))
            .map(|e| Cause {
                reason: if e.message == "required" {
                    "FieldValueRequired"
                } else {
                    "FieldValueInvalid"
                },
                message: if e.message == "required" {
                    "Required value".to_string()
                } else {
                    format!("Invalid value: {}", e.message)
                },
                field: e.field.clone(),
            })
            .collect(),
    };
    validation::check_typed_metadata(object.metadata(), &mut causes);
    if let Some(check_pod_spec) = writable.strategy.check_pod_spec {
        if current.is_none_or(|current| !object.same_spec(current)) {
            let stored = serde_json::to_value(object).expect("a stored kind always encodes");
            check_pod_spec(&stored, &mut causes);
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        writable.resource.group,
        writable.resource.kind,
        &object.metadata().name,
        causes,
    ))
}

/// `fieldValidation` on a decoded body of `kind` (`Scale` for the scale subresource):
/// `Strict` refuses unknown fields (every field the served 1.32 schema of `kind` does not
/// have, at any depth: [`strict::unknown_fields`]) and duplicate fields with one 400 naming
/// each, `Warn` returns them as warnings, `Ignore` ignores them.
///
/// # Errors
/// 400 under `Strict`.
pub(super) fn check_fields(
    kind: &str,
    body: &Decoded,
    validation: FieldValidation,
) -> Result<Vec<String>, ApiError> {
    if validation == FieldValidation::Ignore {
        return Ok(Vec::new());
    }
    let unknown = strict::unknown_fields(kind, &body.value);
    let mut problems: Vec<String> = unknown
        .into_iter()
        .map(|path| format!("unknown field \"{path}\""))
        .collect();
    problems.extend(
        body.duplicates
            .iter()
            .map(|path| format!("duplicate field \"{path}\"")),
    );
    if validation == FieldValidation::Strict && !problems.is_empty() {
        return Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            problems.join(", ")
        )));
    }
    Ok(problems)
}

/// A write's answer: the object (or Status) with `code`, and a `Warning: 299` header per
/// warning, as kube-apiserver sends them.
pub(super) fn respond(code: StatusCode, value: &Value, warnings: &[String]) -> Response {
    let mut response = super::json_response(code, value);
    for warning in warnings {
        if let Ok(header) = HeaderValue::from_bytes(warning_header(warning).as_bytes()) {
            response.headers_mut().append("Warning", header);
        }
    }
    response.into_response()
}

/// One `Warning` header's value: code 299, no agent, the text as an HTTP quoted-string (a
/// backslash before each `"` and `\\`, as Go's `strconv.Quote` writes it and client-go's
/// `ParseWarningHeader` reads it), so kubectl prints `Warning: unknown field "spec.x"`
/// exactly as kube-apiserver's. Control characters, which a header cannot carry, become
/// spaces.
pub(super) fn warning_header(text: &str) -> String {
    let mut value = String::with_capacity(text.len() + 8);
    value.push_str("299 - \"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                value.push('\\');
                value.push(c);
            }
            c if c.is_control() => value.push(' '),
            c => value.push(c),
        }
    }
    value.push('"');
    value
}

/// The `generateName` a created object asks a name of, when it states no name.
pub(super) fn generate_name(object: &Value) -> Option<String> {
    let named = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .is_some_and(|name| !name.is_empty());
    object
        .pointer("/metadata/generateName")
        .and_then(Value::as_str)
        .filter(|_| !named)
        .map(str::to_string)
}

/// The `metadata.resourceVersion` an object names, if any.
pub(super) fn resource_version_of(object: &Value) -> Result<Option<ResourceVersion>, ApiError> {
    match object.pointer("/metadata/resourceVersion") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => s.parse().map(Some).map_err(|_| {
            ApiError::bad_request(format!("metadata.resourceVersion: invalid value {s:?}"))
        }),
        Some(other) => Err(ApiError::bad_request(format!(
            "metadata.resourceVersion: invalid value {other}: must be a string"
        ))),
    }
}

/// Checks the namespace and name a written object states against the path's (an absent
/// one takes the path's).
///
/// # Errors
/// 400 when they differ, as kube-apiserver's `rest.BeforeCreate` and `BeforeUpdate`.
pub(super) fn name_from_path(
    object: &mut Value,
    namespace: &str,
    name: Option<&str>,
) -> Result<(), ApiError> {
    let Some(metadata) = object
        .as_object_mut()
        .map(|o| o.entry("metadata").or_insert_with(|| serde_json::json!({})))
        .and_then(Value::as_object_mut)
    else {
        return Err(ApiError::bad_request("the object has no metadata object"));
    };
    match metadata.get("namespace").and_then(Value::as_str) {
        None | Some("") => {
            metadata.insert("namespace".into(), Value::String(namespace.to_string()));
        }
        Some(stated) if stated != namespace => {
            return Err(ApiError::bad_request(format!(
                "the namespace of the provided object does not match the namespace sent on the request ({stated:?} is not {namespace:?})"
            )))
        }
        Some(_) => {}
    }
    if let Some(name) = name {
        match metadata.get("name").and_then(Value::as_str) {
            None | Some("") => {
                metadata.insert("name".into(), Value::String(name.to_string()));
            }
            Some(stated) if stated != name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({stated}) does not match the name on the URL ({name})"
                )))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// How an update turns the current object (served) into the one to store (served).
pub(super) type Change<'a> = dyn FnMut(&Value) -> Result<Value, ApiError> + Send + 'a;

/// The one read-modify-write behind PUT, PATCH, `/status` and `/scale`: reads the object,
/// applies `change` to its served form, checks the preconditions the result states (its
/// `metadata.resourceVersion` must be the one read: a stale one is 409 `Conflict`; its
/// `uid` the stored one), keeps the system fields, validates, sets the generation, and
/// writes it with the one store path's [`Store::update`] (one compare-and-swap
/// transaction; on a conflict with a
/// writer that came between, it reads again and applies `change` again, and then a
/// stated resourceVersion no longer matches). With `dry_run` it stops before the write.
/// Returns the stored object, served.
///
/// # Errors
/// 404, 409, 400, 422, or what `change` returns.
pub(super) async fn update<T: Object>(
    state: &ApiState,
    writable: Writable,
    (namespace, name): (&str, &str),
    dry_run: bool,
    change: &mut Change<'_>,
) -> Result<Value, ApiError> {
    let key = state.registry.key::<T>(namespace, name);
    let mut last: Option<T> = None;
    let mut finalized = false;
    let step = |raw: &RawValue| -> Result<Option<Vec<u8>>, ApiError> {
        let current: T = store::decode(state, &key, raw)?;
        let mut next = changed(writable, &current, &mut *change)?;
        validate(writable, &next, Some(&current))?;
        api::set_generation(Some(&current), &mut next);
        let bytes = store::encode(&next)?;
        // An update that changes nothing writes nothing (and keeps the revision).
        let unchanged = bytes == store::encode(&current)?;
        finalized = deletes_during_update(current.metadata(), next.metadata());
        last = Some(if unchanged { current } else { next });
        Ok((!unchanged).then_some(bytes))
    };
    let stored = writable
        .store(state)
        .update(&key, name, dry_run, step)
        .await?;
    if finalized && !dry_run {
        // As kube-apiserver's store: the object goes once the update that removed its
        // last finalizer committed. Decided again on each value read: a writer that came
        // between (a status write, say) does not keep it, another incarnation or a
        // finalizer added back does.
        let uid = last.as_ref().map(|o| o.metadata().uid.clone());
        let finished = |raw: Option<&RawValue>| -> anyhow::Result<Deletion> {
            let Some(raw) = raw else {
                return Ok(Deletion::Keep);
            };
            let current: T = store::decode(state, &key, raw)?;
            let meta = current.metadata();
            let gone = Some(&meta.uid) == uid.as_ref()
                && meta.deletion_timestamp.is_some()
                && meta.finalizers.is_empty()
                && api::deletion_grace_period(meta).unwrap_or(0) <= 0;
            Ok(if gone {
                Deletion::Delete
            } else {
                Deletion::Keep
            })
        };
        match state.registry.guaranteed_delete_raw(&key, finished).await {
            Ok(_) | Err(StorageError::NotFound { .. }) => {}
            Err(e) => return Err(writable.store(state).error(name, e)),
        }
    }
    let mut object = last.expect("an update stepped on a value read");
    object.metadata_mut().resource_version = Some(ResourceVersion(stored.mod_revision));
    object.set_type_meta();
    Ok(served(writable.kind(), &object))
}

/// Whether an update from `old` to `new` deletes the object (kube-apiserver's
/// `ShouldDeleteDuringUpdate`): it was in deletion with finalizers, and the update removed
/// the last one. A pod in a graceful deletion (`deletionGracePeriodSeconds` above 0)
/// stays: its kubelet deletes it when its containers are gone.
pub(super) fn deletes_during_update(old: &api::ObjectMeta, new: &api::ObjectMeta) -> bool {
    old.deletion_timestamp.is_some()
        && !old.finalizers.is_empty()
        && new.finalizers.is_empty()
        && api::deletion_grace_period(new).unwrap_or(0) <= 0
}

/// `current` changed by `change`, with the preconditions checked and the system fields
/// and unchanged subtrees kept from `current`.
fn changed<T: Object>(
    writable: Writable,
    current: &T,
    change: &mut Change<'_>,
) -> Result<T, ApiError> {
    let meta = current.metadata();
    let old_stored = serde_json::to_value(current).expect("a stored kind always encodes");
    let old_served = convert::to_served(writable.kind(), old_stored.clone());
    let mut new_served = change(&old_served)?;
    name_from_path(&mut new_served, &meta.namespace, Some(&meta.name))?;
    if let Some(stated) = resource_version_of(&new_served)? {
        if Some(stated) != meta.resource_version {
            return Err(writable.conflict(&meta.name));
        }
    }
    match new_served.pointer("/metadata/uid").and_then(Value::as_str) {
        Some(uid) if !uid.is_empty() && uid != meta.uid => {
            return Err(ApiError::conflict_because(
                writable.resource.group,
                writable.resource.plural,
                &meta.name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta.uid
                ),
            ))
        }
        _ => {}
    }
    let mut new_stored = convert::to_stored(writable.kind(), new_served.clone());
    keep_unchanged(
        writable.strategy,
        &old_served,
        &new_served,
        &old_stored,
        &mut new_stored,
    );
    let mut next: T = typed(new_stored)?;
    let next_meta = next.metadata_mut();
    next_meta.uid = meta.uid.clone();
    next_meta.creation_timestamp = meta.creation_timestamp.clone();
    next_meta.deletion_timestamp = meta.deletion_timestamp.clone();
    let grace = api::DELETION_GRACE_PERIOD_FIELD;
    match meta.extra.get(grace) {
        Some(period) => next_meta.extra.insert(grace.to_string(), period.clone()),
        None => next_meta.extra.shift_remove(grace),
    };
    next_meta.generation = meta.generation;
    next_meta.resource_version = meta.resource_version;
    Ok(next)
}

/// Where the served form of a subtree did not change, the stored form is kept as it was:
/// the whole `spec` and `status`, and for the kinds whose strategy says so (their spec
/// holds a template: [`Strategy::keep_spec_fields`]) each field of the spec. So the
/// defaults the served form shows (`protocol: TCP`) are not written into a spec nobody
/// changed, and its generation stays.
fn keep_unchanged(
    strategy: &Strategy,
    old_served: &Value,
    new_served: &Value,
    old_stored: &Value,
    new_stored: &mut Value,
) {
    for field in ["spec", "status"] {
        if old_served.get(field) == new_served.get(field) {
            match old_stored.get(field) {
                Some(old) => new_stored[field] = old.clone(),
                None => {
                    if let Some(object) = new_stored.as_object_mut() {
                        object.shift_remove(field);
                    }
                }
            }
        }
    }
    if !strategy.keep_spec_fields {
        return;
    }
    let (Some(Value::Object(old_spec)), Some(Value::Object(new_spec))) =
        (old_served.get("spec"), new_served.get("spec"))
    else {
        return;
    };
    let Some(Value::Object(stored_spec)) = old_stored.get("spec") else {
        return;
    };
    for (key, old) in old_spec {
        if new_spec.get(key) == Some(old) {
            if let Some(stored) = stored_spec.get(key) {
                new_stored["spec"][key] = stored.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn removing_the_last_finalizer_of_an_object_in_deletion_deletes_it() {
        let meta = |deleting: bool, finalizers: &[&str], grace: Option<i64>| {
            let mut meta = api::ObjectMeta {
                deletion_timestamp: deleting.then(|| "2026-01-01T00:00:00Z".into()),
                finalizers: finalizers.iter().map(|f| f.to_string()).collect(),
                ..api::ObjectMeta::default()
            };
            if let Some(grace) = grace {
                meta.extra
                    .insert(api::DELETION_GRACE_PERIOD_FIELD.into(), json!(grace));
            }
            meta
        };
        let check = |old: api::ObjectMeta, new: api::ObjectMeta, deletes: bool| {
            assert_eq!(
                deletes_during_update(&old, &new),
                deletes,
                "{old:?} -> {new:?}"
            );
        };
        let fg = &["foregroundDeletion"][..];
        check(meta(true, fg, None), meta(true, &[], None), true);
        check(meta(true, fg, Some(0)), meta(true, &[], Some(0)), true);
        // One finalizer left, or not in deletion, or no finalizer to begin with.
        check(
            meta(true, &["a", "b"], None),
            meta(true, &["b"], None),
            false,
        );
        check(meta(false, fg, None), meta(false, &[], None), false);
        check(meta(true, &[], None), meta(true, &[], None), false);
        // A pod its kubelet is still terminating.
        check(meta(true, fg, Some(30)), meta(true, &[], Some(30)), false);
    }

    #[test]
    fn a_warning_is_quoted_as_kube_apiserver_quotes_it() {
        assert_eq!(
            warning_header(r#"unknown field "spec.replicaz""#),
            r#"299 - "unknown field \"spec.replicaz\"""#
        );
        assert_eq!(warning_header("a\\b\nc"), r#"299 - "a\\b c""#);
        // A header carries UTF-8 as it is.
        let header = warning_header("unknown field \"métadata\"");
        assert!(
            HeaderValue::from_bytes(header.as_bytes()).is_ok(),
            "{header}"
        );
    }

    fn rc(labels: Value, replicas: i64, protocol: Option<&str>) -> Value {
        let mut port = json!({"containerPort": 80});
        if let Some(protocol) = protocol {
            port["protocol"] = json!(protocol);
        }
        json!({"metadata": {"name": "web", "labels": labels},
               "spec": {"replicas": replicas, "selector": {"app": "web"},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "c", "image": "x",
                                                              "ports": [port]}]}}},
               "status": {"replicas": 1}})
    }

    #[test]
    fn what_a_write_leaves_unchanged_keeps_its_stored_form() {
        let kind = Kind::ReplicationController;
        let old_stored = rc(json!({}), 1, None);
        let old_served = convert::to_served(kind, old_stored.clone());
        assert_eq!(
            old_served.pointer("/spec/template/spec/containers/0/ports/0/protocol"),
            Some(&json!("TCP")),
            "served with the default"
        );
        // A label change: the spec is stored as it was, default-free.
        let mut new_served = old_served.clone();
        new_served["metadata"]["labels"] = json!({"tier": "front"});
        let mut new_stored = convert::to_stored(kind, new_served.clone());
        let strategy = strategy::of(kind);
        keep_unchanged(
            strategy,
            &old_served,
            &new_served,
            &old_stored,
            &mut new_stored,
        );
        assert_eq!(new_stored["spec"], old_stored["spec"]);
        assert_eq!(new_stored["metadata"]["labels"], json!({"tier": "front"}));
        // A scale: replicas changes, the template keeps its stored form.
        let mut scaled = old_served.clone();
        scaled["spec"]["replicas"] = json!(3);
        let mut new_stored = convert::to_stored(kind, scaled.clone());
        keep_unchanged(strategy, &old_served, &scaled, &old_stored, &mut new_stored);
        assert_eq!(new_stored["spec"]["replicas"], 3);
        assert_eq!(
            new_stored["spec"]["template"],
            old_stored["spec"]["template"]
        );
    }

    #[test]
    fn every_typed_row_is_written_with_its_kinds_strategy_and_events_are_not_written() {
        let mut typed = Vec::new();
        for resource in crate::apiserver::resources::RESOURCES {
            if let Decode::Converted(kind) = resource.decode {
                let writable = Writable::of(resource, "POST").unwrap_or_else(|_| {
                    panic!("{} is writable", resource.plural);
                });
                assert_eq!(writable.kind(), kind);
                assert_eq!(resource.kind, kind.kind_name());
                typed.push(kind);
            }
        }
        typed.sort_by_key(|kind| kind.kind_name());
        let mut all = Kind::ALL.to_vec();
        all.sort_by_key(|kind| kind.kind_name());
        assert_eq!(typed, all, "one row per typed kind");
        let events = crate::apiserver::resources::find("", "v1", "events").unwrap();
        assert_eq!(
            Writable::of(events, "POST").err().map(|e| e.code),
            Some(405)
        );
    }

    #[test]
    fn generate_name_counts_only_for_an_object_without_a_name() {
        let generated = json!({"metadata": {"generateName": "web-", "name": ""}});
        assert_eq!(generate_name(&generated).as_deref(), Some("web-"));
        let named = json!({"metadata": {"generateName": "web-", "name": "web"}});
        assert_eq!(generate_name(&named), None);
        assert_eq!(generate_name(&json!({"metadata": {}})), None);
    }

    #[test]
    fn a_written_object_takes_the_paths_namespace_and_name_or_is_refused() {
        let mut object = json!({"metadata": {}});
        name_from_path(&mut object, "default", Some("web")).unwrap();
        assert_eq!(
            object["metadata"],
            json!({"namespace": "default", "name": "web"})
        );
        let mut elsewhere = json!({"metadata": {"namespace": "other"}});
        assert_eq!(
            name_from_path(&mut elsewhere, "default", None)
                .unwrap_err()
                .code,
            400
        );
        let mut renamed = json!({"metadata": {"name": "other"}});
        assert_eq!(
            name_from_path(&mut renamed, "default", Some("web"))
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            resource_version_of(&json!({"metadata": {"resourceVersion": "12"}})).unwrap(),
            Some(ResourceVersion(12))
        );
        assert_eq!(resource_version_of(&json!({"metadata": {}})).unwrap(), None);
    }
}
