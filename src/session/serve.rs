//! The jail process that serves a session: the run of its settings, with the session's stop
//! wired to the run's control socket, and its outcome left in the session's end file for
//! `session stop` to read.

use std::os::fd::IntoRawFd;
use std::os::unix::net::UnixStream;

use super::dir::{self, Files};
use crate::error::JailError;
use crate::policy::settings::RunSettings;
use crate::sandbox::Jail;
use crate::sandbox::outcome::Sent;

/// Runs the session of `settings` (whose `session` is set) in this process until it ends;
/// returns the run's exit code.
pub fn serve(mut settings: RunSettings) -> Result<i32, JailError> {
    let Some(spec) = settings.session.as_mut() else {
        return Err(JailError::BadInput("not a session's settings".into()));
    };
    dir::check_name(&spec.name)?;
    let files = Files::of(&dir::ensure()?, &spec.name);
    // One supervisor per name, for this process's whole life: a second start of the name ends
    // here, touching nothing of the first's.
    let lock = dir::lock(&files).map_err(|reason| JailError::SessionRefused {
        name: spec.name.clone(),
        reason,
    })?;
    // The session's stop is a run's stop: a byte on the run's control socket.
    let (stop, control) =
        UnixStream::pair().map_err(|e| JailError::io("the session's control socket", e))?;
    spec.stop_fd = Some(stop.into_raw_fd());
    settings.control_fd = Some(control.into_raw_fd());
    // The report is part of what `session stop` hands back: which exec changed what.
    settings.record = true;
    let result = Jail::from_settings(settings).run();
    // The outcome first, then the socket: a `session stop` that sees the socket go reads it.
    if let Ok(text) = serde_json::to_vec(&Sent::of(&result)) {
        let tmp = files.end.with_extension("json.tmp");
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, &files.end);
        }
    }
    files.remove_live();
    files.unlock(lock);
    result.map(|o| o.exit_code)
}
