//! `kcm up`: the main job. It starts a private etcd from PATH when none answers, runs the
//! controllers and simulated kubelets, converges what the CLI creates, and on SIGTERM
//! leaves no process and no data dir behind. `kcm up --demo` finishes its tour. A second
//! `kcm up` on a busy port or on the same etcd fails before it does anything, and the data
//! dirs of killed `kcm up`s are removed by the next one.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use etcd_client::GetOptions;
use kcm::etcd_process::TempDirOwner;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

use crate::support::etcd::etcd_binary;
use crate::support::kcm::{http_get, kcm, kcm_command};
use crate::support::objects::current_revision;
use crate::support::{eventually, free_port, start_etcd, with_timeout};

/// `kcm --etcd-servers URL ARGS...` with the given etcd binary, stdout piped.
fn kcm_up(url: &str, etcd: &Path, args: &[&str]) -> Child {
    kcm_command()
        .args(["--etcd-servers", url, "up", "--etcd-binary"])
        .arg(etcd)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kcm up")
}

/// `kcm up {args}` where no etcd answers and none can be started (no binary), with
/// `$TMPDIR` set to `tmp` if given.
async fn up_without_etcd(args: &[&str], tmp: Option<&Path>) -> std::process::Output {
    let url = format!("http://127.0.0.1:{}", free_port());
    let mut command = kcm_command();
    command
        .args([
            "--etcd-servers",
            &url,
            "up",
            "--etcd-binary",
            "/nonexistent/etcd",
        ])
        .args(args);
    if let Some(tmp) = tmp {
        command.env("TMPDIR", tmp);
    }
    command.output().await.expect("run kcm up")
}

