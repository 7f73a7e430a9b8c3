//! Attacks from inside the jail, as root and as an unprivileged user. Each rule is proven three
//! ways: the full jail blocks the attack; each layer that claims to block it does so on its own
//! (the others switched off through the test-only JAIL_TEST_DISABLE); and with all of those layers
//! off the attack succeeds, so the test fails the day a layer stops doing its job.

mod common;

use Layer::{Landlock as L, Mount as M, Seccomp as S};
use common::{
    Attack, Fixture, Layer, Outsider, Who, attack_bin, full_level_or_skip, sh_argv, users,
};

fn a() -> String {
    attack_bin().to_string_lossy().into_owned()
}

fn argv(parts: &[&str]) -> Vec<String> {
    std::iter::once(a())
        .chain(parts.iter().map(|s| s.to_string()))
        .collect()
}

/// Runs `make(fx)` for every user and proves each attack it returns.
fn prove_all(test: &str, make: impl Fn(&Fixture) -> Vec<Attack>) {
    if !full_level_or_skip(test) {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, test);
        for attack in make(&fx) {
            attack.prove(&fx);
            // A run with layers off may have succeeded in writing: start each attack fresh.
            common::restore_quarantined(&fx.dir);
            let _ = std::fs::write(fx.repo.join("file.txt"), "original\n");
        }
    }
}

fn with_flags(name: &str, fx: &Fixture, argv: Vec<String>, blockers: &[Layer]) -> Attack {
    let flags = fx.ro_flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    Attack::new(name, &flags, argv, blockers)
}

#[test]
fn writes_to_read_only_files_are_refused() {
    prove_all("ro-writes", |fx| {
        let f = fx.p("repo/file.txt");
        [
            "write",
            "append",
            "open-trunc",
            "truncate",
            "mmap-write",
            "proc-fd-write",
        ]
        .iter()
        .map(|op| with_flags(op, fx, argv(&[op, &f]), &[M, L]))
        .chain([
            with_flags(
                "proc-root-write",
                fx,
                argv(&["proc-root-write", &f]),
                &[M, L],
            ),
            with_flags(
                "proc-parent-root-write",
                fx,
                sh_argv(&format!("{} proc-pid-root-write $$ {f}", a())),
                &[M, L],
            ),
            with_flags(
                "copy_file_range",
                fx,
                argv(&["copy-range", &fx.p("scratch/movable"), &f]),
                &[M, L],
            ),
        ])
        .collect()
    });
}

#[test]
fn tree_changes_in_read_only_dirs_are_refused() {
    prove_all("ro-tree", |fx| {
        let f = fx.p("repo/file.txt");
        vec![
            with_flags("create", fx, argv(&["create", &fx.p("repo/new")]), &[M, L]),
            with_flags("mkdir", fx, argv(&["mkdir", &fx.p("repo/newdir")]), &[M, L]),
            with_flags(
                "mknod fifo",
                fx,
                argv(&["mkfifo", &fx.p("repo/fifo")]),
                &[M, L],
            ),
            with_flags(
                "symlink",
                fx,
                argv(&["symlink", "/etc/passwd", &fx.p("repo/ln")]),
                &[M, L],
            ),
            with_flags(
                "hardlink in",
                fx,
                argv(&["link", &f, &fx.p("repo/hard")]),
                &[M, L],
            ),
            // A hard link into a writable place would give a writable name to a read-only inode.
            with_flags(
                "hardlink out",
                fx,
                argv(&["link", &f, &fx.p("scratch/hard")]),
                &[M, L],
            ),
            with_flags("unlink", fx, argv(&["unlink", &f]), &[M, L]),
            with_flags("rmdir", fx, argv(&["rmdir", &fx.p("repo/empty")]), &[M, L]),
            with_flags(
                "rename within",
                fx,
                argv(&["rename", &f, &fx.p("repo/moved")]),
                &[M, L],
            ),
            with_flags(
                "rename out",
                fx,
                argv(&["rename", &f, &fx.p("scratch/stolen")]),
                &[M, L],
            ),
            with_flags(
                "rename in",
                fx,
                argv(&["rename", &fx.p("scratch/movable"), &fx.p("repo/planted")]),
                &[M, L],
            ),
        ]
    });
}

