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
#[cfg(test)]
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
mod tests;
