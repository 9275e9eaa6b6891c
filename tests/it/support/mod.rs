//! Shared helpers for the integration tests: a throwaway etcd per test ([`start_etcd`]), a TCP
//! proxy that injects network faults ([`FaultProxy`]) and pollers that replace fixed sleeps.
//! The one way to start an apiserver is [`apiserver`], the one way to run `kcm` is [`kcm`];
//! a test file imports helpers from here, never from another test file.
#![allow(dead_code)] // Each test module uses a different subset.

pub mod apiserver;
pub mod cluster;
pub mod etcd;
pub mod history;
pub mod kcm;
pub mod kubectl;
pub mod objects;
pub mod proxy;
pub mod watcher;

use std::future::Future;
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

// Not every test module names every type; the harness's surface is these re-exports.
#[allow(unused_imports)]
pub use {
    etcd::{start_etcd, start_etcd_with, EtcdServer},
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
///
/// `KCM_TEST_BIN` names another build instead, to measure a change before and after with
/// the same tests (`KCM_TEST_BIN=../before/target/debug/kcm cargo test --test it NAME`).
pub fn kcm_bin() -> PathBuf {
    std::env::var_os("KCM_TEST_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kcm")), PathBuf::from)
}

/// A TCP port on 127.0.0.1 that was free a moment ago, for a child process (etcd, kcm) to bind.
///
/// Ports come from a per-process counter (starting at a random offset) below the kernel's
/// ephemeral range, each checked by binding it, rather than from binding port 0: two tests
/// asking the kernel at the same moment can both get the same just-closed port, and a port that
/// etcd released when a test killed it comes straight back to another test's etcd, so a client
/// silently talks to the wrong server. Here a port is never handed out twice by one test
/// process (until the range wraps), and no outgoing connection is ever given one. Another
/// process can still take it before the child binds it; [`start_etcd`] retries on that.
pub fn free_port() -> u16 {
    static NEXT: OnceLock<AtomicU32> = OnceLock::new();
    let (low, high) = port_range();
    let span = u32::from(high - low);
    let next = NEXT.get_or_init(|| AtomicU32::new(rand::random::<u32>() % span));
    for _ in 0..span {
        let offset = next.fetch_add(1, Ordering::Relaxed) % span;
        let port = low + u16::try_from(offset).expect("offset below span");
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return port;
        }
    }
    panic!("no free port on 127.0.0.1 in {low}..{high}");
}

/// `[10000, start of the ephemeral range)`, or the ephemeral range itself if that leaves too
/// few ports below it.
fn port_range() -> (u16, u16) {
    const LOW: u16 = 10_000;
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| {
            let mut bounds = range.split_whitespace().map(|bound| bound.parse::<u16>());
            Some((bounds.next()?.ok()?, bounds.next()?.ok()?))
        })
        .unwrap_or((32_768, 60_999));
    if ephemeral.0 >= LOW + 1_000 {
        (LOW, ephemeral.0)
    } else {
        ephemeral
    }
}

/// Sends `tracing` output to the test's captured output, filtered by `RUST_LOG`. Safe to call
/// from every test: only the first call installs the subscriber.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
}
