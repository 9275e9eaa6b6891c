//! `kcm kubelet`'s flags, and the [`KubeletConfig`] they describe.

use std::time::Duration;

use super::parse_duration;
use crate::kubelet::{parse_globs, ImageRules, Ipv4Cidr, KubeletConfig};

/// `kcm kubelet`: flags of one simulated node.
#[derive(clap::Args, Debug, Clone)]
pub struct KubeletArgs {
    /// Name of the node; written into the pods it claims as spec.host and status.host.
    /// One name, one kubelet: the name is registered in etcd ({prefix}/minions/NAME, on a
    /// 10s lease) while the kubelet runs, and a kubelet whose name is taken exits. Its Node
    /// object ({prefix}/nodes/NAME) is posted Ready each time it registers.
    #[arg(long)]
    pub node: String,
    /// Pod address range of the node. Default 10.244.N.0/24 with N derived from the
    /// node name (a hash: distinct names can collide, so give nodes distinct ranges).
    #[arg(long)]
    pub pod_cidr: Option<Ipv4Cidr>,
    /// How long a claimed pod stays Pending before it turns Running.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub start_delay: Duration,
    /// Probability (0 to 1) that a running pod later fails.
    #[arg(long, default_value_t = 0.0, value_parser = parse_fail_rate)]
    pub fail_rate: f64,
    /// How long after turning Running a pod chosen to fail turns Failed.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub fail_after: Duration,
    /// Most active pods the node holds (its Node's capacity.pods).
    #[arg(long, default_value_t = 110, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_pods: u32,
    /// Port of the kubelet's `/healthz` (and `/metrics`): 503 naming the node while its
    /// registration is lost and not back. 0, the default, serves none (several kubelets
    /// share a machine here; Kubernetes' kubelet listens on 10248).
    #[arg(long, default_value_t = 0)]
    pub healthz_port: u16,
    /// Address of `/healthz`; anything but loopback exposes it.
    #[arg(long, default_value = "127.0.0.1")]
    pub healthz_bind_address: std::net::IpAddr,
    /// Duration of the node's Lease (kube-node-lease/NAME, coordination.k8s.io/v1), which
    /// the kubelet renews every quarter of it while registered: the heartbeat the node
    /// lifecycle controller reads through the API (`kcm controller-manager --kubeconfig`).
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u64).range(1..))]
    pub node_lease_duration_seconds: u64,
    /// Claim no unassigned pod: a scheduler binds them (`kcm controller-manager
    /// --controllers '*,scheduler'`), and the node runs only the pods bound to it.
    #[arg(long)]
    pub no_claim: bool,
    #[command(flatten)]
    pub pods: PodBehaviourArgs,
}

/// How the simulated nodes' pods behave: ready delay and failing images (shared by
/// `kcm kubelet` and `kcm up`).
#[derive(clap::Args, Debug, Clone)]
pub struct PodBehaviourArgs {
    /// How long a pod that turned Running stays unready (Ready=False) before it turns
    /// Ready; a pod's annotation kcm.io/ready-delay (copied from its template) overrides
    /// it. 0 reports Ready in the same write as Running.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub ready_delay: Duration,
    /// Images whose pull fails (comma-separated globs; * matches anything; "" for none):
    /// their pods stay Pending, waiting with ErrImagePull, then ImagePullBackOff.
    #[arg(long, default_value = "*:fail*,*doesnotexist*")]
    pub pull_fail_images: String,
    /// Images that crash: their pods run with an address but never turn Ready, and
    /// restart in CrashLoopBackOff (first restart after 2s, the delay doubling to 30s).
    #[arg(long, default_value = "*:crash*")]
    pub crash_images: String,
    /// Images that run but never turn Ready.
    #[arg(long, default_value = "*:unready*")]
    pub unready_images: String,
}

impl PodBehaviourArgs {
    /// The failing-image rules these flags describe.
    pub fn images(&self) -> ImageRules {
        ImageRules {
            pull_fail: parse_globs(&self.pull_fail_images),
            crash: parse_globs(&self.crash_images),
            unready: parse_globs(&self.unready_images),
        }
    }
}

