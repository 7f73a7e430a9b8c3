//! The protected names under every writable path, and what else a writable tree must keep
//! read-only: the tool configurations the environment names there, and a repository's shared
//! git directory (a linked worktree's, a submodule's) opened to its tree's writes only in the
//! parts that run nothing.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{FlagRules, PolicyInput, Rules, kind_of, layered};
use crate::error::JailError;
use crate::paths::real_path;
use crate::policy::{Access, Kind, Origin, PathRule};
use crate::protect::PROTECTED_IN_GIT_DIRS;
use crate::protect::git::{
    LinkedWorktree, SHARED_GIT_PARTS, git_dirs_of, linked_worktree, submodule_git_dir,
};
use crate::protect::search::find_protected;

/// The tool configurations the command's and the caller's environments name
/// ([`crate::protect::env_configs`]) inside a writable tree: read-only where they exist, and returned (present or not) to be moved aside
/// after the run when the command creates or changes them; a missing one is a gap like a
/// missing protected name. Not one a writable rule names itself or holds a writable rule
/// (`--rw` said so), nor one in a copy-on-write tree (its writes never reach the host
/// unreviewed) or the host's shared /tmp.
pub(super) fn protect_env_configs(
    input: &PolicyInput,
    cwd: &Path,
    rules: &mut Rules,
    absent: &mut Vec<PathBuf>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    // The command's environment (what its tools read in the jail) and the caller's (what the
    // host's tools read after it: a variable jail removed from the command still points the
    // host's tool at the file).
    let vars: Vec<(OsString, OsString)> = input
        .env
        .vars
        .iter()
        .chain(&input.caller_env)
        .cloned()
        .collect();
    let named = crate::protect::env_configs::named_configs(&vars, cwd)
        .into_iter()
        .chain(crate::protect::env_configs::named_code(&vars, cwd));
    for (_, named) in named {
        let path = real_path(&named);
        let Some(root) = rules
            .values()
            .filter(|r| path.starts_with(&r.path))
            .max_by_key(|r| crate::policy::depth(&r.path))
        else {
            continue;
        };
        let writable = root.access == Access::Rw
            && root.origin != Origin::SharedTmp
            && !matches!(&root.origin, Origin::Flag(f) if layered(f));
        let holds_writable = rules
            .values()
            .any(|r| r.access == Access::Rw && r.path.starts_with(&path));
        if !writable || holds_writable || out.contains(&path) {
            continue;
        }
        let root = root.path.clone();
        // As spelled too: a symlink the command replaces there is a change at that name.
        if named != path {
            out.push(named);
        }
        out.push(path.clone());
        match std::fs::symlink_metadata(&path) {
            Ok(_) => {
                let kind = kind_of(&path);
                rules.insert(
                    path.clone(),
                    PathRule {
                        path,
                        access: Access::Ro,
                        kind,
                        origin: Origin::Protected(root),
                    },
                );
            }
            Err(_) => absent.push(path),
        }
    }
    out
}

