//! `kcm apiserver` as a server: watches from before the watch cache's window (served by an
//! etcd watch of their own, exactly the events after N; an ERROR 410 once etcd compacted
//! them), several apiservers over one etcd agreeing on every object and event, the watch
//! cap, and the HTTPS and bearer-token rule beyond loopback (with the real kubectl).

use std::time::Duration;

use futures::StreamExt as _;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::support::apiserver::{
    apiserver, https_apiserver, serving_pki, spawn_apiserver, wait_ready, READY,
};
use crate::support::kcm::{http_get, kcm_command};
use crate::support::kubectl::{kubectl_binary, Kubectl};
use crate::support::objects::{pod_json, put_json, put_pod};
use crate::support::{eventually, free_port, start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(90);

/// A watch's lines, read over HTTP/1.0 (no chunking: the body ends when the server closes
/// the stream) until the server ends it or `until` holds.
async fn watch_lines(port: u16, path: &str, until: impl Fn(&[Value]) -> bool) -> (u16, Vec<Value>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader
        .read_line(&mut status_line)
        .await
        .expect("status line");
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status code");
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).await.expect("header");
        if header.trim().is_empty() {
            break;
        }
    }
    let mut events = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await.expect("read event") == 0 {
            break;
        }
        events.push(serde_json::from_str(line.trim()).expect("one JSON event per line"));
        if until(&events) {
            break;
        }
    }
    (status, events)
}

