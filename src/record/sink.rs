//! The event writer: client-go's `recordToSink` and kube-apiserver's event storage in one,
//! since kcm's controllers write to etcd themselves.
//!
//! One task takes the queued events in batches, correlates each ([`Correlator`]), keeps
//! the last write of each event name in the batch, and writes them concurrently, each a
//! plain put of the whole document at `{prefix}/events/{namespace}/{name}` attached to the
//! current lease. A put, not a compare-and-swap: only this writer writes an event of its
//! own making, and a put over an expired or deleted one recreates it, as client-go
//! recreates an event whose patch found it gone.
//!
//! Leases (kube-apiserver's `leaseManager`): one lease of [`EVENT_TTL`] +
//! [`LEASE_REUSE`] is shared by every event written within [`LEASE_REUSE`] of its grant,
//! up to [`LEASE_MAX_OBJECTS`] writes, so an event lives between one hour and one hour and
//! a minute after its last write, and a busy writer grants a lease a minute or a lease a
//! thousand events, not one per event. An update attaches the current lease again: an event
//! seen again lives an hour from then.
//!
//! Invariant: a failed write (etcd down, too slow, a lease refused) is counted and logged
//! (one warning a minute at most) and never retried: events are best effort, as in
//! client-go, and retrying would hold newer ones back.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use etcd_client::{KvClient, LeaseClient, PutOptions};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::{Correlated, Correlator, Event, EVENTS_DIR};

/// How long an event is kept after its last write (kube-apiserver's `--event-ttl`).
pub const EVENT_TTL: Duration = Duration::from_secs(3600);

/// How long one lease is shared by new writes.
pub const LEASE_REUSE: Duration = Duration::from_secs(60);

/// Writes one lease is given to before a new one is granted (kube-apiserver's
/// `defaultLeaseMaxObjectCount`). etcd 3.4 walks every key attached to a lease on each put
/// to it (its permission check of the lease's keys): without a bound, a scale-up's
/// thousands of events on one lease made each event put cost etcd time in proportion to the
/// events before it, and most of etcd's CPU.
pub const LEASE_MAX_OBJECTS: usize = 1000;

/// Events taken from the queue at once.
const BATCH: usize = 256;

/// How long one etcd call may take before the batch's writes count as failed.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a warning about failed or dropped events may be logged.
const WARNING_PERIOD: Duration = Duration::from_secs(60);

/// Events by what became of them: `recorded` (queued), `dropped` (the queue was full),
/// `skipped` (the spam filter), `combined` (a later event of the same name in the same
/// batch was written instead), `written`, `failed` (etcd). Once the queue is drained,
/// `recorded` = `skipped` + `combined` + `written` + `failed`. `kcm_events_total{result}`
/// on `/metrics`.
#[derive(Clone)]
pub struct Counts {
    family: Family<Vec<(&'static str, &'static str)>, Counter>,
    // The two a recorder counts on every event, looked up once (a family lookup takes a
    // lock and allocates its label set).
    recorded: Counter,
    dropped: Counter,
}

impl Default for Counts {
    fn default() -> Counts {
        Counts::new(Family::default())
    }
}

impl Counts {
    /// Counts into `family` (registered by the process's metrics).
    pub fn new(family: Family<Vec<(&'static str, &'static str)>, Counter>) -> Counts {
        let counter = |result| family.get_or_create(&vec![("result", result)]).clone();
        Counts {
            recorded: counter("recorded"),
            dropped: counter("dropped"),
            family,
        }
    }

    fn add(&self, result: &'static str, n: usize) {
        self.family
            .get_or_create(&vec![("result", result)])
            .inc_by(n as u64);
    }

    pub(super) fn get(&self, result: &'static str) -> u64 {
        self.family.get_or_create(&vec![("result", result)]).get()
    }

    pub(super) fn recorded(&self) {
        self.recorded.inc();
    }

    pub(super) fn dropped(&self) {
        self.dropped.inc();
    }
}

/// Where events are written other than etcd: a Kubernetes API server (`apiclient`), which
/// keeps them for its own `--event-ttl`.
pub trait EventTarget: Send + Sync {
    /// Writes `event`, a core/v1 Event document named `name` in `namespace`: creates it,
    /// or replaces the one of that name.
    fn write(
        &self,
        namespace: String,
        name: String,
        event: serde_json::Value,
    ) -> futures::future::BoxFuture<'static, anyhow::Result<()>>;
}

