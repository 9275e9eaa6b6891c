//! What a request asks for: the resource a path names ([`parse_path`]), the query
//! parameters ([`Query`]) and the representation the client accepts ([`negotiate`]).

use std::collections::BTreeMap;

use crate::apiserver::errors::ApiError;
use crate::apiserver::resources::{self, Resource};

/// How the client wants objects: plain JSON, a Table, or metadata only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Json,
    Table,
    Metadata,
}

/// The first representation in `Accept` that kcm serves (JSON when there is none).
///
/// # Errors
/// 406 when the client accepts only representations kcm does not serve (protobuf).
pub fn negotiate(accept: Option<&str>) -> Result<Format, ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(Format::Json);
    };
    for media in accept.split(',') {
        let mut parts = media.split(';').map(str::trim);
        let media_type = parts.next().unwrap_or("").to_ascii_lowercase();
        if !matches!(
            media_type.as_str(),
            "application/json" | "*/*" | "application/*"
        ) {
            continue;
        }
        let params: BTreeMap<String, String> = parts
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        match params.get("as").map(String::as_str) {
            None => return Ok(Format::Json),
            Some("Table") if params.get("g").map(String::as_str) == Some("meta.k8s.io") => {
                return Ok(Format::Table)
            }
            Some("PartialObjectMetadata" | "PartialObjectMetadataList")
                if params.get("g").map(String::as_str) == Some("meta.k8s.io") =>
            {
                return Ok(Format::Metadata)
            }
            Some(_) => continue,
        }
    }
    Err(ApiError::not_acceptable(accept))
}

/// Query parameters, decoded.
#[derive(Debug, Default)]
pub struct Query(BTreeMap<String, String>);

impl Query {
    pub fn parse(query: Option<&str>) -> Query {
        Query(
            form_urlencoded::parse(query.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub(super) fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub(super) fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }

    pub(super) fn number(&self, key: &str) -> Result<Option<i64>, ApiError> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(value) => value.parse::<i64>().map(Some).map_err(|_| {
                ApiError::bad_request(format!("{key}: invalid value {value:?}: not a number"))
            }),
        }
    }
}

/// What a resource path names.
#[derive(Debug, PartialEq, Eq)]
pub struct Target {
    pub resource: &'static Resource,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// Parses `/api/v1/...` and `/apis/{group}/{version}/...` into what they name.
///
/// Each segment is percent-decoded, as kube-apiserver reads the decoded path
/// (`/pods/%61bc` is pod `abc`), but only after the path is split at its literal slashes:
/// an encoded slash (`%2F`) never separates segments, so it cannot make a name reach
/// another object, namespace or subresource. kube-apiserver splits the decoded path
/// instead; kcm refuses such a segment ([`check_segment`]) where kube-apiserver would
/// route it elsewhere.
///
/// # Errors
/// 404 for a path that names no served resource; 400 for a malformed escape, or a
/// namespace or name that cannot be one (`.`, `..`, or holding `/` or `%` once decoded).
pub fn parse_path(path: &str) -> Result<Target, ApiError> {
    let decoded = path
        .trim_matches('/')
        .split('/')
        .map(percent_decode)
        .collect::<Result<Vec<String>, ApiError>>()?;
    let segments: Vec<&str> = decoded.iter().map(String::as_str).collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(ApiError::no_route()),
    };
    let find =
        |plural: &str| resources::find(group, version, plural).ok_or_else(ApiError::no_route);
    let target = |resource, namespace: Option<&str>, name: Option<&str>, sub: Option<&str>| {
        if let Some(namespace) = namespace {
            check_segment("Namespace", namespace)?;
        }
        if let Some(name) = name {
            check_segment("Name", name)?;
        }
        Ok(Target {
            resource,
            namespace: namespace.map(String::from),
            name: name.map(String::from),
            subresource: sub.map(String::from),
        })
    };
    match rest {
        // A namespace's subresource (`finalize`), which the next arm would read as a
        // resource in it.
        ["namespaces", name, "finalize"] => {
            target(find("namespaces")?, None, Some(name), Some("finalize"))
        }
        // A namespaced resource in a namespace.
        ["namespaces", namespace, plural, more @ ..] => {
            let resource = find(plural)?;
            if !resource.namespaced {
                return Err(ApiError::no_route());
            }
            match more {
                [] => target(resource, Some(namespace), None, None),
                [name] => target(resource, Some(namespace), Some(name), None),
                [name, sub] => target(resource, Some(namespace), Some(name), Some(sub)),
                _ => Err(ApiError::no_route()),
            }
        }
        // A namespace itself.
        ["namespaces", name] => target(find("namespaces")?, None, Some(name), None),
        [plural] => target(find(plural)?, None, None, None),
        [plural, name, more @ ..] => {
            let resource = find(plural)?;
            if resource.namespaced {
                return Err(ApiError::no_route());
            }
            match more {
                [] => target(resource, None, Some(name), None),
                [sub] => target(resource, None, Some(name), Some(sub)),
                _ => Err(ApiError::no_route()),
            }
        }
        _ => Err(ApiError::no_route()),
    }
}

