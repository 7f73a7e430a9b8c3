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
//! - The stream never blocks the command or jail: every write is non-blocking on a description
//!   of jail's own (a pipe given as `fd:N` is reopened, so the caller's end keeps its flags); a
//!   line that does not fit is dropped and counted, never half-written. A reader that goes away
//!   ends the stream, not the run.
//! - The watcher is a thread started from the supervisor once the command exists: the
//!   supervisor's signals are blocked by then, so the thread inherits the mask and never takes
//!   the SIGCHLD the supervisor waits for on its signalfd.
//! - Bounded: at most [`MAX_PATHS`] distinct paths are reported; the rest are counted. When the
//!   kernel's inotify queue overflows, the overlay's layer is scanned again (it holds exactly
//!   the changes), so no first write is lost; in the copy fallback the loss is said in `exit`.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use serde_json::{Value, json};

use super::audit::{Denial, DenialListener};
use super::supervisor::Confinement;
use crate::error::JailError;
use crate::policy::Policy;
use crate::workspace::store::LayerKind;

/// Distinct paths reported as `wrote`; the rest are counted in `exit`.
pub const MAX_PATHS: usize = 100_000;
/// How long a line that went out in part may wait for the reader before the stream ends.
const FINISH_LINE_MS: i32 = 200;

/// Where the events go, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    File(PathBuf),
    Fd(i32),
}

/// Parses `--events FILE|fd:N`.
pub fn target(spec: &str) -> Result<Target, JailError> {
    match spec.strip_prefix("fd:") {
        Some(n) => n
            .parse::<i32>()
            .ok()
            .filter(|fd| *fd > 2)
            .map(Target::Fd)
            .ok_or_else(|| {
                JailError::BadInput(format!(
                    "--events {}: fd:N takes a descriptor number above 2",
                    crate::text::printable(spec)
                ))
            }),
        None if spec.is_empty() => Err(JailError::BadInput("--events: give a file or fd:N".into())),
        None => Ok(Target::File(PathBuf::from(spec))),
    }
}

/// The open end jail writes to.
struct Sink {
    out: Mutex<Option<Out>>,
    started: Instant,
    dropped: AtomicU64,
    /// The reader went away or stalled mid-line: nothing more is written.
    ended: AtomicBool,
}

enum Out {
    /// A file, or a named pipe opened non-blocking by jail itself.
    File(File),
    /// The caller's pipe (`fd:N`), left blocking as the caller made it (the flag belongs to the
    /// description both share, and a pipe of another user cannot be reopened): written only
    /// when the line fits in its free space, so the write never waits.
    Pipe(File),
    /// A socket: each send is non-blocking and raises no SIGPIPE.
    Socket(OwnedFd),
}

impl Out {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Out::File(f) => f.write(buf),
            Out::Pipe(f) => {
                if !pipe_takes(f.as_raw_fd(), buf.len()) {
                    return Err(std::io::ErrorKind::WouldBlock.into());
                }
                f.write(buf)
            }
            Out::Socket(s) => {
                let flags = nix::sys::socket::MsgFlags::MSG_DONTWAIT
                    | nix::sys::socket::MsgFlags::MSG_NOSIGNAL;
                nix::sys::socket::send(s.as_raw_fd(), buf, flags).map_err(std::io::Error::from)
            }
        }
    }

    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Out::File(f) | Out::Pipe(f) => f.as_fd(),
            Out::Socket(s) => s.as_fd(),
        }
    }
}

