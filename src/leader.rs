//! Leader election with fencing for `kcm controller-manager --leader-elect`.
//!
//! No 2014 original: the 2014 controller-manager had none, and two of them were two writers
//! (leader election came in 2016, kubernetes PR #19621, as a lease lock without fencing).
//! Here every manager campaigns through etcd's election API on a lease of its own; the
//! winner's leader key and its create revision become the [`Fence`] that every write of a
//! fenced [`crate::registry::Registry`] compares in the same transaction (docs/departures.md,
//! "leader election" and "fencing").
//!
//! Invariants:
//! - a lease is renewed in the background every third of its TTL by a task the [`Lease`]
//!   owns; the lease counts as lost as soon as its TTL has passed since the last renewal
//!   that etcd confirmed (measured from when that renewal was *sent*, so the local view
//!   never outlives etcd's), or when etcd says it no longer knows it;
//! - a term ([`Leadership`]) ends when its lease is lost or a fenced write finds the leader
//!   key gone; its fence is then refused locally, and etcd refuses it anyway, so a paused
//!   or partitioned ex-leader cannot write even once after a successor was elected;
//! - the election's keys live under `{prefix}/elections/{name}/`, so one etcd role with a
//!   read-write grant on the prefix covers everything kcm touches.

use std::time::Duration;

use anyhow::Context as _;
use etcd_client::{
    Client, LeaderKey, LeaseClient, LeaseKeepAliveStream, LeaseKeeper, ResignOptions,
};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::registry::{describe_etcd_error, Fence, FenceSlot};

/// The election name used when `--leader-elect-name` is not given.
pub const DEFAULT_ELECTION_NAME: &str = "kcm-controller-manager";

/// How long a campaign waits after a failure before it tries again, at most.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(5);

/// Settings of `--leader-elect`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// The election; managers with the same name and prefix elect one leader. Default
    /// `kcm-controller-manager`.
    pub name: String,
    /// TTL of the lease behind a campaign: how long a leader that died silently keeps
    /// the standbys waiting. Whole seconds, at least 1. Default 15 s.
    pub lease_duration: Duration,
    /// What this process campaigns with (the election value), for logs and `etcdctl
    /// elect -l`. Default `{hostname}-{pid}`.
    pub identity: String,
}

impl LeaderElectionConfig {
    /// The defaults, with `identity` naming this host and process.
    pub fn new() -> LeaderElectionConfig {
        LeaderElectionConfig {
            name: DEFAULT_ELECTION_NAME.to_string(),
            lease_duration: Duration::from_secs(15),
            identity: default_identity(),
        }
    }
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        LeaderElectionConfig::new()
    }
}

/// `{hostname}-{pid}`.
pub fn default_identity() -> String {
    format!("{}-{}", hostname(), std::process::id())
}

/// This machine's host name (`kcm` when it cannot be read).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "kcm".to_string())
}

/// The key prefix of election `name` under `prefix`: `{prefix}/elections/{name}`. The
/// candidates' keys are `{election}/{lease id in hex}`.
pub fn election_key(prefix: &str, name: &str) -> String {
    format!("{prefix}/elections/{name}")
}

/// Campaigns for one election and hands out terms. Cheap to clone.
#[derive(Clone)]
pub struct Elector {
    client: Client,
    config: LeaderElectionConfig,
    /// `{prefix}/elections/{name}`.
    election: String,
    /// Filled with the fence of each term won; shared with the fenced registry.
    fence: FenceSlot,
    /// Bound on each unary call (grant, revoke, resign, reads).
    request_timeout: Duration,
}

impl Elector {
    /// An elector for `config.name` under `prefix`, publishing each term's fence in
    /// `fence`.
    pub fn new(
        client: Client,
        prefix: &str,
        config: LeaderElectionConfig,
        fence: FenceSlot,
        request_timeout: Duration,
    ) -> Elector {
        Elector {
            election: election_key(prefix, &config.name),
            client,
            config,
            fence,
            request_timeout,
        }
    }

    /// The election's key prefix.
    pub fn election(&self) -> &str {
        &self.election
    }

