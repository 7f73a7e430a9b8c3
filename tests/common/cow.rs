//! Copy-on-write runs for the hand-back tests: a fixture whose jail state directory is its own,
//! the two layer kinds (the overlay, and the copy without the mount view), and the run id the
//! end-of-run line names.

use super::{Fixture, Layer, Run, Who, users};

/// The layer sets every hand-back test runs with: all of them (the overlay), and without the
/// mount view (Docker's default profile), where the layer is a copy.
pub const MODES: &[&[Layer]] = &[&[], &[Layer::Mount]];

/// Who runs, and which layers are off.
pub fn cases() -> Vec<(Who, &'static [Layer])> {
    users()
        .into_iter()
        .flat_map(|w| MODES.iter().map(move |m| (w, *m)))
        .collect()
}

/// A fixture whose jail state directory (where layers wait) is its own, run in one mode.
pub struct Cow {
    pub fx: Fixture,
    pub off: &'static [Layer],
}

impl std::ops::Deref for Cow {
    type Target = Fixture;
    fn deref(&self) -> &Fixture {
        &self.fx
    }
}

impl Cow {
    pub fn new(who: Who, off: &'static [Layer], name: &str) -> Cow {
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

    /// jail with `args`, in this fixture's mode.
    pub fn jail(&self, args: &[&str]) -> Run {
        self.fx.jail_with(args, self.off, &[])
    }

    /// A copy-on-write run of the project, `script` in its root.
    pub fn run(&self, script: &str) -> Run {
        let repo = self.p("repo");
        self.jail(&[
            "--cow", &repo, "--cwd", &repo, "--", "/bin/sh", "-c", script,
        ])
    }

    /// The project as a git repository on branch main with one commit, owned by its user.
    pub fn committed(&self) {
        super::git(self, &["init", "-q", "-b", "main"]);
        super::git(self, &["add", "-A"]);
        super::git(self, &["commit", "-qm", "base"]);
    }
}

/// The run id the end-of-run line names (`review: jail diff ID`).
pub fn run_id(run: &Run) -> String {
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

/// Makes `dir` (with the files already in it) a git repository of its own with one commit,
/// as the fixture's user: a nested repository whose commit exists nowhere else.
pub fn nested_repo(fx: &Fixture, dir: &std::path::Path) {
    fx.give_to(fx.who);
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &["commit", "-qm", "nested"],
    ] {
        let out = fx
            .command(
                "git".as_ref(),
                &[&["-C", dir.to_str().unwrap()], args].concat(),
            )
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?} in {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
