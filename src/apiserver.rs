//! `kcm apiserver`: the Kubernetes API over kcm's objects, so kubectl, client-go, kube-rs
//! and the Python client can see and drive the loop: discovery, get, list and watch, and
//! the writes (create, update, patch, delete, `status` and `scale`), each one etcd
//! transaction.
//!
//! Mirrors 2014's `pkg/apiserver/apiserver.go` (the handler and its routes),
//! `pkg/apiserver/resthandler.go` (get and list), `pkg/apiserver/watch.go` (the HTTP
//! watch: one JSON event per line), `pkg/registry/etcd/etcd.go` (the key layout, which kcm
//! shares) and `pkg/tools/etcd_tools_watch.go` (the etcdWatcher, here kcm's watch
//! engine). What later Kubernetes added is here too, and in docs/departures.md: the
//! served versions are core/v1 and apps/v1 (2014 served v1beta1–3, with `id` and
//! `desiredState`), the watch cache (2015), Tables (1.10), bookmarks (1.15), consistent
//! paginated lists (1.9) and streaming lists (1.27).
//!
//! Layout:
//! - `resources`: the registry, one row per served resource (names, scope, storage,
//!   strategy, printer, selectable fields, protobuf message), and one file per document
//!   kind under `resources/`; `discovery`: `/version`, `/api`, `/apis` in the aggregated
//!   and legacy forms;
//! - `convert`: the stored (2014 v1beta3) shapes to the served (v1) ones and back;
//! - `cache`: the watch cache, one per resource, fed by one etcd watch each;
//! - `fields`: field selectors; `table`: server-side Tables as kubectl prints them;
//! - `handlers`: routes, reads, watches and writes, with what differs between the kinds
//!   in one strategy per kind (`handlers/strategy/` for the typed kinds,
//!   `resources/` for the documents, as Kubernetes' `strategy.go`); `errors`:
//!   the `Status` answers;
//! - `protobuf`: protobuf request bodies turned into the same JSON;
//! - `patch`: merge, JSON and strategic merge patches; `openapi`: the minimal OpenAPI v3
//!   kubectl's validation needs, and the 1.32 schema `fieldValidation` checks writes with;
//! - `http`: the listener (TLS, bearer tokens, connection limits);
//! - `fieldpath`: field paths and sets of them in `managedFields`' FieldsV1 form, the
//!   paths an object has under the served schema, merging an applied configuration,
//!   removing paths, comparing two objects, the `managedFields` entries an Update
//!   records, and an apply with its conflicts: server-side apply's ground, not yet read by
//!   a handler.
//!
//! Invariants: the apiserver keeps no state of its own (several over one etcd serve the
//! same objects at the same resourceVersions); every object served carries
//! `metadata.resourceVersion` = its key's `mod_revision`; every error is a `Status`.

mod auth;
mod cache;
mod convert;
pub use convert::{to_served, to_stored, Kind as StoredKind};
mod discovery;
mod errors;
pub mod fieldpath;
mod fields;
mod handlers;
mod http;
mod limits;
pub mod openapi;
mod patch;
mod protobuf;
mod resources;
mod table;
mod validation;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::{json, Value};

use crate::client::Target;
use crate::etcd_watcher::{BackoffConfig, RawEvent, Watcher};
use crate::registry::Registry;
use crate::status::Metrics;

pub use auth::TokenFile;
pub use cache::Config as CacheConfig;
pub use limits::{DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT, DEFAULT_MAX_REQUESTS_INFLIGHT};

/// The port 2014's apiserver served on (`pkg/master/ports`: `--port=8080`).
pub const DEFAULT_PORT: u16 = 8080;

/// Concurrent watches served by default (kube-apiserver has no fixed cap; kcm has one so
/// that a runaway client cannot take every descriptor).
pub const DEFAULT_MAX_WATCHES: usize = 10_000;

