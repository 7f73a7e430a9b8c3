//! jail's own state is out of every jail's reach (issue 33, class 7): the store where
//! copy-on-write layers wait for review (`$XDG_STATE_HOME/jail`, else `~/.local/state/jail`),
//! whatever the flags open around it, and every store used before under another
//! `XDG_STATE_HOME`. Each test plays the attack from inside a real run, then the person's side
//! (`jail runs`, `apply`, `discard`, each with a timeout: a FIFO must not hang them), as root and
//! as uid 65534, with the overlay and with the copy-based layer (no mount view).

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::cow::{cases, run_id};
use common::{Fixture, Layer, Run, Who, full_level_or_skip};

/// A fixture whose `XDG_STATE_HOME` is `state` (relative to the fixture; None: unset, the
/// store is the default one in the fixture's HOME), run with the layers `off` switched off.
struct Store {
    fx: Fixture,
    off: &'static [Layer],
    /// The store's root (`…/jail`).
    root: PathBuf,
}

impl std::ops::Deref for Store {
    type Target = Fixture;
    fn deref(&self) -> &Fixture {
        &self.fx
    }
}

fn fixture(who: Who, off: &'static [Layer], name: &str, state: Option<&str>) -> Store {
    let fx = Fixture::new(who, name);
    let base = match state {
        Some(rel) => fx.dir.join(rel),
        None => fx.home.join(".local/state"),
    };
    std::fs::create_dir_all(&base).unwrap();
    fx.give_to(who);
    let base = std::fs::canonicalize(&base).unwrap();
    let mut fx = fx.with_env(&[
        ("GIT_AUTHOR_NAME", "agent"),
        ("GIT_AUTHOR_EMAIL", "agent@example.invalid"),
        ("GIT_COMMITTER_NAME", "agent"),
        ("GIT_COMMITTER_EMAIL", "agent@example.invalid"),
    ]);
    fx = match state {
        Some(_) => fx.with_env(&[("XDG_STATE_HOME", &base.to_string_lossy())]),
        None => fx.scrubbing(&["XDG_STATE_HOME"]),
    };
    Store {
        fx,
        off,
        root: base.join("jail"),
    }
}

impl Store {
    fn s(&self, rel: &str) -> String {
        self.root.join(rel).to_string_lossy().into_owned()
    }

    /// jail `flags` -- /bin/sh -c `script` in this fixture's mode, with `env` added.
    fn sh(&self, flags: &[&str], script: &str, env: &[(&str, &str)]) -> Run {
        let mut args = flags.to_vec();
        args.extend(["--", "/bin/sh", "-c", script]);
        self.fx.jail_with(&args, self.off, env)
    }

    /// A pending copy-on-write run of `dir` that writes `text` to `name` there: its id.
    fn pending(&self, dir: &str, name: &str, text: &str) -> String {
        let run = self.sh(
            &["--cow", dir, "--cwd", dir],
            &format!("echo {text} > {name}"),
            &[],
        );
        assert!(
            run.ok(),
            "{:?} {:?}: {}",
            self.who,
            self.off,
            run.describe()
        );
        run_id(&run)
    }

    /// The host side: `jail ARGS` as the fixture's user, killed (and the test failed) when it
    /// has not ended after 30 s.
    fn host(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        timed(&self.fx, args, env)
    }
}

