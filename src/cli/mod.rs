//! The command line: parse it, hand a run's flags (its [`RunSettings`]) to [`Jail`]; the other
//! subcommands print what the library knows. Nothing here
//! confines anything: a flag's meaning is in [`args`], what it does is the library's.

pub mod args;
pub(crate) mod complete;
mod man;
mod probe;
mod profile;
#[cfg(target_os = "linux")]
mod session;
mod workspace;

use clap::Parser;

use self::args::{Cli, Command, RunArgs};
use crate::error::{EXIT_JAIL_ERROR, JailError};
use crate::policy::settings::RunSettings;
use crate::sandbox::{Jail, control};
use crate::{notice, policy_file, prepare, status, text};

/// Parses the command line, runs, and returns the process exit code.
pub fn run_cli() -> i32 {
    crate::timing::start();
    complete::complete_if_asked(<Cli as clap::CommandFactory>::command);
    #[cfg(target_os = "linux")]
    if let Some(code) = session::exec_fast_path() {
        return code;
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_JAIL_ERROR } else { 0 };
            let _ = e.print();
            let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
            if let Some(fix) = command_without_separator(&e, &args) {
                text::say(format!("jail: put the command after `--`: {fix}"));
            }
            return code;
        }
    };
    init_logging(cli.run.verbose);
    if cli.run.verbose > 0 {
        crate::timing::enable();
    }
    crate::timing::mark("arguments parsed");
    let result = match cli.subcommand {
        Some(Command::Probe { json }) => probe::probe(json),
        Some(Command::Profile { command }) => profile::profile_command(command),
        Some(Command::Status { json }) => {
            // Outside a jail, runs whose supervisor was killed are finished first.
            #[cfg(target_os = "linux")]
            crate::platform::finish_dead_runs();
            Ok(status::status(json))
        }
        Some(Command::Notice { profile }) => print_notice(profile),
        Some(Command::Completions { shell }) => complete::script(shell)
            .and_then(|s| std::io::Write::write_all(&mut std::io::stdout(), &s))
            .map(|()| 0)
            .map_err(|e| JailError::io("writing the completion script", e)),
        Some(Command::Man { subcommand, dir }) => man::man(&subcommand, dir.as_deref()),
        #[cfg(target_os = "linux")]
        Some(Command::Session { command }) => session::session_command(command),
        #[cfg(target_os = "linux")]
        Some(Command::Exec(args)) => session::exec_command(*args),
        #[cfg(not(target_os = "linux"))]
        Some(Command::Session { .. } | Command::Exec(_)) => Err(JailError::unsupported(
            "jail session",
            "sessions need Linux (namespaces, Landlock, seccomp)",
        )),
        Some(
            c @ (Command::Runs { .. }
            | Command::Diff { .. }
            | Command::Apply { .. }
            | Command::Discard { .. }),
        ) => workspace::workspace_command(c),
        None => run(&cli.run),
    };
    crate::timing::mark("done");
    match result {
        Ok(code) => code,
        Err(e) => {
            text::say(format!("jail: {e}"));
            e.exit_code()
        }
    }
}

