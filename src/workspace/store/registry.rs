//! The registry of stores: every store jail has used, recorded where no variable moves it (the
//! default stores of the password database's home and of `$HOME`), so that every run hides
//! them all, not only the one its environment names.

use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{Open, check_dir, flock, open_file, private_dir, read_bytes};
use crate::error::JailError;

/// The registry's file in each registry directory: one store root a line.
const REGISTRY: &str = "stores";
/// Held (flock) while the registry is rewritten; never renamed, unlike the registry.
const REGISTRY_LOCK: &str = "stores.lock";
/// A registry is read up to this size (thousands of stores).
const REGISTRY_MAX: u64 = 256 << 10;

/// The directories that keep the registry of stores: the default store (`.local/state/jail`) of
/// the home directory the password database names for this user (getpwuid_r: no variable moves
/// it), and of `$HOME` when that is another one; only homes that exist (a registry never
/// creates a home). Neither depends on `XDG_STATE_HOME`, and both are stores themselves, hidden
/// in every run.
pub fn registry_dirs() -> Vec<PathBuf> {
    let uid = nix::unistd::geteuid();
    let passwd = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.dir);
    let env = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let mut out: Vec<PathBuf> = Vec::new();
    for home in passwd.into_iter().chain(env) {
        if !home.is_absolute() || !home.is_dir() {
            continue;
        }
        let dir = crate::policy::real_path(&home.join(".local/state")).join("jail");
        if !out.contains(&dir) {
            out.push(dir);
        }
    }
    // One that moves with neither HOME nor the password database (uid 65534's home does not
    // exist; a container's user may have no entry): /var/tmp/jail-state-UID, while it is this
    // user's own and no one else may write it (in the world-writable /var/tmp, a directory
    // another user made first is theirs to swap: it is left alone).
    let base = PathBuf::from(format!("/var/tmp/jail-state-{}", uid.as_raw()));
    let usable = match fs::symlink_metadata(&base) {
        Err(_) => true,
        Ok(m) => m.is_dir() && m.uid() == uid.as_raw() && m.mode() & 0o022 == 0,
    };
    if usable && !out.contains(&base.join("jail")) {
        out.push(base.join("jail"));
    }
    out
}

/// The symlinks on the way to `path` as it is written (each link's own path, in the order the
/// kernel meets them, links in their targets too): a command that may write where one lives
/// could point it, and jail's next review, at a store of its own making.
pub fn links_on_the_way(path: &Path) -> Vec<PathBuf> {
    let names = crate::workspace::view::components;
    let mut out = Vec::new();
    let mut queue = names(path);
    let mut at = PathBuf::from("/");
    while let Some(name) = queue.pop_front() {
        if name == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&name);
        match fs::read_link(&next) {
            Ok(target) if out.len() < 40 => {
                out.push(next);
                if target.is_absolute() {
                    at = PathBuf::from("/");
                }
                let mut rest = names(&target);
                rest.extend(queue);
                queue = rest;
            }
            _ => at = next,
        }
    }
    out
}

/// The state directories as this environment writes them (the store's base and each home's
/// `.local/state`), for [`links_on_the_way`].
pub fn written_state_paths() -> Vec<PathBuf> {
    let var = |v: &str| {
        std::env::var_os(v)
            .filter(|x| !x.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let mut out: Vec<PathBuf> = var("XDG_STATE_HOME").into_iter().collect();
    out.extend(var("HOME").map(|h| h.join(".local/state")));
    out
}

/// The store roots a registry's text names: absolute, plain (no `.` or `..`), each a directory
/// named `jail` as [`Store::locate`](super::Store::locate) names them; anything else (a forged
/// line, a torn write) is left out, so an entry can only ever add a hidden `jail` directory.
/// Bytes, not text: a store's path is any bytes but NUL and newline, and a lossy line would
/// name another place.
pub fn parse_registry(text: &[u8]) -> Vec<PathBuf> {
    use std::path::Component;
    let mut out: Vec<PathBuf> = Vec::new();
    for line in text.split(|&b| b == b'\n') {
        let path = Path::new(std::ffi::OsStr::from_bytes(line));
        // Spelled as its components put back together (no `.`, no doubled or trailing `/`).
        let spelled: PathBuf = path.components().collect();
        let plain = path.is_absolute()
            && spelled.as_os_str() == path.as_os_str()
            && path
                .components()
                .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
        if plain && path.file_name().is_some_and(|n| n == "jail") && !out.iter().any(|p| p == path)
        {
            out.push(path.to_path_buf());
        }
    }
    out
}

/// The registry's text for `stores` (none holds a newline: [`register_in`] leaves those out).
pub(super) fn format_registry(stores: &[PathBuf]) -> Vec<u8> {
    let mut text = Vec::new();
    for s in stores {
        text.extend_from_slice(s.as_os_str().as_bytes());
        text.push(b'\n');
    }
    text
}

/// Whether `path` is a real directory now (lstat).
pub(super) fn is_real_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// The stores the registry in `dir` names, as written (whether they exist or not).
pub(super) fn read_registry(dir: &Path) -> Result<Vec<PathBuf>, JailError> {
    let file = dir.join(REGISTRY);
    if fs::symlink_metadata(&file).is_err() {
        return Ok(Vec::new());
    }
    read_bytes(&file, REGISTRY_MAX).map(|t| parse_registry(&t))
}

/// Makes every registry directory of `dirs` that is missing (best effort, before every real
/// run): one that exists is hidden in the run, so the command cannot create it, nor forge a
/// registry or a pending run there.
pub fn ensure_registries(dirs: &[PathBuf]) {
    for dir in dirs {
        let _ = private_dir(dir);
    }
}

/// Every store the registries of `dirs` name that exists now, as a real directory: hidden in
/// every run.
pub fn registered(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        if check_dir(dir).is_err() {
            continue;
        }
        for store in read_registry(dir).unwrap_or_default() {
            if is_real_dir(&store) && !out.contains(&store) {
                out.push(store);
            }
        }
    }
    out
}

/// Adds `store` to the registry in `dir` (made when missing), under the registry's lock: the
/// stores that no longer exist are dropped, and the new list replaces the old in one rename
/// (a reader never sees half of it).
pub(super) fn register_in(dir: &Path, store: &Path) -> Result<(), JailError> {
    let line = store.as_os_str().as_bytes();
    if line.contains(&b'\n') || parse_registry(line) != [store] {
        return Err(JailError::bad_path(
            "jail state",
            store,
            "cannot be named on one line of the registry",
        ));
    }
    private_dir(dir)?;
    if read_registry(dir)?.iter().any(|s| s == store) {
        return Ok(());
    }
    let lock_path = dir.join(REGISTRY_LOCK);
    let lock = open_file(&lock_path, Open::Create)?;
    flock(&lock, &lock_path)?;
    let mut stores = read_registry(dir)?;
    if stores.iter().any(|s| s == store) {
        return Ok(());
    }
    stores.retain(|s| is_real_dir(s));
    stores.push(store.to_path_buf());
    let tmp = dir.join("stores.new");
    let _ = fs::remove_file(&tmp);
    let write = |e: io::Error| JailError::bad_path("jail state", &tmp, e.to_string());
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
        .and_then(|mut f| f.write_all(&format_registry(&stores)))
        .map_err(write)?;
    fs::rename(&tmp, dir.join(REGISTRY)).map_err(write)
}
