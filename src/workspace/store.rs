//! Where copy-on-write layers wait for review: one directory per run under jail's state
//! directory (`$XDG_STATE_HOME/jail`, else `~/.local/state/jail`), holding the run's record
//! (`run.json`) and one layer per copy-on-write root (`0/upper`, `0/work`, …), and the locks that
//! serialise applies per root (`locks/`).
//!
//! Choices, each for its attacker:
//! - The store is outside every copy-on-write root and hidden inside every jail, whole (its
//!   root, not only `runs/`), whatever the flags open around it: a run can neither read another
//!   run's layer nor write its own except through the overlay, nor plant a lock, a link or a
//!   pending run for the person's `jail apply` to meet.
//! - Every store jail has used is hidden, not only the one the current environment names: each
//!   is recorded in a registry ([`registry_dirs`]) that does not depend on `XDG_STATE_HOME`, so a
//!   run started under another one still hides the earlier stores. The registry lives in the
//!   default stores themselves, hidden like every store, so the command cannot write it; an
//!   entry only ever adds a hidden directory (one named `jail`), never shows one.
//! - Nothing in the store is reached through a symlink or opened when it is not a regular file
//!   (`O_NOFOLLOW | O_NONBLOCK`, then the type and owner checked on the descriptor): its
//!   directories must be real directories of this user's, and anything else is refused with
//!   its path, so a link planted there is never followed and a FIFO never blocks a review.
//! - Directories are 0700: another local user reads no one's pending changes.
//! - The start stamp is the change time the first layer's upper directory gets from its chmod
//!   just before the command starts, on the store's filesystem clock: any host change after it has a change time at or after the
//!   stamp (ctime cannot be set from user space), so apply finds every overlap; a change in the
//!   same clock tick before the start counts too (refused, never missed).
//!
//! The registry of stores is its own module, `registry`.

use std::fs;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::JailError;

mod registry;

use registry::register_in;
pub use registry::{
    ensure_registries, links_on_the_way, parse_registry, registered, registry_dirs,
    written_state_paths,
};

/// What a run's layers are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerKind {
    /// An overlay upper directory, mounted in the jail's user namespace.
    Overlay,
    /// A copy of the root taken at the start, compared with its manifest afterwards (no user
    /// namespaces, so no overlay).
    Copy,
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    /// The command is running (or jail was killed: the pid is gone).
    Running,
    /// Finished; its changes wait for `jail apply` or `jail discard`.
    Pending,
    /// Partly applied: what was refused (conflicts) or left out (flagged) is still here.
    Partial,
}

/// A run's record, `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: String,
    pub state: RunState,
    pub kind: LayerKind,
    /// The jail process while it runs.
    pub pid: u32,
    /// Seconds since the epoch, for `jail runs`.
    pub created: u64,
    /// The start stamp (seconds, nanoseconds): see the module's notes.
    pub start: (i64, i64),
    pub command: Vec<String>,
    pub layers: Vec<LayerRecord>,
}

/// One copy-on-write root of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LayerRecord {
    /// The host directory.
    #[serde(with = "crate::byte_path")]
    pub root: PathBuf,
    /// The layer's directory name inside the run (`0`, `1`, …).
    pub dir: String,
    /// The commit checked out in `root` when the run started, when it is a git work tree: the
    /// base of a merge, and what the run's own commits are compared with.
    pub git_head: Option<String>,
}

/// jail's state directory and the runs in it.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

/// A run in the store.
#[derive(Debug, Clone)]
pub struct Run {
    pub dir: PathBuf,
    pub record: RunRecord,
}

