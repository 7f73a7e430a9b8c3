//! A session's callers: start one (a jail process of its own that serves it, detached), start
//! commands in it, describe it, stop it. The command line's `jail session …` and `jail exec`
//! and the library's [`Session`] are this module.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::dir::{self, Files};
use super::wire::{self, ExecRequest};
use super::{SESSION_COMMAND, SessionSpec};
use crate::error::JailError;
use crate::policy::settings::RunSettings;
use crate::sandbox::outcome::Message;
use crate::sandbox::{Jail, Outcome};

/// What `jail session list` shows of a live session (its supervisor answers it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub name: String,
    /// The supervisor's pid (outside the sandbox).
    pub pid: u32,
    /// Seconds since the epoch when it became ready.
    pub started: u64,
    pub profile: String,
    /// The level the sandbox reached (`full`, `partial`, …).
    pub level: String,
    /// Where commands start (relative `--cwd`s are resolved here).
    #[serde(with = "crate::byte_path")]
    pub cwd: PathBuf,
    /// Commands running now.
    pub running: u64,
    /// Commands started so far.
    pub execs: u64,
    /// Each exec runs in a Landlock domain of its own, nested in the session's: a process one
    /// exec leaves behind cannot trace another's processes or reach them through /proc (their
    /// descriptors, memory, environment). False where the session cannot give it (no Landlock,
    /// `--allow-userns`, `--allow-unix-sockets`).
    #[serde(default)]
    pub execs_isolated: bool,
}

/// One command's options in a session.
#[derive(Debug, Clone, Default)]
pub struct ExecOptions {
    /// The working directory, relative to the session's (or absolute inside it).
    pub cwd: Option<PathBuf>,
    /// Variables set over the session's environment.
    pub env: Vec<(OsString, OsString)>,
    /// SIGTERM after this long, SIGKILL after the grace: exit 124.
    pub timeout: Option<Duration>,
}

/// A live session, named.
#[derive(Debug, Clone)]
pub struct Session {
    name: String,
    files: Files,
}

/// A command started in a session: its exit code with [`ExecChild::wait`], signals for its
/// process group with [`ExecChild::signal`] (from any thread).
#[derive(Debug)]
pub struct ExecChild {
    session: String,
    conn: UnixStream,
}

impl Session {
    /// Starts a session with `jail`'s settings (its command must be empty: a session runs only
    /// what is exec'd into it) and returns once the sandbox is ready for commands. `name`: a
    /// fresh one when none; `idle`: stopped after so long with no command running.
    pub fn start(
        jail: &Jail,
        name: Option<&str>,
        idle: Option<Duration>,
    ) -> Result<Session, JailError> {
        let (settings, program) = jail.parts();
        let program = crate::sandbox::find_program(program)?;
        let started = start(settings, &program, name, idle)?;
        // The serving process is this one's child until it ends: reaped by a thread of its
        // own, so that a long-lived caller keeps no zombie.
        std::thread::spawn(move || {
            let mut child = started.1;
            let _ = child.wait();
        });
        Ok(started.0)
    }

