//! Sessions (`jail session start`, `jail exec`, `session stop`), as root and as an
//! unprivileged user: a command exec'd into a session is confined exactly as a run's (the
//! attacks proven as `Attack::prove` proves them: blocked with every layer, by each claimed layer
//! alone, allowed with them off), the control socket cannot be reached from inside, exec
//! passes stdio, status, cwd, env and its timeout, and a session ends whole: on stop, and when
//! its supervisor is killed.

mod common;

use std::path::Path;
use std::time::Duration;

use Layer::{Landlock as L, Mount as M, Seccomp as S};
use common::{Fixture, Layer, Outsider, Run, Verdict, attack_bin, full_level_or_skip, users};

static NAMES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A session of a fixture's user; stopped when dropped.
struct Sess<'a> {
    fx: &'a Fixture,
    name: String,
    disabled: String,
    stopped: bool,
}

impl<'a> Sess<'a> {
    fn start(fx: &'a Fixture, flags: &[&str], disabled: &[Layer]) -> Sess<'a> {
        let name = format!(
            "t{}-{}",
            std::process::id(),
            NAMES.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        );
        let disabled: Vec<&str> = disabled.iter().map(|l| l.name()).collect();
        let disabled = disabled.join(",");
        let mut args = vec!["session", "start", "--name", &name];
        args.extend(flags);
        let run = Run::from(
            fx.command(common::jail_bin(), &args)
                .env("JAIL_TEST_DISABLE", &disabled)
                .output()
                .unwrap(),
        );
        assert!(run.ok(), "session start {flags:?}: {}", run.describe());
        assert_eq!(run.stdout.trim(), name, "{}", run.describe());
        Sess {
            fx,
            name,
            disabled,
            stopped: false,
        }
    }

    fn exec_with(&self, flags: &[&str], argv: &[&str]) -> Run {
        let mut args = vec!["exec", &self.name];
        args.extend(flags);
        args.push("--");
        args.extend(argv);
        Run::from(
            self.fx
                .command(common::jail_bin(), &args)
                .env("JAIL_TEST_DISABLE", &self.disabled)
                .output()
                .unwrap(),
        )
    }

    fn exec(&self, argv: &[&str]) -> Run {
        self.exec_with(&[], argv)
    }

    fn stop(mut self) -> Run {
        self.stopped = true;
        self.jail(&["session", "stop", &self.name])
    }

    /// Stops the session; what `session stop --json` printed.
    fn stop_json(mut self) -> serde_json::Value {
        self.stopped = true;
        let run = self.jail(&["session", "stop", &self.name, "--json"]);
        serde_json::from_str(&run.stdout).unwrap_or_else(|_| panic!("{}", run.describe()))
    }

    fn jail(&self, args: &[&str]) -> Run {
        Run::from(self.fx.command(common::jail_bin(), args).output().unwrap())
    }

    /// The supervisor's pid, from `session list --json`.
    fn supervisor(&self) -> u32 {
        let run = self.jail(&["session", "list", "--json"]);
        let v: serde_json::Value =
            serde_json::from_str(&run.stdout).unwrap_or_else(|_| panic!("{}", run.describe()));
        let s = v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == self.name.as_str())
            .unwrap_or_else(|| panic!("{} not listed: {}", self.name, run.describe()));
        s["pid"].as_u64().unwrap() as u32
    }
}

impl Drop for Sess<'_> {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.jail(&["session", "stop", &self.name]);
        }
    }
}

fn a() -> String {
    attack_bin().to_string_lossy().into_owned()
}

/// An attack's verdict through a session started with `disabled` layers off.
fn attack_in_session(fx: &Fixture, flags: &[String], argv: &[String], off: &[Layer]) -> Verdict {
    let mut flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    if off.contains(&M) && off.contains(&L) {
        flags.push("--allow-unconfined");
    }
    let s = Sess::start(fx, &flags, off);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let run = s.exec(&argv);
    common::verdict(&run)
}

/// `Attack::prove` through sessions: blocked with every layer, by each listed layer alone,
/// allowed with all of them off.
fn prove_in_session(name: &str, fx: &Fixture, argv: Vec<String>, blockers: &[Layer]) {
    let flags = fx.ro_flags();
    let who = fx.who;
    assert_eq!(
        attack_in_session(fx, &flags, &argv, &[]),
        Verdict::Blocked,
        "{name} as {who:?}: not blocked in a full session"
    );
    if blockers.len() > 1 {
        for only in blockers {
            let off: Vec<Layer> = blockers.iter().copied().filter(|l| l != only).collect();
            assert_eq!(
                attack_in_session(fx, &flags, &argv, &off),
                Verdict::Blocked,
                "{name} as {who:?}: the {} layer alone does not block it in a session",
                only.name()
            );
        }
    }
    assert_eq!(
        attack_in_session(fx, &flags, &argv, blockers),
        Verdict::Allowed,
        "{name} as {who:?}: still blocked with {blockers:?} off, so this test cannot fail"
    );
    common::restore_quarantined(&fx.dir);
    let _ = std::fs::write(fx.repo.join("file.txt"), "original\n");
}

