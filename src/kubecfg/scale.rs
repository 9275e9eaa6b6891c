//! `kcm resize` (`scale`), `delete` and `stop`: 2014's `ResizeController` and
//! `StopController`.

use super::*;

/// `kcm resize rc NAME --replicas N` (2014's `ResizeController`): sets `spec.replicas`
/// with a compare-and-swap retried on conflict.
///
/// # Errors
/// `replicationcontrollers "x" not found`, a count out of range, or etcd failing.
pub async fn resize(target: &Target, options: ResizeOptions) -> anyhow::Result<()> {
    let ResizeOptions {
        name,
        replicas,
        namespace,
    } = options;
    anyhow::ensure!(
        (0..=api::MAX_REPLICAS).contains(&replicas),
        "--replicas must be between 0 and {} (Kubernetes' int32), got {replicas}",
        api::MAX_REPLICAS
    );
    let (_client, registry) = target.connect().await?;
    set_replicas(&registry, &namespace, &name, replicas).await?;
    emit(&format!(
        "{}/{name} resized to {replicas}\n",
        ReplicationController::RESOURCE
    ))
}

pub(super) async fn set_replicas(
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

/// `kcm delete KIND NAME`. Deleting a controller leaves its pods; a note on stderr says
/// so when it had replicas.
///
/// # Errors
/// `pods "x" not found`, or etcd failing.
pub async fn delete(target: &Target, options: DeleteOptions) -> anyhow::Result<()> {
    let (_client, registry) = target.connect().await?;
    let (namespace, name) = (options.namespace.as_str(), options.name.as_str());
    match options.kind {
        Kind::Pods => delete_kind::<Pod>(&registry, namespace, name).await,
        Kind::Services => delete_kind::<Service>(&registry, namespace, name).await,
        Kind::Endpoints => delete_kind::<Endpoints>(&registry, namespace, name).await,
        Kind::Replicationcontrollers => {
            // Read first only for the note; the delete itself is unconditional.
            let before = registry
                .get::<ReplicationController>(namespace, name)
                .await
                .ok();
            delete_kind::<ReplicationController>(&registry, namespace, name).await?;
            if let Some(rc) = before.filter(|rc| rc.spec.replicas > 0 || rc.status.replicas > 0) {
                eprintln!(
                    "kcm: note: pods matching its selector {} are left running; \
                     `kcm stop rc` deletes a controller together with its pods",
                    rc.spec.selector
                );
            }
            Ok(())
        }
    }
}

pub(super) async fn delete_kind<T: Object>(
    registry: &Registry,
    namespace: &str,
    name: &str,
) -> anyhow::Result<()> {
    registry
        .delete::<T>(namespace, name, None)
        .await
        .map_err(|e| storage_error::<T>(e, name))?;
    emit(&format!("{}/{name} deleted\n", T::RESOURCE))
}

/// `kcm stop rc NAME` (2014's `StopController`): resizes the controller to 0, waits until
/// no active pod matches its selector (the replication manager deletes them; Failed and
/// Succeeded pods are never deleted by it, so they are not waited for), then deletes the
/// controller.
///
/// Refuses a controller whose selector overlaps another's (kubectl's `stop` did from 2015,
/// kubernetes #10524): at 0 replicas it would delete the other's pods too, and wait for
/// ever as the other recreates them. `kcm delete rc` deletes just the controller.
///
/// # Errors
/// Not found; an invalid controller (the manager ignores it, so its pods would never
/// go); an overlapping controller; pods still active after `--timeout` (the controller is
/// left at 0 replicas); etcd failing.
pub async fn stop(target: &Target, options: StopOptions) -> anyhow::Result<()> {
    let StopOptions {
        name,
        namespace,
        timeout,
    } = options;
    let reference = format!("{}/{name}", ReplicationController::RESOURCE);
    let (_client, registry) = target.connect().await?;
    let rc: ReplicationController = registry
        .get(&namespace, &name)
        .await
        .map_err(|e| storage_error::<ReplicationController>(e, &name))?;
    if let Err(e) = api::validate(&rc) {
        anyhow::bail!(
            "cannot stop {reference}: {e}; the controller-manager ignores it, so its pods \
             would not be deleted (`kcm delete rc {name}` deletes just the controller)"
        );
    }
    super::overlap::refuse_to_stop_overlapping(&registry, &rc).await?;
    let rc = set_replicas(&registry, &namespace, &name, 0).await?;
    let selector = rc.spec.selector.as_selector();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let pods: ObjectList<Pod> = registry
            .list(Some(&namespace), &selector)
            .await
            .with_context(|| format!("list the pods of {reference}"))?;
        let active: Vec<&str> = pods
            .items
            .iter()
            .filter(|pod| pod.is_active())
            .map(|pod| pod.metadata.name.as_str())
            .collect();
        if active.is_empty() {
            break;
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

/// `a, b, c and 4 more`.
pub(super) fn summarize_names(names: &[&str]) -> String {
    const SHOWN: usize = 3;
    let shown = names[..names.len().min(SHOWN)].join(", ");
    if names.len() > SHOWN {
        format!("{shown} and {} more", names.len() - SHOWN)
    } else {
        shown
    }
}
