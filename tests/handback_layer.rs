//! The layer a copy-on-write run leaves, at its two edges: its size is bounded (a runaway or
//! hostile command cannot leave a huge layer on the host's disk), and a run whose jail was
//! killed hands back only what a person reviewed (processes that outlived the supervisor keep
//! writing the copy-based layer; `jail apply` must not carry their later writes to the host).
//!
//! Every test runs the real binary as root and as uid 65534, with the overlay and with the
//! copy-based layer (no mount view).

mod common;

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::cow::{Cow, cases};
use common::{Background, Layer, Run, Who, full_level_or_skip};

fn kind(off: &[Layer]) -> &'static str {
    if off.is_empty() { "overlay" } else { "copy" }
}

fn fixture(who: Who, off: &'static [Layer], name: &str) -> Cow {
    Cow::new(who, off, name)
}

fn jail(fx: &Cow, args: &[&str]) -> Run {
    fx.jail(args)
}

/// `jail --cow repo --cwd repo FLAGS -- sh -c SCRIPT`.
fn cow_sh(fx: &Cow, flags: &[&str], script: &str) -> Run {
    let repo = fx.p("repo");
    let mut args = vec!["--cow", &repo, "--cwd", &repo];
    args.extend(flags);
    args.extend(["--", "/bin/sh", "-c", script]);
    jail(fx, &args)
}

/// Bytes the store's runs take on disk (allocated blocks, each inode once).
fn store_usage(fx: &Cow) -> u64 {
    fn walk(dir: &Path, seen: &mut HashSet<u64>, total: &mut u64) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if seen.insert(m.ino()) {
                *total += m.blocks() * 512;
            }
            if m.is_dir() {
                walk(&e.path(), seen, total);
            }
        }
    }
    let mut total = 0;
    walk(
        &fx.dir.join("state/jail/runs"),
        &mut HashSet::new(),
        &mut total,
    );
    total
}

fn dry_run_limits(fx: &Cow) -> serde_json::Value {
    let repo = fx.p("repo");
    let run = jail(fx, &["--dry-run", "--cow", &repo, "--", "true"]);
    assert!(run.ok(), "{}", run.describe());
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    v["limits"].clone()
}

#[test]
fn every_layer_has_a_bound_by_default_and_the_run_is_held_to_it() {
    if !full_level_or_skip("handback_layer") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "layer-default");
        let limits = dry_run_limits(&fx);
        let layer = &limits["layer"];
        let bytes = layer["value"]
            .as_u64()
            .unwrap_or_else(|| panic!("{who:?} {}: no layer bound: {limits:#}", kind(off)));
        assert!(
            bytes >= 64 << 20,
            "{who:?} {}: a default too small to work in: {layer}",
            kind(off)
        );
        assert_eq!(layer["default"], true, "{layer}");
        // The same plan is in force in a run: the overlay's upper filesystem has that size (an
        // overlay's statfs is its upper's), and without it each file is held to it.
        let run = cow_sh(
            &fx,
            &[],
            "stat -f -c 'fs %b %S' . ; echo \"fsize $(ulimit -f)\"",
        );
        assert!(run.ok(), "{}", run.describe());
        if off.is_empty() {
            assert_eq!(layer["enforced_by"], "tmpfs", "{layer}");
            let fs: Vec<u64> = run
                .stdout
                .lines()
                .find_map(|l| l.strip_prefix("fs "))
                .unwrap()
                .split(' ')
                .map(|n| n.parse().unwrap())
                .collect();
            assert_eq!(fs[0] * fs[1], bytes, "{who:?}: {}", run.describe());
        } else {
            assert_eq!(layer["enforced_by"], "watch", "{layer}");
            assert!(
                run.stdout.contains(&format!("fsize {}", bytes / 512)),
                "{who:?}: RLIMIT_FSIZE is not the bound ({bytes} bytes)\n{}",
                run.describe()
            );
        }
        // Asked for, it is the value asked for, and `none` lifts it.
        let repo = fx.p("repo");
        for (flag, want) in [("layer=48M", Some(48u64 << 20)), ("layer=none", None)] {
            let run = jail(
                &fx,
                &["--dry-run", "--limit", flag, "--cow", &repo, "--", "true"],
            );
            let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
            assert_eq!(v["limits"]["layer"]["value"].as_u64(), want, "{flag}");
        }
    }
}

