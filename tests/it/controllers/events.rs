//! Events (issue 23): the controllers, the scheduler and the kubelets record what they do
//! as core/v1 Events, `kubectl describe` shows them and `kubectl get events -w` follows
//! them, each is stored on an etcd lease of an hour, and a 10,000-pod scale-up writes a
//! bounded number of them (client-go's correlator: similar events combined, a burst of 25
//! per source and object). Counted from etcd's own history.

use std::time::Duration;

use serde_json::Value;

use crate::support::etcd::start_etcd;
use crate::support::history;
use crate::support::kcm::{run_kcm, start_manager};
use crate::support::kubectl::start_up;
use crate::support::{eventually, with_timeout};

const LIMIT: Duration = Duration::from_secs(150);
const CONVERGE: Duration = Duration::from_secs(40);

/// `kubectl describe` of a Deployment, its ReplicaSet and a pod shows the events of the
/// Deployment controller, the ReplicaSet controller, the scheduler and the kubelet;
/// `kubectl get events -w` prints a scale-down's events as they are written; every stored
/// event is on a lease of an hour and a minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_describe_and_get_events_show_what_the_loop_did() {
    with_timeout(LIMIT, async {
        let Some(api) = start_up(2).await else {
            return;
        };
        let kubectl = &api.kubectl;
        kubectl
            .ok(&[
                "create",
                "deployment",
                "web",
                "--image",
                "nginx",
                "--replicas",
                "3",
            ])
            .await;
        kubectl
            .ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
            .await;

        let describe = |args: &'static [&'static str]| async move {
            let out = kubectl.run(args).await;
            out.stdout
        };
        eventually(
            CONVERGE,
            "the Deployment's ScalingReplicaSet event",
            || async {
                let out = describe(&["describe", "deployment", "web"]).await;
                out.contains("ScalingReplicaSet")
                    && out.contains("deployment-controller")
                    && out.contains("Scaled up replica set web-")
                    && out.contains("from 0 to 3")
            },
        )
        .await;
        eventually(
            CONVERGE,
            "the ReplicaSet's three SuccessfulCreate events",
            || async {
                let out = describe(&["describe", "replicaset", "-l", "app=web"]).await;
                out.matches("SuccessfulCreate").count() == 3
                    && out.contains("replicaset-controller")
                    && out.contains("Created pod: web-")
            },
        )
        .await;
        eventually(CONVERGE, "a pod's Scheduled and Started events", || async {
            let out = describe(&["describe", "pods", "-l", "app=web"]).await;
            out.matches("Scheduled").count() >= 3
                && out.contains("default-scheduler")
                && out.contains("Successfully assigned default/web-")
                && out.matches("Started container nginx").count() == 3
                && out.contains("kubelet")
        })
        .await;

        // kcm's own describe lists them too.
        eventually(CONVERGE, "kcm describe's Events section", || async {
            let out = api.kcm(&["describe", "deployment", "web"]).await;
            out.contains("Events:")
                && out.contains("ScalingReplicaSet")
                && out.contains("deployment-controller")
        })
        .await;

        // `get events -w` lists, then follows the scale-down's events.
        let mut watch = kubectl.watch(&["get", "events", "-w"]);
        watch
            .wait_for(CONVERGE, "the listed events", |lines| {
                lines.iter().any(|l| l.contains("Scaled up replica set"))
            })
            .await;
        let mark = watch.mark();
        kubectl
            .ok(&["scale", "deployment", "web", "--replicas", "1"])
            .await;
        watch
            .wait_for(CONVERGE, "the scale-down's events", |lines| {
                let new = &lines[mark.min(lines.len())..];
                new.iter()
                    .any(|l| l.contains("ScalingReplicaSet") && l.contains("from 3 to 1"))
                    && new
                        .iter()
                        .filter(|l| {
                            l.contains("SuccessfulDelete") && l.contains("Deleted pod: web-")
                        })
                        .count()
                        == 2
            })
            .await;
        watch.stop().await;

        // Each stored event is on a lease granted for an hour and a minute.
        let mut client = api.etcd.client().await;
        let stored = client
            .get(
                "/registry/events/",
                Some(etcd_client::GetOptions::new().with_prefix()),
            )
            .await
            .expect("read the events");
        assert!(stored.kvs().len() >= 10, "{} events", stored.kvs().len());
        for kv in stored.kvs() {
            let key = kv.key_str().expect("a key");
            assert_ne!(kv.lease(), 0, "{key} is on no lease");
            let ttl = client
                .lease_time_to_live(kv.lease(), None)
                .await
                .expect("the lease's TTL");
            assert_eq!(ttl.granted_ttl(), 3660, "{key}");
            assert!(
                (3500..=3660).contains(&ttl.ttl()),
                "{key}: {} s left",
                ttl.ttl()
            );
            let event: Value = serde_json::from_slice(kv.value()).expect("an event's JSON");
            assert_eq!(event["kind"], "Event", "{key}");
            assert!(event["count"].as_i64().is_some_and(|c| c >= 1), "{key}");
        }
    })
    .await;
}

