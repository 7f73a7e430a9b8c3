//! Applying a change set to the host root, all or nothing: every step is written to a journal
//! before it is taken, and whatever the host had at a path is moved aside (never overwritten)
//! until the whole apply has succeeded. An apply that fails part-way is rolled back at once; one
//! that is killed is rolled back by the next jail command that touches the run
//! ([`recover`]). The layer itself is only read: it is removed by the caller after a whole apply.
//!
//! Choices, each for its attacker (or accident):
//! - Files are created with O_EXCL|O_NOFOLLOW at a path made free first: a symlink planted on
//!   the host side in the meantime is never written through.
//! - Interrupting signals (INT, TERM, HUP, QUIT) are held while the steps run, so a Ctrl-C lands
//!   after the apply, not half-way through it.
//! - The journal is not fsynced step by step: it survives the process being killed (the page
//!   cache keeps it), which is the interruption an apply must survive; a power loss half-way is
//!   a filesystem's recovery, as for any editor.

use std::fs;
use std::io::{self, BufRead, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::changes::{ChangeSet, DirOp, Item, SideKind};

/// Which changes an apply takes.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only these paths (relative to the root; a directory takes what is beneath it). Named
    /// flagged changes are taken.
    pub named: Vec<PathBuf>,
    /// Flagged changes too.
    pub include_flagged: bool,
    /// Apply what does not conflict, keep the rest in the layer.
    pub skip_conflicts: bool,
    /// Merge conflicting text files with `git merge-file` where it merges cleanly.
    pub merge: bool,
}

/// What an apply did.
#[derive(Debug, Default)]
pub struct Applied {
    pub applied: Vec<PathBuf>,
    /// Every host path a step changed, and its directory (their change times are jail's now).
    pub touched: Vec<PathBuf>,
    /// Left in the layer, with why.
    pub left: Vec<(PathBuf, String)>,
}

