//! Command-line definitions (clap derive) and nothing else: what each flag means is documented
//! here, what it does is [`crate::policy::request::Request`]'s.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::ArgValueCandidates;

use super::complete;

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

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The profile to start from (see `jail profile list`); flags apply after it and win.
    #[arg(long, value_name = "NAME", default_value = "default", value_parser = Text,
          add = ArgValueCandidates::new(complete::profiles))]
    pub profile: String,

    /// Make PATH (and everything beneath it) read-only. Repeatable.
    #[arg(long = "ro", value_name = "PATH")]
    pub ro: Vec<PathBuf>,

    /// Make PATH writable; protected names beneath it (.git/hooks, .git/config, .envrc, agent
    /// settings…) stay read-only unless named exactly. Repeatable.
    #[arg(long = "rw", value_name = "PATH")]
    pub rw: Vec<PathBuf>,

    /// Make the directory PATH writable through a copy-on-write layer: the host's PATH is not
    /// changed during the run; every write waits in a layer under jail's state directory until
    /// `jail apply` (review with `jail diff`). `.git` is part of the layer: commits come back as
    /// a branch. Repeatable.
    #[arg(long = "cow", value_name = "PATH")]
    pub cow: Vec<PathBuf>,

    /// Make the directory PATH (a package cache: ~/.cargo/registry, ~/.npm, ~/.cache/pip…)
    /// writable through a throwaway layer: builds can fill it, and nothing written reaches the
    /// host's PATH; read-only where no layer can be mounted. Repeatable.
    #[arg(long = "cache", value_name = "PATH")]
    pub cache: Vec<PathBuf>,

    /// Hide PATH: it appears empty and its contents cannot be read. Repeatable.
    #[arg(long = "hide", value_name = "PATH")]
    pub hide: Vec<PathBuf>,

    /// Working directory inside the jail (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,

    /// /tmp inside the jail: a private writable tmpfs (default), or the host's /tmp made writable.
    #[arg(long, value_enum)]
    pub tmp: Option<TmpArg>,

    /// Home directories (HOME, /home, /root, passwd's): `visible` (readable but the hide list)
    /// or `hidden` (hidden but the --ro/--rw paths, the profile's paths, the working directory,
    /// and the PATH directories and the command's installation in them). Default: the
    /// profile's, else visible.
    #[arg(long, value_enum, value_name = "MODE")]
    pub home: Option<HomeArg>,

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
    pub require: Option<RequireArg>,

    /// Keep file descriptor N open in the command (all others but 0, 1, 2 are closed). Repeatable.
    #[arg(long = "keep-fd", value_name = "N", value_parser = parse_descriptor)]
    pub keep_fd: Vec<i32>,

    /// Kill the whole tree after DURATION (e.g. 30s, 5m, 1h, 1.5s; bare numbers are seconds); exit 124.
    #[arg(long, value_name = "DURATION", value_parser = crate::policy::duration::parse)]
    pub timeout: Option<std::time::Duration>,

    /// Resource bounds: `memory=SIZE` (the whole tree, or each process without a cgroup),
    /// `procs=N` (processes and threads), `tmp=SIZE` and `shm=SIZE` (the private /tmp and
    /// /dev/shm), `cpu=DURATION` (CPU time of each process), `layer=SIZE` (each --cow
    /// layer); `none` or 0 lifts one.
    /// Comma-separated, repeatable; wins over the profile's `[limits]`.
    #[arg(long = "limit", value_name = "NAME=VALUE", value_parser = Text)]
    pub limit: Vec<String>,

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
    pub allow_socket: Vec<PathBuf>,

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
    pub secret: Vec<String>,

    /// With --cow: at the end write the run's changes to FILE as a git patch (binary-safe) and
    /// discard the layer, for pipelines. FILE must not be writable inside the jail.
    #[arg(long, value_name = "FILE")]
    pub patch: Option<PathBuf>,

    /// A live event stream, JSON lines, to FILE (a named pipe too) or to descriptor N (`fd:N`):
    /// `start`, `wrote` the first time each path under a --cow root changes, `denied` for each
    /// access Landlock refused (where audit records can be read), `exit` last. Bounded and
    /// non-blocking: a reader that falls behind loses lines (counted in `exit`), never stalls
    /// the run. FILE must not be writable inside the jail.
    #[arg(long, value_name = "FILE|fd:N")]
    pub events: Option<OsString>,

    /// Write a JSON report of the run to FILE at the end (also when the command is killed or
    /// times out): files changed under the writable paths, accesses Landlock refused, network
    /// decisions, the layers that held. FILE must not be writable inside the jail.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,

    /// A unix stream socket inherited as descriptor N, for a program that starts jail: at the end
    /// jail writes how the run went to it (one JSON document: the outcome, or the error), and a
    /// byte `T` on it, or its closing, stops the whole tree as a timeout does (`K`: SIGKILL at
    /// once). Never handed to the command. `jail::Jail::spawn` uses this.
    #[arg(long, value_name = "N")]
    pub control_fd: Option<i32>,

    /// With --control-fd: build the run report and send it there with the outcome.
    #[arg(long, requires = "control_fd")]
    pub control_report: bool,

    /// Print a one-line summary of the run to stderr at the end (changes, denials, network).
    #[arg(long)]
    pub summary: bool,

    /// Run even when no layer can protect files (level none), with a warning on every run.
    #[arg(long)]
    pub allow_unconfined: bool,

    /// Print the resolved policy and each layer's plan as JSON; run nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// More logging (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD", value_hint = clap::ValueHint::CommandWithArguments)]
    pub command: Vec<OsString>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TmpArg {
    Private,
    Host,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HomeArg {
    Visible,
    Hidden,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RequireArg {
    Full,
    Landlock,
    Mount,
    Any,
}

/// A value that is text (a profile name, a run id, a rule): one that is not UTF-8 is refused
/// naming the argument and its bytes, where clap's own refusal names neither.
#[derive(Debug, Clone, Copy)]
struct Text;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
