//! A private etcd process: started from PATH on a loopback address with its own data dir,
//! health-checked, and stopped (SIGTERM, then SIGKILL) by its owner. `kcm up` and `kcm bench`
//! both start one.
//!
//! Invariant: a private etcd never outlives kcm: its owner stops it on every exit path, the
//! child is killed when its handle is dropped, and the kernel kills it if kcm itself is
//! killed (`PR_SET_PDEATHSIG`).

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::process::{Child, Command};

use crate::client::{self, ClientConfig};

/// An etcd process kcm started and owns.
pub struct PrivateEtcd {
    child: Child,
    endpoint: String,
    /// Holds the temporary data dir (removed on drop) unless `--data-dir` was given.
    _temp: Option<tempfile::TempDir>,
    data_dir: PathBuf,
    log_path: PathBuf,
}

impl PrivateEtcd {
    /// Starts etcd listening for clients on `client_addr`, and waits until it answers.
    ///
    /// # Errors
    /// When the binary is missing (with install instructions), the address is taken, or
    /// etcd does not become healthy within 20 s (with the tail of its log).
    pub async fn start(
        binary: &Path,
        client_addr: SocketAddr,
        data_dir: Option<&Path>,
    ) -> anyhow::Result<PrivateEtcd> {
        let (temp, data_dir) = match data_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("create data dir {}", dir.display()))?;
                (None, dir.to_path_buf())
            }
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("kcm-etcd-")
                    .tempdir()
                    .context("create a temporary data dir")?;
                let path = temp.path().to_path_buf();
                (Some(temp), path)
            }
        };
        // The log lives next to, not inside, etcd's member dir.
        let log_path = data_dir.join("etcd.log");
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("create {}", log_path.display()))?;
        let peer_port = free_port(client_addr.ip())?;
        let client_url = format!("http://{client_addr}");
        let peer_url = format!("http://{}", SocketAddr::new(client_addr.ip(), peer_port));
        let mut command = Command::new(binary);
        command
            .arg("--name=kcm")
            .arg(format!(
                "--data-dir={}",
                data_dir.join("member-data").display()
            ))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=kcm={peer_url}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true);
        // If kcm dies without cleaning up (SIGKILL), the kernel kills etcd too.
        #[cfg(target_os = "linux")]
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                anyhow::anyhow!(
                    "etcd not found ({}): install it (Debian/Ubuntu: sudo apt-get install etcd-server; \
                     macOS: brew install etcd), pass --etcd-binary, or point --etcd-servers at a running etcd",
                    binary.display()
                )
            } else {
                anyhow::anyhow!("start {}: {e}", binary.display())
            }
        })?;
        let mut etcd = PrivateEtcd {
            child,
            endpoint: client_url,
            _temp: temp,
            data_dir,
            log_path,
        };
        etcd.wait_healthy(Duration::from_secs(20)).await?;
        Ok(etcd)
    }

    async fn wait_healthy(&mut self, limit: Duration) -> anyhow::Result<()> {
        let config = ClientConfig {
            connect_timeout: Duration::from_millis(500),
            request_timeout: Duration::from_millis(500),
            ..ClientConfig::new([self.endpoint.clone()])
        };
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait()? {
                anyhow::bail!(
                    "private etcd exited ({status}) before it was ready; its log:\n{}",
                    self.log_tail(20)
                );
            }
            if client::connect(&config).await.is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "private etcd did not answer at {} within {}; its log:\n{}",
                    self.endpoint,
                    humantime::format_duration(limit),
                    self.log_tail(20)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The client URL, e.g. `http://127.0.0.1:2379`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The last `lines` lines of etcd's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Stops etcd: SIGTERM, then SIGKILL after 5 s. Removes a temporary data dir.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: pid is our own child, not yet reaped.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
        }
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

fn free_port(ip: std::net::IpAddr) -> anyhow::Result<u16> {
    Ok(TcpListener::bind((ip, 0))
        .context("find a free port for etcd's peer URL")?
        .local_addr()?
        .port())
}

/// The socket address of an `http://host:port` URL, if it names this machine.
pub fn local_client_addr(url: &str) -> Option<SocketAddr> {
    let rest = url.strip_prefix("http://")?;
    let host_port = rest.trim_end_matches('/');
    let addr = host_port.to_socket_addrs().ok()?.next()?;
    (addr.ip().is_loopback()).then_some(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_urls_get_a_private_etcd() {
        assert_eq!(
            local_client_addr("http://127.0.0.1:2379"),
            Some("127.0.0.1:2379".parse().unwrap())
        );
        assert!(local_client_addr("http://localhost:2379").is_some());
        assert_eq!(local_client_addr("http://10.1.2.3:2379"), None);
        assert_eq!(local_client_addr("https://127.0.0.1:2379"), None);
    }
}
