//! `kcm apiserver` through a real client, kube-rs: its watcher and reflector (paged
//! list-then-watch and streaming lists), its metadata watcher, paged lists and raw watches,
//! checked against etcd's own range and history through connection cuts, apiserver
//! restarts, an etcd restart and compaction, and a thousand watchers that must cost etcd
//! one watch.
//!
//! Pods are written straight into etcd as kcm stores them (`/registry/pods/{ns}/{name}`,
//! the 2014 v1beta3 document, no resourceVersion); what a client must end up with is read
//! from etcd with plain etcd-client calls, never through the apiserver. Expectations are
//! Kubernetes' (api-concepts "Resource Versions", "Efficient detection of changes",
//! "Retrieving large results sets in chunks"; kube-apiserver's watch cache).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions, Txn, TxnOp};
use futures::{Stream, StreamExt as _};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::utils::Backoff;
use kube::runtime::{metadata_watcher, watcher, WatchStreamExt as _};
use kube::{Resource, ResourceExt as _};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use crate::support::apiserver::apiserver_on;
use crate::support::history;
use crate::support::kcm::Kcm;
use crate::support::{eventually, free_port, start_etcd, with_timeout, FaultProxy};

/// Bound on each test (they are meant to take seconds).
const LIMIT: Duration = Duration::from_secs(150);
/// How long a client may take to reach etcd's state once the writes stop.
const CONVERGE: Duration = Duration::from_secs(30);
/// How often the pollers here look again.
const POLL: Duration = Duration::from_millis(20);

const NS: &str = "default";
/// The pods of [`NS`] in etcd.
const PREFIX: &str = "/registry/pods/default/";
/// The end of [`PREFIX`]'s range (`/` + 1).
const PREFIX_END: &str = "/registry/pods/default0";

// ---------------------------------------------------------------------------------------
// Harness: the apiserver process, pods in etcd, etcd's state, a kube client.

/// A `kcm apiserver` process on a fixed port, SIGKILLed on drop.
struct ApiServer {
    kcm: Kcm,
    port: u16,
}

impl ApiServer {
    /// Starts `kcm --etcd-servers {etcd} apiserver --port {port}` and waits until
    /// `/readyz` answers 200 (every watch cache has listed).
    async fn start(etcd: &str, port: u16) -> ApiServer {
        let kcm = apiserver_on(etcd, port, &[]).await;
        ApiServer { kcm, port }
    }

    /// SIGKILLs it and waits until it is gone (its port is free again): every connection
    /// to it is cut, and nothing it knew survives.
    async fn kill(mut self) {
        self.kcm.signal(libc::SIGKILL);
        self.kcm.wait_exit(Duration::from_secs(10)).await;
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }
}

/// A kube client of `url` (plain HTTP, no credentials), `default` as its namespace.
fn kube_client(url: &str) -> kube::Client {
    let config = kube::Config::new(url.parse().expect("an apiserver URL"));
    kube::Client::try_from(config).expect("a kube client")
}

fn pod_name(i: usize) -> String {
    format!("p-{i:05}")
}

fn pod_key(i: usize) -> String {
    format!("{PREFIX}{}", pod_name(i))
}

