//! The status endpoint (`/healthz`, `/metrics`) of `kcm controller-manager` under abuse:
//! clients that send half a request, or nothing, or idle after one; more of them than it
//! serves at once; a busy port; `--port 0`; an address other hosts can reach.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::kcm::{http_get, run_kcm, start_manager, Kcm};
use crate::support::{eventually, free_port, start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(90);

/// More than the endpoint serves at once (`status::MAX_CONNECTIONS`).
const STUCK_CLIENTS: usize = 200;

/// Resolves once the server closed `stream` (EOF or reset); panics after `limit`.
async fn wait_closed(stream: &mut TcpStream, limit: Duration, what: &str) {
    let mut buf = [0u8; 1024];
    let closed = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                // A response (to the kept-alive request): read on until the close.
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(limit, closed)
        .await
        .unwrap_or_else(|_| panic!("{what} still open after {limit:?}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_requests_are_closed_and_healthz_answers_meanwhile() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let mut manager = start_manager(&etcd.endpoint(), &[]).await;
        let port = manager.port();
        eventually(Duration::from_secs(30), "/healthz 200", || async {
            matches!(manager.healthz().await, Some((200, _)))
        })
        .await;

        // A client that finished one request and keeps the connection, one that sends
        // nothing, and many that send half a request and stop.
        let mut idle = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: kcm\r\n\r\n")
            .await
            .unwrap();
        let mut silent = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let mut stuck = Vec::new();
        for _ in 0..STUCK_CLIENTS {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            stream
                .write_all(b"GET /metrics HTTP/1.1\r\nHost: kcm\r\nX-Slow: ")
                .await
                .unwrap();
            stuck.push(stream);
        }

        // While they hang on, a probe is answered at once (no retry).
        assert!(
            matches!(http_get(port, "/healthz").await, Some((200, _))),
            "/healthz answers while {STUCK_CLIENTS} clients are stuck"
        );

        // Each is closed by the server: after the header-read timeout (5 s) at most.
        let limit = Duration::from_secs(30);
        wait_closed(&mut idle, limit, "an idle kept-alive connection").await;
        wait_closed(&mut silent, limit, "a connection that sent nothing").await;
        for (i, stream) in stuck.iter_mut().enumerate() {
            wait_closed(stream, limit, &format!("half-sent request {i}")).await;
        }
        manager.assert_running();
        assert!(matches!(manager.healthz().await, Some((200, _))));
        assert_eq!(
            manager.warnings_about("no authentication"),
            Vec::<String>::new(),
            "127.0.0.1 is not announced"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reachable_address_is_announced_and_port_0_logs_the_port_bound() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let mut manager = Kcm::spawn(
            &[
                "--etcd-servers",
                &etcd.endpoint(),
                "controller-manager",
                "--address",
                "0.0.0.0",
                "--port",
                "0",
            ],
            &[],
        );
        let mut status = None;
        eventually(
            Duration::from_secs(30),
            "the 'controller manager starting' line",
            || {
                manager.assert_running();
                status = manager
                    .log()
                    .lines()
                    .find(|line| line.contains("controller manager starting"))
                    .and_then(|line| {
                        line.split_once(" status=")?
                            .1
                            .split_whitespace()
                            .next()
                            .map(str::to_owned)
                    });
                std::future::ready(status.is_some())
            },
        )
        .await;
        let status = status.unwrap();
        let port: u16 = status
            .strip_prefix("0.0.0.0:")
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("status={status}"));
        assert_ne!(port, 0, "the port bound, not the one asked for");
        eventually(
            Duration::from_secs(30),
            "/healthz 200 on the port logged",
            || async { matches!(http_get(port, "/healthz").await, Some((200, _))) },
        )
        .await;
        let warnings =
            manager.warnings_about("has no authentication and is reachable from other hosts");
        assert_eq!(warnings.len(), 1, "{}", manager.log());
        assert!(manager.terminate().await.success());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_status_port_fails_the_manager_before_it_asks_etcd() {
    with_timeout(LIMIT, async {
        let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("occupy a port");
        let port = busy.local_addr().unwrap().port().to_string();
        // Nothing answers there: asking etcd first would fail differently, and later.
        let url = format!("http://127.0.0.1:{}", free_port());
        let out = run_kcm(&["--etcd-servers", &url, "controller-manager", "--port", &port], &[]).await;
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert_eq!(
            out.stderr.lines().collect::<Vec<_>>(),
            [format!(
                "kcm: the status port 127.0.0.1:{port} is in use (another controller manager?); use --address/--port to choose another"
            )]
        );
        drop(busy);
    })
    .await;
}
