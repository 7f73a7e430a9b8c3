//! `jail diff` is a faithful and complete account of `jail apply`: random runs (names with any
//! bytes, contents text and binary, modes, symlinks and chains of them, deletions, nested
//! repositories, commits) are played inside a real jail; then `git apply` of the diff on a copy
//! of the host and `jail apply --include-flagged` on the host must give the same tree, and
//! everything a default apply took must be harmless by an oracle of this file's own (no
//! protected name, no new executable, no symlink that leads out of the root, no deletion of
//! what the start commit does not hold as it was).

mod common;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use common::cow::{Cow, cases, run_id};
use common::full_level_or_skip;

/// xorshift64*: a fixed sequence per seed, so a failure names the seed that shows it.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// `var=bytes` in sh: printf's octal escapes in single quotes (a trailing newline would be eaten
/// by `$(…)`, so an x is added and cut).
fn assign(var: &str, bytes: &[u8]) -> String {
    let mut s = format!("{var}=\"$(printf '");
    for b in bytes {
        s.push_str(&format!("\\{b:03o}"));
    }
    s.push_str(&format!("x')\"; {var}=\"${{{var}%x}}\"\n"));
    s
}

/// `var=path` for a path of names (each any bytes but `/` and NUL; none is the root, `.`).
fn assign_path(var: &str, names: &[Vec<u8>]) -> String {
    if names.is_empty() {
        return format!("{var}=.\n");
    }
    assign(var, &names.join(&b'/'))
}

/// A name: plain, odd bytes, or a protected one.
fn name(rng: &mut Rng) -> Vec<u8> {
    match rng.below(6) {
        0 => rng
            .pick(&[&b".envrc"[..], b".husky", b".vscode", b"Makefile"])
            .to_vec(),
        1 => {
            let odd: &[u8] = &[
                0x01, 0x1b, 0xff, 0xe9, b' ', b'\t', b'"', b'\\', 0x9b, b'\n',
            ];
            let mut n = b"o".to_vec();
            for _ in 0..1 + rng.below(3) {
                n.push(*rng.pick(odd));
            }
            n
        }
        _ => format!("n{}", rng.below(6)).into_bytes(),
    }
}

fn content(rng: &mut Rng) -> Vec<u8> {
    match rng.below(5) {
        0 => vec![0, 1, 2, 255, 0, 7],
        1 => b"caf\xe9\nline \x1b]52;c;eA==\x07\n".to_vec(),
        // A lone CR is inside a line for git (and for the patch).
        2 => b"one\rtwo\r\nthree".to_vec(),
        _ => format!("line {}\nmore {}\n", rng.below(100), rng.below(100)).into_bytes(),
    }
}

/// The host's tree before the run: a committed repository with files, a link, a nested
/// repository, an ignored file.
fn host_tree(fx: &Cow) {
    let r = &fx.repo;
    std::fs::create_dir_all(r.join("d/e")).unwrap();
    std::fs::write(r.join("d/e/deep.txt"), "deep\n").unwrap();
    std::fs::write(r.join("d/x.bin"), [0u8, 1, 2]).unwrap();
    std::fs::write(r.join(".gitignore"), "*.log\n").unwrap();
    std::os::unix::fs::symlink("d/e", r.join("inlink")).unwrap();
    fx.committed();
    std::fs::write(r.join("build.log"), "ignored\n").unwrap();
    std::fs::write(r.join("untracked.txt"), "u\n").unwrap();
    std::fs::create_dir_all(r.join("nested")).unwrap();
    std::fs::write(r.join("nested/f"), "n\n").unwrap();
    common::cow::nested_repo(fx, &r.join("nested"));
}

