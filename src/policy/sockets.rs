//! The sockets the caller's environment names: daemons the caller reaches (a container engine, a
//! terminal multiplexer, gpg-agent, the display and session buses), found where the variables
//! say rather than where they usually are. Each is hidden in the jail, and the variables are
//! removed from the command's environment (profiles/default.toml); mediation (linux/
//! unix_connect.rs) would refuse them anyway, and hiding them also holds where it is absent.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The variables that name a socket (or the directory of one) and are removed.
pub const SOCKET_VARIABLES: &[&str] = &[
    "DOCKER_HOST",
    "CONTAINER_HOST",
    "TMUX",
    "TMUX_PANE",
    "STY",
    "SCREENDIR",
    "WAYLAND_DISPLAY",
    "DISPLAY",
    "XAUTHORITY",
    "GNUPGHOME",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "SSH_AUTH_SOCK",
];

/// Removes the socket-naming variables from the command's environment, but those set on
/// purpose (`--env`, the profile) and those whose value names a socket given with
/// `--allow-socket` (SSH_AUTH_SOCK for git push), which are put back as the caller had them.
pub fn strip_socket_variables(
    env: &mut super::env::ChildEnv,
    caller: &[(OsString, OsString)],
    allowed: &[PathBuf],
) {
    let names_allowed = |name: &str, value: &OsString| {
        let v = value.to_string_lossy();
        let path = match name {
            "SSH_AUTH_SOCK" => Some(v.as_ref()),
            "DOCKER_HOST" | "CONTAINER_HOST" => v.strip_prefix("unix://"),
            _ => None,
        };
        path.is_some_and(|p| allowed.iter().any(|a| a == Path::new(p)))
    };
    for name in SOCKET_VARIABLES {
        if env.set.iter().any(|s| s == name) {
            continue;
        }
        let given = caller.iter().find(|(k, _)| k == name);
        env.vars.retain(|(k, _)| k != name);
        match given {
            Some((k, v)) if names_allowed(name, v) => {
                env.vars.push((k.clone(), v.clone()));
                env.removed.retain(|r| r != name);
                env.why.remove(*name);
            }
            Some(_) => {
                if !env.removed.iter().any(|r| r == name) {
                    env.removed.push(name.to_string());
                }
                env.why
                    .entry(name.to_string())
                    .or_insert_with(|| "names a socket (hidden)".into());
            }
            None => {}
        }
    }
}

/// The paths to hide for what `var` (the caller's environment) names.
pub fn env_named_sockets(
    var: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut push = |p: PathBuf| {
        if p.is_absolute() && !out.contains(&p) {
            out.push(p);
        }
    };
    for name in ["DOCKER_HOST", "CONTAINER_HOST"] {
        if let Some(path) = var(name).as_deref().and_then(|v| v.strip_prefix("unix://")) {
            push(PathBuf::from(path));
        }
    }
    // TMUX=/tmp/tmux-1000/default,1234,0: every server of that user lives in the directory.
    if let Some(v) = var("TMUX") {
        let socket = Path::new(v.split(',').next().unwrap_or_default());
        if let Some(dir) = socket.parent() {
            push(dir.to_path_buf());
        }
    }
    // screen keeps its sockets in SCREENDIR, or a per-user directory under /run/screen.
    if var("STY").is_some() || var("SCREENDIR").is_some() {
        match var("SCREENDIR") {
            Some(d) => push(PathBuf::from(d)),
            None => push(PathBuf::from("/run/screen")),
        }
    }
    // WAYLAND_DISPLAY is a name in XDG_RUNTIME_DIR (hidden whole), or an absolute path.
    if let Some(v) = var("WAYLAND_DISPLAY") {
        match var("XDG_RUNTIME_DIR") {
            _ if v.starts_with('/') => push(PathBuf::from(v)),
            Some(run) => push(Path::new(&run).join(v)),
            None => {}
        }
    }
    // X11: the server's sockets (the host's /tmp is only visible with --tmp host) and cookie.
    if var("DISPLAY").is_some() {
        push(PathBuf::from("/tmp/.X11-unix"));
    }
    if let Some(v) = var("XAUTHORITY") {
        push(PathBuf::from(v));
    }
    // gpg-agent's sockets sit in GNUPGHOME, with the keys.
    if let Some(v) = var("GNUPGHOME") {
        push(PathBuf::from(v));
    }
    for name in ["DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS"] {
        if let Some(v) = var(name) {
            for p in dbus_paths(&v) {
                push(p);
            }
        }
    }
    // User-level container engines put their daemon's socket under HOME.
    if let Some(home) = home {
        for rel in USER_RUNTIMES {
            push(home.join(rel));
        }
    }
    out
}