impl KubeletArgs {
    /// Where `/healthz` is served, if anywhere.
    pub fn healthz(&self) -> Option<std::net::SocketAddr> {
        (self.healthz_port != 0)
            .then(|| std::net::SocketAddr::new(self.healthz_bind_address, self.healthz_port))
    }
}

impl TryFrom<&KubeletArgs> for KubeletConfig {
    type Error = anyhow::Error;

    /// The validated configuration these flags describe.
    ///
    /// # Errors
    /// As [`KubeletConfig::validate`].
    fn try_from(args: &KubeletArgs) -> anyhow::Result<KubeletConfig> {
        let mut config = KubeletConfig::new(args.node.clone());
        if let Some(cidr) = args.pod_cidr {
            config.pod_cidr = cidr;
        }
        config.start_delay = args.start_delay;
        config.fail_rate = args.fail_rate;
        config.fail_after = args.fail_after;
        config.max_pods = args.max_pods as usize;
        config.claim_unassigned = !args.no_claim;
        config.node_lease_duration = Duration::from_secs(args.node_lease_duration_seconds);
        config.ready_delay = args.pods.ready_delay;
        config.images = args.pods.images();
        config.validate()?;
        Ok(config)
    }
}

/// Parses a probability between 0 and 1.
///
/// # Errors
/// A message naming the accepted range.
fn parse_fail_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(rate) if (0.0..=1.0).contains(&rate) => Ok(rate),
        _ => Err(format!("{s:?} is not a probability between 0 and 1")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use crate::kubelet::default_pod_cidr;
    use clap::Parser as _;

    #[test]
    fn kubelet_flags_parse_and_validate() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from([&["kcm", "kubelet"], args].concat()).map(|cli| match cli.command {
                Command::Kubelet(args) => args,
                other => panic!("parsed as {other:?}"),
            })
        };
        let config = parse(&[
            "--node",
            "node-a",
            "--pod-cidr",
            "10.244.3.0/24",
            "--start-delay",
            "1s",
            "--fail-rate",
            "0.25",
            "--max-pods",
            "7",
            "--ready-delay",
            "2s",
            "--crash-images",
            "*:boom, x*",
            "--node-lease-duration-seconds",
            "4",
        ])
        .unwrap();
        let config = KubeletConfig::try_from(&config).unwrap();
        assert_eq!(config.pod_cidr.to_string(), "10.244.3.0/24");
        assert_eq!(config.start_delay, Duration::from_secs(1));
        assert_eq!((config.fail_rate, config.max_pods), (0.25, 7));
        assert_eq!(config.ready_delay, Duration::from_secs(2));
        assert_eq!(config.images.crash, ["*:boom", "x*"]);
        assert_eq!(config.node_lease_duration, Duration::from_secs(4));
        assert_eq!(config.images.unready, ["*:unready*"]);
        let defaults = KubeletConfig::try_from(&parse(&["--node", "node-a"]).unwrap()).unwrap();
        assert_eq!(defaults.pod_cidr, default_pod_cidr("node-a"));
        assert_eq!(defaults.fail_after, Duration::from_secs(5));
        assert_eq!(defaults.ready_delay, Duration::ZERO);
        assert_eq!(defaults.node_lease_duration, Duration::from_secs(40));
        assert_eq!(defaults.images, ImageRules::default());
        for (args, part) in [
            (
                &["--node", "a", "--fail-rate", "1.5"][..],
                "probability between 0 and 1",
            ),
            (
                &["--node", "a", "--pod-cidr", "10.1.1.1/24"],
                "host bits are set",
            ),
            (&["--node", "a", "--max-pods", "0"], "--max-pods"),
            (
                &["--node", "a", "--node-lease-duration-seconds", "0"],
                "--node-lease-duration-seconds",
            ),
            (&[], "--node"),
        ] {
            let message = parse(args).unwrap_err().to_string();
            assert!(
                message.contains(part),
                "{args:?}: {message:?} should contain {part:?}"
            );
        }
    }
}
