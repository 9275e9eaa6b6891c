//! The kinds the tools around a cluster keep their state in, served as kube-apiserver
//! serves them: ConfigMaps, Secrets, ServiceAccounts and Leases, driven by the real
//! kubectl (`create configmap|secret generic|serviceaccount`, `get`, `describe`, `edit`
//! through a patch, `delete`) and kube-rs (`Api<ConfigMap>`, `Api<Secret>`, `Api<Lease>`,
//! and a Lease taken and renewed by two contenders with resourceVersion preconditions),
//! each checked in etcd; bad input refused with one Status and nothing written; and a
//! deleted namespace emptied of them.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api as KubeApi, DeleteParams, PostParams};
use serde_json::{json, Value};

use crate::support::kcm::http_request;
use crate::support::kubectl::start_apiserver;
use crate::support::objects::current_revision;
use crate::support::{eventually, with_timeout};

const LIMIT: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_reads_edits_and_deletes_configmaps_secrets_and_serviceaccounts() {
    with_timeout(LIMIT, async {
        let Some(api) = start_apiserver().await else {
            return;
        };
        let kubectl = &api.kubectl;
        let out = kubectl
            .ok(&[
                "create",
                "configmap",
                "settings",
                "--from-literal=a=b",
                "--from-literal=c.d=e",
            ])
            .await;
        assert_eq!(out.trim(), "configmap/settings created");
        let stored = api
            .stored("/registry/configmaps/default/settings")
            .await
            .expect("stored");
        assert_eq!(stored["data"], json!({"a": "b", "c.d": "e"}));
        assert!(stored["metadata"]["uid"]
            .as_str()
            .is_some_and(|uid| !uid.is_empty()));

        let out = kubectl
            .ok(&[
                "create",
                "secret",
                "generic",
                "token",
                "--from-literal=password=s3cret",
            ])
            .await;
        assert_eq!(out.trim(), "secret/token created");
        let stored = api
            .stored("/registry/secrets/default/token")
            .await
            .expect("stored");
        assert_eq!(stored["data"]["password"], "czNjcmV0");
        assert_eq!(stored["type"], "Opaque");

        let out = kubectl.ok(&["create", "serviceaccount", "robot"]).await;
        assert_eq!(out.trim(), "serviceaccount/robot created");
        assert!(api
            .stored("/registry/serviceaccounts/default/robot")
            .await
            .is_some());

        // get: kubectl's columns, from the server's Table.
        let table = kubectl.table(&["get", "configmaps"]).await;
        assert_eq!(table.columns, ["NAME", "DATA", "AGE"]);
        assert_eq!(table.cell("settings", "DATA"), "2");
        let table = kubectl.table(&["get", "secrets"]).await;
        assert_eq!(table.columns, ["NAME", "TYPE", "DATA", "AGE"]);
        assert_eq!(table.cell("token", "TYPE"), "Opaque");
        let table = kubectl.table(&["get", "sa"]).await;
        assert_eq!(table.columns, ["NAME", "SECRETS", "AGE"]);
        assert_eq!(table.cell("robot", "SECRETS"), "0");
        let yaml = kubectl.ok(&["get", "cm", "settings", "-o", "yaml"]).await;
        assert!(
            yaml.contains("kind: ConfigMap") && yaml.contains("c.d: e"),
            "{yaml}"
        );
        let described = kubectl.ok(&["describe", "secret", "token"]).await;
        assert!(described.contains("password:  6 bytes"), "{described}");

        // A strategic merge patch (what `kubectl edit` and `patch` send).
        kubectl
            .ok(&[
                "patch",
                "configmap",
                "settings",
                "-p",
                r#"{"data":{"a":"z"}}"#,
            ])
            .await;
        let stored = api
            .stored("/registry/configmaps/default/settings")
            .await
            .unwrap();
        assert_eq!(stored["data"], json!({"a": "z", "c.d": "e"}));
        // stringData on an update lands in data, base64.
        kubectl
            .ok(&[
                "patch",
                "secret",
                "token",
                "--type=merge",
                "-p",
                r#"{"stringData":{"user":"me"}}"#,
            ])
            .await;
        let stored = api.stored("/registry/secrets/default/token").await.unwrap();
        assert_eq!(stored["data"]["user"], "bWU=");
        assert!(stored.get("stringData").is_none(), "{stored}");

        for (kind, name, key) in [
            (
                "configmap",
                "settings",
                "/registry/configmaps/default/settings",
            ),
            ("secret", "token", "/registry/secrets/default/token"),
            (
                "serviceaccount",
                "robot",
                "/registry/serviceaccounts/default/robot",
            ),
        ] {
            let out = kubectl.ok(&["delete", kind, name]).await;
            assert_eq!(out.trim(), format!("{kind} \"{name}\" deleted"));
            assert!(api.stored(key).await.is_none(), "{key} still stored");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_configmaps_secrets_and_leases_get_one_status_and_nothing_is_written() {
    with_timeout(LIMIT, async {
        let Some(api) = start_apiserver().await else {
            return;
        };
        let port = api.port;
        let client = api.etcd.client().await;
        let before = current_revision(&client).await;
        let post = |path: &'static str, body: Value| async move {
            let response =
                http_request(port, "POST", path, None, body.to_string().as_bytes()).await;
            (response.status, response.json())
        };
        let (status, body) = post(
            "/api/v1/namespaces/default/secrets",
            json!({"metadata": {"name": "s"}, "data": {"a": "not base64!"}}),
        )
        .await;
        assert_eq!(status, 400, "{body}");
        assert!(body["message"].as_str().unwrap().contains("data[a]"), "{body}");

        let big = "x".repeat(1024 * 1024 + 1);
        let (status, body) = post(
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": "big"}, "data": {"a": big}}),
        )
        .await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["reason"], "Invalid");
        assert_eq!(
            body["message"],
            "ConfigMap \"big\" is invalid: data: Too long: may not be more than 1048576 bytes"
        );

        let (status, body) = post(
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            json!({"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": -5}}),
        )
        .await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(
            body["message"],
            "Lease.coordination.k8s.io \"l\" is invalid: spec.leaseDurationSeconds: Invalid value: -5: must be greater than 0"
        );
        assert_eq!(current_revision(&client).await, before, "nothing written");

        // Unknown fields, from the served schema: refused under Strict (what kubectl
        // sends), a warning under Warn.
        let typo = json!({"metadata": {"name": "typo"}, "datta": {"a": "b"}, "data": {"a": "b"}});
        let strict = http_request(
            port,
            "POST",
            "/api/v1/namespaces/default/configmaps?fieldValidation=Strict",
            None,
            typo.to_string().as_bytes(),
        )
        .await;
        assert_eq!(strict.status, 400, "{strict:?}");
        assert_eq!(
            strict.json()["message"],
            "strict decoding error: unknown field \"datta\""
        );
        assert_eq!(current_revision(&client).await, before, "nothing written");
        let warned = http_request(
            port,
            "POST",
            "/apis/coordination.k8s.io/v1/namespaces/default/leases?fieldValidation=Warn",
            None,
            br#"{"metadata":{"name":"warned"},"spec":{"holder":"x"}}"#,
        )
        .await;
        assert_eq!(warned.status, 201, "{warned:?}");
        assert!(
            warned.head.contains(r#"299 - "unknown field \"spec.holder\"""#),
            "{}",
            warned.head
        );

        // An immutable ConfigMap keeps its data.
        let (status, _) = post(
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": "frozen"}, "data": {"a": "1"}, "immutable": true}),
        )
        .await;
        assert_eq!(status, 201);
        let written = current_revision(&client).await;
        let response = http_request(
            port,
            "PATCH",
            "/api/v1/namespaces/default/configmaps/frozen",
            Some("application/merge-patch+json"),
            br#"{"data":{"a":"2"}}"#,
        )
        .await;
        assert_eq!(response.status, 422, "{response:?}");
        assert_eq!(
            response.json()["message"],
            "ConfigMap \"frozen\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
        );
        assert_eq!(current_revision(&client).await, written, "nothing written");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_writes_configmaps_and_secrets_and_two_contenders_share_one_lease() {
    with_timeout(LIMIT, async {
        let Some(api) = start_apiserver().await else {
            return;
        };
        let client = api.kube_client();
        let maps: KubeApi<ConfigMap> = KubeApi::namespaced(client.clone(), "default");
        let mut map = ConfigMap::default();
        map.metadata.name = Some("m".into());
        map.data = Some([("k".to_string(), "v".to_string())].into());
        let created = maps
            .create(&PostParams::default(), &map)
            .await
            .expect("create");
        assert!(created.metadata.resource_version.is_some());
        assert_eq!(maps.get("m").await.unwrap().data, map.data);
        let listed = maps.list(&Default::default()).await.unwrap();
        assert_eq!(listed.items.len(), 1);

        let secrets: KubeApi<Secret> = KubeApi::namespaced(client.clone(), "default");
        let mut secret = Secret::default();
        secret.metadata.name = Some("s".into());
        secret.string_data = Some([("k".to_string(), "v".to_string())].into());
        let created = secrets
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
        let data = created.data.expect("stringData became data");
        assert_eq!(data["k"].0, b"v");
        assert_eq!(created.type_.as_deref(), Some("Opaque"));
        secrets.delete("s", &DeleteParams::default()).await.unwrap();
        assert!(api.stored("/registry/secrets/default/s").await.is_none());

        // Two contenders for one Lease, as client-go's LeaseLock: read, then take or
        // renew by a PUT carrying the resourceVersion read. Only one holds it at a time:
        // every accepted write is from the holder or takes over an expired lease, and
        // every other one is a 409.
        let leases: KubeApi<Lease> = KubeApi::namespaced(client.clone(), "default");
        let mut lease = Lease::default();
        lease.metadata.name = Some("leader".into());
        leases.create(&PostParams::default(), &lease).await.unwrap();
        let contend = |who: &'static str| {
            let leases = leases.clone();
            async move {
                let (mut won, mut refused) = (0, 0);
                for _ in 0..40 {
                    let mut current = leases.get("leader").await.unwrap();
                    let spec = current.spec.get_or_insert_with(Default::default);
                    let holder = spec.holder_identity.clone();
                    if holder.as_deref().is_some_and(|h| h != who) {
                        // Held by the other: it is never taken while held.
                        continue;
                    }
                    spec.holder_identity = Some(who.to_string());
                    spec.lease_duration_seconds = Some(15);
                    match leases
                        .replace("leader", &PostParams::default(), &current)
                        .await
                    {
                        Ok(_) => won += 1,
                        Err(kube::Error::Api(status)) if status.code == 409 => refused += 1,
                        Err(e) => panic!("{who}: {e}"),
                    }
                }
                (won, refused)
            }
        };
        let ((a_won, _), (b_won, _)) = tokio::join!(contend("a"), contend("b"));
        let holder = leases
            .get("leader")
            .await
            .unwrap()
            .spec
            .unwrap()
            .holder_identity
            .unwrap();
        // The first to take it kept it: the other never wrote.
        let (holder_won, other_won) = if holder == "a" {
            (a_won, b_won)
        } else {
            (b_won, a_won)
        };
        assert!(holder_won >= 1, "the holder renewed");
        assert_eq!(
            other_won, 0,
            "the other contender never held the lease ({holder} holds it)"
        );
        let bad = leases.get("leader").await.unwrap();
        let mut stale = bad.clone();
        stale.metadata.resource_version = Some("1".into());
        match leases
            .replace("leader", &PostParams::default(), &stale)
            .await
        {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 409),
            other => panic!("a stale resourceVersion must be 409: {other:?}"),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_namespace_loses_its_configmaps_secrets_serviceaccounts_and_leases() {
    with_timeout(LIMIT, async {
        let Some(api) = crate::support::kubectl::start_up(0).await else {
            return;
        };
        let kubectl = &api.kubectl;
        kubectl.ok(&["create", "namespace", "team"]).await;
        kubectl.ok(&["-n", "team", "create", "configmap", "c", "--from-literal=a=b"]).await;
        kubectl.ok(&["-n", "team", "create", "secret", "generic", "s", "--from-literal=a=b"]).await;
        kubectl.ok(&["-n", "team", "create", "serviceaccount", "sa"]).await;
        let lease = api.manifest(
            "lease.yaml",
            "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: l\n  namespace: team\nspec:\n  holderIdentity: me\n  leaseDurationSeconds: 10\n",
        );
        kubectl.ok(&["create", "-f", &lease]).await;
        let table = kubectl.table(&["-n", "team", "get", "leases"]).await;
        assert_eq!(table.cell("l", "HOLDER"), "me");
        kubectl.ok(&["delete", "namespace", "team", "--wait=false"]).await;
        let api = &api;
        eventually(Duration::from_secs(60), "the namespace's documents to go", || async move {
            let mut left = 0;
            for dir in ["configmaps", "secrets", "serviceaccounts", "leases"] {
                left += api.count(&format!("/registry/{dir}/team/")).await;
            }
            left == 0 && api.stored("/registry/namespaces/team").await.is_none()
        })
        .await;
    })
    .await;
}

/// The lease of `key` and its remaining time to live (`None`: the key is on no lease).
async fn lease_of(api: &crate::support::kubectl::Api, key: &str) -> Option<(i64, i64)> {
    let mut client = api.etcd.client().await;
    let response = client.get(key, None).await.expect("etcd get");
    let lease = response.kvs().first().expect("the key exists").lease();
    if lease == 0 {
        return None;
    }
    let ttl = client
        .lease_time_to_live(lease, None)
        .await
        .expect("lease time to live")
        .ttl();
    Some((lease, ttl))
}

/// Events written through the API expire as kube-apiserver's (`--event-ttl`, an hour): a
/// created Event is stored on an etcd lease of about an hour, and a patch (a recorder
/// counting it again) keeps it on one; a ConfigMap is on none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_written_through_the_api_expire_an_hour_after_their_last_write() {
    with_timeout(LIMIT, async {
        let Some(api) = start_apiserver().await else {
            return;
        };
        let event = api.manifest(
            "event.yaml",
            "apiVersion: v1
kind: Event
metadata:
  name: web.1
  namespace: default
involvedObject:
  kind: Pod
  name: web
  namespace: default
reason: Started
message: started
type: Normal
count: 1
source:
  component: test
",
        );
        api.kubectl.ok(&["create", "-f", &event]).await;
        const KEY: &str = "/registry/events/default/web.1";
        let (lease, ttl) = lease_of(&api, KEY).await.expect("the event is on a lease");
        assert!((3_500..=3_660).contains(&ttl), "ttl {ttl}");
        api.kubectl
            .ok(&[
                "patch",
                "event",
                "web.1",
                "--type=merge",
                "-p",
                r#"{"count":2}"#,
            ])
            .await;
        assert_eq!(api.stored(KEY).await.expect("the event")["count"], 2);
        let (again, ttl) = lease_of(&api, KEY).await.expect("still on a lease");
        assert_eq!(again, lease, "within the minute a lease is shared");
        assert!((3_500..=3_660).contains(&ttl), "ttl {ttl}");
        api.kubectl
            .ok(&["create", "configmap", "plain", "--from-literal=a=b"])
            .await;
        assert_eq!(
            lease_of(&api, "/registry/configmaps/default/plain").await,
            None
        );
    })
    .await;
}
