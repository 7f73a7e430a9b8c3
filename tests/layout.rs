//! The shape of the library, checked on its sources: the Linux layer knows nothing of the
//! command line, no two modules import each other, lib.rs only declares and re-exports, only
//! `protect` knows what is dangerous inside a writable tree, only `platform` picks Linux or
//! macOS, nothing the platforms use imports them back, and outside the layers and the run no
//! module reaches into a layer.
//! A module is a file (`a/b.rs` or `a/b/mod.rs` is `a::b`); an import is any `crate::` or
//! `super::` path outside a `#[cfg(test)] mod tests` block. A parent's use of the children it
//! declares (`mod http;` then `http::serve`) is its structure, not an import, and is not
//! counted; a child naming its parent's items through `super::` is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `linux/launch.rs` is `linux::launch`; `linux/mod.rs` is `linux`; lib.rs and main.rs are ``.
fn module_of(path: &Path) -> Vec<String> {
    let rel = path.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code of a file without its unit tests and comments.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => &text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every module path a file names through `crate::` or `super::`, `{a, b::c}` groups opened.
fn imports(module: &[String], text: &str) -> Vec<Vec<String>> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for (kind, prefix) in [("crate", "crate::"), ("super", "super::")] {
        let mut rest = text;
        while let Some(i) = rest.find(prefix) {
            let before = rest[..i].chars().last();
            rest = &rest[i + prefix.len()..];
            if before.is_some_and(|c| ident(c) || c == ':') {
                continue;
            }
            let base: Vec<String> = match kind {
                "crate" => Vec::new(),
                // In a/b.rs and in a/b/mod.rs (both module a::b) super is a.
                _ => module[..module.len().saturating_sub(1)].to_vec(),
            };
            let take = |s: &str| -> Vec<String> {
                s.split("::")
                    .map(|seg| seg.chars().take_while(|c| ident(*c)).collect::<String>())
                    .take_while(|seg| !seg.is_empty())
                    .collect()
            };
            let end = rest
                .find(|c: char| !(ident(c) || c == ':' || c == '{'))
                .unwrap_or(rest.len());
            let head = &rest[..end];
            if let Some(brace) = head.find('{') {
                let mut prefix_path = base.clone();
                prefix_path.extend(take(head[..brace].trim_end_matches("::")));
                let inner_end = rest[brace..].find('}').map(|j| brace + j).unwrap_or(end);
                for item in rest[brace + 1..inner_end].split(',') {
                    let mut p = prefix_path.clone();
                    p.extend(take(item.trim()));
                    out.push(p);
                }
            } else {
                let mut p = base;
                p.extend(take(head));
                out.push(p);
            }
        }
    }
    out
}

struct Graph {
    modules: BTreeSet<Vec<String>>,
    edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
}

fn graph() -> Graph {
    let mut paths = Vec::new();
    files(&src(), &mut paths);
    let modules: BTreeSet<Vec<String>> = paths.iter().map(|p| module_of(p)).collect();
    let mut edges = BTreeMap::new();
    for p in &paths {
        let m = module_of(p);
        let mut to = BTreeSet::new();
        for import in imports(&m, &code(p)) {
            // The longest module the path names.
            let target = (1..=import.len())
                .rev()
                .map(|n| import[..n].to_vec())
                .find(|c| modules.contains(c));
            if let Some(t) = target.filter(|t| *t != m && !t.is_empty()) {
                to.insert(t);
            }
        }
        edges.insert(m, to);
    }
    Graph { modules, edges }
}

fn name(m: &[String]) -> String {
    m.join("::")
}

/// `"linux::run"` as a module path.
fn path(m: &str) -> Vec<String> {
    m.split("::").map(String::from).collect()
}

