//! What the Deployment verbs (`rollout`, `describe deploy`, `create deployment`) share: a
//! deployment read with the ReplicaSets it controls, split into the old ones and the new
//! one as kubectl's `deploymentutil.GetAllReplicaSets` does, and kubectl's
//! `deployments.apps "web"` wording. Which ReplicaSet is the deployment's, and which is
//! new, is decided by the same functions as the controller's ([`api::is_controlled_by`],
//! [`api::equal_ignore_hash`]). Imports no verb.

use anyhow::Context as _;

use crate::api::{self, Deployment, ReplicaSet};
use crate::labels::Selector;
use crate::registry::{ObjectList, Registry, StorageError};

/// kubectl's resource name of deployments, as its errors spell it (`deployments.apps "web"`).
pub(super) const DEPLOYMENTS_APPS: &str = "deployments.apps";

/// `GetAllReplicaSets`: `owned` (the deployment's ReplicaSets) split into the old ones
/// and the new one, the oldest whose template equals the deployment's ignoring the hash.
pub fn split_replica_sets<'a>(
    d: &Deployment,
    owned: &'a [ReplicaSet],
) -> (Vec<&'a ReplicaSet>, Option<&'a ReplicaSet>) {
    let mut sorted: Vec<&ReplicaSet> = owned.iter().collect();
    sorted.sort_by(|a, b| {
        (&a.metadata.creation_timestamp, &a.metadata.name)
            .cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
    });
    // As the controller's `FindNewReplicaSet`: a deployment without a template has the
    // empty one; a ReplicaSet without a template is never the new one.
    let template = d.spec.template.clone().unwrap_or_default();
    let new = sorted.iter().copied().find(|rs| {
        rs.spec
            .template
            .as_ref()
            .is_some_and(|t| api::equal_ignore_hash(t, &template))
    });
    let old = sorted
        .into_iter()
        .filter(|rs| new.is_none_or(|n| !std::ptr::eq(*rs, n)))
        .collect();
    (old, new)
}

/// The deployment `name` and the ReplicaSets it controls.
pub(super) async fn read_deployment(
    registry: &Registry,
    namespace: &str,
    name: &str,
) -> anyhow::Result<(Deployment, Vec<ReplicaSet>)> {
    let d: Deployment = registry
        .get(namespace, name)
        .await
        .map_err(|e| not_found(e, name))?;
    let list: ObjectList<ReplicaSet> = registry
        .list(Some(namespace), &Selector::everything())
        .await
        .context("list its ReplicaSets")?;
    let owned = list
        .items
        .into_iter()
        .filter(|rs| api::is_controlled_by(rs, &d))
        .collect();
    Ok((d, owned))
}

/// kubectl's `deployments.apps "web" not found`.
pub(super) fn not_found(error: StorageError, name: &str) -> anyhow::Error {
    match error {
        StorageError::NotFound { .. } => anyhow::anyhow!("{DEPLOYMENTS_APPS} {name:?} not found"),
        StorageError::Update { source, .. } => source,
        other => other.into(),
    }
}