/// `jail ls -la`: clap sees `ls` as an unknown subcommand or argument. The command always
/// follows `--` (so that its own flags are never read as jail's), and a first-day user needs
/// to be told that, not only that `ls` is unexpected: the fix is the line itself with `--`
/// before the word (`jail --ro . -- make test`). Not after a subcommand (`jail profile show a
/// b`): no command goes there, and clap's own message names the extra word.
fn command_without_separator(e: &clap::Error, args: &[std::ffi::OsString]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let Some(ContextValue::String(word)) = e
        .get(ContextKind::InvalidArg)
        .or(e.get(ContextKind::InvalidSubcommand))
    else {
        return None;
    };
    if word.starts_with('-')
        || !matches!(
            e.kind(),
            ErrorKind::UnknownArgument | ErrorKind::InvalidSubcommand
        )
        || args.iter().any(|a| a == "--")
    {
        return None;
    }
    let at = args.iter().skip(1).position(|a| a == word.as_str())? + 1;
    let before = <Cli as clap::CommandFactory>::command()
        .ignore_errors(true)
        .try_get_matches_from(&args[..at]);
    if before.is_ok_and(|m| m.subcommand_name().is_some()) {
        return None;
    }
    let words = |a: &[std::ffi::OsString]| -> Vec<String> {
        a.iter()
            .map(|w| text::shell_word(&w.to_string_lossy()))
            .collect()
    };
    let mut fix = vec!["jail".to_string()];
    fix.extend(words(&args[1..at]));
    fix.push("--".into());
    fix.extend(words(&args[at..]));
    Some(fix.join(" "))
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::filter::LevelFilter;
    let level = match verbose {
        0 => LevelFilter::WARN,
        1 => LevelFilter::INFO,
        2 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    };
    use std::io::IsTerminal;
    // Colours only for a terminal: in a pipe or a file the escape sequences are noise.
    let fmt = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .without_time()
        .with_target(false);
    // RUST_LOG's directives need an EnvFilter; without it a level is enough, and cheaper to
    // build (every run pays it before anything else).
    let _ = match std::env::var_os("RUST_LOG") {
        Some(_) => fmt
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level.to_string())),
            )
            .try_init(),
        None => fmt.with_max_level(level).try_init(),
    };
}

/// A run: the dry run's plans printed, or the command run in this process.
fn run(args: &RunArgs) -> Result<i32, JailError> {
    let settings = match args.settings_fd {
        Some(fd) => crate::sandbox::read_settings(fd, &args.settings)?,
        None => args.settings.clone(),
    };
    #[cfg(target_os = "linux")]
    if settings.session.is_some() {
        return crate::session::serve::serve(settings);
    }
    let control_fd = settings.control_fd;
    let jail = Jail::from_settings(settings);
    if args.dry_run {
        println!("{}", jail.dry_run()?);
        // A dry run that exits 0 for a command no run could start would say "this works".
        let policy = jail.policy()?;
        let path_var = policy
            .env
            .vars
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_ref());
        if let Some(name) = policy.command.first()
            && let Err(e) = crate::command::find_command(name, path_var, &policy.cwd)
        {
            eprintln!("jail: {} (a run would exit {})", e.message, e.code);
            return Ok(e.code);
        }
        return Ok(0);
    }
    let control = control_fd
        .map(control::Sender::take)
        .transpose()
        .map_err(|e| {
            let fd = control_fd.map(|f| f.to_string()).unwrap_or_default();
            JailError::bad_flag("--control-fd", fd, format!("--control-fd {e}"))
        })?;
    let result = jail.run();
    if let Some(sender) = control {
        sender.send(&result);
    }
    result.map(|o| o.exit_code)
}

/// `jail notice`: inside a jail, its policy file's sentences; elsewhere, a profile's.
fn print_notice(profile: Option<String>) -> Result<i32, JailError> {
    if profile.is_none() {
        if let Some(file) = policy_file::read_policy_file() {
            println!("{}", notice::notice_text(&notice::Summary::of_file(&file)));
            return Ok(0);
        }
    }
    let settings = RunSettings {
        profile: Some(profile.unwrap_or_else(|| "default".into())),
        // The sentences describe the profile, not a run from here: a profile that hides the
        // homes must not refuse because this is asked from HOME.
        cwd: Some("/".into()),
        command: vec!["true".into()],
        ..RunSettings::default()
    };
    let policy = prepare::policy(&settings, false)?;
    let mut summary = notice::Summary::of(&policy);
    // The project is where this is asked from (the profile's "." paths are resolved there).
    if let Ok(here) = std::env::current_dir() {
        summary.project_writable = policy.access_at(&here) == crate::policy::Access::Rw;
    }
    println!("{}", notice::notice_text(&summary));
    Ok(0)
}
