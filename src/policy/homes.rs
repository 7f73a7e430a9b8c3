//! `--home hidden`: reads by allow-list. Every home directory on the host (HOME, /home, /root
//! and the login users' homes in /etc/passwd) is hidden, except what a rule already names inside
//! it (the project given with --ro or --rw, the agent's own directories, a profile's paths), the
//! working directory, and the PATH directories in it. System directories stay readable.
//!
//! A deny list can never name every secret a home holds (histories, other projects' .env
//! files, tokens of tools nobody has heard of yet): hiding the homes as a whole and showing only
//! what the run needs is the general answer. The layers need nothing of their own for it: a
//! hidden directory with rules beneath is what they already enforce (the mount view as a tmpfs
//! with the named paths bound in; Landlock by granting nothing on the home but the named paths).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Access, Kind, Origin, PathRule};
use crate::error::JailError;

/// Whether home directories are readable (`visible`, the default: everything readable but the
/// hide list) or hidden but for the paths the run names (`hidden`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum HomeMode {
    #[default]
    Visible,
    Hidden,
}

impl HomeMode {
    /// One line for `--dry-run`, `jail status` and the probe.
    pub fn describe(self) -> &'static str {
        match self {
            HomeMode::Visible => {
                "visible: everything is readable but the hide list and the other agents' logins \
                 (--home hidden hides the homes)"
            }
            HomeMode::Hidden => {
                "hidden: home directories are hidden but the project, the working directory, \
                 the programs on PATH and what they load, the profile's paths and the agent's \
                 own login"
            }
        }
    }
}

/// What `--home hidden` needs from the host, read by the launcher.
#[derive(Debug, Clone, Default)]
pub struct HomesInput {
    pub mode: HomeMode,
    /// The home directories there are (HOME, /home, /root, /etc/passwd's), real paths.
    pub homes: Vec<PathBuf>,
    /// The directories on PATH (programs installed under a home keep running).
    pub path_dirs: Vec<PathDir>,
    /// The command's executable and its script's interpreter: the path each was found at and
    /// its real path. What of the real one's place is shown depends on where it was found
    /// ([`Program`]).
    pub programs: Vec<Program>,
}

/// A program the command runs: `found` where the lookup found it (a PATH entry, or the
/// command's own path), `real` its real path: a regular, executable file; `via` the real
/// places its spelling passed through (and those of the script that named it), so that one in
/// the project or a writable tree is known to have steered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    pub found: PathBuf,
    pub real: PathBuf,
    pub via: Vec<PathBuf>,
}

/// A PATH entry: its real path, and the real places its spelling passed through (`$proj/bin`
/// spelled in the project, real in another project when `bin` is the project's link).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathDir {
    pub real: PathBuf,
    pub via: Vec<PathBuf>,
}

impl PathDir {
    /// A PATH entry as given (absolute), read on the host.
    pub fn of(spelled: &Path) -> PathDir {
        PathDir {
            real: super::real_path(spelled),
            via: passed_through(spelled),
        }
    }
}

/// The real paths of each directory above `spelled` (lexically): where a link on the way
/// came from.
pub fn passed_through(spelled: &Path) -> Vec<PathBuf> {
    spelled
        .ancestors()
        .skip(1)
        .filter(|a| a.parent().is_some())
        .map(super::real_path)
        .collect()
}

/// Where home directories are whatever /etc/passwd says: the places a system gives them.
pub const HOME_ROOTS: &[&str] = &["/home", "/root", "/Users", "/var/root"];

/// Directories that are never hidden as a home (a service account whose home is `/`, `/bin` or
/// `/var` must not take the system with it): a home equal to one of these, or above one, is
/// left alone.
const SYSTEM_DIRS: &[&str] = &[
    "/",
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/proc",
    "/run",
    "/sbin",
    "/srv",
    "/sys",
    "/tmp",
    "/usr",
    "/var",
    "/var/tmp",
    "/var/lib",
    "/mnt",
    "/media",
    "/nonexistent",
];

/// The homes of root and of login users (uid 1000 to 59999, login.defs' defaults) in the text of
/// /etc/passwd. System accounts are left out: their "homes" are service data under /var, /run or
/// /usr that the system itself reads.
pub fn passwd_homes(passwd: &str) -> Vec<PathBuf> {
    passwd
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let fields: Vec<&str> = l.split(':').collect();
            let uid: u32 = fields.get(2)?.parse().ok()?;
            let dir = fields.get(5)?;
            (uid == 0 || (1000..60000).contains(&uid))
                .then(|| PathBuf::from(dir))
                .filter(|d| d.is_absolute())
        })
        .collect()
}

