//! `docker-compose.yml` and the `Dockerfile` against kcm's command line.
//!
//! Neither can be run here (no container engine), so this checks what can drift: the compose
//! file's kcm command must parse with [`Cli`] as a controller-manager serving the published
//! port on all interfaces, its etcd URL must name the etcd service's client port, etcd must
//! be pinned, healthy-checked and persistent, and the image's entrypoint must be kcm. No etcd
//! is needed.

use std::path::{Path, PathBuf};

use clap::Parser;
use kcm::cli::{Cli, Command};
use serde_yaml_ng::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn compose() -> Value {
    let text = read(&root().join("docker-compose.yml"));
    serde_yaml_ng::from_str::<Value>(&text).expect("docker-compose.yml is valid YAML")
}

fn service<'a>(compose: &'a Value, name: &str) -> &'a Value {
    let service = &compose["services"][name];
    assert!(
        service.is_mapping(),
        "docker-compose.yml has no service {name:?}"
    );
    service
}

fn str_of<'a>(value: &'a Value, what: &str) -> &'a str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {value:?}"))
}

/// A scalar as compose reads it (`"3"` and `3` alike).
fn scalar(value: &Value, what: &str) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => panic!("{what} is not a scalar: {value:?}"),
    }
}

/// A command (or healthcheck test) in either compose form: a list, or a string split on
/// whitespace.
fn argv(value: &Value, what: &str) -> Vec<String> {
    match value {
        Value::Sequence(items) => items.iter().map(|item| scalar(item, what)).collect(),
        Value::String(s) => s.split_whitespace().map(str::to_string).collect(),
        _ => panic!("{what} is neither a list nor a string: {value:?}"),
    }
}

/// The service's environment in either compose form (map, or list of `KEY=VALUE`).
fn environment(service: &Value) -> Vec<(String, String)> {
    match &service["environment"] {
        Value::Null => Vec::new(),
        Value::Mapping(map) => map
            .iter()
            .map(|(k, v)| (scalar(k, "environment key"), scalar(v, "environment value")))
            .collect(),
        Value::Sequence(items) => items
            .iter()
            .map(|item| {
                let entry = str_of(item, "environment entry");
                let (k, v) = entry
                    .split_once('=')
                    .unwrap_or_else(|| panic!("environment entry {entry:?} has no '='"));
                (k.to_string(), v.to_string())
            })
            .collect(),
        other => panic!("environment is neither a map nor a list: {other:?}"),
    }
}

fn env_var(service: &Value, key: &str) -> Option<String> {
    environment(service)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

#[derive(Debug, PartialEq, Eq)]
struct Published {
    host_ip: Option<String>,
    host_port: u16,
    container_port: u16,
}

/// The service's published ports, in short (`[IP:]HOST:CONTAINER[/tcp]`) or long syntax.
fn published(service: &Value) -> Vec<Published> {
    let Some(ports) = service["ports"].as_sequence() else {
        return Vec::new();
    };
    let port = |s: &str| -> u16 {
        s.parse()
            .unwrap_or_else(|e| panic!("port {s:?} is not a single port: {e}"))
    };
    ports
        .iter()
        .map(|entry| match entry {
            Value::Mapping(_) => Published {
                host_ip: entry["host_ip"].as_str().map(str::to_string),
                host_port: port(&scalar(&entry["published"], "published port")),
                container_port: port(&scalar(&entry["target"], "target port")),
            },
            _ => {
                let spec = scalar(entry, "port");
                let spec = spec.strip_suffix("/tcp").unwrap_or(&spec);
                let parts: Vec<&str> = spec.rsplitn(3, ':').collect();
                match parts.as_slice() {
                    [container, host, ip] => Published {
                        host_ip: Some(ip.to_string()),
                        host_port: port(host),
                        container_port: port(container),
                    },
                    [container, host] => Published {
                        host_ip: None,
                        host_port: port(host),
                        container_port: port(container),
                    },
                    _ => panic!("port {spec:?} publishes no host port"),
                }
            }
        })
        .collect()
}

/// `http://HOST:PORT` split into host and port; panics on anything else.
fn http_host_port(url: &str) -> (&str, u16) {
    let rest = url
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("{url:?} is not an http:// URL"));
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = rest
        .split_once(':')
        .unwrap_or_else(|| panic!("{url:?} names no port"));
    assert!(
        !host.is_empty() && !host.contains(['/', '@', '?', '#']),
        "{url:?} has a bad host"
    );
    let port = port
        .parse()
        .unwrap_or_else(|e| panic!("{url:?} has a bad port: {e}"));
    (host, port)
}