/// Protected names stay read-only under every writable path unless named exactly, including in
/// projects nested a few levels below it (`--rw ~/projects`). Returns the protected names that
/// do not exist, and the roots whose search was cut short.
pub(super) fn protect_names(
    user: &FlagRules,
    rules: &mut Rules,
) -> Result<(Vec<PathBuf>, Vec<PathBuf>), JailError> {
    let mut absent_protected = Vec::new();
    let mut search_notes = Vec::new();
    // The shared /tmp of --tmp host is no project: it is not searched.
    let writable: Vec<PathBuf> = rules
        .values()
        .filter(|r| r.access == Access::Rw && r.origin != Origin::SharedTmp)
        .filter(|r| !matches!(&r.origin, Origin::Flag(f) if layered(f)))
        .map(|r| r.path.clone())
        .collect();
    for root in writable {
        let found = find_protected(&root);
        if found.truncated {
            search_notes.push(root.clone());
        }
        for path in found.absent {
            if !rules.contains_key(&path) {
                absent_protected.push(path);
            }
        }
        for (path, is_dir, symlink) in found.present {
            if user.contains_key(&path) || rules.contains_key(&path) {
                continue;
            }
            if let Some(target) = symlink {
                return Err(JailError::bad_path(
                    "--rw",
                    &root,
                    format!(
                        "protected path {} is a symlink (-> {}): a symlink cannot be kept \
                         read-only inside a writable directory; replace it with the real file or \
                         directory, or do not make {} writable",
                        path.display(),
                        target.display(),
                        root.display()
                    ),
                ));
            }
            let kind = if is_dir { Kind::Dir } else { Kind::File };
            rules.insert(
                path.clone(),
                PathRule {
                    path,
                    access: Access::Ro,
                    kind,
                    origin: Origin::Protected(root.clone()),
                },
            );
        }
        // What an earlier run's check moved aside stays as it was for the user to review:
        // this run neither reads nor changes it (a symlink it makes to it is moved aside).
        // Over a profile's read-only rule for it too (an agent's state directory keeps every
        // entry outside its data read-only, a moved one included).
        for (path, is_dir) in found.quarantined {
            if user.contains_key(&path) || rules.get(&path).is_some_and(|r| r.access == Access::Rw)
            {
                continue;
            }
            let kind = if is_dir { Kind::Dir } else { Kind::File };
            rules.insert(
                path.clone(),
                PathRule {
                    path,
                    access: Access::Hide,
                    kind,
                    origin: Origin::Protected(root.clone()),
                },
            );
        }
        for worktree in found.worktrees {
            if let Some(linked) = linked_worktree(&worktree) {
                open_worktree_git_dirs(&worktree, &linked, rules, &mut absent_protected);
            } else if let Some(git_dir) = submodule_git_dir(&worktree) {
                open_submodule_git_dir(&worktree, &git_dir, rules, &mut absent_protected);
            }
        }
    }
    Ok((absent_protected, search_notes))
}

/// A writable rule for the git directory of the submodule at `dir`, as its `.git` would have
/// were it a directory: writable, but for the names that carry configuration and hooks, in it
/// and in the git directories of the submodules nested in it. Not opened when one of those is
/// a symlink, or when a rule names it, makes it writable already, or hides it.
fn open_submodule_git_dir(
    dir: &Path,
    git_dir: &Path,
    rules: &mut Rules,
    absent_protected: &mut Vec<PathBuf>,
) {
    let covering = rules
        .values()
        .filter(|r| r.path != Path::new("/") && git_dir.starts_with(&r.path))
        .max_by_key(|r| r.path.components().count())
        .map(|r| r.access);
    if rules.contains_key(git_dir) || covering.is_some_and(|a| a != Access::Ro) {
        return;
    }
    let mut parts = Vec::new();
    for g in git_dirs_of(git_dir) {
        for part in PROTECTED_IN_GIT_DIRS {
            let path = g.join(part.pattern);
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.file_type().is_symlink() => return,
                Ok(m) => parts.push((path, Some(m.is_dir()))),
                Err(_) => parts.push((path, None)),
            }
        }
    }
    rules.insert(
        git_dir.to_path_buf(),
        PathRule {
            path: git_dir.to_path_buf(),
            access: Access::Rw,
            kind: Kind::Dir,
            origin: Origin::GitSubmodule(dir.to_path_buf()),
        },
    );
    for (path, is_dir) in parts {
        match is_dir {
            _ if rules.contains_key(&path) => {}
            Some(is_dir) => {
                let kind = if is_dir { Kind::Dir } else { Kind::File };
                rules.insert(
                    path.clone(),
                    PathRule {
                        path,
                        access: Access::Ro,
                        kind,
                        origin: Origin::Protected(git_dir.to_path_buf()),
                    },
                );
            }
            // A submodule's git directory is a whole one: git runs its own hooks, so an absent
            // hooks directory is a gap (reported) as in any .git; an absent config is git's
            // default.
            None if path.file_name().is_some_and(|n| n != "config") => absent_protected.push(path),
            None => {}
        }
    }
}

