//! The run report (`--report FILE`, `--summary`): what the command changed, what the kernel
//! refused it, what the network proxy decided, and which layers held. Pure: the launcher gathers
//! the facts and this module shapes them into the versioned document (schema/report-v1.json) and
//! the one-line summary.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::changes::{ChangeKind, Changes};
use crate::enforcement::{Layers, Level};
use crate::net::Decision;
use crate::policy::Policy;
use crate::probe::Features;

/// The `schema` field of every report of this layout. A change that removes or renames a field
/// makes a new version; new optional fields do not.
pub const SCHEMA: &str = "jail-run-report/1";

/// Denials listed in the report; the total counts all.
pub const MAX_DENIALS: usize = 1000;

#[derive(Debug, Serialize, Deserialize)]
pub struct RunReport {
    pub schema: String,
    pub jail_version: String,
    pub kernel: String,
    pub arch: String,
    pub landlock_abi: u32,
    pub profile: String,
    /// Each argument a string, or its bytes when it is not UTF-8.
    #[serde(with = "crate::byte_path::os_vec")]
    pub command: Vec<std::ffi::OsString>,
    /// A string, or its bytes when it is not UTF-8 (as every path of the report).
    #[serde(with = "crate::byte_path")]
    pub cwd: PathBuf,
    pub level: Level,
    pub layers: Vec<LayerState>,
    pub gaps: Vec<String>,
    pub started: String,
    pub ended: String,
    pub duration_ms: u64,
    pub outcome: Outcome,
    pub resources: Resources,
    /// Each resource bound and how it held; what the cgroups counted.
    pub limits: crate::limits_report::LimitsReport,
    pub network: Network,
    pub changes: ChangesSection,
    pub denials: DenialsSection,
    /// A session's commands (`jail exec`): each one's span and what changed under the
    /// copy-on-write roots while it ran. Absent for a run that is not a session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execs: Option<ExecsSection>,
    /// The resolved policy, as JAIL_POLICY shows it to the command.
    pub policy: serde_json::Value,
}

/// A session's execs, in the order they started.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExecsSection {
    /// Every exec the session started.
    pub total: u64,
    /// The first [`MAX_EXECS`] of them.
    pub items: Vec<ExecItem>,
}

/// Execs listed in the report; the total counts all.
pub const MAX_EXECS: usize = 10_000;
/// Paths listed for one exec; the rest are counted.
pub const MAX_EXEC_PATHS: usize = 1_000;

/// One `jail exec` of a session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecItem {
    /// Its number in the session, from 1; the event stream's `exec` field names it.
    pub id: u64,
    #[serde(with = "crate::byte_path::os_vec")]
    pub command: Vec<std::ffi::OsString>,
    /// `--cwd` as the caller gave it (null: the session's own).
    #[serde(with = "crate::byte_path::option")]
    pub cwd: Option<PathBuf>,
    /// Milliseconds from the session's start.
    pub started_ms: u64,
    pub ended_ms: Option<u64>,
    /// What `jail exec` returned (null while it ran, or when the session ended first).
    pub exit_code: Option<i32>,
    /// No other exec ran at any moment of its span, and no process an earlier exec left behind
    /// lived when it started: every change listed is its own. Otherwise a change is listed for
    /// each exec that ran when it was seen.
    pub alone: bool,
    /// The paths under the copy-on-write roots that changed while it ran (created, written,
    /// deleted, renamed, their modes changed), in order.
    #[serde(with = "crate::byte_path::vec")]
    pub wrote: Vec<PathBuf>,
    /// Changed paths past [`MAX_EXEC_PATHS`], not listed.
    pub wrote_over_limit: u64,
}

