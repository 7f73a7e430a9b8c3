//! How the resolver looks at a path it is given: a flag's path checked (absolute, existing, no
//! symlink on the way, not in what jail builds inside), a default rule's path taken where it
//! leads, its kind, and the directory listings that answer for the many profile paths that do
//! not exist.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use super::{Kind, VIEW_OWNED};
use crate::error::JailError;
use crate::paths::absolute;

pub(super) fn refuse_view_owned(flag: &str, path: &Path) -> Result<(), JailError> {
    for owned in VIEW_OWNED {
        if path.starts_with(owned) {
            return Err(JailError::bad_path(
                flag,
                path,
                format!(
                    "{owned} is built by jail inside the sandbox; rules there are not supported"
                ),
            ));
        }
    }
    Ok(())
}

/// Absolute, lexically normalized, existing, and free of symlinks in every component.
pub(super) fn checked_path(flag: &str, raw: &Path, base: &Path) -> Result<PathBuf, JailError> {
    if raw.as_os_str().is_empty() {
        return Err(JailError::bad_path(flag, raw, "empty path"));
    }
    let abs = absolute(base, raw);
    let mut walked = PathBuf::from("/");
    for comp in abs.components().skip(1) {
        walked.push(comp);
        match std::fs::symlink_metadata(&walked) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let real = std::fs::canonicalize(&abs)
                    .map(|p| format!("; name the real path {}", p.display()))
                    .unwrap_or_default();
                return Err(JailError::bad_path(
                    flag,
                    &abs,
                    format!(
                        "goes through a symlink ({} -> {}){real}",
                        walked.display(),
                        std::fs::read_link(&walked).unwrap_or_default().display()
                    ),
                ));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(JailError::bad_path(flag, &abs, "does not exist"));
            }
            Err(e) => return Err(JailError::bad_path(flag, &abs, e.to_string())),
        }
    }
    Ok(abs)
}

/// The path a default rule must act on: itself if it exists, the canonical target if it is a
/// symlink to something that exists, nothing otherwise.
pub(super) fn existing_target(path: &Path, listed: &Listings) -> Option<PathBuf> {
    if listed.surely_absent(path) {
        return None;
    }
    let meta = std::fs::symlink_metadata(path).ok()?;
    if meta.file_type().is_symlink() || has_symlink_parent(path) {
        return std::fs::canonicalize(path).ok();
    }
    Some(path.to_path_buf())
}

/// The names in the directories many of the profile's paths are in, each read once. Most of a
/// profile's paths (the credential stores, histories and browser profiles it hides) do not
/// exist on a given machine, and ~90 of them are in `~` and `~/.config`: one listing of each
/// answers for them instead of one failed `lstat` apiece. A listing costs about as much as ten
/// lookups (ext4 builds its hash-order tree for the first `getdents`), so a directory is read
/// only once it has been asked about [`Listings::LIST_AFTER`] times.
#[derive(Default)]
pub(super) struct Listings(std::cell::RefCell<HashMap<OsString, Listing>>);

enum Listing {
    /// Asked about this many times; not read yet.
    Asked(u32),
    /// Read: its names, or None when a listing cannot answer for it.
    Read(Option<HashSet<OsString>>),
}

impl Listings {
    pub(super) const LIST_AFTER: u32 = 8;

    /// Whether `path` certainly does not exist: its directory was listed (or is itself absent)
    /// and holds no such name. A directory that cannot be listed (search permission without
    /// read), or whose names may match in another case, answers nothing, and the caller looks
    /// the path up as before.
    pub(super) fn surely_absent(&self, path: &Path) -> bool {
        // Only plain absolute paths: `..` or `.` would make the parent a different directory.
        path.is_absolute()
            && path
                .components()
                .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
            && self.plain_surely_absent(path)
    }

    /// [`Listings::surely_absent`] for a path already known to be plain. Keyed by the
    /// directory's bytes: hashing a `PathBuf` walks its components, and this runs for each of
    /// a profile's ~150 paths and their parents at every start.
    fn plain_surely_absent(&self, path: &Path) -> bool {
        use std::os::unix::ffi::OsStrExt;
        self.plain_bytes_absent(path.as_os_str().as_bytes())
    }

