//! Comparing two snapshots into the list of changes: pure, no syscalls and no file access, so
//! every rule below is unit-tested on snapshots made of data.
//!
//! - The entries of each root are merged as two sorted lists (keys sort in path-component
//!   order, see [`super::snapshot`]): an entry on one side only was created or deleted, one on
//!   both sides is compared field by field.
//! - A file changed when its inode (renamed over), size or mtime did. With all three the same,
//!   a racy file is judged by its content hash; a ctime that moved alone is an edit hidden by
//!   restoring the mtime (`touch -d`), an xattr, a new hard link or owner, reported as such.
//!   When the second snapshot could not hash a file the first one hashed, the caller's
//!   `hash_now` reads it: the one place content is read at compare time, passed in so that
//!   this module stays pure.
//! - A directory changed only when it was replaced, its mode changed, or it could not be listed
//!   and its times moved: a changed mtime, ctime or size of a listed one only means entries were
//!   added or removed, and those are reported one by one.
//! - An entry only one side has is a change only if the other side could have seen it: its
//!   nearest recorded ancestor there was listed. Below an unreadable directory it is reported
//!   with a note that it may have existed (or may still exist); below one a limit kept from
//!   being listed, nothing is said and the result is marked truncated.
//! - The command chooses the names, so the list is bounded in count ([`MAX_CHANGES`]) and in
//!   bytes ([`MAX_CHANGE_BYTES`]); a visitor sees every change before those bounds apply (what
//!   was planted must be found even when the list is full).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::snapshot::{
    Entry, FileType, HASHED, LISTED, MOUNT, RootSnap, Snapshot, Tree, UNREADABLE, UNVERIFIED,
};

/// At most this many changes are listed; beyond that [`Changes::truncated`] is set.
pub const MAX_CHANGES: usize = 100_000;

/// At most this many bytes of paths and details are listed: the command chooses the names, and
/// 100,000 paths of 30 KB each would take gigabytes of memory and report.
pub const MAX_CHANGE_BYTES: usize = 32 << 20;

/// What happened to one path.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Created,
    Modified,
    Deleted,
    ModeChanged,
}

/// One changed path, as the run report lists it (and a library caller reads it back).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Change {
    /// The writable path it is under.
    #[serde(with = "crate::byte_path")]
    pub root: PathBuf,
    /// Absolute.
    #[serde(with = "crate::byte_path")]
    pub path: PathBuf,
    pub kind: ChangeKind,
    /// The type after the run, before it for a deletion.
    pub file_type: FileType,
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
    #[serde(with = "crate::byte_path::vec")]
    pub unreadable: Vec<PathBuf>,
    /// Racy files that were not hashed (size or budget) and whose metadata did not change:
    /// their content may have changed without it showing.
    #[serde(with = "crate::byte_path::vec")]
    pub unverified: Vec<PathBuf>,
    /// Mount points under the roots, not entered.
    #[serde(with = "crate::byte_path::vec")]
    pub mount_points: Vec<PathBuf>,
    pub entries_before: usize,
    pub entries_after: usize,
    pub baseline_ms: f64,
    pub after_ms: f64,
    pub compare_ms: f64,
}

