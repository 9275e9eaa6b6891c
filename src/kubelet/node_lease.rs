//! The kubelet's node Lease: the `coordination.k8s.io/v1` Lease `kube-node-lease/{node}`
//! (`{prefix}/leases/kube-node-lease/{node}`), renewed every quarter of its duration while
//! the kubelet holds its registration: the heartbeat that the API serves.
//!
//! Kubernetes' `pkg/kubelet/nodelease` and `component-helpers/apimachinery/lease`
//! (`controller.go`: `newLease`, `ensureLease`, `retryUpdateLease`, and the kubelet's
//! `setNodeOwnerFunc`), with its defaults: a duration of 40 s
//! (`--node-lease-duration-seconds`), renewed every 10 s (a quarter of it). No 2014
//! original: 2014 had no heartbeat at all. Against etcd kcm's node lifecycle controller
//! reads the registration (`registration`), whose etcd lease is a stronger heartbeat (etcd
//! deletes it itself); through the API it reads these Leases, as Kubernetes' does
//! (`nodelifecycle`, docs/invariants.md "Through the API").
//!
//! The Lease names its node as holder and is owned by the Node the kubelet last posted
//! (an owner reference with its uid, as Kubernetes' kubelet sets it). Every other field,
//! and every field kcm does not know, is kept.
//!
//! Invariants: it is written only while the registration is held, each write guarded by
//! the registration's incarnation (as the kubelet's other writes), so a kubelet whose
//! registration lapsed renews nothing; it is created if absent and otherwise replaced by
//! compare-and-swap on the revision read (`node_status::write_document`); a failed renewal
//! is retried after [`RETRY_DELAY`], never waiting the whole interval.

use std::time::{Duration, SystemTime};

use serde_json::{json, Map, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::node_status::write_document;
use super::registration::Status;
use crate::api::{self, NODE_API_VERSION, NODE_KIND, NODE_LEASE_NAMESPACE};
use crate::registry::{Registry, StorageError};

/// Kubernetes' default `--node-lease-duration-seconds`.
pub const DEFAULT_NODE_LEASE_DURATION: Duration = Duration::from_secs(40);

/// The `kind` of a Lease document.
const LEASE_KIND: &str = "Lease";

/// How long after a failed renewal it is tried again (Kubernetes' lease controller backs
/// off from 200 ms to 7 s; kcm retries at a steady second).
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// How often a Lease of `duration` is renewed: a quarter of it (Kubernetes'
/// `renewIntervalFraction`), at least every 100 ms.
pub fn renew_interval(duration: Duration) -> Duration {
    (duration / 4).max(Duration::from_millis(100))
}

/// Node `node`'s Lease renewed at `renew_time` (a `MicroTime`), written over `existing`
/// (`None`: a new one, with uid `new_uid()`): holder the node, duration `duration` (whole
/// seconds, at least 1), owned by the Node of uid `node_uid` when known. Everything else
/// in `existing` is kept. Pure.
pub fn lease_document(
    existing: Option<&Value>,
    node: &str,
    node_uid: Option<&str>,
    duration: Duration,
    renew_time: &str,
    new_uid: impl FnOnce() -> String,
) -> Value {
    let mut lease = existing
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    lease.insert("kind".into(), Value::from(LEASE_KIND));
    lease.insert("apiVersion".into(), Value::from("coordination.k8s.io/v1"));
    let meta = object(&mut lease, "metadata");
    meta.insert("name".into(), Value::from(node));
    meta.insert("namespace".into(), Value::from(NODE_LEASE_NAMESPACE));
    if meta
        .get("uid")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        meta.insert("uid".into(), Value::from(new_uid()));
        meta.insert("creationTimestamp".into(), Value::from(api::now_rfc3339()));
    }
    if let Some(uid) = node_uid {
        meta.insert(
            "ownerReferences".into(),
            json!([{
                "apiVersion": NODE_API_VERSION,
                "kind": NODE_KIND,
                "name": node,
                "uid": uid,
            }]),
        );
    }
    let spec = object(&mut lease, "spec");
    spec.insert("holderIdentity".into(), Value::from(node));
    spec.insert(
        "leaseDurationSeconds".into(),
        Value::from(duration.as_secs().max(1)),
    );
    spec.insert("renewTime".into(), Value::from(renew_time));
    Value::Object(lease)
}

/// The object at `field` of `map`, made one if it is missing or not an object.
fn object<'a>(map: &'a mut Map<String, Value>, field: &str) -> &'a mut Map<String, Value> {
    let entry = map
        .entry(field.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut().expect("an object")
}