/// How long a request other than a watch may take (kube-apiserver's `--request-timeout`).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// What `kcm apiserver` serves, and how.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where to listen; port 0 picks a free one (logged, and returned by [`bind`]).
    pub address: SocketAddr,
    /// Serving certificate and key (PEM); required beyond loopback.
    pub tls: Option<TlsFiles>,
    /// Static bearer tokens (kube-apiserver's `--token-auth-file`); required beyond
    /// loopback.
    pub token_file: Option<PathBuf>,
    /// Serve plain HTTP without tokens beyond loopback anyway: only inside a container
    /// whose port is published on the host's loopback (docker compose).
    pub insecure_beyond_loopback: bool,
    /// Most watches served at once; more are refused with 429.
    pub max_watches: usize,
    /// Most read-only requests (not watches) served at once; 0 for no limit.
    pub max_requests_inflight: usize,
    /// Most mutating requests served at once; 0 for no limit.
    pub max_mutating_requests_inflight: usize,
    /// Bound on every request but watches.
    pub request_timeout: Duration,
    /// The watch caches' buffers.
    pub cache: CacheConfig,
    /// Backoff of the caches' etcd watches after a refusal.
    pub backoff: BackoffConfig,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            address: SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)),
            tls: None,
            token_file: None,
            insecure_beyond_loopback: false,
            max_watches: DEFAULT_MAX_WATCHES,
            max_requests_inflight: limits::DEFAULT_MAX_REQUESTS_INFLIGHT,
            max_mutating_requests_inflight: limits::DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            cache: CacheConfig::default(),
            backoff: BackoffConfig::default(),
        }
    }
}

/// `--tls-cert-file` and `--tls-private-key-file`.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

impl Config {
    /// Checks the rule kubectl's behaviour imposes: beyond loopback, HTTPS and bearer
    /// tokens together (kubectl never sends a token over plain HTTP).
    ///
    /// # Errors
    /// One line saying which flags are missing.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.address.ip().is_loopback() {
            if self.token_file.is_some() && self.tls.is_none() {
                anyhow::bail!(
                    "--token-auth-file needs --tls-cert-file and --tls-private-key-file: kubectl never sends a bearer token over plain HTTP"
                );
            }
            return Ok(());
        }
        if self.insecure_beyond_loopback {
            tracing::warn!(
                address = %self.address,
                "serving the API without TLS and authentication beyond loopback (--insecure-beyond-loopback): publish this port on loopback only"
            );
            return Ok(());
        }
        if self.tls.is_none() || self.token_file.is_none() {
            anyhow::bail!(
                "--address {} is reachable from other hosts: serving there needs HTTPS and authentication (--tls-cert-file, --tls-private-key-file and --token-auth-file); use --address 127.0.0.1 for a local apiserver",
                self.address.ip()
            );
        }
        Ok(())
    }
}

/// The address a bound apiserver listens on and the URL clients use.
#[derive(Clone, Debug)]
pub struct Bound {
    pub address: SocketAddr,
    pub url: String,
}

/// A listener bound before anything starts (a busy port fails fast), with the TLS and
/// token files already read: nothing is served, or said to be, before every flag and
/// file was checked.
pub struct Listener {
    listener: tokio::net::TcpListener,
    bound: Bound,
    tls: Option<tokio_rustls::TlsAcceptor>,
    tokens: Option<TokenFile>,
}

impl Listener {
    pub fn bound(&self) -> &Bound {
        &self.bound
    }
}

/// Checks the configuration, reads the TLS and token files, and binds the apiserver's
/// port.
///
/// # Errors
/// When the configuration is refused ([`Config::validate`]), a TLS or token file cannot
/// be read or is malformed, or the address cannot be bound.
pub async fn bind(config: &Config) -> anyhow::Result<Listener> {
    bind_port_flag(config, "--port").await
}

/// [`bind`], naming `flag` as the one that chooses the port (`kcm up`'s is
/// `--apiserver-port`).
///
/// # Errors
/// As [`bind`].
pub async fn bind_port_flag(config: &Config, flag: &str) -> anyhow::Result<Listener> {
    config.validate()?;
    let tokens = match &config.token_file {
        Some(path) => Some(TokenFile::read(path)?),
        None => None,
    };
    let tls = match &config.tls {
        Some(files) => Some(http::tls_acceptor(files)?),
        None => None,
    };
    let listener = match tokio::net::TcpListener::bind(config.address).await {
        Ok(listener) => listener,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => anyhow::bail!(
            "the apiserver port {} is in use (another kcm apiserver or kcm up?); use {flag} to choose another, or {flag} 0 for a free one",
            config.address
        ),
        Err(e) => anyhow::bail!("cannot serve the API on {}: {e}", config.address),
    };
    let address = listener.local_addr()?;
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let bound = Bound {
        address,
        url: format!("{scheme}://{address}"),
    };
    Ok(Listener {
        listener,
        bound,
        tls,
        tokens,
    })
}