/// Pod `i` as kcm stores it: v1beta3, no resourceVersion (that is the key's mod_revision).
fn pod_doc(i: usize, app: &str) -> String {
    json!({
        "kind": "Pod",
        "apiVersion": "v1beta3",
        "metadata": {
            "name": pod_name(i),
            "namespace": NS,
            "uid": format!("00000000-0000-4000-8000-{i:012x}"),
            "labels": { "app": app },
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": { "containers": [{ "name": "c", "image": "nginx" }] },
    })
    .to_string()
}

/// Writes `ops` in transactions of 100 (etcd allows 128 per transaction), four at a time.
/// The ops must name distinct keys.
async fn write(client: &Client, ops: Vec<TxnOp>) {
    let mut batches = Vec::new();
    let mut ops = ops.into_iter().peekable();
    while ops.peek().is_some() {
        batches.push(ops.by_ref().take(100).collect::<Vec<TxnOp>>());
    }
    futures::stream::iter(batches)
        .map(|batch| {
            let mut kv = client.kv_client();
            async move {
                kv.txn(Txn::new().and_then(batch))
                    .await
                    .expect("a batched write to etcd")
            }
        })
        .buffer_unordered(4)
        .collect::<Vec<_>>()
        .await;
}

/// The test's model of which pods exist, to make changes that name distinct live pods.
#[derive(Default)]
struct Pods {
    next: usize,
    alive: BTreeSet<usize>,
    round: usize,
}

impl Pods {
    /// `creates` new pods, `modifies` live ones relabelled, `deletes` live ones deleted
    /// (the oldest first), as etcd ops on distinct keys.
    fn churn(&mut self, creates: usize, modifies: usize, deletes: usize) -> Vec<TxnOp> {
        self.round += 1;
        let app = format!("v{}", self.round);
        let targets: Vec<usize> = self
            .alive
            .iter()
            .copied()
            .take(deletes + modifies)
            .collect();
        assert_eq!(
            targets.len(),
            deletes + modifies,
            "enough live pods to change"
        );
        let mut ops = Vec::new();
        for &i in &targets[..deletes] {
            ops.push(TxnOp::delete(pod_key(i), None));
            self.alive.remove(&i);
        }
        for &i in &targets[deletes..] {
            ops.push(TxnOp::put(pod_key(i), pod_doc(i, &app), None));
        }
        for i in self.next..self.next + creates {
            ops.push(TxnOp::put(pod_key(i), pod_doc(i, &app), None));
            self.alive.insert(i);
        }
        self.next += creates;
        ops
    }
}

/// The pods of [`NS`] as etcd holds them now: name → mod_revision (keys deeper than
/// `{ns}/{name}`, such as the history sentinel, are not pods).
async fn etcd_pods(client: &Client) -> BTreeMap<String, i64> {
    let options = GetOptions::new().with_range(PREFIX_END).with_keys_only();
    let response = client
        .kv_client()
        .get(PREFIX, Some(options))
        .await
        .expect("a range read of the pods");
    response
        .kvs()
        .iter()
        .filter_map(|kv| {
            let name = kv.key_str().expect("a UTF-8 key").strip_prefix(PREFIX)?;
            (!name.contains('/')).then(|| (name.to_owned(), kv.mod_revision()))
        })
        .collect()
}

/// etcd's current revision.
async fn etcd_revision(client: &Client) -> i64 {
    client
        .kv_client()
        .get("/kcm-test/revision-probe", None)
        .await
        .expect("a read of the revision")
        .header()
        .expect("etcd responses carry a header")
        .revision()
}

/// An object's resourceVersion as a number (-1 when missing or not a number).
fn rv_of<K: Resource>(object: &K) -> i64 {
    object
        .meta()
        .resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(-1)
}

/// What differs between etcd's state and a client's, briefly.
fn diff(expected: &BTreeMap<String, i64>, got: &BTreeMap<String, i64>) -> String {
    let missing: Vec<&String> = expected.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra: Vec<&String> = got.keys().filter(|k| !expected.contains_key(*k)).collect();
    let other: Vec<String> = expected
        .iter()
        .filter_map(|(k, v)| {
            let g = got.get(k).filter(|g| *g != v)?;
            Some(format!("{k} at {g} (etcd: {v})"))
        })
        .collect();
    format!(
        "etcd holds {} pods, the client {}; missing {} (e.g. {:?}), extra {} (e.g. {:?}), at another resourceVersion {} (e.g. {:?})",
        expected.len(),
        got.len(),
        missing.len(),
        &missing[..missing.len().min(3)],
        extra.len(),
        &extra[..extra.len().min(3)],
        other.len(),
        &other[..other.len().min(3)],
    )
}

/// Waits until `current()` equals `expected`; panics after [`CONVERGE`] with the
/// difference and `context()`.
async fn converge(
    what: &str,
    expected: &BTreeMap<String, i64>,
    current: impl Fn() -> BTreeMap<String, i64>,
    context: impl Fn() -> String,
) {
    let deadline = Instant::now() + CONVERGE;
    loop {
        let got = current();
        if got == *expected {
            return;
        }
        if Instant::now() >= deadline {
            panic!(
                "{what}: the client did not reach etcd's state within {CONVERGE:?}: {}; {}",
                diff(expected, &got),
                context()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

// ---------------------------------------------------------------------------------------
// kube-runtime: a watcher feeding a reflector's store, polled by a task.

/// Retries after 50 ms, doubling to at most 500 ms, reset by any event: kube's default
/// (0.8 s to 30 s) shortened so that the tests do not wait on it.
struct QuickBackoff(Duration);

const QUICK_MIN: Duration = Duration::from_millis(50);
const QUICK_MAX: Duration = Duration::from_millis(500);

impl Iterator for QuickBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let delay = self.0;
        self.0 = (delay * 2).min(QUICK_MAX);
        Some(delay)
    }
}

impl Backoff for QuickBackoff {
    fn reset(&mut self) {
        self.0 = QUICK_MIN;
    }
}

/// A reflector's store, fed by a watcher stream that a task polls; aborted on drop.
struct Informer<K: Resource<DynamicType = ()> + Clone + 'static> {
    store: Store<K>,
    /// Completed initial lists (`InitDone`): 1 after the first, one more per relist.
    inits: Arc<AtomicUsize>,
    /// The watcher's errors (it retries after each), the last ones kept.
    errors: Arc<Mutex<(usize, Vec<String>)>>,
    task: tokio::task::JoinHandle<()>,
}

impl<K> Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
{
    fn start(
        stream: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    ) -> Informer<K> {
        let (store, writer) = reflector::store::<K>();
        let stream = stream.backoff(QuickBackoff(QUICK_MIN)).reflect(writer);
        let inits = Arc::new(AtomicUsize::new(0));
        let errors = Arc::new(Mutex::new((0, Vec::new())));
        let task = tokio::spawn({
            let (inits, errors) = (inits.clone(), errors.clone());
            async move {
                let mut stream = std::pin::pin!(stream);
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(watcher::Event::InitDone) => {
                            inits.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok(_) => {}
                        Err(e) => {
                            let mut errors = errors.lock().expect("errors lock");
                            errors.0 += 1;
                            errors.1.push(e.to_string());
                            if errors.1.len() > 5 {
                                errors.1.remove(0);
                            }
                        }
                    }
                }
            }
        });
        Informer {
            store,
            inits,
            errors,
            task,
        }
    }

    /// name → resourceVersion of what the store holds.
    fn pods(&self) -> BTreeMap<String, i64> {
        self.store
            .state()
            .iter()
            .map(|object| (object.name_any(), rv_of(object.as_ref())))
            .collect()
    }

    fn inits(&self) -> usize {
        self.inits.load(Ordering::SeqCst)
    }

    fn errors(&self) -> String {
        let errors = self.errors.lock().expect("errors lock");
        format!(
            "{} initial lists; {} watcher errors, the last: {:?}",
            self.inits(),
            errors.0,
            errors.1
        )
    }

    /// Waits until the store holds exactly etcd's pods at their resourceVersions.
    async fn converge(&self, what: &str, client: &Client) {
        let expected = etcd_pods(client).await;
        converge(what, &expected, || self.pods(), || self.errors()).await;
    }
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Drop for Informer<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------------------
// 1 and 2: watcher + reflector through disruptions

/// Which initial list the watcher makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Strategy {
    /// Paged `limit=500` lists, then a watch from the list's resourceVersion (kube's
    /// default, and client-go's).
    ListWatch,
    /// `sendInitialEvents=true`: the state as ADDED events, then a BOOKMARK marked
    /// `k8s.io/initial-events-end`.
    StreamingList,
}

/// A watcher + reflector on pods stays equal to etcd's range (names and
/// resourceVersions) through (a) a connection cut between kube and the apiserver and the
/// apiserver killed and replaced by a new process on the same port, (b) etcd killed and
/// restarted, (c) a compaction while the watcher is disconnected (the apiserver down), so
/// that its resume resourceVersion is compacted and older than the new apiserver's cache
/// window. Pods are created, modified and deleted during every disruption (with streaming
/// lists, deleted only while the watcher is connected: see `gap_deletes`).
async fn informer_keeps_etcds_state(strategy: Strategy) {
    let Some(mut etcd) = start_etcd().await else {
        return;
    };
    let mut client = etcd.client().await;
    let port = free_port();
    let mut server = ApiServer::start(&etcd.endpoint(), port).await;
    let proxy = FaultProxy::start(server.addr()).await;
    let api: Api<Pod> = Api::default_namespaced(kube_client(&proxy.endpoint()));
    let config = match strategy {
        Strategy::ListWatch => watcher::Config::default(),
        Strategy::StreamingList => watcher::Config::default().streaming_lists(),
    };
    // kube-rs (1.1) re-watches a streaming-list watcher with `sendInitialEvents=true` and
    // its last resourceVersion; kube-apiserver answers that with the current state as
    // ADDED events, with no DELETED for what went away meanwhile, so a pod deleted while
    // such a watcher is away stays in kube's store whatever the server does (seen: 50 pods
    // deleted during a cut stayed). Its deletes come while it is connected.
    let gap_deletes = if strategy == Strategy::ListWatch {
        50
    } else {
        0
    };
    let mut pods = Pods::default();
    write(&client, pods.churn(1000, 0, 0)).await;
    let informer = Informer::start(watcher(api, config));
    informer.converge("the initial list", &client).await;
    assert_eq!(
        informer.inits(),
        1,
        "one initial list: {}",
        informer.errors()
    );

    // (a) A cut between kube and the apiserver: the watch resumes from its last
    // resourceVersion, which the apiserver's cache window still holds (no relist).
    proxy.cut();
    eventually(CONVERGE, "the proxy to drop every connection", || {
        let open = proxy.open_connections();
        async move { open == 0 }
    })
    .await;
    write(&client, pods.churn(200, 50, gap_deletes)).await;
    proxy.restore();
    informer.converge("after a connection cut", &client).await;
    assert_eq!(
        informer.inits(),
        1,
        "a watch resumed inside the cache's window needs no relist: {}",
        informer.errors()
    );
    write(&client, pods.churn(50, 50, 50)).await;
    informer
        .converge("live changes after the cut", &client)
        .await;

    // The apiserver killed, pods changed, a new apiserver on the same port.
    server.kill().await;
    write(&client, pods.churn(200, 50, gap_deletes)).await;
    server = ApiServer::start(&etcd.endpoint(), port).await;
    write(&client, pods.churn(100, 50, gap_deletes)).await;
    informer
        .converge("after an apiserver restart", &client)
        .await;
    write(&client, pods.churn(50, 50, 50)).await;
    informer
        .converge("live changes after the restart", &client)
        .await;

    // (b) etcd killed and restarted: changes just before the kill, and right after the
    // restart while the apiserver's own etcd watch is still reconnecting.
    write(&client, pods.churn(200, 50, gap_deletes)).await;
    etcd.kill();
    etcd.restart().await;
    client = etcd.client().await;
    write(&client, pods.churn(200, 50, gap_deletes)).await;
    informer.converge("after an etcd restart", &client).await;
    write(&client, pods.churn(50, 50, 50)).await;
    informer
        .converge("live changes after the etcd restart", &client)
        .await;

    // (c) The watcher disconnected (the apiserver down) while pods change and etcd is
    // compacted past its resourceVersion; the new apiserver's window starts after it.
    let before = informer.inits();
    server.kill().await;
    write(&client, pods.churn(200, 50, gap_deletes)).await;
    etcd.compact().await;
    write(&client, pods.churn(100, 50, gap_deletes)).await;
    server = ApiServer::start(&etcd.endpoint(), port).await;
    informer.converge("after a compaction", &client).await;
    if strategy == Strategy::ListWatch {
        assert!(
            informer.inits() > before,
            "a resume from a compacted resourceVersion is a 410 and a relist: {}",
            informer.errors()
        );
    }
    write(&client, pods.churn(50, 50, 50)).await;
    informer
        .converge("live changes after the compaction", &client)
        .await;
    drop(server);
}

/// kube-runtime's `watcher` (default: paged list, then watch) and `reflector` hold etcd's
/// pods at etcd's resourceVersions through a connection cut, an apiserver restart, an
/// etcd restart and a compaction that forces a relist on 410.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kube_reflector_keeps_etcds_pods_through_cuts_restarts_and_compaction() {
    with_timeout(LIMIT, informer_keeps_etcds_state(Strategy::ListWatch)).await;
}

