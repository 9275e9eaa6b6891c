//! The layers, written down: which top-level modules may not use which, and which outside
//! crates only some modules may name. Each rule is a row of [`RULES`]; a violation names
//! the file, the line and the `use` (or inline path) that breaks it.

use super::source::Reference;
use super::tree::{Crate, SourceFile};

/// The controllers and their shared runtime (`controller`).
const CONTROLLERS: &[&str] = &[
    "controller",
    "deployment",
    "endpoints",
    "garbagecollector",
    "namespace",
    "nodelifecycle",
    "replicaset",
    "replication_2014",
    "replication_manager",
    "scheduler",
];

/// The programs and tools built on the controllers; `measure` is listed before it exists.
const PROGRAMS: &[&str] = &[
    "apiserver",
    "bench",
    "cli",
    "controller_manager",
    "kubecfg",
    "lab",
    "measure",
    "up",
];

/// Paths that do IO (or reach a process, the network, the disk or the environment).
const IO_PATHS: &[&[&str]] = &[
    &["tokio"],
    &["tokio_util"],
    &["tokio_rustls"],
    &["etcd_client"],
    &["tonic"],
    &["hyper"],
    &["hyper_util"],
    &["axum"],
    &["reqwest"],
    &["rustls"],
    &["libc"],
    &["tempfile"],
    &["std", "fs"],
    &["std", "net"],
    &["std", "process"],
    &["std", "env"],
];

/// clap's derive attributes: a file using them uses clap even if it names it through a
/// re-export.
const CLAP_ATTRIBUTES: &[&str] = &["#[arg(", "#[command(", "#[clap(", "#[value("];

/// What a file names: a path, and the top-level module of the crate it resolves to.
pub(super) struct Named<'a> {
    /// The top-level module of the file that names it.
    own: &'a str,
    /// The path as written.
    path: &'a [String],
    /// The top-level module it resolves to, if it is in the crate and outside `own`.
    module: Option<&'a str>,
}

/// One written rule.
pub(super) struct Rule {
    /// What the rule says, as its failure prints it.
    pub(super) says: &'static str,
    /// Whether the rule holds for the files of this top-level module (`lib`, `main` for the
    /// crate roots).
    holds_for: fn(&str) -> bool,
    /// Whether naming this breaks the rule.
    breaks_it: fn(&Named) -> bool,
    /// Text whose presence in production code breaks the rule too.
    forbidden_text: &'static [&'static str],
}

pub(super) const RULES: &[Rule] = &[
    Rule {
        says: "a controller imports no other controller (each may import `controller`, \
               which imports none) and no program (apiserver, bench, cli, controller_manager, \
               kubecfg, lab, measure, up)",
        holds_for: |own| CONTROLLERS.contains(&own),
        breaks_it: |named| {
            named.module.is_some_and(|module| {
                (CONTROLLERS.contains(&module) && module != "controller")
                    || PROGRAMS.contains(&module)
            })
        },
        forbidden_text: &[],
    },
    Rule {
        says: "`labels` and `api` do no IO (tokio, etcd_client, tonic, hyper, axum, reqwest, \
               rustls, libc, tempfile, std::fs, std::net, std::process, std::env, ...)",
        holds_for: |own| own == "labels" || own == "api",
        breaks_it: |named| {
            IO_PATHS.iter().any(|io| {
                named.path.len() >= io.len() && named.path.iter().zip(*io).all(|(a, b)| a == b)
            })
        },
        forbidden_text: &[],
    },
    Rule {
        says: "`labels` imports no module of the crate, `api` only `labels`",
        holds_for: |own| own == "labels" || own == "api",
        breaks_it: |named| {
            named
                .module
                .is_some_and(|module| !(named.own == "api" && module == "labels"))
        },
        forbidden_text: &[],
    },
    Rule {
        says: "only `cli` names clap",
        holds_for: |own| own != "cli",
        breaks_it: |named| named.path.first().is_some_and(|root| root == "clap"),
        forbidden_text: CLAP_ATTRIBUTES,
    },
];

/// The violations of `rule` in `krate`, one per offending path or line.
pub(super) fn violations(krate: &Crate, rule: &Rule) -> Vec<String> {
    let mut found = Vec::new();
    for file in krate.files.iter().filter(|f| (rule.holds_for)(&f.top)) {
        for reference in &file.references {
            let module = krate
                .resolve(file, &reference.path)
                .map(|(target, _)| target.top.as_str())
                .filter(|top| *top != file.top);
            let named = Named {
                own: &file.top,
                path: &reference.path,
                module,
            };
            if (rule.breaks_it)(&named) {
                found.push(violation(rule, file, reference));
            }
        }
        for (n, line) in file.code.lines().enumerate() {
            if rule.forbidden_text.iter().any(|text| line.contains(text)) {
                let reference = Reference {
                    path: Vec::new(),
                    imported_as: None,
                    line: n + 1,
                    text: line.trim().to_string(),
                };
                found.push(violation(rule, file, &reference));
            }
        }
    }
    found
}

fn violation(rule: &Rule, file: &SourceFile, reference: &Reference) -> String {
    let at = if reference.path.is_empty() {
        format!("src/{}:{}: {}", file.path, reference.line, reference.text)
    } else {
        reference.describe(&file.path)
    };
    format!("{}: {at}", rule.says)
}

