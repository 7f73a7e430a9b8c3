//! Errors that stop a launch, and the exit code each one maps to.
//!
//! The codes follow `env`, `timeout` and `chroot`: 125 for jail's own failures, 126 when the command
//! cannot be executed, 127 when it cannot be found.

use std::path::PathBuf;

/// Exit code for every error of jail itself (bad flag, sandbox not built, level not met).
pub const EXIT_JAIL_ERROR: i32 = 125;
/// Exit code when the command exists but cannot be executed.
pub const EXIT_NOT_EXECUTABLE: i32 = 126;
/// Exit code when the command is not found.
pub const EXIT_NOT_FOUND: i32 = 127;
/// Exit code when `--timeout` expired.
pub const EXIT_TIMEOUT: i32 = 124;

#[derive(Debug, thiserror::Error)]
pub enum JailError {
    #[error("{flag} {path}: {reason}")]
    BadPath {
        flag: String,
        path: PathBuf,
        reason: String,
    },
    #[error("{0}")]
    BadInput(String),
    #[error("required enforcement level '{required}' not met: {missing}")]
    LevelNotMet { required: String, missing: String },
    #[error("{layer}: {step}: {reason}")]
    Layer {
        layer: &'static str,
        step: String,
        reason: String,
    },
    #[error("{0}")]
    Io(String),
}

impl JailError {
    pub fn layer(layer: &'static str, step: impl Into<String>, reason: impl ToString) -> Self {
        JailError::Layer {
            layer,
            step: step.into(),
            reason: reason.to_string(),
        }
    }

    pub fn bad_path(flag: &str, path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        JailError::BadPath {
            flag: flag.to_string(),
            path: path.into(),
            reason: reason.into(),
        }
    }
}
