//! How a run ended, as a caller reads it: the command's status, jail's exit code, the level the
//! layers reached with the gaps they left, and the run report when one was asked for.

use serde::{Deserialize, Serialize};

use crate::enforcement::Level;
use crate::error::{JailError, WireError};

/// How the command's tree ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Status {
    /// The command exited with this code (127: not found, 126: not executable).
    Exited { code: i32 },
    /// A signal ended the command.
    Signaled { signal: i32 },
    /// The timeout expired: the tree got SIGTERM, then SIGKILL.
    TimedOut,
    /// The caller stopped the run ([`Child::stop`](super::Child::stop), or it went away): the
    /// tree got SIGTERM, then SIGKILL.
    Stopped,
}

impl Status {
    /// A one-word name: `exited`, `signaled`, `timeout`, `stopped`.
    pub fn name(&self) -> &'static str {
        match self {
            Status::Exited { .. } => "exited",
            Status::Signaled { .. } => "signaled",
            Status::TimedOut => "timeout",
            Status::Stopped => "stopped",
        }
    }

    /// The status of a run that ended with jail's exit code `code`, the command's `signal`, and
    /// whether the timeout or a stop request ended it.
    pub fn of(code: i32, signal: Option<i32>, timed_out: bool, stopped: bool) -> Status {
        match (stopped, timed_out, signal) {
            (true, _, _) => Status::Stopped,
            (_, true, _) => Status::TimedOut,
            (_, _, Some(signal)) => Status::Signaled { signal },
            _ => Status::Exited { code },
        }
    }
}

/// The end of one confined run.
#[derive(Debug, Serialize, Deserialize)]
pub struct Outcome {
    #[serde(flatten)]
    pub status: Status,
    /// What `jail` exits with: the command's code, 128+N after signal N, 124 after a timeout,
    /// and 125 when jail failed after the run (a planted file it could not move aside).
    pub exit_code: i32,
    /// The level the layers reached.
    pub level: Level,
    /// What the run's layers leave open, in words.
    pub gaps: Vec<String>,
    /// The run whose copy-on-write layers wait for review (`jail diff ID`, `jail apply ID`):
    /// set when a `--cow` run (or session) changed something in them.
    #[serde(default)]
    pub cow_run: Option<String>,
    /// The run report (the document `--report` writes), when [`RunSettings::record`], a report
    /// file or a summary was asked for. Linux only in this version, as `--report` is.
    ///
    /// [`RunSettings::record`]: crate::policy::settings::RunSettings::record
    #[cfg(target_os = "linux")]
    pub report: Option<crate::run_report::RunReport>,
}

/// What a jail process started with `--control-fd` writes there at the end: one JSON document,
/// `{"ended": OUTCOME}` or `{"failed": ERROR}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Message {
    Ended(Box<Outcome>),
    Failed(WireError),
}

/// [`Message`] as the jail process writes it, borrowing the outcome.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Sent<'a> {
    Ended(&'a Outcome),
    Failed(WireError),
}

impl Sent<'_> {
    pub(crate) fn of(result: &Result<Outcome, JailError>) -> Sent<'_> {
        match result {
            Ok(o) => Sent::Ended(o),
            Err(e) => Sent::Failed(WireError::from(e)),
        }
    }
}

impl Message {
    pub(crate) fn into_result(self) -> Result<Outcome, JailError> {
        match self {
            Message::Ended(o) => Ok(*o),
            Message::Failed(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_say_what_ended_the_run() {
        assert_eq!(
            Status::of(3, None, false, false),
            Status::Exited { code: 3 }
        );
        assert_eq!(
            Status::of(137, Some(9), false, false),
            Status::Signaled { signal: 9 }
        );
        assert_eq!(Status::of(124, Some(15), true, false), Status::TimedOut);
        assert_eq!(Status::of(143, Some(15), true, true), Status::Stopped);
    }

    #[test]
    fn outcomes_and_errors_cross_the_control_socket() {
        let o = Outcome {
            status: Status::Signaled { signal: 9 },
            exit_code: 137,
            level: Level::Full,
            gaps: vec!["x".into()],
            cow_run: Some("r1".into()),
            #[cfg(target_os = "linux")]
            report: None,
        };
        let text = serde_json::to_string(&Sent::of(&Ok(o))).unwrap();
        let back = serde_json::from_str::<Message>(&text)
            .unwrap()
            .into_result()
            .unwrap();
        assert_eq!(back.status, Status::Signaled { signal: 9 });
        assert_eq!((back.exit_code, back.level), (137, Level::Full));
        let e = JailError::bad_path("--rw", "/nope", "does not exist");
        let text = serde_json::to_string(&Sent::of(&Err(e))).unwrap();
        let back = serde_json::from_str::<Message>(&text)
            .unwrap()
            .into_result();
        assert!(matches!(back, Err(JailError::BadPath { .. })), "{text}");
    }
}