impl Sink {
    /// Writes one line, whole or not at all.
    fn emit(&self, mut line: Value) {
        if self.ended.load(Ordering::Relaxed) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        line["ms"] = json!(self.started.elapsed().as_millis() as u64);
        let mut text = line.to_string();
        text.push('\n');
        let bytes = text.as_bytes();
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(o) = out.as_mut() else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        // A reader that closed its end raises SIGPIPE, whose default (jail restores it for the
        // command) would end jail: held back on this thread for the write, and taken after.
        let mut pipe = nix::sys::signal::SigSet::empty();
        pipe.add(nix::sys::signal::Signal::SIGPIPE);
        let mut before = nix::sys::signal::SigSet::empty();
        let held = nix::sys::signal::pthread_sigmask(
            nix::sys::signal::SigmaskHow::SIG_BLOCK,
            Some(&pipe),
            Some(&mut before),
        )
        .is_ok();
        let done = write_line(o, bytes, &self.dropped);
        if held {
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: sigtimedwait with a zero timeout only takes a pending SIGPIPE of this
            // thread, if there is one; the mask is then restored as it was.
            unsafe { libc::sigtimedwait(pipe.as_ref(), std::ptr::null_mut(), &zero) };
            let _ = nix::sys::signal::pthread_sigmask(
                nix::sys::signal::SigmaskHow::SIG_SETMASK,
                Some(&before),
                None,
            );
        }
        match done {
            Some(n) if n < bytes.len() => {
                self.ended.store(true, Ordering::Relaxed);
                self.dropped.fetch_add(1, Ordering::Relaxed);
                *out = None;
            }
            _ => {}
        }
    }
}

