//! examples/orchestrator.rs, run for real: four sub-agents in parallel through the library's
//! `Jail::spawn`, each required at level full with its own timeout and report. The reviewer
//! passes, the fixer's write into the read-only project fails, the sleeper is killed at its
//! timeout, and the watcher (whose child ignores SIGTERM) is stopped with its whole tree when the
//! orchestrator is interrupted. As root and as the unprivileged user.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::*;

/// The example's binary, brought up to date by cargo (a run of only these tests does not
/// build the examples, and an old build would be tested instead).
fn orchestrator_bin() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let jail = Path::new(env!("CARGO_BIN_EXE_jail"));
            let built = jail.parent().unwrap().join("examples/orchestrator");
            let status = std::process::Command::new(env!("CARGO"))
                .args([
                    "build",
                    "--locked",
                    "--example",
                    "orchestrator",
                    "--features",
                    "test-hooks",
                ])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("cargo build --example orchestrator");
            assert!(status.success(), "the example does not build");
            publish(&built, "orchestrator")
        })
        .clone()
}

fn line<'a>(out: &'a str, name: &str) -> &'a str {
    let prefix = format!("outcome {name} ");
    out.lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no outcome for {name} in:\n{out}"))
}

fn report_status(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["outcome"]["status"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn the_orchestrator_example_runs_times_out_refuses_and_stops_its_agents() {
    if !full_level_or_skip("the_orchestrator_example_runs_times_out_refuses_and_stops_its_agents") {
        return;
    }
    let bin = orchestrator_bin();
    for who in users() {
        let fx = Fixture::new(who, "orchestrator");
        let work = fx.dir.join("work");
        let out = fx
            .command(&bin, &[work.to_str().unwrap(), "--interrupt-after", "5"])
            .env("JAIL_PROGRAM", jail_bin())
            .stderr(Stdio::piped())
            .output()
            .expect("run the example");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let all = format!("{text}\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{who:?}: {all}");
        assert!(text.contains("started 4"), "{who:?}: {all}");
        let reviewer = line(&text, "reviewer");
        assert!(
            reviewer.contains("status=exited:0 ") && reviewer.contains("level=full"),
            "{who:?}: {all}"
        );
        let fixer = line(&text, "fixer");
        assert!(
            fixer.contains("status=exited:") && !fixer.contains("status=exited:0 "),
            "{who:?}: the write must fail: {all}"
        );
        assert!(fixer.contains("level=full"), "{who:?}: {all}");
        let sleeper = line(&text, "sleeper");
        assert!(
            sleeper.contains("status=timed_out exit_code=124"),
            "{who:?}: {all}"
        );
        let watcher = line(&text, "watcher");
        assert!(watcher.contains("status=stopped"), "{who:?}: {all}");
        assert!(text.contains("interrupted by signal 2"), "{who:?}: {all}");
        assert!(text.contains("project unchanged: true"), "{who:?}: {all}");
        // Each agent's own report, written by its jail.
        let reports = work.join("reports");
        assert_eq!(report_status(&reports.join("reviewer.json")), "exited");
        assert_eq!(report_status(&reports.join("sleeper.json")), "timeout");
        assert_eq!(report_status(&reports.join("watcher.json")), "stopped");
        // The watcher's child ignored SIGTERM: the stop took it anyway.
        assert!(
            processes_with("sleep 6001").is_empty(),
            "{who:?}: a stopped agent's process survived"
        );
    }
}

/// Issue 34: the example exited 0 having started no jail ("started 0"). An orchestrator whose
/// agents did not run must say so and fail: no jail program to start, and jails that start but
/// refuse to set up (level full required, Landlock switched off).
#[test]
fn the_orchestrator_example_fails_when_its_agents_did_not_run() {
    if !full_level_or_skip("the_orchestrator_example_fails_when_its_agents_did_not_run") {
        return;
    }
    let bin = orchestrator_bin();
    for who in users() {
        let fx = Fixture::new(who, "orchestrator-none");
        for (case, program, disabled, says) in [
            (
                "no jail program",
                Path::new("/nonexistent/jail"),
                "",
                "no jail started",
            ),
            (
                "level not met",
                jail_bin(),
                "landlock",
                "4 of 4 agents did not run",
            ),
        ] {
            let work = fx.dir.join(format!("work-{}", disabled.len()));
            let out = fx
                .command(&bin, &[work.to_str().unwrap()])
                .env("JAIL_PROGRAM", program)
                .env("JAIL_TEST_DISABLE", disabled)
                .stderr(Stdio::piped())
                .output()
                .expect("run the example");
            let all = format!(
                "{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(out.status.code(), Some(1), "{who:?} {case}: {all}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains("orchestrator: 4 of 4 agents did not run") && stderr.contains(says),
                "{who:?} {case}: {all}"
            );
        }
    }
}
