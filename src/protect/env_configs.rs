//! Tool configurations the command's environment points at. `RIPGREP_CONFIG_PATH` makes
//! ripgrep read a file of arguments (`--pre=CMD` runs a program on every file searched),
//! `BASH_ENV` and `ENV` are sourced by every non-interactive shell, `PYTHONSTARTUP`,
//! `NPM_CONFIG_USERCONFIG`, `PIP_CONFIG_FILE`, `GIT_CONFIG_GLOBAL`, `ZDOTDIR`, `CURL_HOME`,
//! `DOCKER_CONFIG`… each moves a tool's configuration, and with it what the tool runs, to where
//! the variable says. When that is inside a writable tree, the name protection of the tree
//! (`.npmrc`, `.gitconfig`, …) no longer covers it: so the file a variable of the command's
//! environment names is protected like a protected name (read-only, moved aside after the run
//! if created), whatever its name. Decided by the variable's name, which says it names a
//! configuration (`*_CONFIG_PATH`, `*_CONFIG_FILE`, `*RC`, …): a wrong guess costs one
//! read-only file in the project, a missed one a command on the host.
//!
//! Other variables name a directory whose contents run without being asked for:
//! `PYTHONPATH` (every Python start imports `sitecustomize`), `CARGO_HOME` (`config.toml`
//! names a `rustc-wrapper`), `GRADLE_USER_HOME` (every build runs `init.d/*`)… For those a
//! table names the entries beneath that run ([`named_code`]), protected the same way; the
//! rest of the directory stays writable.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Variables that name a configuration file or directory although their names do not say
/// so by a suffix below.
const EXACT: &[&str] = &[
    "BASH_ENV",
    "GOENV",
    "ENV",
    "ZDOTDIR",
    "CURL_HOME",
    "PYTHONSTARTUP",
    "EDITRC",
    "LESSKEY",
    "IPYTHONDIR",
    "MYVIMRC",
    "GIT_CONFIG",
    "KUBECONFIG",
    "DOCKER_CONFIG",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "GIT_TEMPLATE_DIR",
];

/// Name endings that say the value is a configuration file or directory.
const SUFFIXES: &[&str] = &[
    "_CONFIG",
    "_CONFIG_PATH",
    "_CONFIG_FILE",
    "_CONFIG_FILES",
    "_CONFIG_DIR",
    "_CONFIG_DIRS",
    "_CONFIG_HOME",
    "_CONFIG_GLOBAL",
    "_CONFIG_SYSTEM",
    "_CONFIGFILE",
    "_USERCONFIG",
    "_GLOBALCONFIG",
    "_CONF",
    "_CONF_FILE",
    "_CONF_PATH",
    "_CONF_DIR",
    "RC_PATH",
    "RC_FILE",
    "_SETTINGS_FILE",
    "_SETTINGS_PATH",
    "STARTUP",
    "_INIT_FILE",
];

/// Whether a variable's name says its value is a tool's configuration (file or directory).
pub fn names_config(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    if EXACT.contains(&n.as_str()) || SUFFIXES.iter().any(|s| n.ends_with(s)) {
        return true;
    }
    // A bare rc name (WGETRC, INPUTRC, CONDARC, PSQLRC, SCREENRC, NPM_RC): not a source
    // directory (`…SRC`).
    n.len() > 2 && n.ends_with("RC") && !n.ends_with("SRC")
}

/// The paths the configuration variables of `vars` name: each `:`-separated part of the value,
/// absolute or relative to `cwd` (where the tool runs), made absolute without looking at the
/// filesystem. (variable, path), in the order of `vars`.
pub fn named_configs(vars: &[(OsString, OsString)], cwd: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for (k, v) in vars {
        let Some(name) = k.to_str() else { continue };
        if !names_config(name) {
            continue;
        }
        for part in v.as_bytes().split(|b| *b == b':') {
            if part.is_empty() {
                continue;
            }
            let p = Path::new(std::ffi::OsStr::from_bytes(part));
            out.push((name.to_string(), crate::paths::absolute(cwd, p)));
        }
        if out.len() > 256 {
            break;
        }
    }
    out
}