#[cfg(test)]
mod tests {
    use super::{violations, RULES};
    use crate::module_dependencies::tree::Crate;

    /// A small crate: each rule's planted violations below are checked against it.
    const CLEAN: &[(&str, &str)] = &[
        ("lib.rs", "pub mod api;\npub mod cli;\npub mod controller;\npub mod labels;\npub mod replicaset;\npub mod replication_manager;"),
        ("labels.rs", "use std::collections::BTreeMap;\npub struct Set(BTreeMap<String, String>);"),
        ("api.rs", "use crate::labels::Set;\nuse serde::Serialize;\n"),
        ("cli.rs", "use clap::Parser;\n#[derive(Parser)]\npub struct Cli {\n    #[arg(long)]\n    n: u32,\n}"),
        ("controller.rs", "use crate::{api, labels};\npub fn run() { tokio::spawn(async {}); }"),
        ("replicaset.rs", "use crate::controller::{self, run};\nuse crate::api::Pod;"),
        ("replication_manager.rs", "mod sync;\nuse crate::controller;"),
        ("replication_manager/sync.rs", "use super::super::controller::run;"),
        ("main.rs", "fn main() { let cli = kcm::cli::Cli::parse_args(); }"),
    ];

    /// The violations of every rule in `CLEAN` with `changes` (files replaced or added).
    fn violations_with(changes: &[(&str, &str)]) -> Vec<String> {
        let mut files: Vec<(String, String)> = CLEAN
            .iter()
            .filter(|(path, _)| !changes.iter().any(|(changed, _)| changed == path))
            .chain(changes)
            .map(|(path, text)| (path.to_string(), text.to_string()))
            .collect();
        files.sort();
        let krate = Crate::new(&files);
        RULES
            .iter()
            .flat_map(|rule| violations(&krate, rule))
            .collect()
    }

    #[track_caller]
    fn check_planted(changes: &[(&str, &str)], expected: &[&str]) {
        assert_eq!(violations_with(changes), expected);
    }

    #[test]
    fn the_clean_crate_keeps_every_rule() {
        check_planted(&[], &[]);
    }

    #[test]
    fn a_controller_importing_another_controller_or_a_program_is_named() {
        check_planted(
            &[(
                "replicaset.rs",
                "use crate::controller::run;\nuse crate::{\n    api::Pod,\n    replication_manager::ManagerConfig,\n};",
            )],
            &["a controller imports no other controller (each may import `controller`, which \
               imports none) and no program (apiserver, bench, cli, controller_manager, \
               kubecfg, lab, measure, up): src/replicaset.rs:4: use crate::{api::Pod, \
               replication_manager::ManagerConfig}; (names crate::replication_manager::ManagerConfig)"],
        );
        let from_a_file_in_a_folder = violations_with(&[(
            "replication_manager/sync.rs",
            "pub fn f() { crate::cli::Cli::parse_args(); }",
        )]);
        assert_eq!(
            from_a_file_in_a_folder.len(),
            1,
            "{from_a_file_in_a_folder:?}"
        );
        assert!(from_a_file_in_a_folder[0].ends_with(
            "src/replication_manager/sync.rs:1: pub fn f() { crate::cli::Cli::parse_args(); } \
             (names crate::cli::Cli::parse_args)"
        ));
        let toolkit_using_a_controller =
            violations_with(&[("controller.rs", "use super::replicaset::Plan;")]);
        assert_eq!(toolkit_using_a_controller.len(), 1);
        assert!(toolkit_using_a_controller[0].ends_with(
            "src/controller.rs:1: use super::replicaset::Plan; (names super::replicaset::Plan)"
        ));
    }

    #[test]
    fn io_in_api_or_labels_is_named() {
        check_planted(
            &[(
                "api.rs",
                "use crate::labels::Set;\nasync fn f() {\n    tokio::time::sleep(d).await;\n}",
            )],
            &[
                "`labels` and `api` do no IO (tokio, etcd_client, tonic, hyper, axum, reqwest, \
               rustls, libc, tempfile, std::fs, std::net, std::process, std::env, ...): \
               src/api.rs:3: tokio::time::sleep(d).await; (names tokio::time::sleep)",
            ],
        );
        let file_read = violations_with(&[("labels.rs", "use std::{collections::BTreeMap, fs};")]);
        assert_eq!(file_read.len(), 1, "{file_read:?}");
        assert!(file_read[0]
            .ends_with("src/labels.rs:1: use std::{collections::BTreeMap, fs}; (names std::fs)"));
        let labels_using_api = violations_with(&[("labels.rs", "use crate::api::Pod;")]);
        assert_eq!(
            labels_using_api,
            [
                "`labels` imports no module of the crate, `api` only `labels`: \
              src/labels.rs:1: use crate::api::Pod; (names crate::api::Pod)"
            ]
        );
    }

    #[test]
    fn clap_outside_cli_is_named() {
        check_planted(
            &[(
                "controller.rs",
                "#[derive(clap::Args)]\npub struct Flags {\n    #[arg(long)]\n    n: u32,\n}",
            )],
            &[
                "only `cli` names clap: src/controller.rs:1: #[derive(clap::Args)] (names clap::Args)",
                "only `cli` names clap: src/controller.rs:3: #[arg(long)]",
            ],
        );
    }
}
