//! What a command can read of HOME under every shipped profile (issue 34, items 1 and 2): the
//! agents' own logins, the other credentials of the common developer tools, the shell start-up
//! files, and what a PATH entry in HOME shows of its tool's directory. The homes are hidden by
//! default: a file no list names is unreadable too. The agent a run is (its profile, or a
//! command of its name) gets its own login and no other's. As root and as an unprivileged user,
//! with every layer, and with the mount view or Landlock alone.

mod common;

use common::{Attack, Fixture, Layer, Who, full_level_or_skip, users};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use Layer::{Landlock as L, Mount as M};

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Credential files in HOME, with the profile of the agent each belongs to (its login, given to
/// that agent only). Spelled out here, not read from the profiles: a login dropped from a
/// profile, or a default that shows HOME again, fails this test.
const CREDENTIALS: &[(&str, Option<&str>)] = &[
    // The agents jail is built for.
    (".claude/.credentials.json", Some("claude-code")),
    (".claude.json", Some("claude-code")),
    (".codex/auth.json", Some("codex")),
    (".codex/.env", Some("codex")),
    (".gemini/oauth_creds.json", Some("gemini-cli")),
    (".gemini/google_accounts.json", Some("gemini-cli")),
    (".local/share/opencode/auth.json", Some("opencode")),
    (".local/share/opencode/mcp-auth.json", Some("opencode")),
    (".aider/oauth-keys.env", Some("aider")),
    // Agents without a profile here.
    (".config/github-copilot/apps.json", None),
    (".config/github-copilot/hosts.json", None),
    (".copilot/config.json", None),
    (".qwen/oauth_creds.json", None),
    (".cursor/cli-config.json", None),
    (".config/goose/secrets.yaml", None),
    // Shell start-up files, which often export tokens.
    (".bashrc", None),
    (".zshrc", None),
    (".profile", None),
    (".bash_profile", None),
    (".zshenv", None),
    (".config/fish/config.fish", None),
    // Cloud CLIs.
    (".aws/credentials", None),
    (".config/gcloud/application_default_credentials.json", None),
    (".azure/msal_token_cache.json", None),
    (".oci/config", None),
    (".kube/config", None),
    (".config/doctl/config.yaml", None),
    // Package registries.
    (".npmrc", None),
    (".pypirc", None),
    (".cargo/credentials.toml", None),
    (".gem/credentials", None),
    (".m2/settings.xml", None),
    (".gradle/gradle.properties", None),
    (".nuget/NuGet/NuGet.Config", None),
    (".config/pip/pip.conf", None),
    (".yarnrc.yml", None),
    // Git hosts.
    (".config/gh/hosts.yml", None),
    (".git-credentials", None),
    (".config/glab-cli/config.yml", None),
    (".config/hub", None),
    // Container registries.
    (".docker/config.json", None),
    (".config/containers/auth.json", None),
    // What no list names: another project's .env, a tool nobody has heard of.
    ("work/other/.env", None),
    (".config/some-new-tool/token.json", None),
    ("notes.txt", None),
];

/// The files of [`CREDENTIALS`] no list names: readable only with `--home visible`.
const UNLISTED: &[&str] = &[
    "work/other/.env",
    ".config/some-new-tool/token.json",
    "notes.txt",
];

/// Every profile that ships.
const PROFILES: &[&str] = &[
    "default",
    "review",
    "workspace",
    "ci",
    "claude-code",
    "codex",
    "gemini-cli",
    "opencode",
    "aider",
];

/// A fixture whose HOME holds every credential file, each with `SECRET <name>` in it.
fn credentials_fixture(who: Who, name: &str) -> Fixture {
    let fx = Fixture::new(who, name);
    for (rel, _) in CREDENTIALS {
        let p = fx.home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("SECRET {rel}\n")).unwrap();
    }
    fx.give_to(who);
    fx
}

/// `sh -c` that prints `ALLOWED <rel>` for each credential file it could read (the attack
/// helper's protocol: `BLOCKED` and exit 1 when it read none).
fn read_every_credential(fx: &Fixture) -> String {
    let list: Vec<String> = CREDENTIALS
        .iter()
        .map(|(rel, _)| format!("'{}'", s(&fx.home.join(rel))))
        .collect();
    format!(
        "n=0; for f in {}; do if grep -q SECRET \"$f\" 2>/dev/null; then echo \"ALLOWED $f\"; \
         n=$((n+1)); fi; done; [ $n -gt 0 ] || {{ echo 'BLOCKED all'; exit 1; }}",
        list.join(" ")
    )
}

