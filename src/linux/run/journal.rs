//! A run's journal: what the supervisor must do after the command ends, written before the
//! command starts, so that a supervisor killed with SIGKILL (the OOM killer, `kill -9`, a CI
//! runner's timeout) leaves its duties to the next jail instead of undone: the files the
//! command planted stay moved aside, the `--report` file gets a report, the cgroups go.
//!
//! Facts behind it:
//! - Where: `journal/` in jail's state directory ([`Store`]), which every jail hides whole
//!   whatever its flags (and which a run with writable trees makes: `prepare`). The command can
//!   neither read an entry (the baseline's hash key is in it) nor write one: an entry holds only
//!   what the supervisor decided, and finishing one re-runs the same check against the
//!   journalled baseline ([`Watch::decode`]) — it moves what the comparison finds, never a path
//!   a list names.
//! - Liveness: the supervisor holds an exclusive flock on its entry's directory for its whole
//!   life. The kernel drops a flock when the last descriptor of it closes, however the process
//!   ended; init holds a copy (it does not exec) and dies with the supervisor, so a lock that can
//!   be taken means the tree's supervisor and init are gone. No pid is compared: a pid is reused,
//!   and a supervisor that is pid 1 of its own pid namespace is pid 1 nowhere else.
//! - Made under a dot name and renamed into place once locked and written: a reader never takes
//!   the lock of an entry being made. A dot entry left by a supervisor killed while making it
//!   (nothing ran yet) is removed once its lock can be taken.
//! - Cost: nothing for a run without writable trees or a report; otherwise one directory, two
//!   small files and the baseline (56 bytes an entry, written once). Every start lists the
//!   directory (one `getdents`), as do `jail runs` and `jail status`.
//! - Order of the finishing: the run's cgroups are killed and removed first (without a pid
//!   namespace the command's children outlive the supervisor; the cgroup holds them all), then
//!   the check, the quarantine, the report, and one warning line.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::byte_path::BytePath;
use crate::changes as snapshot;
use crate::linux::after::planted::Watch;
use crate::policy::{Access, Policy};
use crate::run_report::RunReport;
use crate::text::{printable, say};
use crate::workspace::store::Store;

/// The entry's record, written at its making.
const RECORD: &str = "record.json";
/// The planted-file watch ([`Watch::encode`]).
const WATCH: &str = "watch";
/// What the current attempt made: cgroups, the layers, the report as it would read if killed.
const ATTEMPT: &str = "attempt.json";

/// What an entry says of its run.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    /// The supervisor as it saw itself (for the warning; liveness is the lock).
    pid: u32,
    /// The command, for the warning.
    command: Vec<String>,
    /// Seconds since the epoch.
    started: u64,
    /// The content-hash key of the baseline ([`snapshot::hash_key`]).
    hash_key: (u64, u64),
    /// The `--report` file jail opened (and emptied) for the run: its path and identity.
    report: Option<ReportFile>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReportFile {
    pub path: BytePath,
    pub dev: u64,
    pub ino: u64,
}

/// The current attempt's facts (the plan may change once before the command starts).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Attempt {
    cgroups: Vec<BytePath>,
    /// No mount view: filesystems mounted inside a writable tree were writable, unchecked.
    submounts_writable: bool,
    /// The report as the run would leave it killed, completed when finishing.
    report: Option<RunReport>,
}

/// A live run's entry, held by its supervisor; removed when dropped (the run's end did its
/// duties itself).
pub struct Entry {
    dir: PathBuf,
    _lock: File,
}

/// The journal directory of this environment's store, if there is a store.
fn journal_dir() -> Option<PathBuf> {
    Store::locate().ok().map(|s| s.journal_dir())
}

/// Opens the entry directory `dir` and takes its lock; with `wait` false, None when it is held.
fn lock(dir: &Path, wait: bool) -> Option<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
        .ok()?;
    let how = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    // SAFETY: flock on a descriptor we own.
    (unsafe { libc::flock(file.as_raw_fd(), how) } == 0).then_some(file)
}

