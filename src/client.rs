//! Connecting to etcd: endpoints, HTTP/2 keepalive, timeouts, TLS, user/password auth,
//! and one clear error when etcd does not answer or refuses us.
//!
//! etcd-client sets no timeouts and no keepalive by default, so a member that hangs
//! without closing its connection would stall a watch forever (etcd-client #48). Every
//! client kcm builds goes through [`connect`], which configures both.
//!
//! Invariants: a password is never taken from a command-line flag (it would show in `ps`)
//! and never printed; every connection failure is reported as one line that says what
//! to fix (wrong CA, rejected client certificate, wrong password, missing permission),
//! followed by etcd's or the TLS library's own words in parentheses.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, GetOptions, Identity, TlsOptions, Txn,
    TxnOp,
};

/// The environment variable holding the etcd password when no `--etcd-password-file`
/// is given.
pub const PASSWORD_ENV: &str = "KCM_ETCD_PASSWORD";

/// The etcd address used when neither `--etcd-servers` nor `KCM_ETCD_SERVERS` is set.
pub const DEFAULT_ETCD_SERVERS: &str = "http://127.0.0.1:2379";

/// How to reach etcd.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Member URLs, e.g. `http://127.0.0.1:2379`. Requests are spread over them.
    pub endpoints: Vec<String>,
    /// Interval between HTTP/2 keepalive pings on connections with open streams; a peer
    /// that does not answer one within `keepalive_timeout` is dropped, which ends every
    /// stream on that connection. Default 5 s, the least etcd accepts by default (its
    /// `--grpc-keepalive-min-time`): below that etcd closes the connection itself.
    /// With several endpoints the timeout also bounds the [`EndpointMonitor`] probes.
    pub keepalive_interval: Duration,
    /// Default 5 s.
    pub keepalive_timeout: Duration,
    /// Bound on establishing a connection. Default 5 s.
    pub connect_timeout: Duration,
    /// Bound on each unary request (get, put, txn); watches are not bounded.
    /// Default 10 s.
    pub request_timeout: Duration,
    /// TLS for `https://` endpoints. Default none.
    pub tls: TlsFiles,
    /// etcd user/password authentication. Default none.
    pub auth: Option<AuthConfig>,
}

/// PEM files for TLS to etcd (`--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA that signed etcd's serving certificates; required for `https://`.
    pub ca_file: Option<PathBuf>,
    /// kcm's client certificate, for an etcd run with `--client-cert-auth`.
    pub cert_file: Option<PathBuf>,
    /// The key of `cert_file`.
    pub key_file: Option<PathBuf>,
}

impl TlsFiles {
    fn is_empty(&self) -> bool {
        *self == TlsFiles::default()
    }
}

/// An etcd user (`--etcd-user`); the password is read when connecting, from
/// `password_file` or else the `KCM_ETCD_PASSWORD` environment variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthConfig {
    pub user: String,
    /// A file whose first line is the password (`--etcd-password-file`).
    pub password_file: Option<PathBuf>,
}

impl AuthConfig {
    /// The password, from the file or the environment.
    ///
    /// # Errors
    /// When the file cannot be read, or neither source is set.
    fn password(&self) -> anyhow::Result<String> {
        if let Some(path) = &self.password_file {
            return read_password_file(path);
        }
        match std::env::var(PASSWORD_ENV) {
            Ok(password) => Ok(password),
            Err(_) => anyhow::bail!(
                "--etcd-user {} needs a password: pass --etcd-password-file or set {PASSWORD_ENV}",
                self.user
            ),
        }
    }
}

/// The most read of `--etcd-password-file`: a password is one line, and a device or a
/// huge file must not fill memory.
pub const MAX_PASSWORD_FILE_BYTES: u64 = 4 << 10;

