//! Command-line definitions (clap derive) and nothing else: what each flag means is documented
//! here (a run's, in [`RunSettings`]), what it does is the library's.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use clap_complete::ArgValueCandidates;

use super::complete;
use crate::policy::settings::{RunSettings, Text};

#[derive(Debug, Parser)]
#[command(
    name = "jail",
    version,
    long_version = env!("JAIL_LONG_VERSION"),
    about = "Run a command, and everything it starts, inside a kernel-enforced sandbox",
    long_about = "Run a command, and everything it starts, inside a kernel-enforced sandbox: a read-only \
                  mount view, Landlock filesystem rules and a seccomp filter. With no flags the whole \
                  filesystem is read-only, /tmp is private and credentials and agent sockets are hidden.",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = AFTER_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub subcommand: Option<Command>,

    #[command(flatten)]
    pub run: RunArgs,
}

/// Exit codes and environment, at the end of `--help` (kept true by tests/cli_errors.rs).
const AFTER_HELP: &str = "\
Exit codes:
  N        the command's own exit status
  128+N    the command was killed by signal N
  124      --timeout ran out (the whole tree is killed)
  125      jail's own error: a bad flag or path, the sandbox not built, --require not met
  126      the command was found but is not executable
  127      the command was not found
  jail status: 0 inside a jail (confirmed), 2 advisory, 1 not inside

