//! What a snapshot records of each entry, how it is laid out, and the keyed hash of a racy
//! file's content.
//!
//! - Each root's entries are one `Vec` of fixed-size [`Entry`] records sorted by key, with the
//!   relative paths (and symlink targets) packed in one byte arena. A tree of two million
//!   entries then costs two allocations per root instead of two million `PathBuf`s, and the
//!   comparison is a merge of two sorted lists.
//! - A key stores `/` as NUL, which no name can hold and which sorts below every byte that
//!   can: byte order is then path-component order (`a`, `a/b`, `a-b`, `a.txt`; with `/`,
//!   `a-b` and `a.txt` would fall between `a` and `a/b`), so a directory's entries follow it
//!   without interruption.
//! - What is kept of the `statx` result is what shows an edit: size, mtime, ctime, inode (a
//!   rename over the file), mode (type and permission bits). An edit of the same length within
//!   one timestamp tick can leave all of them as they were, so a file written in the last
//!   moments before the snapshot ("racy") gets a hash of its content too.
//! - The hash is SipHash keyed with a random per-process key: the content is chosen by the
//!   command inside the sandbox, and a collision it could compute would hide an edit. Both
//!   snapshots of one run are taken by the same process, so their hashes compare. The content
//!   is read through a descriptor whose `fstat` must still show the inode, size and mtime that
//!   were recorded, so a hash never describes a file other than the entry it is stored in.

use std::ffi::OsStr;
use std::fmt;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One file system entry, 56 bytes. Its relative path is `arena[key_off..key_off + key_len]`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub(super) key_off: u32,
    pub(super) key_len: u32,
    pub(super) size: u64,
    /// Nanoseconds since the epoch.
    pub(super) mtime: i64,
    pub(super) ctime: i64,
    pub(super) ino: u64,
    /// A symlink: its target's span in the arena (offset << 32 | length). A regular file with
    /// [`HASHED`]: the keyed hash of its content.
    pub(super) aux: u64,
    /// `st_mode`: type and permission bits.
    pub(super) mode: u32,
    pub(super) flags: u32,
}

/// The type of an entry as the report names it: the types a command works with, and the rest
/// (devices, fifos, sockets) as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileType {
    File,
    Dir,
    Symlink,
    Other,
}

impl fmt::Display for FileType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileType::File => "file",
            FileType::Dir => "dir",
            FileType::Symlink => "symlink",
            FileType::Other => "other",
        })
    }
}

/// The content hash in `aux` is valid.
pub(super) const HASHED: u32 = 1;
/// Racy, but not hashed (too large, over the budget, or unreadable).
pub(super) const UNVERIFIED: u32 = 2;
/// A directory whose every entry was recorded.
pub(super) const LISTED: u32 = 4;
/// A directory that could not be opened or listed.
pub(super) const UNREADABLE: u32 = 8;
/// A directory where another file system is mounted: recorded, not entered.
pub(super) const MOUNT: u32 = 16;

impl Entry {
    /// The `S_IFMT` bits: every type apart, where [`Entry::file_type`] folds the rare ones.
    pub(super) fn format(&self) -> u32 {
        self.mode & libc::S_IFMT
    }

    pub(super) fn file_type(&self) -> FileType {
        match self.format() {
            libc::S_IFREG => FileType::File,
            libc::S_IFDIR => FileType::Dir,
            libc::S_IFLNK => FileType::Symlink,
            _ => FileType::Other,
        }
    }

    pub(super) fn is_dir(&self) -> bool {
        self.format() == libc::S_IFDIR
    }

    pub(super) fn perms(&self) -> u32 {
        self.mode & 0o7777
    }
}

/// The entries of one root.
pub(super) struct RootSnap {
    pub(super) path: PathBuf,
    pub(super) arena: Vec<u8>,
    /// Sorted by key (component order).
    pub(super) entries: Vec<Entry>,
    /// The root itself could not be examined (not just absent).
    pub(super) unreadable: bool,
}

impl RootSnap {
    pub(super) fn empty(path: &Path) -> Self {
        RootSnap {
            path: path.to_path_buf(),
            arena: Vec::new(),
            entries: Vec::new(),
            unreadable: false,
        }
    }

    /// A root holding `entries`, whose keys and targets are in `arena`, in any order: sorted by
    /// key and trimmed, as lookups and the comparison's merge need.
    pub(super) fn new(path: &Path, mut arena: Vec<u8>, mut entries: Vec<Entry>) -> Self {
        let key = |e: &Entry| &arena[e.key_off as usize..(e.key_off + e.key_len) as usize];
        entries.sort_unstable_by(|a, b| key(a).cmp(key(b)));
        entries.shrink_to_fit();
        arena.shrink_to_fit();
        RootSnap {
            arena,
            entries,
            ..RootSnap::empty(path)
        }
    }

