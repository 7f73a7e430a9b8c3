//! What a run changed under the writable paths: a snapshot of their metadata before the command
//! starts, another after it ends, compared (`--report`).
//!
//! The walk uses only relative syscalls on directory descriptors (`openat`, `getdents64`,
//! `statx`/`fstatat` with `AT_SYMLINK_NOFOLLOW`, `readlinkat`): no path is resolved twice and no
//! symlink is followed. Other mounts are recorded but not entered. Content is read only for
//! "racy" regular files, whose timestamps are too recent to prove that an edit in the same clock
//! tick would show: those get a keyed hash (SipHash with a random per-process key, so content
//! written inside the sandbox cannot be crafted to collide) within a byte budget.
//!
//! A snapshot stores each root's entries in one sorted `Vec` with the relative paths packed in
//! one byte arena, `/` stored as NUL so that byte order is path-component order; comparing is a
//! merge of two sorted lists.

use std::ffi::{CStr, CString, OsStr};
use std::fmt;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Serialize, Serializer};

/// At most this many changes are listed; beyond that [`Changes::truncated`] is set.
pub const MAX_CHANGES: usize = 100_000;

/// At most this many bytes of paths and details are listed: the command chooses the names, and
/// 100,000 paths of 30 KB each would take gigabytes of memory and report.
pub const MAX_CHANGE_BYTES: usize = 32 << 20;

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
        }
    }
}

/// One file system entry, 56 bytes. Its relative path is `arena[key_off..key_off + key_len]`.
#[derive(Debug, Clone, Copy)]
struct Entry {
    key_off: u32,
    key_len: u32,
    size: u64,
    mtime: i64,
    ctime: i64,
    ino: u64,
    /// A symlink: its target's span in the arena (offset << 32 | length). A regular file with
    /// [`HASHED`]: the keyed hash of its content.
    aux: u64,
    /// `st_mode`: type and permission bits.
    mode: u32,
    flags: u32,
}

/// The content hash in `aux` is valid.
const HASHED: u32 = 1;
/// Racy, but not hashed (too large, over the budget, or unreadable).
const UNVERIFIED: u32 = 2;
/// A directory whose every entry was recorded.
const LISTED: u32 = 4;
/// A directory that could not be opened or listed.
const UNREADABLE: u32 = 8;
/// A directory where another file system is mounted: recorded, not entered.
const MOUNT: u32 = 16;

impl Entry {
    fn file_type(&self) -> &'static str {
        match self.mode & libc::S_IFMT {
            libc::S_IFREG => "file",
            libc::S_IFDIR => "dir",
            libc::S_IFLNK => "symlink",
            _ => "other",
        }
    }

    fn is_dir(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFDIR
    }

    fn perms(&self) -> u32 {
        self.mode & 0o7777
    }
}

/// The entries of one root.
struct RootSnap {
    path: PathBuf,
    arena: Vec<u8>,
    /// Sorted by key (component order).
    entries: Vec<Entry>,
    /// The root itself could not be examined (not just absent).
    unreadable: bool,
}

impl RootSnap {
    fn empty(path: &Path) -> Self {
        RootSnap {
            path: path.to_path_buf(),
            arena: Vec::new(),
            entries: Vec::new(),
            unreadable: false,
        }
    }

    fn key(&self, e: &Entry) -> &[u8] {
        &self.arena[e.key_off as usize..(e.key_off + e.key_len) as usize]
    }

    fn link_target(&self, e: &Entry) -> &[u8] {
        let (off, len) = ((e.aux >> 32) as usize, (e.aux & 0xffff_ffff) as usize);
        &self.arena[off..off + len]
    }

    fn find(&self, key: &[u8]) -> Option<&Entry> {
        self.entries
            .binary_search_by(|e| self.key(e).cmp(key))
            .ok()
            .map(|i| &self.entries[i])
    }

    fn abs_path(&self, key: &[u8]) -> PathBuf {
        if key.is_empty() {
            return self.path.clone();
        }
        let rel: Vec<u8> = key.iter().map(|&b| if b == 0 { b'/' } else { b }).collect();
        self.path.join(OsStr::from_bytes(&rel))
    }

    fn paths_flagged(&self, flag: u32) -> impl Iterator<Item = PathBuf> + '_ {
        self.entries
            .iter()
            .filter(move |e| e.flags & flag != 0)
            .map(|e| self.abs_path(self.key(e)))
    }
}

/// The metadata of every entry under some roots at one moment.
pub struct Snapshot {
    roots: Vec<RootSnap>,
    elapsed: Duration,
    truncated: bool,
    /// The entry bound was hit (not only the depth bound): entries anywhere may be missing.
    full: bool,
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field(
                "roots",
                &self.roots.iter().map(|r| &r.path).collect::<Vec<_>>(),
            )
            .field("entries", &self.entries())
            .field("truncated", &self.truncated)
            .field("elapsed", &self.elapsed)
            .finish()
    }
}

impl Snapshot {
    /// Entries recorded, over all roots (each root counts itself when it exists).
    pub fn entries(&self) -> usize {
        self.roots.iter().map(|r| r.entries.len()).sum()
    }

    /// A limit was hit: some entries were not recorded.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// The entry bound was hit: where entries are missing is not known. (At the depth bound,
    /// the directories not listed are recorded as such.)
    pub fn full(&self) -> bool {
        self.full
    }

