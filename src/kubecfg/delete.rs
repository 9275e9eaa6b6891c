//! `kcm delete KIND NAME [--cascade=background|foreground|orphan] [--wait] [--timeout D]`:
//! kubectl's delete (`pkg/cmd/delete`) with the apiserver's part of it
//! (`registry/generic/registry/store.go`'s `Delete`: an object with finalizers, or a
//! foreground or orphaning delete, only gets a `deletionTimestamp` and the finalizer, and
//! goes when its finalizers do; the garbage collector removes `foregroundDeletion` and
//! `orphan`).
//!
//! 2014's kubecfg deleted just the key; a ReplicationController's pods carry no owner
//! references, so nothing cascades from one (`kcm stop rc` still deletes them).

use std::time::Duration;

use super::print::emit;
use super::resource::{kubectl_kind, Kind};
use super::storage::storage_error;
pub use crate::api::{delete_write, Cascade, DeleteWrite};
use crate::api::{
    start_deletion, Deployment, Endpoints, Object, ObjectMeta, Pod, ReplicaSet,
    ReplicationController, Service, FINALIZER_FOREGROUND, FINALIZER_ORPHAN,
};
use crate::client::Target;
use crate::etcd_watcher::{Update, WatchEvent, Watcher};
use crate::registry::{Registry, StorageError};

/// `kcm delete KIND NAME`.
#[derive(Clone, Debug)]
pub struct DeleteOptions {
    pub kind: Kind,
    pub name: String,
    pub namespace: String,
    /// What happens to the object's dependents (`--cascade`, default background).
    pub cascade: Cascade,
    /// Return only once the key is gone (`--wait`, default true).
    pub wait: bool,
    /// How long `wait` waits; `None`: no limit.
    pub timeout: Option<Duration>,
}

/// `kcm delete KIND NAME`. Prints kubectl's `pod "p" deleted` once the delete (or the
/// mark) is written, then, with `wait`, returns when the key is gone.
///
/// # Errors
/// `pods "x" not found`; a timeout naming what is still pending; etcd failing.
pub async fn delete(target: &Target, options: DeleteOptions) -> anyhow::Result<()> {
    let (client, registry) = super::connect(target).await?;
    let watcher = Watcher::new(&client, registry.clone());
    match options.kind {
        Kind::Deployments => delete_kind::<Deployment>(&registry, &watcher, &options).await,
        Kind::Pods => delete_kind::<Pod>(&registry, &watcher, &options).await,
        Kind::Services => delete_kind::<Service>(&registry, &watcher, &options).await,
        Kind::Endpoints => delete_kind::<Endpoints>(&registry, &watcher, &options).await,
        Kind::Replicasets => delete_kind::<ReplicaSet>(&registry, &watcher, &options).await,
        Kind::Replicationcontrollers => {
            // Read first only for the note.
            let before = registry
                .get::<ReplicationController>(&options.namespace, &options.name)
                .await
                .ok();
            delete_kind::<ReplicationController>(&registry, &watcher, &options).await?;
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

async fn delete_kind<T: Object>(
    registry: &Registry,
    watcher: &Watcher,
    options: &DeleteOptions,
) -> anyhow::Result<()> {
    let (namespace, name) = (options.namespace.as_str(), options.name.as_str());
    let what = format!("{} {name:?}", kubectl_kind::<T>());
    let mut attempts = 0;
    let uid = loop {
        attempts += 1;
        let mut object: T = registry
            .get(namespace, name)
            .await
            .map_err(|e| storage_error::<T>(e, name))?;
        let uid = object.metadata().uid.clone();
        let rv = object.metadata().resource_version;
        let written = match delete_write(object.metadata(), options.cascade) {
            DeleteWrite::Nothing => Ok(()),
            DeleteWrite::Delete => registry.delete::<T>(namespace, name, rv).await.map(drop),
            DeleteWrite::Mark(finalizer) => {
                start_deletion(object.metadata_mut(), finalizer);
                registry.update(&object).await.map(drop)
            }
        };
        match written {
            Ok(()) => break uid,
            Err(StorageError::Conflict { .. }) if attempts < 10 => continue,
            Err(e) => return Err(storage_error::<T>(e, name)),
        }
    };
    emit(&format!("{what} deleted\n"))?;
    if options.wait {
        let deleted = Deleted {
            namespace,
            name,
            uid: &uid,
        };
        wait_until_gone::<T>(registry, watcher, deleted, &what, options.timeout).await?;
    }
    Ok(())
}

/// The object a delete was written for: its key and its incarnation.
struct Deleted<'a> {
    namespace: &'a str,
    name: &'a str,
    uid: &'a str,
}

/// Follows a watch of the one key until the deleted incarnation is gone: the key deleted,
/// or holding a namesake (another uid: a controller's replacement under the same name, as
/// kcm's slot names make it), as kubectl's `--wait` tracks the uid.
///
/// # Errors
/// After `timeout` (none: no limit), one line saying what keeps it; the watch failing.
async fn wait_until_gone<T: Object>(
    registry: &Registry,
    watcher: &Watcher,
    deleted: Deleted<'_>,
    what: &str,
    timeout: Option<Duration>,
) -> anyhow::Result<()> {
    let Deleted {
        namespace,
        name,
        uid,
    } = deleted;
    let mut last: T = match registry.get::<T>(namespace, name).await {
        Err(StorageError::NotFound { .. }) => return Ok(()),
        Ok(object) if object.metadata().uid != uid => return Ok(()),
        other => other?,
    };
    let start = last.metadata().resource_version.map_or(0, |rv| rv.0);
    let mut stream = watcher.resumable_object::<T>(namespace, name, &start.to_string())?;
    let gone = async {
        loop {
            match stream.next().await {
                Update::Event(WatchEvent::Deleted(_), _) => return Ok(()),
                Update::Event(WatchEvent::Added(object) | WatchEvent::Modified(object), _) => {
                    if object.metadata().uid != uid {
                        return Ok(());
                    }
                    last = object;
                }
                Update::Event(WatchEvent::Error(status), _) | Update::Error(status) => {
                    anyhow::bail!("watch {}: {}", T::RESOURCE, status.message)
                }
                Update::Resumed { .. } | Update::Relisted { .. } => {}
            }
        }
    };
    let Some(limit) = timeout else {
        return gone.await;
    };
    match tokio::time::timeout(limit, gone).await {
        Ok(result) => result,
        Err(_) => anyhow::bail!(
            "timed out after {} waiting for {what} to be deleted: {}",
            humantime::format_duration(limit),
            pending(last.metadata())
        ),
    }
}

/// What keeps an object in deletion, for the timeout's message.
pub fn pending(meta: &ObjectMeta) -> String {
    if meta.finalizers.is_empty() {
        return "it has no finalizers left; the garbage collector deletes it (is a \
                controller-manager running the garbagecollector controller?)"
            .to_string();
    }
    let ours = meta
        .finalizers
        .iter()
        .any(|f| f == FINALIZER_FOREGROUND || f == FINALIZER_ORPHAN);
    format!(
        "finalizers {} still pending{}",
        meta.finalizers.join(", "),
        if ours {
            " (the garbage collector removes foregroundDeletion and orphan; is a \
             controller-manager running the garbagecollector controller?)"
        } else {
            " (kcm does not know them; whoever set them removes them)"
        }
    )
}
