//! One ReplicaSet sync, Kubernetes' `syncReplicaSet`: observe the ReplicaSet and one view
//! of its namespace's pods, decide in a pure function ([`decide`]), act only through
//! [`ReplicaSetControl`]: adoptions and releases, then creates or deletes, then the status
//! if it changed.
//!
//! Invariants (as in the replication manager): read-your-writes — a sync reads the
//! ReplicaSet from the cache only once it has applied this controller's last status write
//! for it, and counts pods from the cache only once it has applied its last pod write,
//! else it reads etcd; a cached ReplicaSet is confirmed from etcd before any pod write, and
//! the writes themselves compare the version the sync decided from.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use crate::api::{self, Pod, ReplicaSet, ResourceVersion};
use crate::controller::replicas::{self, record_status, Writer, Writes};
use crate::controller::{Action, PodStamp};
use crate::informer::{CachedPod, Namespace, ObjectKey};
use crate::labels::Selector;
use crate::registry::StorageError;

use super::control::{ClaimOutcome, ReplicaSetControl, ReplicaSetReads};
use super::plan::{availability, calculate_status, decide, is_active, new_pod, Decision, Failure};
use super::Inner;

/// How the sync's pod writes went.
#[derive(Default)]
struct Tally {
    written: usize,
    /// Pods created (or found created by another writer) that the status counts.
    created: usize,
    /// Pods gone as the sync wanted (deleted here or by someone else).
    deleted: Vec<Arc<CachedPod>>,
    /// Adoptions and releases that failed: their pods are not what the decision assumed.
    unclaimed: Vec<Arc<CachedPod>>,
    failure: Option<Failure>,
    errors: Vec<anyhow::Error>,
    /// A guarded write was refused: the ReplicaSet changed or went since it was read.
    owner_changed: bool,
}

impl<C: ReplicaSetControl, R: ReplicaSetReads> Inner<C, R> {
    pub(super) fn forget(&self, key: &ObjectKey) {
        self.memory.forget(key);
    }

    /// The selector of a valid ReplicaSet; `None` (after one warning per version) for an
    /// invalid one.
    fn valid_selector(&self, key: &ObjectKey, rs: &ReplicaSet) -> Option<Selector> {
        let invalid = match api::validate(rs) {
            // Written by etcdctl without one: its pods' controller reference could not
            // name it.
            Ok(()) if rs.metadata.uid.is_empty() => {
                "metadata.uid is empty (a controller reference needs it)".to_string()
            }
            Ok(()) => match rs.spec.selector.as_ref().map(|s| s.to_selector()) {
                Some(Ok(selector)) => return Some(selector),
                Some(Err(e)) => e.to_string(),
                None => "no selector".to_string(),
            },
            Err(e) => e.to_string(),
        };
        let version = rs.metadata.resource_version.unwrap_or_default();
        self.memory.warn_once(
            key,
            &version.to_string(),
            &format!("skipping replica set: {invalid}"),
        );
        None
    }

