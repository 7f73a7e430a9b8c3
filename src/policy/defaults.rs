//! What stays read-only under every writable path. (What is hidden is the default profile's:
//! profiles/default.toml.)

/// Names that stay read-only beneath every `--rw` path unless a `--rw` names them exactly. An
/// agent must not loosen its own rules (agent settings) or plant something that runs on the host
/// later (git hooks, git config with `core.hooksPath`/`core.fsmonitor`, direnv, editor tasks, MCP
/// server definitions).
pub const PROTECTED_UNDER_RW: &[&str] = &[
    // A gitfile (linked worktree, submodule checkout) says where the git directory is.
    ".git",
    ".git/hooks",
    ".git/config",
    // Both redirect git to another config and hooks: commondir for any repository,
    // config.worktree when extensions.worktreeConfig is on.
    ".git/commondir",
    ".git/config.worktree",
    // Hook managers whose scripts live in the working tree (git runs them through hooks that
    // point there, or core.hooksPath).
    ".husky",
    ".githooks",
    ".pre-commit-config.yaml",
    "lefthook.yml",
    "lefthook.yaml",
    ".lefthook.yml",
    ".lefthook.yaml",
    "lefthook-local.yml",
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
