//! The platform recipes (platform/container, platform/github-actions, platform/gitlab), measured
//! here without Docker or a CI service:
//!
//! - Docker's default seccomp profile is reproduced by tests/helpers/docker_seccomp.c: under it
//!   jail runs with Landlock and seccomp (level partial), says so, refuses `--require full`, still
//!   blocks the key attacks, and the "metadata not confined" gap is a real gap.
//! - The custom profile platform/container/README.md recommends (`docker_seccomp --allow-jail`)
//!   gives the full level, unless /proc has masked paths (Docker's default `systempaths`).
//! - Jail as pid 1 of a pid namespace (what a container's ENTRYPOINT is): it reaps orphans and
//!   passes on the SIGTERM of `docker stop`.
//! - The CI scripts run the command under jail and fail with 125 below the required level.
//!
//! Everything runs as root and as an unprivileged user where that makes sense.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{
    Background, Fixture, Outsider, Run, Verdict, Who, assert_refused, attack_bin,
    full_level_or_skip, is_root, jail_bin, users, verdict,
};

const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// tests/helpers/docker_seccomp.c, compiled once per content.
fn docker_seccomp_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| common::compile_helper("docker_seccomp"))
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn a() -> String {
    s(attack_bin())
}

/// How the launch is restricted from outside, as a container runtime would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outer {
    /// No restriction: this machine as it is.
    None,
    /// Docker's default seccomp profile (docker_seccomp).
    Docker,
    /// The custom profile the container README recommends (docker_seccomp --allow-jail).
    Custom,
}

/// The argv prefix that applies `outer` and then runs jail.
fn jail_argv(outer: Outer) -> Vec<String> {
    let mut v = Vec::new();
    match outer {
        Outer::None => {}
        Outer::Docker => v.push(s(docker_seccomp_bin())),
        Outer::Custom => {
            v.push(s(docker_seccomp_bin()));
            v.push("--allow-jail".into());
        }
    }
    v.push(s(jail_bin()));
    v
}

fn run_cmd(mut cmd: Command) -> Run {
    Run::from(cmd.output().expect("run"))
}

/// jail `args` under `outer`, as the fixture's user, with layers switched off by the test hook.
fn jail_under(fx: &Fixture, outer: Outer, disabled: &str, args: &[&str]) -> Run {
    let mut argv = jail_argv(outer);
    argv.extend(args.iter().map(|a| a.to_string()));
    let rest: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    let mut cmd = fx.command(Path::new(&argv[0]), &rest);
    cmd.env("JAIL_TEST_DISABLE", disabled).env("PATH", PATH);
    run_cmd(cmd)
}

/// The `jail: warning: …` lines on stderr.
fn warnings(run: &Run) -> Vec<&str> {
    run.stderr
        .lines()
        .filter(|l| l.starts_with("jail: warning"))
        .collect()
}

#[test]
fn docker_seccomp_refuses_what_dockers_default_profile_refuses() {
    // The helper itself: namespaces refused, clone3 answers ENOSYS, plain fork works; without it
    // the same calls succeed (so every test below measures the helper's effect, not the machine).
    if !full_level_or_skip("docker-seccomp-helper") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "ds-helper");
        let ds = s(docker_seccomp_bin());
        for op in ["unshare-user", "clone-newuser", "clone3"] {
            let under = run_cmd(fx.command(Path::new(&ds), &[&a(), op]));
            assert_eq!(verdict(&under), Verdict::Blocked, "{who:?} {op}");
            let errno = if op == "clone3" {
                "errno=38"
            } else {
                "errno=1"
            };
            assert!(under.stdout.contains(errno), "{who:?} {op}: {under:?}");
            let bare = run_cmd(fx.command(attack_bin(), &[op]));
            assert_eq!(verdict(&bare), Verdict::Allowed, "{who:?} {op}: {bare:?}");
        }
        // --allow-jail lifts the namespace refusals but not clone3's ENOSYS.
        for op in ["unshare-user", "clone-newuser"] {
            let run = run_cmd(fx.command(Path::new(&ds), &["--allow-jail", &a(), op]));
            assert_eq!(verdict(&run), Verdict::Allowed, "{who:?} {op}: {run:?}");
        }
        let forks = run_cmd(fx.command(Path::new(&ds), &["/bin/sh", "-c", "(echo sub); echo ok"]));
        assert_eq!(forks.stdout, "sub\nok\n", "{who:?}: {forks:?}");
    }
}

