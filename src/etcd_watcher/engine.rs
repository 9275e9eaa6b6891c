//! The one list-and-watch engine. Every watch in kcm is this state machine over one etcd
//! range: the 2014 one-shot stream ([`super::WatchStream`]), the typed resumable watch
//! ([`super::ResumableWatch`]) and the informers (`crate::informer`).
//!
//! It yields raw items ([`RawItem`]): list pages, the end of a list, watch events as etcd
//! sent them, progress, resumes, and (when it does not resume) one typed end. Its states
//! are an explicit enum, as in kube-runtime's `watcher()`:
//!
//! ```text
//!   Listing ──last page──► Listed ──► Opening ──► Watching ──fails──► Waiting
//!      ▲                                ▲                               │
//!      └──── compacted, rewound ────────┴──────── resume ───────────────┘
//! ```
//!
//! The stream is `futures::stream::unfold` over [`Engine::step`]: the step in flight
//! lives inside the stream, so polling it from a `select!` arm is cancel-safe.
//!
//! Invariants:
//! - the revisions it reports never go backwards, except after it has said that etcd's
//!   revision went backwards (a restored or replaced store), when it lists from scratch;
//! - a watch resumes from the highest revision it has reported, so no event is repeated
//!   and none is skipped;
//! - after a dropped connection it re-opens as soon as etcd answers (within a second,
//!   however often the connection dropped before); only an etcd that answers and refuses
//!   gets the growing backoff;
//! - a watch whose connections keep ending within seconds is *looping* (`stability`
//!   holds the rule): one warning when it starts, one line when it is stable again, and
//!   [`WatchMetrics::looping`] for `/metrics` and `/healthz` meanwhile.

mod backoff;
mod items;
mod machine;
mod metrics;
mod stability;

pub use backoff::BackoffConfig;
pub use items::{ListReason, RawItem, RawWatch};
pub(crate) use items::{Range, Start};
pub use machine::fill_missing_prev;
pub(crate) use machine::{Engine, EngineConfig};
pub use metrics::WatchMetrics;
pub use stability::{LoopReport, LOOP_RESTARTS, SHORT_LIVED};
