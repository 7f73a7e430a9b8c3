//! Git's layouts inside a writable tree, as git itself finds them: what makes a directory a git
//! directory (by its layout, whatever it is called), the git directories of a repository (its
//! submodules' under `modules`, its linked worktrees' under `worktrees`), where a gitfile leads,
//! which linked worktree or submodule a gitfile really is, and the hooks directories
//! `core.hooksPath` names for a work tree, and whether a symlink leads a host tool into a git
//! directory or to what jail moved aside. Asked before a run (what to keep read-only, what to
//! open for git) and after it (what a new or changed layout is).

use std::path::{Path, PathBuf};

use crate::paths::absolute;

/// The files that make a directory a git directory for git (`is_git_directory`): a HEAD and
/// either objects/ and refs/, or a commondir naming where they are.
pub fn is_git_layout(has: impl Fn(&str) -> bool) -> bool {
    has("HEAD") && ((has("objects") && has("refs")) || has("commondir"))
}

/// A repository's git directories: `dotgit` itself (when it is a directory) and every directory
/// holding a HEAD beneath its `modules` and `worktrees` (bounded: 256 directories).
pub fn git_dirs_of(dotgit: &Path) -> Vec<PathBuf> {
    if !std::fs::symlink_metadata(dotgit).is_ok_and(|m| m.is_dir()) {
        return Vec::new();
    }
    let mut out = vec![dotgit.to_path_buf()];
    let mut queue: Vec<PathBuf> = vec![dotgit.join("modules"), dotgit.join("worktrees")];
    let mut seen = 0;
    while let Some(dir) = queue.pop() {
        seen += 1;
        if seen > 256 {
            break;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            // What an earlier run moved aside is hidden whole, not a git directory to open.
            if !entry.file_type().is_ok_and(|t| t.is_dir())
                || super::quarantined::is_quarantined_name(&entry.file_name())
            {
                continue;
            }
            let path = entry.path();
            if path.join("HEAD").is_file() {
                // A git directory; its own submodules nest under its modules/.
                queue.push(path.join("modules"));
                out.push(path);
            } else {
                queue.push(path); // a path component of a submodule name (lib/foo)
            }
        }
    }
    out
}

/// The directories core.hooksPath names for the repositories a `.git` entry leads to (a
/// directory, or a gitfile's git directory and its main repository's), read as git reads them:
/// their own configs and the user's.
pub fn hooks_dirs_behind(dotgit: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    git_dirs_behind(dotgit)
        .iter()
        .flat_map(|g| super::gitconfig::repo_hooks_dirs(g, home))
        .collect()
}

/// What a git directory's own configuration makes code beyond the parts of it that are
/// protected by name.
#[derive(Debug, Default)]
pub struct ConfigCode {
    /// The directories `core.hooksPath` names (its own and the user's): git runs the hooks there.
    pub hooks: Vec<PathBuf>,
    /// The files its config includes: git reads them as config, so they carry the same commands.
    pub included: Vec<PathBuf>,
}

/// The [`ConfigCode`] of the git directory `gitdir`.
pub fn config_code(gitdir: &Path, home: Option<&Path>) -> ConfigCode {
    ConfigCode {
        hooks: super::gitconfig::repo_hooks_dirs(gitdir, home),
        included: super::gitconfig::included_files(&gitdir.join("config"), home),
    }
}

/// The [`ConfigCode`] of the git directory whose config file is `config`; None when no HEAD is
/// beside it (it is not a git directory's config).
pub fn config_code_of(config: &Path, home: Option<&Path>) -> Option<ConfigCode> {
    let dir = config.parent()?;
    std::fs::symlink_metadata(dir.join("HEAD")).ok()?;
    Some(config_code(dir, home))
}

/// The git directories a `.git` entry leads to: itself when it is a directory; for a gitfile
/// (linked worktree, submodule) the directory its `gitdir:` line names, and the main
/// repository's when that one has a `commondir`.
pub fn git_dirs_behind(dotgit: &Path) -> Vec<PathBuf> {
    let Some(dir) = dotgit.parent() else {
        return Vec::new();
    };
    let gitdir = match std::fs::symlink_metadata(dotgit) {
        Ok(m) if m.is_dir() => dotgit.to_path_buf(),
        Ok(m) if m.is_file() => {
            let Some(target) = super::gitconfig::read_small(dotgit).ok().and_then(|t| {
                t.trim()
                    .strip_prefix("gitdir:")
                    .map(|p| p.trim().to_string())
            }) else {
                return Vec::new();
            };
            absolute(dir, Path::new(&target))
        }
        _ => return Vec::new(),
    };
    let mut out = vec![gitdir.clone()];
    if let Ok(common) = super::gitconfig::read_small(&gitdir.join("commondir")) {
        out.push(absolute(&gitdir, Path::new(common.trim())));
    }
    out
}

