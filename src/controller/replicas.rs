//! The replica writer: what every replica controller (the replication manager, the
//! ReplicaSet controller) writes the same way, from Kubernetes' `pkg/controller/
//! controller_utils.go` (`RealPodControl`, `slowStartBatch`, the expectations that stand
//! for read-your-writes) and the controllers' `manageReplicas`:
//! - creates through a slow-start window (1, 2, 4, ... in flight up to the burst limit,
//!   the next create starting as each completes) that starts no more after an error or
//!   a refusal because the owner is gone ([`create_replicas`]), each create-if-absent
//!   ([`create_guarded`]);
//! - deletes lowest rank first through a window of the burst limit, each guarded by the
//!   pod's resourceVersion ([`delete_pods`], [`delete_guarded`]);
//! - the status compare-and-swap on the owner's resourceVersion ([`write_status`],
//!   [`record_status`]);
//! - the per-key memory of the revisions of those writes ([`Written`]), which a sync waits
//!   for in the caches before trusting them, and of the slow-start window it earned;
//! - the namespace's pods read fresh from etcd ([`list_pods`]).
//!
//! What differs between controllers stays with them: how a pod is made and owned (by
//! selector or by controller reference), which existing pod counts as the controller's,
//! and what a failure means for the status.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::api::{self, Object, Pod, ResourceVersion};
use crate::informer::{CachedPod, Handoff, Informer, Namespace, ObjectKey, Reflected};
use crate::labels::Selector;
use crate::record::{Recorder, Reference};
use crate::registry::{Registry, StorageError};

use futures::stream::{FuturesUnordered, StreamExt as _};

use super::{KeyMemory, NewPod, SlowStart};

/// What a create found.
#[derive(Debug, Clone, PartialEq)]
pub enum CreateOutcome {
    /// Created at this revision.
    Created(ResourceVersion),
    /// The name was taken; the pod holding it, if it could be read.
    Exists(Option<Box<Pod>>),
    /// The controller was deleted (and maybe re-created) since it was read; nothing was
    /// written.
    ControllerGone,
}

/// What a guarded delete found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// Deleted at this revision.
    Deleted(ResourceVersion),
    /// The pod changed since it was ranked; nothing was deleted.
    Changed,
    /// The pod was already gone.
    Gone,
    /// The controller was deleted (and maybe re-created) since it was read; nothing was
    /// deleted.
    ControllerGone,
}

/// What a status write found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusOutcome {
    /// Written at this revision.
    Written(ResourceVersion),
    /// The controller changed (or was deleted) since it was read; its own event syncs it
    /// again.
    Changed,
}

/// What a controller remembers of its own writes for one key.
#[derive(Clone, Copy, Debug, Default)]
pub struct Written {
    /// The header revision of its last pod write (create, delete, adopt, release).
    pub pods: i64,
    /// The revision of its last status write.
    pub status: i64,
    /// The revision of the view of the pods its last status write was computed from (see
    /// [`newest_pod`]): a later sync counts from the pod cache only once the cache has
    /// reached it, so the counts a status shows never come from a view older than the last
    /// one's (a fresh list, then an older cache, made READY run backwards; issue 33).
    pub view: i64,
    /// The slow-start window the next creates begin with (where the last sync's window
    /// got to, up to the burst limit), good for [`SLOW_START_MEMORY`]; otherwise 1. A
    /// scale-up spread over several syncs keeps its pace.
    pub slow_start: Option<(usize, tokio::time::Instant)>,
}

/// How long slow-start progress carries over to the next sync.
pub const SLOW_START_MEMORY: Duration = Duration::from_secs(1);

/// How a sync's creates or deletes went.
#[derive(Default)]
pub struct Writes {
    /// Pods this sync created or deleted.
    pub written: usize,
    /// Pods that now exist as the sync wanted: created here, or by another writer for the
    /// same owner (creates only).
    pub created: usize,
    /// Pods gone as the sync wanted: deleted here or by someone else (deletes only).
    pub deleted: Vec<Arc<CachedPod>>,
    pub errors: Vec<anyhow::Error>,
    /// A write was refused because the owner is gone (or changed, for the writes that
    /// require it unchanged): nothing more is written.
    pub owner_gone: bool,
}

