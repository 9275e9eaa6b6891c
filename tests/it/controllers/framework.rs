//! Acceptance tests of the controller framework through the real `kcm controller-manager`
//! against a real etcd (issue 11): a manager started on a converged namespace writes nothing,
//! each kind is watched once whatever the controllers share (counted by etcd itself), and
//! `--controllers` runs exactly the controllers it names.

use std::time::Duration;

use etcd_client::Client;
use serde_json::json;

use crate::support::history;
use crate::support::kcm::{metric_value, start_manager, Kcm};
use crate::support::objects::{
    current_revision, endpoints, pod_key, put_controller, put_json, service_json, service_key,
    serving_pod_json, wait_converged,
};
use crate::support::{eventually, start_etcd, with_timeout, EtcdServer};

const LIMIT: Duration = Duration::from_secs(180);
/// How long a manager may take to list, sync and resync (generous: tests run in parallel).
const SETTLE: Duration = Duration::from_secs(60);
/// etcd's gauge of the watchers it serves (one per watch request, across all streams).
const ETCD_WATCHERS: &str = "etcd_debugging_mvcc_watcher_total";
/// etcd's gauge of open gRPC watch streams.
const ETCD_WATCH_STREAMS: &str = "etcd_debugging_mvcc_watch_stream_total";
/// Every kind a controller-manager can watch, as its metrics label them.
const KINDS: [&str; 6] = [
    "pods",
    "replicationcontrollers",
    "replicasets",
    "deployments",
    "services",
    "endpoints",
];
/// The directories the node lifecycle controller watches itself (Nodes and the kubelets'
/// registrations are not informer kinds), as its metrics label them.
const NODE_DIRS: [&str; 2] = ["nodes", "minions"];
/// Every controller, as its metrics label it.
const CONTROLLERS: [&str; 6] = [
    "replication",
    "replicaset",
    "deployment",
    "endpoints",
    "garbagecollector",
    "nodelifecycle",
];

/// `kcm controller-manager --controllers {controllers}` with one-second periodic syncs, so a
/// resync comes quickly; returns once its status endpoint answers.
async fn fast_manager(etcd: &EtcdServer, controllers: &str) -> Kcm {
    let args = [
        "--controllers",
        controllers,
        "--sync-period",
        "1s",
        "--endpoint-sync-period",
        "1s",
    ];
    start_manager(&etcd.endpoint(), &args).await
}