/// The other names kubectl accepts for the served resource `plural` (its singular, when
/// it differs, and its short names), from the registry; none for an unserved one.
pub fn aliases_of(plural: &str) -> Vec<&'static str> {
    let Some(resource) = resources::RESOURCES.iter().find(|r| r.plural == plural) else {
        return Vec::new();
    };
    std::iter::once(resource.singular)
        .filter(|singular| *singular != plural)
        .chain(resource.short_names.iter().copied())
        .collect()
}

/// The directories (under the key prefix) of every namespaced resource the API serves,
/// in the registry's order: what the namespace controller empties (Kubernetes' finds
/// them by discovery; a kind added to the registry is emptied with its namespace).
pub fn namespaced_directories() -> Vec<&'static str> {
    resources::RESOURCES
        .iter()
        .filter(|r| r.namespaced)
        .filter_map(|r| r.storage.directory())
        .collect()
}

/// Server-side apply of `config` by `manager` to `live` (`None`: nothing stored yet), both
/// documents of kind `kind_name` in kcm's stored shape (as `kcm apply -f` reads and
/// writes them): the API's own apply (`PATCH` with `application/apply-patch+yaml`, over
/// the served forms), so `kcm apply --server-side` and the API record the same fields and
/// find the same conflicts. Returns the document to store.
///
/// # Errors
/// A kind the API does not write; kube-apiserver's conflict message (`Apply failed with 1
/// conflict: ...`); a configuration that does not fit the schema.
pub fn apply_stored(
    kind_name: &str,
    manager: &str,
    live: Option<serde_json::Value>,
    config: serde_json::Value,
    force: bool,
) -> Result<serde_json::Value, String> {
    let kind = convert::Kind::from_kind_name(kind_name)
        .ok_or_else(|| format!("{kind_name}: not a kind the API writes"))?;
    let live = live.map(|live| convert::to_served(kind, live));
    // A manifest in the served apiVersion (apps/v1) is applied as written; one in kcm's
    // 2014 shape is converted, and then owns the defaults the conversion fills
    // (`protocol: TCP`).
    let served_version = kind.served_api_version();
    let config = match config.get("apiVersion").and_then(serde_json::Value::as_str) {
        Some(version) if version == served_version => config,
        _ => convert::to_served(kind, config),
    };
    let served = handlers::apply_served(
        (kind.kind_name(), served_version),
        manager,
        live.as_ref(),
        &config,
        force,
    )
    .map_err(|e| e.message)?;
    Ok(convert::to_stored(kind, served))
}

/// The API's field manager for the writers that write etcd directly (kcm's controllers,
/// its CLI): an update of a tracked object is recorded as the API records an Update, over
/// the served forms, through `/status` when only the status changed.
pub struct FieldOwnership;

impl crate::registry::FieldRecorder for FieldOwnership {
    fn record(
        &self,
        kind: &str,
        manager: &str,
        old: &serde_json::Value,
        new: &mut serde_json::Value,
    ) {
        let (kind_name, api_version, old_served, mut new_served) =
            match convert::Kind::from_kind_name(kind) {
                Some(kind) => (
                    kind.kind_name(),
                    kind.served_api_version().to_string(),
                    convert::to_served(kind, old.clone()),
                    convert::to_served(kind, new.clone()),
                ),
                // A document stored as it is served (a kubelet's Node).
                None => match resources::RESOURCES
                    .iter()
                    .find(|r| r.kind == kind && r.decode == resources::Decode::Served)
                {
                    Some(resource) => (
                        resource.kind,
                        resource.api_version(),
                        old.clone(),
                        new.clone(),
                    ),
                    None => return,
                },
            };
        let but_status = |object: &serde_json::Value| {
            let mut rest = object.clone();
            if let Some(fields) = rest.as_object_mut() {
                fields.shift_remove("status");
            }
            rest
        };
        let subresource = if but_status(&old_served) == but_status(&new_served) {
            "status"
        } else {
            ""
        };
        let served = (kind_name, api_version.as_str());
        handlers::record_served(served, manager, subresource, &old_served, &mut new_served);
        let Some(metadata) = new
            .get_mut("metadata")
            .and_then(serde_json::Value::as_object_mut)
        else {
            return;
        };
        match new_served.pointer("/metadata/managedFields") {
            Some(entries) => metadata.insert("managedFields".into(), entries.clone()),
            None => metadata.shift_remove("managedFields"),
        };
    }
}