#[test]
fn metadata_of_read_only_files_is_refused_by_the_mount_view() {
    // Landlock on ABI 7 does not guard metadata: the read-only bind (EROFS) is what stops it.
    prove_all("ro-metadata", |fx| {
        let f = fx.p("repo/file.txt");
        ["chmod", "chown", "utimes", "setxattr"]
            .iter()
            .map(|op| with_flags(op, fx, argv(&[op, &f]), &[M]))
            .collect()
    });
}

#[test]
fn remounting_from_a_new_user_namespace_is_refused() {
    prove_all("userns-remount", |fx| {
        let repo = fx.p("repo");
        // --allow-unconfined: without the mount view nothing else protects files under
        // --allow-userns, and jail refuses such a run unless told to (the control run below).
        let allow = {
            let mut f = fx.ro_flags();
            f.push("--allow-userns".into());
            f.push("--allow-unconfined".into());
            f
        };
        let allow: Vec<&str> = allow.iter().map(String::as_str).collect();
        vec![
            with_flags(
                "userns remount",
                fx,
                argv(&["userns-write", &repo]),
                &[S, M, L],
            ),
            // Even when nested sandboxes are allowed (and Landlock's filesystem rules, which
            // forbid any mount, are off), the mounts copied into the new namespace are locked
            // read-only.
            Attack::new(
                "userns remount with --allow-userns",
                &allow,
                argv(&["userns-write", &repo]),
                &[M],
            ),
        ]
    });
}

#[test]
fn hidden_secrets_cannot_be_read() {
    prove_all("secrets", |fx| {
        let mut attacks: Vec<Attack> = common::SECRETS
            .iter()
            .map(|(rel, _)| {
                let p = fx.home.join(rel).to_string_lossy().into_owned();
                with_flags(&format!("read ~/{rel}"), fx, argv(&["read", &p]), &[M, L])
            })
            .collect();
        // Landlock lets an ancestor of a hidden path be listed; the mount view shows it empty.
        let ssh = fx.home.join(".ssh").to_string_lossy().into_owned();
        attacks.push(with_flags("list ~/.ssh", fx, argv(&["ls", &ssh]), &[M]));
        // A hidden path named on the command line.
        let secret = fx.p("repo/sub/keep");
        attacks.push(Attack::new(
            "read --hide path",
            &["--hide", &fx.p("repo/sub")],
            argv(&["read", &secret]),
            &[M, L],
        ));
        attacks
    });
}

#[test]
fn processes_outside_cannot_be_touched() {
    if !full_level_or_skip("outside-procs") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "outside-procs");
        // Owned by the same user and holding no capabilities: without the jail, all of these work.
        let target = Outsider::spawn(fx.who);
        let pid = target.pid();
        for attack in [
            with_flags("ptrace", &fx, argv(&["ptrace", &pid]), &[S, L, M]),
            with_flags(
                "process_vm_writev",
                &fx,
                argv(&["vm-write", &pid]),
                &[S, L, M],
            ),
            with_flags("/proc/PID/mem", &fx, argv(&["proc-mem", &pid]), &[L, M]),
            with_flags("kill", &fx, argv(&["kill", &pid, "18"]), &[L, M]),
        ] {
            attack.prove(&fx);
        }
        drop(target);
    }
}

#[test]
fn dangerous_syscalls_are_refused() {
    prove_all("syscalls", |fx| {
        let mut v = vec![
            with_flags("io_uring_setup", fx, argv(&["io-uring"]), &[S]),
            with_flags("keyctl", fx, argv(&["keyctl"]), &[S]),
            with_flags("unshare(CLONE_NEWUSER)", fx, argv(&["unshare-user"]), &[S]),
            with_flags("clone(CLONE_NEWUSER)", fx, argv(&["clone-newuser"]), &[S]),
            with_flags("clone3 answers ENOSYS", fx, argv(&["clone3"]), &[S]),
            // TIOCSTI and TIOCLINUX are refused whatever the descriptor, and with garbage in the
            // high 32 bits of the request (the kernel truncates it to an unsigned int).
            with_flags("TIOCSTI", fx, argv(&["ioctl-raw", "0", "5412"]), &[S]),
            with_flags(
                "TIOCSTI high bits",
                fx,
                argv(&["ioctl-raw", "0", "1000005412"]),
                &[S],
            ),
            with_flags("TIOCLINUX", fx, argv(&["ioctl-raw", "0", "541c"]), &[S]),
        ];
        if cfg!(target_arch = "x86_64") {
            // i386 syscall numbers through int 0x80 must not walk past the x86_64 filter.
            v.push(with_flags(
                "int 0x80 ptrace",
                fx,
                argv(&["i386-traceme"]),
                &[S],
            ));
        }
        v
    });
}

