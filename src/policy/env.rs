//! The command's environment: the caller's, less secrets removed by name pattern or recognised by
//! their value, plus what the profile and the flags set. Values never appear in the dry run or
//! the policy file, only names (and why each was removed).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use serde::Serialize;

use super::credfiles;
use super::profile::{Expansion, ProfileEnv};
use super::secrets::secret_in_value;
use super::wildcard::NameSet;
pub use super::wildcard::matches;

/// The environment rules from the command line (they beat the profile's).
#[derive(Debug, Clone, Default)]
pub struct EnvFlags {
    pub clear: bool,
    /// `--env KEY`: keep KEY from the caller whatever the patterns say.
    pub keep: Vec<String>,
    /// `--env KEY=VALUE`.
    pub set: Vec<(String, String)>,
    /// `--env-deny PATTERN`.
    pub deny: Vec<String>,
}

impl EnvFlags {
    /// Splits `--env` values into names to keep and pairs to set.
    pub fn from_args(
        env: &[String],
        deny: &[String],
        clear: bool,
    ) -> Result<EnvFlags, crate::JailError> {
        let bad = |flag: &str, value: &str, message: String| {
            crate::JailError::bad_flag(flag, value, message)
        };
        let mut flags = EnvFlags {
            clear,
            deny: deny.to_vec(),
            ..Default::default()
        };
        for item in env {
            match item.split_once('=') {
                Some((k, v)) => {
                    // The name only: the value may be a secret.
                    check_name(k).map_err(|m| bad("--env", k, m))?;
                    flags.set.push((k.to_string(), v.to_string()));
                }
                None => {
                    check_name(item).map_err(|m| bad("--env", item, m))?;
                    flags.keep.push(item.clone());
                }
            }
        }
        for p in deny {
            if p.is_empty() || p.contains('=') {
                return Err(bad(
                    "--env-deny",
                    p,
                    format!("--env-deny '{p}': expected a name or a pattern like '*_TOKEN'"),
                ));
            }
        }
        Ok(flags)
    }
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "--env '{name}': not a variable name (KEY or KEY=VALUE)"
        ))
    }
}

/// The computed environment. Only names are serialized.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ChildEnv {
    #[serde(skip)]
    pub vars: Vec<(OsString, OsString)>,
    pub cleared: bool,
    /// Names removed from the caller's environment.
    pub removed: Vec<String>,
    /// Names set by the profile or a flag.
    pub set: Vec<String>,
    /// Why each removed name was removed: the pattern, flag or kind of value (never the value).
    pub why: BTreeMap<String, String>,
    /// The files credential variables name (variable, path), to be hidden; not those of a
    /// variable kept by name, which is handed to the command on purpose with its file.
    #[serde(skip)]
    pub credential_files: Vec<(String, PathBuf)>,
    /// Names kept on purpose (a name the profile keeps exactly, `--env NAME`) whose name or value
    /// marks a credential: the command holds the value unless a secret rule replaces it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kept_credentials: Vec<String>,
}

