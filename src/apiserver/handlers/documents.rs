//! Writes of the resources kcm stores as JSON documents in their served version, at
//! `{prefix}/{directory}/{name}` or `{prefix}/{directory}/{namespace}/{name}`:
//! Namespaces (create; update and patch; delete, which marks the namespace `Terminating`
//! for the namespace controller to empty and remove), Nodes (update and patch, as
//! `kubectl cordon` sends; delete), and the kinds other tools keep their state in:
//! ConfigMaps, Secrets, ServiceAccounts and Leases (every verb but `deletecollection`).
//! Each write is turned into a pure step over the value read and handed to the one store
//! path every kind takes (`store`: Kubernetes' generic store,
//! `staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`), with each
//! kind's strategy (`pkg/registry/core/{configmap,secret,serviceaccount}/strategy.go`,
//! `pkg/registry/coordination/lease/strategy.go`, and the Namespace's delete override,
//! `pkg/registry/core/namespace/storage`: here one file each under `resources/`, named
//! by the kind's registry row) and
//! `pkg/registry/core/node/strategy.go`.
//!
//! Invariants: every write is one compare-and-swap on the document's `mod_revision`
//! (read again after another writer came between, unless the request stated a
//! resourceVersion: then 409); a write keeps every field it does not change, and
//! `uid`, `creationTimestamp`, `deletionTimestamp` and the status as stored; nothing is
//! written under `dryRun=All` or when a check fails.

use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use super::body::{BodyType, Decoded};
use super::delete::{deleted_status, DeleteOptions};
use super::managed;
use super::read::{namespaces, SYSTEM_NAMESPACES};
use super::request::{Query, Target};
use super::update::{apply_patch, keep_part, Part};
use super::write::{
    check_fields, generate_name, name_from_path, resource_version_of, respond, WriteOptions,
};
use super::ApiState;
use crate::api::{self, ResourceVersion};
use crate::apiserver::errors::{qualified, ApiError, Cause};
use crate::apiserver::resources::Resource;
use crate::apiserver::validation;
use crate::registry::{Deleted, Deletion, RawValue};

use super::store::{Prepared, Store};
use crate::apiserver::resources::strategy::{Instead, Strategy};

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

impl<'a> Documents<'a> {
    /// The one store path the documents' writes take.
    fn store(&self) -> Store<'a> {
        Store {
            state: self.state,
            resource: self.resource,
        }
    }

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
    (directory, strategy): (&'static str, &'static Strategy),
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
        strategy,
    };
    let part = match (target.subresource.as_deref(), target.name.as_deref()) {
        (None, _) => Part::Main,
        (Some("finalize"), Some(name)) if resource.plural == "namespaces" => {
            if *method != Method::PUT {
                return Err(ApiError::method_not_allowed(
                    method.as_str(),
                    "namespaces/finalize",
                ));
            }
            return finalize(docs, name, headers, body).await;
        }
        // `nodes/status`: the node lifecycle controller's marking, a kubelet's post.
        (Some("status"), Some(_)) if resource.subresource("status").is_some() => {
            if !matches!(*method, Method::PUT | Method::PATCH) {
                let what = format!("{}/status", qualified(resource.group, resource.plural));
                return Err(ApiError::method_not_allowed(method.as_str(), &what));
            }
            Part::Status
        }
        _ => return Err(ApiError::no_route()),
    };
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
    let options = WriteOptions::parse(query, headers)?;
    let name = target.name.as_deref().unwrap_or("");
    let api_version = resource.api_version();
    let writer = managed::Writer {
        kind: resource.kind,
        api_version: &api_version,
        manager: &options.manager.name,
        subresource: part.subresource(),
    };
    match verb {
        "create" => {
            let (_, decoded) = super::read_body(headers, body, false).await?;
            let warnings = check_fields(resource.kind, &decoded, options.validation)?;
            let object = decoded.value;
            let created = if resource.plural == "namespaces" {
                create_namespace(docs, object, Some(writer), options.dry_run).await?
            } else {
                create_document(docs, object, Some(writer), options.dry_run).await?
            };
            Ok(respond(StatusCode::CREATED, &created, &warnings))
        }
        "update" => {
            let (_, decoded) = super::read_body(headers, body, false).await?;
            let warnings = check_fields(resource.kind, &decoded, options.validation)?;
            let written = decoded.value;
            if !written.is_object() {
                return Err(ApiError::bad_request("the body is not a JSON object"));
            }
            let mut change = |current: &Value| {
                let mut next = keep_part(current, written.clone(), part);
                managed::record(writer, Some(current), &mut next);
                Ok(next)
            };
            let stored = update(docs, name, options.dry_run, &mut change).await?;
            Ok(respond(StatusCode::OK, &stored, &warnings))
        }
        "patch" => {
            let (body_type, decoded) = super::read_body(headers, body, true).await?;
            if body_type == BodyType::ApplyPatch {
                return apply(docs, (name, part), writer, decoded, &options).await;
            }
            options.manager.check_patch(false)?;
            let patch = decoded.value;
            let mut change = |current: &Value| {
                let patched = apply_patch(body_type, resource.kind, current, &patch)?;
                let mut next = keep_part(current, patched, part);
                managed::record(writer, Some(current), &mut next);
                Ok(next)
            };
            let stored = update(docs, name, options.dry_run, &mut change).await?;
            Ok(respond(StatusCode::OK, &stored, &[]))
        }
        _ => {
            let options = super::delete_options(headers, body, query).await?;
            delete(docs, name, &options).await
        }
    }
}

