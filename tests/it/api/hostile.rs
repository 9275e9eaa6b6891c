//! `kcm apiserver` against hostile clients: the checks that held when issue 35 tried them,
//! kept as tests. Every authentication path on every route family, namespace isolation
//! (crafted continue tokens, `..` and `%2F` in paths, cross-namespace writes), request
//! smuggling, bodies nested 100,000 deep and a YAML alias bomb, and 2,000 slowloris
//! connections. Each asserts what the client gets and that etcd holds what it held.
//!
//! Tested elsewhere, not repeated here: the watch cap
//! (`apiserver::watches_beyond_max_watches_get_429_and_a_freed_slot_is_reused`), a watcher
//! that never reads
//! (`apiserver::a_watcher_that_stops_reading_is_ended_and_never_holds_back_the_others`),
//! racing read-modify-writes (`api_writes::racing_read_modify_writes_lose_no_acknowledged_write`)
//! and HTTPS with a token through kubectl
//! (`apiserver::beyond_loopback_the_api_needs_https_and_tokens_and_kubectl_uses_both`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use base64::Engine as _;
use etcd_client::GetOptions;
use futures::StreamExt as _;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::apiserver::{apiserver, https_apiserver, serving_pki, tls_connector};
use crate::support::kcm::{descriptors, http_get, http_request, proc_status_kib};
use crate::support::{eventually, start_etcd, with_timeout, EtcdServer};

const LIMIT: Duration = Duration::from_secs(60);
const READY: Duration = Duration::from_secs(30);

/// How long a server may take to answer and close a connection: a debug build under a
/// loaded CI machine takes seconds to refuse a 100,000-deep YAML sequence.
const ANSWER: Duration = Duration::from_secs(30);

/// `src/apiserver/http.rs`'s `MAX_PENDING`: connections held that have not sent a whole
/// request.
const MAX_PENDING: usize = 1024;

// ---------------------------------------------------------------------------------------
// Raw HTTP

/// One response a server sent.
struct Reply {
    status: u16,
    body: Vec<u8>,
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status, self.text())
    }
}

impl Reply {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; panics (with the reply) if it is not.
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }

    /// Panics unless the body is a failure `Status` with this code.
    #[track_caller]
    fn assert_status_body(&self, code: u16) {
        let status = self.json();
        assert_eq!(status["kind"], "Status", "{self:?}");
        assert_eq!(status["status"], "Failure", "{self:?}");
        assert_eq!(status["code"], code, "{self:?}");
    }
}

/// An HTTP/1.1 request as bytes: `Host`, the given header lines, `Content-Length` when
/// there is a body, and `Connection: close` so the server ends the exchange.
fn request(method: &str, path: &str, headers: &[String], body: &[u8]) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for header in headers {
        head.push_str(header);
        head.push_str("\r\n");
    }
    if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Sends `raw` as it is and reads until the server closes the connection (at most
/// [`ANSWER`]):
/// every response it sent on it.
async fn converse<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, raw: &[u8]) -> Vec<Reply> {
    // A server that refuses a request may close before taking all of it: a failed write is
    // not an error, what it answered is.
    let _ = stream.write_all(raw).await;
    let _ = stream.flush().await;
    let mut received = Vec::new();
    let read = tokio::time::timeout(ANSWER, async {
        let mut buffer = [0u8; 16 * 1024];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&received);
    assert!(
        read.is_ok(),
        "the server kept the connection open for {ANSWER:?} after {:?} ({} bytes); it sent \
         {text:?}",
        String::from_utf8_lossy(&raw[..raw.len().min(300)]),
        raw.len()
    );
    replies(&received)
}

/// `raw` over a fresh plain connection to the apiserver.
async fn exchange(port: u16, raw: &[u8]) -> Vec<Reply> {
    let stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    converse(stream, raw).await
}

/// Splits what a server sent on one connection into its responses: each body by its
/// `Content-Length`, chunked, or (with neither) to the end.
fn replies(mut bytes: &[u8]) -> Vec<Reply> {
    let mut all = Vec::new();
    while !bytes.is_empty() {
        let Some(end) = find(bytes, b"\r\n\r\n") else {
            panic!("not an HTTP response: {:?}", String::from_utf8_lossy(bytes));
        };
        let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
        bytes = &bytes[end + 4..];
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status in {head:?}"));
        let header = |name: &str| {
            head.lines().skip(1).find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| value.trim().to_ascii_lowercase())
            })
        };
        let body = if header("transfer-encoding").is_some_and(|te| te.contains("chunked")) {
            let mut body = Vec::new();
            loop {
                let line_end = find(bytes, b"\r\n").expect("a chunk size line");
                let size_text = String::from_utf8_lossy(&bytes[..line_end]);
                let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16)
                    .unwrap_or_else(|_| panic!("a chunk size: {size_text:?}"));
                bytes = &bytes[line_end + 2..];
                if size == 0 {
                    let trailer_end = find(bytes, b"\r\n").expect("the last chunk's end");
                    bytes = &bytes[trailer_end + 2..];
                    break;
                }
                body.extend_from_slice(&bytes[..size]);
                bytes = &bytes[size + 2..];
            }
            body
        } else if let Some(length) = header("content-length") {
            let length: usize = length.parse().expect("a Content-Length");
            let body = bytes[..length.min(bytes.len())].to_vec();
            bytes = &bytes[length.min(bytes.len())..];
            body
        } else {
            std::mem::take(&mut bytes).to_vec()
        };
        all.push(Reply { status, body });
    }
    all
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// Every key under `/registry/` with its value and modification revision.
async fn store(etcd: &EtcdServer) -> BTreeMap<String, (i64, Vec<u8>)> {
    let response = etcd
        .client()
        .await
        .get("/registry/", Some(GetOptions::new().with_prefix()))
        .await
        .expect("read the store");
    response
        .kvs()
        .iter()
        .map(|kv| {
            (
                String::from_utf8_lossy(kv.key()).into_owned(),
                (kv.mod_revision(), kv.value().to_vec()),
            )
        })
        .collect()
}

