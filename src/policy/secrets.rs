//! Secrets recognised by their value, whatever the variable is called: a name pattern cannot know
//! that `SA` holds a service account's private key or `DEPLOY` a GitHub token. Each check says
//! what it found (for the dry run; never the value) and is written to leave ordinary values alone
//! (paths, PATH-like lists, colours, versions, ids): the unit tests hold both sides.

/// What kind of secret `value` carries, if any.
pub fn secret_in_value(value: &str) -> Option<&'static str> {
    if private_key_block(value) || value.contains(BASE64_BEGIN) {
        return Some("a private key block");
    }
    if webhook_url(value) {
        return Some("a webhook URL (its path is the secret)");
    }
    if credential_json(value) {
        return Some("credential JSON (a private key or token field)");
    }
    if url_with_userinfo(value) {
        return Some("a URL with a password or token in it");
    }
    if credential_field(value) {
        return Some("a password or token field");
    }
    if let Some(kind) = token_shape(value) {
        return Some(kind);
    }
    if aws_secret_shape(value) || high_entropy(value) {
        return Some("a long random string (a key or token)");
    }
    None
}

/// PEM and OpenSSH private keys (`-----BEGIN RSA PRIVATE KEY-----`, `…ENCRYPTED PRIVATE KEY…`,
/// `…OPENSSH PRIVATE KEY…`) and PGP private key blocks. Certificates and public keys are not
/// secret and stay.
fn private_key_block(v: &str) -> bool {
    v.split("-----BEGIN ").skip(1).any(|rest| {
        let label = rest.split("-----").next().unwrap_or("");
        label.ends_with("PRIVATE KEY") || label == "PGP PRIVATE KEY BLOCK"
    })
}

/// "-----BEGIN" in base64 (at any of the three byte alignments' first one, where an encoded
/// PEM starts): a key block handed over encoded (a kubeconfig's `client-key-data`, a variable
/// holding `base64 < key.pem`).
const BASE64_BEGIN: &str = "LS0tLS1CRUdJTi";

/// Incoming-webhook URLs carry their credential in the path: whoever has one can post.
fn webhook_url(v: &str) -> bool {
    [
        "hooks.slack.com/services/",
        "discord.com/api/webhooks/",
        "discordapp.com/api/webhooks/",
        ".webhook.office.com/",
        "outlook.office.com/webhook/",
        "chat.googleapis.com/v1/spaces/",
    ]
    .iter()
    .any(|h| v.contains(h))
}

/// A JSON document with a secret field: a service account's `private_key`, an OAuth client's
/// `client_secret` or `refresh_token` (gcloud's application-default credentials).
fn credential_json(v: &str) -> bool {
    let t = v.trim_start();
    (t.starts_with('{') || t.starts_with('['))
        && [
            "\"private_key\"",
            "\"client_secret\"",
            "\"refresh_token\"",
            "\"access_token\"",
            "\"password\"",
            "\"token\"",
            "\"auth\"",
            "\"apiKey\"",
            "\"api_key\"",
            "\"secret\"",
        ]
        .iter()
        .any(|f| v.contains(f))
}

/// `scheme://user:pass@host`, or `scheme://TOKEN@host` with a user part too long to be a name
/// (`ssh://git@host` and `https://user@host` name a user, not a secret).
fn url_with_userinfo(v: &str) -> bool {
    v.split("://").skip(1).any(|rest| {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        match authority.rsplit_once('@') {
            Some((userinfo, _)) => userinfo.contains(':') || userinfo.len() >= 20,
            None => false,
        }
    })
}

