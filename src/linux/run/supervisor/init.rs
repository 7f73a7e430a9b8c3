//! The jail's init (namespace mode): pid 1 of the new pid namespace, which builds the mount
//! view, confines itself, starts the command and reaps what is left.

use super::*;

/// Prints a one-line error and leaves with `code`. Only for the children, which must not unwind
/// back into the supervisor's code.
pub(super) fn die(code: i32, message: &str) -> ! {
    crate::text::say(format!("jail: {message}"));
    // SAFETY: _exit ends the process without running the parent's atexit handlers or destructors.
    unsafe { libc::_exit(code) }
}

/// Pid 1 of the new namespaces.
/// Init's ends of its channels to the supervisor.
pub(super) struct InitChannels {
    /// The supervisor writes one byte once the id maps are written.
    pub(super) release: OwnedFd,
    /// Init reports the view ("ok" or why not), then stops and the end of the command.
    pub(super) ready: OwnedFd,
    /// Descriptors (the proxy's socket) and credentials (the command's pid) go over this.
    pub(super) fds: std::os::unix::net::UnixStream,
}

pub(super) fn init_main(
    channels: InitChannels,
    tty: Option<i32>,
    mount_plan: &mounts::MountPlan,
    conf: &Confinement,
    policy: &Policy,
    argv: &[CString],
) -> ! {
    let (command, ready) = init_start(channels, tty, mount_plan, conf, policy, argv);
    let sfd = init_confine(command);
    init_reap(command, &sfd, &ready, policy.timeout)
}

/// Init until the command goes on: released by the supervisor, the command forked (it waits at
/// the gate), the view built, the supervisor told, the command let through. Returns the
/// command's pid and the channel its end is reported on.
pub(super) fn init_start(
    channels: InitChannels,
    tty: Option<i32>,
    mount_plan: &mounts::MountPlan,
    conf: &Confinement,
    policy: &Policy,
    argv: &[CString],
) -> (Pid, OwnedFd) {
    // If the supervisor dies, so does the whole namespace.
    if nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err() {
        die(EXIT_JAIL_ERROR, "init: PR_SET_PDEATHSIG failed");
    }
    let InitChannels {
        release: sync,
        ready,
        fds: fd_channel,
    } = channels;
    // Before anything of the tree is forked, every descendant is in the cgroups and inherits
    // the limits; done while the supervisor writes the id maps (a failure is reported below).
    let entered = conf
        .limits
        .enter()
        .map_err(|e| JailError::layer("limits", "enter", e));
    let mut byte = [0u8; 1];
    match nix::unistd::read(&sync, &mut byte) {
        Ok(1) => {}
        // The supervisor died or gave up before releasing us.
        _ => unsafe { libc::_exit(EXIT_JAIL_ERROR) },
    }
    drop(sync);
    crate::timing::mark("init: released");
    // A group of our own (see the module notes); the command inherits it.
    let _ = nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0));
    if let Some(tty) = tty {
        // SAFETY: getpgrp only queries.
        hand_terminal(tty, unsafe { libc::getpgrp() });
    }
    // The command is forked before the view is built: it drops its privileges and adds the
    // Landlock rules that do not depend on the view on the other CPU while init mounts, then
    // waits at the gate for the view (a socket, so that init's write to a command that already
    // died is EPIPE, not SIGPIPE).
    let (gate, command_gate) = match std::os::unix::net::UnixStream::pair() {
        Ok(pair) => pair,
        Err(e) => die(EXIT_JAIL_ERROR, &format!("init: socketpair: {e}")),
    };
    // SAFETY: init is single-threaded.
    let command = match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            crate::timing::mark("command: forked");
            drop(fd_channel);
            drop(ready);
            drop(gate);
            command_main(conf, policy, argv, Some(command_gate))
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => child,
        Err(e) => die(EXIT_JAIL_ERROR, &format!("init: fork: {e}")),
    };
    drop(command_gate);
    // The session's channel is the supervisor's and the forking process's, never init's.
    if let Some(session) = &conf.session {
        session.close();
    }
    // With the id maps written and before /proc/sys is read-only in the view; after the fork,
    // so that the command does not wait for these four sysctl accesses to start.
    crate::linux::layers::limits::share_kernel_pools();
    let report = build_view(entered, mount_plan, conf, &fd_channel);
    // The supervisor first, as when the command was forked only now: it starts what watches
    // the command (the proxy, the hooks that receive its pid) as early as before.
    let _ = nix::unistd::write(&ready, report.as_bytes());
    if report == "ok" {
        // The command goes on. An error here means it died already; it is reaped below.
        let _ = nix::sys::socket::send(
            std::os::fd::AsRawFd::as_raw_fd(&gate),
            b"1",
            nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
        );
    }
    drop(gate);
    if report != "ok" {
        // The command sees the gate close and leaves; leaving pid 1 kills it anyway.
        // SAFETY: leave without running the parent's cleanup; the supervisor reports the error.
        unsafe { libc::_exit(EXIT_JAIL_ERROR) };
    }
    // The supervisor must see the command's end of the channel close if it dies unarmed.
    if let Some(unix) = &conf.unix {
        unix.close();
    }
    if !conf.command_started.is_empty() {
        // Still holding CAP_SYS_ADMIN over this pid namespace: allowed to name another pid.
        let _ = crate::sys::send_pid(
            std::os::fd::AsRawFd::as_raw_fd(&fd_channel),
            command.as_raw(),
        );
    }
    drop(fd_channel);
    (command, ready)
}

