//! The published schema of the kinds kcm serves (Kubernetes 1.32, [`schemas`]) as
//! OpenAPI: `/openapi/v3` (the index of group-versions) and one document per group-version
//! with the schemas of its kinds and of everything they refer to, and `/openapi/v2` (every
//! definition, as JSON; gnostic's protobuf is an empty document).
//!
//! What kubectl reads: `kubectl explain` finds a resource's kind through a path of its
//! group-version document (`/api/v1/namespaces/{namespace}/pods` and `…/{name}`, each
//! operation tagged with `x-kubernetes-group-version-kind`), then the schema tagged with
//! that kind in `components.schemas`, and follows `$ref`s from there. Its default
//! `--validate=strict` looks for a `patch` operation of the kind that lists the
//! `fieldValidation` parameter (`cli-runtime/pkg/resource/query_param_verifier_v3.go`) before
//! a create or apply, and then sends `fieldValidation=Strict`; without it kubectl falls back
//! to `/openapi/v2` and validates client-side. It does that for a `v1 List` whatever the v3
//! documents say (the verifier never reports support for `List`), over the protobuf
//! `/openapi/v2`, which is empty so that kubectl skips every kind (it holds no schema for
//! them) and leaves validation to the server; without it `kubectl create -f list.yaml`
//! fails with "the server could not find the requested resource".
//!
//! Invariants: a document's `hash` (in the index's `serverRelativeURL`, kubectl's cache key)
//! is a digest of the document itself, so it changes exactly when the document does; the
//! documents are built once, on first use, from the served resources ([`RESOURCES`]) and the
//! schema data.

mod schemas;
/// The one parse of the served schema, for the other readers of it (strategic merge
/// patches' list strategies).
pub(crate) use schemas::schemas;
pub mod strict;
pub mod validate;

use std::sync::OnceLock;

use serde_json::{json, Map, Value};

use self::schemas::REF_PREFIX;
use super::resources::{Resource, RESOURCES};

/// The meta kinds every group-version document carries beside its own kinds' schemas: what
/// every API answers or accepts besides the kinds themselves.
const META_SCHEMAS: &[&str] = &[
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
    "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
];

/// Each kind kcm serves (`Scale` included, in the group and version it is served in) with
/// its definition: the roots written objects are checked from.
fn served_definitions() -> Vec<(&'static str, &'static Value)> {
    let schemas = schemas();
    let mut found: Vec<(&'static str, &'static Value)> = Vec::new();
    for resource in RESOURCES {
        let own = (resource.group, resource.version, resource.kind);
        let subresources = resource
            .subresources
            .iter()
            .map(|subresource| (subresource.group, subresource.version, subresource.kind));
        for (group, version, kind) in std::iter::once(own).chain(subresources) {
            let definition = schemas
                .name_of(group, version, kind)
                .and_then(|name| schemas.by_name.get(name));
            if let Some(definition) = definition {
                if !found.iter().any(|(seen, _)| *seen == kind) {
                    found.push((kind, definition));
                }
            }
        }
    }
    found
}

/// The served schema of `kind` (`Scale` included), if kcm serves it: looked up in the
/// served definitions, found once (every write asks, several times).
pub(crate) fn definition_of(kind: &str) -> Option<&'static Value> {
    static SERVED: std::sync::OnceLock<Vec<(&'static str, &'static Value)>> =
        std::sync::OnceLock::new();
    SERVED
        .get_or_init(served_definitions)
        .iter()
        .find_map(|&(served, definition)| (served == kind).then_some(definition))
}

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

/// The documents, serialized once: `/openapi/v3`, each group-version's, `/openapi/v2`.
struct Documents {
    index: String,
    /// (`api/v1`, its document).
    group_versions: Vec<(String, String)>,
    v2: String,
}

fn documents() -> &'static Documents {
    static DOCUMENTS: OnceLock<Documents> = OnceLock::new();
    DOCUMENTS.get_or_init(|| {
        let mut paths = Map::new();
        let mut group_version_documents = Vec::new();
        for (group, version) in group_versions() {
            let path = gv_path(group, version);
            let document = group_version_document_value(group, version).to_string();
            paths.insert(
                path.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={}", hash(&document))}),
            );
            group_version_documents.push((path, document));
        }
        Documents {
            index: json!({ "paths": paths }).to_string(),
            group_versions: group_version_documents,
            v2: v2_value().to_string(),
        }
    })
}

/// `/openapi/v3`: each group-version's document, by its URL with its hash (JSON).
pub fn index() -> &'static str {
    &documents().index
}

