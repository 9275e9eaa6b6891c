//! `failing-create`: a controller whose every pod create etcd refuses (its namespace's
//! pods are out of the loop's etcd role: etcd's RBAC answers `permission denied`);
//! figure: creates refused per minute, from etcd's own count of the requests it denied.
//! 2014 logged a failed create and tried every missing pod again at the next tick, and
//! the tick after, with no backoff (weakness 8, docs/2014.md); kcm's slow start stops a
//! sync at its first failed create and the key backs off exponentially, so after the
//! first seconds it tries one create per resync. It turns etcd's authentication on for
//! its run, so it runs only on the private etcd `kcm lab` starts.

use std::time::Duration;

use anyhow::Context as _;
use etcd_client::{Client, ConnectOptions, Permission};

use super::{Lab, Loop, Measured, Row, Scenario, Sizes};
use crate::registry::Registry;

/// etcd's count of the requests it refused for want of permission.
const DENIED: &str = r#"grpc_server_handled_total{grpc_code="PermissionDenied""#;
/// The user and role the loop runs as during `failing-create`.
const LOOP_USER: &str = "kcm-lab-loop";

impl Lab {
    /// `failing-create`: etcd's authentication on, the loop connected as a user who
    /// may write everything of the lab's but `namespace`'s pods, a controller of
    /// `namespace` created; after two periods, the creates etcd refused in
    /// [`Lab::failing_window`], per minute.
    pub(super) async fn failing_create(
        &self,
        which: Loop,
        namespace: &str,
    ) -> anyhow::Result<Measured> {
        let password = uuid::Uuid::new_v4().simple().to_string();
        self.deny_pods_of(namespace, &password).await?;
        let result = self.refused_creates(which, namespace, &password).await;
        let cleaned = self.authentication_off(&password).await;
        let measured = result?;
        cleaned?;
        Ok(measured)
    }

    /// Sets up `root` (etcd wants one before it turns authentication on) and the loop's
    /// user, who reads everything under the lab's prefix and writes all of it but the
    /// pods of `namespace`, and turns authentication on.
    async fn deny_pods_of(&self, namespace: &str, password: &str) -> anyhow::Result<()> {
        let mut admin = self.client.clone();
        let pods = self.pods_dir(namespace);
        let pods_end = format!("{}0", &pods[..pods.len() - 1]);
        let lab_end = format!("{}0", self.root);
        admin
            .user_add("root", password, None)
            .await
            .context("add etcd's root user")?;
        // etcd 3.4 has a built-in `root` role; an older one needs it made.
        let _ = admin.role_add("root").await;
        admin.user_grant_role("root", "root").await?;
        admin
            .role_add(LOOP_USER)
            .await
            .context("add the loop's role")?;
        for permission in [
            Permission::read(format!("{}/", self.root)).with_range_end(lab_end.clone()),
            Permission::read_write(format!("{}/", self.root)).with_range_end(pods.clone()),
            Permission::read_write(pods_end).with_range_end(lab_end),
        ] {
            admin
                .role_grant_permission(LOOP_USER, permission)
                .await
                .context("grant the loop's role")?;
        }
        admin.user_add(LOOP_USER, password, None).await?;
        admin.user_grant_role(LOOP_USER, LOOP_USER).await?;
        admin
            .auth_enable()
            .await
            .context("turn etcd's authentication on")?;
        Ok(())
    }

    /// Runs `which` as the loop's user; the creates etcd refused, per minute.
    async fn refused_creates(
        &self,
        which: Loop,
        namespace: &str,
        password: &str,
    ) -> anyhow::Result<Measured> {
        let root = self.connect_as("root", password).await?;
        let lab = self.through(root)?;
        let loop_client = self.connect_as(LOOP_USER, password).await?;
        let running = lab.start_on(
            which,
            &loop_client,
            Registry::new(&loop_client, &self.root)?,
        );
        lab.create_controller(namespace, "web", self.sizes.failing_replicas)
            .await?;
        // Both loops have tried, and kcm's first backoffs (milliseconds) have passed.
        tokio::time::sleep(2 * self.period).await;
        let window = self.failing_window();
        let periods = (window.as_secs_f64() / self.period.as_secs_f64()).round() as usize;
        let mut last = self.etcd_counter(DENIED).await?;
        let first = last;
        let mut points = Vec::new();
        for period in 1..=periods {
            tokio::time::sleep(self.period).await;
            let now = self.etcd_counter(DENIED).await?;
            points.push((period as f64, now - last));
            last = now;
        }
        running.stop().await?;
        let per_minute = (last - first) * 60.0 / window.as_secs_f64();
        Ok(((per_minute * 10.0).round() / 10.0, points))
    }

    /// Turns etcd's authentication off (as `root`) and removes the users and the role.
    async fn authentication_off(&self, password: &str) -> anyhow::Result<()> {
        let mut root = self.connect_as("root", password).await?;
        root.auth_disable()
            .await
            .context("turn etcd's authentication off")?;
        let mut admin = self.client.clone();
        admin.user_delete(LOOP_USER).await?;
        admin.role_delete(LOOP_USER).await?;
        admin.user_delete("root").await?;
        Ok(())
    }

    async fn connect_as(&self, user: &str, password: &str) -> anyhow::Result<Client> {
        Client::connect(
            &self.client_config.endpoints,
            Some(ConnectOptions::new().with_user(user, password)),
        )
        .await
        .with_context(|| format!("connect to etcd as {user}"))
    }

    /// How long `failing-create` counts: three periods.
    fn failing_window(&self) -> Duration {
        3 * self.period
    }
}

/// The table's row of `failing-create`.
pub(super) fn row(sizes: Sizes, v2014: f64, kcm: f64) -> Row {
    Row {
        scenario: Scenario::FailingCreate.name(),
        measure: format!(
            "pod creates etcd refused per minute, a controller of {} replicas whose pods it may not write",
            sizes.failing_replicas
        ),
        unit: "creates/min",
        v2014,
        kcm,
        departure: "manager: failures",
        weaknesses: &[8],
        issues: "#30629, #30626",
        also: Vec::new(),
    }
}
