//! The supervisor's watch over a running command: its signals forwarded, its stops relayed,
//! the timeout and the caller's stop enforced, its children reaped, and how the run ended.

use super::*;

/// What the supervisor listens to besides its signals.
pub(super) struct Channels {
    /// Init's messages (namespace mode); without namespaces the command is our own child and its
    /// stops are seen by waitpid.
    pub(super) status: Option<OwnedFd>,
    /// The caller's control socket (`--control-fd`), until it asked for the stop.
    pub(super) stop_requests: Option<i32>,
}

/// Waits for `child`, forwarding signals, relaying stops and enforcing the timeout and the
/// caller's stop; returns how the run ended.
pub(super) fn supervise(
    child: Pid,
    sfd: &SignalFd,
    channels: Channels,
    tty: Option<i32>,
    timeout: Option<Duration>,
    reap_tree: bool,
    relay_stops: bool,
) -> RunEnd {
    let mut run = Supervised {
        child,
        tty,
        reap_tree,
        relay_stops,
        deadline: timeout.map(|t| Instant::now() + t),
        ending: false,
        timed_out: false,
        killed: false,
        status: channels.status,
        stop_requests: channels.stop_requests,
        end: RunEnd::default(),
    };
    loop {
        // SAFETY: the descriptor stays open for the run (the launch's control sender owns it).
        let control = run
            .stop_requests
            .map(|fd| unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) });
        let watched = [run.status.as_ref().map(|s| s.as_fd()), control];
        match next_event(sfd, &watched, run.deadline) {
            Event::Deadline => run.on_deadline(),
            Event::Ready(0) => run.on_status(),
            Event::Ready(_) => run.on_request(control),
            Event::Signal(info) if info.ssi_signo as i32 == libc::SIGCHLD => {
                if let Some(end) = run.on_child() {
                    return end;
                }
            }
            Event::Signal(info) => run.on_signal(&info),
        }
    }
}

/// What the supervisor knows of a run while it watches it.
pub(super) struct Supervised {
    child: Pid,
    tty: Option<i32>,
    /// No init: the supervisor reaps the tree itself.
    reap_tree: bool,
    relay_stops: bool,
    /// The timeout, then the end of the kill grace.
    deadline: Option<Instant>,
    /// Set when the timeout expired or the caller asked for the stop: SIGTERM went out.
    ending: bool,
    timed_out: bool,
    killed: bool,
    /// Init's status channel (None once init is gone).
    status: Option<OwnedFd>,
    /// The caller's control socket (None after its end closed).
    stop_requests: Option<i32>,
    end: RunEnd,
}

impl Supervised {
    /// The timeout: SIGTERM and the grace; at the grace's end, SIGKILL.
    fn on_deadline(&mut self) {
        if !self.ending {
            self.ending = true;
            self.timed_out = true;
            tracing::info!("timeout: sending SIGTERM, SIGKILL in {KILL_GRACE:?}");
            self.deadline = Some(begin_ending(self.child, !self.reap_tree));
        } else if !self.killed {
            self.killed = true;
            let _ = kill(self.child, Signal::SIGKILL);
            self.deadline = None;
        }
    }

    /// A message from init: the command stopped, or how it ended.
    fn on_status(&mut self) {
        let mut msg = [0u8; 1];
        let got = self
            .status
            .as_ref()
            .map(|st| read_full(st, &mut msg))
            .unwrap_or(0);
        if got == 0 {
            self.status = None; // init is gone; its SIGCHLD follows
        } else if msg[0] == MSG_STOPPED {
            if self.relay_stops {
                stop_with_command(self.child, self.tty);
            }
        } else if msg[0] == MSG_ENDED {
            if let Some(st) = &self.status {
                read_end(st, &mut self.end);
            }
        }
    }

