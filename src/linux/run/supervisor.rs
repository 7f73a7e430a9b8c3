//! Supervisor layer: the launcher stays outside the sandbox, starts the tree, forwards signals,
//! enforces the timeout, and makes sure nothing outlives the run.
//!
//! Process shape with the mount layer:
//!
//! ```text
//! jail (supervisor, outside) ── clone(NEWUSER|NEWNS|NEWPID) ──> init (pid 1 inside)
//!                                                                 └─ fork ──> command
//! ```
//! The supervisor writes the child's uid/gid maps, then releases it. Init builds the mount view,
//! forks the command (which confines itself and execs), then only reaps and forwards signals.
//! When the command ends, init exits with its status and the kernel kills everything else left in
//! the pid namespace: double-forked daemons included. Without namespaces the supervisor is a
//! child subreaper and kills what is left itself.
//!
//! Process groups, as a shell runs a job: init and the command get a group of their own, and when
//! jail holds the terminal's foreground it hands it to that group. So Ctrl-C and window changes
//! reach the command straight from the terminal, while a signal sent to jail (its pid, or its
//! whole group, as CI runners and `timeout` do) reaches only the supervisor and is passed on
//! once: the signals that end a job to the command's whole group (see [`super::forward`]). When
//! the command stops (Ctrl-Z), init tells the supervisor, which takes the terminal back and stops
//! itself, so the user's shell sees the job stopped; on SIGCONT it hands the terminal over again.
//!
//! Its parts: `watch` (the supervisor's loop over the running command), `init` (the jail's pid
//! 1 in namespace mode) and `command` (the command's own process, confined then exec'd).

use std::ffi::{CString, OsString};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::error::{EXIT_JAIL_ERROR, EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_TIMEOUT, JailError};
use crate::linux::layers::{landlock, mounts, privileges, seccomp, unix_connect};
use crate::policy::Policy;

mod command;
mod forker;
mod init;
mod watch;

use command::*;
use forker::*;
use init::*;
use watch::*;

/// Signals passed on to the command when they are sent to jail by another process. Signals the
/// terminal generates (Ctrl-C, Ctrl-\, window resize) go to the foreground group, the command's.
const FORWARDED: &[Signal] = &[
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
];

/// si_code of a signal the kernel generated (a terminal's Ctrl-C), as opposed to kill().
const SI_KERNEL: i32 = 0x80;
/// si_code of a signal sent with kill().
const SI_USER: i32 = 0;

/// Init's message to the supervisor: the command stopped (Ctrl-Z, SIGTSTP, SIGTTIN).
const MSG_STOPPED: u8 = b'T';
/// Init's last message: how the command ended (i32 signal or 0), the last pid used in the
/// namespace (u64), both little-endian, and whether init's own deadline ended it (u8).
const MSG_ENDED: u8 = b'E';
const ENDED_LEN: usize = 14;

/// Init's deadline comes this long after the supervisor's SIGKILL would: a backstop for when the
/// supervisor cannot act (stopped with the command under a terminal).
const INIT_DEADLINE_MARGIN: Duration = Duration::from_secs(1);

fn encode_end(signal: Option<i32>, last_pid: u64, timed_out: bool) -> Vec<u8> {
    let mut msg = vec![MSG_ENDED];
    msg.extend(signal.unwrap_or(0).to_le_bytes());
    msg.extend(last_pid.to_le_bytes());
    msg.push(u8::from(timed_out));
    msg
}

/// Reads the body of an end message into `end`.
fn read_end(status: &OwnedFd, end: &mut RunEnd) {
    let mut body = [0u8; ENDED_LEN - 1];
    if read_full(status, &mut body) == body.len() {
        let signal = i32::from_le_bytes(body[..4].try_into().expect("4 bytes"));
        let last_pid = u64::from_le_bytes(body[4..12].try_into().expect("8 bytes"));
        end.signal = (signal > 0).then_some(signal);
        // Pid 1 is init; every later pid was one of the tree's processes.
        end.processes = last_pid.checked_sub(1).filter(|n| *n > 0);
        end.timed_out |= body[12] == 1;
    }
}

