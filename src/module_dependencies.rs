//! Keeps the layering of the crate: the dependency list between the top-level modules
//! (ARCHITECTURE.md, "Module dependencies") must match the code and have no cycle.
//!
//! The graph is read from the source, as text: every `crate::` path in `src/**/*.rs`
//! (`use crate::{a, b::c}` groups and inline `crate::x::y` paths alike) outside comment
//! lines and outside test code (`#[cfg(test)] mod x { .. }` blocks and `#[cfg(test)] mod
//! x;` files) is an edge from the file's top-level module to the one it names. A folder's
//! files belong to their root module (`src/kubecfg/print.rs` is `kubecfg`). `lib.rs` and
//! `main.rs` are the crate's roots, not modules, and are not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module → the modules it uses (itself excluded).
type Graph = BTreeMap<String, BTreeSet<String>>;

const SECTION: &str = "## Module dependencies";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The names of the modules `lib.rs` declares, test-only ones excluded.
fn top_level_modules(lib: &str) -> BTreeSet<String> {
    let mut modules = BTreeSet::new();
    let mut test_only = false;
    for line in lib.lines().map(str::trim) {
        if line == "#[cfg(test)]" {
            test_only = true;
            continue;
        }
        if let Some(name) = module_declaration(line) {
            if !test_only {
                modules.insert(name.to_string());
            }
        }
        test_only = false;
    }
    modules
}

/// `NAME` of a `mod NAME;` or `pub mod NAME;` line (any visibility).
fn module_declaration(line: &str) -> Option<&str> {
    let rest = match line.strip_prefix("pub") {
        Some(rest) if rest.starts_with(' ') => rest.trim_start(),
        Some(rest) if rest.starts_with('(') => rest[rest.find(')')? + 1..].trim_start(),
        _ => line,
    };
    rest.strip_prefix("mod ")?.strip_suffix(';').map(str::trim)
}

/// The code of one file that counts: comment lines and test modules removed. Also
/// returns the names of the modules it declares as test-only files (`#[cfg(test)] mod x;`).
fn production_code(text: &str) -> (String, Vec<String>) {
    let mut code = String::new();
    let mut test_files = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        if trimmed.starts_with("//") {
            continue;
        }
        if trimmed == "#[cfg(test)]" {
            let next = lines.peek().copied().unwrap_or_default();
            if let Some(name) = module_declaration(next.trim()) {
                test_files.push(name.to_string());
                lines.next();
                continue;
            }
            if next.trim_start().contains("mod ") && next.trim_end().ends_with('{') {
                // rustfmt closes an item's block at the indentation it opened it at.
                let indent = &next[..next.len() - next.trim_start().len()];
                let close = format!("{indent}}}");
                for skipped in lines.by_ref() {
                    if skipped.trim_end() == close {
                        break;
                    }
                }
                continue;
            }
        }
        code.push_str(line);
        code.push('\n');
    }
    (code, test_files)
}

/// The first path segment of every `crate::` path in `code`.
fn crate_references(code: &str) -> BTreeSet<String> {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut names = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(is_ident) {
            continue; // `mycrate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            // Split the group at its top-level commas; each item starts with a name.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        names.insert(std::mem::take(&mut item));
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            names.insert(item);
        } else {
            names.insert(rest.chars().take_while(|c| is_ident(*c)).collect());
        }
    }
    names
        .into_iter()
        .map(|item| {
            let item = item.trim_start();
            item.chars()
                .take_while(|c| is_ident(*c))
                .collect::<String>()
        })
        .filter(|name| !name.is_empty() && name != "self")
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

/// The graph of the crate's source under `src`.
fn actual_graph(src: &Path) -> Graph {
    let read = |path: &Path| {
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    };
    let modules = top_level_modules(&read(&src.join("lib.rs")));
    let mut graph: Graph = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    let files = rust_files(src);
    // A test-only file is skipped, and so is everything under its folder.
    let mut skipped: Vec<PathBuf> = Vec::new();
    for path in &files {
        let (_, test_files) = production_code(&read(path));
        let dir = path.with_extension("");
        skipped.extend(test_files.iter().map(|name| dir.join(name)));
    }
    for path in &files {
        let relative = path.strip_prefix(src).expect("under src/");
        let top = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .map(|name| name.trim_end_matches(".rs").to_string())
            .expect("a file name");
        let test_only = skipped
            .iter()
            .any(|s| path.with_extension("").starts_with(s));
        if !modules.contains(&top) || test_only {
            continue;
        }
        let (code, _) = production_code(&read(path));
        let uses: Vec<String> = crate_references(&code)
            .into_iter()
            .filter(|name| *name != top && modules.contains(name))
            .collect();
        graph.entry(top).or_default().extend(uses);
    }
    graph
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
    let graph = actual_graph(&root().join("src"));
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
    let actual = actual_graph(&root().join("src"));
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    assert!(
        documented_graph(&text).as_ref() == Some(&actual),
        "ARCHITECTURE.md's {SECTION:?} (a code block of `module -> uses` lines) differs from \
         the code; the code's graph is:\n{}",
        render(&actual)
    );
}

#[track_caller]
fn check_references(code: &str, expected: &[&str]) {
    let (code, _) = production_code(code);
    let found: Vec<String> = crate_references(&code).into_iter().collect();
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
    let (_, test_files) = production_code("#[cfg(test)]\npub(crate) mod fixtures;\nmod plan;\n");
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