    /// Decides over one consistent read of the namespace's pods (the cache once it has
    /// applied this controller's last pod write for `key` and reached the view its last
    /// status came from, else etcd), with the revision of that view.
    async fn decide(
        &self,
        key: &ObjectKey,
        rs: &ReplicaSet,
        selector: &Selector,
    ) -> Result<(Decision, i64), StorageError> {
        let namespace = rs.metadata.namespace.as_str();
        // No limit on the decision: the replica writer bounds the writes in flight (the
        // burst limit) and in time (its budget per sync).
        let limit = usize::MAX;
        let rcs = self.controllers.get();
        let rc_selects = |labels: &crate::labels::Set| {
            rcs.is_some_and(|rcs| {
                rcs.read(namespace, |ns| {
                    ns.is_some_and(|ns| {
                        ns.items().any(|rc| {
                            !rc.spec.selector.is_empty()
                                && api::selector_matches(&rc.spec.selector, labels)
                        })
                    })
                })
            })
        };
        if let Some(cache) = self.pods.get() {
            let written = self.memory.written(key);
            let caught_up = cache
                .wait_for(written.pods.max(written.view), self.config.cache_wait)
                .await;
            if !self.config.fresh_reads && caught_up {
                let decision =
                    cache.read(namespace, |ns| decide(rs, selector, ns, limit, rc_selects));
                let view = cache.revision();
                // No create from a pod cache that shows pods of a namesake and is older
                // than the ReplicaSet: a recreated owner whose cache still shows the
                // orphans of its namesake's orphaning delete as owned by the namesake
                // would create pods beside them instead of adopting them (issue 15).
                // Such a decision is made again from etcd. (Only then: a scale-up's own
                // status writes keep the ReplicaSet ahead of the pod cache, and a list
                // per batch would cost a scale-up of 10,000 a third of its speed.)
                let rs_at = rs.metadata.resource_version.map_or(0, |rv| rv.0);
                if decision.creates.is_empty() || decision.claims.namesakes == 0 || view >= rs_at {
                    return Ok((decision, view));
                }
            }
        }
        let fresh: Namespace<CachedPod> = self.reads.pods(namespace).await?;
        let decision = decide(rs, selector, Some(&fresh), limit, rc_selects);
        Ok((decision, replicas::newest_pod(&fresh)))
    }

    /// `syncReplicaSet`.
    ///
    /// # Errors
    /// When etcd fails or a write fails (the key is retried with backoff). A deleted,
    /// malformed or invalid ReplicaSet is not an error.
    pub(super) async fn sync_replica_set(&self, key: &ObjectKey) -> anyhow::Result<Action> {
        let (namespace, name) = (&*key.namespace, &*key.name);
        let written = self.memory.written(key);
        // From the cache once it has applied this controller's last status write; a
        // cached ReplicaSet is confirmed from etcd before any pod write (below).
        let cached = match self.replica_sets.get() {
            Some(cache)
                if !self.config.fresh_reads
                    && cache.wait_for(written.status, self.config.cache_wait).await =>
            {
                let Some(rs) = cache.get(namespace, name) else {
                    return Ok(Action::Done);
                };
                Some(rs)
            }
            _ => None,
        };
        let from_cache = cached.is_some();
        let mut rs = match cached {
            Some(rs) => rs,
            None => match self.fresh_replica_set(key, namespace, name).await? {
                Some(rs) => rs,
                None => return Ok(Action::Done),
            },
        };
        let Some(mut selector) = self.valid_selector(key, &rs) else {
            return Ok(Action::Done);
        };
        let (mut decision, mut view) = self.decide(key, &rs, &selector).await?;
        if from_cache && decision.writes_pods() {
            // The ReplicaSet and pod caches follow two watches: before writing pods,
            // confirm the ReplicaSet from etcd, and decide again if it changed.
            let Some(fresh) = self.fresh_replica_set(key, namespace, name).await? else {
                return Ok(Action::Done);
            };
            if fresh.metadata.resource_version != rs.metadata.resource_version {
                rs = fresh;
                let Some(fresh_selector) = self.valid_selector(key, &rs) else {
                    return Ok(Action::Done);
                };
                selector = fresh_selector;
                (decision, view) = self.decide(key, &rs, &selector).await?;
            }
        }
        self.act(key, &rs, decision, view).await
    }

