//! The proxy's TLS for the hosts a secret belongs to: a certificate authority made for this run
//! (its key only ever in the supervisor's memory), a certificate per host signed by it for the
//! command's side, and a verifying client for the real server's side.
//!
//! Choices, each for an attacker:
//! - The CA is **name-constrained** to the secrets' hosts: even a command that somehow learnt
//!   the CA's key could not make a certificate it signs good for any other name, and a client
//!   that honours name constraints (OpenSSL, Go, rustls, Node) refuses one.
//! - It is valid for the run's time window only (a day back, for a clock a little behind, and
//!   397 days on), and it is never written anywhere but into the command's trust bundle, which
//!   holds certificates, never keys.
//! - Upstream, the real server's certificate is verified against the host's trust store
//!   (`SSL_CERT_FILE`/`SSL_CERT_DIR` of jail's own environment, else the system's), with the
//!   name the command asked for: a secret goes only to a server that proves that name.
//! - ALPN is set per connection (`proxy::intercept`): the server is offered what the command
//!   offered among `h2` and `http/1.1` (the protocols the rewriters speak), and the command is
//!   offered back exactly what the server chose, so neither side speaks a protocol the other
//!   does not, and nothing passes that the proxy cannot rewrite.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, GeneralSubtree, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, NameConstraints,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

use crate::net::allow::DomainPattern;

/// The ALPN names of the protocols the request rewriters speak.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";
pub const ALPN_H2: &[u8] = b"h2";

/// The run's CA and what is made from it.
pub struct RunTls {
    /// The CA certificate, PEM: what the command's trust bundle adds.
    pub ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
    /// One key for every host certificate of the run (a key per host buys nothing: the CA
    /// that vouches for all of them is one).
    leaf_key: KeyPair,
    servers: Mutex<HashMap<String, Arc<ServerConfig>>>,
    client: OnceLock<Result<Arc<ClientConfig>, String>>,
}

/// rustls on ring: ring builds with a C compiler for every target jail ships (aws-lc-rs would
/// need cmake and a cross toolchain for the static builds). ring has no post-quantum key
/// exchange, which rustls marks by deprecating its provider; the run's TLS offers X25519 and
/// the NIST curves (a named limit in docs/network.md).
///
/// Its key exchange groups in the order X25519, P-256, P-384: the provider's own order puts
/// P-384 first, so every handshake made a P-384 key share, ring's slowest (about two thirds of
/// the proxy's time on a new intercepted connection, bench/secrets.md).
#[allow(deprecated)]
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    use rustls::crypto::ring::kx_group;
    let mut provider = rustls::crypto::ring::default_provider();
    provider.kx_groups = vec![kx_group::X25519, kx_group::SECP256R1, kx_group::SECP384R1];
    Arc::new(provider)
}

impl RunTls {
    /// A new CA whose certificates can name only `hosts` (and, for `*.parent`, the names below
    /// `parent`).
    pub fn new(hosts: &[DomainPattern]) -> Result<RunTls, String> {
        let err = |what: &str, e: rcgen::Error| format!("TLS for --secret: {what}: {e}");
        let key = KeyPair::generate().map_err(|e| err("CA key", e))?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| err("CA", e))?;
        params
            .distinguished_name
            .push(DnType::CommonName, "jail run CA (this run only)");
        params
            .distinguished_name
            .push(DnType::OrganizationName, "jail");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.name_constraints = Some(NameConstraints {
            permitted_subtrees: hosts
                .iter()
                .map(|h| {
                    GeneralSubtree::DnsName(match h {
                        DomainPattern::Exact(n) | DomainPattern::Subdomains(n) => n.clone(),
                    })
                })
                .collect(),
            excluded_subtrees: Vec::new(),
        });
        validity(&mut params);
        let cert = params.self_signed(&key).map_err(|e| err("CA", e))?;
        let leaf_key = KeyPair::generate().map_err(|e| err("host key", e))?;
        Ok(RunTls {
            ca_pem: cert.pem(),
            issuer: Issuer::new(params, key),
            leaf_key,
            servers: Mutex::new(HashMap::new()),
            client: OnceLock::new(),
        })
    }

    /// The command's side for `host`: a certificate for that name, made on first use.
    pub fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, String> {
        let mut servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = servers.get(host) {
            return Ok(Arc::clone(found));
        }
        let err = |e: &dyn std::fmt::Display| format!("certificate for {host}: {e}");
        let mut params = CertificateParams::new(vec![host.to_string()]).map_err(|e| err(&e))?;
        params.distinguished_name.push(DnType::CommonName, host);
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        validity(&mut params);
        let cert = params
            .signed_by(&self.leaf_key, &self.issuer)
            .map_err(|e| err(&e))?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.serialize_der()));
        let config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| err(&e))?
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)
            .map_err(|e| err(&e))?;
        let config = Arc::new(config);
        servers.insert(host.to_string(), Arc::clone(&config));
        Ok(config)
    }

    /// The real server's side: verified against the host's trust store, loaded on first use.
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, String> {
        self.client.get_or_init(load_client_config).clone()
    }
}