/// `PUT namespaces/{name}/finalize` (kube-apiserver's `FinalizeREST`): the Namespace's
/// `spec.finalizers` become the ones sent; nothing else changes. The namespace controller
/// removes `kubernetes` this way once the namespace is empty, then deletes it.
async fn finalize(
    docs: Documents<'_>,
    name: &str,
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let (_, decoded) = super::read_body(headers, body, false).await?;
    let finalizers = decoded
        .value
        .pointer("/spec/finalizers")
        .cloned()
        .unwrap_or_else(|| json!([]));
    if !finalizers.is_array() {
        return Err(ApiError::bad_request("spec.finalizers is not a list"));
    }
    let stated = decoded.value.pointer("/metadata/resourceVersion").cloned();
    let mut change = |current: &Value| {
        let mut next = current.clone();
        next["spec"]["finalizers"] = finalizers.clone();
        if let Some(rv) = &stated {
            next["metadata"]["resourceVersion"] = rv.clone();
        }
        Ok(next)
    };
    let stored = update(docs, name, false, &mut change).await?;
    Ok(respond(StatusCode::OK, &stored, &[]))
}

/// A server-side apply of a document's `part` ([`managed::apply`]); an apply to a document
/// that does not exist creates it (201), where the resource serves `create` and the apply
/// is not to the status.
async fn apply(
    docs: Documents<'_>,
    (name, part): (&str, Part),
    writer: managed::Writer<'_>,
    body: Decoded,
    options: &WriteOptions,
) -> Result<Response, ApiError> {
    options.manager.check_patch(true)?;
    let warnings = check_fields(docs.resource.kind, &body, options.validation)?;
    let mut config = body.value;
    managed::check_config(writer, &config)?;
    name_from_path(&mut config, docs.namespace, Some(name))?;
    if !docs.resource.namespaced {
        if let Some(metadata) = config.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.shift_remove("namespace");
        }
    }
    let force = options.manager.force;
    let mut change = |current: &Value| {
        let applied = managed::apply(writer, Some(current), &config, force)?;
        Ok(keep_part(current, applied, part))
    };
    match update(docs, name, options.dry_run, &mut change).await {
        Ok(stored) => Ok(respond(StatusCode::OK, &stored, &warnings)),
        Err(missing)
            if missing.code == 404
                && part == Part::Main
                && docs.resource.verbs.contains(&"create") =>
        {
            if let Some(uid) = config.pointer("/metadata/uid").and_then(Value::as_str) {
                return Err(ApiError::conflict_because(
                    docs.resource.group,
                    docs.resource.plural,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: "
                    ),
                ));
            }
            let object = managed::apply(writer, None, &config, force)?;
            let created = if docs.resource.plural == "namespaces" {
                create_namespace(docs, object, None, options.dry_run).await?
            } else {
                create_document(docs, object, None, options.dry_run).await?
            };
            Ok(respond(StatusCode::CREATED, &created, &warnings))
        }
        Err(other) => Err(other),
    }
}