    pub(super) fn key(&self, e: &Entry) -> &[u8] {
        &self.arena[e.key_off as usize..(e.key_off + e.key_len) as usize]
    }

    pub(super) fn link_target(&self, e: &Entry) -> &[u8] {
        let (off, len) = ((e.aux >> 32) as usize, (e.aux & 0xffff_ffff) as usize);
        &self.arena[off..off + len]
    }

    pub(super) fn find(&self, key: &[u8]) -> Option<&Entry> {
        self.entries
            .binary_search_by(|e| self.key(e).cmp(key))
            .ok()
            .map(|i| &self.entries[i])
    }

    pub(super) fn abs_path(&self, key: &[u8]) -> PathBuf {
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
    pub(super) roots: Vec<RootSnap>,
    pub(super) elapsed: Duration,
    pub(super) truncated: bool,
    /// The entry bound was hit (not only the depth bound): entries anywhere may be missing.
    pub(super) full: bool,
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

    pub(super) fn root(&self, path: &Path) -> Option<&RootSnap> {
        self.roots.iter().find(|r| r.path == path)
    }
}

/// The first bytes of an encoded snapshot ([`Snapshot::encode`]).
const MAGIC: &[u8; 8] = b"jsnap\x00\x00\x01";

impl Snapshot {
    /// The snapshot as bytes, for a run's journal: read back by [`Snapshot::decode`] in the
    /// jail that finishes the run when its supervisor was killed. Fixed-width little-endian
    /// fields; the paths as bytes (any name a command chose).
    pub fn encode(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        out.write_all(MAGIC)?;
        out.write_all(&[u8::from(self.truncated), u8::from(self.full)])?;
        out.write_all(&(self.elapsed.as_nanos() as u64).to_le_bytes())?;
        out.write_all(&(self.roots.len() as u64).to_le_bytes())?;
        for r in &self.roots {
            let path = r.path.as_os_str().as_bytes();
            out.write_all(&(path.len() as u64).to_le_bytes())?;
            out.write_all(path)?;
            out.write_all(&[u8::from(r.unreadable)])?;
            out.write_all(&(r.arena.len() as u64).to_le_bytes())?;
            out.write_all(&r.arena)?;
            out.write_all(&(r.entries.len() as u64).to_le_bytes())?;
            let mut buf = Vec::with_capacity(r.entries.len() * 56);
            for e in &r.entries {
                buf.extend(e.key_off.to_le_bytes());
                buf.extend(e.key_len.to_le_bytes());
                buf.extend(e.size.to_le_bytes());
                buf.extend(e.mtime.to_le_bytes());
                buf.extend(e.ctime.to_le_bytes());
                buf.extend(e.ino.to_le_bytes());
                buf.extend(e.aux.to_le_bytes());
                buf.extend(e.mode.to_le_bytes());
                buf.extend(e.flags.to_le_bytes());
            }
            out.write_all(&buf)?;
        }
        Ok(())
    }

    /// Reads an [`Snapshot::encode`]d snapshot; None when the bytes are not one (every span
    /// checked against the arena it points into, so a damaged file is refused, never indexed
    /// out of bounds).
    pub fn decode(bytes: &[u8]) -> Option<Snapshot> {
        let mut r = Reader(bytes);
        if r.take(MAGIC.len())? != MAGIC {
            return None;
        }
        let flags = r.take(2)?;
        let (truncated, full) = (flags[0] == 1, flags[1] == 1);
        let elapsed = Duration::from_nanos(r.u64()?);
        let n = r.u64()?;
        let mut roots = Vec::new();
        for _ in 0..n {
            let len = r.len()?;
            let path = PathBuf::from(OsStr::from_bytes(r.take(len)?));
            let unreadable = r.take(1)?[0] == 1;
            let len = r.len()?;
            let arena = r.take(len)?.to_vec();
            let count = r.len()?;
            let mut entries = Vec::with_capacity(count.min(r.0.len() / 56));
            for _ in 0..count {
                let e = Entry {
                    key_off: r.u32()?,
                    key_len: r.u32()?,
                    size: r.u64()?,
                    mtime: r.u64()? as i64,
                    ctime: r.u64()? as i64,
                    ino: r.u64()?,
                    aux: r.u64()?,
                    mode: r.u32()?,
                    flags: r.u32()?,
                };
                let within = |off: u64, len: u64| off + len <= arena.len() as u64;
                if !within(e.key_off.into(), e.key_len.into()) {
                    return None;
                }
                if e.format() == libc::S_IFLNK && !within(e.aux >> 32, e.aux & 0xffff_ffff) {
                    return None;
                }
                entries.push(e);
            }
            let mut root = RootSnap::new(&path, arena, entries);
            root.unreadable = unreadable;
            roots.push(root);
        }
        r.0.is_empty().then_some(Snapshot {
            roots,
            elapsed,
            truncated,
            full,
        })
    }
}

/// The bytes of an encoded snapshot not read yet.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    /// A length, at most what is left to read.
    fn len(&mut self) -> Option<usize> {
        usize::try_from(self.u64()?).ok()
    }
}

