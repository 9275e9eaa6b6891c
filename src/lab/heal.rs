//! `heal`: a converged controller loses a pod, several times; figure: mean seconds from
//! the delete to the replacement's create, seen by a watch on etcd (2014 does not watch
//! pods and waits for the tick, about half the period; kcm: milliseconds).

use std::time::{Duration, Instant};

use super::fixtures::{mean_seconds, wait_for_a_create};
use super::{Lab, Loop, Measured, Row, Scenario, Sizes};
use crate::api::Pod;

impl Lab {
    /// `heal`: a converged controller loses one pod at a time; the mean seconds from
    /// each delete to the replacement's create, as a watch on etcd sees them.
    pub(super) async fn heal(&self, which: Loop, namespace: &str) -> anyhow::Result<Measured> {
        let sizes = self.sizes;
        let running = self.start(which);
        self.create_controller(namespace, "web", sizes.heal_replicas)
            .await?;
        self.wait_pods(namespace, sizes.heal_replicas as usize)
            .await?;
        let pods_dir = self.pods_dir(namespace);
        let mut trials = Vec::new();
        for trial in 1..=sizes.heal_trials {
            let mut watch = self.at_a_random_moment_watch(&pods_dir).await?;
            let victim = self.pods(namespace).await?.remove(0);
            let deleted_at = Instant::now();
            self.registry
                .delete::<Pod>(namespace, &victim.metadata.name, None)
                .await?;
            wait_for_a_create(&mut watch, Duration::from_secs(30) + 3 * self.period).await?;
            trials.push((trial as f64, deleted_at.elapsed().as_secs_f64()));
            self.wait_pods(namespace, sizes.heal_replicas as usize)
                .await?;
        }
        running.stop().await?;
        Ok((mean_seconds(&trials), trials))
    }
}

/// The table's row of `heal`: what was measured, both loops' figures, the departure
/// and the issues behind it.
pub(super) fn row(sizes: Sizes, v2014: f64, kcm: f64) -> Row {
    Row {
        scenario: Scenario::Heal.name(),
        measure: format!(
            "mean time from a pod's delete to its replacement, {} trials",
            sizes.heal_trials
        ),
        unit: "s",
        v2014,
        kcm,
        departure: "manager: healing",
        weaknesses: &[],
        issues: "no pod watch: 2014 watched controllers only, so a lost pod waited for the tick",
        also: Vec::new(),
    }
}
