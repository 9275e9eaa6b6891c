//! The collector's IO seam: [`GcStore`], its reads and writes of one object by
//! [`Resource`] (a fresh get, a fresh list of a namespace, a delete at a resourceVersion,
//! a metadata update), each write with the owner guards (invariant G1) it was decided on.
//! [`EtcdGc`] is the etcd implementation: the guards become compares in the write's own
//! transaction (`Registry::with_conditions`), exactly as before the seam.
//! `apiclient::gc::ApiGc` is the other one, through a Kubernetes API server.
//!
//! Kubernetes' collector has one such seam too: its writes go through
//! `garbagecollector/operations.go` (`deleteObject`, `patchObject`, `getObject`).

use std::future::Future;

use super::{object_key, owner_condition, Class, Resource};
use crate::api::{start_deletion, Object, ObjectMeta, ResourceVersion};
use crate::labels::Selector;
use crate::registry::{Registry, StorageError};

pub use super::plan::FOREGROUND;

/// Runs `$body` with `$t` the type of `$resource`.
macro_rules! with_type {
    ($resource:expr, $t:ident => $body:expr) => {
        match $resource {
            $crate::garbagecollector::Resource::Pods => {
                type $t = $crate::api::Pod;
                $body
            }
            $crate::garbagecollector::Resource::ReplicationControllers => {
                type $t = $crate::api::ReplicationController;
                $body
            }
            $crate::garbagecollector::Resource::Services => {
                type $t = $crate::api::Service;
                $body
            }
            $crate::garbagecollector::Resource::Endpoints => {
                type $t = $crate::api::Endpoints;
                $body
            }
            $crate::garbagecollector::Resource::ReplicaSets => {
                type $t = $crate::api::ReplicaSet;
                $body
            }
            $crate::garbagecollector::Resource::Deployments => {
                type $t = $crate::api::Deployment;
                $body
            }
        }
    };
}
pub(crate) use with_type;

/// What a write decided on the class of one owner reference requires of that owner
/// (invariant G1): the owner named `resource/name` in the dependent's namespace, referenced
/// by `uid`, classified `class` (never [`Class::Solid`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerGuard {
    pub resource: Resource,
    pub name: String,
    /// The uid the dependent's reference names.
    pub uid: String,
    pub class: Class,
}

/// How a dependent is deleted ([`super::Action::Delete`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    /// At once (Kubernetes' GC deletes a plain dependent with `Background`).
    Background,
    /// Marked with a `deletionTimestamp` and `foregroundDeletion`: it owns others itself,
    /// which go first (a tree unwinds bottom up).
    Foreground,
}

/// What [`GcStore::update_meta`] requires of the object it changes.
#[derive(Clone, Copy, Debug)]
pub enum Expect<'a> {
    /// Unchanged since this resourceVersion (the decision was made on it).
    At(ResourceVersion),
    /// This incarnation (uid), in deletion: an owner's finalizer goes whatever status
    /// writes came since.
    Deleting(&'a str),
}

/// What one [`GcStore::update_meta`] attempt did.
#[derive(Clone, Debug, PartialEq)]
pub enum Updated {
    /// Nothing at that name.
    Absent,
    /// The object is not as [`Expect`] says (changed, another incarnation, not in
    /// deletion); nothing written.
    Unexpected,
    /// Written at `resource_version`; `finished` when the object as written has a
    /// `deletionTimestamp` and no finalizers.
    Written {
        resource_version: ResourceVersion,
        finished: bool,
    },
}

impl Updated {
    /// Written, as `meta` (the object as stored) says.
    pub fn written(meta: &ObjectMeta) -> Updated {
        Updated::Written {
            resource_version: meta.resource_version.unwrap_or_default(),
            finished: meta.deletion_timestamp.is_some() && meta.finalizers.is_empty(),
        }
    }
}