/// Processes whose command line mentions `needle` (from /proc).
fn processes_mentioning(needle: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .filter(|cmdline| cmdline.contains(needle))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_starts_a_private_etcd_converges_and_cleans_up() {
    let Some(etcd) = etcd_binary() else { return };
    with_timeout(Duration::from_secs(150), async {
        let url = format!("http://127.0.0.1:{}", free_port());
        let status_port = free_port().to_string();
        let mut up = kcm_up(&url, &etcd, &["--port", &status_port, "--nodes", "2"]);
        let mut stdout = BufReader::new(up.stdout.take().unwrap()).lines();

        // It says where etcd listens and where its data dir is.
        let mut data_dir = None;
        while let Some(line) = stdout.next_line().await.unwrap() {
            if let Some(rest) = line.split_once("(data dir ").map(|(_, r)| r) {
                let dir = rest.split(", removed on exit").next().unwrap();
                assert!(line.contains(&url), "{line}");
                data_dir = Some(PathBuf::from(dir));
            }
            if line.contains("Ctrl-C stops everything") {
                break;
            }
        }
        let data_dir = data_dir.expect("kcm up names its private etcd's data dir");
        assert!(data_dir.exists());
        let data_dir_text = data_dir.display().to_string();
        assert_eq!(
            processes_mentioning(&data_dir_text).len(),
            1,
            "one private etcd"
        );

        // The CLI converges through it: 3 pods running on the simulated nodes, and the
        // service's endpoints follow them.
        let out = kcm(
            &url,
            &[
                "run",
                "web",
                "--image",
                "nginx",
                "--replicas",
                "3",
                "--port",
                "80",
                "--expose",
            ],
        )
        .await;
        assert!(out.status.success(), "{out:?}");
        eventually(
            Duration::from_secs(60),
            "3 running pods with IPs",
            || async {
                let out = kcm(&url, &["get", "pods", "-o", "json"]).await;
                let list: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_default();
                let items = list["items"].as_array().cloned().unwrap_or_default();
                items.len() == 3
                    && items.iter().all(|p| {
                        p["status"]["phase"] == "Running" && p["status"]["podIP"].as_str().is_some()
                    })
            },
        )
        .await;
        eventually(Duration::from_secs(30), "3 endpoints", || async {
            let out = kcm(&url, &["get", "endpoints", "web", "-o", "json"]).await;
            let endpoints: serde_json::Value =
                serde_json::from_str(&out.stdout).unwrap_or_default();
            endpoints["endpoints"]
                .as_array()
                .is_some_and(|e| e.len() == 3)
        })
        .await;

        // SIGTERM: a clean exit, no etcd left, no data dir left.
        let pid = up.id().unwrap() as libc::pid_t;
        let stopped = Instant::now();
        // SAFETY: pid is our own child.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let status = up.wait().await.unwrap();
        assert!(status.success(), "kcm up exited with {status}");
        assert!(stopped.elapsed() < Duration::from_secs(15));
        assert!(!data_dir.exists(), "the temporary data dir was removed");
        assert_eq!(processes_mentioning(&data_dir_text), Vec::<String>::new());
        let out = kcm(&url, &["get", "pods"]).await;
        assert!(!out.status.success(), "etcd still answers at {url}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_demo_finishes_its_tour_within_a_minute() {
    demo_tour(&[]).await;
}

/// `--topology api`: the same tour with every controller `kcm up` runs through the API
/// as a client of the API it serves (2014's topology), node lifecycle included; their
/// events too, none lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_demo_with_topology_api_runs_the_tour_with_the_controllers_as_api_clients() {
    let Some((stdout, stderr)) = demo_tour(&["--topology", "api"]).await else {
        return;
    };
    assert!(
        stdout.contains("the controllers run as clients of the API at http://127.0.0.1:")
            && stdout.contains("replication, replicaset, deployment, endpoints, garbagecollector, nodelifecycle, namespace, scheduler"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("stays off"),
        "every controller runs: {stdout}"
    );
    assert!(!stderr.contains("events lost"), "{stderr}");
    if crate::support::kubectl::kubectl_binary().is_some() {
        // The manager's events, written through the API, in kubectl's describe.
        assert!(stdout.contains("SuccessfulCreate"), "{stdout}");
    }
}

/// Runs `kcm up --demo {args}` on a private etcd and checks every step of its tour; its
/// stdout and stderr (`None` without etcd outside CI).
async fn demo_tour(args: &[&str]) -> Option<(String, String)> {
    let etcd = etcd_binary()?;
    with_timeout(Duration::from_secs(120), async {
        let url = format!("http://127.0.0.1:{}", free_port());
        let status_port = free_port().to_string();
        let started = Instant::now();
        let mut all = vec!["--demo", "--port", &status_port];
        all.extend_from_slice(args);
        let up = kcm_up(&url, &etcd, &all);
        let out = up.wait_with_output().await.unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "demo failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "took {:?}",
            started.elapsed()
        );
        for step in [
            "1. Created",
            "2. Converged",
            "3. Deleted pod",
            "Recreated in",
            "4. Resized to 5",
            "5. Resized to 2",
            "7. Created deployment.apps/app",
            "8. `kcm set image deploy/app *=nginx:1.25`",
            "old app-",
            r#"kcm: deployment "app" exceeded its progress deadline (exit 1)"#,
            "10. `kcm rollout undo deploy/app`: the template of revision 2",
            "Rolled out at revision 4",
            "Tour done",
            "private etcd stopped",
            "$ kubectl get pods -o wide -n demo",
        ] {
            assert!(stdout.contains(step), "missing {step:?} in:\n{stdout}");
        }
        // With kubectl on PATH (always under CI), its table through kcm's API.
        if crate::support::kubectl::kubectl_binary().is_some() {
            assert!(
                stdout.contains("NOMINATED NODE") && stdout.contains("Pods Status:"),
                "kubectl's output in:\n{stdout}"
            );
        }
        assert!(stdout.contains("endpoints/demo/web = [10.244."), "{stdout}");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        Some((stdout.into_owned(), stderr))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_without_etcd_says_how_to_get_it() {
    with_timeout(Duration::from_secs(30), async {
        let out = up_without_etcd(&["--port", "0"], None).await;
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("etcd not found") && stderr.contains("apt-get install etcd-server"),
            "{stderr}"
        );
        let remote = kcm_command()
            .args([
                "--etcd-servers",
                "http://192.0.2.1:2379",
                "--etcd-keepalive-timeout",
                "1s",
                "up",
                "--port",
                "0",
            ])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&remote.stderr);
        assert_eq!(remote.status.code(), Some(1));
        assert!(stderr.contains("not a local http address"), "{stderr}");
    })
    .await;
}

/// The one line a failed `kcm` printed on stderr.
#[track_caller]
fn one_line(stderr: &[u8]) -> String {
    let stderr = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {stderr:?}");
    lines[0].to_owned()
}

/// The entries of `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_up_on_a_busy_status_port_fails_at_once_having_started_nothing() {
    with_timeout(Duration::from_secs(60), async {
        let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("occupy a port");
        let port = busy.local_addr().unwrap().port().to_string();
        let tmp = tempfile::tempdir().expect("private TMPDIR");
        let expected = format!(
            "kcm: the status port 127.0.0.1:{port} is in use (another kcm up?); use --port to choose another"
        );
        // No etcd answers: it would start one (and fail: no binary) if it got that far.
        let out = up_without_etcd(&["--port", &port], Some(tmp.path())).await;
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert_eq!(one_line(&out.stderr), expected);
        assert_eq!(entries(tmp.path()), Vec::<String>::new(), "no data dir");

        // With an etcd that answers: not one write, no node registered.
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let before = current_revision(&client).await;
        let out = kcm_command()
            .args(["--etcd-servers", &etcd.endpoint(), "up", "--port", &port])
            .env("TMPDIR", tmp.path())
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert_eq!(one_line(&out.stderr), expected);
        assert_eq!(current_revision(&client).await, before, "nothing written");
        assert_eq!(entries(tmp.path()), Vec::<String>::new());
        drop(busy);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_registers_its_nodes_says_its_real_port_and_a_second_up_on_its_etcd_is_refused() {
    let Some(etcd_bin) = etcd_binary() else {
        return;
    };
    with_timeout(Duration::from_secs(90), async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let url = etcd.endpoint();
        let mut up = kcm_up(&url, &etcd_bin, &["--port", "0", "--nodes", "2"]);
        let pid = up.id().unwrap();
        let mut stdout = BufReader::new(up.stdout.take().unwrap()).lines();
        let mut status_url = None;
        while let Some(line) = stdout.next_line().await.unwrap() {
            if let Some((_, rest)) = line.split_once("status on ") {
                status_url = Some(rest.to_owned());
            }
            if line.contains("Ctrl-C stops everything") {
                break;
            }
        }
        // `--port 0`: it says the port the kernel gave it, and serves there.
        let status_url = status_url.expect("kcm up says where status is served");
        let port: u16 = status_url
            .strip_prefix("http://127.0.0.1:")
            .and_then(|rest| rest.strip_suffix("/healthz"))
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("{status_url:?}"));
        assert_ne!(port, 0);
        eventually(
            Duration::from_secs(30),
            "/healthz 200 on the port it named",
            || async { matches!(http_get(port, "/healthz").await, Some((200, _))) },
        )
        .await;

        let holder = format!("{pid}@");
        for node in ["node-1", "node-2"] {
            let response = client
                .clone()
                .get(format!("/registry/minions/{node}"), None)
                .await
                .unwrap();
            let value = response
                .kvs()
                .first()
                .map(|kv| kv.value_str().unwrap().to_owned());
            assert!(
                value.as_deref().is_some_and(|v| v.starts_with(&holder)),
                "{node}: {value:?}"
            );
        }

        // A second kcm up on the same etcd (another status port) would run duplicate nodes.
        let before = current_revision(&client).await;
        let out = kcm(&url, &["up", "--port", "0", "--nodes", "1"]).await;
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let line = one_line(out.stderr.as_bytes());
        let taken = format!("node node-1 is taken: registered by {holder}");
        for part in [taken.as_str(), "use another --prefix, or --nodes 0"] {
            assert!(line.contains(part), "{line:?} should contain {part:?}");
        }
        assert_eq!(current_revision(&client).await, before, "nothing written");

        // SIGTERM: the names are given back.
        // SAFETY: pid is our own child.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        assert!(up.wait().await.unwrap().success());
        let left = client
            .clone()
            .get("/registry/minions/", Some(GetOptions::new().with_prefix()))
            .await
            .unwrap();
        assert_eq!(left.count(), 0, "{left:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_removes_the_data_dirs_of_kcm_processes_that_are_gone_and_only_those() {
    with_timeout(Duration::from_secs(60), async {
        let tmp = tempfile::tempdir().expect("private TMPDIR");
        let dead = {
            let mut child = tokio::process::Command::new("true").spawn().unwrap();
            let pid = child.id().unwrap();
            child.wait().await.unwrap();
            pid
        };
        let me = TempDirOwner::this_process();
        let recycled = TempDirOwner {
            start_time: me.start_time + 1,
            ..me
        };
        // A dir as kcm leaves it: marked, with etcd's files; or empty (killed at once).
        let mkdir = |name: &str, marked: bool| {
            let dir = tmp.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            if marked {
                std::fs::write(dir.join("kcm-temporary-data-dir"), "").unwrap();
                std::fs::create_dir(dir.join("member-data")).unwrap();
                std::fs::write(dir.join("etcd.log"), "log").unwrap();
            }
            name.to_owned()
        };
        let gone = [
            // Its owner died.
            mkdir(&format!("kcm-etcd-{dead}-1-Ab3xYz"), true),
            mkdir(&format!("kcm-etcd-{dead}-1-Bc4yZa"), false),
            // Its owner's pid now runs another process (this one, started at another time).
            mkdir(&format!("{}Cd4wVu", recycled.prefix()), true),
        ];
        let kept = [
            // Its owner runs (this test).
            mkdir(&format!("{}Gh6qPo", me.prefix()), true),
            // Not marked as temporary: a --data-dir, whatever its name.
            {
                let name = mkdir(&format!("kcm-etcd-{dead}-1-mydata"), false);
                std::fs::write(tmp.path().join(&name).join("etcd.log"), "log").unwrap();
                name
            },
            // Named the way kcm named temporary dirs before: no owner to check.
            mkdir("kcm-etcd-Ef5tSr", true),
            mkdir("etcd-data", true),
        ];

        let out = up_without_etcd(&["--port", "0"], Some(tmp.path())).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("etcd not found"),
            "{out:?}"
        );
        let mut expected = kept.to_vec();
        expected.sort();
        assert_eq!(entries(tmp.path()), expected);
        let said: Vec<&str> = stdout
            .lines()
            .filter(|line| {
                line.starts_with(
                    "kcm up: removed 3 etcd data dir(s) left by kcm processes that are gone: ",
                )
            })
            .collect();
        assert_eq!(said.len(), 1, "{stdout}");
        for name in &gone {
            assert!(said[0].contains(name.as_str()), "{said:?} names {name}");
        }
    })
    .await;
}
