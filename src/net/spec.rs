//! The network policy as written on the command line (`--net VALUE`, repeatable) or in a profile
//! (`net = ["allow=api.anthropic.com", ...]`). Pure parsing: nothing here touches the network.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

/// The forms `--net` accepts, for error messages.
const VALID_FORMS: &str =
    "expected host, none, connect=PORTS, bind=PORTS, allow=DOMAINS or allow-host=IP:PORT";

/// Longest domain name DNS can carry (RFC 1035, without the final dot).
const MAX_NAME: usize = 253;
/// Longest DNS label.
const MAX_LABEL: usize = 63;
/// How many list entries [`NetPolicy::summary`] shows before it abbreviates.
const SUMMARY_ITEMS: usize = 5;

/// What the sandboxed command may reach over the network.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum NetPolicy {
    /// The host's network, unrestricted.
    #[default]
    Host,
    /// A network namespace of its own with loopback only.
    None,
    /// The host's network, with Landlock limiting the TCP ports it may connect to or bind (and
    /// listen on). `None`: that direction was not named, and gets no port.
    Ports {
        connect: Option<Vec<u16>>,
        bind: Option<Vec<u16>>,
    },
    /// A network namespace of its own whose only way out is the supervisor's proxy, which lets
    /// through the listed names (`*.example.com` patterns allowed) and exact `IP:PORT` pairs.
    Proxy {
        allow: Vec<String>,
        allow_hosts: Vec<SocketAddr>,
    },
}

/// A `--net` value that cannot be used; every message is one line naming the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetSpecError {
    #[error("--net {value}: {reason}")]
    Invalid { value: String, reason: String },
    #[error("--net {value}: unknown form; {VALID_FORMS}")]
    Unknown { value: String },
    #[error(
        "--net {first} and --net {second} cannot be combined: host, none, connect/bind ports and \
         allow/allow-host are separate modes"
    )]
    Conflict { first: String, second: String },
}

/// A `--net` value refused: the value at fault (the later one of a conflict) as the error's data.
impl From<NetSpecError> for crate::JailError {
    fn from(e: NetSpecError) -> crate::JailError {
        let value = match &e {
            NetSpecError::Invalid { value, .. } | NetSpecError::Unknown { value } => value.clone(),
            NetSpecError::Conflict { second, .. } => second.clone(),
        };
        crate::JailError::bad_flag("--net", value, e.to_string())
    }
}