impl Store {
    /// `$XDG_STATE_HOME/jail`, else `$HOME/.local/state/jail`.
    pub fn locate() -> Result<Store, JailError> {
        let from = |var: &str| {
            std::env::var_os(var)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let base = from("XDG_STATE_HOME")
            .filter(|p| p.is_absolute())
            .or_else(|| {
                from("HOME")
                    .filter(|p| p.is_absolute())
                    .map(|h| h.join(".local/state"))
            })
            .ok_or_else(|| {
                JailError::unsupported(
                    "--cow",
                    "no state directory for the layers: set XDG_STATE_HOME (or HOME) to an \
                     absolute path",
                )
            })?;
        // The base as a real path (a home spelled through a symlink is still where the hide
        // rules must land); `jail` itself is never resolved: it must be a real directory.
        Ok(Store {
            root: crate::policy::real_path(&base).join("jail"),
        })
    }

    /// A store at `root` (tests, and `JAIL_STATE_DIR`-free callers).
    pub fn at(root: PathBuf) -> Store {
        Store { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory every run's layers are in (hidden inside every jail).
    /// The trash of finished runs' overlay scratch (see [`empty_trash`]).
    pub fn trash_dir(&self) -> PathBuf {
        self.runs_dir().join(TRASH)
    }

    pub fn runs_dir(&self) -> PathBuf {
        self.root.join("runs")
    }

    /// The journals of live runs and of runs whose supervisor was killed
    /// ([`crate::linux::run::journal`]).
    pub fn journal_dir(&self) -> PathBuf {
        self.root.join("journal")
    }

    fn locks_dir(&self) -> PathBuf {
        self.root.join("locks")
    }

    /// Makes the store's directories (0700) when missing, and checks that each is a real
    /// directory of this user's.
    pub fn ensure(&self) -> Result<(), JailError> {
        private_dir(&self.root)?;
        for dir in [self.runs_dir(), self.locks_dir()] {
            private_dir(&dir)?;
        }
        Ok(())
    }

    /// A new run with one empty layer per root, its record written, its start stamped.
    pub fn create_run(
        &self,
        kind: LayerKind,
        roots: &[PathBuf],
        command: &[std::ffi::OsString],
    ) -> Result<Run, JailError> {
        self.ensure()?;
        // A spare left by a run that changed nothing: one rename instead of making (and at the
        // end removing) five directories, which is most of what a --cow start-up costs on ext4.
        let mut reused = false;
        let (id, dir) = loop {
            let id = new_id()?;
            let dir = self.runs_dir().join(&id);
            if roots.len() == 1 && !reused {
                reused = true;
                if fs::rename(self.runs_dir().join(SPARE), &dir).is_ok() {
                    break (id, dir);
                }
            }
            reused = false;
            match fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => break (id, dir),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(JailError::bad_path("--cow", &dir, e.to_string())),
            }
        };
        check_dir(&dir)?;
        let mut layers = Vec::new();
        for (i, root) in roots.iter().enumerate() {
            let layer = dir.join(i.to_string());
            if !reused {
                for sub in [layer.clone(), layer.join("upper"), layer.join("work")] {
                    fs::DirBuilder::new()
                        .mode(0o700)
                        .create(&sub)
                        .map_err(|e| JailError::bad_path("--cow", &sub, e.to_string()))?;
                }
            }
            // The overlay's root takes the upper directory's mode: the root's own, not 0700.
            let meta = fs::metadata(root)
                .map_err(|e| JailError::bad_path("--cow", root, e.to_string()))?;
            let upper = layer.join("upper");
            {
                use std::os::unix::fs::PermissionsExt;
                fs::set_permissions(&upper, fs::Permissions::from_mode(meta.mode() & 0o7777))
                    .map_err(|e| JailError::bad_path("--cow", &upper, e.to_string()))?;
            }
            layers.push(LayerRecord {
                root: root.clone(),
                dir: i.to_string(),
                git_head: super::git::head_commit(root),
            });
        }
        // The start stamp: the first upper directory's change time, just set by the chmod
        // above (a chmod always sets it, on a reused spare too).
        let first = dir.join("0/upper");
        let meta = fs::metadata(&first)
            .map_err(|e| JailError::bad_path("--cow", &first, e.to_string()))?;
        let run = Run {
            dir,
            record: RunRecord {
                id,
                state: RunState::Running,
                kind,
                pid: std::process::id(),
                created: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0),
                start: (meta.ctime(), meta.ctime_nsec()),
                command: command
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect(),
                layers,
            },
        };
        // Written in place: the directory is new (or just renamed from the spare), and a reader
        // that finds it half-written skips it.
        let record = run.dir.join("run.json");
        let mut file = open_file(&record, Open::Replace)?;
        file.write_all(&serde_json::to_vec_pretty(&run.record).expect("serializable"))
            .map_err(|e| JailError::bad_path("--cow", &record, e.to_string()))?;
        Ok(run)
    }

    /// Every run in the store, oldest first; unreadable entries (and any that is not a real
    /// directory) are skipped. A store or `runs/` that is not a real directory of this user's is
    /// refused, never followed.
    pub fn list(&self) -> Result<Vec<Run>, JailError> {
        let runs_dir = self.runs_dir();
        for dir in [&self.root, &runs_dir] {
            if fs::symlink_metadata(dir).is_err() {
                return Ok(Vec::new());
            }
            check_dir(dir)?;
        }
        let Ok(entries) = fs::read_dir(&runs_dir) else {
            return Ok(Vec::new());
        };
        let mut runs: Vec<Run> = entries
            .flatten()
            .filter(|e| !e.file_name().as_encoded_bytes().starts_with(b"."))
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| Run::load(&e.path()).ok())
            .collect();
        // By when each started: `created` is whole seconds and runs often start within one,
        // the start stamp is the change time to the nanosecond (the id, random, only breaks
        // exact ties).
        runs.sort_by(|a, b| {
            (a.record.start, a.record.created, &a.record.id).cmp(&(
                b.record.start,
                b.record.created,
                &b.record.id,
            ))
        });
        Ok(runs)
    }

