//! Writes of the resources kcm stores as JSON documents in their served version, at
//! `{prefix}/{directory}/{name}` or `{prefix}/{directory}/{namespace}/{name}`:
//! Namespaces (create; update and patch; delete, which marks the namespace `Terminating`
//! for the namespace controller to empty and remove), Nodes (update and patch, as
//! `kubectl cordon` sends; delete), and the kinds other tools keep their state in:
//! ConfigMaps, Secrets, ServiceAccounts and Leases (every verb but `deletecollection`).
//! Kubernetes' generic store (`staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`)
//! with each kind's strategy (`pkg/registry/core/{configmap,secret,serviceaccount}/strategy.go`,
//! `pkg/registry/coordination/lease/strategy.go`: here one file each under `documents/`),
//! `pkg/registry/core/namespace/storage` (`Delete` sets `deletionTimestamp` and phase
//! Terminating while `spec.finalizers` holds `kubernetes`) and
//! `pkg/registry/core/node/strategy.go`; the refusal to create in a terminating
//! namespace is the `NamespaceLifecycle` admission plugin's.
//!
//! Invariants: every write is one compare-and-swap on the document's `mod_revision`
//! (read again after another writer came between, unless the request stated a
//! resourceVersion: then 409); a write keeps every field it does not change, and
//! `uid`, `creationTimestamp`, `deletionTimestamp` and the status as stored; nothing is
//! written under `dryRun=All` or when a check fails.

use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use super::body::Decoded;
use super::delete::{deleted_status, DeleteOptions};
use super::read::{namespaces, SYSTEM_NAMESPACES};
use super::request::{Query, Target};
use super::update::{apply_patch, keep_part, Part};
use super::write::{check_fields, name_from_path, resource_version_of, respond, WriteOptions};
use super::ApiState;
use crate::api::{self, ResourceVersion};
use crate::apiserver::errors::{qualified, ApiError, Cause};
use crate::apiserver::resources::Resource;
use crate::apiserver::validation;
use crate::registry::{KeyCondition, RawValue, Registry, StorageError};

mod configmap;
mod lease;
mod secret;
mod strategy;

use strategy::Strategy;

/// The strategy of `kind`: a kind's file under `documents/`, else stored as sent.
fn strategy_of(kind: &str) -> &'static Strategy {
    match kind {
        "ConfigMap" => &configmap::STRATEGY,
        "Secret" => &secret::STRATEGY,
        "Lease" => &lease::STRATEGY,
        _ => &strategy::DEFAULT,
    }
}

/// How often a namespace's delete reads again after another writer came between its
/// read and its write (when the request stated no resourceVersion).
const ATTEMPTS: usize = 10;

/// The documents of one resource (in one namespace, for a namespaced one).
#[derive(Clone, Copy)]
struct Documents<'a> {
    state: &'a ApiState,
    resource: &'static Resource,
    directory: &'static str,
    /// The request's namespace; "" for a cluster-scoped resource.
    namespace: &'a str,
    strategy: &'static Strategy,
}

impl Documents<'_> {
    fn key(&self, name: &str) -> String {
        let prefix = self.state.registry.prefix();
        if self.resource.namespaced {
            format!("{prefix}/{}/{}/{name}", self.directory, self.namespace)
        } else {
            format!("{prefix}/{}/{name}", self.directory)
        }
    }

    fn not_found(&self, name: &str) -> ApiError {
        ApiError::not_found(self.resource.group, self.resource.plural, name)
    }

    fn conflict(&self, name: &str) -> ApiError {
        ApiError::conflict(self.resource.group, self.resource.plural, name)
    }

    /// The stored document as served (kind, apiVersion, resourceVersion set) and its
    /// revision.
    async fn read(&self, name: &str) -> Result<(Value, ResourceVersion), ApiError> {
        let raw = self
            .state
            .registry
            .get_raw(&self.key(name))
            .await
            .map_err(|e| ApiError::unavailable(e.to_string()))?
            .ok_or_else(|| self.not_found(name))?;
        self.decode(name, &raw)
    }

    /// A stored value of the document `name` as served, and its revision.
    fn decode(&self, name: &str, raw: &RawValue) -> Result<(Value, ResourceVersion), ApiError> {
        let mut object: Value = serde_json::from_slice(&raw.value).map_err(|e| {
            ApiError::internal(format!("{} {name}: not JSON: {e}", self.resource.plural))
        })?;
        if !object.is_object() {
            return Err(ApiError::internal(format!(
                "{} {name}: not a JSON object",
                self.resource.plural
            )));
        }
        let rv = ResourceVersion(raw.mod_revision);
        Ok((self.served(object.take(), rv), rv))
    }

    fn served(&self, mut object: Value, rv: ResourceVersion) -> Value {
        object["kind"] = json!(self.resource.kind);
        object["apiVersion"] = json!(self.resource.api_version());
        if !object["metadata"].is_object() {
            object["metadata"] = json!({});
        }
        if self.resource.namespaced {
            object["metadata"]["namespace"] = json!(self.namespace);
        }
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        object
    }

    /// 422 `Invalid` naming each of `causes`, if any.
    fn check(&self, name: &str, causes: Vec<Cause>) -> Result<(), ApiError> {
        if causes.is_empty() {
            return Ok(());
        }
        Err(ApiError::invalid(
            self.resource.group,
            self.resource.kind,
            name,
            causes,
        ))
    }
}

