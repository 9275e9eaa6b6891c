//! What `/healthz` decides ([`Health`]): the controller loops run (or this process is a
//! healthy standby), etcd answers within a second and has raised no alarm, no watch is
//! disconnected for long or restarting in a loop, and every simulated node of the
//! process holds its registration ([`NodeRegistrations`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::registry::{active_alarms, EtcdAlarm};

use super::Metrics;

/// What `/healthz` reports on.
pub struct Health {
    /// Set while the controller loops run.
    pub loops_running: AtomicBool,
    /// Why the loops are not running (or not leading), when they are not.
    pub reason: Mutex<String>,
    /// Set when the process runs with `--leader-elect`: a standby (not `leading`, loops
    /// not running) is then healthy.
    pub leader_election: AtomicBool,
    /// Set while this process holds the leadership.
    pub leading: AtomicBool,
    /// The etcd alarms last seen raised, by [`Health::watch_alarms`] or `/healthz`.
    alarms: Mutex<AlarmsSeen>,
    /// The node registrations this process holds (`kcm up`'s kubelets).
    pub nodes: NodeRegistrations,
    /// etcd, probed by `/healthz`; `None` for a process that reaches etcd only through an
    /// API server (`kcm controller-manager --kubeconfig`), which has no etcd to probe.
    client: Option<etcd_client::Client>,
}

/// The node registrations a process holds, as `/healthz` reports them: each node whose
/// registration is lost and not yet back fails it, named, with how long and why.
/// Cheap to clone; the clones share one table.
#[derive(Clone, Debug, Default)]
pub struct NodeRegistrations(Arc<Mutex<BTreeMap<String, NodeLost>>>);

#[derive(Debug)]
struct NodeLost {
    since: std::time::Instant,
    why: String,
}

impl NodeRegistrations {
    /// Node `node` lost its registration (`why`) or cannot get it back (`why` then
    /// says the latest error); the time it was first lost is kept.
    pub fn lost(&self, node: &str, why: impl Into<String>) {
        let why = why.into();
        let mut lost = self.0.lock().expect("node registrations lock");
        match lost.get_mut(node) {
            Some(entry) => entry.why = why,
            None => {
                lost.insert(
                    node.to_string(),
                    NodeLost {
                        since: std::time::Instant::now(),
                        why,
                    },
                );
            }
        }
    }

    /// Node `node` holds its registration (again).
    pub fn held(&self, node: &str) {
        self.0.lock().expect("node registrations lock").remove(node);
    }

    /// One line per node whose registration is lost, by name.
    pub fn report(&self) -> Vec<String> {
        self.0
            .lock()
            .expect("node registrations lock")
            .iter()
            .map(|(node, lost)| {
                format!(
                    "node {node}: registration lost for {:.1}s ({}); registering again",
                    lost.since.elapsed().as_secs_f64(),
                    lost.why
                )
            })
            .collect()
    }
}

/// How long `/healthz` waits for each of its etcd probes.
const ETCD_PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// How often [`Health::watch_alarms`] reads etcd's alarms.
pub const ALARM_POLL_INTERVAL: Duration = Duration::from_secs(5);

impl Health {
    pub fn new(client: etcd_client::Client) -> Health {
        Health {
            client: Some(client),
            ..Health::without_etcd()
        }
    }

    /// The health of a process without an etcd of its own to probe.
    pub fn without_etcd() -> Health {
        Health {
            loops_running: AtomicBool::new(false),
            reason: Mutex::new("starting".to_string()),
            leader_election: AtomicBool::new(false),
            leading: AtomicBool::new(false),
            alarms: Mutex::default(),
            nodes: NodeRegistrations::default(),
            client: None,
        }
    }

    /// Reads etcd's alarms every `period`, forever, so that a raised alarm is logged
    /// even when nobody asks `/healthz` (see [`Health::read_alarms`]).
    pub async fn watch_alarms(&self, period: Duration) -> std::convert::Infallible {
        loop {
            if let Err(e) = self.read_alarms().await {
                tracing::debug!(error = %e, "reading etcd's alarms failed");
            }
            tokio::time::sleep(period).await;
        }
    }

    /// etcd's raised alarms, and one log line per change since the last read: a warning
    /// naming the fix when an alarm is raised, a line when it is cleared. So a NOSPACE
    /// alarm is said once at warn, not once per refused write (those stay at debug).
    ///
    /// # Errors
    /// When etcd does not answer within a second or refuses.
    pub async fn read_alarms(&self) -> Result<Vec<EtcdAlarm>, String> {
        let Some(client) = &self.client else {
            return Ok(Vec::new());
        };
        let started = std::time::Instant::now();
        let alarms = active_alarms(client, ETCD_PROBE_TIMEOUT).await?;
        let changes = self
            .alarms
            .lock()
            .expect("health lock")
            .observe(started, &alarms);
        for change in changes {
            match change {
                AlarmChange::Raised(alarm) => tracing::warn!(%alarm, "{}", alarm.explain()),
                AlarmChange::Cleared(alarm) => {
                    tracing::info!(%alarm, "etcd's alarm {alarm} is cleared; writes work again")
                }
            }
        }
        Ok(alarms)
    }