impl NetSpecError {
    fn invalid(value: &str, reason: impl Into<String>) -> Self {
        NetSpecError::Invalid {
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

/// Which mode a value belongs to; values of different modes cannot be combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Host,
    None,
    Ports,
    Proxy,
}

impl NetPolicy {
    /// Combines every `--net` value (command line and profile) into one policy. No values means
    /// [`NetPolicy::Host`], which keeps jail's behaviour without the flag.
    pub fn parse(values: &[String]) -> Result<NetPolicy, NetSpecError> {
        // The first value seen of the current mode, to name both sides of a conflict.
        let mut mode: Option<(Mode, &str)> = None;
        let mut connect: Option<Vec<u16>> = None;
        let mut bind: Option<Vec<u16>> = None;
        let mut allow: Vec<String> = Vec::new();
        let mut allow_hosts: Vec<SocketAddr> = Vec::new();

        for value in values {
            let this = match value.split_once('=') {
                None if value == "host" => Mode::Host,
                None if value == "none" => Mode::None,
                Some(("connect", list)) => {
                    extend_unique(
                        connect.get_or_insert_with(Vec::new),
                        parse_ports(value, list)?,
                    );
                    Mode::Ports
                }
                Some(("bind", list)) => {
                    extend_unique(bind.get_or_insert_with(Vec::new), parse_ports(value, list)?);
                    Mode::Ports
                }
                Some(("allow", list)) => {
                    extend_unique(&mut allow, parse_domains(value, list)?);
                    Mode::Proxy
                }
                Some(("allow-host", list)) => {
                    extend_unique(&mut allow_hosts, parse_hosts(value, list)?);
                    Mode::Proxy
                }
                _ => {
                    return Err(NetSpecError::Unknown {
                        value: value.clone(),
                    });
                }
            };
            match mode {
                None => mode = Some((this, value)),
                Some((m, first)) if m != this => {
                    return Err(NetSpecError::Conflict {
                        first: first.to_string(),
                        second: value.clone(),
                    });
                }
                Some(_) => {}
            }
        }

        Ok(match mode.map(|(m, _)| m) {
            None | Some(Mode::Host) => NetPolicy::Host,
            Some(Mode::None) => NetPolicy::None,
            Some(Mode::Ports) => NetPolicy::Ports { connect, bind },
            Some(Mode::Proxy) => NetPolicy::Proxy { allow, allow_hosts },
        })
    }

    /// One short line for notices and status: `none`, `connect 443,80`,
    /// `allow api.anthropic.com, *.npmjs.org; allow-host 127.0.0.1:8080`.
    pub fn summary(&self) -> String {
        match self {
            NetPolicy::Host => "host".to_string(),
            NetPolicy::None => "none".to_string(),
            NetPolicy::Ports { connect, bind } => {
                let mut parts = Vec::new();
                if let Some(p) = connect {
                    parts.push(format!("connect {}", abbreviate(p, ",")));
                }
                if let Some(p) = bind {
                    parts.push(format!("bind {}", abbreviate(p, ",")));
                }
                if parts.is_empty() {
                    "ports".to_string()
                } else {
                    parts.join("; ")
                }
            }
            NetPolicy::Proxy { allow, allow_hosts } => {
                let mut parts = Vec::new();
                if !allow.is_empty() {
                    parts.push(format!("allow {}", abbreviate(allow, ", ")));
                }
                if !allow_hosts.is_empty() {
                    parts.push(format!("allow-host {}", abbreviate(allow_hosts, ", ")));
                }
                if parts.is_empty() {
                    "allow nothing".to_string()
                } else {
                    parts.join("; ")
                }
            }
        }
    }
}

fn abbreviate<T: fmt::Display>(items: &[T], sep: &str) -> String {
    let shown: Vec<String> = items
        .iter()
        .take(SUMMARY_ITEMS)
        .map(|i| i.to_string())
        .collect();
    let mut out = shown.join(sep);
    if items.len() > SUMMARY_ITEMS {
        out.push_str(&format!(" (+{} more)", items.len() - SUMMARY_ITEMS));
    }
    out
}

/// Appends the items not already present, keeping first-seen order.
fn extend_unique<T: PartialEq>(into: &mut Vec<T>, items: Vec<T>) {
    for item in items {
        if !into.contains(&item) {
            into.push(item);
        }
    }
}

/// Splits a comma list; spaces around items are forgiven, empty items are not (a stray comma is
/// more likely a typo than intent).
fn split_list<'a>(value: &str, list: &'a str, what: &str) -> Result<Vec<&'a str>, NetSpecError> {
    if list.trim().is_empty() {
        return Err(NetSpecError::invalid(value, format!("empty {what} list")));
    }
    let items: Vec<&str> = list.split(',').map(str::trim).collect();
    if items.iter().any(|i| i.is_empty()) {
        return Err(NetSpecError::invalid(
            value,
            format!("empty item in the {what} list"),
        ));
    }
    Ok(items)
}

fn parse_ports(value: &str, list: &str) -> Result<Vec<u16>, NetSpecError> {
    let mut out = Vec::new();
    for item in split_list(value, list, "port")? {
        // Digits only: u32's parser would also take "+80".
        let digits = item.bytes().all(|b| b.is_ascii_digit());
        let port = match item.parse::<u32>() {
            Ok(p) if digits && (1..=65535).contains(&p) => p,
            Ok(p) if digits => {
                return Err(NetSpecError::invalid(
                    value,
                    format!("port {p} is not in 1-65535"),
                ));
            }
            _ => {
                return Err(NetSpecError::invalid(
                    value,
                    format!("'{item}' is not a TCP port number (1-65535)"),
                ));
            }
        };
        // In range by the check above.
        out.push(port as u16);
    }
    Ok(out)
}

