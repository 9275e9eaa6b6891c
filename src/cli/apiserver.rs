//! `kcm apiserver`'s flags (kube-apiserver's names where it has them), and the
//! [`apiserver::Config`] they describe.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::parse_timeout;
use crate::apiserver;

#[derive(Args, Debug, Clone)]
pub struct ApiserverArgs {
    /// Address to serve the API on. Anything but loopback needs --tls-cert-file,
    /// --tls-private-key-file and --token-auth-file.
    #[arg(long, default_value = "127.0.0.1")]
    pub address: IpAddr,
    /// Port to serve the API on (2014's 8080); 0 picks a free port and logs it.
    #[arg(long, default_value_t = apiserver::DEFAULT_PORT)]
    pub port: u16,
    /// Serving certificate (PEM, the chain after the leaf); with it the API is HTTPS.
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// Key (PEM) of --tls-cert-file.
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Static bearer tokens, kube-apiserver's CSV: `token,user,uid[,"group1,group2"]`.
    /// Requests without `Authorization: Bearer TOKEN` get 401. Needs HTTPS.
    #[arg(long, value_name = "FILE")]
    pub token_auth_file: Option<PathBuf>,
    /// Serve plain HTTP without tokens on a non-loopback --address anyway. Only for a
    /// container whose port is published on the host's loopback (docker-compose.yml).
    #[arg(long)]
    pub insecure_beyond_loopback: bool,
    /// Most watches served at once; more are refused with 429 TooManyRequests.
    #[arg(long, default_value_t = apiserver::DEFAULT_MAX_WATCHES)]
    pub max_watches: usize,
    /// Most read-only requests (GET, HEAD; watches not counted) served at once; more are
    /// refused with 429 TooManyRequests and Retry-After. 0 for no limit.
    #[arg(long, default_value_t = apiserver::DEFAULT_MAX_REQUESTS_INFLIGHT)]
    pub max_requests_inflight: usize,
    /// Most mutating requests (POST, PUT, PATCH, DELETE) served at once; more are
    /// refused with 429 TooManyRequests and Retry-After. 0 for no limit.
    #[arg(long, default_value_t = apiserver::DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT)]
    pub max_mutating_requests_inflight: usize,
    /// Events each resource's watch cache keeps for watches that resume from a
    /// resourceVersion (kube-apiserver's --default-watch-cache-size); a watch from before
    /// them is served by an etcd watch of its own. Also how far a watcher may fall behind
    /// before its stream is ended (it watches again from its last resourceVersion).
    #[arg(long, default_value_t = apiserver::CacheConfig::default().window as u64, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub watch_cache_size: u64,
    /// Bound on every request but watches (504 after it).
    #[arg(long, default_value = "60s", value_parser = parse_timeout)]
    pub request_timeout: Duration,
}

impl ApiserverArgs {
    /// The configuration these flags describe.
    pub fn config(&self) -> apiserver::Config {
        apiserver::Config {
            address: SocketAddr::new(self.address, self.port),
            tls: self
                .tls_cert_file
                .clone()
                .zip(self.tls_private_key_file.clone())
                .map(|(cert_file, key_file)| apiserver::TlsFiles {
                    cert_file,
                    key_file,
                }),
            token_file: self.token_auth_file.clone(),
            insecure_beyond_loopback: self.insecure_beyond_loopback,
            max_watches: self.max_watches.max(1),
            max_requests_inflight: self.max_requests_inflight,
            max_mutating_requests_inflight: self.max_mutating_requests_inflight,
            request_timeout: self.request_timeout,
            cache: apiserver::CacheConfig {
                window: self.watch_cache_size as usize,
                broadcast_capacity: self.watch_cache_size as usize,
            },
            ..apiserver::Config::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::cli::{Cli, Command};
    use clap::Parser as _;

    fn config(args: &[&str]) -> crate::apiserver::Config {
        match Cli::try_parse_from([&["kcm", "apiserver"], args].concat())
            .unwrap()
            .command
        {
            Command::Apiserver(args) => args.config(),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn defaults_are_2014s_loopback_port_without_tls() {
        let config = config(&[]);
        assert_eq!(config.address.to_string(), "127.0.0.1:8080");
        assert!(config.tls.is_none() && config.token_file.is_none());
        assert!(config.validate().is_ok());
    }

    #[test]
    fn beyond_loopback_needs_tls_and_tokens_together() {
        let error = config(&["--address", "0.0.0.0"]).validate().unwrap_err();
        assert!(error.to_string().contains("--tls-cert-file"), "{error}");
        let served = config(&[
            "--address",
            "0.0.0.0",
            "--tls-cert-file",
            "c.pem",
            "--tls-private-key-file",
            "k.pem",
            "--token-auth-file",
            "tokens.csv",
        ]);
        assert!(served.validate().is_ok());
        let error = config(&["--token-auth-file", "tokens.csv"])
            .validate()
            .unwrap_err();
        assert!(error.to_string().contains("plain HTTP"), "{error}");
        assert!(Cli::try_parse_from(["kcm", "apiserver", "--tls-cert-file", "c.pem"]).is_err());
    }
}