#[test]
fn under_dockers_profile_jail_runs_at_level_partial_and_says_so() {
    if !full_level_or_skip("docker-levels") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "ds-levels");
        // The machine itself gives every layer: what follows is the profile's doing.
        let bare = jail_under(&fx, Outer::None, "", &["probe"]);
        assert!(bare.stdout.contains("level:            full"), "{bare:?}");

        let probe = jail_under(&fx, Outer::Docker, "", &["probe"]);
        assert!(probe.ok(), "{who:?}: {}", probe.describe());
        for needle in [
            "user namespaces:  no",
            "layers:           mount view no, landlock yes, seccomp yes",
            "level:            partial",
        ] {
            assert!(
                probe.stdout.contains(needle),
                "{who:?}: probe lacks {needle:?}\n{}",
                probe.describe()
            );
        }

        // Runs, with one warning line naming what is missing and the first gap.
        let run = jail_under(&fx, Outer::Docker, "", &["--", "/bin/sh", "-c", "echo RAN"]);
        assert_eq!(run.stdout, "RAN\n", "{who:?}: {}", run.describe());
        assert!(run.ok(), "{who:?}: {}", run.describe());
        assert_eq!(
            run.stderr.lines().count(),
            1,
            "{who:?}: not one line\n{}",
            run.describe()
        );
        let w = warnings(&run);
        assert!(
            w.len() == 1
                && w[0].contains("partial confinement, missing mount view")
                && w[0].contains("metadata not confined"),
            "{who:?}: {}",
            run.describe()
        );
        // Proof that the check can fail: at the full level there is no warning at all.
        let quiet = jail_under(&fx, Outer::None, "", &["--", "/bin/sh", "-c", "echo RAN"]);
        assert!(
            quiet.ok() && quiet.stderr.is_empty(),
            "{}",
            quiet.describe()
        );

        let dry_run = |require: &str| {
            jail_under(
                &fx,
                Outer::Docker,
                "",
                &["--require", require, "--dry-run", "--", "true"],
            )
        };
        for require in ["full", "mount"] {
            let refused = jail_under(
                &fx,
                Outer::Docker,
                "",
                &["--require", require, "--", "/bin/sh", "-c", "echo RAN"],
            );
            assert_refused(
                &refused,
                &format!("--require {require} under Docker's profile as {who:?}"),
                &[
                    &format!("required enforcement level '{require}' not met"),
                    "mount view unavailable",
                    "Operation not permitted",
                ],
            );
            // A dry run answers as the run would: exit 0 only where the run would start.
            let dry = dry_run(require);
            assert!(
                dry.code == Some(125)
                    && dry
                        .stderr
                        .contains(&format!("required enforcement level '{require}' not met")),
                "--dry-run --require {require} under Docker's profile as {who:?}: {}",
                dry.describe()
            );
        }
        for require in ["landlock", "any"] {
            let ok = jail_under(
                &fx,
                Outer::Docker,
                "",
                &["--require", require, "--", "/bin/sh", "-c", "echo RAN"],
            );
            assert_eq!(ok.stdout, "RAN\n", "{who:?} {require}: {}", ok.describe());
            let dry = dry_run(require);
            assert!(
                dry.ok() && dry.stdout.contains("\"level\": \"partial\""),
                "{who:?} {require}: {}",
                dry.describe()
            );
        }
    }
}

/// Runs the attack helper under Docker's profile, with `disabled` layers switched off.
fn attack_in_docker(fx: &Fixture, disabled: &str, attack: &[&str]) -> Run {
    let mut args: Vec<String> = fx.ro_flags();
    if disabled.contains("landlock") {
        // No layer protects files then: jail refuses unless told to run anyway.
        args.push("--allow-unconfined".into());
    }
    args.push("--".into());
    args.push(a());
    args.extend(attack.iter().map(|x| x.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    jail_under(fx, Outer::Docker, disabled, &args)
}

#[test]
fn under_dockers_profile_landlock_and_seccomp_still_block_the_key_attacks() {
    if !full_level_or_skip("docker-attacks") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "ds-attacks");
        let f = fx.p("repo/file.txt");
        let key = s(&fx.home.join(".ssh/id_ed25519"));
        let target = Outsider::spawn(who);
        let pid = target.pid();
        // (name, attack, the layers that block it: with them off, it must succeed)
        let attacks: Vec<(&str, Vec<String>, &str)> = vec![
            ("write", vec!["write".into(), f.clone()], "landlock"),
            ("append", vec!["append".into(), f.clone()], "landlock"),
            (
                "rename",
                vec!["rename".into(), f.clone(), fx.p("repo/moved")],
                "landlock",
            ),
            ("unlink", vec!["unlink".into(), f.clone()], "landlock"),
            (
                "read ~/.ssh/id_ed25519",
                vec!["read".into(), key],
                "landlock",
            ),
            (
                "ptrace an outside process",
                vec!["ptrace".into(), pid.clone()],
                "landlock,seccomp",
            ),
            ("io_uring_setup", vec!["io-uring".into()], "seccomp"),
            (
                "TIOCSTI",
                vec!["ioctl-raw".into(), "0".into(), "5412".into()],
                "seccomp",
            ),
        ];
        for (name, attack, blockers) in &attacks {
            let attack: Vec<&str> = attack.iter().map(String::as_str).collect();
            let run = attack_in_docker(&fx, "", &attack);
            assert_eq!(
                verdict(&run),
                Verdict::Blocked,
                "{name} as {who:?}: not blocked under Docker's profile\n{}",
                run.describe()
            );
            assert_eq!(std::fs::read_to_string(&f).unwrap(), "original\n");
            // Proof that the test can fail: with the blocking layers off the attack succeeds
            // under the same profile (Docker's filter alone does not stop it).
            let open = attack_in_docker(&fx, blockers, &attack);
            assert_eq!(
                verdict(&open),
                Verdict::Allowed,
                "{name} as {who:?}: still blocked with {blockers} off\n{}",
                open.describe()
            );
            // Put the project back for the next attack.
            let _ = std::fs::rename(fx.repo.join("moved"), fx.repo.join("file.txt"));
            std::fs::write(&f, "original\n").unwrap();
            fx.give_to(who);
        }
        drop(target);
    }
}

