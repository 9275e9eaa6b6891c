//! The official Python client (PyPI `kubernetes`, whose models pydantic validates, so a
//! missing required field fails a call) against kcm's Kubernetes API started by `kcm up`:
//! `python/client_tour.py` lists every served kind with the typed methods, reads one object
//! of each and watches each kind until its first event, over pods that run, crash-loop and
//! fail to pull on kcm's kubelets, a replication controller with its service and
//! endpoints, deployments with their replica sets, and their events.
//!
//! The interpreter is `$KCM_PYTHON`, else `python3`; without the `kubernetes` package the
//! test is skipped, and fails under CI (`.ci/run` installs it), as a missing kubectl is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::support::kubectl::{start_up, Api};
use crate::support::{eventually, with_timeout};

/// The script, run as `python client_tour.py KUBECONFIG WATCH_SECONDS`.
const SCRIPT: &str = include_str!("python/client_tour.py");
/// Bound on the whole test (two busy cores; the script alone takes a few seconds).
const LIMIT: Duration = Duration::from_secs(150);
/// How long the controllers and kubelets may take to converge what the test wrote.
const CONVERGE: Duration = Duration::from_secs(40);
/// Bound on one run of the script.
const SCRIPT_LIMIT: Duration = Duration::from_secs(90);
/// The script's `timeout_seconds` for each watch (it stops at the first event).
const WATCH_SECONDS: &str = "10";
/// The namespace the test writes in.
const NAMESPACE: &str = "py";

/// Every served resource (`src/apiserver/resources.rs`), with the etcd directory its
/// objects are stored under and whether they are namespaced.
const KINDS: [(&str, &str, bool); 13] = [
    ("pods", "pods", true),
    ("nodes", "nodes", false),
    ("services", "services/specs", true),
    ("endpoints", "services/endpoints", true),
    ("replicationcontrollers", "controllers", true),
    ("replicasets", "replicasets", true),
    ("deployments", "deployments", true),
    ("namespaces", "namespaces", false),
    ("events", "events", true),
    ("configmaps", "configmaps", true),
    ("secrets", "secrets", true),
    ("serviceaccounts", "serviceaccounts", true),
    ("leases", "leases", true),
];

/// The Python interpreter to use when it can import `kubernetes`: `None` with a skip
/// notice when it cannot, a panic when `CI` is set (as for a missing kubectl).
async fn python_with_client() -> Option<PathBuf> {
    let python = std::env::var_os("KCM_PYTHON")
        .filter(|value| !value.is_empty())
        .map_or_else(|| PathBuf::from("python3"), PathBuf::from);
    let probe = tokio::process::Command::new(&python)
        .args(["-c", "import kubernetes"])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await;
    let why = match probe {
        Ok(output) if output.status.success() => return Some(python),
        Ok(output) => format!(
            "{} cannot import kubernetes: {}",
            python.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ),
        Err(e) => format!("cannot run {}: {e}", python.display()),
    };
    if std::env::var_os("CI").is_some_and(|value| !value.is_empty()) {
        panic!("{why}; CI requires the Python client (.ci/run installs it and sets KCM_PYTHON)");
    }
    eprintln!("skipping: {why} (pip install kubernetes, or set KCM_PYTHON)");
    None
}

/// `namespace/name` (or `name` when cluster-scoped) of every object stored in `dir`.
async fn stored_names(api: &Api, dir: &str, namespaced: bool) -> BTreeSet<String> {
    let prefix = format!("/registry/{dir}/");
    let mut client = api.etcd.client().await;
    let options = etcd_client::GetOptions::new()
        .with_prefix()
        .with_keys_only();
    let response = client
        .get(prefix.as_str(), Some(options))
        .await
        .expect("etcd list");
    response
        .kvs()
        .iter()
        .filter_map(|kv| {
            let rest = kv.key_str().expect("UTF-8 keys").strip_prefix(&prefix)?;
            // `services/` holds both specs and endpoints; a deeper key is another kind's.
            let depth = rest.split('/').count();
            (depth == if namespaced { 2 } else { 1 }).then(|| rest.to_string())
        })
        .collect()
}

