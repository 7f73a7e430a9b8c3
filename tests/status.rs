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

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::{Fixture, Layer, Run, Who, compile_helper, full_level_or_skip, jail_bin, users};

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
// jail status

/// The finding of the check called `name` in status --json output.
fn finding<'a>(v: &'a serde_json::Value, name: &str) -> (&'a str, &'a str) {
    let c = v["checks"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no check {name:?}: {v:#}"));
    (
        c["finding"].as_str().unwrap_or_default(),
        c["detail"].as_str().unwrap_or_default(),
    )
}

/// The policy file a real jail shows its command (with `disabled` layers off), copied where a
/// forger can read it, mode 0444.
fn real_policy(fx: &Fixture, disabled: &[Layer]) -> PathBuf {
    let args = ["--", "/bin/sh", "-c", "cat \"$JAIL_POLICY\""];
    let run = fx.jail_with(&args, disabled, &[("PATH", PATH)]);
    assert_eq!(run.code, Some(0), "{}", run.describe());
    let v = json(&run.stdout, "policy file");
    assert_eq!(v["layers"]["mount"], disabled.is_empty(), "{v}");
    let path = fx.dir.join(format!("policy-{}.json", disabled.len()));
    std::fs::write(&path, &run.stdout).unwrap();
    fx.give_to(fx.who);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    path
}

/// `jail status --json` as the fixture's user, started by `program args`.
fn status_under(fx: &Fixture, program: &Path, args: &[&str]) -> (Run, serde_json::Value) {
    let jail = jail_bin().to_string_lossy().into_owned();
    let mut all: Vec<&str> = args.to_vec();
    all.extend([jail.as_str(), "status", "--json"]);
    let run = Run::from(
        fx.command(program, &all)
            .env("PATH", PATH)
            .env_remove("JAIL_TEST_DISABLE")
            .output()
            .unwrap(),
    );
    let v = json(&run.stdout, &format!("status --json\n{}", run.describe()));
    (run, v)
}

/// How the landlock check says our own /proc file could be opened for writing.
const NO_LANDLOCK_RULES: &str = "/proc/self/comm opens for writing";

#[track_caller]
fn assert_caught(run: &Run, v: &serde_json::Value, check: &str, needle: &str, what: &str) {
    assert_eq!(
        run.code,
        Some(1),
        "{what}: status was fooled\n{}",
        run.describe()
    );
    assert_eq!(v["verdict"], "not_confined", "{what}");
    assert!(v["policy"].is_null(), "{what}: the forged policy is shown");
    let (found, detail) = finding(v, check);
    assert!(
        found == "failed" && detail.contains(needle),
        "{what}: the {check:?} check did not catch it ({found}: {detail})\n{v:#}"
    );
}

/// Landlock's signal scope (kill(1, 0) refused) needs ABI 6.
fn signal_scope_here() -> bool {
    let out = std::process::Command::new(jail_bin())
        .args(["probe", "--json"])
        .output()
        .unwrap();
    json(&String::from_utf8_lossy(&out.stdout), "probe")["features"]["landlock_abi"]
        .as_u64()
        .is_some_and(|abi| abi >= 6)
}

#[track_caller]
fn assert_verified(v: &serde_json::Value, check: &str, what: &str) {
    let (found, detail) = finding(v, check);
    assert_eq!(found, "verified", "{what}: {check}: {detail}\n{v:#}");
}

#[test]
fn a_real_jail_is_confirmed_with_the_mount_view_and_advisory_without_it() {
    if !full_level_or_skip("status_levels") {
        return;
    }
    let jail = jail_bin().to_string_lossy().into_owned();
    for who in users() {
        let fx = Fixture::new(who, "sreal");
        for (disabled, code, verdict) in [
            (&[][..], 0, "confined"),
            // jail uses Landlock wherever the kernel has it: a policy without it is advisory.
            (&[Layer::Landlock][..], 2, "advisory"),
            (&[Layer::Mount][..], 2, "advisory"),
        ] {
            let what = format!("{who:?} with {disabled:?} off");
            let run = fx.jail_with(&["--", &jail, "status", "--json"], disabled, &[]);
            assert_eq!(run.code, Some(code), "{what}\n{}", run.describe());
            let v = json(&run.stdout, "status --json");
            assert_eq!(v["verdict"], verdict, "{what}: {v:#}");
            assert_eq!(v["exit_code"], code, "{what}");
            for check in [
                "no_new_privs",
                "capabilities",
                "seccomp filter",
                "read-only paths",
            ] {
                assert_verified(&v, check, &what);
            }
            assert_verified(&v, "hidden paths", &what);
            if disabled.is_empty() {
                assert_verified(&v, "landlock", &what);
            }
            let (source, detail) = finding(&v, "policy file");
            if disabled.contains(&Layer::Mount) {
                // The sealed memfd is the only advisory piece.
                assert_eq!(source, "advisory", "{what}: {detail}");
                let advisory: Vec<&serde_json::Value> = v["checks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|c| c["finding"] != "verified")
                    .collect();
                assert_eq!(advisory.len(), 1, "{what}: {v:#}");
                let text = fx.jail_with(&["--", &jail, "status"], disabled, &[]);
                assert_eq!(text.code, Some(2));
                assert!(
                    text.stdout.contains("inside a jail: level partial")
                        && text
                            .stdout
                            .contains("advisory (exit 2): policy file: a sealed memfd"),
                    "{}",
                    text.describe()
                );
            } else {
                assert_eq!(source, "verified", "{what}: {detail}");
                assert!(detail.contains("a tmpfs, mounted read-only"), "{detail}");
            }
            // A library preloaded by variable could answer for the kernel: advisory.
            let run = fx.jail_with(
                &["--", &jail, "status", "--json"],
                disabled,
                &[("LD_PRELOAD", "libm.so.6")],
            );
            assert_eq!(run.code, Some(2), "{what}, LD_PRELOAD\n{}", run.describe());
            let v = json(&run.stdout, "status");
            let (found, detail) = finding(&v, "process image");
            assert!(
                found == "advisory" && detail.contains("LD_PRELOAD"),
                "{what}: {v:#}"
            );
            // A path shown inside a hidden directory (~/.aws, hidden by default) is no hidden
            // content.
            let credentials = fx.p("home/.aws/credentials");
            let flags = ["--ro", &credentials, "--", &jail, "status", "--json"];
            let run = fx.jail_with(&flags, disabled, &[]);
            assert_eq!(
                run.code,
                Some(code),
                "{what}, one path shown\n{}",
                run.describe()
            );
            assert_verified(&json(&run.stdout, "status"), "hidden paths", &what);
        }
    }
}

/// The forgery of the issue: no_new_privs, an allow-all seccomp filter, and a sealed memfd named
/// like jail's holding a real policy that claims the mount view.
#[test]
fn status_is_not_fooled_by_a_sealed_memfd_under_a_seccomp_filter() {
    if !full_level_or_skip("status_forged_memfd") {
        return;
    }
    let forge = compile_helper("forge");
    for who in users() {
        let fx = Fixture::new(who, "smemfd");
        let full = real_policy(&fx, &[]);
        let partial = real_policy(&fx, &[Layer::Mount]);
        let (full, partial) = (full.to_string_lossy(), partial.to_string_lossy());

        let what = format!("{who:?}: memfd claiming the mount view, allow-all filter");
        let (run, v) = status_under(&fx, &forge, &["allow", &full]);
        assert_caught(
            &run,
            &v,
            "policy file",
            "claims the mount view but is not jail's file",
            &what,
        );

        // Claiming no mount view instead: the filter is not jail's.
        let what = format!("{who:?}: memfd claiming partial, allow-all filter");
        let (run, v) = status_under(&fx, &forge, &["allow", &partial]);
        assert_caught(
            &run,
            &v,
            "seccomp filter",
            "a filter that is not jail's",
            &what,
        );

        // A filter that answers the probes as jail's does: writes where the permissions allow
        // them are not refused (our own /proc/self/comm among them), and (as root, whose uid
        // pid 1 has) no signal scope holds.
        let what = format!("{who:?}: memfd claiming partial, a filter mimicking jail's");
        let (run, v) = status_under(&fx, &forge, &["mimic", &partial]);
        assert_verified(&v, "seccomp filter", &what);
        assert_caught(&run, &v, "read-only paths", "could be written", &what);
        assert_caught(&run, &v, "landlock", NO_LANDLOCK_RULES, &what);
        if who == Who::Root && signal_scope_here() {
            assert_caught(&run, &v, "landlock", "kill(1, 0) allowed", &what);
        }
        assert_caught(&run, &v, "hidden paths", "readable: ", &what);
    }
}

/// Everything the fixed file's checks look at, reproduced with `unshare -rmpf`: a read-only
/// tmpfs on /dev with a real policy at /dev/jail/policy.json, owned by the caller, new user,
/// mount and pid namespaces; then no capabilities, no_new_privs and a filter mimicking jail's.
/// The file checks pass (they are not enough alone); the effects are what give it away.
const UNSHARE_FORGERY: &str = r#"set -e
mount -t tmpfs -o size=64k,mode=755 tmpfs /dev
mkdir /dev/jail
cp "$2" /dev/jail/policy.json
chmod 444 /dev/jail/policy.json
[ "$1" = rw ] || mount -o remount,ro,bind /dev
shift 2
setpriv --inh-caps=-all --bounding-set=-all "$@"
"#;

/// `jail status --json` under [`UNSHARE_FORGERY`] made by `unshare unshare_flags`, the /dev
/// tmpfs left `rw` or made `ro`.
fn unshare_forgery(
    fx: &Fixture,
    unshare_flags: &[&str],
    dev: &str,
    policy: &Path,
) -> (Run, serde_json::Value) {
    let forge = compile_helper("forge").to_string_lossy().into_owned();
    let policy = policy.to_string_lossy();
    let mut args = unshare_flags.to_vec();
    args.extend([
        "/bin/sh",
        "-c",
        UNSHARE_FORGERY,
        "sh",
        dev,
        &policy,
        &forge,
        "mimic",
        "-",
    ]);
    let (run, v) = status_under(fx, Path::new("unshare"), &args);
    assert!(!run.stderr.contains("unshare:"), "{}", run.describe());
    (run, v)
}

#[test]
fn status_is_not_fooled_by_a_read_only_file_at_the_fixed_place_in_namespaces_of_its_own() {
    if !full_level_or_skip("status_forged_unshare") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "sunshare");
        let full = real_policy(&fx, &[]);
        let userns = ["-rmpf", "--mount-proc"];
        let what = format!("{who:?}: unshare -rmpf, a read-only file at the fixed place");
        let (run, v) = unshare_forgery(&fx, &userns, "ro", &full);
        for check in [
            "policy file",
            "no_new_privs",
            "capabilities",
            "seccomp filter",
        ] {
            assert_verified(&v, check, &what);
        }
        assert_caught(
            &run,
            &v,
            "read-only paths",
            "/ is on a writable mount",
            &what,
        );
        if signal_scope_here() {
            assert_caught(&run, &v, "landlock", "kill(1, 0) allowed", &what);
        }
        assert_caught(&run, &v, "landlock", NO_LANDLOCK_RULES, &what);
        assert_caught(&run, &v, "hidden paths", "readable: ", &what);

        // The file's own checks: its mount must be read-only...
        let what = format!("{who:?}: unshare -rmpf, the file on a writable tmpfs");
        let (run, v) = unshare_forgery(&fx, &userns, "rw", &full);
        assert_caught(&run, &v, "policy file", "is on a writable mount", &what);
        // ...it must claim the mount view it sits in...
        let partial = real_policy(&fx, &[Layer::Mount]);
        let what = format!("{who:?}: unshare -rmpf, a policy without the mount view at its place");
        let (run, v) = unshare_forgery(&fx, &userns, "ro", &partial);
        assert_caught(&run, &v, "policy file", "claims no mount view", &what);
        // ...and the namespaces not the initial ones (root may make a mount namespace alone).
        if who == Who::Root {
            let what = "root: unshare -m, a read-only file at the fixed place";
            let (run, v) = unshare_forgery(&fx, &["-m"], "ro", &full);
            assert_caught(&run, &v, "policy file", "initial user namespace", what);
        }
    }
}

/// Outside any jail, with the variables pointing at a copy of a real policy file: every check
/// of the process itself fails.
#[test]
fn status_outside_names_each_missing_layer() {
    if !full_level_or_skip("status_outside") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "soutside");
        let partial = real_policy(&fx, &[Layer::Mount]);
        let mut cmd = fx.command(jail_bin(), &["status", "--json"]);
        cmd.env("PATH", PATH)
            .env_remove("JAIL_TEST_DISABLE")
            .env("JAIL", "1")
            .env("JAIL_POLICY", &partial);
        let run = Run::from(cmd.output().unwrap());
        let v = json(&run.stdout, &run.describe());
        let what = format!("{who:?}: outside, JAIL_POLICY at a copy");
        assert_caught(&run, &v, "policy file", "is not jail's sealed memfd", &what);
        assert_caught(&run, &v, "no_new_privs", "no_new_privs: 0", &what);
        assert_caught(&run, &v, "seccomp filter", "Seccomp: 0", &what);
        if who == Who::Root {
            assert_caught(&run, &v, "capabilities", "effective", &what);
        }
    }
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
    // The policy file holds a shortened command and its full size, not the command itself
    // (bounded well below the 127 KiB argument; it also lists every state directory jail has
    // used on this machine, hidden in every run, so its size is not a constant).
    let size: usize = run
        .stdout
        .split("POLICY=")
        .nth(1)
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no policy size\n{}", run.describe()));
    assert!(
        size < 64 * 1024,
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

// ---------------------------------------------------------------------------------------------
// Red-team round 2b: a forgery that claims less than a real jail and builds only what is probed.

/// Like [`UNSHARE_FORGERY`], but only what the claims of an edited policy make status probe is
/// built: `/` and one directory (the claimed cwd and HOME) on read-only mounts; every other
/// mount stays writable ($3, the "escape" directory, is bound writable on purpose).
const MINIMAL_FORGERY: &str = r#"set -e
mount -t tmpfs -o size=64k,mode=755 tmpfs /dev
mkdir /dev/jail
cp "$2" /dev/jail/policy.json
chmod 444 /dev/jail/policy.json
mount -o remount,ro,bind /dev
mount --bind "$1" "$1"
mount -o remount,ro,bind "$1"
mount --bind "$3" "$3"
mount -o remount,ro,bind /
export HOME="$1"
shift 3
setpriv --inh-caps=-all --bounding-set=-all "$@"
"#;

/// A policy claiming the mount view and seccomp but no Landlock (on a kernel that has it), no
/// hidden path, no rule, `level: full`, and `ro` as its working directory.
fn minimal_policy(fx: &Fixture, ro: &Path) -> PathBuf {
    let real = real_policy(fx, &[]);
    let mut v = json(&std::fs::read_to_string(&real).unwrap(), "policy");
    v["layers"]["landlock"] = false.into();
    v["level"] = "full".into();
    v["hidden"] = serde_json::json!([]);
    v["writable"] = serde_json::json!([]);
    v["policy"]["rules"] = serde_json::json!([]);
    v["policy"]["cwd"] = ro.to_string_lossy().into_owned().into();
    let path = fx.dir.join("policy-minimal.json");
    std::fs::write(&path, v.to_string()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    path
}

/// Outside any jail, `unshare -rmpf` and a policy that claims no Landlock and nothing hidden:
/// status believes the missing Landlock (it checks a claim of no seccomp against the kernel,
/// not one of no Landlock), prints `level full`, and probes only `/`, the cwd and HOME, so a
/// writable mount anywhere else passes. docs/status.md: "Nothing a process outside any jail can
/// set up by itself (… namespaces of its own made with `unshare -rmpf`) makes status exit 0."
#[test]
fn status_is_not_fooled_by_a_forgery_that_claims_no_landlock_and_leaves_mounts_writable() {
    if !full_level_or_skip("status_forged_minimal") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "sminimal");
        let ro = fx.dir.join("ro");
        let escape = fx.dir.join("escape");
        std::fs::create_dir_all(&ro).unwrap();
        std::fs::create_dir_all(&escape).unwrap();
        let policy = minimal_policy(&fx, &ro);
        fx.give_to(who);
        let forge = compile_helper("forge").to_string_lossy().into_owned();
        let (ro_s, escape_s, policy_s) = (
            ro.to_string_lossy().into_owned(),
            escape.to_string_lossy().into_owned(),
            policy.to_string_lossy().into_owned(),
        );
        let args = [
            "-rmpf",
            "--mount-proc",
            "/bin/sh",
            "-c",
            MINIMAL_FORGERY,
            "sh",
            &ro_s,
            &policy_s,
            &escape_s,
            &forge,
            "mimic",
            "-",
        ];
        let (run, v) = status_under(&fx, Path::new("unshare"), &args);
        assert!(!run.stderr.contains("unshare:"), "{}", run.describe());
        assert_ne!(
            run.code,
            Some(0),
            "{who:?}: a forgery without Landlock, with {escape_s} writable, got exit 0\n{v:#}"
        );
    }
}

