//! kcm's controllers as clients of a Kubernetes API server: 2014's topology, where the
//! controller manager "uses the API to listen for new controllers and to create/delete
//! pods" (`cmd/controller-manager/controller-manager.go`, which refused to start without
//! `-master`), rather than kcm's default of reading and writing etcd directly.
//!
//! [`ApiClient`] is kube-rs's client (it reads kubeconfig files, speaks TLS and decodes
//! watch streams) with what kcm's controllers need on top:
//! - the objects in kcm's stored shape: every object read is converted from the served
//!   version to the one kcm stores (`apiserver::to_stored`) and decoded as etcd's values
//!   are, every object written the other way (`apiserver::to_served`), so a controller
//!   sees the same `Pod` from either backend;
//! - failures as the registry's [`StorageError`]s (404 `NotFound`, 409 `AlreadyExists` or
//!   `Conflict`), so the controllers' outcomes read the same;
//! - a request refused with `Retry-After` (a 429 at the server's in-flight limit) sent
//!   again, as client-go's `rest.Request` does, its kind's requests in flight first cut to
//!   fit ([`gate`]; docs/departures.md, "API client: a refused request");
//! - [`reflect`]: the informers' list-and-watch over HTTP with client-go's reflector
//!   semantics, as an [`crate::informer::RemoteSource`];
//! - [`control`]: the replication manager's and the ReplicaSet controller's writes and
//!   fresh reads through the API; [`deployment`]: the Deployment controller's;
//!   `scheduling`: the scheduler's nodes and binds (a `Binding` per pod); [`namespace`]:
//!   the namespace controller, by discovery, `DELETE`s and `namespaces/finalize`;
//!   [`gc`]: the garbage collector's reads and writes.
//!
//! Only what kube-apiserver serves is used (no kcm-only path or parameter), so the same
//! process runs against kcm's apiserver or any other.
//!
//! Invariants: every object handed to a controller carries the resourceVersion the
//! server answered with, as its revision; a request never waits longer than
//! [`REQUEST_TIMEOUT`] (a watch excepted).

pub mod client_2014;
pub mod control;
pub mod deployment;
mod gate;
pub mod gc;
pub mod lease;
pub mod namespace;
mod nodelifecycle;
mod reflect;
mod scheduling;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use http::{Method, Request};
use hyper::body::Bytes;
use serde_json::Value;

use crate::api::{self, Object, ResourceVersion};
use crate::apiserver::{to_served, to_stored, StoredKind};
use crate::registry::{ObjectList, StorageError};

use gate::Gate;
pub use reflect::ApiSource;

/// How long a request other than a watch may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The key prefix objects read through the API are keyed under in the informers' stores
/// (the keys are never sent anywhere: they only name objects inside this process).
pub const PREFIX: &str = "/registry";

/// Where the controllers run: reading and writing etcd (kcm's default), or as clients of
/// an API server over it (2014's topology): `kcm up --topology`, `kcm lab --topology`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Topology {
    #[default]
    Etcd,
    Api,
}

impl std::str::FromStr for Topology {
    type Err = String;

    fn from_str(s: &str) -> Result<Topology, String> {
        match s {
            "etcd" => Ok(Topology::Etcd),
            "api" => Ok(Topology::Api),
            _ => Err(format!("{s:?} is not a topology: etcd or api")),
        }
    }
}

/// Where the API server is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiTarget {
    /// A kubeconfig file: its current context's cluster and user.
    Kubeconfig(PathBuf),
    /// 2014's `--master`: an API server's URL, without credentials.
    Master(String),
}

impl std::fmt::Display for ApiTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiTarget::Kubeconfig(path) => write!(f, "--kubeconfig {}", path.display()),
            ApiTarget::Master(url) => write!(f, "--master {url}"),
        }
    }
}

/// A client of one API server. Cheap to clone.
#[derive(Clone)]
pub struct ApiClient {
    client: kube::Client,
    /// Where it points, for messages.
    server: String,
    /// Its reads and its writes in flight, each capped once the server refuses one of them
    /// for its in-flight limit; shared by the clones.
    gates: Arc<Gates>,
}

/// One [`Gate`] for reads (`GET`, `HEAD`) and one for writes, as the server counts them
/// against its two limits.
#[derive(Default)]
struct Gates {
    reads: Gate,
    writes: Gate,
}