/// The served document without what is not stored (its resourceVersion and namespace).
fn stored_bytes(served: &Value) -> Vec<u8> {
    let mut stored = served.clone();
    if let Some(metadata) = stored.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.shift_remove("resourceVersion");
        metadata.shift_remove("namespace");
    }
    serde_json::to_vec(&stored).expect("a JSON value always encodes")
}

/// `POST`, `PUT`, `PATCH` and `DELETE` of the documents.
///
/// # Errors
/// 405 for a verb the resource does not serve; what each write answers.
pub(super) async fn write(
    state: &ApiState,
    method: &Method,
    target: &Target,
    directory: &'static str,
    (query, headers): (&Query, &HeaderMap),
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let resource = target.resource;
    let namespace = match (resource.namespaced, target.namespace.as_deref()) {
        (true, Some(namespace)) => namespace,
        (false, _) => "",
        // A namespaced kind is written in a namespace.
        (true, None) => {
            let what = qualified(resource.group, resource.plural);
            return Err(ApiError::method_not_allowed(method.as_str(), &what));
        }
    };
    let docs = Documents {
        state,
        resource,
        directory,
        namespace,
        strategy: strategy_of(resource.kind),
    };
    if target.subresource.is_some() {
        return Err(ApiError::no_route());
    }
    let verb = match (method.clone(), target.name.is_some()) {
        (Method::POST, false) => "create",
        (Method::PUT, true) => "update",
        (Method::PATCH, true) => "patch",
        (Method::DELETE, true) => "delete",
        _ => "",
    };
    if !resource.verbs.contains(&verb) {
        let what = qualified(resource.group, resource.plural);
        return Err(ApiError::method_not_allowed(method.as_str(), &what));
    }
    let options = WriteOptions::parse(query)?;
    let name = target.name.as_deref().unwrap_or("");
    match verb {
        "create" => {
            let (_, decoded) = super::read_body(headers, body, false).await?;
            if resource.plural == "namespaces" {
                create_namespace(docs, decoded, options).await
            } else {
                create_document(docs, decoded, options).await
            }
        }
        "update" => {
            let (_, decoded) = super::read_body(headers, body, false).await?;
            let warnings = check_fields(resource.kind, &decoded, options.validation)?;
            let written = decoded.value;
            if !written.is_object() {
                return Err(ApiError::bad_request("the body is not a JSON object"));
            }
            let mut change = |current: &Value| Ok(keep_part(current, written.clone(), Part::Main));
            let stored = update(docs, name, options.dry_run, &mut change).await?;
            Ok(respond(StatusCode::OK, &stored, &warnings))
        }
        "patch" => {
            let (body_type, decoded) = super::read_body(headers, body, true).await?;
            let patch = decoded.value;
            let mut change = |current: &Value| {
                let patched = apply_patch(body_type, resource.kind, current, &patch)?;
                Ok(keep_part(current, patched, Part::Main))
            };
            let stored = update(docs, name, options.dry_run, &mut change).await?;
            Ok(respond(StatusCode::OK, &stored, &[]))
        }
        _ => {
            let options = super::delete_options(headers, body, query).await?;
            if resource.plural == "namespaces" {
                delete_namespace(docs, name, &options).await
            } else {
                delete_document(docs, name, &options).await
            }
        }
    }
}

