//! The node lifecycle controller: a Node whose kubelet stopped holding its registration is
//! marked `Ready: Unknown` once the grace period has passed.
//!
//! Kubernetes' `pkg/controller/nodelifecycle` (`node_lifecycle_controller.go`:
//! `monitorNodeHealth`, `tryUpdateNodeHealth`); no 2014 original: 2014's minions were
//! records the minion controller wrote, with no status, and nothing watched whether a
//! kubelet lived. In Kubernetes the kubelet renews a Lease in `kube-node-lease` and the
//! controller marks the Node's conditions `Unknown` when neither the lease nor the status
//! moved for `--node-monitor-grace-period` (40 s). kcm's kubelets hold their registration
//! `{prefix}/minions/{name}` on an etcd lease (10 s), so the registration key is the
//! heartbeat: present while the kubelet lives, deleted by etcd when its lease lapses. The
//! kubelet posts its Node (`{prefix}/nodes/{name}`) `Ready: True` each time it gains its
//! registration (`kubelet::node_status`); this controller does the rest (docs/departures.md,
//! "node status").
//!
//! It reads both directories from the shared informers (`informer`: `nodes()` and
//! `registrations()` of the controller manager's factory), remembers since when each
//! registration has been absent, and runs on the common runner (`controller`), keyed by
//! node name.
//! The decision is a pure function ([`decide`]) of the Node document, whether the
//! registration is present or since when it is absent, and now.
//!
//! Its IO goes through one seam, [`NodeHealth`]: against etcd ([`Registry`]) the heartbeat
//! is the registration and a marking is a transaction that also finds it absent; through
//! the API (`apiclient::nodelifecycle`, `kcm controller-manager --kubeconfig`) the
//! heartbeat is the kubelet's node Lease in `kube-node-lease` (`kubelet::node_lease`) as
//! in Kubernetes: a Node is silent from the last renewal of its Lease (or the last
//! heartbeat of its Ready condition) that this controller saw, and is marked by a `PUT` of
//! its `/status` at the resourceVersion read. docs/invariants.md ("Through the API") says
//! what that changes.
//!
//! Invariants:
//! - it writes only the conditions of a Node (Ready, MemoryPressure, DiskPressure,
//!   PIDPressure to `Unknown`: Kubernetes' `nodeConditionTypes`), keeping every other
//!   field, by compare-and-swap on the revision its informer read, in a transaction that
//!   also requires the registration key absent (`Registry::with_conditions`): a kubelet that has
//!   registered again is never marked `Unknown` by a decision made before, and its own
//!   post sets `Ready: True`;
//! - it never creates or deletes a Node: a Node is listed until someone deletes it;
//! - a registration counts as absent from the moment this controller saw it absent (its
//!   delete event, or a list without it), on its own clock, as Kubernetes' probe
//!   timestamps: a restarted manager or a new leader waits the whole grace period again,
//!   never less;
//! - it acts only once both directories have been listed.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::StreamExt as _;
use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::api::{
    self, node_condition, node_condition_mut, node_condition_status, ResourceVersion,
    CONDITION_UNKNOWN, NODE_CONDITION_TYPES,
};
use crate::controller::{sync_handler, Action, Runner, RunnerConfig};
use crate::informer::{
    CachedNode, Delta, InformerFactory, NodeInformer, NodeLease, NodeLeaseInformer, Registration,
    RegistrationInformer,
};
use crate::registry::{KeyCondition, Registry, StorageError};
use crate::status::Metrics;

