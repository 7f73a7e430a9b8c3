//! Limits layer: bounds on what the command's tree can take from the host — processes, memory,
//! the private tmpfs mounts, CPU time.
//!
//! Kernel facts behind it:
//! - A cgroup bounds the whole tree (pids.max, memory.max / memory.limit_in_bytes) whatever the
//!   tree does: a process cannot leave it without write access to a cgroup.procs above it,
//!   which the mount view keeps read-only. Pages of a tmpfs are charged to the cgroup of the
//!   process that wrote them, so /tmp and /dev/shm count against the memory bound too.
//! - cgroup v2 lets a user create cgroups only inside a subtree delegated to them (systemd's
//!   user@UID.service); the controllers must be on in the parent's cgroup.subtree_control and,
//!   except at the root, a cgroup with processes in it cannot turn controllers on for its
//!   children ("no internal processes"), so the run's cgroup is made beside the caller's, under
//!   the nearest ancestor that allows it. On a v1 (or hybrid) system each controller has its own
//!   hierarchy, writable by root alone.
//! - RLIMIT_NPROC is checked at fork against a count per (user namespace, uid) — ucounts, Linux
//!   5.14+ — so in the jail's fresh user namespace it counts the jail's own tasks (threads
//!   included), not the user's others. It binds no task whose real uid is host root (the kernel
//!   exempts INIT_USER, capabilities or not) and, without a user namespace of its own, would
//!   count every process of the user on the host: then it is no bound of this run.
//! - RLIMIT_DATA bounds one process's private writable memory (heap, anonymous mappings), not
//!   the tree; RLIMIT_AS would also count the address space V8, Go and sanitizers reserve
//!   without using, and break them. RLIMIT_CPU is CPU seconds per process (SIGXCPU, then
//!   SIGKILL at the hard limit).
//! - A tmpfs without size= takes up to half of RAM, and without nr_inodes= half of RAM's pages
//!   in inodes, whose kernel memory no size= counts.
//! - A copy-on-write layer is bounded too (`layer`): see [`crate::linux::layers::layer_bound`] for how
//!   and why each kind of layer is held to its size.
//!
//! This file decides (`compile`, pure); `apply` makes the cgroups, sets the rlimits and reads
//! what was reached.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::error::JailError;
pub use crate::limits_report::{Enforcement, LimitsReport, Reached, ReportedBound};
use crate::policy::limits::{Limit, Limits, size_text};
use crate::policy::{Policy, TmpMode};

mod apply;

pub use apply::*;

/// Processes and threads of a run by default: well above a parallel build on a large machine
/// (cargo runs a rustc per core, each with up to ~16 threads; node runs ~11 per process), and a
/// small fraction of the kernel's pid_max (4M) and threads-max, so a fork bomb ends there.
pub const DEFAULT_PROCS: u64 = 4096;
/// The private /tmp by default: room for a node_modules or a Rust target directory (the review
/// profile sends build caches there), at most a quarter of RAM (the kernel's own is half).
pub const DEFAULT_TMP_MAX: u64 = 4 << 30;
/// The private /dev/shm by default: browsers and Python multiprocessing need more than Docker's
/// 64M; at most a sixteenth of RAM.
pub const DEFAULT_SHM_MAX: u64 = 1 << 30;
/// A copy-on-write run's layer by default: what a build's output needs in a project (a
/// node_modules, a target directory of a mid-sized crate), at most a quarter of RAM, since the
/// overlay's layer lives in memory while the run goes on.
pub const DEFAULT_LAYER_MAX: u64 = 4 << 30;
/// A tmpfs gets one inode per this many bytes of its size: an empty-file flood costs kernel
/// memory that size= does not count. 4G of /tmp holds 512Ki files, more than a large
/// node_modules has.
const BYTES_PER_INODE: u64 = 8 << 10;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bound {
    /// Bytes, a count, or CPU seconds; None when unbounded.
    pub value: Option<u64>,
    pub enforced_by: Enforcement,
    /// How, in words: the file or resource limit, or why there is none.
    pub how: String,
    /// Whether the value is jail's default (unset by flags and profile).
    pub default: bool,
}

/// What the limits layer does for a run: the data of `--dry-run` and `jail probe`.
#[derive(Debug, Clone, Serialize)]
pub struct LimitsPlan {
    pub procs: Bound,
    pub memory: Bound,
    pub tmp: Bound,
    pub shm: Bound,
    pub cpu: Bound,
    /// The copy-on-write layers, each on its own.
    pub layer: Bound,
    /// The cgroups to make, one per parent directory (v1: one per controller).
    pub cgroups: Vec<CgroupDir>,
    /// What a default could not get here (said by the gaps).
    #[serde(skip)]
    pub gaps: Vec<String>,
}