/// Red-team round 2b: a nested jail that cannot make a mount view of its own (no user
/// namespaces inside the outer jail) hands its policy over as a memfd, but status reads the
/// outer jail's /dev/jail/policy.json first: it reports the outer profile and its writable
/// project, exit 0, while the inner `review` jail has made the project read-only.
#[test]
fn status_in_a_nested_jail_reports_the_inner_policy() {
    if !full_level_or_skip("status_nested") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "snested");
        let jail = jail_bin().to_string_lossy().into_owned();
        let repo = fx.repo.to_string_lossy().into_owned();
        let args: Vec<String> = [
            "--rw",
            &repo,
            "--",
            &jail,
            "--profile",
            "review",
            "--",
            &jail,
            "status",
            "--json",
        ]
        .map(String::from)
        .to_vec();
        let run = jail_argv(&fx, &args, &[]);
        let v = json(&run.stdout, &run.describe());
        assert!(
            v["policy"]["profile"] == "review" || v["exit_code"] != 0,
            "{who:?}: the nested review jail's status shows the outer policy, exit 0\n{v:#}"
        );
    }
}

/// Red-team round 2b: root with a mount namespace alone (the initial user namespace, every
/// capability kept) covers /proc with a tmpfs holding a fake `self/status` (NoNewPrivs 1, empty
/// capability sets) and plain files at `self/ns/{user,pid,mnt}` (any inode number but the
/// initial ones'): every fact status reads by path agrees, and the seccomp probes are answered
/// by a real mimicking filter.
const FAKE_PROC_FORGERY: &str = r#"set -e
mount -t tmpfs -o size=64k,mode=755 tmpfs /dev
mkdir /dev/jail
cp "$2" /dev/jail/policy.json
chmod 444 /dev/jail/policy.json
mount -o remount,ro,bind /dev
mount --bind "$1" "$1"
mount -o remount,ro,bind "$1"
mount -o remount,ro,bind /
mount -t tmpfs -o size=64k,mode=755 tmpfs /proc
mkdir -p /proc/self/ns
printf 'NoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t2\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\n' > /proc/self/status
touch /proc/self/ns/user /proc/self/ns/pid /proc/self/ns/mnt
export HOME="$1"
shift 3
exec "$@"
"#;

#[test]
fn status_is_not_fooled_by_a_fake_proc_as_root_in_the_initial_user_namespace() {
    if !full_level_or_skip("status_fake_proc") || !common::is_root() {
        return;
    }
    let fx = Fixture::new(Who::Root, "sfakeproc");
    let ro = fx.dir.join("ro");
    std::fs::create_dir_all(&ro).unwrap();
    let policy = minimal_policy(&fx, &ro);
    let forge = compile_helper("forge").to_string_lossy().into_owned();
    let (ro_s, policy_s) = (
        ro.to_string_lossy().into_owned(),
        policy.to_string_lossy().into_owned(),
    );
    let args = [
        "-m",
        "/bin/sh",
        "-c",
        FAKE_PROC_FORGERY,
        "sh",
        &ro_s,
        &policy_s,
        "-",
        &forge,
        "mimic",
        "-",
    ];
    let (run, v) = status_under(&fx, Path::new("unshare"), &args);
    assert!(!run.stderr.contains("unshare:"), "{}", run.describe());
    assert_ne!(
        run.code,
        Some(0),
        "root with every capability, in the initial user namespace, got exit 0\n{v:#}"
    );
}
