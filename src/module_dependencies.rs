//! Keeps the layering of the crate, at three levels:
//!
//! - between top-level modules: the dependency list of ARCHITECTURE.md ("Module
//!   dependencies") must match the code and have no cycle;
//! - inside each folder: no cycle between sibling files, and no glob import anywhere;
//! - the written rules of [`rules::RULES`]: controllers import no other controller and no
//!   program, `labels` and `api` do no IO, only `cli` names clap.
//!
//! The code is read as text ([`source`]): every path in `src/**/*.rs` (`use` statements with
//! their groups, `super::`, `self::` and `crate::` paths, inline paths), outside comments,
//! string literals and test code (`#[cfg(test)]` items and `#[cfg(test)] mod x;` files).
//! Each file is a node, and a path naming a module of the crate (or an item of it) is an
//! edge to the file that defines that module ([`tree`]); an ancestor's item that the
//! ancestor imports (`use super::Plan` of a parent's `pub use self::plan::Plan`) is an
//! edge to the file it comes from. A folder's files belong to their
//! top-level module (`src/kubecfg/print.rs` is `kubecfg`). `lib.rs` and `main.rs` are the
//! crates' roots, not modules: only the glob and clap rules read them.
//!
//! The checks are pure functions of (path, text) pairs; only the tests at the bottom of
//! this file read `src/`. Each failure names the file, the line and the `use` that breaks
//! the rule.

mod rules;
mod source;
mod tree;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use tree::Crate;

/// Module → the modules it uses (itself excluded).
type Graph = BTreeMap<String, BTreeSet<String>>;

const SECTION: &str = "## Module dependencies";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The crate's files under `src`, as (path under `src/`, text) pairs.
fn read_sources(src: &Path) -> Vec<(String, String)> {
    rust_files(src)
        .iter()
        .map(|path| {
            let relative = path.strip_prefix(src).expect("under src/");
            let relative = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            let text = std::fs::read_to_string(path)
                .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            (relative, text)
        })
        .collect()
}

/// The `.rs` files under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("read src/").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The crate under `src/`.
fn the_crate() -> Crate {
    Crate::new(&read_sources(&root().join("src")))
}

/// A cycle of `graph` (its first module repeated at the end), if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        graph: &Graph,
        module: &str,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(module) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let start = path
                    .iter()
                    .position(|m| m == module)
                    .expect("open is on path");
                let mut cycle = path[start..].to_vec();
                cycle.push(module.to_string());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(module.to_string(), Mark::Open);
        path.push(module.to_string());
        for next in graph.get(module).into_iter().flatten() {
            if let Some(cycle) = visit(graph, next, marks, path) {
                return Some(cycle);
            }
        }
        path.pop();
        marks.insert(module.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    graph
        .keys()
        .find_map(|module| visit(graph, module, &mut marks, &mut Vec::new()))
}

/// The modules bottom-up: each after everything it uses (by depth, then by name).
fn layered(graph: &Graph) -> Vec<String> {
    fn depth(graph: &Graph, module: &str, memo: &mut BTreeMap<String, usize>) -> usize {
        if let Some(d) = memo.get(module) {
            return *d;
        }
        let d = graph
            .get(module)
            .into_iter()
            .flatten()
            .map(|m| depth(graph, m, memo) + 1)
            .max()
            .unwrap_or(0);
        memo.insert(module.to_string(), d);
        d
    }
    let mut memo = BTreeMap::new();
    let mut modules: Vec<String> = graph.keys().cloned().collect();
    modules.sort_by_key(|m| (depth(graph, m, &mut memo), m.clone()));
    modules
}

/// `graph` as ARCHITECTURE.md writes it: `module -> a, b` or `module -> (none)`.
fn render(graph: &Graph) -> String {
    let width = graph.keys().map(String::len).max().unwrap_or(0);
    let order = if find_cycle(graph).is_none() {
        layered(graph)
    } else {
        graph.keys().cloned().collect()
    };
    let mut out = String::new();
    for module in order {
        let uses: Vec<&str> = graph[&module].iter().map(String::as_str).collect();
        let uses = if uses.is_empty() {
            "(none)".to_string()
        } else {
            uses.join(", ")
        };
        out.push_str(&format!("{module:<width$} -> {uses}\n"));
    }
    out
}

/// The list of ARCHITECTURE.md's "Module dependencies": the first code block after the
/// heading, one `module -> a, b` (or `-> (none)`) line per module.
fn documented_graph(architecture: &str) -> Option<Graph> {
    let section = architecture.split_once(SECTION)?.1;
    let block = section.split("```").nth(1)?;
    let mut graph = Graph::new();
    for line in block.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let (module, uses) = line
            .split_once("->")
            .unwrap_or_else(|| panic!("not `module -> uses`: {line:?}"));
        let uses = uses
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty() && *u != "(none)")
            .map(String::from)
            .collect();
        graph.insert(module.trim().to_string(), uses);
    }
    Some(graph)
}

