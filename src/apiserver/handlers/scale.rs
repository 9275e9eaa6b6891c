//! The `scale` subresource of replicationcontrollers, replicasets and deployments
//! (kube-apiserver's `ScaleREST` in `registry/core/replicationcontroller/storage` and
//! `registry/apps/*/storage`): `autoscaling/v1` `Scale` in and out, `spec.replicas`
//! written back to the object by the same compare-and-swap as every update; a
//! resourceVersion in the Scale is a precondition (`kubectl scale --current-replicas`).

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

use super::body::{BodyType, Decoded};
use super::managed;
use super::read::scale;
use super::update::apply_patch;
use super::write::{self, check_fields, respond, Writable, WriteOptions};
use super::ApiState;
use crate::api::Object;
use crate::apiserver::errors::{ApiError, Cause};

/// How a scale write gives the new Scale from the current one.
pub(super) enum ScaleWrite {
    /// `PUT`: the whole Scale.
    Put(Value),
    /// `PATCH`: a patch of the Scale.
    Patch(BodyType, Value),
}

/// `PUT` or `PATCH .../NAME/scale`. Answers the new Scale.
///
/// # Errors
/// 404, 409 (a stale resourceVersion), 400, 422 (replicas not a non-negative integer).
pub(super) async fn write_scale<T: Object>(
    state: &ApiState,
    writable: Writable,
    (namespace, name): (&str, &str),
    body: Decoded,
    how: ScaleWrite,
    options: WriteOptions,
) -> Result<Response, ApiError> {
    let warnings = match &how {
        ScaleWrite::Patch(BodyType::JsonPatch, _) => Vec::new(),
        _ => check_fields("Scale", &body, options.validation)?,
    };
    let applies = matches!(how, ScaleWrite::Patch(BodyType::ApplyPatch, _));
    if let ScaleWrite::Patch(_, config) = &how {
        options.manager.check_patch(applies)?;
        if applies {
            check_scale_config(config)?;
        }
    }
    let api_version = writable.resource.api_version();
    let writer = writable.writer(&api_version, &options.manager, "scale");
    let force = options.manager.force;
    let mut change = |current: &Value| {
        let before = scale(current);
        let after = match &how {
            ScaleWrite::Put(new) => new.clone(),
            ScaleWrite::Patch(BodyType::ApplyPatch, config) => config.clone(),
            ScaleWrite::Patch(body_type, patch) => {
                apply_patch(*body_type, "Scale", &before, patch)?
            }
        };
        let replicas = after
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .filter(|n| (0..=i64::from(i32::MAX)).contains(n))
            .ok_or_else(|| {
                ApiError::invalid(
                    "autoscaling",
                    "Scale",
                    name,
                    vec![Cause {
                        reason: "FieldValueInvalid",
                        message: format!(
                            "Invalid value: {}: must be a non-negative 32-bit integer",
                            after.pointer("/spec/replicas").unwrap_or(&Value::Null)
                        ),
                        field: "spec.replicas".to_string(),
                    }],
                )
            })?;
        let mut next = if applies {
            // The Scale's one field, applied to the object it scales: the manager owns
            // its `.spec.replicas` through `scale` (kube-apiserver's `scalehandler.go`).
            let parent = json!({
                "apiVersion": api_version, "kind": writable.resource.kind,
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"replicas": replicas},
            });
            managed::apply(writer, Some(current), &parent, force)?
        } else {
            let mut next = current.clone();
            next["spec"]["replicas"] = Value::from(replicas);
            managed::record(writer, Some(current), &mut next);
            next
        };
        match after.pointer("/metadata/resourceVersion") {
            Some(rv) if rv.as_str().is_some_and(|s| !s.is_empty()) => {
                next["metadata"]["resourceVersion"] = rv.clone();
            }
            _ => {}
        }
        Ok(next)
    };
    let key = (namespace, name);
    let stored = write::update::<T>(state, writable, key, options.dry_run, &mut change).await?;
    Ok(respond(StatusCode::OK, &scale(&stored), &warnings))
}

/// An applied Scale: `autoscaling/v1`, without `managedFields`.
fn check_scale_config(config: &Value) -> Result<(), ApiError> {
    if config
        .pointer("/metadata/managedFields")
        .is_some_and(|m| !m.is_null())
    {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    let version = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if version != "autoscaling/v1" {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {version}, expected: autoscaling/v1"
        )));
    }
    Ok(())
}