/// The password on the first line of `path` (so `echo secret > file` works; etcd
/// passwords may contain spaces, so nothing else is trimmed). Warns, once per process,
/// when group or others may read the file, as libpq does for `~/.pgpass`.
///
/// # Errors
/// A file that cannot be read, holds more than [`MAX_PASSWORD_FILE_BYTES`], is not UTF-8,
/// is empty, or starts with an empty line.
fn read_password_file(path: &Path) -> anyhow::Result<String> {
    let flag = format!("--etcd-password-file {}", path.display());
    let file = std::fs::File::open(path).with_context(|| format!("read {flag}"))?;
    #[cfg(unix)]
    if let Ok(metadata) = file.metadata() {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = metadata.permissions().mode() & 0o7777;
        if metadata.is_file() && mode & 0o077 != 0 {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                tracing::warn!(
                    "{flag} is readable by its group or others (mode {mode:04o}); \
                     run chmod 600 {}",
                    path.display()
                );
            });
        }
    }
    let mut bytes = Vec::new();
    file.take(MAX_PASSWORD_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("read {flag}"))?;
    anyhow::ensure!(
        bytes.len() as u64 <= MAX_PASSWORD_FILE_BYTES,
        "{flag}: larger than {} KiB; a password is one line",
        MAX_PASSWORD_FILE_BYTES >> 10
    );
    let text = String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{flag}: not UTF-8 text"))?;
    anyhow::ensure!(
        !text.is_empty(),
        "{flag} is empty; write the password of --etcd-user on its first line"
    );
    let password = text.lines().next().unwrap_or_default();
    anyhow::ensure!(
        !password.is_empty(),
        "{flag}: the first line is empty; write the password of --etcd-user on it"
    );
    Ok(password.to_string())
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            endpoints: vec![DEFAULT_ETCD_SERVERS.to_string()],
            keepalive_interval: Duration::from_secs(5),
            keepalive_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            tls: TlsFiles::default(),
            auth: None,
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

    /// The etcd-client options: keepalive, connect timeout, TLS and credentials.
    ///
    /// # Errors
    /// When endpoints mix `http://` and `https://`, TLS files are given for plain
    /// endpoints (or missing for TLS ones), a file cannot be read, or a password is
    /// missing.
    fn options(&self) -> anyhow::Result<ConnectOptions> {
        // Pings only while a stream (a watch, a lease keepalive, a request) is open: etcd's
        // gRPC server counts a ping on a connection without streams as abuse and closes the
        // connection after three (and pings closer together than its
        // --grpc-keepalive-min-time, 5 s by default, on any connection).
        let mut options = ConnectOptions::new()
            .with_keep_alive(self.keepalive_interval, self.keepalive_timeout)
            .with_keep_alive_while_idle(false)
            .with_connect_timeout(self.connect_timeout);
        let https = self
            .endpoints
            .iter()
            .filter(|e| e.starts_with("https://"))
            .count();
        anyhow::ensure!(
            https == 0 || https == self.endpoints.len(),
            "--etcd-servers mixes http:// and https:// endpoints ({})",
            self.endpoints_display()
        );
        if https == 0 {
            anyhow::ensure!(
                self.tls.is_empty(),
                "--etcd-cafile, --etcd-certfile and --etcd-keyfile need https:// endpoints \
                 in --etcd-servers (got {})",
                self.endpoints_display()
            );
        } else {
            options = options.with_tls(self.tls_options()?);
        }
        if let Some(auth) = &self.auth {
            // Tokens expire (etcd's --auth-token-ttl, 5 min by default): re-authenticate
            // and retry a request refused for an expired token.
            options = options
                .with_user(auth.user.clone(), auth.password()?)
                .with_auto_token_refresh(true);
        }
        Ok(options)
    }

    fn tls_options(&self) -> anyhow::Result<TlsOptions> {
        let read = |flag: &str, path: &PathBuf| {
            std::fs::read(path).with_context(|| format!("read {flag} {}", path.display()))
        };
        let ca_file = self.tls.ca_file.as_ref().context(
            "https:// endpoints need --etcd-cafile, the CA that signed etcd's certificate",
        )?;
        let mut tls = TlsOptions::new()
            .ca_certificate(Certificate::from_pem(read("--etcd-cafile", ca_file)?));
        match (&self.tls.cert_file, &self.tls.key_file) {
            (Some(cert), Some(key)) => {
                tls = tls.identity(Identity::from_pem(
                    read("--etcd-certfile", cert)?,
                    read("--etcd-keyfile", key)?,
                ));
            }
            (None, None) => {}
            _ => anyhow::bail!("--etcd-certfile and --etcd-keyfile go together"),
        }
        Ok(tls)
    }

    /// The endpoints joined by `,`, for messages.
    pub fn endpoints_display(&self) -> String {
        self.endpoints.join(",")
    }
}

/// Where a command works: the etcd to reach, how, and the key prefix its objects live
/// under. The command line builds one from its global flags (`--etcd-*`, `--prefix`);
/// every command connects through it.
#[derive(Clone, Debug)]
pub struct Target {
    /// Endpoints, keepalive, timeouts, TLS and auth.
    pub client: ClientConfig,
    /// The key prefix, normalized (`/registry`, never empty, no trailing `/`).
    pub prefix: String,
}

