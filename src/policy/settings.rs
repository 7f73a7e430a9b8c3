//! A run's settings, written once: what a caller asks for before anything is read from the
//! host (a profile, the rules on top of it, how the run is reported, and the command). The one
//! type is derived for every shape a setting takes:
//!
//! - the command line: [`clap::Args`], each field its flag with its help text (the `jail` run
//!   flags are this struct, flattened);
//! - the library: [`crate::Jail`]'s builder methods set its fields;
//! - the hand-over to a spawned jail ([`crate::Jail::spawn`]): serde, as JSON on a descriptor
//!   only the jail process reads (`--settings-fd`), never re-rendered as flags;
//! - the profile: its `[options]` table ([`ProfileOptions`]) names some of the same settings,
//!   and [`RunSettings::over`] is the one place where the flags win over it.
//!
//! [`crate::prepare::policy`] turns them into the [`Policy`](super::Policy) every layer
//! compiles, the same way for the command line and the library. A new run option is a field
//! here (with its flag) and the code that reads it; one a profile may set too is also a field
//! of [`ProfileOptions`] and a line of [`RunSettings::over`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use clap_complete::ArgValueCandidates;
use serde::{Deserialize, Serialize};

use super::Require;
use super::homes::HomeMode;
use super::profile::{ProfileOptions, TmpOption};
use crate::error::JailError;