    /// The live session `name`.
    pub fn attach(name: &str) -> Result<Session, JailError> {
        dir::check_name(name)?;
        let files = live_files(name)?;
        // Answers, or is cleaned up and named as gone.
        drop(connect(name, &files)?);
        Ok(Session {
            name: name.to_string(),
            files,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Starts `argv` in the session with the given stdio (defaults: this process's own) and
    /// returns at once.
    pub fn exec(
        &self,
        argv: &[OsString],
        options: &ExecOptions,
        stdio: [Option<RawFd>; 3],
    ) -> Result<ExecChild, JailError> {
        exec(&self.name, &self.files, argv, options, stdio)
    }

    /// The session as its supervisor describes it.
    pub fn info(&self) -> Result<SessionInfo, JailError> {
        info(&self.name, &self.files)
    }

    /// Stops the session: every process of it ends (SIGTERM, SIGKILL after the grace), what it
    /// planted is moved aside, its report written and its `--cow` layer handed back as a run;
    /// returns how the session ended, as a run's [`Outcome`].
    pub fn stop(self) -> Result<Outcome, JailError> {
        stop(&self.name, &self.files)
    }
}

impl ExecChild {
    /// Sends `signal` to the command's process group.
    pub fn signal(&self, signal: i32) -> Result<(), JailError> {
        wire::send(&mut &self.conn, wire::SIGNAL, &wire::int_body(signal))
            .map_err(|e| refused(&self.session, format!("sending signal {signal}: {e}")))
    }

    /// Waits for the command and returns its exit code (as a run's: 128+N for a signal, 124
    /// after the timeout, 126/127 when it could not be run).
    pub fn wait(self) -> Result<i32, JailError> {
        loop {
            match wire::recv(&mut &self.conn) {
                Ok(Some((wire::EXIT, body))) => {
                    return wire::body_int(&body)
                        .ok_or_else(|| refused(&self.session, "a malformed exit code"));
                }
                Ok(Some((wire::REFUSED, body))) => {
                    return Err(refused(&self.session, String::from_utf8_lossy(&body)));
                }
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => {
                    return Err(refused(
                        &self.session,
                        "the session ended before the command did",
                    ));
                }
            }
        }
    }

    /// The connection, to wait on it with poll (readable: [`ExecChild::wait`] will not block
    /// for long).
    pub fn as_raw_fd(&self) -> RawFd {
        self.conn.as_raw_fd()
    }
}

fn refused(name: &str, reason: impl Into<String>) -> JailError {
    JailError::SessionRefused {
        name: name.to_string(),
        reason: reason.into(),
    }
}

fn unknown(name: &str, reason: impl Into<String>) -> JailError {
    JailError::UnknownSession {
        name: name.to_string(),
        reason: reason.into(),
    }
}

/// The files of session `name` when the sessions' directory exists.
fn live_files(name: &str) -> Result<Files, JailError> {
    let dir =
        dir::existing().ok_or_else(|| unknown(name, "no such session (jail session list)"))?;
    Ok(Files::of(&dir, name))
}

/// A connection to the session's supervisor. A socket nothing listens on any more belongs to
/// a session whose supervisor was killed: its files are removed, and what its run left is
/// finished as a killed run's is.
fn connect(name: &str, files: &Files) -> Result<UnixStream, JailError> {
    match UnixStream::connect(&files.socket) {
        Ok(s) => match wire::check_peer(&s) {
            Ok(()) => Ok(s),
            Err(why) => Err(refused(
                name,
                format!("what answers on its socket is not its supervisor: {why}"),
            )),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(unknown(name, "no such session (jail session list)"))
        }
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            // Only when no supervisor holds the name (one may be starting, not yet listening).
            let Ok(lock) = dir::lock(files) else {
                return Err(unknown(name, "its supervisor is starting or not answering"));
            };
            files.remove_live();
            crate::platform::finish_dead_runs();
            files.unlock(lock);
            Err(unknown(
                name,
                "its supervisor is gone (killed); its files were cleaned up",
            ))
        }
        Err(e) => Err(unknown(name, format!("{}: {e}", files.socket.display()))),
    }
}

/// Starts the serving jail process for `settings` and waits until the session is ready, or
/// has failed (its error, as it printed it, is the error here).
pub(crate) fn start(
    settings: &RunSettings,
    program: &Path,
    name: Option<&str>,
    idle: Option<Duration>,
) -> Result<(Session, std::process::Child), JailError> {
    let name = name.map(str::to_string).unwrap_or_else(dir::new_name);
    dir::check_name(&name)?;
    if !settings.command.is_empty() {
        return Err(JailError::bad_command(
            "a session runs no command of its own: start it without one, then `jail exec NAME \
             -- CMD`",
        ));
    }
    if settings.control_fd.is_some() {
        return Err(JailError::bad_flag(
            "--control-fd",
            "",
            "a session is stopped with jail session stop, not a control socket",
        ));
    }
    if idle.is_some_and(|d| d.is_zero()) {
        return Err(JailError::bad_flag(
            "--idle-timeout",
            "0",
            "--idle-timeout must be more than 0",
        ));
    }
    let dir = dir::ensure()?;
    let files = Files::of(&dir, &name);
    if files.socket.exists() && connect(&name, &files).is_ok() {
        return Err(refused(&name, "a session of this name is running"));
    }
    // What a supervisor that is gone left (never while one holds the name: it may be starting).
    // An end file too: left by an earlier session of the name (its idle timeout, an unread
    // stop), it is not the new one's.
    if let Ok(lock) = dir::lock(&files) {
        files.remove_live();
        let _ = std::fs::remove_file(&files.end);
        files.unlock(lock);
    }
    let mut settings = settings.clone();
    settings.command = vec![SESSION_COMMAND.into()];
    settings.session = Some(SessionSpec {
        name: name.clone(),
        idle_timeout_ms: idle.map(|d| d.as_millis().min(u64::MAX as u128) as u64),
        stop_fd: None,
    });
    // Checked here first: a bad path or flag is this call's error, said once.
    crate::prepare::policy(&settings, false)?;
    let child = spawn_server(program, &settings)?;
    let session = Session { name, files };
    wait_ready(&session, child)
}

/// The serving process: detached from this terminal (a session of its own), stdin from
/// /dev/null, stdout the ready line, stderr what went wrong before it.
fn spawn_server(
    program: &Path,
    settings: &RunSettings,
) -> Result<(std::process::Child, OwnedFd, OwnedFd), JailError> {
    let io = |what: &str, e: std::io::Error| JailError::io(format!("session start: {what}"), e);
    let pipe = |what: &str| {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| io(what, e.into()))
    };
    let (settings_read, settings_write) = pipe("the settings pipe")?;
    let (ready_read, ready_write) = pipe("the ready pipe")?;
    let (err_read, err_write) = pipe("the error pipe")?;
    let text = serde_json::to_vec(settings).map_err(|e| JailError::BadInput(e.to_string()))?;
    let fd = settings_read.as_raw_fd();
    let mut cmd = std::process::Command::new(program);
    cmd.arg(format!("--settings-fd={fd}"))
        .arg("--")
        .arg(SESSION_COMMAND)
        .stdin(std::process::Stdio::null())
        .stdout(ready_write)
        .stderr(err_write);
    // SAFETY: between fork and exec only setsid, close_range and fcntl run: system calls, no
    // allocation, no lock.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Nothing the starter holds open but the settings goes to the session, which would
            // keep it for its whole life.
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            );
            libc::fcntl(fd, libc::F_SETFD, 0);
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| io(&format!("starting {}", program.display()), e))?;
    drop(cmd);
    drop(settings_read);
    std::thread::spawn(move || {
        let _ = std::fs::File::from(settings_write).write_all(&text);
    });
    Ok((child, ready_read, err_read))
}

