//! Walking the trees: every entry under the roots, recorded as a [`Snapshot`], with relative
//! syscalls only.
//!
//! - Each directory is opened from its parent's descriptor (`openat` with `O_NOFOLLOW`), listed
//!   with `getdents64` and each name examined with `statx`/`fstatat` and `AT_SYMLINK_NOFOLLOW`,
//!   `readlinkat` for a symlink. No path is resolved twice and no symlink is followed: the
//!   trees are the command's to shape, and a symlink it planted must not lead the walk, or a
//!   hash, outside them, nor a name it swapped between two steps make one path mean two things.
//! - Another file system mounted below a root is recorded, not entered: `statx` says so with
//!   `STATX_ATTR_MOUNT_ROOT` (Linux 5.8+, which also catches a bind mount of the same device),
//!   an older kernel by a change of `st_dev`. Where `statx` is missing (old kernel, or a
//!   container's seccomp profile refuses it) `fstatat` stands in from the first refusal on.
//! - Names are examined in inode order within each `getdents64` batch: on a cold cache the
//!   inode tables are read front to back instead of at random.
//! - Several threads share one queue of directories; each directory held open is one
//!   descriptor, so the depth bound keeps the deepest chain per thread well under the usual
//!   limit of 1024.
//! - A directory of ours that we cannot list (the command can `chmod 000` what it created, to
//!   hide what is inside) is made `u+rx` for the walk through an `O_PATH` descriptor, so the
//!   mode changes on the inode that was opened and never on what a name points to later; its
//!   mode is put back when the walk ends.
//! - Only racy regular files are read, within a byte budget, to hash them.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::snapshot::{
    Entry, HASHED, LISTED, MOUNT, RootSnap, Snapshot, UNREADABLE, UNVERIFIED, hash_file, ns,
};

