//! The one way tests start `kcm apiserver`: plain HTTP on a free port ([`apiserver`]) or a
//! given one ([`apiserver_on`]), waited for until `/readyz` answers 200 ([`wait_ready`]), and
//! HTTPS with a test CA ([`serving_pki`], [`https_apiserver`], [`tls_connector`]).
//!
//! Invariants: every apiserver is a [`Kcm`] child, killed when its handle drops; a wait for
//! readiness fails at once, naming the port, when the process exits instead.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};

use super::kcm::{http_get, Kcm};
use super::{free_port, EtcdServer};

/// How long an apiserver may take to answer `/readyz` with 200 (every watch cache listed).
pub const READY: Duration = Duration::from_secs(30);
/// How often [`wait_ready`] asks again.
const POLL: Duration = Duration::from_millis(20);

/// `kcm apiserver --port {free} {args}` over `etcd`, once `/readyz` answers 200.
pub async fn apiserver(etcd: &EtcdServer, args: &[&str]) -> (Kcm, u16) {
    let port = free_port();
    (apiserver_on(&etcd.endpoint(), port, args).await, port)
}

/// `kcm --etcd-servers {etcd_servers} apiserver --port {port} {args}`, once `/readyz`
/// answers 200. `etcd_servers` may list several members, comma-separated.
pub async fn apiserver_on(etcd_servers: &str, port: u16, args: &[&str]) -> Kcm {
    let mut kcm = spawn_apiserver(etcd_servers, port, args);
    wait_ready(&mut kcm, port).await;
    kcm
}

/// `kcm --etcd-servers {etcd_servers} apiserver --port {port} {args}`, not waited for.
pub fn spawn_apiserver(etcd_servers: &str, port: u16, args: &[&str]) -> Kcm {
    let port_arg = port.to_string();
    let mut all = vec![
        "--etcd-servers",
        etcd_servers,
        "apiserver",
        "--port",
        &port_arg,
    ];
    all.extend_from_slice(args);
    Kcm::spawn(&all, &[])
}

/// Waits until `GET /readyz` on `port` answers 200 (`kcm apiserver` or `kcm up`); panics if
/// `kcm` exits first or after [`READY`].
pub async fn wait_ready(kcm: &mut Kcm, port: u16) {
    let deadline = tokio::time::Instant::now() + READY;
    loop {
        if matches!(http_get(port, "/readyz").await, Some((200, _))) {
            return;
        }
        kcm.assert_running();
        assert!(
            tokio::time::Instant::now() < deadline,
            "the API on port {port} did not answer /readyz 200 within {READY:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// A CA and a serving certificate for 127.0.0.1, as PEM files in `dir`: (CA, cert, key).
pub fn serving_pki(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kcm apiserver test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    let write = |name: &str, pem: String| {
        let path = dir.join(name);
        std::fs::write(&path, pem).unwrap();
        path
    };
    (
        write("ca.pem", ca.pem()),
        write("api.pem", cert.pem()),
        write("api-key.pem", key.serialize_pem()),
    )
}

/// `kcm apiserver --port {free}` over `etcd` serving HTTPS with `cert` and `key` (and
/// `--token-auth-file tokens` when given); not waited for. The child and its port.
pub fn https_apiserver(
    etcd: &EtcdServer,
    (cert, key): (&Path, &Path),
    tokens: Option<&Path>,
) -> (Kcm, u16) {
    let port = free_port();
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let mut args = vec!["--tls-cert-file", cert, "--tls-private-key-file", key];
    if let Some(tokens) = tokens {
        args.extend(["--token-auth-file", tokens.to_str().unwrap()]);
    }
    (spawn_apiserver(&etcd.endpoint(), port, &args), port)
}

/// A TLS client that trusts the CA in `ca` (PEM).
pub fn tls_connector(ca: &Path) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::CertificateDer;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
}