#[test]
fn attacks_through_exec_are_blocked_as_in_a_run() {
    if !full_level_or_skip("session-attacks") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "session-attacks");
        let file = fx.p("repo/file.txt");
        for op in ["write", "truncate"] {
            prove_in_session(op, &fx, vec![a(), op.into(), file.clone()], &[M, L]);
        }
        let key = fx.home.join(".ssh/id_ed25519");
        let key = key.to_string_lossy().into_owned();
        prove_in_session(
            "read a hidden key",
            &fx,
            vec![a(), "read".into(), key],
            &[M, L],
        );
        let outsider = Outsider::spawn(who);
        let pid = outsider.pid();
        prove_in_session(
            "ptrace a host process",
            &fx,
            vec![a(), "ptrace".into(), pid.clone()],
            &[S, L, M],
        );
        prove_in_session(
            "signal a host process",
            &fx,
            vec![a(), "kill".into(), pid, "18".into()],
            &[L, M],
        );
    }
}

#[test]
fn exec_passes_stdio_status_cwd_env_and_its_timeout() {
    if !full_level_or_skip("session-exec") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "session-exec");
        let flags = fx.ro_flags();
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let s = Sess::start(&fx, &flags, &[]);
        let run = s.exec(&["sh", "-c", "echo out; echo err >&2; exit 7"]);
        assert_eq!(run.code, Some(7), "{}", run.describe());
        assert_eq!(
            (run.stdout.as_str(), run.stderr.as_str()),
            ("out\n", "err\n")
        );
        let run = s.exec(&["sh", "-c", "kill -TERM $$"]);
        assert_eq!(run.code, Some(128 + 15), "{}", run.describe());
        let run = s.exec(&["no-such-command-here"]);
        assert_eq!(run.code, Some(127), "{}", run.describe());
        assert!(
            run.stderr.contains("command not found"),
            "{}",
            run.describe()
        );
        let run = s.exec(&[&fx.p("repo/file.txt")]);
        assert_eq!(run.code, Some(126), "{}", run.describe());
        let run = s.exec_with(&["--timeout", "0.3s"], &["sleep", "30"]);
        assert_eq!(run.code, Some(124), "{}", run.describe());
        let run = s.exec_with(&["--cwd", "repo/sub"], &["sh", "-c", "pwd; cat keep"]);
        assert_eq!(
            run.stdout,
            format!("{}\nx\n", fx.p("repo/sub")),
            "{}",
            run.describe()
        );
        let run = s.exec_with(&["--env", "K=v 1"], &["sh", "-c", "echo \"$K|$JAIL\""]);
        assert_eq!(run.stdout, "v 1|1\n", "{}", run.describe());
        // The session's own variables are not the caller's to set: `jail status` reads them.
        let run = s.exec_with(&["--env", "JAIL_POLICY=/tmp/forged"], &["true"]);
        assert_eq!(run.code, Some(125), "{}", run.describe());
        // stdin is the caller's.
        let mut cmd = fx.command(
            common::jail_bin(),
            &["exec", &s.name, "--", "tr", "a-z", "A-Z"],
        );
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(b"piped\n").unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "PIPED\n");
        // Many at once.
        let runs: Vec<Run> = std::thread::scope(|scope| {
            let hs: Vec<_> = (0..8)
                .map(|i| {
                    let s = &s;
                    scope.spawn(move || s.exec(&["sh", "-c", &format!("sleep 0.2; exit {i}")]))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (i, run) in runs.iter().enumerate() {
            assert_eq!(run.code, Some(i as i32), "{}", run.describe());
        }
        let name = s.name.clone();
        let stop = s.stop();
        assert!(stop.ok(), "{}", stop.describe());
        // Ended: an exec now names the session as unknown.
        let run = Run::from(
            fx.command(common::jail_bin(), &["exec", &name, "--", "true"])
                .output()
                .unwrap(),
        );
        assert_eq!(run.code, Some(125), "{}", run.describe());
    }
}

#[test]
fn an_unknown_or_ended_session_is_exit_125_with_its_name() {
    for who in users() {
        let fx = Fixture::new(who, "session-unknown");
        let run = Run::from(
            fx.command(
                common::jail_bin(),
                &["exec", "no-such-session", "--", "true"],
            )
            .output()
            .unwrap(),
        );
        assert_eq!(run.code, Some(125), "{}", run.describe());
        assert!(
            run.stderr.contains("session no-such-session"),
            "{}",
            run.describe()
        );
        let run = Run::from(
            fx.command(common::jail_bin(), &["session", "start", "--name", "../x"])
                .output()
                .unwrap(),
        );
        assert_eq!(run.code, Some(125), "{}", run.describe());
    }
}

/// The control socket's directory is hidden in every view (also with the host's /tmp), and a
/// caller in another pid namespace is refused even where it can see the socket.
#[test]
fn the_control_socket_is_out_of_reach_from_inside() {
    if !full_level_or_skip("session-socket") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "session-socket");
        let flags = ["--tmp", "host", "--allow-unix-sockets"];
        let s = Sess::start(&fx, &flags, &[]);
        // In jail's state directory (no XDG_RUNTIME_DIR here), which every run hides.
        let sock = fx
            .home
            .join(format!(".local/state/jail/sessions/{}.sock", s.name))
            .to_string_lossy()
            .into_owned();
        assert!(
            std::path::Path::new(&sock).exists(),
            "the test expects the socket at {sock}"
        );
        let connect = format!(
            "import socket; s=socket.socket(socket.AF_UNIX); s.connect('{sock}'); print('CONNECTED')"
        );
        let run = s.exec(&["python3", "-c", &connect]);
        assert!(
            !run.stdout.contains("CONNECTED") && run.code == Some(1),
            "connected from inside: {}",
            run.describe()
        );
        // The same connect from outside works: the check can fail.
        let out = fx
            .command(
                std::path::Path::new("/usr/bin/env"),
                &["python3", "-c", &connect],
            )
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&out.stdout).contains("CONNECTED"));
        // A caller in another pid namespace (as every jail's tree is), the socket in view.
        if common::is_root() && who == common::Who::Root {
            let jail = common::jail_bin().to_string_lossy().into_owned();
            let out = std::process::Command::new("unshare")
                .args(["--pid", "--fork", &jail, "exec", &s.name, "--", "true"])
                .env_remove("XDG_RUNTIME_DIR")
                .env("HOME", &fx.home)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(125), "{err}");
            assert!(err.contains("another pid namespace"), "{err}");
        }
        // And a nested jail run cannot use it either.
        let run = s.exec(&["true"]);
        assert!(run.ok(), "{}", run.describe());
    }
}

