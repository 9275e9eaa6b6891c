//! One `sync_replication_controller` through a recording fake `PodControl`, reading real
//! etcd: the 2014 `validateSyncReplication` tests (`...DoesNothing`, `...Deletes`,
//! `...Creates`, `TestCreateReplica`), plus the burst cap, slow start stopping at the first
//! failure, deletion ranking with resourceVersion guards, and invalid controllers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kcm::api::{
    Container, ObjectMeta, Pod, PodPhase, PodSpec, PodStatus, PodTemplateSpec,
    ReplicationController, ReplicationControllerSpec, ResourceVersion,
};
use kcm::etcd_watcher::Watcher;
use kcm::informer::{ControllerInformer, PodInformer};
use kcm::labels::Set;
use kcm::registry::Registry;
use kcm::replication_manager::{
    CreateOutcome, DeleteOutcome, ManagerConfig, PodControl, ReplicationManager,
};
use kcm::status::Metrics;
use tokio_util::sync::CancellationToken;

use crate::support::{start_etcd, with_timeout, EtcdServer};

const LIMIT: Duration = Duration::from_secs(60);

/// What the manager asked for. Creates are recorded, not written; deletes likewise.
#[derive(Default)]
struct Recorded {
    creates: Mutex<Vec<Pod>>,
    deletes: Mutex<Vec<(String, ResourceVersion)>>,
}

#[derive(Clone, Default)]
struct FakePodControl {
    recorded: Arc<Recorded>,
    fail_creates: bool,
}

