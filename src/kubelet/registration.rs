//! A node's registration: the key `{prefix}/minions/{name}`, created only if absent and held
//! on an etcd lease, so that one node name is one kubelet.
//!
//! 2014 kept minions under `/registry/minions/<name>` (pkg/registry/etcd/etcd.go), written
//! by the minion controller from `-machines` or a cloud provider, never by the kubelet;
//! nothing stopped two kubelets from serving one name. The later kubelet registers its own
//! Node object (`registerWithAPIServer`) and renews a Lease in `kube-node-lease`. In kcm
//! the registration is a plain key under 2014's directory whose value says who holds it
//! (`{pid}@{host}`), and whose lease keeps it only as long as its kubelet renews it: it is
//! the heartbeat. The Node object (`{prefix}/nodes/{name}`, `node_status`) is written
//! each time the registration is gained, and outlives it.
//!
//! Invariants:
//! - a name has at most one registration: it is created in a transaction that requires
//!   the key to be absent;
//! - a registration is never taken from a holder that may be alive: only a holder on this
//!   host whose process is gone, or this kubelet's own earlier registration, is replaced;
//! - while held, [`Status::Held`] carries the key's incarnation; the kubelet guards every
//!   write with it (see `Registry::guarded_by`), so etcd refuses a write made after the
//!   registration expired, was deleted or was taken over, even one already in flight;
//! - a lost registration is registered again if the name is free; if another holder has
//!   it, the status turns [`Status::Taken`] for good;
//! - while registering again fails, a warning names the node and the error at most once
//!   per [`RETRY_WARNING_PERIOD`], and [`Status::Lost`] carries that error (for `/healthz`,
//!   see [`report_to`]). The lease should be renewed on a connection of its own: on one
//!   shared with busy watches, its renewals wait behind them.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use etcd_client::{Client, Compare, CompareOp, KeyValue, PutOptions, Txn, TxnOp, TxnOpResponse};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::leader::{hostname, Lease};
use crate::registry::{describe_etcd_error, Incarnation};

/// TTL of a registration's lease: how long a kubelet that died without releasing its
/// name keeps it (a restart on the same host takes it back at once).
pub const LEASE_TTL: Duration = Duration::from_secs(10);

/// How often a held registration's key is read back, to notice a delete.
const CHECK_PERIOD: Duration = Duration::from_secs(2);

/// Longest wait between two attempts to register again.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(5);

/// How often an attempt re-reads a key that changed under it before giving up.
const MAX_ATTEMPT_ROUNDS: usize = 3;

/// Least time between two warnings that a lost registration cannot be registered again
/// (the attempts in between are logged at debug).
pub const RETRY_WARNING_PERIOD: Duration = Duration::from_secs(10);

/// The registration key of node `node`: `{prefix}/minions/{node}` (2014's `NodePath`).
pub fn registration_key(prefix: &str, node: &str) -> String {
    crate::api::registration_key(prefix, node)
}

/// Who holds a registration: a process on a host, written `{pid}@{host}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub host: String,
}

impl Holder {
    /// This process on this host.
    pub fn this_process() -> Holder {
        Holder {
            pid: std::process::id(),
            host: hostname(),
        }
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.pid, self.host)
    }
}

impl FromStr for Holder {
    type Err = ();

    fn from_str(s: &str) -> Result<Holder, ()> {
        let (pid, host) = s.split_once('@').ok_or(())?;
        Ok(Holder {
            pid: pid.parse().map_err(drop)?,
            host: host.to_string(),
        })
    }
}

/// The name is registered by someone else.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("node {node} is taken: registered by {holder} ({expiry})")]
pub struct NodeTaken {
    pub node: String,
    /// The registration's value (normally `{pid}@{host}`).
    pub holder: String,
    /// When it ends if nobody renews it, in words.
    pub expiry: String,
}

/// Where a registration stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Held: writes may go out, each guarded by this incarnation of the key.
    Held(Incarnation),
    /// Lost (why), and being registered again: write nothing.
    Lost(String),
    /// Lost, and the name is held by another: write nothing, ever.
    Taken(NodeTaken),
}