/// Init's view: the mounts, the layers' tmpfs mounts and the network handed to the supervisor.
/// Returns what init reports over `ready`: "ok", or `N` (namespaces unusable) or `E` (an
/// error) and the reason.
pub(super) fn build_view(
    entered: Result<(), JailError>,
    mount_plan: &mounts::MountPlan,
    conf: &Confinement,
    fd_channel: &std::os::unix::net::UnixStream,
) -> String {
    let mut layer_mounts = Vec::new();
    let mut report = match entered.map(|_| mounts::apply(mount_plan, &conf.policy_json)) {
        Err(e) => format!("E{e}"),
        Ok(Ok(fds)) => {
            layer_mounts = fds;
            "ok".to_string()
        }
        Ok(Err(mounts::MountError::Unusable(e))) => format!("N{e}"),
        Ok(Err(mounts::MountError::Failed(e))) => format!("E{e}"),
    };
    // The layers' tmpfs mounts, to the supervisor (which reads them before the proxy's socket).
    for fd in layer_mounts.drain(..) {
        let sock = std::os::fd::AsRawFd::as_raw_fd(fd_channel);
        if let Err(e) = crate::sys::send_fd(sock, std::os::fd::AsRawFd::as_raw_fd(&fd)) {
            report = format!("Ecopy-on-write layer: handing the tmpfs over: {e}");
            break;
        }
    }
    if report == "ok" {
        if let Err(e) = init_network(&conf.net, fd_channel) {
            report = format!("E{e}");
        }
    }
    crate::timing::mark("init: mount view built");
    report
}

/// Init keeps nothing it does not need; returns the descriptor its signals arrive on.
pub(super) fn init_confine(command: Pid) -> SignalFd {
    // Init keeps nothing it does not need: no capabilities, no inherited descriptors, and it
    // cannot be inspected by the command (same uid) through ptrace or /proc/1/mem.
    let confined = privileges::set_not_dumpable()
        .and_then(|_| privileges::set_no_new_privs())
        .and_then(|_| privileges::drop_all_capabilities());
    if let Err(e) = confined {
        let _ = kill(command, Signal::SIGKILL);
        die(EXIT_JAIL_ERROR, &format!("init: {e}"));
    }
    let sfd = match SignalFd::with_flags(&handled_signals(), SfdFlags::SFD_CLOEXEC) {
        Ok(s) => s,
        Err(e) => {
            let _ = kill(command, Signal::SIGKILL);
            die(EXIT_JAIL_ERROR, &format!("init: signalfd: {e}"));
        }
    };
    let _ = crate::sys::cloexec_range(3, u32::MAX);
    sfd
}

