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
//! It watches both directories with the list-and-watch engine (`etcd_watcher`), keeps what
//! it saw in one store, and runs on the common runner (`controller`), keyed by node name.
//! The decision is a pure function ([`decide`]) of the Node document, whether the
//! registration is present or since when it is absent, and now.
//!
//! Invariants:
//! - it writes only the conditions of a Node (Ready, MemoryPressure, DiskPressure,
//!   PIDPressure to `Unknown`: Kubernetes' `nodeConditionTypes`), keeping every other
//!   field, by compare-and-swap on the revision its store read, in a transaction that also
//!   requires the registration key absent (`Registry::with_conditions`): a kubelet that has
//!   registered again is never marked `Unknown` by a decision made before, and its own
//!   post sets `Ready: True`;
//! - it never creates or deletes a Node: a Node is listed until someone deletes it;
//! - a registration counts as absent from the moment this controller saw it absent (its
//!   delete event, or a list without it), on its own clock, as Kubernetes' probe
//!   timestamps: a restarted manager or a new leader waits the whole grace period again,
//!   never less;
//! - it acts only once both directories have been listed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::StreamExt as _;
use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::api::{
    self, node_condition, node_condition_mut, node_condition_status, ResourceVersion,
    CONDITION_UNKNOWN, NODES_DIR, NODE_CONDITION_TYPES, REGISTRATIONS_DIR,
};
use crate::controller::{sync_handler, Action, Runner, RunnerConfig};
use crate::etcd_watcher::{
    BackoffConfig, EngineConfig, Range, RawEvent, RawItem, RawKind, Start, WatchMetrics, Watcher,
};
use crate::registry::{prefix_range_end, KeyCondition, Registry, StorageError};
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
    /// Backoff of the two watches.
    pub watch_backoff: BackoffConfig,
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
            watch_backoff: BackoffConfig::default(),
            events: crate::record::Recorder::discard(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The pure core

/// Where a node's registration stands, as this controller saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegistrationState {
    /// The registration key exists: its kubelet is alive.
    Present,
    /// The key has been absent since this moment.
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

/// The directory a watch item comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    Nodes,
    Registrations,
}

/// A Node document as stored, at its revision.
#[derive(Clone, Debug)]
struct StoredNode {
    document: Value,
    revision: i64,
}

/// The Nodes and registrations as the two watches delivered them.
#[derive(Debug, Default)]
struct Observed {
    nodes_dir: String,
    registrations_dir: String,
    nodes: BTreeMap<String, StoredNode>,
    registered: BTreeSet<String>,
    /// Since when each name not registered has been seen without a registration.
    absent_since: HashMap<String, Instant>,
    /// The pages of a list in progress.
    listing_nodes: BTreeMap<String, StoredNode>,
    listing_registrations: BTreeSet<String>,
    nodes_listed: bool,
    registrations_listed: bool,
}

impl Observed {
    fn new(prefix: &str) -> Observed {
        Observed {
            nodes_dir: format!("{prefix}/{NODES_DIR}/"),
            registrations_dir: format!("{prefix}/{REGISTRATIONS_DIR}/"),
            ..Observed::default()
        }
    }

    fn synced(&self) -> bool {
        self.nodes_listed && self.registrations_listed
    }

    fn node_names(&self) -> Vec<String> {
        if !self.synced() {
            return Vec::new();
        }
        self.nodes.keys().cloned().collect()
    }

    /// Takes in one item of `source`'s watch seen at `now`; returns the node names to sync:
    /// none before both directories are listed, every Node once they are.
    fn apply(&mut self, source: Source, item: RawItem, now: Instant) -> Vec<String> {
        let was_synced = self.synced();
        let changed = match source {
            Source::Nodes => self.apply_nodes(item),
            Source::Registrations => self.apply_registrations(item, now),
        };
        match (was_synced, self.synced()) {
            (_, false) => Vec::new(),
            (false, true) => self.node_names(),
            (true, true) => changed,
        }
    }

