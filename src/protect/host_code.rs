//! Where the host will run code from in a tree, as the host's own git configuration says: the
//! one owner of that question for both writable modes (`--rw`'s after-run check and `--cow`'s
//! flags).
//!
//! A file is dangerous because of how the host will use it, not because of its name: git runs
//! the hooks in the directory `core.hooksPath` names (`.husky`, or `tools/hooks`, whatever it is
//! called), reads a work-tree file that `include.path` names as configuration (which may set
//! `core.fsmonitor`, run on every `git status`), runs a command a config value names by path
//! (`core.fsmonitor = ./scripts/watch`, an alias `!./tools/x`), and follows a hook that is a
//! symlink (`.git/hooks/pre-commit -> ../../scripts/pre-commit`) to a work-tree file. The
//! repositories asked are the tree's own and every one that holds it; the configs read are the
//! repository's (`config`, `config.worktree`), the user's (`/etc/gitconfig`, XDG, `~/.gitconfig`)
//! and what they include, three levels deep.

use std::path::{Path, PathBuf};

use super::gitconfig::{self, Entry};

/// One place the host runs code from: the path (absolute; a file, or a directory whose every
/// entry counts) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub path: PathBuf,
    pub why: String,
}

/// How config files are read: the host's as they are, or a tree as an apply would leave it.
pub type Reader<'r> = &'r dyn Fn(&Path) -> Option<String>;

/// The host's own reading: a regular file, at most 1 MiB, never through a FIFO.
pub fn host_reader(path: &Path) -> Option<String> {
    gitconfig::read_small(path).ok()
}

/// Includes followed this deep (git follows 10; three covers every layout seen, and a deeper
/// chain only adds places).
const MAX_DEPTH: usize = 3;

