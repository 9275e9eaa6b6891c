//! Reads: get and list (2014's `resthandler.go`), from etcd or the watch cache by
//! kube-apiserver's `resourceVersion` rules, paged with `limit`/`continue`, as JSON, a
//! Table or metadata only; the scale subresource; the namespaces kcm synthesizes.
//!
//! A consistent list (`resourceVersion` unset, not paged) is served from the watch cache
//! once the cache has caught up with etcd's revision read for it (kube-apiserver 1.31's
//! consistent reads from cache), else from etcd: either way it reflects every write
//! acknowledged before it was asked.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine as _;
use serde_json::{json, Value};

use super::request::{Format, Query, Target};
use super::{bytes_response, json_response, ApiState};
use crate::apiserver::cache::{store_key, Item, WatchCache};
use crate::apiserver::errors::ApiError;
use crate::apiserver::fields::{FieldSelector, SelectableFields};
use crate::apiserver::resources::stable_uid;
use crate::apiserver::resources::Resource;
use crate::apiserver::table;
use crate::etcd_watcher::RawEvent;
use crate::labels::Selector;
use crate::registry::prefix_range_end;

/// Namespaces that always exist (kube-apiserver creates them at start).
pub(super) use crate::api::SYSTEM_NAMESPACES;

/// How long a read waits for the watch cache to reach a resourceVersion.
pub(super) const CACHE_WAIT: Duration = Duration::from_secs(3);

/// What selects the objects of a list or watch.
pub(super) struct Filter {
    selectable: &'static SelectableFields,
    pub(super) namespace: Option<String>,
    labels: Selector,
    fields: FieldSelector,
}

impl Filter {
    pub(super) fn new(target: &Target, query: &Query) -> Result<Filter, ApiError> {
        let labels: Selector = query
            .get("labelSelector")
            .unwrap_or("")
            .parse()
            .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
        let fields = FieldSelector::parse(query.get("fieldSelector").unwrap_or(""))
            .and_then(|fields| fields.convert(target.resource.plural, target.resource.fields))
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        Ok(Filter {
            selectable: target.resource.fields,
            namespace: target.namespace.clone(),
            labels,
            fields,
        })
    }

    pub(super) fn matches(&self, item: &Item) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|namespace| namespace == item.namespace())
            && self.labels.matches(&item.labels())
            && (self.fields.is_empty()
                || self.fields.matches_named(
                    self.selectable,
                    item.namespace(),
                    item.name(),
                    || item.object(),
                ))
    }
}

/// How a list reads: where, and at which revision.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ListPlan {
    /// From the watch cache once it has reached this revision (0: at once).
    Cache { not_older_than: i64 },
    /// Consistent (`resourceVersion` unset, not paged): from the watch cache once it has
    /// reached etcd's current revision, else from etcd
    /// ([`ConsistentReads`](crate::apiserver::cache::ConsistentReads)).
    Consistent,
    /// From etcd at this revision (0: the current one), after this key (continue).
    Etcd {
        revision: i64,
        after: Option<String>,
        limit: Option<i64>,
        exact: bool,
    },
}

