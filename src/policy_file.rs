//! The policy file: the read-only JSON document a jailed command finds at JAIL_POLICY (what it
//! may write, what is hidden, which layers hold), and how a reader inside finds it again.
//!
//! Where jail leaves it, and why there:
//! - With the mount view, at `/dev/jail/policy.json` on jail's own /dev tmpfs, which is
//!   sealed read-only before the command starts: nothing inside can rewrite it, and its place
//!   does not depend on a variable anyone can set.
//! - Without it (no /dev of jail's own), in a memfd sealed against every change
//!   (`F_SEAL_WRITE`, `F_SEAL_GROW`, `F_SEAL_SHRINK`, `F_SEAL_SEAL`) left open across execve,
//!   which JAIL_POLICY names as `/proc/self/fd/N`. Any process can make such a memfd, so its
//!   content is advisory: `jail status` says so.
//! - On macOS, in the run's private directory.
//!
//! The file names the command, but shortened ([`CommandSize`] says by how much): the command
//! line can be megabytes, and the file is held whole by everything that reads it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::enforcement::{Layers, Level};
use crate::policy::homes::HomeMode;
use crate::policy::{Access, Origin, Policy, TmpMode};

/// The read-only JSON document at JAIL_POLICY.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PolicyFile {
    pub version: u32,
    pub jail_version: String,
    pub profile: String,
    pub level: Level,
    pub layers: Layers,
    pub gaps: Vec<String>,
    #[serde(with = "crate::byte_path::vec")]
    pub writable: Vec<PathBuf>,
    /// Read-only carve-outs inside writable paths.
    #[serde(with = "crate::byte_path::vec")]
    pub protected: Vec<PathBuf>,
    #[serde(with = "crate::byte_path::vec")]
    pub hidden: Vec<PathBuf>,
    pub private_tmp: bool,
    /// How long the command line was, and whether `policy.command` shows all of it.
    pub command: CommandSize,
    /// The whole resolved policy (environment values excluded; its `command` shortened, by as
    /// much as [`PolicyFile::command`] says).
    pub policy: serde_json::Value,
}

/// The size of the command line the policy was made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandSize {
    pub args: usize,
    /// Bytes of all arguments, without their terminating NULs.
    pub bytes: usize,
    /// `policy.command` shows less than the whole command line.
    pub truncated: bool,
}

/// At most this many arguments are shown in the policy file, each cut to [`SHOWN_ARG_BYTES`],
/// and no more than [`SHOWN_COMMAND_BYTES`] in all. The kernel accepts a command line of a
/// quarter of the stack rlimit (2 MiB by default, one argument up to 128 KiB) and JSON escaping
/// can make one byte six: kept whole, the file would be megabytes in memory on jail's /dev and
/// in every reader. The command inside knows its own argv, and the run report (written outside)
/// keeps all of it, so the file keeps only enough to recognise the run. No hash: a reader that
/// must match a command exactly has the report, and nothing inside can use a digest it cannot
/// recompute from the same argv it already holds.
const SHOWN_ARGS: usize = 64;
const SHOWN_ARG_BYTES: usize = 256;
const SHOWN_COMMAND_BYTES: usize = 4096;

/// The command as the policy file shows it, and its full size.
fn shown_command(command: &[std::ffi::OsString]) -> (Vec<String>, CommandSize) {
    let mut shown = Vec::new();
    let mut total = 0;
    let mut truncated = false;
    for arg in command {
        let text = arg.to_string_lossy();
        if shown.len() == SHOWN_ARGS || total >= SHOWN_COMMAND_BYTES {
            truncated = true;
            break;
        }
        let room = SHOWN_ARG_BYTES.min(SHOWN_COMMAND_BYTES - total);
        let cut = if text.len() > room {
            truncated = true;
            let mut end = room;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}…", &text[..end])
        } else {
            text.into_owned()
        };
        total += cut.len();
        shown.push(cut);
    }
    let size = CommandSize {
        args: command.len(),
        bytes: command.iter().map(|a| a.len()).sum(),
        truncated,
    };
    (shown, size)
}

