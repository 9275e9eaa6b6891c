//! Server-side apply and field ownership through the real kubectl (1.32) against a bare
//! `kcm apiserver`, each outcome read back from etcd: `apply --server-side` creating,
//! pruning what the applier leaves out (a label; one container port of two), writing
//! nothing when nothing changes and nothing at all under `--dry-run=server`; the conflict
//! after `kubectl scale` (kubectl's advice, exit 1), co-owning by matching the value, and
//! `--force-conflicts`; the move from client-side apply (no conflict, the annotation
//! following, a stale resourceVersion in kubectl's follow-up JSON patch refused); and the
//! Update entries every other write records (`kubectl create`, `edit`, `label`), hidden by
//! kubectl unless `--show-managed-fields`, and cleared by a merge patch of `[{}]`; and
//! `kcm apply --server-side` over etcd recording the fields the API records and meeting
//! the same conflicts.
//! Expectations are kube-apiserver's (`test/integration/apiserver/apply/apply_test.go`,
//! `test/cmd/apply.sh`).

use std::time::Duration;

use serde_json::Value;

use crate::support::kubectl::{start_apiserver, start_up, Api};
use crate::support::objects::current_revision;
use crate::support::{eventually, with_timeout};

/// Bound on each test.
const LIMIT: Duration = Duration::from_secs(90);

const DEPLOYMENT_KEY: &str = "/registry/deployments/default/web";

/// A Deployment `web` with `labels` (YAML flow map), `replicas` and container `ports`.
fn deployment(labels: &str, replicas: u32, ports: &[u16]) -> String {
    let ports: Vec<String> = ports
        .iter()
        .map(|p| format!("{{containerPort: {p}}}"))
        .collect();
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {labels}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1\n        ports: [{}]\n",
        ports.join(", ")
    )
}

/// `kubectl get {what} -o json --show-managed-fields`.
async fn get_with_fields(api: &Api, what: &str) -> Value {
    let out = api
        .kubectl
        .ok(&["get", what, "-o", "json", "--show-managed-fields"])
        .await;
    serde_json::from_str(&out).expect("-o json is JSON")
}