/// The homes to hide: each listed once, the outermost of nested ones, never a system directory
/// or one above it.
pub fn homes_to_hide(candidates: &[PathBuf]) -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = candidates
        .iter()
        .filter(|h| h.is_absolute())
        .filter(|h| !SYSTEM_DIRS.iter().any(|s| Path::new(s).starts_with(h)))
        .cloned()
        .collect();
    homes.sort();
    homes.dedup();
    let outer: Vec<PathBuf> = homes
        .iter()
        .filter(|h| !homes.iter().any(|o| o != *h && h.starts_with(o)))
        .cloned()
        .collect();
    outer
}

/// What `hide_homes` asks of the host (the only filesystem access): fakes in the unit tests.
pub trait HostLook {
    /// Whether `path` is a directory, a file, or nothing (symlinks not followed).
    fn kind(&self, path: &Path) -> Option<Kind>;
    /// The symlinks directly in `dir` that lead to a regular, executable file, with the real
    /// path of that file (a PATH directory's `claude -> ../share/claude/versions/2.1.0`).
    fn links_in(&self, dir: &Path) -> Vec<(PathBuf, PathBuf)>;
    /// The `home` a venv's `pyvenv.cfg` names: the directory of the interpreter it runs.
    fn venv_home(&self, prefix: &Path) -> Option<PathBuf>;
}

/// The real host.
pub struct RealHost;

impl HostLook for RealHost {
    fn kind(&self, path: &Path) -> Option<Kind> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        Some(if meta.is_dir() { Kind::Dir } else { Kind::File })
    }

    fn links_in(&self, dir: &Path) -> Vec<(PathBuf, PathBuf)> {
        // A bound: a PATH directory with thousands of entries is looked at only so far.
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .take(MAX_PATH_ENTRIES)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
            .filter_map(|e| {
                let target = std::fs::canonicalize(e.path()).ok()?;
                is_executable_file(&target).then(|| (e.path(), target))
            })
            .collect()
    }

    fn venv_home(&self, prefix: &Path) -> Option<PathBuf> {
        let text = crate::protect::gitconfig::read_small(&prefix.join("pyvenv.cfg")).ok()?;
        let home = text.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == "home").then(|| PathBuf::from(v.trim()))
        })?;
        std::fs::canonicalize(home).ok()
    }
}

/// A regular file with an execute bit: what execvp would run (a directory, a FIFO or a
/// plain data file is no program).
pub fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// How many entries of one PATH directory are looked at for links.
const MAX_PATH_ENTRIES: usize = 4096;

/// Adds the hiding rules of `--home hidden` to `rules`: each home hidden unless a rule names it
/// or a directory above it (other than `/`); the working directory shown read-only when it lies
/// in a hidden home and no rule covers it; the programs' places in a hidden home likewise
/// (`program_places`), each rule with the reason it is shown.
pub fn hide_homes(
    rules: &mut BTreeMap<PathBuf, PathRule>,
    input: &HomesInput,
    cwd: &Path,
    private_tmp: bool,
    look: &dyn HostLook,
) -> Result<(), JailError> {
    if input.mode != HomeMode::Hidden {
        return Ok(());
    }
    let hidden = hide_each_home(rules, input, private_tmp, look);
    // The innermost rule at or above `p`: one map lookup per ancestor (hundreds of rules, tens
    // of places asked about on every start).
    let hidden_at = |rules: &BTreeMap<PathBuf, PathRule>, p: &Path| {
        p.ancestors()
            .find_map(|a| rules.get(a))
            .is_some_and(|r| r.access == Access::Hide && matches!(r.origin, Origin::Home(_)))
    };
    // A home is never shown whole because a run starts in it (HOME inside /home is hidden
    // through /home's rule, so it is looked up among all the homes).
    let is_home = |p: &Path| hidden.iter().chain(&input.homes).any(|h| h == p);
    if is_home(cwd) && hidden_at(rules, cwd) {
        return Err(JailError::bad_path(
            "--home hidden",
            cwd,
            "the working directory is a home directory, which --home hidden hides; run from \
             the project's directory, name the directory with --ro or --rw, or use --home visible",
        ));
    }
    // What the run can write, and the project (a cloned repository is the attacker's text),
    // must not decide what is shown in a home: a link there, a venv's pyvenv.cfg, a program
    // found there lead only to a program directory, never to any directory they name.
    let steering: Vec<PathBuf> = rules
        .values()
        .filter(|r| r.access == Access::Rw || matches!(r.origin, Origin::Flag(_)))
        .map(|r| r.path.clone())
        .chain([cwd.to_path_buf()])
        .collect();
    let steerable = |p: &Path| steering.iter().any(|s| p.starts_with(s));
    let places = Places {
        homes: &input.homes,
        look,
        steerable: &steerable,
        expanded: Default::default(),
    };
    let mut shown: Vec<Shown> = vec![Shown {
        path: cwd.to_path_buf(),
        kind: Kind::Dir,
        why: "the working directory".into(),
    }];
    for entry in &input.path_dirs {
        let dir = &entry.real;
        // Spelled through the project (its own `bin`, a link to elsewhere): only a program
        // directory is shown, never the directory a link there names.
        let steered = entry.via.iter().any(|v| steerable(v)) && !steerable(dir);
        if steered && !is_program_dir(dir) {
            continue;
        }
        shown.extend(places.of_dir(dir, "a PATH directory", 0));
        // What the PATH directory's links run: `~/.local/bin/claude` leads to the native
        // installer's versions, `~/.local/bin/black` into a pipx venv.
        if home_of(dir, &input.homes).is_some() {
            let steered = steered || steerable(dir);
            for (link, target) in look.links_in(dir) {
                let why = format!("what {} runs", link.display());
                shown.extend(places.of_program(steered, &link, &target, &why));
            }
        }
    }
    for program in &input.programs {
        let why = format!("the program {}", program.found.display());
        let steered = steerable(&program.found) || program.via.iter().any(|v| steerable(v));
        shown.extend(places.of_program(steered, &program.found, &program.real, &why));
    }
    for Shown { path, kind, why } in shown {
        if is_home(&path) || !path.is_absolute() || look.kind(&path) != Some(kind) {
            continue;
        }
        if hidden_at(rules, &path) {
            rules.insert(
                path.clone(),
                PathRule {
                    path,
                    access: Access::Ro,
                    kind,
                    origin: Origin::Home(why),
                },
            );
        }
    }
    Ok(())
}

