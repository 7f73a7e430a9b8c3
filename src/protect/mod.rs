//! What is dangerous inside a writable tree: the one owner of that question, asked before a run
//! (what the policy keeps read-only or hides, what it opens for git), after it (what the
//! command planted, [`crate::linux::after::planted`]) and by a copy-on-write hand-back's flags
//! ([`crate::workspace`]).
//!
//! A file is dangerous when something on the host runs it, or loads it as code or as settings
//! that run code, later and outside the jail. That is known by:
//! - its name, at any depth, with the reason ([`names`]: the table the documentation page is
//!   generated from);
//! - git's layouts, whatever a directory is called ([`git`]: git directories, submodules,
//!   linked worktrees, the hooks directories `core.hooksPath` names);
//! - git's effective configuration ([`gitconfig`] reads it as git does; [`host_code`] says where
//!   it makes the host's git run code);
//! - what an agent writes in its own state directory and what it reads as code there
//!   ([`agent_state`]);
//! - the configurations the command's environment points at ([`env_configs`]);
//! - what jail itself moved aside, and where a symlink leads the host's tools
//!   ([`quarantined`]).
//!
//! [`search`] is the walk before a run that puts these together for one writable root.

pub mod agent_state;
pub mod env_configs;
pub mod git;
pub mod gitconfig;
pub mod host_code;
pub mod names;
pub mod quarantined;
pub mod search;

pub use names::{
    PROTECTED, PROTECTED_IN_GIT_DIRS, ProtectedName, pattern_matches, protected_at_or_above,
    protected_name, protected_prefix,
};

/// The writable trees searched after a run for what the command planted (asked before the run
/// too: their journal needs the store): every writable path but the private /tmp and /dev/shm
/// (they vanish with the run), /tmp when it is the host's (the whole machine's), and the
/// copy-on-write roots (their writes land in a layer, read from the layer itself afterwards).
pub fn watched_roots(policy: &crate::policy::Policy) -> Vec<std::path::PathBuf> {
    policy
        .writable_paths()
        .filter(|p| *p != std::path::Path::new("/tmp") && *p != std::path::Path::new("/dev/shm"))
        .filter(|p| !policy.cow.iter().chain(&policy.caches).any(|c| c == p))
        .map(std::path::Path::to_path_buf)
        .collect()
}