/// One layer: `achieved`, `degraded` (on, but narrower than the policy asks) or `gap` (off),
/// with why.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LayerState {
    pub name: String,
    pub state: String,
    pub why: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    /// `exited`, `signaled`, `timeout`, `stopped` (by the program that started jail, through
    /// `--control-fd`) or `jail_error` (jail failed after the start).
    pub status: String,
    /// jail's exit code.
    pub exit_code: i32,
    pub signal: Option<i32>,
    /// jail's own error, when `status` is `jail_error`.
    pub error: Option<String>,
    /// The run's bound that ended it: `time` (`--timeout`), `memory` or `cpu` (`--limit`);
    /// null when none did.
    #[serde(default)]
    pub bound: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Resources {
    /// The largest resident set of any one process of the tree (getrusage of the children: the
    /// kernel keeps the maximum, not the sum).
    pub peak_rss_kib: u64,
    pub user_cpu_ms: u64,
    pub system_cpu_ms: u64,
    /// Processes the tree started, the command included; null without a pid namespace.
    pub processes_started: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Network {
    /// `host`, `none`, `ports` or `proxy`.
    pub mode: String,
    pub summary: String,
    /// How it was enforced: `namespace`, `namespace+proxy`, `landlock-tcp`, `landlock-tcp+proxy`
    /// or `none`.
    pub enforcement: String,
    /// Proxy decisions (null when there is no proxy).
    pub allowed: Option<u64>,
    pub refused: Option<u64>,
    pub decisions: Vec<Decision>,
    /// Decisions not listed because the list was full (refusals give way first).
    pub decisions_dropped: u64,
    /// The secrets the proxy adds (`--secret`, a profile's `[secrets]`): names and hosts,
    /// never values.
    #[serde(default)]
    pub secrets: Vec<InjectedSecret>,
}

/// One secret of the run as the report shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InjectedSecret {
    /// The environment variable (its placeholder inside).
    pub name: String,
    /// The hosts its value is added for.
    pub hosts: Vec<String>,
    /// Hosts the profile declares for it that the network does not allow: the value went to
    /// none of them.
    #[serde(default)]
    pub not_allowed: Vec<String>,
    /// `--secret` or `profile NAME`.
    pub from: String,
    /// Listed connections whose requests carried it (see `decisions`).
    pub connections: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChangesSection {
    pub available: bool,
    /// Why not, when not available.
    pub reason: Option<String>,
    /// The writable paths compared (the private /tmp is not one).
    #[serde(with = "crate::byte_path::vec")]
    pub roots: Vec<PathBuf>,
    pub created: usize,
    pub modified: usize,
    pub deleted: usize,
    pub mode_changed: usize,
    /// The list is incomplete: a limit was hit.
    pub truncated: bool,
    pub items: Vec<crate::changes::Change>,
    #[serde(with = "crate::byte_path::vec")]
    pub unreadable: Vec<PathBuf>,
    /// Recently written files that could not be hashed: their content may have changed unseen.
    #[serde(with = "crate::byte_path::vec")]
    pub unverified: Vec<PathBuf>,
    pub entries_scanned: usize,
    pub baseline_ms: f64,
    pub compare_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DenialsSection {
    pub available: bool,
    /// Why not, when not available.
    pub reason: Option<String>,
    /// `landlock-audit`.
    pub source: String,
    /// What the kernel does not record even when available.
    pub note: Option<String>,
    pub total: u64,
    pub dropped_records: bool,
    pub items: Vec<DenialItem>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DenialItem {
    pub unix_ms: u64,
    pub pid: Option<i32>,
    pub command: Option<String>,
    pub exe: Option<String>,
    pub operation: String,
    pub path: Option<String>,
    pub detail: Option<String>,
}

/// Denials as the launcher got them: a list, or why there is none.
pub enum DenialFacts {
    Unavailable(String),
    Read {
        items: Vec<DenialItem>,
        total: u64,
        dropped_records: bool,
    },
}

/// How the run ended.
pub enum EndFacts {
    Ended {
        code: i32,
        timed_out: bool,
        /// The caller stopped the run (`--control-fd`).
        stopped: bool,
        signal: Option<i32>,
        /// The bound that ended it (`time`, `memory`, `cpu`).
        bound: Option<&'static str>,
    },
    JailError(String),
}

/// Everything the launcher measured, turned into a report by [`RunReport::build`].
pub struct Facts<'a> {
    pub policy: &'a Policy,
    pub policy_json: serde_json::Value,
    pub features: &'a Features,
    pub layers: &'a Layers,
    pub gaps: Vec<String>,
    pub network_enforcement: &'static str,
    pub started: SystemTime,
    pub ended: SystemTime,
    pub end: EndFacts,
    pub resources: Resources,
    pub limits: crate::limits_report::LimitsReport,
    /// Allowed and refused counts, the decisions kept, and how many were not.
    pub decisions: Option<(u64, u64, Vec<Decision>, u64)>,
    pub roots: Vec<PathBuf>,
    pub changes: Result<Changes, String>,
    pub denials: DenialFacts,
}

impl RunReport {
    pub fn build(f: Facts) -> RunReport {
        let outcome = outcome(&f.end);
        RunReport {
            schema: SCHEMA.into(),
            jail_version: env!("CARGO_PKG_VERSION").into(),
            kernel: f.features.kernel.clone(),
            arch: f.features.arch.into(),
            landlock_abi: f.features.landlock_abi,
            profile: f.policy.profile.clone(),
            command: f.policy.command.clone(),
            cwd: f.policy.cwd.clone(),
            level: f.layers.level(),
            layers: layer_states(f.layers, f.features),
            gaps: f.gaps,
            started: rfc3339(f.started),
            ended: rfc3339(f.ended),
            duration_ms: f
                .ended
                .duration_since(f.started)
                .unwrap_or_default()
                .as_millis() as u64,
            outcome,
            resources: f.resources,
            limits: f.limits,
            network: network(f.policy, f.network_enforcement, f.decisions),
            changes: changes_section(&f.roots, f.changes),
            denials: denials_section(f.denials, f.layers),
            execs: None,
            policy: f.policy_json,
        }
    }

    /// The `--summary` line: "3 files changed under /w/repo; 2 writes denied, first: sed →
    /// /w/repo/src/main.rs; network: 12 allowed, 1 refused".
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        let c = &self.changes;
        if c.available {
            let n = c.items.len();
            let under = if c.roots.len() == 1 {
                crate::text::path_text(&c.roots[0])
            } else {
                format!("{} writable paths", c.roots.len())
            };
            parts.push(if c.roots.is_empty() {
                "no writable paths".to_string()
            } else if n == 0 && c.truncated {
                format!("changes under {under} incomplete: a limit was hit, none listed")
            } else if n == 0 {
                format!("nothing changed under {under}")
            } else {
                format!(
                    "{}{} {} changed under {under} ({} created, {} modified, {} deleted, {} mode \
                     changed)",
                    if c.truncated { "over " } else { "" },
                    n,
                    if n == 1 { "file" } else { "files" },
                    c.created,
                    c.modified,
                    c.deleted,
                    c.mode_changed
                )
            });
            if !c.unreadable.is_empty() {
                parts.push(format!(
                    "{} unreadable {} (changes inside unknown)",
                    c.unreadable.len(),
                    if c.unreadable.len() == 1 {
                        "directory"
                    } else {
                        "directories"
                    }
                ));
            }
        } else {
            parts.push(format!(
                "changes unknown ({})",
                c.reason.as_deref().unwrap_or("unavailable")
            ));
        }
        let d = &self.denials;
        if d.available {
            parts.push(match d.items.first() {
                None => "no Landlock denial recorded".to_string(),
                Some(first) => format!(
                    "{} {} denied, first: {} {} → {}",
                    d.total,
                    if d.total == 1 { "access" } else { "accesses" },
                    printable(first.command.as_deref().unwrap_or("?")),
                    printable(&first.operation),
                    printable(first.path.as_deref().unwrap_or("?"))
                ),
            });
        } else {
            parts.push(format!(
                "denials unknown ({})",
                d.reason.as_deref().unwrap_or("unavailable")
            ));
        }
        let n = &self.network;
        if let (Some(a), Some(r)) = (n.allowed, n.refused) {
            parts.push(format!("network: {a} allowed, {r} refused"));
        } else if n.mode != "host" {
            parts.push(format!("network: {}", n.summary));
        }
        parts.push(format!("exit {}", self.outcome.exit_code));
        format!("jail: {}", parts.join("; "))
    }
}

use crate::text::printable;

fn layer_states(layers: &Layers, f: &Features) -> Vec<LayerState> {
    let state = |name: &'static str, on: bool, why_off: String| LayerState {
        name: name.into(),
        state: if on { "achieved" } else { "gap" }.into(),
        why: (!on).then(|| {
            if f.test_disabled.iter().any(|d| d == name) {
                "disabled by JAIL_TEST_DISABLE".to_string()
            } else {
                why_off
            }
        }),
    };
    let mut out = vec![
        state(
            "mount",
            layers.mount,
            f.user_namespaces_detail
                .clone()
                .unwrap_or_else(|| "user namespaces unavailable".into()),
        ),
        state(
            "landlock",
            layers.landlock,
            "Landlock unavailable (kernel < 5.13 or not enabled at boot)".into(),
        ),
        state(
            "seccomp",
            layers.seccomp,
            "seccomp filters unavailable".into(),
        ),
    ];
    if layers.landlock && f.landlock_abi < 6 {
        out[1].state = "degraded".into();
        out[1].why = Some(format!(
            "ABI {}: signals and abstract unix sockets not scoped",
            f.landlock_abi
        ));
    }
    out
}