#[test]
fn the_linux_layer_imports_nothing_from_the_command_line() {
    let g = graph();
    let bad: Vec<String> = g
        .edges
        .iter()
        .filter(|(m, _)| m.first().is_some_and(|s| s == "linux" || s == "macos"))
        .flat_map(|(m, to)| {
            to.iter()
                .filter(|t| t.first().is_some_and(|s| s == "cli"))
                .map(move |t| format!("{} -> {}", name(m), name(t)))
        })
        .collect();
    assert!(bad.is_empty(), "platform layers import the CLI: {bad:?}");
    // The check sees imports at all: launch does import the supervisor.
    let launch = &g.edges[&path("linux::run::launch")];
    assert!(launch.contains(&path("linux::run::supervisor")));
}

#[test]
fn no_two_modules_import_each_other() {
    let g = graph();
    let mut mutual = Vec::new();
    for (a, to) in &g.edges {
        for b in to {
            if a < b && g.edges.get(b).is_some_and(|back| back.contains(a)) {
                mutual.push(format!("{} <-> {}", name(a), name(b)));
            }
        }
    }
    assert!(
        mutual.is_empty(),
        "modules importing each other: {mutual:?}"
    );
    assert!(g.modules.len() > 40, "the sources were not found");
}

#[test]
fn lib_rs_only_declares_and_re_exports() {
    let text = code(&src().join("lib.rs"));
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        assert!(
            line.starts_with("pub mod ")
                || line.starts_with("mod ")
                || line.starts_with("pub use ")
                || line.starts_with("#["),
            "lib.rs holds more than declarations: {line}"
        );
    }
}

/// What is dangerous inside a writable tree has one owner, `protect`: no other module holds a
/// table of protected names or spells git's layout (what makes a git directory, where a gitfile
/// leads, the key that moves its hooks); they ask `protect`.
#[test]
fn only_protect_holds_the_protected_names_and_git_layouts() {
    let markers = [
        "[protectedname]",
        "protectedname {",
        "fn is_git_layout",
        "\"commondir\"",
        "\"gitdir:\"",
        "\"hookspath\"",
    ];
    let mut paths = Vec::new();
    files(&src(), &mut paths);
    let owner = src().join("protect");
    let found = |p: &Path| -> Vec<&str> {
        let text = code(p).to_lowercase();
        markers
            .iter()
            .copied()
            .filter(|m| text.contains(m))
            .collect()
    };
    let bad: Vec<String> = paths
        .iter()
        .filter(|p| !p.starts_with(&owner))
        .flat_map(|p| {
            found(p)
                .into_iter()
                .map(move |m| format!("{}: {m}", p.display()))
        })
        .collect();
    assert!(bad.is_empty(), "outside protect: {bad:?}");
    // The check sees them where they are.
    let held: BTreeSet<&str> = paths
        .iter()
        .filter(|p| p.starts_with(&owner))
        .flat_map(|p| found(p))
        .collect();
    assert_eq!(held.len(), markers.len(), "protect holds only {held:?}");
}

fn under(m: &[String], prefix: &str) -> bool {
    m.starts_with(&path(prefix))
}

fn is_platform_code(m: &[String]) -> bool {
    under(m, "linux") || under(m, "macos")
}

