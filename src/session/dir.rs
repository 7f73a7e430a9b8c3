//! Where sessions live: one directory per user, 0700, outside every view (each run hides it, as
//! it hides jail's stores), holding per session its control socket (`NAME.sock`), its
//! description (`NAME.json`) and, once it has ended, its outcome (`NAME.end.json`).
//!
//! The directory is the first of `$XDG_RUNTIME_DIR/jail-sessions`, `/run/user/UID/jail-sessions`
//! (where that runtime directory exists) and `sessions` in jail's state directory (hidden from
//! every run with the rest of it). Never a shared directory such as /tmp: another user could
//! make the name first, and a jail given the host's /tmp could replace a socket in it. Whatever is
//! there must be a directory of this user's, mode 0700, not a link. Every run makes it before its
//! view is built, so that no jail ever starts with the place visible and free to take.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::error::JailError;

/// A session's name: 1 to 64 of `A-Z a-z 0-9 _ -`, not starting with `-` (a file name in the
/// directory, a word in a command line). No `.`: a session's files are its name and a suffix
/// (`NAME.sock`, `NAME.end.json`), and one name must never be another's file.
pub fn check_name(name: &str) -> Result<(), JailError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-".contains(c));
    if ok {
        return Ok(());
    }
    Err(JailError::bad_flag(
        "--name",
        name,
        format!(
            "session name '{}': use 1 to 64 letters, digits, '_' or '-', not starting with '-'",
            crate::text::printable(name)
        ),
    ))
}

/// The directory the sessions of this user live in, without making it.
pub fn location() -> PathBuf {
    // SAFETY: geteuid only queries.
    let uid = unsafe { libc::geteuid() };
    if let Some(run) = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && owned_dir(p, uid))
    {
        return run.join("jail-sessions");
    }
    let user_run = PathBuf::from(format!("/run/user/{uid}"));
    if owned_dir(&user_run, uid) {
        return user_run.join("jail-sessions");
    }
    #[cfg(target_os = "linux")]
    if let Ok(store) = crate::workspace::store::Store::locate() {
        return store.root().join("sessions");
    }
    PathBuf::from(format!("/run/jail-sessions-{uid}"))
}

fn owned_dir(p: &Path, uid: u32) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir() && m.uid() == uid)
}

/// The sessions' directory, made when missing (0700), and checked: a directory of this user's
/// that no one else can enter.
pub fn ensure() -> Result<PathBuf, JailError> {
    let dir = location();
    if let Some(parent) = dir.parent().filter(|p| !p.exists()) {
        let _ = std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(parent);
    }
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(JailError::bad_path(
                "the sessions' directory",
                &dir,
                e.to_string(),
            ));
        }
    }
    check(&dir)?;
    Ok(dir)
}

/// The directories every run hides: this environment's (made first when `make`) and every other
/// place a session of this user may live (a run whose environment lacks XDG_RUNTIME_DIR must
/// still hide the sessions started with it). Not under /tmp: hiding a directory inside a
/// writable tree takes Landlock's rule off the tree itself (new files in /tmp would be refused),
/// and there a private /tmp hides it anyway.
pub fn to_hide(make: bool) -> Vec<PathBuf> {
    let here = match make {
        true => ensure().unwrap_or_else(|_| location()),
        false => location(),
    };
    // SAFETY: geteuid only queries.
    let uid = unsafe { libc::geteuid() };
    let mut all = vec![
        here,
        PathBuf::from(format!("/run/user/{uid}/jail-sessions")),
    ];
    all.extend(
        std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .map(|p| p.join("jail-sessions")),
    );
    #[cfg(target_os = "linux")]
    all.extend(
        crate::workspace::store::Store::locate()
            .ok()
            .map(|s| s.root().join("sessions")),
    );
    all.retain(|d| !d.starts_with("/tmp"));
    all.sort();
    all.dedup();
    all
}

/// The sessions' directory when it exists and is sound (nothing to list otherwise).
pub fn existing() -> Option<PathBuf> {
    let dir = location();
    check(&dir).ok().map(|()| dir)
}

