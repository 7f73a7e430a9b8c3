//! The real agent CLIs under their profiles: each starts, runs commands that need no model and
//! touch its state, keeps that state where its profile lets it write, and leaves the project and
//! the rest of HOME untouched. The agents are installed from their public packages by .ci/run
//! into JAIL_AGENTS_DIR (default /var/tmp/jail-agents). The tests are compiled as ignored (the
//! runner counts them as skipped) unless JAIL_TEST_AGENTS is set (build.rs); with
//! JAIL_TEST_AGENTS=required (CI) a missing agent is a failure.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{Fixture, Who, full_level_or_skip, users};

fn agents_dir() -> PathBuf {
    std::env::var_os("JAIL_AGENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/jail-agents"))
}

/// The agent's executable, or None (skip) / a panic when agents are required.
fn agent(name: &str) -> Option<String> {
    let path = match name {
        "aider" => agents_dir().join("aider-venv/bin/aider"),
        other => agents_dir().join("npm/node_modules/.bin").join(other),
    };
    if path.exists() {
        return Some(path.to_string_lossy().into_owned());
    }
    if std::env::var("JAIL_TEST_AGENTS").as_deref() == Ok("required") {
        panic!(
            "JAIL_TEST_AGENTS=required but {} is not installed",
            path.display()
        );
    }
    eprintln!(
        "skipping: {} is not installed (see .ci/run)",
        path.display()
    );
    None
}

/// Size and mtime of every path under `dir` (no symlinks followed).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                out.insert(e.path(), (m.len(), m.mtime()));
            }
        }
    }
    out
}

/// A git repository in fx.repo (owned by the fixture's user) and a git identity in HOME.
fn project(fx: &Fixture) {
    std::fs::write(
        fx.home.join(".gitconfig"),
        "[user]\n\tname = Jail Test\n\temail = jail@example.invalid\n[safe]\n\tdirectory = *\n",
    )
    .unwrap();
    fx.give_to(fx.who);
    let git = |args: &[&str]| common::git(fx, args);
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "init"]);
}

struct Check<'a> {
    profile: &'a str,
    /// Extra jail flags (the project is added by the check).
    flags: &'a [&'a str],
    project_writable: bool,
    /// (arguments, expected exit code, text the output must contain)
    commands: Vec<(Vec<&'a str>, i32, &'a str)>,
    /// Files (relative to HOME) the agent must have written.
    state: &'a [&'a str],
    /// Where in HOME it may write (relative).
    writable: &'a [&'a str],
    /// Protected files (relative to HOME, with content) created before the run: the agent must
    /// work with them read-only, and they must be unchanged after.
    protected: &'a [(&'a str, &'a str)],
    env: &'a [(&'a str, &'a str)],
}

fn check(name: &str, bin: &str, c: &Check, who: Who) {
    let fx = Fixture::new(who, name);
    project(&fx);
    for (rel, content) in c.protected {
        let p = fx.home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
    }
    fx.give_to(who);
    let home_before = snapshot(&fx.home);
    let repo_before = snapshot(&fx.repo);
    let git_config = std::fs::read(fx.repo.join(".git/config")).unwrap();
    for (args, code, needle) in &c.commands {
        let mut argv: Vec<&str> = vec!["--profile", c.profile, "--timeout", "120s"];
        let repo = fx.p("repo");
        argv.extend([
            if c.project_writable { "--rw" } else { "--ro" },
            repo.as_str(),
        ]);
        argv.extend(["--cwd", repo.as_str()]);
        argv.extend(c.flags);
        argv.push("--");
        argv.push(bin);
        argv.extend(args);
        let run = fx.jail_with(&argv, &[], c.env);
        let all = format!("{}{}", run.stdout, run.stderr);
        assert_eq!(
            run.code,
            Some(*code),
            "{name} {args:?} as {who:?}:\n{}",
            run.describe()
        );
        assert!(
            all.contains(needle),
            "{name} {args:?} as {who:?}: no '{needle}':\n{all}"
        );
        assert!(
            !run.stderr.contains("jail: "),
            "{name} {args:?}: {}",
            run.stderr
        );
    }
    for (rel, content) in c.protected {
        assert_eq!(
            std::fs::read_to_string(fx.home.join(rel)).ok().as_deref(),
            Some(*content),
            "{name} as {who:?}: protected {rel} changed"
        );
    }
    for f in c.state {
        assert!(
            fx.home.join(f).exists(),
            "{name} as {who:?}: state {f} was not written"
        );
    }
    // Nothing outside the agent's own places in HOME changed.
    let home_after = snapshot(&fx.home);
    for (path, meta) in &home_after {
        if home_before.get(path) == Some(meta) {
            continue;
        }
        let rel = path.strip_prefix(&fx.home).unwrap();
        assert!(
            c.writable.iter().any(|w| rel.starts_with(w)),
            "{name} as {who:?}: {} changed outside its profile's places",
            rel.display()
        );
    }
    if !c.project_writable {
        assert_eq!(
            repo_before,
            snapshot(&fx.repo),
            "{name} as {who:?}: the project changed"
        );
    }
    // Even in a writable project, the repository's config is the user's.
    assert_eq!(
        std::fs::read(fx.repo.join(".git/config")).unwrap(),
        git_config,
        "{name} as {who:?}: .git/config changed"
    );
}