/// Only `platform` picks Linux or macOS: no other module outside them imports either.
#[test]
fn only_platform_imports_linux_and_macos() {
    let g = graph();
    let bad: Vec<String> = g
        .edges
        .iter()
        .filter(|(m, _)| !is_platform_code(m) && **m != path("platform"))
        .flat_map(|(m, to)| {
            to.iter()
                .filter(|t| is_platform_code(t))
                .map(move |t| format!("{} -> {}", name(m), name(t)))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "only platform may import linux or macos: {bad:?}"
    );
    // The check sees imports at all: platform does import the Linux launch.
    assert!(g.edges[&path("platform")].contains(&path("linux::run::launch")));
}

/// Nothing imports upward into linux (or macos): no module they use, directly or through
/// others, imports them or `platform` back. A shared type lives in a module below both.
#[test]
fn nothing_imports_upward_into_linux_or_macos() {
    let g = graph();
    let mut used: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut todo: Vec<Vec<String>> = g
        .edges
        .iter()
        .filter(|(m, _)| is_platform_code(m))
        .flat_map(|(_, to)| to.iter().cloned())
        .filter(|t| !is_platform_code(t))
        .collect();
    while let Some(m) = todo.pop() {
        if used.insert(m.clone()) {
            todo.extend(g.edges.get(&m).into_iter().flatten().cloned());
        }
    }
    let bad: Vec<String> = used
        .iter()
        .filter(|m| !is_platform_code(m))
        .flat_map(|m| {
            g.edges[m]
                .iter()
                .filter(|t| is_platform_code(t) || **t == path("platform"))
                .map(move |t| format!("{} -> {}", name(m), name(t)))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "used by a platform, importing one back: {bad:?}"
    );
    // The check sees what Linux uses: the report, the store, the probe, the policy file.
    for m in [
        "run_report",
        "workspace::store",
        "probe",
        "policy_file",
        "changes",
    ] {
        assert!(used.contains(&path(m)), "{m} not seen as used by linux");
    }
}

/// No module outside the layers reads a layer's internals: a layer (`linux::layers::X`) is
/// imported by the other layers and by the run that compiles and applies them; every other
/// module uses only what `linux/layers/mod.rs` re-exports.
#[test]
fn only_the_run_reaches_into_a_layer() {
    let g = graph();
    let layer = |t: &[String]| under(t, "linux::layers") && t.len() > 2;
    let bad: Vec<String> = g
        .edges
        .iter()
        .filter(|(m, _)| !under(m, "linux::layers") && !under(m, "linux::run"))
        .flat_map(|(m, to)| {
            to.iter()
                .filter(|t| layer(t))
                .map(move |t| format!("{} -> {}", name(m), name(t)))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "a layer's internals read outside the run: {bad:?}"
    );
    // The check sees layers imported: the supervisor applies seccomp.
    assert!(g.edges[&path("linux::run::supervisor")].contains(&path("linux::layers::seccomp")));
}

/// A file's text with comments, strings and character literals blanked to spaces (newlines
/// kept), so braces and `fn` can be counted without a parser: a `{` inside `"{}"` or a `fn` in
/// a doc line is not code.
fn blank(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = c.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for ch in out.iter_mut().take(to.min(c.len())).skip(from) {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
    };
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let prev_ident = i > 0 && ident(c[i - 1]);
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            let end = (i..c.len()).find(|&j| c[j] == '\n').unwrap_or(c.len());
            blank(&mut out, i, end);
            i = end;
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let (mut depth, mut j) = (1, i + 2);
            while j < c.len() && depth > 0 {
                if c[j] == '/' && c.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 1;
                } else if c[j] == '*' && c.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 1;
                }
                j += 1;
            }
            blank(&mut out, i, j);
            i = j;
        } else if !prev_ident && (c[i] == 'r' || (c[i] == 'b' && c.get(i + 1) == Some(&'r'))) && {
            let s = if c[i] == 'b' { i + 2 } else { i + 1 };
            let hashes = (s..c.len()).take_while(|&j| c[j] == '#').count();
            c.get(s + hashes) == Some(&'"')
        } {
            // A raw string: r"..", r#".."#, br".."; ends at a quote and as many hashes.
            let s = if c[i] == 'b' { i + 2 } else { i + 1 };
            let hashes = (s..c.len()).take_while(|&j| c[j] == '#').count();
            let mut j = s + hashes + 1;
            while j < c.len() && !(c[j] == '"' && (1..=hashes).all(|h| c.get(j + h) == Some(&'#')))
            {
                j += 1;
            }
            blank(&mut out, i, j + hashes + 1);
            i = j + hashes + 1;
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if c[i] == '\'' && c.get(i + 1) == Some(&'\\') {
            let j = (i + 3..c.len()).find(|&j| c[j] == '\'').unwrap_or(c.len());
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            blank(&mut out, i, i + 3);
            i += 3;
        } else {
            i += 1;
        }
    }
    out.into_iter().collect()
}

