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
