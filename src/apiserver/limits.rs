//! What all requests in flight may cost at once: kube-apiserver's in-flight limits
//! (`--max-requests-inflight`, `--max-mutating-requests-inflight`) and a byte budget for
//! the request bodies being read and decoded.
//!
//! As kube-apiserver counts them (its max-in-flight filter, the one that runs when API
//! Priority and Fairness is off):
//! - a watch is long-running and counts against neither limit (`--max-watches` bounds
//!   watches instead);
//! - GET and HEAD are read-only and count against `--max-requests-inflight`; every other
//!   method counts against `--max-mutating-requests-inflight`;
//! - beyond a limit the request is refused at once with 429 `TooManyRequests` and
//!   `Retry-After: 1` (kube-apiserver answers a plain-text body; kcm answers a `Status`,
//!   which client-go and kube-rs read the same way);
//! - 0 means no limit;
//! - health probes (`/healthz`, `/livez`, `/readyz`) and `/metrics` are exempt, as
//!   kube-apiserver's probes are from its flow control: a busy server still says it is
//!   alive and ready.
//!
//! The body budget has no kube-apiserver flag: its bodies cost what Go's decoder costs.
//! kcm's decoded `serde_json::Value` costs a multiple of the body's bytes, so the bytes of
//! bodies in flight are bounded as well: a request with a body holds budget for its
//! `Content-Length` (the body limit when chunked) for as long as it is served, and waits
//! up to [`BODY_WAIT`] for it (then 429 with `Retry-After`, as a full in-flight limit).
//! Small writes never wait on each other: [`BODY_BYTES_IN_FLIGHT`] holds thousands of
//! typical objects but only 21 bodies of the largest size.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::http::{header, HeaderMap, Method};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::errors::ApiError;

/// kube-apiserver's `--max-requests-inflight` default.
pub const DEFAULT_MAX_REQUESTS_INFLIGHT: usize = 400;

/// kube-apiserver's `--max-mutating-requests-inflight` default.
pub const DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT: usize = 200;

/// Bytes of request bodies served at once: 64 MiB, 21 bodies of the 3 MiB limit.
pub const BODY_BYTES_IN_FLIGHT: usize = 64 * 1024 * 1024;

/// How long a body waits for its share of the budget before it is refused with 429.
pub const BODY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The budget is counted in KiB (a semaphore counts in `u32`).
const BUDGET_UNIT: usize = 1024;

/// A body at least this large asks for the allocator's free memory to be given back
/// once it is served.
const TRIM_AFTER_BYTES: usize = 1024 * 1024;

/// How often the memory freed by large bodies is given back.
const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Requests being served, by `request_kind` (`readOnly`, `mutating`), as kube-apiserver's
/// `apiserver_current_inflight_requests`.
pub type InFlight = Family<Vec<(&'static str, &'static str)>, Gauge>;

/// The limits of one apiserver.
pub struct Limits {
    readonly: Option<Limit>,
    mutating: Option<Limit>,
    /// What each kind of request has in flight now (counted with or without a limit).
    in_flight: InFlight,
    body_budget: Arc<Semaphore>,
    /// The largest body a request may send (what a chunked body holds).
    max_body_bytes: usize,
    /// Set when a large body was served since the last trim.
    trim_wanted: Arc<AtomicBool>,
}

struct Limit {
    permits: Arc<Semaphore>,
    max: usize,
    flag: &'static str,
}

impl Limit {
    fn new(max: usize, flag: &'static str) -> Option<Limit> {
        (max > 0).then(|| Limit {
            permits: Arc::new(Semaphore::new(max)),
            max,
            flag,
        })
    }
}

/// What a request holds while it is served; dropping it frees its share.
#[must_use]
pub struct Admitted {
    _slot: Option<OwnedSemaphorePermit>,
    body: Option<OwnedSemaphorePermit>,
    trim_wanted: Option<Arc<AtomicBool>>,
    /// Its kind's in-flight gauge, counted down when it is done.
    in_flight: Option<Gauge>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some(in_flight) = &self.in_flight {
            in_flight.dec();
        }
        // A large body's decoded form was freed with its request.
        if let (Some(body), Some(trim_wanted)) = (&self.body, &self.trim_wanted) {
            if body.num_permits() * BUDGET_UNIT >= TRIM_AFTER_BYTES {
                trim_wanted.store(true, Ordering::Relaxed);
            }
        }
    }
}