/// kube-apiserver's rules for `resourceVersion`, `resourceVersionMatch`, `limit` and
/// `continue` on a list.
pub(super) fn plan_list(query: &Query) -> Result<ListPlan, ApiError> {
    let limit = query.number("limit")?.filter(|l| *l > 0);
    let rv = query.get("resourceVersion").unwrap_or("");
    let rv_match = query.get("resourceVersionMatch").unwrap_or("");
    if let Some(token) = query.get("continue").filter(|t| !t.is_empty()) {
        if !rv.is_empty() && rv != "0" {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        if !rv_match.is_empty() {
            return Err(ApiError::bad_request(
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        let (revision, after) = decode_continue(token)?;
        return Ok(ListPlan::Etcd {
            revision,
            after: Some(after),
            limit,
            exact: true,
        });
    }
    let parsed = if rv.is_empty() {
        None
    } else {
        Some(rv.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
            ApiError::bad_request(format!(
                "resourceVersion: Invalid value: {rv:?}: must be a non-negative integer"
            ))
        })?)
    };
    match (parsed, rv_match) {
        (None, "") if limit.is_none() => Ok(ListPlan::Consistent),
        (None, "") => Ok(ListPlan::Etcd {
            revision: 0,
            after: None,
            limit,
            exact: false,
        }),
        (None, _) => Err(ApiError::bad_request(
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        )),
        (Some(0), "" | "NotOlderThan") => Ok(ListPlan::Cache { not_older_than: 0 }),
        (Some(0), "Exact") => Err(ApiError::bad_request(
            "resourceVersionMatch \"Exact\" is forbidden for resourceVersion \"0\"",
        )),
        (Some(n), "NotOlderThan") => Ok(ListPlan::Cache { not_older_than: n }),
        (Some(n), "") if limit.is_none() => Ok(ListPlan::Cache { not_older_than: n }),
        (Some(n), "" | "Exact") => Ok(ListPlan::Etcd {
            revision: n,
            after: None,
            limit,
            exact: true,
        }),
        (Some(_), other) => Err(ApiError::bad_request(format!(
            "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
        ))),
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct ContinueToken {
    v: String,
    rv: i64,
    start: String,
}

/// An opaque token for the next page: the list's revision and the key after which it
/// goes on (kube-apiserver's `{"v":"meta.k8s.io/v1","rv":N,"start":KEY}`, base64).
pub(super) fn encode_continue(revision: i64, after: &str) -> String {
    let token = ContinueToken {
        v: "meta.k8s.io/v1".to_string(),
        rv: revision,
        start: after.to_string(),
    };
    base64::engine::general_purpose::URL_SAFE
        .encode(serde_json::to_vec(&token).expect("a token always encodes"))
}

pub(super) fn decode_continue(token: &str) -> Result<(i64, String), ApiError> {
    let invalid = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
    let bytes = base64::engine::general_purpose::URL_SAFE
        .decode(token)
        .map_err(|_| invalid("not base64"))?;
    let token: ContinueToken =
        serde_json::from_slice(&bytes).map_err(|_| invalid("not a continue token"))?;
    if token.v != "meta.k8s.io/v1" || token.rv <= 0 {
        return Err(invalid("unsupported version"));
    }
    Ok((token.rv, token.start))
}

/// A page of objects read.
pub(super) struct Page {
    pub(super) items: Vec<Arc<Item>>,
    pub(super) revision: i64,
    continue_token: Option<String>,
}

pub(super) async fn read(
    state: &Arc<ApiState>,
    target: Target,
    query: &Query,
    format: Format,
) -> Result<Response, ApiError> {
    let resource = target.resource;
    match (&target.name, target.subresource.as_deref()) {
        (None, _) => {
            let filter = Filter::new(&target, query)?;
            let page = list(state, &target, &filter, query).await?;
            Ok(list_response(resource, page, format, query))
        }
        (Some(name), None | Some("status")) => {
            if target.subresource.is_some()
                && !resource.subresources.iter().any(|s| s.name == "status")
            {
                return Err(ApiError::no_route());
            }
            let item = get(state, &target, name, query).await?;
            Ok(object_response(resource, &item, format, query))
        }
        (Some(name), Some("scale")) if resource.subresources.iter().any(|s| s.name == "scale") => {
            let item = get(state, &target, name, query).await?;
            Ok(json_response(StatusCode::OK, &scale(&item.object())))
        }
        _ => Err(ApiError::no_route()),
    }
}

pub(super) fn cache_of<'s>(
    state: &'s ApiState,
    resource: &Resource,
) -> Option<&'s Arc<WatchCache>> {
    state.caches.get(resource.plural)
}

/// Waits (a moment) for a cache's first list before it serves anything: before it, its
/// window would accept any resourceVersion and its store is empty, so a watch or cached
/// list answered then would silently miss what happened before the list.
///
/// # Errors
/// 429 when it has not listed within [`CACHE_WAIT`] (kube-apiserver's answer while its
/// storage initializes; clients retry).
pub(super) async fn synced(cache: &WatchCache) -> Result<(), ApiError> {
    if cache.is_synced() || cache.wait_for(1, CACHE_WAIT).await {
        return Ok(());
    }
    Err(ApiError::too_many_requests(format!(
        "the watch cache of {} is initializing (it has not listed etcd yet); retry",
        cache.codec().resource
    )))
}

/// One object: a consistent read from etcd unless `resourceVersion` allows the cache. A
/// namespace nobody created but that holds objects (or is a system one) is synthesized.
pub(super) async fn get(
    state: &ApiState,
    target: &Target,
    name: &str,
    query: &Query,
) -> Result<Arc<Item>, ApiError> {
    let stored = get_stored(state, target, name, query).await;
    match stored {
        Err(e) if e.code == 404 && target.resource.plural == "namespaces" => {
            let revision = namespace_revision(state);
            namespaces(state)
                .into_iter()
                .find(|n| n == name)
                .map(|n| Arc::new(namespace_item(&n, revision)))
                .ok_or(e)
        }
        other => other,
    }
}

async fn get_stored(
    state: &ApiState,
    target: &Target,
    name: &str,
    query: &Query,
) -> Result<Arc<Item>, ApiError> {
    let resource = target.resource;
    let namespace = target.namespace.as_deref().unwrap_or("");
    let not_found = || ApiError::not_found(resource.group, resource.plural, name);
    let Some(cache) = cache_of(state, resource) else {
        return Err(not_found());
    };
    let rv = query.get("resourceVersion").unwrap_or("");
    if !rv.is_empty() {
        synced(cache).await?;
        let wanted = rv.parse::<i64>().unwrap_or(0);
        if wanted > 0 && !cache.wait_fresh(wanted, CACHE_WAIT).await {
            return Err(ApiError::too_large_resource_version(
                wanted,
                cache.revision(),
            ));
        }
        return cache.get(namespace, name).0.ok_or_else(not_found);
    }
    let codec = cache.codec();
    let key = format!(
        "{}{}",
        codec.dir_key(state.registry.prefix()),
        store_key(namespace, name)
    );
    let mut end = key.clone().into_bytes();
    end.push(0);
    let mut page_size = 1;
    let page = state
        .registry
        .range_page(key.as_bytes(), &end, 0, &mut page_size)
        .await
        .map_err(|e| ApiError::internal(format!("{e:#}")))?;
    let kv = page.kvs.first().ok_or_else(not_found)?;
    let raw = RawEvent::from_kv(kv);
    codec
        .item(namespace, name, &raw)
        .map(Arc::new)
        .map_err(|e| {
            ApiError::internal(format!(
                "{} {}: the stored value does not decode: {e:#}",
                resource.plural,
                store_key(namespace, name)
            ))
        })
}

pub(super) async fn list(
    state: &ApiState,
    target: &Target,
    filter: &Filter,
    query: &Query,
) -> Result<Page, ApiError> {
    let mut page = list_stored(state, target, filter, query).await?;
    if target.resource.plural == "namespaces" && page.continue_token.is_none() {
        // The last page also lists the namespaces in use that nobody created.
        let stored: std::collections::BTreeSet<String> = page
            .items
            .iter()
            .map(|item| item.name().to_string())
            .collect();
        page.items.extend(
            namespaces(state)
                .into_iter()
                .filter(|n| !stored.contains(n))
                .map(|n| Arc::new(namespace_item(&n, page.revision)))
                .filter(|item| filter.matches(item)),
        );
        page.items.sort_by(|a, b| a.name().cmp(b.name()));
    }
    Ok(page)
}

async fn list_stored(
    state: &ApiState,
    target: &Target,
    filter: &Filter,
    query: &Query,
) -> Result<Page, ApiError> {
    let resource = target.resource;
    let Some(cache) = cache_of(state, resource) else {
        // Events: none recorded yet.
        return Ok(Page {
            items: Vec::new(),
            revision: namespace_revision(state),
            continue_token: None,
        });
    };
    match plan_list(query)? {
        ListPlan::Cache { not_older_than } => {
            synced(cache).await?;
            if not_older_than > 0 && !cache.wait_fresh(not_older_than, CACHE_WAIT).await {
                let current = current_revision(state).await?;
                if not_older_than > current {
                    return Err(ApiError::too_large_resource_version(
                        not_older_than,
                        current,
                    ));
                }
                // The cache is behind etcd: read etcd at its current revision instead.
                return list_etcd(state, cache, filter, 0, None, None, false).await;
            }
            let (items, revision) = cache.list(filter.namespace.as_deref());
            let items = items
                .into_iter()
                .filter(|item| filter.matches(item))
                .collect();
            Ok(Page {
                items,
                revision,
                continue_token: None,
            })
        }
        ListPlan::Consistent => {
            synced(cache).await?;
            // Read after the request arrived, so at least the revision of every write
            // acknowledged before it.
            let current = current_revision(state).await?;
            if !state.consistent_reads.fresh(cache, current).await {
                return list_etcd(state, cache, filter, 0, None, None, false).await;
            }
            let (items, revision) = cache.list(filter.namespace.as_deref());
            let items = items
                .into_iter()
                .filter(|item| filter.matches(item))
                .collect();
            Ok(Page {
                items,
                revision,
                continue_token: None,
            })
        }
        ListPlan::Etcd {
            revision,
            after,
            limit,
            exact,
        } => list_etcd(state, cache, filter, revision, after, limit, exact).await,
    }
}

/// etcd's current revision: a linearizable read of one key no object has (the prefix's
/// directory itself), so etcd sends a header and nothing else.
pub(super) async fn current_revision(state: &ApiState) -> Result<i64, ApiError> {
    let key = format!("{}/", state.registry.prefix());
    let mut end = key.clone().into_bytes();
    end.push(0);
    let mut page_size = 1;
    let page = state
        .registry
        .range_page(key.as_bytes(), &end, 0, &mut page_size)
        .await
        .map_err(|e| ApiError::unavailable(format!("{e:#}")))?;
    Ok(page.revision)
}

/// A list read from etcd at `revision` (0: current), starting after `after` (a key
/// relative to the resource's directory), at most `limit` matching objects.
pub(super) async fn list_etcd(
    state: &ApiState,
    cache: &WatchCache,
    filter: &Filter,
    revision: i64,
    after: Option<String>,
    limit: Option<i64>,
    exact: bool,
) -> Result<Page, ApiError> {
    let codec = cache.codec();
    let dir = codec.dir_key(state.registry.prefix());
    let range_start = match &filter.namespace {
        Some(namespace) => format!("{dir}{namespace}/"),
        None => dir.clone(),
    };
    let range_end = prefix_range_end(range_start.as_bytes());
    let mut start = match &after {
        Some(after) => {
            let mut key = format!("{dir}{after}").into_bytes();
            key.push(0);
            if key.as_slice() < range_start.as_bytes() {
                range_start.clone().into_bytes()
            } else {
                key
            }
        }
        None => range_start.clone().into_bytes(),
    };
    let wanted = limit.map_or(usize::MAX, |l| l as usize);
    let mut pinned = revision;
    let mut items = Vec::new();
    let mut page_size = limit.unwrap_or(state.registry.page_size()).max(1);
    loop {
        let page = state
            .registry
            .range_page(&start, &range_end, pinned, &mut page_size)
            .await
            .map_err(|e| {
                if e.is_compacted() {
                    if after.is_some() {
                        ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
                    } else {
                        ApiError::expired("The resourceVersion for the provided list is too old.")
                    }
                } else if exact && format!("{e:#}").contains("future revision") {
                    ApiError::too_large_resource_version(revision, 0)
                } else {
                    ApiError::unavailable(format!("{e:#}"))
                }
            })?;
        if pinned == 0 {
            pinned = page.revision;
        }
        let count = page.kvs.len();
        for (index, kv) in page.kvs.iter().enumerate() {
            let raw = RawEvent::from_kv(kv);
            let Some(rest) = raw.key.strip_prefix(&dir) else {
                continue;
            };
            let Some((namespace, name)) = codec.parse(rest) else {
                continue;
            };
            match codec.item(&namespace, &name, &raw) {
                Ok(item) if filter.matches(&item) => items.push(Arc::new(item)),
                Ok(_) => {}
                Err(e) => tracing::warn!(
                    key = %raw.key,
                    "{} {}: not served: the stored value does not decode: {e:#}",
                    codec.resource,
                    store_key(&namespace, &name)
                ),
            }
            if items.len() >= wanted {
                let last = index + 1 == count;
                let continue_token = (!last || page.more).then(|| encode_continue(pinned, rest));
                return Ok(Page {
                    items,
                    revision: pinned,
                    continue_token,
                });
            }
        }
        match page.next_start() {
            Some(next) => start = next,
            None => {
                return Ok(Page {
                    items,
                    revision: pinned,
                    continue_token: None,
                })
            }
        }
    }
}

pub(super) fn list_response(
    resource: &Resource,
    page: Page,
    format: Format,
    query: &Query,
) -> Response {
    let revision = page.revision.to_string();
    let mut metadata = json!({ "resourceVersion": revision });
    if let Some(token) = &page.continue_token {
        metadata["continue"] = Value::String(token.clone());
    }
    match format {
        Format::Json => {
            let mut body = format!(
                r#"{{"kind":"{}","apiVersion":"{}","metadata":{},"items":["#,
                resource.list_kind,
                resource.api_version(),
                metadata
            )
            .into_bytes();
            // Sized once: grown by doubling, a list of 10,000 pods touched twice its 7 MB of
            // fresh pages, each a page fault (`alloc.rs`).
            let items: usize = page.items.iter().map(|item| item.json().len() + 1).sum();
            body.reserve_exact(items + 2);
            for (index, item) in page.items.iter().enumerate() {
                if index > 0 {
                    body.push(b',');
                }
                body.extend_from_slice(item.json());
            }
            body.extend_from_slice(b"]}");
            bytes_response(format, true, body)
        }
        Format::Table => {
            let include = include_object(query);
            let table = table::table_json(
                resource.printer,
                page.items.iter().map(|item| item.table_source()),
                include,
                SystemTime::now(),
                &revision,
                page.continue_token.as_deref(),
                None,
                true,
            );
            bytes_response(format, true, table)
        }
        Format::Metadata => {
            let items: Vec<Value> = page.items.iter().map(|item| item_metadata(item)).collect();
            let list = json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": metadata,
                "items": items,
            });
            bytes_response(format, true, list.to_string().into_bytes())
        }
    }
}

