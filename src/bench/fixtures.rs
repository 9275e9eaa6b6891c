//! What the scenarios build and wait with: the documents (a controller, its replica slots'
//! pods as the manager writes them), bounded polls, a raw watch's catch-up time, a
//! process's peak memory, and a watch driven on its own task.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use etcd_client::{Client, WatchOptions};
use tokio::task::JoinSet;

use crate::api::{
    self, Container, ContainerPort, LabelSelector, Object as _, ObjectMeta, PodSpec,
    PodTemplateSpec, ReplicaSet, ReplicaSetSpec, ReplicationController, ReplicationControllerSpec,
};
use crate::etcd_watcher::{self, ResumableWatch, Update};
use crate::labels::Set;
use crate::replication_manager;

/// A bounded wait for a condition the bench cannot observe by events.
pub(super) async fn poll_until<F, Fut>(
    limit: Duration,
    what: &str,
    mut check: F,
) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if check().await? {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A controller in `namespace` selecting `app={name}`, with `replicas` and the given
/// `status.replicas`; its template is an nginx pod with one named port.
pub(super) fn controller(
    namespace: &str,
    name: &str,
    replicas: i64,
    status: i64,
) -> ReplicationController {
    let labels: Set = [("app", name), ("tier", "web")].into_iter().collect();
    let mut rc = ReplicationController {
        metadata: ObjectMeta {
            uid: format!("{name}-{}", uuid::Uuid::new_v4().simple()),
            creation_timestamp: Some("2014-11-01T00:00:00Z".into()),
            ..ObjectMeta::named(namespace, name)
        },
        spec: ReplicationControllerSpec {
            replicas,
            selector: [("app", name)].into_iter().collect(),
            template: Some(PodTemplateSpec {
                metadata: ObjectMeta {
                    labels,
                    ..ObjectMeta::default()
                },
                spec: PodSpec {
                    containers: vec![Container {
                        name: "web".into(),
                        image: "nginx:1.7.9".into(),
                        ports: vec![ContainerPort {
                            name: "http".into(),
                            container_port: 80,
                            ..ContainerPort::default()
                        }],
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                },
                ..PodTemplateSpec::default()
            }),
            ..ReplicationControllerSpec::default()
        },
        ..ReplicationController::default()
    };
    rc.status.replicas = status;
    rc.set_type_meta();
    rc
}

/// A ReplicaSet in `namespace` with [`controller`]'s selector (as `matchLabels`) and
/// template, `replicas` and the given `status.replicas`, and a real (uuid) uid.
pub(super) fn replica_set(namespace: &str, name: &str, replicas: i64, status: i64) -> ReplicaSet {
    let rc = controller(namespace, name, replicas, status);
    let mut rs = ReplicaSet {
        metadata: ObjectMeta {
            uid: uuid::Uuid::new_v4().hyphenated().to_string(),
            ..rc.metadata
        },
        spec: ReplicaSetSpec {
            replicas: Some(replicas),
            selector: Some(LabelSelector {
                match_labels: rc.spec.selector,
                ..LabelSelector::default()
            }),
            template: rc.spec.template,
            ..ReplicaSetSpec::default()
        },
        ..ReplicaSet::default()
    };
    rs.status.replicas = status;
    rs.set_type_meta();
    rs
}

/// The document of replica slot `slot` of `rc`, exactly as the manager would create it.
pub(super) fn pod_document(rc: &ReplicationController, slot: u64) -> (String, Vec<u8>) {
    let name = crate::controller::pod_name(&rc.metadata.name, &rc.metadata.uid, slot);
    encode_pod(replication_manager::new_pod_from_template(rc, name))
}

/// The document of replica slot `slot` of `rs`, exactly as the ReplicaSet controller would
/// create it (with its controller reference).
pub(super) fn rs_pod_document(rs: &ReplicaSet, slot: u64) -> (String, Vec<u8>) {
    let name = crate::controller::pod_name(&rs.metadata.name, &rs.metadata.uid, slot);
    encode_pod(crate::replicaset::new_pod(rs, name))
}

/// `pod` as a create stores it (`Registry::encode_create`).
fn encode_pod(mut pod: api::Pod) -> (String, Vec<u8>) {
    api::fill_created(&mut pod);
    pod.set_type_meta();
    let value = api::encode(&pod).expect("a pod encodes");
    (pod.metadata.name, value)
}

/// Seconds a raw watch from `before` takes to deliver every event up to `after`.
pub(super) async fn raw_catch_up(
    client: &Client,
    dir: &str,
    before: i64,
    after: i64,
) -> anyhow::Result<f64> {
    let options = WatchOptions::new()
        .with_prefix()
        .with_prev_key()
        .with_start_revision(before + 1);
    let started = Instant::now();
    let mut stream = client.watch_client().watch(dir, Some(options)).await?;
    loop {
        let response = tokio::time::timeout(Duration::from_secs(120), stream.message())
            .await
            .context("raw watch stalled")??
            .context("raw watch closed")?;
        if response
            .events()
            .iter()
            .filter_map(|e| e.kv())
            .any(|kv| kv.mod_revision() >= after)
        {
            return Ok(started.elapsed().as_secs_f64());
        }
    }
}

/// Peak resident set size of process `pid`, from `/proc/PID/status`.
pub(super) fn vm_hwm(pid: u32) -> anyhow::Result<usize> {
    status_bytes(pid, "VmHWM:")
}

/// The resident set size (`VmRSS`) of process `pid`, in bytes.
pub(super) fn vm_rss(pid: u32) -> anyhow::Result<usize> {
    status_bytes(pid, "VmRSS:")
}

/// The anonymous part of `pid`'s resident set (`RssAnon`: its heap, stacks and the
/// allocator's pages), in bytes; the rest is file pages (`RssFile`: the binary's code and
/// read-only data, shared and clean) and shared memory.
pub(super) fn rss_anon(pid: u32) -> anyhow::Result<usize> {
    status_bytes(pid, "RssAnon:")
}

/// The file-backed part of `pid`'s resident set (`RssFile`), in bytes.
pub(super) fn rss_file(pid: u32) -> anyhow::Result<usize> {
    status_bytes(pid, "RssFile:")
}

fn status_bytes(pid: u32, field: &str) -> anyhow::Result<usize> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("read /proc/{pid}/status"))?;
    let kib: usize = status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("no {field} in /proc/PID/status"))?;
    Ok(kib * 1024)
}

