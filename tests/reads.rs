//! What a jailed command may read: the default hide list (histories, password stores, keyrings,
//! browser profiles, more credentials), and `--home hidden`, where every home directory is hidden
//! but the paths the run names. As root and as an unprivileged user; each rule proven by each
//! layer that claims it and shown to fail without it.

mod common;

use common::{Attack, Fixture, Layer, Who, attack_bin, full_level_or_skip, users};
use std::path::{Path, PathBuf};

use Layer::{Landlock as L, Mount as M};

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// `'text'` for sh.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// What no agent may read in HOME under the default profile (issue 11, item 6): histories,
/// environment files, password stores, keyrings, browser, mail and chat profiles, and the
/// credentials of cloud and registry CLIs. Spelled out here, not read from the profile, so that
/// an entry dropped from profiles/default.toml fails this test.
const MUST_HIDE: &[&str] = &[
    ".config/git/credentials",
    ".pgpass",
    ".my.cnf",
    ".mylogin.cnf",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".pulumi/credentials.json",
    ".config/doctl",
    ".config/hcloud",
    ".config/linode-cli",
    ".oci",
    ".aliyun",
    ".bluemix",
    ".fly",
    ".config/.wrangler",
    ".wrangler",
    ".cloudflared",
    ".config/netlify",
    ".local/share/com.vercel.cli",
    ".supabase",
    ".config/stripe",
    ".config/ngrok",
    ".ngrok2",
    ".config/hub",
    ".config/glab-cli",
    ".config/configstore",
    ".config/containers/auth.json",
    ".config/rclone",
    ".s3cfg",
    ".boto",
    ".databrickscfg",
    ".dbt/profiles.yml",
    ".snowsql",
    ".kaggle",
    ".huggingface",
    ".cache/huggingface/token",
    ".gem/credentials",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".config/composer/auth.json",
    ".composer/auth.json",
    ".minikube",
    ".config/sops",
    ".config/age",
    ".env",
    ".env.local",
    ".envrc",
    ".password-store",
    ".local/share/gopass",
    ".config/gopass",
    ".keepass",
    ".keepassx",
    ".config/keepassxc",
    ".config/KeePass",
    ".config/Bitwarden",
    ".config/Bitwarden CLI",
    ".config/1Password",
    ".config/op",
    ".local/share/keyrings",
    ".local/share/kwalletd",
    ".kde/share/apps/kwallet",
    ".bash_history",
    ".zsh_history",
    ".zhistory",
    ".histfile",
    ".sh_history",
    ".local/share/fish/fish_history",
    ".local/share/atuin",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".rediscli_history",
    ".dbshell",
    ".mongodb",
    ".irb_history",
    ".pry_history",
    ".Rhistory",
    ".julia/logs/repl_history.jl",
    ".ipython/profile_default/history.sqlite",
    ".lesshst",
    ".viminfo",
    ".local/state/nvim/shada",
    ".local/share/nvim/shada",
    ".mozilla",
    ".librewolf",
    ".waterfox",
    ".thunderbird",
    ".config/google-chrome",
    ".config/google-chrome-beta",
    ".config/google-chrome-unstable",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/microsoft-edge-beta",
    ".config/microsoft-edge-dev",
    ".config/vivaldi",
    ".config/opera",
    ".var/app/org.mozilla.firefox",
    ".var/app/org.mozilla.Thunderbird",
    ".var/app/io.gitlab.librewolf-community",
    ".var/app/com.google.Chrome",
    ".var/app/org.chromium.Chromium",
    ".var/app/com.brave.Browser",
    ".var/app/com.microsoft.Edge",
    "snap/firefox",
    "snap/chromium",
    "snap/thunderbird",
    ".config/Slack",
    ".config/discord",
    ".config/Signal",
    ".local/share/TelegramDesktop",
];

