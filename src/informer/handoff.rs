//! [`Handoff`]: what a process writes, handed to its own informer. A controller that
//! creates a pod offers the informer the bytes it writes with their cached form; when the
//! informer's watch brings those very bytes back, it takes the cached form rather than
//! decoding them. Decoding each created pod was the largest single item of a scale-up's
//! process time (docs/PERFORMANCE.md).
//!
//! Invariant: an offer is taken only by an event of its key whose value is byte for byte
//! the value offered, so what the store gets is what decoding those bytes makes (the
//! resourceVersion aside, which the event sets). An offer never taken (its write failed
//! and was not withdrawn, or the informer relisted past it) changes nothing but memory:
//! when [`MAX_OFFERS`] wait, they are all dropped, and the events of those still in flight
//! are decoded.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::intern::FastHashMap;

/// The most offers held at once: eight times a controller's default burst of creates in
/// flight (500), so a few controllers' windows fit and offers never taken cost at most
/// this many documents.
pub const MAX_OFFERS: usize = 4096;

/// The offers of one informer. Cheap to clone; every clone holds the same offers.
pub struct Handoff<I> {
    shared: Arc<Shared<I>>,
}

impl<I> Clone for Handoff<I> {
    fn clone(&self) -> Self {
        Handoff {
            shared: self.shared.clone(),
        }
    }
}

struct Shared<I> {
    offers: Mutex<FastHashMap<Box<str>, Offer<I>>>,
    /// Sets a taken item's resourceVersion.
    at_revision: fn(&mut I, i64),
    taken: AtomicU64,
}

struct Offer<I> {
    value: Vec<u8>,
    item: I,
}

impl<I> Handoff<I> {
    /// No offers; `at_revision` sets a taken item's resourceVersion.
    pub(super) fn new(at_revision: fn(&mut I, i64)) -> Handoff<I> {
        Handoff {
            shared: Arc::new(Shared {
                offers: Mutex::new(FastHashMap::default()),
                at_revision,
                taken: AtomicU64::new(0),
            }),
        }
    }

    /// Offers `item`, the cached form of `value`, for the event that writes `value` at
    /// `key` (an earlier offer of the key is replaced). When [`MAX_OFFERS`] wait, they are
    /// dropped first.
    pub fn offer(&self, key: &str, value: &[u8], item: I) {
        let mut offers = self.shared.offers.lock().expect("handoff lock");
        if offers.len() >= MAX_OFFERS {
            offers.clear();
        }
        let offer = Offer {
            value: value.to_vec(),
            item,
        };
        offers.insert(key.into(), offer);
    }

    /// Withdraws the offer of `key` (its write did not happen).
    pub fn withdraw(&self, key: &str) {
        self.shared.offers.lock().expect("handoff lock").remove(key);
    }

    /// The item offered for `value` at `key`, at `revision`; `None` (the offer of `key`,
    /// if any, kept) when none was offered for exactly these bytes.
    pub(super) fn take(&self, key: &str, value: &[u8], revision: i64) -> Option<I> {
        let mut offers = self.shared.offers.lock().expect("handoff lock");
        let (key, offer) = offers.remove_entry(key)?;
        if offer.value != value {
            offers.insert(key, offer);
            return None;
        }
        drop(offers);
        let mut item = offer.item;
        (self.shared.at_revision)(&mut item, revision);
        self.shared.taken.fetch_add(1, Ordering::Relaxed);
        Some(item)
    }

    /// How many offers the informer has taken.
    pub fn taken(&self) -> u64 {
        self.shared.taken.load(Ordering::Relaxed)
    }

    /// How many offers wait.
    pub fn waiting(&self) -> usize {
        self.shared.offers.lock().expect("handoff lock").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handoff() -> Handoff<(String, i64)> {
        Handoff::new(|item, revision| item.1 = revision)
    }

    #[test]
    fn an_offer_is_taken_once_by_its_own_bytes_at_the_event_revision() {
        let handoff = handoff();
        handoff.offer("/r/pods/ns/a", b"{\"a\":1}", ("a".into(), 0));
        assert_eq!(handoff.take("/r/pods/ns/b", b"{\"a\":1}", 7), None);
        assert_eq!(handoff.take("/r/pods/ns/a", b"{\"a\":2}", 7), None);
        assert_eq!(handoff.waiting(), 1, "other bytes leave the offer");
        assert_eq!(
            handoff.take("/r/pods/ns/a", b"{\"a\":1}", 7),
            Some(("a".into(), 7))
        );
        assert_eq!(handoff.take("/r/pods/ns/a", b"{\"a\":1}", 8), None);
        assert_eq!((handoff.taken(), handoff.waiting()), (1, 0));
    }

    #[test]
    fn a_later_offer_of_a_key_replaces_the_earlier_and_a_withdrawn_one_is_gone() {
        let handoff = handoff();
        handoff.offer("k", b"1", ("first".into(), 0));
        handoff.offer("k", b"2", ("second".into(), 0));
        assert_eq!(handoff.take("k", b"1", 3), None);
        assert_eq!(handoff.take("k", b"2", 3), Some(("second".into(), 3)));
        handoff.offer("k", b"3", ("third".into(), 0));
        handoff.withdraw("k");
        assert_eq!(handoff.take("k", b"3", 4), None);
    }

    #[test]
    fn offers_past_the_bound_drop_those_waiting() {
        let handoff = handoff();
        for i in 0..MAX_OFFERS {
            handoff.offer(&format!("k{i}"), b"v", (i.to_string(), 0));
        }
        assert_eq!(handoff.waiting(), MAX_OFFERS);
        handoff.offer("next", b"v", ("next".into(), 0));
        assert_eq!(handoff.waiting(), 1);
        assert_eq!(
            handoff.take("k0", b"v", 1),
            None,
            "dropped: decoded instead"
        );
        assert_eq!(handoff.take("next", b"v", 1), Some(("next".into(), 1)));
    }
}
