//! kcm's one HTTP server: [`serve_router`] serves an axum router over hyper, with the
//! limits axum's own `serve` lacks (a header timeout, a cap on connections that closes
//! the oldest, optionally a connection lifetime, a write-stall timeout and TLS). The
//! status endpoint ([`bind`], [`serve`]: `/healthz` and `/metrics`) and the apiserver
//! (`apiserver/http.rs`, its router and its [`Limits`]) both serve through it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use super::health::{self, Health};
use super::Metrics;

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    health: Arc<Health>,
}

async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    let (healthy, body) = health::report(&state.health, &state.metrics).await;
    if healthy {
        (StatusCode::OK, body)
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, body)
    }
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
}

/// Binds the status endpoint on `addr`, warning when the address is reachable from other
/// hosts (the endpoint has no authentication). Callers bind before they start anything
/// else, so that a busy port fails fast, having done nothing.
///
/// `holder` names who else may hold the port ("another kcm up") and `flags` the flags
/// that choose another ("--port"), for the error message.
///
/// # Errors
/// When the address cannot be bound (in use, not an address of this host).
pub async fn bind(
    addr: SocketAddr,
    holder: &str,
    flags: &str,
) -> anyhow::Result<tokio::net::TcpListener> {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => anyhow::bail!(
            "the status port {addr} is in use ({holder}?); use {flags} to choose another"
        ),
        Err(e) => anyhow::bail!(
            "cannot serve status on {addr}: {e}; use {flags} to choose another address"
        ),
    };
    if !addr.ip().is_loopback() {
        tracing::warn!(
            address = %listener.local_addr().unwrap_or(addr),
            "the status endpoint (/healthz, /metrics) has no authentication and is reachable from other hosts; \
             use --address 127.0.0.1 unless that is intended"
        );
    }
    Ok(listener)
}

/// How long a client may take to send a request's headers, counted from when the
/// connection opens or its previous response was sent: hyper's header timer also runs
/// while a kept-alive connection waits for its next request, so this is the idle timeout
/// too. A status endpoint is asked small questions; a probe or scraper that needs longer
/// is stuck.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest any one connection lives, whatever it is doing (a body trickled byte by
/// byte, a response never read): far more than a `/metrics` scrape needs.
pub const MAX_CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

/// Most connections served at once. A connection beyond it closes the oldest one, which
/// is far more likely a stuck client than a live request (those take milliseconds), so
/// `/healthz` answers at once even while stuck clients fill every slot, and the process
/// never holds more than this many sockets for the endpoint.
pub const MAX_CONNECTIONS: usize = 128;

/// The limits of one server ([`serve_router`]).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// How long a client may take to send a request's headers, and to send its next
    /// request on a kept-alive connection (hyper's header timer runs then too).
    pub header_read_timeout: Duration,
    /// Most connections held at once (see `pending_only`); one more closes the oldest.
    pub max_connections: usize,
    /// Count only the connections that have not yet sent a whole request (a stuck or
    /// slow client, not a live request or a watch); `false` counts every connection.
    pub pending_only: bool,
    /// The longest any one connection lives; `None` for no bound (watches end on their
    /// own timeout).
    pub max_lifetime: Option<Duration>,
    /// A connection whose peer takes nothing for this long while the server has bytes for
    /// it is closed; `None` for no such timeout.
    pub write_stall_timeout: Option<Duration>,
    /// How long shutdown waits for the request in flight on each connection.
    pub graceful_timeout: Duration,
}

/// The status endpoint's limits: [`HEADER_READ_TIMEOUT`], [`MAX_CONNECTIONS`] counted
/// over every connection, [`MAX_CONNECTION_LIFETIME`].
pub const STATUS_LIMITS: Limits = Limits {
    header_read_timeout: HEADER_READ_TIMEOUT,
    max_connections: MAX_CONNECTIONS,
    pending_only: false,
    max_lifetime: Some(MAX_CONNECTION_LIFETIME),
    write_stall_timeout: None,
    graceful_timeout: HEADER_READ_TIMEOUT,
};

/// The connections counted against the cap, oldest first, each with the token that
/// closes it.
#[derive(Default)]
struct Connections {
    next_id: u64,
    open: BTreeMap<u64, CancellationToken>,
}

impl Connections {
    /// Admits a connection; closes the oldest ones beyond `limit`. Returns its id, its
    /// token, and whether one was closed.
    fn admit(&mut self, limit: usize) -> (u64, CancellationToken, bool) {
        let id = self.next_id;
        self.next_id += 1;
        let token = CancellationToken::new();
        self.open.insert(id, token.clone());
        let mut evicted = false;
        while self.open.len() > limit {
            if let Some((_, oldest)) = self.open.pop_first() {
                oldest.cancel();
                evicted = true;
            }
        }
        (id, token, evicted)
    }

    fn remove(&mut self, id: u64) {
        self.open.remove(&id);
    }
}

/// Serves `/healthz` and `/metrics` (HTTP/1.1) until `shutdown` resolves, then lets the
/// requests in flight finish (at most [`HEADER_READ_TIMEOUT`] more) and returns.
///
/// Each connection has [`HEADER_READ_TIMEOUT`] to send its headers (and as idle time
/// between requests) and lives at most [`MAX_CONNECTION_LIFETIME`]; at most
/// [`MAX_CONNECTIONS`] are served at once ([`STATUS_LIMITS`]).
///
/// # Errors
/// None so far: a failed accept (say, out of descriptors) is logged and retried.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    serve_router(
        listener,
        None,
        router(metrics, health),
        STATUS_LIMITS,
        CancellationToken::new(),
        shutdown,
    )
    .await
}