#[test]
fn root_cannot_write_kernel_settings() {
    if !common::is_root() {
        return;
    }
    prove_all("core-pattern", |fx| {
        if fx.who != Who::Root {
            return vec![];
        }
        vec![with_flags(
            "open core_pattern for writing",
            fx,
            argv(&["core-pattern"]),
            &[M, L],
        )]
    });
}

#[test]
fn sockets_served_outside_cannot_be_reached() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    prove_all("sockets", |fx| {
        let path = fx.dir.join("outside.sock");
        let listener = UnixListener::bind(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        let docker = fx.home.join(".docker/docker.sock");
        let hidden = UnixListener::bind(&docker).unwrap();
        std::fs::set_permissions(&docker, std::fs::Permissions::from_mode(0o777)).unwrap();
        let name = format!("jail-test-{}-{:?}", std::process::id(), fx.who);
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let abstract_listener = UnixListener::bind_addr(&addr).unwrap();
        let sock = path.to_string_lossy().into_owned();
        let docker = docker.to_string_lossy().into_owned();
        let mut allow = fx.ro_flags();
        allow.push("--allow-unix-sockets".into());
        let allow: Vec<&str> = allow.iter().map(String::as_str).collect();
        let attacks = vec![
            with_flags("unix connect", fx, argv(&["unix-connect", &sock]), &[S]),
            with_flags(
                "abstract connect",
                fx,
                argv(&["abstract-connect", &name]),
                &[S, L],
            ),
            // Landlock's scope refuses it; without Landlock (and with no network namespace of
            // its own) the mediation refuses abstract addresses itself.
            Attack::new(
                "abstract connect with --allow-unix-sockets",
                &allow,
                argv(&["abstract-connect", &name]),
                &[L, S],
            ),
            Attack::new(
                "hidden docker socket with --allow-unix-sockets",
                &allow,
                argv(&["unix-connect", &docker]),
                // Hidden by the mount view, refused by the mediation (seccomp).
                &[M, S],
            ),
        ];
        std::mem::forget((listener, hidden, abstract_listener));
        attacks
    });
}

#[test]
fn inherited_descriptors_are_closed() {
    if !full_level_or_skip("inherited-fds") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "fds");
        let f = fx.p("repo/file.txt");
        // The descriptor is opened outside the jail, before it starts, for appending.
        let script = |keep: &str| {
            format!(
                "exec 7>>{f}; exec {jail} --ro {repo} {keep} -- /bin/sh -c 'echo leaked >&7'",
                jail = common::jail_bin().display(),
                repo = fx.p("repo"),
            )
        };
        let closed = fx
            .command("/bin/sh".as_ref(), &["-c", &script("")])
            .output()
            .unwrap();
        assert!(!closed.status.success(), "{who:?}: fd 7 was inherited");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "original\n");
        // Proof that the test can fail: with --keep-fd the same write goes through.
        let kept = fx
            .command("/bin/sh".as_ref(), &["-c", &script("--keep-fd 7")])
            .output()
            .unwrap();
        assert!(
            kept.status.success(),
            "{who:?}: {}",
            String::from_utf8_lossy(&kept.stderr)
        );
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "original\nleaked\n");
    }
}

