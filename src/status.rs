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

use std::path::PathBuf;

use serde::Serialize;

use crate::claims::{Check, Finding};
use crate::policy_file::{PolicyFile, policy_path, read_policy_file};

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
    let claims = file.map(|f| crate::claims::Claims::of(f, home));
    crate::platform::evidence(path, claims.as_ref())
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
        println!("{}", crate::text::versioned_json(&out));
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
                .map(|p| crate::text::path_text(p))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!("writable: {}", list(&f.writable));
        println!("hidden: {}", list(&f.hidden));
        println!("homes: {}", f.home().describe());
        println!("net: {}", net_line(f, &checks));
        for gap in &f.gaps {
            println!("gap: {}", printable(gap));
        }
    } else {
        // A policy file was read: a claim of it is contradicted (in a real jail too, when the
        // file is the command's own forgery), else nothing says this is a jail.
        println!("not inside a jail, or not confined as its policy says:");
        for c in checks.iter().filter(|c| !c.ok) {
            let what = if file.is_some() {
                "contradicted"
            } else {
                "failed"
            };
            println!("  {} {what}: {}", c.name, printable(&c.detail));
        }
    }
    verdict.exit_code()
}

/// The network line: a mode of its own namespace is said checked only when the `network` check
/// confirmed it; the others are the host's network, narrowed or not.
fn net_line(file: &PolicyFile, checks: &[Check]) -> String {
    let mode = file
        .policy
        .get("net")
        .and_then(|n| n.get("mode"))
        .and_then(|m| m.as_str())
        .unwrap_or("host");
    let checked = checks
        .iter()
        .any(|c| c.name == "network" && c.finding == Finding::Verified);
    let mode = crate::text::printable(mode);
    match (mode.as_str(), checked) {
        ("host", _) => "host: the host's network, unrestricted".to_string(),
        (_, true) => format!("{mode}: a network namespace of its own, loopback only (checked)"),
        ("ports", false) => {
            "ports: the host's network, TCP ports limited by Landlock (not probed)".to_string()
        }
        (m, false) => format!("{m} (not checked)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn the_net_line_says_checked_only_when_the_kernel_confirmed_it() {
        let mut policy = crate::policy::Policy::probe_default();
        policy.net = crate::net::NetPolicy::None;
        let layers = crate::enforcement::Layers {
            mount: true,
            landlock: true,
            seccomp: true,
            seatbelt: false,
        };
        let file = PolicyFile::new(&policy, &layers, vec![]);
        let net = |f| [Check::new("network", f, "", "")];
        assert!(net_line(&file, &net(Finding::Verified)).contains("loopback only (checked)"));
        assert_eq!(net_line(&file, &net(Finding::Failed)), "none (not checked)");
        assert_eq!(net_line(&file, &[]), "none (not checked)");
    }
}
