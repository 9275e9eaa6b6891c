//! The Deployment controller: rolls each Deployment's template out through ReplicaSets it
//! owns by controller reference, one ReplicaSet per template, with the `RollingUpdate`
//! or `Recreate` strategy, pause, proportional scaling, a revision history and the
//! `Available`/`Progressing` conditions.
//!
//! Mirrors Kubernetes' `pkg/controller/deployment/` (`deployment_controller.go`,
//! `sync.go`, `rolling.go`, `recreate.go`, `progress.go`, `util/deployment_util.go`),
//! which postdates 2014; built like kcm's ReplicaSet controller: on the common
//! [`Runner`] and the shared informers (deployments, ReplicaSets, and pods for
//! `Recreate`), a sync observes, decides in pure functions ([`plan`]) and acts through
//! [`DeploymentControl`]: etcd's registry, or the Kubernetes API (`apiclient`), where
//! each guard below becomes a check of the deployment informer before the write
//! (docs/invariants.md, "Through the API").
//!
//! Invariants:
//! - ownership of ReplicaSets is the controller reference (kind, name and uid); orphans
//!   are adopted and strays released only while the deployment lives, not deleting, and
//!   is unchanged since the sync read it;
//! - every ReplicaSet write is a compare-and-swap on the revision the sync read (the
//!   registry bumps its generation when its spec changed), and every one the plan makes
//!   (create, scale, annotations, delete) and every adoption also requires the deployment
//!   unchanged since the sync read it, so no decision from an older template or size
//!   commits; the new ReplicaSet is created create-if-absent as
//!   `{name}-{pod-template-hash}` (the hash of the template as stored, raw JSON), and a
//!   same-named ReplicaSet with another template (a squatter) bumps
//!   `status.collisionCount` instead;
//! - one step per sync (plan.rs), read-your-writes: a sync reads the caches only once
//!   they have applied this controller's last writes for the deployment, else etcd;
//! - with one controller manager (or a leader), active pods ≤ replicas + maxSurge and
//!   ready pods ≥ replicas − maxUnavailable at every revision of a rollout (plan.rs's two
//!   rules, docs/departures.md "rollouts" and docs/invariants.md);
//! - a deployment with a `deletionTimestamp` gets status writes only; an invalid one gets
//!   no writes and one warning per resourceVersion.

mod control;
pub mod plan;
mod sync;

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;

use crate::api::{self, Deployment, ReplicaSet};
use crate::controller::{sync_handler, Action, KeyMemory, ObjectKey, Runner, RunnerConfig};
use crate::informer::{
    CachedPod, Delta, DeploymentInformer, InformerFactory, PodInformer, ReplicaSetInformer,
};
use crate::registry::Registry;
use crate::status::Metrics;

pub use control::{hash_of, DeploymentControl};
use sync::Written;

/// The controller's settings (Kubernetes' `DeploymentControllerConfiguration` beside the
/// shared runner settings).
#[derive(Clone, Debug)]
pub struct DeploymentConfig {
    /// How often every Deployment is synced even without events. Default 10 s.
    pub sync_period: Duration,
    /// Deployments synced in parallel (`--concurrent-deployment-syncs`). Default 5.
    pub concurrent_syncs: usize,
    /// How long shutdown waits for in-flight syncs. Default 8 s.
    pub shutdown_timeout: Duration,
    /// How long a sync waits for the caches to apply this controller's own last writes
    /// before it reads etcd instead. Default 500 ms.
    pub cache_wait: Duration,
    /// Read ReplicaSets and pods fresh from etcd in every sync instead of from the shared
    /// caches. Default false.
    pub fresh_reads: bool,
    /// Where its events go (`ScalingReplicaSet`, ...). Default: nowhere; the controller
    /// manager gives it its recorder.
    pub events: crate::record::Recorder,
}

impl DeploymentConfig {
    /// The runner settings of this controller.
    pub fn runner(&self) -> RunnerConfig {
        RunnerConfig::new(
            self.concurrent_syncs,
            self.sync_period,
            self.shutdown_timeout,
        )
    }
}

impl Default for DeploymentConfig {
    fn default() -> Self {
        DeploymentConfig {
            sync_period: Duration::from_secs(10),
            concurrent_syncs: 5,
            shutdown_timeout: Duration::from_secs(8),
            cache_wait: Duration::from_millis(500),
            fresh_reads: false,
            events: crate::record::Recorder::discard(),
        }
    }
}

/// `DeploymentController`, reading and writing through `C` (etcd's [`Registry`], or the
/// Kubernetes API).
pub struct DeploymentController<C: DeploymentControl = Registry> {
    inner: Arc<Inner<C>>,
}

struct Inner<C> {
    control: C,
    config: DeploymentConfig,
    metrics: Arc<Metrics>,
    /// Per deployment key: the resourceVersion last warned about, and this controller's
    /// writes.
    memory: KeyMemory<Written>,
    deployments: OnceLock<DeploymentInformer>,
    replica_sets: OnceLock<ReplicaSetInformer>,
    pods: OnceLock<PodInformer>,
}

impl DeploymentController {
    /// A controller reading and writing etcd through `registry`.
    pub fn new(registry: Registry, config: DeploymentConfig, metrics: Arc<Metrics>) -> Self {
        DeploymentController::with_io(registry, config, metrics)
    }
}

