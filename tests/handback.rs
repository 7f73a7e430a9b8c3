//! The hand-back of a copy-on-write run cannot betray its reviewer: each test plays a hostile
//! run from inside a real jail, then what the owner does next on the host (reviews with
//! `jail diff`, applies with `jail apply`, commits with git, writes through a link, reads the
//! patch on a terminal), and fails if code of the run's reaches the host unflagged, if the apply
//! does more than the diff showed, or if something git cannot bring back is lost unflagged. In
//! both layer kinds (the overlay, and the copy without the mount view), as root and as uid
//! 65534.

mod common;

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::cow::{Cow, cases, run_id};
use common::full_level_or_skip;

/// A hook script that leaves `marker` when the host runs it.
fn hook(marker: &Path) -> String {
    format!("#!/bin/sh\\ntouch {}\\nexit 0\\n", marker.display())
}

/// The owner's next commit in the project (hooks on, as git runs them).
fn owners_commit(fx: &Cow) {
    common::git(fx, &["commit", "-q", "--allow-empty", "-m", "owner"]);
}

fn exists(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// Class 1: where the host's git configuration points, not the layer's names, decides.
#[test]
fn what_the_hosts_git_runs_is_flagged_whatever_it_is_called() {
    if !full_level_or_skip("handback") {
        return;
    }
    // (what the owner set up on the host, what the run changes, what the owner runs next)
    type Setup = fn(&Cow);
    let hooks_path: Setup = |fx| {
        std::fs::create_dir_all(fx.repo.join("tools/hooks")).unwrap();
        std::fs::write(
            fx.repo.join("tools/hooks/pre-commit"),
            "#!/bin/sh\nexit 0\n",
        )
        .unwrap();
        common::git(fx, &["add", "-A"]);
        common::git(fx, &["commit", "-qm", "hooks"]);
        common::git(fx, &["config", "core.hooksPath", "tools/hooks"]);
    };
    let include: Setup = |fx| {
        std::fs::write(fx.repo.join("team.gitconfig"), "[user]\n\tname = team\n").unwrap();
        common::git(fx, &["add", "-A"]);
        common::git(fx, &["commit", "-qm", "team config"]);
        common::git(fx, &["config", "include.path", "../team.gitconfig"]);
    };
    let linked_hook: Setup = |fx| {
        std::fs::create_dir_all(fx.repo.join("scripts")).unwrap();
        std::fs::write(fx.repo.join("scripts/pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
        executable(fx, "scripts/pre-commit");
        common::git(fx, &["add", "-A"]);
        common::git(fx, &["commit", "-qm", "scripts"]);
        std::os::unix::fs::symlink(
            "../../scripts/pre-commit",
            fx.repo.join(".git/hooks/pre-commit"),
        )
        .unwrap();
    };
    let linked_manager: Setup = |fx| {
        std::fs::create_dir_all(fx.repo.join("ci/hooks")).unwrap();
        std::fs::write(fx.repo.join("ci/hooks/pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
        executable(fx, "ci/hooks/pre-commit");
        std::os::unix::fs::symlink("ci/hooks", fx.repo.join(".husky")).unwrap();
        common::git(fx, &["add", "-A"]);
        common::git(fx, &["commit", "-qm", "husky"]);
        common::git(fx, &["config", "core.hooksPath", ".husky"]);
    };
    /// A working hook is executable: git skips one that is not.
    fn executable(fx: &Cow, rel: &str) {
        std::fs::set_permissions(
            fx.repo.join(rel),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
    }
    let cases_of: [(&str, Setup, &str); 4] = [
        ("hooks-path", hooks_path, "tools/hooks/pre-commit"),
        ("include", include, "team.gitconfig"),
        ("linked-hook", linked_hook, "scripts/pre-commit"),
        ("linked-manager", linked_manager, "ci/hooks/pre-commit"),
    ];
    for (who, off) in cases() {
        for (name, setup, target) in cases_of {
            let fx = Cow::new(who, off, &format!("hb-git-{name}"));
            fx.committed();
            setup(&fx);
            fx.give_to(who);
            let marker = fx.dir.join("pwned");
            let content = if name == "include" {
                // Git reads it as config: a filesystem monitor runs on every status and commit.
                format!("[core]\\n\\tfsmonitor = touch {}\\n", marker.display())
            } else {
                hook(&marker)
            };
            // The run rewrites the content only: the host's file keeps its mode.
            let run = fx.run(&format!("printf '{content}' > {target}"));
            assert!(run.ok(), "{who:?} {name}: {}", run.describe());
            let id = run_id(&run);
            let diff = fx.jail(&["diff", &id]);
            assert!(
                diff.stdout.contains("# jail: flagged:"),
                "{who:?} {off:?} {name}: {target} not flagged:\n{}",
                diff.stdout
            );
            let apply = fx.jail(&["apply", &id]);
            assert!(apply.ok(), "{}", apply.describe());
            owners_commit(&fx);
            common::git(&fx, &["status", "--short"]);
            assert!(
                !exists(&marker),
                "{who:?} {off:?} {name}: the run's {target} ran on the owner's commit"
            );
            assert!(
                apply.stderr.contains(target.split('/').next().unwrap()),
                "{name}: not said to be left: {}",
                apply.describe()
            );
        }
    }
}

/// Class 2: the commits offered back are reviewed as the work tree is.
#[test]
fn commits_do_not_smuggle_what_the_work_tree_would_flag() {
    if !full_level_or_skip("handback") {
        return;
    }
    for (who, off) in cases() {
        let fx = Cow::new(who, off, "hb-commits");
        fx.committed();
        common::git(&fx, &["config", "core.hooksPath", ".husky"]);
        fx.give_to(who);
        let marker = fx.dir.join("pwned");
        let run = fx.run(&format!(
            "set -e; mkdir -p .husky .vscode; printf '{}' > .husky/pre-commit; chmod +x .husky/pre-commit; \
             echo 'export X=1' > .envrc; echo '{{}}' > .vscode/tasks.json; \
             git add -A; git commit -qm 'chore: tidy' --no-verify; \
             rm -rf .husky .envrc .vscode",
            hook(&marker)
        ));
        assert!(run.ok(), "{who:?}: {}", run.describe());
        let id = run_id(&run);
        let diff = fx.jail(&["diff", &id]).stdout;
        for path in [".husky/pre-commit", ".envrc", ".vscode/tasks.json"] {
            assert!(
                diff.lines()
                    .any(|l| l.starts_with("# jail: flagged in the commits: ") && l.contains(path)),
                "{who:?} {off:?}: {path} in the commits not flagged:\n{diff}"
            );
        }
        assert!(
            diff.contains("# | +export X=1"),
            "the commits' patch is not shown:\n{diff}"
        );
        // A named apply, even of everything flagged, never offers the branch.
        let named = fx.jail(&["apply", &id, "--include-flagged", &fx.p("repo/file.txt")]);
        assert!(named.ok(), "{}", named.describe());
        assert!(
            common::git(&fx, &["branch", "--list", "jail/*"])
                .trim()
                .is_empty()
        );
        let apply = fx.jail(&["apply", &id]);
        assert!(apply.ok(), "{}", apply.describe());
        let branches = common::git(&fx, &["branch", "--list", "jail/*"]);
        assert!(
            branches.trim().is_empty(),
            "{who:?} {off:?}: a flagged branch was offered: {branches}"
        );
        // Had it been offered, the owner's fast-forward and next commit would have run it.
        owners_commit(&fx);
        assert!(!exists(&marker));
        // Asked for, it is offered (and the owner has been told what it holds).
        let taken = fx.jail(&["apply", &id, "--include-flagged"]);
        assert!(taken.ok(), "{}", taken.describe());
        assert!(common::git(&fx, &["branch", "--list", "jail/*"]).contains(&id));
    }
}

/// Class 3: modes and directory operations are what the diff showed and the selection named.
#[test]
fn apply_adds_no_write_bits_and_acts_only_on_the_selection() {
    if !full_level_or_skip("handback") {
        return;
    }
    for (who, off) in cases() {
        let fx = Cow::new(who, off, "hb-modes");
        fx.committed();
        std::fs::create_dir_all(fx.repo.join("olddir/inner")).unwrap();
        std::fs::write(fx.repo.join("olddir/inner/f"), "x\n").unwrap();
        std::fs::set_permissions(
            fx.repo.join("sub"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        fx.give_to(who);
        let run = fx.run(
            "set -e; umask 000; echo new > made.txt; mkdir -p newdir/deep; echo y > newdir/deep/f; \
             chmod 777 newdir newdir/deep sub; chmod 666 file.txt; printf '#!/bin/sh\\n' > run.sh; \
             chmod 777 run.sh; rm -r olddir; mkdir elsewhere",
        );
        assert!(run.ok(), "{who:?}: {}", run.describe());
        let id = run_id(&run);
        // A named apply: that file alone; nothing removed, made or changed elsewhere.
        let diff = fx.jail(&["diff", &id]).stdout;
        for line in [
            "# jail: makes the directory newdir",
            "# jail: removes the directory olddir",
        ] {
            assert!(
                diff.contains(line),
                "{who:?} {off:?}: no '{line}' in\n{diff}"
            );
        }
        let named = fx.jail(&["apply", &id, &fx.p("repo/made.txt")]);
        assert!(named.ok(), "{}", named.describe());
        assert!(
            exists(&fx.repo.join("olddir/inner/f")),
            "{who:?} {off:?}: removed outside the selection"
        );
        assert!(
            !exists(&fx.repo.join("elsewhere")),
            "{who:?} {off:?}: made outside the selection"
        );
        assert!(!exists(&fx.repo.join("newdir")));
        let mode =
            |rel: &str| std::fs::symlink_metadata(fx.repo.join(rel)).unwrap().mode() & 0o7777;
        assert_eq!(
            mode("sub"),
            0o755,
            "{who:?} {off:?}: a directory's mode changed"
        );
        let all = fx.jail(&["apply", &id, "--include-flagged"]);
        assert!(all.ok(), "{}", all.describe());
        for rel in [
            "made.txt",
            "newdir",
            "newdir/deep",
            "newdir/deep/f",
            "file.txt",
            "run.sh",
            "sub",
        ] {
            assert_eq!(
                mode(rel) & 0o002,
                0,
                "{who:?} {off:?}: {rel} is writable by others ({:o}) after the apply",
                mode(rel)
            );
        }
        assert_ne!(
            mode("run.sh") & 0o100,
            0,
            "the executable bit the diff showed was not applied"
        );
        assert!(
            !exists(&fx.repo.join("olddir")),
            "the run's removal was not applied"
        );
    }
}

/// Class 4: a chain of links that each stay inside, leaving together.
#[test]
fn a_symlink_chain_that_leaves_the_root_is_flagged_and_not_applied() {
    if !full_level_or_skip("handback") {
        return;
    }
    for (who, off) in cases() {
        let fx = Cow::new(who, off, "hb-chain");
        fx.committed();
        std::fs::create_dir_all(fx.dir.join("outside")).unwrap();
        fx.give_to(who);
        let run = fx.run(
            "set -e; mkdir -p a/b; ln -s ../.. a/b/up; ln -s a/b/up/../outside/victim cfg.json; \
             ln -s up/.. a/b/far",
        );
        assert!(run.ok(), "{who:?}: {}", run.describe());
        let id = run_id(&run);
        let diff = fx.jail(&["diff", &id]).stdout;
        for link in ["cfg.json", "a/b/far"] {
            let flagged = diff
                .split("diff --git ")
                .zip(diff.split("diff --git ").skip(1))
                .any(|(before, this)| {
                    this.starts_with(&format!("a/{link} "))
                        && before.contains("leads outside the root")
                });
            assert!(flagged, "{who:?} {off:?}: {link} not flagged:\n{diff}");
        }
        let apply = fx.jail(&["apply", &id]);
        assert!(apply.ok(), "{}", apply.describe());
        // The host's next write through the name the run chose.
        let _ = std::fs::write(fx.repo.join("cfg.json"), "{}");
        assert!(
            !exists(&fx.dir.join("outside/victim")),
            "{who:?} {off:?}: a write through cfg.json left the root"
        );
    }
}

/// Class 5: a deletion that loses what git cannot bring back is flagged.
#[test]
fn deletions_git_cannot_bring_back_are_flagged() {
    if !full_level_or_skip("handback") {
        return;
    }
    for (who, off) in cases() {
        let fx = Cow::new(who, off, "hb-deletions");
        std::fs::write(fx.repo.join(".gitignore"), "build/\n").unwrap();
        std::fs::write(fx.repo.join("tracked.txt"), "t\n").unwrap();
        std::fs::write(fx.repo.join("edited.txt"), "e\n").unwrap();
        fx.committed();
        std::fs::write(fx.repo.join("edited.txt"), "uncommitted work\n").unwrap();
        std::fs::write(fx.repo.join("untracked.txt"), "u\n").unwrap();
        std::fs::create_dir_all(fx.repo.join("build")).unwrap();
        std::fs::write(fx.repo.join("build/cache"), "c\n").unwrap();
        // A nested repository with a commit that exists nowhere else.
        let lib = fx.repo.join("vendor/lib");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(lib.join("f"), "v\n").unwrap();
        common::cow::nested_repo(&fx, &lib);
        let run = fx.run(
            "set -e; rm -rf vendor/lib/.git; rm untracked.txt edited.txt tracked.txt; rm -r build",
        );
        assert!(run.ok(), "{who:?}: {}", run.describe());
        let id = run_id(&run);
        let apply = fx.jail(&["apply", &id]);
        assert!(apply.ok(), "{}", apply.describe());
        for kept in [
            "vendor/lib/.git/HEAD",
            "untracked.txt",
            "edited.txt",
            "build/cache",
        ] {
            assert!(
                exists(&fx.repo.join(kept)),
                "{who:?} {off:?}: the default apply deleted {kept}"
            );
            assert!(
                apply.stderr.contains(kept.split('/').next().unwrap()),
                "{}",
                apply.describe()
            );
        }
        assert!(
            !exists(&fx.repo.join("tracked.txt")),
            "a deletion git can undo was not applied"
        );
        assert!(
            common::git(&fx, &["-C", "vendor/lib", "log", "--format=%s"]).contains("nested"),
            "the nested repository's commit is gone"
        );
    }
}

/// Class 6: names with any bytes apply; a terminal gets no escape sequence; text is text.
#[test]
fn odd_bytes_apply_whole_and_never_reach_the_terminal_raw() {
    if !full_level_or_skip("handback") {
        return;
    }
    for (who, off) in cases() {
        let fx = Cow::new(who, off, "hb-bytes");
        fx.committed();
        let run = fx.run(
            "set -e; echo named > \"$(printf 'bad\\377name\\001')\"; \
             printf 'a\\033]52;c;cHduZWQ=\\007b\\302\\233[2J\\033[2Kc\\n' > esc.txt; \
             printf 'caf\\351 = 1\\nprint(caf\\351)\\n' > latin1.py; \
             ln -s \"$(printf 'x\\033]0;title\\007')\" odd-link",
        );
        assert!(run.ok(), "{who:?}: {}", run.describe());
        let id = run_id(&run);
        // A terminal: the patch seen through a pty.
        let script = format!("{} diff {id}", common::jail_bin().display());
        let shown = fx
            .command("script".as_ref(), &["-qec", &script, "/dev/null"])
            .output()
            .unwrap();
        assert!(
            shown.status.success(),
            "{}",
            String::from_utf8_lossy(&shown.stderr)
        );
        for bad in [0x1bu8, 0x07, 0x9b] {
            assert!(
                !shown.stdout.contains(&bad),
                "{who:?} {off:?}: byte {bad:#x} reached the terminal"
            );
        }
        let text = String::from_utf8_lossy(&shown.stdout);
        assert!(
            text.contains("\\u{1b}]52;"),
            "the escape is not shown: {text}"
        );
        // A file: the exact patch, which shows the Latin-1 file as text.
        let patch = fx.jail(&["diff", &id]);
        assert!(patch.stdout.contains("+print(caf"), "{}", patch.stdout);
        assert!(
            !patch.stdout.contains("GIT binary patch"),
            "{}",
            patch.stdout
        );
        let apply = fx.jail(&["apply", &id, "--include-flagged"]);
        assert!(apply.ok(), "{who:?} {off:?}: {}", apply.describe());
        let names: Vec<Vec<u8>> = std::fs::read_dir(&fx.repo)
            .unwrap()
            .map(|e| e.unwrap().file_name().as_bytes().to_vec())
            .collect();
        assert!(
            names.contains(&b"bad\xffname\x01".to_vec()),
            "{who:?} {off:?}: not applied"
        );
    }
}

/// The layer's git files are the run's: a FIFO or a link there is never waited on or followed
/// by the end of the run or by the review commands.
#[test]
fn the_layers_git_files_are_never_waited_on_or_followed() {
    if !full_level_or_skip("handback") {
        return;
    }
    for (who, off) in cases() {
        let fx = Cow::new(who, off, "hb-git-fifo");
        fx.committed();
        let secret = fx.home.join(".ssh/id_ed25519");
        let repo = fx.p("repo");
        let script = format!(
            "set -e; echo b > b; rm .git/HEAD; mkfifo .git/HEAD; ln -sf {} .git/packed-refs",
            secret.display()
        );
        let timed = |args: &[&str]| {
            let mut all = vec!["20", common::jail_bin().to_str().unwrap()];
            all.extend(args);
            let mut cmd = fx.command("timeout".as_ref(), &all);
            let off: Vec<&str> = off.iter().map(|l| l.name()).collect();
            cmd.env("JAIL_TEST_DISABLE", off.join(","));
            common::Run::from(cmd.output().unwrap())
        };
        let run = timed(&[
            "--cow", &repo, "--cwd", &repo, "--", "/bin/sh", "-c", &script,
        ]);
        assert!(run.ok(), "{who:?} {off:?}: {}", run.describe());
        let id = run_id(&run);
        let diff = timed(&["diff", &id]);
        assert!(diff.ok(), "{who:?} {off:?}: {}", diff.describe());
        assert!(!diff.stdout.contains("SECRET"), "{}", diff.stdout);
        let apply = timed(&["apply", &id]);
        assert!(apply.ok(), "{who:?} {off:?}: {}", apply.describe());
        assert!(exists(&fx.repo.join("b")));
    }
}

/// Class 1, second round: what a repository inside the root runs, and what a protected file
/// names, are judged as the root's own hooks are.
#[test]
fn nested_repositories_and_what_protected_files_name_are_judged_too() {
    if !full_level_or_skip("handback") {
        return;
    }
    type Setup = fn(&Cow);
    // A nested repository whose own hooksPath is a work-tree directory of its.
    let nested: Setup = |fx| {
        let lib = fx.repo.join("lib");
        std::fs::create_dir_all(lib.join("tools/hooks")).unwrap();
        std::fs::write(lib.join("tools/hooks/pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(
            lib.join("tools/hooks/pre-commit"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        common::cow::nested_repo(fx, &lib);
        common::git(
            fx,
            &["-C", "lib", "config", "core.hooksPath", "tools/hooks"],
        );
    };
    // husky: the hook the manager runs names a work-tree script.
    let husky: Setup = |fx| {
        std::fs::create_dir_all(fx.repo.join(".husky")).unwrap();
        std::fs::create_dir_all(fx.repo.join("scripts")).unwrap();
        std::fs::write(fx.repo.join(".husky/pre-commit"), "sh scripts/lint.sh\n").unwrap();
        std::fs::write(fx.repo.join("scripts/lint.sh"), "exit 0\n").unwrap();
        std::fs::set_permissions(
            fx.repo.join(".husky/pre-commit"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        common::git(fx, &["add", "-A"]);
        common::git(fx, &["commit", "-qm", "husky"]);
        common::git(fx, &["config", "core.hooksPath", ".husky"]);
    };
    // npm: node-options in .npmrc preloads a work-tree file into every npm run.
    let npmrc: Setup = |fx| {
        std::fs::create_dir_all(fx.repo.join("scripts")).unwrap();
        std::fs::write(
            fx.repo.join(".npmrc"),
            "node-options=--require ./scripts/preload.cjs\n",
        )
        .unwrap();
        std::fs::write(fx.repo.join("scripts/preload.cjs"), "// preload\n").unwrap();
        common::git(fx, &["add", "-A"]);
        common::git(fx, &["commit", "-qm", "npm"]);
    };
    let all: [(&str, Setup, &str); 3] = [
        ("nested", nested, "lib/tools/hooks/pre-commit"),
        ("husky", husky, "scripts/lint.sh"),
        ("npmrc", npmrc, "scripts/preload.cjs"),
    ];
    for (who, off) in cases() {
        for (name, setup, target) in all {
            let fx = Cow::new(who, off, &format!("hb-named-{name}"));
            fx.committed();
            setup(&fx);
            fx.give_to(who);
            let marker = fx.dir.join("pwned");
            let run = fx.run(&format!(
                "printf 'touch {}\\n' >> {target}",
                marker.display()
            ));
            assert!(run.ok(), "{who:?} {name}: {}", run.describe());
            let id = run_id(&run);
            let apply = fx.jail(&["apply", &id]);
            assert!(apply.ok(), "{}", apply.describe());
            assert!(
                apply.stderr.contains(target),
                "{who:?} {off:?} {name}: {target} was applied unflagged:\n{}",
                apply.describe()
            );
            assert!(
                !std::fs::read_to_string(fx.repo.join(target))
                    .unwrap()
                    .contains("touch"),
                "{who:?} {off:?} {name}: the run's {target} reached the host"
            );
        }
    }
}

/// Classes 2, 4, 5 and 6, second round: a repository's layout or an overwrite in a commit; a
/// link that leaves only through another of the run's links; a protected file deleted; code in
/// an executable that git shows as binary.
#[test]
fn commits_links_deletions_and_binary_scripts_second_round() {
    if !full_level_or_skip("handback") {
        return;
    }
    for (who, off) in cases() {
        let fx = Cow::new(who, off, "hb-round2");
        std::fs::write(fx.repo.join(".gitignore"), "config/master.key\n").unwrap();
        std::fs::create_dir_all(fx.repo.join(".vscode")).unwrap();
        std::fs::write(fx.repo.join(".vscode/notes"), "mine\n").unwrap();
        std::fs::write(fx.repo.join(".envrc"), "export SAFE=1\n").unwrap();
        std::fs::write(fx.repo.join("build.sh"), "#!/bin/sh\necho build\n").unwrap();
        std::fs::set_permissions(
            fx.repo.join("build.sh"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        fx.committed();
        std::fs::create_dir_all(fx.repo.join("config")).unwrap();
        std::fs::write(fx.repo.join("config/master.key"), "OWNER-SECRET\n").unwrap();
        std::fs::create_dir_all(fx.dir.join("outside")).unwrap();
        fx.give_to(who);
        let run = fx.run(
            "set -e; \
             mkdir -p src/objects/info src/refs/heads; echo 'ref: refs/heads/main' > src/HEAD; \
             touch src/objects/info/keep src/refs/heads/keep; \
             printf '[core]\\n\\tfsmonitor = touch /tmp/x\\n' > src/config; \
             b=$(printf 'attacker\\n' | git hash-object -w --stdin); \
             git update-index --add --cacheinfo 100644,$b,config/master.key; \
             git add src; git commit -qm 'add sources' --no-verify; rm -rf src; \
             rm -rf .vscode; ln -s x/y .vscode; ln -s .vscode/.. m; ln -s m/../outside/v escape; \
             rm .envrc; \
             printf '#!/bin/sh\\n# \\000\\necho hidden\\n' > build.sh",
        );
        assert!(run.ok(), "{who:?}: {}", run.describe());
        let id = run_id(&run);
        let diff = fx.jail(&["diff", &id]).stdout;
        for (what, needle) in [
            (
                "the committed repository layout",
                "flagged in the commits: src/config",
            ),
            (
                "the overwrite of an ignored file",
                "flagged in the commits: config/master.key",
            ),
        ] {
            assert!(
                diff.contains(needle),
                "{who:?} {off:?}: {what} not flagged:\n{diff}"
            );
        }
        let apply = fx.jail(&["apply", &id]);
        assert!(apply.ok(), "{}", apply.describe());
        for left in ["/m:", "/escape:", "/.envrc:", "/build.sh:"] {
            assert!(
                apply.stderr.contains(left),
                "{who:?} {off:?}: {left} was applied unflagged:\n{}",
                apply.describe()
            );
        }
        assert!(
            common::git(&fx, &["branch", "--list", "jail/*"])
                .trim()
                .is_empty()
        );
        let _ = std::fs::write(fx.repo.join("escape"), "x");
        assert!(
            !exists(&fx.dir.join("outside/v")),
            "{who:?} {off:?}: a write left the root"
        );
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("config/master.key")).unwrap(),
            "OWNER-SECRET\n"
        );
    }
}

/// The judge's third round: a script a hook names by its bare name, an overwritten untracked
/// binary file, an ignored dependency tree, a rename whose deletion is flagged, a link into a
/// protected place, and a branch that rewrites history.
#[test]
fn bare_script_names_ignored_trees_overwrites_renames_links_and_rewritten_history() {
    if !full_level_or_skip("handback") {
        return;
    }
    for (who, off) in cases() {
        let fx = Cow::new(who, off, "hb-round3");
        let r = &fx.repo;
        std::fs::create_dir_all(r.join(".husky")).unwrap();
        std::fs::write(r.join(".husky/pre-commit"), "node check.js\n").unwrap();
        std::fs::set_permissions(
            r.join(".husky/pre-commit"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(r.join("check.js"), "// ok\n").unwrap();
        std::fs::write(r.join(".gitignore"), "node_modules/\n").unwrap();
        fx.committed();
        std::fs::write(r.join("file.txt"), "second\n").unwrap();
        common::git(&fx, &["commit", "-qam", "second"]);
        common::git(&fx, &["config", "core.hooksPath", ".husky"]);
        std::fs::write(r.join("data.db"), b"\x00\x01 the owner's data").unwrap();
        std::fs::write(r.join("notes.txt"), "my private notes\n").unwrap();
        std::fs::create_dir_all(r.join("node_modules/pkg")).unwrap();
        std::fs::write(r.join("node_modules/pkg/index.js"), "module.exports = 1\n").unwrap();
        fx.give_to(who);
        let run = fx.run(
            "set -e; echo 'require(\"child_process\").execSync(\"id\")' > check.js; \
             printf '\\000junk' > data.db; echo 'pwned()' >> node_modules/pkg/index.js; \
             mkdir docs; mv notes.txt docs/notes.txt; ln -s .git/hooks/pre-commit CHANGELOG.md; \
             git reset -q --hard HEAD~1; echo x > extra.txt; git add extra.txt; \
             git commit -qm again --no-verify; git rm -q --cached extra.txt",
        );
        assert!(run.ok(), "{who:?}: {}", run.describe());
        let id = run_id(&run);
        let diff = fx.jail(&["diff", &id]).stdout;
        assert!(
            diff.contains("does not contain the start commit"),
            "{who:?} {off:?}: rewritten history not flagged:\n{diff}"
        );
        let rename_flagged = diff
            .split("diff --git ")
            .zip(diff.split("diff --git ").skip(1))
            .any(|(before, this)| {
                this.starts_with("a/notes.txt b/docs/notes.txt")
                    && before.contains("# jail: flagged")
            });
        assert!(
            rename_flagged,
            "{who:?} {off:?}: the rename shows no flag:\n{diff}"
        );
        let apply = fx.jail(&["apply", &id]);
        assert!(apply.ok(), "{}", apply.describe());
        assert_eq!(
            std::fs::read_to_string(r.join("check.js")).unwrap(),
            "// ok\n"
        );
        assert_eq!(
            std::fs::read(r.join("data.db")).unwrap(),
            b"\x00\x01 the owner's data"
        );
        assert_eq!(
            std::fs::read_to_string(r.join("node_modules/pkg/index.js")).unwrap(),
            "module.exports = 1\n"
        );
        assert!(
            exists(&r.join("notes.txt")),
            "{who:?} {off:?}: the notes were lost"
        );
        assert!(
            !exists(&r.join("CHANGELOG.md")),
            "{who:?} {off:?}: a link into .git applied"
        );
        assert!(
            common::git(&fx, &["branch", "--list", "jail/*"])
                .trim()
                .is_empty()
        );
    }
}

/// The judge's reach stops at what runs: a hook that names the tree itself (`prettier --write
/// ./`), a config value naming the repository's directory, and a file one commit adds and the
/// next changes flag nothing an ordinary edit touches.
#[test]
fn ordinary_edits_beside_hooks_and_config_paths_stay_unflagged() {
    if !full_level_or_skip("handback") {
        return;
    }
    for (who, off) in cases() {
        let fx = Cow::new(who, off, "hb-ordinary");
        std::fs::create_dir_all(fx.repo.join(".husky")).unwrap();
        std::fs::write(
            fx.repo.join(".husky/pre-commit"),
            "npx prettier --write ./\ncd ..\n",
        )
        .unwrap();
        fx.committed();
        common::git(&fx, &["config", "core.hooksPath", ".husky"]);
        let repo = fx.p("repo");
        common::git(&fx, &["config", "jail-test.dir", &repo]);
        fx.give_to(who);
        let run = fx.run(
            "set -e; echo 'fn main() { run() }' > src/main.rs; \
             echo one > notes.md; git add notes.md; git commit -qm one --no-verify; \
             echo two >> notes.md; git commit -qam two --no-verify",
        );
        assert!(run.ok(), "{who:?}: {}", run.describe());
        let id = run_id(&run);
        let diff = fx.jail(&["diff", &id]).stdout;
        assert!(!diff.contains("# jail: flagged"), "{who:?} {off:?}: {diff}");
        let apply = fx.jail(&["apply", &id]);
        assert!(apply.ok(), "{}", apply.describe());
        assert!(
            std::fs::read_to_string(fx.repo.join("src/main.rs"))
                .unwrap()
                .contains("run()")
        );
        assert!(common::git(&fx, &["branch", "--list", "jail/*"]).contains(&id));
    }
}