    /// The run whose id starts with `prefix` (unique), or an error naming the choices.
    pub fn find(&self, prefix: &str) -> Result<Run, JailError> {
        let unknown = |reason: String| JailError::UnknownRun {
            id: prefix.to_string(),
            reason,
        };
        if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(unknown(
                "not a run id (hexadecimal, as `jail runs` lists them)".into(),
            ));
        }
        let found: Vec<Run> = self
            .list()?
            .into_iter()
            .filter(|r| r.record.id.starts_with(prefix))
            .collect();
        match found.len() {
            1 => Ok(found.into_iter().next().expect("one")),
            0 => Err(unknown(format!(
                "no such run in {} (see `jail runs`)",
                self.runs_dir().display()
            ))),
            _ => Err(unknown(format!(
                "ambiguous ({}); give more of the id",
                found
                    .iter()
                    .map(|r| r.record.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// Waits for, and holds until dropped, the apply lock of `root`: applies to one root are
    /// serialised across processes (flock on a file in the store, never in the root).
    pub fn lock(&self, root: &Path) -> Result<Lock, JailError> {
        self.ensure()?;
        let name = sha1_smol::Sha1::from(root.as_os_str().as_encoded_bytes())
            .digest()
            .to_string();
        let path = self.locks_dir().join(&name[..16]);
        let file = open_file(&path, Open::Create)?;
        flock(&file, &path)?;
        Ok(Lock { _file: file })
    }

    /// Records this store in every registry of `dirs` ([`registry_dirs`]) that does not list it
    /// yet, so that later runs hide it whatever their `XDG_STATE_HOME`. Best effort: false when
    /// no registry could record it (and the store is no registry directory itself).
    pub fn register(&self, dirs: &[PathBuf]) -> bool {
        let mut recorded = false;
        for dir in dirs {
            recorded |= *dir == self.root || register_in(dir, &self.root).is_ok();
        }
        recorded
    }
}

/// Takes an exclusive flock on `file` (waits for it).
fn flock(file: &fs::File, path: &Path) -> Result<(), JailError> {
    // SAFETY: flock on a descriptor the caller owns; the lock lives as long as `file`.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
    if rc != 0 {
        return Err(JailError::bad_path(
            "lock",
            path,
            io::Error::last_os_error().to_string(),
        ));
    }
    Ok(())
}

/// Why a path in jail's state is refused.
enum Wrong {
    /// Not a real directory or regular file (a symlink, a FIFO…): what it is.
    Kind(String),
    /// Another user's.
    Owner(String),
}

/// Refuses `path` (in jail's state) with the reason, naming it and the fix.
fn refused(path: &Path, why: Wrong) -> JailError {
    let reason = match why {
        Wrong::Kind(what) => format!(
            "{what}; jail keeps copy-on-write layers there and follows no link and opens nothing \
             but regular files in it (a jailed command may have planted it): move it aside and \
             run again"
        ),
        Wrong::Owner(what) => format!(
            "{what}; jail uses only a state directory of its own user's: run jail as that user, \
             or set XDG_STATE_HOME to a directory of yours"
        ),
    };
    JailError::bad_path("jail state", path, reason)
}

/// What an lstat found, when it is not what the store expects: a real directory (`dir`) or a
/// regular file, owned by this user.
fn wrong_kind(meta: &fs::Metadata, dir: bool) -> Option<Wrong> {
    let t = meta.file_type();
    let kind = if t.is_symlink() {
        "a symlink"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_file() {
        "a regular file"
    } else {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            "a FIFO"
        } else if t.is_socket() {
            "a socket"
        } else {
            "a device"
        }
    };
    let want = if dir { t.is_dir() } else { t.is_file() };
    if !want {
        return Some(Wrong::Kind(format!("is {kind}")));
    }
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    (meta.uid() != me)
        .then(|| Wrong::Owner(format!("is owned by uid {}, not by uid {me}", meta.uid())))
}

/// `path` is a real directory (not a symlink) of this user's.
pub fn check_dir(path: &Path) -> Result<(), JailError> {
    let meta = fs::symlink_metadata(path)
        .map_err(|e| JailError::bad_path("jail state", path, e.to_string()))?;
    match wrong_kind(&meta, true) {
        Some(why) => Err(refused(path, why)),
        None => Ok(()),
    }
}

/// Where jail keeps its state and how to move it, for a message that cannot create it.
const WHERE: &str = "jail keeps its runs and journal in $XDG_STATE_HOME/jail (else \
                     ~/.local/state/jail): point XDG_STATE_HOME at a directory this user can write";

/// Makes `dir` (0700, its parents as needed) unless it exists, then checks it like
/// [`check_dir`]: a symlink in its place is refused, never followed.
fn private_dir(dir: &Path) -> Result<(), JailError> {
    if let Some(parent) = dir.parent() {
        if fs::symlink_metadata(parent).is_err() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|e| {
                    JailError::bad_path(
                        "jail state",
                        parent,
                        format!("cannot create: {e}; {WHERE}"),
                    )
                })?;
        }
    }
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(JailError::bad_path(
                "jail state",
                dir,
                format!("cannot create: {e}; {WHERE}"),
            ));
        }
    }
    check_dir(dir)
}

/// How [`open_file`] opens.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    Read,
    /// Read and write, created (0600) when missing, kept otherwise.
    Create,
    /// Write, created (0600) when missing, emptied otherwise.
    Replace,
}