    /// The same on the path's bytes: a plain path's directory and name are where its last
    /// slashes are (no component parsing, ~a third of a start's resolution cost before).
    fn plain_bytes_absent(&self, path: &[u8]) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let Some((dir, name)) = split_plain(path) else {
            return false;
        };
        if dir != b"/" && self.plain_bytes_absent(dir) {
            return true;
        }
        let (dir, name) = (
            std::ffi::OsStr::from_bytes(dir),
            std::ffi::OsStr::from_bytes(name),
        );
        let mut cache = self.0.borrow_mut();
        let listing = match cache.get_mut(dir) {
            Some(listing) => listing,
            None => cache.entry(dir.to_owned()).or_insert(Listing::Asked(0)),
        };
        if let Listing::Asked(n) = listing {
            *n += 1;
            if *n < Self::LIST_AFTER {
                return false;
            }
            *listing = Listing::Read(case_exact_names(Path::new(dir)));
        }
        matches!(listing, Listing::Read(Some(names)) if !names.contains(name))
    }
}

/// A plain absolute path's directory and last name, by its bytes: repeated and trailing
/// slashes are no names (as components() reads them). None for the root.
fn split_plain(path: &[u8]) -> Option<(&[u8], &[u8])> {
    let trim = |p: &[u8]| -> usize { p.iter().rposition(|&c| c != b'/').map_or(0, |i| i + 1) };
    let path = &path[..trim(path)];
    let slash = path.iter().rposition(|&c| c == b'/')?;
    let name = &path[slash + 1..];
    let dir = &path[..trim(&path[..slash])];
    Some((if dir.is_empty() { b"/" } else { dir }, name))
}

/// The names in `dir`, when a name missing from them is surely absent: only where lookups are
/// exact byte matches. A case-insensitive directory (vfat, ext4's or tmpfs's casefold, macOS's
/// default APFS) finds `.AWS` for `.aws`, so its listing would let a credential store through.
#[cfg(target_os = "linux")]
pub(super) fn case_exact_names(dir: &Path) -> Option<HashSet<OsString>> {
    use std::os::fd::AsRawFd;
    const EXACT: [nix::sys::statfs::FsType; 4] = [
        nix::sys::statfs::EXT4_SUPER_MAGIC,
        nix::sys::statfs::BTRFS_SUPER_MAGIC,
        nix::sys::statfs::TMPFS_MAGIC,
        nix::sys::statfs::OVERLAYFS_SUPER_MAGIC,
    ];
    const FS_CASEFOLD_FL: libc::c_long = 0x4000_0000;
    use std::os::unix::ffi::OsStrExt;
    // One descriptor for the checks and the listing: the answer is about the directory read.
    let mut listing = nix::dir::Dir::open(
        dir,
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .ok()?;
    let fs = nix::sys::statfs::fstatfs(&listing).ok()?;
    if !EXACT.contains(&fs.filesystem_type()) {
        return None;
    }
    let mut flags: libc::c_long = 0;
    // SAFETY: FS_IOC_GETFLAGS writes one long into `flags`, which we own.
    if unsafe { libc::ioctl(listing.as_raw_fd(), libc::FS_IOC_GETFLAGS, &mut flags) } != 0
        || flags & FS_CASEFOLD_FL != 0
    {
        return None;
    }
    let mut names = HashSet::new();
    for entry in listing.iter() {
        let name = entry.ok()?.file_name().to_bytes().to_vec();
        if name != b"." && name != b".." {
            names.insert(std::ffi::OsStr::from_bytes(&name).to_os_string());
        }
    }
    Some(names)
}

#[cfg(not(target_os = "linux"))]
pub(super) fn case_exact_names(_dir: &Path) -> Option<HashSet<OsString>> {
    None
}

fn has_symlink_parent(path: &Path) -> bool {
    path.ancestors().skip(1).any(|a| {
        std::fs::symlink_metadata(a)
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false)
    })
}

pub(super) fn kind_of(path: &Path) -> Kind {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Kind::Dir,
        _ => Kind::File,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn a_plain_path_splits_where_components_would() {
        assert_eq!(split_plain(b"/"), None);
        for p in ["/a/b/c", "/a", "/a//b/", "//a", "/x/.y/z//", "/a/b.c"] {
            let path = Path::new(p);
            let (d, n) = split_plain(p.as_bytes()).unwrap();
            assert_eq!(
                Path::new(OsStr::from_bytes(d)),
                path.parent().unwrap(),
                "{p}"
            );
            assert_eq!(OsStr::from_bytes(n), path.file_name().unwrap(), "{p}");
        }
    }
}
