//! A session's Linux side, outside the sandbox: the channel to the process inside that forks
//! each command (`supervisor::forker`), made before the clone, and the supervisor's server of
//! the control socket (`server`).
//!
//! The channel is a SEQPACKET socket pair: each exec is one record carrying the command's stdio
//! and its own stream to the supervisor (SCM_RIGHTS), so that many execs at once never mix.
//! Clone copies every descriptor: init drops both ends, the process inside the supervisor's,
//! the supervisor the inside's. Nothing else inside ever holds either, and the control socket
//! itself is bound by the supervisor only after the clone, in a directory every view hides.

mod server;

use std::cell::RefCell;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::JailError;
use crate::linux::layers::exec_domain::ExecDomain;
use crate::linux::observe::execs::ExecLog;
use crate::session::SessionSpec;

/// What a session run carries besides a run's confinement.
pub struct SessionSetup {
    pub spec: SessionSpec,
    /// The session's description, completed by the server when it is ready.
    pub profile: String,
    pub level: String,
    pub cwd: PathBuf,
    /// Which exec ran when, for the event stream and the report.
    pub execs: Arc<ExecLog>,
    /// Whether each exec gets a Landlock domain of its own (`layers::exec_domain`).
    pub exec_domain: ExecDomain,
    /// (the supervisor's end, the inside's end): each process takes what it uses.
    channel: RefCell<Option<(OwnedFd, OwnedFd)>>,
}

impl SessionSetup {
    pub fn new(
        spec: SessionSpec,
        profile: String,
        level: String,
        cwd: PathBuf,
        execs: Arc<ExecLog>,
        exec_domain: ExecDomain,
    ) -> Result<SessionSetup, JailError> {
        use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
        let (ours, inside) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| JailError::layer("session", "socketpair", e))?;
        Ok(SessionSetup {
            spec,
            profile,
            level,
            cwd,
            execs,
            exec_domain,
            channel: RefCell::new(Some((ours, inside))),
        })
    }

    /// The inside's end, as a number (kept open through the inside's descriptor sweep).
    pub fn inside_fd(&self) -> Option<RawFd> {
        self.channel.borrow().as_ref().map(|(_, i)| i.as_raw_fd())
    }

    /// In the process inside: its end; the supervisor's is closed.
    pub fn take_inside(&self) -> Option<OwnedFd> {
        self.channel.borrow_mut().take().map(|(_, inside)| inside)
    }

    /// In init (and after a failed start): neither end.
    pub fn close(&self) {
        drop(self.channel.borrow_mut().take());
    }

    /// In the supervisor, once the tree exists: the control socket bound and served by a thread
    /// of its own (the supervisor is single-threaded until the clone).
    pub fn start(&self) -> Result<(), JailError> {
        let Some((ours, inside)) = self.channel.borrow_mut().take() else {
            return Err(JailError::layer("session", "start", "started twice"));
        };
        drop(inside);
        server::Server::new(self, ours)?.spawn()
    }
}
