//! The man pages and shell completions, as installed from the README: every page a page refers
//! to exists and shows its subcommand's flags, and bash's completion offers what exists (the
//! profiles, the pending runs' ids), never file names where a name is wanted.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::cow::{Cow, MODES, run_id};
use common::{Fixture, Who, full_level_or_skip, jail_bin, users};

/// `jail man --dir`: every page by file name.
fn pages(fx: &Fixture) -> BTreeMap<String, String> {
    let dir = fx.dir.join("man");
    std::fs::create_dir_all(&dir).unwrap();
    fx.give_to(fx.who);
    let out = fx.jail(&["man", "--dir", dir.to_str().unwrap()]);
    assert!(out.ok(), "{}", out.describe());
    std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).unwrap(),
            )
        })
        .collect()
}

/// The `jail-NAME(1)` references in a page (roff writes `-` as `\-`).
fn references(roff: &str) -> Vec<String> {
    let text = roff.replace("\\-", "-");
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("jail-") {
        let tail = &rest[at..];
        let name: String = tail
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if tail[name.len()..].starts_with("(1)") {
            out.push(format!("{name}.1"));
        }
        rest = &rest[at + 5..];
    }
    out
}

/// The long flags `jail WORDS --help` lists.
fn flags_in_help(fx: &Fixture, words: &[&str]) -> Vec<String> {
    let mut args = words.to_vec();
    args.push("--help");
    let out = fx.jail(&args);
    assert!(out.ok(), "{args:?}: {}", out.describe());
    let mut flags: Vec<String> = out
        .stdout
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| {
            w.split(['=', '<', '.', ')', '`'])
                .next()
                .unwrap()
                .to_string()
        })
        .filter(|w| w.len() > 2)
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

#[test]
fn every_page_a_page_refers_to_exists_and_shows_its_flags() {
    let fx = Fixture::new(Who::User, "man-pages");
    let pages = pages(&fx);
    assert!(pages.contains_key("jail.1"), "{:?}", pages.keys());
    for (name, roff) in &pages {
        for r in references(roff) {
            assert!(
                pages.contains_key(&r),
                "{name} refers to {r}, which is not generated (pages: {:?})",
                pages.keys()
            );
        }
        // Each page shows every long flag its subcommand's --help lists.
        let words: Vec<&str> = name
            .strip_suffix(".1")
            .unwrap()
            .split('-')
            .skip(1)
            .collect();
        let text = roff.replace("\\-", "-");
        for flag in flags_in_help(&fx, &words) {
            assert!(
                text.contains(&flag),
                "{name} does not show {flag} (jail {} --help lists it)",
                words.join(" ")
            );
        }
        // `jail man WORDS` prints the same page.
        if !words.is_empty() {
            let mut args = vec!["man"];
            args.extend(&words);
            let one = fx.jail(&args);
            assert!(one.ok(), "{}", one.describe());
            assert_eq!(&one.stdout, roff, "jail man {}", words.join(" "));
        }
    }
    for want in [
        "jail-apply.1",
        "jail-diff.1",
        "jail-runs.1",
        "jail-profile-show.1",
    ] {
        assert!(pages.contains_key(want), "{want}: {:?}", pages.keys());
    }
    assert!(
        pages["jail-apply.1"]
            .replace("\\-", "-")
            .contains("--include-flagged")
    );
    assert!(!pages.contains_key("jail-help.1"));
    let bad = fx.jail(&["man", "nosuch"]);
    assert_eq!(bad.code, Some(125), "{}", bad.describe());
    assert!(
        bad.stderr.contains("nosuch") && bad.stderr.contains("apply"),
        "{}",
        bad.describe()
    );
}

/// What bash's completion offers for the words `line` (the last one being completed), as `fx`'s
/// user, with the script `jail completions bash` prints and jail found in PATH.
fn bash_complete(fx: &Fixture, line: &[&str]) -> Vec<String> {
    let bin = fx.dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let link = bin.join("jail");
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink(jail_bin(), &link).unwrap();
    }
    let script = fx.dir.join("jail.bash");
    let out = fx.jail(&["completions", "bash"]);
    assert!(out.ok(), "{}", out.describe());
    std::fs::write(&script, &out.stdout).unwrap();
    fx.give_to(fx.who);
    let words: Vec<String> = line.iter().map(|w| format!("'{w}'")).collect();
    let cword = line.len() - 1;
    let test = format!(
        "source {script}; COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_TYPE=9; \
         _clap_complete_jail jail \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script = script.display(),
        words = words.join(" "),
    );
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let out = fx
        .command(Path::new("/bin/bash"), &["-c", &test])
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{line:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn bash_completes_profiles_and_run_ids_from_what_exists() {
    if !full_level_or_skip("bash_completes_profiles_and_run_ids_from_what_exists") {
        return;
    }
    for who in users() {
        let fx = Cow::new(who, MODES[0], "complete");
        let mine = fx.home.join(".config/jail/profiles");
        std::fs::create_dir_all(&mine).unwrap();
        std::fs::write(
            mine.join("mine.toml"),
            "extends = [\"default\"]\ndescription = \"my own\"\n",
        )
        .unwrap();
        fx.give_to(who);
        let offered = bash_complete(&fx, &["jail", "--profile", ""]);
        for want in ["review", "default", "mine"] {
            assert!(
                offered.iter().any(|o| o == want),
                "{who:?}: --profile offers {offered:?}"
            );
        }
        // The fixture's directory (where the completion runs) holds repo/, home/, state/…:
        // none of them is offered.
        for file in ["repo", "home", "state", "jail.bash", "bin"] {
            assert!(
                !offered.iter().any(|o| o.trim_end_matches('/') == file),
                "{who:?}: --profile offers the file {file}: {offered:?}"
            );
        }
        let prefixed = bash_complete(&fx, &["jail", "--profile", "rev"]);
        assert_eq!(prefixed, ["review"], "{who:?}");
        let shown = bash_complete(&fx, &["jail", "profile", "show", "mi"]);
        assert_eq!(shown, ["mine"], "{who:?}");
        // Run ids: a real run, pending.
        let run = fx.run("echo changed > file.txt");
        assert!(run.ok(), "{who:?}: {}", run.describe());
        let id = run_id(&run);
        for sub in ["apply", "diff", "discard"] {
            let offered = bash_complete(&fx, &["jail", sub, ""]);
            assert!(
                offered.contains(&id),
                "{who:?}: jail {sub} offers {offered:?}, not the run {id}"
            );
        }
        let offered = bash_complete(&fx, &["jail", "apply", &id[..3]]);
        assert_eq!(offered, vec![id.clone()], "{who:?}");
        // The command's own words are not jail's: no subcommand is offered after `--`.
        let offered = bash_complete(&fx, &["jail", "--", "pro"]);
        assert!(
            !offered.iter().any(|o| o == "probe" || o == "profile"),
            "{who:?}: after -- {offered:?}"
        );
        assert!(fx.jail(&["discard", &id]).ok());
    }
}
