//! The live event stream for orchestrators (`--events FILE|fd:N`): one JSON object a line —
//! `start` when the command exists, `wrote` the first time each path under a copy-on-write root
//! changes, `denied` for each access Landlock refused (where the kernel's audit records can be
//! read), and `exit` last, with the counts of what the stream could not carry.
//!
//! Choices, each for its reader:
//! - Writes are seen in the layer, not in the tree: every first change of a path under an
//!   overlay is an entry the kernel makes in the upper directory (a copy-up, a new file, a
//!   whiteout), which inotify on the upper directories reports from outside the jail. Nothing
//!   the command can see, stop or forge; no walk of the root. The copy fallback has the whole
//!   tree in its layer: every directory of the copy is watched from the start.
//! - A parent directory copied up only to hold a changed file is not itself a change (it is
//!   the same directory on the host): it is watched, not reported; a directory replaced (opaque)
//!   or new is.
//! - The stream never blocks the command or jail: lines are queued, and a writer thread of the
//!   stream's own is the only one that waits for the reader. Checking the descriptor instead
//!   (free bytes, free pages) cannot be right for every kind: a pipe in packet mode, or pages
//!   the command filled with splice, take a whole page per write. A full queue drops the next
//!   line whole, counted; a reader that goes away ends the stream, not the run.
//! - The watcher is a thread started from the supervisor once the command exists: the
//!   supervisor's signals are blocked by then, so the thread inherits the mask and never takes
//!   the SIGCHLD the supervisor waits for on its signalfd.
//! - Bounded: at most [`MAX_PATHS`] distinct paths are reported; the rest are counted. When the
//!   kernel's inotify queue overflows, the overlay's layer is scanned again (it holds exactly
//!   the changes), so no first write is lost; in the copy fallback the loss is said in `exit`.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use serde_json::{Value, json};

use super::audit::{Denial, DenialListener};
use super::execs::{ExecLog, Feed};

mod watcher;
use crate::error::JailError;
use crate::linux::run::supervisor::CommandStarted;
use crate::policy::Policy;
use crate::workspace::store::LayerKind;
use watcher::Watcher;

/// Distinct paths reported as `wrote`; the rest are counted in `exit`.
pub const MAX_PATHS: usize = 100_000;
/// Lines waiting for a slow reader at most; the next ones are dropped and counted.
const QUEUE_MAX: usize = 4096;
/// How long jail's exit waits for the queue to be written out.
const DRAIN: std::time::Duration = std::time::Duration::from_millis(500);

/// Where the events go, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    File(PathBuf),
    Fd(i32),
    /// No stream: the layers' watch alone, for a session's report.
    Nowhere,
}

/// Parses `--events FILE|fd:N`.
pub fn target(spec: &std::ffi::OsStr) -> Result<Target, JailError> {
    use std::os::unix::ffi::OsStrExt;
    match spec.as_bytes().strip_prefix(b"fd:") {
        Some(n) => std::str::from_utf8(n)
            .ok()
            .and_then(|n| n.parse::<i32>().ok())
            .filter(|fd| *fd > 2)
            .map(Target::Fd)
            .ok_or_else(|| {
                JailError::bad_flag(
                    "--events",
                    String::from_utf8_lossy(spec.as_bytes()),
                    format!(
                        "--events {}: fd:N takes a descriptor number above 2",
                        crate::text::path_text(Path::new(spec))
                    ),
                )
            }),
        None if spec.is_empty() => Err(JailError::bad_flag(
            "--events",
            "",
            "--events: give a file or fd:N",
        )),
        None => Ok(Target::File(PathBuf::from(spec))),
    }
}

/// The end jail writes to, owned by the writer thread.
enum Out {
    /// A file or a pipe (a named pipe is opened by jail, `fd:N` is a duplicate of the caller's).
    File(File),
    /// A socket: sends raise no SIGPIPE.
    Socket(OwnedFd),
}

