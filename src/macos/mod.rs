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
use std::path::Path;

pub use crate::command::{NotRunnable, find_command};
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
        if crate::run_semantics::is_jail_var(k) || k == "TMPDIR" {
            continue;
        }
        let value = match policy.tmp {
            TmpMode::Private => in_run_tmp(v, tmp_dir).unwrap_or_else(|| v.clone()),
            TmpMode::Host => v.clone(),
        };
        out.push((k.clone(), value));
    }
    out.extend(crate::run_semantics::jail_vars(
        &policy.profile,
        policy_file.map(Path::as_os_str),
    ));
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
