//! `--report` and `--summary`: each test runs the real binary, makes the command change, try and
//! fail, and checks the report says exactly that. Reports are checked against
//! schema/report-v1.json by a small validator (the keywords the schema uses).

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Fixture, Run, Who, assert_refused, full_level_or_skip, users};
use serde_json::Value;

fn read_report(path: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}\n{text}"));
    assert_schema(&v);
    v
}

fn schema() -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/report-v1.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[track_caller]
fn assert_schema(report: &Value) {
    let mut errors = Vec::new();
    validate(&schema(), report, "$", &mut errors);
    assert!(errors.is_empty(), "schema: {errors:#?}\n{report:#}");
}

/// The subset of JSON Schema the report schema uses: type, enum, required, properties,
/// additionalProperties: false, items.
fn validate(schema: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => false,
        });
        if !ok {
            errors.push(format!("{at}: {v} is not {types:?}"));
            return;
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum") {
        if !allowed.contains(v) {
            errors.push(format!("{at}: {v} not in {allowed:?}"));
        }
    }
    if let (Some(obj), Some(props)) = (v.as_object(), schema.get("properties")) {
        for req in schema["required"].as_array().into_iter().flatten() {
            let key = req.as_str().unwrap();
            if !obj.contains_key(key) {
                errors.push(format!("{at}: missing {key}"));
            }
        }
        for (k, val) in obj {
            match props.get(k) {
                Some(s) => validate(s, val, &format!("{at}.{k}"), errors),
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    errors.push(format!("{at}: undocumented field {k}"))
                }
                None => {}
            }
        }
    }
    if let (Some(arr), Some(items)) = (v.as_array(), schema.get("items")) {
        for (i, item) in arr.iter().enumerate() {
            validate(items, item, &format!("{at}[{i}]"), errors);
        }
    }
}

/// (kind, path relative to the fixture) of every change, sorted.
fn changes(report: &Value, fx: &Fixture) -> Vec<(String, String)> {
    let base = fx.dir.to_string_lossy().into_owned() + "/";
    let mut out: Vec<(String, String)> = report["changes"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["kind"].as_str().unwrap().to_string(),
                c["path"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches(&base)
                    .to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = list
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    v.sort();
    v
}

#[test]
fn the_report_lists_exactly_what_the_command_changed() {
    if !full_level_or_skip("report-changes") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "report-changes");
        for (name, text) in [
            ("edit", "1\n"),
            ("gone", "x\n"),
            ("exec", "#!/bin/sh\n"),
            ("same", "s\n"),
        ] {
            std::fs::write(fx.scratch.join(name), text).unwrap();
        }
        std::fs::create_dir(fx.scratch.join("olddir")).unwrap();
        std::fs::write(fx.scratch.join("olddir/inner"), "i\n").unwrap();
        fx.give_to(who);
        let report = fx.p("report.json");
        let s = fx.p("scratch");
        let script = format!(
            "echo 2 >> {s}/edit; rm {s}/gone; chmod 755 {s}/exec; echo new > {s}/new; \
             mkdir {s}/dir; echo f > {s}/dir/f; rm -r {s}/olddir; \
             echo x > {repo}/file.txt; exit 3",
            repo = fx.p("repo")
        );
        let run = fx.sh(
            &[
                "--ro",
                &fx.p("repo"),
                "--rw",
                &s,
                "--report",
                &report,
                "--summary",
            ],
            &script,
        );
        assert_eq!(run.code, Some(3), "{who:?}: {}", run.describe());
        let r = read_report(&report);
        assert_eq!(
            changes(&r, &fx),
            pairs(&[
                ("modified", "scratch/edit"),
                ("deleted", "scratch/gone"),
                ("mode_changed", "scratch/exec"),
                ("created", "scratch/new"),
                ("created", "scratch/dir"),
                ("created", "scratch/dir/f"),
                ("deleted", "scratch/olddir"),
                ("deleted", "scratch/olddir/inner"),
            ]),
            "{who:?}: {r:#}"
        );
        assert_eq!(r["outcome"]["status"], "exited");
        assert_eq!(r["outcome"]["exit_code"], 3);
        assert_eq!(r["level"], "full");
        assert_eq!(r["changes"]["roots"], serde_json::json!([s]));
        let summary = run
            .stderr
            .lines()
            .find(|l| l.contains("changed under"))
            .unwrap_or_else(|| panic!("{who:?}: no summary\n{}", run.describe()));
        assert!(
            summary.starts_with("jail: 8 files changed under"),
            "{summary}"
        );
        assert!(summary.contains("exit 3"), "{summary}");
        // The read-only project did not change, and is not reported.
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("file.txt")).unwrap(),
            "original\n"
        );
    }
}

