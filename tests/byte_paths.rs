//! Linux paths are bytes. Every path jail takes (each path flag, the working directory, the
//! files it writes) may hold a byte that is not UTF-8, a newline, an escape sequence or a
//! 255-byte component: as root and as an unprivileged user, jail never panics on one (exit 134
//! or 101), either runs or refuses with exit 125 naming the path escaped, and its JSON (the
//! policy file, the dry run, the run report, the event stream, `jail status`, `jail runs`)
//! gives back the exact bytes: a string when they are UTF-8, the list of bytes otherwise.

mod common;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use common::{Fixture, Run, full_level_or_skip, jail_bin, users};
use serde_json::Value;

const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The names every path flag is fed.
fn names() -> Vec<Vec<u8>> {
    vec![
        b"bad\xffname".to_vec(),
        b"new\nline".to_vec(),
        b"esc\x1b[31mred".to_vec(),
        vec![b'L'; 255],
        b"all\xfe\n\x1b]52;c;eA==\x07".to_vec(),
    ]
}

fn os(b: &[u8]) -> OsString {
    OsString::from_vec(b.to_vec())
}

/// How jail shows a path in a line of text: controls escaped, other bytes that are not UTF-8
/// as `\xNN`.
fn shown(p: &Path) -> String {
    let mut out = String::new();
    for chunk in p.as_os_str().as_bytes().utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// A path as jail's JSON writes it.
fn path_of(v: &Value) -> Option<PathBuf> {
    match v {
        Value::String(s) => Some(PathBuf::from(s)),
        Value::Array(bytes) => bytes
            .iter()
            .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
            .collect::<Option<Vec<u8>>>()
            .map(|b| PathBuf::from(os(&b))),
        _ => None,
    }
}

fn paths_of(v: &Value) -> Vec<PathBuf> {
    v.as_array()
        .map(|a| a.iter().filter_map(path_of).collect())
        .unwrap_or_default()
}

/// jail `args` as the fixture's user, in `dir`.
fn jail(fx: &Fixture, dir: &Path, args: &[&OsStr]) -> Run {
    let mut cmd = fx.command(jail_bin(), &[]);
    cmd.args(args)
        .current_dir(dir)
        .env("PATH", PATH)
        .env("JAIL_TEST_DISABLE", "")
        .env("RUST_BACKTRACE", "0");
    Run::from(cmd.output().expect("run jail"))
}

/// Never a panic; either it ran, or one line with exit 125 naming `path` escaped, and no raw
/// control character on the user's terminal.
fn clear(run: &Run, what: &str, path: &Path) {
    assert!(
        !matches!(run.code, Some(134) | Some(101) | None),
        "{what}: jail crashed\n{}",
        run.describe()
    );
    assert!(
        !run.stderr.contains("panicked"),
        "{what}: jail panicked\n{}",
        run.describe()
    );
    assert!(
        !run.stderr.contains('\x1b') && !run.stderr.contains('\x07'),
        "{what}: a raw control character reached stderr\n{}",
        run.describe()
    );
    if run.code != Some(0) {
        assert_eq!(run.code, Some(125), "{what}\n{}", run.describe());
        let want = shown(path);
        assert!(
            run.stderr.contains(&want),
            "{what}: the message does not name {want}\n{}",
            run.describe()
        );
    }
}

fn json(text: &str, what: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {text}"))
}

fn rule_paths(policy: &Value) -> Vec<PathBuf> {
    policy["rules"]
        .as_array()
        .map(|r| r.iter().filter_map(|r| path_of(&r["path"])).collect())
        .unwrap_or_default()
}

#[test]
fn every_path_flag_takes_any_bytes() {
    if !full_level_or_skip("every_path_flag_takes_any_bytes") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "bytes-flags");
        let dirs: Vec<PathBuf> = names()
            .iter()
            .map(|n| {
                let d = fx.dir.join(os(n));
                std::fs::create_dir_all(&d).unwrap();
                std::fs::write(d.join("f"), "x\n").unwrap();
                d
            })
            .collect();
        fx.give_to(who);
        for d in &dirs {
            let p = d.as_os_str();
            for flag in ["--ro", "--rw", "--hide", "--cow", "--cache", "--cwd"] {
                let what = format!("{flag} {} as {who:?}", shown(d));
                let dry = jail(
                    &fx,
                    &fx.dir,
                    &[
                        "--dry-run".as_ref(),
                        flag.as_ref(),
                        p,
                        "--".as_ref(),
                        "true".as_ref(),
                    ],
                );
                clear(&dry, &format!("{what} --dry-run"), d);
                assert!(dry.ok(), "{what} --dry-run\n{}", dry.describe());
                let plan = json(&dry.stdout, &what);
                let policy = &plan["policy"];
                if flag == "--cwd" {
                    assert_eq!(
                        path_of(&policy["cwd"]).as_deref(),
                        Some(d.as_path()),
                        "{what}"
                    );
                } else {
                    assert!(rule_paths(policy).contains(d), "{what}: {policy}");
                }
                let run = jail(
                    &fx,
                    &fx.dir,
                    &[flag.as_ref(), p, "--".as_ref(), "true".as_ref()],
                );
                clear(&run, &what, d);
                assert!(run.ok(), "{what}\n{}", run.describe());
            }
            // Not a socket: refused, naming it.
            let run = jail(
                &fx,
                &fx.dir,
                &["--allow-socket".as_ref(), p, "--".as_ref(), "true".as_ref()],
            );
            clear(&run, &format!("--allow-socket {}", shown(d)), d);
            // A --patch without --cow: refused, naming it.
            let patch = d.join("out.patch");
            let run = jail(
                &fx,
                &fx.dir,
                &[
                    "--patch".as_ref(),
                    patch.as_os_str(),
                    "--".as_ref(),
                    "true".as_ref(),
                ],
            );
            clear(&run, &format!("--patch {}", shown(&patch)), &patch);
            assert_eq!(run.code, Some(125));
        }
    }
}

