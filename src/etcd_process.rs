//! A private etcd process: started from PATH on a loopback address with its own data dir,
//! health-checked, and stopped (SIGTERM, then SIGKILL) by its owner. `kcm up` and `kcm bench`
//! both start one.
//!
//! Invariants:
//! - a private etcd never outlives kcm: its owner stops it on every exit path, the child is
//!   killed when its handle is dropped, and the kernel kills it if kcm itself is killed
//!   (`PR_SET_PDEATHSIG`);
//! - a temporary data dir is named after the process that owns it
//!   (`kcm-etcd-{pid}-{start time}-XXXXXX`, see [`TempDirOwner`]), marked as temporary,
//!   and removed when that process ends, by itself or, after a SIGKILL, by the next
//!   [`remove_stale_data_dirs`]; a dir whose owner runs is never removed, nor one kcm did
//!   not name and mark (a `--data-dir`).

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::process::{Child, Command};

use crate::client::{self, ClientConfig};

/// Applied entries between etcd's snapshots: etcd 3.6's default, where 3.4's is 100,000.
/// etcd keeps the raft log since its last snapshot in memory (about a document per write),
/// and its Go GC's pace follows that heap: at 3.4's default the heap swung between about
/// 20 and 115 MB with where the last snapshot fell, and a `kcm bench` scale side met 22 to
/// 68 GCs in its second, its etcd CPU a pod moving with them (97 to 132 µs) whatever it
/// wrote. At 10,000 every side of 10,000 writes meets the same heap (63 to 70 GCs), and a
/// `kcm up` etcd under many writes keeps about a tenth of the raft log in memory
/// (docs/PERFORMANCE.md).
const SNAPSHOT_COUNT: u64 = 10_000;

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
                    .prefix(&TempDirOwner::this_process().prefix())
                    .tempdir()
                    .context("create a temporary data dir")?;
                let path = temp.path().to_path_buf();
                let marker = path.join(TEMP_DIR_MARKER);
                std::fs::write(
                    &marker,
                    "a private etcd's data dir: kcm up removes it once the process named in its name is gone\n",
                )
                .with_context(|| format!("create {}", marker.display()))?;
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
            .arg(format!("--snapshot-count={SNAPSHOT_COUNT}"))
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

    /// The etcd process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
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

// ---------------------------------------------------------------------------------------
// Temporary data dirs left behind

/// How every temporary data dir's name starts.
const TEMP_DIR_PREFIX: &str = "kcm-etcd-";

/// The file that marks a dir as a temporary data dir kcm made (never a `--data-dir`).
const TEMP_DIR_MARKER: &str = "kcm-temporary-data-dir";

/// The process a temporary data dir belongs to: its pid and its start time (in clock
/// ticks since boot, field 22 of `/proc/PID/stat`), so that a recycled pid is not taken
/// for the owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TempDirOwner {
    pub pid: u32,
    pub start_time: u64,
}

impl TempDirOwner {
    /// This process (start time 0 where `/proc` cannot tell).
    pub fn this_process() -> TempDirOwner {
        let pid = std::process::id();
        TempDirOwner {
            pid,
            start_time: process_start_time(pid).unwrap_or(0),
        }
    }

    /// The start of the names of this owner's dirs: `kcm-etcd-{pid}-{start time}-`.
    pub fn prefix(&self) -> String {
        format!("{TEMP_DIR_PREFIX}{}-{}-", self.pid, self.start_time)
    }

    /// The owner a dir's name records, if it is one of kcm's owned temporary dirs.
    pub fn from_dir_name(name: &str) -> Option<TempDirOwner> {
        let mut parts = name.strip_prefix(TEMP_DIR_PREFIX)?.splitn(3, '-');
        let pid = parts.next()?.parse().ok()?;
        let start_time = parts.next()?.parse().ok()?;
        parts.next().filter(|random| !random.is_empty())?;
        Some(TempDirOwner { pid, start_time })
    }

    /// Whether the owner still runs; `None` when this system has no `/proc` to tell.
    fn is_alive(&self) -> Option<bool> {
        std::fs::metadata("/proc/self/stat").ok()?;
        Some(process_start_time(self.pid) == Some(self.start_time))
    }
}

/// Start time of process `pid` in clock ticks since boot, from `/proc/PID/stat`; `None`
/// when it does not exist.
fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

/// Field 22 of a `/proc/PID/stat` line. The command name (field 2) is in parentheses and
/// may itself hold spaces and parentheses, so fields are counted after the last `)`.
fn parse_start_time(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Removes the temporary data dirs in `tmp` (normally `$TMPDIR`) whose owner process is
/// gone: kcm processes killed before they could remove theirs (SIGKILL, OOM). A dir is
/// removed only if kcm named it after its owner and marked it (or it is still empty), so
/// never a `--data-dir`; dirs named the way kcm named them before (`kcm-etcd-XXXXXX`)
/// record no owner and are left alone. Returns the dirs removed; a dir that cannot be
/// removed is logged and left.
pub fn remove_stale_data_dirs(tmp: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let Some(owner) = TempDirOwner::from_dir_name(&entry.file_name().to_string_lossy()) else {
            continue;
        };
        let is_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
        let marked = path.join(TEMP_DIR_MARKER).is_file()
            || std::fs::read_dir(&path).is_ok_and(|mut dir| dir.next().is_none());
        if !is_dir || !marked || owner.is_alive() != Some(false) {
            continue;
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => removed.push(path),
            Err(e) => tracing::warn!(dir = %path.display(), error = %e,
                "cannot remove the data dir of a kcm that is gone"),
        }
    }
    removed
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
    fn temp_dirs_are_named_after_their_owner() {
        let owner = TempDirOwner {
            pid: 4242,
            start_time: 1234567,
        };
        assert_eq!(owner.prefix(), "kcm-etcd-4242-1234567-");
        assert_eq!(
            TempDirOwner::from_dir_name(&format!("{}Ab3xYz", owner.prefix())),
            Some(owner)
        );
        // kcm's names before owners were recorded, a --data-dir, half a name.
        for name in [
            "kcm-etcd-Ab3xYz",
            "kcm-etcd-data",
            "kcm-etcd-4242-1234567-",
            "kcm-etcd-4242-x-Ab3xYz",
            "etcd-4242-1-Ab3xYz",
        ] {
            assert_eq!(TempDirOwner::from_dir_name(name), None, "{name}");
        }
    }

    #[test]
    fn the_start_time_is_read_after_the_command_name_whatever_it_holds() {
        let stat = "77 (odd) name) S 1 77 77 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10";
        assert_eq!(parse_start_time(stat), Some(98765));
        assert_eq!(parse_start_time("77 (short) S 1"), None);
        assert!(TempDirOwner::this_process().is_alive() != Some(false));
    }

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