/// Computes the command's environment. Precedence, strongest first: `--env KEY`, `--env-deny`,
/// a name the profile keeps exactly, then what the value shows (a variable naming a credential
/// file, a secret recognised by its value), a pattern the profile keeps, the profile's `deny`,
/// then clearing. A value check beats a kept *pattern* (`LC_*`, `AIDER_*` say which names belong
/// to the command, not that a private key under one of them may pass) but not a kept *name*: an
/// agent profile keeps `ANTHROPIC_API_KEY` because the agent needs that very key.
pub fn child_env(
    caller: &[(OsString, OsString)],
    profile: &ProfileEnv,
    flags: &EnvFlags,
    expand: &Expansion,
) -> Result<ChildEnv, String> {
    let clear = profile.clear || flags.clear;
    let (keep, deny, flag_deny) = (
        NameSet::new(&profile.keep),
        NameSet::new(&profile.deny),
        NameSet::new(&flags.deny),
    );
    let mut out = ChildEnv {
        cleared: clear,
        ..Default::default()
    };
    for (k, v) in caller {
        let value = v.to_string_lossy();
        let secret = secret_in_value(&value);
        let Some(name) = k.to_str() else {
            // A name that is not UTF-8 matches no pattern: kept unless clearing or its value
            // is a secret.
            match (clear, secret) {
                (false, None) => out.vars.push((k.clone(), v.clone())),
                (_, found) => out.remove(
                    &k.to_string_lossy(),
                    found.map_or("environment cleared".into(), |s| format!("value is {s}")),
                ),
            }
            continue;
        };
        let kept_by_flag = flags.keep.iter().any(|n| n == name);
        let kept_by_name = kept_by_flag || keep.names(name);
        let files = credfiles::named_files(name, &value, expand.home, expand.cwd);
        if let (false, Some(files)) = (kept_by_name, &files) {
            out.credential_files
                .extend(files.iter().map(|f| (name.to_string(), f.clone())));
        }
        let why = if kept_by_flag {
            None
        } else if let Some(p) = flag_deny.first(name) {
            Some(format!("--env-deny {p}"))
        } else if kept_by_name {
            None
        } else if files.is_some() {
            Some("names a credential file".to_string())
        } else if let Some(kind) = secret {
            Some(format!("value is {kind}"))
        } else if keep.first(name).is_some() {
            None
        } else if let Some(p) = deny.first(name) {
            Some(format!("name matches {p}"))
        } else if clear {
            Some("environment cleared".to_string())
        } else {
            None
        };
        // Asked only of the few names kept on purpose: a pattern match per variable costs.
        let credential = || files.is_some() || secret.is_some() || deny.first(name).is_some();
        if why.is_none() && kept_by_name && credential() {
            out.kept_credentials.push(name.to_string());
        }
        match why {
            None => out.vars.push((k.clone(), v.clone())),
            Some(why) => out.remove(name, why),
        }
    }
    let mut set: Vec<(String, String)> = Vec::new();
    for (k, v) in &profile.set {
        let value = expand.expand(v)?.unwrap_or_default();
        set.push((k.clone(), value));
    }
    set.extend(flags.set.iter().cloned());
    for (k, v) in set {
        out.vars.retain(|(name, _)| name.as_os_str() != k.as_str());
        out.removed.retain(|name| name != &k);
        out.why.remove(&k);
        out.vars.push((k.clone().into(), v.into()));
        if !out.set.contains(&k) {
            out.set.push(k);
        }
    }
    out.removed.sort();
    out.kept_credentials.retain(|name| !out.set.contains(name));
    out.kept_credentials.sort();
    Ok(out)
}

impl ChildEnv {
    fn remove(&mut self, name: &str, why: String) {
        self.removed.push(name.to_string());
        self.why.insert(name.to_string(), why);
    }