/// A cgroup to make under `parent`, and what to write in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CgroupDir {
    #[serde(with = "crate::byte_path")]
    pub parent: PathBuf,
    pub version: u8,
    pub settings: Vec<Setting>,
}

/// One file of a cgroup and what is written to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Setting {
    pub file: String,
    pub value: String,
    /// Written only where the kernel has the file (swap accounting is a build option).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

fn setting(file: &str, value: impl ToString, optional: bool) -> Setting {
    Setting {
        file: file.into(),
        value: value.to_string(),
        optional,
    }
}

/// Where this process could make a cgroup with a controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CgroupHome {
    pub version: u8,
    #[serde(with = "crate::byte_path")]
    pub parent: PathBuf,
}

/// What the limits layer can use on this machine.
#[derive(Debug, Clone, Serialize)]
pub struct Host {
    pub euid: u32,
    pub mem_total: u64,
    pub pids: Option<CgroupHome>,
    pub memory: Option<CgroupHome>,
    /// Why no cgroup can be used, when one cannot.
    pub cgroup_detail: Option<String>,
    /// tmpfs keeps `user.*` extended attributes (Linux 6.6), which an overlay whose upper layer
    /// is on it needs in a user namespace (`userxattr`: whiteouts' opaque marks, copy-up origins).
    pub tmpfs_user_xattrs: bool,
}

impl Host {
    pub fn detect() -> Host {
        let euid = nix::unistd::geteuid().as_raw();
        let mem_total = mem_total().unwrap_or(0);
        let mut host = Host {
            euid,
            mem_total,
            pids: None,
            memory: None,
            cgroup_detail: None,
            tmpfs_user_xattrs: kernel_at_least(6, 6),
        };
        if test_disabled() {
            host.cgroup_detail = Some("disabled by JAIL_TEST_DISABLE".into());
            return host;
        }
        let read = |p: &str| crate::linux::mountinfo::text(&std::fs::read(p).unwrap_or_default());
        let own = read("/proc/self/cgroup");
        let mounts = read("/proc/self/mountinfo");
        host.pids = find_home("pids", &own, &mounts);
        host.memory = find_home("memory", &own, &mounts);
        if host.pids.is_none() || host.memory.is_none() {
            let missing: Vec<&str> = [
                host.pids.is_none().then_some("pids"),
                host.memory.is_none().then_some("memory"),
            ]
            .into_iter()
            .flatten()
            .collect();
            host.cgroup_detail = Some(format!(
                "no cgroup with the {} controller is writable by uid {euid} (cgroup v2 needs \
                 one delegated to the user, as systemd's user@{euid}.service is)",
                missing.join(" and ")
            ));
        }
        host
    }
}

impl Host {
    /// No cgroup after all (making one failed): the run degrades to rlimits.
    pub fn forgo_cgroups(&mut self, why: String) {
        self.pids = None;
        self.memory = None;
        self.cgroup_detail = Some(why);
    }
}

#[cfg(feature = "test-hooks")]
fn test_disabled() -> bool {
    std::env::var("JAIL_TEST_DISABLE").is_ok_and(|l| l.split(',').any(|i| i.trim() == "cgroup"))
}

#[cfg(not(feature = "test-hooks"))]
fn test_disabled() -> bool {
    false
}

/// Whether the running kernel's release is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    release_at_least(&release, major, minor)
}

fn release_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(a), Some(b)) => (a, b) >= (major, minor),
        _ => false,
    }
}

/// /proc/meminfo's MemTotal (both are totalram_pages), without generating the whole file: the
/// kernel computes every meminfo counter for one read.
fn mem_total() -> Option<u64> {
    // SAFETY: sysinfo fills the struct we own.
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::sysinfo(&mut info) } != 0 {
        return None;
    }
    (info.totalram as u64).checked_mul(u64::from(info.mem_unit.max(1)))
}

/// The directory a run's cgroup with `controller` can be made in: v2 first (the nearest
/// ancestor of our own cgroup, ourselves included, that has the controller on for its
/// children and whose cgroup.procs we may write), else v1's hierarchy of that controller.
fn find_home(controller: &str, own: &str, mountinfo: &str) -> Option<CgroupHome> {
    let writable = |p: &Path| nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok();
    for (version, mount, path) in cgroup_dirs(controller, own, mountinfo) {
        let mut dir = mount.clone();
        dir.extend(Path::new(&path).components().skip(1));
        loop {
            let usable = if version == 2 {
                std::fs::read_to_string(dir.join("cgroup.subtree_control"))
                    .is_ok_and(|s| s.split_whitespace().any(|c| c == controller))
            } else {
                true
            };
            if usable && writable(&dir) && writable(&dir.join("cgroup.procs")) {
                return Some(CgroupHome {
                    version,
                    parent: dir,
                });
            }
            if version == 1 || dir == mount || !dir.pop() {
                break;
            }
        }
    }
    None
}

