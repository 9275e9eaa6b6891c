//! Silent hangs made visible (issue 12), through the real `kcm` binary against a real etcd:
//! a watch whose connections keep dropping, etcd's NOSPACE alarm, and a request over
//! etcd's size limit. Each says so once per change of state, in the log, in `/metrics`
//! and in `/healthz`, and the CLI explains etcd's raw errors.

use std::time::Duration;

use crate::support::kcm::{start_manager, Kcm};
use crate::support::{eventually, start_etcd, with_timeout, FaultProxy};

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
