//! A minimal OpenAPI v3: `/openapi/v3` (the index of group-versions) and one document per
//! group-version listing, for each kind kcm writes, its PATCH operation with the
//! `fieldValidation` parameter. That is what kubectl's default `--validate=strict` looks
//! for before a create or apply (`cli-runtime/pkg/resource/query_param_verifier_v3.go`:
//! a `patch` operation tagged with the kind's `x-kubernetes-group-version-kind` that lists
//! `fieldValidation`); without it kubectl falls back to `/openapi/v2` and fails.
//!
//! No schemas: `kubectl explain` is not served (it says the kind is not in the schema).
//! `/openapi/v2` is an empty Swagger document (JSON, or gnostic's protobuf when asked for
//! it): kubectl validates a `v1 List` client-side against it, since the query-param
//! verifier never reports support for `List` (`query_param_verifier_v3.go`), and skips
//! the kinds it holds no schema for; without it `kubectl create -f list.yaml` fails with
//! "the server could not find the requested resource".
//!
//! Invariant: a document's `hash` (in the index's `serverRelativeURL`, kubectl's cache key)
//! is a digest of the document itself, so it changes exactly when the document does.

use serde_json::{json, Map, Value};

use super::resources::{Resource, RESOURCES};

/// The group-versions kcm serves, as `/openapi/v3` names them (`api/v1`, `apis/apps/v1`).
fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut found: Vec<(&'static str, &'static str)> = Vec::new();
    for resource in RESOURCES {
        let gv = (resource.group, resource.version);
        if !found.contains(&gv) {
            found.push(gv);
        }
    }
    found
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The document of one group-version (`api/v1`, `apis/apps/v1`), if kcm serves it.
pub fn group_version_document(path: &str) -> Option<Value> {
    let (group, version) = group_versions()
        .into_iter()
        .find(|(group, version)| gv_path(group, version) == path)?;
    let mut paths = Map::new();
    for resource in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version && r.verbs.contains(&"patch"))
    {
        paths.insert(
            object_path(resource),
            json!({ "patch": patch_operation(resource) }),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": TITLE, "version": VERSION},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}

fn object_path(resource: &Resource) -> String {
    let root = format!("/{}", gv_path(resource.group, resource.version));
    if resource.namespaced {
        format!(
            "{root}/namespaces/{{namespace}}/{}/{{name}}",
            resource.plural
        )
    } else {
        format!("{root}/{}/{{name}}", resource.plural)
    }
}

fn patch_operation(resource: &Resource) -> Value {
    let query = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
    json!({
        "operationId": format!("patch{}", resource.kind),
        "parameters": [query("dryRun"), query("fieldManager"), query("fieldValidation"),
                       {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}],
        "x-kubernetes-group-version-kind": {
            "group": resource.group, "version": resource.version, "kind": resource.kind,
        },
        "x-kubernetes-action": "patch",
        "responses": {"200": {"description": "OK"}},
    })
}

/// The media type of gnostic's protobuf `openapi_v2.Document` as kube-openapi answers it
/// (kubectl asks for the older `…spec.v2@v1.0+protobuf`, which Go's `mime` cannot parse
/// in a response).
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

const TITLE: &str = "Kubernetes";
const VERSION: &str = concat!("v1.32.0-kcm-", env!("CARGO_PKG_VERSION"));

/// `/openapi/v2` as JSON: a Swagger 2.0 document with no paths and no definitions.
pub fn v2() -> Value {
    json!({
        "swagger": "2.0",
        "info": {"title": TITLE, "version": VERSION},
        "paths": {},
        "definitions": {},
    })
}

/// `/openapi/v2` as gnostic's `openapi_v2.Document` protobuf: `swagger` (field 1) and
/// `info` (field 2: `title` 1, `version` 2); empty paths and definitions are absent.
pub fn v2_protobuf() -> Vec<u8> {
    let mut info = Vec::new();
    length_delimited(&mut info, 1, TITLE.as_bytes());
    length_delimited(&mut info, 2, VERSION.as_bytes());
    let mut document = Vec::new();
    length_delimited(&mut document, 1, b"2.0");
    length_delimited(&mut document, 2, &info);
    document
}

/// Appends protobuf field `field` of wire type 2 (length-delimited) holding `bytes`.
fn length_delimited(out: &mut Vec<u8>, field: u8, bytes: &[u8]) {
    out.push(field << 3 | 2);
    let mut length = bytes.len();
    while length >= 0x80 {
        out.push(u8::try_from(length & 0x7f).expect("seven bits") | 0x80);
        length >>= 7;
    }
    out.push(u8::try_from(length).expect("seven bits"));
    out.extend_from_slice(bytes);
}

/// A stable digest of a document, in the form kube-apiserver's hashes take.
fn hash(document: &Value) -> String {
    use std::hash::{Hash as _, Hasher as _};
    let text = document.to_string();
    let mut high = std::collections::hash_map::DefaultHasher::new();
    (0u8, &text).hash(&mut high);
    let mut low = std::collections::hash_map::DefaultHasher::new();
    (1u8, &text).hash(&mut low);
    format!("{:016X}{:016X}", high.finish(), low.finish())
}

/// `/openapi/v3`: each group-version's document, by its URL with its hash.
pub fn index() -> Value {
    let mut paths = Map::new();
    for (group, version) in group_versions() {
        let path = gv_path(group, version);
        let document = group_version_document(&path).expect("a served group-version");
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={}", hash(&document))}),
        );
    }
    json!({ "paths": paths })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_written_kind_has_a_patch_operation_with_field_validation() {
        let index = index();
        let url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");
        let apps = group_version_document("apis/apps/v1").unwrap();
        let patch =
            &apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "apps", "version": "v1", "kind": "Deployment"})
        );
        assert!(patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation"));
        let core = group_version_document("api/v1").unwrap();
        assert!(core["paths"]
            .get("/api/v1/namespaces/{namespace}/pods/{name}")
            .is_some());
        // Cluster-scoped kinds have one without a namespace; read-only kinds have none.
        assert!(core["paths"].get("/api/v1/nodes/{name}").is_some());
        assert!(core["paths"].get("/api/v1/namespaces/{name}").is_some());
        assert!(core["paths"]
            .get("/api/v1/namespaces/{namespace}/events/{name}")
            .is_none());
        assert!(group_version_document("apis/batch/v1").is_none());
    }

    #[test]
    fn the_v2_protobuf_is_swagger_2_and_its_info() {
        let info_len = 2 + TITLE.len() + 2 + VERSION.len();
        let mut expected = vec![0x0a, 3];
        expected.extend_from_slice(b"2.0");
        expected.extend_from_slice(&[0x12, u8::try_from(info_len).unwrap(), 0x0a]);
        expected.push(u8::try_from(TITLE.len()).unwrap());
        expected.extend_from_slice(TITLE.as_bytes());
        expected.push(0x12);
        expected.push(u8::try_from(VERSION.len()).unwrap());
        expected.extend_from_slice(VERSION.as_bytes());
        assert_eq!(v2_protobuf(), expected);
        assert_eq!(v2()["swagger"], "2.0");
    }

    #[test]
    fn lengths_of_128_and_more_take_two_bytes() {
        let mut out = Vec::new();
        length_delimited(&mut out, 9, &[0; 300]);
        assert_eq!(&out[..3], &[0x4a, 0xac, 0x02]);
        assert_eq!(out.len(), 303);
    }
}
