//! `kcm bench`'s flags, and the [`bench::Config`] they describe.

use std::path::PathBuf;

use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};

use crate::bench::{self, Scenario};

impl ValueEnum for Scenario {
    fn value_variants<'a>() -> &'a [Self] {
        &Scenario::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Scenarios to run (default: all): scale-up, scale-down, rs-scale-up, rs-scale-down,
    /// rollout, heal, resync, watch, resume, memory, api-list, api-watch, api-get,
    /// api-create, api-update, api-apply.
    #[arg(value_enum)]
    pub scenarios: Vec<Scenario>,
    /// Data dir of the private etcd (default: a temporary dir on disk, removed after).
    #[arg(long, conflicts_with = "tmpfs")]
    pub data_dir: Option<PathBuf>,
    /// Put the private etcd's data dir on tmpfs (/dev/shm): no fsync cost.
    #[arg(long)]
    pub tmpfs: bool,
    /// Small sizes, for a smoke run of a few seconds (the figures mean little).
    #[arg(long)]
    pub quick: bool,
    /// Write every figure, the sizes and the scale curves as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw pods over time for scale-up and scale-down, kcm against the baseline.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Run every scenario this many times and report, per figure, the run with the median
    /// ratio and the spread (lowest–highest ratio) across runs.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub repeat: u32,
    /// etcd binary for the private etcd.
    #[arg(long, default_value = "etcd")]
    pub etcd_binary: PathBuf,
    /// The kcm binary whose `controller-manager` the memory scenario measures (default:
    /// this one), e.g. an older build to compare with.
    #[arg(long)]
    pub manager_binary: Option<PathBuf>,
    /// Run the controllers of scale-up, scale-down, rs-scale-up and rs-scale-down as
    /// clients of an apiserver over the bench's etcd (2014's topology, as
    /// `kcm controller-manager --kubeconfig`); the baseline stays raw etcd.
    #[arg(long)]
    pub api: bool,
    /// The scale rows' baseline writes also cost etcd what a controller's must: each
    /// compares its controller's key, and a second watch receives them (as kcm's pod
    /// informer does). Its ratios say how close kcm is to a controller's floor rather
    /// than to raw writes; the rows have no target then.
    #[arg(long, conflicts_with = "api")]
    pub controller_baseline: bool,
    /// Pods of the memory scenario, in controllers of 1,000 (scripts/soak.sh's `memory`
    /// runs 100,000 and 300,000).
    #[arg(long, hide = true)]
    pub memory_pods: Option<usize>,
}

impl BenchArgs {
    /// The configuration of a run: every scenario when none is named, and a private etcd
    /// unless `etcd_given` (`--etcd-servers` or `KCM_ETCD_SERVERS` named one).
    pub fn config(&self, etcd_given: bool) -> bench::Config {
        bench::Config {
            scenarios: if self.scenarios.is_empty() {
                Scenario::ALL.to_vec()
            } else {
                self.scenarios.clone()
            },
            private_etcd: (!etcd_given).then(|| bench::PrivateEtcdConfig {
                binary: self.etcd_binary.clone(),
                data_dir: self.data_dir.clone(),
                tmpfs: self.tmpfs,
            }),
            quick: self.quick,
            json: self.json.clone(),
            svg: self.svg.clone(),
            repeat: self.repeat as usize,
            manager_binary: self.manager_binary.clone(),
            memory_pods: self.memory_pods,
            through_api: self.api,
            controller_baseline: self.controller_baseline,
        }
    }
}
