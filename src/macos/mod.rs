//! macOS: the policy as a generated Seatbelt (SBPL) profile, run through `/usr/bin/sandbox-exec`.
//!
//! [`seatbelt`] writes the profile (pure, unit-tested on every system); `exec` (macOS only)
//! writes it to a private file and runs the command under it. The helpers here are pure too:
//! what the command's environment becomes, and how the command is found before launching.

pub mod seatbelt;

#[cfg(target_os = "macos")]
pub mod exec;
#[cfg(target_os = "macos")]
pub mod launch;

#[cfg(test)]
mod tests;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::{EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND};
use crate::policy::{Policy, TmpMode};

pub use seatbelt::{Params, profile, quote, real_path};

/// The command's environment under Seatbelt: the policy's, without any `JAIL*` the caller set,
/// plus `JAIL=1`, `JAIL_PROFILE`, `JAIL_POLICY` (when given) and `TMPDIR` naming the run's
/// temporary directory. With `--tmp private` (macOS has no private `/tmp`), a value that names
/// `/tmp` or a path beneath it is moved into the run's directory: the review profile's
/// `CARGO_TARGET_DIR=/tmp/jail-cache/…` lands where the command may write.
pub fn child_env(
    policy: &Policy,
    tmp_dir: &Path,
    policy_file: Option<&Path>,
) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = Vec::new();
    for (k, v) in &policy.env.vars {
        if ["JAIL", "JAIL_PROFILE", "JAIL_POLICY", "TMPDIR"]
            .iter()
            .any(|n| k.as_os_str() == *n)
        {
            continue;
        }
        let value = match policy.tmp {
            TmpMode::Private => in_run_tmp(v, tmp_dir).unwrap_or_else(|| v.clone()),
            TmpMode::Host => v.clone(),
        };
        out.push((k.clone(), value));
    }
    out.push(("JAIL".into(), "1".into()));
    out.push(("JAIL_PROFILE".into(), policy.profile.clone().into()));
    if let Some(file) = policy_file {
        out.push(("JAIL_POLICY".into(), file.into()));
    }
    out.push(("TMPDIR".into(), tmp_dir.into()));
    out
}

/// `/tmp/x` (or `/private/tmp/x`) as the same name in `tmp_dir`; None for any other value.
fn in_run_tmp(value: &OsStr, tmp_dir: &Path) -> Option<OsString> {
    let path = Path::new(value);
    if !value.as_bytes().starts_with(b"/") {
        return None;
    }
    ["/tmp", "/private/tmp"].iter().find_map(|root| {
        let rest = path.strip_prefix(root).ok()?;
        Some(if rest.as_os_str().is_empty() {
            tmp_dir.as_os_str().to_owned()
        } else {
            tmp_dir.join(rest).into_os_string()
        })
    })
}

/// Why a command cannot be started, as the exit code `env` would use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotRunnable {
    pub code: i32,
    pub message: String,
}

/// The command's path, found as `execvp` would with the child's `PATH` (a name with a `/` is
/// taken relative to `cwd`): 127 when nothing is found, 126 when what is found is not an
/// executable file. Looked up before launching, because `sandbox-exec` reports its own failure
/// to exec with an exit code of its own.
pub fn find_command(
    name: &OsStr,
    path_var: Option<&OsStr>,
    cwd: &Path,
) -> Result<PathBuf, NotRunnable> {
    use std::os::unix::fs::PermissionsExt;
    let shown = name.to_string_lossy();
    let check = |candidate: &Path| -> Option<Result<PathBuf, NotRunnable>> {
        let meta = std::fs::metadata(candidate).ok()?;
        Some(
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                Ok(candidate.to_path_buf())
            } else {
                Err(NotRunnable {
                    code: EXIT_NOT_EXECUTABLE,
                    message: format!("{shown}: not an executable file"),
                })
            },
        )
    };
    let not_found = || NotRunnable {
        code: EXIT_NOT_FOUND,
        message: format!("{shown}: command not found"),
    };
    if name.is_empty() {
        return Err(not_found());
    }
    if name.as_bytes().contains(&b'/') {
        return check(&cwd.join(name)).unwrap_or_else(|| Err(not_found()));
    }
    let path_var = path_var.unwrap_or(OsStr::new("/usr/bin:/bin:/usr/sbin:/sbin"));
    let mut first_error = None;
    for dir in path_var.as_bytes().split(|b| *b == b':') {
        let dir = if dir.is_empty() {
            cwd.to_path_buf()
        } else {
            cwd.join(OsStr::from_bytes(dir))
        };
        match check(&dir.join(name)) {
            Some(Ok(found)) => return Ok(found),
            Some(Err(e)) => {
                first_error.get_or_insert(e);
            }
            None => {}
        }
    }
    Err(first_error.unwrap_or_else(not_found))
}
