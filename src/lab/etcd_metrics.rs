//! etcd's own counters, read from its `/metrics` on the client URL: the figures of the
//! scenarios whose subject (requests served, requests refused) leaves no trace in etcd's
//! history.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;

use super::Lab;
use crate::etcd_process::local_client_addr;

impl Lab {
    /// The sum of every series of etcd's `/metrics` whose name and labels start with
    /// `series` (a whole series, or a name and its first labels). 0 when none has been
    /// counted yet: etcd prints a labelled counter only once it is non-zero.
    pub(super) async fn etcd_counter(&self, series: &str) -> anyhow::Result<f64> {
        let endpoint = self
            .client_config
            .endpoints
            .first()
            .cloned()
            .unwrap_or_default();
        let addr = local_client_addr(&endpoint)
            .or_else(|| {
                endpoint
                    .strip_prefix("http://")
                    .and_then(|a| a.parse().ok())
            })
            .with_context(|| {
                format!("the lab reads etcd's /metrics over plain http://, not {endpoint}")
            })?;
        let text = http_get(addr, "/metrics")
            .await
            .with_context(|| format!("read etcd's /metrics at {addr}"))?;
        let mut sum = 0.0;
        for line in text.lines().filter(|line| line.starts_with(series)) {
            let value = line.rsplit(' ').next().unwrap_or_default();
            sum += value
                .parse::<f64>()
                .with_context(|| format!("etcd's /metrics at {addr}: {line}"))?;
        }
        Ok(sum)
    }
}

/// A plain HTTP/1.0 GET; the body.
async fn http_get(addr: SocketAddr, path: &str) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let read = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await?;
        anyhow::Ok(response)
    };
    let response = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .context("no answer within 10s")??;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    anyhow::ensure!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{}",
        head.lines().next().unwrap_or("no status line")
    );
    Ok(body.to_string())
}