impl Limits {
    /// `max_readonly` and `max_mutating` as the flags say (0: no limit); `max_body_bytes`
    /// is the body limit (a chunked body holds that much of the budget).
    pub fn new(max_readonly: usize, max_mutating: usize, max_body_bytes: usize) -> Limits {
        Limits {
            readonly: Limit::new(max_readonly, "--max-requests-inflight"),
            mutating: Limit::new(max_mutating, "--max-mutating-requests-inflight"),
            in_flight: InFlight::default(),
            body_budget: Arc::new(Semaphore::new(BODY_BYTES_IN_FLIGHT / BUDGET_UNIT)),
            max_body_bytes: max_body_bytes.min(BODY_BYTES_IN_FLIGHT),
            trim_wanted: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The in-flight gauge, to register (`apiserver_current_inflight_requests`).
    pub fn in_flight(&self) -> InFlight {
        self.in_flight.clone()
    }

    /// Gives the memory large bodies freed back to the system, every [`TRIM_EVERY`] while
    /// they come; runs until dropped.
    ///
    /// An allocator keeps what a burst freed for later: glibc's kept it for good (after 100
    /// bodies of the worst shape at once the process held its peak, and a second burst on
    /// other threads grew it further); jemalloc returns it only as its decay runs, over
    /// seconds of allocator activity. [`crate::alloc::give_back`] returns the free pages
    /// of every arena at once.
    pub async fn give_back_memory(&self) {
        let mut tick = tokio::time::interval(TRIM_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if self.trim_wanted.swap(false, Ordering::Relaxed) {
                let _ = tokio::task::spawn_blocking(crate::alloc::give_back).await;
            }
        }
    }

    /// Admits a request that is not a watch: its in-flight slot at once or a 429, then
    /// its body's share of the budget (waiting for it).
    ///
    /// # Errors
    /// 429 `TooManyRequests` when its kind of request is at its limit.
    pub async fn admit(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
    ) -> Result<Admitted, ApiError> {
        if is_exempt(path) {
            return Ok(Admitted {
                _slot: None,
                body: None,
                trim_wanted: None,
                in_flight: None,
            });
        }
        let (limit, kind) = if is_mutating(method) {
            (&self.mutating, "mutating")
        } else {
            (&self.readonly, "readOnly")
        };
        let slot = match limit {
            None => None,
            Some(limit) => Some(limit.permits.clone().try_acquire_owned().map_err(|_| {
                ApiError::too_many_requests(format!(
                    "too many requests in flight: this apiserver serves at most {} {} requests at once ({}); try again later",
                    limit.max,
                    if is_mutating(method) { "mutating" } else { "read-only" },
                    limit.flag
                ))
            })?),
        };
        // Counted from here: a request waiting for its body's budget is in flight.
        let in_flight = self
            .in_flight
            .get_or_create(&vec![("request_kind", kind)])
            .clone();
        in_flight.inc();
        let mut admitted = Admitted {
            _slot: slot,
            body: None,
            trim_wanted: Some(self.trim_wanted.clone()),
            in_flight: Some(in_flight),
        };
        admitted.body = match body_share(headers, self.max_body_bytes) {
            0 => None,
            units => {
                let share = self.body_budget.clone().acquire_many_owned(units);
                match tokio::time::timeout(BODY_WAIT, share).await {
                    Ok(share) => Some(share.expect("the body budget is never closed")),
                    Err(_) => {
                        return Err(ApiError::too_many_requests(format!(
                            "too many request bodies in flight: this apiserver decodes at most {} MiB of bodies at once; try again later",
                            BODY_BYTES_IN_FLIGHT >> 20
                        )))
                    }
                }
            }
        };
        Ok(admitted)
    }
}

fn is_mutating(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

fn is_exempt(path: &str) -> bool {
    matches!(
        path.trim_end_matches('/'),
        "/healthz" | "/livez" | "/readyz" | "/metrics"
    )
}

/// The budget units a request's body holds: its declared length up to the body limit,
/// the limit when it is chunked, nothing without a body.
fn body_share(headers: &HeaderMap, max_body_bytes: usize) -> u32 {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let chunked = headers.contains_key(header::TRANSFER_ENCODING);
    let bytes = match declared {
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX).min(max_body_bytes),
        None if chunked => max_body_bytes,
        None => 0,
    };
    u32::try_from(bytes.div_ceil(BUDGET_UNIT)).expect("the body limit fits in u32 KiB")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The apiserver's body limit.
    const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, value.parse().unwrap());
        }
        headers
    }

    #[tokio::test]
    async fn beyond_a_limit_a_request_gets_429_naming_the_flag_and_a_freed_slot_is_reused() {
        let limits = Limits::new(1, 2, MAX_BODY_BYTES);
        let none = HeaderMap::new();
        let read = limits.admit(&Method::GET, "/api/v1/pods", &none).await;
        let read = read.unwrap();
        let refused = limits.admit(&Method::GET, "/api/v1/pods", &none).await;
        let refused = refused.err().expect("a second read is over the limit");
        assert_eq!(refused.code, 429);
        assert!(
            refused.message.contains("--max-requests-inflight"),
            "{refused}"
        );
        // Writes have their own limit; probes and metrics none.
        let write = limits.admit(&Method::POST, "/api/v1/namespaces/d/pods", &none);
        let _first = write.await.unwrap();
        let write = limits.admit(&Method::DELETE, "/api/v1/namespaces/d/pods/x", &none);
        let _second = write.await.unwrap();
        let refused = limits.admit(&Method::PATCH, "/api/v1/namespaces/d/pods/x", &none);
        let refused = refused
            .await
            .err()
            .expect("a third write is over the limit");
        assert!(refused.message.contains("--max-mutating-requests-inflight"));
        for path in ["/readyz", "/healthz", "/livez", "/metrics"] {
            assert!(
                limits.admit(&Method::GET, path, &none).await.is_ok(),
                "{path}"
            );
        }
        let gauge = |kind| {
            limits
                .in_flight()
                .get_or_create(&vec![("request_kind", kind)])
                .get()
        };
        assert_eq!((gauge("readOnly"), gauge("mutating")), (1, 2));
        drop(read);
        assert_eq!(gauge("readOnly"), 0);
        assert!(limits.admit(&Method::GET, "/api", &none).await.is_ok());
    }

    #[tokio::test]
    async fn zero_means_no_limit() {
        let limits = Limits::new(0, 0, MAX_BODY_BYTES);
        let (none, mut held) = (HeaderMap::new(), Vec::new());
        for _ in 0..1000 {
            let admitted = limits.admit(&Method::POST, "/api/v1/namespaces/d/pods", &none);
            held.push(admitted.await.unwrap());
        }
    }

    #[test]
    fn a_body_holds_its_declared_length_or_the_limit_when_chunked() {
        let small = headers(&[("content-length", "2048")]);
        assert_eq!(body_share(&small, MAX_BODY_BYTES), 2);
        let huge = headers(&[("content-length", "999999999999")]);
        assert_eq!(
            body_share(&huge, MAX_BODY_BYTES) as usize * BUDGET_UNIT,
            MAX_BODY_BYTES
        );
        let chunked = headers(&[("transfer-encoding", "chunked")]);
        assert_eq!(
            body_share(&chunked, MAX_BODY_BYTES) as usize * BUDGET_UNIT,
            MAX_BODY_BYTES
        );
        assert_eq!(body_share(&HeaderMap::new(), MAX_BODY_BYTES), 0);
    }

    #[tokio::test]
    async fn bodies_beyond_the_budget_wait_until_one_finishes() {
        let limits = Limits::new(0, 0, MAX_BODY_BYTES);
        let full = headers(&[("content-length", &MAX_BODY_BYTES.to_string())]);
        let fits = BODY_BYTES_IN_FLIGHT / MAX_BODY_BYTES;
        let mut held = Vec::new();
        for _ in 0..fits {
            held.push(limits.admit(&Method::POST, "/p", &full).await.unwrap());
        }
        let waiting = limits.admit(&Method::POST, "/p", &full);
        tokio::pin!(waiting);
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        held.pop();
        assert!(waiting.await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_waits_too_long_for_budget_gets_429() {
        let limits = Limits::new(0, 0, MAX_BODY_BYTES);
        let full = headers(&[("content-length", &MAX_BODY_BYTES.to_string())]);
        let mut held = Vec::new();
        for _ in 0..BODY_BYTES_IN_FLIGHT / MAX_BODY_BYTES {
            held.push(limits.admit(&Method::POST, "/p", &full).await.unwrap());
        }
        let refused = limits
            .admit(&Method::POST, "/p", &full)
            .await
            .err()
            .unwrap();
        assert_eq!(refused.code, 429);
        assert!(refused.message.contains("64 MiB"), "{refused}");
    }
}