    /// Campaigns until this process leads, then publishes the term's fence. Failures
    /// (etcd unreachable, the lease lost while waiting) are logged and retried with
    /// backoff; this only returns with a term. Dropping the future withdraws the
    /// candidacy (etcd removes the key of a cancelled campaign) and stops renewing its
    /// lease.
    pub async fn campaign(&self) -> Leadership {
        let mut delay = Duration::from_millis(200);
        loop {
            match self.try_campaign().await {
                Ok(leadership) => return leadership,
                Err(e) => {
                    tracing::warn!(election = %self.election, error = %format!("{e:#}"),
                        "campaign failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(MAX_RETRY_DELAY);
                }
            }
        }
    }

    async fn try_campaign(&self) -> anyhow::Result<Leadership> {
        let lease = Lease::grant(
            &self.client,
            self.config.lease_duration,
            self.request_timeout,
            "leadership",
        )
        .await?;
        let mut election = self.client.election_client();
        let campaign = election.campaign(
            self.election.as_str(),
            self.config.identity.as_str(),
            lease.id,
        );
        let response = tokio::select! {
            response = campaign => response.map_err(|e| {
                anyhow::anyhow!("campaign in {}: {}", self.election, describe_etcd_error(&e))
            })?,
            _ = lease.lost.cancelled() => anyhow::bail!("lease lost while waiting to lead"),
        };
        let leader = response
            .leader()
            .cloned()
            .context("etcd answered a campaign without a leader key")?;
        // etcd 3.4's campaign can return after the candidate's own key expired with its
        // lease while it waited; the fence would then never hold. Check before leading.
        let mut kv = self.client.kv_client();
        let current = tokio::time::timeout(self.request_timeout, kv.get(leader.key(), None))
            .await
            .context("read the leader key: no answer")?
            .map_err(|e| anyhow::anyhow!("read the leader key: {}", describe_etcd_error(&e)))?;
        let held = current
            .kvs()
            .first()
            .is_some_and(|kv| kv.create_revision() == leader.rev() && kv.lease() == lease.id);
        anyhow::ensure!(held, "the leader key expired before the campaign returned");
        let fence = Fence::new(leader.key(), leader.rev(), lease.lost.child_token());
        self.fence.set(fence.clone());
        tracing::info!(
            election = %self.election,
            identity = %self.config.identity,
            term = leader.rev(),
            "elected leader"
        );
        Ok(Leadership {
            fence,
            leader,
            lease,
        })
    }

    /// Ends a term that was lost: refuses the fence, and revokes the lease (best effort)
    /// so a key that is somehow still there stops blocking the next leader.
    pub async fn release(&self, leadership: Leadership) {
        self.fence.clear();
        self.revoke(&leadership.lease).await;
    }

    /// Gives up leadership at shutdown, after the controllers stopped: resigns (deletes
    /// the leader key, so a standby leads at once instead of after the lease expires)
    /// and revokes the lease. Bounded by the request timeout; failures only delay the
    /// successor until the lease expires.
    pub async fn resign(&self, leadership: Leadership) {
        self.fence.clear();
        let mut election = self.client.election_client();
        let options = ResignOptions::new().with_leader(leadership.leader.clone());
        match tokio::time::timeout(self.request_timeout, election.resign(Some(options))).await {
            Ok(Ok(_)) => tracing::info!(election = %self.election, "resigned leadership"),
            Ok(Err(e)) => tracing::warn!(election = %self.election,
                error = %describe_etcd_error(&e), "resign failed; the lease will expire"),
            Err(_) => tracing::warn!(election = %self.election,
                "resign timed out; the lease will expire"),
        }
        self.revoke(&leadership.lease).await;
    }

    async fn revoke(&self, lease: &Lease) {
        lease.revoke(&self.client, self.request_timeout).await;
    }
}

/// One term of leadership: the fence every write carries, the leader key, and the lease
/// (whose renewal task it owns). Dropping it stops renewing; the lease then expires.
pub struct Leadership {
    fence: Fence,
    leader: LeaderKey,
    lease: Lease,
}

impl Leadership {
    /// The fencing token of this term (the leader key's create revision).
    pub fn term(&self) -> i64 {
        self.fence.create_revision
    }

    /// The leader key, e.g. `/registry/elections/kcm-controller-manager/694d77b5e6a4a20f`.
    pub fn key(&self) -> &[u8] {
        self.leader.key()
    }

    /// Resolves once the term is over: the lease was lost, or a fenced write found the
    /// leader key gone. Cancel-safe.
    pub async fn lost(&self) {
        self.fence.lost().cancelled().await;
    }
}

/// An etcd lease kept alive by a background task until it is dropped or lost. Also
/// holds a kubelet's node registration (`kubelet::Registration`).
pub(crate) struct Lease {
    pub(crate) id: i64,
    /// Cancelled when the lease is lost (expired, unknown to etcd, or not renewed within
    /// its TTL), or revoked by us.
    pub(crate) lost: CancellationToken,
    /// The renewal task; aborted on drop.
    keepalive: JoinHandle<()>,
}

impl Lease {
    /// Grants a lease of `ttl` (rounded up to whole seconds) and starts renewing it.
    /// `holds` names what the lease holds, for the log line when it is lost
    /// ("leadership", "node registration").
    pub(crate) async fn grant(
        client: &Client,
        ttl: Duration,
        request_timeout: Duration,
        holds: &'static str,
    ) -> anyhow::Result<Lease> {
        let seconds = i64::try_from(ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0))
            .unwrap_or(i64::MAX)
            .max(1);
        let mut leases = client.lease_client();
        let sent = Instant::now();
        let response = tokio::time::timeout(request_timeout, leases.grant(seconds, None))
            .await
            .context("grant a lease: no answer")?
            .map_err(|e| anyhow::anyhow!("grant a lease: {}", describe_etcd_error(&e)))?;
        // etcd may raise a TTL below its minimum; keep to what it granted.
        let granted = Duration::from_secs(u64::try_from(response.ttl()).unwrap_or(0).max(1));
        let lost = CancellationToken::new();
        let keepalive = tokio::spawn(keep_alive(
            client.lease_client(),
            response.id(),
            granted,
            sent + granted,
            lost.clone(),
            holds,
        ));
        Ok(Lease {
            id: response.id(),
            lost,
            keepalive,
        })
    }

