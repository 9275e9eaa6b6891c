//! One sync, 2014's `syncReplicationController` in three steps: observe the controller and
//! one view of its pods, decide in a pure function ([`decide`]), act only through
//! [`PodControl`] (creates, deletes, the status write).
//!
//! Invariants: the decision reads the pods once (one read of the cache, or one etcd list),
//! so its count and its free names agree; a cached controller is confirmed from etcd
//! before any pod write; a write refused because the controller is gone ends the sync
//! quietly, with no further writes.

use std::sync::Arc;
use std::time::Duration;

use crate::api::{self, ReplicationController, ResourceVersion};
use crate::informer::{CachedPod, Namespace, PodInformer};
use crate::registry::StorageError;

use super::plan::{decide, new_pod_from_template, slow_start_batches, Decision};
use super::pod_control::{CreateOutcome, DeleteOutcome, FreshReads, PodControl, StatusOutcome};
use super::Inner;

/// The header revisions of a manager's last writes for one controller: what its caches
/// must have applied before a sync may count from them (read-your-writes).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Written {
    /// Last pod create or delete.
    pods: i64,
    /// Last `status.replicas` write.
    status: i64,
    /// The slow-start batch the controller's next creates begin with, and when that was
    /// earned: after a sync whose creates all succeeded, double its last batch (capped at
    /// the burst limit), good for [`SLOW_START_MEMORY`]; otherwise 1. A scale-up spread
    /// over many syncs ramps up once, not once per sync; a failure still costs at most
    /// one batch before creates start again from 1, and a controller that was quiet for
    /// a while starts from 1 too.
    slow_start: Option<(usize, tokio::time::Instant)>,
}

/// How long a controller's slow-start progress carries over to its next sync. The next
/// sync of a continuing scale-up follows within milliseconds (its status write wakes it).
const SLOW_START_MEMORY: Duration = Duration::from_secs(1);

/// What a sync observed: the controller, and where to read its namespace's pods.
struct View {
    controller: Arc<ReplicationController>,
    /// The controller came from the cache, so it is confirmed from etcd before any pod
    /// write.
    from_cache: bool,
    pods: PodView,
}

/// The pods a sync counts: the shared cache, or a fresh read when the cache is behind.
enum PodView {
    Cache(PodInformer, String),
    Fresh(Namespace<CachedPod>),
}

impl View {
    /// Decides over one consistent read of the pods: the cache's store is read once,
    /// under its lock, for the count and the free names together.
    fn decide(&self, burst: usize) -> Decision {
        match &self.pods {
            PodView::Cache(pods, namespace) => {
                pods.read(namespace, |ns| decide(&self.controller, ns, burst))
            }
            PodView::Fresh(ns) => decide(&self.controller, Some(ns), burst),
        }
    }
}

/// How a sync's creates or deletes went.
#[derive(Default)]
struct Tally {
    /// Pods this sync created or deleted.
    written: usize,
    /// Pods that now exist (creates) or are gone (deletes) as the sync wanted, including
    /// those another writer created or deleted first: what the status counts.
    counted: usize,
    errors: Vec<anyhow::Error>,
    /// A write was refused because the controller is gone: nothing more is written.
    controller_gone: bool,
}

impl<P: PodControl, R: FreshReads> Inner<P, R> {
    /// Warns about `key` at `version` unless it was already warned about at it.
    fn warn_once(&self, key: &str, version: &str, message: &str) {
        if self.memory.first_warning(key, version) {
            tracing::warn!(controller = %key, resource_version = %version, "{message}");
        }
    }

    /// Forgets what the manager remembers of a deleted controller.
    pub(super) fn forget(&self, key: &str) {
        self.memory.forget(key);
    }

    /// Whether the controller may be acted on; warns once per version when not.
    fn is_valid(&self, key: &str, controller: &ReplicationController) -> bool {
        match api::validate(controller) {
            Ok(()) => true,
            Err(e) => {
                let version = controller.metadata.resource_version.unwrap_or_default();
                self.warn_once(
                    key,
                    &version.to_string(),
                    &format!("skipping controller: {e}"),
                );
                false
            }
        }
    }

    /// The controller to sync, and whether it came from the cache: from the cache once
    /// it has applied this manager's last status write, else from etcd. `None` when it
    /// does not exist (or does not decode).
    async fn controller(
        &self,
        namespace: &str,
        name: &str,
        written: Written,
    ) -> Result<Option<(Arc<ReplicationController>, bool)>, StorageError> {
        if let Some(cache) = self.controllers.get() {
            if !self.config.fresh_reads
                && cache.wait_for(written.status, self.config.cache_wait).await
            {
                return Ok(cache.get(namespace, name).map(|rc| (rc, true)));
            }
        }
        Ok(self
            .fresh_controller(namespace, name)
            .await?
            .map(|rc| (rc, false)))
    }

