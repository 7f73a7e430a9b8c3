//! What stays read-only under every writable path, and what is moved aside after a run when the
//! command created or changed it. (What is hidden is the default profile's:
//! profiles/default.toml.)
//!
//! Each entry names a file or directory that a real tool runs, or loads as code or as settings
//! that run code, when a person opens, enters, builds or commits in the project, or starts a
//! shell or an agent there — outside the jail, later. A deny list cannot name a project's own
//! code (a Makefile, a test, a `package.json` script): the copy-on-write workspace is the answer
//! for those.

use std::collections::HashMap;
use std::sync::OnceLock;

/// One protected entry: `pattern` is a relative path of one or more components, matched at any
/// depth below a writable root (a path matches when its last components are the pattern's); a
/// last component `*.ext` matches any name with that ending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtectedName {
    pub pattern: &'static str,
    /// Why it carries code: the tool that runs it and when.
    pub why: &'static str,
}

const fn p(pattern: &'static str, why: &'static str) -> ProtectedName {
    ProtectedName { pattern, why }
}

/// Names that stay read-only beneath every `--rw` path unless a `--rw` names them exactly, and
/// that are moved aside after the run when the command created or changed them, at any depth.
pub const PROTECTED: &[ProtectedName] = &[
    // git
    p(
        ".git",
        "a gitfile (worktree, submodule) says where the git directory is; a new .git directory is a repository whose config and hooks git honours",
    ),
    p(
        ".git/hooks",
        "git runs these scripts on commit, checkout, merge, push",
    ),
    p(
        ".git/config",
        "core.fsmonitor, core.hooksPath, core.pager, aliases and filter drivers run commands on git status, diff, checkout",
    ),
    p(
        ".git/commondir",
        "redirects git to another repository's config and hooks",
    ),
    p(
        ".git/config.worktree",
        "per-worktree config (extensions.worktreeConfig): the same commands as .git/config",
    ),
    p(
        ".gitmodules",
        "submodule URLs and paths that git fetches and checks out on submodule update",
    ),
    p(
        ".husky",
        "husky: hook scripts that git runs through core.hooksPath",
    ),
    p(
        ".githooks",
        "hook scripts that git runs through core.hooksPath",
    ),
    p(
        ".pre-commit-config.yaml",
        "pre-commit: the hooks it installs and runs on commit",
    ),
    p("lefthook.yml", "lefthook: commands it runs on commit"),
    p("lefthook.yaml", "lefthook: commands it runs on commit"),
    p(".lefthook.yml", "lefthook: commands it runs on commit"),
    p(".lefthook.yaml", "lefthook: commands it runs on commit"),
    p(
        "lefthook-local.yml",
        "lefthook: local commands it runs on commit",
    ),
    p(
        "lefthook-local.yaml",
        "lefthook: local commands it runs on commit",
    ),
    p(
        ".hg/hgrc",
        "Mercurial: hooks run on hg status, commit, pull",
    ),
    p(
        ".jj/repo/config.toml",
        "Jujutsu: repository config (pager, fix tools, signing commands)",
    ),
    // Environment loaders: shell code or variables (BASH_ENV, LD_PRELOAD, NODE_OPTIONS, PATH)
    // applied on entering the directory or starting a tool there.
    p(".envrc", "direnv: shell code run on cd into the directory"),
    p(
        ".env",
        "loaded into the environment by gemini (project and every parent), aider, direnv's dotenv, mise, compose: BASH_ENV, LD_PRELOAD, NODE_OPTIONS run code",
    ),
    p(
        "mise.toml",
        "mise: env, hooks and tasks run on cd and on mise run",
    ),
    p(
        ".mise.toml",
        "mise: env, hooks and tasks run on cd and on mise run",
    ),
    p("mise.local.toml", "mise: local env, hooks and tasks"),
    p(".mise.local.toml", "mise: local env, hooks and tasks"),
    p(".mise", "mise: config directory (config.toml, tasks)"),
    p(
        ".config/mise",
        "mise: config directory (config.toml, tasks)",
    ),
    p(".config/mise.toml", "mise: config file"),
    p(
        ".tool-versions",
        "asdf and mise: a version may be path:DIR, whose binaries then run",
    ),
    // Editors and IDEs: tasks and settings that run on opening the folder.
    p(
        ".vscode",
        "VS Code: tasks with runOn folderOpen, settings naming interpreters, linters, terminals",
    ),
    p(
        "*.code-workspace",
        "VS Code workspace: the same tasks and settings as .vscode",
    ),
    p(
        ".idea",
        "JetBrains IDEs: run configurations, startup tasks, external tools",
    ),
    p(".fleet", "JetBrains Fleet: run configurations and settings"),
    p(".zed", "Zed: tasks and language-server commands"),
    p(
        ".helix",
        "Helix: language-server commands in languages.toml",
    ),
    p(
        ".devcontainer",
        "Dev Containers: initializeCommand runs on the host when the folder is opened",
    ),
    p(
        ".devcontainer.json",
        "Dev Containers: initializeCommand runs on the host when the folder is opened",
    ),
    p(
        ".nvim.lua",
        "Neovim (exrc): Lua run on start in the directory",
    ),
    p(".nvimrc", "Neovim and Vim (exrc): commands run on start"),
    p(".exrc", "Vim and vi (exrc): commands run on start"),
    // Coding agents: their rules, MCP server commands, hooks and plugins.
    p(
        ".claude",
        "Claude Code: project settings (hooks, permissions, MCP), agents, commands",
    ),
    p(
        ".mcp.json",
        "Claude Code: project MCP servers (commands it starts)",
    ),
    p(".codex", "Codex: project config and rules"),
    p(
        ".opencode",
        "opencode: project plugins, tools, agents, commands",
    ),
    p(
        "opencode.json",
        "opencode: project config (MCP commands, plugins, permissions)",
    ),
    p(
        "opencode.jsonc",
        "opencode: project config (MCP commands, plugins, permissions)",
    ),
    p(
        ".gemini",
        "Gemini CLI: project settings (MCP servers, tools), .env, commands",
    ),
    p(
        ".aider.conf.yml",
        "aider: options including lint and test commands it runs",
    ),
    p(".cursor", "Cursor: rules, MCP servers, hooks"),
    p(".windsurf", "Windsurf: rules and workflows"),
    p(".continue", "Continue: MCP servers and config"),
    p(".kiro", "Kiro: hooks that run commands on file events"),
    p(".amazonq", "Amazon Q: MCP servers"),
    p("crush.json", "Crush: MCP and language-server commands"),
    p(".crush.json", "Crush: MCP and language-server commands"),
    // Package managers and toolchains: commands they run on install or build.
    p(
        ".npmrc",
        "npm: script-shell, node-options and git settings used on every npm run and install",
    ),
    p(
        ".yarnrc",
        "Yarn 1: yarn-path names a JavaScript file yarn runs",
    ),
    p(
        ".yarnrc.yml",
        "Yarn 2+: yarnPath names a JavaScript file yarn runs; plugins",
    ),
    p(".pnpmfile.cjs", "pnpm: hooks run on every install"),
    p(
        "bunfig.toml",
        "Bun: preload scripts run before every bun run",
    ),
    p(
        ".bunfig.toml",
        "Bun: preload scripts run before every bun run",
    ),
    p(
        ".cargo/config.toml",
        "Cargo: rustc-wrapper, linker, runner, aliases; rust-analyzer runs it on open",
    ),
    p(".cargo/config", "Cargo: the same as .cargo/config.toml"),
    p(
        "rust-toolchain.toml",
        "rustup: a toolchain path whose rustc and cargo then run",
    ),
    p(
        "rust-toolchain",
        "rustup: a toolchain path whose rustc and cargo then run",
    ),
    p(
        ".terraformrc",
        "Terraform: provider dev_overrides run local binaries",
    ),
    p(
        "terraform.rc",
        "Terraform: provider dev_overrides run local binaries",
    ),
    // Cloud and cluster tools: commands they run to get credentials.
    p(
        ".aws",
        "AWS CLI and SDKs: credential_process runs a command",
    ),
    p(".azure", "Azure CLI: configuration and extensions"),
    p(".kube", "kubectl: exec credential plugins run commands"),
    p(
        ".docker",
        "Docker CLI: credential helpers and CLI plugins it runs",
    ),
    // Shells, interpreters and terminal tools: run on start (they matter where HOME, or a
    // directory a person starts them in, is writable).
    p(".bashrc", "bash: run by every interactive shell"),
    p(".bash_profile", "bash: run by login shells"),
    p(".bash_login", "bash: run by login shells"),
    p(".bash_logout", "bash: run when a login shell exits"),
    p(".profile", "sh, bash, dash: run by login shells"),
    p(".zshrc", "zsh: run by every interactive shell"),
    p(".zshenv", "zsh: run by every zsh"),
    p(".zprofile", "zsh: run by login shells"),
    p(".zlogin", "zsh: run by login shells"),
    p(".zlogout", "zsh: run when a login shell exits"),
    p(".cshrc", "csh and tcsh: run by every shell"),
    p(".tcshrc", "tcsh: run by every shell"),
    p(".kshrc", "ksh: run by interactive shells"),
    p(
        ".config/fish",
        "fish: config.fish and conf.d run by every shell",
    ),
    p(".xprofile", "X sessions: run at login"),
    p(".xinitrc", "startx: run at login"),
    p(".xsessionrc", "X sessions: run at login"),
    p(".pam_environment", "PAM: environment set at every login"),
    p(
        ".config/environment.d",
        "systemd: environment of the user's services",
    ),
    p(
        ".config/systemd",
        "systemd: user services started on the host",
    ),
    p(
        ".config/autostart",
        "desktop sessions: programs started at login",
    ),
    p(
        ".local/bin",
        "on PATH in most distributions: shadows every command",
    ),
    p(
        ".gitconfig",
        "git: the user's config (core.fsmonitor, pager, aliases)",
    ),
    p(".config/git", "git: the user's config and global hooks"),
    p(
        ".config/direnv",
        "direnv: direnvrc runs before every .envrc; its allow list",
    ),
    p(
        ".ssh",
        "ssh: authorized_keys grants logins; config ProxyCommand runs commands",
    ),
    p(".vimrc", "Vim: run on every start"),
    p(".config/nvim", "Neovim: init.lua run on every start"),
    p(".emacs", "Emacs: Lisp run on every start"),
    p(".emacs.d", "Emacs: init.el run on every start"),
    p(
        ".tmux.conf",
        "tmux: run-shell commands on every server start",
    ),
    p(".screenrc", "GNU screen: commands on every start"),
    p(".inputrc", "readline: key bindings of every shell"),
    p(".gdbinit", "gdb: commands (and shell) on start"),
    p(".lldbinit", "lldb: commands on start"),
    p(
        ".pdbrc",
        "Python pdb: commands read from the current directory on start",
    ),
    p(
        ".psqlrc",
        "psql: commands, including \\! shell commands, on start",
    ),
    p(".sqliterc", "sqlite3: commands, including .shell, on start"),
    p(".irbrc", "Ruby irb: Ruby code run on start"),
    p(".pryrc", "Ruby pry: Ruby code run on start"),
    p(".Rprofile", "R: R code run on start in the directory"),
    p(
        ".ipython",
        "IPython: startup scripts and config run on start",
    ),
    p(".jupyter", "Jupyter: Python config files run on start"),
    p(
        ".gradle/init.gradle",
        "Gradle: init script run by every build",
    ),
    p(
        ".gradle/init.gradle.kts",
        "Gradle: init script run by every build",
    ),
    p(".gradle/init.d", "Gradle: init scripts run by every build"),
];

