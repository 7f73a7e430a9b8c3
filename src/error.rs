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
    /// `--profile` (or [`crate::Jail::profile`]) names a profile the catalog does not hold.
    #[error(
        "unknown profile '{}' ({})",
        crate::text::printable(name),
        known_text(known)
    )]
    UnknownProfile {
        /// The name asked for, as given.
        name: String,
        /// The profiles there are; empty where the text points at `jail profile list` instead.
        known: Vec<String>,
    },
    /// A profile is malformed (its file does not parse, it extends what is not there) or asks for
    /// what cannot be done (a relative path, a writable home).
    #[error(
        "profile {profile}{}: {reason}",
        location.as_ref().map(|l| format!(" ({l})")).unwrap_or_default()
    )]
    BadProfile {
        profile: String,
        /// Where in its file (`FILE` or `FILE:LINE:COL`), when known.
        location: Option<String>,
        reason: String,
    },
    /// A flag's value (or the library's setting of the same name) cannot be parsed or used.
    #[error("{message}")]
    BadFlag {
        /// The command-line flag, e.g. `--net`, `--limit`, `--keep-fd`.
        flag: String,
        /// The value, or the part of it, that was refused.
        value: String,
        /// The whole text, naming the flag, the value and the fix.
        message: String,
    },
    /// The command to run is missing, or cannot be handed to `execve` (a NUL byte).
    #[error("{reason}")]
    BadCommand { reason: String },
    /// Something asked for that this system, this version or this way of running does not do
    /// (a Linux-only flag on macOS, [`crate::Jail::run`] in a threaded process).
    #[error("{what}: {reason}")]
    Unsupported { what: String, reason: String },
    /// A hand-back command (`jail diff`, `apply`, ...) names no run, or more than one.
    #[error("run {id}: {reason}")]
    UnknownRun { id: String, reason: String },
    /// A hand-back command names a run that cannot be handled now (still running, interrupted
    /// and never reviewed, changed since it was reviewed).
    #[error("run {id}: {reason}")]
    RunRefused { id: String, reason: String },
    /// A session command (`jail exec`, `session stop`) names no live session.
    #[error("session {name}: {reason}")]
    UnknownSession { name: String, reason: String },
    /// A session refused a request, or ended before it was answered.
    #[error("session {name}: {reason}")]
    SessionRefused { name: String, reason: String },
    /// Input malformed in a way none of the kinds above names.
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