// What one run asks for. Every field but `command` defaults to "as the profile says"; where
// both name something, the settings win ([`RunSettings::over`]). (No doc comment: on a struct
// clap flattens it would become the command's `about`.)
#[derive(Debug, Clone, Default, PartialEq, Eq, Args, Serialize, Deserialize)]
#[serde(default)]
pub struct RunSettings {
    /// The profile to start from (see `jail profile list`); flags apply after it and win.
    #[arg(long, value_name = "NAME", default_value = "default", value_parser = Text,
          add = ArgValueCandidates::new(crate::cli::complete::profiles))]
    pub profile: Option<String>,

    /// Make PATH (and everything beneath it) read-only. Repeatable.
    #[arg(long = "ro", value_name = "PATH")]
    #[serde(with = "crate::byte_path::vec")]
    pub ro: Vec<PathBuf>,

    /// Make PATH writable; protected names beneath it (.git/hooks, .git/config, .envrc, agent
    /// settings…) stay read-only unless named exactly. Repeatable.
    #[arg(long = "rw", value_name = "PATH")]
    #[serde(with = "crate::byte_path::vec")]
    pub rw: Vec<PathBuf>,

    /// Make the directory PATH writable through a copy-on-write layer: the host's PATH is not
    /// changed during the run; every write waits in a layer under jail's state directory until
    /// `jail apply` (review with `jail diff`). `.git` is part of the layer: commits come back as
    /// a branch. Repeatable.
    #[arg(long = "cow", value_name = "PATH")]
    #[serde(with = "crate::byte_path::vec")]
    pub cow: Vec<PathBuf>,

    /// Make the directory PATH (a package cache: ~/.cargo/registry, ~/.npm, ~/.cache/pip…)
    /// writable through a throwaway layer: builds can fill it, and nothing written reaches the
    /// host's PATH; read-only where no layer can be mounted. Repeatable.
    #[arg(long = "cache", value_name = "PATH")]
    #[serde(with = "crate::byte_path::vec")]
    pub caches: Vec<PathBuf>,

    /// Hide PATH: it appears empty and its contents cannot be read. Repeatable.
    #[arg(long = "hide", value_name = "PATH")]
    #[serde(with = "crate::byte_path::vec")]
    pub hide: Vec<PathBuf>,

    /// Working directory inside the jail (default: the current directory).
    #[arg(long, value_name = "DIR")]
    #[serde(with = "crate::byte_path::option")]
    pub cwd: Option<PathBuf>,

    /// /tmp inside the jail: a private writable tmpfs (default), or the host's /tmp made writable.
    #[arg(long, value_enum)]
    pub tmp: Option<TmpOption>,

    /// Home directories (HOME, /home, /root, passwd's): `visible` (readable but the hide list)
    /// or `hidden` (hidden but the --ro/--rw paths, the profile's paths, the working directory,
    /// and the PATH directories and the command's installation in them). Default: the
    /// profile's, else visible.
    #[arg(long, value_enum, value_name = "MODE")]
    pub home: Option<HomeMode>,

    /// Keep KEY from the environment whatever the profile removes, or set KEY=VALUE. Repeatable.
    #[arg(long = "env", value_name = "KEY[=VALUE]", value_parser = Text)]
    pub env: Vec<String>,

    /// Start the command with an empty environment (plus --env and the profile's keep list).
    #[arg(long)]
    pub env_clear: bool,

    /// Remove variables matching PATTERN (`*` wildcards) from the environment. Repeatable.
    #[arg(long = "env-deny", value_name = "PATTERN", value_parser = Text)]
    pub env_deny: Vec<String>,

    /// Print, on stderr before the command starts, the two sentences of `jail notice`.
    #[arg(long)]
    pub notice: bool,

    /// Refuse to run (exit 125) unless this enforcement level is reached.
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub require: Option<Require>,

    /// Keep file descriptor N open in the command (all others but 0, 1, 2 are closed). Repeatable.
    #[arg(long = "keep-fd", value_name = "N", value_parser = parse_descriptor)]
    pub keep_fds: Vec<i32>,

    /// Kill the whole tree after DURATION (e.g. 30s, 5m, 1h, 1.5s; bare numbers are seconds); exit 124.
    #[arg(long, value_name = "DURATION", value_parser = super::duration::parse)]
    pub timeout: Option<Duration>,

    /// Resource bounds: `memory=SIZE` (the whole tree, or each process without a cgroup),
    /// `procs=N` (processes and threads), `tmp=SIZE` and `shm=SIZE` (the private /tmp and
    /// /dev/shm), `cpu=DURATION` (CPU time of each process), `layer=SIZE` (each --cow
    /// layer); `none` or 0 lifts one.
    /// Comma-separated, repeatable; wins over the profile's `[limits]`.
    #[arg(long = "limit", value_name = "NAME=VALUE", value_parser = Text)]
    pub limits: Vec<String>,

    /// Let the command create user namespaces (for agents that nest their own bubblewrap sandbox).
    #[arg(long)]
    pub allow_userns: bool,

    /// Let the command create AF_UNIX sockets (refused by default: a socket connect cannot be
    /// confined by path on this kernel class).
    #[arg(long)]
    pub allow_unix_sockets: bool,

    /// Let the command connect to this host unix socket (e.g. "$SSH_AUTH_SOCK" for git push);
    /// implies --allow-unix-sockets. Repeatable. Every other connect reaches only sockets on
    /// the jail's own filesystems (its /tmp, /dev/shm).
    #[arg(long = "allow-socket", value_name = "PATH")]
    #[serde(with = "crate::byte_path::vec")]
    pub allow_sockets: Vec<PathBuf>,

    /// Network: `host` (default), `none` (loopback only), `connect=PORTS` / `bind=PORTS` (TCP
    /// ports to connect to / bind and listen on, Landlock; a direction not named gets none),
    /// `allow=DOMAINS` (only those names, through jail's proxy; `*.` wildcards)
    /// and `allow-host=IP:PORT`. Repeatable; replaces the profile's `net`.
    #[arg(long = "net", value_name = "RULE", value_parser = Text)]
    pub net: Vec<String>,

    /// Keep the value of environment variable NAME outside: the command gets a placeholder,
    /// and the proxy puts the value in place of it in the credential headers of HTTPS requests
    /// to HOSTs only (default: the hosts the profile's `[secrets]` names for NAME). Needs
    /// `--net allow=` and a network namespace. Repeatable.
    #[arg(long = "secret", value_name = "NAME[@HOST,...]")]
    pub secrets: Vec<String>,

    /// With --cow: at the end write the run's changes to FILE as a git patch (binary-safe) and
    /// discard the layer, for pipelines. FILE must not be writable inside the jail.
    #[arg(long, value_name = "FILE")]
    #[serde(with = "crate::byte_path::option")]
    pub patch: Option<PathBuf>,

    /// A live event stream, JSON lines, to FILE (a named pipe too) or to descriptor N (`fd:N`):
    /// `start`, `wrote` the first time each path under a --cow root changes, `denied` for each
    /// access Landlock refused (where audit records can be read), `exit` last. Bounded and
    /// non-blocking: a reader that falls behind loses lines (counted in `exit`), never stalls
    /// the run. FILE must not be writable inside the jail.
    #[arg(long, value_name = "FILE|fd:N")]
    #[serde(with = "os_option")]
    pub events: Option<OsString>,

    /// Write a JSON report of the run to FILE at the end (also when the command is killed or
    /// times out): files changed under the writable paths, accesses Landlock refused, network
    /// decisions, the layers that held. FILE must not be writable inside the jail.
    #[arg(long, value_name = "FILE")]
    #[serde(with = "crate::byte_path::option")]
    pub report: Option<PathBuf>,

    /// A unix stream socket inherited as descriptor N, for a program that starts jail: at the end
    /// jail writes how the run went to it (one JSON document: the outcome, or the error), and a
    /// byte `T` on it, or its closing, stops the whole tree as a timeout does (`K`: SIGKILL at
    /// once). Never handed to the command. `jail::Jail::spawn` uses this.
    #[arg(long, value_name = "N")]
    pub control_fd: Option<i32>,

    /// With --control-fd: build the run report and send it there with the outcome.
    // The library's `Jail::record`: the report handed back in the outcome.
    #[arg(long = "control-report", requires = "control_fd")]
    pub record: bool,

    /// Print a one-line summary of the run to stderr at the end (changes, denials, network).
    #[arg(long)]
    pub summary: bool,

    /// Run even when no layer can protect files (level none), with a warning on every run.
    #[arg(long)]
    pub allow_unconfined: bool,

    /// A session's name and idle timeout, when this run serves a session (`jail session start`
    /// sets it; no flag of a run's).
    #[arg(skip)]
    pub session: Option<crate::session::SessionSpec>,

    /// The command and its arguments, after `--`.
    // Not in the JSON hand-over: a spawned jail gets it after `--`, where `ps` shows it.
    #[arg(last = true, required = true, value_name = "CMD", value_hint = clap::ValueHint::CommandWithArguments)]
    #[serde(skip)]
    pub command: Vec<OsString>,
}

