//! The node's pod actions: what the loop does when a pod's timer is due or an unassigned
//! pod waits, each a write through the registry guarded by the registration. A pod is
//! claimed (bound to this node by compare-and-swap), started (Running with an address),
//! stepped through its status (image pull failed, ready, restarted, failed) and, once a
//! graceful delete stopped its containers, deleted at the version seen; each write
//! records the kubelet's event.
//!
//! The state these read and update is the pure `node::NodeState`; the statuses they write
//! are `containers::Step`'s.

use std::net::Ipv4Addr;
use std::time::Duration;

use tokio::time::Instant;

use super::containers::{ready_delay, ImageClass, Step};
use super::node::{self, Action, NodeState, Room};
use super::{first_container, is_claimable, refused, Kubelet, RegistrationRefused, RETRY_DELAY};
use crate::api::{now_rfc3339, Pod, PodPhase};
use crate::record::Reference;
use crate::registry::{Registry, StorageError};

/// How many times a claim re-reads a pod after losing a compare-and-swap to a writer
/// that left it unassigned (say, a label change) before trying again later.
const MAX_CLAIM_ATTEMPTS: usize = 3;

/// How many claims a node sends at once.
const CLAIMS_IN_FLIGHT: usize = 32;

/// How many starts (the Running writes) a node sends at once.
const STARTS_IN_FLIGHT: usize = 32;

/// How a claim ended.
enum Claim {
    /// This node owns the pod now (the stored version).
    Won(Pod),
    /// Someone else changed it first; the current version, no longer claimable.
    Lost(Pod),
    /// Deleted meanwhile.
    Gone,
    /// Still unassigned after several conflicts; try later.
    Contended,
}

impl Kubelet {
    /// Does what is due: timers first (they only shrink the node's load or keep it),
    /// then claims while there is room, writing through `registry`. Stops at the first
    /// etcd failure and pauses writes for a moment; what was not done stays due.
    ///
    /// # Errors
    /// When etcd refused a write because the registration is gone.
    pub(super) async fn act(
        &self,
        registry: &Registry,
        state: &mut NodeState,
    ) -> Result<(), RegistrationRefused> {
        let now = Instant::now();
        if !state.may_write(now) {
            return Ok(());
        }
        // Starts go out together, up to STARTS_IN_FLIGHT, as claims do: one at a time, a
        // node turned its pods Running one round trip after another, and that was the
        // slowest step of a rollout (four nodes, about 500 pods a second between them).
        let mut starts = Vec::new();
        let mut failure = None;
        while let Some((key, action)) = state.next_due(now) {
            let result = match action {
                Action::Start => {
                    starts.push(key);
                    if starts.len() == STARTS_IN_FLIGHT {
                        failure = self.start_all(registry, state, &mut starts, now).await;
                        if failure.is_some() {
                            break;
                        }
                    }
                    continue;
                }
                Action::Stop => self.stop(registry, state, &key).await,
                Action::Fail | Action::PullFail | Action::Ready | Action::Restart => {
                    self.step(registry, state, &key, action).await
                }
            };
            if let Err(e) = result {
                tracing::debug!(pod = %key, ?action, error = %e, "write failed; retrying");
                state.schedule(&key, now + RETRY_DELAY, action);
                failure = Some(e);
                break;
            }
        }
        if failure.is_none() && !starts.is_empty() {
            failure = self.start_all(registry, state, &mut starts, now).await;
        }
        // Starts taken off their timers but not begun (an earlier write failed) stay due.
        for key in starts {
            state.schedule(&key, now, Action::Start);
        }
        if let Some(e) = failure {
            state.pause(now);
            return refused(&e);
        }
        // Claims go out together, up to CLAIMS_IN_FLIGHT: one at a time, a node's claims
        // (and the losing ones of its neighbours, which race for the same backlog) cost a
        // round trip each, and four nodes readied about 85 pods a second between them.
        loop {
            let batch = state.next_claims(CLAIMS_IN_FLIGHT);
            if batch.is_empty() {
                break;
            }
            let claims = batch.iter().map(|pod| self.claim(registry, pod.clone()));
            let results = futures::future::join_all(claims).await;
            let mut stop = None;
            for (pod, result) in batch.into_iter().zip(results) {
                let key = pod.metadata.key();
                match result {
                    Ok(Claim::Won(stored)) => {
                        tracing::info!(pod = %key, node = %self.config.node, "claimed pod");
                        state.observe(stored, now);
                    }
                    Ok(Claim::Lost(current)) => {
                        tracing::debug!(pod = %key, host = %current.spec.host, "pod taken by another writer");
                        state.observe(current, now);
                    }
                    Ok(Claim::Gone) => {}
                    Ok(Claim::Contended) => {
                        state.unassigned.insert(key, pod);
                        stop.get_or_insert(Ok(()));
                    }
                    Err(e) => {
                        tracing::debug!(pod = %key, error = %e, "claim failed; retrying");
                        state.unassigned.insert(key, pod);
                        if !matches!(stop, Some(Err(_))) {
                            stop = Some(refused(&e));
                        }
                    }
                }
            }
            if let Some(stop) = stop {
                state.pause(now);
                return stop;
            }
        }
        match state.room_change() {
            Some(Room::Full { max_pods, waiting }) => tracing::warn!(
                node = %self.config.node,
                max_pods,
                waiting,
                "node is full: it holds --max-pods active pods and unassigned pods wait for \
                 room (they stay Pending without a host); add nodes (kcm up --nodes N, \
                 another kcm kubelet) or raise --max-pods"
            ),
            Some(Room::Again) => {
                tracing::info!(node = %self.config.node, "node no longer full: no pod waits for room any more");
            }
            None => {}
        }
        Ok(())
    }

