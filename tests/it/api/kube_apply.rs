//! Server-side apply through a real client, kube-rs: `Patch::Apply` with
//! `PatchParams::apply(manager)` creating, changing, leaving alone and pruning a
//! Deployment; another manager's 409 with kube-apiserver's message until it forces, and
//! who owns the field after; a status applied through `patch_status`, recorded as an entry
//! of the `status` subresource; a kube-runtime `Controller` that applies a ConfigMap per
//! Deployment (the controller-rs pattern); and the requests kube-apiserver refuses (no
//! `fieldManager`, `force` on a merge patch, `managedFields` in the configuration, another
//! apiVersion, a list item twice, a body that does not parse, a `uid` for an object that
//! does not exist), each of which writes nothing.
//!
//! A bare `kcm apiserver` over a test etcd; what a write did is read from etcd
//! (`/registry/deployments/{ns}/{name}`, `/registry/configmaps/{ns}/{name}`, and etcd's
//! revision for "nothing was written"), the answers from kube-rs, or from raw HTTP for the
//! requests kube-rs cannot send. Expectations are kube-apiserver's (`staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go`,
//! `.../managedfields/internal/conflict.go`, `test/integration/apiserver/apply/`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource as _, ResourceExt as _};
use serde_json::{json, Value};

use crate::support::apiserver::apiserver;
use crate::support::kcm::{http_request, HttpResponse, Kcm};
use crate::support::objects::current_revision;
use crate::support::{eventually, start_etcd, with_timeout, EtcdServer};

/// Bound on each test.
const LIMIT: Duration = Duration::from_secs(120);
/// How long the controller may take to catch up with a change.
const CONVERGE: Duration = Duration::from_secs(30);
const NS: &str = "default";
/// What an applied Deployment with two containers named `c` is refused with.
const DUPLICATE: &str = r#".spec.template.spec.containers: duplicate entries for key [name="c"]"#;

// ---------------------------------------------------------------------------------------
// Harness: a bare apiserver, a kube client of it, etcd read directly.

/// A `kcm apiserver` over a test etcd, a kube-rs client of it and an etcd client. Fields
/// drop in order: the apiserver is killed before its etcd.
struct Server {
    client: kube::Client,
    port: u16,
    etcd_client: etcd_client::Client,
    _kcm: Kcm,
    _etcd: EtcdServer,
}

impl Server {
    async fn on(etcd: EtcdServer) -> Server {
        let (kcm, port) = apiserver(&etcd, &[]).await;
        let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
        let client = kube::Client::try_from(config).expect("a kube client");
        let etcd_client = etcd.client().await;
        Server {
            client,
            port,
            etcd_client,
            _kcm: kcm,
            _etcd: etcd,
        }
    }

    fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), NS)
    }

    fn configmaps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), NS)
    }

    /// The document etcd holds at `key` (`None` when absent).
    async fn stored(&self, key: &str) -> Option<Value> {
        let response = self
            .etcd_client
            .clone()
            .get(key, None)
            .await
            .expect("etcd get");
        response
            .kvs()
            .first()
            .map(|kv| serde_json::from_slice(kv.value()).expect("stored JSON"))
    }

    /// Deployment `name` of [`NS`] as etcd holds it; panics when absent.
    async fn deployment(&self, name: &str) -> Value {
        let key = deployment_key(name);
        self.stored(&key)
            .await
            .unwrap_or_else(|| panic!("{key} is not in etcd"))
    }

    /// etcd's current revision: unchanged means nothing was written.
    async fn revision(&self) -> i64 {
        current_revision(&self.etcd_client).await
    }
}

fn deployment_key(name: &str) -> String {
    format!("/registry/deployments/{NS}/{name}")
}

fn configmap_key(name: &str) -> String {
    format!("/registry/configmaps/{NS}/{name}")
}

/// Deployment `name`'s full configuration: `labels` on the object, `replicas`, one
/// container `c` running `image`.
fn config(name: &str, labels: Value, replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": image}]},
            },
        },
    })
}

/// The entry of `manager` (and `subresource`, `""` for the main resource); panics naming
/// the entries there are when there is none.
fn entry<'a>(
    entries: &'a [ManagedFieldsEntry],
    manager: &str,
    subresource: &str,
) -> &'a ManagedFieldsEntry {
    entries
        .iter()
        .find(|e| {
            e.manager.as_deref() == Some(manager)
                && e.subresource.as_deref().unwrap_or("") == subresource
        })
        .unwrap_or_else(|| panic!("no entry of {manager:?} {subresource:?} in {entries:#?}"))
}