/// The same with `streaming_lists()`: `sendInitialEvents=true`, the state as ADDED
/// events and the `k8s.io/initial-events-end` BOOKMARK (kube-runtime waits for exactly
/// that annotation). Deletes happen while the watcher is connected (see
/// [`informer_keeps_etcds_state`] for why).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_reflector_keeps_etcds_pods_through_cuts_restarts_and_compaction() {
    with_timeout(LIMIT, informer_keeps_etcds_state(Strategy::StreamingList)).await;
}

// ---------------------------------------------------------------------------------------
// 3: metadata_watcher

/// kube-runtime's `metadata_watcher` asks for `PartialObjectMetadata(List)` with no JSON
/// fallback: it lists and watches the same pods at the same resourceVersions as etcd
/// holds, and what it gets are PartialObjectMetadata objects, not whole pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_watcher_sees_etcds_pods() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let server = ApiServer::start(&etcd.endpoint(), free_port()).await;
        let api = pods_of(&server);
        let mut pods = Pods::default();
        write(&client, pods.churn(600, 0, 0)).await;
        let informer = Informer::start(metadata_watcher(api, watcher::Config::default()));
        informer
            .converge("the initial metadata list", &client)
            .await;
        write(&client, pods.churn(200, 100, 100)).await;
        informer.converge("metadata watch events", &client).await;
        let kinds: BTreeSet<String> = informer
            .store
            .state()
            .iter()
            .map(|object| {
                object.types.as_ref().map_or("(none)".to_owned(), |t| {
                    format!("{}/{}", t.api_version, t.kind)
                })
            })
            .collect();
        assert_eq!(
            kinds,
            BTreeSet::from(["meta.k8s.io/v1/PartialObjectMetadata".to_owned()]),
            "listed and watched objects are PartialObjectMetadata"
        );
        drop(server);
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// Several pods at one revision

