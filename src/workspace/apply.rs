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

use std::ffi::CString;
use std::fs;
use std::fs::File;
use std::io::{self, BufRead, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
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
}

fn selected(it: &Item, sel: &Selection) -> bool {
    if sel.named.is_empty() {
        !it.flagged() || sel.include_flagged
    } else {
        sel.named.iter().any(|n| it.path.starts_with(n))
    }
}

/// Whether a directory operation is in the selection: a named apply acts on directories
/// beneath what it names only (the parents a taken file needs are made for it anyway), a whole
/// one on every directory but a flagged new one.
fn dir_selected(op: &DirOp, sel: &Selection) -> bool {
    let path = op.path();
    if !sel.named.is_empty() {
        return sel.named.iter().any(|n| path.starts_with(n));
    }
    match op {
        DirOp::Make(..) => super::changes::dir_flags(path).is_empty() || sel.include_flagged,
        DirOp::Remove(_) => true,
    }
}

/// The directory steps an apply takes, of the selected `dirs`: a directory the run made is made
/// for what is taken beneath it, or because the run left it empty; one that holds only entries
/// left in the layer stays there with them (an empty directory on the host is a change nobody
/// reviewed, and a later apply of what it holds makes it then).
fn dirs_to_make<'a>(dirs: Vec<&'a DirOp>, take: &[&Item], set: &ChangeSet) -> Vec<&'a DirOp> {
    let beneath = |p: &Path, d: &Path| p != d && p.starts_with(d);
    let mut made: Vec<&Path> = dirs
        .iter()
        .filter_map(|op| match op {
            DirOp::Make(p, _) => Some(p.as_path()),
            DirOp::Remove(_) => None,
        })
        .collect();
    // Deepest first: whether a directory is made depends on what is made beneath it.
    made.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    let mut keep: Vec<&Path> = Vec::new();
    for d in made {
        let holds_taken =
            take.iter().any(|it| beneath(&it.path, d)) || keep.iter().any(|k| beneath(k, d));
        let empty = !set.items.iter().any(|it| beneath(&it.path, d))
            && !set.dirs.iter().any(|op| beneath(op.path(), d));
        if holds_taken || empty {
            keep.push(d);
        }
    }
    dirs.into_iter()
        .filter(|op| match op {
            DirOp::Make(p, _) => keep.contains(&p.as_path()),
            DirOp::Remove(_) => true,
        })
        .collect()
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
    let mut dirs: Vec<&DirOp> = Vec::new();
    for op in &set.dirs {
        if dir_selected(op, sel) {
            dirs.push(op);
        } else if sel.named.is_empty() {
            let flags = super::changes::dir_flags(op.path());
            out.left.push((
                op.path().to_path_buf(),
                format!("flagged: {}", flags.join("; ")),
            ));
        }
    }
    let dirs = dirs_to_make(dirs, &take, set);
    let _held = HeldSignals::hold();
    let mut j = Journal::create(work, root)
        .map_err(|e| ApplyError::Failed(format!("journal: {e}"), Vec::new()))?;
    let result = run_steps(root, &dirs, &take, &mut j);
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

fn run_steps(root: &Path, dirs: &[&DirOp], take: &[&Item], j: &mut Journal) -> Result<(), String> {
    let fail =
        |what: &str, rel: &Path, e: io::Error| format!("{what} {}: {e}", root.join(rel).display());
    let umask = current_umask();
    // 1. What the host has at a taken path goes aside (it comes back on a rollback).
    for it in take {
        if j.host_kind(&it.path).is_some_and(|k| k != libc::S_IFDIR) {
            j.move_aside(&it.path)
                .map_err(|e| fail("moving aside", &it.path, e))?;
        }
    }
    // 2. Directories the run removed, deepest first, once empty (a file left out keeps its own).
    for op in dirs {
        if let DirOp::Remove(rel) = op {
            j.remove_empty_dirs(rel)
                .map_err(|e| fail("removing", rel, e))?;
        }
    }
    // 3. Directories the run made, parents first, as a checkout makes them (the umask's mode,
    // never the layer's: a run's 0777 is not the reviewer's); then the files.
    for op in dirs {
        if let DirOp::Make(rel, _) = op {
            if j.host_kind(rel).is_none() {
                j.mkdir_all(rel).map_err(|e| fail("creating", rel, e))?;
            }
        }
    }
    for it in take {
        let Some(new) = &it.new else { continue };
        if let Some(parent) = it.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            if j.host_kind(parent).is_none() {
                j.mkdir_all(parent)
                    .map_err(|e| fail("creating", parent, e))?;
            }
        }
        match &new.kind {
            SideKind::File => {
                let old = it
                    .old
                    .as_ref()
                    .filter(|o| o.kind == SideKind::File)
                    .map(|o| o.mode);
                let mode = host_file_mode(old, super::changes::executable(new.mode), umask);
                j.create_file(&it.path, &new.abs, mode)
            }
            SideKind::Symlink(target) => j.create_symlink(&it.path, target),
        }
        .map_err(|e| fail("writing", &it.path, e))?;
    }
    Ok(())
}