impl Out {
    fn write_all(&mut self, mut buf: &[u8]) -> std::io::Result<()> {
        while !buf.is_empty() {
            let n = match self {
                Out::File(f) => f.write(buf),
                Out::Socket(s) => nix::sys::socket::send(
                    s.as_raw_fd(),
                    buf,
                    nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
                )
                .map_err(std::io::Error::from),
            };
            match n {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // A description the caller made non-blocking: wait here, on this thread only.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let fd = match &*self {
                        Out::File(f) => f.as_fd(),
                        Out::Socket(s) => s.as_fd(),
                    };
                    let mut pfd = [nix::poll::PollFd::new(fd, nix::poll::PollFlags::POLLOUT)];
                    let _ = nix::poll::poll(&mut pfd, nix::poll::PollTimeout::NONE);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The lines waiting for the writer.
#[derive(Default)]
struct Queue {
    lines: std::collections::VecDeque<String>,
    /// The writer is inside a write (the reader may be behind).
    writing: bool,
    /// The reader went away: nothing more is queued.
    ended: bool,
}

/// The stream's lines, queued by whoever emits them and written by a thread of the stream's
/// own: only that thread ever waits for the reader. Whatever the descriptor is (a pipe in
/// packet mode, pages filled by splice, a socket, a file on a stuck NFS mount), an emitter never
/// blocks: when [`QUEUE_MAX`] lines wait, the next is dropped whole and counted.
struct Sink {
    queue: Mutex<Queue>,
    moved: std::sync::Condvar,
    started: Instant,
    dropped: AtomicU64,
}

impl Sink {
    /// A sink whose lines go nowhere (no writer; each is dropped at once).
    fn nowhere() -> Arc<Sink> {
        Arc::new(Sink {
            queue: Mutex::new(Queue {
                ended: true,
                ..Queue::default()
            }),
            moved: std::sync::Condvar::new(),
            started: Instant::now(),
            dropped: AtomicU64::new(0),
        })
    }

    fn emit(&self, line: Value) {
        self.push(line, false);
    }

    /// Queues one line (`last`: the `exit` line, which takes a place beyond the bound).
    fn push(&self, mut line: Value, last: bool) {
        line["ms"] = json!(self.started.elapsed().as_millis() as u64);
        let mut text = line.to_string();
        text.push('\n');
        let mut q = lock(&self.queue);
        if q.ended || (q.lines.len() >= QUEUE_MAX && !last) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        q.lines.push_back(text);
        self.moved.notify_all();
    }

    /// Waits at most `limit` for the queue to be written out (never for a reader that does not
    /// read: jail's exit is not held up by it).
    fn drain(&self, limit: std::time::Duration) {
        let deadline = Instant::now() + limit;
        let mut q = lock(&self.queue);
        while !q.ended && (!q.lines.is_empty() || q.writing) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            q = self
                .moved
                .wait_timeout(q, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// The writer thread's loop: the lines in order, until the reader goes away (a line is cut
    /// only when jail exits while this thread is stuck in its write).
    fn write_out(&self, mut out: Out) {
        loop {
            let line = {
                let mut q = lock(&self.queue);
                loop {
                    if let Some(l) = q.lines.pop_front() {
                        q.writing = true;
                        break l;
                    }
                    q.writing = false;
                    self.moved.notify_all();
                    q = self.moved.wait(q).unwrap_or_else(PoisonError::into_inner);
                }
            };
            let done = out.write_all(line.as_bytes());
            let mut q = lock(&self.queue);
            if done.is_err() {
                // EPIPE (SIGPIPE is blocked on this thread) or any other error: the stream ends.
                q.ended = true;
                self.dropped
                    .fetch_add(1 + q.lines.len() as u64, Ordering::Relaxed);
                q.lines.clear();
                q.writing = false;
                self.moved.notify_all();
                return;
            }
        }
    }
}

/// Starts the writer of `out` with every signal blocked (the thread inherits the mask it is
/// made with): it must never take the supervisor's SIGCHLD, nor die of a SIGPIPE.
fn start_writer(out: Out) -> Result<Arc<Sink>, String> {
    let sink = Arc::new(Sink {
        queue: Mutex::new(Queue::default()),
        moved: std::sync::Condvar::new(),
        started: Instant::now(),
        dropped: AtomicU64::new(0),
    });
    let all = nix::sys::signal::SigSet::all();
    let mut before = nix::sys::signal::SigSet::empty();
    nix::sys::signal::pthread_sigmask(
        nix::sys::signal::SigmaskHow::SIG_BLOCK,
        Some(&all),
        Some(&mut before),
    )
    .map_err(|e| format!("sigmask: {e}"))?;
    let for_thread = Arc::clone(&sink);
    let spawned = std::thread::Builder::new()
        .name("jail-events-out".into())
        .spawn(move || for_thread.write_out(out));
    let _ = nix::sys::signal::pthread_sigmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&before),
        None,
    );
    spawned.map_err(|e| format!("writer thread: {e}"))?;
    Ok(sink)
}

/// The stream of one launch, across its attempts (a run restarted with copied layers).
pub struct Events {
    target: Target,
    sink: Option<Arc<Sink>>,
    /// Made before the command starts; runs from its start on a thread of its own.
    watch: Arc<Mutex<WatchPhase>>,
    command: Vec<Value>,
    /// The copy-on-write roots, as the host names them.
    roots: Vec<PathBuf>,
    /// A session's execs: each change and denial names the ones running when it was seen.
    execs: Option<Arc<ExecLog>>,
}

enum WatchPhase {
    Idle,
    /// The layers are on tmpfs mounts init hands over with the view (host roots, where the
    /// mounts arrive): watched once the command exists, what they hold by then reported.
    Deferred(Vec<PathBuf>, crate::linux::layers::Mounts),
    Ready(Watcher),
    /// The thread, the descriptor whose closing stops it, and the watcher it drains (shared, so
    /// that an exec's end can read the queue out first).
    Running(JoinHandle<Tally>, OwnedFd, Arc<Mutex<Watcher>>),
    Done(Tally),
}

/// What the watcher could not carry.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    paths: u64,
    over_limit: u64,
    /// Directories that could not be watched (the inotify watch limit).
    unwatched: u64,
    /// The kernel's queue overflowed in the copy fallback: first writes may be missing.
    lost: bool,
}

impl Events {
    pub fn new(target: Target, command: &[std::ffi::OsString]) -> Events {
        Events {
            target,
            sink: None,
            watch: Arc::new(Mutex::new(WatchPhase::Idle)),
            command: command
                .iter()
                .map(|a| json!(crate::byte_path::BytePath(a.into())))
                .collect(),
            roots: Vec::new(),
            execs: None,
        }
    }

    /// A session's log of execs: its `exec` and `exec_end` lines go to this stream, and an exec's
    /// end reads the watcher's queue out first. After [`Events::bind`].
    pub fn attach_execs(&mut self, log: &Arc<ExecLog>) {
        self.execs = Some(Arc::clone(log));
        let Some(sink) = self.sink.clone() else {
            return;
        };
        let (flush_sink, watch) = (Arc::clone(&sink), Arc::clone(&self.watch));
        log.set_feed(Feed {
            emit: Box::new(move |line| sink.emit(line)),
            flush: Box::new(move || {
                if let WatchPhase::Running(_, _, w) = &*lock(&watch) {
                    lock(w).drain(&flush_sink);
                }
            }),
        });
    }

    /// Opens the stream for an attempt of `policy` (once; checked again on every attempt, the
    /// command's reach changes with the layers): never a place the command can write, and not
    /// through a symlink. `private_tmp`: the command's /tmp is its own.
    pub fn bind(&mut self, policy: &Policy, private_tmp: bool) -> Result<(), JailError> {
        let path = match &self.target {
            Target::Nowhere => {
                self.sink.get_or_insert_with(Sink::nowhere);
                return Ok(());
            }
            Target::Fd(fd) => {
                if self.sink.is_none() {
                    let out = open_fd(*fd)?;
                    self.sink = Some(
                        start_writer(out).map_err(|e| JailError::layer("events", "writer", e))?,
                    );
                }
                return Ok(());
            }
            Target::File(p) => p.clone(),
        };
        let base = std::env::current_dir()
            .map_err(|e| JailError::io("cannot read the current directory", e))?;
        let abs = crate::run_report::check_output_path(&path, &base, policy, private_tmp, true)
            .map_err(|why| JailError::bad_path("--events", &path, why))?;
        if self.sink.is_none() {
            let out = open_file(&abs)?;
            self.sink =
                Some(start_writer(out).map_err(|e| JailError::layer("events", "writer", e))?);
        }
        Ok(())
    }

    /// Prepares the watch of `layers` (host root, its layer directory) before the command
    /// starts, so that no write is missed.
    pub fn prepare(&mut self, layers: &[(PathBuf, PathBuf)], kind: LayerKind) {
        self.roots = layers.iter().map(|(r, _)| r.clone()).collect();
        let watcher = Watcher::new(layers, kind);
        *lock(&self.watch) = match watcher {
            Some(w) => WatchPhase::Ready(w),
            None => WatchPhase::Idle,
        };
    }

    /// As [`Events::prepare`], for overlay layers on tmpfs mounts that arrive in `mounts` (one
    /// per root, in order) once the view is built.
    pub fn prepare_on_tmpfs(&mut self, roots: &[PathBuf], mounts: crate::linux::layers::Mounts) {
        self.roots = roots.to_vec();
        *lock(&self.watch) = WatchPhase::Deferred(roots.to_vec(), mounts);
    }

    /// Told of each denial the audit reader keeps.
    pub fn denial_listener(&self) -> Option<DenialListener> {
        let sink = Arc::clone(self.sink.as_ref()?);
        let execs = self.execs.clone();
        Some(Arc::new(move |d: &Denial| {
            let mut line = json!({
                "event": "denied",
                "operation": d.operation,
                "path": d.path,
                "detail": d.detail,
                "pid": d.pid,
                "command": d.comm,
                "exe": d.exe,
            });
            if let Some(log) = &execs {
                line["execs"] = json!(log.seen(None));
            }
            sink.emit(line)
        }))
    }

    /// When the command exists: the `start` event, saying whether the denials are reported
    /// (the plan's [`crate::linux::run::plan::RunPlan::denials_reported`]), and the watcher's thread.
    pub fn command_started(&self, denials: Result<(), String>) -> Option<CommandStarted> {
        let sink = self.sink.clone()?;
        let watch = Arc::clone(&self.watch);
        let command = self.command.clone();
        let roots = self.roots.clone();
        let execs = self.execs.clone();
        Some(Box::new(move |pid| {
            sink.emit(json!({
                "event": "start",
                "pid": pid,
                "command": command,
                "cow": roots.iter().map(|r| crate::byte_path::Ref(r)).collect::<Vec<_>>(),
                "denials": match &denials {
                    Ok(()) => "reported".to_string(),
                    Err(why) => format!("not reported: {why}"),
                },
            }));
            let mut phase = lock(&watch);
            if let WatchPhase::Deferred(roots, mounts) = &*phase {
                let uppers: Vec<PathBuf> = lock(mounts)
                    .iter()
                    .map(crate::linux::layers::upper_of)
                    .collect();
                let layers: Vec<(PathBuf, PathBuf)> = roots.iter().cloned().zip(uppers).collect();
                *phase = match Watcher::catching_up(&layers, &sink, execs.clone()) {
                    Some(w) => WatchPhase::Ready(w),
                    None => WatchPhase::Idle,
                };
            }
            if let WatchPhase::Ready(_) = &*phase {
                let WatchPhase::Ready(w) = std::mem::replace(&mut *phase, WatchPhase::Idle) else {
                    unreachable!("matched above")
                };
                *phase = match w.spawn(Arc::clone(&sink), execs.clone()) {
                    Ok((thread, stop, w)) => WatchPhase::Running(thread, stop, w),
                    Err(tally) => WatchPhase::Done(tally),
                };
            }
        }))
    }

    /// After the command's tree is gone: the watcher reads what is left and stops.
    pub fn stop_watch(&self) {
        let mut phase = lock(&self.watch);
        if let WatchPhase::Running(..) = &*phase {
            let WatchPhase::Running(thread, stop, _) =
                std::mem::replace(&mut *phase, WatchPhase::Idle)
            else {
                unreachable!("matched above")
            };
            drop(stop);
            *phase = WatchPhase::Done(thread.join().unwrap_or(Tally {
                lost: true,
                ..Tally::default()
            }));
        }
    }

    /// The last line: how the run ended, and what the stream could not carry.
    pub fn exit(self, exit_code: i32, status: &str, error: Option<String>) {
        self.stop_watch();
        let Some(sink) = self.sink else { return };
        let tally = match &*lock(&self.watch) {
            WatchPhase::Done(t) => *t,
            _ => Tally::default(),
        };
        let mut line = json!({
            "event": "exit",
            "exit_code": exit_code,
            "status": status,
            "paths": tally.paths,
            "paths_over_limit": tally.over_limit,
            "dirs_unwatched": tally.unwatched,
            "writes_lost": tally.lost,
            "events_dropped": sink.dropped.load(Ordering::Relaxed),
        });
        if let Some(e) = error {
            line["error"] = json!(e);
        }
        sink.push(line, true);
        sink.drain(DRAIN);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `--events FILE`: created, or an existing regular file of one name, or a named pipe with its
/// reader already there (jail never waits for one).
fn open_file(path: &Path) -> Result<Out, JailError> {
    crate::run_report::open_output(path, true)
        .map(Out::File)
        .map_err(|why| JailError::bad_path("--events", path, why))
}

/// `--events fd:N`: a duplicate of the caller's pipe, socket or file, its flags left as the
/// caller made them (they belong to the description both share); only the writer thread ever
/// waits on it.
fn open_fd(fd: i32) -> Result<Out, JailError> {
    let bad = |why: &str| {
        JailError::bad_flag(
            "--events",
            format!("fd:{fd}"),
            format!("--events fd:{fd}: {why}"),
        )
    };
    if !crate::linux::layers::fd_is_open(fd) {
        return Err(bad("not an open descriptor"));
    }
    // SAFETY: fstat on a descriptor checked to be open, into a zeroed stat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(bad(&std::io::Error::last_os_error().to_string()));
    }
    // SAFETY: fcntl with F_GETFL only reads the descriptor's flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags & libc::O_ACCMODE == libc::O_RDONLY {
        return Err(bad("is open for reading only"));
    }
    // SAFETY: F_DUPFD_CLOEXEC makes a new descriptor of jail's own; the caller's stays as it is.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if dup < 0 {
        return Err(bad(&std::io::Error::last_os_error().to_string()));
    }
    // SAFETY: `dup` was just made and is owned here alone.
    let own = unsafe { OwnedFd::from_raw_fd(dup) };
    match st.st_mode & libc::S_IFMT {
        libc::S_IFSOCK => Ok(Out::Socket(own)),
        libc::S_IFIFO | libc::S_IFREG => Ok(Out::File(File::from(own))),
        _ => Err(bad("is neither a pipe, a socket nor a regular file")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_bad_ones_say_why() {
        let target = |s: &str| target(std::ffi::OsStr::new(s));
        assert_eq!(target("fd:7").unwrap(), Target::Fd(7));
        assert_eq!(
            target("out.jsonl").unwrap(),
            Target::File("out.jsonl".into())
        );
        for bad in ["fd:", "fd:x", "fd:1", ""] {
            let e = target(bad).unwrap_err().to_string();
            assert!(e.contains("--events"), "{bad}: {e}");
        }
    }

    /// A sink whose writer writes to `w`.
    fn writer_to(w: OwnedFd) -> Arc<Sink> {
        start_writer(Out::File(File::from(w))).unwrap()
    }

    #[test]
    fn a_reader_that_went_away_ends_the_stream_not_jail() {
        let (r, w) = nix::unistd::pipe().unwrap();
        drop(r);
        let s = writer_to(w);
        s.emit(json!({"event": "start"}));
        s.push(json!({"event": "exit"}), true);
        s.drain(std::time::Duration::from_secs(5));
        assert!(lock(&s.queue).ended);
        assert_eq!(s.dropped.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_reader_that_does_not_read_never_blocks_an_emitter() {
        // Packet mode: every write takes a page of the pipe's own, whatever its size.
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_DIRECT).unwrap();
        let s = writer_to(w);
        for _ in 0..(QUEUE_MAX + 200) {
            s.emit(json!({"event": "wrote", "path": "/y".repeat(40)}));
        }
        s.push(json!({"event": "exit"}), true);
        // The exit waits a bounded time, and the lines beyond the queue were dropped.
        s.drain(std::time::Duration::from_millis(50));
        assert!(s.dropped.load(Ordering::Relaxed) >= 100);
        drop(r);
    }

    #[test]
    fn a_descriptor_the_caller_made_non_blocking_is_waited_on_not_given_up() {
        lines_arrive_through(nix::fcntl::OFlag::O_NONBLOCK);
    }

    #[test]
    fn lines_go_out_whole_and_in_order() {
        lines_arrive_through(nix::fcntl::OFlag::empty());
    }

    /// 3000 lines and the exit through a pipe made with `flags`, read as they come: all of
    /// them, in order, none dropped.
    fn lines_arrive_through(flags: nix::fcntl::OFlag) {
        let (r, w) = nix::unistd::pipe2(flags).unwrap();
        if flags.contains(nix::fcntl::OFlag::O_NONBLOCK) {
            // Only the write end: the reader below blocks.
            // SAFETY: F_SETFL on the read end just made.
            unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&r), libc::F_SETFL, 0) };
        }
        let s = writer_to(w);
        // Read until the exit line (the writer thread keeps its end open for the process).
        let reader = std::thread::spawn(move || {
            // Late: the 3000 lines (~90 KiB) fill the pipe before the first read.
            std::thread::sleep(std::time::Duration::from_millis(200));
            let mut lines = Vec::new();
            for line in std::io::BufRead::lines(std::io::BufReader::new(File::from(r))) {
                let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
                let last = v["event"] == "exit";
                lines.push(v);
                if last {
                    break;
                }
            }
            lines
        });
        for i in 0..3000 {
            s.emit(json!({"event": "wrote", "n": i}));
        }
        s.push(json!({"event": "exit"}), true);
        s.drain(std::time::Duration::from_secs(10));
        let lines = reader.join().unwrap();
        assert_eq!(lines.len(), 3001);
        for (i, l) in lines[..3000].iter().enumerate() {
            assert_eq!(l["n"], i);
        }
        assert_eq!(s.dropped.load(Ordering::Relaxed), 0);
        assert!(lock(&s.queue).lines.is_empty());
    }
}
