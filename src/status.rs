//! `jail status` (am I inside a jail, and under what policy?) and `jail notice` (the two
//! sentences an agent harness puts into a prompt). Both read the policy file jail leaves at
//! JAIL_POLICY; status also asks the kernel, so a forged JAIL variable does not fool it.

use std::path::{Path, PathBuf};

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
    pub writable: Vec<PathBuf>,
    /// Read-only carve-outs inside writable paths.
    pub protected: Vec<PathBuf>,
    pub hidden: Vec<PathBuf>,
    pub private_tmp: bool,
    /// How long the command line was, and whether `policy.command` shows all of it.
    pub command: CommandSize,
    /// The whole resolved policy (environment values excluded; the command shortened, see
    /// [`shown_command`]).
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
pub fn shown_command(command: &[std::ffi::OsString]) -> (Vec<String>, CommandSize) {
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
/// changed by anyone), else JAIL_POLICY (a sealed memfd without the mount view). A jail inside
/// another without a mount view of its own sees the outer one's fixed file, but its own policy
/// is the memfd JAIL_POLICY names: the innermost wins (a memfd is advisory at best, so pointing
/// JAIL_POLICY at one can only lower the verdict).
fn policy_path() -> Option<String> {
    let env = std::env::var("JAIL_POLICY").ok().filter(|p| !p.is_empty());
    #[cfg(target_os = "linux")]
    {
        if let Some(p) = env
            .as_deref()
            .filter(|p| crate::linux::sys::is_sealed_memfd(p))
        {
            return Some(p.to_string());
        }
        let fixed = crate::linux::mounts::POLICY_FILE;
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
        println!("homes: {}", f.policy_summary().home.describe());
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
