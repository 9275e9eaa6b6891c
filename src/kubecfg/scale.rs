//! `kcm resize rc|rs|deploy NAME --replicas N` (2014's `ResizeController`,
//! `pkg/kubecfg/kubecfg.go`) and `kcm scale` (kubectl's `pkg/cmd/scale`): `spec.replicas`
//! set by a compare-and-swap.

use super::print::emit;
use super::resource::{kind_reference, WorkloadKind};
use super::storage::update_error;
use crate::api::{self, Deployment, Object, ReplicaSet, ReplicationController};
use crate::client::Target;
use crate::registry::Registry;

/// `kcm resize rc NAME --replicas N` (and `kcm scale`).
#[derive(Clone, Debug)]
pub struct ResizeOptions {
    pub kind: WorkloadKind,
    /// The controller's name.
    pub name: String,
    /// The new `spec.replicas`, 0 to [`api::MAX_REPLICAS`].
    pub replicas: i64,
    /// kubectl's precondition: refuse unless `spec.replicas` is this now.
    pub current_replicas: Option<i64>,
    pub namespace: String,
    /// Print kubectl's `replicaset.apps/web scaled` (`kcm scale`) instead of 2014's
    /// `replicasets/web resized to 3` (`kcm resize`).
    pub kubectl_output: bool,
}

/// `kcm resize rc|rs NAME --replicas N` (2014's `ResizeController`) and `kcm scale`
/// (kubectl's): sets `spec.replicas` with a compare-and-swap retried on conflict, after
/// checking `--current-replicas` against the value it replaces.
///
/// # Errors
/// `replicationcontrollers "x" not found`, a count out of range, `Expected replicas to be
/// M, was K` (nothing written), or etcd failing.
pub async fn resize(target: &Target, options: ResizeOptions) -> anyhow::Result<()> {
    anyhow::ensure!(
        (0..=api::MAX_REPLICAS).contains(&options.replicas),
        "--replicas must be between 0 and {} (Kubernetes' int32), got {}",
        api::MAX_REPLICAS,
        options.replicas
    );
    let (_client, registry) = super::connect(target).await?;
    match options.kind {
        WorkloadKind::ReplicaSet => {
            scale_kind::<ReplicaSet>(&registry, &options, ReplicaSet::replicas, |rs, n| {
                rs.spec.replicas = Some(n);
            })
            .await
        }
        WorkloadKind::Deployment => {
            scale_kind::<Deployment>(&registry, &options, Deployment::replicas, |d, n| {
                d.spec.replicas = Some(n);
            })
            .await
        }
        WorkloadKind::ReplicationController => {
            scale_kind::<ReplicationController>(
                &registry,
                &options,
                |rc| rc.spec.replicas,
                |rc, n| rc.spec.replicas = n,
            )
            .await
        }
    }
}

/// Sets the replicas of a `T` (read with `replicas`, written with `set`) and prints the
/// verb's line.
pub(super) async fn scale_kind<T: Object>(
    registry: &Registry,
    options: &ResizeOptions,
    replicas: impl Fn(&T) -> i64,
    set: impl Fn(&mut T, i64),
) -> anyhow::Result<()> {
    let (name, wanted) = (&options.name, options.replicas);
    registry
        .guaranteed_update::<T, _>(&options.namespace, name, |mut object| {
            check_current_replicas(options.current_replicas, replicas(&object))?;
            set(&mut object, wanted);
            Ok(object)
        })
        .await
        .map_err(|e| update_error::<T>(e, name))?;
    emit(&if options.kubectl_output {
        format!("{} scaled\n", kind_reference::<T>(name))
    } else {
        format!("{}/{name} resized to {wanted}\n", T::RESOURCE)
    })
}

/// kubectl's `--current-replicas` precondition (`ScalePrecondition.validate`).
///
/// # Errors
/// `Expected replicas to be M, was K`.
pub(super) fn check_current_replicas(expected: Option<i64>, actual: i64) -> anyhow::Result<()> {
    match expected {
        Some(expected) if expected != actual => {
            anyhow::bail!("Expected replicas to be {expected}, was {actual}")
        }
        _ => Ok(()),
    }
}
