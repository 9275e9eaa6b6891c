//! `kcm stop rc NAME`: 2014's `StopController` (`pkg/kubecfg/kubecfg.go`): resize the
//! controller to 0, wait for its pods to go, delete it; put it back when interrupted.

use std::time::Duration;

use anyhow::Context as _;
use futures::future::{FusedFuture, FutureExt as _};

use super::overlap::refuse_to_stop_overlapping;
use super::print::emit;
use super::storage::storage_error;
use crate::api::{self, Object, Pod, ReplicationController};
use crate::client::Target;
use crate::registry::{ObjectList, Registry, StorageError};

/// How often `kcm stop` re-lists the controller's pods while it waits for them to go.
const STOP_POLL_INTERVAL: Duration = Duration::from_millis(200);

/// `kcm stop rc NAME`.
#[derive(Clone, Debug)]
pub struct StopOptions {
    /// The replication controller's name.
    pub name: String,
    pub namespace: String,
    /// How long to wait for the controller's pods to be deleted.
    pub timeout: Duration,
}

/// `kcm stop` ended by a signal (Ctrl-C or SIGTERM): what became of the controller. `main`
/// exits 130 (128 + SIGINT) on it, as a shell does for a command ended by Ctrl-C.
#[derive(Debug, thiserror::Error)]
#[error("interrupted: {0}")]
pub struct Interrupted(String);