/// The collector's reads and writes (the seam between its decisions and a backend).
///
/// Every write takes the [`OwnerGuard`]s it was decided on and writes nothing when one no
/// longer holds (`StorageError::ConditionFailed`); how it checks them is the
/// implementation's (the etcd one in the write's transaction).
pub trait GcStore: Send + Sync + 'static {
    /// The object's metadata, read fresh (not from a cache); `None` when absent.
    fn get(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<ObjectMeta>, StorageError>> + Send;

    /// The metadata of every object of `resource` in `namespace`, read fresh, in one
    /// consistent list.
    fn list(
        &self,
        resource: Resource,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<ObjectMeta>, StorageError>> + Send;

    /// Deletes the dependent `resource/namespace/name` if it is still at `precondition`
    /// and the `guards` hold; the revision of the write.
    ///
    /// # Errors
    /// `NotFound`, `Conflict` (it changed), `ConditionFailed` (a guard broke).
    fn delete(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
        precondition: ResourceVersion,
        propagation: Propagation,
        guards: &[OwnerGuard],
    ) -> impl Future<Output = Result<ResourceVersion, StorageError>> + Send;

    /// One read-modify-write of the object's metadata with `change`, if it is as
    /// `expect` says and the `guards` hold.
    ///
    /// # Errors
    /// `Conflict` when another writer came between the read and the write,
    /// `ConditionFailed` (a guard broke), others as the backend's.
    fn update_meta(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
        expect: Expect<'_>,
        guards: &[OwnerGuard],
        change: &(dyn Fn(&mut ObjectMeta) + Sync),
    ) -> impl Future<Output = Result<Updated, StorageError>> + Send;

    /// Whether the backend deletes an object whose last finalizer goes itself (an API
    /// server does, on that update: the apiserver's part of a deletion); when not, the
    /// collector does it.
    fn deletes_finalized(&self) -> bool;
}

/// Whether `meta` (as read) is as `expect` says.
pub fn is_expected(meta: &ObjectMeta, expect: Expect<'_>) -> bool {
    match expect {
        Expect::At(rv) => meta.resource_version == Some(rv),
        Expect::Deleting(uid) => meta.uid == uid && meta.deletion_timestamp.is_some(),
    }
}

/// [`GcStore`] over etcd: every write one transaction that also compares each owner
/// guard's key (`KeyCondition`: absent, at the other incarnation's `mod_revision`, or the
/// owner's incarnation alive), so G1 holds atomically.
#[derive(Clone)]
pub struct EtcdGc {
    registry: Registry,
}

impl EtcdGc {
    pub fn new(registry: Registry) -> EtcdGc {
        EtcdGc { registry }
    }

    /// The registry that also compares the guards' keys.
    fn guarded(&self, namespace: &str, guards: &[OwnerGuard]) -> Registry {
        let conditions = guards
            .iter()
            .filter_map(|guard| {
                let key =
                    with_type!(guard.resource, T => self.registry.key::<T>(namespace, &guard.name));
                owner_condition(&guard.class, key)
            })
            .collect();
        self.registry.with_conditions(conditions)
    }
}

impl GcStore for EtcdGc {
    async fn get(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ObjectMeta>, StorageError> {
        with_type!(resource, T => match self.registry.get::<T>(namespace, name).await {
            Ok(object) => Ok(Some(object.metadata().clone())),
            Err(StorageError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        })
    }

    async fn list(
        &self,
        resource: Resource,
        namespace: &str,
    ) -> Result<Vec<ObjectMeta>, StorageError> {
        with_type!(resource, T => Ok(self
            .registry
            .list::<T>(Some(namespace), &Selector::everything())
            .await?
            .items
            .into_iter()
            .map(|o| o.metadata().clone())
            .collect()))
    }

    async fn delete(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
        precondition: ResourceVersion,
        propagation: Propagation,
        guards: &[OwnerGuard],
    ) -> Result<ResourceVersion, StorageError> {
        match propagation {
            Propagation::Background => {
                let registry = self.guarded(namespace, guards);
                with_type!(resource, T => registry.delete::<T>(namespace, name, Some(precondition)).await)
            }
            // No apiserver marks it: the collector does, as a foreground delete would.
            Propagation::Foreground => {
                let expect = Expect::At(precondition);
                let mark = |meta: &mut ObjectMeta| start_deletion(meta, Some(FOREGROUND));
                match self
                    .update_meta(resource, namespace, name, expect, guards, &mark)
                    .await?
                {
                    Updated::Written {
                        resource_version, ..
                    } => Ok(resource_version),
                    Updated::Absent => Err(StorageError::NotFound {
                        key: object_key(resource, namespace, name),
                    }),
                    Updated::Unexpected => Err(StorageError::Conflict {
                        key: object_key(resource, namespace, name),
                        expected: precondition,
                        actual: None,
                    }),
                }
            }
        }
    }

    async fn update_meta(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
        expect: Expect<'_>,
        guards: &[OwnerGuard],
        change: &(dyn Fn(&mut ObjectMeta) + Sync),
    ) -> Result<Updated, StorageError> {
        let registry = self.guarded(namespace, guards);
        with_type!(resource, T => {
            let mut object: T = match registry.get(namespace, name).await {
                Ok(object) => object,
                Err(StorageError::NotFound { .. }) => return Ok(Updated::Absent),
                Err(e) => return Err(e),
            };
            if !is_expected(object.metadata(), expect) {
                return Ok(Updated::Unexpected);
            }
            change(object.metadata_mut());
            registry
                .update(&object)
                .await
                .map(|stored| Updated::written(stored.metadata()))
        })
    }

    fn deletes_finalized(&self) -> bool {
        false
    }
}