/// One path segment with its `%XX` escapes decoded (a `+` stays a `+`: it means a space
/// only in a query).
///
/// # Errors
/// 400 for an escape that is not `%` and two hex digits, or bytes that are not UTF-8.
fn percent_decode(segment: &str) -> Result<String, ApiError> {
    if !segment.contains('%') {
        return Ok(segment.to_string());
    }
    let bytes = segment.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            decoded.push(bytes[i]);
            i += 1;
            continue;
        }
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|pair| std::str::from_utf8(pair).ok())
            .and_then(|pair| u8::from_str_radix(pair, 16).ok())
            .filter(|_| bytes[i + 1].is_ascii_hexdigit() && bytes[i + 2].is_ascii_hexdigit());
        let Some(byte) = hex else {
            let escape: String = segment[i..].chars().take(3).collect();
            return Err(ApiError::bad_request(format!(
                "invalid URL escape {escape:?}"
            )));
        };
        decoded.push(byte);
        i += 3;
    }
    String::from_utf8(decoded).map_err(|_| {
        ApiError::bad_request(format!(
            "the path segment {segment:?} does not decode to UTF-8"
        ))
    })
}

/// A namespace or name taken from the path must be usable as one segment of a storage
/// key: not `.` or `..`, and without `/` or `%` (kube-apiserver's
/// `IsValidPathSegmentName`, which its storage applies to every name: 400
/// `Name parameter invalid: "a/b": may not contain '/'`).
///
/// # Errors
/// 400 naming the segment and the rule; `what` is `Namespace` or `Name`.
fn check_segment(what: &str, segment: &str) -> Result<(), ApiError> {
    let problem = match segment {
        "." | ".." => format!("may not be '{segment}'"),
        _ => match segment.chars().find(|c| matches!(c, '/' | '%')) {
            Some(c) => format!("may not contain '{c}'"),
            None => return Ok(()),
        },
    };
    Err(ApiError::bad_request(format!(
        "{what} parameter invalid: {segment:?}: {problem}"
    )))
}

