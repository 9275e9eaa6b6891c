//! etcd's own history of a key range, read with a watch from a past revision, so that the
//! tests can check what was written without anything a poller could miss.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use etcd_client::{Client, EventType, GetOptions, WatchOptions};
use serde_json::{json, Value};

/// One event of the history.
#[derive(Debug, Clone)]
pub struct HistoryEvent {
    pub revision: i64,
    pub key: String,
    /// A PUT (else a DELETE).
    pub put: bool,
    pub create_revision: i64,
    /// The value written (empty for a DELETE).
    pub value: Vec<u8>,
}

/// Every event on the keys in `[start, end)` after revision `after`, up to now, in revision
/// order. "Now" is marked by writing `sentinel`, which must lie inside the range but outside
/// whatever the code under test watches; its own event is not returned.
pub async fn read(
    client: &Client,
    start: &str,
    end: &str,
    after: i64,
    sentinel: &str,
) -> Vec<HistoryEvent> {
    let now = client
        .clone()
        .put(sentinel, "end", None)
        .await
        .expect("put the history sentinel")
        .header()
        .expect("header")
        .revision();
    // Fragmented: a response of many large revisions (100 pods in one transaction, say)
    // would pass the client's 4 MiB message limit whole.
    let options = WatchOptions::new()
        .with_range(end)
        .with_start_revision(after + 1)
        .with_fragment();
    let mut stream = client
        .clone()
        .watch(start, Some(options))
        .await
        .expect("watch the history");
    let mut events = Vec::new();
    loop {
        let response = tokio::time::timeout(Duration::from_secs(30), stream.message())
            .await
            .expect("history arrives within 30s")
            .expect("history watch")
            .expect("history watch open");
        assert!(!response.canceled(), "history watch canceled: {response:?}");
        for event in response.events() {
            let kv = event.kv().expect("events carry a kv");
            let key = kv.key_str().expect("utf-8 key").to_owned();
            if key == sentinel && kv.mod_revision() == now {
                return events;
            }
            events.push(HistoryEvent {
                revision: kv.mod_revision(),
                key,
                put: event.event_type() == EventType::Put,
                create_revision: kv.create_revision(),
                value: kv.value().to_vec(),
            });
        }
    }
}

/// The history of the namespace's objects after `after`, replayed: every delete with the
/// deleted document and the state of all keys just before it (a copy per delete: fine for
/// hundreds of objects; a replay of thousands tracks only what it checks).
pub struct Replay {
    /// `(revision, key, document before the delete, state before the delete)`.
    pub deletes: Vec<Delete>,
    /// key → revisions at which it was written (puts).
    pub puts: BTreeMap<String, Vec<(i64, Value)>>,
}

pub struct Delete {
    pub revision: i64,
    pub key: String,
    pub doc: Value,
    /// key → document, before this delete.
    pub before: BTreeMap<String, Value>,
}

impl Replay {
    /// `state` is what the keys of the range held at `after`.
    pub async fn read(client: &Client, ns: &str, after: i64) -> Replay {
        let state_at = client
            .clone()
            .get(
                "/registry/",
                Some(GetOptions::new().with_prefix().with_revision(after)),
            )
            .await
            .expect("state at the start");
        let mut state: BTreeMap<String, Value> = state_at
            .kvs()
            .iter()
            .filter(|kv| kv.key_str().unwrap().contains(&format!("/{ns}/")))
            .filter_map(|kv| {
                let doc = serde_json::from_slice(kv.value()).ok()?;
                Some((kv.key_str().unwrap().to_string(), doc))
            })
            .collect();
        let events: Vec<HistoryEvent> = read(
            client,
            "/registry/",
            "/registry0",
            after,
            "/registry/zz-sentinel",
        )
        .await
        .into_iter()
        .filter(|e| e.key.contains(&format!("/{ns}/")))
        .collect();
        let mut replay = Replay {
            deletes: Vec::new(),
            puts: BTreeMap::new(),
        };
        for event in events {
            if event.put {
                let doc: Value = serde_json::from_slice(&event.value).unwrap_or(Value::Null);
                replay
                    .puts
                    .entry(event.key.clone())
                    .or_default()
                    .push((event.revision, doc.clone()));
                state.insert(event.key, doc);
            } else if let Some(doc) = state.get(&event.key).cloned() {
                replay.deletes.push(Delete {
                    revision: event.revision,
                    key: event.key.clone(),
                    doc,
                    before: state.clone(),
                });
                state.remove(&event.key);
            }
        }
        replay
    }

    /// G1 and G4 for every delete of a key with owner references, and the apiserver's
    /// rule for the others: each GC delete found, at its revision, every owner of a kind
    /// kcm stores absent, another incarnation, or in a foreground deletion; an object
    /// without owners was deleted only with a deletionTimestamp (or by the test itself:
    /// `ours`).
    pub fn check_deletes(&self, ns: &str, ours: &BTreeSet<String>) {
        for d in &self.deletes {
            if ours.contains(&d.key) {
                continue;
            }
            let meta = &d.doc["metadata"];
            let owners = meta["ownerReferences"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if meta["deletionTimestamp"].is_string() {
                // The apiserver's part: only without finalizers.
                let finalizers = meta["finalizers"].as_array().map_or(0, Vec::len);
                assert_eq!(
                    finalizers, 0,
                    "{} deleted with finalizers at {}",
                    d.key, d.revision
                );
                continue;
            }
            assert!(
                !owners.is_empty() || is_terminated(&d.doc),
                "G4: {} has no owner references and no deletionTimestamp, yet was deleted at {}",
                d.key,
                d.revision
            );
            for owner in &owners {
                let dir = match owner["kind"].as_str() {
                    Some("ReplicaSet") => "replicasets",
                    Some("Deployment") => "deployments",
                    Some("ReplicationController") => "controllers",
                    Some("Pod") => "pods",
                    _ => continue,
                };
                let key = format!("/registry/{dir}/{ns}/{}", owner["name"].as_str().unwrap());
                let ok = match d.before.get(&key) {
                    None => true,
                    Some(found) => {
                        found["metadata"]["uid"] != owner["uid"]
                            || found["metadata"]["finalizers"]
                                .as_array()
                                .is_some_and(|f| f.contains(&json!("foregroundDeletion")))
                    }
                };
                assert!(
                    ok,
                    "G1: {} deleted at {} while its owner {key} lived: {}",
                    d.key, d.revision, d.before[&key]
                );
            }
        }
    }

    pub fn deleted(&self, key: &str) -> Option<i64> {
        self.deletes
            .iter()
            .find(|d| d.key == key)
            .map(|d| d.revision)
    }
}

/// A pod that ran to completion (`Succeeded` or `Failed`): terminated-pod collection may
/// delete it without owners.
pub fn is_terminated(doc: &Value) -> bool {
    matches!(
        doc["status"]["phase"].as_str(),
        Some("Failed" | "Succeeded")
    )
}
