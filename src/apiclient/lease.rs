//! Leader election through the API: a `coordination.k8s.io/v1` Lease, as client-go's
//! `LeaseLock` (`tools/leaderelection/resourcelock/leaselock.go`) with its elector's loop
//! (`tools/leaderelection/leaderelection.go`, `tryAcquireOrRenew`).
//!
//! - A candidate reads the Lease every retry period. It takes it when there is none (a
//!   create), when it holds it already, or when the holder's record has not changed for
//!   `leaseDurationSeconds` as measured on the candidate's own clock since it last saw the
//!   record change (so clocks need not agree, only run at the same rate). Taking or
//!   renewing is a `PUT` at the Lease's resourceVersion: of two candidates one wins.
//! - The leader renews every retry period; a term is lost when no renewal succeeded for
//!   the renew deadline (two thirds of the lease), or when a renewal finds another holder.
//! - A leader that stops resigns: it writes the Lease with no holder, so a standby takes
//!   over at its next retry instead of after the lease.
//!
//! There is no fence: a write cannot compare the Lease, so a deposed leader's writes in
//! flight may still land. docs/invariants.md says what that means for each controller.

use std::time::{Duration, Instant, SystemTime};

use http::Method;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{ApiClient, RequestError};
use crate::api::micro_time;
use crate::leader::LeaderElectionConfig;

/// The namespace of the Lease, as kube-controller-manager's.
pub const LEASE_NAMESPACE: &str = "kube-system";

/// An election through a Lease.
pub struct LeaseElector {
    api: ApiClient,
    path: String,
    name: String,
    identity: String,
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
}

/// One term as leader: `lost` is cancelled when it ends.
pub struct LeaseTerm {
    lost: CancellationToken,
    stop: CancellationToken,
    renewer: tokio::task::JoinHandle<()>,
    /// The Lease's `leaseTransitions` when the term began.
    pub transitions: i64,
}

impl LeaseTerm {
    /// Resolves when the term is lost.
    pub async fn lost(&self) {
        self.lost.cancelled().await;
    }
}

/// The holder's record as last seen, and when it was first seen so.
struct Observed {
    spec: Value,
    at: Instant,
}

/// What one attempt found.
enum Attempt {
    /// This process holds the Lease now; its `leaseTransitions`.
    Held(i64),
    /// Another holder's lease has not run out.
    HeldByOther,
}

impl LeaseElector {
    /// The elector of `config.name` (the Lease's name in [`LEASE_NAMESPACE`]), with
    /// client-go's proportions: renew deadline 2/3 of the lease, retry period 2/15 of it
    /// (15 s, 10 s and 2 s by default).
    pub fn new(api: ApiClient, config: &LeaderElectionConfig) -> LeaseElector {
        let lease_duration = config.lease_duration.max(Duration::from_secs(1));
        LeaseElector {
            api,
            path: format!(
                "/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{}",
                config.name
            ),
            name: config.name.clone(),
            identity: config.identity.clone(),
            lease_duration,
            renew_deadline: lease_duration * 2 / 3,
            retry_period: lease_duration * 2 / 15,
        }
    }

    /// `kube-system/{name}`, for logs.
    pub fn lease(&self) -> String {
        format!("{LEASE_NAMESPACE}/{}", self.name)
    }

    /// Campaigns until this process holds the Lease, then renews it in a task of its own.
    pub async fn campaign(&self) -> LeaseTerm {
        let mut observed = None;
        let transitions = loop {
            match self.try_acquire_or_renew(&mut observed).await {
                Ok(Attempt::Held(transitions)) => break transitions,
                Ok(Attempt::HeldByOther) => {}
                Err(e) => tracing::debug!(lease = %self.lease(), error = %e, "lease not taken"),
            }
            tokio::time::sleep(self.retry_period).await;
        };
        tracing::info!(lease = %self.lease(), identity = %self.identity, transitions, "leading: the lease is ours");
        let (lost, stop) = (CancellationToken::new(), CancellationToken::new());
        let renewer = tokio::spawn(self.renewer(observed, lost.clone(), stop.clone()));
        LeaseTerm {
            lost,
            stop,
            renewer,
            transitions,
        }
    }

