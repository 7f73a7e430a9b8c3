//! The one place that picks this system's launcher: Linux (mount view, Landlock, seccomp under
//! the supervisor), macOS (Seatbelt), elsewhere nothing but an unconfined run the caller accepts.

use crate::error::JailError;
use crate::policy::Policy;
use crate::policy::settings::RunSettings;
use crate::sandbox::outcome::Outcome;

/// Runs `policy` confined as this system allows, in this process.
pub fn launch(policy: &Policy, options: &RunSettings) -> Result<Outcome, JailError> {
    #[cfg(target_os = "linux")]
    return crate::linux::run::launch::launch(policy, options);
    #[cfg(target_os = "macos")]
    return crate::macos::launch::launch(policy, options);
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    return crate::unconfined::launch(policy, options);
}

/// What a run of `policy` would get here, every layer's plan included (`--dry-run`).
pub fn dry_run(policy: &Policy, options: &RunSettings) -> Result<String, JailError> {
    #[cfg(target_os = "linux")]
    return crate::linux::run::launch::dry_run(policy, options);
    #[cfg(target_os = "macos")]
    return crate::macos::launch::dry_run(policy, options);
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    return crate::unconfined::dry_run(policy, options);
}

/// Finishes the runs whose supervisor was killed (their journal says what is left to do).
/// Only Linux runs keep a journal.
#[cfg(target_os = "linux")]
pub fn finish_dead_runs() {
    crate::linux::run::journal::finish_dead_runs();
}

/// `jail status`: each of `claims` checked against what the kernel says of this process.
#[cfg(target_os = "linux")]
pub fn evidence(path: &str, claims: Option<&crate::claims::Claims>) -> Vec<crate::claims::Check> {
    crate::linux::observe::evidence::gather(path, claims)
}

/// `jail probe`: how a run of `policy` would be bounded here.
#[cfg(target_os = "linux")]
pub fn limits_plan(policy: &Policy, mount: bool) -> Option<crate::linux::layers::LimitsPlan> {
    let host = crate::linux::layers::LimitsHost::detect();
    crate::linux::layers::compile_limits(policy, &host, mount).ok()
}

/// `jail probe`: whether Landlock's denials can be read from the audit records, or why not.
#[cfg(target_os = "linux")]
pub fn denials_readable(landlock_abi: u32) -> Result<(), String> {
    crate::linux::observe::audit::open(landlock_abi)
        .map(drop)
        .map_err(|why| why.to_string())
}

/// `jail probe`: whether unix connects can be mediated (seccomp user notification), or why not.
#[cfg(target_os = "linux")]
pub fn unix_mediation_available() -> Result<(), String> {
    crate::linux::layers::unix_mediation_available()
}