#[test]
fn stop_and_a_killed_supervisor_end_every_process() {
    if !full_level_or_skip("session-end") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "session-end");
        for kill_supervisor in [false, true] {
            let s = Sess::start(&fx, &[], &[]);
            let marker = format!("jail-sess-{}-{who:?}-{kill_supervisor}", std::process::id());
            let run = s.exec(&[&a(), "daemon", &marker]);
            assert!(run.stdout.contains("ALLOWED daemon"), "{}", run.describe());
            assert!(
                !common::processes_with(&marker).is_empty(),
                "the daemon should live while the session does"
            );
            let sleeper = format!("exec -a {marker}-bg sleep 300");
            let bg = format!("({sleeper}) >/dev/null 2>&1 </dev/null & exit 0");
            let run = s.exec(&["bash", "-c", &bg]);
            assert!(run.ok(), "{}", run.describe());
            common::wait_for("the background sleep", Duration::from_secs(5), || {
                common::processes_with(&format!("{marker}-bg")).len() == 1
            });
            let name = s.name.clone();
            if kill_supervisor {
                let pid = s.supervisor();
                std::process::Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .status()
                    .unwrap();
                common::wait_for(
                    "the session's processes to end",
                    Duration::from_secs(10),
                    || common::processes_with(&marker).is_empty(),
                );
                // The next session call finds it dead and cleans it up.
                let run = s.jail(&["exec", &name, "--", "true"]);
                assert_eq!(run.code, Some(125), "{}", run.describe());
                let list = s.jail(&["session", "list"]);
                assert!(!list.stdout.contains(&name), "{}", list.describe());
                std::mem::forget(s);
            } else {
                let stop = s.stop();
                assert!(stop.ok(), "{}", stop.describe());
                assert!(
                    common::processes_with(&marker).is_empty(),
                    "a process of the session outlived its stop"
                );
            }
        }
    }
}

#[test]
fn an_idle_session_stops_and_a_cow_session_hands_its_writes_back_as_a_run() {
    if !full_level_or_skip("session-idle-cow") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "session-idle-cow");
        let s = Sess::start(&fx, &["--idle-timeout", "0.4s"], &[]);
        let run = s.exec(&["true"]);
        assert!(run.ok(), "{}", run.describe());
        let name = s.name.clone();
        common::wait_for("the idle session to stop", Duration::from_secs(10), || {
            !s.jail(&["session", "list"]).stdout.contains(&name)
        });
        let run = s.exec(&["true"]);
        assert_eq!(run.code, Some(125), "{}", run.describe());
        std::mem::forget(s);

        // Two --cow sessions on one tree: neither sees the other's writes, the host sees none
        // until the run is applied.
        let repo = fx.p("repo");
        let one = Sess::start(&fx, &["--cow", &repo], &[]);
        let two = Sess::start(&fx, &["--cow", &repo], &[]);
        let file = fx.p("repo/file.txt");
        let run = one.exec(&["sh", "-c", &format!("echo from-one > {file}; cat {file}")]);
        assert_eq!(run.stdout, "from-one\n", "{}", run.describe());
        let run = two.exec(&["cat", &file]);
        assert_eq!(run.stdout, "original\n", "{}", run.describe());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "original\n");
        let stop = one.stop();
        assert!(stop.ok(), "{}", stop.describe());
        drop(two);
        let runs = Run::from(
            fx.command(common::jail_bin(), &["runs", "--json"])
                .output()
                .unwrap(),
        );
        let id = serde_json::from_str::<serde_json::Value>(&runs.stdout)
            .ok()
            .and_then(|v| {
                let list = v.as_array().or(v["runs"].as_array())?.clone();
                list.iter().find_map(|r| {
                    let diff = Run::from(
                        fx.command(common::jail_bin(), &["diff", r["id"].as_str()?])
                            .output()
                            .ok()?,
                    );
                    diff.stdout
                        .contains("+from-one")
                        .then(|| r["id"].as_str().unwrap().to_string())
                })
            })
            .unwrap_or_else(|| panic!("no run with the session's write: {}", runs.describe()));
        let apply = Run::from(
            fx.command(common::jail_bin(), &["apply", &id])
                .output()
                .unwrap(),
        );
        assert!(apply.ok(), "{}", apply.describe());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "from-one\n");
    }
}

