//! The garbage collector's graph: which kinds it knows ([`Resource`]), how the work queue
//! names an object ([`object_key`]), and the index of dependents by owner uid ([`Graph`],
//! Kubernetes' `GraphBuilder`). Pure.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::api::OwnerReference;
use crate::informer::Ownership;

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