#[test]
fn writes_under_ro_are_reported_as_denials_where_the_kernel_audits_them() {
    if !full_level_or_skip("report-denials") {
        return;
    }
    // The suite runs with --features test-hooks; clippy also builds it without. Audit is put
    // back as it was when the guard drops.
    #[cfg(feature = "test-hooks")]
    let _audit = common::AuditOn::new();
    for who in users() {
        let fx = Fixture::new(who, "report-denials");
        let f = fx.p("repo/src/main.rs");
        let script = format!("sed -i s/main/evil/ {f}; echo x > {}/new", fx.p("repo"));
        // Without the mount view Landlock is what refuses (Docker's case); with it, the
        // read-only mount refuses first and the kernel audits nothing (the report says so).
        for disabled in ["mount", ""] {
            let report = fx.p(&format!("report-{disabled}.json"));
            let flags = ["--ro", &fx.p("repo"), "--report", &report, "--summary"];
            let mut cmd = fx.command(common::jail_bin(), &flags);
            cmd.args(["--", "/bin/sh", "-c", &script])
                .env("JAIL_TEST_DISABLE", disabled);
            let run = Run::from(cmd.output().unwrap());
            let r = read_report(&report);
            let d = &r["denials"];
            assert_eq!(r["changes"]["items"], serde_json::json!([]), "{r:#}");
            assert_eq!(std::fs::read_to_string(&f).unwrap(), "fn main() {}\n");
            let what = format!("{who:?} disabled={disabled:?}");
            if who == Who::User {
                assert_eq!(d["available"], false, "{what}: {d:#}");
                assert!(
                    d["reason"].as_str().unwrap().contains("CAP_AUDIT_READ"),
                    "{what}: {d:#}"
                );
                continue;
            }
            assert_eq!(d["available"], true, "{what}: {d:#}");
            let items = d["items"].as_array().unwrap();
            if disabled == "mount" {
                let repo = fx.p("repo");
                let sed = items.iter().find(|i| i["command"] == "sed");
                let sh = items.iter().find(|i| i["command"] == "sh");
                for (name, item) in [("sed", sed), ("sh", sh)] {
                    let item = item.unwrap_or_else(|| panic!("{what}: no {name} denial: {d:#}"));
                    assert!(
                        item["path"].as_str().unwrap().starts_with(&repo),
                        "{what}: {item:#}"
                    );
                    assert!(item["operation"].as_str().unwrap().starts_with("fs."));
                }
                let summary = run.stderr.lines().find(|l| l.contains("denied, first:"));
                assert!(summary.is_some(), "{what}: {}", run.describe());
            } else {
                assert!(
                    d["note"].as_str().unwrap().contains("EROFS"),
                    "{what}: {d:#}"
                );
            }
        }
    }
}