    /// One line naming what left the environment and why (names only, never a value), for
    /// `--notice`; those removed only because the environment was cleared are counted.
    pub fn removal_note(&self) -> Option<String> {
        let cleared = self
            .why
            .values()
            .filter(|w| *w == "environment cleared")
            .count();
        let mut parts: Vec<String> = self
            .why
            .iter()
            .filter(|(_, w)| *w != "environment cleared")
            .map(|(n, w)| format!("{n} ({w})"))
            .collect();
        if cleared > 0 {
            parts.push(format!("{cleared} more (environment cleared)"));
        }
        (!parts.is_empty())
            .then(|| format!("jail: removed from the environment: {}", parts.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    fn names(e: &ChildEnv) -> Vec<String> {
        e.vars
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect()
    }

    fn x() -> Expansion<'static> {
        Expansion {
            home: Some(Path::new("/home/u")),
            cwd: Path::new("/w"),
            var: &|_| None,
        }
    }

    #[test]
    fn urls_with_passwords_are_removed_whatever_their_name() {
        let caller = env(&[
            ("DATABASE_URL", "postgres://u:p@db/x"),
            ("HTTPS_PROXY", "http://user:pw@proxy:3128"),
            ("PLAIN_PROXY", "http://proxy:3128"),
            ("DOCS", "see https://example.org/a@b"),
        ]);
        let e = child_env(&caller, &ProfileEnv::default(), &EnvFlags::default(), &x()).unwrap();
        assert_eq!(e.removed, ["DATABASE_URL", "HTTPS_PROXY"]);
        let caller = env(&[
            // A token as the user part (long as a token is); a plain user name is no secret.
            ("REPO", "https://k9Vq2Lx7Rt4Wm8Zp3Nc6Yh1b@github.com/o/r"),
            ("SSH_REPO", "ssh://git@github.com/o/r"),
            ("DSN", "Server=h;Password=p;"),
            ("MONGO", "mongodb://h/?password=x"),
            ("PLAIN", "https://example.org/x"),
        ]);
        let e = child_env(&caller, &ProfileEnv::default(), &EnvFlags::default(), &x()).unwrap();
        assert_eq!(e.removed, ["DSN", "MONGO", "REPO"]);
    }

    #[test]
    fn a_value_check_beats_a_kept_pattern_not_a_kept_name() {
        let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----";
        let caller = env(&[
            ("SA", key),
            ("LC_SNEAKY", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"),
            ("LC_ALL", "C.UTF-8"),
            (
                "ANTHROPIC_API_KEY",
                "sk-ant-api03-AbCdEf0123456789ghIJklMNopQRstUVwx",
            ),
            ("PATH", "/usr/bin:/bin"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/home/u/sa.json"),
            ("DEPLOY_KEY_FILE", "~/deploy.pem"),
            ("GITHUB_TOKEN", "x"),
        ]);
        let profile = ProfileEnv {
            keep: vec!["LC_*".into(), "ANTHROPIC_API_KEY".into()],
            deny: vec!["*TOKEN".into()],
            ..Default::default()
        };
        let e = child_env(&caller, &profile, &EnvFlags::default(), &x()).unwrap();
        assert_eq!(names(&e), ["LC_ALL", "ANTHROPIC_API_KEY", "PATH"]);
        let why: Vec<(&str, &str)> = e
            .why
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            why,
            [
                ("DEPLOY_KEY_FILE", "names a credential file"),
                ("GITHUB_TOKEN", "name matches *TOKEN"),
                ("GOOGLE_APPLICATION_CREDENTIALS", "names a credential file"),
                ("LC_SNEAKY", "value is a GitHub token"),
                ("SA", "value is a private key block"),
            ]
        );
        assert_eq!(
            e.credential_files,
            [
                (
                    "GOOGLE_APPLICATION_CREDENTIALS".to_string(),
                    PathBuf::from("/home/u/sa.json")
                ),
                (
                    "DEPLOY_KEY_FILE".to_string(),
                    PathBuf::from("/home/u/deploy.pem")
                ),
            ]
        );
        let note = e.removal_note().unwrap();
        assert!(note.contains("SA (value is a private key block)"), "{note}");
        assert!(!note.contains("BEGIN") && !note.contains("ghp_"), "{note}");

        // Kept by name (a profile's exact entry or --env KEY): the variable and its file stay.
        let profile = ProfileEnv {
            keep: vec!["GOOGLE_APPLICATION_CREDENTIALS".into()],
            ..Default::default()
        };
        let flags =
            EnvFlags::from_args(&["SA".into(), "DEPLOY_KEY_FILE".into()], &[], false).unwrap();
        let e = child_env(&caller, &profile, &flags, &x()).unwrap();
        for kept in ["SA", "GOOGLE_APPLICATION_CREDENTIALS", "DEPLOY_KEY_FILE"] {
            assert!(names(&e).contains(&kept.to_string()), "{kept}: {:?}", e.why);
        }
        assert!(e.credential_files.is_empty(), "{:?}", e.credential_files);

        // Removed by --env-deny, or cleared: its file is still hidden.
        let flags = EnvFlags::from_args(&[], &["DEPLOY_*".into()], true).unwrap();
        let e = child_env(&caller, &ProfileEnv::default(), &flags, &x()).unwrap();
        assert_eq!(e.why["DEPLOY_KEY_FILE"], "--env-deny DEPLOY_*");
        assert_eq!(e.why["PATH"], "environment cleared");
        assert_eq!(e.credential_files.len(), 2);
        assert!(
            e.removal_note()
                .unwrap()
                .contains("more (environment cleared)")
        );
    }

    #[test]
    fn the_default_profile_removes_the_usual_secrets() {
        let cat = crate::policy::profile::Catalog::load(None).unwrap();
        let deny = cat.resolve("default").unwrap().env;
        for name in [
            "GITHUB_TOKEN",
            "github_token",
            "TOKEN",
            "API_KEY",
            "APIKEY",
            "OPENAI_KEY",
            "AZURE_OPENAI_KEY",
            "RAILS_MASTER_KEY",
            "PGPASSWORD",
            "MYSQL_PWD",
            "PASSWORD",
            "DB_PASS",
            "DB_PW",
            "ADMIN_PASSCODE",
            "SERVICE_CREDS",
            "GPG_PASSPHRASE",
            "SECRET",
            "GITHUB_PAT",
            "BW_SESSION",
            "OP_SESSION_my",
            "CI_JOB_JWT",
            "DOCKER_AUTH_CONFIG",
            "npm_config__authToken",
            "TF_VAR_db_password",
            "SENTRY_DSN",
            "SLACK_WEBHOOK_URL",
            "AZURE_STORAGE_CONNECTION_STRING",
            "GOOGLE_CREDENTIALS_JSON",
            "AWS_SECRET_ACCESS_KEY",
            "SSH_AUTH_SOCK",
            "AUTHORIZATION",
            "SESSION_COOKIE",
            "TOKEN_GITHUB",
            "API_TOKENS",
            "STRIPE_SK",
            "KRB5CCNAME",
            "BEARER",
        ] {
            assert!(deny.deny.iter().any(|p| matches(p, name)), "{name} passes");
        }
        for name in [
            "PATH",
            "HOME",
            "PWD",
            "OLDPWD",
            "TERM",
            "LANG",
            "TOKENIZERS_PARALLELISM",
            "KEYTIMEOUT",
            "EDITOR",
            "SHELL",
            "USER",
        ] {
            assert!(
                !deny.deny.iter().any(|p| matches(p, name)),
                "{name} removed"
            );
        }
    }

    #[test]
    fn secrets_go_the_agents_key_stays_flags_win() {
        let caller = env(&[
            ("PATH", "/bin"),
            ("GITHUB_TOKEN", "t"),
            ("ANTHROPIC_API_KEY", "k"),
            ("OPENAI_API_KEY", "o"),
            ("AWS_SECRET_ACCESS_KEY", "a"),
            ("HOME", "/home/u"),
        ]);
        let profile = ProfileEnv {
            clear: false,
            keep: vec!["ANTHROPIC_API_KEY".into()],
            deny: vec!["*_TOKEN".into(), "*_API_KEY".into(), "AWS_*".into()],
            set: [("CLAUDE_CONFIG_DIR".to_string(), "~/.claude".to_string())].into(),
        };
        let e = child_env(&caller, &profile, &EnvFlags::default(), &x()).unwrap();
        assert_eq!(
            names(&e),
            ["PATH", "ANTHROPIC_API_KEY", "HOME", "CLAUDE_CONFIG_DIR"]
        );
        assert_eq!(
            e.removed,
            ["AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "OPENAI_API_KEY"]
        );
        assert!(
            e.vars
                .contains(&("CLAUDE_CONFIG_DIR".into(), "/home/u/.claude".into()))
        );

        let flags = EnvFlags::from_args(
            &["GITHUB_TOKEN".into(), "X=1".into()],
            &["ANTHROPIC_*".into()],
            false,
        )
        .unwrap();
        let e = child_env(&caller, &profile, &flags, &x()).unwrap();
        assert!(
            names(&e).contains(&"GITHUB_TOKEN".to_string()),
            "--env KEY keeps it"
        );
        assert!(
            !names(&e).contains(&"ANTHROPIC_API_KEY".to_string()),
            "--env-deny beats keep"
        );
        assert!(e.vars.contains(&("X".into(), "1".into())));
    }

    #[test]
    fn clearing_keeps_only_the_allow_list() {
        let caller = env(&[
            ("PATH", "/bin"),
            ("LANG", "C"),
            ("LC_ALL", "C"),
            ("EDITOR", "vi"),
        ]);
        let profile = ProfileEnv {
            clear: true,
            keep: vec!["PATH".into(), "LC_*".into()],
            ..Default::default()
        };
        let e = child_env(&caller, &profile, &EnvFlags::default(), &x()).unwrap();
        assert_eq!(names(&e), ["PATH", "LC_ALL"]);
        assert!(e.cleared);
    }

    #[test]
    fn bad_env_flags_are_refused() {
        assert!(EnvFlags::from_args(&["1X=2".into()], &[], false).is_err());
        assert!(EnvFlags::from_args(&["A-B".into()], &[], false).is_err());
        assert!(EnvFlags::from_args(&[], &["A=B".into()], false).is_err());
    }
}
