//! Variables that name a credential file or directory (`GOOGLE_APPLICATION_CREDENTIALS`,
//! `KUBECONFIG`, `*_KEY_FILE`, `GIT_SSH_COMMAND="ssh -i KEY"`): removing the variable is not
//! enough, since the file stays readable at the path the variable gave away (and at the usual
//! places a tool would look). The launcher hides what they name, as the default credential stores
//! are hidden. Unix sockets the environment names are not handled here.

use std::path::{Path, PathBuf};

use super::wildcard::NameSet;

/// Variables that name one credential file or directory.
const NAMES: &[&str] = &[
    "GOOGLE_APPLICATION_CREDENTIALS",
    "CLOUDSDK_CONFIG",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AZURE_CONFIG_DIR",
    "DOCKER_CONFIG",
    "REGISTRY_AUTH_FILE",
    "GH_CONFIG_DIR",
    "NETRC",
    "PGPASSFILE",
    "PGSSLKEY",
    "GIT_SSL_KEY",
    "NPM_CONFIG_USERCONFIG",
    "TF_CLI_CONFIG_FILE",
    "BOTO_CONFIG",
    "OCI_CLI_CONFIG_FILE",
    "VAULT_CONFIG_PATH",
    "SSL_KEY_FILE",
    "TLS_KEY_FILE",
    "VAULT_CLIENT_KEY",
    "DOCKER_CERT_PATH",
    "HELM_REGISTRY_CONFIG",
    "MYSQL_TEST_LOGIN_FILE",
    "CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE",
    // Kerberos keytabs and the credential cache (`FILE:/tmp/krb5cc_0`).
    "KRB5_KTNAME",
    "KRB5_CLIENT_KTNAME",
    "KRB5CCNAME",
    "KUBE_CONFIG_PATH",
    "ANDROID_KEYSTORE_PATH",
    "RCLONE_CONFIG",
    "PIP_CONFIG_FILE",
    "KAGGLE_CONFIG_DIR",
    "PASSWORD_STORE_DIR",
];

/// Name shapes of the same (any case), the `*_FILE` convention of container images included
/// (`POSTGRES_PASSWORD_FILE`).
const PATTERNS: &[&str] = &[
    "*_KEY_FILE",
    "*_KEY_PATH",
    "*_KEYFILE",
    "*_KEY_FILENAME",
    "*_CREDENTIALS_FILE",
    "*_CREDENTIALS_PATH",
    "*_CREDENTIAL_FILE",
    "*_CREDS_FILE",
    "*_CREDS_PATH",
    "*_TOKEN_FILE",
    "*_TOKEN_PATH",
    "*_PASSWORD_FILE",
    "*_PASSWD_FILE",
    "*_PASS_FILE",
    "*_SECRET_FILE",
    "*_SECRETS_FILE",
    "*_PASSFILE",
    "*_PASSPHRASE_FILE",
    "*_AUTH_FILE",
    "*_SSL_KEY",
    "*_TLS_KEY",
    "*_CLIENT_KEY",
    "*_KEYSTORE",
    "*_KEYSTORE_PATH",
];

/// Variables whose value is a list of files (`:`-separated, as `PATH`).
const LISTS: &[&str] = &["KUBECONFIG"];

/// Variables whose value is an ssh command line: the keys its `-i` options name.
const SSH_COMMANDS: &[&str] = &["GIT_SSH_COMMAND", "*_RSH", "SVN_SSH", "*_SSH_COMMAND"];

/// The files `name=value` names if it is a credential-file variable (maybe none that exist),
/// `None` if it is not one. Relative paths are taken from `base`, `~/` from `home`.
pub fn named_files(
    name: &str,
    value: &str,
    home: Option<&Path>,
    base: &Path,
) -> Option<Vec<PathBuf>> {
    // Split once per process: asked for every variable of the environment at each start.
    static SETS: std::sync::OnceLock<[NameSet<'static>; 4]> = std::sync::OnceLock::new();
    let [lists, ssh, names, patterns] = SETS.get_or_init(|| {
        [
            NameSet::new(LISTS),
            NameSet::new(SSH_COMMANDS),
            NameSet::new(NAMES),
            NameSet::new(PATTERNS),
        ]
    });
    let is = |set: &NameSet| set.first(name).is_some();
    let raw: Vec<&str> = if is(lists) {
        value.split(':').collect()
    } else if is(ssh) {
        let keys = ssh_identity_files(value);
        if keys.is_empty() {
            return None;
        }
        keys
    } else if is(names) || is(patterns) {
        vec![value]
    } else {
        return None;
    };
    Some(
        raw.into_iter()
            .filter(|p| !p.is_empty())
            .filter_map(|p| absolute(p, home, base))
            .collect(),
    )
}

/// The identity files an ssh command line names: `-i KEY`, `-iKEY`, `-o IdentityFile=KEY`,
/// `-oIdentityFile=KEY`. Split on white space (a quoted path with spaces is missed: the variable is
/// still removed).
fn ssh_identity_files(cmd: &str) -> Vec<&str> {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        let next = words.get(i + 1).copied();
        let option = |o: &str| {
            let o = o.trim_start_matches(['"', '\'']);
            o.len() > 12 && o[..12].eq_ignore_ascii_case("identityfile")
        };
        if w == "-i" {
            out.extend(next);
            i += 1;
        } else if let Some(p) = w.strip_prefix("-i") {
            out.push(p);
        } else if w == "-o" && next.is_some_and(option) {
            out.push(next.unwrap()[13..].trim_matches(['"', '\'']));
            i += 1;
        } else if let Some(o) = w.strip_prefix("-o").filter(|o| option(o)) {
            out.push(o[13..].trim_matches(['"', '\'']));
        }
        i += 1;
    }
    out.retain(|p| !p.is_empty());
    out
}

