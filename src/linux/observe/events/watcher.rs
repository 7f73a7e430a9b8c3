//! The watch of the copy-on-write layers: inotify on every directory of each layer, from
//! outside the jail, each first change of a path reported to the stream (and every change to a
//! session's execs running then).

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use serde_json::json;

use super::{MAX_PATHS, Sink, Tally, lock};
use crate::linux::observe::execs::ExecLog;
use crate::workspace::store::LayerKind;

/// The changes of the layers, as inotify reports them.
pub(super) struct Watcher {
    inotify: Inotify,
    /// Each watched directory: the host path it stands for, and its path in the layer.
    dirs: HashMap<WatchDescriptor, (PathBuf, PathBuf)>,
    layers: Vec<(PathBuf, PathBuf)>,
    kind: LayerKind,
    seen: HashSet<PathBuf>,
    tally: Tally,
    /// A session's execs, told of every change.
    execs: Option<Arc<ExecLog>>,
}

fn mask() -> AddWatchFlags {
    AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_ATTRIB
        // Writes through a shared mapping raise no IN_MODIFY; the close after them does.
        | AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_ONLYDIR
        | AddWatchFlags::IN_DONT_FOLLOW
}

impl Watcher {
    /// Watches every directory of each layer (an overlay's upper is empty at the start; a
    /// copy holds the whole tree). None without layers or inotify.
    pub(super) fn new(layers: &[(PathBuf, PathBuf)], kind: LayerKind) -> Option<Watcher> {
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
            execs: None,
        };
        for (host, layer) in layers {
            w.watch_tree(host.clone(), layer.clone(), false);
        }
        Some(w)
    }

    /// As [`Watcher::new`] for overlay layers the command may have written already: what they
    /// hold is reported now.
    pub(super) fn catching_up(
        layers: &[(PathBuf, PathBuf)],
        sink: &Sink,
        execs: Option<Arc<ExecLog>>,
    ) -> Option<Watcher> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()?;
        let mut w = Watcher {
            inotify,
            dirs: HashMap::new(),
            layers: layers.to_vec(),
            kind: LayerKind::Overlay,
            seen: HashSet::new(),
            tally: Tally::default(),
            execs,
        };
        for (host, layer) in layers {
            for p in w.watch_tree(host.clone(), layer.clone(), true) {
                w.report(sink, p);
            }
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

    /// A change of `path`: reported the first time; each time, the execs running are told.
    fn report(&mut self, sink: &Sink, path: PathBuf) {
        let execs = self.execs.as_ref().map(|log| log.seen(Some(&path)));
        if self.seen.contains(&path) {
            return;
        }
        if self.seen.len() >= MAX_PATHS {
            self.tally.over_limit += 1;
            return;
        }
        let mut line = json!({"event": "wrote", "path": crate::byte_path::Ref(&path)});
        if let Some(execs) = execs {
            line["execs"] = json!(execs);
        }
        sink.emit(line);
        self.seen.insert(path);
        self.tally.paths += 1;
    }

    /// Reads every queued event.
    pub(super) fn drain(&mut self, sink: &Sink) {
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
                if is_dir && e.mask.contains(AddWatchFlags::IN_MOVED_FROM) {
                    // The watches below keep following the moved directory: their names are
                    // stale now (it may even have left the tree). Dropped here; where it
                    // arrives in the tree, it is watched and scanned again under its new name.
                    self.forget_below(&l);
                }
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

    /// Stops watching `layer` and every directory below it.
    fn forget_below(&mut self, layer: &Path) {
        let gone: Vec<WatchDescriptor> = self
            .dirs
            .iter()
            .filter(|(_, (_, l))| l.starts_with(layer))
            .map(|(wd, _)| *wd)
            .collect();
        for wd in gone {
            let _ = self.inotify.rm_watch(wd);
            self.dirs.remove(&wd);
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

    /// Runs the watch on a thread until the returned descriptor is closed; the watcher stays
    /// shared, for an exec's end to read its queue out.
    #[allow(clippy::type_complexity)]
    pub(super) fn spawn(
        mut self,
        sink: Arc<Sink>,
        execs: Option<Arc<ExecLog>>,
    ) -> Result<(JoinHandle<Tally>, OwnedFd, Arc<Mutex<Watcher>>), Tally> {
        let lost = Tally {
            lost: true,
            ..self.tally
        };
        let Ok((stop_read, stop_write)) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) else {
            return Err(lost);
        };
        // Polled without the lock: the same open inotify instance.
        let Ok(queue) = self.inotify.as_fd().try_clone_to_owned() else {
            return Err(lost);
        };
        self.execs = self.execs.take().or(execs);
        let watcher = Arc::new(Mutex::new(self));
        let ours = Arc::clone(&watcher);
        std::thread::Builder::new()
            .name("jail-events".into())
            .spawn(move || {
                loop {
                    let mut fds = [
                        nix::poll::PollFd::new(queue.as_fd(), nix::poll::PollFlags::POLLIN),
                        nix::poll::PollFd::new(stop_read.as_fd(), nix::poll::PollFlags::POLLIN),
                    ];
                    let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE);
                    let stopping = fds[1].revents().is_some_and(|r| !r.is_empty());
                    let mut w = lock(&ours);
                    w.drain(&sink);
                    if stopping {
                        return w.tally;
                    }
                }
            })
            .map(|thread| (thread, stop_write, watcher))
            .map_err(|_| lost)
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