/// One root of a snapshot, for looking entries up by key (relative path, components separated
/// by NUL).
#[derive(Clone, Copy)]
pub struct Tree<'a>(pub(super) &'a RootSnap);

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
            file_type: e.format(),
            ino: e.ino,
        })
    }

    /// The absolute path of `key`.
    pub fn abs_path(&self, key: &[u8]) -> PathBuf {
        self.0.abs_path(key)
    }
}

/// Seconds and nanoseconds as the one number an [`Entry`] keeps; saturates far beyond any real
/// timestamp instead of wrapping.
pub(super) fn ns(sec: i64, nsec: i64) -> i64 {
    sec.saturating_mul(1_000_000_000).saturating_add(nsec)
}

/// The key of the content hashes (SipHash's two key words): random per process, so that hashes
/// taken by different snapshots of one process compare. A run's journal keeps it (out of the
/// command's reach, as the key must be), so that the jail that finishes a killed run compares
/// its own snapshot with the journalled baseline ([`set_hash_key`]).
static KEY: std::sync::Mutex<Option<(u64, u64)>> = std::sync::Mutex::new(None);

/// The process's hash key, drawn on first use.
pub fn hash_key() -> (u64, u64) {
    let mut key = KEY.lock().unwrap_or_else(|e| e.into_inner());
    *key.get_or_insert_with(|| {
        let random = RandomState::new();
        let word = |n: u64| {
            let mut h = random.build_hasher();
            h.write_u64(n);
            h.finish()
        };
        (word(0), word(1))
    })
}

/// Makes `key` the process's hash key (a journalled run's, while its snapshot is compared);
/// returns the one it replaces.
pub fn set_hash_key(key: (u64, u64)) -> (u64, u64) {
    let old = hash_key();
    *KEY.lock().unwrap_or_else(|e| e.into_inner()) = Some(key);
    old
}

#[allow(deprecated)] // std's SipHasher: the keyed SipHash the key above is for.
fn keyed_hasher() -> std::hash::SipHasher {
    let (k0, k1) = hash_key();
    std::hash::SipHasher::new_with_keys(k0, k1)
}

