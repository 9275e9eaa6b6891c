//! Label sets and label selectors: which objects a replication controller or service owns.
//!
//! Mirrors 2014 Kubernetes `pkg/labels/labels.go` (`Set`) and `pkg/labels/selector.go`
//! (`Selector`, `ParseSelector`), extended with the set-based grammar (`in`, `notin`, exists,
//! `!`) that Kubernetes unified into its selector parser in 2015.
//!
//! Invariants:
//! - A [`Set`] is a plain sorted map; it does not validate its keys or values (the api module
//!   does that with [`validate_key`] and [`validate_value`]).
//! - Every [`Requirement`] built by [`Requirement::new`] or by parsing has a valid key, valid
//!   values and the right number of values for its operator.
//! - A [`Selector`] keeps its requirements sorted by key, then operator, then values, without
//!   duplicates, so selectors that mean the same requirements compare equal whatever order
//!   they were written in.
//! - For every selector built from valid requirements, parsing its `Display` form gives an
//!   equal selector.
//!
//! Matching follows 2014, where a missing key reads as the empty string: `k=` matches an
//! object without `k` (2014's `hasTerm` compared `ls.Get(label) == value`), whereas modern
//! Kubernetes requires the key to exist. The departures (the `labels` rows of
//! docs/departures.md): the set-based grammar, validated keys and values, trimmed pieces.
//!
//! The module is split along its seams: `selector` (`Operator`, `Requirement`, `Selector`),
//! `parser` (the grammar and `ParseSelectorError`) and `validation` (label keys, values and
//! DNS subdomains). Everything public is re-exported here.

use std::collections::{btree_map, BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

mod parser;
mod selector;
#[cfg(test)]
mod tests;
mod validation;

pub use selector::{Operator, ParseErrorKind, ParseSelectorError, Requirement, Selector};
pub use validation::{validate_dns_subdomain, validate_key, validate_value};

/// A set of labels attached to an object: a map from key to value, iterated in key order.
///
/// Mirrors 2014's `labels.Set`. A missing key reads as the empty string when matching.
/// The set does not validate its contents; see [`validate_key`] and [`validate_value`].
/// It serializes as a JSON object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Set(BTreeMap<String, String>);

impl Set {
    /// Returns an empty set.
    pub fn new() -> Set {
        Set(BTreeMap::new())
    }

    /// Returns the value of `key`, or `None` if the set has no such key.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// Returns whether the set has `key` (with any value, including the empty one).
    pub fn has(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Sets `key` to `value`, returning the previous value if there was one.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) -> Option<String> {
        self.0.insert(key.into(), value.into())
    }

    /// Removes `key`, returning its value if it was set.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.0.remove(key)
    }

    /// Iterates over the `(key, value)` pairs in key order.
    pub fn iter(&self) -> btree_map::Iter<'_, String, String> {
        self.0.iter()
    }

    /// Returns the number of labels.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Returns whether the set has no labels.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Returns the selector that matches objects carrying all of these labels: one `k=v`
    /// requirement per pair, like 2014's `SelectorFromSet`. An empty set gives
    /// [`Selector::everything()`].
    ///
    /// The pairs are not validated; a set with an invalid key or value gives a selector whose
    /// string form does not parse.
    pub fn as_selector(&self) -> Selector {
        let requirements = self
            .0
            .iter()
            .map(|(key, value)| Requirement {
                key: key.clone(),
                operator: Operator::Equals,
                values: BTreeSet::from([value.clone()]),
            })
            .collect();
        Selector::from_requirements(requirements)
    }

    /// Returns the underlying map.
    pub fn as_map(&self) -> &BTreeMap<String, String> {
        &self.0
    }
}

/// What a selector reads of an object's labels: the value of a key. A [`Set`] is one;
/// so is any compact form a store keeps its objects' labels in (the apiserver's watch
/// cache packs them into one buffer per object).
pub trait Labels {
    /// The value of `key`, or `None` when there is no such label.
    fn get(&self, key: &str) -> Option<&str>;

    /// Whether there is a label `key` (with any value, including the empty one).
    fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

impl Labels for Set {
    fn get(&self, key: &str) -> Option<&str> {
        Set::get(self, key)
    }

    fn has(&self, key: &str) -> bool {
        Set::has(self, key)
    }
}

impl<L: Labels + ?Sized> Labels for std::sync::Arc<L> {
    fn get(&self, key: &str) -> Option<&str> {
        (**self).get(key)
    }

    fn has(&self, key: &str) -> bool {
        (**self).has(key)
    }
}

impl From<BTreeMap<String, String>> for Set {
    fn from(map: BTreeMap<String, String>) -> Set {
        Set(map)
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Set {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Set {
        Set(iter
            .into_iter()
            .map(|(key, value)| (key.into(), value.into()))
            .collect())
    }
}

impl<'a> IntoIterator for &'a Set {
    type Item = (&'a String, &'a String);
    type IntoIter = btree_map::Iter<'a, String, String>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// Formats the set as `k=v` pairs sorted by key and joined by `,`; an empty set is `""`.
impl fmt::Display for Set {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (key, value)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{key}={value}")?;
        }
        Ok(())
    }
}
