//! The informers' list-and-watch through the API: client-go's reflector
//! (`tools/cache/reflector.go`) as a [`RemoteSource`] that yields `etcd_watcher`'s items,
//! so the informer's store, deltas and read-your-writes waits are the same code on either
//! backend.
//!
//! - A consistent list (`resourceVersion` unset), in pages of [`PAGE_SIZE`] with
//!   `continue`, every page at the first's resourceVersion; a page that fails (its
//!   continue token expired) drops the list and starts it over.
//! - A watch from the list's resourceVersion with `allowWatchBookmarks`, each object
//!   keyed as etcd would key it and converted to the stored shape; a bookmark is progress.
//! - A watch that ends (the server's timeout, a cut connection) is opened again from the
//!   last resourceVersion seen (an event's or a bookmark's), so nothing is lost or
//!   repeated; a 410 (that resourceVersion is compacted) lists again, and the informer
//!   diffs the new list against its store.
//! - A watch silent for longer than its timeout plus [`SILENCE_GRACE`] is taken as cut
//!   (a server that died without closing the connection).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use http::Request;
use kube::core::WatchEvent;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{group_path, jittered, stored_value, ApiClient, PREFIX, REQUEST_TIMEOUT};
use crate::apiserver::StoredKind;
use crate::etcd_watcher::{
    BackoffConfig, ListReason, RawEvent, RawItem, RawKind, RawWatch, Status, WatchMetrics,
};
use crate::informer::RemoteSource;

/// Objects per list page.
pub const PAGE_SIZE: usize = 2_000;

/// How long the server is asked to keep a watch open (`timeoutSeconds`).
const WATCH_TIMEOUT: Duration = Duration::from_secs(300);

/// How much longer than its timeout a silent watch is given before it is taken as cut.
const SILENCE_GRACE: Duration = Duration::from_secs(30);

/// Watch events taken from the connection into one batch.
const BATCH: usize = 256;

/// The informers' source through the API.
#[derive(Clone)]
pub struct ApiSource {
    client: ApiClient,
}

impl ApiSource {
    pub fn new(client: ApiClient) -> ApiSource {
        ApiSource { client }
    }
}

impl RemoteSource for ApiSource {
    fn prefix(&self) -> &str {
        PREFIX
    }

    fn list_watch(
        &self,
        resource: &'static str,
        directory: String,
        backoff: BackoffConfig,
        metrics: Arc<WatchMetrics>,
    ) -> RawWatch {
        let (tx, rx) = mpsc::channel(16);
        let namespace = namespace_of(resource, &directory);
        let reflector = Reflector {
            client: self.client.clone(),
            resource,
            namespace,
            directory,
            backoff,
            metrics,
            tx,
        };
        tokio::spawn(reflector.run());
        Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        }))
    }
}

/// Where a resource is served (in `namespace` only, or in all), and the stored kind its
/// objects convert to (`None` for one stored as served: Nodes, Namespaces, Leases).
fn served_resource(
    resource: &str,
    namespace: Option<&str>,
) -> Option<(String, Option<StoredKind>)> {
    let (group, kind) = match StoredKind::from_resource(resource) {
        Some(kind) => (group_path(kind.served_api_version()), Some(kind)),
        None => match resource {
            "nodes" | "namespaces" => ("/api/v1".to_string(), None),
            "leases" => ("/apis/coordination.k8s.io/v1".to_string(), None),
            _ => return None,
        },
    };
    let path = match namespace {
        Some(namespace) => format!("{group}/namespaces/{namespace}/{resource}"),
        None => format!("{group}/{resource}"),
    };
    Some((path, kind))
}

/// The one namespace an informer of a document resource follows, when its directory is a
/// namespace's (`{prefix}/{resource}/{namespace}/`, as the node Leases'); `None` for a
/// directory of every namespace (`{prefix}/{resource}/`), and for the typed kinds, whose
/// directories are their own layout (Services under `services/specs/`).
fn namespace_of(resource: &str, directory: &str) -> Option<String> {
    if StoredKind::from_resource(resource).is_some() {
        return None;
    }
    let rest = directory.strip_prefix(PREFIX)?.strip_prefix('/')?;
    let namespace = rest.strip_prefix(resource)?.strip_prefix('/')?;
    let namespace = namespace.strip_suffix('/')?;
    (!namespace.is_empty() && !namespace.contains('/')).then(|| namespace.to_string())
}

/// How a watch ended.
enum Ended {
    /// Its resourceVersion is too old: list again.
    Gone,
    /// Cut or timed out after delivering up to this revision: watch again from it.
    Cut {
        last: i64,
        reason: String,
        lived: Duration,
    },
    /// The informer is gone.
    Stopped,
}