    /// Binds an unassigned pod to this node: `spec.host` and `status.host`, written only
    /// if the pod is still at the version read (so exactly one node wins).
    async fn claim(&self, registry: &Registry, mut pod: Pod) -> Result<Claim, StorageError> {
        for _ in 0..MAX_CLAIM_ATTEMPTS {
            let mut claimed = pod.clone();
            claimed.spec.host = self.config.node.clone();
            claimed.status.get_or_insert_with(Default::default).host = self.config.node.clone();
            match registry.update(&claimed).await {
                Ok(stored) => return Ok(Claim::Won(stored)),
                Err(StorageError::Conflict { .. }) => {}
                Err(e) => return Err(e),
            }
            // Another node (or writer) got there first: look again.
            let meta = &pod.metadata;
            match registry.get::<Pod>(&meta.namespace, &meta.name).await {
                Ok(current) if is_claimable(&current) => pod = current,
                Ok(current) => return Ok(Claim::Lost(current)),
                Err(StorageError::NotFound { .. }) => return Ok(Claim::Gone),
                Err(e) => return Err(e),
            }
        }
        Ok(Claim::Contended)
    }

    /// Starts the pods of `keys` (draining it), their Running writes all in flight at
    /// once; returns the first failure worth retrying, each failed pod due again after
    /// [`RETRY_DELAY`].
    async fn start_all(
        &self,
        registry: &Registry,
        state: &mut NodeState,
        keys: &mut Vec<String>,
        now: Instant,
    ) -> Option<StorageError> {
        // Addresses first, one pod after another from the one pool, so no two pods of the
        // node are written with the same address.
        let planned: Vec<(String, Ipv4Addr, bool)> = keys
            .drain(..)
            .filter_map(|key| {
                let (ip, fresh) = self.address_for(state, &key)?;
                Some((key, ip, fresh))
            })
            .collect();
        let writes = planned
            .iter()
            .map(|(key, ip, _)| self.write_running(registry, key, *ip));
        let results = futures::future::join_all(writes).await;
        let mut failure = None;
        for ((key, ip, fresh), (result, delay)) in planned.into_iter().zip(results) {
            if let Err(e) = self.started(state, &key, ip, fresh, delay, result) {
                tracing::debug!(pod = %key, action = ?Action::Start, error = %e, "write failed; retrying");
                state.schedule(&key, now + RETRY_DELAY, Action::Start);
                failure.get_or_insert(e);
            }
        }
        failure
    }

    /// The address an owned pod starts with: the one it holds, or a fresh one from the
    /// node's range (`true`). `None` when the pod is no longer the node's, or when the
    /// range is exhausted (it is due again after `--start-delay`).
    fn address_for(&self, state: &mut NodeState, key: &str) -> Option<(Ipv4Addr, bool)> {
        let owned = state.owned.get(key)?;
        if let Some(ip) = owned.ip {
            return Some((ip, false));
        }
        match state.allocator.allocate() {
            Some(ip) => Some((ip, true)),
            None => {
                tracing::warn!(pod = %key, pod_cidr = %state.allocator.cidr(), "no free pod address; the pod stays Pending until one is freed");
                let now = Instant::now();
                state.schedule(key, now + self.config.start_delay, Action::Start);
                None
            }
        }
    }

