//! `kcm watch` end to end: the binary against a live etcd, driven by etcdctl the way an
//! operator would, printing one wire-form event per line.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use etcd_client::Client;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, ChildStdout, Command};

use crate::support::kcm::kcm_command;
use crate::support::objects::{pod_json, pod_key};
use crate::support::{start_etcd, with_timeout, EtcdServer};

const LIMIT: Duration = Duration::from_secs(120);
/// Bound on waiting for one line of output.
const LINE_DEADLINE: Duration = Duration::from_secs(30);

/// Scripted writes with `etcdctl` (API v3) when it is installed, else with etcd-client.
/// Every write returns the revision etcd acknowledged.
struct Etcdctl {
    endpoint: String,
    bin: Option<PathBuf>,
    client: Client,
}

impl Etcdctl {
    async fn new(etcd: &EtcdServer) -> Etcdctl {
        let bin = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|dir| dir.join("etcdctl"))
            .find(|path| path.is_file());
        if bin.is_none() {
            eprintln!("etcdctl not found; writing with etcd-client instead");
        }
        Etcdctl {
            endpoint: etcd.endpoint(),
            bin,
            client: etcd.client().await,
        }
    }

    /// Runs `etcdctl -w json ARGS` and returns the header revision of its answer.
    async fn run(&self, bin: &PathBuf, args: &[&str]) -> i64 {
        let output = Command::new(bin)
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.endpoint, "-w", "json"])
            .args(args)
            .output()
            .await
            .expect("run etcdctl");
        assert!(
            output.status.success(),
            "etcdctl {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let answer: Value = serde_json::from_slice(&output.stdout).expect("etcdctl -w json output");
        answer["header"]["revision"]
            .as_i64()
            .unwrap_or_else(|| panic!("no header revision in {answer}"))
    }

    async fn put(&mut self, key: &str, value: &str) -> i64 {
        match &self.bin {
            Some(bin) => self.run(bin, &["put", key, value]).await,
            None => self
                .client
                .put(key, value, None)
                .await
                .expect("put")
                .header()
                .expect("header")
                .revision(),
        }
    }

    async fn put_pod(&mut self, namespace: &str, name: &str, app: &str) -> i64 {
        self.put(
            &pod_key(namespace, name),
            &pod_json(namespace, name, app).to_string(),
        )
        .await
    }

    async fn delete_pod(&mut self, namespace: &str, name: &str) -> i64 {
        let key = pod_key(namespace, name);
        match &self.bin {
            Some(bin) => self.run(bin, &["del", &key]).await,
            None => self
                .client
                .delete(key, None)
                .await
                .expect("delete")
                .header()
                .expect("header")
                .revision(),
        }
    }
}

/// A running `kcm watch`, killed on drop, with its output read line by line.
struct KcmWatch {
    _child: Child,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: Lines<BufReader<ChildStderr>>,
}

impl KcmWatch {
    fn spawn(args: &[&str]) -> KcmWatch {
        let mut child = kcm_command()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn kcm");
        KcmWatch {
            stdout: BufReader::new(child.stdout.take().unwrap()).lines(),
            stderr: BufReader::new(child.stderr.take().unwrap()).lines(),
            _child: child,
        }
    }

    /// Waits for the "listed at revision" notice, so that later writes arrive as watch
    /// events rather than in the list.
    async fn wait_listed(&mut self) {
        let mut seen = Vec::new();
        loop {
            let line = tokio::time::timeout(LINE_DEADLINE, self.stderr.next_line())
                .await
                .unwrap_or_else(|_| panic!("kcm did not list within {LINE_DEADLINE:?}: {seen:?}"))
                .expect("read kcm stderr")
                .unwrap_or_else(|| panic!("kcm exited before listing; stderr: {seen:?}"));
            if line.contains("listed at revision") {
                return;
            }
            seen.push(line);
        }
    }

    async fn next_line(&mut self) -> String {
        tokio::time::timeout(LINE_DEADLINE, self.stdout.next_line())
            .await
            .unwrap_or_else(|_| panic!("no output from kcm within {LINE_DEADLINE:?}"))
            .expect("read kcm stdout")
            .expect("kcm exited while output was expected")
    }
}

