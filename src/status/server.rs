//! The status endpoint's HTTP server: [`bind`] and [`serve`] `/healthz` and `/metrics`
//! over hyper, with a header timeout, a connection lifetime and a cap on open
//! connections that axum's own `serve` lacks.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
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

/// The connections being served, oldest first, each with the token that closes it.
#[derive(Default)]
struct Connections {
    next_id: u64,
    open: BTreeMap<u64, CancellationToken>,
}

impl Connections {
    /// Admits a connection; closes the oldest ones beyond `limit`. Returns its id and
    /// token.
    fn admit(&mut self, limit: usize) -> (u64, CancellationToken) {
        let id = self.next_id;
        self.next_id += 1;
        let token = CancellationToken::new();
        self.open.insert(id, token.clone());
        while self.open.len() > limit {
            if let Some((_, oldest)) = self.open.pop_first() {
                oldest.cancel();
            }
        }
        (id, token)
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
/// [`MAX_CONNECTIONS`] are served at once. axum's own `serve` has none of these limits,
/// so connections are served by hyper directly.
///
/// # Errors
/// None so far: a failed accept (say, out of descriptors) is logged and retried.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let app = axum::Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(self::metrics))
        .with_state(AppState { metrics, health });
    let service = hyper_util::service::TowerToHyperService::new(app);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let connections = Arc::new(Mutex::new(Connections::default()));
    let stop = CancellationToken::new();
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            biased;
            _ = &mut shutdown => break,
            // Reap finished connections as they end.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, or a connection reset before it was accepted:
                    // wait a moment rather than spin.
                    tracing::debug!(error = %e, "accept a status connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (id, close) = connections
            .lock()
            .expect("connections lock")
            .admit(MAX_CONNECTIONS);
        let connection =
            http.serve_connection(hyper_util::rt::TokioIo::new(stream), service.clone());
        let (connections, stop) = (connections.clone(), stop.clone());
        tasks.spawn(async move {
            tokio::pin!(connection);
            let lifetime = tokio::time::sleep(MAX_CONNECTION_LIFETIME);
            tokio::pin!(lifetime);
            tokio::select! {
                _ = &mut connection => {}
                // Evicted or too old: dropping the connection closes its socket.
                _ = close.cancelled() => {}
                _ = &mut lifetime => {}
                _ = stop.cancelled() => {
                    // Finish the request in flight, take no more.
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(HEADER_READ_TIMEOUT, connection).await;
                }
            }
            connections.lock().expect("connections lock").remove(id);
        });
    }
    drop(listener);
    stop.cancel();
    while tasks.join_next().await.is_some() {}
    Ok(())
}