/// The mode a file gets on the host. A patch carries git's two file modes, so an apply makes
/// what `git apply` would: a changed file keeps the host's permissions with only its execute
/// bits set or cleared (where it is readable), a new one gets 0666 or 0777 less the umask.
/// Never a set-id bit, never a write bit the reviewer did not see: a run's own 0666 would let
/// another local user replace a hook file afterwards.
fn host_file_mode(old: Option<u32>, executable: bool, umask: u32) -> u32 {
    match old {
        Some(m) if executable => (m | ((m & 0o444) >> 2)) & 0o777,
        Some(m) => m & 0o666,
        None if executable => 0o777 & !umask,
        None => 0o666 & !umask,
    }
}

/// This process's umask (read by setting it, then putting it back).
fn current_umask() -> u32 {
    use nix::sys::stat::{Mode, umask};
    let old = umask(Mode::from_bits_truncate(0o077));
    umask(old);
    old.bits()
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
    root: PathBuf,
    /// The root, opened once: every step reaches its path from here, never through a symlink
    /// and never above it (a link the run made, or one the host had where the run made a
    /// directory, is refused, not followed).
    root_fd: OwnedFd,
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
            | Step::Mkdir { host } => host,
        }
    }
}

const JOURNAL: &str = "journal";

impl Journal {
    fn create(work: &Path, root: &Path) -> io::Result<Journal> {
        let root_fd = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(root)?
            .into();
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
            root: root.to_path_buf(),
            root_fd,
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

    /// The directory `rel` beneath the root (O_PATH), every component a real directory.
    fn dir_fd(&self, rel: &Path) -> io::Result<OwnedFd> {
        let path = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        let c = CString::new(path.as_os_str().as_bytes())?;
        crate::sys::openat2_path(
            self.root_fd.as_raw_fd(),
            &c,
            libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
        )
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::EXDEV) {
                io::Error::other(format!(
                    "{}: a symlink on the way (not followed: an apply writes only beneath the root)",
                    path.display()
                ))
            } else {
                e
            }
        })
    }

    /// The parent directory of `rel` and its last name.
    fn parent(&self, rel: &Path) -> io::Result<(OwnedFd, CString)> {
        let name = rel
            .file_name()
            .ok_or_else(|| io::Error::other("names no entry"))?;
        let dir = self.dir_fd(rel.parent().unwrap_or(Path::new("")))?;
        Ok((dir, CString::new(name.as_bytes())?))
    }

    /// The file type (S_IFMT bits) of what the host has at `rel`, not following a symlink;
    /// None when there is nothing (or a parent is not a plain directory).
    fn host_kind(&self, rel: &Path) -> Option<u32> {
        let (dir, name) = self.parent(rel).ok()?;
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: fstatat writes a whole `stat` on success; `name` is NUL-terminated.
        let rc = unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                name.as_ptr(),
                st.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        // SAFETY: initialised by the successful call.
        (rc == 0).then(|| unsafe { st.assume_init() }.st_mode & libc::S_IFMT)
    }

    fn move_aside(&mut self, rel: &Path) -> io::Result<()> {
        let backup = self.dir.join("backup").join(self.steps.to_string());
        let (dir, name) = self.parent(rel)?;
        self.note(&Step::Moved {
            host: self.root.join(rel),
            backup: backup.clone(),
        })?;
        let to = CString::new(backup.as_os_str().as_bytes())?;
        // SAFETY: both names are NUL-terminated; `dir` is a directory descriptor of ours.
        let rc =
            unsafe { libc::renameat(dir.as_raw_fd(), name.as_ptr(), libc::AT_FDCWD, to.as_ptr()) };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EXDEV) {
            return Err(e);
        }
        // Another filesystem: copied (a symlink as a symlink), then removed.
        let path = self.root.join(rel);
        let meta = fs::symlink_metadata(&path)?;
        if meta.file_type().is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&path)?, &backup)?;
        } else {
            let mut src = File::from(openat(&dir, &name, libc::O_RDONLY | libc::O_NOFOLLOW, 0)?);
            let mut dst = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(meta.mode() & 0o7777)
                .open(&backup)?;
            io::copy(&mut src, &mut dst)?;
        }
        // SAFETY: `name` is NUL-terminated; `dir` is a directory descriptor of ours.
        if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn create_file(&mut self, rel: &Path, from: &Path, mode: u32) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        self.note(&Step::Created {
            host: self.root.join(rel),
        })?;
        let mut src = super::layer::open_regular(from)?;
        let mut dst = File::from(openat(
            &dir,
            &name,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
            0o600,
        )?);
        io::copy(&mut src, &mut dst)?;
        dst.set_permissions(fs::Permissions::from_mode(mode & 0o777))
    }

    fn create_symlink(&mut self, rel: &Path, target: &Path) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        self.note(&Step::Created {
            host: self.root.join(rel),
        })?;
        let t = CString::new(target.as_os_str().as_bytes())?;
        // SAFETY: both strings are NUL-terminated; `dir` is a directory descriptor of ours.
        if unsafe { libc::symlinkat(t.as_ptr(), dir.as_raw_fd(), name.as_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Makes `rel` and its missing parents with 0777 less the umask (what mkdir makes).
    fn mkdir_all(&mut self, rel: &Path) -> io::Result<()> {
        let mut prefix = PathBuf::new();
        for c in rel.components() {
            prefix.push(c);
            match self.host_kind(&prefix) {
                Some(libc::S_IFDIR) => continue,
                Some(_) => {
                    return Err(io::Error::other(format!(
                        "{} is not a directory on the host",
                        prefix.display()
                    )));
                }
                None => {}
            }
            let (dir, name) = self.parent(&prefix)?;
            self.note(&Step::Mkdir {
                host: self.root.join(&prefix),
            })?;
            // SAFETY: `name` is NUL-terminated; `dir` is a directory descriptor of ours.
            if unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o777) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Removes the directory `rel` and the directories beneath it that are empty now, deepest
    /// first; nothing when it is not a directory reached without a symlink.
    fn remove_empty_dirs(&mut self, rel: &Path) -> io::Result<()> {
        if self.host_kind(rel) != Some(libc::S_IFDIR) || self.dir_fd(rel).is_err() {
            return Ok(());
        }
        let host = self.root.join(rel);
        for e in fs::read_dir(&host)?.flatten() {
            if e.file_type()?.is_dir() {
                self.remove_empty_dirs(&rel.join(e.file_name()))?;
            }
        }
        if fs::read_dir(&host)?.next().is_some() {
            return Ok(());
        }
        let mode = fs::symlink_metadata(&host)?.mode() & 0o7777;
        let (dir, name) = self.parent(rel)?;
        self.note(&Step::Rmdir {
            host: host.clone(),
            mode,
        })?;
        // SAFETY: `name` is NUL-terminated; `dir` is a directory descriptor of ours.
        if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// A whole apply: the journal goes first (nothing to roll back any more), then the backups.
    fn finish(self) {
        let _ = fs::remove_file(self.dir.join(JOURNAL));
        let _ = super::store::remove_tree(&self.dir);
    }
}

/// openat(dir, name, flags | O_CLOEXEC, mode), the descriptor owned.
fn openat(dir: &OwnedFd, name: &CString, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated; `dir` is a directory descriptor of ours.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
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

#[cfg(test)]
mod tests {
    use super::super::changes::{Side, SideKind};
    use super::*;

    fn item(path: &str, flagged: bool) -> Item {
        Item {
            path: path.into(),
            old: None,
            new: Some(Side {
                kind: SideKind::File,
                mode: 0o644,
                abs: PathBuf::from("/layer").join(path),
            }),
            conflict: None,
            flags: if flagged {
                vec!["flagged".into()]
            } else {
                Vec::new()
            },
        }
    }

    fn made(set: &ChangeSet, take: &[&Item]) -> Vec<PathBuf> {
        let dirs: Vec<&DirOp> = set.dirs.iter().collect();
        dirs_to_make(dirs, take, set)
            .into_iter()
            .map(|op| op.path().to_path_buf())
            .collect()
    }

    #[test]
    fn a_new_directory_is_made_for_what_is_taken_or_when_the_run_left_it_empty() {
        let set = ChangeSet {
            items: vec![
                item("only-flagged/.envrc", true),
                item("mixed/ok.txt", false),
                item("mixed/.envrc", true),
                item("deep/a/b/.envrc", true),
            ],
            dirs: vec![
                DirOp::Make("only-flagged".into(), 0o755),
                DirOp::Make("mixed".into(), 0o755),
                DirOp::Make("empty".into(), 0o755),
                DirOp::Make("nest".into(), 0o755),
                DirOp::Make("nest/empty".into(), 0o755),
                DirOp::Make("deep".into(), 0o755),
                DirOp::Make("deep/a".into(), 0o755),
                DirOp::Make("deep/a/b".into(), 0o755),
                DirOp::Remove("gone".into()),
            ],
            dir_conflicts: Vec::new(),
        };
        let taken: Vec<&Item> = set.items.iter().filter(|i| !i.flagged()).collect();
        let made = made(&set, &taken);
        for want in ["mixed", "empty", "nest", "nest/empty", "gone"] {
            assert!(
                made.contains(&PathBuf::from(want)),
                "{want} not made: {made:?}"
            );
        }
        for not in ["only-flagged", "deep", "deep/a", "deep/a/b"] {
            assert!(!made.contains(&PathBuf::from(not)), "{not} made: {made:?}");
        }
        // Taken whole, every directory is made.
        let all: Vec<&Item> = set.items.iter().collect();
        assert_eq!(self::made(&set, &all).len(), set.dirs.len());
    }
}
