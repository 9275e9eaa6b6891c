//! What a [`serde_json::Value`] costs: the bytes of its compact JSON ([`json_len_within`]) and
//! an estimate of the memory it holds ([`Cost`], [`memory_within`]). Request bodies are
//! decoded against a [`MemoryBudget`] of [`MAX_DECODED_BYTES`], and JSON patch's `copy` is
//! charged by both measures, so one request's memory stays a small multiple of the 3 MiB
//! body limit however its bytes are shaped.
//!
//! Invariants: measuring never allocates in proportion to the value and stops as soon as the
//! limit is passed, so a measure costs at most `limit` bytes' worth of work; the estimate is
//! an upper bound of what the value's allocations take, measured for serde_json 1 with
//! `preserve_order` on a 64-bit target (the figures are in [`Cost`]'s docs).

use std::io;

use serde_json::Value;

/// The most memory the values decoded for one request may take, estimated by [`Cost`]:
/// 64 MiB, about 21 × kube-apiserver's 3 MiB body limit.
///
/// Why that much: JSON of realistic objects costs 6 × (a ConfigMap of many short keys) to
/// 19 × (a pod template's containers, dense in small maps) its bytes once decoded, so every
/// object etcd can store (1.5 MiB by default) and every 3 MiB JSON body of realistic shape
/// fits. What does not fit is a body of tiny containers: `{}` costs 72 bytes for its 3, a
/// one-member map about 470 bytes for its 8, up to 60 × the body.
pub(crate) const MAX_DECODED_BYTES: usize = 64 << 20;

/// The estimated memory of a decoded value, charged part by part as it is built: what its
/// allocations hold, as serde_json 1 (`preserve_order`) and glibc's malloc make them
/// (kcm's jemalloc, `alloc.rs`, rounds a block of over 128 bytes up to a size class at most
/// a quarter larger, and smaller ones to 16 bytes with no header: the estimate is of the
/// same order, and the limit's tests read the server's real peak).
///
/// A value's slot is `size_of::<Value>()`, 72 bytes, in its array's vector, which holds room
/// for 4 items and then doubles; an object member is an entry of 104 bytes (hash, key, value)
/// in a vector sized as the map's index table, which has 4 buckets (room for 3), then 8
/// (room for 7), then doubles at 7/8 full, each bucket 9 bytes; a string takes its length,
/// plus the allocator's header and rounding. So `{}` and `[]` cost their slot only, and
/// `{"a":{}}` about 470 bytes. While a container grows, its old allocation is held for a
/// moment too; that is not charged.
pub(crate) struct Cost;

impl Cost {
    /// A value's slot.
    pub(crate) const VALUE: usize = std::mem::size_of::<Value>();
    /// An object's entry: the key's hash, the key and the value.
    const ENTRY: usize = 8 + std::mem::size_of::<String>() + Cost::VALUE;
    /// A bucket of an object's index table: an index and a control byte.
    const BUCKET: usize = 9;

    /// What an array of `len` items holds beyond its own slot, their contents aside.
    pub(crate) const fn array(len: usize) -> usize {
        let capacity = match len {
            0 => 0,
            1..=4 => 4,
            _ => len.next_power_of_two(),
        };
        capacity * Cost::VALUE
    }

    /// What an object of `len` members holds beyond its own slot, their keys' and values'
    /// contents aside.
    pub(crate) const fn object(len: usize) -> usize {
        let (buckets, capacity) = match len {
            0 => return 0,
            1..=3 => (4, 3),
            4..=7 => (8, 7),
            _ => {
                let buckets = (len * 8).div_ceil(7).next_power_of_two();
                (buckets, buckets / 8 * 7)
            }
        };
        // A control group of 16 bytes closes the table.
        capacity * Cost::ENTRY + buckets * Cost::BUCKET + 16
    }

    /// A string of `len` bytes: nothing when empty, else its bytes with the allocator's
    /// header and rounding (glibc's smallest chunk is 32 bytes).
    pub(crate) const fn string(len: usize) -> usize {
        if len == 0 {
            0
        } else if len < 24 {
            32
        } else {
            len + 16
        }
    }
}

/// Memory charged against a limit; once over it, every further charge fails.
#[derive(Debug)]
pub(crate) struct MemoryBudget {
    spent: usize,
    limit: usize,
}

impl MemoryBudget {
    /// A budget of `limit` bytes.
    pub(crate) fn new(limit: usize) -> MemoryBudget {
        MemoryBudget { spent: 0, limit }
    }

    /// Charges `bytes`; false once the total passes the limit.
    pub(crate) fn charge(&mut self, bytes: usize) -> bool {
        self.spent = self.spent.saturating_add(bytes);
        self.spent <= self.limit
    }

