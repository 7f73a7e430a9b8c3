//! A layer against the host as it is now: the file-level changes a review shows and an apply
//! makes, each with what would be lost (a conflict) and why a person must look at it (a flag).
//!
//! A conflict is any overlap with the host since the run started: the host's file at a changed
//! path has a change time at or after the start stamp (the user edited it, or another run's
//! apply wrote it), or a file the run changed is gone from the host. Every file a removed
//! directory held on the host is checked the same way, so a file the user added to a directory
//! the run deleted is never lost.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::layer::{Entry, Node};
use crate::protect::protected_at_or_above;

/// One side of a file-level change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    pub kind: SideKind,
    /// Where its content is read (the host's path, or the layer's).
    pub abs: PathBuf,
    pub mode: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SideKind {
    File,
    Symlink(PathBuf),
}

impl SideKind {
    pub fn is_file(&self) -> bool {
        matches!(self, SideKind::File)
    }
}

/// A file (or symlink) whose state after the run differs from the host's now.
#[derive(Debug, Clone)]
pub struct Item {
    pub path: PathBuf,
    /// The host's, when it has one.
    pub old: Option<Side>,
    /// The run's, when it leaves one.
    pub new: Option<Side>,
    pub conflict: Option<String>,
    pub flags: Vec<String>,
}

impl Item {
    pub fn flagged(&self) -> bool {
        !self.flags.is_empty()
    }
}

/// A directory the apply makes or removes. A directory's mode is not handed back: a patch
/// cannot show it (git tracks none), and a run's 0777 is not the reviewer's; a directory is
/// made as mkdir makes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirOp {
    /// The host's directory goes (after the files in it).
    Remove(PathBuf),
    /// A directory the run made (its mode in the layer, for the report).
    Make(PathBuf, u32),
}

impl DirOp {
    pub fn path(&self) -> &Path {
        match self {
            DirOp::Remove(p) | DirOp::Make(p, _) => p,
        }
    }
}

/// Whether a file mode is git's executable one (git looks at the owner's execute bit).
pub fn executable(mode: u32) -> bool {
    mode & 0o100 != 0
}

/// Why a new directory must be looked at before it reaches the host: a protected name.
pub fn dir_flags(path: &Path) -> Vec<String> {
    protected_at_or_above(path)
        .map(|p| vec![format!("protected name {} ({})", p.pattern, p.why)])
        .unwrap_or_default()
}

#[derive(Debug, Clone, Default)]
pub struct ChangeSet {
    /// By path.
    pub items: Vec<Item>,
    pub dirs: Vec<DirOp>,
    /// Directories the run made or changed that conflict (their host side deleted).
    pub dir_conflicts: Vec<(PathBuf, String)>,
}

/// What a review counts, for the end-of-run line and `jail runs`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub changed: usize,
    pub flagged: usize,
    pub conflicts: usize,
}

