//! The `scale` subresource of replicationcontrollers, replicasets and deployments
//! (kube-apiserver's `ScaleREST` in `registry/core/replicationcontroller/storage` and
//! `registry/apps/*/storage`): `autoscaling/v1` `Scale` in and out, `spec.replicas`
//! written back to the object by the same compare-and-swap as every update; a
//! resourceVersion in the Scale is a precondition (`kubectl scale --current-replicas`).

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::body::{BodyType, Decoded};
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
    let mut change = |current: &Value| {
        let before = scale(current);
        let after = match &how {
            ScaleWrite::Put(new) => new.clone(),
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
        let mut next = current.clone();
        next["spec"]["replicas"] = Value::from(replicas);
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