    /// What was charged so far.
    pub(crate) fn spent(&self) -> usize {
        self.spent
    }

    /// The limit.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }
}

/// [`Cost`]'s estimate of `value`'s memory, or `None` once it passes `limit` (the walk stops
/// there).
pub(crate) fn memory_within(value: &Value, limit: usize) -> Option<usize> {
    let mut budget = MemoryBudget::new(limit);
    (budget.charge(Cost::VALUE) && charge_parts(value, &mut budget)).then(|| budget.spent())
}

/// Charges what `value` holds beyond its own slot.
fn charge_parts(value: &Value, budget: &mut MemoryBudget) -> bool {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => true,
        Value::String(text) => budget.charge(Cost::string(text.len())),
        Value::Array(items) => {
            budget.charge(Cost::array(items.len()))
                && items.iter().all(|item| charge_parts(item, budget))
        }
        Value::Object(members) => {
            budget.charge(Cost::object(members.len()))
                && members.iter().all(|(key, member)| {
                    budget.charge(Cost::string(key.len())) && charge_parts(member, budget)
                })
        }
    }
}

/// The bytes of `value`'s compact JSON (as `serde_json::to_vec` writes it), or `None` once
/// they pass `limit`: counted as they are written, never kept.
pub(crate) fn json_len_within(value: &Value, limit: usize) -> Option<usize> {
    let mut counter = Counter { written: 0, limit };
    serde_json::to_writer(&mut counter, value)
        .ok()
        .map(|()| counter.written)
}

/// A writer that only counts, and fails once past its limit.
struct Counter {
    written: usize,
    limit: usize,
}

impl io::Write for Counter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.written += bytes.len();
        if self.written > self.limit {
            return Err(io::Error::other("over the limit"));
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_len_is_the_compact_encodings_and_stops_past_the_limit() {
        let value = json!({"a": [1, "two", null], "b": {"c": true}});
        let compact = serde_json::to_vec(&value).unwrap().len();
        assert_eq!(json_len_within(&value, compact), Some(compact));
        assert_eq!(json_len_within(&value, compact - 1), None);
        assert_eq!(json_len_within(&json!("x".repeat(100)), 10), None);
    }

    #[track_caller]
    fn check_memory(value: Value, expected: usize) {
        assert_eq!(memory_within(&value, usize::MAX), Some(expected), "{value}");
        assert_eq!(memory_within(&value, expected), Some(expected), "{value}");
        assert_eq!(memory_within(&value, expected - 1), None, "{value}");
    }

    #[test]
    fn memory_is_charged_per_slot_member_container_and_string() {
        assert_eq!(Cost::VALUE, 72);
        check_memory(json!(null), 72);
        check_memory(json!(""), 72);
        check_memory(json!("x"), 72 + 32);
        check_memory(json!("x".repeat(100)), 72 + 116);
        check_memory(json!([]), 72);
        check_memory(json!({}), 72);
        check_memory(json!([{}, {}]), 72 + 4 * 72);
        check_memory(json!([0, 1, 2, 3, 4]), 72 + 8 * 72);
        // Three entries of 104 bytes and four buckets of 9, and the key.
        check_memory(json!({"a": {}}), 72 + 3 * 104 + 4 * 9 + 16 + 32);
        assert_eq!(Cost::object(7), 7 * 104 + 8 * 9 + 16);
        assert_eq!(Cost::object(8), 14 * 104 + 16 * 9 + 16);
        assert_eq!(Cost::object(14), 14 * 104 + 16 * 9 + 16);
        assert_eq!(Cost::object(15), 28 * 104 + 32 * 9 + 16);
    }

    #[test]
    fn tiny_objects_cost_far_more_than_their_bytes_and_realistic_ones_do_not() {
        let ratio = |value: &Value| {
            let bytes = serde_json::to_vec(value).unwrap().len();
            memory_within(value, usize::MAX).unwrap() as f64 / bytes as f64
        };
        let empty_objects = Value::Array(vec![json!({}); 10_000]);
        assert!(ratio(&empty_objects) > 20.0, "{}", ratio(&empty_objects));
        let containers: Vec<Value> = (0..1000)
            .map(|i| {
                json!({"name": format!("c{i}"), "image": "nginx:1.25",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "resources": {"limits": {"cpu": "100m"}},
                "env": [{"name": "A", "value": "b"}, {"name": "B", "value": "c"}],
                "imagePullPolicy": "IfNotPresent"})
            })
            .collect();
        let containers = Value::Array(containers);
        assert!(ratio(&containers) < 20.0, "{}", ratio(&containers));
        let blob = json!({"data": {"blob": "x".repeat(1 << 20)}});
        assert!(ratio(&blob) < 1.1, "{}", ratio(&blob));
    }
}
