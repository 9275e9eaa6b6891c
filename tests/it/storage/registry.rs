//! Integration tests of the typed etcd registry (`kcm::registry`) against a real etcd: the
//! resourceVersion contract, compare-and-swap writes, paginated lists, decode errors and the
//! preservation of fields kcm does not model.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, GetOptions, KeyValue, Txn, TxnOp};
use futures::{StreamExt, TryStreamExt};
use kcm::api::{
    self, Container, Object, ObjectMeta, Pod, PodSpec, PodTemplateSpec, ReplicationController,
    ReplicationControllerSpec, ResourceVersion, Service, ServiceSpec,
};
use kcm::labels::{Selector, Set};
use kcm::registry::{Incarnation, KeyCondition, Registry, StorageError};
use serde_json::{json, Value};
use tokio::sync::Barrier;
use tokio::task::JoinSet;
use tracing::instrument::WithSubscriber;

use crate::support::objects::current_revision;
use crate::support::{init_tracing, start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(120);
const PREFIX: &str = "/registry";

fn registry(client: &Client) -> Registry {
    Registry::new(client, PREFIX).expect("registry over /registry")
}

fn label_set(labels: &[(&str, &str)]) -> Set {
    labels.iter().copied().collect()
}

fn pod(namespace: &str, name: &str, labels: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            labels: label_set(labels),
            ..ObjectMeta::named(namespace, name)
        },
        spec: PodSpec {
            containers: vec![Container {
                name: "web".into(),
                image: "nginx".into(),
                ..Container::default()
            }],
            ..PodSpec::default()
        },
        ..Pod::default()
    }
}

fn controller(namespace: &str, name: &str, labels: &[(&str, &str)]) -> ReplicationController {
    ReplicationController {
        metadata: ObjectMeta {
            labels: label_set(labels),
            ..ObjectMeta::named(namespace, name)
        },
        spec: ReplicationControllerSpec {
            replicas: 2,
            selector: label_set(labels),
            template: Some(PodTemplateSpec {
                metadata: ObjectMeta {
                    labels: label_set(labels),
                    ..ObjectMeta::default()
                },
                spec: pod(namespace, name, labels).spec,
                ..PodTemplateSpec::default()
            }),
            ..ReplicationControllerSpec::default()
        },
        ..ReplicationController::default()
    }
}

fn service(namespace: &str, name: &str) -> Service {
    Service {
        metadata: ObjectMeta::named(namespace, name),
        spec: ServiceSpec {
            selector: label_set(&[("app", "web")]),
            port: 80,
            ..ServiceSpec::default()
        },
        ..Service::default()
    }
}

fn selector(text: &str) -> Selector {
    text.parse()
        .unwrap_or_else(|err| panic!("parse selector {text:?}: {err}"))
}

/// The key-value stored at `key`, read with a plain etcd-client get.
async fn stored(client: &Client, key: &str) -> Option<KeyValue> {
    client
        .clone()
        .get(key, None)
        .await
        .unwrap_or_else(|err| panic!("raw get {key}: {err}"))
        .kvs()
        .first()
        .cloned()
}

/// The `mod_revision` of `key` as a resourceVersion; panics if the key is absent.
async fn stored_version(client: &Client, key: &str) -> ResourceVersion {
    let kv = stored(client, key)
        .await
        .unwrap_or_else(|| panic!("{key} should exist"));
    ResourceVersion(kv.mod_revision())
}

async fn raw_put(client: &Client, key: &str, value: impl Into<Vec<u8>>) {
    client
        .clone()
        .put(key, value, None)
        .await
        .unwrap_or_else(|err| panic!("raw put {key}: {err}"));
}

/// `namespace/name` of every object, in order.
fn keys<T: Object>(objects: &[T]) -> Vec<String> {
    objects.iter().map(|o| o.metadata().key()).collect()
}

/// Asserts `result` is the given kind of error; returns it for further checks.
#[track_caller]
fn expect_err<T: std::fmt::Debug>(
    result: Result<T, StorageError>,
    what: &str,
    is_kind: impl FnOnce(&StorageError) -> bool,
) -> StorageError {
    match result {
        Err(err) if is_kind(&err) => err,
        other => panic!("expected {what}, got {other:?}"),
    }
}