use crate::run_semantics::KILL_GRACE;

/// Told the command's host pid once it exists (before it execs).
pub type CommandStarted = Box<dyn Fn(i32)>;

/// Everything the command process applies to itself before execve, compiled in advance.
pub struct Confinement {
    pub mount: Option<mounts::MountPlan>,
    pub landlock: Option<landlock::LandlockPlan>,
    pub seccomp: Option<Vec<seccompiler::sock_filter>>,
    /// The command's environment, KEY=VALUE.
    pub envp: Vec<CString>,
    /// The resolved policy as JSON (the file JAIL_POLICY names).
    pub policy_json: String,
    /// The network the command gets (`--net`).
    pub net: NetSetup,
    /// Called with the command's pid (as the host sees it) once it exists, before it execs; for
    /// the audit reader, which keeps only the denials of domains that process creates.
    /// Also for the event stream, whose watcher thread starts then (the supervisor's signals
    /// are blocked by that time, so the thread never takes its SIGCHLD).
    pub command_started: Vec<CommandStarted>,
    /// Printed once this confinement is known to be built, before the command runs: what a
    /// degraded run lacks.
    pub warning: Option<String>,
    /// Unix sockets allowed: every connect goes through the supervisor (unix_connect.rs); listen()
    /// held to the bind ports: every listen() too (listen_check.rs).
    pub unix: Option<UnixMediation>,
    /// The run's cgroups and rlimits, entered by the tree's first process (removed on drop).
    pub limits: crate::linux::layers::limits::Prepared,
    /// The control socket of the program that started jail (`--control-fd`): a byte on it, or
    /// its closing, stops the whole tree as a timeout does.
    pub stop_requests: Option<i32>,
    /// Where the tmpfs mounts holding the copy-on-write roots' upper layers go once init has
    /// made them (with the mount view, when the plan puts the layers on tmpfs).
    pub layer_mounts: Option<crate::linux::layers::layer_bound::Mounts>,
    /// A session: the command's place is taken by the process that forks each exec'd command,
    /// and the supervisor serves the session's control socket.
    pub session: Option<super::session::SessionSetup>,
}

/// What a mediated run needs before the command is forked.
pub struct UnixMediation {
    /// Which calls the notifying filter sends to the supervisor.
    pub notified: unix_connect::Notified,
    /// The ports listen() is held to, when it is notified.
    pub listen_ports: Option<Vec<u16>>,
    /// Taken by each process that uses its ends (the parent's copies close once the command runs).
    pub channels: std::cell::RefCell<Option<unix_connect::Channels>>,
    /// The `--allow-socket` sockets as the host shows them.
    pub allowed: std::collections::BTreeSet<unix_connect::SocketId>,
    /// The socket inodes the command inherits (its stdio, `--keep-fd`).
    pub inherited: std::collections::BTreeSet<u64>,
    /// Abstract addresses refused (no Landlock scope, no network namespace of its own).
    pub abstract_refused: bool,
    /// Their files, held open for the run: an inode in use is never handed to a new file, so
    /// another socket cannot come to carry an allowed identity (the socket removed and the
    /// number reused).
    pub pins: Vec<OwnedFd>,
}

impl UnixMediation {
    /// Drops this process's copies of every end (init, and the parent after a failure).
    fn close(&self) {
        drop(self.channels.borrow_mut().take());
    }

