//! Secrets the proxy adds on the way out (`--secret NAME[@HOST,...]`, a profile's `[secrets]`):
//! the command gets a placeholder in its environment, and the proxy puts the real value in its
//! place only in the credential headers of requests to the secret's own hosts, over TLS it
//! terminates for those hosts alone (`proxy::intercept`).
//!
//! Pure: what `--secret` says, what a placeholder looks like, which headers carry credentials,
//! and the replacement itself. The values live in [`Injection`], which only the proxy (outside
//! the sandbox) holds; nothing here prints one (`Debug` shows names and hosts only).

use std::fmt;

use serde::Serialize;

use super::allow::DomainPattern;

/// What the command sees in place of a secret: recognisable in a log, unique to the run, and
/// made of characters every header and environment accepts.
pub const PLACEHOLDER_PREFIX: &str = "jail-placeholder-";

/// One `--secret` or profile declaration: the variable and the hosts its value is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretRule {
    /// The environment variable that holds the value outside (and the placeholder inside).
    pub name: String,
    /// Hosts (names, or `*.domain` patterns) the value is added for. Empty for a profile's key
    /// none of whose hosts the network allows: the placeholder then goes nowhere.
    pub hosts: Vec<String>,
    /// The hosts a profile declares for the key that the network does not allow (the value is
    /// added for none of them), for the dry run and the report.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_allowed: Vec<String>,
    /// Where the rule came from (`--secret`, `profile claude-code`), for the dry run and errors.
    pub from: String,
    /// Asked for with `--secret` (refused where it cannot hold), not only declared by the
    /// profile (then passed in the environment as before where it cannot).
    pub explicit: bool,
    /// What the command gets in the variable instead of the value.
    pub placeholder: String,
}

/// `NAME` or `NAME@HOST,HOST`: the name and the hosts, if given.
pub fn parse_flag(spec: &str) -> Result<(String, Option<Vec<String>>), String> {
    let (name, hosts) = match spec.split_once('@') {
        Some((n, h)) => (n, Some(h)),
        None => (spec, None),
    };
    check_name(name).map_err(|why| format!("--secret {}: {why}", crate::text::printable(spec)))?;
    let hosts = match hosts {
        None => None,
        Some(h) => {
            let list: Vec<String> = h
                .split(',')
                .map(|s| s.trim().to_ascii_lowercase())
                .collect();
            for host in &list {
                check_host(host)
                    .map_err(|why| format!("--secret {}: {why}", crate::text::printable(spec)))?;
            }
            Some(list)
        }
    };
    Ok((name.to_string(), hosts))
}

/// An environment variable name: letters, digits and `_`, not starting with a digit.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit();
    if ok {
        Ok(())
    } else {
        Err("the name must be an environment variable (letters, digits, '_')".into())
    }
}

/// A host a secret belongs to: a name or a `*.domain` pattern, never an address or a bare `*`
/// (the value would go wherever the command asked).
pub fn check_host(host: &str) -> Result<(), String> {
    if host.is_empty() {
        return Err("empty host after '@' (NAME@api.example.com)".into());
    }
    if host.parse::<std::net::IpAddr>().is_ok() {
        return Err(format!(
            "{host} is an address; a secret is added only for names, whose certificate proves them"
        ));
    }
    // Exact names only: a pattern would send the value to hosts nobody named, and beneath one
    // API domain there are often hosts that serve anyone's content (buckets, pages, previews).
    if host.contains('*') {
        return Err(format!(
            "{}: a pattern would send the value to hosts nobody named; name each API host \
             exactly",
            crate::text::printable(host)
        ));
    }
    DomainPattern::parse(host)
        .map(|_| ())
        .map_err(|why| format!("{}: {why}", crate::text::printable(host)))
}

/// The placeholder for `name` made from 16 random bytes.
pub fn placeholder(name: &str, random: [u8; 16]) -> String {
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    format!("{PLACEHOLDER_PREFIX}{}-{hex}", name.to_ascii_lowercase())
}

/// Whether a request header carries credentials, and so may get a secret's value: the ones API
/// clients use (`Authorization`, `x-api-key`, `api-key`, `x-goog-api-key`, …, and the token
/// headers). Other headers keep the placeholder: a value in `User-Agent` or a custom header could
/// be echoed back in a response (an error page, a debug endpoint), where the command reads it.
pub fn is_credential_header(name: &[u8]) -> bool {
    let lower = name.to_ascii_lowercase();
    lower == b"authorization"
        || lower.ends_with(b"api-key")
        || lower.ends_with(b"-api-token")
        || lower.ends_with(b"-auth-token")
        || lower == b"x-auth-key"
}

