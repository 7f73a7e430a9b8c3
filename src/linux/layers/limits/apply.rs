//! The limits applied: the run's cgroups made (each owned by a flock for as long as the
//! supervisor lives) and removed, the resource limits the tree's first process sets, and the
//! run report's `limits` for a plan.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::*;

/// The type setrlimit takes for a resource: glibc names it, musl takes a plain int.
#[cfg(target_env = "gnu")]
pub(super) type RlimitResource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
pub(super) type RlimitResource = libc::c_int;

pub(super) fn open_write(path: &Path) -> std::io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)
        .map(OwnedFd::from)
}

/// A run's cgroups (made) and resource limits, for the tree's first process to enter.
#[derive(Debug, Default)]
pub struct Prepared {
    pub(super) cgroups: Vec<Made>,
    pub(super) rlimits: Vec<(RlimitResource, u64, u64)>,
}

#[derive(Debug)]
pub(super) struct Made {
    pub(super) dir: PathBuf,
    /// Its cgroup.procs (v1: tasks), opened by the supervisor: the write from the child is
    /// checked against the opener's credentials.
    pub(super) procs: Option<OwnedFd>,
    /// The directory, flock'ed for as long as the supervisor lives ([`make_owned`]).
    pub(super) _owner: OwnedFd,
}

/// Makes the cgroup `dir` and takes its ownership lock: an exclusive flock on the directory
/// itself, held by the supervisor until the cgroup is removed. The kernel drops a flock when the
/// last descriptor of it closes, whatever ended the process (SIGKILL included), so a lock that
/// can be taken means the owner is gone: the one test of liveness that holds across pid
/// namespaces (a supervisor that is pid 1 of its own is "jail-1-*", and pid 1 is always alive
/// where the sweep looks) and pid reuse. The descriptor is close-on-exec; init, which does not
/// exec, dies with the supervisor. A sweep may take the lock of a cgroup made an instant ago,
/// before its maker locked it, and remove it: the maker sees its directory gone once it holds
/// the lock, and makes it again under another name.
pub(super) fn make_owned(dir: &Path) -> std::io::Result<(PathBuf, OwnedFd)> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let mut dir = dir.to_path_buf();
    for attempt in 0..8 {
        std::fs::create_dir(&dir)?;
        let fd = OwnedFd::from(
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&dir)?,
        );
        // SAFETY: flock on a descriptor we own; it waits only while a sweep holds it.
        if unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let held = std::fs::File::from(fd.try_clone()?).metadata()?;
        let still = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.ino() == held.ino());
        if still {
            return Ok((dir, fd));
        }
        // Swept away before it was locked: again, under a name no sweep has seen.
        let name = format!(
            "{}-{attempt}",
            dir.file_name().unwrap_or_default().to_string_lossy()
        );
        dir.set_file_name(name);
    }
    Err(std::io::Error::other(
        "removed by another jail's sweep each time",
    ))
}

impl Prepared {
    /// The run's cgroups (made, not yet entered).
    pub fn cgroup_dirs(&self) -> Vec<PathBuf> {
        self.cgroups.iter().map(|m| m.dir.clone()).collect()
    }

    /// Removes what earlier runs killed with SIGKILL left next to this run's cgroups. Called by
    /// the supervisor once the command is on its way (it would wait for it otherwise), so the
    /// directory listings cost the start-up nothing.
    pub fn sweep_left_behind(&self) {
        for m in &self.cgroups {
            if let Some(parent) = m.dir.parent() {
                sweep_left_behind(parent);
            }
        }
    }

    /// In the tree's first process (init, or the command without namespaces), before anything
    /// else is forked: join the cgroups and set the limits, which every descendant inherits.
    /// Returns a message on failure (the caller dies with it: fail closed).
    pub fn enter(&self) -> Result<(), String> {
        for m in &self.cgroups {
            let Some(fd) = &m.procs else { continue };
            // "0" is the writer itself.
            // SAFETY: write from a buffer we own to a descriptor we own.
            let n = unsafe { libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) };
            if n != 1 {
                return Err(format!(
                    "limits: joining the cgroup {}: {}",
                    m.dir.display(),
                    std::io::Error::last_os_error()
                ));
            }
        }
        for &(resource, soft, hard) in &self.rlimits {
            let mut cur = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit fills the struct we own.
            unsafe { libc::getrlimit(resource, &mut cur) };
            // Never above what we were given: a tighter limit of the caller's stays, and an
            // unprivileged process could not raise a hard limit anyway.
            let new = libc::rlimit {
                rlim_cur: soft.min(cur.rlim_cur),
                rlim_max: hard.min(cur.rlim_max),
            };
            // SAFETY: setrlimit reads the struct we own.
            if unsafe { libc::setrlimit(resource, &new) } != 0 {
                return Err(format!(
                    "limits: setrlimit({}): {}",
                    rlimit_name(resource),
                    std::io::Error::last_os_error()
                ));
            }
        }
        Ok(())
    }
}

