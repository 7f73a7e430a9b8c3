//! Errors that stop a launch, and the exit code each one maps to.
//!
//! The codes follow `env`, `timeout` and `chroot`: 125 for jail's own failures, 126 when the command
//! cannot be executed, 127 when it cannot be found. An error that came from the operating system
//! keeps the OS error as its [`std::error::Error::source`], so that a caller can read the errno;
//! the text names the flag, path or kernel feature and the fix.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Exit code for every error of jail itself (bad flag, sandbox not built, level not met).
pub const EXIT_JAIL_ERROR: i32 = 125;
/// Exit code when the command exists but cannot be executed.
pub const EXIT_NOT_EXECUTABLE: i32 = 126;
/// Exit code when the command is not found.
pub const EXIT_NOT_FOUND: i32 = 127;
/// Exit code when `--timeout` expired.
pub const EXIT_TIMEOUT: i32 = 124;

/// Why jail did not run the command, or stopped while running it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JailError {
    /// A path a flag or a profile names cannot be used as asked.
    #[error("{flag} {}: {reason}", crate::text::path_text(path))]
    BadPath {
        flag: String,
        path: PathBuf,
        reason: String,
    },
    /// A flag, rule or profile is malformed, or asks for what cannot be done here.
    #[error("{0}")]
    BadInput(String),
    /// `--require` asked for a level this system cannot reach.
    #[error("required enforcement level '{required}' not met: {missing}")]
    LevelNotMet { required: String, missing: String },
    /// A layer could not be built (a syscall failed, a kernel feature is missing).
    #[error("{layer}: {step}: {reason}")]
    Layer {
        layer: String,
        step: String,
        reason: String,
        #[source]
        source: Option<std::io::Error>,
    },
    /// Reading or writing something jail itself needs failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A jail process started with [`crate::Jail::spawn`] ended without saying how the run went
    /// (killed, or it could not start).
    #[error("the jail process ended without an outcome: {0}")]
    Lost(String),
}

impl JailError {
    /// A layer failed for a reason given as text.
    pub fn layer(layer: &str, step: impl Into<String>, reason: impl ToString) -> Self {
        JailError::Layer {
            layer: layer.to_string(),
            step: step.into(),
            reason: reason.to_string(),
            source: None,
        }
    }

    /// A layer failed because a syscall did: the OS error is kept as the source.
    pub fn os(layer: &str, step: impl Into<String>, e: impl Into<std::io::Error>) -> Self {
        let e = e.into();
        JailError::Layer {
            layer: layer.to_string(),
            step: step.into(),
            reason: e.to_string(),
            source: Some(e),
        }
    }

    pub fn bad_path(flag: &str, path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        JailError::BadPath {
            flag: flag.to_string(),
            path: path.into(),
            reason: reason.into(),
        }
    }

    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        JailError::Io {
            what: what.into(),
            source,
        }
    }

    /// The exit code the command line ends with for this error.
    pub fn exit_code(&self) -> i32 {
        EXIT_JAIL_ERROR
    }

    /// The OS error number behind this error, when one is.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            JailError::Layer {
                source: Some(e), ..
            }
            | JailError::Io { source: e, .. } => e.raw_os_error(),
            _ => None,
        }
    }
}

/// A [`JailError`] as it crosses from a spawned jail process to its caller: the same kinds and
/// fields, the OS error as its number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum WireError {
    BadPath {
        flag: String,
        #[serde(with = "crate::byte_path")]
        path: PathBuf,
        reason: String,
    },
    BadInput {
        message: String,
    },
    LevelNotMet {
        required: String,
        missing: String,
    },
    Layer {
        layer: String,
        step: String,
        reason: String,
        errno: Option<i32>,
    },
    Io {
        what: String,
        message: String,
        errno: Option<i32>,
    },
    Lost {
        message: String,
    },
}

impl From<&JailError> for WireError {
    fn from(e: &JailError) -> WireError {
        match e {
            JailError::BadPath { flag, path, reason } => WireError::BadPath {
                flag: flag.clone(),
                path: path.clone(),
                reason: reason.clone(),
            },
            JailError::BadInput(message) => WireError::BadInput {
                message: message.clone(),
            },
            JailError::LevelNotMet { required, missing } => WireError::LevelNotMet {
                required: required.clone(),
                missing: missing.clone(),
            },
            JailError::Layer {
                layer,
                step,
                reason,
                source,
            } => WireError::Layer {
                layer: layer.clone(),
                step: step.clone(),
                reason: reason.clone(),
                errno: source.as_ref().and_then(|s| s.raw_os_error()),
            },
            JailError::Io { what, source } => WireError::Io {
                what: what.clone(),
                message: source.to_string(),
                errno: source.raw_os_error(),
            },
            JailError::Lost(message) => WireError::Lost {
                message: message.clone(),
            },
        }
    }
}

impl From<WireError> for JailError {
    fn from(w: WireError) -> JailError {
        let os = |errno: Option<i32>, message: &str| match errno {
            Some(n) => std::io::Error::from_raw_os_error(n),
            None => std::io::Error::other(message.to_string()),
        };
        match w {
            WireError::BadPath { flag, path, reason } => JailError::BadPath { flag, path, reason },
            WireError::BadInput { message } => JailError::BadInput(message),
            WireError::LevelNotMet { required, missing } => {
                JailError::LevelNotMet { required, missing }
            }
            WireError::Layer {
                layer,
                step,
                reason,
                errno,
            } => JailError::Layer {
                source: errno.map(|n| os(Some(n), &reason)),
                layer,
                step,
                reason,
            },
            WireError::Io {
                what,
                message,
                errno,
            } => JailError::Io {
                source: os(errno, &message),
                what,
            },
            WireError::Lost { message } => JailError::Lost(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_cross_the_wire_with_their_kind_text_and_errno() {
        let cases = [
            JailError::bad_path("--rw", "/x", "does not exist"),
            JailError::BadInput("--net bogus: unknown rule".into()),
            JailError::LevelNotMet {
                required: "full".into(),
                missing: "landlock".into(),
            },
            JailError::os(
                "mount",
                "bind /x",
                std::io::Error::from_raw_os_error(libc::EPERM),
            ),
            JailError::layer("seccomp", "install", "refused"),
            JailError::io(
                "profile directory /p",
                std::io::Error::from_raw_os_error(libc::EACCES),
            ),
        ];
        for e in cases {
            let text = serde_json::to_string(&WireError::from(&e)).unwrap();
            let back: JailError = serde_json::from_str::<WireError>(&text).unwrap().into();
            assert_eq!(back.to_string(), e.to_string(), "{text}");
            assert_eq!(back.raw_os_error(), e.raw_os_error(), "{text}");
            assert_eq!(
                std::mem::discriminant(&back),
                std::mem::discriminant(&e),
                "{text}"
            );
        }
    }
}