#[test]
fn killed_timed_out_and_terminated_runs_still_write_a_report() {
    if !full_level_or_skip("report-ends") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "report-ends");
        for disabled in ["", "mount"] {
            let what = format!("{who:?} disabled={disabled:?}");
            let report = fx.p("t.json");
            let mut cmd = fx.command(
                common::jail_bin(),
                &["--timeout", "1", "--report", &report, "--", "sleep", "30"],
            );
            cmd.env("JAIL_TEST_DISABLE", disabled);
            let run = Run::from(cmd.output().unwrap());
            assert_eq!(run.code, Some(124), "{what}: {}", run.describe());
            let r = read_report(&report);
            assert_eq!(r["outcome"]["status"], "timeout", "{what}");
            assert_eq!(r["outcome"]["exit_code"], 124, "{what}");
            assert_eq!(r["outcome"]["bound"], "time", "{what}");
            assert_eq!(
                run.stderr
                    .matches("jail: the run reached its time bound (--timeout 1s)")
                    .count(),
                1,
                "{what}: {}",
                run.describe()
            );

            let report = fx.p("k.json");
            let mut cmd = fx.command(
                common::jail_bin(),
                &["--report", &report, "--", "/bin/sh", "-c", "kill -KILL $$"],
            );
            cmd.env("JAIL_TEST_DISABLE", disabled);
            let run = Run::from(cmd.output().unwrap());
            assert_eq!(run.code, Some(137), "{what}: {}", run.describe());
            let r = read_report(&report);
            assert_eq!(r["outcome"]["status"], "signaled", "{what}");
            assert_eq!(r["outcome"]["signal"], 9, "{what}");
            // A SIGKILL that no bound sent is the command's own end: nothing said.
            assert_eq!(r["outcome"]["bound"], serde_json::Value::Null, "{what}");
            assert!(
                !run.stderr.contains("the run reached its"),
                "{what}: {}",
                run.describe()
            );
        }
        // SIGTERM to jail itself (docker stop, a CI runner cancelling): passed on, reported.
        let report = fx.p("term.json");
        // A length of sleep no other process has: the command is seen started, not assumed.
        let secs = format!("3{:04}", std::process::id() % 10000);
        let mut cmd = fx.command(
            common::jail_bin(),
            &["--report", &report, "--", "sleep", &secs],
        );
        let mut child = cmd.spawn().unwrap();
        common::wait_for("the command to start", Duration::from_secs(60), || {
            !common::processes_running(&format!("sleep {secs}")).is_empty()
        });
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(143), "{who:?}");
        let r = read_report(&report);
        assert_eq!(r["outcome"]["signal"], 15, "{who:?}: {r:#}");
        assert!(r["resources"]["processes_started"].as_u64().unwrap() >= 1);
    }
}

#[test]
fn the_report_cannot_be_written_or_replaced_from_inside() {
    if !full_level_or_skip("report-forge") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "report-forge");
        let report = fx.p("report.json");
        let s = fx.p("scratch");
        let forge = format!(
            "echo forged > {report}; rm -f {report}; ln -sf /etc/passwd {report}; \
             mv {s}/movable {report}; true"
        );
        for disabled in ["", "mount"] {
            let mut cmd = fx.command(
                common::jail_bin(),
                &[
                    "--rw", &s, "--report", &report, "--", "/bin/sh", "-c", &forge,
                ],
            );
            cmd.env("JAIL_TEST_DISABLE", disabled);
            let run = Run::from(cmd.output().unwrap());
            assert_eq!(run.code, Some(0), "{who:?}: {}", run.describe());
            let meta = std::fs::symlink_metadata(&report).unwrap();
            assert!(meta.is_file(), "{who:?} {disabled:?}: replaced");
            let r = read_report(&report);
            assert_eq!(r["schema"], "jail-run-report/1");
        }
        // A place the command can write is refused before anything runs.
        let inside = fx.p("scratch/report.json");
        let run = fx.jail(&[
            "--rw", &s, "--report", &inside, "--", "/bin/sh", "-c", "echo RAN",
        ]);
        assert_refused(&run, "report under --rw", &["--report", "writable inside"]);
        let run = fx.jail(&[
            "--tmp",
            "host",
            "--report",
            "/tmp/jail-report.json",
            "--",
            "/bin/sh",
            "-c",
            "echo RAN",
        ]);
        assert_refused(&run, "report under a shared /tmp", &["--report", "/tmp"]);
        // Without the mount view /tmp is the host's, shared with the command: whether that is
        // known before the start (forced here) or only when the namespaces fail at the start
        // (Docker's seccomp profile, reproduced by the docker_seccomp helper).
        let tmp_report = format!("/tmp/jail-report-{}.json", std::process::id());
        let args = [
            "--report",
            tmp_report.as_str(),
            "--",
            "/bin/sh",
            "-c",
            "echo RAN",
        ];
        let mut cmd = fx.command(common::jail_bin(), &args);
        cmd.env("JAIL_TEST_DISABLE", "mount");
        let run = Run::from(cmd.output().unwrap());
        assert_refused(
            &run,
            "report in /tmp without a mount view",
            &["--report", "/tmp"],
        );
        let docker = common::compile_helper("docker_seccomp");
        let mut argv = vec![common::jail_bin().to_string_lossy().into_owned()];
        argv.extend(args.iter().map(|a| a.to_string()));
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let run = Run::from(fx.command(&docker, &argv).output().unwrap());
        assert_refused(
            &run,
            "report in /tmp after the fallback",
            &["--report", "/tmp"],
        );
        assert!(
            !Path::new(&tmp_report).exists(),
            "a refused report file was left behind"
        );
        // Not a file of its own: a FIFO would hang the launch, a hard link's other name would be
        // overwritten.
        let fifo = fx.p("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let run = fx.jail(&["--report", &fifo, "--", "/bin/sh", "-c", "echo RAN"]);
        assert_refused(
            &run,
            "report on a FIFO",
            &["--report", "not a regular file"],
        );
        let precious = fx.p("repo/file.txt");
        let link = fx.p("link.json");
        std::fs::hard_link(&precious, &link).unwrap();
        let run = fx.jail(&["--report", &link, "--", "/bin/sh", "-c", "echo RAN"]);
        assert_refused(&run, "report on a hard link", &["--report", "hard links"]);
        assert_eq!(std::fs::read_to_string(&precious).unwrap(), "original\n");
    }
}

