//! The 2014 loop held to 2014's own tests (`pkg/controller/replication_controller_test.go`,
//! October 2014: `TestSyncReplicationController{DoesNothing,Deletes,Creates}`,
//! `TestCreateReplica`, `TestSynchonize`) and to behaviours 24-41 of docs/2014.md,
//! with a recording fake of the
//! client and of `PodControl`, as 2014's `FakePodControl`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::StreamExt;
use tokio::time::Instant;

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
    /// This many watches fail to open (`Err`, as 2014's `Watch()` did with the apiserver
    /// down) before any is opened.
    failing_opens: Mutex<usize>,
    /// Watches stay open after their events (none closes by itself).
    keep_open: Mutex<bool>,
    /// Each watch event is delivered this long after the previous one.
    event_delay: Mutex<Duration>,
    /// When each watch was asked for (opened, failed or panicked).
    watch_asked_at: Mutex<Vec<Instant>>,
    /// `(selector, when)` of every pod list.
    pod_lists: Mutex<Vec<(String, Instant)>>,
    /// Pod lists by these selectors take this long.
    slow_lists: Mutex<HashMap<String, Duration>>,
    /// Pod lists by these selectors fail.
    failing_lists: Mutex<HashSet<String>>,
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
        let selector = selector.to_string();
        let delay = self.slow_lists.lock().unwrap().get(&selector).copied();
        let fails = self.failing_lists.lock().unwrap().contains(&selector);
        self.pod_lists
            .lock()
            .unwrap()
            .push((selector.clone(), Instant::now()));
        Box::pin(async move {
            if let Some(delay) = delay {
                tokio::time::sleep(delay).await;
            }
            if fails {
                anyhow::bail!("list pods {selector}: the apiserver is unavailable");
            }
            Ok(pods)
        })
    }

    fn watch_controllers(
        &self,
        resource_version: &str,
    ) -> BoxFuture<'static, anyhow::Result<BoxStream<'static, WatchEvent<ReplicationController>>>>
    {
        self.watch_asked_at.lock().unwrap().push(Instant::now());
        if std::mem::take(&mut *self.panic_once.lock().unwrap()) {
            panic!("a bug in the watch loop");
        }
        {
            let mut failing = self.failing_opens.lock().unwrap();
            if *failing > 0 {
                *failing -= 1;
                return Box::pin(async { anyhow::bail!("connection refused") });
            }
        }
        self.watched_from
            .lock()
            .unwrap()
            .push(resource_version.to_string());
        let events = self.watches.lock().unwrap().pop_front().unwrap_or_else(|| {
            vec![WatchEvent::Error(Status::gone(
                "required revision has been compacted",
            ))]
        });
        let delay = *self.event_delay.lock().unwrap();
        let events = futures::stream::iter(events).then(move |event| async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            event
        });
        let events = if *self.keep_open.lock().unwrap() {
            events.chain(futures::stream::pending()).boxed()
        } else {
            events.boxed()
        };
        Box::pin(async move { Ok(events) })
    }
}

