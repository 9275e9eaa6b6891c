//! `kcm controller-manager --kubeconfig`/`--master`: the replication manager as a client of
//! kcm's apiserver (2014's topology), driven by kubectl, with every outcome read from etcd.
//!
//! - kubectl's create, scale, a pod deleted by hand and the controller's delete, each
//!   carried out through the API;
//! - no over-creation at 3,000 replicas, from etcd's history of the pods, with the
//!   apiserver restarted while the scale-up is under way (the manager's watches cut and
//!   resumed);
//! - what cannot run through the API yet is refused at start, naming it.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::apiserver::{spawn_apiserver, wait_ready};
use crate::support::etcd::start_etcd;
use crate::support::history;
use crate::support::kcm::Kcm;
use crate::support::kubectl::{kubectl_binary, start_apiserver, Api, Kubectl};
use crate::support::{eventually, free_port, with_timeout};

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
        let start = client
            .clone()
            .get("/", None)
            .await
            .expect("etcd get")
            .header()
            .expect("header")
            .revision();
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
        let syncs = || async {
            let text = crate::support::kcm::http_get(manager.port(), "/metrics")
                .await
                .map(|(_, body)| body)
                .unwrap_or_default();
            crate::support::kcm::metric_value(
                &text,
                r#"kcm_syncs_total{controller="replication",result="ok"}"#,
            )
        };
        let seen = syncs().await;
        eventually(CONVERGE, "three more syncs", || async {
            syncs().await >= seen + 3.0
        })
        .await;
        let events = history::read(
            &client,
            PODS,
            "/registry/pods/default0",
            start,
            "/registry/pods/default/~sentinel",
        )
        .await;
        let (mut alive, mut most, mut creates) = (0usize, 0usize, 0usize);
        for event in &events {
            if event.put && event.create_revision == event.revision {
                alive += 1;
                creates += 1;
            } else if !event.put {
                alive -= 1;
            }
            most = most.max(alive);
        }
        assert!(
            most <= REPLICAS,
            "{most} pods alive at once, over {REPLICAS}"
        );
        assert_eq!(alive, REPLICAS, "pods at the end");
        assert_eq!(creates, REPLICAS, "every pod created once, none deleted");
        manager.assert_running();
    })
    .await;
}

#[tokio::test]
async fn what_cannot_run_through_the_api_is_refused_naming_it() {
    let out = crate::support::kcm::kcm_command()
        .args([
            "controller-manager",
            "--port",
            "0",
            "--master",
            "http://127.0.0.1:1",
            "--controllers",
            "replication,garbagecollector",
        ])
        .output()
        .await
        .expect("run kcm");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("garbagecollector controller still reads and writes etcd directly"),
        "{stderr}"
    );
    let out = crate::support::kcm::kcm_command()
        .args([
            "controller-manager",
            "--port",
            "0",
            "--master",
            "http://127.0.0.1:1",
            "--controllers",
            "replication",
        ])
        .output()
        .await
        .expect("run kcm");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("the API server at http://127.0.0.1:1/ does not answer"),
        "{stderr}"
    );
}
