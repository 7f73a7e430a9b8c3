//! Resource bounds, attacked from inside as root and as an unprivileged user: a fork bomb stops
//! at the process limit while the host still forks, a tmpfs fill of /tmp and /dev/shm stops at
//! the size with ENOSPC, a memory hog is stopped by the memory limit. Each attack also runs with
//! its limit lifted and goes further (within small, safe bounds), so each test fails if the rule
//! is gone. tests/helpers/limits.c holds the attacks.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::*;

fn limits_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| compile_helper("limits"))
}

fn helper(args: &[&str]) -> Vec<String> {
    let mut v = vec![limits_bin().to_string_lossy().into_owned()];
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

/// Runs jail with `flags`, then `--`, then `cmd`.
fn run(fx: &Fixture, flags: &[&str], cmd: &[String], env: &[(&str, &str)]) -> Run {
    let mut args: Vec<&str> = flags.to_vec();
    args.push("--");
    args.extend(cmd.iter().map(String::as_str));
    fx.jail_with(&args, &[], env)
}

/// The number in "BLOCKED op: N …" / "ALLOWED op: N …".
fn amount(run: &Run) -> u64 {
    run.stdout
        .lines()
        .find_map(|l| {
            let rest = l.split_once(": ")?.1;
            rest.split(' ').next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no amount in the output:\n{}", run.describe()))
}

/// `line` starts exactly one line of jail's stderr: the bound that ended the run, said once.
#[track_caller]
fn said_once(run: &Run, line: &str) {
    let n = run.stderr.lines().filter(|l| l.starts_with(line)).count();
    assert_eq!(n, 1, "{line:?} said {n} times:\n{}", run.describe());
}

/// Whether `who` can start processes on the host right now.
fn host_forks(who: Who, n: usize) -> bool {
    (0..n).all(|_| {
        as_user(who, Path::new("/bin/true"))
            .status()
            .is_ok_and(|s| s.success())
    })
}

#[test]
fn a_fork_bomb_stops_at_the_process_limit_while_the_host_still_forks() {
    if !full_level_or_skip("a_fork_bomb_stops_at_the_process_limit_while_the_host_still_forks") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "fork-bomb");
        let started = Instant::now();
        let mut cmd = fx.command(
            jail_bin(),
            &[
                "--limit",
                "procs=64",
                "--timeout",
                "60s",
                "--",
                limits_bin().to_str().unwrap(),
                "fork-bomb",
                "1000",
                "3",
            ],
        );
        cmd.env_remove("JAIL_TEST_DISABLE");
        let mut bomb = Background::spawn(cmd);
        bomb.expect("HOLDING");
        // The bomb holds every process it could make: the host, the same user included, still
        // starts processes.
        assert!(host_forks(who, 20), "{who:?}: the host could not fork");
        let out = bomb.finish();
        assert_eq!(
            verdict(&out),
            Verdict::Blocked,
            "{who:?}: {}",
            out.describe()
        );
        assert!(
            out.stdout.contains("errno=11"),
            "EAGAIN: {}",
            out.describe()
        );
        let made = amount(&out);
        assert!(made < 64, "{who:?}: {made} processes under procs=64");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "bounded in time: {:?}",
            started.elapsed()
        );
        // The same bomb with the limit lifted goes past it (to its own bound of 300).
        let lifted = run(
            &fx,
            &["--limit", "procs=none", "--timeout", "60s"],
            &helper(&["fork-bomb", "300"]),
            &[],
        );
        assert_eq!(verdict(&lifted), Verdict::Allowed, "{}", lifted.describe());
        assert_eq!(amount(&lifted), 300);
    }
}