/// Opens a file in the store: never through a symlink (`O_NOFOLLOW`), never blocking on a FIFO
/// (`O_NONBLOCK`), and only a regular file of this user's (checked by lstat first, for the
/// message, and on the descriptor, for the race).
fn open_file(path: &Path, how: Open) -> Result<fs::File, JailError> {
    if let Ok(meta) = fs::symlink_metadata(path) {
        if let Some(why) = wrong_kind(&meta, false) {
            return Err(refused(path, why));
        }
    }
    let mut o = fs::OpenOptions::new();
    match how {
        Open::Read => o.read(true),
        Open::Create => o.read(true).write(true).create(true).truncate(false),
        Open::Replace => o.write(true).create(true).truncate(true),
    };
    let file = o
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refused(path, Wrong::Kind("is a symlink".into())),
            Some(libc::ENXIO) => refused(path, Wrong::Kind("is a FIFO".into())),
            _ => JailError::bad_path("jail state", path, e.to_string()),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| JailError::bad_path("jail state", path, e.to_string()))?;
    match wrong_kind(&meta, false) {
        Some(why) => Err(refused(path, why)),
        None => Ok(file),
    }
}

/// Reads a regular file of the store, of at most `max` bytes, as [`open_file`] opens it.
fn read_file(path: &Path, max: u64) -> Result<String, JailError> {
    String::from_utf8(read_bytes(path, max)?)
        .map_err(|_| JailError::bad_path("jail state", path, "is not UTF-8"))
}