/// MUST_HIDE and every other `~/` entry of the shipped hide list.
fn default_hidden_in_home() -> Vec<String> {
    let text = include_str!("../profiles/default.toml");
    let doc: toml::Value = toml::from_str(text).unwrap();
    let mut names: Vec<String> = MUST_HIDE.iter().map(|n| n.to_string()).collect();
    for v in doc["paths"]["hide"].as_array().unwrap() {
        if let Some(name) = v.as_str().and_then(|v| v.strip_prefix("~/")) {
            if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
    }
    names
}

/// A shell script that tries to read each file and prints `ALLOWED path` for each it could
/// read; `BLOCKED` and exit 1 when it read none (the attack helper's protocol).
fn read_each(files: &[PathBuf]) -> Vec<String> {
    let list: Vec<String> = files.iter().map(|f| quote(&s(f))).collect();
    let script = format!(
        "n=0; for f in {}; do if grep -q SECRET \"$f\" 2>/dev/null; then echo \"ALLOWED $f\"; \
         n=$((n+1)); fi; done; [ $n -gt 0 ] || {{ echo 'BLOCKED all'; exit 1; }}",
        list.join(" ")
    );
    vec!["/bin/sh".into(), "-c".into(), script]
}

#[test]
fn each_name_on_the_default_hide_list_is_unreadable() {
    if !full_level_or_skip("hide-list") {
        return;
    }
    let names = default_hidden_in_home();
    assert!(names.len() > 100, "the list is read: {}", names.len());
    for who in users() {
        let fx = Fixture::new(who, "hide-list");
        // Every entry made real, as a file or (every other one, and any that holds another
        // entry) as a directory with a secret in it; the fixture's own secrets are kept.
        let mut secrets = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let path = fx.home.join(name);
            if path.exists() {
                continue;
            }
            let holds_another = names.iter().any(|o| o.starts_with(&format!("{name}/")));
            let file = if i % 2 == 1 || holds_another {
                std::fs::create_dir_all(&path).unwrap();
                path.join("secret")
            } else {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                path.clone()
            };
            std::fs::write(&file, format!("SECRET {name}\n")).unwrap();
            secrets.push(file);
        }
        fx.give_to(who);
        let attack = Attack::new(
            "read every default-hidden name",
            &["--ro", &fx.p("repo")],
            read_each(&secrets),
            &[M, L],
        );
        attack.prove(&fx);
        // With both layers off every one of them is read: each entry is tested by its rule.
        let open = fx.jail_with(
            &[
                &["--allow-unconfined", "--"][..],
                &attack.argv.iter().map(String::as_str).collect::<Vec<_>>(),
            ]
            .concat(),
            &[M, L],
            &[],
        );
        assert_eq!(
            open.stdout.matches("ALLOWED ").count(),
            secrets.len(),
            "as {who:?}: not every planted secret is readable without the layers\n{}",
            open.describe()
        );
    }
}

fn a() -> String {
    attack_bin().to_string_lossy().into_owned()
}

/// The same read three ways: the C helper, `cat` and Python's open().
fn reads_of(name: &str, file: &Path, flags: &[&str]) -> Vec<Attack> {
    let f = s(file);
    let q = quote(&f);
    vec![
        Attack::new(
            &format!("{name} (C)"),
            flags,
            vec![a(), "read".into(), f.clone()],
            &[M, L],
        ),
        Attack::new(
            &format!("{name} (cat)"),
            flags,
            vec![
                "/bin/sh".into(),
                "-c".into(),
                format!("cat {q} && echo 'ALLOWED cat' || {{ echo 'BLOCKED cat'; exit 1; }}"),
            ],
            &[M, L],
        ),
        Attack::new(
            &format!("{name} (python)"),
            flags,
            vec![
                "/usr/bin/python3".into(),
                "-c".into(),
                format!(
                    "import sys\ntry:\n    open({q}).read()\n    print('ALLOWED python')\n\
                     except OSError as e:\n    print('BLOCKED python', e)\n    sys.exit(1)"
                ),
            ],
            &[M, L],
        ),
    ]
}

/// A project in HOME, and beside it a file and another project's .env that nothing names.
fn home_fixture(who: Who, name: &str) -> Fixture {
    let fx = Fixture::new(who, name);
    plant(
        &fx.home,
        &[
            ("proj/file.txt", "PROJECT\n"),
            ("notes.txt", "SECRET-NOTES\n"),
            ("other/.env", "SECRET-OTHER-ENV\n"),
        ],
    );
    fx.give_to(who);
    fx
}

/// Writes each (relative path, content) under `dir`, with the directories on the way.
fn plant(dir: &Path, files: &[(&str, &str)]) {
    for (rel, content) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
}

