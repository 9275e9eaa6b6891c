//! The one way tests run the `kcm` binary ([`kcm_command`]): long-running processes
//! ([`Kcm`], [`start_manager`], [`spawn_kubelet`]; `kcm apiserver` is in `super::apiserver`)
//! and one-shot commands, against a test etcd ([`kcm`], [`kcm_stdin`], [`command`] then
//! [`collect`]) or with any arguments ([`run_kcm`]), all returning an [`Output`].
//!
//! Invariants: a [`Kcm`] owns its process (SIGKILLed on drop, `PR_SET_PDEATHSIG` against a
//! test binary killed from outside); its stderr is echoed to the test's output, prefixed
//! with its pid, and kept for greps. Children never inherit `RUST_LOG`, `KCM_ETCD_*`: every
//! test launches kcm through [`kcm_command`].

use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use super::{free_port, kcm_bin};

/// Environment variables a test's kcm must not inherit from the developer's shell.
const SCRUBBED_ENV: [&str; 4] = [
    "RUST_LOG",
    "KCM_ETCD_SERVERS",
    "KCM_ETCD_USER",
    "KCM_ETCD_PASSWORD",
];

/// A running `kcm controller-manager`, killed on drop.
pub struct Kcm {
    child: Child,
    pid: u32,
    /// Port of its status endpoint on 127.0.0.1.
    port: u16,
    /// Everything it has written to stderr so far.
    log: Arc<Mutex<String>>,
    /// Copies stderr into `log`; aborted on drop.
    pump: JoinHandle<()>,
}

impl Kcm {
    /// Starts `kcm controller-manager --port {free} {args}` with `env` set and waits until
    /// its status endpoint answers (any status).
    pub async fn start(args: &[&str], env: &[(&str, &str)]) -> Kcm {
        let port = free_port();
        let port_arg = port.to_string();
        let mut all = vec!["controller-manager", "--port", port_arg.as_str()];
        all.extend_from_slice(args);
        let mut kcm = Kcm::spawn(&all, env);
        kcm.port = port;
        let deadline = Instant::now() + Duration::from_secs(30);
        while http_get(port, "/healthz").await.is_none() {
            kcm.assert_running();
            assert!(
                Instant::now() < deadline,
                "kcm controller-manager did not serve /healthz within 30s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        kcm
    }

    /// Starts `kcm {args}` (any command) with `env` set, without waiting for anything.
    /// Its stderr is echoed to the test's captured output line by line, so a failing or
    /// timed-out test shows it, and kept for [`Kcm::log`].
    pub fn spawn(args: &[&str], env: &[(&str, &str)]) -> Kcm {
        let mut command = kcm_command();
        command
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("spawn kcm {args:?}: {e}"));
        let pid = child.id().expect("a fresh child has a pid");
        let name = args.first().copied().unwrap_or("").to_owned();
        let stderr = child.stderr.take().expect("stderr is piped");
        let log = Arc::new(Mutex::new(String::new()));
        let pump = tokio::spawn({
            let log = log.clone();
            async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    eprintln!("[kcm {name} {pid}] {line}");
                    let mut log = log.lock().expect("log lock");
                    log.push_str(&line);
                    log.push('\n');
                }
            }
        });
        Kcm {
            child,
            pid,
            port: 0,
            log,
            pump,
        }
    }

    /// Port of the status endpoint (0 for commands other than controller-manager).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Lines of the log at WARN level that mention `needle`.
    pub fn warnings_about(&self, needle: &str) -> Vec<String> {
        self.log()
            .lines()
            .filter(|line| line.contains(" WARN ") && line.contains(needle))
            .map(str::to_owned)
            .collect()
    }

    /// Sends SIGTERM and waits (up to 15 s) for the exit status.
    pub async fn terminate(&mut self) -> ExitStatus {
        self.signal(libc::SIGTERM);
        self.wait_exit(Duration::from_secs(15)).await
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// What it has logged so far.
    pub fn log(&self) -> String {
        self.log.lock().expect("log lock").clone()
    }

    /// Panics if the process has exited.
    pub fn assert_running(&mut self) {
        let status = self.child.try_wait().expect("poll kcm");
        assert!(status.is_none(), "kcm {} exited with {status:?}", self.pid);
    }

    /// Sends `signal` (SIGTERM, SIGKILL, SIGSTOP, SIGCONT).
    pub fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.pid).expect("pid fits in pid_t");
        // SAFETY: kill(2) has no memory-safety preconditions; the pid is our unreaped child.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "kill({pid}, {signal})");
    }

    /// Waits for the process to exit, panicking after `limit`, then for the rest of its log.
    pub async fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let status = match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(status) => status.expect("wait for kcm"),
            Err(_) => panic!("kcm {} did not exit within {limit:?}", self.pid),
        };
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.pump).await;
        status
    }

    /// `GET /healthz`: status code and body, `None` if nothing answered within 5 s.
    pub async fn healthz(&self) -> Option<(u16, String)> {
        http_get(self.port, "/healthz").await
    }

    /// Whether `/healthz` answers 200 with `leader: true`.
    pub async fn is_leader(&self) -> bool {
        matches!(self.healthz().await, Some((200, body)) if body.contains("leader: true"))
    }

    /// Whether `/healthz` answers 200 as a standby.
    pub async fn is_standby(&self) -> bool {
        matches!(self.healthz().await, Some((200, body)) if body.contains("leader: false"))
    }

    /// `GET /metrics`.
    pub async fn metrics(&self) -> String {
        match http_get(self.port, "/metrics").await {
            Some((200, body)) => body,
            other => panic!("GET /metrics: {other:?}"),
        }
    }

    /// The value of one series, e.g. `kcm_leader`; 0 when it is not exported.
    pub async fn metric(&self, series: &str) -> f64 {
        metric_value(&self.metrics().await, series)
    }
}

