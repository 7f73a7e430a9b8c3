//! Copy-on-write workspaces: a `--cow` root is writable inside the jail while the host's stays
//! as it was; the run's writes wait in a layer under jail's state directory until a person
//! reviews them (`jail diff`) and applies them (`jail apply`), or throws them away
//! (`jail discard`). Parallel runs on one root each get their own layer; applies are
//! serialised per root and refuse what overlaps with the host since the run started.
//!
//! ```text
//! store (where layers wait) ── layer (what a run left) ── changes (against the host now:
//! conflicts, flags) ── patch (for review) / apply (journaled, all or nothing) ── git (commits
//! offered as a branch)
//! ```

pub mod apply;
pub mod changes;
pub mod commits;
pub mod copy;
pub mod git;
pub mod judge;
pub mod layer;
pub mod patch;
pub mod review;
pub mod store;
pub mod survivors;
pub mod view;

use std::io::Write;
use std::path::{Path, PathBuf};

use self::changes::{ChangeSet, Counts};
use self::store::{LayerRecord, Run, RunState, Store};
use crate::byte_path::BytePath;
use crate::error::JailError;

/// One root's change set in a run.
pub struct RootChanges {
    pub root: PathBuf,
    pub set: ChangeSet,
    /// The run's own commit, when it made commits in the root's repository.
    pub commit: Option<String>,
    /// Their review (what they change, flagged as the work tree is), with `commit`.
    pub commits: Option<commits::CommitReview>,
}

/// Every root's change set of `run`, against the host as it is now.
pub fn changes(run: &Run) -> Result<Vec<RootChanges>, JailError> {
    let mut out = Vec::new();
    // Files an earlier `apply --merge` wrote: done, while the host still has what it wrote.
    let merged = jail_wrote(run, MERGED);
    for layer in &run.record.layers {
        let mut rc = root_changes(run, layer)?;
        rc.set.items.retain(|it| {
            let abs = rc.root.join(&it.path);
            merged
                .get(&abs)
                .is_none_or(|was| host_stamp(&abs) != Some(*was))
        });
        out.push(rc);
    }
    Ok(out)
}

/// A host path's inode and change time, as jail records its own writes.
fn host_stamp(p: &Path) -> Option<(u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(p).ok()?;
    Some((m.ino(), m.ctime(), m.ctime_nsec()))
}

/// Host paths jail wrote for this run, with their stamps then (`own.json`, `merged.json`).
fn jail_wrote(run: &Run, file: &str) -> std::collections::BTreeMap<PathBuf, (u64, i64, i64)> {
    let list: Vec<(BytePath, u64, i64, i64)> = std::fs::read_to_string(run.dir.join(file))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    list.into_iter()
        .map(|(p, i, s, n)| (p.0, (i, s, n)))
        .collect()
}

/// Adds `paths` as they are now to the record `file`.
fn record_jail_wrote(run: &Run, file: &str, paths: &[PathBuf]) {
    let mut all = jail_wrote(run, file);
    for p in paths {
        match host_stamp(p) {
            Some(st) => all.insert(p.clone(), st),
            None => all.remove(p),
        };
    }
    let list: Vec<(BytePath, u64, i64, i64)> = all
        .into_iter()
        .map(|(p, (i, s, n))| (BytePath(p), i, s, n))
        .collect();
    // Whole or not at all: a record cut short by a crash or a full disk must not lose what
    // jail wrote (a lost merge record would let the run's side over a merged file).
    let tmp = run.dir.join(format!("{file}.new"));
    let text = serde_json::to_string(&list).expect("serializable");
    if std::fs::write(&tmp, text).is_ok() {
        let _ = std::fs::rename(&tmp, run.dir.join(file));
    }
}

