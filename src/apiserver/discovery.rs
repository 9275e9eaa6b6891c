//! The discovery documents of `kcm apiserver`: `/version`, aggregated discovery (`/api`,
//! `/apis` as `APIGroupDiscoveryList`) and legacy discovery (`APIVersions`,
//! `APIGroupList`, `APIGroup`, `APIResourceList`), built from the resource table.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/endpoints/discovery/aggregated` (handler and
//! negotiation of `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`),
//! the types of `staging/src/k8s.io/api/apidiscovery/v2` and `v2beta1` (same shape),
//! `staging/src/k8s.io/apiserver/pkg/endpoints/discovery/{legacy,root,group,version}.go`,
//! `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/types.go` (`APIVersions`,
//! `APIGroupList`, `APIGroup`, `APIResourceList`, `APIResource`) and
//! `staging/src/k8s.io/component-base/version` (`/version`, `Info`).
//!
//! Invariants:
//! - every document is a pure function of [`super::resources::RESOURCES`] (and of its
//!   arguments): it lists every resource of the group/version asked for, with its
//!   subresources, short names and categories, and nothing else;
//! - keys appear in the order Go's `encoding/json` writes the struct fields, empty
//!   optional lists (`shortNames`, `categories`, `subresources`) are left out as the
//!   `omitempty` tags do, and required ones (`verbs`) are always present;
//! - unknown groups and versions give `None`, which the server answers with 404;
//! - [`accepts_aggregated`] answers aggregated only when the first acceptable media
//!   range asks for it, so a client that prefers plain JSON gets the legacy form.

use serde_json::{json, Map, Value};

use super::resources::{self, group_version, Resource};

/// The group of the aggregated discovery types.
pub(crate) const DISCOVERY_GROUP: &str = "apidiscovery.k8s.io";

/// The aggregated discovery versions kcm answers, preferred first.
pub(crate) const AGGREGATED_VERSIONS: &[&str] = &["v2", "v2beta1"];

/// The `as=` parameter that asks for aggregated discovery.
const AGGREGATED_KIND: &str = "APIGroupDiscoveryList";

/// The Kubernetes release kcm's API claims to be: kubectl's dispatcher picks the kubectl
/// binary by this minor, and 32 makes it run its own 1.32.
pub(crate) const KUBERNETES_MAJOR: &str = "1";
/// See [`KUBERNETES_MAJOR`].
pub(crate) const KUBERNETES_MINOR: &str = "32";

/// The `/version` document (`version.Info`): Kubernetes 1.32 with kcm's version as a
/// pre-release tag, `gitVersion` `v1.32.0-kcm.<crate_version>`. `buildDate` is
/// component-base's default for unstamped builds, so the document stays a pure function.
pub(crate) fn version(crate_version: &str) -> Value {
    json!({
        "major": KUBERNETES_MAJOR,
        "minor": KUBERNETES_MINOR,
        "gitVersion": format!("v{KUBERNETES_MAJOR}.{KUBERNETES_MINOR}.0-kcm.{crate_version}"),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "rust",
        "compiler": "rustc",
        "platform": go_platform(std::env::consts::OS, std::env::consts::ARCH),
    })
}

/// `os/arch` as Go spells it (`GOOS/GOARCH`): Rust's `x86_64` is Go's `amd64`,
/// `aarch64` is `arm64`, `x86` is `386`, `powerpc64` is `ppc64`, `loongarch64` is
/// `loong64`; the others are spelled alike.
pub(crate) fn go_platform(os: &str, arch: &str) -> String {
    let arch = match arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64",
        "loongarch64" => "loong64",
        other => other,
    };
    format!("{os}/{arch}")
}

/// The `Content-Type` of an aggregated discovery answer in `discovery_version` (`v2` or
/// `v2beta1`).
pub(crate) fn aggregated_content_type(discovery_version: &str) -> String {
    format!("application/json;g={DISCOVERY_GROUP};v={discovery_version};as={AGGREGATED_KIND}")
}

