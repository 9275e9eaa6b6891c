//! Unit tests of the replication manager: the replica arithmetic, names and ranking as
//! data-driven tables, and the loop under paused time with a recording sync handler.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::api::PodTemplateSpec;
use crate::labels::Set;

fn pod(name: &str, host: &str, phase: PodPhase, created: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            creation_timestamp: Some(created.to_string()),
            ..ObjectMeta::named("ns", name)
        },
        spec: api::PodSpec {
            host: host.to_string(),
            ..Default::default()
        },
        status: Some(PodStatus {
            phase,
            ..Default::default()
        }),
        ..Pod::default()
    }
}

fn controller(replicas: i64) -> ReplicationController {
    let labels: Set = [("app", "web")].into_iter().collect();
    ReplicationController {
        metadata: ObjectMeta {
            uid: "uid-1".into(),
            ..ObjectMeta::named("ns", "web")
        },
        spec: api::ReplicationControllerSpec {
            replicas,
            selector: labels.clone(),
            template: Some(PodTemplateSpec {
                metadata: ObjectMeta {
                    labels,
                    ..Default::default()
                },
                spec: api::PodSpec {
                    containers: vec![api::Container {
                        name: "nginx".into(),
                        image: "nginx".into(),
                        ..Default::default()
                    }],
                    host: "should-not-be-copied".into(),
                    ..Default::default()
                },
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The 2014 `validateSyncReplication` checks, as a table: desired replicas and pods by
/// phase in, the plan out.
#[test]
fn replica_arithmetic() {
    #[track_caller]
    fn check(replicas: i64, phases: &[PodPhase], burst: usize, expected: Plan) {
        let pods = phases
            .iter()
            .enumerate()
            .map(|(i, phase)| pod(&format!("p{i}"), "", *phase, "2014-10-01T00:00:00Z"))
            .collect();
        let active = filter_active_pods(pods);
        assert_eq!(plan(replicas, active.len(), burst), expected);
    }
    use PodPhase::*;
    check(2, &[Running, Running], 500, Plan::Nothing); // ...DoesNothing
    check(1, &[Running, Running], 500, Plan::Delete(1)); // ...Deletes
    check(2, &[], 500, Plan::Create(2)); // ...Creates
    check(2, &[Succeeded, Failed], 500, Plan::Create(2)); // inactive pods do not count
    check(3, &[Pending, Unknown, Running], 500, Plan::Nothing); // these do
    check(1000, &[], 500, Plan::Create(500)); // burst cap, up
    check(0, &[Running; 700], 500, Plan::Delete(500)); // burst cap, down
    check(-1, &[Running], 500, Plan::Delete(1)); // invalid specs never get here; no panic
}

#[test]
fn slow_start_batches_double_until_the_total() {
    assert_eq!(slow_start_batches(0), Vec::<usize>::new());
    assert_eq!(slow_start_batches(1), [1]);
    assert_eq!(slow_start_batches(10), [1, 2, 4, 3]);
    assert_eq!(slow_start_batches(500).iter().sum::<usize>(), 500);
    // A scale-up continued by the next sync picks up where the last one got to.
    assert_eq!(slow_start_batches_from(256, 500), [256, 244]);
    assert_eq!(slow_start_batches_from(0, 3), [1, 2]);
}

#[test]
fn deletion_ranking() {
    use PodPhase::*;
    let mut pods = vec![
        pod("running-old", "node1", Running, "2014-10-01T00:00:00Z"),
        pod("running-new", "node1", Running, "2014-10-02T00:00:00Z"),
        pod("unknown", "node1", Unknown, "2014-10-01T00:00:00Z"),
        pod("pending-assigned", "node1", Pending, "2014-10-01T00:00:00Z"),
        pod("unassigned-b", "", Running, "2014-10-01T00:00:00Z"),
        pod("unassigned-a", "", Running, "2014-10-01T00:00:00Z"),
        pod("unassigned-pending", "", Pending, "2014-09-01T00:00:00Z"),
    ];
    rank_for_deletion(&mut pods);
    let order: Vec<_> = pods.iter().map(|p| p.metadata.name.as_str()).collect();
    assert_eq!(
        order,
        [
            "unassigned-pending",
            "unassigned-a",
            "unassigned-b",
            "pending-assigned",
            "unknown",
            "running-new",
            "running-old",
        ]
    );
}

#[test]
fn pod_names_are_deterministic_per_slot_and_controller() {
    let a = pod_name("web", "uid-1", 0);
    assert_eq!(a, pod_name("web", "uid-1", 0));
    assert_ne!(a, pod_name("web", "uid-1", 1));
    assert_ne!(a, pod_name("web", "uid-2", 0));
    let suffix = a.strip_prefix("web-").unwrap();
    assert_eq!(suffix.len(), 5);
    assert!(suffix.bytes().all(|b| SUFFIX_ALPHABET.contains(&b)), "{a}");
}

#[test]
fn names_to_create_fill_the_lowest_free_slots() {
    let taken = [pod_name("web", "u", 0), pod_name("web", "u", 2)];
    let existing: HashSet<&str> = taken.iter().map(String::as_str).collect();
    assert_eq!(
        names_to_create("web", "u", &existing, 3),
        [
            pod_name("web", "u", 1),
            pod_name("web", "u", 3),
            pod_name("web", "u", 4)
        ]
    );
    // Many slots: all distinct, even where two slots' hashes collide.
    let names = names_to_create("web", "u", &HashSet::new(), 5000);
    assert_eq!(names.iter().collect::<HashSet<_>>().len(), 5000);
}

#[test]
fn created_pods_carry_exactly_the_template() {
    let rc = controller(1);
    let before = rc.clone();
    let pod = new_pod_from_template(&rc, "web-abcde".into());
    assert_eq!(rc, before, "the template must not be mutated");
    let template = rc.spec.template.unwrap();
    assert_eq!(pod.metadata.labels, template.metadata.labels);
    assert_eq!(pod.spec.containers, template.spec.containers);
    assert_eq!(pod.spec.host, "", "a new pod is unassigned");
    assert_eq!(pod.phase(), PodPhase::Pending);
    assert_eq!(pod.metadata.key(), "ns/web-abcde");
    let created_by = &pod.metadata.annotations[CREATED_BY_ANNOTATION];
    assert!(
        created_by.contains(r#""name":"web""#) && created_by.contains("uid-1"),
        "{created_by}"
    );
    api::validate(&pod).unwrap();
}

#[test]
fn pod_events_sync_the_controllers_whose_selector_matches_old_or_new_labels() {
    let mut index = ControllerIndex::default();
    index.upsert(&controller(1));
    let mut other = controller(1);
    other.metadata.name = "db".into();
    other.spec.selector = [("app", "db")].into_iter().collect();
    index.upsert(&other);
    let mut elsewhere = controller(1);
    elsewhere.metadata.namespace = "other".into();
    index.upsert(&elsewhere);

    let labelled = |app: &str, phase| {
        let mut p = pod("p", "", phase, "2014-10-01T00:00:00Z");
        p.metadata.labels = [("app", app)].into_iter().collect();
        Arc::new(CachedPod::from(&p))
    };
    let check = |old: Option<Arc<CachedPod>>, new: Option<Arc<CachedPod>>, expected: &[&str]| {
        let delta = Delta {
            namespace: "ns".into(),
            name: "p".into(),
            old,
            new,
        };
        let mut keys = index.controllers_to_sync_for(&delta);
        keys.sort();
        assert_eq!(keys, expected, "for {delta:?}");
    };
    use PodPhase::*;
    // Added, then Running: nothing a controller must act on.
    check(None, Some(labelled("web", Pending)), &[]);
    check(
        Some(labelled("web", Pending)),
        Some(labelled("web", Running)),
        &[],
    );
    // Relabelled: both the old and the new owner.
    check(
        Some(labelled("web", Running)),
        Some(labelled("db", Running)),
        &["ns/db", "ns/web"],
    );
    check(
        Some(labelled("db", Running)),
        Some(labelled("db", Failed)),
        &["ns/db"],
    );
    // First sight of an inactive pod, deleted, undecodable (no new state).
    check(None, Some(labelled("db", Failed)), &["ns/db"]);
    check(Some(labelled("db", Failed)), None, &["ns/db"]);
}

/// A manager whose syncs are counted, not run; the registry is never used.
async fn counting_manager(
    config: ManagerConfig,
    sync_time: Duration,
) -> (
    ReplicationManager,
    Arc<Mutex<Vec<String>>>,
    Arc<AtomicUsize>,
) {
    let client = etcd_client::Client::connect(["http://127.0.0.1:9"], None)
        .await
        .expect("a lazy client");
    let registry = Registry::new(&client, "/registry").unwrap();
    let synced = Arc::new(Mutex::new(Vec::new()));
    let finished = Arc::new(AtomicUsize::new(0));
    let handler: SyncHandler = {
        let synced = synced.clone();
        let finished = finished.clone();
        Arc::new(move |key: String| {
            synced.lock().unwrap().push(key);
            let finished = finished.clone();
            Box::pin(async move {
                tokio::time::sleep(sync_time).await;
                finished.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
        })
    };
    let manager = ReplicationManager::new(registry, config, Arc::new(Metrics::new()))
        .with_sync_handler(handler);
    (manager, synced, finished)
}

fn added(name: &str) -> Delta<ReplicationController> {
    let mut rc = controller(1);
    rc.metadata.name = name.into();
    Delta {
        namespace: "ns".into(),
        name: name.into(),
        old: None,
        new: Some(Arc::new(rc)),
    }
}

#[tokio::test(start_paused = true)]
async fn the_loop_resyncs_every_period_and_syncs_on_events() {
    let config = ManagerConfig {
        sync_period: Duration::from_secs(10),
        ..ManagerConfig::default()
    };
    let (manager, synced, _) = counting_manager(config, Duration::ZERO).await;
    let (rc_tx, rc_rx) = mpsc::channel(10);
    let (_pod_tx, pod_rx) = mpsc::channel(10);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        manager
            .run_loop(rc_rx, pod_rx, async {
                let _ = stop_rx.await;
            })
            .await
    });
    // An event triggers exactly one sync of that controller.
    rc_tx.send(added("a")).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(*synced.lock().unwrap(), ["ns/a"]);
    // Every period, every known controller is synced once more.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(synced.lock().unwrap().len(), 2);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(synced.lock().unwrap().len(), 3);
    // A deleted controller is no longer resynced.
    let mut gone = added("a");
    gone.old = gone.new.take();
    rc_tx.send(gone).await.unwrap();
    tokio::time::sleep(Duration::from_secs(25)).await;
    assert_eq!(synced.lock().unwrap().len(), 3);
    stop_tx.send(()).unwrap();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_events_for_one_key_coalesces() {
    let config = ManagerConfig {
        concurrent_syncs: 5,
        ..ManagerConfig::default()
    };
    // Each sync takes 1 s, so the burst arrives while the first sync runs.
    let (manager, synced, _) = counting_manager(config, Duration::from_secs(1)).await;
    let (rc_tx, rc_rx) = mpsc::channel(100);
    let (_pod_tx, pod_rx) = mpsc::channel(10);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        manager
            .run_loop(rc_rx, pod_rx, async {
                let _ = stop_rx.await;
            })
            .await
    });
    rc_tx.send(added("a")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(synced.lock().unwrap().len(), 1, "the first sync is running");
    for _ in 0..50 {
        rc_tx.send(added("a")).await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    // One sync for the first event, one for everything queued while it ran; never two
    // at once although five workers were free.
    assert_eq!(*synced.lock().unwrap(), ["ns/a", "ns/a"]);
    stop_tx.send(()).unwrap();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn shutdown_waits_for_in_flight_syncs() {
    let (manager, synced, finished) =
        counting_manager(ManagerConfig::default(), Duration::from_secs(3)).await;
    let (rc_tx, rc_rx) = mpsc::channel(10);
    let (_pod_tx, pod_rx) = mpsc::channel(10);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        manager
            .run_loop(rc_rx, pod_rx, async {
                let _ = stop_rx.await;
            })
            .await
    });
    rc_tx.send(added("a")).await.unwrap();
    rc_tx.send(added("b")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(synced.lock().unwrap().len(), 2);
    stop_tx.send(()).unwrap();
    run.await.unwrap().unwrap();
    // `run_loop` returned only after both in-flight syncs finished.
    assert_eq!(finished.load(Ordering::SeqCst), 2);
    // And nothing new started after shutdown.
    assert_eq!(synced.lock().unwrap().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_sync_is_retried_and_does_not_take_the_worker_down() {
    let config = ManagerConfig {
        concurrent_syncs: 1,
        ..ManagerConfig::default()
    };
    let (manager, _, _) = counting_manager(config, Duration::ZERO).await;
    let synced = Arc::new(Mutex::new(Vec::new()));
    let handler: SyncHandler = {
        let synced = synced.clone();
        Arc::new(move |key: String| {
            synced.lock().unwrap().push(key.clone());
            Box::pin(async move {
                assert_ne!(key, "ns/boom", "sync of a bad controller panicked");
                Ok(())
            })
        })
    };
    let manager = manager.with_sync_handler(handler);
    let (rc_tx, rc_rx) = mpsc::channel(10);
    let (_pod_tx, pod_rx) = mpsc::channel(10);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        manager
            .run_loop(rc_rx, pod_rx, async {
                let _ = stop_rx.await;
            })
            .await
    });
    rc_tx.send(added("boom")).await.unwrap();
    rc_tx.send(added("fine")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let synced_keys = synced.lock().unwrap().clone();
    // The only worker survived the panic, synced the next key, and retried the
    // panicking one with backoff.
    assert!(
        synced_keys.contains(&"ns/fine".to_string()),
        "{synced_keys:?}"
    );
    assert!(
        synced_keys.iter().filter(|k| *k == "ns/boom").count() >= 2,
        "{synced_keys:?}"
    );
    stop_tx.send(()).unwrap();
    run.await.unwrap().unwrap();
}
