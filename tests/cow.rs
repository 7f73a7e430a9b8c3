//! Copy-on-write workspaces (`--cow`): the host's tree stays byte-identical while the command
//! writes freely, the change set comes back as a patch `git apply` takes and as an apply that
//! reproduces the run's tree, parallel runs never overwrite each other or the user's edits, and
//! nothing of the layer (hooks, config, flagged files) reaches the host unless a person says so.
//!
//! Every test runs the real binary as root and as uid 65534, changes the tree from inside with
//! the tools an agent uses (sh, mv, git), and compares whole trees from the host.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

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

/// The layer sets every test runs with: all of them (the overlay), and without the mount view
/// (Docker's default profile), where the layer is a copy.
const MODES: &[&[Layer]] = &[&[], &[Layer::Mount]];

/// Who runs, and which layers are off.
fn cases() -> Vec<(Who, &'static [Layer])> {
    users()
        .into_iter()
        .flat_map(|w| MODES.iter().map(move |m| (w, *m)))
        .collect()
}

/// A fixture whose jail state directory (where layers wait) is its own, run in one mode.
struct Cow {
    fx: Fixture,
    off: &'static [Layer],
}

impl std::ops::Deref for Cow {
    type Target = Fixture;
    fn deref(&self) -> &Fixture {
        &self.fx
    }
}

fn fixture(who: Who, off: &'static [Layer], name: &str) -> Cow {
    let fx = Fixture::new(who, name);
    std::fs::create_dir_all(fx.dir.join("state")).unwrap();
    fx.give_to(who);
    let state = fx.p("state");
    let fx = fx.with_env(&[
        ("XDG_STATE_HOME", &state),
        ("GIT_AUTHOR_NAME", "agent"),
        ("GIT_AUTHOR_EMAIL", "agent@example.invalid"),
        ("GIT_COMMITTER_NAME", "agent"),
        ("GIT_COMMITTER_EMAIL", "agent@example.invalid"),
    ]);
    Cow { fx, off }
}

/// The run id the end-of-run line names (`review: jail diff ID`).
fn run_id(run: &Run) -> String {
    let at = run
        .stderr
        .find("jail diff ")
        .unwrap_or_else(|| panic!("no review line\n{}", run.describe()));
    run.stderr[at + 10..]
        .split(|c: char| !c.is_ascii_hexdigit())
        .next()
        .unwrap()
        .to_string()
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
    fx.fx.jail_with(args, fx.off, &[])
}

/// The fixture's project as a git repository on branch main with one commit, owned by its user.
fn committed(fx: &Cow) {
    common::git(fx, &["init", "-q", "-b", "main"]);
    common::git(fx, &["add", "-A"]);
    common::git(fx, &["commit", "-qm", "base"]);
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
        for name in ["file.txt", "deleted-later", "gone/b"] {
            assert!(
                refused.stderr.contains(name),
                "{who:?}: {name} not named:\n{}",
                refused.describe()
            );
        }
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
