//! What a run must do after it ends is done even when its supervisor is killed (SIGKILL: the
//! OOM killer, `kill -9`, a CI runner's timeout): the planted files are moved aside and the
//! report written by the next jail or `jail runs`, with a warning, and the cgroups of a jail that
//! was pid 1 of its own pid namespace are removed by the next start.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Waits until `done` holds, for at most 60 s (a loaded machine is slow, never this slow).
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts jail as the fixture's user, in the background.
fn spawn_jail(fx: &Fixture, args: &[&str], disabled: &[Layer]) -> Child {
    let list: Vec<&str> = disabled.iter().map(|l| l.name()).collect();
    fx.command(jail_bin(), args)
        .env("JAIL_TEST_DISABLE", list.join(","))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Every path under `dir` whose name holds `.jail-quarantine-`, relative to `dir`.
fn quarantined(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_name()
                .to_string_lossy()
                .contains(".jail-quarantine-")
            {
                out.push(p.strip_prefix(dir).unwrap().to_string_lossy().into_owned());
            } else if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A `--rw` run whose command plants `.envrc` and a git hook, then sleeps; its supervisor is
/// killed. The next `jail runs` (or the next jail) moves both aside, says so, and writes the
/// report the dead supervisor could not.
#[test]
fn a_killed_supervisors_planted_files_are_moved_aside_and_its_report_written() {
    if !full_level_or_skip("journal_killed") {
        return;
    }
    const MODES: &[&[Layer]] = &[&[], &[Layer::Mount]];
    for who in users() {
        for (i, disabled) in MODES.iter().enumerate() {
            let fx = Fixture::new(who, "journal-kill");
            let repo = fx.p("repo");
            let report = fx.p("report.json");
            let script = "echo 'eval evil' > .envrc; mkdir -p .git/hooks; \
                          echo 'evil' > .git/hooks/pre-commit; echo ok > planted-done; \
                          exec sleep 60";
            let mut child = spawn_jail(
                &fx,
                &[
                    "--rw", &repo, "--cwd", &repo, "--report", &report, "--", "/bin/sh", "-c",
                    script,
                ],
                disabled,
            );
            let marker = fx.repo.join("planted-done");
            wait_for("the command to plant", || {
                std::fs::read_to_string(&marker).is_ok_and(|t| t == "ok\n")
            });
            child.kill().unwrap();
            child.wait().unwrap();
            assert!(
                fx.repo.join(".envrc").exists(),
                "the supervisor was killed in time"
            );
            // The next look: `jail runs` in the first mode, another jail in the second. The
            // run's init may outlive its supervisor a moment (it holds the journal's lock until
            // it dies): a look while it lives finds a live run and leaves it, so look again
            // until the run is found dead.
            let look = || {
                if i == 0 {
                    Run::from(fx.command(jail_bin(), &["runs"]).output().unwrap())
                } else {
                    fx.jail_with(&["--", "true"], disabled, &[])
                }
            };
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            let next = loop {
                let next = look();
                if next.stderr.contains("supervisor") || std::time::Instant::now() > deadline {
                    break next;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            };
            assert!(
                next.stderr.contains("supervisor") && next.stderr.contains(".envrc"),
                "{who:?} {disabled:?}: no warning naming the killed run\n{}",
                next.describe()
            );
            assert!(
                !fx.repo.join(".envrc").exists() && !fx.repo.join(".git").exists(),
                "{who:?} {disabled:?}: planted files left in place\n{}",
                next.describe()
            );
            let moved = quarantined(&fx.repo);
            assert!(
                moved
                    .iter()
                    .any(|m| m.starts_with(".envrc.jail-quarantine-"))
                    && moved.iter().any(|m| m.starts_with(".git.jail-quarantine-")),
                "{who:?} {disabled:?}: {moved:?}"
            );
            let text = std::fs::read_to_string(&report).unwrap();
            let doc: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| {
                panic!("{who:?} {disabled:?}: report not JSON ({e}): {text:?}")
            });
            assert_eq!(doc["schema"], "jail-run-report/1", "{text}");
            assert_eq!(doc["outcome"]["status"], "jail_error", "{text}");
            assert!(
                doc["outcome"]["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("supervisor was killed")),
                "{text}"
            );
            assert_eq!(doc["changes"]["available"], true, "{text}");
            let items = doc["changes"]["items"].as_array().unwrap();
            assert!(
                items.iter().any(|c| c["path"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("/repo/.envrc"))),
                "{text}"
            );
            // Done once: a second look finds nothing more to do.
            let again = Run::from(fx.command(jail_bin(), &["runs"]).output().unwrap());
            assert!(!again.stderr.contains("supervisor"), "{}", again.describe());
        }
    }
}

/// The journal is the supervisor's alone: a command that could write where the next jail
/// looks (it cannot: the state directory is hidden) still finds nothing there to forge.
#[test]
fn the_journal_is_out_of_the_commands_reach() {
    if !full_level_or_skip("journal_hidden") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "journal-hidden");
        let home = fx.home.to_string_lossy().into_owned();
        let state = fx.home.join(".local/state/jail");
        let script = format!(
            "ls -a {s}/journal 2>&1; echo x > {s}/journal/forged 2>&1; echo done",
            s = state.display()
        );
        // HOME writable: the state directory is inside a writable tree, made and hidden.
        let out = fx.jail(&["--rw", &home, "--", "/bin/sh", "-c", &script]);
        assert!(out.stdout.contains("done"), "{}", out.describe());
        assert!(
            !state.join("journal/forged").exists(),
            "{who:?}: the command wrote into the journal\n{}",
            out.describe()
        );
        let listing: Vec<_> = std::fs::read_dir(state.join("journal"))
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(listing.is_empty(), "{who:?}: left {listing:?}");
    }
}

/// The `jail-*` cgroups found anywhere below /sys/fs/cgroup whose name is in `names`.
fn cgroups_named(names: &[String]) -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: usize, names: &[String], out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            if names.contains(&name) {
                out.push(p);
            } else if depth > 0 {
                walk(&p, depth - 1, names, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(Path::new("/sys/fs/cgroup"), 5, names, &mut out);
    out
}

/// The children of `pid`, by /proc.
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let rest = &stat[stat.rfind(')').unwrap() + 1..];
        if rest.split_whitespace().nth(1) == Some(&pid.to_string()) {
            out.push(p);
        }
    }
    out
}

