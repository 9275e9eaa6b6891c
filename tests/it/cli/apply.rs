//! `kcm create -f` and `kcm apply -f` with kubectl's inputs (YAML, several documents, a
//! directory, stdin) through the real binary against a real etcd, and what `apply` leaves
//! in etcd: the manifest's fields, the removal of fields dropped since the last apply, and
//! everything else (status, fields written by others, fields kcm does not know) untouched.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::kcm::{kcm, kcm_stdin};
use crate::support::objects::{key_count, raw, web_controller};
use crate::support::{start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(120);
const RC_KEY: &str = "/registry/controllers/default/web";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The web controller as YAML, with `replicas` and the labels given.
fn web_yaml(replicas: i64, labels: &str) -> String {
    format!(
        "kind: ReplicationController\n\
         metadata:\n  name: web\n  labels: {{{labels}}}\n\
         spec:\n  replicas: {replicas}\n  selector: {{app: web}}\n  template:\n    \
         metadata: {{labels: {{app: web}}}}\n    \
         spec:\n      containers: [{{name: web, image: \"nginx:1.7\"}}]\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_creates_updates_and_leaves_alone_what_the_manifest_does_not_say() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let mut client = etcd.client().await;
        let dir = tempfile::tempdir().unwrap();
        let rc_file = dir.path().join("rc.yaml");
        std::fs::write(&rc_file, web_yaml(2, "app: web, tier: fe")).unwrap();
        std::fs::write(
            dir.path().join("svc.json"),
            r#"{"kind": "Service", "metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "port": 80}}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("README.md"), "not a manifest").unwrap();
        let dir_arg = dir.path().to_str().unwrap();
        let rc_arg = rc_file.to_str().unwrap();

        // A directory, in name order; then again, with nothing to change.
        assert_eq!(
            kcm(&endpoint, &["apply", "-f", dir_arg]).await.success(),
            "replicationcontrollers/web created\nservices/web created\n"
        );
        let created = raw(&mut client, RC_KEY).await.unwrap();
        assert!(created["metadata"]["annotations"][LAST_APPLIED].is_string(), "{created}");
        assert_eq!(
            kcm(&endpoint, &["apply", "-f", dir_arg]).await.success(),
            "replicationcontrollers/web unchanged\nservices/web unchanged\n"
        );

        // Others write status, a label and a field kcm does not know.
        let mut stored = created.clone();
        stored["status"] = json!({"replicas": 2});
        stored["metadata"]["labels"]["owner"] = json!("ops");
        stored["spec"]["minReadySeconds"] = json!(5);
        client.put(RC_KEY, stored.to_string(), None).await.unwrap();

        // The manifest drops the tier label and asks for 3 replicas.
        std::fs::write(&rc_file, web_yaml(3, "app: web")).unwrap();
        assert_eq!(
            kcm(&endpoint, &["apply", "-f", rc_arg]).await.success(),
            "replicationcontrollers/web configured\n"
        );
        let applied = raw(&mut client, RC_KEY).await.unwrap();
        assert_eq!(applied["spec"]["replicas"], 3);
        assert_eq!(
            applied["metadata"]["labels"],
            json!({"app": "web", "owner": "ops"}),
            "tier (applied before, dropped now) is removed; owner (never applied) is kept"
        );
        assert_eq!(applied["status"], json!({"replicas": 2}));
        assert_eq!(applied["spec"]["minReadySeconds"], 5);
        assert_eq!(applied["metadata"]["uid"], created["metadata"]["uid"]);
        assert_eq!(applied["metadata"]["generation"], 2, "the spec changed once");
        let last: Value =
            serde_json::from_str(applied["metadata"]["annotations"][LAST_APPLIED].as_str().unwrap())
                .unwrap();
        assert_eq!(last["spec"]["replicas"], 3);
        assert_eq!(last["metadata"]["labels"], json!({"app": "web"}));

        // A manifest naming a resourceVersion is a compare-and-swap on it.
        let read = kcm(&endpoint, &["get", "rc", "web", "-o", "json"]).await;
        let read = read.success().to_owned();
        kcm(&endpoint, &["resize", "rc", "web", "--replicas", "5"])
            .await
            .success();
        let stale = kcm_stdin(&endpoint, &["apply", "-f", "-"], &read).await;
        stale.fails_with(
            "Operation cannot be fulfilled on replicationcontrollers \"web\": the object has been modified",
        );
        assert_eq!(raw(&mut client, RC_KEY).await.unwrap()["spec"]["replicas"], 5);
        // Read again, it applies; the status in it is left to the controllers.
        let read = kcm(&endpoint, &["get", "rc", "web", "-o", "json"]).await;
        let mut fresh: Value = serde_json::from_str(read.success()).unwrap();
        fresh["spec"]["replicas"] = json!(4);
        fresh["status"]["replicas"] = json!(99);
        let outcome = kcm_stdin(&endpoint, &["apply", "-f", "-"], &fresh.to_string()).await;
        assert_eq!(outcome.success(), "replicationcontrollers/web configured\n");
        let stored = raw(&mut client, RC_KEY).await.unwrap();
        assert_eq!(stored["spec"]["replicas"], 4);
        assert_eq!(stored["status"], json!({"replicas": 2}));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_to_an_object_made_by_create_warns_and_keeps_what_the_manifest_leaves_out() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let mut client = etcd.client().await;
        kcm_stdin(
            &endpoint,
            &["create", "-f", "-"],
            &web_yaml(1, "app: web, tier: fe"),
        )
        .await
        .success();
        let outcome = kcm_stdin(&endpoint, &["apply", "-f", "-"], &web_yaml(2, "app: web")).await;
        assert_eq!(outcome.success(), "replicationcontrollers/web configured\n");
        assert_eq!(
            outcome.stderr,
            format!(
                "kcm: warning: replicationcontrollers/web has no {LAST_APPLIED} annotation \
                 (it was not made by apply); fields the manifest leaves out are kept\n"
            )
        );
        let stored = raw(&mut client, RC_KEY).await.unwrap();
        assert_eq!(stored["spec"]["replicas"], 2);
        assert_eq!(
            stored["metadata"]["labels"],
            json!({"app": "web", "tier": "fe"})
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yaml_streams_are_created_in_order_and_errors_name_file_document_and_field() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let mut client = etcd.client().await;
        let stream = format!(
            "# the web tier\n---\n{}---\n{}",
            web_yaml(1, "app: web"),
            "kind: List\nitems:\n- kind: Service\n  metadata: {name: web}\n  spec: {selector: {app: web}, port: 80}\n\
             - kind: Pod\n  metadata: {name: p, labels: {app: other}}\n"
        );
        assert_eq!(
            kcm_stdin(&endpoint, &["create", "-f", "-"], &stream)
                .await
                .success(),
            "replicationcontrollers/web created\nservices/web created\npods/p created\n"
        );

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.yaml");
        let bad = format!(
            "{}---\n{}",
            "kind: Pod\nmetadata: {name: q}\n",
            web_yaml(1, "app: web").replace("replicas: 1", "replicas: three")
        );
        std::fs::write(&file, bad).unwrap();
        let file = file.to_str().unwrap();
        let before = key_count(&mut client).await;
        for verb in ["create", "apply"] {
            kcm(&endpoint, &[verb, "-f", file]).await.fails_with(&format!(
                "{file}: document 2: decode ReplicationController \"web\": spec.replicas: \
                 invalid type: string \"three\", expected i64"
            ));
        }
        assert_eq!(key_count(&mut client).await, before, "nothing written");

        let mut invalid = web_controller(1);
        invalid["spec"]["selector"] = json!({});
        let outcome = kcm_stdin(&endpoint, &["apply", "-f", "-"], &invalid.to_string()).await;
        outcome.fails_with(
            "stdin: invalid ReplicationController \"default/web\": spec.selector: required",
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_given_twice_in_one_input_is_applied_twice_in_turn() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let mut client = etcd.client().await;
        // Several objects are applied at once; the second `a` still waits for the first.
        let pod = |name: &str, tier: &str| {
            json!({"kind": "Pod", "metadata": {"name": name, "labels": {"tier": tier}},
                   "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
        };
        let list = json!({"kind": "List", "items": [
            pod("a", "one"), pod("b", "one"), pod("a", "two"), pod("c", "one")
        ]});
        let outcome = kcm_stdin(&endpoint, &["apply", "-f", "-"], &list.to_string()).await;
        assert_eq!(
            outcome.success(),
            "pods/a created\npods/b created\npods/a configured\npods/c created\n"
        );
        let stored = raw(&mut client, "/registry/pods/default/a").await.unwrap();
        assert_eq!(stored["metadata"]["labels"], json!({"tier": "two"}));
    })
    .await;
}
