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
    /// `details`, when the error is about one object (boxed: errors travel in `Result`s).
    pub details: Option<Box<Details>>,
}

/// A `Status`'s `details`: the object's name, group and kind (the resource, or the kind
/// for 422 `Invalid`), and a cause per invalid field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Details {
    pub name: String,
    pub group: String,
    pub kind: String,
    pub causes: Vec<Cause>,
}

impl Details {
    fn new(name: &str, group: &str, kind: &str) -> Option<Box<Details>> {
        Some(Box::new(Details {
            name: name.to_string(),
            group: group.to_string(),
            kind: kind.to_string(),
            causes: Vec::new(),
        }))
    }
}

/// One `details.causes` entry: kube-apiserver's `StatusCause` (`FieldValueInvalid`,
/// `FieldValueRequired`, ...), the message and the field's path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    pub reason: &'static str,
    pub message: String,
    pub field: String,
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

    /// The same error about one object: `details.name`, `group` and `kind` (the resource).
    pub fn about(mut self, group: &str, resource: &str, name: &str) -> ApiError {
        self.details = Details::new(name, group, resource);
        self
    }

    /// 409 `pods "x" already exists`.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> ApiError {
        let qualified = qualified(group, resource);
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{qualified} \"{name}\" already exists"),
        )
        .about(group, resource, name)
    }

    /// 409 `Conflict`, kube-apiserver's message for a stale resourceVersion
    /// (`storage.NewResourceVersionConflictsError` through `errors.NewConflict`).
    pub fn conflict(group: &str, resource: &str, name: &str) -> ApiError {
        ApiError::conflict_because(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 `Conflict` for another reason (a failed uid precondition).
    pub fn conflict_because(group: &str, resource: &str, name: &str, why: &str) -> ApiError {
        let qualified = qualified(group, resource);
        ApiError::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {qualified} \"{name}\": {why}"),
        )
        .about(group, resource, name)
    }

    /// 422 `Invalid`: `Deployment.apps "web" is invalid: spec.replicas: ...`, a cause per
    /// field (kube-apiserver's `errors.NewInvalid`).
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> ApiError {
        let qualified_kind = qualified(group, kind);
        let fields: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let message = match fields.as_slice() {
            [one] => format!("{qualified_kind} \"{name}\" is invalid: {one}"),
            many => format!(
                "{qualified_kind} \"{name}\" is invalid: [{}]",
                many.join(", ")
            ),
        };
        let mut error = ApiError::new(422, "Invalid", message);
        let mut details = Details::new(name, group, kind).expect("details");
        details.causes = causes;
        error.details = Some(details);
        error
    }

    /// 409 `Conflict` of a server-side apply: kube-apiserver's `Apply failed with 1
    /// conflict: ...`, a `FieldManagerConflict` cause per field (`errors.NewApplyConflict`:
    /// no name or kind in the details).
    pub fn apply_conflict(message: String, causes: Vec<Cause>) -> ApiError {
        let mut error = ApiError::new(409, "Conflict", message);
        let mut details = Details::new("", "", "").expect("details");
        details.causes = causes;
        error.details = Some(details);
        error
    }

    /// 422 `Invalid` without field causes (a patch that does not apply).
    pub fn unprocessable(message: impl Into<String>) -> ApiError {
        ApiError::new(422, "Invalid", message)
    }

    /// 415 for a body in a media type kcm does not decode.
    pub fn unsupported_media_type(message: impl Into<String>) -> ApiError {
        ApiError::new(415, "UnsupportedMediaType", message)
    }

    /// 413 for a body over the limit.
    pub fn too_large(limit: usize) -> ApiError {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 403 `Forbidden`: `namespaces "default" is forbidden: this namespace may not be
    /// deleted` (kube-apiserver's `errors.NewForbidden`).
    pub fn forbidden(group: &str, resource: &str, name: &str, why: &str) -> ApiError {
        let qualified = qualified(group, resource);
        ApiError::new(
            403,
            "Forbidden",
            format!("{qualified} \"{name}\" is forbidden: {why}"),
        )
        .about(group, resource, name)
    }

    /// 404 `pods "x" not found` (`resource.group` for a named group).
    pub fn not_found(group: &str, resource: &str, name: &str) -> ApiError {
        let qualified = qualified(group, resource);
        ApiError {
            details: Details::new(name, group, resource),
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

    /// 405: a verb the resource does not serve.
    pub fn method_not_allowed(method: &str, what: &str) -> ApiError {
        ApiError::new(
            405,
            "MethodNotAllowed",
            format!(
                "the server does not allow this method on the requested resource: {method} {what}"
            ),
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
        if let Some(found) = &self.details {
            let mut details = json!({});
            for (field, value) in [("name", &found.name), ("kind", &found.kind)] {
                if !value.is_empty() {
                    details[field] = Value::String(value.clone());
                }
            }
            if !found.group.is_empty() {
                details["group"] = Value::String(found.group.clone());
            }
            if !found.causes.is_empty() {
                details["causes"] = found
                    .causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect();
            }
            status["details"] = details;
        }
        if self.code == 429 {
            status["details"]["retryAfterSeconds"] = json!(RETRY_AFTER_SECONDS);
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

/// Seconds a client is told to wait before retrying a 429 (`Retry-After` and
/// `details.retryAfterSeconds`): kube-apiserver's one second for a request refused by its
/// in-flight limits.
pub const RETRY_AFTER_SECONDS: u64 = 1;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (
            code,
            [(header::CONTENT_TYPE, "application/json")],
            self.status().to_string(),
        )
            .into_response();
        // Every 429 says when to come back: client-go and kube-rs wait that long.
        if self.code == 429 {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                header::HeaderValue::from(RETRY_AFTER_SECONDS),
            );
        }
        response
    }
}

impl std::error::Error for ApiError {}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_429_says_when_to_retry() {
        let error = ApiError::too_many_requests("busy");
        assert_eq!(error.status()["details"]["retryAfterSeconds"], 1);
        let response = error.into_response();
        assert_eq!(response.status(), 429);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        let response = ApiError::conflict("", "pods", "x").into_response();
        assert!(response.headers().get(header::RETRY_AFTER).is_none());
    }

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
