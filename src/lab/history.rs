//! The lab's figures from etcd's own record: every event under the lab's prefix after a
//! revision ([`Lab::history`]), and a count's course over them ([`course`]).

use std::time::Duration;

use anyhow::Context as _;
use etcd_client::{EventType, WatchOptions};

use super::Lab;

/// One etcd event of the lab's history.
#[derive(Debug, Clone)]
pub(super) struct Event {
    pub(super) key: String,
    /// The revision of the write.
    pub(super) revision: i64,
    pub(super) put: bool,
    /// A PUT that created the key.
    pub(super) created: bool,
}

/// A count's course over etcd's history from revision `from` to `end`: `start` at 0, then
/// `step` at each of `events` (x: revisions since `from`), held to `end`. Returns the
/// final count and the points.
pub(super) fn course<'e>(
    from: i64,
    end: i64,
    start: i64,
    events: impl Iterator<Item = &'e Event>,
    step: impl Fn(&Event, i64) -> i64,
) -> (f64, Vec<(f64, f64)>) {
    let mut n = start;
    let mut points = vec![(0.0, n as f64)];
    for event in events {
        n = step(event, n);
        points.push(((event.revision - from) as f64, n as f64));
    }
    points.push(((end - from) as f64, n as f64));
    (n as f64, points)
}

impl Lab {
    /// Every event under the lab's prefix after revision `after`, up to now, read from
    /// etcd's history with a watch. "Now" is a sentinel key written under the prefix.
    /// Returns the events and the sentinel's revision.
    pub(super) async fn history(&self, after: i64) -> anyhow::Result<(Vec<Event>, i64)> {
        let sentinel = format!("{}/~history-end", self.root);
        let now = self
            .client
            .kv_client()
            .put(sentinel.as_str(), "end", None)
            .await
            .context("write the history sentinel")?
            .header()
            .context("put header")?
            .revision();
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(after + 1);
        let mut stream = self
            .client
            .watch_client()
            .watch(format!("{}/", self.root), Some(options))
            .await
            .context("watch the lab's history")?;
        let mut events = Vec::new();
        loop {
            let response = tokio::time::timeout(Duration::from_secs(30), stream.message())
                .await
                .context("the lab's history did not arrive within 30s")?
                .context("history watch")?
                .context("history watch closed")?;
            anyhow::ensure!(!response.canceled(), "history watch canceled");
            for event in response.events() {
                let Some(kv) = event.kv() else { continue };
                let key = String::from_utf8_lossy(kv.key()).into_owned();
                if key == sentinel && kv.mod_revision() == now {
                    return Ok((events, now));
                }
                let put = event.event_type() == EventType::Put;
                events.push(Event {
                    revision: kv.mod_revision(),
                    created: put && kv.create_revision() == kv.mod_revision(),
                    key,
                    put,
                });
            }
        }
    }
}
