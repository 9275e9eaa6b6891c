//! Integration tests of the kubecfg verbs (`create`, `get`, `resize`/`scale`, `delete`,
//! `stop`, `run`, `describe`) through the real `kcm` binary against a real etcd: exit codes,
//! stdout and stderr, and what ends up in etcd.
//!
//! Objects the verbs are meant to read are written as raw JSON with etcd-client, the way
//! other tools write them; what the verbs write is checked the same way.

use std::process::Stdio;
use std::time::{Duration, Instant};

use etcd_client::Client;
use serde_json::{json, Value};
use tokio::process::Command;

use crate::support::kcm::{collect, command, kcm, kcm_command, kcm_stdin, start_manager, Output};
use crate::support::objects::{key_count, n_active, pods, raw, web_controller};
use crate::support::{eventually, free_port, start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(120);
/// How long a controller-manager may take to create or delete pods.
const CONVERGE: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// `kcm create` and its tables

/// `kcm create -f -` with `objects` as the input.
async fn create(endpoint: &str, objects: Value) -> Output {
    kcm_stdin(endpoint, &["create", "-f", "-"], &objects.to_string()).await
}

/// The table's data rows (header dropped), each split on whitespace.
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().map(str::to_owned).collect())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Objects and raw etcd access

fn pod(name: &str, labels: Value, status: Value) -> Value {
    json!({
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.7"}]},
        "status": status
    })
}

async fn put_raw(client: &mut Client, key: &str, value: &str) {
    client.put(key, value, None).await.expect("put");
}