/// The bounds of one snapshot.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Entries recorded over all roots; beyond that the snapshot is truncated.
    pub max_entries: usize,
    /// Directories this deep below a root (the root is depth 0) are recorded but not listed.
    pub max_depth: usize,
    /// Racy files larger than this are not hashed (they are `unverified`).
    pub hash_max_file: u64,
    /// Bytes hashed in total by one snapshot; racy files beyond it are `unverified`.
    pub hash_budget: u64,
    /// A regular file whose mtime or ctime is this recent (relative to the start of the snapshot)
    /// is racy: an edit within the same timestamp tick might not show in its metadata.
    pub racy_window: Duration,
    /// Walker threads; 0 picks the number of CPUs, at most 4.
    pub threads: usize,
    /// Directories (device, inode) neither recorded nor entered: jail's own state, which jail
    /// itself writes during a run and the command cannot reach (it is hidden).
    pub skip: Vec<(u64, u64)>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_entries: 2_000_000,
            // Each directory being listed holds a descriptor; the deepest chain, per thread,
            // stays well under the usual limit of 1024.
            max_depth: 128,
            hash_max_file: 64 << 20,
            hash_budget: 256 << 20,
            racy_window: Duration::from_secs(2),
            threads: 0,
            skip: Vec::new(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Syscalls

/// The metadata the snapshot keeps, plus what the walk needs to spot mount points.
#[derive(Debug, Clone, Copy)]
struct Stat {
    mode: u32,
    ino: u64,
    size: u64,
    mtime: i64,
    ctime: i64,
    dev: u64,
    /// `STATX_ATTR_MOUNT_ROOT`, when the kernel reports it (5.8+).
    mount_root: Option<bool>,
}

static NO_STATX: AtomicBool = AtomicBool::new(false);

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// lstat relative to `dir`: statx where the kernel has it, fstatat otherwise.
fn stat_at(dir: RawFd, name: &CStr) -> Result<Stat, i32> {
    let flags = libc::AT_SYMLINK_NOFOLLOW | libc::AT_NO_AUTOMOUNT;
    if !NO_STATX.load(Ordering::Relaxed) {
        let mask = libc::STATX_TYPE
            | libc::STATX_MODE
            | libc::STATX_INO
            | libc::STATX_SIZE
            | libc::STATX_MTIME
            | libc::STATX_CTIME;
        let mut sx = std::mem::MaybeUninit::<libc::statx>::zeroed();
        // SAFETY: `name` is NUL-terminated and `sx` is a writable statx buffer.
        let rc = unsafe { libc::statx(dir, name.as_ptr(), flags, mask, sx.as_mut_ptr()) };
        if rc == 0 {
            // SAFETY: statx succeeded and the buffer was zeroed before.
            let sx = unsafe { sx.assume_init() };
            let mount_attr = libc::STATX_ATTR_MOUNT_ROOT as u64;
            return Ok(Stat {
                mode: u32::from(sx.stx_mode),
                ino: sx.stx_ino,
                size: sx.stx_size,
                mtime: ns(sx.stx_mtime.tv_sec, i64::from(sx.stx_mtime.tv_nsec)),
                ctime: ns(sx.stx_ctime.tv_sec, i64::from(sx.stx_ctime.tv_nsec)),
                dev: libc::makedev(sx.stx_dev_major, sx.stx_dev_minor),
                mount_root: (sx.stx_attributes_mask & mount_attr != 0)
                    .then_some(sx.stx_attributes & mount_attr != 0),
            });
        }
        match errno() {
            // No statx (old kernel, or a container's seccomp profile refuses it).
            libc::ENOSYS | libc::EPERM => NO_STATX.store(true, Ordering::Relaxed),
            e => return Err(e),
        }
    }
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `name` is NUL-terminated and `st` is a writable stat buffer.
    if unsafe { libc::fstatat(dir, name.as_ptr(), st.as_mut_ptr(), flags) } != 0 {
        return Err(errno());
    }
    // SAFETY: fstatat succeeded, so the buffer is initialised.
    let st = unsafe { st.assume_init() };
    Ok(Stat {
        mode: st.st_mode,
        ino: st.st_ino,
        size: st.st_size as u64,
        mtime: ns(st.st_mtime, st.st_mtime_nsec),
        ctime: ns(st.st_ctime, st.st_ctime_nsec),
        dev: st.st_dev,
        mount_root: None,
    })
}

fn open_at(dir: RawFd, name: &CStr, flags: i32) -> Result<OwnedFd, i32> {
    // SAFETY: `name` is NUL-terminated; the descriptor is owned below.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_CLOEXEC | libc::O_NOCTTY) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: `fd` was just returned by openat and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn read_link_at(dir: RawFd, name: &CStr, buf: &mut [u8]) -> Option<usize> {
    // SAFETY: `name` is NUL-terminated and `buf` is writable for its length.
    let n = unsafe { libc::readlinkat(dir, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    usize::try_from(n).ok()
}

const OPEN_FILE: i32 = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;

/// Opens a file to hash it, without updating its atime where the caller owns it.
fn open_file(dir: RawFd, name: &CStr) -> Result<OwnedFd, i32> {
    match open_at(dir, name, OPEN_FILE | libc::O_NOATIME) {
        Err(libc::EPERM) => open_at(dir, name, OPEN_FILE),
        r => r,
    }
}
const OPEN_DIR: i32 = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;

/// A directory that is ours but not readable and searchable by us (the command can `chmod 000`
/// what it created, to hide what is inside): as its owner, add `u+rx` for the walk and record
/// the old mode, restored when the walk ends. Through an `O_PATH` descriptor, so the mode
/// changes on the inode that was opened, never on what a name points to later.
fn open_relaxed(at: RawFd, name: &CStr, relaxed: &Mutex<Vec<(OwnedFd, u32)>>) -> Option<OwnedFd> {
    let path = open_at(
        at,
        name,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
    )
    .ok()?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is a writable stat buffer and the descriptor is open.
    if unsafe { libc::fstat(path.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: fstat succeeded.
    let st = unsafe { st.assume_init() };
    // SAFETY: geteuid cannot fail.
    if st.st_uid != unsafe { libc::geteuid() } || st.st_mode & 0o500 == 0o500 {
        return None;
    }
    let mode = st.st_mode & 0o7777;
    chmod_fd(&path, mode | 0o500).ok()?;
    let reopened = open_at(
        libc::AT_FDCWD,
        &proc_fd_path(&path),
        libc::O_RDONLY | libc::O_DIRECTORY,
    );
    relaxed
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((path, mode));
    reopened.ok()
}

/// `/proc/self/fd/N`: the inode a descriptor holds, as a path the kernel resolves to it alone.
fn proc_fd_path(fd: &OwnedFd) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL")
}

/// chmod of the inode an `O_PATH` descriptor holds (fchmod refuses such descriptors).
pub(crate) fn chmod_fd(fd: &OwnedFd, mode: u32) -> Result<(), i32> {
    let path = proc_fd_path(fd);
    // SAFETY: `path` is NUL-terminated.
    if unsafe { libc::chmod(path.as_ptr(), mode) } != 0 {
        return Err(errno());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The walk

/// State shared by the walkers of all roots of one snapshot.
struct Budget<'a> {
    limits: &'a Limits,
    /// Racy: mtime or ctime at or after this (ns since the epoch).
    racy_from: i64,
    entries: AtomicUsize,
    /// Arena bytes, so that u32 offsets cannot overflow.
    bytes: AtomicUsize,
    hashed: AtomicU64,
    truncated: AtomicBool,
    full: AtomicBool,
    /// Directories of ours that were made listable for the walk, with their modes, restored
    /// when it ends.
    relaxed: Mutex<Vec<(OwnedFd, u32)>>,
}

impl Budget<'_> {
    /// Reserves room for one entry of `bytes` arena bytes; false (and truncated) when full.
    fn reserve(&self, bytes: usize) -> bool {
        let n = self.entries.fetch_add(1, Ordering::Relaxed);
        let b = self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if n >= self.limits.max_entries || b + bytes >= u32::MAX as usize {
            self.entries.fetch_sub(1, Ordering::Relaxed);
            self.bytes.fetch_sub(bytes, Ordering::Relaxed);
            self.truncated.store(true, Ordering::Relaxed);
            self.full.store(true, Ordering::Relaxed);
            return false;
        }
        true
    }

    fn is_racy(&self, st: &Stat) -> bool {
        st.mode & libc::S_IFMT == libc::S_IFREG
            && (st.mtime >= self.racy_from || st.ctime >= self.racy_from)
    }

    /// Hashes a racy file: (aux, flags).
    fn hash(&self, dir: RawFd, name: &CStr, st: &Stat, buf: &mut [u8]) -> (u64, u32) {
        let l = self.limits;
        if st.size > l.hash_max_file
            || self.hashed.fetch_add(st.size, Ordering::Relaxed) + st.size > l.hash_budget
        {
            return (0, UNVERIFIED);
        }
        let hash = open_file(dir, name)
            .ok()
            .and_then(|fd| hash_file(fd, (st.ino, st.size, st.mtime), l.hash_max_file, buf));
        match hash {
            Some(h) => (h, HASHED),
            None => (0, UNVERIFIED),
        }
    }
}

/// One thread's findings, merged per root when the walk ends.
#[derive(Default)]
struct Out {
    arena: Vec<u8>,
    entries: Vec<Entry>,
}

impl Out {
    /// Records `parent/name` (`name` alone under the root, `parent` alone when `name` is empty).
    fn push(&mut self, parent: &[u8], name: &[u8], st: &Stat, aux: u64, flags: u32) {
        let key_off = self.arena.len();
        self.arena.extend_from_slice(parent);
        if !parent.is_empty() && !name.is_empty() {
            self.arena.push(0);
        }
        self.arena.extend_from_slice(name);
        self.entries.push(Entry {
            key_off: key_off as u32,
            key_len: (self.arena.len() - key_off) as u32,
            size: st.size,
            mtime: st.mtime,
            ctime: st.ctime,
            ino: st.ino,
            aux,
            mode: st.mode,
            flags,
        });
    }

    /// Stores a symlink target; returns the span for `aux`.
    fn push_target(&mut self, target: &[u8]) -> u64 {
        let off = self.arena.len() as u64;
        self.arena.extend_from_slice(target);
        (off << 32) | target.len() as u64
    }
}

/// A directory to list: opened from its parent's descriptor (or by path, for a root).
struct Job {
    parent: Option<Arc<OwnedFd>>,
    /// Name in `parent`, or the root's path.
    open: CString,
    key: Vec<u8>,
    st: Stat,
    depth: usize,
}

struct Queue {
    jobs: Vec<Job>,
    busy: usize,
    waiting: usize,
}

struct Walker<'a> {
    budget: &'a Budget<'a>,
    queue: Mutex<Queue>,
    cv: Condvar,
}

/// Scratch buffers of one thread.
struct Scratch {
    dents: Vec<u64>,
    bytes: Vec<u8>,
    /// (inode, name start, name end) of the names in `dents`.
    order: Vec<(u64, usize, usize)>,
}

impl Walker<'_> {
    fn run(&self) -> Out {
        let mut out = Out::default();
        let mut scratch = Scratch {
            dents: vec![0u64; 4096],
            bytes: vec![0u8; 64 << 10],
            order: Vec::new(),
        };
        let mut children = Vec::new();
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(job) = q.jobs.pop() {
                q.busy += 1;
                drop(q);
                self.list(job, &mut out, &mut scratch, &mut children);
                q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                q.busy -= 1;
                q.jobs.append(&mut children);
                if q.waiting > 0 && (!q.jobs.is_empty() || q.busy == 0) {
                    self.cv.notify_all();
                }
                continue;
            }
            if q.busy == 0 {
                return out;
            }
            q.waiting += 1;
            q = self.cv.wait(q).unwrap_or_else(|e| e.into_inner());
            q.waiting -= 1;
        }
    }

    /// Lists one directory: records its entries, queues its subdirectories, then records the
    /// directory itself with whether it was listed whole.
    fn list(&self, mut job: Job, out: &mut Out, scratch: &mut Scratch, children: &mut Vec<Job>) {
        let b = self.budget;
        let at = job
            .parent
            .as_ref()
            .map_or(libc::AT_FDCWD, |p| p.as_raw_fd());
        let fd = match open_at(at, &job.open, OPEN_DIR) {
            Ok(fd) => Arc::new(fd),
            Err(libc::EACCES) => match open_relaxed(at, &job.open, &b.relaxed) {
                Some(fd) => Arc::new(fd),
                None => {
                    out.push(&job.key, &[], &job.st, 0, UNREADABLE);
                    return;
                }
            },
            Err(_) => {
                out.push(&job.key, &[], &job.st, 0, UNREADABLE);
                return;
            }
        };
        job.parent = None;
        let mut flags = LISTED;
        let dents: &mut [u64] = &mut scratch.dents;
        'read: loop {
            // SAFETY: the buffer is writable for its length in bytes.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_getdents64,
                    fd.as_raw_fd(),
                    dents.as_mut_ptr(),
                    std::mem::size_of_val(dents),
                )
            };
            if n <= 0 {
                if n < 0 {
                    flags = UNREADABLE;
                }
                break;
            }
            // SAFETY: getdents64 filled `n` bytes of the buffer.
            let filled =
                unsafe { std::slice::from_raw_parts(dents.as_ptr().cast::<u8>(), n as usize) };
            // struct linux_dirent64 { u64 d_ino; i64 d_off; u16 d_reclen; u8 d_type;
            // char d_name[]; }
            let order = &mut scratch.order;
            order.clear();
            let mut pos = 0;
            while pos < filled.len() {
                let reclen = match filled.get(pos + 16..pos + 18) {
                    Some(r) => u16::from_ne_bytes([r[0], r[1]]) as usize,
                    None => 0,
                };
                if reclen < 20 || pos + reclen > filled.len() {
                    flags = UNREADABLE;
                    break 'read;
                }
                let ino = u64::from_ne_bytes(filled[pos..pos + 8].try_into().expect("8 bytes"));
                order.push((ino, pos + 19, pos + reclen));
                pos += reclen;
            }
            // In inode order, a cold cache reads the inode tables front to back.
            order.sort_unstable();
            for &(_, start, end) in order.iter() {
                let Ok(name) = CStr::from_bytes_until_nul(&filled[start..end]) else {
                    flags = UNREADABLE;
                    break 'read;
                };
                let nb = name.to_bytes();
                if nb == b"." || nb == b".." {
                    continue;
                }
                let st = match stat_at(fd.as_raw_fd(), name) {
                    Ok(st) => st,
                    Err(libc::ENOENT) => continue,
                    Err(_) => {
                        // Listable but not searchable (mode r--): names without metadata.
                        flags = UNREADABLE;
                        continue;
                    }
                };
                if st.mode & libc::S_IFMT == libc::S_IFDIR
                    && b.limits.skip.contains(&(st.dev, st.ino))
                {
                    continue;
                }
                if !self.entry(&job, &fd, name, st, out, &mut scratch.bytes, children) {
                    flags = 0;
                    break 'read;
                }
            }
        }
        out.push(&job.key, &[], &job.st, 0, flags);
    }

    /// Records one entry `name` of the directory `job` lists (open as `fd`): a subdirectory is
    /// queued as a child job instead, unless it is a mount or too deep. False when the budget is
    /// spent and the listing stops.
    #[allow(clippy::too_many_arguments)]
    fn entry(
        &self,
        job: &Job,
        fd: &Arc<OwnedFd>,
        name: &CStr,
        st: Stat,
        out: &mut Out,
        bytes: &mut [u8],
        children: &mut Vec<Job>,
    ) -> bool {
        let b = self.budget;
        let nb = name.to_bytes();
        let target = if st.mode & libc::S_IFMT == libc::S_IFLNK {
            read_link_at(fd.as_raw_fd(), name, bytes)
                .map(|n| &bytes[..n])
                .unwrap_or_default()
        } else {
            &[]
        };
        let key_bytes = job.key.len() + 1 + nb.len();
        if !b.reserve(key_bytes + target.len()) {
            return false;
        }
        match st.mode & libc::S_IFMT {
            libc::S_IFDIR => {
                let mount = st.mount_root.unwrap_or(st.dev != job.st.dev);
                if mount || job.depth + 1 >= b.limits.max_depth {
                    if !mount {
                        b.truncated.store(true, Ordering::Relaxed);
                    }
                    out.push(&job.key, nb, &st, 0, if mount { MOUNT } else { 0 });
                    return true;
                }
                let mut key = Vec::with_capacity(key_bytes);
                key.extend_from_slice(&job.key);
                if !key.is_empty() {
                    key.push(0);
                }
                key.extend_from_slice(nb);
                children.push(Job {
                    parent: Some(fd.clone()),
                    open: name.to_owned(),
                    key,
                    st,
                    depth: job.depth + 1,
                });
            }
            libc::S_IFLNK => {
                let aux = out.push_target(target);
                out.push(&job.key, nb, &st, aux, 0);
            }
            _ => {
                let (aux, f) = if b.is_racy(&st) {
                    b.hash(fd.as_raw_fd(), name, &st, bytes)
                } else {
                    (0, 0)
                };
                out.push(&job.key, nb, &st, aux, f);
            }
        }
        true
    }
}

