//! The real `kubectl` against kcm's Kubernetes API: the binary ([`kubectl_binary`], skipped
//! or failed like etcd), one private kubeconfig, `HOME` and `--cache-dir` per test
//! ([`Kubectl`]), long-running watches read line by line ([`KubectlWatch`]), kcm started
//! the way a user starts it ([`start_up`], [`start_apiserver`]) and kubectl's tables parsed
//! by column ([`Table`]).
//!
//! Invariants: every kubectl child is killed when its handle drops and runs with a
//! kubeconfig, `HOME` and cache dir of its own test, never the developer's (kubectl caches
//! discovery under the cache dir, so tests sharing one would see each other's servers).

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use super::apiserver::{spawn_apiserver, wait_ready};
use super::etcd::EtcdServer;
use super::kcm::{http_get, Kcm};
use super::{free_port, start_etcd};

/// Bound on one kubectl command (the dispatcher adds a `/version` request to each).
const COMMAND_LIMIT: Duration = Duration::from_secs(30);
/// How often waits re-check.
const POLL: Duration = Duration::from_millis(20);

/// The `kubectl` on `PATH`: `None` with a skip notice when there is none, a panic when `CI`
/// is set (a missing tool is a failure there), as [`super::etcd::etcd_binary`] does for
/// etcd. Use it as `let Some(kubectl) = kubectl_binary() else { return };`.
pub fn kubectl_binary() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("kubectl"))
            .find(|candidate| is_executable(candidate))
    });
    if found.is_none() {
        if std::env::var_os("CI").is_some_and(|value| !value.is_empty()) {
            panic!("kubectl not found on PATH; CI requires it (.ci/run installs it)");
        }
        eprintln!("skipping: kubectl not found on PATH");
    }
    found
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// What a kubectl command did.
#[derive(Debug)]
pub struct KubectlOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// kubectl with a private kubeconfig, `HOME` and cache dir (all in one temp dir).
pub struct Kubectl {
    bin: PathBuf,
    dir: TempDir,
}

impl Kubectl {
    pub fn new(bin: PathBuf) -> Kubectl {
        let dir = tempfile::Builder::new()
            .prefix("kcm-kubectl-")
            .tempdir()
            .expect("create kubectl temp dir");
        std::fs::create_dir(dir.path().join("home")).expect("create HOME");
        Kubectl { bin, dir }
    }

    /// Where the kubeconfig is (written by `kcm up --kubeconfig` or [`Kubectl::write_kubeconfig`]).
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// Writes a kubeconfig for `server` (no credentials, namespace `default`), as a user
    /// would for a loopback apiserver.
    pub fn write_kubeconfig(&self, server: &str) {
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kcm\n  cluster:\n    server: {server}\ncontexts:\n- name: kcm\n  context:\n    cluster: kcm\n    namespace: default\n    user: nobody\ncurrent-context: kcm\nusers:\n- name: nobody\n  user: {{}}\n"
        );
        std::fs::write(self.kubeconfig(), config).expect("write kubeconfig");
    }

    /// `kubectl {args} --cache-dir {private}` with the private environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.bin);
        command
            .args(args)
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .env("KUBECONFIG", self.kubeconfig())
            .env("HOME", self.dir.path().join("home"))
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    /// Runs `kubectl {args}` to its end (at most 30 s).
    pub async fn run(&self, args: &[&str]) -> KubectlOutput {
        let output = tokio::time::timeout(COMMAND_LIMIT, self.command(args).output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish within {COMMAND_LIMIT:?}"))
            .unwrap_or_else(|e| panic!("run kubectl {args:?}: {e}"));
        KubectlOutput {
            status: output.status,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs `kubectl {args}`, which must exit 0 without a word on stderr; its stdout.
    pub async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            out.status.success() && out.stderr.trim().is_empty(),
            "kubectl {}: {}\nstdout:\n{}\nstderr:\n{}",
            args.join(" "),
            out.status,
            out.stdout,
            out.stderr
        );
        out.stdout
    }

    /// `kubectl {args}` whose stdout is one table.
    pub async fn table(&self, args: &[&str]) -> Table {
        let stdout = self.ok(args).await;
        let mut tables = Table::parse_all(&stdout);
        assert!(
            tables.len() <= 1,
            "kubectl {args:?}: one table expected:\n{stdout}"
        );
        tables.pop().unwrap_or_default()
    }

    /// Starts `kubectl {args}` (a watch) with stdout read line by line.
    pub fn watch(&self, args: &[&str]) -> KubectlWatch {
        let mut child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn kubectl {args:?}: {e}"));
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let errors = Arc::new(Mutex::new(String::new()));
        let pumps = vec![
            tokio::spawn({
                let lines = lines.clone();
                async move {
                    let mut reader = BufReader::new(stdout).lines();
                    while let Ok(Some(line)) = reader.next_line().await {
                        lines.lock().expect("lines lock").push(line);
                    }
                }
            }),
            tokio::spawn({
                let errors = errors.clone();
                async move {
                    let mut reader = BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = reader.next_line().await {
                        let mut errors = errors.lock().expect("stderr lock");
                        errors.push_str(&line);
                        errors.push('\n');
                    }
                }
            }),
        ];
        KubectlWatch {
            what: format!("kubectl {}", args.join(" ")),
            child,
            lines,
            errors,
            pumps,
        }
    }
}