/// Connects to the API server `target` names, and checks that it answers (`GET /version`).
///
/// # Errors
/// When the kubeconfig cannot be read or names no usable context, the URL is malformed, or
/// the server does not answer: one line saying which.
pub async fn connect(target: &ApiTarget) -> anyhow::Result<ApiClient> {
    let mut config = match target {
        ApiTarget::Kubeconfig(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("read the kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("use the kubeconfig {}", path.display()))?
        }
        ApiTarget::Master(url) => {
            let uri: http::Uri = url
                .parse()
                .with_context(|| format!("--master {url:?} is not a URL"))?;
            anyhow::ensure!(
                uri.scheme().is_some() && uri.host().is_some(),
                "--master {url:?} is not a URL (write it as http://HOST:PORT)"
            );
            kube::Config::new(uri)
        }
    };
    config.read_timeout = None;
    config.connect_timeout = Some(Duration::from_secs(10));
    let server = config.cluster_url.to_string();
    let client = kube::Client::try_from(config)
        .with_context(|| format!("make a client of the API server at {server}"))?;
    let api = ApiClient {
        client,
        server,
        gates: Arc::default(),
    };
    match api.request(Method::GET, "/version", None, None).await {
        Ok(_) => {}
        Err(e @ RequestError::Status { .. }) => anyhow::bail!(
            "the API server at {} refused kcm's credentials or request: {e}",
            api.server
        ),
        Err(e) => anyhow::bail!("the API server at {} does not answer: {e}", api.server),
    }
    Ok(api)
}

/// How a request failed.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The server answered with a `Status` of this code.
    #[error("{code} {reason}: {message}")]
    Status {
        code: u16,
        reason: String,
        message: String,
    },
    /// No answer (connection refused or dropped, timeout, a body that is not JSON).
    #[error("{0}")]
    Transport(String),
}

/// How a request's last answer (`None` for a success, else its error) counts for the
/// client's cap on requests in flight ([`gate`]): a refusal for the server's limit cuts
/// it; no answer, or a server error, says nothing of that limit.
fn counts_as(error: Option<&RequestError>) -> gate::Answer {
    match error.map(RequestError::code) {
        None => gate::Answer::Served,
        Some(Some(429)) => gate::Answer::Refused,
        Some(None) => gate::Answer::Lost,
        Some(Some(code)) if code >= 500 => gate::Answer::Lost,
        Some(Some(_)) => gate::Answer::Served,
    }
}

impl RequestError {
    /// The HTTP status code, when the server answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            RequestError::Status { code, .. } => Some(*code),
            RequestError::Transport(_) => None,
        }
    }

    /// The registry's error for a request about `key`.
    fn into_storage(self, op: &'static str, key: String) -> StorageError {
        match self {
            RequestError::Status { code: 404, .. } => StorageError::NotFound { key },
            RequestError::Status {
                code: 409, reason, ..
            } if reason == "AlreadyExists" => StorageError::AlreadyExists { key },
            RequestError::Status { code: 409, .. } => StorageError::Conflict {
                key,
                expected: ResourceVersion(0),
                actual: None,
            },
            RequestError::Status {
                code: 400 | 403 | 422,
                message,
                ..
            } => StorageError::BadRequest { op, key, message },
            other => StorageError::Etcd {
                op,
                key,
                message: format!("through the API: {other}"),
                compacted: false,
            },
        }
    }
}

impl ApiClient {
    /// The server's URL, for messages.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The underlying kube-rs client.
    pub(crate) fn kube(&self) -> &kube::Client {
        &self.client
    }

