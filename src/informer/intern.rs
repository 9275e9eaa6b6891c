//! [`Interner`]: one copy of each value that many cached items hold alike, so that a
//! controller's 100,000 pods keep one copy of their template's ports, one of each node's
//! name and one of their owner's reference, where each pod kept its own
//! ([`super::Interners`]).
//!
//! An interner holds every value it has handed out until no item holds it: each
//! time its set has doubled since the last sweep, it drops the values only it still
//! holds. Its size stays within twice what the items share, and a sweep's cost is paid
//! for by the inserts before it.

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::Arc;

/// The informer store's and the interners' maps and sets hash with foldhash, not std's
/// SipHash: every watched change hashes its name, its label set and its shared parts, and
/// SipHash was about 1.4 µs of a created pod's 80 in the bench process
/// (docs/PERFORMANCE.md). foldhash seeds each map at random, as std does, so names chosen
/// to collide in one process do not collide in another.
pub(super) type FastHashMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
/// A set hashed as [`FastHashMap`].
pub(super) type FastHashSet<T> = HashSet<T, foldhash::fast::RandomState>;

/// One copy of each equal value.
pub struct Interner<T: ?Sized> {
    values: FastHashSet<Arc<T>>,
    /// Sweep when the set reaches this size.
    sweep_at: usize,
}

/// The smallest size at which a set is swept.
const FIRST_SWEEP: usize = 64;

impl<T: ?Sized> Default for Interner<T> {
    fn default() -> Self {
        Interner {
            values: FastHashSet::default(),
            sweep_at: FIRST_SWEEP,
        }
    }
}

impl<T: ?Sized + Hash + Eq> Interner<T> {
    /// The shared copy of `value`'s value, which is `value` itself when it is the first.
    pub fn share(&mut self, value: &Arc<T>) -> Arc<T> {
        self.get_or_insert(&**value, || value.clone())
    }

    /// The shared copy of `value`, made by `make` when there is none yet.
    pub fn get_or_insert<Q>(&mut self, value: &Q, make: impl FnOnce() -> Arc<T>) -> Arc<T>
    where
        Arc<T>: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        if let Some(shared) = self.values.get(value) {
            return shared.clone();
        }
        if self.values.len() >= self.sweep_at {
            self.values.retain(|v| Arc::strong_count(v) > 1);
            self.sweep_at = (self.values.len() * 2).max(FIRST_SWEEP);
        }
        let made = make();
        self.values.insert(made.clone());
        made
    }

    /// How many values it holds (swept or not).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.values.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_share_one_copy() {
        let mut strings: Interner<str> = Interner::default();
        let a = strings.get_or_insert("node-1", || Arc::from("node-1"));
        let b = strings.share(&Arc::from("node-1"));
        assert!(Arc::ptr_eq(&a, &b));
        let c = strings.get_or_insert("node-2", || Arc::from("node-2"));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(strings.len(), 2);
    }

    #[test]
    fn values_no_item_holds_are_dropped_as_the_set_grows() {
        let mut strings: Interner<str> = Interner::default();
        let kept: Vec<Arc<str>> = (0..10)
            .map(|i| {
                let s = format!("kept-{i}");
                strings.get_or_insert(s.as_str(), || Arc::from(s.as_str()))
            })
            .collect();
        for i in 0..10_000 {
            let s = format!("dropped-{i}");
            drop(strings.get_or_insert(s.as_str(), || Arc::from(s.as_str())));
            // Never more than twice what is held, plus the first sweep's size.
            assert!(
                strings.len() <= 2 * kept.len() + FIRST_SWEEP,
                "{}",
                strings.len()
            );
        }
        for value in &kept {
            assert!(Arc::ptr_eq(value, &strings.share(value)), "{value} kept");
        }
    }
}