Environment:
  XDG_CONFIG_HOME   your profiles: $XDG_CONFIG_HOME/jail/profiles (default ~/.config)
  XDG_STATE_HOME    copy-on-write runs: $XDG_STATE_HOME/jail/runs (default ~/.local/state)
  RUST_LOG          log filter directives, with -v
  JAIL_PROGRAM      the jail binary the library spawns (default: a jail beside the program)
  Set for the command: JAIL=1, JAIL_PROFILE (the profile's name), JAIL_POLICY (the policy
  file jail status reads). Secrets leave the command's environment by name (--env to keep one).";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print what this kernel offers and the level a run would get.
    Probe {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List or show profiles (embedded, and yours in $XDG_CONFIG_HOME/jail/profiles).
    Profile {
        #[command(subcommand)]
        command: ProfileCommand,
    },
    /// Inside a jail: exit 0 and print the active policy and level; elsewhere: exit 1. Checks what
    /// the kernel says (no_new_privs, seccomp, a write probe), not only the JAIL variable.
    Status {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Copy-on-write runs waiting for review (`--cow`): their ids, state and counts.
    Runs {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print a copy-on-write run's changes as a git patch (flagged entries first).
    Diff {
        /// The run's id (or a unique prefix), as `jail runs` lists it.
        #[arg(value_parser = Text, add = ArgValueCandidates::new(complete::runs))]
        id: String,
    },
    /// Apply a copy-on-write run's changes to its root. Refuses, naming the files, where the
    /// root changed since the run started in the same places; leaves flagged entries out
    /// unless named or --include-flagged.
    Apply {
        /// The run's id (or a unique prefix), as `jail runs` lists it.
        #[arg(value_parser = Text, add = ArgValueCandidates::new(complete::runs))]
        id: String,
        /// Only these paths (a directory takes what is beneath it); named flagged entries are
        /// applied.
        paths: Vec<PathBuf>,
        /// Apply flagged entries too (hooks, configs, executables, links out of the root…).
        #[arg(long)]
        include_flagged: bool,
        /// Apply what does not conflict and keep the conflicting rest in the layer.
        #[arg(long)]
        skip_conflicts: bool,
        /// Merge a text file the host and the run both changed with `git merge-file` against
        /// the commit checked out at the run's start; only clean merges are applied.
        #[arg(long)]
        merge: bool,
    },
    /// Throw a copy-on-write run's layer away.
    Discard {
        /// The run's id (or a unique prefix), as `jail runs` lists it.
        #[arg(value_parser = Text, add = ArgValueCandidates::new(complete::runs))]
        id: String,
    },
    /// Print two sentences for an agent's prompt: what is read-only or hidden, and what stays open.
    Notice {
        /// The profile to describe when not inside a jail (default: default).
        #[arg(long, value_name = "NAME", value_parser = Text, add = ArgValueCandidates::new(complete::profiles))]
        profile: Option<String>,
    },
    /// Print a shell completion script (e.g. `jail completions bash > /etc/bash_completion.d/jail`);
    /// it asks jail for the profiles and run ids there are at each completion.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Sessions: one sandbox kept up for an agent's session, commands started into it with
    /// `jail exec` in about a millisecond (start, list, stop).
    Session {
        #[command(subcommand)]
        command: SessionCommand,
    },
    /// Run a command in a session, confined exactly as the session is, with this process's
    /// stdin, stdout and stderr (a terminal too) and its signals passed on; exits with the
    /// command's status (128+N, 124 after --timeout, 126/127), 125 when the session is unknown
    /// or ended.
    Exec(Box<ExecArgs>),
    /// Print the man page, roff (e.g. `jail man > /usr/local/share/man/man1/jail.1`), or a
    /// subcommand's (`jail man apply` is jail-apply(1)); with --dir, write every page there.
    Man {
        /// The subcommand whose page to print (`profile show` is jail-profile-show(1)).
        #[arg(value_name = "SUBCOMMAND")]
        subcommand: Vec<String>,
        /// Write jail.1 and a page per subcommand into DIR (e.g. /usr/local/share/man/man1).
        #[arg(long, value_name = "DIR", conflicts_with = "subcommand")]
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// The profiles there are, where each comes from, and what it is for.
    List,
    /// One profile: its file, or with --resolved everything it extends merged in.
    Show {
        /// The profile's name, as `jail profile list` lists it.
        #[arg(value_parser = Text, add = ArgValueCandidates::new(complete::profiles))]
        name: String,
        /// Merge in what it extends.
        #[arg(long)]
        resolved: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check a profile file before installing it: it parses, what it extends exists, and what
    /// it would leave out here (unset ${VAR}s, base = false). Exit 0 when usable, 125 when not.
    Check { file: PathBuf },
}

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Start a session: the sandbox a run with these flags gets (profile, rules, network,
    /// limits, --require, --cow), kept up with nothing running; returns when it is ready and
    /// prints its name.
    #[command(mut_arg("command", |a| a.required(false).hide(true)))]
    Start {
        /// The session's name (letters, digits, '_', '-'); a fresh one when not given.
        #[arg(long, value_parser = Text)]
        name: Option<String>,
        /// Stop the session after DURATION with no command running (e.g. 10m).
        #[arg(long, value_name = "DURATION", value_parser = crate::policy::duration::parse)]
        idle_timeout: Option<std::time::Duration>,
        #[command(flatten)]
        settings: Box<RunSettings>,
    },
    /// The live sessions (those whose supervisor was killed are cleaned up on the way).
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Stop a session: every process of it ends (SIGTERM, SIGKILL after 2 s), what it planted
    /// is moved aside, its report is written and a --cow session's layer waits as a run for
    /// `jail diff` / `jail apply`. Exits with the session's exit code.
    Stop {
        /// The session's name, as `jail session list` shows it.
        #[arg(value_parser = Text)]
        name: String,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `jail exec`'s flags.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The session's name, as `jail session list` shows it.
    #[arg(value_parser = Text)]
    pub name: String,
    /// The working directory, relative to the session's (or absolute, inside it).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Set variable NAME for the command (NAME=VALUE), or pass this process's NAME. Repeatable.
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    pub env: Vec<String>,
    /// SIGTERM the command's process group after DURATION, SIGKILL 2 s later; exit 124.
    #[arg(long, value_name = "DURATION", value_parser = crate::policy::duration::parse)]
    pub timeout: Option<std::time::Duration>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<std::ffi::OsString>,
}

/// The run's flags: the settings ([`RunSettings`], where each flag is written) and what only
/// the command line has.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub settings: RunSettings,

    /// Print the resolved policy and each layer's plan as JSON; run nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// More logging (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// The settings as JSON on descriptor N, read to its end and closed before anything else
    /// (how `jail::Jail::spawn` hands a run over); only the command follows, after `--`.
    #[arg(long, value_name = "N", hide = true)]
    pub settings_fd: Option<i32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
