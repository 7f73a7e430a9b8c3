//! Running the command with no sandbox at all: only where nothing else is possible and the
//! caller said `--allow-unconfined` (systems jail has no sandbox for, macOS without
//! sandbox-exec). The policy's environment, working directory and timeout still apply.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::{EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_TIMEOUT, JailError};
use crate::policy::Policy;

/// Runs `policy.command` as a plain child and returns the exit code for jail to exit with.
pub fn run(policy: &Policy) -> Result<i32, JailError> {
    let Some(name) = policy.command.first() else {
        return Err(JailError::bad_command("no command given"));
    };
    let mut cmd = Command::new(name);
    cmd.args(&policy.command[1..])
        .env_clear()
        .envs(policy.env.vars.iter().map(|(k, v)| (k, v)))
        .env("JAIL", "1")
        .env("JAIL_PROFILE", &policy.profile)
        .current_dir(&policy.cwd);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let shown = name.to_string_lossy();
            let (code, what) = match e.kind() {
                std::io::ErrorKind::NotFound => (EXIT_NOT_FOUND, "command not found".to_string()),
                _ => (EXIT_NOT_EXECUTABLE, format!("cannot execute: {e}")),
            };
            crate::text::say(format!("jail: {shown}: {what}"));
            return Ok(code);
        }
    };
    let deadline = policy.timeout.map(|t| Instant::now() + t);
    loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| JailError::io("waiting for the command", e))?
        {
            return Ok(status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)));
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(EXIT_TIMEOUT);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Where jail has no sandbox: refuse, unless the caller accepts running unconfined.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub fn launch(
    policy: &Policy,
    options: &crate::policy::settings::RunSettings,
) -> Result<crate::sandbox::outcome::Outcome, JailError> {
    if !options.allow_unconfined {
        return Err(JailError::LevelNotMet {
            required: "partial".into(),
            missing: "jail has no sandbox for this system; --allow-unconfined runs anyway".into(),
        });
    }
    crate::text::say("jail: warning: UNCONFINED (--allow-unconfined): no sandbox on this system");
    let code = run(policy)?;
    Ok(crate::sandbox::outcome::Outcome {
        status: crate::sandbox::outcome::Status::Exited { code },
        exit_code: code,
        level: crate::enforcement::Level::None,
        gaps: vec!["no sandbox on this system".into()],
    })
}

/// Where jail has no sandbox, a dry run shows the policy alone.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub fn dry_run(
    policy: &Policy,
    _: &crate::policy::settings::RunSettings,
) -> Result<String, JailError> {
    Ok(crate::text::versioned_json(policy))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(command: &[&str]) -> Policy {
        let mut p = Policy::probe_default();
        p.command = command.iter().map(Into::into).collect();
        p.cwd = std::env::temp_dir();
        p.env.vars = vec![("PATH".into(), "/usr/bin:/bin".into())];
        p
    }

    #[test]
    fn exit_codes_are_the_command_s_or_the_shell_conventions() {
        assert_eq!(run(&policy(&["sh", "-c", "exit 7"])).unwrap(), 7);
        assert_eq!(run(&policy(&["sh", "-c", "kill -TERM $$"])).unwrap(), 143);
        assert_eq!(run(&policy(&["no-such-command-jail"])).unwrap(), 127);
        let mut p = policy(&["sleep", "5"]);
        p.timeout = Some(Duration::from_millis(100));
        assert_eq!(run(&p).unwrap(), EXIT_TIMEOUT);
    }

    #[test]
    fn the_environment_is_the_policy_s_alone() {
        let mut p = policy(&["sh", "-c", "test -z \"$HOME\" && test \"$JAIL\" = 1"]);
        p.env.vars.push(("X".into(), "1".into()));
        assert_eq!(run(&p).unwrap(), 0);
    }
}