/// Writable rules for what git writes from the linked worktree at `worktree`: its own git
/// directory, with the names that carry configuration and hooks in it kept read-only, and the
/// main repository's shared parts ([`SHARED_GIT_PARTS`]), each only a real directory (or
/// packed-refs, a real file), never through a symlink (one would make its target writable). A
/// path a rule names already, or that a writable rule holds, is left as it is.
fn open_worktree_git_dirs(
    worktree: &Path,
    linked: &LinkedWorktree,
    rules: &mut Rules,
    absent_protected: &mut Vec<PathBuf>,
) {
    let covering = |rules: &Rules, p: &Path| -> Option<Access> {
        rules
            .values()
            .filter(|r| r.path != Path::new("/") && p.starts_with(&r.path))
            .max_by_key(|r| r.path.components().count())
            .map(|r| r.access)
    };
    // Named by a rule, writable already, or hidden (a hidden repository stays hidden).
    let writable_already = |rules: &Rules, p: &Path| {
        rules.contains_key(p) || covering(rules, p).is_some_and(|a| a != Access::Ro)
    };
    if covering(rules, &linked.common) == Some(Access::Hide) {
        return;
    }
    let origin = Origin::GitWorktree(worktree.to_path_buf());
    let add = |rules: &mut Rules, path: PathBuf, kind: Kind, access: Access, origin: Origin| {
        rules.insert(
            path.clone(),
            PathRule {
                path,
                access,
                kind,
                origin,
            },
        );
    };
    // A main repository in the private /tmp (no rule shows it there) is shown read-only: git
    // reads its config (the repository format, extensions), HEAD and info from the common
    // directory, and the writable parts alone would be all of it in the view.
    let shared_tmp = rules
        .get(Path::new("/tmp"))
        .is_some_and(|r| r.origin == Origin::SharedTmp);
    if !shared_tmp && linked.common.starts_with("/tmp") && covering(rules, &linked.common).is_none()
    {
        add(
            rules,
            linked.common.clone(),
            Kind::Dir,
            Access::Ro,
            origin.clone(),
        );
    }
    // A symlink at a protected name cannot be kept read-only in a writable directory: then the
    // worktree's git directory is not opened at all.
    let parts: Vec<(PathBuf, Option<bool>)> = PROTECTED_IN_GIT_DIRS
        .iter()
        .map(|part| {
            let path = linked.git_dir.join(part.pattern);
            let meta = std::fs::symlink_metadata(&path).ok();
            (path, meta.map(|m| m.file_type().is_symlink()))
        })
        .collect();
    if !writable_already(rules, &linked.git_dir) && !parts.iter().any(|(_, s)| *s == Some(true)) {
        add(
            rules,
            linked.git_dir.clone(),
            Kind::Dir,
            Access::Rw,
            origin.clone(),
        );
        for (path, present) in parts {
            if rules.contains_key(&path) {
                continue;
            }
            match present {
                Some(_) => {
                    let kind = if path.is_dir() { Kind::Dir } else { Kind::File };
                    let why = Origin::Protected(linked.git_dir.clone());
                    add(rules, path, kind, Access::Ro, why);
                }
                // Absent: neither layer can keep it from being created (a gap, reported; the
                // after-run check moves it aside). Only config.worktree: git reads hooks and
                // config from the common directory for every worktree, never from this one, and
                // commondir is there (it was checked).
                None if path.file_name().is_some_and(|n| n == "config.worktree") => {
                    absent_protected.push(path)
                }
                None => {}
            }
        }
    }
    for part in SHARED_GIT_PARTS {
        let path = linked.common.join(part);
        let kind = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => Kind::Dir,
            Ok(m) if m.is_file() && *part == "packed-refs" => Kind::File,
            _ => continue,
        };
        if !writable_already(rules, &path) {
            add(rules, path, kind, Access::Rw, origin.clone());
        }
    }
}