/// The places the host's git runs code from for the work tree at `tree` (its repository and
/// every repository that holds it), with config files read through `read`.
pub fn places(tree: &Path, home: Option<&Path>, read: Reader<'_>) -> Vec<Place> {
    let mut out = Vec::new();
    for dir in tree.ancestors() {
        for gitdir in super::git::git_dirs_behind(&dir.join(".git")) {
            repository_places(&gitdir, dir, home, read, &mut out);
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out.dedup_by(|a, b| a.path == b.path);
    out
}

/// The places of a repository inside a tree (a nested clone, a submodule, a linked worktree):
/// the one its `.git` entry `dotgit` (a directory or a gitfile) leads to, relative values
/// resolved against the directory that holds `dotgit`.
pub fn nested_places(dotgit: &Path, home: Option<&Path>, read: Reader<'_>) -> Vec<Place> {
    let mut out = Vec::new();
    let Some(worktree) = dotgit.parent() else {
        return out;
    };
    for gitdir in super::git::git_dirs_behind(dotgit) {
        repository_places(&gitdir, worktree, home, read, &mut out);
    }
    out
}

/// The places of one repository: `gitdir` with its work tree at `worktree`.
fn repository_places(
    gitdir: &Path,
    worktree: &Path,
    home: Option<&Path>,
    read: Reader<'_>,
    out: &mut Vec<Place>,
) {
    let mut files: Vec<(PathBuf, usize)> = vec![
        (gitdir.join("config"), 0),
        (gitdir.join("config.worktree"), 0),
    ];
    files.extend(gitconfig::global_files(home).into_iter().map(|f| (f, 0)));
    let mut hook_dirs: Vec<PathBuf> = Vec::new();
    let mut seen = Vec::new();
    while let Some((file, depth)) = files.pop() {
        if seen.contains(&file) || seen.len() > 64 {
            continue;
        }
        seen.push(file.clone());
        let Some(text) = read(&file) else { continue };
        let entries = gitconfig::parse(&text);
        for inc in gitconfig::includes(&entries, &file, home) {
            out.push(Place {
                path: inc.clone(),
                why: format!(
                    "a file git reads as configuration (included by {})",
                    file.display()
                ),
            });
            if depth < MAX_DEPTH {
                files.push((inc, depth + 1));
            }
        }
        for e in &entries {
            if e.section == "core" && e.key == "hookspath" {
                if let Some(dir) = gitconfig::expand(&e.value, worktree, home) {
                    hook_dirs.push(dir.clone());
                    out.push(Place {
                        path: dir,
                        why: "the directory core.hooksPath names: git runs the hooks there".into(),
                    });
                }
            } else if let Some(why) = command_value(e) {
                out.extend(
                    named_paths(&e.value, worktree, home)
                        .into_iter()
                        .map(|path| Place {
                            path,
                            why: why.clone(),
                        }),
                );
            }
        }
    }
    if hook_dirs.is_empty() {
        hook_dirs.push(gitdir.join("hooks"));
        out.push(Place {
            path: gitdir.join("hooks"),
            why: "git's hooks directory".into(),
        });
    }
    hook_places(&hook_dirs, worktree, home, read, out);
}

/// Where the hooks in `hook_dirs` lead: a hooks directory that is a symlink, hooks in it that
/// are, and the work-tree scripts a hook runs.
fn hook_places(
    hook_dirs: &[PathBuf],
    worktree: &Path,
    home: Option<&Path>,
    read: Reader<'_>,
    out: &mut Vec<Place>,
) {
    // A hooks directory that is a symlink, or hooks in it that are: git follows them to files
    // elsewhere, perhaps in the work tree.
    for dir in hook_dirs {
        let dir = dir.as_path();
        let real = crate::paths::real_path(dir);
        if real != dir {
            out.push(Place {
                path: real.clone(),
                why: format!("where the hooks directory {} leads", dir.display()),
            });
        }
        for e in std::fs::read_dir(&real)
            .into_iter()
            .flatten()
            .flatten()
            .take(256)
        {
            let hook = e.path();
            if e.file_type().is_ok_and(|t| t.is_symlink()) {
                if let Ok(target) = std::fs::canonicalize(&hook) {
                    out.push(Place {
                        path: target,
                        why: format!("where the hook {} leads: git runs it", hook.display()),
                    });
                }
            }
            // A hook that runs a work-tree script (`exec ./tools/pre-commit.sh`, a hook
            // manager's `. "$(dirname "$0")/_/husky.sh"`): git runs hooks in the work tree.
            if hook.extension().is_some_and(|x| x == "sample") {
                continue;
            }
            if let Some(text) = read(&hook) {
                out.extend(
                    script_paths(&text, &[worktree, &real], home)
                        .into_iter()
                        .map(|path| Place {
                            path,
                            why: format!("named by the hook {}: git runs it", hook.display()),
                        }),
                );
            }
        }
    }
}

/// The paths a script's (or a tool's configuration's) words name: every word with a `/` in it,
/// relative to each of `bases` (a hook runs in the work tree, and names files beside itself
/// with `$(dirname "$0")/x`); a word that starts with an expansion (`$(git rev-parse
/// --show-toplevel)/x`, `${ROOT}/x`) is taken from its first `/` after it, as relative too.
pub fn script_paths(text: &str, bases: &[&Path], home: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let split = |c: char| {
        c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | '`' | '"' | '\'' | '<' | '>')
    };
    // A script named by its bare name (`node check.js`, `bash lint.sh`): the shell finds it
    // relative to where it runs.
    let script = |w: &str| {
        Path::new(w).extension().is_some_and(|x| {
            matches!(
                x.to_str(),
                Some(
                    "sh" | "bash"
                        | "zsh"
                        | "js"
                        | "mjs"
                        | "cjs"
                        | "ts"
                        | "mts"
                        | "py"
                        | "rb"
                        | "pl"
                )
            )
        })
    };
    for w in text.split(split) {
        if (!w.contains('/') && !script(w)) || w.contains("://") {
            continue;
        }
        // A glob (`tools/hooks.d/*.sh`, what a loop runs): the directory it lists.
        let (w, glob) = match w.find(['*', '?', '[']) {
            Some(i) => match w[..i].rfind('/') {
                Some(j) => (&w[..j], true),
                None => continue,
            },
            None => (w, false),
        };
        // Quotes and a key's `=` around a path (`--require=./x`, `"./x",`).
        let w = w.rsplit('=').next().unwrap_or(w);
        let w =
            w.trim_matches(|c: char| matches!(c, '"' | '\'' | ',' | '[' | ']' | '{' | '}' | ':'));
        for base in bases {
            let named = match w.rfind(['}', ')']) {
                Some(i) => {
                    let rest = w[i + 1..].trim_start_matches('/');
                    (!rest.is_empty()).then(|| base.join(rest))
                }
                None => gitconfig::expand(w, base, home),
            };
            let Some(named) = named.map(|p| crate::paths::absolute(Path::new("/"), &p)) else {
                continue;
            };
            // A word that names the tree itself or a directory in it (`prettier --write ./`,
            // `safe.directory = /repo`, a `cd`) is where something runs, not what runs: taken
            // whole it would flag every file. A glob's directory is what a loop runs.
            let whole = bases.iter().any(|b| b.starts_with(&named));
            if whole || (!glob && named.is_dir()) {
                continue;
            }
            out.push(named);
        }
    }
    out.truncate(1024);
    out
}

/// Why a config entry's value may name a file git (or a tool it starts) runs or reads. Every
/// key may: git grows keys that run commands (`core.fsmonitor`, aliases, filters, credential
/// helpers, `interactive.diffFilter`, `trailer.*.cmd`, `core.alternateRefsCommand`,
/// `lfs.customtransfer.*`, tools' own sections), and a list would miss the next one. A value
/// that names a path that is not a program only makes a change at exactly that path flagged.
fn command_value(e: &Entry) -> Option<String> {
    Some(format!(
        "named by git's configuration ({}.{}): git runs or reads it",
        e.section, e.key
    ))
}

/// The words of a command value that name a path (`./x`, `tools/x`, `/abs/x`, `~/x`,
/// `$(git rev-parse --show-toplevel)/x`), as the shell git starts would find them: relative to
/// the work tree, where git runs them.
fn named_paths(value: &str, worktree: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    script_paths(value, &[worktree], home)
}

/// The place `path` is (or is beneath), if any.
pub fn place_of<'p>(places: &'p [Place], path: &Path) -> Option<&'p Place> {
    places.iter().find(|p| path.starts_with(&p.path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(config: &str) -> (tempdir::Dir, Vec<Place>) {
        let d = tempdir::Dir::new();
        std::fs::create_dir_all(d.0.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(d.0.join(".git/objects")).unwrap();
        std::fs::create_dir_all(d.0.join(".git/refs")).unwrap();
        std::fs::write(d.0.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(d.0.join(".git/config"), config).unwrap();
        let places = super::places(&d.0, Some(Path::new("/nonexistent-home")), &host_reader);
        (d, places)
    }

    mod tempdir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                use std::sync::atomic::{AtomicUsize, Ordering};
                static N: AtomicUsize = AtomicUsize::new(0);
                let p = std::env::temp_dir().join(format!(
                    "jail-host-code-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                let _ = std::fs::remove_dir_all(&p);
                std::fs::create_dir_all(&p).unwrap();
                Dir(std::fs::canonicalize(&p).unwrap())
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn hooks_path_includes_command_paths_and_hook_links_are_places() {
        let (d, _) = repo("");
        std::fs::create_dir_all(d.0.join("scripts")).unwrap();
        std::fs::write(d.0.join("scripts/pre-commit"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink(
            "../../scripts/pre-commit",
            d.0.join(".git/hooks/pre-commit"),
        )
        .unwrap();
        std::fs::write(
            d.0.join("team.gitconfig"),
            "[core]\n\tfsmonitor = ./tools/watch\n",
        )
        .unwrap();
        std::fs::write(
            d.0.join(".git/config"),
            "[core]\n\thooksPath = .husky\n[include]\n\tpath = ../team.gitconfig\n[alias]\n\tx = !sh ./bin/x.sh\n",
        )
        .unwrap();
        let places = places(&d.0, Some(Path::new("/nonexistent-home")), &host_reader);
        let at = |rel: &str| place_of(&places, &d.0.join(rel)).map(|p| p.why.clone());
        assert!(at(".husky/pre-commit").unwrap().contains("hooksPath"));
        assert!(at("team.gitconfig").unwrap().contains("configuration"));
        assert!(at("tools/watch").unwrap().contains("core.fsmonitor"));
        assert!(at("bin/x.sh").unwrap().contains("alias.x"));
        assert!(at("src/main.rs").is_none());
        // The default hooks directory is not a place once hooksPath is set; a hook link there
        // still is, as the repository's own hooks directory is listed when it is the default.
        let (d2, _) = repo("");
        std::fs::create_dir_all(d2.0.join("scripts")).unwrap();
        std::fs::write(d2.0.join("scripts/pre-commit"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink(
            "../../scripts/pre-commit",
            d2.0.join(".git/hooks/pre-commit"),
        )
        .unwrap();
        let places = super::places(&d2.0, Some(Path::new("/nonexistent-home")), &host_reader);
        assert!(place_of(&places, &d2.0.join("scripts/pre-commit")).is_some());
        assert!(place_of(&places, &d2.0.join("scripts/other")).is_none());
    }

    #[test]
    fn the_scripts_a_hook_runs_are_places() {
        let wt = Path::new("/w");
        let got = script_paths(
            "#!/bin/sh\n. \"$(dirname \"$0\")/_/husky.sh\"\nexec ./tools/check.sh \"$@\"\nnode \"$(git rev-parse --show-toplevel)/scripts/lint.js\"\ncurl https://example.invalid/x\nnode-options=--require=./pre.cjs\n",
            &[wt],
            None,
        );
        assert!(got.contains(&PathBuf::from("/w/pre.cjs")), "{got:?}");
        assert!(got.contains(&PathBuf::from("/w/tools/check.sh")), "{got:?}");
        assert!(
            got.contains(&PathBuf::from("/w/scripts/lint.js")),
            "{got:?}"
        );
        assert!(got.contains(&PathBuf::from("/w/_/husky.sh")), "{got:?}");
        assert!(!got.iter().any(|p| p.to_string_lossy().contains("example")));
        // The tree itself, or a directory in it, is no program.
        let tmp = std::env::temp_dir();
        let none = script_paths("prettier --write ./ ; cd .. ; ls ./*.sh", &[&tmp], None);
        assert!(none.is_empty(), "{none:?}");
    }

    #[test]
    fn a_symlinked_hooks_directory_is_a_place_where_it_leads() {
        let (d, _) = repo("[core]\n\thooksPath = .husky\n");
        std::fs::create_dir_all(d.0.join("tools/hooks")).unwrap();
        std::os::unix::fs::symlink("tools/hooks", d.0.join(".husky")).unwrap();
        let places = places(&d.0, Some(Path::new("/nonexistent-home")), &host_reader);
        assert!(place_of(&places, &d.0.join("tools/hooks/pre-commit")).is_some());
    }
}
