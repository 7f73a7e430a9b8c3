//! The paths the classification of [`super`] needs besides the protected list, decided once
//! at the start of a run: what the writable rules name exactly, the profiles' protected
//! paths, the PATH and hooks directories, HOME, the places the host's git runs code from, the
//! agents' state directories and jail's own state.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::{own_state, roots};
use crate::policy::Policy;

/// The paths the classification needs besides the protected list.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// Paths a writable rule names exactly: a protected name there is the user's to write.
    pub exempt: HashSet<PathBuf>,
    /// The profiles' protected paths: a change at or beneath one moves it aside.
    pub exact: Vec<PathBuf>,
    /// Directories on the caller's PATH inside a writable tree: whatever appears or changes in
    /// one shadows a command the user runs.
    pub path_dirs: Vec<PathBuf>,
    /// Directories `core.hooksPath` names (a repository's config, or the user's own): git runs
    /// the hooks there.
    pub hooks_dirs: Vec<PathBuf>,
    /// HOME, when a writable tree holds it: its dot entries are the configuration (and often
    /// the code) of every tool the user runs, far more than any list names.
    pub home: Option<PathBuf>,
    /// The places the host's git runs code from inside the writable trees (the one owner,
    /// [`crate::protect::host_code`], shared with the copy-on-write flags): a change at or
    /// beneath one moves it aside.
    pub host_code: Vec<crate::protect::host_code::Place>,
    /// The writable trees: a new symlink to a directory outside them leads the host's tools
    /// into what this check never walked (the host's /tmp, with --tmp host or without the
    /// mount view).
    pub roots: Vec<PathBuf>,
    /// The agents' state directories with the data named in them: anything else created or
    /// changed there is code the agent's hooks may run ([`crate::protect::agent_state`]).
    pub states: Vec<crate::protect::agent_state::StateDir>,
    /// jail's own state (its stores of copy-on-write layers): hidden from the command, written
    /// by jail itself during the run, so never the command's plant. It is never moved aside,
    /// nor is a directory that holds it: such a unit is split into the entries beside it.
    pub own: Vec<PathBuf>,
}

impl Rules {
    /// Every rule path also with its symlinks resolved: the trees are walked by their real
    /// paths. The spelled form stays too (after the run, resolving may go through a symlink
    /// the command planted, which the spelled form catches).
    pub(super) fn normalize(&mut self) {
        for list in [&mut self.exact, &mut self.path_dirs, &mut self.hooks_dirs] {
            let real: Vec<PathBuf> = list.iter().map(|p| crate::policy::real_path(p)).collect();
            list.extend(real);
            list.sort();
            list.dedup();
        }
        let real: Vec<crate::protect::host_code::Place> = self
            .host_code
            .iter()
            .map(|p| crate::protect::host_code::Place {
                path: crate::policy::real_path(&p.path),
                why: p.why.clone(),
            })
            .filter(|r| !self.host_code.iter().any(|p| p.path == r.path))
            .collect();
        self.host_code.extend(real);
    }
}

impl Rules {
    pub fn of(policy: &Policy, path_var: Option<&OsStr>) -> Rules {
        let roots = roots(policy);
        let path_dirs = path_var
            .map(std::env::split_paths)
            .into_iter()
            .flatten()
            .filter(|d| d.is_absolute())
            .map(|d| crate::policy::real_path(&d))
            .filter(|d| roots.iter().any(|r| d.starts_with(r) && d != r))
            .collect();
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
            .map(|h| crate::policy::real_path(&h));
        let mut exact = policy.profile_protected.clone();
        // The files the user's own git configs include, where the run could write them.
        for g in crate::protect::gitconfig::user_files(home.as_deref()) {
            exact.extend(
                crate::protect::gitconfig::included_files(&g, home.as_deref())
                    .into_iter()
                    .filter(|f| roots.iter().any(|r| f.starts_with(r))),
            );
        }
        let host_code = roots
            .iter()
            .flat_map(|r| {
                crate::protect::host_code::places(
                    r,
                    home.as_deref(),
                    &crate::protect::host_code::host_reader,
                )
            })
            .filter(|p| roots.iter().any(|r| p.path.starts_with(r)))
            .collect();
        let states = policy
            .agent_states
            .iter()
            .filter(|s| roots.iter().any(|r| s.dir.starts_with(r)))
            .cloned()
            .collect();
        let mut rules = Rules {
            states,
            host_code,
            own: own_state(policy),
            roots: roots.clone(),
            home: home
                .clone()
                .filter(|h| h.is_absolute() && roots.iter().any(|r| h.starts_with(r))),
            exempt: policy.writable_paths().map(Path::to_path_buf).collect(),
            exact,
            path_dirs,
            hooks_dirs: crate::protect::gitconfig::global_hooks_dirs(home.as_deref())
                .into_iter()
                .map(|h| crate::policy::real_path(&h))
                .chain(
                    roots
                        .iter()
                        .flat_map(|r| crate::protect::git::enclosing_repo_hooks_dirs(r)),
                )
                .collect(),
        };
        rules.normalize();
        rules
    }
}