/// (version, mount point, our cgroup's path) for `controller`, v2 first.
fn cgroup_dirs(controller: &str, own: &str, mountinfo: &str) -> Vec<(u8, PathBuf, String)> {
    let mut out = Vec::new();
    for line in own.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(ctrls), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let v2 = id == "0" && ctrls.is_empty();
        if !v2 && !ctrls.split(',').any(|c| c == controller) {
            continue;
        }
        for m in mountinfo.lines() {
            // id parent dev root mountpoint opts [optional…] - fstype source superopts
            let Some((left, right)) = m.split_once(" - ") else {
                continue;
            };
            let l: Vec<&str> = left.split(' ').collect();
            let r: Vec<&str> = right.split(' ').collect();
            if l.len() < 5 || r.len() < 3 {
                continue;
            }
            let fits = if v2 {
                r[0] == "cgroup2"
            } else {
                r[0] == "cgroup" && r[2].split(',').any(|o| o == controller)
            };
            // A mount of a subtree (a cgroup namespace, a container) holds only what is below
            // its root.
            let Some(rel) = path.strip_prefix(l[3].trim_end_matches('/')) else {
                continue;
            };
            if fits {
                out.push((if v2 { 2 } else { 1 }, PathBuf::from(l[4]), rel.to_string()));
            }
        }
    }
    out.sort_by_key(|(v, _, _)| std::cmp::Reverse(*v));
    out
}

/// Adds `settings` to the cgroup made under `home`'s parent (one cgroup per parent).
fn add_setting(cgroups: &mut Vec<CgroupDir>, home: &CgroupHome, settings: Vec<Setting>) {
    match cgroups.iter_mut().find(|c| c.parent == home.parent) {
        Some(c) => c.settings.extend(settings),
        None => cgroups.push(CgroupDir {
            parent: home.parent.clone(),
            version: home.version,
            settings,
        }),
    }
}

/// The refusal of an explicit bound this host cannot hold, with how to make it possible.
fn refuse(flag: String, why: String) -> JailError {
    JailError::layer("limits", format!("--limit {flag}"), format!("{why}; {FIX}"))
}

/// Why no cgroup can be made here.
fn no_cgroup(host: &Host) -> String {
    host.cgroup_detail
        .clone()
        .unwrap_or_else(|| "no cgroup can be made".into())
}

/// How the process count is bounded: a cgroup's pids.max, else RLIMIT_NPROC where the jail's
/// user namespace makes it count the jail's processes only; otherwise refused (explicit) or a
/// gap (the default).
fn procs_bound(
    asked: Limit<u64>,
    host: &Host,
    mount_view: bool,
    cgroups: &mut Vec<CgroupDir>,
    gaps: &mut Vec<String>,
) -> Result<Bound, JailError> {
    Ok(match asked {
        Limit::Lifted => unbounded("lifted (procs=none)", false),
        asked => {
            let (n, default) = value_or(asked, DEFAULT_PROCS);
            if let Some(home) = &host.pids {
                add_setting(cgroups, home, vec![setting("pids.max", n, false)]);
                bound(
                    n,
                    Enforcement::Cgroup,
                    cgroup_how(home, "pids.max"),
                    default,
                )
            } else if mount_view && host.euid != 0 {
                bound(
                    n,
                    Enforcement::Rlimit,
                    "RLIMIT_NPROC, counted in the jail's own user namespace".into(),
                    default,
                )
            } else {
                let why = if host.euid == 0 {
                    format!(
                        "{}, and RLIMIT_NPROC binds no process of host root",
                        no_cgroup(host)
                    )
                } else {
                    format!(
                        "{}, and without a user namespace RLIMIT_NPROC would count every \
                         process of uid {}",
                        no_cgroup(host),
                        host.euid
                    )
                };
                if !default {
                    return Err(refuse(format!("procs={n}"), why));
                }
                gaps.push(format!("process count not bounded: {why}"));
                unbounded(&why, true)
            }
        }
    })
}

