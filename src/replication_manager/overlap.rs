//! Which controllers overlap: pairs of valid controllers in one namespace where one's pods
//! match the other's selector ([`api::pods_overlap`]), kept up to date as controllers
//! change, so that the manager can warn once when a pair starts to overlap.
//!
//! 2014's manager never looked (kubernetes #2210): two such controllers count each other's
//! pods and delete and recreate them forever. The manager keeps that behaviour (ownership,
//! through ReplicaSets and ownerReferences, is the fix) but says so, as Kubernetes did from
//! 2015 (#10415, "more than one replication controller is selecting pods").
//!
//! Invariants:
//! - `partners` is symmetric and holds exactly the overlapping pairs among `entries`;
//! - a change that keeps a controller's selector and template labels (a status write, a
//!   resize) costs one map lookup; any other change is checked against candidates found
//!   through two inverted indexes, not against every controller of the namespace, unless
//!   its selector has only empty values (`app=` matches a pod without `app`, so any
//!   controller's pods may match it).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::api;
use crate::labels::Set;

use super::pod_control::{FreshReads, PodControl};
use super::Inner;

impl<P: PodControl, R: FreshReads> Inner<P, R> {
    /// Records controller `namespace/name` as it now is (`None`: deleted or undecodable)
    /// and says which pairs started to overlap (warn: they fight until someone acts) or
    /// stopped (info). An invalid controller is skipped by the syncs, so it fights no one.
    pub(super) fn note_overlaps(
        &self,
        namespace: &str,
        name: &str,
        rc: Option<&api::ReplicationController>,
    ) {
        let rc = rc.filter(|rc| api::validate(*rc).is_ok());
        let mut overlaps = self.overlaps.lock().expect("overlaps lock");
        let transitions = overlaps.update(namespace, name, rc);
        if transitions.is_empty() {
            return;
        }
        self.metrics
            .replication_overlapping
            .set(overlaps.overlapping() as i64);
        drop(overlaps);
        for transition in transitions {
            match transition {
                Transition::Began {
                    namespace,
                    first,
                    second,
                    labels,
                } => tracing::warn!(
                    "replication controllers {namespace}/{first} and {namespace}/{second} have \
                     overlapping selectors (a pod labelled {{{labels}}} matches both); they will \
                     fight over pods, each counting the other's as its own: change one's \
                     selector and template labels, or delete one with `kcm delete rc` (its \
                     pods stay)"
                ),
                Transition::Ended {
                    namespace,
                    first,
                    second,
                } => tracing::info!(
                    "replication controllers {namespace}/{first} and {namespace}/{second} no \
                     longer overlap"
                ),
            }
        }
    }
}

/// A change in which pairs overlap, for the manager to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Transition {
    /// `namespace/first` and `namespace/second` (sorted) started to overlap; a pod labelled
    /// `labels` matches both.
    Began {
        namespace: String,
        first: String,
        second: String,
        labels: Set,
    },
    /// They no longer overlap (one changed, became invalid, or was deleted).
    Ended {
        namespace: String,
        first: String,
        second: String,
    },
}

impl Transition {
    fn new(namespace: &str, a: &str, b: &str, labels: Option<&Set>) -> Transition {
        let (first, second) = if a <= b { (a, b) } else { (b, a) };
        let (namespace, first, second) = (namespace.into(), first.into(), second.into());
        match labels {
            Some(labels) => Transition::Began {
                namespace,
                first,
                second,
                labels: labels.clone(),
            },
            None => Transition::Ended {
                namespace,
                first,
                second,
            },
        }
    }
}

/// What of a controller decides its overlaps.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    selector: Set,
    /// Its template's labels: the labels of every pod it creates.
    labels: Set,
}

/// The overlapping pairs of every namespace.
#[derive(Debug, Default)]
pub(super) struct Overlaps {
    namespaces: HashMap<String, NamespaceOverlaps>,
    /// Controllers that overlap at least one other.
    overlapping: usize,
}