fn root_changes(run: &Run, layer: &LayerRecord) -> Result<RootChanges, JailError> {
    let upper = run.upper(layer);
    let bad = |e: std::io::Error| JailError::bad_path("layer", &upper, e.to_string());
    let entries = match run.record.kind {
        store::LayerKind::Overlay => layer::read_upper(&upper).map_err(bad)?,
        store::LayerKind::Copy => {
            let path = run.layer_dir(layer).join(copy::MANIFEST);
            let manifest = std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .ok_or_else(|| {
                    JailError::bad_path(
                        "layer",
                        &path,
                        "the copy's manifest is missing or unreadable",
                    )
                })?;
            copy::read_copy(&upper, &manifest).map_err(bad)?
        }
    };
    let mut set = changes::compute(&entries, &layer.root, &upper, &since(run)).map_err(bad)?;
    let judge = judge::Judge::new(&layer.root, &upper, &entries, layer.git_head.as_deref());
    for it in &mut set.items {
        it.flags = judge.flags(it);
    }
    let commit = git::layer_head(&upper.join(".git"), &layer.root.join(".git"))
        .filter(|c| Some(c) != layer.git_head.as_ref());
    let commits = commit.as_ref().map(|head| {
        commits::review(
            &layer.root,
            &upper.join(".git"),
            layer.git_head.as_deref(),
            head,
            &run.dir.join(format!("git-scratch-{}", layer.dir)),
        )
    });
    Ok(RootChanges {
        root: layer.root.clone(),
        set,
        commit,
        commits,
    })
}

const OWN: &str = "own.json";

const MERGED: &str = "merged.json";

/// The start stamp, and what jail itself changed on the host since (see [`changes::Since`]).
fn since(run: &Run) -> changes::Since {
    changes::Since {
        start: run.record.start,
        own: jail_wrote(run, OWN),
    }
}

/// Records the host paths jail just changed, as they are now: not the user's changes.
fn note_own(run: &Run, paths: &[PathBuf]) {
    record_jail_wrote(run, OWN, paths);
}

/// The counts over all roots.
pub fn total(changes: &[RootChanges]) -> Counts {
    changes.iter().fold(Counts::default(), |mut t, r| {
        let c = r.set.counts();
        t.changed += c.changed;
        t.flagged += c.flagged + r.commits.as_ref().map_or(0, |c| c.flagged.len());
        t.conflicts += c.conflicts;
        t
    })
}

/// The branch a run's commits are offered as.
pub fn branch_name(run: &Run) -> String {
    format!("jail/{}", run.record.id)
}

/// The patch of every root (paths relative to each root; a `# jail: root` line before each
/// root's part when there are several).
pub fn write_patch(run: &Run, changes: &[RootChanges], out: &mut dyn Write) -> std::io::Result<()> {
    for rc in changes {
        if changes.len() > 1 {
            writeln!(
                out,
                "# jail: root {}",
                crate::text::printable(&rc.root.display().to_string())
            )?;
        }
        if let Some(review) = &rc.commits {
            write_commit_review(run, review, out)?;
        }
        // Directory steps a patch cannot carry, said so that the diff shows all an apply does.
        for op in &rc.set.dirs {
            let line = match op {
                changes::DirOp::Make(p, _) => {
                    format!("# jail: makes the directory {}", p.display())
                }
                changes::DirOp::Remove(p) => format!(
                    "# jail: removes the directory {} (and what is beneath it, when empty)",
                    p.display()
                ),
            };
            writeln!(out, "{}", crate::text::printable(&line))?;
        }
        patch::write(&rc.set.items, out)?;
    }
    Ok(())
}