/// The keys that differ between two snapshots of the store.
fn changed(
    before: &BTreeMap<String, (i64, Vec<u8>)>,
    after: &BTreeMap<String, (i64, Vec<u8>)>,
) -> Vec<String> {
    let mut keys: Vec<String> = before
        .keys()
        .chain(after.keys())
        .filter(|key| before.get(*key) != after.get(*key))
        .cloned()
        .collect();
    keys.dedup();
    keys
}

fn pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name },
        "spec": { "containers": [{ "name": "c", "image": "nginx" }] },
    })
}

/// Creates `body` with a POST to `collection`, which must answer 201.
async fn create(port: u16, collection: &str, body: &Value) {
    let response = http_request(
        port,
        "POST",
        collection,
        Some("application/json"),
        body.to_string().as_bytes(),
    )
    .await;
    assert_eq!(response.status, 201, "POST {collection}: {response:?}");
}

// ---------------------------------------------------------------------------------------
// Authentication

/// The token the apiserver knows (alice's).
const TOKEN: &str = "s3cret-0123456789abcdef";

/// `raw` over a fresh HTTPS connection: the first response; `None` when the connection or
/// the handshake fails.
async fn try_https(tls: &tokio_rustls::TlsConnector, port: u16, raw: &[u8]) -> Option<Reply> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let stream = tls.connect(name, tcp).await.ok()?;
    converse(stream, raw).await.into_iter().next()
}

/// [`try_https`], which must be answered.
async fn https(tls: &tokio_rustls::TlsConnector, port: u16, raw: &[u8]) -> Reply {
    try_https(tls, port, raw)
        .await
        .unwrap_or_else(|| panic!("no answer to {:?}", String::from_utf8_lossy(raw)))
}

/// One route of the API: what to send, and what the valid token gets.
struct Route {
    method: &'static str,
    path: &'static str,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    ok: u16,
}

impl Route {
    fn get(path: &'static str) -> Route {
        Route {
            method: "GET",
            path,
            content_type: None,
            body: Vec::new(),
            ok: 200,
        }
    }

    fn request(&self, auth: &[String]) -> Vec<u8> {
        let mut headers = auth.to_vec();
        if let Some(content_type) = self.content_type {
            headers.push(format!("Content-Type: {content_type}"));
        }
        request(self.method, self.path, &headers, &self.body)
    }
}