#[test]
fn network_decisions_are_counted_in_the_report() {
    if !full_level_or_skip("report-net") {
        return;
    }
    let fx = Fixture::new(Who::User, "report-net");
    let report = fx.p("net.json");
    let mut cmd = fx.command(
        common::jail_bin(),
        &[
            "--net",
            "allow=api.test",
            "--report",
            &report,
            "--summary",
            "--",
            "/usr/bin/python3",
            "-c",
            "import urllib.request as u\nfor h in ('api.test', 'evil.test'):\n    try: u.urlopen(f'http://{h}:9/', timeout=5)\n    except Exception as e: print(e)",
        ],
    );
    cmd.env("JAIL_TEST_HOSTS", "api.test=127.0.0.1,evil.test=127.0.0.1");
    let run = Run::from(cmd.output().unwrap());
    let r = read_report(&report);
    let n = &r["network"];
    assert_eq!(n["mode"], "proxy", "{n:#}");
    assert_eq!(n["enforcement"], "namespace+proxy");
    // api.test is allowed by name but resolves to loopback (not in allow-host): refused too.
    assert_eq!(n["refused"], 2, "{n:#}\n{}", run.describe());
    let hosts: Vec<&str> = n["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["api.test", "evil.test"]);
    assert!(
        run.stderr.contains("network: 0 allowed, 2 refused"),
        "{}",
        run.describe()
    );
}

/// A session's report (`--report` at `session start`, written at `session stop`) follows the
/// schema, its `execs` included; a one-shot run's has none.
#[test]
fn a_sessions_report_lists_its_execs_in_the_schema() {
    if !full_level_or_skip("report-session") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "report-session");
        let (repo, report) = (fx.p("repo"), fx.p("session-report.json"));
        let name = format!("rep{}", std::process::id());
        let jail =
            |args: &[&str]| Run::from(fx.command(common::jail_bin(), args).output().unwrap());
        let run = jail(&[
            "session", "start", "--name", &name, "--cow", &repo, "--report", &report,
        ]);
        assert!(run.ok(), "{}", run.describe());
        let write = format!("echo x > {}", fx.p("repo/new.txt"));
        let run = jail(&["exec", &name, "--", "sh", "-c", &write]);
        assert!(run.ok(), "{}", run.describe());
        let run = jail(&["session", "stop", &name]);
        assert!(run.ok(), "{}", run.describe());
        let v = read_report(&report);
        assert_eq!(v["execs"]["total"], 1, "{v:#}");
        assert_eq!(
            v["execs"]["items"][0]["wrote"],
            serde_json::json!([fx.p("repo/new.txt")])
        );
        let one_shot = fx.p("one-shot.json");
        let run = jail(&["--report", &one_shot, "--", "true"]);
        assert!(run.ok(), "{}", run.describe());
        assert!(read_report(&one_shot).get("execs").is_none());
    }
}

