//! The shared pod informer against a real etcd: its store and label index follow puts,
//! relabels, deletes and values that stop decoding; subscribers get one delta per change
//! after the store applied it; `wait_for` is read-your-writes; and after a cut during
//! which etcd was compacted, it lists again and ends equal to etcd.

use std::collections::BTreeSet;
use std::time::Duration;

use etcd_client::{Client, GetOptions};
use kcm::client::ClientConfig;
use kcm::etcd_watcher::{BackoffConfig, Watcher};
use kcm::informer::{CachedPod, Delta, PodInformer};
use kcm::labels::Selector;
use kcm::registry::Registry;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::support::objects::{pod_key, put, put_pod};
use crate::support::{eventually, start_etcd, with_timeout, FaultProxy};

const LIMIT: Duration = Duration::from_secs(120);
const DEADLINE: Duration = Duration::from_secs(30);

fn selected(pods: &PodInformer, selector: &str) -> BTreeSet<String> {
    let selector: Selector = selector.parse().expect("selector");
    pods.select("ns", &selector)
        .iter()
        .map(|p| p.name.to_string())
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

async fn next_delta(deltas: &mut mpsc::Receiver<Delta<CachedPod>>) -> Delta<CachedPod> {
    tokio::time::timeout(DEADLINE, deltas.recv())
        .await
        .expect("a delta within 30s")
        .expect("the informer is running")
}

fn start(client: &Client, backoff: BackoffConfig) -> (PodInformer, CancellationToken) {
    let registry = Registry::new(client, "/registry").expect("registry");
    let pods = PodInformer::new(Watcher::new(client, registry)).with_backoff(backoff);
    let stop = CancellationToken::new();
    tokio::spawn(pods.clone().run(stop.clone().cancelled_owned()));
    (pods, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_and_its_index_follow_etcd_and_deltas_follow_the_store() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        put_pod(&client, "ns", "a", "web").await;
        put_pod(&client, "ns", "b", "web").await;
        put_pod(&client, "ns", "c", "db").await;
        put(&client, &pod_key("ns", "junk"), "{not json").await;

        let (pods, stop) = start(&client, BackoffConfig::default());
        let mut deltas = pods.subscribe();
        pods.wait_synced().await;
        assert_eq!(selected(&pods, "app=web"), names(&["a", "b"]));
        assert_eq!(selected(&pods, "app!=web"), names(&["c"]));
        assert!(pods.read("ns", |ns| ns.is_some_and(|ns| ns.is_taken("junk"))));
        assert!(pods.get("ns", "junk").is_none(), "junk is not a pod");
        // The first list's deltas: one per pod, none for the undecodable value.
        for _ in 0..3 {
            let delta = next_delta(&mut deltas).await;
            assert!(delta.old.is_none() && delta.new.is_some(), "{delta:?}");
        }

        // A new pod: read-your-writes once the informer has applied its revision.
        let revision = put_pod(&client, "ns", "d", "web").await;
        assert!(pods.wait_for(revision, DEADLINE).await);
        assert_eq!(selected(&pods, "app=web"), names(&["a", "b", "d"]));
        let delta = next_delta(&mut deltas).await;
        assert_eq!(&*delta.name, "d");
        assert!(delta.old.is_none());

        // Relabelled: moves between label groups; the delta carries both label sets.
        let revision = put_pod(&client, "ns", "a", "db").await;
        assert!(pods.wait_for(revision, DEADLINE).await);
        assert_eq!(selected(&pods, "app=db"), names(&["a", "c"]));
        let delta = next_delta(&mut deltas).await;
        assert_eq!(delta.old.unwrap().labels.get("app"), Some("web"));
        assert_eq!(delta.new.unwrap().labels.get("app"), Some("db"));

        // A value that stops decoding: the pod is gone, its name still taken.
        let revision = put(
            &client,
            &pod_key("ns", "b"),
            r#"{"status": {"phase": "Exploded"}}"#,
        )
        .await;
        assert!(pods.wait_for(revision, DEADLINE).await);
        assert_eq!(selected(&pods, "app=web"), names(&["d"]));
        assert!(pods.read("ns", |ns| ns.is_some_and(|ns| ns.is_taken("b"))));
        let delta = next_delta(&mut deltas).await;
        assert!(delta.old.is_some() && delta.new.is_none(), "{delta:?}");

        // Deleted: gone, name free.
        let revision = client
            .clone()
            .delete("/registry/pods/ns/d", None)
            .await
            .expect("delete")
            .header()
            .expect("header")
            .revision();
        assert!(pods.wait_for(revision, DEADLINE).await);
        assert!(selected(&pods, "app=web").is_empty());
        assert!(pods.read("ns", |ns| ns.is_some_and(|ns| !ns.is_taken("d"))));
        assert!(next_delta(&mut deltas).await.new.is_none());
        // Not yet written: the wait gives up.
        assert!(
            !pods
                .wait_for(revision + 1000, Duration::from_millis(50))
                .await
        );
        stop.cancel();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_cut_with_compaction_the_informer_lists_again_and_equals_etcd() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        for (name, app) in [("a", "web"), ("b", "web"), ("c", "db")] {
            put_pod(&client, "ns", name, app).await;
        }
        let proxy = FaultProxy::start(etcd.client_addr()).await;
        let proxied = kcm::client::connect(&ClientConfig {
            keepalive_interval: Duration::from_secs(1),
            keepalive_timeout: Duration::from_secs(1),
            ..ClientConfig::new([proxy.endpoint()])
        })
        .await
        .expect("connect through the proxy");
        let backoff = BackoffConfig {
            min: Duration::from_millis(50),
            max: Duration::from_millis(500),
            reset_after: Duration::from_secs(120),
        };
        let (pods, stop) = start(&proxied, backoff);
        pods.wait_synced().await;
        assert_eq!(pods.len(), 3);

        proxy.cut();
        client
            .clone()
            .delete("/registry/pods/ns/a", None)
            .await
            .expect("delete");
        put_pod(&client, "ns", "b", "db").await;
        put_pod(&client, "ns", "e", "web").await;
        etcd.compact().await;
        proxy.restore();

        let relists = pods.metrics();
        eventually(DEADLINE, "the informer to list again", || {
            let relists = relists.clone();
            async move { relists.relists.load(std::sync::atomic::Ordering::Relaxed) >= 2 }
        })
        .await;
        let now = client
            .clone()
            .get("/registry/pods/ns/", Some(GetOptions::new().with_prefix()))
            .await
            .expect("list");
        assert!(
            pods.wait_for(now.header().unwrap().revision(), DEADLINE)
                .await
        );
        assert_eq!(selected(&pods, "app=web"), names(&["e"]));
        assert_eq!(selected(&pods, "app=db"), names(&["b", "c"]));
        assert_eq!(pods.len(), now.kvs().len());
        stop.cancel();
    })
    .await;
}

