//! Moving aside what the command planted ([`super::planted`]). Runs in the supervisor, outside
//! the jail, after every process of the run is gone, but in directories the command could write
//! and whose modes it could change: each choice below is named for what the command could have
//! done to make the move fail or go elsewhere.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use super::planted::Planted;
use crate::protect::quarantined::MARK;
use crate::text::say;

/// Moves every unit aside and says so; false when one could not be moved, or when the search was
/// incomplete (the run must then fail: something may remain that nothing moved).
pub fn move_aside_all(planted: &Planted, submounts_writable: bool) -> bool {
    let unchecked_mounts = submounts_writable && !planted.not_entered.is_empty();
    let mut all = planted.complete && !unchecked_mounts;
    for unit in &planted.units {
        // Not looked up first: a directory on the way may be unsearchable (that is handled).
        match rename_aside(&unit.path) {
            // Gone since the walk (a unit inside another one already moved).
            Err(Errno::ENOENT) => {}
            Ok(aside) => say(format!(
                "jail: warning: the command created or changed {} ({}); moved it to {} (review it \
                 before putting it back)",
                unit.path.display(),
                unit.why,
                aside.display()
            )),
            Err(e) => {
                all = false;
                let defused = defuse(&unit.path);
                say(format!(
                    "jail: the command created or changed {} ({}) and it could not be moved aside \
                     ({e}){}: do not run git, a shell, an editor or an agent there before \
                     reviewing it",
                    unit.path.display(),
                    unit.why,
                    if defused {
                        "; its permissions were removed (chmod 000)"
                    } else {
                        ""
                    }
                ))
            }
        }
    }
    for hit in &planted.guards {
        match rename_aside(&hit.path) {
            Ok(aside) => {
                let restored = match &hit.restore {
                    Some(bytes) => match restore(&hit.path, bytes) {
                        Ok(()) => "; the version from before the run is back in its place",
                        Err(_) => {
                            all = false;
                            "; the version from before the run could not be put back"
                        }
                    },
                    None => "",
                };
                say(format!(
                    "jail: warning: the command changed {}: {}; moved it to {}{restored}",
                    hit.path.display(),
                    hit.why,
                    aside.display()
                ))
            }
            Err(e) => {
                all = false;
                say(format!(
                    "jail: the command changed {}: {}, and it could not be moved aside ({e}): \
                     do not start the agent before reviewing it",
                    hit.path.display(),
                    hit.why
                ))
            }
        }
    }
    if !planted.complete {
        say(
            "jail: the writable trees hold more than jail could check after the run (too many \
             entries): review them before running git, a shell, an editor or an agent there",
        );
    }
    // With the mount view, other filesystems inside a writable tree are read-only in the jail;
    // without it (Landlock alone) they were writable and were not checked.
    if submounts_writable {
        for m in &planted.not_entered {
            say(format!(
                "jail: {} is another filesystem mounted inside a writable tree; without the \
                 mount view the command could write there and jail did not check it: review it \
                 before running git, a shell or an agent there",
                m.display()
            ));
        }
    }
    all
}

/// Renames `path` aside to `NAME.jail-quarantine-<unpredictable>`, never over anything (the
/// command could have planted names to make a predictable one fail); returns the new path.
pub fn rename_aside(path: &Path) -> nix::Result<PathBuf> {
    let parent = path.parent().ok_or(Errno::EINVAL)?;
    let name = path.file_name().ok_or(Errno::EINVAL)?;
    // The command may have taken the search or write permission from any directory on the way
    // (`chmod 555 .`, `chmod 000 app`). They are ours (it could only chmod what our uid owns):
    // we add what the move needs, and put the modes back after.
    let mut relaxed = Relaxed(Vec::new());
    let dir = open_dir_nofollow(parent, &mut relaxed)?;
    match rename_in(&dir, name) {
        Err(Errno::EACCES) | Err(Errno::EPERM) if relaxed.add(&dir, 0o300) => {
            rename_in(&dir, name).map(|aside| parent.join(aside))
        }
        r => r.map(|aside| parent.join(aside)),
    }
}

/// The rename itself, in `dir`: a name that is too long with the suffix (the command chooses
/// names up to NAME_MAX) gets a short one of its own.
fn rename_in(dir: &OwnedFd, name: &OsStr) -> nix::Result<OsString> {
    let mut last = Errno::EEXIST;
    for attempt in 0..16u32 {
        let mut aside = OsString::from(name);
        aside.push(format!("{MARK}{}", unpredictable(attempt)));
        if aside.len() > 255 {
            aside = OsString::from(format!("{MARK}{}", unpredictable(attempt)));
        }
        match crate::sys::rename_noreplace(dir, name, aside.as_os_str()) {
            Ok(()) => return Ok(aside),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => last = Errno::EEXIST,
            Err(e) => return Err(Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))),
        }
    }
    Err(last)
}

