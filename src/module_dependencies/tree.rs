//! The crate as a graph of files: each production file is a node, each path it names that
//! resolves to another file of the crate is an edge. The checks over it (no cycle between
//! the files of a folder, no glob import) are pure functions of the files' text.

use std::collections::{BTreeMap, BTreeSet};

use super::source::{production_code, references, Reference};
use super::{find_cycle, Graph};

/// One production file of the crate.
pub(super) struct SourceFile {
    /// Its path under `src/`, `/`-separated: `kubecfg/describe.rs`.
    pub(super) path: String,
    /// Its module: `["kubecfg", "describe"]`; `[]` for the crate roots `lib.rs` and `main.rs`.
    pub(super) module: Vec<String>,
    /// The first component of its path: its top-level module, or `lib`/`main` for the roots.
    pub(super) top: String,
    /// Its code that counts (see [`production_code`]).
    pub(super) code: String,
    /// The paths its code names.
    pub(super) references: Vec<Reference>,
}

/// A reference from one file to another file of the crate.
pub(super) struct Edge<'a> {
    pub(super) from: &'a SourceFile,
    pub(super) to: &'a SourceFile,
    pub(super) reference: &'a Reference,
}

/// The crate's production files and which file defines which module.
pub(super) struct Crate {
    pub(super) files: Vec<SourceFile>,
    by_module: BTreeMap<Vec<String>, usize>,
}

/// How many re-exports of an ancestor's file [`Crate::resolve_through_ancestors`] follows.
const MAX_REEXPORT_HOPS: usize = 8;

impl Crate {
    /// The crate from its files as (path under `src/`, text) pairs. Test-only files (`x`
    /// of a `#[cfg(test)] mod x;`) and everything under their folders are left out.
    pub(super) fn new(sources: &[(String, String)]) -> Crate {
        let mut files = Vec::new();
        let mut test_only = Vec::new();
        for (path, text) in sources {
            let (code, test_files) = production_code(text);
            let module = module_of(path);
            test_only.extend(test_files.into_iter().map(|name| {
                let mut child = module.clone();
                child.push(name);
                child
            }));
            let top = path
                .split(['/', '.'])
                .next()
                .unwrap_or_default()
                .to_string();
            files.push(SourceFile {
                path: path.clone(),
                module,
                top,
                references: references(&code),
                code,
            });
        }
        files.retain(|file| {
            !test_only
                .iter()
                .any(|test| !test.is_empty() && file.module.starts_with(test))
        });
        let by_module = files
            .iter()
            .enumerate()
            .filter(|(_, file)| file.path != "main.rs")
            .map(|(i, file)| (file.module.clone(), i))
            .collect();
        Crate { files, by_module }
    }

    /// The file that defines `module`.
    pub(super) fn file(&self, module: &[String]) -> Option<&SourceFile> {
        self.by_module.get(module).map(|i| &self.files[*i])
    }

    /// The file `path` names from `file`, and the rest of the path inside that file: the
    /// longest prefix of the path that is a module of the crate. A glob names the module it
    /// globs. `None` for paths outside the crate and for the crate root's own items.
    pub(super) fn resolve<'a>(
        &'a self,
        file: &SourceFile,
        path: &[String],
    ) -> Option<(&'a SourceFile, Vec<String>)> {
        if file.path == "main.rs" {
            return None; // its `crate` is the binary
        }
        let path = match path.split_last() {
            Some((last, init)) if last == "*" => init,
            _ => path,
        };
        let first = path.first()?;
        let (mut absolute, rest) = match first.as_str() {
            "crate" => (Vec::new(), &path[1..]),
            "self" => (file.module.clone(), &path[1..]),
            "super" => {
                let supers = path.iter().take_while(|s| *s == "super").count();
                let depth = file.module.len().checked_sub(supers)?;
                (file.module[..depth].to_vec(), &path[supers..])
            }
            // Since Rust 2018 a child module is named without `self::`.
            child
                if self
                    .file(&[&file.module[..], &[child.to_string()]].concat())
                    .is_some() =>
            {
                (file.module.clone(), path)
            }
            _ => return None,
        };
        absolute.extend(rest.iter().cloned());
        (1..=absolute.len()).rev().find_map(|n| {
            self.file(&absolute[..n])
                .map(|target| (target, absolute[n..].to_vec()))
        })
    }

    /// Like [`Crate::resolve`], but an item of an ancestor's file that the ancestor imports
    /// (`use super::Plan` where the parent has `pub use self::plan::Plan`) resolves to the
    /// file it comes from: a child using its parent's re-export uses the re-exported file.
    fn resolve_through_ancestors<'a>(
        &'a self,
        file: &SourceFile,
        path: &[String],
    ) -> Option<&'a SourceFile> {
        let (mut target, mut rest) = self.resolve(file, path)?;
        for _ in 0..MAX_REEXPORT_HOPS {
            let is_ancestor =
                file.module.starts_with(&target.module) && target.module != file.module;
            let Some(item) = rest.first().filter(|_| is_ancestor) else {
                break;
            };
            let Some(import) = target
                .references
                .iter()
                .find(|r| r.imported_as.as_ref() == Some(item) && !r.is_glob())
            else {
                break;
            };
            let mut through = import.path.clone();
            through.extend(rest[1..].iter().cloned());
            let Some(next) = self.resolve(target, &through) else {
                break;
            };
            (target, rest) = next;
        }
        Some(target)
    }

    /// Every reference from a file of the crate to another file of the crate.
    pub(super) fn edges(&self) -> Vec<Edge<'_>> {
        let mut edges = Vec::new();
        for from in &self.files {
            for reference in &from.references {
                let Some(to) = self.resolve_through_ancestors(from, &reference.path) else {
                    continue;
                };
                if to.path != from.path {
                    edges.push(Edge {
                        from,
                        to,
                        reference,
                    });
                }
            }
        }
        edges
    }

    /// The top-level modules and which ones each uses.
    pub(super) fn top_level_graph(&self) -> Graph {
        let mut graph: Graph = self
            .files
            .iter()
            .filter(|file| file.module.len() == 1)
            .map(|file| (file.top.clone(), BTreeSet::new()))
            .collect();
        for edge in self.edges() {
            if !edge.from.module.is_empty() && edge.from.top != edge.to.top {
                graph
                    .entry(edge.from.top.clone())
                    .or_default()
                    .insert(edge.to.top.clone());
            }
        }
        graph
    }
}

