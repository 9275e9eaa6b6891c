//! The etcd watcher against a real etcd: the 2014 translation rules driven by real puts and
//! deletes, the resourceVersion rules, stopping and dropping, and the resumable watch's
//! exactly-once delivery through network cuts, etcd crashes and compaction.
//!
//! Every scripted write goes through a direct client and records the revision etcd
//! acknowledged, so expectations name exact resourceVersions.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp, TxnOpResponse, TxnResponse};
use futures::StreamExt as _;
use kcm::api::Pod;
use kcm::etcd_watcher::{
    self, Filter, RawEvent, RawKind, ResumableWatch, Update, WatchEvent, WatchMetrics, WatchStream,
};
use kcm::registry::Registry;
use tokio::task::JoinSet;

use crate::support::objects::{current_revision, pod_json, pod_key, put, put_pod};
use crate::support::watcher::{delete, env, replay, summary, watcher_via, Env, SHORT_BACKOFF};
use crate::support::{eventually, with_timeout, FaultProxy};

/// Bound on a whole test.
const LIMIT: Duration = Duration::from_secs(120);
/// Bound on waiting for one expected event.
const EVENT_DEADLINE: Duration = Duration::from_secs(30);
/// The directory of pods under the default prefix: the watched key of an all-namespaces list.
const PODS_DIR: &str = "/registry/pods/";

// ---------------------------------------------------------------------------------------
// Helpers

/// Deletes pod `namespace/name`; returns the revision of the delete.
async fn delete_pod(client: &mut Client, namespace: &str, name: &str) -> i64 {
    let key = pod_key(namespace, name);
    let response = client
        .delete(key.as_str(), None)
        .await
        .unwrap_or_else(|e| panic!("delete {key}: {e}"));
    assert_eq!(response.deleted(), 1, "{key} existed");
    response.header().expect("header").revision()
}

