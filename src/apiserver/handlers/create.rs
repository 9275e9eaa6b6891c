//! `POST` of a collection: create (kube-apiserver's `endpoints/handlers/create.go` and
//! `registry/generic/registry/store.go` `Create`): the path's namespace, `generateName`,
//! the defaults of the kind's strategy, kcm's validation, then the one store path's
//! create (`store::Store::create`: a create-if-absent transaction that also requires the
//! namespace not terminating, 403 otherwise, as kube-apiserver's `NamespaceLifecycle`
//! admission; another name after a `generateName` collision); 201 with the stored object.

use axum::http::StatusCode;
use axum::response::Response;

use serde_json::Value;

use super::body::Decoded;
use super::managed;
use super::store::{self, Prepared};
use super::strategy::typed;
use super::write::{
    check_fields, generate_name, name_from_path, resource_version_of, respond, served, validate,
    Writable, WriteOptions,
};
use super::ApiState;
use crate::api::{self, Object};
use crate::apiserver::convert;
use crate::apiserver::errors::ApiError;

/// `POST /api/v1/namespaces/NS/pods` and the like.
///
/// # Errors
/// 400 (a wrong kind, another namespace, a resourceVersion, no name), 403 (a terminating
/// namespace), 409 `AlreadyExists`, 422 `Invalid`.
pub(super) async fn create<T: Object>(
    state: &ApiState,
    writable: Writable,
    namespace: &str,
    body: Decoded,
    options: WriteOptions,
) -> Result<Response, ApiError> {
    let warnings = check_fields(writable.resource.kind, &body, options.validation)?;
    let created = create_object::<T>(
        state,
        writable,
        namespace,
        body.value,
        options,
        Track::Update,
    )
    .await?;
    Ok(respond(StatusCode::CREATED, &created, &warnings))
}

/// Who owns a created object's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Track {
    /// The creator, as an Update (a POST).
    Update,
    /// As the object states: a server-side apply made its entries.
    Applied,
}

/// Creates `object` (served); returns it as stored, served.
///
/// # Errors
/// As [`create`].
pub(super) async fn create_object<T: Object>(
    state: &ApiState,
    writable: Writable,
    namespace: &str,
    mut object: Value,
    options: WriteOptions,
    track: Track,
) -> Result<Value, ApiError> {
    check_type(writable, &object)?;
    name_from_path(&mut object, namespace, None)?;
    if resource_version_of(&object)?.is_some() {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let generate = generate_name(&object);
    let api_version = writable.resource.api_version();
    let writer = writable.writer(&api_version, &options.manager, "");
    // Each attempt of a `generateName` create prepares a copy; the only attempt of
    // another takes the body itself.
    let mut body = Some(object);
    let prepare = |name: Option<String>| {
        let mut object = match (&name, body.as_ref()) {
            (Some(_), Some(object)) => object.clone(),
            _ => body
                .take()
                .expect("a create without generateName prepares once"),
        };
        if let Some(name) = name {
            object["metadata"]["name"] = Value::String(name);
        }
        let mut typed: T = prepare_for_create(writable, object)?;
        if track == Track::Update {
            let mut created = served(writable.kind(), &typed);
            if let Some(object) = created.as_object_mut() {
                // Owned by nobody on a create; a copy that is only read for its entries.
                object.shift_remove("status");
            }
            managed::record(writer, None, &mut created);
            let extra = &mut typed.metadata_mut().extra;
            match created.pointer("/metadata/managedFields") {
                Some(entries) => extra.insert("managedFields".into(), entries.clone()),
                None => extra.shift_remove("managedFields"),
            };
        }
        let meta = typed.metadata();
        Ok(Prepared {
            name: meta.name.clone(),
            key: state.registry.key::<T>(&meta.namespace, &meta.name),
            value: store::encode(&typed)?,
            object: typed,
        })
    };
    let store = writable.store(state);
    let (mut created, revision) = store
        .create(namespace, options.dry_run, generate.as_deref(), prepare)
        .await?;
    created.set_type_meta();
    created.metadata_mut().resource_version = revision;
    Ok(served(writable.kind(), &created))
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

/// The object to create (served), as stored: the strategy's defaults, the fields the
/// store fills cleared and then filled (kube-apiserver's `BeforeCreate` overwrites them
/// too), validated, generation 1.
///
/// # Errors
/// 400 for a body that does not decode as the kind, 422 `Invalid`.
fn prepare_for_create<T: Object>(writable: Writable, object: Value) -> Result<T, ApiError> {
    let mut stored = convert::to_stored(writable.kind(), object);
    (writable.strategy.defaults)(&mut stored)?;
    let mut typed: T = typed(stored)?;
    let meta = typed.metadata_mut();
    meta.uid.clear();
    meta.creation_timestamp = None;
    meta.deletion_timestamp = None;
    meta.generation = 0;
    validate(writable, &typed, None)?;
    api::fill_created(&mut typed);
    Ok(typed)
}
