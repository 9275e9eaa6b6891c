//! `names`: a controller scaled 0 → N; figure: the pods whose name says which controller
//! made them (`{controller}-…`). 2014 posted pods without a name, and its pod storage named
//! each after its UID (weakness 12, docs/2014.md); kcm names replica slot `i`
//! `{controller}-{5 chars}`, as Kubernetes' `GenerateName` did from 2015.

use super::history::course;
use super::{Lab, Loop, Measured, Row, Scenario, Sizes};

impl Lab {
    /// `names`: a controller scaled 0 → N; the pods created with a name that starts with
    /// the controller's, counted from etcd's history.
    pub(super) async fn names(&self, which: Loop, namespace: &str) -> anyhow::Result<Measured> {
        let sizes = self.sizes;
        let running = self.start(which);
        self.create_controller(namespace, "web", 0).await?;
        let scaled_at = self.scale(namespace, "web", sizes.names_replicas).await?;
        self.wait_pods(namespace, sizes.names_replicas as usize)
            .await?;
        running.stop().await?;
        let (events, end) = self.history(scaled_at).await?;
        let pods_dir = self.pods_dir(namespace);
        let named = format!("{pods_dir}web-");
        let created = events
            .iter()
            .filter(|e| e.created && e.key.starts_with(&pods_dir));
        // The figure: pods named after their controller; the course: the same, as they come.
        Ok(course(scaled_at, end, 0, created, |e, n| {
            n + i64::from(e.key.starts_with(&named))
        }))
    }
}

/// The table's row of `names`.
pub(super) fn row(sizes: Sizes, v2014: f64, kcm: f64) -> Row {
    Row {
        scenario: Scenario::Names.name(),
        measure: format!(
            "pods named after their controller, of {} created scaling 0 → {}",
            sizes.names_replicas, sizes.names_replicas
        ),
        unit: "pods",
        v2014,
        kcm,
        departure: "manager: creates",
        weaknesses: &[12],
        issues: "#148, PR #3789",
        also: Vec::new(),
    }
}
