//! One throwaway single-member etcd per test, on free loopback ports, with a temp data dir and a
//! log file.
//!
//! Invariants: an [`EtcdServer`] owns its process; dropping it SIGKILLs and reaps the process
//! (no zombies, no leaked servers), and a drop during a panic prints the tail of etcd's log to
//! stderr, the way redis-rs' test harness does. The process also gets `PR_SET_PDEATHSIG`, so a
//! test binary killed from outside does not leave etcd running.

use std::fs::{self, File};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use etcd_client::{Client, CompactionOptions, ConnectOptions};
use tempfile::TempDir;

use super::free_port;

/// How long [`EtcdServer::wait_healthy`] (and so start and restart) waits for a leader.
const HEALTHY_DEADLINE: Duration = Duration::from_secs(20);
/// How long [`EtcdServer::stop`] waits after SIGTERM before it falls back to SIGKILL.
const STOP_DEADLINE: Duration = Duration::from_secs(10);
/// Connect timeout for clients made by [`EtcdServer::client`].
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How many fresh port pairs [`start_etcd`] tries before giving up.
const START_ATTEMPTS: usize = 5;
/// How many log lines a failure prints.
const LOG_TAIL_LINES: usize = 100;

/// Starts a fresh single-member etcd and waits until it has a leader and serves reads.
///
/// The binary is `$ETCD_BIN` if set, else `etcd` on `PATH`. Without one, this returns `None`
/// after printing a skip notice, except when `CI` is set (non-empty), where a missing etcd is a
/// failure (cargo's rule). Use it as
/// `let Some(etcd) = start_etcd().await else { return };`.
///
/// Panics if etcd does not become healthy within 20 s, with the tail of its log.
pub async fn start_etcd() -> Option<EtcdServer> {
    start_etcd_with(&[]).await
}

/// [`start_etcd`] with more command-line flags for etcd, e.g.
/// `["--quota-backend-bytes", "1048576"]`; they are kept across restarts.
pub async fn start_etcd_with(flags: &[&str]) -> Option<EtcdServer> {
    let bin = etcd_binary()?;
    let dir = tempfile::Builder::new()
        .prefix("kcm-etcd-")
        .tempdir()
        .expect("create etcd temp dir");
    let mut server = EtcdServer {
        bin,
        data_dir: dir.path().join("data"),
        log_path: dir.path().join("etcd.log"),
        _dir: dir,
        client_port: 0,
        peer_port: 0,
        flags: flags.iter().map(|flag| flag.to_string()).collect(),
        child: None,
    };
    for _ in 0..START_ATTEMPTS {
        // free_port() closes its probe listener, so another process can take the port before
        // etcd binds it; etcd then exits at once (and the probe refuses the other server) and
        // we try a fresh pair.
        server.client_port = free_port();
        server.peer_port = free_port();
        if server.client_port == server.peer_port {
            continue;
        }
        match server.launch().await {
            Ok(()) => return Some(server),
            Err(PortInUse) => {
                // etcd binds its listeners before it writes the data dir, but make sure the
                // next attempt does not inherit a member with the old peer URL.
                let _ = fs::remove_dir_all(&server.data_dir);
            }
        }
    }
    panic!(
        "etcd could not bind free ports in {START_ATTEMPTS} attempts; log tail:\n{}",
        server.log_tail()
    );
}

/// A running single-member etcd owned by one test. See the module docs for the drop contract.
#[derive(Debug)]
pub struct EtcdServer {
    /// The etcd binary, kept so [`EtcdServer::restart`] runs the same one.
    bin: PathBuf,
    /// `<temp dir>/data`, etcd's `--data-dir`; survives kill and restart.
    data_dir: PathBuf,
    /// `<temp dir>/etcd.log`: etcd's stdout and stderr, appended to across restarts.
    log_path: PathBuf,
    /// Owns the temp dir; removed after the process is killed (fields drop after `Drop::drop`).
    _dir: TempDir,
    /// Client port on 127.0.0.1; fixed for the server's life so endpoints survive a restart.
    client_port: u16,
    /// Peer port on 127.0.0.1; fixed, because the member's peer URL is stored in the data dir.
    peer_port: u16,
    /// Flags the test added to the harness's own ([`start_etcd_with`]).
    flags: Vec<String>,
    /// The process, `None` after [`EtcdServer::kill`] or [`EtcdServer::stop`] reaped it.
    child: Option<Child>,
}

