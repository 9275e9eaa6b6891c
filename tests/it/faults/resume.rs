//! The watch contract at the edges, against a real etcd: a watch resumed from a caller's
//! resourceVersion keeps it through a cut and a compaction (list and single-object, at
//! thousands of objects), etcd restored from a snapshot (its revision goes backwards) is
//! noticed, short connection resets do not slow a watch down for good, and keys deeper than
//! `{kind}/{namespace}/{name}` are never shown as another object.
//!
//! Expectations come from etcd itself: the state at N and the final state are read with
//! plain etcd-client range reads, never through kcm.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions, Txn, TxnOp};
use kcm::api::Pod;
use kcm::etcd_watcher::{self, ResumableWatch, Update, WatchEvent};

use crate::support::objects::{
    self, active_pods, current_revision, pod_json, pod_key, put, put_controller, put_pod,
    wait_converged_within,
};
use crate::support::watcher::{delete, env, replay, summary, watcher_via, SHORT_BACKOFF};
use crate::support::{with_timeout, FaultProxy};

const LIMIT: Duration = Duration::from_secs(180);
/// How long a watch may take to catch up after a restore.
const CATCH_UP: Duration = Duration::from_secs(60);
/// Objects in the resume tests: enough that lists and diffs span several pages and
/// watch responses.
const N_PODS: usize = 3000;

/// Writes `ops` in transactions of 100 (etcd allows 128 operations per transaction).
async fn write_batched(client: &Client, ops: Vec<TxnOp>) {
    let mut kv = client.kv_client();
    let mut ops = ops.into_iter().peekable();
    while ops.peek().is_some() {
        let batch: Vec<TxnOp> = ops.by_ref().take(100).collect();
        kv.txn(Txn::new().and_then(batch))
            .await
            .expect("batched write");
    }
}

fn name(i: usize) -> String {
    format!("p-{i:05}")
}

/// The pods of namespace `ns` as etcd holds them at `revision` (0: now), summarized as
/// `key → "resourceVersion app"`.
async fn etcd_state(client: &Client, revision: i64) -> BTreeMap<String, Pod> {
    let mut kv = client.kv_client();
    let options = GetOptions::new().with_prefix().with_revision(revision);
    let response = kv
        .get(pod_key("ns", ""), Some(options))
        .await
        .expect("range read");
    response
        .kvs()
        .iter()
        .map(|kv| {
            let key = kv.key_str().expect("utf-8 key");
            let pod: Pod =
                kcm::api::decode(kcm::api::DEFAULT_PREFIX, key, kv.value(), kv.mod_revision())
                    .expect("test pods decode");
            (pod.metadata.key(), pod)
        })
        .collect()
}

/// Polls `watch` (cancel-safely, under short timeouts) until `done` holds, applying every
/// event to `state` and checking the contract on the way: revisions never go backwards,
/// Added only for absent keys, Modified and Deleted only for present ones.
async fn follow(
    watch: &mut ResumableWatch<Pod>,
    state: &mut BTreeMap<String, Pod>,
    last: &mut i64,
    relists: &mut Vec<(usize, usize, usize)>,
    done: impl Fn(&BTreeMap<String, Pod>) -> bool,
) {
    let deadline = Instant::now() + CATCH_UP;
    while !done(state) {
        assert!(
            Instant::now() < deadline,
            "the watch did not catch up within {CATCH_UP:?}"
        );
        let Ok(update) = tokio::time::timeout(Duration::from_millis(200), watch.next()).await
        else {
            continue;
        };
        match update {
            Update::Event(event, _) => {
                let revision = event.revision().expect("events carry their revision");
                assert!(
                    revision >= *last,
                    "revision went backwards: {revision} after {last} ({event:?})"
                );
                *last = revision;
                let key = event.object().expect("no Error").metadata.key();
                match &event {
                    WatchEvent::Added(_) => {
                        assert!(
                            !state.contains_key(&key),
                            "ADDED {key}, which the caller holds"
                        )
                    }
                    WatchEvent::Modified(_) | WatchEvent::Deleted(_) => assert!(
                        state.contains_key(&key),
                        "{} {key}, which the caller never had",
                        event.type_name()
                    ),
                    WatchEvent::Error(_) => unreachable!(),
                }
                replay(state, event);
            }
            Update::Relisted {
                added,
                modified,
                deleted,
                ..
            } => relists.push((added, modified, deleted)),
            Update::Resumed { .. } => {}
            Update::Error(status) => panic!("the watch ended: {status}"),
        }
    }
}

