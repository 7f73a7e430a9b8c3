//! Which of a session's execs ran when, and what changed under the copy-on-write roots while
//! each ran: the event stream's `exec` and `exec_end` lines and the `execs` field of its `wrote`
//! and `denied` lines, and the report's `execs`.
//!
//! Attribution is by time, exact where it can be:
//! - The kernel queues an inotify event inside the write call itself, so every change an exec's
//!   command made is in the watcher's queue by the time its exit is known here. The queue is read
//!   out ([`Feed::flush`]) before the exec is marked ended: no change of its own is seen as
//!   coming after it.
//! - The layer does not say which process wrote: a change seen while several execs ran names
//!   them all, and each of them is marked not `alone`; one seen while none ran (a process an
//!   exec left behind) names none. A process an earlier exec left behind may write while a
//!   later one runs: an exec that starts while such a process lives is not `alone` either
//!   (they are the children of the process above the forking one, besides it: orphans go to the
//!   namespace's init, or to the supervisor, the reaper without one).
//! - Bounded: the first [`MAX_EXECS`] execs are kept (the total counts all), and
//!   [`MAX_EXEC_PATHS`] paths of each.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Instant;

use serde_json::{Value, json};

use crate::run_report::{ExecItem, ExecsSection, MAX_EXEC_PATHS, MAX_EXECS};

/// How the log reaches the event stream: its lines, and reading out the watcher's queue.
pub struct Feed {
    pub emit: Box<dyn Fn(Value) + Send + Sync>,
    pub flush: Box<dyn Fn() + Send + Sync>,
}

/// A session's execs, shared by the server's relays, the layers' watcher and the report.
pub struct ExecLog {
    started: Instant,
    state: Mutex<State>,
    feed: OnceLock<Feed>,
    /// The forking process and its parent (the reaper of what execs leave behind), once known.
    forker: OnceLock<(i32, i32)>,
}

#[derive(Default)]
struct State {
    total: u64,
    items: Vec<Entry>,
    /// Indexes into `items` of the execs running now.
    running: Vec<usize>,
}

struct Entry {
    item: ExecItem,
    /// What `wrote` holds, to list each path once.
    seen: std::collections::HashSet<PathBuf>,
}

/// An exec as the log knows it: its number, and whether it is kept (past [`MAX_EXECS`] only
/// counted).
#[derive(Debug, Clone, Copy)]
pub struct ExecId {
    pub number: u64,
    index: Option<usize>,
}

impl Default for ExecLog {
    fn default() -> Self {
        ExecLog::new()
    }
}

impl ExecLog {
    pub fn new() -> ExecLog {
        ExecLog {
            started: Instant::now(),
            state: Mutex::new(State::default()),
            feed: OnceLock::new(),
            forker: OnceLock::new(),
        }
    }

    /// The session's forking process exists (its pid as this process sees it).
    pub fn forker_started(&self, pid: i32) {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if let Some(ids) = crate::sys::stat_ids(pid, &stat) {
            let _ = self.forker.set((pid, ids.ppid));
        }
    }

