//! Moving aside a protected name the command created. Runs in the supervisor, outside the jail,
//! after every process of the run is gone, but in directories the command could write: each
//! component is opened with O_NOFOLLOW so that a planted symlink cannot redirect the rename.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::fcntl::{OFlag, openat, renameat};
use nix::sys::stat::Mode;

/// Renames `path` to `path.jail-quarantine` (or `.jail-quarantine-N` when taken); returns the new
/// path.
pub fn rename_aside(path: &Path) -> nix::Result<PathBuf> {
    let parent = path.parent().ok_or(nix::errno::Errno::EINVAL)?;
    let name = path.file_name().ok_or(nix::errno::Errno::EINVAL)?;
    let dir = open_dir_nofollow(parent)?;
    for n in 0..100 {
        let mut aside = OsString::from(name);
        aside.push(if n == 0 {
            ".jail-quarantine".to_string()
        } else {
            format!(".jail-quarantine-{n}")
        });
        if nix::sys::stat::fstatat(
            dir.as_fd(),
            aside.as_os_str(),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .is_ok()
        {
            continue;
        }
        renameat(dir.as_fd(), name, dir.as_fd(), aside.as_os_str())?;
        return Ok(parent.join(aside));
    }
    Err(nix::errno::Errno::EEXIST)
}

/// Opens an absolute directory path component by component, refusing symlinks anywhere.
fn open_dir_nofollow(path: &Path) -> nix::Result<OwnedFd> {
    let flags = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_PATH;
    let mut dir = nix::fcntl::open("/", flags, Mode::empty())?;
    for comp in path.components() {
        match comp {
            Component::RootDir => {}
            Component::Normal(c) => dir = openat(dir.as_fd(), c, flags, Mode::empty())?,
            _ => return Err(nix::errno::Errno::EINVAL),
        }
    }
    Ok(dir)
}