/// Launch failed because a port was taken; the caller picks new ports or retries.
struct PortInUse;

/// The process exited while we waited for it to become healthy.
struct Exited;

impl EtcdServer {
    /// The client URL, `http://127.0.0.1:PORT`, for `Client::connect` or `--etcd-servers`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.client_addr())
    }

    /// The client listener's address, e.g. as a [`super::FaultProxy`] target.
    pub fn client_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.client_port))
    }

    /// etcd's own `/metrics` (Prometheus text), served over plain HTTP on the client URL.
    pub async fn metrics(&self) -> String {
        match super::kcm::http_get(self.client_port, "/metrics").await {
            Some((200, body)) => body,
            other => panic!("GET {}/metrics: {other:?}", self.endpoint()),
        }
    }

    /// The value of one series of etcd's `/metrics`, e.g.
    /// `etcd_debugging_mvcc_watcher_total`; 0 when it is not exported.
    pub async fn metric(&self, series: &str) -> f64 {
        super::kcm::metric_value(&self.metrics().await, series)
    }

    /// etcd's data dir (`--data-dir`), kept across [`EtcdServer::kill`] and
    /// [`EtcdServer::restart`].
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// A new client connected to [`EtcdServer::endpoint`] with a 2 s connect timeout and no
    /// request timeout (a request timeout would also end watches).
    ///
    /// etcd-client connects lazily, so this succeeds even while etcd is down; the first request
    /// then waits for the endpoint to come back. Bound such requests with `tokio::time::timeout`.
    pub async fn client(&self) -> Client {
        connect(&self.endpoint()).await
    }

    /// Waits until etcd serves a linearizable read (so it has a leader), polling every 20 ms.
    ///
    /// Panics after 20 s, or as soon as the process exits, with the tail of the log.
    pub async fn wait_healthy(&self) {
        if self.wait_ready().await.is_err() {
            panic!(
                "etcd on {} exited before becoming healthy; log tail:\n{}",
                self.endpoint(),
                self.log_tail()
            );
        }
    }

    /// SIGKILLs etcd and reaps it. A no-op if it is not running. The data dir stays.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // kill() fails only if the process was already reaped, which take() rules out; an
            // exited but unreaped process is still killable (it is a zombie) and wait() reaps it.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills etcd if it is running and starts the same member again on the same data dir and the
    /// same ports, then waits until it is healthy: "etcd crashed mid-stream and came back".
    /// Existing clients reconnect to the same endpoint.
    ///
    /// Panics if etcd does not come back within 20 s.
    pub async fn restart(&mut self) {
        self.kill();
        // The old process is reaped, so its listeners are closed; only an unrelated process that
        // grabbed a port in between can make the bind fail. Give it a moment to go away.
        for _ in 0..START_ATTEMPTS {
            match self.launch().await {
                Ok(()) => return,
                Err(PortInUse) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        panic!(
            "etcd could not rebind {} on restart; log tail:\n{}",
            self.endpoint(),
            self.log_tail()
        );
    }

    /// Saves a snapshot of the store to `path` with `etcdctl snapshot save`, as an operator
    /// backs etcd up.
    pub fn snapshot(&self, path: &Path) {
        let path = path.to_str().expect("a UTF-8 snapshot path");
        self.etcdctl(&["snapshot", "save", path]);
    }

    /// Runs `etcdctl --endpoints {endpoint} {args}` (API v3), as an operator would, and
    /// returns its stdout. Panics when it fails, with its stderr.
    pub fn etcdctl(&self, args: &[&str]) -> String {
        let output = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.endpoint()])
            .args(args)
            .output()
            .expect("run etcdctl (etcd-client package)");
        assert!(
            output.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Stops etcd, replaces its data dir with `snapshot` restored by `etcdctl snapshot
    /// restore` (same member name and peer URL), and starts it again on the same ports: "the
    /// store was restored from a backup". Its revision is back at the snapshot's.
    pub async fn restore_snapshot(&mut self, snapshot: &Path) {
        self.stop().await;
        fs::remove_dir_all(&self.data_dir).expect("remove the old data dir");
        let peer_url = self.peer_url();
        let output = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["snapshot", "restore"])
            .arg(snapshot)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--name", "default"])
            .args(["--initial-cluster", &format!("default={peer_url}")])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .output()
            .expect("run etcdctl (etcd-client package)");
        assert!(
            output.status.success(),
            "etcdctl snapshot restore: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        self.restart().await;
    }

    /// Sends SIGTERM (a graceful shutdown) and waits for the process to exit; falls back to
    /// SIGKILL after 10 s. A no-op if it is not running.
    pub async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        signal(&child, libc::SIGTERM);
        let deadline = tokio::time::Instant::now() + STOP_DEADLINE;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return;
                }
            }
        }
    }

    /// Freezes etcd with SIGSTOP and returns once all its threads have stopped: connections stay
    /// open but nothing is answered, like a hung server. Undo with [`EtcdServer::resume`];
    /// dropping a paused server is fine.
    ///
    /// Panics if etcd is not running.
    pub fn pause(&self) {
        stop_process(self.running());
    }

    /// Thaws a server frozen by [`EtcdServer::pause`] with SIGCONT.
    ///
    /// Panics if etcd is not running.
    pub fn resume(&self) {
        signal(self.running(), libc::SIGCONT);
    }

    /// Compacts the key-value history at the current revision, physically (the call returns once
    /// the old revisions are gone), and returns that revision. Reads and watches at older
    /// revisions then fail with "required revision has been compacted".
    pub async fn compact(&self) -> i64 {
        let mut client = self.client().await;
        let revision = client
            .get("/kcm-test/compact-probe", None)
            .await
            .expect("read the current revision before compacting")
            .header()
            .expect("etcd responses carry a header")
            .revision();
        client
            .compact(revision, Some(CompactionOptions::new().with_physical()))
            .await
            .unwrap_or_else(|err| panic!("compact at revision {revision}: {err}"));
        revision
    }

    /// Everything etcd has logged so far, across restarts.
    pub fn log(&self) -> String {
        fs::read(&self.log_path)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }

    /// The last lines of [`EtcdServer::log`], for failure messages.
    fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
    }

    fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }

    fn running(&self) -> &Child {
        self.child.as_ref().expect("etcd is not running")
    }

    /// Spawns etcd with the current ports and waits until it is healthy.
    async fn launch(&mut self) -> Result<(), PortInUse> {
        assert!(self.child.is_none(), "launch while etcd is still running");
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("open etcd log file");
        let stderr = log.try_clone().expect("clone etcd log file handle");
        let log_start = log.metadata().map_or(0, |meta| meta.len());
        let client_url = self.endpoint();
        let peer_url = self.peer_url();
        let mut command = Command::new(&self.bin);
        command
            .args(["--name", "default"])
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("default={peer_url}")])
            // A single member only needs the election timeout to pass once, at start and at
            // restart (where there is no tick fast-forward): 200 ms instead of 1 s.
            .args(["--heartbeat-interval", "20", "--election-timeout", "200"])
            // etcd 3.4 has no --unsafe-no-fsync (that is 3.5); a small snapshot count keeps the
            // WAL replay on restart short.
            .args(["--snapshot-count", "1000"])
            .args(&self.flags)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr);
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            command.pre_exec(|| {
                // Kill etcd if the thread that spawned it dies, so a test binary killed from
                // outside (e.g. by a CI timeout) does not leak servers.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        self.child = Some(
            command
                .spawn()
                .unwrap_or_else(|err| panic!("spawn {}: {err}", self.bin.display())),
        );
        if self.wait_ready().await.is_ok() {
            return Ok(());
        }
        let mut child = self.child.take().expect("etcd was running");
        let status = child.wait().expect("reap etcd");
        let log = self.log();
        let this_run = log.get(log_start as usize..).unwrap_or(&log);
        if this_run.contains("address already in use") {
            return Err(PortInUse);
        }
        panic!(
            "etcd on {} exited ({status}) before becoming healthy; log tail:\n{}",
            self.endpoint(),
            self.log_tail()
        );
    }

    /// Polls until etcd serves a linearizable read; `Err(Exited)` as soon as the process exits
    /// (left unreaped for the caller). Panics after 20 s.
    async fn wait_ready(&self) -> Result<(), Exited> {
        let deadline = tokio::time::Instant::now() + HEALTHY_DEADLINE;
        let mut last_error = String::from("client port not listening yet");
        loop {
            if has_exited(self.running()) {
                return Err(Exited);
            }
            // A plain TCP connect fails fast while the port is closed, whereas an etcd-client
            // request would wait for the lazy channel to connect.
            if TcpStream::connect(self.client_addr()).is_ok() {
                match probe(&self.endpoint(), &self.peer_url()).await {
                    Ok(()) => return Ok(()),
                    Err(err) => last_error = err,
                }
            }
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "etcd on {} not healthy after {HEALTHY_DEADLINE:?} (last error: {last_error}); \
                     log tail:\n{}",
                    self.endpoint(),
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "---- etcd log ({}, last {LOG_TAIL_LINES} lines) ----\n{}\n---- end of etcd log ----",
                self.endpoint(),
                self.log_tail()
            );
        }
    }
}