/// `(type, name, resourceVersion)` of each event.
fn summary(events: &[Value]) -> Vec<(String, String, i64)> {
    events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or("").to_string(),
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                e["object"]["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|rv| rv.parse().ok())
                    .unwrap_or(0),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_before_the_window_gets_exactly_the_later_events_from_etcd_then_410_once_compacted(
) {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        for i in 0..10 {
            put_pod(&client, "default", &format!("p{i}"), "a").await;
        }
        // A window of 5 events: everything below is from before it.
        let (_kcm, port) = apiserver(&etcd, &["--watch-cache-size", "5"]).await;
        let start = put_pod(&client, "default", "p0", "b").await;
        let mut expected = Vec::new();
        for i in 1..10 {
            let revision = put_pod(&client, "default", &format!("p{i}"), "b").await;
            expected.push(("MODIFIED".to_string(), format!("p{i}"), revision));
        }
        let revision = put_pod(&client, "default", "new", "b").await;
        expected.push(("ADDED".to_string(), "new".to_string(), revision));
        // The cache has applied them all (its window now starts after `start`).
        eventually(READY, "the cache to reach the last write", || async move {
            let Some((200, body)) = http_get(port, "/api/v1/pods?resourceVersion=0").await else {
                return false;
            };
            let list: Value = serde_json::from_str(&body).unwrap();
            list["metadata"]["resourceVersion"].as_str() == Some(revision.to_string().as_str())
        })
        .await;

        let want = expected.len();
        let (status, events) = watch_lines(
            port,
            &format!("/api/v1/namespaces/default/pods?watch=true&resourceVersion={start}"),
            |events| events.len() >= want,
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(summary(&events), expected);
        // A label selector still gets 2014's transitions from the previous values etcd sent.
        let (_, events) = watch_lines(
            port,
            &format!(
                "/api/v1/pods?watch=true&resourceVersion={}&labelSelector=app%3Da",
                start - 1
            ),
            |events| events.len() >= 10,
        )
        .await;
        let types: Vec<String> = summary(&events).into_iter().map(|(t, _, _)| t).collect();
        assert_eq!(types, vec!["DELETED"; 10], "{events:?}");

        etcd.compact().await;
        let (status, events) = watch_lines(
            port,
            &format!("/api/v1/pods?watch=true&resourceVersion={start}"),
            |_| false,
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["type"], "ERROR");
        assert_eq!(events[0]["object"]["code"], 410);
        assert_eq!(events[0]["object"]["reason"], "Expired");
        let message = events[0]["object"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("too old resource version: {start} (")),
            "{message}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_apiservers_over_one_etcd_serve_the_same_objects_and_the_same_events() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        for i in 0..20 {
            put_pod(&client, "default", &format!("p{i}"), "a").await;
        }
        let (_one, first) = apiserver(&etcd, &[]).await;
        let (_two, second) = apiserver(&etcd, &[]).await;
        let list = |port| async move {
            let (status, body) = http_get(port, "/api/v1/pods").await.expect("list");
            assert_eq!(status, 200, "{body}");
            serde_json::from_str::<Value>(&body).unwrap()
        };
        let (a, b) = (list(first).await, list(second).await);
        assert_eq!(a, b, "consistent lists from two apiservers");
        let start: i64 = a["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();

        let watch = |port| {
            tokio::spawn(async move {
                watch_lines(
                    port,
                    &format!("/api/v1/namespaces/default/pods?watch=true&resourceVersion={start}"),
                    |events| events.len() >= 30,
                )
                .await
            })
        };
        let (watch_a, watch_b) = (watch(first), watch(second));
        let mut expected = Vec::new();
        for i in 0..30 {
            let name = format!("q{i}");
            let revision = put_json(
                &client,
                &format!("/registry/pods/default/{name}"),
                &pod_json("default", &name, "x"),
            )
            .await;
            expected.push(("ADDED".to_string(), name, revision));
        }
        let (_, events_a) = watch_a.await.unwrap();
        let (_, events_b) = watch_b.await.unwrap();
        assert_eq!(summary(&events_a), expected);
        assert_eq!(summary(&events_b), expected);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_beyond_max_watches_get_429_and_a_freed_slot_is_reused() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (_kcm, port) = apiserver(&etcd, &["--max-watches", "2"]).await;
        let open = |port| async move {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            stream
                .write_all(b"GET /api/v1/pods?watch=true HTTP/1.0\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            let mut reader = BufReader::new(stream);
            let mut status = String::new();
            reader.read_line(&mut status).await.unwrap();
            (status, reader)
        };
        let (first, first_stream) = open(port).await;
        let (second, _second_stream) = open(port).await;
        assert!(
            first.contains(" 200 ") && second.contains(" 200 "),
            "{first} {second}"
        );
        let (status, body) = http_get(port, "/api/v1/pods?watch=true").await.unwrap();
        assert_eq!(status, 429, "{body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["reason"], "TooManyRequests");
        assert!(body["message"].as_str().unwrap().contains("--max-watches"));
        // Lists are not watches: still served.
        assert_eq!(http_get(port, "/api/v1/pods").await.unwrap().0, 200);
        drop(first_stream);
        eventually(
            READY,
            "a closed watch's slot to be free again",
            || async move {
                let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
                stream
                    .write_all(b"GET /api/v1/pods?watch=true HTTP/1.0\r\nHost: x\r\n\r\n")
                    .await
                    .unwrap();
                let mut reader = BufReader::new(stream);
                let mut status = String::new();
                reader.read_line(&mut status).await.unwrap();
                status.contains(" 200 ")
            },
        )
        .await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// Watches from the cache's own revision

/// A watch of pods from `resourceVersion`, raw HTTP/1.0, once its headers are in: the
/// connection and what it read so far.
async fn open_watch(port: u16, resource_version: i64) -> (BufReader<TcpStream>, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let request = format!(
        "GET /api/v1/pods?watch=true&resourceVersion={resource_version} HTTP/1.0\r\nHost: x\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    while !head.ends_with("\r\n\r\n") {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).await.expect("read headers") > 0);
        head.push_str(&line);
    }
    assert!(
        head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"),
        "{head}"
    );
    (reader, head)
}

/// The list's resourceVersion of `path`.
async fn list_revision(port: u16, path: &str) -> i64 {
    let (status, body) = http_get(port, path).await.expect("list");
    assert_eq!(status, 200, "{body}");
    let list: Value = serde_json::from_str(&body).unwrap();
    list["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .expect("a list's resourceVersion")
}

/// A freshly started apiserver on a quiet store: its watch cache's window starts at its
/// list's revision, which is the resourceVersion every client that lists gets. 1,000
/// watches from it are served from the cache (the revision's own events read back from
/// etcd once), adding no etcd watcher, and each gets the next pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_watches_from_a_fresh_lists_resource_version_add_no_etcd_watcher() {
    with_timeout(Duration::from_secs(180), async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        for i in 0..20 {
            put_pod(&client, "default", &format!("p{i}"), "a").await;
        }
        let (_kcm, port) = apiserver(&etcd, &[]).await;
        let from_cache = list_revision(port, "/api/v1/pods?resourceVersion=0").await;
        let consistent = list_revision(port, "/api/v1/pods").await;
        // The apiserver's own watches are open once a list from its cache answered.
        let before = etcd.metric("etcd_debugging_mvcc_watcher_total").await;
        assert!(before >= 1.0, "the apiserver watches etcd");

        let watchers: Vec<_> = futures::stream::iter(0..1000)
            .map(|i| open_watch(port, if i % 2 == 0 { from_cache } else { consistent }))
            .buffer_unordered(100)
            .collect()
            .await;
        let after = etcd.metric("etcd_debugging_mvcc_watcher_total").await;
        assert_eq!(
            after - before,
            0.0,
            "1,000 watches from a list's resourceVersion ({from_cache}, {consistent}) added etcd watchers ({before} → {after})"
        );

        let next = put_pod(&client, "default", "next", "a").await.to_string();
        let next = next.as_str();
        let got = futures::stream::iter(watchers)
            .map(|(mut reader, _)| async move {
                let mut line = String::new();
                let read = tokio::time::timeout(READY, reader.read_line(&mut line)).await;
                let event: Value = match read {
                    Ok(Ok(n)) if n > 0 => serde_json::from_str(line.trim()).unwrap_or_default(),
                    _ => return false,
                };
                event["type"] == "ADDED"
                    && event["object"]["metadata"]["name"] == "next"
                    && event["object"]["metadata"]["resourceVersion"] == next
            })
            .buffer_unordered(1000)
            .filter(|ok| std::future::ready(*ok))
            .count()
            .await;
        assert_eq!(got, 1000, "every watcher's first event is the next pod");
    })
    .await;
}

/// A watch of namespaces from the current state (no resourceVersion, what the Python
/// client's `Watch().stream(list_namespace)` opens) sends the namespaces nobody created,
/// as a list does: `default`, `kube-node-lease`, `kube-public` and `kube-system`, and the
/// one created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_watch_starts_with_every_namespace_a_list_shows() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (_kcm, port) = apiserver(&etcd, &[]).await;
        let response = crate::support::kcm::http_request(
            port,
            "POST",
            "/api/v1/namespaces",
            None,
            br#"{"metadata":{"name":"team"}}"#,
        )
        .await;
        assert_eq!(response.status, 201, "{response:?}");
        let (status, events) = watch_lines(port, "/api/v1/namespaces?watch=true", |events| {
            events.len() >= 5
        })
        .await;
        assert_eq!(status, 200);
        let mut names: Vec<(String, String)> = summary(&events)
            .into_iter()
            .map(|(kind, name, _)| (kind, name))
            .collect();
        names.sort();
        let added = |name: &str| ("ADDED".to_string(), name.to_string());
        assert_eq!(
            names,
            [
                added("default"),
                added("kube-node-lease"),
                added("kube-public"),
                added("kube-system"),
                added("team"),
            ]
        );
    })
    .await;
}

/// A watch from a resourceVersion ahead of the cache: the cache asks etcd for a progress
/// notification, so a revision etcd has reached (by writes elsewhere: nothing under pods
/// changed) is served from the cache at once, adding no etcd watcher (and so is a list or
/// a get not older than it); one etcd has not
/// reached is 504 "Too large resource version" after 3 s, as kube-apiserver answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_ahead_of_the_cache_waits_for_etcds_progress_then_is_served_from_it() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        put_pod(&client, "default", "p", "a").await;
        let (_kcm, port) = apiserver(&etcd, &[]).await;
        let cached = list_revision(port, "/api/v1/pods?resourceVersion=0").await;
        // etcd moves on under another prefix: the pods cache hears nothing of it.
        let mut elsewhere = 0;
        for i in 0..5 {
            elsewhere = put_json(&client, &format!("/elsewhere/{i}"), &serde_json::json!({})).await;
        }
        assert!(elsewhere > cached);
        // A list and a get not older than etcd's revision answer at once, from the cache.
        for path in [
            format!("/api/v1/pods?resourceVersion={elsewhere}&resourceVersionMatch=NotOlderThan"),
            format!("/api/v1/namespaces/default/pods/p?resourceVersion={elsewhere}"),
        ] {
            let started = std::time::Instant::now();
            let (status, body) = http_get(port, &path).await.expect("an answer");
            assert_eq!(status, 200, "{path}: {body}");
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{path} waited {:?}",
                started.elapsed()
            );
        }
        let before = etcd.metric("etcd_debugging_mvcc_watcher_total").await;
        let started = std::time::Instant::now();
        let (mut reader, _) = open_watch(port, elsewhere).await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "the watch waited {:?} for a revision etcd had reached",
            started.elapsed()
        );
        assert_eq!(
            etcd.metric("etcd_debugging_mvcc_watcher_total").await,
            before,
            "no etcd watch of its own"
        );
        assert!(list_revision(port, "/api/v1/pods?resourceVersion=0").await >= elsewhere);
        let next = put_pod(&client, "default", "q", "a").await;
        let mut line = String::new();
        tokio::time::timeout(READY, reader.read_line(&mut line))
            .await
            .expect("an event")
            .expect("read");
        let event: Value = serde_json::from_str(line.trim()).expect("one JSON event");
        assert_eq!(
            summary(&[event]),
            [("ADDED".to_string(), "q".to_string(), next)]
        );

        let far = next + 1_000;
        let (status, body) = http_get(
            port,
            &format!("/api/v1/pods?watch=true&resourceVersion={far}"),
        )
        .await
        .expect("an answer");
        assert_eq!(status, 504, "{body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["reason"], "Timeout");
        assert_eq!(
            body["message"],
            format!("Too large resource version: {far}, current: {next}")
        );
    })
    .await;
}