/// An etcd transaction that writes ten pods is one revision: a live watch delivers ten
/// ADDED events, all at that resourceVersion, as etcd's own watch does (the disruption
/// tests write in such transactions too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pod_one_transaction_writes_reaches_a_live_watch() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let server = ApiServer::start(&etcd.endpoint(), free_port()).await;
        let api = pods_of(&server);
        let mut pods = Pods::default();
        write(&client, pods.churn(1, 0, 0)).await;
        let n = api
            .list(&ListParams::default())
            .await
            .expect("a list")
            .metadata
            .resource_version
            .expect("a list carries its resourceVersion");
        let stream = api
            .watch(&WatchParams::default(), &n)
            .await
            .expect("a watch from the list");
        let mut stream = std::pin::pin!(stream);
        // One transaction of ten pods, then one more pod as the end marker.
        write(&client, pods.churn(10, 0, 0)).await;
        write(&client, pods.churn(1, 0, 0)).await;
        let marker = pod_name(11);
        let mut got = Vec::new();
        let deadline = tokio::time::Instant::now() + CONVERGE;
        loop {
            let event = tokio::time::timeout_at(deadline, stream.next())
                .await
                .unwrap_or_else(|_| panic!("no {marker} within {CONVERGE:?}; got {got:?}"))
                .expect("the watch stays open")
                .expect("events decode");
            match event {
                WatchEvent::Added(pod) => {
                    let name = pod.name_any();
                    got.push((name.clone(), rv_of(&pod)));
                    if name == marker {
                        break;
                    }
                }
                WatchEvent::Bookmark(_) => {}
                other => panic!("only ADDED events expected, got {other:?}"),
            }
        }
        let names: Vec<&str> = got.iter().map(|(name, _)| name.as_str()).collect();
        let expected: Vec<String> = (1..=11).map(pod_name).collect();
        assert_eq!(
            names, expected,
            "one ADDED per pod of the transaction, then the marker"
        );
        let revisions: BTreeSet<i64> = got[..10].iter().map(|(_, rv)| *rv).collect();
        assert_eq!(
            revisions.len(),
            1,
            "the transaction's pods share its revision: {got:?}"
        );
        drop(server);
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// 4: paged lists

/// `Api::<Pod>::list` with `limit=100` pages through 1,000 pods with continue tokens:
/// every pod exactly once, at etcd's resourceVersion at the first page (pods created and
/// deleted after it do not change later pages: the token pins the list's revision); a
/// continue token whose revision etcd compacted answers 410 Expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paged_list_returns_every_pod_once_and_a_compacted_continue_token_is_410() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let server = ApiServer::start(&etcd.endpoint(), free_port()).await;
        let api = pods_of(&server);
        let mut pods = Pods::default();
        write(&client, pods.churn(1000, 0, 0)).await;
        let at_start = etcd_pods(&client).await;
        assert_eq!(at_start.len(), 1000);

        let mut seen: Vec<(String, i64)> = Vec::new();
        let mut token: Option<String> = None;
        let mut list_rvs = BTreeSet::new();
        let mut pages = 0;
        loop {
            let mut params = ListParams::default().limit(100);
            if let Some(token) = &token {
                params = params.continue_token(token);
            }
            let page = api
                .list(&params)
                .await
                .unwrap_or_else(|e| panic!("list page {}: {e}", pages + 1));
            pages += 1;
            assert!(
                page.items.len() <= 100,
                "page {pages}: {} items",
                page.items.len()
            );
            list_rvs.insert(page.metadata.resource_version.clone());
            seen.extend(page.items.iter().map(|p| (p.name_any(), rv_of(p))));
            if pages == 1 {
                // Pods created, modified and deleted after the first page: the later
                // pages still show the state at its revision.
                write(&client, pods.churn(50, 0, 0)).await;
                let mut late = Vec::new();
                for i in (990..1000).chain(500..510) {
                    late.push(TxnOp::delete(pod_key(i), None));
                }
                for i in 900..910 {
                    late.push(TxnOp::put(pod_key(i), pod_doc(i, "late"), None));
                }
                write(&client, late).await;
            }
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                break;
            }
            assert!(pages < 100, "the continue tokens do not end");
        }
        assert_eq!(pages, 10, "1,000 pods in pages of 100");
        assert_eq!(
            list_rvs.len(),
            1,
            "every page carries the first page's resourceVersion: {list_rvs:?}"
        );
        let names: BTreeSet<&String> = seen.iter().map(|(name, _)| name).collect();
        assert_eq!(names.len(), seen.len(), "no pod listed twice");
        let seen: BTreeMap<String, i64> = seen.into_iter().collect();
        assert!(
            seen == at_start,
            "the pages hold etcd's pods at the first page's revision: {}",
            diff(&at_start, &seen)
        );

        // A token whose revision is compacted.
        let first = api
            .list(&ListParams::default().limit(100))
            .await
            .expect("a first page");
        let token = first.metadata.continue_.expect("a continue token");
        write(&client, pods.churn(1, 0, 0)).await;
        etcd.compact().await;
        match api
            .list(&ListParams::default().limit(100).continue_token(&token))
            .await
        {
            Err(kube::Error::Api(status)) => {
                assert_eq!(
                    (status.code, status.reason.as_str()),
                    (410, "Expired"),
                    "{status:?}"
                );
            }
            other => panic!(
                "a compacted continue token must answer 410 Expired, got {:?}",
                other.map(|list| list.items.len())
            ),
        }
        drop(server);
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// 5: the history of a raw watch at 10,000 pods