/// `jail ARGS` on the host as the fixture's user, every layer on, with `env` added; panics when
/// it has not ended within 30 s (a review command that blocks on a FIFO planted in the store).
fn timed(fx: &Fixture, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = fx.command(common::jail_bin(), args);
    cmd.env("JAIL_TEST_DISABLE", "")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn jail");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{:?}: jail {args:?} hung (30 s): it blocked on something planted in the store\n{}",
                fx.who,
                err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        code: status.code(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// The name of the apply lock of `root` in the store's `locks/` (what an attacker computes).
fn lock_name(root: &Path) -> String {
    let real = std::fs::canonicalize(root).unwrap();
    sha1_smol::Sha1::from(real.as_os_str().as_encoded_bytes())
        .digest()
        .to_string()[..16]
        .to_string()
}

fn exists(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// The attack on `locks/` and `runs/` from inside a run that may write an ancestor of the
/// store: look, read a pending layer, plant a symlink where the next apply's lock goes and a
/// FIFO where the next discard's lock goes. Each step that works prints a marker.
fn plant_script(st: &Store, a: &str, b: &str, out: &Path) -> String {
    format!(
        "ls -a {runs} >/dev/null 2>&1 && echo SAW-RUNS; \
         ls -a {locks} >/dev/null 2>&1 && echo SAW-LOCKS; \
         cat {runs}/{a}/0/upper/a.txt {runs}/{a}/run.json 2>/dev/null; \
         ln -s {out} {locks}/{la} 2>/dev/null && echo PLANTED-LINK; \
         mkfifo {locks}/{lb} 2>/dev/null && echo PLANTED-FIFO; \
         rm -rf {runs}/{a} {runs}/{b} 2>/dev/null; \
         echo done",
        runs = st.s("runs"),
        locks = st.s("locks"),
        out = out.display(),
        la = lock_name(&st.repo),
        lb = lock_name(&st.scratch),
    )
}

/// The person's side after the attack: both earlier runs still listed with their layers, the
/// apply of one and the discard of the other end (no FIFO holds them), follow no link, and do
/// what they say.
fn review_after_attack(st: &Store, a: &str, b: &str, out: &Path, what: &str) {
    let who = (st.who, st.off, what);
    let layer = st.root.join(format!("runs/{a}/0/upper/a.txt"));
    assert!(
        exists(&layer),
        "{who:?}: the earlier run's layer is gone ({})",
        layer.display()
    );
    let runs = st.host(&["runs"], &[]);
    assert!(
        runs.ok() && runs.stdout.contains(a) && runs.stdout.contains(b),
        "{who:?}: the pending runs are no longer listed\n{}",
        runs.describe()
    );
    let apply = st.host(&["apply", a], &[]);
    assert!(
        !exists(out),
        "{who:?}: jail apply followed a symlink planted in the store and created {}\n{}",
        out.display(),
        apply.describe()
    );
    assert!(apply.ok(), "{who:?}: {}", apply.describe());
    assert_eq!(
        std::fs::read_to_string(st.repo.join("a.txt")).unwrap(),
        "LAYER-A\n",
        "{who:?}: the apply did not land"
    );
    let discard = st.host(&["discard", b], &[]);
    assert!(discard.ok(), "{who:?}: {}", discard.describe());
    assert!(
        !exists(&st.root.join(format!("runs/{b}"))),
        "{who:?}: discard left the run"
    );
}

#[test]
fn a_writable_ancestor_of_the_store_reaches_neither_its_locks_nor_its_runs() {
    if !full_level_or_skip("handback-store") {
        return;
    }
    // (the store's base relative to the fixture, or None for the default one in HOME; the
    // writable ancestor, relative to the fixture)
    let shapes: &[(Option<&str>, &str)] = &[(Some("state"), "state"), (None, "home")];
    for (who, off) in cases() {
        for (state, writable) in shapes {
            let st = fixture(who, off, "store-locks", *state);
            let what = format!("--rw {writable}");
            let a = st.pending(&st.p("repo"), "a.txt", "LAYER-A");
            let b = st.pending(&st.p("scratch"), "b.txt", "LAYER-B");
            let out = st.dir.join("outside");
            let run = st.sh(
                &["--rw", &st.p(writable)],
                &plant_script(&st, &a, &b, &out),
                &[],
            );
            assert!(run.ok(), "{who:?} {off:?} {what}: {}", run.describe());
            // Without the mount view, Landlock alone hides: a hidden directory's names can be
            // listed (its parent's listing right reaches beneath, the report says so), never
            // read or written.
            let mut markers = vec!["LAYER-A", "\"layers\"", "PLANTED-LINK", "PLANTED-FIFO"];
            if off.is_empty() {
                markers.extend(["SAW-RUNS", "SAW-LOCKS"]);
            }
            for marker in markers {
                assert!(
                    !run.stdout.contains(marker),
                    "{who:?} {off:?} {what}: the store was reachable inside ({marker})\n{}",
                    run.describe()
                );
            }
            review_after_attack(&st, &a, &b, &out, &what);

            // Walking away from the store: moving it, or a directory on the way to it, and
            // making a fresh one in its place (to plant a pending run the person applies).
            let c = st.pending(&st.p("repo"), "c.txt", "LAYER-C");
            let parent = st.root.parent().unwrap().display().to_string();
            let script = format!(
                "mv {root} {root}.x 2>/dev/null && echo MOVED-STORE; \
                 mv {parent} {parent}.x 2>/dev/null && echo MOVED-PARENT; \
                 mkdir -p {root}/runs/deadbeef 2>/dev/null && echo MADE-STORE; echo done",
                root = st.root.display(),
            );
            let run = st.sh(&["--rw", &st.p(writable)], &script, &[]);
            for marker in ["MOVED-STORE", "MOVED-PARENT", "MADE-STORE"] {
                assert!(
                    !run.stdout.contains(marker),
                    "{who:?} {off:?} {what}: {marker}\n{}",
                    run.describe()
                );
            }
            let runs = st.host(&["runs"], &[]);
            assert!(
                runs.stdout.contains(&c) && !runs.stdout.contains("deadbeef"),
                "{who:?} {off:?} {what}: {}",
                runs.describe()
            );
        }
    }
}

#[test]
fn the_review_commands_follow_no_link_and_open_no_fifo_in_the_store() {
    // What a run could plant where the store was reachable (an older jail, a store made under
    // a writable tree before it existed): the review commands refuse it with one line naming
    // the path, and never block.
    if !full_level_or_skip("handback-store") {
        return;
    }
    for (who, off) in cases() {
        let st = fixture(who, off, "store-host", Some("state"));
        let a = st.pending(&st.p("repo"), "a.txt", "LAYER-A");
        let b = st.pending(&st.p("scratch"), "b.txt", "LAYER-B");
        let out = st.dir.join("outside");
        let la = st.root.join("locks").join(lock_name(&st.repo));
        let lb = st.root.join("locks").join(lock_name(&st.scratch));
        let fake = st.root.join("runs/deadbeef");
        let plant = format!(
            "ln -s {out} {la} && mkfifo {lb} && mkdir {fake} && mkfifo {fake}/run.json",
            out = out.display(),
            la = la.display(),
            lb = lb.display(),
            fake = fake.display(),
        );
        let planted = st
            .command(Path::new("/bin/sh"), &["-c", &plant])
            .output()
            .unwrap();
        assert!(planted.status.success(), "{planted:?}");

        let runs = st.host(&["runs"], &[]);
        assert!(
            runs.ok() && runs.stdout.contains(&a) && runs.stdout.contains(&b),
            "{who:?} {off:?}: {}",
            runs.describe()
        );
        let apply = st.host(&["apply", &a], &[]);
        assert!(
            !exists(&out),
            "{who:?} {off:?}: jail apply followed the lock symlink\n{}",
            apply.describe()
        );
        common::assert_refused(
            &apply,
            "apply through a symlinked lock",
            &[&la.to_string_lossy()],
        );
        let discard = st.host(&["discard", &b], &[]);
        common::assert_refused(
            &discard,
            "discard through a FIFO lock",
            &[&lb.to_string_lossy()],
        );
        assert!(
            exists(&st.root.join(format!("runs/{a}/0/upper/a.txt")))
                && exists(&st.root.join(format!("runs/{b}"))),
            "{who:?} {off:?}: a refused command removed a layer"
        );

        // A symlink in place of the store's runs/ or locks/ is refused too, never followed.
        let elsewhere = st.dir.join("elsewhere");
        std::fs::create_dir_all(elsewhere.join("runs")).unwrap();
        std::fs::create_dir_all(elsewhere.join("locks")).unwrap();
        common::chown_tree(&elsewhere, common::uid_of(who));
        for sub in ["locks", "runs"] {
            let at = st.root.join(sub);
            let aside = st.root.join(format!("{sub}.real"));
            std::fs::rename(&at, &aside).unwrap();
            std::os::unix::fs::symlink(elsewhere.join(sub), &at).unwrap();
            let _ = std::os::unix::fs::lchown(&at, Some(common::uid_of(who)), None);
            let cmd: &[&str] = if sub == "locks" {
                &["discard", &a]
            } else {
                &["runs"]
            };
            let refused = st.host(cmd, &[]);
            common::assert_refused(
                &refused,
                "a symlinked store directory",
                &[&at.to_string_lossy()],
            );
            std::fs::remove_file(&at).unwrap();
            std::fs::rename(&aside, &at).unwrap();
        }
    }
}

#[test]
fn a_writable_home_leaves_the_pending_runs_where_they_are() {
    // With --rw $HOME, what the command changes in HOME's dot entries is moved aside after the
    // run; the store there is jail's own (written by jail during a --cow run, hidden from the
    // command) and is never moved with it.
    if !full_level_or_skip("handback-store") {
        return;
    }
    // The default store (~/.local/state/jail), and one under a dot entry of HOME of its own.
    let shapes: &[Option<&str>] = &[None, Some("home/.mystate")];
    for (who, off) in cases() {
        for state in shapes {
            let st = fixture(who, off, "store-home", *state);
            let a = st.pending(&st.p("repo"), "a.txt", "LAYER-A");
            let home = st.home.display().to_string();
            let base = st.root.parent().unwrap().display().to_string();
            // Dot entries changed, a git layout made of ~/.local, a sibling of the store, and
            // the store's own parent written.
            let script = format!(
                "echo x >> ~/.profile; mkdir -p ~/.vim/plugin && echo x > ~/.vim/plugin/x.vim; \
                 mkdir -p ~/.local/objects ~/.local/refs; echo 'ref: refs/heads/main' > ~/.local/HEAD; \
                 mkdir -p {base}/other && echo x > {base}/other/x; echo x > {base}/evil; \
                 echo / >> {root}/stores 2>/dev/null && echo FORGED; \
                 echo b > b.txt; echo done",
                root = st.root.display()
            );
            let repo = st.p("repo");
            let run = st.sh(
                &["--rw", &home, "--cow", &repo, "--cwd", &repo],
                &script,
                &[],
            );
            let what = (who, off, state);
            assert!(
                run.stdout.contains("done") && !run.stdout.contains("FORGED"),
                "{what:?}: {}",
                run.describe()
            );
            let b = run_id(&run);
            assert!(
                !exists(&st.home.join(".vim")),
                "{what:?}: the quarantine did not run\n{}",
                run.describe()
            );
            assert!(
                exists(&st.root.join(format!("runs/{a}/0/upper/a.txt"))),
                "{what:?}: the store was moved aside\n{}",
                run.describe()
            );
            let runs = st.host(&["runs"], &[]);
            assert!(
                runs.stdout.contains(&a) && runs.stdout.contains(&b),
                "{what:?}: pending runs vanished after a --rw HOME run\n{}\n{}",
                run.describe(),
                runs.describe()
            );
        }
    }
}

#[test]
fn a_run_under_another_state_home_cannot_read_an_earlier_stores_layers() {
    if !full_level_or_skip("handback-store") {
        return;
    }
    for (who, off) in cases() {
        let st = fixture(who, off, "store-other", Some("state1"));
        let a = st.pending(&st.p("repo"), "secret.txt", "LAYER-SECRET");
        let state2 = st.dir.join("state2");
        std::fs::create_dir_all(&state2).unwrap();
        st.give_to(who);
        let other = [("XDG_STATE_HOME", state2.to_str().unwrap())];
        let script = format!(
            "cat {runs}/{a}/0/upper/secret.txt {runs}/{a}/run.json 2>/dev/null; \
             ls {root} 2>/dev/null | grep -q . && echo SAW-STORE; \
             mkdir -p {runs}/deadbeef 2>/dev/null && echo WROTE; echo done",
            runs = st.s("runs"),
            root = st.root.display(),
        );
        let repo = st.p("repo");
        let fixture_dir = st.dir.display().to_string();
        // A copy-on-write run in the other store; one that may write the fixture (an ancestor
        // of both stores); one with a read-only view of it.
        let flag_sets: [&[&str]; 3] = [
            &["--cow", &repo, "--cwd", &repo],
            &["--rw", &fixture_dir],
            &["--ro", &fixture_dir],
        ];
        for flags in flag_sets {
            let run = st.sh(flags, &script, &other);
            assert!(
                run.stdout.contains("done"),
                "{who:?} {off:?} {flags:?}: {}",
                run.describe()
            );
            // Names listed without the mount view: see the test above.
            let mut markers = vec!["LAYER-SECRET", "\"layers\"", "WROTE"];
            if off.is_empty() {
                markers.push("SAW-STORE");
            }
            for marker in markers {
                assert!(
                    !run.stdout.contains(marker),
                    "{who:?} {off:?} {flags:?}: a run under another XDG_STATE_HOME reached an \
                     earlier store ({marker})\n{}",
                    run.describe()
                );
            }
        }
        // The earlier store is still the person's to review.
        let runs = st.host(&["runs"], &[]);
        assert!(runs.stdout.contains(&a), "{}", runs.describe());
    }
}

/// A symlink on the way to the store, where the run may write, would let the command point the
/// person's next review at a store it forged: such a run is refused, naming the link.
#[test]
fn a_symlink_on_the_way_to_the_store_is_never_the_commands_to_change() {
    if !full_level_or_skip("handback-store") {
        return;
    }
    for (who, off) in cases() {
        let fx = Fixture::new(who, "store-link");
        std::fs::create_dir_all(fx.dir.join("p/real")).unwrap();
        std::os::unix::fs::symlink("real", fx.dir.join("p/statelink")).unwrap();
        fx.give_to(who);
        let link = fx.p("p/statelink");
        let env = [("XDG_STATE_HOME", link.as_str())];
        let dir = fx.p("p");
        let mut writable = vec!["--rw", dir.as_str()];
        writable.extend(["--", "/bin/sh", "-c", "ln -sfn /tmp p/statelink; echo ran"]);
        let run = fx.jail_with(&writable, off, &env);
        assert_eq!(run.code, Some(125), "{who:?} {off:?}: {}", run.describe());
        assert!(run.stderr.contains("statelink"), "{}", run.describe());
        assert!(!run.stdout.contains("ran"));
        assert_eq!(
            std::fs::read_link(fx.dir.join("p/statelink")).unwrap(),
            Path::new("real")
        );
        // Read-only there, the run goes on.
        let ro = fx.jail_with(&["--ro", &dir, "--", "/bin/true"], off, &env);
        assert!(ro.ok(), "{who:?} {off:?}: {}", ro.describe());
    }
}

/// A store used under one HOME stays hidden under another, also for a user whose home in the
/// password database does not exist (uid 65534's is /nonexistent).
#[test]
fn a_store_used_under_another_home_stays_hidden() {
    if !full_level_or_skip("handback-store") {
        return;
    }
    for (who, off) in cases() {
        let st = fixture(who, off, "store-homes", None);
        let a = st.pending(&st.p("repo"), "secret.txt", "HOME-A-SECRET");
        let other = st.dir.join("other-home");
        std::fs::create_dir_all(&other).unwrap();
        st.give_to(who);
        let script = format!(
            "cat {runs}/{a}/0/upper/secret.txt 2>/dev/null; echo done",
            runs = st.s("runs")
        );
        let run = st.sh(&[], &script, &[("HOME", other.to_str().unwrap())]);
        assert!(
            run.stdout.contains("done"),
            "{who:?} {off:?}: {}",
            run.describe()
        );
        assert!(
            !run.stdout.contains("HOME-A-SECRET"),
            "{who:?} {off:?}: a run under another HOME read a pending layer\n{}",
            run.describe()
        );
    }
}

/// Every entry under `dir` with what a write would change: kind, mode, size, content.
fn tree(dir: &Path) -> Vec<(PathBuf, String)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut queue = vec![dir.to_path_buf()];
    while let Some(d) = queue.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let content = if m.is_file() {
                String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned()
            } else if m.is_dir() {
                queue.push(p.clone());
                String::new()
            } else {
                format!("{:?}", std::fs::read_link(&p).ok())
            };
            out.push((
                p.strip_prefix(dir).unwrap().to_path_buf(),
                format!("{:o} {} {content}", m.mode(), m.size()),
            ));
        }
    }
    out.sort();
    out
}

