//! A jail process started by [`Jail::spawn`](super::Jail::spawn): the `jail` program run with the
//! request as its flags and a control socket (`--control-fd`), in a process group of its own.
//!
//! Why a process and not a thread: the supervisor owns process-wide state for the whole run (its
//! signal mask and signalfd, the child-subreaper bit, `waitpid` on every child, the terminal's
//! foreground group, and a single-threaded fork of the namespaces), so two runs cannot share one
//! process. Its own group keeps a terminal's Ctrl-C with the orchestrator, which decides what to
//! stop, and keeps parallel jails from taking the terminal from each other.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ChildStderr, ChildStdin, ChildStdout, Stdio};
use std::thread::JoinHandle;

use super::control::{KILL, STOP};
use super::options::RunOptions;
use super::outcome::{Message, Outcome};
use crate::error::JailError;
use crate::policy::Require;
use crate::policy::homes::HomeMode;
use crate::policy::profile::TmpOption;
use crate::policy::request::Request;

/// The descriptor number the control socket has in the jail process.
const CONTROL_FD: i32 = 3;

/// A running jail. Dropping it without [`Child::wait`] stops the tree and waits for it (at most
/// 10 s, then the jail process is killed).
pub struct Child {
    process: std::process::Child,
    control: UnixStream,
    reader: Option<JoinHandle<std::io::Result<Vec<u8>>>>,
    waited: bool,
    /// The command's stdin, when [`Jail::stdin`](super::Jail::stdin) asked for a pipe.
    pub stdin: Option<ChildStdin>,
    /// The command's stdout, when piped.
    pub stdout: Option<ChildStdout>,
    /// The command's stderr (and jail's own messages), when piped.
    pub stderr: Option<ChildStderr>,
}

/// Stops a run from anywhere (another thread, a signal handler's thread) while its [`Child`]
/// waits.
#[derive(Debug)]
pub struct Stopper(UnixStream);

impl Stopper {
    /// Asks jail to stop the whole tree: SIGTERM, then SIGKILL 2 s later; jail then cleans up and
    /// reports as for any other end. Harmless once the run is over.
    pub fn stop(&self) {
        send_request(&self.0, STOP);
    }

    /// Asks jail to kill the whole tree now (SIGKILL); jail then cleans up and reports.
    pub fn kill(&self) {
        send_request(&self.0, KILL);
    }
}