/// The document of one group-version (`api/v1`, `apis/apps/v1`) as JSON, if kcm serves it.
pub fn group_version_document(path: &str) -> Option<&'static str> {
    documents()
        .group_versions
        .iter()
        .find(|(served, _)| served == path)
        .map(|(_, document)| document.as_str())
}

/// `/openapi/v2` as JSON: a Swagger 2.0 document with every definition and no paths.
pub fn v2() -> &'static str {
    &documents().v2
}

fn group_version_document_value(group: &str, version: &str) -> Value {
    let schemas = schemas();
    let resources: Vec<&Resource> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    let mut paths = Map::new();
    let mut roots: Vec<&str> = META_SCHEMAS.to_vec();
    for resource in &resources {
        let kind = schemas.name_of(resource.group, resource.version, resource.kind);
        let list = schemas.name_of(resource.group, resource.version, resource.list_kind);
        roots.extend(kind.into_iter().chain(list));
        roots.extend(
            resource
                .subresources
                .iter()
                .filter_map(|sub| schemas.name_of(sub.group, sub.version, sub.kind)),
        );
        let (collection, object) = resource_paths(resource);
        paths.insert(
            collection,
            json!({"get": operation(resource, "list", list)}),
        );
        let mut operations = Map::new();
        operations.insert("get".into(), operation(resource, "get", kind));
        if resource.verbs.contains(&"patch") {
            operations.insert("patch".into(), patch_operation(resource, kind));
        }
        paths.insert(object, Value::Object(operations));
    }
    let components: Map<String, Value> = schemas
        .closure(roots)
        .into_iter()
        .map(|name| {
            let schema = schemas.by_name[&name].clone();
            (name, schema)
        })
        .collect();
    json!({
        "openapi": "3.0.0",
        "info": {"title": TITLE, "version": VERSION},
        "paths": paths,
        "components": {"schemas": components},
    })
}

/// A resource's collection path and object path (`…/pods`, `…/pods/{name}`).
fn resource_paths(resource: &Resource) -> (String, String) {
    let root = format!("/{}", gv_path(resource.group, resource.version));
    let collection = if resource.namespaced {
        format!("{root}/namespaces/{{namespace}}/{}", resource.plural)
    } else {
        format!("{root}/{}", resource.plural)
    };
    let object = format!("{collection}/{{name}}");
    (collection, object)
}

fn group_version_kind(resource: &Resource) -> Value {
    json!({"group": resource.group, "version": resource.version, "kind": resource.kind})
}

/// The `200` response, answering the schema called `answer` when there is one.
fn responses(answer: Option<&str>) -> Value {
    match answer {
        Some(name) => json!({"200": {
            "description": "OK",
            "content": {"application/json": {"schema": {"$ref": format!("{REF_PREFIX}{name}")}}},
        }}),
        None => json!({"200": {"description": "OK"}}),
    }
}

/// A `get` or `list` operation of `resource`, answering the schema `answer`.
fn operation(resource: &Resource, action: &str, answer: Option<&str>) -> Value {
    json!({
        "operationId": format!("{action}{}", resource.kind),
        "x-kubernetes-group-version-kind": group_version_kind(resource),
        "x-kubernetes-action": action,
        "responses": responses(answer),
    })
}

fn patch_operation(resource: &Resource, answer: Option<&str>) -> Value {
    let query = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
    json!({
        "operationId": format!("patch{}", resource.kind),
        "parameters": [query("dryRun"), query("fieldManager"), query("fieldValidation"),
                       {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}],
        "x-kubernetes-group-version-kind": group_version_kind(resource),
        "x-kubernetes-action": "patch",
        "responses": responses(answer),
    })
}

/// `/openapi/v2` as JSON: every definition in Swagger 2.0 form.
fn v2_value() -> Value {
    let definitions: Map<String, Value> = schemas()
        .by_name
        .iter()
        .map(|(name, schema)| (name.clone(), to_swagger(schema)))
        .collect();
    json!({
        "swagger": "2.0",
        "info": {"title": TITLE, "version": VERSION},
        "paths": {},
        "definitions": definitions,
    })
}

/// A v3 schema in Swagger 2.0 form: references to `#/definitions/`, and a `oneOf` of two
/// types (IntOrString, Quantity) as the one `type: string` Swagger 2.0 publishes for them.
fn to_swagger(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("$ref", Value::String(reference)) => {
                        let name = reference.strip_prefix(REF_PREFIX).unwrap_or(reference);
                        out.insert(key.clone(), json!(format!("#/definitions/{name}")));
                    }
                    ("oneOf", _) => {
                        out.insert("type".into(), json!("string"));
                    }
                    _ => {
                        out.insert(key.clone(), to_swagger(value));
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(values) => Value::Array(values.iter().map(to_swagger).collect()),
        other => other.clone(),
    }
}

