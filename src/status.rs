//! `jail status` (am I inside a jail, and under what policy?) and `jail notice` (the two
//! sentences an agent harness puts into a prompt). Both read the policy file jail leaves at
//! JAIL_POLICY; status also asks the kernel, so a forged JAIL variable does not fool it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::policy::homes::HomeMode;
use crate::policy::{Access, Origin, Policy, TmpMode};
use crate::report::{Layers, Level};

/// The read-only JSON document at JAIL_POLICY.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PolicyFile {
    pub version: u32,
    pub jail_version: String,
    pub profile: String,
    pub level: Level,
    pub layers: Layers,
    pub gaps: Vec<String>,
    pub writable: Vec<PathBuf>,
    /// Read-only carve-outs inside writable paths.
    pub protected: Vec<PathBuf>,
    pub hidden: Vec<PathBuf>,
    pub private_tmp: bool,
    /// The whole resolved policy (environment values excluded).
    pub policy: serde_json::Value,
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
            policy: serde_json::to_value(policy).expect("serializable"),
        }
    }

    pub fn policy_summary(&self) -> Summary {
        Summary {
            profile: self.profile.clone(),
            writable: self.writable.clone(),
            protected: !self.protected.is_empty(),
            hidden: self.hidden.clone(),
            private_tmp: self.private_tmp,
            home: self
                .policy
                .get("home")
                .and_then(|h| serde_json::from_value(h.clone()).ok())
                .unwrap_or_default(),
        }
    }
}

/// What the notice says.
pub struct Summary {
    pub profile: String,
    pub writable: Vec<PathBuf>,
    pub protected: bool,
    pub hidden: Vec<PathBuf>,
    pub private_tmp: bool,
    /// `--home hidden`: the homes are hidden but the named paths.
    pub home: HomeMode,
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
        .filter(|p| !p.starts_with("/tmp"))
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
    format!(
        "You are working inside a sandbox (jail, profile {}): {written}{hidden}; when a write or a \
         read is denied, that is a rule of this sandbox, not an obstacle, so do not try to work \
         around it. Reading and searching files, git status, diff and log, running tests, builds \
         and linters all still work; if you would change something, put the proposed change into \
         your hand-off with the file, the line and the reason instead.",
        s.profile
    )
}

/// Where the policy file is: the mount view's fixed place when there is one (JAIL_POLICY can be
/// changed by anyone), else JAIL_POLICY (a sealed memfd without the mount view).
fn policy_path() -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        let fixed = crate::linux::mounts::POLICY_FILE;
        if std::path::Path::new(fixed).exists() {
            return Some(fixed.to_string());
        }
    }
    std::env::var("JAIL_POLICY").ok().filter(|p| !p.is_empty())
}

/// The policy file, when there is a readable, valid one.
pub fn read_policy_file() -> Option<PolicyFile> {
    let text = std::fs::read_to_string(policy_path()?).ok()?;
    serde_json::from_str(&text).ok()
}

#[cfg(target_os = "linux")]
/// The fixed policy file sits on jail's own /dev: a read-only tmpfs. Anyone else's /dev is a
/// writable devtmpfs, so a file planted there fails this.
fn on_sealed_dev(path: &str) -> bool {
    let Ok(vfs) =
        nix::sys::statvfs::statvfs(std::path::Path::new(path).parent().unwrap_or("/".as_ref()))
    else {
        return false;
    };
    let Ok(fs) = nix::sys::statfs::statfs("/dev") else {
        return false;
    };
    vfs.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY)
        && fs.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC
}

#[derive(Debug, Serialize)]
struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
}

#[cfg(target_os = "linux")]
fn status_field(name: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix(name)?
            .strip_prefix(':')
            .map(|v| v.trim().to_string())
    })
}

/// Creating an unnamed file in / must be refused inside any jail (a read-only mount, or Landlock).
#[cfg(target_os = "linux")]
fn write_probe() -> Result<(), std::io::Error> {
    // SAFETY: open with O_TMPFILE creates no name; the descriptor is closed at once.
    let fd = unsafe {
        libc::open(
            c"/".as_ptr(),
            libc::O_TMPFILE | libc::O_WRONLY | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened here.
    unsafe { libc::close(fd) };
    Ok(())
}

/// Creating a file in / must be refused inside a jail (Seatbelt denies it); one that could be
/// made is removed again.
#[cfg(not(target_os = "linux"))]
fn write_probe() -> Result<(), std::io::Error> {
    let probe = "/.jail-status-probe";
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(probe)?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// jail's policy memfd (no mount view): named jail-policy and sealed against writing.
#[cfg(target_os = "linux")]
fn is_sealed_memfd(path: &str) -> bool {
    use std::os::fd::AsRawFd;
    let named = std::fs::read_link(path)
        .map(|t| t.to_string_lossy().starts_with("/memfd:jail-policy"))
        .unwrap_or(false);
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    // SAFETY: F_GET_SEALS only reads the seals of an open descriptor.
    let seals = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GET_SEALS) };
    named && seals >= 0 && seals & libc::F_SEAL_WRITE != 0
}

/// Whether the policy file could be changed: a sealed memfd (no mount view) refuses writes
/// though it opens for writing; a file is tried by opening it for appending.
fn can_be_written(path: &str) -> bool {
    #[cfg(target_os = "linux")]
    if let Ok(f) = std::fs::File::open(path) {
        use std::os::fd::AsRawFd;
        // SAFETY: F_GET_SEALS only reads the seals of an open descriptor.
        let seals = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GET_SEALS) };
        if seals >= 0 && seals & libc::F_SEAL_WRITE != 0 {
            return false;
        }
    }
    std::fs::OpenOptions::new().append(true).open(path).is_ok()
}