    /// Writes an owned pod Running at `ip`; with the stored pod, the ready delay it was
    /// given.
    async fn write_running(
        &self,
        registry: &Registry,
        key: &str,
        ip: Ipv4Addr,
    ) -> (Result<Pod, StorageError>, Duration) {
        let node = &self.config.node;
        let rules = &self.config.images;
        let mut delay = Duration::ZERO;
        let (namespace, name) = split_key(key);
        let result = registry
            .guaranteed_update::<Pod, _>(namespace, name, |mut pod| {
                ensure_owned(&pod, node)?;
                anyhow::ensure!(
                    matches!(pod.phase(), PodPhase::Pending | PodPhase::Running),
                    "phase is {}",
                    pod.phase()
                );
                let status = pod.status.get_or_insert_with(Default::default);
                status.host = node.clone();
                status.pod_ip = ip.to_string();
                if pod.phase() != PodPhase::Running || pod.ready_condition().is_some() {
                    delay = ready_delay(&pod, self.config.ready_delay);
                    let step = Step {
                        rules,
                        now: &now_rfc3339(),
                    };
                    step.started(&mut pod, delay.is_zero());
                }
                pod.status.get_or_insert_with(Default::default).phase = PodPhase::Running;
                Ok(pod)
            })
            .await;
        (result, delay)
    }

    /// Takes in what a pod's Running write found: on success its address is its own and
    /// its ready timer set; otherwise a fresh address goes back to the pool. Returns an
    /// error only for a failure worth retrying.
    fn started(
        &self,
        state: &mut NodeState,
        key: &str,
        ip: Ipv4Addr,
        fresh: bool,
        delay: Duration,
        result: Result<Pod, StorageError>,
    ) -> Result<(), StorageError> {
        let now = Instant::now();
        match result {
            Ok(stored) => {
                tracing::info!(pod = %key, %ip, "pod running");
                if fresh {
                    let container = first_container(&stored);
                    self.config.events.normal(
                        Reference::of(&stored),
                        "Started",
                        format!("Started container {container}"),
                    );
                }
                if let Some(owned) = state.owned.get_mut(key) {
                    owned.ip = Some(ip);
                }
                let waits = stored.ready_condition() == Some(false)
                    && self.config.images.pod_class(&stored) == ImageClass::Normal;
                state.observe(stored, now);
                if waits {
                    state.schedule(key, now + delay, Action::Ready);
                }
                Ok(())
            }
            Err(e) => {
                if fresh {
                    state.allocator.release(ip);
                }
                match e {
                    StorageError::NotFound { .. } => {
                        state.forget(key);
                        Ok(())
                    }
                    // Changed under us in a way that makes starting wrong; the watch
                    // brings the new version.
                    StorageError::Update { source, .. } => {
                        tracing::debug!(pod = %key, reason = %source, "not starting pod");
                        Ok(())
                    }
                    e => Err(e),
                }
            }
        }
    }

    /// The status steps after Running: a pod whose image fails to pull, that waited out
    /// its ready delay, whose container crashed again, or that fails (the simulated
    /// failure of `--fail-rate`: Failed, giving its address back, since `status.podIP`
    /// may go to another pod).
    async fn step(
        &self,
        registry: &Registry,
        state: &mut NodeState,
        key: &str,
        action: Action,
    ) -> Result<(), StorageError> {
        let node = &self.config.node;
        let rules = &self.config.images;
        let (namespace, name) = split_key(key);
        let result = registry
            .guaranteed_update::<Pod, _>(namespace, name, |mut pod| {
                ensure_owned(&pod, node)?;
                let step = Step {
                    rules,
                    now: &now_rfc3339(),
                };
                let expected = match action {
                    Action::PullFail => PodPhase::Pending,
                    _ => PodPhase::Running,
                };
                anyhow::ensure!(pod.phase() == expected, "phase is {}", pod.phase());
                match action {
                    Action::PullFail => step.pull_failed(&mut pod),
                    Action::Ready => step.became_ready(&mut pod),
                    Action::Restart => step.restarted(&mut pod),
                    // A delete, not a status step (`stop`).
                    Action::Stop => anyhow::bail!("a terminating pod gets no status step"),
                    Action::Fail | Action::Start => {
                        if pod.ready_condition().is_some() {
                            step.failed(&mut pod);
                        }
                        let status = pod.status.get_or_insert_with(Default::default);
                        status.phase = PodPhase::Failed;
                        status.pod_ip.clear();
                    }
                }
                Ok(pod)
            })
            .await;
        let what = match action {
            Action::PullFail => "image pull failed (simulated)",
            Action::Ready => "pod ready",
            Action::Restart => "container restarted (simulated crash loop)",
            Action::Fail | Action::Start => "pod failed (simulated)",
            Action::Stop => "pod stopped",
        };
        if let Ok(stored) = &result {
            self.record_step(stored, action);
        }
        self.settle(state, key, what, result)
    }