/// The first list of 5,000 pods in three namespaces (one a prefix of another: `a` and
/// `a-b`, whose keys sort `a-b/` before `a/`) reaches a subscriber as one added delta per
/// pod, in the order etcd lists their keys, across the chunks the deltas are made in;
/// and pods with equal ports, node and controller reference share one copy of each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_list_of_5000_pods_is_added_in_key_order_with_shared_values() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let mut keys = Vec::new();
        for (namespace, count) in [("a", 2_000), ("a-b", 2_000), ("b", 1_000)] {
            for i in 0..count {
                keys.push((namespace, format!("web-{i:05}")));
            }
        }
        for chunk in keys.chunks(100) {
            let puts: Vec<etcd_client::TxnOp> = chunk
                .iter()
                .map(|(namespace, name)| {
                    let mut pod = crate::support::objects::serving_pod_json(
                        namespace, name, "web", "10.0.0.1",
                    );
                    pod["metadata"]["ownerReferences"] = serde_json::json!([{
                        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                        "uid": "7f0c3a52-5b7e-4c1b-9a57-0d1e5f0b6a11", "controller": true,
                        "blockOwnerDeletion": true,
                    }]);
                    etcd_client::TxnOp::put(pod_key(namespace, name), pod.to_string(), None)
                })
                .collect();
            client
                .kv_client()
                .txn(etcd_client::Txn::new().and_then(puts))
                .await
                .expect("put a chunk of pods");
        }
        let (pods, stop) = start(&client, BackoffConfig::default());
        let mut deltas = pods.subscribe();
        pods.wait_synced().await;
        let mut seen = Vec::new();
        while seen.len() < keys.len() {
            let delta = next_delta(&mut deltas).await;
            assert!(delta.old.is_none() && delta.new.is_some(), "{delta:?}");
            seen.push(format!("{}/{}", delta.namespace, delta.name));
        }
        let listed: Vec<String> = client
            .clone()
            .get(
                "/registry/pods/",
                Some(GetOptions::new().with_prefix().with_keys_only()),
            )
            .await
            .expect("list keys")
            .kvs()
            .iter()
            .map(|kv| kv.key_str().expect("utf-8")["/registry/pods/".len()..].to_string())
            .collect();
        assert_eq!(listed.len(), 5_000);
        assert_eq!(seen, listed, "the deltas follow etcd's key order");

        let first = pods.get("a", "web-00000").expect("cached");
        for (namespace, name) in [("a", "web-01999"), ("a-b", "web-00007"), ("b", "web-00999")] {
            let other = pods.get(namespace, name).expect("cached");
            assert!(
                std::sync::Arc::ptr_eq(&first.ports, &other.ports),
                "ports shared"
            );
            assert!(std::sync::Arc::ptr_eq(
                first.host.as_ref().expect("bound"),
                other.host.as_ref().expect("bound")
            ));
            assert!(std::sync::Arc::ptr_eq(
                first.controller.as_ref().expect("owned"),
                other.controller.as_ref().expect("owned")
            ));
        }
        assert_eq!(first.ports.find(None), Some(8080));
        stop.cancel();
    })
    .await;
}
