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

use common::{Fixture, Layer, Run, Who, full_level_or_skip, users};

/// The layer sets every test runs with: all of them (the overlay), and without the mount view
/// (Docker's default profile), where the layer is a copy and Landlock alone hides the store.
const MODES: &[&[Layer]] = &[&[], &[Layer::Mount]];

fn cases() -> Vec<(Who, &'static [Layer])> {
    users()
        .into_iter()
        .flat_map(|w| MODES.iter().map(move |m| (w, *m)))
        .collect()
}

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