/// Removes the empty cgroups of earlier runs whose supervisor is gone (killed with SIGKILL, it
/// could not remove them itself; its tree died with it). Ownership is the lock on the cgroup's
/// directory ([`make_owned`]): one whose lock is held is alive, wherever its supervisor runs. A
/// cgroup nobody holds is removed while the sweep holds its lock, unless it names a live
/// process of this pid namespace other than pid 1 (a jail of an earlier version, which took no
/// lock, may own it); a cgroup still holding a process cannot be removed at all (its tree is
/// killed by the run's journal, which knows it for the run's).
pub(super) fn sweep_left_behind(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("jail-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid > 1 && Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let _ = remove_unowned(&e.path(), false);
    }
}

/// Removes the cgroup `dir` if no supervisor holds its lock (true when it is gone); with `kill`,
/// the processes left in it are killed first (a run whose supervisor is known dead).
pub(in crate::linux) fn remove_unowned(dir: &Path, kill: bool) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
    else {
        return !dir.exists();
    };
    // SAFETY: flock on a descriptor we own; LOCK_NB never waits.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return false;
    }
    if kill {
        remove_cgroup(dir).is_ok()
    } else {
        std::fs::remove_dir(dir).is_ok()
    }
}

/// Per-user kernel pools the host shares with the jail's uid (inotify instances and watches):
/// in init, in the jail's own user namespace, its limits are set to half of the host's, so the
/// jail cannot take them all (a user namespace's counts are charged to its parents' too, each
/// capped by its own limit). Best effort: a pool this kernel does not have is skipped.
pub fn share_kernel_pools() {
    for (host, own) in [
        (
            "/proc/sys/fs/inotify/max_user_instances",
            "/proc/sys/user/max_inotify_instances",
        ),
        (
            "/proc/sys/fs/inotify/max_user_watches",
            "/proc/sys/user/max_inotify_watches",
        ),
    ] {
        let Some(total) = std::fs::read_to_string(host)
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
        else {
            continue;
        };
        let _ = std::fs::write(own, (total / 2).max(1).to_string());
    }
}

pub(super) fn rlimit_name(r: RlimitResource) -> &'static str {
    match r {
        libc::RLIMIT_NPROC => "RLIMIT_NPROC",
        libc::RLIMIT_DATA => "RLIMIT_DATA",
        libc::RLIMIT_CPU => "RLIMIT_CPU",
        libc::RLIMIT_FSIZE => "RLIMIT_FSIZE",
        _ => "rlimit",
    }
}

impl Prepared {
    /// The cgroups' counters now (None for what no cgroup of the run counts).
    pub fn reached(&self) -> Reached {
        let field = |dir: &Path, file: &str, key: &str| -> Option<u64> {
            let text = std::fs::read_to_string(dir.join(file)).ok()?;
            text.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == key).then(|| v.trim().parse().ok()).flatten()
            })
        };
        let mut out = Reached::default();
        for m in &self.cgroups {
            out.procs_refused = out.procs_refused.or(field(&m.dir, "pids.events", "max"));
            out.oom_kills = out
                .oom_kills
                .or(field(&m.dir, "memory.events", "oom_kill"))
                .or(field(&m.dir, "memory.oom_control", "oom_kill"));
        }
        out
    }
}

/// The run report's `limits` for a run under `plan`.
pub fn report(plan: &LimitsPlan, reached: Reached) -> LimitsReport {
    let b = |b: &Bound| ReportedBound {
        value: b.value,
        enforced_by: b.enforced_by.clone(),
    };
    LimitsReport {
        procs: b(&plan.procs),
        memory: b(&plan.memory),
        tmp: b(&plan.tmp),
        shm: b(&plan.shm),
        cpu: b(&plan.cpu),
        layer: b(&plan.layer),
        reached,
    }
}

impl Drop for Prepared {
    /// After the run: kill what is left in the cgroups (nothing, when the pid namespace ended
    /// with its init) and remove them.
    fn drop(&mut self) {
        for m in self.cgroups.drain(..) {
            drop(m.procs);
            if let Err(e) = remove_cgroup(&m.dir) {
                crate::text::say(format!(
                    "jail: warning: cgroup {} not removed: {e}",
                    m.dir.display()
                ));
            }
        }
    }
}

pub(super) fn remove_cgroup(dir: &Path) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    // Usually empty already (the pid namespace ended with its init): nothing to kill.
    match std::fs::remove_dir(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(_) => {}
    }
    loop {
        // cgroup.kill (v2, Linux 5.14) kills every process in it at once; otherwise one by one.
        if crate::sys::write_file(&dir.join("cgroup.kill").to_string_lossy(), "1").is_err() {
            let pids = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            for pid in pids.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
                // SAFETY: kill sends a signal; nothing else.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            // Busy: processes are still dying (or zombies not yet reaped).
            Err(e) if std::time::Instant::now() > deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}