/// `POST /api/v1/namespaces`: a new Namespace, Active. The system namespaces exist
/// already (409); a namespace that only holds objects may be created. Its creator `writer`
/// owns its fields (an Update); `None` when an apply made its entries.
async fn create_namespace(
    docs: Documents<'_>,
    object: Value,
    writer: Option<managed::Writer<'_>>,
    dry_run: bool,
) -> Result<Value, ApiError> {
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
    let mut document = api::new_namespace(object, &name, &uid, &api::now_rfc3339());
    if let Some(writer) = writer {
        managed::record(writer, None, &mut document);
    }
    let prepared = |_| {
        Ok(Prepared {
            name: name.clone(),
            key: docs.key(&name),
            value: stored_bytes(&document),
            object: (),
        })
    };
    let ((), rv) = docs.store().create("", dry_run, None, prepared).await?;
    Ok(created(docs, document, rv))
}

/// A created document as served: at the revision of its create, without a
/// resourceVersion under `dryRun`.
fn created(docs: Documents<'_>, document: Value, rv: Option<ResourceVersion>) -> Value {
    let mut served = docs.served(document, rv.unwrap_or(ResourceVersion(0)));
    if let Some(metadata) = served["metadata"].as_object_mut().filter(|_| rv.is_none()) {
        metadata.shift_remove("resourceVersion");
    }
    served
}

/// `POST` of a ConfigMap, Secret, ServiceAccount or Lease: the object as sent, its kind's
/// strategy applied (defaults, then validation: 422 naming each problem), `uid` and
/// `creationTimestamp` filled, created if absent (409 otherwise) in a transaction that
/// also requires its namespace not terminating (403). Its creator `writer` owns its
/// fields (an Update); `None` when an apply made its entries.
async fn create_document(
    docs: Documents<'_>,
    mut object: Value,
    writer: Option<managed::Writer<'_>>,
    dry_run: bool,
) -> Result<Value, ApiError> {
    let resource = docs.resource;
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
    let generate = generate_name(&object);
    let prepare = |generated: Option<String>| {
        let mut object = object.clone();
        let name = prepare_for_create(docs, &mut object, generated)?;
        if let Some(writer) = writer {
            managed::record(writer, None, &mut object);
        }
        Ok(Prepared {
            key: docs.key(&name),
            name,
            value: stored_bytes(&object),
            object,
        })
    };
    let store = docs.store();
    let (object, rv) = store
        .create(docs.namespace, dry_run, generate.as_deref(), prepare)
        .await?;
    Ok(created(docs, object, rv))
}

