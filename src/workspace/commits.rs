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
    let mut entries = Vec::new();
    let mut items = Vec::new();
    for c in &changed {
        let side = |mode: &str, id: Option<&str>| -> Option<Side> {
            let kind = match mode {
                "120000" => SideKind::Symlink(PathBuf::from(
                    <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(git::blob(
                        scratch, id?,
                    )?),
                )),
                "100644" | "100755" => SideKind::File,
                _ => return None,
            };
            Some(Side {
                kind,
                abs: PathBuf::from("/nonexistent"),
                mode: if mode == "100755" { 0o755 } else { 0o644 },
            })
        };
        if c.new_mode == "160000" {
            out.flagged.push((
                c.path.clone(),
                vec![
                    "a submodule commit (gitlink): git fetches and checks out what it names".into(),
                ],
            ));
            continue;
        }
        let Some(new) = side(&c.new_mode, Some(&c.new_id)) else {
            // Deleted by a commit: the history still holds it.
            continue;
        };
        let node = match &new.kind {
            SideKind::Symlink(t) => Node::Symlink { target: t.clone() },
            SideKind::File => Node::File { mode: new.mode },
        };
        entries.push(Entry {
            path: c.path.clone(),
            node,
            copied_up: false,
        });
        items.push(Item {
            path: c.path.clone(),
            old: side(&c.old_mode, None).filter(|s| s.kind == SideKind::File),
            new: Some(new),
            conflict: None,
            flags: Vec::new(),
        });
    }
    let judge = Judge::new(root, Path::new("/nonexistent"), &entries, start);
    for it in &items {
        let flags = judge.flags(it);
        if !flags.is_empty() && !out.flagged.iter().any(|(p, _)| *p == it.path) {
            out.flagged.push((it.path.clone(), flags));
        }
    }
    out
}