    /// A request byte or the caller's end closed (EOF, an error): either way, stop; `K` kills
    /// at once. The bytes are read (a unix socket closed with unread data resets the caller's
    /// end, and the outcome written to it would be lost); after an EOF the socket is not
    /// watched again, so it cannot spin the loop.
    fn on_request(&mut self, control: Option<std::os::fd::BorrowedFd<'_>>) {
        let mut request = [0u8; 64];
        let got = control
            .and_then(|fd| nix::unistd::read(fd, &mut request).ok())
            .unwrap_or(0);
        if got == 0 {
            self.stop_requests = None;
        }
        self.end.stopped |= !self.ending;
        if request[..got].contains(&crate::sandbox::control::KILL) {
            if !self.killed {
                tracing::info!("kill requested: sending SIGKILL");
                let _ = kill(self.child, Signal::SIGKILL);
            }
            (self.ending, self.killed, self.deadline) = (true, true, None);
        } else if !self.ending {
            self.ending = true;
            tracing::info!("stop requested: sending SIGTERM, SIGKILL in {KILL_GRACE:?}");
            self.deadline = Some(begin_ending(self.child, !self.reap_tree));
        }
    }

    /// SIGCHLD: the run's end once the command (or init) exited.
    fn on_child(&mut self) -> Option<RunEnd> {
        match reap(self.child, self.reap_tree) {
            Reaped::Exited(code, signal) => {
                let mut end = std::mem::take(&mut self.end);
                if self.reap_tree {
                    if !kill_remaining_children() {
                        crate::text::say(
                            "jail: processes of the command survived every kill (no pid \
                             namespace): the writable trees may still change; failing the run",
                        );
                        end.timed_out |= self.timed_out;
                        end.code = crate::error::EXIT_JAIL_ERROR;
                        return Some(end);
                    }
                    end.signal = signal;
                } else if let Some(st) = &self.status {
                    // Init wrote how the command ended just before it exited.
                    drain_end_message(st, &mut end);
                }
                end.timed_out |= self.timed_out;
                end.code = if end.timed_out { EXIT_TIMEOUT } else { code };
                Some(end)
            }
            Reaped::Stopped if self.relay_stops => {
                stop_with_command(self.child, self.tty);
                None
            }
            Reaped::Stopped if self.tty.is_some() => {
                // It holds the terminal's foreground: left stopped, it would freeze the
                // user's terminal until the timeout.
                eprintln!(
                    "jail: the command stopped; continued (no job control with --timeout \
                     without a pid namespace)"
                );
                let _ = kill(Pid::from_raw(-self.child.as_raw()), Signal::SIGCONT);
                None
            }
            Reaped::Stopped | Reaped::Running => None,
        }
    }

    /// Any other signal sent to jail: passed on to the command.
    fn on_signal(&self, info: &nix::sys::signalfd::siginfo) {
        if info.ssi_code == SI_KERNEL {
            return;
        }
        if let Ok(sig) = Signal::try_from(info.ssi_signo as i32) {
            tracing::debug!("forwarding {sig}");
            if self.reap_tree {
                // No init: the command is our child, and its group is ours to signal.
                crate::linux::run::forward::pass_on(self.child, sig);
            } else {
                // Init passes it on to the command's group, inside the namespace.
                let _ = kill(self.child, sig);
            }
        }
    }
}

/// What ends one wait of a signal loop (the supervisor's and init's).
pub(super) enum Event {
    /// A signal arrived.
    Signal(libc::signalfd_siginfo),
    /// `others[i]` is readable (or at its end).
    Ready(usize),
    /// The deadline passed.
    Deadline,
}

/// Waits for a signal on `sfd`, one of `others` (`None` entries are skipped) readable, or the
/// deadline; the others are looked at first, in order, so that a message is read before the
/// SIGCHLD that may follow it.
pub(super) fn next_event(
    sfd: &SignalFd,
    others: &[Option<std::os::fd::BorrowedFd>],
    deadline: Option<Instant>,
) -> Event {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    loop {
        let timeout = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Event::Deadline;
                }
                let ms = left.as_millis().min(i32::MAX as u128) as i32;
                PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
            }
            None => PollTimeout::NONE,
        };
        let mut fds = vec![PollFd::new(sfd.as_fd(), PollFlags::POLLIN)];
        let watched: Vec<usize> = (0..others.len()).filter(|i| others[*i].is_some()).collect();
        fds.extend(
            watched
                .iter()
                .filter_map(|i| others[*i])
                .map(|fd| PollFd::new(fd, PollFlags::POLLIN)),
        );
        match poll(&mut fds, timeout) {
            Ok(0) | Err(_) => continue,
            Ok(_) => {}
        }
        let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
        if let Some(k) = (1..fds.len()).find(|k| ready(&fds[*k])) {
            return Event::Ready(watched[k - 1]);
        }
        if let Ok(Some(info)) = sfd.read_signal() {
            return Event::Signal(info);
        }
    }
}