/// A secret as the proxy holds it.
pub struct Secret {
    pub name: String,
    pub placeholder: String,
    value: Vec<u8>,
    hosts: Vec<DomainPattern>,
}

impl Secret {
    pub fn new(rule: &SecretRule, value: Vec<u8>) -> Result<Secret, String> {
        let hosts = rule
            .hosts
            .iter()
            .map(|h| DomainPattern::parse(h).map_err(|why| format!("{h}: {why}")))
            .collect::<Result<Vec<_>, _>>()?;
        if value.is_empty() || value.iter().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
            return Err(format!(
                "{}: the value is empty or holds a line break or NUL, which no header can carry",
                rule.name
            ));
        }
        Ok(Secret {
            name: rule.name.clone(),
            placeholder: rule.placeholder.clone(),
            value,
            hosts,
        })
    }

    /// The hosts the value is added for.
    pub fn hosts(&self) -> &[DomainPattern] {
        &self.hosts
    }

    fn is_for(&self, host: &str) -> bool {
        self.hosts.iter().any(|p| p.matches(host))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        // Not left in freed memory for whatever reuses it.
        for b in self.value.iter_mut() {
            // SAFETY: `b` is a valid, aligned, exclusive reference; the volatile write keeps
            // the compiler from dropping a store to memory about to be freed.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
    }
}

/// Every secret of a run.
#[derive(Debug, Default)]
pub struct Injection {
    pub secrets: Vec<Secret>,
}

impl Injection {
    /// Whether any secret belongs to `host` (so its TLS is terminated by the proxy).
    pub fn intercepts(&self, host: &str) -> bool {
        self.secrets.iter().any(|s| s.is_for(host))
    }

    /// One header value with every placeholder of a secret for `host` replaced, and the names
    /// of the secrets put in; None when nothing was replaced (the value goes on as it was).
    /// HTTP Basic credentials (`Basic base64(user:password)`, what git sends with a token as
    /// its password) are decoded, replaced and encoded again.
    pub fn replace(&self, host: &str, value: &[u8]) -> Option<(Vec<u8>, Vec<&str>)> {
        if let Some(encoded) = basic_credentials(value) {
            use base64::Engine;
            let engine = base64::engine::general_purpose::STANDARD;
            let decoded = engine.decode(encoded).ok()?;
            let (replaced, used) = self.replace_text(host, &decoded)?;
            let mut out = value[..value.len() - encoded.len()].to_vec();
            out.extend_from_slice(engine.encode(replaced).as_bytes());
            return Some((out, used));
        }
        self.replace_text(host, value)
    }

    fn replace_text(&self, host: &str, value: &[u8]) -> Option<(Vec<u8>, Vec<&str>)> {
        let mut out: Option<Vec<u8>> = None;
        let mut used = Vec::new();
        for s in self.secrets.iter().filter(|s| s.is_for(host)) {
            let current = out.as_deref().unwrap_or(value);
            if let Some(replaced) = replace_all(current, s.placeholder.as_bytes(), &s.value) {
                out = Some(replaced);
                used.push(s.name.as_str());
            }
        }
        out.map(|v| (v, used))
    }
}

/// The base64 part of a `Basic` credential (the scheme is case-insensitive, RFC 9110 11.1).
fn basic_credentials(value: &[u8]) -> Option<&[u8]> {
    let scheme = value.get(..6)?;
    if !scheme.eq_ignore_ascii_case(b"basic ") {
        return None;
    }
    let rest = &value[6..];
    let start = rest.iter().position(|b| *b != b' ')?;
    Some(&rest[start..])
}

