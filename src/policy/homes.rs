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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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
                "visible: everything is readable but the hide list (--home hidden hides the homes)"
            }
            HomeMode::Hidden => {
                "hidden: home directories are hidden but the project, the agent's own \
                 directories, the profile's paths and the working directory"
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
    pub path_dirs: Vec<PathBuf>,
    /// The command's executable and its script's interpreter, real paths: the installation of
    /// each is shown when it lies in a home (a venv whose python is under ~/.pyenv).
    pub programs: Vec<PathBuf>,
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

/// Adds the hiding rules of `--home hidden` to `rules`: each home hidden unless a rule names it
/// or a directory above it (other than `/`); the working directory shown read-only when it lies
/// in a hidden home and no rule covers it; the PATH directories in a hidden home likewise.
/// `is_dir(path)` says whether a path is a directory there (the only filesystem access).
pub fn hide_homes(
    rules: &mut BTreeMap<PathBuf, PathRule>,
    input: &HomesInput,
    cwd: &Path,
    private_tmp: bool,
    is_dir: &dyn Fn(&Path) -> bool,
) -> Result<(), JailError> {
    if input.mode != HomeMode::Hidden {
        return Ok(());
    }
    let hidden: Vec<PathBuf> = homes_to_hide(&input.homes)
        .into_iter()
        .filter(|h| !(private_tmp && h.starts_with("/tmp")))
        .filter(|h| is_dir(h))
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
                origin: Origin::Home,
            },
        );
    }
    let hidden_at = |rules: &BTreeMap<PathBuf, PathRule>, p: &Path| {
        rules
            .values()
            .filter(|r| p.starts_with(&r.path))
            .max_by_key(|r| r.path.components().count())
            .is_some_and(|r| r.access == Access::Hide && r.origin == Origin::Home)
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
    let mut shown: Vec<PathBuf> = vec![cwd.to_path_buf()];
    shown.extend(
        input
            .path_dirs
            .iter()
            .map(|d| installation_of(d, &input.homes)),
    );
    shown.extend(
        input
            .programs
            .iter()
            .filter_map(|p| p.parent())
            .map(|d| installation_of(d, &input.homes)),
    );
    for dir in &shown {
        let dir = dir.as_path();
        if is_home(dir) || !dir.is_absolute() || !is_dir(dir) {
            continue;
        }
        if hidden_at(rules, dir) {
            rules.insert(
                dir.to_path_buf(),
                PathRule {
                    path: dir.to_path_buf(),
                    access: Access::Ro,
                    kind: Kind::Dir,
                    origin: Origin::Home,
                },
            );
        }
    }
    Ok(())
}

/// Directories of HOME that are no program's installation but hold every tool's data, longest
/// first: inside one, a tool's installation is its own entry there (`~/.local/share/pipx`),
/// never the whole directory (`~/.local/share` holds the keyrings).
const SHARED_DIRS: &[&str] = &[
    ".local/share",
    ".local/state",
    ".local/lib",
    ".var/app",
    ".local",
    ".config",
    ".cache",
    "snap",
];

/// What to show for a directory a program lives in (a PATH directory, the command's own): in a
/// home, the home's entry that holds it when that is a dot directory of one tool (`~/.nvm` for
/// `~/.nvm/versions/node/v22/bin`, `~/.pyenv` for its shims: the programs there run files
/// beside their own directory), or the tool's entry in a shared directory
/// (`~/.local/share/uv` for `~/.local/share/uv/tools/aider-chat/bin`); else the directory
/// itself (`~/.local/bin`, `~/bin`).
fn installation_of(dir: &Path, homes: &[PathBuf]) -> PathBuf {
    let Some(home) = homes
        .iter()
        .filter(|h| dir.starts_with(h) && dir != h.as_path())
        .max_by_key(|h| h.components().count())
    else {
        return dir.to_path_buf();
    };
    let rest = dir.strip_prefix(home).unwrap_or(dir);
    let depth = rest.components().count();
    if let Some(shared) = SHARED_DIRS.iter().find(|s| rest.starts_with(s)) {
        let below = Path::new(shared).components().count() + 1;
        return if depth > below {
            home.join(rest.components().take(below).collect::<PathBuf>())
        } else {
            dir.to_path_buf()
        };
    }
    match rest.components().next() {
        Some(std::path::Component::Normal(first))
            if depth > 1 && first.to_string_lossy().starts_with('.') =>
        {
            home.join(first)
        }
        _ => dir.to_path_buf(),
    }
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

/// The real paths of the command's executable (found on PATH when it names no directory) and
/// of the interpreter its script names, one level deep. Reads only the first line.
pub fn programs_of(command: &Path, path_dirs: &[PathBuf], base: &Path) -> Vec<PathBuf> {
    use std::io::Read;
    let find = |name: &Path| -> Option<PathBuf> {
        if name.components().count() > 1 || name.is_absolute() {
            return std::fs::canonicalize(base.join(name)).ok();
        }
        path_dirs
            .iter()
            .map(|d| d.join(name))
            .find(|p| p.is_file())
            .and_then(|p| std::fs::canonicalize(p).ok())
    };
    let Some(program) = find(command) else {
        return Vec::new();
    };
    let mut head = [0u8; 256];
    let n = std::fs::File::open(&program)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let interpreter = shebang_interpreter(&head[..n]).and_then(|i| find(&i));
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
            path_dirs: path_dirs.iter().map(PathBuf::from).collect(),
            programs: vec![],
        }
    }

    fn every_dir(_: &Path) -> bool {
        true
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
        assert_eq!(access("/home"), Some((Access::Hide, Origin::Home)));
        assert_eq!(access("/root"), Some((Access::Hide, Origin::Home)));
        assert_eq!(access("/home/u"), None, "inside /home: one rule is enough");
        assert_eq!(access("/home/u/repo"), Some((Access::Rw, Origin::Default)));
        assert_eq!(access("/home/u/notes"), Some((Access::Ro, Origin::Home)));
        assert_eq!(access("/home/u/.cargo"), Some((Access::Ro, Origin::Home)));
        assert_eq!(access("/home/u/repo/bin"), None, "the project covers it");
        assert_eq!(access("/usr/bin"), None, "not in a home");
    }

    #[test]
    fn a_path_directory_shows_its_tools_installation_not_shared_data() {
        let homes = ["/home", "/home/u"].map(PathBuf::from);
        let of = |d: &str| installation_of(Path::new(d), &homes);
        assert_eq!(
            of("/home/u/.nvm/versions/node/v22/bin"),
            Path::new("/home/u/.nvm")
        );
        assert_eq!(of("/home/u/.pyenv/shims"), Path::new("/home/u/.pyenv"));
        assert_eq!(of("/home/u/.local/bin"), Path::new("/home/u/.local/bin"));
        assert_eq!(
            of("/home/u/.local/share/uv/tools/aider-chat/bin"),
            Path::new("/home/u/.local/share/uv")
        );
        assert_eq!(
            of("/home/u/.local/share/claude/versions"),
            Path::new("/home/u/.local/share/claude")
        );
        assert_eq!(
            of("/home/u/.local/share/bin"),
            Path::new("/home/u/.local/share/bin")
        );
        assert_eq!(of("/home/u/bin"), Path::new("/home/u/bin"));
        assert_eq!(of("/home/u/.cargo"), Path::new("/home/u/.cargo"));
        assert_eq!(of("/usr/bin"), Path::new("/usr/bin"));
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
