//! What a delete writes (kube-apiserver's `registry/generic/registry/store.go` `Delete`
//! and `DeleteOptions.propagationPolicy`): delete the key, or mark the object with a
//! `deletionTimestamp` and the finalizer of a foreground or orphaning delete, for the
//! garbage collector to finish. Shared by `kcm delete` and the apiserver's DELETE. Pure.

use super::{ObjectMeta, FINALIZER_FOREGROUND, FINALIZER_ORPHAN};

/// What a delete does to an object's dependents (`--cascade`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cascade {
    /// The object goes now; the garbage collector deletes its dependents afterwards.
    Background,
    /// The object stays (with `foregroundDeletion`) until its blocking dependents are gone.
    Foreground,
    /// The object stays (with `orphan`) until its dependents lost their references to it.
    Orphan,
}

/// The write a delete makes to an object with metadata `meta`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeleteWrite {
    /// Delete the key (at the revision read).
    Delete,
    /// Set `deletionTimestamp` and add the finalizer (if any).
    Mark(Option<&'static str>),
    /// Already in deletion with what this delete asks for: nothing to write.
    Nothing,
}

/// The apiserver's rule: a background delete removes an object without finalizers;
/// otherwise the object is marked, with `foregroundDeletion` or `orphan` for those.
pub fn delete_write(meta: &ObjectMeta, cascade: Cascade) -> DeleteWrite {
    let finalizer = match cascade {
        Cascade::Background if meta.finalizers.is_empty() => return DeleteWrite::Delete,
        Cascade::Background => None,
        Cascade::Foreground => Some(FINALIZER_FOREGROUND),
        Cascade::Orphan => Some(FINALIZER_ORPHAN),
    };
    let has = |f: &str| meta.finalizers.iter().any(|x| x == f);
    if meta.deletion_timestamp.is_some() && finalizer.is_none_or(has) {
        DeleteWrite::Nothing
    } else {
        DeleteWrite::Mark(finalizer)
    }
}