/// One event as the client received it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Delivered {
    revision: i64,
    name: String,
    kind: &'static str,
}

/// A relist after a 410: the watch had delivered up to `after`; the list is at `at`.
#[derive(Clone, Copy, Debug)]
struct Relist {
    after: i64,
    at: i64,
}

/// What the raw watch client has done, shared with the test.
#[derive(Default)]
struct Recorded {
    /// The list at N, with every delivered event replayed onto it (and relists).
    state: BTreeMap<String, i64>,
    delivered: Vec<Delivered>,
    relists: Vec<Relist>,
    /// The resourceVersion the next watch starts from.
    last: i64,
    /// The resourceVersion the open watch started from: a revision that wrote several pods
    /// may be cut in the middle, so the watch from it sends that revision's events again.
    resumed_from: i64,
    /// Events at `resumed_from` that the state already held: sent again, not delivered.
    repeats: usize,
    /// Watches opened (the first included).
    opened: usize,
    /// Contract breaches seen while replaying (ADDED for a pod held, ...), and events
    /// that did not decode.
    problems: Vec<String>,
}

impl Recorded {
    fn problem(&mut self, problem: String) {
        if self.problems.len() < 20 {
            self.problems.push(problem);
        }
    }

    fn apply(&mut self, kind: &'static str, pod: &Pod) {
        let name = pod.name_any();
        let revision = rv_of(pod);
        let held_already = match kind {
            "DELETED" => !self.state.contains_key(&name),
            _ => self.state.get(&name) == Some(&revision),
        };
        if revision == self.resumed_from && held_already {
            self.repeats += 1;
            return;
        }
        if revision < self.last {
            self.problem(format!(
                "{kind} {name} at {revision} after resourceVersion {}",
                self.last
            ));
        }
        self.last = self.last.max(revision);
        let held = self.state.contains_key(&name);
        match (kind, held) {
            ("ADDED", true) => self.problem(format!("ADDED {name} at {revision}, already held")),
            ("MODIFIED" | "DELETED", false) => {
                self.problem(format!("{kind} {name} at {revision}, never held"))
            }
            _ => {}
        }
        if kind == "DELETED" {
            self.state.remove(&name);
        } else {
            self.state.insert(name.clone(), revision);
        }
        self.delivered.push(Delivered {
            revision,
            name,
            kind,
        });
    }
}

