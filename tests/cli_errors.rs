//! Bad input, as root and as an unprivileged user: each mistake gets one clear line on stderr
//! (`jail: …`, or clap's `error: …`), exit 125, no panic, and the command never runs. The
//! near-misses that must work (relative paths, --keep-fd of an open descriptor, --tmp host) are
//! checked next to them.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Fixture, Run, Who, assert_refused, full_level_or_skip, jail_bin, users};

const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

fn unique(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "jail-cli-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// A fixture whose commands get a usable PATH.
fn fixture(who: common::Who, name: &str) -> Fixture {
    Fixture::new(who, name).with_env(&[("PATH", PATH)])
}

/// jail `flags` -- echo RAN: the marker shows whether the command ran.
fn attempt(fx: &Fixture, flags: &[&str]) -> Run {
    let mut args = flags.to_vec();
    args.extend(["--", "echo", "RAN"]);
    fx.jail(&args)
}

#[test]
fn missing_paths_are_refused_by_name() {
    if !full_level_or_skip("missing_paths_are_refused_by_name") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "missing");
        for flag in ["--ro", "--rw", "--hide"] {
            let run = attempt(&fx, &[flag, "nope/deeper"]);
            assert_refused(
                &run,
                &format!("{flag} missing as {who:?}"),
                &[flag, &fx.p("nope/deeper"), "does not exist"],
            );
        }
        let run = attempt(&fx, &["--ro", ""]);
        assert_refused(&run, &format!("--ro '' as {who:?}"), &["--ro"]);
    }
}

#[test]
fn relative_paths_work() {
    if !full_level_or_skip("relative_paths_work") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "relative");
        let run = fx.jail(&["--ro", "./repo", "--", "cat", "repo/file.txt"]);
        assert!(run.ok(), "--ro ./repo as {who:?}\n{}", run.describe());
        assert_eq!(run.stdout, "original\n");

        let run = fx.jail(&[
            "--ro",
            "repo/sub/../src",
            "--rw",
            "./scratch",
            "--",
            "/bin/sh",
            "-c",
            "echo rel > scratch/rel.txt && echo WROTE; echo bad > repo/src/x && echo BAD; true",
        ]);
        assert!(run.ok(), "as {who:?}\n{}", run.describe());
        assert_eq!(run.stdout, "WROTE\n", "as {who:?}\n{}", run.describe());
        assert_eq!(
            std::fs::read_to_string(fx.scratch.join("rel.txt")).unwrap(),
            "rel\n"
        );
        assert!(!fx.repo.join("src/x").exists());
    }
}

#[test]
fn symlinked_paths_are_refused_naming_the_real_path() {
    if !full_level_or_skip("symlinked_paths_are_refused_naming_the_real_path") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "symlink");
        std::os::unix::fs::symlink(&fx.repo, fx.dir.join("link")).unwrap();
        std::os::unix::fs::symlink("repo", fx.dir.join("rellink")).unwrap();
        for (flag, path, real) in [
            ("--ro", "link", fx.p("repo")),
            ("--rw", "link/sub", fx.p("repo/sub")),
            ("--hide", "rellink", fx.p("repo")),
        ] {
            let run = attempt(&fx, &[flag, path]);
            assert_refused(
                &run,
                &format!("{flag} {path} as {who:?}"),
                &[flag, "symlink", &fx.p(path), &format!("real path {real}")],
            );
        }
        // The suggested real path works.
        let run = fx.jail(&["--ro", &fx.p("repo/sub"), "--", "cat", "repo/sub/keep"]);
        assert!(run.ok(), "as {who:?}\n{}", run.describe());
    }
}