/// The value of `--name=value` or `--name value` in an argv.
fn flag<'a>(argv: &'a [String], name: &str) -> Option<&'a str> {
    let long = format!("--{name}");
    let with_eq = format!("{long}=");
    argv.iter().enumerate().find_map(|(i, arg)| {
        if let Some(value) = arg.strip_prefix(&with_eq) {
            Some(value)
        } else if *arg == long {
            argv.get(i + 1).map(String::as_str)
        } else {
            None
        }
    })
}

/// The container port etcd serves clients on, from its `--listen-client-urls`.
fn etcd_client_port(etcd: &Value) -> u16 {
    let command = argv(&etcd["command"], "etcd command");
    let listen = flag(&command, "listen-client-urls").expect("etcd sets --listen-client-urls");
    let (host, port) = http_host_port(listen);
    assert_eq!(
        host, "0.0.0.0",
        "etcd must listen on all interfaces inside its container"
    );
    let advertise =
        flag(&command, "advertise-client-urls").expect("etcd sets --advertise-client-urls");
    assert_eq!(
        http_host_port(advertise),
        ("etcd", port),
        "etcd advertises its service name and client port"
    );
    port
}

#[test]
fn etcd_service_is_pinned_healthy_checked_and_persistent() {
    let compose = compose();
    let etcd = service(&compose, "etcd");

    let image = str_of(&etcd["image"], "etcd image");
    let (repo, tag) = image
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("etcd image {image:?} has no tag"));
    assert_eq!(repo, "quay.io/coreos/etcd", "etcd image");
    assert!(
        tag.starts_with("v3.5.") && tag["v3.5.".len()..].parse::<u32>().is_ok(),
        "etcd image must be pinned to a v3.5.N tag, not {tag:?}"
    );

    let client_port = etcd_client_port(etcd);
    assert!(
        published(etcd).contains(&Published {
            host_ip: Some("127.0.0.1".into()),
            host_port: 2379,
            container_port: client_port,
        }),
        "etcd publishes its client port on 127.0.0.1:2379 only: {:?}",
        published(etcd)
    );

    let test = argv(&etcd["healthcheck"]["test"], "etcd healthcheck");
    assert!(
        matches!(test.first().map(String::as_str), Some("CMD" | "CMD-SHELL")),
        "etcd healthcheck test starts with CMD or CMD-SHELL: {test:?}"
    );
    let joined = test.join(" ");
    assert!(
        joined.contains("etcdctl") && joined.contains("endpoint health"),
        "etcd healthcheck runs `etcdctl endpoint health`: {joined:?}"
    );
    if let Some(endpoints) = flag(&test, "endpoints") {
        assert_eq!(
            http_host_port(endpoints).1,
            client_port,
            "etcd healthcheck asks the client port"
        );
    }
    assert_eq!(
        env_var(etcd, "ETCDCTL_API").as_deref(),
        Some("3"),
        "etcdctl speaks v3"
    );

    // The data dir is a named volume declared at the top level.
    let command = argv(&etcd["command"], "etcd command");
    let data_dir = flag(&command, "data-dir").expect("etcd sets --data-dir");
    let volumes = etcd["volumes"].as_sequence().expect("etcd mounts volumes");
    let mount = volumes
        .iter()
        .map(|v| str_of(v, "etcd volume"))
        .find_map(|v| v.split_once(':').filter(|(_, target)| *target == data_dir))
        .unwrap_or_else(|| panic!("no volume is mounted at etcd's --data-dir {data_dir}"));
    assert_eq!(
        mount.0, "etcd-data",
        "etcd's data dir is the etcd-data volume"
    );
    let declared = compose["volumes"]
        .as_mapping()
        .expect("docker-compose.yml declares top-level volumes");
    assert!(
        declared.contains_key(Value::from("etcd-data")),
        "volume etcd-data is declared under top-level volumes"
    );
}