/// Reads the ready line; without it, the serving process's end and what it said.
fn wait_ready(
    session: &Session,
    (mut child, ready, errors): (std::process::Child, OwnedFd, OwnedFd),
) -> Result<(Session, std::process::Child), JailError> {
    // One line, not to the end: the sandbox's processes hold copies of the pipe until it ends.
    let mut line = Vec::new();
    let mut ready = std::fs::File::from(ready);
    let mut byte = [0u8; 1];
    while line.len() < 64 && matches!(ready.read(&mut byte), Ok(1)) && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let mut errors = std::fs::File::from(errors);
    if line.starts_with(b"ready") {
        // What it printed before (a degraded run's warning) is said here, then the pipe is
        // left: the session writes nothing more to it.
        set_nonblocking(errors.as_raw_fd());
        let mut said = Vec::new();
        let _ = errors.read_to_end(&mut said);
        let _ = std::io::stderr().write_all(&said);
        return Ok((session.clone(), child));
    }
    let status = child
        .wait()
        .map_err(|e| JailError::io("session start", e))?;
    let mut said = Vec::new();
    let _ = errors.read_to_end(&mut said);
    let said = String::from_utf8_lossy(&said);
    let last = said
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.strip_prefix("jail: ").unwrap_or(l))
        .map(|l| {
            l.strip_prefix(&format!("session {}: ", session.name))
                .unwrap_or(l)
        })
        .collect::<Vec<_>>()
        .join("; ");
    Err(refused(
        &session.name,
        match (last.is_empty(), status.code()) {
            (false, _) => last,
            (true, Some(code)) => format!("the session's jail process exited {code}"),
            (true, None) => format!("the session's jail process ended: {status}"),
        },
    ))
}