/// Hides each home no rule decides for (one at it or above it), and says which it hid.
fn hide_each_home(
    rules: &mut BTreeMap<PathBuf, PathRule>,
    input: &HomesInput,
    private_tmp: bool,
    look: &dyn HostLook,
) -> Vec<PathBuf> {
    let hidden: Vec<PathBuf> = homes_to_hide(&input.homes)
        .into_iter()
        .filter(|h| !(private_tmp && h.starts_with("/tmp")))
        .filter(|h| look.kind(h) == Some(Kind::Dir))
        .filter(|h| {
            // A rule at the home or above it decides for it: --ro ~, --hide /home, a
            // profile's rw on a parent. Not the read-only root, nor the host's /tmp of
            // --tmp host (a HOME there is still a home).
            !rules.values().any(|r| {
                r.path != Path::new("/") && r.origin != Origin::SharedTmp && h.starts_with(&r.path)
            })
        })
        .collect();
    for home in &hidden {
        rules.insert(
            home.clone(),
            PathRule {
                path: home.clone(),
                access: Access::Hide,
                kind: Kind::Dir,
                origin: Origin::Home("a home directory".into()),
            },
        );
    }
    hidden
}

/// A place `--home hidden` shows read-only, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub path: PathBuf,
    pub kind: Kind,
    pub why: String,
}

/// The innermost home holding `dir` (not the home itself).
fn home_of<'a>(dir: &Path, homes: &'a [PathBuf]) -> Option<&'a PathBuf> {
    homes
        .iter()
        .filter(|h| dir.starts_with(h) && dir != h.as_path())
        .max_by_key(|h| h.components().count())
}

/// Directories of HOME that are no program's installation but hold every tool's data: a
/// program directory directly in one is shown alone, never its siblings (`~/.local/share`
/// holds the keyrings, `~/.config` every tool's tokens).
const SHARED_DIRS: &[&str] = &[
    ".local/share",
    ".local/state",
    ".local/lib",
    ".var/app",
    ".config",
    ".cache",
    "snap",
];

/// The names of a program directory that make its parent an installation prefix (`bin` of
/// `~/.npm-global`, `shims` of `~/.pyenv`).
const PROGRAM_DIR_NAMES: &[&str] = &["bin", "sbin", "shims"];

/// What of a prefix its programs load at run time: their libraries, modules, interpreters'
/// versions. Not `etc` (npm's global `npmrc` with its `_authToken`), not the prefix's own
/// files (`~/.cargo/config.toml`, `credentials.toml`), not caches (`~/.cargo/registry`).
const PREFIX_CODE: &[&str] = &[
    "bin",
    "sbin",
    "shims",
    "lib",
    "lib32",
    "lib64",
    "libexec",
    "include",
    "share",
    "versions",
    "toolchains",
    "tools",
    "plugins",
    "installs",
    "node_modules",
    // A version manager's hook scripts, which its shims source.
    "pyenv.d",
    "rbenv.d",
    "nodenv.d",
    "goenv.d",
];

/// Files of a prefix its programs read to start: a venv's `pyvenv.cfg`, pyenv's global
/// `version`.
const PREFIX_FILES: &[&str] = &["pyvenv.cfg", "version"];

/// `~/.local` is a prefix shared by every tool (`pip install --user`, the XDG directories):
/// of it only the libraries its `bin` runs with.
const LOCAL_CODE: &[&str] = &["lib", "lib64", "libexec"];

