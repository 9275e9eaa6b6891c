//! Integration tests of the rollout verbs through the real `kcm` binary against a real
//! etcd: `set image`, `scale --current-replicas`, `get` of several kinds, and (with the
//! Deployment controller) `rollout status|history|undo|pause|resume`.

use std::process::Stdio;

use etcd_client::Client;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::kcm::{collect, command, kcm, spawn_kubelet, start_manager, Kcm, Output};
use crate::support::objects::{put_json, raw, update_json};
use crate::support::{eventually, start_etcd, with_timeout};

const LIMIT: std::time::Duration = std::time::Duration::from_secs(120);
const SETTLE: std::time::Duration = std::time::Duration::from_secs(60);
const NS: &str = "roll";

/// A ReplicaSet as another tool would write it, with a field kcm does not model.
fn replica_set_json(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"), "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [
                    {"name": "web", "image": "nginx:1", "imagePullPolicy": "Always"},
                    {"name": "log", "image": "fluentd:1"}
                ]}
            }
        }
    })
}

fn rs_key(name: &str) -> String {
    format!("/registry/replicasets/{NS}/{name}")
}

async fn stored(client: &Client, key: &str) -> Value {
    raw(&mut client.clone(), key).await.expect("stored object")
}

/// `kcm ARGS -n NS`.
async fn in_ns(endpoint: &str, args: &[&str]) -> Output {
    let args: Vec<&str> = args.iter().copied().chain(["-n", NS]).collect();
    kcm(endpoint, &args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_image_scale_preconditions_and_get_of_several_kinds() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let endpoint = etcd.endpoint();
        put_json(&client, &rs_key("web"), &replica_set_json("web", 3)).await;

        // An unknown container changes nothing.
        let before = client.clone().get(rs_key("web"), None).await.unwrap();
        let before_revision = before.kvs()[0].mod_revision();
        in_ns(
            &endpoint,
            &["set", "image", "rs/web", "web=nginx:2", "x=busybox"],
        )
        .await
        .fails_with(r#"unable to find container named "x""#);
        let after = client.clone().get(rs_key("web"), None).await.unwrap();
        assert_eq!(after.kvs()[0].mod_revision(), before_revision);

        let outcome = in_ns(&endpoint, &["set", "image", "rs/web", "web=nginx:2"]).await;
        assert_eq!(outcome.success(), "replicaset.apps/web image updated\n");
        let rs = stored(&client, &rs_key("web")).await;
        let containers = &rs["spec"]["template"]["spec"]["containers"];
        assert_eq!(containers[0]["image"], "nginx:2");
        assert_eq!(
            containers[0]["imagePullPolicy"], "Always",
            "unknown fields kept"
        );
        assert_eq!(containers[1]["image"], "fluentd:1");
        assert_eq!(
            rs["metadata"]["generation"], 2,
            "a spec change bumps generation"
        );

        let outcome = in_ns(&endpoint, &["set", "image", "replicaset/web", "*=busybox"]).await;
        assert_eq!(outcome.success(), "replicaset.apps/web image updated\n");
        let rs = stored(&client, &rs_key("web")).await;
        assert_eq!(
            rs["spec"]["template"]["spec"]["containers"][1]["image"],
            "busybox"
        );
        // Nothing to change: nothing on stdout (as kubectl), a note on stderr, exit 0.
        let outcome = in_ns(&endpoint, &["set", "image", "rs/web", "*=busybox"]).await;
        assert_eq!(outcome.success(), "");
        assert!(outcome.stderr.contains("nothing changed"), "{outcome:?}");
        in_ns(&endpoint, &["set", "image", "rs/nope", "web=a"])
            .await
            .fails_with(r#"replicasets "nope" not found"#);

        // --current-replicas is a precondition.
        let scale = |current: &'static str| {
            let args = "scale rs web --replicas 5 --current-replicas ".to_string() + current;
            let endpoint = endpoint.clone();
            async move { in_ns(&endpoint, &args.split(' ').collect::<Vec<_>>()).await }
        };
        scale("2")
            .await
            .fails_with("Expected replicas to be 2, was 3");
        assert_eq!(stored(&client, &rs_key("web")).await["spec"]["replicas"], 3);
        assert_eq!(scale("3").await.success(), "replicaset.apps/web scaled\n");
        assert_eq!(stored(&client, &rs_key("web")).await["spec"]["replicas"], 5);

        // Several kinds: one table each, names with kubectl's kind prefix, a blank line
        // between; a kind with nothing to show is left out.
        let rc = json!({"kind": "ReplicationController",
            "metadata": {"name": "old", "namespace": NS},
            "spec": {"replicas": 1, "selector": {"name": "old"},
                "template": {"metadata": {"labels": {"name": "old"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
        put_json(&client, &format!("/registry/controllers/{NS}/old"), &rc).await;
        let table = in_ns(&endpoint, &["get", "rs,svc,rc"]).await;
        let text = table.success();
        let blocks: Vec<&str> = text.split("\n\n").collect();
        assert_eq!(blocks.len(), 2, "{text}");
        assert!(blocks[0].starts_with("NAME "), "{text}");
        assert!(blocks[0].contains("\nreplicaset.apps/web "), "{text}");
        assert!(blocks[1].contains("\nreplicationcontroller/old "), "{text}");
        let outcome = in_ns(&endpoint, &["set", "image", "rc/old", "web=nginx:2"]).await;
        assert_eq!(
            outcome.success(),
            "replicationcontroller/old image updated\n"
        );
        let json = in_ns(&endpoint, &["get", "rs,rc", "-o", "json"]).await;
        let list: Value = serde_json::from_str(json.success()).unwrap();
        let kinds: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["ReplicaSet", "ReplicationController"]);
        // A NAME some kinds lack: the others are printed, the missing are the error.
        let outcome = in_ns(&endpoint, &["get", "rs,rc", "web"]).await;
        assert!(
            outcome.stdout.contains("\nreplicaset.apps/web "),
            "{outcome:?}"
        );
        outcome.fails_with(r#"replicationcontrollers "web" not found"#);
        in_ns(&endpoint, &["get", "rs,deploy", "nope"])
            .await
            .fails_with(r#"replicasets "nope" not found; deployments "nope" not found"#);
    })
    .await;
}

fn deploy_key(name: &str) -> String {
    format!("/registry/deployments/{NS}/{name}")
}

/// A ReplicaSet of deployment `web` (uid `uid`) at `revision`, as its controller writes
/// one.
fn owned_rs_json(uid: &str, hash: &str, revision: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": format!("web-{hash}"), "namespace": NS, "uid": format!("uid-{hash}"),
            "creationTimestamp": format!("2024-03-10T11:5{revision}:00Z"),
            "labels": {"app": "web", "pod-template-hash": hash},
            "annotations": {"deployment.kubernetes.io/revision": revision.to_string()},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                "uid": uid, "controller": true}]},
        "spec": {"replicas": 0,
            "selector": {"matchLabels": {"app": "web", "pod-template-hash": hash}},
            "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": hash}},
                "spec": {"containers": [{"name": "nginx", "image": image}]}}}
    })
}