/// Each entry's (manager, operation, subresource).
fn entries(object: &Value) -> Vec<(String, String, String)> {
    let text = |entry: &Value, field: &str| entry[field].as_str().unwrap_or("").to_string();
    object["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    (
                        text(e, "manager"),
                        text(e, "operation"),
                        text(e, "subresource"),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The `fieldsV1` of `manager`'s entry through the main resource, as text.
fn fields_of(object: &Value, manager: &str) -> String {
    fields_through(object, manager, "")
}

/// The `fieldsV1` of `manager`'s entry through `subresource` (`""`: the main resource).
fn fields_through(object: &Value, manager: &str, subresource: &str) -> String {
    object["metadata"]["managedFields"]
        .as_array()
        .and_then(|entries| {
            entries.iter().find(|e| {
                e["manager"] == manager && e["subresource"].as_str().unwrap_or("") == subresource
            })
        })
        .map(|e| e["fieldsV1"].to_string())
        .unwrap_or_default()
}

async fn stored_deployment(api: &Api) -> Value {
    api.stored(DEPLOYMENT_KEY)
        .await
        .expect("the Deployment is in etcd")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_server_side_creates_prunes_what_it_leaves_out_and_writes_nothing_unchanged() {
    with_timeout(LIMIT, async {
        let Some(api) = start_apiserver().await else {
            return;
        };
        let first = api.manifest(
            "web.yaml",
            &deployment("{app: web, team: a}", 2, &[80, 443]),
        );
        let out = api
            .kubectl
            .ok(&["apply", "--server-side", "-f", &first])
            .await;
        assert_eq!(out.trim(), "deployment.apps/web serverside-applied");
        let stored = stored_deployment(&api).await;
        assert_eq!(stored["spec"]["replicas"], 2);
        let live = get_with_fields(&api, "deployment/web").await;
        assert_eq!(
            entries(&live),
            [("kubectl".into(), "Apply".into(), String::new())]
        );
        let fields = fields_of(&live, "kubectl");
        // Ports keyed by containerPort and the protocol's default, as kube-apiserver keys them.
        assert!(
            fields.contains(r#"k:{\"containerPort\":443,\"protocol\":\"TCP\"}"#),
            "{fields}"
        );
        assert!(fields.contains(r#""f:team":{}"#), "{fields}");
        // kubectl hides the entries unless asked.
        let plain = api
            .kubectl
            .ok(&["get", "deployment/web", "-o", "yaml"])
            .await;
        assert!(!plain.contains("managedFields"), "{plain}");

        // The same configuration again: nothing written, the resourceVersion stays.
        let client = api.etcd.client().await;
        let revision = current_revision(&client).await;
        api.kubectl
            .ok(&["apply", "--server-side", "-f", &first])
            .await;
        assert_eq!(
            current_revision(&client).await,
            revision,
            "a no-op apply wrote"
        );

        // Without the label and the second port: both go, the rest stays.
        let second = api.manifest("web.yaml", &deployment("{app: web}", 2, &[80]));
        api.kubectl
            .ok(&["apply", "--server-side", "-f", &second])
            .await;
        let stored = stored_deployment(&api).await;
        assert_eq!(
            stored["metadata"]["labels"],
            serde_json::json!({"app": "web"})
        );
        let containers = stored["spec"]["template"]["spec"]["containers"]
            .as_array()
            .expect("containers");
        assert_eq!(containers.len(), 1);
        let ports: Vec<i64> = containers[0]["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .map(|p| p["containerPort"].as_i64().expect("a port number"))
            .collect();
        assert_eq!(ports, [80], "only the port left out goes");
        assert_eq!(containers[0]["image"], "nginx:1");

        // A server-side dry run answers and writes nothing.
        let revision = current_revision(&client).await;
        let third = api.manifest("web.yaml", &deployment("{app: web}", 7, &[80]));
        let out = api
            .kubectl
            .ok(&["apply", "--server-side", "--dry-run=server", "-f", &third])
            .await;
        assert!(out.contains("(server dry run)"), "{out}");
        assert_eq!(current_revision(&client).await, revision, "a dry run wrote");
        assert_eq!(stored_deployment(&api).await["spec"]["replicas"], 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_after_kubectl_scale_is_reported_and_force_conflicts_takes_the_field() {
    with_timeout(LIMIT, async {
        let Some(api) = start_apiserver().await else {
            return;
        };
        let two = api.manifest("web.yaml", &deployment("{app: web}", 2, &[80]));
        api.kubectl
            .ok(&["apply", "--server-side", "-f", &two])
            .await;
        api.kubectl
            .ok(&["scale", "deployment/web", "--replicas=5"])
            .await;
        let scaled = get_with_fields(&api, "deployment/web").await;
        assert!(
            entries(&scaled)
                .iter()
                .any(|(_, op, sub)| op == "Update" && sub == "scale"),
            "{:?}",
            entries(&scaled)
        );
        // An Update always takes the fields it changes: the applier no longer owns them.
        assert!(fields_through(&scaled, "kubectl", "scale").contains("f:replicas"));
        assert!(!fields_of(&scaled, "kubectl").contains("f:replicas"));

        // Another value: a conflict, kubectl's advice, nothing written.
        let three = api.manifest("web-3.yaml", &deployment("{app: web}", 3, &[80]));
        let refused = api
            .kubectl
            .run(&["apply", "--server-side", "-f", &three])
            .await;
        assert!(!refused.status.success(), "{refused:?}");
        assert!(
            refused
                .stderr
                .contains("Apply failed with 1 conflict: conflict with")
                && refused
                    .stderr
                    .contains("with subresource \"scale\" using apps/v1: .spec.replicas"),
            "{}",
            refused.stderr
        );
        assert!(
            refused.stderr.contains("--force-conflicts"),
            "{}",
            refused.stderr
        );
        assert_eq!(stored_deployment(&api).await["spec"]["replicas"], 5);

        // The same value: no conflict, the field co-owned.
        let five = api.manifest("web-5.yaml", &deployment("{app: web}", 5, &[80]));
        api.kubectl
            .ok(&["apply", "--server-side", "-f", &five])
            .await;

        // Forced: the field changes hands, and the scale entry, left with nothing, goes.
        api.kubectl
            .ok(&["apply", "--server-side", "--force-conflicts", "-f", &three])
            .await;
        assert_eq!(stored_deployment(&api).await["spec"]["replicas"], 3);
        let forced = get_with_fields(&api, "deployment/web").await;
        assert_eq!(
            entries(&forced),
            [("kubectl".into(), "Apply".into(), String::new())]
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_apply_moves_to_server_side_apply_without_conflicts() {
    with_timeout(LIMIT, async {
        let Some(api) = start_apiserver().await else {
            return;
        };
        let config = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: \"1\"\n  b: \"2\"\n";
        let file = api.manifest("settings.yaml", config);
        let web = api.manifest("web.yaml", &deployment("{app: web}", 2, &[80]));
        api.kubectl.ok(&["apply", "-f", &file, "-f", &web]).await;
        let csa = get_with_fields(&api, "configmap/settings").await;
        assert_eq!(
            entries(&csa),
            [("kubectl-client-side-apply".into(), "Update".into(), String::new())]
        );

        // The same files server-side: no conflict; kubectl folds the client-side entry
        // into its own.
        let out = api
            .kubectl
            .ok(&["apply", "--server-side", "-f", &file, "-f", &web])
            .await;
        assert!(out.contains("configmap/settings serverside-applied"), "{out}");
        assert!(out.contains("deployment.apps/web serverside-applied"), "{out}");
        for what in ["configmap/settings", "deployment/web"] {
            let moved = get_with_fields(&api, what).await;
            let managers: Vec<_> = entries(&moved).into_iter().map(|e| e.0).collect();
            assert!(managers.contains(&"kubectl".to_string()), "{what}: {managers:?}");
            assert!(
                !managers.contains(&"kubectl-client-side-apply".to_string()),
                "{what}: {managers:?}"
            );
        }

        // What the file no longer sets goes, and the annotation follows the file.
        let fewer = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: \"1\"\n";
        let file = api.manifest("settings.yaml", fewer);
        api.kubectl.ok(&["apply", "--server-side", "-f", &file]).await;
        let stored = api
            .stored("/registry/configmaps/default/settings")
            .await
            .expect("the ConfigMap is in etcd");
        assert_eq!(stored["data"], serde_json::json!({"a": "1"}));
        let last = stored["metadata"]["annotations"]
            ["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .expect("the annotation stays");
        assert!(!last.contains("\"b\""), "{last}");

        // kubectl's follow-up patch states the resourceVersion it read: a stale one is 409.
        let client = api.etcd.client().await;
        let revision = current_revision(&client).await;
        let stale = api
            .kubectl
            .run(&[
                "patch",
                "configmap/settings",
                "--type=json",
                "-p",
                r#"[{"op":"replace","path":"/metadata/resourceVersion","value":"1"}]"#,
            ])
            .await;
        assert!(!stale.status.success(), "{stale:?}");
        assert!(stale.stderr.contains("Conflict"), "{}", stale.stderr);
        assert_eq!(current_revision(&client).await, revision);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_records_its_manager_and_a_merge_patch_of_an_empty_entry_clears_them() {
    with_timeout(LIMIT, async {
        let Some(api) = start_apiserver().await else {
            return;
        };
        let config =
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: \"1\"\n";
        let file = api.manifest("settings.yaml", config);
        api.kubectl.ok(&["create", "-f", &file]).await;
        let web = api.manifest("web.yaml", &deployment("{app: web}", 2, &[80]));
        api.kubectl.ok(&["create", "-f", &web]).await;
        for what in ["configmap/settings", "deployment/web"] {
            let created = get_with_fields(&api, what).await;
            assert_eq!(
                entries(&created),
                [("kubectl-create".into(), "Update".into(), String::new())],
                "{what}"
            );
            // A create owns no status.
            assert!(
                !fields_of(&created, "kubectl-create").contains("f:status"),
                "{what}"
            );
        }

        // kubectl edit, through an editor that changes one value.
        let edited = api
            .kubectl
            .command(&["edit", "configmap/settings"])
            .env("KUBE_EDITOR", r#"sed -i s/\"1\"/\"2\"/"#)
            .output()
            .await
            .expect("run kubectl edit");
        assert!(edited.status.success(), "{edited:?}");
        api.kubectl
            .ok(&["label", "configmap/settings", "tier=front"])
            .await;
        let written = get_with_fields(&api, "configmap/settings").await;
        assert_eq!(written["data"]["a"], "2");
        let managers: Vec<_> = entries(&written).into_iter().map(|e| e.0).collect();
        assert_eq!(
            managers,
            ["kubectl-create", "kubectl-edit", "kubectl-label"]
        );
        assert!(fields_of(&written, "kubectl-edit").contains("f:a"));
        assert!(
            !fields_of(&written, "kubectl-create").contains("f:a"),
            "the edit took it"
        );

        api.kubectl
            .ok(&[
                "patch",
                "configmap/settings",
                "--type=merge",
                "-p",
                r#"{"metadata":{"managedFields":[{}]}}"#,
            ])
            .await;
        let stored = api
            .stored("/registry/configmaps/default/settings")
            .await
            .expect("the ConfigMap is in etcd");
        assert!(
            stored["metadata"].get("managedFields").is_none(),
            "{stored}"
        );
        assert_eq!(stored["data"]["a"], "2");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcm_apply_server_side_records_what_the_api_records_and_meets_the_same_conflicts() {
    with_timeout(LIMIT, async {
        let Some(api) = start_apiserver().await else {
            return;
        };
        // One manifest, applied through the API by kubectl and over etcd by kcm under
        // another name: the two managers own the same fields.
        let web = api.manifest("web.yaml", &deployment("{app: web}", 2, &[80]));
        api.kubectl
            .ok(&["apply", "--server-side", "-f", &web])
            .await;
        let twin = deployment("{app: web}", 2, &[80])
            .replace("metadata:\n  name: web\n", "metadata:\n  name: twin\n");
        let twin = api.manifest("twin.yaml", &twin);
        let out = api.kcm(&["apply", "--server-side", "-f", &twin]).await;
        assert_eq!(out.trim(), "deployments/twin serverside-applied");
        let by_kubectl = get_with_fields(&api, "deployment/web").await;
        let by_kcm = get_with_fields(&api, "deployment/twin").await;
        assert_eq!(
            entries(&by_kcm),
            [("kcm".into(), "Apply".into(), String::new())]
        );
        assert_eq!(fields_of(&by_kcm, "kcm"), fields_of(&by_kubectl, "kubectl"));

        // kcm changing what kubectl owns: the API's conflict, nothing written; forced, kcm
        // takes the field.
        let five = deployment("{app: web}", 5, &[80]);
        let five = api.manifest("web-5.yaml", &five);
        let refused =
            crate::support::kcm::kcm(&api.etcd_url(), &["apply", "--server-side", "-f", &five])
                .await;
        let stderr = &refused.stderr;
        assert!(!refused.status.success(), "{refused:?}");
        assert!(
            stderr.contains(
                r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#
            ) && stderr.contains("--force-conflicts"),
            "{stderr}"
        );
        assert_eq!(stored_deployment(&api).await["spec"]["replicas"], 2);
        api.kcm(&["apply", "--server-side", "--force-conflicts", "-f", &five])
            .await;
        assert_eq!(stored_deployment(&api).await["spec"]["replicas"], 5);
        let forced = get_with_fields(&api, "deployment/web").await;
        assert!(fields_of(&forced, "kcm").contains("f:replicas"));
        assert!(!fields_of(&forced, "kubectl").contains("f:replicas"));
    })
    .await;
}

const SOLO_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: solo
spec:
  containers:
  - name: web
    image: nginx:1.25
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controllers_kubelets_and_kcms_cli_record_their_writes_of_objects_made_through_the_api()
{
    with_timeout(LIMIT, async {
        let Some(api) = start_up(1).await else {
            return;
        };
        let web = api.manifest("web.yaml", &deployment("{app: web}", 2, &[80]));
        api.kubectl
            .ok(&["apply", "--server-side", "-f", &web])
            .await;
        // The deployment controller writes the status over etcd: an Update of its own.
        let controllers = (
            "kcm-controller-manager".to_string(),
            "Update".to_string(),
            "status".to_string(),
        );
        eventually(
            Duration::from_secs(40),
            "the controller's status write recorded",
            || async {
                let live = get_with_fields(&api, "deployment/web").await;
                live["status"]["replicas"] == 2 && entries(&live).contains(&controllers)
            },
        )
        .await;
        let live = get_with_fields(&api, "deployment/web").await;
        assert!(fields_through(&live, "kcm-controller-manager", "status").contains("f:replicas"));
        assert!(!fields_of(&live, "kubectl").contains("f:status"));

        // A pod made through the API: the scheduler's binding and the kubelet's status
        // writes are Updates of their own.
        let pod = api.manifest("solo.yaml", SOLO_POD);
        api.kubectl.ok(&["create", "-f", &pod]).await;
        let kubelet = (
            "kcm-kubelet".to_string(),
            "Update".to_string(),
            "status".to_string(),
        );
        eventually(
            Duration::from_secs(40),
            "the kubelet's status write recorded",
            || async {
                let live = get_with_fields(&api, "pod/solo").await;
                live["status"]["phase"] == "Running" && entries(&live).contains(&kubelet)
            },
        )
        .await;
        let live = get_with_fields(&api, "pod/solo").await;
        let kubelets = fields_through(&live, "kcm-kubelet", "status");
        assert!(kubelets.contains("f:phase"), "{kubelets}");
        assert!(!kubelets.contains("f:spec"), "{kubelets}");
        assert!(fields_of(&live, "kubectl-create").contains("f:containers"));
        assert!(
            fields_of(&live, "kcm-controller-manager").contains("f:nodeName"),
            "the scheduler's binding: {:?}",
            entries(&live)
        );

        // kcm's CLI over etcd: an Update by `kcm`, which an apply then conflicts with.
        api.kcm(&["scale", "--replicas", "3", "deployments", "web"])
            .await;
        let scaled = get_with_fields(&api, "deployment/web").await;
        assert!(
            fields_of(&scaled, "kcm").contains("f:replicas"),
            "{:?}",
            entries(&scaled)
        );
        let refused = api
            .kubectl
            .run(&["apply", "--server-side", "-f", &web])
            .await;
        assert!(!refused.status.success(), "{refused:?}");
        assert!(
            refused
                .stderr
                .contains(r#"conflict with "kcm" using apps/v1: .spec.replicas"#),
            "{}",
            refused.stderr
        );
    })
    .await;
}
