//! A run's copy-on-write layers, from the launch's side: made before the command starts (so
//! the start stamp precedes every write), and after it ends either handed to a person (the
//! line that says how to review and apply), written out as a patch (`--patch`), or removed when
//! the run changed nothing.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::changes::Change;
use crate::error::JailError;
use crate::linux::layers::layer_bound::{self, Mounts, Watch};
use crate::linux::layers::limits::{Bound, Enforcement};
use crate::policy::{Access, Policy};
use crate::workspace::{self, store::LayerKind, store::Run, store::RunState, store::Store};

/// Told the command's pid and the run's cgroups once the command exists.
pub type TreeRecord = std::rc::Rc<dyn Fn(i32, &[PathBuf])>;

pub struct CowRun {
    run: Run,
    patch: Option<PathBuf>,
    /// Handed over (or written out): a drop no longer removes the layers.
    handed: bool,
    /// The layers' bound in force: bytes, and how it is held ([`CowRun::hold_to`]).
    bound: Option<(u64, Enforcement)>,
    /// The tmpfs mounts the layers are on while the run goes on (the bound held by tmpfs).
    mounts: Mounts,
    /// The watch of layers on disk (the bound held by the supervisor).
    watch: std::sync::Arc<std::sync::Mutex<Option<Watch>>>,
    /// What each copy took on disk as it was made (the copy-based layer).
    copied: Vec<u64>,
}

/// A run that never got to its end (jail's own error before the command started) leaves no
/// layer behind.
impl Drop for CowRun {
    fn drop(&mut self) {
        if !self.handed {
            let _ = self.run.recycle();
        }
    }
}

/// The layers of a run of `policy`, made now; None without copy-on-write roots.
pub fn start(
    policy: &Policy,
    patch: Option<&Path>,
    kind: LayerKind,
) -> Result<Option<CowRun>, JailError> {
    if policy.cow.is_empty() {
        if let Some(p) = patch {
            return Err(JailError::bad_path(
                "--patch",
                p,
                "needs a --cow path: only a copy-on-write run has a change set to write",
            ));
        }
        return Ok(None);
    }
    let patch = patch.map(|p| check_patch_path(p, policy)).transpose()?;
    let store = Store::locate()?;
    for root in &policy.cow {
        if store.root().starts_with(root) {
            return Err(JailError::bad_path(
                "--cow",
                root,
                format!(
                    "holds jail's state directory {} (an overlay cannot keep its layer inside its own root); set XDG_STATE_HOME elsewhere",
                    crate::text::path_text(store.root())
                ),
            ));
        }
        refuse_submounts(root)?;
    }
    let run = store.create_run(kind, &policy.cow, &policy.command)?;
    let mut cow = CowRun {
        run,
        patch,
        handed: false,
        bound: None,
        mounts: Mounts::default(),
        watch: Default::default(),
        copied: Vec::new(),
    };
    if kind == LayerKind::Copy {
        for l in &cow.run.record.layers {
            let upper = cow.run.upper(l);
            let made = workspace::copy::copy_tree(&l.root, &upper).and_then(|m| {
                let path = cow.run.layer_dir(l).join(workspace::copy::MANIFEST);
                let text = serde_json::to_vec(&m).map_err(std::io::Error::other)?;
                std::fs::write(path, text)?;
                Ok(m.disk_usage)
            });
            match made {
                Ok(bytes) => cow.copied.push(bytes),
                Err(e) => {
                    return Err(JailError::bad_path(
                        "--cow",
                        &l.root,
                        format!("copying it into the layer: {e}"),
                    ));
                }
            }
        }
    }
    Ok(Some(cow))
}

/// A mount beneath a root would be shown by the overlay as the empty directory under it (an
/// overlay's lower layer is one filesystem): refused, naming it, rather than hiding its files.
fn refuse_submounts(root: &Path) -> Result<(), JailError> {
    let Ok(info) = std::fs::read("/proc/self/mountinfo") else {
        return Ok(());
    };
    for crate::linux::mountinfo::Mount { point, .. } in crate::linux::mountinfo::mounts(&info) {
        if point != root && point.starts_with(root) {
            return Err(JailError::bad_path(
                "--cow",
                root,
                format!(
                    "holds another filesystem mounted at {}; an overlay shows only one filesystem: name that mount with --ro or --rw, or use a --cow path without mounts beneath",
                    crate::text::path_text(&point)
                ),
            ));
        }
    }
    Ok(())
}

