//! `POST /api/v1/namespaces/{ns}/pods/{name}/binding`: a scheduler's `Binding` of a pod to
//! a node (kube-apiserver's `BindingREST` in `registry/core/pod/storage`, 2014's
//! `registry/binding`), the one way a client of kube-apiserver can set `spec.nodeName`.
//!
//! The pod is updated by the same compare-and-swap as every update, and only while it is
//! unassigned and not being deleted; the Binding's `metadata.resourceVersion` and `uid`,
//! when given, are preconditions. The answer is a `Status` of `Success`, 201.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

use super::write::{self, respond, Writable, WriteOptions};
use super::ApiState;
use crate::api::Object;
use crate::apiserver::errors::{ApiError, Cause};

/// Binds pod `namespace/name` to the Binding's `target.name`.
///
/// # Errors
/// 404 for a missing pod, 409 for a pod assigned or being deleted (or a failed
/// precondition), 422 for a Binding without a target.
pub(super) async fn bind<T: Object>(
    state: &ApiState,
    writable: Writable,
    (namespace, name): (&str, &str),
    binding: Value,
    options: WriteOptions,
) -> Result<Response, ApiError> {
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .filter(|node| !node.is_empty())
        .ok_or_else(|| {
            ApiError::invalid(
                "",
                "Binding",
                name,
                vec![Cause {
                    reason: "FieldValueRequired",
                    message: "Required value".into(),
                    field: "target.name".into(),
                }],
            )
        })?
        .to_string();
    let conflict = |why: String| ApiError::conflict_because("", "pods/binding", name, &why);
    let mut change = |current: &Value| {
        if current
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null())
        {
            return Err(conflict(format!(
                "pod {name} is being deleted, cannot be assigned to a host"
            )));
        }
        if let Some(bound) = current
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            return Err(conflict(format!(
                "pod {name} is already assigned to node {bound:?}"
            )));
        }
        let mut next = current.clone();
        next["spec"]["nodeName"] = Value::from(node.as_str());
        for field in ["resourceVersion", "uid"] {
            if let Some(given) = binding
                .pointer(&format!("/metadata/{field}"))
                .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
            {
                next["metadata"][field] = given.clone();
            }
        }
        Ok(next)
    };
    write::update::<T>(
        state,
        writable,
        (namespace, name),
        options.dry_run,
        &mut change,
    )
    .await?;
    let status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Success", "code": 201,
    });
    Ok(respond(StatusCode::CREATED, &status, &[]))
}