/// Keyed hash of a regular file's content, if the descriptor is still the inode, size and mtime
/// that were recorded (`expect`), and the file is at most `max` bytes. `buf` is the read buffer.
pub(super) fn hash_file(
    fd: OwnedFd,
    expect: (u64, u64, i64),
    max: u64,
    buf: &mut [u8],
) -> Option<u64> {
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
    let mut h = keyed_hasher();
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

#[cfg(test)]
impl Entry {
    /// An entry of `mode` (type and permission bits) with nothing else set: test data, the
    /// other fields set by name.
    pub(super) fn of(mode: u32, ino: u64) -> Entry {
        Entry {
            key_off: 0,
            key_len: 0,
            size: 0,
            mtime: 0,
            ctime: 0,
            ino,
            aux: 0,
            mode,
            flags: 0,
        }
    }
}

#[cfg(test)]
impl RootSnap {
    /// A root of `path` from (relative path with `/`, entry, symlink target) triples, as the walk
    /// would have recorded them: test data for this module and the comparison.
    pub(super) fn of(path: &str, entries: &[(&str, Entry, &str)]) -> RootSnap {
        let mut arena = Vec::new();
        let mut out = Vec::new();
        for (key, e, target) in entries {
            let mut e = *e;
            e.key_off = arena.len() as u32;
            arena.extend(key.bytes().map(|b| if b == b'/' { 0 } else { b }));
            e.key_len = arena.len() as u32 - e.key_off;
            if e.format() == libc::S_IFLNK {
                e.aux = ((arena.len() as u64) << 32) | target.len() as u64;
                arena.extend_from_slice(target.as_bytes());
            }
            out.push(e);
        }
        RootSnap::new(Path::new(path), arena, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(roots: Vec<RootSnap>) -> Snapshot {
        Snapshot {
            roots,
            elapsed: Duration::ZERO,
            truncated: false,
            full: false,
        }
    }

    const DIR: u32 = libc::S_IFDIR | 0o755;
    const FILE: u32 = libc::S_IFREG | 0o644;

    #[test]
    fn keys_sort_in_path_component_order_and_are_found() {
        let r = RootSnap::of(
            "/w",
            &[
                ("a.txt", Entry::of(FILE, 1), ""),
                ("a-b", Entry::of(FILE, 2), ""),
                ("a/b", Entry::of(FILE, 3), ""),
                ("a", Entry::of(DIR, 4), ""),
                ("", Entry::of(DIR, 5), ""),
            ],
        );
        let order: Vec<PathBuf> = r.entries.iter().map(|e| r.abs_path(r.key(e))).collect();
        let want = ["/w", "/w/a", "/w/a/b", "/w/a-b", "/w/a.txt"];
        assert_eq!(order, want.map(PathBuf::from));
        assert_eq!(r.find(b"a\0b").map(|e| e.ino), Some(3));
        assert!(r.find(b"a/b").is_none(), "a key holds NUL, never /");
        assert_eq!(Tree(&r).get(b"").map(|n| n.ino), Some(5));
    }

    #[test]
    fn a_symlink_target_is_kept_in_the_arena() {
        let r = RootSnap::of("/w", &[("l", Entry::of(libc::S_IFLNK | 0o777, 1), "../t")]);
        assert_eq!(r.link_target(&r.entries[0]), b"../t");
        assert_eq!(r.entries[0].file_type(), FileType::Symlink);
    }

    #[test]
    fn paths_named_finds_every_entry_of_that_name_the_root_included() {
        let s = snapshot(vec![
            RootSnap::of(
                "/w/.git",
                &[
                    ("", Entry::of(DIR, 1), ""),
                    ("HEAD", Entry::of(FILE, 2), ""),
                ],
            ),
            RootSnap::of(
                "/v",
                &[
                    ("", Entry::of(DIR, 3), ""),
                    ("sub", Entry::of(DIR, 4), ""),
                    ("sub/.git", Entry::of(FILE, 5), ""),
                    ("sub/not.git", Entry::of(FILE, 6), ""),
                ],
            ),
        ]);
        let want = ["/w/.git", "/v/sub/.git"].map(PathBuf::from);
        assert_eq!(s.paths_named(".git"), want);
        assert_eq!(s.paths_named("HEAD"), [PathBuf::from("/w/.git/HEAD")]);
    }

    #[test]
    fn an_encoded_snapshot_reads_back_the_same_and_a_damaged_one_is_refused() {
        let mut link = Entry::of(libc::S_IFLNK | 0o777, 3);
        link.mtime = -5;
        let mut locked = Entry::of(DIR, 4);
        locked.flags = UNREADABLE;
        let mut gone = RootSnap::of("/gone", &[]);
        gone.unreadable = true;
        let mut s = snapshot(vec![
            RootSnap::of(
                "/w/b\u{1b}ad",
                &[
                    ("", Entry::of(DIR, 1), ""),
                    ("a.txt", Entry::of(FILE, 2), ""),
                    ("l", link, "../t"),
                    ("locked", locked, ""),
                ],
            ),
            gone,
        ]);
        s.truncated = true;
        let mut bytes = Vec::new();
        s.encode(&mut bytes).unwrap();
        let back = Snapshot::decode(&bytes).unwrap();
        let mut again = Vec::new();
        back.encode(&mut again).unwrap();
        assert_eq!(bytes, again);
        assert!(back.truncated() && !back.full());
        assert_eq!(back.unreadable(), s.unreadable());
        assert_eq!(
            back.roots[0].link_target(&back.roots[0].entries[2]),
            b"../t"
        );
        for cut in [0, 9, bytes.len() / 2, bytes.len() - 1] {
            assert!(Snapshot::decode(&bytes[..cut]).is_none(), "{cut}");
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(Snapshot::decode(&extra).is_none());
    }

    #[test]
    fn unreadable_and_mount_points_come_from_the_flags() {
        let mut locked = Entry::of(DIR, 2);
        locked.flags = UNREADABLE;
        let mut mount = Entry::of(DIR, 3);
        mount.flags = MOUNT;
        let mut gone = RootSnap::of("/gone", &[]);
        gone.unreadable = true;
        let s = snapshot(vec![
            RootSnap::of(
                "/w",
                &[
                    ("", Entry::of(DIR, 1), ""),
                    ("locked", locked, ""),
                    ("m", mount, ""),
                ],
            ),
            gone,
        ]);
        assert_eq!(s.unreadable(), ["/gone", "/w/locked"].map(PathBuf::from));
        assert_eq!(s.mount_points(), [PathBuf::from("/w/m")]);
        assert_eq!(s.entries(), 3);
    }
}
