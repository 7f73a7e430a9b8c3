//! The library's front door: [`Jail`] builds a run's settings (a profile plus rules, the
//! [`RunSettings`] the command line's flags are, resolved the same way), then runs the command confined, in this process
//! ([`Jail::run`], what the `jail` program does) or in a jail process of its own
//! ([`Jail::spawn`], for orchestrators that start several sub-agents), and hands back a typed
//! [`Outcome`]: how the command ended, the level reached, the gaps, the run report.
//!
//! ```no_run
//! use std::time::Duration;
//! use jail::{Jail, Require, Status};
//!
//! let outcome = Jail::new(["sh", "-c", "cargo test"])
//!     .profile("review")
//!     .ro("./repo")
//!     .require(Require::Full)
//!     .timeout(Duration::from_secs(600))
//!     .record(true)
//!     .spawn()?
//!     .wait()?;
//! match outcome.status {
//!     Status::Exited { code: 0 } => println!("passed at level {:?}", outcome.level),
//!     other => println!("{other:?}; gaps: {:?}", outcome.gaps),
//! }
//! # Ok::<(), jail::JailError>(())
//! ```

mod child;
pub mod control;
pub mod dry_run;
pub mod outcome;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

#[cfg(target_os = "linux")]
pub(crate) use child::find_program;
pub(crate) use child::read_settings;
pub use child::{Child, Stopper};
pub use outcome::{Outcome, Status};

use crate::error::JailError;
use crate::policy::homes::HomeMode;
use crate::policy::profile::TmpOption;
use crate::policy::settings::RunSettings;
use crate::policy::{Policy, Require};

/// One confined run, built up as [`std::process::Command`] is.
#[must_use = "a Jail does nothing until it is run or spawned"]
pub struct Jail {
    settings: RunSettings,
    program: Option<PathBuf>,
    stdio: child::Stdios,
}