    /// In the supervisor, once the command is forked: wait for its listener and serve it.
    /// `init` is pid 1 of the namespaces, whose mount table tells the jail's own filesystems.
    fn start(&self, init: Option<Pid>) -> Result<(), JailError> {
        let err = |e: &dyn std::fmt::Display| JailError::layer("unix sockets", "mediation", e);
        let Some(channels) = self.channels.borrow_mut().take() else {
            return Err(err(&"started twice"));
        };
        let unix_connect::Channels {
            listener: (listener_end, command_end),
            requests: (requests_end, connector_end),
        } = channels;
        drop((command_end, connector_end));
        // Read before waiting for the listener: init lives at least until the command has armed
        // and run. A command that ended already leaves nothing to connect: an empty set refuses.
        let own_filesystems = match init {
            Some(init) => {
                let read = |p: String| {
                    std::fs::read(p)
                        .ok()
                        .map(|t| crate::linux::mountinfo::text(&t))
                };
                match (
                    read(format!("/proc/{init}/mountinfo")),
                    read("/proc/self/mountinfo".into()),
                ) {
                    (Some(jail), Some(host)) => unix_connect::own_filesystems(&jail, &host),
                    _ => {
                        tracing::info!("unix sockets: the jail's mount table could not be read");
                        Default::default()
                    }
                }
            }
            None => Default::default(),
        };
        let Some(listener) = unix_connect::receive_listener(&listener_end).map_err(|e| err(&e))?
        else {
            return Ok(());
        };
        let rules = unix_connect::Rules {
            own_filesystems,
            allowed: self.allowed.clone(),
            inherited: self.inherited.clone(),
            abstract_refused: self.abstract_refused,
        };
        let requests = self.notified.connect.then_some(requests_end);
        unix_connect::Mediator::new(listener, requests, rules, self.listen_ports.clone())
            .spawn()
            .map_err(|e| err(&e))
    }
}

/// What init does to the network before the command starts.
pub enum NetSetup {
    /// The host's network, as it is (possibly narrowed by Landlock's TCP rules).
    Host,
    /// A network namespace of its own with only loopback, up.
    Loopback,
    /// As `Loopback`, plus a listening socket on 127.0.0.1:`port` inside it, made by init before
    /// the command exists (so no client can race it) and handed to `serve`, which runs the proxy
    /// in the supervisor, outside the namespace.
    Proxy { port: u16, serve: ServeProxy },
    /// No namespace: the proxy listens on the host's loopback (Landlock limits the command's TCP
    /// to its port); it starts serving once the command is forked.
    HostProxy {
        listener: std::net::TcpListener,
        serve: ServeProxy,
    },
}

/// The serving half of the proxy, called with its listening socket.
pub type ServeProxy = Box<dyn Fn(std::net::TcpListener) -> Result<(), JailError>>;

/// The namespaces could not be created (user namespaces disabled, or not permitted here).
#[derive(Debug)]
pub struct NamespacesUnavailable(pub std::io::Error);

pub enum Outcome {
    Exited(RunEnd),
    NoNamespaces(NamespacesUnavailable),
}

/// How the run ended, for jail's exit code and the run report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunEnd {
    /// jail's exit code: the command's status, 128+N, or 124 on timeout.
    pub code: i32,
    pub timed_out: bool,
    /// The signal that ended the command, when one did.
    pub signal: Option<i32>,
    /// Processes the command's tree started (the command included), where known: pids in a
    /// fresh pid namespace are handed out in order.
    pub processes: Option<u64>,
    /// The caller asked for the stop (`--control-fd`), or went away.
    pub stopped: bool,
    /// The run's bound that ended it, when one did (decided by the launcher, which knows the
    /// bounds and reads the cgroups' counters).
    pub ended_by: Option<super::ended_by::EndedBy>,
}

fn handled_signals() -> SigSet {
    let mut set = SigSet::empty();
    for s in FORWARDED {
        set.add(*s);
    }
    set.add(Signal::SIGCHLD);
    set
}

/// The terminal jail holds the foreground of, if any: the one to hand to the command's group.
fn foreground_terminal() -> Option<i32> {
    (0..3).find(|&fd| {
        // SAFETY: isatty, tcgetpgrp and getpgrp only query.
        unsafe { libc::isatty(fd) == 1 && libc::tcgetpgrp(fd) == libc::getpgrp() }
    })
}

/// Gives the terminal's foreground to `pgid`. SIGTTOU must be blocked: the caller may be in a
/// background group when it does this (as a shell does for its jobs).
fn hand_terminal(tty: i32, pgid: libc::pid_t) {
    // SAFETY: tcsetpgrp only changes the terminal's foreground group.
    unsafe { libc::tcsetpgrp(tty, pgid) };
}