impl PodControl for FakePodControl {
    async fn create_pod(&self, pod: Pod) -> anyhow::Result<CreateOutcome> {
        self.recorded.creates.lock().unwrap().push(pod);
        anyhow::ensure!(!self.fail_creates, "injected create failure");
        // Revision 0: nothing was written, so there is nothing for the cache to wait for.
        Ok(CreateOutcome::Created(ResourceVersion(0)))
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> anyhow::Result<DeleteOutcome> {
        self.recorded
            .deletes
            .lock()
            .unwrap()
            .push((format!("{namespace}/{name}"), resource_version));
        Ok(DeleteOutcome::Deleted(ResourceVersion(0)))
    }
}

fn labels() -> Set {
    [("app", "web")].into_iter().collect()
}

fn controller(replicas: i64, selector: Set) -> ReplicationController {
    ReplicationController {
        metadata: ObjectMeta::named("ns", "web"),
        spec: ReplicationControllerSpec {
            replicas,
            selector,
            template: Some(PodTemplateSpec {
                metadata: ObjectMeta {
                    labels: labels(),
                    ..ObjectMeta::default()
                },
                spec: PodSpec {
                    containers: vec![Container {
                        name: "web".into(),
                        image: "nginx".into(),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                },
                ..PodTemplateSpec::default()
            }),
            ..ReplicationControllerSpec::default()
        },
        ..ReplicationController::default()
    }
}

fn pod(name: &str, host: &str, phase: PodPhase) -> Pod {
    Pod {
        metadata: ObjectMeta {
            labels: labels(),
            ..ObjectMeta::named("ns", name)
        },
        spec: PodSpec {
            host: host.into(),
            ..PodSpec::default()
        },
        status: Some(PodStatus {
            phase,
            ..PodStatus::default()
        }),
        ..Pod::default()
    }
}

/// Stores `rc` and `pods`, then runs one sync of `ns/web` with the fake pod control and
/// returns the number of failed syncs.
async fn sync_once(
    etcd: &EtcdServer,
    rc: ReplicationController,
    pods: &[Pod],
    config: ManagerConfig,
    fake: FakePodControl,
) -> (usize, Vec<Pod>) {
    let client = etcd.client().await;
    let registry = Registry::new(&client, "/registry").unwrap();
    registry.create(&rc).await.unwrap();
    let mut stored = Vec::new();
    for pod in pods {
        stored.push(registry.create(pod).await.unwrap());
    }
    let stop = CancellationToken::new();
    let controllers = ControllerInformer::new(Watcher::new(&client, registry.clone()));
    let pod_cache = PodInformer::new(Watcher::new(&client, registry.clone()));
    let runs = tokio::spawn({
        let (controllers, pod_cache, stop) = (controllers.clone(), pod_cache.clone(), stop.clone());
        async move {
            tokio::join!(
                controllers.run(stop.clone().cancelled_owned()),
                pod_cache.run(stop.cancelled_owned())
            );
        }
    });
    controllers.wait_synced().await;
    pod_cache.wait_synced().await;
    let manager = ReplicationManager::new(registry, config, Arc::new(Metrics::new()))
        .with_pod_control(fake)
        .with_caches(controllers, pod_cache);
    let failures = manager.sync_all(vec!["ns/web".into()]).await;
    stop.cancel();
    runs.await.unwrap();
    (failures, stored)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_pods_are_created_from_the_template() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let fake = FakePodControl::default();
        let rc = controller(7, labels());
        let (failures, _) = sync_once(&etcd, rc, &[], ManagerConfig::default(), fake.clone()).await;
        assert_eq!(failures, 0);
        let creates = fake.recorded.creates.lock().unwrap().clone();
        assert_eq!(creates.len(), 7);
        let mut names: Vec<_> = creates.iter().map(|p| p.metadata.name.clone()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 7, "every replica slot has its own name");
        for pod in &creates {
            assert!(
                pod.metadata.name.starts_with("web-"),
                "{}",
                pod.metadata.name
            );
            assert_eq!(pod.metadata.namespace, "ns");
            assert_eq!(
                pod.metadata.labels,
                labels(),
                "exactly the template's labels"
            );
            assert_eq!(pod.spec.containers[0].image, "nginx");
            assert_eq!(pod.phase(), PodPhase::Pending);
        }
        assert!(fake.recorded.deletes.lock().unwrap().is_empty());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_are_capped_by_the_burst_limit() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let fake = FakePodControl::default();
        let config = ManagerConfig {
            burst_replicas: 5,
            ..ManagerConfig::default()
        };
        sync_once(&etcd, controller(12, labels()), &[], config, fake.clone()).await;
        assert_eq!(fake.recorded.creates.lock().unwrap().len(), 5);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_start_stops_after_the_first_failing_batch() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let fake = FakePodControl {
            fail_creates: true,
            ..FakePodControl::default()
        };
        let (failures, _) = sync_once(
            &etcd,
            controller(50, labels()),
            &[],
            ManagerConfig::default(),
            fake.clone(),
        )
        .await;
        assert_eq!(
            failures, 1,
            "the sync reports the failure (and is retried with backoff)"
        );
        // The first batch has one create; it failed, so no second batch was sent.
        assert_eq!(fake.recorded.creates.lock().unwrap().len(), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_surplus_is_deleted_lowest_rank_first_each_guarded_by_its_version() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let fake = FakePodControl::default();
        let pods = [
            pod("running-1", "node-1", PodPhase::Running),
            pod("running-2", "node-2", PodPhase::Running),
            pod("pending-assigned", "node-1", PodPhase::Pending),
            pod("unassigned-a", "", PodPhase::Pending),
            pod("unassigned-b", "", PodPhase::Pending),
            pod("failed", "node-1", PodPhase::Failed),
        ];
        let (failures, stored) = sync_once(
            &etcd,
            controller(2, labels()),
            &pods,
            ManagerConfig::default(),
            fake.clone(),
        )
        .await;
        assert_eq!(failures, 0);
        let mut deletes = fake.recorded.deletes.lock().unwrap().clone();
        deletes.sort();
        let version = |name: &str| {
            stored
                .iter()
                .find(|p| p.metadata.name == name)
                .and_then(|p| p.metadata.resource_version)
                .unwrap()
        };
        // 5 active (the failed pod does not count), 2 wanted: the 3 lowest ranked go,
        // each delete guarded by the version the pod was ranked at.
        assert_eq!(
            deletes,
            [
                (
                    "ns/pending-assigned".to_string(),
                    version("pending-assigned")
                ),
                ("ns/unassigned-a".to_string(), version("unassigned-a")),
                ("ns/unassigned-b".to_string(), version("unassigned-b")),
            ]
        );
        assert!(fake.recorded.creates.lock().unwrap().is_empty());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_desired_count_or_an_invalid_controller_means_no_writes() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let fake = FakePodControl::default();
        let pods = [
            pod("a", "n", PodPhase::Running),
            pod("b", "n", PodPhase::Running),
        ];
        sync_once(
            &etcd,
            controller(2, labels()),
            &pods,
            ManagerConfig::default(),
            fake.clone(),
        )
        .await;
        // An invalid controller (empty selector: it would adopt every pod) in another etcd.
        let Some(other) = start_etcd().await else {
            return;
        };
        sync_once(
            &other,
            controller(5, Set::new()),
            &[],
            ManagerConfig::default(),
            fake.clone(),
        )
        .await;
        assert!(fake.recorded.creates.lock().unwrap().is_empty());
        assert!(fake.recorded.deletes.lock().unwrap().is_empty());
    })
    .await;
}