impl Target {
    /// A target under `prefix`.
    ///
    /// # Errors
    /// When the prefix is empty (see [`crate::api::normalize_prefix`]).
    pub fn new(client: ClientConfig, prefix: &str) -> anyhow::Result<Target> {
        Ok(Target {
            client,
            prefix: crate::api::normalize_prefix(prefix)?,
        })
    }

    /// Connects (checking that etcd answers and the user may read the prefix) and builds
    /// the registry, with the target's request timeout.
    ///
    /// # Errors
    /// One line when etcd is unreachable or refuses us.
    pub async fn connect(&self) -> anyhow::Result<(Client, crate::registry::Registry)> {
        let client = connect(&self.client).await?;
        let registry = crate::registry::Registry::new(&client, &self.prefix)?
            .with_request_timeout(self.client.request_timeout);
        check_access(&client, &self.client, registry.prefix(), false).await?;
        Ok((client, registry))
    }
}

/// Builds a client without checking that etcd answers (the channel connects lazily).
///
/// # Errors
/// When an endpoint is not a valid URL.
///
/// With `auth` set, this already talks to etcd: it authenticates.
///
/// # Errors
/// Also when authentication fails, as one line saying why (see [`explain`]).
pub async fn build(config: &ClientConfig) -> anyhow::Result<Client> {
    anyhow::ensure!(!config.endpoints.is_empty(), "no etcd endpoints given");
    let options = config.options()?;
    match Client::connect(&config.endpoints, Some(options)).await {
        Ok(client) => Ok(client),
        Err(
            e @ (etcd_client::Error::InvalidArgs(_)
            | etcd_client::Error::InvalidUri(_)
            | etcd_client::Error::EndpointError(_)),
        ) => Err(anyhow::anyhow!(
            "invalid etcd endpoints {}: {}",
            config.endpoints_display(),
            crate::registry::describe_etcd_error(&e)
        )),
        Err(e) => Err(anyhow::anyhow!(
            "cannot connect to etcd at {}: {}",
            config.endpoints_display(),
            explain(&e, config)
        )),
    }
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
        // etcd answered; a user restricted to a prefix may not read "/".
        Ok(Err(e)) if is_permission_denied(&e) => Ok(()),
        Ok(Err(e)) => anyhow::bail!(
            "cannot reach etcd at {}: {}",
            config.endpoints_display(),
            explain(&e, config)
        ),
        Err(_) => anyhow::bail!(
            "cannot reach etcd at {}: no answer within {}",
            config.endpoints_display(),
            humantime::format_duration(deadline)
        ),
    }
}

/// Checks that the connected user may read (and, with `write`, write) the keys under
/// `prefix`, so a missing permission fails at start with one line instead of as a
/// stream of refused syncs. The write check is a transaction whose compare never holds:
/// etcd checks the permissions of both branches before it evaluates the compare, so
/// nothing is ever written.
///
/// # Errors
/// "etcd user U may not read|write keys under P/ ..." naming the role grant that fixes it;
/// other failures as [`explain`] words them.
pub async fn check_access(
    client: &Client,
    config: &ClientConfig,
    prefix: &str,
    write: bool,
) -> anyhow::Result<()> {
    let dir = format!("{prefix}/");
    let mut kv = client.kv_client();
    let user = config
        .auth
        .as_ref()
        .map_or("(none)", |auth| auth.user.as_str());
    let denied = |what: &str| {
        anyhow::anyhow!(
            "etcd user {user} may not {what} keys under {dir} (grant it a role with \
             `etcdctl role grant-permission ROLE --prefix=true readwrite {dir}`)"
        )
    };
    let read = kv.get(
        dir.as_str(),
        Some(GetOptions::new().with_prefix().with_count_only()),
    );
    match tokio::time::timeout(config.request_timeout, read).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) if is_permission_denied(&e) => return Err(denied("read")),
        Ok(Err(e)) => anyhow::bail!("read {dir} from etcd: {}", explain(&e, config)),
        Err(_) => anyhow::bail!(
            "read {dir} from etcd: no answer within {}",
            humantime::format_duration(config.request_timeout)
        ),
    }
    if !write {
        return Ok(());
    }
    let probe = format!("{dir}kcm-permission-check");
    let txn = Txn::new()
        .when([Compare::version(probe.as_str(), CompareOp::Less, 0)])
        .and_then([TxnOp::put(probe.as_str(), "", None)]);
    match tokio::time::timeout(config.request_timeout, kv.txn(txn)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) if is_permission_denied(&e) => Err(denied("write")),
        // etcd checks its quota before permissions, so this says nothing about them; the
        // controller manager starts anyway and says why its writes fail (its alarm
        // watch warns), rather than exiting until an operator frees space.
        Ok(Err(e)) if crate::registry::is_no_space(&e) => Ok(()),
        Ok(Err(e)) => anyhow::bail!("check write access to {dir}: {}", explain(&e, config)),
        Err(_) => anyhow::bail!(
            "check write access to {dir}: no answer within {}",
            humantime::format_duration(config.request_timeout)
        ),
    }
}