/// One change, as [`super::compare_with`]'s visitor sees it.
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
    /// The content hash of the file at a path now, if it is still the given entry.
    hash_now: &'a mut dyn FnMut(&Path, &Entry) -> Option<u64>,
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
        if b.format() != a.format() {
            let detail = format!("{} -> {}", b.file_type(), a.file_type());
            return self.add(key, ChangeKind::Modified, a, Some(detail));
        }
        match a.file_type() {
            FileType::Symlink => {
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
            FileType::File => self.file(key, b, a, mode_note),
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
                    (self.hash_now)(&self.after.abs_path(key), a)
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

/// What changed between two snapshots of the same roots, listing at most `cap` changes and
/// `byte_cap` bytes of paths and details; `visit` sees every change first, in key order within
/// each root. `hash_now` hashes a file on disk at compare time (see the module doc).
/// `compare_ms` is left 0: how long this took is the caller's to measure.
pub(super) fn compare(
    before: &Snapshot,
    after: &Snapshot,
    cap: usize,
    byte_cap: usize,
    visit: &mut dyn FnMut(&Touched<'_>),
    hash_now: &mut dyn FnMut(&Path, &Entry) -> Option<u64>,
) -> Changes {
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
            hash_now: &mut *hash_now,
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
        compare_ms: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::time::Duration;

    use ChangeKind::*;

    const FILE: u32 = libc::S_IFREG | 0o644;
    const DIR: u32 = libc::S_IFDIR | 0o755;

    /// A regular file as a walk records it: ctime as mtime, not racy.
    fn file(ino: u64, size: u64, mtime: i64) -> Entry {
        Entry {
            size,
            mtime,
            ctime: mtime,
            ..Entry::of(FILE, ino)
        }
    }

    fn hashed(e: Entry, hash: u64) -> Entry {
        Entry {
            aux: hash,
            flags: HASHED,
            ..e
        }
    }

    /// A directory that was listed whole.
    fn dir(ino: u64) -> Entry {
        Entry {
            flags: LISTED,
            ..Entry::of(DIR, ino)
        }
    }

    /// `e` with permission bits `perms`.
    fn chmod(e: Entry, perms: u32) -> Entry {
        Entry {
            mode: e.format() | perms,
            ..e
        }
    }

    fn link(ino: u64) -> Entry {
        Entry::of(libc::S_IFLNK | 0o777, ino)
    }

    fn snap(roots: Vec<RootSnap>) -> Snapshot {
        Snapshot {
            roots,
            elapsed: Duration::ZERO,
            truncated: false,
            full: false,
        }
    }

    /// One root, `/w`, a listed directory, holding `entries`.
    fn tree(entries: &[(&str, Entry, &str)]) -> Snapshot {
        let mut all = vec![("", dir(1), "")];
        all.extend_from_slice(entries);
        snap(vec![RootSnap::of("/w", &all)])
    }

    /// The comparison with its usual bounds, where nothing may be read at compare time.
    fn changes(before: &Snapshot, after: &Snapshot) -> Changes {
        compare(
            before,
            after,
            MAX_CHANGES,
            MAX_CHANGE_BYTES,
            &mut |_| {},
            &mut |p, _| panic!("{} read at compare time", p.display()),
        )
    }

    /// (path, kind, detail) of every change.
    fn list(c: &Changes) -> Vec<(String, ChangeKind, String)> {
        c.changes
            .iter()
            .map(|ch| {
                (
                    ch.path.display().to_string(),
                    ch.kind,
                    ch.detail.clone().unwrap_or_default(),
                )
            })
            .collect()
    }

    fn change(path: &str, kind: ChangeKind, detail: &str) -> (String, ChangeKind, String) {
        (path.into(), kind, detail.into())
    }

    #[test]
    fn a_directory_whose_times_and_size_moved_is_no_change_of_its_own() {
        let before = tree(&[("d", dir(2), ""), ("d/f", file(3, 1, 10), "")]);
        let busy = Entry {
            size: 4096,
            mtime: 99,
            ctime: 99,
            ..dir(2)
        };
        let after = tree(&[("d", busy, ""), ("d/f", file(3, 1, 10), "")]);
        let c = changes(&before, &after);
        assert_eq!(list(&c), []);
        assert!(!c.truncated);
        assert_eq!((c.entries_before, c.entries_after), (3, 3));
    }

    #[test]
    fn entries_on_one_side_only_are_created_or_deleted_with_their_type() {
        let before = tree(&[("gone", file(2, 1, 10), "")]);
        let after = tree(&[
            ("l", link(3), "gone"),
            ("new", dir(4), ""),
            ("new/f", file(5, 1, 10), ""),
        ]);
        let c = changes(&before, &after);
        assert_eq!(
            list(&c),
            [
                change("/w/gone", Deleted, ""),
                change("/w/l", Created, ""),
                change("/w/new", Created, ""),
                change("/w/new/f", Created, ""),
            ]
        );
        let types: Vec<FileType> = c.changes.iter().map(|ch| ch.file_type).collect();
        use FileType::*;
        assert_eq!(types, [File, Symlink, Dir, File]);
        assert!(c.changes.iter().all(|ch| ch.root == Path::new("/w")));
    }

    #[test]
    fn a_file_changes_by_inode_size_or_mtime_and_says_its_mode_too() {
        let before = tree(&[
            ("a", file(2, 10, 10), ""),
            ("b", file(3, 10, 10), ""),
            ("c", file(4, 10, 10), ""),
            ("d", file(5, 10, 10), ""),
            ("e", file(6, 10, 10), ""),
        ]);
        let after = tree(&[
            ("a", file(2, 14, 20), ""),
            ("b", file(9, 10, 10), ""),
            ("c", file(4, 10, 20), ""),
            ("d", chmod(file(5, 11, 20), 0o755), ""),
            ("e", chmod(file(6, 10, 10), 0o600), ""),
        ]);
        assert_eq!(
            list(&changes(&before, &after)),
            [
                change("/w/a", Modified, "size 10 -> 14"),
                change("/w/b", Modified, "replaced (new inode)"),
                change("/w/c", Modified, "mtime changed"),
                change("/w/d", Modified, "size 10 -> 11, mode 0644 -> 0755"),
                change("/w/e", ModeChanged, "mode 0644 -> 0600"),
            ]
        );
    }

    #[test]
    fn with_the_same_metadata_a_racy_file_is_judged_by_its_hash() {
        let f = file(2, 5, 10);
        let before = tree(&[("same", hashed(f, 7), ""), ("edited", hashed(f, 7), "")]);
        let after = tree(&[("same", hashed(f, 7), ""), ("edited", hashed(f, 8), "")]);
        assert_eq!(
            list(&changes(&before, &after)),
            [change(
                "/w/edited",
                Modified,
                "content changed (same size and mtime)"
            )]
        );
    }

    /// The second snapshot's budget was spent before it reached the file: the comparison asks
    /// for the hash of the file as it is now, and only then.
    #[test]
    fn a_racy_file_the_second_snapshot_did_not_hash_is_hashed_at_compare_time() {
        let f = file(2, 5, 10);
        let before = tree(&[("f", hashed(f, 7), "")]);
        let after = tree(&[(
            "f",
            Entry {
                flags: UNVERIFIED,
                ..f
            },
            "",
        )]);
        for (now, want) in [
            (Some(7), vec![]),
            (
                Some(8),
                vec![change(
                    "/w/f",
                    Modified,
                    "content changed (same size and mtime)",
                )],
            ),
            (None, vec![]),
        ] {
            let calls = Cell::new(0);
            let c = compare(&before, &after, 10, 1 << 20, &mut |_| {}, &mut |p, e| {
                assert_eq!((p, e.ino), (Path::new("/w/f"), 2));
                calls.set(calls.get() + 1);
                now
            });
            assert_eq!(calls.get(), 1);
            assert_eq!(list(&c), want);
            // Not readable now (or no longer the same file): its content is not known.
            let unverified = if now.is_none() {
                vec![PathBuf::from("/w/f")]
            } else {
                vec![]
            };
            assert_eq!(c.unverified, unverified);
        }
    }

    #[test]
    fn a_ctime_that_moved_alone_is_a_change_the_hash_can_clear() {
        let f = file(2, 5, 10);
        let touched = Entry { ctime: 20, ..f };
        let before = tree(&[
            ("plain", f, ""),
            ("racy", hashed(f, 7), ""),
            ("chmod", f, ""),
        ]);
        let after = tree(&[
            ("plain", touched, ""),
            ("racy", hashed(touched, 7), ""),
            ("chmod", chmod(touched, 0o755), ""),
        ]);
        assert_eq!(
            list(&changes(&before, &after)),
            [
                // A chmod moves the ctime itself: the mode says it all.
                change("/w/chmod", ModeChanged, "mode 0644 -> 0755"),
                change("/w/plain", Modified, "ctime changed, content may differ"),
                change("/w/racy", Modified, "ctime changed, content unchanged"),
            ]
        );
    }

    #[test]
    fn a_racy_file_not_hashed_is_unverified_unless_its_metadata_shows_the_change() {
        let f = Entry {
            flags: UNVERIFIED,
            ..file(2, 5, 10)
        };
        let before = tree(&[("kept", f, ""), ("grown", f, "")]);
        let after = tree(&[("kept", f, ""), ("grown", Entry { size: 6, ..f }, "")]);
        let c = changes(&before, &after);
        assert_eq!(list(&c), [change("/w/grown", Modified, "size 5 -> 6")]);
        assert_eq!(c.unverified, [PathBuf::from("/w/kept")]);
    }

    #[test]
    fn a_symlink_changes_by_target_and_any_entry_by_type() {
        let fifo = Entry::of(libc::S_IFIFO | 0o644, 5);
        let socket = Entry::of(libc::S_IFSOCK | 0o644, 5);
        let before = tree(&[
            ("l", link(2), "a"),
            ("m", link(3), "same"),
            ("p", fifo, ""),
            ("x", file(4, 1, 10), ""),
        ]);
        let after = tree(&[
            ("l", link(2), "b"),
            ("m", link(9), "same"),
            ("p", socket, ""),
            ("x", link(4), "t"),
        ]);
        let c = changes(&before, &after);
        assert_eq!(
            list(&c),
            [
                change("/w/l", Modified, "target a -> b"),
                // Both "other", yet not the same type.
                change("/w/p", Modified, "other -> other"),
                change("/w/x", Modified, "file -> symlink"),
            ]
        );
        assert_eq!(c.changes[2].file_type, FileType::Symlink);
    }

    #[test]
    fn a_directory_changes_when_replaced_chmodded_or_unreadable_with_moved_times() {
        let locked = Entry {
            flags: UNREADABLE,
            ..Entry::of(DIR, 4)
        };
        let before = tree(&[("m", dir(2), ""), ("r", dir(3), ""), ("u", locked, "")]);
        let after = tree(&[
            ("m", chmod(dir(2), 0o700), ""),
            ("r", chmod(dir(9), 0o700), ""),
            ("u", Entry { mtime: 5, ..locked }, ""),
        ]);
        let c = changes(&before, &after);
        assert_eq!(
            list(&c),
            [
                change("/w/m", ModeChanged, "mode 0755 -> 0700"),
                change("/w/r", Modified, "replaced (new inode), mode 0755 -> 0700"),
                change(
                    "/w/u",
                    Modified,
                    "unreadable directory changed: its entries are unknown"
                ),
            ]
        );
        assert_eq!(c.unreadable, [PathBuf::from("/w/u")]);
    }

    #[test]
    fn below_an_unreadable_directory_an_entry_may_have_been_there_all_along() {
        let locked = Entry {
            flags: UNREADABLE,
            ..Entry::of(DIR, 2)
        };
        let closed = tree(&[("locked", locked, "")]);
        let open = tree(&[
            ("locked", dir(2), ""),
            ("locked/secret", file(3, 1, 10), ""),
        ]);
        assert_eq!(
            list(&changes(&closed, &open)),
            [change(
                "/w/locked/secret",
                Created,
                "a directory above was not readable before the run: may have existed"
            )]
        );
        assert_eq!(
            list(&changes(&open, &closed)),
            [change(
                "/w/locked/secret",
                Deleted,
                "a directory above was not readable after the run: may still exist"
            )]
        );
        // The root itself could not be examined before.
        let mut root = RootSnap::of("/w", &[]);
        root.unreadable = true;
        let c = changes(&snap(vec![root]), &open);
        assert_eq!(c.changes.len(), 3);
        assert!(c.changes.iter().all(|ch| {
            ch.kind == Created
                && ch
                    .detail
                    .as_deref()
                    .is_some_and(|d| d.contains("may have existed"))
        }));
    }

    #[test]
    fn below_a_directory_a_limit_left_unlisted_nothing_is_said_and_the_result_is_truncated() {
        let deep = Entry::of(DIR, 2);
        let before = tree(&[("deep", deep, "")]);
        let after = tree(&[("deep", dir(2), ""), ("deep/x", file(3, 1, 10), "")]);
        let mut seen = 0;
        let c = compare(
            &before,
            &after,
            10,
            1 << 20,
            &mut |_| seen += 1,
            &mut |_, _| None,
        );
        assert_eq!((list(&c), c.truncated, seen), (vec![], true, 0));
        let mut limited = tree(&[]);
        limited.truncated = true;
        assert!(changes(&limited, &tree(&[])).truncated);
    }

    #[test]
    fn the_list_is_bounded_by_count_and_bytes_and_the_visitor_sees_every_change() {
        let long = "L".repeat(200);
        let names: Vec<String> = (0..10).map(|i| format!("{long}{i}")).collect();
        let entries: Vec<(&str, Entry, &str)> = names
            .iter()
            .zip(2..)
            .map(|(n, ino)| (n.as_str(), file(ino, 1, 10), ""))
            .collect();
        let (before, after) = (tree(&[]), tree(&entries));
        let per_change = "/w".len() + names[0].len();
        for (cap, byte_cap, listed) in [
            (100, 1 << 20, 10),
            (4, 1 << 20, 4),
            (100, per_change * 3, 3),
        ] {
            let mut seen = Vec::new();
            let c = compare(
                &before,
                &after,
                cap,
                byte_cap,
                &mut |t| seen.push(t.after.abs_path(t.key)),
                &mut |_, _| None,
            );
            assert_eq!(c.changes.len(), listed);
            assert_eq!(c.truncated, listed < 10);
            assert_eq!(seen.len(), 10, "every change, whatever the list's bounds");
        }
    }

    #[test]
    fn the_visitor_is_told_which_new_directories_were_not_listed() {
        let unlisted = Entry::of(DIR, 2);
        let mount = Entry {
            flags: MOUNT,
            ..Entry::of(DIR, 3)
        };
        let after = tree(&[("m", mount, ""), ("u", unlisted, ""), ("v", dir(4), "")]);
        let mut seen = Vec::new();
        compare(
            &tree(&[]),
            &after,
            10,
            1 << 20,
            &mut |t| seen.push((t.key.to_vec(), t.kind, t.is_dir, t.unlisted)),
            &mut |_, _| None,
        );
        assert_eq!(
            seen,
            [
                (b"m".to_vec(), Created, true, false),
                (b"u".to_vec(), Created, true, true),
                (b"v".to_vec(), Created, true, false),
            ]
        );
    }

    #[test]
    fn nested_roots_list_a_path_once_and_a_new_root_is_all_created() {
        let outer = |extra: &[(&str, Entry, &str)]| {
            let mut all = vec![("", dir(1), ""), ("sub", dir(2), "")];
            all.extend_from_slice(extra);
            RootSnap::of("/w", &all)
        };
        let inner = |extra: &[(&str, Entry, &str)]| {
            let mut all = vec![("", dir(2), "")];
            all.extend_from_slice(extra);
            RootSnap::of("/w/sub", &all)
        };
        let g = file(3, 1, 10);
        let before = snap(vec![outer(&[]), inner(&[])]);
        let after = snap(vec![
            outer(&[("sub/g", g, "")]),
            inner(&[("g", g, "")]),
            RootSnap::of("/x", &[("", dir(5), ""), ("f", file(6, 1, 10), "")]),
        ]);
        let c = changes(&before, &after);
        assert_eq!(
            list(&c),
            [
                change("/w/sub/g", Created, ""),
                change("/x", Created, ""),
                change("/x/f", Created, ""),
            ]
        );
        assert_eq!(c.changes[1].root, Path::new("/x"));
    }

    #[test]
    fn unreadable_and_mount_points_of_both_snapshots_are_merged() {
        let flagged = |flags, ino| Entry {
            flags,
            ..Entry::of(DIR, ino)
        };
        let before = tree(&[
            ("a", flagged(UNREADABLE, 2), ""),
            ("m", flagged(MOUNT, 3), ""),
        ]);
        let after = tree(&[
            ("a", flagged(UNREADABLE, 2), ""),
            ("b", flagged(UNREADABLE, 4), ""),
            ("m", flagged(MOUNT, 3), ""),
        ]);
        let c = changes(&before, &after);
        assert_eq!(c.unreadable, ["/w/a", "/w/b"].map(PathBuf::from));
        assert_eq!(c.mount_points, [PathBuf::from("/w/m")]);
    }

    /// The report's JSON, byte for byte as before `file_type` was an enum, reads back.
    #[test]
    fn a_change_reads_back_from_the_report_json() {
        let ch = Change {
            root: "/w".into(),
            path: "/w/l".into(),
            kind: ModeChanged,
            file_type: FileType::Symlink,
            detail: Some("mode 0644 -> 0755".into()),
        };
        let json = serde_json::to_string(&ch).unwrap();
        assert_eq!(
            json,
            r#"{"root":"/w","path":"/w/l","kind":"mode_changed","file_type":"symlink","detail":"mode 0644 -> 0755"}"#
        );
        assert_eq!(serde_json::from_str::<Change>(&json).unwrap(), ch);
        // A detail names types as the JSON does ("file -> symlink").
        for t in [
            FileType::File,
            FileType::Dir,
            FileType::Symlink,
            FileType::Other,
        ] {
            assert_eq!(serde_json::to_string(&t).unwrap(), format!("\"{t}\""));
        }
    }

    #[test]
    fn times_come_from_the_snapshots_and_the_comparison_leaves_its_own_to_the_caller() {
        let mut before = tree(&[]);
        before.elapsed = Duration::from_millis(5);
        let mut after = tree(&[]);
        after.elapsed = Duration::from_millis(7);
        let c = changes(&before, &after);
        assert_eq!((c.baseline_ms, c.after_ms, c.compare_ms), (5.0, 7.0, 0.0));
    }
}