/// The status endpoint's routes: `/healthz` and `/metrics`.
fn router(metrics: Arc<Metrics>, health: Arc<Health>) -> axum::Router {
    axum::Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(self::metrics))
        .with_state(AppState { metrics, health })
}

/// Serves `app` (HTTP/1.1, over `tls` when given) on `listener` within `limits` until
/// `shutdown` resolves or `stop` is cancelled; then stops accepting, cancels `stop`, lets
/// each connection finish its request in flight (at most `limits.graceful_timeout`; a
/// streamed body such as a watch ends at once) and returns.
///
/// # Errors
/// None so far: failed accepts and handshakes are logged and skipped.
pub async fn serve_router(
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    app: axum::Router,
    limits: Limits,
    stop: CancellationToken,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let connections = Arc::new(Mutex::new(Connections::default()));
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            biased;
            _ = &mut shutdown => break,
            _ = stop.cancelled() => break,
            // Reap finished connections as they end.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, or a connection reset before it was accepted:
                    // wait a moment rather than spin.
                    tracing::debug!(error = %e, "accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        // Small writes (watch events) go out at once.
        let _ = stream.set_nodelay(true);
        let (id, close, evicted) = connections
            .lock()
            .expect("connections lock")
            .admit(limits.max_connections);
        if evicted {
            // Let the evicted connection's task close its socket before the next accept:
            // a flood of connections then holds the cap's descriptors, not the cap plus
            // a scheduler's backlog of closes.
            tokio::task::yield_now().await;
        }
        // With `pending_only`, the first request takes the connection off the count.
        let started = {
            let connections = connections.clone();
            let pending_only = limits.pending_only;
            move || {
                if pending_only {
                    connections.lock().expect("connections lock").remove(id);
                }
            }
        };
        let inner = hyper_util::service::TowerToHyperService::new(app.clone());
        let once = std::sync::Once::new();
        let service = hyper::service::service_fn(move |request| {
            once.call_once(&started);
            hyper::service::Service::call(&inner, request)
        });
        let (stop, tls, connections) = (stop.clone(), tls.clone(), connections.clone());
        tasks.spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout);
            let stream = StallGuard::new(stream, limits.write_stall_timeout);
            let served = async {
                match tls {
                    None => {
                        let connection =
                            http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                        run_connection(connection, &close, &stop, &limits).await;
                    }
                    Some(acceptor) => {
                        // The handshake is part of being pending: under the header
                        // timeout, and evicted as the oldest like any silent connection.
                        let handshake = tokio::time::timeout(
                            limits.header_read_timeout,
                            acceptor.accept(stream),
                        );
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
                        run_connection(connection, &close, &stop, &limits).await;
                    }
                }
            };
            served.await;
            connections.lock().expect("connections lock").remove(id);
        });
    }
    drop(listener);
    stop.cancel();
    while tasks.join_next().await.is_some() {}
    Ok(())
}

/// Serves one connection until it ends, is evicted, outlives `limits.max_lifetime`, or
/// the server stops (then its request in flight may finish).
async fn run_connection<C>(
    connection: C,
    close: &CancellationToken,
    stop: &CancellationToken,
    limits: &Limits,
) where
    C: std::future::Future + GracefulShutdown,
{
    tokio::pin!(connection);
    let lifetime = async {
        match limits.max_lifetime {
            Some(lifetime) => tokio::time::sleep(lifetime).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = &mut connection => {}
        // Evicted or too old: dropping the connection closes its socket.
        _ = close.cancelled() => {}
        _ = lifetime => {}
        _ = stop.cancelled() => {
            // Finish the request in flight, take no more (a watch ends at once: its body
            // is dropped).
            connection.as_mut().graceful();
            let _ = tokio::time::timeout(limits.graceful_timeout, connection).await;
        }
    }
}

/// hyper's connections can be shut down gracefully.
trait GracefulShutdown {
    fn graceful(self: Pin<&mut Self>);
}

impl<I, S> GracefulShutdown for hyper::server::conn::http1::Connection<I, S>
where
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::ResBody: 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + 'static,
{
    fn graceful(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// A stream whose writes fail once one has been blocked for `timeout` (the peer stopped
/// reading); without a timeout, a plain pass-through. The timer wakes the writer, so a
/// blocked write is re-polled at the deadline even though the socket never becomes
/// writable.
struct StallGuard<S> {
    inner: S,
    timeout: Option<Duration>,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> StallGuard<S> {
    fn new(inner: S, timeout: Option<Duration>) -> StallGuard<S> {
        StallGuard {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// After a write returned Pending: fails once the deadline passed, else arms the timer
    /// (registering this task's waker).
    fn pending<T>(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<T>> {
        let Some(timeout) = self.timeout else {
            return Poll::Pending;
        };
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match std::future::Future::poll(sleep.as_mut(), cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the peer took nothing for the write stall timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for StallGuard<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for StallGuard<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Pending => self.pending(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }

    // Vectored writes pass through: without them hyper copies every chunk of a watch
    // into a per-connection buffer that never shrinks (about 240 KiB a watch).
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Pending => self.pending(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Pending => self.pending(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
