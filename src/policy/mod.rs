//! The one policy every layer compiles: path rules, /tmp mode, required level and the command.
//! Pure data and pure functions; no syscalls live here.

mod credfiles;
pub mod duration;
pub mod env;
pub mod homes;
pub mod limits;
pub mod profile;
mod resolve;
mod secrets;
pub mod settings;
pub mod sockets;
pub mod wildcard;

pub use crate::paths::{absolute, real_path};
pub use resolve::{AgentLoginPath, CACHE_FLAG, COW_FLAG, PolicyInput, ProfilePathRule, resolve};

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

/// What a path rule allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Readable, nothing beneath can be changed.
    Ro,
    /// Readable and writable.
    Rw,
    /// Appears empty; nothing beneath can be read or changed.
    Hide,
}

/// Whether a hidden path is a directory or a file (a file is hidden by an empty file, a directory by
/// an empty read-only tmpfs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Dir,
    File,
}

/// Where a rule came from, for the dry run and error messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "from", content = "detail")]
pub enum Origin {
    /// jail itself (the read-only root).
    Default,
    /// A profile (by name).
    Profile(String),
    /// A command-line flag (`--ro`, `--rw`, `--hide`, `--tmp`).
    Flag(String),
    /// A protected name kept read-only beneath a `--rw` path.
    Protected(#[serde(with = "crate::byte_path")] PathBuf),
    /// A credential file or directory that this variable of the caller's environment names.
    Env(String),
    /// `--home hidden`: a home directory hidden, or a place in one shown read-only (the
    /// working directory, a program's directory, what its programs load), with the reason.
    Home(String),
    /// The login of an agent this run is not (hidden), or of the one it is (shown read-only
    /// when the homes are hidden): the agent's name.
    AgentLogin(String),
    /// The host's /tmp, writable and shared with the host (`--tmp host`, or a profile's
    /// `tmp = "host"`): no project, so it is not searched for protected names and a home
    /// beneath it stays a home.
    SharedTmp,
    /// The working directory, beneath the private /tmp and named by no rule: shown there
    /// read-only, as it would be elsewhere.
    TmpWorkingDir,
    /// A part of the git directories of the linked worktree at this path (beneath a writable
    /// path): its own git directory and the main repository's objects and refs, which git
    /// writes on add, commit and checkout there.
    GitWorktree(#[serde(with = "crate::byte_path")] PathBuf),
    /// The git directory of the submodule checked out at this path (beneath a writable path),
    /// in its superproject's `.git/modules`: git writes its index, objects and refs there.
    GitSubmodule(#[serde(with = "crate::byte_path")] PathBuf),
    /// jail's own state (a store of copy-on-write layers, or the registry of stores): hidden in
    /// every jail whatever the flags open around it.
    JailState,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathRule {
    #[serde(with = "crate::byte_path")]
    pub path: PathBuf,
    pub access: Access,
    pub kind: Kind,
    pub origin: Origin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TmpMode {
    Private,
    Host,
}

/// The enforcement level a run must reach (`--require`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Require {
    Full,
    Landlock,
    Mount,
    Any,
}

#[derive(Debug, Clone, Serialize)]
pub struct Policy {
    /// One rule per path, sorted by path (so a parent always comes before its children).
    pub rules: Vec<PathRule>,
    /// Copy-on-write roots (each also a writable rule): writes land in a per-run layer.
    #[serde(with = "crate::byte_path::vec")]
    pub cow: Vec<PathBuf>,
    /// Throwaway roots (each also a writable rule): writes land in a layer of the jail's own
    /// that goes with it; read-only where no layer can be mounted.
    #[serde(with = "crate::byte_path::vec")]
    pub caches: Vec<PathBuf>,
    /// Protected names that did not exist at start: neither layer can keep them from being created
    /// (the mount layer binds only what exists), reported as a gap.
    #[serde(with = "crate::byte_path::vec")]
    pub absent_protected: Vec<PathBuf>,
    /// Writable roots whose search for nested protected names stopped at its bound.
    #[serde(with = "crate::byte_path::vec")]
    pub protected_search_truncated: Vec<PathBuf>,
    /// Writable paths of the profile that did not exist (created before a real run).
    #[serde(with = "crate::byte_path::vec")]
    pub profile_rw_missing: Vec<PathBuf>,
    /// The profile the policy was built from.
    pub profile: String,
    /// The profiles' protected paths, and the tool configurations the command's environment
    /// names inside a writable tree (present or not): read-only when they exist, moved aside
    /// after the run when the command created or changed them.
    #[serde(with = "crate::byte_path::vec")]
    pub profile_protected: Vec<PathBuf>,
    /// JSON files of the profiles whose named keys must not change in a run (path, keys).
    #[serde(serialize_with = "serialize_guarded")]
    pub guarded: Vec<(PathBuf, Vec<String>)>,
    /// The agents' state directories (real paths) with the data named in them: what the run
    /// creates or changes there outside the data is moved aside after it.
    pub agent_states: Vec<crate::protect::agent_state::StateDir>,
    /// The command's environment (names only when serialized).
    pub env: env::ChildEnv,
    #[serde(with = "crate::byte_path")]
    pub cwd: PathBuf,
    pub tmp: TmpMode,
    pub require: Option<Require>,
    pub keep_fds: Vec<i32>,
    #[serde(serialize_with = "serialize_duration")]
    pub timeout: Option<Duration>,
    pub allow_userns: bool,
    pub allow_unix_sockets: bool,
    /// Host unix sockets the command may connect to (`--allow-socket`); every other connect
    /// reaches only the jail's own filesystems.
    #[serde(with = "crate::byte_path::vec")]
    pub allow_sockets: Vec<PathBuf>,
    /// Whether home directories are readable or hidden but for the named paths (`--home`).
    pub home: homes::HomeMode,
    /// The network the command gets.
    pub net: crate::net::NetPolicy,
    /// Secrets the proxy adds for their hosts (`--secret`, a profile's `[secrets]`): the
    /// command's environment holds their placeholders.
    pub secrets: Vec<crate::net::secrets::SecretRule>,
    /// Resource bounds asked for (`--limit`, `[limits]`); unset ones get jail's defaults.
    pub limits: limits::Limits,
    #[serde(serialize_with = "serialize_command")]
    pub command: Vec<OsString>,
}

impl Policy {
    /// A policy with no rules but the read-only root, for `jail probe` to name the gaps a run
    /// would have on this machine.
    pub fn probe_default() -> Policy {
        Policy {
            rules: vec![PathRule {
                path: "/".into(),
                access: Access::Ro,
                kind: Kind::Dir,
                origin: Origin::Default,
            }],
            cow: vec![],
            caches: vec![],
            absent_protected: vec![],
            protected_search_truncated: vec![],
            profile_rw_missing: vec![],
            profile: "default".into(),
            profile_protected: vec![],
            guarded: vec![],
            agent_states: vec![],
            env: Default::default(),
            cwd: "/".into(),
            tmp: TmpMode::Private,
            require: None,
            keep_fds: vec![],
            timeout: None,
            allow_userns: false,
            allow_unix_sockets: false,
            allow_sockets: vec![],
            home: homes::HomeMode::Visible,
            net: crate::net::NetPolicy::Host,
            secrets: vec![],
            limits: Default::default(),
            command: vec![],
        }
    }

    /// The access that applies at `path`: the rule with the longest path that contains it.
    pub fn access_at(&self, path: &Path) -> Access {
        self.rule_for(path).map(|r| r.access).unwrap_or(Access::Ro)
    }

    /// The most specific rule covering `path`.
    pub fn rule_for(&self, path: &Path) -> Option<&PathRule> {
        self.rules
            .iter()
            .filter(|r| path.starts_with(&r.path))
            .max_by_key(|r| r.path.components().count())
    }

    /// Paths that are writable in the jail (rw rules, plus /tmp when it is the host's).
    pub fn writable_paths(&self) -> impl Iterator<Item = &Path> {
        self.rules
            .iter()
            .filter(|r| r.access == Access::Rw)
            .map(|r| r.path.as_path())
    }
}

fn serialize_duration<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

fn serialize_command<S: serde::Serializer>(c: &[OsString], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(c.iter().map(|a| crate::byte_path::Ref(Path::new(a))))
}

fn serialize_guarded<S: serde::Serializer>(
    g: &[(PathBuf, Vec<String>)],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(g.iter().map(|(p, keys)| (crate::byte_path::Ref(p), keys)))
}

/// Depth of a path in components, used to order rules parent-first.
pub fn depth(path: &Path) -> usize {
    path.components().count()
}
