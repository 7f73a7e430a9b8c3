//! `jail status`: am I inside a jail, and under what policy? The policy file says what it
//! claims; the kernel is asked whether each claim holds for this process, so that a forged JAIL
//! variable or policy file does not fool it.
//!
//! The verdict is only as strong as its weakest check: every claim confirmed by the kernel and
//! the policy from jail's own file is `confined` (exit 0); nothing contradicted but some
//! evidence only advisory (a sealed memfd anyone can make, a refusal the file permissions would
//! give anyway) is `advisory` (exit 2); outside a jail, or any claim the kernel contradicts, is
//! `not_confined` (exit 1). On Linux the checks are those of `linux::evidence`; on macOS there
//! are two, advisory at best: the policy file (anyone can write one like it) and a file created
//! in `/`, which Seatbelt must refuse.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::policy_file::{PolicyFile, policy_path, read_policy_file};

/// What one piece of evidence showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Finding {
    /// The kernel confirms the claim.
    Verified,
    /// Nothing contradicts the claim, but nothing here proves it either (a sealed memfd anyone
    /// can make; a refusal that the file permissions would give anyway).
    Advisory,
    /// The kernel contradicts the claim: this process is not confined as the policy says.
    Failed,
}

/// One check of `jail status`: what was claimed, what was asked of the kernel, what it said.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub finding: Finding,
    /// Whether nothing contradicts the claim (verified or advisory).
    pub ok: bool,
    /// What was asked of the kernel.
    pub how: String,
    /// What it answered.
    pub detail: String,
}

impl Check {
    pub fn new(
        name: &'static str,
        finding: Finding,
        how: impl Into<String>,
        detail: impl Into<String>,
    ) -> Check {
        Check {
            name,
            finding,
            ok: finding != Finding::Failed,
            how: how.into(),
            detail: detail.into(),
        }
    }
}

/// The verdict and its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every claim checked and confirmed, the policy from jail's own file: exit 0.
    Confined,
    /// Nothing contradicts the policy, but some evidence is only advisory: exit 2.
    Advisory,
    /// Outside a jail, or a claim the kernel contradicts: exit 1.
    NotConfined,
}

impl Verdict {
    pub fn of(checks: &[Check]) -> Verdict {
        if checks.is_empty() || checks.iter().any(|c| c.finding == Finding::Failed) {
            Verdict::NotConfined
        } else if checks.iter().any(|c| c.finding == Finding::Advisory) {
            Verdict::Advisory
        } else {
            Verdict::Confined
        }
    }

    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Confined => 0,
            Verdict::NotConfined => 1,
            Verdict::Advisory => 2,
        }
    }
}

/// A path rule as the policy file spells it.
#[derive(Debug, Clone, Deserialize)]
struct FileRule {
    path: PathBuf,
    access: String,
}

/// What a policy file claims about this process, as the kernel can check it: the plan of
/// `jail status` (pure, from the file alone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Claims {
    pub mount: bool,
    pub landlock: bool,
    /// Landlock's filesystem rules (off with `--allow-userns`, its scopes stay).
    pub landlock_filesystem: bool,
    pub seccomp: bool,
    /// Paths the policy makes read-only: every read-only rule, and `/`, the working directory
    /// and HOME when the policy leaves them read-only (the places a write is most likely to
    /// be allowed by the file permissions, so that a refusal there shows the jail).
    pub read_only: Vec<PathBuf>,
    pub hidden: Vec<PathBuf>,
    /// Paths a rule shows inside a hidden directory (a flag naming a path inside a hidden one
    /// wins): they and the directories leading to them are not hidden.
    pub revealed: Vec<PathBuf>,
    /// Paths the policy makes writable (its rw rules).
    pub writable: Vec<PathBuf>,
}

impl Claims {
    pub fn of(file: &PolicyFile, home: Option<PathBuf>) -> Claims {
        let rules: Vec<FileRule> = file
            .policy
            .get("rules")
            .and_then(|r| serde_json::from_value(r.clone()).ok())
            .unwrap_or_default();
        let access_at = |p: &Path| {
            rules
                .iter()
                .filter(|r| p.starts_with(&r.path))
                .max_by_key(|r| r.path.components().count())
                .map(|r| r.access.as_str())
                .unwrap_or("ro")
        };
        let cwd = file
            .policy
            .get("cwd")
            .and_then(|c| c.as_str())
            .map(PathBuf::from);
        let mut read_only: Vec<PathBuf> = rules
            .iter()
            .filter(|r| r.access == "ro")
            .map(|r| r.path.clone())
            .chain(file.protected.iter().cloned())
            .chain([PathBuf::from("/")])
            .chain(cwd)
            .chain(home)
            // /tmp and /dev/shm are writable in every jail (private, or the host's).
            .filter(|p| !p.starts_with("/tmp") && !p.starts_with("/dev/shm"))
            .filter(|p| p.is_absolute() && access_at(p) == "ro")
            .collect();
        read_only.sort();
        read_only.dedup();
        Claims {
            mount: file.layers.mount,
            landlock: file.layers.landlock,
            landlock_filesystem: file.layers.landlock
                && file.policy.get("allow_userns") != Some(&true.into()),
            seccomp: file.layers.seccomp,
            read_only,
            writable: rules
                .iter()
                .filter(|r| r.access == "rw")
                .map(|r| r.path.clone())
                .collect(),
            hidden: file.hidden.clone(),
            revealed: rules
                .iter()
                .filter(|r| r.access != "hide" && file.hidden.iter().any(|h| r.path.starts_with(h)))
                .map(|r| r.path.clone())
                // A socket given with --allow-socket is shown inside a hidden directory too.
                .chain(
                    file.policy
                        .get("allow_sockets")
                        .and_then(|v| v.as_array())
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str().map(PathBuf::from)),
                )
                .collect(),
        }
    }
}

