//! Secrets that no name pattern catches, through the real binary, as root and as an unprivileged
//! user: values recognised as secrets leave the command's environment (its `env` and its
//! /proc/self/environ) whatever the variable is called, ordinary values and names kept on purpose
//! stay, the dry run and `--notice` say which names left and why (never a value), and the file a
//! credential variable names is unreadable inside, by the mount view alone and by Landlock alone.

mod common;

use common::{Attack, Fixture, Layer, attack_bin, full_level_or_skip, users};

const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Secrets under names that match no pattern of the default profile, and the part of each
/// value that must not be seen inside.
const SECRET_VALUES: &[(&str, &str, &str)] = &[
    (
        "SA",
        r#"{"type": "service_account", "project_id": "p", "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n", "client_email": "x@p.iam.gserviceaccount.com"}"#,
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
    ),
    (
        "MY_CERT",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAzVALUEOFRSA\n-----END RSA PRIVATE KEY-----\n",
        "MIIEowIBAAKCAQEAzVALUEOFRSA",
    ),
    (
        "DEPLOY",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEVALUEOFSSH\n-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEVALUEOFSSH",
    ),
    (
        "SIGNING",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBFVALUEOFPGP\n-----END PGP PRIVATE KEY BLOCK-----",
        "lQOYBFVALUEOFPGP",
    ),
    (
        "UPSTREAM",
        "https://bob:hunter2-upstream@git.example.org/r.git",
        "hunter2-upstream",
    ),
    (
        "GH",
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        "16C7e42F292c6912E7710c838347Ae178B4a",
    ),
    ("GL", "glpat-Xy3zAbCdEfGhIjKlMn0p", "Xy3zAbCdEfGhIjKlMn0p"),
    ("CHAT", "xoxb-2048-1234567890-VALUEofSLACK", "VALUEofSLACK"),
    ("CLOUD_ID", "AKIAIOSFODNN7EXAMPL3", "IOSFODNN7EXAMPL3"),
    (
        "CLOUD_S",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPL3KEY",
        "wJalrXUtnFEMI/K7MDENG",
    ),
    (
        "MAPS",
        "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
        "9tSrke72PouQMnMX",
    ),
    (
        "PAY",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "4eC39HqLyjWDarjtT1zdp7dc",
    ),
    (
        "LLM",
        "sk-proj-AbCdEf0123456789ghIJklMNopQRstUVwx",
        "AbCdEf0123456789ghIJklMNopQRstUVwx",
    ),
    (
        "IDT",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N",
    ),
    (
        "PUBLISH",
        "npm_abcdefghijklmnopqrstuvwxyz0123456789",
        "abcdefghijklmnopqrstuvwxyz0123456789",
    ),
    (
        "BLOB",
        "8Kd2LmQ9xRvT4wYbN7pZsE1uJcH6gFa3",
        "8Kd2LmQ9xRvT4wYbN7pZsE1uJcH6gFa3",
    ),
    ("DB_PW", "plain-db-pw-value", "plain-db-pw-value"),
];

/// Ordinary values that must reach the command unchanged.
const ORDINARY: &[(&str, &str)] = &[
    ("TOOL_DIRS", "/opt/tool/bin:/usr/local/bin:/usr/bin"),
    ("LS_COLORS", "rs=0:di=01;34:ln=01;36:mh=00:pi=40;33"),
    ("COLORTERM", "truecolor"),
    ("APP_VERSION", "1.2.3-beta.4+build.5678"),
    ("GIT_COMMIT", "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3"),
    ("BUILD_UUID", "550e8400-e29b-41d4-a716-446655440000"),
    ("PLAIN_PROXY", "http://proxy.internal:3128"),
    ("LANG", "en_US.UTF-8"),
    ("MODULE_NAME", "MyApplicationServiceNameForProductionV2"),
];

/// The command's environment as `env` prints it and as its /proc/self/environ holds it, each
/// as NAME=VALUE entries.
fn seen_inside(fx: &Fixture, flags: &[&str], env: &[(&str, &str)]) -> (Vec<String>, Vec<String>) {
    let mut args = flags.to_vec();
    args.extend([
        "--",
        "/bin/sh",
        "-c",
        "cat /proc/self/environ; printf '\\0==split==\\0'; exec /usr/bin/env -0",
    ]);
    let mut all = vec![("PATH", PATH)];
    all.extend_from_slice(env);
    let run = fx.jail_with(&args, &[], &all);
    assert!(run.ok(), "{flags:?}: {}", run.describe());
    let (proc, env) = run
        .stdout
        .split_once("\0==split==\0")
        .unwrap_or_else(|| panic!("no split marker:\n{}", run.describe()));
    let entries = |s: &str| -> Vec<String> {
        s.split('\0')
            .filter(|e| !e.is_empty())
            .map(String::from)
            .collect()
    };
    (entries(proc), entries(env))
}