    /// Renews every retry period until `stop`, or until the term is lost (`lost`).
    fn renewer(
        &self,
        mut observed: Option<Observed>,
        lost: CancellationToken,
        stop: CancellationToken,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let elector = self.clone_parts();
        async move {
            let mut renewed = Instant::now();
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(elector.retry_period) => {}
                }
                match elector.try_acquire_or_renew(&mut observed).await {
                    Ok(Attempt::Held(_)) => renewed = Instant::now(),
                    Ok(Attempt::HeldByOther) => {
                        tracing::warn!(lease = %elector.lease(), "the lease has another holder; leadership lost");
                        break;
                    }
                    Err(e) if renewed.elapsed() >= elector.renew_deadline => {
                        tracing::warn!(lease = %elector.lease(), error = %e, "the lease was not renewed within the renew deadline; leadership lost");
                        break;
                    }
                    Err(e) => {
                        tracing::debug!(lease = %elector.lease(), error = %e, "renewing the lease failed; retrying")
                    }
                }
                if renewed.elapsed() >= elector.renew_deadline {
                    tracing::warn!(lease = %elector.lease(), "the lease was not renewed within the renew deadline; leadership lost");
                    break;
                }
            }
            lost.cancel();
        }
    }

    fn clone_parts(&self) -> LeaseElector {
        LeaseElector {
            api: self.api.clone(),
            path: self.path.clone(),
            name: self.name.clone(),
            identity: self.identity.clone(),
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
        }
    }

    /// Ends `term` and gives the Lease up (client-go's `ReleaseOnCancel`): no holder, so
    /// a standby takes it at its next retry. A failure is logged: the lease then runs out.
    pub async fn resign(&self, term: LeaseTerm) {
        term.stop.cancel();
        let _ = term.renewer.await;
        if term.lost.is_cancelled() {
            return;
        }
        let released = async {
            let lease = self
                .api
                .request(Method::GET, &self.path, None, None)
                .await?;
            if lease
                .pointer("/spec/holderIdentity")
                .and_then(Value::as_str)
                != Some(self.identity.as_str())
            {
                return Ok(());
            }
            let mut lease = lease;
            let now = micro_time(SystemTime::now());
            lease["spec"]["holderIdentity"] = Value::Null;
            lease["spec"]["leaseDurationSeconds"] = json!(1);
            lease["spec"]["renewTime"] = json!(now);
            self.api
                .request(Method::PUT, &self.path, Some(&lease), None)
                .await
                .map(|_| ())
        };
        match released.await {
            Ok(()) => tracing::info!(lease = %self.lease(), "resigned: the lease is released"),
            Err(e) => {
                tracing::warn!(lease = %self.lease(), error = %e, "releasing the lease failed; a standby takes over once it runs out")
            }
        }
    }

    /// client-go's `tryAcquireOrRenew`.
    async fn try_acquire_or_renew(
        &self,
        observed: &mut Option<Observed>,
    ) -> Result<Attempt, RequestError> {
        let now = SystemTime::now();
        let lease = match self.api.request(Method::GET, &self.path, None, None).await {
            Err(e) if e.code() == Some(404) => {
                let created = self.create(now).await?;
                *observed = Some(Observed {
                    spec: created["spec"].clone(),
                    at: Instant::now(),
                });
                return Ok(Attempt::Held(0));
            }
            other => other?,
        };
        let spec = lease.get("spec").cloned().unwrap_or_else(|| json!({}));
        if observed.as_ref().is_none_or(|o| o.spec != spec) {
            *observed = Some(Observed {
                spec: spec.clone(),
                at: Instant::now(),
            });
        }
        let holder = spec["holderIdentity"].as_str().unwrap_or_default();
        let duration = spec["leaseDurationSeconds"]
            .as_u64()
            .map_or(self.lease_duration, Duration::from_secs);
        let seen_at = observed.as_ref().expect("set above").at;
        if !holder.is_empty() && holder != self.identity && seen_at.elapsed() < duration {
            return Ok(Attempt::HeldByOther);
        }
        let ours = holder == self.identity;
        let transitions = spec["leaseTransitions"].as_i64().unwrap_or(0) + i64::from(!ours);
        let mut updated = lease;
        let stamp = micro_time(now);
        updated["spec"] = json!({
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_duration.as_secs(),
            "acquireTime": if ours { spec["acquireTime"].clone() } else { json!(stamp) },
            "renewTime": stamp,
            "leaseTransitions": transitions,
        });
        match self
            .api
            .request(Method::PUT, &self.path, Some(&updated), None)
            .await
        {
            Ok(written) => {
                *observed = Some(Observed {
                    spec: written["spec"].clone(),
                    at: Instant::now(),
                });
                Ok(Attempt::Held(transitions))
            }
            Err(e) if e.code() == Some(409) => Ok(Attempt::HeldByOther),
            Err(e) => Err(e),
        }
    }

    async fn create(&self, now: SystemTime) -> Result<Value, RequestError> {
        let stamp = micro_time(now);
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": LEASE_NAMESPACE},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self.lease_duration.as_secs(),
                "acquireTime": stamp,
                "renewTime": stamp,
                "leaseTransitions": 0,
            },
        });
        let collection = self.path.rsplit_once('/').expect("a path").0;
        self.api
            .request(Method::POST, collection, Some(&lease), None)
            .await
    }
}