    /// The controller as etcd has it now; `None` when it does not exist (or does not
    /// decode).
    async fn fresh_controller(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<ReplicationController>>, StorageError> {
        match self.reads.controller(namespace, name).await {
            Ok(rc) => Ok(Some(Arc::new(rc))),
            // Deleted since it was queued: nothing to do (2014 synced it anyway).
            Err(StorageError::NotFound { .. }) => Ok(None),
            // The controller informer has already warned about this very value (it meets
            // every stored revision, by event or by list, and reports each it cannot
            // decode); a second warning here would report one bad write twice.
            Err(StorageError::Decode(e)) => {
                tracing::debug!(error = %e, "skipping malformed controller");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The namespace's pods: the cache once it has applied this manager's last pod write
    /// for the controller, else a fresh read.
    async fn pods(&self, namespace: &str, written: Written) -> Result<PodView, StorageError> {
        if let Some(cache) = self.pods.get() {
            if !self.config.fresh_reads
                && cache.wait_for(written.pods, self.config.cache_wait).await
            {
                return Ok(PodView::Cache(cache.clone(), namespace.to_string()));
            }
            if !self.config.fresh_reads {
                tracing::debug!(
                    namespace,
                    revision = written.pods,
                    "pod cache behind; reading etcd"
                );
            }
        }
        Ok(PodView::Fresh(self.reads.pods(namespace).await?))
    }

    /// The controller behind `key` and where to read its pods; `None` when there is
    /// nothing to do (deleted, malformed, or invalid after one warning per version).
    async fn observe(&self, key: &str) -> anyhow::Result<Option<View>> {
        let Some((namespace, name)) = key.split_once('/') else {
            anyhow::bail!("invalid controller key {key:?}");
        };
        let written = self.memory.written(key);
        let Some((controller, from_cache)) = self.controller(namespace, name, written).await?
        else {
            return Ok(None);
        };
        if !self.is_valid(key, &controller) {
            return Ok(None);
        }
        let pods = self.pods(namespace, written).await?;
        Ok(Some(View {
            controller,
            from_cache,
            pods,
        }))
    }

    /// `syncReplicationController`: observes the controller and its pods, decides, and
    /// acts: creates or deletes the difference and writes `status.replicas`.
    ///
    /// # Errors
    /// When etcd fails, or a create or delete fails (the key is retried with backoff).
    /// An invalid or malformed controller is not an error: it is skipped, with one
    /// warning per bad version (for a malformed one, the controller informer's). Nor is
    /// a controller deleted mid-sync: the sync stops writing.
    pub(super) async fn sync_replication_controller(&self, key: &str) -> anyhow::Result<()> {
        let Some(mut view) = self.observe(key).await? else {
            return Ok(());
        };
        let burst = self.config.burst_replicas;
        let mut decision = view.decide(burst);
        if view.from_cache && decision.writes_pods() {
            // The controller and pod caches follow two watches, so a pod change can arrive
            // before the change to its controller that came first (a resize, say). Before
            // writing pods, confirm the controller from etcd, as 2014's get-then-act did.
            let meta = &view.controller.metadata;
            let Some(fresh) = self.fresh_controller(&meta.namespace, &meta.name).await? else {
                return Ok(());
            };
            if fresh.metadata.resource_version != meta.resource_version {
                if !self.is_valid(key, &fresh) {
                    return Ok(());
                }
                view.controller = fresh;
                decision = view.decide(burst);
            }
        }
        self.act(key, &view.controller, decision).await
    }

    /// Carries out `decision` for `controller` through the pod control: its creates or
    /// deletes, then `status.replicas` if it changed.
    async fn act(
        &self,
        key: &str,
        controller: &ReplicationController,
        decision: Decision,
    ) -> anyhow::Result<()> {
        let Decision {
            active,
            ready,
            creates,
            deletes,
        } = decision;
        let want = controller.spec.replicas;
        let mut now_active = active;
        let mut tally = Tally::default();
        // What a sync set out to do is debug; what it did is info, after the writes: a
        // sync whose every write etcd refused (its NOSPACE alarm, say) must not read as
        // progress, once per retry. Its error says why (at debug; the alarm at warn).
        if !creates.is_empty() {
            tracing::debug!(want, have = active, creating = creates.len(), "scaling up");
            tally = self.create_replicas(key, controller, creates).await;
            self.metrics.pods_created.inc_by(tally.written as u64);
            now_active += tally.counted;
            if tally.written > 0 {
                tracing::info!(want, have = active, created = tally.written, "scaled up");
            }
        } else if !deletes.is_empty() {
            tracing::debug!(
                want,
                have = active,
                deleting = deletes.len(),
                "scaling down"
            );
            tally = self.delete_pods(key, controller, deletes).await;
            self.metrics.pods_deleted.inc_by(tally.written as u64);
            now_active -= tally.counted;
            if tally.written > 0 {
                tracing::info!(want, have = active, deleted = tally.written, "scaled down");
            }
        }
        if tally.controller_gone {
            // Deleted (or deleted and re-created) since it was read: its delete event ends
            // its syncs, and the new incarnation, if any, gets its own.
            tracing::debug!("controller deleted since it was read; no more writes for it");
            return Ok(());
        }
        let mut errors = tally.errors;
        let now_active = now_active as i64;
        // New pods are not ready yet; deleted ones may have been: never more than active.
        let ready = (ready as i64).min(now_active);
        if controller.status.replicas != now_active || controller.status.ready_replicas != ready {
            match self
                .pod_control
                .update_status(controller, now_active, ready)
                .await
            {
                Ok(StatusOutcome::Written(revision)) => {
                    self.memory
                        .record(key, |w| w.status = w.status.max(revision.0));
                }
                // The controller changed meanwhile; its event syncs it again.
                Ok(StatusOutcome::Changed) => {}
                Err(e) => errors.push(e),
            }
        }
        match errors.into_iter().next() {
            None => Ok(()),
            Some(first) => Err(first),
        }
    }

    /// Creates the named replicas in slow-start batches of 1, 2, 4, ... (continuing from
    /// where the controller's last successful creates got to), stopping after a batch
    /// with an error or a refusal because the controller is gone.
    async fn create_replicas(
        &self,
        key: &str,
        controller: &ReplicationController,
        names: Vec<String>,
    ) -> Tally {
        let selector = controller.spec.selector.as_selector();
        let mut names = names.into_iter();
        let mut tally = Tally::default();
        let first = match self.memory.written(key).slow_start {
            Some((batch, at)) if at.elapsed() < SLOW_START_MEMORY => batch,
            _ => 1,
        };
        let mut last_batch = 0;
        for batch_size in slow_start_batches(first, names.len()) {
            last_batch = batch_size;
            let creates = names.by_ref().take(batch_size).map(|name| async move {
                let pod = new_pod_from_template(controller, name.clone());
                (name, self.pod_control.create_pod(controller, pod).await)
            });
            let results = futures::future::join_all(creates).await;
            let mut highest = 0;
            for (name, result) in results {
                match result {
                    Ok(CreateOutcome::Created(revision)) => {
                        tally.written += 1;
                        tally.counted += 1;
                        highest = highest.max(revision.0);
                    }
                    // A concurrent sync (or another kcm) created this very replica.
                    Ok(CreateOutcome::Exists(Some(pod)))
                        if pod.is_active()
                            && selector.matches(&pod.metadata.labels)
                            && api::controller_of(&pod.metadata).is_none() =>
                    {
                        tally.counted += 1
                    }
                    Ok(CreateOutcome::Exists(_)) => {
                        tracing::debug!(pod = %name, "name taken by another pod; the next sync picks another slot")
                    }
                    Ok(CreateOutcome::ControllerGone) => tally.controller_gone = true,
                    Err(e) => tally.errors.push(e.context(format!(
                        "create pod {}/{name}",
                        controller.metadata.namespace
                    ))),
                }
            }
            self.memory.record(key, |w| w.pods = w.pods.max(highest));
            if tally.controller_gone {
                return tally;
            }
            if !tally.errors.is_empty() {
                self.memory.record(key, |w| w.slow_start = None);
                return tally;
            }
        }
        let burst = self.config.burst_replicas.max(1);
        let next = (last_batch * 2).clamp(1, burst);
        self.memory.record(key, |w| {
            w.slow_start = Some((next, tokio::time::Instant::now()))
        });
        tally
    }

    /// Deletes the given pods in parallel, each guarded by its resourceVersion.
    async fn delete_pods(
        &self,
        key: &str,
        controller: &ReplicationController,
        victims: Vec<Arc<CachedPod>>,
    ) -> Tally {
        let deletes = victims.iter().map(|pod| async move {
            let version = ResourceVersion(pod.resource_version);
            let result = self
                .pod_control
                .delete_pod(controller, &pod.namespace, &pod.name, version)
                .await;
            (pod.key(), result)
        });
        let mut tally = Tally::default();
        let mut highest = 0;
        for (pod, result) in futures::future::join_all(deletes).await {
            match result {
                Ok(DeleteOutcome::Deleted(revision)) => {
                    tally.written += 1;
                    tally.counted += 1;
                    highest = highest.max(revision.0);
                }
                Ok(DeleteOutcome::Gone) => tally.counted += 1,
                Ok(DeleteOutcome::Changed) => {
                    tracing::debug!(%pod, "pod changed since it was ranked; skipped")
                }
                Ok(DeleteOutcome::ControllerGone) => tally.controller_gone = true,
                Err(e) => tally.errors.push(e.context(format!("delete pod {pod}"))),
            }
        }
        self.memory.record(key, |w| w.pods = w.pods.max(highest));
        tally
    }
}
