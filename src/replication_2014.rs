//! The late-2014 replication manager, as it was: a teaching instrument, not a mode of
//! kcm's loop. Read it beside `pkg/controller/replication_controller.go` (late 2014,
//! described in docs/2014.md); every function here has the Go one's name and shape,
//! weaknesses included (numbered as in docs/2014.md):
//!
//! - [`ReplicationManager::run`] is `Run(period)`: a ticker and a resourceVersion kept
//!   between reconnects, and `util.Forever(watchControllers, period)` ([`handle_crash`]),
//!   which recovers a panic and calls again after `period`;
//! - [`ReplicationManager::watch_controllers`] is `watchControllers`: one `select` over the
//!   ticker and the watch, so the periodic sync only runs while a watch is open (weakness 13), and
//!   watch events wait while a full resync runs (weakness 7). An ERROR event is logged as an
//!   "unexpected object" and skipped *without touching the stored resourceVersion*, so
//!   once that version is compacted every re-watch fails the same way and only the tick
//!   heals (weakness 1, kubernetes/kubernetes#3829). A DELETED event syncs the controller at its
//!   last state, so deleting a controller short of pods creates pods nobody owns (weakness 10);
//! - [`ReplicationManager::synchronize`] lists every controller and syncs each in
//!   parallel; [`ReplicationManager::sync_replication_controller`] lists the controller's
//!   pods afresh (weakness 2), keeps the active ones ([`filter_active_pods`]) and starts one task
//!   per missing or surplus pod with no cap (weakness 3), deleting the *first* surplus pods in list
//!   order (weakness 6) and writing no status; the loop never writes a controller;
//! - [`RealPodControl::create_replica`] names each pod with a random UUID (weakness 12; 2014's pod
//!   storage set `Name = UID`, before `GenerateName`, PR #3789).
//!
//! Where etcd v3 forces a difference (the `replication-2014` rows of docs/departures.md): list order is etcd v3's key order (2014's unsorted
//! etcd v2 GET was effectively arbitrary; UUID names make key order arbitrary too); a
//! resumed watch whose version was compacted fails with 410 "Expired" (kcm's
//! [`WatchStream`](crate::etcd_watcher::WatchStream)) where etcd v2 gave 401 "index
//! cleared"; both reach this loop as one ERROR event and a closed stream, as in 2014. The
//! watch events are typed, so 2014's "not an `*api.ReplicationController`" case is exactly
//! the ERROR event here.
//! Every other divergence from the Go that changes behaviour (the 5 s pause, undecodable values, panics in tasks, the template's host, `fillCurrentState`, ...) is a row of docs/departures.md, "`replication_2014`: where the 2014 line-for-line port differs from the Go".
//!
//! Nothing in kcm's production path depends on this module; `kcm controller-manager
//! --controllers replication-2014,-replication` runs it, and `kcm lab` runs it beside
//! kcm's loop.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use tokio::task::JoinSet;
use tokio::time::{Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::api::{ObjectMeta, Pod, PodPhase, PodStatus, ReplicationController};
use crate::etcd_watcher::{everything, WatchEvent, Watcher};
use crate::labels::Selector;
use crate::registry::Registry;

/// How long `watchControllers` sleeps after failing to open a watch (2014: 5 s).
pub const WATCH_FAILURE_PAUSE: Duration = Duration::from_secs(5);

/// The reads of 2014's `kubeClient` this loop makes. [`EtcdClient`] is the real one.
pub trait KubeClient: Send + Sync + 'static {
    /// `ReplicationControllers(api.NamespaceAll).List(labels.Everything())`.
    fn list_controllers(&self) -> BoxFuture<'static, anyhow::Result<Vec<ReplicationController>>>;
    /// `Pods(namespace).List(selector)`, in the store's order.
    fn list_pods(
        &self,
        namespace: &str,
        selector: &Selector,
    ) -> BoxFuture<'static, anyhow::Result<Vec<Pod>>>;
    /// `ReplicationControllers(api.NamespaceAll).Watch(.., resourceVersion)`: a one-shot
    /// stream that ends after an ERROR event.
    ///
    /// # Errors
    /// When the watch cannot be opened: a non-numeric resourceVersion, or no server
    /// answering (2014's apiserver down; here etcd unreachable on the watch's connection).
    fn watch_controllers(
        &self,
        resource_version: &str,
    ) -> BoxFuture<'static, anyhow::Result<BoxStream<'static, WatchEvent<ReplicationController>>>>;
}