fn absolute(p: &str, home: Option<&Path>, base: &Path) -> Option<PathBuf> {
    let p = p.trim_matches(['"', '\'']);
    // Kerberos spells a file as `FILE:PATH` (other cache types name no file).
    let p = p.strip_prefix("FILE:").unwrap_or(p);
    if p.contains(':') && !p.starts_with(['/', '.', '~']) {
        return None;
    }
    let path = match (p.strip_prefix("~/"), home) {
        (Some(rest), Some(h)) => h.join(rest),
        (Some(_), None) => return None,
        _ => base.join(p),
    };
    Some(super::absolute(Path::new("/"), &path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(name: &str, value: &str) -> Option<Vec<PathBuf>> {
        named_files(name, value, Some(Path::new("/home/u")), Path::new("/w"))
    }

    #[test]
    fn credential_variables_name_their_files() {
        let one = |name, value, path: &str| {
            assert_eq!(
                files(name, value),
                Some(vec![PathBuf::from(path)]),
                "{name}"
            )
        };
        one(
            "GOOGLE_APPLICATION_CREDENTIALS",
            "/home/u/sa.json",
            "/home/u/sa.json",
        );
        one(
            "AWS_SHARED_CREDENTIALS_FILE",
            "~/creds/aws",
            "/home/u/creds/aws",
        );
        one("DOCKER_CONFIG", "cfg/docker", "/w/cfg/docker");
        one("DEPLOY_KEY_FILE", "/k/deploy.pem", "/k/deploy.pem");
        one("db_password_file", "/run/s/pw", "/run/s/pw");
        one("MY_APP_TLS_KEY", "/etc/app/tls.key", "/etc/app/tls.key");
        one("PGPASSFILE", "/home/u/.pgpass", "/home/u/.pgpass");
        one("NETRC", "../n/../netrc", "/netrc");
        one("KRB5CCNAME", "FILE:/var/krb5cc_0", "/var/krb5cc_0");
        one("PULUMI_CONFIG_PASSPHRASE_FILE", "/p/pass", "/p/pass");
        one("DOCKER_CERT_PATH", "~/.certs", "/home/u/.certs");
        assert_eq!(files("KRB5CCNAME", "KEYRING:persistent:0"), Some(vec![]));
        assert_eq!(
            files("KUBECONFIG", "/a/config::~/.kube/other"),
            Some(vec![
                PathBuf::from("/a/config"),
                PathBuf::from("/home/u/.kube/other")
            ])
        );
        for cmd in [
            "ssh -i /k/id_deploy -o StrictHostKeyChecking=no",
            "ssh -i/k/id_deploy",
            "ssh -o IdentityFile=/k/id_deploy",
            "ssh -oIdentityFile=/k/id_deploy -F /dev/null",
        ] {
            assert_eq!(
                files("GIT_SSH_COMMAND", cmd),
                Some(vec![PathBuf::from("/k/id_deploy")]),
                "{cmd}"
            );
        }
    }

    #[test]
    fn other_variables_name_no_credential_file() {
        for (name, value) in [
            ("GIT_SSH_COMMAND", "ssh -o StrictHostKeyChecking=no"),
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("SSL_CERT_FILE", "/etc/ssl/certs/ca.pem"),
            ("NODE_EXTRA_CA_CERTS", "/etc/ssl/ca.pem"),
            ("KEY_TIMEOUT", "5"),
            ("EDITOR", "vi"),
        ] {
            assert_eq!(files(name, value), None, "{name}");
        }
    }
}
