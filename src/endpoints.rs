//! The endpoints controller: keeps each Service's Endpoints equal to the `ip:port` of the
//! pods its selector matches.
//!
//! Mirrors 2014's `pkg/service/endpoints_controller.go` (`SyncServiceEndpoints`,
//! `findPort`). Departures (docs/departures.md has the table): instead of one full pass every
//! 10 s, service and pod watch events queue the affected Services (a pod that gets its IP
//! shows in endpoints within a second) and the periodic pass remains as a safety net;
//! Endpoints are written by compare-and-swap, not last-writer-wins; and Endpoints whose
//! Service is gone are deleted (2014 leaked them).
//!
//! Services and pods are read from the shared informers (`informer`): under `kcm
//! controller-manager` the pod informer is shared with the replication manager, so pods
//! are watched and stored once for both controllers. The controller runs on the common
//! runner (`controller`), which maps informer changes to Service keys through a
//! [`SelectorIndex`].
//!
//! Invariant: an Endpoints object is written only when its set of entries changed, with
//! its entries sorted, keeping the fields kcm does not know.

mod control;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;

use crate::api::{Endpoints, IntOrString, ObjectMeta, Pod, Service};
use crate::controller::{Action, Runner, RunnerConfig, SelectorIndex, SyncHandler};
use crate::informer::{
    CachedPod, InformerFactory, ObjectKey, PodInformer, PodPorts, ServiceInformer,
};
use crate::registry::{Registry, StorageError};
use crate::status::Metrics;

pub use control::EndpointsControl;

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
}

impl Default for EndpointsConfig {
    fn default() -> Self {
        EndpointsConfig {
            sync_period: Duration::from_secs(10),
            concurrent_syncs: 5,
            shutdown_timeout: Duration::from_secs(8),
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
/// Pods whose Ready condition is not True are left out, as Kubernetes' later endpoints
/// controller does; a pod that reports no Ready condition (a 2014 document) is kept.
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
        .filter(|pod| {
            if pod.not_ready {
                tracing::debug!(pod = %pod.key(), "not ready; skipped");
            }
            !pod.not_ready
        })
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

/// `EndpointController`, reading past its caches and writing through `C` (etcd's
/// registry, or the API).
pub struct EndpointsController<C: EndpointsControl + Clone = Registry> {
    registry: C,
    config: EndpointsConfig,
    metrics: Arc<Metrics>,
}

impl<C: EndpointsControl + Clone> EndpointsController<C> {
    pub fn new(registry: C, config: EndpointsConfig, metrics: Arc<Metrics>) -> Self {
        EndpointsController {
            registry,
            config,
            metrics,
        }
    }

    /// Sets the controller up on `informers` (services and pods) and returns it running
    /// until `shutdown` resolves (same shutdown contract as the replication manager: no
    /// new syncs, in-flight writes finish within the timeout). A Service is synced when
    /// it changes, when a pod its selector matched before or after a change changes, and
    /// every sync period; every sync period (and at once) Endpoints whose Service is gone
    /// are found and synced, which deletes them. Subscribes at once: call it before the
    /// factory starts.
    pub fn start(
        self,
        informers: &InformerFactory,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        let services = informers.services();
        let pods = informers.pods();
        let index = Arc::new(Mutex::new(SelectorIndex::default()));
        let runner = Runner::new(
            "endpoints",
            RunnerConfig::new(
                self.config.concurrent_syncs,
                self.config.sync_period,
                self.config.shutdown_timeout,
            ),
            self.metrics.clone(),
        )
        .watches(&services, {
            let index = index.clone();
            move |delta| {
                let mut index = index.lock().expect("index lock");
                match &delta.new {
                    Some(service) => index.upsert(
                        &delta.namespace,
                        &delta.name,
                        service.spec.selector.as_selector(),
                    ),
                    None => index.remove(&delta.namespace, &delta.name),
                }
                vec![delta.key()]
            }
        })
        // Every pod change may change an IP, a port or membership.
        .watches(&pods, {
            let index = index.clone();
            move |delta| index.lock().expect("index lock").selecting_change(delta)
        })
        .resync(move || index.lock().expect("index lock").keys())
        .source(orphans(
            self.registry.clone(),
            services.clone(),
            self.config.sync_period,
        ));
        let handler: SyncHandler = {
            let registry = self.registry.clone();
            let metrics = self.metrics.clone();
            Arc::new(move |key: ObjectKey| {
                let registry = registry.clone();
                let metrics = metrics.clone();
                let caches = Caches {
                    services: services.clone(),
                    pods: pods.clone(),
                };
                Box::pin(async move {
                    sync_service_endpoints(&registry, &metrics, Some(&caches), &key).await?;
                    Ok(Action::Done)
                })
            })
        };
        Box::pin(runner.run(handler, shutdown))
    }
}

/// Every `period`, starting at once, the keys of Endpoints objects whose Service the
/// cache does not hold: 2014 leaked them when a Service was deleted while it was down.
fn orphans(
    registry: impl EndpointsControl + Clone,
    services: ServiceInformer,
    period: Duration,
) -> impl futures::Stream<Item = Vec<ObjectKey>> + Send + 'static {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    futures::stream::unfold(tick, move |mut tick| {
        let registry = registry.clone();
        let services = services.clone();
        async move {
            tick.tick().await;
            let keys = match registry.list_endpoints().await {
                Ok(listed) => listed
                    .iter()
                    .map(|endpoints| &endpoints.metadata)
                    .filter(|meta| {
                        !services.read(&meta.namespace, |ns| {
                            ns.is_some_and(|ns| ns.is_taken(&meta.name))
                        })
                    })
                    .map(|meta| ObjectKey::new(meta.namespace.as_str(), meta.name.as_str()))
                    .collect(),
                Err(e) => {
                    tracing::debug!(error = %e, "listing endpoints failed; next pass retries");
                    Vec::new()
                }
            };
            Some((keys, tick))
        }
    })
}