#[test]
fn a_tmpfs_fill_stops_at_the_size_of_tmp_and_dev_shm() {
    if !full_level_or_skip("a_tmpfs_fill_stops_at_the_size_of_tmp_and_dev_shm") {
        return;
    }
    let host_shm_used = || {
        let s = nix::sys::statvfs::statvfs("/dev/shm").unwrap();
        (s.blocks() - s.blocks_free()) * s.fragment_size()
    };
    for who in users() {
        let fx = Fixture::new(who, "tmpfs-fill");
        for path in ["/tmp/fill", "/dev/shm/fill"] {
            let before = host_shm_used();
            let out = run(
                &fx,
                &["--limit", "tmp=16M,shm=16M"],
                &helper(&["fill", path, "64"]),
                &[],
            );
            assert_eq!(
                verdict(&out),
                Verdict::Blocked,
                "{who:?} {path}: {}",
                out.describe()
            );
            assert!(
                out.stdout.contains("errno=28"),
                "ENOSPC: {}",
                out.describe()
            );
            assert_eq!(
                amount(&out),
                16 << 20,
                "{who:?} {path}: stopped at the size"
            );
            // The fill was in the jail's own tmpfs, not the host's.
            let after = host_shm_used();
            assert!(
                after < before + (8 << 20),
                "host /dev/shm grew from {before} to {after}"
            );
            let lifted = run(
                &fx,
                &["--limit", "tmp=none,shm=none"],
                &helper(&["fill", path, "64"]),
                &[],
            );
            assert_eq!(verdict(&lifted), Verdict::Allowed, "{}", lifted.describe());
            assert_eq!(amount(&lifted), 64 << 20);
        }
    }
}

#[test]
fn a_memory_hog_is_stopped_by_the_memory_limit() {
    if !full_level_or_skip("a_memory_hog_is_stopped_by_the_memory_limit") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "memory-hog");
        // As root the bound is a cgroup (its OOM killer ends the hog: 128+9). Without a cgroup
        // (a user on this machine kind, root with the cgroup switched off) an asked bound
        // refuses the run: an rlimit would not hold shared memory.
        let mut cases = vec![("", who == Who::User)];
        if who == Who::Root {
            cases.push(("cgroup", true));
        }
        for (disable, refused) in cases {
            let env = [("JAIL_TEST_DISABLE", disable)];
            let out = run(
                &fx,
                &["--limit", "memory=64M"],
                &helper(&["hog", "256"]),
                &env,
            );
            if refused {
                assert_eq!(out.code, Some(125), "{who:?} {disable}: {}", out.describe());
                assert!(out.stderr.contains("--limit memory="), "{}", out.describe());
            } else {
                assert_eq!(out.code, Some(128 + libc::SIGKILL), "{}", out.describe());
                said_once(
                    &out,
                    "jail: the run reached its memory bound (--limit memory=64M)",
                );
            }
            let lifted = run(
                &fx,
                &["--limit", "memory=none"],
                &helper(&["hog", "256"]),
                &env,
            );
            assert_eq!(verdict(&lifted), Verdict::Allowed, "{}", lifted.describe());
            assert!(
                !lifted.stderr.contains("the run reached its"),
                "{}",
                lifted.describe()
            );
        }
        if who == Who::Root {
            // A cgroup also counts the tmpfs pages the tree writes: an unsized /tmp does not
            // get past the memory bound (the OOM killer ends the writer).
            let out = run(
                &fx,
                &["--limit", "memory=64M,tmp=none"],
                &helper(&["fill", "/tmp/fill", "256"]),
                &[],
            );
            assert_eq!(out.code, Some(128 + libc::SIGKILL), "{}", out.describe());
            said_once(
                &out,
                "jail: the run reached its memory bound (--limit memory=64M)",
            );
        }
    }
}

