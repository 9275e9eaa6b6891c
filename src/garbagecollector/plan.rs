//! The garbage collector's decisions, from what it observed and without IO (the writes
//! are the root's): how a dependent's owner references stand ([`classify`]), what to do
//! with a live dependent ([`decide`]) and under which conditions on its owners
//! ([`owner_condition`]), what to do with an object in deletion ([`plan_deletion`]), how
//! each dependent of an owner in a foreground deletion stands ([`foreground_dependent`],
//! [`blocks`]), and which terminated pods go ([`terminated_to_delete`]).
//!
//! Mirrors Kubernetes' `pkg/controller/garbagecollector/garbagecollector.go`
//! (`classifyReferences`, `attemptToDeleteItem`, `processDeletingDependentsItem`,
//! `orphanDependents`) and `pkg/controller/podgc/gc_controller.go` (`gcTerminated`).

use crate::api::OwnerReference;
use crate::informer::Ownership;
use crate::registry::{Incarnation, KeyCondition};

pub use crate::api::{FINALIZER_FOREGROUND as FOREGROUND, FINALIZER_ORPHAN as ORPHAN};

/// What the collector found at an owner reference's name.
#[derive(Clone, Debug, PartialEq)]
pub enum Found {
    /// Nothing.
    Absent,
    /// An object with the given uid, at `resource_version`, in deletion with these
    /// finalizers (`None`: not in deletion).
    Object {
        uid: String,
        resource_version: i64,
        deletion: Option<Vec<String>>,
    },
}

/// How one owner reference stands (Kubernetes' `classifyReferences`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Class {
    /// The owner lives (or is of a kind kcm does not store): the dependent stays.
    Solid,
    /// The owner is absent (`at: None`) or another incarnation lives under its name (at
    /// that resourceVersion).
    Dangling { at: Option<i64> },
    /// The owner is in a foreground deletion, waiting for its dependents (at that
    /// resourceVersion).
    Waiting { at: i64 },
}

/// Classifies a reference to `found`.
pub fn classify(reference: &OwnerReference, found: Option<&Found>) -> Class {
    match found {
        None => Class::Solid,
        Some(Found::Absent) => Class::Dangling { at: None },
        Some(Found::Object {
            uid,
            resource_version,
            deletion,
        }) => {
            if *uid != reference.uid {
                Class::Dangling {
                    at: Some(*resource_version),
                }
            } else if deletion
                .as_ref()
                .is_some_and(|f| f.iter().any(|f| f == FOREGROUND))
            {
                Class::Waiting {
                    at: *resource_version,
                }
            } else {
                Class::Solid
            }
        }
    }
}

/// What to do with a live dependent, given the classes of its references in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Every reference is solid (or there are none).
    Keep,
    /// No reference is solid: delete the dependent, in the foreground when an owner waits
    /// for it and it owns others itself (so a tree unwinds bottom up).
    Delete { foreground: bool },
    /// Some references are solid: remove the others (these indexes).
    RemoveReferences(Vec<usize>),
}

/// `attemptToDeleteItem`'s decision over the classes of a live dependent's references,
/// in order; `has_dependents` says whether it owns others itself.
pub fn decide(classes: &[Class], has_dependents: bool) -> Action {
    let solid = classes.iter().filter(|c| **c == Class::Solid).count();
    if solid == classes.len() {
        return Action::Keep;
    }
    if solid == 0 {
        let waiting = classes.iter().any(|c| matches!(c, Class::Waiting { .. }));
        return Action::Delete {
            foreground: waiting && has_dependents,
        };
    }
    Action::RemoveReferences(
        classes
            .iter()
            .enumerate()
            .filter(|(_, c)| **c != Class::Solid)
            .map(|(i, _)| i)
            .collect(),
    )
}

/// Terminated-pod collection (Kubernetes' `PodGCController.gcTerminated`): of the
/// terminated pods `(creationTimestamp, name)`, the ones beyond `threshold`, oldest
/// first. A threshold of 0 collects nothing.
pub fn terminated_to_delete<K: Ord, T>(
    mut terminated: Vec<(Option<std::time::SystemTime>, K, T)>,
    threshold: usize,
) -> Vec<(K, T)> {
    if threshold == 0 || terminated.len() <= threshold {
        return Vec::new();
    }
    let excess = terminated.len() - threshold;
    terminated.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    terminated
        .into_iter()
        .take(excess)
        .map(|(_, name, extra)| (name, extra))
        .collect()
}

/// The condition a write decided on `class` requires of the owner stored at `key`
/// (invariant G1): absent, still the other incarnation read (same `mod_revision`), or
/// alive (in its foreground deletion). `None` for a solid owner.
pub fn owner_condition(class: &Class, key: String) -> Option<KeyCondition> {
    match class {
        Class::Solid => None,
        Class::Dangling { at: None } => Some(KeyCondition::Absent(key)),
        Class::Dangling { at: Some(at) } => Some(KeyCondition::At(key, *at)),
        Class::Waiting { at } => Some(KeyCondition::Alive(Incarnation {
            key,
            read_at: *at,
            created: None,
        })),
    }
}

/// What to do with an object that has a `deletionTimestamp`, by its finalizers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deletion {
    /// No finalizer left: delete it (the apiserver's part of a deletion).
    Delete,
    /// [`ORPHAN`] (`orphanDependents`): every dependent, read fresh from etcd, loses its
    /// reference; then the finalizer goes.
    Orphan,
    /// [`FOREGROUND`] (`processDeletingDependentsItem`): every dependent is asked to go;
    /// the finalizer goes once none blocks the owner's deletion.
    Foreground,
    /// Only someone else's finalizers: the object waits for them.
    Wait,
}

impl Deletion {
    /// The finalizer the collector removes when it is done.
    pub fn finalizer(self) -> Option<&'static str> {
        match self {
            Deletion::Orphan => Some(ORPHAN),
            Deletion::Foreground => Some(FOREGROUND),
            Deletion::Delete | Deletion::Wait => None,
        }
    }
}

/// What to do with an object in deletion with these `finalizers`: orphaning comes
/// before a foreground deletion when it has both.
pub fn plan_deletion(finalizers: &[String]) -> Deletion {
    if finalizers.is_empty() {
        Deletion::Delete
    } else if finalizers.iter().any(|f| f == ORPHAN) {
        Deletion::Orphan
    } else if finalizers.iter().any(|f| f == FOREGROUND) {
        Deletion::Foreground
    } else {
        Deletion::Wait
    }
}

/// How a dependent, as the cache shows it, stands in the foreground deletion of its
/// owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InForeground {
    /// Its (first) reference to the owner has `blockOwnerDeletion`.
    pub blocks: bool,
    /// It is to be asked to go ([`decide`] with the owner waiting): not when it is
    /// already in deletion.
    pub ask: bool,
}

/// How `dependent` stands in the foreground deletion of the owner `owner_uid`; `None`
/// when it no longer references it.
pub fn foreground_dependent(owner_uid: &str, dependent: &Ownership) -> Option<InForeground> {
    let reference = dependent.owners.iter().find(|r| r.uid == owner_uid)?;
    Some(InForeground {
        blocks: reference.block_owner_deletion == Some(true),
        ask: !dependent.deleting,
    })
}

/// Whether `dependent`, as read fresh from etcd, blocks the deletion of the owner
/// `owner_uid`: one of its references to it has `blockOwnerDeletion`.
pub fn blocks(owner_uid: &str, dependent: &Ownership) -> bool {
    dependent
        .owners
        .iter()
        .any(|r| r.uid == owner_uid && r.block_owner_deletion == Some(true))
}
