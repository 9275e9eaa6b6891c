//! Overlapping controllers (kubernetes #2210) through the real binaries against a real etcd:
//! two controllers written straight to etcd, as another tool would, whose pods match each
//! other's selectors. The manager keeps 2014's behaviour (they fight) but warns once per
//! pair, counts them in a metric, and `describe` shows the overlap; `create`, `run` and
//! `stop` refuse to make or stop an overlapping controller. Also the CLI's other refusal of a
//! controller the manager would mishandle: replicas beyond Kubernetes' int32.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::support::kcm::{kcm, start_manager, Output};
use crate::support::objects::{controller, controller_json, controller_key, delete, put_json};
use crate::support::{eventually, start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(120);
const CONVERGE: Duration = Duration::from_secs(60);
const SYNCS_OK: &str = r#"kcm_syncs_total{controller="replication",result="ok"}"#;
const OVERLAPPING: &str = "kcm_replication_overlapping_controllers";
/// The start of the manager's warning about `default/a` and `default/b`.
const WARNING: &str = "replication controllers default/a and default/b have overlapping selectors";

/// Asserts exit 1 with one `kcm: ` line containing each of `expected`.
#[track_caller]
fn assert_refused(output: &Output, expected: &[&str]) {
    assert_eq!(output.status.code(), Some(1), "{output:#?}");
    assert_eq!(output.stderr.lines().count(), 1, "one line: {output:#?}");
    for part in expected {
        assert!(
            output.stderr.contains(part),
            "{part:?} missing: {output:#?}"
        );
    }
}

/// A file holding `text`, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> TempFile {
        let path = std::env::temp_dir().join(format!("kcm-it-{}-{name}", std::process::id()));
        std::fs::write(&path, text).expect("write manifest");
        TempFile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 temp path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_controllers_are_warned_about_once_described_and_refused_by_the_cli() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let client = etcd.client().await;
        // b's pods (app=web,tier=fe) match a's selector (app=web): a counts them as its own.
        let a = controller_json("default", "a", 2, json!({"app": "web"}), json!({"app": "web"}));
        let b_labels = json!({"app": "web", "tier": "fe"});
        let b = controller_json("default", "b", 1, b_labels.clone(), b_labels);
        let db = controller_json("default", "db", 1, json!({"app": "db"}), json!({"app": "db"}));
        // Selects name=web, as `kcm run web` would.
        let legacy_labels = json!({"name": "web", "app": "legacy"});
        let legacy = controller_json(
            "default",
            "legacy",
            0,
            json!({"name": "web"}),
            legacy_labels,
        );
        for (name, document) in [("a", &a), ("b", &b), ("db", &db), ("legacy", &legacy)] {
            put_json(&client, &controller_key("default", name), document).await;
        }
        let manager = start_manager(&endpoint, &["--sync-period", "500ms"]).await;

        eventually(CONVERGE, "a warning about a and b", || {
            std::future::ready(!manager.warnings_about(WARNING).is_empty())
        })
        .await;
        // Several resyncs of all four controllers later, still one warning.
        let syncs = manager.metric(SYNCS_OK).await;
        eventually(CONVERGE, "three more resyncs", || {
            let manager = &manager;
            async move { manager.metric(SYNCS_OK).await >= syncs + 12.0 }
        })
        .await;
        let warnings = manager.warnings_about(WARNING);
        assert_eq!(warnings.len(), 1, "once per pair: {warnings:#?}");
        assert!(
            warnings[0].contains(
                "(a pod labelled {app=web,tier=fe} matches both); they will fight over pods"
            ),
            "{warnings:#?}"
        );
        assert_eq!(manager.warnings_about("default/db").len(), 0);
        assert_eq!(manager.metric(OVERLAPPING).await, 2.0);

        let described = kcm(&endpoint, &["describe", "rc", "a"]).await;
        assert!(
            described.stdout.contains(
                "  - its selector overlaps replicationcontrollers/b's (a pod labelled \
                 {app=web,tier=fe} matches both): the two fight over pods"
            ),
            "{described:#?}"
        );
        let described = kcm(&endpoint, &["describe", "rc", "db"]).await;
        assert!(
            described.status.success() && !described.stdout.contains("overlaps"),
            "{described:#?}"
        );

        // A third controller selecting app=web: refused, nothing written.
        let c = controller_json("default", "c", 1, json!({"app": "web"}), json!({"app": "web"}));
        let mut c = c;
        c["metadata"].as_object_mut().unwrap().remove("uid");
        c["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("creationTimestamp");
        let file = TempFile::new("c.json", &c.to_string());
        assert_refused(
            &kcm(&endpoint, &["create", "-f", file.path()]).await,
            &[
                "replicationcontrollers/c: its selector app=web overlaps \
                 replicationcontrollers/a (a pod labelled {app=web} matches both), \
                 replicationcontrollers/b (a pod labelled {app=web,tier=fe} matches both)",
            ],
        );
        assert!(controller(&client, "default", "c").await.is_none());
        // `kcm apply` creates through the same check.
        assert_refused(
            &kcm(&endpoint, &["apply", "-f", file.path()]).await,
            &["replicationcontrollers/c: its selector app=web overlaps replicationcontrollers/a"],
        );
        assert!(controller(&client, "default", "c").await.is_none());
        // `kcm run web` selects name=web, which legacy's pods carry.
        assert_refused(
            &kcm(&endpoint, &["run", "web", "--image", "nginx"]).await,
            &["replicationcontrollers/web: its selector name=web overlaps replicationcontrollers/legacy"],
        );
        assert!(controller(&client, "default", "web").await.is_none());

        // Stopping a would delete b's pods: refused, a left as it was.
        assert_refused(
            &kcm(&endpoint, &["stop", "rc", "a"]).await,
            &[
                "cannot stop replicationcontrollers/a: its selector overlaps \
                 replicationcontrollers/b",
                "`kcm delete rc a`",
            ],
        );
        let a_now = controller(&client, "default", "a").await.unwrap();
        assert_eq!(a_now["spec"]["replicas"], 2);

        // Deleting b ends the overlap; writing it again starts a new one, warned about anew.
        delete(&client, &controller_key("default", "b")).await;
        eventually(CONVERGE, "the overlap metric to drop to 0", || {
            let manager = &manager;
            async move { manager.metric(OVERLAPPING).await == 0.0 }
        })
        .await;
        put_json(&client, &controller_key("default", "b"), &b).await;
        eventually(CONVERGE, "a second warning about a and b", || {
            std::future::ready(manager.warnings_about(WARNING).len() == 2)
        })
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_refuses_replicas_beyond_int32_naming_the_field_and_the_limit() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let client = etcd.client().await;
        let mut web = controller_json(
            "default",
            "web",
            2_147_483_648,
            json!({"app": "web"}),
            json!({"app": "web"}),
        );
        web["metadata"].as_object_mut().unwrap().remove("uid");
        let file = TempFile::new("huge.json", &web.to_string());
        assert_refused(
            &kcm(&endpoint, &["create", "-f", file.path()]).await,
            &["spec.replicas: must be <= 2147483647 (Kubernetes' int32 limit), got 2147483648"],
        );
        for args in [
            &["resize", "rc", "web", "--replicas", "2147483648"][..],
            &["run", "web", "--image", "nginx", "--replicas", "2147483648"],
        ] {
            let output = kcm(&endpoint, args).await;
            assert_eq!(output.status.code(), Some(2), "usage error: {output:#?}");
            assert!(
                output.stderr.contains("--replicas")
                    && output
                        .stderr
                        .contains("2147483648 is not in 0..=2147483647"),
                "{output:#?}"
            );
        }
        assert!(controller(&client, "default", "web").await.is_none());
    })
    .await;
}