/// The credential files a run read, relative to HOME.
fn read_in(fx: &Fixture, stdout: &str) -> Vec<String> {
    let home = format!("{}/", s(&fx.home));
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ALLOWED "))
        .filter_map(|p| p.strip_prefix(&home))
        .map(str::to_string)
        .collect()
}

/// jail `args` run from `dir` (the project, as a user runs it: `workspace` makes `${CWD}`
/// writable), with `disabled` layers off and `env` added.
fn jail_in(
    fx: &Fixture,
    dir: &Path,
    args: &[&str],
    disabled: &[Layer],
    env: &[(&str, &str)],
) -> common::Run {
    // `ci` requires every layer: a run with one off asks for less.
    let mut all: Vec<&str> = Vec::new();
    if !disabled.is_empty() {
        all.extend(["--require", "any"]);
    }
    all.extend(args);
    let mut cmd = fx.command(common::jail_bin(), &all);
    let list: Vec<&str> = disabled.iter().map(|l| l.name()).collect();
    cmd.current_dir(dir)
        .env("JAIL_TEST_DISABLE", list.join(","));
    for (k, v) in env {
        cmd.env(k, v);
    }
    common::Run::from(cmd.output().expect("run jail"))
}

/// The logins of `agent_profile` in [`CREDENTIALS`].
fn logins_of(agent_profile: Option<&str>) -> Vec<String> {
    CREDENTIALS
        .iter()
        .filter(|(_, owner)| owner.is_some() && *owner == agent_profile)
        .map(|(rel, _)| rel.to_string())
        .collect()
}

/// Under every profile, with every layer and with each layer alone, a shell reads no credential
/// file but the logins of the profile's own agent.
#[test]
fn every_profile_shows_no_credential_but_its_own_agents_login() {
    if !full_level_or_skip("every_profile_shows_no_credential_but_its_own_agents_login") {
        return;
    }
    for who in users() {
        let fx = credentials_fixture(who, "logins");
        let script = read_every_credential(&fx);
        let repo = fx.p("repo");
        for profile in PROFILES {
            let own = logins_of(Some(profile));
            for disabled in [&[][..], &[M], &[L]] {
                let run = jail_in(
                    &fx,
                    &fx.repo,
                    &["--profile", profile, "--", "/bin/sh", "-c", &script],
                    disabled,
                    &[],
                );
                assert!(
                    run.code == Some(0) || run.code == Some(1),
                    "{profile} as {who:?} with {disabled:?} off\n{}",
                    run.describe()
                );
                assert_eq!(
                    read_in(&fx, &run.stdout),
                    own,
                    "{profile} as {who:?} with {disabled:?} off: read more (or less) than its \
                     own agent's login\n{}",
                    run.describe()
                );
            }
        }
        // With the homes visible (asked for), the hide list and the agents' logins still hold:
        // only what no list names is read.
        for profile in ["default", "review", "claude-code"] {
            let run = jail_in(
                &fx,
                &fx.repo,
                &[
                    "--profile",
                    profile,
                    "--home",
                    "visible",
                    "--",
                    "/bin/sh",
                    "-c",
                    &script,
                ],
                &[],
                &[],
            );
            let mut want = logins_of(Some(profile));
            want.extend(UNLISTED.iter().map(|u| u.to_string()));
            assert_eq!(
                read_in(&fx, &run.stdout),
                want,
                "{profile} --home visible as {who:?}\n{}",
                run.describe()
            );
        }
        // And the rule can fail: with both layers off every file is read.
        Attack::new(
            "read the credentials under review",
            &["--profile", "review", "--cwd", &repo],
            vec!["/bin/sh".into(), "-c".into(), script.clone()],
            &[M, L],
        )
        .prove(&fx);
        let open = fx.jail_with(
            &[
                "--profile",
                "review",
                "--cwd",
                &repo,
                "--allow-unconfined",
                "--",
                "/bin/sh",
                "-c",
                &script,
            ],
            &[M, L],
            &[],
        );
        assert_eq!(
            read_in(&fx, &open.stdout).len(),
            CREDENTIALS.len(),
            "without the layers every file is readable\n{}",
            open.describe()
        );
    }
}

