//! Terminals and signals, as root and as an unprivileged user. With a pseudo-terminal (driven by
//! an embedded python3 script): the size and tty-ness seen inside, Ctrl-C and window resizes
//! delivered once. Without one: signals sent to jail with kill() forwarded once, a new session,
//! and nothing left behind when the supervisor is SIGKILLed.

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Background, Fixture, Run, full_level_or_skip, jail_bin, processes_with, users};

const PATH: &str = "/usr/local/bin:/usr/bin:/bin";
const PYTHON: &str = "/usr/bin/python3";

/// Runs argv on a new pseudo-terminal (its controlling terminal, foreground process group) and
/// follows the steps: ["expect", text], ["write", text], ["resize", rows, cols], ["sleep", s],
/// ["signal", N] (to the program, jail, with kill()).
/// Prints {"ok", "code", "output"} as JSON.
const PTY_DRIVER: &str = r#"
import fcntl, json, os, select, signal, struct, sys, termios, time

spec = json.loads(sys.argv[1])
argv = spec["argv"]
rows, cols = spec.get("size", [24, 80])
master, slave = os.openpty()
fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
pid = os.fork()
if pid == 0:
    try:
        os.close(master)
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        for i in (0, 1, 2):
            os.dup2(slave, i)
        if slave > 2:
            os.close(slave)
        os.execve(argv[0], argv, os.environ)
    finally:
        os._exit(99)
os.close(slave)
out = b""
deadline = time.monotonic() + spec.get("limit", 20)

def pump(until=None, wait=None):
    global out
    end = time.monotonic() + wait if wait is not None else deadline
    while True:
        if until is not None and until.encode() in out:
            return True
        left = min(end, deadline) - time.monotonic()
        if left <= 0:
            return until is None
        r, _, _ = select.select([master], [], [], left)
        if not r:
            continue
        try:
            chunk = os.read(master, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            return until is None or until.encode() in out
        out += chunk

ok = True
for step in spec.get("steps", []):
    if step[0] == "expect":
        if not pump(until=step[1]):
            ok = False
            break
    elif step[0] == "write":
        os.write(master, step[1].encode())
    elif step[0] == "resize":
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", step[1], step[2], 0, 0))
    elif step[0] == "sleep":
        pump(wait=step[1])
    elif step[0] == "signal":
        os.kill(pid, step[1])
code = None
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        code = os.waitstatus_to_exitcode(status)
        break
    pump(wait=0.05)
pump(wait=0.2)
if code is None:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
print(json.dumps({"ok": ok, "code": code, "output": out.decode(errors="replace")}))
"#;

/// Counts every delivery of one signal (the C-level handler writes a byte per delivery to the
/// wakeup fd, so two deliveries count twice even when Python would run its handler once), for
/// argv[2] seconds after printing "ready"; then prints "count N".
const COUNTER: &str = r#"import os, signal, sys, time
r, w = os.pipe()
os.set_blocking(r, False)
os.set_blocking(w, False)
sig = getattr(signal, sys.argv[1])
signal.signal(sig, lambda *a: None)
signal.set_wakeup_fd(w, warn_on_full_buffer=False)
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[2])
n = 0
while time.monotonic() < end:
    time.sleep(0.02)
    try:
        n += len(os.read(r, 100))
    except BlockingIOError:
        pass
try:
    n += len(os.read(r, 100))
except BlockingIOError:
    pass
print("count", n, flush=True)
"#;

fn unique(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "jailterm{tag}{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

struct PtyRun {
    code: Option<i32>,
    output: String,
}

/// Runs jail `args` on a pseudo-terminal of `size`, driven by `steps`, as the fixture's user.
fn on_pty(fx: &Fixture, args: &[&str], size: (u16, u16), steps: serde_json::Value) -> PtyRun {
    let mut argv = vec![jail_bin().to_string_lossy().into_owned()];
    argv.extend(args.iter().map(|s| s.to_string()));
    let spec = serde_json::json!({
        "argv": argv,
        "size": [size.0, size.1],
        "steps": steps,
        "limit": 20,
    });
    let out = fx
        .command(Path::new(PYTHON), &["-c", PTY_DRIVER, &spec.to_string()])
        .env("PATH", PATH)
        .output()
        .expect("run the pty driver");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "pty driver output ({e}):\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(
        v["ok"], true,
        "an expected text never came as {:?}:\n{v}",
        fx.who
    );
    PtyRun {
        code: v["code"].as_i64().map(|c| c as i32),
        output: v["output"]
            .as_str()
            .unwrap_or_default()
            .replace("\r\n", "\n"),
    }
}