/// A `--cow` session's report and event stream say which exec changed what: each exec's span,
/// its exit code, the paths that changed while it ran, and whether another ran beside it (then a
/// change names every exec running when it was seen). The stream's lines come from outside the
/// sandbox (the layer, watched by the supervisor): an exec's change is seen before its end.
#[test]
fn a_cow_sessions_report_and_events_say_which_exec_wrote_what() {
    if !full_level_or_skip("session-attribution") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "session-attribution");
        let (repo, events) = (fx.p("repo"), fx.p("events.jsonl"));
        let s = Sess::start(&fx, &["--cow", &repo, "--events", &events], &[]);
        let path = |name: &str| fx.p(&format!("repo/{name}"));
        let run = s.exec(&["sh", "-c", &format!("echo 1 > {}", path("one.txt"))]);
        assert!(run.ok(), "{}", run.describe());
        let run = s.exec(&[
            "sh",
            "-c",
            &format!("echo 2 >> {}; exit 3", path("file.txt")),
        ]);
        assert_eq!(run.code, Some(3), "{}", run.describe());
        // Two at once: the slow one writes after the quick one has ended.
        let slow = format!("sleep 1; echo 3 > {}", path("three.txt"));
        let mut args = vec!["exec", &s.name, "--", "sh", "-c", &slow];
        let mut background = fx.command(common::jail_bin(), &args).spawn().unwrap();
        common::wait_for("the slow exec to start", Duration::from_secs(10), || {
            std::fs::read_to_string(&events).is_ok_and(|t| t.contains("sleep 1"))
        });
        args.truncate(3);
        args.push("true");
        let run = Run::from(fx.command(common::jail_bin(), &args).output().unwrap());
        assert!(run.ok(), "{}", run.describe());
        assert!(background.wait().unwrap().success());
        // A process an exec leaves behind writes while a later exec runs alone: that exec is
        // not `alone` (the change is not surely its own).
        let leave = format!(
            "setsid sh -c 'sleep 0.5; echo late > {}' </dev/null >/dev/null 2>&1 &",
            path("late.txt")
        );
        let run = s.exec(&["sh", "-c", &leave]);
        assert!(run.ok(), "{}", run.describe());
        let run = s.exec(&["sleep", "1.5"]);
        assert!(run.ok(), "{}", run.describe());

        let (dir, name) = (session_dir(&fx, &s.name), s.name.clone());
        let stop = s.stop_json();
        // Nothing of the session is left in its directory, its lock file included.
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{name}."))
            })
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "{left:?}");
        // The layer waits as a run the outcome names.
        let id = stop["cow_run"]
            .as_str()
            .unwrap_or_else(|| panic!("{stop:#}"));
        let diff = Run::from(
            fx.command(common::jail_bin(), &["diff", id])
                .output()
                .unwrap(),
        );
        assert!(diff.stdout.contains("three.txt"), "{}", diff.describe());
        let execs = &stop["report"]["execs"];
        assert_eq!(execs["total"], 6, "{stop:#}");
        let item = |needle: &str| -> &serde_json::Value {
            execs["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|i| i["command"].to_string().contains(needle))
                .unwrap_or_else(|| panic!("no exec of {needle}: {stop:#}"))
        };
        let wrote = |i: &serde_json::Value| i["wrote"].clone();
        let (one, two) = (item("one.txt"), item("file.txt"));
        let (three, quick) = (item("three.txt"), item("\"true\""));
        assert_eq!(wrote(one), serde_json::json!([path("one.txt")]), "{stop:#}");
        assert_eq!(
            wrote(two),
            serde_json::json!([path("file.txt")]),
            "{stop:#}"
        );
        assert_eq!(
            wrote(three),
            serde_json::json!([path("three.txt")]),
            "{stop:#}"
        );
        assert_eq!(wrote(quick), serde_json::json!([]), "{stop:#}");
        assert_eq!(
            (one["alone"].clone(), two["alone"].clone()),
            (true.into(), true.into())
        );
        assert_eq!(
            (three["alone"].clone(), quick["alone"].clone()),
            (false.into(), false.into())
        );
        assert_eq!(
            (one["exit_code"].clone(), two["exit_code"].clone()),
            (0.into(), 3.into())
        );
        let after = item("\"1.5\"");
        assert_eq!(
            wrote(after),
            serde_json::json!([path("late.txt")]),
            "{stop:#}"
        );
        assert_eq!(after["alone"], false, "{stop:#}");

        // The stream: each change names the exec that ran then, before that exec's end.
        let lines: Vec<serde_json::Value> = std::fs::read_to_string(&events)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        for (file, exec) in [("one.txt", one), ("file.txt", two), ("three.txt", three)] {
            let at = |want: &dyn Fn(&serde_json::Value) -> bool| {
                lines
                    .iter()
                    .position(want)
                    .unwrap_or_else(|| panic!("{file}: no such line in {lines:#?}"))
            };
            let wrote = at(&|l| l["event"] == "wrote" && l["path"] == path(file).as_str());
            let ended = at(&|l| l["event"] == "exec_end" && l["exec"] == exec["id"]);
            assert_eq!(
                lines[wrote]["execs"],
                serde_json::json!([exec["id"]]),
                "{file}"
            );
            assert!(wrote < ended, "{file}: {lines:#?}");
        }
    }
}