/// The bytes of the file at `path`, up to `max`.
fn read_bytes(path: &Path, max: u64) -> Result<Vec<u8>, JailError> {
    use std::io::Read;
    let file = open_file(path, Open::Read)?;
    let mut text = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut text)
        .map_err(|e| JailError::bad_path("jail state", path, e.to_string()))?;
    if text.len() as u64 > max {
        return Err(JailError::bad_path(
            "jail state",
            path,
            format!("is larger than {max} bytes"),
        ));
    }
    Ok(text)
}

/// The spare run directory's name in `runs/` (never listed: it starts with a dot).
const SPARE: &str = ".spare";
/// Where finished runs' overlay scratch waits to be removed, in `runs/` (hidden like it).
const TRASH: &str = ".trash";
/// Entries the trash may hold before a run's end empties it itself.
const TRASH_MAX: usize = 16;

/// Removes everything in the trash directory `trash` (`runs/.trash`).
pub fn empty_trash(trash: &Path) {
    if let Ok(entries) = fs::read_dir(trash) {
        for e in entries.flatten() {
            let _ = remove_tree(&e.path());
        }
    }
}

/// An apply lock, released when dropped (or when the process dies).
pub struct Lock {
    _file: fs::File,
}

impl Run {
    pub fn load(dir: &Path) -> Result<Run, JailError> {
        check_dir(dir)?;
        let path = dir.join("run.json");
        let text = read_file(&path, 16 << 20)?;
        let record = serde_json::from_str(&text)
            .map_err(|e| JailError::bad_path("run", &path, format!("unreadable record: {e}")))?;
        Ok(Run {
            dir: dir.to_path_buf(),
            record,
        })
    }

    /// Writes the record (whole, then renamed into place: a reader never sees half of it).
    pub fn save(&self) -> Result<(), JailError> {
        let path = self.dir.join("run.json");
        let tmp = self.dir.join("run.json.new");
        let text = serde_json::to_string_pretty(&self.record).expect("serializable");
        open_file(&tmp, Open::Replace)?
            .write_all(text.as_bytes())
            .and_then(|()| fs::rename(&tmp, &path))
            .map_err(|e| JailError::bad_path("run", &path, e.to_string()))
    }

    /// The layer directory of one root (its `upper` for an overlay, its copy otherwise).
    pub fn layer_dir(&self, layer: &LayerRecord) -> PathBuf {
        self.dir.join(&layer.dir)
    }

    /// The directory whose tree holds the layer's files.
    pub fn upper(&self, layer: &LayerRecord) -> PathBuf {
        self.layer_dir(layer).join("upper")
    }

    /// Whether the jail process of a running run is gone (killed before it could finish).
    pub fn interrupted(&self) -> bool {
        self.record.state == RunState::Running
            // SAFETY: kill with signal 0 only checks that the process exists.
            && unsafe { libc::kill(self.record.pid as i32, 0) } != 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    }

