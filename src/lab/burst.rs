//! `burst`: one controller created with many replicas; figure: the most pod creates in
//! flight at once, counted around each loop's pod-control seam (2014: all at once, one
//! task per missing pod; kcm: slow-start batches and the burst cap of 500) (#4866).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::loops::RunningLoop;
use super::{Lab, Loop, Measured, Row, Scenario, Sizes};
use crate::api::{ReplicationController, ResourceVersion};
use crate::controller::replicas::{CreateOutcome, DeleteOutcome, StatusOutcome};
use crate::controller::NewPod;
use crate::etcd_watcher::Watcher;
use crate::replication_2014;
use crate::replication_manager::{EtcdPodControl, ManagerConfig, PodControl, ReplicationManager};
use crate::status::Metrics;

impl Lab {
    /// `burst`: one controller created with many replicas; the most pod creates in
    /// flight at once, counted around each loop's pod-control seam (the one figure that
    /// is not etcd's: in-flight requests are not in its history).
    pub(super) async fn burst(&self, which: Loop, namespace: &str) -> anyhow::Result<Measured> {
        let replicas = self.sizes.burst_replicas;
        let in_flight = Arc::new(InFlight::new());
        let watcher = Watcher::new(&self.client, self.registry.clone());
        let stop = CancellationToken::new();
        let task = match which {
            Loop::V2014 => {
                let client = replication_2014::EtcdClient {
                    registry: self.registry.clone(),
                    watcher,
                };
                let pod_control = Counting {
                    inner: replication_2014::RealPodControl {
                        registry: self.registry.clone(),
                    },
                    in_flight: in_flight.clone(),
                };
                let manager = replication_2014::ReplicationManager::with_parts(
                    Arc::new(client),
                    Arc::new(pod_control),
                );
                tokio::spawn(manager.run(self.period, stop.clone()))
            }
            Loop::Kcm => {
                let config = ManagerConfig {
                    sync_period: self.period,
                    ..ManagerConfig::default()
                };
                let pod_control = Counting {
                    inner: EtcdPodControl::new(self.registry.clone()),
                    in_flight: in_flight.clone(),
                };
                let manager = ReplicationManager::with_io(
                    self.registry.clone(),
                    pod_control,
                    config,
                    Arc::new(Metrics::new()),
                );
                tokio::spawn(manager.run(watcher, stop.clone().cancelled_owned()))
            }
        };
        let running = RunningLoop { stop, task };
        self.create_controller(namespace, "web", replicas).await?;
        self.wait_pods(namespace, replicas as usize).await?;
        running.stop().await?;
        let course = std::mem::take(&mut *in_flight.course.lock().expect("in-flight course lock"));
        Ok((in_flight.peak.load(Ordering::SeqCst) as f64, course))
    }
}

/// Pod creates in flight: now, the most at once, and each change (seconds since `start`,
/// creates in flight).
struct InFlight {
    start: Instant,
    now: AtomicUsize,
    peak: AtomicUsize,
    course: Mutex<Vec<(f64, f64)>>,
}

impl InFlight {
    fn new() -> InFlight {
        InFlight {
            start: Instant::now(),
            now: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            course: Mutex::new(vec![(0.0, 0.0)]),
        }
    }

    fn enter(&self) {
        let mut course = self.course.lock().expect("in-flight course lock");
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        course.push((self.start.elapsed().as_secs_f64(), now as f64));
    }

    fn exit(&self) {
        let mut course = self.course.lock().expect("in-flight course lock");
        let now = self.now.fetch_sub(1, Ordering::SeqCst) - 1;
        course.push((self.start.elapsed().as_secs_f64(), now as f64));
    }
}

/// A pod control that counts the creates in flight through it, for `burst`.
struct Counting<P> {
    inner: P,
    in_flight: Arc<InFlight>,
}

impl<P: replication_2014::PodControl> replication_2014::PodControl for Counting<P> {
    fn create_replica(
        &self,
        namespace: &str,
        controller: &ReplicationController,
    ) -> BoxFuture<'static, ()> {
        // In flight from the moment the sync issues it: 2014 issued every create of a
        // sync before awaiting any.
        self.in_flight.enter();
        let create = self.inner.create_replica(namespace, controller);
        let in_flight = self.in_flight.clone();
        Box::pin(async move {
            create.await;
            in_flight.exit();
        })
    }

    fn delete_pod(&self, namespace: &str, name: &str) -> BoxFuture<'static, anyhow::Result<()>> {
        self.inner.delete_pod(namespace, name)
    }
}

impl<P: PodControl> PodControl for Counting<P> {
    async fn create_pod(
        &self,
        controller: &ReplicationController,
        pod: NewPod,
    ) -> anyhow::Result<CreateOutcome> {
        self.in_flight.enter();
        let outcome = self.inner.create_pod(controller, pod).await;
        self.in_flight.exit();
        outcome
    }

    async fn delete_pod(
        &self,
        controller: &ReplicationController,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> anyhow::Result<DeleteOutcome> {
        self.inner
            .delete_pod(controller, namespace, name, resource_version)
            .await
    }

    async fn update_status(
        &self,
        controller: &ReplicationController,
        replicas: i64,
        ready: i64,
    ) -> anyhow::Result<StatusOutcome> {
        self.inner.update_status(controller, replicas, ready).await
    }
}

/// The table's row of `burst`: what was measured, both loops' figures, the departure
/// and the issues behind it.
pub(super) fn row(sizes: Sizes, v2014: f64, kcm: f64) -> Row {
    Row {
        scenario: Scenario::Burst.name(),
        measure: format!(
            "peak pod creates in flight, one controller 0 → {}",
            sizes.burst_replicas
        ),
        unit: "creates",
        v2014,
        kcm,
        departure: "manager: creates",
        weaknesses: &[3],
        issues: "#4866, #33041",
        also: Vec::new(),
    }
}
