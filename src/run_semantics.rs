//! What a run means on every platform, written once: the grace between SIGTERM and SIGKILL when
//! `--timeout` expires, and the `JAIL*` variables the command finds. Linux, macOS and the
//! unconfined run use these; the exit codes are [`crate::error`]'s.

use std::ffi::{OsStr, OsString};
use std::time::Duration;

/// Time between SIGTERM and SIGKILL when `--timeout` expires or the caller stops the run: a
/// command gets to remove its temporary files and write its last line.
pub const KILL_GRACE: Duration = Duration::from_secs(2);

/// The variables jail sets for the command. A caller's own values are dropped: a command that
/// trusts `JAIL_POLICY` must find jail's file there, never one its caller named.
pub const JAIL_VARS: [&str; 3] = ["JAIL", "JAIL_PROFILE", "JAIL_POLICY"];

/// Whether `name` is one of [`JAIL_VARS`].
pub fn is_jail_var(name: &OsStr) -> bool {
    JAIL_VARS.iter().any(|n| name == *n)
}

/// `JAIL=1`, `JAIL_PROFILE` and, when the run has a policy file, `JAIL_POLICY`.
pub fn jail_vars(profile: &str, policy_file: Option<&OsStr>) -> Vec<(OsString, OsString)> {
    let mut out = vec![
        ("JAIL".into(), "1".into()),
        ("JAIL_PROFILE".into(), profile.into()),
    ];
    if let Some(file) = policy_file {
        out.push(("JAIL_POLICY".into(), file.to_owned()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jail_var_is_known_and_the_policy_only_when_given() {
        let with = jail_vars("ci", Some(OsStr::new("/dev/jail/policy.json")));
        assert!(with.iter().all(|(k, _)| is_jail_var(k)));
        assert_eq!(with.len(), 3);
        assert_eq!(jail_vars("ci", None).len(), 2);
        assert!(!is_jail_var(OsStr::new("JAILX")));
    }
}