/// Variables that name a directory (or a `:`-separated list of them) from which a tool runs
/// code on its own, with the entries beneath that run (`.` for the directory whole). Decided by
/// what runs without being asked for: what every interpreter start imports, what a build runs,
/// a tool's configuration that names programs, the commands it installs.
const CODE_DIRS: &[(&str, &[&str])] = &[
    // site imports sitecustomize and usercustomize from sys.path at every start, before any
    // script (a module, a package, bytecode beside it or in __pycache__, an extension).
    ("PYTHONPATH", PYTHON_STARTUP_MODULES),
    // The user site (lib/pythonX.Y/site-packages): its *.pth lines starting with `import` run
    // at every start, and it holds usercustomize.
    ("PYTHONUSERBASE", &["lib"]),
    // The standard library itself.
    ("PYTHONHOME", &["."]),
    // config.toml ([build] rustc-wrapper, target runners, aliases), the subcommands it runs
    // from bin (cargo-clippy, …), the env scripts shells source, and the sources of the
    // dependencies whose build scripts and proc macros every build runs.
    (
        "CARGO_HOME",
        &[
            "config.toml",
            "config",
            "bin",
            "env",
            "env.fish",
            "env.nu",
            "registry/src",
            "git/checkouts",
        ],
    ),
    // The toolchains themselves.
    ("RUSTUP_HOME", &["."]),
    // Init scripts run by every build, JVM options, the Gradle distributions the wrapper runs.
    (
        "GRADLE_USER_HOME",
        &[
            "init.d",
            "init.gradle",
            "init.gradle.kts",
            "gradle.properties",
            "wrapper",
        ],
    ),
    // gpg.conf and the agent's (pinentry-program), dirmngr's and scdaemon's configurations.
    (
        "GNUPGHOME",
        &[
            "gpg.conf",
            "gpg-agent.conf",
            "dirmngr.conf",
            "scdaemon.conf",
            "common.conf",
        ],
    ),
    // npm's global configuration (script-shell, node-options), global packages and commands.
    ("NPM_CONFIG_PREFIX", &["etc", "lib/node_modules", "bin"]),
    // Go's module sources (built and run by every build) and installed commands.
    ("GOPATH", &["pkg/mod", "bin"]),
    ("GOMODCACHE", &["."]),
    // Ruby's installed gems, their commands and compiled extensions.
    ("GEM_HOME", &["."]),
    ("BUNDLE_USER_HOME", &["."]),
    ("MAVEN_HOME", &["."]),
    ("M2_HOME", &["."]),
];

/// What Python's `site` imports from every `sys.path` entry at start, in every form it loads.
const PYTHON_STARTUP_MODULES: &[&str] = &[
    "sitecustomize.py",
    "sitecustomize.pyc",
    "sitecustomize",
    "sitecustomize.so",
    "sitecustomize.abi3.so",
    "usercustomize.py",
    "usercustomize.pyc",
    "usercustomize",
    "usercustomize.so",
    "usercustomize.abi3.so",
];

/// The versioned forms of the startup modules: bytecode in __pycache__ (used in place of an
/// existing source whose recorded size and time it carries) and extension modules.
fn python_versioned(dir: &Path, out: &mut Vec<PathBuf>) {
    for module in ["sitecustomize", "usercustomize"] {
        for minor in 6..=15 {
            out.push(dir.join(format!("__pycache__/{module}.cpython-3{minor}.pyc")));
            for arch in ["x86_64-linux-gnu", "aarch64-linux-gnu"] {
                out.push(dir.join(format!("{module}.cpython-3{minor}-{arch}.so")));
            }
        }
    }
}