/// The controller's name (metrics, logs, `--controllers`).
pub const NAME: &str = "nodelifecycle";
/// Kubernetes' default `--node-monitor-grace-period`.
pub const DEFAULT_GRACE_PERIOD: Duration = Duration::from_secs(40);
/// Reason of a condition the controller turned `Unknown`.
pub const NODE_STATUS_UNKNOWN: &str = "NodeStatusUnknown";
/// Message of a condition the controller turned `Unknown`.
pub const NODE_STATUS_UNKNOWN_MESSAGE: &str = "Kubelet stopped posting node status.";
/// Reason of a condition the controller added as `Unknown` (the kubelet never posted it).
pub const NODE_STATUS_NEVER_UPDATED: &str = "NodeStatusNeverUpdated";
/// Message of a condition the controller added as `Unknown`.
pub const NODE_STATUS_NEVER_UPDATED_MESSAGE: &str = "Kubelet never posted node status.";

/// Settings of the node lifecycle controller.
#[derive(Clone, Debug)]
pub struct NodeLifecycleConfig {
    /// How long a registration may be absent before the Node is marked `Unknown`
    /// (`--node-monitor-grace-period`). Default 40 s.
    pub grace_period: Duration,
    /// Period of the pass over every Node (Kubernetes' `--node-monitor-period`), a safety
    /// net: each Node is also synced on every change and when its grace period ends.
    /// Default 5 s.
    pub monitor_period: Duration,
    /// Nodes synced in parallel. Default 2.
    pub concurrent_syncs: usize,
    /// How long shutdown waits for in-flight syncs. Default 8 s.
    pub shutdown_timeout: Duration,
    /// Where its events go (`NodeNotReady`). Default: nowhere; the controller manager
    /// gives it its recorder.
    pub events: crate::record::Recorder,
}