#[test]
fn the_modules_have_no_dependency_cycle() {
    let graph = the_crate().top_level_graph();
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "module dependency cycle: {}\nthe graph:\n{}",
            cycle.join(" -> "),
            render(&graph)
        );
    }
}

#[test]
fn architecture_md_lists_the_module_dependencies_of_the_code() {
    let actual = the_crate().top_level_graph();
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    assert!(
        documented_graph(&text).as_ref() == Some(&actual),
        "ARCHITECTURE.md's {SECTION:?} (a code block of `module -> uses` lines) differs from \
         the code; the code's graph is:\n{}",
        render(&actual)
    );
}

/// docs/code-map.md has a paragraph for each top-level module of `lib.rs` (starting
/// `**\`name.rs\`**`) and for nothing else.
#[test]
fn code_map_md_has_a_paragraph_for_every_module_and_no_other() {
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).expect("src/lib.rs");
    let mut modules: BTreeSet<&str> = lib
        .lines()
        .filter_map(|line| line.strip_prefix("pub mod "))
        .filter_map(|rest| rest.strip_suffix(';'))
        .collect();
    modules.insert("module_dependencies");
    let map = std::fs::read_to_string(root().join("docs/code-map.md")).expect("code-map.md");
    let described: BTreeSet<&str> = map
        .lines()
        .filter_map(|line| line.strip_prefix("**`"))
        .filter_map(|rest| rest.split_once(".rs`**"))
        .map(|(name, _)| name)
        .collect();
    let missing: Vec<&&str> = modules.difference(&described).collect();
    let unknown: Vec<&&str> = described.difference(&modules).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "docs/code-map.md: no paragraph for {missing:?}; paragraphs for modules that do not exist: {unknown:?}"
    );
}

#[test]
fn the_files_of_a_folder_have_no_cycle() {
    let violations = tree::sibling_cycles(&the_crate());
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn production_code_has_no_glob_import() {
    let violations = tree::glob_imports(&the_crate());
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn the_written_layering_rules_hold() {
    let krate = the_crate();
    let violations: Vec<String> = rules::RULES
        .iter()
        .flat_map(|rule| rules::violations(&krate, rule))
        .collect();
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[track_caller]
fn check_references(code: &str, expected: &[&str]) {
    let (code, _) = source::production_code(code);
    let found: BTreeSet<String> = source::references(&code)
        .into_iter()
        .filter(|r| r.path.first().is_some_and(|root| root == "crate"))
        .filter_map(|r| r.path.get(1).cloned())
        .collect();
    let found: Vec<String> = found.into_iter().collect();
    assert_eq!(found, expected, "in {code:?}");
}

#[test]
fn references_are_read_from_groups_paths_and_production_code_only() {
    check_references("use crate::api::{Pod, Service};", &["api"]);
    check_references(
        "use crate::{\n    client::{self, Target},\n    labels,\n    registry::Registry,\n};",
        &["client", "labels", "registry"],
    );
    check_references(
        "let x = crate::up::say(crate::labels::Set::new());",
        &["labels", "up"],
    );
    check_references(
        "#[arg(value_parser = crate::cli::parse_duration)]",
        &["cli"],
    );
    check_references("/// See [`crate::informer`].\n// crate::bench\n", &[]);
    check_references("use mycrate::api;", &[]);
    check_references(
        "use crate::api;\n\n#[cfg(test)]\nmod tests {\n    use crate::cli::Cli;\n}\nuse crate::labels;\n",
        &["api", "labels"],
    );
    check_references("#[cfg(test)]\nmod fixtures;\nuse crate::api;", &["api"]);
    let (_, test_files) =
        source::production_code("#[cfg(test)]\npub(crate) mod fixtures;\nmod plan;\n");
    assert_eq!(test_files, ["fixtures"]);
}

#[test]
fn a_cycle_is_named_and_the_list_is_bottom_up() {
    let graph = |edges: &[(&str, &[&str])]| -> Graph {
        edges
            .iter()
            .map(|(m, uses)| (m.to_string(), uses.iter().map(|u| u.to_string()).collect()))
            .collect()
    };
    let acyclic = graph(&[
        ("cli", &["kubecfg", "api"]),
        ("kubecfg", &["api"]),
        ("api", &[]),
    ]);
    assert_eq!(find_cycle(&acyclic), None);
    assert_eq!(
        render(&acyclic),
        "api     -> (none)\nkubecfg -> api\ncli     -> api, kubecfg\n"
    );
    let architecture = format!("{SECTION}\n\n```text\n{}```\n", render(&acyclic));
    assert_eq!(documented_graph(&architecture), Some(acyclic));
    let cyclic = graph(&[
        ("cli", &["kubecfg"]),
        ("kubecfg", &["api", "cli"]),
        ("api", &[]),
    ]);
    assert_eq!(
        find_cycle(&cyclic).map(|c| c.join(" -> ")),
        Some("cli -> kubecfg -> cli".to_string())
    );
}
