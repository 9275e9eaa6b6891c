//! `PUT` and `PATCH` of an object and of its `status` (kube-apiserver's
//! `endpoints/handlers/update.go` and `patch.go`, the strategies' `PrepareForUpdate`):
//! through the main resource the status is kept as stored, through `/status` only the
//! status changes. Every one is [`write::update`]: one compare-and-swap on the key, the
//! resourceVersion the body states a precondition (409 when stale).

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::body::{BodyType, Decoded};
use super::create;
use super::managed;
use super::write::{self, check_fields, respond, Writable, WriteOptions};
use super::ApiState;
use crate::api::Object;
use crate::apiserver::errors::ApiError;
use crate::apiserver::patch::{
    check_patched_size, json_patch, merge_patch, strategic_merge_patch, BuiltinPatchSchema,
    NoListMergeStrategies, PatchError, PatchSchema,
};

/// Which part of an object a write may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Part {
    /// The main resource: everything but the status.
    Main,
    /// `/status`: the status only.
    Status,
}

impl Part {
    /// The subresource a write of this part goes through, as managedFields name it.
    pub fn subresource(self) -> &'static str {
        match self {
            Part::Main => "",
            Part::Status => "status",
        }
    }
}

/// `PUT .../NAME` and `PUT .../NAME/status`.
///
/// # Errors
/// 404, 409 (a stale resourceVersion), 400, 422.
pub(super) async fn put<T: Object>(
    state: &ApiState,
    writable: Writable,
    (namespace, name): (&str, &str),
    part: Part,
    body: Decoded,
    options: WriteOptions,
) -> Result<Response, ApiError> {
    let warnings = check_fields(writable.resource.kind, &body, options.validation)?;
    let mut object = body.value;
    if !object.is_object() {
        return Err(ApiError::bad_request("the body is not a JSON object"));
    }
    write::name_from_path(&mut object, namespace, Some(name))?;
    let api_version = writable.resource.api_version();
    let writer = writable.writer(&api_version, &options.manager, part.subresource());
    let mut change = |current: &Value| {
        let mut next = keep_part(current, object.clone(), part);
        managed::record(writer, Some(current), &mut next);
        Ok(next)
    };
    let key = (namespace, name);
    let stored = write::update::<T>(state, writable, key, options.dry_run, &mut change).await?;
    Ok(respond(StatusCode::OK, &stored, &warnings))
}

/// `PATCH .../NAME` and `PATCH .../NAME/status`: merge, JSON or strategic merge patch.
///
/// # Errors
/// 404, 409 (the patch states a stale resourceVersion), 400, 422 (a patch that does not
/// apply, or an invalid result).
pub(super) async fn patch<T: Object>(
    state: &ApiState,
    writable: Writable,
    (namespace, name): (&str, &str),
    part: Part,
    (body_type, body): (BodyType, Decoded),
    options: WriteOptions,
) -> Result<Response, ApiError> {
    options.manager.check_patch(false)?;
    let warnings = match body_type {
        BodyType::JsonPatch => Vec::new(),
        _ => check_fields(writable.resource.kind, &body, options.validation)?,
    };
    let patch = body.value;
    let kind = writable.resource.kind;
    let api_version = writable.resource.api_version();
    let writer = writable.writer(&api_version, &options.manager, part.subresource());
    let mut change = |current: &Value| {
        let patched = apply_patch(body_type, kind, current, &patch)?;
        let mut next = keep_part(current, patched, part);
        managed::record(writer, Some(current), &mut next);
        Ok(next)
    };
    let key = (namespace, name);
    let stored = write::update::<T>(state, writable, key, options.dry_run, &mut change).await?;
    Ok(respond(StatusCode::OK, &stored, &warnings))
}

