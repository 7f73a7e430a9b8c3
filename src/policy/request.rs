//! What a caller asks for, as data, before anything is read from the host: a profile, the rules
//! on top of it, and the command. The command line builds one from its flags; a library caller
//! builds one with [`crate::Jail`]. [`crate::prepare::policy`] turns it into the [`Policy`] every
//! layer compiles, the same way for both.
//!
//! [`Policy`]: super::Policy

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::Require;
use super::homes::HomeMode;
use super::profile::TmpOption;

/// One run's request. Every field but `profile` and `command` defaults to "as the profile says";
/// where both name something, the request wins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The profile to start from (`jail profile list`).
    pub profile: String,
    /// Read-only paths (`--ro`).
    pub ro: Vec<PathBuf>,
    /// Writable paths (`--rw`); protected names beneath them stay read-only.
    pub rw: Vec<PathBuf>,
    /// Copy-on-write paths (`--cow`): writable inside, every write kept in a layer outside the
    /// jail until `jail apply`.
    pub cow: Vec<PathBuf>,
    /// Throwaway copy-on-write paths (`--cache`): writable inside, every write discarded with
    /// the run (a poisoned cache never reaches the host's).
    pub caches: Vec<PathBuf>,
    /// Hidden paths (`--hide`).
    pub hide: Vec<PathBuf>,
    /// Working directory inside the jail (default: the caller's).
    pub cwd: Option<PathBuf>,
    /// /tmp: private (default) or the host's.
    pub tmp: Option<TmpOption>,
    /// Home directories visible or hidden (default: the profile's).
    pub home: Option<HomeMode>,
    /// `KEY` kept or `KEY=VALUE` set (`--env`).
    pub env: Vec<String>,
    /// Start from an empty environment (`--env-clear`).
    pub env_clear: bool,
    /// Variables removed by pattern (`--env-deny`).
    pub env_deny: Vec<String>,
    /// The level the run must reach, or it is refused.
    pub require: Option<Require>,
    /// Descriptors the command keeps (`--keep-fd`).
    pub keep_fds: Vec<i32>,
    /// The whole tree is killed after this.
    pub timeout: Option<Duration>,
    /// Resource bounds, `NAME=VALUE` as `--limit` takes them.
    pub limits: Vec<String>,
    /// The command may create user namespaces.
    pub allow_userns: bool,
    /// The command may create unix sockets (every connect mediated).
    pub allow_unix_sockets: bool,
    /// Host unix sockets the command may connect to.
    pub allow_sockets: Vec<PathBuf>,
    /// Network rules as `--net` takes them (`none`, `allow=DOMAINS`, ...); empty: the profile's.
    pub net: Vec<String>,
    /// `--secret NAME[@HOST,...]`: variables whose values the proxy adds for their hosts.
    pub secrets: Vec<String>,
    /// The command and its arguments.
    pub command: Vec<OsString>,
}

impl Default for Request {
    fn default() -> Request {
        Request {
            profile: "default".into(),
            ro: Vec::new(),
            rw: Vec::new(),
            cow: Vec::new(),
            caches: Vec::new(),
            hide: Vec::new(),
            cwd: None,
            tmp: None,
            home: None,
            env: Vec::new(),
            env_clear: false,
            env_deny: Vec::new(),
            require: None,
            keep_fds: Vec::new(),
            timeout: None,
            limits: Vec::new(),
            allow_userns: false,
            allow_unix_sockets: false,
            allow_sockets: Vec::new(),
            net: Vec::new(),
            secrets: Vec::new(),
            command: Vec::new(),
        }
    }
}