    /// Sends one request and returns the JSON it answered with; sent again while the
    /// server asks for that ([`retry_after`]).
    ///
    /// # Errors
    /// [`RequestError`].
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        content_type: Option<&str>,
    ) -> Result<Value, RequestError> {
        let content_type = body.map(|_| content_type.unwrap_or("application/json"));
        let body =
            Bytes::from(body.map_or_else(Vec::new, |b| serde_json::to_vec(b).expect("JSON")));
        let answer = self.send(method, path, content_type, body).await?;
        serde_json::from_slice(&answer).map_err(|e| {
            RequestError::Transport(format!("{path}: an answer that is not JSON: {e}"))
        })
    }

    /// `GET` of `path` as text (`/metrics`, `/healthz`).
    ///
    /// # Errors
    /// [`RequestError`].
    pub async fn get_text(&self, path: &str) -> Result<String, RequestError> {
        let answer = self.send(Method::GET, path, None, Bytes::new()).await?;
        String::from_utf8(answer.to_vec()).map_err(|e| {
            RequestError::Transport(format!("{path}: an answer that is not text: {e}"))
        })
    }

    /// Sends a request until it is answered with anything but a refusal that asks to be
    /// sent again (a 429 or 5xx with `Retry-After`), within [`REQUEST_TIMEOUT`] in all;
    /// returns the answer's body.
    ///
    /// Sending again is client-go's `rest.Request`: kube-apiserver, and kcm's, refuse a
    /// request beyond their in-flight limits with 429 and `Retry-After: 1` before acting on
    /// it, so the same request, a create included, is safe to send again. A controller
    /// that treated the 429 as a failure stopped its sync's writes and backed off: through
    /// the API, at its default window of 500 creates against the apiserver's 200 writes
    /// in flight, every sync of a large scale-up did. A 429 also cuts this client's
    /// requests of its kind in flight ([`gate`]), and the request waits for a place among
    /// them; it waits the `Retry-After` only when the cap is already one, or for a 5xx, at
    /// most [`MAX_RETRIES`] times.
    async fn send(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> Result<Bytes, RequestError> {
        let gate = match method {
            Method::GET | Method::HEAD => &self.gates.reads,
            _ => &self.gates.writes,
        };
        let mut refused = None;
        let attempts = async {
            let mut waits = 0;
            loop {
                let mut request = Request::builder().method(method.clone()).uri(path);
                if let Some(content_type) = content_type {
                    request = request.header(http::header::CONTENT_TYPE, content_type);
                }
                let request = request
                    .body(kube::client::Body::from(body.clone()))
                    .map_err(|e| RequestError::Transport(format!("{path}: {e}")))?;
                let pass = gate.enter().await;
                let (error, wait) = match self.send_once(request).await {
                    Err((error, Some(wait))) if waits < MAX_RETRIES => (error, wait),
                    answer => {
                        let answer = answer.map_err(|(error, _)| error);
                        pass.ended(counts_as(answer.as_ref().err()));
                        return answer;
                    }
                };
                // A refusal waits only with the cap at one; a 5xx waits its Retry-After.
                let must_wait = pass.ended(counts_as(Some(&error))) || error.code() != Some(429);
                tracing::debug!(%method, path, %error, waits, must_wait, "sending again");
                refused = Some(error);
                if must_wait {
                    waits += 1;
                    tokio::time::sleep(jittered(wait)).await;
                }
            }
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, attempts).await {
            Ok(answer) => answer,
            // Still refused when the time ran out: the refusal says why.
            Err(_) => Err(refused.unwrap_or_else(|| {
                RequestError::Transport(format!("no answer within {REQUEST_TIMEOUT:?}"))
            })),
        }
    }

    /// Sends `request` once: the body of a success, or the error with how long the
    /// server asked to wait before sending it again, if it did.
    async fn send_once(
        &self,
        request: Request<kube::client::Body>,
    ) -> Result<Bytes, (RequestError, Option<Duration>)> {
        let transport = |e: kube::Error| (RequestError::Transport(e.to_string()), None);
        let answer = self.client.send(request).await.map_err(transport)?;
        let status = answer.status();
        let wait = retry_after(
            status.as_u16(),
            answer.headers().get(http::header::RETRY_AFTER),
        );
        let body = answer
            .into_body()
            .collect_bytes()
            .await
            .map_err(transport)?;
        if status.is_client_error() || status.is_server_error() {
            return Err((refusal(status, &body), wait));
        }
        Ok(body)
    }

    /// `GET` of object `namespace/name` of kind `T`, in kcm's stored shape.
    ///
    /// # Errors
    /// `NotFound`, `Decode` for an answer that is not a `T`, `Etcd` for the rest.
    pub async fn get<T: Object>(&self, namespace: &str, name: &str) -> Result<T, StorageError> {
        let kind = stored_kind::<T>();
        let path = object_path(kind, namespace, name);
        let served = self
            .request(Method::GET, &path, None, None)
            .await
            .map_err(|e| e.into_storage("get", path.clone()))?;
        decode::<T>(kind, served)
    }

    /// `GET` of object `namespace/name` of kind `T` as a document in kcm's stored shape
    /// (unknown fields kept), with its revision.
    ///
    /// # Errors
    /// `NotFound`, `Etcd` for the rest.
    pub async fn get_document<T: Object>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(Value, i64), StorageError> {
        let kind = stored_kind::<T>();
        let path = object_path(kind, namespace, name);
        let served = self
            .request(Method::GET, &path, None, None)
            .await
            .map_err(|e| e.into_storage("get", path.clone()))?;
        let revision = revision_of(&served);
        Ok((to_stored(kind, served), revision))
    }

    /// Every `T` of `namespace` (all, with `None`), in one consistent list.
    ///
    /// # Errors
    /// `Etcd` when the request fails; an item that does not decode is in `errors`.
    pub async fn list<T: Object>(
        &self,
        namespace: Option<&str>,
    ) -> Result<ObjectList<T>, StorageError> {
        let kind = stored_kind::<T>();
        let path = collection_path(kind, namespace);
        let served = self
            .request(Method::GET, &path, None, None)
            .await
            .map_err(|e| e.into_storage("list", path.clone()))?;
        let resource_version = ResourceVersion(revision_of(&served));
        let mut list = ObjectList {
            items: Vec::new(),
            resource_version,
            errors: Vec::new(),
        };
        let items = match served {
            Value::Object(mut list) => list.remove("items"),
            _ => None,
        };
        for item in items.into_iter().flat_map(|items| match items {
            Value::Array(items) => items,
            _ => Vec::new(),
        }) {
            match decode::<T>(kind, item) {
                Ok(object) => list.items.push(object),
                Err(StorageError::Decode(e)) => list.errors.push(e),
                Err(_) => {}
            }
        }
        Ok(list)
    }

    /// `POST` of `object`; the object as created.
    ///
    /// # Errors
    /// `AlreadyExists`, `BadRequest` (refused: invalid, or its namespace is terminating),
    /// `Etcd` for the rest.
    pub async fn create<T: Object>(&self, object: &T) -> Result<T, StorageError> {
        let kind = stored_kind::<T>();
        let meta = object.metadata();
        let path = collection_path(kind, Some(&meta.namespace));
        let body = served(kind, object);
        let answer = self
            .request(Method::POST, &path, Some(&body), None)
            .await
            .map_err(|e| {
                e.into_storage("create", object_path(kind, &meta.namespace, &meta.name))
            })?;
        decode::<T>(kind, answer)
    }

    /// `PUT` of `object` at its resourceVersion, to the object or to its `status`
    /// subresource; the object as written.
    ///
    /// # Errors
    /// `Conflict` when it changed since, `NotFound`, `Etcd` for the rest.
    pub async fn update<T: Object>(&self, object: &T, status: bool) -> Result<T, StorageError> {
        let kind = stored_kind::<T>();
        let meta = object.metadata();
        let mut path = object_path(kind, &meta.namespace, &meta.name);
        if status {
            path.push_str("/status");
        }
        let body = served(kind, object);
        let answer = self
            .request(Method::PUT, &path, Some(&body), None)
            .await
            .map_err(|e| e.into_storage("update", path.clone()))?;
        decode::<T>(kind, answer)
    }

    /// `DELETE` of `namespace/name`, with a resourceVersion precondition when one is given;
    /// the revision the server answered with (the delete's, or the mark's for an object
    /// deleted gracefully). `immediately` sends `gracePeriodSeconds: 0`: a pod goes at
    /// once, as kcm's controllers delete pods from etcd (and as 2014, which had no graceful
    /// deletion), instead of Terminating until its kubelet confirms.
    ///
    /// # Errors
    /// `NotFound`, `Conflict` when the precondition failed, `Etcd` for the rest.
    pub async fn delete<T: Object>(
        &self,
        namespace: &str,
        name: &str,
        precondition: Option<ResourceVersion>,
        immediately: bool,
    ) -> Result<ResourceVersion, StorageError> {
        let kind = stored_kind::<T>();
        let path = object_path(kind, namespace, name);
        let mut options = serde_json::json!({"kind": "DeleteOptions", "apiVersion": "v1"});
        if let Some(rv) = precondition {
            options["preconditions"] = serde_json::json!({"resourceVersion": rv.to_string()});
        }
        if immediately {
            options["gracePeriodSeconds"] = serde_json::json!(0);
        }
        let answer = self
            .request(Method::DELETE, &path, Some(&options), None)
            .await
            .map_err(|e| e.into_storage("delete", path.clone()))?;
        Ok(ResourceVersion(revision_of(&answer)))
    }
}