/// Over HTTPS with `--token-auth-file`: on every route family (discovery, a list, a get, a
/// watch, a create, a patch, a delete, OpenAPI, `/version`, `/metrics`) each way of not
/// presenting the token (none, a wrong one, an empty `Bearer`, a prefix of it, it with
/// junk after it, it in another case, a wrong one before it, another scheme, no scheme) is
/// 401 with an `Unauthorized` Status and changes nothing in etcd; the valid token is
/// served. `/healthz`, `/livez` and `/readyz` are served without a token, by design, and
/// a path that only starts like them is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_refuses_every_request_without_the_exact_token() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let (ca, cert, key) = serving_pki(dir.path());
        let tokens = dir.path().join("tokens.csv");
        std::fs::write(
            &tokens,
            format!("{TOKEN},alice,1,\"system:masters\"\nother-token,bob,2\n"),
        )
        .unwrap();
        let (_kcm, port) = https_apiserver(&etcd, (&cert, &key), Some(&tokens));
        let tls = tls_connector(&ca);
        let tls = &tls;
        let bearer = format!("Authorization: Bearer {TOKEN}");
        eventually(
            READY,
            "the apiserver to answer /readyz 200 over HTTPS",
            || {
                let raw = request("GET", "/readyz", &[], b"");
                async move { try_https(tls, port, &raw).await.map(|r| r.status) == Some(200) }
            },
        )
        .await;
        let pod_in = |name: &str| {
            let mut pod = pod(name);
            pod["metadata"]["namespace"] = json!("default");
            pod
        };
        for name in ["p1", "victim"] {
            let reply = https(
                tls,
                port,
                &request(
                    "POST",
                    "/api/v1/namespaces/default/pods",
                    &[bearer.clone(), "Content-Type: application/json".into()],
                    pod_in(name).to_string().as_bytes(),
                ),
            )
            .await;
            assert_eq!(reply.status, 201, "{reply:?}");
        }

        let routes = [
            Route::get("/api"),
            Route::get("/apis"),
            Route::get("/api/v1"),
            Route::get("/apis/apps/v1"),
            Route::get("/api/v1/namespaces/default/pods"),
            Route::get("/api/v1/pods?limit=1"),
            Route::get("/api/v1/namespaces/default/pods/p1"),
            Route::get("/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1"),
            Route::get("/openapi/v2"),
            Route::get("/openapi/v3"),
            Route::get("/version"),
            Route::get("/metrics"),
            Route {
                method: "POST",
                path: "/api/v1/namespaces/default/pods",
                content_type: Some("application/json"),
                body: pod_in("made-with-the-token").to_string().into_bytes(),
                ok: 201,
            },
            Route {
                method: "PATCH",
                path: "/api/v1/namespaces/default/pods/p1",
                content_type: Some("application/merge-patch+json"),
                body: br#"{"metadata":{"labels":{"patched":"yes"}}}"#.to_vec(),
                ok: 200,
            },
            Route {
                method: "DELETE",
                path: "/api/v1/namespaces/default/pods/victim",
                content_type: None,
                body: Vec::new(),
                ok: 200,
            },
        ];
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("alice:{TOKEN}"));
        let refused: Vec<(&str, Vec<String>)> = vec![
            ("no Authorization header", vec![]),
            ("a wrong token", vec!["Authorization: Bearer wrong".into()]),
            (
                "another user's token with junk",
                vec!["Authorization: Bearer other-token-x".into()],
            ),
            ("an empty Bearer", vec!["Authorization: Bearer ".into()]),
            ("Bearer alone", vec!["Authorization: Bearer".into()]),
            ("an empty Authorization", vec!["Authorization: ".into()]),
            (
                "a prefix of the token",
                vec![format!(
                    "Authorization: Bearer {}",
                    &TOKEN[..TOKEN.len() - 1]
                )],
            ),
            (
                "the token's first half",
                vec![format!(
                    "Authorization: Bearer {}",
                    &TOKEN[..TOKEN.len() / 2]
                )],
            ),
            (
                "the token with junk after it",
                vec![format!("Authorization: Bearer {TOKEN}x")],
            ),
            (
                "the token in capitals",
                vec![format!("Authorization: Bearer {}", TOKEN.to_uppercase())],
            ),
            (
                "a wrong token, then the right one",
                vec![
                    "Authorization: Bearer wrong".into(),
                    format!("Authorization: Bearer {TOKEN}"),
                ],
            ),
            (
                "Basic credentials",
                vec![format!("Authorization: Basic {basic}")],
            ),
            (
                "the token without a scheme",
                vec![format!("Authorization: {TOKEN}")],
            ),
            (
                "the token glued to Bearer",
                vec![format!("Authorization: Bearer{TOKEN}")],
            ),
            (
                "the token in another header",
                vec![format!("X-Authorization: Bearer {TOKEN}")],
            ),
        ];
        let before = store(&etcd).await;
        let cases: Vec<(&Route, &str, &Vec<String>)> = routes
            .iter()
            .flat_map(|route| refused.iter().map(move |(what, auth)| (route, *what, auth)))
            .collect();
        let failures: Vec<String> = futures::stream::iter(cases)
            .map(|(route, what, auth)| async move {
                let reply = https(tls, port, &route.request(auth)).await;
                let status = serde_json::from_slice::<Value>(&reply.body).unwrap_or_default();
                let refused = reply.status == 401
                    && status["kind"] == "Status"
                    && status["code"] == 401
                    && status["reason"] == "Unauthorized";
                (!refused).then(|| {
                    format!(
                        "{} {} with {what}: {} {}",
                        route.method,
                        route.path,
                        reply.status,
                        reply.text()
                    )
                })
            })
            .buffer_unordered(8)
            .filter_map(std::future::ready)
            .collect()
            .await;
        assert!(
            failures.is_empty(),
            "served without the token:\n{}",
            failures.join("\n")
        );
        assert_eq!(
            changed(&before, &store(&etcd).await),
            Vec::<String>::new(),
            "refused writes changed the store"
        );

        // Served without a token, by design; a path that only starts like them is not.
        for path in ["/healthz", "/livez", "/readyz"] {
            let reply = https(tls, port, &request("GET", path, &[], b"")).await;
            assert_eq!(reply.status, 200, "GET {path}: {reply:?}");
        }
        for path in [
            "/healthz/../api/v1/namespaces/default/pods",
            "/readyz/../api/v1/namespaces/default/pods",
            "/readyz%2F..%2Fapi%2Fv1%2Fnamespaces%2Fdefault%2Fpods",
            "/livez/../../version",
        ] {
            let reply = https(tls, port, &request("GET", path, &[], b"")).await;
            assert_eq!(reply.status, 401, "GET {path}: {reply:?}");
            reply.assert_status_body(401);
        }

        // The token, exactly, in either case of the scheme.
        for (index, route) in routes.iter().enumerate() {
            let scheme = if index % 2 == 0 { "Bearer" } else { "bearer" };
            let auth = [format!("Authorization: {scheme} {TOKEN}")];
            let reply = https(tls, port, &route.request(&auth)).await;
            assert_eq!(
                reply.status,
                route.ok,
                "{} {} with the token: {}",
                route.method,
                route.path,
                reply.text()
            );
        }
        let after = store(&etcd).await;
        assert!(after.contains_key("/registry/pods/default/made-with-the-token"));
        assert!(!after.contains_key("/registry/pods/default/victim"));
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// Namespace isolation

/// A continue token as kcm encodes them (`{"v":"meta.k8s.io/v1","rv":N,"start":KEY}`,
/// base64), percent-encoded for a query.
fn continue_token(revision: i64, start: &str) -> String {
    let token = json!({ "v": "meta.k8s.io/v1", "rv": revision, "start": start });
    base64::engine::general_purpose::URL_SAFE
        .encode(token.to_string())
        .replace('=', "%3D")
}

/// An object of `resource` (pods, configmaps or secrets) named `name`.
fn object(resource: &str, name: &str) -> Value {
    match resource {
        "pods" => pod(name),
        _ => json!({ "metadata": { "name": name }, "data": {} }),
    }
}

/// `method path` with this body over a fresh connection: the first response.
async fn send(port: u16, method: &str, path: &str, content_type: &str, body: &[u8]) -> Reply {
    let headers = [format!("Content-Type: {content_type}")];
    let mut replies = exchange(port, &request(method, path, &headers, body)).await;
    assert!(!replies.is_empty(), "no answer to {method} {path}");
    replies.remove(0)
}