/// The index of the `}` closing the `{` at `open`.
fn closing(code: &[char], open: usize) -> usize {
    let mut depth = 0;
    for (j, ch) in code.iter().enumerate().skip(open) {
        match ch {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    code.len()
}

fn line_at(code: &[char], at: usize) -> usize {
    code[..at.min(code.len())]
        .iter()
        .filter(|c| **c == '\n')
        .count()
        + 1
}

/// A file's code without its `#[cfg(test)]` modules (blanked, lines kept), and how many lines
/// those modules took.
fn non_test(path: &Path) -> (Vec<char>, usize) {
    let mut code: Vec<char> = blank(&std::fs::read_to_string(path).unwrap())
        .chars()
        .collect();
    let text: String = code.iter().collect();
    let mut test_lines = 0;
    let mut from = 0;
    while let Some(k) = text[from..].find("#[cfg(test)]").map(|k| k + from) {
        from = k + 1;
        let after = text[k + "#[cfg(test)]".len()..].trim_start();
        let Some(rest) = after.strip_prefix("mod ") else {
            continue;
        };
        let Some(brace) = rest
            .find(['{', ';'])
            .filter(|b| rest.as_bytes()[*b] == b'{')
        else {
            continue;
        };
        // Byte offsets equal char offsets only for ASCII text before them; use chars.
        let open_byte = text.len() - rest.len() + brace;
        let open = text[..open_byte].chars().count();
        let close = closing(&code, open);
        let start = text[..k].chars().count();
        test_lines += line_at(&code, close) - line_at(&code, start) + 1;
        for ch in code.iter_mut().take(close + 1).skip(start) {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
    }
    (code, test_lines)
}

/// Every function with a body in a file's non-test code: its name, first line and length in
/// lines (from `fn` to its closing brace).
fn functions(code: &[char]) -> Vec<(String, usize, usize)> {
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut out = Vec::new();
    let mut i = 0;
    while i + 3 < code.len() {
        let starts = code[i] == 'f'
            && code[i + 1] == 'n'
            && code[i + 2].is_whitespace()
            && (i == 0 || !ident(code[i - 1]));
        if !starts {
            i += 1;
            continue;
        }
        let name: String = code[i + 3..]
            .iter()
            .skip_while(|c| c.is_whitespace())
            .take_while(|c| ident(**c))
            .collect();
        let body = (i..code.len()).find(|&j| code[j] == '{' || code[j] == ';');
        if let Some(open) = body.filter(|&j| code[j] == '{') {
            let close = closing(code, open);
            let first = line_at(code, i);
            out.push((name, first, line_at(code, close) - first + 1));
        }
        i += 3;
    }
    out
}

/// Longer functions and files kept on purpose, each with why. The test prints them. An entry
/// names the end of a path under src/ (so a file moved to a subfolder keeps its entry) and, for
/// a function, its name after `: `.
const LONG_ALLOWED: &[(&str, &str)] = &[(
    "seccomp.rs: syscall_number",
    "a table of syscall names to numbers, one line each: splitting it would only scatter it",
)];

fn allowed_entry(key: &str) -> Option<&'static (&'static str, &'static str)> {
    LONG_ALLOWED
        .iter()
        .find(|(k, _)| key == *k || key.ends_with(&format!("/{k}")))
}

fn allowed(key: &str) -> Option<&'static str> {
    allowed_entry(key).map(|(_, why)| *why)
}

/// The sources as (path relative to src/, non-test code, test lines, total lines); files named
/// tests.rs are all tests.
fn sources() -> Vec<(String, Vec<char>, usize, usize)> {
    let mut paths = Vec::new();
    files(&src(), &mut paths);
    paths.sort();
    paths
        .iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "tests.rs"))
        .map(|p| {
            let rel = p.strip_prefix(src()).unwrap().display().to_string();
            let total = std::fs::read_to_string(p).unwrap().lines().count();
            let (code, test_lines) = non_test(p);
            (rel, code, test_lines, total)
        })
        .collect()
}

