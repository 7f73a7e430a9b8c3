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

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Variables that name a configuration file or directory although their names do not say
/// so by a suffix below.
const EXACT: &[&str] = &[
    "BASH_ENV",
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
            out.push((name.to_string(), super::absolute(cwd, p)));
        }
        if out.len() > 256 {
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