/// The module a file under `src/` defines: `a/b.rs` and `a/b/mod.rs` are `a::b`.
fn module_of(path: &str) -> Vec<String> {
    let mut module: Vec<String> = path
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if matches!(module.as_slice(), [root] if root == "lib" || root == "main")
        || module.last().is_some_and(|last| last == "mod")
    {
        module.pop();
    }
    module
}

/// A cycle between the files of one folder: for each folder (a module with child modules),
/// its children are the nodes and a file under child `x` naming a file under child `y` is
/// an edge `x -> y`. A child using its parent's (or any ancestor's) items is not an edge.
/// The crate root's children, the top-level modules, are checked by the module graph.
///
/// Each violation names the folder, the cycle, and for each of its edges the `use` that
/// makes it.
pub(super) fn sibling_cycles(krate: &Crate) -> Vec<String> {
    // folder → child → child → the references that make the edge
    type Edges<'a> = BTreeMap<String, BTreeMap<String, Vec<Edge<'a>>>>;
    let mut folders: BTreeMap<Vec<String>, Edges<'_>> = BTreeMap::new();
    for edge in krate.edges() {
        let (from, to) = (&edge.from.module, &edge.to.module);
        let shared = from.iter().zip(to).take_while(|(a, b)| a == b).count();
        if shared == 0 || shared == from.len() || shared == to.len() {
            continue; // across top-level modules, or to an ancestor or a descendant
        }
        folders
            .entry(from[..shared].to_vec())
            .or_default()
            .entry(from[shared].clone())
            .or_default()
            .entry(to[shared].clone())
            .or_default()
            .push(edge);
    }
    let mut violations = Vec::new();
    for (folder, edges) in &folders {
        let graph: Graph = edges
            .iter()
            .map(|(child, uses)| (child.clone(), uses.keys().cloned().collect()))
            .collect();
        let Some(cycle) = find_cycle(&graph) else {
            continue;
        };
        let name = |child: &String| {
            let mut module = folder.clone();
            module.push(child.clone());
            krate
                .file(&module)
                .map_or(child.clone(), |f| f.path.clone())
        };
        let mut message = format!(
            "cycle between the files of src/{}/: {}",
            folder.join("/"),
            cycle.iter().map(name).collect::<Vec<_>>().join(" -> ")
        );
        for pair in cycle.windows(2) {
            for edge in &edges[&pair[0]][&pair[1]] {
                let at = edge.reference.describe(&edge.from.path);
                message.push_str(&format!("\n    {at} -> src/{}", edge.to.path));
            }
        }
        violations.push(message);
    }
    violations
}