#[test]
fn under_dockers_profile_metadata_is_not_confined() {
    // The gap the warning names first, measured: chmod on a read-only file goes through under
    // Docker's profile, while the full jail (read-only bind, EROFS) refuses it.
    if !full_level_or_skip("docker-metadata") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "ds-metadata");
        let f = fx.p("repo/file.txt");
        let mode = || std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let full = attack_with(&fx, Outer::None, &["chmod", &f]);
        assert_eq!(verdict(&full), Verdict::Blocked, "{who:?}: {full:?}");
        assert_eq!(mode(), 0o644);
        let docker = attack_with(&fx, Outer::Docker, &["chmod", &f]);
        assert_eq!(verdict(&docker), Verdict::Allowed, "{who:?}: {docker:?}");
        assert_eq!(
            mode(),
            0o777,
            "{who:?}: chmod reported success but did not happen"
        );
        // The content stays protected all the same.
        let write = attack_with(&fx, Outer::Docker, &["write", &f]);
        assert_eq!(verdict(&write), Verdict::Blocked, "{who:?}: {write:?}");
    }
}

fn attack_with(fx: &Fixture, outer: Outer, attack: &[&str]) -> Run {
    let mut args = fx.ro_flags();
    args.push("--".into());
    args.push(a());
    args.extend(attack.iter().map(|x| x.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    jail_under(fx, outer, "", &args)
}

#[test]
fn the_recommended_custom_profile_gives_the_full_level() {
    // platform/container/README.md: Docker's default profile plus clone with namespace flags,
    // unshare, mount and mount_setattr. Under it jail builds its mount view (metadata confined).
    if !full_level_or_skip("custom-profile") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "custom");
        let probe = jail_under(&fx, Outer::Custom, "", &["probe"]);
        assert!(
            probe.stdout.contains("level:            full"),
            "{who:?}: {}",
            probe.describe()
        );
        let run = jail_under(
            &fx,
            Outer::Custom,
            "",
            &["--require", "full", "--", "/bin/sh", "-c", "echo RAN"],
        );
        assert_eq!(run.stdout, "RAN\n", "{who:?}: {}", run.describe());
        assert!(run.ok() && run.stderr.is_empty(), "{}", run.describe());
        let f = fx.p("repo/file.txt");
        let chmod = attack_with(&fx, Outer::Custom, &["chmod", &f]);
        assert_eq!(verdict(&chmod), Verdict::Blocked, "{who:?}: {chmod:?}");
        // And jail's own filter still refuses the namespaces that the profile now allows.
        let nested = attack_with(&fx, Outer::Custom, &["unshare-user"]);
        assert_eq!(verdict(&nested), Verdict::Blocked, "{who:?}: {nested:?}");
    }
}

/// `sh -c SCRIPT` as `who` in a mount namespace whose /proc has a masked file and a read-only
/// /proc/sys, as Docker's default `systempaths` leave it (/proc/keys, /proc/timer_list, …
/// covered; /proc/sys, /proc/bus, … read-only).
fn with_masked_proc(who: Who, fx: &Fixture, script: &str) -> Run {
    let inner = match who {
        Who::Root => script.to_string(),
        Who::User => format!(
            "exec setpriv --reuid={u} --regid={u} --clear-groups /bin/sh -c '{script}'",
            u = common::NOBODY
        ),
    };
    let mask = format!(
        "mount --bind /dev/null /proc/keys && mount --bind /proc/sys /proc/sys && \
         mount -o remount,bind,ro /proc/sys && {inner}"
    );
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "/bin/sh",
        "-c",
        &mask,
    ])
    .current_dir(&fx.dir)
    .env("HOME", &fx.home)
    .env("PATH", PATH)
    .stdin(Stdio::null());
    run_cmd(cmd)
}