#[test]
fn a_command_that_writes_past_the_layer_bound_is_refused_and_the_bound_named() {
    if !full_level_or_skip("handback_layer") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "layer-dd");
        let run = cow_sh(
            &fx,
            &["--limit", "layer=32M"],
            "echo started; dd if=/dev/zero of=big bs=1M count=100 status=none; echo \"dd $?\"",
        );
        assert!(
            run.stdout.contains("started"),
            "{who:?} {}: {}",
            kind(off),
            run.describe()
        );
        assert!(
            !run.stdout.contains("dd 0"),
            "{who:?} {}: 100M were written into a 32M layer\n{}",
            kind(off),
            run.describe()
        );
        assert!(
            run.stderr.contains("layer=32M") && run.stderr.contains("bound"),
            "{who:?} {}: the bound is not named\n{}",
            kind(off),
            run.describe()
        );
        let used = store_usage(&fx);
        assert!(
            used <= (32 << 20) + (4 << 20),
            "{who:?} {}: the layer takes {} MiB on disk",
            kind(off),
            used >> 20
        );
    }
}

/// What the layer holds on disk is held to the bound too: a sparse file keeps its holes and the
/// names of one inode stay one inode when the layer is copied into the store.
#[test]
fn sparse_files_and_hard_links_do_not_pass_the_bound_on_disk() {
    if !full_level_or_skip("handback_layer") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "layer-sparse");
        let run = cow_sh(
            &fx,
            &["--limit", "layer=16M"],
            "truncate -s 1G sparse.bin; head -c 6M /dev/urandom > h0; \
             for i in $(seq 40); do ln h0 h$i; done; echo done",
        );
        assert!(
            run.stdout.contains("done"),
            "{who:?} {}: {}",
            kind(off),
            run.describe()
        );
        let used = store_usage(&fx);
        assert!(
            used <= (16 << 20) + (4 << 20),
            "{who:?} {}: a 16M layer takes {} MiB on disk",
            kind(off),
            used >> 20
        );
    }
}

#[test]
fn many_files_past_the_layer_bound_are_stopped_too() {
    if !full_level_or_skip("handback_layer") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "layer-many");
        let start = Instant::now();
        let run = cow_sh(
            &fx,
            &["--limit", "layer=16M"],
            "echo started; i=0; while [ $i -lt 200 ]; do i=$((i+1)); \
             dd if=/dev/zero of=f$i bs=256K count=1 status=none || break; done; echo \"wrote $i\"",
        );
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{who:?} {}: the run was not stopped",
            kind(off)
        );
        assert!(
            run.stdout.contains("started") && run.code != Some(125),
            "{who:?} {}: the command did not run\n{}",
            kind(off),
            run.describe()
        );
        assert!(
            !run.stdout.contains("wrote 200"),
            "{who:?} {}: 50M of files went into a 16M layer\n{}",
            kind(off),
            run.describe()
        );
        assert!(
            run.stderr.contains("layer=16M"),
            "{who:?} {}: the bound is not named\n{}",
            kind(off),
            run.describe()
        );
        // The copy's watch stops the run within one of its looks at the layer.
        let used = store_usage(&fx);
        assert!(
            used <= (16 << 20) + (12 << 20),
            "{who:?} {}: the layer takes {} MiB on disk",
            kind(off),
            used >> 20
        );
    }
}

/// Kills, when dropped (also when a test fails), every process working in `dir` or with a
/// marker in its command line: what a killed jail's command left behind.
struct Reaper {
    dir: std::path::PathBuf,
    marker: String,
}

