//! The bound on a copy-on-write run's layer (`--limit layer=SIZE`): a command that writes
//! without end must not leave a layer of that size on the host's disk.
//!
//! Where the layer lives decides what can bound it. Kernel facts behind the choice:
//! - Nothing an unprivileged user may do bounds one directory of a disk filesystem: project
//!   quotas need root and a filesystem mounted with them, a loop-mounted image needs root (no
//!   loop device in a user namespace), and a watch of the directory can only stop a run after
//!   the fact. A tmpfs of jail's own is bounded exactly: `size=` refuses the write that would
//!   pass it (ENOSPC) and `nr_inodes=` the file that would, whatever the command does (many
//!   files, sparse files count the pages they have, hard links, directories).
//! - So with the mount view the overlay's upper and work directories are on a tmpfs init makes
//!   (fsopen/fsmount, attached nowhere) and hands to the supervisor (SCM_RIGHTS). The overlay
//!   in a user namespace keeps its metadata in `user.overlay.*` extended attributes, which
//!   tmpfs keeps since Linux 6.6; on an older kernel the layer stays on disk, held like a copy
//!   (below).
//! - tmpfs pages are charged to the memory cgroup of the process that writes them, and the
//!   run's cgroup refuses swap: the layer costs RAM while the run goes on and counts against
//!   `memory` (a memory bound below the layer's is met first: the OOM killer ends processes of
//!   the tree). The default is a quarter of RAM at most.
//! - The supervisor holds the tmpfs, so it outlives the namespace; once the whole tree has
//!   ended (init gone, so the pid namespace and everything in it) nothing can write it, and
//!   the supervisor copies the upper directory into the store: files, directories, symlinks,
//!   whiteouts (a 0:0 character device, which mknod makes without privileges since Linux 5.8)
//!   and the `user.overlay.*` attributes the hand-back reads. That costs what the run wrote,
//!   once, at the end. A supervisor killed with SIGKILL holds nothing any more (init dies with
//!   it, PR_SET_PDEATHSIG): the layer is lost, and `jail runs` shows the run interrupted.
//! - The copy-based layer (no namespaces, so no mount) is on disk. RLIMIT_FSIZE, inherited by
//!   every process and binding root too once CAP_SYS_RESOURCE is dropped, refuses a write that
//!   extends any file past the bound (EFBIG, and SIGXFSZ): one runaway file stops at the bound
//!   exactly. For many files the supervisor looks at what the layer adds on disk (allocated
//!   blocks, each inode once, less the copy's own at the start) every [`INTERVAL`] (longer when
//!   a look itself takes long) and kills the command past the bound; the tree then goes as at
//!   any end. Between two looks the command can add what it writes in that time, and a file
//!   unlinked while open is not seen (each is held by RLIMIT_FSIZE, and freed with the tree).

use std::collections::HashSet;
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The tmpfs mounts of a run's layers, filled by the supervisor as init hands them over.
pub type Mounts = Arc<Mutex<Vec<OwnedFd>>>;

/// How often the supervisor looks at a layer on disk (at least; a look that takes long makes
/// the next one wait ten times as long, so the watch takes a tenth of a CPU at most).
pub const INTERVAL: Duration = Duration::from_millis(20);

/// The upper directory in the tmpfs mount `mount`, as a path this process can use.
pub fn upper_of(mount: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}/upper", mount.as_raw_fd()))
}

/// Whether the tmpfs `mount` is full: less than a sixty-fourth of it (4 MiB at most) or no
/// inode left. A write the bound refused left it so.
pub fn full(mount: &OwnedFd) -> bool {
    // SAFETY: fstatfs fills the struct we own, from a descriptor we own.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstatfs(mount.as_raw_fd(), &mut st) } != 0 {
        return false;
    }
    let block = st.f_bsize as u64;
    let (total, free) = (st.f_blocks as u64 * block, st.f_bavail as u64 * block);
    free < near_full(total) || (st.f_files > 0 && st.f_ffree == 0)
}

/// What is left of a bound of `total` bytes when the layer counts as having reached it.
pub fn near_full(total: u64) -> u64 {
    (total / 64).min(4 << 20)
}