impl RunSettings {
    /// The profile's name (`default` when none is named).
    pub fn profile_name(&self) -> &str {
        self.profile.as_deref().unwrap_or("default")
    }

    /// Whether the run is recorded: a report is wanted in some form.
    pub fn recording(&self) -> bool {
        // The event stream's denials come from the recorder's audit reader.
        self.record || self.report.is_some() || self.summary || self.events.is_some()
    }

    /// Whether /tmp is the host's (`--tmp host`, or the profile's, once [`RunSettings::over`]
    /// merged it).
    pub fn tmp_host(&self) -> bool {
        self.tmp == Some(TmpOption::Host)
    }

    /// These settings over a profile's `[options]` (profile `name`'s, for its errors): what
    /// the settings name wins, what they leave at its default is the profile's. The one place
    /// the two meet.
    pub fn over(&self, profile: &ProfileOptions, name: &str) -> Result<RunSettings, JailError> {
        let bad = |what: &str, e: String| JailError::bad_profile(name, None, format!("{what} {e}"));
        let mut s = self.clone();
        s.tmp = s.tmp.or(profile.tmp);
        s.require = s.require.or(profile.require);
        s.allow_userns |= profile.allow_userns.unwrap_or(false);
        s.allow_unix_sockets |= profile.allow_unix_sockets.unwrap_or(false);
        s.home = s.home.or(profile.home);
        if s.timeout.is_none() {
            s.timeout = (profile.timeout.as_deref())
                .map(super::duration::parse)
                .transpose()
                .map_err(|e| bad("timeout", e))?;
        }
        if s.net.is_empty() {
            s.net = profile.net.clone().unwrap_or_default();
        }
        Ok(s)
    }
}

/// `#[serde(with = "os_option")]`: an `Option<OsString>` as [`crate::byte_path`] writes a path
/// (its bytes may be anything but NUL).
mod os_option {
    use std::ffi::OsString;
    use std::path::PathBuf;

    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<OsString>, s: S) -> Result<S::Ok, S::Error> {
        crate::byte_path::option::serialize(&v.clone().map(PathBuf::from), s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<OsString>, D::Error> {
        Ok(crate::byte_path::option::deserialize(d)?.map(PathBuf::into_os_string))
    }
}

/// A value that is text (a profile name, a run id, a rule): one that is not UTF-8 is refused
/// naming the argument and its bytes, where clap's own refusal names neither.
#[derive(Debug, Clone, Copy)]
pub struct Text;

impl clap::builder::TypedValueParser for Text {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        value.to_str().map(str::to_owned).ok_or_else(|| {
            let name = arg.map(|a| a.to_string()).unwrap_or_default();
            clap::Error::raw(
                clap::error::ErrorKind::InvalidUtf8,
                format!(
                    "{name} '{}': is not UTF-8; this value is text (paths are taken as bytes)\n",
                    crate::text::path_text(std::path::Path::new(value))
                ),
            )
            .with_cmd(cmd)
        })
    }
}

/// A descriptor number for --keep-fd: the kernel's descriptors are ints from 0, and 0, 1 and 2
/// are always kept (checked later, where the other rules on kept descriptors live).
fn parse_descriptor(s: &str) -> Result<i32, String> {
    match s.parse::<i64>() {
        Ok(n) if (0..=i64::from(i32::MAX)).contains(&n) => Ok(n as i32),
        Ok(_) => Err(format!(
            "{s} is not a descriptor number: name an open descriptor, 3 to {}",
            i32::MAX
        )),
        Err(_) => Err(format!(
            "{s:?} is not a number: name an open descriptor, e.g. --keep-fd 3"
        )),
    }
}