/// The pods of the test's namespace, by name, as stored.
async fn pods(api: &Api) -> BTreeMap<String, Value> {
    api.documents(&format!("/registry/pods/{NAMESPACE}/"))
        .await
        .into_iter()
        .map(|pod| {
            (
                pod["metadata"]["name"].as_str().unwrap_or("").to_string(),
                pod,
            )
        })
        .collect()
}

/// Whether `pods` hold `n` pods whose name starts with `prefix`, each satisfying `check`.
fn has(pods: &BTreeMap<String, Value>, prefix: &str, n: usize, check: fn(&Value) -> bool) -> bool {
    let matching: Vec<&Value> = pods
        .iter()
        .filter(|(name, _)| name.starts_with(prefix))
        .map(|(_, pod)| pod)
        .collect();
    matching.len() == n && matching.into_iter().all(check)
}

fn running(pod: &Value) -> bool {
    pod["status"]["phase"] == "Running"
        && pod["status"]["containerStatuses"][0]["state"]["running"].is_object()
}

fn waiting(pod: &Value, reason: &str) -> bool {
    pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == reason
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_lists_reads_and_watches_every_served_kind() {
    with_timeout(LIMIT, async {
        let Some(python) = python_with_client().await else {
            return;
        };
        let Some(api) = start_up(2).await else {
            return;
        };
        let kubectl = &api.kubectl;
        // `kcm up`'s kubeconfig for its plain-HTTP API skips TLS verification (which the
        // JavaScript client needs); the Python client loads it as it is, below.
        let kubeconfig = std::fs::read_to_string(kubectl.kubeconfig()).expect("the kubeconfig");
        assert!(
            kubeconfig.contains("\n    insecure-skip-tls-verify: true\n"),
            "{kubeconfig}"
        );
        // A namespace of its own: stored, unlike the ones kcm synthesizes.
        kubectl.ok(&["create", "namespace", NAMESPACE]).await;
        for (name, image, replicas) in [
            ("web", "nginx:1.27", "2"),
            ("crashy", "app:crash", "1"),
            ("unpulled", "app:doesnotexist", "1"),
        ] {
            let (image, replicas) = (format!("--image={image}"), format!("--replicas={replicas}"));
            kubectl
                .ok(&[
                    "create",
                    "deployment",
                    name,
                    &image,
                    &replicas,
                    "-n",
                    NAMESPACE,
                ])
                .await;
        }
        // A 2014-style replication controller with a service in front of it.
        api.kcm(&[
            "run",
            "front",
            "--image",
            "nginx",
            "--replicas",
            "2",
            "--port",
            "80",
            "--expose",
            "-n",
            NAMESPACE,
        ])
        .await;

        eventually(
            CONVERGE,
            "pods running, crash-looping and failing to pull, endpoints and events",
            || async {
                let pods = pods(&api).await;
                let endpoints = api
                    .stored(&format!("/registry/services/endpoints/{NAMESPACE}/front"))
                    .await;
                has(&pods, "web-", 2, running)
                    && has(&pods, "front-", 2, running)
                    && has(&pods, "crashy-", 1, |pod| {
                        waiting(pod, "CrashLoopBackOff")
                            && pod["status"]["containerStatuses"][0]["restartCount"] != 0
                    })
                    && has(&pods, "unpulled-", 1, |pod| {
                        waiting(pod, "ImagePullBackOff")
                    })
                    && endpoints
                        .is_some_and(|e| e["endpoints"].as_array().is_some_and(|a| a.len() == 2))
                    && api.count(&format!("/registry/events/{NAMESPACE}/")).await > 0
            },
        )
        .await;

        let script = kubectl.kubeconfig().with_file_name("client_tour.py");
        std::fs::write(&script, SCRIPT).expect("write the script");
        let run = tokio::process::Command::new(&python)
            .arg(&script)
            .arg(kubectl.kubeconfig())
            .arg(WATCH_SECONDS)
            .arg(NAMESPACE)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(SCRIPT_LIMIT, run)
            .await
            .unwrap_or_else(|_| panic!("client_tour.py did not finish within {SCRIPT_LIMIT:?}"))
            .expect("run client_tour.py");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success() && stdout.lines().last().is_some_and(|l| l.starts_with("ok ")),
            "client_tour.py: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            output.status
        );

        let printed: BTreeMap<String, Value> = stdout
            .lines()
            .filter(|line| line.starts_with('{'))
            .map(|line| {
                let report: Value = serde_json::from_str(line).expect("a JSON line");
                (report["kind"].as_str().expect("kind").to_string(), report)
            })
            .collect();
        let names = |kind: &str| -> BTreeSet<String> {
            printed[kind]["names"]
                .as_array()
                .expect("names")
                .iter()
                .map(|name| name.as_str().expect("a name").to_string())
                .collect()
        };
        for (kind, dir, namespaced) in KINDS {
            let report = printed
                .get(kind)
                .unwrap_or_else(|| panic!("client_tour.py printed nothing for {kind}:\n{stdout}"));
            assert_eq!(report["count"], names(kind).len(), "{kind}: {report}");
            assert!(
                report["read"].as_str().is_some_and(|name| !name.is_empty()),
                "{kind}: {report}"
            );
            assert!(
                report["watched"]
                    .as_str()
                    .is_some_and(|event| !event.is_empty()),
                "{kind}: {report}"
            );
            let stored = stored_names(&api, dir, namespaced).await;
            match kind {
                // Events keep coming (the crash loop's back-offs): every one listed is
                // stored, and there were some.
                "events" => assert!(
                    !stored.is_empty() && names(kind).is_subset(&stored),
                    "events listed {:?}, stored {stored:?}",
                    names(kind)
                ),
                // The namespaces nobody created (default, kube-system, ...) are
                // synthesized; every stored one is listed.
                "namespaces" => {
                    let listed = names(kind);
                    assert!(
                        stored.is_subset(&listed)
                            && listed.contains("default")
                            && listed.contains(NAMESPACE),
                        "namespaces listed {listed:?}, stored {stored:?}"
                    );
                }
                _ => assert_eq!(names(kind), stored, "{kind}: listed vs stored in etcd"),
            }
        }
        assert_eq!(
            names("nodes"),
            BTreeSet::from(["node-1".into(), "node-2".into()])
        );
        assert_eq!(printed["pods"]["count"], 6, "{stdout}");
        // The documents it created, stored as the client sent them.
        for (dir, name) in [
            ("configmaps", "py-config"),
            ("secrets", "py-secret"),
            ("serviceaccounts", "py-sa"),
            ("leases", "py-lease"),
        ] {
            let key = format!("/registry/{dir}/{NAMESPACE}/{name}");
            assert!(api.stored(&key).await.is_some(), "{key} not stored");
        }
        let secret = api
            .stored(&format!("/registry/secrets/{NAMESPACE}/py-secret"))
            .await
            .unwrap();
        assert_eq!(
            secret["data"]["k"], "dg==",
            "stringData stored as data: {secret}"
        );
        // Created, read and deleted: each read afterwards 404, nothing left in etcd.
        assert_eq!(
            printed["crud"]["gone"],
            serde_json::json!([404, 404]),
            "{stdout}"
        );
        for dir in ["configmaps", "secrets"] {
            let key = format!("/registry/{dir}/{NAMESPACE}/scratch");
            assert!(api.stored(&key).await.is_none(), "{key} still stored");
        }
    })
    .await;
}