/// `TYPE namespace/name rv app=L` from one JSON line.
fn describe(line: &str) -> String {
    let event: Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    let object = &event["object"];
    assert_eq!(object["kind"], "Pod", "{line}");
    assert_eq!(object["apiVersion"], "v1beta3", "{line}");
    let meta = &object["metadata"];
    format!(
        "{} {}/{} {} app={}",
        event["type"].as_str().unwrap_or("?"),
        meta["namespace"].as_str().unwrap_or("?"),
        meta["name"].as_str().unwrap_or("?"),
        meta["resourceVersion"].as_str().unwrap_or("?"),
        meta["labels"]["app"].as_str().unwrap_or("-"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcm_watch_prints_wire_form_events_for_etcdctl_writes() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let mut ctl = Etcdctl::new(&etcd).await;
        let existing = ctl.put_pod("default", "web-0", "web").await;
        let mut kcm =
            KcmWatch::spawn(&["watch", "pods", "-o", "json", "--etcd-servers", &endpoint]);
        kcm.wait_listed().await;

        let created = ctl.put_pod("default", "web-1", "web").await;
        let relabelled = ctl.put_pod("default", "web-1", "canary").await;
        ctl.put_pod("other", "web-9", "web").await; // another namespace: not printed
        let deleted = ctl.delete_pod("default", "web-0").await;
        let last = ctl.put_pod("default", "web-2", "web").await;

        let first = kcm.next_line().await;
        assert!(
            first.starts_with(r#"{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1beta3","#),
            "not the wire form: {first}"
        );
        let first_event: Value = serde_json::from_str(&first).unwrap();
        assert_eq!(
            first_event["object"]["spec"]["containers"][0]["image"],
            "busybox"
        );
        let mut got = vec![describe(&first)];
        for _ in 0..4 {
            got.push(describe(&kcm.next_line().await));
        }
        assert_eq!(
            got,
            [
                format!("ADDED default/web-0 {existing} app=web"),
                format!("ADDED default/web-1 {created} app=web"),
                format!("MODIFIED default/web-1 {relabelled} app=canary"),
                format!("DELETED default/web-0 {deleted} app=web"),
                format!("ADDED default/web-2 {last} app=web"),
            ]
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcm_watch_raw_adds_the_etcd_event() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let mut ctl = Etcdctl::new(&etcd).await;
        let existing = ctl.put_pod("default", "web-0", "web").await;
        let mut json = KcmWatch::spawn(&[
            "watch",
            "pods",
            "-o",
            "json",
            "--raw",
            "--etcd-servers",
            &endpoint,
        ]);
        let mut text = KcmWatch::spawn(&["watch", "pods", "--raw", "--etcd-servers", &endpoint]);
        json.wait_listed().await;
        text.wait_listed().await;

        let created = ctl.put_pod("default", "web-1", "web").await;
        let updated = ctl.put_pod("default", "web-1", "canary").await;
        let deleted = ctl.delete_pod("default", "web-1").await;

        let raws: Vec<Value> = {
            let mut raws = Vec::new();
            for _ in 0..4 {
                let line = json.next_line().await;
                let event: Value = serde_json::from_str(&line).unwrap();
                raws.push(event["raw"].clone());
            }
            raws
        };
        let key = pod_key("default", "web-1");
        assert_eq!(raws[0], Value::Null, "a listed object has no etcd event");
        assert_eq!(
            raws[1],
            serde_json::json!({"kind": "PUT", "key": key, "createRevision": created,
                "modRevision": created, "version": 1, "hasPrev": false})
        );
        assert_eq!(
            raws[2],
            serde_json::json!({"kind": "PUT", "key": key, "createRevision": created,
                "modRevision": updated, "version": 2, "hasPrev": true})
        );
        assert_eq!(
            raws[3],
            serde_json::json!({"kind": "DELETE", "key": key, "createRevision": 0,
                "modRevision": deleted, "version": 0, "hasPrev": true})
        );

        let mut lines = Vec::new();
        for _ in 0..8 {
            lines.push(text.next_line().await);
        }
        assert_eq!(
            lines,
            [
                "  etcd: (from a list)".to_string(),
                format!("ADDED pods/default/web-0 rv={existing}"),
                format!("  etcd: PUT {key} create_revision={created} mod_revision={created} version=1 prev_kv=no"),
                format!("ADDED pods/default/web-1 rv={created}"),
                format!("  etcd: PUT {key} create_revision={created} mod_revision={updated} version=2 prev_kv=yes"),
                format!("MODIFIED pods/default/web-1 rv={updated}"),
                format!("  etcd: DELETE {key} create_revision=0 mod_revision={deleted} version=0 prev_kv=yes"),
                format!("DELETED pods/default/web-1 rv={deleted}"),
            ]
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcm_watch_rejects_a_bad_selector_before_connecting() {
    with_timeout(LIMIT, async {
        // Nothing listens on port 1: a selector error must come before any connection.
        let output = kcm_command()
            .args([
                "watch",
                "pods",
                "-l",
                "app=web,,tier=db",
                "--etcd-servers",
                "http://127.0.0.1:1",
            ])
            .output()
            .await
            .expect("run kcm");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success(),
            "accepted a bad selector: {stderr}"
        );
        assert!(output.stdout.is_empty());
        assert!(stderr.contains("--selector"), "names the flag: {stderr}");
        assert!(
            stderr.contains("app=web,,tier=db"),
            "quotes the input: {stderr}"
        );
        assert!(stderr.contains("empty requirement"), "says why: {stderr}");
        assert!(!stderr.contains("cannot reach etcd"), "{stderr}");
    })
    .await;
}

/// `kcm watch pods --resource-version N` with N already compacted: the caller's state at N
/// cannot be read any more, so the watch cannot keep its contract; it exits 1 with the
/// apiserver's "too old resource version: N (M)", M the compacted revision, and says to list
/// again, for a list and a single-object watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcm_watch_from_a_compacted_resource_version_exits_with_a_410() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let mut etcdctl = Etcdctl::new(&etcd).await;
        let old = etcdctl.put_pod("demo", "web", "a").await;
        etcdctl.put_pod("demo", "web", "b").await;
        let compacted = etcd.compact().await;
        let rv = (old - 1).to_string();
        let endpoint = etcd.endpoint();
        for args in [
            vec!["watch", "pods", "-n", "demo", "--resource-version", &rv],
            vec![
                "watch",
                "pods",
                "web",
                "-n",
                "demo",
                "--resource-version",
                &rv,
            ],
        ] {
            let mut all = args.clone();
            all.extend(["--etcd-servers", &endpoint]);
            let output = crate::support::kcm::run_kcm(&all, &[]).await;
            assert_eq!(output.status.code(), Some(1), "{}", output.stderr);
            assert!(output.stdout.is_empty(), "{}", output.stdout);
            assert_eq!(
                output.stderr,
                format!(
                    "kcm: watch pods: too old resource version: {rv} ({compacted}): etcd has \
                     compacted the revisions before {compacted}; list again with \
                     --resource-version \"\" (or 0), or start at {compacted} or later\n"
                ),
                "says why, the compacted revision and what to do"
            );
        }
    })
    .await;
}

impl KcmWatch {
    /// The next line on stderr.
    async fn next_error_line(&mut self) -> String {
        tokio::time::timeout(LINE_DEADLINE, self.stderr.next_line())
            .await
            .unwrap_or_else(|_| panic!("nothing on kcm's stderr within {LINE_DEADLINE:?}"))
            .expect("read kcm stderr")
            .expect("kcm exited while a message was expected")
    }
}

/// `kcm watch --resource-version N` with N ahead of etcd's revision says so (the apiserver's
/// "Too large resource version"), waits for etcd to get there, and then prints the events
/// after N, not those before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcm_watch_from_a_future_resource_version_says_so_and_waits_for_it() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let mut ctl = Etcdctl::new(&etcd).await;
        let current = ctl.put_pod("default", "web-0", "web").await;
        let future = current + 2;
        let rv = future.to_string();
        let mut kcm = KcmWatch::spawn(&[
            "watch",
            "pods",
            "-o",
            "json",
            "--resource-version",
            &rv,
            "--etcd-servers",
            &endpoint,
        ]);
        assert_eq!(
            kcm.next_error_line().await,
            format!(
                "kcm watch: resourceVersion {future} is ahead of etcd's current revision \
                 {current}; waiting for it (too large resource version)"
            )
        );
        ctl.put_pod("default", "web-1", "web").await;
        let reached = ctl.put_pod("default", "web-2", "web").await;
        assert_eq!(reached, future);
        assert_eq!(
            kcm.next_error_line().await,
            format!("kcm watch: etcd reached revision {future}")
        );
        let after = ctl.put_pod("default", "web-3", "web").await;
        assert_eq!(
            describe(&kcm.next_line().await),
            format!("ADDED default/web-3 {after} app=web"),
            "the events up to N are not printed, the ones after are"
        );
    })
    .await;
}

