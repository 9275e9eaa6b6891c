//! Every error the API answers, as a `Status` object with kube-apiserver's reason, code
//! and message (`apimachinery/pkg/api/errors`), so kubectl prints
//! `Error from server (NotFound): pods "x" not found`.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// A failed request: what the `Status` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    /// `details.name` and `details.kind` (the resource), when the error is about one object.
    pub details: Option<(String, String, String)>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// 404 `pods "x" not found` (`resource.group` for a named group).
    pub fn not_found(group: &str, resource: &str, name: &str) -> ApiError {
        let qualified = qualified(group, resource);
        ApiError {
            details: Some((name.to_string(), group.to_string(), resource.to_string())),
            ..ApiError::new(404, "NotFound", format!("{qualified} \"{name}\" not found"))
        }
    }

    /// 404 for a path that names nothing the API serves.
    pub fn no_route() -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// 405: a verb this part of the API does not serve yet.
    pub fn method_not_allowed(method: &str, what: &str) -> ApiError {
        ApiError::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource: {method} {what} is not served by kcm yet (the API's writes are part 2; use kcm's own commands to write)"),
        )
    }

    /// 410 for a list or continue token whose revision etcd compacted.
    pub fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    pub fn unauthorized() -> ApiError {
        ApiError::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn not_acceptable(accept: &str) -> ApiError {
        ApiError::new(
            406,
            "NotAcceptable",
            format!("only the following media types are accepted: application/json, application/json;as=Table;v=v1;g=meta.k8s.io, application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io, application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io (asked for {accept:?})"),
        )
    }

    pub fn too_many_requests(message: impl Into<String>) -> ApiError {
        ApiError::new(429, "TooManyRequests", message)
    }

    /// 504: a resourceVersion etcd has not reached (`Too large resource version`).
    pub fn too_large_resource_version(asked: i64, current: i64) -> ApiError {
        ApiError::new(
            504,
            "Timeout",
            format!("Too large resource version: {asked}, current: {current}"),
        )
    }

    pub fn timeout(message: impl Into<String>) -> ApiError {
        ApiError::new(504, "Timeout", message)
    }

    /// 500, naming what failed (an etcd error, usually).
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "InternalError", message)
    }

    /// 503 while etcd does not answer.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(503, "ServiceUnavailable", message)
    }

    /// The `Status` object.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some((name, group, kind)) = &self.details {
            let mut details = json!({ "name": name, "kind": kind });
            if !group.is_empty() {
                details["group"] = Value::String(group.clone());
            }
            status["details"] = details;
        }
        status
    }
}

/// `pods`, or `deployments.apps`.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (
            code,
            [(header::CONTENT_TYPE, "application/json")],
            self.status().to_string(),
        )
            .into_response()
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_reads_as_kubectl_prints_it() {
        let status = ApiError::not_found("", "pods", "nope").status();
        assert_eq!(status["message"], "pods \"nope\" not found");
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(status["code"], 404);
        assert_eq!(status["details"], json!({"name": "nope", "kind": "pods"}));
        let status = ApiError::not_found("apps", "deployments", "web").status();
        assert_eq!(status["message"], "deployments.apps \"web\" not found");
        assert_eq!(status["details"]["group"], "apps");
    }
}
