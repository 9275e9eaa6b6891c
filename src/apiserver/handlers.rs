//! Routes, reads and watches: 2014's `pkg/apiserver/apiserver.go` (routing),
//! `resthandler.go` (get and list) and `watch.go` (the HTTP watch), serving core/v1 and
//! apps/v1 with the later apiserver's query parameters (`labelSelector`,
//! `fieldSelector`, `limit`/`continue`, `resourceVersion`/`resourceVersionMatch`,
//! `allowWatchBookmarks`, `sendInitialEvents`, `timeoutSeconds`) and representations
//! (`Table`, `PartialObjectMetadata`).
//!
//! Which reads go where, as in kube-apiserver:
//! - a list or get with `resourceVersion` unset is a consistent read from etcd (at its
//!   current revision, paged with `limit`, continued with a token that pins that
//!   revision);
//! - `resourceVersion=0`, or `N` with `NotOlderThan` (or unset match and no limit), is
//!   served from the watch cache once it has reached N;
//! - `N` with `Exact`, or with a limit, is an etcd read at revision N (410 once compacted);
//! - every watch is served from the watch cache, but one from before its window, which
//!   gets an etcd watch of its own (from N; a 410 once etcd compacted N).
//!
//! Invariants: a watch delivers the events after its start exactly once and in order
//! (from the cache's window and then its broadcast, or from etcd), with the 2014 filter transitions (an
//! object modified out of the selector is DELETED, into it ADDED); it ends with an ERROR
//! 410 when it cannot (a resourceVersion etcd compacted), and never blocks the
//! cache (a watcher too far behind is ended).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use rand::Rng as _;
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::cache::{store_key, Event, Item, WatchCache};
use super::errors::ApiError;
use super::fields::FieldSelector;
use super::http::TokenFile;
use super::resources::{self, Resource};
use super::{discovery, table};
use crate::etcd_watcher::{RawEvent, RawItem, RawKind};
use crate::labels::Selector;
use crate::registry::{prefix_range_end, Registry};
use crate::status::Metrics;
use futures::StreamExt as _;

/// Namespaces that always exist (kube-apiserver creates them at start).
const SYSTEM_NAMESPACES: [&str; 4] = ["default", "kube-node-lease", "kube-public", "kube-system"];

/// How long a read waits for the watch cache to reach a resourceVersion.
const CACHE_WAIT: Duration = Duration::from_secs(3);

/// How often a watch with `allowWatchBookmarks` gets a BOOKMARK.
const BOOKMARK_PERIOD: Duration = Duration::from_secs(30);

/// A watch without `timeoutSeconds` lasts between this and twice this (kube-apiserver's
/// `--min-request-timeout`, 1800 s, randomised so that watchers do not reconnect together).
const MIN_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// Events written to a watch per chunk at most.
const EVENTS_PER_CHUNK: usize = 256;

/// What the handlers share.
pub struct ApiState {
    registry: Registry,
    /// For watches from before a cache's window (an etcd watch of their own).
    watcher: crate::etcd_watcher::Watcher,
    caches: BTreeMap<&'static str, Arc<WatchCache>>,
    metrics: Arc<Metrics>,
    tokens: Option<TokenFile>,
    watches: Arc<Semaphore>,
    max_watches: usize,
    pub request_timeout: Duration,
    address: std::net::SocketAddr,
    requests: Family<Vec<(&'static str, String)>, Counter>,
    longrunning: Family<Vec<(&'static str, &'static str)>, Gauge>,
    events_sent: Family<Vec<(&'static str, &'static str)>, Counter>,
    prometheus: prometheus_client::registry::Registry,
    /// Watches started, for logs.
    watch_ids: AtomicU64,
}

impl ApiState {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        registry: Registry,
        watcher: crate::etcd_watcher::Watcher,
        caches: BTreeMap<&'static str, Arc<WatchCache>>,
        metrics: Arc<Metrics>,
        tokens: Option<TokenFile>,
        max_watches: usize,
        request_timeout: Duration,
        address: std::net::SocketAddr,
    ) -> ApiState {
        let mut prometheus = prometheus_client::registry::Registry::default();
        let requests = Family::default();
        let longrunning = Family::default();
        let events_sent = Family::default();
        prometheus.register(
            "apiserver_request",
            "API requests by verb, resource and HTTP code",
            requests.clone(),
        );
        prometheus.register(
            "apiserver_longrunning_requests",
            "Watches being served, by resource",
            longrunning.clone(),
        );
        prometheus.register(
            "apiserver_watch_events_sent",
            "Events written to HTTP watches, by resource",
            events_sent.clone(),
        );
        ApiState {
            registry,
            watcher,
            caches,
            metrics,
            tokens,
            watches: Arc::new(Semaphore::new(max_watches)),
            max_watches,
            request_timeout,
            address,
            requests,
            longrunning,
            events_sent,
            prometheus,
            watch_ids: AtomicU64::new(0),
        }
    }