#[test]
#[cfg_attr(
    not(jail_test_agents),
    ignore = "needs the real agent CLIs: set JAIL_TEST_AGENTS=1 (see .ci/run)"
)]
fn opencode_keeps_its_state_in_its_xdg_directories() {
    let Some(bin) = agent("opencode") else { return };
    if !full_level_or_skip("opencode") {
        return;
    }
    for who in users() {
        check(
            "opencode",
            &bin,
            &Check {
                profile: "opencode",
                flags: &[],
                project_writable: false,
                commands: vec![
                    (vec!["--version"], 0, "1."),
                    (vec!["debug", "paths"], 0, ".config/opencode"),
                    (vec!["agent", "list"], 0, "build"),
                ],
                state: &[
                    ".config/opencode/opencode.jsonc",
                    ".local/share/opencode/opencode.db",
                ],
                writable: &[
                    ".config/opencode",
                    ".local/share/opencode",
                    ".local/state/opencode",
                    ".cache/opencode",
                ],
                protected: &[
                    (".config/opencode/opencode.json", "{}\n"),
                    (".config/opencode/plugins/README", "x\n"),
                ],
                env: &[("OPENCODE_DISABLE_MODELS_FETCH", "1")],
            },
            who,
        );
    }
}

#[test]
#[cfg_attr(
    not(jail_test_agents),
    ignore = "needs the real agent CLIs: set JAIL_TEST_AGENTS=1 (see .ci/run)"
)]
fn claude_code_keeps_its_state_in_dot_claude() {
    let Some(bin) = agent("claude") else { return };
    if !full_level_or_skip("claude") {
        return;
    }
    for who in users() {
        check(
            "claude",
            &bin,
            &Check {
                profile: "claude-code",
                flags: &[],
                project_writable: false,
                commands: vec![
                    (vec!["--version"], 0, "Claude Code"),
                    (vec!["mcp", "list"], 0, "MCP"),
                ],
                state: &[".claude/.claude.json"],
                writable: &[".claude"],
                protected: &[(".claude/settings.json", "{}\n")],
                env: &[("DISABLE_TELEMETRY", "1")],
            },
            who,
        );
    }
}

#[test]
#[cfg_attr(
    not(jail_test_agents),
    ignore = "needs the real agent CLIs: set JAIL_TEST_AGENTS=1 (see .ci/run)"
)]
fn codex_keeps_its_state_in_codex_home() {
    let Some(bin) = agent("codex") else { return };
    if !full_level_or_skip("codex") {
        return;
    }
    for who in users() {
        check(
            "codex",
            &bin,
            &Check {
                profile: "codex",
                flags: &[],
                project_writable: false,
                commands: vec![
                    (vec!["--version"], 0, "codex"),
                    (vec!["mcp", "list"], 0, "MCP"),
                ],
                state: &[".codex/tmp/arg0-linux"],
                writable: &[".codex"],
                protected: &[(".codex/config.toml", "\n"), (".codex/.env", "\n")],
                env: &[],
            },
            who,
        );
    }
}