/// Runs the command under `conf` and returns jail's exit code.
pub fn run(policy: &Policy, conf: &Confinement) -> Result<Outcome, JailError> {
    // The supervisor writes to sockets and pipes the command can close at any moment (the proxy's
    // clients, init's pipe): a SIGPIPE must not end it before it quarantines and reports.
    // SAFETY: setting a disposition to SIG_IGN runs no handler code.
    unsafe { nix::sys::signal::signal(Signal::SIGPIPE, nix::sys::signal::SigHandler::SigIgn) }
        .map_err(|e| io("ignore SIGPIPE", &e))?;
    // Prepare everything that allocates before forking.
    let argv = c_argv(&policy.command)?;
    let signals = handled_signals();
    let mut blocked = signals;
    blocked.add(Signal::SIGTTOU);
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&blocked), None).map_err(|e| io("sigprocmask", &e))?;
    let sfd =
        SignalFd::with_flags(&signals, SfdFlags::SFD_CLOEXEC).map_err(|e| io("signalfd", &e))?;
    let tty = foreground_terminal();
    let shape = Shape {
        policy,
        conf,
        argv: &argv,
        tty,
        signals,
    };
    let started = match &conf.mount {
        Some(mount_plan) => shape.start_with_init(mount_plan)?,
        None => shape.start_alone()?,
    };
    // Init's messages after the view is built (the command stopped), in namespace mode.
    let (child, status) = match started {
        Started::Running { child, status } => (child, status),
        Started::NoNamespaces(e) => return Ok(Outcome::NoNamespaces(e)),
    };
    if let Some(session) = &conf.session {
        if let Err(e) = session.start() {
            let _ = kill(child, Signal::SIGKILL);
            let _ = waitpid(child, None);
            return Err(e);
        }
    }
    // A stopped command stops jail too, so that the shell sees its job stopped: only with a
    // terminal (nothing else resumes a job), and without a pid namespace only when no timeout
    // runs (a stopped supervisor enforces nothing, and there is no init to hold the deadline).
    let relay_stops = tty.is_some() && (conf.mount.is_some() || policy.timeout.is_none());
    // The command runs: the planning code is not needed again (a session's supervisor lives
    // as long as the session).
    crate::sys::release_program_code();
    crate::timing::mark("supervisor: supervising");
    let end = supervise(
        child,
        &sfd,
        Channels {
            status,
            stop_requests: conf.stop_requests,
        },
        tty,
        policy.timeout,
        conf.mount.is_none(),
        relay_stops,
    );
    crate::timing::mark("supervisor: command ended");
    if let Some(tty) = tty {
        // Take the terminal back for the shell that started jail.
        // SAFETY: getpgrp only queries.
        hand_terminal(tty, unsafe { libc::getpgrp() });
    }
    sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&blocked), None).ok();
    Ok(Outcome::Exited(end))
}

/// The supervisor's own error at `step`.
fn io(step: &str, e: &dyn std::fmt::Display) -> JailError {
    JailError::layer("supervisor", step, e)
}

/// What starting the tree needs, in either process shape.
struct Shape<'a> {
    policy: &'a Policy,
    conf: &'a Confinement,
    argv: &'a [CString],
    /// The terminal jail holds the foreground of.
    tty: Option<i32>,
    /// The signals the supervisor handles, blocked: unblocked again when nothing runs.
    signals: SigSet,
}

/// How starting the tree went.
enum Started {
    /// The tree's first process (init, or the command without namespaces), and init's status
    /// channel.
    Running { child: Pid, status: Option<OwnedFd> },
    /// Nothing runs: the namespaces could not be made or entered (the handled signals are
    /// unblocked again).
    NoNamespaces(NamespacesUnavailable),
}

/// The supervisor's ends of its channels to init.
struct SupervisorChannels {
    release: OwnedFd,
    ready: OwnedFd,
    fds: std::os::unix::net::UnixStream,
}