/// `kcm stop rc NAME` (2014's `StopController`): resizes the controller to 0, waits until
/// no active pod matches its selector (the replication manager deletes them; Failed and
/// Succeeded pods are never deleted by it, so they are not waited for), then deletes the
/// controller.
///
/// Refuses a controller whose selector overlaps another's (kubectl's `stop` did from 2015,
/// kubernetes #10524): at 0 replicas it would delete the other's pods too, and wait for
/// ever as the other recreates them. `kcm delete rc` deletes just the controller.
///
/// When `shutdown` resolves (Ctrl-C) while it waits, it puts the controller back to the
/// replicas it had, unless someone changed its spec since the resize (then it leaves it
/// alone), and returns [`Interrupted`] saying which. `shutdown` is polled before anything is
/// written, so the signal handlers it installs are in place from the start.
///
/// # Errors
/// Not found; an invalid controller (the manager ignores it, so its pods would never
/// go); an overlapping controller; pods still active after `--timeout` (the controller is
/// left at 0 replicas); etcd failing; [`Interrupted`].
pub async fn stop(
    target: &Target,
    options: StopOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let mut shutdown = std::pin::pin!(shutdown.fuse());
    // Polled once now, so that its signal handlers replace the default (which would end
    // the process at once) before anything is written.
    fired(&mut shutdown).await;
    let StopOptions {
        name,
        namespace,
        timeout,
    } = options;
    let reference = format!("{}/{name}", ReplicationController::RESOURCE);
    // Until the resize, Ctrl-C ends it at once, nothing written.
    let checked = tokio::select! {
        biased;
        () = &mut shutdown => None,
        checked = async {
            let (client, registry) = super::connect(target).await?;
            let before: ReplicationController = registry
                .get(&namespace, &name)
                .await
                .map_err(|e| storage_error::<ReplicationController>(e, &name))?;
            if let Err(e) = api::validate(&before) {
                anyhow::bail!(
                    "cannot stop {reference}: {e}; the controller-manager ignores it, so its \
                     pods would not be deleted (`kcm delete rc {name}` deletes just the \
                     controller)"
                );
            }
            refuse_to_stop_overlapping(&registry, &before).await?;
            anyhow::Ok((client, registry, before))
        } => Some(checked?),
    };
    let Some((_client, registry, before)) = checked.filter(|_| !shutdown.is_terminated()) else {
        return Err(Interrupted(format!("{reference} was left as it was")).into());
    };
    let resized = set_replicas(&registry, &namespace, &name, 0).await?;
    // From here until the delete, an interruption owes the controller its replicas back.
    let waited = if fired(&mut shutdown).await {
        None
    } else {
        tokio::select! {
            biased;
            () = &mut shutdown => None,
            result = wait_for_pods_to_go(&registry, &resized, timeout) => Some(result),
        }
    };
    match waited {
        None => return Err(put_back(&registry, &before, &resized).await.into()),
        Some(result) => result?,
    }
    match registry
        .delete::<ReplicationController>(&namespace, &name, None)
        .await
    {
        // Someone else deleted it meanwhile: it is stopped all the same.
        Ok(_) | Err(StorageError::NotFound { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    emit(&format!("{reference} stopped\n"))
}

/// Whether `shutdown` has resolved, now or before.
async fn fired<F: FusedFuture + Unpin>(shutdown: &mut F) -> bool {
    shutdown.is_terminated() || futures::poll!(shutdown).is_ready()
}

/// Waits until no active pod matches `rc`'s selector, listing them every
/// [`STOP_POLL_INTERVAL`].
///
/// # Errors
/// Pods still active after `timeout`, naming them; etcd failing.
async fn wait_for_pods_to_go(
    registry: &Registry,
    rc: &ReplicationController,
    timeout: Duration,
) -> anyhow::Result<()> {
    let reference = format!("{}/{}", ReplicationController::RESOURCE, rc.metadata.name);
    let selector = rc.spec.selector.as_selector();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let pods: ObjectList<Pod> = registry
            .list(Some(&rc.metadata.namespace), &selector)
            .await
            .with_context(|| format!("list the pods of {reference}"))?;
        let active: Vec<&str> = pods
            .items
            .iter()
            .filter(|pod| pod.is_active())
            .map(|pod| pod.metadata.name.as_str())
            .collect();
        if active.is_empty() {
            return Ok(());
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            anyhow::bail!(
                "timed out after {} waiting for the pods of {reference} to be deleted: \
                 {} active {} remain ({}); is a controller-manager running? \
                 The controller is left with 0 replicas",
                humantime::format_duration(timeout),
                active.len(),
                if active.len() == 1 { "pod" } else { "pods" },
                summarize_names(&active)
            );
        }
        tokio::time::sleep(STOP_POLL_INTERVAL.min(deadline - now)).await;
    }
}

/// After an interrupted stop: sets the controller back to the replicas it had `before`,
/// guarded by a compare-and-swap on its resourceVersion and only while it is still the
/// controller stop `resized` (same uid, same spec: the manager's status writes may come
/// and go, a resize or another change by anyone else, etcdctl included, may not). Says
/// what happened.
async fn put_back(
    registry: &Registry,
    before: &ReplicationController,
    resized: &ReplicationController,
) -> Interrupted {
    let (namespace, name) = (&before.metadata.namespace, &before.metadata.name);
    let reference = format!("{}/{name}", ReplicationController::RESOURCE);
    let replicas = before.spec.replicas;
    if replicas == 0 {
        return Interrupted(format!(
            "{reference} had 0 replicas already; left as it is, not deleted"
        ));
    }
    let result = registry
        .guaranteed_update::<ReplicationController, _>(namespace, name, |mut rc| {
            anyhow::ensure!(
                rc.metadata.uid == resized.metadata.uid && rc.spec == resized.spec,
                "it was changed since stop resized it to 0 (spec.replicas is now {})",
                rc.spec.replicas
            );
            rc.spec.replicas = replicas;
            Ok(rc)
        })
        .await;
    let restore =
        format!("`kcm resize rc {name} -n {namespace} --replicas {replicas}` restores it");
    match result {
        Ok(_) => Interrupted(format!(
            "put {reference} back to {replicas} replicas; it was not stopped"
        )),
        Err(StorageError::Update { source, .. }) => Interrupted(format!(
            "did not put {reference} back to {replicas} replicas: {source}; left as it is"
        )),
        Err(StorageError::NotFound { .. }) => Interrupted(format!(
            "did not put {reference} back to {replicas} replicas: it was deleted meanwhile"
        )),
        Err(e) => Interrupted(format!(
            "could not put {reference} back to {replicas} replicas ({e}); it is left at 0 \
             replicas and its pods are being deleted; {restore}"
        )),
    }
}

/// Sets the replicas of controller `name` (a compare-and-swap retried on conflict).
async fn set_replicas(
    registry: &Registry,
    namespace: &str,
    name: &str,
    replicas: i64,
) -> anyhow::Result<ReplicationController> {
    registry
        .guaranteed_update::<ReplicationController, _>(namespace, name, |mut rc| {
            rc.spec.replicas = replicas;
            Ok(rc)
        })
        .await
        .map_err(|e| storage_error::<ReplicationController>(e, name))
}

/// `a, b, c and 4 more`.
fn summarize_names(names: &[&str]) -> String {
    const SHOWN: usize = 3;
    let shown = names[..names.len().min(SHOWN)].join(", ");
    if names.len() > SHOWN {
        format!("{shown} and {} more", names.len() - SHOWN)
    } else {
        shown
    }
}
