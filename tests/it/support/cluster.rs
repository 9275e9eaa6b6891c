//! A throwaway multi-member etcd cluster per test ([`start_cluster`]), and a single member
//! that serves clients over TLS only ([`start_tls_etcd`]), on free loopback ports with temp
//! data dirs and one log file per member.
//!
//! Invariants (those of [`super::EtcdServer`], per member): a [`Cluster`] owns its processes;
//! dropping it SIGKILLs and reaps every member (paused ones too), and a drop during a panic
//! prints the tail of every member's log. Members get `PR_SET_PDEATHSIG`, so a test binary
//! killed from outside leaks no etcd. A member is only taken for ours once it serves a
//! linearizable read and lists our peer URL among the cluster's members.

use std::fs::{self, File};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::etcd::{find_etcd, has_exited, signal, stop_process};
use super::free_port;

/// How long a (re)started member may take to serve a linearizable read.
const HEALTHY_DEADLINE: Duration = Duration::from_secs(30);
/// How many fresh sets of ports [`start_cluster`] tries before giving up.
const START_ATTEMPTS: usize = 5;
/// How many log lines per member a failure prints.
const LOG_TAIL_LINES: usize = 60;

/// TLS settings of a member started by [`start_tls_etcd`]. Paths of PEM files.
#[derive(Clone, Debug)]
pub struct ServerTls {
    /// The CA etcd trusts for client certificates (`--trusted-ca-file`), which also signed
    /// `cert`.
    pub ca: PathBuf,
    /// etcd's serving certificate and key (`--cert-file`, `--key-file`).
    pub cert: PathBuf,
    pub key: PathBuf,
    /// A client certificate and key the harness uses for its own health probe; etcd runs
    /// with `--client-cert-auth`, so clients without a certificate signed by `ca` are
    /// refused.
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// What [`start_cluster_with`] starts.
#[derive(Clone, Debug, Default)]
pub struct ClusterOptions {
    /// Number of members; at least 1.
    pub members: usize,
    /// Serve clients on `https://` only, with client-certificate auth.
    pub tls: Option<ServerTls>,
    /// More etcd flags for every member, e.g. `--auth-token-ttl 2`.
    pub extra_args: Vec<String>,
}

/// Starts an `n`-member cluster on loopback and waits until every member serves reads.
///
/// Returns `None` (after a skip notice) when there is no etcd binary, unless `CI` is set,
/// where that is a failure, as with [`super::start_etcd`].
pub async fn start_cluster(n: usize) -> Option<Cluster> {
    start_cluster_with(ClusterOptions {
        members: n,
        ..ClusterOptions::default()
    })
    .await
}

/// Starts one member that serves clients only on `https://` with client-certificate auth.
pub async fn start_tls_etcd(tls: ServerTls) -> Option<Cluster> {
    start_cluster_with(ClusterOptions {
        members: 1,
        tls: Some(tls),
        ..ClusterOptions::default()
    })
    .await
}

/// Starts a cluster as `options` say; see [`start_cluster`].
pub async fn start_cluster_with(options: ClusterOptions) -> Option<Cluster> {
    Cluster::start(options).await
}

/// A running etcd cluster owned by one test. See the module docs for the drop contract.
#[derive(Debug)]
pub struct Cluster {
    bin: PathBuf,
    /// Holds every member's data dir and log; removed after the members are killed.
    dir: TempDir,
    members: Vec<Member>,
    tls: Option<ServerTls>,
    extra_args: Vec<String>,
    /// `--initial-cluster`, fixed once the ports are.
    initial_cluster: String,
}

/// One member: ports fixed for its life so URLs survive a restart.
#[derive(Debug)]
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    /// `None` once killed and reaped.
    child: Option<Child>,
}

/// A member exited while we waited for it.
struct Exited;