/// Where user-level container runtimes keep the daemon sockets they forward from a VM.
const USER_RUNTIMES: &[&str] = &[
    ".colima",                                // Colima: docker.sock per profile
    ".lima",                                  // Lima: sock/*.sock per instance
    ".rd",                                    // Rancher Desktop: docker.sock
    ".orbstack",                              // OrbStack
    ".docker/run",                            // Docker Desktop for Linux
    ".docker/desktop",                        // Docker Desktop for Linux
    ".local/share/containers/podman/machine", // podman machine
    ".config/containers/podman/machine",      // podman machine (older)
];

/// The `path=` and `dir=`/`tmpdir=` values of a D-Bus address list (`;`-separated transports).
fn dbus_paths(address: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for transport in address.split(';') {
        let Some(params) = transport.strip_prefix("unix:") else {
            continue;
        };
        for kv in params.split(',') {
            if let Some((key, value)) = kv.split_once('=') {
                if matches!(key, "path" | "dir" | "tmpdir") {
                    out.push(PathBuf::from(unescape_dbus(value)));
                }
            }
        }
    }
    out
}

/// D-Bus addresses escape bytes as %XX.
fn unescape_dbus(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&v[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(vars: &[(&str, &str)]) -> Vec<PathBuf> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let get = |n: &str| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        env_named_sockets(&get, None)
    }

    #[test]
    fn each_variable_names_its_socket() {
        let got = named(&[
            ("DOCKER_HOST", "unix:///home/u/.colima/default/docker.sock"),
            ("CONTAINER_HOST", "unix:///run/user/1000/podman/podman.sock"),
            ("TMUX", "/tmp/tmux-1000/default,4321,0"),
            ("WAYLAND_DISPLAY", "wayland-0"),
            ("XDG_RUNTIME_DIR", "/run/user/1000"),
            ("DISPLAY", ":0"),
            ("XAUTHORITY", "/home/u/.Xauthority"),
            ("GNUPGHOME", "/home/u/keys/gnupg"),
            (
                "DBUS_SESSION_BUS_ADDRESS",
                "unix:path=/run/user/1000/bu%73,guid=abc;unix:abstract=/tmp/dbus-x",
            ),
            ("STY", "1234.pts-0.host"),
        ]);
        for want in [
            "/home/u/.colima/default/docker.sock",
            "/run/user/1000/podman/podman.sock",
            "/tmp/tmux-1000",
            "/run/user/1000/wayland-0",
            "/tmp/.X11-unix",
            "/home/u/.Xauthority",
            "/home/u/keys/gnupg",
            "/run/user/1000/bus",
            "/run/screen",
        ] {
            assert!(
                got.contains(&PathBuf::from(want)),
                "{want} missing from {got:?}"
            );
        }
    }

    #[test]
    fn tcp_engines_and_relative_names_name_no_path() {
        assert!(named(&[("DOCKER_HOST", "tcp://127.0.0.1:2375")]).is_empty());
        assert!(named(&[("WAYLAND_DISPLAY", "wayland-0")]).is_empty());
        assert!(named(&[("XAUTHORITY", "relative")]).is_empty());
    }

    #[test]
    fn user_runtimes_under_home_are_named() {
        let got = env_named_sockets(&|_| None, Some(Path::new("/home/u")));
        assert!(got.contains(&PathBuf::from("/home/u/.colima")));
        assert!(got.contains(&PathBuf::from("/home/u/.lima")));
    }
}
