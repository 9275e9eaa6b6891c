//! etcd's own history of a key range, read with a watch from a past revision, so that the
//! tests can check what was written without anything a poller could miss.

use std::time::Duration;

use etcd_client::{Client, EventType, WatchOptions};

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