/// `--patch FILE`: an absolute path not through a symlink, and not writable inside the jail but
/// through a copy-on-write root (the command cannot reach the host's file there).
fn check_patch_path(path: &Path, policy: &Policy) -> Result<PathBuf, JailError> {
    let bad = |why: String| JailError::bad_path("--patch", path, why);
    let base = std::env::current_dir().map_err(|e| bad(e.to_string()))?;
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    let parent = abs
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or_else(|| bad("has no parent directory".into()))?;
    let parent = std::fs::canonicalize(parent)
        .map_err(|e| bad(format!("directory {}: {e}", parent.display())))?;
    let name = abs.file_name().ok_or_else(|| bad("names no file".into()))?;
    let abs = parent.join(name);
    match std::fs::symlink_metadata(&abs) {
        Ok(m) if m.file_type().is_symlink() => return Err(bad("is a symlink".into())),
        Ok(m) if !m.is_file() => return Err(bad("is not a regular file".into())),
        _ => {}
    }
    let in_cow = policy.cow.iter().any(|c| abs.starts_with(c));
    if policy.access_at(&abs) == Access::Rw && !in_cow {
        return Err(bad("is writable inside the jail: the command could plant a link there; write it outside the writable paths".into()));
    }
    Ok(abs)
}

impl CowRun {
    /// Holds the layers to `bound` (the plan's): on tmpfs mounts ([`CowRun::layer_mounts`]), or
    /// watched on disk from the command's start, each against what it took then (the copy of
    /// the tree, or nothing).
    pub fn hold_to(&mut self, bound: &Bound) {
        let Some(bytes) = bound.value else {
            self.bound = None;
            return;
        };
        self.bound = Some((bytes, bound.enforced_by.clone()));
        if bound.enforced_by == Enforcement::Watch {
            let dirs = self
                .run
                .record
                .layers
                .iter()
                .enumerate()
                .map(|(i, l)| (self.run.upper(l), self.copied.get(i).copied().unwrap_or(0)))
                .collect();
            *lock(&self.watch) = Some(Watch::new(dirs, bytes));
        }
    }

    /// Where the supervisor puts the layers' tmpfs mounts, when the bound is held by tmpfs.
    pub fn layer_mounts(&self) -> Option<Mounts> {
        matches!(self.bound, Some((_, Enforcement::Tmpfs))).then(|| self.mounts.clone())
    }

    /// The host roots, in the layers' order.
    pub fn roots(&self) -> Vec<PathBuf> {
        self.run
            .record
            .layers
            .iter()
            .map(|l| l.root.clone())
            .collect()
    }

    /// The policy a copy-based run runs: each root read-only, its copy writable in its place
    /// (and the working directory moved into the copy).
    pub fn copy_policy(&self, policy: &Policy) -> Policy {
        let mut p = policy.clone();
        let mut copies = Vec::new();
        for l in &self.run.record.layers {
            let copy = self.run.upper(l);
            for r in p.rules.iter_mut().filter(|r| r.path == l.root) {
                r.access = Access::Ro;
            }
            p.rules.push(crate::policy::PathRule {
                path: copy.clone(),
                access: Access::Rw,
                kind: crate::policy::Kind::Dir,
                origin: crate::policy::Origin::Flag(crate::policy::COW_FLAG.into()),
            });
            if let Ok(rel) = policy.cwd.strip_prefix(&l.root) {
                p.cwd = copy.join(rel);
            }
            copies.push(copy);
        }
        p.rules.sort_by(|a, b| a.path.cmp(&b.path));
        // Still copy-on-write roots for the rest of the launch: not watched as --rw paths.
        p.cow = copies;
        p
    }

    /// (root, the directory its writes land in: the overlay's upper or the copy), for the
    /// event stream.
    pub fn watched(&self) -> Vec<(PathBuf, PathBuf)> {
        self.run
            .record
            .layers
            .iter()
            .map(|l| (l.root.clone(), self.run.upper(l)))
            .collect()
    }

    /// Once the command runs: the watch of layers on disk starts, and the trash of earlier
    /// runs' overlay scratch is emptied on a thread of its own (off the start-up and exit
    /// paths: an unfinished job is taken up by the next run). The hook runs in the supervisor
    /// after its signals are blocked, so the threads inherit the mask and never take the
    /// supervisor's SIGCHLD.
    pub fn started(&self) -> Option<super::supervisor::CommandStarted> {
        let trash = self
            .run
            .trash_dir()
            .filter(|t| std::fs::symlink_metadata(t).is_ok());
        let watch = lock(&self.watch)
            .is_some()
            .then(|| std::sync::Arc::clone(&self.watch));
        if trash.is_none() && watch.is_none() {
            return None;
        }
        Some(Box::new(move |pid| {
            if let Some(w) = &watch {
                if let Some(w) = lock(w).as_mut() {
                    w.start(pid);
                }
            }
            if let Some(trash) = trash.clone() {
                let _ = std::thread::Builder::new()
                    .name("jail-trash".into())
                    .spawn(move || workspace::store::empty_trash(&trash));
            }
        }))
    }

    /// Without a pid namespace (the copy-based layer) processes of the run can outlive a
    /// supervisor killed with SIGKILL: told the command's pid and the run's cgroups once the
    /// command exists, this records them in the run's directory, for `jail runs` and the
    /// review to find them (see [`workspace::survivors`]). None with the overlay: its pid
    /// namespace ends every process with the supervisor.
    pub fn tree_record(&self) -> Option<TreeRecord> {
        if self.run.record.kind != LayerKind::Copy {
            return None;
        }
        let dir = self.run.dir.clone();
        Some(std::rc::Rc::new(move |pid, cgroups: &[PathBuf]| {
            if let Err(e) = workspace::survivors::record_start(&dir, pid, cgroups) {
                tracing::warn!("recording the run's tree in {}: {e}", dir.display());
            }
        }))
    }

