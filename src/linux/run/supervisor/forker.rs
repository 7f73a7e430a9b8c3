//! A session's process inside: in the command's place, confined exactly as a command is (every
//! layer in force, nothing re-applied later), it runs nothing of its own. For each exec the
//! supervisor sends (the command's stdio and a stream of its own), it forks a monitor, which
//! forks and execs the command and reports its end. Commands inherit the confinement by
//! construction: they are its descendants.
//!
//! It is not dumpable and holds only its channel to the supervisor (closed in every command).
//! Each command enters a Landlock domain of its own just before its execve
//! (`layers::exec_domain`): the forking process and the monitors stay in the session's, which
//! reaches every command, while no command reaches them or another exec's processes through
//! ptrace or /proc (signals still pass, as between a run's processes). On SIGTERM (a stop, the
//! session's timeout) it passes the signal to every monitor, which passes it to its command's
//! group, and ends when they have.

use std::collections::BTreeSet;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use super::*;
use crate::linux::layers::exec_domain::{self, ExecDomain, ExecRuleset};
use crate::session::wire::{self, ExecRequest};

/// The forking process's loop. Never returns.
pub(super) fn forker_main(
    channel: OwnedFd,
    envp: Vec<CString>,
    mount: bool,
    exec_domain: ExecDomain,
) -> ! {
    let _ = privileges::set_not_dumpable();
    to_dev_null(&[0, 1, 2]);
    close_run_descriptors(channel.as_raw_fd());
    // Before READY: a session whose execs cannot get the domain it says they get never starts.
    let own_domain = match exec_domain::prepare(exec_domain) {
        Ok(r) => r,
        Err(e) => die(EXIT_JAIL_ERROR, &e.to_string()),
    };
    let inside = Inside {
        envp: &envp,
        mount,
        own_domain: own_domain.as_ref(),
    };
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGTERM,
        Signal::SIGCHLD,
        Signal::SIGINT,
        Signal::SIGHUP,
    ] {
        set.add(s);
    }
    if sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None).is_err() {
        die(EXIT_JAIL_ERROR, "session: sigprocmask");
    }
    let sfd = match SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK) {
        Ok(s) => s,
        Err(e) => die(EXIT_JAIL_ERROR, &format!("session: signalfd: {e}")),
    };
    if wire::send_with_fds(channel.as_raw_fd(), wire::READY, &[]).is_err() {
        die(EXIT_JAIL_ERROR, "session: the supervisor is gone");
    }
    crate::timing::mark("session: ready");
    // Lives as long as the session: the setup code it ran once need not stay resident.
    crate::sys::release_program_code();
    let mut monitors: BTreeSet<i32> = BTreeSet::new();
    let mut ending = false;
    loop {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        let listen = if ending {
            PollFlags::empty()
        } else {
            PollFlags::POLLIN
        };
        let mut fds = [
            PollFd::new(channel.as_fd(), listen),
            PollFd::new(sfd.as_fd(), PollFlags::POLLIN),
        ];
        if let Err(e) = poll(&mut fds, PollTimeout::NONE) {
            if e != nix::errno::Errno::EINTR {
                die(EXIT_JAIL_ERROR, &format!("session: poll: {e}"));
            }
            continue;
        }
        let ready = |i: usize| fds[i].revents().is_some_and(|r| !r.is_empty());
        if ready(1) {
            while let Ok(Some(info)) = sfd.read_signal() {
                if info.ssi_signo as i32 == libc::SIGCHLD {
                    reap_monitors(&mut monitors);
                } else {
                    ending = true;
                    for m in &monitors {
                        let _ = kill(Pid::from_raw(*m), Signal::SIGTERM);
                    }
                }
            }
        }
        if ready(0) && !ending {
            match wire::recv_with_fds(channel.as_raw_fd(), 4) {
                Ok(Some((wire::EXEC, fds))) if fds.len() == 4 => {
                    if let Some(m) = start_monitor(fds, &channel, &sfd, &inside) {
                        monitors.insert(m);
                    }
                }
                Ok(Some(_)) => {}
                // The supervisor is gone: nothing more will come; end as on a stop.
                Ok(None) | Err(_) => {
                    ending = true;
                    for m in &monitors {
                        let _ = kill(Pid::from_raw(*m), Signal::SIGTERM);
                    }
                }
            }
        }
        if ending && monitors.is_empty() {
            // SAFETY: leave without running anything of the parent's.
            unsafe { libc::_exit(0) }
        }
    }
}