impl Shape<'_> {
    fn unblock(&self) {
        sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&self.signals), None).ok();
    }

    /// With the mount view: init, pid 1 of new namespaces, builds the view and forks the command.
    fn start_with_init(&self, mount_plan: &mounts::MountPlan) -> Result<Started, JailError> {
        let pipe = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| io("pipe", &e));
        // release: supervisor -> init once the id maps are written.
        // ready: init -> supervisor once the view is built ("ok"), or why it was not.
        let (release_read, release_write) = pipe()?;
        let (ready_read, ready_write) = pipe()?;
        // Init hands the proxy's listening socket, made inside the new network, over this.
        let (fd_parent, fd_child) =
            std::os::unix::net::UnixStream::pair().map_err(|e| io("socketpair", &e))?;
        // Init names the command's process in a credentials message: the kernel translates its
        // pid into ours.
        nix::sys::socket::setsockopt(&fd_parent, nix::sys::socket::sockopt::PassCred, &true)
            .map_err(|e| io("SO_PASSCRED", &e))?;
        // An IPC namespace of its own: SysV and POSIX IPC objects are keyed, and the host's
        // would be reachable (and the jail's would outlive it).
        let mut flags =
            libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
        if matches!(self.conf.net, NetSetup::Loopback | NetSetup::Proxy { .. }) {
            flags |= libc::CLONE_NEWNET;
        }
        // SAFETY: jail is single-threaded here (no thread is ever started before this point).
        match unsafe { crate::sys::clone_with_namespaces(flags) } {
            Ok(0) => {
                drop(release_write);
                drop(ready_read);
                drop(fd_parent);
                init_main(
                    InitChannels {
                        release: release_read,
                        ready: ready_write,
                        fds: fd_child,
                    },
                    self.tty,
                    mount_plan,
                    self.conf,
                    self.policy,
                    self.argv,
                )
            }
            Ok(pid) => {
                crate::timing::mark("supervisor: namespaces cloned");
                drop(release_read);
                drop(ready_write);
                drop(fd_child);
                let channels = SupervisorChannels {
                    release: release_write,
                    ready: ready_read,
                    fds: fd_parent,
                };
                self.release_init(Pid::from_raw(pid), channels, mount_plan)
            }
            Err(e) => {
                self.unblock();
                Ok(Started::NoNamespaces(NamespacesUnavailable(e)))
            }
        }
    }

    /// In the supervisor, once init exists: its id maps, then what it hands over once the view
    /// is built (the layers' mounts, the proxy's socket, the command's pid).
    fn release_init(
        &self,
        pid: Pid,
        channels: SupervisorChannels,
        mount_plan: &mounts::MountPlan,
    ) -> Result<Started, JailError> {
        let (conf, fd_parent) = (self.conf, channels.fds);
        // Also done by init itself; whichever runs first wins, the result is the same.
        let _ = nix::unistd::setpgid(pid, pid);
        let abandon = |e: JailError| {
            let _ = kill(pid, Signal::SIGKILL);
            let _ = waitpid(pid, None);
            e
        };
        if let Err(e) = id_maps_refused_by_test()
            .map_or_else(|| write_id_maps(pid, self.policy.allow_userns), Err)
        {
            // Refused inside another sandbox (an outer jail's Landlock keeps /proc
            // read-only): the namespaces exist but cannot be used.
            abandon(io("uid/gid map", &e));
            self.unblock();
            return Ok(Started::NoNamespaces(NamespacesUnavailable(
                std::io::Error::other(format!("writing the uid/gid map: {e}")),
            )));
        }
        crate::timing::mark("supervisor: id maps written");
        nix::unistd::write(&channels.release, b"1")
            .map_err(|e| abandon(io("release child", &e)))?;
        drop(channels.release);
        let mut report = [0u8; 2];
        let got = read_full(&channels.ready, &mut report);
        if got != 2 || &report != b"ok" {
            let mut report = report[..got].to_vec();
            report.extend(read_all(channels.ready));
            let _ = waitpid(pid, None);
            self.unblock();
            let text = String::from_utf8_lossy(report.get(1..).unwrap_or_default());
            return match report.first() {
                Some(b'N') => Ok(Started::NoNamespaces(NamespacesUnavailable(
                    std::io::Error::other(text.into_owned()),
                ))),
                Some(b'E') => Err(JailError::layer("init", "mount view", text)),
                _ => Err(io("init", &"exited before building the mount view")),
            };
        }
        crate::timing::mark("supervisor: mount view ready");
        let sock = std::os::fd::AsRawFd::as_raw_fd(&fd_parent);
        // Init sends the layers' tmpfs mounts first: held here, they outlive the
        // namespace, and the run's writes are copied out of them at its end.
        if mount_plan.tmpfs.layer.is_some() {
            for _ in &mount_plan.layers {
                let fd = crate::sys::recv_fd(sock)
                    .ok()
                    .flatten()
                    .ok_or_else(|| abandon(io("copy-on-write layer", &"init sent no tmpfs")))?;
                if let Some(held) = &conf.layer_mounts {
                    held.lock().unwrap_or_else(|e| e.into_inner()).push(fd);
                }
            }
        }
        // Now, not while init mounts: with two CPUs, init and the command (which drops
        // its privileges and loads its filter meanwhile) need both, and the command
        // started ~0.4 ms later when this ran beside them.
        conf.limits.sweep_left_behind();
        if let NetSetup::Proxy { serve, .. } = &conf.net {
            let listener = crate::sys::recv_fd(sock)
                .ok()
                .flatten()
                .ok_or_else(|| abandon(io("proxy", &"init sent no listening socket")))?;
            serve(std::net::TcpListener::from(listener)).map_err(abandon)?;
        }
        if !conf.command_started.is_empty() {
            match crate::sys::recv_pid(sock) {
                Ok(Some(pid)) => conf.command_started.iter().for_each(|hook| hook(pid)),
                Ok(None) => tracing::warn!("the command's pid did not arrive"),
                Err(e) => tracing::warn!("the command's pid did not arrive: {e}"),
            }
        }
        drop(fd_parent);
        if let Some(unix) = &conf.unix {
            unix.start(Some(pid)).map_err(abandon)?;
        }
        if let Some(w) = &conf.warning {
            crate::text::say(w);
        }
        // Only now: a non-dumpable process's /proc files belong to root, and the maps
        // above had to be written through them.
        privileges::set_not_dumpable()?;
        Ok(Started::Running {
            child: pid,
            status: Some(channels.ready),
        })
    }

    /// Without the mount view: no pid namespace, the command is the supervisor's child, and
    /// the supervisor the reaper of every orphan in the tree, so it can kill them.
    fn start_alone(&self) -> Result<Started, JailError> {
        let (conf, tty) = (self.conf, self.tty);
        if let Some(w) = &conf.warning {
            crate::text::say(w);
        }
        nix::sys::prctl::set_child_subreaper(true).map_err(|e| io("PR_SET_CHILD_SUBREAPER", &e))?;
        // SAFETY: single-threaded, as above.
        match unsafe { nix::unistd::fork() }.map_err(|e| io("fork", &e))? {
            nix::unistd::ForkResult::Child => {
                // Without a pid namespace this is all that ties the tree to the supervisor: if
                // it is killed, the command goes too (its own children are not covered: a gap).
                let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
                if let Some(tty) = tty {
                    let _ = nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0));
                    // SAFETY: getpgrp only queries.
                    hand_terminal(tty, unsafe { libc::getpgrp() });
                }
                if let Err(e) = conf.limits.enter() {
                    die(EXIT_JAIL_ERROR, &e);
                }
                command_main(conf, self.policy, self.argv, None)
            }
            nix::unistd::ForkResult::Parent { child } => {
                if tty.is_some() {
                    let _ = nix::unistd::setpgid(child, child);
                }
                conf.limits.sweep_left_behind();
                for hook in &conf.command_started {
                    hook(child.as_raw());
                }
                if let Some(unix) = &conf.unix {
                    if let Err(e) = unix.start(None) {
                        let _ = kill(child, Signal::SIGKILL);
                        return Err(e);
                    }
                }
                // Threads only after the fork: the child allocates before it execs.
                if let NetSetup::HostProxy { listener, serve } = &conf.net {
                    let listener = listener.try_clone().map_err(|e| io("proxy socket", &e));
                    if let Err(e) = listener.and_then(serve) {
                        let _ = kill(child, Signal::SIGKILL);
                        return Err(e);
                    }
                }
                privileges::set_not_dumpable()?;
                Ok(Started::Running {
                    child,
                    status: None,
                })
            }
        }
    }
}

