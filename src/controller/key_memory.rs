//! What a controller remembers per key between syncs: the resourceVersion it last warned
//! about (so a bad version is reported once), and a record `W` of its own writes (for
//! read-your-writes and slow start). Shared by the replication manager and the ReplicaSet
//! controller.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::informer::ObjectKey;

/// Per-key memory of a controller. Forget a key when its object is deleted.
#[derive(Debug)]
pub struct KeyMemory<W> {
    warned: Mutex<HashMap<ObjectKey, String>>,
    written: Mutex<HashMap<ObjectKey, W>>,
}

impl<W> Default for KeyMemory<W> {
    fn default() -> Self {
        KeyMemory {
            warned: Mutex::default(),
            written: Mutex::default(),
        }
    }
}

impl<W: Copy + Default> KeyMemory<W> {
    /// Whether `key` at `version` has not been warned about yet; remembers it as warned.
    pub fn first_warning(&self, key: &ObjectKey, version: &str) -> bool {
        let mut warned = self.warned.lock().expect("warned lock");
        if warned.get(key).map(String::as_str) == Some(version) {
            return false;
        }
        warned.insert(key.clone(), version.to_string());
        true
    }

    /// Warns `message` about `key` at `version` unless it was already warned about at it
    /// (an invalid object is reported once per version, not once per sync).
    pub fn warn_once(&self, key: &ObjectKey, version: &str, message: &str) {
        if self.first_warning(key, version) {
            tracing::warn!(%key, resource_version = version, "{message}");
        }
    }

    /// Forgets everything about `key`.
    pub fn forget(&self, key: &ObjectKey) {
        self.warned.lock().expect("warned lock").remove(key);
        self.written.lock().expect("written lock").remove(key);
    }

    /// The record of `key` (the default when there is none).
    pub fn written(&self, key: &ObjectKey) -> W {
        self.written
            .lock()
            .expect("written lock")
            .get(key)
            .copied()
            .unwrap_or_default()
    }

    /// Updates the record of `key`.
    pub fn record(&self, key: &ObjectKey, record: impl FnOnce(&mut W)) {
        let mut written = self.written.lock().expect("written lock");
        record(written.entry(key.clone()).or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_once_per_version_and_forgets() {
        let memory = KeyMemory::<i64>::default();
        assert!(memory.first_warning(&"ns/a".into(), "1"));
        assert!(!memory.first_warning(&"ns/a".into(), "1"));
        assert!(memory.first_warning(&"ns/a".into(), "2"));
        memory.record(&"ns/a".into(), |w| *w = 7);
        assert_eq!(memory.written(&"ns/a".into()), 7);
        memory.forget(&"ns/a".into());
        assert_eq!(memory.written(&"ns/a".into()), 0);
        assert!(memory.first_warning(&"ns/a".into(), "2"));
    }
}
