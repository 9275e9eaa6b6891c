//! Security: kcm against a TLS-only etcd that requires client certificates (certificates made
//! here with rcgen), and against an etcd with user/password authentication; the right
//! settings work, and every wrong one fails at start with one line saying what to fix.

use std::path::{Path, PathBuf};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions, GetOptions, Permission};
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use serde_json::{json, Value};

use crate::support::cluster::{start_cluster_with, start_tls_etcd, ClusterOptions, ServerTls};
use crate::support::kcm::{run_kcm, Kcm};
use crate::support::objects::put_controller;
use crate::support::{eventually, with_timeout};

const LIMIT: Duration = Duration::from_secs(120);
const CONVERGE: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// Certificates

/// A CA: its certificate (to sign with) and key.
struct Ca {
    cert: Certificate,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).expect("self-sign CA");
        Ca { cert, key }
    }

    /// Signs a leaf for `names` (IP addresses or DNS names) valid for `usage`; `expired`
    /// makes it one that ran out in 2001. Returns (certificate PEM, key PEM).
    fn sign(
        &self,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
        expired: bool,
    ) -> (String, String) {
        let key = KeyPair::generate().expect("leaf key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("leaf params");
        params
            .distinguished_name
            .push(DnType::CommonName, "kcm test");
        params.extended_key_usages = vec![usage];
        if expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        }
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("sign leaf");
        (cert.pem(), key.serialize_pem())
    }
}

/// The PEM files of one test: the server's CA and certificate (valid for 127.0.0.1 only),
/// a good client certificate, an expired one, and an unrelated CA.
struct Pki {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    server: PathBuf,
    server_key: PathBuf,
    client: PathBuf,
    client_key: PathBuf,
    expired: PathBuf,
    expired_key: PathBuf,
    other_ca: PathBuf,
}

