//! The 2014 translation of one etcd event into at most one watch event: the pure core of
//! `pkg/tools/etcd_tools_watch.go` (`sendAdd`, `sendModify`, `sendDelete`), table-tested
//! without etcd.

use std::fmt;

use etcd_client::EventType;
use serde::{Serialize, Serializer};

use super::event::WatchEvent;
use crate::api::{self, Object, ObjectMeta, ResourceVersion};
use crate::registry::DecodeError;

/// PUT or DELETE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawKind {
    Put,
    Delete,
}

/// One etcd watch event, reduced to what translation needs. Built once, at the
/// boundary, so that [`translate`] can be tested without etcd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawEvent {
    pub kind: RawKind,
    pub key: String,
    /// Empty for a DELETE.
    pub value: Vec<u8>,
    pub create_revision: i64,
    /// The revision of this event (of the delete, for a DELETE).
    pub mod_revision: i64,
    pub version: i64,
    /// The previous value and its `mod_revision`, when etcd sent one (`prev_kv`).
    pub prev: Option<(Vec<u8>, i64)>,
}

impl RawEvent {
    /// Converts an etcd-client event; `None` for an event without a key-value.
    pub fn from_etcd(event: &etcd_client::Event) -> Option<RawEvent> {
        let kv = event.kv()?;
        Some(RawEvent {
            kind: match event.event_type() {
                EventType::Put => RawKind::Put,
                EventType::Delete => RawKind::Delete,
            },
            key: String::from_utf8_lossy(kv.key()).into_owned(),
            value: kv.value().to_vec(),
            create_revision: kv.create_revision(),
            mod_revision: kv.mod_revision(),
            version: kv.version(),
            // etcd sends an empty prev_kv, or none, when the previous revision is
            // compacted.
            prev: event
                .prev_kv()
                .filter(|p| p.mod_revision() > 0)
                .map(|p| (p.value().to_vec(), p.mod_revision())),
        })
    }

    /// A stored key-value as read by a list: a PUT without a previous value.
    pub fn from_kv(kv: &etcd_client::KeyValue) -> RawEvent {
        RawEvent {
            kind: RawKind::Put,
            key: String::from_utf8_lossy(kv.key()).into_owned(),
            value: kv.value().to_vec(),
            create_revision: kv.create_revision(),
            mod_revision: kv.mod_revision(),
            version: kv.version(),
            prev: None,
        }
    }

    /// Whether etcd had a previous value for this event that it did not send: a delete,
    /// or a put that modified the key (a create has none).
    pub fn lacks_prev(&self) -> bool {
        self.prev.is_none() && (self.kind == RawKind::Delete || self.version > 1)
    }

    /// What `kcm watch --raw` prints: the etcd event an event came from.
    pub fn info(&self) -> RawInfo {
        RawInfo {
            kind: self.kind,
            key: self.key.clone(),
            create_revision: self.create_revision,
            mod_revision: self.mod_revision,
            version: self.version,
            has_prev: self.prev.is_some(),
        }
    }
}

/// The etcd-level facts about a delivered event (no values).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RawInfo {
    #[serde(serialize_with = "serialize_raw_kind")]
    pub kind: RawKind,
    pub key: String,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub version: i64,
    /// Whether etcd sent the previous value with the event.
    pub has_prev: bool,
}

fn serialize_raw_kind<S: Serializer>(kind: &RawKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match kind {
        RawKind::Put => "PUT",
        RawKind::Delete => "DELETE",
    })
}

impl fmt::Display for RawInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} create_revision={} mod_revision={} version={} prev_kv={}",
            match self.kind {
                RawKind::Put => "PUT",
                RawKind::Delete => "DELETE",
            },
            self.key,
            self.create_revision,
            self.mod_revision,
            self.version,
            if self.has_prev { "yes" } else { "no" }
        )
    }
}