/// Watches pods from `from` (`Api::watch`, as a client does by hand), re-opening from the
/// last resourceVersion seen whenever the stream ends, and relisting (as informers do)
/// when the server answers 410, until `stop`.
async fn record_watch(
    api: Api<Pod>,
    from: i64,
    recorded: Arc<Mutex<Recorded>>,
    stop: CancellationToken,
) {
    recorded.lock().expect("recorded lock").last = from;
    while !stop.is_cancelled() {
        let last = recorded.lock().expect("recorded lock").last.to_string();
        let params = WatchParams::default();
        let stream = tokio::select! {
            _ = stop.cancelled() => return,
            opened = api.watch(&params, &last) => opened,
        };
        let stream = match stream {
            Ok(stream) => stream,
            Err(_) => {
                // The apiserver is down, or the path to it cut: try again.
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(50)) => continue,
                }
            }
        };
        {
            let mut rec = recorded.lock().expect("recorded lock");
            rec.opened += 1;
            rec.resumed_from = rec.last;
        }
        let mut stream = std::pin::pin!(stream);
        let mut relist = false;
        loop {
            let item = tokio::select! {
                _ = stop.cancelled() => return,
                item = stream.next() => item,
            };
            let mut rec = recorded.lock().expect("recorded lock");
            match item {
                None => break,
                Some(Ok(WatchEvent::Added(pod))) => rec.apply("ADDED", &pod),
                Some(Ok(WatchEvent::Modified(pod))) => rec.apply("MODIFIED", &pod),
                Some(Ok(WatchEvent::Deleted(pod))) => rec.apply("DELETED", &pod),
                Some(Ok(WatchEvent::Bookmark(bookmark))) => {
                    let revision: i64 = bookmark.metadata.resource_version.parse().unwrap_or(-1);
                    if revision < rec.last {
                        let problem = format!("BOOKMARK at {revision} after {}", rec.last);
                        rec.problem(problem);
                    }
                    rec.last = rec.last.max(revision);
                }
                Some(Ok(WatchEvent::Error(status))) if status.code == 410 => {
                    relist = true;
                    break;
                }
                Some(Ok(WatchEvent::Error(status))) => {
                    rec.problem(format!("ERROR event {status:?}"));
                    break;
                }
                Some(Err(kube::Error::SerdeError(e))) => {
                    rec.problem(format!(
                        "an event that does not decode as a core/v1 Pod: {e}"
                    ));
                }
                // The connection broke: re-open.
                Some(Err(_)) => break,
            }
        }
        if relist {
            let params = ListParams::default();
            loop {
                let listed = tokio::select! {
                    _ = stop.cancelled() => return,
                    listed = api.list(&params) => listed,
                };
                match listed {
                    Ok(list) => {
                        let at: i64 = list
                            .metadata
                            .resource_version
                            .as_deref()
                            .and_then(|rv| rv.parse().ok())
                            .expect("a list carries its resourceVersion");
                        let mut rec = recorded.lock().expect("recorded lock");
                        let after = rec.last;
                        if at < after {
                            rec.problem(format!("a relist at {at}, behind {after}"));
                        }
                        rec.relists.push(Relist { after, at });
                        rec.state = list
                            .items
                            .iter()
                            .map(|p| (p.name_any(), rv_of(p)))
                            .collect();
                        rec.last = at;
                        break;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        }
    }
}

/// What etcd's history says a watch of the pods of [`NS`] delivers: each event, typed as
/// the watch types it (a put that created the key is ADDED, another put MODIFIED).
fn expected_from(history: &[history::HistoryEvent]) -> Vec<Delivered> {
    history
        .iter()
        .filter_map(|event| {
            let name = event.key.strip_prefix(PREFIX)?;
            if name.contains('/') {
                return None;
            }
            let kind = if !event.put {
                "DELETED"
            } else if event.create_revision == event.revision {
                "ADDED"
            } else {
                "MODIFIED"
            };
            Some(Delivered {
                revision: event.revision,
                name: name.to_owned(),
                kind,
            })
        })
        .collect()
}

/// A raw watch from a list's resourceVersion N, re-opened from the last resourceVersion
/// seen whenever its stream ends, while 10,000 pods are created and some modified and
/// deleted, across a connection cut, the apiserver killed and restarted, and a compaction.
///
/// Checked: replaying the delivered events onto the list at N gives etcd's final state;
/// no (pod, revision) is delivered twice (a watch from R sends R's events again when R
/// wrote several pods, since a cut may have fallen inside R: those the client already held
/// are counted apart, and only at R); revisions never go back; every event of etcd's
/// history after N is delivered, with its type. A cut that the apiserver's window covers
/// resumes without a relist. The restarted apiserver's window starts at its own list and
/// etcd compacted the resume resourceVersion meanwhile, so the server answers 410 (as
/// kube-apiserver does); the client then relists, as informers do, and the history
/// between its last event and that list is covered by the list (checked through the
/// final state) instead of by events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_watch_delivers_etcds_history_of_10000_pods_across_a_cut_a_restart_and_compaction() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let port = free_port();
        let mut server = ApiServer::start(&etcd.endpoint(), port).await;
        let proxy = FaultProxy::start(server.addr()).await;
        let api: Api<Pod> = Api::default_namespaced(kube_client(&proxy.endpoint()));
        let mut pods = Pods::default();
        write(&client, pods.churn(1000, 0, 0)).await;

        let list = api.list(&ListParams::default()).await.expect("the list at N");
        let n: i64 = list
            .metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse().ok())
            .expect("a list carries its resourceVersion");
        let at_n: BTreeMap<String, i64> =
            list.items.iter().map(|p| (p.name_any(), rv_of(p))).collect();
        assert_eq!(at_n, etcd_pods(&client).await, "the list at N is etcd's state");
        let recorded = Arc::new(Mutex::new(Recorded {
            state: at_n,
            ..Recorded::default()
        }));
        let stop = CancellationToken::new();
        let watch = tokio::spawn(record_watch(api, n, recorded.clone(), stop.clone()));
        let caught_up = |revision: i64| {
            let recorded = recorded.clone();
            move || {
                let last = recorded.lock().expect("recorded lock").last;
                async move { last >= revision }
            }
        };

        // Live, then through a cut between the client and the apiserver.
        write(&client, pods.churn(3000, 300, 300)).await;
        proxy.cut();
        eventually(CONVERGE, "the proxy to drop every connection", || {
            let open = proxy.open_connections();
            async move { open == 0 }
        })
        .await;
        write(&client, pods.churn(3000, 300, 300)).await;
        proxy.restore();
        let revision = etcd_revision(&client).await;
        eventually(CONVERGE, "the watch to resume after the cut", caught_up(revision)).await;
        assert!(
            recorded.lock().expect("recorded lock").relists.is_empty(),
            "a watch resumed inside the apiserver's window needs no relist"
        );

        // The apiserver killed; changes; etcd compacted; more changes; a new apiserver.
        server.kill().await;
        write(&client, pods.churn(2000, 200, 200)).await;
        let sentinel = format!("{PREFIX}~history/end");
        let mut events = history::read(&client, PREFIX, PREFIX_END, n, &sentinel).await;
        let compacted = etcd.compact().await;
        write(&client, pods.churn(1000, 200, 200)).await;
        server = ApiServer::start(&etcd.endpoint(), port).await;
        write(&client, pods.churn(1000, 200, 200)).await;

        let expected_state = etcd_pods(&client).await;
        assert_eq!(pods.next, 11_000, "10,000 pods created after N");
        {
            let recorded = recorded.clone();
            converge(
                "the state replayed from the watch",
                &expected_state,
                || recorded.lock().expect("recorded lock").state.clone(),
                || {
                    let rec = recorded.lock().expect("recorded lock");
                    format!(
                        "{} events delivered, last resourceVersion {}, {} watches opened, relists {:?}, problems {:?}",
                        rec.delivered.len(),
                        rec.last,
                        rec.opened,
                        rec.relists,
                        rec.problems
                    )
                },
            )
            .await;
        }
        events.extend(history::read(&client, PREFIX, PREFIX_END, compacted, &sentinel).await);
        stop.cancel();
        watch.await.expect("the watch task");
        drop(server);

        let rec = recorded.lock().expect("recorded lock");
        assert!(rec.problems.is_empty(), "contract breaches: {:?}", rec.problems);
        let mut seen = BTreeSet::new();
        let duplicates: Vec<&Delivered> = rec
            .delivered
            .iter()
            .filter(|d| !seen.insert((d.name.clone(), d.revision)))
            .collect();
        assert!(
            duplicates.is_empty(),
            "{} events delivered twice, e.g. {:?}",
            duplicates.len(),
            &duplicates[..duplicates.len().min(3)]
        );
        let backwards = rec
            .delivered
            .windows(2)
            .filter(|w| w[1].revision < w[0].revision)
            .count();
        assert_eq!(backwards, 0, "revisions never go back");
        for relist in &rec.relists {
            assert!(
                rec.delivered
                    .iter()
                    .all(|d| d.revision <= relist.after || d.revision > relist.at),
                "no event between a relist's last event and its list: {relist:?}"
            );
        }
        // Every event of etcd's history after N, but those a relist's list covers.
        let covered = |revision: i64| {
            rec.relists
                .iter()
                .any(|r| r.after < revision && revision <= r.at)
        };
        let mut expected: Vec<Delivered> = expected_from(&events)
            .into_iter()
            .filter(|e| !covered(e.revision))
            .collect();
        let mut delivered = rec.delivered.clone();
        expected.sort();
        delivered.sort();
        let missing: Vec<&Delivered> =
            expected.iter().filter(|e| delivered.binary_search(e).is_err()).collect();
        let unexpected: Vec<&Delivered> =
            delivered.iter().filter(|d| expected.binary_search(d).is_err()).collect();
        assert!(
            missing.is_empty() && unexpected.is_empty(),
            "etcd's history after {n} (relists {:?}): {} events not delivered (e.g. {:?}), {} delivered that the history lacks (e.g. {:?})",
            rec.relists,
            missing.len(),
            &missing[..missing.len().min(3)],
            unexpected.len(),
            &unexpected[..unexpected.len().min(3)],
        );
        assert!(
            rec.relists.len() <= 1,
            "only the resume across the restart and compaction may relist: {:?}",
            rec.relists
        );
    })
    .await;
}

