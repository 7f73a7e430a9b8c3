//! Signals that end a run, as CI cancels and `timeout` send them: SIGINT, SIGTERM or SIGHUP to
//! jail alone or to its whole process group, without a terminal, as root and as an unprivileged
//! user, with and without the pid namespace. Each must end the command's whole tree as it would
//! end the same tree without jail (a foreground child the shell waits for included), and leave
//! nothing running.

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Fixture, full_level_or_skip, jail_bin, processes_with, users};

const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

const SIGNALS: [(&str, i32); 3] = [
    ("INT", libc::SIGINT),
    ("TERM", libc::SIGTERM),
    ("HUP", libc::SIGHUP),
];

/// With and without the pid namespace (the mount layer off: no namespaces at all).
const MODES: [&str; 2] = ["", "mount"];

/// A sleep length no other process has: it names the sleep in the process list.
fn marker(base: u32) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{base}.{:06}{:03}",
        std::process::id() % 1_000_000,
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// A shell script with children: a daemon in the background (started with SIGINT ignored, as a
/// non-interactive shell does), and a subshell in a pipeline the shell waits for.
const SCRIPT: &str =
    "sleep \"$1\" &\necho started\n( sleep \"$2\"; echo sub-done ) | cat\necho done\n";

/// The two shapes of tree: `sh -c` with a daemon and a foreground child, and a script file.
fn trees(fx: &Fixture) -> Vec<(Vec<String>, [String; 2])> {
    let script = fx.repo.join("tree.sh");
    if !script.exists() {
        std::fs::write(&script, SCRIPT).unwrap();
        fx.give_to(fx.who);
    }
    let (bg, fg) = (marker(86401), marker(86402));
    let inline = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        format!("sleep {bg} & echo started; sleep {fg}; echo done"),
    ];
    let (bg2, fg2) = (marker(86403), marker(86404));
    let file = vec![
        "/bin/sh".to_string(),
        script.to_string_lossy().into_owned(),
        bg2.clone(),
        fg2.clone(),
    ];
    vec![(inline, [bg, fg]), (file, [bg2, fg2])]
}

/// Whether the sleep named by `marker` runs (not only a command line that mentions it: jail's
/// own, or the shell's).
fn sleeping(marker: &str) -> bool {
    processes_with(marker).into_iter().any(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c == format!("sleep\0{marker}\0").as_bytes())
    })
}

/// Waits (at most 10 s) until no process carries any of `markers`; kills what is left either
/// way, and returns it.
fn left_running(markers: &[String]) -> Vec<u32> {
    let find = || -> Vec<u32> { markers.iter().flat_map(|m| processes_with(m)).collect() };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left = find();
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        left = find();
    }
    for pid in &left {
        // SAFETY: kill sends a signal; nothing else.
        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
    }
    left
}

/// Starts `cmd` in a process group of its own, its stdout and stderr in `log` (a file: leftovers
/// holding it open cannot block the test as a pipe would).
fn spawn_logged(mut cmd: Command, log: &Path) -> Child {
    let file = std::fs::File::create(log).unwrap();
    cmd.stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .env("PATH", PATH)
        .process_group(0);
    cmd.spawn().unwrap()
}

fn read(log: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(log).unwrap_or_default()).into_owned()
}

/// Waits for `child` (at most `limit`); kills its group and returns None past it.
fn wait_for(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            // SAFETY: kill(2) on the process group the test created.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
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

/// The verdict on one run: it ended with `code` in time, the tree did not go on, and nothing of
/// it is left (what is left is killed).
fn judge(
    what: &str,
    status: Option<std::process::ExitStatus>,
    code: i32,
    output: &str,
    markers: &[String],
) -> Vec<String> {
    let mut failures = Vec::new();
    match status {
        None => failures.push(format!(
            "{what}: still running after the deadline:\n{output}"
        )),
        Some(s) if s.code() != Some(code) => {
            failures.push(format!("{what}: {s}, expected exit {code}:\n{output}"))
        }
        Some(_) if output.contains("done") => {
            failures.push(format!("{what}: the tree went on:\n{output}"))
        }
        Some(_) => {}
    }
    let left = left_running(markers);
    if !left.is_empty() {
        failures.push(format!("{what}: processes outlived the run: {left:?}"));
    }
    failures
}

/// `timeout -s SIG 3 jail -- TREE`: timeout signals jail and then its own process group (jail's),
/// as GNU timeout does; exit 124, and the whole tree gone, the child the shell waits for too.
/// Every case of a user runs at once, so the test waits for one timeout, not twelve.
#[test]
fn timeout_with_int_term_or_hup_ends_the_whole_tree() {
    if !full_level_or_skip("timeout_with_int_term_or_hup_ends_the_whole_tree") {
        return;
    }
    let mut failures = Vec::new();
    for who in users() {
        let fx = Fixture::new(who, "timeout-signal");
        let mut running = Vec::new();
        for mode in MODES {
            for (name, _) in SIGNALS {
                for (argv, markers) in trees(&fx) {
                    let jail = jail_bin().to_string_lossy().into_owned();
                    let mut args = vec!["-s", name, "3", &jail, "--"];
                    args.extend(argv.iter().map(String::as_str));
                    let mut cmd = fx.command(Path::new("timeout"), &args);
                    cmd.env("JAIL_TEST_DISABLE", mode);
                    let log = fx.dir.join(format!("log-{}", running.len()));
                    let what = format!("{who:?} {mode:?} SIG{name} {argv:?}");
                    running.push((what, spawn_logged(cmd, &log), log, markers));
                }
            }
        }
        for (what, mut child, log, markers) in running {
            let status = wait_for(&mut child, Duration::from_secs(20));
            failures.extend(judge(&what, status, 124, &read(&log), &markers));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// SIGINT, SIGTERM or SIGHUP sent to jail alone (`kill PID`) or to its process group
/// (`kill -SIG -PGID`, as CI runners cancel a job): jail exits 128+N once the command's shell
/// has, and the whole tree is gone.
#[test]
fn int_term_or_hup_to_jail_or_its_group_end_the_whole_tree() {
    if !full_level_or_skip("int_term_or_hup_to_jail_or_its_group_end_the_whole_tree") {
        return;
    }
    let mut failures = Vec::new();
    for who in users() {
        let fx = Fixture::new(who, "group-signal");
        for mode in MODES {
            for (name, sig) in SIGNALS {
                for group in [false, true] {
                    for (argv, markers) in trees(&fx) {
                        let mut args = vec!["--"];
                        args.extend(argv.iter().map(String::as_str));
                        let mut cmd = fx.command(jail_bin(), &args);
                        cmd.env("JAIL_TEST_DISABLE", mode);
                        let log = fx.dir.join("log");
                        let mut child = spawn_logged(cmd, &log);
                        // Both sleeps run: the foreground one is what the shell waits for.
                        let deadline = Instant::now() + Duration::from_secs(10);
                        while markers.iter().any(|m| !sleeping(m)) {
                            if Instant::now() > deadline {
                                wait_for(&mut child, Duration::ZERO);
                                left_running(&markers);
                                panic!("the sleeps never started:\n{}", read(&log));
                            }
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        let pid = child.id() as i32;
                        kill(if group { -pid } else { pid }, sig);
                        let what = format!(
                            "{who:?} {mode:?} SIG{name} to {} {argv:?}",
                            if group { "jail's group" } else { "jail" }
                        );
                        let status = wait_for(&mut child, Duration::from_secs(10));
                        failures.extend(judge(&what, status, 128 + sig, &read(&log), &markers));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