impl<C: DeploymentControl> DeploymentController<C> {
    /// A controller on the given IO.
    pub fn with_io(control: C, config: DeploymentConfig, metrics: Arc<Metrics>) -> Self {
        DeploymentController {
            inner: Arc::new(Inner {
                control,
                config,
                metrics,
                memory: KeyMemory::default(),
                deployments: OnceLock::new(),
                replica_sets: OnceLock::new(),
                pods: OnceLock::new(),
            }),
        }
    }

    /// Syncs one deployment `namespace/name` (tests).
    ///
    /// # Errors
    /// As the sync: etcd failures and failed writes.
    pub async fn sync(&self, key: &ObjectKey) -> anyhow::Result<Action> {
        self.inner.sync_deployment(key).await
    }

    /// Sets the controller up on `informers` (deployments, ReplicaSets, pods) and returns
    /// it running until `shutdown` resolves. Subscribes at once: call it before the
    /// factory starts.
    pub fn start(
        self,
        informers: &InformerFactory,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        let deployments = informers.deployments();
        let replica_sets = informers.replica_sets();
        let pods = informers.pods();
        let _ = self.inner.deployments.set(deployments.clone());
        let _ = self.inner.replica_sets.set(replica_sets.clone());
        let _ = self.inner.pods.set(pods.clone());
        let config = &self.inner.config;
        let routes = Routes {
            deployments: deployments.clone(),
            replica_sets: replica_sets.clone(),
        };
        let inner = self.inner.clone();
        let runner = Runner::new("deployment", config.runner(), self.inner.metrics.clone())
            .resync({
                let deployments = deployments.clone();
                move || deployments.keys()
            })
            .watches(&deployments, move |delta: &Delta<Deployment>| {
                if delta.new.is_none() {
                    inner.memory.forget(&delta.key());
                }
                vec![delta.key()]
            })
            .watches(&replica_sets, {
                let routes = routes.clone();
                move |delta| routes.replica_set_changed(delta)
            })
            .watches(&pods, move |delta| routes.pod_changed(delta));
        Box::pin(runner.run(
            sync_handler(self.inner.clone(), |inner, key| async move {
                inner.sync_deployment(&key).await
            }),
            shutdown,
        ))
    }
}

/// Maps informer changes to the deployments to sync (`deployment_controller.go`'s
/// handlers).
#[derive(Clone)]
struct Routes {
    deployments: DeploymentInformer,
    replica_sets: ReplicaSetInformer,
}

impl Routes {
    /// The deployment a controller reference names, if it exists with that uid.
    fn owner(&self, namespace: &str, reference: &api::OwnerReference) -> Option<ObjectKey> {
        if reference.kind != plan::KIND {
            return None;
        }
        let d = self.deployments.get(namespace, &reference.name)?;
        (d.metadata.uid == reference.uid)
            .then(|| ObjectKey::new(namespace, reference.name.as_str()))
    }

    /// `addReplicaSet`/`updateReplicaSet`/`deleteReplicaSet`: the owner (before and
    /// after); for an orphan, every deployment whose selector matches its labels
    /// (`getDeploymentsForReplicaSet`).
    fn replica_set_changed(&self, delta: &Delta<ReplicaSet>) -> Vec<ObjectKey> {
        let mut keys = Vec::new();
        for rs in [&delta.old, &delta.new].into_iter().flatten() {
            match api::controller_of(&rs.metadata) {
                Some(reference) => keys.extend(self.owner(&delta.namespace, reference)),
                None => keys.extend(self.selecting(&delta.namespace, rs)),
            }
        }
        keys.sort();
        keys.dedup();
        keys
    }

    /// The deployments of `namespace` whose non-empty selector matches `rs`'s labels.
    fn selecting(&self, namespace: &str, rs: &ReplicaSet) -> Vec<ObjectKey> {
        self.deployments.read(namespace, |ns| {
            ns.map(|ns| {
                ns.items()
                    .filter(|d| {
                        d.spec.selector.as_ref().is_some_and(|s| {
                            !s.is_empty()
                                && s.to_selector()
                                    .is_ok_and(|s| s.matches(&rs.metadata.labels))
                        })
                    })
                    .map(|d| ObjectKey::new(namespace, d.metadata.name.as_str()))
                    .collect()
            })
            .unwrap_or_default()
        })
    }

    /// `deletePod`, and a pod turning inactive: the deployment owning the pod's
    /// ReplicaSet, when it uses `Recreate` (which waits for old pods to stop).
    fn pod_changed(&self, delta: &Delta<CachedPod>) -> Vec<ObjectKey> {
        let stopped = match (&delta.old, &delta.new) {
            (Some(_), None) => true,
            (Some(old), Some(new)) => old.is_active() && !new.is_active(),
            _ => false,
        };
        if !stopped {
            return Vec::new();
        }
        let Some(pod) = delta.old.as_deref() else {
            return Vec::new();
        };
        let Some(owner) = pod.controller.as_deref() else {
            return Vec::new();
        };
        if &*owner.kind != "ReplicaSet" {
            return Vec::new();
        }
        let Some(rs) = self.replica_sets.get(&delta.namespace, &owner.name) else {
            return Vec::new();
        };
        if *rs.metadata.uid != *owner.uid {
            return Vec::new();
        }
        api::controller_of(&rs.metadata)
            .and_then(|reference| {
                let key = self.owner(&delta.namespace, reference)?;
                let d = self.deployments.get(&delta.namespace, &reference.name)?;
                (!d.is_rolling_update()).then_some(key)
            })
            .into_iter()
            .collect()
    }
}
