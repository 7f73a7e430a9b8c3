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
    #[serde(with = "crate::byte_path")]
    path: PathBuf,
    access: String,
    /// `{"from": "home"}` and the like; only `shared_tmp` matters here.
    #[serde(default)]
    origin: serde_json::Value,
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
    /// The policy lets the command create user namespaces (`--allow-userns`).
    pub allow_userns: bool,
    /// The `--net` mode as the file names it (`host`, `none`, `ports`, `proxy`).
    pub net_mode: String,
    /// A network namespace of jail's own with loopback only (`none`, or `proxy` whose only
    /// way out is the supervisor's listener on loopback): only with the mount view.
    pub own_network: bool,
    /// `--home hidden`.
    pub homes_hidden: bool,
    /// Every rule's path but `/`, and whether the rule hides it: what a hidden home may still
    /// list (the way to a path a rule names inside it).
    pub rule_paths: Vec<(PathBuf, bool)>,
    /// Paths a rule shows at or above which a home is the rule's, not `--home hidden`'s (any
    /// rule that does not hide, but `/` and the host's shared /tmp).
    pub deciding: Vec<PathBuf>,
    /// /tmp is the jail's own (a home beneath it is not the host's).
    pub private_tmp: bool,
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
            .and_then(crate::byte_path::from_value);
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
        let net_mode = file
            .policy
            .get("net")
            .and_then(|n| n.get("mode"))
            .and_then(|m| m.as_str())
            .unwrap_or("host")
            .to_string();
        // The rules' hidden paths count even where the file's list leaves them out.
        let mut hidden = file.hidden.clone();
        hidden.extend(
            rules
                .iter()
                .filter(|r| r.access == "hide")
                .map(|r| r.path.clone()),
        );
        hidden.sort();
        hidden.dedup();
        let root = Path::new("/");
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
            allow_userns: file.policy.get("allow_userns") == Some(&true.into()),
            own_network: file.layers.mount && matches!(net_mode.as_str(), "none" | "proxy"),
            net_mode,
            homes_hidden: file.home() == crate::policy::homes::HomeMode::Hidden,
            rule_paths: rules
                .iter()
                .filter(|r| r.path != root)
                .map(|r| (r.path.clone(), r.access == "hide"))
                .collect(),
            deciding: rules
                .iter()
                .filter(|r| r.access != "hide" && r.path != root)
                .filter(|r| r.origin.get("from") != Some(&"shared_tmp".into()))
                .map(|r| r.path.clone())
                .collect(),
            private_tmp: file.private_tmp,
            revealed: rules
                .iter()
                .filter(|r| r.access != "hide" && hidden.iter().any(|h| r.path.starts_with(h)))
                .map(|r| r.path.clone())
                // A socket given with --allow-socket is shown inside a hidden directory too.
                .chain(
                    file.policy
                        .get("allow_sockets")
                        .and_then(|v| v.as_array())
                        .into_iter()
                        .flatten()
                        .filter_map(crate::byte_path::from_value),
                )
                .collect(),
            hidden,
        }
    }

    /// The homes `--home hidden` must have hidden, from what this process sees as homes (HOME,
    /// /home, /root, /etc/passwd's login users): as the launcher picks them (never a system
    /// directory, the outermost of nested ones), but a home a rule decides for (shown with
    /// `--ro ~`, or under a writable path) and one beneath the private /tmp.
    pub fn homes_to_check(&self, candidates: &[PathBuf]) -> Vec<PathBuf> {
        if !self.homes_hidden {
            return Vec::new();
        }
        crate::policy::homes::homes_to_hide(candidates)
            .into_iter()
            .filter(|h| !(self.private_tmp && h.starts_with("/tmp")))
            .filter(|h| !self.deciding.iter().any(|d| h.starts_with(d)))
            .collect()
    }

    /// Whether `entry` (a name listed in a hidden home) lies on the way to a path a rule names
    /// (`hiding_too`: a hiding rule's counts, as the mount view makes a place for it).
    pub fn on_the_way_to_a_rule(&self, entry: &Path, hiding_too: bool) -> bool {
        self.rule_paths
            .iter()
            .any(|(p, hide)| (hiding_too || !hide) && p.starts_with(entry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enforcement::Layers;
    use crate::policy::{Access, Origin, Policy};

    #[test]
    fn hidden_homes_are_checked_but_those_a_rule_shows_and_the_net_claim_is_read() {
        let mut policy = Policy::probe_default();
        let rule = |path: &str, access, origin| crate::policy::PathRule {
            path: path.into(),
            access,
            kind: crate::policy::Kind::Dir,
            origin,
        };
        policy.home = crate::policy::homes::HomeMode::Hidden;
        policy.net = crate::net::NetPolicy::None;
        policy.tmp = crate::policy::TmpMode::Host;
        policy.rules.extend([
            rule("/home", Access::Hide, Origin::Home("x".into())),
            rule("/root", Access::Hide, Origin::Home("x".into())),
            rule("/root/.cargo", Access::Ro, Origin::Home("x".into())),
            rule("/srv/u", Access::Ro, Origin::Flag("--ro".into())),
            rule("/tmp", Access::Rw, Origin::SharedTmp),
        ]);
        let layers = Layers {
            mount: true,
            landlock: true,
            seccomp: true,
            seatbelt: false,
        };
        let mut file = PolicyFile::new(&policy, &layers, vec![]);
        // The file's hidden list is the forger's to leave empty: the rules still count.
        file.hidden.clear();
        let claims = Claims::of(&file, None);
        assert!(claims.homes_hidden && claims.own_network && claims.net_mode == "none");
        assert_eq!(claims.hidden, [Path::new("/home"), Path::new("/root")]);
        let candidates: Vec<PathBuf> = ["/home", "/root", "/home/u", "/srv/u/x", "/tmp/h", "/"]
            .map(PathBuf::from)
            .to_vec();
        // /home/u is inside /home; /srv/u/x is the --ro rule's; the shared /tmp's home is a
        // home; `/` is no home.
        assert_eq!(
            claims.homes_to_check(&candidates),
            [Path::new("/home"), Path::new("/root"), Path::new("/tmp/h")]
        );
        // /root lists the way to .cargo and nothing else.
        assert!(claims.on_the_way_to_a_rule(Path::new("/root/.cargo"), false));
        assert!(!claims.on_the_way_to_a_rule(Path::new("/root/.bashrc"), true));
        // Without the mount view the proxy runs on the host's network.
        file.layers.mount = false;
        assert!(!Claims::of(&file, None).own_network);
    }

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
        // Nothing in this policy hides the homes, so none is checked.
        assert!(!claims.homes_hidden && claims.homes_to_check(&["/h".into()]).is_empty());
        // A HOME under /tmp (writable in every jail) is not probed either.
        assert!(
            !Claims::of(&file, Some("/tmp/h".into()))
                .read_only
                .iter()
                .any(|p| p.starts_with("/tmp"))
        );
    }
}
