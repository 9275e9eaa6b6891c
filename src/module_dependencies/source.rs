//! Reading one file's text: the code that counts (no comments, no string contents, no
//! test-only items) and every path it names, with the line and `use` it sits in.
//!
//! This is a lexer, not a parser: it knows comments, string and char literals,
//! `#[cfg(test)]` items (rustfmt's layout: the item closes at the indentation it opened at)
//! and the shape of paths (`a::b`, `a::{b, c::d}`, `a::*`, `a as b`), which is all the
//! layering checks need.

/// A path the code names: `use super::plan::{Plan, Step};` names two.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Reference {
    /// The segments as written, groups expanded, `self` in a group dropped:
    /// `["super", "plan", "Plan"]`; a glob ends in `"*"`.
    pub(super) path: Vec<String>,
    /// The name the path is known by where it is imported (its last segment, or the `as`
    /// alias); only for `use` paths.
    pub(super) imported_as: Option<String>,
    /// The 1-based line of the path (of its item, inside a multi-line group).
    pub(super) line: usize,
    /// The `use` statement that holds it (whitespace collapsed), or the line of an inline path.
    pub(super) text: String,
}

impl Reference {
    pub(super) fn is_glob(&self) -> bool {
        self.path.last().is_some_and(|s| s == "*")
    }

    /// `src/a.rs:3: use crate::b::C;`, and which path of a group is meant.
    pub(super) fn describe(&self, file: &str) -> String {
        format!(
            "src/{file}:{}: {} (names {})",
            self.line,
            self.text,
            self.path.join("::")
        )
    }
}

/// The code of one file that counts, with the same lines as `text`: comments, the contents
/// of string and char literals and test-only items (`#[cfg(test)]` followed by a `mod x {
/// .. }`, a function or any other item) blanked. Also returns the modules it declares as
/// test-only files (`#[cfg(test)] mod x;`).
pub(super) fn production_code(text: &str) -> (String, Vec<String>) {
    let code = blank_comments_and_literals(text);
    let mut out = String::new();
    let mut test_files = Vec::new();
    let mut lines = code.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        out.push('\n');
        // Further attributes of the same item, then the item itself.
        while lines
            .peek()
            .is_some_and(|l| l.trim_start().starts_with("#["))
        {
            lines.next();
            out.push('\n');
        }
        let Some(item) = lines.next() else { break };
        out.push('\n');
        if let Some(name) = module_declaration(item.trim()) {
            test_files.push(name.to_string());
            continue;
        }
        // A signature may span lines: the item's head ends at its `;` or its block's `{`.
        let mut head_end = item;
        while !head_end.trim_end().ends_with([';', '{']) {
            let Some(next) = lines.next() else { break };
            out.push('\n');
            head_end = next;
        }
        if head_end.trim_end().ends_with('{') {
            // rustfmt closes an item's block at the indentation it opened it at.
            let indent = &item[..item.len() - item.trim_start().len()];
            let close = format!("{indent}}}");
            for skipped in lines.by_ref() {
                out.push('\n');
                if skipped.trim_end() == close {
                    break;
                }
            }
        }
    }
    (out, test_files)
}

/// `NAME` of a `mod NAME;` or `pub mod NAME;` line (any visibility).
pub(super) fn module_declaration(line: &str) -> Option<&str> {
    let rest = match line.strip_prefix("pub") {
        Some(rest) if rest.starts_with(' ') => rest.trim_start(),
        Some(rest) if rest.starts_with('(') => rest[rest.find(')')? + 1..].trim_start(),
        _ => line,
    };
    rest.strip_prefix("mod ")?.strip_suffix(';').map(str::trim)
}

