//! Shared harness for the integration tests: they run the real `jail` binary, as root and as an
//! unprivileged user, against real files, and try to break each rule from inside.
//!
//! Everything the unprivileged user must reach (the binaries, the fixtures) lives under
//! /var/tmp/jail-tests (mode 0755): not under /tmp, which is private inside the jail, and not
//! under the checkout, whose parents may not be traversable by that user.

#![allow(dead_code)]

pub mod cow;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The unprivileged user the tests switch to when they run as root.
pub const NOBODY: u32 = 65534;

/// A uid no other test runs as, for a test that depends on how many processes one user has on
/// the host: RLIMIT_NPROC is checked against every task of the real uid, in every user
/// namespace, and NOBODY's count changes with each test that runs beside it (a fork bomb holds
/// 64). Root only (setpriv).
pub const LONE_UID: u32 = 65533;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    Root,
    /// uid 65534 when the tests run as root; the current user otherwise.
    User,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Mount,
    Landlock,
    Seccomp,
    /// Landlock's TCP port rules of a `--net connect=`/`bind=` run, the rest of Landlock kept.
    TcpRules,
    /// The hold on listen() of such a run (the filter's refusal or the supervisor's check).
    ListenCheck,
    /// Not a layer: the id maps of the new namespaces are refused after the probe said they
    /// work (as inside another sandbox), so the launch must fall back while it runs.
    IdMaps,
}

impl Layer {
    pub fn name(self) -> &'static str {
        match self {
            Layer::Mount => "mount",
            Layer::Landlock => "landlock",
            Layer::Seccomp => "seccomp",
            Layer::TcpRules => "tcp-rules",
            Layer::ListenCheck => "listen-check",
            Layer::IdMaps => "id-maps",
        }
    }
}

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The users every attack runs as: root and an unprivileged user when possible.
pub fn users() -> Vec<Who> {
    if is_root() {
        vec![Who::Root, Who::User]
    } else {
        vec![Who::User]
    }
}

pub fn uid_of(who: Who) -> u32 {
    match who {
        Who::Root => 0,
        // SAFETY: geteuid cannot fail.
        Who::User if is_root() => NOBODY,
        Who::User => unsafe { libc::geteuid() },
    }
}

pub fn base_dir() -> &'static Path {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        let base = PathBuf::from(format!("/var/tmp/jail-tests-{uid}"));
        std::fs::create_dir_all(base.join("bin")).expect("create /var/tmp/jail-tests");
        for d in [base.clone(), base.join("bin")] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        base
    })
}

/// Copies `src` into the shared bin dir under a name that changes with its content, so that
/// parallel test processes never see a half-written file.
pub fn publish(src: &Path, name: &str) -> PathBuf {
    let meta = std::fs::metadata(src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let mtime = meta
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dest = base_dir()
        .join("bin")
        .join(format!("{name}-{}-{mtime}", meta.len()));
    if !dest.exists() {
        let tmp = dest.with_extension(format!("tmp{}", std::process::id()));
        std::fs::copy(src, &tmp).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&tmp, &dest).unwrap();
    }
    dest
}

/// The jail binary under test, reachable by the unprivileged user.
pub fn jail_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| publish(Path::new(env!("CARGO_BIN_EXE_jail")), "jail"))
}

/// tests/helpers/attack.c, compiled once per content.
pub fn attack_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| compile_helper("attack"))
}

/// tests/helpers/NAME.c compiled into the shared bin dir, under a name that changes with its
/// content (parallel test processes never see a half-written file).
pub fn compile_helper(name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/helpers/{name}.c"));
    let text = std::fs::read(&src).unwrap();
    let hash = text.iter().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x100000001b3)
    });
    let dest = base_dir().join("bin").join(format!("{name}-{hash:016x}"));
    if !dest.exists() {
        let tmp = dest.with_extension(format!("tmp{}", std::process::id()));
        let out = Command::new("cc")
            .args(["-O1", "-Wall", "-o"])
            .arg(&tmp)
            .arg(&src)
            .output()
            .unwrap_or_else(|e| panic!("a C compiler (cc) is needed for {name}.c: {e}"));
        assert!(
            out.status.success(),
            "cc {name}.c failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&tmp, &dest).unwrap();
    }
    dest
}