/// A connection string or header with a password or token in it (`Server=h;Password=p`,
/// `?password=x`, `Authorization: …`, `Bearer …`).
fn credential_field(v: &str) -> bool {
    let lower = v.to_ascii_lowercase();
    let field = [
        "password=",
        "pwd=",
        "passwd=",
        "token=",
        "secret=",
        "apikey=",
        "api_key=",
        // Azure: storage and Service Bus connection strings, SAS tokens.
        "accountkey=",
        "sharedaccesskey=",
        "&sig=",
        "client-key-data:",
        "client-secret:",
        "aws_secret_access_key",
        "x-api-key:",
        "authorization:",
    ]
    .iter()
    .any(|f| lower.contains(f));
    field
        || ["bearer ", "basic ", "token "]
            .iter()
            .any(|p| lower.starts_with(p) && v.len() > p.len() + 8)
}

/// Well-known token prefixes, each with the length and alphabet of what follows, matched at the
/// start of a word anywhere in the value (`--token=ghp_…`, `token ghp_…`).
const TOKEN_SHAPES: &[(&str, usize, &str)] = &[
    ("ghp_", 30, "a GitHub token"),
    ("gho_", 30, "a GitHub token"),
    ("ghu_", 30, "a GitHub token"),
    ("ghs_", 30, "a GitHub token"),
    ("ghr_", 30, "a GitHub token"),
    ("github_pat_", 22, "a GitHub token"),
    ("glpat-", 20, "a GitLab token"),
    ("gldt-", 20, "a GitLab token"),
    ("glrt-", 20, "a GitLab token"),
    ("glptt-", 20, "a GitLab token"),
    ("xoxb-", 10, "a Slack token"),
    ("xoxp-", 10, "a Slack token"),
    ("xoxa-", 10, "a Slack token"),
    ("xoxo-", 10, "a Slack token"),
    ("xoxr-", 10, "a Slack token"),
    ("xoxs-", 10, "a Slack token"),
    ("xoxe-", 10, "a Slack token"),
    ("xapp-", 10, "a Slack token"),
    ("AKIA", 16, "an AWS access key"),
    ("ASIA", 16, "an AWS access key"),
    ("AIza", 30, "a Google API key"),
    ("ya29.", 20, "a Google OAuth token"),
    ("sk_live_", 16, "a Stripe key"),
    ("rk_live_", 16, "a Stripe key"),
    ("sk_test_", 16, "a Stripe key"),
    ("whsec_", 16, "a webhook signing secret"),
    ("sk-", 20, "an OpenAI or Anthropic key"),
    ("npm_", 30, "an npm token"),
    ("pypi-", 40, "a PyPI token"),
    ("hf_", 30, "a Hugging Face token"),
    ("AGE-SECRET-KEY-", 40, "an age secret key"),
];

fn token_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// One pass over the value: only where a word starts can a token start, and most values have
/// few words (a launch checks every variable, so this must stay linear).
fn token_shape(v: &str) -> Option<&'static str> {
    let b = v.as_bytes();
    let starts = |c: &u8| *c == b'e' || TOKEN_SHAPES.iter().any(|(p, _, _)| p.as_bytes()[0] == *c);
    for i in (0..b.len()).filter(|&i| (i == 0 || !token_char(b[i - 1])) && starts(&b[i])) {
        let rest = &b[i..];
        for (prefix, min, kind) in TOKEN_SHAPES {
            let Some(after) = rest.strip_prefix(prefix.as_bytes()) else {
                continue;
            };
            let tail = &after[..after.iter().take_while(|c| token_char(**c)).count()];
            // AWS key ids are exactly 16 upper-case letters and digits after the prefix.
            let tail_ok = if prefix.starts_with("AKIA") || prefix.starts_with("ASIA") {
                tail.len() == *min
                    && tail
                        .iter()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            } else {
                tail.len() >= *min && tail.iter().any(|c| c.is_ascii_digit())
            };
            if tail_ok {
                return Some(kind);
            }
        }
        if jwt(rest) {
            return Some("a JSON Web Token");
        }
    }
    None
}

