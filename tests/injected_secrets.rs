//! `--secret NAME@HOST`: the command gets a placeholder, the proxy puts the real value into the
//! request headers on connections to HOST only. Through the real binary, as root and as an
//! unprivileged user, against HTTPS servers this test starts on the host's loopback
//! (tests/helpers/https_log.py for HTTP/1.1, tests/helpers/h2_log.js for HTTP/2) with
//! certificates from a CA made here: nothing leaves the machine.
//! JAIL_TEST_HOSTS (test builds only) points the names at those servers, and the proxy verifies
//! them against the test CA through jail's own SSL_CERT_FILE.
//!
//! Every claim is paired with its control: the same run without `--secret` shows the value
//! inside and on the wire to every host, so a rule that stopped holding fails the test.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Fixture, Run, Who, assert_refused, base_dir, full_level_or_skip, users};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use serde_json::Value;

const PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// The secret's value, in two halves: the tests never hand the whole value to a command line.
const VALUE_A: &str = "sk-test-";
const VALUE_B: &str = "7f3c9a1e5b2d4806";

fn value() -> String {
    format!("{VALUE_A}{VALUE_B}")
}

fn helper(name: &str) -> PathBuf {
    common::publish(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/helpers")
            .join(name),
        name,
    )
}

/// A test CA and, signed by it, one certificate per host; every file readable by the
/// unprivileged user (the launcher reads the CA as that user through SSL_CERT_FILE).
struct TestPki {
    dir: PathBuf,
}

impl TestPki {
    fn get() -> &'static TestPki {
        static PKI: OnceLock<TestPki> = OnceLock::new();
        PKI.get_or_init(|| {
            // One PKI for every test process (each test is a process of its own): made in a
            // directory of this process's, then renamed into place; whoever renames first wins
            // and the others use theirs, so nothing is left behind per process.
            let shared = base_dir().join("pki");
            if shared.join("done").exists() {
                return TestPki { dir: shared };
            }
            let dir = base_dir().join(format!("pki-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let ca_key = KeyPair::generate().unwrap();
            let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
            ca.distinguished_name
                .push(DnType::CommonName, "jail tests CA");
            ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
            let ca_cert = ca.self_signed(&ca_key).unwrap();
            std::fs::write(dir.join("ca.pem"), ca_cert.pem()).unwrap();
            let issuer = Issuer::new(ca, ca_key);
            for host in ["secret.test", "other.test"] {
                let key = KeyPair::generate().unwrap();
                let mut params = CertificateParams::new(vec![host.to_string()]).unwrap();
                params.distinguished_name.push(DnType::CommonName, host);
                let cert = params.signed_by(&key, &issuer).unwrap();
                std::fs::write(dir.join(format!("{host}.pem")), cert.pem()).unwrap();
                std::fs::write(dir.join(format!("{host}.key")), key.serialize_pem()).unwrap();
            }
            use std::os::unix::fs::PermissionsExt;
            for entry in std::fs::read_dir(&dir).unwrap() {
                let p = entry.unwrap().path();
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
            }
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::write(dir.join("done"), "").unwrap();
            if std::fs::rename(&dir, &shared).is_err() {
                // Another process's is in place (a rename onto a non-empty directory fails).
                let _ = std::fs::remove_dir_all(&dir);
            }
            TestPki { dir: shared }
        })
    }

    fn ca(&self) -> String {
        self.dir.join("ca.pem").to_string_lossy().into_owned()
    }
}

/// tests/helpers/https_log.py serving one host's certificate; every request it got, as JSON.
struct HttpsServer {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl HttpsServer {
    /// An HTTP/1.1 server (Python's, no ALPN).
    fn start(host: &str) -> HttpsServer {
        Self::spawn(host, host, "/usr/bin/python3", &["https_log.py"])
    }

    /// A server from `script` in tests/helpers (python3), which takes the same arguments.
    fn start_with(host: &str, script: &str) -> HttpsServer {
        Self::spawn(host, host, "/usr/bin/python3", &[script])
    }

    /// An HTTP/2 server (Node's http2, ALPN h2 only).
    fn start_h2(host: &str) -> HttpsServer {
        Self::spawn(host, host, "/usr/bin/node", &["h2_log.js"])
    }