/// What only Linux can check: no_new_privs, and a seccomp filter where the kernel has them.
#[cfg(target_os = "linux")]
fn linux_checks(checks: &mut Vec<Check>, file: Option<&PolicyFile>) {
    let nnp = status_field("NoNewPrivs");
    checks.push(Check {
        name: "no_new_privs",
        ok: nnp.as_deref() == Some("1"),
        detail: format!("NoNewPrivs: {}", nnp.unwrap_or_default()),
    });
    // A policy may claim no seccomp only where the kernel has none (else it is forged).
    let wants_seccomp = file.map(|f| f.layers.seccomp).unwrap_or(true)
        || crate::linux::sys::seccomp_filters_supported();
    let seccomp = status_field("Seccomp");
    checks.push(Check {
        name: "seccomp filter",
        ok: !wants_seccomp || seccomp.as_deref() == Some("2"),
        detail: format!("Seccomp: {}", seccomp.unwrap_or_default()),
    });
}

/// Runs the checks; prints the verdict; returns 0 inside a jail and 1 outside.
pub fn status(json: bool) -> i32 {
    let file = read_policy_file();
    let mut checks = Vec::new();
    let path = policy_path().unwrap_or_default();
    checks.push(Check {
        name: "policy file",
        ok: file.is_some(),
        detail: if path.is_empty() {
            "JAIL_POLICY is not set".into()
        } else {
            path.clone()
        },
    });
    let writable_file = !path.is_empty() && can_be_written(&path);
    #[cfg(target_os = "linux")]
    let (fixed, sealed_dev, memfd) = {
        let fixed = path == crate::linux::mounts::POLICY_FILE;
        (
            fixed,
            fixed && on_sealed_dev(&path),
            !fixed && is_sealed_memfd(&path),
        )
    };
    // Seatbelt: the file in jail's run directory, which the profile keeps read-only.
    #[cfg(not(target_os = "linux"))]
    let (fixed, sealed_dev, memfd) = (true, true, false);
    checks.push(Check {
        name: "policy file read-only",
        ok: file.is_some() && !writable_file && (sealed_dev || memfd),
        detail: if path.is_empty() {
            "no policy file".into()
        } else if writable_file {
            "it can be written".into()
        } else if fixed && !sealed_dev {
            "it is not on jail's read-only /dev".into()
        } else if !fixed && !memfd {
            "not jail's sealed memfd".into()
        } else if !fixed {
            "a sealed memfd (no mount view: this check is advisory)".into()
        } else {
            String::new()
        },
    });
    #[cfg(target_os = "linux")]
    linux_checks(&mut checks, file.as_ref());
    let probe = write_probe();
    checks.push(Check {
        name: "writes refused",
        ok: probe.is_err(),
        detail: match probe {
            Ok(()) => "a file could be created in /".into(),
            Err(e) => format!("creating a file in /: {e}"),
        },
    });
    let inside = checks.iter().all(|c| c.ok);
    if json {
        #[derive(Serialize)]
        struct Out<'a> {
            inside: bool,
            checks: &'a [Check],
            policy: Option<&'a PolicyFile>,
        }
        let out = Out {
            inside,
            checks: &checks,
            policy: file.as_ref().filter(|_| inside),
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&out).expect("serializable")
        );
    } else if let (true, Some(f)) = (inside, &file) {
        let level = serde_json::to_string(&f.level).expect("enum");
        println!(
            "inside a jail: level {}, profile {}",
            level.trim_matches('"'),
            f.profile
        );
        println!(
            "layers: mount view {}, landlock {}, seccomp {}",
            f.layers.mount, f.layers.landlock, f.layers.seccomp
        );
        let list = |v: &[PathBuf]| {
            v.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!("writable: {}", list(&f.writable));
        println!("hidden: {}", list(&f.hidden));
        println!("homes: {}", f.policy_summary().home.describe());
        for gap in &f.gaps {
            println!("gap: {gap}");
        }
    } else {
        println!("not inside a jail:");
        for c in checks.iter().filter(|c| !c.ok) {
            println!("  {} failed: {}", c.name, c.detail);
        }
    }
    if inside { 0 } else { 1 }
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
