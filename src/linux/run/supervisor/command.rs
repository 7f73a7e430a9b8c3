//! The command's own process: confined (privileges, Landlock, seccomp, the unix mediation),
//! then exec'd.

use super::*;

/// The command's own process: confine, then execve. Never returns. `view_gate`: in namespace
/// mode, where init signals that the mount view is built (one byte; end of file if it failed).
pub(super) fn command_main(
    conf: &Confinement,
    policy: &Policy,
    argv: &[CString],
    view_gate: Option<std::os::unix::net::UnixStream>,
) -> ! {
    // A session's process keeps its end of the channel (the supervisor's is closed here).
    let session_channel = conf.session.as_ref().and_then(|s| s.take_inside());
    // Signal mask and ignored dispositions are inherited through execve: give the command clean
    // ones (a pipeline must end its writer with SIGPIPE as usual).
    let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
    // SAFETY: SIG_DFL runs no handler code.
    let _ =
        unsafe { nix::sys::signal::signal(Signal::SIGPIPE, nix::sys::signal::SigHandler::SigDfl) };
    // With the mount view, init entered the working directory inside it.
    if conf.mount.is_none() {
        if let Err(e) = std::env::set_current_dir(&policy.cwd) {
            die(
                EXIT_JAIL_ERROR,
                &format!("--cwd {}: {e}", policy.cwd.display()),
            );
        }
    }
    let channel_fd = session_channel
        .as_ref()
        .map(std::os::fd::AsRawFd::as_raw_fd);
    if let Err(e) = confine(conf, policy, view_gate, channel_fd) {
        die(EXIT_JAIL_ERROR, &e.to_string());
    }
    let mut envp = conf.envp.clone();
    if conf.mount.is_none() {
        // No /dev of our own to hold the policy file: a sealed memfd instead.
        match sealed_policy_fd(&conf.policy_json, &policy.keep_fds) {
            Ok(fd) => {
                envp.push(CString::new(format!("JAIL_POLICY=/proc/self/fd/{fd}")).expect("no NUL"))
            }
            Err(e) => die(EXIT_JAIL_ERROR, &format!("policy file: {e}")),
        }
    }
    if let (Some(channel), Some(session)) = (session_channel, &conf.session) {
        forker_main(channel, envp, conf.mount.is_some(), session.exec_domain)
    }
    crate::timing::mark("command: confined, exec");
    exec_or_die(argv, &envp)
}

/// execvpe, or the shell's exit code and message for a command that is not there (127) or
/// cannot be run (126).
pub(super) fn exec_or_die(argv: &[CString], envp: &[CString]) -> ! {
    let Some(program) = argv.first() else {
        die(EXIT_NOT_FOUND, "no command")
    };
    let Err(err) = nix::unistd::execvpe(program, argv, envp);
    let name = program.to_string_lossy();
    // execvp reports EACCES when some PATH directory was unreadable even though the command is
    // nowhere: that is "not found" (as shells say), not "not executable".
    let found_somewhere = || {
        let name = std::ffi::OsStr::from_bytes(program.as_bytes());
        if name.as_bytes().contains(&b'/') {
            return std::path::Path::new(name).exists();
        }
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(name).exists()))
            .unwrap_or(false)
    };
    match err {
        nix::errno::Errno::ENOENT => die(EXIT_NOT_FOUND, &format!("{name}: command not found")),
        nix::errno::Errno::EACCES if !found_somewhere() => {
            die(EXIT_NOT_FOUND, &format!("{name}: command not found"))
        }
        e => die(
            EXIT_NOT_EXECUTABLE,
            &format!("{name}: cannot execute: {}", e.desc()),
        ),
    }
}