/// 2014's `PodControlInterface` ("to allow testing"). [`RealPodControl`] is the real one.
pub trait PodControl: Send + Sync + 'static {
    /// `createReplica(namespace, controller)`: errors are only logged.
    fn create_replica(
        &self,
        namespace: &str,
        controller: &ReplicationController,
    ) -> BoxFuture<'static, ()>;
    /// `deletePod(namespace, name)`.
    fn delete_pod(&self, namespace: &str, name: &str) -> BoxFuture<'static, anyhow::Result<()>>;
}

/// The apiserver of 2014, as this loop reads it: kcm's registry and its one-shot watch.
#[derive(Clone)]
pub struct EtcdClient {
    pub registry: Registry,
    pub watcher: Watcher,
}

impl KubeClient for EtcdClient {
    fn list_controllers(&self) -> BoxFuture<'static, anyhow::Result<Vec<ReplicationController>>> {
        let registry = self.registry.clone();
        Box::pin(async move {
            let list = registry
                .list::<ReplicationController>(None, &Selector::everything())
                .await?;
            whole_list(list)
        })
    }

    fn list_pods(
        &self,
        namespace: &str,
        selector: &Selector,
    ) -> BoxFuture<'static, anyhow::Result<Vec<Pod>>> {
        let (registry, namespace, selector) = (
            self.registry.clone(),
            namespace.to_string(),
            selector.clone(),
        );
        Box::pin(async move {
            let list = registry.list::<Pod>(Some(&namespace), &selector).await?;
            whole_list(list)
        })
    }

    fn watch_controllers(
        &self,
        resource_version: &str,
    ) -> BoxFuture<'static, anyhow::Result<BoxStream<'static, WatchEvent<ReplicationController>>>>
    {
        let (watcher, resource_version) = (self.watcher.clone(), resource_version.to_string());
        Box::pin(async move {
            // 2014's `Watch` was an HTTP request: with no apiserver answering it failed at
            // once, before any stream. etcd's answer to a watch request stands for it.
            watcher.reachable().await?;
            let stream = watcher.watch_list::<ReplicationController>(
                None,
                &resource_version,
                everything(),
            )?;
            Ok(stream.boxed())
        })
    }
}

/// 2014's `RealPodControl`: writes pods through the registry.
#[derive(Clone)]
pub struct RealPodControl {
    pub registry: Registry,
}

impl PodControl for RealPodControl {
    fn create_replica(
        &self,
        namespace: &str,
        controller: &ReplicationController,
    ) -> BoxFuture<'static, ()> {
        let registry = self.registry.clone();
        let pod = new_replica(namespace, controller, uuid::Uuid::new_v4().to_string());
        Box::pin(async move {
            let Some(pod) = pod else {
                tracing::error!("Unable to create pod replica, no labels");
                return;
            };
            if let Err(e) = registry.create(&pod).await {
                tracing::error!(error = %e, "unable to create pod replica");
            }
        })
    }

    fn delete_pod(&self, namespace: &str, name: &str) -> BoxFuture<'static, anyhow::Result<()>> {
        let (registry, namespace, name) = (
            self.registry.clone(),
            namespace.to_string(),
            name.to_string(),
        );
        Box::pin(async move {
            registry.delete::<Pod>(&namespace, &name, None).await?;
            Ok(())
        })
    }
}

/// A list's items, or, as 2014's storage did, an error for the whole list when one value
/// under it does not decode (the sync that asked for it then does nothing).
pub fn whole_list<T>(list: crate::registry::ObjectList<T>) -> anyhow::Result<Vec<T>> {
    match list.errors.first() {
        Some(error) => anyhow::bail!("list: {error}"),
        None => Ok(list.items),
    }
}