/// The `changes` section of `changes` under `roots`, or why there is none.
pub fn changes_section(roots: &[PathBuf], changes: Result<Changes, String>) -> ChangesSection {
    match changes {
        Err(reason) => ChangesSection {
            available: false,
            reason: Some(reason),
            roots: roots.to_vec(),
            created: 0,
            modified: 0,
            deleted: 0,
            mode_changed: 0,
            truncated: false,
            items: Vec::new(),
            unreadable: Vec::new(),
            unverified: Vec::new(),
            entries_scanned: 0,
            baseline_ms: 0.0,
            compare_ms: 0.0,
        },
        Ok(c) => {
            let count = |k: ChangeKind| c.changes.iter().filter(|x| x.kind == k).count();
            ChangesSection {
                available: true,
                reason: None,
                roots: roots.to_vec(),
                created: count(ChangeKind::Created),
                modified: count(ChangeKind::Modified),
                deleted: count(ChangeKind::Deleted),
                mode_changed: count(ChangeKind::ModeChanged),
                truncated: c.truncated,
                unreadable: c.unreadable,
                unverified: c.unverified,
                entries_scanned: c.entries_before.max(c.entries_after),
                baseline_ms: c.baseline_ms,
                compare_ms: c.after_ms + c.compare_ms,
                items: c.changes,
            }
        }
    }
}