/// The policy JSON in a memfd sealed against every change, at a descriptor number above those
/// the command keeps, left open across execve.
pub(super) fn sealed_policy_fd(json: &str, keep: &[i32]) -> std::io::Result<i32> {
    use nix::fcntl::{FcntlArg, SealFlag, fcntl};
    use nix::sys::memfd::{MFdFlags, memfd_create};
    let fd = memfd_create(
        "jail-policy",
        MFdFlags::MFD_ALLOW_SEALING | MFdFlags::MFD_CLOEXEC,
    )?;
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, json.as_bytes())?;
    fcntl(
        &file,
        FcntlArg::F_ADD_SEALS(
            SealFlag::F_SEAL_WRITE
                | SealFlag::F_SEAL_GROW
                | SealFlag::F_SEAL_SHRINK
                | SealFlag::F_SEAL_SEAL,
        ),
    )?;
    let target = keep.iter().copied().max().unwrap_or(2).max(9) + 1;
    if std::os::fd::AsRawFd::as_raw_fd(&file) == target {
        // The memfd already has the number (the caller left few descriptors open): dup3 onto
        // itself is EINVAL, so it stays as it is, without CLOEXEC.
        let fd = std::os::fd::IntoRawFd::into_raw_fd(file);
        // SAFETY: F_SETFD on the descriptor just made, kept open for the command.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        return Ok(target);
    }
    // SAFETY: dup3 onto a number that the command keeps nothing at; no CLOEXEC on the copy.
    let rc = unsafe { libc::dup3(std::os::fd::AsRawFd::as_raw_fd(&file), target, 0) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(target)
}

/// Order inside the child: session → drop capabilities → close descriptors → the Landlock
/// rules the view does not change → (the mount view, built by init meanwhile) → the working
/// directory in the view → the rest of Landlock → seccomp. seccomp goes last when it forbids
/// what the others need (`landlock_restrict_self` with mediated unix sockets); otherwise it is
/// loaded before the view is ready, with the early rules. Either way both are in force before
/// the execve, and neither can be lifted after.
pub(super) fn confine(
    conf: &Confinement,
    policy: &Policy,
    view_gate: Option<std::os::unix::net::UnixStream>,
    session_channel: Option<i32>,
) -> Result<(), JailError> {
    privileges::own_session_or_group()?;
    privileges::set_no_new_privs()?;
    privileges::drop_all_capabilities()?;
    let mut keep = policy.keep_fds.clone();
    keep.extend(session_channel);
    privileges::close_inherited_fds(&keep)?;
    crate::timing::mark("command: privileges dropped");
    let pending = match &conf.landlock {
        Some(plan) => landlock::begin(plan, view_gate.is_some())?,
        None => None,
    };
    // While init still builds the view, the filter too when it leaves Landlock's calls alone
    // (loading it costs ~0.3 ms: the kernel converts and compiles the program).
    let filter_first = view_gate.is_some() && !seccomp::refuses_landlock(policy);
    if let (true, Some(program)) = (filter_first, &conf.seccomp) {
        seccomp::apply(program)?;
    }
    if let Some(gate) = view_gate {
        let mut byte = [0u8; 1];
        let got = loop {
            match std::io::Read::read(&mut &gate, &mut byte) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        match got {
            Ok(1) => {}
            // The view failed: init reports why.
            // SAFETY: leave at once, running nothing of the parent's.
            Ok(_) => unsafe { libc::_exit(EXIT_JAIL_ERROR) },
            Err(e) => {
                return Err(JailError::layer("mount", "waiting for the view", e));
            }
        }
        drop(gate);
        crate::timing::mark("command: view ready");
        // The working directory inherited from before the view points into the old, writable
        // mounts: enter the view, as init did.
        if let Some(view) = &conf.mount {
            std::env::set_current_dir(&view.cwd).map_err(|e| {
                JailError::layer("mount", format!("chdir {}", view.cwd.display()), e)
            })?;
        }
    }
    let mut fds = vec![0, 1, 2];
    fds.extend(&policy.keep_fds);
    if conf.mount.is_some() {
        privileges::reopen_read_only_files_in_view(&fds)?;
    }
    if let (Some(plan), Some(pending)) = (&conf.landlock, pending) {
        landlock::finish(plan, pending, &fds)?;
        crate::timing::mark("command: landlock applied");
    }
    if let (false, Some(program)) = (filter_first, &conf.seccomp) {
        seccomp::apply(program)?;
    }
    // Last: the connector it forks must carry every layer above, and no notifying filter.
    if let Some(unix) = &conf.unix {
        let channels = unix.channels.borrow_mut().take();
        let channels =
            channels.ok_or_else(|| JailError::layer("unix sockets", "arm", "no channels"))?;
        unix_connect::arm(&channels, unix.notified)
            .map_err(|e| JailError::layer("seccomp", "user notification", e))?;
    }
    Ok(())
}