#[test]
fn masked_proc_paths_cost_the_mount_view_even_with_the_custom_profile() {
    // A fresh /proc may not be mounted in a user namespace while parts of the existing one are
    // covered: Docker's masked and read-only /proc paths stop the view, so the README asks for
    // `--security-opt systempaths=unconfined` too. jail falls back and says why.
    if !is_root() || !full_level_or_skip("masked-proc") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "masked-proc");
        let jail = jail_argv(Outer::Custom).join(" ");
        let run = with_masked_proc(
            who,
            &fx,
            &format!("{jail} --require full -- echo RAN; echo rc=$?"),
        );
        assert!(
            run.stdout.contains("rc=125") && !run.stdout.contains("RAN\n"),
            "{who:?}: {}",
            run.describe()
        );
        assert!(
            run.stderr.contains("mount view unavailable") && run.stderr.contains("/proc"),
            "{who:?}: {}",
            run.describe()
        );
        let partial = with_masked_proc(who, &fx, &format!("{jail} -- echo RAN"));
        assert_eq!(partial.stdout, "RAN\n", "{who:?}: {}", partial.describe());
        assert!(
            partial.stderr.contains("missing mount view"),
            "{}",
            partial.describe()
        );
        // Proof that the masking is what costs it: the same namespace without the masks.
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private"]);
        if who == Who::User {
            cmd.args([
                "setpriv",
                &format!("--reuid={}", common::NOBODY),
                &format!("--regid={}", common::NOBODY),
                "--clear-groups",
            ]);
        }
        cmd.args(jail_argv(Outer::Custom))
            .args(["--require", "full", "--", "echo", "RAN"])
            .current_dir(&fx.dir)
            .env("HOME", &fx.home)
            .stdin(Stdio::null());
        let unmasked = run_cmd(cmd);
        assert_eq!(unmasked.stdout, "RAN\n", "{who:?}: {}", unmasked.describe());
    }
}

#[test]
fn probe_agrees_with_a_run_when_proc_is_masked() {
    if !is_root() || !full_level_or_skip("masked-proc-probe") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "masked-probe");
        let jail = jail_argv(Outer::Custom).join(" ");
        let probe = with_masked_proc(who, &fx, &format!("{jail} probe"));
        let run = with_masked_proc(who, &fx, &format!("{jail} --require full -- true"));
        assert!(run.code == Some(125), "{}", run.describe());
        assert!(
            probe.stdout.contains("level:            partial"),
            "{who:?}: probe promises more than a run gets\n{}\n--- the run\n{}",
            probe.describe(),
            run.describe()
        );
    }
}

#[test]
fn dry_run_agrees_with_a_run_under_dockers_profile() {
    if !full_level_or_skip("docker-dry-run") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "ds-dry");
        let dry = jail_under(&fx, Outer::Docker, "", &["--dry-run", "--", "true"]);
        let json: serde_json::Value = serde_json::from_str(&dry.stdout).unwrap();
        assert_eq!(json["level"], "partial", "{who:?}: {}", dry.describe());
        assert!(
            json["gaps"].to_string().contains("metadata not confined"),
            "{}",
            dry.describe()
        );
    }
}

#[test]
fn namespaced_root_gets_the_full_level() {
    if !full_level_or_skip("userns-root") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "userns-root");
        let mut args = vec!["--user", "--map-root-user"];
        let jail = s(jail_bin());
        args.extend([jail.as_str(), "--require", "full", "--", "echo", "RAN"]);
        let run = run_cmd(fx.command(Path::new("unshare"), &args));
        assert_eq!(run.stdout, "RAN\n", "{who:?}: {}", run.describe());
    }
}

#[test]
fn a_non_root_user_in_a_user_namespace_gets_the_full_level() {
    // The workaround for the bug above, and what the container image does (USER node): a user
    // without CAP_SETUID maps only itself, which the kernel allows in a nested namespace.
    if !full_level_or_skip("userns-user") {
        return;
    }
    let jail = s(jail_bin());
    for who in users() {
        let fx = Fixture::new(who, "userns-user");
        let args = [
            "--user",
            "--map-user",
            "1000",
            "--map-group",
            "1000",
            jail.as_str(),
            "--require",
            "full",
            "--",
            "/bin/sh",
            "-c",
            "id -u; cat /proc/self/uid_map",
        ];
        let run = run_cmd(fx.command(Path::new("unshare"), &args));
        assert!(run.ok(), "{who:?}: {}", run.describe());
        assert!(
            run.stdout.starts_with("1000\n"),
            "{who:?}: {}",
            run.describe()
        );
    }
}

// ------------------------------------------------------------------------------------------
// jail as pid 1 (a container's ENTRYPOINT)