/// `kcm watch pods --resource-version N`, a cut, changes (deletes of objects that existed
/// at N, modifications, creates), a compaction past N, a restore: replaying what the watch
/// delivers onto etcd's state at N yields etcd's state; every object deleted in the gap
/// arrives as DELETED, nothing the caller holds comes again as ADDED, revisions never go
/// backwards. A single-object watch of a deleted and of a modified object, likewise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_a_callers_revision_keeps_its_contract_through_a_cut_and_compaction() {
    with_timeout(LIMIT, async {
        let Some(env) = env().await else { return };
        let ops = (0..N_PODS)
            .map(|i| {
                TxnOp::put(
                    pod_key("ns", &name(i)),
                    pod_json("ns", &name(i), "x").to_string(),
                    None,
                )
            })
            .collect();
        write_batched(&env.client, ops).await;
        let n = current_revision(&env.client).await;
        let at_n = etcd_state(&env.client, n).await;
        assert_eq!(at_n.len(), N_PODS);

        let proxy = FaultProxy::start(env.etcd.client_addr()).await;
        let watcher = watcher_via(proxy.endpoint()).await;
        let mut list = watcher
            .resumable_list::<Pod>(Some("ns"), &n.to_string(), etcd_watcher::everything())
            .unwrap()
            .with_backoff(SHORT_BACKOFF);
        let (gone, changed) = (name(0), name(1));
        let mut single_deleted = watcher
            .resumable_object::<Pod>("ns", &gone, &n.to_string())
            .unwrap()
            .with_backoff(SHORT_BACKOFF);
        let mut single_modified = watcher
            .resumable_object::<Pod>("ns", &changed, &n.to_string())
            .unwrap()
            .with_backoff(SHORT_BACKOFF);

        // One change each watch sees live, so every watch is open when the cut comes.
        let touched = put_pod(&env.client, "ns", &gone, "touched").await;
        let touched_too = put_pod(&env.client, "ns", &changed, "touched").await;
        let mut state = at_n.clone();
        let (mut last, mut relists) = (0, Vec::new());
        follow(&mut list, &mut state, &mut last, &mut relists, |s| {
            s.get(&format!("ns/{changed}"))
                .is_some_and(|p| p.metadata.resource_version.unwrap().0 == touched_too)
        })
        .await;
        let mut one_deleted: BTreeMap<String, Pod> = at_n
            .iter()
            .filter(|(k, _)| **k == format!("ns/{gone}"))
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect();
        let mut one_modified: BTreeMap<String, Pod> = at_n
            .iter()
            .filter(|(k, _)| **k == format!("ns/{changed}"))
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect();
        let (mut last_deleted, mut last_modified) = (0, 0);
        let (mut relists_deleted, mut relists_modified) = (Vec::new(), Vec::new());
        let at = |revision: i64| {
            move |s: &BTreeMap<String, Pod>| {
                s.values()
                    .any(|p| p.metadata.resource_version.unwrap().0 == revision)
            }
        };
        follow(
            &mut single_deleted,
            &mut one_deleted,
            &mut last_deleted,
            &mut relists_deleted,
            at(touched),
        )
        .await;
        follow(
            &mut single_modified,
            &mut one_modified,
            &mut last_modified,
            &mut relists_modified,
            at(touched_too),
        )
        .await;

        proxy.cut();
        // In the gap: a third of the objects that existed at N deleted (the single
        // watch's among them), a third modified, as many new ones created.
        let third = N_PODS / 3;
        let mut ops: Vec<TxnOp> = (0..third)
            .map(|i| TxnOp::delete(pod_key("ns", &name(i * 3)), None))
            .collect();
        ops.extend((0..third).map(|i| {
            let name = name(i * 3 + 1);
            TxnOp::put(
                pod_key("ns", &name),
                pod_json("ns", &name, "changed").to_string(),
                None,
            )
        }));
        ops.extend((0..third).map(|i| {
            let name = name(N_PODS + i);
            TxnOp::put(
                pod_key("ns", &name),
                pod_json("ns", &name, "new").to_string(),
                None,
            )
        }));
        write_batched(&env.client, ops).await;
        let compacted = env.etcd.compact().await;
        assert!(compacted > touched_too);
        let expected = etcd_state(&env.client, 0).await;
        proxy.restore();

        let want = summary(&expected);
        follow(&mut list, &mut state, &mut last, &mut relists, |s| {
            summary(s) == want
        })
        .await;
        assert_eq!(
            relists,
            vec![(third, third, third)],
            "one relist, with every change of the gap"
        );
        assert!(
            list.metrics()
                .relists
                .load(std::sync::atomic::Ordering::Relaxed)
                >= 1
        );

        follow(
            &mut single_deleted,
            &mut one_deleted,
            &mut last_deleted,
            &mut relists_deleted,
            |s| s.is_empty(),
        )
        .await;
        assert_eq!(relists_deleted, vec![(0, 0, 1)], "the delete arrives");
        let modified_want = expected[&format!("ns/{changed}")].metadata.resource_version;
        follow(
            &mut single_modified,
            &mut one_modified,
            &mut last_modified,
            &mut relists_modified,
            |s| s.values().next().unwrap().metadata.resource_version == modified_want,
        )
        .await;
        assert_eq!(relists_modified, vec![(0, 1, 0)]);
    })
    .await;
}