fn c_argv(command: &[OsString]) -> Result<Vec<CString>, JailError> {
    command
        .iter()
        .map(|a| {
            CString::new(a.as_bytes())
                .map_err(|_| JailError::bad_command("the command contains a NUL byte"))
        })
        .collect()
}

/// Reads until `buf` is full or EOF; returns how much was read.
fn read_full(fd: &OwnedFd, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match nix::unistd::read(fd, &mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
        }
    }
    n
}

fn read_all(fd: OwnedFd) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        match nix::unistd::read(&fd, &mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return out,
        }
    }
}

/// Maps the caller's own uid and gid into the child's user namespace. A caller without
/// CAP_SETUID/CAP_SETGID (any unprivileged user, and root inside another jail) may map only itself,
/// after denying setgroups; real root maps the whole range identically so that file owners look as
/// they do outside (git refuses repositories it believes are someone else's).
/// Test builds only (`JAIL_TEST_DISABLE=id-maps`): the id maps refused as inside another
/// sandbox, after the probe said namespaces work, so the fallback taken at launch runs here.
#[cfg(feature = "test-hooks")]
fn id_maps_refused_by_test() -> Option<std::io::Error> {
    std::env::var("JAIL_TEST_DISABLE")
        .is_ok_and(|l| l.split(',').any(|i| i.trim() == "id-maps"))
        .then(|| std::io::Error::from_raw_os_error(libc::EPERM))
}

