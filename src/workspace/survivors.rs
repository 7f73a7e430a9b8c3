//! Processes of a run that may outlive its jail, so that `jail runs` can say so and a review
//! knows the layer may still change.
//!
//! Facts behind it:
//! - With the overlay the tree is in a pid namespace of its own whose init dies with the
//!   supervisor (PR_SET_PDEATHSIG): the kernel kills every process left in it. The copy-based
//!   layer has no namespace: PR_SET_PDEATHSIG reaches the command's first process only, and
//!   the children it started go on (they are reparented to the nearest subreaper, and keep
//!   their working directory and open files in the copy).
//! - What can name them afterwards: the run's cgroup (root, or a delegated subtree) holds every
//!   process of the tree, and a process cannot leave it (`cgroup.procs`); the command leads a
//!   process group of its own, which its children inherit unless they make another (a pid is
//!   not reused while a group still has that number); and a process writing the copy has its
//!   working directory or a descriptor there (`/proc/PID/cwd`, `/proc/PID/fd`, readable for
//!   one's own processes). The first is exact; the others may miss a process that left its
//!   group and the copy's paths, or name one that reused a group number: "may be".
//! - So the supervisor writes [`FILE`] in the run's directory when the command exists (its own
//!   pid and start time, the command's pid and group, the cgroups), and removes it at the run's
//!   end, once the whole tree is gone. Left behind, with the supervisor gone, it marks a run
//!   whose processes may still be running.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::store::Run;

/// The record's name in the run's directory.
pub const FILE: &str = "tree.json";

/// What the supervisor knew of the tree when the command started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Started {
    /// The supervisor, and its start time (clock ticks after boot): a reused pid is not it.
    pub jail_pid: u32,
    pub jail_start: u64,
    /// The command's first process, which leads the tree's process group.
    pub command_pid: i32,
    #[serde(with = "crate::byte_path::vec")]
    pub cgroups: Vec<PathBuf>,
}

/// Writes the record for the command `command_pid`, started under this process, in the run
/// directory `run_dir` (whole, then renamed into place).
pub fn record_start(run_dir: &Path, command_pid: i32, cgroups: &[PathBuf]) -> io::Result<()> {
    let me = std::process::id();
    let started = Started {
        jail_pid: me,
        jail_start: start_time(me).unwrap_or(0),
        command_pid,
        cgroups: cgroups.to_vec(),
    };
    let tmp = run_dir.join(format!("{FILE}.new"));
    std::fs::write(
        &tmp,
        serde_json::to_vec(&started).map_err(io::Error::other)?,
    )?;
    std::fs::rename(&tmp, run_dir.join(FILE))
}

/// The tree of the run in `run_dir` is gone (the supervisor saw it end).
pub fn record_end(run_dir: &Path) {
    let _ = std::fs::remove_file(run_dir.join(FILE));
}

fn read(run: &Run) -> Option<Started> {
    let text = std::fs::read(run.dir.join(FILE)).ok()?;
    serde_json::from_slice(&text).ok()
}

/// A process's start time in clock ticks after boot (`/proc/PID/stat`, field 22).
fn start_time(pid: u32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// The fields of `/proc/PID/stat` after the command name (state is the first).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) state ppid pgrp …: comm may hold spaces and parentheses; the last ')' ends it.
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// The run's tree started and its supervisor is gone without seeing it end: processes of the
/// run may still be running, and its layer may still change.
pub fn unfinished(run: &Run) -> bool {
    read(run).is_some_and(|s| start_time(s.jail_pid) != Some(s.jail_start))
}

/// Processes of an [`unfinished`] run that may still be running, by pid (empty otherwise):
/// the members of its cgroups, of its process group, and every process with its working
/// directory, root or a descriptor in the run's directory.
pub fn alive(run: &Run) -> Vec<u32> {
    let Some(started) = read(run).filter(|s| start_time(s.jail_pid) != Some(s.jail_start)) else {
        return Vec::new();
    };
    // A zombie writes nothing: it is only waiting to be reaped.
    let running = |pid: u32| stat_fields(pid).is_some_and(|f| f.first().is_some_and(|s| s != "Z"));
    let mut out = BTreeSet::new();
    for dir in &started.cgroups {
        for file in ["cgroup.procs", "tasks"] {
            let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
            out.extend(
                text.lines()
                    .filter_map(|l| l.trim().parse::<u32>().ok())
                    .filter(|p| running(*p)),
            );
        }
    }
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out.into_iter().collect();
    };
    let inside = |link: PathBuf| std::fs::read_link(link).is_ok_and(|p| p.starts_with(&run.dir));
    for e in procs.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == std::process::id() || out.contains(&pid) {
            continue;
        }
        let Some(stat) = stat_fields(pid).filter(|f| f.first().is_some_and(|s| s != "Z")) else {
            continue;
        };
        let group = stat
            .get(2)
            .and_then(|g| g.parse::<i32>().ok())
            .is_some_and(|g| g == started.command_pid);
        let base = e.path();
        let holds = || {
            inside(base.join("cwd"))
                || inside(base.join("root"))
                || std::fs::read_dir(base.join("fd"))
                    .map(|fds| fds.flatten().any(|fd| inside(fd.path())))
                    .unwrap_or(false)
        };
        if group || holds() {
            out.insert(pid);
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::store::{LayerKind, RunRecord, RunState};

    fn run_in(dir: &Path) -> Run {
        Run {
            dir: dir.to_path_buf(),
            record: RunRecord {
                id: "00000000".into(),
                state: RunState::Running,
                kind: LayerKind::Copy,
                pid: 0,
                created: 0,
                start: (0, 0),
                command: vec![],
                layers: vec![],
            },
        }
    }

    #[test]
    fn a_tree_whose_supervisor_lives_is_not_unfinished_and_one_left_behind_is() {
        let dir = std::env::temp_dir().join(format!("jail-survivors-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let run = run_in(&dir);
        assert!(!unfinished(&run), "no record: nothing is known to run");
        // This process stands for the supervisor, and a child of it works in the run's
        // directory.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .current_dir(&dir)
            .spawn()
            .unwrap();
        record_start(&dir, child.id() as i32, &[]).unwrap();
        assert!(!unfinished(&run), "its supervisor (this process) is alive");
        assert!(alive(&run).is_empty());
        // The supervisor is gone: a record with another start time stands for that.
        let mut s = read(&run).unwrap();
        s.jail_start += 1;
        std::fs::write(dir.join(FILE), serde_json::to_vec(&s).unwrap()).unwrap();
        assert!(unfinished(&run));
        assert_eq!(alive(&run), vec![child.id()], "its cwd is in the run");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(alive(&run).is_empty());
        record_end(&dir);
        assert!(!unfinished(&run));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
