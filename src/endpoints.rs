//! The endpoints controller: keeps each Service's Endpoints equal to the `ip:port` of the
//! pods its selector matches.
//!
//! Mirrors 2014's `pkg/service/endpoints_controller.go` (`SyncServiceEndpoints`,
//! `findPort`). Departures (ARCHITECTURE.md has the table): instead of one full pass every
//! 10 s, service and pod watch events queue the affected Services (a pod that gets its IP
//! shows in endpoints within a second) and the periodic pass remains as a safety net;
//! Endpoints are written by compare-and-swap, not last-writer-wins; and Endpoints whose
//! Service is gone are deleted (2014 leaked them).
//!
//! Pods are read from the pod informer (`informer`), shared with the replication manager
//! under `kcm controller-manager`: one pod watch and one pod store for both controllers.
//!
//! Invariant: an Endpoints object is written only when its set of entries changed, with
//! its entries sorted, keeping the fields kcm does not know.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::api::{Endpoints, IntOrString, ObjectMeta, Pod, Service};
use crate::controller::{log_notice, warn_if_stale, worker, SyncHandler};
use crate::etcd_watcher::{self, BackoffConfig, ResumableWatch, Update, WatchEvent, Watcher};
use crate::informer::{CachedPod, Delta, Informer, PodInformer, PodPorts};
use crate::labels::Selector;
use crate::registry::{Registry, StorageError};
use crate::status::Metrics;
use crate::workqueue::WorkQueue;

/// Services the 2014 controller left alone: the master's own services.
const MASTER_SERVICES: [&str; 2] = ["kubernetes", "kubernetes-ro"];

/// Settings of the endpoints controller.
#[derive(Clone, Debug)]
pub struct EndpointsConfig {
    /// Period of the full pass over every Service. Default 10 s (2014).
    pub sync_period: Duration,
    /// Services synced in parallel. Default 5.
    pub concurrent_syncs: usize,
    /// How long shutdown waits for in-flight syncs. Default 8 s.
    pub shutdown_timeout: Duration,
    pub watch_backoff: BackoffConfig,
    /// How long a sync waits for the pod cache's first list before it reads etcd
    /// instead. Default 500 ms.
    pub cache_wait: Duration,
}

