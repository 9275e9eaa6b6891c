//! The namespace controller: a Namespace marked for deletion (`deletionTimestamp`, phase
//! `Terminating`, set by the API's `DELETE`) loses every object it holds, then itself.
//!
//! Kubernetes' `pkg/controller/namespace` (`namespace_controller.go`,
//! `deletion/namespaced_resources_deleter.go`: `Delete` lists every namespaced resource of
//! the namespace and deletes each collection, requeues while any remains, then removes the
//! `kubernetes` finalizer and the Namespace goes). No 2014 original: 2014's namespaces were
//! only key segments. kcm's version works on the keys directly: each period it lists the
//! Namespace documents (`{prefix}/namespaces/`), and for each terminating one reads every
//! namespaced directory under `{prefix}/{dir}/{namespace}/` (controllers first), deletes
//! each object by compare-and-swap on the revision read, or marks it with a
//! `deletionTimestamp` when it has finalizers (the garbage collector finishes
//! `orphan` and `foregroundDeletion`; anyone's own finalizer keeps the namespace
//! Terminating, as in Kubernetes). A pass that found nothing left deletes the Namespace,
//! again by compare-and-swap: a namespace is removed only after a pass saw it empty.
//!
//! A terminating namespace's events are deleted each pass but do not keep it
//! Terminating (kcm's components write them past any admission check; a late one leaves
//! with its lease).
//!
//! Invariants: it writes only what is under a terminating namespace and the Namespace
//! itself; every write is conditional on the revision it read, so an object rewritten
//! meanwhile is looked at again next period; pods go at once, without their grace
//! period (docs/departures.md, "namespaces").

use std::future::Future;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::api::{self, Object as _, ResourceVersion, NAMESPACES_DIR};
use crate::record::EVENTS_DIR;
use crate::registry::{Registry, StorageError};

/// The controller's name (`--controllers`, logs).
pub const NAME: &str = "namespace";

/// How often terminating namespaces are looked at by default.
pub const DEFAULT_SYNC_PERIOD: Duration = Duration::from_secs(1);

/// Settings of the namespace controller.
#[derive(Clone, Debug)]
pub struct NamespaceConfig {
    /// How often the Namespaces are listed (each terminating one is emptied a step).
    pub sync_period: Duration,
    /// The directories (under the prefix) of the namespaced resources it empties, the
    /// controllers' first; events are emptied apart (they do not hold a namespace).
    pub directories: Vec<&'static str>,
}

/// The controllers' directories, emptied first so that they create no pods the pass
/// then has to delete again.
const CONTROLLER_DIRS: [&str; 3] = [
    api::Deployment::KEY_DIR,
    api::ReplicaSet::KEY_DIR,
    api::ReplicationController::KEY_DIR,
];

impl NamespaceConfig {
    /// Settings that empty `directories`, the namespaced resources served (Kubernetes'
    /// controller finds them by discovery; kcm's caller passes the API registry's:
    /// `apiserver::namespaced_directories`), the controllers' first, events apart.
    pub fn new(directories: impl IntoIterator<Item = &'static str>) -> NamespaceConfig {
        let mut directories: Vec<&'static str> = directories
            .into_iter()
            .filter(|dir| *dir != EVENTS_DIR)
            .collect();
        directories.sort_by_key(|dir| {
            CONTROLLER_DIRS
                .iter()
                .position(|first| first == dir)
                .unwrap_or(CONTROLLER_DIRS.len())
        });
        NamespaceConfig {
            sync_period: DEFAULT_SYNC_PERIOD,
            directories,
        }
    }
}

/// One stored value, as read.
struct Stored {
    key: String,
    value: Vec<u8>,
    revision: ResourceVersion,
}

/// What a pass does to one object of a terminating namespace.
#[derive(Debug, PartialEq, Eq)]
pub enum ObjectStep {
    /// No finalizers: the key goes.
    Delete,
    /// Finalizers and no `deletionTimestamp`: it is marked, and waits for them.
    Mark,
    /// Already marked: it waits for its finalizers.
    Wait,
}

/// The step for one object (its stored JSON): Kubernetes' background delete.
pub fn object_step(object: &Value) -> ObjectStep {
    let finalizers = object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    let marked = object
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    match (finalizers, marked) {
        (false, _) => ObjectStep::Delete,
        (true, false) => ObjectStep::Mark,
        (true, true) => ObjectStep::Wait,
    }
}

/// Runs `pass` each `period` until `shutdown` resolves (a pass in flight finishes first);
/// a failed pass is logged and the next period tries again. Both namespace controllers
/// (this one on etcd, `apiclient::namespace` through the API) run this way.
pub fn every<P, F>(
    period: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
    mut pass: P,
) -> BoxFuture<'static, anyhow::Result<()>>
where
    P: FnMut() -> F + Send + 'static,
    F: Future<Output = anyhow::Result<()>> + Send,
{
    Box::pin(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                biased;
                () = &mut shutdown => return Ok(()),
                _ = tick.tick() => {}
            }
            if let Err(e) = pass().await {
                tracing::debug!(error = %format!("{e:#}"), "namespace pass failed; next period");
            }
        }
    })
}

/// `NamespaceController`.
pub struct NamespaceController {
    registry: Registry,
    config: NamespaceConfig,
}

impl NamespaceController {
    pub fn new(registry: Registry, config: NamespaceConfig) -> NamespaceController {
        NamespaceController { registry, config }
    }