impl ChangeSet {
    pub fn counts(&self) -> Counts {
        Counts {
            changed: self.items.len(),
            flagged: self.items.iter().filter(|i| i.flagged()).count(),
            conflicts: self.items.iter().filter(|i| i.conflict.is_some()).count()
                + self.dir_conflicts.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty() && self.dirs.is_empty()
    }
}

/// The host's state of a path, without following a symlink.
fn host_side(abs: &Path) -> Option<(Side, fs::Metadata)> {
    let meta = fs::symlink_metadata(abs).ok()?;
    let ft = meta.file_type();
    let kind = if ft.is_symlink() {
        SideKind::Symlink(fs::read_link(abs).ok()?)
    } else if ft.is_file() {
        SideKind::File
    } else {
        return None;
    };
    Some((
        Side {
            kind,
            abs: abs.to_path_buf(),
            mode: meta.mode() & 0o7777,
        },
        meta,
    ))
}

/// What counts as a change on the host since the run started.
#[derive(Debug, Clone, Default)]
pub struct Since {
    /// The start stamp (change time, seconds and nanoseconds).
    pub start: (i64, i64),
    /// Paths jail itself changed since (a part applied, an interrupted apply rolled back), with
    /// the inode and change time they had then: unchanged since, they are not the user's.
    pub own: BTreeMap<PathBuf, (u64, i64, i64)>,
}

impl Since {
    pub fn changed(&self, abs: &Path, meta: &fs::Metadata) -> bool {
        let now = (meta.ino(), meta.ctime(), meta.ctime_nsec());
        (meta.ctime(), meta.ctime_nsec()) >= self.start && self.own.get(abs) != Some(&now)
    }
}

/// The change set of `entries` (read from the layer at `layer_root`) against the host `root`.
pub fn compute(
    entries: &[Entry],
    root: &Path,
    layer_root: &Path,
    since: &Since,
) -> io::Result<ChangeSet> {
    let mut items: BTreeMap<PathBuf, Item> = BTreeMap::new();
    let mut set = ChangeSet::default();
    let mut removed_dirs = Vec::new();
    for e in entries {
        let host = root.join(&e.path);
        let host_meta = fs::symlink_metadata(&host).ok();
        let host_is_dir = host_meta.as_ref().is_some_and(|m| m.is_dir());
        // What the host has here goes when the run removed it or put something else there.
        let replaces_host = match &e.node {
            Node::Whiteout => true,
            Node::Dir { opaque, .. } => *opaque || (host_meta.is_some() && !host_is_dir),
            Node::File { .. } | Node::Symlink { .. } => host_is_dir,
        };
        if matches!(e.node, Node::Dir { .. })
            && e.copied_up
            && host_meta.is_none()
            && deleted_on_host(root, &e.path, since)
        {
            set.dir_conflicts.push((
                e.path.clone(),
                "deleted on the host since the run started".into(),
            ));
        }
        if replaces_host && host_meta.is_some() {
            replaced_host_side(
                &mut items,
                &mut removed_dirs,
                root,
                &e.path,
                host_is_dir,
                since,
            )?;
        }
        match &e.node {
            Node::Whiteout => {}
            Node::Dir { mode, .. } => {
                if replaces_host || host_meta.is_none() {
                    set.dirs.push(DirOp::Make(e.path.clone(), *mode));
                }
            }
            Node::File { .. } | Node::Symlink { .. } => {
                let abs = layer_root.join(&e.path);
                let kind = match &e.node {
                    Node::Symlink { target } => SideKind::Symlink(target.clone()),
                    _ => SideKind::File,
                };
                let mode = match &e.node {
                    Node::File { mode } => *mode,
                    _ => 0o777,
                };
                let it = items
                    .entry(e.path.clone())
                    .or_insert_with(|| new_item(&e.path));
                if !host_is_dir {
                    if let Some((side, meta)) = host_side(&host) {
                        if since.changed(&host, &meta) {
                            it.conflict = Some("changed on the host since the run started".into());
                        }
                        it.old = Some(side);
                    } else if e.copied_up && deleted_on_host(root, &e.path, since) {
                        it.conflict = Some("deleted on the host since the run started".into());
                    }
                }
                it.new = Some(Side { kind, abs, mode });
            }
        }
    }
    // Most removed directories deepest first, after their files.
    removed_dirs.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    set.dirs
        .splice(0..0, removed_dirs.into_iter().map(DirOp::Remove));
    // A file the run changed that equals the host's now: nothing to do, nothing to lose.
    // The flags are the judge's ([`super::judge`]), set by the caller.
    set.items = items.into_values().filter(|i| !same(i)).collect();
    set.dir_conflicts
        .retain(|(p, _)| !set.items.iter().any(|i| &i.path == p));
    Ok(set)
}

/// An item with neither side yet.
fn new_item(path: &Path) -> Item {
    Item {
        path: path.to_path_buf(),
        old: None,
        new: None,
        conflict: None,
        flags: Vec::new(),
    }
}

/// What the host has at `rel_path`, which the run removed or replaced: its files become the
/// old sides of their items (a conflict where the host changed them since the start), and a
/// directory is removed after them. `host_is_dir` is what the caller saw there.
fn replaced_host_side(
    items: &mut BTreeMap<PathBuf, Item>,
    removed_dirs: &mut Vec<PathBuf>,
    root: &Path,
    rel_path: &Path,
    host_is_dir: bool,
    since: &Since,
) -> io::Result<()> {
    let host = root.join(rel_path);
    if host_is_dir {
        for (rel, side, meta) in host_files(root, rel_path)? {
            let it = items.entry(rel.clone()).or_insert_with(|| new_item(&rel));
            if since.changed(&root.join(&rel), &meta) {
                it.conflict = Some("changed on the host since the run started".into());
            }
            it.old = Some(side);
        }
        removed_dirs.push(rel_path.to_path_buf());
    } else if let Some((side, meta)) = host_side(&host) {
        let it = items
            .entry(rel_path.to_path_buf())
            .or_insert_with(|| new_item(rel_path));
        if since.changed(&host, &meta) {
            it.conflict = Some("changed on the host since the run started".into());
        }
        it.old = Some(side);
    }
    Ok(())
}

/// Whether the host deleted `rel` since the start, for an entry the run copied up from below
/// that the host no longer has. The origin mark says only that the entry came from below, not
/// from where (a file renamed in the run has it too; `userxattr` records no lower handle), so
/// the evidence is the host's nearest remaining directory: a deletion changed it after the
/// start. Another change there counts too (refused, never missed).
fn deleted_on_host(root: &Path, rel: &Path, since: &Since) -> bool {
    let mut dir = rel.parent();
    while let Some(d) = dir {
        if let Ok(meta) = fs::symlink_metadata(root.join(d)) {
            return !meta.is_dir() || since.changed(&root.join(d), &meta);
        }
        dir = d.parent();
    }
    true
}

/// Whether both sides are the same as a patch shows them (content, kind, git's file mode): no
/// change. Other mode bits are not handed back (see the apply's modes).
fn same(it: &Item) -> bool {
    let (Some(a), Some(b)) = (&it.old, &it.new) else {
        return it.old.is_none() && it.new.is_none();
    };
    if a.kind != b.kind {
        return false;
    }
    match a.kind {
        SideKind::Symlink(_) => true,
        SideKind::File => executable(a.mode) == executable(b.mode) && same_content(&a.abs, &b.abs),
    }
}

fn same_content(a: &Path, b: &Path) -> bool {
    let (Ok(ma), Ok(mb)) = (fs::symlink_metadata(a), fs::symlink_metadata(b)) else {
        return false;
    };
    ma.len() == mb.len()
        && matches!(
            (super::layer::read_regular(a), super::layer::read_regular(b)),
            (Ok(x), Ok(y)) if x == y
        )
}

/// Every file and symlink beneath the host directory `rel` (relative paths, host sides).
fn host_files(root: &Path, rel: &Path) -> io::Result<Vec<(PathBuf, Side, fs::Metadata)>> {
    let mut out = Vec::new();
    let mut stack = vec![rel.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match fs::read_dir(root.join(&dir)) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for e in entries.flatten() {
            let p = dir.join(e.file_name());
            let abs = root.join(&p);
            if e.file_type()?.is_dir() {
                stack.push(p);
            } else if let Some((side, meta)) = host_side(&abs) {
                out.push((p, side, meta));
            }
        }
    }
    Ok(out)
}