#[test]
fn contradicting_rules_are_refused() {
    if !full_level_or_skip("contradicting_rules_are_refused") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "contradict");
        let run = attempt(&fx, &["--ro", &fx.p("repo"), "--rw", "./repo"]);
        assert_refused(
            &run,
            &format!("--ro and --rw of one path as {who:?}"),
            &[&fx.p("repo"), "--ro", "--rw"],
        );
        let run = attempt(&fx, &["--hide", "repo", "--rw", "repo"]);
        assert_refused(
            &run,
            &format!("--hide and --rw of one path as {who:?}"),
            &[&fx.p("repo"), "--hide", "--rw"],
        );
        for flag in ["--ro", "--rw"] {
            let run = attempt(&fx, &["--hide", "repo", flag, "repo/sub"]);
            assert_refused(
                &run,
                &format!("{flag} inside --hide as {who:?}"),
                &[flag, &fx.p("repo/sub"), "inside", &fx.p("repo"), "--hide"],
            );
        }
        // The same rule twice is not a contradiction.
        let run = fx.jail(&[
            "--ro",
            "repo",
            "--ro",
            "./repo",
            "--",
            "cat",
            "repo/file.txt",
        ]);
        assert!(run.ok(), "as {who:?}\n{}", run.describe());
        assert_eq!(run.stdout, "original\n");
    }
}

#[test]
fn rules_in_places_jail_builds_are_refused() {
    if !full_level_or_skip("rules_in_places_jail_builds_are_refused") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "owned");
        for (flag, path, owner) in [
            ("--rw", "/proc/sys/kernel", "/proc"),
            ("--ro", "/proc", "/proc"),
            ("--rw", "/dev/shm", "/dev"),
            ("--hide", "/sys/kernel", "/sys"),
        ] {
            if !Path::new(path).exists() {
                continue;
            }
            let run = attempt(&fx, &[flag, path]);
            assert_refused(
                &run,
                &format!("{flag} {path} as {who:?}"),
                &[flag, path, &format!("{owner} is built by jail")],
            );
        }
    }
}

/// Minor: `--rw /proc/self/...` is refused for going through a symlink, and the message then
/// suggests "the real path /proc/<jail's own pid>/...", which is itself refused (and is the pid
/// of a process that no longer exists).
#[test]
fn a_proc_self_path_is_refused_as_a_proc_path() {
    if !full_level_or_skip("a_proc_self_path_is_refused_as_a_proc_path") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "procself");
        let run = attempt(&fx, &["--rw", "/proc/self/fd"]);
        assert_refused(
            &run,
            &format!("--rw /proc/self/fd as {who:?}"),
            &["/proc is built by jail"],
        );
    }
}

/// /tmp itself cannot be both private and a rule's: refused with the fix. A path beneath it is
/// shown at its own place in the private /tmp (the host's /tmp stays out of sight); with
/// --tmp host the same rule is the host's /tmp's.
#[test]
fn tmp_itself_needs_tmp_host_and_paths_beneath_it_are_shown() {
    if !full_level_or_skip("tmp_itself_needs_tmp_host_and_paths_beneath_it_are_shown") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "tmp");
        for flag in ["--rw", "--ro"] {
            let run = attempt(&fx, &[flag, "/tmp"]);
            assert_refused(
                &run,
                &format!("{flag} /tmp as {who:?}"),
                &[flag, "/tmp", "--tmp host"],
            );
        }
        let run = attempt(&fx, &["--cwd", "/tmp"]);
        assert_refused(
            &run,
            &format!("--cwd /tmp as {who:?}"),
            &["--cwd", "--tmp host"],
        );

        let dir = Path::new("/tmp").join(unique("dir"));
        std::fs::create_dir(&dir).unwrap();
        if common::is_root() {
            let uid = common::uid_of(who);
            std::os::unix::fs::chown(&dir, Some(uid), Some(uid)).unwrap();
        }
        let d = dir.to_string_lossy().into_owned();
        let script = format!("echo in > {d}/f && echo WROTE");
        let run = fx.jail(&["--rw", &d, "--", "/bin/sh", "-c", &script]);
        let landed = std::fs::read_to_string(dir.join("f")).ok();
        assert!(
            run.ok(),
            "--rw under the private /tmp as {who:?}\n{}",
            run.describe()
        );
        assert_eq!(landed.as_deref(), Some("in\n"), "as {who:?}");
        let script = format!("echo again > {d}/f && echo WROTE");
        let run = fx.jail(&["--tmp", "host", "--rw", &d, "--", "/bin/sh", "-c", &script]);
        let landed = std::fs::read_to_string(dir.join("f")).ok();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(run.ok(), "--tmp host as {who:?}\n{}", run.describe());
        assert_eq!(landed.as_deref(), Some("again\n"), "as {who:?}");
    }
}