/// A request byte, with MSG_NOSIGNAL: a run already over must not kill the caller with SIGPIPE.
fn send_request(socket: &UnixStream, byte: u8) {
    // SAFETY: send of one byte from a local, on a socket this owns.
    unsafe {
        libc::send(
            socket.as_raw_fd(),
            [byte].as_ptr().cast(),
            1,
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
}

/// How the three stdio streams of the jail process (and so of the command) are connected.
#[derive(Default)]
pub(super) struct Stdios {
    pub stdin: Option<Stdio>,
    pub stdout: Option<Stdio>,
    pub stderr: Option<Stdio>,
}

impl Child {
    pub(super) fn spawn(
        program: &Path,
        request: &Request,
        options: &RunOptions,
        stdio: Stdios,
    ) -> Result<Child, JailError> {
        if request.keep_fds.contains(&CONTROL_FD) {
            return Err(JailError::BadInput(format!(
                "keep_fd {CONTROL_FD}: a spawned jail holds its control socket there; pass the \
                 descriptor under another number"
            )));
        }
        // A number not open here would be where the socket pair lands, and the command would be
        // handed jail's end of the control socket under it.
        for fd in &request.keep_fds {
            // SAFETY: F_GETFD only queries the descriptor table.
            if unsafe { libc::fcntl(*fd, libc::F_GETFD) } < 0 {
                return Err(JailError::BadInput(format!(
                    "keep_fd {fd}: not an open descriptor in this process"
                )));
            }
        }
        let pair = UnixStream::pair()
            .and_then(|(ours, theirs)| Ok((above_stdio(ours)?, above_stdio(theirs)?)));
        let (ours, theirs) =
            pair.map_err(|e| JailError::io("the control socket (socketpair)", e))?;
        let theirs_fd = theirs.as_raw_fd();
        let keep: Vec<i32> = request.keep_fds.clone();
        let mut cmd = std::process::Command::new(program);
        cmd.args(arguments(request, options, CONTROL_FD))
            .process_group(0)
            .stdin(stdio.stdin.unwrap_or_else(Stdio::null))
            .stdout(stdio.stdout.unwrap_or_else(Stdio::inherit))
            .stderr(stdio.stderr.unwrap_or_else(Stdio::inherit));
        // SAFETY: between fork and exec only dup2 and fcntl run: both async-signal-safe, no
        // allocation, no lock.
        unsafe {
            cmd.pre_exec(move || {
                // dup2 onto itself leaves close-on-exec set: clear it instead.
                let moved = if theirs_fd == CONTROL_FD {
                    libc::fcntl(CONTROL_FD, libc::F_SETFD, 0)
                } else {
                    libc::dup2(theirs_fd, CONTROL_FD)
                };
                if moved < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                for fd in &keep {
                    libc::fcntl(*fd, libc::F_SETFD, 0);
                }
                Ok(())
            });
        }
        let mut process = cmd
            .spawn()
            .map_err(|e| JailError::io(format!("start {}", program.display()), e))?;
        drop(theirs);
        let mut reading = ours
            .try_clone()
            .map_err(|e| JailError::io("the control socket", e))?;
        let reader = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            match reading.read_to_end(&mut bytes) {
                // A stop request jail did not read resets the socket when jail closes it, after
                // what it wrote, which read_to_end has appended already.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(bytes),
                other => other.map(|_| bytes),
            }
        });
        Ok(Child {
            stdin: process.stdin.take(),
            stdout: process.stdout.take(),
            stderr: process.stderr.take(),
            process,
            control: ours,
            reader: Some(reader),
            waited: false,
        })
    }

    /// The jail process's pid (the supervisor, outside the sandbox).
    pub fn id(&self) -> u32 {
        self.process.id()
    }

    /// Asks jail to stop the whole tree (see [`Stopper::stop`]).
    pub fn stop(&self) {
        send_request(&self.control, STOP);
    }

    /// Asks jail to kill the whole tree now (see [`Stopper::kill`]).
    pub fn kill(&self) {
        send_request(&self.control, KILL);
    }

    /// A handle that stops this run from another thread.
    pub fn stopper(&self) -> std::io::Result<Stopper> {
        self.control.try_clone().map(Stopper)
    }

    /// Waits for the run to end and returns its outcome, or the error that stopped jail.
    pub fn wait(mut self) -> Result<Outcome, JailError> {
        self.finish()
    }

    fn finish(&mut self) -> Result<Outcome, JailError> {
        self.waited = true;
        // The stdin pipe closed first, as std's wait does: a command reading it must see EOF.
        drop(self.stdin.take());
        let status = self
            .process
            .wait()
            .map_err(|e| JailError::io("waiting for the jail process", e))?;
        let bytes = match self.reader.take().map(JoinHandle::join) {
            Some(Ok(Ok(bytes))) => bytes,
            _ => Vec::new(),
        };
        match serde_json::from_slice::<Message>(&bytes) {
            Ok(message) => message.into_result(),
            Err(_) if bytes.is_empty() => Err(JailError::Lost(format!(
                "{status} before it could report (its stderr says why)"
            ))),
            Err(e) => Err(JailError::Lost(format!(
                "{status}; its message was unreadable: {e}"
            ))),
        }
    }
}

/// How long a dropped `Child` waits for its jail to stop the tree and clean up before it kills
/// the jail process itself: the stop's SIGKILL comes after 2 s, and the quarantine and report
/// take well under a second, so only a jail that cannot act (stopped, or frozen by a command
/// that could signal it where Landlock's signal scope is missing) is still there.
const DROP_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl Drop for Child {
    fn drop(&mut self) {
        if self.waited {
            return;
        }
        self.stop();
        let deadline = std::time::Instant::now() + DROP_WAIT;
        while std::time::Instant::now() < deadline {
            match self.process.try_wait() {
                Ok(None) => std::thread::sleep(std::time::Duration::from_millis(20)),
                _ => break,
            }
        }
        if matches!(self.process.try_wait(), Ok(None)) {
            // Killed, jail takes its namespaces with it (init dies with its parent); without
            // them the command's own parent-death signal ends it.
            let _ = self.process.kill();
        }
        let _ = self.finish();
    }
}