fn is_permission_denied(error: &etcd_client::Error) -> bool {
    matches!(error, etcd_client::Error::GRpcStatus(status)
        if status.code() == tonic::Code::PermissionDenied
            || status.message().contains("permission denied"))
}

/// One line saying what went wrong talking to etcd and what to fix, followed by the
/// underlying error in parentheses. Recognizes TLS failures (unknown CA, a server
/// certificate that is expired or for another host, a client certificate etcd
/// rejected, TLS spoken to a plain server) and authentication failures; anything else is
/// etcd's or the transport's own message.
pub fn explain(error: &etcd_client::Error, config: &ClientConfig) -> String {
    let detail = crate::registry::describe_etcd_error(error);
    let lower = detail.to_lowercase();
    let https = config.endpoints.iter().any(|e| e.starts_with("https://"));
    // How a connection that the other side dropped at once shows (explain is only used at
    // start, where that means the handshake, TLS or HTTP/2, failed).
    let closed = lower.contains("connection closed")
        || lower.contains("connection reset")
        || lower.contains("broken pipe");
    let ca = config
        .tls
        .ca_file
        .as_ref()
        .map_or(String::new(), |path| format!(" {}", path.display()));
    let user = config
        .auth
        .as_ref()
        .map_or("(none)", |auth| auth.user.as_str());
    let summary = if lower.contains("unknownissuer") || lower.contains("unknown issuer") {
        format!("etcd's certificate is not signed by the CA in --etcd-cafile{ca}")
    } else if lower.contains("notvalidforname") || lower.contains("not valid for name") {
        "etcd's certificate is not valid for the host in --etcd-servers".to_string()
    } else if lower.contains("invalid peer certificate") && lower.contains("expired") {
        "etcd's certificate has expired".to_string()
    } else if lower.contains("invalid peer certificate") {
        format!("etcd's certificate was rejected (checked against --etcd-cafile{ca})")
    } else if lower.contains("badcertificate")
        || lower.contains("bad certificate")
        || lower.contains("certificaterequired")
        || lower.contains("certificate required")
        || lower.contains("certificateexpired")
        || lower.contains("unknownca")
        || lower.contains("unknown ca")
    {
        "etcd rejected kcm's client certificate: pass --etcd-certfile and --etcd-keyfile \
         with a certificate that is current and signed by etcd's --trusted-ca-file"
            .to_string()
    } else if lower.contains("invalidcontenttype") || lower.contains("corrupt message") {
        "etcd does not speak TLS there; use http:// endpoints".to_string()
    } else if lower.contains("keymismatch") || lower.contains("keys may not be consistent") {
        "the key in --etcd-keyfile does not belong to the certificate in --etcd-certfile"
            .to_string()
    } else if https && closed {
        // With TLS 1.3 a rejected client certificate often shows only as a closed
        // connection: the server's alert comes after the client thinks it is done.
        "etcd closed the TLS connection: it may have rejected kcm's client certificate \
         (--etcd-certfile: missing, expired, or not signed by etcd's --trusted-ca-file)"
            .to_string()
    } else if !https && (closed || lower.contains("h2 protocol")) {
        "etcd may require TLS: use https:// endpoints with --etcd-cafile".to_string()
    } else if lower.contains("authentication failed") {
        format!("etcd refused user {user}: wrong password or no such user")
    } else if lower.contains("user name is empty") {
        format!(
            "etcd requires authentication: pass --etcd-user, and the password in \
             --etcd-password-file or {PASSWORD_ENV}"
        )
    } else if lower.contains("authentication is not enabled") {
        "etcd has authentication disabled: drop --etcd-user".to_string()
    } else if lower.contains("permission denied") {
        format!("etcd user {user} lacks the permission for this request")
    } else {
        return detail;
    };
    format!("{summary} ({detail})")
}

