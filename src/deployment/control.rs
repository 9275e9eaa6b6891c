//! The Deployment sync's IO seam: [`DeploymentControl`], every read the caches cannot
//! serve and every write a sync makes. [`Registry`] is the etcd one;
//! `apiclient::deployment::ApiDeploymentControl` the one through the Kubernetes API.
//!
//! Invariants: a write given a `guard` commits only while that deployment is unchanged
//! since the sync read it (on etcd, compared in the write's own transaction:
//! [`Registry::guarded_unchanged`]); a refused guard is [`StorageError::OwnerGone`];
//! every ReplicaSet and deployment write is a compare-and-swap on the resourceVersion
//! read.

use std::future::Future;
use std::time::Duration;

use anyhow::Context as _;

use crate::api::{self, Deployment, ReplicaSet, ResourceVersion};
use crate::controller::replicas::list_pods;
use crate::informer::{CachedPod, Namespace};
use crate::labels::Selector;
use crate::registry::{Registry, StorageError};

/// The reads and writes of a Deployment sync.
pub trait DeploymentControl: Send + Sync + 'static {
    /// The deployment as stored now.
    ///
    /// # Errors
    /// `NotFound`, `Decode`, and the backend's failures.
    fn deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Deployment, StorageError>> + Send;

    /// Every ReplicaSet of `namespace` as stored now, in one consistent read, with their
    /// specs remembered ([`api::remember_spec`]).
    fn replica_sets(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<ReplicaSet>, StorageError>> + Send;

    /// One ReplicaSet as stored now.
    fn replica_set(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<ReplicaSet, StorageError>> + Send;

    /// Every pod of `namespace` as stored now, in one consistent read.
    fn pods(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Namespace<CachedPod>, StorageError>> + Send;

    /// The [`api::pod_template_hash`] of `d`'s `spec.template` as the backend holds it
    /// (raw JSON, so unknown fields count), with `d`'s collision count; `None` when the
    /// deployment is no longer at `d`'s resourceVersion.
    fn template_hash(
        &self,
        d: &Deployment,
    ) -> impl Future<Output = anyhow::Result<Option<String>>> + Send;

    /// Creates `rs` if its name is free, while `guard` is unchanged.
    fn create_rs(
        &self,
        guard: &Deployment,
        rs: &ReplicaSet,
    ) -> impl Future<Output = Result<ReplicaSet, StorageError>> + Send;

    /// Writes `rs` over the resourceVersion it was read at, while `guard` (if any) is
    /// unchanged.
    fn update_rs(
        &self,
        guard: Option<&Deployment>,
        rs: &ReplicaSet,
    ) -> impl Future<Output = Result<ReplicaSet, StorageError>> + Send;

    /// Deletes `rs` at the resourceVersion it was read at, while `guard` is unchanged;
    /// the revision of the delete.
    fn delete_rs(
        &self,
        guard: &Deployment,
        rs: &ReplicaSet,
    ) -> impl Future<Output = Result<ResourceVersion, StorageError>> + Send;

    /// Writes the deployment (annotations and status) over the resourceVersion read.
    fn update_deployment(
        &self,
        d: &Deployment,
    ) -> impl Future<Output = Result<Deployment, StorageError>> + Send;
}

impl DeploymentControl for Registry {
    async fn deployment(&self, namespace: &str, name: &str) -> Result<Deployment, StorageError> {
        self.get(namespace, name).await
    }

    async fn replica_sets(&self, namespace: &str) -> Result<Vec<ReplicaSet>, StorageError> {
        let list = self
            .list::<ReplicaSet>(Some(namespace), &Selector::everything())
            .await?;
        Ok(list
            .items
            .into_iter()
            .map(|mut rs| {
                api::remember_spec(&mut rs);
                rs
            })
            .collect())
    }

    async fn replica_set(&self, namespace: &str, name: &str) -> Result<ReplicaSet, StorageError> {
        self.get(namespace, name).await
    }

    async fn pods(&self, namespace: &str) -> Result<Namespace<CachedPod>, StorageError> {
        list_pods(self, namespace).await
    }

    async fn template_hash(&self, d: &Deployment) -> anyhow::Result<Option<String>> {
        let key = self.key::<Deployment>(&d.metadata.namespace, &d.metadata.name);
        let mut kv = self.kv();
        let response = tokio::time::timeout(Duration::from_secs(10), kv.get(key.as_str(), None))
            .await
            .map_err(|_| anyhow::anyhow!("read {key}: timed out after 10s"))?
            .with_context(|| format!("read {key}"))?;
        let Some(kv) = response.kvs().first() else {
            return Ok(None);
        };
        if Some(ResourceVersion(kv.mod_revision())) != d.metadata.resource_version {
            return Ok(None);
        }
        let stored: serde_json::Value =
            serde_json::from_slice(kv.value()).with_context(|| format!("decode {key}"))?;
        Ok(Some(hash_of(&stored, d)))
    }

    async fn create_rs(
        &self,
        guard: &Deployment,
        rs: &ReplicaSet,
    ) -> Result<ReplicaSet, StorageError> {
        while_unchanged(self, guard)?.create(rs).await
    }

    async fn update_rs(
        &self,
        guard: Option<&Deployment>,
        rs: &ReplicaSet,
    ) -> Result<ReplicaSet, StorageError> {
        match guard {
            Some(d) => while_unchanged(self, d)?.update(rs).await,
            None => self.update(rs).await,
        }
    }

    async fn delete_rs(
        &self,
        guard: &Deployment,
        rs: &ReplicaSet,
    ) -> Result<ResourceVersion, StorageError> {
        let meta = &rs.metadata;
        while_unchanged(self, guard)?
            .delete::<ReplicaSet>(&meta.namespace, &meta.name, meta.resource_version)
            .await
    }

    async fn update_deployment(&self, d: &Deployment) -> Result<Deployment, StorageError> {
        self.update(d).await
    }
}

/// The hash a new ReplicaSet's name takes: of `stored`'s `spec.template` (a deployment's
/// whole document as the backend holds it) with `d`'s collision count.
pub fn hash_of(stored: &serde_json::Value, d: &Deployment) -> String {
    let template = stored
        .pointer("/spec/template")
        .unwrap_or(&serde_json::Value::Null);
    api::pod_template_hash(template, d.status.collision_count)
}

/// The registry whose writes require `d` unchanged since it was read.
fn while_unchanged(registry: &Registry, d: &Deployment) -> Result<Registry, StorageError> {
    let incarnation = registry
        .incarnation(d)
        .ok_or_else(|| StorageError::BadRequest {
            op: "guard",
            key: d.metadata.key(),
            message: "the deployment was never read from etcd (no resourceVersion)".into(),
        })?;
    Ok(registry.guarded_unchanged(incarnation))
}
