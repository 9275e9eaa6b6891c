//! A TCP proxy in front of etcd whose connections can be cut and restored: `kcm bench`'s
//! `resume` and `kcm lab`'s `stale-watch` cut a watch's connection with it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::client::ClientConfig;

/// A TCP proxy in front of etcd whose connections can be cut and restored. A cut resets
/// every open connection (RST, as a crashed peer or a middlebox would; the tests'
/// `FaultProxy` does the same) and refuses new ones until restored.
pub(crate) struct CutProxy {
    pub(crate) addr: SocketAddr,
    /// Cancelled by a cut; replaced by a fresh token on restore.
    cut: Arc<Mutex<CancellationToken>>,
    accept: tokio::task::JoinHandle<()>,
}

impl CutProxy {
    pub(crate) async fn start(upstream: SocketAddr) -> anyhow::Result<CutProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let cut = Arc::new(Mutex::new(CancellationToken::new()));
        let accept = {
            let cut = cut.clone();
            tokio::spawn(async move {
                let mut connections = JoinSet::new();
                loop {
                    let Ok((mut inbound, _)) = listener.accept().await else {
                        continue;
                    };
                    while connections.try_join_next().is_some() {}
                    let token = cut.lock().expect("proxy lock").clone();
                    if token.is_cancelled() {
                        let _ = inbound.set_zero_linger();
                        continue;
                    }
                    connections.spawn(async move {
                        let Ok(mut outbound) = TcpStream::connect(upstream).await else {
                            return;
                        };
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                            _ = token.cancelled() => {
                                let _ = inbound.set_zero_linger();
                                let _ = outbound.set_zero_linger();
                            }
                        }
                    });
                }
            })
        };
        Ok(CutProxy { addr, cut, accept })
    }

    /// `base` with this proxy as its only endpoint and keepalives of a second, so that a
    /// client connected with it notices a cut within seconds.
    pub(crate) fn client_config(&self, base: &ClientConfig) -> ClientConfig {
        ClientConfig {
            endpoints: vec![format!("http://{}", self.addr)],
            keepalive_interval: Duration::from_secs(1),
            keepalive_timeout: Duration::from_secs(1),
            ..base.clone()
        }
    }

    /// Resets every open connection and refuses new ones.
    pub(crate) fn cut(&self) {
        self.cut.lock().expect("proxy lock").cancel();
    }

    pub(crate) fn restore(&self) {
        *self.cut.lock().expect("proxy lock") = CancellationToken::new();
    }

    pub(crate) fn stop(self) {
        self.cut();
        self.accept.abort();
    }
}