/// A node registration held by a background task that renews its lease, notices when it is
/// lost, and registers again. Dropping it stops the task (the lease then expires);
/// [`Registration::release`] gives the name back at once.
pub struct Registration {
    node: String,
    key: String,
    status_rx: watch::Receiver<Status>,
    check_now: Arc<Notify>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Registration {
    /// Registers node `node` under `prefix`, on a lease of [`LEASE_TTL`].
    ///
    /// # Errors
    /// [`NodeTaken`] (downcast it from the `anyhow::Error`) when another holder has the
    /// name; an etcd failure otherwise.
    pub async fn register(
        client: &Client,
        prefix: &str,
        node: &str,
        request_timeout: Duration,
    ) -> anyhow::Result<Registration> {
        let registrar = Registrar {
            client: client.clone(),
            key: registration_key(prefix, node),
            node: node.to_string(),
            me: Holder::this_process(),
            request_timeout,
        };
        let held = match registrar.attempt(&[]).await {
            Ok(held) => held,
            Err(Attempt::Taken(taken)) => return Err(taken.into()),
            Err(Attempt::Failed(e)) => return Err(e.context(format!("register node {node}"))),
        };
        tracing::debug!(node, key = %registrar.key, revision = held.create_revision, "node registered");
        let (status_tx, status_rx) = watch::channel(Status::Held(held.incarnation(&registrar.key)));
        let check_now = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        let key = registrar.key.clone();
        let task = tokio::spawn(maintain(
            registrar,
            held,
            status_tx,
            check_now.clone(),
            stop.clone(),
        ));
        Ok(Registration {
            node: node.to_string(),
            key,
            status_rx,
            check_now,
            stop,
            task,
        })
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// The registration key, e.g. `/registry/minions/node-1`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Follows the registration's status.
    pub fn status(&self) -> watch::Receiver<Status> {
        self.status_rx.clone()
    }

    /// Asks the task to read the key now (etcd refused a write guarded by it).
    pub fn check_now(&self) {
        self.check_now.notify_one();
    }

    /// Gives the name back: revokes the lease, which deletes the key, so a successor
    /// registers at once. Bounded by the request timeout.
    pub async fn release(mut self) {
        self.stop.cancel();
        let _ = (&mut self.task).await;
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A registration held: its lease and the key's create revision.
struct Held {
    lease: Lease,
    create_revision: i64,
}

impl Held {
    fn incarnation(&self, key: &str) -> Incarnation {
        Incarnation {
            key: key.to_string(),
            read_at: self.create_revision,
            created: Some(self.create_revision),
        }
    }
}

/// How an attempt to register failed.
enum Attempt {
    Taken(NodeTaken),
    Failed(anyhow::Error),
}

/// What registers one name.
struct Registrar {
    client: Client,
    key: String,
    node: String,
    me: Holder,
    request_timeout: Duration,
}

/// What to do about a registration found in place.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Its holder may be alive: the name is taken.
    Taken,
    /// Its holder is certainly gone (why): delete it and register.
    Replace(&'static str),
}

/// Judges a registration found in place, held by `holder` (`None`: a value kcm did not
/// write) on lease `lease`. `own_leases` are the leases of this kubelet's earlier
/// registrations; `alive` tells whether a pid of this host runs.
fn judge(
    holder: Option<&Holder>,
    lease: i64,
    me: &Holder,
    own_leases: &[i64],
    alive: impl Fn(u32) -> bool,
) -> Verdict {
    if lease != 0 && own_leases.contains(&lease) {
        return Verdict::Replace("it is this kubelet's own earlier registration");
    }
    match holder {
        Some(holder) if holder.host == me.host && holder.pid != me.pid && !alive(holder.pid) => {
            Verdict::Replace("its process is gone")
        }
        _ => Verdict::Taken,
    }
}

/// Whether process `pid` of this host exists (one of another user counts).
fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl Registrar {
    /// One attempt: create the key if absent on a fresh lease; replace a registration
    /// whose holder is certainly gone; report one that may be alive.
    async fn attempt(&self, own_leases: &[i64]) -> Result<Held, Attempt> {
        let lease = Lease::grant(
            &self.client,
            LEASE_TTL,
            self.request_timeout,
            "node registration",
        )
        .await
        .map_err(Attempt::Failed)?;
        let result = self.attempt_on(&lease, own_leases).await;
        match result {
            Ok(create_revision) => Ok(Held {
                lease,
                create_revision,
            }),
            Err(e) => {
                lease.revoke(&self.client, self.request_timeout).await;
                Err(e)
            }
        }
    }

    async fn attempt_on(&self, lease: &Lease, own_leases: &[i64]) -> Result<i64, Attempt> {
        let key = self.key.as_str();
        for _ in 0..MAX_ATTEMPT_ROUNDS {
            let txn = Txn::new()
                .when([Compare::create_revision(key, CompareOp::Equal, 0)])
                .and_then([TxnOp::put(
                    key,
                    self.me.to_string(),
                    Some(PutOptions::new().with_lease(lease.id)),
                )])
                .or_else([TxnOp::get(key, None)]);
            let response = self
                .bounded(
                    "create the registration key",
                    self.client.kv_client().txn(txn),
                )
                .await
                .map_err(Attempt::Failed)?;
            if response.succeeded() {
                return Ok(response.header().map_or(0, |h| h.revision()));
            }
            let current = response.op_responses().into_iter().find_map(|op| match op {
                TxnOpResponse::Get(get) => get.kvs().first().cloned(),
                _ => None,
            });
            // Deleted since: try again.
            let Some(current) = current else { continue };
            let holder_text = holder_text(&current);
            let holder = holder_text.parse::<Holder>().ok();
            match judge(
                holder.as_ref(),
                current.lease(),
                &self.me,
                own_leases,
                process_exists,
            ) {
                Verdict::Taken => return Err(Attempt::Taken(self.taken(&current).await)),
                Verdict::Replace(why) => {
                    tracing::warn!(node = %self.node, holder = %holder_text, reason = why,
                        "replacing a stale node registration");
                    let delete = Txn::new()
                        .when([Compare::mod_revision(
                            key,
                            CompareOp::Equal,
                            current.mod_revision(),
                        )])
                        .and_then([TxnOp::delete(key, None)]);
                    self.bounded(
                        "delete a stale registration",
                        self.client.kv_client().txn(delete),
                    )
                    .await
                    .map_err(Attempt::Failed)?;
                }
            }
        }
        Err(Attempt::Failed(anyhow::anyhow!(
            "{} kept changing while registering",
            self.key
        )))
    }

    /// The error for a registration `current` that someone else holds, with when it
    /// expires if nobody renews it.
    async fn taken(&self, current: &KeyValue) -> NodeTaken {
        let expiry = if current.lease() == 0 {
            "no lease: it stays until deleted".to_string()
        } else {
            let ttl = self
                .bounded(
                    "read the registration's lease",
                    self.client
                        .lease_client()
                        .time_to_live(current.lease(), None),
                )
                .await
                .map(|response| response.ttl());
            match ttl {
                Ok(ttl) if ttl > 0 => {
                    format!("expires in {ttl}s unless that process renews it")
                }
                _ => "its lease is expiring".to_string(),
            }
        };
        NodeTaken {
            node: self.node.clone(),
            holder: holder_text(current),
            expiry,
        }
    }

    /// Whether the registration is still held (`Ok(None)`), or why not.
    async fn check(&self, held: &Held) -> anyhow::Result<Option<String>> {
        let response = self
            .bounded(
                "read the registration key",
                self.client.kv_client().get(self.key.as_str(), None),
            )
            .await?;
        Ok(match response.kvs().first() {
            Some(kv) if kv.create_revision() == held.create_revision => None,
            Some(kv) => Some(format!(
                "its key was replaced by {}'s registration",
                holder_text(kv)
            )),
            None => Some("its key was deleted".to_string()),
        })
    }

    /// Waits until the registration is lost, and says why.
    async fn lost(&self, held: &Held, check_now: &Notify) -> String {
        loop {
            tokio::select! {
                _ = held.lease.lost.cancelled() => {
                    return format!(
                        "its lease ended: expired (not renewed within {}s) or revoked",
                        LEASE_TTL.as_secs()
                    );
                }
                _ = tokio::time::sleep(CHECK_PERIOD) => {}
                _ = check_now.notified() => {}
            }
            match self.check(held).await {
                Ok(None) => {}
                Ok(Some(reason)) => return reason,
                // etcd does not answer: the lease tells when that lasts.
                Err(e) => tracing::debug!(node = %self.node, error = %format!("{e:#}"),
                    "check the registration"),
            }
        }
    }

    async fn bounded<T>(
        &self,
        what: &str,
        call: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
    ) -> anyhow::Result<T> {
        tokio::time::timeout(self.request_timeout, call)
            .await
            .with_context(|| format!("{what}: no answer"))?
            .map_err(|e| anyhow::anyhow!("{what}: {}", describe_etcd_error(&e)))
    }
}

/// A registration's value as text, shortened.
fn holder_text(kv: &KeyValue) -> String {
    String::from_utf8_lossy(kv.value())
        .chars()
        .take(80)
        .collect()
}

/// Holds the registration until `stop`, registering again after each loss, until the name
/// is taken. Revokes the lease held when `stop` comes.
async fn maintain(
    registrar: Registrar,
    mut held: Held,
    status_tx: watch::Sender<Status>,
    check_now: Arc<Notify>,
    stop: CancellationToken,
) {
    // Leases of this kubelet's earlier registrations: a key still on one is its own.
    let mut own_leases = vec![held.lease.id];
    loop {
        let reason = tokio::select! {
            biased;
            _ = stop.cancelled() => {
                held.lease.revoke(&registrar.client, registrar.request_timeout).await;
                return;
            }
            reason = registrar.lost(&held, &check_now) => reason,
        };
        tracing::warn!(node = %registrar.node, %reason,
            "node registration lost; writing nothing until it is registered again");
        status_tx.send_replace(Status::Lost(reason.clone()));
        // Removes the key if it is somehow still there (say, the lease timed out here
        // while etcd was unreachable), so the next attempt can create it.
        held.lease
            .revoke(&registrar.client, registrar.request_timeout)
            .await;
        let mut delay = Duration::from_millis(200);
        let lost_at = tokio::time::Instant::now();
        let mut warned: Option<tokio::time::Instant> = None;
        held = loop {
            let attempt = tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                attempt = registrar.attempt(&own_leases) => attempt,
            };
            match attempt {
                Ok(held) => break held,
                Err(Attempt::Taken(taken)) => {
                    status_tx.send_replace(Status::Taken(taken));
                    return;
                }
                Err(Attempt::Failed(e)) => {
                    let error = format!("{e:#}");
                    if warned.is_none_or(|at| at.elapsed() >= RETRY_WARNING_PERIOD) {
                        warned = Some(tokio::time::Instant::now());
                        tracing::warn!(node = %registrar.node, %error,
                            lost_for = %format!("{:.1}s", lost_at.elapsed().as_secs_f64()),
                            "node registration lost and registering again failed; \
                             the node runs no pod until it is back; retrying");
                        // Followers (`/healthz`) see the latest error.
                        status_tx.send_replace(Status::Lost(format!(
                            "{reason}; registering again failed: {error}"
                        )));
                    } else {
                        tracing::debug!(node = %registrar.node, %error,
                            "register again; retrying");
                    }
                    tokio::select! {
                        biased;
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(delay) => {}
                    }
                    delay = (delay * 2).min(MAX_RETRY_DELAY);
                }
            }
        };
        own_leases.push(held.lease.id);
        tracing::info!(node = %registrar.node, revision = held.create_revision,
            "node registered again; writing");
        status_tx.send_replace(Status::Held(held.incarnation(&registrar.key)));
    }
}

/// Keeps `nodes` (what `/healthz` reports) in step with node `node`'s registration
/// `status` until the registration is gone: held, or lost and why.
pub async fn report_to(
    node: String,
    mut status: watch::Receiver<Status>,
    nodes: crate::status::NodeRegistrations,
) {
    loop {
        match &*status.borrow_and_update() {
            Status::Held(_) => nodes.held(&node),
            Status::Lost(why) => nodes.lost(&node, why.clone()),
            Status::Taken(taken) => nodes.lost(&node, format!("{taken}; this node stopped")),
        }
        if status.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(pid: u32, host: &str) -> Holder {
        Holder {
            pid,
            host: host.to_string(),
        }
    }

    #[test]
    fn holders_round_trip_and_odd_values_are_not_holders() {
        assert_eq!("1234@web-1".parse(), Ok(holder(1234, "web-1")));
        assert_eq!(holder(7, "a@b").to_string().parse(), Ok(holder(7, "a@b")));
        for odd in ["", "1234", "x@web-1", "-1@h", "someone else"] {
            assert_eq!(odd.parse::<Holder>(), Err(()), "{odd:?}");
        }
    }

    #[test]
    fn only_a_holder_that_is_certainly_gone_is_replaced() {
        let me = holder(100, "here");
        let dead = |_| false;
        let alive = |_| true;
        #[track_caller]
        fn check(found: Option<Holder>, lease: i64, alive: impl Fn(u32) -> bool, want: Verdict) {
            let me = holder(100, "here");
            assert_eq!(judge(found.as_ref(), lease, &me, &[5], alive), want);
        }
        // A process of this host that is gone.
        check(
            Some(holder(42, "here")),
            9,
            dead,
            Verdict::Replace("its process is gone"),
        );
        // Alive, or on another host (whose processes cannot be seen), or unreadable.
        check(Some(holder(42, "here")), 9, alive, Verdict::Taken);
        check(Some(holder(42, "there")), 9, dead, Verdict::Taken);
        check(None, 9, dead, Verdict::Taken);
        // This process: another kubelet in it, unless on one of its own leases.
        check(Some(me.clone()), 9, dead, Verdict::Taken);
        check(
            Some(me),
            5,
            dead,
            Verdict::Replace("it is this kubelet's own earlier registration"),
        );
        // A key without a lease is never "own".
        assert_eq!(judge(None, 0, &holder(1, "h"), &[0], dead), Verdict::Taken);
    }

    #[test]
    fn registration_keys_live_in_2014s_minions_directory() {
        assert_eq!(
            registration_key("/registry", "node-1"),
            "/registry/minions/node-1"
        );
    }
}
