//! `kcm up`'s flags, and the [`up::Config`] they describe.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::kubelet::PodBehaviourArgs;
use super::parse_sync_period;
use crate::up;

#[derive(Args, Debug, Clone)]
pub struct UpArgs {
    /// Simulated kubelets (nodes) to run.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(0..=64))]
    pub nodes: u16,
    /// Data dir of the private etcd; default a temporary dir removed on exit.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// etcd binary for the private etcd (default: `etcd` on PATH).
    #[arg(long, default_value = "etcd")]
    pub etcd_binary: PathBuf,
    /// Run the guided tour: create a controller and a service, watch pods converge,
    /// delete a pod, scale, show the endpoints; then shut down.
    #[arg(long)]
    pub demo: bool,
    /// Port of the status endpoint (/healthz, /metrics) on 127.0.0.1; 0 picks a free one
    /// (the line saying where status is served shows it).
    #[arg(long, default_value_t = 10252)]
    pub port: u16,
    /// How often every controller is synced even without events (at least 100ms).
    #[arg(long, default_value = "10s", value_parser = parse_sync_period)]
    pub sync_period: Duration,
    /// Port of the Kubernetes API (`kcm apiserver`) on 127.0.0.1; 0 picks a free one.
    #[arg(long, env = "KCM_APISERVER_PORT", default_value_t = crate::apiserver::DEFAULT_PORT)]
    pub apiserver_port: u16,
    /// Where to write a kubeconfig for the API (kept on exit); by default a file in a
    /// temporary dir, removed on exit. `export KUBECONFIG=...` is printed either way.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Most active pods each node holds (its Node's capacity.pods), as `kcm kubelet
    /// --max-pods`. Above 253, each node gets a pod range of its own in 10.0.0.0/8 big
    /// enough for it.
    #[arg(long, default_value_t = 110, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_pods: u32,
    /// Where the controllers run: `etcd` (kcm's default: each reads and writes etcd) or
    /// `api` (2014's topology: each a client of the API `kcm up` serves, as
    /// `kcm controller-manager --master` runs them).
    #[arg(long, default_value = "etcd")]
    pub topology: crate::apiclient::Topology,
    #[command(flatten)]
    pub pods: PodBehaviourArgs,
}

impl From<&UpArgs> for up::Config {
    fn from(args: &UpArgs) -> up::Config {
        up::Config {
            nodes: args.nodes,
            data_dir: args.data_dir.clone(),
            etcd_binary: args.etcd_binary.clone(),
            demo: args.demo,
            port: args.port,
            apiserver_port: args.apiserver_port,
            kubeconfig: args.kubeconfig.clone(),
            sync_period: args.sync_period,
            ready_delay: args.pods.ready_delay,
            images: args.pods.images(),
            max_pods: args.max_pods as usize,
            topology: args.topology,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use crate::kubelet::ImageRules;
    use clap::Parser as _;

    #[test]
    fn up_passes_the_kubelet_pod_flags_through() {
        let parse = |args: &[&str]| match Cli::try_parse_from([&["kcm", "up"], args].concat())
            .unwrap()
            .command
        {
            Command::Up(args) => up::Config::from(&args),
            other => panic!("parsed as {other:?}"),
        };
        let defaults = parse(&[]);
        assert_eq!(defaults.ready_delay, Duration::ZERO);
        assert_eq!(defaults.images, ImageRules::default());
        assert_eq!(
            defaults.max_pods,
            crate::kubelet::KubeletConfig::new("n").max_pods
        );
        assert_eq!(parse(&["--max-pods", "600"]).max_pods, 600);
        let config = parse(&[
            "--ready-delay",
            "3s",
            "--pull-fail-images",
            "",
            "--unready-images",
            "a:*",
        ]);
        assert_eq!(config.ready_delay, Duration::from_secs(3));
        assert!(config.images.pull_fail.is_empty());
        assert_eq!(config.images.unready, ["a:*"]);
        assert_eq!(config.images.crash, ["*:crash*"]);
    }
}
