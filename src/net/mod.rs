//! Network policy: what a sandboxed command may reach.
//!
//! - [`spec`] parses `--net` values into a [`NetPolicy`] (pure).
//! - [`allow`] decides single destinations for the proxy mode (pure).
//! - [`decision`] is the record of one request the proxy decided on, as the run report lists it
//!   (plain data).
//! - [`proxy`] is the filtering HTTP/SOCKS5 proxy the supervisor runs outside the sandbox, on a
//!   listener that lives in the sandbox's network namespace: the command has no route out, so
//!   the proxy is its only way to the network, and names are resolved by the proxy, never by
//!   the command.
//! - [`secrets`] is what `--secret` says and how a placeholder is replaced (pure); the values
//!   are held by the proxy alone.

pub mod allow;
pub mod decision;
#[cfg(target_os = "linux")]
pub mod peer;
#[cfg(target_os = "linux")]
pub mod proxy;
pub mod secrets;
pub mod spec;

use std::net::SocketAddr;

pub use allow::{AllowList, DomainPattern, Refusal, is_special};
pub use decision::{Decision, Protocol};
pub use spec::{NetPolicy, NetSpecError};

/// The environment that points common tools at the proxy listening on `addr` (inside the
/// sandbox). Both spellings are set because curl reads only the lower-case `http_proxy` (the
/// upper-case one is ignored against "httpoxy"), while other tools read only upper case.
/// `NO_PROXY` names loopback only (whatever the caller had is replaced): inside the command's own
/// network namespace loopback is its own (a dev server it started), which the proxy would refuse
/// as a special address; without a namespace Landlock lets TCP reach the proxy's port alone, so a
/// direct loopback connection fails there anyway. A loopback address that `allow-host` names (a
/// model server on the host's 127.0.0.1:11434) is left out of it: requests to it must go to the
/// proxy, which reaches the host's loopback; `localhost` stays the sandbox's own. `socks5h` makes
/// SOCKS clients leave name resolution to the proxy.
pub fn proxy_env(addr: SocketAddr, allow_hosts: &[SocketAddr]) -> Vec<(String, String)> {
    let http = format!("http://{addr}");
    let socks = format!("socks5h://{addr}");
    let mut out = Vec::new();
    for (name, value) in [
        ("HTTP_PROXY", &http),
        ("HTTPS_PROXY", &http),
        ("ALL_PROXY", &socks),
        ("NO_PROXY", &no_proxy(allow_hosts)),
    ] {
        out.push((name.to_string(), value.clone()));
        out.push((name.to_ascii_lowercase(), value.clone()));
    }
    out
}

fn no_proxy(allow_hosts: &[SocketAddr]) -> String {
    let mut names = vec!["localhost".to_string()];
    for ip in ["127.0.0.1", "::1"] {
        if !allow_hosts.iter().any(|h| h.ip().to_string() == ip) {
            names.push(ip.to_string());
        }
    }
    names.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_env_sets_both_spellings() {
        let env = proxy_env("127.0.0.1:3128".parse().unwrap(), &[]);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("http_proxy"), Some("http://127.0.0.1:3128"));
        assert_eq!(get("HTTPS_PROXY"), Some("http://127.0.0.1:3128"));
        assert_eq!(get("all_proxy"), Some("socks5h://127.0.0.1:3128"));
        assert_eq!(get("NO_PROXY"), Some("localhost,127.0.0.1,::1"));
        assert_eq!(env.len(), 8);
        let v6 = proxy_env("[::1]:3128".parse().unwrap(), &[]);
        let host = proxy_env(
            "127.0.0.1:3128".parse().unwrap(),
            &["127.0.0.1:11434".parse().unwrap()],
        );
        let no_proxy = host.iter().find(|(k, _)| k == "no_proxy").unwrap();
        assert_eq!(
            no_proxy.1, "localhost,::1",
            "the host's loopback goes to the proxy"
        );
        assert_eq!(v6[0].1, "http://[::1]:3128");
    }
}