/// The entries beneath the directories the variables of `vars` name from which a tool runs code
/// (the table `CODE_DIRS`): (variable, path), made absolute against `cwd` like [`named_configs`].
pub fn named_code(vars: &[(OsString, OsString)], cwd: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for (k, v) in vars {
        let Some(name) = k.to_str() else { continue };
        let upper = name.to_ascii_uppercase();
        let Some((var, entries)) = CODE_DIRS.iter().find(|(n, _)| *n == upper) else {
            continue;
        };
        for part in v.as_bytes().split(|b| *b == b':') {
            if part.is_empty() {
                continue;
            }
            let dir = crate::paths::absolute(cwd, Path::new(std::ffi::OsStr::from_bytes(part)));
            let mut paths: Vec<PathBuf> = entries
                .iter()
                .map(|e| if *e == "." { dir.clone() } else { dir.join(e) })
                .collect();
            if *var == "PYTHONPATH" {
                python_versioned(&dir, &mut paths);
            }
            out.extend(paths.into_iter().map(|p| (var.to_string(), p)));
        }
        if out.len() > 4096 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_variables_are_known_by_their_names() {
        for yes in [
            "RIPGREP_CONFIG_PATH",
            "npm_config_userconfig",
            "NPM_CONFIG_GLOBALCONFIG",
            "PIP_CONFIG_FILE",
            "GIT_CONFIG_GLOBAL",
            "GIT_CONFIG_SYSTEM",
            "PYTHONSTARTUP",
            "BASH_ENV",
            "ENV",
            "ZDOTDIR",
            "INPUTRC",
            "CURL_HOME",
            "WGETRC",
            "DOCKER_CONFIG",
            "KUBECONFIG",
            "CONDARC",
            "PSQLRC",
            "ESLINT_RC_PATH",
            "MYTOOL_CONFIG_DIR",
            "MYTOOL_CONFIG_HOME",
        ] {
            assert!(names_config(yes), "{yes}");
        }
        for no in [
            "PATH",
            "HOME",
            "MY_SRC",
            "NPM_CONFIG_CACHE",
            "CARGO_TARGET_DIR",
            "GIT_CONFIG_COUNT",
            "EDITOR",
            "RC",
        ] {
            assert!(!names_config(no), "{no}");
        }
    }

    #[test]
    fn directories_whose_contents_run_name_what_runs_beneath_them() {
        let vars: Vec<(OsString, OsString)> = [
            ("PYTHONPATH", "src:/abs/lib"),
            ("CARGO_HOME", ".cargo-home"),
            ("GRADLE_USER_HOME", "/g"),
            ("npm_config_prefix", "/n"),
            ("PATH", "/usr/bin"),
        ]
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();
        let got = named_code(&vars, Path::new("/w"));
        let has = |p: &str| got.iter().any(|(_, q)| q == Path::new(p));
        for yes in [
            "/w/src/sitecustomize.py",
            "/w/src/usercustomize",
            "/w/src/__pycache__/sitecustomize.cpython-312.pyc",
            "/abs/lib/sitecustomize.py",
            "/w/.cargo-home/config.toml",
            "/w/.cargo-home/registry/src",
            "/g/init.d",
            "/g/init.gradle",
            "/n/etc",
        ] {
            assert!(has(yes), "{yes}");
        }
        assert!(!has("/w/src") && !has("/usr/bin/sitecustomize.py"));
    }

    #[test]
    fn values_are_split_and_made_absolute() {
        let vars: Vec<(OsString, OsString)> = [
            ("RIPGREP_CONFIG_PATH", ".ripgreprc"),
            ("KUBECONFIG", "/a/k1::/b/k2"),
            ("PATH", "/usr/bin"),
            ("BASH_ENV", "/w/../w/env.sh"),
        ]
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();
        let got = named_configs(&vars, Path::new("/w"));
        let paths: Vec<&Path> = got.iter().map(|(_, p)| p.as_path()).collect();
        assert_eq!(
            paths,
            [
                Path::new("/w/.ripgreprc"),
                Path::new("/a/k1"),
                Path::new("/b/k2"),
                Path::new("/w/env.sh")
            ]
        );
        assert_eq!(got[0].0, "RIPGREP_CONFIG_PATH");
    }
}