#[test]
fn nothing_outlives_the_run() {
    if !full_level_or_skip("no-orphans") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "orphans");
        // With the pid namespace, and without it (the supervisor's subreaper fallback).
        for disabled in [vec![], vec![Layer::Mount]] {
            let marker = format!(
                "jail-orphan-{}-{who:?}-{}",
                std::process::id(),
                disabled.len()
            );
            let run = fx.jail_with(&["--", &a(), "daemon", &marker], &disabled, &[]);
            assert!(run.stdout.contains("ALLOWED daemon"), "{}", run.describe());
            let left = common::processes_with(&marker);
            for pid in &left {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .status();
            }
            assert!(
                left.is_empty(),
                "{who:?} {disabled:?}: daemon survived: {left:?}"
            );
            // Proof that the check can fail: the same daemon started outside a jail survives.
            if disabled.is_empty() {
                let outside = format!("{marker}-outside");
                let out = fx
                    .command(attack_bin(), &["daemon", &outside])
                    .output()
                    .unwrap();
                assert!(out.status.success());
                let alive = common::processes_with(&outside);
                for pid in &alive {
                    let _ = std::process::Command::new("kill")
                        .args(["-9", &pid.to_string()])
                        .status();
                }
                assert!(
                    !alive.is_empty(),
                    "the orphan check cannot see a surviving daemon"
                );
            }
        }
    }
}

#[test]
fn protected_names_under_a_writable_project_stay_read_only() {
    prove_all("carve-outs", |fx| {
        std::fs::create_dir_all(fx.repo.join(".git/hooks")).unwrap();
        std::fs::write(
            fx.repo.join(".git/config"),
            "[core]\n\thooksPath = .myhooks\n",
        )
        .unwrap();
        std::fs::create_dir_all(fx.repo.join(".myhooks")).unwrap();
        std::fs::create_dir_all(fx.repo.join(".husky")).unwrap();
        std::fs::write(fx.repo.join(".envrc"), "export A=1\n").unwrap();
        std::fs::create_dir_all(fx.repo.join(".vscode")).unwrap();
        std::fs::create_dir_all(fx.repo.join(".git/modules/lib/hooks")).unwrap();
        std::fs::write(
            fx.repo.join(".git/modules/lib/HEAD"),
            "ref: refs/heads/main\n",
        )
        .unwrap();
        std::fs::create_dir_all(fx.repo.join(".git/modules/deps/foo/hooks")).unwrap();
        std::fs::write(
            fx.repo.join(".git/modules/deps/foo/HEAD"),
            "ref: refs/heads/main\n",
        )
        .unwrap();
        std::fs::write(fx.repo.join(".git/modules/deps/foo/config"), "[core]\n").unwrap();
        fx.give_to(fx.who);
        let rw = ["--rw", &fx.p("repo")];
        let hook = fx.p("repo/.git/hooks/pre-commit");
        let config = fx.p("repo/.git/config");
        vec![
            // First: the attacks after these, run with their layers off, rewrite .git/config.
            Attack::new(
                "plant a hook where core.hooksPath points",
                &rw,
                argv(&["create", &fx.p("repo/.myhooks/pre-commit")]),
                &[M, L],
            ),
            Attack::new(
                "plant a husky hook",
                &rw,
                argv(&["create", &fx.p("repo/.husky/pre-commit")]),
                &[M, L],
            ),
            Attack::new("plant a git hook", &rw, argv(&["create", &hook]), &[M, L]),
            Attack::new("edit .git/config", &rw, argv(&["append", &config]), &[M, L]),
            Attack::new(
                "replace .git/config by rename",
                &rw,
                argv(&["rename", &fx.p("repo/file.txt"), &config]),
                &[M, L],
            ),
            Attack::new(
                "remove .git/config",
                &rw,
                argv(&["unlink", &config]),
                &[M, L],
            ),
            Attack::new(
                "edit the config of a submodule named with a slash",
                &rw,
                argv(&["append", &fx.p("repo/.git/modules/deps/foo/config")]),
                &[M, L],
            ),
            Attack::new(
                "plant a submodule hook",
                &rw,
                argv(&["create", &fx.p("repo/.git/modules/lib/hooks/post-checkout")]),
                &[M, L],
            ),
            Attack::new(
                "edit .envrc",
                &rw,
                argv(&["write", &fx.p("repo/.envrc")]),
                &[M, L],
            ),
            Attack::new(
                "add editor tasks",
                &rw,
                argv(&["create", &fx.p("repo/.vscode/tasks.json")]),
                &[M, L],
            ),
            // Last: with its layers off this one succeeds and takes .git away.
            // Renaming the directory that holds the carve-outs would carry the read-only mounts
            // away and let a fresh .git/hooks be made in its place.
            Attack::new(
                "move .git aside",
                &rw,
                argv(&["rename", &fx.p("repo/.git"), &fx.p("repo/.git-moved")]),
                &[M, L],
            ),
        ]
    });
}