    /// How long taking the snapshot took.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// Absolute paths of the entries called `name` (any type), e.g. every `.git`.
    pub fn paths_named(&self, name: &str) -> Vec<PathBuf> {
        let name = name.as_bytes();
        let mut out = Vec::new();
        for r in &self.roots {
            for e in &r.entries {
                let key = r.key(e);
                let base = match key.iter().rposition(|&b| b == 0) {
                    Some(i) => &key[i + 1..],
                    None if key.is_empty() => {
                        r.path.file_name().map(OsStr::as_bytes).unwrap_or_default()
                    }
                    None => key,
                };
                if base == name {
                    out.push(r.abs_path(key));
                }
            }
        }
        out
    }

    /// Directories that could not be opened or listed (and roots that could not be examined).
    pub fn unreadable(&self) -> Vec<PathBuf> {
        let roots = self.roots.iter().filter(|r| r.unreadable);
        roots
            .map(|r| r.path.clone())
            .chain(self.roots.iter().flat_map(|r| r.paths_flagged(UNREADABLE)))
            .collect()
    }

    /// Mount points found under the roots: recorded as entries, not entered.
    pub fn mount_points(&self) -> Vec<PathBuf> {
        self.roots
            .iter()
            .flat_map(|r| r.paths_flagged(MOUNT))
            .collect()
    }

    /// Heap memory held by the snapshot, in bytes.
    pub fn heap_bytes(&self) -> usize {
        self.roots
            .iter()
            .map(|r| {
                r.arena.capacity()
                    + r.entries.capacity() * std::mem::size_of::<Entry>()
                    + r.path.as_os_str().len()
            })
            .sum()
    }

    fn root(&self, path: &Path) -> Option<&RootSnap> {
        self.roots.iter().find(|r| r.path == path)
    }
}

/// What happened to one path.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Created,
    Modified,
    Deleted,
    ModeChanged,
}

/// One changed path.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Change {
    /// The writable path it is under.
    #[serde(serialize_with = "lossy_path")]
    pub root: PathBuf,
    /// Absolute.
    #[serde(serialize_with = "lossy_path")]
    pub path: PathBuf,
    pub kind: ChangeKind,
    /// "file", "dir", "symlink" or "other": the type after the run, before it for a deletion.
    pub file_type: &'static str,
    /// e.g. "size 10 -> 14", "mode 0644 -> 0755", "file -> symlink".
    pub detail: Option<String>,
}

/// Everything a run changed under the roots.
#[derive(Debug, Clone, Serialize)]
pub struct Changes {
    /// Sorted by path.
    pub changes: Vec<Change>,
    /// A snapshot hit a limit or there were more than [`MAX_CHANGES`]: the list is incomplete.
    pub truncated: bool,
    /// Directories not readable in either snapshot: what is inside is not known.
    #[serde(serialize_with = "lossy_paths")]
    pub unreadable: Vec<PathBuf>,
    /// Racy files that were not hashed (size or budget) and whose metadata did not change:
    /// their content may have changed without it showing.
    #[serde(serialize_with = "lossy_paths")]
    pub unverified: Vec<PathBuf>,
    /// Mount points under the roots, not entered.
    #[serde(serialize_with = "lossy_paths")]
    pub mount_points: Vec<PathBuf>,
    pub entries_before: usize,
    pub entries_after: usize,
    pub baseline_ms: f64,
    pub after_ms: f64,
    pub compare_ms: f64,
}

/// One root of a snapshot, for looking entries up by key (relative path, components separated
/// by NUL).
#[derive(Clone, Copy)]
pub struct Tree<'a>(&'a RootSnap);

/// What a snapshot recorded of one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    /// `S_IFMT` bits.
    pub file_type: u32,
    pub ino: u64,
}

impl Tree<'_> {
    /// The root's absolute path.
    pub fn path(&self) -> &Path {
        &self.0.path
    }

    /// The entry at `key` (the root itself for an empty key).
    pub fn get(&self, key: &[u8]) -> Option<Node> {
        self.0.find(key).map(|e| Node {
            file_type: e.mode & libc::S_IFMT,
            ino: e.ino,
        })
    }

    /// The absolute path of `key`.
    pub fn abs_path(&self, key: &[u8]) -> PathBuf {
        self.0.abs_path(key)
    }
}

/// One change, as [`compare_with`]'s visitor sees it.
pub struct Touched<'a> {
    pub before: Tree<'a>,
    pub after: Tree<'a>,
    /// Relative to the root, components separated by NUL; empty for the root itself.
    pub key: &'a [u8],
    pub kind: ChangeKind,
    pub is_dir: bool,
    /// A directory the after-snapshot recorded but did not list (it could not be read, or it
    /// lies at the depth limit): what it holds is unknown.
    pub unlisted: bool,
}

/// Paths that are not UTF-8 (a sandboxed command chooses the names) must not make the report
/// unserializable.
fn lossy_path<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&p.to_string_lossy())
}

fn lossy_paths<S: Serializer>(ps: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(ps.iter().map(|p| p.to_string_lossy()))
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

fn ns(sec: i64, nsec: i64) -> i64 {
    sec.saturating_mul(1_000_000_000).saturating_add(nsec)
}

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

/// The per-process key: hashes taken by different snapshots of one process compare.
fn hash_key() -> &'static RandomState {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    KEY.get_or_init(RandomState::new)
}