/// The leases events are written on (kube-apiserver's `leaseManager`): the current one
/// while younger than [`LEASE_REUSE`] and given fewer than [`LEASE_MAX_OBJECTS`] writes,
/// else a new one of [`EVENT_TTL`] + [`LEASE_REUSE`]. Shared by the event writer and the
/// apiserver's writes of events.
pub(crate) struct EventLeases {
    client: LeaseClient,
    current: tokio::sync::Mutex<Option<CurrentLease>>,
}

/// The lease new writes attach to: its id, when it was granted, and how many writes it
/// was given (each counts, as in kube-apiserver, whether it then succeeded or not).
#[derive(Debug, Clone, Copy)]
struct CurrentLease {
    id: i64,
    granted: Instant,
    given: usize,
}

impl CurrentLease {
    /// Whether `writes` more may attach to it, `now`.
    fn reusable(&self, now: Instant, writes: usize) -> bool {
        now.saturating_duration_since(self.granted) < LEASE_REUSE
            && self.given + writes <= LEASE_MAX_OBJECTS
    }
}

impl EventLeases {
    pub(crate) fn new(client: LeaseClient) -> EventLeases {
        EventLeases {
            client,
            current: tokio::sync::Mutex::new(None),
        }
    }

    /// The lease `writes` new writes attach to (granted at most once per [`LEASE_REUSE`]
    /// or per [`LEASE_MAX_OBJECTS`] writes: the writers wait for one grant).
    ///
    /// # Errors
    /// When etcd refuses the grant or does not answer within 10 s.
    pub(crate) async fn current(&self, writes: usize) -> anyhow::Result<i64> {
        let mut current = self.current.lock().await;
        let now = Instant::now();
        if let Some(lease) = current.as_mut().filter(|lease| lease.reusable(now, writes)) {
            lease.given += writes;
            return Ok(lease.id);
        }
        let ttl = (EVENT_TTL + LEASE_REUSE).as_secs() as i64;
        let mut leases = self.client.clone();
        let granted = tokio::time::timeout(WRITE_TIMEOUT, leases.grant(ttl, None))
            .await
            .map_err(|_| anyhow::anyhow!("grant a lease: no answer within {WRITE_TIMEOUT:?}"))?
            .map_err(|e| anyhow::anyhow!("grant a lease: {e}"))?;
        *current = Some(CurrentLease {
            id: granted.id(),
            granted: Instant::now(),
            given: writes,
        });
        Ok(granted.id())
    }

    /// Forgets the current lease (a write on it failed: it may be gone), so the next write
    /// gets a new one.
    pub(crate) async fn forget(&self) {
        *self.current.lock().await = None;
    }
}

/// The writer's state: where it writes, the correlator, the current lease.
pub(super) struct Sink {
    kv: Option<KvClient>,
    leases: Option<EventLeases>,
    remote: Option<std::sync::Arc<dyn EventTarget>>,
    prefix: String,
    counts: Counts,
    correlator: Correlator,
    last_warning: Option<Instant>,
    /// Dropped and failed events already warned about.
    warned: u64,
}

impl Sink {
    pub(super) fn new(client: &etcd_client::Client, prefix: &str, counts: Counts) -> Sink {
        Sink {
            kv: Some(client.kv_client()),
            leases: Some(EventLeases::new(client.lease_client())),
            remote: None,
            prefix: prefix.trim_end_matches('/').to_string(),
            counts,
            correlator: Correlator::default(),
            last_warning: None,
            warned: 0,
        }
    }

    /// A writer to `remote` instead of etcd.
    pub(super) fn remote(remote: std::sync::Arc<dyn EventTarget>, counts: Counts) -> Sink {
        Sink {
            kv: None,
            leases: None,
            remote: Some(remote),
            prefix: String::new(),
            counts,
            correlator: Correlator::default(),
            last_warning: None,
            warned: 0,
        }
    }

    /// Writes batches until every sender is gone and the queue is empty.
    pub(super) async fn run(mut self, mut queue_rx: tokio::sync::mpsc::Receiver<Event>) {
        let mut batch = Vec::with_capacity(BATCH);
        while queue_rx.recv_many(&mut batch, BATCH).await > 0 {
            // Drained, so the next batch reuses its room.
            self.write(batch.drain(..)).await;
            self.warn_if_lost();
        }
    }

