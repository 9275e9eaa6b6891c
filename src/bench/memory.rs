//! `memory`: peak RSS of a `kcm controller-manager` child against its pods' size, and of
//! a `kcm-controller-manager` (the manager's own binary) when one was built beside kcm.

use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;

use super::fixtures::{controller, pod_document, poll_until, rss_anon, rss_file, vm_hwm, vm_rss};
use super::report::row;
use super::{Bench, Row};
use crate::api::{self, Pod, ReplicationController};

impl Bench {
    /// memory: peak RSS of a `kcm controller-manager` child managing the pods, then of a
    /// `kcm-controller-manager` child over the same pods.
    pub(super) async fn memory(&self) -> anyhow::Result<Vec<Row>> {
        let prefix = self.prefix("memory");
        let (n_controllers, each) = (self.sizes.memory_controllers, self.sizes.memory_pods_each);
        let mut documents = Vec::new();
        let mut bytes = 0usize;
        for i in 0..n_controllers {
            let rc = controller("memory", &format!("rc-{i:03}"), each as i64, 0);
            self.put_controller(&prefix, &rc).await?;
            for slot in 0..each as u64 {
                let (name, value) = pod_document(&rc, slot);
                bytes += value.len();
                documents.push((api::object_key::<Pod>(&prefix, "memory", &name), value));
            }
        }
        self.create_all(documents, 256).await?;
        let kcm = match &self.manager_binary {
            Some(binary) => binary.clone(),
            None => std::env::current_exe().context("find the kcm binary")?,
        };
        let mut rows = self
            .manager_memory(&prefix, &kcm, Some("controller-manager"), bytes)
            .await?;
        // The controller manager's own binary, when it was built beside kcm.
        let alone = kcm.with_file_name("kcm-controller-manager");
        if alone.is_file() {
            // Its first sync must write every status again.
            let registry = self.registry(&prefix).await?;
            for i in 0..n_controllers {
                registry
                    .guaranteed_update::<ReplicationController, _>(
                        "memory",
                        &format!("rc-{i:03}"),
                        |mut rc| {
                            rc.status.replicas = 0;
                            Ok(rc)
                        },
                    )
                    .await?;
            }
            rows.extend(self.manager_memory(&prefix, &alone, None, bytes).await?);
        }
        Ok(rows)
    }

    /// Runs `binary` (with `subcommand`, if any) as the controller manager over the memory
    /// scenario's controllers until every one reports its pods, and reports its RSS
    /// against `bytes` of pod documents.
    async fn manager_memory(
        &self,
        prefix: &str,
        binary: &std::path::Path,
        subcommand: Option<&str>,
        bytes: usize,
    ) -> anyhow::Result<Vec<Row>> {
        let (n_controllers, each) = (self.sizes.memory_controllers, self.sizes.memory_pods_each);
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let log = tempfile::NamedTempFile::new()?;
        let mut child = tokio::process::Command::new(binary)
            .args(subcommand)
            .args(["--prefix", prefix, "--port", &port.to_string()])
            .arg("--etcd-servers")
            .arg(self.client_config.endpoints.join(","))
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log.reopen()?)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("start {}", binary.display()))?;
        let pid = child.id().context("child pid")?;
        let registry = self.registry(prefix).await?;
        let converged = poll_until(
            Duration::from_secs(300),
            "the manager to sync every controller",
            || {
                let registry = registry.clone();
                async move {
                    let listed = registry
                        .list::<ReplicationController>(
                            Some("memory"),
                            &crate::labels::Selector::everything(),
                        )
                        .await?;
                    Ok(listed.items.len() == n_controllers
                        && listed
                            .items
                            .iter()
                            .all(|rc| rc.status.replicas == each as i64))
                }
            },
        )
        .await;
        let peak = vm_hwm(pid);
        let resident = vm_rss(pid);
        let (anon, file) = (rss_anon(pid), rss_file(pid));
        // SIGTERM, as an operator would stop it.
        // SAFETY: kill(2) on our own unreaped child.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGTERM);
        }
        let _ = tokio::time::timeout(Duration::from_secs(15), child.wait()).await;
        if let Err(e) = converged {
            let tail = std::fs::read_to_string(log.path()).unwrap_or_default();
            anyhow::bail!("{e}; manager log:\n{tail}");
        }
        let (peak, resident, anon, file) = (peak?, resident?, anon?, file?);
        let mib = |b: usize| b as f64 / (1024.0 * 1024.0);
        let name = match subcommand {
            Some(subcommand) => format!("kcm {subcommand}"),
            None => binary
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        };
        Ok(vec![
            row(
                "memory",
                format!("peak RSS (VmHWM), {name}, {n_controllers} × {each} pods"),
                "MiB",
                mib(peak),
                mib(bytes),
                format!("size of the {} pod documents", n_controllers * each),
                // Issue 33's target: the manager within its documents' size.
                Some((1.0, false)),
            ),
            row(
                "memory",
                format!("RSS (VmRSS) once converged, {name}, {n_controllers} × {each} pods"),
                "MiB",
                mib(resident),
                mib(bytes),
                format!("size of the {} pod documents", n_controllers * each),
                None,
            ),
            // What the pods cost, without the binary's code pages (the same at any size).
            row(
                "memory",
                format!(
                    "anonymous RSS (RssAnon) once converged, {name}, {n_controllers} × {each} \
                     pods; file pages (RssFile) {:.1} MiB more",
                    mib(file)
                ),
                "MiB",
                mib(anon),
                mib(bytes),
                format!("size of the {} pod documents", n_controllers * each),
                None,
            ),
        ])
    }
}