/// Keyed hash of a regular file's content, if the descriptor is still the inode, size and mtime
/// that were recorded, and the file is at most `max` bytes.
fn hash_file(fd: OwnedFd, expect: (u64, u64, i64), max: u64, buf: &mut [u8]) -> Option<u64> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is a writable stat buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: fstat succeeded.
    let st = unsafe { st.assume_init() };
    let now = (
        st.st_ino,
        st.st_size as u64,
        ns(st.st_mtime, st.st_mtime_nsec),
    );
    if now != expect || st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    let mut file = std::fs::File::from(fd);
    let mut h = hash_key().build_hasher();
    let mut total = 0u64;
    loop {
        match file.read(buf) {
            Ok(0) => break,
            Ok(n) => {
                total += n as u64;
                if total > max {
                    return None;
                }
                h.write(&buf[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    h.write_u64(total);
    Some(h.finish())
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
    fn list(&self, job: Job, out: &mut Out, scratch: &mut Scratch, children: &mut Vec<Job>) {
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
        drop(job.parent);
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
                let target = if st.mode & libc::S_IFMT == libc::S_IFLNK {
                    read_link_at(fd.as_raw_fd(), name, &mut scratch.bytes)
                        .map(|n| &scratch.bytes[..n])
                        .unwrap_or_default()
                } else {
                    &[]
                };
                let key_bytes = job.key.len() + 1 + nb.len();
                if !b.reserve(key_bytes + target.len()) {
                    flags = 0;
                    break 'read;
                }
                match st.mode & libc::S_IFMT {
                    libc::S_IFDIR => {
                        let mount = st.mount_root.unwrap_or(st.dev != job.st.dev);
                        if mount || job.depth + 1 >= b.limits.max_depth {
                            if !mount {
                                b.truncated.store(true, Ordering::Relaxed);
                            }
                            out.push(&job.key, nb, &st, 0, if mount { MOUNT } else { 0 });
                            continue;
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
                            b.hash(fd.as_raw_fd(), name, &st, &mut scratch.bytes)
                        } else {
                            (0, 0)
                        };
                        out.push(&job.key, nb, &st, aux, f);
                    }
                }
            }
        }
        out.push(&job.key, &[], &job.st, 0, flags);
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
    let arena = &out.arena;
    let key = |e: &Entry| &arena[e.key_off as usize..(e.key_off + e.key_len) as usize];
    out.entries.sort_unstable_by(|a, b| key(a).cmp(key(b)));
    out.entries.shrink_to_fit();
    out.arena.shrink_to_fit();
    snap.arena = out.arena;
    snap.entries = out.entries;
    snap
}

/// Records every entry under `roots` (absolute paths). A root that does not exist has no entries;
/// one that is not a directory is a single entry. Never fails: what cannot be read is noted.
pub fn snapshot(roots: &[PathBuf], limits: &Limits) -> Snapshot {
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

// ---------------------------------------------------------------------------------------------
// The comparison

/// Whether the other snapshot could have seen an entry that only one of them has.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Seen {
    /// Its directory was listed (or is itself new): the entry really appeared or went.
    Yes,
    /// Its directory was not readable: the entry may have been there.
    Unreadable,
    /// A limit stopped the listing: say nothing (the result is marked truncated).
    Unknown,
}

/// Finds the nearest ancestor of `key` that `other` recorded and says whether it was listed.
fn seen_in(other: &RootSnap, key: &[u8]) -> Seen {
    let mut k = key;
    while !k.is_empty() {
        k = match k.iter().rposition(|&b| b == 0) {
            Some(i) => &k[..i],
            None => &[],
        };
        if let Some(e) = other.find(k) {
            return if !e.is_dir() || e.flags & LISTED != 0 {
                Seen::Yes
            } else if e.flags & UNREADABLE != 0 {
                Seen::Unreadable
            } else {
                Seen::Unknown
            };
        }
    }
    if other.unreadable {
        Seen::Unreadable
    } else {
        Seen::Yes
    }
}

/// Hashes the file now on disk, if it is still the entry `now` of the second snapshot.
fn rehash(path: &Path, now: &Entry) -> Option<u64> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    let fd = open_file(libc::AT_FDCWD, &c).ok()?;
    let expect = (now.ino, now.size, now.mtime);
    hash_file(fd, expect, now.size, &mut vec![0u8; 64 << 10])
}

struct Comparer<'a> {
    before: &'a RootSnap,
    after: &'a RootSnap,
    out: Vec<Change>,
    cap: usize,
    /// Bytes of paths and details listed so far, against `byte_cap`.
    byte_cap: usize,
    bytes: usize,
    /// Sees every change before the list's limits apply.
    visit: &'a mut dyn FnMut(&Touched<'_>),
    unverified: Vec<PathBuf>,
    truncated: bool,
}