impl Drop for Reaper {
    fn drop(&mut self) {
        let mut pids = common::processes_with(&self.marker);
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if std::fs::read_link(e.path().join("cwd")).is_ok_and(|c| c.starts_with(&self.dir)) {
                pids.push(pid);
            }
        }
        for pid in pids {
            // SAFETY: kill sends a signal to a process the test's jail left behind.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
}

/// Lines equal to `x` in `text`.
fn xs(text: &str) -> usize {
    text.lines().filter(|l| *l == "x").count()
}

#[test]
fn a_killed_run_hands_back_only_what_its_review_showed() {
    if !full_level_or_skip("handback_layer") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "layer-killed");
        let marker = format!("hb-writer-{}-{}", std::process::id(), kind(off));
        let _reaper = Reaper {
            dir: fx.dir.clone(),
            marker: marker.clone(),
        };
        let repo = fx.p("repo");
        // A writer the command leaves behind, and a command that outlives the test's patience.
        let script = format!(
            "(while :; do echo x >> f; sleep 0.05; done) & echo started; sleep 60 # {marker}"
        );
        let mut cmd = fx.command(
            common::jail_bin(),
            &[
                "--cow", &repo, "--cwd", &repo, "--", "/bin/sh", "-c", &script,
            ],
        );
        let disabled: Vec<&str> = off.iter().map(|l| l.name()).collect();
        cmd.env("JAIL_TEST_DISABLE", disabled.join(","));
        let mut bg = Background::spawn(cmd);
        bg.expect("started");
        // The layer's file, where it is on disk while the run lives (the copy; the overlay's
        // upper is a bounded tmpfs inside the jail until the end).
        let layer_f = || {
            let runs = fx.dir.join("state/jail/runs");
            std::fs::read_dir(&runs)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path().join("0/upper/f"))
                .find(|p| p.exists())
        };
        if !off.is_empty() {
            common::wait_for("the writer's first line", Duration::from_secs(60), || {
                layer_f().is_some_and(|p| xs(&std::fs::read_to_string(p).unwrap_or_default()) > 0)
            });
        }
        // SAFETY: kill sends a signal to the jail process this test started.
        unsafe { libc::kill(bg.pid(), libc::SIGKILL) };
        bg.wait();
        // With a pid namespace the writer dies with it, but the kernel's kill of the namespace
        // ends asynchronously: waited for.
        if off.is_empty() {
            common::wait_for("the pid namespace to end", Duration::from_secs(30), || {
                common::processes_with(&marker).is_empty()
            });
        }

        let runs = jail(&fx, &["runs", "--json"]);
        let list: serde_json::Value = serde_json::from_str(&runs.stdout).unwrap();
        let id = list[0]["id"].as_str().unwrap().to_string();
        assert_eq!(list[0]["state"], "interrupted", "{}", runs.describe());
        // Without a pid namespace the writer outlives the jail; with one it dies with it.
        let survivors = !common::processes_with(&marker).is_empty();
        assert_eq!(
            survivors,
            !off.is_empty(),
            "{who:?} {}: survivors: {:?}",
            kind(off),
            common::processes_with(&marker)
        );
        if survivors {
            // Said where a person looks before deciding.
            let text = jail(&fx, &["runs"]);
            assert!(
                text.stdout.contains("may still be running"),
                "{who:?} {}: `jail runs` does not say processes of the run are alive\n{}",
                kind(off),
                text.describe()
            );
        }
        // Never reviewed: an interrupted run is not applied blind.
        let blind = jail(&fx, &["apply", &id]);
        assert_ne!(
            blind.code,
            Some(0),
            "{who:?} {}: an interrupted run was applied without a review\n{}",
            kind(off),
            blind.describe()
        );
        assert!(
            blind.stderr.contains("interrupted") && blind.stderr.contains("jail diff"),
            "{}",
            blind.describe()
        );
        assert!(!fx.repo.join("f").exists(), "the refused apply wrote");

        let diff = jail(&fx, &["diff", &id]);
        assert!(diff.ok(), "{}", diff.describe());
        let shown = diff.stdout.lines().filter(|l| *l == "+x").count();
        // The writer goes on (when it survived): the layer grows past what the review showed,
        // then the person applies what they saw.
        if survivors {
            common::wait_for("the writer to go on", Duration::from_secs(60), || {
                layer_f()
                    .is_some_and(|p| xs(&std::fs::read_to_string(p).unwrap_or_default()) > shown)
            });
        }
        let apply = jail(&fx, &["apply", &id]);
        let host = std::fs::read_to_string(fx.repo.join("f")).unwrap_or_default();
        if apply.ok() {
            assert_eq!(
                xs(&host),
                shown,
                "{who:?} {}: apply wrote other lines than the review showed\n{}",
                kind(off),
                apply.describe()
            );
        } else {
            assert!(
                apply.stderr.contains("changed since") && apply.stderr.contains("jail diff"),
                "{who:?} {}: {}",
                kind(off),
                apply.describe()
            );
            assert_eq!(xs(&host), 0, "a refused apply wrote");
        }
    }
}

