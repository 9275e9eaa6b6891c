//! The shared informer factory: client-go's `SharedInformerFactory`
//! (`k8s.io/client-go/informers/factory.go`), as the kube-controller-manager uses it.
//!
//! Controllers ask the factory for the informers they read while they are set up
//! (`pods()`, `replication_controllers()`, `replica_sets()`, `deployments()`,
//! `services()`, `endpoints()`, `nodes()`, `registrations()`); the first request of a kind
//! creates its informer and every later one gets the same. Once every controller has
//! been set up, [`InformerFactory::start`] runs them all, so no controller misses an
//! informer's first list and each kind is listed and watched once per process. A kind
//! nobody asked for is never watched.
//!
//! Under leader election a factory lives for one term: [`InformerFactory::shutdown`]
//! stops its informers after the term's controllers stopped. Their metrics outlive it
//! (the watch counters keep counting in the next term, and `kcm_informer_synced` goes
//! back to 0), so nothing accumulates across terms.

use std::any::{Any, TypeId};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::{
    ControllerInformer, DeploymentInformer, EndpointsInformer, Informer, NodeInformer,
    NodeLeaseInformer, PodInformer, Reflected, RegistrationInformer, RemoteSource,
    ReplicaSetInformer, ServiceInformer, Source,
};
use crate::etcd_watcher::{BackoffConfig, Watcher};
use crate::status::Metrics;

/// Objects per range of an informer's list: each page's raw values and decoded items are
/// held while it goes into the store, so a smaller page lowers the peak of a large first
/// list (10,000 pods a page held about 5.6 MiB of raw values beside the store) at the cost
/// of more ranges (50 for 100,000 pods).
const LIST_PAGE_SIZE: i64 = 2_000;

/// Hands out one shared informer per kind and runs them. Cheap to clone.
#[derive(Clone)]
pub struct InformerFactory {
    shared: Arc<Shared>,
}

struct Shared {
    source: Source,
    backoff: BackoffConfig,
    metrics: Arc<Metrics>,
    /// Stops every informer of this factory.
    stop: CancellationToken,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    informers: Vec<Entry>,
    /// Kinds whose informer reads through a watcher of its own.
    watchers: Vec<(TypeId, Watcher)>,
    started: bool,
    running: JoinSet<()>,
}

/// One informer the factory made.
struct Entry {
    kind: TypeId,
    resource: &'static str,
    /// The `Informer<I>`, for later requests of the same kind.
    informer: Box<dyn Any + Send + Sync>,
    /// Runs the informer until the factory stops; taken when it starts.
    run: Option<BoxFuture<'static, ()>>,
}

impl InformerFactory {
    /// A factory whose informers read through `watcher`, re-open with `backoff` and
    /// export their metrics to `metrics`.
    pub fn new(watcher: Watcher, backoff: BackoffConfig, metrics: Arc<Metrics>) -> Self {
        InformerFactory {
            shared: Arc::new(Shared {
                source: Source::from(watcher.with_page_size(LIST_PAGE_SIZE)),
                backoff,
                metrics,
                stop: CancellationToken::new(),
                state: Mutex::default(),
            }),
        }
    }

    /// A factory whose informers list and watch through `remote` (a Kubernetes API server)
    /// instead of etcd.
    pub fn remote(
        remote: Arc<dyn RemoteSource>,
        backoff: BackoffConfig,
        metrics: Arc<Metrics>,
    ) -> Self {
        InformerFactory {
            shared: Arc::new(Shared {
                source: Source::Remote(remote),
                backoff,
                metrics,
                stop: CancellationToken::new(),
                state: Mutex::default(),
            }),
        }
    }

    /// Makes the informer of kind `I` read through `watcher` instead of the factory's:
    /// `kcm lab watch-cut` cuts the controllers' watch while the pods' runs. Call it
    /// before the first request of `I`.
    pub fn with_watcher_for<I: Reflected>(self, watcher: Watcher) -> Self {
        self.shared
            .state
            .lock()
            .expect("factory lock")
            .watchers
            .push((TypeId::of::<I>(), watcher));
        self
    }

    /// The pod informer.
    pub fn pods(&self) -> PodInformer {
        self.informer()
    }

    /// The replication controller informer.
    pub fn replication_controllers(&self) -> ControllerInformer {
        self.informer()
    }

    /// The ReplicaSet informer.
    pub fn replica_sets(&self) -> ReplicaSetInformer {
        self.informer()
    }

    /// The Deployment informer.
    pub fn deployments(&self) -> DeploymentInformer {
        self.informer()
    }

    /// The service informer.
    pub fn services(&self) -> ServiceInformer {
        self.informer()
    }

    /// The endpoints informer.
    pub fn endpoints(&self) -> EndpointsInformer {
        self.informer()
    }

    /// The informer of Node documents.
    pub fn nodes(&self) -> NodeInformer {
        self.informer()
    }

    /// The informer of the kubelets' registrations.
    pub fn registrations(&self) -> RegistrationInformer {
        self.informer()
    }