impl Fake {
    /// The controller of every create so far, sorted (the creates of a sync run as
    /// concurrent tasks: which finished first is not the question).
    fn created_for(&self) -> Vec<String> {
        let mut creates: Vec<String> = self
            .creates
            .lock()
            .unwrap()
            .iter()
            .map(|c| c.1.clone())
            .collect();
        creates.sort();
        creates
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
    assert_eq!(
        fake.created_for(),
        ["bar", "bar", "bar", "foo", "foo", "foo", "foo"]
    );
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
    *fake.failing_opens.lock().unwrap() = usize::MAX;
    fake.controllers.lock().unwrap().push(controller("foo", 2));
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager(&fake).run(period, stop.clone()));
    // 20 periods: 200 s of attempts, each 5 s of pause and a period of `Forever`.
    tokio::time::sleep(20 * period).await;
    assert!(fake.creates.lock().unwrap().is_empty(), "no tick ran");
    let attempts = fake.watch_asked_at.lock().unwrap().len();
    let expected = (20 * period).as_secs() / (WATCH_FAILURE_PAUSE + period).as_secs();
    assert!(
        (expected..=expected + 1).contains(&(attempts as u64)),
        "{attempts} attempts in 200 s, {expected} expected"
    );
    // The server answers again: the next watch opens (and fails at once, here) and the
    // tick, read between the watches, heals.
    *fake.failing_opens.lock().unwrap() = 0;
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
    // `util.Forever` called the loop again one period after the panic, not at once.
    let asked_at = fake.watch_asked_at.lock().unwrap().clone();
    assert!(asked_at.len() >= 2, "{asked_at:?}");
    assert_eq!(asked_at[1] - asked_at[0], period);
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

#[tokio::test(start_paused = true)]
async fn a_first_watch_syncs_every_existing_controller_once() {
    // Behaviour 24: the watch from "" delivers the existing controllers as its initial
    // state, and each of them is synced once, before any tick.
    let period = Duration::from_secs(10);
    let fake = Arc::new(Fake::default());
    let (mut foo, mut bar) = (controller("foo", 2), controller("bar", 1));
    foo.metadata.resource_version = Some(ResourceVersion(3));
    bar.metadata.resource_version = Some(ResourceVersion(4));
    *fake.controllers.lock().unwrap() = vec![foo.clone(), bar.clone()];
    *fake.keep_open.lock().unwrap() = true;
    fake.watches
        .lock()
        .unwrap()
        .push_back(vec![WatchEvent::Added(foo), WatchEvent::Added(bar)]);
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager(&fake).run(period, stop.clone()));
    // Half a period: the first tick has not come yet.
    tokio::time::sleep(period / 2).await;
    let lists: Vec<String> = fake
        .pod_lists
        .lock()
        .unwrap()
        .iter()
        .map(|(selector, _)| selector.clone())
        .collect();
    assert_eq!(lists, ["name=foo", "name=bar"], "one sync each, in order");
    assert_eq!(fake.creates.lock().unwrap().len(), 3);
    assert_eq!(*fake.watched_from.lock().unwrap(), [""]);
    stop.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_closed_watch_is_reopened_a_period_later_and_a_failed_open_5_s_more() {
    // Behaviour 29: `watchControllers` returns when its watch closes, and `util.Forever`
    // calls it again one period later; when the watch cannot be opened it sleeps 5 s
    // first.
    let period = Duration::from_secs(10);
    let fake = Arc::new(Fake::default());
    *fake.failing_opens.lock().unwrap() = 1;
    let start = Instant::now();
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager(&fake).run(period, stop.clone()));
    // Every watch that opens ends at once (one 410 ERROR, then closed).
    assert!(
        until(period, 10, || fake.watch_asked_at.lock().unwrap().len()
            >= 4)
        .await
    );
    stop.cancel();
    run.await.unwrap().unwrap();
    let asked_at: Vec<Duration> = fake
        .watch_asked_at
        .lock()
        .unwrap()
        .iter()
        .map(|at| *at - start)
        .collect();
    let seconds = Duration::from_secs;
    assert_eq!(
        asked_at[..4],
        [seconds(0), seconds(15), seconds(25), seconds(35)],
        "a failed open: 5 s + a period; a closed watch: a period"
    );
}

#[tokio::test(start_paused = true)]
async fn a_resync_syncs_every_controller_at_once_and_watch_events_wait_for_it() {
    // Behaviour 30 (weakness 7): the tick lists every controller and syncs them all in
    // parallel, inside the watch loop: an event that arrives meanwhile is handled only
    // when the slowest sync of the resync is done.
    let period = Duration::from_secs(10);
    let slow_list = Duration::from_secs(25);
    let fake = Arc::new(Fake::default());
    *fake.controllers.lock().unwrap() = vec![controller("slow-a", 1), controller("slow-b", 1)];
    for name in ["name=slow-a", "name=slow-b"] {
        fake.slow_lists
            .lock()
            .unwrap()
            .insert(name.to_string(), slow_list);
    }
    // The event for `fast` arrives 12 s in, while the first resync (at 10 s) runs.
    *fake.keep_open.lock().unwrap() = true;
    *fake.event_delay.lock().unwrap() = Duration::from_secs(12);
    fake.watches
        .lock()
        .unwrap()
        .push_back(vec![WatchEvent::Added(controller("fast", 1))]);
    let start = Instant::now();
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager(&fake).run(period, stop.clone()));
    let listed_fast = || {
        fake.pod_lists
            .lock()
            .unwrap()
            .iter()
            .any(|(selector, _)| selector == "name=fast")
    };
    assert!(until(period, 30, listed_fast).await);
    stop.cancel();
    run.await.unwrap().unwrap();
    let lists = fake.pod_lists.lock().unwrap().clone();
    let first = |name: &str| {
        lists
            .iter()
            .find(|(selector, _)| selector == name)
            .map(|(_, at)| *at - start)
            .unwrap()
    };
    // Both syncs of the resync started together, at the tick.
    assert_eq!(first("name=slow-a"), period);
    assert_eq!(first("name=slow-b"), period);
    // The event, ready at 12 s, waited for the whole resync.
    assert!(
        first("name=fast") >= period + slow_list,
        "the event's sync started at {:?}",
        first("name=fast")
    );
}

/// A `PodControl` whose every create and delete takes a second (paused time) and
/// changes nothing in the fake, as a failing write would not; it counts what it was asked
/// and how many writes were in flight at once. Its deletes fail when `fail_deletes`.
#[derive(Default)]
struct SlowPodControl {
    fail_deletes: bool,
    creates: AtomicUsize,
    deletes: AtomicUsize,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
    finished: AtomicUsize,
}

