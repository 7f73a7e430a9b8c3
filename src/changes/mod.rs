//! What a run changed under the writable paths (`--report`, and the search for what was
//! planted): a [`snapshot`] of their metadata before the command starts, another after it ends,
//! and their comparison ([`compare`]).
//!
//! - `walk` records every entry with relative syscalls on directory descriptors (`openat`,
//!   `getdents64`, `statx`/`fstatat` with `AT_SYMLINK_NOFOLLOW`, `readlinkat`): no path is
//!   resolved twice and no symlink is followed, since the command shapes the trees. Other mounts
//!   are recorded but not entered.
//! - `snapshot` is what is kept of each entry: 56 bytes with the paths in one
//!   arena, sorted so that byte order is path-component order. Content is read only for "racy"
//!   regular files, whose timestamps are too recent to prove that an edit in the same clock tick
//!   would show: those get a keyed hash (SipHash with a random per-process key, so content
//!   written inside the sandbox cannot be crafted to collide) within a byte budget.
//! - `compare` merges two snapshots into the list of changes. It is pure: the
//!   one read it may need (a racy file the second snapshot could not hash) and the clock are
//!   passed in from here.
//!
//! Nothing here fails: what cannot be read is recorded as such and reported (`unreadable`,
//! `unverified`, `truncated`), because a report that stopped at the first unreadable directory
//! would say less than one that names it.

mod compare;
mod snapshot;
mod walk;

use std::path::PathBuf;
use std::time::Instant;

pub use compare::{Change, ChangeKind, Changes, MAX_CHANGE_BYTES, MAX_CHANGES, Touched};
pub use snapshot::{FileType, Node, Snapshot, Tree, hash_key, set_hash_key};
pub use walk::Limits;
pub(crate) use walk::chmod_fd;

/// Records every entry under `roots` (absolute paths). A root that does not exist has no entries;
/// one that is not a directory is a single entry. Never fails: what cannot be read is noted.
pub fn snapshot(roots: &[PathBuf], limits: &Limits) -> Snapshot {
    walk::walk(roots, limits)
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
    let start = Instant::now();
    let mut changes = compare::compare(
        before,
        after,
        MAX_CHANGES,
        MAX_CHANGE_BYTES,
        visit,
        &mut walk::rehash,
    );
    changes.compare_ms = start.elapsed().as_secs_f64() * 1e3;
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::{CString, OsStr};
    use std::fs;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
    use std::path::Path;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

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
        assert_eq!(c.changes[0].file_type, FileType::Dir);
        assert_eq!(c.changes[1].file_type, FileType::File);
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
        assert_eq!(c.changes[0].file_type, FileType::File);
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
        assert_eq!(c.changes[0].file_type, FileType::Symlink);
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
        assert_eq!(c.changes[0].file_type, FileType::Dir);
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
    fn names_that_are_not_utf8_serialize_and_read_back_exactly() {
        let t = Tree::new("utf8");
        let name = t.0.join(OsStr::from_bytes(b"bad\xff\x1b[31m"));
        let c = run(&t, || fs::write(&name, "x").unwrap());
        assert_eq!(c.changes.len(), 1);
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains("\"kind\":\"created\""), "{json}");
        let back: Vec<Change> = serde_json::from_value(
            serde_json::from_str::<serde_json::Value>(&json).unwrap()["changes"].clone(),
        )
        .unwrap();
        assert_eq!(back[0].path, name);
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