/// The hooks directories of the repositories that hold `root` (`--rw repo/scripts`): their
/// config is outside the writable tree, but the hooks they name may be inside it.
pub fn enclosing_repo_hooks_dirs(root: &Path) -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut out = Vec::new();
    for dir in root.ancestors().skip(1) {
        out.extend(
            hooks_dirs_behind(&dir.join(".git"), home.as_deref())
                .into_iter()
                .filter(|h| h.starts_with(root)),
        );
    }
    out
}

/// The git directories of a linked worktree, checked (see [`linked_worktree`]), all real paths.
#[derive(Debug, PartialEq, Eq)]
pub struct LinkedWorktree {
    /// The worktree's own git directory, `<common>/worktrees/<name>`: index, HEAD, logs.
    pub git_dir: PathBuf,
    /// The main repository's git directory: objects and refs shared by all its worktrees.
    pub common: PathBuf,
}

/// The parts of the main repository's git directory a linked worktree's git commands write:
/// objects (add, commit), refs and their logs (commit, branch, checkout -b), packed-refs and
/// reftable (the other ref stores). Not config, hooks or info: git reads those from the common
/// directory for every worktree, and they are the ones that carry commands.
pub const SHARED_GIT_PARTS: &[&str] = &["objects", "refs", "logs", "packed-refs", "reftable"];

/// The linked worktree whose gitfile is `worktree/.git`, when everything agrees that it is one,
/// read once before the run (the gitfile itself stays read-only, so the command cannot point it
/// elsewhere): the gitfile's `gitdir:` line names a directory holding HEAD and a `commondir`
/// file; that one names a git directory of which the first is `worktrees/<name>`; and that
/// directory's `gitdir` file names this gitfile back (git writes it on `worktree add`, so a
/// gitfile alone, which any writable tree can hold, never claims another repository's
/// directories). Every path is canonicalized; anything else (a submodule's gitfile, whose git
/// directory has no commondir; a missing or redirected part) is None, and nothing is opened.
pub fn linked_worktree(worktree: &Path) -> Option<LinkedWorktree> {
    let gitfile = worktree.join(".git");
    // read_small opens with O_NOFOLLOW and takes regular files only.
    let text = super::gitconfig::read_small(&gitfile).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    let git_dir = std::fs::canonicalize(absolute(worktree, Path::new(target))).ok()?;
    let is_file = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
    let is_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    if !is_file(&git_dir.join("HEAD")) || !is_file(&git_dir.join("commondir")) {
        return None;
    }
    let common_line = super::gitconfig::read_small(&git_dir.join("commondir")).ok()?;
    let common = std::fs::canonicalize(absolute(&git_dir, Path::new(common_line.trim()))).ok()?;
    if git_dir.parent()? != common.join("worktrees")
        || !is_file(&common.join("HEAD"))
        || !is_dir(&common.join("objects"))
        || !is_dir(&common.join("refs"))
    {
        return None;
    }
    let back = super::gitconfig::read_small(&git_dir.join("gitdir")).ok()?;
    let back = std::fs::canonicalize(absolute(&git_dir, Path::new(back.trim()))).ok()?;
    if back != std::fs::canonicalize(&gitfile).ok()? {
        return None;
    }
    Some(LinkedWorktree { git_dir, common })
}

/// The git directory of the submodule checked out at `dir`, when everything agrees that it is
/// one, read once before the run (the gitfile stays read-only): the gitfile's `gitdir:` line
/// names a directory with HEAD, objects, refs and a config, and no commondir (that would make it
/// a worktree's); it lies beneath the `modules` directory of a git directory (where `git
/// submodule` puts it); and its `core.worktree` names `dir` back (git sets it there, so a
/// gitfile alone, which any writable tree can hold, claims nothing). Real paths throughout.
pub fn submodule_git_dir(dir: &Path) -> Option<PathBuf> {
    let text = super::gitconfig::read_small(&dir.join(".git")).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    let git_dir = std::fs::canonicalize(absolute(dir, Path::new(target))).ok()?;
    let lstat = |p: &Path| std::fs::symlink_metadata(p).ok();
    let is_file = |p: &Path| lstat(p).is_some_and(|m| m.is_file());
    let is_dir = |p: &Path| lstat(p).is_some_and(|m| m.is_dir());
    let git_layout = |g: &Path| {
        is_file(&g.join("HEAD")) && is_dir(&g.join("objects")) && is_dir(&g.join("refs"))
    };
    if !git_layout(&git_dir)
        || !is_file(&git_dir.join("config"))
        || lstat(&git_dir.join("commondir")).is_some()
    {
        return None;
    }
    let in_modules = git_dir.ancestors().skip(1).any(|a| {
        a.file_name().is_some_and(|n| n == "modules") && a.parent().is_some_and(git_layout)
    });
    if !in_modules {
        return None;
    }
    let config = super::gitconfig::read_small(&git_dir.join("config")).ok()?;
    let entries = super::gitconfig::parse(&config);
    let worktree = super::gitconfig::last(&entries, "core", "worktree")?;
    let worktree = std::fs::canonicalize(absolute(&git_dir, Path::new(worktree))).ok()?;
    (worktree == std::fs::canonicalize(dir).ok()?).then_some(git_dir)
}