/// Inside each git directory — `.git`, a bare repository, each submodule's (`.git/modules/NAME`)
/// and each linked worktree's (`.git/worktrees/NAME`) — the entries that hold configuration and
/// hooks; a git directory is recognised by its layout, not its name.
pub const PROTECTED_IN_GIT_DIRS: &[ProtectedName] = &[
    p("hooks", "git runs these scripts"),
    p("config", "core.fsmonitor and other commands git runs"),
    p("config.worktree", "the same commands as config"),
    p("commondir", "redirects git to another repository"),
];

/// Whether the last components of a path (`names`, outermost first) match `pattern`.
pub fn pattern_matches(pattern: &str, names: &[&[u8]]) -> bool {
    let parts = pattern.split('/').count();
    if parts > names.len() {
        return false;
    }
    pattern
        .rsplit('/')
        .zip(names.iter().rev())
        .enumerate()
        .all(|(i, (want, have))| match want.strip_prefix('*') {
            Some(ext) if i == 0 => have.len() > ext.len() && have.ends_with(ext.as_bytes()),
            _ => want.as_bytes() == *have,
        })
}

/// The list indexed by its last and first components (the walk asks for every entry it
/// lists, so a lookup must not cost a pass over the list).
struct Index {
    by_last: HashMap<&'static [u8], Vec<&'static ProtectedName>>,
    by_first: HashMap<&'static [u8], Vec<&'static ProtectedName>>,
    /// `*.ext` last components: (ext, entry).
    globs: Vec<(&'static [u8], &'static ProtectedName)>,
}

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut ix = Index {
            by_last: HashMap::new(),
            by_first: HashMap::new(),
            globs: Vec::new(),
        };
        for p in PROTECTED {
            let last = p.pattern.rsplit('/').next().unwrap_or_default();
            match last.strip_prefix('*') {
                Some(ext) => ix.globs.push((ext.as_bytes(), p)),
                None => ix.by_last.entry(last.as_bytes()).or_default().push(p),
            }
            let first = p.pattern.split('/').next().unwrap_or_default();
            if !first.starts_with('*') {
                ix.by_first.entry(first.as_bytes()).or_default().push(p);
            }
        }
        ix
    })
}