/// How many times a request the server asks to be sent again waits before it is sent again:
/// client-go's default (`rest.Request`'s `maxRetries`).
pub const MAX_RETRIES: u32 = 10;

/// The longest `Retry-After` waited as asked; a longer one is waited this long, so that a
/// request stays within [`REQUEST_TIMEOUT`].
const MAX_RETRY_AFTER: Duration = Duration::from_secs(2);

/// How long to wait before sending a request again, when its answer asks for it: a 429
/// or a 5xx with a `Retry-After` of whole seconds (client-go's `checkWait`), at most
/// [`MAX_RETRY_AFTER`]. Any other answer is final.
fn retry_after(code: u16, header: Option<&http::HeaderValue>) -> Option<Duration> {
    if code != 429 && !(500..600).contains(&code) {
        return None;
    }
    let seconds: u64 = header?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER))
}

/// `delay` plus up to half again, so that the requests refused together (a controller's
/// window of creates, many watches) do not come back in lockstep.
fn jittered(delay: Duration) -> Duration {
    delay.mul_f64(1.0 + rand::random::<f64>() * 0.5)
}

/// The error an answer of `status` with `body` means: the `Status` the server sent, or,
/// when the body is not one, the HTTP status with the body as its message.
fn refusal(status: http::StatusCode, body: &[u8]) -> RequestError {
    #[derive(serde::Deserialize)]
    struct Refusal {
        code: Option<u16>,
        #[serde(default)]
        reason: String,
        #[serde(default)]
        message: String,
    }
    match serde_json::from_slice::<Refusal>(body) {
        Ok(refusal) => RequestError::Status {
            code: refusal.code.unwrap_or(status.as_u16()),
            reason: refusal.reason,
            message: refusal.message,
        },
        Err(_) => RequestError::Status {
            code: status.as_u16(),
            reason: status.canonical_reason().unwrap_or_default().to_string(),
            message: String::from_utf8_lossy(body).trim().to_string(),
        },
    }
}