/// One namespace's controllers, their indexes and their overlapping pairs.
#[derive(Debug, Default)]
struct NamespaceOverlaps {
    entries: HashMap<String, Entry>,
    /// `k=v` to the controllers whose template labels carry it: whose pods a selector with
    /// that pair may match.
    by_label: HashMap<String, BTreeSet<String>>,
    /// `k=v` to the controllers whose selector's first non-empty pair it is: whose
    /// selector may match labels carrying it.
    by_anchor: HashMap<String, BTreeSet<String>>,
    /// Controllers whose selector has only empty values, which match labels without them.
    unanchored: BTreeSet<String>,
    /// Each controller's overlapping partners, with the labels of a pod both count.
    partners: HashMap<String, BTreeMap<String, Set>>,
}

fn pair(key: &str, value: &str) -> String {
    // `=` cannot occur in a label key, so the pair is unambiguous.
    format!("{key}={value}")
}

fn anchor(selector: &Set) -> Option<String> {
    selector
        .iter()
        .find(|(_, value)| !value.is_empty())
        .map(|(key, value)| pair(key, value))
}

impl NamespaceOverlaps {
    fn index(&mut self, name: &str, entry: &Entry) {
        for (key, value) in &entry.labels {
            let names = self.by_label.entry(pair(key, value)).or_default();
            names.insert(name.to_string());
        }
        match anchor(&entry.selector) {
            Some(anchor) => {
                self.by_anchor
                    .entry(anchor)
                    .or_default()
                    .insert(name.to_string());
            }
            None => {
                self.unanchored.insert(name.to_string());
            }
        }
    }

    fn unindex(&mut self, name: &str, entry: &Entry) {
        fn remove(index: &mut HashMap<String, BTreeSet<String>>, key: String, name: &str) {
            if let Some(names) = index.get_mut(&key) {
                names.remove(name);
                if names.is_empty() {
                    index.remove(&key);
                }
            }
        }
        for (key, value) in &entry.labels {
            remove(&mut self.by_label, pair(key, value), name);
        }
        match anchor(&entry.selector) {
            Some(anchor) => remove(&mut self.by_anchor, anchor, name),
            None => {
                self.unanchored.remove(name);
            }
        }
    }

    /// The other controllers that overlap `entry`, with a pod's labels both count.
    fn find_partners(&self, name: &str, entry: &Entry) -> BTreeMap<String, Set> {
        let mut candidates: BTreeSet<&String> = BTreeSet::new();
        // Controllers whose pods `entry`'s selector may match: those carrying its rarest
        // non-empty pair, or every controller when it has none.
        let rarest = entry
            .selector
            .iter()
            .filter(|(_, value)| !value.is_empty())
            .map(|(key, value)| self.by_label.get(&pair(key, value)))
            .min_by_key(|names| names.map_or(0, BTreeSet::len));
        match rarest {
            Some(names) => candidates.extend(names.into_iter().flatten()),
            None => candidates.extend(self.entries.keys()),
        }
        // Controllers whose selector may match `entry`'s pods.
        for (key, value) in &entry.labels {
            candidates.extend(self.by_anchor.get(&pair(key, value)).into_iter().flatten());
        }
        candidates.extend(&self.unanchored);
        candidates
            .into_iter()
            .filter(|other| other.as_str() != name)
            .filter_map(|other| {
                let theirs = &self.entries[other];
                let labels = api::pods_overlap(
                    (&entry.selector, &entry.labels),
                    (&theirs.selector, &theirs.labels),
                )?;
                Some((other.clone(), labels.clone()))
            })
            .collect()
    }
}

impl Overlaps {
    /// How many controllers overlap at least one other.
    pub(super) fn overlapping(&self) -> usize {
        self.overlapping
    }