/// Writes the signal counter into the fixture (readable by its user) and returns its path.
fn counter(fx: &Fixture) -> String {
    let path = fx.repo.join("count.py");
    std::fs::write(&path, COUNTER).unwrap();
    fx.give_to(fx.who);
    path.to_string_lossy().into_owned()
}

/// A jail running in the background without a terminal, its stdout read line by line.
fn background(mut cmd: Command) -> Background {
    cmd.env("PATH", PATH).stdin(Stdio::null());
    Background::spawn(cmd)
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: sends a signal; no memory is involved.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(
        rc,
        0,
        "kill({pid}, {sig}): {}",
        std::io::Error::last_os_error()
    );
}

#[test]
fn the_terminal_size_and_tty_are_seen_inside() {
    if !full_level_or_skip("the_terminal_size_and_tty_are_seen_inside") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "tty-size");
        for (rows, cols) in [(40u16, 100u16), (17, 211)] {
            let run = on_pty(
                &fx,
                &[
                    "--",
                    "/bin/sh",
                    "-c",
                    "stty size; test -t 0 && echo STDIN-TTY; test -t 1 && echo STDOUT-TTY; \
                     test -t 2 && echo STDERR-TTY; \
                     echo sid=$(cut -d' ' -f6 /proc/$$/stat) pid=$$",
                ],
                (rows, cols),
                serde_json::json!([]),
            );
            assert_eq!(run.code, Some(0), "as {who:?}:\n{}", run.output);
            assert!(
                run.output.contains(&format!("{rows} {cols}\n")),
                "stty size as {who:?}:\n{}",
                run.output
            );
            for t in ["STDIN-TTY", "STDOUT-TTY", "STDERR-TTY"] {
                assert!(run.output.contains(t), "{t} as {who:?}:\n{}", run.output);
            }
            // With a terminal the command stays in jail's session (whose leader is outside the
            // pid namespace), not in a new one of its own.
            assert!(
                run.output.contains("sid=0 pid="),
                "as {who:?}: the command got a session of its own on a terminal:\n{}",
                run.output
            );
        }
    }
}

#[test]
fn ctrl_c_interrupts_the_command_once() {
    if !full_level_or_skip("ctrl_c_interrupts_the_command_once") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "ctrl-c");
        let run = on_pty(
            &fx,
            &[
                "--",
                "/bin/sh",
                "-c",
                "trap 'echo INT; exit 3' INT; echo ready; sleep 30; echo not-interrupted",
            ],
            (24, 80),
            serde_json::json!([["expect", "ready\r\n"], ["sleep", 0.2], ["write", "\u{3}"]]),
        );
        assert_eq!(run.code, Some(3), "as {who:?}:\n{}", run.output);
        assert_eq!(
            run.output.matches("INT").count(),
            1,
            "as {who:?}:\n{}",
            run.output
        );
        assert!(!run.output.contains("not-interrupted"), "{}", run.output);

        // Counted at the signal level: one Ctrl-C, one SIGINT (jail does not forward it again).
        let count = counter(&fx);
        let run = on_pty(
            &fx,
            &["--", PYTHON, &count, "SIGINT", "1.0"],
            (24, 80),
            serde_json::json!([["expect", "ready\r\n"], ["sleep", 0.1], ["write", "\u{3}"]]),
        );
        assert_eq!(run.code, Some(0), "as {who:?}:\n{}", run.output);
        assert!(
            run.output.contains("count 1\n"),
            "as {who:?}: SIGINT deliveries:\n{}",
            run.output
        );
    }
}

/// On a terminal the command shares init's process group (the terminal's foreground): SIGINT
/// sent to jail with kill() (a shell's `kill -INT %1`, a hang-up passed on by the shell) must
/// reach every process of that group, the child the shell waits for included, not the shell
/// alone, which would wait on. jail exits 130 and nothing of the tree is left.
#[test]
fn a_signal_sent_to_jail_on_a_terminal_ends_the_whole_tree() {
    if !full_level_or_skip("a_signal_sent_to_jail_on_a_terminal_ends_the_whole_tree") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "tty-signal");
        let n = std::process::id() % 1_000_000;
        let (bg, fg) = (format!("86411.{n:06}"), format!("86412.{n:06}"));
        // The foreground child says it runs just before it becomes the sleep.
        let script = format!("sleep {bg} & /bin/sh -c 'echo started; exec sleep {fg}'; echo done");
        let run = on_pty(
            &fx,
            &["--", "/bin/sh", "-c", &script],
            (24, 80),
            serde_json::json!([["expect", "started"], ["signal", libc::SIGINT]]),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut left = [processes_with(&bg), processes_with(&fg)].concat();
        while !left.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            left = [processes_with(&bg), processes_with(&fg)].concat();
        }
        for pid in &left {
            // SAFETY: kill sends a signal; nothing else.
            unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
        }
        assert_eq!(run.code, Some(130), "as {who:?}:\n{}", run.output);
        assert!(!run.output.contains("done"), "as {who:?}:\n{}", run.output);
        assert!(left.is_empty(), "as {who:?}: left running: {left:?}");
    }
}