/// `POST /api/v1/namespaces`: a new Namespace, Active. The system namespaces exist
/// already (409); a namespace that only holds objects may be created.
async fn create_namespace(
    docs: Documents<'_>,
    body: Decoded,
    options: WriteOptions,
) -> Result<Response, ApiError> {
    let warnings = check_fields("Namespace", &body, options.validation)?;
    let object = body.value;
    if !object.is_object() {
        return Err(ApiError::bad_request("the body is not a JSON object"));
    }
    let stated = |field: &str| object.get(field).and_then(Value::as_str).unwrap_or("");
    if !matches!(stated("kind"), "" | "Namespace") || !matches!(stated("apiVersion"), "" | "v1") {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({}) and the kind ({}) do not match the path's v1, Kind=Namespace",
            stated("apiVersion"),
            stated("kind")
        )));
    }
    if resource_version_of(&object)?.is_some() {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    validate_namespace_name(&name)?;
    let mut causes = Vec::new();
    validation::check_document_metadata("Namespace", &object, &mut causes)?;
    docs.check(&name, causes)?;
    let (group, plural) = (docs.resource.group, docs.resource.plural);
    if SYSTEM_NAMESPACES.contains(&name.as_str()) {
        return Err(ApiError::already_exists(group, plural, &name));
    }
    let uid = uuid::Uuid::new_v4().to_string();
    let document = api::new_namespace(object, &name, &uid, &api::now_rfc3339());
    let key = docs.key(&name);
    let rv = if options.dry_run {
        match docs.read(&name).await {
            Ok(_) => return Err(ApiError::already_exists(group, plural, &name)),
            Err(e) if e.code == 404 => ResourceVersion(0),
            Err(e) => return Err(e),
        }
    } else {
        match docs
            .state
            .registry
            .create_raw(&key, stored_bytes(&document))
            .await
        {
            Ok(rv) => rv,
            Err(StorageError::AlreadyExists { .. }) => {
                return Err(ApiError::already_exists(group, plural, &name))
            }
            Err(e) => return Err(write_failed(e)),
        }
    };
    let mut served = docs.served(document, rv);
    if let Some(metadata) = served["metadata"]
        .as_object_mut()
        .filter(|_| options.dry_run)
    {
        metadata.shift_remove("resourceVersion");
    }
    Ok(respond(StatusCode::CREATED, &served, &warnings))
}

/// `POST` of a ConfigMap, Secret, ServiceAccount or Lease: the object as sent, its kind's
/// strategy applied (defaults, then validation: 422 naming each problem), `uid` and
/// `creationTimestamp` filled, created if absent (409 otherwise) in a transaction that
/// also requires its namespace not terminating (403).
async fn create_document(
    docs: Documents<'_>,
    body: Decoded,
    options: WriteOptions,
) -> Result<Response, ApiError> {
    let resource = docs.resource;
    let warnings = check_fields(resource.kind, &body, options.validation)?;
    let mut object = body.value;
    if !object.is_object() {
        return Err(ApiError::bad_request("the body is not a JSON object"));
    }
    let stated = |field: &str| {
        object
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (kind, api_version) = (stated("kind"), stated("apiVersion"));
    if !(kind.is_empty() || kind == resource.kind)
        || !(api_version.is_empty() || api_version == resource.api_version())
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) and the kind ({kind}) do not match the path's {}, Kind={}",
            resource.api_version(),
            resource.kind
        )));
    }
    if resource_version_of(&object)?.is_some() {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    name_from_path(&mut object, docs.namespace, None)?;
    let metadata = object["metadata"]
        .as_object_mut()
        .expect("name_from_path made metadata an object");
    let mut name = metadata
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if name.is_empty() {
        if let Some(prefix) = metadata.get("generateName").and_then(Value::as_str) {
            name = super::write::generated_name(prefix);
            metadata.insert("name".into(), json!(name));
        }
    }
    // What the store fills (kube-apiserver's `BeforeCreate` overwrites them too).
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "generation",
    ] {
        metadata.shift_remove(field);
    }
    metadata.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    metadata.insert("creationTimestamp".into(), json!(api::now_rfc3339()));
    let mut causes = Vec::new();
    if name.is_empty() {
        causes.push(Cause {
            reason: "FieldValueRequired",
            field: "metadata.name".to_string(),
            message: "Required value: name or generateName is required".to_string(),
        });
    } else if let Err(reason) = crate::labels::validate_dns_subdomain(&name) {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            field: "metadata.name".to_string(),
            message: format!("Invalid value: {name:?}: {reason}"),
        });
    }
    (docs.strategy.prepare)(&mut object)?;
    causes.extend((docs.strategy.validate)(&object, None));
    validation::check_document_metadata(resource.kind, &object, &mut causes)?;
    docs.check(&name, causes)?;
    let (group, plural) = (resource.group, resource.plural);
    let key = docs.key(&name);
    let rv = if options.dry_run {
        namespace_condition(docs.state, resource, docs.namespace, &name).await?;
        match docs.read(&name).await {
            Ok(_) => return Err(ApiError::already_exists(group, plural, &name)),
            Err(e) if e.code == 404 => ResourceVersion(0),
            Err(e) => return Err(e),
        }
    } else {
        let bytes = stored_bytes(&object);
        let create = |registry: Registry| {
            let (key, bytes) = (key.clone(), bytes.clone());
            async move { registry.create_raw(&key, bytes).await }
        };
        match create_in_namespace(docs.state, resource, docs.namespace, &name, create).await? {
            Ok(rv) => rv,
            Err(StorageError::AlreadyExists { .. }) => {
                return Err(ApiError::already_exists(group, plural, &name))
            }
            Err(e) => return Err(write_failed(e)),
        }
    };
    let mut served = docs.served(object, rv);
    if let Some(metadata) = served["metadata"]
        .as_object_mut()
        .filter(|_| options.dry_run)
    {
        metadata.shift_remove("resourceVersion");
    }
    Ok(respond(StatusCode::CREATED, &served, &warnings))
}