#[test]
fn the_tree_cannot_leave_its_cgroup() {
    if !full_level_or_skip("the_tree_cannot_leave_its_cgroup") || !is_root() {
        // Only root gets a cgroup on this machine kind (cgroup v1).
        return;
    }
    let fx = Fixture::new(Who::Root, "cgroup-escape");
    let hierarchy = pids_hierarchy();
    let escape = [
        "sh".to_string(),
        "-c".into(),
        format!(
            "for f in tasks cgroup.procs; do echo 0 > /sys/fs/cgroup/pids/$f; done; \
             grep '^{hierarchy}:pids:' /proc/self/cgroup"
        ),
    ];
    // Each layer that guards files alone keeps /sys/fs/cgroup unwritable: the mount view
    // (read-only, EROFS) and Landlock (EACCES).
    for (disabled, errno) in [
        (&[][..], "Read-only file system"),
        (&[Layer::Mount][..], "Permission denied"),
        (&[Layer::Landlock][..], "Read-only file system"),
    ] {
        let mut args = vec!["--"];
        args.extend(escape.iter().map(String::as_str));
        let out = fx.jail_with(&args, disabled, &[]);
        assert!(
            out.stdout.contains(":pids:/jail-"),
            "{disabled:?}: {}",
            out.describe()
        );
        assert!(
            out.stderr.contains(errno),
            "{disabled:?}: {}",
            out.describe()
        );
    }
    // With neither, the same commands leave it: the test can fail.
    let mut args = vec!["--allow-unconfined", "--"];
    args.extend(escape.iter().map(String::as_str));
    let out = fx.jail_with(&args, &[Layer::Mount, Layer::Landlock], &[]);
    assert!(
        out.stdout.trim_end().ends_with(":pids:/"),
        "{}",
        out.describe()
    );
}

#[test]
fn a_cpu_burner_is_stopped_by_the_cpu_limit() {
    if !full_level_or_skip("a_cpu_burner_is_stopped_by_the_cpu_limit") {
        return;
    }
    let burn = ["sh".to_string(), "-c".into(), "while :; do :; done".into()];
    for who in users() {
        let fx = Fixture::new(who, "cpu-burner");
        let started = Instant::now();
        let report = fx.p("cpu.json");
        let flags = ["--limit", "cpu=1s", "--timeout", "30s", "--report", &report];
        let out = run(&fx, &flags, &burn, &[]);
        assert_eq!(out.code, Some(128 + libc::SIGXCPU), "{}", out.describe());
        assert!(started.elapsed() < Duration::from_secs(20));
        said_once(&out, "jail: the run reached its CPU bound (--limit cpu=1s)");
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        assert_eq!(r["outcome"]["bound"], "cpu", "{r:#}");
        // Lifted, it burns on until the timeout.
        let out = run(&fx, &["--limit", "cpu=none", "--timeout", "3s"], &burn, &[]);
        assert_eq!(out.code, Some(124), "{}", out.describe());
        said_once(&out, "jail: the run reached its time bound (--timeout 3s)");
        assert!(!out.stderr.contains("CPU bound"), "{}", out.describe());
    }
}

#[test]
fn every_run_is_bounded_by_default() {
    if !full_level_or_skip("every_run_is_bounded_by_default") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "limit-defaults");
        let out = fx.jail(&[
            "--",
            "sh",
            "-c",
            "grep -E ' /tmp | /dev/shm ' /proc/self/mounts; grep 'Max processes' \
             /proc/self/limits; grep -E 'pids|memory' /proc/self/cgroup",
        ]);
        assert!(out.ok(), "{}", out.describe());
        for mount in [" /tmp ", " /dev/shm "] {
            // The last mount there is the one on top.
            let line = out
                .stdout
                .lines()
                .rev()
                .find(|l| l.contains(mount))
                .unwrap_or_else(|| panic!("{mount}: {}", out.describe()));
            assert!(
                line.contains("size=") && line.contains("nr_inodes="),
                "{line}"
            );
        }
        if who == Who::Root {
            // The tree is in a cgroup of its own, bounded; it is gone after the run.
            let pids = out
                .stdout
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{}:pids:", pids_hierarchy())))
                .unwrap_or_else(|| panic!("{}", out.describe()))
                .to_string();
            assert!(pids.contains("/jail-"), "{pids}");
            let dir = format!("/sys/fs/cgroup/pids{pids}");
            assert!(!Path::new(&dir).exists(), "{dir} left behind");
        } else {
            assert!(
                out.stdout.contains("Max processes             4096"),
                "RLIMIT_NPROC: {}",
                out.describe()
            );
        }
        // Inside, the limit holds for the whole tree: RLIMIT_NPROC counts the jail's own
        // user namespace, so a user's processes elsewhere do not use it up.
        let dry = fx.jail(&["--dry-run", "--", "true"]);
        let json: serde_json::Value = serde_json::from_str(&dry.stdout).unwrap();
        let by = json["limits"]["procs"]["enforced_by"].as_str().unwrap();
        assert_eq!(by, if who == Who::Root { "cgroup" } else { "rlimit" });
        assert_eq!(json["limits"]["procs"]["value"], 4096);
    }
}