/// What one raw event becomes.
#[derive(Debug, PartialEq)]
pub enum Translation<T> {
    Emit(WatchEvent<T>),
    /// Filtered out, or an event for the watched directory key itself.
    Nothing,
    /// The value did not decode; the event is skipped and the watch goes on.
    Undecodable(DecodeError),
    /// The key has more segments than the layout allows (`{dir}/{namespace}/{name}`):
    /// it is not an object of the kind, and is skipped as `get` and the manager skip it.
    BadKey,
}

/// Translates one etcd event with the 2014 rules (`sendAdd`, `sendModify`, `sendDelete`).
///
/// - PUT with `create_revision == mod_revision` → Added, if the object passes.
/// - other PUT → with the previous value: old and new pass → Modified(new); only new →
///   Added(new); only old → Deleted(old) stamped with the new revision; neither →
///   nothing. Without a previous value (compacted) → Modified(new) if new passes. A
///   previous value that does not decode counts as "did not pass", as in 2014.
/// - DELETE → Deleted(previous object, stamped with the delete's revision) if it
///   passes; without a previous value, Deleted of an object carrying only the name and
///   namespace from the key.
/// - Events for `watched_key` itself (the directory of a list watch) → nothing.
/// - A key deeper than `{dir}/{namespace}/{name}` → [`Translation::BadKey`]: never
///   translated into another object's name.
pub fn translate<T: Object>(
    prefix: &str,
    watched_key: Option<&str>,
    filter: &(dyn Fn(&T) -> bool + Send + Sync),
    raw: &RawEvent,
) -> Translation<T> {
    if watched_key == Some(raw.key.as_str()) {
        return Translation::Nothing;
    }
    if api::parse_key::<T>(prefix, &raw.key).is_none() {
        return Translation::BadKey;
    }
    let decode = |value: &[u8], revision: i64| {
        api::decode::<T>(prefix, &raw.key, value, revision)
            .map(|mut object| {
                api::remember_spec(&mut object);
                object
            })
            .map_err(|e| DecodeError {
                kind: T::KIND,
                key: raw.key.clone(),
                revision: raw.mod_revision,
                message: format!("{e:#}"),
            })
    };
    let stamp = |mut object: T, revision: i64| {
        object.metadata_mut().resource_version = Some(ResourceVersion(revision));
        object
    };
    match raw.kind {
        RawKind::Put => {
            let new = match decode(&raw.value, raw.mod_revision) {
                Ok(new) => new,
                Err(e) => return Translation::Undecodable(e),
            };
            let new_passes = filter(&new);
            if raw.create_revision == raw.mod_revision {
                return if new_passes {
                    Translation::Emit(WatchEvent::Added(new))
                } else {
                    Translation::Nothing
                };
            }
            let Some((prev_value, prev_revision)) = &raw.prev else {
                return if new_passes {
                    Translation::Emit(WatchEvent::Modified(new))
                } else {
                    Translation::Nothing
                };
            };
            let old = decode(prev_value, *prev_revision).ok();
            let old_passes = old.as_ref().is_some_and(filter);
            match (old_passes, new_passes) {
                (true, true) => Translation::Emit(WatchEvent::Modified(new)),
                (false, true) => Translation::Emit(WatchEvent::Added(new)),
                (true, false) => Translation::Emit(WatchEvent::Deleted(stamp(
                    old.expect("old passed the filter"),
                    raw.mod_revision,
                ))),
                (false, false) => Translation::Nothing,
            }
        }
        RawKind::Delete => match &raw.prev {
            Some((prev_value, prev_revision)) => match decode(prev_value, *prev_revision) {
                Ok(old) if filter(&old) => {
                    Translation::Emit(WatchEvent::Deleted(stamp(old, raw.mod_revision)))
                }
                Ok(_) => Translation::Nothing,
                Err(e) => Translation::Undecodable(e),
            },
            None => {
                let Some((namespace, name)) = api::parse_key::<T>(prefix, &raw.key) else {
                    return Translation::Nothing;
                };
                let mut object = T::default();
                *object.metadata_mut() = ObjectMeta::named(namespace, name);
                object.set_type_meta();
                Translation::Emit(WatchEvent::Deleted(stamp(object, raw.mod_revision)))
            }
        },
    }
}