#[test]
fn bad_flags_and_values_are_refused() {
    if !full_level_or_skip("bad_flags_and_values_are_refused") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "flags");
        let cases: &[(&[&str], &[&str])] = &[
            (&["--frobnicate"], &["--frobnicate"]),
            (&["--read-only", "repo"], &["--read-only"]),
            (&["--timeout", "abc"], &["abc", "--timeout"]),
            (&["--timeout", "0"], &["--timeout"]),
            (&["--timeout", "5d"], &["--timeout"]),
            (&["--timeout", "-1"], &[]),
            (&["--require", "bogus"], &["bogus", "--require"]),
            (&["--tmp", "shared"], &["shared", "--tmp"]),
            (&["--keep-fd", "abc"], &["abc", "--keep-fd"]),
            (&["--keep-fd", "2"], &["--keep-fd 2"]),
            (&["--keep-fd", "0"], &["--keep-fd 0"]),
            (&["--cwd", "nope"], &["--cwd", &fx.p("nope")]),
            (
                &["--cwd", "repo/file.txt"],
                &["--cwd", &fx.p("repo/file.txt"), "not a directory"],
            ),
        ];
        for (flags, needles) in cases {
            let run = attempt(&fx, flags);
            assert_refused(&run, &format!("{flags:?} as {who:?}"), needles);
        }
    }
}

#[test]
fn a_missing_command_is_refused() {
    if !full_level_or_skip("a_missing_command_is_refused") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "nocmd");
        for args in [&[][..], &["--"], &["--ro", "repo"], &["--ro", "repo", "--"]] {
            let run = fx.jail(args);
            assert_refused(&run, &format!("{args:?} as {who:?}"), &[]);
            assert!(
                run.stdout.is_empty(),
                "{args:?} as {who:?}\n{}",
                run.describe()
            );
        }
        // A command without `--` is not taken as one either.
        let run = fx.jail(&["echo", "RAN"]);
        assert_refused(&run, &format!("no -- as {who:?}"), &[]);
    }
}

#[test]
fn keep_fd_must_name_an_open_descriptor() {
    if !full_level_or_skip("keep_fd_must_name_an_open_descriptor") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "keepfd");
        let jail_path = jail_bin().to_string_lossy().into_owned();
        let file = fx.p("repo/file.txt");
        let run_sh = |script: &str| {
            let mut cmd = fx.command(Path::new("/bin/sh"), &["-c", script]);
            cmd.env("PATH", PATH);
            Run::from(cmd.output().unwrap())
        };
        // fd 9 closed: refused.
        let run = run_sh(&format!(
            "exec 9>&-; exec {jail_path} --keep-fd 9 -- echo RAN"
        ));
        assert_refused(
            &run,
            &format!("--keep-fd 9 closed as {who:?}"),
            &["--keep-fd 9", "not an open descriptor"],
        );
        // fd 9 open: kept, and readable inside.
        let run = run_sh(&format!(
            "exec 9<{file}; exec {jail_path} --keep-fd 9 -- /bin/sh -c 'cat <&9'"
        ));
        assert!(run.ok(), "--keep-fd 9 open as {who:?}\n{}", run.describe());
        assert_eq!(run.stdout, "original\n", "as {who:?}");
        // Without --keep-fd the same descriptor is closed inside.
        let run = run_sh(&format!(
            "exec 9<{file}; exec {jail_path} -- /bin/sh -c 'cat <&9 && echo READ'"
        ));
        assert!(
            !run.ok() && !run.stdout.contains("original"),
            "fd 9 leaked in as {who:?}\n{}",
            run.describe()
        );
    }
}