impl Default for NodeLifecycleConfig {
    fn default() -> Self {
        NodeLifecycleConfig {
            grace_period: DEFAULT_GRACE_PERIOD,
            monitor_period: Duration::from_secs(5),
            concurrent_syncs: 2,
            shutdown_timeout: Duration::from_secs(8),
            events: crate::record::Recorder::discard(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The pure core

/// Where a node's heartbeat stands, as this controller saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegistrationState {
    /// The registration key exists: its kubelet is alive (against etcd).
    Present,
    /// No sign of life since this moment: the key has been absent since then (against
    /// etcd), or its Lease was last seen renewed then (through the API).
    AbsentSince(Instant),
}

/// What to do about one Node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Nothing: its kubelet lives, or the Node already says `Unknown`.
    Nothing,
    /// Look again after this long, when the grace period ends.
    CheckAfter(Duration),
    /// Mark its conditions `Unknown` ([`mark_unknown`]).
    MarkUnknown,
}

/// `tryUpdateNodeHealth`'s decision for Node document `node` whose registration is
/// `registration`, at `now`, with grace period `grace`.
pub fn decide(
    node: &Value,
    registration: RegistrationState,
    now: Instant,
    grace: Duration,
) -> Decision {
    let RegistrationState::AbsentSince(since) = registration else {
        return Decision::Nothing;
    };
    let all_unknown = NODE_CONDITION_TYPES
        .iter()
        .all(|type_| node_condition_status(node, type_) == Some(CONDITION_UNKNOWN));
    if all_unknown {
        return Decision::Nothing;
    }
    let absent_for = now.saturating_duration_since(since);
    if absent_for >= grace {
        Decision::MarkUnknown
    } else {
        Decision::CheckAfter(grace - absent_for)
    }
}

/// `node` with its conditions marked as Kubernetes' controller marks a Node whose
/// kubelet stopped posting, at `now` (RFC 3339): each of [`NODE_CONDITION_TYPES`] not
/// already `Unknown` turns `Unknown` ([`NODE_STATUS_UNKNOWN`], its transition now, its
/// heartbeat kept); one the kubelet never posted is added `Unknown`
/// ([`NODE_STATUS_NEVER_UPDATED`], the heartbeat the Node's creation). Everything else is
/// kept. Pure.
pub fn mark_unknown(node: &Value, now: &str) -> Value {
    let mut fields = node.as_object().cloned().unwrap_or_default();
    let created = node
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .map(str::to_string);
    for type_ in NODE_CONDITION_TYPES {
        let posted = node_condition(node, type_).is_some();
        let condition = node_condition_mut(&mut fields, type_);
        if !posted {
            set(condition, "status", CONDITION_UNKNOWN);
            if let Some(created) = &created {
                set(condition, "lastHeartbeatTime", created);
            }
            set(condition, "lastTransitionTime", now);
            set(condition, "reason", NODE_STATUS_NEVER_UPDATED);
            set(condition, "message", NODE_STATUS_NEVER_UPDATED_MESSAGE);
        } else if condition.get("status").and_then(Value::as_str) != Some(CONDITION_UNKNOWN) {
            set(condition, "status", CONDITION_UNKNOWN);
            set(condition, "lastTransitionTime", now);
            set(condition, "reason", NODE_STATUS_UNKNOWN);
            set(condition, "message", NODE_STATUS_UNKNOWN_MESSAGE);
        }
    }
    Value::Object(fields)
}

fn set(condition: &mut Map<String, Value>, field: &str, value: &str) {
    condition.insert(field.to_string(), Value::from(value));
}

// ---------------------------------------------------------------------------------------
// What the controller saw

/// Since when each name without a registration has been seen without one, on this
/// controller's clock. The Nodes and registrations themselves are the shared informers'.
#[derive(Debug, Default)]
struct Absences {
    since: HashMap<String, Instant>,
}

impl Absences {
    /// A change of `name`'s registration, seen at `now`: `registered` after it, and
    /// whether it was before. Returns the name to sync.
    fn registration_changed(
        &mut self,
        name: &str,
        was_registered: bool,
        registered: bool,
        has_node: bool,
        now: Instant,
    ) -> Vec<String> {
        if registered {
            self.since.remove(name);
        } else {
            if was_registered && has_node {
                tracing::info!(
                    controller = NAME,
                    node = name,
                    "node registration gone (its kubelet stopped, or its lease lapsed); \
                     the Node turns Ready Unknown after the grace period unless it registers again"
                );
            }
            // A sync may have dated the absence already (the store applies a change
            // before its subscribers hear of it): keep the earlier moment.
            self.since.entry(name.to_string()).or_insert(now);
        }
        vec![name.to_string()]
    }

    /// A change of Node `name`: forgets the absence of a deleted Node that is not
    /// registered. Returns the name to sync.
    fn node_changed(&mut self, name: &str, exists: bool, registered: bool) -> Vec<String> {
        if !exists && !registered {
            self.since.remove(name);
        }
        vec![name.to_string()]
    }

    /// A renewal of node `name`'s Lease (or a new heartbeat of its Node) seen at `now`:
    /// it is silent from then on. Returns the name to sync.
    fn renewed(&mut self, name: &str, now: Instant) -> Vec<String> {
        self.since.insert(name.to_string(), now);
        vec![name.to_string()]
    }

    /// The registration of node `name` at `now`, `registered` or not; a name never seen
    /// registered (or, through the API, never seen renewed) counts as absent from the first
    /// time it is asked about.
    fn registration(&mut self, name: &str, registered: bool, now: Instant) -> RegistrationState {
        if registered {
            return RegistrationState::Present;
        }
        RegistrationState::AbsentSince(*self.since.entry(name.to_string()).or_insert(now))
    }
}

/// The items received on `changes`, as a stream.
fn receive<T: Send + 'static>(
    changes: tokio::sync::mpsc::Receiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::unfold(changes, |mut changes| async move {
        changes.recv().await.map(|change| (change, changes))
    })
}

/// A change the controller hears of.
enum Change {
    Node(Delta<CachedNode>),
    Registration(Delta<Registration>),
    Lease(Delta<NodeLease>),
}

/// Whether `delta` is a renewal of its Lease: a new one, or a new `renewTime`.
fn lease_renewed(delta: &Delta<NodeLease>) -> bool {
    match (&delta.old, &delta.new) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(old), Some(new)) => old.renew_time != new.renew_time,
    }
}

