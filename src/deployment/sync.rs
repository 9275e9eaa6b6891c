//! One Deployment sync, Kubernetes' `syncDeployment`: read the deployment, its
//! namespace's ReplicaSets (and, for `Recreate`, pods), claim ReplicaSets, decide in
//! [`plan::plan`], then write: the new ReplicaSet, ReplicaSet updates, deletions, and
//! the deployment's annotations and status.
//!
//! Invariants: read-your-writes — a sync reads a cache only once it has applied this
//! controller's last write of that kind for the deployment, else it reads its backend
//! ([`DeploymentControl`]: etcd or the API); every
//! write is a compare-and-swap on the revision read (every ReplicaSet write but a release
//! also requires the deployment unchanged since it was read), and the first refused write
//! ends the sync (the change that refused it queues the deployment again).

use std::sync::Arc;
use std::time::Duration;

use crate::api::{self, Deployment, ReplicaSet};
use crate::controller::Action;
use crate::informer::{CachedPod, ObjectKey};
use crate::labels::Selector;
use crate::record::Reference;
use crate::registry::StorageError;

use super::plan::{self, equal_ignore_hash, owns, Plan};
use super::{DeploymentControl, Inner};

/// What the controller remembers of its writes for one deployment.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Written {
    /// The revision of its last write of the deployment.
    deployment: i64,
    /// The header revision of its last ReplicaSet write.
    replica_sets: i64,
    /// The revision of the view of the ReplicaSets its last status write was computed
    /// from: a later sync reads a cache only once it has reached it, so the counts a status
    /// shows never come from a view older than the last one's (issue 33).
    view: i64,
}

/// How a write went.
enum Outcome {
    Done(i64),
    /// Refused: something changed since the read; its own event syncs again.
    Changed,
}

impl<C: DeploymentControl> Inner<C> {
    fn warn_once(&self, key: &ObjectKey, d: &Deployment, message: &str) {
        let version = d.metadata.resource_version.unwrap_or_default().to_string();
        if self.memory.first_warning(key, &version) {
            tracing::warn!(deployment = %key, resource_version = %version, "{message}");
        }
    }

    /// The selector of a valid deployment; `None` (after one warning per version) for an
    /// invalid one.
    fn valid_selector(&self, key: &ObjectKey, d: &Deployment) -> Option<Selector> {
        let invalid = match api::validate(d) {
            Ok(()) if d.metadata.uid.is_empty() => {
                "metadata.uid is empty (a controller reference needs it)".to_string()
            }
            Ok(()) => match d.spec.selector.as_ref().map(|s| s.to_selector()) {
                Some(Ok(selector)) => return Some(selector),
                Some(Err(e)) => e.to_string(),
                None => "no selector".to_string(),
            },
            Err(e) => e.to_string(),
        };
        self.warn_once(key, d, &format!("skipping deployment: {invalid}"));
        None
    }