/// `header.payload.signature` at the start of `b`, base64url, header and payload JSON objects
/// (`eyJ` is `{"`).
fn jwt(b: &[u8]) -> bool {
    let segment = |b: &[u8]| b.iter().take_while(|c| token_char(**c)).count();
    let part = |b: &[u8]| -> Option<usize> {
        let n = segment(b);
        (b.starts_with(b"eyJ") && n >= 10 && b.get(n) == Some(&b'.')).then_some(n + 1)
    };
    let Some(header) = part(b) else {
        return false;
    };
    part(&b[header..]).is_some()
}

/// An AWS secret access key: 40 characters of base64 with both cases (a hex digest, all lower
/// case, is not one).
fn aws_secret_shape(v: &str) -> bool {
    v.len() == 40
        && v.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'/' || c == b'+')
        && v.bytes().any(|c| c.is_ascii_uppercase())
        && v.bytes().any(|c| c.is_ascii_lowercase())
        && v.bytes()
            .any(|c| c.is_ascii_digit() || c == b'/' || c == b'+')
}

/// One long word of base64 or base64url with every character class and the spread of a random
/// string. Left alone on purpose: anything with a separator a list or a sentence has (`:`, `;`,
/// `,`, a space), paths (a leading `/`, `.`, `~`), and hex or single-case strings (commit ids,
/// digests, UUIDs, systemd's INVOCATION_ID: ordinary values in every CI and session).
fn high_entropy(v: &str) -> bool {
    const MIN_LEN: usize = 32;
    const MIN_BITS_PER_CHAR: f64 = 4.3;
    if v.len() < MIN_LEN || v.starts_with(['/', '.', '~']) {
        return false;
    }
    if !v
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"+/=_-.".contains(&c))
    {
        return false;
    }
    // One word of that alphabet: its spread is judged on its first 8 KiB (a longer blob is no
    // less random, and the count stays cheap).
    let v = &v[..v.len().min(8192)];
    let count = |f: fn(&u8) -> bool| v.as_bytes().iter().filter(|c| f(c)).count();
    let (upper, lower, digit) = (
        count(u8::is_ascii_uppercase),
        count(u8::is_ascii_lowercase),
        count(u8::is_ascii_digit),
    );
    if upper < 2 || lower < 2 || digit < 2 {
        return false;
    }
    let mut freq = [0usize; 256];
    for c in v.bytes() {
        freq[c as usize] += 1;
    }
    let n = v.len() as f64;
    let bits: f64 = freq
        .iter()
        .filter(|&&f| f > 0)
        .map(|&f| {
            let p = f as f64 / n;
            -p * p.log2()
        })
        .sum();
    bits >= MIN_BITS_PER_CHAR
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_of_secret_is_found_by_value() {
        let pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n";
        let cases = [
            pem,
            "-----BEGIN RSA PRIVATE KEY-----\\nMIIEow\\n-----END RSA PRIVATE KEY-----",
            "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----",
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIF\n-----END ENCRYPTED PRIVATE KEY-----",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----",
            r#"{"type": "service_account", "project_id": "p", "private_key_id": "1", "private_key": "-----BEGIN PRIVATE KEY-----\nMII\n-----END PRIVATE KEY-----\n"}"#,
            r#"{"type":"service_account","private_key":"x"}"#,
            r#"{"client_id":"1.apps.googleusercontent.com","client_secret":"d-x","refresh_token":"1//0g","type":"authorized_user"}"#,
            "postgres://app:hunter2@db.internal:5432/app",
            "https://x-access-token:abc@github.com/o/r.git",
            "redis://:secretpw@cache:6379/0",
            "Server=db;Database=x;User Id=sa;Password=p4ss;",
            "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV",
            "glpat-xxxxxxxxxxxxxxxxxxx1",
            "xoxb-2048-1234567890-abcdefABCDEF",
            "xoxp-123456789012-123456789012-123456789012-abcdef",
            "AKIAIOSFODNN7EXAMPLE",
            "ASIAY34FZKBOKMUTVV7A",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
            "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "sk-proj-AbCdEf0123456789ghIJklMNopQRstUVwx",
            "sk-ant-api03-AbCdEf0123456789ghIJklMNopQRstUVwxYZ-abcdefg",
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "npm_abcdefghijklmnopqrstuvwxyz0123456789",
            "--token=ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
            "pypi-AgEIcHlwaS5vcmcCJGE4ZjY0ZTYzLTRhNjItNDhhZC1iOGJjLTU3YmVmZDc4MjY2OQ",
            "AGE-SECRET-KEY-1QQPQZRTN6GZ4EDWHUXMA0RT6VEG3LHDWEWY6Q6ZX0WQV5K7ZXY9QS3L2V9",
            "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MEFCQ0RFRkdISUpLTE1OT1A=",
            "8Kd2LmQ9xRvT4wYbN7pZsE1uJcH6gFa3",
            "dGhpc2lzYXZlcnlsb25nc2VjcmV0a2V5MTIzNDU2Nzg5MA",
        ];
        for v in cases {
            assert!(secret_in_value(v).is_some(), "not found: {v}");
        }
        assert_eq!(secret_in_value(pem), Some("a private key block"));
        assert_eq!(
            secret_in_value("AKIAIOSFODNN7EXAMPLE"),
            Some("an AWS access key")
        );
    }

    #[test]
    fn ordinary_values_stay() {
        let cases = [
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "/home/user/.local/share/flatpak/exports/share:/usr/local/share:/usr/share",
            "/home/user/projects/some-very-long-project-name/target/debug/build",
            "./node_modules/.bin/some-tool-with-a-long-name-v2",
            "~/go/pkg/mod/github.com/SomeOrg/SomeRepo2@v1.2.3",
            "rs=0:di=01;34:ln=01;36:mh=00:pi=40;33:so=01;35:do=01;35:bd=40;33;01",
            "xterm-256color",
            "truecolor",
            "en_US.UTF-8",
            "1.2.3-beta.4+build.5678",
            "v20.11.1",
            "3.11.4",
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
            "550e8400-e29b-41d4-a716-446655440000",
            "0f5e6d7c8b9a41b2a3c4d5e6f7a8b9c0",
            "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "ghcr.io/some-org/some-image:2024.05.01-abcdef1",
            "--max-old-space-size=4096",
            "-C target-cpu=native -C link-arg=-fuse-ld=lld",
            "ip-10-0-12-34.eu-west-1.compute.internal",
            "MyApplicationServiceNameForProductionV2",
            "org.gradle.jvmargs=-Xmx4096m -XX:MaxMetaspaceSize=512m",
            "https://registry.npmjs.org/",
            "http://proxy.internal:3128",
            "see https://example.org/a@b",
            "git@github.com:org/repo.git",
            "/run/user/1000/vscode-git-7a3b2c1d.sock",
            "w0t0p0:4F5A6B7C-1D2E-3F40-8A9B-0C1D2E3F4A5B",
            "github_6d1a1d4e-2f3b-4c5d-8e9f-0a1b2c3d4e5f",
            "less -FRX",
            "| /usr/bin/lesspipe %s",
            "Europe/Berlin",
            "ubuntu22",
            "/bin/bash",
            "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIE\n-----END CERTIFICATE-----",
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@host",
            "skip-this-step",
            "sk-learn",
            "task-1234567890",
            "AKIAFOO",
            "npm_config_cache",
            r#"{"extends": "./tsconfig.base.json", "compilerOptions": {"strict": true}}"#,
            "CamelCaseIdentifierWithDigits12AndMoreWords",
            "libfoo-1.2.3-x86_64-unknown-linux-gnu-release",
            "x86_64-unknown-linux-gnu",
        ];
        for v in cases {
            assert_eq!(secret_in_value(v), None, "taken for a secret: {v}");
        }
    }
}