/// A launcher in a PATH directory that runs programs kept elsewhere in the home: rustup's
/// proxies (`cargo`, `rustc` in `~/.cargo/bin`) run the toolchains in `~/.rustup`.
struct Launcher {
    /// The PATH directory, relative to the home.
    dir: &'static str,
    /// The file in it that marks the launcher.
    marker: &'static str,
    /// Where its programs are, relative to the home, and what of that is shown.
    home: &'static str,
    shown: &'static [&'static str],
}

const LAUNCHERS: &[Launcher] = &[Launcher {
    dir: ".cargo/bin",
    marker: "rustup",
    home: ".rustup",
    shown: &["toolchains", "settings.toml"],
}];

/// What the programs' places are in the homes, from the host's answers.
struct Places<'a> {
    homes: &'a [PathBuf],
    look: &'a dyn HostLook,
    /// Whether the run (or the project) can decide what lies at a path.
    steerable: &'a dyn Fn(&Path) -> bool,
    /// The program directories looked at already, at each venv depth: a PATH directory's many
    /// links (rustup's proxies, a version manager's shims) lead to the same few directories,
    /// and what is shown of one is the same each time (the first reason is the one kept).
    expanded: std::cell::RefCell<std::collections::HashSet<(PathBuf, usize)>>,
}

/// How deep venvs may lead to other venvs' interpreters (two pointing at each other would
/// never end).
const MAX_VENV_DEPTH: usize = 4;

impl Places<'_> {
    /// What to show for a program found at `found` whose real path is `real` (an executable
    /// file): its program directory when that is a `bin`, `sbin` or `shims` (with what the
    /// prefix loads, [`Places::of_dir`]); else, when it was found in a place nothing in the run
    /// decides, its own directory if it was not reached through a link, or the file alone.
    /// Found through the project or a writable tree (a planted link, a venv's `python`), only
    /// a program directory is shown: a link to `~/.aws/credentials` or to another project's
    /// `.env` shows nothing.
    fn of_program(&self, steered: bool, found: &Path, real: &Path, why: &str) -> Vec<Shown> {
        let Some(dir) = real.parent() else {
            return Vec::new();
        };
        if is_program_dir(dir) {
            return self.of_dir(dir, why, 0);
        }
        if steered || (self.steerable)(found) || home_of(real, self.homes).is_none() {
            return Vec::new();
        }
        if found.parent() == Some(dir) {
            return self.of_dir(dir, why, 0);
        }
        vec![Shown {
            path: real.to_path_buf(),
            kind: Kind::File,
            why: why.to_string(),
        }]
    }

    /// What to show for a program directory in a home (a PATH directory, the directory of a
    /// program): the directory itself; when it is a prefix's `bin` (or `shims`), what of the
    /// prefix its programs load ([`PREFIX_CODE`], [`PREFIX_FILES`]) and never the prefix's
    /// configuration; a venv's interpreter's prefix (not for a venv the run can write);
    /// a launcher's programs ([`LAUNCHERS`]). Outside the homes: nothing to show.
    fn of_dir(&self, dir: &Path, why: &str, depth: usize) -> Vec<Shown> {
        let Some(home) = home_of(dir, self.homes) else {
            return Vec::new();
        };
        if !self
            .expanded
            .borrow_mut()
            .insert((dir.to_path_buf(), depth))
        {
            return Vec::new();
        }
        let mut out = vec![Shown {
            path: dir.to_path_buf(),
            kind: Kind::Dir,
            why: why.to_string(),
        }];
        let Some(prefix) = dir.parent().filter(|p| is_program_dir(dir) && p != home) else {
            return out;
        };
        let rest = prefix.strip_prefix(home).unwrap_or(prefix);
        let shared = SHARED_DIRS
            .iter()
            .any(|s| rest == Path::new(s) || Path::new(s).starts_with(rest));
        let (dirs, files): (&[&str], &[&str]) = if rest == Path::new(".local") {
            (LOCAL_CODE, &[])
        } else if shared {
            (&[], &[])
        } else {
            (PREFIX_CODE, PREFIX_FILES)
        };
        let beside = format!("what the programs of {} load", dir.display());
        for (names, kind) in [(dirs, Kind::Dir), (files, Kind::File)] {
            for name in names {
                let path = prefix.join(name);
                if path != dir && self.look.kind(&path) == Some(kind) {
                    out.push(Shown {
                        path,
                        kind,
                        why: beside.clone(),
                    });
                }
            }
        }
        // A venv's interpreter lives in another prefix, named by its pyvenv.cfg: followed only
        // to a program directory, and not in a venv the run can write.
        if depth < MAX_VENV_DEPTH && !shared && !(self.steerable)(prefix) {
            if let Some(python) = self
                .look
                .venv_home(prefix)
                .filter(|p| p.as_path() != dir && is_program_dir(p))
            {
                let why = format!("the interpreter of the venv {}", prefix.display());
                out.extend(self.of_dir(&python, &why, depth + 1));
            }
        }
        for launcher in LAUNCHERS {
            if dir == home.join(launcher.dir)
                && self.look.kind(&dir.join(launcher.marker)).is_some()
            {
                let why = format!("what {} runs", dir.join(launcher.marker).display());
                for name in launcher.shown {
                    let path = home.join(launcher.home).join(name);
                    if let Some(kind) = self.look.kind(&path) {
                        out.push(Shown {
                            path,
                            kind,
                            why: why.clone(),
                        });
                    }
                }
            }
        }
        out
    }
}