fn env_of(list: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    list.to_vec()
}

#[test]
fn secrets_found_by_value_are_gone_from_the_commands_environment() {
    if !full_level_or_skip("secret values") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "secret-values");
        let mut env = env_of(ORDINARY);
        env.extend(SECRET_VALUES.iter().map(|(n, v, _)| (*n, *v)));
        let (proc, listed) = seen_inside(&fx, &[], &env);
        for (what, entries) in [("env", &listed), ("/proc/self/environ", &proc)] {
            let text = entries.join("\n");
            for (name, _, marker) in SECRET_VALUES {
                assert!(
                    !text.contains(marker)
                        && !entries.iter().any(|e| e.starts_with(&format!("{name}="))),
                    "as {who:?}: {name} reached the command's {what}:\n{text}"
                );
            }
            for (name, value) in ORDINARY {
                assert!(
                    entries.contains(&format!("{name}={value}")),
                    "as {who:?}: the ordinary {name} is missing from {what}:\n{text}"
                );
            }
        }

        // Kept by name: a profile's own key (a token shape) and --env NAME pass.
        let key = "sk-ant-api03-AbCdEf0123456789ghIJklMNopQRstUVwxYZ";
        let env = [("ANTHROPIC_API_KEY", key), ("SA", SECRET_VALUES[0].1)];
        let (proc, listed) = seen_inside(&fx, &["--profile", "claude-code", "--env", "SA"], &env);
        for entries in [&proc, &listed] {
            assert!(
                entries.contains(&format!("ANTHROPIC_API_KEY={key}")),
                "as {who:?}: claude-code lost its own key: {entries:?}"
            );
            assert!(
                entries.contains(&format!("SA={}", SECRET_VALUES[0].1)),
                "as {who:?}: --env SA did not keep it"
            );
        }
    }
}

#[test]
fn the_dry_run_and_the_notice_say_which_names_left_and_why_never_a_value() {
    if !full_level_or_skip("secret reasons") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "secret-why");
        let sneaky = "SNEAKY\u{1b}[2K";
        let env = [
            ("PATH", PATH),
            ("SA", SECRET_VALUES[0].1),
            ("GH", SECRET_VALUES[5].1),
            (sneaky, SECRET_VALUES[5].1),
            ("GITHUB_TOKEN", "x"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/sa.json"),
        ];
        let run = fx.jail_with(&["--dry-run", "--", "true"], &[], &env);
        assert!(run.ok(), "{}", run.describe());
        let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let why = &v["policy"]["env"]["why"];
        assert_eq!(why["SA"], "value is a private key block", "{why}");
        assert_eq!(why["GH"], "value is a GitHub token", "{why}");
        assert_eq!(why["GITHUB_TOKEN"], "name matches *TOKEN", "{why}");
        assert_eq!(
            why["GOOGLE_APPLICATION_CREDENTIALS"],
            "names a credential file"
        );
        for (_, _, marker) in &SECRET_VALUES[..6] {
            assert!(
                !run.stdout.contains(marker),
                "as {who:?}: a value in the dry run"
            );
        }

        let run = fx.jail_with(&["--notice", "--", "true"], &[], &env);
        assert!(run.ok(), "{}", run.describe());
        let line = run
            .stderr
            .lines()
            .find(|l| l.starts_with("jail: removed from the environment:"))
            .unwrap_or_else(|| panic!("no removal line:\n{}", run.describe()));
        for part in [
            "SA (value is a private key block)",
            "GH (value is a GitHub token)",
            "GITHUB_TOKEN (name matches *TOKEN)",
            "SNEAKY\\u{1b}[2K (value is a GitHub token)",
        ] {
            assert!(line.contains(part), "as {who:?}: {part} not in: {line}");
        }
        assert!(
            !run.stderr.contains('\u{1b}'),
            "an escape reached the terminal"
        );
        for (_, _, marker) in &SECRET_VALUES[..6] {
            assert!(
                !run.stderr.contains(marker),
                "as {who:?}: a value in the notice"
            );
        }
    }
}