/// `text` with comments and the insides of string, byte-string, raw-string and char
/// literals replaced by spaces; newlines are kept, so lines keep their numbers.
fn blank_comments_and_literals(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for b in &mut out[from..to.min(bytes.len())] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let after_ident = at > 0 && is_ident_byte(bytes[at - 1]);
        if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|b| *b == b'\n')
                .map_or(bytes.len(), |n| at + n);
            blank(&mut out, at, end);
            at = end;
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            let mut end = at;
            while end < bytes.len() {
                if bytes[end..].starts_with(b"/*") {
                    depth += 1;
                    end += 2;
                } else if bytes[end..].starts_with(b"*/") {
                    depth -= 1;
                    end += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    end += 1;
                }
            }
            blank(&mut out, at, end);
            at = end;
        } else if !after_ident && (rest.starts_with(b"r\"") || rest.starts_with(b"r#")) {
            let hashes = rest[1..].iter().take_while(|b| **b == b'#').count();
            if rest.get(1 + hashes) != Some(&b'"') {
                at += 1; // `r#ident`
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let open = at + 2 + hashes;
            let end = bytes[open..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(bytes.len(), |n| open + n);
            blank(&mut out, open, end);
            at = end + close.len();
        } else if bytes[at] == b'"' {
            let mut end = at + 1;
            while end < bytes.len() && bytes[end] != b'"' {
                end += if bytes[end] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, at + 1, end);
            at = end + 1;
        } else if bytes[at] == b'\'' {
            // A char literal (`'a'`, `'\n'`, `'"'`, `'é'`) or a lifetime (`'a`), left alone.
            let end = if rest.get(1) == Some(&b'\\') {
                rest[2..]
                    .iter()
                    .position(|b| *b == b'\'')
                    .map(|n| at + 2 + n)
            } else {
                let width = text[at + 1..].chars().next().map_or(1, char::len_utf8);
                (rest.get(1 + width) == Some(&b'\'')).then_some(at + 1 + width)
            };
            match end {
                Some(end) => {
                    blank(&mut out, at + 1, end);
                    at = end + 1;
                }
                None => at += 1,
            }
        } else {
            at += 1;
        }
    }
    String::from_utf8(out).expect("only ASCII bytes replaced, and whole characters")
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Every path `code` (a file's production code) names: the paths of `use` statements,
/// groups expanded, and inline paths of two segments or more (`crate::up::say(..)`,
/// `std::fs::read(..)`, `#[derive(clap::Parser)]`).
pub(super) fn references(code: &str) -> Vec<Reference> {
    let bytes = code.as_bytes();
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(code.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let line_of = |at: usize| line_starts.partition_point(|start| *start <= at);
    let line_text = |line: usize| {
        let start = line_starts[line - 1];
        let end = line_starts.get(line).map_or(code.len(), |next| next - 1);
        collapse(&code[start..end])
    };
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let starts_ident = is_ident_byte(bytes[at])
            && !bytes[at].is_ascii_digit()
            && (at == 0 || !(is_ident_byte(bytes[at - 1]) || bytes[at - 1] == b'\''));
        if !starts_ident {
            at += 1;
            continue;
        }
        let word_end = at
            + bytes[at..]
                .iter()
                .take_while(|b| is_ident_byte(**b))
                .count();
        let after_dot = at > 0 && bytes[at - 1] == b'.';
        if &code[at..word_end] == "use" && bytes.get(word_end) == Some(&b' ') {
            let statement_start = line_starts[line_of(at) - 1];
            let statement_end = code[at..].find(';').map_or(code.len(), |n| at + n + 1);
            let text = collapse_use(&code[statement_start..statement_end]);
            let mut paths = Vec::new();
            let end = use_tree(bytes, word_end + 1, Vec::new(), &mut paths);
            for (path, imported_as, item_at) in paths {
                found.push(Reference {
                    path,
                    imported_as: Some(imported_as),
                    line: line_of(item_at),
                    text: text.clone(),
                });
            }
            at = end.max(word_end);
        } else if !after_dot && bytes[word_end..].starts_with(b"::") {
            let mut paths = Vec::new();
            let end = use_tree(bytes, at, Vec::new(), &mut paths);
            for (path, _, item_at) in paths {
                let line = line_of(item_at);
                found.push(Reference {
                    path,
                    imported_as: None,
                    line,
                    text: line_text(line),
                });
            }
            at = end.max(word_end);
        } else {
            at = word_end;
        }
    }
    found
}

/// Reads the use tree at `at` (a path, `prefix::{..}`, `prefix::*`, `path as name`) onto
/// `out` as (segments, imported name, offset of the item); returns where it ends.
fn use_tree(
    bytes: &[u8],
    mut at: usize,
    mut path: Vec<String>,
    out: &mut Vec<(Vec<String>, String, usize)>,
) -> usize {
    let skip_space = |at: &mut usize| {
        while bytes.get(*at).is_some_and(u8::is_ascii_whitespace) {
            *at += 1;
        }
    };
    skip_space(&mut at);
    let item_at = at;
    loop {
        match bytes.get(at) {
            Some(b'{') => {
                at += 1;
                loop {
                    skip_space(&mut at);
                    match bytes.get(at) {
                        None => return at,
                        Some(b'}') => return at + 1,
                        Some(b',') => at += 1,
                        Some(_) => {
                            let end = use_tree(bytes, at, path.clone(), out);
                            if end == at {
                                return at; // not a use tree after all
                            }
                            at = end;
                        }
                    }
                }
            }
            Some(b'*') => {
                path.push("*".to_string());
                out.push((path, "*".to_string(), item_at));
                return at + 1;
            }
            Some(b) if is_ident_byte(*b) => {
                let end = at
                    + bytes[at..]
                        .iter()
                        .take_while(|b| is_ident_byte(**b))
                        .count();
                path.push(String::from_utf8_lossy(&bytes[at..end]).into_owned());
                at = end;
                if bytes[at..].starts_with(b"::") {
                    at += 2;
                    continue;
                }
                break;
            }
            _ => break,
        }
    }
    if path.is_empty() {
        return at;
    }
    if path.len() > 1 && path.last().is_some_and(|s| s == "self") {
        path.pop();
    }
    let mut imported_as = path.last().cloned().unwrap_or_default();
    let mut after = at;
    skip_space(&mut after);
    if bytes[after..].starts_with(b"as ") {
        after += 3;
        skip_space(&mut after);
        let end = after
            + bytes[after..]
                .iter()
                .take_while(|b| is_ident_byte(**b))
                .count();
        imported_as = String::from_utf8_lossy(&bytes[after..end]).into_owned();
        at = end;
    }
    out.push((path, imported_as, item_at));
    at
}

/// `text` on one line, its whitespace runs as single spaces.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A `use` statement on one line, its groups as rustfmt writes a short one: `a::{b, c}`.
fn collapse_use(text: &str) -> String {
    collapse(text)
        .replace("{ ", "{")
        .replace(" }", "}")
        .replace(",}", "}")
}

#[cfg(test)]
mod tests {
    use super::{production_code, references};

    /// The paths `text` names, as `line: a::b` strings.
    #[track_caller]
    fn check_paths(text: &str, expected: &[&str]) {
        let (code, _) = production_code(text);
        let found: Vec<String> = references(&code)
            .iter()
            .map(|r| format!("{}: {}", r.line, r.path.join("::")))
            .collect();
        assert_eq!(found, expected, "in {text:?}");
    }

    #[test]
    fn paths_are_read_from_use_groups_and_inline_code() {
        check_paths(
            "use crate::{\n    client::{self, Target},\n    labels,\n};",
            &[
                "2: crate::client",
                "2: crate::client::Target",
                "3: crate::labels",
            ],
        );
        check_paths(
            "use super::*;\nuse super::super::x as y;",
            &["1: super::*", "2: super::super::x"],
        );
        check_paths(
            "let x = crate::up::say(v.iter().collect::<Vec<_>>());\n#[derive(clap::Parser)]",
            &["1: crate::up::say", "2: clap::Parser"],
        );
        check_paths("pub(crate) use self::plan::Plan;", &["1: self::plan::Plan"]);
    }

    #[test]
    fn comments_strings_and_test_items_name_nothing() {
        check_paths(
            "/// See [`crate::informer`].\n// crate::bench\n/* tokio::spawn */ let s = \"std::fs\";",
            &[],
        );
        check_paths(
            "let r = r#\"use crate::cli;\"#; let c = '\"'; let q = 'x'; fn f<'a>() { crate::api::x() }",
            &["1: crate::api::x"],
        );
        check_paths(
            "#[cfg(test)]\nmod tests {\n    use crate::cli::Cli;\n}\n#[cfg(test)]\n#[allow(x)]\npub fn f() {\n    tokio::spawn();\n}\nuse crate::labels;",
            &["10: crate::labels"],
        );
        let (_, test_files) =
            production_code("#[cfg(test)]\npub(crate) mod fixtures;\nmod plan;\n");
        assert_eq!(test_files, ["fixtures"]);
    }

    #[test]
    fn a_reference_names_its_use_statement() {
        let code = "use crate::{\n    api,\n    replication_manager::ManagerConfig,\n};\n";
        let found = references(code);
        assert_eq!(
            found[1].describe("replicaset.rs"),
            "src/replicaset.rs:3: use crate::{api, replication_manager::ManagerConfig}; \
             (names crate::replication_manager::ManagerConfig)"
        );
        assert_eq!(found[1].imported_as.as_deref(), Some("ManagerConfig"));
    }
}
