//! Integration tests of the endpoints controller through the real `kcm controller-manager`
//! binary against a real etcd: endpoints follow pods through scale up and down, an address
//! change, relabelling, named and numeric `containerPort`, and service deletion; every change
//! arrives from the watch (the full pass runs once a minute); Endpoints are written only when
//! their set changes; and end to end, a replication controller's pods started by `kcm kubelet`
//! show up behind their service.
//!
//! Services and pods are written and read as raw JSON with etcd-client.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions};
use serde_json::{json, Value};

use crate::support::kcm::Kcm;
use crate::support::objects::{
    delete, endpoints, endpoints_key, pod_key, put_json, service_json, service_key,
    serving_pod_json, update_json,
};
use crate::support::{eventually, start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(120);
/// The controller's full pass runs this rarely, so anything faster comes from a watch.
const SLOW_SYNC: &str = "60s";
/// How long a watch-driven change may take to reach the Endpoints (generous: tests run in
/// parallel; far below [`SLOW_SYNC`]).
const FROM_THE_WATCH: Duration = Duration::from_secs(10);
/// How long a pod getting its address may take to show in its service's Endpoints.
const POD_IP_LATENCY: Duration = Duration::from_secs(3);
/// How long replicas may take to be created, claimed and started.
const CONVERGE: Duration = Duration::from_secs(60);
const NAMESPACE: &str = "shop";

// ---------------------------------------------------------------------------------------------
// `kcm` child processes

/// `kcm controller-manager --controllers {controllers}` with slow periodic syncs, so that
/// every change must come from a watch; returns once its status endpoint answers.
async fn controller_manager(endpoint: &str, controllers: &str) -> Kcm {
    Kcm::start(
        &[
            "--etcd-servers",
            endpoint,
            "--controllers",
            controllers,
            "--sync-period",
            SLOW_SYNC,
            "--endpoint-sync-period",
            SLOW_SYNC,
        ],
        &[],
    )
    .await
}

// ---------------------------------------------------------------------------------------------
// Objects as raw JSON in etcd

async fn endpoints_are(client: &Client, name: &str, expected: &[&str]) -> bool {
    endpoints(client, NAMESPACE, name)
        .await
        .is_some_and(|(entries, _, _)| entries == expected)
}

/// Waits until service `name`'s Endpoints are exactly `expected` (sorted).
async fn wait_endpoints(client: &Client, name: &str, expected: &[&str], why: &str) {
    eventually(
        FROM_THE_WATCH,
        &format!("endpoints of {name} to be {expected:?} ({why})"),
        || endpoints_are(client, name, expected),
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// Tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_follow_pods_through_scaling_address_and_port_changes_and_deletion() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let _manager = controller_manager(&etcd.endpoint(), "endpoints").await;
        put_json(
            &client,
            &service_key(NAMESPACE, "web"),
            &service_json(NAMESPACE, "web", "web", json!("http")),
        )
        .await;
        put_json(
            &client,
            &pod_key(NAMESPACE, "db-1"),
            &serving_pod_json(NAMESPACE, "db-1", "db", "10.1.0.99"),
        )
        .await;
        // Same labels, another namespace: never behind this service.
        let mut elsewhere = serving_pod_json(NAMESPACE, "web-0", "web", "10.9.0.1");
        elsewhere["metadata"]["namespace"] = json!("elsewhere");
        put_json(&client, "/registry/pods/elsewhere/web-0", &elsewhere).await;
        wait_endpoints(&client, "web", &[], "no pod selected yet").await;

        // Scale up: two pods with addresses, one still without.
        put_json(
            &client,
            &pod_key(NAMESPACE, "web-1"),
            &serving_pod_json(NAMESPACE, "web-1", "web", "10.1.0.1"),
        )
        .await;
        put_json(
            &client,
            &pod_key(NAMESPACE, "web-2"),
            &serving_pod_json(NAMESPACE, "web-2", "web", "10.1.0.2"),
        )
        .await;
        put_json(
            &client,
            &pod_key(NAMESPACE, "web-3"),
            &serving_pod_json(NAMESPACE, "web-3", "web", ""),
        )
        .await;
        wait_endpoints(
            &client,
            "web",
            &["10.1.0.1:8080", "10.1.0.2:8080"],
            "scale up",
        )
        .await;

        // A pod that gets its address shows up within moments, from the pod watch.
        let started = Instant::now();
        put_json(
            &client,
            &pod_key(NAMESPACE, "web-3"),
            &serving_pod_json(NAMESPACE, "web-3", "web", "10.1.0.3"),
        )
        .await;
        eventually(
            POD_IP_LATENCY,
            "web-3's address to reach the endpoints",
            || async {
                endpoints(&client, NAMESPACE, "web")
                    .await
                    .is_some_and(|(entries, _, _)| entries.contains(&"10.1.0.3:8080".into()))
            },
        )
        .await;
        eprintln!(
            "web-3's address reached the endpoints after {:?}",
            started.elapsed()
        );

        delete(&client, &pod_key(NAMESPACE, "web-1")).await;
        wait_endpoints(
            &client,
            "web",
            &["10.1.0.2:8080", "10.1.0.3:8080"],
            "scale down",
        )
        .await;

        update_json(&client, &pod_key(NAMESPACE, "web-2"), |pod| {
            pod["status"]["podIP"] = json!("10.1.0.20")
        })
        .await;
        wait_endpoints(
            &client,
            "web",
            &["10.1.0.20:8080", "10.1.0.3:8080"],
            "new address",
        )
        .await;

        // A number is used as given; a name is looked up in the pods' ports.
        update_json(&client, &service_key(NAMESPACE, "web"), |service| {
            service["spec"]["containerPort"] = json!(7000)
        })
        .await;
        wait_endpoints(
            &client,
            "web",
            &["10.1.0.20:7000", "10.1.0.3:7000"],
            "numeric port",
        )
        .await;
        update_json(&client, &service_key(NAMESPACE, "web"), |service| {
            service["spec"]["containerPort"] = json!("metrics")
        })
        .await;
        wait_endpoints(
            &client,
            "web",
            &["10.1.0.20:9090", "10.1.0.3:9090"],
            "named port",
        )
        .await;

        update_json(&client, &pod_key(NAMESPACE, "web-3"), |pod| {
            pod["metadata"]["labels"]["app"] = json!("db")
        })
        .await;
        wait_endpoints(&client, "web", &["10.1.0.20:9090"], "relabelled out").await;

        update_json(&client, &service_key(NAMESPACE, "web"), |service| {
            service["spec"]["selector"] = json!({ "app": "db" })
        })
        .await;
        wait_endpoints(
            &client,
            "web",
            &["10.1.0.3:9090", "10.1.0.99:9090"],
            "new selector",
        )
        .await;

        delete(&client, &service_key(NAMESPACE, "web")).await;
        eventually(
            FROM_THE_WATCH,
            "the Endpoints of the deleted service to go",
            || async { endpoints(&client, NAMESPACE, "web").await.is_none() },
        )
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_are_written_only_when_their_set_changes() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let manager = controller_manager(&etcd.endpoint(), "endpoints").await;
        put_json(
            &client,
            &service_key(NAMESPACE, "web"),
            &service_json(NAMESPACE, "web", "web", json!(0)),
        )
        .await;
        put_json(
            &client,
            &pod_key(NAMESPACE, "web-1"),
            &serving_pod_json(NAMESPACE, "web-1", "web", "10.1.0.1"),
        )
        .await;
        wait_endpoints(&client, "web", &["10.1.0.1:8080"], "first pod").await;
        let (_, mod_revision, version) = endpoints(&client, NAMESPACE, "web")
            .await
            .expect("endpoints");

        // A label change that keeps the pod selected: the pod watch queues the service, the
        // sync finds the same set and writes nothing.
        const OK_SYNCS: &str = r#"kcm_syncs_total{controller="endpoints",result="ok"}"#;
        const WRITES: &str = "kcm_endpoints_writes_total";
        let (syncs, writes) = (manager.metric(OK_SYNCS).await, manager.metric(WRITES).await);
        assert!(
            syncs >= 1.0 && writes >= 1.0,
            "syncs {syncs}, writes {writes}"
        );
        update_json(&client, &pod_key(NAMESPACE, "web-1"), |pod| {
            pod["metadata"]["labels"]["track"] = json!("stable");
            pod["metadata"]["annotations"] = json!({ "note": "unrelated" });
        })
        .await;
        eventually(
            FROM_THE_WATCH,
            "the relabelled pod's service to be synced",
            || async { manager.metric(OK_SYNCS).await > syncs },
        )
        .await;
        assert_eq!(manager.metric(WRITES).await, writes, "no endpoints write");
        assert_eq!(
            endpoints(&client, NAMESPACE, "web").await,
            Some((vec!["10.1.0.1:8080".to_owned()], mod_revision, version)),
            "the Endpoints key was not rewritten"
        );

        // A change of the set is written, once.
        put_json(
            &client,
            &pod_key(NAMESPACE, "web-2"),
            &serving_pod_json(NAMESPACE, "web-2", "web", "10.1.0.2"),
        )
        .await;
        wait_endpoints(
            &client,
            "web",
            &["10.1.0.1:8080", "10.1.0.2:8080"],
            "second pod",
        )
        .await;
        let (_, _, new_version) = endpoints(&client, NAMESPACE, "web")
            .await
            .expect("endpoints");
        assert_eq!(new_version, version + 1, "one write for one change");
    })
    .await;
}