    /// Whether every watch cache has listed (`/readyz`).
    fn unsynced(&self) -> Vec<&'static str> {
        self.caches
            .iter()
            .filter(|(_, cache)| !cache.is_synced())
            .map(|(resource, _)| *resource)
            .collect()
    }

    fn render_metrics(&self) -> String {
        let mut text = self.metrics.render();
        if let Some(stripped) = text.strip_suffix("# EOF\n") {
            text.truncate(stripped.len());
        }
        prometheus_client::encoding::text::encode(&mut text, &self.prometheus)
            .expect("writing to a String cannot fail");
        text
    }
}

/// A deterministic UUID for a synthesized object (a node, a namespace).
pub fn stable_uid(seed: &str) -> String {
    use std::hash::{Hash as _, Hasher as _};
    let mut high = std::collections::hash_map::DefaultHasher::new();
    (0u8, seed).hash(&mut high);
    let mut low = std::collections::hash_map::DefaultHasher::new();
    (1u8, seed).hash(&mut low);
    let bits = (u128::from(high.finish()) << 64) | u128::from(low.finish());
    // A version-4-shaped UUID: kubectl and clients only compare uids.
    let bits = (bits & !(0xf << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    uuid::Uuid::from_u128(bits).to_string()
}

// ---------------------------------------------------------------------------------------
// Requests

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

    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }

    fn number(&self, key: &str) -> Result<Option<i64>, ApiError> {
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

/// The one handler: every request of the API goes through here.
pub async fn dispatch(
    state: Arc<ApiState>,
    method: Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    let path = uri.path().to_string();
    let query = Query::parse(uri.query());
    if let Some(tokens) = &state.tokens {
        if !tokens.authenticates(&headers)
            && !matches!(path.as_str(), "/healthz" | "/livez" | "/readyz")
        {
            return respond(
                &state,
                &method,
                "",
                ApiError::unauthorized().into_response(),
            );
        }
    }
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let result = route(&state, &method, &path, &query, accept.as_deref()).await;
    let resource = parse_path(&path).map_or("", |t| t.resource.plural);
    respond(
        &state,
        &method,
        resource,
        result.unwrap_or_else(IntoResponse::into_response),
    )
}

/// Counts the answer and returns it.
fn respond(
    state: &ApiState,
    method: &Method,
    resource: &'static str,
    response: Response,
) -> Response {
    state
        .requests
        .get_or_create(&vec![
            ("verb", method.as_str().to_string()),
            ("resource", resource.to_string()),
            ("code", response.status().as_u16().to_string()),
        ])
        .inc();
    response
}

async fn route(
    state: &Arc<ApiState>,
    method: &Method,
    path: &str,
    query: &Query,
    accept: Option<&str>,
) -> Result<Response, ApiError> {
    if method != Method::GET && method != Method::HEAD {
        let what = match parse_path(path) {
            Ok(target) => super::errors::qualified(target.resource.group, target.resource.plural),
            Err(_) => path.to_string(),
        };
        return Err(ApiError::method_not_allowed(method.as_str(), &what));
    }
    match path.trim_end_matches('/') {
        "/version" => Ok(json_response(
            StatusCode::OK,
            &discovery::version(env!("CARGO_PKG_VERSION")),
        )),
        "/healthz" | "/livez" => Ok(health(state, false)),
        "/readyz" => Ok(health(state, true)),
        "/metrics" => Ok((
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            state.render_metrics(),
        )
            .into_response()),
        "/api" => match accept.and_then(discovery::accepts_aggregated) {
            Some(version) => Ok(aggregated(version, discovery::aggregated_core(version))),
            None => Ok(json_response(
                StatusCode::OK,
                &discovery::api_versions(&state.address.to_string()),
            )),
        },
        "/apis" => match accept.and_then(discovery::accepts_aggregated) {
            Some(version) => Ok(aggregated(version, discovery::aggregated_groups(version))),
            None => Ok(json_response(StatusCode::OK, &discovery::api_group_list())),
        },
        "/api/v1" => Ok(json_response(
            StatusCode::OK,
            &discovery::api_resource_list("", "v1").ok_or_else(ApiError::no_route)?,
        )),
        other => {
            let segments: Vec<&str> = other.trim_matches('/').split('/').collect();
            match segments.as_slice() {
                ["apis", group] => Ok(json_response(
                    StatusCode::OK,
                    &discovery::api_group(group).ok_or_else(ApiError::no_route)?,
                )),
                ["apis", group, version] => Ok(json_response(
                    StatusCode::OK,
                    &discovery::api_resource_list(group, version).ok_or_else(ApiError::no_route)?,
                )),
                _ => {
                    let target = parse_path(other)?;
                    let format = negotiate(accept)?;
                    read(state, target, query, format).await
                }
            }
        }
    }
}

fn aggregated(version: &str, document: Value) -> Response {
    let content_type =
        format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, content_type)],
        document.to_string(),
    )
        .into_response()
}

