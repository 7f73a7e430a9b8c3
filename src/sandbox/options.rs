//! How a resolved policy is run: what a caller chooses beside the policy itself. The launchers
//! take these and the policy, never the command line.

use std::path::PathBuf;

/// The command line's `--report`, `--summary`, `--notice`, `--allow-unconfined` and
/// `--control-fd`, and what a library caller adds ([`RunOptions::record`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Write the run report (JSON) to this file.
    pub report: Option<PathBuf>,
    /// Print the run report's summary on stderr after the run.
    pub summary: bool,
    /// Print what the jail allows before the command starts.
    pub notice: bool,
    /// Run even when no layer can protect files.
    pub allow_unconfined: bool,
    /// Hand the run report back in the [`Outcome`](super::Outcome), file or not.
    pub record: bool,
    /// A descriptor the caller holds the other end of: a byte `T` on it, or its closing, stops
    /// the whole tree (`K` kills it at once); the outcome is written to it at the end (by the command line).
    pub control_fd: Option<i32>,
    /// With copy-on-write paths: write the run's change set to this file as a git patch at
    /// the end and discard the layer (`--patch`).
    pub patch: Option<PathBuf>,
    /// A live event stream (`--events FILE|fd:N`): JSON lines, `start`, `wrote` the first time
    /// each path under a copy-on-write root changes, `denied`, `exit`.
    pub events: Option<std::ffi::OsString>,
}

impl RunOptions {
    /// Whether the run is recorded: a report is wanted in some form.
    pub fn recording(&self) -> bool {
        // The event stream's denials come from the recorder's audit reader.
        self.record || self.report.is_some() || self.summary || self.events.is_some()
    }
}