/// How long a sync keeps starting writes: a scale-up or scale-down larger than one sync
/// can write in this time ends the sync (its status written, as after a burst-limited
/// sync in Kubernetes) and continues in the next, which its own status write's event
/// queues. Status follows a large scale at least this often, and a shutdown (which gives
/// syncs 8 s) waits no longer for a sync to stop starting writes.
///
/// Each such end costs the scale a pause: the window drains, the status is written, the
/// next sync reads and starts its window again on an idle etcd, 50 to 100 ms in which etcd
/// waits for kcm. At 1 s that was 3 to 7 % of a scale of thousands (docs/PERFORMANCE.md);
/// at 3 s it is a third of that. A change to the owner ends a sync's writes at once,
/// whatever the budget ([`Writer::superseded`]).
pub const SYNC_WRITE_BUDGET: Duration = Duration::from_secs(3);

/// What the writes of one sync share: whose they are, how many may be in flight, and how
/// to tell that the owner has changed under them.
pub struct Writer<'a, S> {
    /// The controller's memory of its writes, per key.
    pub memory: &'a KeyMemory<Written>,
    /// The owner's key.
    pub key: &'a ObjectKey,
    /// The most writes in flight (`--burst-replicas`).
    pub burst: usize,
    /// Whether the owner changed since the sync read it ([`superseded`]), asked before
    /// each write starts: once it has, no more start, as after the budget. The sync's
    /// decision is stale (a resize, another writer), and the change's own event syncs
    /// the owner again.
    pub superseded: S,
}

/// Whether `cache` holds a newer version of `owner` than the one a sync read. A version
/// the cache has not reached yet, or an owner it does not hold, is not a change: the
/// writes' guards refuse what a deleted owner may no longer write.
pub fn superseded<T: Object + Reflected>(cache: Option<&Informer<T>>, owner: &T) -> bool {
    let meta = owner.metadata();
    cache
        .and_then(|cache| cache.get(&meta.namespace, &meta.name))
        .is_some_and(|cached| cached.metadata().resource_version > meta.resource_version)
}

/// What one completed write means for the writes not yet started.
enum Next {
    /// It succeeded: the slow-start window grows.
    Grow,
    /// Neither success nor failure (a pod already gone, a name taken by another pod).
    Keep,
    /// A failure, or the owner is gone: start no more writes.
    Stop,
}

/// Runs `start` over `items` in order with at most `window.size()` writes in flight,
/// starting the next as each completes, until the items run out, `done` says stop,
/// `superseded` says the owner changed, or [`SYNC_WRITE_BUDGET`] has passed; waits for
/// every write started.
async fn pipeline<I, R, Fut>(
    items: Vec<I>,
    window: &mut SlowStart,
    superseded: impl Fn() -> bool,
    start: impl Fn(I) -> Fut,
    mut done: impl FnMut(R) -> Next,
) where
    Fut: Future<Output = R>,
{
    let began = tokio::time::Instant::now();
    let mut items = items.into_iter();
    let mut in_flight = FuturesUnordered::new();
    let mut stopped = false;
    loop {
        while !stopped && in_flight.len() < window.size() && began.elapsed() < SYNC_WRITE_BUDGET {
            if superseded() {
                tracing::debug!(
                    "owner changed since the sync read it; no more writes from this sync"
                );
                stopped = true;
                break;
            }
            let Some(item) = items.next() else { break };
            in_flight.push(start(item));
        }
        let Some(result) = in_flight.next().await else {
            return;
        };
        match done(result) {
            Next::Grow => window.succeeded(),
            Next::Keep => {}
            Next::Stop => stopped = true,
        }
    }
}