/// A running kubectl (`get -w`), its stdout collected line by line.
pub struct KubectlWatch {
    what: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    errors: Arc<Mutex<String>>,
    pumps: Vec<JoinHandle<()>>,
}

impl KubectlWatch {
    /// The lines printed so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("lines lock").clone()
    }

    /// How many lines were printed so far (a mark for [`KubectlWatch::lines_since`]).
    pub fn mark(&self) -> usize {
        self.lines.lock().expect("lines lock").len()
    }

    /// The lines printed since `mark`.
    pub fn lines_since(&self, mark: usize) -> Vec<String> {
        self.lines()[mark..].to_vec()
    }

    /// Waits until `check` holds for the lines printed so far; panics after `limit` (or if
    /// kubectl exits first) with what it printed.
    pub async fn wait_for(
        &mut self,
        limit: Duration,
        what: &str,
        check: impl Fn(&[String]) -> bool,
    ) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if check(&self.lines()) {
                return;
            }
            let exited = self.child.try_wait().expect("poll kubectl");
            if exited.is_some() || tokio::time::Instant::now() >= deadline {
                let why = match exited {
                    Some(status) => format!("{} exited ({status})", self.what),
                    None => format!("timed out after {limit:?}"),
                };
                panic!(
                    "{why} waiting for {what}; it printed:\n{}\nstderr:\n{}",
                    self.lines().join("\n"),
                    self.errors.lock().expect("stderr lock")
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Kills kubectl; everything it printed.
    pub async fn stop(mut self) -> Vec<String> {
        let _ = self.child.kill().await;
        for pump in std::mem::take(&mut self.pumps) {
            let _ = tokio::time::timeout(Duration::from_secs(5), pump).await;
        }
        self.lines()
    }
}

impl Drop for KubectlWatch {
    fn drop(&mut self) {
        // kill_on_drop SIGKILLs the child when `child` drops.
        for pump in &self.pumps {
            pump.abort();
        }
    }
}

/// ReplicaSet `solo` of `default`: one `nginx:1.25` pod labelled `app: solo`, as a manifest for
/// `kubectl apply -f`.
pub const REPLICA_SET: &str = "apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: solo
spec:
  replicas: 1
  selector:
    matchLabels: {app: solo}
  template:
    metadata:
      labels: {app: solo}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
";

/// A kcm serving the Kubernetes API over a test etcd, and kubectl pointed at it.
pub struct Api {
    pub kubectl: Kubectl,
    /// The API's port on 127.0.0.1.
    pub port: u16,
    /// `kcm up` or `kcm apiserver`; killed on drop, before etcd.
    kcm: Kcm,
    pub etcd: EtcdServer,
}

impl Api {
    /// `--etcd-servers` for kcm's own commands.
    pub fn etcd_url(&self) -> String {
        self.etcd.endpoint()
    }

    /// Runs `kcm --etcd-servers {etcd} {args}`, which must succeed; its stdout.
    pub async fn kcm(&self, args: &[&str]) -> String {
        let out = super::kcm::kcm(&self.etcd_url(), args).await;
        assert!(out.status.success(), "kcm {}: {out:?}", args.join(" "));
        out.stdout
    }

    /// Writes `text` to `name` in the kubectl temp dir; its path.
    pub fn manifest(&self, name: &str, text: &str) -> String {
        let path = self.kubectl.kubeconfig().with_file_name(name);
        std::fs::write(&path, text).expect("write a manifest");
        path.display().to_string()
    }

    /// The JSON document stored at `key` (`None` when absent).
    pub async fn stored(&self, key: &str) -> Option<serde_json::Value> {
        let mut client = self.etcd.client().await;
        let response = client.get(key, None).await.expect("etcd get");
        response
            .kvs()
            .first()
            .map(|kv| serde_json::from_slice(kv.value()).expect("stored JSON"))
    }

    /// The JSON documents stored under `prefix`, in key order.
    pub async fn documents(&self, prefix: &str) -> Vec<serde_json::Value> {
        let mut client = self.etcd.client().await;
        let options = etcd_client::GetOptions::new().with_prefix();
        let response = client.get(prefix, Some(options)).await.expect("etcd list");
        response
            .kvs()
            .iter()
            .map(|kv| serde_json::from_slice(kv.value()).expect("stored JSON"))
            .collect()
    }

    /// How many keys are stored under `prefix`.
    pub async fn count(&self, prefix: &str) -> usize {
        let mut client = self.etcd.client().await;
        let options = etcd_client::GetOptions::new()
            .with_prefix()
            .with_count_only();
        let response = client.get(prefix, Some(options)).await.expect("etcd count");
        usize::try_from(response.count()).expect("a count fits")
    }

    /// A kube-rs client of the API.
    pub fn kube_client(&self) -> kube::Client {
        let url = format!("http://127.0.0.1:{}", self.port);
        kube::Client::try_from(kube::Config::new(url.parse().expect("a URL")))
            .expect("a kube client")
    }

    /// One value of the API's `/metrics`, e.g.
    /// `apiserver_longrunning_requests{resource="pods",verb="WATCH"}` (0 when absent).
    pub async fn metric(&self, series: &str) -> f64 {
        match http_get(self.port, "/metrics").await {
            Some((200, body)) => super::kcm::metric_value(&body, series),
            other => panic!("GET /metrics on the API: {other:?}"),
        }
    }
}

/// `kcm --etcd-servers {test etcd} up --port 0 --apiserver-port {free} --kubeconfig
/// {private} --nodes {nodes}`, once its API is ready. `None` (the test returns) when
/// kubectl or etcd is missing outside CI.
pub async fn start_up(nodes: u16) -> Option<Api> {
    let kubectl = Kubectl::new(kubectl_binary()?);
    let etcd = start_etcd().await?;
    let port = free_port();
    let (url, port_arg, nodes_arg) = (etcd.endpoint(), port.to_string(), nodes.to_string());
    let kubeconfig = kubectl.kubeconfig().display().to_string();
    let kcm = Kcm::spawn(
        &[
            "--etcd-servers",
            &url,
            "up",
            "--port",
            "0",
            "--apiserver-port",
            &port_arg,
            "--kubeconfig",
            &kubeconfig,
            "--nodes",
            &nodes_arg,
        ],
        &[],
    );
    let mut api = Api {
        kubectl,
        port,
        kcm,
        etcd,
    };
    wait_ready(&mut api.kcm, api.port).await;
    assert!(
        api.kubectl.kubeconfig().exists(),
        "kcm up wrote no kubeconfig at {kubeconfig}"
    );
    Some(api)
}

/// A bare `kcm --etcd-servers {test etcd} apiserver --port {free}` (no controllers), once
/// ready, with a kubeconfig written for it. `None` as for [`start_up`].
pub async fn start_apiserver() -> Option<Api> {
    let kubectl = Kubectl::new(kubectl_binary()?);
    let etcd = start_etcd().await?;
    let port = free_port();
    let kcm = spawn_apiserver(&etcd.endpoint(), port, &[]);
    kubectl.write_kubeconfig(&format!("http://127.0.0.1:{port}"));
    let mut api = Api {
        kubectl,
        port,
        kcm,
        etcd,
    };
    wait_ready(&mut api.kcm, api.port).await;
    Some(api)
}

/// One table kubectl printed: its column names and, per row, the cell under each column
/// (found at the column's offset in the header, so that cells with spaces, empty cells and
/// headers like `NOMINATED NODE` read right).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// Every table in `text` (kubectl separates them with a blank line).
    pub fn parse_all(text: &str) -> Vec<Table> {
        text.split("\n\n")
            .filter(|block| !block.trim().is_empty())
            .map(Table::parse)
            .collect()
    }

    /// One table: a header line, then rows.
    pub fn parse(text: &str) -> Table {
        let mut lines = text.lines().filter(|line| !line.trim().is_empty());
        let Some(header) = lines.next() else {
            return Table::default();
        };
        let starts = column_starts(header);
        let cells = |line: &str| -> Vec<String> {
            starts
                .iter()
                .enumerate()
                .map(|(i, &start)| {
                    let end = starts.get(i + 1).copied().unwrap_or(usize::MAX);
                    let end = end.min(line.len());
                    line.get(start.min(end)..end)
                        .unwrap_or("")
                        .trim()
                        .to_owned()
                })
                .collect()
        };
        Table {
            columns: cells(header),
            rows: lines.map(cells).collect(),
        }
    }

    /// The index of column `name`; panics naming the columns there are.
    #[track_caller]
    pub fn index(&self, name: &str) -> usize {
        self.columns
            .iter()
            .position(|column| column == name)
            .unwrap_or_else(|| panic!("no column {name:?} in {:?}", self.columns))
    }

    /// The cells of column `name`, top to bottom.
    #[track_caller]
    pub fn column(&self, name: &str) -> Vec<String> {
        let index = self.index(name);
        self.rows.iter().map(|row| row[index].clone()).collect()
    }

    /// The row whose NAME is `name`, as (column, cell) pairs.
    #[track_caller]
    pub fn row(&self, name: &str) -> Vec<(String, String)> {
        let index = self.index("NAME");
        let row = self
            .rows
            .iter()
            .find(|row| row[index] == name)
            .unwrap_or_else(|| panic!("no row {name:?} in {self:?}"));
        self.columns
            .iter()
            .cloned()
            .zip(row.iter().cloned())
            .collect()
    }

    /// The cell of row `name` under column `column`.
    #[track_caller]
    pub fn cell(&self, name: &str, column: &str) -> String {
        let index = self.index(column);
        self.row(name)[index].1.clone()
    }
}

/// Where each column of a kubectl header starts: kubectl pads columns with at least three
/// spaces, and a header holds single spaces only inside a name (`NOMINATED NODE`).
fn column_starts(header: &str) -> Vec<usize> {
    let bytes = header.as_bytes();
    let mut starts = Vec::new();
    for (i, &byte) in bytes.iter().enumerate() {
        if byte == b' ' {
            continue;
        }
        let after_gap = i == 0 || (i >= 2 && bytes[i - 1] == b' ' && bytes[i - 2] == b' ');
        if after_gap {
            starts.push(i);
        }
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::Table;

    #[test]
    fn tables_read_cells_by_header_offsets() {
        let text = "NAME   READY   STATUS    AGE   NOMINATED NODE\nweb-1  1/1     Running   1s    <none>\n\nNAMESPACE   NAME\n            solo\n";
        let tables = Table::parse_all(text);
        assert_eq!(tables.len(), 2);
        assert_eq!(
            tables[0].columns,
            ["NAME", "READY", "STATUS", "AGE", "NOMINATED NODE"]
        );
        assert_eq!(tables[0].cell("web-1", "NOMINATED NODE"), "<none>");
        assert_eq!(tables[1].rows, [["", "solo"]]);
    }
}
