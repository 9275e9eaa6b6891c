//! Silent hangs made visible (issue 12), through the real `kcm` binary against a real etcd:
//! a watch whose connections keep dropping, etcd's NOSPACE alarm, and a request over
//! etcd's size limit. Each says so once per change of state, in the log, in `/metrics`
//! and in `/healthz`, and the CLI explains etcd's raw errors.

use std::path::Path;
use std::time::Duration;

use etcd_client::Client;
use serde_json::{json, Value};

use crate::support::kcm::{kcm, start_manager, Kcm, Output};
use crate::support::objects::{controller_json, put_controller, wait_converged};
use crate::support::{eventually, start_etcd, start_etcd_with, with_timeout, FaultProxy};

const LIMIT: Duration = Duration::from_secs(120);
/// How long the manager may take to notice a change (generous: tests run in parallel).
const SETTLE: Duration = Duration::from_secs(30);
/// The watches of `--controllers replication`, as the metrics label them.
const WATCHED: [&str; 2] = ["pods", "replicationcontrollers"];

/// The key prefix a watch of `resource` watches, as its log lines name it.
fn watched_key(resource: &str) -> &'static str {
    match resource {
        "pods" => "key=/registry/pods/",
        "replicationcontrollers" => "key=/registry/controllers/",
        other => panic!("no watch of {other}"),
    }
}

fn series(name: &str, resource: &str) -> String {
    format!("{name}{{resource=\"{resource}\"}}")
}

/// Whether every watch of `manager` has reconnected since its `restarts`-th restart.
async fn reconnected_after(manager: &Kcm, restarts: f64) -> bool {
    let metrics = manager.metrics().await;
    WATCHED.iter().all(|resource| {
        let value = |name| crate::support::kcm::metric_value(&metrics, &series(name, resource));
        value("kcm_watch_restarts_total") > restarts
            && value("kcm_watch_disconnected_seconds") == 0.0
    })
}

/// The warnings the manager logged that a watch of `resource` restarts in a loop.
fn loop_warnings(manager: &Kcm, resource: &str) -> usize {
    let key = watched_key(resource);
    manager
        .warnings_about("watch restarting in a loop")
        .iter()
        .filter(|line| line.contains(key))
        .count()
}

