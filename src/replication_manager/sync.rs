//! One sync, 2014's `syncReplicationController` in three steps: observe the controller and
//! one view of its pods, decide in a pure function ([`decide`]), act only through
//! [`PodControl`] (creates, deletes, the status write).
//!
//! Invariants: the decision reads the pods once (one read of the cache, or one etcd list),
//! so its count and its free names agree; a cached controller is confirmed from etcd
//! before any pod write; a write refused because the controller is gone ends the sync
//! quietly, with no further writes.

use std::sync::Arc;

use crate::api::{self, Pod, ReplicationController, ResourceVersion};
use crate::controller::replicas::{self, record_status, Writer, Writes, Written};
use crate::controller::PodStamp;
use crate::informer::{CachedPod, Namespace, ObjectKey, PodInformer};
use crate::registry::StorageError;

use super::plan::{decide, new_pod_from_template, Decision};
use super::pod_control::{FreshReads, PodControl};
use super::Inner;

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
    /// under its lock, for the count and the free names together. With the revision of
    /// that read, for the status it leads to.
    fn decide(&self) -> (Decision, i64) {
        // No limit on the decision: the replica writer bounds the writes in flight (the
        // burst limit) and in time (its budget per sync).
        let limit = usize::MAX;
        match &self.pods {
            PodView::Cache(pods, namespace) => {
                let decision = pods.read(namespace, |ns| decide(&self.controller, ns, limit));
                (decision, pods.revision())
            }
            PodView::Fresh(ns) => (
                decide(&self.controller, Some(ns), limit),
                replicas::newest_pod(ns),
            ),
        }
    }
}

impl<P: PodControl, R: FreshReads> Inner<P, R> {
    /// Forgets what the manager remembers of a deleted controller.
    pub(super) fn forget(&self, key: &ObjectKey) {
        self.memory.forget(key);
    }