#[test]
fn what_a_partial_apply_leaves_stays_reviewed_only_while_it_is_what_was_shown() {
    if !full_level_or_skip("handback_layer") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "layer-partial");
        let marker = format!("hb-partial-{}-{}", std::process::id(), kind(off));
        let _reaper = Reaper {
            dir: fx.dir.clone(),
            marker: marker.clone(),
        };
        let (repo, go) = (fx.p("repo"), fx.p("go"));
        // A flagged file (a new executable) stays in the layer after the first apply; a writer
        // left behind changes it once told to.
        let script = format!(
            "echo a > a; printf '#!/bin/sh\\n' > run.sh; chmod +x run.sh; \
             (while [ ! -e {go} ]; do sleep 0.05; done; echo late >> run.sh) & \
             echo started; sleep 60 # {marker}"
        );
        // With the overlay, on disk: its layer outlives the killed jail.
        let mut args = vec!["--cow", &repo, "--cwd", &repo];
        if off.is_empty() {
            args.extend(["--limit", "layer=none"]);
        }
        args.extend(["--", "/bin/sh", "-c", &script]);
        let mut cmd = fx.command(common::jail_bin(), &args);
        let disabled: Vec<&str> = off.iter().map(|l| l.name()).collect();
        cmd.env("JAIL_TEST_DISABLE", disabled.join(","));
        let mut bg = Background::spawn(cmd);
        bg.expect("started");
        // SAFETY: kill sends a signal to the jail process this test started.
        unsafe { libc::kill(bg.pid(), libc::SIGKILL) };
        bg.wait();
        // With a pid namespace the writer dies with it, asynchronously: waited for.
        if off.is_empty() {
            common::wait_for("the pid namespace to end", Duration::from_secs(30), || {
                common::processes_with(&marker).is_empty()
            });
        }
        let runs: serde_json::Value =
            serde_json::from_str(&jail(&fx, &["runs", "--json"]).stdout).unwrap();
        let id = runs[0]["id"].as_str().unwrap().to_string();
        // Without a pid namespace the writer outlives the jail; with one it dies with it.
        let writer = !off.is_empty();
        assert_eq!(
            !common::processes_with(&marker).is_empty(),
            writer,
            "{who:?} {}",
            kind(off)
        );

        assert!(jail(&fx, &["diff", &id]).ok());
        let first = jail(&fx, &["apply", &id]);
        assert!(first.ok(), "{who:?} {}: {}", kind(off), first.describe());
        assert!(
            first.stderr.contains("left in the layer"),
            "{}",
            first.describe()
        );
        assert_eq!(std::fs::read_to_string(fx.repo.join("a")).unwrap(), "a\n");
        let run_sh = fx.repo.join("run.sh");
        if writer {
            // The flagged file changes after the review: the rest is no longer what was shown.
            std::fs::write(&go, "").unwrap();
            let layer = fx.dir.join(format!("state/jail/runs/{id}/0/upper/run.sh"));
            let deadline = Instant::now() + Duration::from_secs(10);
            while !std::fs::read_to_string(&layer)
                .unwrap_or_default()
                .contains("late")
            {
                assert!(
                    Instant::now() < deadline,
                    "{who:?} {}: the writer never wrote; alive: {:?}",
                    kind(off),
                    common::processes_with(&marker)
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            let second = jail(&fx, &["apply", &id, &fx.p("repo/run.sh")]);
            assert!(
                !second.ok() && second.stderr.contains("changed since"),
                "{who:?} {}: {}",
                kind(off),
                second.describe()
            );
            assert!(!run_sh.exists(), "a refused apply wrote");
            assert!(jail(&fx, &["diff", &id]).stdout.contains("+late"));
        }
        let last = jail(&fx, &["apply", &id, &fx.p("repo/run.sh")]);
        assert!(last.ok(), "{who:?} {}: {}", kind(off), last.describe());
        let want = if writer {
            "#!/bin/sh\nlate\n"
        } else {
            "#!/bin/sh\n"
        };
        assert_eq!(std::fs::read_to_string(&run_sh).unwrap(), want);
    }
}