fn set_nonblocking(fd: RawFd) {
    // SAFETY: F_GETFL/F_SETFL on a descriptor this function's caller owns.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

/// Sends an exec request; the command runs once the supervisor has it.
fn exec(
    name: &str,
    files: &Files,
    argv: &[OsString],
    options: &ExecOptions,
    stdio: [Option<RawFd>; 3],
) -> Result<ExecChild, JailError> {
    use std::os::unix::ffi::OsStrExt;
    let mut req = ExecRequest::new(argv);
    let word = |s: &std::ffi::OsStr| wire::Word(s.as_bytes().to_vec());
    req.env = (options.env.iter())
        .map(|(k, v)| (word(k), word(v)))
        .collect();
    req.cwd = options.cwd.as_ref().map(|c| word(c.as_os_str()));
    req.timeout_ms = options
        .timeout
        .map(|t| t.as_millis().clamp(1, u64::MAX as u128) as u64);
    req.umask = own_umask();
    req.check().map_err(JailError::bad_command)?;
    let mut conn = connect(name, files)?;
    let fds = [
        stdio[0].unwrap_or(0),
        stdio[1].unwrap_or(1),
        stdio[2].unwrap_or(2),
    ];
    let body = serde_json::to_vec(&req).map_err(|e| JailError::BadInput(e.to_string()))?;
    request(name, &mut conn, wire::EXEC, &fds, &body)?;
    Ok(ExecChild {
        session: name.to_string(),
        conn,
    })
}

/// This process's umask, read where reading it changes nothing (umask(2) sets it too, and
/// another thread may create a file meanwhile).
fn own_umask() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let mask = status.lines().find_map(|l| l.strip_prefix("Umask:"))?;
    u32::from_str_radix(mask.trim(), 8).ok()
}

/// Sends a request (`kind`, the descriptors, the body). A supervisor that refused the caller
/// said why and closed before reading it: then the reason is the error, not the broken pipe.
fn request(
    name: &str,
    conn: &mut UnixStream,
    kind: u8,
    fds: &[RawFd],
    body: &[u8],
) -> Result<(), JailError> {
    let sent = wire::send_with_fds(conn.as_raw_fd(), kind, fds)
        .and_then(|()| wire::send(&mut &*conn, kind, body));
    match sent {
        Ok(()) => Ok(()),
        Err(e) => match wire::recv(conn) {
            Ok(Some((wire::REFUSED, why))) => Err(refused(name, String::from_utf8_lossy(&why))),
            _ => Err(refused(name, format!("sending the request: {e}"))),
        },
    }
}

fn info(name: &str, files: &Files) -> Result<SessionInfo, JailError> {
    let mut conn = connect(name, files)?;
    // A supervisor that does not answer (stopped) must not hang `session list`.
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    request(name, &mut conn, wire::INFO, &[], b"")?;
    match wire::recv(&mut conn) {
        Ok(Some((wire::INFO, body))) => serde_json::from_slice(&body)
            .map_err(|e| refused(name, format!("a malformed description: {e}"))),
        Ok(Some((wire::REFUSED, body))) => Err(refused(name, String::from_utf8_lossy(&body))),
        _ => Err(refused(name, "no answer")),
    }
}

