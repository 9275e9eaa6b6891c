//! `api-list`, `api-watch` and `api-get`: the Kubernetes API of `kcm apiserver` (run in
//! the bench process, on loopback, over the bench's prefix) against etcd-client doing the
//! same reads directly (`write` has `api-create` and `api-update`, the writes; `apply`
//! has `api-apply`, server-side apply).
//!
//! - `api-list`: one namespace's pods listed as JSON (a consistent read, served by the
//!   watch cache once it has caught up with etcd, and `resourceVersion=0`) and as a
//!   Table, against one raw range of the same keys with every value parsed; figure: pods
//!   per second (raw time / API time).
//! - `api-watch`: many HTTP watches of one namespace's pods while pods are created;
//!   events delivered per second over all of them, against one raw etcd watch of the same
//!   number of creates; also the etcd watchers the HTTP watches added (etcd's `/metrics`)
//!   and the bench process's RSS growth from the apiserver's start.
//! - `api-get`: single-object GETs from the watch cache and as consistent reads, under a
//!   writer, against raw single-key gets: p50 and p99.
//!
//! The client is a minimal HTTP/1.1 one over tokio's `TcpStream` (keep-alive GETs with
//! Content-Length or chunked bodies; watches as chunked streams of newline-terminated
//! events): hyper's client is not in the dependency tree, and a bench client should cost
//! as little as possible beside the server it measures. Its parsing is pure and tested.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use etcd_client::{EventType, GetOptions, WatchOptions};
use rand::Rng as _;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

mod apply;
mod http;
mod write;

use http::{HttpClient, HttpWatch};

use super::fixtures::{controller, pod_document};
use super::report::{median, percentile, row};
use super::{Bench, Row};
use crate::api::{self, Pod};
use crate::apiserver;
use crate::etcd_process::local_client_addr;

/// The representation `kubectl get` asks for.
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// etcd's gauge of open watchers (`/metrics` on its client URL).
const ETCD_WATCHERS: &str = "etcd_debugging_mvcc_watcher_total";

/// How long any one scenario may wait for the API or a watch.
const LIMIT: Duration = Duration::from_secs(300);

