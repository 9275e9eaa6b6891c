//! `POST` of a collection: create (kube-apiserver's `endpoints/handlers/create.go` and
//! `registry/generic/registry/store.go` `Create`): the path's namespace, `generateName`,
//! the defaults of the kind's strategy, kcm's validation, then the registry's
//! create-if-absent transaction (which also requires the namespace not terminating: 403
//! otherwise, as kube-apiserver's `NamespaceLifecycle` admission); 201 with the stored
//! object.

use axum::http::StatusCode;
use axum::response::Response;

use serde_json::Value;

use super::body::Decoded;
use super::documents::{create_in_namespace, namespace_condition};
use super::strategy::typed;
use super::write::{
    check_fields, name_from_path, resource_version_of, respond, served, validate, Writable,
    WriteOptions,
};
use super::ApiState;
use crate::api::{self, Object};
use crate::apiserver::convert;
use crate::apiserver::errors::ApiError;
use crate::registry::Registry;

/// How often a `generateName` create tries another name after hitting an existing one.
const GENERATE_NAME_ATTEMPTS: usize = 8;

/// `POST /api/v1/namespaces/NS/pods` and the like.
///
/// # Errors
/// 400 (a wrong kind, another namespace, a resourceVersion, no name), 409
/// `AlreadyExists`, 422 `Invalid`.
pub(super) async fn create<T: Object>(
    state: &ApiState,
    writable: Writable,
    namespace: &str,
    body: Decoded,
    options: WriteOptions,
) -> Result<Response, ApiError> {
    let warnings = check_fields(writable.resource.kind, &body, options.validation)?;
    let mut object = body.value;
    check_type(writable, &object)?;
    name_from_path(&mut object, namespace, None)?;
    if resource_version_of(&object)?.is_some() {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let generate = object
        .pointer("/metadata/generateName")
        .and_then(Value::as_str)
        .filter(|_| {
            object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        })
        .map(str::to_string);
    let mut attempts = 0;
    let stored = loop {
        attempts += 1;
        if let Some(prefix) = &generate {
            object["metadata"]["name"] = Value::String(super::write::generated_name(prefix));
        }
        let result = create_kind::<T>(state, writable, object.clone(), options.dry_run).await;
        match result {
            Err(e) if e.code == 409 && generate.is_some() && attempts < GENERATE_NAME_ATTEMPTS => {
                continue
            }
            other => break other?,
        }
    };
    Ok(respond(StatusCode::CREATED, &stored, &warnings))
}

/// `kind` and `apiVersion`, when the object states them, must be the resource's.
fn check_type(writable: Writable, object: &Value) -> Result<(), ApiError> {
    if !object.is_object() {
        return Err(ApiError::bad_request("the body is not a JSON object"));
    }
    let resource = writable.resource;
    let stated = |field: &str| object.get(field).and_then(Value::as_str).unwrap_or("");
    let (kind, api_version) = (stated("kind"), stated("apiVersion"));
    if (!kind.is_empty() && kind != resource.kind)
        || (!api_version.is_empty() && api_version != resource.api_version())
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) and the kind ({kind}) do not match the path's {}, Kind={}",
            resource.api_version(),
            resource.kind
        )));
    }
    Ok(())
}

async fn create_kind<T: Object>(
    state: &ApiState,
    writable: Writable,
    object: Value,
    dry_run: bool,
) -> Result<Value, ApiError> {
    let mut stored = convert::to_stored(writable.kind(), object);
    (writable.strategy.defaults)(&mut stored)?;
    let mut typed: T = typed(stored)?;
    // What the registry fills (kube-apiserver's `BeforeCreate` overwrites them too).
    let meta = typed.metadata_mut();
    meta.uid.clear();
    meta.creation_timestamp = None;
    meta.deletion_timestamp = None;
    meta.generation = 0;
    validate(writable, &typed, None)?;
    let name = typed.metadata().name.clone();
    let namespace = typed.metadata().namespace.clone();
    let created = if dry_run {
        namespace_condition(state, writable.resource, &namespace, &name).await?;
        match state.registry.get::<T>(&namespace, &name).await {
            Ok(_) => {
                let resource = writable.resource;
                return Err(ApiError::already_exists(
                    resource.group,
                    resource.plural,
                    &name,
                ));
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(writable.storage_error(&name, e)),
        }
        api::fill_system_fields(typed.metadata_mut());
        api::set_generation(None, &mut typed);
        typed.set_type_meta();
        typed
    } else {
        create_guarded(state, writable, &typed).await?
    };
    Ok(served(writable.kind(), &created))
}

/// Creates `object` in a transaction that also requires its namespace's Namespace as
/// read (absent, or there and not terminating: 403 otherwise).
async fn create_guarded<T: Object>(
    state: &ApiState,
    writable: Writable,
    object: &T,
) -> Result<T, ApiError> {
    let (namespace, name) = (&object.metadata().namespace, &object.metadata().name);
    let create = |registry: Registry| async move { registry.create(object).await };
    create_in_namespace(state, writable.resource, namespace, name, create)
        .await?
        .map_err(|e| writable.storage_error(name, e))
}

#[cfg(test)]
mod tests {
    #[test]
    fn generated_names_add_five_characters_of_the_alphabet() {
        let name = super::super::write::generated_name("web-");
        assert_eq!(name.len(), 9);
        assert!(name[4..]
            .chars()
            .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
    }
}