impl Pki {
    fn generate() -> Pki {
        let dir = tempfile::tempdir().expect("pki dir");
        let write = |name: &str, pem: &str| -> PathBuf {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).expect("write pem");
            path
        };
        let ca = Ca::new("kcm test CA");
        let (server, server_key) =
            ca.sign(&["127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth, false);
        let (client, client_key) = ca.sign(&["kcm"], ExtendedKeyUsagePurpose::ClientAuth, false);
        let (expired, expired_key) = ca.sign(&["kcm"], ExtendedKeyUsagePurpose::ClientAuth, true);
        let other = Ca::new("another CA");
        Pki {
            ca: write("ca.pem", &ca.cert.pem()),
            server: write("server.pem", &server),
            server_key: write("server-key.pem", &server_key),
            client: write("client.pem", &client),
            client_key: write("client-key.pem", &client_key),
            expired: write("expired.pem", &expired),
            expired_key: write("expired-key.pem", &expired_key),
            other_ca: write("other-ca.pem", &other.cert.pem()),
            _dir: dir,
        }
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// Whether the controller's status and its pod count both say `n`.
async fn converged(client: &Client, name: &str, n: i64) -> bool {
    let mut client = client.clone();
    let Ok(rc) = client
        .get(format!("/registry/controllers/default/{name}"), None)
        .await
    else {
        return false;
    };
    let Some(kv) = rc.kvs().first() else {
        return false;
    };
    let rc: Value = serde_json::from_slice(kv.value()).expect("controller JSON");
    let pods = client
        .get(
            "/registry/pods/default/",
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .expect("count pods");
    rc["status"]["replicas"] == json!(n) && pods.count() == n
}

/// Runs `kcm {args}` and checks that it fails with exit code 1 and one line on stderr that
/// contains `expected`.
#[track_caller]
fn check_failure(output: crate::support::kcm::Output, expected: &str) {
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = output.stderr.trim_end();
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("kcm: "), "{stderr}");
    assert!(
        stderr.contains(expected),
        "expected {expected:?} in: {stderr}"
    );
    eprintln!("{stderr}");
}

// ---------------------------------------------------------------------------------------------
// TLS

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_only_etcd_with_client_certificates_works_and_bad_certificates_fail_clearly() {
    with_timeout(LIMIT, async {
        let pki = Pki::generate();
        let Some(etcd) = start_tls_etcd(ServerTls {
            ca: pki.ca.clone(),
            cert: pki.server.clone(),
            key: pki.server_key.clone(),
            client_cert: pki.client.clone(),
            client_key: pki.client_key.clone(),
        })
        .await
        else {
            return;
        };
        let endpoint = etcd.endpoint(0);
        assert!(endpoint.starts_with("https://127.0.0.1:"), "{endpoint}");
        let port = endpoint.rsplit(':').next().unwrap().to_string();
        let good = |endpoint: &str| -> Vec<String> {
            [
                "--etcd-servers",
                endpoint,
                "--etcd-cafile",
                path(&pki.ca),
                "--etcd-certfile",
                path(&pki.client),
                "--etcd-keyfile",
                path(&pki.client_key),
            ]
            .map(String::from)
            .to_vec()
        };

        // The controller manager works over TLS.
        let client = etcd.client().await;
        put_controller(&client, "default", "web", "web", 3).await;
        let mut args = good(&endpoint);
        args.extend(["--controllers", "replication"].map(String::from));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let manager = Kcm::start(&args, &[]).await;
        eventually(CONVERGE, "web to converge on 3 pods over TLS", || {
            converged(&client, "web", 3)
        })
        .await;
        drop(manager);
        let mut get = vec!["get".to_string(), "pods".to_string()];
        get.extend(good(&endpoint));
        let get: Vec<&str> = get.iter().map(String::as_str).collect();
        let output = run_kcm(&get, &[]).await;
        assert!(output.status.success(), "{output:?}");
        assert_eq!(
            output.stdout.matches("web-").count(),
            3,
            "{}",
            output.stdout
        );

        // Each wrong setting fails at start, naming what to fix.
        let get = |endpoint: &str, ca: &Path, cert: Option<(&Path, &Path)>| {
            let mut args = vec![
                "get".to_string(),
                "pods".to_string(),
                "--etcd-servers".to_string(),
                endpoint.to_string(),
                "--etcd-cafile".to_string(),
                path(ca).to_string(),
            ];
            if let Some((cert, key)) = cert {
                args.extend(
                    ["--etcd-certfile", path(cert), "--etcd-keyfile", path(key)].map(String::from),
                );
            }
            async move {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                run_kcm(&args, &[]).await
            }
        };
        let client_cert = Some((pki.client.as_path(), pki.client_key.as_path()));
        check_failure(
            get(&endpoint, &pki.other_ca, client_cert).await,
            "etcd's certificate is not signed by the CA in --etcd-cafile",
        );
        // etcd refuses a missing or expired client certificate with an alert after the
        // handshake, which arrives or not before the connection closes: either way the
        // message names the client certificate.
        check_failure(
            get(&endpoint, &pki.ca, None).await,
            "kcm's client certificate",
        );
        check_failure(
            get(
                &endpoint,
                &pki.ca,
                Some((pki.expired.as_path(), pki.expired_key.as_path())),
            )
            .await,
            "kcm's client certificate",
        );
        check_failure(
            get(
                &endpoint,
                &pki.ca,
                Some((pki.client.as_path(), pki.server_key.as_path())),
            )
            .await,
            "the key in --etcd-keyfile does not belong to the certificate in --etcd-certfile",
        );
        check_failure(
            get(&format!("https://localhost:{port}"), &pki.ca, client_cert).await,
            "etcd's certificate is not valid for the host",
        );
        check_failure(
            get(&format!("http://127.0.0.1:{port}"), &pki.ca, client_cert).await,
            "need https:// endpoints",
        );
        let output = run_kcm(
            &[
                "get",
                "pods",
                "--etcd-servers",
                &format!("http://127.0.0.1:{port}"),
            ],
            &[],
        )
        .await;
        check_failure(output, "etcd may require TLS");
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Authentication

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_auth_the_right_user_works_and_a_wrong_password_or_permission_fails_clearly() {
    with_timeout(LIMIT, async {
        // Tokens expire after 2 s without use, so the manager below must refresh its own.
        let Some(etcd) = start_cluster_with(ClusterOptions {
            members: 1,
            extra_args: vec!["--auth-token-ttl".to_string(), "2".to_string()],
            ..ClusterOptions::default()
        })
        .await
        else {
            return;
        };
        let endpoint = etcd.endpoint(0);
        let mut admin = etcd.client().await;
        admin.role_add("root").await.unwrap();
        admin.user_add("root", "root-secret", None).await.unwrap();
        admin.user_grant_role("root", "root").await.unwrap();
        for (user, password, grant) in [
            (
                "kcm",
                "kcm-secret",
                Some(Permission::read_write("/registry/")),
            ),
            (
                "reader",
                "reader-secret",
                Some(Permission::read("/registry/")),
            ),
            ("nobody", "nobody-secret", None),
        ] {
            admin.user_add(user, password, None).await.unwrap();
            if let Some(permission) = grant {
                admin.role_add(user).await.unwrap();
                admin
                    .role_grant_permission(user, permission.with_prefix())
                    .await
                    .unwrap();
                admin.user_grant_role(user, user).await.unwrap();
            }
        }
        admin.auth_enable().await.unwrap();
        let root = Client::connect(
            [endpoint.as_str()],
            Some(
                ConnectOptions::new()
                    .with_user("root", "root-secret")
                    .with_auto_token_refresh(true),
            ),
        )
        .await
        .expect("connect as root");

        let dir = tempfile::tempdir().unwrap();
        let password_file = dir.path().join("kcm-password");
        std::fs::write(&password_file, "kcm-secret\n").unwrap();
        let password_file = path(&password_file).to_string();

        // The right user works, elections included, and keeps working after its token
        // expired.
        put_controller(&root, "default", "web", "web", 2).await;
        let manager = Kcm::start(
            &[
                "--etcd-servers",
                &endpoint,
                "--etcd-user",
                "kcm",
                "--etcd-password-file",
                &password_file,
                "--controllers",
                "replication",
                "--leader-elect",
                "--leader-elect-lease-duration",
                "3s",
            ],
            &[],
        )
        .await;
        eventually(CONVERGE, "web to converge on 2 pods as user kcm", || {
            converged(&root, "web", 2)
        })
        .await;
        assert!(manager.is_leader().await);
        // Long enough for the idle token to expire (the scenario, not a wait for a condition).
        tokio::time::sleep(Duration::from_secs(3)).await;
        put_controller(&root, "default", "web", "web", 4).await;
        eventually(
            CONVERGE,
            "web to converge on 4 pods after the token expired",
            || converged(&root, "web", 4),
        )
        .await;
        drop(manager);

        // The password from the environment works too.
        let output = run_kcm(
            &[
                "get",
                "pods",
                "--etcd-servers",
                &endpoint,
                "--etcd-user",
                "kcm",
            ],
            &[("KCM_ETCD_PASSWORD", "kcm-secret")],
        )
        .await;
        assert!(output.status.success(), "{output:?}");
        assert_eq!(
            output.stdout.matches("web-").count(),
            4,
            "{}",
            output.stdout
        );

        let get_as = |user: &str, password: &str| {
            let args = [
                "get",
                "pods",
                "--etcd-servers",
                endpoint.as_str(),
                "--etcd-user",
                user,
            ]
            .map(String::from);
            let password = password.to_string();
            async move {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                run_kcm(&args, &[("KCM_ETCD_PASSWORD", password.as_str())]).await
            }
        };
        check_failure(
            get_as("kcm", "wrong").await,
            "etcd refused user kcm: wrong password or no such user",
        );
        check_failure(
            get_as("nobody", "nobody-secret").await,
            "etcd user nobody may not read keys under /registry/",
        );
        check_failure(
            run_kcm(
                &[
                    "controller-manager",
                    "--etcd-servers",
                    &endpoint,
                    "--etcd-user",
                    "reader",
                    "--port",
                    "0",
                ],
                &[("KCM_ETCD_PASSWORD", "reader-secret")],
            )
            .await,
            "etcd user reader may not write keys under /registry/",
        );
        check_failure(
            run_kcm(&["get", "pods", "--etcd-servers", &endpoint], &[]).await,
            "etcd requires authentication",
        );
        check_failure(
            run_kcm(
                &[
                    "get",
                    "pods",
                    "--etcd-servers",
                    &endpoint,
                    "--etcd-user",
                    "kcm",
                ],
                &[],
            )
            .await,
            "needs a password",
        );
    })
    .await;
}