/// Issue 34: every run made `~/.local/state/jail` in HOME, a read-only one too. A run that
/// stores nothing (no `--cow` layer) and whose command cannot write HOME writes nothing of the
/// user's: HOME is left as it was, entry for entry. A run that may write HOME still gets the
/// store made (and hidden), so that its command cannot plant one (the tests above).
#[test]
fn a_read_only_run_writes_nothing_in_home() {
    if !full_level_or_skip("a_read_only_run_writes_nothing_in_home") {
        return;
    }
    for who in common::users() {
        for off in [&[][..], &[Layer::Mount][..]] {
            let fx = Fixture::new(who, "ro-home").scrubbing(&["XDG_STATE_HOME"]);
            let before = tree(&fx.home);
            let repo = fx.p("repo");
            let run = fx.jail_with(
                &["--ro", &repo, "--", "/bin/cat", "repo/file.txt"],
                off,
                &[],
            );
            assert!(run.ok(), "{who:?} {off:?}: {}", run.describe());
            assert_eq!(
                tree(&fx.home),
                before,
                "{who:?} {off:?}: a read-only run wrote in HOME"
            );
            // A run that may write HOME: the store is there, and out of the command's reach.
            let home = fx.home.to_string_lossy().into_owned();
            let script = "mkdir -p \"$HOME/.local/state/jail/runs/forged\" 2>/dev/null \
                          && echo FORGED; echo done";
            let run = fx.jail_with(&["--rw", &home, "--", "/bin/sh", "-c", script], off, &[]);
            assert!(
                run.stdout.contains("done") && !run.stdout.contains("FORGED"),
                "{who:?} {off:?}: {}",
                run.describe()
            );
            assert!(
                fx.home.join(".local/state/jail/runs").is_dir()
                    && !fx.home.join(".local/state/jail/runs/forged").exists(),
                "{who:?} {off:?}: the store was not made before a run that may write HOME"
            );
        }
    }
}