/// The sorted `ip:8080` of the active pods of the namespace, if every one of them is Running
/// with an address and there are `n`.
async fn running_pod_endpoints(client: &Client, n: usize) -> Option<Vec<String>> {
    let prefix = pod_key(NAMESPACE, "");
    let response = client
        .clone()
        .get(prefix.as_str(), Some(GetOptions::new().with_prefix()))
        .await
        .expect("list pods");
    let mut entries = BTreeSet::new();
    for kv in response.kvs() {
        let pod: Value = serde_json::from_slice(kv.value()).expect("pod JSON");
        if pod["status"]["phase"] != json!("Running") {
            return None;
        }
        entries.insert(format!("{}:8080", pod["status"]["podIP"].as_str()?));
    }
    (entries.len() == n).then(|| entries.into_iter().collect())
}

/// Waits until `n` replicas run and the service's Endpoints are exactly their addresses.
async fn wait_serving(client: &Client, n: usize) {
    eventually(
        CONVERGE,
        &format!("{n} running replicas behind the service"),
        || async {
            match running_pod_endpoints(client, n).await {
                Some(expected) => endpoints(client, NAMESPACE, "web")
                    .await
                    .is_some_and(|(entries, _, _)| entries == expected),
                None => false,
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_started_by_kcm_kubelet_are_served_by_their_service() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let endpoint = etcd.endpoint();
        let _manager = controller_manager(&endpoint, "endpoints,replication").await;
        let mut kubelet = Kcm::spawn(
            &[
                "--etcd-servers",
                &endpoint,
                "kubelet",
                "--node",
                "node-1",
                "--pod-cidr",
                "10.244.1.0/24",
                "--start-delay",
                "200ms",
            ],
            &[],
        );
        let controller_key = format!("/registry/controllers/{NAMESPACE}/web");
        let labels = json!({ "app": "web" });
        let controller = json!({
            "kind": "ReplicationController",
            "apiVersion": "v1beta3",
            "metadata": { "name": "web", "namespace": NAMESPACE, "uid": "uid-web" },
            "spec": {
                "replicas": 3,
                "selector": labels,
                "template": {
                    "metadata": { "labels": labels },
                    "spec": { "containers": [{
                        "name": "web",
                        "image": "nginx",
                        "ports": [{ "name": "http", "containerPort": 8080 }],
                    }] },
                },
            },
        });
        put_json(&client, &controller_key, &controller).await;
        put_json(
            &client,
            &service_key(NAMESPACE, "web"),
            &service_json(NAMESPACE, "web", "web", json!("http")),
        )
        .await;
        wait_serving(&client, 3).await;

        let scale = |replicas: i64| {
            update_json(&client, &controller_key, move |rc| {
                rc["spec"]["replicas"] = json!(replicas)
            })
        };
        scale(5).await;
        wait_serving(&client, 5).await;
        scale(1).await;
        wait_serving(&client, 1).await;

        delete(&client, &service_key(NAMESPACE, "web")).await;
        eventually(
            FROM_THE_WATCH,
            "the Endpoints of the deleted service to go",
            || async { endpoints(&client, NAMESPACE, "web").await.is_none() },
        )
        .await;
        let status = kubelet.terminate().await;
        assert!(
            status.success(),
            "kcm kubelet exits 0 on SIGTERM: {status:?}"
        );
    })
    .await;
}

/// A pod labelled `app={app}` with IP `ip` in `phase`, whose port named `http` (8080) is
/// in its second container: 2014's `findPort` looked names up across every container.
fn pod_with_port_in_second_container(
    namespace: &str,
    name: &str,
    app: &str,
    ip: &str,
    phase: &str,
) -> Value {
    json!({
        "kind": "Pod",
        "apiVersion": "v1beta3",
        "metadata": { "name": name, "namespace": namespace, "labels": { "app": app } },
        "spec": {
            "host": "node-1",
            "containers": [
                { "name": "sidecar", "image": "busybox", "ports": [{ "name": "admin", "containerPort": 9000 }] },
                { "name": "web", "image": "nginx", "ports": [{ "name": "http", "containerPort": 8080 }] },
            ],
        },
        "status": { "phase": phase, "host": "node-1", "podIP": ip },
    })
}

/// The 2014 rules the other tests do not pin, against a real etcd whose auth forbids the
/// controller to write one namespace's Endpoints:
/// - the master's own services, `kubernetes` and `kubernetes-ro`, get no Endpoints even
///   though kcm may write them and their selectors match serving pods;
/// - a Service whose sync fails (etcd refuses the write: permission denied) does not stop
///   the others, which keep following their pods, and the failure is logged naming it;
/// - Failed and Succeeded pods with an IP are still endpoints (2014 ignored the phase);
/// - a named port is found in whichever container declares it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_keep_2014_s_rules_for_master_services_phases_ports_and_failing_syncs() {
    use etcd_client::{ConnectOptions, Permission};

    use crate::support::cluster::{start_cluster_with, ClusterOptions};

    with_timeout(LIMIT, async {
        let Some(etcd) = start_cluster_with(ClusterOptions {
            members: 1,
            ..ClusterOptions::default()
        })
        .await
        else {
            return;
        };
        let endpoint = etcd.endpoint(0);
        let mut admin = etcd.client().await;
        admin.role_add("root").await.unwrap();
        admin.user_add("root", "root-secret", None).await.unwrap();
        admin.user_grant_role("root", "root").await.unwrap();
        admin.user_add("kcm", "kcm-secret", None).await.unwrap();
        admin.role_add("kcm").await.unwrap();
        // Everything is readable; Endpoints are writable in `shop` and `default` only (and
        // the key kcm's start-up write check uses).
        for permission in [
            Permission::read("/registry/").with_prefix(),
            Permission::read_write(endpoints_key(NAMESPACE, "")).with_prefix(),
            Permission::read_write(endpoints_key("default", "")).with_prefix(),
            Permission::read_write("/registry/kcm-permission-check"),
        ] {
            admin
                .role_grant_permission("kcm", permission)
                .await
                .unwrap();
        }
        admin.user_grant_role("kcm", "kcm").await.unwrap();
        admin.auth_enable().await.unwrap();
        let client = Client::connect(
            [endpoint.as_str()],
            Some(ConnectOptions::new().with_user("root", "root-secret")),
        )
        .await
        .expect("connect as root");

        for (namespace, name, app) in [
            ("default", "kubernetes", "web"),
            ("default", "kubernetes-ro", "web"),
            ("default", "not-master", "web"),
            ("locked", "web", "web"),
            (NAMESPACE, "web", "web"),
        ] {
            put_json(
                &client,
                &service_key(namespace, name),
                &service_json(namespace, name, app, json!("http")),
            )
            .await;
        }
        for (namespace, ip) in [("default", "10.0.0.1"), ("locked", "10.0.0.2")] {
            put_json(
                &client,
                &pod_key(namespace, "web-1"),
                &serving_pod_json(namespace, "web-1", "web", ip),
            )
            .await;
        }
        for (name, ip, phase) in [
            ("running", "10.1.0.1", "Running"),
            ("failed", "10.1.0.2", "Failed"),
            ("succeeded", "10.1.0.3", "Succeeded"),
        ] {
            put_json(
                &client,
                &pod_key(NAMESPACE, name),
                &pod_with_port_in_second_container(NAMESPACE, name, "web", ip, phase),
            )
            .await;
        }

        let dir = tempfile::tempdir().unwrap();
        let password_file = dir.path().join("kcm-password");
        std::fs::write(&password_file, "kcm-secret\n").unwrap();
        std::fs::set_permissions(
            &password_file,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        let manager = Kcm::start(
            &[
                "--etcd-servers",
                &endpoint,
                "--etcd-user",
                "kcm",
                "--etcd-password-file",
                password_file.to_str().unwrap(),
                "--controllers",
                "endpoints",
                "--sync-period",
                SLOW_SYNC,
                "--endpoint-sync-period",
                SLOW_SYNC,
            ],
            &[],
        )
        .await;

        // Every phase, and the port named in the second container.
        wait_endpoints(
            &client,
            "web",
            &["10.1.0.1:8080", "10.1.0.2:8080", "10.1.0.3:8080"],
            "pods in every phase, port found in the second container",
        )
        .await;
        eventually(
            FROM_THE_WATCH,
            "default/not-master's endpoints (the namespace is writable)",
            || async {
                endpoints(&client, "default", "not-master")
                    .await
                    .is_some_and(|(entries, _, _)| entries == ["10.0.0.1:8080"])
            },
        )
        .await;
        eventually(
            FROM_THE_WATCH,
            "a warning naming the service whose sync etcd refuses",
            || async { !manager.warnings_about("locked/web").is_empty() },
        )
        .await;

        // The failing service is retried, and does not hold the others up.
        update_json(&client, &pod_key(NAMESPACE, "failed"), |pod| {
            pod["status"]["podIP"] = json!("10.1.0.20")
        })
        .await;
        wait_endpoints(
            &client,
            "web",
            &["10.1.0.1:8080", "10.1.0.20:8080", "10.1.0.3:8080"],
            "a change after another service's sync failed",
        )
        .await;

        for name in ["kubernetes", "kubernetes-ro"] {
            assert_eq!(
                endpoints(&client, "default", name).await,
                None,
                "the master service default/{name} gets no endpoints"
            );
        }
        assert_eq!(endpoints(&client, "locked", "web").await, None);
        let (code, body) = manager.healthz().await.expect("status endpoint answers");
        assert_eq!(
            code, 200,
            "one failing service leaves the manager healthy: {body}"
        );
    })
    .await;
}

/// A serving pod whose Ready condition is `ready` (none when `None`).
fn pod_with_ready(name: &str, ip: &str, ready: Option<&str>) -> Value {
    let mut pod = serving_pod_json(NAMESPACE, name, "web", ip);
    if let Some(ready) = ready {
        pod["status"]["conditions"] = json!([{
            "type": "Ready", "status": ready, "lastTransitionTime": "2026-01-01T00:00:00Z"
        }]);
    }
    pod
}

/// Issue 13: a pod whose Ready condition is False is left out of its service's Endpoints and
/// joins them once Ready; a pod without conditions (2014) is served as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_leave_out_unready_pods_until_they_turn_ready() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let _manager = controller_manager(&etcd.endpoint(), "endpoints").await;
        put_json(
            &client,
            &service_key(NAMESPACE, "web"),
            &service_json(NAMESPACE, "web", "web", json!("http")),
        )
        .await;
        for (name, ip, ready) in [
            ("ready", "10.1.0.1", Some("True")),
            ("slow", "10.1.0.2", Some("False")),
            ("old", "10.1.0.3", None),
        ] {
            put_json(
                &client,
                &pod_key(NAMESPACE, name),
                &pod_with_ready(name, ip, ready),
            )
            .await;
        }
        wait_endpoints(
            &client,
            "web",
            &["10.1.0.1:8080", "10.1.0.3:8080"],
            "the unready pod left out",
        )
        .await;
        update_json(&client, &pod_key(NAMESPACE, "slow"), |pod| {
            pod["status"]["conditions"][0]["status"] = json!("True");
        })
        .await;
        wait_endpoints(
            &client,
            "web",
            &["10.1.0.1:8080", "10.1.0.2:8080", "10.1.0.3:8080"],
            "slow turned Ready",
        )
        .await;
        update_json(&client, &pod_key(NAMESPACE, "ready"), |pod| {
            pod["status"]["conditions"][0]["status"] = json!("False");
        })
        .await;
        wait_endpoints(
            &client,
            "web",
            &["10.1.0.2:8080", "10.1.0.3:8080"],
            "ready turned unready",
        )
        .await;
    })
    .await;
}
