//! kcm's etcd watcher as the watch tests drive it: a [`Watcher`] on a client built the way
//! kcm builds one, with keepalives short enough to notice a dead connection within seconds
//! ([`watcher_via`], [`env`]), and the events replayed onto a map as a cache would
//! ([`replay`], [`summary`]) to compare with etcd's own state.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::Client;
use kcm::api::Pod;
use kcm::client::ClientConfig;
use kcm::etcd_watcher::{BackoffConfig, WatchEvent, Watcher};
use kcm::registry::Registry;

use super::{start_etcd, EtcdServer};

/// Short, so that the fault tests resume quickly.
pub const SHORT_BACKOFF: BackoffConfig = BackoffConfig {
    min: Duration::from_millis(50),
    max: Duration::from_millis(500),
    reset_after: Duration::from_secs(120),
};

/// Deletes `key`, whatever it holds.
pub async fn delete(client: &mut Client, key: &str) {
    client
        .delete(key, None)
        .await
        .unwrap_or_else(|e| panic!("delete {key}: {e}"));
}

/// A watcher through a client built the way kcm builds them, with keepalive 1s/1s, so that
/// a dead connection is noticed within seconds.
pub async fn watcher_via(endpoint: String) -> Watcher {
    let config = ClientConfig {
        keepalive_interval: Duration::from_secs(1),
        keepalive_timeout: Duration::from_secs(1),
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(5),
        ..ClientConfig::new([endpoint])
    };
    let client = kcm::client::build(&config)
        .await
        .expect("build etcd client");
    let registry = Registry::new(&client, kcm::api::DEFAULT_PREFIX)
        .expect("registry")
        .with_request_timeout(config.request_timeout);
    Watcher::new(&client, registry)
}

/// One etcd, a direct client for scripted writes, and a watcher on its own client.
pub struct Env {
    pub etcd: EtcdServer,
    pub client: Client,
    pub watcher: Watcher,
}

/// `None` when etcd is not installed (the test is skipped, see `start_etcd`).
pub async fn env() -> Option<Env> {
    let etcd = start_etcd().await?;
    let client = etcd.client().await;
    let watcher = watcher_via(etcd.endpoint()).await;
    Some(Env {
        etcd,
        client,
        watcher,
    })
}

/// Replays events onto a map keyed by `namespace/name` (Added/Modified insert, Deleted
/// removes), as a cache would.
pub fn replay(state: &mut BTreeMap<String, Pod>, event: WatchEvent<Pod>) {
    match event {
        WatchEvent::Added(pod) | WatchEvent::Modified(pod) => {
            state.insert(pod.metadata.key(), pod);
        }
        WatchEvent::Deleted(pod) => {
            state.remove(&pod.metadata.key());
        }
        WatchEvent::Error(status) => panic!("error event {status}"),
    }
}

/// `namespace/name` → `resourceVersion app`, the comparable part of a state.
pub fn summary(state: &BTreeMap<String, Pod>) -> BTreeMap<String, String> {
    state
        .iter()
        .map(|(key, pod)| {
            (
                key.clone(),
                format!(
                    "{} {}",
                    pod.metadata.resource_version.unwrap(),
                    pod.metadata.labels.get("app").unwrap_or("-")
                ),
            )
        })
        .collect()
}