#[test]
fn a_symlink_at_a_protected_name_fails_closed() {
    if !full_level_or_skip("a_symlink_at_a_protected_name_fails_closed") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "protsym");
        std::fs::create_dir_all(fx.repo.join(".git")).unwrap();
        std::os::unix::fs::symlink("../../scratch", fx.repo.join(".git/hooks")).unwrap();
        fx.give_to(who);
        let run = fx.jail(&[
            "--rw",
            "repo",
            "--",
            "/bin/sh",
            "-c",
            "echo pwned > repo/.git/hooks/pre-commit; echo RAN",
        ]);
        assert_refused(
            &run,
            &format!("symlinked .git/hooks as {who:?}"),
            &["--rw", &fx.p("repo/.git/hooks"), "symlink"],
        );
        assert!(!fx.scratch.join("pre-commit").exists());

        // The same for a file name (.envrc pointing outside the project).
        std::fs::remove_file(fx.repo.join(".git/hooks")).unwrap();
        std::fs::write(fx.scratch.join("envrc"), "export A=1\n").unwrap();
        std::os::unix::fs::symlink(fx.scratch.join("envrc"), fx.repo.join(".envrc")).unwrap();
        fx.give_to(who);
        let run = attempt(&fx, &["--rw", "repo"]);
        assert_refused(
            &run,
            &format!("symlinked .envrc as {who:?}"),
            &[&fx.p("repo/.envrc"), "symlink"],
        );
        // Not protected: a symlink elsewhere under --rw is fine.
        std::fs::remove_file(fx.repo.join(".envrc")).unwrap();
        std::os::unix::fs::symlink("file.txt", fx.repo.join("alias.txt")).unwrap();
        let run = fx.jail(&["--rw", "repo", "--", "cat", "repo/alias.txt"]);
        assert!(run.ok(), "as {who:?}\n{}", run.describe());
        assert_eq!(run.stdout, "original\n");
    }
}

/// A symlink at a protected name cannot be kept read-only inside a writable directory (it could
/// be replaced, and a mount would follow it): the refusal says so and gives advice that works.
#[test]
fn following_the_advice_for_a_symlinked_protected_name_works() {
    if !full_level_or_skip("following_the_advice_for_a_symlinked_protected_name_works") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "protsym-advice");
        std::fs::create_dir_all(fx.scratch.join("claude")).unwrap();
        std::os::unix::fs::symlink(fx.scratch.join("claude"), fx.repo.join(".claude")).unwrap();
        fx.give_to(who);
        let first = attempt(&fx, &["--rw", "repo"]);
        assert_refused(
            &first,
            "symlinked .claude",
            &["replace it with the real file or directory", "do not make"],
        );
        // Following the second half of the advice: the project read-only.
        let run = fx.jail(&[
            "--ro",
            "repo",
            "--",
            "/bin/sh",
            "-c",
            "echo x > repo/.claude/settings.json && echo BAD; echo RAN",
        ]);
        assert!(
            run.ok() && run.stdout == "RAN\n",
            "as {who:?}: following the advice of\n  {}\ngives\n{}",
            first.stderr.trim(),
            run.describe()
        );
    }
}

#[test]
fn allow_socket_names_only_an_existing_socket() {
    if !full_level_or_skip("allow_socket_names_only_an_existing_socket") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "allowsock");
        let run = attempt(&fx, &["--allow-socket", &fx.p("repo/file.txt")]);
        assert_refused(
            &run,
            &format!("--allow-socket a file as {who:?}"),
            &[
                "--allow-socket",
                &fx.p("repo/file.txt"),
                "not a unix socket",
            ],
        );
        let run = attempt(&fx, &["--allow-socket", "nope.sock"]);
        assert_refused(
            &run,
            &format!("--allow-socket missing as {who:?}"),
            &["--allow-socket", &fx.p("nope.sock"), "does not exist"],
        );
    }
}

#[test]
fn allow_userns_without_the_mount_view_is_refused() {
    if !full_level_or_skip("allow_userns_without_the_mount_view_is_refused") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "userns-nomount");
        let file = fx.p("repo/file.txt");
        let args = [
            "--allow-userns",
            "--",
            "sh",
            "-c",
            "echo changed > \"$0\"",
            &file,
        ];
        // --allow-userns turns Landlock's filesystem rules off: without the mount view nothing
        // would stop this write.
        let run = fx.jail_with(&args, &[common::Layer::Mount], &[("PATH", PATH)]);
        assert_refused(
            &run,
            &format!("--allow-userns without the mount view as {who:?}"),
            &["--allow-userns", "no layer would protect files"],
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "original\n");
        let mut open = vec!["--allow-unconfined"];
        open.extend(args);
        let run = fx.jail_with(&open, &[common::Layer::Mount], &[("PATH", PATH)]);
        assert_eq!(run.code, Some(0), "{}", run.describe());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "changed\n");
    }
}