#[derive(Debug)]
pub enum ApplyError {
    /// Overlaps with the host: nothing was applied.
    Conflicts(Vec<(PathBuf, String)>),
    /// A step failed; everything done was rolled back (or the rollback failed, said here), with
    /// the host paths touched.
    Failed(String, Vec<PathBuf>),
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Step {
    Moved {
        #[serde(with = "crate::byte_path")]
        host: PathBuf,
        #[serde(with = "crate::byte_path")]
        backup: PathBuf,
    },
    Created {
        #[serde(with = "crate::byte_path")]
        host: PathBuf,
    },
    Rmdir {
        #[serde(with = "crate::byte_path")]
        host: PathBuf,
        mode: u32,
    },
    Mkdir {
        #[serde(with = "crate::byte_path")]
        host: PathBuf,
    },
    Chmod {
        #[serde(with = "crate::byte_path")]
        host: PathBuf,
        mode: u32,
    },
}

fn selected(it: &Item, sel: &Selection) -> bool {
    if sel.named.is_empty() {
        !it.flagged() || sel.include_flagged
    } else {
        sel.named.iter().any(|n| it.path.starts_with(n))
    }
}

/// Applies the selected part of `set` to `root`; the journal and backups live in `work`.
pub fn apply(
    root: &Path,
    set: &ChangeSet,
    sel: &Selection,
    work: &Path,
) -> Result<Applied, ApplyError> {
    let mut out = Applied::default();
    let mut take: Vec<&Item> = Vec::new();
    let mut conflicts = Vec::new();
    for it in &set.items {
        if !selected(it, sel) {
            let why = if it.flagged() {
                format!("flagged: {}", it.flags.join("; "))
            } else {
                "not named".into()
            };
            out.left.push((it.path.clone(), why));
        } else if let Some(c) = &it.conflict {
            conflicts.push((it.path.clone(), c.clone()));
        } else {
            take.push(it);
        }
    }
    for (p, why) in &set.dir_conflicts {
        if sel.named.is_empty() || sel.named.iter().any(|n| p.starts_with(n)) {
            conflicts.push((p.clone(), why.clone()));
        }
    }
    if !conflicts.is_empty() && !sel.skip_conflicts {
        return Err(ApplyError::Conflicts(conflicts));
    }
    // What a conflicting directory holds stays behind with it.
    take.retain(|it| !conflicts.iter().any(|(p, _)| it.path.starts_with(p)));
    out.left.extend(
        conflicts
            .into_iter()
            .map(|(p, why)| (p, format!("conflict: {why}"))),
    );
    let _held = HeldSignals::hold();
    let mut j = Journal::create(work)
        .map_err(|e| ApplyError::Failed(format!("journal: {e}"), Vec::new()))?;
    let result = run_steps(root, set, &take, &mut j);
    match result {
        Ok(()) => {
            out.touched = touched_by(&j.seen);
            j.finish();
            out.applied = take.iter().map(|i| i.path.clone()).collect();
            Ok(out)
        }
        Err(e) => {
            drop(j);
            let undo = match recover(work) {
                Ok(touched) => {
                    out.touched = touched;
                    String::new()
                }
                Err(u) => format!("; rolling back failed too: {u}"),
            };
            Err(ApplyError::Failed(format!("{e}{undo}"), out.touched))
        }
    }
}

fn run_steps(root: &Path, set: &ChangeSet, take: &[&Item], j: &mut Journal) -> Result<(), String> {
    let fail = |what: &str, p: &Path, e: io::Error| format!("{what} {}: {e}", p.display());
    // 1. What the host has at a taken path goes aside (it comes back on a rollback).
    for it in take {
        let host = root.join(&it.path);
        if fs::symlink_metadata(&host).is_ok_and(|m| !m.is_dir()) {
            j.move_aside(&host)
                .map_err(|e| fail("moving aside", &host, e))?;
        }
    }
    // 2. Directories the run removed, deepest first, once empty (a file left out keeps its own).
    for op in &set.dirs {
        if let DirOp::Remove(rel) = op {
            let host = root.join(rel);
            j.remove_empty_dirs(&host)
                .map_err(|e| fail("removing", &host, e))?;
        }
    }
    // 3. Directories the run made, parents first; then the files.
    for op in &set.dirs {
        if let DirOp::Make(rel, mode) = op {
            let host = root.join(rel);
            if fs::symlink_metadata(&host).is_err() {
                j.mkdir(&host, *mode)
                    .map_err(|e| fail("creating", &host, e))?;
            }
        }
    }
    for it in take {
        let Some(new) = &it.new else { continue };
        let host = root.join(&it.path);
        if let Some(parent) = host.parent() {
            if fs::symlink_metadata(parent).is_err() {
                j.mkdir_all(parent)
                    .map_err(|e| fail("creating", parent, e))?;
            }
        }
        match &new.kind {
            SideKind::File => j.create_file(&host, &new.abs, new.mode),
            SideKind::Symlink(target) => j.create_symlink(&host, target),
        }
        .map_err(|e| fail("writing", &host, e))?;
    }
    for op in &set.dirs {
        if let DirOp::Chmod(rel, mode) = op {
            let host = root.join(rel);
            j.chmod(&host, *mode).map_err(|e| fail("chmod", &host, e))?;
        }
    }
    Ok(())
}

/// `JAIL_TEST_APPLY_CRASH=N` (test builds): abort after N steps, as a kill would stop it.
fn test_crash_point(_steps: usize) {
    #[cfg(feature = "test-hooks")]
    if std::env::var("JAIL_TEST_APPLY_CRASH")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        == Some(_steps)
    {
        std::process::abort();
    }
}

struct Journal {
    file: fs::File,
    dir: PathBuf,
    steps: usize,
    /// The host paths of the steps so far.
    seen: Vec<PathBuf>,
}

/// Paths and their parent directories.
fn touched_by(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = paths
        .iter()
        .flat_map(|p| std::iter::once(p.clone()).chain(p.parent().map(Path::to_path_buf)))
        .collect();
    out.sort();
    out.dedup();
    out
}

impl Step {
    fn host(&self) -> &Path {
        match self {
            Step::Moved { host, .. }
            | Step::Created { host }
            | Step::Rmdir { host, .. }
            | Step::Mkdir { host }
            | Step::Chmod { host, .. } => host,
        }
    }
}

const JOURNAL: &str = "journal";

impl Journal {
    fn create(work: &Path) -> io::Result<Journal> {
        fs::create_dir_all(work.join("backup"))?;
        let file = fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .mode(0o600)
            .open(work.join(JOURNAL))?;
        Ok(Journal {
            file,
            dir: work.to_path_buf(),
            steps: 0,
            seen: Vec::new(),
        })
    }

    fn note(&mut self, step: &Step) -> io::Result<()> {
        self.steps += 1;
        self.seen.push(step.host().to_path_buf());
        let mut line = serde_json::to_vec(step).map_err(io::Error::other)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        test_crash_point(self.steps);
        Ok(())
    }

    fn move_aside(&mut self, host: &Path) -> io::Result<()> {
        let backup = self.dir.join("backup").join(self.steps.to_string());
        self.note(&Step::Moved {
            host: host.to_path_buf(),
            backup: backup.clone(),
        })?;
        move_path(host, &backup)
    }

    fn create_file(&mut self, host: &Path, from: &Path, mode: u32) -> io::Result<()> {
        self.note(&Step::Created {
            host: host.to_path_buf(),
        })?;
        let mut src = fs::File::open(from)?;
        let mut dst = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(host)?;
        io::copy(&mut src, &mut dst)?;
        dst.set_permissions(fs::Permissions::from_mode(mode & 0o777))
    }

    fn create_symlink(&mut self, host: &Path, target: &Path) -> io::Result<()> {
        self.note(&Step::Created {
            host: host.to_path_buf(),
        })?;
        std::os::unix::fs::symlink(target, host)
    }

    fn mkdir(&mut self, host: &Path, mode: u32) -> io::Result<()> {
        self.note(&Step::Mkdir {
            host: host.to_path_buf(),
        })?;
        fs::create_dir(host)?;
        fs::set_permissions(host, fs::Permissions::from_mode(mode & 0o777))
    }