/// The descriptors a command would lose at execve (close-on-exec: the run's cgroup files, its
/// control socket) are closed here, where no execve comes: the forking process and its monitors
/// hold only the channel, stdio and what the command is to keep (`--keep-fd`, the policy file).
fn close_run_descriptors(channel: i32) {
    let open: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    for fd in open.into_iter().filter(|fd| *fd > 2 && *fd != channel) {
        // SAFETY: F_GETFD only queries; close of a descriptor this process holds and no other
        // code here uses (the directory listing's own is gone by now, or fails harmlessly).
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC != 0 {
                libc::close(fd);
            }
        }
    }
}

fn reap_monitors(monitors: &mut BTreeSet<i32>) {
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(status) => {
                if let Some(pid) = status.pid() {
                    monitors.remove(&pid.as_raw());
                }
            }
        }
    }
}

fn to_dev_null(fds: &[i32]) {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in fds {
            // SAFETY: dup2 onto a standard descriptor this process owns.
            unsafe { libc::dup2(null.as_raw_fd(), *fd) };
        }
    }
}

/// What every command of the session starts from.
struct Inside<'a> {
    /// The session's environment.
    envp: &'a [CString],
    /// Whether the mount view is in place (files handed in are reopened in it).
    mount: bool,
    /// The ruleset each command restricts itself with (`layers::exec_domain`), if any.
    own_domain: Option<&'a ExecRuleset>,
}

/// Forks the monitor of one command; returns its pid.
fn start_monitor(
    mut fds: Vec<OwnedFd>,
    channel: &OwnedFd,
    sfd: &SignalFd,
    inside: &Inside,
) -> Option<i32> {
    let stream = fds.pop().expect("four descriptors");
    // SAFETY: the forking process is single-threaded.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            // The channel and the forker's signals are not the monitor's.
            // SAFETY: closing descriptors this (new) process owns copies of.
            unsafe {
                libc::close(channel.as_raw_fd());
                libc::close(sfd.as_fd().as_raw_fd());
            }
            monitor(fds, stream, inside)
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => Some(child.as_raw()),
        Err(_) => {
            let _ = wire::send(
                &mut std::fs::File::from(stream),
                wire::EXIT,
                &wire::int_body(EXIT_JAIL_ERROR),
            );
            None
        }
    }
}

/// One command: read its request, fork and exec it, pass on the signals the supervisor sends
/// (and a stop's SIGTERM) to its process group, report its end.
fn monitor(stdio: Vec<OwnedFd>, stream: OwnedFd, inside: &Inside) -> ! {
    let mut stream = std::fs::File::from(stream);
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    let req: ExecRequest = match wire::recv(&mut stream) {
        Ok(Some((wire::EXEC, body))) => match serde_json::from_slice(&body) {
            Ok(r) => r,
            Err(_) => unsafe { libc::_exit(EXIT_JAIL_ERROR) },
        },
        // SAFETY: leave at once; the supervisor reports the end.
        _ => unsafe { libc::_exit(EXIT_JAIL_ERROR) },
    };
    let argv: Vec<CString> = req
        .argv
        .iter()
        .filter_map(|a| CString::new(a.to_vec()).ok())
        .collect();
    let envp = merged_env(inside.envp, &req.env);
    let cwd = req.cwd.clone().and_then(|c| CString::new(c.0).ok());
    let umask = req.umask;
    // SAFETY: the monitor is single-threaded.
    let command = match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            drop(stream);
            command_in_session(&stdio, &argv, &envp, (cwd.as_deref(), umask), inside)
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => child,
        Err(_) => report_end(&mut stream, EXIT_JAIL_ERROR),
    };
    drop(stdio);
    // The supervisor learns this process's pid (the kernel translates it) and from it the
    // command's: what it kills itself when this one cannot act (stopped, killed) at the end of
    // the exec's timeout.
    let _ = crate::sys::send_pid(stream.as_raw_fd(), std::process::id() as i32);
    watch_command(command, stream)
}