pub(super) fn object_response(
    resource: &Resource,
    item: &Item,
    format: Format,
    query: &Query,
) -> Response {
    match format {
        Format::Json => bytes_response(format, false, item.json().to_vec()),
        Format::Table => bytes_response(
            format,
            false,
            item_table(resource, item, include_object(query), true),
        ),
        Format::Metadata => {
            bytes_response(format, false, item_metadata(item).to_string().into_bytes())
        }
    }
}

pub(super) fn include_object(query: &Query) -> table::IncludeObject {
    match query.get("includeObject") {
        Some("None") => table::IncludeObject::None,
        Some("Object") => table::IncludeObject::Object,
        _ => table::IncludeObject::Metadata,
    }
}

/// The Table of one item, encoded: a GET's, or a watch event's (with the column
/// definitions for the first).
pub(super) fn item_table(
    resource: &Resource,
    item: &Item,
    include: table::IncludeObject,
    with_columns: bool,
) -> Vec<u8> {
    table::table_json(
        resource.printer,
        [item.table_source()],
        include,
        SystemTime::now(),
        &item.revision.to_string(),
        None,
        None,
        with_columns,
    )
}

/// `item`'s `PartialObjectMetadata` (only its metadata decoded).
pub(super) fn item_metadata(item: &Item) -> Value {
    let metadata = item.metadata_json().map_or_else(
        || json!({}),
        |json| serde_json::from_slice(json).expect("the cache's own encoding decodes"),
    );
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
    })
}

