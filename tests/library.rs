//! The library API on its own, from a test process (which has threads, as an orchestrator
//! does): `Jail::spawn` with typed outcomes and typed errors, the stop, the drop, and
//! `Jail::run` refusing a threaded caller.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use jail::{Jail, JailError, Level, Require, Status};

fn agent(fx: &Fixture, script: &str) -> Jail {
    Jail::new(["/bin/sh", "-c", script])
        .program(jail_bin())
        .ro(&fx.repo)
        .cwd(&fx.dir)
}

#[test]
fn spawned_runs_end_with_their_typed_outcome() {
    if !full_level_or_skip("spawned_runs_end_with_their_typed_outcome") {
        return;
    }
    let fx = Fixture::new(users()[0], "lib-outcome");
    let exited = agent(&fx, "exit 3").require(Require::Full).spawn().unwrap();
    let o = exited.wait().unwrap();
    assert_eq!(
        (o.status, o.exit_code, o.level),
        (Status::Exited { code: 3 }, 3, Level::Full)
    );
    let o = agent(&fx, "kill -KILL $$").spawn().unwrap().wait().unwrap();
    assert_eq!(o.status, Status::Signaled { signal: 9 });
    let o = agent(&fx, "sleep 30")
        .timeout(Duration::from_millis(300))
        .spawn()
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!((o.status, o.exit_code), (Status::TimedOut, 124));
    // The report, when asked for, comes back typed; the write was refused and nothing changed.
    let o = agent(&fx, &format!("echo x > {}/file.txt", fx.repo.display()))
        .record(true)
        .spawn()
        .unwrap()
        .wait()
        .unwrap();
    assert!(
        matches!(o.status, Status::Exited { code } if code != 0),
        "{o:?}"
    );
    let report = o.report.expect("a report with record(true)");
    assert_eq!(report.outcome.status, "exited");
    assert_eq!(report.changes.created + report.changes.modified, 0);
    assert_eq!(
        std::fs::read_to_string(fx.repo.join("file.txt")).unwrap(),
        "original\n"
    );
}

#[test]
fn errors_are_typed_before_the_spawn_and_across_the_control_socket() {
    if !full_level_or_skip("errors_are_typed_before_the_spawn_and_across_the_control_socket") {
        return;
    }
    let fx = Fixture::new(users()[0], "lib-errors");
    // Checked in this process: a path that does not exist.
    let err = agent(&fx, "true")
        .rw(fx.dir.join("no-such-dir"))
        .spawn()
        .err()
        .expect("refused");
    assert!(
        matches!(err, JailError::BadPath { ref flag, .. } if flag == "--rw"),
        "{err}"
    );
    // Found by the jail process: every layer switched off there (the test hook), level full
    // required. The error crosses the control socket with its kind.
    // SAFETY: no other thread of this test process reads the environment now.
    unsafe { std::env::set_var("JAIL_TEST_DISABLE", "mount,landlock,seccomp") };
    let child = agent(&fx, "true").require(Require::Full).spawn();
    unsafe { std::env::remove_var("JAIL_TEST_DISABLE") };
    let err = child.unwrap().wait().expect_err("level not met");
    assert!(matches!(err, JailError::LevelNotMet { .. }), "{err}");
}

#[test]
fn a_stop_or_a_dropped_child_takes_the_whole_tree() {
    if !full_level_or_skip("a_stop_or_a_dropped_child_takes_the_whole_tree") {
        return;
    }
    let fx = Fixture::new(users()[0], "lib-stop");
    let marker = format!("sleep 7{}", std::process::id() % 1000);
    let script = format!("sh -c 'trap \"\" TERM; exec {marker}' & wait");
    let child = agent(&fx, &script).spawn().unwrap();
    let stopper = child.stopper().unwrap();
    let waiter = std::thread::spawn(move || child.wait());
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    stopper.stop();
    let o = waiter.join().unwrap().unwrap();
    assert_eq!(o.status, Status::Stopped);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        processes_with(&marker).is_empty(),
        "the tree survived the stop"
    );
    // Dropped without a wait: stopped too.
    let child = agent(&fx, &script).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !processes_with(&marker).is_empty(),
        "the tree did not start"
    );
    drop(child);
    assert!(
        processes_with(&marker).is_empty(),
        "the tree survived the drop"
    );
    // A stop after the end is harmless (no SIGPIPE here: the test would die of it).
    stopper.stop();
}

#[test]
fn a_kill_takes_the_tree_without_a_sigterm_first() {
    if !full_level_or_skip("a_kill_takes_the_tree_without_a_sigterm_first") {
        return;
    }
    let fx = Fixture::new(users()[0], "lib-kill");
    let seen = fx.scratch.join("term-seen");
    let script = format!(
        "trap 'echo > {}' TERM; echo ready; while :; do sleep 0.05; done",
        seen.display()
    );
    for (how, expect_term) in [("stop", true), ("kill", false)] {
        let _ = std::fs::remove_file(&seen);
        let mut child = agent(&fx, &script)
            .rw(&fx.scratch)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = [0u8; 6];
        std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut ready).unwrap();
        match how {
            "stop" => child.stop(),
            _ => child.kill(),
        }
        let o = child.wait().unwrap();
        assert_eq!(o.status, Status::Stopped, "{how}");
        assert_eq!(
            seen.exists(),
            expect_term,
            "{how}: SIGTERM seen by the command"
        );
    }
}

#[test]
fn run_in_this_process_refuses_a_threaded_caller() {
    let _other = std::thread::spawn(|| std::thread::sleep(Duration::from_secs(2)));
    let err = Jail::new(["true"])
        .cwd(Path::new("/"))
        .run()
        .expect_err("refused");
    assert!(err.to_string().contains("use Jail::spawn"), "{err}");
}

#[test]
fn the_command_never_holds_the_control_socket() {
    if !full_level_or_skip("the_command_never_holds_the_control_socket") {
        return;
    }
    let fx = Fixture::new(users()[0], "lib-control-fd");
    // Every descriptor the command holds, as the kernel names them: a socket among them could
    // forge the outcome its orchestrator reads, or stop a sibling's run.
    let script = "for f in /proc/self/fd/*; do readlink \"$f\"; done; \
                  for n in 3 4 5 6 7 8 9; do (printf '{\"ended\":{}}' >&$n) 2>/dev/null && echo wrote $n; done; true";
    let mut child = agent(&fx, script)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    let o = child.wait().unwrap();
    assert_eq!(o.status, Status::Exited { code: 0 }, "{out}");
    assert!(
        !out.contains("socket:"),
        "the command holds a socket:\n{out}"
    );
    assert!(
        !out.contains("wrote"),
        "the command wrote to an inherited descriptor:\n{out}"
    );
}