// ---------------------------------------------------------------------------------------------
// create and get

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_prints_each_object_and_get_reads_them_back() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let list = json!({"kind": "List", "items": [
            web_controller(3),
            {"kind": "Service", "metadata": {"name": "web"},
                "spec": {"selector": {"name": "web"}, "port": 8080, "containerPort": "http"}},
            {"kind": "Endpoints", "metadata": {"name": "web"},
                "endpoints": ["10.0.0.1:80", "10.0.0.2:80"]},
            pod("web-1", json!({"name": "web"}), json!({"phase": "Running", "host": "node-1", "podIP": "10.0.0.1"})),
            pod("db-1", json!({"name": "db"}), json!({"phase": "Pending"})),
        ]});
        assert_eq!(
            create(&endpoint, list).await.success(),
            "replicationcontrollers/web created\nservices/web created\n\
             endpoints/web created\npods/web-1 created\npods/db-1 created\n"
        );
        // Another namespace, from a file and with -n.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rc.json");
        std::fs::write(&file, web_controller(1).to_string()).unwrap();
        let file = file.to_str().unwrap();
        assert_eq!(
            kcm(&endpoint, &["create", "-f", file, "-n", "prod"]).await.success(),
            "replicationcontrollers/web created\n"
        );

        let table = kcm(&endpoint, &["get", "rc"]).await;
        let table = table.success();
        // The columns of the Table the API serves (kubectl's).
        assert!(table.starts_with("NAME   DESIRED   CURRENT   READY   AGE\n"), "{table}");
        let rc_rows = rows(table);
        assert_eq!(rc_rows.len(), 1, "{table}");
        assert_eq!(rc_rows[0][..4], ["web", "3", "0", "0"]);
        assert!(rc_rows[0][4].ends_with('s'), "a fresh object's AGE is seconds: {table}");

        let all = kcm(&endpoint, &["get", "replicationcontrollers", "-A", "-o", "wide"]).await;
        let all = all.success();
        assert!(all.starts_with("NAMESPACE   NAME   DESIRED"), "{all}");
        let namespaces: Vec<String> = rows(all).into_iter().map(|row| row[0].clone()).collect();
        assert_eq!(namespaces, ["default", "prod"], "{all}");
        assert!(all.contains("nginx:1.7"), "wide shows the image: {all}");
        let headers: Vec<&str> = all.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(
            headers[headers.len() - 3..],
            ["CONTAINERS", "IMAGES", "SELECTOR"],
            "wide adds the API's wide columns and no others: {all}"
        );

        let pods_table = kcm(&endpoint, &["get", "po", "-l", "name=web"]).await;
        let pod_rows = rows(pods_table.success());
        assert_eq!(pod_rows.len(), 1, "{pods_table:?}");
        assert_eq!(pod_rows[0][..4], ["web-1", "0/1", "Running", "0"]);
        let wide_pods = kcm(&endpoint, &["get", "po", "-l", "name=web", "-o", "wide"]).await;
        let wide_pods = wide_pods.success();
        assert!(
            wide_pods.starts_with(
                "NAME    READY   STATUS    RESTARTS   AGE   IP         NODE   "
            ),
            "{wide_pods}"
        );
        assert_eq!(rows(wide_pods)[0][5], "10.0.0.1", "{wide_pods}");
        assert_eq!(rows(kcm(&endpoint, &["get", "pods"]).await.success()).len(), 2);

        let services = kcm(&endpoint, &["get", "svc"]).await;
        let services = services.success();
        assert!(
            services.starts_with(
                "NAME   TYPE        CLUSTER-IP   EXTERNAL-IP   PORT(S)    AGE\n"
            ),
            "{services}"
        );
        assert_eq!(
            rows(services)[0][..5],
            ["web", "ClusterIP", "<none>", "<none>", "8080/TCP"]
        );
        let endpoints = kcm(&endpoint, &["get", "ep", "web"]).await;
        let endpoints = endpoints.success();
        assert!(endpoints.starts_with("NAME   ENDPOINTS                 AGE\n"), "{endpoints}");
        assert_eq!(rows(endpoints)[0][..2], ["web", "10.0.0.1:80,10.0.0.2:80"]);

        // -o json: one object for a NAME, a List otherwise.
        let one: Value = serde_json::from_str(
            kcm(&endpoint, &["get", "rc", "web", "-o", "json"]).await.success(),
        )
        .expect("one object as JSON");
        assert_eq!(one["kind"], "ReplicationController");
        assert_eq!(one["apiVersion"], "v1beta3");
        assert_eq!(one["metadata"]["namespace"], "default");
        assert_eq!(one["spec"]["replicas"], 3);
        assert!(one["metadata"]["resourceVersion"].is_string(), "{one}");
        assert!(one["metadata"]["uid"].is_string(), "{one}");
        let list: Value = serde_json::from_str(
            kcm(&endpoint, &["get", "pods", "-o", "json"]).await.success(),
        )
        .expect("a List as JSON");
        assert_eq!(list["kind"], "List");
        assert_eq!(list["apiVersion"], "v1beta3");
        assert!(list["metadata"]["resourceVersion"].is_string(), "{list}");
        let names: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["db-1", "web-1"]);
        assert_eq!(list["items"][0]["kind"], "Pod");

        // An empty table says so on stderr, kubectl-style.
        let empty = kcm(&endpoint, &["get", "pods", "-n", "nowhere"]).await;
        assert_eq!(empty.success(), "");
        assert!(empty.stderr.contains("No resources found in nowhere namespace."), "{empty:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_of_an_existing_object_fails_and_creates_the_rest() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        create(&endpoint, web_controller(1)).await.success();
        let list = json!({"items": [
            web_controller(5),
            pod("p", json!({"a": "b"}), json!({"phase": "Running"})),
        ]});
        let outcome = create(&endpoint, list).await;
        assert_eq!(outcome.stdout, "pods/p created\n");
        outcome.fails_with("replicationcontrollers \"web\" already exists");
        // The existing controller is untouched.
        let mut client = etcd.client().await;
        let stored = raw(&mut client, "/registry/controllers/default/web")
            .await
            .unwrap();
        assert_eq!(stored["spec"]["replicas"], 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_rejects_invalid_json_naming_the_file_and_position() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("broken.json");
        // Neither JSON (a key without quotes) nor YAML (an unclosed mapping): JSON's message.
        std::fs::write(&file, "{\"kind\": \"Pod\",\n  \"metadata\": {name: \"x\"}").unwrap();
        let file = file.to_str().unwrap();
        kcm(&etcd.endpoint(), &["create", "-f", file])
            .await
            .fails_with(&format!(
                "parse {file}: key must be a string at line 2 column 16"
            ));
        kcm(&etcd.endpoint(), &["create", "-f", "/nonexistent/x.json"])
            .await
            .fails_with("read /nonexistent/x.json: No such file or directory");
        kcm_stdin(&etcd.endpoint(), &["create", "-f", "-"], "")
            .await
            .fails_with("stdin: no objects");
        let mut client = etcd.client().await;
        assert_eq!(key_count(&mut client).await, 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_controller_in_a_list_writes_nothing() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let mut invalid = web_controller(2);
        invalid["spec"]["selector"] = json!({});
        let list = json!({"kind": "List", "items": [
            {"kind": "Service", "metadata": {"name": "web"},
                "spec": {"selector": {"name": "web"}, "port": 80}},
            invalid,
        ]});
        let outcome = create(&etcd.endpoint(), list).await;
        outcome.fails_with(
            "invalid ReplicationController \"default/web\": spec.selector: required (must not be empty)",
        );
        assert_eq!(outcome.stdout, "");
        let mut client = etcd.client().await;
        assert_eq!(key_count(&mut client).await, 0, "the valid service was not written either");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_kinds_are_rejected() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let list =
            json!({"items": [web_controller(1), {"kind": "Widget", "metadata": {"name": "w"}}]});
        create(&etcd.endpoint(), list)
            .await
            .fails_with("stdin: items[1]: unknown kind \"Widget\"");
        let mut client = etcd.client().await;
        assert_eq!(key_count(&mut client).await, 0);

        // On the command line the kind is clap's to reject: a usage error, exit 2.
        let outcome = kcm(&etcd.endpoint(), &["get", "widgets"]).await;
        let stderr = outcome.failure(2);
        assert!(stderr.contains("invalid value 'widgets'"), "{stderr}");
        assert!(
            stderr.contains("replicationcontrollers"),
            "names the kinds: {stderr}"
        );
        let stderr = kcm(
            &etcd.endpoint(),
            &["resize", "pods", "x", "--replicas", "1"],
        )
        .await;
        assert!(
            stderr.failure(2).contains("invalid value 'pods'"),
            "{stderr:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_prints_the_good_objects_and_warns_about_malformed_ones() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let mut client = etcd.client().await;
        let good = pod("good", json!({"a": "b"}), json!({"phase": "Running"}));
        put_raw(
            &mut client,
            "/registry/pods/default/good",
            &good.to_string(),
        )
        .await;
        put_raw(&mut client, "/registry/pods/default/junk", "{not json").await;
        put_raw(
            &mut client,
            "/registry/pods/default/weird",
            r#"{"status": {"phase": "Waiting"}}"#,
        )
        .await;
        let outcome = kcm(&etcd.endpoint(), &["get", "pods"]).await;
        let pod_rows = rows(outcome.success());
        assert_eq!(pod_rows.len(), 1, "{outcome:?}");
        assert_eq!(pod_rows[0][0], "good");
        let warnings: Vec<&str> = outcome.stderr.lines().collect();
        assert_eq!(warnings.len(), 2, "{outcome:?}");
        assert!(
            warnings[0]
                .starts_with("kcm: warning: skipping malformed Pod at /registry/pods/default/junk"),
            "{outcome:?}"
        );
        assert!(
            warnings[1].contains("/registry/pods/default/weird") && warnings[1].contains("Waiting"),
            "{outcome:?}"
        );
        // Asked for by name, a malformed object is an error.
        kcm(&etcd.endpoint(), &["get", "pods", "junk"])
            .await
            .fails_with("malformed Pod at /registry/pods/default/junk");
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Errors every verb shares

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_found_is_an_error_naming_the_object() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        for (args, expected) in [
            (&["get", "pods", "x"][..], "pods \"x\" not found"),
            (
                &["get", "rc", "x", "-o", "json"],
                "replicationcontrollers \"x\" not found",
            ),
            (&["delete", "svc", "x"], "services \"x\" not found"),
            (&["delete", "ep", "x"], "endpoints \"x\" not found"),
            (
                &["resize", "rc", "x", "--replicas", "2"],
                "replicationcontrollers \"x\" not found",
            ),
            (
                &["stop", "rc", "x"],
                "replicationcontrollers \"x\" not found",
            ),
            (
                &["describe", "rc", "x"],
                "replicationcontrollers \"x\" not found",
            ),
        ] {
            let outcome = kcm(&endpoint, args).await;
            assert_eq!(outcome.stdout, "", "{args:?}");
            outcome.fails_with(expected);
        }
        let mut client = etcd.client().await;
        assert_eq!(
            key_count(&mut client).await,
            0,
            "resize must not create the controller"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_etcd_is_one_quick_line_and_exit_1() {
    with_timeout(LIMIT, async {
        let endpoint = format!("http://127.0.0.1:{}", free_port());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rc.json");
        std::fs::write(&file, web_controller(1).to_string()).unwrap();
        let file = file.to_str().unwrap();
        for args in [
            &["create", "-f", file][..],
            &["get", "pods"],
            &["get", "rc", "web", "-o", "json"],
            &["resize", "rc", "web", "--replicas", "2"],
            &["scale", "rc", "web", "--replicas", "2"],
            &["delete", "pods", "p"],
            &["stop", "rc", "web"],
            &["run", "web", "--image", "nginx"],
            &["describe", "rc", "web"],
        ] {
            let started = Instant::now();
            let outcome = kcm(&endpoint, args).await;
            outcome.fails_with(&format!("cannot reach etcd at {endpoint}"));
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{args:?} took {:?}",
                started.elapsed()
            );
        }
        // The variable works as well as the flag.
        let outcome = kcm_command()
            .args(["get", "pods"])
            .env("KCM_ETCD_SERVERS", &endpoint)
            .output()
            .await
            .expect("run kcm");
        assert_eq!(outcome.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&outcome.stderr).contains("cannot reach etcd"));
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// resize, delete, run

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resize_and_scale_set_the_desired_replicas_only() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let mut rc = web_controller(1);
        rc["spec"]["minReadySeconds"] = json!(5);
        create(&endpoint, rc).await.success();
        assert_eq!(
            kcm(&endpoint, &["resize", "rc", "web", "--replicas", "4"])
                .await
                .success(),
            "replicationcontrollers/web resized to 4\n"
        );
        let mut client = etcd.client().await;
        let stored = raw(&mut client, "/registry/controllers/default/web")
            .await
            .unwrap();
        assert_eq!(stored["spec"]["replicas"], 4);
        assert_eq!(
            stored["spec"]["minReadySeconds"], 5,
            "unknown fields survive"
        );
        assert_eq!(
            kcm(
                &endpoint,
                &["scale", "replicationcontroller", "web", "--replicas", "0"]
            )
            .await
            .success(),
            "replicationcontroller/web scaled\n"
        );
        let stored = raw(&mut client, "/registry/controllers/default/web")
            .await
            .unwrap();
        assert_eq!(stored["spec"]["replicas"], 0);
        let outcome = kcm(&endpoint, &["resize", "rc", "web", "--replicas", "-1"]).await;
        assert!(outcome.failure(2).contains("--replicas"), "{outcome:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_removes_one_object() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let list = json!({"items": [
            web_controller(2),
            pod("p", json!({"a": "b"}), json!({"phase": "Running"})),
        ]});
        create(&endpoint, list).await.success();
        assert_eq!(
            kcm(&endpoint, &["delete", "pod", "p"]).await.success(),
            "pod \"p\" deleted\n"
        );
        let outcome = kcm(&endpoint, &["delete", "rc", "web"]).await;
        assert_eq!(outcome.success(), "replicationcontroller \"web\" deleted\n");
        assert!(
            outcome
                .stderr
                .contains("selector name=web are left running; `kcm stop rc`"),
            "hints at stop: {outcome:?}"
        );
        let mut client = etcd.client().await;
        assert_eq!(key_count(&mut client).await, 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_creates_a_controller_and_with_expose_a_service() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let args = [
            "run",
            "web",
            "--image",
            "nginx",
            "--replicas",
            "2",
            "--port",
            "80",
            "--expose",
            "--service-port",
            "8080",
            "-n",
            "prod",
        ];
        assert_eq!(
            kcm(&endpoint, &args).await.success(),
            "replicationcontrollers/web created\nservices/web created\n"
        );
        let mut client = etcd.client().await;
        let rc = raw(&mut client, "/registry/controllers/prod/web")
            .await
            .unwrap();
        assert_eq!(rc["spec"]["replicas"], 2);
        assert_eq!(rc["spec"]["selector"], json!({"name": "web"}));
        assert_eq!(
            rc["spec"]["template"]["metadata"]["labels"],
            json!({"name": "web"})
        );
        assert_eq!(
            rc["spec"]["template"]["spec"]["containers"],
            json!([{"name": "web", "image": "nginx",
                "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}]}])
        );
        let service = raw(&mut client, "/registry/services/specs/prod/web")
            .await
            .unwrap();
        assert_eq!(service["spec"]["selector"], json!({"name": "web"}));
        assert_eq!(service["spec"]["port"], 8080);
        assert_eq!(service["spec"]["containerPort"], 80);

        // Without --expose only the controller; --port is optional.
        assert_eq!(
            kcm(&endpoint, &["run", "db", "--image", "postgres"])
                .await
                .success(),
            "replicationcontrollers/db created\n"
        );
        let db = raw(&mut client, "/registry/controllers/default/db")
            .await
            .unwrap();
        assert_eq!(db["spec"]["replicas"], 1);
        assert_eq!(key_count(&mut client).await, 3);

        // Usage errors (exit 2) and invalid names (exit 1) write nothing.
        let outcome = kcm(&endpoint, &["run", "x", "--image", "i", "--expose"]).await;
        assert!(outcome.failure(2).contains("--port"), "{outcome:?}");
        kcm(&endpoint, &["run", "Bad_Name", "--image", "i"])
            .await
            .fails_with("invalid ReplicationController \"default/Bad_Name\": metadata.name");
        kcm(&endpoint, &["run", "web", "--image", "nginx", "-n", "prod"])
            .await
            .fails_with("replicationcontrollers \"web\" already exists");
        assert_eq!(key_count(&mut client).await, 3);
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// stop and describe

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_waits_for_the_managers_deletes_then_deletes_the_controller() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let mut client = etcd.client().await;
        // A Failed pod of the controller: the manager never deletes it, so stop must not
        // wait for it.
        let failed = pod(
            "web-failed",
            json!({"name": "web"}),
            json!({"phase": "Failed"}),
        );
        create(&endpoint, json!({"items": [web_controller(3), failed]}))
            .await
            .success();
        let _manager = start_manager(&endpoint, &["--controllers", "replication"]).await;
        eventually(CONVERGE, "the manager to create 3 pods", || async {
            n_active(&client, "default").await == 3
        })
        .await;

        let described = kcm(&endpoint, &["describe", "rc", "web"]).await;
        let described = described.success();
        assert!(
            described.contains("Selector:     name=web\n"),
            "{described}"
        );
        assert!(
            described.contains("3 active, 1 failed, 4 in all"),
            "{described}"
        );
        assert!(
            described.contains("  - pod web-failed Failed"),
            "{described}"
        );

        assert_eq!(
            kcm(&endpoint, &["stop", "rc", "web"]).await.success(),
            "replicationcontrollers/web stopped\n"
        );
        assert_eq!(n_active(&client, "default").await, 0);
        let phases: Vec<_> = pods(&client, "default")
            .await
            .into_values()
            .map(|pod| (pod.name, pod.phase))
            .collect();
        assert_eq!(phases, [("web-failed".to_owned(), "Failed".to_owned())]);
        assert!(raw(&mut client, "/registry/controllers/default/web")
            .await
            .is_none());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_waits_until_the_pods_are_gone() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let mut client = etcd.client().await;
        let list = json!({"items": [
            web_controller(2),
            pod("web-1", json!({"name": "web"}), json!({"phase": "Running"})),
            pod("web-2", json!({"name": "web"}), json!({"phase": "Pending"})),
            pod("other", json!({"name": "db"}), json!({"phase": "Running"})),
        ]});
        create(&endpoint, list).await.success();
        // No manager runs: the test plays its part, deleting the pods once stop has resized.
        let mut stop = command(&endpoint, &["stop", "rc", "web", "--timeout", "60s"])
            .spawn()
            .expect("spawn kcm stop");
        eventually(CONVERGE, "stop to resize the controller to 0", || {
            let mut client = client.clone();
            async move {
                let rc = raw(&mut client, "/registry/controllers/default/web").await;
                rc.is_some_and(|rc| rc["spec"]["replicas"] == 0)
            }
        })
        .await;
        client
            .delete("/registry/pods/default/web-1", None)
            .await
            .expect("delete");
        assert!(
            stop.try_wait().expect("poll stop").is_none(),
            "stop ended with web-2 left"
        );
        // A pod that finishes counts as gone too.
        let done = pod(
            "web-2",
            json!({"name": "web"}),
            json!({"phase": "Succeeded"}),
        );
        put_raw(
            &mut client,
            "/registry/pods/default/web-2",
            &done.to_string(),
        )
        .await;
        let outcome = collect(stop).await;
        assert_eq!(outcome.success(), "replicationcontrollers/web stopped\n");
        assert!(raw(&mut client, "/registry/controllers/default/web")
            .await
            .is_none());
        assert!(raw(&mut client, "/registry/pods/default/other")
            .await
            .is_some());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_times_out_naming_the_pods_that_remain() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let list = json!({"items": [
            web_controller(2),
            pod("web-1", json!({"name": "web"}), json!({"phase": "Running"})),
            pod("web-2", json!({"name": "web"}), json!({"phase": "Running"})),
        ]});
        create(&endpoint, list).await.success();
        kcm(&endpoint, &["stop", "rc", "web", "--timeout", "500ms"])
            .await
            .fails_with(
                "timed out after 500ms waiting for the pods of replicationcontrollers/web to \
                 be deleted: 2 active pods remain (web-1, web-2)",
            );
        let mut client = etcd.client().await;
        let rc = raw(&mut client, "/registry/controllers/default/web")
            .await
            .unwrap();
        assert_eq!(rc["spec"]["replicas"], 0, "left resized to 0");

        // An invalid controller is refused up front: no manager would delete its pods.
        let mut invalid = web_controller(1);
        invalid["metadata"]["name"] = json!("bad");
        invalid["spec"]["selector"] = json!({"name": "other"});
        let mut client2 = client.clone();
        put_raw(
            &mut client2,
            "/registry/controllers/default/bad",
            &invalid.to_string(),
        )
        .await;
        kcm(&endpoint, &["stop", "rc", "bad"])
            .await
            .fails_with("cannot stop replicationcontrollers/bad: invalid ReplicationController");
        let bad = raw(&mut client, "/registry/controllers/default/bad")
            .await
            .unwrap();
        assert_eq!(bad["spec"]["replicas"], 1, "not resized");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_shows_the_spec_and_what_is_wrong() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let list = json!({"items": [
            web_controller(2),
            pod("web-1", json!({"name": "web"}), json!({"phase": "Running", "host": "node-1", "podIP": "10.0.0.9"})),
        ]});
        create(&endpoint, list).await.success();
        let outcome = kcm(&endpoint, &["describe", "rc", "web"]).await;
        let text = outcome.success();
        for expected in [
            "Name:         web\n",
            "Namespace:    default\n",
            "Replicas:     2 desired, 0 current\n",
            "  Containers:\n    web:\n      Image:  nginx:1.7\n      Ports:  80/TCP (http)\n",
            "Pods:         1 active, 0 failed, 1 in all\n",
            "Problems:\n  - 2 replicas desired but 0 current",
        ] {
            assert!(text.contains(expected), "{expected:?} missing from\n{text}");
        }
        let pod_line = text.lines().find(|l| l.contains("web-1")).expect("the pod is listed");
        assert_eq!(
            pod_line.split_whitespace().take(6).collect::<Vec<_>>(),
            ["web-1", "1/1", "Running", "0", "node-1", "10.0.0.9"]
        );

        // An invalid controller written by another tool: describe shows why.
        let mut client = etcd.client().await;
        let mut invalid = web_controller(1);
        invalid["metadata"]["name"] = json!("bad");
        invalid["spec"]["replicas"] = json!(-1);
        put_raw(&mut client, "/registry/controllers/default/bad", &invalid.to_string()).await;
        let outcome = kcm(&endpoint, &["describe", "rc", "bad"]).await;
        assert!(
            outcome.success().contains(
                "the controller-manager skips this controller: invalid ReplicationController \
                 \"default/bad\": spec.replicas: must be >= 0, got -1"
            ),
            "{outcome:?}"
        );
    })
    .await;
}

/// `--controllers` with an entry that names no controller (with or without `-`) exits 2
/// before connecting, with the kube-controller-manager's words; the help lists every
/// controller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_manager_refuses_an_unknown_controller_and_lists_the_known_ones() {
    with_timeout(Duration::from_secs(60), async {
        for spec in ["foo", "-foo", "replication,-foo"] {
            // Nothing listens on port 1: the error must come before any connection.
            let output = crate::support::kcm::run_kcm(
                &[
                    "controller-manager",
                    "--controllers",
                    spec,
                    "--etcd-servers",
                    "http://127.0.0.1:1",
                ],
                &[],
            )
            .await;
            assert_eq!(output.status.code(), Some(2), "{spec}: {}", output.stderr);
            assert!(
                output
                    .stderr
                    .contains(r#""foo" is not in the list of known controllers"#),
                "{spec}: {}",
                output.stderr
            );
        }
        let help = crate::support::kcm::run_kcm(&["controller-manager", "--help"], &[]).await;
        for name in [
            "replication",
            "endpoints",
            "endpoints-controller",
            "deployment (aliases deployment-controller)",
            "--concurrent-deployment-syncs",
            "on-by-default controllers",
            "Disabled-by-default controllers: scheduler (aliases kube-scheduler); replication-2014.",
        ] {
            assert!(
                help.stdout.contains(name),
                "help names {name}: {}",
                help.stdout
            );
        }
    })
    .await;
}

/// A zero or overflowing period, or a keepalive etcd would refuse, is a usage error
/// (exit 2, one line naming the flag and the bound), never a panic (exit 101) or a
/// silently restarting watch; it comes before any connection to etcd.
#[tokio::test]
async fn duration_flags_refuse_harmful_values_before_connecting() {
    with_timeout(Duration::from_secs(60), async {
        for (args, expected) in [
            (
                &["controller-manager", "--sync-period", "0s"][..],
                "--sync-period",
            ),
            (
                &["controller-manager", "--endpoint-sync-period", "0s"],
                "at least 100ms",
            ),
            (&["up", "--sync-period", "0s"], "at least 100ms"),
            (
                &["controller-manager", "--sync-period", "100000000000s"],
                "365 days",
            ),
            (
                &["controller-manager", "--etcd-keepalive", "1ms"],
                "--grpc-keepalive-min-time",
            ),
            (
                &["get", "pods", "--etcd-request-timeout", "0s"],
                "at least 100ms",
            ),
        ] {
            let mut all = args.to_vec();
            all.extend(["--etcd-servers", "http://127.0.0.1:1"]);
            let output = crate::support::kcm::run_kcm(&all, &[]).await;
            assert_eq!(output.status.code(), Some(2), "{args:?}: {}", output.stderr);
            assert!(
                output.stderr.contains(expected),
                "{args:?}: {}",
                output.stderr
            );
            assert!(
                !output.stderr.contains("panicked"),
                "{args:?}: {}",
                output.stderr
            );
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Inputs without bounds, help and -v

/// The most heap (`RLIMIT_DATA`) a kcm of the bounded-input tests may use: far above what a
/// bounded read needs (16 MiB of input), far below what reading /dev/zero to its end takes, so
/// an unbounded read fails the test instead of filling the machine's memory.
const DATA_LIMIT: u64 = 256 << 20;

/// Nothing listens on port 1: these inputs must be refused before any connection.
const UNREACHABLE: &str = "http://127.0.0.1:1";

/// `kcm --etcd-servers {UNREACHABLE} {args}` with its heap bounded by [`DATA_LIMIT`].
fn bounded(args: &[&str]) -> Command {
    let mut command = command(UNREACHABLE, args);
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: DATA_LIMIT,
                rlim_max: DATA_LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_DATA, &limit) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
}

const TOO_LARGE: &str = "larger than 16 MiB; an object cannot exceed etcd's request limit \
                         (--max-request-bytes, 1.5 MiB by default)";

/// `-f /dev/zero`, a symlink to it, `yes | kcm create -f -` and `--etcd-password-file
/// /dev/zero` each fail at once with the limit they hit, within a 256 MiB heap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_inputs_fail_at_a_named_limit_without_filling_memory() {
    with_timeout(LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("zero.yaml");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let link = link.to_str().unwrap();
        for (verb, file) in [
            ("create", "/dev/zero"),
            ("create", link),
            ("apply", "/dev/zero"),
        ] {
            let child = bounded(&[verb, "-f", file]).spawn().expect("spawn kcm");
            collect(child)
                .await
                .fails_with(&format!("kcm: manifest {file}: {TOO_LARGE}"));
        }

        let mut yes = Command::new("yes")
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn yes");
        let endless: Stdio = yes.stdout.take().unwrap().try_into().unwrap();
        let child = bounded(&["create", "-f", "-"])
            .stdin(endless)
            .spawn()
            .expect("spawn kcm");
        collect(child)
            .await
            .fails_with(&format!("kcm: manifest stdin: {TOO_LARGE}"));
        drop(yes);

        let child = bounded(&[
            "get",
            "pods",
            "--etcd-user",
            "kcm",
            "--etcd-password-file",
            "/dev/zero",
        ])
        .spawn()
        .expect("spawn kcm");
        collect(child).await.fails_with(
            "--etcd-password-file /dev/zero: larger than 4 KiB; a password is one line",
        );
    })
    .await;
}

/// An empty password file is named as empty; one that its group or others can read is
/// used, with one warning naming it, its mode and the fix (libpq's rule for .pgpass).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_files_that_are_empty_or_readable_by_others_are_reported() {
    use std::os::unix::fs::PermissionsExt as _;
    with_timeout(LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str, mode: u32| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            path.to_str().unwrap().to_owned()
        };
        let get_pods = |file: &str| {
            let args = [
                "get",
                "pods",
                "--etcd-user",
                "kcm",
                "--etcd-password-file",
                file,
            ];
            collect(command(UNREACHABLE, &args).spawn().expect("spawn kcm"))
        };

        let empty = write("empty", "", 0o600);
        get_pods(&empty).await.fails_with(&format!(
            "--etcd-password-file {empty} is empty; write the password of --etcd-user on its first line"
        ));

        let readable = write("readable", "s3cret\n", 0o644);
        let outcome = get_pods(&readable).await;
        let stderr = outcome.failure(1);
        let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains(" WARN ")).collect();
        assert_eq!(
            warnings.len(),
            1,
            "one warning about the file expected: {stderr}"
        );
        assert!(
            warnings[0].contains(&format!(
                "--etcd-password-file {readable} is readable by its group or others \
                 (mode 0644); run chmod 600 {readable}"
            )),
            "{stderr}"
        );
        assert!(!stderr.contains("s3cret"), "the password is never printed: {stderr}");

        let private = write("private", "s3cret\n", 0o600);
        let outcome = get_pods(&private).await;
        assert!(!outcome.failure(1).contains("chmod"), "{outcome:#?}");
    })
    .await;
}

/// `kcm COMMAND --help` lists the command's own flags first, the global ones after them
/// under "Global options".
#[tokio::test]
async fn command_help_shows_its_own_flags_before_the_global_ones() {
    with_timeout(LIMIT, async {
        for verb in ["create", "apply", "get", "watch"] {
            let outcome = collect(command(UNREACHABLE, &[verb, "--help"]).spawn().unwrap()).await;
            let help = outcome.success();
            let at = |needle: &str| {
                help.find(needle)
                    .unwrap_or_else(|| panic!("{verb} --help lacks {needle:?}: {help}"))
            };
            assert!(at("Options:") < at("--namespace"), "{help}");
            assert!(at("--namespace") < at("Global options:"), "{help}");
            assert!(at("Global options:") < at("--etcd-servers"), "{help}");
            assert!(at("Global options:") < at("--verbose"), "{help}");
        }
    })
    .await;
}

/// `-v` does what `--help` says: kcm's debug messages with -v, and every library's trace
/// with -vvv; neither by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verbose_raises_the_log_level_as_the_help_says() {
    with_timeout(LIMIT, async {
        let help = kcm(UNREACHABLE, &["--help"]).await;
        assert!(
            help.success().contains(
                "-v adds kcm's debug messages, -vv kcm's trace, -vvv every library's trace too"
            ),
            "{help:#?}"
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rc.json");
        std::fs::write(&file, web_controller(1).to_string()).unwrap();
        let file = file.to_str().unwrap();
        let stderr = |verbosity: &'static str| async move {
            let mut args = vec!["create", "-f", file];
            args.extend((!verbosity.is_empty()).then_some(verbosity));
            kcm(UNREACHABLE, &args).await.failure(1).to_owned()
        };
        let quiet = stderr("").await;
        assert!(!quiet.contains(" DEBUG "), "{quiet}");
        let debug = stderr("-v").await;
        assert!(
            debug.contains(" DEBUG kcm::kubecfg::input: read manifests"),
            "{debug}"
        );
        assert!(!debug.contains(" TRACE "), "{debug}");
        let everything = stderr("-vvv").await;
        assert!(
            everything
                .lines()
                .any(|line| line.contains(" TRACE ") && !line.contains(" kcm::")),
            "-vvv shows the libraries' trace: {everything}"
        );
    })
    .await;
}