impl SlowPodControl {
    fn write(self: &Arc<Self>, fails: bool) -> BoxFuture<'static, anyhow::Result<()>> {
        let control = self.clone();
        Box::pin(async move {
            let now = control.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            control.peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(1)).await;
            control.in_flight.fetch_sub(1, Ordering::SeqCst);
            control.finished.fetch_add(1, Ordering::SeqCst);
            if fails {
                anyhow::bail!("the apiserver refused the delete");
            }
            Ok(())
        })
    }
}

struct SlowPods(Arc<SlowPodControl>);

impl PodControl for SlowPods {
    fn create_replica(&self, _: &str, _: &ReplicationController) -> BoxFuture<'static, ()> {
        self.0.creates.fetch_add(1, Ordering::SeqCst);
        let write = self.0.write(false);
        Box::pin(async move {
            let _ = write.await;
        })
    }

    fn delete_pod(&self, _: &str, _: &str) -> BoxFuture<'static, anyhow::Result<()>> {
        self.0.deletes.fetch_add(1, Ordering::SeqCst);
        self.0.write(self.0.fail_deletes)
    }
}

fn slow_manager(fake: &Arc<Fake>, control: &Arc<SlowPodControl>) -> ReplicationManager {
    ReplicationManager::with_parts(fake.clone(), Arc::new(SlowPods(control.clone())))
}

/// Syncs `foo` with `replicas` through `control` and checks that its writes ran all at
/// once (`peak` in flight, one second in all) and had all finished (`finished` so far)
/// when the sync returned.
async fn check_all_at_once(
    fake: &Arc<Fake>,
    control: &Arc<SlowPodControl>,
    replicas: i64,
    peak: usize,
    finished: usize,
) {
    let started = Instant::now();
    slow_manager(fake, control)
        .sync_replication_controller(controller("foo", replicas))
        .await
        .unwrap();
    assert_eq!(control.peak.load(Ordering::SeqCst), peak, "writes at once");
    assert_eq!(
        control.finished.load(Ordering::SeqCst),
        finished,
        "all finished"
    );
    assert_eq!(started.elapsed(), Duration::from_secs(1), "in parallel");
}

#[tokio::test(start_paused = true)]
async fn every_create_and_every_delete_of_a_sync_runs_at_once_and_the_sync_waits_for_all() {
    // Behaviour 39 (weakness 3): one task per missing or surplus pod, no cap, and the sync
    // returns when every one of them has finished.
    let fake = Arc::new(Fake::default());
    let control = Arc::new(SlowPodControl::default());
    check_all_at_once(&fake, &control, 5, 5, 5).await;
    *fake.pods.lock().unwrap() = (0..6)
        .map(|i| pod(&format!("p{i}"), "foo", PodPhase::Running))
        .collect();
    check_all_at_once(&fake, &control, 0, 6, 11).await;
}

#[tokio::test(start_paused = true)]
async fn write_errors_are_only_logged_and_the_next_resync_tries_again() {
    // Behaviour 38 (weakness 8): a failed delete is discarded (the sync succeeds), a
    // failed create is not even seen; nothing retries until the next tick, which asks for
    // the same writes again, with no backoff.
    let fake = Arc::new(Fake::default());
    *fake.controllers.lock().unwrap() = vec![controller("foo", 1), controller("bar", 2)];
    *fake.pods.lock().unwrap() = (0..3)
        .map(|i| pod(&format!("p{i}"), "foo", PodPhase::Running))
        .collect();
    let control = Arc::new(SlowPodControl {
        fail_deletes: true,
        ..SlowPodControl::default()
    });
    let manager = slow_manager(&fake, &control);
    manager
        .sync_replication_controller(controller("foo", 1))
        .await
        .expect("delete errors are discarded");
    assert_eq!(control.deletes.load(Ordering::SeqCst), 2);
    manager.synchronize().await;
    manager.synchronize().await;
    assert_eq!(control.deletes.load(Ordering::SeqCst), 6, "2 more per tick");
    assert_eq!(control.creates.load(Ordering::SeqCst), 4, "2 per tick");
}

#[tokio::test]
async fn a_pod_list_error_ends_that_controllers_sync_and_the_resync_goes_on() {
    // Behaviour 38: the sync returns the list's error and writes nothing; the other
    // controllers of the resync are synced.
    let fake = Arc::new(Fake::default());
    *fake.controllers.lock().unwrap() = vec![controller("foo", 2), controller("bar", 2)];
    fake.failing_lists
        .lock()
        .unwrap()
        .insert("name=foo".to_string());
    let error = manager(&fake)
        .sync_replication_controller(controller("foo", 2))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("unavailable"), "{error}");
    assert!(fake.creates.lock().unwrap().is_empty());
    manager(&fake).synchronize().await;
    assert_eq!(fake.created_for(), ["bar", "bar"]);
}
