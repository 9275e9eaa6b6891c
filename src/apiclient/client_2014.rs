//! The 2014 replication manager (`replication_2014`) in its 2014 place: its `kubeClient`
//! and `RealPodControl` as requests to an apiserver, as `pkg/client` made them, so that
//! `kcm controller-manager --master URL --controllers replication-2014` runs the loop
//! line for line as a client of any apiserver.
//!
//! - `ReplicationControllers(NamespaceAll).List` and `Pods(ns).List(selector)` are one
//!   `GET` each; as 2014's storage did, a list holding an item that does not decode fails
//!   whole.
//! - `ReplicationControllers(NamespaceAll).Watch(rv)` is one watch request, a one-shot
//!   stream: it ends when the connection does, after an ERROR event for a Status (a 410
//!   for a compacted resourceVersion), and the loop watches again, as in 2014.
//! - `createReplica` is a `POST` of the pod, `deletePod` a `DELETE`, neither with a
//!   precondition (2014 had none).

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::StreamExt as _;
use http::Request;
use kube::core::WatchEvent as KubeEvent;
use serde_json::Value;

use super::ApiClient;
use crate::api::{Pod, ReplicationController};
use crate::apiserver::StoredKind;
use crate::etcd_watcher::{Status, WatchEvent};
use crate::labels::Selector;
use crate::replication_2014::{new_replica, whole_list, KubeClient, PodControl};

/// 2014's `kubeClient` and `RealPodControl` over one API server.
#[derive(Clone)]
pub struct Client2014 {
    api: ApiClient,
}

impl Client2014 {
    pub fn new(api: ApiClient) -> Client2014 {
        Client2014 { api }
    }
}

impl KubeClient for Client2014 {
    fn list_controllers(&self) -> BoxFuture<'static, anyhow::Result<Vec<ReplicationController>>> {
        let api = self.api.clone();
        Box::pin(async move { whole_list(api.list::<ReplicationController>(None).await?) })
    }

    fn list_pods(
        &self,
        namespace: &str,
        selector: &Selector,
    ) -> BoxFuture<'static, anyhow::Result<Vec<Pod>>> {
        let (api, namespace, selector) =
            (self.api.clone(), namespace.to_string(), selector.clone());
        Box::pin(async move {
            let mut pods = whole_list(api.list::<Pod>(Some(&namespace)).await?)?;
            pods.retain(|pod| selector.matches(&pod.metadata.labels));
            Ok(pods)
        })
    }

    fn watch_controllers(
        &self,
        resource_version: &str,
    ) -> BoxFuture<'static, anyhow::Result<BoxStream<'static, WatchEvent<ReplicationController>>>>
    {
        let (api, resource_version) = (self.api.clone(), resource_version.to_string());
        Box::pin(async move {
            let mut uri = "/api/v1/replicationcontrollers?watch=true".to_string();
            if !resource_version.is_empty() {
                uri.push_str(&format!("&resourceVersion={resource_version}"));
            }
            let request = Request::get(uri).body(Vec::new()).expect("a valid request");
            let events = match api.kube().request_events::<Value>(request).await {
                Ok(events) => events,
                // The server refused the watch itself (a 410 before any event): one ERROR
                // event, as 2014's watch of a cleared index.
                Err(kube::Error::Api(status)) => {
                    let event = WatchEvent::Error(status_of(status.code, status.message));
                    return Ok(futures::stream::iter([event]).boxed());
                }
                Err(e) => anyhow::bail!("watch replicationcontrollers: {e}"),
            };
            let stream = events
                .map(|event| match event {
                    Ok(KubeEvent::Added(object)) => typed(object).map(WatchEvent::Added),
                    Ok(KubeEvent::Modified(object)) => typed(object).map(WatchEvent::Modified),
                    Ok(KubeEvent::Deleted(object)) => typed(object).map(WatchEvent::Deleted),
                    Ok(KubeEvent::Bookmark(_)) => Err(None),
                    Ok(KubeEvent::Error(status)) => {
                        Err(Some(status_of(status.code, status.message)))
                    }
                    Err(e) => Err(Some(Status::internal(e.to_string()))),
                })
                .filter_map(|event| async move {
                    match event {
                        Ok(event) => Some(Ok(event)),
                        Err(Some(status)) => Some(Err(status)),
                        Err(None) => None,
                    }
                })
                // An ERROR event ends the stream, as 2014's watch did.
                .scan(false, |ended, event| {
                    let item = match (*ended, event) {
                        (true, _) => None,
                        (false, Ok(event)) => Some(event),
                        (false, Err(status)) => {
                            *ended = true;
                            Some(WatchEvent::Error(status))
                        }
                    };
                    futures::future::ready(item)
                });
            Ok(stream.boxed())
        })
    }
}

/// A watched object as the typed controller, or an ERROR for one that does not decode.
fn typed(object: Value) -> Result<ReplicationController, Option<Status>> {
    super::decode::<ReplicationController>(StoredKind::ReplicationController, object)
        .map_err(|e| Some(Status::internal(e.to_string())))
}

/// The loop's `Status` for an apiserver's.
fn status_of(code: u16, message: String) -> Status {
    if code == 410 {
        Status::gone(message)
    } else {
        Status {
            code,
            ..Status::internal(message)
        }
    }
}

impl PodControl for Client2014 {
    fn create_replica(
        &self,
        namespace: &str,
        controller: &ReplicationController,
    ) -> BoxFuture<'static, ()> {
        let api = self.api.clone();
        let pod = new_replica(namespace, controller, uuid::Uuid::new_v4().to_string());
        Box::pin(async move {
            let Some(pod) = pod else {
                tracing::error!("Unable to create pod replica, no labels");
                return;
            };
            if let Err(e) = api.create(&pod).await {
                tracing::error!(error = %e, "unable to create pod replica");
            }
        })
    }

    fn delete_pod(&self, namespace: &str, name: &str) -> BoxFuture<'static, anyhow::Result<()>> {
        let (api, namespace, name) = (self.api.clone(), namespace.to_string(), name.to_string());
        Box::pin(async move {
            api.delete::<Pod>(&namespace, &name, None, true).await?;
            Ok(())
        })
    }
}