/// The `autoscaling/v1` Scale of a controller (rc, rs, deployment).
pub(super) fn scale(object: &Value) -> Value {
    let metadata = &object["metadata"];
    let selector = match object.pointer("/spec/selector") {
        Some(Value::Object(map))
            if map.contains_key("matchLabels") || map.contains_key("matchExpressions") =>
        {
            serde_json::from_value::<crate::api::LabelSelector>(Value::Object(map.clone()))
                .ok()
                .and_then(|s| s.to_selector().ok())
                .map(|s| s.to_string())
                .unwrap_or_default()
        }
        Some(Value::Object(map)) => map
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|v| format!("{k}={v}")))
            .collect::<Vec<_>>()
            .join(","),
        _ => String::new(),
    };
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": metadata["name"],
            "namespace": metadata["namespace"],
            "uid": metadata["uid"],
            "resourceVersion": metadata["resourceVersion"],
            "creationTimestamp": metadata["creationTimestamp"],
        },
        "spec": { "replicas": object.pointer("/spec/replicas").cloned().unwrap_or(json!(1)) },
        "status": {
            "replicas": object.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector,
        },
    })
}

// ---------------------------------------------------------------------------------------
// Namespaces: 2014 had no Namespace objects; every namespace holding an object exists,
// and the four kube-apiserver creates, whether or not a Namespace is stored for it.