/// An entry's `fieldsV1` (`{}` when it has none).
fn fields(entry: &ManagedFieldsEntry) -> Value {
    entry
        .fields_v1
        .as_ref()
        .map_or_else(|| json!({}), |f| f.0.clone())
}

/// The kube-apiserver Status inside a failed kube-rs call; panics on success or on a
/// failure that is not an API answer.
fn api_error<T: std::fmt::Debug>(result: kube::Result<T>) -> kube::core::ErrorResponse {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("an API error expected, got {other:?}"),
    }
}

/// A Status answer to a raw request: its code, reason and message must be these.
fn assert_refused(what: &str, response: &HttpResponse, code: u16, reason: &str, message: &str) {
    assert_eq!(response.status, code, "{what}: {response:?}");
    let status = response.json();
    assert_eq!(status["kind"], "Status", "{what}: {status}");
    assert_eq!(status["code"], code, "{what}: {status}");
    assert_eq!(status["reason"], reason, "{what}: {status}");
    let said = status["message"].as_str().unwrap_or("");
    assert!(
        said.contains(message),
        "{what}: the message should say {message:?}: {status}"
    );
}

// ---------------------------------------------------------------------------------------
// Apply through kube-rs.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applies_create_change_skip_and_prune_a_deployment() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let server = Server::on(etcd).await;
        let deployments = server.deployments();
        let mgr = PatchParams::apply("mgr").force();
        let labels = json!({"app": "web", "tier": "front"});

        // An apply to a Deployment that does not exist creates it, owned by "mgr".
        assert!(server.stored(&deployment_key("web")).await.is_none());
        let v1 = config("web", labels.clone(), 2, "nginx:1");
        let created = deployments
            .patch("web", &mgr, &Patch::Apply(&v1))
            .await
            .expect("an apply creates the Deployment");
        let entries = created.managed_fields();
        assert_eq!(entries.len(), 1, "one entry: {entries:#?}");
        let only = &entries[0];
        assert_eq!(only.manager.as_deref(), Some("mgr"));
        assert_eq!(only.operation.as_deref(), Some("Apply"));
        assert_eq!(only.api_version.as_deref(), Some("apps/v1"));
        assert_eq!(only.fields_type.as_deref(), Some("FieldsV1"));
        assert!(only.subresource.as_deref().unwrap_or("").is_empty());
        let owned = fields(only);
        assert_eq!(owned["f:spec"]["f:replicas"], json!({}), "{owned}");
        assert_eq!(
            owned["f:metadata"]["f:labels"]["f:tier"],
            json!({}),
            "{owned}"
        );
        assert!(
            owned["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]
                ["f:image"]
                .is_object(),
            "the container is owned by its name: {owned}"
        );
        let stored = server.deployment("web").await;
        assert_eq!(stored["metadata"]["labels"], labels);
        assert_eq!(stored["spec"]["replicas"], 2);
        assert_eq!(
            stored["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:1"
        );
        assert_eq!(stored["metadata"]["uid"], json!(created.uid().unwrap()));
        assert_eq!(stored["metadata"]["managedFields"][0]["manager"], "mgr");
        assert_eq!(stored["metadata"]["managedFields"][0]["operation"], "Apply");

        // One change: the image. The rest stays, and still belongs to "mgr" alone.
        let v2 = config("web", labels.clone(), 2, "nginx:2");
        let changed = deployments
            .patch("web", &mgr, &Patch::Apply(&v2))
            .await
            .expect("a second apply");
        assert_ne!(changed.resource_version(), created.resource_version());
        assert_eq!(changed.uid(), created.uid());
        assert_eq!(changed.managed_fields().len(), 1);
        let stored = server.deployment("web").await;
        assert_eq!(
            stored["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:2"
        );
        assert_eq!(stored["spec"]["replicas"], 2);
        assert_eq!(stored["metadata"]["labels"], labels);

        // The same configuration again changes nothing: no write, the same resourceVersion.
        let revision = server.revision().await;
        let same = deployments
            .patch("web", &mgr, &Patch::Apply(&v2))
            .await
            .expect("an identical apply");
        assert_eq!(same.resource_version(), changed.resource_version());
        assert_eq!(same.managed_fields(), changed.managed_fields());
        assert_eq!(
            server.revision().await,
            revision,
            "an identical apply wrote"
        );

        // A label "mgr" set before and leaves out now is removed.
        let v3 = config("web", json!({"app": "web"}), 2, "nginx:2");
        let pruned = deployments
            .patch("web", &mgr, &Patch::Apply(&v3))
            .await
            .expect("an apply without the tier label");
        assert_eq!(
            pruned.labels(),
            &BTreeMap::from([("app".to_string(), "web".to_string())])
        );
        let stored = server.deployment("web").await;
        assert_eq!(stored["metadata"]["labels"], json!({"app": "web"}));
        let owned = &stored["metadata"]["managedFields"][0]["fieldsV1"];
        assert!(
            owned["f:metadata"]["f:labels"].get("f:tier").is_none(),
            "{owned}"
        );
        assert!(server.revision().await > revision);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_manager_conflicts_until_it_forces_and_then_owns_the_field() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let server = Server::on(etcd).await;
        let deployments = server.deployments();
        let labels = json!({"app": "web"});
        deployments
            .patch(
                "web",
                &PatchParams::apply("mgr").force(),
                &Patch::Apply(&config("web", labels, 2, "nginx:1")),
            )
            .await
            .expect("mgr creates the Deployment");

        // "other" applies another replica count, without force: 409, nothing written.
        let other = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                           "metadata": {"name": "web"}, "spec": {"replicas": 5}});
        let revision = server.revision().await;
        let status = api_error(
            deployments
                .patch("web", &PatchParams::apply("other"), &Patch::Apply(&other))
                .await,
        );
        assert_eq!(status.code, 409, "{status:?}");
        assert_eq!(status.reason, "Conflict", "{status:?}");
        // An Apply entry is printed without "using apps/v1" (conflict.go).
        assert_eq!(
            status.message, r#"Apply failed with 1 conflict: conflict with "mgr": .spec.replicas"#,
            "{status:?}"
        );
        assert_eq!(
            server.revision().await,
            revision,
            "a conflicting apply wrote"
        );
        assert_eq!(server.deployment("web").await["spec"]["replicas"], 2);

        // With force it goes through, and the field changes hands.
        let forced = deployments
            .patch(
                "web",
                &PatchParams::apply("other").force(),
                &Patch::Apply(&other),
            )
            .await
            .expect("a forced apply");
        assert_eq!(forced.spec.as_ref().unwrap().replicas, Some(5));
        let entries = forced.managed_fields();
        assert_eq!(entries.len(), 2, "{entries:#?}");
        let theirs = fields(entry(entries, "other", ""));
        assert_eq!(theirs["f:spec"]["f:replicas"], json!({}), "{theirs}");
        let mine = fields(entry(entries, "mgr", ""));
        assert!(mine["f:spec"].get("f:replicas").is_none(), "{mine}");
        assert!(mine["f:spec"]["f:template"].is_object(), "{mine}");
        let stored = server.deployment("web").await;
        assert_eq!(stored["spec"]["replicas"], 5);
        assert_eq!(stored["metadata"]["managedFields"], json!(entries));

        // Now "mgr" is the one that conflicts, and "other"'s value stays.
        let revision = server.revision().await;
        let status = api_error(
            deployments
                .patch(
                    "web",
                    &PatchParams::apply("mgr"),
                    &Patch::Apply(&config("web", json!({"app": "web"}), 3, "nginx:1")),
                )
                .await,
        );
        assert_eq!(status.code, 409, "{status:?}");
        assert_eq!(
            status.message,
            r#"Apply failed with 1 conflict: conflict with "other": .spec.replicas"#
        );
        assert_eq!(server.revision().await, revision);
        assert_eq!(server.deployment("web").await["spec"]["replicas"], 5);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_applied_through_patch_status_is_an_entry_of_the_status_subresource() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let server = Server::on(etcd).await;
        let deployments = server.deployments();
        deployments
            .patch(
                "web",
                &PatchParams::apply("mgr").force(),
                &Patch::Apply(&config("web", json!({"app": "web"}), 3, "nginx:1")),
            )
            .await
            .expect("mgr creates the Deployment");
        let before = server.deployment("web").await;

        let status = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                            "status": {"observedGeneration": 1, "replicas": 3, "updatedReplicas": 2}});
        let params = PatchParams::apply("status-mgr").force();
        let applied = deployments
            .patch_status("web", &params, &Patch::Apply(&status))
            .await
            .expect("a status apply");
        let got = applied.status.as_ref().expect("a status");
        assert_eq!(
            (got.observed_generation, got.replicas, got.updated_replicas),
            (Some(1), Some(3), Some(2))
        );

        // Stored: the status, the spec as it was, and an entry of the status subresource.
        let stored = server.deployment("web").await;
        assert_eq!(stored["status"]["observedGeneration"], 1, "{stored}");
        assert_eq!(stored["status"]["replicas"], 3, "{stored}");
        assert_eq!(stored["status"]["updatedReplicas"], 2, "{stored}");
        assert_eq!(stored["spec"], before["spec"]);
        assert_eq!(stored["metadata"]["labels"], before["metadata"]["labels"]);
        assert_eq!(stored["metadata"]["generation"], before["metadata"]["generation"]);
        let entries = applied.managed_fields();
        assert_eq!(entries.len(), 2, "{entries:#?}");
        let status_entry = entry(entries, "status-mgr", "status");
        assert_eq!(status_entry.operation.as_deref(), Some("Apply"));
        assert_eq!(status_entry.api_version.as_deref(), Some("apps/v1"));
        let owned = fields(status_entry);
        assert_eq!(
            owned,
            json!({"f:status": {"f:observedGeneration": {}, "f:replicas": {}, "f:updatedReplicas": {}}}),
            "the status entry owns the status alone"
        );
        assert_eq!(
            fields(entry(entries, "mgr", "")),
            before["metadata"]["managedFields"][0]["fieldsV1"]
        );
        assert_eq!(stored["metadata"]["managedFields"], json!(entries));

        // The same status again writes nothing; a GET reads what was stored.
        let revision = server.revision().await;
        let again = deployments
            .patch_status("web", &params, &Patch::Apply(&status))
            .await
            .expect("an identical status apply");
        assert_eq!(again.resource_version(), applied.resource_version());
        assert_eq!(server.revision().await, revision);
        let read = deployments.get_status("web").await.expect("GET .../status");
        assert_eq!(read.status, applied.status);
        assert_eq!(read.managed_fields(), applied.managed_fields());

        // The status field is the status entry's: another manager conflicts with it, named
        // with its subresource.
        let other = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                           "status": {"replicas": 1}});
        let status = api_error(
            deployments
                .patch_status("web", &PatchParams::apply("other"), &Patch::Apply(&other))
                .await,
        );
        assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
        assert_eq!(
            status.message,
            r#"Apply failed with 1 conflict: conflict with "status-mgr" with subresource "status": .status.replicas"#
        );
        assert_eq!(server.revision().await, revision);
        assert_eq!(server.deployment("web").await["status"]["replicas"], 3);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_with_a_uid_to_a_missing_object_is_a_conflict_and_creates_nothing() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let server = Server::on(etcd).await;
        let mut with_uid = config("ghost", json!({"app": "ghost"}), 1, "nginx:1");
        with_uid["metadata"]["uid"] = json!("6d2c8f3e-0000-4000-8000-000000000001");
        let revision = server.revision().await;
        let status = api_error(
            server
                .deployments()
                .patch(
                    "ghost",
                    &PatchParams::apply("mgr").force(),
                    &Patch::Apply(&with_uid),
                )
                .await,
        );
        assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
        assert!(
            status
                .message
                .contains("6d2c8f3e-0000-4000-8000-000000000001"),
            "{status:?}"
        );
        assert_eq!(server.revision().await, revision);
        assert!(server.stored(&deployment_key("ghost")).await.is_none());
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// Refusals: raw requests, since kube-rs cannot send some of them.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_applies_write_nothing() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let server = Server::on(etcd).await;
        let port = server.port;
        let path = "/apis/apps/v1/namespaces/default/deployments/web";
        let apply = Some("application/apply-patch+yaml");
        let body = |value: &Value| serde_json::to_vec(value).unwrap();

        // A YAML configuration applies (kube-rs sends JSON, which is YAML too).
        let yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels:\n    app: web\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: c\n        image: nginx:1\n";
        let created = http_request(
            port,
            "PATCH",
            &format!("{path}?fieldManager=mgr"),
            apply,
            yaml.as_bytes(),
        )
        .await;
        assert_eq!(created.status, 201, "{created:?}");
        assert_eq!(
            created.json()["metadata"]["managedFields"][0]["manager"],
            "mgr"
        );
        let before = server.deployment("web").await;
        let revision = server.revision().await;
        let good = config("web", json!({"app": "web"}), 4, "nginx:2");

        let unnamed = http_request(port, "PATCH", path, apply, &body(&good)).await;
        assert_refused(
            "an apply without fieldManager",
            &unnamed,
            422,
            "Invalid",
            "fieldManager: Required value: is required for apply patch",
        );
        let merge_forced = http_request(
            port,
            "PATCH",
            &format!("{path}?fieldManager=mgr&force=true"),
            Some("application/merge-patch+json"),
            br#"{"spec": {"replicas": 4}}"#,
        )
        .await;
        assert_refused(
            "force on a merge patch",
            &merge_forced,
            422,
            "Invalid",
            "force: Forbidden: may not be specified for non-apply patch",
        );
        let mgr = format!("{path}?fieldManager=mgr&force=true");
        let mut stating = good.clone();
        stating["metadata"]["managedFields"] = json!([{"manager": "mgr", "operation": "Apply"}]);
        let stating = http_request(port, "PATCH", &mgr, apply, &body(&stating)).await;
        assert_refused(
            "a configuration with managedFields",
            &stating,
            400,
            "BadRequest",
            "metadata.managedFields must be nil",
        );
        let mut beta = good.clone();
        beta["apiVersion"] = json!("apps/v1beta1");
        let beta = http_request(port, "PATCH", &mgr, apply, &body(&beta)).await;
        assert_refused(
            "another apiVersion",
            &beta,
            400,
            "BadRequest",
            "Incorrect version specified in apply patch. Specified patch version: apps/v1beta1, expected: apps/v1",
        );
        let mut twice = good.clone();
        twice["spec"]["template"]["spec"]["containers"] =
            json!([{"name": "c", "image": "nginx:1"}, {"name": "c", "image": "nginx:2"}]);
        let duplicate = http_request(port, "PATCH", &mgr, apply, &body(&twice)).await;
        assert_refused("two containers named c", &duplicate, 422, "Invalid", DUPLICATE);
        // The same to a Deployment that does not exist: no create either.
        let ghost = "/apis/apps/v1/namespaces/default/deployments/ghost?fieldManager=mgr";
        let mut ghost_twice = twice.clone();
        ghost_twice["metadata"]["name"] = json!("ghost");
        let duplicate = http_request(port, "PATCH", ghost, apply, &body(&ghost_twice)).await;
        assert_refused("a new Deployment with two containers c", &duplicate, 422, "Invalid", DUPLICATE);
        let garbage = http_request(port, "PATCH", &mgr, apply, b"{\"spec\": [\n  - }").await;
        assert_refused("neither YAML nor JSON", &garbage, 400, "BadRequest", "not valid YAML");
        let scalar = http_request(port, "PATCH", &mgr, apply, b"just some words").await;
        assert_refused("a YAML scalar", &scalar, 400, "BadRequest", "must be an object");

        assert_eq!(server.revision().await, revision, "a refused request wrote");
        assert_eq!(server.deployment("web").await, before);
        assert!(server.stored(&deployment_key("ghost")).await.is_none());
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// A kube-runtime controller that applies a child per object.