/// The pod `createReplica` posts: exactly a copy of the template's labels and the
/// template's spec, named `name` with `uid == name` (2014's pod storage set the name to
/// the UID). `None` when the template has no labels: 2014 refused to create a pod it could
/// never count.
pub fn new_replica(
    namespace: &str,
    controller: &ReplicationController,
    name: String,
) -> Option<Pod> {
    let mut template = controller.spec.template.clone().unwrap_or_default();
    if template.metadata.labels.is_empty() {
        return None;
    }
    // 2014's `createReplica` posted the template's manifest, which has no host: every new
    // pod went to the scheduler, whatever host the template named.
    template.spec.host.clear();
    Some(Pod {
        metadata: ObjectMeta {
            uid: name.clone(),
            name,
            namespace: namespace.to_string(),
            labels: template.metadata.labels,
            ..ObjectMeta::default()
        },
        spec: template.spec,
        // 2014's apiserver reported a pod with no status as Pending; kcm's tools read it.
        status: Some(PodStatus {
            phase: PodPhase::Pending,
            ..PodStatus::default()
        }),
        ..Pod::default()
    })
}

/// `filterActivePods`: keeps the pods that are neither Succeeded nor Failed.
pub fn filter_active_pods(mut pods: Vec<Pod>) -> Vec<Pod> {
    pods.retain(Pod::is_active);
    pods
}

/// What one watch event does to the loop (the body of the `select`'s watch arm): the
/// controller to sync, after storing its resourceVersion ("If we get disconnected, start
/// where we left off"), or nothing, for an ERROR event, which leaves the stored
/// resourceVersion alone (2014; PR #4102 later cleared it).
pub fn handle_event(
    event: WatchEvent<ReplicationController>,
    resource_version: &mut String,
) -> Option<ReplicationController> {
    let controller = match event {
        // A delete etcd sent without the previous value carries only the name (an empty
        // selector would count every pod of the namespace): 2014's watcher emitted no event
        // for a delete without `PrevNode`.
        WatchEvent::Deleted(c) if c.spec.selector.is_empty() && c.spec.template.is_none() => {
            tracing::debug!(controller = %c.metadata.key(), "delete without its last state; no event (2014)");
            return None;
        }
        // "Sync even if this is a deletion event, to ensure that we leave it in the
        // desired state."
        WatchEvent::Added(c) | WatchEvent::Modified(c) | WatchEvent::Deleted(c) => c,
        WatchEvent::Error(status) => {
            tracing::error!(object = %status, "unexpected object");
            return None;
        }
    };
    *resource_version = controller
        .metadata
        .resource_version
        .map(|rv| rv.0.to_string())
        .unwrap_or_default();
    Some(controller)
}

/// 2014's `ReplicationManager`. Cheap to clone.
#[derive(Clone)]
pub struct ReplicationManager {
    client: Arc<dyn KubeClient>,
    pod_control: Arc<dyn PodControl>,
}

impl ReplicationManager {
    /// `NewReplicationManager(kubeClient)`: reads and writes through `registry` and
    /// `watcher`.
    pub fn new(registry: Registry, watcher: Watcher) -> ReplicationManager {
        ReplicationManager {
            client: Arc::new(EtcdClient {
                registry: registry.clone(),
                watcher,
            }),
            pod_control: Arc::new(RealPodControl { registry }),
        }
    }

    /// A manager over any client and pod control (the unit tests' fakes).
    pub fn with_parts(
        client: Arc<dyn KubeClient>,
        pod_control: Arc<dyn PodControl>,
    ) -> ReplicationManager {
        ReplicationManager {
            client,
            pod_control,
        }
    }

