//! What `jail status` checks and how one check came out, shared by those who gather the
//! evidence (`linux::evidence`; the macOS checks in [`crate::status`]) and the verdict.
//!
//! [`Claims`] is the plan, pure and from the policy file alone: what the file says about this
//! process, reduced to what the kernel can be asked about (layers, and the paths where a write
//! or a read would show the jail). A [`Check`] is one answer, with its [`Finding`]: verified
//! when the kernel confirms the claim, advisory when nothing contradicts it but nothing proves
//! it either, failed when the kernel contradicts it. These types sit apart from both sides so
//! that the dependency runs one way: `jail status` calls the gatherers and judges what they
//! return, and the gatherers know nothing of the verdict.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::policy_file::PolicyFile;

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
        // HOME hidden (every shipped profile) is as good a place as HOME read-only: the
        // user may write it, the jail refuses (a read-only tmpfs over it, or Landlock).
        let home_probe = home.clone().filter(|h| access_at(h) == "hide");
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
            .chain(home_probe.filter(|h| !h.starts_with("/tmp") && h.is_absolute()))
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
}
