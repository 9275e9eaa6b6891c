//! Routes: 2014's `pkg/apiserver/apiserver.go`, serving core/v1 and apps/v1 with the later
//! apiserver's query parameters and representations. What a request asks for is parsed in
//! `request`; reads (2014's `resthandler.go`) are in `read`, the HTTP watch (`watch.go`)
//! in `watch`; the writes of the typed kinds in `create`, `update` (PUT and PATCH,
//! `status`), `scale` and `delete`, on what they share in `write` (the one
//! read-modify-write) and `body` (request bodies, `fieldValidation`), with what differs
//! between the kinds in one strategy per kind (`strategy`, as Kubernetes' `strategy.go`);
//! the writes of the kinds stored as JSON documents in their served version (namespaces,
//! nodes, configmaps, secrets, serviceaccounts, leases) in `documents`, with theirs
//! named by their registry rows (`resources/`). `route_write` is where a typed kind meets its Rust type, once. Every
//! write of every kind ends in the one store path, `store` (create, guaranteed update,
//! guaranteed delete over etcd compare-and-swap), its per-kind behaviour given as its
//! strategy's hooks.
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

mod binding;
mod body;
mod create;
mod delete;
mod documents;
mod managed;
mod read;
mod request;
mod scale;
mod store;
mod strategy;
mod update;
mod watch;
mod write;

pub use body::MAX_BODY_BYTES;
use read::read;
use request::{negotiate, parse_path, Format, Query};
use watch::watch;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use serde_json::Value;
use tokio::sync::Semaphore;

use super::auth::TokenFile;
use super::cache::WatchCache;
use super::convert::Kind;
use super::discovery;
use super::errors::ApiError;
use crate::api;
use crate::registry::Registry;
use crate::status::Metrics;

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
    /// The in-flight limits and the body budget of every request but a watch.
    pub limits: super::limits::Limits,
    pub request_timeout: Duration,
    address: std::net::SocketAddr,
    requests: Family<Vec<(&'static str, String)>, Counter>,
    longrunning: Family<Vec<(&'static str, &'static str)>, Gauge>,
    events_sent: Family<Vec<(&'static str, &'static str)>, Counter>,
    prometheus: prometheus_client::registry::Registry,
    /// Consistent lists served from the watch caches, and their fallbacks to etcd.
    consistent_reads: crate::apiserver::cache::ConsistentReads,
    /// The etcd leases events are stored on (an hour after their last write, as
    /// kube-apiserver's `--event-ttl`), shared with nothing else in this process.
    pub(super) event_leases: crate::record::EventLeases,
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
        limits: super::limits::Limits,
        request_timeout: Duration,
        address: std::net::SocketAddr,
        leases: etcd_client::LeaseClient,
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
        prometheus.register(
            "apiserver_current_inflight_requests",
            "Requests being served, by request_kind (readOnly, mutating; watches and probes not counted)",
            limits.in_flight(),
        );
        let consistent_reads = crate::apiserver::cache::ConsistentReads::default();
        prometheus.register(
            "apiserver_consistent_list_fallbacks",
            "Consistent lists read from etcd because the watch cache did not catch up in time, by resource",
            consistent_reads.fallbacks(),
        );
        ApiState {
            registry,
            watcher,
            caches,
            metrics,
            tokens,
            watches: Arc::new(Semaphore::new(max_watches)),
            max_watches,
            limits,
            request_timeout,
            address,
            requests,
            longrunning,
            events_sent,
            prometheus,
            consistent_reads,
            event_leases: crate::record::EventLeases::new(leases),
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

/// The one handler: every request of the API goes through here.
pub async fn dispatch(
    state: Arc<ApiState>,
    method: Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: axum::body::Body,
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
    let result = if method == Method::GET || method == Method::HEAD {
        route(&state, &path, &query, accept.as_deref()).await
    } else {
        route_write(&state, &method, &path, &query, &headers, body).await
    };
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
    path: &str,
    query: &Query,
    accept: Option<&str>,
) -> Result<Response, ApiError> {
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
        "/openapi/v3" => Ok((
            [(header::CONTENT_TYPE, "application/json")],
            super::openapi::index(),
        )
            .into_response()),
        "/openapi/v2" => {
            match accept.filter(|a| a.contains("application/com.github.proto-openapi.spec.v2")) {
                Some(_) => Ok((
                    [(header::CONTENT_TYPE, super::openapi::V2_PROTOBUF)],
                    super::openapi::v2_protobuf(),
                )
                    .into_response()),
                None => Ok((
                    [(header::CONTENT_TYPE, "application/json")],
                    super::openapi::v2(),
                )
                    .into_response()),
            }
        }
        "/api/v1" => Ok(json_response(
            StatusCode::OK,
            &discovery::api_resource_list("", "v1").ok_or_else(ApiError::no_route)?,
        )),
        other => {
            let segments: Vec<&str> = other.trim_matches('/').split('/').collect();
            match segments.as_slice() {
                ["openapi", "v3", rest @ ..] => Ok((
                    [(header::CONTENT_TYPE, "application/json")],
                    super::openapi::group_version_document(&rest.join("/"))
                        .ok_or_else(ApiError::no_route)?,
                )
                    .into_response()),
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
                    if target.name.is_none() && query.flag("watch") {
                        watch(state, &target, query, format).await
                    } else {
                        read(state, target, query, format).await
                    }
                }
            }
        }
    }
}