/// A document to create, as stored: `generated` its name when `generateName` gave one,
/// the fields the store fills cleared and filled (kube-apiserver's `BeforeCreate`
/// overwrites them too), its kind's strategy applied and validated. Returns its name.
///
/// # Errors
/// 400 for a body its strategy cannot take, 422 `Invalid` naming each problem.
fn prepare_for_create(
    docs: Documents<'_>,
    object: &mut Value,
    generated: Option<String>,
) -> Result<String, ApiError> {
    let metadata = object["metadata"]
        .as_object_mut()
        .expect("name_from_path made metadata an object");
    if let Some(generated) = generated {
        metadata.insert("name".into(), json!(generated));
    }
    let name = metadata
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
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
    (docs.strategy.prepare)(object)?;
    causes.extend((docs.strategy.validate)(object, None));
    validation::check_document_metadata(docs.resource.kind, object, &mut causes)?;
    docs.check(&name, causes)?;
    Ok(name)
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
/// preconditions), keeps the system fields, and writes it with the one store path's
/// [`Store::update`] (one compare-and-swap; on a conflict with a writer that came
/// between, it reads again and applies `change` again, and then a stated
/// resourceVersion no longer matches: 409). Returns the stored document, served.
async fn update(
    docs: Documents<'_>,
    name: &str,
    dry_run: bool,
    change: &mut super::write::Change<'_>,
) -> Result<Value, ApiError> {
    let mut last = None;
    let step = |raw: &RawValue| {
        let (current, rv) = docs.decode(name, raw)?;
        let current = &current;
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
        let next = docs.served(next, rv);
        // An update that changes nothing writes nothing (and keeps the revision).
        let bytes = (&next != current).then(|| stored_bytes(&next));
        last = Some(next);
        Ok(bytes)
    };
    let written = docs
        .store()
        .update(&docs.key(name), name, dry_run, step)
        .await?;
    let next = last.expect("an update stepped on a value read");
    Ok(docs.served(next, ResourceVersion(written.mod_revision)))
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

/// `DELETE` of a document through the one store path ([`Store::delete`]): each value
/// read is checked against the preconditions, then its kind's delete hook
/// ([`Strategy::delete`]) says what to write instead of deleting it (a Namespace is
/// marked Terminating, for the namespace controller to empty and remove; one that only
/// holds objects gets a Namespace, Terminating, so that it is emptied too); without a
/// hook it goes at the revision read. Answers a `Status` Success once the key is gone,
/// else the object as written or left.
async fn delete(
    docs: Documents<'_>,
    name: &str,
    options: &DeleteOptions,
) -> Result<Response, ApiError> {
    let now = api::now_rfc3339();
    let mut last = None;
    let decide = |raw: Option<&RawValue>| {
        let current = match raw {
            Some(raw) => Some(docs.decode(name, raw)?),
            None => None,
        };
        let Some(hook) = docs.strategy.delete else {
            let (current, rv) = current.ok_or_else(|| docs.not_found(name))?;
            check_preconditions(docs, name, &current, rv, options)?;
            last = Some(current);
            return Ok(Deletion::Delete);
        };
        // A name in use by objects stands for a document the hook may write.
        if current.is_none() && !namespaces(docs.state).iter().any(|n| n == name) {
            return Err(docs.not_found(name));
        }
        let read = current.as_ref().map(|(current, _)| current.clone());
        let instead = hook(name, read.clone(), &now)?;
        if let Some((current, rv)) = &current {
            check_preconditions(docs, name, current, *rv, options)?;
        }
        Ok(match instead {
            Instead::Keep(kept) => {
                last = Some(kept);
                Deletion::Keep
            }
            Instead::Write(next) => {
                let bytes = stored_bytes(&next);
                last = Some(next);
                Deletion::Write(bytes)
            }
            Instead::Delete => {
                last = read;
                Deletion::Delete
            }
        })
    };
    let how = (options.dry_run, options.resource_version);
    let deleted = docs
        .store()
        .delete(&docs.key(name), name, how, decide)
        .await?;
    let object = last.expect("a delete decided on a value read");
    let answer = match deleted {
        Deleted::Gone(_) => {
            let uid = object
                .pointer("/metadata/uid")
                .cloned()
                .unwrap_or(Value::Null);
            deleted_status(docs.resource, name, uid)
        }
        Deleted::Written(raw) if !options.dry_run => {
            docs.served(object, ResourceVersion(raw.mod_revision))
        }
        Deleted::Written(_) | Deleted::Kept(_) => object,
    };
    Ok(super::json_response(StatusCode::OK, &answer))
}