/// `PATCH .../NAME` and `PATCH .../NAME/status` with `application/apply-patch+yaml`:
/// server-side apply ([`managed::apply`]); through the main resource, an apply to an
/// object that does not exist creates it (201).
///
/// # Errors
/// 400 (a configuration in another apiVersion, or stating `managedFields`), 404 through
/// `/status`, 409 (fields of other managers, a stale resourceVersion, a `uid` when
/// creating), 422 (no `fieldManager`, a configuration that does not fit the schema, an
/// invalid result).
pub(super) async fn apply<T: Object>(
    state: &ApiState,
    writable: Writable,
    (namespace, name): (&str, &str),
    part: Part,
    body: Decoded,
    options: WriteOptions,
) -> Result<Response, ApiError> {
    options.manager.check_patch(true)?;
    let warnings = check_fields(writable.resource.kind, &body, options.validation)?;
    let mut config = body.value;
    let api_version = writable.resource.api_version();
    let writer = writable.writer(&api_version, &options.manager, part.subresource());
    managed::check_config(writer, &config)?;
    write::name_from_path(&mut config, namespace, Some(name))?;
    let force = options.manager.force;
    let create = || async {
        if let Some(uid) = config.pointer("/metadata/uid").and_then(Value::as_str) {
            return Err(ApiError::conflict_because(
                writable.resource.group,
                writable.resource.plural,
                name,
                &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: "),
            ));
        }
        let object = managed::apply(writer, None, &config, force)?;
        let track = create::Track::Applied;
        let options = options.clone();
        create::create_object::<T>(state, writable, namespace, object, options, track)
            .await
            .map(|created| respond(StatusCode::CREATED, &created, &warnings))
    };
    // What the watch cache does not hold is most likely not there: create it at once (one
    // etcd transaction, not a read that finds nothing and then one), and apply to it when
    // it was there after all.
    let cached = state
        .caches
        .get(writable.resource.plural)
        .filter(|c| c.is_synced());
    if part == Part::Main && cached.is_some_and(|cache| cache.get(namespace, name).0.is_none()) {
        match create().await {
            Err(exists) if exists.reason == "AlreadyExists" => {}
            created => return created,
        }
    }
    let mut change = |current: &Value| {
        let applied = managed::apply(writer, Some(current), &config, force)?;
        let entries = applied.pointer("/metadata/managedFields").cloned();
        let mut next = keep_part(current, applied, part);
        // Through `/status` keep_part keeps the stored metadata: the apply's entries go too.
        if let Some(metadata) = next.get_mut("metadata").and_then(Value::as_object_mut) {
            match entries {
                Some(entries) => metadata.insert("managedFields".into(), entries),
                None => metadata.shift_remove("managedFields"),
            };
        }
        Ok(next)
    };
    let key = (namespace, name);
    match write::update::<T>(state, writable, key, options.dry_run, &mut change).await {
        Ok(stored) => Ok(respond(StatusCode::OK, &stored, &warnings)),
        Err(missing) if missing.code == 404 && part == Part::Main => create().await,
        Err(other) => Err(other),
    }
}

/// Applies a patch of `body_type` to `current` (an object of `kind`, served).
///
/// # Errors
/// 422 for a patch that does not apply (a JSON patch's copies over their limit among them),
/// 400 for one that is not a patch, 413 for a JSON patch of too many operations and for a
/// result over the body limit.
pub(super) fn apply_patch(
    body_type: BodyType,
    kind: &str,
    current: &Value,
    patch: &Value,
) -> Result<Value, ApiError> {
    let result = match body_type {
        BodyType::MergePatch => {
            if !patch.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            Ok(merge_patch(current, patch))
        }
        BodyType::JsonPatch => json_patch(current, patch),
        BodyType::StrategicMergePatch => {
            let builtin = BuiltinPatchSchema::for_kind(kind);
            let schema: &dyn PatchSchema = match &builtin {
                Some(schema) => schema,
                None => &NoListMergeStrategies,
            };
            strategic_merge_patch(current, patch, schema)
        }
        BodyType::Json | BodyType::Yaml | BodyType::Protobuf | BodyType::ApplyPatch => {
            return Err(ApiError::unsupported_media_type(
                "a patch must be application/merge-patch+json, application/json-patch+json or application/strategic-merge-patch+json",
            ))
        }
    };
    result
        .and_then(|patched| check_patched_size(&patched).map(|()| patched))
        .map_err(|e| match e {
            PatchError::JsonPatchNotAnArray => ApiError::bad_request(e.to_string()),
            PatchError::JsonPatchTooManyOperations { .. } | PatchError::TooLarge { .. } => {
                let mut error = ApiError::too_large(super::MAX_BODY_BYTES);
                error.message = e.to_string();
                error
            }
            other => ApiError::unprocessable(other.to_string()),
        })
}

