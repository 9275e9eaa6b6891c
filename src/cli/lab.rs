//! `kcm lab`'s flags, and the [`lab::Config`] they describe.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};

use super::parse_sync_period;
use crate::lab::{self, Scenario};

impl ValueEnum for Scenario {
    fn value_variants<'a>() -> &'a [Self] {
        &Scenario::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

#[derive(Args, Debug, Clone)]
pub struct LabArgs {
    /// Scenarios to run (default: all): overcreate, stale-watch (only on the private
    /// etcd: it compacts), victims, orphans, heal, resync, burst, names, status, overlap,
    /// event-wait, failing-create (only on the private etcd: it turns authentication
    /// on), watch-cut.
    #[arg(value_enum)]
    pub scenarios: Vec<Scenario>,
    /// Small sizes and, unless --sync-period says otherwise, a 1s period.
    #[arg(long)]
    pub quick: bool,
    /// Both loops' sync period (2014's was 10s; the lab's default, 2s, or 1s with
    /// --quick, is shorter so a run stays short).
    #[arg(long, value_parser = parse_sync_period)]
    pub sync_period: Option<Duration>,
    /// Write the rows as JSON to this file: {"scenarios": [{"scenario", "measure",
    /// "unit", "v2014", "kcm", "departure", "weaknesses", "issues"}]}; `weaknesses` are the
    /// numbers of docs/2014.md.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write one chart per scenario, DIR/SCENARIO.svg: its figure's course for the 2014
    /// loop and kcm's, two series on one chart (DIR is created if missing).
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
    /// etcd binary for the private etcd.
    #[arg(long, default_value = "etcd")]
    pub etcd_binary: PathBuf,
    /// Where both loops run: `etcd` (kcm's default: each reads and writes etcd) or `api`
    /// (2014's topology: each a client of an apiserver the lab runs over its etcd; not
    /// stale-watch, watch-cut, failing-create or burst, which act at the loop's etcd
    /// connection).
    #[arg(long, default_value = "etcd")]
    pub topology: lab::Topology,
}

impl LabArgs {
    /// The configuration of a run: every scenario when none is named, and a private etcd
    /// unless `etcd_given` (`--etcd-servers` or `KCM_ETCD_SERVERS` named one).
    pub fn config(&self, etcd_given: bool) -> lab::Config {
        lab::Config {
            topology: self.topology,
            scenarios: if self.scenarios.is_empty() {
                Scenario::ALL.to_vec()
            } else {
                self.scenarios.clone()
            },
            private_etcd: (!etcd_given).then(|| self.etcd_binary.clone()),
            quick: self.quick,
            sync_period: self.sync_period.unwrap_or(match self.quick {
                true => lab::QUICK_SYNC_PERIOD,
                false => lab::DEFAULT_SYNC_PERIOD,
            }),
            json: self.json.clone(),
            svg: self.svg.clone(),
        }
    }
}
