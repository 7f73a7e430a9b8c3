//! The embedded default policy: what is hidden and what stays read-only under a writable path.

use std::path::{Path, PathBuf};

/// Names that stay read-only beneath every `--rw` path unless a `--rw` names them exactly. An
/// agent must not loosen its own rules (agent settings) or plant something that runs on the host
/// later (git hooks, git config with `core.hooksPath`/`core.fsmonitor`, direnv, editor tasks, MCP
/// server definitions).
pub const PROTECTED_UNDER_RW: &[&str] = &[
    ".git/hooks",
    ".git/config",
    // Both redirect git to another config and hooks: commondir for any repository,
    // config.worktree when extensions.worktreeConfig is on.
    ".git/commondir",
    ".git/config.worktree",
    ".vscode",
    ".idea",
    ".envrc",
    ".mcp.json",
    ".claude",
    ".codex",
    ".opencode",
    "opencode.json",
    ".gemini",
];

/// Inside each submodule's git directory (.git/modules/NAME) and each linked worktree's
/// (.git/worktrees/NAME), the names that hold configuration and hooks.
pub const PROTECTED_IN_GIT_SUBDIRS: &[&str] = &["hooks", "config", "config.worktree", "commondir"];

/// Credential stores under HOME that no agent needs to read.
const HIDDEN_IN_HOME: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".config/gh",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
];

/// Sockets (and the directories holding them) that lead out of any sandbox: a read-only mount does
/// not stop `connect()` on a unix socket, and Landlock before ABI 9 has no right for it, so they are
/// hidden in the mount view. Not /run wholesale: /etc/resolv.conf often points into it.
const HIDDEN_SOCKETS: &[&str] = &[
    "/run/user",
    "/run/docker.sock",
    "/run/docker",
    "/run/containerd",
    "/run/podman",
    "/run/crio",
    "/run/buildkit",
    "/run/dbus",
    "/run/systemd/private",
    "/run/systemd/userdb",
    "/run/snapd.socket",
    "/run/snapd-snap.socket",
    "/run/libvirt",
    "/run/lxd",
    "/var/run/docker.sock",
    "/var/run/dbus",
    "/var/lib/lxd/unix.socket",
];

/// The default hidden set for a user with this HOME and environment. Paths that do not exist are
/// dropped by the resolver; symlinks are followed there (the target is what must be hidden).
pub fn default_hidden(
    home: Option<&Path>,
    xdg_runtime_dir: Option<&Path>,
    ssh_auth_sock: Option<&Path>,
    gpg_agent_info: Option<&Path>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(home) = home {
        out.extend(HIDDEN_IN_HOME.iter().map(|rel| home.join(rel)));
    }
    out.extend(HIDDEN_SOCKETS.iter().map(PathBuf::from));
    for p in [xdg_runtime_dir, ssh_auth_sock, gpg_agent_info]
        .into_iter()
        .flatten()
    {
        if p.is_absolute() {
            out.push(p.to_path_buf());
        }
    }
    out
}