#[test]
fn a_nested_jail_can_only_tighten() {
    if !full_level_or_skip("nested") {
        return;
    }
    let jail = common::jail_bin().to_string_lossy().into_owned();
    for who in users() {
        let fx = Fixture::new(who, "nested");
        let f = fx.p("scratch/movable");
        for outer_extra in [&[][..], &["--allow-userns"][..]] {
            // Outer: scratch writable. Inner: scratch read-only -> the inner rule holds.
            let mut args = vec!["--rw", fx.dir.to_str().unwrap()];
            args.extend(outer_extra);
            let ro = fx.p("scratch");
            let inner = [jail.as_str(), "--ro", &ro, "--", &a(), "append", &f];
            let run = fx.jail(&[&args[..], &["--"], &inner[..]].concat());
            assert_eq!(
                common::verdict(&run),
                common::Verdict::Blocked,
                "{who:?}: {}",
                run.describe()
            );
            // Inner asks for more than the outer gives (repo is read-only outside) -> still refused.
            let outer = ["--ro", &fx.p("repo")];
            let inner = [
                jail.as_str(),
                "--rw",
                &fx.p("repo"),
                "--",
                &a(),
                "append",
                &fx.p("repo/file.txt"),
            ];
            let run = fx.jail(&[&outer[..], outer_extra, &["--"], &inner[..]].concat());
            assert_eq!(
                common::verdict(&run),
                common::Verdict::Blocked,
                "{who:?}: {}",
                run.describe()
            );
            // And the inner jail does run the command (the test can fail).
            let inner = [jail.as_str(), "--rw", &ro, "--", &a(), "append", &f];
            let run = fx.jail(&[&args[..], &["--"], &inner[..]].concat());
            assert_eq!(
                common::verdict(&run),
                common::Verdict::Allowed,
                "{who:?}: {}",
                run.describe()
            );
            assert!(std::fs::read_to_string(&f).unwrap().ends_with('x'));
        }
    }
}

#[test]
fn creating_an_absent_protected_name_is_reported() {
    // No layer can refuse one new name while allowing others in the same directory: the gap is
    // named in the dry run and the supervisor reports the creation after the run.
    if !full_level_or_skip("absent-protected") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "absent");
        let envrc = fx.p("repo/.envrc");
        let dry = fx.jail(&["--rw", &fx.p("repo"), "--dry-run", "--", "true"]);
        assert!(
            dry.stdout.contains("protected names do not exist yet"),
            "{}",
            dry.describe()
        );
        let run = fx.jail(&["--rw", &fx.p("repo"), "--", &a(), "create", &envrc]);
        assert!(run.ok(), "{}", run.describe());
        assert!(
            run.stderr.contains("created or changed") && run.stderr.contains(".envrc"),
            "{who:?}: {}",
            run.describe()
        );
        // Moved aside, so that it takes no effect outside.
        assert!(
            !fx.repo.join(".envrc").exists(),
            "{who:?}: .envrc left in place"
        );
        let aside = std::fs::read_dir(&fx.repo).unwrap().flatten().any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".envrc.jail-quarantine-")
        });
        assert!(aside, "{who:?}: .envrc was not moved aside");
        // The same for a git redirection that no layer can refuse.
        std::fs::create_dir_all(fx.repo.join(".git/hooks")).unwrap();
        fx.give_to(who);
        let commondir = fx.p("repo/.git/commondir");
        let run = fx.jail(&["--rw", &fx.p("repo"), "--", &a(), "create", &commondir]);
        assert!(run.stderr.contains(".git/commondir"), "{}", run.describe());
        assert!(
            !fx.repo.join(".git/commondir").exists(),
            "{who:?}: commondir left in place"
        );
        let quiet = fx.jail(&[
            "--rw",
            &fx.p("repo"),
            "--",
            &a(),
            "create",
            &fx.p("repo/plain"),
        ]);
        assert!(
            !quiet.stderr.contains("protected path"),
            "{}",
            quiet.describe()
        );
    }
}

