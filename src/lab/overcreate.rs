//! `overcreate`: two managers of the same kind see one controller scaled 0 → N at once;
//! figure: the most active pods at any revision (2014: each lists, then creates all it
//! misses: up to 2N; kcm: deterministic slot names, never more than N) (#8138).

use std::time::Duration;

use super::history::course;
use super::{Lab, Loop, Measured, Row, Scenario, Sizes};

impl Lab {
    /// `overcreate`: two managers at once see one controller scaled 0 → N; the most
    /// active pods at any revision of etcd's history.
    pub(super) async fn overcreate(
        &self,
        which: Loop,
        namespace: &str,
    ) -> anyhow::Result<Measured> {
        let replicas = self.sizes.overcreate_replicas;
        let managers = self.start_two(which).await?;
        self.create_controller(namespace, "web", 0).await?;
        // Both managers have seen the controller at 0 once their first sync is done;
        // a short pause lets both watches reach it.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let scaled = self.scale(namespace, "web", replicas).await?;
        // 2014's managers over-create at once, then (each on its tick) delete back down;
        // a period and a second let that show, whether or not they settle.
        let _ = self.wait_pods(namespace, replicas as usize).await;
        tokio::time::sleep(self.period + Duration::from_secs(1)).await;
        for manager in managers {
            manager.stop().await?;
        }
        let pods_dir = self.pods_dir(namespace);
        let (events, end) = self.history(scaled).await?;
        let changes = events
            .iter()
            .filter(|e| e.key.starts_with(&pods_dir) && (e.created || !e.put));
        let (_, course) = course(scaled, end, 0, changes, |e, n| {
            if e.created {
                n + 1
            } else {
                n - 1
            }
        });
        let peak = course.iter().map(|p| p.1).fold(0.0, f64::max);
        Ok((peak, course))
    }
}

/// The table's row of `overcreate`: what was measured, both loops' figures, the departure
/// and the issues behind it.
pub(super) fn row(sizes: Sizes, v2014: f64, kcm: f64) -> Row {
    Row {
        scenario: Scenario::Overcreate.name(),
        measure: format!(
            "peak active pods, two managers scaling one controller 0 → {}",
            sizes.overcreate_replicas
        ),
        unit: "pods",
        v2014,
        kcm,
        departure: "manager: creates",
        weaknesses: &[4],
        issues: "#8138, #7369",
        also: Vec::new(),
    }
}