/// A 10,000-replica Deployment scaled up from nothing: the ReplicaSet controller records
/// 10,000 `SuccessfulCreate`s, and etcd's history shows at most 26 event writes (the
/// Deployment's `ScalingReplicaSet` and the ReplicaSet's burst of 25): nine events, then
/// one combined event whose count goes up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10000_replica_scale_up_writes_a_bounded_number_of_events() {
    with_timeout(Duration::from_secs(300), async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let manager = start_manager(
            &etcd.endpoint(),
            &["--controllers", "replicaset,deployment"],
        )
        .await;
        let start = client
            .clone()
            .get("/", None)
            .await
            .expect("etcd's revision")
            .header()
            .expect("a header")
            .revision();
        let url = etcd.endpoint();
        let out = run_kcm(
            &[
                "--etcd-servers",
                &url,
                "create",
                "deployment",
                "big",
                "--image",
                "nginx",
                "--replicas",
                "10000",
            ],
            &[],
        )
        .await;
        assert!(out.status.success(), "{out:?}");
        eventually(Duration::from_secs(240), "10,000 pods", || {
            let mut client = client.clone();
            async move {
                let options = etcd_client::GetOptions::new()
                    .with_prefix()
                    .with_count_only();
                client
                    .get("/registry/pods/default/", Some(options))
                    .await
                    .is_ok_and(|r| r.count() == 10_000)
            }
        })
        .await;
        // Every recorded event has been written, skipped or combined.
        eventually(CONVERGE, "the event queue drained", || async {
            let m = manager.metrics().await;
            let value = |result: &str| {
                crate::support::kcm::metric_value(
                    &m,
                    &format!("kcm_events_total{{result=\"{result}\"}}"),
                )
            };
            let recorded = value("recorded");
            recorded >= 10_001.0
                && value("written") + value("skipped") + value("combined") + value("failed")
                    == recorded
        })
        .await;
        let m = manager.metrics().await;
        assert_eq!(
            crate::support::kcm::metric_value(&m, "kcm_events_total{result=\"dropped\"}"),
            0.0,
            "no event was dropped"
        );

        let history = history::read(
            &client,
            "/registry/events/",
            "/registry/events0",
            start,
            "/registry/events/~sentinel",
        )
        .await;
        let writes: Vec<Value> = history
            .iter()
            .filter(|e| e.put)
            .map(|e| serde_json::from_slice(&e.value).expect("an event's JSON"))
            .collect();
        let of = |kind: &str| {
            writes
                .iter()
                .filter(|e| e["involvedObject"]["kind"] == kind)
                .count()
        };
        assert_eq!(of("Deployment"), 1, "one ScalingReplicaSet: {writes:#?}");
        let of_rs = of("ReplicaSet");
        // Updates of the combined event queued together are written once (the last), so
        // fewer than the 25 the spam filter lets through may reach etcd.
        assert!(
            (10..=25).contains(&of_rs),
            "nine events and the combined one, at most the burst of 25: {of_rs}"
        );
        assert_eq!(writes.len(), 1 + of_rs);
        let combined: Vec<&Value> = writes
            .iter()
            .filter(|e| {
                e["message"].as_str().is_some_and(|m| {
                    m.starts_with("(combined from similar events): Created pod: big-")
                })
            })
            .collect();
        assert_eq!(
            combined.len(),
            of_rs - 9,
            "nine single events, then the combined one"
        );
        let names: std::collections::BTreeSet<&str> = combined
            .iter()
            .filter_map(|e| e["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names.len(), 1, "the combined event is one event: {names:?}");
        // Its count goes up with each write, to the 16th occurrence the filter let
        // through (25 tokens less the nine single events).
        let counts: Vec<i64> = combined
            .iter()
            .filter_map(|e| e["count"].as_i64())
            .collect();
        assert!(counts.windows(2).all(|w| w[0] < w[1]), "{counts:?}");
        assert_eq!(counts.last(), Some(&16), "{counts:?}");
    })
    .await;
}

/// 2,500 events about as many objects (none combined or held back): each stored on a lease,
/// and no lease given more than 1,000 of them. etcd 3.4 walks every key of a lease on each
/// put to it, so events on one lease without a bound cost etcd time in proportion to the
/// events before them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_share_a_lease_a_thousand_at_most() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let (events, writer) = kcm::record::EventBroadcaster::start(
            &client,
            "/registry",
            kcm::record::Counts::default(),
        );
        let recorder = events.recorder("bench", None);
        const EVENTS: usize = 2_500;
        for i in 0..EVENTS {
            // Paced below the queue's length, so that none is dropped.
            if i % 500 == 499 {
                eventually(CONVERGE, "the queue to drain", || async {
                    let stored = client
                        .clone()
                        .get(
                            "/registry/events/",
                            Some(
                                etcd_client::GetOptions::new()
                                    .with_prefix()
                                    .with_count_only(),
                            ),
                        )
                        .await
                        .expect("count events");
                    stored.count() as usize > i - 100
                })
                .await;
            }
            recorder.normal(
                kcm::record::Reference::node(&format!("node-{i:04}"), &format!("uid-{i}")),
                "Registered",
                format!("node-{i:04} registered"),
            );
        }
        drop(recorder);
        events.flush(writer, Duration::from_secs(30)).await;

        let stored = client
            .clone()
            .get(
                "/registry/events/",
                Some(etcd_client::GetOptions::new().with_prefix()),
            )
            .await
            .expect("read the events");
        assert_eq!(stored.kvs().len(), EVENTS, "every event was written");
        let mut per_lease = std::collections::BTreeMap::<i64, usize>::new();
        for kv in stored.kvs() {
            assert_ne!(kv.lease(), 0, "{:?} is on no lease", kv.key_str());
            *per_lease.entry(kv.lease()).or_default() += 1;
        }
        assert!(
            per_lease.values().all(|&n| n <= 1_000),
            "events per lease: {per_lease:?}"
        );
        assert!(per_lease.len() >= 3, "events per lease: {per_lease:?}");
        // etcd's own count of each lease's keys agrees.
        for &lease in per_lease.keys() {
            let keys = client
                .clone()
                .lease_time_to_live(
                    lease,
                    Some(etcd_client::LeaseTimeToLiveOptions::new().with_keys()),
                )
                .await
                .expect("the lease's keys")
                .keys()
                .len();
            assert!(keys <= 1_000, "lease {lease} holds {keys} keys");
        }
    })
    .await;
}
