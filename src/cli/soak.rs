//! `kcm soak-check`'s flags (hidden): the checkers and instruments of `scripts/soak.sh`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Subcommand;

use crate::bench::soak::Check;

#[derive(Subcommand, Debug, Clone)]
pub enum SoakCommand {
    /// At every revision from --from: active pods ≤ replicas + surge, Ready ≥ replicas −
    /// unavailable.
    Rollout {
        #[arg(long)]
        history: PathBuf,
        /// Key prefix of the namespace's pods, e.g. /registry/pods/soak/.
        #[arg(long)]
        pods: String,
        #[arg(long)]
        from: i64,
        #[arg(long)]
        replicas: i64,
        #[arg(long)]
        max_surge: i64,
        #[arg(long)]
        max_unavailable: i64,
    },
    /// No pod with two controllers ever; no pod created, deleted or re-owned after
    /// --settled.
    Owners {
        #[arg(long)]
        history: PathBuf,
        #[arg(long)]
        pods: String,
        #[arg(long)]
        settled: i64,
    },
    /// No pod deleted while an owner lives or without owners; none left whose owners died.
    Gc {
        #[arg(long)]
        history: PathBuf,
        #[arg(long)]
        pods: String,
        /// Key prefix of the owners, e.g. /registry/replicasets/soak/.
        #[arg(long)]
        owners: String,
    },
    /// `kcm watch -o json` events replayed onto the state at the watch's resourceVersion
    /// (`etcdctl get -w json --rev N`) give the final state (`etcdctl get -w json`).
    Replay {
        #[arg(long)]
        state: PathBuf,
        #[arg(long)]
        events: PathBuf,
        #[arg(long = "final")]
        final_state: PathBuf,
        /// Key prefix of the pods, e.g. /registry/pods/.
        #[arg(long)]
        pods: String,
    },
    /// A TCP proxy in front of etcd: prints its address; SIGUSR1 cuts every connection and
    /// refuses new ones, SIGUSR2 restores.
    Proxy {
        #[arg(long)]
        upstream: SocketAddr,
    },
    /// An SVG of a CSV's columns against its first.
    Chart {
        #[arg(long)]
        csv: PathBuf,
        #[arg(long)]
        svg: PathBuf,
        #[arg(long)]
        title: String,
    },
}

impl From<SoakCommand> for Check {
    fn from(command: SoakCommand) -> Check {
        match command {
            SoakCommand::Rollout {
                history,
                pods,
                from,
                replicas,
                max_surge,
                max_unavailable,
            } => Check::Rollout {
                history,
                pods,
                from,
                replicas,
                max_surge,
                max_unavailable,
            },
            SoakCommand::Owners {
                history,
                pods,
                settled,
            } => Check::Owners {
                history,
                pods,
                settled,
            },
            SoakCommand::Gc {
                history,
                pods,
                owners,
            } => Check::Gc {
                history,
                pods,
                owners,
            },
            SoakCommand::Replay {
                state,
                events,
                final_state,
                pods,
            } => Check::Replay {
                state,
                events,
                final_state,
                pods,
            },
            SoakCommand::Proxy { upstream } => Check::Proxy { upstream },
            SoakCommand::Chart { csv, svg, title } => Check::Chart { csv, svg, title },
        }
    }
}