#[test]
fn naming_a_path_inside_a_hidden_directory_opens_only_that_path() {
    prove_all("hide-exception", |fx| {
        let known = fx.home.join(".ssh/known_hosts");
        std::fs::write(&known, "host key\n").unwrap();
        fx.give_to(fx.who);
        let known = known.to_string_lossy().into_owned();
        let key = fx
            .home
            .join(".ssh/id_ed25519")
            .to_string_lossy()
            .into_owned();
        let flags = ["--ro", known.as_str()];
        let run = fx.jail(&["--ro", &known, "--", "cat", &known]);
        assert_eq!(run.stdout, "host key\n", "{}", run.describe());
        vec![
            Attack::new(
                "read the key beside an opened file",
                &flags,
                argv(&["read", &key]),
                &[M, L],
            ),
            Attack::new(
                "write the opened file",
                &flags,
                argv(&["append", &known]),
                &[M, L],
            ),
        ]
    });
}

#[test]
fn the_hosts_shared_memory_and_vsock_are_out_of_reach() {
    prove_all("shm-vsock", |fx| {
        let shm = format!("/dev/shm/jail-test-{}-{:?}", std::process::id(), fx.who);
        std::fs::write(&shm, "host data\n").unwrap();
        let _ = std::os::unix::fs::chown(&shm, Some(common::uid_of(fx.who)), None);
        vec![
            with_flags(
                "append to a host /dev/shm file",
                fx,
                argv(&["append", &shm]),
                &[M, L],
            ),
            with_flags("socket(AF_VSOCK)", fx, argv(&["socket-family", "40"]), &[S]),
        ]
    });
}

#[test]
fn a_read_only_file_given_as_stdin_keeps_its_metadata() {
    // The descriptor was opened outside, on the host's writable mount: jail reopens it in the view.
    if !full_level_or_skip("stdin-metadata") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    for who in users() {
        let fx = Fixture::new(who, "stdin-meta");
        let f = fx.p("repo/file.txt");
        let run = |disabled: &str| {
            let script = format!(
                "exec {jail} --ro {repo} -- python3 -c 'import os, sys; print(sys.stdin.read().strip()); os.fchmod(0, 0o777)' < {f}",
                jail = common::jail_bin().display(),
                repo = fx.p("repo"),
            );
            fx.command("/bin/sh".as_ref(), &["-c", &script])
                .env("JAIL_TEST_DISABLE", disabled)
                .output()
                .unwrap()
        };
        let mode = || std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        let before = mode();
        let out = run("");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "original\n",
            "{who:?}: stdin still readable"
        );
        assert!(!out.status.success(), "{who:?}: fchmod on stdin succeeded");
        assert_eq!(mode(), before, "{who:?}: mode changed");
        // Proof that the test can fail: without the mount view (a named gap) it goes through.
        let out = run("mount");
        assert!(
            out.status.success(),
            "{who:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(mode(), 0o777);
    }
}

#[test]
fn a_group_signal_from_inside_does_not_reach_the_caller() {
    // kill(0, …) signals the caller's process group, which crosses any pid namespace: the command
    // runs in a group (or session) of its own.
    if !full_level_or_skip("group-signal") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "kill0");
        for disabled in ["", "landlock", "mount", "landlock,mount"] {
            let script = format!(
                "{jail} {extra} -- {a} kill 0 10; sleep 0.2; echo CALLER-SURVIVED",
                jail = common::jail_bin().display(),
                extra = if disabled == "landlock,mount" {
                    "--allow-unconfined"
                } else {
                    ""
                },
                a = a(),
            );
            // setsid: the caller's group is its own, never the test harness's.
            let out = fx
                .command("setsid".as_ref(), &["/bin/sh", "-c", &script])
                .env("JAIL_TEST_DISABLE", disabled)
                .output()
                .unwrap();
            assert!(
                String::from_utf8_lossy(&out.stdout).contains("CALLER-SURVIVED"),
                "{who:?} with {disabled:?} off: the caller was signalled\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // Proof that the check can fail: the same kill(0) without jail ends the caller.
        let script = format!("{} kill 0 10; sleep 0.2; echo CALLER-SURVIVED", a());
        let out = fx
            .command("setsid".as_ref(), &["/bin/sh", "-c", &script])
            .output()
            .unwrap();
        assert!(!String::from_utf8_lossy(&out.stdout).contains("CALLER-SURVIVED"));
    }
}

