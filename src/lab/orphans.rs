//! `orphans`: a controller short of pods is deleted (its pods and it, in one
//! transaction); figure: pods created after the delete (2014 syncs a deleted controller at
//! its last state; kcm writes nothing for a deleted controller) (weakness 10, docs/2014.md).

use std::time::Duration;

use anyhow::Context as _;
use etcd_client::{Txn, TxnOp};

use super::history::course;
use super::{Lab, Loop, Measured, Row, Scenario, Sizes};
use crate::api::{Pod, ReplicationController};

impl Lab {
    /// `orphans`: a converged controller, then (in one transaction) some of its pods and
    /// the controller deleted; the pods created after that.
    pub(super) async fn orphans(&self, which: Loop, namespace: &str) -> anyhow::Result<Measured> {
        let sizes = self.sizes;
        let running = self.start(which);
        self.create_controller(namespace, "web", sizes.orphans_replicas)
            .await?;
        self.wait_pods(namespace, sizes.orphans_replicas as usize)
            .await?;
        let pods = self.pods(namespace).await?;
        let mut deletes: Vec<TxnOp> = pods
            .iter()
            .take(sizes.orphans_lost)
            .map(|p| TxnOp::delete(self.registry.key::<Pod>(namespace, &p.metadata.name), None))
            .collect();
        deletes.push(TxnOp::delete(
            self.registry.key::<ReplicationController>(namespace, "web"),
            None,
        ));
        let response = self
            .client
            .kv_client()
            .txn(Txn::new().and_then(deletes))
            .await
            .context("delete the controller and some of its pods")?;
        let deleted_at = response.header().context("txn header")?.revision();
        // The 2014 loop reacts to the DELETED event at once; a tick and a second let
        // either loop do whatever it will do.
        tokio::time::sleep(self.period + Duration::from_secs(1)).await;
        running.stop().await?;
        let pods_dir = self.pods_dir(namespace);
        let (events, end) = self.history(deleted_at).await?;
        let created = events
            .iter()
            .filter(|e| e.created && e.key.starts_with(&pods_dir));
        Ok(course(deleted_at, end, 0, created, |_, n| n + 1))
    }
}

/// The table's row of `orphans`: what was measured, both loops' figures, the departure
/// and the issues behind it.
pub(super) fn row(sizes: Sizes, v2014: f64, kcm: f64) -> Row {
    Row {
        scenario: Scenario::Orphans.name(),
        measure: format!(
            "pods created after deleting a controller short of {} of {} pods",
            sizes.orphans_lost, sizes.orphans_replicas
        ),
        unit: "pods",
        v2014,
        kcm,
        departure: "manager: deleted controller",
        weaknesses: &[10],
        issues: "the DELETED event's sync at the last state; #5020 for writes in flight",
        also: Vec::new(),
    }
}