impl PolicyFile {
    pub fn new(policy: &Policy, layers: &Layers, gaps: Vec<String>) -> PolicyFile {
        let paths = |pred: &dyn Fn(&crate::policy::PathRule) -> bool| {
            policy
                .rules
                .iter()
                .filter(|r| pred(r))
                .map(|r| r.path.clone())
                .collect::<Vec<_>>()
        };
        let (shown, command) = shown_command(&policy.command);
        let mut whole = serde_json::to_value(policy).expect("serializable");
        whole["command"] = shown.into();
        PolicyFile {
            version: 1,
            jail_version: env!("CARGO_PKG_VERSION").to_string(),
            profile: policy.profile.clone(),
            level: layers.level(),
            layers: *layers,
            gaps,
            writable: paths(&|r| r.access == Access::Rw),
            protected: paths(&|r| matches!(r.origin, Origin::Protected(_))),
            hidden: paths(&|r| r.access == Access::Hide),
            private_tmp: policy.tmp == TmpMode::Private,
            command,
            policy: whole,
        }
    }

    /// How the policy treats the home directories (`--home`); the default (visible) when the
    /// file does not say.
    pub fn home(&self) -> HomeMode {
        self.policy
            .get("home")
            .and_then(|h| serde_json::from_value(h.clone()).ok())
            .unwrap_or_default()
    }
}

/// The resolved policy as JSON, for `jail status` and orchestrators (JAIL_POLICY): with the
/// mount view, on jail's /dev tmpfs, which is sealed read-only.
pub const POLICY_FILE: &str = "/dev/jail/policy.json";

/// Where the policy file is: the mount view's fixed place when there is one (JAIL_POLICY can be
/// changed by anyone), else JAIL_POLICY (a sealed memfd without the mount view). A jail inside
/// another without a mount view of its own sees the outer one's fixed file, but its own policy
/// is the memfd JAIL_POLICY names: the innermost wins (a memfd is advisory at best, so pointing
/// JAIL_POLICY at one can only lower the verdict).
pub(crate) fn policy_path() -> Option<String> {
    let env = std::env::var("JAIL_POLICY").ok().filter(|p| !p.is_empty());
    #[cfg(target_os = "linux")]
    {
        if let Some(p) = env.as_deref().filter(|p| crate::sys::is_sealed_memfd(p)) {
            return Some(p.to_string());
        }
        let fixed = POLICY_FILE;
        if std::path::Path::new(fixed).exists() {
            return Some(fixed.to_string());
        }
    }
    env
}

/// The policy file, when there is a readable, valid one.
pub fn read_policy_file() -> Option<PolicyFile> {
    let text = std::fs::read_to_string(policy_path()?).ok()?;
    serde_json::from_str(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_command_is_shortened_in_the_policy_file_with_its_full_size() {
        let short: Vec<std::ffi::OsString> = vec!["claude".into(), "-p".into(), "hi".into()];
        let (shown, size) = shown_command(&short);
        assert_eq!(shown, ["claude", "-p", "hi"]);
        assert_eq!(
            size,
            CommandSize {
                args: 3,
                bytes: 10,
                truncated: false
            }
        );
        // One argument of 127 KiB (a diff), multi-byte characters at the cut.
        let diff = "é".repeat(65_000);
        let (shown, size) = shown_command(&["claude".into(), "-p".into(), diff.clone().into()]);
        assert!(size.truncated && size.bytes == 8 + diff.len());
        assert!(shown[2].len() <= SHOWN_ARG_BYTES + "…".len() && shown[2].ends_with('…'));
        // A 1 MiB command line of many arguments.
        let many: Vec<std::ffi::OsString> = (0..8192).map(|_| "x".repeat(127).into()).collect();
        let (shown, size) = shown_command(&many);
        assert_eq!(
            (size.args, size.bytes, size.truncated),
            (8192, 8192 * 127, true)
        );
        assert!(shown.len() <= SHOWN_ARGS);
        assert!(shown.iter().map(String::len).sum::<usize>() <= SHOWN_COMMAND_BYTES + 3);
    }
}