/// Init as pid 1 until the command ends: reaps, passes on what the supervisor sends, and ends
/// the namespace at the backstop deadline; the end goes to the supervisor over `ready`.
pub(super) fn init_reap(
    command: Pid,
    sfd: &SignalFd,
    ready: &OwnedFd,
    timeout: Option<Duration>,
) -> ! {
    // The timeout is the supervisor's; this backstop holds when the supervisor cannot act (it
    // stops with the command under a terminal, and a command can stop itself).
    let deadline = timeout.map(|t| Instant::now() + t + KILL_GRACE + INIT_DEADLINE_MARGIN);
    let last_pid = || {
        std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    loop {
        let info = match next_event(sfd, &[], deadline) {
            Event::Signal(info) => info,
            Event::Ready(_) => continue,
            Event::Deadline => {
                // SAFETY: kill(-1) from pid 1 reaches every other process of the namespace.
                unsafe { libc::kill(-1, libc::SIGKILL) };
                while waitpid(None, None).is_ok() {}
                let msg = encode_end(Some(libc::SIGKILL), last_pid(), true);
                let _ = nix::unistd::write(ready, &msg);
                // SAFETY: as below.
                unsafe { libc::_exit(EXIT_TIMEOUT) }
            }
        };
        let signo = info.ssi_signo as i32;
        if signo == libc::SIGCHLD {
            match reap(command, true) {
                Reaped::Exited(code, signal) => {
                    let msg = encode_end(signal, last_pid(), false);
                    let _ = nix::unistd::write(ready, &msg);
                    // SAFETY: leaving pid 1 makes the kernel kill the rest of the namespace.
                    unsafe { libc::_exit(code) }
                }
                Reaped::Stopped => {
                    let _ = nix::unistd::write(ready, &[MSG_STOPPED]);
                }
                Reaped::Running => {}
            }
        } else if info.ssi_code == SI_USER && info.ssi_pid == 0 {
            // Only what the supervisor sends (a sender outside the pid namespace shows as pid 0):
            // a group signal sent from inside already reached the command.
            if let Ok(sig) = Signal::try_from(signo) {
                crate::linux::run::forward::pass_on(command, sig);
                // A stopped command would see a request to end only when continued (the
                // supervisor's SIGCONT reaches init's group, which the command may have left).
                if crate::linux::run::forward::reach(sig)
                    == crate::linux::run::forward::Reach::Group
                {
                    crate::linux::run::forward::to_group(command, Signal::SIGCONT);
                }
            }
        }
    }
}

/// Inside the new network namespace: loopback up, and the proxy's socket listening on it.
pub(super) fn init_network(
    net: &NetSetup,
    channel: &std::os::unix::net::UnixStream,
) -> Result<(), String> {
    let port = match net {
        NetSetup::Host | NetSetup::HostProxy { .. } => return Ok(()),
        NetSetup::Loopback => None,
        NetSetup::Proxy { port, .. } => Some(*port),
    };
    crate::sys::loopback_up()
        .map_err(|e| format!("network namespace: bringing up loopback: {e}"))?;
    if let Some(port) = port {
        let listener = std::net::TcpListener::bind(("127.0.0.1", port))
            .map_err(|e| format!("--net allow: listening on 127.0.0.1:{port}: {e}"))?;
        crate::sys::send_fd(
            std::os::fd::AsRawFd::as_raw_fd(channel),
            std::os::fd::AsRawFd::as_raw_fd(&listener),
        )
        .map_err(|e| format!("--net allow: handing the proxy socket over: {e}"))?;
    }
    Ok(())
}