/// Creating a file in / must be refused inside a jail (Seatbelt denies it); one that could be
/// made is removed again.
#[cfg(not(target_os = "linux"))]
fn gather(path: &str, file: Option<&PolicyFile>) -> Vec<Check> {
    let mut checks = vec![Check::new(
        "policy file",
        if file.is_some() {
            Finding::Advisory
        } else {
            Finding::Failed
        },
        format!("read {path}"),
        "a file in jail's run directory: anyone can write one like it",
    )];
    let probe = "/.jail-status-probe";
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(probe);
    if made.is_ok() {
        let _ = std::fs::remove_file(probe);
    }
    checks.push(Check::new(
        "read-only paths",
        if made.is_ok() {
            Finding::Failed
        } else {
            Finding::Advisory
        },
        "create /.jail-status-probe",
        match made {
            Ok(_) => "a file could be created in /".to_string(),
            Err(e) => format!("refused: {e}"),
        },
    ));
    checks
}

#[cfg(target_os = "linux")]
fn gather(path: &str, file: Option<&PolicyFile>) -> Vec<Check> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    crate::linux::evidence::gather(path, file.map(|f| (f, Claims::of(f, home))))
}

/// Runs the checks; prints the verdict; returns 0 when confinement is confirmed, 2 when it is
/// only advisory, 1 outside a jail or when the kernel contradicts the policy.
pub fn status(json: bool) -> i32 {
    use crate::text::printable;
    let file = read_policy_file();
    let path = policy_path().unwrap_or_default();
    let checks = gather(&path, file.as_ref());
    let verdict = Verdict::of(&checks);
    let inside = verdict != Verdict::NotConfined;
    if json {
        #[derive(Serialize)]
        struct Out<'a> {
            inside: bool,
            verdict: Verdict,
            exit_code: i32,
            checks: &'a [Check],
            policy: Option<&'a PolicyFile>,
        }
        let out = Out {
            inside,
            verdict,
            exit_code: verdict.exit_code(),
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
            printable(&f.profile)
        );
        if verdict == Verdict::Advisory {
            let why: Vec<String> = checks
                .iter()
                .filter(|c| c.finding == Finding::Advisory)
                .map(|c| format!("{}: {}", c.name, printable(&c.detail)))
                .collect();
            println!("advisory (exit 2): {}", why.join("; "));
        }
        println!(
            "layers: mount view {}, landlock {}, seccomp {}",
            f.layers.mount, f.layers.landlock, f.layers.seccomp
        );
        let list = |v: &[PathBuf]| {
            v.iter()
                .map(|p| printable(&p.display().to_string()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!("writable: {}", list(&f.writable));
        println!("hidden: {}", list(&f.hidden));
        println!("homes: {}", f.home().describe());
        for gap in &f.gaps {
            println!("gap: {}", printable(gap));
        }
    } else {
        println!("not inside a jail:");
        for c in checks.iter().filter(|c| !c.ok) {
            println!("  {} failed: {}", c.name, printable(&c.detail));
        }
    }
    verdict.exit_code()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enforcement::Layers;
    use crate::policy::{Access, Origin, Policy};

    #[test]
    fn claims_name_the_read_only_places_a_write_would_show_the_jail_at() {
        let mut policy = Policy::probe_default();
        let rule = |path: &str, access| crate::policy::PathRule {
            path: path.into(),
            access,
            kind: crate::policy::Kind::Dir,
            origin: Origin::Default,
        };
        policy.rules.extend([
            rule("/h/.ssh", Access::Hide),
            rule("/w", Access::Rw),
            rule("/w/.git/hooks", Access::Ro),
        ]);
        policy.cwd = "/w".into();
        let layers = Layers {
            mount: true,
            landlock: true,
            seccomp: true,
            seatbelt: false,
        };
        let file = PolicyFile::new(&policy, &layers, vec![]);
        let claims = Claims::of(&file, Some("/h".into()));
        // The writable cwd is no place to probe; HOME (read-only) and the carve-out are.
        assert_eq!(
            claims.read_only,
            [Path::new("/"), Path::new("/h"), Path::new("/w/.git/hooks")]
        );
        assert_eq!(claims.hidden, [Path::new("/h/.ssh")]);
        assert!(claims.revealed.is_empty());
        policy.rules.push(rule("/h/.ssh/known_hosts", Access::Ro));
        let file = PolicyFile::new(&policy, &layers, vec![]);
        let claims = Claims::of(&file, Some("/h".into()));
        assert_eq!(claims.revealed, [Path::new("/h/.ssh/known_hosts")]);
        assert!(claims.mount && claims.landlock_filesystem && claims.seccomp);
        // A HOME under /tmp (writable in every jail) is not probed either.
        assert!(
            !Claims::of(&file, Some("/tmp/h".into()))
                .read_only
                .iter()
                .any(|p| p.starts_with("/tmp"))
        );
    }

    #[test]
    fn any_failed_check_means_not_confined_and_any_advisory_one_exit_2() {
        let check = |f| Check::new("c", f, "", "");
        use Finding::*;
        assert_eq!(Verdict::of(&[]), Verdict::NotConfined);
        assert_eq!(
            Verdict::of(&[check(Verified), check(Verified)]).exit_code(),
            0
        );
        assert_eq!(
            Verdict::of(&[check(Verified), check(Advisory)]).exit_code(),
            2
        );
        assert_eq!(
            Verdict::of(&[check(Advisory), check(Failed)]).exit_code(),
            1
        );
        assert!(!check(Failed).ok && check(Advisory).ok);
    }
}