#[test]
fn kcm_service_command_parses_as_the_controller_manager() {
    let compose = compose();
    let etcd = service(&compose, "etcd");
    let kcm = service(&compose, "kcm");

    // Built from this repository's Dockerfile.
    let (context, dockerfile) = match &kcm["build"] {
        Value::String(context) => (context.clone(), "Dockerfile".to_string()),
        build @ Value::Mapping(_) => (
            build["context"].as_str().unwrap_or(".").to_string(),
            build["dockerfile"]
                .as_str()
                .unwrap_or("Dockerfile")
                .to_string(),
        ),
        other => panic!("kcm must be built from the Dockerfile, build is {other:?}"),
    };
    assert_eq!(
        root().join(&context).join(&dockerfile).canonicalize().ok(),
        root().join("Dockerfile").canonicalize().ok(),
        "kcm builds from ./Dockerfile"
    );

    // Starts only once etcd is healthy.
    assert_eq!(
        kcm["depends_on"]["etcd"]["condition"].as_str(),
        Some("service_healthy"),
        "kcm depends on etcd with condition service_healthy"
    );

    // The command line, as the entrypoint `kcm` receives it.
    let command = argv(&kcm["command"], "kcm command");
    let mut base = vec!["kcm".to_string()];
    base.extend(command.iter().cloned());
    let cli = Cli::try_parse_from(&base)
        .unwrap_or_else(|e| panic!("kcm's compose command {command:?} does not parse:\n{e}"));

    // The etcd servers come from the environment (or the command); they must name the etcd
    // service's client port. The env var is not set in this process (tests share it), so
    // pass its value as the flag it stands for, after and before the subcommand.
    let servers = match env_var(kcm, "KCM_ETCD_SERVERS") {
        Some(servers) => servers,
        None => cli.global.etcd_servers.join(","),
    };
    let client_port = etcd_client_port(etcd);
    for server in servers.split(',') {
        assert_eq!(
            http_host_port(server),
            ("etcd", client_port),
            "KCM_ETCD_SERVERS {servers:?} must name the etcd service's client port"
        );
    }
    let mut after = base.clone();
    after.extend(["--etcd-servers".to_string(), servers.clone()]);
    let mut before = vec!["kcm".to_string(), "--etcd-servers".to_string(), servers];
    before.extend(command.iter().cloned());
    for argv in [&after, &before] {
        let with_servers =
            Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{argv:?} does not parse:\n{e}"));
        assert_eq!(
            with_servers.global.etcd_servers,
            [format!("http://etcd:{client_port}")]
        );
    }

    let Command::ControllerManager(args) = cli.command else {
        panic!("kcm's compose command {command:?} is not controller-manager")
    };
    assert_eq!(
        args.address,
        std::net::IpAddr::from([0, 0, 0, 0]),
        "the status endpoint must listen on all interfaces to be published"
    );
    let ports = published(kcm);
    assert!(
        ports.contains(&Published {
            host_ip: Some("127.0.0.1".into()),
            host_port: args.port,
            container_port: args.port,
        }),
        "kcm publishes its status port {} on 127.0.0.1: {ports:?}",
        args.port
    );

    // A healthcheck, if any, asks that port's /healthz.
    if !kcm["healthcheck"].is_null() {
        let test = argv(&kcm["healthcheck"]["test"], "kcm healthcheck").join(" ");
        assert!(
            test.contains(&format!("/{}", args.port)) && test.contains("/healthz"),
            "kcm healthcheck asks /healthz on port {}: {test:?}",
            args.port
        );
    }

    // kcm shuts down on SIGTERM (src/main.rs); compose must send that.
    if let Some(signal) = kcm["stop_signal"].as_str() {
        assert_eq!(signal, "SIGTERM");
    }
    assert_eq!(kcm["restart"].as_str(), Some("unless-stopped"));
}

/// The JSON-array argument of the last `INSTRUCTION [...]` line in `stage`.
fn exec_form(stage: &[&str], instruction: &str) -> Option<Vec<String>> {
    let prefix = format!("{instruction} ");
    let line = stage
        .iter()
        .rev()
        .find(|line| line.to_ascii_uppercase().starts_with(&prefix))?;
    let array = line[prefix.len()..].trim();
    let value: serde_json::Value = serde_json::from_str(array)
        .unwrap_or_else(|e| panic!("{instruction} is not in exec (JSON array) form: {e}"));
    Some(
        value
            .as_array()
            .unwrap_or_else(|| panic!("{instruction} is not a JSON array"))
            .iter()
            .map(|v| v.as_str().expect("exec form holds strings").to_string())
            .collect(),
    )
}

