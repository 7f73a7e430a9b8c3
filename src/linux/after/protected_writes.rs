//! Names the protected file a command tried to replace. With the mount view a protected file in
//! a writable tree (`.git/config` under `--rw .`) is a read-only bind: a mount point. Tools
//! replace a file by writing a sibling (git's `config.lock`, an editor's `settings.json.tmp`)
//! and renaming it over the file, and the kernel refuses a rename onto a mount point with EBUSY:
//! "could not write config file .git/config: Device or resource busy" names neither jail nor the
//! way out. A sibling created under the protected name's prefix during the run is that attempt;
//! jail says so once the run ends.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

use crate::policy::{Access, Kind, Origin, Policy};

/// The directories holding protected files, watched for new entries from before the command
/// starts.
pub struct ProtectedWrites {
    inotify: Option<Inotify>,
    watched: Vec<(WatchDescriptor, PathBuf, Vec<OsString>)>,
}

/// The protected files to watch for: (their directory, their names there).
pub fn targets(policy: &Policy) -> Vec<(PathBuf, Vec<OsString>)> {
    let mut by_dir: std::collections::BTreeMap<PathBuf, Vec<OsString>> = Default::default();
    for r in &policy.rules {
        if r.access == Access::Ro
            && r.kind == Kind::File
            && matches!(r.origin, Origin::Protected(_))
            && let (Some(dir), Some(name)) = (r.path.parent(), r.path.file_name())
        {
            by_dir
                .entry(dir.to_path_buf())
                .or_default()
                .push(name.to_owned());
        }
    }
    by_dir.into_iter().collect()
}

/// Whether `created` in a protected file's directory is a replacement for `name` in the making:
/// the name itself followed by a dot and more (`config.lock`, `settings.json.tmp.1234`).
pub fn replaces(created: &OsStr, name: &OsStr) -> bool {
    let (c, n) = (created.as_bytes(), name.as_bytes());
    c.len() > n.len() + 1 && c.starts_with(n) && c[n.len()] == b'.'
}

impl ProtectedWrites {
    /// Watches nothing unless the mount view makes protected files mount points (without it
    /// Landlock refuses the sibling itself: "Permission denied", no EBUSY to explain). A watch
    /// that cannot be set only costs the hint.
    pub fn start(policy: &Policy, mount_view: bool) -> ProtectedWrites {
        let mut out = ProtectedWrites {
            inotify: None,
            watched: Vec::new(),
        };
        let targets = if mount_view {
            targets(policy)
        } else {
            Vec::new()
        };
        if targets.is_empty() {
            return out;
        }
        let Ok(inotify) = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC) else {
            return out;
        };
        for (dir, names) in targets {
            let flags = AddWatchFlags::IN_CREATE | AddWatchFlags::IN_ONLYDIR;
            if let Ok(wd) = inotify.add_watch(&dir, flags) {
                out.watched.push((wd, dir, names));
            }
        }
        out.inotify = Some(inotify);
        out
    }

    /// The protected files a replacement was started for, once each.
    pub fn finish(self) -> Vec<PathBuf> {
        let Some(inotify) = self.inotify else {
            return Vec::new();
        };
        let mut hit = std::collections::BTreeSet::new();
        while let Ok(events) = inotify.read_events() {
            if events.is_empty() {
                break;
            }
            for e in events {
                let Some(created) = &e.name else { continue };
                let Some((_, dir, names)) = self.watched.iter().find(|(wd, _, _)| *wd == e.wd)
                else {
                    continue;
                };
                for name in names.iter().filter(|n| replaces(created, n)) {
                    hit.insert(dir.join(name));
                }
            }
        }
        hit.into_iter().collect()
    }
}

/// The line jail prints for one of them. The command chose the path's names and can start a
/// replacement on purpose, so the line says what allowing it means, and the flag it shows is
/// quoted for a shell: a directory named `x;$(id)` must not become a command when pasted.
pub fn hint(path: &std::path::Path) -> String {
    let shown = crate::text::printable(&path.display().to_string());
    format!(
        "jail: {shown} is protected (kept read-only inside the writable tree: what it names can \
         run commands on the host), so the command's change to it was refused; the error it saw, \
         \"Device or resource busy\", is the kernel refusing to replace a read-only mount. To allow \
         it, if you trust what the command would write there: --rw {}",
        crate::text::printable(&crate::text::shell_word(&path.display().to_string()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sibling_under_the_name_and_a_dot_is_a_replacement() {
        let is = |c: &str, n: &str| replaces(OsStr::new(c), OsStr::new(n));
        assert!(is("config.lock", "config"));
        assert!(is("settings.json.tmp.12", "settings.json"));
        assert!(!is("config", "config"));
        assert!(!is("config.", "config"));
        assert!(!is("configure", "config"));
        assert!(!is("index.lock", "config"));
    }

    #[test]
    fn the_flag_in_the_hint_is_one_shell_word() {
        let h = hint(std::path::Path::new("/w/x;$(id)/.git/config"));
        assert!(h.ends_with("--rw '/w/x;$(id)/.git/config'"), "{h}");
        let h = hint(std::path::Path::new("/w/it's/.git/config"));
        assert!(h.ends_with("--rw '/w/it'\\''s/.git/config'"), "{h}");
        assert!(hint(std::path::Path::new("/w/r/.git/config")).ends_with("--rw /w/r/.git/config"));
    }
}