impl Comparer<'_> {
    fn add(&mut self, key: &[u8], kind: ChangeKind, e: &Entry, detail: Option<String>) {
        (self.visit)(&Touched {
            before: Tree(self.before),
            after: Tree(self.after),
            key,
            kind,
            is_dir: e.is_dir(),
            unlisted: e.is_dir() && e.flags & (LISTED | MOUNT) == 0,
        });
        let cost =
            self.after.path.as_os_str().len() + key.len() + detail.as_ref().map_or(0, String::len);
        if self.out.len() >= self.cap || self.bytes + cost > self.byte_cap {
            self.truncated = true;
            return;
        }
        self.bytes += cost;
        self.out.push(Change {
            root: self.after.path.clone(),
            path: self.after.abs_path(key),
            kind,
            file_type: e.file_type(),
            detail,
        });
    }

    /// An entry only one side has: created (`created`) or deleted.
    fn one_sided(&mut self, key: &[u8], e: &Entry, created: bool) {
        let other = if created { self.before } else { self.after };
        let kind = if created {
            ChangeKind::Created
        } else {
            ChangeKind::Deleted
        };
        match seen_in(other, key) {
            Seen::Yes => self.add(key, kind, e, None),
            Seen::Unknown => self.truncated = true,
            Seen::Unreadable => {
                let note = if created {
                    "a directory above was not readable before the run: may have existed"
                } else {
                    "a directory above was not readable after the run: may still exist"
                };
                self.add(key, kind, e, Some(note.into()));
            }
        }
    }

    fn both(&mut self, key: &[u8], b: &Entry, a: &Entry) {
        let mode_note = (b.perms() != a.perms())
            .then(|| format!("mode {:04o} -> {:04o}", b.perms(), a.perms()));
        if b.mode & libc::S_IFMT != a.mode & libc::S_IFMT {
            let detail = format!("{} -> {}", b.file_type(), a.file_type());
            return self.add(key, ChangeKind::Modified, a, Some(detail));
        }
        match a.file_type() {
            "symlink" => {
                let (tb, ta) = (self.before.link_target(b), self.after.link_target(a));
                if tb != ta {
                    let detail = format!(
                        "target {} -> {}",
                        OsStr::from_bytes(tb).to_string_lossy(),
                        OsStr::from_bytes(ta).to_string_lossy()
                    );
                    self.add(key, ChangeKind::Modified, a, Some(detail));
                }
            }
            "file" => self.file(key, b, a, mode_note),
            // Directories: a changed mtime, ctime or size only means entries were added or
            // removed, and those are reported one by one.
            _ => {
                if b.ino != a.ino {
                    let mut detail = String::from("replaced (new inode)");
                    if let Some(m) = &mode_note {
                        detail = format!("{detail}, {m}");
                    }
                    self.add(key, ChangeKind::Modified, a, Some(detail));
                } else if (b.flags | a.flags) & UNREADABLE != 0
                    && (b.mtime != a.mtime || b.ctime != a.ctime)
                {
                    // Its entries could not be listed: that it changed is all that is known
                    // (a command can chmod 000 a directory after writing into it).
                    let mut detail =
                        String::from("unreadable directory changed: its entries are unknown");
                    if let Some(m) = &mode_note {
                        detail = format!("{detail}, {m}");
                    }
                    self.add(key, ChangeKind::Modified, a, Some(detail));
                } else if mode_note.is_some() {
                    self.add(key, ChangeKind::ModeChanged, a, mode_note);
                }
            }
        }
    }

    fn file(&mut self, key: &[u8], b: &Entry, a: &Entry, mode_note: Option<String>) {
        let mut notes = Vec::new();
        let mut unverified = b.flags & UNVERIFIED != 0;
        if b.ino != a.ino {
            notes.push("replaced (new inode)".to_string());
        }
        if b.size != a.size {
            notes.push(format!("size {} -> {}", b.size, a.size));
        } else if b.mtime != a.mtime {
            notes.push("mtime changed".to_string());
        }
        let mut ctime_only = false;
        if notes.is_empty() {
            if b.flags & HASHED != 0 {
                let now = if a.flags & HASHED != 0 {
                    Some(a.aux)
                } else {
                    rehash(&self.after.abs_path(key), a)
                };
                match now {
                    Some(h) if h == b.aux => {}
                    Some(_) => notes.push("content changed (same size and mtime)".into()),
                    None => unverified = true,
                }
            }
            // A ctime that moved without a mode change: an edit hidden by restoring the mtime
            // (touch -d), an xattr, a new hard link or owner.
            if notes.is_empty() && mode_note.is_none() && b.ctime != a.ctime {
                ctime_only = true;
                notes.push(if b.flags & HASHED != 0 {
                    "ctime changed, content unchanged".into()
                } else {
                    "ctime changed, content may differ".into()
                });
            }
        }
        if notes.is_empty() {
            match mode_note {
                Some(m) => self.add(key, ChangeKind::ModeChanged, a, Some(m)),
                None if unverified => {
                    self.unverified.push(self.after.abs_path(key));
                }
                None => {}
            }
            return;
        }
        if !ctime_only {
            notes.extend(mode_note);
        }
        self.add(key, ChangeKind::Modified, a, Some(notes.join(", ")));
    }

    fn run(&mut self) {
        let (b, a) = (self.before, self.after);
        let (mut i, mut j) = (0, 0);
        while i < b.entries.len() || j < a.entries.len() {
            let order = match (b.entries.get(i), a.entries.get(j)) {
                (Some(eb), Some(ea)) => b.key(eb).cmp(a.key(ea)),
                (Some(_), None) => std::cmp::Ordering::Less,
                _ => std::cmp::Ordering::Greater,
            };
            match order {
                std::cmp::Ordering::Less => {
                    let e = &b.entries[i];
                    self.one_sided(b.key(e), e, false);
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    let e = &a.entries[j];
                    self.one_sided(a.key(e), e, true);
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    let (eb, ea) = (&b.entries[i], &a.entries[j]);
                    self.both(a.key(ea), eb, ea);
                    i += 1;
                    j += 1;
                }
            }
        }
    }
}

/// What changed between two snapshots of the same roots.
pub fn compare(before: &Snapshot, after: &Snapshot) -> Changes {
    compare_with(before, after, &mut |_| {})
}