fn check(dir: &Path) -> Result<(), JailError> {
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| JailError::bad_path("the sessions' directory", dir, e.to_string()))?;
    // SAFETY: geteuid only queries.
    let uid = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(JailError::bad_path(
            "the sessions' directory",
            dir,
            format!(
                "must be a directory of uid {uid} with mode 0700 (it is {} of uid {}, mode \
                 {:o}); remove it",
                if meta.is_dir() {
                    "a directory"
                } else {
                    "not a directory"
                },
                meta.uid(),
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// A session's files.
#[derive(Debug, Clone)]
pub struct Files {
    pub socket: PathBuf,
    pub info: PathBuf,
    pub end: PathBuf,
    /// Locked by the session's supervisor for its whole life.
    pub lock: PathBuf,
}

/// Takes the session's lock (without waiting): held, a supervisor of that name lives.
#[cfg(target_os = "linux")]
pub fn lock(files: &Files) -> Result<std::os::fd::OwnedFd, String> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    // The holder removes the file before it lets go (so that names do not pile up): a lock
    // taken on a file that is no longer the one at its path is taken again on the new one.
    for _ in 0..16 {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(&files.lock)
            .map_err(|e| format!("{}: {e}", files.lock.display()))?;
        // SAFETY: flock on a descriptor owned here.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err("a session of this name is running".into());
        }
        let held = file.metadata().map_err(|e| e.to_string())?;
        match std::fs::symlink_metadata(&files.lock) {
            Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => return Ok(file.into()),
            _ => continue,
        }
    }
    Err("its lock file keeps being replaced".into())
}

impl Files {
    pub fn of(dir: &Path, name: &str) -> Files {
        Files {
            socket: dir.join(format!("{name}.sock")),
            info: dir.join(format!("{name}.json")),
            end: dir.join(format!("{name}.end.json")),
            lock: dir.join(format!("{name}.lock")),
        }
    }

    /// The socket and the description (a session that ended, or whose supervisor was killed).
    pub fn remove_live(&self) {
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_file(&self.info);
    }

    /// Lets go of the name's lock (from [`lock`]) and removes its file first, while it is still
    /// held: a waiting [`lock`] then finds the file gone and takes a new one.
    pub fn unlock(&self, held: std::os::fd::OwnedFd) {
        let _ = std::fs::remove_file(&self.lock);
        drop(held);
    }
}

/// The names of the sessions with a socket in `dir`, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let stem = name.strip_suffix(".sock")?;
            check_name(stem).ok().map(|()| stem.to_string())
        })
        .collect();
    out.sort();
    out
}

#[cfg(target_os = "linux")]
/// A fresh name: `s-` and 8 hex digits from the kernel's random pool.
pub fn new_name() -> String {
    let mut bytes = [0u8; 4];
    // SAFETY: getrandom writes at most the buffer's length into it.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got != bytes.len() as isize {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        bytes = (t.subsec_nanos() ^ std::process::id()).to_le_bytes();
    }
    format!(
        "s-{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_words_a_file_can_carry() {
        for ok in ["rev1", "a", "Ab_c-9", &"x".repeat(64)] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".x",
            "-x",
            "a/b",
            "a b",
            "..",
            "é",
            &"x".repeat(65),
            "a\nb",
            "cx.end",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        let n = new_name();
        assert!(
            check_name(&n).is_ok() && n.starts_with("s-") && n.len() == 10,
            "{n}"
        );
    }

    #[test]
    fn a_directory_of_someone_else_or_open_to_others_is_refused() {
        let base = std::env::temp_dir().join(format!("jail-sessdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let open = base.join("open");
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(&open)
            .unwrap();
        std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        assert!(check(&open).unwrap_err().to_string().contains("0700"));
        let link = base.join("link");
        std::os::unix::fs::symlink(&open, &link).unwrap();
        assert!(check(&link).is_err());
        let tight = base.join("tight");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&tight)
            .unwrap();
        assert!(check(&tight).is_ok());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