    /// A run that left nothing: kept as the spare for the next run when its only layer is
    /// empty (and there is no spare yet), removed otherwise.
    pub fn recycle(&self) -> Result<(), JailError> {
        let empty = self.record.layers.len() == 1
            && fs::read_dir(self.upper(&self.record.layers[0]))
                .is_ok_and(|mut d| d.next().is_none())
            && fs::symlink_metadata(self.dir.join("apply")).is_err()
            && fs::symlink_metadata(self.dir.join("own.json")).is_err();
        let spare = self.dir.parent().map(|p| p.join(SPARE));
        // A volatile overlay marks its work directory (work/work/incompat/volatile) and refuses
        // to mount on it again: the kernel's scratch goes, the directories stay. Removing it
        // costs ~1.3 ms of directory unlinks on ext4, on every run's way out: it is moved to
        // the trash in one rename instead, which the next run empties while its command runs.
        if empty {
            let scratch = self.layer_dir(&self.record.layers[0]).join("work/work");
            if !self.to_trash(&scratch) {
                remove_tree(&scratch)
                    .map_err(|e| JailError::bad_path("--cow", &self.dir, e.to_string()))?;
            }
        }
        match spare {
            Some(spare) if empty && fs::rename(&self.dir, &spare).is_ok() => Ok(()),
            _ => self.remove(),
        }
    }

    /// The trash of the store this run is in.
    pub fn trash_dir(&self) -> Option<PathBuf> {
        self.dir.parent().map(|runs| runs.join(TRASH))
    }

    /// Moves `path` (when it exists) into the trash; false when it could not be moved. The
    /// trash never holds more than [`TRASH_MAX`] entries: past that it is emptied now.
    fn to_trash(&self, path: &Path) -> bool {
        let Some(trash) = self.trash_dir() else {
            return false;
        };
        if fs::symlink_metadata(path).is_err() {
            return true;
        }
        let _ = std::os::unix::fs::DirBuilderExt::mode(&mut fs::DirBuilder::new(), 0o700)
            .create(&trash);
        let full = fs::read_dir(&trash).map_or(0, |d| d.count()) >= TRASH_MAX;
        if full {
            empty_trash(&trash);
        }
        // The kernel makes its work directory mode 0, and moving a directory to another parent
        // rewrites its `..`: without write permission on it that is EACCES for a non-root user.
        let _ = fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o700));
        fs::rename(path, trash.join(&self.record.id)).is_ok()
    }

    /// Removes the run and its layers. The overlay's work directory holds a directory the kernel
    /// made mode 0, so permissions are opened first.
    pub fn remove(&self) -> Result<(), JailError> {
        remove_tree(&self.dir).map_err(|e| JailError::bad_path("discard", &self.dir, e.to_string()))
    }
}

/// Removes a tree this user owns, opening directory permissions on the way.
pub fn remove_tree(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(_) => {
            let mut stack = vec![dir.to_path_buf()];
            while let Some(d) = stack.pop() {
                let _ = fs::set_permissions(&d, fs::Permissions::from_mode(0o700));
                if let Ok(entries) = fs::read_dir(&d) {
                    for e in entries.flatten() {
                        if e.file_type().is_ok_and(|t| t.is_dir()) {
                            stack.push(e.path());
                        }
                    }
                }
            }
            fs::remove_dir_all(dir)
        }
    }
}