    fn apply_nodes(&mut self, item: RawItem) -> Vec<String> {
        match item {
            RawItem::Page { kvs } => {
                for kv in &kvs {
                    if let Some(name) = api::name_under(&self.nodes_dir, &kv.key) {
                        if let Some(node) = decode_node(kv) {
                            self.listing_nodes.insert(name.to_string(), node);
                        }
                    }
                }
                Vec::new()
            }
            RawItem::ListFailed => {
                self.listing_nodes.clear();
                Vec::new()
            }
            RawItem::Listed { .. } => {
                let listed = std::mem::take(&mut self.listing_nodes);
                let old = std::mem::replace(&mut self.nodes, listed);
                self.nodes_listed = true;
                let names: BTreeSet<String> =
                    old.into_keys().chain(self.nodes.keys().cloned()).collect();
                names.into_iter().collect()
            }
            RawItem::Events(events) => {
                let mut changed = Vec::new();
                for event in &events {
                    let Some(name) = api::name_under(&self.nodes_dir, &event.key) else {
                        continue;
                    };
                    let node = match event.kind {
                        RawKind::Put => decode_node(event),
                        RawKind::Delete => None,
                    };
                    match node {
                        Some(node) => {
                            self.nodes.insert(name.to_string(), node);
                        }
                        None => {
                            self.nodes.remove(name);
                            if !self.registered.contains(name) {
                                self.absent_since.remove(name);
                            }
                        }
                    }
                    changed.push(name.to_string());
                }
                changed
            }
            other => {
                log_item("nodes", &other);
                Vec::new()
            }
        }
    }

    fn apply_registrations(&mut self, item: RawItem, now: Instant) -> Vec<String> {
        match item {
            RawItem::Page { kvs } => {
                for kv in &kvs {
                    if let Some(name) = api::name_under(&self.registrations_dir, &kv.key) {
                        self.listing_registrations.insert(name.to_string());
                    }
                }
                Vec::new()
            }
            RawItem::ListFailed => {
                self.listing_registrations.clear();
                Vec::new()
            }
            RawItem::Listed { .. } => {
                let listed = std::mem::take(&mut self.listing_registrations);
                for gone in self.registered.difference(&listed) {
                    self.absent_since.insert(gone.clone(), now);
                }
                for name in &listed {
                    self.absent_since.remove(name);
                }
                self.registered = listed;
                self.registrations_listed = true;
                self.nodes.keys().cloned().collect()
            }
            RawItem::Events(events) => {
                let mut changed = Vec::new();
                for event in &events {
                    let Some(name) = api::name_under(&self.registrations_dir, &event.key) else {
                        continue;
                    };
                    match event.kind {
                        RawKind::Put => {
                            self.registered.insert(name.to_string());
                            self.absent_since.remove(name);
                        }
                        RawKind::Delete => {
                            if self.registered.remove(name) && self.nodes.contains_key(name) {
                                tracing::info!(
                                    controller = NAME,
                                    node = name,
                                    "node registration gone (its kubelet stopped, or its lease lapsed); \
                                     the Node turns Ready Unknown after the grace period unless it registers again"
                                );
                            }
                            self.absent_since.insert(name.to_string(), now);
                        }
                    }
                    changed.push(name.to_string());
                }
                changed
            }
            other => {
                log_item("minions", &other);
                Vec::new()
            }
        }
    }

    /// The registration of node `name` at `now`; a name never seen registered counts as
    /// absent from the first time it is asked about.
    fn registration(&mut self, name: &str, now: Instant) -> RegistrationState {
        if self.registered.contains(name) {
            return RegistrationState::Present;
        }
        RegistrationState::AbsentSince(*self.absent_since.entry(name.to_string()).or_insert(now))
    }
}

/// A Node document read from etcd; `None` (warned about) for a value that is not a JSON
/// object: such a key is left alone.
fn decode_node(kv: &RawEvent) -> Option<StoredNode> {
    match serde_json::from_slice::<Value>(&kv.value) {
        Ok(document @ Value::Object(_)) => Some(StoredNode {
            document,
            revision: kv.mod_revision,
        }),
        _ => {
            tracing::warn!(controller = NAME, key = %kv.key, revision = kv.mod_revision,
                "the value is not a Node document (a JSON object); left alone");
            None
        }
    }
}