/// Renews node `node`'s Lease through `registry` while `status` says the registration is
/// held, every [`renew_interval`] of `duration`, until `stop` is cancelled. `node_uid`
/// carries the uid of the Node the kubelet last posted, for the owner reference.
pub(super) async fn renew_while_held(
    registry: Registry,
    node: String,
    duration: Duration,
    mut status: watch::Receiver<Status>,
    node_uid: watch::Receiver<Option<String>>,
    stop: CancellationToken,
) {
    let key = api::node_lease_key(registry.prefix(), &node);
    let interval = renew_interval(duration);
    let mut failures = 0u32;
    loop {
        let held = match &*status.borrow_and_update() {
            Status::Held(incarnation) => Some(registry.guarded_by(incarnation.clone())),
            Status::Lost(_) | Status::Taken(_) => None,
        };
        let wait = match held {
            None => None,
            Some(guarded) => {
                let uid = node_uid.borrow().clone();
                let written = write_document(&guarded, &key, LEASE_KIND, |existing| {
                    let now = api::micro_time(SystemTime::now());
                    let new_uid = || uuid::Uuid::new_v4().to_string();
                    lease_document(existing, &node, uid.as_deref(), duration, &now, new_uid)
                })
                .await;
                match written {
                    Ok(posted) => {
                        if posted.created {
                            tracing::info!(%node, %key, "node Lease created");
                        }
                        failures = 0;
                        Some(interval)
                    }
                    // The registration is gone: wait for it to be held again.
                    Err(StorageError::OwnerGone { .. }) => None,
                    Err(e) => {
                        failures += 1;
                        if failures >= 4 && failures.is_power_of_two() {
                            tracing::warn!(%node, error = %e, failures,
                                "renewing the node Lease keeps failing; retrying");
                        } else {
                            tracing::debug!(%node, error = %e, "renewing the node Lease failed; retrying");
                        }
                        Some(RETRY_DELAY.min(interval))
                    }
                }
            }
        };
        tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            changed = status.changed() => {
                // The registration ended: nothing more to renew.
                if changed.is_err() {
                    return;
                }
            }
            _ = tokio::time::sleep(wait.unwrap_or(interval)), if wait.is_some() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_lease_names_its_node_as_holder_and_owner() {
        let lease = lease_document(
            None,
            "n1",
            Some("node-uid"),
            DEFAULT_NODE_LEASE_DURATION,
            "2026-11-29T10:00:00.000001Z",
            || "lease-uid".into(),
        );
        assert_eq!(lease["kind"], "Lease");
        assert_eq!(lease["apiVersion"], "coordination.k8s.io/v1");
        assert_eq!(lease["metadata"]["name"], "n1");
        assert_eq!(lease["metadata"]["namespace"], "kube-node-lease");
        assert_eq!(lease["metadata"]["uid"], "lease-uid");
        assert!(lease["metadata"]["creationTimestamp"].is_string());
        assert_eq!(
            lease["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "node-uid"}])
        );
        assert_eq!(
            lease["spec"],
            json!({"holderIdentity": "n1", "leaseDurationSeconds": 40,
                "renewTime": "2026-11-29T10:00:00.000001Z"})
        );
    }

    #[test]
    fn a_renewal_moves_the_renew_time_and_keeps_everything_else() {
        let first = lease_document(
            None,
            "n1",
            None,
            Duration::from_secs(4),
            "2026-11-29T10:00:00.000001Z",
            || "lease-uid".into(),
        );
        assert_eq!(first["metadata"].get("ownerReferences"), None);
        let mut stored = first.clone();
        stored["metadata"]["labels"] = json!({"team": "a"});
        stored["spec"]["leaseTransitions"] = json!(2);
        stored["futureField"] = json!(1);
        let renewed = lease_document(
            Some(&stored),
            "n1",
            Some("node-uid"),
            Duration::from_secs(4),
            "2026-11-29T10:00:01.000001Z",
            || panic!("a renewal keeps its uid"),
        );
        assert_eq!(renewed["spec"]["renewTime"], "2026-11-29T10:00:01.000001Z");
        assert_eq!(renewed["spec"]["leaseDurationSeconds"], 4);
        assert_eq!(renewed["spec"]["leaseTransitions"], 2);
        assert_eq!(renewed["metadata"]["uid"], "lease-uid");
        assert_eq!(
            renewed["metadata"]["creationTimestamp"],
            first["metadata"]["creationTimestamp"]
        );
        assert_eq!(renewed["metadata"]["labels"]["team"], "a");
        assert_eq!(renewed["metadata"]["ownerReferences"][0]["uid"], "node-uid");
        assert_eq!(renewed["futureField"], 1);
    }

    #[test]
    fn a_lease_is_renewed_every_quarter_of_its_duration() {
        assert_eq!(
            renew_interval(DEFAULT_NODE_LEASE_DURATION),
            Duration::from_secs(10)
        );
        assert_eq!(
            renew_interval(Duration::from_secs(4)),
            Duration::from_secs(1)
        );
        assert_eq!(
            renew_interval(Duration::from_millis(10)),
            Duration::from_millis(100)
        );
    }
}