/// The tail of [`JailError::UnknownProfile`]'s text.
fn known_text(known: &[String]) -> String {
    match known.is_empty() {
        true => "see jail profile list".to_string(),
        false => format!("known: {}", known.join(", ")),
    }
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

    /// A flag's value refused: `message` is the whole text.
    pub fn bad_flag(flag: &str, value: impl Into<String>, message: impl Into<String>) -> Self {
        JailError::BadFlag {
            flag: flag.to_string(),
            value: value.into(),
            message: message.into(),
        }
    }

    /// A profile refused, with where in its file when known.
    pub fn bad_profile(
        profile: impl Into<String>,
        location: Option<String>,
        reason: impl Into<String>,
    ) -> Self {
        JailError::BadProfile {
            profile: profile.into(),
            location,
            reason: reason.into(),
        }
    }

    pub fn bad_command(reason: impl Into<String>) -> Self {
        JailError::BadCommand {
            reason: reason.into(),
        }
    }

    pub fn unsupported(what: impl Into<String>, reason: impl Into<String>) -> Self {
        JailError::Unsupported {
            what: what.into(),
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
    UnknownProfile {
        name: String,
        known: Vec<String>,
    },
    BadProfile {
        profile: String,
        location: Option<String>,
        reason: String,
    },
    BadFlag {
        flag: String,
        value: String,
        message: String,
    },
    BadCommand {
        reason: String,
    },
    Unsupported {
        what: String,
        reason: String,
    },
    UnknownRun {
        id: String,
        reason: String,
    },
    RunRefused {
        id: String,
        reason: String,
    },
    UnknownSession {
        name: String,
        reason: String,
    },
    SessionRefused {
        name: String,
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
            JailError::UnknownProfile { name, known } => WireError::UnknownProfile {
                name: name.clone(),
                known: known.clone(),
            },
            JailError::BadProfile {
                profile,
                location,
                reason,
            } => WireError::BadProfile {
                profile: profile.clone(),
                location: location.clone(),
                reason: reason.clone(),
            },
            JailError::BadFlag {
                flag,
                value,
                message,
            } => WireError::BadFlag {
                flag: flag.clone(),
                value: value.clone(),
                message: message.clone(),
            },
            JailError::BadCommand { reason } => WireError::BadCommand {
                reason: reason.clone(),
            },
            JailError::Unsupported { what, reason } => WireError::Unsupported {
                what: what.clone(),
                reason: reason.clone(),
            },
            JailError::UnknownRun { id, reason } => WireError::UnknownRun {
                id: id.clone(),
                reason: reason.clone(),
            },
            JailError::RunRefused { id, reason } => WireError::RunRefused {
                id: id.clone(),
                reason: reason.clone(),
            },
            JailError::UnknownSession { name, reason } => WireError::UnknownSession {
                name: name.clone(),
                reason: reason.clone(),
            },
            JailError::SessionRefused { name, reason } => WireError::SessionRefused {
                name: name.clone(),
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
            WireError::UnknownProfile { name, known } => JailError::UnknownProfile { name, known },
            WireError::BadProfile {
                profile,
                location,
                reason,
            } => JailError::BadProfile {
                profile,
                location,
                reason,
            },
            WireError::BadFlag {
                flag,
                value,
                message,
            } => JailError::BadFlag {
                flag,
                value,
                message,
            },
            WireError::BadCommand { reason } => JailError::BadCommand { reason },
            WireError::Unsupported { what, reason } => JailError::Unsupported { what, reason },
            WireError::UnknownRun { id, reason } => JailError::UnknownRun { id, reason },
            WireError::RunRefused { id, reason } => JailError::RunRefused { id, reason },
            WireError::UnknownSession { name, reason } => {
                JailError::UnknownSession { name, reason }
            }
            WireError::SessionRefused { name, reason } => {
                JailError::SessionRefused { name, reason }
            }
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
            JailError::UnknownProfile {
                name: "nosuch".into(),
                known: vec!["default".into(), "claude".into()],
            },
            JailError::UnknownProfile {
                name: "nosuch".into(),
                known: vec![],
            },
            JailError::bad_profile("p", Some("/x/p.toml:2:7".into()), "unknown field `x`"),
            JailError::bad_profile("p", None, "path 'rel' is not absolute"),
            JailError::bad_flag("--net", "bogus", "--net bogus: unknown form"),
            JailError::bad_command("no command given"),
            JailError::unsupported("--limit memory", "not enforced on macOS in this version"),
            JailError::UnknownRun {
                id: "ab12".into(),
                reason: "no such run in /s (see `jail runs`)".into(),
            },
            JailError::RunRefused {
                id: "ab12".into(),
                reason: "still running (pid 7); stop it first".into(),
            },
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
            // Every field, not only the text.
            assert_eq!(WireError::from(&back), WireError::from(&e), "{text}");
            assert_eq!(
                std::mem::discriminant(&back),
                std::mem::discriminant(&e),
                "{text}"
            );
        }
    }

    #[test]
    fn the_typed_kinds_keep_the_texts_users_read() {
        let cases = [
            (
                JailError::UnknownProfile {
                    name: "no\u{1b}such".into(),
                    known: vec!["claude".into(), "default".into()],
                },
                "unknown profile 'no\\u{1b}such' (known: claude, default)",
            ),
            (
                JailError::UnknownProfile {
                    name: "nosuch".into(),
                    known: vec![],
                },
                "unknown profile 'nosuch' (see jail profile list)",
            ),
            (
                JailError::bad_profile(
                    "rel",
                    Some("/p/rel.toml:3:1".into()),
                    "path 'x' is not absolute",
                ),
                "profile rel (/p/rel.toml:3:1): path 'x' is not absolute",
            ),
            (
                JailError::bad_profile("rel", None, "net --net x: unknown form"),
                "profile rel: net --net x: unknown form",
            ),
            (
                JailError::unsupported("copy-on-write runs", "Linux only in this version"),
                "copy-on-write runs: Linux only in this version",
            ),
            (
                JailError::UnknownRun {
                    id: "zz".into(),
                    reason: "not a run id".into(),
                },
                "run zz: not a run id",
            ),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
            assert_eq!(e.exit_code(), EXIT_JAIL_ERROR);
        }
    }
}