fn log_item(resource: &str, item: &RawItem) {
    match item {
        RawItem::Resumed { from, reason } => {
            tracing::info!(controller = NAME, resource, from, %reason, "watch resumed from its last resourceVersion");
        }
        RawItem::Ended(status) => {
            tracing::error!(controller = NAME, resource, %status, "watch ended");
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------
// The controller

/// The node lifecycle controller.
pub struct NodeLifecycleController {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    config: NodeLifecycleConfig,
    metrics: Arc<Metrics>,
    observed: Mutex<Observed>,
}

impl NodeLifecycleController {
    /// A controller reading and writing etcd through `registry`.
    pub fn new(
        registry: Registry,
        config: NodeLifecycleConfig,
        metrics: Arc<Metrics>,
    ) -> NodeLifecycleController {
        let observed = Mutex::new(Observed::new(registry.prefix()));
        NodeLifecycleController {
            inner: Arc::new(Inner {
                registry,
                config,
                metrics,
                observed,
            }),
        }
    }

    /// Watches the Nodes and registrations through `watcher` and returns the controller
    /// running until `shutdown` resolves (then its watches are dropped and in-flight syncs
    /// drain, bounded).
    pub fn start(
        self,
        watcher: &Watcher,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        let inner = self.inner;
        let prefix = inner.registry.prefix().to_string();
        let watch_metrics = [
            inner.metrics.watch_metrics("nodes"),
            inner.metrics.watch_metrics("minions"),
        ];
        let watch = |dir: &str, metrics: &Arc<WatchMetrics>| {
            let start = format!("{prefix}/{dir}/");
            let config = EngineConfig {
                range: Range {
                    end: prefix_range_end(start.as_bytes()),
                    watched_key: Some(start.clone()),
                    start,
                },
                start: Start::List,
                resume: true,
                prev_kv: false,
                backoff: inner.config.watch_backoff.clone(),
                metrics: metrics.clone(),
            };
            watcher.engine(config).into_stream()
        };
        let nodes = watch(NODES_DIR, &watch_metrics[0]).map(|item| (Source::Nodes, item));
        let registrations =
            watch(REGISTRATIONS_DIR, &watch_metrics[1]).map(|item| (Source::Registrations, item));
        let keys = futures::stream::select(nodes, registrations).map({
            let inner = inner.clone();
            move |(source, item)| {
                let mut observed = inner.observed.lock().expect("observed lock");
                observed.apply(source, item, Instant::now())
            }
        });
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
            let inner = inner.clone();
            move || inner.observed.lock().expect("observed lock").node_names()
        });
        let handler = sync_handler(inner.clone(), |inner, name: String| async move {
            inner.sync_node(&name).await
        });
        Box::pin(async move {
            let result = runner.run(handler, shutdown).await;
            for metrics in &watch_metrics {
                metrics.set_stopped();
            }
            result
        })
    }
}

impl Inner {
    /// Syncs Node `name`: decides from the store, marks it `Unknown` when its
    /// registration has been gone for the grace period, or looks again when it will have.
    async fn sync_node(&self, name: &str) -> anyhow::Result<Action> {
        let now = Instant::now();
        let (node, registration) = {
            let mut observed = self.observed.lock().expect("observed lock");
            let Some(node) = observed.nodes.get(name).cloned() else {
                return Ok(Action::Done);
            };
            (node, observed.registration(name, now))
        };
        match decide(&node.document, registration, now, self.config.grace_period) {
            Decision::Nothing => Ok(Action::Done),
            Decision::CheckAfter(delay) => Ok(Action::RequeueAfter(delay)),
            Decision::MarkUnknown => {
                self.mark_unknown(name, &node).await?;
                Ok(Action::Done)
            }
        }
    }

    /// Writes `node` marked `Unknown`, only while it is still at the revision read and its
    /// registration is still absent.
    async fn mark_unknown(&self, name: &str, node: &StoredNode) -> anyhow::Result<()> {
        let prefix = self.registry.prefix();
        let key = api::node_key(prefix, name);
        let updated = mark_unknown(&node.document, &api::now_rfc3339());
        let value = serde_json::to_vec(&updated)?;
        let guarded =
            self.registry
                .with_conditions(vec![KeyCondition::Absent(api::registration_key(
                    prefix, name,
                ))]);
        match guarded
            .update_raw(&key, ResourceVersion(node.revision), value)
            .await
        {
            Ok(_) => {
                tracing::info!(
                    controller = NAME,
                    node = name,
                    grace_period = ?self.config.grace_period,
                    "Node marked Ready Unknown: Kubelet stopped posting node status (no registration for the grace period)"
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
            // Registered again (its kubelet posts Ready), or changed since the store read
            // it (the watch brings the new version, which is synced again).
            Err(e @ (StorageError::ConditionFailed { .. } | StorageError::Conflict { .. })) => {
                tracing::debug!(controller = NAME, node = name, error = %e, "not marked Unknown");
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
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

    fn put(key: &str, value: &str, revision: i64) -> RawEvent {
        RawEvent {
            kind: RawKind::Put,
            key: key.into(),
            value: value.as_bytes().to_vec(),
            create_revision: revision,
            mod_revision: revision,
            version: 1,
            prev: None,
        }
    }

    fn delete(key: &str, revision: i64) -> RawEvent {
        RawEvent {
            kind: RawKind::Delete,
            value: Vec::new(),
            ..put(key, "", revision)
        }
    }

    #[test]
    fn the_store_acts_after_both_lists_and_dates_absences_when_it_sees_them() {
        let mut observed = Observed::new("/registry");
        let t0 = Instant::now();
        let node = ready_node().to_string();
        let page = |kvs| RawItem::Page { kvs };
        let listed = RawItem::Listed {
            reason: crate::etcd_watcher::ListReason::Initial,
            revision: 5,
        };
        use Source::*;
        // Nodes n1, n2 and a value that is no Node; registration n1 only.
        assert!(observed
            .apply(
                Nodes,
                page(vec![
                    put("/registry/nodes/n1", &node, 2),
                    put("/registry/nodes/n2", &node, 3),
                    put("/registry/nodes/junk", "[1]", 4),
                    put("/registry/nodes/a/deeper", &node, 4),
                ]),
                t0
            )
            .is_empty());
        assert!(
            observed.apply(Nodes, listed, t0).is_empty(),
            "not synced yet"
        );
        assert!(observed
            .apply(
                Registrations,
                page(vec![put("/registry/minions/n1", "1@h", 1)]),
                t0
            )
            .is_empty());
        let listed = RawItem::Listed {
            reason: crate::etcd_watcher::ListReason::Initial,
            revision: 5,
        };
        assert_eq!(observed.apply(Registrations, listed, t0), ["n1", "n2"]);
        assert_eq!(observed.nodes["n1"].revision, 2);
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(observed.registration("n1", t1), RegistrationState::Present);
        // Never seen registered: absent from the first time asked, and that moment stays.
        assert_eq!(
            observed.registration("n2", t1),
            RegistrationState::AbsentSince(t1)
        );
        assert_eq!(
            observed.registration("n2", t1 + Duration::from_secs(5)),
            RegistrationState::AbsentSince(t1)
        );
        // n1's registration lapses at t2, and comes back.
        let t2 = t0 + Duration::from_secs(2);
        let gone = RawItem::Events(vec![delete("/registry/minions/n1", 6)]);
        assert_eq!(observed.apply(Registrations, gone, t2), ["n1"]);
        assert_eq!(
            observed.registration("n1", t2 + Duration::from_secs(9)),
            RegistrationState::AbsentSince(t2)
        );
        let back = RawItem::Events(vec![put("/registry/minions/n1", "2@h", 7)]);
        assert_eq!(observed.apply(Registrations, back, t2), ["n1"]);
        assert_eq!(observed.registration("n1", t2), RegistrationState::Present);
        // Node events update the store; a delete forgets it.
        let events = RawItem::Events(vec![
            put("/registry/nodes/n1", &node, 8),
            delete("/registry/nodes/n2", 9),
        ]);
        assert_eq!(observed.apply(Nodes, events, t2), ["n1", "n2"]);
        assert_eq!(observed.nodes["n1"].revision, 8);
        assert!(!observed.nodes.contains_key("n2"));
        assert_eq!(observed.node_names(), ["n1"]);
    }
}