/// Copies the overlay upper directory `from` (in a tmpfs no process writes any more) into the
/// empty directory `to`: regular files, directories, symlinks, whiteouts, with their modes and
/// the `user.overlay.*` attributes. Sockets, fifos and devices the run made are left out (the
/// hand-back ignores them). `from` belongs to this user: what it cannot read (a file or
/// directory the command made mode 0) is opened to it first.
pub fn copy_out(from: &Path, to: &Path, budget: u64) -> io::Result<()> {
    let mut dirs = Vec::new();
    let mut stack = vec![PathBuf::new()];
    // What the copy may write, and has written: the layer's bytes on the tmpfs never pass its
    // size, so the copy must not either. A sparse file keeps its holes (a run's `truncate -s
    // 1T` costs the tmpfs nothing, and must cost the disk nothing), and names of one inode stay
    // one inode (a hundred hard links are one file's bytes).
    let mut written = 0u64;
    let mut linked: std::collections::HashMap<u64, PathBuf> = std::collections::HashMap::new();
    while let Some(rel) = stack.pop() {
        let src_dir = from.join(&rel);
        let entries = match fs::read_dir(&src_dir) {
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                fs::set_permissions(&src_dir, fs::Permissions::from_mode(0o700))?;
                fs::read_dir(&src_dir)?
            }
            other => other?,
        };
        for e in entries {
            let e = e?;
            let rel = rel.join(e.file_name());
            let (src, dst) = (from.join(&rel), to.join(&rel));
            let meta = fs::symlink_metadata(&src)?;
            let ft = meta.file_type();
            let mode = meta.mode() & 0o7777;
            if ft.is_dir() {
                fs::DirBuilder::new().mode(0o700).create(&dst)?;
                copy_overlay_xattrs(&src, &dst)?;
                dirs.push((dst, mode));
                stack.push(rel);
            } else if ft.is_file() {
                if meta.nlink() > 1 {
                    if let Some(first) = linked.get(&meta.ino()) {
                        fs::hard_link(first, &dst)?;
                        continue;
                    }
                    linked.insert(meta.ino(), dst.clone());
                }
                written += copy_file(&src, &dst, mode, budget.saturating_sub(written))?;
            } else if ft.is_symlink() {
                std::os::unix::fs::symlink(fs::read_link(&src)?, &dst)?;
            } else if std::os::unix::fs::FileTypeExt::is_char_device(&ft) && meta.rdev() == 0 {
                whiteout(&dst)?;
            }
        }
    }
    // A directory's own mode last: one without write permission would refuse its entries.
    for (dir, mode) in dirs.iter().rev() {
        fs::set_permissions(dir, fs::Permissions::from_mode(*mode))?;
    }
    Ok(())
}

/// Copies the data of `src` (its holes kept: only the ranges SEEK_DATA finds are written) to
/// the new file `dst`; refuses past `budget` bytes. Returns the bytes written.
fn copy_file(src: &Path, dst: &Path, mode: u32, budget: u64) -> io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut input = match fs::File::open(src) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            fs::set_permissions(src, fs::Permissions::from_mode(mode | 0o400))?;
            fs::File::open(src)?
        }
        other => other?,
    };
    let mut output = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dst)?;
    let len = input.metadata()?.len();
    let mut written = 0u64;
    let mut at: i64 = 0;
    let mut buf = vec![0u8; 1 << 16];
    while (at as u64) < len {
        // SAFETY: lseek on a descriptor this function owns.
        let data = unsafe { libc::lseek(input.as_raw_fd(), at, libc::SEEK_DATA) };
        if data < 0 {
            break; // ENXIO: nothing but a hole up to the end
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(input.as_raw_fd(), data, libc::SEEK_HOLE) };
        let hole = if hole < 0 { len as i64 } else { hole };
        input.seek(SeekFrom::Start(data as u64))?;
        output.seek(SeekFrom::Start(data as u64))?;
        let mut left = (hole - data) as u64;
        while left > 0 {
            let want = left.min(buf.len() as u64) as usize;
            let n = input.read(&mut buf[..want])?;
            if n == 0 {
                break;
            }
            written += n as u64;
            if written > budget {
                return Err(io::Error::other(
                    "the layer holds more than its bound; nothing of it is kept",
                ));
            }
            output.write_all(&buf[..n])?;
            left -= n as u64;
        }
        at = hole;
    }
    output.set_len(len)?;
    // Before the mode: setting a user attribute needs write permission on the file.
    copy_overlay_xattrs(src, dst)?;
    output.set_permissions(fs::Permissions::from_mode(mode))?;
    Ok(written)
}