/// Creates the named replicas of the writer's key through a slow-start window (continuing
/// from the window its last successful creates reached, up to the burst limit in flight),
/// starting no more after an error or a refusal because the owner is gone, once the owner
/// has changed, nor after [`SYNC_WRITE_BUDGET`].
/// `create` makes and writes the pod of one name; `ours` says whether a pod found holding
/// a name counts as the owner's replica.
pub async fn create_replicas<S, F, Fut>(
    writer: Writer<'_, S>,
    namespace: &str,
    names: Vec<String>,
    create: F,
    ours: impl Fn(&Pod) -> bool,
) -> Writes
where
    S: Fn() -> bool,
    F: Fn(String) -> Fut,
    Fut: Future<Output = anyhow::Result<CreateOutcome>>,
{
    let Writer {
        memory,
        key,
        burst,
        superseded,
    } = writer;
    let mut writes = Writes::default();
    let first = match memory.written(key).slow_start {
        Some((window, at)) if at.elapsed() < SLOW_START_MEMORY => window,
        _ => 1,
    };
    let mut window = SlowStart::new(first, burst);
    let mut highest = 0;
    let mut failed = false;
    let start = |name: String| {
        let created = create(name.clone());
        async move { (name, created.await) }
    };
    let done = |(name, result): (String, anyhow::Result<CreateOutcome>)| match result {
        Ok(CreateOutcome::Created(revision)) => {
            writes.written += 1;
            writes.created += 1;
            highest = highest.max(revision.0);
            Next::Grow
        }
        // A concurrent sync (or another kcm) created this very replica.
        Ok(CreateOutcome::Exists(Some(pod))) if pod.is_active() && ours(&pod) => {
            writes.created += 1;
            Next::Grow
        }
        Ok(CreateOutcome::Exists(_)) => {
            tracing::debug!(pod = %name, "name taken by another pod; the next sync picks another slot");
            Next::Keep
        }
        Ok(CreateOutcome::ControllerGone) => {
            writes.owner_gone = true;
            Next::Stop
        }
        Err(e) => {
            failed = true;
            writes
                .errors
                .push(e.context(format!("create pod {namespace}/{name}")));
            Next::Stop
        }
    };
    pipeline(names, &mut window, superseded, start, done).await;
    memory.record(key, |w| {
        w.pods = w.pods.max(highest);
        w.slow_start = match (failed, writes.owner_gone) {
            (false, false) => Some((window.size(), tokio::time::Instant::now())),
            _ => None,
        };
    });
    writes
}

/// Deletes `victims` of the writer's key in their order (lowest rank first) through a
/// window of the burst limit in flight, each guarded by the resourceVersion it was ranked
/// at, starting no more after an error or a refusal because the owner is gone, once the
/// owner has changed, nor after [`SYNC_WRITE_BUDGET`].
pub async fn delete_pods<S, F, Fut>(
    writer: Writer<'_, S>,
    victims: Vec<Arc<CachedPod>>,
    delete: F,
) -> Writes
where
    S: Fn() -> bool,
    F: Fn(&CachedPod) -> Fut,
    Fut: Future<Output = anyhow::Result<DeleteOutcome>>,
{
    let Writer {
        memory,
        key,
        burst,
        superseded,
    } = writer;
    let mut writes = Writes::default();
    let mut highest = 0;
    let start = |pod: Arc<CachedPod>| {
        let deleted = delete(&pod);
        async move { (pod, deleted.await) }
    };
    let done = |(pod, result): (Arc<CachedPod>, anyhow::Result<DeleteOutcome>)| match result {
        Ok(DeleteOutcome::Deleted(revision)) => {
            writes.written += 1;
            writes.deleted.push(pod);
            highest = highest.max(revision.0);
            Next::Grow
        }
        Ok(DeleteOutcome::Gone) => {
            writes.deleted.push(pod);
            Next::Keep
        }
        Ok(DeleteOutcome::Changed) => {
            tracing::debug!(pod = %pod.key(), "pod changed since it was ranked; skipped");
            Next::Keep
        }
        Ok(DeleteOutcome::ControllerGone) => {
            writes.owner_gone = true;
            Next::Stop
        }
        Err(e) => {
            writes
                .errors
                .push(e.context(format!("delete pod {}", pod.key())));
            Next::Stop
        }
    };
    let mut window = SlowStart::new(burst, burst);
    pipeline(victims, &mut window, superseded, start, done).await;
    memory.record(key, |w| w.pods = w.pods.max(highest));
    writes
}

