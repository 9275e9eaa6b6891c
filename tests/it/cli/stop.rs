//! Ctrl-C during `kcm stop` through the real binary against a real etcd: with no
//! controller-manager running, the pods never go, so `stop` waits after resizing the
//! controller to 0; SIGINT then puts the controller back to its old count (or says it did
//! not, when someone changed it meanwhile), and `stop` exits 130.

use std::time::Duration;

use etcd_client::Client;
use serde_json::json;

use crate::support::kcm::Kcm;
use crate::support::objects::{
    controller, pod_json, pod_key, pods, put_controller, put_json, scale, CONVERGE,
};
use crate::support::{eventually, start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(120);

/// Starts `kcm stop rc {name}` and waits until it has resized the controller to 0.
async fn stop_until_resized(client: &Client, endpoint: &str, name: &str) -> Kcm {
    let mut stop = Kcm::spawn(
        &[
            "--etcd-servers",
            endpoint,
            "stop",
            "rc",
            name,
            "--timeout",
            "60s",
        ],
        &[],
    );
    eventually(CONVERGE, &format!("stop to resize {name} to 0"), || async {
        let rc = controller(client, "default", name).await;
        rc.is_some_and(|rc| rc["spec"]["replicas"] == 0)
    })
    .await;
    stop.assert_running();
    stop
}

/// Sends SIGINT to `stop` and returns its last line after asserting exit 130.
async fn interrupt(mut stop: Kcm) -> String {
    stop.signal(libc::SIGINT);
    let status = stop.wait_exit(Duration::from_secs(15)).await;
    let log = stop.log();
    assert_eq!(status.code(), Some(130), "exit 130 on Ctrl-C: {log}");
    log.lines().last().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_stop_puts_the_controller_back_unless_someone_changed_it() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let client = etcd.client().await;
        put_controller(&client, "default", "web", "web", 2).await;
        put_controller(&client, "default", "api", "api", 3).await;
        for (name, app) in [("web-1", "web"), ("web-2", "web"), ("api-1", "api")] {
            let mut pod = pod_json("default", name, app);
            pod["status"] = json!({ "phase": "Running" });
            put_json(&client, &pod_key("default", name), &pod).await;
        }

        let stop = stop_until_resized(&client, &endpoint, "web").await;
        assert_eq!(
            interrupt(stop).await,
            "kcm: interrupted: put replicationcontrollers/web back to 2 replicas; it was not \
             stopped"
        );
        let web = controller(&client, "default", "web")
            .await
            .expect("not deleted");
        assert_eq!(web["spec"]["replicas"], 2);
        assert_eq!(pods(&client, "default").await.len(), 3, "no pod touched");

        // Resized by someone else while stop waits: stop leaves it as they set it.
        let stop = stop_until_resized(&client, &endpoint, "api").await;
        scale(&client, "default", "api", 5).await;
        assert_eq!(
            interrupt(stop).await,
            "kcm: interrupted: did not put replicationcontrollers/api back to 3 replicas: it \
             was changed since stop resized it to 0 (spec.replicas is now 5); left as it is"
        );
        let api = controller(&client, "default", "api")
            .await
            .expect("not deleted");
        assert_eq!(api["spec"]["replicas"], 5);
    })
    .await;
}
