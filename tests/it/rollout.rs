//! Integration tests of the rollout verbs through the real `kcm` binary against a real
//! etcd: `set image`, `scale --current-replicas`, `get` of several kinds, and (with the
//! Deployment controller) `rollout status|history|undo|pause|resume`.

use etcd_client::Client;
use serde_json::{json, Value};

use crate::cli::{kcm, raw};
use crate::support::objects::put_json;
use crate::support::{start_etcd, with_timeout};

const LIMIT: std::time::Duration = std::time::Duration::from_secs(120);
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
async fn in_ns(endpoint: &str, args: &[&str]) -> crate::cli::Outcome {
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
    })
    .await;
}