fn health(state: &ApiState, ready: bool) -> Response {
    let mut problems = Vec::new();
    if ready {
        for resource in state.unsynced() {
            problems.push(format!("watch cache {resource}: not synced yet"));
        }
    }
    for (resource, since, why) in state.metrics.disconnected_watches() {
        if since > Duration::from_secs(10) {
            problems.push(format!(
                "watch cache {resource}: no etcd watch for {}s: {why}",
                since.as_secs()
            ));
        }
    }
    if problems.is_empty() {
        (StatusCode::OK, "ok").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, problems.join("\n")).into_response()
    }
}

fn json_response(code: StatusCode, value: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

fn bytes_response(format: Format, list: bool, body: Vec<u8>) -> Response {
    let content_type = match (format, list) {
        (Format::Json, _) => "application/json",
        (Format::Table, _) => "application/json;as=Table;v=v1;g=meta.k8s.io",
        (Format::Metadata, false) => "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
        (Format::Metadata, true) => {
            "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
        }
    };
    (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body).into_response()
}

// ---------------------------------------------------------------------------------------
// Reads

/// What selects the objects of a list or watch.
struct Filter {
    resource: &'static str,
    namespace: Option<String>,
    labels: Selector,
    fields: FieldSelector,
}

impl Filter {
    fn new(target: &Target, query: &Query) -> Result<Filter, ApiError> {
        let labels: Selector = query
            .get("labelSelector")
            .unwrap_or("")
            .parse()
            .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
        let fields = FieldSelector::parse(query.get("fieldSelector").unwrap_or(""))
            .and_then(|fields| fields.convert(target.resource.plural))
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        Ok(Filter {
            resource: target.resource.plural,
            namespace: target.namespace.clone(),
            labels,
            fields,
        })
    }

    fn matches(&self, item: &Item) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|namespace| namespace == item.namespace)
            && self.labels.matches(&item.labels)
            && self.fields.matches(self.resource, &item.object)
    }
}

/// How a list reads: where, and at which revision.
#[derive(Debug, PartialEq, Eq)]
enum ListPlan {
    /// From the watch cache once it has reached this revision (0: at once).
    Cache { not_older_than: i64 },
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
fn plan_list(query: &Query) -> Result<ListPlan, ApiError> {
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
struct ContinueToken {
    v: String,
    rv: i64,
    start: String,
}

/// An opaque token for the next page: the list's revision and the key after which it
/// goes on (kube-apiserver's `{"v":"meta.k8s.io/v1","rv":N,"start":KEY}`, base64).
fn encode_continue(revision: i64, after: &str) -> String {
    let token = ContinueToken {
        v: "meta.k8s.io/v1".to_string(),
        rv: revision,
        start: after.to_string(),
    };
    base64::engine::general_purpose::URL_SAFE
        .encode(serde_json::to_vec(&token).expect("a token always encodes"))
}

fn decode_continue(token: &str) -> Result<(i64, String), ApiError> {
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
struct Page {
    items: Vec<Arc<Item>>,
    revision: i64,
    continue_token: Option<String>,
}

async fn read(
    state: &Arc<ApiState>,
    target: Target,
    query: &Query,
    format: Format,
) -> Result<Response, ApiError> {
    let resource = target.resource;
    let watch = query.flag("watch");
    match (&target.name, target.subresource.as_deref()) {
        (None, _) if watch => self::watch(state, &target, query, format).await,
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
            Ok(json_response(StatusCode::OK, &scale(&item.object)))
        }
        _ => Err(ApiError::no_route()),
    }
}

fn cache_of<'s>(state: &'s ApiState, resource: &Resource) -> Option<&'s Arc<WatchCache>> {
    state.caches.get(resource.plural)
}

/// Waits (a moment) for a cache's first list before it serves anything: before it, its
/// window would accept any resourceVersion and its store is empty, so a watch or cached
/// list answered then would silently miss what happened before the list.
///
/// # Errors
/// 429 when it has not listed within [`CACHE_WAIT`] (kube-apiserver's answer while its
/// storage initializes; clients retry).
async fn synced(cache: &WatchCache) -> Result<(), ApiError> {
    if cache.is_synced() || cache.wait_for(1, CACHE_WAIT).await {
        return Ok(());
    }
    Err(ApiError::too_many_requests(format!(
        "the watch cache of {} is initializing (it has not listed etcd yet); retry",
        cache.codec().resource
    )))
}

