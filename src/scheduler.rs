//! The scheduler: binds each unassigned pod to a node, spreading a controller's pods
//! over the nodes. 2014's `plugin/pkg/scheduler` (`scheduler.go`'s `scheduleOne`,
//! `generic_scheduler.go`, `algorithm/predicates.go`, `algorithm/priorities.go`,
//! `spreading.go`), run as a controller of `kcm controller-manager`; the choice itself is
//! [`plan::Placement`] (pure).
//!
//! 2014's scheduler popped one pod at a time from a FIFO fed by a watch of unassigned
//! pods, listed the minions and the scheduled pods, and posted a `Binding` that the
//! apiserver turned into the pod's host. kcm reads the pods from the shared pod cache
//! (2014's `ScheduledPodLister` watched the bound ones), the nodes from etcd each round
//! (the registrations: a node whose kubelet is gone gets nothing; its Node's
//! `capacity.pods`), and binds by compare-and-swap of `spec.host` and `status.host` on
//! the pod's revision, as a kubelet claims: a pod bound meanwhile (by a kubelet that still
//! claims, or by another scheduler) is left as it is.
//!
//! Invariants:
//! - a pod is bound at most once: the write requires the pod unassigned at the revision
//!   read, and a bound pod is never moved;
//! - a pod the scheduler bound counts on its node from the moment the write succeeded
//!   (2014's "assumed" pods, later `AssumePod`), until the cache shows it bound or gone,
//!   so spreading never counts on a cache that lags its own writes;
//! - it binds nothing before the pod cache has listed.
//!
//! kcm's kubelets claim unassigned pods themselves unless told a scheduler binds them
//! (`kcm kubelet --no-claim`; `kcm up` runs the scheduler and tells its kubelets so). The
//! scheduler is off in `kcm controller-manager` unless `--controllers` names it
//! (docs/departures.md, "scheduling").

mod plan;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::StreamExt as _;
use serde_json::Value;

use crate::api::{self, Pod, NODES_DIR, REGISTRATIONS_DIR};
use crate::informer::{CachedPod, InformerFactory, PodInformer};
use crate::record::Reference;
use crate::registry::{Registry, StorageError};

pub use plan::{Group, Placement};

/// The controller's name (metrics, logs, `--controllers`).
pub const NAME: &str = "scheduler";
/// A Node's `capacity.pods` when its document says none (the kubelet's default).
pub const DEFAULT_CAPACITY: usize = 110;

/// How the scheduler runs.
#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    /// How often it looks again without a pod change (a node registered, room freed).
    /// Default 1 s (2014's scheduler retried a pod that fit nowhere after a backoff).
    pub period: Duration,
    /// Binds in flight at once. Default 64: each is a read and a compare-and-swap, and at
    /// 16 the binds were the slowest step of a 1,000-replica rollout (about 700 a second
    /// against the kubelets' 800 starts; `kcm bench rollout`).
    pub concurrent_binds: usize,
    /// Where its events go (`Scheduled`, ...). Default: nowhere; the controller
    /// manager gives it its recorder.
    pub events: crate::record::Recorder,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            period: Duration::from_secs(1),
            concurrent_binds: 64,
            events: crate::record::Recorder::discard(),
        }
    }
}

/// The scheduler's IO: the nodes each round, and the binds. [`Registry`] reads the
/// registrations and Node documents from etcd and binds by compare-and-swap of the pod;
/// `apiclient::ApiClient` lists Nodes and `POST`s a `Binding`, as kube-scheduler does.
pub trait Binder: Send + Sync + 'static {
    /// The nodes pods can go to, with their capacity and whether they are cordoned.
    fn nodes(&self) -> impl Future<Output = anyhow::Result<Placement>> + Send;

    /// Binds `pod` to `node` if it is still unassigned: a reference to the pod bound, or
    /// `None` when it was bound meanwhile or is gone.
    fn bind(
        &self,
        pod: &CachedPod,
        node: &str,
    ) -> impl Future<Output = anyhow::Result<Option<Reference>>> + Send;
}

/// The scheduler. Cheap to clone.
pub struct Scheduler<B: Binder = Registry> {
    inner: Arc<Inner<B>>,
}

impl<B: Binder> Clone for Scheduler<B> {
    fn clone(&self) -> Self {
        Scheduler {
            inner: self.inner.clone(),
        }
    }
}

struct Inner<B> {
    binder: B,
    config: SchedulerConfig,
    /// Pods it bound that the cache does not show bound yet: `namespace/name` → (node,
    /// group).
    assumed: Mutex<HashMap<String, (String, Group)>>,
    /// How many pods fit nowhere at the last round (logged when it changes).
    unschedulable: Mutex<usize>,
}

