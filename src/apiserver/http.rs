//! The apiserver's listener: HTTP/1.1 on loopback, HTTPS (rustls, `http/1.1` in ALPN)
//! beyond it, static bearer tokens (kube-apiserver's `--token-auth-file`), and the
//! connection limits an apiserver needs. The connections are served by kcm's one HTTP
//! server, the status endpoint's (`status::serve_router`), with the API's [`Limits`].
//!
//! Hardening, as the status endpoint's but fitted to long watches:
//! - a client has [`HEADER_READ_TIMEOUT`] to send a request's headers (also the idle
//!   time of a kept-alive connection between requests);
//! - at most [`MAX_PENDING`] connections that have not yet sent a whole request are held;
//!   one more closes the oldest of them (a stuck or slow client, not a live request);
//! - every request but a watch gets the request timeout (504 after it), and is admitted
//!   by the in-flight limits first ([`super::limits`]: 429 beyond them);
//! - a TLS handshake counts as pending too: it has the header timeout, and a silent one
//!   is evicted like any other;
//! - watches have no lifetime bound here: they end on their own timeout, and their
//!   number is capped by `--max-watches` (429 beyond it);
//! - a connection whose peer takes nothing for [`WRITE_STALL_TIMEOUT`] while the server
//!   has bytes for it is closed: a watcher that stopped reading holds no socket, task or
//!   buffer for longer than that (the watch cache's own bound ends it sooner once it is
//!   polled again).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;

use super::errors::ApiError;
use super::handlers::{dispatch, ApiState};
use super::TlsFiles;
use crate::status::{serve_router, Limits};

/// How long a client may take to send a request's headers, and to send its next request
/// on a kept-alive connection.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections held at once that have not yet sent a whole request.
pub const MAX_PENDING: usize = 1024;

/// How long a write may wait for the peer to take bytes before the connection is closed.
pub const WRITE_STALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A TLS acceptor for the serving certificate and key, offering `http/1.1` in ALPN.
///
/// # Errors
/// When a file cannot be read or holds no certificate or key.
pub fn tls_acceptor(files: &TlsFiles) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert_file)
        .with_context(|| format!("read --tls-cert-file {}", files.cert_file.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("--tls-cert-file {}", files.cert_file.display()))?;
    anyhow::ensure!(
        !certs.is_empty(),
        "--tls-cert-file {} holds no certificate",
        files.cert_file.display()
    );
    let key = PrivateKeyDer::from_pem_file(&files.key_file)
        .with_context(|| format!("--tls-private-key-file {}", files.key_file.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the TLS certificate and key do not go together")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// The API's connection limits: [`HEADER_READ_TIMEOUT`], [`MAX_PENDING`] connections
/// not yet past their first request, no lifetime bound, [`WRITE_STALL_TIMEOUT`].
const LIMITS: Limits = Limits {
    header_read_timeout: HEADER_READ_TIMEOUT,
    max_connections: MAX_PENDING,
    pending_only: true,
    max_lifetime: None,
    write_stall_timeout: Some(WRITE_STALL_TIMEOUT),
    graceful_timeout: Duration::from_secs(1),
};

/// Serves until `shutdown` resolves, then stops accepting, ends every connection (and so
/// every watch) and returns: the API's router on kcm's one HTTP server
/// (`status::serve_router`), within [`LIMITS`].
///
/// # Errors
/// None so far: failed accepts and handshakes are logged and skipped.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    state: Arc<ApiState>,
    stop: CancellationToken,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let app = axum::Router::new().fallback(handle).with_state(state);
    serve_router(listener, tls, app, LIMITS, stop, shutdown).await
}

/// Every request: a watch streams for as long as it lasts; anything else is admitted by
/// the in-flight limits and gets the request timeout (waiting for body budget included).
async fn handle(
    State(state): State<Arc<ApiState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    let is_watch = uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    if is_watch {
        return dispatch(state, method, uri, headers, body).await;
    }
    let timeout = state.request_timeout;
    let admitted_then_served = async {
        let _admitted = match state.limits.admit(&method, uri.path(), &headers).await {
            Ok(admitted) => admitted,
            Err(refused) => return refused.into_response(),
        };
        dispatch(state.clone(), method, uri, headers, body).await
    };
    match tokio::time::timeout(timeout, admitted_then_served).await {
        Ok(response) => response,
        Err(_) => ApiError::timeout(format!(
            "the request did not finish within {}s",
            timeout.as_secs()
        ))
        .into_response(),
    }
}
