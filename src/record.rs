//! Events: what the controllers, the scheduler and the kubelets tell people about the
//! objects they act on (`SuccessfulCreate`, `ScalingReplicaSet`, `Scheduled`, `Started`),
//! stored where `kubectl describe` and `kubectl get events -w` find them.
//!
//! Mirrors 2014's `pkg/client/record/event.go` (`EventRecorder`, `Eventf`,
//! `StartRecording` writing to the apiserver) as client-go grew it
//! (`tools/record/event.go`: the broadcaster, `makeEvent`, `recordToSink`; and
//! `events_cache.go`: the correlator, in [`correlator`]). kcm has no apiserver between the
//! controllers and etcd, so the sink ([`sink`]) writes each event's core/v1 JSON to
//! `{prefix}/events/{namespace}/{name}` itself, attached to an etcd lease of an hour, as
//! kube-apiserver does with `--event-ttl` (1 h).
//!
//! Invariants:
//! - recording never blocks and never fails the caller: [`Recorder::event`] puts the
//!   event on a bounded queue ([`QUEUE_LENGTH`], client-go's `maxQueuedEvents`) and drops
//!   it, counted, when the queue is full, so a sync never waits on an event;
//! - what is written is bounded per source and object by the correlator (a burst of 25,
//!   then one every five minutes), and similar events are combined with a count, so a
//!   10,000-pod scale-up writes a few dozen events, not 10,000;
//! - every event written carries a lease: none outlives its hour (plus at most a minute,
//!   the window a lease is shared in), even when no kcm process runs any more.

mod correlator;
mod sink;
pub(crate) use sink::EventLeases;

use std::time::{Duration, SystemTime};

use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use crate::api::Object;

pub use correlator::{Correlated, Correlator, COMBINED_PREFIX};
pub use sink::{EventTarget, EVENT_TTL, LEASE_REUSE};

/// The directory events are stored under: `{prefix}/events/{namespace}/{name}`.
pub const EVENTS_DIR: &str = "events";

/// Events waiting to be written, at most (client-go's `maxQueuedEvents`); more are
/// dropped.
pub const QUEUE_LENGTH: usize = 1000;

/// `Normal` or `Warning`, the event's `type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Who records: the event's `source` (`component`, and `host` for a kubelet), also its
/// `reportingComponent` and `reportingInstance`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub component: String,
    pub host: Option<String>,
}

impl Source {
    pub fn new(component: &str, host: Option<String>) -> Source {
        Source {
            component: component.to_string(),
            host,
        }
    }
}

/// The object an event is about: its `involvedObject` (core/v1 `ObjectReference`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    pub kind: String,
    /// The served apiVersion (`v1`, `apps/v1`).
    pub api_version: String,
    /// Empty for a cluster-scoped object (a Node).
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
}

impl Reference {
    /// A reference to a typed kcm object, in the version the API serves it.
    pub fn of<T: Object>(object: &T) -> Reference {
        let meta = object.metadata();
        Reference {
            kind: T::KIND.to_string(),
            api_version: served_api_version(T::API_VERSION).to_string(),
            namespace: meta.namespace.clone(),
            name: meta.name.clone(),
            uid: meta.uid.clone(),
            resource_version: meta
                .resource_version
                .map(|rv| rv.0.to_string())
                .unwrap_or_default(),
        }
    }

    /// A reference to a Node (cluster-scoped, core/v1).
    pub fn node(name: &str, uid: &str) -> Reference {
        Reference {
            kind: "Node".into(),
            api_version: "v1".into(),
            namespace: String::new(),
            name: name.to_string(),
            uid: uid.to_string(),
            resource_version: String::new(),
        }
    }

    /// The name of a new event about this object at `now`: client-go's
    /// `fmt.Sprintf("%v.%x", ref.Name, t.UnixNano())`.
    pub fn event_name(&self, now: Duration) -> String {
        format!("{}.{:x}", self.name, now.as_nanos())
    }
}

/// The apiVersion a stored kind is served in: apps kinds as stored, core kinds as `v1`.
fn served_api_version(stored: &str) -> &str {
    if stored.contains('/') {
        stored
    } else {
        "v1"
    }
}

/// One event, as recorded and as correlated. Times are since the Unix epoch.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Its namespace: the object's, or `default` for a cluster-scoped object.
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub involved: Reference,
    pub event_type: EventType,
    pub reason: String,
    pub message: String,
    pub source: Source,
    pub count: i64,
    pub first_timestamp: Duration,
    pub last_timestamp: Duration,
    pub creation_timestamp: Duration,
}

impl Event {
    /// A new event (client-go's `makeEvent`): count 1, first and last seen `now`.
    pub fn new(
        source: &Source,
        involved: Reference,
        event_type: EventType,
        reason: &str,
        message: String,
        now: Duration,
    ) -> Event {
        let namespace = if involved.namespace.is_empty() {
            "default".to_string()
        } else {
            involved.namespace.clone()
        };
        Event {
            namespace,
            name: involved.event_name(now),
            // Given when it is first written (`Correlator`): most recorded events are
            // combined into, or counted on, an earlier one and never need their own.
            uid: String::new(),
            involved,
            event_type,
            reason: reason.to_string(),
            message,
            source: source.clone(),
            count: 1,
            first_timestamp: now,
            last_timestamp: now,
            creation_timestamp: now,
        }
    }