/// One object: a consistent read from etcd unless `resourceVersion` allows the cache.
async fn get(
    state: &ApiState,
    target: &Target,
    name: &str,
    query: &Query,
) -> Result<Arc<Item>, ApiError> {
    let resource = target.resource;
    let namespace = target.namespace.as_deref().unwrap_or("");
    let not_found = || ApiError::not_found(resource.group, resource.plural, name);
    if resource.plural == "namespaces" {
        let revision = namespace_revision(state);
        return namespaces(state)
            .into_iter()
            .find(|n| n == name)
            .map(|n| Arc::new(namespace_item(&n, revision)))
            .ok_or_else(not_found);
    }
    let Some(cache) = cache_of(state, resource) else {
        return Err(not_found());
    };
    let rv = query.get("resourceVersion").unwrap_or("");
    if !rv.is_empty() {
        synced(cache).await?;
        let wanted = rv.parse::<i64>().unwrap_or(0);
        if wanted > 0 && !cache.wait_for(wanted, CACHE_WAIT).await {
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

async fn list(
    state: &ApiState,
    target: &Target,
    filter: &Filter,
    query: &Query,
) -> Result<Page, ApiError> {
    let resource = target.resource;
    if resource.plural == "namespaces" {
        let revision = namespace_revision(state);
        let items = namespaces(state)
            .into_iter()
            .map(|n| Arc::new(namespace_item(&n, revision)))
            .filter(|item| filter.matches(item))
            .collect();
        return Ok(Page {
            items,
            revision,
            continue_token: None,
        });
    }
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
            if not_older_than > 0 && !cache.wait_for(not_older_than, CACHE_WAIT).await {
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
        ListPlan::Etcd {
            revision,
            after,
            limit,
            exact,
        } => list_etcd(state, cache, filter, revision, after, limit, exact).await,
    }
}

/// etcd's current revision (a one-key read of the prefix).
async fn current_revision(state: &ApiState) -> Result<i64, ApiError> {
    let prefix = format!("{}/", state.registry.prefix());
    let mut page_size = 1;
    let page = state
        .registry
        .range_page(
            prefix.as_bytes(),
            &prefix_range_end(prefix.as_bytes()),
            0,
            &mut page_size,
        )
        .await
        .map_err(|e| ApiError::unavailable(format!("{e:#}")))?;
    Ok(page.revision)
}

/// A list read from etcd at `revision` (0: current), starting after `after` (a key
/// relative to the resource's directory), at most `limit` matching objects.
async fn list_etcd(
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

fn list_response(resource: &Resource, page: Page, format: Format, query: &Query) -> Response {
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
            for (index, item) in page.items.iter().enumerate() {
                if index > 0 {
                    body.push(b',');
                }
                body.extend_from_slice(&item.json);
            }
            body.extend_from_slice(b"]}");
            bytes_response(format, true, body)
        }
        Format::Table => {
            let objects: Vec<Value> = page.items.iter().map(|i| i.object.clone()).collect();
            let table = table::table(
                resource.plural,
                &objects,
                include_object(query),
                SystemTime::now(),
                &revision,
                page.continue_token.as_deref(),
                None,
                true,
            );
            bytes_response(format, true, table.to_string().into_bytes())
        }
        Format::Metadata => {
            let items: Vec<Value> = page
                .items
                .iter()
                .map(|i| partial_metadata(&i.object))
                .collect();
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

fn object_response(resource: &Resource, item: &Item, format: Format, query: &Query) -> Response {
    match format {
        Format::Json => bytes_response(format, false, item.json.clone()),
        Format::Table => {
            let table = table::table(
                resource.plural,
                std::slice::from_ref(&item.object),
                include_object(query),
                SystemTime::now(),
                &item.revision.to_string(),
                None,
                None,
                true,
            );
            bytes_response(format, false, table.to_string().into_bytes())
        }
        Format::Metadata => bytes_response(
            format,
            false,
            partial_metadata(&item.object).to_string().into_bytes(),
        ),
    }
}

fn include_object(query: &Query) -> table::IncludeObject {
    match query.get("includeObject") {
        Some("None") => table::IncludeObject::None,
        Some("Object") => table::IncludeObject::Object,
        _ => table::IncludeObject::Metadata,
    }
}

fn partial_metadata(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// The `autoscaling/v1` Scale of a controller (rc, rs, deployment).
fn scale(object: &Value) -> Value {
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
// and the four kube-apiserver creates.

fn namespaces(state: &ApiState) -> Vec<String> {
    let mut names: std::collections::BTreeSet<String> =
        SYSTEM_NAMESPACES.iter().map(|n| n.to_string()).collect();
    for cache in state.caches.values() {
        names.extend(cache.namespaces().into_iter().filter(|n| !n.is_empty()));
    }
    names.into_iter().collect()
}

/// The resourceVersion of a synthesized list: the highest any cache has reached.
fn namespace_revision(state: &ApiState) -> i64 {
    state
        .caches
        .values()
        .map(|c| c.revision())
        .max()
        .unwrap_or(0)
}

fn namespace_item(name: &str, revision: i64) -> Item {
    Item::new(
        String::new(),
        name.to_string(),
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
    )
}

// ---------------------------------------------------------------------------------------
// Watch

/// Where a watch starts.
enum WatchStart {
    /// The current state as ADDED, then the changes (`""`, `"0"`).
    Snapshot,
    /// The current state as ADDED, a BOOKMARK saying so, then the changes
    /// (`sendInitialEvents=true`).
    InitialEvents(i64),
    /// The changes after this revision.
    After(i64),
}

fn plan_watch(query: &Query) -> Result<WatchStart, ApiError> {
    let rv = query.get("resourceVersion").unwrap_or("");
    let revision = if rv.is_empty() {
        0
    } else {
        rv.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
            ApiError::bad_request(format!(
                "resourceVersion: Invalid value: {rv:?}: must be a non-negative integer"
            ))
        })?
    };
    match query.get("sendInitialEvents") {
        Some("true") => {
            if query.get("resourceVersionMatch") != Some("NotOlderThan") {
                return Err(ApiError::bad_request(
                    "sendInitialEvents: Forbidden: sendInitialEvents is allowed only with resourceVersionMatch set to \"NotOlderThan\"",
                ));
            }
            if !query.flag("allowWatchBookmarks") {
                return Err(ApiError::bad_request(
                    "allowWatchBookmarks: Forbidden: allowWatchBookmarks must be set with sendInitialEvents",
                ));
            }
            Ok(WatchStart::InitialEvents(revision))
        }
        Some("false") if revision > 0 => Ok(WatchStart::After(revision)),
        _ if revision == 0 => Ok(WatchStart::Snapshot),
        _ => Ok(WatchStart::After(revision)),
    }
}

async fn watch(
    state: &Arc<ApiState>,
    target: &Target,
    query: &Query,
    format: Format,
) -> Result<Response, ApiError> {
    let resource = target.resource;
    let filter = Filter::new(target, query)?;
    let start = plan_watch(query)?;
    let permit = state.watches.clone().try_acquire_owned().map_err(|_| {
        ApiError::too_many_requests(format!(
            "too many watches: this apiserver serves at most {} at once (--max-watches)",
            state.max_watches
        ))
    })?;
    let timeout = match query.number("timeoutSeconds")? {
        Some(seconds) if seconds > 0 => Duration::from_secs(seconds as u64),
        _ => {
            let extra = rand::thread_rng().gen_range(0..MIN_WATCH_TIMEOUT.as_secs());
            MIN_WATCH_TIMEOUT + Duration::from_secs(extra)
        }
    };
    let cache = cache_of(state, resource).cloned();
    if let Some(cache) = &cache {
        synced(cache).await?;
    }
    let mut lines: VecDeque<Bytes> = VecDeque::new();
    let (subscription, start_revision) = match (&cache, start) {
        // Namespaces and events have no cache: their current state, then nothing.
        (None, start) => {
            let page = list(state, target, &filter, &Query::default()).await?;
            let mut watch = Watch::new(resource, format, query, None, page.revision);
            if !matches!(start, WatchStart::After(_)) {
                for item in &page.items {
                    lines.push_back(watch.line("ADDED", item));
                }
            }
            if let WatchStart::InitialEvents(_) = start {
                lines.push_back(watch.bookmark(page.revision, true));
            }
            return Ok(watch_response(
                state, watch, lines, None, permit, timeout, format,
            ));
        }
        (Some(cache), WatchStart::Snapshot) => {
            let subscription = cache.subscribe_snapshot(filter.namespace.as_deref());
            let revision = subscription.revision;
            (subscription, revision)
        }
        (Some(cache), WatchStart::InitialEvents(revision)) => {
            if revision > 0 && !cache.wait_for(revision, CACHE_WAIT).await {
                return Err(ApiError::too_large_resource_version(
                    revision,
                    cache.revision(),
                ));
            }
            let subscription = cache.subscribe_snapshot(filter.namespace.as_deref());
            let revision = subscription.revision;
            (subscription, revision)
        }
        (Some(cache), WatchStart::After(revision)) => match cache.subscribe_from(revision) {
            Ok(subscription) => (subscription, revision),
            Err(too_old) => {
                // Before the window: an etcd watch of its own from N (etcd still holds
                // the history unless it compacted it; then one ERROR 410).
                tracing::debug!(
                    resource = resource.plural,
                    revision,
                    oldest = too_old.oldest,
                    "watch from before the cache's window; watching etcd from it"
                );
                let source = etcd_source(state, cache, revision);
                let watch = Watch::new(resource, format, query, Some(filter), revision);
                return Ok(watch_response(
                    state,
                    watch,
                    VecDeque::new(),
                    Some(source),
                    permit,
                    timeout,
                    format,
                ));
            }
        },
    };
    let mut watch = Watch::new(resource, format, query, Some(filter), start_revision);
    for event in &subscription.initial {
        if let Some(line) = watch.event_line(event) {
            lines.push_back(line);
        }
    }
    if query.get("sendInitialEvents") == Some("true") {
        lines.push_back(watch.bookmark(start_revision, true));
    }
    let id = state.watch_ids.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(
        id,
        resource = resource.plural,
        start_revision,
        "watch started"
    );
    Ok(watch_response(
        state,
        watch,
        lines,
        Some(Source::Cache(
            cache.expect("a cached resource"),
            subscription.rx,
        )),
        permit,
        timeout,
        format,
    ))
}

fn watch_content_type(format: Format) -> &'static str {
    match format {
        Format::Table => "application/json;as=Table;v=v1;g=meta.k8s.io",
        _ => "application/json",
    }
}

/// One HTTP watch's translation of cache events into lines.
struct Watch {
    resource: &'static Resource,
    format: Format,
    include: table::IncludeObject,
    filter: Option<Filter>,
    bookmarks: bool,
    /// The revision the watch starts after: events at or below it are not its own (a
    /// live event can be, when the client asked for a revision the cache had not reached).
    /// Compared with this and not with the last revision delivered, since one etcd
    /// transaction writes several keys at one revision.
    start: i64,
    /// The highest revision delivered so far (for bookmarks).
    revision: i64,
    /// Whether the Table's column definitions went out (in the first event only).
    columns_sent: bool,
}

impl Watch {
    fn new(
        resource: &'static Resource,
        format: Format,
        query: &Query,
        filter: Option<Filter>,
        revision: i64,
    ) -> Watch {
        Watch {
            resource,
            format,
            include: include_object(query),
            filter,
            bookmarks: query.flag("allowWatchBookmarks"),
            start: revision,
            revision,
            columns_sent: false,
        }
    }

    /// The 2014 translation (`etcd_tools_watch.go`'s `sendModify` on the filter): a
    /// change that moves an object into the selection is ADDED, out of it DELETED.
    fn event_line(&mut self, event: &Event) -> Option<Bytes> {
        let passes = |item: &Item| self.filter.as_ref().is_none_or(|f| f.matches(item));
        let kind = if event.deleted {
            passes(&event.object).then_some("DELETED")
        } else {
            match &event.prev {
                None => passes(&event.object).then_some("ADDED"),
                Some(prev) => match (passes(prev), passes(&event.object)) {
                    (true, true) => Some("MODIFIED"),
                    (false, true) => Some("ADDED"),
                    (true, false) => Some("DELETED"),
                    (false, false) => None,
                },
            }
        }?;
        Some(self.line(kind, &event.object))
    }

    fn line(&mut self, kind: &str, item: &Item) -> Bytes {
        self.revision = self.revision.max(item.revision);
        let mut line = format!(r#"{{"type":"{kind}","object":"#).into_bytes();
        match self.format {
            Format::Json => line.extend_from_slice(&item.json),
            Format::Table => {
                let table = table::table(
                    self.resource.plural,
                    std::slice::from_ref(&item.object),
                    self.include,
                    SystemTime::now(),
                    &item.revision.to_string(),
                    None,
                    None,
                    !self.columns_sent,
                );
                self.columns_sent = true;
                line.extend_from_slice(table.to_string().as_bytes());
            }
            Format::Metadata => {
                line.extend_from_slice(partial_metadata(&item.object).to_string().as_bytes())
            }
        }
        line.extend_from_slice(b"}\n");
        Bytes::from(line)
    }

    fn bookmark(&mut self, revision: i64, initial_events_end: bool) -> Bytes {
        self.revision = self.revision.max(revision);
        let mut metadata = json!({ "resourceVersion": revision.to_string() });
        if initial_events_end {
            metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        let object = json!({
            "kind": self.resource.kind,
            "apiVersion": self.resource.api_version(),
            "metadata": metadata,
        });
        Bytes::from(format!(
            "{}\n",
            json!({ "type": "BOOKMARK", "object": object })
        ))
    }
}

/// Where a watch's events come from.
enum Source {
    /// The resource's watch cache (every watch from inside its window).
    Cache(
        Arc<WatchCache>,
        tokio::sync::broadcast::Receiver<Arc<Event>>,
    ),
    /// An etcd watch of its own, for a watch from before the cache's window.
    Etcd {
        cache: Arc<WatchCache>,
        /// The resource's directory key (`{prefix}/pods/`).
        start: String,
        raw: crate::etcd_watcher::RawWatch,
    },
}

/// An etcd watch of `cache`'s resource from after `revision`, with previous values (for
/// the filter transitions).
fn etcd_source(state: &ApiState, cache: &Arc<WatchCache>, revision: i64) -> Source {
    let start = cache.codec().dir_key(state.registry.prefix());
    let config = crate::etcd_watcher::EngineConfig {
        range: crate::etcd_watcher::Range {
            end: prefix_range_end(start.as_bytes()),
            watched_key: Some(start.clone()),
            start: start.clone(),
        },
        start: crate::etcd_watcher::Start::After(revision),
        resume: true,
        prev_kv: true,
        backoff: crate::etcd_watcher::BackoffConfig::default(),
        metrics: Arc::default(),
    };
    Source::Etcd {
        cache: cache.clone(),
        start,
        raw: state.watcher.engine(config).into_stream(),
    }
}

/// One etcd event as a cache event: the object decoded, its previous state from the
/// event's previous value. `None` for a key of another layout, a value that does not
/// decode, or a delete whose previous value etcd no longer had.
fn event_from_etcd(cache: &WatchCache, start: &str, raw: &RawEvent) -> Option<Event> {
    let codec = cache.codec();
    let (namespace, name) = codec.parse(raw.key.strip_prefix(start)?)?;
    let prev = raw.prev.as_ref().and_then(|(value, mod_revision)| {
        let previous = RawEvent {
            value: value.clone(),
            mod_revision: *mod_revision,
            prev: None,
            kind: RawKind::Put,
            ..raw.clone()
        };
        codec.item(&namespace, &name, &previous).ok().map(Arc::new)
    });
    match raw.kind {
        RawKind::Put => {
            let item = codec.item(&namespace, &name, raw).ok()?;
            Some(Event {
                object: Arc::new(item),
                // A create has no previous state.
                prev: if raw.create_revision == raw.mod_revision {
                    None
                } else {
                    prev
                },
                deleted: false,
            })
        }
        RawKind::Delete => {
            let prev = prev?;
            Some(Event {
                object: Arc::new(prev.stamped(raw.mod_revision)),
                prev: Some(prev),
                deleted: true,
            })
        }
    }
}

/// What a watch's body stream holds between chunks.
struct WatchBody {
    watch: Watch,
    pending: VecDeque<Bytes>,
    source: Option<Source>,
    deadline: tokio::time::Instant,
    next_bookmark: tokio::time::Instant,
    done: bool,
    _permit: OwnedSemaphorePermit,
    _gauge: GaugeGuard,
    sent: Counter,
}

/// Counts a watch in `apiserver_longrunning_requests` while it lives.
struct GaugeGuard(Gauge);

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

fn watch_response(
    state: &ApiState,
    watch: Watch,
    pending: VecDeque<Bytes>,
    source: Option<Source>,
    permit: OwnedSemaphorePermit,
    timeout: Duration,
    format: Format,
) -> Response {
    let labels = vec![("resource", watch.resource.plural), ("verb", "WATCH")];
    let gauge = state.longrunning.get_or_create(&labels).clone();
    gauge.inc();
    let sent = state
        .events_sent
        .get_or_create(&vec![
            ("resource", watch.resource.plural),
            ("verb", "WATCH"),
        ])
        .clone();
    let now = tokio::time::Instant::now();
    let body = WatchBody {
        watch,
        pending,
        source,
        deadline: now + timeout,
        next_bookmark: now + BOOKMARK_PERIOD,
        done: false,
        _permit: permit,
        _gauge: GaugeGuard(gauge),
        sent,
    };
    let stream = futures::stream::unfold(body, |mut body| async move {
        let chunk = body.next_chunk().await?;
        Some((Ok::<_, std::convert::Infallible>(chunk), body))
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, watch_content_type(format))],
        Body::from_stream(stream),
    )
        .into_response()
}

impl WatchBody {
    /// A periodic BOOKMARK at `revision`, and the next one a period later.
    fn bookmark(&mut self, revision: i64) {
        self.next_bookmark += BOOKMARK_PERIOD;
        let line = self.watch.bookmark(revision, false);
        self.pending.push_back(line);
    }

    /// The next bytes to write; `None` ends the stream.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            if !self.pending.is_empty() {
                let mut chunk = Vec::new();
                while let Some(line) = self.pending.pop_front() {
                    chunk.extend_from_slice(&line);
                    if chunk.len() > 64 * 1024 {
                        break;
                    }
                }
                return Some(Bytes::from(chunk));
            }
            if self.done {
                return None;
            }
            let source = match &mut self.source {
                None => {
                    // Nothing changes: wait for the end (or bookmarks).
                    tokio::select! {
                        _ = tokio::time::sleep_until(self.deadline) => return None,
                        _ = tokio::time::sleep_until(self.next_bookmark), if self.watch.bookmarks => {
                            self.bookmark(self.watch.revision);
                            continue;
                        }
                    }
                }
                Some(source) => source,
            };
            let (cache, rx) = match source {
                Source::Cache(cache, rx) => (cache, rx),
                Source::Etcd { cache, start, raw } => {
                    let item = tokio::select! {
                        biased;
                        _ = tokio::time::sleep_until(self.deadline) => return None,
                        _ = tokio::time::sleep_until(self.next_bookmark), if self.watch.bookmarks => {
                            self.bookmark(self.watch.revision);
                            continue;
                        }
                        item = raw.next() => item,
                    };
                    let (cache, start) = (cache.clone(), start.clone());
                    match item {
                        Some(RawItem::Events(raw_events)) => {
                            for raw_event in &raw_events {
                                let Some(event) = event_from_etcd(&cache, &start, raw_event) else {
                                    continue;
                                };
                                if event.revision() <= self.watch.start {
                                    continue;
                                }
                                if let Some(line) = self.watch.event_line(&event) {
                                    self.sent.inc();
                                    self.pending.push_back(line);
                                }
                            }
                        }
                        Some(RawItem::Progress(_) | RawItem::Resumed { .. }) => {}
                        // Compacted (at the start, or later while resuming): the client
                        // must list again.
                        Some(
                            RawItem::Ended(_)
                            | RawItem::Page { .. }
                            | RawItem::Listed { .. }
                            | RawItem::ListFailed,
                        )
                        | None => {
                            let status = ApiError::expired(format!(
                                "too old resource version: {} ({})",
                                self.watch.revision,
                                cache.revision()
                            ))
                            .status();
                            self.done = true;
                            self.pending.push_back(Bytes::from(format!(
                                "{}\n",
                                json!({ "type": "ERROR", "object": status })
                            )));
                        }
                    }
                    continue;
                }
            };
            let received = tokio::select! {
                biased;
                _ = tokio::time::sleep_until(self.deadline) => return None,
                _ = tokio::time::sleep_until(self.next_bookmark), if self.watch.bookmarks => {
                    let revision = cache.revision().max(self.watch.revision);
                    self.bookmark(revision);
                    continue;
                }
                received = rx.recv() => received,
            };
            let mut events = Vec::new();
            match received {
                Ok(event) => events.push(event),
                Err(RecvError::Lagged(missed)) => {
                    // Too slow: end the stream; the client watches again from the last
                    // resourceVersion it saw (still in the window, most likely).
                    tracing::debug!(
                        resource = self.watch.resource.plural,
                        missed,
                        "watch too far behind; ending it"
                    );
                    return None;
                }
                Err(RecvError::Closed) => {
                    // The cache started a new history (etcd's revision went backwards).
                    let status = ApiError::expired(
                        "the watch cache was reset: etcd's revision went backwards; list again",
                    )
                    .status();
                    self.done = true;
                    self.pending.push_back(Bytes::from(format!(
                        "{}\n",
                        json!({ "type": "ERROR", "object": status })
                    )));
                    continue;
                }
            }
            while events.len() < EVENTS_PER_CHUNK {
                match rx.try_recv() {
                    Ok(event) => events.push(event),
                    Err(_) => break,
                }
            }
            for event in events {
                if event.revision() <= self.watch.start {
                    continue;
                }
                if let Some(line) = self.watch.event_line(&event) {
                    self.sent.inc();
                    self.pending.push_back(line);
                }
            }
        }
    }
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

    fn query(q: &str) -> Query {
        Query::parse(Some(q))
    }

    #[test]
    fn list_resource_versions_follow_kube_apiservers_rules() {
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

    #[test]
    fn watch_starts_follow_the_resource_version_and_initial_events() {
        assert!(matches!(
            plan_watch(&query("watch=true")).unwrap(),
            WatchStart::Snapshot
        ));
        assert!(matches!(
            plan_watch(&query("resourceVersion=0")).unwrap(),
            WatchStart::Snapshot
        ));
        assert!(matches!(
            plan_watch(&query("resourceVersion=9")).unwrap(),
            WatchStart::After(9)
        ));
        assert!(matches!(
            plan_watch(&query("sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=0")).unwrap(),
            WatchStart::InitialEvents(0)
        ));
        assert_eq!(
            plan_watch(&query("sendInitialEvents=true"))
                .map_err(|e| e.code)
                .err(),
            Some(400)
        );
    }

    #[test]
    fn stable_uids_are_uuids_that_depend_only_on_the_seed() {
        let a = stable_uid("node/node-1/5");
        assert_eq!(a, stable_uid("node/node-1/5"));
        assert_ne!(a, stable_uid("node/node-1/6"));
        assert!(uuid::Uuid::parse_str(&a).is_ok(), "{a}");
    }
}