/// The window's first revision read back from etcd is that revision's events: a
/// transaction that put two pods and deleted a third, resumed from, is sent again
/// (the client may have been cut among them), and a single-object revision is not;
/// then the live events follow, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_the_caches_list_revision_gets_that_revisions_events_read_back_from_etcd() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        put_pod(&client, "default", "gone", "a").await;
        put_pod(&client, "default", "kept", "a").await;
        let key = |name: &str| format!("/registry/pods/default/{name}");
        let put = |name: &str| {
            etcd_client::TxnOp::put(key(name), pod_json("default", name, "b").to_string(), None)
        };
        let txn = etcd_client::Txn::new().and_then([
            put("kept"),
            put("made"),
            etcd_client::TxnOp::delete(key("gone"), None),
        ]);
        let revision = client
            .kv_client()
            .txn(txn)
            .await
            .expect("txn")
            .header()
            .expect("a header")
            .revision();

        let (_kcm, port) = apiserver(&etcd, &[]).await;
        assert_eq!(
            list_revision(port, "/api/v1/pods?resourceVersion=0").await,
            revision,
            "the cache listed at the transaction's revision"
        );
        let (_, events) = watch_lines(
            port,
            &format!("/api/v1/pods?watch=true&resourceVersion={revision}"),
            |events| events.len() >= 3,
        )
        .await;
        let mut got = summary(&events);
        got.sort();
        assert_eq!(
            got,
            [
                ("ADDED".to_string(), "made".to_string(), revision),
                ("DELETED".to_string(), "gone".to_string(), revision),
                ("MODIFIED".to_string(), "kept".to_string(), revision),
            ]
        );
        // The deleted pod's last state is the one before the transaction.
        let gone = events
            .iter()
            .find(|e| e["type"] == "DELETED")
            .expect("the delete");
        assert_eq!(gone["object"]["metadata"]["labels"]["app"], "a");

        // A label selector sees the transitions: `kept` and `made` entered app=b.
        let (_, events) = watch_lines(
            port,
            &format!("/api/v1/pods?watch=true&resourceVersion={revision}&labelSelector=app%3Db"),
            |events| events.len() >= 2,
        )
        .await;
        let mut got = summary(&events);
        got.sort();
        assert_eq!(
            got,
            [
                ("ADDED".to_string(), "kept".to_string(), revision),
                ("ADDED".to_string(), "made".to_string(), revision),
            ]
        );

        // A revision of one object is not sent again: the first event is the next write.
        let single = put_pod(&client, "default", "kept", "c").await;
        let (kcm2, port2) = apiserver(&etcd, &[]).await;
        let next = tokio::spawn(async move {
            let (_, events) = watch_lines(
                port2,
                &format!("/api/v1/pods?watch=true&resourceVersion={single}"),
                |events| !events.is_empty(),
            )
            .await;
            summary(&events)
        });
        let after = put_pod(&client, "default", "made", "c").await;
        let events = next.await.unwrap();
        assert_eq!(
            events,
            [("MODIFIED".to_string(), "made".to_string(), after)]
        );
        assert_eq!(
            list_revision(port2, "/api/v1/pods?resourceVersion=0").await,
            after,
            "the second apiserver's cache"
        );
        drop(kcm2);
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// HTTPS and tokens

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_loopback_the_api_needs_https_and_tokens_and_kubectl_uses_both() {
    with_timeout(LIMIT, async {
        // Refused before anything starts, with one line naming the flags.
        let out = kcm_command()
            .args(["--etcd-servers", "http://127.0.0.1:1", "apiserver", "--address", "0.0.0.0", "--port", "0"])
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("--tls-cert-file") && stderr.contains("--token-auth-file"),
            "{stderr}"
        );

        let Some(bin) = kubectl_binary() else {
            return;
        };
        let Some(etcd) = start_etcd().await else {
            return;
        };
        put_pod(&etcd.client().await, "default", "p1", "a").await;
        let dir = tempfile::tempdir().unwrap();
        let (ca, cert, key) = serving_pki(dir.path());
        let tokens = dir.path().join("tokens.csv");
        std::fs::write(&tokens, "s3cret,alice,1,\"system:masters\"\n").unwrap();
        let (mut kcm, port) = https_apiserver(&etcd, (&cert, &key), Some(&tokens));
        let kubectl = Kubectl::new(bin);
        let kubeconfig = |token: &str| {
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: kcm\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority: {}\ncontexts:\n- name: kcm\n  context:\n    cluster: kcm\n    namespace: default\n    user: alice\ncurrent-context: kcm\nusers:\n- name: alice\n  user:\n    token: {token}\n",
                ca.display()
            )
        };
        std::fs::write(kubectl.kubeconfig(), kubeconfig("s3cret")).unwrap();
        let kubectl = &kubectl;
        eventually(READY, "kubectl to list pods over HTTPS with the token", || async move {
            kubectl.run(&["get", "pods", "-o", "name"]).await.stdout.trim() == "pod/p1"
        })
        .await;
        kcm.assert_running();
        // Writes pass the same check: with the token a label is written, without it not.
        assert_eq!(
            kubectl.ok(&["label", "pod", "p1", "tier=web"]).await,
            "pod/p1 labeled\n"
        );
        std::fs::write(kubectl.kubeconfig(), kubeconfig("wrong")).unwrap();
        let out = kubectl.run(&["get", "pods"]).await;
        assert!(!out.status.success());
        assert!(out.stderr.contains("Unauthorized"), "{out:?}");
        let out = kubectl.run(&["delete", "pod", "p1"]).await;
        assert!(out.stderr.contains("Unauthorized"), "{out:?}");
        let stored = etcd.client().await.get("/registry/pods/default/p1", None).await.unwrap();
        assert_eq!(stored.count(), 1, "the pod is not deleted");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_stops_reading_is_ended_and_never_holds_back_the_others() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (_kcm, port) = apiserver(&etcd, &[]).await;
        // A client that sends its request and never reads, with a tiny receive buffer; the
        // events below (10 MB) fill it and the server's socket buffer (at most 4 MB), then
        // the server's writes to it block.
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(1024).unwrap();
        let mut stuck = socket.connect(([127, 0, 0, 1], port).into()).await.unwrap();
        stuck
            .write_all(b"GET /api/v1/pods?watch=true HTTP/1.0\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let watchers = r#"apiserver_longrunning_requests{resource="pods",verb="WATCH"}"#;
        let metric = |port| async move {
            let (_, body) = http_get(port, "/metrics").await.expect("metrics");
            crate::support::kcm::metric_value(&body, watchers)
        };
        eventually(READY, "the stuck watch to be served", || async move {
            metric(port).await == 1.0
        })
        .await;
        let client = etcd.client().await;
        let total = 2_000;
        let reader = tokio::spawn(watch_lines(
            port,
            "/api/v1/pods?watch=true",
            move |events| events.len() >= total,
        ));
        eventually(READY, "the reading watch to be served", || async move {
            metric(port).await == 2.0
        })
        .await;
        // Big enough documents that the stuck client's buffers fill long before the end.
        let filler = "x".repeat(5_000);
        let mut writes = tokio::task::JoinSet::new();
        for i in 0..total {
            let (client, filler) = (client.clone(), filler.clone());
            writes.spawn(async move {
                let mut pod = pod_json("default", &format!("p{i}"), "a");
                pod["metadata"]["annotations"] = serde_json::json!({ "filler": filler });
                put_json(&client, &format!("/registry/pods/default/p{i}"), &pod).await
            });
            if writes.len() >= 64 {
                writes.join_next().await;
            }
        }
        while writes.join_next().await.is_some() {}
        // The reader got every event, in order, while the other one did not read.
        let (status, events) = reader.await.unwrap();
        assert_eq!(status, 200);
        assert_eq!(events.len(), total);
        let revisions: Vec<i64> = summary(&events).into_iter().map(|(_, _, rv)| rv).collect();
        assert!(
            revisions.windows(2).all(|w| w[0] < w[1]),
            "in revision order"
        );
        // The stuck one was ended (its writes blocked for the stall timeout, 10 s),
        // freeing its slot.
        eventually(READY, "the stuck watch to be ended", || async move {
            metric(port).await == 0.0
        })
        .await;
        drop(stuck);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiservers_on_a_three_member_cluster_agree_and_one_survives_its_members_death() {
    with_timeout(LIMIT, async {
        let Some(mut cluster) = crate::support::cluster::start_cluster(3).await else {
            return;
        };
        let client = cluster.client().await;
        put_pod(&client, "default", "before", "a").await;
        // One apiserver prefers member 0, the other member 1; each knows every member.
        let start = |first: usize| {
            let mut endpoints = cluster.endpoints();
            endpoints.rotate_left(first);
            let port = free_port();
            (spawn_apiserver(&endpoints.join(","), port, &[]), port)
        };
        let (mut a, port_a) = start(0);
        let (mut b, port_b) = start(1);
        wait_ready(&mut a, port_a).await;
        wait_ready(&mut b, port_b).await;
        let (_, body) = http_get(port_a, "/api/v1/pods").await.unwrap();
        let list: Value = serde_json::from_str(&body).unwrap();
        let start_rv: i64 = list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let watch = |port| {
            tokio::spawn(async move {
                watch_lines(
                    port,
                    &format!("/api/v1/pods?watch=true&resourceVersion={start_rv}"),
                    |events| events.len() >= 20,
                )
                .await
            })
        };
        let (watch_a, watch_b) = (watch(port_a), watch(port_b));
        // Member 0 dies mid-way; writes go on through the others.
        let mut expected = Vec::new();
        for i in 0..20 {
            if i == 10 {
                cluster.kill(0);
            }
            let name = format!("q{i}");
            let revision = loop {
                let put = tokio::time::timeout(
                    Duration::from_secs(2),
                    client.clone().put(
                        format!("/registry/pods/default/{name}"),
                        pod_json("default", &name, "x").to_string(),
                        None,
                    ),
                )
                .await;
                if let Ok(Ok(response)) = put {
                    break response.header().unwrap().revision();
                }
            };
            expected.push(("ADDED".to_string(), name, revision));
        }
        let (_, events_a) = watch_a.await.unwrap();
        let (_, events_b) = watch_b.await.unwrap();
        assert_eq!(
            summary(&events_a),
            expected,
            "through the apiserver whose member died"
        );
        assert_eq!(summary(&events_b), expected);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_etcd_ends_every_watch_with_410_and_the_caches_follow_the_restored_store() {
    with_timeout(LIMIT, async {
        let Some(mut etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        for i in 0..20 {
            put_pod(&client, "default", &format!("kept{i}"), "a").await;
        }
        let dir = tempfile::tempdir().unwrap();
        let snapshot = dir.path().join("backup.db");
        etcd.snapshot(&snapshot);
        let mut last = 0;
        for i in 0..20 {
            last = put_pod(&client, "default", &format!("lost{i}"), "a").await;
        }
        let (_kcm, port) = apiserver(&etcd, &[]).await;
        let watch = tokio::spawn(async move {
            let path = format!("/api/v1/pods?watch=true&resourceVersion={last}");
            watch_lines(port, &path, |_| false).await
        });
        eventually(READY, "the watch to be served", || async move {
            let (_, body) = http_get(port, "/metrics").await.expect("metrics");
            crate::support::kcm::metric_value(
                &body,
                r#"apiserver_longrunning_requests{resource="pods",verb="WATCH"}"#,
            ) == 1.0
        })
        .await;
        // The store goes back to the backup: its revisions mean another history now.
        etcd.restore_snapshot(&snapshot).await;
        let (status, events) = watch.await.unwrap();
        assert_eq!(status, 200);
        let last_event = events.last().expect("an event");
        assert_eq!(last_event["type"], "ERROR", "{events:?}");
        assert_eq!(last_event["object"]["code"], 410);
        // Lists from the cache and from etcd both show the restored store.
        let names = |body: String| {
            let list: Value = serde_json::from_str(&body).unwrap();
            let mut names: Vec<String> = list["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
                .collect();
            names.sort();
            names
        };
        let mut expected: Vec<String> = (0..20).map(|i| format!("kept{i}")).collect();
        expected.sort();
        let expected = &expected;
        eventually(
            READY,
            "the cache to show the restored store",
            || async move {
                match http_get(port, "/api/v1/pods?resourceVersion=0").await {
                    Some((200, body)) => names(body) == *expected,
                    _ => false,
                }
            },
        )
        .await;
        let (status, body) = http_get(port, "/api/v1/pods").await.unwrap();
        assert_eq!(status, 200);
        assert_eq!(names(body), *expected);
    })
    .await;
}