    /// Returns the controller running until `shutdown` resolves: a pass each period (a
    /// pass in flight finishes first).
    pub fn start(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        let period = self.config.sync_period;
        let controller = std::sync::Arc::new(self);
        every(period, shutdown, move || {
            let controller = controller.clone();
            async move { controller.sync().await }
        })
    }

    /// One pass: every terminating Namespace is emptied a step, or deleted when a pass
    /// before found it empty.
    ///
    /// # Errors
    /// When etcd fails a read or a write (the rest waits for the next pass).
    pub async fn sync(&self) -> anyhow::Result<()> {
        let prefix = format!("{}/{NAMESPACES_DIR}/", self.registry.prefix());
        for namespace in self.list(&prefix).await? {
            let document: Value = match serde_json::from_slice(&namespace.value) {
                Ok(document) => document,
                Err(_) => continue,
            };
            if !api::is_terminating(&document) {
                continue;
            }
            let name = namespace.key[prefix.len()..].to_string();
            self.sync_namespace(&name, &namespace).await?;
        }
        Ok(())
    }

    /// Deletes (or marks) every object of namespace `name`; deletes the Namespace when
    /// there was none.
    async fn sync_namespace(&self, name: &str, namespace: &Stored) -> anyhow::Result<()> {
        let mut remaining = 0;
        for dir in &self.config.directories {
            let under = format!("{}/{dir}/{name}/", self.registry.prefix());
            for object in self.list(&under).await? {
                remaining += 1;
                self.delete_object(&object).await?;
            }
        }
        // Its events go too, but do not hold it: kcm's components write events straight to
        // etcd (no apiserver refuses them in a terminating namespace, as kube-apiserver's
        // NamespaceLifecycle admission does), so one written after the last pass would
        // hold the namespace for nothing; it leaves with its lease within the hour.
        let events = format!("{}/{EVENTS_DIR}/{name}/", self.registry.prefix());
        for event in self.list(&events).await? {
            self.ignore_races(self.delete_stored(&event).await)?;
        }
        if remaining > 0 {
            tracing::debug!(namespace = name, remaining, "namespace terminating");
            return Ok(());
        }
        match self
            .registry
            .delete_raw(&namespace.key, namespace.revision)
            .await
        {
            Ok(_) => {
                tracing::info!(
                    namespace = name,
                    "namespace deleted: it held nothing any more"
                );
                Ok(())
            }
            Err(StorageError::NotFound { .. } | StorageError::Conflict { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn delete_object(&self, object: &Stored) -> anyhow::Result<()> {
        let Ok(mut value) = serde_json::from_slice::<Value>(&object.value) else {
            // Not JSON: nothing else will ever read it; it goes.
            return self.ignore_races(self.delete_stored(object).await);
        };
        let written = match object_step(&value) {
            ObjectStep::Wait => return Ok(()),
            ObjectStep::Delete => self.delete_stored(object).await,
            ObjectStep::Mark => {
                value["metadata"]["deletionTimestamp"] = Value::String(api::now_rfc3339());
                let bytes = serde_json::to_vec(&value).expect("a JSON value always encodes");
                self.registry
                    .update_raw(&object.key, object.revision, bytes)
                    .await
                    .map(drop)
            }
        };
        self.ignore_races(written)
    }

    /// Deletes `object` if it is still at the revision it was read at.
    async fn delete_stored(&self, object: &Stored) -> Result<(), StorageError> {
        self.registry
            .delete_raw(&object.key, object.revision)
            .await
            .map(drop)
    }

    /// A write that lost to another writer, or found the key gone, is looked at again
    /// next pass.
    fn ignore_races(&self, written: Result<(), StorageError>) -> anyhow::Result<()> {
        match written {
            Ok(()) | Err(StorageError::NotFound { .. } | StorageError::Conflict { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Every key under `prefix`, with its value and revision.
    async fn list(&self, prefix: &str) -> anyhow::Result<Vec<Stored>> {
        let mut found = Vec::new();
        self.registry
            .for_each_page(prefix, None, |kvs| {
                found.extend(kvs.iter().map(|kv| Stored {
                    key: String::from_utf8_lossy(kv.key()).into_owned(),
                    value: kv.value().to_vec(),
                    revision: ResourceVersion(kv.mod_revision()),
                }));
            })
            .await?;
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_controllers_are_emptied_first_and_events_apart() {
        let config = NamespaceConfig::new([
            "configmaps",
            EVENTS_DIR,
            "pods",
            "controllers",
            "deployments",
            "replicasets",
        ]);
        assert_eq!(
            config.directories,
            [
                "deployments",
                "replicasets",
                "controllers",
                "configmaps",
                "pods"
            ]
        );
    }

    #[test]
    fn objects_without_finalizers_go_and_the_others_are_marked_once() {
        assert_eq!(
            object_step(&json!({"metadata": {"name": "a"}})),
            ObjectStep::Delete
        );
        assert_eq!(
            object_step(&json!({"metadata": {"finalizers": []}})),
            ObjectStep::Delete
        );
        assert_eq!(
            object_step(&json!({"metadata": {"finalizers": ["x/y"]}})),
            ObjectStep::Mark
        );
        assert_eq!(
            object_step(&json!({"metadata": {"finalizers": ["x/y"], "deletionTimestamp": "t"}})),
            ObjectStep::Wait
        );
    }
}