/// Eight hexadecimal digits from the kernel's random source.
fn new_id() -> Result<String, JailError> {
    let mut buf = [0u8; 4];
    // SAFETY: getrandom writes at most buf.len() bytes into buf.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n != buf.len() as isize {
        return Err(JailError::io("getrandom", io::Error::last_os_error()));
    }
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::registry::{format_registry, read_registry};
    use super::*;

    struct T(PathBuf);
    impl T {
        fn new(name: &str) -> T {
            let d = std::env::temp_dir().join(format!("jail-store-{name}-{}", std::process::id()));
            let _ = remove_tree(&d);
            fs::create_dir_all(&d).unwrap();
            T(d)
        }
        fn p(&self, rel: &str) -> PathBuf {
            self.0.join(rel)
        }
    }
    impl Drop for T {
        fn drop(&mut self) {
            let _ = remove_tree(&self.0);
        }
    }

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c` is NUL-terminated.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn a_registry_names_only_plain_absolute_jail_directories() {
        let text = "/home/u/.local/state/jail\n/\nrelative/jail\n/a/../jail\n/a/./jail\n\
                    /x/jailx\n/s/jail\n/s/jail\n//s/jail\n/s/jail/\n\n/with space/jail\n/torn/ja";
        assert_eq!(
            parse_registry(text.as_bytes()),
            [
                PathBuf::from("/home/u/.local/state/jail"),
                PathBuf::from("/s/jail"),
                PathBuf::from("/with space/jail"),
            ]
        );
        let stores = [PathBuf::from("/a/jail"), PathBuf::from("/b c/jail")];
        assert_eq!(parse_registry(&format_registry(&stores)), stores);
    }

    #[test]
    fn registering_adds_once_and_drops_stores_that_are_gone() {
        let t = T::new("registry");
        let reg = t.p("home/.local/state/jail");
        for s in ["a/jail", "b/jail", "c/jail"] {
            fs::create_dir_all(t.p(s)).unwrap();
        }
        register_in(&reg, &t.p("a/jail")).unwrap();
        register_in(&reg, &t.p("b/jail")).unwrap();
        register_in(&reg, &t.p("a/jail")).unwrap();
        assert_eq!(read_registry(&reg).unwrap(), [t.p("a/jail"), t.p("b/jail")]);
        fs::remove_dir(t.p("a/jail")).unwrap();
        register_in(&reg, &t.p("c/jail")).unwrap();
        assert_eq!(read_registry(&reg).unwrap(), [t.p("b/jail"), t.p("c/jail")]);
        // Made private, and refused when it is not a real directory.
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            fs::metadata(&reg).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let link = t.p("linked/jail");
        fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&reg, &link).unwrap();
        let e = register_in(&link, &t.p("c/jail")).unwrap_err().to_string();
        assert!(
            e.contains("is a symlink") && e.contains(&*link.to_string_lossy()),
            "{e}"
        );
    }

    #[test]
    fn the_store_follows_no_link_and_opens_no_fifo() {
        let t = T::new("nofollow");
        let store = Store::at(t.p("state/jail"));
        store.ensure().unwrap();
        let outside = t.p("outside");
        let root = t.p("repo");
        fs::create_dir_all(&root).unwrap();
        let name = sha1_smol::Sha1::from(root.as_os_str().as_encoded_bytes())
            .digest()
            .to_string();
        let lock = t.p("state/jail/locks").join(&name[..16]);
        std::os::unix::fs::symlink(&outside, &lock).unwrap();
        let e = store.lock(&root).err().unwrap().to_string();
        assert!(
            e.contains("is a symlink") && e.contains(&*lock.to_string_lossy()),
            "{e}"
        );
        assert!(
            fs::symlink_metadata(&outside).is_err(),
            "the link was followed"
        );
        fs::remove_file(&lock).unwrap();
        mkfifo(&lock);
        let e = store.lock(&root).err().unwrap().to_string();
        assert!(e.contains("is a FIFO"), "{e}");
        fs::remove_file(&lock).unwrap();
        assert!(store.lock(&root).is_ok());

        // A run whose record is a FIFO is skipped, not waited for; a symlinked runs/ refused.
        fs::create_dir_all(t.p("state/jail/runs/deadbeef")).unwrap();
        mkfifo(&t.p("state/jail/runs/deadbeef/run.json"));
        assert!(store.list().unwrap().is_empty());
        fs::rename(t.p("state/jail/runs"), t.p("elsewhere")).unwrap();
        std::os::unix::fs::symlink(t.p("elsewhere"), t.p("state/jail/runs")).unwrap();
        let e = store.list().err().unwrap().to_string();
        assert!(e.contains("runs: is a symlink"), "{e}");
        assert!(store.ensure().is_err());
    }
}