/// The id of the v1 pids hierarchy in /proc/self/cgroup.
fn pids_hierarchy() -> String {
    std::fs::read_to_string("/proc/self/cgroup")
        .unwrap()
        .lines()
        .find_map(|l| {
            let mut f = l.split(':');
            let id = f.next()?;
            (f.next()? == "pids").then(|| id.to_string())
        })
        .expect("a pids hierarchy")
}

#[test]
fn an_asked_limit_that_cannot_hold_refuses_the_run() {
    if !full_level_or_skip("an_asked_limit_that_cannot_hold_refuses_the_run") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "limit-refused");
        let mut cases = vec![
            // No mount view: /tmp is the host's, jail has no tmpfs to size.
            ("mount", "tmp=16M", "--limit tmp=16M"),
        ];
        if who == Who::Root {
            // Root is exempt from RLIMIT_NPROC: without a cgroup procs= cannot hold.
            cases.push(("cgroup", "procs=64", "host root"));
        } else {
            // Without a user namespace RLIMIT_NPROC would count the user's other processes.
            cases.push(("mount", "procs=64", "every process of uid"));
        }
        for (disable, limit, needle) in cases {
            let out = run(
                &fx,
                &["--limit", limit],
                &["true".to_string()],
                &[("JAIL_TEST_DISABLE", disable)],
            );
            assert_eq!(out.code, Some(125), "{who:?} {limit}: {}", out.describe());
            assert!(out.stderr.contains(needle), "{needle}: {}", out.describe());
            assert!(out.stderr.contains(limit), "{limit}: {}", out.describe());
            // The same run with jail's defaults degrades instead, and says so.
            let env = [("JAIL_TEST_DISABLE", disable)];
            let dflt = run(&fx, &[], &["true".to_string()], &env);
            assert!(dflt.ok(), "{}", dflt.describe());
            if disable == "cgroup" {
                let dry = run(&fx, &["--dry-run"], &["true".to_string()], &env);
                assert!(
                    dry.stdout.contains("process count not bounded")
                        && dry.stdout.contains("memory not bounded"),
                    "{}",
                    dry.describe()
                );
            }
        }
    }
}

#[test]
fn limits_come_from_flags_over_profiles_and_bad_ones_are_named() {
    let fx = Fixture::new(Who::User, "limit-flags");
    let profiles = fx.home.join(".config/jail/profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(
        profiles.join("bounded.toml"),
        "extends = [\"default\"]\n[limits]\nprocs = 100\ntmp = \"32M\"\n",
    )
    .unwrap();
    std::fs::write(profiles.join("broken.toml"), "[limits]\nprocs = \"lots\"\n").unwrap();
    fx.give_to(fx.who);
    let dry = |args: &[&str]| {
        let mut a = vec!["--dry-run"];
        a.extend(args);
        a.extend(["--", "true"]);
        let out = fx.jail(&a);
        assert!(out.ok(), "{}", out.describe());
        serde_json::from_str::<serde_json::Value>(&out.stdout).unwrap()
    };
    let j = dry(&["--profile", "bounded"]);
    assert_eq!(j["limits"]["procs"]["value"], 100);
    assert_eq!(j["limits"]["tmp"]["value"], 32 << 20);
    let j = dry(&[
        "--profile",
        "bounded",
        "--limit",
        "procs=200",
        "--limit",
        "shm=8M",
    ]);
    assert_eq!(j["limits"]["procs"]["value"], 200, "the flag wins");
    assert_eq!(
        j["limits"]["tmp"]["value"],
        32 << 20,
        "kept from the profile"
    );
    assert_eq!(j["limits"]["shm"]["value"], 8 << 20);
    for (args, needles) in [
        (
            &["--limit", "disk=1G"][..],
            &["disk=1G", "unknown limit 'disk'"][..],
        ),
        (&["--limit", "memory=lots"], &["memory=lots", "not a size"]),
        (&["--limit", "procs"], &["'procs'", "NAME=VALUE"]),
        (
            &["--profile", "broken"],
            &["profile broken", "limits.procs", "lots"],
        ),
    ] {
        let mut a = args.to_vec();
        a.extend(["--", "true"]);
        let out = fx.jail(&a);
        assert_eq!(out.code, Some(125), "{args:?}: {}", out.describe());
        for n in needles {
            assert!(
                out.stderr.contains(n),
                "{args:?} lacks {n}: {}",
                out.describe()
            );
        }
    }
}