/// The revision of a fresh read of a namespace's pods, for [`Written::view`]: its newest
/// pod's resourceVersion, which the pod cache reaches with that pod's event (the read's own
/// revision may be a write to another kind, which the pod cache never sees). A view of the
/// cache is at the cache's revision read after it.
pub fn newest_pod(pods: &Namespace<CachedPod>) -> i64 {
    pods.items()
        .map(|pod| pod.resource_version)
        .max()
        .unwrap_or(0)
}

/// Remembers a status write's revision for `key`, and the revision of the `view` of the
/// pods it was computed from; returns its error, if any. A write that found the owner
/// changed is not an error: the owner's own event syncs it again.
pub fn record_status(
    memory: &KeyMemory<Written>,
    key: &ObjectKey,
    view: i64,
    result: anyhow::Result<StatusOutcome>,
) -> Option<anyhow::Error> {
    match result {
        Ok(StatusOutcome::Written(revision)) => {
            memory.record(key, |w| {
                w.status = w.status.max(revision.0);
                w.view = w.view.max(view);
            });
            None
        }
        Ok(StatusOutcome::Changed) => None,
        Err(e) => Some(e),
    }
}

/// Creates `pod` through `guarded` (a registry guarded by the controller it is made for),
/// reading the pod holding the name through `registry` when it is taken. With `handoff`
/// (the pod informer's), the pod's cached form is offered for its watch event, and
/// withdrawn if it is not created.
///
/// The pod is encoded from its stamp before this returns (the stamp's pieces joined around
/// its name, uid and creation time, not the whole pod made and encoded): the future holds
/// its bytes, not the pod, so the hundreds a scale-up keeps in flight stay small to hold
/// and to move.
///
/// # Errors
/// When etcd fails.
pub fn create_guarded<'a>(
    registry: &'a Registry,
    guarded: Registry,
    pod: NewPod,
    handoff: Option<&Handoff<CachedPod>>,
) -> impl Future<Output = anyhow::Result<CreateOutcome>> + Send + 'a {
    let encoded = guarded.encode_create_stamped(pod.stamp(), pod.name());
    let offered = match (&encoded, handoff) {
        (Ok((encoded, filled)), Some(handoff)) => {
            handoff.offer(encoded.key(), encoded.value(), pod.cached(filled));
            Some(handoff.clone())
        }
        _ => None,
    };
    let encoded = encoded.map(|(encoded, _)| encoded);
    async move {
        let (namespace, name) = (pod.stamp().namespace(), pod.name());
        // Both calls boxed: inline, they were most of this future's 1.7 KB (and of the
        // 4.7 KB a sync's create moved into the replica writer's window, a copy and a
        // 5 KB allocation for each of its hundreds in flight).
        let created = match encoded {
            Ok(encoded) => Box::pin(guarded.create_encoded(encoded)).await,
            Err(e) => Err(e),
        };
        let outcome = match created {
            Ok(revision) => Ok(CreateOutcome::Created(revision)),
            Err(StorageError::OwnerGone { .. }) => Ok(CreateOutcome::ControllerGone),
            Err(StorageError::AlreadyExists { .. }) => {
                let existing = Box::pin(registry.get::<Pod>(namespace, name)).await.ok();
                Ok(CreateOutcome::Exists(existing.map(Box::new)))
            }
            Err(e) => Err(e.into()),
        };
        if let Some(handoff) = offered {
            if !matches!(outcome, Ok(CreateOutcome::Created(_))) {
                handoff.withdraw(&api::object_key::<Pod>(registry.prefix(), namespace, name));
            }
        }
        outcome
    }
}

/// [`create_guarded`] on behalf of `owner` (through `guarded`, or the error that kept it
/// from being made, offering the pod to `handoff`), then [`record_create`]: a control's
/// `create_pod`. Not an `async fn`, so that the pod is encoded before the future.
pub fn create_recorded<'r, 'o, T: Object + Sync>(
    registry: &'r Registry,
    guarded: anyhow::Result<Registry>,
    handoff: Option<&Handoff<CachedPod>>,
    events: &'r Recorder,
    owner: &'o T,
    pod: NewPod,
) -> impl Future<Output = anyhow::Result<CreateOutcome>> + Send + use<'r, 'o, T> {
    let name = pod.name().to_string();
    let create = guarded.map(|guarded| create_guarded(registry, guarded, pod, handoff));
    async move {
        let created = match create {
            Ok(create) => create.await,
            Err(e) => Err(e),
        };
        record_create(events, Reference::of(owner), &name, &created);
        created
    }
}