    /// Deletes a terminating pod whose containers have stopped: a compare-and-swap
    /// delete at the version seen, so a pod changed meanwhile (its newer version is on
    /// the watch, and sets the timer again) is never deleted by a stale decision.
    async fn stop(
        &self,
        registry: &Registry,
        state: &mut NodeState,
        key: &str,
    ) -> Result<(), StorageError> {
        let (namespace, name) = split_key(key);
        let Some(revision) = state.owned_revision(key) else {
            return Ok(());
        };
        let at = Some(crate::api::ResourceVersion(revision));
        match registry.delete::<Pod>(namespace, name, at).await {
            Ok(_) | Err(StorageError::NotFound { .. }) => {
                tracing::info!(pod = %key, node = %self.config.node, "pod deleted: its containers stopped (simulated)");
                if let Some(pod) = state.owned_pod(key) {
                    let reference = Reference {
                        kind: "Pod".into(),
                        api_version: "v1".into(),
                        namespace: namespace.into(),
                        name: name.into(),
                        uid: pod.uid.to_string(),
                        resource_version: revision.to_string(),
                    };
                    let container = &pod.container;
                    self.config.events.normal(
                        reference,
                        "Killing",
                        format!("Stopping container {container}"),
                    );
                }
                state.forget(key);
                Ok(())
            }
            Err(StorageError::Conflict { .. }) => {
                tracing::debug!(pod = %key, "terminating pod changed; stopping it again");
                state.schedule(key, Instant::now() + node::STOP_TIME, Action::Stop);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Records the event of a status step, as the kubelet's: a failed pull, a crash loop's
    /// back-off, a failed pod.
    fn record_step(&self, pod: &Pod, action: Action) {
        let container = first_container(pod);
        let image = pod.spec.containers.first().map_or("", |c| c.image.as_str());
        let (reason, message) = match action {
            Action::PullFail => (
                "Failed",
                format!("Failed to pull image {image:?}: the image matches --pull-fail-images (simulated)"),
            ),
            Action::Restart => (
                "BackOff",
                format!(
                    "Back-off restarting failed container {container} in pod {}_{}",
                    pod.metadata.name, pod.metadata.namespace
                ),
            ),
            Action::Fail => (
                "Failed",
                format!("Container {container} failed (simulated, --fail-rate)"),
            ),
            Action::Ready | Action::Start | Action::Stop => return,
        };
        self.config
            .events
            .warning(Reference::of(pod), reason, message);
    }

    /// Takes in the result of a status write: the stored pod, or what the failure means.
    fn settle(
        &self,
        state: &mut NodeState,
        key: &str,
        what: &str,
        result: Result<Pod, StorageError>,
    ) -> Result<(), StorageError> {
        match result {
            Ok(stored) => {
                tracing::info!(pod = %key, "{what}");
                state.observe(stored, Instant::now());
                Ok(())
            }
            Err(StorageError::NotFound { .. }) => {
                state.forget(key);
                Ok(())
            }
            Err(StorageError::Update { source, .. }) => {
                tracing::debug!(pod = %key, reason = %source, "status not written: {what}");
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

fn ensure_owned(pod: &Pod, node: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        pod.spec.host == node,
        "assigned to {:?}, not to this node",
        pod.spec.host
    );
    Ok(())
}

fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').expect("pod keys are namespace/name")
}