impl Drop for Kcm {
    fn drop(&mut self) {
        // kill_on_drop SIGKILLs the child when `child` drops, right after this; SIGKILL
        // also ends a process stopped by SIGSTOP.
        self.pump.abort();
    }
}

/// Starts `kcm controller-manager --etcd-servers {endpoint} {args}` and waits until its
/// status endpoint answers.
pub async fn start_manager(endpoint: &str, args: &[&str]) -> Kcm {
    let mut all = vec!["--etcd-servers", endpoint];
    all.extend_from_slice(args);
    Kcm::start(&all, &[]).await
}

/// Spawns `kcm --etcd-servers {endpoint} kubelet --node {node} --start-delay
/// {start_delay}`: a simulated node whose pods run after `start_delay` and are Ready at
/// once.
pub fn spawn_kubelet(endpoint: &str, node: &str, start_delay: &str) -> Kcm {
    Kcm::spawn(
        &[
            "--etcd-servers",
            endpoint,
            "kubelet",
            "--node",
            node,
            "--start-delay",
            start_delay,
        ],
        &[],
    )
}

/// What a one-shot `kcm` command did.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Asserts exit 0 and returns stdout.
    #[track_caller]
    pub fn success(&self) -> &str {
        assert_eq!(self.status.code(), Some(0), "kcm failed: {self:#?}");
        &self.stdout
    }

    /// Asserts exit `code` and returns stderr.
    #[track_caller]
    pub fn failure(&self, code: i32) -> &str {
        assert_eq!(
            self.status.code(),
            Some(code),
            "kcm should have exited {code}: {self:#?}"
        );
        &self.stderr
    }

    /// Asserts exit 1 with exactly one line on stderr, `kcm: ` then a message containing
    /// `expected`.
    #[track_caller]
    pub fn fails_with(&self, expected: &str) {
        let stderr = self.failure(1);
        assert_eq!(
            stderr.lines().count(),
            1,
            "one error line expected: {self:#?}"
        );
        assert!(
            stderr.starts_with("kcm: ") && stderr.contains(expected),
            "stderr should contain {expected:?}: {self:#?}"
        );
    }
}