/// Writes `bytes` to `o`: the count written (short when the reader is gone or stalled
/// mid-line), or None when nothing went out because the reader is behind (counted).
fn write_line(o: &mut Out, bytes: &[u8], dropped: &AtomicU64) -> Option<usize> {
    let mut done = 0;
    while done < bytes.len() {
        match o.write(&bytes[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // Nothing of the line went out: the reader is behind, this line is lost.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && done == 0 => {
                dropped.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            // Part of it went out: the rest must follow, or the stream stops here (a
            // half line would corrupt every line after it).
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let mut pfd = [nix::poll::PollFd::new(
                    o.fd(),
                    nix::poll::PollFlags::POLLOUT,
                )];
                let wait = nix::poll::PollTimeout::try_from(FINISH_LINE_MS)
                    .unwrap_or(nix::poll::PollTimeout::ZERO);
                if !matches!(nix::poll::poll(&mut pfd, wait), Ok(n) if n > 0) {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    Some(done)
}

/// The stream of one launch, across its attempts (a run restarted with copied layers).
pub struct Events {
    target: Target,
    sink: Option<Arc<Sink>>,
    /// Made before the command starts; runs from its start on a thread of its own.
    watch: Arc<Mutex<WatchPhase>>,
    command: Vec<String>,
    /// The copy-on-write roots, as the host names them.
    roots: Vec<String>,
}

enum WatchPhase {
    Idle,
    Ready(Watcher),
    Running(JoinHandle<Tally>, OwnedFd),
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
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            roots: Vec::new(),
        }
    }

    /// Opens the stream for an attempt of `policy` (once; checked again on every attempt, the
    /// command's reach changes with the layers): never a place the command can write, and not
    /// through a symlink. `private_tmp`: the command's /tmp is its own.
    pub fn bind(&mut self, policy: &Policy, private_tmp: bool) -> Result<(), JailError> {
        let path = match &self.target {
            Target::Fd(fd) => {
                if self.sink.is_none() {
                    self.sink = Some(Arc::new(sink(open_fd(*fd)?)));
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
            self.sink = Some(Arc::new(sink(open_file(&abs)?)));
        }
        Ok(())
    }

    /// Prepares the watch of `layers` (host root, its layer directory) before the command
    /// starts, so that no write is missed.
    pub fn prepare(&mut self, layers: &[(PathBuf, PathBuf)], kind: LayerKind) {
        self.roots = layers
            .iter()
            .map(|(r, _)| r.display().to_string())
            .collect();
        let watcher = Watcher::new(layers, kind);
        *lock(&self.watch) = match watcher {
            Some(w) => WatchPhase::Ready(w),
            None => WatchPhase::Idle,
        };
    }

    /// Told of each denial the audit reader keeps.
    pub fn denial_listener(&self) -> Option<DenialListener> {
        let sink = Arc::clone(self.sink.as_ref()?);
        Some(Arc::new(move |d: &Denial| {
            sink.emit(json!({
                "event": "denied",
                "operation": d.operation,
                "path": d.path,
                "detail": d.detail,
                "pid": d.pid,
                "command": d.comm,
                "exe": d.exe,
            }))
        }))
    }

    /// When the command exists: the `start` event, and the watcher's thread.
    pub fn arm(&self, conf: &mut Confinement, denials: Result<(), String>) {
        let Some(sink) = self.sink.clone() else {
            return;
        };
        let watch = Arc::clone(&self.watch);
        let command = self.command.clone();
        let roots = self.roots.clone();
        conf.command_started.push(Box::new(move |pid| {
            sink.emit(json!({
                "event": "start",
                "pid": pid,
                "command": command,
                "cow": roots,
                "denials": match &denials {
                    Ok(()) => "reported".to_string(),
                    Err(why) => format!("not reported: {why}"),
                },
            }));
            let mut phase = lock(&watch);
            if let WatchPhase::Ready(_) = &*phase {
                let WatchPhase::Ready(w) = std::mem::replace(&mut *phase, WatchPhase::Idle) else {
                    unreachable!("matched above")
                };
                *phase = match w.spawn(Arc::clone(&sink)) {
                    Ok((thread, stop)) => WatchPhase::Running(thread, stop),
                    Err(tally) => WatchPhase::Done(tally),
                };
            }
        }));
    }

    /// After the command's tree is gone: the watcher reads what is left and stops.
    pub fn stop_watch(&self) {
        let mut phase = lock(&self.watch);
        if let WatchPhase::Running(..) = &*phase {
            let WatchPhase::Running(thread, stop) =
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
        sink.emit(line);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn sink(out: Out) -> Sink {
    Sink {
        out: Mutex::new(Some(out)),
        started: Instant::now(),
        dropped: AtomicU64::new(0),
        ended: AtomicBool::new(false),
    }
}

/// `--events FILE`: created, or an existing regular file of one name, or a named pipe with its
/// reader already there (jail never waits for one).
fn open_file(path: &Path) -> Result<Out, JailError> {
    crate::run_report::open_output(path, true)
        .map(Out::File)
        .map_err(|why| JailError::bad_path("--events", path, why))
}

/// `--events fd:N`: a pipe is written only where its free space holds the line, a socket with
/// non-blocking sends, a file as it is (none of them has its flags changed: the caller shares
/// the description).
fn open_fd(fd: i32) -> Result<Out, JailError> {
    let bad = |why: &str| JailError::BadInput(format!("--events fd:{fd}: {why}"));
    if !super::privileges::fd_is_open(fd) {
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
        libc::S_IFIFO => Ok(Out::Pipe(File::from(own))),
        libc::S_IFREG => Ok(Out::File(File::from(own))),
        _ => Err(bad("is neither a pipe, a socket nor a regular file")),
    }
}

/// Whether a write of `len` bytes to the pipe `fd` goes in without waiting. A pipe holds a
/// number of pages, and a write that does not fit in the last page's tail takes a page of its
/// own, so free bytes are not enough: the kernel waits for a free page. Lines of at most half
/// a page start a page only when the last one holds more than half a page, so every page but
/// the first (partly read) and the last holds more than half: with the unread bytes below
/// (pages - 2) half-pages, a page is free. A longer line goes only into an empty pipe.
fn pipe_takes(fd: i32, len: usize) -> bool {
    // SAFETY: F_GETPIPE_SZ only reads the pipe's size.
    let size = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
    let mut unread: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int, the bytes waiting in the pipe.
    let rc = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut unread) };
    // SAFETY: sysconf only queries.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size <= 0 || rc != 0 || page <= 0 || unread < 0 {
        return false;
    }
    let (size, unread, half) = (size as usize, unread as usize, page as usize / 2);
    let pages = size / (2 * half);
    if len > half || pages < 3 {
        return unread == 0 && len <= size;
    }
    unread + len <= pages.saturating_sub(2) * half
}

/// The changes of the layers, as inotify reports them.
struct Watcher {
    inotify: Inotify,
    /// Each watched directory: the host path it stands for, and its path in the layer.
    dirs: HashMap<WatchDescriptor, (PathBuf, PathBuf)>,
    layers: Vec<(PathBuf, PathBuf)>,
    kind: LayerKind,
    seen: HashSet<PathBuf>,
    tally: Tally,
}

fn mask() -> AddWatchFlags {
    AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_ONLYDIR
        | AddWatchFlags::IN_DONT_FOLLOW
}

impl Watcher {
    /// Watches every directory of each layer (an overlay's upper is empty at the start; a
    /// copy holds the whole tree). None without layers or inotify.
    fn new(layers: &[(PathBuf, PathBuf)], kind: LayerKind) -> Option<Watcher> {
        if layers.is_empty() {
            return None;
        }
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()?;
        let mut w = Watcher {
            inotify,
            dirs: HashMap::new(),
            layers: layers.to_vec(),
            kind,
            seen: HashSet::new(),
            tally: Tally::default(),
        };
        for (host, layer) in layers {
            w.watch_tree(host.clone(), layer.clone(), false);
        }
        Some(w)
    }

    /// Watches `layer` and every directory below it; `report`: its entries are changes.
    fn watch_tree(&mut self, host: PathBuf, layer: PathBuf, report: bool) -> Vec<PathBuf> {
        let mut changed = Vec::new();
        let mut todo = vec![(host, layer)];
        while let Some((host, layer)) = todo.pop() {
            match self.inotify.add_watch(&layer, mask()) {
                Ok(wd) => {
                    self.dirs.insert(wd, (host.clone(), layer.clone()));
                }
                Err(_) => self.tally.unwatched += 1,
            }
            let Ok(entries) = std::fs::read_dir(&layer) else {
                continue;
            };
            for entry in entries.flatten() {
                let (h, l) = (host.join(entry.file_name()), entry.path());
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                if report && self.is_change(&h, &l, is_dir) {
                    changed.push(h.clone());
                }
                if is_dir {
                    todo.push((h, l));
                }
            }
        }
        changed
    }

    /// An entry of the layer is a change, except a directory an overlay copied up only to
    /// hold a changed entry (the host has it, and it is not a replacement).
    fn is_change(&self, host: &Path, layer: &Path, is_dir: bool) -> bool {
        if self.kind != LayerKind::Overlay || !is_dir {
            return true;
        }
        let (Ok(h), Ok(l)) = (
            std::fs::symlink_metadata(host),
            std::fs::symlink_metadata(layer),
        ) else {
            return true;
        };
        !h.is_dir() || opaque(layer) || h.mode() != l.mode()
    }

    fn report(&mut self, sink: &Sink, path: PathBuf) {
        if self.seen.contains(&path) {
            return;
        }
        if self.seen.len() >= MAX_PATHS {
            self.tally.over_limit += 1;
            return;
        }
        sink.emit(json!({"event": "wrote", "path": path.display().to_string()}));
        self.seen.insert(path);
        self.tally.paths += 1;
    }

    /// Reads every queued event.
    fn drain(&mut self, sink: &Sink) {
        loop {
            let events = match self.inotify.read_events() {
                Ok(e) if !e.is_empty() => e,
                _ => return,
            };
            for e in events {
                if e.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    self.overflowed(sink);
                    continue;
                }
                if e.mask.contains(AddWatchFlags::IN_IGNORED) {
                    self.dirs.remove(&e.wd);
                    continue;
                }
                let (Some(name), Some((host, layer))) = (e.name, self.dirs.get(&e.wd).cloned())
                else {
                    continue;
                };
                let (h, l) = (host.join(&name), layer.join(&name));
                let is_dir = e.mask.contains(AddWatchFlags::IN_ISDIR);
                let arrived = e
                    .mask
                    .intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO);
                if is_dir && arrived {
                    // Entries made before the watch was in place are found in the directory.
                    for p in self.watch_tree(h.clone(), l.clone(), true) {
                        self.report(sink, p);
                    }
                }
                if self.is_change(&h, &l, is_dir) {
                    self.report(sink, h);
                }
            }
        }
    }

    /// The kernel's queue overflowed: an overlay's layer holds exactly the changes, so it is
    /// read again; a copy cannot tell, and says so.
    fn overflowed(&mut self, sink: &Sink) {
        if self.kind != LayerKind::Overlay {
            self.tally.lost = true;
            return;
        }
        for (host, layer) in self.layers.clone() {
            for p in self.watch_tree(host, layer, true) {
                self.report(sink, p);
            }
        }
    }

    /// Runs the watch on a thread until the returned descriptor is closed.
    fn spawn(mut self, sink: Arc<Sink>) -> Result<(JoinHandle<Tally>, OwnedFd), Tally> {
        let Ok((stop_read, stop_write)) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) else {
            return Err(Tally {
                lost: true,
                ..self.tally
            });
        };
        let lost = self.tally;
        std::thread::Builder::new()
            .name("jail-events".into())
            .spawn(move || {
                loop {
                    let mut fds = [
                        nix::poll::PollFd::new(self.inotify.as_fd(), nix::poll::PollFlags::POLLIN),
                        nix::poll::PollFd::new(stop_read.as_fd(), nix::poll::PollFlags::POLLIN),
                    ];
                    let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE);
                    let stopping = fds[1].revents().is_some_and(|r| !r.is_empty());
                    self.drain(&sink);
                    if stopping {
                        return self.tally;
                    }
                }
            })
            .map(|thread| (thread, stop_write))
            .map_err(|_| Tally { lost: true, ..lost })
    }
}