/// `haystack` with every `needle` replaced by `with`; None when there is none.
fn replace_all(haystack: &[u8], needle: &[u8], with: &[u8]) -> Option<Vec<u8>> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    let mut out = Vec::with_capacity(haystack.len() + with.len());
    let mut i = 0;
    let mut found = false;
    while i < haystack.len() {
        if haystack.get(i..i + needle.len()) == Some(needle) {
            out.extend_from_slice(with);
            i += needle.len();
            found = true;
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    found.then_some(out)
}

/// An injection for unit tests: (name, host, placeholder, value) per secret.
#[cfg(test)]
pub(crate) fn test_injection(secrets: &[(&str, &str, &str, &[u8])]) -> Injection {
    let secret = |(name, host, placeholder, value): &(&str, &str, &str, &[u8])| {
        let rule = SecretRule {
            name: name.to_string(),
            hosts: vec![host.to_string()],
            not_allowed: Vec::new(),
            from: "test".into(),
            explicit: true,
            placeholder: placeholder.to_string(),
        };
        Secret::new(&rule, value.to_vec()).expect("a valid test secret")
    };
    Injection {
        secrets: secrets.iter().map(secret).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(name: &str, hosts: &[&str], placeholder: &str) -> SecretRule {
        SecretRule {
            name: name.into(),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            not_allowed: Vec::new(),
            from: "--secret".into(),
            explicit: true,
            placeholder: placeholder.into(),
        }
    }

    #[test]
    fn flags_parse_and_bad_ones_name_the_fix() {
        assert_eq!(parse_flag("KEY"), Ok(("KEY".into(), None)));
        assert_eq!(
            parse_flag("OPENAI_API_KEY@API.openai.com,eu.openai.com"),
            Ok((
                "OPENAI_API_KEY".into(),
                Some(vec!["api.openai.com".into(), "eu.openai.com".into()])
            ))
        );
        for (bad, says) in [
            ("", "environment variable"),
            ("1KEY", "environment variable"),
            ("K-EY", "environment variable"),
            ("KEY@", "empty host"),
            ("KEY@a.test,", "empty host"),
            ("KEY@127.0.0.1", "address"),
            ("KEY@::1", "address"),
            ("KEY@*", "hosts nobody named"),
            ("KEY@*.example.com", "name each API host exactly"),
        ] {
            let err = parse_flag(bad).unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
    }

    #[test]
    fn placeholders_are_unique_and_header_safe() {
        let p = placeholder("ANTHROPIC_API_KEY", [0xab; 16]);
        assert_eq!(
            p,
            "jail-placeholder-anthropic_api_key-abababababababababababababababab"
        );
        assert!(p.bytes().all(|b| b.is_ascii_graphic()));
        assert_ne!(p, placeholder("ANTHROPIC_API_KEY", [0xac; 16]));
    }

    #[test]
    fn only_credential_headers_carry_values() {
        for yes in [
            "Authorization",
            "x-api-key",
            "X-Goog-Api-Key",
            "api-key",
            "x-auth-token",
            "X-Vault-Auth-Token",
        ] {
            assert!(is_credential_header(yes.as_bytes()), "{yes}");
        }
        for no in [
            "User-Agent",
            "Cookie",
            "X-Echo",
            "Host",
            "Proxy-Authorization",
            "content-type",
            "apikeyx",
        ] {
            assert!(!is_credential_header(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn replacement_is_per_host_and_never_debug_printed() {
        let a = Secret::new(&rule("A", &["api.a.test"], "ph-a"), b"real-a".into()).unwrap();
        let b = Secret::new(&rule("B", &["x.b.test"], "ph-b"), b"real-b".into()).unwrap();
        let inj = Injection {
            secrets: vec![a, b],
        };
        assert!(inj.intercepts("api.a.test") && inj.intercepts("x.b.test"));
        assert!(!inj.intercepts("a.test") && !inj.intercepts("y.b.test"));
        assert!(!inj.intercepts("b.test") && !inj.intercepts("x.b.test.evil"));
        assert_eq!(
            inj.replace("api.a.test", b"Bearer ph-a ph-a ph-b"),
            Some((b"Bearer real-a real-a ph-b".to_vec(), vec!["A"]))
        );
        assert_eq!(inj.replace("other.test", b"Bearer ph-a"), None);
        assert_eq!(inj.replace("api.a.test", b"ph-"), None);
        let shown = format!("{inj:?}");
        assert!(
            !shown.contains("real-") && shown.contains("api.a.test"),
            "{shown}"
        );
        for bad in [&b""[..], b"a\r\nX: y", b"a\0"] {
            assert!(Secret::new(&rule("A", &["a.test"], "p"), bad.to_vec()).is_err());
        }
    }

    #[test]
    fn basic_credentials_get_the_value_inside_their_base64() {
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let a = Secret::new(&rule("A", &["git.a.test"], "ph-a"), b"real-a".into()).unwrap();
        let inj = Injection { secrets: vec![a] };
        // What git sends for https://x-access-token:TOKEN@host/ (any case of the scheme).
        for scheme in ["Basic ", "basic ", "BASIC  "] {
            let sent = format!("{scheme}{}", b64("x-access-token:ph-a"));
            let want = format!("{scheme}{}", b64("x-access-token:real-a"));
            assert_eq!(
                inj.replace("git.a.test", sent.as_bytes()),
                Some((want.into_bytes(), vec!["A"])),
                "{scheme:?}"
            );
            // Another host: the credential goes on as it was.
            assert_eq!(inj.replace("other.test", sent.as_bytes()), None);
        }
        // Not base64, or no placeholder inside: unchanged.
        assert_eq!(inj.replace("git.a.test", b"Basic ph-a!!"), None);
        let plain = format!("Basic {}", b64("user:password"));
        assert_eq!(inj.replace("git.a.test", plain.as_bytes()), None);
    }
}