/// Whether this machine gives every layer; fails loudly instead of skipping when
/// JAIL_TEST_REQUIRE=full (as CI sets it).
pub fn full_level_or_skip(test: &str) -> bool {
    static LEVEL: OnceLock<(bool, String)> = OnceLock::new();
    let (full, text) = LEVEL.get_or_init(|| {
        let out = Command::new(jail_bin()).args(["probe"]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (text.contains("level:            full"), text)
    });
    if *full {
        check_test_hooks();
        return true;
    }
    if std::env::var("JAIL_TEST_REQUIRE").as_deref() == Ok("full") {
        panic!("JAIL_TEST_REQUIRE=full but this machine does not give every layer:\n{text}");
    }
    eprintln!("skipping {test}: not every layer is available here:\n{text}");
    false
}

/// The attack tests switch layers off through the test-only JAIL_TEST_DISABLE switch: make sure
/// the binary was built with it, or every "layer off" run would silently prove nothing.
fn check_test_hooks() {
    static CHECKED: OnceLock<()> = OnceLock::new();
    CHECKED.get_or_init(|| {
        let out = Command::new(jail_bin())
            .args(["--dry-run", "--", "true"])
            .env("JAIL_TEST_DISABLE", "landlock")
            .current_dir(base_dir())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("\"test_disabled\""),
            "the tests need the binary built with --features test-hooks; dry run said:\n{text}"
        );
    });
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A scratch tree owned by the user the test runs as:
///   repo/     a project (file.txt, src/main.rs, sub/), used read-only
///   scratch/  a directory the tests make writable
///   home/     HOME, with secrets in the default hidden set
pub struct Fixture {
    pub who: Who,
    pub dir: PathBuf,
    pub repo: PathBuf,
    pub scratch: PathBuf,
    pub home: PathBuf,
    /// Added to every command the fixture runs ([`Fixture::with_env`]).
    env: Vec<(String, String)>,
    /// Removed from every command the fixture runs ([`Fixture::scrubbing`]).
    scrub: Vec<String>,
}

pub const SECRETS: &[(&str, &str)] = &[
    (".ssh/id_ed25519", "SECRET-SSH-KEY"),
    (".aws/credentials", "SECRET-AWS"),
    (".netrc", "SECRET-NETRC"),
    (".config/gh/hosts.yml", "SECRET-GH"),
    (".git-credentials", "SECRET-GIT-CREDENTIALS"),
];

impl Fixture {
    pub fn new(who: Who, name: &str) -> Fixture {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir = base_dir().join(format!("fx-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let repo = dir.join("repo");
        let scratch = dir.join("scratch");
        let home = dir.join("home");
        for d in [
            &repo.join("src"),
            &repo.join("sub"),
            &repo.join("empty"),
            &scratch,
            &home.join(".docker"),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(repo.join("file.txt"), "original\n").unwrap();
        std::fs::write(repo.join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(repo.join("sub/keep"), "x\n").unwrap();
        std::fs::write(scratch.join("movable"), "movable\n").unwrap();
        for (rel, content) in SECRETS {
            let p = home.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, content).unwrap();
        }
        let fx = Fixture {
            who,
            dir,
            repo,
            scratch,
            home,
            env: Vec::new(),
            scrub: Vec::new(),
        };
        fx.give_to(who);
        fx
    }

    /// Makes the whole tree owned by `who` (so the user could write it without jail: the jail is
    /// what must stop it).
    pub fn give_to(&self, who: Who) {
        let uid = uid_of(who);
        if is_root() {
            chown_tree(&self.dir, uid);
        }
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    pub fn p(&self, rel: &str) -> String {
        self.dir.join(rel).to_string_lossy().into_owned()
    }

    /// Every command this fixture runs gets `env` too (a PATH, a git identity).
    pub fn with_env(mut self, env: &[(&str, &str)]) -> Fixture {
        self.env
            .extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        self
    }

    /// Every command this fixture runs gets these variables removed.
    pub fn scrubbing(mut self, names: &[&str]) -> Fixture {
        self.scrub.extend(names.iter().map(|n| n.to_string()));
        self
    }

    /// The flags most attacks run with: the project read-only, the scratch directory writable.
    pub fn ro_flags(&self) -> Vec<String> {
        vec![
            "--ro".into(),
            self.p("repo"),
            "--rw".into(),
            self.p("scratch"),
        ]
    }

    /// Runs jail with `args` (flags, `--`, command) as this fixture's user.
    pub fn jail(&self, args: &[&str]) -> Run {
        self.jail_with(args, &[], &[])
    }

    /// jail `flags` -- /bin/sh -c `script`.
    pub fn sh(&self, flags: &[&str], script: &str) -> Run {
        self.jail(&sh_args(flags, script))
    }

    /// jail `args` in `dir`, every layer on, with `env` added.
    pub fn jail_at(&self, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = self.command(jail_bin(), args);
        cmd.current_dir(dir).env("JAIL_TEST_DISABLE", "");
        for (k, v) in env {
            cmd.env(k, v);
        }
        Run::from(cmd.output().expect("run jail"))
    }

    /// jail `flags` -- /bin/sh -c `script` in `dir`, with `env` added.
    pub fn sh_at(&self, dir: &Path, flags: &[&str], script: &str, env: &[(&str, &str)]) -> Run {
        self.jail_at(dir, &sh_args(flags, script), env)
    }

    /// Runs jail with layers switched off and extra environment.
    pub fn jail_with(&self, args: &[&str], disabled: &[Layer], env: &[(&str, &str)]) -> Run {
        let mut cmd = self.command(jail_bin(), args);
        let list: Vec<&str> = disabled.iter().map(|l| l.name()).collect();
        cmd.env("JAIL_TEST_DISABLE", list.join(","));
        for (k, v) in env {
            cmd.env(k, v);
        }
        Run::from(cmd.output().expect("run jail"))
    }

    /// A command run as the fixture's user, with HOME in the fixture and cwd at its root.
    pub fn command(&self, program: &Path, args: &[&str]) -> Command {
        let mut cmd = as_user(self.who, program);
        cmd.args(args)
            .current_dir(&self.dir)
            .env("HOME", &self.home)
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("SSH_AUTH_SOCK")
            .stdin(Stdio::null());
        for k in &self.scrub {
            cmd.env_remove(k);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }
}

/// `flags -- /bin/sh -c script`, as jail's arguments.
fn sh_args<'a>(flags: &[&'a str], script: &'a str) -> Vec<&'a str> {
    let mut args = flags.to_vec();
    args.extend(["--", "/bin/sh", "-c", script]);
    args
}

/// The argv of `/bin/sh -c script`.
pub fn sh_argv(script: &str) -> Vec<String> {
    vec!["/bin/sh".into(), "-c".into(), script.into()]
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn chown_tree(path: &Path, uid: u32) {
    let _ = chown(path, Some(uid), Some(uid));
    if std::fs::symlink_metadata(path)
        .map(|m| m.is_dir())
        .unwrap_or(false)
    {
        for entry in std::fs::read_dir(path).unwrap().flatten() {
            chown_tree(&entry.path(), uid);
        }
    }
}

/// Runs the host's git in the fixture's project as its user, asserts that it worked, and
/// returns its output.
pub fn git(fx: &Fixture, args: &[&str]) -> String {
    let out = fx
        .command("git".as_ref(), &[&["-C", &fx.p("repo")], args].concat())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Puts back what jail moved aside after a run (`NAME.jail-quarantine-*` → `NAME`), as a user
/// who reviewed it would: attacks proved one after another on one fixture (the run with the
/// layers off may plant) then find the tree as the next attack expects it.
pub fn restore_quarantined(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(i) = name.find(".jail-quarantine-") {
            let back = dir.join(&name[..i]);
            if std::fs::symlink_metadata(&back).is_ok_and(|m| m.is_dir()) {
                let _ = std::fs::remove_dir_all(&back);
            }
            let _ = std::fs::rename(e.path(), back);
        } else if e.file_type().is_ok_and(|t| t.is_dir()) {
            restore_quarantined(&e.path());
        }
    }
}

/// `program` as a Command that runs as `who` (through setpriv when switching from root).
pub fn as_user(who: Who, program: &Path) -> Command {
    if who == Who::User && is_root() {
        as_uid(NOBODY, program)
    } else {
        Command::new(program)
    }
}

/// `program` as a Command that runs as `uid` and its group of the same number, no other groups
/// (root only: through setpriv).
pub fn as_uid(uid: u32, program: &Path) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args([
        format!("--reuid={uid}"),
        format!("--regid={uid}"),
        "--clear-groups".into(),
    ])
    .arg(program);
    cmd
}

/// The tasks (threads included, as RLIMIT_NPROC counts them) whose real uid is `uid` now.
pub fn tasks_of(uid: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
        .filter(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().next()?.parse::<u32>().ok())
                == Some(uid)
        })
        .map(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(1)
        })
        .sum()
}

#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Run {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
    pub fn describe(&self) -> String {
        format!(
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// The verdict of one attack run.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    Blocked,
}

/// Reads the attack helper's protocol. A jail failure (exit 125) or a helper setup failure is
/// neither verdict: it means the test itself is broken.
pub fn verdict(run: &Run) -> Verdict {
    if run.code == Some(0) && run.stdout.contains("ALLOWED ") {
        return Verdict::Allowed;
    }
    if run.code == Some(1) && run.stdout.contains("BLOCKED ") {
        return Verdict::Blocked;
    }
    // Killed by the seccomp architecture check (SIGSYS): jail reports 128 + 31.
    if run.code == Some(128 + libc::SIGSYS) {
        return Verdict::Blocked;
    }
    panic!("attack neither allowed nor blocked:\n{}", run.describe());
}

/// One attempt to break a rule from inside.
pub struct Attack {
    pub name: String,
    /// jail flags before `--`.
    pub flags: Vec<String>,
    /// the command run inside.
    pub argv: Vec<String>,
    /// Layers each of which blocks the attack on its own.
    pub blockers: Vec<Layer>,
    /// Variables added to jail's own environment (the caller's).
    pub env: Vec<(String, String)>,
}

impl Attack {
    pub fn new(name: &str, flags: &[&str], argv: Vec<String>, blockers: &[Layer]) -> Attack {
        Attack {
            name: name.into(),
            flags: flags.iter().map(|s| s.to_string()).collect(),
            argv,
            blockers: blockers.to_vec(),
            env: Vec::new(),
        }
    }

    /// The same attack with `key=value` in jail's environment.
    pub fn with_env(mut self, key: &str, value: &str) -> Attack {
        self.env.push((key.into(), value.into()));
        self
    }

    fn run(&self, fx: &Fixture, disabled: &[Layer]) -> Run {
        let mut args: Vec<&str> = self.flags.iter().map(String::as_str).collect();
        if disabled.contains(&Layer::Mount) && disabled.contains(&Layer::Landlock) {
            // Nothing protects files then: jail refuses unless told to run anyway.
            args.push("--allow-unconfined");
        }
        args.push("--");
        args.extend(self.argv.iter().map(String::as_str));
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        fx.jail_with(&args, disabled, &env)
    }

    /// Proves the rule: blocked with every layer; blocked by each listed layer alone; and
    /// allowed once all of them are off (so the test can fail).
    pub fn prove(&self, fx: &Fixture) {
        let who = fx.who;
        let full = self.run(fx, &[]);
        assert_eq!(
            verdict(&full),
            Verdict::Blocked,
            "{} as {who:?}: not blocked by the full jail\n{}",
            self.name,
            full.describe()
        );
        if self.blockers.len() > 1 {
            for only in &self.blockers {
                let off: Vec<Layer> = self
                    .blockers
                    .iter()
                    .copied()
                    .filter(|l| l != only)
                    .collect();
                let run = self.run(fx, &off);
                assert_eq!(
                    verdict(&run),
                    Verdict::Blocked,
                    "{} as {who:?}: the {} layer alone does not block it\n{}",
                    self.name,
                    only.name(),
                    run.describe()
                );
            }
        }
        let open = self.run(fx, &self.blockers);
        assert_eq!(
            verdict(&open),
            Verdict::Allowed,
            "{} as {who:?}: still blocked with {:?} off, so this test cannot fail\n{}",
            self.name,
            self.blockers,
            open.describe()
        );
    }
}

/// A process outside the jail, owned by `who` and holding no capabilities (root's processes
/// otherwise out-rank a capability-less root inside for ptrace).
pub struct Outsider {
    pub child: std::process::Child,
}

impl Outsider {
    pub fn spawn(who: Who) -> Outsider {
        let mut cmd = Command::new("setpriv");
        if who == Who::User && is_root() {
            cmd.args([
                format!("--reuid={NOBODY}"),
                format!("--regid={NOBODY}"),
                "--clear-groups".into(),
            ]);
        } else {
            cmd.args(["--inh-caps=-all", "--bounding-set=-all"]);
        }
        let child = cmd
            .args(["sleep", "300"])
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn outsider");
        // Wait until it has exec'd sleep (its caps and uid are final then).
        for _ in 0..200 {
            let comm =
                std::fs::read_to_string(format!("/proc/{}/comm", child.id())).unwrap_or_default();
            if comm.trim() == "sleep" {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        Outsider { child }
    }

    pub fn pid(&self) -> String {
        self.child.id().to_string()
    }
}

impl Drop for Outsider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Pids of processes whose command line contains `marker`.
/// Waits until `ready` holds, looking every 20 ms, for at most `within`, and panics naming
/// `what` when it never does. A test waits on what it needs, never for a time: a deadline is
/// generous (a loaded machine is slow), and a condition that holds ends the wait at once.
pub fn wait_for(what: &str, within: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !ready() {
        assert!(Instant::now() < deadline, "waited {within:?} for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The processes whose command line is exactly `argv` joined by spaces (a command, not a shell
/// or a jail whose arguments mention it).
pub fn processes_running(argv: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let words: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|w| !w.is_empty())
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        if words.join(" ") == argv {
            out.push(pid);
        }
    }
    out
}

pub fn processes_with(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(marker) {
            out.push(pid);
        }
    }
    out
}

/// A refusal: exit 125, nothing run, no panic, one `jail: ` line (or a clap `error:` report),
/// mentioning every needle.
#[track_caller]
pub fn assert_refused(run: &Run, what: &str, needles: &[&str]) {
    assert_eq!(
        run.code,
        Some(125),
        "{what}: not refused\n{}",
        run.describe()
    );
    assert!(
        !run.stdout.contains("RAN"),
        "{what}: the command ran\n{}",
        run.describe()
    );
    assert!(
        !run.stderr.contains("panicked") && !run.stderr.contains("RUST_BACKTRACE"),
        "{what}: jail panicked\n{}",
        run.describe()
    );
    let first = run.stderr.lines().next().unwrap_or_default();
    if first.starts_with("jail: ") {
        assert_eq!(
            run.stderr.lines().count(),
            1,
            "{what}: more than one line\n{}",
            run.describe()
        );
    } else {
        assert!(
            first.starts_with("error: "),
            "{what}: stderr does not start with `jail: ` or `error: `\n{}",
            run.describe()
        );
    }
    for n in needles {
        assert!(
            run.stderr.contains(n),
            "{what}: the message does not mention {n:?}\n{}",
            run.describe()
        );
    }
}

/// A child whose stdout is read line by line on a thread.
pub struct Background {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Background {
    pub fn spawn(mut cmd: Command) -> Background {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn");
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        Background {
            child,
            lines,
            seen: Vec::new(),
            stderr: Some(stderr),
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Reaps the child once it has been killed.
    pub fn wait(&mut self) {
        let _ = self.child.wait();
    }

    /// Waits (at most 60 s: a loaded machine is slow to start a jail) for a line equal to
    /// `line`.
    pub fn expect(&mut self, line: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.seen.iter().any(|l| l == line) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(_) => {
                    let _ = self.child.kill();
                    panic!("never saw {line:?}; output so far: {:?}", self.seen);
                }
            }
        }
    }

    /// Waits (at most 60 s) for the exit; returns the code and all of the output.
    pub fn finish(mut self) -> Run {
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("did not exit; output so far: {:?}", self.seen);
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // The pipe closes when the last holder exits: at once, unless a process of the tree
        // still holds it.
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(10)) {
            self.seen.push(l);
        }
        let mut stdout = self.seen.join("\n");
        stdout.push('\n');
        Run {
            code: status.code(),
            stdout,
            stderr: self.stderr.take().unwrap().join().unwrap(),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Kernel audit on for as long as this lives (as root; a no-op otherwise), put back as it was
/// found once the last test process that asked for it is done. Test processes run in parallel,
/// so the holders are pids in a file under an exclusive lock; a holder that died without
/// dropping (killed) is pruned by the next one.
#[cfg(feature = "test-hooks")]
pub struct AuditOn {
    held: bool,
}

#[cfg(feature = "test-hooks")]
impl AuditOn {
    pub fn new() -> AuditOn {
        if !is_root() {
            return AuditOn { held: false };
        }
        with_audit_holders(|was, holders| {
            if holders.is_empty() {
                *was = jail::linux::observe::audit::set_enabled_for_tests(true)
                    .expect("enable kernel audit as root");
            }
            holders.push(std::process::id());
        });
        AuditOn { held: true }
    }
}

#[cfg(feature = "test-hooks")]
impl Drop for AuditOn {
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        with_audit_holders(|was, holders| {
            holders.retain(|&p| p != std::process::id());
            if holders.is_empty() && !*was {
                let _ = jail::linux::observe::audit::set_enabled_for_tests(false);
            }
        });
    }
}

/// Whether audit is on and how many test processes hold it on, read under the holders' lock.
#[cfg(feature = "test-hooks")]
pub fn audit_state() -> (bool, usize) {
    let mut out = (false, 0);
    with_audit_holders(|_, holders| {
        out = (
            jail::linux::observe::audit::enabled_for_tests()
                .expect("read the audit status as root"),
            holders.len(),
        )
    });
    out
}

/// Runs `f` on (audit was on before the first holder, live holders) under the file's lock.
#[cfg(feature = "test-hooks")]
fn with_audit_holders(f: impl FnOnce(&mut bool, &mut Vec<u32>)) {
    use std::io::{Seek, Write};
    use std::os::fd::AsRawFd;
    let path = base_dir().join("audit-holders");
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .unwrap();
    // SAFETY: flock on a descriptor we own; released when the file is closed.
    assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) }, 0);
    let mut text = String::new();
    file.read_to_string(&mut text).unwrap();
    let mut lines = text.lines();
    let mut was = lines.next() == Some("was=1");
    let mut holders: Vec<u32> = lines
        .filter_map(|l| l.parse().ok())
        .filter(|p| Path::new(&format!("/proc/{p}")).exists())
        .collect();
    f(&mut was, &mut holders);
    let mut out = format!("was={}\n", u8::from(was));
    for p in &holders {
        out.push_str(&format!("{p}\n"));
    }
    file.set_len(0).unwrap();
    file.rewind().unwrap();
    file.write_all(out.as_bytes()).unwrap();
}
