//! The apiserver's listener: HTTP/1.1 on loopback, HTTPS (rustls, `http/1.1` in ALPN)
//! beyond it, static bearer tokens (kube-apiserver's `--token-auth-file`), and the
//! connection limits an apiserver needs.
//!
//! Hardening, as the status endpoint's (`crate::status`) but fitted to long watches:
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

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;

use super::errors::ApiError;
use super::handlers::{dispatch, ApiState};
use super::TlsFiles;

/// How long a client may take to send a request's headers, and to send its next request
/// on a kept-alive connection.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections held at once that have not yet sent a whole request.
pub const MAX_PENDING: usize = 1024;

/// How long a write may wait for the peer to take bytes before the connection is closed.
pub const WRITE_STALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A stream whose writes fail once one has been blocked for `timeout` (the peer stopped
/// reading). The timer wakes the writer, so a blocked write is re-polled at the deadline
/// even though the socket never becomes writable.
struct StallGuard<S> {
    inner: S,
    timeout: Duration,
    stalled: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl<S> StallGuard<S> {
    fn new(inner: S, timeout: Duration) -> StallGuard<S> {
        StallGuard {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// After a write returned Pending: fails once the deadline passed, else arms the timer
    /// (registering this task's waker).
    fn pending<T>(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<T>> {
        let timeout = self.timeout;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match std::future::Future::poll(sleep.as_mut(), cx) {
            std::task::Poll::Ready(()) => std::task::Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the peer took nothing for the write stall timeout",
            ))),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for StallGuard<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for StallGuard<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match std::pin::Pin::new(&mut self.inner).poll_write(cx, buf) {
            std::task::Poll::Pending => self.pending(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }

    // Vectored writes pass through: without them hyper copies every chunk of a watch
    // into a per-connection buffer that never shrinks (about 240 KiB a watch).
    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            std::task::Poll::Pending => self.pending(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match std::pin::Pin::new(&mut self.inner).poll_flush(cx) {
            std::task::Poll::Pending => self.pending(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

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

/// The connections not yet past their first request, oldest first.
#[derive(Default)]
struct Pending {
    next_id: u64,
    open: BTreeMap<u64, CancellationToken>,
}

/// Serves until `shutdown` resolves, then stops accepting, ends every connection (and so
/// every watch) and returns.
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
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(state.clone());
    let pending = Arc::new(Mutex::new(Pending::default()));
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            biased;
            _ = &mut shutdown => break,
            _ = stop.cancelled() => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::debug!(error = %e, "accept an API connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        // Small writes (watch events) go out at once.
        let _ = stream.set_nodelay(true);
        let (id, close, evicted) = {
            let mut pending = pending.lock().expect("pending lock");
            let id = pending.next_id;
            pending.next_id += 1;
            let token = CancellationToken::new();
            pending.open.insert(id, token.clone());
            let mut evicted = false;
            while pending.open.len() > MAX_PENDING {
                if let Some((_, oldest)) = pending.open.pop_first() {
                    oldest.cancel();
                    evicted = true;
                }
            }
            (id, token, evicted)
        };
        if evicted {
            // Let the evicted connection's task close its socket before the next accept:
            // a flood of connections then holds the cap's descriptors, not the cap plus
            // a scheduler's backlog of closes.
            tokio::task::yield_now().await;
        }
        // The first request marks the connection as no longer pending.
        let started = {
            let pending = pending.clone();
            move || {
                pending.lock().expect("pending lock").open.remove(&id);
            }
        };
        let inner = hyper_util::service::TowerToHyperService::new(app.clone());
        let once = std::sync::Once::new();
        let service = hyper::service::service_fn(move |request| {
            once.call_once(&started);
            hyper::service::Service::call(&inner, request)
        });
        let (stop, tls, pending) = (stop.clone(), tls.clone(), pending.clone());
        tasks.spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT);
            let served = async {
                match tls {
                    None => {
                        let stream = StallGuard::new(stream, WRITE_STALL_TIMEOUT);
                        let connection =
                            http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                        run_connection(connection, &close, &stop).await;
                    }
                    Some(acceptor) => {
                        let stream = StallGuard::new(stream, WRITE_STALL_TIMEOUT);
                        // The handshake is part of being pending: under the header
                        // timeout, and evicted as the oldest like any silent connection.
                        let handshake =
                            tokio::time::timeout(HEADER_READ_TIMEOUT, acceptor.accept(stream));
                        let handshake = tokio::select! {
                            handshake = handshake => handshake,
                            _ = close.cancelled() => return,
                            _ = stop.cancelled() => return,
                        };
                        let stream = match handshake {
                            Ok(Ok(stream)) => stream,
                            Ok(Err(e)) => {
                                tracing::debug!(error = %e, "TLS handshake failed");
                                return;
                            }
                            Err(_) => return,
                        };
                        let connection =
                            http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                        run_connection(connection, &close, &stop).await;
                    }
                }
            };
            served.await;
            pending.lock().expect("pending lock").open.remove(&id);
        });
    }
    drop(listener);
    stop.cancel();
    while tasks.join_next().await.is_some() {}
    Ok(())
}

async fn run_connection<C>(connection: C, close: &CancellationToken, stop: &CancellationToken)
where
    C: std::future::Future + GracefulShutdown,
{
    tokio::pin!(connection);
    tokio::select! {
        _ = &mut connection => {}
        // Evicted while still pending: dropping the connection closes its socket.
        _ = close.cancelled() => {}
        _ = stop.cancelled() => {
            // Finish the request in flight (a watch ends at once: its body is dropped).
            connection.as_mut().graceful();
            let _ = tokio::time::timeout(Duration::from_secs(1), connection).await;
        }
    }
}

/// hyper's connections can be shut down gracefully.
trait GracefulShutdown {
    fn graceful(self: std::pin::Pin<&mut Self>);
}

impl<I, S> GracefulShutdown for hyper::server::conn::http1::Connection<I, S>
where
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::ResBody: 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + 'static,
{
    fn graceful(self: std::pin::Pin<&mut Self>) {
        self.graceful_shutdown();
    }
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