/// The caller's signals reach the command's process group, and a terminal the caller has is the
/// command's terminal too.
#[test]
fn exec_passes_signals_and_a_terminal_on() {
    if !full_level_or_skip("session-signals") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "session-signals");
        let s = Sess::start(&fx, &[], &[]);
        // The command traps TERM and says so: only a signal that reached its group does that.
        let script = "trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 0.05; done";
        let mut cmd = fx.command(
            common::jail_bin(),
            &["exec", &s.name, "--", "bash", "-c", script],
        );
        cmd.stdout(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        assert_eq!(line, "ready\n");
        std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
        let status = child.wait().unwrap();
        assert_eq!((rest.as_str(), status.code()), ("got-term\n", Some(3)));
        // Under a terminal: `script` gives the caller one.
        let jail = common::jail_bin().to_string_lossy().into_owned();
        let line = format!(
            "{jail} exec {} -- sh -c 'test -t 0 && test -t 1 && echo TTY'",
            s.name
        );
        let run = Run::from(
            fx.command(
                std::path::Path::new("/usr/bin/script"),
                &["-qec", &line, "/dev/null"],
            )
            .output()
            .unwrap(),
        );
        assert!(run.stdout.contains("TTY"), "{}", run.describe());
        let run = s.exec(&["sh", "-c", "test -t 0 || echo NOTTY"]);
        assert!(
            run.stdout.contains("NOTTY"),
            "the check cannot fail: {}",
            run.describe()
        );
    }
}

/// What a command of a session cannot do to the exec around it: stop its monitor to outlast
/// `--timeout`, leave a TERM-proof process in its group, or see the starter's ignored signals,
/// umask or a path to the host's mounts through `--cwd /proc/self/fd/N`.
#[test]
fn an_exec_holds_its_timeout_and_the_callers_settings_against_its_command() {
    if !full_level_or_skip("session-hold") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "session-hold");
        let s = Sess::start(&fx, &["--rw", &fx.p("scratch")], &[]);
        // The monitor stopped: the supervisor kills the command's group itself.
        let marker = format!("jail-hold-{}-{who:?}", std::process::id());
        let script = format!("kill -STOP $PPID; exec -a {marker} sleep 60");
        let t = std::time::Instant::now();
        let run = s.exec_with(&["--timeout", "0.5s"], &["bash", "-c", &script]);
        assert_eq!(run.code, Some(124), "{}", run.describe());
        assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
        common::wait_for(
            "the stopped exec's command to die",
            Duration::from_secs(5),
            || common::processes_with(&marker).is_empty(),
        );
        // A process of the group that ignores TERM gets the SIGKILL after the grace, also when
        // the group's leader ended at the TERM.
        let script = format!("(trap '' TERM; exec -a {marker}-2 sleep 60) & sleep 60");
        let run = s.exec_with(&["--timeout", "0.3s"], &["bash", "-c", &script]);
        assert_eq!(run.code, Some(124), "{}", run.describe());
        common::wait_for(
            "the TERM-proof process to die",
            Duration::from_secs(6),
            || common::processes_with(&format!("{marker}-2")).is_empty(),
        );
        // The command kills its monitor at the TERM: what is left of its group is still killed
        // from outside after the grace.
        let script = format!(
            "(trap '' TERM; exec -a {marker}-3 sleep 60) >/dev/null 2>&1 & \
             trap 'kill -9 $PPID' TERM; \
             while :; do sleep 0.1; done"
        );
        let run = s.exec_with(&["--timeout", "0.3s"], &["bash", "-c", &script]);
        assert_eq!(run.code, Some(124), "{}", run.describe());
        common::wait_for(
            "the monitor-killer's group to die",
            Duration::from_secs(6),
            || common::processes_with(&format!("{marker}-3")).is_empty(),
        );
        // The caller killed: nobody waits for the command, which ends as a stopped run's does,
        // SIGKILL after the grace for a TERM-proof one; and the supervisor does not spin on the
        // caller's closed socket meanwhile.
        let script = format!("trap '' TERM; exec -a {marker}-4 sleep 60");
        let mut caller = fx.command(
            common::jail_bin(),
            &["exec", &s.name, "--", "bash", "-c", &script],
        );
        let mut caller = caller.spawn().unwrap();
        common::wait_for("the TERM-proof command", Duration::from_secs(5), || {
            !common::processes_with(&format!("{marker}-4")).is_empty()
        });
        caller.kill().unwrap();
        caller.wait().unwrap();
        let cpu_before = cpu_ticks(s.supervisor());
        let gone = std::time::Instant::now();
        common::wait_for(
            "the killed caller's command to die",
            Duration::from_secs(6),
            || common::processes_with(&format!("{marker}-4")).is_empty(),
        );
        let spent = cpu_ticks(s.supervisor()) - cpu_before;
        let ticks = (gone.elapsed().as_secs_f64() * 100.0) as u64;
        assert!(
            spent * 2 < ticks.max(20),
            "the supervisor spent {spent} of {ticks} ticks while the command ended"
        );
        // The caller's umask, whatever the starter's was.
        let file = fx.p("scratch/made");
        let jail = common::jail_bin().to_string_lossy().into_owned();
        let out = fx
            .command(
                Path::new("/bin/sh"),
                &[
                    "-c",
                    &format!("umask 077; {jail} exec {} -- touch {file}", s.name),
                ],
            )
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // A directory passed as stdin is no way out of the view.
        let out = fx
            .command(
                Path::new("/bin/sh"),
                &[
                    "-c",
                    &format!("{jail} exec {} --cwd /proc/self/fd/0 -- ls < /", s.name),
                ],
            )
            .output()
            .unwrap();
        let root_listing = String::from_utf8_lossy(&out.stdout);
        let run = s.exec(&["ls", "/"]);
        assert!(
            out.status.code() == Some(125) || root_listing == run.stdout,
            "--cwd through a magic link: {out:?}"
        );
    }
}