    /// Stops renewing and revokes the lease, which deletes every key attached to it.
    /// Best effort, bounded by `request_timeout`: a lease that cannot be revoked expires
    /// on its own.
    pub(crate) async fn revoke(&self, client: &Client, request_timeout: Duration) {
        self.lost.cancel();
        let mut leases = client.lease_client();
        match tokio::time::timeout(request_timeout, leases.revoke(self.id)).await {
            Ok(Ok(_)) => {}
            // Already expired (the usual case after a loss) or etcd unreachable: the
            // lease ends on its own.
            Ok(Err(e)) => tracing::debug!(lease = self.id, error = %describe_etcd_error(&e),
                "revoke lease"),
            Err(_) => tracing::debug!(lease = self.id, "revoke lease timed out"),
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.keepalive.abort();
        self.lost.cancel();
    }
}

/// Renews lease `id` (which holds `holds`) every `ttl / 3` until it is lost, then cancels
/// `lost`.
///
/// `expires_at` is when the lease runs out if no renewal succeeds: the time the last
/// successful renewal was sent plus the TTL etcd granted. Each attempt is bounded by a
/// third of the TTL, so a hung member is abandoned for a fresh stream (which the balanced
/// channel may route to another member) while there is still time.
async fn keep_alive(
    mut leases: LeaseClient,
    id: i64,
    ttl: Duration,
    mut expires_at: Instant,
    lost: CancellationToken,
    holds: &'static str,
) {
    let period = ttl / 3;
    let retry = period.min(Duration::from_millis(500));
    let mut stream: Option<(LeaseKeeper, LeaseKeepAliveStream)> = None;
    let mut next = Instant::now() + period;
    loop {
        tokio::select! {
            _ = lost.cancelled() => return,
            _ = tokio::time::sleep_until(next.min(expires_at)) => {}
        }
        let sent = Instant::now();
        if sent >= expires_at {
            tracing::warn!(lease = id, "lease not renewed within its TTL; {holds} lost");
            lost.cancel();
            return;
        }
        let deadline = expires_at.min(sent + period);
        match tokio::time::timeout_at(deadline, renew(&mut leases, id, ttl, &mut stream)).await {
            Ok(Ok(Some(granted))) => {
                expires_at = sent + granted;
                next = sent + period;
            }
            Ok(Ok(None)) => {
                tracing::warn!(lease = id, "lease expired in etcd; {holds} lost");
                lost.cancel();
                return;
            }
            Ok(Err(e)) => {
                tracing::debug!(lease = id, error = %describe_etcd_error(&e), "renew lease; retrying");
                stream = None;
                next = Instant::now() + retry;
            }
            Err(_) => {
                tracing::debug!(
                    lease = id,
                    "renew lease: no answer; retrying on a new stream"
                );
                stream = None;
                next = Instant::now();
            }
        }
    }
}

/// One renewal: `Some(ttl)` when etcd renewed the lease, `None` when it no longer exists.
async fn renew(
    leases: &mut LeaseClient,
    id: i64,
    ttl: Duration,
    stream: &mut Option<(LeaseKeeper, LeaseKeepAliveStream)>,
) -> Result<Option<Duration>, etcd_client::Error> {
    let Some((keeper, responses)) = stream else {
        // Opening the stream sends one renewal and reads its answer.
        return match leases.keep_alive(id).await {
            Ok(opened) => {
                *stream = Some(opened);
                Ok(Some(ttl))
            }
            Err(etcd_client::Error::LeaseKeepAliveError(message))
                if message.contains("not found") =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        };
    };
    keeper.keep_alive().await?;
    match responses.message().await? {
        Some(response) if response.ttl() > 0 => Ok(Some(Duration::from_secs(
            u64::try_from(response.ttl()).unwrap_or(0),
        ))),
        Some(_) => Ok(None),
        None => Err(etcd_client::Error::LeaseKeepAliveError(
            "keepalive stream ended".to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn election_keys_live_under_the_prefix() {
        assert_eq!(
            election_key("/registry", DEFAULT_ELECTION_NAME),
            "/registry/elections/kcm-controller-manager"
        );
    }

    #[test]
    fn the_default_identity_names_this_process() {
        let identity = default_identity();
        assert!(
            identity.ends_with(&format!("-{}", std::process::id())),
            "{identity}"
        );
    }
}
