//! The copy-based layer, where no overlay can be mounted (no user namespaces: Docker's default
//! seccomp profile, a hardened sysctl, a jail inside a jail that may not mount): the root is
//! copied into the layer directory before the command starts, the command works in the copy,
//! and afterwards the copy is compared with the manifest taken as it was made. The hand-back
//! (diff, apply, conflicts, flags) is the overlay's, fed the same entries.
//!
//! Facts behind it:
//! - `std::fs::copy` uses copy_file_range, which shares extents (a reflink) on filesystems that
//!   can (btrfs, XFS, bcachefs) and copies the bytes elsewhere (ext4): the cost of the start
//!   is the tree's size there, which is why this is the fallback and not the default.
//! - The manifest keeps each copy's inode and change time: any write, chmod or rename-over in
//!   the run changes one of them, and user space can set neither (mtime it can).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::layer::{Entry, MAX_ENTRIES, Node};

/// The manifest's file name in the layer directory.
pub const MANIFEST: &str = "manifest.json";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    File,
    Dir,
    Symlink,
}

/// Each copied entry as it was made: kind, inode, change time.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Manifest {
    /// A list in JSON (a map's keys would have to be UTF-8 strings; names are bytes).
    #[serde(with = "entry_list")]
    entries: BTreeMap<PathBuf, (Kind, u64, i64, i64)>,
    /// Bytes the copy takes on disk (allocated blocks), as made: what the layer's bound
    /// counts the run's additions from. Not kept in the file.
    #[serde(skip)]
    pub disk_usage: u64,
}

mod entry_list {
    use super::*;
    use crate::byte_path::BytePath;
    use serde::{Deserializer, Serializer};

    type Stamp = (Kind, u64, i64, i64);

    pub fn serialize<S: Serializer>(m: &BTreeMap<PathBuf, Stamp>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(m.iter().map(|(p, v)| (BytePath(p.clone()), *v)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<PathBuf, Stamp>, D::Error> {
        let list: Vec<(BytePath, Stamp)> = Vec::deserialize(d)?;
        Ok(list.into_iter().map(|(p, v)| (p.0, v)).collect())
    }
}

fn kind_of(meta: &fs::Metadata) -> Option<Kind> {
    let ft = meta.file_type();
    if ft.is_dir() {
        Some(Kind::Dir)
    } else if ft.is_symlink() {
        Some(Kind::Symlink)
    } else if ft.is_file() {
        Some(Kind::File)
    } else {
        None
    }
}

/// Copies the tree at `root` into the empty directory `to`, and returns its manifest. Other
/// mounts beneath the root are not entered (the launch refuses them first); sockets, fifos and
/// devices are not copied.
pub fn copy_tree(root: &Path, to: &Path) -> io::Result<Manifest> {
    let mut m = Manifest::default();
    let top = fs::metadata(root)?;
    fs::set_permissions(to, fs::Permissions::from_mode(top.mode() & 0o7777))?;
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in fs::read_dir(root.join(&rel))? {
            let e = e?;
            let path = rel.join(e.file_name());
            let (src, dst) = (root.join(&path), to.join(&path));
            let meta = fs::symlink_metadata(&src)?;
            let Some(kind) = kind_of(&meta) else { continue };
            match kind {
                Kind::Dir => {
                    fs::create_dir(&dst)?;
                    stack.push(path.clone());
                }
                Kind::Symlink => std::os::unix::fs::symlink(fs::read_link(&src)?, &dst)?,
                Kind::File => {
                    fs::copy(&src, &dst)?;
                }
            }
            if kind != Kind::Symlink {
                fs::set_permissions(&dst, fs::Permissions::from_mode(meta.mode() & 0o7777))?;
            }
            if m.entries.len() >= MAX_ENTRIES {
                return Err(io::Error::other(format!(
                    "more than {MAX_ENTRIES} entries to copy"
                )));
            }
            m.entries.insert(path, (kind, 0, 0, 0));
        }
    }
    // Stamped once everything is in place (a directory's change time moves as entries are
    // made in it).
    for (path, v) in m.entries.iter_mut() {
        let meta = fs::symlink_metadata(to.join(path))?;
        *v = (v.0, meta.ino(), meta.ctime(), meta.ctime_nsec());
        m.disk_usage += meta.blocks() * 512;
    }
    Ok(m)
}

/// The entries of a copy-based layer: what differs from its manifest, as overlay entries
/// (deletions as whiteouts, a kind changed as a replacement), parents before children, `.git`
/// at the top left out (its commits are offered as a branch).
pub fn read_copy(copy: &Path, manifest: &Manifest) -> io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in fs::read_dir(copy.join(&rel))? {
            let e = e?;
            let path = rel.join(e.file_name());
            if path == Path::new(".git") {
                continue;
            }
            let meta = fs::symlink_metadata(copy.join(&path))?;
            let Some(kind) = kind_of(&meta) else { continue };
            seen.insert(path.clone());
            let was = manifest.entries.get(&path);
            let now = (meta.ino(), meta.ctime(), meta.ctime_nsec());
            let same = was.is_some_and(|w| w.0 == kind && (w.1, w.2, w.3) == now);
            if kind == Kind::Dir {
                stack.push(path.clone());
            }
            // A kept directory's change time moves with every entry made in it: it is listed
            // with its mode (the hand-back acts only on a mode that differs from the host's);
            // one made again (a new inode) replaces the host's, as an opaque one does.
            let node = match kind {
                Kind::Dir => Node::Dir {
                    mode: meta.mode() & 0o7777,
                    opaque: was.is_some_and(|w| w.0 == Kind::Dir && w.1 != meta.ino()),
                },
                _ if same => continue,
                Kind::Symlink => Node::Symlink {
                    target: fs::read_link(copy.join(&path))?,
                },
                Kind::File => Node::File {
                    mode: meta.mode() & 0o7777,
                },
            };
            out.push(Entry {
                path,
                node,
                copied_up: was.is_some(),
            });
        }
    }
    // What the manifest had and the copy has not: deleted (the topmost only; a deleted
    // directory's contents go with it).
    for path in manifest.entries.keys() {
        if seen.contains(path) || path.starts_with(".git") {
            continue;
        }
        let parent_gone = path.ancestors().skip(1).any(|a| {
            !a.as_os_str().is_empty() && !seen.contains(a) && manifest.entries.contains_key(a)
        });
        if !parent_gone {
            out.push(Entry {
                path: path.clone(),
                node: Node::Whiteout,
                copied_up: false,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