#[test]
fn a_home_file_outside_the_allow_list_is_unreadable() {
    if !full_level_or_skip("home-hidden") {
        return;
    }
    for who in users() {
        let fx = home_fixture(who, "home-hidden");
        let proj = s(&fx.home.join("proj"));
        let flags = [
            "--home",
            "hidden",
            "--ro",
            proj.as_str(),
            "--cwd",
            proj.as_str(),
        ];
        let mut attacks = reads_of("read ~/notes.txt", &fx.home.join("notes.txt"), &flags);
        attacks.extend(reads_of(
            "read another project's .env",
            &fx.home.join("other/.env"),
            &flags,
        ));
        for attack in attacks {
            attack.prove(&fx);
        }
        // What HOME shows in the mount view: only the shown project. (Under Landlock alone
        // the names stay listable, the named gap of every hidden path without the view.)
        let home = s(&fx.home);
        let args = [&flags[..], &["--", "ls", "-A", &home]].concat();
        let run = fx.jail_with(&args, &[L], &[]);
        assert_eq!(run.stdout, "proj\n", "as {who:?}: {}", run.describe());
    }
}

/// A directory in /home owned by nobody in particular, readable by everyone, removed after.
struct OtherHome(PathBuf);

impl OtherHome {
    fn new() -> OtherHome {
        use std::os::unix::fs::PermissionsExt;
        let dir = PathBuf::from(format!("/home/jail-reads-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("secret"), "SECRET-OTHER-USER\n").unwrap();
        for (p, mode) in [(dir.clone(), 0o755), (dir.join("secret"), 0o644)] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        OtherHome(dir)
    }
}

impl Drop for OtherHome {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_file_in_another_users_home_is_unreadable() {
    if !full_level_or_skip("other-home") {
        return;
    }
    if !common::is_root() {
        eprintln!("skipping other-home: only root can make a home under /home");
        return;
    }
    let other = OtherHome::new();
    for who in users() {
        let fx = Fixture::new(who, "other-home");
        let flags = ["--home", "hidden", "--ro", &fx.p("repo")];
        let flags: Vec<&str> = flags.iter().map(|f| f.as_ref()).collect();
        for attack in reads_of("read /home/OTHER/secret", &other.0.join("secret"), &flags) {
            attack.prove(&fx);
        }
    }
}

/// A user profile (in $XDG_CONFIG_HOME/jail/profiles, here outside HOME) that turns the mode on
/// and names a read-only and a writable path in HOME.
fn profile_dir(fx: &Fixture) -> String {
    let dir = fx.dir.join("cfg/jail/profiles");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("hidden-home.toml"),
        "extends = [\"default\"]\n[paths]\nro = [\"~/.config/tool\"]\nrw = [\"~/state\"]\n\
         [options]\nhome = \"hidden\"\n",
    )
    .unwrap();
    plant(
        &fx.home,
        &[
            (".config/tool/conf", "TOOL-CONF\n"),
            ("state/keep", "STATE\n"),
            ("bin/hello", "#!/bin/sh\necho HELLO-FROM-HOME-BIN\n"),
        ],
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        fx.home.join("bin/hello"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    s(&fx.dir.join("cfg"))
}

#[test]
fn the_project_the_profiles_paths_and_path_programs_stay_reachable() {
    if !full_level_or_skip("home-allowed") {
        return;
    }
    for who in users() {
        let fx = home_fixture(who, "home-allowed");
        let cfg = profile_dir(&fx);
        let proj = fx.home.join("proj");
        let out = fx
            .command("git".as_ref(), &["init", "-q", &s(&proj)])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        fx.give_to(who);
        let path = format!("{}:/usr/bin:/bin", s(&fx.home.join("bin")));
        let env = [("XDG_CONFIG_HOME", cfg.as_str()), ("PATH", path.as_str())];
        let script = "cat file.txt ~/.config/tool/conf ~/state/keep && hello \
                      && echo new > written && echo more >> ~/state/keep \
                      && ! cat ~/notes.txt 2>/dev/null && ! touch .git/hooks/pre-commit 2>/dev/null \
                      && echo ALL-GOOD";
        let proj = s(&proj);
        for disabled in [&[][..], &[L], &[M]] {
            let run = fx.jail_with(
                &[
                    "--profile",
                    "hidden-home",
                    "--rw",
                    &proj,
                    "--cwd",
                    &proj,
                    "--",
                    "sh",
                    "-c",
                    script,
                ],
                disabled,
                &env,
            );
            assert!(
                run.stdout
                    .contains("PROJECT\nTOOL-CONF\nSTATE\nHELLO-FROM-HOME-BIN\n")
                    && run.stdout.contains("ALL-GOOD")
                    && run.ok(),
                "as {who:?} with {disabled:?} off\n{}",
                run.describe()
            );
            assert_eq!(
                std::fs::read_to_string(fx.home.join("proj/written")).unwrap(),
                "new\n"
            );
            std::fs::write(fx.home.join("state/keep"), "STATE\n").unwrap();
            assert!(!fx.home.join("proj/.git/hooks/pre-commit").exists());
        }
        // The working directory in HOME is shown (read-only) when no flag names it.
        let run = fx.jail_with(
            &[
                "--profile",
                "hidden-home",
                "--cwd",
                &proj,
                "--",
                "sh",
                "-c",
                "cat file.txt; cat ~/notes.txt",
            ],
            &[],
            &env,
        );
        assert!(
            run.stdout == "PROJECT\n" && run.code == Some(1),
            "as {who:?}\n{}",
            run.describe()
        );
        // --home visible on the command line beats the profile.
        let run = fx.jail_with(
            &[
                "--profile",
                "hidden-home",
                "--home",
                "visible",
                "--",
                "cat",
                &s(&fx.home.join("notes.txt")),
            ],
            &[],
            &env,
        );
        assert_eq!(
            run.stdout,
            "SECRET-NOTES\n",
            "as {who:?}\n{}",
            run.describe()
        );
    }
}

#[test]
fn the_read_mode_is_named_by_dry_run_probe_status_and_notice() {
    if !full_level_or_skip("home-mode-shown") {
        return;
    }
    let fx = home_fixture(Who::User, "home-mode-shown");
    let proj = s(&fx.home.join("proj"));
    let run = fx.jail(&[
        "--home",
        "hidden",
        "--cwd",
        &proj,
        "--dry-run",
        "--",
        "true",
    ]);
    let json: serde_json::Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|_| panic!("{}", run.describe()));
    assert_eq!(json["policy"]["home"], "hidden", "{}", run.stdout);
    let home_rule = json["policy"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == s(&fx.home))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        home_rule["access"], "hide",
        "HOME itself is hidden: {home_rule}"
    );
    assert_eq!(home_rule["origin"]["from"], "home", "{home_rule}");
    let run = fx.jail(&["--home", "visible", "--dry-run", "--", "true"]);
    assert!(
        run.stdout.contains("\"home\": \"visible\""),
        "{}",
        run.stdout
    );

    let probe = fx.command(common::jail_bin(), &["probe"]).output().unwrap();
    let probe = String::from_utf8_lossy(&probe.stdout);
    assert!(
        probe.contains("homes (--home):   hidden by default (--home visible shows them) enforced by mount view and Landlock"),
        "{probe}"
    );

    let probe = fx
        .command(common::jail_bin(), &["probe", "--json"])
        .output()
        .unwrap();
    let probe: serde_json::Value = serde_json::from_slice(&probe.stdout).unwrap();
    assert!(
        probe["homes"]
            .as_str()
            .unwrap_or_default()
            .starts_with("hidden by default"),
        "{probe}"
    );

    let jail = s(common::jail_bin());
    let run = fx.jail(&["--home", "hidden", "--cwd", &proj, "--", &jail, "status"]);
    assert!(
        run.ok() && run.stdout.contains("homes: hidden:"),
        "{}",
        run.describe()
    );
    let run = fx.jail(&["--home", "visible", "--cwd", &proj, "--", &jail, "status"]);
    assert!(
        run.ok() && run.stdout.contains("homes: visible:"),
        "{}",
        run.describe()
    );
    let run = fx.jail(&["--home", "hidden", "--cwd", &proj, "--notice", "--", "true"]);
    assert!(
        run.ok()
            && run
                .stderr
                .contains("home directories are hidden except the paths named"),
        "{}",
        run.describe()
    );
}

#[test]
fn a_home_as_the_working_directory_and_a_bad_mode_are_refused() {
    let fx = Fixture::new(Who::User, "home-refused");
    let home = s(&fx.home);
    let run = fx.jail(&["--home", "hidden", "--cwd", &home, "--", "echo", "RAN"]);
    common::assert_refused(
        &run,
        "--home hidden in HOME",
        &["--home hidden", &home, "--home visible"],
    );
    let run = fx.jail(&[
        "--home", "hidden", "--ro", &home, "--cwd", &home, "--", "echo", "RAN",
    ]);
    assert_eq!(
        run.stdout,
        "RAN\n",
        "naming HOME with --ro opens it: {}",
        run.describe()
    );
    // `jail notice` describes a profile that hides the homes also when asked from HOME.
    let mut notice = fx.command(common::jail_bin(), &["notice", "--profile", "claude-code"]);
    let run = common::Run::from(notice.current_dir(&fx.home).output().unwrap());
    assert!(
        run.ok() && run.stdout.contains("home directories are hidden"),
        "{}",
        run.describe()
    );
    let run = fx.jail(&["--home", "secret", "--", "echo", "RAN"]);
    common::assert_refused(&run, "--home secret", &["--home", "hidden", "visible"]);
}

/// A venv-like script outside HOME whose interpreter is a symlink into a tool's directory in
/// HOME (a venv made from ~/.pyenv's python): the command's interpreter is followed and its
/// installation shown, so it runs; the rest of HOME stays hidden.
#[test]
fn a_commands_interpreter_installed_in_home_runs() {
    if !full_level_or_skip("home-interpreter") {
        return;
    }
    for who in users() {
        let fx = home_fixture(who, "home-interpreter");
        let tool = fx.home.join(".mytool/bin");
        let venv = fx.dir.join("venv/bin");
        std::fs::create_dir_all(&tool).unwrap();
        std::fs::create_dir_all(&venv).unwrap();
        std::fs::copy("/bin/dash", tool.join("mysh")).unwrap();
        std::os::unix::fs::symlink(tool.join("mysh"), venv.join("sh")).unwrap();
        let script = venv.join("tool");
        std::fs::write(
            &script,
            format!(
                "#!{}\necho RAN-WITH-HOME-INTERPRETER; cat {} || echo NOTES-HIDDEN\n",
                s(&venv.join("sh")),
                s(&fx.home.join("notes.txt"))
            ),
        )
        .unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        fx.give_to(who);
        for disabled in [&[][..], &[L], &[M]] {
            let run = fx.jail_with(
                &["--home", "hidden", "--ro", &fx.p("repo"), "--", &s(&script)],
                disabled,
                &[],
            );
            assert_eq!(
                run.stdout,
                "RAN-WITH-HOME-INTERPRETER\nNOTES-HIDDEN\n",
                "as {who:?} with {disabled:?} off\n{}",
                run.describe()
            );
        }
    }
}

/// Every profile hides the rest of HOME and shows the git identity (an agent run under review
/// gets its own login: tests/logins.rs).
#[test]
fn the_agent_profiles_hide_the_rest_of_home() {
    if !full_level_or_skip("agent-profiles-home") {
        return;
    }
    for who in users() {
        let fx = home_fixture(who, "agent-profiles-home");
        std::fs::write(fx.home.join(".gitconfig"), "[user]\n\tname = Jail Test\n").unwrap();
        fx.give_to(who);
        let notes = s(&fx.home.join("notes.txt"));
        let git = s(&fx.home.join(".gitconfig"));
        for (profile, hidden) in [
            ("claude-code", true),
            ("codex", true),
            ("gemini-cli", true),
            ("opencode", true),
            ("aider", true),
            ("default", true),
            ("review", true),
        ] {
            let script = format!("cat {} || true; cat {}", quote(&notes), quote(&git));
            let run = fx.jail(&[
                "--profile",
                profile,
                "--ro",
                &fx.p("repo"),
                "--cwd",
                &fx.p("repo"),
                "--",
                "sh",
                "-c",
                &script,
            ]);
            assert_eq!(
                run.stdout,
                if hidden { "" } else { "SECRET-NOTES\n" }.to_string()
                    + "[user]\n\tname = Jail Test\n",
                "{profile} as {who:?}\n{}",
                run.describe()
            );
        }
    }
}

/// Red-team round 2b: the interpreter reveal is steered by the project. A script the agent
/// wrote in its writable project names, in its `#!/usr/bin/env -S` line, an assignment word
/// `X=/a/other` that jail resolves against the working directory as if it were the
/// interpreter; `a` is a symlink (in the project) to `~/work`, so jail shows `~/work`
/// (the "interpreter's" parent) read-only, and the script, run as the jail's command on the
/// next run, reads another project's `.env` there.
#[test]
fn a_planted_shebang_does_not_make_jail_show_a_home_directory() {
    for who in users() {
        for disabled in [&[][..], &[Layer::Mount][..]] {
            let fx = Fixture::new(who, "shebang-reveal");
            let other = fx.home.join("work/other");
            std::fs::create_dir_all(&other).unwrap();
            std::fs::write(
                other.join(".env.production"),
                "DB_PASSWORD=OTHER-PROJECT-SECRET\n",
            )
            .unwrap();
            std::fs::create_dir_all(fx.repo.join("X=")).unwrap();
            std::os::unix::fs::symlink(fx.home.join("work"), fx.repo.join("X=/a")).unwrap();
            let script = fx.repo.join("run.sh");
            std::fs::write(
                &script,
                format!(
                    "#!/usr/bin/env -S X=/a/other sh\ncat {}\n",
                    s(&other.join(".env.production"))
                ),
            )
            .unwrap();
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
            fx.give_to(who);
            let (repo, script) = (s(&fx.repo), s(&script));
            // Run from the project, as a user does.
            let list: Vec<&str> = disabled.iter().map(|l| l.name()).collect();
            let run = common::Run::from(
                fx.command(
                    common::jail_bin(),
                    &["--home", "hidden", "--rw", &repo, "--", "./run.sh"],
                )
                .current_dir(&fx.repo)
                .env("JAIL_TEST_DISABLE", list.join(","))
                .output()
                .unwrap(),
            );
            let _ = &script;
            // The script ran (cat reports the file it could not read) and read nothing.
            assert!(run.stderr.contains(".env.production"), "{}", run.describe());
            assert!(
                !run.stdout.contains("OTHER-PROJECT-SECRET"),
                "{who:?} {disabled:?}: a planted shebang showed ~/work\n{}",
                run.describe()
            );
        }
    }
}

/// Red-team round 2b: a PATH directory in HOME is widened to its tool's whole entry (`~/.cabal`
/// for `~/.cabal/bin`), and the hide list does not name what some of those entries hold:
/// RubyGems' XDG credentials, Cabal's Hackage password, Dart pub's old credentials, a Julia
/// package server's token. Under an agent profile (home hidden) they are readable.
#[test]
fn a_path_entrys_widened_installation_does_not_show_its_credentials() {
    let creds = [
        (
            ".local/share/gem/ruby/3.1.0/bin",
            ".local/share/gem/credentials",
        ),
        (".cabal/bin", ".cabal/config"),
        (".pub-cache/bin", ".pub-cache/credentials.json"),
        (".julia/bin", ".julia/servers/pkg.juliahub.com/auth.toml"),
    ];
    for who in users() {
        for disabled in [&[][..], &[Layer::Mount][..]] {
            let fx = Fixture::new(who, "widened-creds");
            let mut path = Vec::new();
            let mut files = Vec::new();
            for (bin, cred) in creds {
                std::fs::create_dir_all(fx.home.join(bin)).unwrap();
                let f = fx.home.join(cred);
                std::fs::create_dir_all(f.parent().unwrap()).unwrap();
                std::fs::write(&f, "WIDENED-SECRET\n").unwrap();
                path.push(s(&fx.home.join(bin)));
                files.push(s(&f));
            }
            path.push("/usr/bin:/bin".into());
            fx.give_to(who);
            let path = path.join(":");
            let mut args = vec!["--profile", "claude-code", "--", "cat"];
            args.extend(files.iter().map(String::as_str));
            let run = fx.jail_with(&args, disabled, &[("PATH", path.as_str())]);
            assert!(
                !run.stdout.contains("WIDENED-SECRET"),
                "{who:?} {disabled:?}: a tool credential in a widened PATH entry was read\n{}",
                run.describe()
            );
        }
    }
}

/// A credential file a variable names in /tmp is hidden whatever /tmp is: the private /tmp
/// does not hold it (mount view), and without the view, where /tmp is the host's, Landlock
/// refuses it.
#[test]
fn a_credential_file_in_tmp_is_hidden_with_or_without_the_private_tmp() {
    if !full_level_or_skip("a_credential_file_in_tmp_is_hidden_with_or_without_the_private_tmp") {
        return;
    }
    use common::{Attack, Layer};
    let dir = std::path::Path::new("/tmp").join(format!("jail-test-creds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let creds = dir.join("credentials");
    std::fs::write(&creds, "SECRET-IN-TMP\n").unwrap();
    for p in [&dir, &creds] {
        let mode = if p.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
    }
    let c = creds.to_string_lossy().into_owned();
    for who in common::users() {
        let fx = common::Fixture::new(who, "tmp-creds");
        Attack::new(
            "read a credential file in /tmp that AWS_SHARED_CREDENTIALS_FILE names",
            &[],
            vec![
                "/bin/sh".into(),
                "-c".into(),
                format!(
                    "if cat {c}; then echo 'ALLOWED read'; else echo 'BLOCKED read'; exit 1; fi"
                ),
            ],
            &[Layer::Mount, Layer::Landlock],
        )
        .with_env("AWS_SHARED_CREDENTIALS_FILE", &c)
        .prove(&fx);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