/// The session's environment with the exec's variables set over it.
fn merged_env(session: &[CString], set: &[(wire::Word, wire::Word)]) -> Vec<CString> {
    let mut out: Vec<CString> = session
        .iter()
        .filter(|kv| {
            let name = kv
                .as_bytes()
                .split(|b| *b == b'=')
                .next()
                .unwrap_or_default();
            !set.iter().any(|(k, _)| k.as_slice() == name)
        })
        .cloned()
        .collect();
    for (k, v) in set {
        let mut kv = k.to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v);
        if let Ok(c) = CString::new(kv) {
            out.push(c);
        }
    }
    out
}

/// The command's process: a session of its own (its group is what signals reach), the caller's
/// stdio, the working directory, clean signals, then execve.
fn command_in_session(
    stdio: &[OwnedFd],
    argv: &[CString],
    envp: &[CString],
    (cwd, umask): (Option<&std::ffi::CStr>, Option<u32>),
    inside: &Inside,
) -> ! {
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    let _ = nix::unistd::setsid();
    for (i, fd) in stdio.iter().enumerate() {
        // SAFETY: dup2 onto the standard descriptors; the sources are open (received above).
        if unsafe { libc::dup2(fd.as_raw_fd(), i as i32) } < 0 {
            die(EXIT_JAIL_ERROR, "session: dup2 of the caller's stdio");
        }
    }
    // The originals close before anything resolves a path: `--cwd /proc/self/fd/N` must not
    // lead through one of them to the host's mounts.
    for fd in stdio {
        // SAFETY: closing this process's copies, never used again (it execs or leaves).
        unsafe { libc::close(fd.as_raw_fd()) };
    }
    // A file handed in for reading still points at the host's mount: reopened in the view, as
    // a run's stdin is.
    if inside.mount {
        if let Err(e) = privileges::reopen_read_only_files_in_view(&[0, 1, 2]) {
            die(EXIT_JAIL_ERROR, &e.to_string());
        }
    }
    if let Some(dir) = cwd {
        // A directory the view shows: one reached through a magic link (/proc/self/fd/N,
        // /proc/PID/cwd) to the host's mounts is outside the root, and getcwd says so.
        let entered = nix::unistd::chdir(dir).and_then(|()| nix::unistd::getcwd());
        match entered {
            Ok(p) if p.is_absolute() => {}
            Ok(p) => die(
                EXIT_JAIL_ERROR,
                &format!(
                    "--cwd {}: leads outside the session's view ({})",
                    dir.to_string_lossy(),
                    p.display()
                ),
            ),
            Err(e) => die(
                EXIT_JAIL_ERROR,
                &format!("--cwd {}: {}", dir.to_string_lossy(), e.desc()),
            ),
        }
    }
    if let Some(mask) = umask {
        // SAFETY: umask only sets this process's mask.
        unsafe { libc::umask((mask & 0o777) as libc::mode_t) };
    }
    // The caller's signals, not the session starter's: nothing ignored, nothing blocked (a
    // session started under nohup would otherwise hand every command an ignored SIGHUP).
    let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
    for n in 1..=64 {
        if n == libc::SIGKILL || n == libc::SIGSTOP {
            continue;
        }
        // The raw call: glibc's own refuses the two real-time signals it keeps for itself,
        // which an ignoring starter would otherwise pass on too.
        // SAFETY: a zeroed sigaction is SIG_DFL with no flags; the kernel only reads it.
        unsafe {
            let act: libc::sigaction = std::mem::zeroed();
            libc::syscall(
                libc::SYS_rt_sigaction,
                n,
                &act as *const libc::sigaction,
                std::ptr::null_mut::<libc::sigaction>(),
                8usize,
            );
        }
    }
    // Last: a process an earlier exec left cannot reach this one through ptrace or /proc.
    if let Some(ruleset) = inside.own_domain {
        if let Err(e) = exec_domain::enter(ruleset) {
            die(EXIT_JAIL_ERROR, &e.to_string());
        }
    }
    exec_or_die(argv, envp)
}

