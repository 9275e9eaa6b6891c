//! Connecting to etcd: endpoints, HTTP/2 keepalive, timeouts, and one clear error when
//! etcd does not answer.
//!
//! etcd-client sets no timeouts and no keepalive by default, so a member that hangs
//! without closing its connection would stall a watch forever (etcd-client #48). Every
//! client kcm builds goes through [`connect`], which configures both.

use std::time::Duration;

use anyhow::Context as _;
use etcd_client::{Client, ConnectOptions};

/// The etcd address used when neither `--etcd-servers` nor `KCM_ETCD_SERVERS` is set.
pub const DEFAULT_ETCD_SERVERS: &str = "http://127.0.0.1:2379";

/// How to reach etcd.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Member URLs, e.g. `http://127.0.0.1:2379`. Requests are spread over them.
    pub endpoints: Vec<String>,
    /// Interval between HTTP/2 keepalive pings; a peer that does not answer one within
    /// `keepalive_timeout` is dropped, which ends every stream on that connection.
    /// Default 5 s (so a silent member is noticed within 15 s with the timeout below).
    pub keepalive_interval: Duration,
    /// Default 5 s.
    pub keepalive_timeout: Duration,
    /// Bound on establishing a connection. Default 5 s.
    pub connect_timeout: Duration,
    /// Bound on each unary request (get, put, txn); watches are not bounded.
    /// Default 10 s.
    pub request_timeout: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            endpoints: vec![DEFAULT_ETCD_SERVERS.to_string()],
            keepalive_interval: Duration::from_secs(5),
            keepalive_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
        }
    }
}

impl ClientConfig {
    /// A config for the given endpoints with default timeouts.
    pub fn new(endpoints: impl IntoIterator<Item = impl Into<String>>) -> ClientConfig {
        ClientConfig {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            ..ClientConfig::default()
        }
    }

    fn options(&self) -> ConnectOptions {
        ConnectOptions::new()
            .with_keep_alive(self.keepalive_interval, self.keepalive_timeout)
            .with_keep_alive_while_idle(true)
            .with_connect_timeout(self.connect_timeout)
    }

    /// The endpoints joined by `,`, for messages.
    pub fn endpoints_display(&self) -> String {
        self.endpoints.join(",")
    }
}

/// Builds a client without checking that etcd answers (the channel connects lazily).
///
/// # Errors
/// When an endpoint is not a valid URL.
pub async fn build(config: &ClientConfig) -> anyhow::Result<Client> {
    anyhow::ensure!(!config.endpoints.is_empty(), "no etcd endpoints given");
    Client::connect(&config.endpoints, Some(config.options()))
        .await
        .with_context(|| format!("invalid etcd endpoints {}", config.endpoints_display()))
}

/// Builds a client and checks that etcd answers within the connect timeout.
///
/// # Errors
/// One line naming the endpoints when etcd is unreachable.
pub async fn connect(config: &ClientConfig) -> anyhow::Result<Client> {
    let client = build(config).await?;
    probe(&client, config).await?;
    Ok(client)
}

/// Checks that etcd answers a read.
///
/// # Errors
/// "cannot reach etcd at ...: ..." when it does not, within the connect timeout.
pub async fn probe(client: &Client, config: &ClientConfig) -> anyhow::Result<()> {
    let mut kv = client.kv_client();
    let deadline = config.connect_timeout + config.request_timeout.min(Duration::from_secs(2));
    match tokio::time::timeout(
        deadline,
        kv.get("/", Some(etcd_client::GetOptions::new().with_count_only())),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => anyhow::bail!(
            "cannot reach etcd at {}: {}",
            config.endpoints_display(),
            crate::registry::describe_etcd_error(&e)
        ),
        Err(_) => anyhow::bail!(
            "cannot reach etcd at {}: no answer within {}",
            config.endpoints_display(),
            humantime::format_duration(deadline)
        ),
    }
}
