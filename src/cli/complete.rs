//! Shell completion from what exists: `jail completions SHELL` prints a script that asks jail
//! itself for each completion (`JAIL_COMPLETE=SHELL jail -- WORDS…`), so `--profile` offers the
//! profiles there are (embedded and the user's), and `diff`/`apply`/`discard` the pending
//! runs' ids, where a script written once could only offer file names.

use clap_complete::engine::CompletionCandidate;
use clap_complete::env::{Bash, Elvish, EnvCompleter, Fish, Powershell, Zsh};

/// The variable the completion scripts set when they call jail back.
pub const VAR: &str = "JAIL_COMPLETE";

/// Answers a completion request for the command `cli` builds and exits, when the completion
/// script called jail; returns otherwise (every ordinary run: one look at the environment).
pub fn complete_if_asked(cli: fn() -> clap::Command) {
    if std::env::var_os(VAR).is_some() {
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        match call_of(&args) {
            Call::Ordinary => return,
            Call::Completion => {}
            Call::Unclear => {
                // Neither run (a Tab on an alias would start a jail for the half-typed line)
                // nor answered as a completion (an exit 0 for a run that never happened).
                eprintln!(
                    "jail: {VAR} is set and jail was called as `jail -- {}`: a completion \
                     request for a command not named jail, or a run with {VAR} left in its \
                     environment; unset {VAR} to run it",
                    crate::text::printable(&args[2].to_string_lossy())
                );
                std::process::exit(crate::error::EXIT_JAIL_ERROR);
            }
        }
        let index = std::env::var("_CLAP_COMPLETE_INDEX")
            .ok()
            .and_then(|i| i.parse().ok());
        if in_the_command(&args, index) {
            // Nothing from jail: the shell falls back to its own (file names).
            std::process::exit(0);
        }
        clap_complete::CompleteEnv::with_factory(cli)
            .var(VAR)
            .bin("jail")
            .completer("jail")
            .complete();
    }
}

/// How jail was called with the completion variable set.
#[derive(Debug, PartialEq, Eq)]
enum Call {
    /// Alone (the registration) or `jail -- jail WORDS…`, as every completion script calls it.
    Completion,
    /// Any subcommand or flag first: the variable was left in an environment and decides
    /// nothing (it would turn `jail status` into a completion that exits 0, a forged
    /// "confined", and `session stop` or `exec` into ones that do nothing).
    Ordinary,
    /// `jail -- WORD…` with WORD not named jail: a script's call for an alias, or a one-shot run
    /// with the variable left in its environment. Refused.
    Unclear,
}

fn call_of(args: &[std::ffi::OsString]) -> Call {
    match args.get(1) {
        None => Call::Completion,
        Some(sep) if sep == "--" => match args.get(2) {
            None => Call::Completion,
            Some(w) if std::path::Path::new(w).file_name() == Some("jail".as_ref()) => {
                Call::Completion
            }
            Some(_) => Call::Unclear,
        },
        Some(_) => Call::Ordinary,
    }
}

/// Whether the word a completion request is for (`jail -- jail WORDS…`, the word at `index`, else
/// the last) comes after the run's own `--`: the command's words are not jail's to complete
/// (clap's completer would offer jail's subcommands there).
fn in_the_command(args: &[std::ffi::OsString], index: Option<usize>) -> bool {
    let Some(sep) = args.iter().position(|a| a == "--") else {
        return false;
    };
    let words = &args[sep + 1..];
    let cursor = index.unwrap_or(words.len().saturating_sub(1));
    words.iter().take(cursor).skip(1).any(|w| w == "--")
}

/// `jail completions SHELL`: the script that registers jail's completion in `shell`.
pub fn script(shell: clap_complete::Shell) -> std::io::Result<Vec<u8>> {
    let env: &dyn EnvCompleter = match shell {
        clap_complete::Shell::Bash => &Bash,
        clap_complete::Shell::Zsh => &Zsh,
        clap_complete::Shell::Fish => &Fish,
        clap_complete::Shell::Elvish => &Elvish,
        clap_complete::Shell::PowerShell => &Powershell,
        _ => &Bash,
    };
    let mut out = Vec::new();
    // The program is looked up in PATH when a completion is asked for: the script stays right
    // when jail is reinstalled elsewhere.
    env.write_registration(VAR, "jail", "jail", "jail", &mut out)?;
    Ok(out)
}

/// The profiles `--profile` can name, each with its description.
pub fn profiles() -> Vec<CompletionCandidate> {
    let Ok(cat) = crate::prepare::catalog() else {
        return Vec::new();
    };
    cat.entries
        .keys()
        .map(|name| {
            let about = cat
                .resolve(name)
                .ok()
                .and_then(|r| r.description)
                .unwrap_or_default();
            CompletionCandidate::new(name).help(Some(crate::text::printable(&about).into()))
        })
        .collect()
}

/// The ids of the copy-on-write runs `jail runs` lists, oldest first, each with its state and
/// command.
pub fn runs() -> Vec<CompletionCandidate> {
    #[cfg(target_os = "linux")]
    {
        use crate::workspace::store::Store;
        let Ok(list) = Store::locate().and_then(|s| s.list()) else {
            return Vec::new();
        };
        list.iter()
            .enumerate()
            .map(|(n, run)| {
                let state = if run.interrupted() {
                    "interrupted".to_string()
                } else {
                    format!("{:?}", run.record.state).to_lowercase()
                };
                let about = format!("{state}: {}", run.record.command.join(" "));
                CompletionCandidate::new(&run.record.id)
                    .help(Some(crate::text::printable(&about).into()))
                    .display_order(Some(n))
            })
            .collect()
    }
    #[cfg(not(target_os = "linux"))]
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<std::ffi::OsString> {
        s.split(' ').map(Into::into).collect()
    }

    #[test]
    fn the_commands_words_are_left_to_the_shell() {
        assert!(in_the_command(&words("jail -- jail --ro . -- "), Some(4)));
        assert!(in_the_command(&words("jail -- jail -- ls"), None));
        assert!(!in_the_command(&words("jail -- jail --profile "), Some(2)));
        assert!(!in_the_command(&words("jail -- jail apply "), None));
        // The word before the run's `--`, completed with the cursor there.
        assert!(!in_the_command(&words("jail -- jail --pro -- ls"), Some(1)));
        // Registration: no words.
        assert!(!in_the_command(&words("jail"), None));
        assert!(!in_the_command(&words("jail --"), None));
    }

    #[test]
    fn only_a_completion_scripts_call_is_a_completion() {
        assert_eq!(call_of(&words("jail")), Call::Completion);
        assert_eq!(call_of(&words("jail -- jail --pro")), Call::Completion);
        let path = words("/usr/bin/jail -- ./target/release/jail ");
        assert_eq!(call_of(&path), Call::Completion);
        assert_eq!(call_of(&words("jail status")), Call::Ordinary);
        assert_eq!(
            call_of(&words("jail session stop s1 --json")),
            Call::Ordinary
        );
        assert_eq!(call_of(&words("jail exec s1 -- true")), Call::Ordinary);
        // An alias's completion, or a run with the variable inherited: neither.
        assert_eq!(call_of(&words("jail -- j --pro")), Call::Unclear);
        assert_eq!(call_of(&words("jail -- make test")), Call::Unclear);
    }
}
