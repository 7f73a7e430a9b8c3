//! An agent's state directory is code unless its profile names it data.
//!
//! The agents keep their own settings, hooks and the scripts those hooks run in the directory
//! they write their sessions to (`~/.claude`, `~/.codex`, `~/.gemini`, …). A hook that runs
//! `cd ~/.claude && ./guard.sh`, `bash "$HOME/.claude/notify"` or a status line that imports a
//! module beside it runs whatever is there on the host's next start, however the command spells
//! it; and any file can run, through an interpreter, whether or not it has an extension, a
//! shebang or an execute bit. So the question is not "what do the settings name" but "what does
//! the agent write": each agent profile names the data it writes there (sessions, logs, caches,
//! its state files, the login it refreshes), and everything else in the directory is taken as
//! code: read-only where it exists when the run starts, moved aside after the run where the run
//! created or changed it. The data paths are never read as code by the agent; what is in them
//! stays writable.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

/// One agent state directory: its path and the data patterns in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateDir {
    pub dir: PathBuf,
    /// Relative patterns (`projects`, `*.sqlite*`, `tmp/arg0-linux`): `*` matches any run of
    /// characters within one component; a pattern covers everything beneath what it matches.
    /// A pattern that starts with `!` (`!projects/*/memory`) takes what it matches, and
    /// everything beneath, out of the data again: the agent reads it as code (instructions
    /// loaded into every session, a git configuration).
    pub data: Vec<String>,
}

/// Where an entry of a state directory stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Data the agent writes (at or beneath a data pattern).
    Data,
    /// A directory on the way to data (`tmp` for `tmp/arg0-linux`): itself writable, its other
    /// entries judged one by one.
    OnTheWay,
    /// Anything else: code.
    Code,
}

/// Whether a data pattern is well formed: relative, no `.` or `..`, not empty (after the `!`
/// of an exception).
pub fn valid_pattern(pattern: &str) -> bool {
    let pattern = pattern.strip_prefix('!').unwrap_or(pattern);
    !pattern.is_empty()
        && !pattern.starts_with('/')
        && pattern
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

/// `*` matches any run of bytes; everything else matches itself, case included (file names).
fn component_matches(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.iter().position(|&c| c == b'*') {
        None => pattern == name,
        Some(star) => {
            let (head, rest) = (&pattern[..star], &pattern[star + 1..]);
            if !name.starts_with(head) {
                return false;
            }
            let name = &name[head.len()..];
            (0..=name.len()).any(|i| component_matches(rest, &name[i..]))
        }
    }
}

/// Where `rel` (a path relative to the state directory, not empty) stands among `data`: an
/// exception (`!…`) at or above it makes it code; on the way to an exception inside data, it
/// is on the way (itself writable, its entries judged one by one).
pub fn part_of(data: &[String], rel: &Path) -> Part {
    let names: Vec<&[u8]> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.as_bytes()),
            _ => None,
        })
        .collect();
    // (matches rel or something above it, matches something beneath rel)
    let reach = |pattern: &str| {
        let parts: Vec<&[u8]> = pattern.split('/').map(str::as_bytes).collect();
        let n = parts.len().min(names.len());
        let prefix = parts[..n]
            .iter()
            .zip(&names[..n])
            .all(|(p, name)| component_matches(p, name));
        (
            prefix && names.len() >= parts.len(),
            prefix && names.len() < parts.len(),
        )
    };
    let mut on_the_way = false;
    for exception in data.iter().filter_map(|p| p.strip_prefix('!')) {
        match reach(exception) {
            (true, _) => return Part::Code,
            (_, true) => on_the_way = true,
            _ => {}
        }
    }
    let mut data_here = false;
    for pattern in data.iter().filter(|p| !p.starts_with('!')) {
        match reach(pattern) {
            (true, _) => data_here = true,
            (_, true) => on_the_way = true,
            _ => {}
        }
    }
    match (data_here, on_the_way) {
        (true, false) => Part::Data,
        (_, true) => Part::OnTheWay,
        (false, false) => Part::Code,
    }
}