/// Sets the deployment's status as its controller would, observing the current
/// generation.
async fn write_status(client: &Client, status: Value) {
    update_json(client, &deploy_key("web"), |d| {
        let mut status = status.clone();
        status["observedGeneration"] = d["metadata"]["generation"].clone();
        d["status"] = status;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_verbs_read_and_write_what_kubectl_would() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let endpoint = etcd.endpoint();
        let created = create_web(&endpoint, "3").await;
        assert_eq!(created.success(), "deployment.apps/web created\n");
        let d = stored(&client, &deploy_key("web")).await;
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["name"],
            "nginx"
        );
        assert_eq!(d["metadata"]["generation"], 1);
        in_ns(
            &endpoint,
            &["create", "deployment", "web", "--image", "nginx:1"],
        )
        .await
        .fails_with(r#"deployments.apps "web" already exists"#);

        for kind in ["deploy", "deployment", "deployments"] {
            let table = in_ns(&endpoint, &["get", kind]).await;
            let lines: Vec<Vec<&str>> = table
                .success()
                .lines()
                .map(|l| l.split_whitespace().collect())
                .collect();
            assert_eq!(
                lines[0],
                ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
            );
            assert_eq!(lines[1][..4], ["web", "0/3", "0", "0"]);
        }
        let json = in_ns(
            &endpoint,
            &["get", "deploy", "-l", "app in (web)", "-o", "json"],
        )
        .await;
        let list: Value = serde_json::from_str(json.success()).unwrap();
        assert_eq!(list["items"][0]["kind"], "Deployment");

        // scale and set image: CAS writes bumping generation.
        in_ns(
            &endpoint,
            &[
                "scale",
                "deploy",
                "web",
                "--replicas",
                "4",
                "--current-replicas",
                "2",
            ],
        )
        .await
        .fails_with("Expected replicas to be 2, was 3");
        let outcome = in_ns(
            &endpoint,
            &["scale", "deployment", "web", "--replicas", "4"],
        )
        .await;
        assert_eq!(outcome.success(), "deployment.apps/web scaled\n");
        let outcome = in_ns(&endpoint, &["set", "image", "deploy/web", "nginx=nginx:2"]).await;
        assert_eq!(outcome.success(), "deployment.apps/web image updated\n");
        let d = stored(&client, &deploy_key("web")).await;
        assert_eq!(d["metadata"]["generation"], 3);
        assert_eq!(d["spec"]["replicas"], 4);

        // pause and resume.
        let outcome = in_ns(&endpoint, &["rollout", "pause", "deploy/web"]).await;
        assert_eq!(outcome.success(), "deployment.apps/web paused\n");
        in_ns(&endpoint, &["rollout", "pause", "deploy/web"])
            .await
            .fails_with(r#"deployments.apps "web" is already paused"#);
        assert_eq!(
            stored(&client, &deploy_key("web")).await["spec"]["paused"],
            true
        );
        in_ns(&endpoint, &["rollout", "undo", "deploy/web"])
            .await
            .fails_with("you cannot rollback a paused deployment");
        in_ns(&endpoint, &["rollout", "restart", "deploy/web"])
            .await
            .fails_with("can't restart paused deployment");
        let outcome = in_ns(&endpoint, &["rollout", "resume", "deploy/web"]).await;
        assert_eq!(outcome.success(), "deployment.apps/web resumed\n");
        in_ns(&endpoint, &["rollout", "resume", "deploy/web"])
            .await
            .fails_with(r#"deployments.apps "web" is not paused"#);

        // history and undo over the ReplicaSets a controller would have made.
        let uid = d["metadata"]["uid"].as_str().unwrap().to_string();
        put_json(
            &client,
            &rs_key("web-aaa"),
            &owned_rs_json(&uid, "aaa", 1, "nginx:1"),
        )
        .await;
        put_json(
            &client,
            &rs_key("web-bbb"),
            &owned_rs_json(&uid, "bbb", 2, "nginx:2"),
        )
        .await;
        let history = in_ns(&endpoint, &["rollout", "history", "deploy/web"]).await;
        assert_eq!(
            history.success(),
            "deployment.apps/web\nREVISION  CHANGE-CAUSE\n1         <none>\n2         <none>\n"
        );
        let one = in_ns(
            &endpoint,
            &["rollout", "history", "deploy/web", "--revision", "1"],
        )
        .await;
        assert!(one.success().contains("Image:  nginx:1"), "{one:?}");
        in_ns(
            &endpoint,
            &["rollout", "history", "deploy/web", "--revision", "9"],
        )
        .await
        .fails_with("unable to find the specified revision");
        let outcome = in_ns(
            &endpoint,
            &["rollout", "undo", "deploy/web", "--to-revision", "2"],
        )
        .await;
        assert_eq!(
            outcome.success(),
            "deployment.apps/web skipped rollback (current template already matches revision 2)\n"
        );
        let outcome = in_ns(&endpoint, &["rollout", "undo", "deploy/web"]).await;
        assert_eq!(outcome.success(), "deployment.apps/web rolled back\n");
        let d = stored(&client, &deploy_key("web")).await;
        let template = &d["spec"]["template"];
        assert_eq!(template["spec"]["containers"][0]["image"], "nginx:1");
        assert!(
            template["metadata"]["labels"]
                .get("pod-template-hash")
                .is_none(),
            "{d}"
        );
        in_ns(
            &endpoint,
            &["rollout", "undo", "deploy/web", "--to-revision", "5"],
        )
        .await
        .fails_with("unable to find specified revision 5 in history");

        let outcome = in_ns(&endpoint, &["rollout", "restart", "deploy/web"]).await;
        assert_eq!(outcome.success(), "deployment.apps/web restarted\n");
        let d = stored(&client, &deploy_key("web")).await;
        assert!(d["spec"]["template"]["metadata"]["annotations"]
            ["kubectl.kubernetes.io/restartedAt"]
            .is_string());

        let described = in_ns(&endpoint, &["describe", "deploy", "web"]).await;
        let text = described.success();
        assert!(
            text.contains("RollingUpdateStrategy:  1 max unavailable, 1 max surge"),
            "{text}"
        );
        assert!(text.contains("not yet observed"), "{text}");
        in_ns(&endpoint, &["rollout", "status", "deploy/nope"])
            .await
            .fails_with(r#"deployments.apps "nope" not found"#);
    })
    .await;
}

/// Starts `kcm rollout status deploy/web -n NS ARGS` and returns it with its stdout lines.
fn spawn_status(
    endpoint: &str,
    args: &[&str],
) -> (
    tokio::process::Child,
    tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) {
    let args: Vec<&str> = ["rollout", "status", "deploy/web", "-n", NS]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    let mut child = command(endpoint, &args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn kcm");
    let lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    (child, lines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_status_follows_the_deployment_until_done_deadline_or_timeout() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let endpoint = etcd.endpoint();
        let created = create_web(&endpoint, "3").await;
        created.success();

        // Unobserved, then progress, then complete: each line once, exit 0.
        let (child, mut lines) = spawn_status(&endpoint, &[]);
        let line = lines.next_line().await.unwrap().unwrap();
        assert_eq!(line, "Waiting for deployment spec update to be observed...");
        write_status(&client, json!({"replicas": 3, "updatedReplicas": 1})).await;
        let line = lines.next_line().await.unwrap().unwrap();
        assert_eq!(
            line,
            r#"Waiting for deployment "web" rollout to finish: 1 out of 3 new replicas have been updated..."#
        );
        write_status(&client, json!({"replicas": 3, "updatedReplicas": 3, "availableReplicas": 3})).await;
        let line = lines.next_line().await.unwrap().unwrap();
        assert_eq!(line, r#"deployment "web" successfully rolled out"#);
        assert_eq!(lines.next_line().await.unwrap(), None);
        assert_eq!(collect(child).await.status.code(), Some(0));

        // --watch=false prints the line once and exits 0, done or not.
        write_status(&client, json!({"replicas": 4, "updatedReplicas": 3, "availableReplicas": 3})).await;
        let once = in_ns(&endpoint, &["rollout", "status", "deploy/web", "--watch=false"]).await;
        assert_eq!(
            once.success(),
            "Waiting for deployment \"web\" rollout to finish: 1 old replicas are pending termination...\n"
        );

        // --timeout ends a wait that does not finish.
        let timed_out = in_ns(&endpoint, &["rollout", "status", "deploy/web", "--timeout", "1s"]).await;
        assert_eq!(timed_out.status.code(), Some(1), "{timed_out:?}");
        assert!(timed_out.stderr.contains("timed out waiting for the condition"), "{timed_out:?}");

        // The progress deadline is an error, exit 1.
        let (child, mut lines) = spawn_status(&endpoint, &[]);
        lines.next_line().await.unwrap().unwrap();
        write_status(&client, json!({"replicas": 4, "updatedReplicas": 3,
            "conditions": [{"type": "Progressing", "status": "False",
                "reason": "ProgressDeadlineExceeded"}]})).await;
        let outcome = collect(child).await;
        outcome.fails_with(r#"deployment "web" exceeded its progress deadline"#);
    })
    .await;
}

/// `kcm create deployment web --image nginx:1 --replicas REPLICAS -n NS`.
async fn create_web(endpoint: &str, replicas: &str) -> Output {
    let args = [
        "create",
        "deployment",
        "web",
        "--image",
        "nginx:1",
        "--replicas",
        replicas,
    ];
    in_ns(endpoint, &args).await
}

/// A controller manager with the ReplicaSet and Deployment controllers and one
/// simulated node (pods start after 100 ms, Ready at once), then `kcm create deployment
/// web --image nginx:1 --replicas 4` rolled out. Returns the endpoint, a client and the
/// processes (stopped on drop).
async fn rolled_out_web(etcd: &crate::support::EtcdServer) -> (String, Client, (Kcm, Kcm)) {
    let endpoint = etcd.endpoint();
    let manager = start_manager(&endpoint, &["--controllers", "replicaset,deployment"]).await;
    let kubelet = spawn_kubelet(&endpoint, "n1", "100ms");
    create_web(&endpoint, "4").await.success();
    assert_rolled_out(&status_to_the_end(&endpoint).await);
    (endpoint, etcd.client().await, (manager, kubelet))
}

#[track_caller]
fn assert_rolled_out(outcome: &Output) {
    assert!(
        outcome
            .success()
            .ends_with("deployment \"web\" successfully rolled out\n"),
        "{outcome:?}"
    );
}

/// `kcm rollout status deploy/web -n NS` until it ends (at most a minute).
async fn status_to_the_end(endpoint: &str) -> Output {
    in_ns(
        endpoint,
        &["rollout", "status", "deploy/web", "--timeout", "60s"],
    )
    .await
}

fn image_of(d: &Value) -> &str {
    d["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_image_rolls_out_pause_holds_it_and_resume_finishes_it() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (endpoint, client, _cluster) = rolled_out_web(&etcd).await;
        let set = ["set", "image", "deploy/web", "nginx=nginx:2", "--record"];
        in_ns(&endpoint, &set).await.success();
        assert_rolled_out(&status_to_the_end(&endpoint).await);
        let table = in_ns(&endpoint, &["get", "deploy"]).await;
        let row: Vec<&str> = table
            .success()
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(row[..4], ["web", "4/4", "4", "4"], "{table:?}");

        // Paused, a template change rolls nothing out; the status says it waits.
        in_ns(&endpoint, &["rollout", "pause", "deploy/web"])
            .await
            .success();
        in_ns(&endpoint, &["set", "image", "deploy/web", "*=nginx:3"])
            .await
            .success();
        let waiting = "Waiting for deployment \"web\" rollout to finish: \
                       0 out of 4 new replicas have been updated...\n";
        eventually(SETTLE, "the paused deployment observed", || async {
            in_ns(
                &endpoint,
                &["rollout", "status", "deploy/web", "--watch=false"],
            )
            .await
            .stdout
                == waiting
        })
        .await;
        let replica_sets = client
            .clone()
            .get(
                format!("/registry/replicasets/{NS}/"),
                Some(
                    etcd_client::GetOptions::new()
                        .with_prefix()
                        .with_count_only(),
                ),
            )
            .await
            .unwrap()
            .count();
        assert_eq!(replica_sets, 2, "no ReplicaSet while paused");
        in_ns(&endpoint, &["rollout", "resume", "deploy/web"])
            .await
            .success();
        assert_rolled_out(&status_to_the_end(&endpoint).await);
        // The recorded command line is the change cause of revision 2, and, as kubectl
        // leaves it on the deployment, of revision 3 too.
        let history = in_ns(&endpoint, &["rollout", "history", "deploy/web"]).await;
        let lines: Vec<&str> = history.success().lines().collect();
        assert_eq!(
            lines[..3],
            [
                "deployment.apps/web",
                "REVISION  CHANGE-CAUSE",
                "1         <none>"
            ]
        );
        for (line, revision) in lines[3..].iter().zip(["2", "3"]) {
            assert!(
                line.starts_with(&format!("{revision}         kcm --etcd-servers "))
                    && line.ends_with(" set image deploy/web nginx=nginx:2 --record -n roll"),
                "{history:?}"
            );
        }
        let described = in_ns(&endpoint, &["describe", "deploy", "web"]).await;
        let text = described.success();
        let replicas = "4 desired | 4 updated | 4 total | 4 available | 0 unavailable";
        assert!(text.contains(replicas), "{text}");
        assert!(text.contains("Problems:               <none>"), "{text}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_image_fails_rollout_status_and_undo_restores_the_old_template() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (endpoint, client, _cluster) = rolled_out_web(&etcd).await;
        update_json(&client, &deploy_key("web"), |d| {
            d["spec"]["progressDeadlineSeconds"] = json!(2);
        })
        .await;

        in_ns(
            &endpoint,
            &["set", "image", "deploy/web", "nginx=nginx:fail"],
        )
        .await
        .success();
        status_to_the_end(&endpoint)
            .await
            .fails_with(r#"deployment "web" exceeded its progress deadline"#);

        let outcome = in_ns(&endpoint, &["rollout", "undo", "deploy/web"]).await;
        assert_eq!(outcome.success(), "deployment.apps/web rolled back\n");
        assert_eq!(
            image_of(&stored(&client, &deploy_key("web")).await),
            "nginx:1"
        );
        assert_rolled_out(&status_to_the_end(&endpoint).await);
        // Revision 1's ReplicaSet came back as revision 3; history no longer lists 1.
        let history = in_ns(&endpoint, &["rollout", "history", "deploy/web"]).await;
        assert_eq!(
            history.success(),
            "deployment.apps/web\nREVISION  CHANGE-CAUSE\n2         <none>\n3         <none>\n"
        );
        let d = stored(&client, &deploy_key("web")).await;
        assert_eq!(
            d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
            "3"
        );
        let outcome = in_ns(
            &endpoint,
            &["rollout", "undo", "deploy/web", "--to-revision", "3"],
        )
        .await;
        assert_eq!(
            outcome.success(),
            "deployment.apps/web skipped rollback (current template already matches revision 3)\n"
        );
    })
    .await;
}