impl Default for EndpointsConfig {
    fn default() -> Self {
        EndpointsConfig {
            sync_period: Duration::from_secs(10),
            concurrent_syncs: 5,
            shutdown_timeout: Duration::from_secs(8),
            watch_backoff: BackoffConfig::default(),
            cache_wait: Duration::from_millis(500),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The pure core

/// `findPort`: the port of `pod` that `container_port` names.
///
/// A number is used as given; a name is looked up among every container's ports; absent,
/// 0 or "" means the first container's first port. `None` when nothing resolves.
pub fn find_port(pod: &Pod, container_port: Option<&IntOrString>) -> Option<u16> {
    PodPorts::of(pod).find(container_port)
}

/// `net.JoinHostPort(ip, port)`: IPv6 addresses are bracketed.
pub fn join_host_port(ip: &str, port: u16) -> String {
    match ip.parse::<IpAddr>() {
        Ok(addr) => SocketAddr::new(addr, port).to_string(),
        Err(_) => format!("{ip}:{port}"),
    }
}

/// The sorted, de-duplicated endpoints of `service` among `pods` (all in its namespace).
/// Pods without an IP or a resolvable port are skipped; phase is ignored, as in 2014.
pub fn endpoints_for(service: &Service, pods: &[Pod]) -> Vec<String> {
    let cached: Vec<Arc<CachedPod>> = pods.iter().map(|p| Arc::new(CachedPod::from(p))).collect();
    endpoints_for_cached(service, &cached)
}

/// [`endpoints_for`] over cached pods.
pub fn endpoints_for_cached(service: &Service, pods: &[Arc<CachedPod>]) -> Vec<String> {
    let selector = service.spec.selector.as_selector();
    let mut entries: Vec<String> = pods
        .iter()
        .filter(|pod| selector.matches(&pod.labels))
        .filter_map(|pod| {
            let Some(ip) = pod.pod_ip.as_deref() else {
                tracing::debug!(pod = %pod.key(), "no pod IP yet; skipped");
                return None;
            };
            let Some(port) = pod.ports.find(service.spec.container_port.as_ref()) else {
                tracing::debug!(pod = %pod.key(), "no port matches the service's containerPort; skipped");
                return None;
            };
            Some(join_host_port(ip, port))
        })
        .collect();
    entries.sort();
    entries.dedup();
    entries
}

// ---------------------------------------------------------------------------------------
// The controller

/// `EndpointController`.
pub struct EndpointsController {
    registry: Registry,
    config: EndpointsConfig,
    metrics: Arc<Metrics>,
    /// A pod informer the caller runs (and shares); without it, `run` runs its own.
    pods: Option<PodInformer>,
}

impl EndpointsController {
    pub fn new(registry: Registry, config: EndpointsConfig, metrics: Arc<Metrics>) -> Self {
        EndpointsController {
            registry,
            config,
            metrics,
            pods: None,
        }
    }

    /// Reads pods from `pods`, an informer the caller runs and may share.
    pub fn with_pod_informer(mut self, pods: PodInformer) -> Self {
        self.pods = Some(pods);
        self
    }

    /// Runs the controller until `shutdown` resolves (same shutdown contract as the
    /// replication manager: no new syncs, in-flight writes finish within the timeout).
    ///
    /// # Errors
    /// Only for a broken setup; etcd failures are retried.
    pub async fn run(
        self,
        watcher: Watcher,
        shutdown: impl Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        let backoff = self.config.watch_backoff.clone();
        let service_watch = watcher
            .resumable_list::<Service>(None, "", etcd_watcher::everything())?
            .with_backoff(backoff.clone());
        self.metrics
            .register_watch("services", service_watch.metrics());
        let stop = tokio_util::sync::CancellationToken::new();
        let mut watch_tasks = JoinSet::new();
        let pods = match &self.pods {
            Some(pods) => pods.clone(),
            None => {
                let pods: PodInformer = Informer::new(watcher.clone()).with_backoff(backoff);
                self.metrics
                    .register_watch("pods (endpoints)", pods.metrics());
                watch_tasks.spawn(pods.clone().run(stop.clone().cancelled_owned()));
                pods
            }
        };
        let pod_events = pods.subscribe();
        let result = self
            .run_loop(pods, service_watch, pod_events, shutdown)
            .await;
        stop.cancel();
        watch_tasks.shutdown().await;
        result
    }

    async fn run_loop(
        &self,
        pods: PodInformer,
        mut service_events: ResumableWatch<Service>,
        mut pod_events: mpsc::Receiver<Delta<CachedPod>>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        let queue = Arc::new(WorkQueue::<String>::new());
        {
            let queue = queue.clone();
            self.metrics
                .register_queue("endpoints", move || queue.len());
        }
        let pods_metrics = pods.metrics();
        let handler: SyncHandler = {
            let registry = self.registry.clone();
            let metrics = self.metrics.clone();
            let cache_wait = self.config.cache_wait;
            Arc::new(move |key: String| {
                let registry = registry.clone();
                let metrics = metrics.clone();
                let pods = pods.clone();
                Box::pin(async move {
                    let pods = PodSource::Cache(&pods, cache_wait);
                    sync_service_endpoints(&registry, &metrics, pods, &key).await
                })
            })
        };
        let mut workers = JoinSet::new();
        for _ in 0..self.config.concurrent_syncs.max(1) {
            workers.spawn(worker(
                "endpoints",
                queue.clone(),
                handler.clone(),
                self.metrics.clone(),
            ));
        }
        let mut index = ServiceIndex::default();
        // The first full pass runs at once: it also deletes Endpoints left behind by
        // Services deleted while kcm was down.
        let mut resync = tokio::time::interval(self.config.sync_period);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                _ = resync.tick() => {
                    warn_if_stale("endpoints", "pods", &pods_metrics, self.config.sync_period);
                    for key in index.keys() {
                        queue.add(key);
                    }
                    match self.orphaned_endpoints(&index).await {
                        Ok(orphans) => orphans.into_iter().for_each(|key| queue.add(key)),
                        Err(e) => tracing::debug!(error = %e, "listing endpoints failed; next pass retries"),
                    }
                }
                // Cancel-safe: the watch's work in flight lives in the stream.
                update = service_events.next() => match update {
                    Update::Event(WatchEvent::Added(service) | WatchEvent::Modified(service), _) => {
                        index.upsert(&service);
                        queue.add(service.metadata.key());
                    }
                    Update::Event(WatchEvent::Deleted(service), _) => {
                        index.remove(&service.metadata);
                        queue.add(service.metadata.key());
                    }
                    notice => log_notice("services", &notice),
                },
                Some(delta) = pod_events.recv() => {
                    for key in index.services_for(&delta) {
                        queue.add(key);
                    }
                }
            }
        }
        // Unsubscribe first, so a shared informer is not held back by this loop.
        drop(pod_events);
        queue.shut_down();
        let drained = tokio::time::timeout(self.config.shutdown_timeout, async {
            while workers.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!("in-flight endpoints syncs did not finish in time; abandoning them");
            workers.shutdown().await;
        }
        Ok(())
    }

    /// Keys of Endpoints objects whose Service the index does not know.
    async fn orphaned_endpoints(&self, index: &ServiceIndex) -> Result<Vec<String>, StorageError> {
        let listed = self
            .registry
            .list::<Endpoints>(None, &Selector::everything())
            .await?;
        Ok(listed
            .items
            .iter()
            .map(|e| e.metadata.key())
            .filter(|key| !index.contains(key))
            .collect())
    }
}

/// Where a sync reads pods from.
#[derive(Clone, Copy)]
pub enum PodSource<'a> {
    /// A fresh list of the namespace (2014).
    Etcd,
    /// The pod informer, once it has listed (waiting at most this long, else etcd).
    Cache(&'a PodInformer, Duration),
}

/// `syncServiceEndpoints` for one Service: computes its endpoints from the pods in its
/// namespace and writes them if they changed; deletes the Endpoints of a Service that is
/// gone.
///
/// # Errors
/// When etcd fails or a write conflicts (the key is retried with backoff).
pub async fn sync_service_endpoints(
    registry: &Registry,
    metrics: &Metrics,
    pods: PodSource<'_>,
    key: &str,
) -> anyhow::Result<()> {
    let Some((namespace, name)) = key.split_once('/') else {
        anyhow::bail!("invalid service key {key:?}");
    };
    if MASTER_SERVICES.contains(&name) {
        return Ok(());
    }
    let service = match registry.get::<Service>(namespace, name).await {
        Ok(service) => service,
        Err(StorageError::NotFound { .. }) => {
            return match registry.delete::<Endpoints>(namespace, name, None).await {
                Ok(_) => {
                    tracing::info!(service = %key, "service gone; deleted its endpoints");
                    metrics.endpoints_writes.inc();
                    Ok(())
                }
                Err(StorageError::NotFound { .. }) => Ok(()),
                Err(e) => Err(e.into()),
            };
        }
        Err(StorageError::Decode(e)) => {
            tracing::debug!(service = %key, error = %e, "malformed service skipped");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    if service.spec.selector.is_empty() {
        // Early 2015 skipped services without selectors; an empty selector would
        // otherwise select every pod in the namespace.
        return Ok(());
    }
    let selector = service.spec.selector.as_selector();
    let selected = match pods {
        PodSource::Cache(cache, wait) if cache.wait_for(0, wait).await => {
            cache.select(namespace, &selector)
        }
        _ => registry
            .list::<Pod>(Some(namespace), &selector)
            .await?
            .items
            .iter()
            .map(|pod| Arc::new(CachedPod::from(pod)))
            .collect(),
    };
    let entries = endpoints_for_cached(&service, &selected);
    match registry.get::<Endpoints>(namespace, name).await {
        Err(StorageError::NotFound { .. }) => {
            let endpoints = Endpoints {
                metadata: ObjectMeta::named(namespace, name),
                endpoints: entries,
                ..Endpoints::default()
            };
            registry.create(&endpoints).await?;
            metrics.endpoints_writes.inc();
            tracing::info!(service = %key, endpoints = ?endpoints.endpoints, "created endpoints");
        }
        Ok(mut current) => {
            let mut old = current.endpoints.clone();
            old.sort();
            old.dedup();
            if old == entries && current.endpoints == entries {
                return Ok(());
            }
            current.endpoints = entries;
            registry.update(&current).await?;
            metrics.endpoints_writes.inc();
            tracing::info!(service = %key, endpoints = ?current.endpoints, "updated endpoints");
        }
        // A malformed Endpoints value is replaced: kcm owns these objects.
        Err(StorageError::Decode(e)) => {
            tracing::warn!(service = %key, error = %e, "replacing malformed endpoints");
            registry.delete::<Endpoints>(namespace, name, None).await?;
            anyhow::bail!("replaced malformed endpoints {key}; retrying");
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// The Services the loop knows of, by namespace, so that a pod change can be mapped to
/// the Services whose selector matched it before or after.
#[derive(Default)]
struct ServiceIndex {
    selectors: HashMap<String, HashMap<String, Selector>>,
}

impl ServiceIndex {
    fn keys(&self) -> Vec<String> {
        self.selectors
            .iter()
            .flat_map(|(ns, names)| names.keys().map(move |name| format!("{ns}/{name}")))
            .collect()
    }

    fn contains(&self, key: &str) -> bool {
        key.split_once('/')
            .and_then(|(ns, name)| self.selectors.get(ns).map(|names| names.contains_key(name)))
            .unwrap_or(false)
    }

    fn upsert(&mut self, service: &Service) {
        self.selectors
            .entry(service.metadata.namespace.clone())
            .or_default()
            .insert(
                service.metadata.name.clone(),
                service.spec.selector.as_selector(),
            );
    }

    fn remove(&mut self, meta: &ObjectMeta) {
        if let Some(names) = self.selectors.get_mut(&meta.namespace) {
            names.remove(&meta.name);
        }
    }

    /// Every pod change may change an IP, a port or membership: queue the Services that
    /// select the pod by its old or new labels.
    fn services_for(&self, delta: &Delta<CachedPod>) -> Vec<String> {
        let Some(services) = self.selectors.get(&*delta.namespace) else {
            return Vec::new();
        };
        let matches = |selector: &Selector, pod: &Option<Arc<CachedPod>>| {
            pod.as_ref()
                .is_some_and(|pod| selector.matches(&pod.labels))
        };
        let mut keys: HashSet<String> = HashSet::new();
        for (name, selector) in services {
            if matches(selector, &delta.new) || matches(selector, &delta.old) {
                keys.insert(format!("{}/{name}", delta.namespace));
            }
        }
        keys.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Container, ContainerPort, PodSpec, PodStatus};

    fn pod(name: &str, ip: &str, ports: &[(&str, i64)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                labels: [("app", "web")].into_iter().collect(),
                ..ObjectMeta::named("ns", name)
            },
            spec: PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    ports: ports
                        .iter()
                        .map(|(name, port)| ContainerPort {
                            name: name.to_string(),
                            container_port: *port,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }],
                ..Default::default()
            },
            status: Some(PodStatus {
                pod_ip: ip.into(),
                ..Default::default()
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn find_port_rules() {
        #[track_caller]
        fn check(
            ports: &[(&str, i64)],
            container_port: Option<IntOrString>,
            expected: Option<u16>,
        ) {
            assert_eq!(
                find_port(&pod("p", "1.2.3.4", ports), container_port.as_ref()),
                expected
            );
        }
        use IntOrString::{Int, String as Name};
        check(&[("http", 80), ("metrics", 9090)], None, Some(80));
        check(&[("http", 80)], Some(Int(0)), Some(80));
        check(&[("http", 80)], Some(Name(String::new())), Some(80));
        check(&[("http", 80)], Some(Int(8080)), Some(8080)); // a number is used as given
        check(
            &[("http", 80), ("metrics", 9090)],
            Some(Name("metrics".into())),
            Some(9090),
        );
        check(&[("http", 80)], Some(Name("grpc".into())), None);
        check(&[], None, None);
        check(&[], Some(Int(70000)), None);
    }

    #[test]
    fn endpoints_are_sorted_bracketed_and_skip_pods_without_ip_or_port() {
        let service: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"selector": {"app": "web"}, "port": 80, "containerPort": "http"}
        }))
        .unwrap();
        let mut other = pod("other", "10.0.0.9", &[("http", 80)]);
        other.metadata.labels = [("app", "db")].into_iter().collect();
        let pods = [
            pod("b", "10.0.0.2", &[("http", 8080)]),
            pod("a", "10.0.0.10", &[("http", 8080)]),
            pod("v6", "fd00::1", &[("http", 8080)]),
            pod("no-ip", "", &[("http", 8080)]),
            pod("no-port", "10.0.0.3", &[("grpc", 9000)]),
            other,
        ];
        assert_eq!(
            endpoints_for(&service, &pods),
            ["10.0.0.10:8080", "10.0.0.2:8080", "[fd00::1]:8080"]
        );
    }

    #[test]
    fn pod_events_queue_services_matching_old_or_new_labels() {
        let mut index = ServiceIndex::default();
        let service = |name: &str, app: &str| -> Service {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"selector": {"app": app}, "port": 80}
            }))
            .unwrap()
        };
        index.upsert(&service("web", "web"));
        index.upsert(&service("db", "db"));
        let web = Arc::new(CachedPod::from(&pod("p", "1.1.1.1", &[])));
        let mut relabelled = pod("p", "1.1.1.1", &[]);
        relabelled.metadata.labels = [("app", "db")].into_iter().collect();
        let db = Arc::new(CachedPod::from(&relabelled));
        let sorted = |old: Option<&Arc<CachedPod>>, new: Option<&Arc<CachedPod>>| {
            let delta = Delta {
                namespace: "ns".into(),
                name: "p".into(),
                old: old.cloned(),
                new: new.cloned(),
            };
            let mut keys = index.services_for(&delta);
            keys.sort();
            keys
        };
        assert_eq!(sorted(None, Some(&web)), ["ns/web"]);
        assert_eq!(sorted(Some(&web), Some(&db)), ["ns/db", "ns/web"]);
        assert_eq!(sorted(Some(&db), None), ["ns/db"]);
    }
}
