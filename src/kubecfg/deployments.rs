//! What the Deployment verbs (`rollout`, `describe deploy`, `create deployment`) share: a
//! deployment read with the ReplicaSets it controls, split into the old ones and the new
//! one as kubectl's `deploymentutil.GetAllReplicaSets` does, and kubectl's
//! `deployments.apps "web"` wording. Imports no verb.

use anyhow::Context as _;
use serde_json::Value;

use crate::api::{
    self, Deployment, Object, ObjectMeta, PodTemplateSpec, ReplicaSet, POD_TEMPLATE_HASH_LABEL,
    REVISION_ANNOTATION,
};
use crate::labels::Selector;
use crate::registry::{ObjectList, Registry, StorageError};

/// kubectl's resource name of deployments, as its errors spell it (`deployments.apps "web"`).
pub(super) const DEPLOYMENTS_APPS: &str = "deployments.apps";

/// The `deployment.kubernetes.io/revision` annotation of an object, when it is a number.
pub fn revision_of(meta: &ObjectMeta) -> Option<i64> {
    meta.annotations.get(REVISION_ANNOTATION)?.parse().ok()
}

/// A pod template without the `pod-template-hash` label, as JSON (every field, unknown
/// ones included).
fn without_hash(template: Option<&PodTemplateSpec>) -> Value {
    let mut value = serde_json::to_value(template).unwrap_or_default();
    if let Some(labels) = value
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(POD_TEMPLATE_HASH_LABEL);
        if labels.is_empty() {
            value["metadata"]
                .as_object_mut()
                .map(|m| m.remove("labels"));
        }
    }
    value
}

/// kubectl's `EqualIgnoreHash`: the templates are equal but for the `pod-template-hash`
/// label.
pub fn equal_ignore_hash(a: Option<&PodTemplateSpec>, b: Option<&PodTemplateSpec>) -> bool {
    without_hash(a) == without_hash(b)
}

/// Whether `rs` is controlled by deployment `d` (a controller reference to its uid).
pub fn owned_by(rs: &ReplicaSet, d: &Deployment) -> bool {
    api::controller_of(&rs.metadata)
        .is_some_and(|r| r.kind == Deployment::KIND && r.uid == d.metadata.uid)
}

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
    let new = sorted
        .iter()
        .copied()
        .find(|rs| equal_ignore_hash(rs.spec.template.as_ref(), d.spec.template.as_ref()));
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
        .filter(|rs| owned_by(rs, &d))
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