#[test]
fn the_report_page_documents_every_field_of_the_schema() {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/report.md"))
            .unwrap();
    let s = schema();
    for (key, sub) in s["properties"].as_object().unwrap() {
        assert!(
            page.contains(&format!("`{key}`")),
            "docs/report.md lacks `{key}`"
        );
        for (inner, _) in sub["properties"].as_object().into_iter().flatten() {
            assert!(
                page.contains(&format!("`{inner}`")),
                "docs/report.md lacks `{inner}` (of {key})"
            );
        }
    }
    assert!(page.contains("schema/report-v1.json"));
}

/// A directory the command makes unreadable after writing into it: jail owns it outside the
/// jail, so it lists it anyway (adding u+rx for the walk, putting the mode back after) and the
/// report names what changed inside, never "nothing changed". (Root reads any directory: this
/// is the unprivileged user's case.)
#[test]
fn changes_hidden_in_an_unreadable_directory_are_still_reported() {
    if !full_level_or_skip("report-unreadable") {
        return;
    }
    let fx = Fixture::new(Who::User, "report-unreadable");
    let d = fx.scratch.join("d");
    std::fs::create_dir(&d).unwrap();
    fx.give_to(Who::User);
    std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    let report = fx.p("report.json");
    let s = fx.p("scratch");
    let run = fx.sh(
        &["--rw", &s, "--report", &report, "--summary"],
        &format!("chmod 700 {s}/d && echo evil > {s}/d/f && chmod 000 {s}/d"),
    );
    assert_eq!(run.code, Some(0), "{}", run.describe());
    let r = read_report(&report);
    let items = r["changes"]["items"].as_array().unwrap();
    let f = items
        .iter()
        .find(|c| c["path"].as_str().unwrap().ends_with("/scratch/d/f"))
        .unwrap_or_else(|| panic!("the file inside is not reported: {r:#}"));
    assert_eq!(f["kind"], "created");
    let summary = run
        .stderr
        .lines()
        .find(|l| l.contains("changed under"))
        .unwrap_or_else(|| panic!("no summary: {}", run.describe()));
    assert!(!summary.contains("nothing changed"), "{summary}");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&d).unwrap().permissions());
    assert_eq!(mode & 0o777, 0, "the command's mode is put back");
    std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
}

/// With a report, the snapshot's comparison finds the .git entries the command planted (instead
/// of a search of its own): they must still be moved aside, as without a report.
#[test]
fn with_a_report_planted_git_entries_are_still_moved_aside() {
    if !full_level_or_skip("report-git") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "report-git");
        let s = fx.p("scratch");
        let report = fx.p("report.json");
        let run = fx.sh(
            &["--rw", &s, "--report", &report],
            &format!(
                "mkdir -p {s}/deep/a/b/.git/hooks && echo 'gitdir: /x' > {s}/deep/.git && \
                 git init -q {s}/fresh"
            ),
        );
        assert_eq!(run.code, Some(0), "{who:?}: {}", run.describe());
        for planted in ["deep/a/b/.git", "deep/.git", "fresh/.git"] {
            let p = fx.scratch.join(planted);
            assert!(
                std::fs::symlink_metadata(&p).is_err(),
                "{who:?}: {planted} was left in place\n{}",
                run.describe()
            );
            assert!(
                run.stderr.contains(&format!("{}", p.display())),
                "{who:?}: {planted} not named\n{}",
                run.describe()
            );
        }
        let r = read_report(&report);
        let created: Vec<&str> = r["changes"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["kind"] == "created")
            .map(|c| c["path"].as_str().unwrap())
            .collect();
        assert!(
            created.iter().any(|p| p.ends_with("/deep/.git")),
            "{created:?}"
        );
    }
}