// ---------------------------------------------------------------------------------------------
// A watch that restarts in a loop

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_whose_connections_keep_dropping_is_reported_once_then_clears_once_stable() {
    // Cuts after which the watches count as looping, and one more while they loop.
    const CUTS: usize = kcm::etcd_watcher::LOOP_RESTARTS as usize + 1;
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let proxy = FaultProxy::start(etcd.client_addr()).await;
        let manager = start_manager(&proxy.endpoint(), &["--controllers", "replication"]).await;
        eventually(SETTLE, "the manager to answer /healthz 200", || async {
            matches!(manager.healthz().await, Some((200, _)))
        })
        .await;
        for cut in 0..CUTS {
            // Each connection is made (the watches reconnected), then cut at once.
            eventually(SETTLE, "every watch to reconnect", || {
                reconnected_after(&manager, cut as f64 - 1.0)
            })
            .await;
            proxy.cut();
            eventually(SETTLE, "the proxy to drop every connection", || async {
                proxy.open_connections() == 0
            })
            .await;
            proxy.restore();
        }
        eventually(SETTLE, "every watch to reconnect after the last cut", || {
            reconnected_after(&manager, CUTS as f64 - 1.0)
        })
        .await;

        // Looping: /healthz fails naming each watch and why, the gauge is 1, and each watch
        // warned once although it restarted once more after the warning.
        let (status, body) = manager.healthz().await.expect("/healthz answers");
        assert_eq!(status, 503, "{body}");
        for resource in WATCHED {
            assert!(
                body.contains(&format!("watch {resource}: restarting in a loop: restarted ")),
                "{body}"
            );
            assert!(body.contains("each connection to etcd lived under 10s; last error: "));
            let looping = series("kcm_watch_looping", resource);
            assert_eq!(manager.metric(&looping).await, 1.0, "{looping}");
            assert_eq!(loop_warnings(&manager, resource), 1, "{}", manager.log());
        }
        assert!(
            manager
                .metrics()
                .await
                .contains("# HELP kcm_watch_looping 1 while a watch restarts in a loop: its last 3 connections to etcd in a row each ended within 10s of being made"),
        );

        // Stable again once a connection has lived 10 s: healthy, gauge 0, one info line each.
        eventually(SETTLE, "/healthz 200 once the watches are stable", || async {
            matches!(manager.healthz().await, Some((200, _)))
        })
        .await;
        for resource in WATCHED {
            let looping = series("kcm_watch_looping", resource);
            assert_eq!(manager.metric(&looping).await, 0.0, "{looping}");
            let key = watched_key(resource);
            eventually(SETTLE, "the watch to say it is stable again", || async {
                manager
                    .log()
                    .lines()
                    .any(|line| line.contains("watch stable again") && line.contains(key))
            })
            .await;
            assert_eq!(loop_warnings(&manager, resource), 1, "{}", manager.log());
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// etcd's NOSPACE alarm and its request size limit

/// etcd's backend quota in these tests: 1 MiB, filled by about 30 writes of 40 KB.
const QUOTA_BYTES: &str = "1048576";
/// What every place that reports the NOSPACE alarm says.
const NOSPACE: &str = "etcd's space quota is exhausted (alarm NOSPACE): it refuses every write except deletes until space is freed and the alarm disarmed: `etcdctl alarm list`; free space with `etcdctl compact REV`";
const ERROR_SYNCS: &str = r#"kcm_syncs_total{controller="replication",result="error"}"#;

/// Overwrites one key with 40 KB values until etcd refuses for space (each old value stays
/// in its history until a compaction), raising its NOSPACE alarm.
async fn fill_quota(client: &Client) {
    let value = "x".repeat(40 * 1024);
    let mut client = client.clone();
    for _ in 0..200 {
        match client.put("/fill", value.as_str(), None).await {
            Ok(_) => {}
            Err(e) if e.to_string().contains("database space exceeded") => return,
            Err(e) => panic!("put /fill: {e}"),
        }
    }
    panic!("etcd never ran out of space with --quota-backend-bytes {QUOTA_BYTES}");
}

/// Writes `document` to `dir/name.json` and returns the path, for `kcm create -f`.
fn manifest(dir: &Path, name: &str, document: &Value) -> String {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, document.to_string()).expect("write manifest");
    path.to_str().expect("utf-8 temp path").to_owned()
}

/// Asserts that a command failed with one error line containing each of `expected`.
#[track_caller]
fn assert_fails_with(output: &Output, expected: &[&str]) {
    assert_eq!(output.status.code(), Some(1), "{output:#?}");
    assert_eq!(output.stderr.lines().count(), 1, "{output:#?}");
    for words in expected {
        assert!(output.stderr.contains(words), "{words:?} in {output:#?}");
    }
}

/// The lines of the manager's log that say it made progress scaling up.
fn scale_up_lines(manager: &Kcm) -> Vec<String> {
    manager
        .log()
        .lines()
        .filter(|line| line.contains("scaled up") || line.contains("scaling up"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_out_of_space_is_said_once_shown_everywhere_and_recovered_from() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd_with(&["--quota-backend-bytes", QUOTA_BYTES]).await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let client = etcd.client().await;
        // A controller that wants 3 pods, then etcd out of space before a manager runs.
        put_controller(&client, "default", "web", "web", 3).await;
        fill_quota(&client).await;

        // The manager starts all the same, says why once, and does not claim progress.
        let manager = start_manager(
            &endpoint,
            &["--controllers", "replication", "--sync-period", "1s"],
        )
        .await;
        eventually(SETTLE, "3 failed syncs of web", || async {
            manager.metric(ERROR_SYNCS).await >= 3.0
        })
        .await;
        // /healthz fails with the reason, every time it is asked (each asks etcd).
        for _ in 0..3 {
            let (status, body) = manager.healthz().await.expect("/healthz answers");
            assert_eq!(status, 503, "{body}");
            assert!(body.contains(NOSPACE), "{body}");
        }
        // However often the alarm was read, and the writes refused: one warning.
        let warnings = manager.warnings_about("alarm NOSPACE");
        assert_eq!(warnings.len(), 1, "{}", manager.log());
        assert!(warnings[0].contains(NOSPACE), "{warnings:?}");
        assert!(
            warnings[0].contains("--quota-backend-bytes"),
            "{warnings:?}"
        );
        assert_eq!(scale_up_lines(&manager), Vec::<String>::new());

        // describe blames the alarm, not a missing controller-manager.
        let described = kcm(&endpoint, &["describe", "rc", "web"]).await;
        assert!(described.status.success(), "{described:#?}");
        assert!(
            described.stdout.contains(&format!("  - {NOSPACE}")),
            "{described:#?}"
        );
        assert!(!described
            .stdout
            .contains("is `kcm controller-manager` running?"));

        // A create and a stop (whose resize is a write) explain etcd's refusal.
        let dir = tempfile::tempdir().expect("temp dir");
        let api = manifest(
            dir.path(),
            "api",
            &controller_json(
                "default",
                "api",
                1,
                json!({"app": "api"}),
                json!({"app": "api"}),
            ),
        );
        for output in [
            kcm(&endpoint, &["create", "-f", &api]).await,
            kcm(&endpoint, &["stop", "rc", "web"]).await,
        ] {
            assert_fails_with(
                &output,
                &[
                    "etcdserver: mvcc: database space exceeded; ",
                    NOSPACE,
                    "`etcdctl alarm disarm`; or restart etcd with a larger --quota-backend-bytes",
                ],
            );
        }

        // The fix the messages name works, and the manager recovers: healthy, one line
        // saying so, the pods created.
        assert!(etcd.etcdctl(&["alarm", "list"]).contains("alarm:NOSPACE"));
        let status: Value =
            serde_json::from_str(&etcd.etcdctl(&["endpoint", "status", "-w", "json"]))
                .expect("etcdctl endpoint status -w json");
        let revision = status[0]["Status"]["header"]["revision"]
            .as_i64()
            .expect("a revision in endpoint status")
            .to_string();
        etcd.etcdctl(&["compact", &revision]);
        etcd.etcdctl(&["defrag"]);
        etcd.etcdctl(&["alarm", "disarm"]);
        eventually(
            SETTLE,
            "/healthz 200 after the alarm is disarmed",
            || async { matches!(manager.healthz().await, Some((200, _))) },
        )
        .await;
        wait_converged(&client, "default", "web", "web", 3).await;
        eventually(
            SETTLE,
            "the manager to say the alarm is cleared",
            || async {
                manager
                    .log()
                    .contains("etcd's alarm NOSPACE is cleared; writes work again")
            },
        )
        .await;
        assert_eq!(manager.warnings_about("alarm NOSPACE").len(), 1);
        assert!(
            scale_up_lines(&manager)
                .iter()
                .all(|line| line.contains("scaled up") && line.contains("created=")),
            "{}",
            manager.log()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_over_etcds_request_limit_is_refused_naming_the_limit() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd_with(&["--max-request-bytes", "65536"]).await else {
            return;
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let mut big = controller_json("default", "big", 1, json!({"app": "big"}), json!({"app": "big"}));
        big["metadata"]["annotations"] = json!({ "note": "x".repeat(100 * 1024) });
        let path = manifest(dir.path(), "big", &big);
        let output = kcm(&etcd.endpoint(), &["create", "-f", &path]).await;
        assert_fails_with(
            &output,
            &[
                "etcdserver: request is too large; the object is larger than etcd accepts in one request (its --max-request-bytes",
                "raise --max-request-bytes on every etcd member",
            ],
        );
    })
    .await;
}