#[test]
#[cfg_attr(
    not(jail_test_agents),
    ignore = "needs the real agent CLIs: set JAIL_TEST_AGENTS=1 (see .ci/run)"
)]
fn codex_sandbox_nests_inside_jail_with_allow_userns() {
    // Its bubblewrap needs user and mount namespaces; nested sandboxes only tighten. As root,
    // jail shows host root as a non-zero id inside (a nested map of id 0 would need CAP_SETFCAP,
    // which the command does not hold), so bubblewrap maps itself there too.
    let Some(bin) = agent("codex") else { return };
    if !full_level_or_skip("codex-sandbox") {
        return;
    }
    for who in users() {
        codex_sandbox_nests(&bin, who);
    }
}

fn codex_sandbox_nests(bin: &str, who: Who) {
    let fx = Fixture::new(who, "codex-sandbox");
    project(&fx);
    let repo = fx.p("repo");
    let file = fx.p("repo/file.txt");
    let script = format!("echo NESTED; echo x >> {file} || echo STILL-READ-ONLY");
    let run = fx.jail(&[
        "--profile",
        "codex",
        "--allow-userns",
        "--ro",
        &repo,
        "--cwd",
        &repo,
        "--",
        bin,
        "sandbox",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert!(
        run.stdout.contains("NESTED"),
        "as {who:?}\n{}",
        run.describe()
    );
    assert!(
        run.stdout.contains("STILL-READ-ONLY"),
        "as {who:?}\n{}",
        run.describe()
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "original\n");
}

#[test]
#[cfg_attr(
    not(jail_test_agents),
    ignore = "needs the real agent CLIs: set JAIL_TEST_AGENTS=1 (see .ci/run)"
)]
fn gemini_cli_keeps_its_state_in_dot_gemini() {
    let Some(bin) = agent("gemini") else { return };
    if !full_level_or_skip("gemini") {
        return;
    }
    for who in users() {
        check(
            "gemini",
            &bin,
            &Check {
                profile: "gemini-cli",
                flags: &[],
                project_writable: false,
                commands: vec![
                    (vec!["--version"], 0, "0."),
                    (vec!["mcp", "list"], 0, "MCP"),
                ],
                state: &[".gemini/projects.json"],
                writable: &[".gemini"],
                protected: &[(".gemini/settings.json", "{}\n"), (".gemini/.env", "\n")],
                env: &[],
            },
            who,
        );
    }
}

#[test]
#[cfg_attr(
    not(jail_test_agents),
    ignore = "needs the real agent CLIs: set JAIL_TEST_AGENTS=1 (see .ci/run)"
)]
fn aider_keeps_its_state_in_dot_aider_and_cannot_touch_git_config() {
    let Some(bin) = agent("aider") else { return };
    if !full_level_or_skip("aider") {
        return;
    }
    for who in users() {
        check(
            "aider",
            &bin,
            &Check {
                profile: "aider",
                flags: &[],
                // aider writes its chat history and tag cache into the project by design.
                project_writable: true,
                commands: vec![
                    (vec!["--version"], 0, "aider"),
                    (
                        vec![
                            "--model",
                            "gpt-4o",
                            "--exit",
                            "--yes-always",
                            "--no-check-update",
                            "--no-show-release-notes",
                            "--analytics-disable",
                        ],
                        0,
                        "Aider",
                    ),
                ],
                state: &[".aider"],
                writable: &[".aider"],
                protected: &[(".aider/oauth-keys.env", "\n")],
                env: &[("OPENAI_API_KEY", "sk-fake")],
            },
            who,
        );
    }
}

