//! What a layer holds, read from the layer itself: exact, and O(what the run changed), never a
//! walk of the root.
//!
//! Overlayfs facts behind it (with `userxattr`, as in a user namespace):
//! - A deleted lower entry is a whiteout in the upper directory: a character device 0:0.
//! - A directory removed and made again is *opaque* (`user.overlay.opaque` = `y`): nothing of
//!   the lower directory shows through; the upper one replaces it.
//! - An entry copied up from below carries `user.overlay.origin`; one made by the run does not.
//!   That tells "changed" from "new": a changed file the host has since deleted is a conflict.
//! - Copy-up breaks hard links (each name gets its own copy), and with `userxattr` a directory
//!   that exists below cannot be renamed (EXDEV, no redirects): tools fall back to copy and
//!   delete, which the layer shows as new files and whiteouts.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// One entry of a layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File {
        mode: u32,
    },
    Symlink {
        target: PathBuf,
    },
    Dir {
        mode: u32,
        opaque: bool,
    },
    /// Deleted: nothing at this path after the run.
    Whiteout,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative to the root.
    pub path: PathBuf,
    pub node: Node,
    /// It existed below when the run first changed it.
    pub copied_up: bool,
}

/// The most entries one layer may hold before jail refuses to read it whole.
pub const MAX_ENTRIES: usize = 1_000_000;

/// The entries of an overlay upper directory, parents before children, `.git` at the top left
/// out (the run's commits are offered as a branch instead).
pub fn read_upper(upper: &Path) -> io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = upper.join(&rel);
        let mut names: Vec<_> = fs::read_dir(&dir)?.collect::<Result<Vec<_>, _>>()?;
        names.sort_by_key(|e| e.file_name());
        let mut subdirs = Vec::new();
        for e in names {
            let path = rel.join(e.file_name());
            if path == Path::new(".git") {
                continue;
            }
            let abs = e.path();
            let meta = fs::symlink_metadata(&abs)?;
            let ft = meta.file_type();
            let mode = meta.mode() & 0o7777;
            let node = if ft.is_char_device() && meta.rdev() == 0 {
                Node::Whiteout
            } else if ft.is_dir() {
                subdirs.push(path.clone());
                Node::Dir {
                    mode,
                    opaque: xattr(&abs, "user.overlay.opaque").is_some_and(|v| v == b"y"),
                }
            } else if ft.is_symlink() {
                Node::Symlink {
                    target: fs::read_link(&abs)?,
                }
            } else if ft.is_file() {
                Node::File { mode }
            } else {
                // A fifo, socket or device the run made: nothing a review hands back.
                continue;
            };
            let copied_up =
                !matches!(node, Node::Whiteout) && xattr(&abs, "user.overlay.origin").is_some();
            out.push(Entry {
                path,
                node,
                copied_up,
            });
            if out.len() > MAX_ENTRIES {
                return Err(io::Error::other(format!(
                    "the layer holds more than {MAX_ENTRIES} entries"
                )));
            }
        }
        // Depth-first in name order, so the list comes out parents first.
        stack.extend(subdirs.into_iter().rev());
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Opens a file of a side (the layer's, or the host's) for reading: a regular file only, never
/// through a symlink and never a FIFO. A layer's file is the run's: between the listing and the
/// read, a process of the run still alive could have put a link to a file the run could not
/// read (a hidden one) or a FIFO (which would hang the reviewer) in its place.
pub fn open_regular(path: &Path) -> io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other(format!(
            "{}: not a regular file any more",
            path.display()
        )));
    }
    Ok(file)
}

/// The bytes of a side's file (see [`open_regular`]).
pub fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    io::Read::read_to_end(&mut open_regular(path)?, &mut out)?;
    Ok(out)
}

/// An extended attribute of `path` itself (not a symlink's target), or None.
pub fn xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    let p = CString::new(path.as_os_str().as_bytes()).ok()?;
    let n = CString::new(name).ok()?;
    let mut buf = vec![0u8; 256];
    // SAFETY: both strings are NUL-terminated and live for the call; buf is writable for its
    // length.
    let len =
        unsafe { libc::lgetxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if len < 0 {
        return None;
    }
    buf.truncate(len as usize);
    Some(buf)
}