/// A directory the command leaves unreadable (search-only) could hide a repository whose
/// `core.fsmonitor` runs on the user's next `git status` there: jail lists it anyway (it owns
/// it outside) and moves the repository aside, with and without a report. (Root reads any
/// directory.)
#[test]
fn a_repository_hidden_in_an_unreadable_directory_is_moved_aside() {
    if !full_level_or_skip("report-unsearchable") {
        return;
    }
    let fx = Fixture::new(Who::User, "report-unsearchable");
    let s = fx.p("scratch");
    let report = fx.p("report.json");
    let plant = format!("mkdir {s}/d && git init -q {s}/d/sub && chmod 111 {s}/d");
    for flags in [
        vec!["--rw", s.as_str()],
        vec!["--rw", s.as_str(), "--report", &report],
    ] {
        let run = fx.sh(&flags, &plant);
        let d = fx.scratch.join("d");
        let mode =
            std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&d).unwrap().permissions());
        assert_eq!(
            mode & 0o777,
            0o111,
            "{flags:?}: the command's mode is put back"
        );
        std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        assert!(
            std::fs::symlink_metadata(d.join("sub/.git")).is_err(),
            "{flags:?}: {}",
            run.describe()
        );
        assert!(
            run.stderr.contains("d/sub/.git"),
            "{flags:?}: {}",
            run.describe()
        );
        // Reviewed and removed, as the user would, before the next run.
        std::fs::remove_dir_all(&d).unwrap();
    }
}

/// The report records each resource bound as it held, and what the run's cgroup counted: a
/// fork bomb under procs=64 shows its refused forks (as root: a cgroup here; as a user the
/// bound is an rlimit, which counts nothing).
#[test]
fn the_report_records_each_limit_and_what_the_cgroup_counted() {
    if !full_level_or_skip("the_report_records_each_limit_and_what_the_cgroup_counted") {
        return;
    }
    let bomb = common::compile_helper("limits");
    for who in users() {
        let fx = Fixture::new(who, "report-limits");
        let report = fx.p("limits.json");
        let run = fx.jail(&[
            "--limit",
            "procs=64",
            "--timeout",
            "60s",
            "--report",
            &report,
            "--",
            bomb.to_str().unwrap(),
            "fork-bomb",
            "1000",
        ]);
        assert_eq!(run.code, Some(1), "{}", run.describe());
        let v = read_report(&report);
        let l = &v["limits"];
        assert_eq!(l["procs"]["value"], 64, "{l:#}");
        assert_eq!(l["tmp"]["enforced_by"], "tmpfs", "{l:#}");
        assert_eq!(l["cpu"]["enforced_by"], "none", "{l:#}");
        if who == Who::Root {
            assert_eq!(l["procs"]["enforced_by"], "cgroup", "{l:#}");
            assert!(l["procs_refused"].as_u64().unwrap() >= 1, "{l:#}");
            assert_eq!(l["oom_kills"], 0, "{l:#}");
        } else {
            assert_eq!(l["procs"]["enforced_by"], "rlimit", "{l:#}");
            assert!(l["procs_refused"].is_null(), "{l:#}");
        }
    }
}

/// The suite turns kernel audit on for the tests that read Landlock's records, and puts back
/// what it found once the last of them is done (it is a setting of the whole machine).
#[cfg(feature = "test-hooks")]
#[test]
fn kernel_audit_is_put_back_as_the_suite_found_it() {
    if !common::is_root() {
        eprintln!("skipping kernel_audit_is_put_back_as_the_suite_found_it: root only");
        return;
    }
    let (before, holders_before) = common::audit_state();
    {
        let _on = common::AuditOn::new();
        assert!(common::audit_state().0, "on while held");
    }
    let (after, holders_after) = common::audit_state();
    // Another test process holding it on in between leaves the decision to the last one.
    if holders_before == 0 && holders_after == 0 {
        assert_eq!(after, before, "audit put back");
    }
}