impl Jail {
    /// A run of `command` (program and arguments) on the `default` profile.
    pub fn new<I, S>(command: I) -> Jail
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Jail::from_settings(RunSettings {
            command: command.into_iter().map(Into::into).collect(),
            ..RunSettings::default()
        })
    }

    /// A run of these settings as they stand (what the command line builds from its flags).
    pub fn from_settings(settings: RunSettings) -> Jail {
        Jail {
            settings,
            program: None,
            stdio: child::Stdios::default(),
        }
    }

    /// The settings so far.
    pub fn settings(&self) -> &RunSettings {
        &self.settings
    }

    /// Changes the settings as they stand: for one that has no method of its own here.
    pub fn with(mut self, change: impl FnOnce(&mut RunSettings)) -> Jail {
        change(&mut self.settings);
        self
    }

    /// The profile to start from (`jail profile list`); the rules below apply after it.
    pub fn profile(mut self, name: impl Into<String>) -> Jail {
        self.settings.profile = Some(name.into());
        self
    }

    /// Makes `path` and everything beneath it read-only.
    pub fn ro(mut self, path: impl Into<PathBuf>) -> Jail {
        self.settings.ro.push(path.into());
        self
    }

    /// Makes `path` writable; protected names beneath it stay read-only.
    pub fn rw(mut self, path: impl Into<PathBuf>) -> Jail {
        self.settings.rw.push(path.into());
        self
    }

    /// Makes `path` writable through a copy-on-write layer: the host's `path` is untouched, and
    /// the run's writes wait in a layer for `jail diff` / `jail apply`.
    pub fn cow(mut self, path: impl Into<PathBuf>) -> Jail {
        self.settings.cow.push(path.into());
        self
    }

    /// Makes the directory `path` (a package cache) writable through a throwaway layer: nothing
    /// written there reaches the host.
    pub fn cache(mut self, path: impl Into<PathBuf>) -> Jail {
        self.settings.caches.push(path.into());
        self
    }

    /// Hides `path`: it appears empty.
    pub fn hide(mut self, path: impl Into<PathBuf>) -> Jail {
        self.settings.hide.push(path.into());
        self
    }

    /// The working directory inside the jail (default: the caller's).
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Jail {
        self.settings.cwd = Some(dir.into());
        self
    }

    /// /tmp private (the default) or the host's.
    pub fn tmp(mut self, tmp: TmpOption) -> Jail {
        self.settings.tmp = Some(tmp);
        self
    }

    /// The home directories visible or hidden.
    pub fn home(mut self, home: HomeMode) -> Jail {
        self.settings.home = Some(home);
        self
    }

    /// Keeps `KEY` whatever the profile removes, or sets `KEY=VALUE`.
    pub fn env(mut self, key_or_pair: impl Into<String>) -> Jail {
        self.settings.env.push(key_or_pair.into());
        self
    }

    /// Starts from an empty environment (plus [`Jail::env`] and the profile's keep list).
    pub fn env_clear(mut self) -> Jail {
        self.settings.env_clear = true;
        self
    }

    /// Removes the variables matching `pattern` (`*` wildcards).
    pub fn env_deny(mut self, pattern: impl Into<String>) -> Jail {
        self.settings.env_deny.push(pattern.into());
        self
    }

    /// Refuses to run unless this level is reached.
    pub fn require(mut self, level: Require) -> Jail {
        self.settings.require = Some(level);
        self
    }

    /// Kills the whole tree after `timeout` ([`Status::TimedOut`]).
    pub fn timeout(mut self, timeout: Duration) -> Jail {
        self.settings.timeout = Some(timeout);
        self
    }

    /// A resource bound, as `--limit` takes it (`memory=1G`, `procs=256`, `tmp=512M`).
    pub fn limit(mut self, bound: impl Into<String>) -> Jail {
        self.settings.limits.push(bound.into());
        self
    }

    /// A network rule, as `--net` takes it (`none`, `connect=443`, `allow=api.example.org`).
    pub fn net(mut self, rule: impl Into<String>) -> Jail {
        self.settings.net.push(rule.into());
        self
    }

    /// A secret kept outside, as `--secret` takes it (`NAME` or `NAME@HOST,HOST`): the command
    /// gets a placeholder in `NAME`, and the proxy of an `allow=` network adds the value, read
    /// from this process's environment, to the credential headers of requests to those hosts.
    pub fn secret(mut self, spec: impl Into<String>) -> Jail {
        self.settings.secrets.push(spec.into());
        self
    }

    /// Keeps descriptor `fd` open in the command.
    pub fn keep_fd(mut self, fd: i32) -> Jail {
        self.settings.keep_fds.push(fd);
        self
    }

    /// Lets the command create user namespaces (a nested sandbox).
    pub fn allow_userns(mut self) -> Jail {
        self.settings.allow_userns = true;
        self
    }

    /// Lets the command create unix sockets; every connect is mediated.
    pub fn allow_unix_sockets(mut self) -> Jail {
        self.settings.allow_unix_sockets = true;
        self
    }

    /// Lets the command connect to this host unix socket.
    pub fn allow_socket(mut self, path: impl Into<PathBuf>) -> Jail {
        self.settings.allow_sockets.push(path.into());
        self
    }

    /// Writes the run report (JSON) to this file as well.
    pub fn report_file(mut self, path: impl Into<PathBuf>) -> Jail {
        self.settings.report = Some(path.into());
        self
    }

    /// Hands the run report back in [`Outcome::report`].
    pub fn record(mut self, on: bool) -> Jail {
        self.settings.record = on;
        self
    }

    /// Prints, on stderr before the command starts, what the jail allows.
    pub fn notice(mut self, on: bool) -> Jail {
        self.settings.notice = on;
        self
    }

    /// Prints the report's one-line summary on stderr at the end.
    pub fn summary(mut self, on: bool) -> Jail {
        self.settings.summary = on;
        self
    }

    /// Runs even when no layer can protect files (level none).
    pub fn allow_unconfined(mut self, on: bool) -> Jail {
        self.settings.allow_unconfined = on;
        self
    }

    /// The `jail` program [`Jail::spawn`] starts (default: `$JAIL_PROGRAM`, a `jail` beside
    /// this program, or on PATH).
    pub fn program(mut self, path: impl Into<PathBuf>) -> Jail {
        self.program = Some(path.into());
        self
    }

    /// The command's stdin with [`Jail::spawn`] (default: /dev/null: the jail process has a
    /// process group of its own, and a read from the terminal would stop it).
    pub fn stdin(mut self, stdio: Stdio) -> Jail {
        self.stdio.stdin = Some(stdio);
        self
    }

    /// The command's stdout with [`Jail::spawn`] (default: inherited).
    pub fn stdout(mut self, stdio: Stdio) -> Jail {
        self.stdio.stdout = Some(stdio);
        self
    }

    /// The command's and jail's stderr with [`Jail::spawn`] (default: inherited).
    pub fn stderr(mut self, stdio: Stdio) -> Jail {
        self.stdio.stderr = Some(stdio);
        self
    }

    /// The settings and the jail program named for spawning (a session starts one too).
    #[cfg(target_os = "linux")]
    pub(crate) fn parts(&self) -> (&RunSettings, Option<&std::path::Path>) {
        (&self.settings, self.program.as_deref())
    }

    /// The policy the settings resolve to here and now (nothing is created or run).
    pub fn policy(&self) -> Result<Policy, JailError> {
        crate::prepare::policy(&self.settings, false)
    }

    /// What a run would get, as `--dry-run` prints it (JSON): the policy, the features, the level
    /// and gaps, and every layer's plan.
    pub fn dry_run(&self) -> Result<String, JailError> {
        let policy = self.policy()?;
        crate::platform::dry_run(&policy, &self.settings)
    }

    /// Runs the command confined, in this process, and waits for it.
    ///
    /// The supervisor takes this process over for the run (signal mask, child subreaper,
    /// terminal, a fork of the namespaces): call it from a program that is one jail, before any
    /// thread starts; it refuses otherwise. An orchestrator uses [`Jail::spawn`].
    pub fn run(self) -> Result<Outcome, JailError> {
        refuse_threads()?;
        let policy = crate::prepare::policy(&self.settings, true)?;
        crate::timing::mark("policy resolved");
        crate::platform::launch(&policy, &self.settings)
    }

    /// Starts the command confined in a jail process of its own and returns at once. The
    /// settings are checked here first, so a bad path or flag is an error of this call.
    pub fn spawn(self) -> Result<Child, JailError> {
        self.policy()?;
        let program = child::find_program(self.program.as_deref())?;
        Child::spawn(&program, &self.settings, self.stdio)
    }
}

/// A second thread could be holding a lock the forked child needs, or receive the signals the
/// supervisor waits for.
fn refuse_threads() -> Result<(), JailError> {
    if !cfg!(target_os = "linux") {
        return Ok(());
    }
    let threads = std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(1);
    if threads > 1 {
        return Err(JailError::unsupported(
            "Jail::run",
            format!(
                "this process has {threads} threads; the supervisor needs a process of its own \
                 (use Jail::spawn)"
            ),
        ));
    }
    Ok(())
}