#[test]
fn a_window_resize_reaches_the_command_once() {
    if !full_level_or_skip("a_window_resize_reaches_the_command_once") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "winch");
        let run = on_pty(
            &fx,
            &[
                "--",
                "/bin/sh",
                "-c",
                "n=0; trap 'n=$((n+1)); echo WINCH$n; stty size' WINCH; echo ready; \
                 while [ $n -lt 1 ]; do sleep 0.05; done; sleep 0.5; exit 4",
            ],
            (24, 80),
            serde_json::json!([["expect", "ready\r\n"], ["sleep", 0.2], ["resize", 50, 132]]),
        );
        assert_eq!(run.code, Some(4), "as {who:?}:\n{}", run.output);
        assert!(
            run.output.contains("WINCH1\n50 132\n") && !run.output.contains("WINCH2"),
            "as {who:?}:\n{}",
            run.output
        );

        let count = counter(&fx);
        let run = on_pty(
            &fx,
            &["--", PYTHON, &count, "SIGWINCH", "1.0"],
            (24, 80),
            serde_json::json!([["expect", "ready\r\n"], ["sleep", 0.1], ["resize", 30, 90]]),
        );
        assert_eq!(run.code, Some(0), "as {who:?}:\n{}", run.output);
        assert!(
            run.output.contains("count 1\n"),
            "as {who:?}: SIGWINCH deliveries:\n{}",
            run.output
        );
    }
}

/// The minimal /dev has a new devpts instance, without the caller's terminal (the host's
/// /dev/pts/N): jail binds that terminal at /dev/console so that ttyname(3) finds it, and `tty`,
/// `GPG_TTY=$(tty)` and python's os.ttyname keep working.
#[test]
fn the_terminal_has_a_name_inside() {
    if !full_level_or_skip("the_terminal_has_a_name_inside") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "ttyname");
        let run = on_pty(
            &fx,
            &["--", "/bin/sh", "-c", "test -t 0 && echo IS-TTY; tty"],
            (24, 80),
            serde_json::json!([]),
        );
        assert!(run.output.contains("IS-TTY"), "{}", run.output);
        assert!(
            (run.output.contains("/dev/console") || run.output.contains("/dev/pts/"))
                && run.code == Some(0),
            "as {who:?}: exit {:?}\n{}",
            run.code,
            run.output
        );
    }
}

#[test]
fn signals_sent_to_jail_reach_the_command_once() {
    if !full_level_or_skip("signals_sent_to_jail_reach_the_command_once") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "fwd");
        for (name, sig, code) in [("TERM", libc::SIGTERM, 5), ("USR1", libc::SIGUSR1, 6)] {
            // The shell waits in `wait` (a trap runs at once there, not after a foreground job).
            let script = format!(
                "trap 'echo {name}; exit {code}' {name}; echo ready; sleep 30 & wait; echo not-signalled"
            );
            let mut bg = background(fx.command(jail_bin(), &["--", "/bin/sh", "-c", &script]));
            bg.expect("ready");
            kill(bg.pid(), sig);
            let Run {
                code: status,
                stdout: out,
                stderr: err,
            } = bg.finish();
            assert_eq!(status, Some(code), "{name} as {who:?}:\n{out}{err}");
            assert_eq!(out, format!("ready\n{name}\n"), "{name} as {who:?}:\n{err}");

            // Counted at the signal level.
            let count = counter(&fx);
            let mut bg = background(fx.command(
                jail_bin(),
                &["--", PYTHON, &count, &format!("SIG{name}"), "1.0"],
            ));
            bg.expect("ready");
            kill(bg.pid(), sig);
            let Run {
                code: status,
                stdout: out,
                stderr: err,
            } = bg.finish();
            assert_eq!(status, Some(0), "{name} as {who:?}:\n{out}{err}");
            assert_eq!(
                out, "ready\ncount 1\n",
                "SIG{name} deliveries as {who:?}:\n{err}"
            );
        }
    }
}

