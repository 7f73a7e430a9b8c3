//! One request the network proxy decided on: the record the proxy keeps and the run report lists
//! under `network.decisions` (schema/report-v1.json).
//!
//! Plain data, apart from the proxy: the report only carries these records, so it needs none of
//! the proxy's code (sockets, threads, protocol parsing), and a library caller can read a report
//! back on any platform. The field names and the protocol spellings are the report's JSON: a
//! change to them is a change of the report's schema.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How a request reached the proxy; serialized as `connect`, `http` or `socks5`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// HTTP `CONNECT host:port`: a tunnel.
    Connect,
    /// A plain HTTP request in absolute form (`GET http://host/path`).
    Http,
    /// SOCKS5 `CONNECT`.
    Socks5,
}

impl Protocol {
    /// The spelling in the report and in jail's log.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Connect => "connect",
            Protocol::Http => "http",
            Protocol::Socks5 => "socks5",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One request the proxy decided on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// When the request was decided.
    pub unix_ms: u128,
    pub protocol: Protocol,
    /// As requested, in lower case, with anything unprintable replaced by '?'.
    pub host: String,
    pub port: u16,
    pub allowed: bool,
    /// Why it was refused, or why an allowed connection failed.
    pub reason: Option<String>,
    /// Bytes relayed from the client to the destination (a rewritten request head included).
    pub bytes_up: u64,
    /// Bytes relayed from the destination to the client.
    pub bytes_down: u64,
    /// The proxy terminated the tunnel's TLS to add a secret (`--secret`): the bytes are then
    /// the requests and responses inside it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub intercepted: bool,
    /// The secrets put into a request on this connection (names only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_serialize_as_their_names() {
        for p in [Protocol::Connect, Protocol::Http, Protocol::Socks5] {
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{p}\""));
            assert_eq!(serde_json::from_str::<Protocol>(&json).unwrap(), p);
        }
        assert!(serde_json::from_str::<Protocol>("\"CONNECT\"").is_err());
    }

    #[test]
    fn a_decision_reads_back_as_written() {
        let d = Decision {
            unix_ms: 1_796_051_860_336,
            protocol: Protocol::Socks5,
            host: "api.example.com".into(),
            port: 443,
            allowed: false,
            reason: Some("name not on the allow list".into()),
            bytes_up: 0,
            bytes_down: 7,
            intercepted: false,
            secrets: Vec::new(),
        };
        let json = serde_json::to_string(&d).unwrap();
        // The report's text, field for field, as it was when the protocol was a string.
        assert_eq!(
            json,
            concat!(
                r#"{"unix_ms":1796051860336,"protocol":"socks5","host":"api.example.com","#,
                r#""port":443,"allowed":false,"reason":"name not on the allow list","#,
                r#""bytes_up":0,"bytes_down":7}"#
            )
        );
        assert_eq!(serde_json::from_str::<Decision>(&json).unwrap(), d);
    }
}