/// Creates pods `{stem}-0..n` in namespace `ns`, eight at a time; returns the
/// acknowledged revisions, in order.
async fn put_many(client: &Client, stem: &str, n: usize) -> Vec<i64> {
    let mut revisions: Vec<i64> = futures::stream::iter(0..n)
        .map(|i| {
            let client = client.clone();
            let name = format!("{stem}-{i:04}");
            async move { put_pod(&client, "ns", &name, "x").await }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    revisions.sort_unstable();
    revisions
}

fn selector(text: &str) -> Filter<Pod> {
    etcd_watcher::selector_filter(text.parse().expect("valid selector"))
}

/// `TYPE namespace/name rv=N app=L`, or `ERROR code`: what the data-driven checks compare.
fn describe(event: &WatchEvent<Pod>) -> String {
    match event {
        WatchEvent::Error(status) => format!("ERROR {}", status.code),
        WatchEvent::Added(pod) | WatchEvent::Modified(pod) | WatchEvent::Deleted(pod) => {
            let meta = &pod.metadata;
            format!(
                "{} {}/{} rv={} app={}",
                event.type_name(),
                meta.namespace,
                meta.name,
                event
                    .revision()
                    .map_or("none".to_string(), |rv| rv.to_string()),
                meta.labels.get("app").unwrap_or("-")
            )
        }
    }
}

/// The next event of a one-shot stream, failing the test if it ends or takes too long.
async fn next_event(stream: &mut WatchStream<Pod>) -> WatchEvent<Pod> {
    match tokio::time::timeout(EVENT_DEADLINE, stream.next()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("the watch ended while an event was expected"),
        Err(_) => panic!("no watch event within {EVENT_DEADLINE:?}"),
    }
}

/// Reads `expected.len()` events and compares their descriptions.
async fn expect_events(stream: &mut WatchStream<Pod>, expected: &[String]) {
    let mut got = Vec::new();
    for _ in expected {
        got.push(describe(&next_event(stream).await));
    }
    assert_eq!(got, expected);
}

/// The next update of a resumable watch, failing the test if it takes too long.
async fn next_update(watch: &mut ResumableWatch<Pod>) -> Update<Pod> {
    tokio::time::timeout(EVENT_DEADLINE, watch.next())
        .await
        .unwrap_or_else(|_| panic!("no update from the resumable watch within {EVENT_DEADLINE:?}"))
}

/// The next update, which must be an event; returns its description.
async fn next_update_event(watch: &mut ResumableWatch<Pod>) -> String {
    match next_update(watch).await {
        Update::Event(event, _) => describe(&event),
        other => panic!("expected an event, got {other:?}"),
    }
}

/// Waits up to `limit` for `check`, without failing: for fault schedules that take
/// "whichever comes first".
async fn within(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while !check() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

// ---------------------------------------------------------------------------------------
// Translation rules, one per test, on real puts and deletes

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_of_a_new_key_is_added() {
    with_timeout(LIMIT, async {
        let Some(env) = env().await else { return };
        let start = current_revision(&env.client).await;
        let mut stream = env
            .watcher
            .watch_list::<Pod>(Some("ns"), &start.to_string(), etcd_watcher::everything())
            .unwrap();
        let rv = put_pod(&env.client, "ns", "a", "x").await;
        let (event, raw) = tokio::time::timeout(EVENT_DEADLINE, stream.next_with_raw())
            .await
            .expect("an event in time")
            .expect("the stream is open");
        assert_eq!(describe(&event), format!("ADDED ns/a rv={rv} app=x"));
        let raw = raw.expect("a watch event carries its etcd event");
        assert_eq!(raw.kind, RawKind::Put);
        assert_eq!(raw.key, pod_key("ns", "a"));
        assert_eq!((raw.create_revision, raw.mod_revision), (rv, rv));
        assert!(!raw.has_prev, "a create has no previous value");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_of_an_existing_key_is_modified() {
    with_timeout(LIMIT, async {
        let Some(env) = env().await else { return };
        let created = put_pod(&env.client, "ns", "a", "x").await;
        let mut stream = env
            .watcher
            .watch_list::<Pod>(Some("ns"), &created.to_string(), etcd_watcher::everything())
            .unwrap();
        let rv = put_pod(&env.client, "ns", "a", "y").await;
        let (event, raw) = tokio::time::timeout(EVENT_DEADLINE, stream.next_with_raw())
            .await
            .expect("an event in time")
            .expect("the stream is open");
        assert_eq!(describe(&event), format!("MODIFIED ns/a rv={rv} app=y"));
        let raw = raw.expect("a watch event carries its etcd event");
        assert_eq!((raw.create_revision, raw.mod_revision), (created, rv));
        assert!(raw.has_prev, "the watch asks etcd for previous values");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_change_into_the_selector_is_added() {
    with_timeout(LIMIT, async {
        let Some(env) = env().await else { return };
        let created = put_pod(&env.client, "ns", "a", "x").await;
        let mut stream = env
            .watcher
            .watch_list::<Pod>(Some("ns"), &created.to_string(), selector("app=b"))
            .unwrap();
        let rv = put_pod(&env.client, "ns", "a", "b").await;
        expect_events(&mut stream, &[format!("ADDED ns/a rv={rv} app=b")]).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_change_out_of_the_selector_is_deleted_with_the_old_object_at_the_new_revision() {
    with_timeout(LIMIT, async {
        let Some(env) = env().await else { return };
        let created = put_pod(&env.client, "ns", "a", "b").await;
        let mut stream = env
            .watcher
            .watch_list::<Pod>(Some("ns"), &created.to_string(), selector("app=b"))
            .unwrap();
        let rv = put_pod(&env.client, "ns", "a", "x").await;
        // The last state that passed (app=b), stamped with the revision that made it leave.
        expect_events(&mut stream, &[format!("DELETED ns/a rv={rv} app=b")]).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_outside_the_selector_emit_nothing() {
    with_timeout(LIMIT, async {
        let Some(mut env) = env().await else { return };
        let start = current_revision(&env.client).await;
        let mut stream = env
            .watcher
            .watch_list::<Pod>(Some("ns"), &start.to_string(), selector("app=b"))
            .unwrap();
        put_pod(&env.client, "ns", "a", "x").await; // create, not passing
        put_pod(&env.client, "ns", "a", "y").await; // neither old nor new passes
        delete_pod(&mut env.client, "ns", "a").await; // delete of a non-passing object
        let marker = put_pod(&env.client, "ns", "marker", "b").await;
        // The first event is the marker: nothing came before it.
        expect_events(&mut stream, &[format!("ADDED ns/marker rv={marker} app=b")]).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_is_deleted_with_the_previous_object_at_the_delete_revision() {
    with_timeout(LIMIT, async {
        let Some(mut env) = env().await else { return };
        let created = put_pod(&env.client, "ns", "a", "b").await;
        let mut stream = env
            .watcher
            .watch_list::<Pod>(Some("ns"), &created.to_string(), selector("app=b"))
            .unwrap();
        let rv = delete_pod(&mut env.client, "ns", "a").await;
        let (event, raw) = tokio::time::timeout(EVENT_DEADLINE, stream.next_with_raw())
            .await
            .expect("an event in time")
            .expect("the stream is open");
        assert_eq!(describe(&event), format!("DELETED ns/a rv={rv} app=b"));
        let pod = event.object().unwrap();
        assert_eq!(
            pod.spec.containers[0].image, "busybox",
            "the whole old object"
        );
        let raw = raw.expect("a watch event carries its etcd event");
        assert_eq!((raw.kind, raw.mod_revision), (RawKind::Delete, rv));
        assert!(raw.has_prev);
    })
    .await;
}

/// etcd 3.4 can send a watch's first events without the previous values the watch asked
/// for (the flaky run of the test above). Given events that lack them, as a watch without
/// `prev_kv` delivers them, the watcher reads each one at the revision before its event:
/// the same values and revisions a `prev_kv` watch of the same history carries. A create
/// has none to read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn previous_values_etcd_did_not_send_are_read_at_the_revision_before() {
    with_timeout(LIMIT, async {
        let Some(mut env) = env().await else { return };
        let before = current_revision(&env.client).await;
        put_pod(&env.client, "ns", "a", "one").await;
        put_pod(&env.client, "ns", "a", "two").await;
        put_pod(&env.client, "ns", "b", "three").await;
        let last = delete_pod(&mut env.client, "ns", "a").await;
        let history = |prev_kv: bool| {
            let client = env.client.clone();
            async move {
                let mut options = etcd_client::WatchOptions::new()
                    .with_prefix()
                    .with_start_revision(before + 1);
                if prev_kv {
                    options = options.with_prev_key();
                }
                let mut stream = client
                    .watch_client()
                    .watch(PODS_DIR, Some(options))
                    .await
                    .expect("watch");
                let mut events = Vec::new();
                while events
                    .last()
                    .is_none_or(|e: &RawEvent| e.mod_revision < last)
                {
                    let response = tokio::time::timeout(EVENT_DEADLINE, stream.message())
                        .await
                        .expect("events in time")
                        .expect("watch")
                        .expect("watch open");
                    events.extend(response.events().iter().filter_map(RawEvent::from_etcd));
                }
                events
            }
        };
        let (mut without, with) = (history(false).await, history(true).await);
        assert_eq!(without.len(), 4);
        let lacking: Vec<bool> = without.iter().map(RawEvent::lacks_prev).collect();
        assert_eq!(lacking, [false, true, false, true], "{without:?}");
        let registry = Registry::new(&env.client, "/registry").expect("registry");
        etcd_watcher::fill_missing_prev(&registry, &mut without).await;
        assert_eq!(without, with);
        assert!(without[1].prev.is_some() && without[3].prev.is_some());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_for_the_watched_directory_key_itself_are_ignored() {
    with_timeout(LIMIT, async {
        let Some(mut env) = env().await else { return };
        // Something (another tool, a v2 migration) wrote the directory key itself, with a
        // value that is not a pod.
        put(&env.client, PODS_DIR, "directory").await;
        let mut one_shot = env
            .watcher
            .watch_list::<Pod>(None, "", etcd_watcher::everything())
            .unwrap();
        let mut resumable = env
            .watcher
            .resumable_list::<Pod>(None, "", etcd_watcher::everything())
            .unwrap();
        match next_update(&mut resumable).await {
            Update::Relisted { added: 0, .. } => {}
            other => panic!("expected an empty list, got {other:?}"),
        }
        put(&env.client, PODS_DIR, "directory again").await;
        delete(&mut env.client, PODS_DIR).await;
        let rv = put_pod(&env.client, "ns", "a", "x").await;
        let expected = format!("ADDED ns/a rv={rv} app=x");
        expect_events(&mut one_shot, std::slice::from_ref(&expected)).await;
        assert_eq!(next_update_event(&mut resumable).await, expected);
        // Ignored, not skipped as undecodable.
        assert_eq!(resumable.metrics().decode_errors.load(Ordering::Relaxed), 0);
    })
    .await;
}

/// A filtered resumable watch without etcd's previous values delivers what one with them
/// does, from a list and from a revision: every transition of the 2014 table (into the
/// selector, out of it, within it, outside it, deletes of passing and non-passing objects),
/// the objects that left told from what the watch delivered. One that keeps only the names
/// of what it delivered delivers the same events, its Deleted ones carrying those names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filtered_watch_without_previous_values_delivers_what_one_with_them_does() {
    with_timeout(LIMIT, async {
        let Some(mut env) = env().await else { return };
        put_pod(&env.client, "ns", "listed-in", "b").await;
        put_pod(&env.client, "ns", "listed-out", "x").await;
        let start = current_revision(&env.client).await;
        // Each: whether it lists first, whether it keeps only names, the watch.
        let mut watches = Vec::new();
        for from in [String::new(), start.to_string()] {
            let without_previous = || {
                env.watcher
                    .resumable_list_without_previous::<Pod>(Some("ns"), &from, selector("app=b"))
                    .unwrap()
            };
            watches.extend([
                (
                    from.is_empty(),
                    false,
                    env.watcher
                        .resumable_list::<Pod>(Some("ns"), &from, selector("app=b"))
                        .unwrap(),
                ),
                (from.is_empty(), false, without_previous()),
                (from.is_empty(), true, without_previous().keeping_names()),
            ]);
        }
        // The lists, read before the writes (a watch starts when first polled).
        for (i, (_, _, watch)) in watches.iter_mut().enumerate().filter(|(_, w)| w.0) {
            match next_update(watch).await {
                Update::Relisted { added: 1, .. } => {}
                other => panic!("watch {i}: expected a list of one, got {other:?}"),
            }
            let listed = next_update_event(watch).await;
            assert!(
                listed.starts_with("ADDED ns/listed-in "),
                "watch {i}: {listed}"
            );
        }
        let mut expected = Vec::new();
        // Leaves the selector: the object as last delivered, at the revision it left.
        let rv = put_pod(&env.client, "ns", "listed-in", "x").await;
        expected.push(format!("DELETED ns/listed-in rv={rv} app=b"));
        // Comes into it.
        let rv = put_pod(&env.client, "ns", "listed-out", "b").await;
        expected.push(format!("ADDED ns/listed-out rv={rv} app=b"));
        // Within it.
        let rv = put_pod(&env.client, "ns", "listed-out", "b").await;
        expected.push(format!("MODIFIED ns/listed-out rv={rv} app=b"));
        // Created outside, changed outside, deleted outside: nothing.
        put_pod(&env.client, "ns", "never", "x").await;
        put_pod(&env.client, "ns", "never", "y").await;
        delete_pod(&mut env.client, "ns", "never").await;
        // Deleted while passing.
        let rv = delete_pod(&mut env.client, "ns", "listed-out").await;
        expected.push(format!("DELETED ns/listed-out rv={rv} app=b"));
        // Back in after leaving.
        let rv = put_pod(&env.client, "ns", "listed-in", "b").await;
        expected.push(format!("ADDED ns/listed-in rv={rv} app=b"));
        let rv = put_pod(&env.client, "ns", "marker", "b").await;
        expected.push(format!("ADDED ns/marker rv={rv} app=b"));
        for (i, (_, names_only, watch)) in watches.iter_mut().enumerate() {
            let expected: Vec<String> = if *names_only {
                // The names and the revision; not the labels.
                (expected.iter())
                    .map(|e| match e.strip_suffix(" app=b") {
                        Some(deleted) if e.starts_with("DELETED") => format!("{deleted} app=-"),
                        _ => e.clone(),
                    })
                    .collect()
            } else {
                expected.clone()
            };
            let mut got = Vec::new();
            for _ in &expected {
                got.push(next_update_event(watch).await);
            }
            assert_eq!(got, expected, "watch {i}");
            assert_eq!(watch.known().len(), 2, "watch {i} keeps what passes");
            let kept_labels = watch.known().values().map(|p| p.metadata.labels.len());
            assert_eq!(
                kept_labels.sum::<usize>(),
                if *names_only { 0 } else { 2 },
                "watch {i}"
            );
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// resourceVersion rules

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_empty_existing_objects_arrive_as_added_then_live_events() {
    with_timeout(LIMIT, async {
        let Some(mut env) = env().await else { return };
        // Written out of key order: the list delivers in revision order, so that revisions
        // never go backwards (a consumer may resume from the last one it saw).
        let b = put_pod(&env.client, "ns", "b", "y").await;
        let b2 = put_pod(&env.client, "ns", "b", "z").await; // listed as its latest state
        let a = put_pod(&env.client, "ns", "a", "x").await;
        put_pod(&env.client, "other", "c", "x").await; // another namespace
        assert!(b < b2 && b2 < a);
        let mut stream = env
            .watcher
            .watch_list::<Pod>(Some("ns"), "", etcd_watcher::everything())
            .unwrap();
        expect_events(
            &mut stream,
            &[
                format!("ADDED ns/b rv={b2} app=z"),
                format!("ADDED ns/a rv={a} app=x"),
            ],
        )
        .await;
        let c = put_pod(&env.client, "ns", "c", "x").await;
        let a2 = put_pod(&env.client, "ns", "a", "w").await;
        let gone = delete_pod(&mut env.client, "ns", "b").await;
        expect_events(
            &mut stream,
            &[
                format!("ADDED ns/c rv={c} app=x"),
                format!("MODIFIED ns/a rv={a2} app=w"),
                format!("DELETED ns/b rv={gone} app=z"),
            ],
        )
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_a_revision_the_event_at_it_is_not_repeated_and_the_next_one_is_delivered() {
    with_timeout(LIMIT, async {
        let Some(env) = env().await else { return };
        let n = put_pod(&env.client, "ns", "a", "x").await;
        let n1 = put_pod(&env.client, "ns", "b", "x").await;
        assert_eq!(n1, n + 1);
        let mut stream = env
            .watcher
            .watch_list::<Pod>(Some("ns"), &n.to_string(), etcd_watcher::everything())
            .unwrap();
        let mut resumable = env
            .watcher
            .resumable_list::<Pod>(Some("ns"), &n.to_string(), etcd_watcher::everything())
            .unwrap();
        let later = put_pod(&env.client, "ns", "c", "x").await;
        let expected = [
            format!("ADDED ns/b rv={n1} app=x"),
            format!("ADDED ns/c rv={later} app=x"),
        ];
        expect_events(&mut stream, &expected).await;
        for event in expected {
            assert_eq!(next_update_event(&mut resumable).await, event);
        }
        assert_eq!(resumable.metrics().relists.load(Ordering::Relaxed), 0);
    })
    .await;
}

/// 2014's watch from `""` of a key that does not exist sent no synthetic event and
/// started right after the read: a key (and a namespace) with a past, but nothing now,
/// replays none of it, and the next write is the first event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_empty_a_missing_key_sends_nothing_before_its_next_write() {
    with_timeout(LIMIT, async {
        let Some(mut env) = env().await else { return };
        put_pod(&env.client, "empty", "a", "x").await;
        delete_pod(&mut env.client, "empty", "a").await;
        let mut object = env.watcher.watch::<Pod>("empty", "a", "").unwrap();
        let mut list = env
            .watcher
            .watch_list::<Pod>(Some("empty"), "", etcd_watcher::everything())
            .unwrap();
        let again = put_pod(&env.client, "empty", "a", "y").await;
        let expected = [format!("ADDED empty/a rv={again} app=y")];
        expect_events(&mut object, &expected).await;
        expect_events(&mut list, &expected).await;
    })
    .await;
}

/// 2014's watcher dropped etcd v2's `expire` action (#10412). etcd v3 has no such action: a
/// key whose lease expires is removed by an ordinary DELETE, which arrives as DELETED of
/// the key's last state, stamped with the revision of the expiry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_expiry_is_deleted_with_the_last_state() {
    with_timeout(LIMIT, async {
        let Some(env) = env().await else { return };
        let mut client = env.client.clone();
        let lease = client
            .lease_grant(2, None)
            .await
            .expect("grant a lease")
            .id();
        let value = serde_json::to_vec(&pod_json("ns", "leased", "x")).unwrap();
        let options = etcd_client::PutOptions::new().with_lease(lease);
        let written = client
            .put(pod_key("ns", "leased"), value, Some(options))
            .await
            .expect("put with a lease")
            .header()
            .expect("header")
            .revision();
        let mut stream = env
            .watcher
            .watch_list::<Pod>(Some("ns"), &written.to_string(), etcd_watcher::everything())
            .unwrap();
        // Nobody keeps the lease alive: etcd expires it within a few seconds.
        match next_event(&mut stream).await {
            WatchEvent::Deleted(pod) => {
                assert_eq!(pod.metadata.name, "leased");
                assert_eq!(pod.metadata.labels.get("app"), Some("x"), "the last state");
                let at = pod.metadata.resource_version.expect("a revision").0;
                assert!(at > written, "stamped with the expiry's revision: {at}");
            }
            other => panic!("expected DELETED, got {other:?}"),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_watch_sees_only_its_own_key() {
    with_timeout(LIMIT, async {
        let Some(mut env) = env().await else { return };
        let a = put_pod(&env.client, "ns", "a", "x").await;
        let mut stream = env.watcher.watch::<Pod>("ns", "a", "").unwrap();
        expect_events(&mut stream, &[format!("ADDED ns/a rv={a} app=x")]).await;
        // "ab" shares the key prefix of "a".
        put_pod(&env.client, "ns", "ab", "x").await;
        let a2 = put_pod(&env.client, "ns", "a", "y").await;
        let gone = delete_pod(&mut env.client, "ns", "a").await;
        expect_events(
            &mut stream,
            &[
                format!("MODIFIED ns/a rv={a2} app=y"),
                format!("DELETED ns/a rv={gone} app=y"),
            ],
        )
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_numeric_resource_version_is_an_error_before_anything_starts() {
    with_timeout(LIMIT, async {
        // No etcd: the client connects lazily and nothing may try to reach it.
        let watcher = watcher_via("http://127.0.0.1:1".to_string()).await;
        let everything = etcd_watcher::everything::<Pod>;
        for rv in ["abc", "12x", "-3", "1.5"] {
            let errors = [
                watcher.watch_list(None, rv, everything()).err(),
                watcher.watch::<Pod>("ns", "a", rv).err(),
                watcher.resumable_list(None, rv, everything()).err(),
                watcher.resumable_object::<Pod>("ns", "a", rv).err(),
            ];
            for error in errors {
                let error = error.unwrap_or_else(|| panic!("{rv:?} was accepted"));
                let message = format!("{error:#}");
                assert!(message.contains("resourceVersion"), "{message}");
            }
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// Malformed values, stop and drop, backpressure, dead etcd

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_value_is_skipped_and_counted_and_the_events_around_it_arrive() {
    with_timeout(LIMIT, async {
        let Some(env) = env().await else { return };
        let x = put_pod(&env.client, "ns", "x", "x").await;
        put(&env.client, &pod_key("ns", "listed-garbage"), "{not json").await;
        let mut one_shot = env
            .watcher
            .watch_list::<Pod>(Some("ns"), "", etcd_watcher::everything())
            .unwrap();
        let mut resumable = env
            .watcher
            .resumable_list::<Pod>(Some("ns"), "", etcd_watcher::everything())
            .unwrap();
        let metrics = resumable.metrics();
        match next_update(&mut resumable).await {
            Update::Relisted { added: 1, .. } => {}
            other => panic!("expected a list of one object, got {other:?}"),
        }
        assert_eq!(
            next_update_event(&mut resumable).await,
            format!("ADDED ns/x rv={x} app=x")
        );
        assert_eq!(metrics.decode_errors.load(Ordering::Relaxed), 1);

        let a = put_pod(&env.client, "ns", "a", "x").await;
        put(&env.client, &pod_key("ns", "garbage"), "\u{1}binary").await;
        // A document of another kind under the pods key is malformed too.
        put(
            &env.client,
            &pod_key("ns", "wrong-kind"),
            r#"{"kind":"Service","metadata":{"name":"wrong-kind"}}"#,
        )
        .await;
        let c = put_pod(&env.client, "ns", "c", "x").await;
        let expected = [
            format!("ADDED ns/a rv={a} app=x"),
            format!("ADDED ns/c rv={c} app=x"),
        ];
        for event in &expected {
            assert_eq!(&next_update_event(&mut resumable).await, event);
        }
        assert_eq!(metrics.decode_errors.load(Ordering::Relaxed), 3);
        expect_events(
            &mut one_shot,
            &[
                format!("ADDED ns/x rv={x} app=x"),
                expected[0].clone(),
                expected[1].clone(),
            ],
        )
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_twice_is_harmless_and_ends_the_stream_without_an_error() {
    with_timeout(LIMIT, async {
        let Some(env) = env().await else { return };
        let mut stream = env
            .watcher
            .watch_list::<Pod>(None, "", etcd_watcher::everything())
            .unwrap();
        let probe = stream.task_probe();
        let a = put_pod(&env.client, "ns", "a", "x").await;
        expect_events(&mut stream, &[format!("ADDED ns/a rv={a} app=x")]).await;
        // Buffered but unread events are dropped by stop, not delivered or turned into
        // an error.
        put_pod(&env.client, "ns", "b", "x").await;
        stream.stop();
        stream.stop();
        assert!(stream.next().await.is_none(), "the stream ends after stop");
        assert!(stream.next().await.is_none(), "and stays ended");
        eventually(Duration::from_secs(10), "the reader task to end", || {
            let running = probe.is_running();
            async move { !running }
        })
        .await;
        stream.stop();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_stream_ends_its_task_even_when_its_buffer_is_full() {
    with_timeout(LIMIT, async {
        let Some(env) = env().await else { return };
        let idle = env
            .watcher
            .watch_list::<Pod>(None, "", etcd_watcher::everything())
            .unwrap();
        let idle_probe = idle.task_probe();
        let mut full = env
            .watcher
            .watch_list::<Pod>(None, "", etcd_watcher::everything())
            .unwrap();
        let full_probe = full.task_probe();
        let a = put_pod(&env.client, "ns", "a", "x").await;
        // Make sure the watch is established before the burst, then fill its buffer.
        expect_events(&mut full, &[format!("ADDED ns/a rv={a} app=x")]).await;
        let burst = etcd_watcher::WATCH_BUFFER + 50;
        put_many(&env.client, "burst", burst).await;
        assert!(idle_probe.is_running() && full_probe.is_running());
        drop(idle);
        drop(full);
        eventually(Duration::from_secs(10), "both reader tasks to end", || {
            let running = idle_probe.is_running() || full_probe.is_running();
            async move { !running }
        })
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_does_not_read_gets_everything_in_order_once_it_does() {
    with_timeout(LIMIT, async {
        let Some(env) = env().await else { return };
        let start = current_revision(&env.client).await;
        let mut stream = env
            .watcher
            .watch_list::<Pod>(None, &start.to_string(), etcd_watcher::everything())
            .unwrap();
        let mut resumable = env
            .watcher
            .resumable_list::<Pod>(None, &start.to_string(), etcd_watcher::everything())
            .unwrap();
        // Neither watch is read while 1,000 events are written.
        let written = put_many(&env.client, "p", 1000).await;
        let mut from_stream = Vec::new();
        let mut from_resumable = Vec::new();
        for _ in &written {
            let event = next_event(&mut stream).await;
            assert_eq!(event.type_name(), "ADDED", "{event:?}");
            from_stream.push(event.revision().unwrap());
            match next_update(&mut resumable).await {
                Update::Event(event @ WatchEvent::Added(_), _) => {
                    from_resumable.push(event.revision().unwrap())
                }
                other => panic!("expected an Added event, got {other:?}"),
            }
        }
        assert_same_revisions(&from_stream, &written);
        assert_same_revisions(&from_resumable, &written);
        let metrics = resumable.metrics();
        assert_eq!(metrics.restarts.load(Ordering::Relaxed), 0);
        assert_eq!(metrics.events.load(Ordering::Relaxed), 1000);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_etcd_yields_an_error_within_seconds() {
    with_timeout(LIMIT, async {
        let Some(env) = env().await else { return };
        let proxy = FaultProxy::start(env.etcd.client_addr()).await;
        let watcher = watcher_via(proxy.endpoint()).await;
        let start = current_revision(&env.client).await;
        let mut stream = watcher
            .watch_list::<Pod>(None, &start.to_string(), etcd_watcher::everything())
            .unwrap();
        let a = put_pod(&env.client, "ns", "a", "x").await;
        expect_events(&mut stream, &[format!("ADDED ns/a rv={a} app=x")]).await;

        proxy.blackhole();
        let blackholed_at = Instant::now();
        // Written while etcd is unreachable: must not arrive through the hung connection.
        put_pod(&env.client, "ns", "b", "x").await;
        let event = next_event(&mut stream).await;
        let waited = blackholed_at.elapsed();
        match &event {
            WatchEvent::Error(status) => {
                assert_eq!(
                    (status.code, status.reason),
                    (500, "InternalError"),
                    "{status}"
                );
                assert!(
                    status.message.contains("watch"),
                    "the message says what failed: {status}"
                );
            }
            other => panic!("expected an Error, got {other:?}"),
        }
        // Keepalive 1s + timeout 1s; allow for a loaded machine.
        assert!(
            waited < Duration::from_secs(10),
            "the dead connection took {waited:?} to notice"
        );
        assert!(
            tokio::time::timeout(EVENT_DEADLINE, stream.next())
                .await
                .expect("the stream ends after an Error")
                .is_none(),
            "nothing after the Error"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumable_watch_resumes_after_a_silent_etcd_answers_again() {
    with_timeout(LIMIT, async {
        let Some(env) = env().await else { return };
        let proxy = FaultProxy::start(env.etcd.client_addr()).await;
        let watcher = watcher_via(proxy.endpoint()).await;
        let start = current_revision(&env.client).await;
        let mut watch = watcher
            .resumable_list::<Pod>(None, &start.to_string(), etcd_watcher::everything())
            .unwrap()
            .with_backoff(SHORT_BACKOFF);
        let a = put_pod(&env.client, "ns", "a", "x").await;
        assert_eq!(
            next_update_event(&mut watch).await,
            format!("ADDED ns/a rv={a} app=x")
        );

        proxy.blackhole();
        let b = put_pod(&env.client, "ns", "b", "x").await;
        // Keepalive notices the silence. The watch says so (its metrics, hence /healthz)
        // and re-opens only once etcd answers again. Polling it under a timeout also
        // checks that `next` is cancel-safe: nothing is lost when it is dropped.
        let metrics = watch.metrics();
        let deadline = Instant::now() + Duration::from_secs(30);
        while metrics.disconnected_for().is_none() {
            assert!(
                Instant::now() < deadline,
                "the watch never noticed the silence"
            );
            if let Ok(update) = tokio::time::timeout(Duration::from_millis(100), watch.next()).await
            {
                panic!("nothing can arrive through a black hole, got {update:?}");
            }
        }
        proxy.restore();
        let c = put_pod(&env.client, "ns", "c", "x").await;
        let mut events = Vec::new();
        while events.len() < 2 {
            match next_update(&mut watch).await {
                Update::Event(event, _) => events.push(describe(&event)),
                Update::Resumed { from, .. } => assert_eq!(from, a),
                Update::Relisted { .. } => panic!("relisted without compaction"),
                Update::Error(status) => panic!("the watch ended: {status}"),
            }
        }
        assert_eq!(
            events,
            [
                format!("ADDED ns/b rv={b} app=x"),
                format!("ADDED ns/c rv={c} app=x"),
            ]
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// Exactly once through faults

/// Pods the writer creates (and, all but the last of each lane, deletes).
const WRITER_PODS: usize = 2000;
/// Concurrent writer lanes, each with its own pods.
const WRITER_LANES: usize = 4;
/// The pod the writer creates last; its event ends the consumer's loop.
const DONE: &str = "zz-done";

/// Writes through a direct client, recording every acknowledged revision.
///
/// Each write is a guarded transaction that also writes a marker key outside the watched
/// range, so retrying after an error (etcd down, ack lost) never applies a write twice and
/// always learns the revision the write was applied at.
#[derive(Clone)]
struct Writer {
    client: Client,
    /// Operations acknowledged so far, for the fault schedule.
    progress: Arc<AtomicUsize>,
}

impl Writer {
    /// Runs `txn` until etcd answers it, each attempt bounded (etcd may be down).
    async fn run(&self, txn: Txn) -> TxnResponse {
        let mut kv = self.client.kv_client();
        loop {
            match tokio::time::timeout(Duration::from_secs(3), kv.txn(txn.clone())).await {
                Ok(Ok(response)) => return response,
                Ok(Err(_)) | Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }

    /// Creates pod `default/{name}` once; returns the revision it was created at.
    async fn create(&self, name: &str) -> i64 {
        let marker = format!("/kcm-test/created/{name}");
        let txn = Txn::new()
            .when([Compare::create_revision(
                marker.as_str(),
                CompareOp::Equal,
                0,
            )])
            .and_then([
                TxnOp::put(
                    pod_key("default", name),
                    pod_json("default", name, "w").to_string(),
                    None,
                ),
                TxnOp::put(marker.as_str(), "", None),
            ])
            .or_else([TxnOp::get(marker.as_str(), None)]);
        let revision = self.applied_at(self.run(txn).await);
        self.progress.fetch_add(1, Ordering::SeqCst);
        revision
    }

    /// Deletes pod `default/{name}` once; returns the revision of the delete.
    async fn delete(&self, name: &str) -> i64 {
        let marker = format!("/kcm-test/deleted/{name}");
        let txn = Txn::new()
            .when([Compare::create_revision(
                marker.as_str(),
                CompareOp::Equal,
                0,
            )])
            .and_then([
                TxnOp::delete(pod_key("default", name), None),
                TxnOp::put(marker.as_str(), "", None),
            ])
            .or_else([TxnOp::get(marker.as_str(), None)]);
        let revision = self.applied_at(self.run(txn).await);
        self.progress.fetch_add(1, Ordering::SeqCst);
        revision
    }

    /// The revision a guarded write was applied at: this response's, or (when an earlier
    /// attempt applied it) the marker's creation.
    fn applied_at(&self, response: TxnResponse) -> i64 {
        if response.succeeded() {
            return response.header().expect("header").revision();
        }
        match response.op_responses().as_slice() {
            [TxnOpResponse::Get(get)] => get.kvs()[0].create_revision(),
            other => panic!("unexpected else branch {other:?}"),
        }
    }

    /// Creates and deletes [`WRITER_PODS`] pods in [`WRITER_LANES`] lanes, then creates
    /// [`DONE`]. Returns every revision, sorted.
    async fn write_all(self) -> Vec<i64> {
        let mut lanes = JoinSet::new();
        for lane in 0..WRITER_LANES {
            let writer = self.clone();
            lanes.spawn(async move {
                let mut revisions = Vec::new();
                let mut previous: Option<String> = None;
                for i in (lane..WRITER_PODS).step_by(WRITER_LANES) {
                    let name = format!("w-{i:04}");
                    revisions.push(writer.create(&name).await);
                    if let Some(previous) = previous.replace(name) {
                        revisions.push(writer.delete(&previous).await);
                    }
                }
                revisions
            });
        }
        let mut revisions = Vec::new();
        while let Some(lane) = lanes.join_next().await {
            revisions.extend(lane.expect("writer lane"));
        }
        revisions.push(self.create(DONE).await);
        revisions.sort_unstable();
        revisions
    }

    /// How many operations [`Writer::write_all`] performs.
    fn total_ops() -> usize {
        2 * WRITER_PODS - WRITER_LANES + 1
    }
}

/// Compares delivered event revisions with the acknowledged ones, naming the first
/// differences rather than printing thousands of numbers.
#[track_caller]
fn assert_same_revisions(delivered: &[i64], acknowledged: &[i64]) {
    if delivered == acknowledged {
        return;
    }
    let out_of_order: Vec<_> = delivered
        .windows(2)
        .filter(|pair| pair[0] >= pair[1])
        .take(5)
        .collect();
    let delivered_set: std::collections::BTreeSet<_> = delivered.iter().collect();
    let acknowledged_set: std::collections::BTreeSet<_> = acknowledged.iter().collect();
    let missing: Vec<_> = acknowledged_set
        .difference(&delivered_set)
        .take(10)
        .collect();
    let unexpected: Vec<_> = delivered_set
        .difference(&acknowledged_set)
        .take(10)
        .collect();
    panic!(
        "delivered {} events for {} acknowledged writes; missing {missing:?}, \
         unexpected {unexpected:?}, out of order or repeated {out_of_order:?}",
        delivered.len(),
        acknowledged.len()
    );
}

/// Consumes `watch` until the [`DONE`] pod arrives; returns the revisions of every event
/// and how many times the watch resumed.
async fn consume_until_done(watch: &mut ResumableWatch<Pod>) -> (Vec<i64>, usize) {
    let mut revisions = Vec::new();
    let mut resumes = 0;
    loop {
        match next_update(watch).await {
            Update::Event(event, _) => {
                let pod = event.object().expect("no Error from a resumable watch");
                revisions.push(event.revision().expect("events carry their revision"));
                if pod.metadata.name == DONE {
                    return (revisions, resumes);
                }
            }
            Update::Resumed { .. } => resumes += 1,
            Update::Relisted { .. } => panic!("relisted without compaction"),
            Update::Error(status) => panic!("the watch ended: {status}"),
        }
    }
}

/// Starts the writer once `watch` has listed (so every write arrives as a watch event).
async fn start_writer(
    watch: &mut ResumableWatch<Pod>,
    client: Client,
) -> (tokio::task::JoinHandle<Vec<i64>>, Arc<AtomicUsize>) {
    match next_update(watch).await {
        Update::Relisted { added: 0, .. } => {}
        other => panic!("expected an empty initial list, got {other:?}"),
    }
    let progress = Arc::new(AtomicUsize::new(0));
    let writer = Writer {
        client,
        progress: progress.clone(),
    };
    (tokio::spawn(writer.write_all()), progress)
}

/// Waits until the writer has done `fraction` of its work.
async fn wait_for_progress(progress: &AtomicUsize, fraction: f64) {
    let target = (Writer::total_ops() as f64 * fraction) as usize;
    eventually(LIMIT, &format!("the writer to reach {target} ops"), || {
        let done = progress.load(Ordering::SeqCst);
        async move { done >= target }
    })
    .await;
}

/// Resumes the watch has made so far.
fn restarts(metrics: &WatchMetrics) -> u64 {
    metrics.restarts.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cutting_the_network_mid_stream_loses_and_repeats_nothing() {
    const CUTS: usize = 5;
    with_timeout(LIMIT, async {
        let Some(env) = env().await else { return };
        let proxy = Arc::new(FaultProxy::start(env.etcd.client_addr()).await);
        let watcher = watcher_via(proxy.endpoint()).await;
        let mut watch = watcher
            .resumable_list::<Pod>(None, "", etcd_watcher::everything())
            .unwrap()
            .with_backoff(SHORT_BACKOFF);
        let metrics = watch.metrics();
        let (writer, progress) = start_writer(&mut watch, env.client.clone()).await;
        let consumed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let faults = tokio::spawn({
            let proxy = proxy.clone();
            let metrics = metrics.clone();
            let consumed = consumed.clone();
            async move {
                let mut cuts = 0;
                for cut in 1..=CUTS {
                    wait_for_progress(&progress, cut as f64 / (CUTS + 1) as f64).await;
                    // Cut a live watch: a cut while it is still re-opening after the last
                    // one is the same disconnection, not a new one.
                    within(EVENT_DEADLINE, || {
                        metrics.disconnected_for().is_none() || consumed.load(Ordering::SeqCst)
                    })
                    .await;
                    if consumed.load(Ordering::SeqCst) {
                        break;
                    }
                    proxy.cut();
                    cuts += 1;
                    within(Duration::from_millis(200), || {
                        metrics.disconnected_for().is_some()
                    })
                    .await;
                    proxy.restore();
                }
                cuts
            }
        });
        let (delivered, resumes) = consume_until_done(&mut watch).await;
        consumed.store(true, Ordering::SeqCst);
        let cuts = faults.await.expect("fault schedule");
        let acknowledged = writer.await.expect("writer");
        assert_eq!(acknowledged.len(), Writer::total_ops());
        assert_same_revisions(&delivered, &acknowledged);
        assert_eq!(proxy.cuts(), cuts);
        assert!(cuts >= 2, "only {cuts} cuts hit the stream");
        // Every cut broke a live watch and got a resume, except that the events of the
        // last one may all have been read before the cut was noticed.
        assert!(
            resumes + 1 >= cuts,
            "only {resumes} resumes for {cuts} cuts"
        );
        assert_eq!(metrics.relists.load(Ordering::SeqCst), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_etcd_mid_stream_loses_and_repeats_nothing() {
    const KILLS: usize = 2;
    with_timeout(LIMIT, async {
        let Some(Env {
            mut etcd,
            client,
            watcher,
        }) = env().await
        else {
            return;
        };
        let mut watch = watcher
            .resumable_list::<Pod>(None, "", etcd_watcher::everything())
            .unwrap()
            .with_backoff(SHORT_BACKOFF);
        let metrics = watch.metrics();
        let (writer, progress) = start_writer(&mut watch, client).await;
        let consumed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let faults = tokio::spawn({
            let metrics = metrics.clone();
            let consumed = consumed.clone();
            async move {
                for kill in 1..=KILLS {
                    wait_for_progress(&progress, kill as f64 / (KILLS + 1) as f64).await;
                    let before = restarts(&metrics);
                    etcd.kill();
                    within(Duration::from_millis(200), || {
                        metrics.disconnected_for().is_some()
                    })
                    .await;
                    etcd.restart().await;
                    // The watch re-opens once etcd answers; the next kill waits for it
                    // (unless the consumer has everything already).
                    within(EVENT_DEADLINE, || {
                        restarts(&metrics) > before || consumed.load(Ordering::SeqCst)
                    })
                    .await;
                }
                etcd
            }
        });
        let (delivered, resumes) = consume_until_done(&mut watch).await;
        consumed.store(true, Ordering::SeqCst);
        let _etcd = faults.await.expect("fault schedule");
        let acknowledged = writer.await.expect("writer");
        assert_eq!(acknowledged.len(), Writer::total_ops());
        assert_same_revisions(&delivered, &acknowledged);
        assert!(resumes >= KILLS, "only {resumes} resumes for {KILLS} kills");
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// Compaction

/// Fails unless `revisions` never go backwards.
#[track_caller]
fn assert_non_decreasing(revisions: &[i64]) {
    assert!(
        revisions.windows(2).all(|pair| pair[0] <= pair[1]),
        "revisions went backwards: {revisions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_during_a_cut_is_a_410_for_the_one_shot_watch_and_a_relist_for_the_resumable_one(
) {
    with_timeout(LIMIT, async {
        let Some(mut env) = env().await else { return };
        // In reverse key order, so that key order and revision order differ.
        for i in (0..10).rev() {
            put_pod(&env.client, "ns", &format!("k{i}"), "old").await;
        }
        let proxy = FaultProxy::start(env.etcd.client_addr()).await;
        let watcher = watcher_via(proxy.endpoint()).await;
        let mut one_shot = watcher
            .watch_list::<Pod>(None, "", etcd_watcher::everything())
            .unwrap();
        let mut resumable = watcher
            .resumable_list::<Pod>(None, "", etcd_watcher::everything())
            .unwrap()
            .with_backoff(SHORT_BACKOFF);
        let metrics = resumable.metrics();

        let mut one_shot_revisions = Vec::new();
        for _ in 0..10 {
            one_shot_revisions.push(next_event(&mut one_shot).await.revision().unwrap());
        }
        assert_non_decreasing(&one_shot_revisions);
        let last_seen = *one_shot_revisions.last().unwrap();

        let mut cache = BTreeMap::new();
        let mut resumable_revisions = Vec::new();
        match next_update(&mut resumable).await {
            Update::Relisted { added: 10, .. } => {}
            other => panic!("expected a list of 10, got {other:?}"),
        }
        for _ in 0..10 {
            match next_update(&mut resumable).await {
                Update::Event(event, _) => {
                    resumable_revisions.push(event.revision().unwrap());
                    replay(&mut cache, event);
                }
                other => panic!("expected an event, got {other:?}"),
            }
        }

        proxy.cut();
        // The open one-shot watch reports the broken connection instead of hanging.
        assert_eq!(describe(&next_event(&mut one_shot).await), "ERROR 500");
        // Some added, some changed (in reverse key order again), some deleted.
        for i in 0..3 {
            put_pod(&env.client, "ns", &format!("n{i}"), "new").await;
        }
        for i in (0..3).rev() {
            put_pod(&env.client, "ns", &format!("k{i}"), "new").await;
        }
        for i in 3..6 {
            delete_pod(&mut env.client, "ns", &format!("k{i}")).await;
        }
        let compacted = env.etcd.compact().await;
        assert!(compacted > last_seen + 1);
        proxy.restore();

        let mut again = watcher
            .watch_list::<Pod>(None, &last_seen.to_string(), etcd_watcher::everything())
            .unwrap();
        match next_event(&mut again).await {
            WatchEvent::Error(status) => {
                assert_eq!((status.code, status.reason), (410, "Expired"), "{status}");
                assert!(status.is_gone());
                // Like the apiserver's "too old resource version: N (M)": both revisions.
                for revision in [last_seen + 1, compacted] {
                    assert!(
                        status.message.contains(&revision.to_string()),
                        "the message names revision {revision}: {status}"
                    );
                }
            }
            other => panic!("expected a 410 Error, got {other:?}"),
        }
        // As 2014's `401 index cleared`: the ERROR, then the stream ends; it lists nothing.
        assert!(
            tokio::time::timeout(EVENT_DEADLINE, again.next())
                .await
                .expect("the stream ends after its 410")
                .is_none(),
            "nothing after the 410"
        );

        // The resumable watch resumes, finds its revision compacted and lists again.
        let (added, modified, deleted) = loop {
            match next_update(&mut resumable).await {
                Update::Resumed { .. } => {}
                Update::Relisted {
                    revision,
                    added,
                    modified,
                    deleted,
                } => {
                    assert!(revision >= compacted);
                    break (added, modified, deleted);
                }
                Update::Event(event, _) => panic!("event before the relist: {event:?}"),
                Update::Error(status) => panic!("the watch ended: {status}"),
            }
        };
        assert_eq!((added, modified, deleted), (3, 3, 3));
        let mut deleted_names = Vec::new();
        for _ in 0..added + modified + deleted {
            match next_update(&mut resumable).await {
                Update::Event(event, _) => {
                    if let WatchEvent::Deleted(pod) = &event {
                        deleted_names.push(pod.metadata.name.clone());
                    }
                    resumable_revisions.push(event.revision().unwrap());
                    replay(&mut cache, event);
                }
                other => panic!("expected an event, got {other:?}"),
            }
        }
        deleted_names.sort();
        assert_eq!(deleted_names, ["k3", "k4", "k5"]);
        assert_eq!(metrics.relists.load(Ordering::SeqCst), 2);
        assert_non_decreasing(&resumable_revisions);

        let registry = Registry::new(&env.client, kcm::api::DEFAULT_PREFIX).unwrap();
        let listed = registry
            .list::<Pod>(None, &Default::default())
            .await
            .expect("list pods");
        let etcd_state: BTreeMap<_, _> = listed
            .items
            .into_iter()
            .map(|pod| (pod.metadata.key(), pod))
            .collect();
        assert_eq!(summary(&cache), summary(&etcd_state));

        // And it goes on watching live.
        let live = put_pod(&env.client, "ns", "k9", "live").await;
        assert_eq!(
            next_update_event(&mut resumable).await,
            format!("MODIFIED ns/k9 rv={live} app=live")
        );
    })
    .await;
}

/// 2014's `WatchList` with resourceVersion "": when the initial list fails, the stream
/// yields exactly one Error (500, `InternalError`, a message naming the failure) and ends,
/// and no etcd watch is ever opened (etcd's own watcher gauge does not move).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_watch_whose_initial_list_fails_yields_one_error_and_opens_no_watch() {
    const ETCD_WATCHERS: &str = "etcd_debugging_mvcc_watcher_total";
    with_timeout(LIMIT, async {
        let Some(env) = env().await else { return };
        let proxy = FaultProxy::start(env.etcd.client_addr()).await;
        let watcher = watcher_via(proxy.endpoint()).await;
        put_pod(&env.client, "ns", "a", "x").await;
        let watchers_before = env.etcd.metric(ETCD_WATCHERS).await;

        proxy.blackhole();
        let mut stream = watcher
            .watch_list::<Pod>(None, "", etcd_watcher::everything())
            .unwrap();
        let mut events = Vec::new();
        while let Some(event) = tokio::time::timeout(LIMIT, stream.next())
            .await
            .expect("the stream ends after its Error")
        {
            events.push(event);
        }
        match events.as_slice() {
            [WatchEvent::Error(status)] => {
                assert_eq!(
                    (status.code, status.reason),
                    (500, "InternalError"),
                    "{status}"
                );
                // e.g. "list /registry/pods/: … keep-alive timed out"
                assert!(
                    status.message.starts_with("list /registry/pods/"),
                    "the message names the list that failed: {status}"
                );
            }
            other => panic!("expected exactly one Error, got {other:?}"),
        }
        proxy.restore();
        assert_eq!(
            env.etcd.metric(ETCD_WATCHERS).await,
            watchers_before,
            "no etcd watch was opened"
        );
    })
    .await;
}