fn denials_section(d: DenialFacts, layers: &Layers) -> DenialsSection {
    // The kernel checks a read-only mount (EROFS) and file permissions before Landlock's hooks:
    // those refusals never reach the audit log.
    let note = layers.mount.then(|| {
        "writes refused by the read-only mount view (EROFS) or by file permissions are not \
         audited by the kernel; only Landlock's own refusals are listed"
            .to_string()
    });
    match d {
        DenialFacts::Unavailable(reason) => DenialsSection {
            available: false,
            reason: Some(reason),
            source: "landlock-audit".into(),
            note,
            total: 0,
            dropped_records: false,
            items: Vec::new(),
        },
        DenialFacts::Read {
            mut items,
            total,
            dropped_records,
        } => {
            items.truncate(MAX_DENIALS);
            DenialsSection {
                available: true,
                reason: None,
                source: "landlock-audit".into(),
                note,
                total,
                dropped_records,
                items,
            }
        }
    }
}

/// `2026-11-30T15:04:05.123Z` (UTC; no time zone database needed).
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Where the report may go: not anywhere the command can write (it would forge the record of
/// its own run), and not through a symlink. `private_tmp`: the command's /tmp is a tmpfs of its
/// own (the mount view with `--tmp private`); otherwise the host's /tmp is writable inside.
/// Returns the absolute path.
pub fn check_report_path(
    path: &Path,
    base_dir: &Path,
    policy: &Policy,
    private_tmp: bool,
) -> Result<PathBuf, String> {
    check_output_path(path, base_dir, policy, private_tmp, false)
}

/// [`check_report_path`] for any file jail writes about the run while the command runs or after
/// (`--report`, `--events`); `fifo_ok`: a named pipe is a fine target (a live stream's reader).
pub fn check_output_path(
    path: &Path,
    base_dir: &Path,
    policy: &Policy,
    private_tmp: bool,
    fifo_ok: bool,
) -> Result<PathBuf, String> {
    use std::os::unix::fs::FileTypeExt;
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base_dir.join(path)
    };
    let parent = abs
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or_else(|| "has no parent directory".to_string())?;
    let parent = std::fs::canonicalize(parent)
        .map_err(|e| format!("directory {}: {e}", parent.display()))?;
    let name = abs.file_name().ok_or_else(|| "names no file".to_string())?;
    let abs = parent.join(name);
    match std::fs::symlink_metadata(&abs) {
        Ok(m) if m.file_type().is_symlink() => return Err("is a symlink".into()),
        Ok(m) if fifo_ok && m.file_type().is_fifo() => {}
        Ok(m) if !m.is_file() => return Err("is not a regular file".into()),
        _ => {}
    }
    if policy.access_at(&abs) == crate::policy::Access::Rw {
        return Err(
            "is writable inside the jail: the command could forge what jail writes there".into(),
        );
    }
    let under_tmp = abs.starts_with("/tmp") || abs.starts_with("/dev/shm");
    if under_tmp && policy.tmp == crate::policy::TmpMode::Host {
        return Err("is under /tmp, which --tmp host shares with the command".into());
    }
    if under_tmp && !private_tmp {
        return Err(
            "is under /tmp, which the command shares without a mount view (no private /tmp)".into(),
        );
    }
    Ok(abs)
}

