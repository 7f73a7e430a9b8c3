//! Runs the command under `/usr/bin/sandbox-exec` (macOS only).
//!
//! The profile goes to a private file (`sandbox-exec -f`, not `-p`: the profile stays out of
//! every process listing, and its size out of the argument limit); the command runs as jail's
//! child, which waits for it: `--timeout`, and exit codes as on Linux (the child's own status,
//! `128+N` when killed by signal N, 124 on timeout, 126/127 when it cannot be executed or found).
//!
//! Layout of one run, in the user's temporary directory (`/private/var/folders/…/T`):
//!
//! ```text
//! jail-PID-RANDOM/          0700, removed after the run; not writable inside the sandbox
//!     profile.sb            0600, the generated profile
//!     policy.json           0400, the resolved policy (JAIL_POLICY names it)
//!     tmp/                  0700, the command's TMPDIR: the one writable place of its own
//! ```

use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use super::seatbelt::{self, Params};
use super::{child_env, find_command};
use crate::error::{EXIT_TIMEOUT, JailError};
use crate::policy::Policy;

/// The launcher Apple ships (deprecated as a public interface, still what `sandbox_init` tools
/// and every agent sandbox on macOS use).
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

use crate::run_semantics::KILL_GRACE;

/// How often the child is polled while a timeout runs.
const POLL: Duration = Duration::from_millis(50);

const LAYER: &str = "seatbelt";

/// Runs `policy.command` under the generated profile and returns the exit code for jail to exit
/// with. `policy_json` is the read-only copy of the resolved policy the command finds at
/// `JAIL_POLICY`.
pub fn run(policy: &Policy, policy_json: &str) -> Result<i32, JailError> {
    let Some(name) = policy.command.first() else {
        return Err(JailError::bad_command("no command given"));
    };
    if !Path::new(SANDBOX_EXEC).is_file() {
        return Err(JailError::layer(
            LAYER,
            "find sandbox-exec",
            format!("{SANDBOX_EXEC} is missing: no Seatbelt on this system"),
        ));
    }
    let state = RunDir::create()?;
    let tmp_dir = state.path.join("tmp");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&tmp_dir)
        .map_err(|e| JailError::layer(LAYER, format!("create {}", tmp_dir.display()), e))?;
    let params = Params {
        tmp_dir: tmp_dir.clone(),
        ttys: inherited_ttys(),
    };
    let text = seatbelt::profile(policy, &params)?;
    let profile_file = state.write("profile.sb", text.as_bytes(), 0o600)?;
    let policy_file = state.write("policy.json", policy_json.as_bytes(), 0o400)?;
    tracing::debug!("seatbelt profile {}:\n{text}", profile_file.display());

    let env = child_env(policy, &tmp_dir, Some(&policy_file));
    let path_var = env
        .iter()
        .find(|(k, _)| k.as_os_str() == "PATH")
        .map(|(_, v)| v.as_os_str());
    if let Err(e) = find_command(name, path_var, &policy.cwd) {
        crate::text::say(format!("jail: {}", e.message));
        return Ok(e.code);
    }

    let mut cmd = Command::new(SANDBOX_EXEC);
    cmd.arg("-f")
        .arg(&profile_file)
        .arg("--")
        .args(&policy.command)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(&policy.cwd);
    let keep = policy.keep_fds.clone();
    // SAFETY: the closure runs between fork and exec and only calls fcntl and getdtablesize,
    // both async-signal-safe; it allocates nothing (`keep` was allocated before the fork).
    unsafe {
        cmd.pre_exec(move || {
            close_on_exec_all_but(&keep);
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| JailError::layer(LAYER, format!("run {SANDBOX_EXEC}"), e))?;
    // The terminal's ^C and ^\ reach the command (same process group); jail outlives it to
    // report its status and clean up.
    let _quiet = IgnoreInterrupts::new();
    let code = wait(&mut child, policy.timeout)
        .map_err(|e| JailError::layer(LAYER, "wait for the command", e))?;
    drop(state);
    Ok(code)
}

/// The exit code jail reports for the command's status.
fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

fn wait(child: &mut Child, timeout: Option<Duration>) -> std::io::Result<i32> {
    let Some(limit) = timeout else {
        return child.wait().map(exit_code);
    };
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait()? {
            return Ok(exit_code(status));
        }
        std::thread::sleep(POLL);
    }
    tracing::info!("timeout: sending SIGTERM, SIGKILL in {KILL_GRACE:?}");
    let pid = child.id() as libc::pid_t;
    // SAFETY: plain kill(2) on our own child, which has not been reaped (try_wait saw it run).
    unsafe {
        libc::kill(pid, libc::SIGTERM);
        // A stopped command would never see the SIGTERM.
        libc::kill(pid, libc::SIGCONT);
    }
    let grace = Instant::now() + KILL_GRACE;
    while Instant::now() < grace {
        if child.try_wait()?.is_some() {
            return Ok(EXIT_TIMEOUT);
        }
        std::thread::sleep(POLL);
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(EXIT_TIMEOUT)
}

/// Marks every descriptor from 3 up close-on-exec, except those `--keep-fd` names (whose flag
/// is cleared): the command starts with 0, 1, 2 and the kept ones, as on Linux. Closing them
/// here instead would also close the pipe std uses to report a failed exec.
fn close_on_exec_all_but(keep: &[i32]) {
    // SAFETY: getdtablesize and fcntl on integers; an fd that is not open fails with EBADF.
    let max = unsafe { libc::getdtablesize() }.clamp(3, 65_536);
    for fd in 3..max {
        let flags = if keep.contains(&fd) {
            0
        } else {
            libc::FD_CLOEXEC
        };
        unsafe {
            libc::fcntl(fd, libc::F_SETFD, flags);
        }
    }
}

/// The terminals on descriptors 0, 1 and 2 (the profile lets the command use those, not the
/// user's other terminals).
fn inherited_ttys() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for fd in 0..=2 {
        // SAFETY: isatty and ttyname_r on a descriptor number, into a buffer we own.
        unsafe {
            if libc::isatty(fd) != 1 {
                continue;
            }
            let mut buf = [0 as libc::c_char; 256];
            if libc::ttyname_r(fd, buf.as_mut_ptr(), buf.len()) != 0 {
                continue;
            }
            let name = std::ffi::CStr::from_ptr(buf.as_ptr());
            let path = PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes()));
            if !out.contains(&path) {
                out.push(path);
            }
        }
    }
    out
}