/// First-day mistakes (issue 15, item 6): a command without `--`, an empty command, a timeout
/// past the limit. Each gets a line that names the mistake and the fix, exit 125, and nothing runs.
#[test]
fn first_day_mistakes_name_the_fix() {
    if !full_level_or_skip("first_day_mistakes_name_the_fix") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "firstday");
        let run = fx.jail(&["echo", "RAN"]);
        assert_refused(
            &run,
            &format!("no -- as {who:?}"),
            &["put the command after `--`"],
        );
        // A mistyped flag is not a command: clap's own tip is the right one there.
        let run = fx.jail(&["--bogus", "--", "echo", "RAN"]);
        assert_refused(&run, &format!("--bogus as {who:?}"), &["--bogus"]);
        assert!(
            !run.stderr.contains("put the command after"),
            "--bogus as {who:?} told to move a command\n{}",
            run.describe()
        );
        let run = fx.jail(&["--", ""]);
        assert_refused(
            &run,
            &format!("empty command as {who:?}"),
            &["command is empty"],
        );
        let run = attempt(&fx, &["--timeout", "99999999999999999999"]);
        assert_refused(
            &run,
            &format!("huge timeout as {who:?}"),
            &["too long", "1e9"],
        );
        for fd in ["-1", "99999999999"] {
            let run = attempt(&fx, &[&format!("--keep-fd={fd}")]);
            assert_refused(
                &run,
                &format!("--keep-fd {fd} as {who:?}"),
                &["not a descriptor number", "3 to 2147483647"],
            );
            assert!(!run.stderr.contains("-2147483648"), "{}", run.describe());
        }
        // A dry run of a command no run could start says so, with the run's exit code.
        let run = fx.jail(&["--dry-run", "--", "no-such-command-jail"]);
        assert_eq!(run.code, Some(127), "{}", run.describe());
        assert!(
            run.stderr
                .contains("no-such-command-jail: command not found")
                && run.stdout.contains("\"level\""),
            "{}",
            run.describe()
        );
        assert_eq!(fx.jail(&["--dry-run", "--", "true"]).code, Some(0));
    }
}

/// What tools read from jail: `-v` into a pipe carries no colour escapes and no Rust debug
/// structs; every JSON output names the jail version that wrote it; `--help` lists the exit
/// codes and the environment.
#[test]
fn verbose_lines_json_outputs_and_help_are_fit_for_tools() {
    if !full_level_or_skip("verbose_lines_json_outputs_and_help_are_fit_for_tools") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "tools");
        // stderr is a pipe here.
        let run = fx.jail(&["-v", "--", "true"]);
        assert!(run.ok(), "{}", run.describe());
        assert!(
            !run.stderr.contains('\u{1b}'),
            "ANSI escapes in a pipe:\n{}",
            run.describe()
        );
        assert!(
            run.stderr
                .contains("launching true at level full (layers: mount view, landlock, seccomp)"),
            "{}",
            run.describe()
        );
        for debug in ["Layers {", "Full", "seatbelt: false", "[\""] {
            assert!(
                !run.stderr.contains(debug),
                "a debug struct ({debug}):\n{}",
                run.describe()
            );
        }
        for args in [
            &["probe", "--json"][..],
            &["status", "--json"],
            &["profile", "show", "default", "--json"],
            &["--dry-run", "--", "true"],
        ] {
            let run = fx.jail(args);
            let json: serde_json::Value = serde_json::from_str(&run.stdout)
                .unwrap_or_else(|e| panic!("{args:?}: {e}\n{}", run.describe()));
            assert_eq!(json["jail_version"], env!("CARGO_PKG_VERSION"), "{args:?}");
        }
        let help = fx.jail(&["--help"]);
        assert!(help.ok());
        for needle in [
            "Exit codes:",
            "125",
            "127",
            "124",
            "Environment:",
            "XDG_CONFIG_HOME",
            "JAIL_POLICY",
        ] {
            assert!(
                help.stdout.contains(needle),
                "--help lacks {needle}:\n{}",
                help.stdout
            );
        }
    }
}

