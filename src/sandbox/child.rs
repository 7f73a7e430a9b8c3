//! A jail process started by [`Jail::spawn`](super::Jail::spawn): the `jail` program run with the
//! settings handed over as JSON on a socket of their own (`--settings-fd`: data, not flags
//! rendered again and parsed again) and a control socket (`--control-fd`), in a process group
//! of its own.
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
use super::outcome::{Message, Outcome};
use crate::error::JailError;
use crate::policy::settings::RunSettings;

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

/// `bytes` on `socket`, with MSG_NOSIGNAL: a jail process gone already must not kill the
/// caller with SIGPIPE. Closes the socket (the end of the settings for the reader).
fn send_all(socket: &UnixStream, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: send from a live slice, on a socket this owns.
        let n = unsafe {
            libc::send(
                socket.as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        match n {
            n if n > 0 => bytes = &bytes[n as usize..],
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => return,
        }
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

/// The descriptors a spawned jail is to keep: none at the control socket's number, each open
/// here.
fn check_kept_fds(keep_fds: &[i32]) -> Result<(), JailError> {
    if keep_fds.contains(&CONTROL_FD) {
        return Err(JailError::bad_flag(
            "--keep-fd",
            CONTROL_FD.to_string(),
            format!(
                "keep_fd {CONTROL_FD}: a spawned jail holds its control socket there; pass \
                 the descriptor under another number"
            ),
        ));
    }
    // A number not open here would be where the socket pair lands, and the command would be
    // handed jail's end of the control socket under it.
    for fd in keep_fds {
        // SAFETY: F_GETFD only queries the descriptor table.
        if unsafe { libc::fcntl(*fd, libc::F_GETFD) } < 0 {
            return Err(JailError::bad_flag(
                "--keep-fd",
                fd.to_string(),
                format!("keep_fd {fd}: not an open descriptor in this process"),
            ));
        }
    }
    Ok(())
}

impl Child {
    pub(super) fn spawn(
        program: &Path,
        settings: &RunSettings,
        stdio: Stdios,
    ) -> Result<Child, JailError> {
        check_kept_fds(&settings.keep_fds)?;
        let pair = UnixStream::pair()
            .and_then(|(ours, theirs)| Ok((above_stdio(ours)?, above_stdio(theirs)?)));
        let (ours, theirs) =
            pair.map_err(|e| JailError::io("the control socket (socketpair)", e))?;
        let theirs_fd = theirs.as_raw_fd();
        // Made while the control pair is open, so never at CONTROL_FD (taken by now, by the
        // pair or by the caller), nor at a kept descriptor (open here): its number in the jail
        // process is the one it has here.
        let hand_over = UnixStream::pair()
            .and_then(|(ours, theirs)| Ok((above_stdio(ours)?, above_stdio(theirs)?)));
        let (settings_ours, settings_theirs) =
            hand_over.map_err(|e| JailError::io("the settings socket (socketpair)", e))?;
        let settings_fd = settings_theirs.as_raw_fd();
        let text = serde_json::to_vec(&RunSettings {
            control_fd: Some(CONTROL_FD),
            ..settings.clone()
        })
        .map_err(|e| JailError::BadInput(format!("the settings as JSON: {e}")))?;
        let keep: Vec<i32> = settings.keep_fds.clone();
        let mut cmd = std::process::Command::new(program);
        cmd.args(arguments(settings_fd, &settings.command))
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
                for fd in keep.iter().chain([&settings_fd]) {
                    libc::fcntl(*fd, libc::F_SETFD, 0);
                }
                Ok(())
            });
        }
        let mut process = cmd
            .spawn()
            .map_err(|e| JailError::io(format!("start {}", program.display()), e))?;
        drop(theirs);
        drop(settings_theirs);
        // Written from a thread: the settings may be more than the socket holds, and a program
        // that never reads them must not hang this call. A jail that ended first makes the
        // write fail, and `wait` reports how it ended.
        std::thread::spawn(move || send_all(&settings_ours, &text));
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
pub(crate) fn find_program(explicit: Option<&Path>) -> Result<PathBuf, JailError> {
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

/// The jail process's arguments: where its settings are, and the command after `--` (where
/// `ps` shows it; it is not in the JSON).
fn arguments(settings_fd: i32, command: &[OsString]) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec![format!("--settings-fd={settings_fd}").into(), "--".into()];
    a.extend(command.iter().cloned());
    a
}

/// The jail process's end of the hand-over: the settings read from descriptor `fd` to its end,
/// which closes it (the command never gets it), with the command from its own arguments.
/// `flags` are the other run flags given with `--settings-fd`: none may be.
pub(crate) fn read_settings(fd: i32, flags: &RunSettings) -> Result<RunSettings, JailError> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let bad = |why: String| {
        JailError::bad_flag(
            "--settings-fd",
            fd.to_string(),
            format!("--settings-fd {fd}: {why}"),
        )
    };
    let bare = RunSettings {
        profile: flags.profile.clone(),
        command: flags.command.clone(),
        ..RunSettings::default()
    };
    if *flags != bare || flags.profile.as_deref() != Some("default") {
        return Err(bad(
            "the settings come from the descriptor; give only the command with it".into(),
        ));
    }
    if fd <= 2 {
        return Err(bad("0, 1 and 2 are the command's stdio".into()));
    }
    // SAFETY: F_GETFD only queries the descriptor table.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(bad("not an open descriptor".into()));
    }
    // SAFETY: checked open; from here this is its only owner, and it closes on return.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let mut text = Vec::new();
    file.read_to_end(&mut text)
        .map_err(|e| bad(format!("reading it: {e}")))?;
    decode(&text, &flags.command).map_err(bad)
}