/// The monitor's watch: the supervisor's signals and a stop's SIGTERM to the command's group;
/// its end reported as a run's exit code.
fn watch_command(command: Pid, mut stream: std::fs::File) -> ! {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut set = SigSet::empty();
    set.add(Signal::SIGCHLD);
    set.add(Signal::SIGTERM);
    let Ok(sfd) = SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK) else {
        let _ = kill(command, Signal::SIGKILL);
        report_end(&mut stream, EXIT_JAIL_ERROR)
    };
    let group = Pid::from_raw(-command.as_raw());
    let mut stream_open = true;
    // When SIGTERM went to the group (a timeout, a stop, the caller gone): the group's SIGKILL
    // follows after the grace, also when its leader ended first.
    let mut term_at: Option<std::time::Instant> = None;
    loop {
        if let Some(code) = ended(command) {
            let _ = wire::send(&mut stream, wire::EXIT, &wire::int_body(code));
            if let Some(at) = term_at {
                std::thread::sleep((at + KILL_GRACE).saturating_duration_since(Instant::now()));
                let _ = kill(group, Signal::SIGKILL);
            }
            // SAFETY: leave without running anything of the parent's.
            unsafe { libc::_exit(0) }
        }
        // A closed stream is not polled: its hang-up is reported whatever is asked, and the loop
        // would spin until the command ends.
        let watched = if stream_open { 2 } else { 1 };
        let mut fds = [
            PollFd::new(sfd.as_fd(), PollFlags::POLLIN),
            PollFd::new(stream.as_fd(), PollFlags::POLLIN),
        ];
        if poll(&mut fds[..watched], PollTimeout::NONE).is_err() {
            continue;
        }
        let ready = |i: usize| i < watched && fds[i].revents().is_some_and(|r| !r.is_empty());
        if ready(0) {
            while let Ok(Some(info)) = sfd.read_signal() {
                if info.ssi_signo as i32 == libc::SIGTERM {
                    let _ = kill(group, Signal::SIGTERM);
                    term_at.get_or_insert_with(Instant::now);
                }
            }
        }
        if ready(1) {
            match wire::recv(&mut stream) {
                Ok(Some((wire::SIGNAL, b))) => {
                    if let Some(sig) = wire::body_int(&b).and_then(|n| Signal::try_from(n).ok()) {
                        // The group; a command that left it still gets the signal itself.
                        if kill(group, sig).is_err() {
                            let _ = kill(command, sig);
                        }
                        if sig == Signal::SIGTERM {
                            term_at.get_or_insert_with(Instant::now);
                        }
                    }
                }
                Ok(Some(_)) => {}
                // The supervisor is gone: the command goes too.
                _ => {
                    stream_open = false;
                    let _ = kill(group, Signal::SIGKILL);
                }
            }
        }
    }
}

/// The command's exit code once it has ended (128+N for a signal), reaping it.
fn ended(command: Pid) -> Option<i32> {
    match waitpid(command, Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::Exited(_, code)) => Some(code),
        Ok(WaitStatus::Signaled(_, sig, _)) => Some(128 + sig as i32),
        Ok(_) => None,
        Err(_) => Some(EXIT_JAIL_ERROR),
    }
}

fn report_end(stream: &mut std::fs::File, code: i32) -> ! {
    let _ = wire::send(stream, wire::EXIT, &wire::int_body(code));
    // SAFETY: leave without running anything of the parent's.
    unsafe { libc::_exit(0) }
}