#[cfg(not(feature = "test-hooks"))]
fn id_maps_refused_by_test() -> Option<std::io::Error> {
    None
}

fn write_id_maps(pid: Pid, root_aside: bool) -> std::io::Result<()> {
    use caps::{CapSet, Capability};
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    let base = format!("/proc/{pid}");
    let can_map_all = [Capability::CAP_SETUID, Capability::CAP_SETGID]
        .into_iter()
        .all(|c| caps::has_cap(None, CapSet::Effective, c).unwrap_or(false));
    // Identity over exactly the ids this namespace has (all of them on the host; a few inside
    // rootless podman or `unshare -r`, where a full range cannot be backed).
    let identity = |file: &str| -> Option<String> {
        let text = std::fs::read_to_string(format!("/proc/self/{file}")).ok()?;
        let ranges: Vec<(u32, u32)> = text
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 3).then(|| Some((f[0].parse().ok()?, f[2].parse().ok()?)))?
            })
            .collect();
        let lines = id_map_lines(&ranges, root_aside && uid == 0);
        (!lines.is_empty()).then(|| lines.join("\n"))
    };
    if can_map_all {
        if let (Some(u), Some(g)) = (identity("uid_map"), identity("gid_map")) {
            // A map is written once; a refused write leaves it unwritten for the fallback below.
            if crate::sys::write_file(&format!("{base}/uid_map"), &u).is_ok() {
                return crate::sys::write_file(&format!("{base}/gid_map"), &g);
            }
        }
    }
    crate::sys::write_file(&format!("{base}/setgroups"), "deny")?;
    crate::sys::write_file(&format!("{base}/uid_map"), &format!("{uid} {uid} 1"))?;
    crate::sys::write_file(&format!("{base}/gid_map"), &format!("{gid} {gid} 1"))
}

