//! The store of one informer: its items by namespace and name, with an index from
//! `key=value` label pairs to the label sets (groups of items) that carry them, and the
//! [`Delta`] each applied change produces.

use std::sync::Arc;

use super::intern::{FastHashMap, FastHashSet};
use super::{Interners, ObjectKey, Reflected};
use crate::labels::{Operator, Selector, Set};

/// One change, as a subscriber sees it: the item before and after (`None` when absent,
/// or when the stored value did not decode).
#[derive(Debug)]
pub struct Delta<I> {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    pub old: Option<Arc<I>>,
    pub new: Option<Arc<I>>,
}

impl<I> Delta<I> {
    /// The changed object's namespace and name.
    pub fn key(&self) -> ObjectKey {
        ObjectKey {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

impl<I> Clone for Delta<I> {
    fn clone(&self) -> Self {
        Delta {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            old: self.old.clone(),
            new: self.new.clone(),
        }
    }
}

/// An item in a set of items, hashed and compared by its name, so that the set finds it
/// by name without keeping the name beside it (16 bytes a slot: 3.6 MiB of the items'
/// and the groups' tables at 100,000 pods).
pub(super) struct Named<I>(pub(super) Arc<I>);

impl<I: Reflected> std::borrow::Borrow<str> for Named<I> {
    fn borrow(&self) -> &str {
        self.0.name()
    }
}

impl<I: Reflected> std::hash::Hash for Named<I> {
    // As `str` hashes, which `Borrow<str>` requires.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.name().hash(state);
    }
}

impl<I: Reflected> PartialEq for Named<I> {
    fn eq(&self, other: &Self) -> bool {
        self.0.name() == other.0.name()
    }
}

impl<I: Reflected> Eq for Named<I> {}

/// The items of one namespace, with the label index.
pub struct Namespace<I> {
    pub(super) items: FastHashSet<Named<I>>,
    /// Names whose stored value does not decode: not objects, but the names are taken.
    pub(super) undecodable: FastHashSet<Arc<str>>,
    /// Items grouped by their exact label set.
    groups: FastHashMap<Arc<Set>, FastHashSet<Named<I>>>,
    /// For each `key=value` pair, the label sets (groups) that contain it.
    by_pair: FastHashMap<(String, String), FastHashSet<Arc<Set>>>,
}

impl<I> Default for Namespace<I> {
    fn default() -> Self {
        Namespace {
            items: FastHashSet::default(),
            undecodable: FastHashSet::default(),
            groups: FastHashMap::default(),
            by_pair: FastHashMap::default(),
        }
    }
}

impl<I: Reflected> Namespace<I> {
    /// A namespace holding `items` (a fresh read, for callers that cannot use the cache).
    pub fn from_items(items: impl IntoIterator<Item = I>) -> Self {
        let mut namespace = Namespace::default();
        for item in items {
            namespace.upsert(item);
        }
        namespace
    }

    /// Marks `name` as taken by a value that does not decode.
    pub fn mark_undecodable(&mut self, name: Arc<str>) -> Option<Arc<I>> {
        let old = self.remove(&name);
        self.undecodable.insert(name);
        old
    }

    pub fn get(&self, name: &str) -> Option<&Arc<I>> {
        self.items.get(name).map(|named| &named.0)
    }

    /// Whether `name` is held by an item or by a value that does not decode.
    pub fn is_taken(&self, name: &str) -> bool {
        self.items.contains(name) || self.undecodable.contains(name)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn items(&self) -> impl Iterator<Item = &Arc<I>> {
        self.items.iter().map(|named| &named.0)
    }

    /// Stores `item` under its name; returns it as stored, and the item it replaced.
    fn upsert(&mut self, mut item: I) -> (Arc<I>, Option<Arc<I>>) {
        self.undecodable.remove(item.name());
        if let Some(labels) = item.labels() {
            if let Some((shared, _)) = self.groups.get_key_value(&**labels) {
                let shared = shared.clone();
                item.share_labels(shared);
            }
        }
        let item = Arc::new(item);
        let old = self.items.replace(Named(item.clone())).map(|named| named.0);
        let same_group = match (&old, item.labels()) {
            (Some(old), Some(labels)) => old.labels().is_some_and(|o| Arc::ptr_eq(o, labels)),
            _ => false,
        };
        if same_group {
            // The group holds the item itself: the new one replaces the old.
            if let Some(labels) = item.labels() {
                if let Some(members) = self.groups.get_mut(&**labels) {
                    members.replace(Named(item.clone()));
                }
            }
        } else {
            if let Some(old) = &old {
                self.ungroup(old);
            }
            if let Some(labels) = item.labels() {
                let members = self.groups.entry(labels.clone()).or_default();
                if members.is_empty() {
                    for (key, value) in labels.iter() {
                        self.by_pair
                            .entry((key.clone(), value.clone()))
                            .or_default()
                            .insert(labels.clone());
                    }
                }
                self.groups
                    .get_mut(&**labels)
                    .expect("inserted above")
                    .insert(Named(item.clone()));
            }
        }
        (item, old)
    }

    fn remove(&mut self, name: &str) -> Option<Arc<I>> {
        self.undecodable.remove(name);
        let old = self.items.take(name)?.0;
        self.ungroup(&old);
        Some(old)
    }

    fn ungroup(&mut self, item: &Arc<I>) {
        let Some(labels) = item.labels() else {
            return;
        };
        let Some(members) = self.groups.get_mut(&**labels) else {
            return;
        };
        members.remove(item.name());
        if members.is_empty() {
            self.groups.remove(&**labels);
            for (key, value) in labels.iter() {
                let pair = (key.clone(), value.clone());
                if let Some(sets) = self.by_pair.get_mut(&pair) {
                    sets.remove(&**labels);
                    if sets.is_empty() {
                        self.by_pair.remove(&pair);
                    }
                }
            }
        }
    }

    /// The items whose labels match `selector`. Uses the index when the selector has a
    /// `key=value` requirement with a non-empty value (`key=` also matches objects without
    /// `key`, which no pair index can find); otherwise looks at every label set once.
    pub fn select(&self, selector: &Selector) -> Vec<Arc<I>> {
        let indexed = selector.requirements().iter().find_map(|requirement| {
            let value = requirement.values().first()?;
            (matches!(
                requirement.operator(),
                Operator::Equals | Operator::DoubleEquals
            ) && !value.is_empty())
            .then(|| (requirement.key().to_string(), value.clone()))
        });
        let mut selected = Vec::new();
        let mut take = |labels: &Arc<Set>| {
            if selector.matches(labels) {
                if let Some(members) = self.groups.get(&**labels) {
                    selected.extend(members.iter().map(|named| named.0.clone()));
                }
            }
        };
        match indexed {
            Some(pair) => {
                if let Some(sets) = self.by_pair.get(&pair) {
                    sets.iter().for_each(&mut take);
                }
            }
            None => self.groups.keys().for_each(&mut take),
        }
        selected
    }
}

pub(super) struct Store<I> {
    pub(super) namespaces: FastHashMap<Arc<str>, Namespace<I>>,
    /// The values the items hold alike.
    interners: Interners,
}

impl<I> Default for Store<I> {
    fn default() -> Self {
        Store {
            namespaces: FastHashMap::default(),
            interners: Interners::default(),
        }
    }
}

impl<I: Reflected> Store<I> {
    fn namespace_entry(&mut self, namespace: &str) {
        if !self.namespaces.contains_key(namespace) {
            self.namespaces
                .insert(namespace.into(), Namespace::default());
        }
    }

    fn shared_namespace(&self, namespace: &str) -> Arc<str> {
        self.namespaces
            .get_key_value(namespace)
            .map_or_else(|| namespace.into(), |(ns, _)| ns.clone())
    }

    /// Every item, by namespace, in the order etcd lists their keys: what the first list
    /// added, once it is complete. Subscribers get its deltas a chunk at a time
    /// ([`Store::added`]): at 100,000 pods, a delta for each at once was 4.6 MiB at the
    /// controller manager's peak; this is a pointer an item.
    pub(super) fn added_items(&self) -> Vec<(Arc<str>, Vec<Arc<I>>)> {
        let mut namespaces: Vec<(Arc<str>, Vec<Arc<I>>)> = self
            .namespaces
            .iter()
            .map(|(namespace, ns)| {
                let mut items: Vec<Arc<I>> = ns.items.iter().map(|named| named.0.clone()).collect();
                items.sort_unstable_by(|a, b| a.name().cmp(b.name()));
                (namespace.clone(), items)
            })
            .collect();
        // Keys are `namespace/name`, and neither part holds a `/`: two namespaces' keys
        // part before their names do, so sorting the namespaces by `namespace/` and the
        // names within each is the keys' order (`a-b/x` before `a/x`: '-' < '/').
        fn prefix(namespace: &str) -> impl Iterator<Item = u8> + '_ {
            namespace.bytes().chain(std::iter::once(b'/'))
        }
        namespaces.sort_unstable_by(|(a, _), (b, _)| prefix(a).cmp(prefix(b)));
        namespaces
    }

    /// The deltas of `items` in `namespace` as added (a delta from nothing).
    pub(super) fn added(namespace: &Arc<str>, items: &[Arc<I>]) -> Vec<Delta<I>> {
        items
            .iter()
            .map(|item| Delta {
                namespace: namespace.clone(),
                name: item.shared_name(),
                old: None,
                new: Some(item.clone()),
            })
            .collect()
    }

    /// Applies one change and returns its delta (`None` when nothing changed).
    /// `force` replaces an item even at an equal resourceVersion (after a rewind).
    pub(super) fn apply(
        &mut self,
        namespace: &str,
        name: &str,
        change: Change<I>,
        force: bool,
    ) -> Option<Delta<I>> {
        self.namespace_entry(namespace);
        let shared_namespace = self.shared_namespace(namespace);
        let ns = self
            .namespaces
            .get_mut(namespace)
            .expect("entry made above");
        // The name as the store holds it already, if it does.
        let held_name: Option<Arc<str>> = ns
            .get(name)
            .map(|item| item.shared_name())
            .or_else(|| ns.undecodable.get(name).cloned());
        let (old, new, name) = match change {
            Change::Upsert(mut item) => {
                item.share_namespace(&shared_namespace);
                item.intern(&mut self.interners);
                if !force
                    && ns
                        .get(name)
                        .is_some_and(|old| old.resource_version() == item.resource_version())
                {
                    return None;
                }
                let (new, old) = ns.upsert(item);
                let name = held_name.unwrap_or_else(|| new.shared_name());
                (old, Some(new), name)
            }
            // Subscribers only hear of items: a name taken or freed by a value that does
            // not decode changes no item, so it has no delta.
            Change::Undecodable => {
                let shared_name = held_name.unwrap_or_else(|| name.into());
                (ns.mark_undecodable(shared_name.clone()), None, shared_name)
            }
            Change::Remove => (
                ns.remove(name),
                None,
                held_name.unwrap_or_else(|| name.into()),
            ),
        };
        if ns.items.is_empty() && ns.undecodable.is_empty() {
            self.namespaces.remove(namespace);
        }
        if old.is_none() && new.is_none() {
            return None;
        }
        Some(Delta {
            namespace: shared_namespace,
            name,
            old,
            new,
        })
    }
}

pub(super) enum Change<I> {
    Upsert(I),
    Undecodable,
    Remove,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        self, Container, ContainerPort, IntOrString, ObjectMeta, Pod, PodSpec, PodStatus,
    };
    use crate::informer::CachedPod;

    fn pod(name: &str, app: &str, rv: i64) -> CachedPod {
        let pod = Pod {
            metadata: ObjectMeta {
                labels: [("app", app)].into_iter().collect(),
                resource_version: Some(api::ResourceVersion(rv)),
                ..ObjectMeta::named("ns", name)
            },
            spec: PodSpec {
                containers: vec![Container {
                    ports: vec![ContainerPort {
                        name: "http".into(),
                        container_port: 8080,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            },
            status: Some(PodStatus::default()),
            ..Pod::default()
        };
        CachedPod::from(&pod)
    }

    fn names(mut pods: Vec<Arc<CachedPod>>) -> Vec<String> {
        pods.sort_by(|a, b| a.name.cmp(&b.name));
        pods.iter().map(|p| p.name.to_string()).collect()
    }

    #[track_caller]
    fn check_select(store: &Store<CachedPod>, selector: &str, expected: &[&str]) {
        let selector: Selector = selector.parse().unwrap();
        let got = store
            .namespaces
            .get("ns")
            .map(|ns| names(ns.select(&selector)))
            .unwrap_or_default();
        assert_eq!(got, expected, "selector {selector}");
    }

    #[test]
    fn selection_uses_the_label_index_and_follows_changes() {
        let mut store = Store::default();
        store.apply("ns", "a", Change::Upsert(pod("a", "web", 1)), false);
        store.apply("ns", "b", Change::Upsert(pod("b", "web", 2)), false);
        store.apply("ns", "c", Change::Upsert(pod("c", "db", 3)), false);
        check_select(&store, "app=web", &["a", "b"]);
        check_select(&store, "app!=web", &["c"]);
        check_select(&store, "", &["a", "b", "c"]);
        check_select(&store, "app=", &[]);
        // Relabelled: moves between groups.
        let delta = store
            .apply("ns", "b", Change::Upsert(pod("b", "db", 4)), false)
            .unwrap();
        assert_eq!(delta.old.unwrap().labels.get("app"), Some("web"));
        check_select(&store, "app=web", &["a"]);
        check_select(&store, "app=db", &["b", "c"]);
        // Pods with equal labels share one label set.
        let ns = &store.namespaces["ns"];
        assert!(Arc::ptr_eq(
            &ns.get("b").unwrap().labels,
            &ns.get("c").unwrap().labels
        ));
        // The same revision again is no change.
        assert!(store
            .apply("ns", "b", Change::Upsert(pod("b", "db", 4)), false)
            .is_none());
    }

    #[test]
    fn an_undecodable_value_removes_the_item_and_keeps_the_name_taken() {
        let mut store = Store::default();
        store.apply("ns", "a", Change::Upsert(pod("a", "web", 1)), false);
        let delta = store.apply("ns", "a", Change::Undecodable, false).unwrap();
        assert!(delta.old.is_some() && delta.new.is_none());
        let ns = &store.namespaces["ns"];
        assert!(ns.get("a").is_none() && ns.is_taken("a"));
        check_select(&store, "app=web", &[]);
        // Deleted for real: the name is free again (no item changed, so no delta), and
        // the namespace goes away.
        assert!(store.apply("ns", "a", Change::Remove, false).is_none());
        assert!(store.namespaces.is_empty());
    }

    #[test]
    fn the_first_lists_deltas_are_every_item_added_in_key_order() {
        let mut store = Store::default();
        // `a-b/x` sorts before `a/x` as keys ('-' < '/'), though "a" < "a-b".
        for (ns, name) in [("a", "y"), ("a-b", "x"), ("a", "x"), ("b", "a")] {
            store.apply(ns, name, Change::Upsert(pod(name, "web", 1)), false);
        }
        store.apply("a", "gone", Change::Undecodable, false);
        let added: Vec<(String, String)> = store
            .added_items()
            .iter()
            .flat_map(|(namespace, items)| Store::added(namespace, items))
            .inspect(|d| assert!(d.old.is_none() && d.new.is_some()))
            .map(|d| (d.namespace.to_string(), d.name.to_string()))
            .collect();
        let key = |ns: &str, name: &str| (ns.to_string(), name.to_string());
        assert_eq!(
            added,
            [key("a-b", "x"), key("a", "x"), key("a", "y"), key("b", "a")]
        );
    }

    #[test]
    fn find_port_on_cached_ports() {
        let ports = pod("a", "web", 1).ports;
        assert_eq!(ports.find(None), Some(8080));
        assert_eq!(
            ports.find(Some(&IntOrString::String("http".into()))),
            Some(8080)
        );
        assert_eq!(ports.find(Some(&IntOrString::String("grpc".into()))), None);
        assert_eq!(ports.find(Some(&IntOrString::Int(70000))), None);
    }
}