/// Records the event of a pod create for its controller `owner`, as Kubernetes'
/// `RealPodControl.CreatePods`: `SuccessfulCreate` when it was created, `FailedCreate`
/// when etcd failed; nothing when the name was taken or the owner is gone.
pub fn record_create(
    events: &Recorder,
    owner: Reference,
    pod: &str,
    created: &anyhow::Result<CreateOutcome>,
) {
    match created {
        Ok(CreateOutcome::Created(_)) => {
            events.normal(owner, "SuccessfulCreate", format!("Created pod: {pod}"))
        }
        Err(e) => events.warning(owner, "FailedCreate", format!("Error creating: {e:#}")),
        Ok(CreateOutcome::Exists(_) | CreateOutcome::ControllerGone) => {}
    }
}

/// Records the event of a pod delete for its controller `owner`, as Kubernetes'
/// `RealPodControl.DeletePod`: `SuccessfulDelete` or `FailedDelete`.
pub fn record_delete(
    events: &Recorder,
    owner: Reference,
    pod: &str,
    deleted: &anyhow::Result<DeleteOutcome>,
) {
    match deleted {
        Ok(DeleteOutcome::Deleted(_)) => {
            events.normal(owner, "SuccessfulDelete", format!("Deleted pod: {pod}"))
        }
        Err(e) => events.warning(owner, "FailedDelete", format!("Error deleting: {e:#}")),
        Ok(_) => {}
    }
}

/// Deletes `namespace/name` through `guarded` if it is still at `resource_version`.
///
/// # Errors
/// When etcd fails.
pub async fn delete_guarded(
    guarded: &Registry,
    namespace: &str,
    name: &str,
    resource_version: ResourceVersion,
) -> anyhow::Result<DeleteOutcome> {
    match guarded
        .delete::<Pod>(namespace, name, Some(resource_version))
        .await
    {
        Ok(revision) => Ok(DeleteOutcome::Deleted(revision)),
        Err(StorageError::OwnerGone { .. }) => Ok(DeleteOutcome::ControllerGone),
        Err(StorageError::Conflict { .. }) => Ok(DeleteOutcome::Changed),
        Err(StorageError::NotFound { .. }) => Ok(DeleteOutcome::Gone),
        Err(e) => Err(e.into()),
    }
}

/// Writes `updated`, a controller with its new status, by compare-and-swap on the
/// resourceVersion it was read at.
///
/// # Errors
/// When etcd fails.
pub async fn write_status<T: Object>(
    registry: &Registry,
    updated: &T,
) -> anyhow::Result<StatusOutcome> {
    match registry.update(updated).await {
        Ok(stored) => Ok(StatusOutcome::Written(
            stored.metadata().resource_version.unwrap_or_default(),
        )),
        Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => {
            Ok(StatusOutcome::Changed)
        }
        Err(e) => Err(anyhow::Error::from(e).context("update status")),
    }
}

/// Every pod of `namespace` as stored now, in one consistent read. A pod that does not
/// decode is not an item, but its name is taken all the same: left out, its slot would be
/// chosen (and found taken) by every sync.
///
/// # Errors
/// `Etcd` when the read fails.
pub async fn list_pods(
    registry: &Registry,
    namespace: &str,
) -> Result<Namespace<CachedPod>, StorageError> {
    let listed = registry
        .list::<Pod>(Some(namespace), &Selector::everything())
        .await?;
    let mut pods = Namespace::from_items(listed.items.iter().map(CachedPod::from));
    for error in &listed.errors {
        if let Some((_, name)) = api::parse_key::<Pod>(registry.prefix(), &error.key) {
            pods.mark_undecodable(name.into());
        }
    }
    Ok(pods)
}

#[cfg(test)]
mod tests;