/// Namespaces `a` and `b`, each with pods `{ns}-0` to `{ns}-2`, ConfigMap `cm` and Secret
/// `s` (whose data name their namespace), created through the API.
async fn two_namespaces(port: u16) {
    for namespace in ["a", "b"] {
        create(
            port,
            "/api/v1/namespaces",
            &json!({ "metadata": { "name": namespace } }),
        )
        .await;
        let collection = |resource: &str| format!("/api/v1/namespaces/{namespace}/{resource}");
        for i in 0..3 {
            create(port, &collection("pods"), &pod(&format!("{namespace}-{i}"))).await;
        }
        let owned =
            |name: &str| json!({ "metadata": { "name": name }, "data": { "owner": namespace } });
        create(port, &collection("configmaps"), &owned("cm")).await;
        let mut secret = owned("s");
        secret["data"]["owner"] =
            json!(base64::engine::general_purpose::STANDARD.encode(namespace));
        create(port, &collection("secrets"), &secret).await;
    }
}

/// No continue token, replayed from another namespace's list or crafted to point
/// elsewhere (`..`, other resources' directories, keys before and after the namespace's),
/// lists anything outside the namespace and resource of its URL: each answer is a 4xx
/// Status or a list of the URL's own objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_continue_token_lists_outside_its_namespace_and_resource() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (_kcm, port) = apiserver(&etcd, &[]).await;
        two_namespaces(port).await;
        let (status, body) = http_get(port, "/api/v1/namespaces/a/pods?limit=1")
            .await
            .expect("a list");
        assert_eq!(status, 200, "{body}");
        let page: Value = serde_json::from_str(&body).unwrap();
        let real = page["metadata"]["continue"]
            .as_str()
            .expect("a continue token");
        let revision: i64 = page["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|rv| rv.parse().ok())
            .expect("a resourceVersion");
        let mut tokens = vec![real.replace('=', "%3D")];
        for start in [
            "",
            "a/a-0",
            "b/b-0",
            "b",
            "/",
            "../secrets/a/s",
            "../secrets/b/",
            "../configmaps/a/cm",
            "a/../b/b-0",
            "b/../a/a-0",
            "../../",
            "a/a-0/../../secrets/a/s",
            "\u{0}",
            "~",
        ] {
            tokens.push(continue_token(revision, start));
        }
        for token in &tokens {
            for (namespace, resource) in [("a", "pods"), ("b", "pods"), ("b", "configmaps")] {
                let path =
                    format!("/api/v1/namespaces/{namespace}/{resource}?limit=10&continue={token}");
                let (status, body) = http_get(port, &path).await.expect("an answer");
                let list: Value = serde_json::from_str(&body)
                    .unwrap_or_else(|e| panic!("GET {path}: not JSON ({e}): {body}"));
                if (400..500).contains(&status) {
                    assert_eq!(list["kind"], "Status", "GET {path}: {body}");
                    continue;
                }
                assert_eq!(status, 200, "GET {path}: {body}");
                let kind = if resource == "pods" {
                    "PodList"
                } else {
                    "ConfigMapList"
                };
                assert_eq!(list["kind"], kind, "GET {path}: {body}");
                for item in list["items"].as_array().expect("items") {
                    assert_eq!(
                        item["metadata"]["namespace"], namespace,
                        "GET {path}: {item}"
                    );
                    let name = item["metadata"]["name"].as_str().unwrap_or("");
                    let own = match resource {
                        "pods" => name.starts_with(&format!("{namespace}-")),
                        _ => name == "cm" && item["data"]["owner"] == namespace,
                    };
                    assert!(own, "GET {path} listed another object: {item}");
                }
            }
        }
    })
    .await;
}

/// `..`, `.`, `%2F`, `%2f` and `%2E` in namespace and name segments of namespace `a`'s
/// URLs aimed at namespace `b`'s pod, ConfigMap and Secret: every GET, DELETE, PATCH, PUT
/// (naming the object as the URL does, and as it decodes) and POST is 4xx, and etcd holds
/// exactly what it held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_dot_or_encoded_slash_in_a_path_reaches_another_object() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (_kcm, port) = apiserver(&etcd, &[]).await;
        two_namespaces(port).await;
        let before = store(&etcd).await;
        let mut served = Vec::new();
        for (resource, name) in [("pods", "b-0"), ("configmaps", "cm"), ("secrets", "s")] {
            let names = [
                format!("a/{resource}/..%2Fb%2F{name}"),
                format!("a/{resource}/..%2fb%2f{name}"),
                format!("a/{resource}/%2E%2E%2Fb%2F{name}"),
                format!("a/{resource}/{name}%2F..%2F..%2Fb%2F{name}"),
                format!("a/{resource}/x%2Fy"),
                format!("a/{resource}/.."),
                format!("a/{resource}/."),
                format!("a/{resource}/%2E%2E"),
                format!("a%2F..%2Fb/{resource}/{name}"),
                format!("a%2fb/{resource}/{name}"),
                format!("..%2Fb/{resource}/{name}"),
            ];
            for segments in names {
                let path = format!("/api/v1/namespaces/{segments}");
                let url_name = segments.rsplit('/').next().unwrap_or("");
                let decoded = url_name
                    .replace("%2F", "/")
                    .replace("%2f", "/")
                    .replace("%2E", ".");
                let label = br#"{"metadata":{"labels":{"moved":"yes"}}}"#;
                let mut attempts = vec![
                    ("GET", "application/json", Vec::new()),
                    ("DELETE", "application/json", Vec::new()),
                    ("PATCH", "application/merge-patch+json", label.to_vec()),
                ];
                for body_name in [url_name, decoded.as_str()] {
                    let mut body = object(resource, body_name);
                    body["metadata"]["labels"] = json!({ "moved": "yes" });
                    attempts.push(("PUT", "application/json", body.to_string().into_bytes()));
                }
                for (method, content_type, body) in attempts {
                    let reply = send(port, method, &path, content_type, &body).await;
                    if !(400..500).contains(&reply.status) {
                        served.push(format!("{method} {path}: {reply:?}"));
                    }
                }
            }
            for namespace in ["a%2F..%2Fb", "..%2Fb", "a%2Fb", "..", "%2E%2E"] {
                let path = format!("/api/v1/namespaces/{namespace}/{resource}");
                let body = object(resource, "escaped").to_string();
                let reply = send(port, "POST", &path, "application/json", body.as_bytes()).await;
                if !(400..500).contains(&reply.status) {
                    served.push(format!("POST {path}: {reply:?}"));
                }
            }
        }
        assert!(served.is_empty(), "served:\n{}", served.join("\n"));
        assert_eq!(
            changed(&before, &store(&etcd).await),
            Vec::<String>::new(),
            "hostile paths changed the store"
        );
    })
    .await;
}