/// Aggregated discovery for `/api`: an `APIGroupDiscoveryList` with one item, the core
/// group (`metadata.name` ""), in `discovery_version` (`v2` or `v2beta1`).
pub(crate) fn aggregated_core(discovery_version: &str) -> Value {
    group_discovery_list(discovery_version, |group| group == resources::CORE_GROUP)
}

/// Aggregated discovery for `/apis`: an `APIGroupDiscoveryList` with one item per served
/// named group (`apps`), in `discovery_version` (`v2` or `v2beta1`).
pub(crate) fn aggregated_groups(discovery_version: &str) -> Value {
    group_discovery_list(discovery_version, |group| group != resources::CORE_GROUP)
}

fn group_discovery_list(discovery_version: &str, include: impl Fn(&str) -> bool) -> Value {
    let items: Vec<Value> = resources::groups()
        .into_iter()
        .filter(|group| include(group))
        .map(group_discovery)
        .collect();
    json!({
        "kind": AGGREGATED_KIND,
        "apiVersion": format!("{DISCOVERY_GROUP}/{discovery_version}"),
        "metadata": {},
        "items": items,
    })
}

/// One `APIGroupDiscovery`: the group's versions, preferred first.
fn group_discovery(group: &str) -> Value {
    let versions: Vec<Value> = resources::versions_of(group)
        .into_iter()
        .map(|version| {
            let resources: Vec<Value> = resources::resources_in(group, version)
                .map(resource_discovery)
                .collect();
            json!({"version": version, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({
        "metadata": {"name": group, "creationTimestamp": null},
        "versions": versions,
    })
}

/// One `APIResourceDiscovery`.
fn resource_discovery(resource: &Resource) -> Value {
    let mut entry = Map::new();
    entry.insert("resource".into(), json!(resource.plural));
    entry.insert(
        "responseKind".into(),
        group_version_kind(resource.group, resource.version, resource.kind),
    );
    entry.insert("scope".into(), json!(resource.scope()));
    entry.insert("singularResource".into(), json!(resource.singular));
    entry.insert("verbs".into(), json!(resource.verbs));
    insert_unless_empty(&mut entry, "shortNames", resource.short_names);
    insert_unless_empty(&mut entry, "categories", resource.categories);
    if !resource.subresources.is_empty() {
        let subresources: Vec<Value> = resource
            .subresources
            .iter()
            .map(|sub| {
                json!({
                    "subresource": sub.name,
                    "responseKind": group_version_kind(sub.group, sub.version, sub.kind),
                    "verbs": sub.verbs,
                })
            })
            .collect();
        entry.insert("subresources".into(), Value::Array(subresources));
    }
    Value::Object(entry)
}

fn group_version_kind(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

fn insert_unless_empty(entry: &mut Map<String, Value>, key: &str, values: &[&str]) {
    if !values.is_empty() {
        entry.insert(key.into(), json!(values));
    }
}

/// Legacy `/api`: `APIVersions` listing `v1`, reachable at `server_address` (`host:port`)
/// from every client network.
pub(crate) fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": resources::versions_of(resources::CORE_GROUP),
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    })
}

/// Legacy `/apis`: `APIGroupList` of every served named group (`apps`).
pub(crate) fn api_group_list() -> Value {
    let groups: Vec<Value> = resources::groups()
        .into_iter()
        .filter(|group| *group != resources::CORE_GROUP)
        .map(api_group_body)
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// Legacy `/apis/{group}`: the `APIGroup` of a served named group; `None` for the core
/// group (served at `/api`) and for groups kcm does not serve.
pub(crate) fn api_group(group: &str) -> Option<Value> {
    if group == resources::CORE_GROUP || resources::versions_of(group).is_empty() {
        return None;
    }
    let mut document = Map::new();
    document.insert("kind".into(), json!("APIGroup"));
    document.insert("apiVersion".into(), json!("v1"));
    if let Value::Object(body) = api_group_body(group) {
        document.extend(body);
    }
    Some(Value::Object(document))
}

/// The fields of an `APIGroup` without its type meta (as `APIGroupList` nests it).
fn api_group_body(group: &str) -> Value {
    let versions: Vec<Value> = resources::versions_of(group)
        .into_iter()
        .map(|version| group_version_for_discovery(group, version))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": versions, "preferredVersion": preferred})
}

fn group_version_for_discovery(group: &str, version: &str) -> Value {
    json!({"groupVersion": group_version(group, version), "version": version})
}

/// Legacy `/api/v1` and `/apis/{group}/{version}`: the `APIResourceList` of a served
/// group/version, each resource followed by its subresources (`pods/status`,
/// `deployments/scale`); `None` for a group/version kcm does not serve.
pub(crate) fn api_resource_list(group: &str, version: &str) -> Option<Value> {
    if !resources::serves_group_version(group, version) {
        return None;
    }
    let mut entries = Vec::new();
    for resource in resources::resources_in(group, version) {
        entries.push(api_resource(resource));
        for sub in resource.subresources {
            let mut entry = Map::new();
            entry.insert(
                "name".into(),
                json!(format!("{}/{}", resource.plural, sub.name)),
            );
            entry.insert("singularName".into(), json!(""));
            entry.insert("namespaced".into(), json!(resource.namespaced));
            // `group` and `version` are omitted when they are the list's own.
            if (sub.group, sub.version) != (resource.group, resource.version) {
                entry.insert("group".into(), json!(sub.group));
                entry.insert("version".into(), json!(sub.version));
            }
            entry.insert("kind".into(), json!(sub.kind));
            entry.insert("verbs".into(), json!(sub.verbs));
            entries.push(Value::Object(entry));
        }
    }
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version(group, version),
        "resources": entries,
    }))
}

