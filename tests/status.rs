//! `jail status` against forgeries, and long command lines, through the real binary as root and
//! as an unprivileged user.
//!
//! status: a process outside any jail that fakes what the old status believed (no_new_privs, a
//! seccomp filter, a sealed memfd or a read-only file at the fixed place, namespaces of its own)
//! must not get exit 0; each forgery is caught by a named check, which the test asserts, so that
//! removing that check fails the test. A real jail gives 0 with the mount view and 2 (advisory)
//! without it.
//!
//! Long command lines: a 1 MiB command line of many arguments and one argument just under the
//! kernel's MAX_ARG_STRLEN run, with and without the mount view, and the policy file stays small.

mod common;

use common::{Fixture, Layer, Run, full_level_or_skip, users};

/// A PATH every user can search.
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

fn json(text: &str, what: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: not JSON ({e}):\n{text}"))
}

/// jail `args` (flags, `--`, command) as the fixture's user, with layers off.
fn jail_argv(fx: &Fixture, args: &[String], disabled: &[Layer]) -> Run {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    fx.jail_with(&args, disabled, &[("PATH", PATH)])
}

// ---------------------------------------------------------------------------------------------
// Long command lines

/// What the script inside prints: the number of arguments, the length of the longest, and the
/// size of the policy file.
const COUNT_ARGS: &str = "m=0; for a; do [ ${#a} -gt $m ] && m=${#a}; done; \
     echo ARGS=$# LONGEST=$m POLICY=$(wc -c < \"$JAIL_POLICY\")";

fn long_command_runs(fx: &Fixture, args: &[String], disabled: &[Layer], what: &str) -> Run {
    let report = fx.dir.join(format!("report-{}.json", disabled.len()));
    let mut argv: Vec<String> = vec![
        "--report".into(),
        report.to_string_lossy().into_owned(),
        "--".into(),
        "/bin/sh".into(),
        "-c".into(),
        COUNT_ARGS.into(),
        "sh".into(),
    ];
    argv.extend(args.iter().cloned());
    let run = jail_argv(fx, &argv, disabled);
    let who = fx.who;
    assert_eq!(run.code, Some(0), "{what} as {who:?}\n{}", run.describe());
    let longest = args.iter().map(String::len).max().unwrap();
    assert!(
        run.stdout
            .contains(&format!("ARGS={} LONGEST={longest} ", args.len())),
        "{what} as {who:?}: not every argument arrived whole\n{}",
        run.describe()
    );
    // The policy file holds a shortened command and its full size, not the command itself.
    let size: usize = run
        .stdout
        .split("POLICY=")
        .nth(1)
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no policy size\n{}", run.describe()));
    assert!(
        size < 16 * 1024,
        "{what} as {who:?}: the policy file is {size} bytes"
    );
    // The run report, written outside, keeps the whole command.
    let r = json(&std::fs::read_to_string(&report).unwrap(), "report");
    let command = r["command"].as_array().unwrap();
    assert_eq!(command.len(), args.len() + 4, "{what}");
    assert_eq!(command.last().unwrap(), args.last().unwrap().as_str());
    let file = &r["policy"];
    assert_eq!(file["command"]["args"], args.len() + 4, "{what}: {file}");
    assert_eq!(file["command"]["truncated"], true, "{what}");
    run
}

#[test]
fn a_one_mib_command_line_and_a_127_kib_argument_run_with_and_without_the_mount_view() {
    if !full_level_or_skip("long_command_lines") {
        return;
    }
    // MAX_ARG_STRLEN is 32 pages (128 KiB) with the NUL; argv and envp together may take a
    // quarter of the stack rlimit (2 MiB of the default 8 MiB).
    let many: Vec<String> = (0..8192).map(|i| format!("{i:0>127}")).collect();
    let one = vec!["-p".to_string(), "d".repeat(128 * 1024 - 1)];
    for who in users() {
        let fx = Fixture::new(who, "slong");
        for disabled in [&[][..], &[Layer::Mount][..]] {
            long_command_runs(&fx, &many, disabled, "8192 arguments, 1 MiB");
            long_command_runs(&fx, &one, disabled, "one argument of 128 KiB - 1");
        }
        // The dry run prints the whole command.
        let mut argv = vec!["--dry-run".to_string(), "--".into(), "true".into()];
        argv.extend(one.iter().cloned());
        let run = jail_argv(&fx, &argv, &[]);
        assert_eq!(run.code, Some(0), "{}", run.describe());
        let v = json(&run.stdout, "dry run");
        assert_eq!(
            v["policy"]["command"][2].as_str().map(str::len),
            Some(128 * 1024 - 1),
            "{who:?}"
        );
    }
}

/// /dev is sized to the policy file: hundreds of rules (a monorepo's protected names) once made
/// the file larger than a fixed 64 KiB /dev.
#[test]
fn a_policy_with_hundreds_of_rules_fits_on_jails_dev() {
    if !full_level_or_skip("many_rules") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "srules");
        let dir = fx.dir.join("many");
        std::fs::create_dir(&dir).unwrap();
        let mut argv = Vec::new();
        for i in 0..400 {
            let p = dir.join(format!("{i:0>180}"));
            std::fs::write(&p, "x").unwrap();
            argv.push("--ro".to_string());
            argv.push(p.to_string_lossy().into_owned());
        }
        fx.give_to(who);
        argv.extend(["--", "/bin/sh", "-c", "wc -c < \"$JAIL_POLICY\""].map(String::from));
        let run = jail_argv(&fx, &argv, &[]);
        assert_eq!(run.code, Some(0), "{who:?}\n{}", run.describe());
        let size: usize = run.stdout.trim().parse().unwrap();
        assert!(size > 64 * 1024, "the test needs a larger policy: {size}");
    }
}