/// The protected entry that a path ending in `names` is, if any.
pub fn protected_name(names: &[&[u8]]) -> Option<&'static ProtectedName> {
    let last = *names.last()?;
    let ix = index();
    if let Some(found) = ix.by_last.get(last).and_then(|v| {
        v.iter()
            .copied()
            .find(|p| pattern_matches(p.pattern, names))
    }) {
        return Some(found);
    }
    ix.globs
        .iter()
        .find(|(ext, _)| last.len() > ext.len() && last.ends_with(ext))
        .map(|(_, p)| *p)
}

/// The protected entry that `path` (relative, components in order) is, or is inside: the first
/// of its leading parts that is one.
pub fn protected_at_or_above(path: &std::path::Path) -> Option<&'static ProtectedName> {
    use std::os::unix::ffi::OsStrExt;
    let names: Vec<&[u8]> = path.iter().map(|c| c.as_bytes()).collect();
    (1..=names.len()).find_map(|i| protected_name(&names[..i]))
}

/// The multi-component entry whose first components the last components of `names` are
/// (`app/.cargo` for `.cargo/config.toml`): a symlink there leads to a protected name that the
/// path itself does not spell.
pub fn protected_prefix(names: &[&[u8]]) -> Option<&'static ProtectedName> {
    PROTECTED.iter().find(|p| {
        let parts: Vec<&str> = p.pattern.split('/').collect();
        (1..parts.len()).any(|j| {
            j <= names.len()
                && parts[..j]
                    .iter()
                    .zip(&names[names.len() - j..])
                    .all(|(want, have)| want.as_bytes() == *have)
        })
    })
}