/// Asks for the stop, waits for the supervisor to end (the connection closes with it) and
/// reads the outcome it left.
fn stop(name: &str, files: &Files) -> Result<Outcome, JailError> {
    let mut conn = connect(name, files)?;
    request(name, &mut conn, wire::STOP, &[], b"")?;
    // The supervisor says it is stopping, or why not: only then is the end file this session's.
    match wire::recv(&mut conn) {
        Ok(Some((wire::STOP, _))) => {}
        Ok(Some((wire::REFUSED, why))) => {
            return Err(refused(name, String::from_utf8_lossy(&why)));
        }
        _ => return Err(refused(name, "the supervisor did not take the stop")),
    }
    let mut rest = Vec::new();
    let _ = conn.read_to_end(&mut rest);
    let text = std::fs::read(&files.end).map_err(|e| {
        refused(
            name,
            format!(
                "the session ended without an outcome ({}: {e})",
                files.end.display()
            ),
        )
    })?;
    let _ = std::fs::remove_file(&files.end);
    serde_json::from_slice::<Message>(&text)
        .map_err(|e| refused(name, format!("a malformed outcome: {e}")))?
        .into_result()
}

/// The live sessions, each as its supervisor describes it; the files of those whose supervisor
/// is gone are cleaned up on the way.
pub fn list() -> Vec<SessionInfo> {
    let Some(dir) = dir::existing() else {
        return Vec::new();
    };
    dir::names(&dir)
        .into_iter()
        .filter_map(|name| info(&name, &Files::of(&dir, &name)).ok())
        .collect()
}

/// The signals `jail exec` passes on to the command's process group: what a terminal, a shell
/// or an orchestrator sends a command it started.
const PASSED_ON: &[nix::sys::signal::Signal] = {
    use nix::sys::signal::Signal::*;
    &[
        SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT, SIGTSTP, SIGALRM,
    ]
};

/// `jail exec`: the command in session `name` with this process's stdio, this process's
/// signals passed on to its process group; returns its exit code.
pub fn exec_here(name: &str, argv: &[OsString], options: &ExecOptions) -> Result<i32, JailError> {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
    use nix::sys::signalfd::{SfdFlags, SignalFd};
    dir::check_name(name).map_err(|_| unknown(name, "not a session name"))?;
    let files = live_files(name)?;
    let mut set = SigSet::empty();
    for s in PASSED_ON {
        set.add(*s);
    }
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None)
        .map_err(|e| JailError::io("sigprocmask", e.into()))?;
    let sfd = SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC)
        .map_err(|e| JailError::io("signalfd", e.into()))?;
    let child = exec(name, &files, argv, options, [None, None, None])?;
    loop {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        let conn = child.conn.as_fd();
        let mut fds = [
            PollFd::new(conn, PollFlags::POLLIN),
            PollFd::new(sfd.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(JailError::io("poll", e.into())),
            Ok(_) => {}
        }
        let signalled = fds[1].revents().is_some_and(|r| !r.is_empty());
        let answered = fds[0].revents().is_some_and(|r| !r.is_empty());
        if signalled {
            if let Ok(Some(info)) = sfd.read_signal() {
                let sig = info.ssi_signo as i32;
                // The terminal's stop key: the command stops, and so does this caller, as a
                // shell expects of its job.
                child.signal(sig)?;
                if sig == Signal::SIGTSTP as i32 {
                    let _ = nix::sys::signal::raise(Signal::SIGSTOP);
                }
            }
        }
        if answered {
            return child.wait();
        }
    }
}

/// `jail session stop`: the outcome, for the command line to print.
pub fn stop_named(name: &str) -> Result<Outcome, JailError> {
    dir::check_name(name).map_err(|_| unknown(name, "not a session name"))?;
    let files = live_files(name)?;
    stop(name, &files)
}
