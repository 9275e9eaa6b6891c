//! Shared helpers for the integration tests: a throwaway etcd per test ([`start_etcd`]), a TCP
//! proxy that injects network faults ([`FaultProxy`]) and pollers that replace fixed sleeps.
#![allow(dead_code)] // Each test module uses a different subset.

pub mod etcd;
pub mod proxy;

use std::future::Future;
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::time::Duration;

// Not every test module names every type; the harness's surface is these re-exports.
#[allow(unused_imports)]
pub use {
    etcd::{start_etcd, EtcdServer},
    proxy::FaultProxy,
};

/// How often [`eventually`] re-runs its check.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Polls `check` every 20 ms until it returns `true`.
///
/// Panics with `timed out after {timeout:?} waiting for {what}` when `timeout` passes first, so
/// name the condition in `what` ("pod count to reach 3"): an async fn cannot be
/// `#[track_caller]`, and the message is all the failure shows. The check always runs at least
/// once, even with a zero timeout.
pub async fn eventually<F, Fut>(timeout: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Runs `fut` to completion, panicking with "test did not finish within {limit:?}; likely
/// deadlocked" if it takes longer than `limit`. Wrap every integration test body in it.
pub async fn with_timeout<T>(limit: Duration, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, fut).await {
        Ok(value) => value,
        Err(_) => panic!("test did not finish within {limit:?}; likely deadlocked"),
    }
}

/// Path of the `kcm` binary that cargo built for this test run.
pub fn kcm_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kcm"))
}

/// A TCP port on 127.0.0.1 that was free a moment ago (the kernel picks it, then the listener is
/// closed). Another process can take it before you bind it, so callers that hand it to a child
/// process should retry on "address already in use".
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .expect("bind 127.0.0.1:0 to find a free port")
        .port()
}

/// Sends `tracing` output to the test's captured output, filtered by `RUST_LOG`. Safe to call
/// from every test: only the first call installs the subscriber.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
}
