//! The documentation against the code: the README stays a front page, every docs/ page says what
//! it is, every relative link leads to a file (and heading) that exists, and the protected names
//! in docs/protected-names.md are the code's table, generated (`JAIL_BLESS=1` rewrites them).

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const BEGIN: &str = "<!-- generated: JAIL_BLESS=1 cargo nextest run --test docs -->";
const END: &str = "<!-- end generated -->";

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn docs() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    out.sort();
    out
}

/// The protected names with their reasons, as docs/protected-names.md shows them.
fn protected_tables() -> String {
    let mut out = String::from("| protected name (any depth) | why: what runs it |\n|---|---|\n");
    for p in jail::protect::PROTECTED {
        out += &format!("| `{}` | {} |\n", p.pattern, p.why);
    }
    out += "\n| in every git directory | why |\n|---|---|\n";
    for p in jail::protect::PROTECTED_IN_GIT_DIRS {
        out += &format!("| `{}` | {} |\n", p.pattern, p.why);
    }
    out
}

#[test]
fn the_protected_names_page_is_generated_from_the_code() {
    let path = Path::new(ROOT).join("docs/protected-names.md");
    let text = read(&path);
    let start = text
        .find(BEGIN)
        .expect("the generated block's start marker")
        + BEGIN.len();
    let end = start
        + text[start..]
            .find(END)
            .expect("the generated block's end marker");
    let want = format!("\n{}", protected_tables());
    if text[start..end] == want {
        return;
    }
    if std::env::var_os("JAIL_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, format!("{}{want}{}", &text[..start], &text[end..])).unwrap();
        return;
    }
    let first = want
        .lines()
        .zip(text[start..end].lines())
        .find(|(w, h)| w != h)
        .map_or("(a line added or removed)".to_string(), |(w, h)| {
            format!("want {w}\n  have {h}")
        });
    panic!(
        "docs/protected-names.md differs from PROTECTED and PROTECTED_IN_GIT_DIRS in \
         src/policy/defaults.rs:\n  {first}\nregenerate it with: JAIL_BLESS=1 cargo nextest run \
         --test docs"
    );
}

#[test]
fn the_readme_is_a_front_page() {
    let readme = read(&Path::new(ROOT).join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines < 200,
        "README.md has {lines} lines: the manual goes in docs/"
    );
    // CI (.ci/run) and the first lines of the README run the same test command.
    assert!(
        readme.starts_with("# jail\n\n```sh\ncargo run --locked -- -- sh -c "),
        "README.md must start with its two commands"
    );
    assert!(readme.contains("\ncargo nextest run --locked --features test-hooks\n```\n"));
    let ci = read(&Path::new(ROOT).join(".ci/run"));
    assert!(ci.contains("\ncargo nextest run --locked --features test-hooks\n"));
}

#[test]
fn every_docs_page_starts_with_a_title_and_what_it_covers() {
    for page in docs() {
        let text = read(&page);
        let mut lines = text.lines();
        let title = lines.next().unwrap_or_default();
        assert!(
            title.starts_with("# ") && title.len() > 2,
            "{}: the first line is not a title",
            page.display()
        );
        assert_eq!(lines.next(), Some(""), "{}", page.display());
        assert!(
            lines
                .next()
                .is_some_and(|l| !l.is_empty() && !l.starts_with('#')),
            "{}: no line on what it covers after the title",
            page.display()
        );
    }
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, punctuation but `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// The relative link targets of a markdown text (`[text](target)`), outside code blocks.
fn links(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let tail = &rest[at + 2..];
            let Some(end) = tail.find(')') else { break };
            let target = &tail[..end];
            if !target.contains("://") && !target.starts_with("mailto:") {
                out.push(target.to_string());
            }
            rest = &tail[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_in_the_readme_and_docs_leads_somewhere() {
    let mut pages = docs();
    pages.push(Path::new(ROOT).join("README.md"));
    for page in pages {
        let text = read(&page);
        for target in links(&text) {
            let (file, frag) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            assert!(
                path.exists(),
                "{}: the link {target} leads nowhere",
                page.display()
            );
            if let Some(frag) = frag {
                assert!(
                    anchors(&read(&path)).iter().any(|a| a == frag),
                    "{}: no heading for {target}",
                    page.display()
                );
            }
        }
    }
}
