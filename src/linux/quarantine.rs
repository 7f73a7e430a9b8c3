//! Moving aside a protected name the command created. Runs in the supervisor, outside the jail,
//! after every process of the run is gone, but in directories the command could write: each
//! component is opened with O_NOFOLLOW so that a planted symlink cannot redirect the rename.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

/// Renames `path` aside to `NAME.jail-quarantine-<unpredictable>` (never over anything: the
/// command could have planted names to make a predictable one fail); returns the new path.
pub fn rename_aside(path: &Path) -> nix::Result<PathBuf> {
    let parent = path.parent().ok_or(nix::errno::Errno::EINVAL)?;
    let name = path.file_name().ok_or(nix::errno::Errno::EINVAL)?;
    let dir = open_dir_nofollow(parent)?;
    let mut last = nix::errno::Errno::EEXIST;
    for attempt in 0..16u32 {
        let mut aside = OsString::from(name);
        aside.push(format!(".jail-quarantine-{}", unpredictable(attempt)));
        match nix::fcntl::renameat2(
            dir.as_fd(),
            name,
            dir.as_fd(),
            aside.as_os_str(),
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        ) {
            Ok(()) => return Ok(parent.join(aside)),
            Err(nix::errno::Errno::EEXIST) => last = nix::errno::Errno::EEXIST,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// A suffix the command could not have guessed: time, pid and kernel randomness.
fn unpredictable(attempt: u32) -> String {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom writes at most the length given into the buffer.
    unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    format!("{:016x}{attempt}", u64::from_ne_bytes(bytes))
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