/// Writes `bytes` as `dir/name` (whole, then renamed into place).
fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.new"));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    f.write_all(bytes)?;
    std::fs::rename(&tmp, dir.join(name))
}

/// Reads `dir/name`: a regular file of this user's, never through a link or a FIFO.
fn read_file(dir: &Path, name: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(dir.join(name))
        .ok()?;
    let meta = f.metadata().ok()?;
    // SAFETY: geteuid cannot fail.
    if !meta.is_file() || meta.uid() != unsafe { libc::geteuid() } {
        return None;
    }
    let mut out = Vec::new();
    f.read_to_end(&mut out).ok()?;
    Some(out)
}

/// Starts the journal of a run whose `watch` has writable trees or that writes `report`, before
/// the command starts; None when there is nothing to journal, or no store hidden from the
/// command of `policy` to keep it in (the run goes on: the journal is what a killed supervisor
/// leaves, not a layer of the confinement).
pub fn begin(watch: &Watch, report: Option<ReportFile>, policy: &Policy) -> Option<Entry> {
    if watch.roots().is_empty() && report.is_none() {
        return None;
    }
    let store = Store::locate().ok()?;
    // Hidden by its own rule, or inside a hidden home.
    if policy.access_at(store.root()) != Access::Hide {
        tracing::info!("no journal: the state directory is not hidden from this run");
        return None;
    }
    let journal = store.journal_dir();
    let made = crate::workspace::store::check_dir(store.root()).is_ok()
        && (std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&journal)
            .is_ok()
            || crate::workspace::store::check_dir(&journal).is_ok());
    if !made {
        tracing::info!("no journal: {} cannot be made", journal.display());
        return None;
    }
    let id = unpredictable();
    let making = journal.join(format!(".new-{id}"));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&making)
        .ok()?;
    let lock = lock(&making, true)?;
    let record = Record {
        pid: std::process::id(),
        command: policy
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        started: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        hash_key: snapshot::hash_key(),
        report,
    };
    // Written in place: no reader opens a dot entry, and the entry is renamed into view whole.
    let written = (|| -> std::io::Result<()> {
        let create = |name: &str| {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(making.join(name))
        };
        let mut out = std::io::BufWriter::new(create(WATCH)?);
        watch.encode(&mut out)?;
        out.flush()?;
        let json = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
        create(RECORD)?.write_all(&json)?;
        std::fs::rename(&making, journal.join(&id))
    })();
    match written {
        Ok(()) => Some(Entry {
            dir: journal.join(id),
            _lock: lock,
        }),
        Err(e) => {
            tracing::info!("no journal: {e}");
            let _ = std::fs::remove_dir_all(&making);
            None
        }
    }
}