/// An apiserver served from the bench process over one prefix.
pub(super) struct RunningApi {
    pub(super) addr: SocketAddr,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl RunningApi {
    pub(super) async fn stop(self) -> anyhow::Result<()> {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .context("the apiserver did not stop within 30s")?
            .context("apiserver task")?
    }
}

impl Bench {
    /// Starts an apiserver over `prefix` on a free loopback port and waits until its
    /// watch caches have synced (`/readyz`).
    pub(super) async fn start_apiserver(&self, prefix: &str) -> anyhow::Result<RunningApi> {
        let config = apiserver::Config {
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..apiserver::Config::default()
        };
        let listener = apiserver::bind(&config).await?;
        let addr = listener.bound().address;
        let registry = self.registry(prefix).await?;
        let (client, stop) = (self.client.clone(), CancellationToken::new());
        let shutdown = stop.clone().cancelled_owned();
        let task = tokio::spawn(async move {
            apiserver::serve(listener, &client, registry, config, shutdown).await
        });
        let api = RunningApi { addr, stop, task };
        let mut http = HttpClient::new(addr);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(response) = http.get("/readyz", None).await {
                if response.status == 200 {
                    return Ok(api);
                }
            }
            if Instant::now() >= deadline || api.task.is_finished() {
                let _ = api.stop().await;
                anyhow::bail!("the apiserver's watch caches did not sync within 60s");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// api-list: one namespace's pods through the API (JSON consistent, JSON at
    /// `resourceVersion=0`, a consistent Table) against one raw range with every value
    /// parsed. Targets: issue 33's.
    pub(super) async fn api_list(&self) -> anyhow::Result<Vec<Row>> {
        let prefix = self.prefix("api-list");
        let (namespace, n) = ("api-list", self.sizes.api_list_pods);
        let PodDocuments {
            documents, bytes, ..
        } = pod_documents(&prefix, namespace, n);
        self.create_all(documents, 256).await?;
        // What the apiserver holds once its watch caches have listed the pods: the pods'
        // cache, and the other kinds' (empty here) and the server itself. The heap's bytes
        // in use are the figure; RSS also counts what the heap keeps free and, in a
        // repeated run, is lowered by the free pages an earlier run left.
        let (heap_before, rss_before) = (crate::alloc::allocated(), vm_rss()?);
        let api = self.start_apiserver(&prefix).await?;
        let (heap_cached, rss_cached) = (crate::alloc::allocated(), vm_rss());
        let result = self.measure_lists(&prefix, namespace, n, api.addr).await;
        api.stop().await?;
        let ([raw, json, cached, table], served_bytes) = result?;
        let rss_growth = rss_cached?.saturating_sub(rss_before);
        let (held, held_is) = match (heap_before, heap_cached) {
            (Some(before), Some(cached)) => (cached.saturating_sub(before), "heap"),
            _ => (rss_growth, "RSS"),
        };
        let ms = |seconds: f64| seconds * 1000.0;
        let rate = |seconds: f64| n as f64 / seconds.max(1e-9);
        let baseline_is = format!("one raw range of the {n} keys, each value parsed");
        let lists = [
            (json, "JSON, consistent read (watch cache once fresh)", 2.0),
            (cached, "JSON, resourceVersion=0 (watch cache)", 4.0),
            (table, "Table (kubectl get), consistent read", 1.0),
        ];
        Ok(lists
            .into_iter()
            .map(|(seconds, how, target)| {
                row(
                    "api-list",
                    format!(
                        "pods/s, list of {n} pods, {how}: {:.1} ms vs {:.1} ms",
                        ms(seconds),
                        ms(raw)
                    ),
                    "pods/s",
                    rate(seconds),
                    rate(raw),
                    baseline_is.clone(),
                    Some((target, true)),
                )
            })
            .chain([row(
                "api-list",
                format!(
                    "{held_is} the apiserver added once its watch caches held the {n} pods (from its start to /readyz; RSS +{:.1} MiB; the documents as stored in etcd: {:.2} MiB)",
                    rss_growth as f64 / MIB,
                    bytes as f64 / MIB,
                ),
                "MiB",
                held as f64 / MIB,
                served_bytes as f64 / MIB,
                format!("the {n} pods' served JSON, which the cache holds"),
                Some((1.5, false)),
            )])
            .collect())
    }

    /// Median seconds of: the raw range, the JSON list, the cached JSON list, the Table;
    /// and the size of the JSON list.
    async fn measure_lists(
        &self,
        prefix: &str,
        namespace: &str,
        n: usize,
        addr: SocketAddr,
    ) -> anyhow::Result<([f64; 4], usize)> {
        let dir = self.pod_dir(prefix, namespace);
        let mut kv = self.registry(prefix).await?.kv();
        let path = format!("/api/v1/namespaces/{namespace}/pods");
        let cached_path = format!("{path}?resourceVersion=0");
        let requests = [
            (path.as_str(), None, "items"),
            (cached_path.as_str(), None, "items"),
            (path.as_str(), Some(TABLE), "rows"),
        ];
        let mut http = HttpClient::new(addr);
        let mut served_bytes = 0;
        // A first round, untimed: the connection, and every answer checked in full.
        for (path, accept, field) in requests {
            let response = http.get(path, accept).await?;
            if accept.is_none() {
                served_bytes = response.body.len();
            }
            let listed = response.json()?;
            let count = listed[field].as_array().map_or(0, Vec::len);
            anyhow::ensure!(count == n, "GET {path} ({accept:?}) gave {count} of {n}");
        }
        let mut times: [Vec<f64>; 4] = Default::default();
        for _ in 0..self.sizes.api_list_repeats {
            let started = Instant::now();
            let listed = kv
                .get(dir.as_str(), Some(GetOptions::new().with_prefix()))
                .await?;
            let mut parsed = 0;
            for kv in listed.kvs() {
                let _: serde_json::Value = serde_json::from_slice(kv.value())?;
                parsed += 1;
            }
            times[0].push(started.elapsed().as_secs_f64());
            anyhow::ensure!(parsed == n, "the raw range gave {parsed} of {n}");
            for (i, (path, accept, _)) in requests.into_iter().enumerate() {
                let started = Instant::now();
                let response = http.get(path, accept).await?;
                times[i + 1].push(started.elapsed().as_secs_f64());
                anyhow::ensure!(
                    response.status == 200 && !response.body.is_empty(),
                    "GET {path}: {}",
                    response.status
                );
            }
        }
        Ok((times.map(median), served_bytes))
    }

    /// api-watch: HTTP watches of one namespace's pods while pods are created, against
    /// one raw etcd watch of as many creates; the etcd watchers the HTTP watches add, and
    /// the RSS the apiserver adds to the bench process.
    pub(super) async fn api_watch(&self) -> anyhow::Result<Vec<Row>> {
        let prefix = self.prefix("api-watch");
        let (watchers, n) = (self.sizes.api_watchers, self.sizes.api_watch_pods);
        let namespace = "api-watch";
        raise_descriptor_limit((2 * watchers + 1024) as libc::rlim_t)?;
        let metrics_addr = self.etcd_metrics_addr()?;

        // The baseline first, under its own prefix (the apiserver never sees it).
        let raw_prefix = format!("{prefix}-raw");
        let raw_seconds = self.raw_watch_of_creates(&raw_prefix, namespace, n).await?;

        let PodDocuments {
            documents, bytes, ..
        } = pod_documents(&prefix, namespace, n);
        let rss_before = vm_rss()?;
        let etcd_before = etcd_watchers(metrics_addr).await?;
        let api = self.start_apiserver(&prefix).await?;
        let etcd_ready = etcd_watchers(metrics_addr).await?;
        let rss_started = vm_rss()?;
        let measured = async {
            let revision = self.revision().await?;
            let path = format!(
                "/api/v1/namespaces/{namespace}/pods?watch=true&resourceVersion={revision}"
            );
            // Every watch open (its response head received) before the first write.
            let opening = Arc::new(Semaphore::new(64));
            let mut opens = JoinSet::new();
            for _ in 0..watchers {
                let (opening, path, addr) = (opening.clone(), path.clone(), api.addr);
                opens.spawn(async move {
                    let _permit = opening.acquire_owned().await?;
                    HttpWatch::open(addr, &path).await
                });
            }
            let mut open = Vec::with_capacity(watchers);
            while let Some(watch) = opens.join_next().await {
                open.push(watch??);
            }
            let etcd_watching = etcd_watchers(metrics_addr).await?;
            let rss_open = vm_rss()?;
            let started = Instant::now();
            let mut reading = JoinSet::new();
            for (index, mut watch) in open.into_iter().enumerate() {
                reading.spawn(async move {
                    watch
                        .count_events(n)
                        .await
                        .with_context(|| format!("HTTP watcher {index}"))?;
                    anyhow::Ok((Instant::now(), watch))
                });
            }
            self.create_all(documents, 256).await?;
            let mut last = started;
            let mut done = Vec::with_capacity(watchers);
            let deadline = tokio::time::Instant::now() + LIMIT;
            while let Some(result) = tokio::time::timeout_at(deadline, reading.join_next())
                .await
                .with_context(|| {
                    format!("the HTTP watchers did not all see {n} events within {LIMIT:?}")
                })?
            {
                let (at, watch) = result??;
                last = last.max(at);
                done.push(watch);
            }
            let seconds = last.duration_since(started).as_secs_f64();
            // Measured with every watch still open.
            let rss_after = vm_rss()?;
            drop(done);
            anyhow::Ok((seconds, etcd_watching, rss_open, rss_after))
        }
        .await;
        api.stop().await?;
        let (api_seconds, etcd_watching, rss_open, rss_after) = measured?;
        let total = (watchers * n) as f64;
        let mib = |b: f64| b / MIB;
        let growth = |to: usize| mib(to.saturating_sub(rss_before) as f64);
        let own = etcd_ready - etcd_before;
        Ok(vec![
            row(
                "api-watch",
                format!(
                    "events/s over {watchers} HTTP watches × {n} pod creates ({api_seconds:.2}s vs {raw_seconds:.2}s)"
                ),
                "events/s",
                total / api_seconds.max(1e-9),
                n as f64 / raw_seconds.max(1e-9),
                format!("one raw etcd watch of {n} creates"),
                // Each watch at least a twentieth of a raw watch's rate.
                Some((watchers as f64 / 20.0, true)),
            ),
            row(
                "api-watch",
                format!(
                    "etcd watchers added by {watchers} HTTP watches (the apiserver's own: {own:.0})"
                ),
                "watchers",
                etcd_watching - etcd_ready,
                watchers as f64,
                "2014: one etcd watch per HTTP watch",
                Some((0.0, false)),
            ),
            row(
                "api-watch",
                format!(
                    "RSS growth from the apiserver's start, {watchers} watches open, {n} pods (started +{:.1}, watches open +{:.1})",
                    growth(rss_started),
                    growth(rss_open)
                ),
                "MiB",
                growth(rss_after),
                mib(bytes as f64),
                format!("size of the {n} pod documents"),
                Some((40.0, false)),
            ),
        ])
    }

    /// Seconds from the first of `n` creates under `prefix` until one raw watch of their
    /// directory has seen them all.
    async fn raw_watch_of_creates(
        &self,
        prefix: &str,
        namespace: &str,
        n: usize,
    ) -> anyhow::Result<f64> {
        let documents = pod_documents(prefix, namespace, n).documents;
        let dir = self.pod_dir(prefix, namespace);
        let from = self.revision().await? + 1;
        let mut stream = self
            .client
            .watch_client()
            .watch(
                dir.as_str(),
                Some(WatchOptions::new().with_prefix().with_start_revision(from)),
            )
            .await
            .context("open the raw watch")?;
        let counting = tokio::spawn(async move {
            let mut seen = 0;
            while seen < n {
                let response = stream
                    .message()
                    .await
                    .context("raw watch")?
                    .context("raw watch closed")?;
                seen += response
                    .events()
                    .iter()
                    .filter(|e| e.event_type() == EventType::Put)
                    .count();
            }
            anyhow::Ok(Instant::now())
        });
        let started = Instant::now();
        self.create_all(documents, 256).await?;
        let done = tokio::time::timeout(LIMIT, counting)
            .await
            .context("the raw watch did not see every create")???;
        Ok(done.duration_since(started).as_secs_f64())
    }

    /// The address of etcd's `/metrics` (its first client URL, plain http).
    fn etcd_metrics_addr(&self) -> anyhow::Result<SocketAddr> {
        let endpoint = self
            .client_config
            .endpoints
            .first()
            .cloned()
            .unwrap_or_default();
        local_client_addr(&endpoint)
            .or_else(|| {
                endpoint
                    .strip_prefix("http://")
                    .and_then(|a| a.trim_end_matches('/').parse().ok())
            })
            .with_context(|| {
                format!("api-watch reads etcd's /metrics over plain http://, not {endpoint}")
            })
    }

    /// api-get: single-object GETs from the watch cache and as consistent reads, under a
    /// writer, against raw single-key gets.
    pub(super) async fn api_get(&self) -> anyhow::Result<Vec<Row>> {
        let prefix = self.prefix("api-get");
        let (namespace, pods, gets) = ("api-get", self.sizes.api_get_pods, self.sizes.api_gets);
        let PodDocuments {
            documents, names, ..
        } = pod_documents(&prefix, namespace, pods);
        self.create_all(documents.clone(), 256).await?;
        let api = self.start_apiserver(&prefix).await?;
        // The writer: one put at a time, round the pods, until the reads are done.
        let stop = CancellationToken::new();
        let writes = Arc::new(AtomicUsize::new(0));
        let writer = {
            let (mut kv, stop, writes) = (self.client.kv_client(), stop.clone(), writes.clone());
            tokio::spawn(async move {
                for (key, value) in documents.iter().cycle() {
                    if stop.is_cancelled() {
                        break;
                    }
                    kv.put(key.as_str(), value.clone(), None).await?;
                    writes.fetch_add(1, Ordering::Relaxed);
                }
                anyhow::Ok(())
            })
        };
        let measured = self
            .measure_gets(&prefix, namespace, &names, gets, api.addr)
            .await;
        stop.cancel();
        let written = writer.await.context("writer task");
        api.stop().await?;
        let (cached, consistent, raw, seconds) = measured?;
        written??;
        let write_rate = writes.load(Ordering::Relaxed) as f64 / seconds.max(1e-9);
        let p = |sorted: &[f64], q: f64| percentile(sorted, q);
        let under = format!("{gets} of {pods} pods, a writer at {write_rate:.0} puts/s");
        let baseline_is = "raw etcd-client get of the key, value parsed";
        let mut rows = Vec::new();
        for (times, how, target) in [
            (&cached, "resourceVersion=0 (watch cache)", 0.5),
            (&consistent, "consistent read (etcd)", 1.5),
        ] {
            rows.push(row(
                "api-get",
                format!("p50 GET pod, {how}, {under}"),
                "ms",
                p(times, 50.0),
                p(&raw, 50.0),
                baseline_is,
                Some((target, false)),
            ));
            rows.push(row(
                "api-get",
                format!("p99 GET pod, {how}, {under}"),
                "ms",
                p(times, 99.0),
                p(&raw, 99.0),
                baseline_is,
                None,
            ));
        }
        Ok(rows)
    }

    /// Milliseconds of every GET, sorted: from the cache, consistent, raw; and the seconds
    /// the reads took in all. The three kinds take turns, so they share the load.
    async fn measure_gets(
        &self,
        prefix: &str,
        namespace: &str,
        names: &[String],
        gets: usize,
        addr: SocketAddr,
    ) -> anyhow::Result<(Vec<f64>, Vec<f64>, Vec<f64>, f64)> {
        let mut http = HttpClient::new(addr);
        let mut kv = self.registry(prefix).await?.kv();
        let path = |name: &str| format!("/api/v1/namespaces/{namespace}/pods/{name}");
        // Untimed: the connection, and one answer of each kind checked.
        for query in ["?resourceVersion=0", ""] {
            let name = &names[0];
            let object = http
                .get(&format!("{}{query}", path(name)), None)
                .await?
                .json()?;
            anyhow::ensure!(
                object["metadata"]["name"] == name.as_str(),
                "GET {}{query} gave {object}",
                path(name)
            );
        }
        let (mut cached, mut consistent, mut raw) = (Vec::new(), Vec::new(), Vec::new());
        let started = Instant::now();
        for _ in 0..gets {
            let name = &names[rand::thread_rng().gen_range(0..names.len())];
            for (query, times) in [("?resourceVersion=0", &mut cached), ("", &mut consistent)] {
                let path = format!("{}{query}", path(name));
                let t0 = Instant::now();
                let response = http.get(&path, None).await?;
                times.push(t0.elapsed().as_secs_f64() * 1000.0);
                anyhow::ensure!(response.status == 200, "GET {path}: {}", response.status);
            }
            let key = api::object_key::<Pod>(prefix, namespace, name);
            let t0 = Instant::now();
            let got = kv.get(key.as_str(), None).await?;
            let value = got
                .kvs()
                .first()
                .context("the raw get found nothing")?
                .value();
            let _: serde_json::Value = serde_json::from_slice(value)?;
            raw.push(t0.elapsed().as_secs_f64() * 1000.0);
        }
        let seconds = started.elapsed().as_secs_f64();
        for times in [&mut cached, &mut consistent, &mut raw] {
            times.sort_by(f64::total_cmp);
        }
        Ok((cached, consistent, raw, seconds))
    }
}

/// Bytes in a MiB.
const MIB: f64 = 1024.0 * 1024.0;

/// Pods of one controller as the manager writes them.
struct PodDocuments {
    /// (key, value).
    documents: Vec<(String, Vec<u8>)>,
    names: Vec<String>,
    /// The values' total size.
    bytes: usize,
}

/// `n` pods of one controller in `namespace` under `prefix`.
fn pod_documents(prefix: &str, namespace: &str, n: usize) -> PodDocuments {
    let rc = controller(namespace, "api", n as i64, 0);
    let mut pods = PodDocuments {
        documents: Vec::with_capacity(n),
        names: Vec::with_capacity(n),
        bytes: 0,
    };
    for slot in 0..n as u64 {
        let (name, value) = pod_document(&rc, slot);
        pods.bytes += value.len();
        pods.documents
            .push((api::object_key::<Pod>(prefix, namespace, &name), value));
        pods.names.push(name);
    }
    pods
}

/// Resident set size of this process, from `/proc/self/status`, once the allocator's free
/// memory is returned to the system (it keeps some otherwise, and what earlier scenarios
/// freed would hide what the apiserver takes).
fn vm_rss() -> anyhow::Result<usize> {
    crate::alloc::give_back();
    let status = std::fs::read_to_string("/proc/self/status").context("read /proc/self/status")?;
    status_kib(&status, "VmRSS:")
        .map(|kib| kib * 1024)
        .context("no VmRSS in /proc/self/status")
}

/// The figure of a `/proc/PID/status` line such as `VmRSS:   1234 kB`.
fn status_kib(status: &str, field: &str) -> Option<usize> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// The value of an unlabelled series in Prometheus' text format.
fn metric_value(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?;
        rest.starts_with(' ')
            .then(|| rest.trim().parse().ok())
            .flatten()
    })
}

/// etcd's count of open watchers.
async fn etcd_watchers(addr: SocketAddr) -> anyhow::Result<f64> {
    let response = HttpClient::new(addr).get("/metrics", None).await?;
    anyhow::ensure!(
        response.status == 200,
        "etcd's /metrics at {addr}: {}",
        response.status
    );
    metric_value(&String::from_utf8_lossy(&response.body), ETCD_WATCHERS)
        .with_context(|| format!("etcd's /metrics at {addr} has no {ETCD_WATCHERS}"))
}

/// Raises this process's soft limit of open descriptors to `wanted` (at most the hard
/// limit): every HTTP watch costs the bench two, its end and the server's.
fn raise_descriptor_limit(wanted: libc::rlim_t) -> anyhow::Result<()> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit with a valid pointer to an rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Ok(());
        }
        if limit.rlim_cur >= wanted {
            return Ok(());
        }
        limit.rlim_cur = wanted.min(limit.rlim_max);
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
    anyhow::ensure!(
        limit.rlim_cur >= wanted,
        "api-watch needs {wanted} open files; the hard limit is {} (ulimit -Hn)",
        limit.rlim_max
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_and_metrics_figures_are_read_by_name() {
        let status = "Name:\tkcm\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(status_kib(status, "VmRSS:"), Some(1024));
        assert_eq!(status_kib(status, "VmSwap:"), None);
        let metrics = "# HELP etcd_debugging_mvcc_watcher_total Total number of watchers.\n\
            # TYPE etcd_debugging_mvcc_watcher_total gauge\n\
            etcd_debugging_mvcc_watcher_total_extra 9\n\
            etcd_debugging_mvcc_watcher_total 17\n";
        assert_eq!(metric_value(metrics, ETCD_WATCHERS), Some(17.0));
        assert_eq!(metric_value(metrics, "etcd_missing"), None);
    }
}
