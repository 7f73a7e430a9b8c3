//! Where a signal sent to jail goes in the command's tree.
//!
//! Without jail, the signals that end a job reach its whole process group: a terminal's Ctrl-C,
//! a shell's `kill %1` and hang-up, a CI runner's cancel (SIGTERM or SIGINT to the group) and
//! GNU `timeout` (the child, then its own group) all signal every process of the job. With jail
//! they reach only the supervisor: it is alone in its group, since init and the command have
//! their own. Passed on to the command's first process alone, a shell that waits for a
//! foreground child (which does not get the signal) goes on until that child ends: `timeout -s
//! INT 2 jail -- sh -c 'sleep 30; echo done'` ran for 30 s. So those signals go to the command's
//! whole process group, once; the others (SIGUSR1, SIGUSR2, SIGWINCH) go to its first process
//! only, as `kill PID` sends them: their default action ends a process, and a program that
//! handles one (a reload) does not expect its children to get it.

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::{Pid, getpgid, getpgrp, getpid};

/// Who gets a signal that jail passes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The command's process group, as a terminal or a job-control shell signals a job.
    Group,
    /// The command's first process only.
    Process,
}

/// The reach of `sig` when jail passes it on.
pub fn reach(sig: Signal) -> Reach {
    match sig {
        Signal::SIGINT | Signal::SIGTERM | Signal::SIGHUP | Signal::SIGQUIT => Reach::Group,
        _ => Reach::Process,
    }
}

/// Passes `sig` on to the command (`command`, a child of this process) as [`reach`] says.
pub fn pass_on(command: Pid, sig: Signal) {
    match reach(sig) {
        Reach::Group => to_group(command, sig),
        Reach::Process => {
            let _ = kill(command, sig);
        }
    }
}

/// Sends `sig` to every process of the command's group, once each. A group of the command's own
/// gets one killpg. When the command is still in this process's group, only the processes of
/// that group below this one get it: in init (pid 1 of the namespace, whose group the command
/// shares under a terminal) that is the command's group and nothing else; in the supervisor
/// without namespaces (before the command made its own session) it is the command alone, never
/// the caller's other processes. The command gone (or not yet there): nothing to do.
pub fn to_group(command: Pid, sig: Signal) {
    match getpgid(Some(command)) {
        Ok(pgid) if pgid != getpgrp() => {
            if killpg(pgid, sig).is_err() {
                let _ = kill(command, sig);
            }
        }
        Ok(pgid) => {
            let members = crate::sys::descendants_in_group(getpid().as_raw(), pgid.as_raw());
            // The listing may miss the command itself (its stat unreadable for a moment).
            if !members.contains(&command.as_raw()) {
                let _ = kill(command, sig);
            }
            for pid in members {
                let _ = kill(Pid::from_raw(pid), sig);
            }
        }
        Err(_) => {
            let _ = kill(command, sig);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_that_end_a_job_reach_its_group_the_others_its_first_process() {
        for sig in [
            Signal::SIGINT,
            Signal::SIGTERM,
            Signal::SIGHUP,
            Signal::SIGQUIT,
        ] {
            assert_eq!(reach(sig), Reach::Group, "{sig}");
        }
        for sig in [Signal::SIGUSR1, Signal::SIGUSR2, Signal::SIGWINCH] {
            assert_eq!(reach(sig), Reach::Process, "{sig}");
        }
    }
}
