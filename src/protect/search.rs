//! The search before a run: the protected names, the parts of every git directory that carry
//! configuration and hooks, the hooks directories `core.hooksPath` names, the gitfiles of linked
//! worktrees and submodules, and what an earlier run moved aside, beneath one writable root. Only
//! looks (lstat, read_dir, small config reads); the policy makes rules of what it finds.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::names::{PROTECTED, PROTECTED_IN_GIT_DIRS};

/// How deep below a writable root protected names are looked for, and how many directories at
/// most: enough for `--rw ~/projects/org/repo`, bounded so that a huge or remote tree is never
/// walked whole.
const SEARCH_DEPTH: usize = 5;
const SEARCH_DIRS: usize = 2000;
/// Directories never searched: build output and dependencies, not projects.
const SEARCH_SKIP: &[&str] = &[
    ".git",
    "node_modules",
    "target",
    "vendor",
    ".venv",
    "venv",
    "__pycache__",
    "dist",
    "build",
    ".cache",
];

#[derive(Default)]
pub struct Protected {
    /// (path, is a directory, symlink target if it is a symlink)
    pub present: Vec<(PathBuf, bool, Option<PathBuf>)>,
    pub absent: Vec<PathBuf>,
    pub truncated: bool,
    /// Directories whose `.git` is a file (a linked worktree's or a submodule's gitfile).
    pub worktrees: Vec<PathBuf>,
    /// Entries an earlier run's check moved aside (`NAME.jail-quarantine-*`, not symlinks),
    /// with whether each is a directory: hidden from this run.
    pub quarantined: Vec<(PathBuf, bool)>,
}

type Listing = Vec<(std::ffi::OsString, std::fs::FileType)>;

impl Protected {
    /// The quarantined entries of a directory's listing ([`super::quarantined`]).
    fn note_quarantined<'l>(
        &mut self,
        dir: &Path,
        listing: impl Iterator<Item = (&'l std::ffi::OsString, &'l std::fs::FileType)>,
    ) {
        for (name, ft) in listing {
            if !ft.is_symlink() && super::quarantined::is_quarantined_name(name) {
                self.quarantined.push((dir.join(name), ft.is_dir()));
            }
        }
    }

    /// Records what is at `path`: a symlink (refused by the policy), an entry to keep read-only,
    /// or an absent one (a gap) when `record_absent`.
    fn check(&mut self, path: PathBuf, record_absent: bool) {
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&path).unwrap_or_default();
                self.present.push((path, false, Some(target)));
            }
            // A .git directory is the repository itself: its named parts are protected, not
            // all of it (git must write objects, refs and the index). A .git file is protected.
            Ok(m) if m.is_dir() && path.file_name().is_some_and(|n| n == ".git") => {}
            Ok(m) => self.present.push((path, m.is_dir(), None)),
            // A new .git is caught after the run by the check of what the command planted.
            Err(_) if path.file_name().is_some_and(|n| n == ".git") => {}
            Err(_) if record_absent => self.absent.push(path),
            Err(_) => {}
        }
    }

    /// The names that hold configuration and hooks in the git directory `git_dir`, and what an
    /// earlier run moved aside in it (unless the walk `listed` it already) and in its `modules`.
    fn git_dir_parts(&mut self, git_dir: &Path, listed: bool) {
        if !listed {
            let l = listing_of(git_dir);
            self.note_quarantined(git_dir, l.iter().map(|(n, t)| (n, t)));
        }
        let modules = git_dir.join("modules");
        let l = listing_of(&modules);
        self.note_quarantined(&modules, l.iter().map(|(n, t)| (n, t)));
        for part in PROTECTED_IN_GIT_DIRS {
            self.check(git_dir.join(part.pattern), part.pattern != "config");
        }
    }

    /// A git directory by its layout (`dir`): its configuration and hooks, and those of the
    /// submodules and worktrees it holds; never its objects (git must write them).
    fn git_dir(&mut self, root: &Path, dir: &Path, home: Option<&Path>) {
        // What the config includes is config too (the same commands).
        let code = super::git::config_code(dir, home);
        for path in code.hooks.into_iter().chain(code.included) {
            if path.starts_with(root) {
                self.check(path, false);
            }
        }
        for git_dir in super::git::git_dirs_of(dir) {
            self.git_dir_parts(&git_dir, git_dir == dir);
        }
    }

    /// A directory that is no git directory, `depth` below the root, with its `listing`.
    fn plain_dir(
        &mut self,
        root: &Path,
        dir: &Path,
        depth: usize,
        listing: &Listing,
        home: Option<&Path>,
    ) {
        if depth == 0 {
            // At the root every plain name is looked up: an absent one is a gap.
            for p in PROTECTED.iter().filter(|p| !p.pattern.starts_with('*')) {
                self.check(dir.join(p.pattern), true);
            }
        }
        for (name, _) in listing {
            let n = name.as_bytes();
            if depth > 0 {
                for p in super::names::patterns_starting_with(n) {
                    self.check(dir.join(p.pattern), false);
                }
            }
            if super::names::protected_name(&[n]).is_some_and(|p| p.pattern.starts_with('*')) {
                self.check(dir.join(name), false);
            }
        }
        // core.hooksPath in the repository's (read-only) config names where its hooks live;
        // the files it includes are config too.
        for hooks in super::git::hooks_dirs_behind(&dir.join(".git"), home)
            .into_iter()
            .filter(|h| h.starts_with(root))
        {
            self.check(hooks, depth == 0);
        }
        for inc in super::gitconfig::included_files(&dir.join(".git/config"), home) {
            if inc.starts_with(root) {
                self.check(inc, false);
            }
        }
        // Every git directory of this repository: .git itself, each submodule's under
        // .git/modules (at any depth: a submodule at lib/foo lives in .git/modules/lib/foo) and
        // each linked worktree's. In each, the names that hold configuration and hooks are kept
        // read-only.
        for git_dir in super::git::git_dirs_of(&dir.join(".git")) {
            self.git_dir_parts(&git_dir, false);
        }
        // A gitfile: the git directories it leads to may lie outside every writable tree
        // (a linked worktree's, in its main repository); see linked_worktree.
        if listing.iter().any(|(n, t)| n == ".git" && t.is_file()) {
            self.worktrees.push(dir.to_path_buf());
        }
    }
}