/// `unshare … --pid --fork --mount-proc PID1…` as the fixture's user: a fresh pid namespace
/// with its own /proc, as a container runtime gives its entrypoint. The unprivileged user needs
/// a user namespace for that (`--map-root-user`).
fn in_pid_namespace(fx: &Fixture, pid1: &[String]) -> Command {
    let mut args: Vec<String> = Vec::new();
    if fx.who == Who::User {
        args.extend(["--user".into(), "--map-root-user".into()]);
    }
    args.extend([
        "--pid".into(),
        "--fork".into(),
        "--mount-proc".into(),
        "--kill-child".into(),
    ]);
    args.extend(pid1.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = fx.command(Path::new("unshare"), &args);
    cmd.env("PATH", PATH);
    cmd
}

/// jail (under `outer`) as pid 1, running `sh -c script`.
fn jail_as_pid1(fx: &Fixture, outer: Outer, script: &str) -> Command {
    let mut argv = jail_argv(outer);
    argv.extend(["--require", "any", "--", "/bin/sh", "-c", script].map(String::from));
    in_pid_namespace(fx, &argv)
}

/// Leaves an orphan that exits 0.1 s later, waits until it has exited (a zombie, or already
/// reaped), gives pid 1 a moment to reap it, then counts the zombies this pid namespace holds and
/// names its pid 1.
const ORPHAN_THEN_COUNT: &str = "f=$(mktemp); sh -c \"sleep 0.1 & echo \\$! > $f\"; \
     p=$(cat $f); rm -f $f; i=0; \
     while [ $i -lt 250 ] && [ -e /proc/$p ] && ! grep -qs '^State:.Z' /proc/$p/status; do \
         sleep 0.02; i=$((i+1)); done; \
     sleep 0.3; \
     echo ZOMBIES=$(grep -ls '^State:.Z' /proc/[0-9]*/status | wc -l); \
     echo PID1=$(tr '\\0' ' ' < /proc/1/cmdline)";

fn zombies(run: &Run) -> usize {
    run.stdout
        .lines()
        .find_map(|l| l.strip_prefix("ZOMBIES="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no zombie count\n{}", run.describe()))
}

#[test]
fn jail_as_pid_1_reaps_orphans() {
    if !full_level_or_skip("pid1-reaps") {
        return;
    }
    let jail = s(jail_bin());
    for who in users() {
        let fx = Fixture::new(who, "pid1-reaps");
        // Proof that the count can fail: a pid 1 that never waits (head) keeps the orphan as a
        // zombie.
        // (It ends when the count is written to a fifo: head never waits for a child.)
        let script = format!(
            "fifo=$(mktemp -u); mkfifo $fifo; \
             ({ORPHAN_THEN_COUNT}; exec 3> $fifo; rm -f $fifo; echo done >&3) & \
             exec head -c 1 $fifo > /dev/null"
        );
        let control = run_cmd(in_pid_namespace(
            &fx,
            &["/bin/sh".into(), "-c".into(), script],
        ));
        assert_eq!(zombies(&control), 1, "{who:?}: {}", control.describe());
        for outer in [Outer::None, Outer::Docker] {
            let run = run_cmd(jail_as_pid1(&fx, outer, ORPHAN_THEN_COUNT));
            assert!(run.ok(), "{who:?} {outer:?}: {}", run.describe());
            assert_eq!(zombies(&run), 0, "{who:?} {outer:?}: {}", run.describe());
            // Pid 1 of what the command sees is jail: the supervisor itself under Docker's
            // profile; jail's own init (a fork of the same binary) when it has its pid namespace.
            assert!(
                run.stdout.contains(&format!("PID1={jail} ")),
                "{who:?} {outer:?}: {}",
                run.describe()
            );
        }
    }
}

/// The pids in a process's NSpid line: its pid in each pid namespace, outermost first.
fn nspids(pid: u32) -> Vec<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The direct children of `pid`.
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn argv0(pid: u32) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let first = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    String::from_utf8_lossy(first).into_owned()
}

#[test]
fn sigterm_from_outside_reaches_the_command_through_jail_as_pid_1() {
    // What `docker stop` does: SIGTERM to the container's pid 1, sent from outside its pid
    // namespace. The command's trap runs and its exit code comes back out.
    if !full_level_or_skip("pid1-sigterm") {
        return;
    }
    let jail = s(jail_bin());
    let script = "trap 'echo TERM; exit 3' TERM; echo READY; sleep 30 & wait";
    for who in users() {
        let fx = Fixture::new(who, "pid1-term");
        for outer in [Outer::None, Outer::Docker] {
            let mut bg = Background::spawn(jail_as_pid1(&fx, outer, script));
            bg.expect("READY");
            // unshare's child, seen from here: jail, pid 1 of the namespace below ours.
            let outer_pid = bg.pid() as u32;
            let pid = children(outer_pid)
                .into_iter()
                .find(|p| argv0(*p) == jail)
                .unwrap_or_else(|| panic!("{who:?} {outer:?}: no jail under unshare"));
            let ns = nspids(pid);
            assert_eq!(ns.len(), 2, "{who:?} {outer:?}: NSpid {ns:?}");
            assert_eq!(ns[1], 1, "{who:?} {outer:?}: jail is not pid 1: {ns:?}");
            // SAFETY: sends a signal; no memory is involved.
            assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
            let run = bg.finish();
            assert_eq!(run.code, Some(3), "{who:?} {outer:?}: {}", run.describe());
            assert!(
                run.stdout.contains("TERM"),
                "{who:?} {outer:?}: {}",
                run.describe()
            );
        }
    }
}

/// Pids of processes whose argv[0] is exactly `name` (the attack helper's daemon).
fn named(name: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|p| argv0(*p) == name)
        .collect()
}

/// Waits (at most `wait`) until no process is named `name`; returns those left.
fn gone(name: &str, wait: Duration) -> Vec<u32> {
    let deadline = Instant::now() + wait;
    loop {
        let left = named(name);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_killed_jail_as_pid_1_takes_the_whole_tree_with_it() {
    // The gap "a killed jail leaves the command's children running" (no pid namespace of
    // jail's own, as under Docker's profile) is closed by the container: when pid 1 dies the
    // kernel kills everything else in its pid namespace. Without that, the gap is real.
    if !full_level_or_skip("pid1-sigkill") {
        return;
    }
    let jail = s(jail_bin());
    for who in users() {
        let fx = Fixture::new(who, "pid1-kill");
        for as_pid1 in [true, false] {
            let marker = format!("jail-plat-daemon-{}-{who:?}-{as_pid1}", std::process::id());
            let script = format!(
                "{} daemon {marker}; echo READY; exec sleep 30 >/dev/null 2>&1",
                a()
            );
            let cmd = if as_pid1 {
                jail_as_pid1(&fx, Outer::Docker, &script)
            } else {
                let mut argv = jail_argv(Outer::Docker);
                argv.extend(["--require", "any", "--", "/bin/sh", "-c", &script].map(String::from));
                let rest: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
                fx.command(Path::new(&argv[0]), &rest)
            };
            let mut bg = Background::spawn(cmd);
            bg.expect("READY");
            assert_eq!(
                named(&marker).len(),
                1,
                "{who:?}: the daemon is not running"
            );
            let spawned = bg.pid() as u32;
            let pid = if as_pid1 {
                children(spawned)
                    .into_iter()
                    .find(|p| argv0(*p) == jail)
                    .expect("jail under unshare")
            } else {
                spawned
            };
            assert_eq!(argv0(pid), jail);
            // SAFETY: sends a signal; no memory is involved.
            assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
            let _ = bg.finish();
            // The kernel's kill is done by the time pid 1 is reaped; the daemon outside a pid
            // namespace would stay for good (a short look is enough to see it).
            // Generous where they must go (a loaded machine is slow; gone() returns as soon as
            // they are), short where the one left is expected.
            let wait = Duration::from_millis(if as_pid1 { 30000 } else { 300 });
            let left = gone(&marker, wait);
            for p in &left {
                // SAFETY: as above.
                unsafe { libc::kill(*p as i32, libc::SIGKILL) };
            }
            if as_pid1 {
                assert!(
                    left.is_empty(),
                    "{who:?}: the daemon outlived pid 1: {left:?}"
                );
            } else {
                assert_eq!(
                    left.len(),
                    1,
                    "{who:?}: the gap is not what the warning says"
                );
            }
        }
    }
}

// ------------------------------------------------------------------------------------------
// The CI scripts

/// A copy of platform/ in the fixture (reachable by the unprivileged user), plus a bin dir
/// holding `jail`: a fake checkout and a PATH that has jail.
struct Ci {
    checkout: PathBuf,
    bin: PathBuf,
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

fn ci_setup(fx: &Fixture) -> Ci {
    let checkout = fx.dir.join("checkout");
    let platform = Path::new(env!("CARGO_MANIFEST_DIR")).join("platform");
    copy_tree(&platform, &checkout.join("platform"));
    std::fs::write(checkout.join("Cargo.lock"), "# fake checkout\n").unwrap();
    let bin = fx.dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(jail_bin(), bin.join("jail")).unwrap();
    fx.give_to(fx.who);
    Ci { checkout, bin }
}

impl Ci {
    fn github(&self) -> String {
        s(&self.checkout.join("platform/github-actions/run.sh"))
    }
    fn gitlab(&self) -> String {
        s(&self.checkout.join("platform/gitlab/run.sh"))
    }
    fn path(&self) -> String {
        format!("{}:{PATH}", self.bin.display())
    }
}

/// What the CI command does: proves it ran, inside a jail, with the project writable and HOME
/// not.
const CI_COMMAND: &str = "echo \"hello from $JAIL_PROFILE\"; touch made-by-ci; \
     if touch \"$HOME/planted\" 2>/dev/null; then echo HOME-WRITABLE; fi; \
     jail status >/dev/null; s=$?; [ $s = 0 ] && echo CONFINED; echo STATUS=$s";

/// `bash SCRIPT ARGS` (under `outer`) as the fixture's user, in its project, with `env`.
fn ci_run(fx: &Fixture, outer: Outer, script: &[&str], env: &[(&str, &str)]) -> Run {
    let mut argv: Vec<String> = match outer {
        Outer::None => vec![],
        Outer::Docker => vec![s(docker_seccomp_bin())],
        Outer::Custom => vec![s(docker_seccomp_bin()), "--allow-jail".into()],
    };
    argv.push("/bin/bash".into());
    argv.extend(script.iter().map(|x| x.to_string()));
    let rest: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    let mut cmd = fx.command(Path::new(&argv[0]), &rest);
    cmd.current_dir(&fx.repo)
        .env_remove("JAIL_BIN")
        .env_remove("GITHUB_PATH")
        .env_remove("GITHUB_ACTIONS")
        .env("JAIL_RUN", CI_COMMAND);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_cmd(cmd)
}

#[track_caller]
fn assert_ran_confined(fx: &Fixture, run: &Run, what: &str) {
    assert!(run.ok(), "{what}: {}", run.describe());
    assert!(
        run.stdout.contains("hello from ci") && run.stdout.contains("CONFINED"),
        "{what}: the command's output is missing\n{}",
        run.describe()
    );
    assert!(!run.stdout.contains("HOME-WRITABLE"), "{}", run.describe());
    assert!(
        fx.repo.join("made-by-ci").exists(),
        "{what}: project not writable"
    );
    assert!(!fx.home.join("planted").exists(), "{what}: HOME written");
    let _ = std::fs::remove_file(fx.repo.join("made-by-ci"));
}

#[track_caller]
fn assert_level_refused(run: &Run, what: &str) {
    assert_eq!(run.code, Some(125), "{what}: {}", run.describe());
    assert!(
        !run.stdout.contains("hello from"),
        "{what}: the command ran"
    );
    assert!(
        run.stderr
            .contains("jail: required enforcement level 'full' not met: mount view unavailable"),
        "{what}: {}",
        run.describe()
    );
}

#[test]
fn the_github_action_script_runs_the_command_under_jail() {
    if !full_level_or_skip("github-run") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "gh-run");
        let ci = ci_setup(&fx);
        let path = ci.path();
        let env = [
            ("PATH", path.as_str()),
            ("JAIL_PROFILE", "ci"),
            ("JAIL_REQUIRE", "full"),
        ];
        let run = ci_run(&fx, Outer::None, &[&ci.github(), "run"], &env);
        assert_ran_confined(&fx, &run, &format!("github run as {who:?}"));
        assert!(run.stdout.contains("level:            full"), "probe shown");
        // Inside Docker's default profile `require: full` stops the step, naming the reason.
        let refused = ci_run(&fx, Outer::Docker, &[&ci.github(), "run"], &env);
        assert_level_refused(&refused, &format!("github under Docker as {who:?}"));
        // The require input is passed on, not fixed: `landlock` accepts the partial level.
        let env_landlock = [
            ("PATH", path.as_str()),
            ("JAIL_PROFILE", "ci"),
            ("JAIL_REQUIRE", "landlock"),
        ];
        let partial = ci_run(&fx, Outer::Docker, &[&ci.github(), "run"], &env_landlock);
        // Without the mount view `jail status` is advisory (exit 2).
        assert!(
            partial.ok()
                && partial.stdout.contains("hello from ci")
                && partial.stdout.contains("STATUS=2"),
            "{who:?}: {}",
            partial.describe()
        );
        // Without jail anywhere the script stops rather than run the command unconfined.
        let missing = ci_run(
            &fx,
            Outer::None,
            &[&ci.github(), "run"],
            &[("PATH", PATH), ("JAIL_PROFILE", "ci")],
        );
        assert_eq!(missing.code, Some(125), "{}", missing.describe());
        assert!(
            !missing.stdout.contains("hello from"),
            "{}",
            missing.describe()
        );
        // Extra flags reach jail: HOME made writable on request.
        let home = s(&fx.home);
        let flags = format!("--rw {home}");
        let env_flags = [
            ("PATH", path.as_str()),
            ("JAIL_PROFILE", "ci"),
            ("JAIL_FLAGS", flags.as_str()),
        ];
        let opened = ci_run(&fx, Outer::None, &[&ci.github(), "run"], &env_flags);
        assert!(
            opened.stdout.contains("HOME-WRITABLE"),
            "{who:?}: {}",
            opened.describe()
        );
    }
}

#[test]
fn the_gitlab_script_runs_the_command_under_jail() {
    if !full_level_or_skip("gitlab-run") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "gl-run");
        let ci = ci_setup(&fx);
        let path = ci.path();
        let env = [
            ("PATH", path.as_str()),
            ("JAIL_PROFILE", "ci"),
            ("JAIL_REQUIRE", "full"),
            ("GITLAB_CI", "true"),
        ];
        let run = ci_run(&fx, Outer::None, &[&ci.gitlab()], &env);
        assert_ran_confined(&fx, &run, &format!("gitlab run as {who:?}"));
        let refused = ci_run(&fx, Outer::Docker, &[&ci.gitlab()], &env);
        assert_level_refused(&refused, &format!("gitlab under Docker as {who:?}"));
    }
}