    /// Whether the controller may be acted on; warns once per version when not.
    fn is_valid(&self, key: &ObjectKey, controller: &ReplicationController) -> bool {
        match api::validate(controller) {
            Ok(()) => true,
            Err(e) => {
                let version = controller.metadata.resource_version.unwrap_or_default();
                self.memory.warn_once(
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
    /// for the controller and reached the view its last status came from, else a fresh
    /// read.
    async fn pods(&self, namespace: &str, written: Written) -> Result<PodView, StorageError> {
        if let Some(cache) = self.pods.get() {
            let target = written.pods.max(written.view);
            if !self.config.fresh_reads && cache.wait_for(target, self.config.cache_wait).await {
                return Ok(PodView::Cache(cache.clone(), namespace.to_string()));
            }
            if !self.config.fresh_reads {
                tracing::debug!(
                    namespace,
                    revision = target,
                    "pod cache behind; reading etcd"
                );
            }
        }
        Ok(PodView::Fresh(self.reads.pods(namespace).await?))
    }

    /// The controller behind `key` and where to read its pods; `None` when there is
    /// nothing to do (deleted, malformed, or invalid after one warning per version).
    async fn observe(&self, key: &ObjectKey) -> anyhow::Result<Option<View>> {
        let (namespace, name) = (&*key.namespace, &*key.name);
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
    pub(super) async fn sync_replication_controller(&self, key: &ObjectKey) -> anyhow::Result<()> {
        let Some(mut view) = self.observe(key).await? else {
            return Ok(());
        };
        let (mut decision, mut at) = view.decide();
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
                (decision, at) = view.decide();
            }
        }
        self.act(key, &view.controller, decision, at).await
    }

    /// Carries out `decision` for `controller`, made over a view of the pods at revision
    /// `view`, through the pod control: its creates or deletes, then `status.replicas` if
    /// it changed.
    async fn act(
        &self,
        key: &ObjectKey,
        controller: &ReplicationController,
        decision: Decision,
        view: i64,
    ) -> anyhow::Result<()> {
        let Decision {
            active,
            ready,
            creates,
            deletes,
        } = decision;
        let want = controller.spec.replicas;
        let mut now_active = active;
        let mut writes = Writes::default();
        // What a sync set out to do is debug; what it did is info, after the writes: a
        // sync whose every write etcd refused (its NOSPACE alarm, say) must not read as
        // progress, once per retry. Its error says why (at debug; the alarm at warn).
        if !creates.is_empty() {
            tracing::debug!(want, have = active, creating = creates.len(), "scaling up");
            writes = self.create_replicas(key, controller, creates).await;
            self.metrics.pods_created.inc_by(writes.written as u64);
            now_active += writes.created;
            if writes.written > 0 {
                tracing::info!(want, have = active, created = writes.written, "scaled up");
            }
        } else if !deletes.is_empty() {
            tracing::debug!(
                want,
                have = active,
                deleting = deletes.len(),
                "scaling down"
            );
            writes = self.delete_pods(key, controller, deletes).await;
            self.metrics.pods_deleted.inc_by(writes.written as u64);
            now_active -= writes.deleted.len();
            if writes.written > 0 {
                tracing::info!(want, have = active, deleted = writes.written, "scaled down");
            }
        }
        if writes.owner_gone {
            // Deleted (or deleted and re-created) since it was read: its delete event ends
            // its syncs, and the new incarnation, if any, gets its own.
            tracing::debug!("controller deleted since it was read; no more writes for it");
            return Ok(());
        }
        let mut errors = writes.errors;
        let now_active = now_active as i64;
        // New pods are not ready yet; deleted ones may have been: never more than active.
        let ready = (ready as i64).min(now_active);
        if controller.status.replicas != now_active || controller.status.ready_replicas != ready {
            let written = self
                .pod_control
                .update_status(controller, now_active, ready)
                .await;
            errors.extend(record_status(&self.memory, key, view, written));
        }
        match errors.into_iter().next() {
            None => Ok(()),
            Some(first) => Err(first),
        }
    }

    /// Creates the named replicas (the replica writer's slow-start window), each a pod
    /// from the controller's template; a pod found holding a name counts when it is
    /// active, selected and owned by no controller reference.
    async fn create_replicas(
        &self,
        key: &ObjectKey,
        controller: &ReplicationController,
        names: Vec<String>,
    ) -> Writes {
        let selector = controller.spec.selector.as_selector();
        let namespace = &controller.metadata.namespace;
        // The pod made once for all of them; not an async block: each is encoded as its
        // write starts, and the future the window holds is the write's alone.
        let stamp = PodStamp::new(new_pod_from_template(controller, String::new()));
        let create = |name: String| self.pod_control.create_pod(controller, stamp.pod(name));
        let ours = |pod: &Pod| {
            selector.matches(&pod.metadata.labels) && api::controller_of(&pod.metadata).is_none()
        };
        replicas::create_replicas(self.writer(key, controller), namespace, names, create, ours)
            .await
    }

    /// Deletes the given pods, lowest rank first, up to the burst limit in flight, each
    /// guarded by its resourceVersion.
    async fn delete_pods(
        &self,
        key: &ObjectKey,
        controller: &ReplicationController,
        victims: Vec<Arc<CachedPod>>,
    ) -> Writes {
        let delete = |pod: &CachedPod| {
            let (namespace, name) = (pod.namespace.clone(), pod.name.clone());
            let version = ResourceVersion(pod.resource_version);
            async move {
                self.pod_control
                    .delete_pod(controller, &namespace, &name, version)
                    .await
            }
        };
        replicas::delete_pods(self.writer(key, controller), victims, delete).await
    }

    /// The replica writer for `controller`'s writes in this sync, which stop starting once
    /// the controller cache holds a newer version of it.
    fn writer<'a>(
        &'a self,
        key: &'a ObjectKey,
        controller: &'a ReplicationController,
    ) -> Writer<'a, impl Fn() -> bool + 'a> {
        Writer {
            memory: &self.memory,
            key,
            burst: self.config.burst_replicas,
            superseded: move || replicas::superseded(self.controllers.get(), controller),
        }
    }
}
