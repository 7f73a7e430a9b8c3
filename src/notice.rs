//! The notice: two plain sentences an agent harness puts into a prompt (`jail --notice` prints
//! them at the start of a run, `jail notice` on its own), saying what is read-only or hidden,
//! that a denial is a rule and not an obstacle, and where proposed changes go instead.
//!
//! Said before the first refusal, so that the agent takes one as a rule of the run rather than
//! an obstacle to get around, and hands on the change it would have made. Inside a jail
//! `jail notice` takes its facts from the policy file, so the sentences describe the run that
//! is going on, not a profile.

use std::path::PathBuf;

use crate::policy::homes::HomeMode;
use crate::policy::{Access, Origin, Policy, TmpMode};
use crate::policy_file::PolicyFile;

/// What the notice says.
pub struct Summary {
    pub profile: String,
    pub writable: Vec<PathBuf>,
    pub protected: bool,
    pub hidden: Vec<PathBuf>,
    pub private_tmp: bool,
    /// `--home hidden`: the homes are hidden but the named paths.
    pub home: HomeMode,
    /// The working directory (the project) is writable.
    pub project_writable: bool,
    /// The build and test caches sent somewhere writable (`CARGO_TARGET_DIR` into /tmp, as the
    /// review profile does), by variable name.
    pub build_caches: Vec<String>,
}

/// The variables that move a build's or a test run's output and caches out of the project and
/// HOME: with them a read-only project still builds and tests.
const BUILD_CACHE_VARS: &[&str] = &[
    "CARGO_TARGET_DIR",
    "PYTHONPYCACHEPREFIX",
    "npm_config_cache",
    "GOCACHE",
    "XDG_CACHE_HOME",
    "MYPY_CACHE_DIR",
    "RUFF_CACHE_DIR",
    "YARN_CACHE_FOLDER",
];

/// The build cache variables among `vars` whose value is a place the command can write.
fn build_caches<'a>(
    vars: impl Iterator<Item = (&'a std::ffi::OsStr, &'a std::ffi::OsStr)>,
    writable: &[PathBuf],
) -> Vec<String> {
    let mut out: Vec<String> = vars
        .filter(|(k, _)| {
            BUILD_CACHE_VARS
                .iter()
                .any(|b| std::ffi::OsStr::new(b) == *k)
        })
        .filter(|(_, v)| {
            let p = std::path::Path::new(v);
            p.starts_with("/tmp") || writable.iter().any(|w| p.starts_with(w))
        })
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

impl Summary {
    pub fn of(policy: &Policy) -> Summary {
        Summary {
            profile: policy.profile.clone(),
            // With the directories a run creates first (an agent's state on its first run).
            writable: policy
                .writable_paths()
                .map(PathBuf::from)
                .chain(policy.profile_rw_missing.iter().cloned())
                .collect(),
            protected: policy
                .rules
                .iter()
                .any(|r| matches!(r.origin, Origin::Protected(_))),
            hidden: policy
                .rules
                .iter()
                .filter(|r| r.access == Access::Hide)
                .map(|r| r.path.clone())
                .collect(),
            private_tmp: policy.tmp == TmpMode::Private,
            home: policy.home,
            project_writable: policy.access_at(&policy.cwd) == Access::Rw,
            build_caches: build_caches(
                policy
                    .env
                    .vars
                    .iter()
                    .map(|(k, v)| (k.as_os_str(), v.as_os_str())),
                &policy
                    .writable_paths()
                    .map(PathBuf::from)
                    .collect::<Vec<_>>(),
            ),
        }
    }

    /// What the policy file of the run this process is in says.
    pub fn of_file(file: &PolicyFile) -> Summary {
        Summary {
            profile: file.profile.clone(),
            writable: file.writable.clone(),
            protected: !file.protected.is_empty(),
            hidden: file.hidden.clone(),
            private_tmp: file.private_tmp,
            home: file.home(),
            // Inside the run: its working directory and its environment are this process's.
            project_writable: std::env::current_dir()
                .is_ok_and(|cwd| file.writable.iter().any(|w| cwd.starts_with(w))),
            build_caches: {
                let env: Vec<(std::ffi::OsString, std::ffi::OsString)> =
                    std::env::vars_os().collect();
                build_caches(
                    env.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str())),
                    &file.writable,
                )
            },
        }
    }
}

