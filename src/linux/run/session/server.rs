//! The supervisor's server of a session's control socket: one thread accepts, one thread per
//! caller relays. Each caller is checked first: the same user, and a process of the
//! supervisor's own pid namespace (a process inside any jail with namespaces is in another, and
//! one without them cannot see the socket's directory). An exec is handed to the process
//! inside with the caller's stdio; the supervisor keeps the relay (signals in, the exit code
//! out) and the exec's timeout, so the caller never speaks to anything inside.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::SessionSetup;
use crate::error::JailError;
use crate::linux::layers::exec_domain::ExecDomain;
use crate::linux::observe::execs::ExecLog;
use crate::run_semantics::KILL_GRACE;
use crate::session::dir::{self, Files};
use crate::session::wire::{self, ExecRequest};
use crate::session::{SessionInfo, SessionSpec};

pub(super) struct Server {
    spec: SessionSpec,
    files: Files,
    listener: UnixListener,
    /// To the process inside (SEQPACKET: one record per exec).
    channel: OwnedFd,
    /// The run's control socket: a byte there stops the session as a run is stopped.
    stop: OwnedFd,
    info: SessionInfo,
    execs: Arc<ExecLog>,
}

/// What the relays share.
struct Shared {
    channel: OwnedFd,
    stop: OwnedFd,
    state: Mutex<State>,
    execs: Arc<ExecLog>,
}

struct State {
    info: SessionInfo,
    last_activity: Instant,
    stopping: bool,
}

impl Server {
    pub(super) fn new(setup: &SessionSetup, channel: OwnedFd) -> Result<Server, JailError> {
        let spec = setup.spec.clone();
        let stop_fd = spec
            .stop_fd
            .ok_or_else(|| JailError::layer("session", "start", "no control socket"))?;
        // SAFETY: the serving process made this descriptor for the session and handed it here
        // alone; from now on this is its only owner.
        let stop = unsafe { OwnedFd::from_raw_fd(stop_fd) };
        let files = Files::of(&dir::ensure()?, &spec.name);
        // A socket left by a killed supervisor: this process holds the name's lock (taken
        // before the run began), so none lives.
        let _ = std::fs::remove_file(&files.socket);
        let listener = UnixListener::bind(&files.socket)
            .map_err(|e| JailError::bad_path("session socket", &files.socket, e.to_string()))?;
        Ok(Server {
            files,
            listener,
            channel,
            stop,
            info: SessionInfo {
                name: spec.name.clone(),
                pid: std::process::id(),
                started: 0,
                profile: setup.profile.clone(),
                level: setup.level.clone(),
                cwd: setup.cwd.clone(),
                running: 0,
                execs: 0,
                execs_isolated: matches!(setup.exec_domain, ExecDomain::Own { .. }),
            },
            spec,
            execs: Arc::clone(&setup.execs),
        })
    }

    pub(super) fn spawn(self) -> Result<(), JailError> {
        std::thread::Builder::new()
            .name("session".into())
            .spawn(move || self.serve())
            .map(drop)
            .map_err(|e| JailError::layer("session", "thread", e))
    }

    fn serve(self) {
        // The process inside says it is ready once every layer is in force; if it ends first,
        // the run ends and says why.
        match wire::recv_with_fds(self.channel.as_raw_fd(), 0) {
            Ok(Some((wire::READY, _))) => {}
            _ => return,
        }
        let mut info = self.info;
        info.started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        if let Ok(text) = serde_json::to_vec_pretty(&info) {
            let tmp = self.files.info.with_extension("json.tmp");
            if std::fs::write(&tmp, text).is_ok() {
                let _ = std::fs::rename(&tmp, &self.files.info);
            }
        }
        announce_ready();
        let shared = Arc::new(Shared {
            channel: self.channel,
            stop: self.stop,
            execs: self.execs,
            state: Mutex::new(State {
                info,
                last_activity: Instant::now(),
                stopping: false,
            }),
        });
        let idle = self.spec.idle_timeout_ms.map(Duration::from_millis);
        accept_loop(&self.listener, &shared, idle);
    }
}

/// `session start` waits for this line on the serving process's stdout; then stdout and
/// stderr go to /dev/null (the caller that read them has gone).
fn announce_ready() {
    // SAFETY: write of a static buffer to descriptor 1.
    unsafe { libc::write(1, b"ready\n".as_ptr().cast(), 6) };
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        // SAFETY: dup2 onto the standard descriptors this process owns.
        unsafe {
            libc::dup2(null.as_raw_fd(), 1);
            libc::dup2(null.as_raw_fd(), 2);
        }
    }
}