/// What the reconciler shares: where it applies ConfigMaps, and how often it ran.
struct Context {
    configmaps: Api<ConfigMap>,
    reconciles: AtomicUsize,
}

const CM_MANAGER: &str = "cm-controller";

/// Applies ConfigMap `{deployment}`, owned by the Deployment (a controller reference) and
/// holding its replicas, with force: the controller's value wins over anyone's edit.
async fn reconcile(deployment: Arc<Deployment>, context: Arc<Context>) -> kube::Result<Action> {
    context.reconciles.fetch_add(1, Ordering::Relaxed);
    let name = deployment.name_any();
    let owner = deployment
        .controller_owner_ref(&())
        .expect("a served Deployment has a uid");
    let replicas = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let configmap = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "ownerReferences": [owner]},
        "data": {"replicas": replicas.to_string()},
    });
    context
        .configmaps
        .patch(
            &name,
            &PatchParams::apply(CM_MANAGER).force(),
            &Patch::Apply(&configmap),
        )
        .await?;
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Deployment>, error: &kube::Error, _: Arc<Context>) -> Action {
    eprintln!("reconcile failed: {error}");
    Action::requeue(Duration::from_millis(200))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kube_runtime_controller_applies_a_configmap_per_deployment() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let server = Server::on(etcd).await;
        let deployments = server.deployments();
        let configmaps = server.configmaps();
        let names = ["alpha", "beta", "gamma"];

        // One Deployment before the controller starts (its list), two after (its watch).
        let post = PostParams::default();
        let new = |name: &str, replicas: i64| -> Deployment {
            serde_json::from_value(config(name, json!({"app": name}), replicas, "nginx:1")).unwrap()
        };
        let mut uids = BTreeMap::new();
        let first = deployments.create(&post, &new(names[0], 1)).await.unwrap();
        uids.insert(names[0], first.uid().unwrap());
        let context = Arc::new(Context {
            configmaps: configmaps.clone(),
            reconciles: AtomicUsize::new(0),
        });
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let controller = tokio::spawn(
            Controller::new(deployments.clone(), watcher::Config::default())
                .owns(configmaps.clone(), watcher::Config::default())
                .graceful_shutdown_on(async {
                    let _ = stop_rx.await;
                })
                .run(reconcile, error_policy, Arc::clone(&context))
                .for_each(|_| async {}),
        );
        for (i, &name) in names.iter().enumerate().skip(1) {
            let replicas = i64::try_from(i).unwrap() + 1;
            let created = deployments
                .create(&post, &new(name, replicas))
                .await
                .unwrap();
            uids.insert(name, created.uid().unwrap());
        }

        // Each ConfigMap, in etcd, holds its Deployment's replicas and names it as owner.
        let holds = |name: &'static str, replicas: &'static str| {
            let server = &server;
            async move {
                server
                    .stored(&configmap_key(name))
                    .await
                    .is_some_and(|cm| cm["data"] == json!({"replicas": replicas}))
            }
        };
        for (i, &name) in names.iter().enumerate() {
            let replicas = ["1", "2", "3"][i];
            eventually(
                CONVERGE,
                &format!("ConfigMap {name} with replicas {replicas}"),
                || holds(name, replicas),
            )
            .await;
            let cm = server.stored(&configmap_key(name)).await.unwrap();
            let owners = &cm["metadata"]["ownerReferences"];
            assert_eq!(
                owners,
                &json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                         "uid": uids[name], "controller": true}]),
                "{cm}"
            );
            let entries = &cm["metadata"]["managedFields"];
            assert_eq!(entries.as_array().map(Vec::len), Some(1), "{cm}");
            assert_eq!(entries[0]["manager"], CM_MANAGER);
            assert_eq!(entries[0]["operation"], "Apply");
            assert_eq!(entries[0]["fieldsV1"]["f:data"], json!({"f:replicas": {}}));
        }

        // A change of replicas: its ConfigMap follows (the Deployment's watch).
        let scale = json!({"spec": {"replicas": 7}});
        deployments
            .patch("beta", &PatchParams::default(), &Patch::Merge(&scale))
            .await
            .unwrap();
        eventually(CONVERGE, "ConfigMap beta with replicas 7", || {
            holds("beta", "7")
        })
        .await;

        // Someone else edits a ConfigMap: the owned watch brings its Deployment back to
        // the reconciler, whose forced apply takes the field back.
        let editor = PatchParams {
            field_manager: Some("editor".to_string()),
            ..PatchParams::default()
        };
        let edit = json!({"data": {"replicas": "99"}});
        configmaps
            .patch("gamma", &editor, &Patch::Merge(&edit))
            .await
            .unwrap();
        eventually(CONVERGE, "ConfigMap gamma back at replicas 3", || {
            holds("gamma", "3")
        })
        .await;
        let cm = server.stored(&configmap_key("gamma")).await.unwrap();
        let entries = cm["metadata"]["managedFields"].as_array().cloned().unwrap();
        assert!(
            entries.iter().all(|e| e["manager"] != "editor"),
            "the editor lost its only field: {entries:#?}"
        );
        // The others never moved.
        assert!(holds("alpha", "1").await);
        assert!(holds("beta", "7").await);
        assert!(context.reconciles.load(Ordering::Relaxed) >= 5);

        stop_tx.send(()).unwrap();
        controller
            .await
            .expect("the controller stops on its shutdown signal");
    })
    .await;
}
