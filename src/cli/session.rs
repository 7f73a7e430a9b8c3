//! `jail session start|list|stop` and `jail exec`: the library's sessions
//! ([`crate::session`]), printed.

use std::ffi::OsString;

use super::args::{ExecArgs, SessionCommand};
use crate::error::JailError;
use crate::session::client::{self, ExecOptions};
use crate::text;

pub fn session_command(command: SessionCommand) -> Result<i32, JailError> {
    match command {
        SessionCommand::Start {
            name,
            idle_timeout,
            settings,
        } => {
            let program = std::env::current_exe()
                .map_err(|e| JailError::io("finding this program (/proc/self/exe)", e))?;
            let (session, _child) =
                client::start(&settings, &program, name.as_deref(), idle_timeout)?;
            // The serving process outlives this one (a session of its own): nothing to wait for.
            println!("{}", session.name());
            Ok(0)
        }
        SessionCommand::List { json } => {
            let sessions = client::list();
            if json {
                println!(
                    "{}",
                    text::versioned_json(&serde_json::json!({ "sessions": sessions }))
                );
            } else if sessions.is_empty() {
                println!("no sessions");
            } else {
                for s in &sessions {
                    println!(
                        "{}  pid {}  profile {}  level {}  running {}  execs {} ({})  cwd {}",
                        text::printable(&s.name),
                        s.pid,
                        text::printable(&s.profile),
                        s.level,
                        s.running,
                        s.execs,
                        if s.execs_isolated {
                            "isolated"
                        } else {
                            "not isolated"
                        },
                        text::path_text(&s.cwd)
                    );
                }
            }
            Ok(0)
        }
        SessionCommand::Stop { name, json } => {
            let outcome = client::stop_named(&name)?;
            if json {
                println!("{}", text::versioned_json(&outcome));
            } else {
                text::say(format!(
                    "jail: session {} ended: {} (level {})",
                    text::printable(&name),
                    outcome.status.name(),
                    outcome.level.name()
                ));
                // The serving process's own line about the layers went to /dev/null with it.
                if let Some(id) = &outcome.cow_run {
                    text::say(format!(
                        "jail: its changes wait as run {id}; review: jail diff {id}; apply: jail apply {id}"
                    ));
                }
            }
            Ok(outcome.exit_code)
        }
    }
}

/// `jail exec NAME … -- CMD`, parsed on its own: an agent's every tool call pays this start, and
/// building the whole command line (every run flag, every subcommand) and the log subscriber is
/// a third of what the client runs. Help, a bad flag, anything else: the full parser, which
/// prints what it always prints.
pub fn exec_fast_path() -> Option<i32> {
    use clap::{Args, FromArgMatches};
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_none_or(|a| a != "exec") {
        return None;
    }
    let command = ExecArgs::augment_args(clap::Command::new("exec").no_binary_name(false));
    let matches = command.try_get_matches_from(&args[1..]).ok()?;
    let parsed = ExecArgs::from_arg_matches(&matches).ok()?;
    Some(match exec_command(parsed) {
        Ok(code) => code,
        Err(e) => {
            text::say(format!("jail: {e}"));
            e.exit_code()
        }
    })
}

pub fn exec_command(args: ExecArgs) -> Result<i32, JailError> {
    let mut env = Vec::new();
    for e in &args.env {
        let (k, v): (OsString, OsString) = match e.split_once('=') {
            Some((k, v)) => (k.into(), v.into()),
            None => match std::env::var_os(e) {
                Some(v) => (e.into(), v),
                // Unset here: nothing to pass (as --env NAME does for a run).
                None => continue,
            },
        };
        env.push((k, v));
    }
    let options = ExecOptions {
        cwd: args.cwd,
        env,
        timeout: args.timeout,
    };
    client::exec_here(&args.name, &args.command, &options)
}