fn accept_loop(listener: &UnixListener, shared: &Arc<Shared>, idle: Option<Duration>) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    loop {
        let wait = match idle {
            Some(idle) => {
                let s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
                let quiet = s.last_activity.elapsed();
                if s.info.running == 0 && quiet >= idle && !s.stopping {
                    drop(s);
                    request_stop(shared);
                    Duration::from_secs(1)
                } else if s.info.running == 0 {
                    idle.saturating_sub(quiet)
                } else {
                    Duration::from_secs(1)
                }
            }
            None => Duration::from_secs(3600),
        };
        let ms = wait.as_millis().clamp(1, i32::MAX as u128) as i32;
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        match poll(
            &mut fds,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
            Ok(_) => {}
        }
        let Ok((conn, _)) = listener.accept() else {
            continue;
        };
        // Checked before a thread is spent on it: a refused caller gets its reason and is
        // dropped; callers past the bound are turned away, so that nothing can make the
        // supervisor hold a thread per connection without end.
        if let Err(why) = wire::check_peer(&conn) {
            refuse_now(&conn, &why);
            continue;
        }
        if CALLERS.load(Ordering::SeqCst) >= MAX_CALLERS {
            refuse_now(&conn, "too many callers at once");
            continue;
        }
        CALLERS.fetch_add(1, Ordering::SeqCst);
        let shared = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("session-caller".into())
            .spawn(move || {
                caller(&shared, conn);
                CALLERS.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            CALLERS.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Callers served at once (each a thread): an agent's parallel tool calls are far fewer.
const MAX_CALLERS: usize = 512;
static CALLERS: AtomicUsize = AtomicUsize::new(0);

/// Says why and closes, without waiting for the caller (the accept loop's own refusals).
fn refuse_now(conn: &UnixStream, why: &str) {
    let _ = conn.set_write_timeout(Some(Duration::from_millis(100)));
    let _ = wire::send(&mut &*conn, wire::REFUSED, why.as_bytes());
    let _ = conn.shutdown(std::net::Shutdown::Both);
}

fn request_stop(shared: &Shared) {
    let mut s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    if !s.stopping {
        s.stopping = true;
        let _ = nix::unistd::write(&shared.stop, &[crate::sandbox::control::STOP]);
    }
}

/// Says why, then reads what the caller still sends until it hangs up (at most a second): a
/// unix socket closed with unread data resets the other end, which would lose the reason.
fn refuse(conn: &UnixStream, why: &str) {
    let _ = wire::send(&mut &*conn, wire::REFUSED, why.as_bytes());
    let _ = conn.shutdown(std::net::Shutdown::Write);
    let until = Instant::now() + Duration::from_secs(1);
    let mut sink = [0u8; 4096];
    let mut left = wire::MAX_BODY + 64;
    while left > 0 {
        // One second in all, not per read: a caller that trickles bytes gets no longer.
        let rest = until.saturating_duration_since(Instant::now());
        if rest.is_zero() || conn.set_read_timeout(Some(rest)).is_err() {
            break;
        }
        match std::io::Read::read(&mut &*conn, &mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

/// One caller: its request, then (for an exec) the relay until the command ends.
fn caller(shared: &Shared, conn: UnixStream) {
    // The request comes at once or not at all: a caller that connects and says nothing does not
    // keep its thread.
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let Ok(Some((kind, fds))) = wire::recv_with_fds(conn.as_raw_fd(), 3) else {
        return;
    };
    let body = match wire::recv(&mut &conn) {
        Ok(Some((k, body))) if k == kind => body,
        _ => return refuse(&conn, "a malformed request"),
    };
    let _ = conn.set_read_timeout(None);
    match kind {
        wire::INFO => {
            let info = shared
                .state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .info
                .clone();
            let text = serde_json::to_vec(&info).unwrap_or_default();
            let _ = wire::send(&mut &conn, wire::INFO, &text);
        }
        wire::STOP => {
            request_stop(shared);
            // Said at once: the caller reads the session's outcome only after this (a refusal
            // instead must never be taken for the end of the session).
            let _ = wire::send(&mut &conn, wire::STOP, b"");
            // Held open until this process ends: its closing tells the caller the session has
            // ended and its outcome is written.
            let mut byte = [0u8; 1];
            let _ = std::io::Read::read(&mut &conn, &mut byte);
        }
        wire::EXEC => exec(shared, &conn, fds, &body),
        _ => refuse(&conn, "an unknown request"),
    }
}

fn exec(shared: &Shared, conn: &UnixStream, stdio: Vec<OwnedFd>, body: &[u8]) {
    let req: ExecRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return refuse(conn, &format!("a malformed command: {e}")),
    };
    if let Err(why) = req.check() {
        return refuse(conn, &why);
    }
    if stdio.len() != 3 {
        return refuse(conn, "an exec carries its stdin, stdout and stderr");
    }
    {
        let mut s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.stopping {
            drop(s);
            return refuse(conn, "the session is ending");
        }
        s.info.running += 1;
        s.info.execs += 1;
    }
    let cwd = req.cwd.as_ref().map(|c| {
        std::path::PathBuf::from(
            <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(c.to_vec()),
        )
    });
    let id = shared.execs.started(&req.argv(), cwd.as_deref());
    let code = relay(shared, conn, stdio, body, &req);
    shared.execs.ended(id, code.as_ref().ok().copied());
    {
        let mut s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
        s.info.running -= 1;
        s.last_activity = Instant::now();
    }
    match code {
        Ok(code) => {
            let _ = wire::send(&mut &*conn, wire::EXIT, &wire::int_body(code));
        }
        Err(why) => refuse(conn, &why),
    }
}

/// The next byte on `sock`, left there.
fn first_byte(sock: &UnixStream) -> Option<u8> {
    let mut b = [0u8; 1];
    match nix::sys::socket::recv(
        sock.as_raw_fd(),
        &mut b,
        nix::sys::socket::MsgFlags::MSG_PEEK,
    ) {
        Ok(1) => Some(b[0]),
        _ => None,
    }
}

/// The children of `pid` as this pid namespace numbers them (the monitor's: its command).
fn children_of(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// SIGKILL to each command's process group (its id is the leader's pid, in this namespace too)
/// and the command itself, then the monitor.
fn kill_from_outside(monitor: i32, commands: &[i32]) {
    for c in commands {
        // SAFETY: kill sends a signal; no memory is involved.
        unsafe {
            libc::kill(-c, libc::SIGKILL);
            libc::kill(*c, libc::SIGKILL);
        }
    }
    // SAFETY: as above.
    unsafe { libc::kill(monitor, libc::SIGKILL) };
}

/// Hands the command to the process inside and relays until it ends: the caller's signals in,
/// the exec's timeout held here, the exit code out.
fn relay(
    shared: &Shared,
    conn: &UnixStream,
    stdio: Vec<OwnedFd>,
    body: &[u8],
    req: &ExecRequest,
) -> Result<i32, String> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let ours = hand_over(shared, stdio, body)?;
    let mut r = Relay {
        ours,
        deadline: req
            .timeout_ms
            .map(|ms| Instant::now() + Duration::from_millis(ms)),
        timed_out: false,
        killing: false,
        caller_gone: false,
        inside_pids: None,
    };
    loop {
        let wait = match r.deadline {
            Some(d) => {
                let ms = d.saturating_duration_since(Instant::now()).as_millis();
                PollTimeout::try_from(ms.min(i32::MAX as u128) as i32).unwrap_or(PollTimeout::MAX)
            }
            None => PollTimeout::NONE,
        };
        // A gone caller's socket is not polled at all: the kernel reports its hang-up whatever
        // events are asked for, and the loop would spin without ever reaching the deadline.
        let watched = if r.caller_gone { 1 } else { 2 };
        let mut fds = [
            PollFd::new(r.ours.as_fd(), PollFlags::POLLIN),
            PollFd::new(conn.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds[..watched], wait) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(format!("poll: {e}")),
            Ok(_) => {}
        }
        let ready = |i: usize| i < watched && fds[i].revents().is_some_and(|r| !r.is_empty());
        let (inside, caller) = (ready(0), ready(1));
        if caller {
            r.on_caller(conn);
        }
        if inside {
            if let Some(end) = r.on_inside() {
                return end;
            }
        }
        // By the clock, not by a quiet poll: a busy caller (a stream of signals) must not
        // hold the timeout off.
        if r.deadline.is_some_and(|d| Instant::now() >= d) {
            if let Some(end) = r.on_deadline() {
                return end;
            }
        }
    }
}

/// The exec's stream to its monitor, made and sent with the caller's stdio; the request on it.
fn hand_over(shared: &Shared, stdio: Vec<OwnedFd>, body: &[u8]) -> Result<UnixStream, String> {
    let (ours, inside) = UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
    // The monitor names itself in a credentials message: the kernel gives its pid here.
    nix::sys::socket::setsockopt(&ours, nix::sys::socket::sockopt::PassCred, &true)
        .map_err(|e| format!("SO_PASSCRED: {e}"))?;
    let mut fds: Vec<i32> = stdio.iter().map(AsRawFd::as_raw_fd).collect();
    fds.push(inside.as_raw_fd());
    wire::send_with_fds(shared.channel.as_raw_fd(), wire::EXEC, &fds)
        .map_err(|e| format!("the session's process is gone ({e})"))?;
    drop((stdio, inside));
    wire::send(&mut &ours, wire::EXEC, body).map_err(|e| format!("handing over: {e}"))?;
    Ok(ours)
}

/// One exec's relay as it goes.
struct Relay {
    ours: UnixStream,
    /// The timeout, then the end of the grace.
    deadline: Option<Instant>,
    timed_out: bool,
    /// SIGTERM went out (the timeout, or the caller gone).
    killing: bool,
    caller_gone: bool,
    /// The monitor's pid and its command's, once the monitor has named itself.
    inside_pids: Option<(i32, Vec<i32>)>,
}

impl Relay {
    fn signal(&self, n: i32) {
        let _ = wire::send(&mut &self.ours, wire::SIGNAL, &wire::int_body(n));
    }

    fn begin_ending(&mut self) {
        self.killing = true;
        self.signal(libc::SIGTERM);
        self.deadline = Some(Instant::now() + KILL_GRACE);
    }

    /// The exec's timeout, then the grace: as a run's. The exec's end when nothing can be
    /// waited for any more.
    fn on_deadline(&mut self) -> Option<Result<i32, String>> {
        if !self.killing {
            self.timed_out = true;
            self.begin_ending();
            return None;
        }
        self.signal(libc::SIGKILL);
        // The monitor may not act (a command can stop it, as one process of a run can stop
        // another): the command's group and the monitor are killed from here.
        if let Some((monitor, commands)) = &self.inside_pids {
            kill_from_outside(*monitor, commands);
            self.deadline = None;
            return None;
        }
        // Stopped before it named itself: nothing here knows its pid or its command's, and
        // its word would never come. The caller is let go, saying so; what it started ends
        // with the session.
        Some(Err(
            "the command's monitor did not answer (stopped by another of the session's \
             processes before it named itself); what it started runs until the session stops"
                .into(),
        ))
    }

    /// A signal to pass on; or the caller went away, and nobody waits for the command: it ends
    /// as a stopped run's does.
    fn on_caller(&mut self, conn: &UnixStream) {
        match wire::recv(&mut &*conn) {
            Ok(Some((wire::SIGNAL, b))) => {
                if let Some(n) = wire::body_int(&b).filter(|n| (1..=64).contains(n)) {
                    self.signal(n);
                }
            }
            Ok(Some(_)) => {}
            _ => {
                self.caller_gone = true;
                if !self.killing {
                    self.begin_ending();
                }
            }
        }
    }

    /// Once SIGTERM went out, the command's end is not the exec's: what is left of its group
    /// has the grace, then is killed from here whatever the monitor does (a process of the group
    /// can stop or kill it).
    fn finish_group(&self) {
        let Some((monitor, commands)) = &self.inside_pids else {
            return;
        };
        let until = self.deadline.unwrap_or_else(Instant::now);
        // SAFETY: kill with signal 0 only asks whether the group exists.
        let alive = || commands.iter().any(|c| unsafe { libc::kill(-c, 0) } == 0);
        while alive() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        kill_from_outside(*monitor, commands);
    }

    /// The monitor's word: its pid, or the command's end (`Some`).
    fn on_inside(&mut self) -> Option<Result<i32, String>> {
        if self.inside_pids.is_none() && first_byte(&self.ours) == Some(b'P') {
            if let Ok(Some(monitor)) = crate::sys::recv_pid(self.ours.as_raw_fd()) {
                self.inside_pids = Some((monitor, children_of(monitor)));
            }
            return None;
        }
        let said = wire::recv(&mut &self.ours);
        if self.killing {
            self.finish_group();
        }
        Some(match said {
            Ok(Some((wire::EXIT, b))) => {
                let code = wire::body_int(&b).unwrap_or(crate::error::EXIT_JAIL_ERROR);
                Ok(match self.timed_out {
                    true => crate::error::EXIT_TIMEOUT,
                    false => code,
                })
            }
            _ if self.timed_out => Ok(crate::error::EXIT_TIMEOUT),
            _ => {
                // The monitor is gone without a word (a command killed it): what it started goes
                // too, as a run's tree would.
                if let Some((monitor, commands)) = &self.inside_pids {
                    kill_from_outside(*monitor, commands);
                }
                Err("the command's monitor ended before the command did".into())
            }
        })
    }
}
