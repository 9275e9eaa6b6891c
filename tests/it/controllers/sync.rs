//! One `sync_replication_controller` end to end, on the path production runs: real etcd, the
//! shared informer caches, the real `EtcdPodControl`. The 2014 `validateSyncReplication`
//! table runs as unit tests over a fake of the same seam
//! (`src/replication_manager/tests.rs`).

use std::sync::Arc;
use std::time::Duration;

use kcm::api::{
    Container, ContainerPort, ObjectMeta, Pod, PodPhase, PodSpec, PodStatus, PodTemplateSpec,
    ReplicationController, ReplicationControllerSpec,
};
use kcm::controller::replicas::{CreateOutcome, DeleteOutcome};
use kcm::controller::{pod_name, ObjectKey};
use kcm::etcd_watcher::Watcher;
use kcm::informer::{CachedPod, ControllerInformer, PodInformer};
use kcm::labels::{Selector, Set};
use kcm::registry::Registry;
use kcm::replication_manager::{
    new_pod_from_template, EtcdPodControl, ManagerConfig, PodControl, ReplicationManager,
};
use kcm::status::Metrics;
use tokio_util::sync::CancellationToken;

use crate::support::objects::current_revision;
use crate::support::{start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(60);

fn labels() -> Set {
    [("app", "web")].into_iter().collect()
}

fn controller(replicas: i64, uid: &str) -> ReplicationController {
    ReplicationController {
        metadata: ObjectMeta {
            uid: uid.into(),
            ..ObjectMeta::named("ns", "web")
        },
        spec: ReplicationControllerSpec {
            replicas,
            selector: labels(),
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

fn pod(name: &str, phase: PodPhase) -> Pod {
    Pod {
        metadata: ObjectMeta {
            labels: labels(),
            ..ObjectMeta::named("ns", name)
        },
        status: Some(PodStatus {
            phase,
            ..PodStatus::default()
        }),
        ..Pod::default()
    }
}

/// The controller and pod informers, running until `stop` and synced.
async fn start_caches(
    client: &etcd_client::Client,
    registry: &Registry,
    stop: &CancellationToken,
) -> (ControllerInformer, PodInformer, tokio::task::JoinHandle<()>) {
    let controllers = ControllerInformer::new(Watcher::new(client, registry.clone()));
    let pods = PodInformer::new(Watcher::new(client, registry.clone()));
    let informers = tokio::spawn({
        let (controllers, pods, stop) = (controllers.clone(), pods.clone(), stop.clone());
        async move {
            tokio::join!(
                controllers.run(stop.clone().cancelled_owned()),
                pods.run(stop.cancelled_owned())
            );
        }
    });
    controllers.wait_synced().await;
    pods.wait_synced().await;
    (controllers, pods, informers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_through_the_caches_creates_the_missing_pods_writes_status_then_rests() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let registry = Registry::new(&client, "/registry").unwrap();
        let rc = registry.create(&controller(5, "uid-1")).await.unwrap();
        // The first slot is taken by a failed pod: it does not count, and is not replaced
        // in place.
        registry
            .create(&pod(&pod_name("web", "uid-1", 0), PodPhase::Failed))
            .await
            .unwrap();
        registry
            .create(&pod("hand-made", PodPhase::Running))
            .await
            .unwrap();

        let stop = CancellationToken::new();
        let (controllers, pods, informers) = start_caches(&client, &registry, &stop).await;
        let metrics = Arc::new(Metrics::new());
        let manager =
            ReplicationManager::new(registry.clone(), ManagerConfig::default(), metrics.clone())
                .with_caches(controllers, pods);

        assert_eq!(manager.sync_all(vec![ObjectKey::new("ns", "web")]).await, 0);
        let listed = registry
            .list::<Pod>(Some("ns"), &Selector::everything())
            .await
            .unwrap();
        let mut created: Vec<String> = listed
            .items
            .iter()
            .filter(|pod| pod.is_active() && pod.metadata.name != "hand-made")
            .map(|pod| pod.metadata.name.clone())
            .collect();
        created.sort();
        let mut expected: Vec<String> = (1..5).map(|slot| pod_name("web", "uid-1", slot)).collect();
        expected.sort();
        assert_eq!(
            created, expected,
            "slots 1 to 4: the failed pod holds slot 0"
        );
        let stored: ReplicationController = registry.get("ns", "web").await.unwrap();
        assert_eq!(stored.status.replicas, 5);
        assert_eq!(metrics.pods_created.get(), 4);

        // Converged: the next sync reads its own writes from the caches and writes nothing.
        let before = current_revision(&client).await;
        assert_eq!(manager.sync_all(vec![ObjectKey::new("ns", "web")]).await, 0);
        assert_eq!(current_revision(&client).await, before);
        stop.cancel();
        informers.await.unwrap();

        // Deleted and re-created under its name: writes made for the version read before
        // are refused, whatever they are.
        registry
            .delete::<ReplicationController>("ns", "web", None)
            .await
            .unwrap();
        registry.create(&controller(5, "uid-2")).await.unwrap();
        let pod_control = EtcdPodControl::new(registry.clone());
        let late = new_pod_from_template(&rc, pod_name("web", "uid-1", 9));
        assert_eq!(
            pod_control.create_pod(&rc, late.into()).await.unwrap(),
            CreateOutcome::ControllerGone
        );
        let victim = &listed.items[0].metadata;
        let outcome = pod_control
            .delete_pod(&rc, "ns", &victim.name, victim.resource_version.unwrap())
            .await
            .unwrap();
        assert_eq!(outcome, DeleteOutcome::ControllerGone);
        assert_eq!(
            registry
                .list::<Pod>(Some("ns"), &Selector::everything())
                .await
                .unwrap()
                .items
                .len(),
            6
        );
    })
    .await;
}

/// Every pod a sync creates reaches the pod cache through the handoff, not a decode of its
/// watch event (issue 33), and the cache then equals etcd's own list field for field; a
/// create that finds its name taken withdraws its offer. At 3,000 replicas: six syncs'
/// worth of the burst limit, with hundreds of creates and events in flight at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_pods_reach_the_cache_handed_off_and_the_cache_equals_etcd() {
    const REPLICAS: usize = 3_000;
    with_timeout(Duration::from_secs(240), async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let registry = Registry::new(&client, "/registry").unwrap();
        let mut rc = controller(REPLICAS as i64, "uid-1");
        let template = rc.spec.template.as_mut().unwrap();
        template.spec.containers[0].ports = vec![ContainerPort {
            name: "http".into(),
            container_port: 80,
            ..ContainerPort::default()
        }];
        registry.create(&rc).await.unwrap();

        let stop = CancellationToken::new();
        let (controllers, pods, informers) = start_caches(&client, &registry, &stop).await;
        let manager =
            ReplicationManager::new(registry.clone(), ManagerConfig::default(), Arc::default())
                .with_caches(controllers, pods.clone());
        let handoff = pods.handoff();

        // Sync until etcd holds every replica (each sync creates up to the burst limit).
        let listed = loop {
            manager.sync_all(vec![ObjectKey::new("ns", "web")]).await;
            let listed = registry
                .list::<Pod>(Some("ns"), &Selector::everything())
                .await
                .unwrap();
            if listed.items.len() >= REPLICAS {
                break listed;
            }
        };
        assert_eq!(listed.items.len(), REPLICAS, "no over-creation");
        // The newest pod's revision: the cache's own, which writes of other kinds (the
        // status) do not move.
        let newest = (listed.items.iter())
            .filter_map(|pod| pod.metadata.resource_version)
            .max()
            .unwrap();
        assert!(pods.wait_for(newest.0, LIMIT).await);
        assert_eq!(
            (handoff.taken(), handoff.waiting()),
            (REPLICAS as u64, 0),
            "every create handed off, none left waiting"
        );
        for pod in &listed.items {
            let cached = pods.get("ns", &pod.metadata.name).expect("cached");
            assert_eq!(*cached, CachedPod::from(pod), "{}", pod.metadata.name);
        }

        // A name already taken: the create's offer is withdrawn, never taken.
        let taken = listed.items[0].metadata.name.clone();
        let rc: ReplicationController = registry.get("ns", "web").await.unwrap();
        let again = new_pod_from_template(&rc, taken);
        let control = EtcdPodControl::new(registry.clone());
        control.hand_created_pods_to(&pods);
        assert!(matches!(
            control.create_pod(&rc, again.into()).await.unwrap(),
            CreateOutcome::Exists(Some(_))
        ));
        assert_eq!(handoff.waiting(), 0);
        stop.cancel();
        informers.await.unwrap();
    })
    .await;
}