/// The run's private directory; removed (with the command's temporary files) when dropped.
struct RunDir {
    path: PathBuf,
}

impl RunDir {
    fn create() -> Result<RunDir, JailError> {
        // The real path: Seatbelt matches /private/var/folders/…, never /var/folders/….
        let base = std::fs::canonicalize(std::env::temp_dir())
            .map_err(|e| JailError::layer(LAYER, "find the temporary directory", e))?;
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        for attempt in 0..32u32 {
            let path = base.join(format!(
                "jail-{}-{:08x}",
                std::process::id(),
                seed.wrapping_mul(2_654_435_761).wrapping_add(attempt)
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(RunDir { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(JailError::layer(
                        LAYER,
                        format!("create {}", path.display()),
                        e,
                    ));
                }
            }
        }
        Err(JailError::layer(
            LAYER,
            "create the run directory",
            format!("no free name in {}", base.display()),
        ))
    }

    /// A new file in the run directory (never an existing one: `create_new`).
    fn write(&self, name: &str, bytes: &[u8], mode: u32) -> Result<PathBuf, JailError> {
        let path = self.path.join(name);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&path)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(|e| JailError::layer(LAYER, format!("write {}", path.display()), e))?;
        Ok(path)
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        // policy.json is 0400: removing it needs only the directory's write permission.
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!("could not remove {}: {e}", self.path.display());
        }
    }
}

/// SIGINT and SIGQUIT ignored in jail while the command runs; restored when dropped.
struct IgnoreInterrupts {
    previous: [(libc::c_int, libc::sighandler_t); 2],
}

impl IgnoreInterrupts {
    fn new() -> IgnoreInterrupts {
        // SAFETY: signal(2) with SIG_IGN; the previous handlers are restored on drop.
        let previous = [libc::SIGINT, libc::SIGQUIT]
            .map(|sig| (sig, unsafe { libc::signal(sig, libc::SIG_IGN) }));
        IgnoreInterrupts { previous }
    }
}

impl Drop for IgnoreInterrupts {
    fn drop(&mut self) {
        for (sig, handler) in self.previous {
            // SAFETY: restores the handler signal(2) returned.
            unsafe {
                libc::signal(sig, handler);
            }
        }
    }
}