    /// `program` running tests/helpers/`script[0]`, serving `cert_host`'s certificate (another
    /// host's for a server that fails verification), logging under `host`'s name.
    fn spawn(host: &str, cert_host: &str, program: &str, script: &[&str]) -> HttpsServer {
        let pki = TestPki::get();
        static SERVERS: AtomicUsize = AtomicUsize::new(0);
        let n = SERVERS.fetch_add(1, Ordering::SeqCst);
        let log = pki
            .dir
            .join(format!("{host}-{}-{n}.log", std::process::id()));
        let _ = std::fs::remove_file(&log);
        let mut child = Command::new(program)
            .arg(helper(script[0]))
            .arg(pki.dir.join(format!("{cert_host}.pem")))
            .arg(pki.dir.join(format!("{cert_host}.key")))
            .arg(&log)
            .args(&script[1..])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start tests/helpers/{}: {e}", script[0]));
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{} prints its port, not {line:?}", script[0]));
        HttpsServer { child, port, log }
    }

    /// The requests the server received, oldest first.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The request for `path`, if the server got one.
    fn request(&self, path: &str) -> Option<Value> {
        self.requests().into_iter().find(|r| r["path"] == path)
    }
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// The value of `name` among a request's headers (the first one sent).
fn header(request: &Value, name: &str) -> Option<String> {
    request["headers"].as_array()?.iter().find_map(|h| {
        (h[0].as_str()?.eq_ignore_ascii_case(name)).then(|| h[1].as_str().unwrap().to_string())
    })
}

/// Two servers: `secret` (the secret's host) and `other` (allowed, not the secret's).
struct Hosts {
    secret: HttpsServer,
    other: HttpsServer,
}

impl Hosts {
    fn start() -> Hosts {
        Hosts {
            secret: HttpsServer::start("secret.test"),
            other: HttpsServer::start("other.test"),
        }
    }