impl Scheduler {
    /// A scheduler on etcd.
    pub fn new(registry: Registry, config: SchedulerConfig) -> Self {
        Scheduler::with_binder(registry, config)
    }
}

impl<B: Binder> Scheduler<B> {
    /// A scheduler reading nodes and binding through `binder`.
    pub fn with_binder(binder: B, config: SchedulerConfig) -> Self {
        Scheduler {
            inner: Arc::new(Inner {
                binder,
                config,
                assumed: Mutex::default(),
                unschedulable: Mutex::default(),
            }),
        }
    }

    /// Sets the scheduler up on `informers` (pods) and returns it running until
    /// `shutdown`: a round after each batch of pod changes and every period.
    pub fn start(
        self,
        informers: &InformerFactory,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        let pods = informers.pods();
        let mut changes = pods.subscribe();
        Box::pin(async move {
            tokio::pin!(shutdown);
            tokio::select! {
                () = &mut shutdown => return Ok(()),
                () = pods.wait_synced() => {}
            }
            let inner = &self.inner;
            loop {
                if let Err(e) = inner.round(&pods).await {
                    tracing::warn!(controller = NAME, error = %e, "scheduling round failed; trying again");
                }
                tokio::select! {
                    () = &mut shutdown => return Ok(()),
                    change = changes.recv() => {
                        if change.is_none() {
                            return Ok(());
                        }
                        // One round for every change that has arrived.
                        while changes.try_recv().is_ok() {}
                    }
                    () = tokio::time::sleep(inner.config.period) => {}
                }
            }
        })
    }
}

/// The group a pod spreads with: its controller, or for a pod without one (a 2014 pod)
/// its labels.
pub fn group_of(pod: &CachedPod) -> Group {
    match &pod.controller {
        Some(controller) => format!("uid:{}", controller.uid),
        None => format!("labels:{}", pod.labels),
    }
}

impl<B: Binder> Inner<B> {
    /// One round: the nodes, the bound pods counted, every pending pod placed and bound.
    async fn round(&self, pods: &PodInformer) -> anyhow::Result<()> {
        let mut placement = self.binder.nodes().await?;
        let mut pending = Vec::new();
        {
            let mut assumed = self.assumed.lock().expect("assumed lock");
            let mut seen = HashMap::new();
            for key in pods.keys() {
                let Some(pod) = pods.get(&key.namespace, &key.name) else {
                    continue;
                };
                let key = pod.key();
                if pod.assigned() || !pod.is_active() || pod.deleting {
                    assumed.remove(&key);
                }
                if !pod.is_active() || pod.deleting {
                    continue;
                }
                match &pod.host {
                    Some(host) => placement.add(host, &group_of(&pod)),
                    None if assumed.contains_key(&key) => {
                        seen.insert(key, ());
                    }
                    None if pod.phase == api::PodPhase::Pending => pending.push(pod),
                    None => {}
                }
            }
            // Assumptions about pods the cache no longer has are dropped.
            assumed.retain(|key, _| seen.contains_key(key));
            for (node, group) in assumed.values() {
                placement.add(node, group);
            }
        }
        if pending.is_empty() || placement.is_empty() {
            self.report_unschedulable(if placement.is_empty() {
                pending.len()
            } else {
                0
            });
            return Ok(());
        }
        // Oldest first, as 2014's FIFO.
        pending.sort_by(|a, b| {
            (&a.creation_timestamp, &a.namespace, &a.name).cmp(&(
                &b.creation_timestamp,
                &b.namespace,
                &b.name,
            ))
        });
        let groups: Vec<Group> = pending.iter().map(|pod| group_of(pod)).collect();
        let nodes = placement.place_all(&groups);
        let unschedulable = nodes.iter().filter(|node| node.is_none()).count();
        let binds = pending
            .into_iter()
            .zip(groups)
            .zip(nodes)
            .filter_map(|((pod, group), node)| Some((pod, group, node?)));
        futures::stream::iter(binds)
            .map(|(pod, group, node)| self.bind(pod, group, node))
            .buffer_unordered(self.config.concurrent_binds.max(1))
            .collect::<Vec<()>>()
            .await;
        self.report_unschedulable(unschedulable);
        Ok(())
    }