fn parse_domains(value: &str, list: &str) -> Result<Vec<String>, NetSpecError> {
    split_list(value, list, "domain")?
        .into_iter()
        .map(|item| {
            normalize_domain(item, true)
                .map_err(|reason| NetSpecError::invalid(value, format!("'{item}': {reason}")))
        })
        .collect()
}

fn parse_hosts(value: &str, list: &str) -> Result<Vec<SocketAddr>, NetSpecError> {
    let mut out = Vec::new();
    for item in split_list(value, list, "IP:PORT")? {
        let addr: SocketAddr = item.parse().map_err(|_| {
            NetSpecError::invalid(
                value,
                format!("'{item}' is not IP:PORT (IPv6 is written [::1]:8080)"),
            )
        })?;
        if addr.port() == 0 {
            return Err(NetSpecError::invalid(
                value,
                format!("'{item}': port 0 is not in 1-65535"),
            ));
        }
        out.push(addr);
    }
    Ok(out)
}

/// Checks a domain name (or, with `wildcard`, a `*.example.com` pattern) and returns it in the
/// form it is compared in: lower case, without a final dot. Shared with the proxy, which puts the
/// names clients ask for through the same check before anything is resolved.
pub(crate) fn normalize_domain(name: &str, wildcard: bool) -> Result<String, &'static str> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() {
        return Err("empty domain");
    }
    if name.parse::<IpAddr>().is_ok() || name.contains(':') || name.starts_with('[') {
        return Err("IP addresses go in allow-host=IP:PORT");
    }
    let lower = name.to_ascii_lowercase();
    let rest = match lower.strip_prefix("*.") {
        Some(rest) if wildcard && !rest.contains('*') => rest,
        _ if lower == "*" => return Err("a bare '*' would allow everything; use --net host"),
        _ if lower.contains('*') => {
            return Err("'*' is only allowed as the whole first label, as in *.example.com");
        }
        _ => &lower,
    };
    if rest.len() > MAX_NAME {
        return Err("name longer than 253 characters");
    }
    for label in rest.split('.') {
        if label.is_empty() {
            return Err("empty label");
        }
        if label.len() > MAX_LABEL {
            return Err("label longer than 63 characters");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err("invalid character (letters, digits, '-' and '_' only; IDNs as xn--)");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err("label starts or ends with '-'");
        }
    }
    // getaddrinfo reads "127.1", "0x7f000001" or "2130706433" as IPv4 addresses; no real top-level
    // domain starts with a digit, so such names are refused rather than resolved.
    if rest
        .rsplit('.')
        .next()
        .is_some_and(|tld| tld.starts_with(|c: char| c.is_ascii_digit()))
    {
        return Err("looks like a numeric address (IP addresses go in allow-host=IP:PORT)");
    }
    Ok(lower)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(values: &[&str]) -> Result<NetPolicy, NetSpecError> {
        let v: Vec<String> = values.iter().map(|s| s.to_string()).collect();
        NetPolicy::parse(&v)
    }

    fn err(values: &[&str]) -> String {
        parse(values).expect_err("should fail").to_string()
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn empty_is_host() {
        assert_eq!(parse(&[]).unwrap(), NetPolicy::Host);
        assert_eq!(NetPolicy::default(), NetPolicy::Host);
    }

    #[test]
    fn host_and_none() {
        assert_eq!(parse(&["host"]).unwrap(), NetPolicy::Host);
        assert_eq!(parse(&["none"]).unwrap(), NetPolicy::None);
        assert_eq!(parse(&["none", "none"]).unwrap(), NetPolicy::None);
        assert_eq!(parse(&["host", "host"]).unwrap(), NetPolicy::Host);
    }

    #[test]
    fn ports_accumulate_and_dedup() {
        assert_eq!(
            parse(&["connect=443,80", "connect=80, 22"]).unwrap(),
            NetPolicy::Ports {
                connect: Some(vec![443, 80, 22]),
                bind: None
            }
        );
        assert_eq!(
            parse(&["bind=8080", "connect=443", "bind=8080,9000"]).unwrap(),
            NetPolicy::Ports {
                connect: Some(vec![443]),
                bind: Some(vec![8080, 9000])
            }
        );
        assert_eq!(
            parse(&["connect=1,65535"]).unwrap(),
            NetPolicy::Ports {
                connect: Some(vec![1, 65535]),
                bind: None
            }
        );
    }

    #[test]
    fn bad_ports() {
        assert_eq!(err(&["connect="]), "--net connect=: empty port list");
        assert_eq!(
            err(&["connect=0"]),
            "--net connect=0: port 0 is not in 1-65535"
        );
        assert_eq!(
            err(&["bind=65536"]),
            "--net bind=65536: port 65536 is not in 1-65535"
        );
        assert!(err(&["connect=http"]).contains("'http' is not a TCP port number"));
        assert!(err(&["connect=+80"]).contains("'+80'"));
        assert!(err(&["connect=-1"]).contains("'-1'"));
        assert!(err(&["connect=80,,443"]).contains("empty item"));
        assert!(err(&["connect=80-90"]).contains("'80-90'"));
        assert!(err(&["connect=99999999999999"]).starts_with("--net connect=99999999999999:"));
    }

    #[test]
    fn allow_domains() {
        assert_eq!(
            parse(&[
                "allow=API.Anthropic.com,*.npmjs.org",
                "allow=api.anthropic.com.",
                "allow-host=127.0.0.1:8080,[::1]:9000"
            ])
            .unwrap(),
            NetPolicy::Proxy {
                allow: vec!["api.anthropic.com".into(), "*.npmjs.org".into()],
                allow_hosts: vec![sa("127.0.0.1:8080"), sa("[::1]:9000")]
            }
        );
        assert_eq!(
            parse(&["allow-host=10.1.2.3:443", "allow-host=10.1.2.3:443"]).unwrap(),
            NetPolicy::Proxy {
                allow: vec![],
                allow_hosts: vec![sa("10.1.2.3:443")]
            }
        );
        assert_eq!(
            parse(&["allow=_acme.example.com,xn--bcher-kva.example"]).unwrap(),
            NetPolicy::Proxy {
                allow: vec!["_acme.example.com".into(), "xn--bcher-kva.example".into()],
                allow_hosts: vec![]
            }
        );
    }

    #[test]
    fn bad_domains() {
        assert_eq!(err(&["allow="]), "--net allow=: empty domain list");
        assert!(err(&["allow=a..com"]).contains("'a..com': empty label"));
        assert!(err(&["allow=.example.com"]).contains("empty label"));
        assert!(err(&["allow=*"]).contains("bare '*'"));
        assert!(err(&["allow=*.*.example.com"]).contains("'*' is only allowed"));
        assert!(err(&["allow=a*.example.com"]).contains("'*' is only allowed"));
        assert!(err(&["allow=*."]).contains("bare '*'"));
        assert!(err(&["allow=*.."]).contains("empty label"));
        assert!(err(&["allow=exa mple.com"]).contains("invalid character"));
        assert!(err(&["allow=ex/ample.com"]).contains("invalid character"));
        assert!(err(&["allow=bücher.example"]).contains("invalid character"));
        assert!(err(&["allow=-a.example.com"]).contains("'-'"));
        assert!(err(&["allow=1.2.3.4"]).contains("allow-host"));
        assert!(err(&["allow=::1"]).contains("allow-host"));
        assert!(err(&["allow=[::1]"]).contains("allow-host"));
        assert!(err(&["allow=example.com:443"]).contains("allow-host"));
        assert!(err(&["allow=127.1"]).contains("numeric address"));
        assert!(err(&["allow=0x7f000001"]).contains("numeric address"));
        assert!(err(&[&format!("allow={}.com", "a".repeat(64))]).contains("label longer"));
        let long = vec!["abcdefghi"; 26].join(".");
        assert!(err(&[&format!("allow={long}")]).contains("longer than 253"));
        assert!(err(&["allow=a.com,"]).contains("empty item"));
    }

    #[test]
    fn bad_hosts() {
        assert_eq!(
            err(&["allow-host="]),
            "--net allow-host=: empty IP:PORT list"
        );
        assert!(err(&["allow-host=127.0.0.1"]).contains("is not IP:PORT"));
        assert!(err(&["allow-host=::1:80"]).contains("[::1]:8080"));
        assert!(err(&["allow-host=example.com:80"]).contains("is not IP:PORT"));
        assert!(err(&["allow-host=127.0.0.1:0"]).contains("port 0"));
    }

    #[test]
    fn mixing_modes_names_both_values() {
        assert_eq!(
            err(&["host", "allow=a.com"]),
            "--net host and --net allow=a.com cannot be combined: host, none, connect/bind \
             ports and allow/allow-host are separate modes"
        );
        assert!(err(&["none", "connect=443"]).starts_with("--net none and --net connect=443 "));
        assert!(err(&["connect=443", "allow=a.com"]).starts_with("--net connect=443 and"));
        assert!(err(&["allow-host=1.2.3.4:5", "bind=80"]).contains("--net bind=80 cannot"));
        assert!(err(&["host", "none"]).contains("--net host and --net none"));
        // The first value of the mode in force is the one named.
        assert!(err(&["connect=1", "bind=2", "none"]).contains("--net connect=1 and --net none"));
    }

    #[test]
    fn unknown_forms() {
        let e = err(&["proxy=1"]);
        assert_eq!(
            e,
            "--net proxy=1: unknown form; expected host, none, connect=PORTS, bind=PORTS, \
             allow=DOMAINS or allow-host=IP:PORT"
        );
        assert!(err(&[""]).starts_with("--net : unknown form"));
        assert!(err(&["HOST"]).contains("unknown form"));
        assert!(err(&["host=1"]).contains("unknown form"));
        assert!(err(&["allow"]).contains("unknown form"));
        assert!(!err(&["allow=a\nb"]).contains("\n\n"));
    }

    #[test]
    fn summaries() {
        assert_eq!(NetPolicy::Host.summary(), "host");
        assert_eq!(NetPolicy::None.summary(), "none");
        assert_eq!(
            parse(&["connect=443,80"]).unwrap().summary(),
            "connect 443,80"
        );
        assert_eq!(
            parse(&["connect=443", "bind=8080"]).unwrap().summary(),
            "connect 443; bind 8080"
        );
        assert_eq!(
            parse(&["allow=api.anthropic.com,*.npmjs.org"])
                .unwrap()
                .summary(),
            "allow api.anthropic.com, *.npmjs.org"
        );
        assert_eq!(
            parse(&["allow=a.com", "allow-host=127.0.0.1:80"])
                .unwrap()
                .summary(),
            "allow a.com; allow-host 127.0.0.1:80"
        );
        assert_eq!(
            parse(&["allow=a.com,b.com,c.com,d.com,e.com,f.com,g.com"])
                .unwrap()
                .summary(),
            "allow a.com, b.com, c.com, d.com, e.com (+2 more)"
        );
    }

    #[test]
    fn serde_round_trip() {
        for p in [
            NetPolicy::Host,
            NetPolicy::None,
            parse(&["connect=443", "bind=80"]).unwrap(),
            parse(&["allow=*.a.com", "allow-host=[::1]:80"]).unwrap(),
        ] {
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(serde_json::from_str::<NetPolicy>(&json).unwrap(), p);
        }
        assert_eq!(
            serde_json::to_string(&NetPolicy::None).unwrap(),
            r#"{"mode":"none"}"#
        );
        let proxy = serde_json::to_value(parse(&["allow=a.com"]).unwrap()).unwrap();
        assert_eq!(proxy["mode"], "proxy");
    }

    #[test]
    fn normalize_domain_forms() {
        assert_eq!(normalize_domain("A.COM.", false).unwrap(), "a.com");
        assert_eq!(normalize_domain("*.A.com", true).unwrap(), "*.a.com");
        assert!(normalize_domain("*.a.com", false).is_err());
        assert!(normalize_domain(".", false).is_err());
        assert!(normalize_domain("a.com..", false).is_err());
        assert_eq!(normalize_domain("localhost", false).unwrap(), "localhost");
    }
}