    fn mkdir_all(&mut self, dir: &Path) -> io::Result<()> {
        if fs::symlink_metadata(dir).is_ok() {
            return Ok(());
        }
        if let Some(parent) = dir.parent() {
            self.mkdir_all(parent)?;
        }
        self.mkdir(dir, 0o755)
    }

    fn chmod(&mut self, host: &Path, mode: u32) -> io::Result<()> {
        let old = fs::symlink_metadata(host)?.permissions().mode() & 0o7777;
        self.note(&Step::Chmod {
            host: host.to_path_buf(),
            mode: old,
        })?;
        fs::set_permissions(host, fs::Permissions::from_mode(mode & 0o777))
    }

    /// Removes `dir` and the directories beneath it that are empty now, deepest first.
    fn remove_empty_dirs(&mut self, dir: &Path) -> io::Result<()> {
        let Ok(meta) = fs::symlink_metadata(dir) else {
            return Ok(());
        };
        if !meta.is_dir() {
            return Ok(());
        }
        for e in fs::read_dir(dir)?.flatten() {
            if e.file_type()?.is_dir() {
                self.remove_empty_dirs(&e.path())?;
            }
        }
        if fs::read_dir(dir)?.next().is_some() {
            return Ok(());
        }
        self.note(&Step::Rmdir {
            host: dir.to_path_buf(),
            mode: meta.permissions().mode() & 0o7777,
        })?;
        fs::remove_dir(dir)
    }

    /// A whole apply: the journal goes first (nothing to roll back any more), then the backups.
    fn finish(self) {
        let _ = fs::remove_file(self.dir.join(JOURNAL));
        let _ = super::store::remove_tree(&self.dir);
    }
}

/// Renames, or copies and removes when `to` is on another filesystem.
fn move_path(from: &Path, to: &Path) -> io::Result<()> {
    match fs::rename(from, to) {
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            let meta = fs::symlink_metadata(from)?;
            if meta.file_type().is_symlink() {
                std::os::unix::fs::symlink(fs::read_link(from)?, to)?;
            } else {
                fs::copy(from, to)?;
            }
            fs::remove_file(from)
        }
        other => other,
    }
}

/// Rolls back an apply that did not finish, from its journal in `work`: the host gets back
/// exactly what it had. Nothing to do when there is no journal. Returns the host paths it
/// changed (and their directories).
pub fn recover(work: &Path) -> io::Result<Vec<PathBuf>> {
    let path = work.join(JOURNAL);
    let file = match fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // A finished apply whose backups were not all removed.
            let _ = super::store::remove_tree(work);
            return Ok(Vec::new());
        }
        Err(e) => return Err(e),
    };
    let mut steps = Vec::new();
    for line in io::BufReader::new(file).lines() {
        let line = line?;
        // The last line may be cut short by the kill: that step was not taken.
        if let Ok(step) = serde_json::from_str::<Step>(&line) {
            steps.push(step);
        }
    }
    for step in steps.iter().rev() {
        match step {
            Step::Created { host } => match fs::symlink_metadata(host) {
                Ok(m) if !m.is_dir() => fs::remove_file(host)?,
                _ => {}
            },
            Step::Moved { host, backup } => {
                if fs::symlink_metadata(backup).is_ok() {
                    if fs::symlink_metadata(host).is_ok() {
                        // The copy across filesystems was cut short: the host still has it.
                        fs::remove_file(backup)?;
                    } else {
                        move_path(backup, host)?;
                    }
                }
            }
            Step::Mkdir { host } => {
                let _ = fs::remove_dir(host);
            }
            Step::Rmdir { host, mode } => {
                if fs::symlink_metadata(host).is_err() {
                    fs::create_dir(host)?;
                    fs::set_permissions(host, fs::Permissions::from_mode(*mode))?;
                }
            }
            Step::Chmod { host, mode } => {
                fs::set_permissions(host, fs::Permissions::from_mode(*mode))?
            }
        }
    }
    fs::remove_file(&path)?;
    super::store::remove_tree(work)?;
    let hosts: Vec<PathBuf> = steps.iter().map(|s| s.host().to_path_buf()).collect();
    Ok(touched_by(&hosts))
}

/// Holds INT, TERM, HUP and QUIT while alive; pending ones arrive when it is dropped.
struct HeldSignals {
    old: nix::sys::signal::SigSet,
}

impl HeldSignals {
    fn hold() -> HeldSignals {
        use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
        let mut set = SigSet::empty();
        for s in [
            Signal::SIGINT,
            Signal::SIGTERM,
            Signal::SIGHUP,
            Signal::SIGQUIT,
        ] {
            set.add(s);
        }
        let mut old = SigSet::empty();
        let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut old));
        HeldSignals { old }
    }
}

impl Drop for HeldSignals {
    fn drop(&mut self) {
        use nix::sys::signal::{SigmaskHow, sigprocmask};
        let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&self.old), None);
    }
}