/// A failed etcd write: 413 when etcd refused it as larger than it accepts
/// ([`validation::too_large_for_etcd`]), else 503.
fn write_failed(error: StorageError) -> ApiError {
    match &error {
        StorageError::Etcd { message, .. } => validation::too_large_for_etcd(message),
        _ => None,
    }
    .unwrap_or_else(|| ApiError::unavailable(error.to_string()))
}

/// A namespace's name is a DNS label (kube-apiserver's `ValidateNamespaceName`).
fn validate_namespace_name(name: &str) -> Result<(), ApiError> {
    let problem = if name.is_empty() {
        Some("metadata.name: Required value: name or generateName is required".to_string())
    } else if let Err(reason) = crate::labels::validate_dns_subdomain(name) {
        Some(format!("metadata.name: Invalid value: {name:?}: {reason}"))
    } else if name.contains('.') || name.len() > 63 {
        Some(format!(
            "metadata.name: Invalid value: {name:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
        ))
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(message) => Err(ApiError::invalid(
            "",
            "Namespace",
            name,
            vec![crate::apiserver::errors::Cause {
                reason: "FieldValueInvalid",
                field: "metadata.name".to_string(),
                message: message
                    .split_once(": ")
                    .map_or(message.clone(), |(_, m)| m.to_string()),
            }],
        )),
    }
}

/// The one read-modify-write of a document: reads it, applies `change` to its served
/// form, checks what the result states (its name; its resourceVersion and uid as
/// preconditions), keeps the system fields, and writes it with the registry's
/// `guaranteed_update_raw` (one compare-and-swap; on a conflict with a writer that came
/// between, it reads again and applies `change` again, and then a stated
/// resourceVersion no longer matches: 409). Returns the stored document, served.
async fn update(
    docs: Documents<'_>,
    name: &str,
    dry_run: bool,
    change: &mut super::write::Change<'_>,
) -> Result<Value, ApiError> {
    let mut next_of = |current: &Value, rv: ResourceVersion| -> Result<Value, ApiError> {
        let mut next = change(current)?;
        if !next.is_object() {
            return Err(ApiError::bad_request("the result is not a JSON object"));
        }
        if !docs.resource.namespaced {
            if let Some(metadata) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.shift_remove("namespace");
            }
        }
        name_from_path(&mut next, docs.namespace, Some(name))?;
        if !docs.resource.namespaced {
            if let Some(metadata) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.shift_remove("namespace");
            }
        }
        let stated = resource_version_of(&next)?;
        if stated.is_some_and(|stated| stated != rv) {
            return Err(docs.conflict(name));
        }
        let uid = current.pointer("/metadata/uid").cloned();
        if let Some(stated_uid) = next.pointer("/metadata/uid").and_then(Value::as_str) {
            if !stated_uid.is_empty() && Some(&json!(stated_uid)) != uid.as_ref() {
                return Err(docs.conflict(name));
            }
        }
        for field in ["uid", "creationTimestamp", "deletionTimestamp"] {
            match current["metadata"].get(field) {
                Some(value) => next["metadata"][field] = value.clone(),
                None => {
                    if let Some(metadata) = next["metadata"].as_object_mut() {
                        metadata.shift_remove(field);
                    }
                }
            }
        }
        (docs.strategy.prepare)(&mut next)?;
        let mut causes = (docs.strategy.validate)(&next, Some(current));
        validation::check_document_metadata(docs.resource.kind, &next, &mut causes)?;
        docs.check(name, causes)?;
        Ok(docs.served(next, rv))
    };
    if dry_run {
        let (current, rv) = docs.read(name).await?;
        return next_of(&current, rv);
    }
    let mut last = None;
    let written = docs
        .state
        .registry
        .guaranteed_update_raw(&docs.key(name), |raw| {
            let (current, rv) = docs.decode(name, raw)?;
            let next = next_of(&current, rv)?;
            // An update that changes nothing writes nothing (and keeps the revision).
            let bytes = (next != current).then(|| stored_bytes(&next));
            last = Some(next);
            Ok(bytes)
        })
        .await;
    match written {
        Ok(raw) => {
            let next = last.expect("a written value was computed by the update");
            Ok(docs.served(next, ResourceVersion(raw.mod_revision)))
        }
        Err(e) => Err(storage_failed(docs, name, e)),
    }
}