pub(super) fn namespaces(state: &ApiState) -> Vec<String> {
    let mut names: std::collections::BTreeSet<String> =
        SYSTEM_NAMESPACES.iter().map(|n| n.to_string()).collect();
    for cache in state.caches.values() {
        names.extend(cache.namespaces().into_iter().filter(|n| !n.is_empty()));
    }
    names.into_iter().collect()
}

/// The resourceVersion of a synthesized list: the highest any cache has reached.
pub(super) fn namespace_revision(state: &ApiState) -> i64 {
    state
        .caches
        .values()
        .map(|c| c.revision())
        .max()
        .unwrap_or(0)
}

pub(super) fn namespace_item(name: &str, revision: i64) -> Item {
    Item::new(
        "",
        name,
        revision,
        json!({
            "kind": "Namespace",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                "uid": stable_uid(&format!("namespace/{name}")),
                "labels": { "kubernetes.io/metadata.name": name },
            },
            "spec": { "finalizers": ["kubernetes"] },
            "status": { "phase": "Active" },
        }),
        &table::NAMESPACES,
    )
}

#[cfg(test)]
mod tests {
    use super::super::request::query;
    use super::*;

    #[test]
    fn list_resource_versions_follow_kube_apiservers_rules() {
        assert_eq!(plan_list(&query("")).unwrap(), ListPlan::Consistent);
        assert_eq!(plan_list(&query("limit=0")).unwrap(), ListPlan::Consistent);
        assert_eq!(
            plan_list(&query("limit=500")).unwrap(),
            ListPlan::Etcd {
                revision: 0,
                after: None,
                limit: Some(500),
                exact: false
            }
        );
        assert_eq!(
            plan_list(&query("limit=500&resourceVersion=0")).unwrap(),
            ListPlan::Cache { not_older_than: 0 }
        );
        assert_eq!(
            plan_list(&query("resourceVersion=104")).unwrap(),
            ListPlan::Cache {
                not_older_than: 104
            }
        );
        assert_eq!(
            plan_list(&query("resourceVersion=104&limit=2")).unwrap(),
            ListPlan::Etcd {
                revision: 104,
                after: None,
                limit: Some(2),
                exact: true
            }
        );
        assert_eq!(
            plan_list(&query("resourceVersion=104&resourceVersionMatch=Exact")).unwrap(),
            ListPlan::Etcd {
                revision: 104,
                after: None,
                limit: None,
                exact: true
            }
        );
        let token = encode_continue(77, "default/web-1");
        assert_eq!(
            plan_list(&query(&format!("limit=2&continue={token}"))).unwrap(),
            ListPlan::Etcd {
                revision: 77,
                after: Some("default/web-1".into()),
                limit: Some(2),
                exact: true
            }
        );
        for bad in [
            "resourceVersionMatch=Exact",
            "resourceVersion=x",
            "resourceVersion=0&resourceVersionMatch=Exact",
            "resourceVersion=3&resourceVersionMatch=Newest",
            "continue=garbage",
            "limit=ten",
        ] {
            assert_eq!(
                plan_list(&query(bad)).map_err(|e| e.code),
                Err(400),
                "{bad}"
            );
        }
    }
}
