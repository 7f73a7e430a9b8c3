//! What jail moved aside: the name it gives each entry, and why nothing may reach one.
//!
//! jail renames what a run planted to `NAME.jail-quarantine-<random>` in the same directory, so
//! that the user finds it beside where it was. That directory is often still writable to the
//! next run (an agent's data, the project): an entry moved aside must be neither readable nor
//! writable there (a later run would change what the user reviews, or learn what it holds), and
//! nothing the next run creates may lead the host's tools to it. The first is a hide rule for
//! every quarantined entry the start-time search finds; the second is the after-run check of new
//! symlinks ([`super::git::link_leads_to_code`]): a tool told to use a path (`git --git-dir
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