#[test]
fn the_file_a_credential_variable_names_is_unreadable_inside() {
    if !full_level_or_skip("credential files") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "credfiles");
        for (rel, content) in [
            ("keys/sa.json", "SECRET-SA-JSON"),
            ("keys/deploy.pem", "SECRET-DEPLOY-PEM"),
            ("keys/id_git", "SECRET-GIT-SSH-KEY"),
            ("keys/kube-b", "SECRET-KUBE"),
            ("dockercfg/config.json", "SECRET-DOCKER-AUTH"),
        ] {
            let p = fx.dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, content).unwrap();
        }
        fx.give_to(who);
        let a = attack_bin().to_string_lossy().into_owned();
        let read = |rel: &str| vec![a.clone(), "read".into(), fx.p(rel)];
        let flags = ["--ro", &fx.p("repo")];
        let both = [Layer::Mount, Layer::Landlock];
        let attacks = [
            Attack::new(
                "GOOGLE_APPLICATION_CREDENTIALS",
                &flags,
                read("keys/sa.json"),
                &both,
            )
            .with_env("GOOGLE_APPLICATION_CREDENTIALS", &fx.p("keys/sa.json")),
            // A relative path is taken from where jail starts (the fixture's root here).
            Attack::new(
                "*_KEY_FILE, relative",
                &flags,
                read("keys/deploy.pem"),
                &both,
            )
            .with_env("DEPLOY_KEY_FILE", "keys/deploy.pem"),
            Attack::new("GIT_SSH_COMMAND -i", &flags, read("keys/id_git"), &both).with_env(
                "GIT_SSH_COMMAND",
                &format!("ssh -i {} -o StrictHostKeyChecking=no", fx.p("keys/id_git")),
            ),
            Attack::new("KUBECONFIG list", &flags, read("keys/kube-b"), &both).with_env(
                "KUBECONFIG",
                &format!("/nonexistent:{}", fx.p("keys/kube-b")),
            ),
            Attack::new(
                "DOCKER_CONFIG directory",
                &flags,
                read("dockercfg/config.json"),
                &both,
            )
            .with_env("DOCKER_CONFIG", &fx.p("dockercfg")),
        ];
        for attack in attacks {
            attack.prove(&fx);
        }

        // A file inside a path hidden already (~/.aws): the launch works, the file stays hidden.
        let creds = fx
            .home
            .join(".aws/credentials")
            .to_string_lossy()
            .into_owned();
        let run = fx.jail_with(
            &["--", &a, "read", &creds],
            &[],
            &[("AWS_SHARED_CREDENTIALS_FILE", &creds)],
        );
        assert_eq!(
            common::verdict(&run),
            common::Verdict::Blocked,
            "as {who:?}"
        );

        // Kept by name, the variable and its file are handed over on purpose.
        let run = fx.jail_with(
            &[
                "--env",
                "GOOGLE_APPLICATION_CREDENTIALS",
                "--",
                "/bin/sh",
                "-c",
                "cat \"$GOOGLE_APPLICATION_CREDENTIALS\"",
            ],
            &[],
            &[("GOOGLE_APPLICATION_CREDENTIALS", &fx.p("keys/sa.json"))],
        );
        assert!(
            run.ok() && run.stdout == "SECRET-SA-JSON",
            "as {who:?}: a kept credential variable lost its file\n{}",
            run.describe()
        );
        // The gemini-cli profile keeps it by name: no hide rule for it.
        let run = fx.jail_with(
            &["--profile", "gemini-cli", "--dry-run", "--", "true"],
            &[],
            &[("GOOGLE_APPLICATION_CREDENTIALS", &fx.p("keys/sa.json"))],
        );
        assert!(run.ok(), "{}", run.describe());
        assert!(
            !run.stdout.contains("\"from\": \"env\""),
            "as {who:?}: gemini-cli hid the file it keeps:\n{}",
            run.stdout
        );

        // A variable naming a directory that holds HOME stops the launch, naming it.
        let home = fx.home.to_string_lossy().into_owned();
        let run = fx.jail_with(&["--", "true"], &[], &[("DOCKER_CONFIG", &home)]);
        assert_eq!(run.code, Some(125), "{}", run.describe());
        assert!(
            run.stderr.contains("DOCKER_CONFIG") && run.stderr.contains("--env DOCKER_CONFIG"),
            "{}",
            run.describe()
        );
    }
}