impl From<std::process::Output> for Output {
    fn from(output: std::process::Output) -> Output {
        Output {
            status: output.status,
            stdout: String::from_utf8(output.stdout).expect("kcm's stdout is UTF-8"),
            stderr: String::from_utf8(output.stderr).expect("kcm's stderr is UTF-8"),
        }
    }
}

/// Runs `kcm --etcd-servers {endpoint} {args}` to the end.
pub async fn kcm(endpoint: &str, args: &[&str]) -> Output {
    collect(command(endpoint, args).spawn().expect("spawn kcm")).await
}

/// Runs `kcm --etcd-servers {endpoint} {args}` with `input` on its stdin.
pub async fn kcm_stdin(endpoint: &str, args: &[&str], input: &str) -> Output {
    let mut child = command(endpoint, args)
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn kcm");
    let mut stdin = child.stdin.take().expect("stdin is piped");
    stdin
        .write_all(input.as_bytes())
        .await
        .expect("write stdin");
    drop(stdin);
    collect(child).await
}

/// A `kcm --etcd-servers {endpoint} {args}` command with stdout and stderr piped, for a test
/// that starts it, does something meanwhile, then [`collect`]s it.
pub fn command(endpoint: &str, args: &[&str]) -> Command {
    let mut command = kcm_command();
    command
        .args(["--etcd-servers", endpoint])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Waits for a child of [`command`] to exit, with everything it wrote.
pub async fn collect(child: Child) -> Output {
    child.wait_with_output().await.expect("wait for kcm").into()
}

/// Runs `kcm --etcd-servers {endpoint} {args}` to the end, as [`kcm`] does, with its
/// peak resident set in KiB as `wait4` reports it (`ru_maxrss`): the whole life of the
/// process, what a user timing the command sees. Its output goes through temp files, so
/// a large one costs the test no pipe to drain. `None` (the test skips; under `CI` it
/// fails) without a Python interpreter to start it from.
///
/// Not started from this process: Linux counts a process's peak from before its exec,
/// so a child forked (or spawned) from the test harness reports at least the harness's
/// own peak, which the integration suite drives past 100 MiB while its other tests run
/// (a 300 MiB parent made `kcm --version` report 317 MiB, against 12.5 MiB from a small
/// one). The peak is taken instead by a Python interpreter that starts kcm and waits for
/// it (`$KCM_PYTHON`, else `python3`), as a shell's `/usr/bin/time` would: what kcm
/// inherits from it is the interpreter's own size, about 10 MiB, within kcm's figure.
pub async fn kcm_peak_rss(endpoint: &str, args: &[&str]) -> Option<(Output, u64)> {
    // Forks kcm, sets it to die with the interpreter (which dies with the harness), waits
    // for it and writes its raw wait status and `ru_maxrss` to the file in argv[1].
    const STARTER: &str = r#"
import ctypes, os, sys
report, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as f:
    f.write(f"{status} {usage.ru_maxrss}")
"#;
    let python = std::env::var("KCM_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let report = tempfile::NamedTempFile::new().expect("temp file for the report");
    let mut command = std::process::Command::new(&python);
    for name in SCRUBBED_ENV {
        command.env_remove(name);
    }
    let stdout = tempfile::tempfile().expect("temp file for stdout");
    let stderr = tempfile::tempfile().expect("temp file for stderr");
    command
        .arg("-c")
        .arg(STARTER)
        .arg(report.path())
        .arg(kcm_bin())
        .args(["--etcd-servers", endpoint])
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout.try_clone().expect("clone stdout's file"))
        .stderr(stderr.try_clone().expect("clone stderr's file"));
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!("{python}: {e}; CI requires Python to measure kcm's peak memory")
        }
        Err(e) => {
            eprintln!("skipping: {python}: {e} (set KCM_PYTHON to a Python 3)");
            return None;
        }
    };
    let starter = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("wait for the interpreter")
        .expect("the interpreter's status");
    let read = |mut file: std::fs::File| {
        use std::io::{Read as _, Seek as _};
        let mut text = String::new();
        file.rewind().expect("rewind kcm's output");
        file.read_to_string(&mut text)
            .expect("kcm's output is UTF-8");
        text
    };
    let reported = std::fs::read_to_string(report.path()).expect("read the report");
    let (status, peak_kib) = reported
        .split_once(' ')
        .and_then(|(status, peak)| Some((status.parse().ok()?, peak.parse().ok()?)))
        .unwrap_or_else(|| {
            panic!(
                "{python} did not report kcm's status ({starter}): {:?}; {}",
                reported,
                read(stderr.try_clone().expect("clone stderr's file"))
            )
        });
    let output = Output {
        status: std::os::unix::process::ExitStatusExt::from_raw(status),
        stdout: read(stdout),
        stderr: read(stderr),
    };
    Some((output, peak_kib))
}

