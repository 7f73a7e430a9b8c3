//! Running the command with no sandbox at all: only where nothing else is possible and the
//! caller said `--allow-unconfined` (systems jail has no sandbox for, macOS without
//! sandbox-exec). The policy's environment, working directory and timeout still apply.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::{EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_TIMEOUT, JailError};
use crate::policy::Policy;
use crate::run_semantics;

/// Runs `policy.command` as a plain child and returns the exit code for jail to exit with.
pub fn run(policy: &Policy) -> Result<i32, JailError> {
    let Some(name) = policy.command.first() else {
        return Err(JailError::bad_command("no command given"));
    };
    let mut cmd = Command::new(name);
    cmd.args(&policy.command[1..])
        .env_clear()
        .envs(
            policy
                .env
                .vars
                .iter()
                .filter(|(k, _)| !run_semantics::is_jail_var(k))
                .map(|(k, v)| (k, v)),
        )
        .envs(run_semantics::jail_vars(&policy.profile, None))
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
            end_with_grace(&mut child)?;
            return Ok(EXIT_TIMEOUT);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The timeout as on every platform: SIGTERM (and SIGCONT, since a stopped command would never
/// see it), then SIGKILL once the grace ends.
fn end_with_grace(child: &mut std::process::Child) -> Result<(), JailError> {
    tracing::info!(
        "timeout: sending SIGTERM, SIGKILL in {:?}",
        run_semantics::KILL_GRACE
    );
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill(2) on our own child, not yet reaped (try_wait saw it run).
    unsafe {
        libc::kill(pid, libc::SIGTERM);
        libc::kill(pid, libc::SIGCONT);
    }
    let grace = Instant::now() + run_semantics::KILL_GRACE;
    while Instant::now() < grace {
        if child
            .try_wait()
            .map_err(|e| JailError::io("waiting for the command", e))?
            .is_some()
        {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(())
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
        cow_run: None,
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
    fn a_timeout_sends_sigterm_and_waits_the_grace() {
        let dir = std::env::temp_dir().join(format!("jail-unconfined-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let script = format!(
            "trap 'echo term > {}; kill $!; exit 0' TERM; sleep 5 & wait",
            dir.display()
        );
        let mut p = policy(&["sh", "-c", &script]);
        p.timeout = Some(Duration::from_millis(300));
        assert_eq!(run(&p).unwrap(), EXIT_TIMEOUT);
        let said = std::fs::read_to_string(&dir);
        let _ = std::fs::remove_file(&dir);
        assert_eq!(said.expect("the command saw SIGTERM").trim(), "term");
    }

    #[test]
    fn a_caller_s_jail_policy_is_not_passed_on() {
        let mut p = policy(&[
            "sh",
            "-c",
            "test -z \"${JAIL_POLICY+set}\" && test \"$JAIL\" = 1",
        ]);
        p.env
            .vars
            .push(("JAIL_POLICY".into(), "/forged/policy.json".into()));
        p.env.vars.push(("JAIL".into(), "0".into()));
        assert_eq!(run(&p).unwrap(), 0);
    }

    #[test]
    fn the_environment_is_the_policy_s_alone() {
        let mut p = policy(&["sh", "-c", "test -z \"$HOME\" && test \"$JAIL\" = 1"]);
        p.env.vars.push(("X".into(), "1".into()));
        assert_eq!(run(&p).unwrap(), 0);
    }
}