/// The writes: POST, PUT, PATCH and DELETE of the resources kcm stores.
async fn route_write(
    state: &Arc<ApiState>,
    method: &Method,
    path: &str,
    query: &Query,
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let target = parse_path(path)?;
    if let super::resources::Storage::Documents {
        directory,
        strategy,
    } = target.resource.storage
    {
        let (request, kind) = ((query, headers), (directory, strategy));
        return documents::write(state, method, &target, kind, request, body).await;
    }
    let writable = write::Writable::of(target.resource, method.as_str())?;
    let request = (state, method, &target, query, headers);
    // The one place a typed kind meets its Rust type: the registry's reads and writes are
    // generic over it (`Registry::get::<T>`, `guaranteed_update::<T>`, ...); every rule
    // that differs between the kinds is in their strategies (`strategy`).
    match writable.kind() {
        Kind::Pod => write_typed::<api::Pod>(request, writable, body).await,
        Kind::ReplicationController => {
            write_typed::<api::ReplicationController>(request, writable, body).await
        }
        Kind::Service => write_typed::<api::Service>(request, writable, body).await,
        Kind::Endpoints => write_typed::<api::Endpoints>(request, writable, body).await,
        Kind::ReplicaSet => write_typed::<api::ReplicaSet>(request, writable, body).await,
        Kind::Deployment => write_typed::<api::Deployment>(request, writable, body).await,
    }
}

/// What a write request is: the state, its method, path, query and headers.
type WriteRequest<'a> = (
    &'a Arc<ApiState>,
    &'a Method,
    &'a request::Target,
    &'a Query,
    &'a HeaderMap,
);

/// A write of a typed kind, stored as `T`: create, update and patch (of the object or
/// its `status`), `scale`, and delete (of the object or a collection).
async fn write_typed<T: api::Object>(
    (state, method, target, query, headers): WriteRequest<'_>,
    writable: write::Writable,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let not_allowed = || {
        let what = super::errors::qualified(target.resource.group, target.resource.plural);
        ApiError::method_not_allowed(method.as_str(), &what)
    };
    let options = write::WriteOptions::parse(query, headers)?;
    let subresource = target.subresource.as_deref();
    if let Some(sub) = subresource {
        if target.resource.subresource(sub).is_none() {
            return Err(ApiError::no_route());
        }
    }
    // Every write of a namespaced kind but a collection's delete names a namespace.
    let all_namespaces = *method == Method::DELETE && target.name.is_none();
    let namespace = match target.namespace.as_deref() {
        Some(namespace) => namespace,
        None if all_namespaces => "",
        None => return Err(not_allowed()),
    };
    match (method.clone(), target.name.as_deref(), subresource) {
        (Method::POST, None, None) => {
            let (_, decoded) = read_body(headers, body, false).await?;
            create::create::<T>(state, writable, namespace, decoded, options).await
        }
        (Method::PUT, Some(name), None | Some("status")) => {
            let (_, decoded) = read_body(headers, body, false).await?;
            let part = update_part(subresource);
            update::put::<T>(state, writable, (namespace, name), part, decoded, options).await
        }
        (Method::PATCH, Some(name), None | Some("status")) => {
            let typed = read_body(headers, body, true).await?;
            let part = update_part(subresource);
            let key = (namespace, name);
            match typed {
                (body::BodyType::ApplyPatch, decoded) => {
                    update::apply::<T>(state, writable, key, part, decoded, options).await
                }
                typed => update::patch::<T>(state, writable, key, part, typed, options).await,
            }
        }
        (Method::POST, Some(name), Some("binding")) => {
            let (_, decoded) = read_body(headers, body, false).await?;
            binding::bind::<T>(state, writable, (namespace, name), decoded.value, options).await
        }
        (Method::PUT | Method::PATCH, Some(name), Some("scale")) => {
            let patch = method == Method::PATCH;
            let (body_type, decoded) = read_body(headers, body, patch).await?;
            let how = if patch {
                scale::ScaleWrite::Patch(body_type, decoded.value.clone())
            } else {
                scale::ScaleWrite::Put(decoded.value.clone())
            };
            scale::write_scale::<T>(state, writable, (namespace, name), decoded, how, options).await
        }
        (Method::DELETE, name, None) => {
            let options = delete_options(headers, body, query).await?;
            match name {
                Some(name) => {
                    delete::delete::<T>(state, writable, (namespace, name), &options).await
                }
                None => {
                    let namespace = target.namespace.as_deref();
                    delete::delete_collection::<T>(state, writable, namespace, query, &options)
                        .await
                }
            }
        }
        _ => Err(not_allowed()),
    }
}