/// BUG: init (pid 1 inside) stays in jail's process group, and forwards every signal that does
/// not come from the kernel. A signal sent to jail's whole process group (`kill -- -PGID`, a
/// shell's `kill %1`, GNU timeout) therefore reaches the command twice: once through the
/// supervisor and init, once more through init's own copy. Programs that treat a second
/// SIGINT/SIGTERM as "quit now" skip their clean shutdown.
#[test]

fn a_signal_to_jails_process_group_reaches_the_command_once() {
    if !full_level_or_skip("a_signal_to_jails_process_group_reaches_the_command_once") {
        return;
    }
    use std::os::unix::process::CommandExt;
    for who in users() {
        let fx = Fixture::new(who, "pgrp");
        let count = counter(&fx);
        // Deliveries can coalesce, so try a few times; once is enough to show the double.
        for attempt in 0..5 {
            let mut cmd = fx.command(jail_bin(), &["--", PYTHON, &count, "SIGUSR1", "0.8"]);
            cmd.process_group(0);
            let mut bg = background(cmd);
            bg.expect("ready");
            kill(-bg.pid(), libc::SIGUSR1);
            let Run {
                code: status,
                stdout: out,
                stderr: err,
            } = bg.finish();
            assert_eq!(status, Some(0), "as {who:?}:\n{out}{err}");
            assert_eq!(
                out, "ready\ncount 1\n",
                "as {who:?}, attempt {attempt}: SIGUSR1 to jail's process group"
            );
        }
    }
}

#[test]
fn without_a_terminal_the_command_gets_its_own_session() {
    if !full_level_or_skip("without_a_terminal_the_command_gets_its_own_session") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "setsid");
        let mut cmd = fx.command(
            jail_bin(),
            &[
                "--",
                "/bin/sh",
                "-c",
                "echo sid=$(cut -d' ' -f6 /proc/$$/stat) pid=$$; \
                 if test -t 0 || test -t 1; then echo HAS-TTY; fi; \
                 (exec 3</dev/tty) 2>/dev/null && echo DEV-TTY-OPENED || echo NO-CTTY",
            ],
        );
        cmd.env("PATH", PATH);
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "as {who:?}:\n{stdout}");
        let pid = stdout
            .split_whitespace()
            .find_map(|w| w.strip_prefix("pid="))
            .unwrap();
        assert!(
            stdout.contains(&format!("sid={pid} pid={pid}\n")),
            "as {who:?}: no new session:\n{stdout}"
        );
        assert!(
            stdout.contains("NO-CTTY") && !stdout.contains("HAS-TTY"),
            "as {who:?}:\n{stdout}"
        );
    }
}

#[test]
fn sigkill_of_the_supervisor_leaves_nothing_behind() {
    if !full_level_or_skip("sigkill_of_the_supervisor_leaves_nothing_behind") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "sigkill");
        let main = unique("main");
        let daemon = unique("daemon");
        let script = format!("(exec -a {daemon} sleep 60 &); exec -a {main} sleep 60");
        let mut bg = background(fx.command(jail_bin(), &["--", "/bin/bash", "-c", &script]));
        // Both are running under their marker names.
        let started = |marker: &str| {
            processes_with(marker).into_iter().any(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|c| c.starts_with(marker.as_bytes()))
                    .unwrap_or(false)
            })
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(started(&main) && started(&daemon)) {
            assert!(
                Instant::now() < deadline,
                "as {who:?}: the marked processes never started"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        kill(bg.pid(), libc::SIGKILL);
        bg.wait();
        // The kernel ends the namespace asynchronously: a loaded machine takes its time.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut left = processes_with(&main);
        left.extend(processes_with(&daemon));
        while !left.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            left = processes_with(&main);
            left.extend(processes_with(&daemon));
        }
        for pid in &left {
            let _ = unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
        }
        assert!(
            left.is_empty(),
            "as {who:?}: processes outlived the SIGKILLed supervisor: {left:?}"
        );
    }
}