/// The timeout or the caller's stop: SIGTERM to the command's process group (init passes it on
/// there; without init, `child` is the command) and SIGCONT to the group, since a stopped
/// command would never see the SIGTERM. Returns when SIGKILL follows.
pub(super) fn begin_ending(child: Pid, has_init: bool) -> Instant {
    if has_init {
        let _ = kill(child, Signal::SIGTERM);
    } else {
        crate::linux::run::forward::to_group(child, Signal::SIGTERM);
    }
    let _ = kill(Pid::from_raw(-child.as_raw()), Signal::SIGCONT);
    Instant::now() + KILL_GRACE
}

/// Reads what is left on init's pipe after it exited, for its end message.
pub(super) fn drain_end_message(status: &OwnedFd, end: &mut RunEnd) {
    let mut msg = [0u8; 1];
    while read_full(status, &mut msg) == 1 {
        if msg[0] == MSG_ENDED {
            read_end(status, end);
            return;
        }
    }
}

/// The command stopped: take the terminal back and stop too, so that the shell that started jail
/// sees its job stopped. When continued, give the terminal back (only if the shell gave it to us:
/// `bg` continues without it) and continue the command's group.
pub(super) fn stop_with_command(child: Pid, tty: Option<i32>) {
    if let Some(tty) = tty {
        // SAFETY: getpgrp only queries.
        hand_terminal(tty, unsafe { libc::getpgrp() });
    }
    // SIGTSTP, not SIGSTOP: the kernel discards it when jail's process group is orphaned (a pty
    // with no job-control shell, as agent harnesses run commands), where nothing would ever
    // continue jail; the command is then continued below instead.
    let _ = kill(nix::unistd::getpid(), Signal::SIGTSTP);
    if let Some(tty) = tty {
        // SAFETY: tcgetpgrp and getpgrp only query.
        if unsafe { libc::tcgetpgrp(tty) == libc::getpgrp() } {
            hand_terminal(tty, child.as_raw());
        }
    }
    let _ = kill(Pid::from_raw(-child.as_raw()), Signal::SIGCONT);
}

pub(super) enum Reaped {
    /// The exit code (128+N when killed) and the signal, if one ended it.
    Exited(i32, Option<i32>),
    Stopped,
    Running,
}

/// Reaps every exited child; tells whether `main` has ended (and how) or, when `stops` is asked
/// for, stopped.
pub(super) fn reap(main: Pid, stops: bool) -> Reaped {
    let mut result = Reaped::Running;
    let mut flags = WaitPidFlag::WNOHANG;
    if stops {
        flags |= WaitPidFlag::WUNTRACED;
    }
    loop {
        match waitpid(None, Some(flags)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == main => result = Reaped::Exited(code, None),
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == main => {
                result = Reaped::Exited(128 + sig as i32, Some(sig as i32))
            }
            Ok(WaitStatus::Stopped(pid, _)) if pid == main => {
                if !matches!(result, Reaped::Exited(..)) {
                    result = Reaped::Stopped;
                }
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return result,
            Ok(_) => {}
        }
    }
}

/// Without a pid namespace: kill every process of the tree, until none is left. Orphans are
/// reparented to us (we are the subreaper), but a chain of processes reaches us one generation
/// at a time: every round kills all our descendants at once, found through /proc, so that no
/// process survives to write into the writable trees after the check of what the command
/// planted. False when some are still alive after the deadline (the run then fails).
pub(super) fn kill_remaining_children() -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let me = std::process::id() as i32;
    loop {
        let tree = crate::sys::descendants(me);
        if tree.is_empty() {
            return true;
        }
        for p in &tree {
            let _ = kill(Pid::from_raw(*p), Signal::SIGKILL);
        }
        // Reap what has reached us; the rest is reparented to us as its parents die.
        while let Ok(st) = waitpid(None, Some(nix::sys::wait::WaitPidFlag::WNOHANG)) {
            if st == nix::sys::wait::WaitStatus::StillAlive {
                break;
            }
        }
        if std::time::Instant::now() > deadline {
            return crate::sys::descendants(me).is_empty();
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
