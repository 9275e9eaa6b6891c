//! What one request may cost the apiserver (issue 35), read from the server process's peak
//! resident memory (`VmHWM` in `/proc/PID/status`): a JSON patch that copies a map into
//! itself 20 times is refused by kube-apiserver's limit on the bytes copies may add, with and
//! without `dryRun`; a 3 MiB body of tiny JSON or YAML objects is answered with the server's
//! memory a small multiple of the body limit; objects of a legitimate size, in JSON and YAML,
//! are still written, and patched; a patch may not produce an object larger than the body
//! limit.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::apiserver::apiserver;
use crate::support::kcm::{http_get, http_request, proc_status_kib, HttpResponse};
use crate::support::{start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(120);

/// kube-apiserver's request body limit (and kcm's), 3 MiB.
const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The peak memory a patch of this file may leave on the server (the issue's bound): a
/// fresh server peaks at about 40 MB idle, the 20 self-copies at about 50 MB (3.6 GB before
/// the copy limit, in a debug build).
const PEAK_LIMIT_MB: u64 = 300;

/// The peak memory one 3 MiB body of tiny objects may leave on a fresh server: measured at
/// 45 to 110 MB (345 to 810 MB before the decode budget, in a debug build).
const TINY_BODY_PEAK_LIMIT_MB: u64 = 200;

const PODS: &str = "/api/v1/namespaces/default/pods";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// The peak resident memory of process `pid` so far, in MB (`VmHWM`).
fn peak_rss_mb(pid: u32) -> u64 {
    proc_status_kib(pid, "VmHWM") / 1000
}

#[track_caller]
fn assert_status(what: &str, response: &HttpResponse, code: u16) {
    assert_eq!(response.status, code, "{what}: {response:?}");
    if code >= 400 {
        assert_eq!(response.json()["kind"], "Status", "{what}: {response:?}");
    }
}

fn message(response: &HttpResponse) -> String {
    response.json()["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn pod(name: &str, annotations: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    })
}

fn body(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).expect("encode")
}

/// A JSON pod whose container's `env` list holds `{}` until the body is just under 3 MiB:
/// about a million empty objects.
fn pod_of_empty_objects() -> Vec<u8> {
    let head = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"tiny-list"},"spec":{"containers":[{"name":"c","image":"busybox","env":["#;
    let tail = b"{}]}]}}";
    let mut bytes = head.to_vec();
    while bytes.len() + 3 + tail.len() <= MAX_BODY_BYTES {
        bytes.extend_from_slice(b"{},");
    }
    bytes.extend_from_slice(tail);
    bytes
}

/// A JSON pod whose annotations map about 176,000 keys to `{}`.
fn pod_of_empty_annotations() -> Vec<u8> {
    let head = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"tiny-map","annotations":{"#;
    let tail = br#""last":{}}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}"#;
    let mut bytes = head.to_vec();
    for i in 0.. {
        let member = format!("\"k{i:07}\":{{}},");
        if bytes.len() + member.len() + tail.len() > MAX_BODY_BYTES {
            break;
        }
        bytes.extend_from_slice(member.as_bytes());
    }
    bytes.extend_from_slice(tail);
    bytes
}

/// A YAML pod whose container's `env` is a flow list of `{}`, about a million of them.
fn yaml_pod_of_empty_objects() -> Vec<u8> {
    let head = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: tiny-yaml\nspec:\n  containers:\n  - name: c\n    image: busybox\n    env: [";
    let tail = b"{}]\n";
    let mut bytes = head.to_vec();
    while bytes.len() + 3 + tail.len() <= MAX_BODY_BYTES {
        bytes.extend_from_slice(b"{},");
    }
    bytes.extend_from_slice(tail);
    bytes
}

/// A YAML pod whose container's `env` is a block list of one-member maps.
fn yaml_pod_of_block_items() -> Vec<u8> {
    let head = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: tiny-block\nspec:\n  containers:\n  - name: c\n    image: busybox\n    env:\n";
    let item = b"    - a: {}\n";
    let mut bytes = head.to_vec();
    while bytes.len() + item.len() <= MAX_BODY_BYTES {
        bytes.extend_from_slice(item);
    }
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_self_copies_in_one_json_patch_are_refused_with_the_server_under_300_mb() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (kcm, port) = apiserver(&etcd, &[]).await;
        let path = format!("{PODS}/doubling");
        let created = http_request(
            port,
            "POST",
            PODS,
            None,
            &body(&pod("doubling", json!({"a": "x".repeat(1200)}))),
        )
        .await;
        assert_status("the pod to patch", &created, 201);

        // Each copy doubles the annotations: 20 of them would make 1.2 GB of them.
        let doubling: Vec<Value> = (0..20)
            .map(|i| json!({"op": "copy", "from": "/metadata/annotations", "path": format!("/metadata/annotations/c{i}")}))
            .collect();
        for query in ["?dryRun=All", ""] {
            let refused = http_request(
                port,
                "PATCH",
                &format!("{path}{query}"),
                Some("application/json-patch+json"),
                &body(&Value::from(doubling.clone())),
            )
            .await;
            // kube-apiserver answers 422 with json-patch's "accumulated size" error.
            assert_status(&format!("20 self-copies{query}"), &refused, 422);
            let refusal = message(&refused);
            assert!(refusal.contains("3145728"), "names the limit: {refusal}");
            let peak = peak_rss_mb(kcm.pid());
            assert!(peak < PEAK_LIMIT_MB, "peak RSS {peak} MB after 20 self-copies{query}");
        }

        // A copy within the limit still applies.
        let copy = json!([{"op": "copy", "from": "/metadata/annotations/a", "path": "/metadata/annotations/b"}]);
        let copied = http_request(port, "PATCH", &path, Some("application/json-patch+json"), &body(&copy)).await;
        assert_status("one small copy", &copied, 200);
        assert_eq!(copied.json()["metadata"]["annotations"]["b"], "x".repeat(1200));

        // kube-apiserver's 10,000 operations per JSON patch.
        let tests = vec![json!({"op": "test", "path": "/kind", "value": "Pod"}); 10_001];
        let too_many = http_request(port, "PATCH", &path, Some("application/json-patch+json"), &body(&Value::from(tests))).await;
        assert_status("10,001 operations", &too_many, 413);
        assert!(message(&too_many).contains("10000"), "{too_many:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_3_mib_body_of_tiny_objects_is_answered_with_the_server_under_200_mb() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let bodies = [
            ("JSON [{},...]", None, pod_of_empty_objects()),
            ("JSON {k: {},...}", None, pod_of_empty_annotations()),
            (
                "YAML [{},...]",
                Some("application/yaml"),
                yaml_pod_of_empty_objects(),
            ),
            (
                "YAML - a: {}",
                Some("application/yaml"),
                yaml_pod_of_block_items(),
            ),
        ];
        for (what, content_type, bytes) in bodies {
            assert!(bytes.len() <= MAX_BODY_BYTES && bytes.len() > MAX_BODY_BYTES - 64);
            // A fresh server for each body: its peak is that body's.
            let (kcm, port) = apiserver(&etcd, &[]).await;
            let idle = peak_rss_mb(kcm.pid());
            let answer = http_request(port, "POST", PODS, content_type, &bytes).await;
            let peak = peak_rss_mb(kcm.pid());
            eprintln!(
                "{what}: {} -> {}; peak RSS {idle} MB idle, {peak} MB after",
                bytes.len(),
                answer.status
            );
            assert!(
                matches!(answer.status, 201 | 400 | 413 | 422),
                "{what}: {answer:?}"
            );
            assert!(peak < TINY_BODY_PEAK_LIMIT_MB, "{what}: peak RSS {peak} MB");
            // The server still serves.
            let (status, _) = http_get(port, "/readyz").await.expect("readyz");
            assert_eq!(status, 200, "{what}: readyz");
        }
    })
    .await;
}

/// A Deployment of `n` containers, each with ports, env and resources.
fn deployment(n: usize) -> Value {
    let containers: Vec<Value> = (0..n)
        .map(|i| {
            json!({"name": format!("c{i}"), "image": "nginx:1.25",
                   "ports": [{"containerPort": 8000 + i, "protocol": "TCP"}],
                   "env": [{"name": "A", "value": "b"}, {"name": "B", "value": "c"}],
                   "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}},
                   "imagePullPolicy": "IfNotPresent"})
        })
        .collect();
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "many-containers"},
           "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "many"}},
                    "template": {"metadata": {"labels": {"app": "many"}},
                                 "spec": {"containers": containers}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_of_a_legitimate_size_are_still_written_and_patched() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (kcm, port) = apiserver(&etcd, &[]).await;

        // ConfigMaps near their 1 MiB limit on data, in JSON and in YAML.
        let large = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "large"}, "data": {"blob": "x".repeat(900_000)}});
        let created = http_request(port, "POST", CONFIGMAPS, None, &body(&large)).await;
        assert_status("a 900 KB ConfigMap", &created, 201);
        let yaml = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: large-yaml\ndata:\n  blob: |\n{}",
            "    some text: with, indicators - and [brackets] {braces}\n".repeat(18_000)
        );
        let created = http_request(
            port,
            "POST",
            CONFIGMAPS,
            Some("application/yaml"),
            yaml.as_bytes(),
        )
        .await;
        assert_status("a 990 KB YAML ConfigMap of text", &created, 201);

        // 25,000 small keys, about 600 KB: stored with its creator's managedFields entry,
        // which names every key (another 400 KB), it stays under etcd's 1.5 MiB request.
        let keys: serde_json::Map<String, Value> = (0..25_000)
            .map(|i| (format!("key-{i}"), Value::from(format!("value-{i}"))))
            .collect();
        let many = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "many-keys"}, "data": keys});
        let created = http_request(port, "POST", CONFIGMAPS, None, &body(&many)).await;
        assert_status("a ConfigMap of 25,000 keys", &created, 201);

        // A Deployment of 1,500 containers: about 500 KB of JSON, dense in small maps (its
        // managedFields entry, a key per container, about as much again).
        let deployment = deployment(1_500);
        let deployments = "/apis/apps/v1/namespaces/default/deployments";
        let created = http_request(port, "POST", deployments, None, &body(&deployment)).await;
        assert_status("a Deployment of 1,500 containers", &created, 201);
        let yaml_body = serde_yaml_ng::to_string(&{
            let mut copy = deployment.clone();
            copy["metadata"]["name"] = json!("many-containers-yaml");
            copy
        })
        .expect("YAML");
        let created = http_request(
            port,
            "POST",
            deployments,
            Some("application/yaml"),
            yaml_body.as_bytes(),
        )
        .await;
        assert_status("a YAML Deployment of 1,500 containers", &created, 201);

        // Patches of each kind that stay under the limits.
        let path = format!("{CONFIGMAPS}/large");
        let merge = json!({"data": {"more": "y".repeat(40_000)}});
        let merged = http_request(
            port,
            "PATCH",
            &path,
            Some("application/merge-patch+json"),
            &body(&merge),
        )
        .await;
        assert_status("a merge patch adding 40 KB", &merged, 200);
        let strategic = json!({"data": {"other": "z".repeat(40_000)}});
        let patched = http_request(
            port,
            "PATCH",
            &path,
            Some("application/strategic-merge-patch+json"),
            &body(&strategic),
        )
        .await;
        assert_status("a strategic merge patch adding 40 KB", &patched, 200);
        let copy = json!([{"op": "copy", "from": "/data/more", "path": "/data/copied"}]);
        let copied = http_request(
            port,
            "PATCH",
            &path,
            Some("application/json-patch+json"),
            &body(&copy),
        )
        .await;
        assert_status("a JSON patch copying 40 KB", &copied, 200);
        assert_eq!(
            copied.json()["data"]["copied"].as_str().map(str::len),
            Some(40_000)
        );

        // A patch that would make an object over the body limit is refused, naming it;
        // nothing is written.
        let huge = json!({"data": {"huge": "h".repeat(2_500_000)}});
        for content_type in [
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
        ] {
            let refused =
                http_request(port, "PATCH", &path, Some(content_type), &body(&huge)).await;
            assert_status(&format!("{content_type} over the limit"), &refused, 413);
            assert!(message(&refused).contains("3145728"), "{refused:?}");
        }
        let add = json!([{"op": "add", "path": "/data/huge", "value": "h".repeat(2_500_000)}]);
        let refused = http_request(
            port,
            "PATCH",
            &path,
            Some("application/json-patch+json"),
            &body(&add),
        )
        .await;
        assert_status("a JSON patch over the limit", &refused, 413);
        let (status, current) = http_get(port, &path).await.expect("get");
        assert_eq!(status, 200);
        let current: Value = serde_json::from_str(&current).expect("JSON");
        assert!(current["data"].get("huge").is_none(), "nothing written");

        let peak = peak_rss_mb(kcm.pid());
        assert!(peak < PEAK_LIMIT_MB, "peak RSS {peak} MB");
    })
    .await;
}