/// Job control from an interactive shell: Ctrl-Z stops the jailed command and the shell sees the
/// job stopped; `fg` continues it with the terminal; Ctrl-C then ends it with 130.
#[test]
fn ctrl_z_stops_the_job_and_fg_continues_it() {
    if !full_level_or_skip("ctrl_z_stops_the_job_and_fg_continues_it") {
        return;
    }
    const DRIVER: &str = r#"
import os, pty, time, select, sys
jail = sys.argv[1]
pid, fd = pty.fork()
if pid == 0:
    os.execvp("bash", ["bash", "--norc", "--noprofile", "-i"])
def read_until(needle, t=30.0):
    out = b""; end = time.time() + t
    while time.time() < end and needle.encode() not in out:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try: out += os.read(fd, 4096)
            except OSError: break
    return out.decode(errors="replace")
os.write(fd, b"PS1='$ '\n"); read_until("$ ")
# The quotes keep the terminal's echo of the command line from matching the output.
os.write(fd, f"{jail} -- sh -c 'echo STAR\"\"TED; sleep 30'\n".encode())
a = read_until("STARTED")
time.sleep(0.5)  # let the job settle (a loaded machine is slow to hand the terminal over)
os.write(fd, b"\x1a"); b = read_until("Stopped")
os.write(fd, b"fg\n"); c = read_until("sleep 30")
time.sleep(0.3)
os.write(fd, b"\x03"); read_until("$ ")
os.write(fd, b"echo RC=$?\n"); d = read_until("RC=1")
os.write(fd, b"exit\n")
print("STOPPED" if "Stopped" in b else "NOT-STOPPED:" + b)
print(d)
"#;
    for who in users() {
        let fx = Fixture::new(who, "jobctl");
        let jail = common::jail_bin().to_string_lossy().into_owned();
        let out = fx
            .command("python3".as_ref(), &["-c", DRIVER, &jail])
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("STOPPED\n"),
            "{who:?}: Ctrl-Z did not stop the job:\n{text}"
        );
        assert!(
            text.contains("RC=130"),
            "{who:?}: Ctrl-C after fg did not end it:\n{text}"
        );
    }
}

/// Lines the background loop of `stops_itself` has written so far.
fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// The command stops itself (kill -STOP $$) and leaves a loop running in the background: the
/// timeout must still end the whole tree. Without a terminal the supervisor does not stop with
/// it; with one it does (job control), and init's own deadline ends the tree.
#[test]
fn a_command_that_stops_itself_cannot_outlive_the_timeout() {
    if !full_level_or_skip("stop-timeout") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "stop-timeout");
        let alive = fx.scratch.join("alive");
        let script = format!(
            "(while :; do echo x >> {}; sleep 0.2; done) & sleep 0.5; kill -STOP $$",
            alive.display()
        );
        let s = fx.p("scratch");
        // No terminal, with and without a pid namespace.
        for disabled in ["", "mount"] {
            let _ = std::fs::remove_file(&alive);
            let started = Instant::now();
            let mut cmd = fx.command(
                jail_bin(),
                &[
                    "--rw",
                    &s,
                    "--timeout",
                    "1s",
                    "--",
                    "/bin/sh",
                    "-c",
                    &script,
                ],
            );
            cmd.env("JAIL_TEST_DISABLE", disabled)
                .env("PATH", PATH)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0);
            let mut child = cmd.spawn().unwrap();
            let code = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status.code();
                }
                if started.elapsed() > Duration::from_secs(15) {
                    // SAFETY: kill(2) on the process group we created.
                    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                    let _ = child.wait();
                    panic!("{who:?} {disabled:?}: jail did not end by the timeout");
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            assert_eq!(code, Some(124), "{who:?} {disabled:?}");
            let n = lines(&alive);
            std::thread::sleep(Duration::from_millis(800));
            assert_eq!(
                lines(&alive),
                n,
                "{who:?} {disabled:?}: the loop outlived jail"
            );
        }
        // On a terminal with no job-control shell (as agent harnesses run commands): nothing
        // could continue a stopped jail, so it must not stop (the kernel discards its SIGTSTP in
        // an orphaned process group); the run ends, and the loop with it, by the timeout at the
        // latest (init's own deadline: timeout + 2 s grace + 1 s).
        let _ = std::fs::remove_file(&alive);
        let line = format!(
            "{} --rw {s} --timeout 1s -- /bin/sh -c '{script}'",
            jail_bin().display()
        );
        let started = Instant::now();
        let mut term = fx
            .command(Path::new("/usr/bin/script"), &["-qec", &line, "/dev/null"])
            .env("PATH", PATH)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let ended = loop {
            if term.try_wait().unwrap().is_some() {
                break true;
            }
            if started.elapsed() > Duration::from_secs(15) {
                break false;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        // SAFETY: kill(2) on the process group we created.
        unsafe { libc::kill(-(term.id() as i32), libc::SIGKILL) };
        let _ = term.wait();
        assert!(
            ended,
            "{who:?}: on a terminal jail hung with the stopped command"
        );
        let n = lines(&alive);
        std::thread::sleep(Duration::from_millis(800));
        assert_eq!(
            lines(&alive),
            n,
            "{who:?}: on a terminal the loop outlived jail"
        );
    }
}