/// Where host root (uid and gid 0) shows inside when the command may nest a sandbox of its own
/// (`--allow-userns` as root): an id no host user has, below 2^31 because bubblewrap prints
/// ids as signed ints into the nested map (4294967294 became "-2", which the kernel refuses).
pub const ROOT_INSIDE: u32 = i32::MAX as u32 - 1;

/// The lines of an id map over `ranges` (the parent namespace's inside ids: start, count).
/// Identity, except with `root_aside`: then id 0 is left out and host 0 shows as
/// [`ROOT_INSIDE`]. Why: a nested user namespace that maps its parent's id 0 needs
/// CAP_SETFCAP in the parent (Linux 5.12, against unprivileged file capabilities), and the
/// command holds no capability; as a non-zero id inside, codex's bubblewrap maps itself freely.
/// The command is still host root to the kernel (same kuid), with no capability either way.
pub fn id_map_lines(ranges: &[(u32, u32)], root_aside: bool) -> Vec<String> {
    let maps_root = ranges.iter().any(|&(start, n)| start == 0 && n > 0);
    let aside = root_aside && maps_root;
    let mut out = Vec::new();
    for &(start, n) in ranges {
        let end = start as u64 + n as u64; // exclusive
        let mut pieces = vec![(start as u64, end)];
        if aside {
            for cut in [0u64, ROOT_INSIDE as u64] {
                pieces = pieces
                    .into_iter()
                    .flat_map(|(a, b)| {
                        if cut < a || cut >= b {
                            vec![(a, b)]
                        } else {
                            [(a, cut), (cut + 1, b)]
                                .into_iter()
                                .filter(|(x, y)| x < y)
                                .collect()
                        }
                    })
                    .collect();
            }
        }
        for (a, b) in pieces {
            out.push(format!("{a} {a} {}", b - a));
        }
    }
    if aside {
        out.push(format!("{ROOT_INSIDE} 0 1"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_set_aside_only_when_asked_and_only_where_it_is_mapped() {
        let host = [(0, u32::MAX)];
        assert_eq!(id_map_lines(&host, false), ["0 0 4294967295"]);
        let aside = id_map_lines(&host, true);
        assert_eq!(
            aside,
            [
                "1 1 2147483645".to_string(),
                "2147483647 2147483647 2147483648".to_string(),
                format!("{ROOT_INSIDE} 0 1"),
            ]
        );
        // No inside id is mapped twice, and host root appears once, as ROOT_INSIDE.
        let total: u64 = aside
            .iter()
            .map(|l| l.split(' ').nth(2).unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(
            total,
            u32::MAX as u64 - 1,
            "every id but 0 and the host's ROOT_INSIDE"
        );
        // A parent that does not map 0 (rootless podman's subordinate range) stays identity.
        assert_eq!(id_map_lines(&[(1, 65536)], true), ["1 1 65536"]);
    }

    #[test]
    fn the_policy_file_lands_on_its_number_also_when_the_memfd_is_made_there() {
        // Fill 3..=9 so that the memfd gets 10, the number it is meant to end at (a caller
        // that left few descriptors open): dup3 onto itself would be EINVAL.
        // A 10 inherited by the test process (harnesses leave some open) is closed first.
        // SAFETY: closing a descriptor number this test owns the process of.
        unsafe { libc::close(10) };
        let mut held = Vec::new();
        loop {
            let f = std::fs::File::open("/dev/null").unwrap();
            let n = std::os::fd::AsRawFd::as_raw_fd(&f);
            if n == 10 {
                break; // dropped: 10 is the lowest free number now
            }
            assert!(n < 10, "descriptor {n}: 10 was not free");
            held.push(f);
        }
        let fd = sealed_policy_fd("{\"x\":1}", &[]).unwrap();
        assert_eq!(fd, 10);
        // SAFETY: F_GETFD only reads the flags of the descriptor just returned.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, 0, "the command would not get it");
        let text = std::fs::read_to_string(format!("/proc/self/fd/{fd}")).unwrap();
        assert_eq!(text, "{\"x\":1}");
    }
}