/// The settings a spawned jail was handed (pure): the JSON, and the command.
fn decode(text: &[u8], command: &[OsString]) -> Result<RunSettings, String> {
    let mut settings: RunSettings =
        serde_json::from_slice(text).map_err(|e| format!("not the settings as JSON: {e}"))?;
    settings.command = command.to_vec();
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Require;
    use crate::policy::homes::HomeMode;
    use crate::policy::profile::TmpOption;
    use clap::Parser;
    use std::os::unix::ffi::OsStringExt;
    use std::time::Duration;

    /// Every field set, and values a flag parser could take for flags.
    fn everything() -> RunSettings {
        RunSettings {
            profile: Some("-p".into()),
            ro: vec![
                "./repo".into(),
                "/a b".into(),
                "--rw=/".into(),
                OsString::from_vec(b"-\xff".to_vec()).into(),
            ],
            rw: vec!["-".into()],
            cow: vec!["/c".into()],
            caches: vec!["/k".into()],
            hide: vec!["--".into()],
            cwd: Some("-c".into()),
            tmp: Some(TmpOption::Host),
            home: Some(HomeMode::Hidden),
            env: vec!["K=V".into(), "-K=V".into()],
            env_clear: true,
            env_deny: vec!["-*".into()],
            notice: true,
            require: Some(Require::Full),
            keep_fds: vec![5],
            timeout: Some(Duration::from_nanos(1_500_000_001)),
            limits: vec!["-l".into()],
            allow_userns: true,
            allow_unix_sockets: true,
            allow_sockets: vec!["-s".into()],
            net: vec!["-n".into()],
            secrets: vec!["K@example.org".into()],
            patch: Some("/p.patch".into()),
            events: Some(OsString::from_vec(b"fd:9\xfe".to_vec())),
            report: Some("-report".into()),
            control_fd: Some(7),
            record: true,
            summary: true,
            allow_unconfined: true,
            session: Some(crate::session::SessionSpec {
                name: "s1".into(),
                idle_timeout_ms: Some(1500),
                stop_fd: None,
            }),
            command: vec!["sh".into(), "-c".into(), "--not-a-flag".into()],
        }
    }

    #[test]
    fn settings_survive_the_hand_over_unchanged() {
        for settings in [
            everything(),
            RunSettings {
                command: vec!["true".into()],
                ..RunSettings::default()
            },
        ] {
            let text = serde_json::to_vec(&settings).expect("serialises");
            let argv = [OsString::from("jail")]
                .into_iter()
                .chain(arguments(4, &settings.command));
            let cli = crate::cli::args::Cli::try_parse_from(argv).expect("parses");
            assert_eq!(cli.run.settings_fd, Some(4));
            assert_eq!(cli.run.settings.command, settings.command);
            assert_eq!(decode(&text, &cli.run.settings.command), Ok(settings));
        }
    }

    #[test]
    fn a_command_that_looks_like_flags_survives_the_arguments() {
        let command: Vec<OsString> = vec!["--help".into(), "".into(), "--settings-fd=9".into()];
        let argv = [OsString::from("jail")]
            .into_iter()
            .chain(arguments(5, &command));
        let cli = crate::cli::args::Cli::try_parse_from(argv).expect("parses");
        assert_eq!(cli.run.settings_fd, Some(5));
        assert_eq!(cli.run.settings.command, command);
    }

    #[test]
    fn the_hand_over_takes_no_other_flags_and_no_bad_json() {
        let argv = ["jail", "--settings-fd=5", "--ro=/", "--", "true"];
        let cli = crate::cli::args::Cli::try_parse_from(argv).expect("parses");
        let e = read_settings(5, &cli.run.settings).unwrap_err().to_string();
        assert!(e.contains("give only the command"), "{e}");
        assert!(decode(b"{", &[]).is_err());
        assert!(decode(b"{\"ro\": 1}", &[]).is_err());
    }
}
