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
    // A --cow run's outcome names the run its layer waits as; none when nothing changed.
    let cow = |script: &str| {
        Jail::new(["/bin/sh", "-c", script])
            .program(jail_bin())
            .cow(&fx.repo)
            .cwd(&fx.dir)
            .spawn()
            .unwrap()
            .wait()
            .unwrap()
    };
    let o = cow(&format!("echo x > {}/file.txt", fx.repo.display()));
    let id = o
        .cow_run
        .clone()
        .unwrap_or_else(|| panic!("no cow_run: {o:?}"));
    // The run is in this process's store (the library's jail has this process's HOME).
    let jail = |args: &[&str]| {
        Run::from(
            std::process::Command::new(jail_bin())
                .args(args)
                .output()
                .unwrap(),
        )
    };
    let diff = jail(&["diff", &id]);
    assert!(diff.stdout.contains("file.txt"), "{}", diff.describe());
    let discarded = jail(&["discard", &id]);
    assert!(discarded.ok(), "{}", discarded.describe());
    assert_eq!(cow("true").cow_run, None);
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

/// A caller tells an unknown profile from a bad flag by the error's kind and reads the name or
/// the flag from its fields: from `policy()` and `dry_run()` in this process, from `spawn()`, and
/// from a jail process that found it (the kind and its fields cross the control socket).
#[test]
fn a_caller_tells_the_kinds_apart_by_their_data() {
    if !full_level_or_skip("a_caller_tells_the_kinds_apart_by_their_data") {
        return;
    }
    let fx = Fixture::new(users()[0], "lib-kinds");
    let unknown = |e: &JailError| {
        matches!(e, JailError::UnknownProfile { name, known }
            if name == "no-such-profile" && known.iter().any(|k| k == "default"))
    };
    let bad_net = |e: &JailError| matches!(e, JailError::BadFlag { flag, value, .. } if flag == "--net" && value == "bogus");
    let nosuch = || agent(&fx, "true").profile("no-such-profile");
    let bogus = || agent(&fx, "true").net("bogus");
    for (what, e) in [
        ("policy()", nosuch().policy().err()),
        ("dry_run()", nosuch().dry_run().err()),
        ("spawn()", nosuch().spawn().err()),
    ] {
        let e = e.unwrap_or_else(|| panic!("{what}: accepted an unknown profile"));
        assert!(unknown(&e), "{what}: {e:?}");
        assert_eq!(e.to_string(), {
            let known = match &e {
                JailError::UnknownProfile { known, .. } => known.join(", "),
                _ => unreachable!(),
            };
            format!("unknown profile 'no-such-profile' (known: {known})")
        });
    }
    for (what, e) in [
        ("policy()", bogus().policy().err()),
        ("dry_run()", bogus().dry_run().err()),
        ("spawn()", bogus().spawn().err()),
    ] {
        let e = e.unwrap_or_else(|| panic!("{what}: accepted --net bogus"));
        assert!(bad_net(&e), "{what}: {e:?}");
        assert!(e.to_string().starts_with("--net bogus: "), "{e}");
    }

    // Found by the jail process only: this process knows the profile and has the secret's
    // value, the jail process (started through a wrapper) has neither.
    let config = fx.scratch.join("config");
    let profiles = config.join("jail/profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(profiles.join("lib-kinds-only-here.toml"), "").unwrap();
    let empty = fx.scratch.join("empty-config");
    std::fs::create_dir_all(&empty).unwrap();
    let secret = "JAIL_LIB_KINDS_SECRET";
    let wrapper = fx.scratch.join("jail-elsewhere");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec env -u {secret} XDG_CONFIG_HOME={} {} \"$@\"\n",
            empty.display(),
            jail_bin().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    // SAFETY: nextest runs this test in a process of its own; no other thread reads the
    // environment now.
    unsafe {
        std::env::set_var("XDG_CONFIG_HOME", &config);
        std::env::set_var(secret, "value");
    }
    let elsewhere = || agent(&fx, "true").program(&wrapper);
    let profile = elsewhere().profile("lib-kinds-only-here").spawn();
    let secret_run = elsewhere()
        .net("allow=example.org")
        .secret(format!("{secret}@example.org"))
        .spawn();
    unsafe {
        std::env::remove_var("XDG_CONFIG_HOME");
        std::env::remove_var(secret);
    }
    let e = profile
        .unwrap()
        .wait()
        .expect_err("unknown in the jail process");
    assert!(
        matches!(&e, JailError::UnknownProfile { name, known }
            if name == "lib-kinds-only-here" && !known.is_empty()
                && !known.iter().any(|k| k == name)),
        "{e:?}"
    );
    let e = secret_run
        .unwrap()
        .wait()
        .expect_err("unset in the jail process");
    assert!(
        matches!(&e, JailError::BadFlag { flag, value, message }
            if flag == "--secret" && value.starts_with(secret)
                && message.contains("is not set")),
        "{e:?}"
    );
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
    wait_for("the command to start", Duration::from_secs(60), || {
        !processes_running(&marker).is_empty()
    });
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
    wait_for("the command to start", Duration::from_secs(60), || {
        !processes_running(&marker).is_empty()
    });
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
    // A second thread alive until the call has returned, however slow the machine.
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let other = std::thread::spawn(move || {
        let _ = wait.recv();
    });
    let err = Jail::new(["true"])
        .cwd(Path::new("/"))
        .run()
        .expect_err("refused");
    drop(done);
    other.join().unwrap();
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

#[test]
fn values_the_command_line_would_take_for_flags_reach_the_jail_process() {
    if !full_level_or_skip("values_the_command_line_would_take_for_flags_reach_the_jail_process") {
        return;
    }
    let fx = Fixture::new(users()[0], "lib-hyphen");
    // Accepted here (a deny pattern, a path), so they must be accepted by the jail process too:
    // handed over as flags, a value beginning with `-` would look like one.
    let o = agent(&fx, "echo RAN")
        .env_deny("-*")
        .spawn()
        .unwrap()
        .wait();
    assert!(
        matches!(o, Ok(ref o) if o.status == Status::Exited { code: 0 }),
        "--env-deny -*: {o:?}"
    );
    // Refused by the jail process: refused by spawn() itself, with its kind.
    for (what, jail) in [
        ("a zero timeout", agent(&fx, "true").timeout(Duration::ZERO)),
        ("an empty --ro", agent(&fx, "true").ro("")),
        ("an empty --cwd", agent(&fx, "true").cwd("")),
    ] {
        match jail.spawn() {
            Err(JailError::BadFlag { .. } | JailError::BadPath { .. }) => {}
            Err(e) => panic!("{what}: refused as {e:?}"),
            Ok(child) => panic!("{what}: spawned, then {:?}", child.wait()),
        }
    }
}

#[test]
fn an_outcome_read_before_the_socket_reset_is_kept() {
    // A stop request that reaches jail after it last read the socket (a watchdog asking again,
    // a drop as the run ends) is unread when jail exits: the kernel then resets the caller's
    // end, after the outcome already written there. A jail program that does exactly that:
    let fx = Fixture::new(users()[0], "lib-reset");
    let fake = fx.dir.join("fake-jail");
    std::fs::write(
        &fake,
        "#!/bin/sh\nsleep 0.3\nprintf '%s\\n' '{\"ended\":{\"status\":\"exited\",\"code\":0,\
         \"exit_code\":0,\"level\":\"full\",\"gaps\":[],\"report\":null}}' >&3\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let child = agent(&fx, "true").program(&fake).spawn().unwrap();
    child.stop();
    let o = child.wait();
    assert!(
        matches!(o, Ok(ref o) if o.status == Status::Exited { code: 0 }),
        "the outcome was lost: {o:?}"
    );
}

/// Runs the test `name` again in a process of its own (one test, no other thread opening
/// descriptors), where `body` runs; here, checks that it passed.
fn in_own_process(name: &str, body: impl FnOnce()) {
    if std::env::var("JAIL_LIB_TEST_ALONE").as_deref() == Ok(name) {
        body();
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env("JAIL_LIB_TEST_ALONE", name)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_kept_descriptor_not_open_in_the_caller_is_refused() {
    in_own_process(
        "a_kept_descriptor_not_open_in_the_caller_is_refused",
        || {
            if !full_level_or_skip("a_kept_descriptor_not_open_in_the_caller_is_refused") {
                return;
            }
            use std::os::fd::AsRawFd;
            let fx = Fixture::new(users()[0], "lib-keep-closed");
            // The numbers the control socket is about to get: a kept number that is free here is
            // where spawn() puts jail's end of it, and the command would be handed that.
            let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
            let free = b.as_raw_fd();
            drop((a, b));
            let spawned = agent(&fx, &format!("readlink /proc/self/fd/{free}; true"))
                .keep_fd(free)
                .stdout(std::process::Stdio::piped())
                .spawn();
            match spawned {
                Err(JailError::BadFlag { ref flag, .. }) if flag == "--keep-fd" => {}
                Err(e) => panic!("keep_fd({free}): refused as {e:?}"),
                Ok(mut child) => {
                    let mut out = String::new();
                    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out)
                        .unwrap();
                    panic!(
                        "keep_fd({free}), not open here: spawned; the command held {out:?}, then {:?}",
                        child.wait()
                    );
                }
            }
        },
    );
}

#[test]
fn a_caller_with_its_stdio_closed_keeps_its_control_socket() {
    in_own_process(
        "a_caller_with_its_stdio_closed_keeps_its_control_socket",
        || {
            if !full_level_or_skip("a_caller_with_its_stdio_closed_keeps_its_control_socket") {
                return;
            }
            let fx = Fixture::new(users()[0], "lib-closed-stdio");
            let jail = agent(&fx, "echo RAN").stdout(std::process::Stdio::piped());
            // A daemon that closed its stdin and stdout: the socket pair lands on 0 and 1.
            // SAFETY: dup and close on this process's own descriptors; nothing prints until
            // stdout is back, after the run (the pipe from the command may take number 1).
            let saved = unsafe { libc::dup(1) };
            unsafe { libc::close(0) };
            unsafe { libc::close(1) };
            let mut out = String::new();
            let o = jail.spawn().and_then(|mut child| {
                let _ = std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out);
                child.wait()
            });
            // SAFETY: as above.
            unsafe {
                libc::dup2(saved, 1);
                libc::close(saved);
            }
            assert!(
                matches!(o, Ok(ref o) if o.status == Status::Exited { code: 0 }) && out == "RAN\n",
                "stdout {out:?}, outcome {o:?}"
            );
        },
    );
}

#[test]
fn a_dropped_child_whose_jail_cannot_act_is_killed_in_bounded_time() {
    if !full_level_or_skip("a_dropped_child_whose_jail_cannot_act_is_killed_in_bounded_time") {
        return;
    }
    let fx = Fixture::new(users()[0], "lib-drop-frozen");
    let marker = format!("sleep 8{}", std::process::id() % 1000);
    let child = agent(&fx, &format!("exec {marker}")).spawn().unwrap();
    wait_for("the command to start", Duration::from_secs(60), || {
        !processes_running(&marker).is_empty()
    });
    // The supervisor frozen (as a command could do where signals are not scoped): the stop
    // request is never read.
    // SAFETY: kill of the jail process this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGSTOP) };
    let started = Instant::now();
    drop(child);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the drop waited {:?}",
        started.elapsed()
    );
    // The kernel ends the pid namespace's processes asynchronously: waited for, not assumed.
    wait_for(
        "the tree to end after the drop",
        Duration::from_secs(30),
        || processes_with(&marker).is_empty(),
    );
}

#[test]
fn a_spawned_commands_stdin_is_dev_null_unless_asked() {
    if !full_level_or_skip("a_spawned_commands_stdin_is_dev_null_unless_asked") {
        return;
    }
    let fx = Fixture::new(users()[0], "lib-stdin");
    // This process's stdin a pipe, as an orchestrator's terminal or pipe would be: the command
    // must not inherit it (its jail has a process group of its own).
    let mut pipe = [0i32; 2];
    // SAFETY: pipe into a local array; dup2 onto this test process's own stdin.
    unsafe {
        assert_eq!(libc::pipe(pipe.as_mut_ptr()), 0);
        libc::dup2(pipe[0], 0);
    }
    let seen = |jail: Jail| {
        let mut child = jail.stdout(std::process::Stdio::piped()).spawn().unwrap();
        let mut out = String::new();
        std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
        child.wait().unwrap();
        out
    };
    let default = seen(agent(&fx, "readlink /proc/self/fd/0"));
    assert_eq!(default.trim(), "/dev/null", "{default}");
    let inherited =
        seen(agent(&fx, "readlink /proc/self/fd/0").stdin(std::process::Stdio::inherit()));
    assert!(inherited.starts_with("pipe:"), "{inherited}");
}

#[test]
fn a_secret_reaches_the_jail_process() {
    // The jail process reads the value from its own environment; one that is not set there is
    // refused by spawn() itself, by name, before anything runs.
    let fx = Fixture::new(users()[0], "lib-secret");
    let name = "JAIL_LIB_TEST_UNSET_SECRET";
    let spawned = agent(&fx, "echo RAN")
        .net("allow=example.org")
        .secret(format!("{name}@example.org"))
        .spawn();
    match spawned {
        Err(JailError::BadFlag {
            flag,
            value,
            message,
        }) if flag == "--secret" && value.starts_with(name) && message.contains(name) => {}
        Err(e) => panic!("refused as {e:?}"),
        Ok(child) => panic!("spawned, then {:?}", child.wait()),
    }
}

/// A session from the library: started from a `Jail` (no command of its own), commands exec'd
/// into it from many threads at once, each with its own exit code and stdio, then stopped with
/// its outcome.
#[test]
fn a_session_serves_execs_from_many_threads_and_stops_with_its_outcome() {
    if !full_level_or_skip("a_session_serves_execs_from_many_threads") {
        return;
    }
    let fx = Fixture::new(users()[0], "lib-session");
    let jail = Jail::new(Vec::<String>::new())
        .program(jail_bin())
        .ro(&fx.repo)
        .cwd(&fx.dir);
    let name = format!("lib-{}", std::process::id());
    let session = jail::Session::start(&jail, Some(&name), None).unwrap();
    assert_eq!(session.info().unwrap().level, "full");
    let file = fx.repo.join("file.txt").display().to_string();
    let codes: Vec<i32> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (session, file) = (&session, &file);
                scope.spawn(move || {
                    let script = format!("echo x > {file} 2>/dev/null && exit 100; exit {i}");
                    let argv = ["/bin/sh".into(), "-c".into(), script.into()];
                    let null = std::fs::File::open("/dev/null").unwrap();
                    use std::os::fd::AsRawFd;
                    let fd = Some(null.as_raw_fd());
                    session
                        .exec(&argv, &jail::ExecOptions::default(), [fd, fd, fd])
                        .unwrap()
                        .wait()
                        .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        codes,
        (0..8).collect::<Vec<i32>>(),
        "a write got through, or a code was lost"
    );
    let outcome = session.stop().unwrap();
    assert_eq!(
        (outcome.status, outcome.level),
        (Status::Stopped, Level::Full)
    );
    // Gone: attaching to it is an error naming it.
    let err = jail::Session::attach(&name).unwrap_err();
    assert!(matches!(err, JailError::UnknownSession { .. }), "{err}");
}