#[test]
fn git_entries_the_command_creates_are_moved_aside() {
    // An embedded repository (its config's fsmonitor runs on the user's next `git status`) or a
    // gitfile pointing elsewhere: no layer can refuse creating them, so the supervisor moves every
    // new .git aside after the run, under a name the command cannot guess or block.
    if !full_level_or_skip("new-git") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "new-git");
        std::fs::create_dir_all(fx.repo.join(".git/hooks")).unwrap();
        fx.give_to(who);
        // A submodule whose name has a slash keeps its git directory at .git/modules/lib/foo.
        std::fs::create_dir_all(fx.repo.join(".git/modules/lib/foo/hooks")).unwrap();
        std::fs::write(
            fx.repo.join(".git/modules/lib/foo/HEAD"),
            "ref: refs/heads/main\n",
        )
        .unwrap();
        std::fs::write(fx.repo.join(".git/modules/lib/foo/config"), "[core]\n").unwrap();
        fx.give_to(who);
        let script = format!(
            "mkdir -p {r}/src/vendored/.git && echo x > {r}/src/vendored/.git/config && \
             mkdir -p {r}/build/x/.git && echo x > {r}/build/x/.git/config && \
             echo ../../evil > {r}/.git/modules/lib/foo/commondir && \
             printf 'gitdir: /elsewhere\\n' > {r}/sub/.git && \
             touch {r}/.git/commondir.jail-quarantine {r}/.git/commondir.jail-quarantine-1 && \
             echo ../evil > {r}/.git/commondir",
            r = fx.p("repo")
        );
        let run = fx.jail(&["--rw", &fx.p("repo"), "--", "/bin/sh", "-c", &script]);
        assert!(run.ok(), "{who:?}: {}", run.describe());
        for planted in [
            "src/vendored/.git",
            "build/x/.git",
            "sub/.git",
            ".git/commondir",
            ".git/modules/lib/foo/commondir",
        ] {
            assert!(
                !fx.repo.join(planted).exists(),
                "{who:?}: {planted} left in place\n{}",
                run.describe()
            );
            // A submodule git directory that the planted commondir makes valid is moved aside
            // whole (git would take it as a repository).
            let named = planted.trim_end_matches("/commondir");
            assert!(
                run.stderr.contains(if planted.starts_with(".git/modules") {
                    named
                } else {
                    planted
                }),
                "{who:?}: {planted} not reported"
            );
        }
        // A .git that was there at the start is the user's: left alone.
        assert!(fx.repo.join(".git/hooks").exists());
    }
}

#[test]
fn a_gitfile_in_a_writable_worktree_stays_read_only() {
    prove_all("gitfile", |fx| {
        std::fs::write(
            fx.repo.join(".git"),
            "gitdir: /somewhere/.git/worktrees/wt\n",
        )
        .unwrap();
        fx.give_to(fx.who);
        let rw = ["--rw", &fx.p("repo")];
        vec![Attack::new(
            "redirect the gitfile",
            &rw,
            argv(&["write", &fx.p("repo/.git")]),
            &[M, L],
        )]
    });
}

#[test]
fn the_working_directory_is_kept_without_the_mount_view() {
    if !full_level_or_skip("cwd-fallback") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "cwd-fallback");
        for disabled in [vec![], vec![Layer::Mount]] {
            let run = fx.jail_with(&["--cwd", &fx.p("repo/src"), "--", "pwd"], &disabled, &[]);
            assert_eq!(
                run.stdout.trim(),
                fx.p("repo/src"),
                "{who:?} {disabled:?}: {}",
                run.describe()
            );
        }
    }
}