/// Two plain sentences: what is read-only or hidden and that a denial is a rule; what stays open
/// and where proposed changes go.
pub fn notice_text(s: &Summary) -> String {
    let home = std::env::var("HOME").unwrap_or_default();
    let show = |p: &PathBuf| {
        let text = p.display().to_string();
        match text.strip_prefix(&home) {
            Some(rest) if !home.is_empty() => format!("~{rest}"),
            _ => text,
        }
    };
    let writable: Vec<String> = s
        .writable
        .iter()
        // /tmp itself is named below; a project beneath it is a writable path like any other.
        .filter(|p| p.as_path() != std::path::Path::new("/tmp"))
        .map(show)
        .collect();
    let tmp = if s.private_tmp {
        "a private /tmp"
    } else {
        "/tmp"
    };
    let written = if writable.is_empty() {
        format!("every file is read-only except {tmp}, including the project")
    } else {
        format!(
            "only {} and {tmp} can be written{}, everything else is read-only",
            writable.join(", "),
            if s.protected {
                " (their .git/hooks, .git/config and agent settings stay read-only)"
            } else {
                ""
            }
        )
    };
    let hidden: Vec<String> = s.hidden.iter().take(4).map(show).collect();
    let hidden = if s.home == HomeMode::Hidden {
        ", home directories are hidden except the paths named for this run, and so are \
         credentials elsewhere"
            .to_string()
    } else if hidden.is_empty() {
        String::new()
    } else {
        format!(
            ", and credentials such as {}{} are hidden",
            hidden.join(", "),
            if s.hidden.len() > 4 { " …" } else { "" }
        )
    };
    // What still works, as far as this policy can tell: a read-only project builds only where
    // its outputs and caches are sent elsewhere.
    let open = if s.project_writable {
        format!(
            "Reading and searching files, git (add and commit too), and builds and tests that write \
             only in {} or {tmp} still work, but caches outside them (such as ~/.cargo or ~/.npm) \
             are read-only, so fetching new dependencies may fail; if you need a change anywhere \
             else, put it into your hand-off with the file, the line and the reason instead",
            writable.join(", ")
        )
    } else if !s.build_caches.is_empty() {
        format!(
            "Reading and searching files, git status, diff and log, and builds, tests and linters \
             whose outputs and caches go to {tmp} ({}) still work; if you would change something, \
             put the proposed change into your hand-off with the file, the line and the reason \
             instead",
            s.build_caches.join(", ")
        )
    } else {
        "Reading and searching files and git status, diff and log still work, but builds and \
         tests that write into the project or a cache fail, since both are read-only; if you \
         would change something, put the proposed change into your hand-off with the file, the \
         line and the reason instead"
            .to_string()
    };
    format!(
        "You are working inside a sandbox (jail, profile {}): {written}{hidden}; when a write or a \
         read is denied, that is a rule of this sandbox, not an obstacle, so do not try to work \
         around it. {open}.",
        s.profile
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notice_is_two_sentences_naming_what_is_open_and_closed() {
        let s = Summary {
            profile: "review".into(),
            writable: vec![],
            protected: false,
            hidden: vec!["/h/.ssh".into(), "/h/.aws".into()],
            private_tmp: true,
            home: HomeMode::Visible,
            project_writable: false,
            build_caches: vec![],
        };
        let text = notice_text(&s);
        assert_eq!(text.matches(". ").count() + 1, 2, "{text}");
        assert!(text.contains("read-only except a private /tmp, including the project"));
        assert!(text.contains("/h/.ssh") && text.contains("not an obstacle"));
        assert!(text.contains("hand-off with the file, the line and the reason"));
        let s = Summary {
            writable: vec!["/w/repo".into()],
            protected: true,
            ..s
        };
        let text = notice_text(&s);
        assert!(
            text.contains("only /w/repo and a private /tmp can be written"),
            "{text}"
        );
        assert!(text.contains(".git/hooks"));
        let s = Summary {
            home: HomeMode::Hidden,
            ..s
        };
        let text = notice_text(&s);
        assert_eq!(text.matches(". ").count() + 1, 2, "{text}");
        assert!(
            text.contains("home directories are hidden except the paths named for this run"),
            "{text}"
        );
    }
}
