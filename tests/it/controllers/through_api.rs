//! `kcm controller-manager --kubeconfig`/`--master`: the replication manager as a client of
//! kcm's apiserver (2014's topology), driven by kubectl, with every outcome read from etcd.
//!
//! - kubectl's create, scale, a pod deleted by hand and the controller's delete, each
//!   carried out through the API;
//! - no over-creation at 3,000 replicas, from etcd's history of the pods, with the
//!   apiserver restarted while the scale-up is under way (the manager's watches cut and
//!   resumed), with two unelected managers, and with a delete racing a scale-up;
//! - nothing lost when the manager is cut off by a proxy while etcd compacts past it;
//! - the ReplicaSet controller the same way: kubectl's create and scale, an orphan
//!   adopted, two unelected controllers at 3,000 replicas;
//! - the endpoints controller following its pods through its watches over HTTP;
//! - the late-2014 replication manager as a client of the apiserver (`--master`);
//! - a kubeconfig as a real cluster's (HTTPS, a CA, a bearer token), and a wrong token;
//! - leader election through a Lease;
//! - what cannot run through the API yet is refused at start, naming it.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::apiserver::{spawn_apiserver, wait_ready};
use crate::support::etcd::start_etcd;
use crate::support::history;
use crate::support::kcm::Kcm;
use crate::support::kubectl::{kubectl_binary, start_apiserver, Api, Kubectl};
use crate::support::objects::current_revision;
use crate::support::{eventually, free_port, with_timeout, FaultProxy};

const PODS: &str = "/registry/pods/default/";
const CONVERGE: Duration = Duration::from_secs(60);

fn rc(replicas: u32) -> String {
    format!(
        "apiVersion: v1
kind: ReplicationController
metadata:
  name: web
spec:
  replicas: {replicas}
  selector: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
"
    )
}

/// The (name, uid) of each pod stored in `default`.
async fn pods(api: &Api) -> BTreeSet<(String, String)> {
    api.documents(PODS)
        .await
        .iter()
        .map(|pod| {
            let field = |f: &str| pod["metadata"][f].as_str().unwrap_or_default().to_string();
            (field("name"), field("uid"))
        })
        .collect()
}