/// A create, an update or a patch (merge, JSON, strategic) whose object names namespace
/// `b` on a URL of namespace `a` is 400, "the namespace of the provided object does not
/// match the namespace sent on the request", as kube-apiserver answers, for pods,
/// ConfigMaps and Secrets; etcd holds exactly what it held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_naming_another_namespace_than_its_url_is_400() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (_kcm, port) = apiserver(&etcd, &[]).await;
        two_namespaces(port).await;
        let before = store(&etcd).await;
        #[track_caller]
        fn check_mismatch(reply: &Reply, what: &str) {
            assert_eq!(reply.status, 400, "{what}: {reply:?}");
            reply.assert_status_body(400);
            let message = reply.json()["message"].as_str().unwrap_or("").to_string();
            let expected = "the namespace of the provided object does not match the namespace \
                            sent on the request";
            assert!(message.contains(expected), "{what}: {message}");
        }
        for (resource, name) in [("pods", "a-0"), ("configmaps", "cm"), ("secrets", "s")] {
            let collection = format!("/api/v1/namespaces/a/{resource}");
            let mut intruder = object(resource, "intruder");
            intruder["metadata"]["namespace"] = json!("b");
            let body = intruder.to_string();
            let reply = send(
                port,
                "POST",
                &collection,
                "application/json",
                body.as_bytes(),
            )
            .await;
            check_mismatch(&reply, &format!("POST {collection} of an object in b"));

            let path = format!("{collection}/{name}");
            let (status, body) = http_get(port, &path).await.expect("a get");
            assert_eq!(status, 200, "{body}");
            let mut moved: Value = serde_json::from_str(&body).unwrap();
            moved["metadata"]["namespace"] = json!("b");
            let body = moved.to_string();
            let reply = send(port, "PUT", &path, "application/json", body.as_bytes()).await;
            check_mismatch(&reply, &format!("PUT {path} into b"));

            let replace = json!([{ "op": "replace", "path": "/metadata/namespace", "value": "b" }]);
            for (content_type, patch) in [
                (
                    "application/merge-patch+json",
                    json!({ "metadata": { "namespace": "b" } }),
                ),
                ("application/json-patch+json", replace),
                (
                    "application/strategic-merge-patch+json",
                    json!({ "metadata": { "namespace": "b", "name": name } }),
                ),
            ] {
                let body = patch.to_string();
                let reply = send(port, "PATCH", &path, content_type, body.as_bytes()).await;
                check_mismatch(&reply, &format!("PATCH {path} ({content_type}) into b"));
            }
        }
        assert_eq!(
            changed(&before, &store(&etcd).await),
            Vec::<String>::new(),
            "writes into another namespace changed the store"
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// Request smuggling

/// A create of pod `name` in namespace `a`, kept alive.
fn create_request(name: &str) -> Vec<u8> {
    let body = pod(name).to_string();
    format!(
        "POST /api/v1/namespaces/a/pods HTTP/1.1\r\nHost: x\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The head of a create in namespace `a` with these framing headers.
fn create_head(framing: &str) -> Vec<u8> {
    format!(
        "POST /api/v1/namespaces/a/pods HTTP/1.1\r\nHost: x\r\n\
         Content-Type: application/json\r\n{framing}\r\n"
    )
    .into_bytes()
}

/// Ends a connection that is still open: a read of a pod that does not exist (404), then
/// close.
const CANARY: &[u8] =
    b"GET /api/v1/namespaces/a/pods/canary HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

/// A request whose framing is ambiguous, and what the server must answer to it.
struct Smuggling {
    what: String,
    /// The request, the create it hides, and [`CANARY`].
    raw: Vec<u8>,
    /// The statuses of the responses, in order.
    statuses: Vec<u16>,
}

/// The cases: the `n`th hides a create of pod `hidden-{n}`.
fn smuggling_cases() -> Vec<Smuggling> {
    let mut cases = Vec::new();
    let mut add = |what: &str, head: &[u8], body: &[u8], statuses: &[u16]| {
        cases.push(Smuggling {
            what: what.to_string(),
            raw: [head, body, CANARY].concat(),
            statuses: statuses.to_vec(),
        })
    };
    let hidden = |n: usize| create_request(&format!("hidden-{n}"));
    // An empty chunked body, then the hidden request: what a server that believes the
    // Content-Length takes as one body.
    let after_last_chunk = |n: usize| [b"0\r\n\r\n".as_slice(), &hidden(n)].concat();

    // CL.TE, either way round.
    let body = after_last_chunk(0);
    let framing = format!(
        "Content-Length: {}\r\nTransfer-Encoding: chunked\r\n",
        body.len()
    );
    add(
        "Content-Length, then chunked",
        &create_head(&framing),
        &body,
        &[400],
    );
    let body = after_last_chunk(1);
    let framing = format!(
        "Transfer-Encoding: chunked\r\nContent-Length: {}\r\n",
        body.len()
    );
    add(
        "chunked, then Content-Length",
        &create_head(&framing),
        &body,
        &[400],
    );
    // TE.CL: the length covers only the chunk-size line; the chunk is the hidden request.
    let inner = hidden(2);
    let size_line = format!("{:x}\r\n", inner.len());
    let framing = format!(
        "Content-Length: {}\r\nTransfer-Encoding: chunked\r\n",
        size_line.len()
    );
    let body = [size_line.as_bytes(), &inner, b"\r\n0\r\n\r\n"].concat();
    add(
        "a chunk behind a short length",
        &create_head(&framing),
        &body,
        &[400],
    );
    // Two Content-Lengths that disagree.
    let outer = pod("outer-two-lengths").to_string();
    let framing = format!("Content-Length: 4\r\nContent-Length: {}\r\n", outer.len());
    let body = [outer.as_bytes(), &hidden(3)].concat();
    add("two Content-Lengths", &create_head(&framing), &body, &[400]);
    // Obfuscated Transfer-Encodings beside a length that covers the hidden request.
    let obfuscated = [
        "Transfer-Encoding: xchunked",
        "Transfer-Encoding: chunked, identity",
        "Transfer-Encoding: identity",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: x",
        "Transfer-Encoding: CHUNKED",
        "Transfer-Encoding:  chunked",
        "Transfer-Encoding:\tchunked",
        "Transfer-Encoding: chunked\x0b",
        "Transfer-Encoding: chunked;q=1",
        "Transfer-Encoding : chunked",
        "Transfer-Encoding:\r\n chunked",
    ];
    for (index, encoding) in obfuscated.iter().enumerate() {
        let body = after_last_chunk(4 + index);
        let framing = format!("Content-Length: {}\r\n{encoding}\r\n", body.len());
        add(
            &format!("{encoding:?}"),
            &create_head(&framing),
            &body,
            &[400],
        );
    }
    let n = 4 + obfuscated.len();
    let head = String::from_utf8(create_head("Transfer-Encoding: chunked\r\n")).unwrap();
    let head = head.replace(" HTTP/1.1\r\n", " HTTP/1.0\r\n");
    add(
        "Transfer-Encoding on HTTP/1.0",
        head.as_bytes(),
        &after_last_chunk(n),
        &[400],
    );
    // Bare line feeds throughout.
    let body = [b"0\n\n".as_slice(), &hidden(n + 1)].concat();
    let framing = format!(
        "Content-Length: {}\r\nTransfer-Encoding: chunked\r\n",
        body.len()
    );
    let head = String::from_utf8(create_head(&framing))
        .unwrap()
        .replace("\r\n", "\n");
    add("bare line feeds", head.as_bytes(), &body, &[400]);
    // A whole request as the body: it is a body (not JSON: 400); the canary is the second
    // request.
    let inner = hidden(n + 2);
    let framing = format!("Content-Length: {}\r\n", inner.len());
    add(
        "a request inside a body",
        &create_head(&framing),
        &inner,
        &[400, 404],
    );
    cases
}

/// Requests whose framing is ambiguous, each hiding a create of pod `hidden-N`: both
/// `Content-Length` and `Transfer-Encoding: chunked` (either way round), two differing
/// `Content-Length`s, obfuscated `Transfer-Encoding`s, `Transfer-Encoding` on HTTP/1.0, a
/// folded header, bare line feeds, and a whole request inside a body. Each is answered 400
/// (the outer request refused, or its body taken as chunked per RFC 9112 and the connection
/// closed), never with more responses than requests framed by the rules, and no hidden pod
/// reaches etcd. The same create sent plainly is served, so the check can fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambiguous_framing_never_runs_a_hidden_request() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (_kcm, port) = apiserver(&etcd, &[]).await;
        let cases = smuggling_cases();
        let hidden_names: Vec<String> = (0..cases.len()).map(|n| format!("hidden-{n}")).collect();
        for Smuggling {
            what,
            raw,
            statuses,
        } in &cases
        {
            let replies = exchange(port, raw).await;
            let got: Vec<u16> = replies.iter().map(|r| r.status).collect();
            assert_eq!(&got, statuses, "{what}: {replies:?}");
            for reply in &replies {
                let text = reply.text();
                assert!(
                    !hidden_names.iter().any(|name| text.contains(name.as_str())),
                    "{what}: a response names a hidden pod: {text}"
                );
            }
        }
        let pods: Vec<String> = store(&etcd)
            .await
            .into_keys()
            .filter(|key| key.starts_with("/registry/pods/"))
            .collect();
        assert_eq!(
            pods,
            Vec::<String>::new(),
            "pods created by smuggled requests"
        );

        // The control: the same create, plainly pipelined, is served and stored.
        let plain = [create_request("hidden-control").as_slice(), CANARY].concat();
        let replies = exchange(port, &plain).await;
        let got: Vec<u16> = replies.iter().map(|r| r.status).collect();
        assert_eq!(got, [201, 404], "{replies:?}");
        assert!(store(&etcd)
            .await
            .contains_key("/registry/pods/a/hidden-control"));
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// Deep and explosive bodies

/// The largest peak resident set (`VmHWM`) the apiserver may reach while refusing the
/// bodies below: a debug build peaked near 100 MiB (from about 50 MiB at start, most of
/// it the YAML parser's events for the 100,000-deep flow sequence).
const DEEP_BODY_PEAK_KIB: u64 = 256 * 1024;

/// A YAML pod whose extra fields are a "billion laughs": nine levels of nine aliases to the
/// level below, 9^9 strings once expanded.
fn yaml_bomb() -> String {
    let mut yaml = String::from("apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\n");
    yaml.push_str(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    let levels = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for pair in levels.windows(2) {
        let (below, level) = (pair[0], pair[1]);
        let refs = vec![format!("*{below}"); 9].join(",");
        yaml.push_str(&format!("{level}: &{level} [{refs}]\n"));
    }
    yaml
}

/// JSON and YAML nested 100,000 deep (arrays, objects, YAML flow and block sequences and
/// flow mappings, and a flow mapping 20,000 deep) as a create, a patch and a delete's
/// options, and a YAML alias bomb: each is refused with a Status (400, or 413 for what
/// would decode into too much memory) within [`ANSWER`], as kube-apiserver refuses them at
/// once; the apiserver stays ready and serving, and its peak memory stays under
/// [`DEEP_BODY_PEAK_KIB`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_and_explosive_bodies_are_refused_within_bounded_memory() {
    with_timeout(2 * LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (kcm, port) = apiserver(&etcd, &[]).await;
        create(port, "/api/v1/namespaces/default/pods", &pod("p")).await;
        let deep = |open: &str, middle: &str, close: &str, depth: usize| {
            format!("{}{middle}{}", open.repeat(depth), close.repeat(depth))
        };
        let deep_array = deep("[", "", "]", 100_000);
        let deep_object = deep("{\"a\":", "1", "}", 100_000);
        let deep_block = deep("- ", "x\n", "", 100_000);
        let (pods, one) = (
            "/api/v1/namespaces/default/pods",
            "/api/v1/namespaces/default/pods/p",
        );
        let (json, yaml) = ("application/json", "application/yaml");
        // (what, method, path, media type, body)
        let cases: Vec<(&str, &str, &str, &str, String)> = vec![
            ("JSON array", "POST", pods, json, deep_array.clone()),
            ("JSON object", "POST", pods, json, deep_object.clone()),
            (
                "merge patch",
                "PATCH",
                one,
                "application/merge-patch+json",
                deep_object.clone(),
            ),
            (
                "JSON patch",
                "PATCH",
                one,
                "application/json-patch+json",
                deep_array.clone(),
            ),
            (
                "strategic merge patch",
                "PATCH",
                one,
                "application/strategic-merge-patch+json",
                deep_object.clone(),
            ),
            ("delete options", "DELETE", one, json, deep_object),
            ("YAML flow sequence", "POST", pods, yaml, deep_array),
            ("YAML block sequence", "POST", pods, yaml, deep_block),
            ("YAML alias bomb", "POST", pods, yaml, yaml_bomb()),
            // libyaml's scanner is quadratic in the depth of flow mappings: refused by their
            // depth, not by the size of the body.
            (
                "YAML flow mapping",
                "POST",
                pods,
                yaml,
                deep("{a: ", "x", "}", 100_000),
            ),
            (
                "YAML flow mapping 20,000 deep",
                "POST",
                pods,
                yaml,
                deep("{a: ", "x", "}", 20_000),
            ),
        ];
        let start_peak = proc_status_kib(kcm.pid(), "VmHWM");
        for (what, method, path, content_type, body) in cases {
            // `converse` fails the test if the answer takes longer than ANSWER.
            let started = Instant::now();
            let headers = [format!("Content-Type: {content_type}")];
            let replies = exchange(port, &request(method, path, &headers, body.as_bytes())).await;
            let took = started.elapsed();
            let reply = replies
                .first()
                .unwrap_or_else(|| panic!("{what}: no answer"));
            // 400 when it is too deep to decode; 413 when it would decode into more memory
            // than a request may take.
            assert!(
                matches!(reply.status, 400 | 413),
                "{what} ({method} {path}) after {took:?}: {reply:?}"
            );
            reply.assert_status_body(reply.status);
            eprintln!("{what}: {} in {took:?}", reply.status);
            assert!(
                matches!(http_get(port, "/readyz").await, Some((200, _))),
                "not ready after the {what}"
            );
        }
        let (status, body) = http_get(port, pods).await.expect("a list");
        assert_eq!(status, 200, "{body}");
        let list: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{body}");
        let peak = proc_status_kib(kcm.pid(), "VmHWM");
        eprintln!("apiserver peak RSS: {start_peak} KiB at start, {peak} KiB after the bodies");
        assert!(
            peak < DEEP_BODY_PEAK_KIB,
            "the apiserver's peak RSS reached {peak} KiB (from {start_peak} KiB)"
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// Slowloris

/// Hostile connections: more than the server holds pending.
const SLOW_CLIENTS: usize = 2_000;

/// How long a normal request may take while the hostile connections are open.
const PROMPT: Duration = Duration::from_secs(5);

/// Raises this process's soft limit of open descriptors to at least `wanted` (as far as
/// the hard limit allows); the apiserver started after it inherits it.
fn raise_descriptor_limit(wanted: libc::rlim_t) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit with a valid pointer to an rlimit.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        if limit.rlim_cur < wanted {
            limit.rlim_cur = wanted.min(limit.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
        }
    }
    assert!(
        limit.rlim_cur >= wanted,
        "the test needs {wanted} open files; the hard limit is {} (ulimit -Hn)",
        limit.rlim_max
    );
}

/// 2,000 connections over plain HTTP, half sending a request's first line and then one
/// header byte a second, half sending nothing: a normal client's list is answered within
/// 5 s throughout; the apiserver closes the oldest beyond [`MAX_PENDING`] at once, holds
/// the rest with its descriptors settling at that cap (never more than half as many
/// again, even while they arrive) and closes them by the header timeout (10 s) however
/// slowly they keep sending; afterwards it holds what it held before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_connections_are_capped_and_never_starve_a_normal_client() {
    with_timeout(LIMIT, async {
        raise_descriptor_limit(4 * SLOW_CLIENTS as libc::rlim_t);
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let (kcm, port) = apiserver(&etcd, &[]).await;
        create(port, "/api/v1/namespaces/default/pods", &pod("p")).await;
        let pid = kcm.pid();
        let baseline = descriptors(pid);
        // Held: the cap, the normal client's connection and a few more.
        let settled = baseline + MAX_PENDING + 16;
        // Evicted connections close when their tasks next run, so the count may pass the
        // cap for a moment while connections arrive; half over it is still far from one
        // descriptor per connection.
        let peak = baseline + MAX_PENDING + MAX_PENDING / 2;

        let stop = tokio_util::sync::CancellationToken::new();
        let normal = tokio::spawn(normal_client(port, pid, stop.clone()));
        let mut open: Vec<(usize, TcpStream)> = futures::stream::iter(0..SLOW_CLIENTS)
            .map(|i| async move {
                let mut stream = TcpStream::connect(("127.0.0.1", port))
                    .await
                    .expect("connect");
                if i % 2 == 0 {
                    let partial = b"GET /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: x\r\n";
                    stream
                        .write_all(partial)
                        .await
                        .expect("send a partial head");
                }
                (i, stream)
            })
            .buffer_unordered(64)
            .collect()
            .await;
        let opened = Instant::now();
        let (mut closed_by_server, mut most_descriptors) = (0, 0);
        let mut settled_while_held = None;
        let mut next_dribble = Instant::now();
        while !open.is_empty() {
            let elapsed = opened.elapsed();
            assert!(
                elapsed < Duration::from_secs(30),
                "{} hostile connections still open after {elapsed:?}",
                open.len()
            );
            let held = descriptors(pid);
            most_descriptors = most_descriptors.max(held);
            if held <= settled && open.len() > MAX_PENDING / 2 {
                settled_while_held.get_or_insert(elapsed);
            }
            // A header byte a second into the half that talks.
            let dribble = Instant::now() >= next_dribble;
            if dribble {
                next_dribble += Duration::from_secs(1);
            }
            let before = open.len();
            open.retain(|(i, stream)| !closed_by_peer(stream, dribble && i % 2 == 0));
            closed_by_server += before - open.len();
            // Those beyond the cap are closed well before the header timeout.
            if elapsed > Duration::from_secs(5) {
                assert!(
                    closed_by_server >= SLOW_CLIENTS - MAX_PENDING,
                    "5 s after {SLOW_CLIENTS} connections the apiserver had closed only \
                     {closed_by_server}"
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let all_closed = opened.elapsed();
        stop.cancel();
        let (served, slowest, normal_most) = normal.await.expect("the normal client");
        let most_descriptors = most_descriptors.max(normal_most);
        eprintln!(
            "slowloris: {served} normal lists, the slowest in {slowest:?}; at most \
             {most_descriptors} descriptors (baseline {baseline}), at most {settled} from \
             {settled_while_held:?}; every hostile connection closed after {all_closed:?}"
        );
        assert!(
            served >= 10,
            "only {served} normal lists while the connections were open"
        );
        assert!(
            settled_while_held.is_some(),
            "the apiserver's descriptors never came down to {settled} (baseline {baseline}, \
             cap {MAX_PENDING}) while it held the hostile connections"
        );
        assert!(
            most_descriptors <= peak,
            "the apiserver held {most_descriptors} descriptors (baseline {baseline}, cap \
             {MAX_PENDING})"
        );
        eventually(
            READY,
            "the apiserver's descriptors to return to its baseline",
            || std::future::ready(descriptors(pid) <= baseline + 4),
        )
        .await;
        assert!(matches!(http_get(port, "/readyz").await, Some((200, _))));
    })
    .await;
}

/// Lists pods until `stop`, each answered 200 within [`PROMPT`] or the test fails: how
/// many were served, the slowest, and the most descriptors process `pid` held meanwhile.
async fn normal_client(
    port: u16,
    pid: u32,
    stop: tokio_util::sync::CancellationToken,
) -> (usize, Duration, usize) {
    let (mut served, mut slowest, mut most_descriptors) = (0, Duration::ZERO, 0);
    while !stop.is_cancelled() {
        let started = Instant::now();
        let list = http_get(port, "/api/v1/namespaces/default/pods");
        let answer = tokio::time::timeout(PROMPT, list).await;
        let took = started.elapsed();
        assert!(
            matches!(answer, Ok(Some((200, _)))),
            "a normal list after {served} got {answer:?} in {took:?}"
        );
        served += 1;
        slowest = slowest.max(took);
        most_descriptors = most_descriptors.max(descriptors(pid));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (served, slowest, most_descriptors)
}

/// Whether the server closed `stream` (EOF or reset on our end); with `dribble`, first
/// sends it one more header byte.
fn closed_by_peer(stream: &TcpStream, dribble: bool) -> bool {
    let mut buffer = [0u8; 64];
    let would_block = |e: &std::io::Error| e.kind() == std::io::ErrorKind::WouldBlock;
    match stream.try_read(&mut buffer) {
        Ok(0) => return true,
        Err(e) if !would_block(&e) => return true,
        _ => {}
    }
    dribble && matches!(stream.try_write(b"X"), Err(e) if !would_block(&e))
}