/// A watch that cannot resume because etcd compacted the history while it was disconnected
/// lists again, and says why on stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcm_watch_says_when_it_lists_again_after_compaction() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let proxy = crate::support::FaultProxy::start(etcd.client_addr()).await;
        let mut ctl = Etcdctl::new(&etcd).await;
        let seen = ctl.put_pod("default", "web-0", "web").await;
        let proxied = proxy.endpoint();
        let mut kcm = KcmWatch::spawn(&["watch", "pods", "-o", "json", "--etcd-servers", &proxied]);
        kcm.wait_listed().await;
        assert_eq!(
            describe(&kcm.next_line().await),
            format!("ADDED default/web-0 {seen} app=web")
        );
        proxy.cut();
        // Two writes, so that the revision to resume from (the first) is compacted.
        let first = ctl.put_pod("default", "web-1", "web").await;
        let second = ctl.put_pod("default", "web-2", "web").await;
        let compacted = etcd.compact().await;
        assert!(compacted > seen + 1);
        proxy.restore();
        let mut seen_lines = Vec::new();
        loop {
            let line = kcm.next_error_line().await;
            if line.contains("has been compacted") {
                assert!(
                    line.starts_with(&format!(
                        "kcm watch: the history after revision {seen} has been compacted; \
                         listed at revision "
                    )),
                    "{line}"
                );
                let revision: i64 = line
                    .split("listed at revision ")
                    .nth(1)
                    .and_then(|rest| rest.split(' ').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("no revision in {line}"));
                assert!(revision >= compacted, "{line}");
                break;
            }
            seen_lines.push(line);
            assert!(seen_lines.len() < 100, "no relist notice: {seen_lines:?}");
        }
        let mut relisted = vec![
            describe(&kcm.next_line().await),
            describe(&kcm.next_line().await),
        ];
        relisted.sort();
        assert_eq!(
            relisted,
            [
                format!("ADDED default/web-1 {first} app=web"),
                format!("ADDED default/web-2 {second} app=web"),
            ]
        );
    })
    .await;
}