/// The manager through the API, at `kubeconfig`.
async fn manager(kubeconfig: &str) -> Kcm {
    Kcm::start(
        &[
            "--kubeconfig",
            kubeconfig,
            "--controllers",
            "replication",
            "--sync-period",
            "1s",
        ],
        &[],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drives_the_replication_manager_through_the_api() {
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(240), async {
        let kubeconfig = api.kubectl.kubeconfig().display().to_string();
        let mut manager = manager(&kubeconfig).await;
        let file = api.manifest("rc.yaml", &rc(3));
        api.kubectl.ok(&["create", "-f", &file]).await;
        eventually(CONVERGE, "3 pods, made through the API", || async {
            api.count(PODS).await == 3
        })
        .await;

        api.kubectl
            .ok(&["scale", "rc", "web", "--replicas=5"])
            .await;
        eventually(CONVERGE, "5 pods after kubectl scale", || async {
            api.count(PODS).await == 5
        })
        .await;

        // A pod deleted by hand is replaced (maybe under its name: the names are slots).
        let before = pods(&api).await;
        let (victim, victim_uid) = before.iter().next().expect("a pod").clone();
        let deleted = api
            .kubectl
            .run(&["delete", "pod", &victim, "--grace-period=0", "--force"])
            .await;
        assert!(deleted.status.success(), "{deleted:?}");
        eventually(CONVERGE, "the deleted pod replaced", || async {
            let now = pods(&api).await;
            now.len() == 5 && !now.iter().any(|(_, uid)| *uid == victim_uid)
        })
        .await;

        api.kubectl
            .ok(&["scale", "rc", "web", "--replicas=2"])
            .await;
        eventually(CONVERGE, "2 pods after scaling down", || async {
            api.count(PODS).await == 2
        })
        .await;
        // Its status, written through /status, counts them.
        eventually(CONVERGE, "status.replicas 2", || async {
            let rc = api.stored("/registry/controllers/default/web").await;
            rc.is_some_and(|rc| rc["status"]["replicas"] == 2)
        })
        .await;
        // Its events, written through the API.
        eventually(
            CONVERGE,
            "SuccessfulCreate and SuccessfulDelete events",
            || async {
                let reasons: BTreeSet<String> = api
                    .documents("/registry/events/default/")
                    .await
                    .iter()
                    .filter_map(|e| e["reason"].as_str().map(str::to_string))
                    .collect();
                reasons.contains("SuccessfulCreate") && reasons.contains("SuccessfulDelete")
            },
        )
        .await;

        api.kubectl.ok(&["delete", "rc", "web"]).await;
        eventually(
            CONVERGE,
            "no pods once the controller is deleted",
            || async { api.count(PODS).await == 0 },
        )
        .await;
        manager.assert_running();
        assert!(
            manager.log().contains("through the API"),
            "{}",
            manager.log()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_over_creation_at_3000_replicas_through_a_restarted_apiserver() {
    const REPLICAS: usize = 3_000;
    let Some(binary) = kubectl_binary() else {
        return;
    };
    let Some(etcd) = start_etcd().await else {
        return;
    };
    with_timeout(Duration::from_secs(400), async {
        let kubectl = Kubectl::new(binary);
        let port = free_port();
        let mut apiserver = spawn_apiserver(&etcd.endpoint(), port, &[]);
        wait_ready(&mut apiserver, port).await;
        kubectl.write_kubeconfig(&format!("http://127.0.0.1:{port}"));
        let client = etcd.client().await;
        let start = current_revision(&client).await;
        let master = format!("http://127.0.0.1:{port}");
        let mut manager =
            Kcm::start(&["--master", &master, "--controllers", "replication"], &[]).await;
        let file = kubectl.kubeconfig().with_file_name("rc.yaml");
        std::fs::write(&file, rc(REPLICAS as u32)).expect("write the manifest");
        kubectl
            .ok(&["create", "-f", &file.display().to_string()])
            .await;
        let count = || async {
            let mut client = etcd.client().await;
            let options = etcd_client::GetOptions::new()
                .with_prefix()
                .with_count_only();
            client
                .get(PODS, Some(options))
                .await
                .expect("count")
                .count() as usize
        };
        // Cut the manager off mid-way: the apiserver restarts on the same port.
        eventually(CONVERGE, "a third of the pods", || async {
            count().await >= REPLICAS / 3
        })
        .await;
        apiserver.terminate().await;
        let mut apiserver = spawn_apiserver(&etcd.endpoint(), port, &[]);
        wait_ready(&mut apiserver, port).await;
        eventually(Duration::from_secs(240), "3,000 pods", || async {
            count().await == REPLICAS
        })
        .await;
        // A few syncs more, then etcd's history: never more than 3,000 pods at once.
        let seen = syncs(&manager).await;
        eventually(CONVERGE, "three more syncs", || async {
            syncs(&manager).await >= seen + 3.0
        })
        .await;
        let history = pod_history(&client, start).await;
        assert!(
            history.most <= REPLICAS,
            "{} pods alive at once, over {REPLICAS}",
            history.most
        );
        assert_eq!(history.alive, REPLICAS, "pods at the end");
        assert_eq!(
            history.created.len(),
            REPLICAS,
            "every pod created once, none deleted"
        );
        manager.assert_running();
    })
    .await;
}

/// What etcd's history says of the pods after revision `start`.
struct PodHistory {
    /// The most pods alive at once.
    most: usize,
    /// Pods alive at the end.
    alive: usize,
    /// The revision of each pod's create, in order.
    created: Vec<i64>,
}

impl PodHistory {
    /// How many pods were created at a revision after `revision`.
    fn created_after(&self, revision: i64) -> usize {
        self.created.len() - self.created.partition_point(|&at| at <= revision)
    }
}

async fn pod_history(client: &etcd_client::Client, start: i64) -> PodHistory {
    pod_history_from(client, start, 0).await
}

/// [`pod_history`] when `initial` pods were alive at `start`.
async fn pod_history_from(client: &etcd_client::Client, start: i64, initial: usize) -> PodHistory {
    let events = history::read(
        client,
        PODS,
        "/registry/pods/default0",
        start,
        "/registry/pods/default/~sentinel",
    )
    .await;
    let mut history = PodHistory {
        most: initial,
        alive: initial,
        created: Vec::new(),
    };
    for event in &events {
        if event.put && event.create_revision == event.revision {
            history.alive += 1;
            history.created.push(event.revision);
        } else if !event.put {
            history.alive -= 1;
        }
        history.most = history.most.max(history.alive);
    }
    history
}

/// The revision at which `key` was deleted, after `after`, from etcd's history.
async fn delete_revision(client: &etcd_client::Client, key: &str, after: i64) -> i64 {
    let options = etcd_client::WatchOptions::new().with_start_revision(after + 1);
    let mut stream = client
        .clone()
        .watch(key, Some(options))
        .await
        .expect("watch the key's history");
    loop {
        let response = tokio::time::timeout(Duration::from_secs(30), stream.message())
            .await
            .expect("history within 30s")
            .expect("history watch")
            .expect("history watch open");
        for event in response.events() {
            if event.event_type() == etcd_client::EventType::Delete {
                return event.kv().expect("a kv").mod_revision();
            }
        }
    }
}

/// The replication manager's successful syncs so far.
async fn syncs(kcm: &Kcm) -> f64 {
    syncs_of(kcm, "replication").await
}

/// `controller`'s successful syncs so far.
async fn syncs_of(kcm: &Kcm, controller: &str) -> f64 {
    let series = format!(r#"kcm_syncs_total{{controller="{controller}",result="ok"}}"#);
    manager_metric(kcm, &series).await
}

/// Two unelected `controller`s through the API, and `manifest` (a controller of
/// `replicas`) created with kubectl: from etcd's history, never more pods than `replicas`.
async fn two_unelected_never_pass(controller: &str, manifest: &str, replicas: usize) {
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(400), async {
        let client = api.etcd.client().await;
        let start = current_revision(&client).await;
        let kubeconfig = api.kubectl.kubeconfig().display().to_string();
        let args = [
            "--kubeconfig",
            kubeconfig.as_str(),
            "--controllers",
            controller,
            "--sync-period",
            "1s",
        ];
        let mut first = Kcm::start(&args, &[]).await;
        let mut second = Kcm::start(&args, &[]).await;
        let file = api.manifest("controller.yaml", manifest);
        api.kubectl.ok(&["create", "-f", &file]).await;
        eventually(Duration::from_secs(240), "every pod", || async {
            api.count(PODS).await == replicas
        })
        .await;
        // Both have synced since (each resyncs every second): any over-creation is in.
        let (a, b) = (
            syncs_of(&first, controller).await,
            syncs_of(&second, controller).await,
        );
        eventually(CONVERGE, "two more syncs of each", || async {
            syncs_of(&first, controller).await >= a + 2.0
                && syncs_of(&second, controller).await >= b + 2.0
        })
        .await;
        let history = pod_history(&client, start).await;
        assert!(
            history.most <= replicas,
            "{} pods alive at once, over {replicas}",
            history.most
        );
        assert_eq!(history.alive, replicas, "pods at the end");
        first.assert_running();
        second.assert_running();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_unelected_managers_through_the_api_never_pass_3000_replicas() {
    two_unelected_never_pass("replication", &rc(3_000), 3_000).await;
}

/// Through the API a create cannot require its controller alive (no transaction spans
/// both), so a delete racing a scale-up lets the creates already started land: those
/// begun while the delete's event was on its way to the manager, and the window in
/// flight (`--burst-replicas`) when it arrived, as docs/invariants.md says. The first
/// part is the watch's latency, which a loaded machine stretches; the second is the
/// bound checked: once the manager's controller informer has the delete, at most one
/// window more lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_racing_a_scale_up_through_the_api_lets_at_most_one_window_land() {
    const REPLICAS: usize = 3_000;
    const BURST: usize = 200;
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(400), async {
        let client = api.etcd.client().await;
        let start = current_revision(&client).await;
        let kubeconfig = api.kubectl.kubeconfig().display().to_string();
        let burst = BURST.to_string();
        let mut manager = Kcm::start(
            &[
                "--kubeconfig",
                &kubeconfig,
                "--controllers",
                "replication",
                "--burst-replicas",
                &burst,
            ],
            &[],
        )
        .await;
        let file = api.manifest("rc.yaml", &rc(REPLICAS as u32));
        api.kubectl.ok(&["create", "-f", &file]).await;
        eventually(CONVERGE, "1,000 pods", || async {
            api.count(PODS).await >= 1_000
        })
        .await;
        // `--cascade=orphan` deletes the controller's key only, so every pod created
        // after it shows in the history.
        api.kubectl
            .ok(&["delete", "rc", "web", "--cascade=orphan"])
            .await;
        let deleted = delete_revision(&client, "/registry/controllers/default/web", start).await;
        // The manager hears of it: its controller watch passes the delete.
        let seen_delete = r#"kcm_watch_last_revision{resource="replicationcontrollers"}"#;
        eventually(CONVERGE, "the manager's watch past the delete", || async {
            manager_metric(&manager, seen_delete).await >= deleted as f64
        })
        .await;
        // The metric moves after the informer's store has dropped the controller, so
        // every create at a later revision than this one was in flight by then.
        let seen = current_revision(&client).await;
        // Then the window it had in flight ends: polled until no pod has been created for
        // a second (nothing marks a create's answer arriving).
        let last_change = std::cell::Cell::new((usize::MAX, std::time::Instant::now()));
        eventually(CONVERGE, "the pod count settled", || {
            let last_change = &last_change;
            let api = &api;
            async move {
                let count = api.count(PODS).await;
                let (before, since) = last_change.get();
                if count != before {
                    last_change.set((count, std::time::Instant::now()));
                    return false;
                }
                since.elapsed() >= Duration::from_secs(1)
            }
        })
        .await;
        let history = pod_history(&client, start).await;
        let after_seen = history.created_after(seen);
        assert!(
            after_seen <= BURST,
            "{after_seen} pods created after the manager had the controller's delete, \
             over one window of {BURST} ({} after the delete itself)",
            history.created_after(deleted)
        );
        assert!(history.most < REPLICAS, "{} pods", history.most);
        manager.assert_running();
    })
    .await;
}

/// Which of `managers` say they lead and which stand by, once exactly one leads.
async fn single_leader(managers: &[&Kcm], what: &str) -> usize {
    let leader = std::cell::Cell::new(None);
    eventually(CONVERGE, what, || {
        let leader = &leader;
        async move {
            let mut leaders = Vec::new();
            let mut standbys = 0;
            for (i, kcm) in managers.iter().enumerate() {
                if kcm.is_leader().await {
                    leaders.push(i);
                } else if kcm.is_standby().await {
                    standbys += 1;
                }
            }
            let single = leaders.len() == 1 && standbys + 1 == managers.len();
            leader.set(single.then(|| leaders[0]));
            single
        }
    })
    .await;
    leader.get().expect("set when the wait succeeded")
}

/// `--leader-elect` through the API: a `coordination.k8s.io/v1` Lease in `kube-system`, as
/// client-go's LeaseLock. One of two managers leads; SIGKILLed, the other takes the Lease
/// once it has gone unrenewed for its duration and goes on; SIGTERMed, a leader releases it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_managers_elect_one_leader_through_a_lease_and_fail_over() {
    const LEASE: &str = "/registry/leases/kube-system/kcm-controller-manager";
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(240), async {
        let kubeconfig = api.kubectl.kubeconfig().display().to_string();
        let args = [
            "--kubeconfig",
            kubeconfig.as_str(),
            "--controllers",
            "replication",
            "--sync-period",
            "1s",
            "--leader-elect",
            "--leader-elect-lease-duration",
            "3s",
        ];
        let mut managers = [Kcm::start(&args, &[]).await, Kcm::start(&args, &[]).await];
        let first = single_leader(&[&managers[0], &managers[1]], "one leader of two").await;
        let holder = |lease: &Option<serde_json::Value>| {
            lease
                .as_ref()
                .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string))
        };
        let lease = api.stored(LEASE).await;
        let leader_identity = holder(&lease).expect("the Lease names its holder");
        assert!(
            managers[first].log().contains(&leader_identity),
            "the leader's log names its identity {leader_identity}"
        );
        let file = api.manifest("rc.yaml", &rc(3));
        api.kubectl.ok(&["create", "-f", &file]).await;
        eventually(CONVERGE, "3 pods, made by the leader", || async {
            api.count(PODS).await == 3
        })
        .await;

        // The leader dies without a word: the standby takes the Lease after its duration.
        managers[first].signal(libc::SIGKILL);
        let _ = managers[first].wait_exit(Duration::from_secs(10)).await;
        let second = 1 - first;
        eventually(CONVERGE, "the standby leads", || async {
            managers[second].is_leader().await
        })
        .await;
        let lease = api.stored(LEASE).await.expect("the Lease");
        assert_ne!(holder(&Some(lease.clone())), Some(leader_identity));
        assert_eq!(lease["spec"]["leaseTransitions"], 1, "{lease}");
        api.kubectl
            .ok(&["scale", "rc", "web", "--replicas=6"])
            .await;
        eventually(CONVERGE, "6 pods, made by the new leader", || async {
            api.count(PODS).await == 6
        })
        .await;

        // A leader told to stop releases the Lease: no holder.
        managers[second].signal(libc::SIGTERM);
        let status = managers[second].wait_exit(Duration::from_secs(20)).await;
        assert!(status.success(), "{status:?}");
        let lease = api.stored(LEASE).await;
        assert_eq!(holder(&lease), None, "{lease:?}");
        assert!(
            managers[second]
                .log()
                .contains("resigned: the lease is released"),
            "{}",
            managers[second].log()
        );
    })
    .await;
}

fn rs(replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: front
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: front}}
  template:
    metadata:
      labels: {{app: front}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
"
    )
}

