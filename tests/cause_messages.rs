//! Each refusal names the cause that is really there and the fix for it, never a flag that was
//! not given or a fault the user does not have; and a run that needs nothing from a place
//! (HOME) is not refused over it. As root and as an unprivileged user.

mod common;

use std::path::Path;

use common::{Fixture, Run, assert_refused, full_level_or_skip, users};

const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

fn fixture(who: common::Who, name: &str) -> Fixture {
    Fixture::new(who, name).with_env(&[("PATH", PATH)])
}

fn echo(flags: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    args.extend(["--", "echo", "RAN"].map(String::from));
    args
}

fn at(fx: &Fixture, dir: &Path, args: &[String], env: &[(&str, &str)]) -> Run {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    fx.jail_at(dir, &args, env)
}

#[test]
fn a_hidden_or_private_working_directory_blames_no_cwd_flag_not_given() {
    if !full_level_or_skip("a_hidden_or_private_working_directory_blames_no_cwd_flag_not_given") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "cwd-cause");
        let run = at(&fx, &fx.repo, &echo(&["--hide", "/"]), &[]);
        let what = format!("--hide / as {who:?}");
        assert_refused(&run, &what, &["working directory", "--hide /", "--cwd"]);
        assert!(
            !run.stderr.contains("jail: --cwd"),
            "{what}\n{}",
            run.describe()
        );
        let run = at(&fx, Path::new("/tmp"), &echo(&[]), &[]);
        let what = format!("started in /tmp as {who:?}");
        assert_refused(&run, &what, &["working directory /tmp", "--tmp host"]);
        assert!(
            !run.stderr.contains("jail: --cwd"),
            "{what}\n{}",
            run.describe()
        );
        // Given, the flag is named.
        let run = at(&fx, &fx.dir, &echo(&["--cwd", "/tmp"]), &[]);
        assert_refused(&run, "--cwd /tmp", &["--cwd /tmp", "--tmp host"]);
    }
}

#[test]
fn a_run_that_writes_nothing_reports_no_protected_name_it_could_create() {
    if !full_level_or_skip("a_run_that_writes_nothing_reports_no_protected_name_it_could_create") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "absent-gap");
        let jail = common::jail_bin().to_string_lossy().into_owned();
        // Nothing writable: ~/.config/jail/profiles (absent here) cannot be created.
        let run = at(
            &fx,
            &fx.repo,
            &[String::from("--"), jail.clone(), "status".into()],
            &[],
        );
        assert!(run.ok(), "as {who:?}\n{}", run.describe());
        assert!(
            !run.stdout.contains("protected name"),
            "as {who:?}: a gap nothing could open\n{}",
            run.describe()
        );
        // A writable project still names what the command could create in it.
        let args = ["--rw", &fx.p("repo"), "--", &jail, "status"].map(String::from);
        let run = at(&fx, &fx.repo, &args, &[]);
        assert!(run.ok(), "as {who:?}\n{}", run.describe());
        assert!(
            run.stdout.contains("protected names do not exist yet")
                && run.stdout.contains(&fx.p("repo")),
            "as {who:?}\n{}",
            run.describe()
        );
    }
}

#[test]
fn a_run_needing_nothing_from_home_works_with_home_unset_relative_or_unreadable() {
    if !full_level_or_skip(
        "a_run_needing_nothing_from_home_works_with_home_unset_relative_or_unreadable",
    ) {
        return;
    }
    for who in users() {
        let fx = fixture(who, "home-cause");
        // Another user's home this one cannot enter (what `setpriv` passes on from root).
        let locked = fx.dir.join("locked-home");
        std::fs::create_dir_all(locked.join(".config/jail/profiles")).unwrap();
        if common::is_root() {
            common::chown_tree(&locked, 0);
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
        let locked = locked.to_string_lossy().into_owned();
        for (what, home) in [
            ("unset", None),
            ("relative", Some("not/absolute")),
            ("unreadable", Some(locked.as_str())),
        ] {
            let mut cmd = fx.command(common::jail_bin(), &["--", "echo", "RAN"]);
            cmd.current_dir(&fx.repo).env("JAIL_TEST_DISABLE", "");
            match home {
                Some(h) => cmd.env("HOME", h),
                None => cmd.env_remove("HOME"),
            };
            let run = Run::from(cmd.output().unwrap());
            let what = format!("HOME {what} as {who:?}");
            assert!(run.ok(), "{what}\n{}", run.describe());
            assert_eq!(run.stdout, "RAN\n", "{what}");
            assert!(
                !run.stderr.contains("not set"),
                "{what}\n{}",
                run.describe()
            );
            if home == Some("not/absolute") {
                assert!(
                    run.stderr
                        .contains("HOME 'not/absolute' is not an absolute path"),
                    "{what}: the warning names the cause\n{}",
                    run.describe()
                );
            }
        }
    }
}

#[test]
fn a_missing_separator_suggests_the_line_given_and_never_after_a_subcommand() {
    if !full_level_or_skip(
        "a_missing_separator_suggests_the_line_given_and_never_after_a_subcommand",
    ) {
        return;
    }
    for who in users() {
        let fx = fixture(who, "separator");
        let repo = fx.p("repo");
        let run = fx.jail(&["--ro", &repo, "cat", "file.txt"]);
        assert_refused(
            &run,
            &format!("no -- as {who:?}"),
            &[&format!(
                "put the command after `--`: jail --ro {repo} -- cat file.txt"
            )],
        );
        for args in [
            &["profile", "show", "default", "extra"][..],
            &["runs", "extra"],
            &["diff", "abc", "extra"],
        ] {
            let run = fx.jail(args);
            let what = format!("{args:?} as {who:?}");
            assert_refused(&run, &what, &["extra"]);
            assert!(
                !run.stderr.contains("put the command after"),
                "{what}: told to move a command\n{}",
                run.describe()
            );
        }
    }
}

/// A state directory that cannot be made is named as jail's state, with the way to move it
/// (not called a `--cow` path, not left at the OS error).
#[test]
fn a_state_directory_that_cannot_be_made_says_how_to_move_it() {
    if !full_level_or_skip("a_state_directory_that_cannot_be_made_says_how_to_move_it") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "state-cause");
        let state = fx.dir.join("ro-state");
        std::fs::create_dir_all(&state).unwrap();
        fx.give_to(who);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o555)).unwrap();
        let state_s = state.to_string_lossy().into_owned();
        let run = at(
            &fx,
            &fx.repo,
            &echo(&["--cow", &fx.p("repo")]),
            &[("XDG_STATE_HOME", state_s.as_str())],
        );
        if who == common::Who::Root {
            // Root writes a 0555 directory anyway: nothing to refuse.
            assert!(run.ok(), "as root\n{}", run.describe());
            continue;
        }
        assert_refused(
            &run,
            &format!("read-only XDG_STATE_HOME as {who:?}"),
            &["jail state", &state_s, "XDG_STATE_HOME"],
        );
        assert!(!run.stderr.contains("--cow"), "{}", run.describe());
    }
}