/// Whether an overlay marked this directory of its upper layer as replacing the one below.
fn opaque(dir: &Path) -> bool {
    let mut value = [0u8; 2];
    let Ok(path) = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str()))
    else {
        return false;
    };
    // SAFETY: lgetxattr reads into a buffer of the given size; the path is NUL-terminated.
    let n = unsafe {
        libc::lgetxattr(
            path.as_ptr(),
            c"user.overlay.opaque".as_ptr(),
            value.as_mut_ptr().cast(),
            value.len(),
        )
    };
    n == 1 && value[0] == b'y'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_bad_ones_say_why() {
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

    #[test]
    fn a_reader_that_went_away_ends_the_stream_not_jail() {
        let (r, w) = nix::unistd::pipe().unwrap();
        let s = sink(Out::File(File::from(w)));
        drop(r);
        // In a child with SIGPIPE's default action, as jail runs: it must survive the write.
        // SAFETY: the child only writes to a pipe and leaves with _exit.
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => {
                // SAFETY: restoring a default disposition runs no handler code.
                unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
                s.emit(json!({"event": "start"}));
                s.emit(json!({"event": "exit"}));
                let code = if s.ended.load(Ordering::Relaxed) {
                    0
                } else {
                    1
                };
                // SAFETY: _exit ends the forked child without running the harness's code.
                unsafe { libc::_exit(code) }
            }
            nix::unistd::ForkResult::Parent { child } => {
                let status = nix::sys::wait::waitpid(child, None).unwrap();
                assert_eq!(status, nix::sys::wait::WaitStatus::Exited(child, 0));
            }
        }
    }

    #[test]
    fn the_callers_blocking_pipe_is_written_only_where_the_line_fits() {
        let (r, w) = nix::unistd::pipe().unwrap();
        let s = sink(Out::Pipe(File::from(w)));
        // Blocking, never read: a write that did not fit would hang the test here.
        for _ in 0..2000 {
            s.emit(json!({"event": "wrote", "path": "/y".repeat(40)}));
        }
        assert!(s.dropped.load(Ordering::Relaxed) > 0);
        drop(s);
        let mut text = String::new();
        std::io::Read::read_to_string(&mut File::from(r), &mut text).unwrap();
        assert!(
            text.lines()
                .all(|l| serde_json::from_str::<Value>(l).is_ok())
        );
    }

    #[test]
    fn a_line_goes_out_whole_or_is_counted_as_dropped() {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK).unwrap();
        let s = sink(Out::File(File::from(w)));
        // Fill the pipe: every line that does not fit is dropped whole.
        for _ in 0..2000 {
            s.emit(json!({"event": "wrote", "path": "/x".repeat(40)}));
        }
        assert!(s.dropped.load(Ordering::Relaxed) > 0);
        drop(s);
        let mut text = String::new();
        std::io::Read::read_to_string(&mut File::from(r), &mut text).unwrap();
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["event"], "wrote");
        }
    }
}