    /// Whether a process an earlier exec left behind is alive: a child of the reaper other
    /// than the forking process. Unknown counts as yes.
    fn strays(&self) -> bool {
        let Some(&(forker, reaper)) = self.forker.get() else {
            return true;
        };
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{reaper}/task")) else {
            return true;
        };
        tasks.flatten().any(|t| {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            children
                .split_whitespace()
                .any(|c| c.parse::<i32>().is_ok_and(|c| c != forker))
        })
    }

    /// Connects the event stream (once; a log without it still fills the report).
    pub fn set_feed(&self, feed: Feed) {
        let _ = self.feed.set(feed);
    }

    fn ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An exec is handed to the session: it runs from now.
    pub fn started(&self, command: &[OsString], cwd: Option<&Path>) -> ExecId {
        let ms = self.ms();
        // Asked only when no exec runs (else this one is not alone anyway): without a pid
        // namespace the reaper is the supervisor, with a thread per caller to read.
        let strays = !self.lock().running.is_empty() || self.strays();
        let id = {
            let mut s = self.lock();
            s.total += 1;
            let number = s.total;
            let alone = s.running.is_empty() && !strays;
            for &i in &s.running.clone() {
                s.items[i].item.alone = false;
            }
            let index = (s.items.len() < MAX_EXECS).then(|| {
                s.items.push(Entry {
                    item: ExecItem {
                        id: number,
                        command: command.to_vec(),
                        cwd: cwd.map(Path::to_path_buf),
                        started_ms: ms,
                        ended_ms: None,
                        exit_code: None,
                        alone,
                        wrote: Vec::new(),
                        wrote_over_limit: 0,
                    },
                    seen: Default::default(),
                });
                s.items.len() - 1
            });
            if let Some(i) = index {
                s.running.push(i);
            }
            ExecId { number, index }
        };
        if let Some(feed) = self.feed.get() {
            (feed.emit)(json!({
                "event": "exec",
                "exec": id.number,
                "command": command.iter().map(|a| json!(crate::byte_path::BytePath(a.into()))).collect::<Vec<_>>(),
                "cwd": cwd.map(crate::byte_path::Ref),
            }));
        }
        id
    }

    /// The exec ended with `exit_code` (None: jail could not tell, the session's own failure).
    /// What its command changed is read out of the watcher's queue first.
    pub fn ended(&self, id: ExecId, exit_code: Option<i32>) {
        if let Some(feed) = self.feed.get() {
            (feed.flush)();
        }
        let ms = self.ms();
        {
            let mut s = self.lock();
            if let Some(i) = id.index {
                s.running.retain(|r| *r != i);
                let item = &mut s.items[i].item;
                item.ended_ms = Some(ms);
                item.exit_code = exit_code;
            }
        }
        if let Some(feed) = self.feed.get() {
            (feed.emit)(json!({
                "event": "exec_end",
                "exec": id.number,
                "exit_code": exit_code,
            }));
        }
    }

    /// A change of `path` seen now (None: something else seen now, a denial): the numbers of the
    /// execs running, each of which lists the path.
    pub fn seen(&self, path: Option<&Path>) -> Vec<u64> {
        let mut s = self.lock();
        let State { items, running, .. } = &mut *s;
        if running.len() > 1 {
            for &i in running.iter() {
                items[i].item.alone = false;
            }
        }
        let mut numbers = Vec::with_capacity(running.len());
        for &i in running.iter() {
            let e = &mut items[i];
            numbers.push(e.item.id);
            let Some(path) = path else { continue };
            if e.seen.contains(path) {
                continue;
            }
            if e.item.wrote.len() >= MAX_EXEC_PATHS {
                e.item.wrote_over_limit += 1;
                continue;
            }
            e.seen.insert(path.to_path_buf());
            e.item.wrote.push(path.to_path_buf());
        }
        numbers
    }

    /// The report's section: every exec kept, in the order they started.
    pub fn section(&self) -> ExecsSection {
        let s = self.lock();
        ExecsSection {
            total: s.total,
            items: s.items.iter().map(|e| e.item.clone()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn argv(a: &str) -> Vec<OsString> {
        vec![OsString::from(a)]
    }

    /// A log whose forking process's reaper is a process with no children: no strays.
    fn log_without_strays() -> (ExecLog, std::process::Child) {
        let log = ExecLog::new();
        let reaper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let _ = log.forker.set((i32::MAX, reaper.id() as i32));
        (log, reaper)
    }

    #[test]
    fn an_exec_started_while_an_earlier_ones_process_lives_is_not_alone() {
        // The reaper is this test's own process: the `sleep` below is a stray of it.
        let log = ExecLog::new();
        let mut stray = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let _ = log.forker.set((i32::MAX, std::process::id() as i32));
        let a = log.started(&argv("a"), None);
        log.ended(a, Some(0));
        let _ = stray.kill();
        let _ = stray.wait();
        let (clean, mut reaper) = log_without_strays();
        let b = clean.started(&argv("b"), None);
        clean.ended(b, Some(0));
        let _ = reaper.kill();
        let _ = reaper.wait();
        assert!(!log.section().items[0].alone);
        assert!(clean.section().items[0].alone);
        // Unknown (no forking process yet) counts as not alone.
        let unknown = ExecLog::new();
        let c = unknown.started(&argv("c"), None);
        unknown.ended(c, Some(0));
        assert!(!unknown.section().items[0].alone);
    }

    #[test]
    fn a_change_names_the_execs_running_when_it_was_seen() {
        let (log, mut reaper) = log_without_strays();
        assert!(log.seen(Some(Path::new("/r/before"))).is_empty());
        let a = log.started(&argv("a"), None);
        assert_eq!(log.seen(Some(Path::new("/r/x"))), vec![1]);
        let b = log.started(&argv("b"), Some(Path::new("sub")));
        assert_eq!(log.seen(Some(Path::new("/r/y"))), vec![1, 2]);
        log.ended(a, Some(0));
        assert_eq!(log.seen(Some(Path::new("/r/z"))), vec![2]);
        log.ended(b, Some(3));
        let c = log.started(&argv("c"), None);
        assert_eq!(log.seen(Some(Path::new("/r/w"))), vec![3]);
        assert_eq!(log.seen(Some(Path::new("/r/w"))), vec![3]);
        log.ended(c, None);
        let s = log.section();
        assert_eq!(s.total, 3);
        let wrote = |i: usize| s.items[i].wrote.clone();
        assert_eq!(wrote(0), vec![PathBuf::from("/r/x"), "/r/y".into()]);
        assert_eq!(wrote(1), vec![PathBuf::from("/r/y"), "/r/z".into()]);
        assert_eq!(wrote(2), vec![PathBuf::from("/r/w")]);
        // a and b overlapped; c ran alone.
        assert_eq!(
            s.items.iter().map(|i| i.alone).collect::<Vec<_>>(),
            [false, false, true]
        );
        assert_eq!(s.items[1].exit_code, Some(3));
        assert_eq!(s.items[1].cwd.as_deref(), Some(Path::new("sub")));
        assert!(s.items[2].ended_ms.is_some() && s.items[2].exit_code.is_none());
        let _ = reaper.kill();
        let _ = reaper.wait();
    }

    #[test]
    fn the_queue_is_read_out_before_an_exec_ends() {
        let log = Arc::new(ExecLog::new());
        let lines = Arc::new(Mutex::new(Vec::<Value>::new()));
        let (emit_to, for_flush) = (Arc::clone(&lines), Arc::clone(&log));
        let flushed_to = Arc::clone(&lines);
        log.set_feed(Feed {
            emit: Box::new(move |v| emit_to.lock().unwrap().push(v)),
            // The watcher's drain: a change still queued when the exit came.
            flush: Box::new(move || {
                let execs = for_flush.seen(Some(Path::new("/r/late")));
                flushed_to
                    .lock()
                    .unwrap()
                    .push(json!({"event": "wrote", "execs": execs}));
            }),
        });
        let a = log.started(&argv("a"), None);
        log.ended(a, Some(0));
        let lines = lines.lock().unwrap();
        let events: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
        assert_eq!(events, ["exec", "wrote", "exec_end"]);
        assert_eq!(lines[1]["execs"], json!([1]));
        assert_eq!(log.section().items[0].wrote, vec![PathBuf::from("/r/late")]);
    }

    #[test]
    fn bounded_in_execs_and_in_paths() {
        let log = ExecLog::new();
        let a = log.started(&argv("a"), None);
        for i in 0..(MAX_EXEC_PATHS + 5) {
            log.seen(Some(Path::new(&format!("/r/{i}"))));
        }
        log.ended(a, Some(0));
        for _ in 1..(MAX_EXECS + 2) {
            let e = log.started(&argv("x"), None);
            log.ended(e, Some(0));
        }
        let s = log.section();
        assert_eq!(s.total as usize, MAX_EXECS + 2);
        assert_eq!(s.items.len(), MAX_EXECS);
        assert_eq!(s.items[0].wrote.len(), MAX_EXEC_PATHS);
        assert_eq!(s.items[0].wrote_over_limit, 5);
    }
}