/// The entries whose pattern starts with the component `name` (`.cargo` → `.cargo/config.toml`,
/// `.cargo/config`).
pub fn patterns_starting_with(name: &[u8]) -> &'static [&'static ProtectedName] {
    index().by_first.get(name).map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(path: &str) -> Vec<&[u8]> {
        path.split('/').map(str::as_bytes).collect()
    }

    #[test]
    fn patterns_match_at_any_depth_by_their_last_components() {
        assert!(protected_name(&names("app/.envrc")).is_some());
        assert!(protected_name(&names("a/b/c/.cargo/config.toml")).is_some());
        assert!(protected_name(&names("a/config.toml")).is_none());
        assert!(protected_name(&names("x/my.code-workspace")).is_some());
        assert!(protected_name(&names(".code-workspace")).is_none());
        assert_eq!(
            protected_name(&names("w/.git/hooks")).map(|p| p.pattern),
            Some(".git/hooks")
        );
        assert!(protected_name(&names("src/main.rs")).is_none());
        assert!(protected_prefix(&names("app/.cargo")).is_some());
        assert!(protected_prefix(&names("x/.jj/repo")).is_some());
        assert!(protected_prefix(&names("x/.envrc")).is_none());
    }

    #[test]
    fn every_entry_has_a_reason_and_no_pattern_is_listed_twice() {
        let mut seen = std::collections::HashSet::new();
        for p in PROTECTED.iter().chain(PROTECTED_IN_GIT_DIRS) {
            assert!(p.why.len() > 10, "{} has no reason", p.pattern);
            assert!(!p.pattern.starts_with('/') && !p.pattern.ends_with('/'));
        }
        for p in PROTECTED {
            assert!(seen.insert(p.pattern), "{} listed twice", p.pattern);
        }
    }
}
