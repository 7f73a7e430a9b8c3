//! The copy-on-write hand-back as a person meets it after the run: what to type to take the
//! run's commits once its files are applied, an apply that leaves a flagged entry out leaves no
//! trace of it (not even its new directory), and `jail runs` in the order the runs started.
//! Every test runs the real binary as root and as uid 65534, with the overlay and with the copy.

mod common;

use std::path::Path;

use common::cow::{Cow, MODES, cases, run_id};
use common::{full_level_or_skip, users};

/// The command between the backticks after `after` in `text`.
fn quoted_after<'a>(text: &'a str, after: &str) -> Option<&'a str> {
    let rest = &text[text.find(after)? + after.len()..];
    let start = rest.find('`')? + 1;
    let len = rest[start..].find('`')?;
    Some(&rest[start..start + len])
}

#[test]
fn after_an_apply_with_commits_the_command_it_names_takes_them() {
    if !full_level_or_skip("handback_user") {
        return;
    }
    for (who, off) in cases() {
        let fx = Cow::new(who, off, "hbu-commits");
        fx.committed();
        let run = fx.run(
            "set -e; echo fine > src/lib.rs; echo new > notes.txt; git add -A; \
             git commit -qm 'agent work'; echo wip >> file.txt",
        );
        assert!(run.ok(), "{who:?} {off:?}: {}", run.describe());
        let id = run_id(&run);
        let apply = fx.jail(&["apply", &id]);
        assert!(apply.ok(), "{who:?} {off:?}: {}", apply.describe());
        let branch = format!("jail/{id}");
        // What a person tries first refuses: the same changes are uncommitted in the work tree.
        let ff = fx
            .command(
                "git".as_ref(),
                &["-C", &fx.p("repo"), "merge", "--ff-only", &branch],
            )
            .output()
            .unwrap();
        assert!(
            !ff.status.success(),
            "{who:?} {off:?}: git merge --ff-only took it"
        );
        assert!(
            apply.stderr.contains("--ff-only"),
            "{who:?} {off:?}: the apply does not say why a fast-forward refuses:\n{}",
            apply.describe()
        );
        // The command jail names does it.
        let cmd = quoted_after(&apply.stderr, "take the commits").unwrap_or_else(|| {
            panic!(
                "{who:?} {off:?}: no command to take the commits:\n{}",
                apply.describe()
            )
        });
        let took = fx
            .command(Path::new("/bin/sh"), &["-c", cmd])
            .output()
            .unwrap();
        assert!(
            took.status.success(),
            "{who:?} {off:?}: `{cmd}`: {}",
            String::from_utf8_lossy(&took.stderr)
        );
        assert_eq!(
            common::git(&fx, &["log", "--format=%s"]),
            "agent work\nbase\n",
            "{who:?} {off:?}: main did not take the commits"
        );
        assert_eq!(
            common::git(&fx, &["rev-parse", "HEAD"]),
            common::git(&fx, &["rev-parse", &branch])
        );
        // What the run left uncommitted is uncommitted again, and nothing else.
        assert_eq!(
            common::git(&fx, &["status", "--porcelain"]),
            " M file.txt\n",
            "{who:?} {off:?}"
        );
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("file.txt")).unwrap(),
            "original\nwip\n"
        );
    }
}

#[test]
fn an_apply_that_leaves_a_flagged_entry_out_makes_no_directory_for_it() {
    if !full_level_or_skip("handback_user") {
        return;
    }
    for (who, off) in cases() {
        let fx = Cow::new(who, off, "hbu-dirs");
        let run = fx.run(
            "set -e; mkdir -p newdir deep/er; echo 'curl x | sh' > newdir/.envrc; \
             echo 'curl y | sh' > deep/er/.envrc; mkdir -p both && echo ok > both/ok.txt; \
             echo 'curl z | sh' > both/.envrc; mkdir emptydir; echo ok > top.txt",
        );
        assert!(run.ok(), "{who:?} {off:?}: {}", run.describe());
        let id = run_id(&run);
        let apply = fx.jail(&["apply", &id]);
        assert!(apply.ok(), "{who:?} {off:?}: {}", apply.describe());
        for gone in ["newdir", "deep", "both/.envrc"] {
            assert!(
                std::fs::symlink_metadata(fx.repo.join(gone)).is_err(),
                "{who:?} {off:?}: {gone} made for an entry left in the layer:\n{}",
                apply.describe()
            );
        }
        for made in ["top.txt", "both/ok.txt", "emptydir"] {
            assert!(
                fx.repo.join(made).exists(),
                "{who:?} {off:?}: {made} not applied:\n{}",
                apply.describe()
            );
        }
        // Named, the entry comes with its directory.
        let named = fx.jail(&["apply", &id, &fx.p("repo/deep/er/.envrc")]);
        assert!(named.ok(), "{who:?} {off:?}: {}", named.describe());
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("deep/er/.envrc")).unwrap(),
            "curl y | sh\n"
        );
        assert!(std::fs::symlink_metadata(fx.repo.join("newdir")).is_err());
        assert!(fx.jail(&["discard", &id]).ok());
    }
}

#[test]
fn runs_are_listed_in_the_order_they_started() {
    if !full_level_or_skip("handback_user") {
        return;
    }
    for who in users() {
        let fx = Cow::new(who, MODES[0], "hbu-order");
        let mut ids = Vec::new();
        for n in 0..6 {
            let run = fx.run(&format!("echo {n} > file{n}.txt"));
            assert!(run.ok(), "{who:?}: {}", run.describe());
            ids.push(run_id(&run));
        }
        // Runs that start within one second (a script, an orchestrator) have the same
        // `created`: the order must not then be the ids' (random) one.
        let runs = fx.dir.join("state/jail/runs");
        for id in &ids {
            let record = runs.join(id).join("run.json");
            let mut v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
            v["created"] = 1_700_000_000u64.into();
            std::fs::write(&record, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
        }
        let json = fx.jail(&["runs", "--json"]);
        assert!(json.ok(), "{}", json.describe());
        let list: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
        let listed: Vec<&str> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap())
            .collect();
        assert_eq!(listed, ids, "{who:?}: --json, oldest first");
        let text = fx.jail(&["runs"]);
        assert!(text.ok(), "{}", text.describe());
        let listed: Vec<&str> = text
            .stdout
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|w| ids.iter().any(|id| id == w))
            .collect();
        assert_eq!(listed, ids, "{who:?}: text, newest last\n{}", text.stdout);
    }
}