#[test]
fn dockerfile_runs_kcm_as_non_root() {
    let text = read(&root().join("Dockerfile"));
    // Logical lines: continuations joined, comments and blanks dropped.
    let joined = text.replace("\\\n", " ");
    let lines: Vec<&str> = joined
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect();
    let is_from = |line: &&str| line.to_ascii_uppercase().starts_with("FROM ");
    let stages = lines.iter().filter(|line| is_from(line)).count();
    assert!(
        stages >= 2,
        "the Dockerfile is multi-stage (build, then a slim runtime)"
    );
    let last_from = lines.iter().rposition(is_from).unwrap();
    let runtime = &lines[last_from..];
    assert!(
        runtime[0].contains("debian:bookworm-slim"),
        "runtime stage: {}",
        runtime[0]
    );
    assert!(
        lines[..last_from]
            .iter()
            .any(|line| line.contains("protobuf-compiler")),
        "the build stage installs protoc for etcd-client"
    );

    assert_eq!(
        exec_form(runtime, "ENTRYPOINT").as_deref(),
        Some(&["kcm".to_string()][..]),
        "the runtime stage's ENTRYPOINT is [\"kcm\"]"
    );
    assert!(
        runtime
            .iter()
            .any(|line| line.starts_with("COPY --from=") && line.ends_with("/usr/local/bin/kcm")),
        "the runtime stage copies the binary onto PATH as kcm"
    );
    let user = runtime
        .iter()
        .rev()
        .find_map(|line| line.strip_prefix("USER "))
        .expect("the runtime stage sets a USER");
    let user = user.split(':').next().unwrap().trim();
    assert!(
        user != "root" && user != "0",
        "the runtime stage runs as non-root, not {user:?}"
    );

    // The default command parses, as the controller-manager.
    let cmd = exec_form(runtime, "CMD").expect("the runtime stage has a CMD");
    let mut argv = vec!["kcm".to_string()];
    argv.extend(cmd.iter().cloned());
    let cli = Cli::try_parse_from(&argv)
        .unwrap_or_else(|e| panic!("the Dockerfile's CMD {cmd:?} does not parse:\n{e}"));
    let Command::ControllerManager(args) = cli.command else {
        panic!("the Dockerfile's CMD {cmd:?} is not controller-manager")
    };
    let exposed = runtime
        .iter()
        .filter_map(|line| line.strip_prefix("EXPOSE "))
        .flat_map(str::split_whitespace)
        .collect::<Vec<_>>();
    assert!(
        exposed.contains(&args.port.to_string().as_str()),
        "the runtime stage EXPOSEs the status port {}: {exposed:?}",
        args.port
    );

    // The build context leaves out what the image does not need.
    let ignore = read(&root().join(".dockerignore"));
    let ignored: Vec<&str> = ignore.lines().map(str::trim).collect();
    for entry in ["target", ".git"] {
        assert!(
            ignored
                .iter()
                .any(|line| line.trim_end_matches('/') == entry),
            ".dockerignore excludes {entry}"
        );
    }
}

#[test]
fn apiserver_service_serves_the_api_on_the_hosts_loopback_only() {
    let compose = compose();
    let etcd = service(&compose, "etcd");
    let apiserver = service(&compose, "apiserver");
    assert_eq!(
        apiserver["depends_on"]["etcd"]["condition"].as_str(),
        Some("service_healthy")
    );
    let servers = env_var(apiserver, "KCM_ETCD_SERVERS").expect("KCM_ETCD_SERVERS");
    assert_eq!(http_host_port(&servers), ("etcd", etcd_client_port(etcd)));
    let command = argv(&apiserver["command"], "apiserver command");
    let mut base = vec!["kcm".to_string()];
    base.extend(command.iter().cloned());
    let cli = Cli::try_parse_from(&base).unwrap_or_else(|e| {
        panic!("the apiserver's compose command {command:?} does not parse:\n{e}")
    });
    let Command::Apiserver(args) = cli.command else {
        panic!("the apiserver's compose command {command:?} is not apiserver")
    };
    let config = args.config();
    // It must be allowed to start: all interfaces inside the container (to be published),
    // which without TLS and tokens needs the explicit flag.
    config
        .validate()
        .unwrap_or_else(|e| panic!("the apiserver's compose command would refuse to start: {e}"));
    assert!(config.address.ip().is_unspecified());
    // Published on the host's loopback only, since it has no authentication.
    let ports = published(apiserver);
    assert_eq!(
        ports,
        [Published {
            host_ip: Some("127.0.0.1".into()),
            host_port: config.address.port(),
            container_port: config.address.port(),
        }]
    );
    let test = argv(&apiserver["healthcheck"]["test"], "apiserver healthcheck").join(" ");
    assert!(
        test.contains(&format!("/{}", config.address.port())) && test.contains("/readyz"),
        "{test}"
    );
    assert_eq!(apiserver["stop_signal"].as_str(), Some("SIGTERM"));
}
