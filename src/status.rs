//! The status endpoint of `kcm controller-manager`: `/healthz` and `/metrics`.
//!
//! 2014's controller-manager served `/healthz` (pkg/healthz/healthz.go: 200 "ok") on
//! `--address`:`--port` (127.0.0.1:10252, pkg/master/ports/ports.go). kcm keeps that and
//! adds Prometheus metrics; `/healthz` also checks that the loops run and etcd answers.
//! With `--leader-elect`, a healthy standby answers 200 too, and the body's second line
//! (`leader: true` or `leader: false (standby)`) and the `kcm_leader` gauge tell which.
//! In `kcm up`, a simulated node whose registration is lost and not back yet fails it
//! too, named with why ([`NodeRegistrations`]).
//!
//! Three parts: `status/metrics.rs` ([`Metrics`], what `/metrics` renders),
//! `status/health.rs` ([`Health`], what `/healthz` decides) and `status/server.rs`
//! ([`bind`], [`serve`]; and [`serve_router`], kcm's one HTTP server with its connection
//! limits, which the apiserver serves the API through too).

mod health;
mod metrics;
mod server;

pub use health::{Health, NodeRegistrations, ALARM_POLL_INTERVAL, WATCH_DISCONNECTED_UNHEALTHY};
pub use metrics::{Metrics, ResourceLabel};
pub use server::{
    bind, serve, serve_router, Limits, HEADER_READ_TIMEOUT, MAX_CONNECTIONS,
    MAX_CONNECTION_LIFETIME, STATUS_LIMITS,
};
