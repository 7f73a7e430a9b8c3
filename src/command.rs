//! Finding the command as `execvp` would, before anything is launched.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::{EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND};

/// Why a command cannot be started, as the exit code `env` would use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotRunnable {
    pub code: i32,
    pub message: String,
}

/// The command's path, found as `execvp` would with the child's `PATH` (a name with a `/` is
/// taken relative to `cwd`): 127 when nothing is found, 126 when what is found is not an
/// executable file. Looked up before launching on macOS, because `sandbox-exec` reports its own
/// failure to exec with an exit code of its own; and by `--dry-run`, which launches nothing.
pub fn find_command(
    name: &OsStr,
    path_var: Option<&OsStr>,
    cwd: &Path,
) -> Result<PathBuf, NotRunnable> {
    use std::os::unix::fs::PermissionsExt;
    let shown = crate::text::printable(&name.to_string_lossy());
    let check = |candidate: &Path| -> Option<Result<PathBuf, NotRunnable>> {
        let meta = std::fs::metadata(candidate).ok()?;
        Some(
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                Ok(candidate.to_path_buf())
            } else {
                Err(NotRunnable {
                    code: EXIT_NOT_EXECUTABLE,
                    message: format!("{shown}: not an executable file"),
                })
            },
        )
    };
    let not_found = || NotRunnable {
        code: EXIT_NOT_FOUND,
        message: format!("{shown}: command not found"),
    };
    if name.is_empty() {
        return Err(not_found());
    }
    if name.as_bytes().contains(&b'/') {
        return check(&cwd.join(name)).unwrap_or_else(|| Err(not_found()));
    }
    let path_var = path_var.unwrap_or(OsStr::new("/usr/bin:/bin:/usr/sbin:/sbin"));
    let mut first_error = None;
    for dir in path_var.as_bytes().split(|b| *b == b':') {
        let dir = if dir.is_empty() {
            cwd.to_path_buf()
        } else {
            cwd.join(OsStr::from_bytes(dir))
        };
        match check(&dir.join(name)) {
            Some(Ok(found)) => return Ok(found),
            Some(Err(e)) => {
                first_error.get_or_insert(e);
            }
            None => {}
        }
    }
    Err(first_error.unwrap_or_else(not_found))
}