/// One legacy `APIResource` (`storageVersionHash` left out: it is optional and only
/// steers storage migration).
fn api_resource(resource: &Resource) -> Value {
    let mut entry = Map::new();
    entry.insert("name".into(), json!(resource.plural));
    entry.insert("singularName".into(), json!(resource.singular));
    entry.insert("namespaced".into(), json!(resource.namespaced));
    entry.insert("kind".into(), json!(resource.kind));
    entry.insert("verbs".into(), json!(resource.verbs));
    insert_unless_empty(&mut entry, "shortNames", resource.short_names);
    insert_unless_empty(&mut entry, "categories", resource.categories);
    Value::Object(entry)
}

/// Reads an `Accept` header and says which aggregated discovery version to answer with
/// (`Some("v2")`, `Some("v2beta1")`), or `None` for the legacy form.
///
/// Media ranges are taken in the order written and the first one kcm can serve wins:
/// `application/json` with `as=APIGroupDiscoveryList`, `g=apidiscovery.k8s.io` and `v=`
/// one of [`AGGREGATED_VERSIONS`] selects aggregated; `application/json`, `application/*`
/// or `*/*` without `as` selects legacy. Anything else (protobuf, another `as`, another
/// version) is skipped, as is a range with `q=0`. Parameters may come in any order, with
/// spaces around `;`, `,` and `=` and with quoted values; type, subtype and parameter
/// names are compared ASCII case-insensitively. An empty or missing header is legacy.
pub(crate) fn accepts_aggregated(accept_header: &str) -> Option<&'static str> {
    for range in accept_header.split(',') {
        match classify_media_range(range) {
            Acceptable::Aggregated(version) => return Some(version),
            Acceptable::Legacy => return None,
            Acceptable::No => {}
        }
    }
    None
}