#[test]
fn probe_says_how_each_limit_is_enforced() {
    for who in users() {
        let fx = Fixture::new(who, "limit-probe");
        let text = Run::from(fx.command(jail_bin(), &["probe"]).output().unwrap());
        let line = text
            .stdout
            .lines()
            .find(|l| l.starts_with("limits:"))
            .unwrap_or_else(|| panic!("{}", text.describe()));
        assert!(line.contains("procs 4096"), "{line}");
        assert!(line.contains("(tmpfs size)"), "{line}");
        let json = Run::from(
            fx.command(jail_bin(), &["probe", "--json"])
                .output()
                .unwrap(),
        );
        let j: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
        let by = j["limits"]["memory"]["enforced_by"].as_str().unwrap();
        if who == Who::Root {
            assert_eq!(by, "cgroup", "{line}");
        } else {
            // No delegated cgroup for uid 65534 here: said in the gaps.
            assert_eq!(by, "none", "{line}");
            assert!(
                j["gaps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|g| g.as_str().unwrap().contains("memory not bounded")),
                "{}",
                json.stdout
            );
        }
    }
}

#[test]
fn a_lower_rlimit_of_the_caller_is_kept() {
    if !full_level_or_skip("a_lower_rlimit_of_the_caller_is_kept") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "rlimit-kept");
        // The limit is checked at jail's own first fork against every task of the caller's
        // real uid on the host: it must not depend on what else runs as that user. Root is
        // exempt; the unprivileged user is one no other test runs as; without root (every
        // test the same user) the limit is set well above what the user runs now.
        let (mut cmd, limit) = match who {
            Who::Root => (fx.command(Path::new("/bin/bash"), &[]), 50),
            Who::User if is_root() => {
                chown_tree(&fx.dir, LONE_UID);
                let mut cmd = as_uid(LONE_UID, Path::new("/bin/bash"));
                cmd.current_dir(&fx.dir)
                    .env("HOME", &fx.home)
                    .stdin(std::process::Stdio::null());
                (cmd, 50 + tasks_of(LONE_UID))
            }
            Who::User => {
                // SAFETY: getuid cannot fail.
                let limit = tasks_of(unsafe { libc::getuid() }) + 1000;
                if limit >= 4096 {
                    eprintln!(
                        "skipping a_lower_rlimit_of_the_caller_is_kept as a user: {limit} is \
                         not below jail's own bound"
                    );
                    continue;
                }
                (fx.command(Path::new("/bin/bash"), &[]), limit)
            }
        };
        let script = format!(
            "ulimit -Su {limit} && exec {} -- grep 'Max processes' /proc/self/limits",
            jail_bin().display()
        );
        let out = Run::from(cmd.args(["-c", &script]).output().unwrap());
        assert!(out.ok(), "{who:?}: {}", out.describe());
        let soft = out.stdout.split_whitespace().nth(2).unwrap_or_default();
        assert_eq!(soft, limit.to_string(), "{who:?}: {}", out.describe());
    }
}