/// How often [`EndpointMonitor`] probes every member.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// Keeps a multi-member client's balanced channel to the members that answer.
///
/// etcd-client's channel picks an endpoint at random for every request and every new
/// stream, and a member that died or hangs stays in the pick: a third of the requests (and
/// of the watches re-opened after the failure) would go on failing or hanging. The monitor
/// probes every member with a read of its own every second, bounded by
/// `keepalive_timeout`; a member that fails a probe is removed from the channel and added
/// back once it answers again. The last member is never removed. So new requests and
/// streams avoid a member that died or hangs within 1 s plus the keepalive timeout; the
/// streams already open on a hung member end when HTTP/2 keepalive gives up on their
/// connection (keepalive interval plus timeout), and re-open on the others.
///
/// Owns its task: dropping the monitor stops it.
pub struct EndpointMonitor {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for EndpointMonitor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl EndpointMonitor {
    /// Starts monitoring `client`'s endpoints; `None` for a single endpoint (there is
    /// nowhere else to go).
    pub fn start(client: &Client, config: &ClientConfig) -> Option<EndpointMonitor> {
        if config.endpoints.len() < 2 {
            return None;
        }
        let task = tokio::spawn(monitor(client.clone(), config.clone()));
        Some(EndpointMonitor { task })
    }
}

async fn monitor(client: Client, config: ClientConfig) {
    let n = config.endpoints.len();
    let mut probes: Vec<Option<Client>> = vec![None; n];
    let mut in_use = vec![true; n];
    let mut tick = tokio::time::interval(PROBE_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let answers =
            futures::future::join_all((0..n).map(|i| probe_member(&config, i, probes[i].clone())))
                .await;
        for (i, (answered, probe)) in answers.into_iter().enumerate() {
            probes[i] = probe;
            let endpoint = &config.endpoints[i];
            if answered && !in_use[i] {
                match client.add_endpoint(endpoint).await {
                    Ok(()) => {
                        in_use[i] = true;
                        tracing::info!(%endpoint, "etcd member answers again; using it");
                    }
                    Err(e) => tracing::debug!(%endpoint, error = %e, "add endpoint"),
                }
            } else if !answered && in_use[i] && in_use.iter().filter(|u| **u).count() > 1 {
                match client.remove_endpoint(endpoint).await {
                    Ok(()) => {
                        in_use[i] = false;
                        tracing::warn!(%endpoint,
                            "etcd member does not answer; not used until it does");
                    }
                    Err(e) => tracing::debug!(%endpoint, error = %e, "remove endpoint"),
                }
            }
        }
    }
}

/// Whether member `i` answers a read within the keepalive timeout, through a client of
/// its own (built on first use, and again after a failure).
async fn probe_member(
    config: &ClientConfig,
    i: usize,
    probe: Option<Client>,
) -> (bool, Option<Client>) {
    let single = ClientConfig {
        endpoints: vec![config.endpoints[i].clone()],
        connect_timeout: config.keepalive_timeout,
        ..config.clone()
    };
    let attempt = async {
        let client = match probe {
            Some(client) => client,
            None => build(&single).await.ok()?,
        };
        let mut kv = client.kv_client();
        match kv.get("/", Some(GetOptions::new().with_count_only())).await {
            Ok(_) => Some(client),
            Err(e) if is_permission_denied(&e) => Some(client),
            Err(_) => None,
        }
    };
    match tokio::time::timeout(config.keepalive_timeout, attempt).await {
        Ok(Some(client)) => (true, Some(client)),
        _ => (false, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check_options(endpoints: &[&str], tls: TlsFiles, expected_error: Option<&str>) {
        let config = ClientConfig {
            tls,
            ..ClientConfig::new(endpoints.iter().copied())
        };
        match (config.options(), expected_error) {
            (Ok(_), None) => {}
            (Err(e), Some(expected)) => {
                let text = format!("{e:#}");
                assert!(text.contains(expected), "{text}");
            }
            (Ok(_), Some(expected)) => panic!("accepted, expected {expected:?}"),
            (Err(e), None) => panic!("rejected: {e:#}"),
        }
    }

    #[test]
    fn tls_settings_must_match_the_endpoints() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "not checked before connecting").unwrap();
        let with_ca = TlsFiles {
            ca_file: Some(ca.clone()),
            ..TlsFiles::default()
        };
        check_options(&["http://a:2379"], TlsFiles::default(), None);
        check_options(&["https://a:2379"], with_ca.clone(), None);
        check_options(
            &["http://a:2379", "https://b:2379"],
            with_ca.clone(),
            Some("mixes http:// and https://"),
        );
        check_options(&["http://a:2379"], with_ca, Some("need https:// endpoints"));
        check_options(
            &["https://a:2379"],
            TlsFiles::default(),
            Some("https:// endpoints need --etcd-cafile"),
        );
        check_options(
            &["https://a:2379"],
            TlsFiles {
                ca_file: Some(ca.clone()),
                cert_file: Some(ca.clone()),
                key_file: None,
            },
            Some("go together"),
        );
        check_options(
            &["https://a:2379"],
            TlsFiles {
                ca_file: Some(dir.path().join("missing.pem")),
                ..TlsFiles::default()
            },
            Some("read --etcd-cafile"),
        );
    }

    #[test]
    fn the_password_is_the_first_line_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        std::fs::write(&file, "s3cret with spaces\nignored\n").unwrap();
        let auth = AuthConfig {
            user: "kcm".into(),
            password_file: Some(file),
        };
        assert_eq!(auth.password().unwrap(), "s3cret with spaces");
        let missing = AuthConfig {
            user: "kcm".into(),
            password_file: Some(dir.path().join("nope")),
        };
        let error = format!("{:#}", missing.password().unwrap_err());
        assert!(error.contains("read --etcd-password-file"), "{error}");
    }