/// The `preconditions` of a DeleteOptions against a served document.
fn check_preconditions(
    docs: Documents<'_>,
    name: &str,
    current: &Value,
    rv: ResourceVersion,
    options: &DeleteOptions,
) -> Result<(), ApiError> {
    let uid = current
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    let failed = |what: &str, wanted: &str, found: &str| {
        ApiError::conflict_because(
            docs.resource.group,
            docs.resource.plural,
            name,
            &format!("Precondition failed: {what} in precondition: {wanted}, {what} in object meta: {found}"),
        )
    };
    if let Some(wanted) = options.uid.as_deref().filter(|wanted| *wanted != uid) {
        return Err(failed("UID", wanted, uid));
    }
    if let Some(wanted) = options.resource_version.filter(|wanted| *wanted != rv) {
        return Err(failed(
            "ResourceVersion",
            &wanted.to_string(),
            &rv.to_string(),
        ));
    }
    Ok(())
}

/// `DELETE /api/v1/namespaces/NAME`: marks the Namespace Terminating (the namespace
/// controller deletes what it holds, then it) and answers it. A namespace that only
/// holds objects gets a Namespace, Terminating, so that it is emptied too. `default`,
/// `kube-system` and `kube-public` may not be deleted (403).
async fn delete_namespace(
    docs: Documents<'_>,
    name: &str,
    options: &DeleteOptions,
) -> Result<Response, ApiError> {
    let (group, plural) = (docs.resource.group, docs.resource.plural);
    if api::IMMORTAL_NAMESPACES.contains(&name) {
        return Err(ApiError::forbidden(
            group,
            plural,
            name,
            "this namespace may not be deleted",
        ));
    }
    let now = api::now_rfc3339();
    for _ in 0..ATTEMPTS {
        // The marked Namespace, and the revision it replaces (`None`: a namespace that
        // only held objects, whose Namespace is created marked).
        let (mut next, replaces) = match docs.read(name).await {
            Ok((current, rv)) => {
                check_preconditions(docs, name, &current, rv, options)?;
                if api::is_terminating(&current) {
                    return Ok(super::json_response(StatusCode::OK, &current));
                }
                (current, Some(rv))
            }
            Err(e) if e.code == 404 && namespaces(docs.state).iter().any(|n| n == name) => {
                let uid = super::stable_uid(&format!("namespace/{name}"));
                (api::new_namespace(json!({}), name, &uid, &now), None)
            }
            Err(e) => return Err(e),
        };
        api::start_terminating(&mut next, &now);
        if options.dry_run {
            return Ok(super::json_response(StatusCode::OK, &next));
        }
        let (key, bytes) = (docs.key(name), stored_bytes(&next));
        let registry = &docs.state.registry;
        let written = match replaces {
            Some(rv) => registry.update_raw(&key, rv, bytes).await,
            None => registry.create_raw(&key, bytes).await,
        }
        .map(|rv| docs.served(next, rv));
        match written {
            Ok(marked) => return Ok(super::json_response(StatusCode::OK, &marked)),
            Err(StorageError::Conflict { .. } | StorageError::AlreadyExists { .. })
                if options.resource_version.is_none() =>
            {
                continue
            }
            Err(StorageError::Conflict { .. }) => return Err(docs.conflict(name)),
            Err(e) => return Err(write_failed(e)),
        }
    }
    Err(docs.conflict(name))
}