/// What a write of `part` leaves of `written`: through the main resource the stored status
/// (kube-apiserver ignores status changes there), through `/status` the stored object with
/// the written status.
pub(super) fn keep_part(current: &Value, mut written: Value, part: Part) -> Value {
    match part {
        Part::Main => {
            set_or_remove(&mut written, "status", current.get("status"));
            written
        }
        Part::Status => {
            let mut next = current.clone();
            set_or_remove(&mut next, "status", written.get("status"));
            // A resourceVersion the body states stays a precondition.
            if let Some(rv) = written.pointer("/metadata/resourceVersion") {
                next["metadata"]["resourceVersion"] = rv.clone();
            }
            next
        }
    }
}

fn set_or_remove(object: &mut Value, field: &str, value: Option<&Value>) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    match value {
        Some(value) => {
            map.insert(field.to_string(), value.clone());
        }
        None => {
            map.shift_remove(field);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_main_resource_keeps_the_status_and_status_keeps_the_rest() {
        let current = json!({"metadata": {"name": "a", "resourceVersion": "5"},
                             "spec": {"replicas": 1}, "status": {"replicas": 1}});
        let written = json!({"metadata": {"name": "a", "resourceVersion": "4"},
                             "spec": {"replicas": 3}, "status": {"replicas": 9}});
        let main = keep_part(&current, written.clone(), Part::Main);
        assert_eq!(main["spec"]["replicas"], 3);
        assert_eq!(main["status"]["replicas"], 1);
        assert_eq!(main["metadata"]["resourceVersion"], "4");
        let status = keep_part(&current, written, Part::Status);
        assert_eq!(status["spec"]["replicas"], 1);
        assert_eq!(status["status"]["replicas"], 9);
        assert_eq!(status["metadata"]["resourceVersion"], "4");
    }

    #[test]
    fn patches_of_each_type_apply_and_a_failed_test_is_422() {
        let current = json!({"metadata": {"labels": {"a": "1"}},
                             "spec": {"template": {"spec": {"containers": [
                                 {"name": "nginx", "image": "nginx:1"}]}}}});
        let merged = apply_patch(
            BodyType::MergePatch,
            "Deployment",
            &current,
            &json!({"metadata": {"labels": {"b": "2"}}}),
        )
        .unwrap();
        assert_eq!(merged["metadata"]["labels"], json!({"a": "1", "b": "2"}));
        let strategic = apply_patch(
            BodyType::StrategicMergePatch,
            "Deployment",
            &current,
            &json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "nginx"}],
                "containers": [{"name": "nginx", "image": "nginx:2"}]}}}}),
        )
        .unwrap();
        assert_eq!(
            strategic["spec"]["template"]["spec"]["containers"],
            json!([{"name": "nginx", "image": "nginx:2"}])
        );
        let failed = apply_patch(
            BodyType::JsonPatch,
            "Deployment",
            &current,
            &json!([{"op": "test", "path": "/metadata/labels/a", "value": "2"}]),
        )
        .unwrap_err();
        assert_eq!(failed.code, 422);
    }
}