/// What a directory listing says of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    Symlink,
    Other,
}

/// An entry of a state directory that is code, as the start-time walk found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeEntry {
    pub path: PathBuf,
    /// A symlink: what it leads to is protected where it leads into a writable place (the link
    /// itself, replaced, is a change the after-run check moves aside).
    pub link: bool,
}

/// At most this many code entries are kept read-only one by one; a state directory with more
/// (outside its data) is refused rather than left half protected.
pub const MAX_CODE_ENTRIES: usize = 2048;

/// A listing of a directory: its entries, or None when it cannot be listed.
pub type Lister<'l> = &'l dyn Fn(&Path) -> Option<Vec<(OsString, EntryKind)>>;

/// The code entries of the state directory `dir`: each outermost entry that is neither data
/// nor on the way to data. Directories on the way to data are entered; everything else is
/// taken whole. `skip` says which paths are already protected (the profile's own list).
pub fn code_entries(
    dir: &Path,
    data: &[String],
    skip: &dyn Fn(&Path) -> bool,
    list: Lister<'_>,
) -> Result<Vec<CodeEntry>, String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Some(mut entries) = list(&d) else {
            // A directory on the way to data that cannot be listed: what is in it cannot be
            // told apart, so it is taken whole (the state directory itself is the caller's).
            if d != dir {
                out.push(CodeEntry {
                    path: d,
                    link: false,
                });
            }
            continue;
        };
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, kind) in entries {
            let path = d.join(&name);
            let Ok(rel) = path.strip_prefix(dir) else {
                continue;
            };
            match part_of(data, rel) {
                Part::Data => {}
                Part::OnTheWay if kind == EntryKind::Dir => stack.push(path),
                _ if skip(&path) => {}
                _ => out.push(CodeEntry {
                    link: kind == EntryKind::Symlink,
                    path,
                }),
            }
            if out.len() > MAX_CODE_ENTRIES {
                return Err(format!(
                    "{} holds more than {MAX_CODE_ENTRIES} entries outside the data its profile \
                     names; jail keeps each read-only (the agent's hooks may run any of them): \
                     move them elsewhere, or name the directory with --rw to make it writable \
                     whole",
                    dir.display()
                ));
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The host's listing: names and kinds, never following a symlink.
pub fn host_lister(dir: &Path) -> Option<Vec<(OsString, EntryKind)>> {
    let entries = std::fs::read_dir(dir).ok()?;
    Some(
        entries
            .flatten()
            .map(|e| {
                let kind = match e.file_type() {
                    Ok(t) if t.is_symlink() => EntryKind::Symlink,
                    Ok(t) if t.is_dir() => EntryKind::Dir,
                    _ => EntryKind::Other,
                };
                (e.file_name(), kind)
            })
            .collect(),
    )
}

/// Why the after-run check moves an entry of a state directory aside.
pub fn why_code(dir: &Path) -> String {
    format!(
        "in {}, the agent's state directory, outside the data its profile names: the agent's \
         hooks and scripts may run it on the host",
        dir.display()
    )
}

/// The state directory `path` is strictly inside where it is code there, if any.
pub fn code_in<'s>(states: &'s [StateDir], path: &Path) -> Option<&'s StateDir> {
    states.iter().find(|s| {
        path.strip_prefix(&s.dir)
            .is_ok_and(|rel| !rel.as_os_str().is_empty() && part_of(&s.data, rel) == Part::Code)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> Vec<String> {
        ["projects", "*.sqlite*", "tmp/arg0-linux", ".claude.json*"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn data_patterns_cover_what_is_beneath_them_and_nothing_else() {
        let d = data();
        let at = |r: &str| part_of(&d, Path::new(r));
        assert_eq!(at("projects"), Part::Data);
        assert_eq!(at("projects/-w-repo/x.jsonl"), Part::Data);
        assert_eq!(at("logs_2.sqlite-wal"), Part::Data);
        assert_eq!(at(".claude.json.tmp.12.ab"), Part::Data);
        assert_eq!(at("tmp"), Part::OnTheWay);
        assert_eq!(at("tmp/arg0-linux/codex-arg0x/apply_patch"), Part::Data);
        assert_eq!(at("tmp/other.sh"), Part::Code);
        let mut d = data();
        d.push("!projects/*/memory".into());
        let at = |r: &str| part_of(&d, Path::new(r));
        assert_eq!(at("projects"), Part::OnTheWay);
        assert_eq!(at("projects/-w-repo"), Part::OnTheWay);
        assert_eq!(at("projects/-w-repo/x.jsonl"), Part::Data);
        assert_eq!(at("projects/-w-repo/memory"), Part::Code);
        assert_eq!(at("projects/-w-repo/memory/MEMORY.md"), Part::Code);
        assert_eq!(at("logs_2.sqlite-wal"), Part::Data);
        for code in [
            "guard.sh",
            "notify",
            "helper.py",
            "scripts/x",
            "project",
            "Projects",
            "sqlite",
            "x.claude.json",
        ] {
            assert_eq!(at(code), Part::Code, "{code}");
        }
    }

    #[test]
    fn patterns_are_checked() {
        assert!(valid_pattern("projects") && valid_pattern("tmp/arg0-linux"));
        assert!(valid_pattern("!projects/*/memory"));
        for bad in ["", "/abs", "../x", "a/./b", "a//b", "x/", "!", "!../x"] {
            assert!(!valid_pattern(bad), "{bad}");
        }
    }

    #[test]
    fn the_walk_takes_code_whole_and_enters_only_the_way_to_data() {
        use EntryKind::*;
        let list = |d: &Path| -> Option<Vec<(OsString, EntryKind)>> {
            let names: &[(&str, EntryKind)] = match d.to_str()? {
                "/s" => &[
                    ("projects", Dir),
                    ("notify.sh", Other),
                    ("hooks", Dir),
                    ("tmp", Dir),
                    ("link", Symlink),
                    ("settings.json", Other),
                    ("logs_1.sqlite", Other),
                ],
                "/s/tmp" => &[("arg0-linux", Dir), ("evil", Other), ("sub", Dir)],
                _ => panic!("listed {}", d.display()),
            };
            Some(names.iter().map(|(n, k)| (OsString::from(n), *k)).collect())
        };
        let skip = |p: &Path| p == Path::new("/s/settings.json");
        let got = code_entries(Path::new("/s"), &data(), &skip, &list).unwrap();
        let paths: Vec<&str> = got.iter().map(|e| e.path.to_str().unwrap()).collect();
        assert_eq!(
            paths,
            [
                "/s/hooks",
                "/s/link",
                "/s/notify.sh",
                "/s/tmp/evil",
                "/s/tmp/sub"
            ]
        );
        assert!(got.iter().find(|e| e.path.ends_with("link")).unwrap().link);
    }

    #[test]
    fn too_many_code_entries_are_refused() {
        let list = |_: &Path| -> Option<Vec<(OsString, EntryKind)>> {
            Some(
                (0..=MAX_CODE_ENTRIES)
                    .map(|i| (OsString::from(format!("f{i}")), EntryKind::Other))
                    .collect(),
            )
        };
        let err = code_entries(Path::new("/s"), &data(), &|_| false, &list).unwrap_err();
        assert!(err.contains("/s holds more than"), "{err}");
    }

    #[test]
    fn code_in_names_the_state_directory_strictly_inside() {
        let states = vec![StateDir {
            dir: "/h/.claude".into(),
            data: data(),
        }];
        assert!(code_in(&states, Path::new("/h/.claude/guard.sh")).is_some());
        assert!(code_in(&states, Path::new("/h/.claude")).is_none());
        assert!(code_in(&states, Path::new("/h/.claude/projects/x.sh")).is_none());
        assert!(code_in(&states, Path::new("/h/other/x.sh")).is_none());
    }
}