/// The next event of `stream` but BOOKMARKs, as its type and pod, within [`CONVERGE`];
/// panics on an ERROR, a broken stream or an event that does not decode. `after` names
/// the resourceVersion the test waits past, for the message.
async fn next_change<S>(stream: &mut std::pin::Pin<&mut S>, after: i64) -> (&'static str, Pod)
where
    S: Stream<Item = kube::Result<WatchEvent<Pod>>>,
{
    loop {
        let item = tokio::time::timeout(CONVERGE, stream.next())
            .await
            .unwrap_or_else(|_| panic!("no event within {CONVERGE:?} after {after}"))
            .expect("the watch stays open until the client cuts it")
            .expect("events decode");
        return match item {
            WatchEvent::Added(pod) => ("ADDED", pod),
            WatchEvent::Modified(pod) => ("MODIFIED", pod),
            WatchEvent::Deleted(pod) => ("DELETED", pod),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(status) => panic!("an ERROR event: {status:?}"),
        };
    }
}

/// A kube client's pods of [`NS`] on `server`, without a proxy.
fn pods_of(server: &ApiServer) -> Api<Pod> {
    Api::default_namespaced(kube_client(&format!("http://{}", server.addr())))
}

/// A raw watch that its client cuts every 101 to 250 events, so nearly always inside one
/// of the transactions that each write 100 pods at one revision, and re-opens from the
/// last resourceVersion it saw: the watch from that resourceVersion sends the cut
/// revision whole again, so nothing of it is lost (what the client already held comes
/// again, and only at that revision). 6,000 pods created, 3,000 modified and 3,000 deleted
/// after the list at N: the first watches start before the watch cache's window (10,000
/// events) and are served from etcd watches of their own, the later ones from the window.
///
/// Checked against etcd's history after N: every event delivered, with its type, none
/// twice; replaying them onto the list at N gives etcd's state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_watch_cut_inside_multi_pod_revisions_loses_none_of_their_events() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let server = ApiServer::start(&etcd.endpoint(), free_port()).await;
        let api = pods_of(&server);
        let mut pods = Pods::default();
        write(&client, pods.churn(1000, 0, 0)).await;
        let list = api.list(&ListParams::default()).await.expect("the list at N");
        let n: i64 = list
            .metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse().ok())
            .expect("a list carries its resourceVersion");
        let at_n: BTreeMap<String, i64> =
            list.items.iter().map(|p| (p.name_any(), rv_of(p))).collect();
        assert_eq!(at_n, etcd_pods(&client).await, "the list at N is etcd's state");
        write(&client, pods.churn(3000, 0, 0)).await;
        write(&client, pods.churn(3000, 1500, 1500)).await;
        write(&client, pods.churn(0, 1500, 1500)).await;
        // One pod alone marks the end: its revision is never cut.
        write(&client, pods.churn(1, 0, 0)).await;
        let end = etcd_revision(&client).await;

        let mut rec = Recorded {
            state: at_n,
            last: n,
            ..Recorded::default()
        };
        let mut round = 0;
        while rec.last < end {
            round += 1;
            // More than a revision's 100 events, so that every watch gets further.
            let cut_after = 101 + (round * 37) % 150;
            rec.opened += 1;
            rec.resumed_from = rec.last;
            let stream = api
                .watch(&WatchParams::default(), &rec.last.to_string())
                .await
                .expect("a watch from the last resourceVersion");
            let mut stream = std::pin::pin!(stream);
            let mut taken = 0;
            while taken < cut_after && rec.last < end {
                let (kind, pod) = next_change(&mut stream, rec.last).await;
                rec.apply(kind, &pod);
                taken += 1;
            }
            // Dropping the stream closes the connection: the client has seen part of the
            // revision of its last event.
        }
        assert!(rec.problems.is_empty(), "contract breaches: {:?}", rec.problems);
        assert_eq!(
            rec.state,
            etcd_pods(&client).await,
            "the state replayed from the watch is etcd's"
        );
        let sentinel = format!("{PREFIX}~history/end");
        let events = history::read(&client, PREFIX, PREFIX_END, n, &sentinel).await;
        let mut expected = expected_from(&events);
        let mut delivered = rec.delivered.clone();
        expected.sort();
        delivered.sort();
        let missing: Vec<&Delivered> =
            expected.iter().filter(|e| delivered.binary_search(e).is_err()).collect();
        let twice = delivered.windows(2).filter(|w| w[0] == w[1]).count();
        assert!(
            missing.is_empty() && twice == 0 && delivered.len() == expected.len(),
            "etcd's history after {n} over {} watches: {} events, {} delivered, {} not delivered (e.g. {:?}), {twice} delivered twice",
            rec.opened,
            expected.len(),
            delivered.len(),
            missing.len(),
            &missing[..missing.len().min(3)],
        );
        assert!(
            rec.repeats > 0,
            "the cuts fell inside revisions, whose events then came again"
        );
        drop(server);
    })
    .await;
}