/// `socket` at a number above 2: in a caller that closed its stdio the pair lands there, where
/// the jail process's stdio is put in its place before the control socket is moved to 3.
fn above_stdio(socket: UnixStream) -> std::io::Result<UnixStream> {
    if socket.as_raw_fd() > 2 {
        return Ok(socket);
    }
    // SAFETY: F_DUPFD_CLOEXEC makes a new descriptor, owned below; `socket` closes on return.
    let fd = unsafe { libc::fcntl(socket.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: just created, owned by nothing else.
    Ok(unsafe { <UnixStream as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// The jail program: `explicit`, else `$JAIL_PROGRAM`, else a `jail` beside the running program
/// (or one directory up, where cargo puts binaries beside `examples/`), else `jail` on PATH.
pub(super) fn find_program(explicit: Option<&Path>) -> Result<PathBuf, JailError> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("JAIL_PROGRAM").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let beside = std::env::current_exe().ok().and_then(|exe| {
        let dir = exe.parent()?.to_path_buf();
        [dir.join("jail"), dir.parent()?.join("jail")]
            .into_iter()
            .find(|p| p.is_file() && *p != exe)
    });
    let on_path = || {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join("jail"))
                .find(|p| p.is_file())
        })
    };
    beside.or_else(on_path).ok_or_else(|| {
        JailError::BadInput(
            "no jail program found (beside this program, or on PATH): name it with \
             Jail::program or JAIL_PROGRAM"
                .into(),
        )
    })
}

/// `--flag=value`, one word: a value beginning with `-` is then never taken for a flag.
fn flag_value(flag: &str, value: impl Into<OsString>) -> OsString {
    let mut word = OsString::from(format!("{flag}="));
    word.push(value.into());
    word
}

/// The request and options as the flags of the command line, which resolves them again in the
/// jail process, the same way.
pub(crate) fn arguments(req: &Request, opts: &RunOptions, control_fd: i32) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec![flag_value("--profile", req.profile.clone())];
    let mut each = |flag: &str, values: &mut dyn Iterator<Item = OsString>| {
        for v in values {
            a.push(flag_value(flag, v));
        }
    };
    each("--ro", &mut req.ro.iter().map(|p| p.clone().into()));
    each("--rw", &mut req.rw.iter().map(|p| p.clone().into()));
    each("--cow", &mut req.cow.iter().map(|p| p.clone().into()));
    each("--cache", &mut req.caches.iter().map(|p| p.clone().into()));
    each("--hide", &mut req.hide.iter().map(|p| p.clone().into()));
    each("--cwd", &mut req.cwd.iter().map(|p| p.clone().into()));
    each("--env", &mut req.env.iter().map(Into::into));
    each("--env-deny", &mut req.env_deny.iter().map(Into::into));
    each(
        "--keep-fd",
        &mut req.keep_fds.iter().map(|n| n.to_string().into()),
    );
    each("--limit", &mut req.limits.iter().map(Into::into));
    each(
        "--allow-socket",
        &mut req.allow_sockets.iter().map(|p| p.clone().into()),
    );
    each("--net", &mut req.net.iter().map(Into::into));
    each("--secret", &mut req.secrets.iter().map(Into::into));
    each(
        "--report",
        &mut opts.report.iter().map(|p| p.clone().into()),
    );
    each("--patch", &mut opts.patch.iter().map(|p| p.clone().into()));
    each("--events", &mut opts.events.iter().cloned());
    let tmp = req.tmp.map(|t| match t {
        TmpOption::Private => "private",
        TmpOption::Host => "host",
    });
    let home = req.home.map(|h| match h {
        HomeMode::Visible => "visible",
        HomeMode::Hidden => "hidden",
    });
    let require = req.require.map(|r| match r {
        Require::Full => "full",
        Require::Landlock => "landlock",
        Require::Mount => "mount",
        Require::Any => "any",
    });
    let timeout = req.timeout.map(|t| format!("{}s", t.as_secs_f64()));
    for (flag, value) in [
        ("--tmp", tmp.map(String::from)),
        ("--home", home.map(String::from)),
        ("--require", require.map(String::from)),
        ("--timeout", timeout),
        ("--control-fd", Some(control_fd.to_string())),
    ] {
        if let Some(v) = value {
            a.push(flag_value(flag, v));
        }
    }
    for (flag, on) in [
        ("--env-clear", req.env_clear),
        ("--allow-userns", req.allow_userns),
        ("--allow-unix-sockets", req.allow_unix_sockets),
        ("--summary", opts.summary),
        ("--notice", opts.notice),
        ("--allow-unconfined", opts.allow_unconfined),
        ("--control-report", opts.record),
    ] {
        if on {
            a.push(flag.into());
        }
    }
    a.push("--".into());
    a.extend(req.command.iter().cloned());
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::time::Duration;

    #[test]
    fn a_request_survives_the_command_line_unchanged() {
        let req = Request {
            profile: "review".into(),
            ro: vec!["./repo".into(), "/a b".into()],
            rw: vec!["/w".into()],
            cow: vec!["/c".into()],
            caches: vec!["/k".into()],
            hide: vec!["/h".into()],
            cwd: Some("/w".into()),
            tmp: Some(TmpOption::Host),
            home: Some(HomeMode::Hidden),
            env: vec!["K=V".into(), "KEEP".into()],
            env_clear: true,
            env_deny: vec!["AWS_*".into()],
            require: Some(Require::Full),
            keep_fds: vec![5],
            timeout: Some(Duration::from_millis(1500)),
            limits: vec!["memory=1G".into()],
            allow_userns: true,
            allow_unix_sockets: true,
            allow_sockets: vec!["/run/s".into()],
            net: vec!["allow=example.org".into()],
            secrets: vec!["K@example.org".into()],
            command: vec!["sh".into(), "-c".into(), "--not-a-flag".into()],
        };
        let opts = RunOptions {
            report: Some("/r.json".into()),
            summary: true,
            notice: true,
            allow_unconfined: true,
            record: true,
            control_fd: Some(7),
            patch: Some("/p.patch".into()),
            events: Some("fd:9".into()),
        };
        let mut argv: Vec<OsString> = vec!["jail".into()];
        argv.extend(arguments(&req, &opts, 7));
        let cli = crate::cli::args::Cli::try_parse_from(argv).expect("parses");
        assert_eq!(crate::cli::request(&cli.run), req);
        assert_eq!(crate::cli::options(&cli.run), opts);
        let bare = Request {
            command: vec!["true".into()],
            ..Request::default()
        };
        let mut argv: Vec<OsString> = vec!["jail".into()];
        argv.extend(arguments(&bare, &RunOptions::default(), 3));
        let cli = crate::cli::args::Cli::try_parse_from(argv).expect("parses");
        assert_eq!(crate::cli::request(&cli.run), bare);
    }

    #[test]
    fn values_that_look_like_flags_survive_the_command_line() {
        use std::os::unix::ffi::OsStringExt;
        let req = Request {
            profile: "-p".into(),
            ro: vec![
                "-r".into(),
                "--rw=/".into(),
                OsString::from_vec(b"-\xff".to_vec()).into(),
            ],
            rw: vec!["-".into()],
            hide: vec!["--".into()],
            cwd: Some("-c".into()),
            env: vec!["-K=V".into()],
            env_deny: vec!["-*".into()],
            limits: vec!["-l".into()],
            allow_sockets: vec!["-s".into()],
            net: vec!["-n".into()],
            command: vec!["--help".into(), "".into()],
            ..Request::default()
        };
        let opts = RunOptions {
            report: Some("-report".into()),
            control_fd: Some(3),
            ..RunOptions::default()
        };
        let mut argv: Vec<OsString> = vec!["jail".into()];
        argv.extend(arguments(&req, &opts, 3));
        let cli = crate::cli::args::Cli::try_parse_from(argv).expect("parses");
        assert_eq!(crate::cli::request(&cli.run), req);
        assert_eq!(crate::cli::options(&cli.run), opts);
    }
}