    /// Binds `pod` to `node` unless it is bound (or gone) by now; assumes it there once
    /// the write succeeded.
    async fn bind(&self, pod: Arc<CachedPod>, group: Group, node: String) {
        let key = pod.key();
        match self.binder.bind(&pod, &node).await {
            Ok(Some(bound)) => {
                tracing::debug!(controller = NAME, pod = %key, node = %node, "bound");
                self.config.events.normal(
                    bound,
                    "Scheduled",
                    format!("Successfully assigned {key} to {node}"),
                );
                self.assumed
                    .lock()
                    .expect("assumed lock")
                    .insert(key, (node, group));
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(controller = NAME, pod = %key, node = %node, error = %e, "bind failed; trying again next round");
            }
        }
    }

    /// Logs the pods that fit nowhere when their number changes.
    fn report_unschedulable(&self, now: usize) {
        let mut last = self.unschedulable.lock().expect("unschedulable lock");
        if now != *last {
            if now > 0 {
                tracing::warn!(
                    controller = NAME,
                    pods = now,
                    "pods fit on no node (every registered node holds its capacity.pods, or none is registered); they stay Pending until one has room"
                );
            } else {
                tracing::info!(controller = NAME, "every pending pod has a node again");
            }
            *last = now;
        }
    }
}

/// On etcd: the registered nodes (a node whose kubelet is gone gets nothing), and a bind
/// by compare-and-swap of `spec.host` and `status.host` on the pod's revision.
impl Binder for Registry {
    /// The registered nodes, their capacity and whether they are cordoned, read from etcd.
    async fn nodes(&self) -> anyhow::Result<Placement> {
        let prefix = self.prefix();
        let mut kv = self.kv();
        let dir = format!("{prefix}/{REGISTRATIONS_DIR}/");
        let options = etcd_client::GetOptions::new()
            .with_prefix()
            .with_keys_only();
        let registered = kv.get(dir.as_str(), Some(options)).await?;
        let names: Vec<String> = registered
            .kvs()
            .iter()
            .filter_map(|kv| api::name_under(&dir, kv.key_str().ok()?).map(str::to_string))
            .collect();
        let docs = format!("{prefix}/{NODES_DIR}/");
        let nodes = kv
            .get(
                docs.as_str(),
                Some(etcd_client::GetOptions::new().with_prefix()),
            )
            .await?;
        let mut capacity: HashMap<String, usize> = HashMap::new();
        let mut unschedulable = Vec::new();
        for kv in nodes.kvs() {
            let Some(name) = kv
                .key_str()
                .ok()
                .and_then(|key| api::name_under(&docs, key))
            else {
                continue;
            };
            let node = serde_json::from_slice::<Value>(kv.value()).ok();
            let pods = node.as_ref().and_then(pods_capacity);
            capacity.insert(name.to_string(), pods.unwrap_or(DEFAULT_CAPACITY));
            if node
                .is_some_and(|node| node.pointer("/spec/unschedulable") == Some(&Value::Bool(true)))
            {
                unschedulable.push(name.to_string());
            }
        }
        let nodes = names.into_iter().map(|name| {
            let pods = capacity.get(&name).copied().unwrap_or(DEFAULT_CAPACITY);
            (name, pods)
        });
        Ok(Placement::new(nodes).with_unschedulable(unschedulable.iter().map(String::as_str)))
    }

    async fn bind(&self, pod: &CachedPod, node: &str) -> anyhow::Result<Option<Reference>> {
        let result = self
            .guaranteed_update::<Pod, _>(&pod.namespace, &pod.name, |mut current| {
                anyhow::ensure!(current.spec.host.is_empty(), "bound meanwhile");
                current.spec.host = node.to_string();
                current.status.get_or_insert_with(Default::default).host = node.to_string();
                Ok(current)
            })
            .await;
        match result {
            Ok(bound) => Ok(Some(Reference::of(&bound))),
            Err(StorageError::NotFound { .. } | StorageError::Update { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

/// A Node document's `status.capacity.pods` (a quantity string, as Kubernetes writes it,
/// or a number).
pub fn pods_capacity(node: &Value) -> Option<usize> {
    match node.pointer("/status/capacity/pods")? {
        Value::String(pods) => pods.parse().ok(),
        Value::Number(pods) => pods.as_u64().map(|pods| pods as usize),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn capacity_is_read_as_kubernetes_writes_it() {
        assert_eq!(
            pods_capacity(&json!({"status": {"capacity": {"pods": "600"}}})),
            Some(600)
        );
        assert_eq!(
            pods_capacity(&json!({"status": {"capacity": {"pods": 7}}})),
            Some(7)
        );
        assert_eq!(pods_capacity(&json!({"status": {}})), None);
        assert_eq!(
            pods_capacity(&json!({"status": {"capacity": {"pods": "lots"}}})),
            None
        );
    }
}