/// The query of a request's `q` part (the handlers' tests).
#[cfg(test)]
pub(super) fn query(q: &str) -> Query {
    Query::parse(Some(q))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check_negotiate(accept: &str, expected: Result<Format, u16>) {
        assert_eq!(
            negotiate(Some(accept)).map_err(|e| e.code),
            expected,
            "{accept}"
        );
    }

    #[test]
    fn accept_headers_choose_the_representation_kubectl_and_kube_rs_ask_for() {
        check_negotiate(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
            Ok(Format::Table),
        );
        check_negotiate("application/json", Ok(Format::Json));
        check_negotiate(
            "application/vnd.kubernetes.protobuf,application/json",
            Ok(Format::Json),
        );
        check_negotiate("application/json, */*", Ok(Format::Json));
        check_negotiate(
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
            Ok(Format::Metadata),
        );
        check_negotiate("application/vnd.kubernetes.protobuf", Err(406));
        assert_eq!(negotiate(None).unwrap(), Format::Json);
    }

    /// Resource, namespace, name, subresource.
    type Named<'a> = (&'a str, Option<&'a str>, Option<&'a str>, Option<&'a str>);

    #[track_caller]
    fn check_path(path: &str, expected: Option<Named>) {
        let got = parse_path(path)
            .ok()
            .map(|t| (t.resource.plural, t.namespace, t.name, t.subresource));
        let expected = expected.map(|(r, ns, name, sub)| {
            (
                r,
                ns.map(String::from),
                name.map(String::from),
                sub.map(String::from),
            )
        });
        assert_eq!(got, expected, "{path}");
    }

    #[test]
    fn paths_name_collections_objects_and_subresources() {
        check_path("/api/v1/pods", Some(("pods", None, None, None)));
        check_path(
            "/api/v1/namespaces/default/pods",
            Some(("pods", Some("default"), None, None)),
        );
        check_path(
            "/api/v1/namespaces/default/pods/x",
            Some(("pods", Some("default"), Some("x"), None)),
        );
        check_path(
            "/apis/apps/v1/namespaces/a/deployments/web/scale",
            Some(("deployments", Some("a"), Some("web"), Some("scale"))),
        );
        check_path("/api/v1/namespaces", Some(("namespaces", None, None, None)));
        check_path(
            "/api/v1/namespaces/kube-system",
            Some(("namespaces", None, Some("kube-system"), None)),
        );
        check_path(
            "/api/v1/nodes/node-1",
            Some(("nodes", None, Some("node-1"), None)),
        );
        check_path("/api/v1/pods/x", None);
        check_path("/api/v1/namespaces/default/nodes", None);
        check_path("/apis/apps/v1/pods", None);
        check_path("/api/v2/pods", None);
        check_path(
            "/apis/apps/v1/namespaces/a/deployments/web/scale/more",
            None,
        );
    }

    #[test]
    fn segments_are_percent_decoded_after_the_path_is_split() {
        check_path(
            "/api/v1/namespaces/default/pods/%61bc",
            Some(("pods", Some("default"), Some("abc"), None)),
        );
        check_path(
            "/api/v1/namespaces/%64efault/%70ods",
            Some(("pods", Some("default"), None, None)),
        );
        check_path(
            "/apis/apps/v1/namespaces/a/deployments/web/%73cale",
            Some(("deployments", Some("a"), Some("web"), Some("scale"))),
        );
        check_path(
            "/api/v1/nodes/node%2D1",
            Some(("nodes", None, Some("node-1"), None)),
        );
        // `+` is a space only in a query; in a path it is itself (and no valid name).
        check_path(
            "/api/v1/namespaces/default/pods/a+b",
            Some(("pods", Some("default"), Some("a+b"), None)),
        );
    }

    #[track_caller]
    fn check_refused(path: &str, code: u16, message: &str) {
        let error = parse_path(path).expect_err(path);
        assert_eq!(error.code, code, "{path}: {error:?}");
        assert_eq!(error.message, message, "{path}");
    }

    #[test]
    fn a_decoded_slash_dot_segment_or_bad_escape_is_refused() {
        check_refused(
            "/api/v1/namespaces/default/pods/a%2Fb",
            400,
            "Name parameter invalid: \"a/b\": may not contain '/'",
        );
        check_refused(
            "/api/v1/namespaces/default%2Fpods%2Fx/pods",
            400,
            "Namespace parameter invalid: \"default/pods/x\": may not contain '/'",
        );
        check_refused(
            "/api/v1/namespaces/default/pods/%2E%2E",
            400,
            "Name parameter invalid: \"..\": may not be '..'",
        );
        check_refused(
            "/api/v1/namespaces/../pods",
            400,
            "Namespace parameter invalid: \"..\": may not be '..'",
        );
        check_refused(
            "/api/v1/namespaces/%2e",
            400,
            "Name parameter invalid: \".\": may not be '.'",
        );
        check_refused(
            "/api/v1/nodes/a%252Fb",
            400,
            "Name parameter invalid: \"a%2Fb\": may not contain '%'",
        );
        check_refused(
            "/api/v1/namespaces/default/pods/a%zz",
            400,
            "invalid URL escape \"%zz\"",
        );
        check_refused(
            "/api/v1/namespaces/default/pods/a%2",
            400,
            "invalid URL escape \"%2\"",
        );
        check_refused(
            "/api/v1/namespaces/default/pods/%ff",
            400,
            "the path segment \"%ff\" does not decode to UTF-8",
        );
        // An encoded slash never acts as a separator, so it cannot name a subresource.
        check_refused(
            "/apis/apps/v1/namespaces/a/deployments/web%2Fscale",
            400,
            "Name parameter invalid: \"web/scale\": may not contain '/'",
        );
        assert_eq!(
            parse_path("/api/v1/namespaces/default/%2Fpods").map_err(|e| e.code),
            Err(404)
        );
    }
}
