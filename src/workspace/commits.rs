//! A run's own commits are part of what it hands back: reviewed as its files are. A run that
//! commits a hook manager's script, an `.envrc` or an editor's tasks and then restores its work
//! tree leaves a work-tree diff with nothing in it, while the branch `jail apply` offers carries
//! them; the owner's fast-forward and next commit would run them. So every path any of the
//! run's commits changes (each commit against each parent, not only start against head) is
//! judged by the same [`super::judge::Judge`] as the work tree, the commits' patches are shown
//! in `jail diff`, and a branch with a flagged change is offered only when asked
//! (`--include-flagged`).

use std::path::{Path, PathBuf};

use super::changes::{Item, Side, SideKind};
use super::git;
use super::judge::Judge;
use super::layer::{Entry, Node};

/// The review of a run's commits in one root.
#[derive(Debug, Clone)]
pub struct CommitReview {
    /// The run's head commit.
    pub head: String,
    /// The repository the commits are read from (the layer's objects over the host's).
    pub scratch: PathBuf,
    /// Each flagged path with its reasons; a path of "" holds what made the review impossible.
    pub flagged: Vec<(PathBuf, Vec<String>)>,
    /// `git log -p` of the commits, for a person.
    pub log: Vec<u8>,
}

/// What the commits write, as the entries and items of a layer the judge reads (sides at no
/// real place: the blobs' heads are judged instead); a gitlink is flagged, not an item.
fn as_layer(
    changed: &[git::Changed],
    heads: &std::collections::HashMap<String, Vec<u8>>,
    flagged: &mut Vec<(PathBuf, Vec<String>)>,
) -> (Vec<Entry>, Vec<(Item, String)>) {
    let mut entries = Vec::new();
    let mut items = Vec::new();
    for c in changed {
        if c.new_mode == "160000" {
            flagged.push((
                c.path.clone(),
                vec![
                    "a submodule commit (gitlink): git fetches and checks out what it names".into(),
                ],
            ));
            continue;
        }
        let kind = match c.new_mode.as_str() {
            "120000" => {
                let Some(target) = heads.get(&c.new_id) else {
                    continue;
                };
                SideKind::Symlink(PathBuf::from(
                    <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(
                        target.clone(),
                    ),
                ))
            }
            "100644" | "100755" => SideKind::File,
            // Deleted by a commit: the history still holds it.
            _ => continue,
        };
        let mode = if c.new_mode == "100755" { 0o755 } else { 0o644 };
        let new = Side {
            kind,
            abs: PathBuf::from("/nonexistent"),
            mode,
        };
        entries.push(Entry {
            path: c.path.clone(),
            node: match &new.kind {
                SideKind::Symlink(t) => Node::Symlink { target: t.clone() },
                SideKind::File => Node::File { mode },
            },
            copied_up: false,
        });
        let old = matches!(c.old_mode.as_str(), "100644" | "100755").then(|| Side {
            kind: SideKind::File,
            abs: PathBuf::from("/nonexistent"),
            mode: if c.old_mode == "100755" { 0o755 } else { 0o644 },
        });
        items.push((
            Item {
                path: c.path.clone(),
                old,
                new: Some(new),
                conflict: None,
                flags: Vec::new(),
            },
            c.new_id.clone(),
        ));
    }
    (entries, items)
}

/// Reviews the commits from `start` to `head` of the layer's git directory `upper_git` over the
/// host root `root`, reading them through a scratch repository at `scratch`.
pub fn review(
    root: &Path,
    upper_git: &Path,
    start: Option<&str>,
    head: &str,
    scratch: &Path,
) -> CommitReview {
    let mut out = CommitReview {
        head: head.to_string(),
        scratch: scratch.to_path_buf(),
        flagged: Vec::new(),
        log: Vec::new(),
    };
    let read = git::scratch_repo(root, upper_git, head, scratch)
        .map_err(|e| e.to_string())
        .and_then(|()| git::review(scratch, start, head));
    let (changed, log) = match read {
        Ok(r) => r,
        Err(e) => {
            out.flagged.push((
                PathBuf::new(),
                vec![format!("the run's commits could not be read whole: {e}")],
            ));
            return out;
        }
    };
    out.log = log;
    if let Some(s) = start.filter(|s| !git::descends(scratch, s, head)) {
        out.flagged.push((
            PathBuf::new(),
            vec![format!(
                "the branch does not contain the start commit {}: the run rewrote history (its \
                 tree against the start is judged, not only its own commits)",
                &s[..12.min(s.len())]
            )],
        ));
    }
    // The first 8000 bytes of every blob the commits write (a link's target, a script's head),
    // read by one process.
    let ids: Vec<&str> = changed
        .iter()
        .filter(|c| matches!(c.new_mode.as_str(), "100644" | "100755" | "120000"))
        .map(|c| c.new_id.as_str())
        .collect();
    let heads = git::blob_heads(scratch, &ids, 8000);
    let (entries, items) = as_layer(&changed, &heads, &mut out.flagged);
    let judge = Judge::new(root, Path::new("/nonexistent"), &entries, start);
    // Every version a commit writes of a path is judged; a path's flags are all of theirs.
    for (it, id) in &items {
        let mut flags = judge.flags(it);
        // A merge or checkout of the branch writes over what the host has at the path: lost
        // for good when git does not hold it (an ignored or untracked file).
        flags.extend(judge.overwrites(&it.path));
        if let Some(head) = heads.get(id) {
            let exec = it.new.as_ref().is_some_and(|n| n.mode == 0o755);
            flags.extend(super::judge::hidden_code_in(head, &it.path, exec));
        }
        if flags.is_empty() {
            continue;
        }
        match out.flagged.iter_mut().find(|(p, _)| *p == it.path) {
            Some((_, have)) => {
                for f in flags {
                    if !have.contains(&f) {
                        have.push(f);
                    }
                }
            }
            None => out.flagged.push((it.path.clone(), flags)),
        }
    }
    out
}