fn now_ns() -> i64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    ns(d.as_secs() as i64, i64::from(d.subsec_nanos()))
}

fn walk_root(path: &Path, budget: &Budget, threads: usize) -> RootSnap {
    let mut snap = RootSnap::empty(path);
    let Ok(cpath) = CString::new(path.as_os_str().as_bytes()) else {
        snap.unreadable = true;
        return snap;
    };
    let st = match stat_at(libc::AT_FDCWD, &cpath) {
        Ok(st) => st,
        Err(libc::ENOENT) | Err(libc::ENOTDIR) => return snap,
        Err(_) => {
            snap.unreadable = true;
            return snap;
        }
    };
    if !budget.reserve(0) {
        return snap;
    }
    let mut out = Out::default();
    match st.mode & libc::S_IFMT {
        libc::S_IFDIR => {
            let job = Job {
                parent: None,
                open: cpath,
                key: Vec::new(),
                st,
                depth: 0,
            };
            let walker = Walker {
                budget,
                queue: Mutex::new(Queue {
                    jobs: vec![job],
                    busy: 0,
                    waiting: 0,
                }),
                cv: Condvar::new(),
            };
            let mut outs = std::thread::scope(|s| {
                // A thread that cannot be started leaves the work to the others.
                let helpers: Vec<_> = (1..threads)
                    .filter_map(|_| {
                        std::thread::Builder::new()
                            .name("jail-snapshot".into())
                            .spawn_scoped(s, || walker.run())
                            .ok()
                    })
                    .collect();
                let mut outs = vec![walker.run()];
                outs.extend(helpers.into_iter().filter_map(|h| h.join().ok()));
                outs
            });
            out = outs.swap_remove(0);
            for o in outs {
                let shift = out.arena.len() as u32;
                out.arena.extend_from_slice(&o.arena);
                out.entries.extend(o.entries.into_iter().map(|mut e| {
                    e.key_off += shift;
                    if e.mode & libc::S_IFMT == libc::S_IFLNK {
                        e.aux += u64::from(shift) << 32;
                    }
                    e
                }));
            }
        }
        libc::S_IFLNK => {
            let mut buf = vec![0u8; 4096];
            let n = read_link_at(libc::AT_FDCWD, &cpath, &mut buf).unwrap_or(0);
            let aux = out.push_target(&buf[..n]);
            out.push(&[], &[], &st, aux, 0);
        }
        _ => {
            let (aux, flags) = if budget.is_racy(&st) {
                budget.hash(libc::AT_FDCWD, &cpath, &st, &mut vec![0u8; 64 << 10])
            } else {
                (0, 0)
            };
            out.push(&[], &[], &st, aux, flags);
        }
    }
    RootSnap::new(path, out.arena, out.entries)
}