/// Create, get, list (by namespace and by selector), update and delete of one kind, checking
/// every resourceVersion against etcd.
async fn check_round_trip<T: Object + PartialEq>(
    client: &Client,
    registry: &Registry,
    make: impl Fn(&str, &str, &[(&str, &str)]) -> T,
) {
    let web = [("app", "web")];
    let db = [("app", "db")];
    let mut created = Vec::new();
    // Namespace `ab` shares the prefix `a`: a list of `a` must range over `a/` only.
    for (namespace, name, labels) in [
        ("a", "db-1", &db[..]),
        ("a", "web-1", &web[..]),
        ("ab", "web-2", &web[..]),
    ] {
        let object = registry
            .create(&make(namespace, name, labels))
            .await
            .unwrap_or_else(|err| panic!("create {} {namespace}/{name}: {err}", T::KIND));
        let key = registry.key::<T>(namespace, name);
        assert_eq!(
            object.metadata().resource_version,
            Some(stored_version(client, &key).await),
            "create of {key} returns the key's mod_revision"
        );
        assert!(!object.metadata().uid.is_empty(), "create fills uid");
        assert!(
            object.metadata().creation_timestamp.is_some(),
            "create fills creationTimestamp"
        );
        let got: T = registry.get(namespace, name).await.expect("get created");
        assert_eq!(got, object, "get returns what create returned");
        created.push(object);
    }

    let everything = Selector::everything();
    let in_a = registry
        .list::<T>(Some("a"), &everything)
        .await
        .expect("list a");
    assert_eq!(in_a.items, created[..2], "namespace a (not ab)");
    assert!(in_a.errors.is_empty(), "{:?}", in_a.errors);
    assert_eq!(
        in_a.resource_version.0,
        current_revision(client).await,
        "list resourceVersion is the header revision"
    );
    let in_ab = registry.list::<T>(Some("ab"), &everything).await.unwrap();
    assert_eq!(in_ab.items, created[2..]);
    let all = registry.list::<T>(None, &everything).await.unwrap();
    assert_eq!(all.items, created);

    let web_selector = selector("app=web");
    let web_in_a = registry.list::<T>(Some("a"), &web_selector).await.unwrap();
    assert_eq!(keys(&web_in_a.items), ["a/web-1"]);
    let web_all = registry.list::<T>(None, &web_selector).await.unwrap();
    assert_eq!(keys(&web_all.items), ["a/web-1", "ab/web-2"]);
    let none = registry
        .list::<T>(None, &selector("app=web,tier=front"))
        .await
        .unwrap();
    assert_eq!(keys(&none.items), Vec::<String>::new());

    let mut changed: T = registry.get("a", "web-1").await.unwrap();
    let before = changed.metadata().resource_version.unwrap();
    changed.metadata_mut().labels.insert("tier", "front");
    let updated = registry.update(&changed).await.expect("update web-1");
    let key = registry.key::<T>("a", "web-1");
    let after = updated.metadata().resource_version.unwrap();
    assert_eq!(after, stored_version(client, &key).await);
    assert!(after > before, "{after} > {before}");
    assert_eq!(registry.get::<T>("a", "web-1").await.unwrap(), updated);
    let front = registry
        .list::<T>(Some("a"), &selector("app=web,tier=front"))
        .await
        .unwrap();
    assert_eq!(front.items, [updated]);

    let deleted_at = registry
        .delete::<T>("a", "web-1", Some(after))
        .await
        .expect("delete at the current version");
    assert_eq!(deleted_at.0, current_revision(client).await);
    assert!(stored(client, &key).await.is_none(), "{key} deleted");
    expect_err(registry.get::<T>("a", "web-1").await, "NotFound", |e| {
        e.is_not_found()
    });

    registry
        .delete::<T>("a", "db-1", None)
        .await
        .expect("unconditional delete");
    let left = registry.list::<T>(None, &everything).await.unwrap();
    assert_eq!(keys(&left.items), ["ab/web-2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip_keeps_resource_version_equal_to_mod_revision() {
    init_tracing();
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let registry = registry(&client);
        check_round_trip(&client, &registry, pod).await;
        check_round_trip(&client, &registry, controller).await;
        // Each kind lists only its own directory.
        let pods = registry
            .list::<Pod>(None, &Selector::everything())
            .await
            .unwrap();
        assert_eq!(keys(&pods.items), ["ab/web-2"]);
        assert!(pods.errors.is_empty(), "{:?}", pods.errors);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_writes_conflict_and_missing_keys_are_not_found() {
    init_tracing();
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let registry = registry(&client);
        let key = registry.key::<Pod>("default", "web");
        let v1_pod = registry.create(&pod("default", "web", &[])).await.unwrap();
        let v1 = v1_pod.metadata.resource_version.unwrap();
        let mut fresh = v1_pod.clone();
        fresh.metadata.labels.insert("app", "web");
        let v2 = registry
            .update(&fresh)
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap();
        let at_v2 = stored(&client, &key).await.unwrap();

        let mut stale = v1_pod.clone();
        stale.metadata.labels.insert("app", "stale");
        let err = expect_err(registry.update(&stale).await, "Conflict", |e| {
            matches!(e, StorageError::Conflict { .. })
        });
        let StorageError::Conflict {
            key: conflict_key,
            expected,
            actual,
        } = err
        else {
            unreachable!()
        };
        assert_eq!(conflict_key, key);
        assert_eq!((expected, actual), (v1, Some(v2)));
        let after = stored(&client, &key).await.unwrap();
        assert_eq!(after.value(), at_v2.value(), "stale update wrote nothing");
        assert_eq!(after.mod_revision(), v2.0);

        let err = expect_err(
            registry.delete::<Pod>("default", "web", Some(v1)).await,
            "Conflict",
            |e| matches!(e, StorageError::Conflict { .. }),
        );
        let StorageError::Conflict {
            expected, actual, ..
        } = err
        else {
            unreachable!()
        };
        assert_eq!((expected, actual), (v1, Some(v2)));
        assert_eq!(
            stored(&client, &key).await.map(|kv| kv.mod_revision()),
            Some(v2.0),
            "stale delete deleted nothing"
        );

        // Missing keys, with and without a precondition.
        for precondition in [None, Some(v2)] {
            let err = expect_err(
                registry
                    .delete::<Pod>("default", "missing", precondition)
                    .await,
                "NotFound",
                StorageError::is_not_found,
            );
            assert!(
                matches!(&err, StorageError::NotFound { key } if key.ends_with("/pods/default/missing")),
                "{err:?}"
            );
        }
        expect_err(
            registry.get::<Pod>("default", "missing").await,
            "NotFound",
            StorageError::is_not_found,
        );

        // An update needs the version it was read at.
        let mut unversioned = fresh.clone();
        unversioned.metadata.resource_version = None;
        unversioned.metadata.labels.insert("app", "unversioned");
        expect_err(registry.update(&unversioned).await, "BadRequest", |e| {
            matches!(e, StorageError::BadRequest { op: "update", .. })
        });
        assert_eq!(stored_version(&client, &key).await, v2, "nothing written");

        // An update of an object deleted since it was read is a conflict with no current
        // version, and does not bring it back.
        registry
            .delete::<Pod>("default", "web", Some(v2))
            .await
            .unwrap();
        let mut deleted = fresh.clone();
        deleted.metadata.resource_version = Some(v2);
        let err = expect_err(registry.update(&deleted).await, "Conflict", |e| {
            matches!(e, StorageError::Conflict { actual: None, .. })
        });
        assert!(err.to_string().contains("deleted"), "{err}");
        assert!(stored(&client, &key).await.is_none(), "update recreated it");

        // resourceVersion 0 is no revision etcd ever had (a missing key's mod_revision is 0 in
        // a compare): it must not turn an update into a create or a delete into a no-op.
        let mut never_stored = pod("default", "ghost", &[]);
        never_stored.metadata.resource_version = Some(ResourceVersion(0));
        let ghost_key = registry.key::<Pod>("default", "ghost");
        expect_err(registry.update(&never_stored).await, "Conflict", |e| {
            matches!(e, StorageError::Conflict { actual: None, .. })
        });
        assert!(
            stored(&client, &ghost_key).await.is_none(),
            "update at resourceVersion 0 created the object"
        );
        expect_err(
            registry
                .delete::<Pod>("default", "ghost", Some(ResourceVersion(0)))
                .await,
            "NotFound",
            StorageError::is_not_found,
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_never_overwrites() {
    init_tracing();
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let registry = registry(&client);
        let key = registry.key::<Pod>("default", "web");
        registry
            .create(&pod("default", "web", &[("app", "web")]))
            .await
            .unwrap();
        let before = stored(&client, &key).await.unwrap();

        let err = expect_err(
            registry
                .create(&pod("default", "web", &[("app", "other")]))
                .await,
            "AlreadyExists",
            |e| matches!(e, StorageError::AlreadyExists { .. }),
        );
        assert!(
            matches!(&err, StorageError::AlreadyExists { key: k } if *k == key),
            "{err:?}"
        );
        let after = stored(&client, &key).await.unwrap();
        assert_eq!(after.value_str().unwrap(), before.value_str().unwrap());
        assert_eq!(after.mod_revision(), before.mod_revision());

        let mut versioned = pod("default", "versioned", &[]);
        versioned.metadata.resource_version = Some(ResourceVersion(before.mod_revision()));
        expect_err(registry.create(&versioned).await, "BadRequest", |e| {
            matches!(e, StorageError::BadRequest { op: "create", .. })
        });
        assert!(
            stored(&client, &registry.key::<Pod>("default", "versioned"))
                .await
                .is_none(),
            "a refused create wrote nothing"
        );
    })
    .await;
}

/// 2014's `MakeEtcdItemKey` refused an empty namespace or name on every operation, not
/// only on create: get, update, guaranteed update and delete of `/web` (no namespace) are
/// `BadRequest` naming the operation, even with a value stored at the key they would use,
/// which is neither read nor changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_refuses_an_object_without_a_namespace_or_name() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let registry = registry(&client);
        let key = registry.key::<Pod>("", "web");
        assert_eq!(key, "/registry/pods//web");
        let mut raw = serde_json::to_value(pod("", "web", &[])).unwrap();
        raw["metadata"]["namespace"] = json!("");
        client
            .clone()
            .put(key.as_str(), raw.to_string(), None)
            .await
            .unwrap();
        let before = stored(&client, &key).await.unwrap().mod_revision();

        #[track_caller]
        fn refused<T: std::fmt::Debug>(result: Result<T, StorageError>, op: &str) {
            let err = expect_err(
                result,
                "BadRequest",
                |e| matches!(e, StorageError::BadRequest { op: o, .. } if *o == op),
            );
            assert!(
                err.to_string()
                    .contains("metadata.name and metadata.namespace are required"),
                "{err}"
            );
        }
        refused(registry.get::<Pod>("", "web").await, "get");
        refused(registry.get::<Pod>("default", "").await, "get");
        let mut versioned = pod("", "web", &[]);
        versioned.metadata.resource_version = Some(ResourceVersion(before));
        refused(registry.update(&versioned).await, "update");
        refused(
            registry.guaranteed_update::<Pod, _>("", "web", Ok).await,
            "update",
        );
        refused(registry.delete::<Pod>("", "web", None).await, "delete");
        refused(registry.create(&pod("", "other", &[])).await, "create");
        assert_eq!(
            stored(&client, &key).await.unwrap().mod_revision(),
            before,
            "nothing was written"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_guarded_by_an_incarnation_commit_only_while_it_lives() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let registry = registry(&client);
        let owner = registry
            .create(&controller("default", "web", &[("app", "web")]))
            .await
            .unwrap();
        // Known by its create revision (as read from etcd): one compare.
        let incarnation = registry.incarnation(&owner).unwrap();
        assert_eq!(incarnation.created, Some(incarnation.read_at));
        let guarded = registry.guarded_by(incarnation.clone());
        // Known only by the revision it was read at: two compares, the same answers.
        let read_only = registry.guarded_by(Incarnation {
            created: None,
            ..incarnation
        });
        let owner_gone = |e: &StorageError| matches!(e, StorageError::OwnerGone { .. });

        // The owner's own later versions are the same incarnation.
        let mut resized = owner.clone();
        resized.spec.replicas = 5;
        let resized = registry.update(&resized).await.unwrap();
        let first = guarded.create(&pod("default", "a", &[])).await.unwrap();
        let second = read_only.create(&pod("default", "a2", &[])).await.unwrap();
        // A refusal for another reason is still that reason.
        expect_err(
            guarded.create(&pod("default", "a", &[])).await,
            "AlreadyExists",
            |e| matches!(e, StorageError::AlreadyExists { .. }),
        );
        let stale = first
            .metadata
            .resource_version
            .map(|rv| ResourceVersion(rv.0 - 1));
        expect_err(
            guarded.delete::<Pod>("default", "a", stale).await,
            "Conflict",
            |e| matches!(e, StorageError::Conflict { .. }),
        );

        // Deleted: nothing more commits on its behalf, not a create, not a delete.
        registry
            .delete::<ReplicationController>("default", "web", resized.metadata.resource_version)
            .await
            .unwrap();
        for guarded in [&guarded, &read_only] {
            let err = expect_err(
                guarded.create(&pod("default", "b", &[])).await,
                "OwnerGone",
                owner_gone,
            );
            assert_eq!(
                err.to_string(),
                "create /registry/pods/default/b: refused, /registry/controllers/default/web \
                 was deleted since it was read"
            );
        }
        expect_err(
            read_only
                .delete::<Pod>("default", "a2", second.metadata.resource_version)
                .await,
            "OwnerGone",
            owner_gone,
        );
        expect_err(
            guarded
                .delete::<Pod>("default", "a", first.metadata.resource_version)
                .await,
            "OwnerGone",
            owner_gone,
        );

        // Re-created under the same name, even with the very same document: a new
        // incarnation, so still refused.
        let mut again = owner.clone();
        again.metadata.resource_version = None;
        registry.create(&again).await.unwrap();
        for guarded in [&guarded, &read_only] {
            expect_err(
                guarded.create(&pod("default", "b", &[])).await,
                "OwnerGone",
                owner_gone,
            );
        }
        assert!(stored(&client, &registry.key::<Pod>("default", "b"))
            .await
            .is_none());
        assert!(stored(&client, &registry.key::<Pod>("default", "a"))
            .await
            .is_some());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_guaranteed_updates_lose_nothing() {
    init_tracing();
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let registry = registry(&client);
        let key = registry.key::<Service>("default", "frontend");
        let created = registry
            .create(&service("default", "frontend"))
            .await
            .unwrap();
        let created_at = created.metadata.resource_version.unwrap();

        const WRITERS: usize = 20;
        let start = Arc::new(Barrier::new(WRITERS));
        let attempts = Arc::new(AtomicUsize::new(0));
        let mut writers = JoinSet::new();
        for i in 0..WRITERS {
            let registry = registry.clone();
            let start = start.clone();
            let attempts = attempts.clone();
            writers.spawn(async move {
                start.wait().await;
                let label = format!("l{i}");
                let stored = registry
                    .guaranteed_update("default", "frontend", |mut service: Service| {
                        attempts.fetch_add(1, Ordering::Relaxed);
                        service.spec.selector.insert(label.clone(), "x");
                        Ok(service)
                    })
                    .await
                    .unwrap_or_else(|err| panic!("guaranteed_update adding {label}: {err}"));
                assert_eq!(stored.spec.selector.get(&label), Some("x"), "{label}");
            });
        }
        while let Some(joined) = writers.join_next().await {
            joined.expect("writer task");
        }
        tracing::info!(
            attempts = attempts.load(Ordering::Relaxed),
            "guaranteed_update attempts"
        );

        let last: Service = registry.get("default", "frontend").await.unwrap();
        let mut expected: Set = (0..WRITERS).map(|i| (format!("l{i}"), "x")).collect();
        expected.insert("app", "web");
        assert_eq!(last.spec.selector, expected);
        // Exactly one write per writer: nothing lost, nothing written twice.
        let last_at = last.metadata.resource_version.unwrap();
        assert_eq!(last_at.0, created_at.0 + WRITERS as i64);
        assert_eq!(last_at, stored_version(&client, &key).await);

        // An update that changes nothing (or only the resourceVersion) writes nothing.
        let revision = current_revision(&client).await;
        let unchanged = registry
            .guaranteed_update("default", "frontend", |service: Service| Ok(service))
            .await
            .unwrap();
        assert_eq!(unchanged, last);
        let same_label = registry
            .guaranteed_update("default", "frontend", |mut service: Service| {
                service.spec.selector.insert("app", "web");
                service.metadata.resource_version = Some(ResourceVersion(1));
                Ok(service)
            })
            .await
            .unwrap();
        assert_eq!(same_label, last);
        assert_eq!(stored_version(&client, &key).await, last_at);
        assert_eq!(current_revision(&client).await, revision, "nothing written");

        // A failing closure writes nothing and says so.
        let err = expect_err(
            registry
                .guaranteed_update("default", "frontend", |_: Service| {
                    anyhow::bail!("refusing")
                })
                .await,
            "Update",
            |e| matches!(e, StorageError::Update { .. }),
        );
        assert!(err.to_string().contains("refusing"), "{err}");
        assert_eq!(current_revision(&client).await, revision, "nothing written");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_lists_are_complete_paged_or_not() {
    init_tracing();
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let registry = registry(&client);
        const PODS: usize = 5_000;
        // etcd's default --max-txn-ops is 128.
        const PUTS_PER_TXN: usize = 100;
        let padding = "x".repeat(900);
        let pods: Vec<(String, Vec<u8>)> = (0..PODS)
            .map(|i| {
                let mut pod = pod("default", &format!("pod-{i:04}"), &[("app", "web")]);
                pod.metadata
                    .annotations
                    .insert("padding".into(), padding.clone());
                (
                    registry.key::<Pod>("default", &pod.metadata.name),
                    api::encode(&pod).unwrap(),
                )
            })
            .collect();
        let total_bytes: usize = pods.iter().map(|(_, value)| value.len()).sum();
        assert!(
            total_bytes > 4 * 1024 * 1024,
            "{total_bytes} bytes should exceed etcd-client's default 4 MiB receive limit"
        );
        futures::stream::iter(pods.chunks(PUTS_PER_TXN))
            .map(|chunk| {
                let mut kv = client.kv_client();
                let puts: Vec<TxnOp> = chunk
                    .iter()
                    .map(|(key, value)| TxnOp::put(key.as_str(), value.clone(), None))
                    .collect();
                async move { kv.txn(Txn::new().and_then(puts)).await }
            })
            .buffer_unordered(16)
            .try_collect::<Vec<_>>()
            .await
            .expect("write the pods");
        let expected_names: Vec<String> = (0..PODS).map(|i| format!("pod-{i:04}")).collect();
        let names = |pods: &[Pod]| -> Vec<String> {
            pods.iter().map(|pod| pod.metadata.name.clone()).collect()
        };
        let pods_dir = api::list_key::<Pod>(PREFIX, Some("default"));
        let everything = Selector::everything();

        let paged = registry.clone().with_page_size(1000);
        let mut pages = Vec::new();
        paged
            .for_each_page(&pods_dir, None, |page| pages.push(page.len()))
            .await
            .expect("paged read");
        assert_eq!(pages, [1000; 5]);
        let paged_list = paged
            .list::<Pod>(Some("default"), &everything)
            .await
            .expect("paged list");
        assert_eq!(names(&paged_list.items), expected_names);
        assert!(paged_list.errors.is_empty(), "{:?}", paged_list.errors);

        // With the default page size everything comes in one response, larger than
        // etcd-client's default receive limit: it only works because the limit was raised
        // (a page that failed would have been halved, giving more than one page).
        let mut pages = Vec::new();
        registry
            .for_each_page(&pods_dir, None, |page| pages.push(page.len()))
            .await
            .expect("unpaged read");
        assert_eq!(pages, [PODS]);
        let list = registry
            .list::<Pod>(Some("default"), &everything)
            .await
            .expect("unpaged list");
        assert_eq!(names(&list.items), expected_names);
        assert_eq!(list.resource_version, paged_list.resource_version);
        assert!(list
            .items
            .iter()
            .all(|pod| pod.metadata.annotations["padding"] == padding));

        // The same read through a client with the default limit fails.
        let default_limit = client
            .kv_client()
            .get(pods_dir.as_str(), Some(GetOptions::new().with_prefix()))
            .await;
        match default_limit {
            Err(etcd_client::Error::GRpcStatus(status))
                if status.message().contains("message length too large") => {}
            other => panic!(
                "expected the default 4 MiB limit to refuse the read, got {:?}",
                other.map(|response| response.kvs().len())
            ),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_values_are_reported_not_fatal() {
    init_tracing();
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let registry = registry(&client);
        let good = [
            registry.create(&pod("default", "a", &[])).await.unwrap(),
            registry.create(&pod("default", "z", &[])).await.unwrap(),
        ];
        let bad_key = registry.key::<Pod>("default", "bad");
        raw_put(&client, &bad_key, "{not json").await;
        let bad_revision = stored_version(&client, &bad_key).await;
        // Keys that are not namespace/name are not pods, whatever their value: skipped,
        // not reported.
        for key in [
            "/registry/pods/default/deeper/x",
            "/registry/pods/default/deeper/y",
            "/registry/pods/default",
        ] {
            raw_put(&client, key, "{not json").await;
            raw_put(&client, &format!("{key}-valid"), r#"{"kind": "Pod"}"#).await;
        }

        for namespace in [Some("default"), None] {
            let list = registry
                .list::<Pod>(namespace, &Selector::everything())
                .await
                .expect("a malformed value does not fail the list");
            assert_eq!(list.items, good, "{namespace:?}");
            assert_eq!(list.errors.len(), 1, "{:?}", list.errors);
            let error = &list.errors[0];
            assert_eq!(error.key, bad_key);
            assert_eq!(error.kind, "Pod");
            assert_eq!(error.revision, bad_revision.0);
            assert!(error.to_string().contains(&bad_key), "{error}");
        }

        let err = expect_err(registry.get::<Pod>("default", "bad").await, "Decode", |e| {
            matches!(e, StorageError::Decode(_))
        });
        let StorageError::Decode(decode) = err else {
            unreachable!()
        };
        assert_eq!(decode.key, bad_key);
        assert_eq!(decode.revision, bad_revision.0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_fields_survive_an_update() {
    init_tracing();
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let registry = registry(&client);
        let key = registry.key::<Pod>("default", "web");
        let original = json!({
            "kind": "Pod",
            "apiVersion": "v1beta3",
            "futureTopLevel": {"nested": [1, 2, {"deep": true}]},
            "metadata": {
                "name": "web",
                "namespace": "default",
                "labels": {"app": "web"},
                "generation": 7,
                "finalizers": ["example.com/keep"],
                "ownerReferences": [{"apiVersion": "v1beta3", "kind": "ReplicationController",
                    "name": "web", "uid": "u1", "controller": true, "futureRefField": 1}]
            },
            "spec": {
                "containers": [{"name": "web", "image": "nginx", "resources": {"cpu": "1"}}],
                "nodeSelector": {"disk": "ssd"},
                "restartPolicy": {"always": {}}
            },
            "status": {
                "phase": "Running",
                "podIP": "10.0.0.7",
                "conditions": [{"type": "Ready", "status": "True"}],
                "startTime": "2014-10-01T00:00:00Z"
            }
        });
        raw_put(&client, &key, serde_json::to_vec(&original).unwrap()).await;

        let mut pod: Pod = registry.get("default", "web").await.unwrap();
        pod.metadata.labels.insert("app", "api");
        registry.update(&pod).await.expect("update");

        let kv = stored(&client, &key).await.unwrap();
        let written: Value = serde_json::from_slice(kv.value()).expect("stored JSON");
        for pointer in [
            "/futureTopLevel",
            "/metadata/generation",
            "/metadata/finalizers",
            "/metadata/ownerReferences",
            "/spec/containers/0/resources",
            "/spec/nodeSelector",
            "/spec/restartPolicy",
            "/status/conditions",
            "/status/startTime",
        ] {
            assert_eq!(
                written.pointer(pointer),
                original.pointer(pointer),
                "{pointer} in {written}"
            );
        }
        let mut expected = original.clone();
        expected["metadata"]["labels"]["app"] = json!("api");
        assert_eq!(written, expected);
    })
    .await;
}

/// `metadata.generation` as stored at `key` (`None` when the document has none).
async fn stored_generation(client: &Client, key: &str) -> Option<i64> {
    let kv = stored(client, key)
        .await
        .unwrap_or_else(|| panic!("{key} should exist"));
    let document: Value = serde_json::from_slice(kv.value()).expect("stored JSON");
    document["metadata"]["generation"].as_i64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generation_is_one_on_create_and_counts_spec_changes() {
    init_tracing();
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let registry = registry(&client);
        let key = registry.key::<ReplicationController>("default", "web");

        // Create: 1, whatever the caller put there.
        let mut rc = controller("default", "web", &[("app", "web")]);
        rc.metadata.generation = 9;
        let rc = registry.create(&rc).await.unwrap();
        assert_eq!(rc.metadata.generation, 1);
        assert_eq!(stored_generation(&client, &key).await, Some(1));

        // Compare-and-swap: metadata and status changes keep it, a spec change adds one
        // (a forged number is ignored).
        let mut relabelled = rc.clone();
        relabelled.metadata.labels.insert("tier", "front");
        relabelled.status.replicas = 2;
        let relabelled = registry.update(&relabelled).await.unwrap();
        assert_eq!(relabelled.metadata.generation, 1);
        let mut resized = relabelled.clone();
        resized.spec.replicas = 5;
        resized.metadata.generation = 40;
        let resized = registry.update(&resized).await.unwrap();
        assert_eq!(resized.metadata.generation, 2);
        assert_eq!(stored_generation(&client, &key).await, Some(2));
        // A stale update still conflicts, generation or not.
        expect_err(registry.update(&relabelled).await, "Conflict", |e| {
            matches!(e, StorageError::Conflict { .. })
        });

        // guaranteed_update: the same rule; a status-only change keeps it.
        let status_only = registry
            .guaranteed_update("default", "web", |mut rc: ReplicationController| {
                rc.status.replicas = 5;
                Ok(rc)
            })
            .await
            .unwrap();
        assert_eq!(status_only.metadata.generation, 2);
        let scaled = registry
            .guaranteed_update("default", "web", |mut rc: ReplicationController| {
                rc.spec.replicas = 1;
                rc.metadata.generation = 0;
                Ok(rc)
            })
            .await
            .unwrap();
        assert_eq!(scaled.metadata.generation, 3);
        assert_eq!(stored_generation(&client, &key).await, Some(3));

        // A document written by etcdctl without one counts from 0.
        let pod_key = registry.key::<Pod>("default", "raw");
        let mut raw = serde_json::to_value(pod("default", "raw", &[])).unwrap();
        raw["apiVersion"] = json!("v1beta3");
        raw_put(&client, &pod_key, serde_json::to_vec(&raw).unwrap()).await;
        let mut claimed: Pod = registry.get("default", "raw").await.unwrap();
        claimed.status = Some(Default::default());
        let claimed = registry.update(&claimed).await.unwrap();
        assert_eq!(stored_generation(&client, &pod_key).await, None);
        let mut bound = claimed.clone();
        bound.spec.host = "node-1".into();
        assert_eq!(
            registry.update(&bound).await.unwrap().metadata.generation,
            1
        );
        assert_eq!(stored_generation(&client, &pod_key).await, Some(1));

        // Endpoints have no spec and no generation.
        let endpoints = registry
            .create(&kcm::api::Endpoints {
                metadata: ObjectMeta::named("default", "web"),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(endpoints.metadata.generation, 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guaranteed_update_of_a_missing_key_is_not_found() {
    init_tracing();
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let registry = registry(&client);
        let mut called = false;
        let result = registry
            .guaranteed_update("default", "missing", |service: Service| {
                called = true;
                Ok(service)
            })
            .await;
        let err = expect_err(result, "NotFound", StorageError::is_not_found);
        assert!(
            matches!(&err, StorageError::NotFound { key } if *key == registry.key::<Service>("default", "missing")),
            "{err:?}"
        );
        assert!(!called, "the closure ran on a missing object");
        assert!(
            stored(&client, &registry.key::<Service>("default", "missing"))
                .await
                .is_none(),
            "nothing was written"
        );
    })
    .await;
}

/// A `Write` into a shared buffer, to capture a future's tracing output.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_at_a_compacted_revision_fails_as_compacted_without_retrying() {
    init_tracing();
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let registry = registry(&client);
        registry.create(&pod("default", "a", &[])).await.unwrap();
        let old = current_revision(&client).await;
        registry.create(&pod("default", "b", &[])).await.unwrap();
        etcd.compact().await;

        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer({
                let captured = captured.clone();
                move || captured.clone()
            })
            .finish();
        let pods_dir = api::list_key::<Pod>(PREFIX, None);
        let mut pages = 0;
        let result = registry
            .for_each_page(&pods_dir, Some(old), |_| pages += 1)
            .with_subscriber(subscriber)
            .await;
        let err = expect_err(result, "a compacted Etcd error", StorageError::is_compacted);
        assert_eq!(pages, 0);
        // etcd reports compaction as OutOfRange, a code tonic also uses for an oversized
        // message; a compacted revision must not be mistaken for a page to split.
        let log = captured.text();
        assert!(
            !log.contains("too large"),
            "retried a compacted read:\n{log}"
        );
        assert!(err.to_string().contains("compacted"), "{err}");

        let now = registry
            .list::<Pod>(None, &Selector::everything())
            .await
            .expect("a fresh list after compaction");
        assert_eq!(keys(&now.items), ["default/a", "default/b"]);
    })
    .await;
}

/// The garbage collector's writes: a delete that also requires other keys absent, unchanged
/// or alive commits only while they are, and says which broke.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_with_key_conditions_commit_only_while_they_hold() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let registry = registry(&client);
        let pod = registry.create(&pod("default", "a", &[])).await.unwrap();
        let rv = pod.metadata.resource_version;
        let owner_key = "/registry/controllers/default/web".to_string();
        let broken = |e: &StorageError| matches!(e, StorageError::ConditionFailed { .. });

        // The owner exists: "absent" does not hold, nothing is deleted.
        let owner = registry
            .create(&controller("default", "web", &[("app", "web")]))
            .await
            .unwrap();
        let absent = registry.with_conditions(vec![KeyCondition::Absent(owner_key.clone())]);
        let err = expect_err(
            absent.delete::<Pod>("default", "a", rv).await,
            "ConditionFailed",
            broken,
        );
        assert_eq!(
            err.to_string(),
            "delete /registry/pods/default/a: refused, /registry/controllers/default/web exists"
        );
        // Unchanged since its revision: holds until the owner is written again.
        let at = owner.metadata.resource_version.unwrap().0;
        let unchanged = registry.with_conditions(vec![
            KeyCondition::At(owner_key.clone(), at),
            KeyCondition::Alive(Incarnation {
                key: owner_key.clone(),
                read_at: at,
                created: None,
            }),
        ]);
        let mut resized = owner.clone();
        resized.spec.replicas = 2;
        registry.update(&resized).await.unwrap();
        let err = expect_err(
            unchanged.delete::<Pod>("default", "a", rv).await,
            "ConditionFailed",
            broken,
        );
        assert!(
            err.to_string()
                .ends_with(&format!("changed since revision {at}")),
            "{err}"
        );
        assert!(registry.get::<Pod>("default", "a").await.is_ok());
        // The owner gone: "absent" holds; a conflict on the object itself is still a
        // conflict, and the delete at its revision commits.
        registry
            .delete::<ReplicationController>("default", "web", None)
            .await
            .unwrap();
        let stale = rv.map(|rv| ResourceVersion(rv.0 - 1));
        expect_err(
            absent.delete::<Pod>("default", "a", stale).await,
            "Conflict",
            |e| matches!(e, StorageError::Conflict { .. }),
        );
        absent.delete::<Pod>("default", "a", rv).await.unwrap();
        assert!(registry.get::<Pod>("default", "a").await.is_err());
    })
    .await;
}