/// Parses a watch resourceVersion: `""` or `"0"` mean "list first"; `N` means "events
/// after N" (2014's `ParseWatchResourceVersion`, which returned N + 1).
///
/// # Errors
/// When the string is not a non-negative integer.
pub fn parse_watch_resource_version(resource_version: &str) -> anyhow::Result<Option<i64>> {
    let trimmed = resource_version.trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    let rv: ResourceVersion = trimmed
        .parse()
        .map_err(|e| anyhow::anyhow!("invalid watch resourceVersion: {e}"))?;
    Ok((rv.0 > 0).then_some(rv.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Pod;
    use crate::etcd_watcher::Status;

    const PREFIX: &str = "/registry";
    const DIR: &str = "/registry/pods/";

    /// Pod `ns/p` labelled `app={app}`: in v3 the key fixes the name, so the 2014
    /// table's "name starts with b" filter becomes a label filter.
    fn pod_json(app: &str) -> Vec<u8> {
        format!(r#"{{"metadata":{{"name":"p","namespace":"ns","labels":{{"app":"{app}"}}}}}}"#)
            .into_bytes()
    }

    fn put(name: &str, create: i64, modified: i64, prev: Option<(&str, i64)>) -> RawEvent {
        RawEvent {
            kind: RawKind::Put,
            key: format!("{DIR}ns/p"),
            value: pod_json(name),
            create_revision: create,
            mod_revision: modified,
            version: 1,
            prev: prev.map(|(n, r)| (pod_json(n), r)),
        }
    }

    fn delete(key_name: &str, at: i64, prev: Option<(&str, i64)>) -> RawEvent {
        RawEvent {
            kind: RawKind::Delete,
            key: format!("{DIR}ns/{key_name}"),
            value: Vec::new(),
            create_revision: 0,
            mod_revision: at,
            version: 0,
            prev: prev.map(|(n, r)| (pod_json(n), r)),
        }
    }

    #[test]
    fn a_delete_or_a_modification_without_a_previous_value_lacks_one() {
        assert!(delete("p", 5, None).lacks_prev());
        assert!(!delete("p", 5, Some(("b", 4))).lacks_prev());
        // A create has no previous value to lack.
        assert!(!put("b", 3, 3, None).lacks_prev());
        let modified = |prev| RawEvent {
            version: 2,
            ..put("b", 3, 4, prev)
        };
        assert!(modified(None).lacks_prev());
        assert!(!modified(Some(("a", 3))).lacks_prev());
    }

    /// The 2014 test filter ("the name starts with b"), on the `app` label.
    fn starts_with_b(pod: &Pod) -> bool {
        pod.metadata
            .labels
            .get("app")
            .is_some_and(|app| app.starts_with('b'))
    }

    /// Translates `raw` and returns `TYPE app-label rv`, or "nothing"/"undecodable".
    #[track_caller]
    fn check(raw: RawEvent, expected: &str) {
        let got = match translate::<Pod>(PREFIX, Some(DIR), &starts_with_b, &raw) {
            Translation::Emit(event) => {
                let object = event.object().unwrap();
                format!(
                    "{} {} {}",
                    event.type_name(),
                    object
                        .metadata
                        .labels
                        .get("app")
                        .unwrap_or(object.metadata.name.as_str()),
                    object.metadata.resource_version.unwrap()
                )
            }
            Translation::Nothing => "nothing".to_string(),
            Translation::Undecodable(_) => "undecodable".to_string(),
            Translation::BadKey => "badkey".to_string(),
        };
        assert_eq!(got, expected, "for {raw:?}");
    }

    #[test]
    fn the_2014_translation_table_on_v3() {
        // create (create_revision == mod_revision)
        check(put("bar", 5, 5, None), "ADDED bar 5");
        check(put("foo", 5, 5, None), "nothing");
        // set/compareAndSwap with a previous value: the filter transition table
        check(put("bar", 5, 7, Some(("foo", 5))), "ADDED bar 7");
        check(put("foo", 5, 7, Some(("bar", 5))), "DELETED bar 7");
        check(put("baz", 5, 7, Some(("bar", 5))), "MODIFIED baz 7");
        check(put("foo", 5, 7, Some(("fob", 5))), "nothing");
        // without a previous value (compacted): Modified if the new object passes
        check(put("bar", 5, 7, None), "MODIFIED bar 7");
        check(put("foo", 5, 7, None), "nothing");
        // an empty previous value did not pass (2014 decoded only a non-empty one): Added
        let mut raw = put("bar", 5, 7, None);
        raw.prev = Some((Vec::new(), 5));
        check(raw, "ADDED bar 7");
        // delete: the previous object, stamped with the delete's revision
        check(delete("p", 9, Some(("bar", 7))), "DELETED bar 9");
        check(delete("p", 9, Some(("foo", 7))), "nothing");
        // delete without a previous value: a skeleton carrying the key's name
        check(delete("qux", 9, None), "DELETED qux 9");
    }

    #[test]
    fn the_watched_directory_key_itself_is_ignored() {
        let mut raw = put("bar", 5, 5, None);
        raw.key = DIR.to_string();
        check(raw, "nothing");
    }

    #[test]
    fn undecodable_values_are_reported_not_emitted() {
        let mut raw = put("bar", 5, 5, None);
        raw.value = b"{not json".to_vec();
        check(raw, "undecodable");
        // An undecodable previous value counts as "did not pass" (2014).
        let mut raw = put("bar", 5, 7, Some(("bar", 5)));
        raw.prev = Some((b"garbage".to_vec(), 5));
        check(raw, "ADDED bar 7");
    }

    #[test]
    fn watch_resource_version_rules() {
        assert_eq!(parse_watch_resource_version("").unwrap(), None);
        assert_eq!(parse_watch_resource_version("0").unwrap(), None);
        assert_eq!(parse_watch_resource_version("42").unwrap(), Some(42));
        assert!(parse_watch_resource_version("abc").is_err());
        assert!(parse_watch_resource_version("-3").is_err());
    }

    #[test]
    fn events_serialize_to_the_wire_form() {
        let pod: Pod = api::decode(PREFIX, "/registry/pods/ns/p", &pod_json("bar"), 3).unwrap();
        let json = serde_json::to_value(WatchEvent::Added(pod)).unwrap();
        assert_eq!(json["type"], "ADDED");
        assert_eq!(json["object"]["kind"], "Pod");
        assert_eq!(json["object"]["metadata"]["resourceVersion"], "3");
        let json = serde_json::to_value(WatchEvent::<Pod>::Error(Status::gone("too old"))).unwrap();
        assert_eq!(json["type"], "ERROR");
        assert_eq!(json["object"]["code"], 410);
        assert_eq!(json["object"]["kind"], "Status");
    }

    #[test]
    fn an_error_event_is_a_failure_status_carrying_the_etcd_error() {
        // 2014: `api.Status{Status: Failure, Message: err.Error()}` in an ERROR event.
        let event = WatchEvent::<Pod>::Error(Status::internal("etcdserver: request timed out"));
        assert_eq!(
            serde_json::to_value(event).unwrap(),
            serde_json::json!({
                "type": "ERROR",
                "object": {
                    "kind": "Status",
                    "apiVersion": api::API_VERSION,
                    "status": "Failure",
                    "message": "etcdserver: request timed out",
                    "reason": "InternalError",
                    "code": 500
                }
            })
        );
    }

    #[test]
    fn keys_deeper_than_a_name_are_never_another_object() {
        let mut raw = put("bar", 5, 5, None);
        raw.key = format!("{DIR}ns/x/p");
        check(raw, "badkey");
        check(delete("x/p", 9, None), "badkey");
    }
}