/// A `cargo` that records its arguments and "installs" the jail under test.
fn fake_cargo(fx: &Fixture, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let log = fx.dir.join("cargo.log");
    let script = format!(
        "#!/bin/sh\necho \"$@\" >> {log}\nroot=\nwhile [ $# -gt 0 ]; do\n  \
         [ \"$1\" = --root ] && root=$2\n  shift\ndone\nmkdir -p \"$root/bin\" && \
         ln -sf {jail} \"$root/bin/jail\"\n",
        log = log.display(),
        jail = jail_bin().display()
    );
    let cargo = dir.join("cargo");
    std::fs::write(&cargo, script).unwrap();
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
    fx.give_to(fx.who);
    log
}

#[test]
fn the_ci_scripts_build_jail_from_the_checkout_they_live_in() {
    // Installation is `cargo install --locked --path CHECKOUT --root ROOT` (a real build takes
    // minutes: a recording cargo stands in for it); GitHub gets ROOT/bin on its PATH file.
    if !full_level_or_skip("ci-install") {
        return;
    }
    let who = users()[0];
    let fx = Fixture::new(who, "ci-install");
    let ci = ci_setup(&fx);
    let tools = fx.dir.join("tools");
    let log = fake_cargo(&fx, &tools);
    let root = fx.dir.join("install");
    let gh_path = fx.dir.join("github_path");
    std::fs::write(&gh_path, "").unwrap();
    fx.give_to(who);
    let path = format!("{}:{PATH}", tools.display());
    let checkout = s(&ci.checkout);
    let run = ci_run(
        &fx,
        Outer::None,
        &[&ci.github(), "install", &checkout, &s(&root)],
        &[("PATH", &path), ("GITHUB_PATH", &s(&gh_path))],
    );
    assert!(run.ok(), "{}", run.describe());
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        format!(
            "install --locked --path {checkout} --root {}\n",
            root.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(&gh_path).unwrap(),
        format!("{}/bin\n", root.display())
    );
    assert_eq!(run.stdout.trim(), format!("{}/bin/jail", root.display()));
    // Not a checkout of jail: refused before cargo runs.
    let bad = ci_run(
        &fx,
        Outer::None,
        &[
            &ci.github(),
            "install",
            &s(&fx.repo),
            &s(&fx.dir.join("other")),
        ],
        &[("PATH", &path)],
    );
    assert_eq!(bad.code, Some(125), "{}", bad.describe());

    // GitLab: no jail on PATH, so the script builds it from its own checkout, then runs.
    std::fs::remove_file(&log).unwrap();
    let gl_root = fx.dir.join("gl-install");
    let gl = ci_run(
        &fx,
        Outer::None,
        &[&ci.gitlab()],
        &[
            ("PATH", &path),
            ("JAIL_INSTALL_ROOT", &s(&gl_root)),
            ("JAIL_PROFILE", "ci"),
        ],
    );
    assert_ran_confined(&fx, &gl, "gitlab with install");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        format!(
            "install --locked --path {checkout} --root {}\n",
            gl_root.display()
        )
    );
}

