//! `victims`: scale 5 → 2 with 3 running and 2 pending pods, the running ones first in
//! key order; figure: running pods deleted (2014 deletes the first in list order; kcm
//! ranks pending and unassigned first) (#3948).

use std::collections::BTreeSet;
use std::time::Duration;

use super::history::course;
use super::{Lab, Loop, Measured, Row, Scenario, Sizes};
use crate::api::{Pod, PodPhase};

impl Lab {
    /// `victims`: a converged controller whose first pods in key order run on a node, the
    /// others pending and unassigned; scaled down; the running pods deleted.
    pub(super) async fn victims(&self, which: Loop, namespace: &str) -> anyhow::Result<Measured> {
        let sizes = self.sizes;
        let running = self.start(which);
        self.create_controller(namespace, "web", sizes.victims_from)
            .await?;
        self.wait_pods(namespace, sizes.victims_from as usize)
            .await?;
        let mut running_pods = BTreeSet::new();
        for pod in self
            .pods(namespace)
            .await?
            .iter()
            .take(sizes.victims_running)
        {
            self.registry
                .guaranteed_update::<Pod, _>(namespace, &pod.metadata.name, |mut pod| {
                    pod.spec.host = "lab-node".into();
                    pod.status.get_or_insert_with(Default::default).phase = PodPhase::Running;
                    Ok(pod)
                })
                .await?;
            running_pods.insert(self.registry.key::<Pod>(namespace, &pod.metadata.name));
        }
        // kcm ranks from its pod cache: let it see the phases before the scale-down.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let scaled_at = self.scale(namespace, "web", sizes.victims_to).await?;
        self.wait_pods(namespace, sizes.victims_to as usize).await?;
        running.stop().await?;
        let (events, end) = self.history(scaled_at).await?;
        let deleted = events
            .iter()
            .filter(|e| !e.put && running_pods.contains(&e.key));
        // The figure: running pods deleted; the course: running pods left.
        let running = sizes.victims_running as i64;
        let (left, course) = course(scaled_at, end, running, deleted, |_, n| n - 1);
        Ok(((running as f64 - left), course))
    }
}

/// The table's row of `victims`: what was measured, both loops' figures, the departure
/// and the issues behind it.
pub(super) fn row(sizes: Sizes, v2014: f64, kcm: f64) -> Row {
    Row {
        scenario: Scenario::Victims.name(),
        measure: format!(
            "running pods deleted scaling {} → {} ({} running first in key order)",
            sizes.victims_from, sizes.victims_to, sizes.victims_running
        ),
        unit: "pods",
        v2014,
        kcm,
        departure: "manager: deletes",
        weaknesses: &[6],
        issues: "#3948",
        also: Vec::new(),
    }
}