/// Writes `bytes` as a new file at `path` (never over anything, not through a symlink), owner
/// read-write only.
fn restore(path: &Path, bytes: &[u8]) -> nix::Result<()> {
    let parent = path.parent().ok_or(Errno::EINVAL)?;
    let name = path.file_name().ok_or(Errno::EINVAL)?;
    let mut relaxed = Relaxed(Vec::new());
    let dir = open_dir_nofollow(parent, &mut relaxed)?;
    // An O_PATH descriptor serves as the directory of openat (no read permission needed);
    // the parent may have lost its write permission to the command: add it back for this.
    relaxed.add(&dir, 0o300);
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = openat(dir.as_fd(), name, flags, Mode::from_bits_truncate(0o600))?;
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, bytes).map_err(|_| Errno::EIO)
}

/// Where it cannot be moved: takes every permission from it, so that nothing run by the user
/// reads or executes it (root still can; the run fails and names it either way).
fn defuse(path: &Path) -> bool {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return false;
    };
    let mut relaxed = Relaxed(Vec::new());
    let Ok(dir) = open_dir_nofollow(parent, &mut relaxed) else {
        return false;
    };
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let Ok(fd) = openat(dir.as_fd(), name, flags, Mode::empty()) else {
        return false;
    };
    // A symlink has no permissions of its own; chmod through /proc would follow it.
    if nix::sys::stat::fstat(fd.as_fd()).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK)
    {
        return false;
    }
    crate::changes::chmod_fd(&fd, 0).is_ok()
}

/// Directories whose modes were widened, restored when dropped (innermost first).
struct Relaxed(Vec<(OwnedFd, u32)>);

impl Relaxed {
    /// Adds `bits` to the owner's permissions of `dir` if it lacks them; false if nothing
    /// could be added (not ours, or it had them already).
    fn add(&mut self, dir: &OwnedFd, bits: u32) -> bool {
        let Ok(st) = nix::sys::stat::fstat(dir.as_fd()) else {
            return false;
        };
        let mode = st.st_mode & 0o7777;
        if mode & bits == bits || st.st_uid != nix::unistd::geteuid().as_raw() {
            return false;
        }
        let Ok(copy) = dir.try_clone() else {
            return false;
        };
        if crate::changes::chmod_fd(dir, mode | bits).is_err() {
            return false;
        }
        self.0.push((copy, mode));
        true
    }
}

impl Drop for Relaxed {
    fn drop(&mut self) {
        for (fd, mode) in self.0.drain(..).rev() {
            let _ = crate::changes::chmod_fd(&fd, mode);
        }
    }
}

/// A suffix the command could not have guessed: time, pid and kernel randomness.
fn unpredictable(attempt: u32) -> String {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom writes at most the length given into the buffer.
    unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    format!("{:016x}{attempt}", u64::from_ne_bytes(bytes))
}

/// Opens an absolute directory path component by component, refusing symlinks anywhere
/// (a planted symlink must not redirect the rename), as `O_PATH` descriptors: opening one needs
/// search permission on its parent only, which `relaxed` adds where the command took it.
fn open_dir_nofollow(path: &Path, relaxed: &mut Relaxed) -> nix::Result<OwnedFd> {
    let flags = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_PATH;
    let mut dir = nix::fcntl::open("/", flags, Mode::empty())?;
    for comp in path.components() {
        match comp {
            Component::RootDir => {}
            Component::Normal(c) => {
                dir = match openat(dir.as_fd(), c, flags, Mode::empty()) {
                    Err(Errno::EACCES) if relaxed.add(&dir, 0o100) => {
                        openat(dir.as_fd(), c, flags, Mode::empty())?
                    }
                    r => r?,
                }
            }
            _ => return Err(Errno::EINVAL),
        }
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("jail-quar-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_name_too_long_for_the_suffix_gets_a_short_one() {
        let d = scratch("long");
        let long = "x".repeat(250);
        std::fs::write(d.join(&long), "x").unwrap();
        let aside = rename_aside(&d.join(&long)).unwrap();
        assert!(!d.join(&long).exists() && aside.exists());
        assert!(
            aside
                .file_name()
                .unwrap()
                .as_bytes()
                .starts_with(b".jail-quarantine-")
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_unwritable_and_unsearchable_path_is_relaxed_and_restored() {
        let d = scratch("modes");
        std::fs::create_dir_all(d.join("app")).unwrap();
        std::fs::write(d.join("app/.envrc"), "x").unwrap();
        std::fs::set_permissions(d.join("app"), std::fs::Permissions::from_mode(0o555)).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o600)).unwrap();
        let r = rename_aside(&d.join("app/.envrc"));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&d), 0o600, "restored");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(mode(&d.join("app")), 0o555, "restored");
        let aside = r.unwrap();
        assert!(aside.exists() && !d.join("app/.envrc").exists());
        std::fs::set_permissions(d.join("app"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }
}