    /// `Run(period)`: `syncTime = time.Tick(period)`, `resourceVersion := ""`, and
    /// `util.Forever(watchControllers, period)`, until `stop` (2014 had no stop: dropping
    /// the loop abandons its in-flight writes, as killing the process did).
    pub async fn run(self, period: Duration, stop: CancellationToken) -> anyhow::Result<()> {
        // `time.Tick`: the first tick after one period; a channel holding at most one
        // pending tick, so a slow reader gets one tick at once and then the next on time.
        let mut sync_time = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        sync_time.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut resource_version = String::new();
        // `util.Forever(func() { rm.watchControllers(&resourceVersion) }, period)`.
        loop {
            tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                _ = handle_crash(self.watch_controllers(&mut resource_version, &mut sync_time)) => {}
            }
            tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                _ = tokio::time::sleep(period) => {}
            }
        }
    }

    /// `watchControllers(&resourceVersion)`: one watch from the stored resourceVersion,
    /// and a loop over the ticker and the watch until the watch closes.
    pub async fn watch_controllers(&self, resource_version: &mut String, sync_time: &mut Interval) {
        let mut watching = match self.client.watch_controllers(resource_version).await {
            Ok(watching) => watching,
            Err(e) => {
                tracing::error!(error = %e, "Unexpected failure to watch");
                tokio::time::sleep(WATCH_FAILURE_PAUSE).await;
                return;
            }
        };
        loop {
            // Go's `select` picks among ready cases at random: no `biased`, so neither the
            // ticker nor a busy watch starves the other.
            tokio::select! {
                _ = sync_time.tick() => self.synchronize().await,
                event = watching.next() => {
                    // The channel closed: let `Forever` call us again.
                    let Some(event) = event else { return };
                    tracing::debug!(event = event.type_name(), "Got watch");
                    if let Some(controller) = handle_event(event, resource_version) {
                        if let Err(e) = self.sync_replication_controller(controller).await {
                            tracing::error!(error = %e, "sync failed");
                        }
                    }
                }
            }
        }
    }

    /// `synchronize()`: lists every controller in every namespace and syncs each in
    /// parallel, returning when all are done (the watch waits meanwhile).
    pub async fn synchronize(&self) {
        let controllers = match self.client.list_controllers().await {
            Ok(controllers) => controllers,
            Err(e) => {
                tracing::error!(error = %e, "Synchronization error");
                return;
            }
        };
        let mut syncs = JoinSet::new();
        for controller in controllers {
            let manager = self.clone();
            syncs.spawn(async move { manager.sync_replication_controller(controller).await });
        }
        while let Some(result) = syncs.join_next().await {
            match result {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!(error = %e, "Error synchronizing"),
                Err(e) => tracing::error!(error = %e, "sync task failed"),
            }
        }
    }

    /// `syncReplicationController(controllerSpec)`: a fresh list of the controller's
    /// pods, then one task per missing pod (`createReplica`) or per surplus pod (deleting
    /// the first ones in list order), with no cap, waiting for all. Writes no status.
    ///
    /// # Errors
    /// When the pod list fails (nothing else is done).
    pub async fn sync_replication_controller(
        &self,
        controller: ReplicationController,
    ) -> anyhow::Result<()> {
        let selector = controller.spec.selector.as_selector();
        let namespace = controller.metadata.namespace.clone();
        let pods = self.client.list_pods(&namespace, &selector).await?;
        let filtered_list = filter_active_pods(pods);
        let diff = filtered_list.len() as i64 - controller.spec.replicas;
        let mut wait = JoinSet::new();
        // 2014 logged these at glog's V(2): debug here.
        if diff < 0 {
            tracing::debug!(controller = %controller.metadata.name, n = -diff, "Too few replicas, creating");
            for _ in 0..-diff {
                wait.spawn(self.pod_control.create_replica(&namespace, &controller));
            }
        } else if diff > 0 {
            tracing::debug!(controller = %controller.metadata.name, n = diff, "Too many replicas, deleting");
            for pod in filtered_list.iter().take(diff as usize) {
                let delete = self.pod_control.delete_pod(&namespace, &pod.metadata.name);
                // Delete errors are discarded (2014).
                wait.spawn(async move {
                    let _ = delete.await;
                });
            }
        }
        // A panicking create or delete ended 2014's whole process (the goroutine had no
        // recover); here the task's panic is caught by tokio: say so, once per task, at
        // the level 2014's crash would have been seen.
        while let Some(done) = wait.join_next().await {
            if let Err(e) = done {
                tracing::error!(controller = %controller.metadata.name, error = %e, "create or delete task panicked (2014's process would have crashed)");
            }
        }
        Ok(())
    }
}

/// `util.HandleCrash`, as `util.Forever` used it: runs `f`, logging and recovering a
/// panic instead of ending the loop.
pub async fn handle_crash(f: impl std::future::Future<Output = ()>) {
    if AssertUnwindSafe(f).catch_unwind().await.is_err() {
        tracing::error!("Recovered from panic; restarting after the period");
    }
}

#[cfg(test)]
mod tests;