/// A command named after an agent, run under a profile that is no agent's (a reviewer running
/// `claude`), signs in with its own login, read-only, and reads no other agent's.
#[test]
fn a_command_named_after_an_agent_gets_its_own_login_and_no_other() {
    if !full_level_or_skip("a_command_named_after_an_agent_gets_its_own_login_and_no_other") {
        return;
    }
    for who in users() {
        let fx = credentials_fixture(who, "own-login");
        let bin = fx.scratch.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let script = read_every_credential(&fx);
        for (program, profile) in [
            ("claude", "claude-code"),
            ("codex", "codex"),
            ("gemini", "gemini-cli"),
            ("opencode", "opencode"),
            ("aider", "aider"),
        ] {
            // The agent's program: reads what it can, then tries to change its own login.
            let login = fx.home.join(&logins_of(Some(profile))[0]);
            std::fs::write(
                bin.join(program),
                format!(
                    "#!/bin/sh\n{script}\nif echo x >> '{}' 2>/dev/null; then echo WROTE-LOGIN; fi\n",
                    s(&login)
                ),
            )
            .unwrap();
            std::fs::set_permissions(bin.join(program), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        fx.give_to(who);
        let path = format!("{}:/usr/bin:/bin", s(&bin));
        for (program, profile) in [
            ("claude", "claude-code"),
            ("codex", "codex"),
            ("gemini", "gemini-cli"),
            ("opencode", "opencode"),
            ("aider", "aider"),
        ] {
            for under in ["review", "default", "ci"] {
                let run = jail_in(
                    &fx,
                    &fx.repo,
                    &["--profile", under, "--", program],
                    &[],
                    &[("PATH", path.as_str())],
                );
                assert_eq!(
                    read_in(&fx, &run.stdout),
                    logins_of(Some(profile)),
                    "{program} under {under} as {who:?}\n{}",
                    run.describe()
                );
                assert!(
                    !run.stdout.contains("WROTE-LOGIN"),
                    "{program} under {under} as {who:?}: its login is read-only there\n{}",
                    run.describe()
                );
            }
        }
    }
}

/// A PATH directory in HOME shows its programs and what they load, not its tool's
/// configuration: npm's global prefix keeps `etc/npmrc` (an `_authToken`) hidden, cargo's home
/// its `config.toml` (a registry token), nvm's node prefix its `etc/npmrc`, a pyenv version
/// its `pip.conf`; the programs still run. Under every profile, each layer alone.
#[test]
fn a_path_entry_shows_its_programs_not_its_tools_configuration() {
    if !full_level_or_skip("a_path_entry_shows_its_programs_not_its_tools_configuration") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "path-entry");
        let h = |rel: &str| fx.home.join(rel);
        let files: &[(&str, &str)] = &[
            (
                ".npm-global/bin/tool",
                "#!/bin/sh\ncat \"$(dirname \"$0\")/../lib/node_modules/tool/index.js\"\n",
            ),
            (".npm-global/lib/node_modules/tool/index.js", "TOOL-RAN\n"),
            (
                ".npm-global/etc/npmrc",
                "//registry/:_authToken=SECRET-NPM\n",
            ),
            (".cargo/bin/cargo-tool", "#!/bin/sh\necho CARGO-TOOL-RAN\n"),
            (
                ".cargo/config.toml",
                "[registry]\ntoken = \"SECRET-CARGO\"\n",
            ),
            (
                ".cargo/env",
                "export CARGO_REGISTRY_TOKEN=SECRET-CARGO-ENV\n",
            ),
            (
                ".nvm/versions/node/v22/bin/nodeish",
                "#!/bin/sh\necho NODE-RAN\n",
            ),
            (
                ".nvm/versions/node/v22/etc/npmrc",
                "_authToken=SECRET-NVM-NPMRC\n",
            ),
            (".nvm/alias/default", "SECRET-NOT-NEEDED\n"),
            (".tool/bin/t2", "#!/bin/sh\necho T2-RAN\n"),
            (".tool/settings.json", "{\"token\": \"SECRET-TOOL\"}\n"),
            (".tool/conf/auth", "SECRET-TOOL-CONF\n"),
        ];
        for (rel, content) in files {
            std::fs::create_dir_all(h(rel).parent().unwrap()).unwrap();
            std::fs::write(h(rel), content).unwrap();
            if rel.contains("/bin/") {
                std::fs::set_permissions(h(rel), std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        fx.give_to(who);
        let path = [
            ".npm-global/bin",
            ".cargo/bin",
            ".nvm/versions/node/v22/bin",
            ".tool/bin",
        ]
        .iter()
        .map(|d| s(&h(d)))
        .chain(["/usr/bin".into(), "/bin".into()])
        .collect::<Vec<_>>()
        .join(":");
        let secrets: Vec<String> = files
            .iter()
            .filter(|(_, c)| c.contains("SECRET"))
            .map(|(rel, _)| format!("'{}'", s(&h(rel))))
            .collect();
        let script = format!(
            "tool && cargo-tool && nodeish && t2 && echo PROGRAMS-RAN; \
             n=0; for f in {}; do if grep -q SECRET \"$f\" 2>/dev/null; then echo \"ALLOWED $f\"; \
             n=$((n+1)); fi; done; [ $n -gt 0 ] || {{ echo 'BLOCKED all'; exit 1; }}",
            secrets.join(" ")
        );
        for profile in PROFILES {
            for disabled in [&[][..], &[M], &[L]] {
                let run = jail_in(
                    &fx,
                    &fx.repo,
                    &["--profile", profile, "--", "/bin/sh", "-c", &script],
                    disabled,
                    &[("PATH", path.as_str())],
                );
                assert!(
                    run.stdout
                        .contains("TOOL-RAN\nCARGO-TOOL-RAN\nNODE-RAN\nT2-RAN\nPROGRAMS-RAN")
                        && run.stdout.contains("BLOCKED all")
                        && !run.stdout.contains("ALLOWED"),
                    "{profile} as {who:?} with {disabled:?} off: a PATH entry showed its tool's \
                     configuration, or a program did not run\n{}",
                    run.describe()
                );
            }
        }
        // The widening is named in --dry-run, each place with why it is shown.
        let run = fx.jail_with(
            &["--cwd", &fx.p("repo"), "--dry-run", "--", "tool"],
            &[],
            &[("PATH", path.as_str())],
        );
        let lib = s(&h(".npm-global/lib"));
        assert!(
            run.stdout.contains(&lib)
                && run.stdout.contains(&format!(
                    "what the programs of {} load",
                    s(&h(".npm-global/bin"))
                )),
            "as {who:?}: --dry-run names the shown prefix directory and why\n{}",
            run.describe()
        );
        assert!(
            !run.stdout
                .contains(&format!("\"{}\"", s(&h(".npm-global/etc")))),
            "{}",
            run.describe()
        );
        // The rule can fail: with the layers off the configuration is read.
        Attack::new(
            "read a PATH entry's tool configuration",
            &["--cwd", &fx.p("repo")],
            vec!["/bin/sh".into(), "-c".into(), script.clone()],
            &[M, L],
        )
        .with_env("PATH", &path)
        .prove(&fx);
    }
}

/// Nothing the run can write, nor the project, decides what is shown of a home (red-team
/// findings of issue 34): a link in a project directory on PATH to a secret, to a program
/// outside a program directory or to a directory; a venv in the project whose `pyvenv.cfg`
/// names a directory of secrets; a non-executable `python3` ahead on PATH; an agent's login
/// replaced by a link to a secret. Two venvs naming each other do not crash jail, and a FIFO
/// named as the command does not stall it.
#[test]
fn the_project_and_what_the_run_writes_steer_nothing_shown_of_home() {
    if !full_level_or_skip("the_project_and_what_the_run_writes_steer_nothing_shown_of_home") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "steer");
        let h = |rel: &str| fx.home.join(rel);
        let proj = h("work/proj");
        let files: &[(&str, &str, u32)] = &[
            ("private/secret.txt", "SECRET private\n", 0o644),
            ("private/run.sh", "#!/bin/sh\necho SECRET run\n", 0o755),
            ("work/other/.env", "SECRET other\n", 0o644),
            (".config/some-new-tool/token.json", "SECRET tool\n", 0o644),
            (".codex/auth.json", "SECRET codex\n", 0o600),
            ("work/proj/.venv/pyvenv.cfg", "", 0o644),
            (
                "work/proj/.venv/bin/pytest",
                "#!/bin/sh\nexec \"$READALL\"\n",
                0o755,
            ),
            ("work/proj/v2/pyvenv.cfg", "", 0o644),
            ("work/proj/v2/bin/x", "#!/bin/sh\n", 0o755),
            // Another project's program, outside any program directory.
            ("work/other/tool", "#!/bin/sh\nexec \"$READALL\"\n", 0o755),
        ];
        for (rel, content, mode) in files {
            std::fs::create_dir_all(h(rel).parent().unwrap()).unwrap();
            std::fs::write(h(rel), content).unwrap();
            std::fs::set_permissions(h(rel), std::fs::Permissions::from_mode(*mode)).unwrap();
        }
        // Two venvs naming each other's interpreter, the first also a directory of secrets.
        std::fs::write(
            h("work/proj/.venv/pyvenv.cfg"),
            format!("home = {}\n", s(&h("private"))),
        )
        .unwrap();
        std::fs::write(
            h("work/proj/v2/pyvenv.cfg"),
            format!("home = {}\n", s(&h("work/proj/.venv/bin"))),
        )
        .unwrap();
        let bin = proj.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for (name, target) in [
            ("fmt", "private/secret.txt"),
            ("runner", "private/run.sh"),
            ("dotenv", "work/other/.env"),
            ("tooldir", ".config/some-new-tool"),
            ("python3", "private/secret.txt"),
        ] {
            std::os::unix::fs::symlink(h(target), bin.join(name)).unwrap();
        }
        // The project's own link as a PATH entry, and a script naming another project's
        // program as its interpreter.
        std::os::unix::fs::symlink(h("work/other"), proj.join("linkbin")).unwrap();
        std::fs::write(
            proj.join("run2.sh"),
            format!("#!{}\n", s(&h("work/other/tool"))),
        )
        .unwrap();
        std::fs::set_permissions(proj.join("run2.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let readall = fx.dir.join("readall");
        let secrets = [
            "private/secret.txt",
            "private/run.sh",
            "work/other/.env",
            ".config/some-new-tool/token.json",
        ];
        let list: Vec<String> = secrets.iter().map(|r| format!("'{}'", s(&h(r)))).collect();
        std::fs::write(
            &readall,
            format!(
                "#!/bin/sh\nfor f in {}; do if grep -q SECRET \"$f\" 2>/dev/null; then echo \"READ $f\"; fi; done\necho DONE\n",
                list.join(" ")
            ),
        )
        .unwrap();
        std::fs::set_permissions(&readall, std::fs::Permissions::from_mode(0o755)).unwrap();
        // An agent's login replaced by a link to a secret (its state is writable to it).
        std::fs::remove_file(h(".codex/auth.json")).unwrap();
        std::os::unix::fs::symlink(h("private/secret.txt"), h(".codex/auth.json")).unwrap();
        std::fs::copy(&readall, bin.join("codex")).unwrap();
        fx.give_to(who);
        let path = format!(
            "{}:{}:{}:{}:/usr/bin:/bin",
            s(&proj.join("linkbin")),
            s(&bin),
            s(&proj.join(".venv/bin")),
            s(&proj.join("v2/bin"))
        );
        let readall_s = s(&readall);
        let env = [("PATH", path.as_str()), ("READALL", readall_s.as_str())];
        for profile in ["default", "review", "workspace"] {
            for disabled in [&[][..], &[M]] {
                for command in [
                    vec![readall_s.as_str()],
                    vec!["pytest"],
                    vec![
                        "python3",
                        "-c",
                        "import subprocess,os; subprocess.run([os.environ['READALL']])",
                    ],
                    vec!["codex"],
                    vec!["./run2.sh"],
                ] {
                    let mut args = vec!["--profile", profile, "--"];
                    args.extend(command.iter().copied());
                    let run = jail_in(&fx, &proj, &args, disabled, &env);
                    // (run2.sh's interpreter stays out of sight: it does not run at all.)
                    assert!(
                        (run.stdout.contains("DONE") || command == ["./run2.sh"])
                            && !run.stdout.contains("READ "),
                        "{profile} {command:?} as {who:?} with {disabled:?} off: the project \
                         steered what is shown of HOME\n{}",
                        run.describe()
                    );
                }
            }
        }
        // With the layers off the secrets are there to read: the test can fail.
        let open = jail_in(
            &fx,
            &proj,
            &["--allow-unconfined", "--", &readall_s],
            &[M, L],
            &env,
        );
        assert_eq!(
            open.stdout.matches("READ ").count(),
            4,
            "{}",
            open.describe()
        );
        // A FIFO named as the command: jail does not wait on it.
        let fifo = proj.join("gradlew");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        fx.give_to(who);
        let jail = s(common::jail_bin());
        let mut cmd = fx.command(
            Path::new("/usr/bin/timeout"),
            &["60", &jail, "--", "./gradlew"],
        );
        cmd.current_dir(&proj);
        let run = common::Run::from(cmd.output().unwrap());
        assert_ne!(
            run.code,
            Some(124),
            "a FIFO stalled the launch\n{}",
            run.describe()
        );
    }
}