/// A start revision that is already compacted is a 410 for the caller, list and object
/// watch alike: its state at N cannot be read, so no contract can be kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_revision_already_compacted_is_a_410() {
    with_timeout(LIMIT, async {
        let Some(env) = env().await else { return };
        let old = put_pod(&env.client, "ns", "a", "x").await;
        put_pod(&env.client, "ns", "a", "y").await;
        env.etcd.compact().await;
        let mut list = env
            .watcher
            .resumable_list::<Pod>(
                Some("ns"),
                &(old - 1).to_string(),
                etcd_watcher::everything(),
            )
            .unwrap();
        let mut object = env
            .watcher
            .resumable_object::<Pod>("ns", "a", &(old - 1).to_string())
            .unwrap();
        for watch in [&mut list, &mut object] {
            match tokio::time::timeout(CATCH_UP, watch.next()).await {
                Ok(Update::Error(status)) => {
                    assert_eq!(status.code, 410, "{status}");
                    assert!(status.message.contains("too old"), "{status}");
                }
                other => panic!("expected a 410, got {other:?}"),
            }
        }
    })
    .await;
}

/// Keys deeper than `{kind}/{namespace}/{name}` are skipped by the watch (and counted),
/// exactly as `get` and the manager skip them: `pods/default/x/y` is never shown as pod
/// `y`, and deleting it emits no DELETED for the real pod `y`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deeper_key_is_never_shown_as_another_object() {
    with_timeout(LIMIT, async {
        let Some(mut env) = env().await else { return };
        let deep = format!("{}x/y", pod_key("ns", ""));
        put(&env.client, &deep, pod_json("ns", "y", "deep").to_string()).await;
        let mut watch = env
            .watcher
            .resumable_list::<Pod>(None, "", etcd_watcher::everything())
            .unwrap();
        let mut one_shot = env
            .watcher
            .watch_list::<Pod>(None, "", etcd_watcher::everything())
            .unwrap();
        // The resumable watch starts when first polled: let it list (the deep key among
        // what it lists) before the writes.
        match tokio::time::timeout(CATCH_UP, watch.next()).await {
            Ok(Update::Relisted { added: 0, .. }) => {}
            other => panic!("expected an empty list, got {other:?}"),
        }
        put(
            &env.client,
            &deep,
            pod_json("ns", "y", "deeper").to_string(),
        )
        .await;
        let y = put_pod(&env.client, "ns", "y", "real").await;
        delete(&mut env.client, &deep).await;
        let done = put_pod(&env.client, "ns", "zz-done", "x").await;

        let mut seen = Vec::new();
        loop {
            match tokio::time::timeout(CATCH_UP, watch.next())
                .await
                .expect("updates")
            {
                Update::Event(event, _) => {
                    let rv = event.revision().unwrap();
                    seen.push(format!(
                        "{} {}",
                        event.type_name(),
                        event.object().unwrap().metadata.key()
                    ));
                    if rv == done {
                        break;
                    }
                }
                Update::Error(status) => panic!("{status}"),
                _ => {}
            }
        }
        assert_eq!(seen, ["ADDED ns/y", "ADDED ns/zz-done"], "rv of y: {y}");
        let skipped = watch
            .metrics()
            .skipped_keys
            .load(std::sync::atomic::Ordering::Relaxed);
        let decode_errors = watch
            .metrics()
            .decode_errors
            .load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            (skipped, decode_errors),
            (3, 0),
            "the listed deep key, its update and its delete"
        );

        let mut seen = Vec::new();
        loop {
            let event = tokio::time::timeout(CATCH_UP, futures::StreamExt::next(&mut one_shot))
                .await
                .expect("events")
                .expect("open");
            seen.push(format!(
                "{} {}",
                event.type_name(),
                event.object().unwrap().metadata.key()
            ));
            if event.revision() == Some(done) {
                break;
            }
        }
        assert_eq!(seen, ["ADDED ns/y", "ADDED ns/zz-done"]);
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// The controller manager through a restored etcd and through connection resets

/// Flags for a manager whose connection to etcd gets cut: the fastest keepalive etcd
/// tolerates, and a sync period long enough that convergence must come from the watches.
const MANAGER_FLAGS: [&str; 6] = [
    "--etcd-keepalive",
    "5s",
    "--etcd-keepalive-timeout",
    "2s",
    "--sync-period",
    "60s",
];

/// After etcd is restored from a snapshot its revision goes backwards. The manager's
/// watches notice (a warning, a metric), list from scratch, and a controller created
/// afterwards gets its pods from the watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_rewound_by_a_snapshot_restore_is_noticed_and_the_manager_converges() {
    with_timeout(LIMIT, async {
        let Some(mut env) = env().await else { return };
        let mut manager = crate::support::kcm::Kcm::start(
            &[
                &["--etcd-servers", &env.etcd.endpoint()][..],
                &MANAGER_FLAGS[..],
            ]
            .concat(),
            &[],
        )
        .await;
        put_controller(&env.client, "rc", "before", "before", 2).await;
        wait_converged_within(CATCH_UP, &env.client, "rc", "before", "before", 2).await;
        let dir = tempfile::tempdir().expect("temp dir");
        let snapshot = dir.path().join("backup.db");
        env.etcd.snapshot(&snapshot);
        let backed_up = current_revision(&env.client).await;
        // Work after the backup pushes the revision well past it.
        put_controller(&env.client, "rc", "before", "before", 40).await;
        wait_converged_within(CATCH_UP, &env.client, "rc", "before", "before", 40).await;
        let peak = current_revision(&env.client).await;

        env.etcd.restore_snapshot(&snapshot).await;
        let client = env.etcd.client().await;
        let restored = current_revision(&client).await;
        assert!(
            restored < peak,
            "the restore rewound etcd ({backed_up} → {peak} → {restored})"
        );
        put_controller(&client, "rc", "after", "after", 4).await;
        // A controller created after the restore converges, and `before` is back as the
        // backup has it.
        wait_converged_within(CATCH_UP, &client, "rc", "after", "after", 4).await;
        wait_converged_within(CATCH_UP, &client, "rc", "before", "before", 2).await;
        let rewinds = manager
            .metric(r#"kcm_watch_rewinds_total{resource="pods"}"#)
            .await;
        assert!(rewinds >= 1.0, "the pod watch counted the rewind");
        assert!(
            manager.log().contains("revision went backwards"),
            "a warning says what happened"
        );
        manager.assert_running();
    })
    .await;
}

/// Ten short connection resets in a row do not leave the watches behind a growing backoff:
/// a deleted pod is replaced within seconds afterwards (it took 27-30 s when each blip
/// doubled the re-open delay), and while a watch is disconnected `/healthz` says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_short_connection_resets_leave_healing_as_fast_as_before() {
    with_timeout(LIMIT, async {
        let Some(mut env) = env().await else { return };
        let proxy = FaultProxy::start(env.etcd.client_addr()).await;
        let manager = crate::support::kcm::Kcm::start(
            &[
                &["--etcd-servers", &proxy.endpoint()][..],
                &MANAGER_FLAGS[..],
            ]
            .concat(),
            &[],
        )
        .await;
        put_controller(&env.client, "rc", "web", "web", 5).await;
        wait_converged_within(CATCH_UP, &env.client, "rc", "web", "web", 5).await;

        // While the connection is down, /healthz names the disconnected watch.
        proxy.cut();
        crate::support::eventually(CATCH_UP, "/healthz names the disconnected watch", || {
            let manager = &manager;
            async move {
                manager
                    .healthz()
                    .await
                    .is_some_and(|(_, body)| body.contains("watch pods: disconnected for"))
            }
        })
        .await;
        proxy.restore();
        // Ten short resets, each as short as it can be: every connection is reset, the
        // proxy forwards again at once, and the next reset waits until the manager has
        // connected again (so each one breaks live watches).
        for reset in 0..10 {
            crate::support::eventually(
                CATCH_UP,
                &format!("reconnected before reset {reset}"),
                || {
                    let open = proxy.open_connections();
                    async move { open > 0 }
                },
            )
            .await;
            proxy.cut();
            crate::support::eventually(
                CATCH_UP,
                &format!("reset {reset} closed every connection"),
                || {
                    let open = proxy.open_connections();
                    async move { open == 0 }
                },
            )
            .await;
            proxy.restore();
        }
        for _ in 0..3 {
            let pods = active_pods(&env.client, "rc", "web").await;
            let victim = pods.first().expect("a pod").clone();
            delete(&mut env.client, &objects::pod_key("rc", &victim)).await;
            // A replacement within 5 s of the delete.
            wait_converged_within(Duration::from_secs(5), &env.client, "rc", "web", "web", 5).await;
        }
    })
    .await;
}