/// The listing of a directory as (name, type), empty when it cannot be read.
fn listing_of(dir: &Path) -> Listing {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name(), e.file_type().ok()?)))
        .collect()
}

/// Protected names under `root`, to keep read-only from the start: directly beneath it (absent
/// ones recorded, as a gap), in nested projects down to SEARCH_DEPTH, and the parts of every git
/// directory found there by its layout (`.git`, a bare repository, `root` itself). Matched on
/// each directory's listing, so a directory costs one read whatever the length of the list.
/// (Entries created or changed during the run, at any depth, are the after-run check's.)
pub fn find_protected(root: &Path) -> Protected {
    use std::os::unix::fs::MetadataExt;
    let mut out = Protected::default();
    // The hooks directory the user's own git config names, for every repository, and those of
    // the repositories that hold this tree.
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let home = home.as_deref();
    let mut outside = super::gitconfig::global_hooks_dirs(home);
    outside.extend(super::git::enclosing_repo_hooks_dirs(root));
    for hooks in outside {
        if hooks.starts_with(root) && hooks != root {
            out.check(hooks, false);
        }
    }
    let device = std::fs::metadata(root).map(|m| m.dev()).ok();
    let mut queue = std::collections::VecDeque::from([(root.to_path_buf(), 0usize)]);
    let mut visited = 0usize;
    while let Some((dir, depth)) = queue.pop_front() {
        visited += 1;
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let listing: Listing = entries
            .flatten()
            .filter_map(|e| Some((e.file_name(), e.file_type().ok()?)))
            .collect();
        out.note_quarantined(&dir, listing.iter().map(|(n, t)| (n, t)));
        let has = |name: &str| listing.iter().any(|(n, _)| n == name);
        let named_git_root = depth == 0 && dir.file_name().is_some_and(|n| n == ".git");
        if named_git_root || super::git::is_git_layout(has) {
            out.git_dir(root, &dir, home);
            continue;
        }
        out.plain_dir(root, &dir, depth, &listing, home);
        if depth == SEARCH_DEPTH {
            continue;
        }
        for (name, ft) in &listing {
            let n = [name.as_bytes()];
            // Nor into what an earlier run moved aside: it is hidden whole.
            if SEARCH_SKIP.iter().any(|s| name == *s)
                || super::names::protected_name(&n).is_some()
                || super::quarantined::is_quarantined_name(name)
            {
                continue;
            }
            // Not through symlinks, not onto other filesystems (a network mount may hang).
            if !ft.is_dir() {
                continue;
            }
            let path = dir.join(name);
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if Some(meta.dev()) != device {
                continue;
            }
            if visited + queue.len() >= SEARCH_DIRS {
                out.truncated = true;
                return out;
            }
            queue.push_back((path, depth + 1));
        }
    }
    out
}