/// Signals the starter ignored (a session started under nohup) are not the commands'.
#[test]
fn a_session_started_with_ignored_signals_gives_its_commands_clean_ones() {
    if !full_level_or_skip("session-sigign") {
        return;
    }
    let fx = Fixture::new(users()[0], "session-sigign");
    let name = format!("sigign-{}", std::process::id());
    let jail = common::jail_bin().to_string_lossy().into_owned();
    let out = fx
        .command(
            Path::new("/bin/sh"),
            &[
                "-c",
                &format!("trap '' INT HUP QUIT; exec {jail} session start --name {name}"),
            ],
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let run = Run::from(
        fx.command(
            common::jail_bin(),
            &["exec", &name, "--", "grep", "SigIgn", "/proc/self/status"],
        )
        .output()
        .unwrap(),
    );
    let _ = fx
        .command(common::jail_bin(), &["session", "stop", &name])
        .output();
    assert!(
        run.stdout.contains("0000000000000000"),
        "{}",
        run.describe()
    );
}

/// Two starts of one name at once: one session, the other start refused; and a process of
/// another pid namespace answering on a session's socket is not taken for its supervisor.
#[test]
fn one_supervisor_per_name_and_no_impostor_answers() {
    if !full_level_or_skip("session-lock") {
        return;
    }
    let fx = Fixture::new(users()[0], "session-lock");
    let name = format!("lock-{}", std::process::id());
    let starts: Vec<Run> = std::thread::scope(|scope| {
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let (fx, name) = (&fx, &name);
                scope.spawn(move || {
                    Run::from(
                        fx.command(common::jail_bin(), &["session", "start", "--name", name])
                            .output()
                            .unwrap(),
                    )
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ok = starts.iter().filter(|r| r.ok()).count();
    let list = Run::from(
        fx.command(common::jail_bin(), &["session", "list", "--json"])
            .output()
            .unwrap(),
    );
    let listed = list.stdout.matches(&format!("\"{name}\"")).count();
    let stop = Run::from(
        fx.command(common::jail_bin(), &["session", "stop", &name])
            .output()
            .unwrap(),
    );
    assert_eq!((ok, listed), (1, 1), "{starts:?}\n{}", list.describe());
    assert!(stop.ok(), "{}", stop.describe());
    assert!(
        common::processes_running("jail-session").is_empty()
            || !Run::from(
                fx.command(common::jail_bin(), &["session", "list"])
                    .output()
                    .unwrap()
            )
            .stdout
            .contains(&name),
        "an orphaned supervisor of {name} is left"
    );
    // An impostor: a process of another pid namespace bound on the socket's name.
    if !common::is_root() {
        return;
    }
    let sock = fx
        .home
        .join(format!(".local/state/jail/sessions/{name}.sock"));
    let fake = format!(
        "import socket,os; s=socket.socket(socket.AF_UNIX); s.bind('{}'); s.listen(); \
         print('up', flush=True); c,_=s.accept(); c.recv(1); c.sendall(b'C\\x04\\x00\\x00\\x00\\x00\\x00\\x00\\x00'); c.close()",
        sock.display()
    );
    let mut imp = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "python3", "-c", &fake])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(imp.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let run = Run::from(
        fx.command(common::jail_bin(), &["exec", &name, "--", "true"])
            .output()
            .unwrap(),
    );
    let _ = imp.kill();
    let _ = imp.wait();
    let _ = std::fs::remove_file(&sock);
    assert_eq!(run.code, Some(125), "{}", run.describe());
    assert!(
        run.stderr.contains("not its supervisor"),
        "{}",
        run.describe()
    );
}

/// A caller more confined than the supervisor (here only no_new_privs, as every jail sets) is
/// inside something the supervisor is not: refused, as root and as an unprivileged user.
#[test]
fn a_caller_more_confined_than_the_session_is_refused() {
    if !full_level_or_skip("session-confined-caller") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "session-confined-caller");
        let s = Sess::start(&fx, &[], &[]);
        let jail = common::jail_bin().to_string_lossy().into_owned();
        let mut args: Vec<String> = Vec::new();
        if common::is_root() && who == common::Who::User {
            let uid = common::uid_of(who);
            args.extend([
                format!("--reuid={uid}"),
                format!("--regid={uid}"),
                "--clear-groups".into(),
            ]);
        }
        let run_as = |nnp: bool, jail_args: &[&str]| {
            let mut a = args.clone();
            if nnp {
                a.push("--no-new-privs".into());
            }
            a.push(jail.clone());
            a.extend(jail_args.iter().map(|x| x.to_string()));
            Run::from(
                std::process::Command::new("setpriv")
                    .args(&a)
                    .current_dir(&fx.dir)
                    .env("HOME", &fx.home)
                    .env_remove("XDG_RUNTIME_DIR")
                    .output()
                    .unwrap(),
            )
        };
        let run = |nnp: bool| run_as(nnp, &["exec", &s.name, "--", "true"]);
        let refused = run(true);
        assert_eq!(refused.code, Some(125), "{}", refused.describe());
        assert!(
            refused.stderr.contains("more confined"),
            "{}",
            refused.describe()
        );
        // A refused stop is a refusal, never the session's end, even with an end file there
        // (as an earlier session of the name may leave one): the session goes on.
        let end = Path::new(&session_dir(&fx, &s.name)).join(format!("{}.end.json", s.name));
        let fake = r#"{"ended":{"status":"stopped","exit_code":0,"level":"full","gaps":[]}}"#;
        let planted = Run::from(
            fx.command(
                Path::new("/bin/sh"),
                &["-c", "printf %s \"$1\" > \"$2\"", "sh", fake],
            )
            .arg(&end)
            .output()
            .unwrap(),
        );
        assert!(planted.ok(), "{}", planted.describe());
        let stop = run_as(true, &["session", "stop", &s.name]);
        assert_eq!(stop.code, Some(125), "{}", stop.describe());
        assert!(stop.stderr.contains("more confined"), "{}", stop.describe());
        // The same caller without no_new_privs is served: the check can fail.
        let served = run(false);
        assert!(served.ok(), "{}", served.describe());
    }
}

/// User and system CPU time a process has spent, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command name in parentheses: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// The directory that holds session `name`'s socket: the user's runtime directory's, else the
/// state directory's (the fixture's commands name no XDG_RUNTIME_DIR).
fn session_dir(fx: &Fixture, name: &str) -> String {
    let uid = common::uid_of(fx.who);
    let candidates = [
        format!("/run/user/{uid}/jail-sessions"),
        format!("{}/.local/state/jail/sessions", fx.home.display()),
    ];
    candidates
        .into_iter()
        .find(|d| Path::new(d).join(format!("{name}.sock")).exists())
        .unwrap_or_else(|| panic!("no socket of {name}"))
}

/// One exec's leftover process against a later exec's command, in a session started with `off`
/// layers off: exec 1 leaves a process that waits for exec 2's pid and runs `attack` with
/// `args` (`PID` replaced by it); exec 2 waits for the attack's end. The attack's verdict and
/// what exec 2 printed.
fn leftover_against_a_later_exec(fx: &Fixture, args: &[&str], off: &[Layer]) -> (Verdict, String) {
    let flags = fx.ro_flags();
    let mut flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    if off.contains(&M) && off.contains(&L) {
        flags.push("--allow-unconfined");
    }
    let s = Sess::start(fx, &flags, off);
    let args: Vec<String> = args.iter().map(|a| a.replace("PID", "$p")).collect();
    let leftover = format!(
        "setsid sh -c 'while [ ! -s /tmp/x-target ]; do sleep 0.02; done; p=$(cat /tmp/x-target); \
         {} {} > /tmp/x-result.tmp 2>&1; mv /tmp/x-result.tmp /tmp/x-result' \
         </dev/null >/dev/null 2>&1 &",
        a(),
        args.join(" ")
    );
    let left = s.exec(&["sh", "-c", &leftover]);
    assert!(left.ok(), "{}", left.describe());
    // Its output goes through a pipe the command made, as an orchestrator's own pipe would be
    // (one the tests make as root, a user could not reopen through /proc in any case).
    let target = s.exec(&[
        "sh",
        "-c",
        "sh -c \"$1\" | cat",
        "sh",
        "echo $$ > /tmp/x-target.tmp; mv /tmp/x-target.tmp /tmp/x-target; i=0; \
         while [ ! -e /tmp/x-result ] && [ $i -lt 1000 ]; do sleep 0.02; i=$((i+1)); done; echo real",
    ]);
    let result = s.exec(&["cat", "/tmp/x-result"]);
    let verdict = if result.stdout.contains("ALLOWED ") {
        Verdict::Allowed
    } else if result.stdout.contains("BLOCKED ") {
        Verdict::Blocked
    } else {
        panic!(
            "attack {args:?} neither allowed nor blocked:\n{}\n{}",
            result.describe(),
            target.describe()
        )
    };
    (verdict, target.stdout)
}

/// A process one exec leaves behind cannot reach a later exec's processes (their output, memory,
/// environment, descriptors): each exec has a Landlock domain of its own, so an orchestrator's
/// `jail status` exec prints what jail says, not what a leftover writes into its stdout.
/// Proven as `Attack::prove` proves: blocked in a full session, by each claimed layer alone,
/// allowed with them off.
#[test]
fn a_process_one_exec_leaves_cannot_reach_a_later_exec() {
    if !full_level_or_skip("session-exec-domains") {
        return;
    }
    let attacks: [(&str, &[&str], &[Layer]); 6] = [
        ("write into its stdout", &["write", "/proc/PID/fd/1"], &[L]),
        ("read its environment", &["read", "/proc/PID/environ"], &[L]),
        ("open its memory", &["proc-mem", "PID"], &[L]),
        ("take its stdout", &["pidfd-getfd", "PID", "1"], &[S, L]),
        ("trace it", &["ptrace", "PID"], &[S, L]),
        ("write its memory", &["vm-write", "PID"], &[S, L]),
    ];
    for who in users() {
        let fx = Fixture::new(who, "session-exec-domains");
        for (name, args, blockers) in attacks {
            let (full, printed) = leftover_against_a_later_exec(&fx, args, &[]);
            assert_eq!(full, Verdict::Blocked, "{name} as {who:?}: not blocked");
            assert_eq!(
                printed, "real\n",
                "{name} as {who:?}: the later exec's output"
            );
            if blockers.len() > 1 {
                for only in blockers {
                    let off: Vec<Layer> = blockers.iter().copied().filter(|l| l != only).collect();
                    let (v, _) = leftover_against_a_later_exec(&fx, args, &off);
                    assert_eq!(
                        v,
                        Verdict::Blocked,
                        "{name} as {who:?}: the {} layer alone does not block it",
                        only.name()
                    );
                }
            }
            let (open, printed) = leftover_against_a_later_exec(&fx, args, blockers);
            assert_eq!(
                open,
                Verdict::Allowed,
                "{name} as {who:?}: still blocked with {blockers:?} off, so this test cannot fail"
            );
            if args[0] == "write" {
                assert!(printed.contains('x'), "the write landed: {printed:?}");
            }
        }
    }
}

/// What stays as it was: a later exec still signals what an earlier one left (an agent stops the
/// server it started) and moves files across directories; the session says whether its execs
/// are isolated.
#[test]
fn execs_still_signal_each_other_and_the_session_says_they_are_isolated() {
    if !full_level_or_skip("session-exec-signals") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "session-exec-signals");
        let s = Sess::start(&fx, &[], &[]);
        let left = s.exec(&[
            "sh",
            "-c",
            "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! > /tmp/sleeper",
        ]);
        assert!(left.ok(), "{}", left.describe());
        let stop = s.exec(&["sh", "-c", "kill $(cat /tmp/sleeper) && echo stopped"]);
        assert_eq!(stop.stdout, "stopped\n", "{}", stop.describe());
        // A Landlock layer refuses moving and linking across directories unless it grants
        // that right (REFER): the exec's own grants it everywhere the view shows.
        let moved = s.exec(&[
            "sh",
            "-c",
            "mkdir -p /tmp/a /tmp/b && echo x > /tmp/a/f && mv /tmp/a/f /tmp/b/f && \
             ln /tmp/b/f /tmp/a/g && mv /tmp/a /tmp/b/a && echo moved",
        ]);
        assert_eq!(moved.stdout, "moved\n", "{}", moved.describe());
        let list = s.jail(&["session", "list", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
        let me = v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == s.name.as_str())
            .cloned()
            .unwrap();
        assert_eq!(me["execs_isolated"], true, "{me}");
        drop(s);
        let shared = Sess::start(&fx, &["--allow-userns"], &[]);
        let list = shared.jail(&["session", "list"]);
        let line = list
            .stdout
            .lines()
            .find(|l| l.starts_with(&shared.name))
            .unwrap_or_else(|| panic!("{}", list.describe()))
            .to_string();
        assert!(line.contains("(not isolated)"), "{line}");
    }
}

/// In a session whose commands may create user namespaces (`--allow-userns`), `jail status`
/// answers "advisory" (exit 2), and a process an earlier exec left behind cannot turn that into
/// "confined" by killing status's probe children (signals between execs are allowed on
/// purpose), nor hold it by stopping them: a probe that did not finish proves nothing, never
/// "cannot create", and a stopped one is killed and reaped.
#[test]
fn a_killed_or_stopped_userns_probe_never_makes_status_say_confined() {
    if !full_level_or_skip("session-probe-kill") {
        return;
    }
    let killer = common::compile_helper("probe_killer");
    let killer = killer.to_string_lossy().into_owned();
    let jail = common::jail_bin().to_string_lossy().into_owned();
    for who in users() {
        let fx = Fixture::new(who, "session-probe-kill");
        for (signal, what) in [(libc::SIGKILL, "killed"), (libc::SIGSTOP, "stopped")] {
            let s = Sess::start(&fx, &["--allow-userns"], &[]);
            let honest = s.exec(&[&jail, "status"]);
            assert_eq!(honest.code, Some(2), "{}", honest.describe());
            let script =
                format!("setsid {killer} 30 /tmp/probe-hits {signal} </dev/null >/dev/null 2>&1 &");
            let left = s.exec(&["sh", "-c", &script]);
            assert!(left.ok(), "{}", left.describe());
            std::thread::sleep(Duration::from_millis(300));
            for _ in 0..6 {
                let r = s.exec_with(&["--timeout", "20s"], &[&jail, "status", "--json"]);
                assert!(
                    matches!(r.code, Some(1) | Some(2)),
                    "{who:?}: status with its probe {what}\n{}",
                    r.describe()
                );
            }
            // The attack landed (else this test proves nothing): children of status were hit.
            let hits = s.exec(&["sh", "-c", "cat /tmp/probe-hits 2>/dev/null | wc -l"]);
            let hits: u32 = hits.stdout.trim().parse().unwrap_or(0);
            assert!(hits > 0, "{who:?}: the leftover hit no probe ({what})");
        }
    }
}
