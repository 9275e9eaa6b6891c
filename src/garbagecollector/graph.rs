//! The garbage collector's pure part: which kinds it knows ([`Resource`]), the index of
//! dependents by owner uid ([`Graph`]), and how a dependent's owners classify
//! ([`classify`], Kubernetes' `classifyReferences`).

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::api::OwnerReference;
use crate::informer::Ownership;

pub use crate::api::{FINALIZER_FOREGROUND as FOREGROUND, FINALIZER_ORPHAN as ORPHAN};

/// The kinds kcm stores, which the collector watches and resolves owner references to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    Pods,
    ReplicationControllers,
    Services,
    Endpoints,
    ReplicaSets,
    Deployments,
}

impl Resource {
    pub const ALL: [Resource; 6] = [
        Resource::Pods,
        Resource::ReplicationControllers,
        Resource::Services,
        Resource::Endpoints,
        Resource::ReplicaSets,
        Resource::Deployments,
    ];

    /// The resource name, as in keys of the work queue (`pods/default/web-x2k9b`).
    pub fn name(self) -> &'static str {
        match self {
            Resource::Pods => "pods",
            Resource::ReplicationControllers => "replicationcontrollers",
            Resource::Services => "services",
            Resource::Endpoints => "endpoints",
            Resource::ReplicaSets => "replicasets",
            Resource::Deployments => "deployments",
        }
    }

    /// The kind and API group an owner reference names it by (`""` is the core group).
    fn kind_and_group(self) -> (&'static str, &'static [&'static str]) {
        const CORE: &[&str] = &[""];
        const APPS: &[&str] = &["apps", "extensions"];
        match self {
            Resource::Pods => ("Pod", CORE),
            Resource::ReplicationControllers => ("ReplicationController", CORE),
            Resource::Services => ("Service", CORE),
            Resource::Endpoints => ("Endpoints", CORE),
            Resource::ReplicaSets => ("ReplicaSet", APPS),
            Resource::Deployments => ("Deployment", APPS),
        }
    }

    /// The resource an owner reference names, by kind and the group of its
    /// `apiVersion`; `None` for a kind kcm does not store (such a reference is solid).
    pub fn of_reference(reference: &OwnerReference) -> Option<Resource> {
        let group = reference
            .api_version
            .split_once('/')
            .map_or("", |(group, _)| group);
        Resource::ALL.into_iter().find(|r| {
            let (kind, groups) = r.kind_and_group();
            kind == reference.kind && groups.contains(&group)
        })
    }

    pub fn parse(name: &str) -> Option<Resource> {
        Resource::ALL.into_iter().find(|r| r.name() == name)
    }
}

/// One object, as the work queue names it: `resource/namespace/name`.
pub fn object_key(resource: Resource, namespace: &str, name: &str) -> String {
    format!("{}/{namespace}/{name}", resource.name())
}

/// The parts of a work-queue key.
pub fn parse_key(key: &str) -> Option<(Resource, &str, &str)> {
    let (resource, rest) = key.split_once('/')?;
    let (namespace, name) = rest.split_once('/')?;
    Some((Resource::parse(resource)?, namespace, name))
}

/// The collector's graph: for every owner (namespace and uid), the objects whose
/// references name it, and the objects in deletion. Built from the informers' deltas: a
/// delta's old state is what its previous delta applied, so the references to remove
/// come with it and the graph keeps one key per dependent and owner.
#[derive(Default)]
pub struct Graph {
    /// `(namespace, owner uid)` → the keys of its dependents.
    dependents: HashMap<(String, String), BTreeSet<String>>,
    /// Objects with a deletionTimestamp.
    deleting: HashSet<String>,
}

impl Graph {
    /// Applies one object's change (`None`: absent) and returns the keys to sync.
    pub fn apply(
        &mut self,
        resource: Resource,
        namespace: &str,
        name: &str,
        old: Option<&Ownership>,
        new: Option<&Ownership>,
    ) -> Vec<String> {
        let key = object_key(resource, namespace, name);
        let mut keys = Vec::new();
        let same = |a: &Ownership, b: &Ownership| {
            a.uid == b.uid
                && a.owners == b.owners
                && a.deleting == b.deleting
                && a.finalizers == b.finalizers
        };
        if old.zip(new).is_some_and(|(a, b)| same(a, b)) {
            return keys;
        }
        // The index follows the new references.
        for reference in old.map_or(&[][..], |o| &o.owners[..]) {
            let owner = (namespace.to_string(), reference.uid.clone());
            if let Some(set) = self.dependents.get_mut(&owner) {
                set.remove(&key);
                if set.is_empty() {
                    self.dependents.remove(&owner);
                }
            }
        }
        self.deleting.remove(&key);
        if let Some(new) = new {
            for reference in &new.owners {
                self.dependents
                    .entry((namespace.to_string(), reference.uid.clone()))
                    .or_default()
                    .insert(key.clone());
            }
            if new.deleting {
                self.deleting.insert(key.clone());
            }
            if !new.owners.is_empty() || new.deleting {
                keys.push(key.clone());
            }
        }
        if let Some(old) = old {
            // Gone or another incarnation: its dependents' owner is gone.
            if new.is_none_or(|new| new.uid != old.uid) {
                keys.extend(self.dependents_of(namespace, &old.uid));
            }
            // Gone, or its references changed: an owner waiting for it may go on.
            if new.is_none_or(|new| new.owners != old.owners) {
                keys.extend(old.owners.iter().filter_map(|r| {
                    Resource::of_reference(r).map(|res| object_key(res, namespace, &r.name))
                }));
            }
        }
        keys.sort();
        keys.dedup();
        keys
    }

    /// The keys of the objects referencing the owner `uid` of `namespace`.
    pub fn dependents_of(&self, namespace: &str, uid: &str) -> Vec<String> {
        self.dependents
            .get(&(namespace.to_string(), uid.to_string()))
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
    }

    pub fn has_dependents(&self, namespace: &str, uid: &str) -> bool {
        self.dependents
            .contains_key(&(namespace.to_string(), uid.to_string()))
    }

    /// Every object with owners or in deletion: what a resync looks at again.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .dependents
            .values()
            .flatten()
            .chain(&self.deleting)
            .cloned()
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }
}

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
pub fn terminated_to_delete<T: Clone>(
    mut terminated: Vec<(Option<std::time::SystemTime>, String, T)>,
    threshold: usize,
) -> Vec<(String, T)> {
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