/// A server-side apply by `manager` of `config` to `live` (`None`: a create), objects of
/// the served `(kind, apiVersion)` through the main resource (`crate::apiserver::apply_stored`).
pub(super) fn apply_served(
    (kind, api_version): (&'static str, &str),
    manager: &str,
    live: Option<&Value>,
    config: &Value,
    force: bool,
) -> Result<Value, ApiError> {
    let writer = managed::Writer {
        kind,
        api_version,
        manager,
        subresource: "",
    };
    managed::apply(writer, live, config, force)
}

/// An Update by `manager` through `subresource` from `old` to `new`, objects of the served
/// `(kind, apiVersion)`, recorded in `new` (`crate::apiserver::FieldOwnership`).
pub(super) fn record_served(
    (kind, api_version): (&'static str, &str),
    manager: &str,
    subresource: &'static str,
    old: &Value,
    new: &mut Value,
) {
    let writer = managed::Writer {
        kind,
        api_version,
        manager,
        subresource,
    };
    managed::record(writer, Some(old), new);
}

/// Checks a write body's media type, then reads and decodes it.
async fn read_body(
    headers: &HeaderMap,
    body: axum::body::Body,
    patch: bool,
) -> Result<(body::BodyType, body::Decoded), ApiError> {
    let body_type = body::body_type(headers, patch)?;
    let bytes = body::read(headers, body).await?;
    Ok((body_type, decode_off_the_workers(body_type, bytes).await?))
}

/// Bodies at least this large are decoded on the blocking pool.
const BLOCKING_DECODE_BYTES: usize = 64 * 1024;

/// Decodes a body; a large one on the blocking pool, so that decoding many at once (a
/// few hundred milliseconds of CPU each at the body limit) never starves the tasks that
/// talk to etcd: they would time out, and every request with them.
async fn decode_off_the_workers(
    body_type: body::BodyType,
    bytes: Vec<u8>,
) -> Result<body::Decoded, ApiError> {
    if bytes.len() < BLOCKING_DECODE_BYTES {
        return body::decode(body_type, &bytes);
    }
    tokio::task::spawn_blocking(move || body::decode(body_type, &bytes))
        .await
        .map_err(|e| ApiError::internal(format!("decoding the request body: {e}")))?
}

/// A DELETE's `DeleteOptions`: its body (JSON, possibly empty) and query.
async fn delete_options(
    headers: &HeaderMap,
    body: axum::body::Body,
    query: &Query,
) -> Result<delete::DeleteOptions, ApiError> {
    // DeleteOptions: protobuf from client-go's typed clients, else JSON (whatever the
    // Content-Type says, as kcm always read them).
    let body_type = match body::body_type(headers, false) {
        Ok(body::BodyType::Protobuf) => body::BodyType::Protobuf,
        _ => body::BodyType::Json,
    };
    let bytes = body::read(headers, body).await?;
    let value = if bytes.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        decode_off_the_workers(body_type, bytes).await?.value
    };
    delete::DeleteOptions::parse(&value, query)
}

fn update_part(subresource: Option<&str>) -> update::Part {
    match subresource {
        Some("status") => update::Part::Status,
        _ => update::Part::Main,
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
