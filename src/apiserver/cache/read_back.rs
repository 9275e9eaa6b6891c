//! The watch cache's window starts after its list's revision, so that revision's own
//! events never reach it; a client that listed at it (every list on a quiet store, and on
//! a freshly started apiserver) and watches from it needs them, since they decide whether
//! a multi-object revision is sent again. They are read back from etcd here, once per
//! window start, and an etcd event (with its previous value) becomes a cache event.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Event, WatchCache};
use crate::etcd_watcher::{RawEvent, RawKind};
use crate::registry::Registry;

impl WatchCache {
    /// Reads the events of `revision`, where the window starts, back from etcd and keeps
    /// them for [`WatchCache::subscribe_at`]. The watch cache's etcd watch starts after its
    /// list's revision, so that revision's own events never reach it; a client that
    /// listed (at that revision) and watches from it needs them.
    ///
    /// etcd has no read of one revision's events but a watch, and a watch from a revision
    /// that wrote nothing under the directory would wait for the next write. So they are
    /// derived from two key-only ranges, at the revision and the one before: a key whose
    /// `mod_revision` is the revision was put then, a key present before and absent then
    /// was deleted then; their values and previous values come from reads at the two
    /// revisions. etcd's order of the events inside the revision is not kept (key order
    /// instead): it orders the writes of one transaction, which a watch delivers whole.
    ///
    /// # Errors
    /// When etcd cannot be read, or has compacted the revision before.
    pub async fn read_start(&self, registry: &Registry, revision: i64) -> anyhow::Result<()> {
        let _reading = self.reading_start.lock().await;
        {
            let state = self.state.read().expect("cache lock");
            if state.window_start != revision
                || state
                    .start_events
                    .as_ref()
                    .is_some_and(|(read, _)| *read == revision)
            {
                return Ok(());
            }
        }
        let start = self.codec.dir_key(registry.prefix());
        let mut at: BTreeMap<String, (i64, i64)> = BTreeMap::new();
        registry
            .for_each_key_page(&start, Some(revision), |kvs| {
                for kv in kvs {
                    let key = String::from_utf8_lossy(kv.key()).into_owned();
                    at.insert(key, (kv.create_revision(), kv.mod_revision()));
                }
            })
            .await?;
        let mut deleted: Vec<String> = Vec::new();
        if revision > 1 {
            registry
                .for_each_key_page(&start, Some(revision - 1), |kvs| {
                    for kv in kvs {
                        let key = String::from_utf8_lossy(kv.key());
                        if !at.contains_key(key.as_ref()) {
                            deleted.push(key.into_owned());
                        }
                    }
                })
                .await?;
        }
        let put: Vec<(String, i64)> = at
            .into_iter()
            .filter(|(_, (_, modified))| *modified == revision)
            .map(|(key, (created, _))| (key, created))
            .collect();
        let mut raws: Vec<RawEvent> = Vec::with_capacity(put.len() + deleted.len());
        for (key, created) in put {
            let Some(kv) = registry.get_at(&key, revision).await? else {
                continue;
            };
            let mut raw = RawEvent::from_kv(&kv);
            if created != revision {
                raw.prev = registry
                    .get_at(&key, revision - 1)
                    .await?
                    .map(|prev| (prev.value().to_vec(), prev.mod_revision()));
            }
            raws.push(raw);
        }
        for key in deleted {
            let Some(prev) = registry.get_at(&key, revision - 1).await? else {
                continue;
            };
            raws.push(RawEvent {
                kind: RawKind::Delete,
                key,
                value: Vec::new(),
                create_revision: prev.create_revision(),
                mod_revision: revision,
                version: 0,
                prev: Some((prev.value().to_vec(), prev.mod_revision())),
            });
        }
        raws.sort_by(|a, b| a.key.cmp(&b.key));
        let events: Vec<Arc<Event>> = raws
            .iter()
            .filter_map(|raw| self.event_from_raw(&start, raw))
            .map(Arc::new)
            .collect();
        tracing::debug!(
            resource = self.codec.resource,
            revision,
            events = events.len(),
            "read the window's first revision back from etcd"
        );
        let mut state = self.state.write().expect("cache lock");
        if state.window_start == revision {
            state.start_events = Some((revision, events));
        }
        Ok(())
    }

    /// One etcd event (with its previous value) as a cache event: the object decoded, its
    /// previous state from the event's previous value. `None` for a key of another layout,
    /// a value that does not decode, or a delete whose previous value etcd no longer had.
    pub fn event_from_raw(&self, start: &str, raw: &RawEvent) -> Option<Event> {
        let codec = self.codec;
        let (namespace, name) = codec.parse(raw.key.strip_prefix(start)?)?;
        let prev = raw.prev.as_ref().and_then(|(value, mod_revision)| {
            let previous = RawEvent {
                value: value.clone(),
                mod_revision: *mod_revision,
                prev: None,
                kind: RawKind::Put,
                ..raw.clone()
            };
            codec.item(&namespace, &name, &previous).ok().map(Arc::new)
        });
        match raw.kind {
            RawKind::Put => {
                let item = codec.item(&namespace, &name, raw).ok()?;
                Some(Event {
                    object: Arc::new(item),
                    // A create has no previous state.
                    prev: if raw.create_revision == raw.mod_revision {
                        None
                    } else {
                        prev
                    },
                    deleted: false,
                })
            }
            RawKind::Delete => {
                let prev = prev?;
                Some(Event {
                    object: Arc::new(prev.stamped(raw.mod_revision)),
                    prev: Some(prev),
                    deleted: true,
                })
            }
        }
    }
}