fn load_client_config() -> Result<Arc<ClientConfig>, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found
            .errors
            .first()
            .map_or("no certificates found".to_string(), |e| e.to_string());
        return Err(format!(
            "no trust store to verify servers with ({why}); set SSL_CERT_FILE for jail"
        ));
    }
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The name the upstream certificate must prove.
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string()).map_err(|e| format!("{host}: {e}"))
}

/// From a day ago (a clock a little behind) to 397 days on (the longest a server certificate
/// may be valid for the clients that check).
fn validity(params: &mut CertificateParams) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let day = |offset: i64| {
        let (y, m, d) = crate::run_report::civil_from_days(now / 86_400 + offset);
        // Years of certificates fit i32, months and days u8 (they come from the calendar).
        rcgen::date_time_ymd(y as i32, m as u8, d as u8)
    };
    params.not_before = day(-1);
    params.not_after = day(397);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::CertificateDer;

    /// The CA certificate as DER (the tests trust it).
    fn pem_to_der(pem: &str) -> Option<CertificateDer<'static>> {
        use rustls::pki_types::pem::PemObject;
        CertificateDer::from_pem_slice(pem.as_bytes()).ok()
    }

    #[test]
    fn civil_dates() {
        let civil = crate::run_report::civil_from_days;
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(19_782), (2024, 2, 29));
        assert_eq!(civil(20_790), (2026, 12, 3));
        assert_eq!(civil(-1), (1969, 12, 31));
    }

    #[test]
    fn host_certificates_verify_against_the_run_ca_for_their_names_only() {
        use rustls::client::WebPkiServerVerifier;
        use rustls::client::danger::ServerCertVerifier;
        use rustls::pki_types::UnixTime;
        let tls = RunTls::new(&[
            DomainPattern::parse("api.a.test").unwrap(),
            DomainPattern::parse("*.b.test").unwrap(),
        ])
        .unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(pem_to_der(&tls.ca_pem).unwrap()).unwrap();
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .unwrap();
        let now = UnixTime::now();
        let check = |host: &str| {
            let leaf = leaf_der(&tls, host);
            verifier
                .verify_server_cert(&leaf, &[], &server_name(host).unwrap(), &[], now)
                .map(|_| ())
        };
        assert!(check("api.a.test").is_ok());
        assert!(check("x.b.test").is_ok());
        // A name outside the CA's constraints is refused even though the CA signed it.
        let outside = check("evil.test");
        assert!(outside.is_err(), "{outside:?}");
        // The same config comes back for the same host.
        assert!(Arc::ptr_eq(
            &tls.server_config("api.a.test").unwrap(),
            &tls.server_config("api.a.test").unwrap()
        ));
        assert!(!tls.ca_pem.contains("PRIVATE"));
    }

    /// The certificate a host's server config presents.
    fn leaf_der(tls: &RunTls, host: &str) -> CertificateDer<'static> {
        let mut params = CertificateParams::new(vec![host.to_string()]).unwrap();
        params.is_ca = IsCa::ExplicitNoCa;
        params.use_authority_key_identifier_extension = true;
        validity(&mut params);
        let _ = tls.server_config(host).unwrap();
        params
            .signed_by(&tls.leaf_key, &tls.issuer)
            .unwrap()
            .der()
            .clone()
    }
}
