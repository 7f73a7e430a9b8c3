//! What a jailed command may read: the default hide list (histories, password stores, keyrings,
//! browser profiles, more credentials), and `--home hidden`, where every home directory is hidden
//! but the paths the run names. As root and as an unprivileged user; each rule proven by each
//! layer that claims it and shown to fail without it.

mod common;

use common::{Attack, Fixture, Layer, full_level_or_skip, users};
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