/// `DELETE` of a Node or of a namespaced document: it goes at the revision read, with the
/// registry's `guaranteed_delete_raw` (read again after another writer came between,
/// unless the request stated a resourceVersion: then 409).
async fn delete_document(
    docs: Documents<'_>,
    name: &str,
    options: &DeleteOptions,
) -> Result<Response, ApiError> {
    let status_of = |current: &Value| {
        let uid = current
            .pointer("/metadata/uid")
            .cloned()
            .unwrap_or(Value::Null);
        deleted_status(docs.resource, name, uid)
    };
    if options.dry_run {
        let (current, rv) = docs.read(name).await?;
        check_preconditions(docs, name, &current, rv, options)?;
        return Ok(super::json_response(StatusCode::OK, &status_of(&current)));
    }
    let mut reads = 0;
    let deleted = docs
        .state
        .registry
        .guaranteed_delete_raw(&docs.key(name), |raw| {
            reads += 1;
            if reads > 1 && options.resource_version.is_some() {
                return Err(docs.conflict(name).into());
            }
            let (current, rv) = docs.decode(name, raw)?;
            check_preconditions(docs, name, &current, rv, options)?;
            Ok(())
        })
        .await;
    match deleted {
        Ok(raw) => {
            let (current, _) = docs.decode(name, &raw)?;
            Ok(super::json_response(StatusCode::OK, &status_of(&current)))
        }
        Err(e) => Err(storage_failed(docs, name, e)),
    }
}

/// The answer for a failed guaranteed write of the document `name`: 404, 409, what the
/// update or check refused with, else [`write_failed`].
fn storage_failed(docs: Documents<'_>, name: &str, error: StorageError) -> ApiError {
    match error {
        StorageError::NotFound { .. } => docs.not_found(name),
        StorageError::Update { source, .. } => match source.downcast::<ApiError>() {
            Ok(error) => error,
            Err(other) => ApiError::internal(format!("{other:#}")),
        },
        StorageError::Conflict { .. } => docs.conflict(name),
        other => write_failed(other),
    }
}

/// Runs `create` with a registry whose writes also require `namespace`'s Namespace as
/// read ([`namespace_condition`]: absent, or there and not terminating; 403 otherwise),
/// reading it again when the Namespace changed meanwhile. The create's own outcome is
/// the caller's to answer.
///
/// # Errors
/// 403 for a terminating namespace; 409 when it kept changing.
pub(super) async fn create_in_namespace<T, Fut>(
    state: &ApiState,
    resource: &Resource,
    namespace: &str,
    name: &str,
    create: impl Fn(Registry) -> Fut,
) -> Result<Result<T, StorageError>, ApiError>
where
    Fut: std::future::Future<Output = Result<T, StorageError>>,
{
    for _ in 0..NAMESPACE_ATTEMPTS {
        let condition = namespace_condition(state, resource, namespace, name).await?;
        match create(state.registry.with_conditions(vec![condition])).await {
            Err(StorageError::ConditionFailed { .. }) => continue,
            outcome => return Ok(outcome),
        }
    }
    Err(ApiError::conflict_because(
        resource.group,
        resource.plural,
        name,
        &format!("the namespace {namespace} kept changing; try again"),
    ))
}

/// How often a create reads its namespace again after it changed in between.
const NAMESPACE_ATTEMPTS: usize = 5;

/// What a create in `namespace` must also require, in its transaction: the namespace's
/// Namespace unchanged since read (or still absent), so no object lands in a namespace
/// that began terminating meanwhile.
///
/// # Errors
/// 403 `Forbidden` when the namespace is terminating (the `NamespaceLifecycle`
/// admission plugin's answer).
pub(super) async fn namespace_condition(
    state: &ApiState,
    resource: &Resource,
    namespace: &str,
    name: &str,
) -> Result<KeyCondition, ApiError> {
    let key = api::namespace_key(state.registry.prefix(), namespace);
    let raw = state
        .registry
        .get_raw(&key)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    let Some(raw) = raw else {
        return Ok(KeyCondition::Absent(key));
    };
    let document: Value = serde_json::from_slice(&raw.value).unwrap_or(Value::Null);
    if api::is_terminating(&document) {
        return Err(ApiError::forbidden(
            resource.group,
            resource.plural,
            name,
            &format!(
                "unable to create new content in namespace {namespace} because it is being terminated"
            ),
        ));
    }
    Ok(KeyCondition::At(key, raw.mod_revision))
}