    /// The tree is gone: the layers on tmpfs are copied into the store, the watch stops, and a
    /// layer that met its bound is named (one line each).
    fn take_layers(&mut self) -> Result<(), JailError> {
        let Some((bytes, how)) = self.bound.clone() else {
            return Ok(());
        };
        let value = crate::policy::limits::size_text(bytes);
        let mounts: Vec<std::os::fd::OwnedFd> = std::mem::take(&mut *lock(&self.mounts));
        let mut met = Vec::new();
        match how {
            Enforcement::Tmpfs => {
                for (l, mount) in self.run.record.layers.iter().zip(&mounts) {
                    let to = self.run.upper(l);
                    layer_bound::copy_out(&layer_bound::upper_of(mount), &to, bytes).map_err(|e| {
                        JailError::bad_path(
                            "--cow",
                            &l.root,
                            format!(
                                "copying the run's layer into {}: {e}; the run's changes are lost",
                                to.display()
                            ),
                        )
                    })?;
                    if layer_bound::full(mount) {
                        met.push((&l.root, "writes past it failed (no space left on device)"));
                    }
                }
            }
            Enforcement::Watch => {
                let outcomes = lock(&self.watch).take().map(Watch::finish);
                for (l, o) in self
                    .run
                    .record
                    .layers
                    .iter()
                    .zip(outcomes.unwrap_or_default())
                {
                    match o {
                        layer_bound::Outcome::Exceeded => {
                            met.push((&l.root, "the run was stopped when it grew past it"))
                        }
                        layer_bound::Outcome::Reached => {
                            met.push((&l.root, "writes past it failed (file too large)"))
                        }
                        layer_bound::Outcome::Within => {}
                    }
                }
            }
            _ => {}
        }
        for (root, what) in met {
            crate::text::say(format!(
                "jail: the copy-on-write layer of {} reached its bound, --limit layer={value}: \
                 {what}; what it holds waits for review; a larger bound: --limit layer=SIZE",
                root.display()
            ));
        }
        Ok(())
    }

    /// Throws the layers away (the run did not start).
    pub fn abandon(self) {}

    /// (root, layer directory) for the mount plan.
    pub fn layers(&self) -> Vec<(PathBuf, PathBuf)> {
        self.run
            .record
            .layers
            .iter()
            .map(|l| (l.root.clone(), self.run.layer_dir(l)))
            .collect()
    }

    /// After the run (also after jail's own failure: the command may have written before it).
    /// Returns what the run changed, for the run report.
    /// What changed, and the id of the run that holds it for review (None when nothing waits:
    /// no change, or it went to `--patch`).
    pub fn finish(mut self) -> Result<(Vec<Change>, Option<String>), JailError> {
        // From here on the layer may hold the command's work: an error keeps it.
        self.handed = true;
        workspace::survivors::record_end(&self.run.dir);
        self.take_layers()?;
        let changes = workspace::changes(&self.run)?;
        let total = workspace::total(&changes);
        let items = workspace::report_items(&changes);
        let commits = changes.iter().any(|c| c.commit.is_some());
        if let Some(path) = &self.patch {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .custom_flags(libc::O_NOFOLLOW)
                .mode(0o644)
                .open(path)
                .map_err(|e| JailError::bad_path("--patch", path, e.to_string()))?;
            workspace::write_patch(&self.run, &changes, &mut f)
                .and_then(|()| f.flush())
                .map_err(|e| JailError::bad_path("--patch", path, e.to_string()))?;
            crate::text::say(format!(
                "jail: {} changed, written to {}",
                files(total.changed),
                path.display()
            ));
            self.handed = false;
            return Ok((items, None));
        }
        if total.changed == 0 && !commits && changes.iter().all(|c| c.set.is_empty()) {
            self.handed = false;
            return Ok((items, None));
        }
        self.run.record.state = RunState::Pending;
        self.run.save()?;
        let id = &self.run.record.id;
        let roots: Vec<String> = self
            .run
            .record
            .layers
            .iter()
            .map(|l| l.root.display().to_string())
            .collect();
        let flagged = if total.flagged > 0 {
            format!(" ({} flagged)", total.flagged)
        } else {
            String::new()
        };
        let commits = if commits { ", and commits" } else { "" };
        crate::text::say(format!(
            "jail: {} changed in {}{flagged}{commits}; review: jail diff {id}; apply: jail apply {id}",
            files(total.changed),
            roots.join(" ")
        ));
        Ok((items, Some(id.to_string())))
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn files(n: usize) -> String {
    if n == 1 {
        "1 file".into()
    } else {
        format!("{n} files")
    }
}