    #[test]
    fn a_password_file_is_one_short_line() {
        let dir = tempfile::tempdir().unwrap();
        let check = |content: &[u8], expected: &str| {
            let file = dir.path().join("password");
            std::fs::write(&file, content).unwrap();
            let error = format!("{:#}", read_password_file(&file).unwrap_err());
            assert!(error.contains(expected), "{error}");
        };
        check(b"", "password is empty; write the password");
        check(b"\nsecret\n", "the first line is empty");
        check(&[b'x'; 5000], "larger than 4 KiB; a password is one line");
        check(b"\xff\n", "not UTF-8");
        // A device is read only up to the bound.
        let error = format!(
            "{:#}",
            read_password_file(Path::new("/dev/zero")).unwrap_err()
        );
        assert!(error.contains("/dev/zero: larger than 4 KiB"), "{error}");
    }

    #[track_caller]
    fn check_explain(status: tonic::Status, endpoint: &str, expected: &str) {
        let config = ClientConfig {
            auth: Some(AuthConfig {
                user: "kcm".into(),
                password_file: None,
            }),
            ..ClientConfig::new([endpoint])
        };
        let text = explain(&etcd_client::Error::GRpcStatus(status), &config);
        assert!(text.starts_with(expected), "{text}");
        assert_eq!(text.lines().count(), 1, "{text}");
    }

    #[test]
    fn connection_failures_say_what_to_fix() {
        use tonic::Status;
        let tls = "https://127.0.0.1:2379";
        let plain = "http://127.0.0.1:2379";
        check_explain(
            Status::unavailable("invalid peer certificate: UnknownIssuer"),
            tls,
            "etcd's certificate is not signed by the CA in --etcd-cafile",
        );
        check_explain(
            Status::unavailable("invalid peer certificate: NotValidForName"),
            tls,
            "etcd's certificate is not valid for the host",
        );
        check_explain(
            Status::unavailable("received fatal alert: BadCertificate"),
            tls,
            "etcd rejected kcm's client certificate",
        );
        check_explain(
            Status::unavailable("transport error: connection closed"),
            tls,
            "etcd closed the TLS connection: it may have rejected kcm's client certificate",
        );
        check_explain(
            Status::unavailable("transport error: connection closed"),
            plain,
            "etcd may require TLS",
        );
        check_explain(
            Status::invalid_argument(
                "etcdserver: authentication failed, invalid user ID or password",
            ),
            plain,
            "etcd refused user kcm: wrong password or no such user",
        );
        check_explain(
            Status::invalid_argument("etcdserver: user name is empty"),
            plain,
            "etcd requires authentication",
        );
        check_explain(
            Status::permission_denied("etcdserver: permission denied"),
            plain,
            "etcd user kcm lacks the permission",
        );
        check_explain(
            Status::unavailable("tcp connect error"),
            plain,
            "tcp connect error",
        );
    }
}