fn ok_syncs(controller: &str) -> String {
    format!(r#"kcm_syncs_total{{controller="{controller}",result="ok"}}"#)
}

/// Waits until `manager`'s controller `controller` has done more successful syncs than its
/// start can account for (`at_start`), so a periodic resync of its `objects` objects has
/// run after the initial pass.
async fn wait_resynced(manager: &Kcm, controller: &str, at_start: usize, objects: usize) {
    let series = ok_syncs(controller);
    let target = (at_start + objects) as f64;
    eventually(
        SETTLE,
        &format!("{target} successful {controller} syncs (a resync after the initial pass)"),
        || async { manager.metric(&series).await >= target },
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// A converged namespace

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_started_on_a_converged_namespace_writes_nothing() {
    const NAMESPACE: &str = "steady";
    const N_CONTROLLERS: usize = 50;
    const REPLICAS: i64 = 2;
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let names: Vec<String> = (0..N_CONTROLLERS).map(|i| format!("rc-{i:02}")).collect();
        for name in &names {
            put_controller(&client, NAMESPACE, name, name, REPLICAS).await;
        }
        // One service in front of two Running pods with addresses, and one in front of a
        // controller's (Pending, address-less) replicas.
        let db = service_json(NAMESPACE, "db", "db", json!("http"));
        put_json(&client, &service_key(NAMESPACE, "db"), &db).await;
        for (pod, ip) in [("db-1", "10.1.0.1"), ("db-2", "10.1.0.2")] {
            let document = serving_pod_json(NAMESPACE, pod, "db", ip);
            put_json(&client, &pod_key(NAMESPACE, pod), &document).await;
        }
        let web = service_json(NAMESPACE, "rc-00", "rc-00", json!(80));
        put_json(&client, &service_key(NAMESPACE, "rc-00"), &web).await;

        // A first manager converges everything and writes every status and Endpoints.
        let mut first = fast_manager(&etcd, "*").await;
        for name in &names {
            wait_converged(&client, NAMESPACE, name, name, REPLICAS).await;
        }
        eventually(SETTLE, "the Endpoints of db and rc-00", || async {
            let db = endpoints(&client, NAMESPACE, "db").await;
            let web = endpoints(&client, NAMESPACE, "rc-00").await;
            db.is_some_and(|(entries, _, _)| entries == ["10.1.0.1:8080", "10.1.0.2:8080"])
                && web.is_some_and(|(entries, _, _)| entries.is_empty())
        })
        .await;
        let status = first.terminate().await;
        assert!(status.success(), "the first manager exits 0: {status:?}");
        let before = current_revision(&client).await;

        // A second manager lists what the first left and resyncs it.
        let second = fast_manager(&etcd, "*").await;
        // Its start syncs a controller at most once for its own listing, once for a status
        // write and once per listed pod; anything beyond that comes from a resync tick.
        let per_controller = 2 + REPLICAS as usize;
        wait_resynced(
            &second,
            "replication",
            N_CONTROLLERS * per_controller,
            N_CONTROLLERS,
        )
        .await;
        // The endpoints controller's start: its first full pass, each service's listing and
        // one sync per selected pod listed (db-1, db-2 and rc-00's replicas).
        let (services, selected_pods) = (2, 2 + REPLICAS as usize);
        wait_resynced(&second, "endpoints", 2 * services + selected_pods, services).await;
        let after = current_revision(&client).await;
        if after != before {
            let written = history::read(
                &client,
                "/registry/",
                "/registry0",
                before,
                "/registry/~end",
            )
            .await;
            let keys: Vec<_> = written.iter().map(|event| &event.key).collect();
            panic!("the second manager wrote {keys:?} (revision {before} -> {after})");
        }
        let metrics = second.metrics().await;
        for series in [
            "kcm_pods_created_total",
            "kcm_pods_deleted_total",
            "kcm_endpoints_writes_total",
            r#"kcm_syncs_total{controller="replication",result="error"}"#,
            r#"kcm_syncs_total{controller="endpoints",result="error"}"#,
        ] {
            assert_eq!(metric_value(&metrics, series), 0.0, "{series}");
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// What `--controllers` runs and watches

/// Starts `kcm controller-manager --controllers {spec}` on `etcd` (which holds one
/// controller `kinds/web` with no replicas, one such ReplicaSet and Deployment, and one
/// service `kinds/web`), waits until it has listed and resynced, and checks that exactly `controllers` run and exactly `kinds` are
/// watched: each once, by kcm's metrics and by etcd's own watcher and stream gauges.
/// Stops the manager and returns its last metrics.
async fn check_controllers(
    etcd: &EtcdServer,
    spec: &str,
    controllers: &[&str],
    kinds: &[&str],
) -> String {
    // The previous manager's watches end when etcd notices its streams closed.
    let (watchers, streams) = (ETCD_WATCHERS, ETCD_WATCH_STREAMS);
    eventually(SETTLE, "etcd to serve no watch", || async {
        etcd.metric(watchers).await == 0.0 && etcd.metric(streams).await == 0.0
    })
    .await;

    let mut manager = fast_manager(etcd, spec).await;
    for kind in kinds {
        let listed = format!(r#"kcm_watch_relists_total{{resource="{kind}"}}"#);
        eventually(SETTLE, &format!("{spec}: {kind} to be listed"), || async {
            manager.metric(&listed).await >= 1.0
        })
        .await;
    }
    let n = kinds.len() as f64;
    eventually(
        SETTLE,
        &format!("{spec}: etcd to serve {n} watchers"),
        || async { etcd.metric(ETCD_WATCHERS).await >= n },
    )
    .await;
    // One controller, no pods: at most a sync for its listing and one for its status write;
    // one service: at most the first full pass and its listing.
    if controllers.contains(&"replication") {
        wait_resynced(&manager, "replication", 2, 1).await;
    }
    if controllers.contains(&"endpoints") {
        wait_resynced(&manager, "endpoints", 2, 1).await;
    }
    if controllers.contains(&"replicaset") {
        wait_resynced(&manager, "replicaset", 2, 1).await;
    }
    // One deployment of no replicas: its listing, its new ReplicaSet's and its own status
    // writes' events.
    if controllers.contains(&"deployment") {
        wait_resynced(&manager, "deployment", 4, 1).await;
    }
    // One Node without a registration: synced once listed (its grace period is far off).
    if controllers.contains(&"nodelifecycle") {
        let synced = ok_syncs("nodelifecycle");
        eventually(
            SETTLE,
            "the node lifecycle controller to sync the Node",
            || async { manager.metric(&synced).await >= 1.0 },
        )
        .await;
    }
    if controllers.contains(&"garbagecollector") {
        let synced = r#"kcm_syncs_total{controller="garbagecollector",result="ok"}"#;
        eventually(
            SETTLE,
            "the garbage collector to sync the owned pod",
            || async { manager.metric(synced).await >= 1.0 },
        )
        .await;
    }

    // Still exactly one watch per kind after a resync, each on its own gRPC stream
    // (etcd-client opens a stream per watch request). No other watch: the endpoint monitor
    // probes members with unary calls, and without --leader-elect there is no election.
    let metrics = manager.metrics().await;
    assert_eq!(
        etcd.metric(ETCD_WATCHERS).await,
        n,
        "{spec}: etcd's watchers"
    );
    assert_eq!(
        etcd.metric(ETCD_WATCH_STREAMS).await,
        n,
        "{spec}: etcd's streams"
    );
    for kind in KINDS.into_iter().chain(NODE_DIRS) {
        let series = format!(r#"kcm_watch_relists_total{{resource="{kind}"}}"#);
        assert_eq!(
            metrics.contains(&series),
            kinds.contains(&kind),
            "{spec}: kcm watches {kind}: {metrics}"
        );
    }
    for controller in CONTROLLERS {
        let queue = format!(r#"kcm_workqueue_depth{{controller="{controller}"}}"#);
        let syncs = format!(r#"kcm_syncs_total{{controller="{controller}""#);
        let runs = controllers.contains(&controller);
        assert_eq!(metrics.contains(&queue), runs, "{spec}: {controller} queue");
        assert_eq!(metrics.contains(&syncs), runs, "{spec}: {controller} syncs");
    }
    let status = manager.terminate().await;
    assert!(status.success(), "{spec}: the manager exits 0: {status:?}");
    metrics
}

/// One controller, one ReplicaSet, one deployment, one service, a pod the ReplicaSet
/// owns and a Node without a registration, for [`check_controllers`].
async fn put_one_of_each(client: &Client) {
    put_controller(client, "kinds", "web", "web", 0).await;
    let replica_set = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": "kinds", "uid": "uid-rs"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}}},
    });
    put_json(client, "/registry/replicasets/kinds/web", &replica_set).await;
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "kinds", "uid": "uid-deploy"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}}},
    });
    put_json(client, "/registry/deployments/kinds/web", &deployment).await;
    let service = service_json("kinds", "web", "web", json!(80));
    put_json(client, &service_key("kinds", "web"), &service).await;
    // A pod the ReplicaSet owns without controlling it (and no controller selects): only
    // the garbage collector syncs it, and keeps it.
    let owned = json!({
        "apiVersion": "v1beta3", "kind": "Pod",
        "metadata": {"name": "owned", "namespace": "kinds", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "uid-rs"}]},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    });
    put_json(client, "/registry/pods/kinds/owned", &owned).await;
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "web"}});
    put_json(client, "/registry/nodes/web", &node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_is_watched_once_by_kcm_and_by_etcd_s_count() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        put_one_of_each(&etcd.client().await).await;
        // The controllers share the pod informer (and the ReplicaSet controller the
        // replication manager's controller informer, the garbage collector all of them):
        // each kind is watched once; the node lifecycle controller watches Nodes and
        // registrations once more.
        let everything: Vec<&str> = KINDS.iter().chain(&NODE_DIRS).copied().collect();
        let all = check_controllers(&etcd, "*", &CONTROLLERS, &everything).await;
        // Without the endpoints controller nothing watches services.
        let replication = ["pods", "replicationcontrollers"];
        let some = check_controllers(&etcd, "replication", &["replication"], &replication).await;

        // kcm says so itself: one synced informer per kind it watches, none for the others.
        for (metrics, kinds) in [(&all, &KINDS[..]), (&some, &replication[..])] {
            for kind in KINDS {
                let series = format!(r#"kcm_informer_synced{{resource="{kind}"}} 1"#);
                assert_eq!(
                    metrics.lines().any(|line| line == series),
                    kinds.contains(&kind),
                    "{series}: {metrics}"
                );
            }
        }
    })
    .await;
}

/// The kube-controller-manager's `--controllers` grammar, end to end (the unknown names'
/// exit 2 is checked in `cli.rs`; `*` and `replication` above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controllers_flag_runs_exactly_the_controllers_it_names() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        put_one_of_each(&etcd.client().await).await;
        let controllers = ["replication", "replicaset", "deployment"];
        let replication = [
            "pods",
            "replicationcontrollers",
            "replicasets",
            "deployments",
        ];
        let endpoints = ["pods", "services"];
        let no_gc = "-endpoints,-garbagecollector,-nodelifecycle,*";
        check_controllers(&etcd, no_gc, &controllers, &replication).await;
        let no_gc = "*,-endpoints,-garbage-collector-controller,-node-lifecycle-controller";
        check_controllers(&etcd, no_gc, &controllers, &replication).await;
        let nodes = "node-lifecycle-controller";
        check_controllers(&etcd, nodes, &["nodelifecycle"], &NODE_DIRS).await;
        check_controllers(&etcd, "endpoints-controller", &["endpoints"], &endpoints).await;
        // The garbage collector alone watches every kind kcm stores.
        check_controllers(&etcd, "garbagecollector", &["garbagecollector"], &KINDS).await;
    })
    .await;
}