/// What is over a limit and not allowed; what is over it and allowed is printed with its reason.
fn over(found: Vec<(String, usize)>, limit: usize, what: &str) -> Vec<String> {
    let mut bad = Vec::new();
    for (key, len) in found.into_iter().filter(|(_, len)| *len > limit) {
        match allowed(&key) {
            Some(why) => println!("allowed {what} {key} ({len} lines): {why}"),
            None => bad.push(format!("{key} ({len} lines)")),
        }
    }
    bad
}

/// A function is read whole: over 100 lines it answers more than one question, and each part
/// belongs in a helper named for what it answers. Counted from `fn` to its closing brace, in
/// every module's non-test code.
#[test]
fn no_function_is_over_100_lines() {
    let found: Vec<(String, usize)> = sources()
        .iter()
        .flat_map(|(rel, code, _, _)| {
            functions(code)
                .into_iter()
                .map(move |(name, _, len)| (format!("{rel}: {name}"), len))
        })
        .collect();
    assert!(found.len() > 500, "the functions were not found");
    let bad = over(found, 100, "function");
    assert!(bad.is_empty(), "functions over 100 lines: {bad:#?}");
}

/// A file is read whole too: over 800 lines without its unit tests, it holds more than one
/// module's worth and its parts belong in sibling modules.
#[test]
fn no_file_is_over_800_lines_without_its_tests() {
    let found: Vec<(String, usize)> = sources()
        .into_iter()
        .map(|(rel, _, test_lines, total)| (rel, total - test_lines))
        .collect();
    let bad = over(found, 800, "file");
    assert!(
        bad.is_empty(),
        "files over 800 lines without tests: {bad:#?}"
    );
}

/// The allow-list only shrinks: an entry for a function or file now under its limit (or gone)
/// is taken out, so it cannot grow back unseen.
#[test]
fn every_allowed_long_item_is_still_long() {
    let mut long = Vec::new();
    for (rel, code, test_lines, total) in sources() {
        if total - test_lines > 800 {
            long.push(rel.clone());
        }
        for (name, _, len) in functions(&code) {
            if len > 100 {
                long.push(format!("{rel}: {name}"));
            }
        }
    }
    let stale: Vec<&str> = LONG_ALLOWED
        .iter()
        .filter(|entry| !long.iter().any(|key| allowed_entry(key) == Some(*entry)))
        .map(|(k, _)| *k)
        .collect();
    assert!(stale.is_empty(), "allowed but no longer long: {stale:?}");
}

/// The measures see what they measure: a brace in a string or comment is not counted, a test
/// module is not code, a function's length runs from `fn` to its closing brace.
#[test]
fn the_measures_count_code_only() {
    let text = "fn a() {\n    let s = \"{\"; // }\n    let c = '{';\n}\n\
                fn b<'x>(v: &'x str) -> &'x str {\n    r#\"}\"#;\n    v\n}\n\
                #[cfg(test)]\nmod tests {\n    fn t() {\n    }\n}\n";
    let dir = std::env::temp_dir().join(format!("layout-measure-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("m.rs");
    std::fs::write(&file, text).unwrap();
    let (code, test_lines) = non_test(&file);
    std::fs::remove_dir_all(&dir).unwrap();
    let fns: Vec<(String, usize)> = functions(&code)
        .into_iter()
        .map(|(n, _, len)| (n, len))
        .collect();
    assert_eq!(fns, [("a".to_string(), 4), ("b".to_string(), 4)]);
    assert_eq!(test_lines, 5);
}