/// A watch of one pod (`fieldSelector=metadata.name=`) resumed from a revision at which a
/// transaction wrote it with 99 other pods gets its next change, not that revision again:
/// such a watch sees at most one event per revision, so none of its revisions can be cut
/// in the middle. 3,000 pods created, modified and deleted 100 to a transaction; checked
/// for every 250th pod against etcd's history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_pod_watch_resumed_at_a_multi_pod_revision_repeats_nothing() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let server = ApiServer::start(&etcd.endpoint(), free_port()).await;
        let api = pods_of(&server);
        let start = etcd_revision(&client).await;
        let mut pods = Pods::default();
        write(&client, pods.churn(3000, 0, 0)).await;
        write(&client, pods.churn(0, 3000, 0)).await;
        write(&client, pods.churn(0, 0, 3000)).await;
        let sentinel = format!("{PREFIX}~history/end");
        let history = history::read(&client, PREFIX, PREFIX_END, start, &sentinel).await;
        let expected = expected_from(&history);
        let per_revision =
            |revision: i64| expected.iter().filter(|e| e.revision == revision).count();
        for i in (0..3000).step_by(250) {
            let name = pod_name(i);
            let changes: Vec<&Delivered> = expected.iter().filter(|e| e.name == name).collect();
            let kinds: Vec<&str> = changes.iter().map(|e| e.kind).collect();
            assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"], "{name}'s history");
            assert!(
                changes.iter().all(|e| per_revision(e.revision) > 1),
                "{name} was written with other pods: {changes:?}"
            );
            let params = WatchParams::default().fields(&format!("metadata.name={name}"));
            // From just before each change, and from each change (but the last).
            let froms = [
                changes[0].revision - 1,
                changes[0].revision,
                changes[1].revision,
            ];
            let nexts = [changes[0], changes[1], changes[2]];
            for (from, next) in froms.into_iter().zip(nexts) {
                let stream = api
                    .watch(&params, &from.to_string())
                    .await
                    .expect("a watch of one pod");
                let mut stream = std::pin::pin!(stream);
                let (kind, pod) = next_change(&mut stream, from).await;
                let got = Delivered {
                    revision: rv_of(&pod),
                    name: pod.name_any(),
                    kind,
                };
                assert_eq!(&got, next, "the first event of {name} after {from}");
            }
        }
        drop(server);
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// 6: a thousand watchers, one etcd watch

/// Opens `GET /api/v1/namespaces/default/pods?watch=true` on a new connection and reads
/// until `needle` has arrived; returns the connection and what it read.
async fn raw_watch(port: u16, needle: &str) -> (TcpStream, Vec<u8>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the apiserver");
    let request = format!(
        "GET /api/v1/namespaces/{NS}/pods?watch=true HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send a watch");
    let mut seen = Vec::new();
    read_until(&mut stream, &mut seen, needle).await;
    assert!(
        seen.starts_with(b"HTTP/1.1 200"),
        "a watch answers 200: {}",
        String::from_utf8_lossy(&seen[..seen.len().min(200)])
    );
    (stream, seen)
}

/// Reads into `seen` until it contains `needle`.
async fn read_until(stream: &mut TcpStream, seen: &mut Vec<u8>, needle: &str) {
    let mut buf = [0u8; 8192];
    while !String::from_utf8_lossy(seen).contains(needle) {
        let n = stream.read(&mut buf).await.expect("read a watch");
        assert!(
            n > 0,
            "the watch ended before {needle}: {}",
            String::from_utf8_lossy(seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
}

/// 1,000 pod watches through the API at once (raw HTTP, one connection each) add at most
/// two etcd watchers: every HTTP watch is served from the apiserver's watch cache, fed by
/// one etcd watch of the pods (kube-apiserver's Cacher). And each of them gets a pod
/// created afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_pod_watchers_cost_etcd_at_most_two_watchers() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let server = ApiServer::start(&etcd.endpoint(), free_port()).await;
        // A pod written after the apiserver is ready reaches a first watcher: the
        // apiserver's etcd watches are open (the baseline counts them).
        let mut pods = Pods::default();
        write(&client, pods.churn(1, 0, 0)).await;
        let first = raw_watch(server.port, &format!("\"name\":\"{}\"", pod_name(0))).await;
        let before = etcd.metric("etcd_debugging_mvcc_watcher_total").await;
        assert!(before >= 1.0, "the apiserver watches etcd");

        let seed = format!("\"name\":\"{}\"", pod_name(0));
        let watchers: Vec<(TcpStream, Vec<u8>)> = futures::stream::iter(0..1000)
            .map(|_| raw_watch(server.port, &seed))
            .buffer_unordered(100)
            .collect()
            .await;
        let after = etcd.metric("etcd_debugging_mvcc_watcher_total").await;
        assert!(
            after - before <= 2.0,
            "1,000 API watches of pods added {} etcd watchers ({before} → {after})",
            after - before
        );

        // Every one of them gets the next pod.
        write(&client, pods.churn(1, 0, 0)).await;
        let needle = format!("\"name\":\"{}\"", pod_name(1));
        let got = futures::stream::iter(watchers.into_iter().chain([first]))
            .map(|(mut stream, mut seen)| {
                let needle = needle.clone();
                async move {
                    tokio::time::timeout(CONVERGE, read_until(&mut stream, &mut seen, &needle))
                        .await
                        .is_ok()
                }
            })
            .buffer_unordered(1001)
            .filter(|ok| std::future::ready(*ok))
            .count()
            .await;
        assert_eq!(
            got, 1001,
            "every watcher gets the pod created after they connected"
        );
        drop(server);
    })
    .await;
}