/// The `jail-*` cgroup names `/proc/PID/cgroup` lists.
fn jail_cgroups_of_process(pid: u32) -> Vec<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    let mut out: Vec<String> = text
        .lines()
        .filter_map(|l| l.rsplit('/').next())
        .filter(|n| n.starts_with("jail-"))
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A jail that is pid 1 of its own pid namespace (`unshare -pf jail …`, as containers and
/// sandboxes start it) and is killed: its cgroups are named `jail-1-*`, and pid 1 always looks
/// alive to a sweep that goes by pid. The next start removes them.
#[test]
fn a_killed_jail_that_was_pid_1_leaves_no_cgroup_behind() {
    if !full_level_or_skip("journal_pid1") || !is_root() {
        return;
    }
    let mut unshare = Command::new("unshare")
        .args(["-pf", "--mount-proc"])
        .arg(jail_bin())
        .args(["--", "sleep", "60"])
        .current_dir(base_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut jail = 0;
    let mut names = Vec::new();
    wait_for("the jail's tree in its cgroups", || {
        if jail == 0 {
            jail = children_of(unshare.id()).first().copied().unwrap_or(0);
        }
        if jail != 0 {
            if let Some(init) = children_of(jail).first() {
                names = jail_cgroups_of_process(*init);
            }
        }
        !names.is_empty()
    });
    if names.iter().all(|n| !n.starts_with("jail-1-")) {
        let _ = unshare.kill();
        panic!("the jail was not pid 1 of its namespace: {names:?}");
    }
    // SAFETY: kill sends a signal.
    unsafe { libc::kill(jail as i32, libc::SIGKILL) };
    unshare.wait().unwrap();
    // (Another test's jail may sweep them first: any jail's start is "the next start".)
    wait_for("the next start to remove the cgroups", || {
        let _ = Command::new(jail_bin())
            .args(["--", "true"])
            .current_dir(base_dir())
            .output();
        cgroups_named(&names).is_empty()
    });
}