/// Whether a directory holds programs by its name (`bin`, `sbin`, `shims`).
fn is_program_dir(dir: &Path) -> bool {
    dir.file_name()
        .is_some_and(|n| PROGRAM_DIR_NAMES.iter().any(|p| n == *p))
}

/// The interpreter a script's first bytes name (`#!/usr/bin/python3`), or the program `env`
/// is told to run (`#!/usr/bin/env node`, by name: found on PATH).
pub fn shebang_interpreter(head: &[u8]) -> Option<PathBuf> {
    let line = head.strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|b| *b == b'\n')?];
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let interpreter = PathBuf::from(words.next()?);
    if interpreter.file_name().is_some_and(|n| n == "env") {
        // env's own options and NAME=VALUE words come first (`env -S X=/a sh`); the program is
        // the first word that is neither. A bare name only: it is looked up on PATH, never in
        // the script's directory (a planted project file must not name what is shown).
        return words
            .find(|w| !w.starts_with('-') && !w.contains('='))
            .filter(|w| !w.contains('/'))
            .map(PathBuf::from);
    }
    // The kernel runs an absolute interpreter; a relative one would be resolved against the
    // working directory, which the command controls.
    interpreter.is_absolute().then_some(interpreter)
}

/// The command's executable (found on PATH as execvp finds it when it names no directory:
/// the first executable regular file in an absolute PATH entry) and the interpreter its
/// script names, one level deep, each where it was found and its real path. Reads only the
/// first bytes, of a regular file (a FIFO named as the command must not stall the launch).
pub fn programs_of(command: &Path, path_dirs: &[PathBuf], base: &Path) -> Vec<Program> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let find = |name: &Path| -> Option<Program> {
        let found = if name.components().count() > 1 || name.is_absolute() {
            base.join(name)
        } else {
            path_dirs
                .iter()
                .filter(|d| d.is_absolute())
                .map(|d| d.join(name))
                .find(|p| is_executable_file(p))?
        };
        let real = std::fs::canonicalize(&found).ok()?;
        let via = passed_through(&found);
        is_executable_file(&real).then_some(Program { found, real, via })
    };
    let Some(program) = find(command) else {
        return Vec::new();
    };
    let mut head = [0u8; 256];
    let n = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&program.real)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    // The interpreter a script names is steered by whoever could write the script.
    let interpreter = shebang_interpreter(&head[..n])
        .and_then(|i| find(&i))
        .map(|mut i| {
            i.via.push(program.found.clone());
            i.via.extend(program.via.iter().cloned());
            i
        });
    std::iter::once(program).chain(interpreter).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(path: &str, access: Access) -> (PathBuf, PathRule) {
        (
            path.into(),
            PathRule {
                path: path.into(),
                access,
                kind: Kind::Dir,
                origin: Origin::Default,
            },
        )
    }

    fn input(homes: &[&str], path_dirs: &[&str]) -> HomesInput {
        HomesInput {
            mode: HomeMode::Hidden,
            homes: homes.iter().map(PathBuf::from).collect(),
            path_dirs: path_dirs
                .iter()
                .map(|d| PathDir {
                    real: d.into(),
                    via: Vec::new(),
                })
                .collect(),
            programs: vec![],
        }
    }

    /// Every path a directory (the tests that need more build a [`Fake`]).
    struct EveryDir;

    impl HostLook for EveryDir {
        fn kind(&self, _: &Path) -> Option<Kind> {
            Some(Kind::Dir)
        }
        fn links_in(&self, _: &Path) -> Vec<(PathBuf, PathBuf)> {
            Vec::new()
        }
        fn venv_home(&self, _: &Path) -> Option<PathBuf> {
            None
        }
    }

    #[allow(non_upper_case_globals)]
    const every_dir: EveryDir = EveryDir;

    /// A host of these directories, files, links and venvs.
    #[derive(Default)]
    struct Fake {
        dirs: Vec<&'static str>,
        files: Vec<&'static str>,
        links: Vec<(&'static str, &'static str)>,
        venvs: Vec<(&'static str, &'static str)>,
    }

    impl HostLook for Fake {
        fn kind(&self, p: &Path) -> Option<Kind> {
            if self.dirs.iter().any(|d| Path::new(d) == p) {
                Some(Kind::Dir)
            } else if self.files.iter().any(|f| Path::new(f) == p) {
                Some(Kind::File)
            } else {
                None
            }
        }
        fn links_in(&self, dir: &Path) -> Vec<(PathBuf, PathBuf)> {
            self.links
                .iter()
                .filter(|(l, _)| Path::new(l).parent() == Some(dir))
                .map(|(l, t)| (PathBuf::from(l), PathBuf::from(t)))
                .collect()
        }
        fn venv_home(&self, prefix: &Path) -> Option<PathBuf> {
            self.venvs
                .iter()
                .find(|(p, _)| Path::new(p) == prefix)
                .map(|(_, h)| PathBuf::from(h))
        }
    }

    #[test]
    fn passwd_gives_root_and_login_users_not_service_accounts() {
        let text = "root:x:0:0:root:/root:/bin/bash\n\
                    daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
                    www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin\n\
                    # a comment\n\
                    u:x:1000:1000::/home/u:/bin/bash\n\
                    w:x:1001:1001::/srv/people/w:/bin/bash\n\
                    nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
                    broken:x:abc:1::/x:/bin/sh\n";
        assert_eq!(
            passwd_homes(text),
            [
                PathBuf::from("/root"),
                "/home/u".into(),
                "/srv/people/w".into()
            ]
        );
    }

    #[test]
    fn homes_are_the_outermost_and_never_a_system_directory() {
        let got = homes_to_hide(
            &[
                "/home/u",
                "/home",
                "/root",
                "/",
                "/usr",
                "/var",
                "/var/tmp/t/home",
            ]
            .map(PathBuf::from),
        );
        assert_eq!(
            got,
            [
                PathBuf::from("/home"),
                "/root".into(),
                "/var/tmp/t/home".into()
            ]
        );
    }

    #[test]
    fn named_paths_inside_stay_and_the_cwd_and_path_dirs_are_shown() {
        let mut rules: BTreeMap<PathBuf, PathRule> = [
            rule("/", Access::Ro),
            rule("/home/u/repo", Access::Rw),
            rule("/home/u/.ssh", Access::Hide),
        ]
        .into_iter()
        .collect();
        let homes = input(
            &["/home", "/home/u", "/root"],
            &["/usr/bin", "/home/u/.cargo/bin", "/home/u/repo/bin"],
        );
        hide_homes(
            &mut rules,
            &homes,
            Path::new("/home/u/notes"),
            true,
            &every_dir,
        )
        .unwrap();
        let access = |p: &str| {
            rules
                .get(Path::new(p))
                .map(|r| (r.access, r.origin.clone()))
        };
        assert_eq!(
            access("/home"),
            Some((Access::Hide, Origin::Home("a home directory".into())))
        );
        assert_eq!(
            access("/root"),
            Some((Access::Hide, Origin::Home("a home directory".into())))
        );
        assert_eq!(access("/home/u"), None, "inside /home: one rule is enough");
        assert_eq!(access("/home/u/repo"), Some((Access::Rw, Origin::Default)));
        let shown = |why: &str| Some((Access::Ro, Origin::Home(why.into())));
        assert_eq!(access("/home/u/notes"), shown("the working directory"));
        assert_eq!(access("/home/u/.cargo/bin"), shown("a PATH directory"));
        assert_eq!(
            access("/home/u/.cargo"),
            None,
            "the prefix is never shown whole"
        );
        assert_eq!(access("/home/u/repo/bin"), None, "the project covers it");
        assert_eq!(access("/usr/bin"), None, "not in a home");
    }

    #[test]
    fn a_path_directory_shows_what_its_programs_load_never_the_prefixs_configuration() {
        let homes = ["/home", "/home/u"].map(PathBuf::from);
        let host = Fake {
            dirs: vec![
                "/home/u/.npm-global/bin",
                "/home/u/.npm-global/lib",
                "/home/u/.npm-global/etc",
                "/home/u/.cargo/bin",
                "/home/u/.cargo/registry",
                "/home/u/.rustup/toolchains",
                "/home/u/.pyenv/shims",
                "/home/u/.pyenv/libexec",
                "/home/u/.pyenv/versions",
                "/home/u/.local/bin",
                "/home/u/.local/lib",
                "/home/u/.local/share",
                "/home/u/.local/share/pipx/venvs/black/bin",
                "/home/u/.local/share/pipx/venvs/black/lib",
                "/home/u/.pyenv/versions/3.12/bin",
                "/home/u/.pyenv/versions/3.12/lib",
                "/home/u/bin",
            ],
            files: vec![
                "/home/u/.cargo/config.toml",
                "/home/u/.cargo/credentials.toml",
                "/home/u/.cargo/bin/rustup",
                "/home/u/.rustup/settings.toml",
                "/home/u/.pyenv/version",
                "/home/u/.local/share/pipx/venvs/black/pyvenv.cfg",
                "/home/u/.npm-global/etc/npmrc",
            ],
            links: vec![],
            venvs: vec![(
                "/home/u/.local/share/pipx/venvs/black",
                "/home/u/.pyenv/versions/3.12/bin",
            )],
        };
        let of = |d: &str| -> Vec<String> {
            let places = Places {
                homes: &homes,
                look: &host,
                steerable: &|_: &Path| false,
                expanded: Default::default(),
            };
            places
                .of_dir(Path::new(d), "x", 0)
                .into_iter()
                .map(|s| s.path.display().to_string())
                .collect()
        };
        assert_eq!(
            of("/home/u/.npm-global/bin"),
            ["/home/u/.npm-global/bin", "/home/u/.npm-global/lib"],
            "not etc/npmrc"
        );
        assert_eq!(
            of("/home/u/.cargo/bin"),
            [
                "/home/u/.cargo/bin",
                "/home/u/.rustup/toolchains",
                "/home/u/.rustup/settings.toml"
            ],
            "not config.toml, credentials.toml or the registry"
        );
        assert_eq!(
            of("/home/u/.pyenv/shims"),
            [
                "/home/u/.pyenv/shims",
                "/home/u/.pyenv/libexec",
                "/home/u/.pyenv/versions",
                "/home/u/.pyenv/version"
            ]
        );
        assert_eq!(
            of("/home/u/.local/bin"),
            ["/home/u/.local/bin", "/home/u/.local/lib"],
            "never ~/.local/share"
        );
        assert_eq!(
            of("/home/u/.local/share/pipx/venvs/black/bin"),
            [
                "/home/u/.local/share/pipx/venvs/black/bin",
                "/home/u/.local/share/pipx/venvs/black/lib",
                "/home/u/.local/share/pipx/venvs/black/pyvenv.cfg",
                "/home/u/.pyenv/versions/3.12/bin",
                "/home/u/.pyenv/versions/3.12/lib",
            ]
        );
        assert_eq!(of("/home/u/bin"), ["/home/u/bin"], "HOME is no prefix");
        assert_eq!(of("/home/u/.local/share/bin"), ["/home/u/.local/share/bin"]);
        assert!(of("/usr/bin").is_empty(), "not in a home");
    }

    #[test]
    fn a_path_directorys_links_show_what_they_run_and_the_project_steers_nothing() {
        let host = Fake {
            dirs: vec![
                "/",
                "/home",
                "/home/u",
                "/home/u/.local/bin",
                "/home/u/.local/share/claude/versions",
                "/home/u/w",
                "/home/u/w/bin",
                "/home/u/w/.venv",
                "/home/u/w/.venv/bin",
                "/home/u/private",
                "/home/u/other/bin",
            ],
            files: vec!["/home/u/.local/share/claude/versions/2.1.0"],
            links: vec![
                (
                    "/home/u/.local/bin/claude",
                    "/home/u/.local/share/claude/versions/2.1.0",
                ),
                ("/home/u/.local/bin/sh", "/usr/bin/dash"),
                // Planted in the project: a secret, and another project's program.
                ("/home/u/w/bin/fmt", "/home/u/private/secret"),
                ("/home/u/w/bin/tool", "/home/u/other/bin/tool"),
            ],
            // The project's venv names a directory of secrets as its interpreter's.
            venvs: vec![("/home/u/w/.venv", "/home/u/private")],
        };
        let mut rules: BTreeMap<PathBuf, PathRule> = [rule("/", Access::Ro)].into_iter().collect();
        hide_homes(
            &mut rules,
            &input(
                &["/home", "/home/u"],
                &[
                    "/home/u/.local/bin",
                    "/usr/bin",
                    "/home/u/w/bin",
                    "/home/u/w/.venv/bin",
                ],
            ),
            Path::new("/home/u/w"),
            true,
            &host,
        )
        .unwrap();
        let shown: Vec<(&str, String)> = rules
            .values()
            .filter(|r| r.access == Access::Ro)
            .filter_map(|r| match &r.origin {
                Origin::Home(why) => Some((r.path.to_str().unwrap(), why.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("/home/u/.local/bin", "a PATH directory".to_string()),
                (
                    "/home/u/.local/share/claude/versions/2.1.0",
                    "what /home/u/.local/bin/claude runs".into()
                ),
                ("/home/u/other/bin", "what /home/u/w/bin/tool runs".into()),
                ("/home/u/w", "the working directory".into()),
            ],
            "the installer's file alone, never its directory; from the project only a \
             program directory, never a secret's directory or a venv's named one"
        );
    }

    #[test]
    fn a_path_entry_or_a_script_spelled_in_the_project_leads_only_to_a_program_directory() {
        let host = Fake {
            dirs: vec![
                "/",
                "/home",
                "/home/u",
                "/home/u/w",
                "/home/u/other",
                "/home/u/tools/bin",
            ],
            ..Fake::default()
        };
        let mut input = input(&["/home", "/home/u"], &[]);
        // `$proj/bin -> ../other`, and `$proj/tools -> ../tools` with `$proj/tools/bin`.
        input.path_dirs = vec![
            PathDir {
                real: "/home/u/other".into(),
                via: vec!["/home/u/w".into()],
            },
            PathDir {
                real: "/home/u/tools/bin".into(),
                via: vec!["/home/u/tools".into(), "/home/u/w".into()],
            },
        ];
        // A project script whose shebang names a program outside any program directory.
        input.programs = vec![
            Program {
                found: "/home/u/w/run.sh".into(),
                real: "/home/u/w/run.sh".into(),
                via: vec!["/home/u/w".into()],
            },
            Program {
                found: "/home/u/other/tool".into(),
                real: "/home/u/other/tool".into(),
                via: vec![
                    "/home/u".into(),
                    "/home/u/w/run.sh".into(),
                    "/home/u/w".into(),
                ],
            },
        ];
        let mut rules: BTreeMap<PathBuf, PathRule> = [rule("/", Access::Ro)].into_iter().collect();
        hide_homes(&mut rules, &input, Path::new("/home/u/w"), true, &host).unwrap();
        let shown: Vec<&str> = rules
            .values()
            .filter(|r| r.access == Access::Ro && matches!(r.origin, Origin::Home(_)))
            .map(|r| r.path.to_str().unwrap())
            .collect();
        assert_eq!(shown, ["/home/u/tools/bin", "/home/u/w"]);
    }

    #[test]
    fn a_scripts_interpreter_is_read_from_its_first_line() {
        let of = |t: &str| shebang_interpreter(t.as_bytes());
        assert_eq!(
            of("#!/usr/bin/python3\nimport x"),
            Some("/usr/bin/python3".into())
        );
        assert_eq!(of("#! /bin/sh -e\n"), Some("/bin/sh".into()));
        assert_eq!(of("#!/usr/bin/env -S node --x\n"), Some("node".into()));
        assert_eq!(of("#!/usr/bin/env node\n"), Some("node".into()));
        assert_eq!(of("\x7fELF..."), None);
        assert_eq!(of("#!/bin/sh"), None, "no whole first line");
    }

    #[test]
    fn a_rule_above_a_home_decides_and_a_home_as_cwd_is_refused() {
        let mut rules: BTreeMap<PathBuf, PathRule> =
            [rule("/", Access::Ro), rule("/home", Access::Ro)]
                .into_iter()
                .collect();
        hide_homes(
            &mut rules,
            &input(&["/home", "/root"], &[]),
            Path::new("/w"),
            true,
            &every_dir,
        )
        .unwrap();
        assert_eq!(
            rules[Path::new("/home")].access,
            Access::Ro,
            "--ro /home wins"
        );
        assert_eq!(rules[Path::new("/root")].access, Access::Hide);

        // The host's /tmp made writable is no choice about a HOME in it.
        let (path, mut tmp) = rule("/tmp", Access::Rw);
        tmp.origin = Origin::SharedTmp;
        let mut rules: BTreeMap<PathBuf, PathRule> =
            [rule("/", Access::Ro), (path, tmp)].into_iter().collect();
        hide_homes(
            &mut rules,
            &input(&["/tmp/h"], &[]),
            Path::new("/w"),
            false,
            &every_dir,
        )
        .unwrap();
        assert_eq!(rules[Path::new("/tmp/h")].access, Access::Hide);

        let mut rules: BTreeMap<PathBuf, PathRule> = [rule("/", Access::Ro)].into_iter().collect();
        let e = hide_homes(
            &mut rules,
            &input(&["/root"], &[]),
            Path::new("/root"),
            true,
            &every_dir,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--home hidden /root") && e.contains("--home visible"),
            "{e}"
        );
        // HOME inside /home: hidden through /home's rule, still refused as the cwd.
        let mut rules: BTreeMap<PathBuf, PathRule> = [rule("/", Access::Ro)].into_iter().collect();
        let homes = input(&["/home", "/home/u"], &["/home/u"]);
        assert!(hide_homes(&mut rules, &homes, Path::new("/home/u"), true, &every_dir).is_err());
        let mut rules: BTreeMap<PathBuf, PathRule> = [rule("/", Access::Ro)].into_iter().collect();
        hide_homes(&mut rules, &homes, Path::new("/w"), true, &every_dir).unwrap();
        assert!(
            !rules.contains_key(Path::new("/home/u")),
            "HOME on PATH is not shown"
        );

        let mut rules: BTreeMap<PathBuf, PathRule> = [rule("/", Access::Ro)].into_iter().collect();
        let mut visible = input(&["/root"], &[]);
        visible.mode = HomeMode::Visible;
        hide_homes(&mut rules, &visible, Path::new("/root"), true, &every_dir).unwrap();
        assert_eq!(rules.len(), 1, "visible adds nothing");
    }
}