/// Opens a file jail writes about the run (`--report`, `--events`) at `abs` (checked by
/// [`check_output_path`]): created, or emptied only once it is known to be a file of its own —
/// O_NONBLOCK so that a named pipe never hangs the launch, and a second name (a hard link)
/// would be overwritten too. `fifo_ok`: a named pipe with its reader there is taken as it is.
pub fn open_output(abs: &Path, fifo_ok: bool) -> Result<std::fs::File, String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(abs)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => "is a named pipe with no reader; open it for reading first".into(),
            _ => e.to_string(),
        })?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if fifo_ok && meta.file_type().is_fifo() {
        return Ok(file);
    }
    if !meta.is_file() {
        return Err("is not a regular file".into());
    }
    if meta.nlink() > 1 {
        return Err("has other names (hard links) that writing it would change".into());
    }
    file.set_len(0).map_err(|e| e.to_string())?;
    Ok(file)
}

/// How the command ended, as the report says it: stopped, timed out, signaled, exited or
/// failed in jail itself; with the bound that ended it, if one did.
fn outcome(end: &EndFacts) -> Outcome {
    let mut outcome = match end {
        EndFacts::Ended {
            code,
            stopped: true,
            signal,
            ..
        } => Outcome {
            status: "stopped".into(),
            exit_code: *code,
            signal: *signal,
            error: None,
            bound: None,
        },
        EndFacts::Ended {
            code,
            timed_out: true,
            signal,
            ..
        } => Outcome {
            status: "timeout".into(),
            exit_code: *code,
            signal: *signal,
            error: None,
            bound: None,
        },
        EndFacts::Ended {
            code,
            signal: Some(sig),
            ..
        } => Outcome {
            status: "signaled".into(),
            exit_code: *code,
            signal: Some(*sig),
            error: None,
            bound: None,
        },
        EndFacts::Ended { code, .. } => Outcome {
            status: "exited".into(),
            exit_code: *code,
            signal: None,
            error: None,
            bound: None,
        },
        EndFacts::JailError(e) => Outcome {
            status: "jail_error".into(),
            exit_code: crate::error::EXIT_JAIL_ERROR,
            signal: None,
            error: Some(e.clone()),
            bound: None,
        },
    };
    if let EndFacts::Ended { bound, .. } = end {
        outcome.bound = bound.map(str::to_string);
    }
    outcome
}

