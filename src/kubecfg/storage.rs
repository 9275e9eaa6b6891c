//! How the verbs read and write objects: kubectl's wording of the storage errors a user
//! can act on (`pods "x" not found`), and the one create and the one update of an object
//! that every write of `create`, `apply` and `run` goes through, where checks on the object
//! about to be written belong.

use crate::api::Object;
use crate::registry::{Registry, StorageError};

/// Turns the storage errors a user can act on into kubectl's wording
/// (`pods "x" not found`); the others keep their own message.
pub(super) fn storage_error<T: Object>(error: StorageError, name: &str) -> anyhow::Error {
    match error {
        StorageError::NotFound { .. } => anyhow::anyhow!("{} {name:?} not found", T::RESOURCE),
        StorageError::AlreadyExists { .. } => {
            anyhow::anyhow!("{} {name:?} already exists", T::RESOURCE)
        }
        other => other.into(),
    }
}

/// [`storage_error`], except that a refusal of the update function is the whole message
/// (`Expected replicas to be 3, was 2`), without the key it was about.
pub(super) fn update_error<T: Object>(error: StorageError, name: &str) -> anyhow::Error {
    match error {
        StorageError::Update { source, .. } => source,
        other => storage_error::<T>(other, name),
    }
}

/// Writes a new object (create-if-absent): every create of `kcm create`, `kcm apply`
/// and `kcm run` goes through here.
///
/// # Errors
/// `... already exists`, or the storage error.
pub(super) async fn create_object<T: Object>(
    registry: &Registry,
    object: &T,
) -> anyhow::Result<()> {
    registry
        .create(object)
        .await
        .map(drop)
        .map_err(|e| storage_error::<T>(e, &object.metadata().name))
}

/// Writes a stored object over the revision it was read at (compare-and-swap): every
/// update of `kcm apply` goes through here.
///
/// # Errors
/// The [`StorageError`] as it is (a `Conflict`, when the object changed or was deleted
/// since it was read, is for the caller to retry).
pub(super) async fn update_object<T: Object>(
    registry: &Registry,
    object: &T,
) -> anyhow::Result<()> {
    registry.update(object).await.map(drop).map_err(Into::into)
}