/// How memory is bounded: a cgroup's memory limit (and no swap past it); no rlimit can hold
/// it, so without a cgroup an explicit bound is refused and the default is a gap.
fn memory_bound(
    asked: Limit<u64>,
    host: &Host,
    cgroups: &mut Vec<CgroupDir>,
    gaps: &mut Vec<String>,
) -> Result<Bound, JailError> {
    Ok(match asked {
        Limit::Lifted => unbounded("lifted (memory=none)", false),
        asked => {
            let (bytes, default) = value_or(asked, host.mem_total / 2);
            if let Some(home) = &host.memory {
                let file = if home.version == 2 {
                    "memory.max"
                } else {
                    "memory.limit_in_bytes"
                };
                // Swap would let the tree go on past the bound: none for it (v1 counts memory
                // and swap together, after the memory bound is set).
                let swap = if home.version == 2 {
                    setting("memory.swap.max", 0, true)
                } else {
                    setting("memory.memsw.limit_in_bytes", bytes, true)
                };
                add_setting(cgroups, home, vec![setting(file, bytes, false), swap]);
                bound(bytes, Enforcement::Cgroup, cgroup_how(home, file), default)
            } else if default || bytes == 0 {
                // No default bound per process: RLIMIT_DATA at a share of RAM would stop a
                // single large link or test while leaving a tree of many processes unbounded.
                let why = no_cgroup(host);
                gaps.push(format!("memory not bounded: {why}"));
                unbounded(&why, true)
            } else {
                // An rlimit cannot hold what was asked: RLIMIT_DATA counts one process's private
                // memory only (shared mappings, memfds, tmpfs and SysV segments pass it), and
                // RLIMIT_AS would stop node, Go and sanitizers, which reserve address space.
                return Err(refuse(
                    format!("memory={bytes}"),
                    format!(
                        "{}; a per-process rlimit would not bound shared memory or the tree",
                        no_cgroup(host)
                    ),
                ));
            }
        }
    })
}

/// Decides how each bound is held. An explicit bound that cannot be held here is an error (the
/// run is refused); a default that cannot degrades and is named in `gaps`.
pub fn compile(policy: &Policy, host: &Host, mount_view: bool) -> Result<LimitsPlan, JailError> {
    let l: &Limits = &policy.limits;
    let mut gaps = Vec::new();
    let mut cgroups: Vec<CgroupDir> = Vec::new();

    let procs = procs_bound(l.procs, host, mount_view, &mut cgroups, &mut gaps)?;

    let memory = memory_bound(l.memory, host, &mut cgroups, &mut gaps)?;

    let tmp = tmpfs_bound(
        "tmp",
        l.tmp,
        (DEFAULT_TMP_MAX).min(host.mem_total / 4),
        mount_view && policy.tmp == TmpMode::Private,
        if policy.tmp == TmpMode::Host {
            "/tmp is the host's (--tmp host)"
        } else {
            "no mount view: /tmp is the host's"
        },
    )?;
    let shm = tmpfs_bound(
        "shm",
        l.shm,
        (DEFAULT_SHM_MAX).min(host.mem_total / 16),
        mount_view,
        "no mount view: the host's /dev/shm is read-only",
    )?;

    let cpu = match l.cpu {
        Limit::Set(d) => bound(
            d.as_secs(),
            Enforcement::Rlimit,
            "RLIMIT_CPU, per process (SIGXCPU, SIGKILL 5 s later)".into(),
            false,
        ),
        Limit::Default => unbounded("no default (an agent session runs for hours)", true),
        Limit::Lifted => unbounded("lifted (cpu=none)", false),
    };
    let layer = if policy.cow.is_empty() {
        unbounded(
            "no copy-on-write root in this run",
            l.layer == Limit::Default,
        )
    } else {
        layer_bound(l.layer, host, mount_view)
    };
    Ok(LimitsPlan {
        procs,
        memory,
        tmp,
        shm,
        cpu,
        layer,
        cgroups,
        gaps,
    })
}