    /// Records controller `namespace/name` as `rc` (`None`: deleted, or not acted on
    /// because it is invalid) and returns the pairs that started or stopped overlapping.
    pub(super) fn update(
        &mut self,
        namespace: &str,
        name: &str,
        rc: Option<&api::ReplicationController>,
    ) -> Vec<Transition> {
        let entry = rc.map(|rc| {
            let (selector, labels) = api::selection(rc);
            Entry {
                selector: selector.clone(),
                labels: labels.clone(),
            }
        });
        if entry.is_none() && !self.namespaces.contains_key(namespace) {
            return Vec::new();
        }
        let ns = self.namespaces.entry(namespace.to_string()).or_default();
        if ns.entries.get(name) == entry.as_ref() {
            return Vec::new();
        }
        if let Some(old) = ns.entries.remove(name) {
            ns.unindex(name, &old);
        }
        let old_partners = ns.partners.remove(name).unwrap_or_default();
        let new_partners = match &entry {
            Some(entry) => ns.find_partners(name, entry),
            None => BTreeMap::new(),
        };
        let mut overlapping = self.overlapping;
        let mut transitions = Vec::new();
        if !old_partners.is_empty() {
            overlapping -= 1;
        }
        for other in old_partners.keys() {
            if new_partners.contains_key(other) {
                continue;
            }
            let theirs = ns.partners.get_mut(other).expect("partners are symmetric");
            theirs.remove(name);
            if theirs.is_empty() {
                ns.partners.remove(other);
                overlapping -= 1;
            }
            transitions.push(Transition::new(namespace, name, other, None));
        }
        for (other, labels) in &new_partners {
            let theirs = ns.partners.entry(other.clone()).or_default();
            if theirs.is_empty() {
                overlapping += 1;
            }
            theirs.insert(name.to_string(), labels.clone());
            if !old_partners.contains_key(other) {
                transitions.push(Transition::new(namespace, name, other, Some(labels)));
            }
        }
        if !new_partners.is_empty() {
            overlapping += 1;
            ns.partners.insert(name.to_string(), new_partners);
        }
        match entry {
            Some(entry) => {
                ns.index(name, &entry);
                ns.entries.insert(name.to_string(), entry);
            }
            None if ns.entries.is_empty() => {
                self.namespaces.remove(namespace);
            }
            None => {}
        }
        self.overlapping = overlapping;
        transitions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication_manager::fixtures::controller;

    fn labelled(
        name: &str,
        selector: &[(&str, &str)],
        labels: &[(&str, &str)],
    ) -> api::ReplicationController {
        let mut rc = controller(name, 1);
        rc.spec.selector = selector.iter().copied().collect();
        rc.spec.template.as_mut().unwrap().metadata.labels = labels.iter().copied().collect();
        rc
    }

    fn began(first: &str, second: &str, labels: &[(&str, &str)]) -> Transition {
        Transition::Began {
            namespace: "ns".into(),
            first: first.into(),
            second: second.into(),
            labels: labels.iter().copied().collect(),
        }
    }

    fn ended(first: &str, second: &str) -> Transition {
        Transition::Ended {
            namespace: "ns".into(),
            first: first.into(),
            second: second.into(),
        }
    }

    #[test]
    fn a_pair_is_reported_once_when_it_starts_and_once_when_it_ends() {
        let mut overlaps = Overlaps::default();
        let web = labelled("web", &[("app", "web")], &[("app", "web")]);
        let canary = labelled(
            "canary",
            &[("app", "web"), ("track", "canary")],
            &[("app", "web"), ("track", "canary")],
        );
        let db = labelled("db", &[("app", "db")], &[("app", "db")]);
        assert_eq!(overlaps.update("ns", "web", Some(&web)), []);
        assert_eq!(overlaps.update("ns", "db", Some(&db)), []);
        let canary_began = began("canary", "web", &[("app", "web"), ("track", "canary")]);
        assert_eq!(
            overlaps.update("ns", "canary", Some(&canary)),
            std::slice::from_ref(&canary_began)
        );
        assert_eq!(overlaps.overlapping(), 2);
        // Status writes and resizes change nothing that matters: not reported again.
        let mut resized = canary.clone();
        resized.spec.replicas = 9;
        resized.status.replicas = 4;
        assert_eq!(overlaps.update("ns", "canary", Some(&resized)), []);
        assert_eq!(overlaps.update("ns", "web", Some(&web)), []);
        // The same name in another namespace is another controller.
        assert_eq!(overlaps.update("other", "canary", Some(&canary)), []);
        // Relabelled apart, then back: ended, then began again.
        let apart = labelled("canary", &[("app", "web-canary")], &[("app", "web-canary")]);
        assert_eq!(
            overlaps.update("ns", "canary", Some(&apart)),
            [ended("canary", "web")]
        );
        assert_eq!(overlaps.overlapping(), 0);
        assert_eq!(
            overlaps.update("ns", "canary", Some(&canary)),
            [canary_began]
        );
        // Invalid (not acted on) or deleted: the pair ends.
        assert_eq!(overlaps.update("ns", "web", None), [ended("canary", "web")]);
        assert_eq!(overlaps.update("ns", "web", None), []);
        assert_eq!(overlaps.overlapping(), 0);
    }

    #[test]
    fn one_controller_can_overlap_several_and_each_pair_is_reported() {
        let mut overlaps = Overlaps::default();
        let a = labelled("a", &[("app", "web")], &[("app", "web")]);
        let b = labelled("b", &[("app", "web")], &[("app", "web")]);
        // Selects every pod without `app`: c's pods, but not a's or b's.
        let any = labelled("any", &[("app", "")], &[("tier", "x")]);
        let c = labelled("c", &[("name", "c")], &[("name", "c")]);
        overlaps.update("ns", "a", Some(&a));
        overlaps.update("ns", "c", Some(&c));
        assert_eq!(
            overlaps.update("ns", "b", Some(&b)),
            [began("a", "b", &[("app", "web")])]
        );
        assert_eq!(
            overlaps.update("ns", "any", Some(&any)),
            [began("any", "c", &[("name", "c")])]
        );
        assert_eq!(overlaps.overlapping(), 4);
        assert_eq!(overlaps.update("ns", "a", None), [ended("a", "b")]);
        assert_eq!(overlaps.overlapping(), 2);
    }

    /// The indexes find exactly the pairs a comparison of every two controllers finds.
    #[test]
    fn the_indexes_find_every_overlap() {
        let values = ["", "x", "y"];
        let keys = ["a", "b"];
        let mut sets: Vec<Vec<(&str, &str)>> = vec![vec![]];
        for key in keys {
            let mut next = Vec::new();
            for set in &sets {
                next.push(set.clone());
                for value in values {
                    let mut with = set.clone();
                    with.push((key, value));
                    next.push(with);
                }
            }
            sets = next;
        }
        let mut overlaps = Overlaps::default();
        let mut controllers = Vec::new();
        for (i, selector) in sets.iter().enumerate().filter(|(_, s)| !s.is_empty()) {
            // Each controller's pods carry its selector plus one more label.
            let mut labels = selector.clone();
            labels.push(("c", values[i % 3]));
            let rc = labelled(&format!("rc{i}"), selector, &labels);
            overlaps.update("ns", &rc.metadata.name, Some(&rc));
            controllers.push(rc);
        }
        for rc in &controllers {
            let expected: BTreeSet<&str> = controllers
                .iter()
                .filter(|other| api::controllers_overlap(rc, other).is_some())
                .map(|other| other.metadata.name.as_str())
                .collect();
            let found: BTreeSet<&str> = overlaps.namespaces["ns"]
                .partners
                .get(&rc.metadata.name)
                .into_iter()
                .flat_map(|partners| partners.keys().map(String::as_str))
                .collect();
            assert_eq!(found, expected, "partners of {:?}", rc.spec);
        }
    }
}