impl Entry {
    /// The attempt about to start the command: its cgroups, whether the mount view holds, and
    /// the report as a killed run would leave it.
    pub fn attempt(&self, cgroups: &[PathBuf], mount_view: bool, report: Option<RunReport>) {
        let attempt = Attempt {
            cgroups: cgroups.iter().cloned().map(BytePath).collect(),
            submounts_writable: !mount_view,
            report,
        };
        let json = serde_json::to_vec(&attempt).expect("serializable");
        if let Err(e) = write_file(&self.dir, ATTEMPT, &json) {
            tracing::info!("journal: {e}");
        }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Finishes the runs whose supervisor died before it could, in this environment's
/// store; the fast path is one directory listing.
pub fn finish_dead_runs() {
    let Some(journal) = journal_dir() else { return };
    let Ok(entries) = std::fs::read_dir(&journal) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let dir = e.path();
        let Some(held) = lock(&dir, false) else {
            continue;
        };
        if name.as_encoded_bytes().starts_with(b".") {
            // Killed while making it: the command never started. (A maker that has not locked
            // its new entry yet loses it here and runs without a journal: its writes fail on
            // the removed directory, and `begin` gives up.)
            let _ = std::fs::remove_dir_all(&dir);
            continue;
        }
        finish(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        drop(held);
    }
}

/// Does what the dead run in `dir` left undone, and says so in one line.
fn finish(dir: &Path) {
    let record: Option<Record> =
        read_file(dir, RECORD).and_then(|b| serde_json::from_slice(&b).ok());
    let Some(record) = record else {
        say(format!(
            "jail: warning: {} is a run journal jail cannot read; removed it",
            dir.display()
        ));
        return;
    };
    let attempt: Attempt = read_file(dir, ATTEMPT)
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let mut done = Vec::new();
    let mut left = Vec::new();
    // The tree first: nothing of it may write while the trees are compared.
    let mut removed = 0;
    for cg in &attempt.cgroups {
        if crate::linux::layers::limits::remove_unowned(&cg.0, true) {
            removed += 1;
        } else {
            left.push(format!("cgroup {} not removed", cg.0.display()));
        }
    }
    if removed > 0 {
        done.push(format!("removed its {removed} cgroups"));
    }
    let watch = read_file(dir, WATCH).and_then(|b| Watch::decode(&b));
    let compared = watch.map(|w| {
        let saved = snapshot::set_hash_key(record.hash_key);
        let (changes, planted) = w.finish();
        snapshot::set_hash_key(saved);
        let moved = planted.units.len() + planted.guards.len();
        if crate::linux::after::quarantine::move_aside_all(&planted, attempt.submounts_writable) {
            done.push(format!(
                "checked its writable trees ({moved} planted {} moved aside)",
                if moved == 1 { "entry" } else { "entries" }
            ));
        } else {
            left.push("something it planted could not be moved aside (see above)".into());
        }
        (w.roots().to_vec(), changes)
    });
    if let (Some(file), Some(mut report)) = (&record.report, attempt.report) {
        let ended = SystemTime::now();
        report.ended = crate::run_report::rfc3339(ended);
        let started = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(record.started);
        report.duration_ms = ended
            .duration_since(started)
            .unwrap_or_default()
            .as_millis() as u64;
        report.outcome.error = Some(format!(
            "the supervisor was killed before the run ended (SIGKILL, or a crash); a later jail \
             (pid {}) did what it had left: moved aside what the command planted, wrote this \
             report; the command's exit status is unknown",
            std::process::id()
        ));
        if let Some((roots, changes)) = compared {
            report.changes = crate::run_report::changes_section(&roots, Ok(changes));
        }
        match write_report(file, &report) {
            Ok(()) => done.push(format!("wrote its report {}", file.path.0.display())),
            Err(why) => left.push(format!(
                "report {} not written: {why}",
                file.path.0.display()
            )),
        }
    }
    let command = record
        .command
        .iter()
        .map(|a| crate::text::shell_word(a))
        .collect::<Vec<_>>()
        .join(" ");
    say(format!(
        "jail: warning: the supervisor of an earlier run (pid {}, `{}`) was killed before the \
         run ended; {}{}",
        record.pid,
        printable(&command),
        if done.is_empty() {
            "nothing was left to do".to_string()
        } else {
            format!("finished it now: {}", done.join(", "))
        },
        if left.is_empty() {
            String::new()
        } else {
            format!("; {}", left.join("; "))
        }
    ));
}

/// Writes `report` to the file the run opened, if it is still that file, untouched: the same
/// inode, a regular file with one name, empty (as jail left it at the start; it is out of the
/// command's reach, so only the user changed it, and then it is theirs).
fn write_report(file: &ReportFile, report: &RunReport) -> Result<(), String> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&file.path.0)
        .map_err(|e| e.to_string())?;
    let meta = f.metadata().map_err(|e| e.to_string())?;
    if (meta.dev(), meta.ino()) != (file.dev, file.ino) || !meta.is_file() || meta.nlink() != 1 {
        return Err("it is another file now".into());
    }
    if meta.len() != 0 {
        return Err("it is not empty".into());
    }
    let mut text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    text.push('\n');
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_data())
        .map_err(|e| e.to_string())
}

/// A name no one guesses: 16 hex digits of kernel randomness.
fn unpredictable() -> String {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom writes at most the length given into the buffer.
    unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    format!("{:016x}", u64::from_ne_bytes(bytes))
}
