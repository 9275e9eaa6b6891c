//! The Deployment controller's reads and writes through the API ([`DeploymentControl`]).
//!
//! - A new ReplicaSet is a `POST` under `{name}-{pod-template-hash}`: a 409 is the name
//!   taken, which the sync tells apart (ours, or a squatter) as against etcd.
//! - A ReplicaSet resize, adoption, release or annotation write is a `PUT` at the
//!   resourceVersion read; an old ReplicaSet's delete is a `DELETE` with that
//!   resourceVersion as precondition.
//! - The deployment's annotations and status are a `PUT` of the object, then of its
//!   `/status`, both at the resourceVersion read (kube-apiserver ignores the status in a
//!   `PUT` of the object and the rest in a `PUT` of `/status`).
//! - The template's hash is over the document as the server answers it, converted to the
//!   stored shape, so against kcm's apiserver a ReplicaSet gets the name it gets from
//!   etcd.
//!
//! What the API cannot carry is the guard kcm's etcd transactions add: a ReplicaSet
//! write cannot also require the deployment unchanged. In its place each guarded write
//! first checks the deployment informer: once it holds a later version of the deployment
//! (a new template or size) or another incarnation, no write starts for the decision made
//! on the older one ([`StorageError::OwnerGone`], as the etcd guard answers). What the
//! informer has not seen yet can still be overtaken: docs/invariants.md says what that
//! weakens.

use super::control::list_pods;
use super::ApiClient;
use crate::api::{Deployment, ReplicaSet, ResourceVersion};
use crate::deployment::{hash_of, DeploymentControl};
use crate::informer::{CachedPod, DeploymentInformer, Namespace};
use crate::registry::StorageError;

/// [`DeploymentControl`] through the API, its guards checked against `deployments`.
#[derive(Clone)]
pub struct ApiDeploymentControl {
    api: ApiClient,
    deployments: DeploymentInformer,
}

impl ApiDeploymentControl {
    pub fn new(api: ApiClient, deployments: DeploymentInformer) -> ApiDeploymentControl {
        ApiDeploymentControl { api, deployments }
    }

    /// `Ok` while the informer holds `d`'s incarnation at no later version than `d`.
    fn unchanged(&self, d: &Deployment, op: &'static str) -> Result<(), StorageError> {
        let meta = &d.metadata;
        let holds = self
            .deployments
            .get(&meta.namespace, &meta.name)
            .is_some_and(|cached| {
                cached.metadata.uid == meta.uid
                    && cached.metadata.resource_version <= meta.resource_version
            });
        if holds {
            Ok(())
        } else {
            Err(StorageError::OwnerGone {
                op,
                key: meta.key(),
                owner: format!("deployment {}", meta.key()),
                how: "changed or deleted",
            })
        }
    }
}

impl DeploymentControl for ApiDeploymentControl {
    async fn deployment(&self, namespace: &str, name: &str) -> Result<Deployment, StorageError> {
        self.api.get(namespace, name).await
    }

    async fn replica_sets(&self, namespace: &str) -> Result<Vec<ReplicaSet>, StorageError> {
        let list = self.api.list::<ReplicaSet>(Some(namespace)).await?;
        Ok(list
            .items
            .into_iter()
            .map(|mut rs| {
                crate::api::remember_spec(&mut rs);
                rs
            })
            .collect())
    }

    async fn replica_set(&self, namespace: &str, name: &str) -> Result<ReplicaSet, StorageError> {
        self.api.get(namespace, name).await
    }

    async fn pods(&self, namespace: &str) -> Result<Namespace<CachedPod>, StorageError> {
        list_pods(&self.api, namespace).await
    }

    async fn template_hash(&self, d: &Deployment) -> anyhow::Result<Option<String>> {
        let meta = &d.metadata;
        let (stored, revision) = match self
            .api
            .get_document::<Deployment>(&meta.namespace, &meta.name)
            .await
        {
            Ok(found) => found,
            Err(StorageError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if Some(ResourceVersion(revision)) != meta.resource_version {
            return Ok(None);
        }
        Ok(Some(hash_of(&stored, d)))
    }

    async fn create_rs(
        &self,
        guard: &Deployment,
        rs: &ReplicaSet,
    ) -> Result<ReplicaSet, StorageError> {
        self.unchanged(guard, "create")?;
        self.api.create(rs).await
    }

    async fn update_rs(
        &self,
        guard: Option<&Deployment>,
        rs: &ReplicaSet,
    ) -> Result<ReplicaSet, StorageError> {
        if let Some(d) = guard {
            self.unchanged(d, "update")?;
        }
        self.api.update(rs, false).await
    }

    async fn delete_rs(
        &self,
        guard: &Deployment,
        rs: &ReplicaSet,
    ) -> Result<ResourceVersion, StorageError> {
        self.unchanged(guard, "delete")?;
        let meta = &rs.metadata;
        self.api
            .delete::<ReplicaSet>(&meta.namespace, &meta.name, meta.resource_version, false)
            .await
    }

    async fn update_deployment(&self, d: &Deployment) -> Result<Deployment, StorageError> {
        let mut written = self.api.update(d, false).await?;
        if written.status == d.status {
            return Ok(written);
        }
        written.status = d.status.clone();
        self.api.update(&written, true).await
    }
}