/// The run's commits for review: what is flagged, then their patches, every line a comment
/// (`# | `) so that the patch still applies with `git apply` to the work tree alone.
fn write_commit_review(
    run: &Run,
    review: &commits::CommitReview,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let offered = if review.flagged.is_empty() {
        format!(
            "`jail apply {}` offers them as branch {}",
            run.record.id,
            branch_name(run)
        )
    } else {
        format!(
            "flagged: `jail apply {} --include-flagged` offers them as branch {}",
            run.record.id,
            branch_name(run)
        )
    };
    writeln!(
        out,
        "# jail: the run made commits (head {}); {offered}",
        review.head
    )?;
    for (path, flags) in &review.flagged {
        for f in flags {
            let line = if path.as_os_str().is_empty() {
                format!("# jail: flagged in the commits: {f}")
            } else {
                format!("# jail: flagged in the commits: {}: {f}", path.display())
            };
            writeln!(out, "{}", crate::text::printable(&line))?;
        }
    }
    for line in review.log.split(|b| *b == b'\n') {
        out.write_all(b"# | ")?;
        out.write_all(line)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Rolls back any apply of `run` that was interrupted (its journal), under the roots' locks.
pub fn recover(store: &Store, run: &Run) -> Result<(), JailError> {
    let work = run.dir.join("apply");
    if std::fs::symlink_metadata(&work).is_err() {
        return Ok(());
    }
    let _locks = lock_all(store, run)?;
    let touched = apply::recover(&work).map_err(|e| {
        JailError::bad_path(
            "apply",
            &work,
            format!("rolling back an interrupted apply failed: {e}; the journal is kept there"),
        )
    })?;
    note_own(run, &touched);
    Ok(())
}

fn lock_all(store: &Store, run: &Run) -> Result<Vec<store::Lock>, JailError> {
    let mut roots: Vec<&Path> = run.record.layers.iter().map(|l| l.root.as_path()).collect();
    roots.sort();
    roots.iter().map(|r| store.lock(r)).collect()
}

/// What `jail apply` did.
pub struct ApplyOutcome {
    pub applied: usize,
    pub left: Vec<(PathBuf, String)>,
    pub branch: Option<String>,
    /// Each root whose commits were offered as a branch, and where its repository stands.
    pub offered: Vec<Offered>,
    /// The layer was removed (everything applied).
    pub finished: bool,
    /// Files `--merge` merged cleanly and applied.
    pub merged: Vec<PathBuf>,
}

/// A root's commits offered as a branch by an apply that also wrote their files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offered {
    pub root: PathBuf,
    pub branch: String,
    /// The branch checked out in the root (None: a detached head).
    pub current: Option<String>,
    /// The offered branch fast-forwards the checked-out head, and no conflicting file was left
    /// out (the work tree holds the run's side of every file the commits changed).
    pub fast_forward: bool,
}

/// What to do next with commits an apply offered, said to the person who applied. The apply
/// wrote the run's files into the work tree, uncommitted, so `git merge --ff-only` of the
/// branch refuses (the same changes are local modifications). Where the branch fast-forwards
/// the head, `git reset BRANCH` is that fast-forward for a work tree that already holds the
/// files: the branch and the index move to the commits, no file is written, and what the run
/// left uncommitted shows as uncommitted again. Elsewhere the commits are merged once the
/// applied files are committed (identical changes merge cleanly). `here`: where the command is
/// typed (no `-C` when it is the root).
pub fn commits_advice(offer: &Offered, here: Option<&Path>) -> String {
    let git = if here == Some(offer.root.as_path()) {
        "git".to_string()
    } else {
        format!("git -C {}", shell_word(&offer.root.to_string_lossy()))
    };
    let b = &offer.branch;
    match (&offer.current, offer.fast_forward) {
        (Some(cur), true) => format!(
            "the run's commits are branch {b}, and their changes are in the work tree now, \
             uncommitted (so `git merge --ff-only {b}` refuses); to have {cur} take the commits \
             (a fast-forward that writes no file): `{git} reset {b}`"
        ),
        (Some(cur), false) => format!(
            "the run's commits are branch {b}, and their changes are in the work tree now, \
             uncommitted; {cur} has moved since the run started (or a conflicting file was left \
             out), so they do not fast-forward: commit the applied files, then `{git} merge {b}`"
        ),
        (None, _) => format!(
            "the run's commits are branch {b}, and their changes are in the work tree now, \
             uncommitted (the head is detached: `{git} log {b}` shows them)"
        ),
    }
}

/// `s` as one shell word (single-quoted unless it is plain).
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+,:@%".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// `--merge`: each conflicting text file both sides changed is merged with `git merge-file`
/// against the start commit; a clean merge becomes the run's side (written next to the layer,
/// which stays as it is) and no longer conflicts. Returns the merged paths.
fn merge_conflicts(run: &Run, all: &mut [RootChanges]) -> Result<Vec<PathBuf>, JailError> {
    let dir = run.dir.join("merged");
    let mut merged = Vec::new();
    for (rc, layer) in all.iter_mut().zip(&run.record.layers) {
        for (n, it) in rc.set.items.iter_mut().enumerate() {
            let (Some(why), Some(old), Some(new)) = (&it.conflict, &it.old, &it.new) else {
                continue;
            };
            if old.kind != changes::SideKind::File || new.kind != changes::SideKind::File {
                continue;
            }
            let Some(head) = &layer.git_head else {
                it.conflict = Some(format!(
                    "{why}; not merged: the root was no git repository at the start"
                ));
                continue;
            };
            std::fs::create_dir_all(&dir)
                .map_err(|e| JailError::bad_path("--merge", &dir, e.to_string()))?;
            let out = dir.join(format!("{}-{n}", merged.len()));
            match git::merge_file(&rc.root, head, &it.path, &old.abs, &new.abs, &out) {
                Ok(true) => {
                    if let Some(new) = it.new.as_mut() {
                        new.abs = out;
                    }
                    it.conflict = None;
                    merged.push(rc.root.join(&it.path));
                }
                Ok(false) => {
                    it.conflict = Some(format!("{why}; git merge-file: overlapping edits"));
                }
                Err(e) => it.conflict = Some(format!("{why}; not merged: {e}")),
            }
        }
    }
    Ok(merged)
}

/// Applies `run` to its roots as `sel` says, under the roots' locks; refuses (nothing changed)
/// on any overlap unless asked to skip it.
pub fn apply_run(
    store: &Store,
    run: &mut Run,
    sel: &apply::Selection,
) -> Result<ApplyOutcome, ApplyRefused> {
    if run.record.state == RunState::Running && !run.interrupted() {
        return Err(ApplyRefused::Error(JailError::RunRefused {
            id: run.record.id.clone(),
            reason: format!(
                "still running (pid {}); apply it when it has finished",
                run.record.pid
            ),
        }));
    }
    recover(store, run).map_err(ApplyRefused::Error)?;
    let _locks = lock_all(store, run).map_err(ApplyRefused::Error)?;
    // Computed under the lock: another apply may have just changed the host.
    let mut all = changes(run).map_err(ApplyRefused::Error)?;
    // What `jail diff` showed is what is applied (review.rs); held until the apply is done.
    let _pinned = review::hold(run, &mut all).map_err(ApplyRefused::Error)?;
    let merged = if sel.merge {
        merge_conflicts(run, &mut all).map_err(ApplyRefused::Error)?
    } else {
        Vec::new()
    };
    let mut out = ApplyOutcome {
        applied: 0,
        left: Vec::new(),
        branch: None,
        offered: Vec::new(),
        finished: false,
        merged: Vec::new(),
    };
    // Every root checked before any is written.
    let conflicts = conflicts(&all, sel);
    if !conflicts.is_empty() {
        return Err(ApplyRefused::Conflicts(conflicts));
    }
    let work = run.dir.join("apply");
    for rc in &all {
        // The branch first: a fetch git refuses (its object checks) leaves the host as it was,
        // and a branch offered for files that then fail to apply is taken back.
        let offered = offer_commits(run, rc, sel, &mut out)?;
        match apply::apply(&rc.root, &rc.set, sel, &work) {
            Ok(done) => {
                let applied: Vec<PathBuf> = done
                    .applied
                    .iter()
                    .map(|p| rc.root.join(p))
                    .filter(|p| merged.contains(p))
                    .collect();
                // A merged file is recorded as merged only, not as jail's own write: should the
                // merge record be lost, the file counts as the host's change (a conflict,
                // refused), never as jail's (which would let the run's side over it).
                record_jail_wrote(run, MERGED, &applied);
                let touched: Vec<PathBuf> = done
                    .touched
                    .iter()
                    .filter(|p| !applied.contains(p))
                    .cloned()
                    .collect();
                note_own(run, &touched);
                if let Some(branch) = &offered {
                    let (current, forward) = git::head_against(&rc.root, branch);
                    let skipped = done.left.iter().any(|(_, why)| why.starts_with("conflict"));
                    out.offered.push(Offered {
                        root: rc.root.clone(),
                        branch: branch.clone(),
                        current,
                        fast_forward: forward && !skipped,
                    });
                }
                out.merged.extend(applied);
                out.applied += done.applied.len();
                out.left
                    .extend(done.left.into_iter().map(|(p, why)| (rc.root.join(p), why)));
            }
            Err(apply::ApplyError::Conflicts(c)) => {
                drop_offered(&rc.root, offered.as_deref());
                return Err(ApplyRefused::Conflicts(
                    c.into_iter()
                        .map(|(p, why)| (rc.root.join(p), why))
                        .collect(),
                ));
            }
            Err(apply::ApplyError::Failed(e, touched)) => {
                drop_offered(&rc.root, offered.as_deref());
                note_own(run, &touched);
                return Err(ApplyRefused::Error(JailError::bad_path(
                    "apply", &rc.root, e,
                )));
            }
        }
    }
    close_run(run, &mut out)?;
    Ok(out)
}

/// After an apply: a run with nothing left is removed; one with something left is partial.
fn close_run(run: &mut Run, out: &mut ApplyOutcome) -> Result<(), ApplyRefused> {
    if out.left.is_empty() {
        run.remove().map_err(ApplyRefused::Error)?;
        out.finished = true;
    } else {
        run.record.state = RunState::Partial;
        run.save().map_err(ApplyRefused::Error)?;
        // What is left stays reviewed only if all of it was shown (review.rs).
        review::carry_over(run);
    }
    Ok(())
}

/// The conflicts among what `sel` takes from every root (none when asked to skip them).
fn conflicts(all: &[RootChanges], sel: &apply::Selection) -> Vec<(PathBuf, String)> {
    let mut conflicts = Vec::new();
    if !sel.skip_conflicts {
        for rc in all {
            for it in rc.set.items.iter().filter(|i| i.conflict.is_some()) {
                if sel_takes(sel, &rc.set, &it.path) {
                    conflicts.push((
                        rc.root.join(&it.path),
                        it.conflict.clone().unwrap_or_default(),
                    ));
                }
            }
            for (p, why) in &rc.set.dir_conflicts {
                conflicts.push((rc.root.join(p), why.clone()));
            }
        }
    }
    conflicts
}

/// Offers the root's commits as a branch when the apply is whole and nothing in them is
/// flagged (or flagged changes are taken); says in `out.left` why not otherwise. The branch
/// offered, if one was.
fn offer_commits(
    run: &Run,
    rc: &RootChanges,
    sel: &apply::Selection,
    out: &mut ApplyOutcome,
) -> Result<Option<String>, ApplyRefused> {
    let mut offered: Option<String> = None;
    // The branch is part of a whole apply; a named one takes the paths it names only.
    if let (Some(review), false) = (&rc.commits, sel.named.is_empty()) {
        out.left.push((
            rc.root.join(".git"),
            format!(
                "the run's commits (head {}): a named apply takes only the paths it names; `jail apply {}` offers them",
                review.head, run.record.id
            ),
        ));
    } else if let Some(review) = &rc.commits {
        if review.flagged.is_empty() || sel.include_flagged {
            let branch = branch_name(run);
            git::offer_branch(&rc.root, &review.scratch, &branch).map_err(ApplyRefused::Error)?;
            offered = Some(branch.clone());
            out.branch = Some(branch);
        } else {
            let why: Vec<String> = review
                .flagged
                .iter()
                .map(|(p, f)| {
                    if p.as_os_str().is_empty() {
                        f.join("; ")
                    } else {
                        format!("{}: {}", p.display(), f.join("; "))
                    }
                })
                .collect();
            out.left.push((
                rc.root.join(".git"),
                format!(
                    "the run's commits (head {}) are not offered as a branch: flagged: {}",
                    review.head,
                    why.join(", ")
                ),
            ));
        }
    }
    Ok(offered)
}

fn sel_takes(sel: &apply::Selection, set: &ChangeSet, path: &Path) -> bool {
    let it = set.items.iter().find(|i| i.path == path);
    if sel.named.is_empty() {
        it.is_none_or(|i| !i.flagged() || sel.include_flagged)
    } else {
        sel.named.iter().any(|n| path.starts_with(n))
    }
}

/// Takes back the branch an apply offered before its files failed (all or nothing).
fn drop_offered(root: &Path, branch: Option<&str>) {
    if let Some(b) = branch {
        let _ = std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(["update-ref", "-d", &format!("refs/heads/{b}")])
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .output();
    }
}

/// Why an apply did nothing.
pub enum ApplyRefused {
    /// Overlaps with the host (absolute paths, why).
    Conflicts(Vec<(PathBuf, String)>),
    Error(JailError),
}

/// Removes `run` and its layers, under the roots' locks (an apply in progress finishes first).
pub fn discard(store: &Store, run: &Run) -> Result<(), JailError> {
    if run.record.state == RunState::Running && !run.interrupted() {
        return Err(JailError::RunRefused {
            id: run.record.id.clone(),
            reason: format!("still running (pid {}); stop it first", run.record.pid),
        });
    }
    recover(store, run)?;
    let _locks = lock_all(store, run)?;
    run.remove()
}

/// The change sets as the run report lists changes (`--report`): each file, symlink and
/// directory the run changed under a copy-on-write root, read from the layer like the patch.
pub fn report_items(changes: &[RootChanges]) -> Vec<crate::changes::Change> {
    use crate::changes::{Change, ChangeKind, FileType};
    let file_type = |s: &changes::Side| match s.kind {
        changes::SideKind::File => FileType::File,
        changes::SideKind::Symlink(_) => FileType::Symlink,
    };
    let mut out = Vec::new();
    for r in changes {
        for item in &r.set.items {
            let (kind, side) = match (&item.old, &item.new) {
                (None, Some(new)) => (ChangeKind::Created, new),
                (Some(old), None) => (ChangeKind::Deleted, old),
                (Some(old), Some(new))
                    if old.kind == new.kind
                        && changes::executable(old.mode) != changes::executable(new.mode)
                        && layer::read_regular(&old.abs).ok()
                            == layer::read_regular(&new.abs).ok() =>
                {
                    (ChangeKind::ModeChanged, new)
                }
                (Some(_), Some(new)) => (ChangeKind::Modified, new),
                (None, None) => continue,
            };
            let mut detail: Vec<String> = Vec::new();
            if !item.flags.is_empty() {
                detail.push(format!("flagged: {}", item.flags.join(", ")));
            }
            if let Some(c) = &item.conflict {
                detail.push(format!("conflict: {c}"));
            }
            out.push(Change {
                root: r.root.clone(),
                path: r.root.join(&item.path),
                kind,
                file_type: file_type(side),
                detail: (!detail.is_empty()).then(|| detail.join("; ")),
            });
        }
        for op in &r.set.dirs {
            let (kind, path) = match op {
                changes::DirOp::Remove(p) => (ChangeKind::Deleted, p),
                changes::DirOp::Make(p, _) => (ChangeKind::Created, p),
            };
            out.push(Change {
                root: r.root.clone(),
                path: r.root.join(path),
                kind,
                file_type: FileType::Dir,
                detail: None,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(current: Option<&str>, fast_forward: bool) -> Offered {
        Offered {
            root: "/work/my repo".into(),
            branch: "jail/0abc".into(),
            current: current.map(String::from),
            fast_forward,
        }
    }

    #[test]
    fn the_advice_after_an_apply_with_commits_names_the_command_that_works() {
        let ff = commits_advice(&offer(Some("main"), true), Some(Path::new("/work/my repo")));
        assert!(ff.contains("`git reset jail/0abc`"), "{ff}");
        assert!(ff.contains("main"), "{ff}");
        let elsewhere = commits_advice(&offer(Some("main"), true), Some(Path::new("/")));
        assert!(
            elsewhere.contains("`git -C '/work/my repo' reset jail/0abc`"),
            "{elsewhere}"
        );
        let moved = commits_advice(&offer(Some("main"), false), None);
        assert!(moved.contains("merge jail/0abc`"), "{moved}");
        assert!(!moved.contains("reset"), "{moved}");
        let detached = commits_advice(&offer(None, true), None);
        assert!(!detached.contains("reset"), "{detached}");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
    }
}