/// The caches a sync reads.
pub struct Caches {
    pub services: ServiceInformer,
    pub pods: PodInformer,
}

/// What the services cache says of one Service.
enum Cached {
    Present(Arc<Service>),
    /// Its stored value does not decode.
    Undecodable,
    Absent,
}

/// `syncServiceEndpoints` for one Service: computes its endpoints from the pods in its
/// namespace and writes them if they changed; deletes the Endpoints of a Service that is
/// gone. Reads the Service and its pods from `caches` (synced: the runner waits for
/// them), or from etcd without caches (2014); a Service the cache does not hold is
/// confirmed gone in etcd before its Endpoints are deleted.
///
/// # Errors
/// When etcd fails or a write conflicts (the key is retried with backoff).
pub async fn sync_service_endpoints(
    registry: &impl EndpointsControl,
    metrics: &Metrics,
    caches: Option<&Caches>,
    key: &ObjectKey,
) -> anyhow::Result<()> {
    let (namespace, name) = (&*key.namespace, &*key.name);
    if MASTER_SERVICES.contains(&name) {
        return Ok(());
    }
    let cached = match caches {
        Some(caches) => caches.services.read(namespace, |ns| {
            match ns.map(|ns| (ns.get(name), ns.is_taken(name))) {
                Some((Some(service), _)) => Cached::Present(service.clone()),
                Some((None, true)) => Cached::Undecodable,
                _ => Cached::Absent,
            }
        }),
        None => Cached::Absent,
    };
    let service = match cached {
        Cached::Present(service) => service,
        Cached::Undecodable => {
            tracing::debug!(service = %key, "malformed service skipped");
            return Ok(());
        }
        Cached::Absent => match registry.service(namespace, name).await {
            Ok(service) => Arc::new(service),
            Err(StorageError::NotFound { .. }) => {
                return match registry.delete(namespace, name).await {
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
        },
    };
    if service.spec.selector.is_empty() {
        // Early 2015 skipped services without selectors; an empty selector would
        // otherwise select every pod in the namespace.
        return Ok(());
    }
    let selector = service.spec.selector.as_selector();
    let selected = match caches {
        Some(caches) => caches.pods.select(namespace, &selector),
        None => registry
            .pods(namespace, &selector)
            .await?
            .iter()
            .map(|pod| Arc::new(CachedPod::from(pod)))
            .collect(),
    };
    let entries = endpoints_for_cached(&service, &selected);
    let current = match registry.endpoints(namespace, name).await {
        Ok(current) => Some(current),
        Err(StorageError::NotFound { .. }) => None,
        // A malformed Endpoints value is replaced: kcm owns these objects.
        Err(StorageError::Decode(e)) => {
            tracing::warn!(service = %key, error = %e, "replacing malformed endpoints");
            registry.delete(namespace, name).await?;
            anyhow::bail!("replaced malformed endpoints {key}; retrying");
        }
        Err(e) => return Err(e.into()),
    };
    match decide(namespace, name, entries, current) {
        Write::Nothing => {}
        Write::Create(endpoints) => {
            registry.create(&endpoints).await?;
            metrics.endpoints_writes.inc();
            tracing::info!(service = %key, endpoints = ?endpoints.endpoints, "created endpoints");
        }
        Write::Update(endpoints) => {
            registry.update(&endpoints).await?;
            metrics.endpoints_writes.inc();
            tracing::info!(service = %key, endpoints = ?endpoints.endpoints, "updated endpoints");
        }
    }
    Ok(())
}

/// What a sync writes for one Service.
#[derive(Debug, PartialEq)]
pub enum Write {
    Nothing,
    Create(Endpoints),
    /// The current object with its entries replaced (its other fields kept).
    Update(Endpoints),
}

/// Decides the write that makes `current` (the stored Endpoints of `namespace/name`, if
/// any) hold `entries` (sorted, de-duplicated): nothing when it already holds exactly
/// them, in that order.
pub fn decide(
    namespace: &str,
    name: &str,
    entries: Vec<String>,
    current: Option<Endpoints>,
) -> Write {
    match current {
        None => Write::Create(Endpoints {
            metadata: ObjectMeta::named(namespace, name),
            endpoints: entries,
            ..Endpoints::default()
        }),
        Some(current) if current.endpoints == entries => Write::Nothing,
        Some(mut current) => {
            current.endpoints = entries;
            Write::Update(current)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        Container, ContainerPort, PodCondition, PodPhase, PodSpec, PodStatus, POD_READY,
    };
    use crate::labels::Selector;

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
    fn endpoints_leave_out_pods_whose_ready_condition_is_not_true() {
        let service: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"selector": {"app": "web"}, "port": 80}
        }))
        .unwrap();
        let with_ready = |name: &str, ip: &str, ready: Option<&str>| {
            let mut pod = pod(name, ip, &[("http", 8080)]);
            let status = pod.status.as_mut().unwrap();
            status.phase = PodPhase::Running;
            status.conditions = ready
                .map(|value| PodCondition {
                    type_: POD_READY.into(),
                    status: value.into(),
                    ..Default::default()
                })
                .into_iter()
                .collect();
            pod
        };
        let pods = [
            with_ready("ready", "10.0.0.1", Some("True")),
            with_ready("unready", "10.0.0.2", Some("False")),
            with_ready("unknown", "10.0.0.3", Some("Unknown")),
            with_ready("2014", "10.0.0.4", None),
        ];
        assert_eq!(
            endpoints_for(&service, &pods),
            ["10.0.0.1:8080", "10.0.0.4:8080"]
        );
        let cached = CachedPod::from(&pods[1]);
        assert!(!cached.ready && cached.not_ready);
        let cached = CachedPod::from(&pods[3]);
        assert!(cached.ready && !cached.not_ready);
    }

    #[test]
    fn a_sync_writes_only_when_the_entries_changed_and_keeps_other_fields() {
        let entries = || vec!["10.0.0.1:80".to_string(), "10.0.0.2:80".to_string()];
        let Write::Create(created) = decide("ns", "web", entries(), None) else {
            panic!("absent endpoints are created");
        };
        assert_eq!(created.metadata.key(), "ns/web");
        assert_eq!(created.endpoints, entries());
        assert_eq!(
            decide("ns", "web", entries(), Some(created.clone())),
            Write::Nothing
        );
        // Unsorted or duplicated entries (written by someone else) are rewritten.
        let mut unsorted = created.clone();
        unsorted.endpoints.reverse();
        assert!(matches!(
            decide("ns", "web", entries(), Some(unsorted)),
            Write::Update(_)
        ));
        let mut annotated: Endpoints = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns", "annotations": {"a": "b"}},
            "endpoints": ["10.0.0.9:80"],
            "unknownField": 1
        }))
        .unwrap();
        let Write::Update(updated) = decide("ns", "web", entries(), Some(annotated.clone())) else {
            panic!("changed entries are written");
        };
        annotated.endpoints = entries();
        assert_eq!(updated, annotated, "every other field is kept");
    }

    /// A recording fake of the sync's IO: services (`None` = does not decode), pods, the
    /// stored Endpoints, and every write in order.
    #[derive(Default)]
    struct FakeControl {
        services: std::sync::Mutex<std::collections::BTreeMap<String, Option<Service>>>,
        pods: Vec<Pod>,
        endpoints: std::sync::Mutex<std::collections::BTreeMap<String, Endpoints>>,
        writes: std::sync::Mutex<Vec<String>>,
    }

    impl EndpointsControl for FakeControl {
        async fn service(&self, namespace: &str, name: &str) -> Result<Service, StorageError> {
            let key = format!("{namespace}/{name}");
            match self.services.lock().unwrap().get(&key) {
                Some(Some(service)) => Ok(service.clone()),
                Some(None) => Err(StorageError::Decode(crate::registry::DecodeError {
                    kind: "Service",
                    key,
                    revision: 1,
                    message: "expected value".into(),
                })),
                None => Err(StorageError::NotFound { key }),
            }
        }
        async fn pods(
            &self,
            namespace: &str,
            selector: &Selector,
        ) -> Result<Vec<Pod>, StorageError> {
            Ok(self
                .pods
                .iter()
                .filter(|p| {
                    p.metadata.namespace == namespace && selector.matches(&p.metadata.labels)
                })
                .cloned()
                .collect())
        }
        async fn endpoints(&self, namespace: &str, name: &str) -> Result<Endpoints, StorageError> {
            let key = format!("{namespace}/{name}");
            let stored = self.endpoints.lock().unwrap().get(&key).cloned();
            stored.ok_or(StorageError::NotFound { key })
        }
        async fn create(&self, endpoints: &Endpoints) -> Result<(), StorageError> {
            let key = endpoints.metadata.key();
            self.writes.lock().unwrap().push(format!("create {key}"));
            self.endpoints
                .lock()
                .unwrap()
                .insert(key, endpoints.clone());
            Ok(())
        }
        async fn update(&self, endpoints: &Endpoints) -> Result<(), StorageError> {
            let key = endpoints.metadata.key();
            self.writes.lock().unwrap().push(format!("update {key}"));
            self.endpoints
                .lock()
                .unwrap()
                .insert(key, endpoints.clone());
            Ok(())
        }
        async fn delete(&self, namespace: &str, name: &str) -> Result<(), StorageError> {
            let key = format!("{namespace}/{name}");
            self.writes.lock().unwrap().push(format!("delete {key}"));
            match self.endpoints.lock().unwrap().remove(&key) {
                Some(_) => Ok(()),
                None => Err(StorageError::NotFound { key }),
            }
        }
        async fn list_endpoints(&self) -> Result<Vec<Endpoints>, StorageError> {
            Ok(self.endpoints.lock().unwrap().values().cloned().collect())
        }
    }

    #[tokio::test]
    async fn a_sync_writes_through_its_io_seam_only_what_changed() {
        let web: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"selector": {"app": "web"}, "port": 80, "containerPort": "http"}
        }))
        .unwrap();
        let control = FakeControl {
            pods: vec![
                pod("a", "10.0.0.1", &[("http", 8080)]),
                pod("b", "10.0.0.2", &[("http", 8080)]),
            ],
            ..FakeControl::default()
        };
        control
            .services
            .lock()
            .unwrap()
            .insert("ns/web".into(), Some(web));
        control
            .services
            .lock()
            .unwrap()
            .insert("ns/bad".into(), None);
        let metrics = Metrics::new();
        let (control_ref, metrics_ref) = (&control, &metrics);
        let sync = |key: &'static str| async move {
            sync_service_endpoints(control_ref, metrics_ref, None, &key.into()).await
        };
        sync("ns/web").await.unwrap();
        assert_eq!(
            control.endpoints.lock().unwrap()["ns/web"].endpoints,
            ["10.0.0.1:8080", "10.0.0.2:8080"]
        );
        // Nothing changed: nothing written.
        sync("ns/web").await.unwrap();
        // A malformed Service is skipped: its Endpoints are not deleted.
        control.endpoints.lock().unwrap().insert(
            "ns/bad".into(),
            Endpoints {
                metadata: ObjectMeta::named("ns", "bad"),
                ..Endpoints::default()
            },
        );
        sync("ns/bad").await.unwrap();
        // A Service that is gone takes its Endpoints with it; gone twice is no error.
        control.services.lock().unwrap().remove("ns/web");
        sync("ns/web").await.unwrap();
        sync("ns/web").await.unwrap();
        // The master's own services are left alone.
        sync("default/kubernetes").await.unwrap();
        assert_eq!(
            *control.writes.lock().unwrap(),
            ["create ns/web", "delete ns/web", "delete ns/web"]
        );
        assert!(control.endpoints.lock().unwrap().contains_key("ns/bad"));
        assert_eq!(metrics.endpoints_writes.get(), 2);
    }
}
