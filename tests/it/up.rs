//! `kcm up`: the main job. It starts a private etcd from PATH when none answers, runs the
//! controllers and simulated kubelets, converges what the CLI creates, and on SIGTERM
//! leaves no process and no data dir behind. `kcm up --demo` finishes its tour.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

use crate::support::etcd::etcd_binary;
use crate::support::kcm::kcm_command;
use crate::support::{eventually, free_port, with_timeout};

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

async fn kcm(url: &str, args: &[&str]) -> std::process::Output {
    kcm_command()
        .args(["--etcd-servers", url])
        .args(args)
        .output()
        .await
        .expect("run kcm")
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
                let list: serde_json::Value =
                    serde_json::from_slice(&out.stdout).unwrap_or_default();
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
                serde_json::from_slice(&out.stdout).unwrap_or_default();
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
    let Some(etcd) = etcd_binary() else { return };
    with_timeout(Duration::from_secs(120), async {
        let url = format!("http://127.0.0.1:{}", free_port());
        let status_port = free_port().to_string();
        let started = Instant::now();
        let up = kcm_up(&url, &etcd, &["--demo", "--port", &status_port]);
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
            "Tour done",
            "private etcd stopped",
        ] {
            assert!(stdout.contains(step), "missing {step:?} in:\n{stdout}");
        }
        assert!(stdout.contains("endpoints/demo/web = [10.244."), "{stdout}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_without_etcd_says_how_to_get_it() {
    with_timeout(Duration::from_secs(30), async {
        let url = format!("http://127.0.0.1:{}", free_port());
        let out = kcm_command()
            .args([
                "--etcd-servers",
                &url,
                "up",
                "--etcd-binary",
                "/nonexistent/etcd",
            ])
            .output()
            .await
            .unwrap();
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
