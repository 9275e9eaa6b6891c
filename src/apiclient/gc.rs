//! The garbage collector's reads and writes through the API: [`ApiGc`], a
//! [`GcStore`] over [`ApiClient`], as Kubernetes' collector
//! (`pkg/controller/garbagecollector/operations.go`) writes through kube-apiserver.
//!
//! - A dependent is deleted with a `DELETE` whose precondition is the resourceVersion it
//!   was decided on, `propagationPolicy: Background` (a plain dependent) or `Foreground`
//!   (a dependent that owns others, which the API server then marks); no
//!   `gracePeriodSeconds`, so a pod a kubelet runs terminates gracefully, as Kubernetes'
//!   collector leaves it.
//! - Removing owner references or a finalizer is a `PUT` of the object at the
//!   resourceVersion read (409 when it changed since).
//! - The apiserver's part of a deletion is the API server's: it deletes an object on the
//!   update that removes its last finalizer, so the collector never deletes one itself.
//!
//! The owner guards of invariant G1 cannot ride in the write's transaction as in etcd.
//! Each write first reads every owner it judged afresh (a `GET`, a consistent read), and
//! writes nothing (`ConditionFailed`) unless each still stands as judged: gone, or
//! another incarnation (another uid) under its name, for a dangling reference; gone,
//! another incarnation, or the same one with a `deletionTimestamp`, for an owner waiting
//! in a foreground deletion. Each of these is monotone (a uid never comes back; a
//! `deletionTimestamp` is never removed), so what the read found still holds when the
//! write lands: a stale cache still never deletes a live owner's dependent. What is lost
//! is the exact version: etcd's guard also refuses when the other incarnation was merely
//! written to since, this one does not (it need not: that write changes nothing the
//! decision rests on). docs/invariants.md ("Through the API") has the rows.

use http::Method;

use super::{object_path, revision_of, stored_kind, ApiClient};
use crate::api::{Object, ObjectMeta, ResourceVersion};
use crate::garbagecollector::{
    is_expected, object_key, with_type, Class, Expect, GcStore, OwnerGuard, Propagation, Resource,
    Updated,
};
use crate::registry::StorageError;

/// [`GcStore`] through an API server.
#[derive(Clone)]
pub struct ApiGc {
    api: ApiClient,
}

impl ApiGc {
    pub fn new(api: ApiClient) -> ApiGc {
        ApiGc { api }
    }

    /// Checks each guard against a fresh read of its owner (see the module doc).
    ///
    /// # Errors
    /// `ConditionFailed` for the first owner that does not stand as judged; the read's
    /// error when one fails.
    async fn check_guards(
        &self,
        op: &'static str,
        namespace: &str,
        name: &str,
        resource: Resource,
        guards: &[OwnerGuard],
    ) -> Result<(), StorageError> {
        for guard in guards {
            let owner = self.get(guard.resource, namespace, &guard.name).await?;
            if !guard_holds(guard, owner.as_ref()) {
                return Err(StorageError::ConditionFailed {
                    op,
                    key: object_key(resource, namespace, name),
                    broken: format!(
                        "its owner {} (uid {}) is there, not gone or in deletion",
                        object_key(guard.resource, namespace, &guard.name),
                        guard.uid
                    ),
                });
            }
        }
        Ok(())
    }
}

/// Whether the owner `guard` names, as read fresh (`None`: absent), stands as the
/// collector judged it.
pub fn guard_holds(guard: &OwnerGuard, owner: Option<&ObjectMeta>) -> bool {
    match (&guard.class, owner) {
        (Class::Solid, _) | (_, None) => true,
        (_, Some(owner)) if owner.uid != guard.uid => true,
        (Class::Waiting { .. }, Some(owner)) => owner.deletion_timestamp.is_some(),
        (Class::Dangling { .. }, Some(_)) => false,
    }
}

impl GcStore for ApiGc {
    async fn get(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ObjectMeta>, StorageError> {
        with_type!(resource, T => match self.api.get::<T>(namespace, name).await {
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
            .api
            .list::<T>(Some(namespace))
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
        self.check_guards("delete", namespace, name, resource, guards)
            .await?;
        let kind = with_type!(resource, T => stored_kind::<T>());
        let path = object_path(kind, namespace, name);
        let policy = match propagation {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
        };
        let options = serde_json::json!({
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "preconditions": {"resourceVersion": precondition.to_string()},
            "propagationPolicy": policy,
        });
        let answer = self
            .api
            .request(Method::DELETE, &path, Some(&options), None)
            .await
            .map_err(|e| e.into_storage("delete", path.clone()))?;
        Ok(ResourceVersion(revision_of(&answer)))
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
        self.check_guards("update", namespace, name, resource, guards)
            .await?;
        with_type!(resource, T => {
            let mut object: T = match self.api.get(namespace, name).await {
                Ok(object) => object,
                Err(StorageError::NotFound { .. }) => return Ok(Updated::Absent),
                Err(e) => return Err(e),
            };
            if !is_expected(object.metadata(), expect) {
                return Ok(Updated::Unexpected);
            }
            change(object.metadata_mut());
            match self.api.update(&object, false).await {
                Ok(stored) => Ok(Updated::written(stored.metadata())),
                Err(StorageError::NotFound { .. }) => Ok(Updated::Absent),
                Err(e) => Err(e),
            }
        })
    }

    /// An API server deletes an object on the update that removes its last finalizer.
    fn deletes_finalized(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(class: Class) -> OwnerGuard {
        OwnerGuard {
            resource: Resource::ReplicaSets,
            name: "web".into(),
            uid: "u1".into(),
            class,
        }
    }

    fn owner(uid: &str, deleting: bool) -> ObjectMeta {
        ObjectMeta {
            uid: uid.into(),
            deletion_timestamp: deleting.then(|| "2026-01-01T00:00:00Z".into()),
            ..ObjectMeta::default()
        }
    }

    #[track_caller]
    fn check(class: Class, found: Option<ObjectMeta>, holds: bool) {
        assert_eq!(guard_holds(&guard(class), found.as_ref()), holds);
    }

    #[test]
    fn a_dangling_owner_must_still_be_gone_or_another_incarnation() {
        let dangling = Class::Dangling { at: None };
        check(dangling.clone(), None, true);
        check(dangling.clone(), Some(owner("u2", false)), true);
        // A stale cache: the owner is there after all (kubernetes #88097).
        check(dangling.clone(), Some(owner("u1", false)), false);
        check(dangling, Some(owner("u1", true)), false);
    }

    #[test]
    fn a_waiting_owner_must_be_in_deletion_or_gone() {
        let waiting = Class::Waiting { at: 7 };
        check(waiting.clone(), Some(owner("u1", true)), true);
        check(waiting.clone(), None, true);
        check(waiting.clone(), Some(owner("u2", false)), true);
        check(waiting, Some(owner("u1", false)), false);
    }
}
