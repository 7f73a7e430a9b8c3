//! jail: confine a command, and everything it starts, with a read-only mount view, Landlock and
//! seccomp, as a library with a thin command line on top.
//!
//! A run is one straight line through the modules:
//!
//! ```text
//! RunSettings ──prepare──> Policy ──linux::plan──> plans ──apply (supervisor)──> Outcome
//!  (cli, Jail)            (policy)       (pure, per layer)     (the only syscalls)    (sandbox)
//! ```
//!
//! [`Jail`] is the entry point: build the settings (a profile and rules), then [`Jail::run`]
//! it in this process or [`Jail::spawn`] it as a jail process of its own, and read the typed
//! [`Outcome`]. Errors are [`JailError`]s, each mapped to the documented exit codes.
//!
//! ```no_run
//! use jail::{Jail, Status};
//!
//! let outcome = Jail::new(["make", "check"]).ro(".").net("none").spawn()?.wait()?;
//! assert_eq!(outcome.status, Status::Exited { code: 0 });
//! # Ok::<(), jail::JailError>(())
//! ```

pub mod byte_path;
#[cfg(target_os = "linux")]
pub mod changes;
pub mod claims;
pub mod cli;
pub mod command;
pub mod enforcement;
pub mod error;
pub mod limits_report;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod macos;
pub mod net;
pub mod notice;
pub mod paths;
mod platform;
pub mod policy;
pub mod policy_file;
pub mod prepare;
pub mod probe;
pub mod protect;
#[cfg(target_os = "linux")]
pub mod run_report;
pub mod run_semantics;
pub mod sandbox;
pub mod session;
pub mod status;
#[cfg(target_os = "linux")]
pub mod sys;
pub mod text;
pub mod timing;
// Used where no sandbox exists; unit-tested everywhere.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub mod unconfined;
#[cfg(target_os = "linux")]
pub mod workspace;

pub use cli::run_cli;
pub use enforcement::Level;
pub use error::JailError;
pub use policy::Require;
pub use policy::homes::HomeMode;
pub use policy::profile::TmpOption;
pub use policy::settings::RunSettings;
pub use sandbox::{Child, Jail, Outcome, Status, Stopper};
#[cfg(target_os = "linux")]
pub use session::{ExecChild, ExecOptions, Session, SessionInfo};