/// Whether `delta` moved the heartbeat of the Node's Ready condition (its kubelet posted
/// it), which Kubernetes' controller counts as a sign of life beside the Lease.
fn heartbeat_moved(delta: &Delta<CachedNode>) -> bool {
    let heartbeat = |node: &Option<Arc<CachedNode>>| {
        node.as_ref().and_then(|node| {
            node_condition(&node.document, api::NODE_READY)
                .and_then(|ready| ready.get("lastHeartbeatTime"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
    };
    let new = heartbeat(&delta.new);
    new.is_some() && new != heartbeat(&delta.old)
}

// ---------------------------------------------------------------------------------------
// The seam

/// What tells the controller that a node's kubelet lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heartbeat {
    /// Its registration (`{prefix}/minions/{name}`, on an etcd lease): present while it
    /// lives.
    Registration,
    /// Its node Lease (`kube-node-lease/{name}`): renewed while it lives.
    Lease,
}

/// The controller's IO: which heartbeat it reads (from the shared informers) and the
/// write that marks a Node. [`Registry`] reads the registrations and writes by
/// compare-and-swap in a transaction that also finds the registration absent;
/// `apiclient::ApiClient` reads the node Leases and `PUT`s the Node's `/status` at the
/// resourceVersion read, as Kubernetes' controller does.
pub trait NodeHealth: Send + Sync + 'static {
    /// The heartbeat this backend serves.
    const HEARTBEAT: Heartbeat;

    /// Writes `marked` (Node `name` marked `Unknown`) over `node`, only while it is still
    /// at the revision read. `Ok(true)` when written; `Ok(false)` when the Node changed or
    /// went since (the watch brings the new version, which is synced again) or, where the
    /// backend can tell in the same write, its kubelet is back.
    fn mark_unknown(
        &self,
        name: &str,
        node: &CachedNode,
        marked: Value,
    ) -> impl Future<Output = anyhow::Result<bool>> + Send;
}

impl NodeHealth for Registry {
    const HEARTBEAT: Heartbeat = Heartbeat::Registration;

    async fn mark_unknown(
        &self,
        name: &str,
        node: &CachedNode,
        marked: Value,
    ) -> anyhow::Result<bool> {
        let prefix = self.prefix();
        let key = api::node_key(prefix, name);
        let value = serde_json::to_vec(&marked)?;
        let guarded = self.with_conditions(vec![KeyCondition::Absent(api::registration_key(
            prefix, name,
        ))]);
        match guarded
            .update_raw(&key, ResourceVersion(node.revision), value)
            .await
        {
            Ok(_) => Ok(true),
            // Registered again (its kubelet posts Ready), or changed since the store read
            // it.
            Err(e @ (StorageError::ConditionFailed { .. } | StorageError::Conflict { .. })) => {
                tracing::debug!(controller = NAME, node = name, error = %e, "not marked Unknown");
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The controller

/// The node lifecycle controller.
pub struct NodeLifecycleController<H: NodeHealth = Registry> {
    inner: Arc<Inner<H>>,
}

struct Inner<H> {
    io: H,
    config: NodeLifecycleConfig,
    metrics: Arc<Metrics>,
    absences: Mutex<Absences>,
}

/// The heartbeats' informer.
#[derive(Clone)]
enum Heartbeats {
    Registrations(RegistrationInformer),
    Leases(NodeLeaseInformer),
}

/// What the controller reads: the shared informers of Nodes and of the heartbeats.
#[derive(Clone)]
struct Caches {
    nodes: NodeInformer,
    heartbeats: Heartbeats,
}

impl Caches {
    fn synced(&self) -> bool {
        self.nodes.is_synced()
            && match &self.heartbeats {
                Heartbeats::Registrations(informer) => informer.is_synced(),
                Heartbeats::Leases(informer) => informer.is_synced(),
            }
    }

    async fn wait_synced(&self) {
        self.nodes.wait_synced().await;
        match &self.heartbeats {
            Heartbeats::Registrations(informer) => informer.wait_synced().await,
            Heartbeats::Leases(informer) => informer.wait_synced().await,
        }
    }

    /// Every Node's name; none before both directories are listed.
    fn node_names(&self) -> Vec<String> {
        if !self.synced() {
            return Vec::new();
        }
        self.nodes
            .keys()
            .iter()
            .map(|key| key.name.to_string())
            .collect()
    }

    /// Whether node `name`'s registration is present; a Lease is never "present", only
    /// renewed.
    fn registered(&self, name: &str) -> bool {
        match &self.heartbeats {
            Heartbeats::Registrations(informer) => informer.get("", name).is_some(),
            Heartbeats::Leases(_) => false,
        }
    }
}

impl NodeLifecycleController {
    /// A controller reading and writing etcd through `registry`.
    pub fn new(
        registry: Registry,
        config: NodeLifecycleConfig,
        metrics: Arc<Metrics>,
    ) -> NodeLifecycleController {
        NodeLifecycleController::with_io(registry, config, metrics)
    }
}

impl<H: NodeHealth> NodeLifecycleController<H> {
    /// A controller whose IO is `io` (etcd, or a Kubernetes API server).
    pub fn with_io(
        io: H,
        config: NodeLifecycleConfig,
        metrics: Arc<Metrics>,
    ) -> NodeLifecycleController<H> {
        NodeLifecycleController {
            inner: Arc::new(Inner {
                io,
                config,
                metrics,
                absences: Mutex::default(),
            }),
        }
    }

    /// Sets the controller up on `informers` (Nodes, and registrations or node Leases) and
    /// returns it running until `shutdown` resolves (then it unsubscribes and in-flight
    /// syncs drain, bounded). It syncs nothing before both informers have listed; then
    /// every Node, and each one again on every change of it or of its heartbeat.
    pub fn start(
        self,
        informers: &InformerFactory,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        let inner = self.inner;
        let nodes = informers.nodes();
        let heartbeats = match H::HEARTBEAT {
            Heartbeat::Registration => Heartbeats::Registrations(informers.registrations()),
            Heartbeat::Lease => Heartbeats::Leases(informers.node_leases()),
        };
        let caches = Caches { nodes, heartbeats };
        let heartbeat_changes = match &caches.heartbeats {
            Heartbeats::Registrations(informer) => receive(informer.subscribe())
                .map(Change::Registration)
                .boxed(),
            Heartbeats::Leases(informer) => {
                receive(informer.subscribe()).map(Change::Lease).boxed()
            }
        };
        let changes = futures::stream::select(
            receive(caches.nodes.subscribe()).map(Change::Node),
            heartbeat_changes,
        );
        // Every Node once both directories are listed, then the changes (the first
        // lists' included, which the subscriptions hold until then).
        let listed = {
            let caches = caches.clone();
            futures::stream::once(async move {
                caches.wait_synced().await;
                caches.node_names()
            })
        };
        let keys = listed.chain(changes.map({
            let (inner, caches) = (inner.clone(), caches.clone());
            move |change| {
                let mut absences = inner.absences.lock().expect("absences lock");
                match change {
                    Change::Node(delta) if H::HEARTBEAT == Heartbeat::Lease => {
                        if heartbeat_moved(&delta) {
                            absences.renewed(&delta.name, Instant::now())
                        } else {
                            absences.node_changed(&delta.name, delta.new.is_some(), false)
                        }
                    }
                    Change::Node(delta) => absences.node_changed(
                        &delta.name,
                        delta.new.is_some(),
                        caches.registered(&delta.name),
                    ),
                    Change::Lease(delta) if lease_renewed(&delta) => {
                        absences.renewed(&delta.name, Instant::now())
                    }
                    Change::Lease(delta) => vec![delta.name.to_string()],
                    Change::Registration(delta) => absences.registration_changed(
                        &delta.name,
                        delta.old.is_some(),
                        delta.new.is_some(),
                        caches.nodes.get("", &delta.name).is_some(),
                        Instant::now(),
                    ),
                }
            }
        }));
        let runner = Runner::new(
            NAME,
            RunnerConfig::new(
                inner.config.concurrent_syncs,
                inner.config.monitor_period,
                inner.config.shutdown_timeout,
            ),
            inner.metrics.clone(),
        )
        .source(keys)
        .resync({
            let caches = caches.clone();
            move || caches.node_names()
        });
        let handler = sync_handler(inner.clone(), move |inner, name: String| {
            let caches = caches.clone();
            async move { inner.sync_node(&caches, &name).await }
        });
        Box::pin(async move { runner.run(handler, shutdown).await })
    }
}

impl<H: NodeHealth> Inner<H> {
    /// Syncs Node `name`: decides from the store, marks it `Unknown` when its
    /// heartbeat has been gone for the grace period, or looks again when it will have.
    async fn sync_node(&self, caches: &Caches, name: &str) -> anyhow::Result<Action> {
        let now = Instant::now();
        let Some(node) = caches.nodes.get("", name) else {
            return Ok(Action::Done);
        };
        let registration = self.absences.lock().expect("absences lock").registration(
            name,
            caches.registered(name),
            now,
        );
        match decide(&node.document, registration, now, self.config.grace_period) {
            Decision::Nothing => Ok(Action::Done),
            Decision::CheckAfter(delay) => Ok(Action::RequeueAfter(delay)),
            Decision::MarkUnknown => {
                self.mark_unknown(name, &node).await?;
                Ok(Action::Done)
            }
        }
    }

    /// Writes `node` marked `Unknown`, only while it is still at the revision read (and,
    /// against etcd, its registration is still absent).
    async fn mark_unknown(&self, name: &str, node: &CachedNode) -> anyhow::Result<()> {
        let marked = mark_unknown(&node.document, &api::now_rfc3339());
        if !self.io.mark_unknown(name, node, marked).await? {
            return Ok(());
        }
        tracing::info!(
            controller = NAME,
            node = name,
            grace_period = ?self.config.grace_period,
            "Node marked Ready Unknown: Kubelet stopped posting node status (no heartbeat for the grace period)"
        );
        let uid = node
            .document
            .pointer("/metadata/uid")
            .and_then(Value::as_str);
        self.config.events.normal(
            crate::record::Reference::node(name, uid.unwrap_or("")),
            "NodeNotReady",
            format!("Node {name} status is now: NodeNotReady"),
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ready_node() -> Value {
        json!({
            "kind": "Node",
            "apiVersion": "v1",
            "metadata": {"name": "n1", "uid": "u1", "creationTimestamp": "2025-01-01T00:00:00Z"},
            "spec": {"podCIDR": "10.244.1.0/24"},
            "status": {
                "capacity": {"pods": "110"},
                "conditions": [
                    {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
                        "message": "m", "lastHeartbeatTime": "2025-01-01T00:00:00Z",
                        "lastTransitionTime": "2025-01-01T00:00:00Z"},
                    {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure",
                        "message": "d", "lastHeartbeatTime": "2025-01-01T00:00:00Z",
                        "lastTransitionTime": "2025-01-01T00:00:00Z"},
                    {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID",
                        "message": "p", "lastHeartbeatTime": "2025-01-01T00:00:00Z",
                        "lastTransitionTime": "2025-01-01T00:00:00Z"},
                    {"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": "2025-01-01T00:00:00Z",
                        "lastTransitionTime": "2025-01-01T00:00:00Z"},
                ],
            },
            "futureField": 1,
        })
    }

    #[test]
    fn a_node_is_marked_unknown_only_once_its_registration_is_gone_for_the_grace_period() {
        let grace = Duration::from_secs(40);
        let t0 = Instant::now();
        let node = ready_node();
        let at = |secs| t0 + Duration::from_secs(secs);
        use Decision::*;
        use RegistrationState::*;
        // Its kubelet lives: never, however old the heartbeat.
        assert_eq!(decide(&node, Present, at(3600), grace), Nothing);
        // Gone: wait out the grace period, then mark.
        assert_eq!(decide(&node, AbsentSince(t0), t0, grace), CheckAfter(grace));
        assert_eq!(
            decide(&node, AbsentSince(t0), at(30), grace),
            CheckAfter(Duration::from_secs(10))
        );
        assert_eq!(decide(&node, AbsentSince(t0), at(40), grace), MarkUnknown);
        assert_eq!(decide(&node, AbsentSince(t0), at(400), grace), MarkUnknown);
        // A clock that reads before the absence (never in practice) waits the whole period.
        assert_eq!(
            decide(&node, AbsentSince(at(10)), t0, grace),
            CheckAfter(grace)
        );
        // Marked already: nothing more to write.
        let marked = mark_unknown(&node, "2025-01-01T00:10:00Z");
        assert_eq!(decide(&marked, AbsentSince(t0), at(400), grace), Nothing);
        // A Node nobody ever posted status for is marked too (NodeStatusNeverUpdated).
        let bare = json!({"kind": "Node", "metadata": {"name": "n2"}});
        assert_eq!(decide(&bare, AbsentSince(t0), at(40), grace), MarkUnknown);
        // A zero grace period marks at once.
        assert_eq!(
            decide(&node, AbsentSince(t0), t0, Duration::ZERO),
            MarkUnknown
        );
    }

    #[test]
    fn marking_turns_the_kubelets_conditions_unknown_and_keeps_everything_else() {
        let node = ready_node();
        let marked = mark_unknown(&node, "2025-01-01T00:10:00Z");
        let conditions = marked["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 4);
        for condition in conditions {
            assert_eq!(condition["status"], "Unknown", "{condition}");
            assert_eq!(condition["reason"], "NodeStatusUnknown");
            assert_eq!(condition["message"], "Kubelet stopped posting node status.");
            assert_eq!(condition["lastTransitionTime"], "2025-01-01T00:10:00Z");
            // The last heartbeat the kubelet posted stays.
            assert_eq!(condition["lastHeartbeatTime"], "2025-01-01T00:00:00Z");
        }
        let ready = &conditions[3];
        assert_eq!(ready["type"], "Ready");
        // Everything but the conditions is as it was.
        let mut without = marked.clone();
        let mut original = node.clone();
        without["status"]["conditions"] = json!(null);
        original["status"]["conditions"] = json!(null);
        assert_eq!(without, original);
        // Marking again changes nothing.
        assert_eq!(mark_unknown(&marked, "2025-01-01T00:20:00Z"), marked);
    }

    #[test]
    fn conditions_never_posted_are_added_unknown() {
        let node = json!({"metadata": {"name": "n2", "creationTimestamp": "2025-01-01T00:00:00Z"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let marked = mark_unknown(&node, "2025-01-01T00:10:00Z");
        let conditions = marked["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions[0]["reason"], "NodeStatusUnknown");
        assert_eq!(
            conditions[1],
            json!({"type": "MemoryPressure", "status": "Unknown",
                "lastHeartbeatTime": "2025-01-01T00:00:00Z",
                "lastTransitionTime": "2025-01-01T00:10:00Z",
                "reason": "NodeStatusNeverUpdated", "message": "Kubelet never posted node status."})
        );
        assert_eq!(
            conditions
                .iter()
                .map(|c| c["type"].as_str().unwrap())
                .collect::<Vec<_>>(),
            ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"]
        );
    }

    #[test]
    fn absences_are_dated_when_seen_and_forgotten_on_registration() {
        let mut absences = Absences::default();
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        use RegistrationState::*;
        // Registered: present, whatever was seen before.
        assert_eq!(absences.registration("n1", true, t1), Present);
        // Never seen registered: absent from the first time asked, and that moment stays.
        assert_eq!(absences.registration("n2", false, t1), AbsentSince(t1));
        assert_eq!(
            absences.registration("n2", false, t1 + Duration::from_secs(5)),
            AbsentSince(t1)
        );
        // n1's registration lapses at t2, and comes back.
        let t2 = t0 + Duration::from_secs(2);
        assert_eq!(
            absences.registration_changed("n1", true, false, true, t2),
            ["n1"]
        );
        assert_eq!(
            absences.registration("n1", false, t2 + Duration::from_secs(9)),
            AbsentSince(t2)
        );
        assert_eq!(
            absences.registration_changed("n1", false, true, true, t2),
            ["n1"]
        );
        assert_eq!(absences.registration("n1", true, t2), Present);
        // A sync that saw the registration gone before its delta arrived dated the
        // absence then: the delta keeps that earlier moment.
        let t3 = t0 + Duration::from_secs(3);
        assert_eq!(absences.registration("n1", false, t3), AbsentSince(t3));
        absences.registration_changed("n1", true, false, true, t3 + Duration::from_secs(1));
        assert_eq!(
            absences.registration("n1", false, t3 + Duration::from_secs(9)),
            AbsentSince(t3)
        );
        // A deleted Node that is not registered is forgotten; a registered one is not
        // absent anyway.
        assert_eq!(absences.node_changed("n2", false, false), ["n2"]);
        let t4 = t0 + Duration::from_secs(4);
        assert_eq!(absences.registration("n2", false, t4), AbsentSince(t4));
        // A Node change keeps the absence of a Node that still exists.
        assert_eq!(absences.node_changed("n2", true, false), ["n2"]);
        assert_eq!(
            absences.registration("n2", false, t4 + Duration::from_secs(1)),
            AbsentSince(t4)
        );
    }

    fn delta<I>(old: Option<I>, new: Option<I>) -> Delta<I> {
        Delta {
            namespace: "".into(),
            name: "n1".into(),
            old: old.map(Arc::new),
            new: new.map(Arc::new),
        }
    }

    #[test]
    fn a_renewal_is_a_new_lease_or_a_new_renew_time_and_a_heartbeat_a_new_ready_heartbeat() {
        let lease = |renewed: &str| NodeLease {
            name: "n1".into(),
            renew_time: Some(renewed.into()),
            revision: 1,
        };
        let (t1, t2) = ("2026-11-29T10:00:00.000001Z", "2026-11-29T10:00:01.000001Z");
        assert!(lease_renewed(&delta(None, Some(lease(t1)))));
        assert!(lease_renewed(&delta(Some(lease(t1)), Some(lease(t2)))));
        // Another field changed (a label), or the Lease went: no sign of life.
        assert!(!lease_renewed(&delta(Some(lease(t1)), Some(lease(t1)))));
        assert!(!lease_renewed(&delta(Some(lease(t1)), None)));

        let node = |heartbeat: &str| CachedNode {
            name: "n1".into(),
            document: json!({"status": {"conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}]}}),
            revision: 1,
        };
        assert!(heartbeat_moved(&delta(None, Some(node(t1)))));
        assert!(heartbeat_moved(&delta(Some(node(t1)), Some(node(t2)))));
        assert!(!heartbeat_moved(&delta(Some(node(t1)), Some(node(t1)))));
        assert!(!heartbeat_moved(&delta(Some(node(t1)), None)));
        // The controller's own marking keeps the heartbeat: not a sign of life.
        let marked = CachedNode {
            name: "n1".into(),
            document: mark_unknown(&node(t1).document, "2026-11-29T10:05:00Z"),
            revision: 2,
        };
        assert!(!heartbeat_moved(&delta(Some(node(t1)), Some(marked))));
        let bare = CachedNode {
            name: "n1".into(),
            document: json!({"metadata": {"name": "n1"}}),
            revision: 1,
        };
        assert!(!heartbeat_moved(&delta(None, Some(bare))));
    }
}