/// Records every entry under `roots`: see [`super::snapshot`].
pub(super) fn walk(roots: &[PathBuf], limits: &Limits) -> Snapshot {
    let start = Instant::now();
    let window = i64::try_from(limits.racy_window.as_nanos()).unwrap_or(i64::MAX);
    let budget = Budget {
        limits,
        racy_from: now_ns().saturating_sub(window),
        entries: AtomicUsize::new(0),
        bytes: AtomicUsize::new(0),
        hashed: AtomicU64::new(0),
        truncated: AtomicBool::new(false),
        full: AtomicBool::new(false),
        relaxed: Mutex::new(Vec::new()),
    };
    let threads = match limits.threads {
        // Nothing to walk (a --ro run): not even the CPU count, which reads cgroup files.
        _ if roots.is_empty() => 1,
        0 => std::thread::available_parallelism().map_or(1, |n| n.get().min(4)),
        n => n,
    };
    let roots = roots
        .iter()
        .map(|r| walk_root(r, &budget, threads))
        .collect();
    let relaxed = std::mem::take(&mut *budget.relaxed.lock().unwrap_or_else(|e| e.into_inner()));
    for (fd, mode) in relaxed.into_iter().rev() {
        let _ = chmod_fd(&fd, mode);
    }
    Snapshot {
        roots,
        elapsed: start.elapsed(),
        truncated: budget.truncated.load(Ordering::Relaxed),
        full: budget.full.load(Ordering::Relaxed),
    }
}

/// Hashes the file now on disk, if it is still the entry `now` of the second snapshot: the
/// comparison's way to check a racy file the second snapshot could not hash (its budget was
/// spent), against the first snapshot's hash.
pub(super) fn rehash(path: &Path, now: &Entry) -> Option<u64> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    let fd = open_file(libc::AT_FDCWD, &c).ok()?;
    let expect = (now.ino, now.size, now.mtime);
    hash_file(fd, expect, now.size, &mut vec![0u8; 64 << 10])
}