    /// Correlates `batch` in order and writes what is left, the last state of each name.
    async fn write(&mut self, batch: impl ExactSizeIterator<Item = Event>) {
        let mut writes: Vec<Event> = Vec::with_capacity(batch.len());
        let mut index: HashMap<(String, String), usize> = HashMap::new();
        let (mut skipped, mut combined) = (0, 0);
        for event in batch {
            let at = event.last_timestamp;
            let event = match self.correlator.correlate(event, at) {
                Correlated::Create(event) | Correlated::Update(event) => event,
                Correlated::Skip => {
                    skipped += 1;
                    continue;
                }
            };
            let key = (event.namespace.clone(), event.name.clone());
            match index.get(&key) {
                Some(&i) => {
                    writes[i] = event;
                    combined += 1;
                }
                None => {
                    index.insert(key, writes.len());
                    writes.push(event);
                }
            }
        }
        self.counts.add("skipped", skipped);
        self.counts.add("combined", combined);
        if writes.is_empty() {
            return;
        }
        if let Some(remote) = &self.remote {
            let puts = writes.iter().map(|event| {
                let write =
                    remote.write(event.namespace.clone(), event.name.clone(), event.to_json());
                tokio::time::timeout(WRITE_TIMEOUT, write)
            });
            let results = futures::future::join_all(puts).await;
            let failed = results.iter().filter(|r| !matches!(r, Ok(Ok(())))).count();
            if let Some(Ok(Err(e))) = results.iter().find(|r| !matches!(r, Ok(Ok(())))) {
                tracing::debug!(error = %format!("{e:#}"), failed, "events: writes failed");
            }
            self.counts.add("failed", failed);
            self.counts.add("written", writes.len() - failed);
            return;
        }
        let lease = match self.lease(writes.len()).await {
            Ok(lease) => lease,
            Err(e) => {
                self.counts.add("failed", writes.len());
                tracing::debug!(error = %format!("{e:#}"), "events: no lease; not written");
                return;
            }
        };
        let kv = self.kv.clone().expect("an etcd writer");
        let puts = writes.iter().map(|event| {
            let mut kv = kv.clone();
            let key = format!(
                "{}/{EVENTS_DIR}/{}/{}",
                self.prefix, event.namespace, event.name
            );
            let value = serde_json::to_vec(&event.to_json()).unwrap_or_default();
            async move {
                let options = PutOptions::new().with_lease(lease);
                tokio::time::timeout(WRITE_TIMEOUT, kv.put(key, value, Some(options))).await
            }
        });
        let results = futures::future::join_all(puts).await;
        let failed = results.iter().filter(|r| !matches!(r, Ok(Ok(_)))).count();
        if failed > 0 {
            // The lease may be gone (revoked, or etcd restored): grant a new one next time.
            if let Some(leases) = &self.leases {
                leases.forget().await;
            }
            if let Some(error) = results.into_iter().find_map(|r| match r {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some(format!("no answer within {WRITE_TIMEOUT:?}")),
            }) {
                tracing::debug!(%error, failed, "events: writes failed");
            }
        }
        self.counts.add("failed", failed);
        self.counts.add("written", writes.len() - failed);
    }

    async fn lease(&mut self, writes: usize) -> anyhow::Result<i64> {
        self.leases
            .as_ref()
            .expect("an etcd writer")
            .current(writes)
            .await
    }

    /// One warning a minute at most when events were dropped or failed since the last.
    fn warn_if_lost(&mut self) {
        let (dropped, failed) = (self.counts.get("dropped"), self.counts.get("failed"));
        let lost = dropped + failed;
        if lost == self.warned
            || self
                .last_warning
                .is_some_and(|at| at.elapsed() < WARNING_PERIOD)
        {
            return;
        }
        let store = if self.remote.is_some() {
            "the API server"
        } else {
            "etcd"
        };
        tracing::warn!(
            dropped,
            failed,
            "events lost: dropped because {} were already waiting, or not written because {store} failed (events are best effort; the objects themselves are unaffected)",
            super::QUEUE_LENGTH
        );
        self.warned = lost;
        self.last_warning = Some(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_given_to_new_writes_for_a_minute_or_a_thousand_writes() {
        let granted = Instant::now();
        let lease = |given| CurrentLease {
            id: 7,
            granted,
            given,
        };
        assert!(lease(1).reusable(granted, 1));
        assert!(lease(LEASE_MAX_OBJECTS - 1).reusable(granted + LEASE_REUSE / 2, 1));
        assert!(
            !lease(LEASE_MAX_OBJECTS).reusable(granted, 1),
            "the thousandth write was the last"
        );
        assert!(
            !lease(LEASE_MAX_OBJECTS - 100).reusable(granted, 101),
            "a batch that would pass the bound gets a new lease"
        );
        assert!(lease(LEASE_MAX_OBJECTS - 100).reusable(granted, 100));
        assert!(!lease(1).reusable(granted + LEASE_REUSE, 1), "a minute old");
        // A clock read before the grant (another task's) does not make it old.
        assert!(lease(1).reusable(granted - Duration::from_secs(1), 1));
    }
}