/// How a copy-on-write run's layer is bounded: with the mount view on a tmpfs of that size
/// (where tmpfs keeps the overlay's extended attributes), otherwise by the supervisor's watch
/// and RLIMIT_FSIZE (see [`super::layer_bound`]).
pub fn layer_bound(asked: Limit<u64>, host: &Host, mount_view: bool) -> Bound {
    let (bytes, default) = match asked {
        Limit::Lifted => {
            return unbounded(
                "lifted (layer=none): the layer is on the state directory's disk, unbounded",
                false,
            );
        }
        other => value_or(
            other,
            DEFAULT_LAYER_MAX.min(host.mem_total / 4).max(64 << 20),
        ),
    };
    if mount_view && host.tmpfs_user_xattrs {
        return bound(
            bytes,
            Enforcement::Tmpfs,
            format!(
                "the overlay's upper layer on a tmpfs of size={}, nr_inodes={} (its pages count \
                 against memory), copied to the state directory when the run ends",
                size_text(bytes),
                inodes_for(bytes)
            ),
            default,
        );
    }
    let why = if mount_view {
        "tmpfs keeps no user extended attributes before Linux 6.6, so the layer is on disk: "
    } else {
        ""
    };
    bound(
        bytes,
        Enforcement::Watch,
        format!(
            "{why}RLIMIT_FSIZE for each file, and the supervisor's look at what the layer adds \
             on disk every {} ms, which stops the run past it",
            super::layer_bound::INTERVAL.as_millis()
        ),
        default,
    )
}

const FIX: &str = "run as root, from a delegated cgroup (systemd-run --user --scope -p Delegate=yes \
                   jail …), or lift it (none)";

fn value_or(asked: Limit<u64>, default: u64) -> (u64, bool) {
    match asked {
        Limit::Set(n) => (n, false),
        _ => (default, true),
    }
}

fn bound(value: u64, by: Enforcement, how: String, default: bool) -> Bound {
    Bound {
        value: Some(value),
        enforced_by: by,
        how,
        default,
    }
}

fn unbounded(why: &str, default: bool) -> Bound {
    Bound {
        value: None,
        enforced_by: Enforcement::None,
        how: why.to_string(),
        default,
    }
}

fn cgroup_how(home: &CgroupHome, file: &str) -> String {
    format!(
        "{file} of a cgroup v{} made under {}",
        home.version,
        home.parent.display()
    )
}

fn tmpfs_bound(
    name: &str,
    asked: Limit<u64>,
    default: u64,
    own_tmpfs: bool,
    not_ours: &str,
) -> Result<Bound, JailError> {
    let (bytes, is_default) = match asked {
        Limit::Lifted => {
            return Ok(unbounded(
                "lifted: the kernel's default size, half of RAM",
                false,
            ));
        }
        other => value_or(other, default),
    };
    if !own_tmpfs {
        if !is_default {
            return Err(JailError::layer(
                "limits",
                format!("--limit {name}={}", size_text(bytes)),
                format!("{not_ours}, not a tmpfs of jail's that it could size"),
            ));
        }
        return Ok(unbounded(not_ours, true));
    }
    Ok(bound(
        bytes,
        Enforcement::Tmpfs,
        format!("size={}, nr_inodes={}", size_text(bytes), inodes_for(bytes)),
        is_default,
    ))
}

/// `4G`, or `11.8G` for a size that no unit divides.
pub fn approx_size(bytes: u64) -> String {
    if bytes < 1 << 20 || bytes % (1 << 30) == 0 || (bytes < 1 << 30 && bytes % (1 << 20) == 0) {
        return size_text(bytes);
    }
    if bytes >= 1 << 30 {
        format!("{:.1}G", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1}M", bytes as f64 / (1u64 << 20) as f64)
    }
}

/// Inodes for a tmpfs of `bytes`.
pub fn inodes_for(bytes: u64) -> u64 {
    (bytes / BYTES_PER_INODE).max(1024)
}

impl LimitsPlan {
    /// The mount options that size the private /tmp and /dev/shm (None: the kernel's default).
    pub fn tmpfs(&self) -> super::mounts::TmpfsSizes {
        let opt = |b: &Bound| {
            (b.enforced_by == Enforcement::Tmpfs)
                .then(|| {
                    b.value
                        .map(|v| format!("size={v},nr_inodes={}", inodes_for(v)))
                })
                .flatten()
        };
        super::mounts::TmpfsSizes {
            tmp: opt(&self.tmp),
            shm: opt(&self.shm),
            layer: opt(&self.layer),
        }
    }

    /// Whether every bound a cgroup holds is jail's default (then a failure to make the cgroup
    /// degrades the run instead of stopping it).
    pub fn cgroup_bounds_are_defaults(&self) -> bool {
        [&self.procs, &self.memory]
            .iter()
            .all(|b| b.enforced_by != Enforcement::Cgroup || b.default)
    }

