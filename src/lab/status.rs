//! `status`: a controller scaled 0 → N; figure: the writes of the controller a watcher of
//! it sees after the scale-up's own. 2014's manager wrote no status: `status.replicas`
//! was computed by the apiserver at each read, so it never changed in etcd and no watcher
//! saw the controller converge (weakness 11, docs/2014.md); kcm writes `status.replicas`
//! (and `readyReplicas`) by compare-and-swap as its creates land.

use super::history::course;
use super::{Lab, Loop, Measured, Row, Scenario, Sizes};
use crate::api::ReplicationController;

impl Lab {
    /// `status`: a controller scaled 0 → N; the writes of its key after the scale-up's.
    pub(super) async fn status(&self, which: Loop, namespace: &str) -> anyhow::Result<Measured> {
        let sizes = self.sizes;
        let running = self.start(which);
        self.create_controller(namespace, "web", 0).await?;
        // Both loops have seen the controller at 0 before it grows.
        tokio::time::sleep(self.period).await;
        let scaled_at = self.scale(namespace, "web", sizes.status_replicas).await?;
        self.wait_pods(namespace, sizes.status_replicas as usize)
            .await?;
        // A period for the last status write (kcm's) or for nothing (2014's).
        tokio::time::sleep(self.period).await;
        running.stop().await?;
        let (events, end) = self.history(scaled_at).await?;
        let controller = self.registry.key::<ReplicationController>(namespace, "web");
        let writes = events.iter().filter(|e| e.put && e.key == controller);
        Ok(course(scaled_at, end, 0, writes, |_, n| n + 1))
    }
}

/// The table's row of `status`.
pub(super) fn row(sizes: Sizes, v2014: f64, kcm: f64) -> Row {
    Row {
        scenario: Scenario::Status.name(),
        measure: format!(
            "writes of the controller a watcher sees while it scales 0 → {}",
            sizes.status_replicas
        ),
        unit: "writes",
        v2014,
        kcm,
        departure: "manager: status",
        weaknesses: &[11],
        issues: "#4525, #5745",
        also: Vec::new(),
    }
}