/// A random run: each step one change an agent might make.
fn script(rng: &mut Rng) -> String {
    let mut s = String::from("set -e\n");
    let dirs: [&[&[u8]]; 4] = [&[], &[b"d"], &[b"d", b"e"], &[b"new"]];
    for _ in 0..6 + rng.below(8) {
        let dir: Vec<Vec<u8>> = rng.pick(&dirs).iter().map(|n| n.to_vec()).collect();
        let mut path = dir.clone();
        path.push(name(rng));
        s.push_str(&assign_path("p", &path));
        s.push_str(&assign_path("d", &dir));
        match rng.below(9) {
            0 | 1 => {
                s.push_str(&assign("c", &content(rng)));
                s.push_str("mkdir -p \"$d\"\nrm -rf \"$p\"\nprintf '%s' \"$c\" > \"$p\"\n");
            }
            2 => s.push_str("printf 'appended\\n' >> d/e/deep.txt || true\n"),
            3 => s.push_str(
                "mkdir -p \"$d\"\nrm -rf \"$p\"\nprintf '#!/bin/sh\\n' > \"$p\"\nchmod +x \"$p\"\n",
            ),
            4 => {
                const TARGETS: [&[u8]; 7] = [
                    b"../..",
                    b"d/e",
                    b"inlink/../..",
                    b"/etc/passwd",
                    b"deep.txt",
                    b"..",
                    b"up/../..",
                ];
                let target = *rng.pick(&TARGETS);
                s.push_str(&assign("t", target));
                s.push_str("mkdir -p \"$d\"\nrm -rf \"$p\"\nln -s \"$t\" \"$p\"\n");
            }
            5 => s.push_str("rm -f untracked.txt build.log\n"),
            6 => s.push_str(&format!(
                "rm -rf {}\n",
                rng.pick(&["d/e", "nested/.git", "d/x.bin", "inlink"])
            )),
            7 => s.push_str(
                "git add -A >/dev/null 2>&1 || true\ngit commit -qm step --no-verify >/dev/null 2>&1 || true\n",
            ),
            _ => s.push_str("mkdir -p \"$d\"\nchmod 755 \"$d\"\n"),
        }
    }
    s
}

/// Entry by path: (kind, executable, content or link target). Directories are not entries: a
/// patch has none, and git apply removes one a deletion empties. `.git` directories are left
/// out (git apply takes no path in one).
type Tree = BTreeMap<Vec<u8>, (char, bool, Vec<u8>)>;

fn read_tree(root: &Path) -> Tree {
    fn walk(root: &Path, rel: &Path, out: &mut Tree) {
        for e in std::fs::read_dir(root.join(rel)).unwrap().flatten() {
            let p = rel.join(e.file_name());
            if e.file_name() == ".git" {
                continue;
            }
            let m = std::fs::symlink_metadata(root.join(&p)).unwrap();
            let key = p.as_os_str().as_bytes().to_vec();
            if m.file_type().is_symlink() {
                let t = std::fs::read_link(root.join(&p)).unwrap();
                out.insert(key, ('l', false, t.as_os_str().as_bytes().to_vec()));
            } else if m.is_dir() {
                walk(root, &p, out);
            } else {
                let data = std::fs::read(root.join(&p)).unwrap();
                out.insert(key, ('f', m.mode() & 0o100 != 0, data));
            }
        }
    }
    let mut out = Tree::new();
    walk(root, Path::new(""), &mut out);
    out
}

/// Where a link at `rel` leads in the tree at `root`, the kernel's way: None when it leaves.
fn leads_inside(root: &Path, rel: &Path) -> bool {
    let mut queue: Vec<OsString> = rel
        .components()
        .map(|c| c.as_os_str().to_os_string())
        .rev()
        .collect();
    let mut at: Vec<OsString> = Vec::new();
    let mut hops = 0;
    while let Some(n) = queue.pop() {
        if n == ".." {
            if at.pop().is_none() {
                return false;
            }
            continue;
        }
        if n == "." {
            continue;
        }
        at.push(n);
        let here: PathBuf = at.iter().collect();
        if let Ok(t) = std::fs::read_link(root.join(&here)) {
            hops += 1;
            if t.is_absolute() || hops > 40 {
                return false;
            }
            at.pop();
            for c in t.components().collect::<Vec<_>>().into_iter().rev() {
                match c {
                    Component::Normal(x) => queue.push(x.to_os_string()),
                    Component::ParentDir => queue.push("..".into()),
                    _ => {}
                }
            }
        }
    }
    true
}

fn copy_tree(from: &Path, to: &Path) {
    let ok = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(ok.success());
}