    /// What the event shares with similar ones (client-go's
    /// `EventAggregatorByReasonFunc`): everything but the message; `spam_key` is
    /// [`Event::spam_key`].
    fn aggregate_key(&self, spam_key: &str) -> String {
        [spam_key, self.event_type.as_str(), &self.reason].join("\n")
    }

    /// What makes two events the same one (client-go's `getEventKey`), from its
    /// [`Event::aggregate_key`].
    fn event_key(&self, aggregate_key: &str) -> String {
        [aggregate_key, &self.message].join("\n")
    }

    /// The spam filter's bucket: the source and the object (client-go's `getSpamKey`).
    fn spam_key(&self) -> String {
        let r = &self.involved;
        [
            self.source.component.as_str(),
            self.source.host.as_deref().unwrap_or(""),
            &r.kind,
            &r.namespace,
            &r.name,
            &r.uid,
            &r.api_version,
        ]
        .join("\n")
    }

    /// The core/v1 Event document, as stored and served.
    pub fn to_json(&self) -> Value {
        let r = &self.involved;
        let mut involved = Map::new();
        involved.insert("kind".into(), json!(r.kind));
        if !r.namespace.is_empty() {
            involved.insert("namespace".into(), json!(r.namespace));
        }
        involved.insert("name".into(), json!(r.name));
        if !r.uid.is_empty() {
            involved.insert("uid".into(), json!(r.uid));
        }
        involved.insert("apiVersion".into(), json!(r.api_version));
        if !r.resource_version.is_empty() {
            involved.insert("resourceVersion".into(), json!(r.resource_version));
        }
        let mut source = Map::new();
        source.insert("component".into(), json!(self.source.component));
        if let Some(host) = &self.source.host {
            source.insert("host".into(), json!(host));
        }
        json!({
            "kind": "Event",
            "apiVersion": "v1",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "creationTimestamp": rfc3339(self.creation_timestamp),
            },
            "involvedObject": involved,
            "reason": self.reason,
            "message": self.message,
            "source": source,
            "firstTimestamp": rfc3339(self.first_timestamp),
            "lastTimestamp": rfc3339(self.last_timestamp),
            "count": self.count,
            "type": self.event_type.as_str(),
            "eventTime": null,
            "reportingComponent": self.source.component,
            "reportingInstance": self.source.host.as_deref().unwrap_or(""),
        })
    }
}

fn rfc3339(since_epoch: Duration) -> String {
    humantime::format_rfc3339_seconds(SystemTime::UNIX_EPOCH + since_epoch).to_string()
}

/// Now, since the Unix epoch.
fn epoch_now() -> Duration {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
}

/// The process's event writer: hands out [`Recorder`]s, whose events one background task
/// correlates and writes ([`EventBroadcaster::start`]). Cheap to clone.
#[derive(Clone)]
pub struct EventBroadcaster {
    queue_tx: Option<mpsc::Sender<Event>>,
    counts: sink::Counts,
}

impl EventBroadcaster {
    /// Starts writing events to `{prefix}/events/` on `client`. The writer stops once the
    /// broadcaster and every recorder are dropped and the queue is drained; await the
    /// returned handle (bounded) to flush at shutdown.
    pub fn start(
        client: &etcd_client::Client,
        prefix: &str,
        counts: sink::Counts,
    ) -> (EventBroadcaster, tokio::task::JoinHandle<()>) {
        let (queue_tx, queue_rx) = mpsc::channel(QUEUE_LENGTH);
        let writer = sink::Sink::new(client, prefix, counts.clone());
        let handle = tokio::spawn(writer.run(queue_rx));
        let broadcaster = EventBroadcaster {
            queue_tx: Some(queue_tx),
            counts,
        };
        (broadcaster, handle)
    }

    /// Starts writing events to `target` (a Kubernetes API server) instead of etcd; as
    /// [`EventBroadcaster::start`] otherwise.
    pub fn start_remote(
        target: std::sync::Arc<dyn sink::EventTarget>,
        counts: sink::Counts,
    ) -> (EventBroadcaster, tokio::task::JoinHandle<()>) {
        let (queue_tx, queue_rx) = mpsc::channel(QUEUE_LENGTH);
        let writer = sink::Sink::remote(target, counts.clone());
        let handle = tokio::spawn(writer.run(queue_rx));
        let broadcaster = EventBroadcaster {
            queue_tx: Some(queue_tx),
            counts,
        };
        (broadcaster, handle)
    }

    /// A broadcaster whose recorders write nothing (unit tests).
    pub fn discard() -> EventBroadcaster {
        EventBroadcaster {
            queue_tx: None,
            counts: sink::Counts::default(),
        }
    }

