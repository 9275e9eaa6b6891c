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
/// # Errors
/// 404 for a path that names no served resource.
pub fn parse_path(path: &str) -> Result<Target, ApiError> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(ApiError::no_route()),
    };
    let find =
        |plural: &str| resources::find(group, version, plural).ok_or_else(ApiError::no_route);
    let target = |resource, namespace: Option<&str>, name: Option<&str>, sub: Option<&str>| {
        Ok(Target {
            resource,
            namespace: namespace.map(String::from),
            name: name.map(String::from),
            subresource: sub.map(String::from),
        })
    };
    match rest {
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
}