struct Reflector {
    client: ApiClient,
    resource: &'static str,
    /// The one namespace followed, whose name the directory ends with; `None`: all.
    namespace: Option<String>,
    directory: String,
    backoff: BackoffConfig,
    metrics: Arc<WatchMetrics>,
    tx: mpsc::Sender<RawItem>,
}

impl Reflector {
    async fn run(self) {
        let Some((path, kind)) = served_resource(self.resource, self.namespace.as_deref()) else {
            let message = format!("{} cannot be listed through the API", self.resource);
            tracing::error!(resource = self.resource, "{message}");
            let _ = self.tx.send(RawItem::Ended(Status::gone(message))).await;
            return;
        };
        let mut delay = self.backoff.min;
        let mut revision: Option<i64> = None;
        let mut reason = ListReason::Initial;
        loop {
            let from = match revision {
                Some(from) => from,
                None => match self.list(&path, kind, reason).await {
                    Ok(Some(listed)) => {
                        self.metrics.relists.fetch_add(1, Ordering::Relaxed);
                        listed
                    }
                    Ok(None) => return,
                    Err(e) => {
                        self.metrics.set_disconnected(&path, &e);
                        tracing::warn!(resource = self.resource, error = %e, "list through the API failed; retrying");
                        if self.tx.send(RawItem::ListFailed).await.is_err() {
                            return;
                        }
                        tokio::time::sleep(jittered(delay)).await;
                        delay = (delay * 2).min(self.backoff.max);
                        continue;
                    }
                },
            };
            match self.watch(&path, kind, from).await {
                Ended::Stopped => return,
                Ended::Gone => {
                    tracing::info!(
                        resource = self.resource,
                        from,
                        "watch through the API: resourceVersion expired (410); listing again"
                    );
                    revision = None;
                    reason = ListReason::Compacted;
                }
                Ended::Cut {
                    last,
                    reason: why,
                    lived,
                } => {
                    self.metrics.set_disconnected(&path, &why);
                    self.metrics.restarts.fetch_add(1, Ordering::Relaxed);
                    revision = Some(last);
                    if lived >= self.backoff.reset_after || lived >= WATCH_TIMEOUT {
                        delay = self.backoff.min;
                    }
                    if lived < Duration::from_secs(1) {
                        tokio::time::sleep(jittered(delay)).await;
                        delay = (delay * 2).min(self.backoff.max);
                    }
                    let resumed = RawItem::Resumed {
                        from: last,
                        reason: why,
                    };
                    if self.tx.send(resumed).await.is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// Lists every object in pages; the list's revision, `None` once the informer is gone.
    async fn list(
        &self,
        path: &str,
        kind: Option<StoredKind>,
        reason: ListReason,
    ) -> Result<Option<i64>, String> {
        let mut revision = None;
        let mut next: Option<String> = None;
        loop {
            let mut query = format!("{path}?limit={PAGE_SIZE}");
            if let Some(token) = &next {
                query.push_str("&continue=");
                query.extend(form_urlencoded::byte_serialize(token.as_bytes()));
            }
            let mut page = self
                .client
                .request(http::Method::GET, &query, None, None)
                .await
                .map_err(|e| e.to_string())?;
            let page_revision = super::revision_of(&page);
            let revision = *revision.get_or_insert(page_revision);
            let items = match page.get_mut("items").map(Value::take) {
                Some(Value::Array(items)) => items,
                _ => Vec::new(),
            };
            let kvs = items
                .into_iter()
                .map(|item| self.raw(RawKind::Put, kind, item))
                .collect();
            if self.tx.send(RawItem::Page { kvs }).await.is_err() {
                return Ok(None);
            }
            next = page
                .pointer("/metadata/continue")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if next.is_none() {
                let listed = RawItem::Listed { reason, revision };
                return Ok(self.tx.send(listed).await.ok().map(|()| revision));
            }
        }
    }

    /// Watches from `from` until the watch ends.
    async fn watch(&self, path: &str, kind: Option<StoredKind>, from: i64) -> Ended {
        let opened = Instant::now();
        let cut = |last: i64, reason: String| Ended::Cut {
            last,
            reason,
            lived: opened.elapsed(),
        };
        let uri = format!(
            "{path}?watch=true&allowWatchBookmarks=true&resourceVersion={from}&timeoutSeconds={}",
            WATCH_TIMEOUT.as_secs()
        );
        let request = Request::get(uri).body(Vec::new()).expect("a valid request");
        let events = tokio::time::timeout(
            REQUEST_TIMEOUT,
            self.client.kube().request_events::<Value>(request),
        )
        .await;
        let events = match events {
            Err(_) => return cut(from, format!("no answer within {REQUEST_TIMEOUT:?}")),
            Ok(Err(kube::Error::Api(status))) if status.code == 410 => return Ended::Gone,
            Ok(Err(e)) => return cut(from, e.to_string()),
            Ok(Ok(events)) => events,
        };
        self.metrics.set_connected();
        let mut events = std::pin::pin!(events.ready_chunks(BATCH));
        let mut last = from;
        loop {
            let batch =
                match tokio::time::timeout(WATCH_TIMEOUT + SILENCE_GRACE, events.next()).await {
                    Err(_) => return cut(last, "the watch went silent".to_string()),
                    Ok(None) => return cut(last, "the server ended the watch".to_string()),
                    Ok(Some(batch)) => batch,
                };
            let mut raw = Vec::with_capacity(batch.len());
            let mut ended = None;
            for event in batch {
                let item = match event {
                    Ok(WatchEvent::Added(object) | WatchEvent::Modified(object)) => {
                        self.raw(RawKind::Put, kind, object)
                    }
                    Ok(WatchEvent::Deleted(object)) => self.raw(RawKind::Delete, kind, object),
                    Ok(WatchEvent::Bookmark(bookmark)) => {
                        if let Ok(rv) = bookmark.metadata.resource_version.parse::<i64>() {
                            last = last.max(rv);
                        }
                        continue;
                    }
                    Ok(WatchEvent::Error(status)) if status.code == 410 => {
                        ended = Some(Ended::Gone);
                        break;
                    }
                    Ok(WatchEvent::Error(status)) => {
                        ended = Some(cut(last, format!("{} {}", status.code, status.message)));
                        break;
                    }
                    Err(e) => {
                        ended = Some(cut(last, e.to_string()));
                        break;
                    }
                };
                last = last.max(item.mod_revision);
                raw.push(item);
            }
            let progress = raw.is_empty();
            let item = if progress {
                RawItem::Progress(last)
            } else {
                RawItem::Events(raw)
            };
            if self.tx.send(item).await.is_err() {
                return Ended::Stopped;
            }
            if let Some(ended) = ended {
                return match ended {
                    Ended::Cut { reason, lived, .. } => Ended::Cut {
                        last,
                        reason,
                        lived,
                    },
                    other => other,
                };
            }
        }
    }

    /// One served object as the etcd event it stands for.
    fn raw(&self, kind: RawKind, stored: Option<StoredKind>, object: Value) -> RawEvent {
        let (value, namespace, name, revision) = match stored {
            Some(stored) => stored_value(stored, object),
            None => {
                let revision = super::revision_of(&object);
                let text = |field: &str| {
                    object
                        .pointer(&format!("/metadata/{field}"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                let (namespace, name) = (text("namespace"), text("name"));
                (
                    serde_json::to_vec(&object).expect("JSON"),
                    namespace,
                    name,
                    revision,
                )
            }
        };
        let key = if namespace.is_empty() || self.namespace.is_some() {
            format!("{}{name}", self.directory)
        } else {
            format!("{}{namespace}/{name}", self.directory)
        };
        RawEvent {
            kind,
            key,
            value: if kind == RawKind::Delete {
                Vec::new()
            } else {
                value
            },
            create_revision: 0,
            mod_revision: revision,
            version: 0,
            prev: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_of_one_namespace_is_listed_and_watched_in_that_namespace() {
        assert_eq!(
            namespace_of("leases", "/registry/leases/kube-node-lease/"),
            Some("kube-node-lease".to_string())
        );
        assert_eq!(namespace_of("leases", "/registry/leases/"), None);
        assert_eq!(namespace_of("pods", "/registry/pods/"), None);
        assert_eq!(namespace_of("services", "/registry/services/specs/"), None);
        assert_eq!(
            namespace_of("endpoints", "/registry/services/endpoints/"),
            None
        );
        assert_eq!(namespace_of("nodes", "/registry/nodes/"), None);
        assert_eq!(namespace_of("leases", "/registry/leases/a/b/"), None);
        assert_eq!(
            served_resource("leases", Some("kube-node-lease")).map(|(path, _)| path),
            Some("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases".to_string())
        );
        assert_eq!(
            served_resource("nodes", None).map(|(path, _)| path),
            Some("/api/v1/nodes".to_string())
        );
        let (path, kind) = served_resource("replicasets", None).unwrap();
        assert_eq!(path, "/apis/apps/v1/replicasets");
        assert!(kind.is_some());
        assert!(served_resource("minions", None).is_none());
    }
}