impl Cluster {
    async fn start(options: ClusterOptions) -> Option<Cluster> {
        let n = options.members;
        assert!(n >= 1, "a cluster has at least one member");
        let Some(bin) = find_etcd() else {
            if std::env::var_os("CI").is_some_and(|value| !value.is_empty()) {
                panic!(
                    "etcd not found on PATH and ETCD_BIN unset; CI requires it: \
                     apt-get install etcd-server"
                );
            }
            eprintln!("skipping: etcd not found (install etcd-server or set ETCD_BIN)");
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("kcm-cluster-")
            .tempdir()
            .expect("create cluster temp dir");
        let mut cluster = Cluster {
            bin,
            dir,
            members: Vec::new(),
            tls: options.tls,
            extra_args: options.extra_args,
            initial_cluster: String::new(),
        };
        for attempt in 0..START_ATTEMPTS {
            cluster.members = (0..n)
                .map(|i| Member {
                    name: format!("m{i}"),
                    client_port: free_port(),
                    peer_port: free_port(),
                    child: None,
                })
                .collect();
            cluster.initial_cluster = cluster
                .members
                .iter()
                .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
                .collect::<Vec<_>>()
                .join(",");
            for i in 0..n {
                cluster.spawn(i);
            }
            let mut ok = true;
            for i in 0..n {
                if cluster.wait_ready(i).await.is_err() {
                    ok = false;
                    break;
                }
            }
            if ok {
                return Some(cluster);
            }
            // A port was taken between free_port() and etcd's bind (or a member died for
            // another reason, which the last attempt reports): start over on fresh ports
            // and fresh data dirs.
            let in_use = (0..n).any(|i| cluster.log(i).contains("address already in use"));
            for i in 0..n {
                cluster.kill(i);
                let _ = fs::remove_dir_all(cluster.data_dir(i));
            }
            if !in_use || attempt + 1 == START_ATTEMPTS {
                panic!("etcd cluster did not start; logs:\n{}", cluster.log_tails());
            }
        }
        unreachable!("the loop returns or panics")
    }

    /// Client URLs of every member, in member order.
    pub fn endpoints(&self) -> Vec<String> {
        (0..self.members.len()).map(|i| self.endpoint(i)).collect()
    }

    /// [`Cluster::endpoints`] joined by commas, for `--etcd-servers`.
    pub fn endpoints_arg(&self) -> String {
        self.endpoints().join(",")
    }

    /// Client URL of member `i`: `http://127.0.0.1:PORT` (`https://` for a TLS member).
    pub fn endpoint(&self, i: usize) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.members[i].client_port)
    }

    fn client_addr(&self, i: usize) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.members[i].client_port))
    }

    fn peer_url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.members[i].peer_port)
    }

    fn data_dir(&self, i: usize) -> PathBuf {
        self.dir.path().join(&self.members[i].name)
    }

    fn log_path(&self, i: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("{}.log", self.members[i].name))
    }

    /// A client of every member (2 s connect timeout, no request timeout). Bound requests
    /// with `tokio::time::timeout` while a member is down.
    pub async fn client(&self) -> Client {
        connect(&self.endpoints(), self.client_options()).await
    }

    /// A client of member `i` only.
    pub async fn member_client(&self, i: usize) -> Client {
        connect(&[self.endpoint(i)], self.client_options()).await
    }

    fn client_options(&self) -> ConnectOptions {
        let options = ConnectOptions::new().with_connect_timeout(Duration::from_secs(2));
        match &self.tls {
            None => options,
            Some(tls) => options.with_tls(client_tls(tls)),
        }
    }

    /// SIGKILLs member `i` and reaps it; its data dir stays. A no-op if it is not running.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `i` again on its data dir and ports, and waits until it serves reads.
    pub async fn restart(&mut self, i: usize) {
        self.kill(i);
        self.spawn(i);
        if self.wait_ready(i).await.is_err() {
            panic!("member {i} exited on restart; logs:\n{}", self.log_tails());
        }
    }

    /// Freezes member `i` with SIGSTOP and returns once all its threads have stopped: its
    /// connections stay open but nothing is answered. Undo with [`Cluster::resume`].
    pub fn pause(&self, i: usize) {
        stop_process(self.running(i));
    }

    /// Thaws member `i` with SIGCONT.
    pub fn resume(&self, i: usize) {
        signal(self.running(i), libc::SIGCONT);
    }

    /// The number of watchers member `i` serves right now (etcd's
    /// `etcd_debugging_mvcc_watcher_total` gauge), read from its `/metrics` over plain HTTP.
    /// `None` if it does not answer within 2 s.
    pub async fn watchers(&self, i: usize) -> Option<u64> {
        assert!(self.tls.is_none(), "metrics are read over plain HTTP");
        let addr = self.client_addr(i);
        let read = async {
            let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
            let request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
            stream.write_all(request.as_bytes()).await.ok()?;
            let mut response = Vec::new();
            stream.read_to_end(&mut response).await.ok()?;
            let text = String::from_utf8_lossy(&response).into_owned();
            text.lines().find_map(|line| {
                line.strip_prefix("etcd_debugging_mvcc_watcher_total ")?
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .map(|v| v as u64)
            })
        };
        tokio::time::timeout(Duration::from_secs(2), read)
            .await
            .ok()
            .flatten()
    }

    /// Everything member `i` has logged so far, across restarts.
    pub fn log(&self, i: usize) -> String {
        fs::read(self.log_path(i))
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }

    fn log_tails(&self) -> String {
        (0..self.members.len())
            .map(|i| {
                let log = self.log(i);
                let lines: Vec<&str> = log.lines().collect();
                format!(
                    "---- {} ({}) ----\n{}",
                    self.members[i].name,
                    self.endpoint(i),
                    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn running(&self, i: usize) -> &Child {
        self.members[i]
            .child
            .as_ref()
            .unwrap_or_else(|| panic!("member {i} is not running"))
    }

    fn spawn(&mut self, i: usize) {
        assert!(self.members[i].child.is_none(), "member {i} already runs");
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path(i))
            .expect("open member log file");
        let stderr = log.try_clone().expect("clone member log handle");
        let client_url = self.endpoint(i);
        let peer_url = self.peer_url(i);
        let mut command = Command::new(&self.bin);
        command
            .args(["--name", &self.members[i].name])
            .arg("--data-dir")
            .arg(self.data_dir(i))
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", "new"])
            .args([
                "--initial-cluster-token",
                &format!("kcm-test-{}", self.members[0].peer_port),
            ])
            // Faster than the defaults (100 ms, 1 s), so a lost raft leader is replaced
            // within about half a second, yet slow enough for a loaded 2-core machine.
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(["--snapshot-count", "1000"])
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr);
        if let Some(tls) = &self.tls {
            command
                .arg("--cert-file")
                .arg(&tls.cert)
                .arg("--key-file")
                .arg(&tls.key)
                .arg("--trusted-ca-file")
                .arg(&tls.ca)
                .arg("--client-cert-auth");
        }
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        self.members[i].child = Some(
            command
                .spawn()
                .unwrap_or_else(|err| panic!("spawn {}: {err}", self.bin.display())),
        );
    }

    /// Polls until member `i` serves a linearizable read and is ours; `Err(Exited)` as soon
    /// as it or another running member exits (it cannot have a quorum then). Panics after
    /// 30 s.
    async fn wait_ready(&self, i: usize) -> Result<(), Exited> {
        let deadline = tokio::time::Instant::now() + HEALTHY_DEADLINE;
        let mut last_error = String::from("client port not listening yet");
        loop {
            if self
                .members
                .iter()
                .any(|m| m.child.as_ref().is_some_and(has_exited))
            {
                return Err(Exited);
            }
            if TcpStream::connect(self.client_addr(i)).is_ok() {
                match self.probe(i).await {
                    Ok(()) => return Ok(()),
                    Err(err) => last_error = err,
                }
            }
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "member {i} not healthy after {HEALTHY_DEADLINE:?} (last error: {last_error}); \
                     logs:\n{}",
                    self.log_tails()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// One linearizable read through member `i` alone, and a check that the cluster it
    /// belongs to has our peer URL (not another test's etcd on a recycled port).
    async fn probe(&self, i: usize) -> Result<(), String> {
        let peer_url = self.peer_url(i);
        let read = async {
            let mut client =
                Client::connect([self.endpoint(i)], Some(self.client_options())).await?;
            client.get("/kcm-test/health", None).await?;
            client.member_list().await
        };
        let members = match tokio::time::timeout(Duration::from_secs(2), read).await {
            Ok(Ok(members)) => members,
            Ok(Err(err)) => return Err(err.to_string()),
            Err(_) => return Err("read timed out after 2s".to_owned()),
        };
        let ours = members
            .members()
            .iter()
            .any(|member| member.peer_urls().contains(&peer_url));
        if ours {
            Ok(())
        } else {
            Err(format!("member {i} belongs to another etcd: {members:?}"))
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
        if std::thread::panicking() {
            eprintln!(
                "---- etcd cluster logs ----\n{}\n---- end ----",
                self.log_tails()
            );
        }
    }
}

/// The TLS settings the harness's own clients use with a [`ServerTls`] member.
pub fn client_tls(tls: &ServerTls) -> TlsOptions {
    let read =
        |path: &Path| fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    TlsOptions::new()
        .ca_certificate(Certificate::from_pem(read(&tls.ca)))
        .identity(Identity::from_pem(
            read(&tls.client_cert),
            read(&tls.client_key),
        ))
}

async fn connect(endpoints: &[String], options: ConnectOptions) -> Client {
    Client::connect(endpoints, Some(options))
        .await
        .unwrap_or_else(|err| panic!("connect to etcd at {endpoints:?}: {err}"))
}