    /// One line for `jail probe`.
    pub fn summary(&self) -> String {
        let one = |name: &str, b: &Bound, size: bool| {
            let value = match b.value {
                Some(v) if size => approx_size(v),
                Some(v) => v.to_string(),
                None => "none".into(),
            };
            let by = match b.enforced_by {
                Enforcement::Cgroup => "cgroup",
                Enforcement::Rlimit => "rlimit",
                Enforcement::Tmpfs => "tmpfs size",
                Enforcement::Watch => "watched",
                Enforcement::None => "not bounded",
            };
            format!("{name} {value} ({by})")
        };
        let cpu = match self.cpu.enforced_by {
            Enforcement::None => "cpu when asked (rlimit, per process)".to_string(),
            _ => one("cpu", &self.cpu, false),
        };
        [
            one("procs", &self.procs, false),
            one("memory", &self.memory, true),
            one("tmp", &self.tmp, true),
            one("shm", &self.shm, true),
            cpu,
            one("layer", &self.layer, true),
        ]
        .join(", ")
    }

    /// Makes the run's cgroups and writes their bounds (in the supervisor, before the tree
    /// exists). The cgroups are removed when the result is dropped.
    pub fn prepare(&self) -> Result<Prepared, JailError> {
        let mut out = Prepared {
            cgroups: Vec::new(),
            rlimits: self.rlimits(),
        };
        let name = format!(
            "jail-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        );
        for c in &self.cgroups {
            let asked = c.parent.join(&name);
            let (dir, owner) = make_owned(&asked)
                .map_err(|e| JailError::layer("limits", format!("mkdir {}", asked.display()), e))?;
            let fail = |step: &str, e: std::io::Error| {
                JailError::layer("limits", format!("{step} {}", dir.display()), e)
            };
            // From here on it is removed again on every path (the drop of `out`).
            // v1: the process that joins is single-threaded (init, or the command before it
            // execs), so its one thread is the whole process, and moving a thread through
            // `tasks` spares the RCU grace period that moving a process through cgroup.procs
            // waits for (the threadgroup lock's writer side): ~0.6 ms instead of ~12 ms here.
            let entry = if c.version == 1 {
                "tasks"
            } else {
                "cgroup.procs"
            };
            let procs = open_write(&dir.join(entry));
            out.cgroups.push(Made {
                dir: dir.clone(),
                procs: None,
                _owner: owner,
            });
            for Setting {
                file,
                value,
                optional,
            } in &c.settings
            {
                let path = dir.join(file);
                if *optional && !path.exists() {
                    continue;
                }
                crate::sys::write_file(&path.to_string_lossy(), value)
                    .map_err(|e| fail(&format!("write {file}={value} in"), e))?;
            }
            let procs = procs.map_err(|e| fail("open cgroup.procs of", e))?;
            if let Some(last) = out.cgroups.last_mut() {
                last.procs = Some(procs);
            }
        }
        Ok(out)
    }

    fn rlimits(&self) -> Vec<(RlimitResource, u64, u64)> {
        let mut out = Vec::new();
        if let (Enforcement::Rlimit, Some(n)) = (&self.procs.enforced_by, self.procs.value) {
            out.push((libc::RLIMIT_NPROC, n, n));
        }
        if let (Enforcement::Rlimit, Some(b)) = (&self.memory.enforced_by, self.memory.value) {
            out.push((libc::RLIMIT_DATA, b, b));
        }
        if let (Enforcement::Rlimit, Some(s)) = (&self.cpu.enforced_by, self.cpu.value) {
            // SIGXCPU first, which a program may catch to end cleanly; SIGKILL 5 s later.
            out.push((libc::RLIMIT_CPU, s, s + 5));
        }
        if let (Enforcement::Watch, Some(b)) = (&self.layer.enforced_by, self.layer.value) {
            // No file grows past the layer's bound (EFBIG, and SIGXFSZ): the watch cannot see
            // one that is written faster than it looks.
            out.push((libc::RLIMIT_FSIZE, b, b));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::limits::Limits;

    const GIB: u64 = 1 << 30;

    fn host(root: bool, cgroup: bool) -> Host {
        let home = |c: &str| CgroupHome {
            version: 1,
            parent: PathBuf::from(format!("/sys/fs/cgroup/{c}")),
        };
        Host {
            euid: if root { 0 } else { 1000 },
            mem_total: 24 * GIB,
            pids: cgroup.then(|| home("pids")),
            memory: cgroup.then(|| home("memory")),
            cgroup_detail: (!cgroup).then(|| "no cgroup".into()),
            tmpfs_user_xattrs: true,
        }
    }

    fn policy(flags: &str) -> Policy {
        let mut p = Policy::probe_default();
        if !flags.is_empty() {
            p.limits = Limits::from_flags(&[flags.into()]).unwrap();
        }
        p
    }

    #[test]
    fn defaults_with_a_cgroup_bound_the_tree_and_size_the_tmpfs() {
        let plan = compile(&policy(""), &host(true, true), true).unwrap();
        assert_eq!(plan.procs.value, Some(DEFAULT_PROCS));
        assert_eq!(plan.procs.enforced_by, Enforcement::Cgroup);
        assert_eq!(plan.memory.value, Some(12 * GIB), "half of RAM");
        assert_eq!(plan.tmp.value, Some(4 * GIB));
        assert_eq!(plan.shm.value, Some(GIB));
        assert_eq!(plan.cpu.enforced_by, Enforcement::None);
        assert!(plan.gaps.is_empty(), "{:?}", plan.gaps);
        let pids = plan
            .cgroups
            .iter()
            .find(|c| c.parent.ends_with("pids"))
            .unwrap();
        assert_eq!(pids.settings, vec![setting("pids.max", 4096, false)]);
        let t = plan.tmpfs();
        assert_eq!(t.tmp.as_deref(), Some("size=4294967296,nr_inodes=524288"));
    }

    #[test]
    fn small_machines_get_smaller_tmpfs_defaults() {
        let mut h = host(true, true);
        h.mem_total = 4 * GIB;
        let plan = compile(&policy(""), &h, true).unwrap();
        assert_eq!(plan.tmp.value, Some(GIB));
        assert_eq!(plan.shm.value, Some(256 << 20));
    }

    #[test]
    fn without_a_cgroup_a_user_gets_rlimits_and_defaults_degrade_with_a_gap() {
        let plan = compile(&policy(""), &host(false, false), true).unwrap();
        assert_eq!(plan.procs.enforced_by, Enforcement::Rlimit);
        assert_eq!(plan.memory.enforced_by, Enforcement::None);
        assert!(plan.gaps.iter().any(|g| g.contains("memory not bounded")));
        // Asked, memory needs a cgroup: an rlimit would not bound shared memory.
        let err = compile(&policy("memory=64M"), &host(false, false), true).unwrap_err();
        assert!(err.to_string().contains("memory="), "{err}");
        let plan = compile(&policy("cpu=10s"), &host(false, false), true).unwrap();
        assert_eq!(
            plan.prepare_rlimits_for_test(),
            vec![(libc::RLIMIT_NPROC, 4096, 4096), (libc::RLIMIT_CPU, 10, 15)]
        );
        assert!(plan.cgroups.is_empty());
    }

    #[test]
    fn an_asked_bound_that_cannot_hold_refuses_the_run() {
        // Root is exempt from RLIMIT_NPROC: without a cgroup, procs= cannot hold.
        let e = compile(&policy("procs=64"), &host(true, false), true).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("--limit procs=64"), "{text}");
        assert!(text.contains("host root"), "{text}");
        // The default degrades instead.
        let plan = compile(&policy(""), &host(true, false), true).unwrap();
        assert_eq!(plan.procs.enforced_by, Enforcement::None);
        assert!(plan.gaps.iter().any(|g| g.contains("process count")));
        // No user namespace: RLIMIT_NPROC would count the user's other processes.
        let e = compile(&policy("procs=64"), &host(false, false), false).unwrap_err();
        assert!(e.to_string().contains("every process of uid 1000"), "{e}");
        // No mount view: /tmp is the host's, jail cannot size it.
        let e = compile(&policy("tmp=16M"), &host(false, true), false).unwrap_err();
        assert!(e.to_string().contains("--limit tmp=16M"), "{e}");
        let mut p = policy("tmp=16M");
        p.tmp = TmpMode::Host;
        let e = compile(&p, &host(false, true), true).unwrap_err();
        assert!(e.to_string().contains("--tmp host"), "{e}");
    }

    #[test]
    fn lifted_bounds_are_unbounded_without_a_gap() {
        let plan = compile(
            &policy("procs=none,memory=none,tmp=none"),
            &host(true, false),
            true,
        )
        .unwrap();
        assert_eq!(plan.procs.enforced_by, Enforcement::None);
        assert_eq!(plan.memory.enforced_by, Enforcement::None);
        assert_eq!(plan.tmpfs().tmp, None, "the kernel's default size");
        assert!(plan.gaps.is_empty(), "{:?}", plan.gaps);
    }

    #[test]
    fn a_copy_on_write_layer_is_on_a_sized_tmpfs_or_watched_with_each_file_held() {
        let mut p = policy("");
        p.cow = vec![PathBuf::from("/w")];
        let plan = compile(&p, &host(true, true), true).unwrap();
        assert_eq!(plan.layer.enforced_by, Enforcement::Tmpfs);
        assert_eq!(plan.layer.value, Some(4 * GIB));
        assert_eq!(
            plan.tmpfs().layer.as_deref(),
            Some("size=4294967296,nr_inodes=524288")
        );
        assert!(
            plan.summary().ends_with("layer 4G (tmpfs size)"),
            "{}",
            plan.summary()
        );
        // No mount view (the copy-based layer), or a tmpfs without user attributes: watched,
        // and no file grows past the bound.
        let mut old = host(false, false);
        old.tmpfs_user_xattrs = false;
        for (h, view) in [(host(false, false), false), (old, true)] {
            let plan = compile(&p, &h, view).unwrap();
            assert_eq!(plan.layer.enforced_by, Enforcement::Watch);
            assert_eq!(plan.tmpfs().layer, None);
            assert!(
                plan.rlimits()
                    .contains(&(libc::RLIMIT_FSIZE, 4 * GIB, 4 * GIB))
            );
        }
        // Asked, lifted, or no copy-on-write root: no tmpfs, no RLIMIT_FSIZE.
        p.limits = Limits::from_flags(&["layer=64M".into()]).unwrap();
        let plan = compile(&p, &host(true, true), true).unwrap();
        assert_eq!(
            (plan.layer.value, plan.layer.default),
            (Some(64 << 20), false)
        );
        p.limits = Limits::from_flags(&["layer=none".into()]).unwrap();
        let plan = compile(&p, &host(false, false), false).unwrap();
        assert_eq!(plan.layer.enforced_by, Enforcement::None);
        assert!(plan.rlimits().iter().all(|r| r.0 != libc::RLIMIT_FSIZE));
        let plan = compile(&policy(""), &host(false, false), false).unwrap();
        assert_eq!(plan.layer.enforced_by, Enforcement::None);
        assert!(plan.rlimits().iter().all(|r| r.0 != libc::RLIMIT_FSIZE));
    }

    #[test]
    fn kernel_releases_compare_by_major_and_minor() {
        assert!(release_at_least("6.18.44-fc-v1252", 6, 6));
        assert!(release_at_least("6.6.0", 6, 6));
        assert!(!release_at_least("6.5.13-generic", 6, 6));
        assert!(!release_at_least("5.15.0", 6, 6));
        assert!(!release_at_least("garbage", 6, 6));
    }

    #[test]
    fn cgroup_homes_are_found_from_proc_files() {
        let own = "4:memory:/a/b\n8:pids:/\n0::/user.slice/x.scope\n";
        let mounts = "40 31 0:33 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                      41 31 0:34 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n\
                      42 31 0:35 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        let dirs = cgroup_dirs("memory", own, mounts);
        assert_eq!(
            dirs,
            vec![
                (
                    2,
                    PathBuf::from("/sys/fs/cgroup/unified"),
                    "/user.slice/x.scope".to_string()
                ),
                (
                    1,
                    PathBuf::from("/sys/fs/cgroup/memory"),
                    "/a/b".to_string()
                ),
            ]
        );
        assert_eq!(cgroup_dirs("pids", own, mounts)[1].2, "/");
    }

    #[test]
    fn a_delegated_v2_subtree_gives_the_nearest_ancestor_with_the_controllers() {
        // A fake cgroup2 tree: the caller sits in a scope (processes, no controllers for
        // children); app.slice above it has pids and memory on and is the user's.
        let root = std::env::temp_dir().join(format!("jail-cg-test-{}", std::process::id()));
        let scope = root.join("user.slice/user@1000.service/app.slice/term.scope");
        std::fs::create_dir_all(&scope).unwrap();
        let app = scope.parent().unwrap().to_path_buf();
        for (dir, controllers) in [(&scope, ""), (&app, "pids memory")] {
            std::fs::write(dir.join("cgroup.subtree_control"), controllers).unwrap();
            std::fs::write(dir.join("cgroup.procs"), "").unwrap();
        }
        let own = "0::/user.slice/user@1000.service/app.slice/term.scope\n";
        let mounts = format!(
            "30 1 0:26 / {} rw - cgroup2 cgroup2 rw,nsdelegate\n",
            root.display()
        );
        let home = find_home("memory", own, &mounts).unwrap();
        assert_eq!((home.version, home.parent.clone()), (2, app.clone()));
        // Without the controller anywhere writable: none.
        assert_eq!(find_home("cpu", own, &mounts), None);
        std::fs::remove_dir_all(&root).unwrap();
    }

    impl LimitsPlan {
        fn prepare_rlimits_for_test(&self) -> Vec<(RlimitResource, u64, u64)> {
            self.rlimits()
        }
    }
}