/// The network section: the mode and what it allowed and refused, the secrets put in and on
/// how many connections each, and the decisions kept.
fn network(
    policy: &Policy,
    enforcement: &'static str,
    decisions: Option<(u64, u64, Vec<Decision>, u64)>,
) -> Network {
    let net = &policy.net;
    let (allowed, refused, decisions, decisions_dropped) = match decisions {
        Some((a, r, d, dropped)) => (Some(a), Some(r), d, dropped),
        None => (None, None, Vec::new(), 0),
    };
    Network {
        mode: match net {
            crate::net::NetPolicy::Host => "host",
            crate::net::NetPolicy::None => "none",
            crate::net::NetPolicy::Ports { .. } => "ports",
            crate::net::NetPolicy::Proxy { .. } => "proxy",
        }
        .into(),
        summary: net.summary(),
        enforcement: enforcement.into(),
        allowed,
        refused,
        secrets: policy
            .secrets
            .iter()
            .map(|r| InjectedSecret {
                name: r.name.clone(),
                hosts: r.hosts.clone(),
                not_allowed: r.not_allowed.clone(),
                from: r.from.clone(),
                connections: decisions
                    .iter()
                    .filter(|d| d.secrets.contains(&r.name))
                    .count() as u64,
            })
            .collect(),
        decisions,
        decisions_dropped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_the_summary_cannot_send_control_characters() {
        assert_eq!(printable("a\x1b[2Jb\n"), "a\\u{1b}[2Jb\\n");
        assert_eq!(printable("plain/path é"), "plain/path é");
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_796_051_860_336);
        assert_eq!(rfc3339(t), "2026-11-30T15:17:40.336Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn the_report_may_not_be_written_where_the_command_writes() {
        let dir = std::env::temp_dir().join(format!("jail-rr-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("repo")).unwrap();
        let mut p = Policy::probe_default();
        p.rules.push(crate::policy::PathRule {
            path: dir.join("repo"),
            access: crate::policy::Access::Rw,
            kind: crate::policy::Kind::Dir,
            origin: crate::policy::Origin::Flag("--rw".into()),
        });
        p.tmp = crate::policy::TmpMode::Private;
        let check = |path: &str, p: &Policy, private_tmp| {
            check_report_path(Path::new(path), &dir, p, private_tmp)
        };
        let e = check("repo/r.json", &p, true).unwrap_err();
        assert!(e.contains("writable inside"), "{e}");
        assert_eq!(
            check("r.json", &p, true).unwrap(),
            std::fs::canonicalize(&dir).unwrap().join("r.json")
        );
        std::os::unix::fs::symlink("/etc/passwd", dir.join("link.json")).unwrap();
        let e = check("link.json", &p, true).unwrap_err();
        assert!(e.contains("symlink"), "{e}");
        assert!(check("/no/such/dir/r.json", &p, true).is_err());
        let e = check("/dev/null", &p, true).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        assert!(check("/tmp/r.json", &p, true).is_ok());
        let e = check("/tmp/r.json", &p, false).unwrap_err();
        assert!(e.contains("without a mount view"), "{e}");
        p.tmp = crate::policy::TmpMode::Host;
        let e = check("/tmp/r.json", &p, true).unwrap_err();
        assert!(e.contains("--tmp host"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