/// The etcd binary for tests that start etcd through `kcm` itself (`kcm up`): `None` with
/// a skip notice when missing, a panic when `CI` is set, as for [`start_etcd`].
pub fn etcd_binary() -> Option<PathBuf> {
    let bin = find_etcd();
    if bin.is_none() {
        if std::env::var_os("CI").is_some_and(|value| !value.is_empty()) {
            panic!(
                "etcd not found on PATH and ETCD_BIN unset; CI requires it: \
                 apt-get install etcd-server"
            );
        }
        eprintln!("skipping: etcd not found (install etcd-server or set ETCD_BIN)");
    }
    bin
}

/// `$ETCD_BIN` if set and non-empty, else the first executable `etcd` on `PATH`.
pub(super) fn find_etcd() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("ETCD_BIN").filter(|bin| !bin.is_empty()) {
        return Some(PathBuf::from(bin));
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("etcd"))
        .find(|path| {
            fs::metadata(path)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

async fn connect(endpoint: &str) -> Client {
    let options = ConnectOptions::new().with_connect_timeout(CONNECT_TIMEOUT);
    Client::connect([endpoint], Some(options))
        .await
        .unwrap_or_else(|err| panic!("connect to etcd at {endpoint}: {err}"))
}

/// One linearizable read with a fresh client, bounded to 1 s, that also checks the server is
/// ours: its member must have our peer URL. Without that check, a server that another process
/// started on the same client port (our etcd then exits with "address already in use") would
/// pass for ours.
async fn probe(endpoint: &str, peer_url: &str) -> Result<(), String> {
    let read = async {
        let mut client = connect(endpoint).await;
        client.get("/kcm-test/health", None).await?;
        client.member_list().await
    };
    let members = match tokio::time::timeout(Duration::from_secs(1), read).await {
        Ok(Ok(members)) => members,
        Ok(Err(err)) => return Err(err.to_string()),
        Err(_) => return Err("read timed out after 1s".to_owned()),
    };
    let ours = members
        .members()
        .iter()
        .any(|member| member.peer_urls().iter().any(|url| url == peer_url));
    if ours {
        Ok(())
    } else {
        Err(format!("{endpoint} is served by another etcd: {members:?}"))
    }
}

/// Whether `child` has exited, without reaping it (so `Child::wait` still works).
pub(super) fn has_exited(child: &Child) -> bool {
    let pid = libc::id_t::from(child.id());
    // SAFETY: an all-zero siginfo_t is a valid value for waitid to overwrite.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is a valid, writable siginfo_t; the pid is our unreaped child.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    assert_eq!(rc, 0, "waitid({pid}): {}", io::Error::last_os_error());
    // With WNOHANG, waitid leaves si_pid zero when the child is still running.
    // SAFETY: waitid filled `info` (or left it zeroed), so si_pid is initialised.
    unsafe { info.si_pid() != 0 }
}

pub(super) fn signal(child: &Child, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits in pid_t");
    // SAFETY: kill(2) has no memory-safety preconditions. The pid is our unreaped child, so it
    // cannot have been recycled for another process.
    let rc = unsafe { libc::kill(pid, signal) };
    assert_eq!(
        rc,
        0,
        "kill({pid}, {signal}): {}",
        io::Error::last_os_error()
    );
}

/// Sends SIGSTOP to `child` and returns once every one of its threads has stopped (or it
/// died). kill(2) only queues the stop: under load an etcd thread can still answer a request
/// after it returns. WNOWAIT leaves the state for std's own wait.
pub(super) fn stop_process(child: &Child) {
    signal(child, libc::SIGSTOP);
    let pid = libc::id_t::from(child.id());
    // SAFETY: an all-zero siginfo_t is a valid value for waitid to overwrite.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `info` is a valid, writable siginfo_t; the pid is our unreaped child.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid,
                &mut info,
                libc::WSTOPPED | libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            return;
        }
        let err = io::Error::last_os_error();
        assert_eq!(
            err.kind(),
            io::ErrorKind::Interrupted,
            "waitid({pid}) for SIGSTOP: {err}"
        );
    }
}