/// The media type of gnostic's protobuf `openapi_v2.Document` as kube-openapi answers it
/// (kubectl asks for the older `…spec.v2@v1.0+protobuf`, which Go's `mime` cannot parse
/// in a response).
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

const TITLE: &str = "Kubernetes";
const VERSION: &str = concat!("v1.32.0-kcm-", env!("CARGO_PKG_VERSION"));

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
fn hash(text: &str) -> String {
    use std::hash::{Hash as _, Hasher as _};
    let mut high = std::collections::hash_map::DefaultHasher::new();
    (0u8, &text).hash(&mut high);
    let mut low = std::collections::hash_map::DefaultHasher::new();
    (1u8, &text).hash(&mut low);
    format!("{:016X}{:016X}", high.finish(), low.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(path: &str) -> Value {
        serde_json::from_str(group_version_document(path).expect("served")).unwrap()
    }

    #[test]
    fn each_written_kind_has_a_patch_operation_with_field_validation() {
        let index: Value = serde_json::from_str(index()).unwrap();
        let url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");
        assert!(url.ends_with(&hash(group_version_document("apis/apps/v1").unwrap())));
        let apps = document("apis/apps/v1");
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
        let core = document("api/v1");
        assert!(core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]
            .get("patch")
            .is_some());
        // Cluster-scoped kinds have one without a namespace.
        assert!(core["paths"]["/api/v1/nodes/{name}"].get("patch").is_some());
        assert!(core["paths"]["/api/v1/namespaces/{name}"]
            .get("patch")
            .is_some());
        assert!(
            core["paths"]["/api/v1/namespaces/{namespace}/events/{name}"]
                .get("patch")
                .is_some()
        );
        assert!(group_version_document("apis/batch/v1").is_none());
    }

    #[test]
    fn every_served_kind_is_found_through_its_paths_and_its_schema() {
        for resource in RESOURCES {
            let document = document(&gv_path(resource.group, resource.version));
            let (collection, object) = resource_paths(resource);
            for (path, action) in [(collection, "list"), (object, "get")] {
                let operation = &document["paths"][&path]["get"];
                assert_eq!(operation["x-kubernetes-action"], action, "{path}");
                assert_eq!(
                    operation["x-kubernetes-group-version-kind"],
                    group_version_kind(resource),
                    "{path}"
                );
            }
            let schemas = document["components"]["schemas"].as_object().unwrap();
            for kind in [resource.kind, resource.list_kind] {
                let tagged = schemas.values().any(|schema| {
                    schema["x-kubernetes-group-version-kind"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|gvk| {
                            gvk["group"] == resource.group
                                && gvk["version"] == resource.version
                                && gvk["kind"] == kind
                        })
                });
                assert!(tagged, "no schema of {kind} in {}", resource.api_version());
            }
            // Every reference resolves inside the document.
            let text = document.to_string();
            for piece in text.split(&format!("\"{REF_PREFIX}")).skip(1) {
                let name = &piece[..piece.find('"').unwrap()];
                assert!(schemas.contains_key(name), "{name} missing");
            }
        }
        let apps = document("apis/apps/v1");
        assert!(apps["components"]["schemas"]
            .get("io.k8s.api.autoscaling.v1.Scale")
            .is_some());
        assert!(apps["components"]["schemas"]
            .get("io.k8s.api.core.v1.Node")
            .is_none());
    }

    #[test]
    fn v2_definitions_are_in_swagger_form() {
        let document: Value = serde_json::from_str(v2()).unwrap();
        let definitions = &document["definitions"];
        assert_eq!(
            definitions["io.k8s.api.core.v1.Pod"]["properties"]["spec"]["$ref"],
            "#/definitions/io.k8s.api.core.v1.PodSpec"
        );
        let int_or_string = &definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"];
        assert_eq!(int_or_string["type"], "string");
        assert_eq!(int_or_string["format"], "int-or-string");
        assert!(int_or_string.get("oneOf").is_none());
        assert!(!v2().contains(REF_PREFIX));
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
    }

    #[test]
    fn lengths_of_128_and_more_take_two_bytes() {
        let mut out = Vec::new();
        length_delimited(&mut out, 9, &[0; 300]);
        assert_eq!(&out[..3], &[0x4a, 0xac, 0x02]);
        assert_eq!(out.len(), 303);
    }
}
