//! What the engine watches (a [`Range`] from a [`Start`]) and what it yields ([`RawItem`]).

use std::pin::Pin;

use futures::Stream;

use crate::api::{self, Object};
use crate::etcd_watcher::event::Status;
use crate::etcd_watcher::translate::RawEvent;
use crate::registry;

/// The key range a list or object watch covers.
#[derive(Clone, Debug)]
pub(crate) struct Range {
    /// First key of the range (the list prefix, or the object key).
    pub start: String,
    /// End of the range (exclusive).
    pub end: Vec<u8>,
    /// The directory key a list watch ignores events for.
    pub watched_key: Option<String>,
}

impl Range {
    pub fn list<T: Object>(prefix: &str, namespace: Option<&str>) -> Range {
        let start = api::list_key::<T>(prefix, namespace);
        Range {
            end: registry::prefix_range_end(start.as_bytes()),
            watched_key: Some(start.clone()),
            start,
        }
    }

    pub fn object<T: Object>(prefix: &str, namespace: &str, name: &str) -> Range {
        Range::key(api::object_key::<T>(prefix, namespace, name))
    }

    /// Exactly the key `key` (a document that is not a typed kind, such as a Node).
    pub fn key(key: String) -> Range {
        let mut end = key.clone().into_bytes();
        end.push(0);
        Range {
            start: key,
            end,
            watched_key: None,
        }
    }
}

/// Where a watch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// List at the current revision, then watch after it.
    List,
    /// Watch the events after this revision.
    After(i64),
    /// Read the state at this revision (without delivering it as events), then watch the
    /// events after it: what a resume from a caller's resourceVersion needs, so that a
    /// later relist can be diffed against what the caller holds.
    StateAt(i64),
}

/// Why the engine lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListReason {
    /// The first list of a watch from `""`.
    Initial,
    /// The state at the caller's resourceVersion ([`Start::StateAt`]).
    StateAt,
    /// The revision to resume from has been compacted.
    Compacted,
    /// etcd's revision went backwards, or its cluster changed.
    Rewound,
}

/// What the engine yields.
#[derive(Debug)]
pub enum RawItem {
    /// A page of a list; every page of one list is read at the same revision.
    Page { kvs: Vec<RawEvent> },
    /// The list is complete: the pages hold the whole range at `revision`.
    Listed { reason: ListReason, revision: i64 },
    /// A list failed part-way: drop its pages; it starts over.
    ListFailed,
    /// The events of one watch response, in revision order.
    Events(Vec<RawEvent>),
    /// Every event up to this revision has been delivered.
    Progress(i64),
    /// The watch was re-opened after the revision `from`, after `reason`.
    Resumed { from: i64, reason: String },
    /// The watch ended (only without resume, or when the caller's start revision is
    /// compacted); nothing follows.
    Ended(Status),
}

/// The engine's stream.
pub type RawWatch = Pin<Box<dyn Stream<Item = RawItem> + Send>>;