    /// The informer of the kubelets' node Leases (`kube-node-lease`).
    pub fn node_leases(&self) -> NodeLeaseInformer {
        self.informer()
    }

    /// The informer of kind `I`, created on the first request. One requested after
    /// [`InformerFactory::start`] starts at once.
    pub fn informer<I: Reflected>(&self) -> Informer<I> {
        let shared = &self.shared;
        let mut state = shared.state.lock().expect("factory lock");
        let kind = TypeId::of::<I>();
        if let Some(entry) = state.informers.iter().find(|e| e.kind == kind) {
            return entry
                .informer
                .downcast_ref::<Informer<I>>()
                .expect("entries are keyed by their type")
                .clone();
        }
        let resource = I::RESOURCE;
        let source = state
            .watchers
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(shared.source.clone(), |(_, w)| Source::from(w.clone()));
        let informer: Informer<I> = Informer::new(source)
            .with_backoff(shared.backoff.clone())
            .with_metrics(shared.metrics.watch_metrics(resource));
        {
            let informer = informer.clone();
            shared
                .metrics
                .register_informer(resource, move || informer.is_synced());
        }
        let run = Box::pin(informer.clone().run(shared.stop.clone().cancelled_owned()));
        let mut entry = Entry {
            kind,
            resource,
            informer: Box::new(informer.clone()),
            run: Some(run),
        };
        if state.started {
            tracing::debug!(resource, "informer requested after start; starting it now");
            state.running.spawn(entry.run.take().expect("not started"));
        }
        state.informers.push(entry);
        informer
    }

    /// Runs every informer requested so far (client-go's `Start`), in the task that awaits
    /// the returned future, until the factory stops. Call it once every controller has
    /// been set up. Awaited beside the controllers' own loops, as the controller manager
    /// does: in one task, decoding and the loops' allocations stay on one thread, where
    /// an informer on a task of its own cost about 20% more peak memory under glibc's
    /// allocator, which gave each thread its own arena (docs/PERFORMANCE.md; kcm's
    /// jemalloc has one arena, `alloc.rs`).
    pub fn run(&self) -> BoxFuture<'static, ()> {
        let mut state = self.shared.state.lock().expect("factory lock");
        state.started = true;
        let runs: Vec<_> = state
            .informers
            .iter_mut()
            .filter_map(|entry| entry.run.take())
            .collect();
        Box::pin(async move {
            futures::future::join_all(runs).await;
        })
    }

    /// [`InformerFactory::run`] on a task of its own.
    pub fn start(&self) {
        let run = self.run();
        self.shared
            .state
            .lock()
            .expect("factory lock")
            .running
            .spawn(run);
    }

    /// The resources of the informers made so far, in the order they were requested.
    pub fn resources(&self) -> Vec<&'static str> {
        let state = self.shared.state.lock().expect("factory lock");
        state.informers.iter().map(|e| e.resource).collect()
    }

    /// Starts the informers on a task of their own, awaits `running` (controllers set up
    /// on this factory), then stops the informers: a controller on informers of its own,
    /// as `kcm bench` runs the replication manager.
    pub async fn serve<T>(self, running: impl std::future::Future<Output = T>) -> T {
        self.start();
        let result = running.await;
        self.shutdown().await;
        result
    }

    /// Stops every informer and waits until they stopped; their `kcm_informer_synced`
    /// goes back to 0.
    pub async fn shutdown(&self) {
        self.shared.stop.cancel();
        let (mut running, resources) = {
            let mut state = self.shared.state.lock().expect("factory lock");
            let resources: Vec<_> = state.informers.iter().map(|e| e.resource).collect();
            (std::mem::take(&mut state.running), resources)
        };
        while running.join_next().await.is_some() {}
        for resource in resources {
            self.shared.metrics.informer_stopped(resource);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::CachedPod;

    /// A factory over a client that never connects: nothing here talks to etcd.
    async fn factory() -> (InformerFactory, Arc<Metrics>) {
        // Connecting without credentials is lazy.
        let client = etcd_client::Client::connect(["http://127.0.0.1:1"], None)
            .await
            .unwrap();
        let registry = crate::registry::Registry::new(&client, "/registry").unwrap();
        let metrics = Arc::new(Metrics::new());
        let watcher = Watcher::new(&client, registry);
        (
            InformerFactory::new(watcher, BackoffConfig::default(), metrics.clone()),
            metrics,
        )
    }

    #[tokio::test]
    async fn one_informer_per_kind_created_on_request() {
        let (factory, metrics) = factory().await;
        assert!(factory.resources().is_empty());
        let pods = factory.pods();
        let again = factory.informer::<CachedPod>();
        let _services = factory.services();
        assert_eq!(factory.resources(), ["pods", "services"]);
        // The same store behind both handles.
        assert!(Arc::ptr_eq(&pods.metrics(), &again.metrics()));
        let text = metrics.render();
        assert!(
            text.contains("kcm_informer_synced{resource=\"pods\"} 0"),
            "{text}"
        );
        assert!(
            !text.contains("resource=\"replicationcontrollers\""),
            "{text}"
        );
        factory.shutdown().await;
    }
}