    /// A recorder for `component` (and `host`, a kubelet's node).
    pub fn recorder(&self, component: &str, host: Option<String>) -> Recorder {
        Recorder {
            queue_tx: self.queue_tx.clone(),
            source: Source::new(component, host),
            counts: self.counts.clone(),
        }
    }

    /// Lets the writer finish what is queued, for at most `limit`, once every recorder
    /// is gone (call it after the components using them stopped).
    pub async fn flush(self, writer: tokio::task::JoinHandle<()>, limit: Duration) {
        drop(self);
        if tokio::time::timeout(limit, writer).await.is_err() {
            tracing::debug!(
                ?limit,
                "events: the writer did not finish in time; queued events dropped"
            );
        }
    }
}

/// Records events for one source. Cheap to clone; [`Recorder::discard`] records nothing.
#[derive(Clone)]
pub struct Recorder {
    queue_tx: Option<mpsc::Sender<Event>>,
    source: Source,
    counts: sink::Counts,
}

impl Default for Recorder {
    fn default() -> Recorder {
        Recorder::discard()
    }
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("source", &self.source)
            .field("enabled", &self.queue_tx.is_some())
            .finish()
    }
}

impl Recorder {
    /// A recorder that writes nothing (tests, the lab's 2014 loop, benchmarks' baselines).
    pub fn discard() -> Recorder {
        Recorder {
            queue_tx: None,
            source: Source::new("", None),
            counts: sink::Counts::default(),
        }
    }

    /// Records a `Normal` event.
    pub fn normal(&self, object: Reference, reason: &str, message: String) {
        self.event(object, EventType::Normal, reason, message);
    }

    /// Records a `Warning` event.
    pub fn warning(&self, object: Reference, reason: &str, message: String) {
        self.event(object, EventType::Warning, reason, message);
    }

    /// Records an event about `object` (client-go's `Event`): queued, never waited for;
    /// dropped, and counted, when the queue is full.
    pub fn event(&self, object: Reference, event_type: EventType, reason: &str, message: String) {
        let Some(queue_tx) = &self.queue_tx else {
            return;
        };
        let event = Event::new(
            &self.source,
            object,
            event_type,
            reason,
            message,
            epoch_now(),
        );
        match queue_tx.try_send(event) {
            Ok(()) => self.counts.recorded(),
            Err(_) => self.counts.dropped(),
        }
    }
}

pub use sink::Counts;

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> Reference {
        Reference {
            kind: "Pod".into(),
            api_version: "v1".into(),
            namespace: "default".into(),
            name: name.into(),
            uid: "u".into(),
            resource_version: String::new(),
        }
    }

    #[tokio::test]
    async fn a_full_queue_drops_the_event_and_returns_at_once() {
        // A writer that never drains: what a stalled etcd looks like from the recorder.
        let (queue_tx, _queue_rx) = mpsc::channel(QUEUE_LENGTH);
        let broadcaster = EventBroadcaster {
            queue_tx: Some(queue_tx),
            counts: Counts::default(),
        };
        let recorder = broadcaster.recorder("kubelet", Some("node-1".into()));
        for i in 0..QUEUE_LENGTH + 10 {
            recorder.normal(
                pod(&format!("p{i}")),
                "Started",
                "Started container c".into(),
            );
        }
        assert_eq!(broadcaster.counts.get("recorded"), QUEUE_LENGTH as u64);
        assert_eq!(broadcaster.counts.get("dropped"), 10);
    }

    #[test]
    fn an_event_is_the_core_v1_document_kubectl_reads() {
        let now = Duration::from_secs(1_800_000_000);
        let node = Reference::node("node-1", "n-uid");
        let event = Event::new(
            &Source::new("node-controller", None),
            node,
            EventType::Normal,
            "NodeNotReady",
            "Node node-1 status is now: NodeNotReady".into(),
            now,
        );
        let json = event.to_json();
        assert_eq!(json["metadata"]["namespace"], "default", "a Node's events");
        assert_eq!(
            json["metadata"]["name"],
            format!("node-1.{:x}", now.as_nanos())
        );
        assert_eq!(json["involvedObject"]["kind"], "Node");
        assert!(json["involvedObject"].get("namespace").is_none());
        assert_eq!(json["firstTimestamp"], "2027-01-15T08:00:00Z");
        assert_eq!(json["lastTimestamp"], json["firstTimestamp"]);
        assert_eq!(json["count"], 1);
        assert_eq!(json["type"], "Normal");
        assert_eq!(
            json["source"],
            serde_json::json!({"component": "node-controller"})
        );
        assert_eq!(json["reportingComponent"], "node-controller");
    }

    #[test]
    fn a_reference_names_the_served_version() {
        let mut rc = crate::api::ReplicationController::default();
        rc.metadata.name = "web".into();
        rc.metadata.namespace = "default".into();
        let reference = Reference::of(&rc);
        assert_eq!(
            (reference.kind.as_str(), reference.api_version.as_str()),
            ("ReplicationController", "v1")
        );
        let rs = crate::api::ReplicaSet::default();
        assert_eq!(Reference::of(&rs).api_version, "apps/v1");
    }
}
