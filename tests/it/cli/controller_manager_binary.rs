//! `kcm-controller-manager`, the controller manager in a binary of its own: the same flags
//! as `kcm controller-manager`, the same loops against a real etcd, the same clear errors,
//! and a clean stop on SIGTERM.

use std::process::Stdio;
use std::time::Duration;

use crate::support::kcm::{http_get, run_kcm};
use crate::support::objects::pod_count_bounded;
use crate::support::{eventually, free_port, start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(120);

fn binary() -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_kcm-controller-manager"));
    command.env_remove("RUST_LOG").kill_on_drop(true);
    command
}

async fn output(args: &[&str]) -> (Option<i32>, String, String) {
    let out = tokio::time::timeout(Duration::from_secs(60), binary().args(args).output())
        .await
        .expect("kcm-controller-manager finished within 60s")
        .expect("run kcm-controller-manager");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_takes_the_managers_flags_and_names_a_wrong_one() {
    with_timeout(LIMIT, async {
        let (code, help, _) = output(&["--help"]).await;
        assert_eq!(code, Some(0));
        for flag in [
            "--controllers",
            "--burst-replicas",
            "--leader-elect",
            "--etcd-servers",
        ] {
            assert!(help.contains(flag), "--help lists {flag}:\n{help}");
        }
        let (code, version, _) = output(&["--version"]).await;
        assert_eq!(code, Some(0));
        assert!(version.starts_with("kcm-controller-manager "), "{version}");

        let (code, _, stderr) = output(&["--burst-replicas", "0"]).await;
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains("--burst-replicas"), "{stderr}");

        // No etcd answers there: one line naming the problem, exit 1.
        let url = format!("http://127.0.0.1:{}", free_port());
        let port = free_port().to_string();
        let (code, _, stderr) = output(&["--etcd-servers", &url, "--port", &port]).await;
        assert_eq!(code, Some(1), "{stderr}");
        let last = stderr.lines().last().unwrap_or_default();
        assert!(last.starts_with("kcm-controller-manager: "), "{stderr}");
        assert!(
            last.contains("127.0.0.1"),
            "the error names the endpoint: {stderr}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_keeps_a_controllers_pods_in_etcd_and_stops_on_sigterm() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let url = etcd.endpoint();
        let port = free_port();
        let mut manager = binary()
            .args(["--etcd-servers", &url, "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start kcm-controller-manager");
        eventually(Duration::from_secs(30), "/healthz 200", || async {
            matches!(http_get(port, "/healthz").await, Some((200, _)))
        })
        .await;
        run_kcm(
            &[
                "--etcd-servers",
                &url,
                "run",
                "web",
                "--image",
                "nginx",
                "--replicas",
                "300",
            ],
            &[],
        )
        .await
        .success();
        let client = etcd.client().await;
        let pods = || pod_count_bounded(&client, "default");
        eventually(Duration::from_secs(60), "300 pods in etcd", || async {
            pods().await == Some(300)
        })
        .await;

        // SIGTERM, as an operator stops it: a clean exit.
        let pid = manager.id().expect("running") as libc::pid_t;
        // SAFETY: kill(2) on our own unreaped child.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let status = tokio::time::timeout(Duration::from_secs(30), manager.wait())
            .await
            .expect("stopped within 30s of SIGTERM")
            .expect("wait");
        assert!(status.success(), "{status}");
        assert_eq!(
            pods().await,
            Some(300),
            "never more than the controller's replicas"
        );
    })
    .await;
}
