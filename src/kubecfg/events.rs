//! The `Events:` section of `kcm describe`, as kubectl's `DescribeEvents` prints it: the
//! events (`record`) whose `involvedObject.uid` is the described object's, oldest last
//! seen first, with `Age` the time since the last one and, for one seen several times,
//! `(xN over D)`.
//!
//! Best effort, like the events themselves: events that cannot be read leave the section
//! out rather than fail the describe.

use std::time::SystemTime;

use serde_json::Value;

use crate::record::EVENTS_DIR;
use crate::registry::Registry;

use super::print::{age, render_tabbed};

/// The events of namespace `namespace` about the object with `uid`, as stored; `None`
/// when they cannot be read.
pub(super) async fn read(registry: &Registry, namespace: &str, uid: &str) -> Option<Vec<Value>> {
    let prefix = format!("{}/{EVENTS_DIR}/{namespace}/", registry.prefix());
    let mut events = Vec::new();
    registry
        .for_each_page(&prefix, None, |kvs| {
            events.extend(
                kvs.iter()
                    .filter_map(|kv| serde_json::from_slice::<Value>(kv.value()).ok())
                    .filter(|event| {
                        !uid.is_empty()
                            && event.pointer("/involvedObject/uid") == Some(&Value::from(uid))
                    }),
            );
        })
        .await
        .ok()?;
    Some(events)
}

/// The section: `Events:  <none>`, or kubectl's table under `Events:`.
pub(super) fn events_text(events: &[Value], now: SystemTime) -> String {
    if events.is_empty() {
        return "Events:  <none>\n".to_string();
    }
    let mut events: Vec<&Value> = events.iter().collect();
    let last_seen = |event: &Value| text(event, "lastTimestamp").to_string();
    events.sort_by_key(|event| last_seen(event));
    let rows: Vec<Vec<String>> = events
        .iter()
        .map(|event| {
            let last = event.get("lastTimestamp").and_then(Value::as_str);
            let mut seen = age(last, now);
            let count = event.get("count").and_then(Value::as_i64).unwrap_or(1);
            if count > 1 {
                let first = event.get("firstTimestamp").and_then(Value::as_str);
                seen = format!("{seen} (x{count} over {})", age(first, now));
            }
            vec![
                text(event, "type").to_string(),
                text(event, "reason").to_string(),
                seen,
                event
                    .pointer("/source/component")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                text(event, "message").trim_end().to_string(),
            ]
        })
        .collect();
    const HEADERS: [&str; 5] = ["Type", "Reason", "Age", "From", "Message"];
    // kubectl's row of dashes under the names (`----` under `Age` too).
    let underline = ["----", "------", "----", "----", "-------"]
        .map(String::from)
        .to_vec();
    let rows: Vec<Vec<String>> = std::iter::once(underline).chain(rows).collect();
    let mut out = String::from("Events:\n");
    for line in render_tabbed(&HEADERS, &rows).lines() {
        out.push_str(&format!("  {line}\n"));
    }
    out
}

fn text<'a>(event: &'a Value, field: &str) -> &'a str {
    event.get(field).and_then(Value::as_str).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    #[test]
    fn no_events_is_none() {
        assert_eq!(
            events_text(&[], SystemTime::UNIX_EPOCH),
            "Events:  <none>\n"
        );
    }

    #[test]
    fn events_print_oldest_first_with_their_counts() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_100);
        let event = |reason: &str, first: &str, last: &str, count: i64, message: &str| {
            json!({"type": "Normal", "reason": reason, "firstTimestamp": first,
                   "lastTimestamp": last, "count": count,
                   "source": {"component": "replicaset-controller"}, "message": message})
        };
        let text = events_text(
            &[
                event(
                    "SuccessfulCreate",
                    "2027-01-15T08:00:40Z",
                    "2027-01-15T08:01:30Z",
                    16,
                    "(combined from similar events): Created pod: web-x",
                ),
                event(
                    "ScalingReplicaSet",
                    "2027-01-15T08:00:00Z",
                    "2027-01-15T08:00:00Z",
                    1,
                    "Scaled up\n",
                ),
            ],
            now,
        );
        assert_eq!(
            text,
            "Events:\n\
             \x20 Type    Reason             Age                From                   Message\n\
             \x20 ----    ------             ----               ----                   -------\n\
             \x20 Normal  ScalingReplicaSet  1m                 replicaset-controller  Scaled up\n\
             \x20 Normal  SuccessfulCreate   10s (x16 over 1m)  replicaset-controller  (combined from similar events): Created pod: web-x\n"
        );
    }
}