/// A whiteout: the character device 0:0 an overlay reads as "deleted".
fn whiteout(path: &Path) -> io::Result<()> {
    let p = cpath(path)?;
    // SAFETY: the path is NUL-terminated and lives for the call.
    if unsafe { libc::mknod(p.as_ptr(), libc::S_IFCHR, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn cpath(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Copies the `user.overlay.*` extended attributes of `src` (a file or directory) to `dst`.
fn copy_overlay_xattrs(src: &Path, dst: &Path) -> io::Result<()> {
    let (s, d) = (cpath(src)?, cpath(dst)?);
    let mut names = vec![0u8; 1024];
    let len = loop {
        // SAFETY: the path is NUL-terminated; the buffer is writable for its length.
        let n = unsafe { libc::llistxattr(s.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ERANGE) if names.len() < 1 << 16 => names.resize(names.len() * 4, 0),
            Some(libc::ENOTSUP) => return Ok(()),
            _ => return Err(e),
        }
    };
    for name in names[..len].split(|b| *b == 0) {
        if !name.starts_with(b"user.overlay.") {
            continue;
        }
        let name = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let mut value = vec![0u8; 4096];
        // SAFETY: both strings are NUL-terminated; the buffer is writable for its length.
        let n = unsafe {
            libc::lgetxattr(
                s.as_ptr(),
                name.as_ptr(),
                value.as_mut_ptr().cast(),
                value.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both strings are NUL-terminated; the value is readable for its length.
        let rc = unsafe {
            libc::lsetxattr(
                d.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                n as usize,
                0,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Bytes the tree at `dir` takes on disk: allocated blocks, each inode once. Entries that
/// vanish while it is read are skipped (the command is writing).
pub fn usage(dir: &Path) -> u64 {
    let mut seen = HashSet::new();
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            if meta.nlink() > 1 && !meta.is_dir() && !seen.insert((meta.dev(), meta.ino())) {
                continue;
            }
            total += meta.blocks() * 512;
            if meta.is_dir() {
                stack.push(e.path());
            }
        }
    }
    total
}

/// The supervisor's watch of layers on disk (the copy-based kind).
pub struct Watch {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    exceeded: Arc<AtomicBool>,
    dirs: Vec<(PathBuf, u64)>,
    bound: u64,
}

/// How a layer on disk ended against its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Within,
    /// Within the bound at the end, but near it (RLIMIT_FSIZE refused a write, likely).
    Reached,
    /// The watch stopped the run.
    Exceeded,
}

impl Watch {
    /// A watch of `dirs` (each with what it took on disk before the command started), to
    /// start once the command exists ([`Watch::start`]).
    pub fn new(dirs: Vec<(PathBuf, u64)>, bound: u64) -> Watch {
        Watch {
            stop: None,
            thread: None,
            exceeded: Arc::new(AtomicBool::new(false)),
            dirs,
            bound,
        }
    }

    /// What each layer adds on disk now.
    fn added(dirs: &[(PathBuf, u64)]) -> impl Iterator<Item = u64> + '_ {
        dirs.iter().map(|(d, base)| usage(d).saturating_sub(*base))
    }

    /// Starts looking, on a thread of its own; `pid` is killed (SIGKILL, through a pidfd
    /// taken now, so a reused pid is never hit) when a layer passes the bound. Called in the
    /// supervisor after its signals are blocked: the thread inherits the mask.
    pub fn start(&mut self, pid: i32) {
        // SAFETY: pidfd_open returns a new descriptor or -1.
        let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if rc < 0 {
            tracing::warn!("layer watch: pidfd_open: {}", io::Error::last_os_error());
            return;
        }
        // SAFETY: pidfd_open returned a new descriptor that nothing else owns.
        let pidfd = unsafe { OwnedFd::from_raw_fd(rc as i32) };
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let dirs = self.dirs.clone();
        let (bound, exceeded) = (self.bound, Arc::clone(&self.exceeded));
        let thread = std::thread::Builder::new()
            .name("jail-layer".into())
            .spawn(move || {
                let mut wait = INTERVAL;
                loop {
                    match rx.recv_timeout(wait) {
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                    let t = Instant::now();
                    if Watch::added(&dirs).any(|a| a > bound) {
                        exceeded.store(true, Ordering::SeqCst);
                        // SAFETY: pidfd_send_signal on a descriptor this thread owns.
                        unsafe {
                            libc::syscall(
                                libc::SYS_pidfd_send_signal,
                                pidfd.as_raw_fd(),
                                libc::SIGKILL,
                                std::ptr::null::<libc::siginfo_t>(),
                                0,
                            )
                        };
                        return;
                    }
                    wait = INTERVAL.max(t.elapsed() * 10);
                }
            });
        match thread {
            Ok(t) => {
                self.stop = Some(tx);
                self.thread = Some(t);
            }
            Err(e) => tracing::warn!("layer watch: {e}"),
        }
    }

    /// After the tree is gone: stops the thread and says how each layer ended.
    pub fn finish(mut self) -> Vec<Outcome> {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let bound = self.bound;
        let mut out: Vec<Outcome> = Watch::added(&self.dirs)
            .map(|added| {
                if added > bound {
                    Outcome::Exceeded
                } else if added + near_full(bound) >= bound {
                    Outcome::Reached
                } else {
                    Outcome::Within
                }
            })
            .collect();
        // The watch stopped the run, and the command deleted files in between: still named.
        if self.exceeded.load(Ordering::SeqCst) && !out.contains(&Outcome::Exceeded) {
            out.iter_mut().for_each(|o| *o = Outcome::Exceeded);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("jail-layer-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn usage_counts_allocated_blocks_once_per_inode() {
        let d = scratch("usage");
        let before = usage(&d);
        fs::write(d.join("a"), vec![1u8; 1 << 20]).unwrap();
        fs::hard_link(d.join("a"), d.join("b")).unwrap();
        // A sparse file takes what it has written, not its length.
        let f = fs::File::create(d.join("sparse")).unwrap();
        f.set_len(1 << 30).unwrap();
        let added = usage(&d) - before;
        assert!(
            ((1 << 20)..(1 << 20) + (64 << 10)).contains(&added),
            "{added}"
        );
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_copied_upper_keeps_kinds_modes_whiteouts_and_overlay_marks() {
        let from = scratch("from");
        let to = scratch("to");
        fs::create_dir(from.join("d")).unwrap();
        fs::write(from.join("d/f"), "text").unwrap();
        fs::set_permissions(from.join("d/f"), fs::Permissions::from_mode(0o751)).unwrap();
        std::os::unix::fs::symlink("../x", from.join("d/l")).unwrap();
        whiteout(&from.join("gone")).unwrap();
        fs::set_permissions(from.join("d"), fs::Permissions::from_mode(0o555)).unwrap();
        // An overlay's mark, where this filesystem keeps user attributes.
        let d = cpath(&from.join("d")).unwrap();
        // SAFETY: NUL-terminated strings and a readable value.
        let marked = unsafe {
            libc::lsetxattr(
                d.as_ptr(),
                c"user.overlay.opaque".as_ptr(),
                b"y".as_ptr().cast(),
                1,
                0,
            )
        } == 0;
        copy_out(&from, &to, u64::MAX).unwrap();
        assert_eq!(fs::read_to_string(to.join("d/f")).unwrap(), "text");
        let mode = |p: &str| fs::symlink_metadata(to.join(p)).unwrap().mode() & 0o7777;
        assert_eq!(mode("d/f"), 0o751);
        assert_eq!(mode("d"), 0o555);
        assert_eq!(fs::read_link(to.join("d/l")).unwrap(), Path::new("../x"));
        let gone = fs::symlink_metadata(to.join("gone")).unwrap();
        assert!(std::os::unix::fs::FileTypeExt::is_char_device(
            &gone.file_type()
        ));
        assert_eq!(gone.rdev(), 0);
        if marked {
            assert_eq!(
                crate::workspace::layer::xattr(&to.join("d"), "user.overlay.opaque").as_deref(),
                Some(&b"y"[..])
            );
        }
        for d in [&from, &to] {
            fs::set_permissions(d.join("d"), fs::Permissions::from_mode(0o755)).unwrap();
            fs::remove_dir_all(d).unwrap();
        }
    }

    #[test]
    fn a_watch_ends_within_reached_or_exceeded() {
        let d = scratch("watch");
        let base = usage(&d);
        let outcome = |bound| Watch::new(vec![(d.clone(), base)], bound).finish()[0];
        fs::write(d.join("f"), vec![1u8; 1 << 20]).unwrap();
        assert_eq!(outcome(64 << 20), Outcome::Within);
        assert_eq!(outcome((1 << 20) + 4096), Outcome::Reached);
        assert_eq!(outcome(512 << 10), Outcome::Exceeded);
        fs::remove_dir_all(&d).unwrap();
    }
}