/// Every glob import (`use x::*`) in production code, by file and line. There is no
/// exception: a glob hides which file uses which, and kcm's production code has none (not
/// even `use Enum::*` for an enum's variants, which tests use freely).
pub(super) fn glob_imports(krate: &Crate) -> Vec<String> {
    krate
        .files
        .iter()
        .flat_map(|file| {
            file.references
                .iter()
                .filter(|r| r.is_glob())
                .map(|r| format!("glob import: {}", r.describe(&file.path)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{glob_imports, sibling_cycles, Crate};

    fn krate(files: &[(&str, &str)]) -> Crate {
        let files: Vec<(String, String)> = files
            .iter()
            .map(|(path, text)| (path.to_string(), text.to_string()))
            .collect();
        Crate::new(&files)
    }

    /// The crate's file edges as `from -> to` lines.
    #[track_caller]
    fn check_edges(files: &[(&str, &str)], expected: &[&str]) {
        let krate = krate(files);
        let found: Vec<String> = krate
            .edges()
            .iter()
            .map(|e| format!("{} -> {}", e.from.path, e.to.path))
            .collect();
        assert_eq!(found, expected);
    }

    #[test]
    fn paths_resolve_to_the_file_of_the_module_they_name() {
        check_edges(
            &[
                ("lib.rs", "pub mod a;\npub mod b;\n#[cfg(test)]\nmod t;"),
                ("a.rs", "mod x;\nmod y;\npub use y::Y;\nuse crate::b::c::{self, C};"),
                ("a/x.rs", "use super::super::b::B;\nuse super::*;\nuse super::Y;\nfn f() { self::z::g() }\nmod z;"),
                ("a/x/z.rs", "pub fn g() { crate::a::y::Y::new(); }"),
                ("a/y.rs", "pub struct Y;"),
                ("b.rs", "pub mod c;\npub struct B;"),
                ("b/c.rs", "use tokio::spawn;"),
                ("t.rs", "use crate::a::x;"),
            ],
            &[
                "a.rs -> a/y.rs",
                "a.rs -> b/c.rs",
                "a.rs -> b/c.rs",
                "a/x.rs -> b.rs",
                "a/x.rs -> a.rs",
                "a/x.rs -> a/y.rs",
                "a/x.rs -> a/x/z.rs",
                "a/x/z.rs -> a/y.rs",
            ],
        );
    }

    #[test]
    fn a_cycle_between_sibling_files_names_its_uses() {
        let cycle = krate(&[
            ("kubecfg.rs", "mod a;\nmod b;\nmod c;\npub use self::b::B;"),
            ("kubecfg/a.rs", "use super::b::B;\npub struct A;"),
            ("kubecfg/b.rs", "use super::c;\npub struct B;"),
            ("kubecfg/c.rs", "use super::{a::A, B};\n"),
        ]);
        assert_eq!(
            sibling_cycles(&cycle),
            [
                "cycle between the files of src/kubecfg/: kubecfg/a.rs -> kubecfg/b.rs \
              -> kubecfg/c.rs -> kubecfg/a.rs\
              \n    src/kubecfg/a.rs:1: use super::b::B; (names super::b::B) -> src/kubecfg/b.rs\
              \n    src/kubecfg/b.rs:1: use super::c; (names super::c) -> src/kubecfg/c.rs\
              \n    src/kubecfg/c.rs:1: use super::{a::A, B}; (names super::a::A) -> src/kubecfg/a.rs"
            ]
        );
        // A child using its parent, and the parent its children, is no cycle.
        let layered = krate(&[
            (
                "kubecfg.rs",
                "mod a;\nmod b;\npub use self::a::A;\nstruct Shared;",
            ),
            ("kubecfg/a.rs", "use super::Shared;\npub struct A;"),
            ("kubecfg/b.rs", "use super::{A, Shared};\n"),
        ]);
        assert_eq!(sibling_cycles(&layered), Vec::<String>::new());
    }

    #[test]
    fn a_cycle_through_sibling_folders_and_through_a_reexport_counts() {
        let cycle = krate(&[
            ("api.rs", "mod a;\nmod b;\npub use b::deep::Deep;"),
            ("api/a.rs", "use super::Deep;\npub struct A;"),
            ("api/b.rs", "pub mod deep;"),
            ("api/b/deep.rs", "pub struct Deep(crate::api::a::A);"),
        ]);
        let violations = sibling_cycles(&cycle);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(
            violations[0].starts_with(
                "cycle between the files of src/api/: api/a.rs -> api/b.rs -> api/a.rs"
            ),
            "{violations:?}"
        );
        assert!(violations[0]
            .contains("src/api/a.rs:1: use super::Deep; (names super::Deep) -> src/api/b/deep.rs"));
        assert!(violations[0].contains("src/api/b/deep.rs:1: pub struct Deep(crate::api::a::A);"));
    }

    #[test]
    fn a_glob_import_is_named_with_its_line() {
        let globs = krate(&[
            (
                "api.rs",
                "mod kinds;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}",
            ),
            ("api/kinds.rs", "use crate::labels::Set;\nuse super::*;\n"),
        ]);
        assert_eq!(
            glob_imports(&globs),
            ["glob import: src/api/kinds.rs:2: use super::*; (names super::*)"]
        );
    }
}