    /// The ReplicaSet as etcd has it now; `None` when it is gone (forgotten) or does not
    /// decode.
    async fn fresh_replica_set(
        &self,
        key: &ObjectKey,
        namespace: &str,
        name: &str,
    ) -> anyhow::Result<Option<Arc<ReplicaSet>>> {
        match self.reads.replica_set(namespace, name).await {
            Ok(rs) => Ok(Some(Arc::new(rs))),
            Err(StorageError::NotFound { .. }) => {
                self.forget(key);
                Ok(None)
            }
            // The informer has already warned about this value.
            Err(StorageError::Decode(e)) => {
                tracing::debug!(error = %e, "skipping malformed replica set");
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Carries out `decision`, made over a view of the pods at revision `view`: the claims,
    /// creates or deletes, then the status.
    async fn act(
        &self,
        key: &ObjectKey,
        rs: &ReplicaSet,
        decision: Decision,
        view: i64,
    ) -> anyhow::Result<Action> {
        let Decision {
            claims,
            active,
            creates,
            deletes,
        } = decision;
        let mut tally = Tally::default();
        self.claim(key, rs, &claims.adopt, &claims.release, &mut tally)
            .await;
        let want = rs.replicas();
        let have = active.len();
        if !tally.owner_changed && !creates.is_empty() {
            tracing::debug!(want, have, creating = creates.len(), "scaling up");
            self.create_replicas(key, rs, creates, &mut tally).await;
            self.metrics.pods_created.inc_by(tally.written as u64);
            if tally.written > 0 {
                tracing::info!(replicaset = %key, want, have, created = tally.written, "scaled up");
            }
        } else if !tally.owner_changed && !deletes.is_empty() {
            tracing::debug!(want, have, deleting = deletes.len(), "scaling down");
            self.delete_pods(key, rs, deletes, &mut tally).await;
            self.metrics.pods_deleted.inc_by(tally.written as u64);
            if tally.written > 0 {
                tracing::info!(replicaset = %key, want, have, deleted = tally.written, "scaled down");
            }
        }
        if tally.owner_changed {
            // Its own event syncs it again, at its new version.
            tracing::debug!(replicaset = %key, "replica set changed since it was read; no more writes from this sync");
            return Ok(Action::Done);
        }
        // By name, through a set: a scale-down of 10,000 deletes thousands per sync, and
        // a scan of them per active pod cost the sync a third of its time.
        let gone: HashSet<&str> = (tally.deleted.iter().chain(&tally.unclaimed))
            .map(|pod| &*pod.name)
            .collect();
        let now_owned: Vec<_> = active
            .into_iter()
            .filter(|pod| is_active(pod) && !gone.contains(&*pod.name))
            .collect();
        let now_secs = epoch_now();
        let status = calculate_status(
            rs,
            &now_owned,
            tally.created,
            tally.failure.as_ref(),
            &api::now_rfc3339(),
            now_secs,
        );
        // Some pods are ready but not yet available: sync again when the first becomes
        // so, as Kubernetes' `AddAfter`, so status catches up with no other event.
        let (_, available_in) = availability(&now_owned, rs.spec.min_ready_seconds, now_secs);
        let mut errors = tally.errors;
        if status != rs.status {
            let written = self.control.update_status(rs, status).await;
            errors.extend(record_status(&self.memory, key, view, written));
        }
        match errors.into_iter().next() {
            None => Ok(Action::requeue_after(available_in.map(Duration::from_secs))),
            Some(first) => Err(first),
        }
    }

    /// Adopts and releases, in parallel; a claim the pod's change refused leaves the pod
    /// out of the count.
    async fn claim(
        &self,
        key: &ObjectKey,
        rs: &ReplicaSet,
        adopt: &[Arc<CachedPod>],
        release: &[Arc<CachedPod>],
        tally: &mut Tally,
    ) {
        let adoptions = adopt.iter().map(|pod| async move {
            let version = ResourceVersion(pod.resource_version);
            let result = self
                .control
                .adopt(rs, &pod.namespace, &pod.name, version)
                .await;
            (pod, "adopt", result)
        });
        let releases = release.iter().map(|pod| async move {
            let version = ResourceVersion(pod.resource_version);
            let result = self
                .control
                .release(rs, &pod.namespace, &pod.name, version)
                .await;
            (pod, "release", result)
        });
        let (adopted, released) = futures::future::join(
            futures::future::join_all(adoptions),
            futures::future::join_all(releases),
        )
        .await;
        let mut highest = 0;
        for (pod, op, result) in adopted.into_iter().chain(released) {
            match result {
                Ok(ClaimOutcome::Done(revision)) => {
                    highest = highest.max(revision.0);
                    tracing::info!(replicaset = %key, pod = %pod.name, "{op}ed pod");
                }
                Ok(ClaimOutcome::PodChanged) => {
                    if op == "adopt" {
                        tally.unclaimed.push(pod.clone());
                    }
                }
                Ok(ClaimOutcome::OwnerChanged) => tally.owner_changed = true,
                Err(e) => {
                    if op == "adopt" {
                        tally.unclaimed.push(pod.clone());
                    }
                    tally
                        .errors
                        .push(e.context(format!("{op} pod {}", pod.key())));
                }
            }
        }
        self.memory.record(key, |w| w.pods = w.pods.max(highest));
    }

    /// Creates the named replicas (the replica writer's slow-start window), each a pod
    /// from the template with the ReplicaSet's controller reference; a pod found holding a
    /// name counts when it is active and names this ReplicaSet as its controller.
    async fn create_replicas(
        &self,
        key: &ObjectKey,
        rs: &ReplicaSet,
        names: Vec<String>,
        tally: &mut Tally,
    ) {
        // The pod made once for all of them; not an async block: each is encoded as its
        // write starts, and the future the window holds is the write's alone.
        let stamp = PodStamp::new(new_pod(rs, String::new()));
        let create = |name: String| self.control.create_pod(rs, stamp.pod(name));
        let ours =
            |pod: &Pod| api::controller_of(&pod.metadata).is_some_and(|r| r.uid == rs.metadata.uid);
        let namespace = &rs.metadata.namespace;
        let writes =
            replicas::create_replicas(self.writer(key, rs), namespace, names, create, ours).await;
        tally.add(writes, "FailedCreate");
    }

    /// Deletes the given pods, lowest rank first, up to the burst limit in flight, each
    /// guarded by its resourceVersion.
    async fn delete_pods(
        &self,
        key: &ObjectKey,
        rs: &ReplicaSet,
        victims: Vec<Arc<CachedPod>>,
        tally: &mut Tally,
    ) {
        let delete = |pod: &CachedPod| {
            let (namespace, name) = (pod.namespace.clone(), pod.name.clone());
            let version = ResourceVersion(pod.resource_version);
            async move {
                self.control
                    .delete_pod(rs, &namespace, &name, version)
                    .await
            }
        };
        let writes = replicas::delete_pods(self.writer(key, rs), victims, delete).await;
        tally.add(writes, "FailedDelete");
    }

    /// The replica writer for `rs`'s writes in this sync, which stop starting once the
    /// ReplicaSet cache holds a newer version of it (its creates' guard refuses them then
    /// anyway; its deletes' guard only once it is deleted).
    fn writer<'a>(
        &'a self,
        key: &'a ObjectKey,
        rs: &'a ReplicaSet,
    ) -> Writer<'a, impl Fn() -> bool + 'a> {
        Writer {
            memory: &self.memory,
            key,
            burst: self.config.burst_replicas,
            superseded: move || replicas::superseded(self.replica_sets.get(), rs),
        }
    }
}

impl Tally {
    /// Adds the replica writer's `writes`; a failed write is the ReplicaSet's `reason`
    /// failure (the last one, as Kubernetes' `manageReplicasErr`).
    fn add(&mut self, writes: Writes, reason: &'static str) {
        self.written += writes.written;
        self.created += writes.created;
        self.deleted.extend(writes.deleted);
        self.owner_changed |= writes.owner_gone;
        if let Some(last) = writes.errors.last() {
            self.failure = Some(Failure {
                reason,
                message: format!("{last:#}"),
            });
        }
        self.errors.extend(writes.errors);
    }
}

/// Seconds since the Unix epoch, now.
fn epoch_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
