//! The 2014 loop held to 2014's own tests (`pkg/controller/replication_controller_test.go`,
//! October 2014: `TestSyncReplicationController{DoesNothing,Deletes,Creates}`,
//! `TestCreateReplica`, `TestSynchonize`) and to behaviours 24-41 of docs/2014.md,
//! with a recording fake of the
//! client and of `PodControl`, as 2014's `FakePodControl`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::StreamExt;

use super::*;
use crate::api::{Container, PodSpec, PodTemplateSpec, ReplicationControllerSpec, ResourceVersion};
use crate::etcd_watcher::Status;
use crate::labels::Set;

fn labels(name: &str) -> Set {
    [("name", name)].into_iter().collect()
}

fn controller(name: &str, replicas: i64) -> ReplicationController {
    ReplicationController {
        metadata: ObjectMeta::named("ns", name),
        spec: ReplicationControllerSpec {
            replicas,
            selector: labels(name),
            template: Some(PodTemplateSpec {
                metadata: ObjectMeta {
                    labels: labels(name),
                    ..ObjectMeta::default()
                },
                spec: PodSpec {
                    containers: vec![Container {
                        name: "nginx".into(),
                        image: "dockerfile/nginx".into(),
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

fn pod(name: &str, controller: &str, phase: PodPhase) -> Pod {
    Pod {
        metadata: ObjectMeta {
            labels: labels(controller),
            ..ObjectMeta::named("ns", name)
        },
        status: Some(PodStatus {
            phase,
            ..PodStatus::default()
        }),
        ..Pod::default()
    }
}

/// The fake apiserver and `FakePodControl` in one: controllers and pods in memory, every
/// watch's resourceVersion and every create and delete recorded. A create adds a pod named
/// `{controller}-{n}`, so the fake converges like etcd would.
#[derive(Default)]
struct Fake {
    controllers: Mutex<Vec<ReplicationController>>,
    pods: Mutex<Vec<Pod>>,
    /// The events of the next watches, one list per watch; when none is left, a watch
    /// fails at once (one 410 ERROR event, then closed), as a compacted one does.
    watches: Mutex<VecDeque<Vec<WatchEvent<ReplicationController>>>>,
    /// The resourceVersion each watch was opened with.
    watched_from: Mutex<Vec<String>>,
    /// The first watch panics.
    panic_once: Mutex<bool>,
    /// The next this many watches cannot open (no server answers).
    unreachable: Mutex<usize>,
    /// `(namespace, controller)` of every create.
    creates: Mutex<Vec<(String, String)>>,
    /// `(namespace, pod)` of every delete.
    deletes: Mutex<Vec<(String, String)>>,
}

impl KubeClient for Fake {
    fn list_controllers(&self) -> BoxFuture<'static, anyhow::Result<Vec<ReplicationController>>> {
        let controllers = self.controllers.lock().unwrap().clone();
        Box::pin(async move { Ok(controllers) })
    }

    fn list_pods(
        &self,
        namespace: &str,
        selector: &Selector,
    ) -> BoxFuture<'static, anyhow::Result<Vec<Pod>>> {
        let pods: Vec<Pod> = self
            .pods
            .lock()
            .unwrap()
            .iter()
            .filter(|p| p.metadata.namespace == namespace && selector.matches(&p.metadata.labels))
            .cloned()
            .collect();
        Box::pin(async move { Ok(pods) })
    }

    fn watch_controllers(
        &self,
        resource_version: &str,
    ) -> BoxFuture<'static, anyhow::Result<BoxStream<'static, WatchEvent<ReplicationController>>>>
    {
        if std::mem::take(&mut *self.panic_once.lock().unwrap()) {
            panic!("a bug in the watch loop");
        }
        self.watched_from
            .lock()
            .unwrap()
            .push(resource_version.to_string());
        {
            let mut unreachable = self.unreachable.lock().unwrap();
            if *unreachable > 0 {
                *unreachable -= 1;
                return Box::pin(async { anyhow::bail!("connection refused") });
            }
        }
        let events = self.watches.lock().unwrap().pop_front().unwrap_or_else(|| {
            vec![WatchEvent::Error(Status::gone(
                "required revision has been compacted",
            ))]
        });
        Box::pin(async move { Ok(futures::stream::iter(events).boxed()) })
    }
}

/// The fake's pod control (`FakePodControl`), sharing the fake's state.
struct FakePodControl(Arc<Fake>);

impl PodControl for FakePodControl {
    fn create_replica(
        &self,
        namespace: &str,
        controller: &ReplicationController,
    ) -> BoxFuture<'static, ()> {
        let name = controller.metadata.name.clone();
        let mut creates = self.0.creates.lock().unwrap();
        creates.push((namespace.to_string(), name.clone()));
        let pod = pod(
            &format!("{name}-{}", creates.len()),
            &name,
            PodPhase::Pending,
        );
        self.0.pods.lock().unwrap().push(pod);
        Box::pin(async {})
    }

    fn delete_pod(&self, namespace: &str, name: &str) -> BoxFuture<'static, anyhow::Result<()>> {
        self.0
            .deletes
            .lock()
            .unwrap()
            .push((namespace.to_string(), name.to_string()));
        self.0
            .pods
            .lock()
            .unwrap()
            .retain(|p| p.metadata.name != name);
        Box::pin(async { Ok(()) })
    }
}

fn manager(fake: &Arc<Fake>) -> ReplicationManager {
    ReplicationManager::with_parts(fake.clone(), Arc::new(FakePodControl(fake.clone())))
}

/// `validateSyncReplication`: the creates and the deleted pods (in order) of one sync of
/// a controller with `replicas` over `pods`.
#[track_caller]
fn check_sync(replicas: i64, pods: &[Pod], creates: usize, deletes: &[&str]) {
    let fake = Arc::new(Fake::default());
    *fake.pods.lock().unwrap() = pods.to_vec();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(manager(&fake).sync_replication_controller(controller("foo", replicas)))
        .unwrap();
    assert_eq!(fake.creates.lock().unwrap().len(), creates, "creates");
    let mut deleted: Vec<String> = fake
        .deletes
        .lock()
        .unwrap()
        .iter()
        .map(|d| d.1.clone())
        .collect();
    // The deletes run as concurrent tasks: which finishes first is not the question;
    // which pods were chosen is.
    deleted.sort();
    let mut expected: Vec<String> = deletes.iter().map(|d| d.to_string()).collect();
    expected.sort();
    assert_eq!(deleted, expected, "deleted pods");
}

#[test]
fn sync_replication_controller_does_nothing_when_the_count_matches() {
    let pods = [
        pod("a", "foo", PodPhase::Running),
        pod("b", "foo", PodPhase::Running),
    ];
    check_sync(2, &pods, 0, &[]);
}

#[test]
fn sync_replication_controller_deletes_the_first_pods_in_list_order() {
    // TestSyncReplicationControllerDeletes: 2 pods, replicas 1, one delete.
    let pods = [
        pod("a", "foo", PodPhase::Running),
        pod("b", "foo", PodPhase::Running),
    ];
    check_sync(1, &pods, 0, &["a"]);
    // The first in list order, running or not: no ranking before PR #6992 (#3948).
    let pods = [
        pod("z-running", "foo", PodPhase::Running),
        pod("y-running", "foo", PodPhase::Running),
        pod("x-pending", "foo", PodPhase::Pending),
        pod("w-pending", "foo", PodPhase::Pending),
    ];
    check_sync(2, &pods, 0, &["z-running", "y-running"]);
}

#[test]
fn sync_replication_controller_creates_the_missing_pods() {
    check_sync(2, &[], 2, &[]);
}

#[test]
fn filter_active_pods_drops_succeeded_and_failed_pods() {
    let pods = vec![
        pod("pending", "foo", PodPhase::Pending),
        pod("running", "foo", PodPhase::Running),
        pod("succeeded", "foo", PodPhase::Succeeded),
        pod("failed", "foo", PodPhase::Failed),
        pod("unknown", "foo", PodPhase::Unknown),
    ];
    let names: Vec<String> = filter_active_pods(pods)
        .into_iter()
        .map(|p| p.metadata.name)
        .collect();
    assert_eq!(names, ["pending", "running", "unknown"]);
    // And the sync counts only those: 3 active for 4 replicas is one create.
    let pods = [
        pod("a", "foo", PodPhase::Pending),
        pod("b", "foo", PodPhase::Running),
        pod("c", "foo", PodPhase::Failed),
        pod("d", "foo", PodPhase::Unknown),
    ];
    check_sync(4, &pods, 1, &[]);
}

#[test]
fn create_replica_posts_the_template_labels_and_spec_under_a_uuid() {
    // TestCreateReplica: exactly the template's labels and desired state; the name is the
    // UID, as 2014's pod storage made it.
    let controller = controller("foo", 1);
    let name = uuid::Uuid::new_v4().to_string();
    let pod = new_replica("ns", &controller, name.clone()).unwrap();
    let template = controller.spec.template.clone().unwrap();
    assert_eq!(pod.metadata.labels, template.metadata.labels);
    assert_eq!(pod.spec, template.spec);
    assert_eq!(
        (pod.metadata.name.as_str(), pod.metadata.uid.as_str()),
        (name.as_str(), name.as_str())
    );
    assert_eq!(pod.metadata.namespace, "ns");
    assert!(pod.metadata.annotations.is_empty());
    // "Unable to create pod replica, no labels".
    let mut unlabeled = controller;
    unlabeled.spec.template.as_mut().unwrap().metadata.labels = Set::default();
    assert_eq!(new_replica("ns", &unlabeled, name), None);
}

#[tokio::test]
async fn synchronize_makes_7_creates_for_4_and_3_replicas() {
    // TestSynchonize: two controllers with 4 and 3 replicas and no pods.
    let fake = Arc::new(Fake::default());
    *fake.controllers.lock().unwrap() = vec![controller("foo", 4), controller("bar", 3)];
    manager(&fake).synchronize().await;
    let mut creates: Vec<String> = fake
        .creates
        .lock()
        .unwrap()
        .iter()
        .map(|c| c.1.clone())
        .collect();
    creates.sort();
    assert_eq!(creates, ["bar", "bar", "bar", "foo", "foo", "foo", "foo"]);
}

#[tokio::test]
async fn a_deleted_controller_is_synced_at_its_last_state() {
    // A controller short of pods is deleted: its DELETED event still syncs it, and the
    // sync creates the missing pods for a controller that no longer exists (#10).
    let mut last_state = controller("foo", 3);
    last_state.metadata.resource_version = Some(ResourceVersion(9));
    let fake = Arc::new(Fake::default());
    fake.pods
        .lock()
        .unwrap()
        .push(pod("a", "foo", PodPhase::Running));
    let mut resource_version = "7".to_string();
    let to_sync = handle_event(
        WatchEvent::Deleted(last_state.clone()),
        &mut resource_version,
    );
    assert_eq!(to_sync.as_ref(), Some(&last_state));
    assert_eq!(
        resource_version, "9",
        "the stored resourceVersion follows the event"
    );
    manager(&fake)
        .sync_replication_controller(to_sync.unwrap())
        .await
        .unwrap();
    assert_eq!(fake.creates.lock().unwrap().len(), 2);
}

#[test]
fn an_error_event_is_skipped_and_leaves_the_resource_version_alone() {
    let mut resource_version = "7".to_string();
    let event = WatchEvent::Error(Status::gone("required revision has been compacted"));
    assert_eq!(handle_event(event, &mut resource_version), None);
    assert_eq!(resource_version, "7");
}

/// Advances paused time a period at a time until `done`, at most `periods` times.
async fn until(period: Duration, periods: usize, done: impl Fn() -> bool) -> bool {
    for _ in 0..periods {
        if done() {
            return true;
        }
        tokio::time::sleep(period).await;
    }
    done()
}

#[tokio::test(start_paused = true)]
async fn after_a_compaction_the_watch_fails_forever_and_only_the_tick_heals() {
    let period = Duration::from_secs(10);
    let fake = Arc::new(Fake::default());
    let mut foo = controller("foo", 2);
    foo.metadata.resource_version = Some(ResourceVersion(5));
    // The first watch lists foo at revision 5 and is then cut; every later watch from 5
    // finds it compacted.
    fake.watches
        .lock()
        .unwrap()
        .push_back(vec![WatchEvent::Added(foo.clone())]);
    fake.controllers.lock().unwrap().push(foo.clone());
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager(&fake).run(period, stop.clone()));
    assert!(until(period, 3, || fake.pods.lock().unwrap().len() == 2).await);

    // Scaled while the watch is dead: no event comes; the tick, read between the failing
    // watches, lists the controller and heals it.
    fake.controllers.lock().unwrap()[0].spec.replicas = 4;
    assert!(until(period, 50, || fake.pods.lock().unwrap().len() == 4).await);
    // And the watch never recovers: it keeps failing from the same version.
    assert!(until(period, 10, || fake.watched_from.lock().unwrap().len() >= 5).await);
    stop.cancel();
    run.await.unwrap().unwrap();

    let watched_from = fake.watched_from.lock().unwrap().clone();
    assert!(
        watched_from.len() > 2,
        "the watch was retried: {watched_from:?}"
    );
    assert_eq!(watched_from[0], "");
    assert!(
        watched_from[1..].iter().all(|rv| rv == "5"),
        "every re-watch asks for the stale version: {watched_from:?}"
    );
}

/// Weakness 13: the tick is read only inside the watch loop, so while no watch can open
/// (no server answers) no periodic sync runs at all; each failed open pauses 5 s, then
/// `Forever` waits a period. Once a watch opens, the tick heals.
#[tokio::test(start_paused = true)]
async fn while_no_watch_can_open_nothing_syncs_and_each_attempt_pauses_5s() {
    let period = Duration::from_secs(10);
    let fake = Arc::new(Fake::default());
    *fake.unreachable.lock().unwrap() = usize::MAX;
    fake.controllers.lock().unwrap().push(controller("foo", 2));
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager(&fake).run(period, stop.clone()));
    // 20 periods: 200 s of attempts, each 5 s of pause and a period of `Forever`.
    tokio::time::sleep(20 * period).await;
    assert!(fake.creates.lock().unwrap().is_empty(), "no tick ran");
    let attempts = fake.watched_from.lock().unwrap().len();
    let expected = (20 * period).as_secs() / (WATCH_FAILURE_PAUSE + period).as_secs();
    assert!(
        (expected..=expected + 1).contains(&(attempts as u64)),
        "{attempts} attempts in 200 s, {expected} expected"
    );
    // The server answers again: the next watch opens (and fails at once, here) and the
    // tick, read between the watches, heals.
    *fake.unreachable.lock().unwrap() = 0;
    assert!(until(period, 20, || fake.pods.lock().unwrap().len() == 2).await);
    stop.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_panic_in_the_loop_is_recovered_and_the_loop_restarts_after_the_period() {
    let period = Duration::from_secs(10);
    let fake = Arc::new(Fake::default());
    *fake.panic_once.lock().unwrap() = true;
    fake.watches
        .lock()
        .unwrap()
        .push_back(vec![WatchEvent::Added(controller("foo", 1))]);
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager(&fake).run(period, stop.clone()));
    assert!(until(period, 3, || fake.creates.lock().unwrap().len() == 1).await);
    stop.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(fake.watched_from.lock().unwrap()[0], "");
}

#[test]
fn a_new_replica_goes_to_the_scheduler_whatever_host_the_template_names() {
    // 2014's createReplica posted the template's manifest, which had no host.
    let mut pinned = controller("foo", 1);
    pinned.spec.template.as_mut().unwrap().spec.host = "node-1".into();
    let pod = new_replica("ns", &pinned, "p".into()).unwrap();
    assert_eq!(pod.spec.host, "");
}

#[test]
fn a_delete_without_its_last_state_is_no_event_and_keeps_the_resource_version() {
    // What the watch delivers for a delete etcd sent without the previous value: the name
    // only. 2014's watcher emitted nothing for a delete without PrevNode; synced, its empty
    // selector would count (and delete) every pod of the namespace.
    let mut skeleton = ReplicationController::default();
    skeleton.metadata.namespace = "ns".into();
    skeleton.metadata.name = "foo".into();
    skeleton.metadata.resource_version = Some(ResourceVersion(12));
    let mut resource_version = "7".to_string();
    assert_eq!(
        handle_event(WatchEvent::Deleted(skeleton), &mut resource_version),
        None
    );
    assert_eq!(resource_version, "7");
}

#[test]
fn one_undecodable_value_fails_the_whole_list_as_in_2014() {
    let list = |errors| crate::registry::ObjectList {
        items: vec![pod("a", "foo", PodPhase::Running)],
        resource_version: ResourceVersion(3),
        errors,
    };
    assert_eq!(super::whole_list(list(Vec::new())).unwrap().len(), 1);
    let bad = crate::registry::DecodeError {
        kind: "Pod",
        key: "/registry/pods/ns/bad".into(),
        revision: 3,
        message: "expected value".into(),
    };
    let error = super::whole_list(list(vec![bad])).unwrap_err();
    assert!(
        error.to_string().contains("/registry/pods/ns/bad"),
        "{error}"
    );
}