#[test]
fn the_policy_file_the_report_and_the_events_give_back_the_exact_bytes() {
    if !full_level_or_skip("the_policy_file_the_report_and_the_events_give_back_the_exact_bytes") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "bytes-report");
        let out = fx.dir.join("out");
        std::fs::create_dir_all(&out).unwrap();
        let dirs: Vec<(Vec<u8>, PathBuf)> = names()
            .into_iter()
            .map(|n| {
                let d = fx.dir.join(os(&n));
                std::fs::create_dir_all(&d).unwrap();
                (n, d)
            })
            .collect();
        fx.give_to(who);
        for (i, (name, d)) in dirs.iter().enumerate() {
            let what = format!("{} as {who:?}", shown(d));
            // Started from the directory, writable, the command writing a file of the same
            // name; the report and `jail status` inside name both exactly.
            let report = out.join(format!("report-{i}.json"));
            let status = d.join("status.json");
            let run = jail(
                &fx,
                d,
                &[
                    "--rw".as_ref(),
                    d.as_os_str(),
                    "--report".as_ref(),
                    report.as_os_str(),
                    "--".as_ref(),
                    "/bin/sh".as_ref(),
                    "-c".as_ref(),
                    r#"echo x > "$1" && "$3" status --json > "$2""#.as_ref(),
                    "sh".as_ref(),
                    &os(name),
                    status.as_os_str(),
                    jail_bin().as_os_str(),
                ],
            );
            clear(&run, &what, d);
            assert!(run.ok(), "{what}\n{}", run.describe());
            let r = json(&std::fs::read_to_string(&report).unwrap(), &what);
            assert_eq!(
                path_of(&r["cwd"]).as_deref(),
                Some(d.as_path()),
                "{what}: {r}"
            );
            assert_eq!(
                path_of(&r["command"][4]),
                Some(PathBuf::from(os(name))),
                "{what}: the command's argument"
            );
            assert!(paths_of(&r["changes"]["roots"]).contains(d), "{what}: {r}");
            let written = d.join(os(name));
            let items: Vec<PathBuf> = r["changes"]["items"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| path_of(&c["path"]))
                .collect();
            assert!(items.contains(&written), "{what}: {items:?}");
            assert!(rule_paths(&r["policy"]["policy"]).contains(d), "{what}");
            assert!(paths_of(&r["policy"]["writable"]).contains(d), "{what}");
            let s = json(&std::fs::read_to_string(&status).unwrap(), &what);
            assert_eq!(s["verdict"], "confined", "{what}: {s}");
            assert!(
                paths_of(&s["policy"]["writable"]).contains(d),
                "{what}: {s}"
            );

            // Copy-on-write, with the event stream: its `wrote` line and `jail runs` name the
            // exact bytes.
            let events = out.join(format!("events-{i}.jsonl"));
            let run = jail(
                &fx,
                &fx.dir,
                &[
                    "--cow".as_ref(),
                    d.as_os_str(),
                    "--events".as_ref(),
                    events.as_os_str(),
                    "--".as_ref(),
                    "/bin/sh".as_ref(),
                    "-c".as_ref(),
                    r#"echo y > "$1/$2""#.as_ref(),
                    "sh".as_ref(),
                    d.as_os_str(),
                    &os(name),
                ],
            );
            clear(&run, &what, d);
            assert!(run.ok(), "{what}\n{}", run.describe());
            let lines: Vec<Value> = std::fs::read_to_string(&events)
                .unwrap()
                .lines()
                .map(|l| json(l, &what))
                .collect();
            let start = lines.iter().find(|l| l["event"] == "start").unwrap();
            assert_eq!(paths_of(&start["cow"]), std::slice::from_ref(d), "{what}");
            assert!(
                lines
                    .iter()
                    .any(|l| l["event"] == "wrote" && path_of(&l["path"]) == Some(written.clone())),
                "{what}: {lines:?}"
            );
            let runs = jail(&fx, &fx.dir, &["runs".as_ref(), "--json".as_ref()]);
            assert!(runs.ok(), "{what}\n{}", runs.describe());
            let listed = json(&runs.stdout, &what);
            let run = listed
                .as_array()
                .unwrap()
                .iter()
                .find(|r| paths_of(&r["roots"]) == std::slice::from_ref(d))
                .unwrap_or_else(|| panic!("{what}: not listed: {listed}"));
            let id = run["id"].as_str().unwrap();
            // Applied by naming the file, as bytes.
            let apply = jail(
                &fx,
                &fx.dir,
                &["apply".as_ref(), id.as_ref(), written.as_os_str()],
            );
            assert!(apply.ok(), "{what}\n{}", apply.describe());
            assert_eq!(std::fs::read_to_string(&written).unwrap(), "y\n", "{what}");
        }
    }
}

#[test]
fn text_arguments_that_are_not_utf8_are_refused_by_name() {
    if !full_level_or_skip("text_arguments_that_are_not_utf8_are_refused_by_name") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "bytes-text");
        for name in names() {
            let n = os(&name);
            let p = Path::new(&n);
            for args in [
                vec![
                    "--profile".as_ref(),
                    p.as_os_str(),
                    "--".as_ref(),
                    "true".as_ref(),
                ],
                vec!["profile".as_ref(), "show".as_ref(), p.as_os_str()],
                vec!["notice".as_ref(), "--profile".as_ref(), p.as_os_str()],
                vec!["diff".as_ref(), p.as_os_str()],
                vec!["apply".as_ref(), p.as_os_str()],
                vec!["discard".as_ref(), p.as_os_str()],
            ] {
                let what = format!("{:?} as {who:?}", args);
                let run = jail(&fx, &fx.dir, &args);
                clear(&run, &what, p);
                assert_ne!(run.code, Some(0), "{what}\n{}", run.describe());
            }
        }
    }
}