/// Completions (bash run for real: completing `jail --pro` offers --profile), a man page that
/// groff renders with the exit codes in it, `--version` with the commit, target and features,
/// and the licence files Cargo.toml declares.
#[test]
fn completions_man_page_version_and_licences() {
    let jail = jail_bin().to_string_lossy().into_owned();
    let out = |args: &[&str]| {
        let o = std::process::Command::new(&jail)
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // The script calls jail back by name (tests/manual.rs completes profiles and run ids).
    let fx = Fixture::new(Who::User, "completions");
    std::os::unix::fs::symlink(&jail, fx.dir.join("jail")).unwrap();
    let script = format!(
        "source <({jail} completions bash); COMP_WORDS=(jail --pro); COMP_CWORD=1; \
         _clap_complete_jail jail --pro jail; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    );
    let bash = std::process::Command::new("bash")
        .args(["-c", &script])
        .env("PATH", format!("{}:/usr/bin:/bin", fx.dir.display()))
        .output()
        .unwrap();
    let offered = String::from_utf8_lossy(&bash.stdout);
    assert!(
        offered.lines().any(|l| l == "--profile"),
        "bash offered: {offered}"
    );
    // The variable alone is no completion request: `jail status` still answers (exit 1 on the
    // host, not a completion's 0), and a stop still acts.
    for args in [&["status"][..], &["session", "stop", "no-such-session"]] {
        let o = std::process::Command::new(&jail)
            .args(args)
            .env("JAIL_COMPLETE", "bash")
            .output()
            .unwrap();
        let said =
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && !said.contains("_clap_complete"),
            "JAIL_COMPLETE=bash jail {args:?}: {:?} {said}",
            o.status
        );
    }
    // `jail -- WORD…` with WORD not jail: an alias's completion, or a run with the variable
    // inherited. Neither run nor answered: 125, saying why.
    let o = std::process::Command::new(&jail)
        .args(["--", "/bin/sh", "-c", "echo RAN"])
        .env("JAIL_COMPLETE", "bash")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.code() == Some(125) && o.stdout.is_empty() && said.contains("unset JAIL_COMPLETE"),
        "{o:?}"
    );
    // No zsh or fish here: their scripts are checked for the call back to jail.
    let zsh = out(&["completions", "zsh"]);
    assert!(
        zsh.starts_with("#compdef jail") && zsh.contains("JAIL_COMPLETE=\"zsh\""),
        "{zsh}"
    );
    let fish = out(&["completions", "fish"]);
    assert!(
        fish.contains("complete") && fish.contains("JAIL_COMPLETE=fish jail"),
        "{fish}"
    );
    let page = out(&["man"]);
    assert!(
        page.starts_with(".ie") || page.contains(".TH jail 1"),
        "{page}"
    );
    let rendered = std::process::Command::new("groff")
        .args(["-man", "-Tutf8", "-P", "-cbou"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(page.as_bytes())?;
            c.wait_with_output()
        });
    match rendered {
        Ok(r) => {
            let text = String::from_utf8_lossy(&r.stdout);
            assert!(
                text.contains("Exit codes") && text.contains("--profile"),
                "{text}"
            );
        }
        Err(e) => eprintln!("groff not run ({e}); the roff source was checked"),
    }
    let version = out(&["--version"]);
    assert!(
        version.starts_with(&format!("jail {} (commit ", env!("CARGO_PKG_VERSION")))
            && version.contains("features: test-hooks")
            && version.contains("-linux-"),
        "{version}"
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mit = std::fs::read_to_string(root.join("LICENSE-MIT")).unwrap();
    let apache = std::fs::read_to_string(root.join("LICENSE-APACHE")).unwrap();
    assert!(
        mit.contains("MIT License")
            && apache.contains("Apache License")
            && apache.contains("Version 2.0")
    );
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("license = \"MIT OR Apache-2.0\""));
}
