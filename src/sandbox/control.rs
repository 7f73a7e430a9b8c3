//! The control socket between a program that starts jail and the jail process
//! (`--control-fd N`): the caller holds one end, jail the other. The caller writes a byte `T` to
//! stop the whole tree (SIGTERM, then SIGKILL after the grace) or `K` to kill it at once, and
//! closing its end (the caller exited, or dropped its [`Child`]) stops it as `T` does: nothing a sandboxed agent starts outlives the orchestrator that started it. At the
//! end jail writes one JSON document there: how the run went, or why it did not.
//!
//! [`Child`]: super::Child

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::outcome::{Outcome, Sent};
use crate::error::JailError;

/// The byte that asks jail to stop the run: SIGTERM, SIGKILL 2 s later.
pub const STOP: u8 = b'T';
/// The byte that asks jail to kill the run's tree now.
pub const KILL: u8 = b'K';

/// Jail's end, owned from the start of the run so that the command never inherits it.
pub struct Sender(OwnedFd);

impl Sender {
    /// Takes descriptor `fd` over: it must be open, and not one of the command's stdio.
    pub fn take(fd: i32) -> Result<Sender, String> {
        if fd <= 2 {
            return Err(format!(
                "{fd}: 0, 1 and 2 are the command's stdio; pass the socket as 3 or above"
            ));
        }
        let Some(id) = identity(fd) else {
            return Err(format!("{fd}: not an open descriptor"));
        };
        // Anything else (a file, a directory, /dev/null) polls readable at once, which is a stop
        // request, and the outcome would go into it.
        if !matches!(id.2, libc::S_IFSOCK | libc::S_IFIFO) {
            return Err(format!("{fd}: not a socket or a pipe"));
        }
        // A copy of it as the command's stdio would let the command forge the outcome.
        for (n, name) in [(0, "stdin"), (1, "stdout"), (2, "stderr")] {
            if same_file(fd, n) {
                return Err(format!(
                    "{fd}: is also the command's {name}, and the command must never hold it"
                ));
            }
        }
        // The command execs with it closed, whatever else it keeps.
        // SAFETY: F_SETFD on a descriptor checked open just above.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        // SAFETY: checked open; from here this is its only owner in jail.
        Ok(Sender(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Writes how the run went, and closes jail's end.
    pub fn send(self, result: &Result<Outcome, JailError>) {
        let mut text = serde_json::to_vec(&Sent::of(result)).expect("serializable");
        text.push(b'\n');
        // A unix socket closed with unread data resets the other end, which then loses what was
        // written to it: read any late stop request first, and again after writing.
        self.drain();
        let mut file = std::fs::File::from(self.0.try_clone().expect("dup"));
        if let Err(e) = file.write_all(&text) {
            tracing::info!("--control-fd: the outcome was not delivered: {e}");
        }
        self.drain();
    }

    /// Reads whatever the caller sent, without waiting.
    fn drain(&self) {
        let mut buf = [0u8; 64];
        // SAFETY: recv into a local buffer, non-blocking, on a descriptor this owns.
        while unsafe {
            libc::recv(
                self.0.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        } > 0
        {}
    }
}

/// The device, inode and file type open at `fd`, if it is open.
fn identity(fd: i32) -> Option<(u64, u64, libc::mode_t)> {
    // SAFETY: fstat writes into a local struct; fails harmlessly on a closed descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } < 0 {
        return None;
    }
    Some((
        st.st_dev as u64,
        st.st_ino as u64,
        st.st_mode & libc::S_IFMT,
    ))
}

/// Whether descriptors `a` and `b` are the same socket or pipe (one a copy of the other, or the
/// two ends of one pipe).
pub fn same_file(a: i32, b: i32) -> bool {
    matches!((identity(a), identity(b)), (Some(x), Some(y)) if x == y)
}