/// A kubeconfig for a client of `url` (no credentials: a loopback apiserver without
/// tokens), with `default` as the namespace; for a plain-HTTP `url`, its cluster says
/// `insecure-skip-tls-verify: true`.
pub fn kubeconfig(url: &str) -> String {
    // The JavaScript client (npm @kubernetes/client-node 2.x) refuses a plain-HTTP server
    // unless the cluster skips TLS verification ("HTTP protocol is not allowed when
    // skipTLSVerify is not set"); kubectl and the other clients accept the field on an
    // http server, where there is nothing to verify. An https server keeps verification.
    let skip_tls_verify = if url.starts_with("http://") {
        "    insecure-skip-tls-verify: true\n"
    } else {
        ""
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kcm\n  cluster:\n    server: {url}\n{skip_tls_verify}contexts:\n- name: kcm\n  context:\n    cluster: kcm\n    namespace: default\n    user: kcm\ncurrent-context: kcm\nusers:\n- name: kcm\n  user: {{}}\npreferences: {{}}\n"
    )
}

/// Runs `kcm apiserver`: connects, binds, starts one watch cache per stored resource and
/// serves until `shutdown` resolves; then stops accepting, ends the watches, and returns.
///
/// # Errors
/// When etcd cannot be reached at start, the port cannot be bound, or the TLS or token
/// files cannot be read.
pub async fn run(
    target: &Target,
    config: Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let listener = bind(&config).await?;
    let (client, registry) = target.connect().await?;
    tracing::info!(
        address = %listener.bound().address,
        url = %listener.bound().url,
        etcd = %target.client.endpoints_display(),
        prefix = %target.prefix,
        "apiserver serving"
    );
    serve(listener, &client, registry, config, shutdown).await
}

/// Serves the API on a bound listener until `shutdown` resolves (what `kcm up` embeds).
///
/// # Errors
/// None so far: the files were read by [`bind`].
pub async fn serve(
    listener: Listener,
    client: &etcd_client::Client,
    registry: Registry,
    config: Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let Listener {
        listener,
        bound,
        tls,
        tokens,
    } = listener;
    let metrics = Arc::new(Metrics::new());
    let watcher = Watcher::new(client, registry.clone());
    let mut caches = BTreeMap::new();
    let stop = tokio_util::sync::CancellationToken::new();
    let mut tasks = tokio::task::JoinSet::new();
    for codec in CODECS.iter() {
        let cache = Arc::new(cache::WatchCache::new(
            codec,
            config.cache,
            metrics.watch_metrics(codec.resource),
        ));
        metrics.register_watch(codec.resource, cache.metrics().clone());
        caches.insert(codec.resource, cache.clone());
        let (watcher, backoff, stop) = (watcher.clone(), config.backoff.clone(), stop.clone());
        tasks.spawn(async move {
            cache
                .run(watcher, backoff, async move { stop.cancelled().await })
                .await
        });
    }
    let state = Arc::new(handlers::ApiState::new(
        registry,
        watcher,
        caches,
        metrics,
        tokens,
        config.max_watches,
        limits::Limits::new(
            config.max_requests_inflight,
            config.max_mutating_requests_inflight,
            handlers::MAX_BODY_BYTES,
        ),
        config.request_timeout,
        bound.address,
        client.lease_client(),
    ));
    {
        let (state, stop) = (state.clone(), stop.clone());
        tasks.spawn(async move {
            tokio::select! {
                () = state.limits.give_back_memory() => {}
                () = stop.cancelled() => {}
            }
        });
    }
    let served = http::serve(listener, tls, state, stop.clone(), shutdown).await;
    stop.cancel();
    while tasks.join_next().await.is_some() {}
    served
}

// ---------------------------------------------------------------------------------------
// The Tables kcm's own CLI prints

/// How `kcm get` prints a stored kind: the columns and cells of the Table the API serves
/// for it (`table`'s printer of its `resources` row), so the CLI and kubectl show the same
/// columns from one definition. Column names print upper-cased, as kubectl prints them;
/// `-o wide` adds the priority-1 columns.
#[derive(Clone, Copy, Debug)]
pub struct TablePrinter {
    printer: &'static table::Printer,
    kind: convert::Kind,
}

impl TablePrinter {
    /// The printer of the stored resource `plural` (`pods`); `None` for one kcm does not
    /// store.
    pub fn of(plural: &str) -> Option<TablePrinter> {
        let resource = resources::RESOURCES.iter().find(|r| r.plural == plural)?;
        let resources::Decode::Converted(kind) = resource.decode else {
            return None;
        };
        Some(TablePrinter {
            printer: resource.printer,
            kind,
        })
    }

