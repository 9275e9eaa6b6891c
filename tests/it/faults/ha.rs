//! Beyond one machine: a 3-member etcd cluster losing (SIGKILL) or hanging (SIGSTOP) the
//! member kcm's watch is on, fenced writes in the registry, and several
//! `kcm controller-manager --leader-elect` processes failing over, with every claim checked
//! against etcd's own history (election keys and pod writes read back revision by revision).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions, SortOrder, SortTarget};
use kcm::api::{ObjectMeta, Pod};
use kcm::client::{ClientConfig, EndpointMonitor};
use kcm::etcd_watcher::{everything, RawKind, Update, Watcher};
use kcm::registry::{Fence, FenceSlot, Registry, StorageError, FENCING_TOKEN_ANNOTATION};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::support::cluster::{start_cluster, Cluster};
use crate::support::history::{self, HistoryEvent};
use crate::support::kcm::{metric_value, start_manager, Kcm};
use crate::support::objects::{
    current_revision, pod_count_bounded, put_controller, scale, wait_converged_bounded, CONVERGE,
};
use crate::support::{eventually, start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(150);
/// The lease of the election tests: short, so a SIGKILLed leader is replaced quickly.
const LEASE: Duration = Duration::from_secs(3);
/// The election's key prefix under the default name and prefix.
const ELECTION: &str = "/registry/elections/kcm-controller-manager/";
/// Written last by [`read_history`], so it knows where the history ends. Under the prefix
/// but under no kind's directory, so no controller watches it.
const HISTORY_END: &str = "/registry/~history-end";

// ---------------------------------------------------------------------------------------------
// etcd's history, and the leadership terms and pod writes in it

/// Every event under `/registry/` after revision `after`, up to now, in revision order.
async fn read_history(client: &Client, after: i64) -> Vec<HistoryEvent> {
    history::read(client, "/registry/", "/registry0", after, HISTORY_END).await
}

/// One leadership term as etcd's history shows it: the leader key (the alive election key
/// with the lowest create revision), its create revision (the fencing token), the value it
/// campaigned with, and the revisions at which it started and stopped leading.
#[derive(Debug, Clone, PartialEq)]
struct Term {
    key: String,
    token: i64,
    identity: String,
    start: i64,
    end: Option<i64>,
}

/// The terms in `history`, in order. Each starts where the previous one ended, so at every
/// revision from the first start on exactly one term leads, the way etcd's election decides.
fn terms(history: &[HistoryEvent]) -> Vec<Term> {
    // Alive election keys by create revision.
    let mut alive: BTreeMap<i64, (String, String)> = BTreeMap::new();
    let mut terms: Vec<Term> = Vec::new();
    for event in history.iter().filter(|e| e.key.starts_with(ELECTION)) {
        if event.put {
            alive.insert(
                event.create_revision,
                (
                    event.key.clone(),
                    String::from_utf8_lossy(&event.value).into_owned(),
                ),
            );
        } else {
            alive.retain(|_, (key, _)| *key != event.key);
        }
        let leader = alive
            .iter()
            .next()
            .map(|(token, (key, identity))| (*token, key.clone(), identity.clone()));
        let current = terms.last().filter(|t| t.end.is_none()).map(|t| t.token);
        if leader.as_ref().map(|l| l.0) != current {
            if let Some(last) = terms.last_mut().filter(|t| t.end.is_none()) {
                last.end = Some(event.revision);
            }
            if let Some((token, key, identity)) = leader {
                terms.push(Term {
                    key,
                    token,
                    identity,
                    start: event.revision,
                    end: None,
                });
            }
        }
    }
    terms
}

/// The term leading at `revision`.
fn leader_at(terms: &[Term], revision: i64) -> Option<&Term> {
    terms
        .iter()
        .find(|t| t.start <= revision && t.end.is_none_or(|end| revision < end))
}

/// Every pod creation in `history`: (revision, key, the fencing token it carries).
fn pod_creates(history: &[HistoryEvent]) -> Vec<(i64, String, Option<i64>)> {
    history
        .iter()
        .filter(|e| {
            e.put && e.key.starts_with("/registry/pods/") && e.create_revision == e.revision
        })
        .map(|e| {
            let pod: Value = serde_json::from_slice(&e.value).expect("pod JSON");
            let token = pod["metadata"]["annotations"][FENCING_TOKEN_ANNOTATION]
                .as_str()
                .map(|t| t.parse::<i64>().expect("numeric fencing token"));
            (e.revision, e.key.clone(), token)
        })
        .collect()
}

/// Checks that every pod was created under the term that led at its revision, with that
/// term's token, and that terms follow one another without a gap (there was always a
/// candidate waiting). Returns the terms.
#[track_caller]
fn assert_writes_only_by_the_leader(history: &[HistoryEvent]) -> Vec<Term> {
    let terms = terms(history);
    assert!(!terms.is_empty(), "nobody was ever elected");
    for pair in terms.windows(2) {
        assert_eq!(
            pair[0].end,
            Some(pair[1].start),
            "a gap between terms: {terms:#?}"
        );
    }
    for (revision, key, token) in pod_creates(history) {
        let leader = leader_at(&terms, revision)
            .unwrap_or_else(|| panic!("{key} created at {revision} with no leader: {terms:#?}"));
        assert_eq!(
            token,
            Some(leader.token),
            "{key} created at revision {revision} by another term than the leader's \
             ({leader:?}); terms: {terms:#?}"
        );
    }
    terms
}

// ---------------------------------------------------------------------------------------------
// Fencing at the registry: deterministic, no processes

fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: name.to_string(),
            namespace: "fence".to_string(),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

/// Campaigns in `election` on a fresh lease of 60 s that nobody renews; returns the
/// leader key, its create revision and the lease.
async fn campaign(client: &Client, election: &str, value: &str) -> (Vec<u8>, i64, i64) {
    let mut client = client.clone();
    let lease = client.lease_grant(60, None).await.expect("grant").id();
    let response = client
        .campaign(election, value, lease)
        .await
        .expect("campaign");
    let leader = response.leader().expect("leader key");
    (leader.key().to_vec(), leader.rev(), lease)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_write_fails_in_etcd_once_the_leader_key_is_gone_or_superseded() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let mut client = etcd.client().await;
        let election = "/registry/elections/fence-test";
        let (key, token, lease) = campaign(&client, election, "a").await;
        let slot = FenceSlot::default();
        let lost = CancellationToken::new();
        slot.set(Fence::new(key.clone(), token, lost.clone()));
        let registry = Registry::new(&client, "/registry")
            .unwrap()
            .with_fence(slot.clone());

        // While the term holds, every kind of write goes through, and creates carry the token.
        let created = registry
            .create(&pod("a"))
            .await
            .expect("create while leading");
        assert_eq!(
            created.metadata.annotations.get(FENCING_TOKEN_ANNOTATION),
            Some(&token.to_string())
        );
        let updated = registry
            .update(&created)
            .await
            .expect("update while leading");
        registry.create(&pod("b")).await.expect("create b");
        registry
            .delete::<Pod>("fence", "b", None)
            .await
            .expect("unguarded delete while leading");

        // The lease ends behind the leader's back (it was paused): the local fence still
        // looks valid, so the writes reach etcd, which refuses every one of them.
        client.lease_revoke(lease).await.expect("revoke");
        let before = current_revision(&client).await;
        let refused = registry.create(&pod("c")).await.unwrap_err();
        assert!(refused.is_fenced(), "{refused}");
        assert!(refused.to_string().contains("not the leader"), "{refused}");
        assert!(lost.is_cancelled(), "a fenced refusal ends the term");
        assert_eq!(
            current_revision(&client).await,
            before,
            "nothing was written"
        );

        // Later writes are refused without asking etcd.
        for result in [
            registry.update(&updated).await.map(|_| ()),
            registry
                .delete::<Pod>("fence", "a", updated.metadata.resource_version)
                .await
                .map(|_| ()),
            registry.delete::<Pod>("fence", "a", None).await.map(|_| ()),
        ] {
            assert!(
                matches!(result, Err(StorageError::Fenced { .. })),
                "{result:?}"
            );
        }
        assert!(
            registry.get::<Pod>("fence", "a").await.is_ok(),
            "pod a is untouched"
        );

        // A stale fence also fails while a *later* term holds the election: the leader key
        // exists again, with a higher create revision.
        let (_, later, _) = campaign(&client, election, "b").await;
        assert!(later > token);
        let stale = FenceSlot::default();
        stale.set(Fence::new(key, token, CancellationToken::new()));
        let stale_registry = Registry::new(&client, "/registry")
            .unwrap()
            .with_fence(stale);
        let refused = stale_registry.create(&pod("d")).await.unwrap_err();
        assert!(refused.is_fenced(), "{refused}");

        // An unfenced registry is not affected.
        Registry::new(&client, "/registry")
            .unwrap()
            .create(&pod("e"))
            .await
            .expect("unfenced create");
        let pods = client
            .get(
                "/registry/pods/fence/",
                Some(GetOptions::new().with_prefix().with_keys_only()),
            )
            .await
            .unwrap();
        let names: Vec<&str> = pods.kvs().iter().map(|kv| kv.key_str().unwrap()).collect();
        assert_eq!(names, ["/registry/pods/fence/a", "/registry/pods/fence/e"]);
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Several managers with --leader-elect

/// Flags of an electing manager besides `--etcd-servers`; `lease` is
/// `--leader-elect-lease-duration`.
fn elect_args(lease: &str) -> [&str; 11] {
    [
        "--leader-elect",
        "--leader-elect-lease-duration",
        lease,
        "--controllers",
        "replication",
        "--sync-period",
        "30s",
        "--etcd-keepalive",
        "5s",
        "--etcd-keepalive-timeout",
        "2s",
    ]
}

/// Waits until exactly one of `candidates` (indices into `managers`) says it leads and the
/// other candidates say they stand by; returns the leader's index.
async fn wait_single_leader(
    managers: &[Kcm],
    candidates: &[usize],
    within: Duration,
    what: &str,
) -> usize {
    let leader = std::cell::Cell::new(None);
    eventually(within, what, || {
        let leader = &leader;
        async move {
            let mut leaders = Vec::new();
            let mut standbys = 0;
            for &i in candidates {
                if managers[i].is_leader().await {
                    leaders.push(i);
                } else if managers[i].is_standby().await {
                    standbys += 1;
                }
            }
            if leaders.len() == 1 && standbys + 1 == candidates.len() {
                leader.set(Some(leaders[0]));
                true
            } else {
                false
            }
        }
    })
    .await;
    leader.get().expect("set when the wait succeeded")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_managers_elect_one_leader_and_fail_over_on_sigkill_and_sigterm() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let start = current_revision(&client).await;
        let args = elect_args("3s");
        let mut managers = Vec::new();
        for _ in 0..3 {
            managers.push(start_manager(&etcd.endpoint(), &args).await);
        }
        let first = wait_single_leader(&managers, &[0, 1, 2], CONVERGE, "one leader").await;
        assert_eq!(managers[first].metric("kcm_leader").await, 1.0);
        for i in (0..3).filter(|i| *i != first) {
            assert_eq!(managers[i].metric("kcm_leader").await, 0.0);
        }
        put_controller(&client, "ha", "web", "web", 0).await;
        scale(&client, "ha", "web", 20).await;
        wait_converged_bounded(&client, "ha", "web", 20).await;

        // SIGKILL: nobody resigns; a standby leads once the lease has expired.
        managers[first].signal(libc::SIGKILL);
        let killed = Instant::now();
        let rest: Vec<usize> = (0..3).filter(|i| *i != first).collect();
        let second = wait_single_leader(
            &managers,
            &rest,
            LEASE + Duration::from_secs(2),
            "a standby to lead within the lease + 2s after SIGKILL",
        )
        .await;
        eprintln!("takeover after SIGKILL: {:?}", killed.elapsed());
        scale(&client, "ha", "web", 40).await;
        wait_converged_bounded(&client, "ha", "web", 40).await;

        // SIGTERM: the leader stops its controllers and resigns; the last standby leads at once.
        managers[second].signal(libc::SIGTERM);
        let terminated = Instant::now();
        let third = rest.iter().copied().find(|i| *i != second).unwrap();
        wait_single_leader(
            &managers,
            &[third],
            Duration::from_secs(2),
            "the last standby to lead within 2s after SIGTERM",
        )
        .await;
        eprintln!("takeover after SIGTERM: {:?}", terminated.elapsed());
        let status = managers[second].wait_exit(Duration::from_secs(15)).await;
        assert!(status.success(), "SIGTERM exits 0: {status:?}");
        assert!(managers[second].log().contains("resigned leadership"));
        scale(&client, "ha", "web", 50).await;
        wait_converged_bounded(&client, "ha", "web", 50).await;

        // etcd's history: three terms in a row, one per manager, and every pod created by
        // the term leading at the time.
        let history = read_history(&client, start).await;
        let terms = assert_writes_only_by_the_leader(&history);
        let identities: Vec<String> = terms.iter().map(|t| t.identity.clone()).collect();
        let expected: Vec<String> = [first, second, third]
            .iter()
            .map(|&i| format!("-{}", managers[i].pid()))
            .collect();
        assert_eq!(terms.len(), 3, "{terms:#?}");
        for (identity, pid) in identities.iter().zip(&expected) {
            assert!(
                identity.ends_with(pid),
                "{identities:?} vs pids {expected:?}"
            );
        }
        assert!(terms[2].end.is_none(), "the third term still leads");
        let creates = pod_creates(&history);
        assert!(
            terms
                .iter()
                .all(|t| creates.iter().any(|(_, _, token)| *token == Some(t.token))),
            "every term created pods: {terms:#?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_paused_past_its_lease_writes_nothing_after_its_successor_is_elected() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let start = current_revision(&client).await;
        let args = elect_args("2s");
        let managers = vec![start_manager(&etcd.endpoint(), &args).await];
        wait_single_leader(&managers, &[0], CONVERGE, "the first manager to lead").await;
        let mut managers = managers;
        managers.push(start_manager(&etcd.endpoint(), &args).await);
        wait_single_leader(&managers, &[0, 1], CONVERGE, "a leader and a standby").await;
        put_controller(&client, "fence", "web", "web", 0).await;

        // Pause the leader in the middle of a scale-up, with creates under way.
        scale(&client, "fence", "web", 300).await;
        eventually(CONVERGE, "the scale-up to begin", || async {
            pod_count_bounded(&client, "fence")
                .await
                .is_some_and(|n| n >= 10)
        })
        .await;
        managers[0].signal(libc::SIGSTOP);
        let paused_at = pod_count_bounded(&client, "fence").await.unwrap();
        eprintln!("leader paused at {paused_at} pods");

        // The standby takes over once the lease expired, and finishes the job; then the
        // controller shrinks below what the paused leader had created, so its view (300
        // wanted, pods it created now gone) is stale in the direction that makes it create.
        wait_single_leader(
            &managers,
            &[1],
            Duration::from_secs(10),
            "the standby to lead",
        )
        .await;
        wait_converged_bounded(&client, "fence", "web", 300).await;
        scale(&client, "fence", "web", 5).await;
        wait_converged_bounded(&client, "fence", "web", 5).await;
        let new_term = current_revision(&client).await;

        // Thaw the old leader: it notices that its term is over and stands by.
        managers[0].signal(libc::SIGCONT);
        wait_single_leader(&managers, &[0, 1], CONVERGE, "the old leader to stand by").await;
        assert!(managers[1].is_leader().await);
        assert!(
            managers[0].log().contains("leadership lost"),
            "the old leader logs the loss"
        );
        wait_converged_bounded(&client, "fence", "web", 5).await;

        // Then the new leader's lease ends behind its back (an operator revoked it): the
        // standby leads at once, and the deposed leader stops at its next renewal or at its
        // first write, which etcd refuses, whichever comes first.
        eventually(CONVERGE, "the old leader to campaign again", || async {
            let keys = client
                .clone()
                .get(
                    ELECTION,
                    Some(GetOptions::new().with_prefix().with_count_only()),
                )
                .await
                .expect("count candidates");
            keys.count() == 2
        })
        .await;
        let leader_key = client
            .clone()
            .get(
                ELECTION,
                Some(
                    GetOptions::new()
                        .with_prefix()
                        .with_sort(SortTarget::Create, SortOrder::Ascend)
                        .with_limit(1),
                ),
            )
            .await
            .expect("read the leader key");
        let lease = leader_key.kvs()[0].lease();
        client.clone().lease_revoke(lease).await.expect("revoke");
        scale(&client, "fence", "web", 50).await;
        eventually(
            CONVERGE,
            "the standby to lead and the deposed one to stand by",
            || async { managers[0].is_leader().await && managers[1].is_standby().await },
        )
        .await;
        wait_converged_bounded(&client, "fence", "web", 50).await;

        let history = read_history(&client, start).await;
        let terms = assert_writes_only_by_the_leader(&history);
        assert_eq!(terms.len(), 3, "{terms:#?}");
        for (term, manager) in terms.iter().zip([0, 1, 0]) {
            let pid = format!("-{}", managers[manager].pid());
            assert!(term.identity.ends_with(&pid), "{terms:#?}");
        }
        let (first, successor) = (&terms[0], &terms[1]);
        assert!(successor.start < new_term);
        let late_old_writes: Vec<_> = pod_creates(&history)
            .into_iter()
            .filter(|(revision, _, token)| {
                *revision > successor.start && *token == Some(first.token)
            })
            .collect();
        assert!(
            late_old_writes.is_empty(),
            "pods created by the old term after the new election: {late_old_writes:?}"
        );
        for (i, manager) in managers.iter().enumerate() {
            let refused = manager
                .log()
                .lines()
                .filter(|line| line.contains("etcd refused a write"))
                .count();
            eprintln!("manager {i}: {refused} terms ended by a write etcd refused");
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// A 3-member cluster losing the member under the watches

#[derive(Clone, Copy, Debug)]
enum Fault {
    Kill,
    /// SIGSTOP for this long, then SIGCONT.
    Pause(Duration),
}

/// The watchers each member serves.
async fn watchers(cluster: &Cluster) -> Vec<u64> {
    let mut counts = Vec::new();
    for i in 0..3 {
        counts.push(cluster.watchers(i).await.unwrap_or(0));
    }
    counts
}

/// A manager scales 0 → 200 on a 3-member cluster while the member serving its watches
/// fails; a resumable watch opened on that same member delivers exactly etcd's history.
async fn member_failure_scenario(fault: Fault) {
    let Some(mut cluster) = start_cluster(3).await else {
        return;
    };
    let client = cluster.client().await;
    put_controller(&client, "cl", "web", "web", 0).await;
    let manager = start_manager(
        &cluster.endpoints_arg(),
        &[
            "--controllers",
            "replication",
            "--sync-period",
            "30s",
            // etcd closes connections that ping more often than every 5 s.
            "--etcd-keepalive",
            "5s",
            "--etcd-keepalive-timeout",
            "2s",
            "--etcd-request-timeout",
            "3s",
            "-v",
        ],
    )
    .await;

    // kcm watches controllers and pods: find the member serving most of them.
    eventually(CONVERGE, "kcm's two watches to open", || async {
        watchers(&cluster).await.iter().sum::<u64>() == 2
    })
    .await;
    let before = watchers(&cluster).await;
    let victim = (0..3).max_by_key(|i| before[*i]).unwrap();
    let survivors: Vec<usize> = (0..3).filter(|i| *i != victim).collect();

    // Our own resumable watch: opened through the victim alone, then given the others, so
    // it is on the victim when it fails and must resume elsewhere.
    let config = ClientConfig {
        keepalive_interval: Duration::from_secs(5),
        keepalive_timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(3),
        ..ClientConfig::new([cluster.endpoint(victim)])
    };
    let watch_client = kcm::client::build(&config).await.expect("watch client");
    let registry = Registry::new(&watch_client, "/registry").unwrap();
    let from = current_revision(&client).await;
    let mut watch = Watcher::new(&watch_client, registry)
        .resumable_list::<Pod>(Some("cl"), &from.to_string(), everything())
        .unwrap();
    let (updates_tx, mut updates_rx) = mpsc::unbounded_channel();
    let pump = tokio::spawn(async move {
        loop {
            if updates_tx.send(watch.next().await).is_err() {
                return;
            }
        }
    });
    eventually(CONVERGE, "our watch to open on the victim", || async {
        cluster.watchers(victim).await == Some(before[victim] + 1)
    })
    .await;
    for &i in &survivors {
        watch_client
            .add_endpoint(cluster.endpoint(i))
            .await
            .expect("add endpoint");
    }
    let _monitor = EndpointMonitor::start(
        &watch_client,
        &ClientConfig {
            endpoints: cluster.endpoints(),
            ..config
        },
    );

    // Fail the member as soon as the scale-up has begun.
    scale(&client, "cl", "web", 200).await;
    let survivor_client = {
        let endpoints: Vec<String> = survivors.iter().map(|&i| cluster.endpoint(i)).collect();
        Client::connect(endpoints, None).await.unwrap()
    };
    eventually(CONVERGE, "the scale-up to begin", || async {
        pod_count_bounded(&survivor_client, "cl")
            .await
            .is_some_and(|n| n >= 1)
    })
    .await;
    let failed_at = Instant::now();
    match fault {
        Fault::Kill => cluster.kill(victim),
        Fault::Pause(_) => cluster.pause(victim),
    }
    wait_converged_bounded(&survivor_client, "cl", "web", 200).await;
    eprintln!(
        "{fault:?}: converged on 200 pods {:?} after the member failed",
        failed_at.elapsed()
    );
    if let Fault::Pause(duration) = fault {
        assert!(
            failed_at.elapsed() < duration,
            "converged only after the pause ended"
        );
        // The scenario's length, not a wait for a condition.
        tokio::time::sleep_until((failed_at + duration).into()).await;
        cluster.resume(victim);
    }
    eventually(
        CONVERGE,
        "kcm to resume its watch on another member",
        || async {
            let metrics = manager.metrics().await;
            metric_value(&metrics, r#"kcm_watch_restarts_total{resource="pods"}"#)
                + metric_value(
                    &metrics,
                    r#"kcm_watch_restarts_total{resource="replicationcontrollers"}"#,
                )
                >= 1.0
        },
    )
    .await;

    // Our watch delivered exactly etcd's history of the namespace's pods: every revision
    // once, in order, none missing.
    let history: Vec<(i64, String, RawKind)> = read_history(&survivor_client, from)
        .await
        .into_iter()
        .filter(|e| e.key.starts_with("/registry/pods/cl/"))
        .map(|e| {
            let kind = if e.put { RawKind::Put } else { RawKind::Delete };
            (e.revision, e.key, kind)
        })
        .collect();
    assert_eq!(history.len(), 200, "200 creates, nothing else");
    let last = history.last().unwrap().0;
    let mut delivered = Vec::new();
    let mut resumed = 0;
    while delivered
        .last()
        .is_none_or(|(revision, _, _)| *revision < last)
    {
        let update = tokio::time::timeout(CONVERGE, updates_rx.recv())
            .await
            .unwrap_or_else(|_| panic!("our watch stalled after {} events", delivered.len()))
            .expect("the pump runs");
        match update {
            Update::Event(_, Some(raw)) => delivered.push((raw.mod_revision, raw.key, raw.kind)),
            Update::Event(event, None) => panic!("an event without its etcd event: {event:?}"),
            Update::Resumed { .. } => resumed += 1,
            Update::Relisted { .. } => panic!("no compaction, so no relist: {update:?}"),
            Update::Error(status) => panic!("the watch ended: {status}"),
        }
    }
    pump.abort();
    assert!(resumed >= 1, "our watch resumed on another member");
    assert_eq!(delivered, history, "lost, repeated or reordered events");
    if let Fault::Pause(_) = fault {
        // The thawed member catches up and serves again.
        eventually(CONVERGE, "the thawed member to serve reads", || async {
            let member = cluster.member_client(victim).await;
            pod_count_bounded(&member, "cl").await == Some(200)
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_member_under_the_watches_loses_no_event_and_the_manager_converges() {
    with_timeout(LIMIT, member_failure_scenario(Fault::Kill)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pausing_the_member_under_the_watches_for_30s_loses_no_event_and_the_manager_converges() {
    with_timeout(
        LIMIT,
        member_failure_scenario(Fault::Pause(Duration::from_secs(30))),
    )
    .await;
}
