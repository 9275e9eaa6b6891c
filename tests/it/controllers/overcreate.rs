//! Over-creation, checked against etcd's own history: two `kcm controller-manager` processes
//! without `--leader-elect` scaling fresh controllers up to thousands of replicas, the same
//! under a third writer resizing every 200 ms, and a controller deleted (and re-created under
//! its name) in the middle of a large scale-up.
//!
//! Every claim is checked at every revision of etcd's history (`support::objects::replay`),
//! not by polling, so a peak that lasted one revision is seen.

use std::collections::HashMap;
use std::time::Duration;

use etcd_client::{Client, GetOptions};
use serde_json::json;

use crate::support::kcm::{start_manager, Kcm};
use crate::support::objects::{
    controller_json, controller_key, current_revision, put, put_controller, replay, scale,
    wait_converged_within, PodInfo,
};
use crate::support::{eventually, start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(240);
/// How long thousands of pods may take to converge on a shared 2-core machine.
const CONVERGE: Duration = Duration::from_secs(150);

/// Two unelected managers on `endpoint`, each started with `args`.
async fn two_managers(endpoint: &str, args: &[&str]) -> (Kcm, Kcm) {
    tokio::join!(start_manager(endpoint, args), start_manager(endpoint, args))
}

/// One revision of one controller's history: its active pods and its `spec.replicas`.
#[derive(Debug, Clone, Copy)]
struct Sample {
    revision: i64,
    active: usize,
    /// `None` while the controller does not exist.
    desired: Option<i64>,
}

/// Each controller's samples (by name; it selects `app={app}`), at `start` and at every later
/// revision that touched the namespace, from etcd's history.
async fn timelines(
    client: &Client,
    namespace: &str,
    start: i64,
    controllers: &[(String, String)],
) -> HashMap<String, Vec<Sample>> {
    let mut timelines: HashMap<String, Vec<Sample>> = HashMap::new();
    replay(client, namespace, start, |revision, _, state| {
        for (name, app) in controllers {
            timelines.entry(name.clone()).or_default().push(Sample {
                revision,
                active: state.active(app),
                desired: state.replicas(name),
            });
        }
    })
    .await;
    timelines
}

/// The most active pods at any revision: (count, revision).
fn peak(samples: &[Sample]) -> (usize, i64) {
    samples
        .iter()
        .map(|s| (s.active, s.revision))
        .max_by_key(|(active, _)| *active)
        .unwrap_or_default()
}

/// The first revision at which the active pods outnumber the largest `spec.replicas` written
/// up to it (0 before the controller exists): (revision, active, that largest value).
fn first_above_the_largest_desired(samples: &[Sample]) -> Option<(i64, usize, i64)> {
    let mut largest = 0;
    samples.iter().find_map(|s| {
        largest = largest.max(s.desired.unwrap_or(0));
        (s.active as i64 > largest).then_some((s.revision, s.active, largest))
    })
}

/// The first revision, after the active pods first reached the smallest `spec.replicas` ever
/// written, at which they are fewer again: (revision, active, that smallest value).
fn first_below_the_smallest_desired_once_reached(samples: &[Sample]) -> Option<(i64, usize, i64)> {
    let smallest = samples.iter().filter_map(|s| s.desired).min()?;
    let reached = samples.iter().position(|s| s.active as i64 >= smallest)?;
    samples[reached..]
        .iter()
        .find(|s| (s.active as i64) < smallest)
        .map(|s| (s.revision, s.active, smallest))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_unelected_managers_never_exceed_any_controllers_count_in_etcds_history() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        const REPLICAS: i64 = 3000;
        let client = etcd.client().await;
        // Bursts of 100, not 500: five times the syncs per scale-up, so five times the
        // chances for the two managers' views to interleave.
        let _managers = two_managers(&etcd.endpoint(), &["--burst-replicas", "100"]).await;
        let controllers: Vec<(String, String)> = (0..4)
            .map(|i| (format!("web{i}"), format!("app{i}")))
            .collect();

        let start = current_revision(&client).await;
        for (name, app) in &controllers {
            put_controller(&client, "many", name, app, REPLICAS).await;
        }
        for (name, app) in &controllers {
            wait_converged_within(CONVERGE, &client, "many", name, app, REPLICAS).await;
        }

        let timelines = timelines(&client, "many", start, &controllers).await;
        let peaks: Vec<_> = controllers
            .iter()
            .map(|(name, _)| (name, peak(&timelines[name])))
            .collect();
        eprintln!("peaks (active pods, at revision): {peaks:?}");
        for (name, _) in &controllers {
            let samples = &timelines[name];
            assert_eq!(
                first_above_the_largest_desired(samples),
                None,
                "{name}: (revision, active, desired) where etcd held more active pods than \
                 desired; peaks {peaks:?}"
            );
            assert_eq!(samples.last().unwrap().active, REPLICAS as usize);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resizing_every_200ms_keeps_the_count_between_the_smallest_and_largest_desired() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        const SIZES: [i64; 2] = [3000, 2000];
        const RESIZES: usize = 40;
        let client = etcd.client().await;
        let _managers = two_managers(&etcd.endpoint(), &[]).await;
        // Two controllers flapping in opposite phase: twice the chances, one writer.
        let controllers: Vec<(String, String)> = (0..2)
            .map(|i| (format!("web{i}"), format!("app{i}")))
            .collect();
        let size = |controller: usize, step: usize| SIZES[(controller + step) % 2];

        let start = current_revision(&client).await;
        for (i, (name, app)) in controllers.iter().enumerate() {
            put_controller(&client, "flap", name, app, size(i, 0)).await;
        }
        // The third writer, while the managers scale up (and down, and up).
        let mut every = tokio::time::interval(Duration::from_millis(200));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.tick().await;
        for step in 1..=RESIZES {
            every.tick().await;
            for (i, (name, _)) in controllers.iter().enumerate() {
                scale(&client, "flap", name, size(i, step)).await;
            }
        }
        for (i, (name, app)) in controllers.iter().enumerate() {
            let last = size(i, RESIZES);
            wait_converged_within(CONVERGE, &client, "flap", name, app, last).await;
        }

        // Exactly what is guaranteed (docs/invariants.md): never more active pods
        // than the largest spec.replicas written up to that revision (a view taken just
        // before a resize to 2000 may still create up to 3000 after it), and, as no pod
        // changes rank here (no kubelet), never fewer than 2000 once 2000 were reached.
        let timelines = timelines(&client, "flap", start, &controllers).await;
        let peaks: Vec<_> = controllers
            .iter()
            .map(|(name, _)| (name, peak(&timelines[name])))
            .collect();
        eprintln!("peaks (active pods, at revision): {peaks:?}");
        for (i, (name, _)) in controllers.iter().enumerate() {
            let samples = &timelines[name];
            assert_eq!(
                first_above_the_largest_desired(samples),
                None,
                "{name}: (revision, active, largest desired so far) above the bound; \
                 peaks {peaks:?}"
            );
            assert_eq!(
                first_below_the_smallest_desired_once_reached(samples),
                None,
                "{name}: (revision, active, smallest desired) below the bound once reached"
            );
            assert_eq!(samples.last().unwrap().active as i64, size(i, RESIZES));
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_deleted_during_a_large_scale_up_gets_no_pod_after_its_delete() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        const REPLICAS: i64 = 2000;
        let client = etcd.client().await;
        let _managers = two_managers(&etcd.endpoint(), &[]).await;

        let start = current_revision(&client).await;
        put_controller(&client, "gone", "web", "web", REPLICAS).await;
        eventually(CONVERGE, "the scale-up to begin", || {
            let client = client.clone();
            async move { pod_count(&client, "gone").await > 0 }
        })
        .await;
        let deleted_at = client
            .clone()
            .delete(controller_key("gone", "web"), None)
            .await
            .expect("delete the controller")
            .header()
            .expect("header")
            .revision();
        // At once a namesake with the same selector and a new uid: it counts whatever pods
        // match, so any pod of the old incarnation created now would be taken for its own.
        let mut again = controller_json(
            "gone",
            "web",
            REPLICAS,
            json!({"app": "web"}),
            json!({"app": "web"}),
        );
        again["metadata"]["uid"] = json!("uid-gone-web-again");
        put(&client, &controller_key("gone", "web"), again.to_string()).await;
        wait_converged_within(CONVERGE, &client, "gone", "web", "web", REPLICAS).await;

        let (mut before, mut after, mut namesake) = (0, Vec::new(), 0);
        replay(&client, "gone", start, |revision, events, _| {
            for event in events {
                let created = event.put && event.create_revision == event.revision;
                if !created || !event.key.starts_with("/registry/pods/") {
                    continue;
                }
                let pod = PodInfo::parse(event.key.clone(), &event.value, revision);
                if pod.created_by.contains("uid-gone-web-again") {
                    namesake += 1;
                } else if revision < deleted_at {
                    before += 1;
                } else {
                    after.push((revision, pod.name));
                }
            }
        })
        .await;
        eprintln!(
            "{before} pods created before the delete at revision {deleted_at}, {} after, \
             {namesake} by the namesake",
            after.len()
        );
        assert!(before > 0, "the delete landed during the scale-up");
        assert!(
            after.is_empty(),
            "{} pods of the deleted incarnation created after its delete at revision \
             {deleted_at}; the first: {:?}",
            after.len(),
            after.first()
        );
        assert!(namesake > 0, "the namesake created its own pods");
    })
    .await;
}

/// How many keys `namespace`'s pod directory holds.
async fn pod_count(client: &Client, namespace: &str) -> i64 {
    let options = GetOptions::new().with_prefix().with_count_only();
    client
        .clone()
        .get(format!("/registry/pods/{namespace}/"), Some(options))
        .await
        .expect("count pods")
        .count()
}