    /// The column headers (`NAME`, `READY`, ...); with `wide`, the `-o wide` ones too.
    pub fn headers(&self, wide: bool) -> Vec<String> {
        self.printer
            .columns
            .iter()
            .filter(|column| wide || column.priority == 0)
            .map(|column| column.name.to_uppercase())
            .collect()
    }

    /// The cells of the stored document `stored` (as `api::encode` writes it), matching
    /// [`TablePrinter::headers`]; `now` is the reference for ages.
    pub fn cells(&self, stored: Value, wide: bool, now: std::time::SystemTime) -> Vec<String> {
        let served = convert::to_served(self.kind, stored);
        let (cells, _conditions) = (self.printer.cells)(&served);
        self.printer
            .columns
            .iter()
            .zip(cells)
            .filter(|(column, _)| wide || column.priority == 0)
            .map(|(_, cell)| match cell.render(now) {
                Value::String(text) => text,
                other => other.to_string(),
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------
// What is stored, and how each stored value becomes a served object.

/// The codec of every resource [`resources::RESOURCES`] keeps in etcd, in the table's
/// order: one watch cache each.
static CODECS: std::sync::LazyLock<Vec<cache::Codec>> = std::sync::LazyLock::new(|| {
    resources::RESOURCES
        .iter()
        .filter_map(|resource| {
            Some(cache::Codec {
                resource: resource.plural,
                dir: resource.storage.directory()?,
                namespaced: resource.namespaced,
                // Built once per resource for the life of the process.
                decode: Box::leak(Box::new(
                    move |namespace: &str, name: &str, kv: &RawEvent| {
                        decode(resource, namespace, name, kv)
                    },
                )),
                printer: resource.printer,
            })
        })
        .collect()
});

/// Decodes a value stored at `{dir}/{namespace}/{name}` (`{dir}/{name}` for a
/// cluster-scoped resource) into `resource`'s served object, as the row's
/// [`resources::Decode`] says.
fn decode(
    resource: &resources::Resource,
    namespace: &str,
    name: &str,
    kv: &RawEvent,
) -> anyhow::Result<Value> {
    let key_fields: &[(&str, &str)] = if resource.namespaced {
        &[("namespace", namespace), ("name", name)]
    } else {
        &[("name", name)]
    };
    match resource.decode {
        resources::Decode::Converted(kind) => {
            decode_document(kv, resource.kind, key_fields, |stored| {
                convert::to_served(kind, stored)
            })
        }
        resources::Decode::Served => {
            decode_document(kv, resource.kind, key_fields, |mut object| {
                object["kind"] = json!(resource.kind);
                object["apiVersion"] = json!(resource.api_version());
                object
            })
        }
    }
}

/// The one decoding of a stored document every codec shares: JSON, an object, its `kind`
/// absent or `expected_kind`, turned into the served shape by `to_served`, and the
/// `metadata` fields the key names (`namespace`, `name`) filled in when absent or checked
/// when present.
fn decode_document(
    kv: &RawEvent,
    expected_kind: &str,
    key_fields: &[(&str, &str)],
    to_served: impl FnOnce(Value) -> Value,
) -> anyhow::Result<Value> {
    let stored: Value = serde_json::from_slice(&kv.value).context("not JSON")?;
    anyhow::ensure!(stored.is_object(), "not a JSON object");
    let stored_kind = stored.get("kind").and_then(Value::as_str).unwrap_or("");
    anyhow::ensure!(
        stored_kind.is_empty() || stored_kind == expected_kind,
        "kind is {stored_kind:?}, expected {expected_kind:?}"
    );
    let mut served = to_served(stored);
    let metadata = served
        .as_object_mut()
        .context("not a JSON object")?
        .entry("metadata")
        .or_insert_with(|| json!({}));
    let metadata = metadata
        .as_object_mut()
        .context("metadata is not an object")?;
    for &(field, from_key) in key_fields {
        match metadata.get(field).and_then(Value::as_str) {
            None | Some("") => {
                metadata.insert(field.to_string(), Value::String(from_key.to_string()));
            }
            Some(stored) => anyhow::ensure!(
                stored == from_key,
                "metadata.{field} {stored:?} does not match the key's {from_key:?}"
            ),
        }
    }
    Ok(served)
}

#[cfg(test)]
mod tests {
    use super::kubeconfig;
    use super::{resources, CODECS};
    use crate::etcd_watcher::{RawEvent, RawKind};

    #[test]
    fn a_direct_write_of_a_tracked_object_is_an_update_through_status_when_only_it_changed() {
        use crate::registry::FieldRecorder as _;
        use serde_json::json;
        let config = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
        let stored =
            super::apply_stored("Deployment", "kubectl", None, config, false).expect("applied");
        let mut status = stored.clone();
        status["status"] = json!({"replicas": 2});
        super::FieldOwnership.record("Deployment", "ctl", &stored, &mut status);
        let entries = status["metadata"]["managedFields"]
            .as_array()
            .expect("entries");
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert_eq!(entries[1]["manager"], "ctl");
        assert_eq!(entries[1]["subresource"], "status");
        let mut scaled = stored.clone();
        scaled["spec"]["replicas"] = json!(3);
        super::FieldOwnership.record("Deployment", "kcm", &stored, &mut scaled);
        let entries = scaled["metadata"]["managedFields"]
            .as_array()
            .expect("entries");
        let kcm = entries
            .iter()
            .find(|e| e["manager"] == "kcm")
            .expect("kcm's entry");
        assert!(kcm.get("subresource").is_none(), "{kcm}");
        assert_eq!(kcm["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
        // An object without entries stays untracked.
        let mut untracked = json!({"kind": "Deployment", "metadata": {"name": "w"}, "spec": {}});
        let old = untracked.clone();
        untracked["spec"]["replicas"] = json!(1);
        super::FieldOwnership.record("Deployment", "kcm", &old, &mut untracked);
        assert!(untracked["metadata"].get("managedFields").is_none());
    }

    fn stored(value: &str) -> RawEvent {
        RawEvent {
            kind: RawKind::Put,
            key: String::new(),
            value: value.as_bytes().to_vec(),
            create_revision: 7,
            mod_revision: 7,
            version: 1,
            prev: None,
        }
    }

    #[test]
    fn every_stored_resource_has_one_codec_from_its_row() {
        let stored_rows: Vec<_> = resources::RESOURCES
            .iter()
            .filter_map(|r| Some((r.plural, r.storage.directory()?, r.namespaced)))
            .collect();
        let codecs: Vec<_> = CODECS
            .iter()
            .map(|c| (c.resource, c.dir, c.namespaced))
            .collect();
        assert_eq!(codecs, stored_rows);
        assert_eq!(codecs.len(), 13);
    }

    #[test]
    fn served_documents_take_kind_and_api_version_from_their_row() {
        let codec = |plural: &str| CODECS.iter().find(|c| c.resource == plural).unwrap();
        let lease = (codec("leases").decode)("default", "lock", &stored(r#"{"spec":{}}"#)).unwrap();
        assert_eq!(
            lease,
            serde_json::json!({"kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
                "metadata": {"namespace": "default", "name": "lock"}, "spec": {}})
        );
        let node = (codec("nodes").decode)("", "n1", &stored("{}")).unwrap();
        assert_eq!(
            node,
            serde_json::json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n1"}})
        );
        let wrong = (codec("configmaps").decode)("default", "x", &stored(r#"{"kind":"Secret"}"#));
        assert_eq!(
            wrong.unwrap_err().to_string(),
            r#"kind is "Secret", expected "ConfigMap""#
        );
        let pod = (codec("pods").decode)("default", "web", &stored("{}")).unwrap();
        assert_eq!(
            (pod["kind"].as_str(), pod["apiVersion"].as_str()),
            (Some("Pod"), Some("v1"))
        );
    }

    /// The cluster entry of `kubeconfig(url)`, parsed.
    fn cluster(url: &str) -> serde_json::Value {
        let config: serde_json::Value =
            serde_yaml_ng::from_str(&kubeconfig(url)).expect("the kubeconfig is YAML");
        assert_eq!(config["current-context"], "kcm");
        assert_eq!(config["contexts"][0]["context"]["namespace"], "default");
        config["clusters"][0]["cluster"].clone()
    }

    #[test]
    fn a_plain_http_server_skips_tls_verification_and_an_https_one_does_not() {
        assert_eq!(
            cluster("http://127.0.0.1:8080"),
            serde_json::json!({"server": "http://127.0.0.1:8080", "insecure-skip-tls-verify": true})
        );
        assert_eq!(
            cluster("https://127.0.0.1:6443"),
            serde_json::json!({"server": "https://127.0.0.1:6443"})
        );
    }
}