    /// The body of a healthy answer: `ok`, plus with `--leader-elect` a line saying
    /// whether this process leads. `Err` with the reason when the loops should run but
    /// do not, etcd does not answer within a second, or etcd has raised an alarm
    /// (NOSPACE: its space quota is exhausted).
    pub async fn check(&self) -> Result<String, String> {
        let role = self
            .leader_election
            .load(Ordering::SeqCst)
            .then(|| self.leading.load(Ordering::SeqCst));
        if role != Some(false) && !self.loops_running.load(Ordering::SeqCst) {
            return Err(self.reason.lock().expect("health lock").clone());
        }
        let body = match role {
            None => "ok".to_string(),
            Some(true) => "ok\nleader: true".to_string(),
            Some(false) => "ok\nleader: false (standby)".to_string(),
        };
        let Some(client) = &self.client else {
            return Ok(body);
        };
        let mut kv = client.kv_client();
        let probe = kv.get("/", Some(etcd_client::GetOptions::new().with_count_only()));
        let (probe, alarms) = tokio::join!(
            tokio::time::timeout(ETCD_PROBE_TIMEOUT, probe),
            self.read_alarms()
        );
        // An alarm makes etcd refuse writes (NOSPACE) or everything (CORRUPT): the
        // controllers cannot act. Alarms that cannot be read are left to the probe.
        let alarms = alarms.unwrap_or_default();
        if !alarms.is_empty() {
            let reasons: Vec<String> = alarms.iter().map(|alarm| alarm.explain()).collect();
            return Err(reasons.join("\n"));
        }
        match probe {
            Ok(Ok(_)) => Ok(body),
            // etcd answered; a user restricted to kcm's prefix may not read "/".
            Ok(Err(etcd_client::Error::GRpcStatus(status)))
                if status.code() == tonic::Code::PermissionDenied =>
            {
                Ok(body)
            }
            Ok(Err(e)) => Err(format!(
                "etcd unreachable: {}",
                crate::registry::describe_etcd_error(&e)
            )),
            Err(_) => Err("etcd unreachable: no answer within 1s".to_string()),
        }
    }
}

/// The etcd alarms last seen raised, and when the read that saw them started.
#[derive(Debug, Default)]
struct AlarmsSeen {
    read_at: Option<std::time::Instant>,
    raised: Vec<EtcdAlarm>,
}

/// A change in etcd's raised alarms.
#[derive(Debug, PartialEq, Eq)]
enum AlarmChange {
    Raised(EtcdAlarm),
    Cleared(EtcdAlarm),
}

impl AlarmsSeen {
    /// Records `alarms`, read by a request that started at `read_at`; the changes since
    /// the last record. A read that started before the last recorded one is stale (two
    /// reads overlapped, `/healthz` and the periodic one) and changes nothing, so a
    /// change is reported once.
    fn observe(&mut self, read_at: std::time::Instant, alarms: &[EtcdAlarm]) -> Vec<AlarmChange> {
        if self.read_at.is_some_and(|last| read_at < last) {
            return Vec::new();
        }
        self.read_at = Some(read_at);
        let raised = alarms
            .iter()
            .filter(|alarm| !self.raised.contains(alarm))
            .map(|alarm| AlarmChange::Raised(*alarm));
        let cleared = self
            .raised
            .iter()
            .filter(|alarm| !alarms.contains(alarm))
            .map(|alarm| AlarmChange::Cleared(*alarm));
        let changes = raised.chain(cleared).collect();
        self.raised = alarms.to_vec();
        changes
    }
}

/// How long a watch may be without a live etcd watch before `/healthz` fails: longer
/// than a reconnect after a blip or an etcd restart takes.
pub const WATCH_DISCONNECTED_UNHEALTHY: Duration = Duration::from_secs(10);

/// `/healthz`'s answer: whether kcm is healthy, and the body saying why (or `ok`, with
/// the leadership line): [`Health::check`], then each watch disconnected or restarting
/// in a loop, then each node registration lost.
pub(super) async fn report(health: &Health, metrics: &Metrics) -> (bool, String) {
    let (mut healthy, mut body) = match health.check().await {
        Ok(body) => (true, body),
        Err(reason) => (false, reason),
    };
    // A watch that is disconnected while etcd answers is a controller working from a
    // stale cache: say so (with how long), and fail once it lasts.
    for (resource, for_, reason) in metrics.disconnected_watches() {
        healthy &= for_ < WATCH_DISCONNECTED_UNHEALTHY;
        body.push_str(&format!(
            "\nwatch {resource}: disconnected for {:.1}s ({reason})",
            for_.as_secs_f64()
        ));
    }
    // A watch that reconnects at once every time is never disconnected for long, but
    // may never stay up long enough to deliver: fail while it loops.
    for (resource, report) in metrics.looping_watches() {
        healthy = false;
        body.push_str(&format!(
            "\nwatch {resource}: restarting in a loop: {report}"
        ));
    }
    // A node of this process that cannot get its registration back runs no pod.
    for line in health.nodes.report() {
        healthy = false;
        body.push('\n');
        body.push_str(&line);
    }
    (healthy, body)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{AlarmChange, AlarmsSeen, EtcdAlarm};

    #[test]
    fn each_change_of_etcds_alarms_is_reported_once_and_stale_reads_change_nothing() {
        use AlarmChange::{Cleared, Raised};
        use EtcdAlarm::{Corrupt, NoSpace};
        let start = std::time::Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut seen = AlarmsSeen::default();
        assert_eq!(seen.observe(at(0), &[]), []);
        assert_eq!(seen.observe(at(10), &[NoSpace]), [Raised(NoSpace)]);
        assert_eq!(seen.observe(at(20), &[NoSpace]), []);
        assert_eq!(seen.observe(at(30), &[NoSpace]), []);
        // A read that started before the last one, answered after it.
        assert_eq!(seen.observe(at(25), &[]), []);
        assert_eq!(
            seen.observe(at(40), &[Corrupt]),
            [Raised(Corrupt), Cleared(NoSpace)]
        );
        assert_eq!(seen.observe(at(50), &[]), [Cleared(Corrupt)]);
        assert_eq!(seen.observe(at(60), &[]), []);
    }
}