/// Each agent profile hides the rest of HOME (`home = "hidden"`): the CLI still starts and runs
/// a command that reads its state with the project inside HOME, while a file beside the
/// project, which nothing names, cannot be read from the same jail; the git identity can.
#[test]
#[cfg_attr(
    not(jail_test_agents),
    ignore = "needs the real agent CLIs: set JAIL_TEST_AGENTS=1 (see .ci/run)"
)]
fn every_agent_runs_with_the_rest_of_home_hidden() {
    if !full_level_or_skip("agents-home-hidden") {
        return;
    }
    let agents = [
        ("opencode", "opencode", "agent list", "build"),
        ("claude-code", "claude", "mcp list", "MCP"),
        ("codex", "codex", "mcp list", "MCP"),
        ("gemini-cli", "gemini", "mcp list", "MCP"),
        ("aider", "aider", "--version", "aider"),
    ];
    for (profile, name, args, needle) in agents {
        let Some(bin) = agent(name) else { continue };
        for who in users() {
            let fx = Fixture::new(who, &format!("home-hidden-{name}"));
            let proj = fx.home.join("proj");
            std::fs::create_dir_all(&proj).unwrap();
            std::fs::write(fx.home.join("notes.txt"), "SECRET-NOTES\n").unwrap();
            std::fs::write(fx.home.join(".gitconfig"), "[user]\n\tname = Jail Test\n").unwrap();
            fx.give_to(who);
            let proj = proj.to_string_lossy().into_owned();
            let script = format!(
                "{bin} {args}; echo \"rc=$?\"; cat ~/notes.txt || echo NOTES-HIDDEN; \
                 git config user.name"
            );
            let run = fx.jail_with(
                &[
                    "--profile",
                    profile,
                    "--timeout",
                    "120s",
                    "--ro",
                    &proj,
                    "--cwd",
                    &proj,
                    "--",
                    "sh",
                    "-c",
                    &script,
                ],
                &[],
                &[
                    ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
                    ("DISABLE_TELEMETRY", "1"),
                ],
            );
            let all = format!("{}{}", run.stdout, run.stderr);
            assert!(
                all.contains(needle)
                    && run.stdout.contains("rc=0")
                    && run.stdout.contains("NOTES-HIDDEN")
                    && !run.stdout.contains("SECRET-NOTES")
                    && run.stdout.contains("Jail Test"),
                "{profile} as {who:?}:\n{}",
                run.describe()
            );
        }
    }
}

/// Each agent profile keeps its provider's key outside when the network goes through the proxy
/// (`--net allow=` its API host): the real CLI still runs its offline command with the key
/// declared, and what it sees in the variable is the placeholder, not the value.
#[test]
#[cfg_attr(
    not(jail_test_agents),
    ignore = "needs the real agent CLIs: set JAIL_TEST_AGENTS=1 (see .ci/run)"
)]
fn every_agent_runs_with_its_key_kept_outside() {
    if !full_level_or_skip("agents-secrets") {
        return;
    }
    // (profile, program, offline command, what it prints, the key, the key's API host)
    let agents = [
        (
            "opencode",
            "opencode",
            "agent list",
            "build",
            "ANTHROPIC_API_KEY",
            "api.anthropic.com",
        ),
        (
            "claude-code",
            "claude",
            "mcp list",
            "MCP",
            "ANTHROPIC_API_KEY",
            "api.anthropic.com",
        ),
        (
            "codex",
            "codex",
            "mcp list",
            "MCP",
            "OPENAI_API_KEY",
            "api.openai.com",
        ),
        (
            "gemini-cli",
            "gemini",
            "mcp list",
            "MCP",
            "GEMINI_API_KEY",
            "generativelanguage.googleapis.com",
        ),
        (
            "aider",
            "aider",
            "--version",
            "aider",
            "OPENROUTER_API_KEY",
            "openrouter.ai",
        ),
    ];
    let value = "sk-agentkey-5d1e9b7c3a2f4860";
    for (profile, name, args, needle, key, host) in agents {
        let Some(bin) = agent(name) else { continue };
        for who in users() {
            let fx = Fixture::new(who, &format!("agent-secret-{name}"));
            project(&fx);
            fx.give_to(who);
            let repo = fx.p("repo");
            let allow = format!("allow={host}");
            let script = format!("{bin} {args}; echo \"rc=$?\"; echo \"key=${key}\"");
            let run = fx.jail_with(
                &[
                    "--profile",
                    profile,
                    "--timeout",
                    "120s",
                    "--net",
                    &allow,
                    "--ro",
                    &repo,
                    "--cwd",
                    &repo,
                    "--",
                    "sh",
                    "-c",
                    &script,
                ],
                &[],
                &[
                    (key, value),
                    ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
                    ("DISABLE_TELEMETRY", "1"),
                ],
            );
            let all = format!("{}{}", run.stdout, run.stderr);
            assert!(
                all.contains(needle)
                    && run.stdout.contains("rc=0")
                    && run.stdout.contains("key=jail-placeholder-")
                    && !all.contains(value),
                "{profile} as {who:?} with {key} kept outside:\n{}",
                run.describe()
            );
        }
    }
}
