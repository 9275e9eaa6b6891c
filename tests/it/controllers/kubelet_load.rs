//! `kcm up`'s kubelets under load (issue 25): five nodes run a 3,000-replica Deployment
//! without ever losing their registrations (checked against etcd's history of
//! `/registry/minions/`), and a node that cannot get its registration back says so: a
//! warning naming it each time it retries (rate-limited), and `/healthz` 503 naming it
//! until it is back.
//!
//! Before the fix, all of `kcm up`'s kubelets shared one etcd connection: their pod
//! watches filled its HTTP/2 window while the kubelets were busy writing, the lease
//! renewals waited behind them, every node lost its registration ~10 s after the pods
//! were written and none came back; a retry was logged at debug and `/healthz` said ok.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kcm::kubelet::LEASE_TTL;

use crate::support::history;
use crate::support::kcm::{http_get, run_kcm, Kcm};
use crate::support::objects::{current_revision, pods, PodInfo};
use crate::support::{eventually, free_port, start_etcd, with_timeout};

const MINIONS: &str = "/registry/minions/";

/// The registration keys now, by node name.
async fn registrations(client: &etcd_client::Client) -> Vec<String> {
    client
        .clone()
        .get(
            MINIONS,
            Some(
                etcd_client::GetOptions::new()
                    .with_prefix()
                    .with_keys_only(),
            ),
        )
        .await
        .map(|response| {
            response
                .kvs()
                .iter()
                .filter_map(|kv| kv.key_str().ok()?.strip_prefix(MINIONS).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_kubelets_run_3000_pods_on_5_nodes_without_losing_a_registration() {
    with_timeout(Duration::from_secs(150), async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let started = Instant::now();
        let (mut kcm, _) = up_with(&etcd, 5, &[], &["--max-pods", "600"]).await;
        let registered_at = current_revision(&client).await;

        // Revision -> when it was seen, sampled while the pods run: the history says
        // which revisions deleted and re-created a registration, this says when.
        let samples: Arc<Mutex<Vec<(Instant, i64)>>> = Arc::default();
        let sampler = tokio::spawn({
            let (client, samples) = (client.clone(), samples.clone());
            async move {
                loop {
                    if let Ok(Ok(response)) = tokio::time::timeout(
                        Duration::from_secs(1),
                        client.clone().get("/kcm-test/revision-probe", None),
                    )
                    .await
                    {
                        if let Some(header) = response.header() {
                            samples
                                .lock()
                                .unwrap()
                                .push((Instant::now(), header.revision()));
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        });

        let endpoint = etcd.endpoint();
        create_deployment(&endpoint, "big", 3000).await;
        let created = Instant::now();
        let mut last;
        // About 5 s with the tests profile the suite uses and the kubelets' starts in flight
        // together; about 55 s with the debug build before either.
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let pods = pods(&client, "default").await;
            let running = pods.values().filter(|p| p.phase == "Running").count();
            last = (pods.len(), running);
            if running == 3000 {
                break;
            }
            kcm.assert_running();
            assert!(
                Instant::now() < deadline,
                "{running} of {} pods Running after 90s (3000 wanted); registrations now: {:?}",
                pods.len(),
                registrations(&client).await
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let took = created.elapsed();
        sampler.abort();
        let samples = samples.lock().unwrap().clone();
        let when = |revision: i64| {
            samples
                .iter()
                .find(|(_, seen)| *seen >= revision)
                .map_or_else(Instant::now, |(at, _)| *at)
        };

        // etcd's history of the registrations since they were made: every deletion of a
        // node's key must be followed by its re-creation within one lease period.
        let events = history::read(&client, "/registry/", "/registry0", registered_at, "/registry/~end")
            .await;
        let mut gaps: BTreeMap<String, Duration> = BTreeMap::new();
        let mut deleted: BTreeMap<String, i64> = BTreeMap::new();
        for event in events.iter().filter(|e| e.key.starts_with(MINIONS)) {
            let node = event.key.trim_start_matches(MINIONS).to_owned();
            if !event.put {
                deleted.insert(node, event.revision);
            } else if let Some(at) = deleted.remove(&node) {
                let gap = when(event.revision).saturating_duration_since(when(at));
                let longest = gaps.entry(node).or_default();
                *longest = (*longest).max(gap);
            }
        }
        for (node, at) in deleted {
            gaps.insert(node, when(at).elapsed());
        }
        // The same history, for the addresses: at no revision did two Running pods hold
        // one (each node starts up to 32 pods at once, their addresses from one pool).
        let (mut address_of, mut holder) = (BTreeMap::new(), BTreeMap::new());
        let mut running_writes = 0;
        for event in events.iter().filter(|e| e.key.starts_with("/registry/pods/")) {
            if let Some(ip) = address_of.remove(&event.key) {
                holder.remove(&ip);
            }
            if !event.put {
                continue;
            }
            let pod: serde_json::Value =
                serde_json::from_slice(&event.value).expect("stored pod JSON");
            let ip = pod["status"]["podIP"].as_str().unwrap_or_default().to_owned();
            if pod["status"]["phase"] == "Running" && !ip.is_empty() {
                running_writes += 1;
                if let Some(other) = holder.insert(ip.clone(), event.key.clone()) {
                    panic!(
                        "at revision {}, {} and {other} both held {ip}",
                        event.revision, event.key
                    );
                }
                address_of.insert(event.key.clone(), ip);
            }
        }
        assert!(
            running_writes >= 3000,
            "{running_writes} writes of Running pods in etcd's history (3000 wanted)"
        );
        eprintln!(
            "3000 pods Running {:.1}s after the Deployment was created ({:.1}s after kcm up \
             started); longest registration gaps: {gaps:?}; last count {last:?}",
            took.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
        for (node, gap) in &gaps {
            assert!(
                *gap <= LEASE_TTL,
                "node {node}'s registration was absent for {gap:?}, longer than a lease ({LEASE_TTL:?})"
            );
        }
        assert_eq!(registrations(&client).await.len(), 5);
        // The scheduler spread them: at most one pod more on any node than on another.
        let running = pods(&client, "default").await;
        assert_spread(&running, 5);
        // Each node starts up to 32 pods at once (their Running writes in flight
        // together): every Running pod still has an address of its own.
        assert_distinct_addresses(&running);
        assert!(
            kcm.warnings_about("registering again failed").is_empty(),
            "a node could not register again"
        );
        kcm.terminate().await;
    })
    .await;
}

/// `kcm create deployment NAME --image nginx --replicas N`.
async fn create_deployment(endpoint: &str, name: &str, replicas: usize) {
    let replicas = replicas.to_string();
    let out = run_kcm(
        &[
            "--etcd-servers",
            endpoint,
            "create",
            "deployment",
            name,
            "--image",
            "nginx",
            "--replicas",
            &replicas,
        ],
        &[],
    )
    .await;
    assert!(
        out.status.success(),
        "create deployment {name}: {}",
        out.stderr
    );
}

/// Every Running pod of `pods` has an address, and no two have the same (the nodes' pod
/// ranges are distinct, so this holds across nodes as within one).
fn assert_distinct_addresses(pods: &BTreeMap<String, PodInfo>) {
    let mut holders: BTreeMap<&str, &str> = BTreeMap::new();
    for pod in pods.values().filter(|p| p.phase == "Running") {
        assert!(
            !pod.pod_ip.is_empty(),
            "Running pod {} has no address",
            pod.name
        );
        if let Some(other) = holders.insert(&pod.pod_ip, &pod.name) {
            panic!("pods {other} and {} both hold {}", pod.name, pod.pod_ip);
        }
    }
    assert_eq!(holders.len(), 3000, "addresses of the Running pods");
}

/// Every pod of `pods` has a node, and the node holding the most holds at most one more
/// than the node holding the fewest, over `nodes` nodes.
fn assert_spread(pods: &BTreeMap<String, PodInfo>, nodes: usize) {
    let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
    for pod in pods.values() {
        assert!(!pod.host.is_empty(), "a pod without a node: {pods:?}");
        *per_node.entry(pod.host.as_str()).or_default() += 1;
    }
    assert_eq!(per_node.len(), nodes, "pods per node: {per_node:?}");
    let (min, max) = (
        per_node.values().min().unwrap(),
        per_node.values().max().unwrap(),
    );
    assert!(max - min <= 1, "pods per node: {per_node:?}");
    eprintln!("pods per node: {per_node:?}");
}

/// `kcm up --nodes 2`: a 10-replica Deployment's pods run 5 on each node, bound by the
/// scheduler (the kubelets of `kcm up` claim nothing themselves).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_spreads_ten_pods_over_two_nodes() {
    with_timeout(Duration::from_secs(60), async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let (mut kcm, _) = up_with(&etcd, 2, &[], &[]).await;
        let endpoint = etcd.endpoint();
        create_deployment(&endpoint, "web", 10).await;
        eventually(Duration::from_secs(30), "10 pods Running", || {
            let client = client.clone();
            async move {
                let pods = pods(&client, "default").await;
                pods.len() == 10 && pods.values().all(|p| p.phase == "Running")
            }
        })
        .await;
        assert_spread(&pods(&client, "default").await, 2);
        kcm.terminate().await;
    })
    .await;
}

/// `kcm {global} up --nodes N {args} --port P`, once healthy with its N names.
async fn up_with(
    etcd: &crate::support::EtcdServer,
    nodes: usize,
    global: &[&str],
    args: &[&str],
) -> (Kcm, u16) {
    let port = free_port();
    let port_arg = port.to_string();
    let endpoint = etcd.endpoint();
    let nodes_arg = nodes.to_string();
    let mut all = vec!["--etcd-servers", endpoint.as_str()];
    all.extend_from_slice(global);
    all.extend_from_slice(&["up", "--nodes", &nodes_arg, "--port", &port_arg]);
    all.extend_from_slice(args);
    // Warnings only: 3,000 "claimed pod" lines echoed through the test slow it down.
    let kcm = Kcm::spawn(&all, &[("RUST_LOG", "warn")]);
    let client = etcd.client().await;
    eventually(
        Duration::from_secs(30),
        "kcm up healthy with its nodes",
        || {
            let client = client.clone();
            async move {
                let healthy = matches!(http_get(port, "/healthz").await, Some((200, _)));
                healthy && registrations(&client).await.len() == nodes
            }
        },
    )
    .await;
    (kcm, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_kubelet_that_cannot_register_again_warns_and_fails_healthz_until_back() {
    with_timeout(Duration::from_secs(90), async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        // A short request timeout, so each attempt to register again fails fast.
        let (kcm, port) = up_with(&etcd, 1, &["--etcd-request-timeout", "1s"], &[]).await;
        fails_healthz_while_etcd_is_frozen(&etcd, kcm, port).await;
    })
    .await;
}

/// The same for a kubelet of its own: `kcm kubelet --healthz-port P`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_that_cannot_register_again_warns_and_fails_its_healthz_until_back() {
    with_timeout(Duration::from_secs(90), async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let port = free_port();
        let port_arg = port.to_string();
        let endpoint = etcd.endpoint();
        let kcm = Kcm::spawn(
            &[
                "--etcd-servers",
                &endpoint,
                "--etcd-request-timeout",
                "1s",
                "kubelet",
                "--node",
                "node-1",
                "--healthz-port",
                &port_arg,
            ],
            &[("RUST_LOG", "warn")],
        );
        let client = etcd.client().await;
        eventually(
            Duration::from_secs(30),
            "kcm kubelet healthy and registered",
            || {
                let client = client.clone();
                async move {
                    matches!(http_get(port, "/healthz").await, Some((200, _)))
                        && registrations(&client).await == ["node-1"]
                }
            },
        )
        .await;
        fails_healthz_while_etcd_is_frozen(&etcd, kcm, port).await;
    })
    .await;
}

/// etcd frozen beyond a lease: node-1's registration lapses and every attempt to register
/// again gets no answer; `/healthz` on `port` answers 503 naming node-1 and the process
/// warns (rate-limited) until etcd is back, then 200 again with node-1 registered.
async fn fails_healthz_while_etcd_is_frozen(
    etcd: &crate::support::EtcdServer,
    kcm: Kcm,
    port: u16,
) {
    etcd.pause();
    let frozen = Instant::now();
    let mut unhealthy = None;
    let deadline = frozen + LEASE_TTL + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Some((503, body)) = http_get(port, "/healthz").await {
            if body.contains("node node-1: registration lost")
                && !kcm.warnings_about("registering again failed").is_empty()
            {
                unhealthy = Some(body);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let warnings = kcm.warnings_about("registering again failed");
    etcd.resume();
    let Some(body) = unhealthy else {
        let now = http_get(port, "/healthz").await;
        panic!(
            "within {:?} of freezing etcd, wanted /healthz 503 naming node-1 and a \
             warning; got {now:?} and warnings {warnings:?}",
            deadline - frozen
        );
    };
    assert!(
        warnings.iter().all(|line| line.contains("node=node-1")),
        "the warning names the node: {warnings:?}"
    );
    eprintln!("while frozen: /healthz 503: {body}");
    eventually(
        Duration::from_secs(30),
        "/healthz 200 once node-1 is back",
        || async move { matches!(http_get(port, "/healthz").await, Some((200, _))) },
    )
    .await;
    let client = etcd.client().await;
    assert_eq!(registrations(&client).await, ["node-1"]);
    // Rate-limited: at most one warning per period while it retried.
    let warned = kcm.warnings_about("registering again failed").len();
    let bound = frozen.elapsed().as_secs() / kcm::kubelet::RETRY_WARNING_PERIOD.as_secs() + 1;
    assert!(
        warned as u64 <= bound,
        "{warned} retry warnings in {:?}",
        frozen.elapsed()
    );
    let mut kcm = kcm;
    kcm.terminate().await;
}