/// [`compare`], with `visit` called for every change, before the list's limits apply (in key
/// order within each root).
pub fn compare_with(
    before: &Snapshot,
    after: &Snapshot,
    visit: &mut dyn FnMut(&Touched<'_>),
) -> Changes {
    compare_capped(before, after, MAX_CHANGES, MAX_CHANGE_BYTES, visit)
}

fn compare_capped(
    before: &Snapshot,
    after: &Snapshot,
    cap: usize,
    byte_cap: usize,
    visit: &mut dyn FnMut(&Touched<'_>),
) -> Changes {
    let start = Instant::now();
    let mut changes = Vec::new();
    let mut unverified = Vec::new();
    let mut bytes = 0;
    let mut truncated = before.truncated || after.truncated;
    let mut paths: Vec<&Path> = before.roots.iter().map(|r| r.path.as_path()).collect();
    for r in &after.roots {
        if !paths.contains(&r.path.as_path()) {
            paths.push(&r.path);
        }
    }
    for path in paths {
        let (eb, ea) = (RootSnap::empty(path), RootSnap::empty(path));
        let mut c = Comparer {
            before: before.root(path).unwrap_or(&eb),
            after: after.root(path).unwrap_or(&ea),
            out: std::mem::take(&mut changes),
            cap,
            byte_cap,
            bytes,
            visit: &mut *visit,
            unverified: std::mem::take(&mut unverified),
            truncated: false,
        };
        c.run();
        truncated |= c.truncated;
        changes = c.out;
        bytes = c.bytes;
        unverified = c.unverified;
    }
    // Nested roots list the same paths twice.
    changes.sort_by(|x, y| x.path.cmp(&y.path));
    changes.dedup_by(|x, y| x.path == y.path);
    let mut unreadable = before.unreadable();
    unreadable.extend(after.unreadable());
    let mut mount_points = before.mount_points();
    mount_points.extend(after.mount_points());
    for list in [&mut unreadable, &mut unverified, &mut mount_points] {
        list.sort();
        list.dedup();
    }
    Changes {
        changes,
        truncated,
        unreadable,
        unverified,
        mount_points,
        entries_before: before.entries(),
        entries_after: after.entries(),
        baseline_ms: before.elapsed.as_secs_f64() * 1e3,
        after_ms: after.elapsed.as_secs_f64() * 1e3,
        compare_ms: start.elapsed().as_secs_f64() * 1e3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
    use std::sync::atomic::AtomicU32;

    /// A temporary tree, removed (after making every directory writable again) on drop.
    struct Tree(PathBuf);

    impl Tree {
        fn new(name: &str) -> Tree {
            static N: AtomicU32 = AtomicU32::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir()
                .join(format!("jail-changes-{name}-{}-{n}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            Tree(fs::canonicalize(&dir).unwrap())
        }

        fn p(&self, rel: &str) -> PathBuf {
            self.0.join(rel)
        }

        fn write(&self, rel: &str, content: &str) {
            let p = self.p(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, content).unwrap();
        }

        fn roots(&self) -> Vec<PathBuf> {
            vec![self.0.clone()]
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            fn open_up(dir: &Path) {
                let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o755));
                for e in fs::read_dir(dir).into_iter().flatten().flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        open_up(&e.path());
                    }
                }
            }
            open_up(&self.0);
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn run_with(tree: &Tree, limits: &Limits, change: impl FnOnce()) -> Changes {
        let before = snapshot(&tree.roots(), limits);
        change();
        let after = snapshot(&tree.roots(), limits);
        compare(&before, &after)
    }

    fn run(tree: &Tree, change: impl FnOnce()) -> Changes {
        run_with(tree, &Limits::default(), change)
    }

    /// (relative path, kind, detail) of every change.
    fn list(tree: &Tree, c: &Changes) -> Vec<(String, ChangeKind, String)> {
        c.changes
            .iter()
            .map(|ch| {
                assert!(ch.path.starts_with(&ch.root) && ch.root.starts_with(&tree.0));
                let rel = ch.path.strip_prefix(&tree.0).unwrap();
                (
                    rel.to_string_lossy().into_owned(),
                    ch.kind,
                    ch.detail.clone().unwrap_or_default(),
                )
            })
            .collect()
    }

    fn kinds(tree: &Tree, c: &Changes) -> Vec<(String, ChangeKind)> {
        list(tree, c).into_iter().map(|(p, k, _)| (p, k)).collect()
    }

    fn set_mtime(path: &Path, sec: i64, nsec: i64) {
        let c = CString::new(path.as_os_str().as_bytes()).unwrap();
        let times = [
            libc::timespec {
                tv_sec: 0,
                tv_nsec: libc::UTIME_OMIT,
            },
            libc::timespec {
                tv_sec: sec,
                tv_nsec: nsec,
            },
        ];
        // SAFETY: `c` is NUL-terminated and `times` holds two timespecs.
        let rc = unsafe {
            libc::utimensat(
                libc::AT_FDCWD,
                c.as_ptr(),
                times.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        assert_eq!(rc, 0, "utimensat {}", path.display());
    }

    fn chmod(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn euid() -> u32 {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() }
    }

    use ChangeKind::*;

    #[test]
    fn an_unchanged_tree_has_no_changes() {
        let t = Tree::new("same");
        t.write("a.txt", "a");
        t.write("d/b.txt", "b");
        symlink("a.txt", t.p("l")).unwrap();
        let c = run(&t, || {});
        assert_eq!(kinds(&t, &c), vec![]);
        assert!(!c.truncated);
        assert_eq!(c.entries_before, 5);
        assert_eq!(c.entries_after, 5);
        assert!(c.unverified.is_empty() && c.unreadable.is_empty());
    }

    #[test]
    fn created_files_and_directories() {
        let t = Tree::new("create");
        t.write("old.txt", "old");
        let c = run(&t, || {
            t.write("new.txt", "new");
            fs::create_dir(t.p("empty")).unwrap();
        });
        // The root's mtime changed: not reported.
        assert_eq!(
            kinds(&t, &c),
            vec![("empty".into(), Created), ("new.txt".into(), Created)]
        );
        assert_eq!(c.changes[0].file_type, "dir");
        assert_eq!(c.changes[1].file_type, "file");
    }

    #[test]
    fn a_size_change_is_a_modification() {
        let t = Tree::new("size");
        t.write("f", "hello");
        let c = run(&t, || t.write("f", "hello world"));
        assert_eq!(
            list(&t, &c),
            vec![("f".into(), Modified, "size 5 -> 11".into())]
        );
    }

    /// An edit of the same length with the mtime put back, right after the baseline: only the
    /// content hash of the racy file shows it.
    #[test]
    fn a_racy_same_size_edit_is_caught_by_the_hash() {
        for after_hashes in [true, false] {
            let t = Tree::new("racy");
            t.write("f", "hello");
            t.write("untouched", "same");
            let md = fs::metadata(t.p("f")).unwrap();
            let before = snapshot(&t.roots(), &Limits::default());
            t.write("f", "jello");
            set_mtime(&t.p("f"), md.mtime(), md.mtime_nsec());
            let md2 = fs::metadata(t.p("f")).unwrap();
            assert_eq!((md.size(), md.mtime_nsec()), (md2.size(), md2.mtime_nsec()));
            // Without a hash in the second snapshot the file is read again at compare time.
            let limits = Limits {
                hash_budget: if after_hashes { 256 << 20 } else { 0 },
                ..Limits::default()
            };
            let after = snapshot(&t.roots(), &limits);
            let c = compare(&before, &after);
            assert_eq!(
                list(&t, &c),
                vec![(
                    "f".into(),
                    Modified,
                    "content changed (same size and mtime)".into()
                )]
            );
        }
    }

    #[test]
    fn deleted_file() {
        let t = Tree::new("delete");
        t.write("f", "x");
        t.write("g", "y");
        let c = run(&t, || fs::remove_file(t.p("f")).unwrap());
        assert_eq!(kinds(&t, &c), vec![("f".into(), Deleted)]);
        assert_eq!(c.changes[0].file_type, "file");
    }

    #[test]
    fn chmod_is_a_mode_change() {
        let t = Tree::new("chmod");
        t.write("f", "x");
        fs::create_dir(t.p("d")).unwrap();
        chmod(&t.p("f"), 0o644);
        chmod(&t.p("d"), 0o755);
        let c = run(&t, || {
            chmod(&t.p("f"), 0o755);
            chmod(&t.p("d"), 0o700);
        });
        assert_eq!(
            list(&t, &c),
            vec![
                ("d".into(), ModeChanged, "mode 0755 -> 0700".into()),
                ("f".into(), ModeChanged, "mode 0644 -> 0755".into()),
            ]
        );
    }

    #[test]
    fn chmod_and_edit_is_a_modification() {
        let t = Tree::new("chmod-edit");
        t.write("f", "x");
        chmod(&t.p("f"), 0o644);
        let c = run(&t, || {
            t.write("f", "xyz");
            chmod(&t.p("f"), 0o755);
        });
        assert_eq!(
            list(&t, &c),
            vec![(
                "f".into(),
                Modified,
                "size 1 -> 3, mode 0644 -> 0755".into()
            )]
        );
    }

    #[test]
    fn rename_over_is_a_modification() {
        let t = Tree::new("mv");
        t.write("f", "same length 1");
        let c = run(&t, || {
            t.write("f.tmp", "same length 2");
            fs::rename(t.p("f.tmp"), t.p("f")).unwrap();
        });
        let l = list(&t, &c);
        assert_eq!(l.len(), 1, "{l:?}");
        assert_eq!((l[0].0.as_str(), l[0].1), ("f", Modified));
        assert!(l[0].2.starts_with("replaced (new inode)"), "{l:?}");
    }

    #[test]
    fn a_retargeted_symlink_is_modified_a_recreated_one_is_not() {
        let t = Tree::new("symlink");
        symlink("a", t.p("l")).unwrap();
        symlink("same", t.p("m")).unwrap();
        let c = run(&t, || {
            fs::remove_file(t.p("l")).unwrap();
            symlink("b", t.p("l")).unwrap();
            fs::remove_file(t.p("m")).unwrap();
            symlink("same", t.p("m")).unwrap();
        });
        assert_eq!(
            list(&t, &c),
            vec![("l".into(), Modified, "target a -> b".into())]
        );
        assert_eq!(c.changes[0].file_type, "symlink");
    }

    #[test]
    fn a_file_that_becomes_a_directory() {
        let t = Tree::new("type");
        t.write("x", "file");
        let c = run(&t, || {
            fs::remove_file(t.p("x")).unwrap();
            t.write("x/inner", "i");
        });
        assert_eq!(
            list(&t, &c),
            vec![
                ("x".into(), Modified, "file -> dir".into()),
                ("x/inner".into(), Created, String::new()),
            ]
        );
        assert_eq!(c.changes[0].file_type, "dir");
    }

    #[test]
    fn every_entry_of_a_new_or_deleted_directory_is_listed() {
        let t = Tree::new("dirs");
        t.write("old/a", "a");
        t.write("old/sub/b", "b");
        let c = run(&t, || {
            fs::remove_dir_all(t.p("old")).unwrap();
            t.write("new/a", "a");
            t.write("new/sub/b", "b");
            symlink("a", t.p("new/l")).unwrap();
        });
        assert_eq!(
            kinds(&t, &c),
            vec![
                ("new".into(), Created),
                ("new/a".into(), Created),
                ("new/l".into(), Created),
                ("new/sub".into(), Created),
                ("new/sub/b".into(), Created),
                ("old".into(), Deleted),
                ("old/a".into(), Deleted),
                ("old/sub".into(), Deleted),
                ("old/sub/b".into(), Deleted),
            ]
        );
    }

    /// `touch -d` after an edit of the same length: size and mtime as before, only the ctime
    /// moved. The file is not racy (no hash), so the report can only say the content may differ.
    #[test]
    fn a_restored_mtime_shows_in_the_ctime() {
        let t = Tree::new("ctime");
        t.write("f", "hello");
        let md = fs::metadata(t.p("f")).unwrap();
        let limits = Limits {
            racy_window: Duration::ZERO,
            ..Limits::default()
        };
        let c = run_with(&t, &limits, || {
            // The ctime must land in a later clock tick than the one before the baseline.
            std::thread::sleep(Duration::from_millis(30));
            t.write("f", "jello");
            set_mtime(&t.p("f"), md.mtime(), md.mtime_nsec());
        });
        assert_eq!(
            list(&t, &c),
            vec![(
                "f".into(),
                Modified,
                "ctime changed, content may differ".into()
            )]
        );
    }

    #[test]
    fn racy_files_over_the_budget_are_unverified() {
        let t = Tree::new("budget");
        t.write("f", "hello");
        let limits = Limits {
            hash_budget: 0,
            ..Limits::default()
        };
        let c = run_with(&t, &limits, || {});
        assert_eq!(kinds(&t, &c), vec![]);
        assert_eq!(c.unverified, vec![t.p("f")]);
    }

    #[test]
    fn unreadable_directories_are_noted() {
        let t = Tree::new("unreadable");
        t.write("locked/secret", "s");
        t.write("open", "o");
        chmod(&t.p("locked"), 0o000);
        let c = run(&t, || t.write("new", "n"));
        assert_eq!(kinds(&t, &c), vec![("new".into(), Created)]);
        if euid() != 0 {
            assert_eq!(c.unreadable, vec![t.p("locked")]);
            // Readable after the run: what is inside may have existed before.
            let before = snapshot(&t.roots(), &Limits::default());
            chmod(&t.p("locked"), 0o755);
            let after = snapshot(&t.roots(), &Limits::default());
            let c = compare(&before, &after);
            let l = list(&t, &c);
            assert_eq!(l.len(), 2, "{l:?}");
            assert_eq!((l[0].0.as_str(), l[0].1), ("locked", ModeChanged));
            assert_eq!((l[1].0.as_str(), l[1].1), ("locked/secret", Created));
            assert!(l[1].2.contains("not readable"), "{l:?}");
        } else {
            eprintln!("running as root: the unreadable directory is readable");
        }
    }

    #[test]
    fn other_mounts_are_recorded_not_entered() {
        if euid() != 0 {
            eprintln!("skipped: creating a mount needs root");
            return;
        }
        let t = Tree::new("mount");
        t.write("src/file", "f");
        fs::create_dir(t.p("tmpfs")).unwrap();
        fs::create_dir(t.p("bind")).unwrap();
        let mount = |src: &str, dst: &Path, fstype: &str, flags| {
            let src = CString::new(src).unwrap();
            let dst = CString::new(dst.as_os_str().as_bytes()).unwrap();
            let fstype = CString::new(fstype).unwrap();
            // SAFETY: all strings are NUL-terminated; no data argument.
            unsafe {
                libc::mount(
                    src.as_ptr(),
                    dst.as_ptr(),
                    fstype.as_ptr(),
                    flags,
                    std::ptr::null(),
                )
            }
        };
        struct Unmount(Vec<PathBuf>);
        impl Drop for Unmount {
            fn drop(&mut self) {
                for p in self.0.iter().rev() {
                    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
                    // SAFETY: `c` is NUL-terminated.
                    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
                }
            }
        }
        let mut guard = Unmount(Vec::new());
        if mount("tmpfs", &t.p("tmpfs"), "tmpfs", 0) != 0 {
            eprintln!("skipped: cannot mount: {}", std::io::Error::last_os_error());
            return;
        }
        guard.0.push(t.p("tmpfs"));
        // A bind mount is on the same device: found by STATX_ATTR_MOUNT_ROOT.
        let src = t.p("src");
        let bound = mount(src.to_str().unwrap(), &t.p("bind"), "", libc::MS_BIND) == 0;
        if bound {
            guard.0.push(t.p("bind"));
        }
        t.write("tmpfs/old", "o");
        let c = run(&t, || {
            t.write("tmpfs/new", "n");
            fs::remove_file(t.p("tmpfs/old")).unwrap();
        });
        assert_eq!(kinds(&t, &c), vec![]);
        let mut expected = vec![t.p("tmpfs")];
        if bound {
            expected.insert(0, t.p("bind"));
        }
        assert_eq!(c.mount_points, expected);
        drop(guard);
    }

    #[test]
    fn limits_truncate_without_inventing_changes() {
        let t = Tree::new("limits");
        for d in 0..3 {
            for f in 0..10 {
                t.write(&format!("d{d}/f{f}"), "x");
            }
        }
        let small = Limits {
            max_entries: 5,
            ..Limits::default()
        };
        let limited = snapshot(&t.roots(), &small);
        assert!(limited.truncated());
        assert!(limited.entries() <= 5, "{}", limited.entries());
        let full = snapshot(&t.roots(), &Limits::default());
        assert!(!full.truncated());
        assert_eq!(full.entries(), 34);
        for (b, a) in [(&limited, &full), (&full, &limited)] {
            let c = compare(b, a);
            assert!(c.truncated);
            assert_eq!(kinds(&t, &c), vec![]);
        }
        // Depth: the root is 0, d0 is 1 and is recorded but not listed.
        let shallow = Limits {
            max_depth: 1,
            ..Limits::default()
        };
        let s = snapshot(&t.roots(), &shallow);
        assert!(s.truncated());
        assert_eq!(s.entries(), 4);
    }

    #[test]
    fn too_many_changes_truncate() {
        let t = Tree::new("cap");
        let before = snapshot(&t.roots(), &Limits::default());
        for i in 0..10 {
            t.write(&format!("f{i}"), "x");
        }
        let after = snapshot(&t.roots(), &Limits::default());
        let c = compare(&before, &after);
        assert_eq!(c.changes.len(), 10);
        assert!(!c.truncated);
        let c = compare_capped(&before, &after, 4, MAX_CHANGE_BYTES, &mut |_| {});
        assert_eq!(c.changes.len(), 4);
        assert!(c.truncated);
    }

    #[test]
    fn long_names_truncate_by_bytes_and_the_visitor_sees_every_change() {
        let t = Tree::new("bytes");
        let before = snapshot(&t.roots(), &Limits::default());
        let long = "L".repeat(200);
        for i in 0..10 {
            t.write(&format!("{long}{i}"), "x");
        }
        t.write("zz/.git/config", "[core]");
        let after = snapshot(&t.roots(), &Limits::default());
        let root_len = t.roots()[0].as_os_str().len();
        let per_change = root_len + long.len() + 1;
        let mut seen = Vec::new();
        let c = compare_capped(&before, &after, MAX_CHANGES, per_change * 3, &mut |t| {
            seen.push(t.after.abs_path(t.key))
        });
        assert_eq!(c.changes.len(), 3);
        assert!(c.truncated);
        assert_eq!(
            seen.len(),
            13,
            "every change, whatever the list's limits: {seen:?}"
        );
        assert!(seen.contains(&t.p("zz/.git/config")));
    }

    #[test]
    fn roots_that_are_missing_files_or_symlinks() {
        let t = Tree::new("roots");
        t.write("file", "hello");
        symlink("file", t.p("link")).unwrap();
        let roots = vec![t.p("missing"), t.p("file"), t.p("link")];
        let before = snapshot(&roots, &Limits::default());
        assert_eq!(before.entries(), 2);
        t.write("missing/inside", "i");
        t.write("file", "hello world");
        fs::remove_file(t.p("link")).unwrap();
        symlink("other", t.p("link")).unwrap();
        let after = snapshot(&roots, &Limits::default());
        let c = compare(&before, &after);
        assert_eq!(
            kinds(&t, &c),
            vec![
                ("file".into(), Modified),
                ("link".into(), Modified),
                ("missing".into(), Created),
                ("missing/inside".into(), Created),
            ]
        );
        assert_eq!(c.changes[3].root, t.p("missing"));
    }

    #[test]
    fn nested_roots_report_each_path_once() {
        let t = Tree::new("nested");
        t.write("sub/f", "x");
        let roots = vec![t.0.clone(), t.p("sub")];
        let before = snapshot(&roots, &Limits::default());
        t.write("sub/g", "y");
        let after = snapshot(&roots, &Limits::default());
        let c = compare(&before, &after);
        assert_eq!(c.changes.len(), 1);
        assert_eq!(c.changes[0].path, t.p("sub/g"));
    }

    #[test]
    fn paths_named_finds_every_git_entry() {
        let t = Tree::new("named");
        t.write(".git/HEAD", "ref");
        t.write("sub/.git", "gitdir: elsewhere");
        t.write("sub/not.git", "x");
        let s = snapshot(&t.roots(), &Limits::default());
        let mut found = s.paths_named(".git");
        found.sort();
        assert_eq!(found, vec![t.p(".git"), t.p("sub/.git")]);
        let root_name = t.0.file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(s.paths_named(&root_name), vec![t.0.clone()]);
    }

    #[test]
    fn output_is_sorted_by_path_component() {
        let t = Tree::new("order");
        let c = run(&t, || {
            t.write("a.txt", "1");
            t.write("a/b", "2");
            t.write("a-b", "3");
        });
        assert_eq!(
            kinds(&t, &c),
            vec![
                ("a".into(), Created),
                ("a/b".into(), Created),
                ("a-b".into(), Created),
                ("a.txt".into(), Created),
            ]
        );
    }

    #[test]
    fn names_that_are_not_utf8_serialize() {
        let t = Tree::new("utf8");
        let c = run(&t, || {
            fs::write(t.0.join(OsStr::from_bytes(b"bad\xff\x1b[31m")), "x").unwrap();
        });
        assert_eq!(c.changes.len(), 1);
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains("\"kind\":\"created\""), "{json}");
        assert!(json.contains("\\u001b"), "{json}");
    }

    #[test]
    fn single_and_multi_threaded_walks_agree() {
        let t = Tree::new("threads");
        for d in 0..20 {
            for f in 0..5 {
                t.write(&format!("d{d}/e/f{f}"), "x");
            }
        }
        let one = snapshot(
            &t.roots(),
            &Limits {
                threads: 1,
                ..Limits::default()
            },
        );
        let four = snapshot(
            &t.roots(),
            &Limits {
                threads: 4,
                ..Limits::default()
            },
        );
        assert_eq!(one.entries(), 1 + 20 * 7);
        assert_eq!(four.entries(), one.entries());
        let c = compare(&one, &four);
        assert_eq!(kinds(&t, &c), vec![]);
    }
}
