//! The command's environment: the caller's, less secrets removed by name pattern, plus what the
//! profile and the flags set. Values never appear in the dry run or the policy file, only names.

use std::ffi::OsString;

use serde::Serialize;

use super::profile::{Expansion, ProfileEnv};

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
    pub fn from_args(env: &[String], deny: &[String], clear: bool) -> Result<EnvFlags, String> {
        let mut flags = EnvFlags {
            clear,
            deny: deny.to_vec(),
            ..Default::default()
        };
        for item in env {
            match item.split_once('=') {
                Some((k, v)) => {
                    check_name(k)?;
                    flags.set.push((k.to_string(), v.to_string()));
                }
                None => {
                    check_name(item)?;
                    flags.keep.push(item.clone());
                }
            }
        }
        for p in deny {
            if p.is_empty() || p.contains('=') {
                return Err(format!(
                    "--env-deny '{p}': expected a name or a pattern like '*_TOKEN'"
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
}

/// `*` matches any run of characters; everything else matches itself, ignoring ASCII case
/// (`github_token` is as secret as `GITHUB_TOKEN`). No allocation: it runs for every pattern and
/// every variable at each launch.
pub fn matches(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let parts: Vec<&[u8]> = p.split(|&c| c == b'*').collect();
    if parts.len() == 1 {
        return p.eq_ignore_ascii_case(n);
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if n.len() < first.len() + last.len()
        || !n[..first.len()].eq_ignore_ascii_case(first)
        || !n[n.len() - last.len()..].eq_ignore_ascii_case(last)
    {
        return false;
    }
    let mut rest = &n[first.len()..n.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest
            .windows(mid.len().max(1))
            .position(|w| w.eq_ignore_ascii_case(mid))
        {
            Some(i) if !mid.is_empty() => rest = &rest[i + mid.len()..],
            _ if mid.is_empty() => {}
            _ => return false,
        }
    }
    true
}

/// A value that carries a credential whatever the variable is called: a URL with user
/// information (`postgres://user:secret@host/db`, `https://ghp_token@github.com/...`), or a
/// connection string with a password or token field (`Server=h;Password=p`, `?password=x`).
fn carries_credentials(value: &OsString) -> bool {
    let Some(v) = value.to_str() else {
        return false;
    };
    let url_userinfo = v.split("://").skip(1).any(|rest| {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        authority.contains('@')
    });
    let lower = v.to_ascii_lowercase();
    let field = [
        "password=",
        "pwd=",
        "passwd=",
        "token=",
        "secret=",
        "apikey=",
        "api_key=",
    ]
    .iter()
    .any(|f| lower.contains(f));
    url_userinfo || field || lower.starts_with("authorization:") || lower.starts_with("bearer ")
}

/// Computes the command's environment. Precedence, strongest first: `--env KEY`, `--env-deny`,
/// the profile's `keep`, the profile's `deny`, then clearing.
pub fn child_env(
    caller: &[(OsString, OsString)],
    profile: &ProfileEnv,
    flags: &EnvFlags,
    expand: &Expansion,
) -> Result<ChildEnv, String> {
    let clear = profile.clear || flags.clear;
    let any = |list: &[String], name: &str| list.iter().any(|p| matches(p, name));
    let mut out = ChildEnv {
        cleared: clear,
        ..Default::default()
    };
    for (k, v) in caller {
        let Some(name) = k.to_str() else {
            // A name that is not UTF-8 matches no pattern: kept unless clearing.
            if !clear {
                out.vars.push((k.clone(), v.clone()));
            }
            continue;
        };
        let keep = if flags.keep.iter().any(|n| n == name) {
            true
        } else if any(&flags.deny, name) {
            false
        } else if any(&profile.keep, name) {
            true
        } else if any(&profile.deny, name) || carries_credentials(v) {
            false
        } else {
            !clear
        };
        if keep {
            out.vars.push((k.clone(), v.clone()));
        } else {
            out.removed.push(name.to_string());
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
        out.vars.push((k.clone().into(), v.into()));
        if !out.set.contains(&k) {
            out.set.push(k);
        }
    }
    out.removed.sort();
    Ok(out)
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
            ("REPO", "https://ghp_abc@github.com/o/r"),
            ("DSN", "Server=h;Password=p;"),
            ("MONGO", "mongodb://h/?password=x"),
            ("PLAIN", "https://example.org/x"),
        ]);
        let e = child_env(&caller, &ProfileEnv::default(), &EnvFlags::default(), &x()).unwrap();
        assert_eq!(e.removed, ["DSN", "MONGO", "REPO"]);
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
    fn glob_patterns() {
        assert!(matches("*_TOKEN", "GITHUB_TOKEN"));
        assert!(!matches("*_TOKEN", "TOKENS"));
        assert!(matches("AWS_*", "AWS_SECRET_ACCESS_KEY"));
        assert!(matches("*SECRET_KEY*", "MY_SECRET_KEY_2"));
        assert!(matches("*_TOKEN_*", "A_TOKEN_B"));
        assert!(!matches("*_TOKEN_*", "A_TOKEN"));
        assert!(matches("PATH", "PATH") && !matches("PATH", "PATHS"));
        assert!(matches("LC_*", "LC_ALL"));
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
