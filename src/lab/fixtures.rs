//! What every scenario does to etcd and waits for: controllers created and scaled, pods
//! listed and waited for, a watch for the next create, a namespace cleaned up.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use etcd_client::{DeleteOptions, EventType, WatchOptions};

use super::Lab;
use crate::api::{
    Container, LabelSelector, ObjectMeta, Pod, PodSpec, PodTemplateSpec, ReplicaSet,
    ReplicaSetSpec, ReplicationController, ReplicationControllerSpec,
};
use crate::labels::{Selector, Set};

impl Lab {
    /// Sets a controller's replicas; returns the revision of the write.
    pub(super) async fn scale(
        &self,
        namespace: &str,
        name: &str,
        replicas: i64,
    ) -> anyhow::Result<i64> {
        let scaled = self
            .registry
            .guaranteed_update::<ReplicationController, _>(namespace, name, |mut rc| {
                rc.spec.replicas = replicas;
                Ok(rc)
            })
            .await?;
        Ok(scaled.metadata.resource_version.map_or(0, |rv| rv.0))
    }

    /// The key prefix of `namespace`'s pods.
    pub(super) fn pods_dir(&self, namespace: &str) -> String {
        let probe = self.registry.key::<Pod>(namespace, "x");
        probe[..probe.len() - 1].to_string()
    }

    pub(super) async fn create_controller(
        &self,
        namespace: &str,
        name: &str,
        replicas: i64,
    ) -> anyhow::Result<()> {
        self.create_controller_of(namespace, name, replicas, name)
            .await
    }

    /// Creates a ReplicationController `name` whose selector and template's labels are
    /// `app: {app}` (the app of another controller makes the two overlap).
    pub(super) async fn create_controller_of(
        &self,
        namespace: &str,
        name: &str,
        replicas: i64,
        app: &str,
    ) -> anyhow::Result<()> {
        let template = template(app);
        let controller = ReplicationController {
            metadata: ObjectMeta::named(namespace, name),
            spec: ReplicationControllerSpec {
                replicas,
                selector: template.metadata.labels.clone(),
                template: Some(template),
                ..ReplicationControllerSpec::default()
            },
            ..ReplicationController::default()
        };
        self.registry
            .create(&controller)
            .await
            .with_context(|| format!("create controller {namespace}/{name}"))?;
        Ok(())
    }

    /// Creates a ReplicaSet `name` selecting `app: {app}`, its template labelled so.
    pub(super) async fn create_replica_set_of(
        &self,
        namespace: &str,
        name: &str,
        replicas: i64,
        app: &str,
    ) -> anyhow::Result<()> {
        let template = template(app);
        let replica_set = ReplicaSet {
            metadata: ObjectMeta::named(namespace, name),
            spec: ReplicaSetSpec {
                replicas: Some(replicas),
                selector: Some(LabelSelector {
                    match_labels: template.metadata.labels.clone(),
                    ..LabelSelector::default()
                }),
                template: Some(template),
                ..ReplicaSetSpec::default()
            },
            ..ReplicaSet::default()
        };
        self.registry
            .create(&replica_set)
            .await
            .with_context(|| format!("create ReplicaSet {namespace}/{name}"))?;
        Ok(())
    }

    /// The pods of `namespace`, in key order.
    pub(super) async fn pods(&self, namespace: &str) -> anyhow::Result<Vec<Pod>> {
        Ok(self
            .registry
            .list::<Pod>(Some(namespace), &Selector::everything())
            .await?
            .items)
    }

    /// Waits until `namespace` holds exactly `n` active pods, for at most 30 s plus three
    /// periods.
    pub(super) async fn wait_pods(&self, namespace: &str, n: usize) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30) + 3 * self.period;
        loop {
            let active = self
                .pods(namespace)
                .await?
                .iter()
                .filter(|p| p.is_active())
                .count();
            if active == n {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "namespace {namespace} did not reach {n} active pods (it has {active})"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits a random part of the period (a pod dies, or a user scales, at any moment of
    /// it, not just after a tick), then watches the keys under `dir` from now.
    pub(super) async fn at_a_random_moment_watch(
        &self,
        dir: &str,
    ) -> anyhow::Result<etcd_client::WatchStream> {
        tokio::time::sleep(self.period.mul_f64(rand::random::<f64>())).await;
        self.watch_dir(dir).await
    }

    /// A watch of the keys under `dir`, from now.
    pub(super) async fn watch_dir(&self, dir: &str) -> anyhow::Result<etcd_client::WatchStream> {
        let watch = self
            .client
            .watch_client()
            .watch(dir, Some(WatchOptions::new().with_prefix()))
            .await
            .with_context(|| format!("watch {dir}"))?;
        Ok(watch)
    }

    /// Deletes everything of `namespace` and of the namespaces `{namespace}-*`: their
    /// controllers, then their pods. (No scenario's namespace is a prefix of another's.)
    pub(super) async fn cleanup(&self, namespace: &str) -> anyhow::Result<()> {
        for dir in [
            self.registry.key::<ReplicationController>(namespace, "x"),
            self.registry.key::<ReplicaSet>(namespace, "x"),
            self.registry.key::<Pod>(namespace, "x"),
        ] {
            // Without the `/`: `resync` uses `{namespace}-{i}` namespaces too.
            let dir = &dir[..dir.len() - 2];
            self.client
                .kv_client()
                .delete(dir, Some(DeleteOptions::new().with_prefix()))
                .await
                .with_context(|| format!("delete {dir}"))?;
        }
        Ok(())
    }
}

/// A pod template labelled `app: {app}`, one nginx container.
fn template(app: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: ObjectMeta {
            labels: [("app", app)].into_iter().collect::<Set>(),
            ..ObjectMeta::default()
        },
        spec: PodSpec {
            containers: vec![Container {
                name: "web".into(),
                image: "nginx".into(),
                ..Container::default()
            }],
            ..PodSpec::default()
        },
        ..PodTemplateSpec::default()
    }
}

/// Waits for the first event on `watch` that creates a key.
///
/// # Errors
/// When none comes within `limit`, or the watch fails.
pub(super) async fn wait_for_a_create(
    watch: &mut etcd_client::WatchStream,
    limit: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let response = tokio::time::timeout_at(deadline, watch.message())
            .await
            .context("no pod was created within the scenario's time limit")?
            .context("pods watch")?
            .context("pods watch closed")?;
        let created = response.events().iter().any(|event| {
            event.event_type() == EventType::Put && event.kv().is_some_and(|kv| kv.version() == 1)
        });
        if created {
            return Ok(());
        }
    }
}

/// The mean of the trials' seconds, to the millisecond.
pub(super) fn mean_seconds(trials: &[(f64, f64)]) -> f64 {
    let mean = trials.iter().map(|t| t.1).sum::<f64>() / trials.len().max(1) as f64;
    (mean * 1000.0).round() / 1000.0
}
