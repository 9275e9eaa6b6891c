//! Watch events as the 2014 apiserver served them: `watch.Event` (ADDED, MODIFIED,
//! DELETED, ERROR), `api.Status` for errors, and filters.

use std::fmt;
use std::sync::Arc;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::api::{self, Object};
use crate::labels::Selector;

/// `api.Status` as carried by an ERROR event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// HTTP-style code: 410 when the requested revision was compacted, 500 otherwise.
    pub code: u16,
    /// `Expired` (410) or `InternalError`.
    pub reason: &'static str,
    pub message: String,
}

impl Status {
    /// 410: the requested resourceVersion has been compacted away; list again.
    pub fn gone(message: impl Into<String>) -> Status {
        Status {
            code: 410,
            reason: "Expired",
            message: message.into(),
        }
    }

    /// 500: any other etcd failure.
    pub fn internal(message: impl Into<String>) -> Status {
        Status {
            code: 500,
            reason: "InternalError",
            message: message.into(),
        }
    }

    /// True for the 410 "resourceVersion too old" status.
    pub fn is_gone(&self) -> bool {
        self.code == 410
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl Serialize for Status {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Status", 6)?;
        s.serialize_field("kind", "Status")?;
        s.serialize_field("apiVersion", api::API_VERSION)?;
        s.serialize_field("status", "Failure")?;
        s.serialize_field("message", &self.message)?;
        s.serialize_field("reason", self.reason)?;
        s.serialize_field("code", &self.code)?;
        s.end()
    }
}

/// `watch.Event`. Serialized as the Kubernetes wire form `{"type":"ADDED","object":{..}}`.
#[derive(Clone, Debug, PartialEq)]
pub enum WatchEvent<T> {
    Added(T),
    Modified(T),
    /// The last state of the object, stamped with the revision of the delete.
    Deleted(T),
    /// The watch failed; the stream ends after this event.
    Error(Status),
}

impl<T: Object> WatchEvent<T> {
    /// `ADDED`, `MODIFIED`, `DELETED` or `ERROR`.
    pub fn type_name(&self) -> &'static str {
        match self {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Error(_) => "ERROR",
        }
    }

    /// The object, for every type but Error.
    pub fn object(&self) -> Option<&T> {
        match self {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => Some(o),
            WatchEvent::Error(_) => None,
        }
    }

    /// The revision the event happened at (the object's resourceVersion).
    pub fn revision(&self) -> Option<i64> {
        self.object()
            .and_then(|o| o.metadata().resource_version)
            .map(|rv| rv.0)
    }
}

impl<T: Object> Serialize for WatchEvent<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("WatchEvent", 2)?;
        s.serialize_field("type", self.type_name())?;
        match self {
            WatchEvent::Error(status) => s.serialize_field("object", status)?,
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                // Objects are emitted with their kind and apiVersion, as on the wire.
                let mut o = o.clone();
                o.set_type_meta();
                s.serialize_field("object", &o)?
            }
        }
        s.end()
    }
}

/// A filter: `true` keeps the object (2014's `FilterFunc`).
pub type Filter<T> = Arc<dyn Fn(&T) -> bool + Send + Sync>;

/// The filter that keeps everything (2014's `Everything`).
pub fn everything<T>() -> Filter<T> {
    Arc::new(|_| true)
}

/// A label selector as a filter.
pub fn selector_filter<T: Object>(selector: Selector) -> Filter<T> {
    if selector.is_empty() {
        return everything();
    }
    Arc::new(move |object: &T| selector.matches(&object.metadata().labels))
}
