//! Consistent lists (`resourceVersion` unset) served from the watch cache (issue 33,
//! kube-apiserver 1.31's consistent reads from cache): every list reflects every write
//! acknowledged before it was asked, whether the write came through the API or straight
//! into etcd, and whether it touched the listed resource or another one (then only a
//! progress notification of the cache's etcd watch brings the cache to it).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::support::apiserver::apiserver;
use crate::support::kcm::{http_get, http_request, metric_value};
use crate::support::objects::{put_json, put_pod};
use crate::support::{start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(600);

/// Creates made (half through the API, half straight into etcd), each followed at once
/// by a consistent list that must hold it.
const CREATES: usize = 2_000;

const PODS: &str = "/api/v1/namespaces/default/pods";

/// `GET path` as JSON, with its resourceVersion as a number.
async fn list(port: u16, path: &str) -> (Value, i64) {
    let (status, body) = http_get(port, path)
        .await
        .unwrap_or_else(|| panic!("GET {path}: no answer"));
    assert_eq!(status, 200, "GET {path}: {body}");
    let listed: Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: not JSON ({e})"));
    let revision = listed["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("GET {path}: no resourceVersion in {}", listed["metadata"]));
    (listed, revision)
}

fn names(listed: &Value, field: &str) -> Vec<String> {
    listed[field]
        .as_array()
        .unwrap_or_else(|| panic!("no {field} in {listed}"))
        .iter()
        .map(|item| {
            let name = if field == "rows" {
                &item["cells"][0]
            } else {
                &item["metadata"]["name"]
            };
            name.as_str().unwrap_or_default().to_string()
        })
        .collect()
}

async fn fallbacks(port: u16) -> f64 {
    let (_, metrics) = http_get(port, "/metrics").await.expect("GET /metrics");
    assert!(
        metrics.contains("# TYPE apiserver_consistent_list_fallbacks counter"),
        "the fallback counter is registered: {metrics}"
    );
    metric_value(
        &metrics,
        "apiserver_consistent_list_fallbacks_total{resource=\"pods\"}",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_consistent_list_reads_the_writes_acknowledged_before_it() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (_kcm, port) = apiserver(&etcd, &[]).await;
        let client = etcd.client().await;

        // Another task writes another resource (config maps) straight into etcd the whole
        // time, publishing the revision of each acknowledged write: a pods list must be
        // at least there too, which the pods cache learns only from progress
        // notifications.
        let acknowledged = Arc::new(AtomicI64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (client, acknowledged, stop) = (client.clone(), acknowledged.clone(), stop.clone());
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let name = format!("noise-{}", n % 50);
                    let document = json!({"kind": "ConfigMap", "apiVersion": "v1",
                        "metadata": {"name": name, "namespace": "other"},
                        "data": {"n": n.to_string()}});
                    let revision = put_json(
                        &client,
                        &format!("/registry/configmaps/other/{name}"),
                        &document,
                    )
                    .await;
                    acknowledged.fetch_max(revision, Ordering::Relaxed);
                    n += 1;
                }
                n
            })
        };

        let mut created = Vec::new();
        for i in 0..CREATES {
            let name = format!("rw-{i}");
            let revision = if i % 2 == 0 {
                let pod = json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "labels": {"app": "rw", "i": i.to_string()}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
                let response = http_request(
                    port,
                    "POST",
                    PODS,
                    Some("application/json"),
                    pod.to_string().as_bytes(),
                )
                .await;
                assert_eq!(response.status, 201, "create {name}: {response:?}");
                response.json()["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|rv| rv.parse::<i64>().ok())
                    .expect("a created pod has a resourceVersion")
            } else {
                put_pod(&client, "default", &name, "rw").await
            };
            created.push(name.clone());
            let other = acknowledged.load(Ordering::Relaxed);

            // The pod just written, by name (every 100th: the whole namespace).
            let path = if i % 100 == 99 {
                PODS.to_string()
            } else {
                format!("{PODS}?fieldSelector=metadata.name%3D{name}")
            };
            let (listed, list_revision) = list(port, &path).await;
            let listed = names(&listed, "items");
            if i % 100 == 99 {
                assert_eq!(
                    listed,
                    sorted(&created),
                    "list {i}: every pod created so far"
                );
            } else {
                assert_eq!(
                    listed,
                    std::slice::from_ref(&name),
                    "list {i}: the pod just created"
                );
            }
            assert!(
                list_revision >= revision,
                "list {i} at {list_revision}, before its pod's create at {revision}"
            );
            assert!(
                list_revision >= other,
                "list {i} at {list_revision}, before another resource's write at {other}"
            );
            if i == 49 {
                // The cache serves them: a cache that never caught up would leave each
                // list to etcd after 3 s.
                assert!(
                    fallbacks(port).await < 5.0,
                    "the first 50 lists fell back to etcd"
                );
            }
        }

        // A Table (kubectl get) reads its writes the same way.
        let revision = put_pod(&client, "default", "rw-table", "rw").await;
        created.push("rw-table".to_string());
        let (status, body) = get_table(port, PODS).await;
        assert_eq!(status, 200, "{body}");
        let table: Value = serde_json::from_str(&body).expect("a Table is JSON");
        assert_eq!(names(&table, "rows"), sorted(&created));
        let table_revision: i64 = table["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|rv| rv.parse().ok())
            .expect("a Table has a resourceVersion");
        assert!(table_revision >= revision);

        stop.store(true, Ordering::Relaxed);
        let other_writes = writer.await.expect("the writer task");
        assert!(other_writes > 0, "the other task wrote");
        let fallbacks = fallbacks(port).await;
        eprintln!(
            "{CREATES} consistent lists, {other_writes} writes of another resource meanwhile, \
             {fallbacks} fell back to etcd"
        );
        assert!(
            fallbacks < (CREATES / 100) as f64,
            "{fallbacks} of {CREATES} consistent lists fell back to etcd"
        );
    })
    .await;
}

/// `GET path` as a Table, over HTTP/1.0.
async fn get_table(port: u16, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let request = format!(
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\
         Accept: application/json;as=Table;v=v1;g=meta.k8s.io\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.expect("read");
    let text = String::from_utf8(response).expect("UTF-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status code");
    (status, body.to_string())
}

/// Pod names in etcd's key order.
fn sorted(names: &[String]) -> Vec<String> {
    let mut names = names.to_vec();
    names.sort();
    names
}