/// How deep beneath a link's target a git directory or a quarantined entry is looked for, and
/// how many entries at most (a link to a huge tree is not walked whole: see
/// docs/writable-trees.md).
const BENEATH_DEPTH: usize = 3;
const BENEATH_ENTRIES: usize = 2000;

/// Why a symlink, read on the host after the run, leads a host tool to code; None when it does
/// not (or leads nowhere). `link` is the link's absolute path.
pub fn link_leads_to_code(link: &Path) -> Option<&'static str> {
    const QUARANTINED: &str = "a symlink to an entry jail moved aside (a tool that follows it \
                               runs what jail kept from running)";
    // The link's own text, joined where it is: a link to a quarantined symlink.
    if let (Ok(text), Some(dir)) = (std::fs::read_link(link), link.parent())
        && super::quarantined::in_quarantined(&dir.join(text))
    {
        return Some(QUARANTINED);
    }
    let target = std::fs::canonicalize(link).ok()?;
    if super::quarantined::in_quarantined(&target) {
        return Some(QUARANTINED);
    }
    if !std::fs::metadata(&target).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    if is_git_dir(&target) {
        return Some(
            "a symlink to a git directory (git run through it uses that repository's config, \
             hooks and filters)",
        );
    }
    if holds_code(&target) {
        return Some(
            "a symlink to a directory that holds a git directory or an entry jail moved aside \
             (a tool that uses a path beneath it runs their config, hooks and filters)",
        );
    }
    None
}

/// git's own test for a repository, on the filesystem.
fn is_git_dir(dir: &Path) -> bool {
    is_git_layout(|n| std::fs::symlink_metadata(dir.join(n)).is_ok())
}

/// Whether `dir` holds a git directory (a `.git` too) or a quarantined entry, down to
/// [`BENEATH_DEPTH`] levels and [`BENEATH_ENTRIES`] entries; symlinks beneath are not followed.
fn holds_code(dir: &Path) -> bool {
    let mut queue = std::collections::VecDeque::from([(dir.to_path_buf(), 0usize)]);
    let mut seen = 0usize;
    while let Some((d, depth)) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > BENEATH_ENTRIES {
                return false;
            }
            let name = e.file_name();
            if super::quarantined::is_quarantined_name(&name) || name == ".git" {
                return true;
            }
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = e.path();
            if is_git_dir(&path) {
                return true;
            }
            if depth + 1 < BENEATH_DEPTH {
                queue.push_back((path, depth + 1));
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    #[test]
    fn git_layout_is_head_with_objects_and_refs_or_commondir() {
        let has = |set: &'static [&'static str]| move |n: &str| set.contains(&n);
        assert!(is_git_layout(has(&["HEAD", "objects", "refs", "config"])));
        assert!(is_git_layout(has(&["HEAD", "commondir"])));
        assert!(!is_git_layout(has(&["objects", "refs", "config"])));
        assert!(!is_git_layout(has(&["HEAD", "objects"])));
    }

    #[test]
    fn links_to_repositories_quarantined_entries_or_what_holds_them_lead_to_code() {
        let d = std::env::temp_dir().join(format!("jail-qlinks-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        for dir in [
            "repo/objects",
            "repo/refs",
            "q.jail-quarantine-1",
            "deep/a/b",
            "plain/x",
        ] {
            fs::create_dir_all(d.join(dir)).unwrap();
        }
        fs::write(d.join("repo/HEAD"), "ref: refs/heads/main\n").unwrap();
        fs::create_dir_all(d.join("deep/a/b/.git")).unwrap();
        fs::write(d.join("plain/x/file"), "x").unwrap();
        fs::write(d.join("f.jail-quarantine-2"), "x").unwrap();
        symlink("q.jail-quarantine-1", d.join("qlink.jail-quarantine-3")).unwrap();
        for (name, target, leads) in [
            ("l-repo", "repo", true),
            ("l-q", "q.jail-quarantine-1", true),
            ("l-qfile", "f.jail-quarantine-2", true),
            ("l-qlink", "qlink.jail-quarantine-3", true),
            ("l-holder", ".", true),
            ("l-deep", "deep", true),
            ("l-plain", "plain", false),
            ("l-file", "plain/x/file", false),
            ("l-none", "missing", false),
        ] {
            symlink(target, d.join(name)).unwrap();
            assert_eq!(link_leads_to_code(&d.join(name)).is_some(), leads, "{name}");
        }
        fs::remove_dir_all(&d).unwrap();
    }
}