/// Runs `kcm {args}` with `env` set, bounded to 30 s.
pub async fn run_kcm(args: &[&str], env: &[(&str, &str)]) -> Output {
    run_kcm_within(Duration::from_secs(30), args, env).await
}

/// Runs `kcm {args}` with `env` set, bounded to `limit`.
pub async fn run_kcm_within(limit: Duration, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = kcm_command();
    command.args(args).envs(env.iter().copied());
    tokio::time::timeout(limit, command.output())
        .await
        .unwrap_or_else(|_| panic!("kcm {args:?} did not finish within {limit:?}"))
        .expect("run kcm")
        .into()
}

/// The one way tests launch the `kcm` binary: without the environment variables of
/// [`SCRUBBED_ENV`], stdin from /dev/null, killed when the handle drops and when the test
/// binary dies. Add arguments, environment and output redirection to taste.
pub fn kcm_command() -> Command {
    let mut command = Command::new(kcm_bin());
    for name in SCRUBBED_ENV {
        command.env_remove(name);
    }
    command.stdin(Stdio::null()).kill_on_drop(true);
    // `kcm up` serves the Kubernetes API on 8080 by default; tests run many at once, so
    // each takes a free port unless it passes --apiserver-port.
    command.env("KCM_APISERVER_PORT", "0");
    die_with_parent(&mut command);
    command
}

fn die_with_parent(command: &mut Command) {
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A field of `/proc/{pid}/status` in KiB: `VmHWM` (the peak resident set so far), `VmRSS`.
pub fn proc_status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("read /proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// How many file descriptors process `pid` holds.
pub fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap_or_else(|e| panic!("read /proc/{pid}/fd: {e}"))
        .count()
}

/// One HTTP/1.0 `GET` to a status endpoint on 127.0.0.1, bounded to 5 s.
pub async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let attempt = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
        let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.ok()?;
        let text = String::from_utf8(response).ok()?;
        let (head, body) = text.split_once("\r\n\r\n")?;
        let status = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((status, body.to_owned()))
    };
    tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .ok()
        .flatten()
}

/// What [`http_request`] got back.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    /// The header lines, as sent.
    pub head: String,
    pub body: String,
}

impl HttpResponse {
    /// The body as JSON (a `Status` for an error).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }
}

/// One HTTP/1.0 request with a body to 127.0.0.1, bounded to 10 s; `content_type` `None`
/// sends no `Content-Type` (as the Python client does).
pub async fn http_request(
    port: u16,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> HttpResponse {
    let attempt = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
        let mut request = format!(
            "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n",
            body.len()
        );
        if let Some(content_type) = content_type {
            request.push_str(&format!("Content-Type: {content_type}\r\n"));
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes()).await?;
        // A refused body may be left unread by the server: a failed send is not an error.
        let _ = stream.write_all(body).await;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&response).into_owned())
    };
    let text = tokio::time::timeout(Duration::from_secs(10), attempt)
        .await
        .unwrap_or_else(|_| panic!("{method} {path}: no answer within 10s"))
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("{method} {path}: not an HTTP response: {text:?}"));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path}: no status in {head:?}"));
    HttpResponse {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

/// The value of `series` in a Prometheus text exposition; 0 when absent.
pub fn metric_value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |value| {
            value
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("unparsable value of {series}: {value:?}"))
        })
}
