//! What jail moved aside, and where a symlink leads the host's tools.
//!
//! jail renames what a run planted to `NAME.jail-quarantine-<random>` in the same directory, so
//! that the user finds it beside where it was. That directory is often still writable to the
//! next run (an agent's data, the project): an entry moved aside must be neither readable nor
//! writable there (a later run would change what the user reviews, or learn what it holds), and
//! nothing the next run creates may lead the host's tools to it. The first is a hide rule for
//! every quarantined entry the start-time search finds; the second is the after-run check of new
//! symlinks ([`link_leads_to_code`]): a tool told to use a path (`git --git-dir
//! snapshot/<id>/<hash>`, a hooks or config directory) follows a symlink there to whatever it
//! names, so a link to a git directory, to a quarantined entry, or to a directory that holds
//! either gives the tool that repository's config, hooks and filters to run.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What jail appends to the name of an entry it moves aside (followed by a random suffix).
pub const MARK: &str = ".jail-quarantine-";

/// Whether a file name is one jail gave to an entry it moved aside.
pub fn is_quarantined_name(name: &OsStr) -> bool {
    name.as_bytes()
        .windows(MARK.len())
        .any(|w| w == MARK.as_bytes())
}

/// Whether any component of `path` is a quarantined name (the path is in something moved aside).
pub fn in_quarantined(path: &Path) -> bool {
    path.iter().any(is_quarantined_name)
}

/// How deep beneath a link's target a git directory or a quarantined entry is looked for, and
/// how many entries at most (a link to a huge tree is not walked whole: see
/// docs/writable-trees.md).
const BENEATH_DEPTH: usize = 3;
const BENEATH_ENTRIES: usize = 2000;

/// Why a symlink, read on the host after the run, leads a host tool to code; None when it does
/// not (or leads nowhere). `link` is the link's absolute path.
pub fn link_leads_to_code(link: &Path) -> Option<&'static str> {
    const QUARANTINED: &str = "a symlink to an entry jail moved aside (a tool that follows it \
                               runs what jail kept from running)";
    // The link's own text, joined where it is: a link to a quarantined symlink.
    if let (Ok(text), Some(dir)) = (std::fs::read_link(link), link.parent())
        && in_quarantined(&dir.join(text))
    {
        return Some(QUARANTINED);
    }
    let target = std::fs::canonicalize(link).ok()?;
    if in_quarantined(&target) {
        return Some(QUARANTINED);
    }
    if !std::fs::metadata(&target).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    if is_git_dir(&target) {
        return Some(
            "a symlink to a git directory (git run through it uses that repository's config, \
             hooks and filters)",
        );
    }
    if holds_code(&target) {
        return Some(
            "a symlink to a directory that holds a git directory or an entry jail moved aside \
             (a tool that uses a path beneath it runs their config, hooks and filters)",
        );
    }
    None
}

/// git's own test for a repository, on the filesystem.
fn is_git_dir(dir: &Path) -> bool {
    super::is_git_layout(|n| std::fs::symlink_metadata(dir.join(n)).is_ok())
}

/// Whether `dir` holds a git directory (a `.git` too) or a quarantined entry, down to
/// [`BENEATH_DEPTH`] levels and [`BENEATH_ENTRIES`] entries; symlinks beneath are not followed.
fn holds_code(dir: &Path) -> bool {
    let mut queue = std::collections::VecDeque::from([(dir.to_path_buf(), 0usize)]);
    let mut seen = 0usize;
    while let Some((d, depth)) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > BENEATH_ENTRIES {
                return false;
            }
            let name = e.file_name();
            if is_quarantined_name(&name) || name == ".git" {
                return true;
            }
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = e.path();
            if is_git_dir(&path) {
                return true;
            }
            if depth + 1 < BENEATH_DEPTH {
                queue.push_back((path, depth + 1));
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    #[test]
    fn quarantined_names_are_known_anywhere_in_a_path() {
        assert!(is_quarantined_name(OsStr::new("evil.jail-quarantine-0a1b")));
        assert!(is_quarantined_name(OsStr::new(".jail-quarantine-0a1b")));
        assert!(!is_quarantined_name(OsStr::new("evil.jail-quarantine")));
        assert!(in_quarantined(Path::new(
            "/s/evil.jail-quarantine-1/objects"
        )));
        assert!(!in_quarantined(Path::new("/s/evil/objects")));
    }

    #[test]
    fn links_to_repositories_quarantined_entries_or_what_holds_them_lead_to_code() {
        let d = std::env::temp_dir().join(format!("jail-qlinks-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        for dir in [
            "repo/objects",
            "repo/refs",
            "q.jail-quarantine-1",
            "deep/a/b",
            "plain/x",
        ] {
            fs::create_dir_all(d.join(dir)).unwrap();
        }
        fs::write(d.join("repo/HEAD"), "ref: refs/heads/main\n").unwrap();
        fs::create_dir_all(d.join("deep/a/b/.git")).unwrap();
        fs::write(d.join("plain/x/file"), "x").unwrap();
        fs::write(d.join("f.jail-quarantine-2"), "x").unwrap();
        symlink("q.jail-quarantine-1", d.join("qlink.jail-quarantine-3")).unwrap();
        for (name, target, leads) in [
            ("l-repo", "repo", true),
            ("l-q", "q.jail-quarantine-1", true),
            ("l-qfile", "f.jail-quarantine-2", true),
            ("l-qlink", "qlink.jail-quarantine-3", true),
            ("l-holder", ".", true),
            ("l-deep", "deep", true),
            ("l-plain", "plain", false),
            ("l-file", "plain/x/file", false),
            ("l-none", "missing", false),
        ] {
            symlink(target, d.join(name)).unwrap();
            assert_eq!(link_leads_to_code(&d.join(name)).is_some(), leads, "{name}");
        }
        fs::remove_dir_all(&d).unwrap();
    }
}