#[test]
fn the_diff_describes_the_apply_exactly_and_a_default_apply_takes_nothing_dangerous() {
    if !full_level_or_skip("handback") {
        return;
    }
    let seeds: u64 = std::env::var("JAIL_TEST_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    for (who, off) in cases() {
        for seed in 1..=seeds {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let fx = Cow::new(who, off, &format!("hb-prop-{seed}"));
            host_tree(&fx);
            let script = script(&mut rng);
            let run = fx.run(&script);
            let what = format!("{who:?} {off:?} seed {seed}:\n{script}");
            assert!(run.ok(), "{what}\n{}", run.describe());
            if !run.stderr.contains("jail diff ") {
                continue; // the run changed nothing
            }
            let id = run_id(&run);
            // Its bytes as they are (the harness's Run holds text).
            let raw = fx
                .command(common::jail_bin(), &["diff", &id])
                .output()
                .unwrap();
            assert!(
                raw.status.success(),
                "{what}\n{}",
                String::from_utf8_lossy(&raw.stderr)
            );
            let patch_text = String::from_utf8_lossy(&raw.stdout).into_owned();
            let before = read_tree(&fx.repo);
            // What git apply makes of the diff, on a copy of the host as it is.
            let copy = fx.dir.join("copy");
            copy_tree(&fx.repo, &copy);
            let patch_file = fx.dir.join("run.patch");
            std::fs::write(&patch_file, &raw.stdout).unwrap();
            let git_apply = Command::new("git")
                .arg("-C")
                .arg(&copy)
                // git apply refuses every path with a .git component (a nested repository's
                // git directory the run deleted): those are compared by the flags, not here.
                .args(["apply", "--whitespace=nowarn", "--exclude=*.git/*"])
                .arg(&patch_file)
                .output()
                .unwrap();
            assert!(
                git_apply.status.success(),
                "{what}\ngit apply refused jail's patch: {}\n{}",
                String::from_utf8_lossy(&git_apply.stderr),
                patch_text
            );
            // A default apply takes nothing the oracle calls dangerous.
            let tracked = common::git(&fx, &["ls-files", "-z"]);
            let default = fx.jail(&["apply", &id]);
            assert!(default.ok(), "{what}\n{}", default.describe());
            let after = read_tree(&fx.repo);
            for (path, entry) in &after {
                if before.get(path) == Some(entry) {
                    continue;
                }
                let p = Path::new(std::ffi::OsStr::from_bytes(path));
                let names: Vec<&[u8]> = p.iter().map(|c| c.as_bytes()).collect();
                assert!(
                    !names
                        .iter()
                        .any(|n| matches!(*n, b".envrc" | b".husky" | b".vscode" | b".git")),
                    "{what}\na protected name was applied by default: {p:?}"
                );
                let was_exec = before.get(path).is_some_and(|e| e.0 == 'f' && e.1);
                assert!(
                    entry.0 != 'f' || !entry.1 || was_exec,
                    "{what}\na new executable was applied by default: {p:?}"
                );
                if entry.0 == 'l' {
                    assert!(
                        leads_inside(&fx.repo, p),
                        "{what}\na symlink leading out of the root was applied by default: {p:?}"
                    );
                }
            }
            for (path, entry) in &before {
                if after.contains_key(path) {
                    continue;
                }
                let in_git = tracked.split('\0').any(|t| t.as_bytes() == &path[..]);
                let spec = OsString::from_vec([b"HEAD:".to_vec(), path.clone()].concat());
                let unchanged = in_git
                    && fx
                        .command(
                            "git".as_ref(),
                            &["-C", copy.to_str().unwrap(), "cat-file", "-p"],
                        )
                        .arg(&spec)
                        .output()
                        .is_ok_and(|o| {
                            o.status.success() && (entry.0 == 'l' || o.stdout == entry.2)
                        });
                assert!(
                    unchanged,
                    "{what}\na deletion git cannot bring back was applied by default: {:?}",
                    String::from_utf8_lossy(path)
                );
            }
            // The rest: the whole apply gives exactly what the diff describes.
            let rest = fx.jail(&["apply", &id, "--include-flagged"]);
            assert!(rest.ok(), "{what}\n{}", rest.describe());
            let applied = read_tree(&fx.repo);
            let described = read_tree(&copy);
            if applied != described {
                let keys: std::collections::BTreeSet<_> =
                    applied.keys().chain(described.keys()).collect();
                let diff: Vec<String> = keys
                    .into_iter()
                    .filter(|k| applied.get(*k) != described.get(*k))
                    .map(|k| {
                        format!(
                            "{:?}: applied {:?} / described {:?}",
                            String::from_utf8_lossy(k),
                            applied.get(k),
                            described.get(k)
                        )
                    })
                    .collect();
                panic!(
                    "{what}\napply and diff differ:\n{}\n{}",
                    diff.join("\n"),
                    patch_text
                );
            }
        }
    }
}
