//! Sessions: one sandbox kept up for an agent's whole session, each command started into it.
//!
//! `jail session start` builds exactly the sandbox a run builds (the same settings, policy,
//! levels and `--require`) around one process that is already fully confined and runs nothing of
//! its own; `jail exec` asks the session's supervisor, over a socket outside every view, to have
//! that process fork the command. Confinement is inherited by construction (Landlock domains and
//! seccomp filters cannot be joined from outside, so the fork happens inside), never re-applied
//! per command. `session stop` ends every process of it as a run's end does, and the session is
//! handed back as one run (its report, its `--cow` layer for `jail diff` / `jail apply`).
//!
//! Its parts: [`dir`] (where sessions live, their names), [`wire`] (the messages), [`client`]
//! (start, exec, list, stop: the command line's and the library's [`Session`]). The supervisor's
//! side and the process inside are Linux's (`linux::run::session`).

#[cfg(target_os = "linux")]
pub mod client;
pub mod dir;
#[cfg(target_os = "linux")]
pub mod serve;
#[cfg(target_os = "linux")]
pub mod wire;

#[cfg(target_os = "linux")]
pub use client::{ExecChild, ExecOptions, Session, SessionInfo};

use serde::{Deserialize, Serialize};

/// A run that is a session: carried in its settings from `session start` to the jail process
/// that serves it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSpec {
    /// The session's name (checked by [`dir::check_name`]).
    pub name: String,
    /// Stopped after this long without a command running.
    pub idle_timeout_ms: Option<u64>,
    /// The supervisor's end of the run's control socket, made by the serving process (a byte
    /// there stops the session as a run's caller stops a run). Not part of the hand-over.
    #[serde(skip)]
    pub stop_fd: Option<i32>,
}

/// The program name a session's policy carries in place of a command: a session runs none of its
/// own, and this names no agent (the profile's agent, if any, decides whose login is readable).
pub const SESSION_COMMAND: &str = "jail-session";