/// Runs a watch on its own task (owned by `tasks`) feeding a channel, so that it is
/// polled all the time, as a controller's loop polls it, while the bench waits elsewhere.
pub(super) fn drive<T: api::Object>(
    mut watch: ResumableWatch<T>,
    tasks: &mut JoinSet<()>,
) -> tokio::sync::mpsc::Receiver<Update<T>> {
    let (tx, rx) = tokio::sync::mpsc::channel(etcd_watcher::WATCH_BUFFER);
    tasks.spawn(async move {
        loop {
            let update = watch.next().await;
            if tx.send(update).await.is_err() {
                return;
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The baseline writes what kcm's controllers write: a created pod carries generation 1
    /// (a document without it was 15 bytes shorter than kcm's, about 3 %).
    #[test]
    fn the_baselines_pod_documents_are_stored_as_a_create_stores_them() {
        let rc = controller("base", "web", 3, 0);
        let rs = replica_set("base", "web", 3, 0);
        for (name, value) in [pod_document(&rc, 0), rs_pod_document(&rs, 1)] {
            let pod: api::Pod = serde_json::from_slice(&value).expect("the document decodes");
            assert_eq!(pod.metadata.name, name);
            assert_eq!(pod.metadata.generation, 1, "{name}");
            assert!(!pod.metadata.uid.is_empty(), "{name}");
            assert!(pod.metadata.creation_timestamp.is_some(), "{name}");
            assert_eq!(pod.kind, "Pod");
        }
    }
}