    /// jail's network flags: both names allowed (and their loopback ports, which the proxy
    /// otherwise refuses as private), the PKI directory visible read-only.
    fn flags(&self, secret: bool) -> Vec<String> {
        let mut flags: Vec<String> = [
            "--net",
            "allow=secret.test,other.test",
            "--net",
            &format!("allow-host=127.0.0.1:{}", self.secret.port),
            "--net",
            &format!("allow-host=127.0.0.1:{}", self.other.port),
            "--ro",
            &TestPki::get().dir.to_string_lossy(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if secret {
            flags.extend(["--secret".into(), "K@secret.test".into()]);
        } else {
            // The value looks like a key, so the default profile would drop it: pass it.
            flags.extend(["--env".into(), "K".into()]);
        }
        flags
    }

    /// `script` under /bin/sh inside jail, with K holding the value outside.
    fn run(&self, fx: &Fixture, secret: bool, script: &str) -> Run {
        self.run_with(fx, secret, &[], script)
    }

    /// [`Hosts::run`] with `--secret`, and more variables for jail.
    fn run_env(&self, fx: &Fixture, more: &[(&str, &str)], script: &str) -> Run {
        self.run_full(fx, true, &[], more, script)
    }

    /// [`Hosts::run`] with more flags.
    fn run_with(&self, fx: &Fixture, secret: bool, extra: &[&str], script: &str) -> Run {
        self.run_full(fx, secret, extra, &[], script)
    }

    fn run_full(
        &self,
        fx: &Fixture,
        secret: bool,
        extra: &[&str],
        more: &[(&str, &str)],
        script: &str,
    ) -> Run {
        let hosts = "secret.test=127.0.0.1,other.test=127.0.0.1";
        let ca = TestPki::get().ca();
        let value = value();
        let env = [
            ("JAIL_TEST_HOSTS", hosts),
            ("SSL_CERT_FILE", ca.as_str()),
            // Debian's curl reads its bundle from here, not from SSL_CERT_FILE.
            ("CURL_CA_BUNDLE", ca.as_str()),
            ("K", value.as_str()),
            ("PATH", PATH),
            ("S", &self.secret.port.to_string()),
            ("O", &self.other.port.to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let mut env: Vec<(&str, &str)> =
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        env.extend(more);
        let flags = self.flags(secret);
        let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
        args.extend(extra);
        args.extend(["--", "/bin/sh", "-c", script]);
        fx.jail_at(&fx.dir, &args, &env)
    }
}

/// `curl` inside: quiet, failing on HTTP errors, the body and the exit code on stdout.
const CURL: &str = "curl -sS --max-time 20";

#[test]
fn the_secrets_host_gets_the_value_and_everything_inside_only_a_placeholder() {
    if !full_level_or_skip("secret-injected") {
        return;
    }
    for who in users() {
        let hosts = Hosts::start();
        let fx = Fixture::new(who, "secret-injected");
        // Two requests on one connection (curl reuses it for a second URL to the same host), the
        // second offering HTTP/2; a third to the other allowed host with the same placeholder.
        let script = format!(
            r#"echo "inside=$K"
{CURL} -H "Authorization: Bearer $K" -H "x-api-key: $K" "https://secret.test:$S/first" "https://secret.test:$S/second"; echo " rc=$?"
{CURL} --http2 -H "x-goog-api-key: $K" "https://secret.test:$S/h2"; echo " rc=$?"
{CURL} -H "Authorization: Bearer $K" "https://other.test:$O/other"; echo " rc=$?"
{CURL} -u "x-access-token:$K" "https://secret.test:$S/basic"; echo " rc=$?"
"#
        );
        let report = fx.p("report.json");
        let run = hosts.run_with(&fx, true, &["--report", &report], &script);
        let what = format!("{who:?} --secret K@secret.test");
        assert!(run.ok(), "{what}\n{}", run.describe());
        let inside = run
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("inside="))
            .unwrap_or_default()
            .to_string();
        assert!(
            inside.starts_with("jail-placeholder-") && !inside.contains(&value()),
            "{what}: the command's K is not a placeholder\n{}",
            run.describe()
        );
        assert_eq!(
            run.stdout.matches(" rc=0").count(),
            4,
            "{what}: a request failed\n{}",
            run.describe()
        );
        let real = format!("Bearer {}", value());
        for path in ["/first", "/second"] {
            let r = hosts.secret.request(path).unwrap_or_else(|| {
                panic!("{what}: secret.test never got {path}\n{}", run.describe())
            });
            assert_eq!(header(&r, "Authorization").as_deref(), Some(real.as_str()));
            assert_eq!(header(&r, "x-api-key"), Some(value()), "{what} {path}");
        }
        let (first, second) = (
            hosts.secret.request("/first").unwrap(),
            hosts.secret.request("/second").unwrap(),
        );
        assert_eq!(
            first["peer"], second["peer"],
            "{what}: the two requests did not share one connection (keep-alive)"
        );
        // HTTP Basic, as git sends a token: the value inside the base64.
        use base64::Engine;
        let basic = hosts
            .secret
            .request("/basic")
            .expect("secret.test got /basic");
        let want =
            base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{}", value()));
        assert_eq!(
            header(&basic, "Authorization"),
            Some(format!("Basic {want}")),
            "{what} basic"
        );
        let h2 = hosts.secret.request("/h2").expect("secret.test got /h2");
        assert_eq!(header(&h2, "x-goog-api-key"), Some(value()), "{what} h2");
        // The other allowed host: a plain tunnel, verified by curl against the test CA (the
        // command's SSL_CERT_FILE is kept at the start of the bundle), and only the placeholder.
        let other = hosts
            .other
            .request("/other")
            .expect("other.test got /other");
        assert_eq!(
            header(&other, "Authorization"),
            Some(format!("Bearer {inside}")),
            "{what}: other.test"
        );
        let everything = std::fs::read_to_string(&hosts.other.log).unwrap();
        assert!(
            !everything.contains(&value()),
            "{what}: other.test saw the value"
        );

        // The control: without --secret the value is inside and goes to every host.
        let hosts = Hosts::start();
        let run = hosts.run(&fx, false, &script);
        assert!(run.ok(), "{who:?} control\n{}", run.describe());
        assert!(
            run.stdout.contains(&format!("inside={}", value())),
            "{who:?} control: K did not reach the command\n{}",
            run.describe()
        );
        let other = hosts.other.request("/other").expect("control: other.test");
        assert_eq!(
            header(&other, "Authorization").as_deref(),
            Some(real.as_str())
        );
    }
}

#[test]
fn the_value_is_in_no_environment_argument_file_or_memory_inside() {
    if !full_level_or_skip("secret-nowhere") {
        return;
    }
    for who in users() {
        let hosts = Hosts::start();
        let fx = Fixture::new(who, "secret-nowhere");
        // A request first, so the proxy has used the value on this run's connection.
        let script = format!(
            r#"{CURL} -o /dev/null -H "x-api-key: $K" "https://secret.test:$S/used"; echo "rc=$?"
FIND_A={VALUE_A} FIND_B={VALUE_B} python3 {} /dev/jail /tmp "$HOME" "$PWD" /etc /run"#,
            helper("find_value.py").display()
        );
        let run = hosts.run(&fx, true, &script);
        let what = format!("{who:?} --secret");
        assert!(
            run.ok() && run.stdout.contains("rc=0") && run.stdout.contains("searched"),
            "{what}\n{}",
            run.describe()
        );
        assert!(
            hosts.secret.request("/used").is_some(),
            "{what}: no request"
        );
        assert!(
            !run.stdout.contains("FOUND"),
            "{what}: the value is readable inside\n{}",
            run.describe()
        );
        // jail's own init (pid 1 inside) came from the launcher: its memory is not readable.
        assert!(
            run.stdout.contains("DENIED /proc/1/mem"),
            "{what}: init's memory is readable\n{}",
            run.describe()
        );
        // Not because of the filter or Landlock: init is not dumpable and was never exec'd
        // inside, so its memory belongs to the user namespace jail started in, and reading it
        // (ptrace access) takes CAP_SYS_PTRACE there, which nothing inside has.
        let off = hosts.run_env(&fx, &[("JAIL_TEST_DISABLE", "seccomp,landlock")], &script);
        assert!(
            off.ok()
                && off.stdout.contains("searched")
                && off.stdout.contains("DENIED /proc/1/mem")
                && !off.stdout.contains("FOUND"),
            "{what}, seccomp and Landlock off: the value is readable\n{}",
            off.describe()
        );
        // The control: the same search finds the value in the environment and in the memory
        // of the processes that hold it, when it is passed the old way.
        let run = hosts.run(&fx, false, &script);
        for place in ["/environ", "/mem"] {
            assert!(
                run.stdout
                    .lines()
                    .any(|l| l.starts_with("FOUND /proc/") && l.ends_with(place)),
                "{who:?} control: the search did not find the value in {place}\n{}",
                run.describe()
            );
        }
    }
}

#[test]
fn a_client_that_does_not_trust_the_run_ca_sends_nothing() {
    if !full_level_or_skip("secret-untrusted") {
        return;
    }
    for who in users() {
        let hosts = Hosts::start();
        let fx = Fixture::new(who, "secret-untrusted");
        let ca = TestPki::get().ca();
        // Trusting only the test CA (which signed the real server, not the run's certificate):
        // the handshake fails, and the request with the placeholder never leaves.
        let script = format!(
            r#"{CURL} --cacert {ca} -H "x-api-key: $K" "https://secret.test:$S/untrusted"; echo "rc=$?"
{CURL} --cacert {ca} -H "x-api-key: $K" "https://other.test:$O/tunnel"; echo "rc=$?""#
        );
        let run = hosts.run(&fx, true, &script);
        let what = format!("{who:?} --cacert test CA");
        assert!(
            run.stdout.contains("rc=60"),
            "{what}: curl did not fail its certificate check\n{}",
            run.describe()
        );
        assert!(
            hosts.secret.request("/untrusted").is_none(),
            "{what}: the request reached the server"
        );
        // The control: the plain tunnel to the other host is verified against that same CA.
        assert!(
            run.stdout.contains("ok /tunnel") && hosts.other.request("/tunnel").is_some(),
            "{what}: the plain tunnel failed\n{}",
            run.describe()
        );
    }
}

#[test]
fn requests_the_proxy_cannot_rewrite_safely_are_refused_not_forwarded() {
    if !full_level_or_skip("secret-refused") {
        return;
    }
    let who = users()[0];
    let hosts = Hosts::start();
    let fx = Fixture::new(who, "secret-refused");
    // A request on secret.test's connection that names another host (fronting): the value would
    // go wherever the server routes it: it never reaches the server.
    let script = format!(
        r#"{CURL} -o /dev/null -w "front=%{{http_code}}\n" -H "Host: other.test:$O" -H "x-api-key: $K" "https://secret.test:$S/fronted"
{CURL} -H "x-api-key: $K" "https://secret.test:$S/fine"; echo " rc=$?""#
    );
    // Plain http:// to the secret's host (a server of its own on another port): the proxy adds
    // values only inside TLS it terminates, so the request carries the placeholder.
    let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let plain_port = plain.local_addr().unwrap().port();
    let seen = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut s, _) = plain.accept().unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        String::from_utf8_lossy(&head).into_owned()
    });
    let script = format!(
        r#"{script}
{CURL} -H "x-api-key: $K" "http://secret.test:{plain_port}/plain"; echo " plain rc=$?""#
    );
    let allow_plain = format!("allow-host=127.0.0.1:{plain_port}");
    let run = hosts.run_with(&fx, true, &["--net", &allow_plain], &script);
    let head = seen.join().unwrap();
    assert!(
        head.contains("x-api-key: jail-placeholder-") && !head.contains(&value()),
        "plain http got the value:\n{head}\n{}",
        run.describe()
    );
    assert!(
        run.stdout.contains("front=403"),
        "fronting was not refused\n{}",
        run.describe()
    );
    assert!(
        hosts.secret.request("/fronted").is_none(),
        "fronted request forwarded"
    );
    // The control: an ordinary request on the same run goes through with the value.
    let fine = hosts.secret.request("/fine").expect("the ordinary request");
    assert_eq!(header(&fine, "x-api-key"), Some(value()));
}

/// What a hostile command tries on the secret's connection against a server with a leniency
/// real servers have (tests/helpers/https_lenient.py), and what the command may see back.
fn lenient_attack(attack: &str) {
    if !full_level_or_skip("secret-lenient") {
        return;
    }
    for who in users() {
        let hosts = Hosts {
            secret: HttpsServer::start_with("secret.test", "https_lenient.py"),
            other: HttpsServer::start("other.test"),
        };
        let fx = Fixture::new(who, "secret-lenient");
        let script = format!(
            r#"python3 {} {attack} secret.test "$S"; echo "rc=$?"
{CURL} -H "x-api-key: $K" "https://secret.test:$S/fine"; echo " fine rc=$?""#,
            helper("secret_attack.py").display()
        );
        let run = hosts.run(&fx, true, &script);
        let what = format!("{who:?} {attack}");
        assert!(
            run.stdout.contains("rc=0"),
            "{what}: the attack did not run\n{}",
            run.describe()
        );
        assert!(
            !run.stdout.contains(&value()),
            "{what}: the command read the value\n{}",
            run.describe()
        );
        let seen = std::fs::read(&hosts.secret.log).unwrap_or_default();
        let seen = String::from_utf8_lossy(&seen);
        // The control: the same server gets the value in an ordinary request of the same run,
        // and nothing else of the attack's.
        assert!(
            run.stdout.contains("got /fine body= fine rc=0") && seen.matches(&value()).count() == 1,
            "{what}: the value reached the server {} times\n{seen}\n{}",
            seen.matches(&value()).count(),
            run.describe()
        );
    }
}

/// TRACE asks the server to send the request back as it got it (RFC 9110 9.3.8), credentials
/// included: the RFC tells clients never to send credentials with it, so the proxy refuses it.
#[test]
fn a_trace_request_never_gets_the_value() {
    lenient_attack("trace");
}

/// A chunk-size line ended by a bare LF: a server that ends these lines at CRLF only reads the
/// body's end elsewhere, takes a request hidden in the body for a real one, and its body
/// swallows the next request, the one the proxy puts the value into.
#[test]
fn a_chunked_body_the_server_would_frame_otherwise_is_refused() {
    lenient_attack("chunk-ext-lf");
}

#[test]
fn http2_requests_get_the_value_on_the_secrets_host_only() {
    if !full_level_or_skip("secret-h2") {
        return;
    }
    for who in users() {
        let hosts = Hosts {
            secret: HttpsServer::start_h2("secret.test"),
            other: HttpsServer::start_h2("other.test"),
        };
        let fx = Fixture::new(who, "secret-h2");
        // curl: two requests one after the other on one HTTP/2 connection (streams 1 and 3);
        // Node's http2: two streams started at once on one session; a request that names
        // another host in its :authority (curl turns Host into it) on the secret's
        // connection; the other allowed host, a plain tunnel.
        let script = format!(
            r#"{CURL} --http2 -H "Authorization: Bearer $K" -H "x-api-key: $K" "https://secret.test:$S/c1" "https://secret.test:$S/c2"; echo " rc=$?"
node {} secret.test "$S" /n1 /n2; echo "node rc=$?"
{CURL} --http2 -H "Host: other.test:$O" -H "x-api-key: $K" "https://secret.test:$S/fronted"; echo " fronted rc=$?"
{CURL} --http2 -H "Authorization: Bearer $K" "https://other.test:$O/other"; echo " rc=$?"
"#,
            helper("node_h2.js").display()
        );
        let run = hosts.run(&fx, true, &script);
        let what = format!("{who:?} --secret K@secret.test, HTTP/2");
        assert!(run.ok(), "{what}\n{}", run.describe());
        assert_eq!(
            run.stdout.matches(" rc=0").count(),
            3,
            "{what}: a request failed\n{}",
            run.describe()
        );
        assert!(
            run.stdout.contains("alpn=h2")
                && run.stdout.contains("ok /n1")
                && run.stdout.contains("ok /n2"),
            "{what}: node's http2 client\n{}",
            run.describe()
        );
        let real = format!("Bearer {}", value());
        let got = |path: &str| {
            hosts.secret.request(path).unwrap_or_else(|| {
                panic!("{what}: secret.test never got {path}\n{}", run.describe())
            })
        };
        for path in ["/c1", "/c2", "/n1", "/n2"] {
            let r = got(path);
            assert_eq!(r["version"], "2.0", "{what} {path}: not HTTP/2");
            assert_eq!(header(&r, "authorization").as_deref(), Some(real.as_str()));
            assert_eq!(header(&r, "x-api-key"), Some(value()), "{what} {path}");
            assert_eq!(
                header(&r, ":authority").map(|a| a.starts_with("secret.test")),
                Some(true),
                "{what} {path}"
            );
        }
        for (a, b) in [("/c1", "/c2"), ("/n1", "/n2")] {
            assert_eq!(
                got(a)["peer"],
                got(b)["peer"],
                "{what}: {a} and {b} did not share one connection"
            );
        }
        // Fronting: refused (GOAWAY), never forwarded, and the value went nowhere else.
        assert!(
            !run.stdout.contains(" fronted rc=0") && hosts.secret.request("/fronted").is_none(),
            "{what}: the fronted request went through\n{}",
            run.describe()
        );
        let other = hosts
            .other
            .request("/other")
            .expect("other.test got /other");
        assert_eq!(other["version"], "2.0", "{what}: other.test not HTTP/2");
        let placeholder = header(&other, "authorization").unwrap_or_default();
        assert!(
            placeholder.starts_with("Bearer jail-placeholder-"),
            "{what}: other.test got {placeholder:?}"
        );
        let everything = std::fs::read_to_string(&hosts.other.log).unwrap();
        assert!(
            !everything.contains(&value()),
            "{what}: other.test saw the value"
        );
    }
}

#[test]
fn an_http2_only_client_to_an_http1_only_server_fails_cleanly() {
    if !full_level_or_skip("secret-h2-only") {
        return;
    }
    for who in users() {
        // secret.test speaks HTTP/1.1 alone (Python's server, no ALPN): the proxy cannot let
        // the command speak HTTP/2 to it, so a client that offers only h2 is refused in its
        // handshake (no_application_protocol), at once, and nothing reaches the server. The
        // control: the same client reaches an HTTP/2 server on the same run.
        let hosts = Hosts {
            secret: HttpsServer::start("secret.test"),
            other: HttpsServer::start_h2("other.test"),
        };
        let fx = Fixture::new(who, "secret-h2-only");
        let node_h2 = helper("node_h2.js");
        // other.test is a plain tunnel: Node verifies it against the test CA itself.
        let script = format!(
            r#"timeout 30 node {node} secret.test "$S" /only-h2; echo "rc=$?"
NODE_EXTRA_CA_CERTS={ca} timeout 30 node {node} other.test "$O" /h2-tunnel; echo "tunnel rc=$?""#,
            node = node_h2.display(),
            ca = TestPki::get().ca()
        );
        let started = std::time::Instant::now();
        let run = hosts.run(&fx, true, &script);
        let what = format!("{who:?} h2-only client, HTTP/1.1-only server");
        assert!(
            run.stdout.contains("failed tls") && run.stdout.contains("rc=3"),
            "{what}: not a clean TLS failure\n{}",
            run.describe()
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(25),
            "{what}: took {:?}",
            started.elapsed()
        );
        assert!(hosts.secret.requests().is_empty(), "{what}: forwarded");
        assert!(
            run.stdout.contains("ok /h2-tunnel") && run.stdout.contains("tunnel rc=0"),
            "{what}: the control failed\n{}",
            run.describe()
        );
    }
}

#[test]
fn a_server_that_fails_verification_gets_nothing_and_the_command_is_told_why() {
    if !full_level_or_skip("secret-unverified") {
        return;
    }
    for who in users() {
        // secret.test's server presents other.test's certificate (HTTP/2 and HTTP/1.1): the
        // proxy's handshake with it fails, nothing is sent to it, and the command hears why in
        // the protocol it offered: HTTP/1.1 502 for curl (which offers both), GOAWAY for an
        // h2-only client.
        let hosts = Hosts {
            secret: HttpsServer::spawn(
                "secret.test",
                "other.test",
                "/usr/bin/node",
                &["h2_log.js", "both"],
            ),
            other: HttpsServer::start("other.test"),
        };
        let fx = Fixture::new(who, "secret-unverified");
        let script = format!(
            r#"{CURL} --http2 -w " status=%{{http_code}}" -H "x-api-key: $K" "https://secret.test:$S/h1"; echo " rc=$?"
timeout 30 node {} secret.test "$S" /h2; echo "node rc=$?""#,
            helper("node_h2.js").display()
        );
        let run = hosts.run(&fx, true, &script);
        let what = format!("{who:?} unverifiable server");
        assert!(
            run.stdout.contains("jail: TLS with secret.test") && run.stdout.contains("status=502"),
            "{what}: curl was not told why\n{}",
            run.describe()
        );
        assert!(
            run.stdout.contains("alpn=h2")
                && run.stdout.contains("failed")
                && run.stdout.contains("node rc=3"),
            "{what}: the h2 client did not fail cleanly\n{}",
            run.describe()
        );
        assert!(hosts.secret.requests().is_empty(), "{what}: forwarded");
    }
}

#[test]
fn a_slow_end_slows_the_intercepted_path_and_never_stalls_it() {
    if !full_level_or_skip("secret-slow-end") {
        return;
    }
    for who in users() {
        let hosts = Hosts::start();
        let fx = Fixture::new(who, "secret-slow-end");
        // Upload: the server reads nothing for a second, so the body fills the sockets, the TLS
        // buffer and the proxy's queue toward it before it drains. Download: curl reads at
        // 4 MiB/s, slower than the bytes come. Either way the proxy's queue fills; it must go
        // on once the slow end takes bytes again (it used to wait for nothing, for good).
        let script = format!(
            r#"head -c 16777216 /dev/zero >/tmp/up
{CURL} -H "x-api-key: $K" -H "Expect:" -T /tmp/up -o /dev/null -w "up=%{{http_code}}\n" "https://secret.test:$S/slow-up"; echo "rc=$?"
{CURL} -H "x-api-key: $K" --limit-rate 4M -o /dev/null -w "down=%{{http_code}} %{{size_download}}\n" "https://secret.test:$S/zeros/8388608"; echo "rc=$?"
"#
        );
        let run = hosts.run(&fx, true, &script);
        let what = format!("{who:?} a slow end");
        assert!(
            run.ok()
                && run.stdout.matches("rc=0").count() == 2
                && run.stdout.contains("up=200")
                && run.stdout.contains("down=200 8388608"),
            "{what}\n{}",
            run.describe()
        );
        let up = hosts
            .secret
            .request("/slow-up")
            .expect("the upload arrived");
        assert_eq!(up["body"], "16777216 bytes", "{what}: the upload's body");
        assert_eq!(header(&up, "x-api-key"), Some(value()), "{what}: upload");
    }
}

#[test]
fn python_and_node_clients_get_the_value_injected() {
    if !full_level_or_skip("secret-clients") {
        return;
    }
    let who = *users().last().unwrap();
    let hosts = Hosts::start();
    let fx = Fixture::new(who, "secret-clients");
    // Python's urllib (HTTPS_PROXY, SSL_CERT_FILE) and Node's tls through a CONNECT of its own
    // (NODE_EXTRA_CA_CERTS): the trust jail sets up is found by each.
    let script = format!(
        r#"python3 -c '
import os, urllib.request
r = urllib.request.Request("https://secret.test:" + os.environ["S"] + "/python", headers={{"x-api-key": os.environ["K"]}})
print(urllib.request.urlopen(r, timeout=20).read().decode())'
node {} secret.test "$S" /node"#,
        helper("node_connect.js").display()
    );
    let run = hosts.run(&fx, true, &script);
    assert!(
        run.stdout.contains("ok /python") && run.stdout.contains("ok /node"),
        "{who:?}\n{}",
        run.describe()
    );
    for path in ["/python", "/node"] {
        let r = hosts.secret.request(path).unwrap();
        assert_eq!(header(&r, "x-api-key"), Some(value()), "{path}");
    }
}

#[test]
fn secret_flags_that_cannot_hold_are_refused_before_anything_runs() {
    let fx = Fixture::new(Who::Root, "secret-flags");
    let base = ["--net", "allow=secret.test"];
    // (flags, the environment, what the refusal must name)
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: &[Case] = &[
        // No proxy to inject with: the value would have to be passed in the environment.
        (
            &["--secret", "K@secret.test"],
            &[("K", "v")],
            &["--secret", "--net allow="],
        ),
        // Nothing to read outside.
        (
            &[base[0], base[1], "--secret", "UNSET_ONE@secret.test"],
            &[],
            &["UNSET_ONE"],
        ),
        // A host the network policy does not allow.
        (
            &[base[0], base[1], "--secret", "K@elsewhere.test"],
            &[("K", "v")],
            &["elsewhere.test"],
        ),
        // A pattern: the value would go to hosts nobody named.
        (
            &[base[0], base[1], "--secret", "K@*.secret.test"],
            &[("K", "v")],
            &["*.secret.test"],
        ),
        // A name that is not a variable name.
        (
            &[base[0], base[1], "--secret", "K-1@secret.test"],
            &[],
            &["K-1"],
        ),
    ];
    for (flags, env, needles) in cases {
        let mut args = flags.to_vec();
        args.extend(["--", "/bin/sh", "-c", "echo RAN"]);
        let run = fx.jail_at(&fx.dir, &args, env);
        assert_refused(&run, &format!("{flags:?}"), needles);
    }
    // Without a network namespace (the fallback), the value could not be kept outside.
    let args = [base[0], base[1], "--secret", "K@secret.test", "--", "true"];
    let run = fx.jail_with(&args, &[common::Layer::Mount], &[("K", "v")]);
    assert_refused(
        &run,
        "--secret without a namespace",
        &["--secret", "namespace"],
    );
}

/// A credential an agent profile keeps by name with no host to add it at (a refresh token, a
/// login blob: the agent sends them in request bodies) is the real value inside: the plan says
/// so among its gaps, and a declared key beside it is not named.
#[test]
fn a_kept_credential_the_proxy_cannot_add_is_named_among_the_gaps() {
    let fx = Fixture::new(Who::Root, "secret-kept-gap");
    let env = [
        ("CLAUDE_CODE_OAUTH_REFRESH_TOKEN", "rt-0123456789abcdef0123"),
        ("ANTHROPIC_API_KEY", "sk-ant-0123456789abcdef"),
        ("PATH", PATH),
    ];
    let gaps = |net: &str| -> Vec<String> {
        let run = fx.jail_at(
            &fx.dir,
            &[
                "--profile",
                "claude-code",
                "--net",
                net,
                "--dry-run",
                "--",
                "true",
            ],
            &env,
        );
        assert!(run.ok(), "{}", run.describe());
        let v: Value = serde_json::from_str(&run.stdout).unwrap();
        v["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g.as_str().unwrap().to_string())
            .collect()
    };
    let named = |gaps: &[String], name: &str| gaps.iter().any(|g| g.starts_with(name));
    let behind_proxy = gaps("allow=api.anthropic.com");
    assert!(
        named(&behind_proxy, "CLAUDE_CODE_OAUTH_REFRESH_TOKEN")
            && !named(&behind_proxy, "ANTHROPIC_API_KEY"),
        "{behind_proxy:#?}"
    );
    // Without the proxy every kept key is passed, as the profile says: nothing to single out.
    let open = gaps("none");
    assert!(
        !named(&open, "CLAUDE_CODE_OAUTH_REFRESH_TOKEN"),
        "{open:#?}"
    );
}

#[test]
fn each_agent_profile_keeps_its_keys_outside_when_the_network_allows_their_api() {
    if !full_level_or_skip("secret-profiles") {
        return;
    }
    let fx = Fixture::new(Who::Root, "secret-profiles");
    // (profile, the key, its API host): what each agent's own docs name.
    let cases = [
        ("claude-code", "ANTHROPIC_API_KEY", "api.anthropic.com"),
        ("claude-code", "ANTHROPIC_AUTH_TOKEN", "api.anthropic.com"),
        ("codex", "OPENAI_API_KEY", "api.openai.com"),
        (
            "gemini-cli",
            "GEMINI_API_KEY",
            "generativelanguage.googleapis.com",
        ),
        ("aider", "OPENROUTER_API_KEY", "openrouter.ai"),
        ("opencode", "ANTHROPIC_API_KEY", "api.anthropic.com"),
    ];
    let value = value();
    for (profile, key, host) in cases {
        let script = format!("echo \"got=${key}\"");
        let allow = format!("allow={host}");
        let env = [(key, value.as_str()), ("PATH", PATH)];
        let what = format!("--profile {profile} --net {allow}: {key}");
        let args = [
            "--profile",
            profile,
            "--net",
            &allow,
            "--",
            "/bin/sh",
            "-c",
            &script,
        ];
        let run = fx.jail_at(&fx.dir, &args, &env);
        assert!(
            run.ok() && run.stdout.contains("got=jail-placeholder-"),
            "{what}: not a placeholder\n{}",
            run.describe()
        );
        // Where the network allows none of the key's hosts it stays outside too: inside it
        // could only leave through the hosts that are allowed.
        let args = [
            "--profile",
            profile,
            "--net",
            "allow=elsewhere.test",
            "--",
            "/bin/sh",
            "-c",
            &script,
        ];
        let run = fx.jail_at(&fx.dir, &args, &env);
        assert!(
            run.ok() && run.stdout.contains("got=jail-placeholder-"),
            "{profile}: {key} was passed when its host is not allowed\n{}",
            run.describe()
        );
        // The control: without the proxy (the profile's own network) the key is passed.
        let args = ["--profile", profile, "--", "/bin/sh", "-c", &script];
        let run = fx.jail_at(&fx.dir, &args, &env);
        assert!(
            run.stdout.contains(&format!("got={value}")),
            "{profile}: {key} was not passed without the proxy\n{}",
            run.describe()
        );
    }
}