/// Neither user namespaces nor Landlock (Docker's profile on an old kernel, forced here): no
/// layer protects files, so the default refuses; `--allow-unconfined` is the only way to run,
/// and every such run says so. The write that then succeeds shows the warning is not idle.
#[test]
fn with_no_layer_for_files_jail_refuses_unless_allow_unconfined_and_then_warns_every_run() {
    if !full_level_or_skip("unconfined") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "unconfined");
        let f = fx.p("repo/file.txt");
        let write = ["--ro", &fx.p("repo"), "--", "/bin/sh", "-c"];
        let script = format!("echo RAN; echo changed > {f}");
        let mut args: Vec<&str> = write.to_vec();
        args.push(&script);
        let refused = jail_under(&fx, Outer::Docker, "landlock", &args);
        assert_refused(
            &refused,
            &format!("{who:?} no layer"),
            &["no layer can protect files", "--allow-unconfined"],
        );
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "original\n");
        for round in 0..2 {
            let mut args = vec!["--allow-unconfined"];
            args.extend(write);
            args.push(&script);
            let run = jail_under(&fx, Outer::Docker, "landlock", &args);
            assert_eq!(
                run.stdout,
                "RAN\n",
                "{who:?} round {round}: {}",
                run.describe()
            );
            let w = warnings(&run);
            assert!(
                w.len() == 1 && w[0].contains("UNCONFINED") && w[0].contains("landlock"),
                "{who:?} round {round}: {}",
                run.describe()
            );
            assert_eq!(std::fs::read_to_string(&f).unwrap(), "changed\n");
            std::fs::write(&f, "original\n").unwrap();
        }
    }
}