/// The pods of `default` owned by a controller of `uid`.
async fn owned_by(api: &Api, uid: &str) -> usize {
    api.documents(PODS)
        .await
        .iter()
        .filter(|pod| {
            pod["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
        })
        .count()
}

/// The ReplicaSet controller through the API, driven by kubectl: creates, a scale, an
/// orphan adopted (its controller reference written through the API, at the version it
/// was claimed at) and then one pod too many deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drives_the_replicaset_controller_through_the_api() {
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(240), async {
        let kubeconfig = api.kubectl.kubeconfig().display().to_string();
        let mut controller = Kcm::start(
            &[
                "--kubeconfig",
                &kubeconfig,
                "--controllers",
                "replicaset",
                "--sync-period",
                "1s",
            ],
            &[],
        )
        .await;
        let file = api.manifest("rs.yaml", &rs(3));
        api.kubectl.ok(&["create", "-f", &file]).await;
        let stored = api
            .stored("/registry/replicasets/default/front")
            .await
            .expect("the ReplicaSet");
        let uid = stored["metadata"]["uid"]
            .as_str()
            .expect("a uid")
            .to_string();
        eventually(CONVERGE, "3 pods owned by the ReplicaSet", || async {
            api.count(PODS).await == 3 && owned_by(&api, &uid).await == 3
        })
        .await;

        api.kubectl
            .ok(&["scale", "rs", "front", "--replicas=5"])
            .await;
        eventually(CONVERGE, "5 owned pods after kubectl scale", || async {
            owned_by(&api, &uid).await == 5
        })
        .await;

        // An orphan with its labels is adopted; one pod is then too many.
        let orphan = api.manifest(
            "orphan.yaml",
            "apiVersion: v1
kind: Pod
metadata:
  name: stray
  labels: {app: front}
spec:
  containers:
  - name: nginx
    image: nginx:1.25
",
        );
        let client = api.etcd.client().await;
        let before = current_revision(&client).await;
        api.kubectl.ok(&["create", "-f", &orphan]).await;
        eventually(CONVERGE, "5 owned pods, none orphaned", || async {
            api.count(PODS).await == 5 && owned_by(&api, &uid).await == 5
        })
        .await;
        let stray = history::read(
            &client,
            "/registry/pods/default/stray",
            "/registry/pods/default/straz",
            before,
            "/registry/pods/default/stray~",
        )
        .await;
        let adopted = stray.iter().any(|event| {
            let pod: serde_json::Value = serde_json::from_slice(&event.value).unwrap_or_default();
            event.key == "/registry/pods/default/stray"
                && pod["metadata"]["ownerReferences"][0]["uid"] == uid.as_str()
        });
        assert!(adopted, "the orphan was never adopted: {stray:?}");
        eventually(CONVERGE, "status.replicas 5", || async {
            let rs = api.stored("/registry/replicasets/default/front").await;
            rs.is_some_and(|rs| rs["status"]["replicas"] == 5)
        })
        .await;
        controller.assert_running();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_unelected_replicaset_controllers_through_the_api_never_pass_3000() {
    two_unelected_never_pass("replicaset", &rs(3_000), 3_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_cut_off_while_etcd_compacts_lists_again_and_loses_nothing() {
    const REPLICAS: usize = 2_000;
    const RESIZED: usize = 2_200;
    let Some(binary) = kubectl_binary() else {
        return;
    };
    let Some(etcd) = start_etcd().await else {
        return;
    };
    with_timeout(Duration::from_secs(400), async {
        let kubectl = Kubectl::new(binary);
        let port = free_port();
        let mut apiserver = spawn_apiserver(&etcd.endpoint(), port, &["--watch-cache-size", "100"]);
        wait_ready(&mut apiserver, port).await;
        kubectl.write_kubeconfig(&format!("http://127.0.0.1:{port}"));
        let proxy = FaultProxy::start(std::net::SocketAddr::from(([127, 0, 0, 1], port))).await;
        let client = etcd.client().await;
        let start = current_revision(&client).await;
        let master = proxy.endpoint();
        let mut manager = Kcm::start(
            &[
                "--master",
                &master,
                "--controllers",
                "replication",
                "--sync-period",
                "1s",
            ],
            &[],
        )
        .await;
        let file = kubectl.kubeconfig().with_file_name("rc.yaml");
        std::fs::write(&file, rc(REPLICAS as u32)).expect("write the manifest");
        kubectl
            .ok(&["create", "-f", &file.display().to_string()])
            .await;
        let count = || async {
            let mut client = etcd.client().await;
            let options = etcd_client::GetOptions::new()
                .with_prefix()
                .with_count_only();
            client
                .get(PODS, Some(options))
                .await
                .expect("count")
                .count() as usize
        };
        eventually(Duration::from_secs(120), "2,000 pods", || async {
            count().await == REPLICAS
        })
        .await;
        let relists = || async {
            manager_metric(&manager, r#"kcm_watch_relists_total{resource="pods"}"#).await
        };
        let before = relists().await;

        proxy.cut();
        // The gap: 500 pods deleted, the controller resized, the history compacted.
        let mut kv = etcd.client().await;
        let pods = kv
            .get(
                PODS,
                Some(
                    etcd_client::GetOptions::new()
                        .with_prefix()
                        .with_keys_only(),
                ),
            )
            .await
            .expect("list the pods");
        for key in pods.kvs().iter().take(500) {
            kv.delete(key.key(), None).await.expect("delete a pod");
        }
        let out = kubectl
            .run(&["scale", "rc", "web", &format!("--replicas={RESIZED}")])
            .await;
        assert!(out.status.success(), "{out:?}");
        for i in 0..200 {
            kv.put(format!("/kcm-test/churn/{i}"), "x", None)
                .await
                .expect("churn");
        }
        // The history up to here, before the compaction takes it.
        let before_gap = pod_history(&client, start).await;
        assert!(
            before_gap.most <= REPLICAS,
            "{} pods alive at once, over {REPLICAS}",
            before_gap.most
        );
        assert_eq!(before_gap.alive, REPLICAS - 500);
        kv.delete("/registry/pods/default/~sentinel", None)
            .await
            .expect("delete the history's sentinel");
        let compacted = etcd.compact().await;
        proxy.restore();

        eventually(Duration::from_secs(120), "2,200 pods", || async {
            count().await == RESIZED
        })
        .await;
        // Its resourceVersion compacted, the pod informer lists again (perhaps after a
        // failed attempt and a backoff: meanwhile syncs read fresh lists).
        eventually(CONVERGE, "the pod informer listed again", || async {
            relists().await > before
        })
        .await;
        let seen = syncs(&manager).await;
        eventually(CONVERGE, "three more syncs", || async {
            syncs(&manager).await >= seen + 3.0
        })
        .await;
        let history = pod_history_from(&client, compacted, before_gap.alive).await;
        assert!(
            history.most <= RESIZED,
            "{} pods alive at once, over {RESIZED}",
            history.most
        );
        assert_eq!(history.alive, RESIZED, "pods at the end");
        manager.assert_running();
    })
    .await;
}

/// One series of the manager's `/metrics` (0 when absent).
async fn manager_metric(kcm: &Kcm, series: &str) -> f64 {
    let text = crate::support::kcm::http_get(kcm.port(), "/metrics")
        .await
        .map(|(_, body)| body)
        .unwrap_or_default();
    crate::support::kcm::metric_value(&text, series)
}

/// The endpoints controller (2014's other controller) through the API: with its periodic
/// passes 30 s apart, every change must come from its watches over HTTP. Pods and the
/// Service are written to etcd as kcm's kubelets and CLI write them; the Endpoints it
/// writes through the API are read back from etcd in kcm's stored shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoints_controller_through_the_api_follows_its_pods() {
    use crate::support::objects::{
        delete, endpoints, pod_key, put_json, service_json, service_key, serving_pod_json,
    };
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(240), async {
        let kubeconfig = api.kubectl.kubeconfig().display().to_string();
        let mut controller = Kcm::start(
            &[
                "--kubeconfig",
                &kubeconfig,
                "--controllers",
                "endpoints",
                "--sync-period",
                "30s",
                "--endpoint-sync-period",
                "30s",
            ],
            &[],
        )
        .await;
        let client = api.etcd.client().await;
        let entries_are = |expected: &'static [&'static str]| {
            let client = client.clone();
            async move {
                endpoints(&client, "default", "web")
                    .await
                    .is_some_and(|(entries, _, _)| entries == expected)
            }
        };
        let service = service_json("default", "web", "web", serde_json::json!("http"));
        put_json(&client, &service_key("default", "web"), &service).await;
        for (name, ip) in [("a", "10.0.0.1"), ("b", "10.0.0.2")] {
            let pod = serving_pod_json("default", name, "web", ip);
            put_json(&client, &pod_key("default", name), &pod).await;
        }
        eventually(CONVERGE, "both pods' addresses", || {
            entries_are(&["10.0.0.1:8080", "10.0.0.2:8080"])
        })
        .await;
        let moved = serving_pod_json("default", "b", "web", "10.0.0.3");
        put_json(&client, &pod_key("default", "b"), &moved).await;
        delete(&client, &pod_key("default", "a")).await;
        eventually(CONVERGE, "b's new address alone", || {
            entries_are(&["10.0.0.3:8080"])
        })
        .await;
        api.kubectl.ok(&["delete", "service", "web"]).await;
        eventually(
            CONVERGE,
            "the Endpoints gone with their Service",
            || async { endpoints(&client, "default", "web").await.is_none() },
        )
        .await;
        controller.assert_running();
    })
    .await;
}

/// The late-2014 replication manager in its 2014 place: a client of the apiserver, which it
/// lists, watches and POSTs pods to (`--master`, 2014's flag), driven by kubectl. Its pods
/// carry 2014's names (a UUID).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_2014_replication_manager_runs_as_a_client_of_the_apiserver() {
    let Some(api) = start_apiserver().await else {
        return;
    };
    with_timeout(Duration::from_secs(240), async {
        let master = format!("http://127.0.0.1:{}", api.port);
        let mut manager = Kcm::start(
            &[
                "--master",
                &master,
                "--controllers",
                "replication-2014",
                "--sync-period",
                "1s",
            ],
            &[],
        )
        .await;
        let file = api.manifest("rc.yaml", &rc(3));
        api.kubectl.ok(&["create", "-f", &file]).await;
        eventually(CONVERGE, "3 pods, POSTed by the 2014 loop", || async {
            api.count(PODS).await == 3
        })
        .await;
        // Named with a UUID, as 2014's loop named them (the uid is the apiserver's: a
        // server sets it, whatever the client sends).
        for (name, _) in pods(&api).await {
            assert!(uuid::Uuid::parse_str(&name).is_ok(), "{name} is a UUID");
        }
        api.kubectl
            .ok(&["scale", "rc", "web", "--replicas=5"])
            .await;
        eventually(CONVERGE, "5 pods after kubectl scale", || async {
            api.count(PODS).await == 5
        })
        .await;
        api.kubectl
            .ok(&["scale", "rc", "web", "--replicas=1"])
            .await;
        eventually(CONVERGE, "1 pod after scaling down", || async {
            api.count(PODS).await == 1
        })
        .await;
        manager.assert_running();
        assert!(
            manager.log().contains("through the API"),
            "{}",
            manager.log()
        );
    })
    .await;
}

/// A kubeconfig as a real cluster's: HTTPS with a CA, a bearer token. The manager reads it
/// (kube-rs's kubeconfig, rustls), keeps the controller at its count, and a wrong token is
/// refused at start, in one line naming the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_with_a_ca_and_a_token_works_and_a_wrong_token_is_named_at_start() {
    use crate::support::apiserver::{https_apiserver, serving_pki};
    let Some(etcd) = start_etcd().await else {
        return;
    };
    with_timeout(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        let (ca, cert, key) = serving_pki(dir.path());
        let tokens = dir.path().join("tokens.csv");
        std::fs::write(&tokens, "s3cret,controllers,1,\"system:masters\"\n").unwrap();
        let (mut apiserver, port) = https_apiserver(&etcd, (&cert, &key), Some(&tokens));
        let kubeconfig = |token: &str| {
            let path = dir.path().join(format!("kubeconfig-{token}"));
            std::fs::write(
                &path,
                format!(
                    "apiVersion: v1\nkind: Config\nclusters:\n- name: kcm\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority: {}\ncontexts:\n- name: kcm\n  context:\n    cluster: kcm\n    user: controllers\ncurrent-context: kcm\nusers:\n- name: controllers\n  user:\n    token: {token}\n",
                    ca.display()
                ),
            )
            .unwrap();
            path.display().to_string()
        };
        eventually(CONVERGE, "the HTTPS apiserver to listen", || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok()
        })
        .await;
        apiserver.assert_running();
        let refused = crate::support::kcm::run_kcm(
            &[
                "controller-manager",
                "--port",
                "0",
                "--kubeconfig",
                &kubeconfig("wrong"),
                "--controllers",
                "replication",
            ],
            &[],
        )
        .await;
        assert!(!refused.status.success());
        assert!(
            refused
                .stderr
                .contains(&format!(
                    "the API server at https://127.0.0.1:{port}/ refused kcm's credentials or request: 401"
                )),
            "{}",
            refused.stderr
        );

        let good = kubeconfig("s3cret");
        let mut manager = Kcm::start(
            &["--kubeconfig", &good, "--controllers", "replication", "--sync-period", "1s"],
            &[],
        )
        .await;
        let client = etcd.client().await;
        let controller = crate::support::objects::controller_json(
            "default",
            "web",
            3,
            serde_json::json!({"app": "web"}),
            serde_json::json!({"app": "web"}),
        );
        crate::support::objects::put_json(
            &client,
            &crate::support::objects::controller_key("default", "web"),
            &controller,
        )
        .await;
        eventually(CONVERGE, "3 pods, made over HTTPS with the token", || async {
            let mut client = etcd.client().await;
            let options = etcd_client::GetOptions::new().with_prefix().with_count_only();
            client.get(PODS, Some(options)).await.expect("count").count() == 3
        })
        .await;
        manager.assert_running();
    })
    .await;
}

#[tokio::test]
async fn every_controller_is_accepted_through_the_api_and_a_silent_server_is_named() {
    for controllers in [
        "replication",
        "replication,replicaset,deployment,endpoints,garbagecollector,scheduler,namespace,nodelifecycle,replication-2014",
    ] {
        let out = crate::support::kcm::kcm_command()
            .args([
                "controller-manager",
                "--port",
                "0",
                "--master",
                "http://127.0.0.1:1",
                "--controllers",
                controllers,
            ])
            .output()
            .await
            .expect("run kcm");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            stderr.contains("the API server at http://127.0.0.1:1/ does not answer"),
            "{controllers}: {stderr}"
        );
    }
}
