//! Who selects an object: the selectors of one kind of selecting object (controllers,
//! services, and later ReplicaSets and Deployments) by namespace and name, so that a
//! change of a selected object (a pod) maps to the keys of the objects whose selector
//! matched its old or its new labels. 2014 listed every controller per pod event
//! (`getPodControllers` in the later manager); this is the index kcm's controllers share.

use std::collections::HashMap;

use crate::informer::{Cached, Delta, ObjectKey};
use crate::labels::{Selector, Set};

/// Selectors by namespace, then name.
#[derive(Debug, Default)]
pub struct SelectorIndex {
    selectors: HashMap<String, HashMap<String, Selector>>,
}

impl SelectorIndex {
    /// How many selecting objects the index holds.
    pub fn len(&self) -> usize {
        self.selectors.values().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.selectors.is_empty()
    }

    /// The key of every selecting object.
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.selectors
            .iter()
            .flat_map(|(ns, names)| {
                names
                    .keys()
                    .map(move |name| ObjectKey::new(ns.as_str(), name.as_str()))
            })
            .collect()
    }

    pub fn contains(&self, namespace: &str, name: &str) -> bool {
        self.selectors
            .get(namespace)
            .is_some_and(|names| names.contains_key(name))
    }

    /// Adds `namespace/name` or replaces its selector.
    pub fn upsert(&mut self, namespace: &str, name: &str, selector: Selector) {
        self.selectors
            .entry(namespace.to_string())
            .or_default()
            .insert(name.to_string(), selector);
    }

    /// Removes `namespace/name` (and the namespace once it is empty).
    pub fn remove(&mut self, namespace: &str, name: &str) {
        if let Some(names) = self.selectors.get_mut(namespace) {
            names.remove(name);
            if names.is_empty() {
                self.selectors.remove(namespace);
            }
        }
    }

    /// The keys of the objects in `namespace` whose selector matches `old` or `new` (the
    /// labels of a selected object before and after a change), each once, sorted.
    pub fn selecting(
        &self,
        namespace: &str,
        old: Option<&Set>,
        new: Option<&Set>,
    ) -> Vec<ObjectKey> {
        let Some(names) = self.selectors.get(namespace) else {
            return Vec::new();
        };
        let matches = |selector: &Selector, labels: Option<&Set>| {
            labels.is_some_and(|labels| selector.matches(labels))
        };
        let mut keys: Vec<ObjectKey> = names
            .iter()
            .filter(|(_, selector)| matches(selector, old) || matches(selector, new))
            .map(|(name, _)| ObjectKey::new(namespace, name.as_str()))
            .collect();
        keys.sort();
        keys
    }

    /// [`SelectorIndex::selecting`] for a change of a cached, labelled object.
    pub fn selecting_change<I: Cached>(&self, delta: &Delta<I>) -> Vec<ObjectKey> {
        self.selecting(
            &delta.namespace,
            delta.old.as_deref().and_then(Cached::labels).map(|l| &**l),
            delta.new.as_deref().and_then(Cached::labels).map(|l| &**l),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(labels: &str) -> Set {
        labels
            .split(',')
            .filter(|pair| !pair.is_empty())
            .map(|pair| pair.split_once('=').unwrap())
            .collect()
    }

    #[test]
    fn selecting_matches_old_or_new_labels_within_the_namespace() {
        let mut index = SelectorIndex::default();
        index.upsert("ns", "web", "app=web".parse().unwrap());
        index.upsert("ns", "db", "app=db".parse().unwrap());
        index.upsert("other", "web", "app=web".parse().unwrap());
        #[track_caller]
        fn check(index: &SelectorIndex, old: Option<&str>, new: Option<&str>, expected: &[&str]) {
            let (old, new) = (old.map(set), new.map(set));
            assert_eq!(index.selecting("ns", old.as_ref(), new.as_ref()), expected);
        }
        check(&index, None, Some("app=web"), &["ns/web"]);
        check(
            &index,
            Some("app=web"),
            Some("app=db"),
            &["ns/db", "ns/web"],
        );
        check(&index, Some("app=db"), None, &["ns/db"]);
        check(&index, Some("app=cache"), Some("tier=x"), &[]);
        check(&index, None, None, &[]);
        assert_eq!(index.len(), 3);
        assert!(index.contains("other", "web"));
    }

    #[test]
    fn removing_the_last_name_prunes_the_namespace() {
        let mut index = SelectorIndex::default();
        index.upsert("ns", "web", Selector::everything());
        index.upsert("ns", "web", "app=web".parse().unwrap());
        assert_eq!(index.keys(), ["ns/web"]);
        index.remove("ns", "web");
        index.remove("ns", "missing");
        assert!(index.is_empty());
        assert!(index
            .selecting("ns", None, Some(&set("app=web")))
            .is_empty());
    }
}