/// The kind kcm stores `T` as.
///
/// # Panics
/// For a type that is none of the stored kinds (a programming error).
fn stored_kind<T: Object>() -> StoredKind {
    StoredKind::from_kind_name(T::KIND)
        .unwrap_or_else(|| panic!("{} is not a kind kcm stores", T::KIND))
}

/// `/api/v1` or `/apis/{group}/{version}`.
pub(crate) fn group_path(api_version: &str) -> String {
    if api_version.contains('/') {
        format!("/apis/{api_version}")
    } else {
        format!("/api/{api_version}")
    }
}

/// The collection of `kind` in `namespace` (all namespaces with `None`).
fn collection_path(kind: StoredKind, namespace: Option<&str>) -> String {
    let group = group_path(kind.served_api_version());
    match namespace {
        Some(ns) => format!("{group}/namespaces/{ns}/{}", kind.resource()),
        None => format!("{group}/{}", kind.resource()),
    }
}

fn object_path(kind: StoredKind, namespace: &str, name: &str) -> String {
    format!("{}/{name}", collection_path(kind, Some(namespace)))
}

/// `metadata.resourceVersion` of a served object or list, as a revision (0 when absent or
/// not a number: kcm's and kube-apiserver's are etcd revisions).
pub(crate) fn revision_of(served: &Value) -> i64 {
    served
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

/// `object` in the served shape, with its resourceVersion (a precondition of the write).
fn served<T: Object>(kind: StoredKind, object: &T) -> Value {
    let mut value = serde_json::to_value(object).expect("a stored kind always encodes");
    if let (Some(rv), Some(meta)) = (
        object.metadata().resource_version,
        value.get_mut("metadata").and_then(Value::as_object_mut),
    ) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
    to_served(kind, value)
}

/// A served object of `kind` → the stored document's bytes, its namespace, name and
/// revision: what an etcd value would be.
pub(crate) fn stored_value(kind: StoredKind, served: Value) -> (Vec<u8>, String, String, i64) {
    let revision = revision_of(&served);
    let text = |field: &str| {
        served
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (namespace, name) = (text("namespace"), text("name"));
    let mut stored = to_stored(kind, served);
    if let Some(meta) = stored.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    let bytes = serde_json::to_vec(&stored).expect("JSON");
    (bytes, namespace, name, revision)
}

/// A served object → `T`, decoded as a stored value is.
fn decode<T: Object>(kind: StoredKind, served: Value) -> Result<T, StorageError> {
    let (bytes, namespace, name, revision) = stored_value(kind, served);
    let key = api::object_key::<T>(PREFIX, &namespace, &name);
    api::decode::<T>(PREFIX, &key, &bytes, revision).map_err(|e| {
        StorageError::Decode(crate::registry::DecodeError {
            kind: T::KIND,
            key,
            revision,
            message: format!("{e:#}"),
        })
    })
}

#[cfg(test)]
mod tests;