    /// The deployment, from the cache once it has applied this controller's last write
    /// of it, else from etcd; `None` when it is gone or does not decode.
    async fn read_deployment(
        &self,
        key: &ObjectKey,
        namespace: &str,
        name: &str,
    ) -> anyhow::Result<Option<Arc<Deployment>>> {
        let written = self.memory.written(key).deployment;
        if let Some(cache) = self.deployments.get() {
            if !self.config.fresh_reads && cache.wait_for(written, self.config.cache_wait).await {
                return Ok(cache.get(namespace, name));
            }
        }
        match self.control.deployment(namespace, name).await {
            Ok(d) => Ok(Some(Arc::new(d))),
            Err(StorageError::NotFound { .. }) => Ok(None),
            Err(StorageError::Decode(e)) => {
                tracing::debug!(error = %e, "skipping malformed deployment");
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The ReplicaSets of `namespace`, from the cache once it has applied this
    /// controller's last ReplicaSet write for `key` (and unless `fresh`), else from etcd;
    /// with the cache's revision when they came from it.
    async fn read_replica_sets(
        &self,
        key: &ObjectKey,
        namespace: &str,
        fresh: bool,
    ) -> anyhow::Result<(Vec<Arc<ReplicaSet>>, Option<i64>)> {
        let written = self.memory.written(key);
        let target = written.replica_sets.max(written.view);
        if let Some(cache) = self.replica_sets.get() {
            if !self.config.fresh_reads
                && !fresh
                && cache.wait_for(target, self.config.cache_wait).await
            {
                let revision = cache.revision();
                let items = cache.read(namespace, |ns| {
                    ns.map(|ns| ns.items().cloned().collect())
                        .unwrap_or_default()
                });
                return Ok((items, Some(revision)));
            }
        }
        let items = self.control.replica_sets(namespace).await?;
        Ok((items.into_iter().map(Arc::new).collect(), None))
    }

    /// The pods of `namespace` owned by one of `rss`, from the pod cache once it has
    /// caught up with the ReplicaSet cache (a ReplicaSet's status is written after its
    /// pod writes), else from etcd.
    async fn read_pods(
        &self,
        namespace: &str,
        rss: &[ReplicaSet],
    ) -> anyhow::Result<Vec<Arc<CachedPod>>> {
        let owned = |pod: &Arc<CachedPod>| {
            pod.controller
                .as_deref()
                .is_some_and(|r| rss.iter().any(|rs| *r.uid == rs.metadata.uid))
        };
        let target = self.replica_sets.get().map_or(0, |rs| rs.revision());
        if let Some(cache) = self.pods.get() {
            if cache.wait_for(target, self.config.cache_wait).await {
                return Ok(cache.read(namespace, |ns| {
                    ns.map(|ns| ns.items().filter(|p| owned(p)).cloned().collect())
                        .unwrap_or_default()
                }));
            }
        }
        let fresh = self.control.pods(namespace).await?;
        Ok(fresh.items().filter(|p| owned(p)).cloned().collect())
    }

    /// `syncDeployment`.
    ///
    /// # Errors
    /// When etcd fails or a write fails (the key is retried with backoff). A deleted,
    /// malformed or invalid deployment is not an error.
    pub(super) async fn sync_deployment(&self, key: &ObjectKey) -> anyhow::Result<Action> {
        match self.sync_once(key, false).await? {
            Some(action) => Ok(action),
            None => Ok(self.sync_once(key, true).await?.unwrap_or(Action::Done)),
        }
    }

    /// One sync, reading the ReplicaSets from etcd when `fresh`; `None` when it found it
    /// must plan again from etcd (before any write of its own plan).
    async fn sync_once(&self, key: &ObjectKey, fresh: bool) -> anyhow::Result<Option<Action>> {
        let (namespace, name) = (&*key.namespace, &*key.name);
        let Some(d) = self.read_deployment(key, namespace, name).await? else {
            self.memory.forget(key);
            return Ok(Some(Action::Done));
        };
        let Some(selector) = self.valid_selector(key, &d) else {
            return Ok(Some(Action::Done));
        };
        let (candidates, cache_revision) = self.read_replica_sets(key, namespace, fresh).await?;
        // The revision of this view of the ReplicaSets, for the status it leads to: the
        // cache's (read after the view, so not older than it), or the newest ReplicaSet's
        // of a fresh list (which the cache reaches with that ReplicaSet's event).
        let view = match (cache_revision, self.replica_sets.get()) {
            (Some(_), Some(cache)) => cache.revision(),
            _ => candidates
                .iter()
                .filter_map(|rs| rs.metadata.resource_version)
                .map(|rv| rv.0)
                .max()
                .unwrap_or(0),
        };
        let claims = plan::claim(&d, &selector, &candidates);
        let mut owned: Vec<ReplicaSet> = claims.owned.iter().map(|rs| (**rs).clone()).collect();
        for rs in &claims.release {
            let mut released = (**rs).clone();
            released
                .metadata
                .owner_references
                .retain(|r| r.uid != d.metadata.uid);
            match self.write_rs(key, None, &released).await? {
                Outcome::Done(_) => {
                    tracing::info!(deployment = %key, replicaset = %rs.metadata.name, "released replica set")
                }
                Outcome::Changed => return Ok(Some(Action::Done)),
            }
        }
        if !claims.adopt.is_empty() {
            for rs in &claims.adopt {
                let mut adopted = (**rs).clone();
                adopted
                    .metadata
                    .owner_references
                    .push(plan::controller_ref(&d));
                match self.write_rs(key, Some(&d), &adopted).await? {
                    Outcome::Done(revision) => {
                        tracing::info!(deployment = %key, replicaset = %rs.metadata.name, "adopted replica set");
                        adopted.metadata.resource_version = Some(api::ResourceVersion(revision));
                        api::remember_spec(&mut adopted);
                        owned.push(adopted);
                    }
                    Outcome::Changed => return Ok(Some(Action::Done)),
                }
            }
        }
        let pods = if d.is_rolling_update() || d.metadata.deletion_timestamp.is_some() {
            Vec::new()
        } else {
            self.read_pods(namespace, &owned).await?
        };
        let now = epoch_now();
        let sizes: Vec<(String, i64)> = owned
            .iter()
            .map(|rs| (rs.metadata.name.clone(), rs.replicas()))
            .collect();
        let mut plan = plan::plan(&d, owned.clone(), &pods, now);
        // No new ReplicaSet from a ReplicaSet cache older than the deployment: one written
        // just before it (an orphan with its template, to adopt as the new one) may not be
        // in the cache yet, as the two kinds come on two watches. Plan again from etcd.
        // (Only then: an older cache is common, a deployment's own writes keep it ahead.)
        let d_at = d.metadata.resource_version.map_or(0, |rv| rv.0);
        if plan.create.is_some() && cache_revision.is_some_and(|at| at < d_at) {
            return Ok(None);
        }
        if let Some(planned) = &plan.create {
            // The name's hash is over the template as stored: read it raw (once per new
            // ReplicaSet) and plan again if it differs from the typed template's.
            let Some(hash) = self.control.template_hash(&d).await? else {
                // Changed since read: its own event syncs it again.
                return Ok(Some(Action::Done));
            };
            let typed = planned.metadata.labels.get(api::POD_TEMPLATE_HASH_LABEL);
            if typed != Some(hash.as_str()) {
                plan = plan::plan_with_hash(&d, owned, &pods, now, Some(hash));
            }
        }
        self.act(key, &d, plan, &sizes, view).await.map(Some)
    }

    /// Writes a ReplicaSet over the revision it was read at.
    async fn write_rs(
        &self,
        key: &ObjectKey,
        guard: Option<&Deployment>,
        rs: &ReplicaSet,
    ) -> anyhow::Result<Outcome> {
        match self.control.update_rs(guard, rs).await {
            Ok(stored) => {
                let revision = stored.metadata.resource_version.unwrap_or_default().0;
                self.memory
                    .record(key, |w| w.replica_sets = w.replica_sets.max(revision));
                Ok(Outcome::Done(revision))
            }
            Err(
                StorageError::Conflict { .. }
                | StorageError::NotFound { .. }
                | StorageError::OwnerGone { .. },
            ) => Ok(Outcome::Changed),
            Err(e) => {
                Err(anyhow::Error::from(e)
                    .context(format!("update replica set {}", rs.metadata.key())))
            }
        }
    }

    /// Makes the plan's writes in order, stopping at the first refused one.
    /// `sizes` are the ReplicaSets' sizes as read, for the log; `view` the revision of the
    /// view of them the plan's status comes from.
    async fn act(
        &self,
        key: &ObjectKey,
        d: &Deployment,
        plan: Plan,
        sizes: &[(String, i64)],
        view: i64,
    ) -> anyhow::Result<Action> {
        let Plan {
            create,
            updates,
            deletes,
            deployment,
            requeue_after,
        } = plan;
        if let Some(rs) = create {
            if let Some(stop) = self.create_planned(key, d, &rs).await? {
                return Ok(stop);
            }
        }
        // Every ReplicaSet write of the plan requires the deployment unchanged since the
        // sync read it: a decision from an older template or size never commits (a
        // rollover never grows the previous new ReplicaSet; kubernetes #22719).
        for rs in &updates {
            match self.write_rs(key, Some(d), rs).await? {
                Outcome::Done(_) => self.log_update(key, d, rs, sizes),
                Outcome::Changed => return Ok(Action::Done),
            }
        }
        for rs in &deletes {
            if let Outcome::Changed = self.delete_old_rs(key, d, rs).await? {
                return Ok(Action::Done);
            }
        }
        if let Some(updated) = deployment {
            if self.write_deployment(key, &updated).await? {
                self.memory.record(key, |w| w.view = w.view.max(view));
            }
        }
        // `requeueStuckDeployment`: sync again when the progress deadline passes (the
        // work queue keeps the earliest of several such requeues).
        Ok(Action::requeue_after(
            requeue_after.map(Duration::from_secs),
        ))
    }

    /// Creates the plan's new ReplicaSet; `None` when the sync goes on to the plan's other
    /// writes, else what it ends with. A failed create writes Progressing False `ReplicaSetCreateError`, then
    /// returns the error (retried); a name taken by another template bumps
    /// `status.collisionCount`.
    async fn create_planned(
        &self,
        key: &ObjectKey,
        d: &Deployment,
        rs: &ReplicaSet,
    ) -> anyhow::Result<Option<Action>> {
        let created = match self.create_rs(key, d, rs).await {
            Ok(created) => created,
            Err(e) => {
                let mut failed = d.clone();
                let message = format!(
                    "Failed to create new replica set {:?}: {e:#}",
                    rs.metadata.name
                );
                let condition = plan::new_condition(
                    api::DEPLOYMENT_PROGRESSING,
                    "False",
                    api::FAILED_RS_CREATE_REASON,
                    message,
                    epoch_now(),
                );
                plan::set_condition(&mut failed.status, condition);
                self.write_deployment(key, &failed).await?;
                return Err(e);
            }
        };
        match created {
            Created::Yes => Ok(None),
            Created::Changed => Ok(Some(Action::RequeueAfter(Duration::from_secs(1)))),
            Created::Collision => {
                // `status.collisionCount++`: the next sync hashes to another name.
                let mut collided = d.clone();
                let count = collided.status.collision_count.unwrap_or(0);
                collided.status.collision_count = Some(count.saturating_add(1));
                tracing::info!(deployment = %key, replicaset = %rs.metadata.name, collision_count = count + 1, "replica set name taken by another template; bumped collisionCount");
                self.write_deployment(key, &collided).await?;
                Ok(Some(Action::Done))
            }
        }
    }

    /// Deletes an old ReplicaSet (`cleanupDeployment`) at the revision it was read at.
    async fn delete_old_rs(
        &self,
        key: &ObjectKey,
        guard: &Deployment,
        rs: &ReplicaSet,
    ) -> anyhow::Result<Outcome> {
        match self.control.delete_rs(guard, rs).await {
            Ok(revision) => {
                tracing::info!(deployment = %key, replicaset = %rs.metadata.name, "deleted old replica set (revision history limit)");
                self.memory
                    .record(key, |w| w.replica_sets = w.replica_sets.max(revision.0));
                Ok(Outcome::Done(revision.0))
            }
            Err(
                StorageError::Conflict { .. }
                | StorageError::NotFound { .. }
                | StorageError::OwnerGone { .. },
            ) => Ok(Outcome::Changed),
            Err(e) => {
                Err(anyhow::Error::from(e)
                    .context(format!("delete replica set {}", rs.metadata.key())))
            }
        }
    }

    /// Writes the deployment's annotations and status over the revision read; whether it
    /// was written (a changed or deleted deployment is not an error: its own event syncs
    /// it again).
    async fn write_deployment(&self, key: &ObjectKey, d: &Deployment) -> anyhow::Result<bool> {
        match self.control.update_deployment(d).await {
            Ok(stored) => {
                let revision = stored.metadata.resource_version.unwrap_or_default().0;
                self.memory
                    .record(key, |w| w.deployment = w.deployment.max(revision));
                Ok(true)
            }
            Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => Ok(false),
            Err(e) => Err(anyhow::Error::from(e).context(format!("update deployment {key}"))),
        }
    }

    /// Creates the new ReplicaSet if its name is free, while `d` is unchanged.
    async fn create_rs(
        &self,
        key: &ObjectKey,
        d: &Deployment,
        rs: &ReplicaSet,
    ) -> anyhow::Result<Created> {
        match self.control.create_rs(d, rs).await {
            Ok(stored) => {
                let revision = stored.metadata.resource_version.unwrap_or_default().0;
                self.memory
                    .record(key, |w| w.replica_sets = w.replica_sets.max(revision));
                tracing::info!(deployment = %key, replicaset = %rs.metadata.name, replicas = rs.replicas(), "created new replica set");
                if rs.replicas() > 0 {
                    self.config.events.normal(
                        Reference::of(d),
                        SCALING_REPLICA_SET,
                        format!(
                            "Scaled up replica set {} from 0 to {}",
                            rs.metadata.name,
                            rs.replicas()
                        ),
                    );
                }
                Ok(Created::Yes)
            }
            Err(StorageError::OwnerGone { .. }) => Ok(Created::Changed),
            Err(StorageError::AlreadyExists { .. }) => {
                let existing = match self
                    .control
                    .replica_set(&rs.metadata.namespace, &rs.metadata.name)
                    .await
                {
                    Ok(existing) => existing,
                    // Gone since: the next sync creates it.
                    Err(StorageError::NotFound { .. }) => return Ok(Created::Changed),
                    Err(StorageError::Decode(_)) => return Ok(Created::Collision),
                    Err(e) => return Err(e.into()),
                };
                let same_template = match (&existing.spec.template, &rs.spec.template) {
                    (Some(a), Some(b)) => equal_ignore_hash(a, b),
                    _ => false,
                };
                if owns(d, &existing) && same_template {
                    // Ours, created by an earlier sync the cache had not shown yet.
                    let revision = existing.metadata.resource_version.unwrap_or_default().0;
                    self.memory
                        .record(key, |w| w.replica_sets = w.replica_sets.max(revision));
                    Ok(Created::Changed)
                } else {
                    Ok(Created::Collision)
                }
            }
            Err(e) => {
                Err(anyhow::Error::from(e)
                    .context(format!("create replica set {}", rs.metadata.key())))
            }
        }
    }
}

/// The reason of the event a Deployment records when it resizes a ReplicaSet.
const SCALING_REPLICA_SET: &str = "ScalingReplicaSet";

impl<C: DeploymentControl> Inner<C> {
    /// Logs a written ReplicaSet update, and records Kubernetes' `ScalingReplicaSet` event
    /// about `d` when its size changed from the one read (`sizes`); else it was an
    /// annotation update.
    fn log_update(
        &self,
        key: &ObjectKey,
        d: &Deployment,
        rs: &ReplicaSet,
        sizes: &[(String, i64)],
    ) {
        let name = &rs.metadata.name;
        let from = sizes.iter().find(|(n, _)| n == name).map(|(_, size)| *size);
        let to = rs.replicas();
        let direction = match from {
            Some(from) if to > from => {
                tracing::info!(deployment = %key, replicaset = %name, from, to, "scaled up replica set");
                "up"
            }
            Some(from) if to < from => {
                tracing::info!(deployment = %key, replicaset = %name, from, to, "scaled down replica set");
                "down"
            }
            _ => {
                tracing::debug!(deployment = %key, replicaset = %name, "updated replica set annotations");
                return;
            }
        };
        let from = from.unwrap_or_default();
        self.config.events.normal(
            Reference::of(d),
            SCALING_REPLICA_SET,
            format!("Scaled {direction} replica set {name} from {from} to {to}"),
        );
    }
}

/// What creating the new ReplicaSet did.
enum Created {
    Yes,
    /// The deployment changed, or the ReplicaSet exists as ours: sync again.
    Changed,
    /// Another ReplicaSet has the name.
    Collision,
}

/// Seconds since the Unix epoch, now.
fn epoch_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