enum Acceptable {
    Aggregated(&'static str),
    Legacy,
    No,
}

fn classify_media_range(range: &str) -> Acceptable {
    let mut parts = range.split(';');
    let media_type = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let (mut as_kind, mut group, mut version) = (None, None, None);
    for parameter in parts {
        let Some((name, value)) = parameter.split_once('=') else {
            continue;
        };
        let value = value.trim().trim_matches('"');
        match name.trim().to_ascii_lowercase().as_str() {
            "as" => as_kind = Some(value),
            "g" => group = Some(value),
            "v" => version = Some(value),
            "q" if is_zero_quality(value) => return Acceptable::No,
            _ => {}
        }
    }
    let json_like = matches!(
        media_type.as_str(),
        "application/json" | "application/*" | "*/*"
    );
    match as_kind {
        None if json_like => Acceptable::Legacy,
        Some(AGGREGATED_KIND) if media_type == "application/json" => match (group, version) {
            (Some(DISCOVERY_GROUP), Some(version)) => AGGREGATED_VERSIONS
                .iter()
                .find(|known| **known == version)
                .map_or(Acceptable::No, |known| Acceptable::Aggregated(known)),
            _ => Acceptable::No,
        },
        _ => Acceptable::No,
    }
}

fn is_zero_quality(value: &str) -> bool {
    value.parse::<f64>().is_ok_and(|q| q == 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kubectl 1.32's (and kube-rs's) Accept for `/api` and `/apis` (traces/01).
    const KUBECTL_DISCOVERY_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    /// kubectl's Accept for the legacy `/api/v1` and `/apis/apps/v1` (traces/01).
    const KUBECTL_LEGACY_ACCEPT: &str = "application/json, */*";

    #[track_caller]
    fn check_accept(header: &str, expected: Option<&str>) {
        assert_eq!(accepts_aggregated(header), expected, "Accept: {header}");
    }

    #[test]
    fn kubectls_discovery_accept_selects_v2() {
        check_accept(KUBECTL_DISCOVERY_ACCEPT, Some("v2"));
    }

    #[test]
    fn accept_headers_select_the_first_form_kcm_can_serve() {
        let cases: &[(&str, Option<&str>)] = &[
            ("application/json", None),
            (KUBECTL_LEGACY_ACCEPT, None),
            ("application/json, */*", None),
            ("*/*", None),
            ("", None),
            (
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
                Some("v2beta1"),
            ),
            // parameters in any order, spaces and quotes tolerated, names any case
            (
                "application/json; as=APIGroupDiscoveryList ; v=v2 ;g=apidiscovery.k8s.io",
                Some("v2"),
            ),
            (
                " Application/JSON;AS=\"APIGroupDiscoveryList\";G=apidiscovery.k8s.io;V=v2 ",
                Some("v2"),
            ),
            // plain JSON written first wins over a later aggregated range
            (
                "application/json,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
                None,
            ),
            // unknown discovery version, group or kind are skipped, not fatal
            (
                "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
                Some("v2beta1"),
            ),
            (
                "application/json;g=example.com;v=v2;as=APIGroupDiscoveryList,application/json",
                None,
            ),
            ("application/json;g=apidiscovery.k8s.io;v=v2", None),
            ("application/json;as=Table;v=v1;g=meta.k8s.io", None),
            // protobuf cannot be served: skipped, then JSON aggregated is taken
            (
                "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
                Some("v2"),
            ),
            ("application/vnd.kubernetes.protobuf", None),
            // q=0 means "not acceptable"
            (
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0,application/json",
                None,
            ),
            (
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0.5",
                Some("v2"),
            ),
        ];
        for (header, expected) in cases {
            check_accept(header, *expected);
        }
    }

    #[test]
    fn version_reports_kubernetes_1_32_with_kcms_version() {
        let document = version("0.1.0");
        assert_eq!(document["major"], "1");
        assert_eq!(document["minor"], "32");
        assert_eq!(document["gitVersion"], "v1.32.0-kcm.0.1.0");
        assert_eq!(document["gitTreeState"], "clean");
        assert_eq!(document["goVersion"], "rust");
        assert_eq!(document["compiler"], "rustc");
        let keys: Vec<&str> = document
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "major",
                "minor",
                "gitVersion",
                "gitCommit",
                "gitTreeState",
                "buildDate",
                "goVersion",
                "compiler",
                "platform"
            ]
        );
        let platform = document["platform"].as_str().unwrap();
        assert!(platform.starts_with(std::env::consts::OS), "{platform}");
        assert!(!platform.contains("x86_64") && !platform.contains("aarch64"));
    }

    #[test]
    fn platforms_are_spelled_as_go_spells_them() {
        let cases = [
            ("linux", "x86_64", "linux/amd64"),
            ("linux", "aarch64", "linux/arm64"),
            ("linux", "x86", "linux/386"),
            ("linux", "s390x", "linux/s390x"),
            ("linux", "riscv64", "linux/riscv64"),
            ("macos", "aarch64", "macos/arm64"),
        ];
        for (os, arch, expected) in cases {
            assert_eq!(go_platform(os, arch), expected, "{os} {arch}");
        }
    }

    /// What the aggregated entry of one resource must be, written out in full.
    #[track_caller]
    fn check_aggregated_resource(document: &Value, plural: &str, expected: Value) {
        let entries = document["items"][0]["versions"][0]["resources"]
            .as_array()
            .expect("resources");
        let entry = entries
            .iter()
            .find(|entry| entry["resource"] == plural)
            .unwrap_or_else(|| panic!("{plural} missing from {document}"));
        assert_eq!(*entry, expected, "{plural}");
    }

    #[test]
    fn aggregated_core_lists_every_core_resource() {
        let document = aggregated_core("v2");
        assert_eq!(document["kind"], "APIGroupDiscoveryList");
        assert_eq!(document["apiVersion"], "apidiscovery.k8s.io/v2");
        assert_eq!(document["metadata"], json!({}));
        let items = document["items"].as_array().unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0]["metadata"]["name"], "");
        let versions = items[0]["versions"].as_array().unwrap();
        assert_eq!(versions.len(), 1);
        assert_eq!(versions[0]["version"], "v1");
        assert_eq!(versions[0]["freshness"], "Current");
        let plurals: Vec<&str> = versions[0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["resource"].as_str().unwrap())
            .collect();
        assert_eq!(
            plurals,
            [
                "configmaps",
                "endpoints",
                "events",
                "namespaces",
                "nodes",
                "pods",
                "replicationcontrollers",
                "secrets",
                "serviceaccounts",
                "services"
            ]
        );
        let get = json!(["get", "patch", "update"]);
        let read = json!(["get", "list", "watch"]);
        let write = json!([
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ]);
        check_aggregated_resource(
            &document,
            "pods",
            json!({
                "resource": "pods",
                "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                "scope": "Namespaced",
                "singularResource": "pod",
                "verbs": write,
                "shortNames": ["po"],
                "categories": ["all"],
                "subresources": [
                    {"subresource": "status",
                     "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                     "verbs": get},
                ],
            }),
        );
        check_aggregated_resource(
            &document,
            "replicationcontrollers",
            json!({
                "resource": "replicationcontrollers",
                "responseKind": {"group": "", "version": "v1", "kind": "ReplicationController"},
                "scope": "Namespaced",
                "singularResource": "replicationcontroller",
                "verbs": write,
                "shortNames": ["rc"],
                "categories": ["all"],
                "subresources": [
                    {"subresource": "scale",
                     "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                     "verbs": get},
                    {"subresource": "status",
                     "responseKind": {"group": "", "version": "v1", "kind": "ReplicationController"},
                     "verbs": get},
                ],
            }),
        );
        check_aggregated_resource(
            &document,
            "services",
            json!({
                "resource": "services",
                "responseKind": {"group": "", "version": "v1", "kind": "Service"},
                "scope": "Namespaced",
                "singularResource": "service",
                "verbs": write,
                "shortNames": ["svc"],
                "categories": ["all"],
                "subresources": [
                    {"subresource": "status",
                     "responseKind": {"group": "", "version": "v1", "kind": "Service"},
                     "verbs": get},
                ],
            }),
        );
        check_aggregated_resource(
            &document,
            "endpoints",
            json!({
                "resource": "endpoints",
                "responseKind": {"group": "", "version": "v1", "kind": "Endpoints"},
                "scope": "Namespaced",
                "singularResource": "endpoints",
                "verbs": write,
                "shortNames": ["ep"],
            }),
        );
        check_aggregated_resource(
            &document,
            "events",
            json!({
                "resource": "events",
                "responseKind": {"group": "", "version": "v1", "kind": "Event"},
                "scope": "Namespaced",
                "singularResource": "event",
                "verbs": read,
                "shortNames": ["ev"],
            }),
        );
        check_aggregated_resource(
            &document,
            "namespaces",
            json!({
                "resource": "namespaces",
                "responseKind": {"group": "", "version": "v1", "kind": "Namespace"},
                "scope": "Cluster",
                "singularResource": "namespace",
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                "shortNames": ["ns"],
            }),
        );
        check_aggregated_resource(
            &document,
            "nodes",
            json!({
                "resource": "nodes",
                "responseKind": {"group": "", "version": "v1", "kind": "Node"},
                "scope": "Cluster",
                "singularResource": "node",
                "verbs": ["delete", "get", "list", "patch", "update", "watch"],
                "shortNames": ["no"],
            }),
        );
    }

    #[test]
    fn aggregated_groups_lists_apps_with_scale_and_status() {
        let document = aggregated_groups("v2");
        let items = document["items"].as_array().unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(
            items[0]["metadata"],
            json!({"name": "apps", "creationTimestamp": null})
        );
        assert_eq!(
            items[1]["metadata"],
            json!({"name": "coordination.k8s.io", "creationTimestamp": null})
        );
        let get = json!(["get", "patch", "update"]);
        let write = json!([
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ]);
        for (plural, singular, kind, short) in [
            ("deployments", "deployment", "Deployment", "deploy"),
            ("replicasets", "replicaset", "ReplicaSet", "rs"),
        ] {
            check_aggregated_resource(
                &document,
                plural,
                json!({
                    "resource": plural,
                    "responseKind": {"group": "apps", "version": "v1", "kind": kind},
                    "scope": "Namespaced",
                    "singularResource": singular,
                    "verbs": write,
                    "shortNames": [short],
                    "categories": ["all"],
                    "subresources": [
                        {"subresource": "scale",
                         "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                         "verbs": get},
                        {"subresource": "status",
                         "responseKind": {"group": "apps", "version": "v1", "kind": kind},
                         "verbs": get},
                    ],
                }),
            );
        }
        assert_eq!(
            document["items"][0]["versions"][0]["resources"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn aggregated_documents_keep_go_field_order() {
        let document = aggregated_groups("v2");
        let keys =
            |value: &Value| -> Vec<String> { value.as_object().unwrap().keys().cloned().collect() };
        assert_eq!(keys(&document), ["kind", "apiVersion", "metadata", "items"]);
        let version = &document["items"][0]["versions"][0];
        assert_eq!(keys(version), ["version", "resources", "freshness"]);
        assert_eq!(
            keys(&version["resources"][0]),
            [
                "resource",
                "responseKind",
                "scope",
                "singularResource",
                "verbs",
                "shortNames",
                "categories",
                "subresources"
            ]
        );
        assert_eq!(
            keys(&version["resources"][0]["subresources"][0]),
            ["subresource", "responseKind", "verbs"]
        );
    }

    #[test]
    fn v2beta1_has_the_same_shape_under_its_own_api_version() {
        for (v2, v2beta1) in [
            (aggregated_core("v2"), aggregated_core("v2beta1")),
            (aggregated_groups("v2"), aggregated_groups("v2beta1")),
        ] {
            assert_eq!(v2beta1["apiVersion"], "apidiscovery.k8s.io/v2beta1");
            assert_eq!(v2beta1["items"], v2["items"]);
        }
        assert_eq!(
            aggregated_content_type("v2beta1"),
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
        );
        // what kcm answers, the server sends back as the Content-Type kubectl checks
        let answer = accepts_aggregated(KUBECTL_DISCOVERY_ACCEPT).unwrap();
        assert_eq!(
            aggregated_content_type(answer),
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        );
    }

    #[test]
    fn every_resource_is_in_exactly_one_aggregated_document() {
        let core = aggregated_core("v2");
        let groups = aggregated_groups("v2");
        let mut listed = 0;
        for resource in resources::RESOURCES {
            let (document, other) = if resource.is_core() {
                (&core, &groups)
            } else {
                (&groups, &core)
            };
            let contains = |document: &Value| {
                document["items"].as_array().unwrap().iter().any(|item| {
                    item["versions"][0]["resources"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|r| r["resource"] == resource.plural)
                })
            };
            assert!(contains(document), "{}", resource.plural);
            assert!(!contains(other), "{}", resource.plural);
            listed += 1;
        }
        assert_eq!(listed, resources::RESOURCES.len());
    }

    #[test]
    fn legacy_api_lists_v1_at_the_server_address() {
        assert_eq!(
            api_versions("127.0.0.1:8080"),
            json!({
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:8080"}
                ],
            })
        );
    }

    #[test]
    fn legacy_apis_lists_apps_v1_preferred() {
        let apps = json!({
            "name": "apps",
            "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"},
        });
        let coordination = json!({
            "name": "coordination.k8s.io",
            "versions": [{"groupVersion": "coordination.k8s.io/v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": "coordination.k8s.io/v1", "version": "v1"},
        });
        assert_eq!(
            api_group_list(),
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [apps, coordination]})
        );
        let mut group = json!({"kind": "APIGroup", "apiVersion": "v1"});
        group
            .as_object_mut()
            .unwrap()
            .extend(apps.as_object().unwrap().clone());
        assert_eq!(api_group("apps"), Some(group));
        assert_eq!(api_group(""), None);
        assert_eq!(api_group("batch"), None);
    }

    #[test]
    fn legacy_resource_lists_have_resources_then_their_subresources() {
        let core = api_resource_list("", "v1").unwrap();
        assert_eq!(core["kind"], "APIResourceList");
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["groupVersion"], "v1");
        let names: Vec<&str> = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "configmaps",
                "endpoints",
                "events",
                "namespaces",
                "nodes",
                "pods",
                "pods/status",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "replicationcontrollers/status",
                "secrets",
                "serviceaccounts",
                "services",
                "services/status"
            ]
        );
        let entry = |list: &Value, name: &str| -> Value {
            list["resources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"] == name)
                .cloned()
                .unwrap_or_else(|| panic!("{name} missing"))
        };
        let write = json!([
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ]);
        let sub = json!(["get", "patch", "update"]);
        assert_eq!(
            entry(&core, "pods"),
            json!({"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
                   "verbs": write, "shortNames": ["po"], "categories": ["all"]})
        );
        assert_eq!(
            entry(&core, "nodes"),
            json!({"name": "nodes", "singularName": "node", "namespaced": false, "kind": "Node",
                   "verbs": ["delete", "get", "list", "patch", "update", "watch"],
                   "shortNames": ["no"]})
        );
        assert_eq!(
            entry(&core, "pods/status"),
            json!({"name": "pods/status", "singularName": "", "namespaced": true, "kind": "Pod",
                   "verbs": sub})
        );
        assert_eq!(
            entry(&core, "replicationcontrollers/scale"),
            json!({"name": "replicationcontrollers/scale", "singularName": "", "namespaced": true,
                   "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": sub})
        );

        let apps = api_resource_list("apps", "v1").unwrap();
        assert_eq!(apps["groupVersion"], "apps/v1");
        assert_eq!(
            entry(&apps, "deployments"),
            json!({"name": "deployments", "singularName": "deployment", "namespaced": true,
                   "kind": "Deployment", "verbs": write, "shortNames": ["deploy"],
                   "categories": ["all"]})
        );
        assert_eq!(
            entry(&apps, "deployments/scale"),
            json!({"name": "deployments/scale", "singularName": "", "namespaced": true,
                   "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": sub})
        );
        assert_eq!(
            entry(&apps, "replicasets/status"),
            json!({"name": "replicasets/status", "singularName": "", "namespaced": true,
                   "kind": "ReplicaSet", "verbs": sub})
        );
        assert_eq!(apps["resources"].as_array().unwrap().len(), 6);
    }

    #[test]
    fn unknown_group_versions_have_no_resource_list() {
        for (group, version) in [("", "v2"), ("apps", "v1beta1"), ("batch", "v1"), ("", "")] {
            assert_eq!(api_resource_list(group, version), None, "{group}/{version}");
        }
    }
}
