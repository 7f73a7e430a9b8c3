//! `--net`: every mode is attacked from inside by tests/helpers/net_probe.py against servers this
//! test starts on the host's loopback, outside the jail. Each refusal is paired with a control
//! run that reaches the same server, so a rule that stopped holding fails the test.
//!
//! Names are resolved by jail's proxy through JAIL_TEST_HOSTS (test builds only): no real
//! resolver and no address outside this machine is ever asked or contacted. The "private
//! address" case names 10.0.0.5 only to be refused before any connect.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{
    Attack, Fixture, Layer, Run, Verdict, Who, assert_refused, full_level_or_skip, users, verdict,
};

fn probe_script() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        common::publish(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/helpers/net_probe.py"),
            "net_probe.py",
        )
    })
}

/// A TCP server on the host's loopback that greets every client with one line (or answers one
/// HTTP request) and counts the connections it accepted.
struct Server {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

impl Server {
    fn start(greeting: &'static str) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { continue };
                count.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                    // An HTTP client speaks first (a method name); a raw client waits for the greeting.
                    let mut first = [0u8; 4];
                    let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
                    let n = s.peek(&mut first).unwrap_or(0);
                    let is_http = n > 0 && first[0].is_ascii_uppercase();
                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                    if is_http {
                        // Read the request head, then answer with the greeting as the body.
                        let mut head = Vec::new();
                        let mut byte = [0u8; 1];
                        while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
                            match s.read(&mut byte) {
                                Ok(1) => head.push(byte[0]),
                                _ => break,
                            }
                        }
                        let body = greeting;
                        let _ = write!(
                            s,
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                    } else {
                        let _ = writeln!(s, "{greeting}");
                        let mut sink = [0u8; 64];
                        let _ = s.read(&mut sink);
                    }
                });
            }
        });
        Server { port, accepted }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// A UDP echo server on the host's loopback.
fn udp_echo() -> u16 {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sock.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            let _ = sock.send_to(&buf[..n], from);
        }
    });
    port
}

/// Runs the probe under jail with `net` flags (and layers switched off, and extra env).
fn probe(fx: &Fixture, net: &[&str], disabled: &str, env: &[(&str, &str)], args: &[&str]) -> Run {
    let script = probe_script().to_string_lossy().into_owned();
    let mut argv: Vec<&str> = net.to_vec();
    argv.extend(["--", "/usr/bin/python3", &script]);
    argv.extend(args);
    let mut cmd = fx.command(common::jail_bin(), &argv);
    cmd.env("JAIL_TEST_DISABLE", disabled)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin");
    for (k, v) in env {
        cmd.env(k, v);
    }
    Run::from(cmd.output().expect("run jail"))
}

#[track_caller]
fn expect(run: &Run, prefix: &str, what: &str) {
    assert!(
        run.stdout.starts_with(prefix),
        "{what}: expected {prefix:?}\n{}",
        run.describe()
    );
}

#[test]
fn net_none_reaches_nothing_outside_and_loopback_inside_works() {
    if !full_level_or_skip("net-none") {
        return;
    }
    let server = Server::start("HELLO");
    let udp = udp_echo();
    let (tcp_port, udp_port) = (server.port.to_string(), udp.to_string());
    for who in users() {
        let fx = Fixture::new(who, "net-none");
        let tcp = ["tcp", "127.0.0.1", tcp_port.as_str()];
        let dgram = ["udp", "127.0.0.1", udp_port.as_str()];
        // Control: the same probes reach both servers on the host's network.
        expect(
            &probe(&fx, &[], "", &[], &tcp),
            "CONNECTED HELLO",
            "host tcp",
        );
        expect(
            &probe(&fx, &[], "", &[], &dgram),
            "UDP-REPLY ping",
            "host udp",
        );
        // A network namespace of its own (full jail, or without Landlock) and, without one,
        // Landlock + seccomp.
        for disabled in ["", "mount", "landlock"] {
            let what = format!("{who:?} none, disabled={disabled:?}");
            let before = server.accepted();
            expect(
                &probe(&fx, &["--net", "none"], disabled, &[], &tcp),
                "REFUSED",
                &format!("{what}: tcp"),
            );
            expect(
                &probe(&fx, &["--net", "none"], disabled, &[], &dgram),
                "UDP-FAIL",
                &format!("{what}: udp"),
            );
            assert_eq!(server.accepted(), before, "{what}: a connection got out");
        }
        // Without a namespace: no listening socket (listen() would bind an ephemeral port on
        // every address without Landlock's bind check) and no TCP Fast Open connect-on-send.
        let listen = probe(&fx, &["--net", "none"], "mount", &[], &["listen"]);
        expect(
            &listen,
            "LISTEN-FAIL",
            &format!("{who:?} none fallback: listen"),
        );
        expect(
            &probe(&fx, &[], "", &[], &["listen"]),
            "LISTENING",
            "control listen",
        );
        let tfo = ["tfo", "127.0.0.1", tcp_port.as_str()];
        let before = server.accepted();
        expect(
            &probe(&fx, &["--net", "none"], "mount", &[], &tfo),
            "TFO-FAIL",
            &format!("{who:?} none fallback: TCP Fast Open"),
        );
        assert_eq!(server.accepted(), before, "{who:?}: TCP Fast Open got out");
        let inside = probe(&fx, &["--net", "none"], "", &[], &["loopback"]);
        expect(&inside, "LOOPBACK-OK", "loopback inside the namespace");
        // Without a namespace and without Landlock nothing could hold it: refused, not open.
        let open = probe(&fx, &["--net", "none"], "mount,landlock", &[], &tcp);
        assert_refused(
            &open,
            "none without namespace or Landlock",
            &["--net none", "Landlock"],
        );
    }
}

#[test]
fn net_connect_reaches_only_the_named_port_and_no_udp() {
    if !full_level_or_skip("net-connect") {
        return;
    }
    let allowed = Server::start("ALLOWED");
    let other = Server::start("OTHER");
    let udp = udp_echo();
    let (a, o, u) = (
        allowed.port.to_string(),
        other.port.to_string(),
        udp.to_string(),
    );
    let rule = format!("connect={a}");
    for who in users() {
        let fx = Fixture::new(who, "net-connect");
        expect(
            &probe(&fx, &[], "", &[], &["tcp", "127.0.0.1", &o]),
            "CONNECTED OTHER",
            "control",
        );
        expect(
            &probe(&fx, &[], "", &[], &["tfo", "127.0.0.1", &o]),
            "TFO-CONNECTED OTHER",
            "control: TCP Fast Open works on the host's network",
        );
        for disabled in ["", "mount"] {
            let what = format!("{who:?} {rule}, disabled={disabled:?}");
            let net = ["--net", rule.as_str()];
            expect(
                &probe(&fx, &net, disabled, &[], &["tcp", "127.0.0.1", &a]),
                "CONNECTED ALLOWED",
                &what,
            );
            let before = other.accepted();
            expect(
                &probe(&fx, &net, disabled, &[], &["tcp", "127.0.0.1", &o]),
                "REFUSED",
                &what,
            );
            assert_eq!(other.accepted(), before, "{what}: reached the other port");
            // TCP Fast Open connects inside sendto(), past Landlock's connect hook.
            expect(
                &probe(&fx, &net, disabled, &[], &["tfo", "127.0.0.1", &o]),
                "TFO-FAIL",
                &format!("{what}: TCP Fast Open"),
            );
            assert_eq!(
                other.accepted(),
                before,
                "{what}: TCP Fast Open reached the other port"
            );
            expect(
                &probe(&fx, &net, disabled, &[], &["udp", "127.0.0.1", &u]),
                "UDP-FAIL",
                &format!("{what}: udp"),
            );
            // bind= was not given: no port may be bound (listening is held by
            // port_modes_hold_listening_to_the_bind_ports).
            let free = free_port().to_string();
            let bound = probe(&fx, &net, disabled, &[], &["bind", &free]);
            expect(&bound, "BIND-FAIL", &what);
            assert!(
                bound.stdout.contains("13"),
                "{what}: not EACCES\n{}",
                bound.describe()
            );
        }
        // Landlock's TCP rules are the layer: without it the run is refused, never open.
        let open = probe(
            &fx,
            &["--net", &rule],
            "landlock",
            &[],
            &["tcp", "127.0.0.1", &o],
        );
        assert_refused(&open, "connect= without Landlock", &["--net", "Landlock"]);
        // bind=: only the named port.
        let free = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port().to_string();
        drop(free);
        let bind_rule = format!("bind={port}");
        let net = ["--net", bind_rule.as_str()];
        expect(
            &probe(&fx, &net, "", &[], &["bind", &port]),
            "BOUND",
            "bind= port",
        );
        expect(
            &probe(&fx, &net, "", &[], &["bind", "0"]),
            "BIND-FAIL",
            "bind= other",
        );
    }
}

/// A port no one listens on at the moment.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A client on the host, outside the jail: whenever the command writes "FAMILY PORT" to `file`
/// (net_probe.py serve, once it listens), it connects there over the host's loopback. Stops
/// when dropped.
struct HostClient {
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl HostClient {
    fn watch(file: PathBuf) -> HostClient {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                if let Ok(text) = std::fs::read_to_string(&file) {
                    let _ = std::fs::remove_file(&file);
                    if let Some((family, port)) = text.split_once(' ') {
                        let host = if family == "6" { "[::1]" } else { "127.0.0.1" };
                        let addr = format!("{host}:{port}").parse().unwrap();
                        let _ = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(3));
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        HostClient { stop }
    }
}

impl Drop for HostClient {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Issue 34: `--net connect=PORTS` held outbound TCP only, so a host client reached a listener
/// the command opened on another port. Listening follows the bind ports (none with `connect=`
/// alone): an explicit bind() to another port is Landlock's bind rule, and the listen() check
/// refuses a socket not bound to a named port; listen() on an unbound socket (which takes an
/// ephemeral port past Landlock's bind hook: the open run with only the check off shows it) is
/// the check's alone. IPv4 and IPv6. A listener on a named port takes a host client.
#[test]
fn port_modes_hold_listening_to_the_bind_ports() {
    if !full_level_or_skip("port_modes_hold_listening_to_the_bind_ports") {
        return;
    }
    let script = probe_script().to_string_lossy().into_owned();
    for who in users() {
        let fx = Fixture::new(who, "net-listen");
        let file = fx.scratch.join("port");
        let file_arg = file.to_string_lossy().into_owned();
        let _client = HostClient::watch(file.clone());
        let scratch = fx.p("scratch");
        let serve = |port: &str, family: &str| -> Vec<String> {
            [
                "/usr/bin/python3",
                &script,
                "serve",
                port,
                family,
                &file_arg,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect()
        };
        let connect = format!("connect={}", free_port());
        let named = free_port().to_string();
        let bind = format!("bind={named}");
        let both = [Layer::TcpRules, Layer::ListenCheck];
        let check = [Layer::ListenCheck];
        for (net, port, family, blockers) in [
            (&connect, Some(free_port()), "4", &both[..]),
            (&connect, Some(free_port()), "6", &both[..]),
            (&connect, None, "4", &check[..]),
            (&connect, None, "6", &check[..]),
            (&bind, Some(free_port()), "4", &both[..]),
            (&bind, Some(free_port()), "6", &both[..]),
            (&bind, None, "4", &check[..]),
            (&bind, None, "6", &check[..]),
        ] {
            let port = port.map_or("none".to_string(), |p| p.to_string());
            let name = format!("--net {net}: listen on {port} (IPv{family})");
            Attack::new(
                &name,
                &["--rw", &scratch, "--net", net],
                serve(&port, family),
                blockers,
            )
            .prove(&fx);
        }
        // The named port: a host client gets in, with every layer on, with or without the
        // mount view.
        for (family, disabled) in [("4", &[][..]), ("6", &[][..]), ("4", &[Layer::Mount][..])] {
            let mut args = vec!["--rw", scratch.as_str(), "--net", bind.as_str(), "--"];
            let argv = serve(&named, family);
            args.extend(argv.iter().map(String::as_str));
            let run = fx.jail_with(&args, disabled, &[]);
            assert_eq!(
                verdict(&run),
                Verdict::Allowed,
                "{who:?} {bind} IPv{family} {disabled:?}: the named port\n{}",
                run.describe()
            );
        }
        // Without the mount view the unbound listen() is refused all the same.
        let mut args = vec!["--rw", scratch.as_str(), "--net", bind.as_str(), "--"];
        let argv = serve("none", "4");
        args.extend(argv.iter().map(String::as_str));
        let run = fx.jail_with(&args, &[Layer::Mount], &[]);
        assert_eq!(
            verdict(&run),
            Verdict::Blocked,
            "{who:?}\n{}",
            run.describe()
        );
    }
}

/// `--dry-run` says what bind and listen are held to in the port modes: the plan's fields and
/// the gap line a person reads.
#[test]
fn dry_run_says_what_bind_and_listen_are_held_to() {
    let fx = Fixture::new(Who::User, "net-dry-run");
    for (net, bind, listen, line) in [
        (
            "connect=443",
            serde_json::json!([]),
            serde_json::json!({"mode": "refused"}),
            "connect to 443 (and 53, for lookups over TCP); bind and listen on no port \
             (listen() refused on TCP sockets)",
        ),
        (
            "bind=8080",
            serde_json::json!([8080]),
            serde_json::json!({"mode": "supervised", "ports": [8080]}),
            "connect to no port; bind and listen on 8080 (listen() only on a socket bound to \
             one of them)",
        ),
    ] {
        let run = fx.jail(&["--dry-run", "--net", net, "--", "true"]);
        assert!(run.ok(), "{}", run.describe());
        let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(doc["net"]["tcp_bind"], bind, "{net}");
        assert_eq!(doc["net"]["listen"], listen, "{net}");
        let gaps = doc["gaps"].to_string();
        assert!(gaps.contains(line), "{net}: {gaps}");
    }
}

/// The proxy mode's hosts, as the test resolver names them.
fn test_hosts() -> String {
    "api.test=127.0.0.1,evil.test=127.0.0.1,private.test=10.0.0.5".into()
}

#[test]
fn net_allow_reaches_allowed_names_through_the_proxy_only() {
    if !full_level_or_skip("net-allow") {
        return;
    }
    let api = Server::start("API-OK");
    let other = Server::start("OTHER");
    let udp = udp_echo();
    let (p, o, u) = (
        api.port.to_string(),
        other.port.to_string(),
        udp.to_string(),
    );
    let hosts = test_hosts();
    let env = [("JAIL_TEST_HOSTS", hosts.as_str())];
    let host = format!("allow-host=127.0.0.1:{p}");
    let net = [
        "--net",
        "allow=api.test,private.test",
        "--net",
        host.as_str(),
    ];
    for who in users() {
        let fx = Fixture::new(who, "net-allow");
        let what = |s: &str| format!("{who:?} {s}");
        let url = |host: &str, port: &str| format!("http://{host}:{port}/x");
        // Allowed: the name on the list, through HTTP_PROXY (plain HTTP and CONNECT).
        let ok = probe(&fx, &net, "", &env, &["http", &url("api.test", &p)]);
        expect(&ok, "HTTP 200 API-OK", &what("allowed name"));
        // The namespace holds it without Landlock (a kernel before 5.13) too.
        let ok = probe(&fx, &net, "landlock", &env, &["http", &url("api.test", &p)]);
        expect(&ok, "HTTP 200 API-OK", &what("allowed name, no Landlock"));
        let direct = probe(&fx, &net, "landlock", &env, &["tcp", "127.0.0.1", &p]);
        expect(&direct, "REFUSED", &what("direct TCP, no Landlock"));
        let before = api.accepted();
        // Refused by the proxy, before any connection: a name not on the list (resolving to an
        // allowed address), a raw IP, a listed name resolving to a private address.
        let cases = [
            ("name not on the list", url("evil.test", &p)),
            ("raw IP", url("127.0.0.2", &o)),
            ("private address", url("private.test", "80")),
        ];
        for (case, u) in &cases {
            let run = probe(&fx, &net, "", &env, &["http", u]);
            expect(&run, "HTTP 403", &what(case));
        }
        assert_eq!(
            api.accepted(),
            before,
            "{}",
            what("a refused request got through")
        );
        assert_eq!(other.accepted(), 0, "{}", what("the raw IP was contacted"));
        // A client that ignores the proxy variables gets nothing at all.
        let direct = [
            ("direct TCP", vec!["tcp", "127.0.0.1", p.as_str()]),
            ("UDP datagram", vec!["udp", "127.0.0.1", u.as_str()]),
            ("DNS query", vec!["dns", "api.test"]),
        ];
        for (case, args) in &direct {
            let before = api.accepted();
            let run = probe(&fx, &net, "", &env, args);
            assert_eq!(
                api.accepted(),
                before,
                "{}",
                what("a direct client got through")
            );
            assert!(
                run.stdout.starts_with("REFUSED")
                    || run.stdout.starts_with("UDP-FAIL")
                    || run.stdout.starts_with("DNS-FAIL"),
                "{}: {}",
                what(case),
                run.describe()
            );
            // Control: on the host's network the same client gets through.
            let control = probe(&fx, &[], "", &env, args);
            assert!(
                !control.stdout.starts_with("REFUSED") && !control.stdout.starts_with("UDP-FAIL")
                    || *case == "DNS query",
                "control {}: {}",
                what(case),
                control.describe()
            );
        }
    }
}

#[test]
fn net_allow_speaks_connect_and_socks5_to_curl() {
    if !full_level_or_skip("net-allow-curl") {
        return;
    }
    if !Path::new("/usr/bin/curl").exists() {
        panic!("curl is needed (.ci/run installs it)");
    }
    let api = Server::start("API-OK");
    let p = api.port.to_string();
    let hosts = test_hosts();
    let host = format!("allow-host=127.0.0.1:{p}");
    for who in users() {
        let fx = Fixture::new(who, "net-curl");
        let url = format!("http://api.test:{p}/x");
        for (mode, extra) in [
            ("CONNECT tunnel", vec!["-p"]),
            ("SOCKS5", vec!["-x", "socks5h://127.0.0.1:3128"]),
        ] {
            let mut argv = vec![
                "--net",
                "allow=api.test",
                "--net",
                host.as_str(),
                "--",
                "/usr/bin/curl",
                "-sS",
                "-m",
                "10",
            ];
            argv.extend(extra);
            argv.push(&url);
            let mut cmd = fx.command(common::jail_bin(), &argv);
            cmd.env("JAIL_TEST_HOSTS", &hosts);
            let run = Run::from(cmd.output().unwrap());
            assert_eq!(run.stdout, "API-OK", "{who:?} {mode}: {}", run.describe());
        }
        // SOCKS5 to a name not on the list: refused by the proxy.
        let evil = format!("http://evil.test:{p}/x");
        let argv = [
            "--net",
            "allow=api.test",
            "--net",
            host.as_str(),
            "--",
            "/usr/bin/curl",
            "-sS",
            "-m",
            "10",
            "-x",
            "socks5h://127.0.0.1:3128",
            evil.as_str(),
        ];
        let mut cmd = fx.command(common::jail_bin(), &argv);
        cmd.env("JAIL_TEST_HOSTS", &hosts);
        let run = Run::from(cmd.output().unwrap());
        assert_ne!(run.code, Some(0), "{who:?} socks5 evil: {}", run.describe());
        assert!(
            !run.stdout.contains("API-OK"),
            "{who:?}: {}",
            run.describe()
        );
    }
}

#[test]
fn net_allow_without_a_namespace_is_refused_unless_require_any_then_limited_to_the_proxy() {
    if !full_level_or_skip("net-allow-fallback") {
        return;
    }
    let api = Server::start("API-OK");
    let other = Server::start("OTHER");
    let (p, o) = (api.port.to_string(), other.port.to_string());
    let hosts = test_hosts();
    let env = [("JAIL_TEST_HOSTS", hosts.as_str())];
    let host = format!("allow-host=127.0.0.1:{p}");
    for who in users() {
        let fx = Fixture::new(who, "net-fallback");
        let url = format!("http://api.test:{p}/x");
        let allow = ["--net", "allow=api.test", "--net", host.as_str()];
        let refused = probe(&fx, &allow, "mount", &env, &["http", &url]);
        assert_refused(
            &refused,
            "allow= without namespace",
            &["--net", "network namespace", "--require any"],
        );
        let net = [
            "--net",
            "allow=api.test",
            "--net",
            host.as_str(),
            "--require",
            "any",
        ];
        let ok = probe(&fx, &net, "mount", &env, &["http", &url]);
        expect(&ok, "HTTP 200 API-OK", "fallback allowed name");
        assert!(
            ok.stderr.contains("proxy's port"),
            "the gap is named: {}",
            ok.describe()
        );
        let direct = probe(&fx, &net, "mount", &env, &["tcp", "127.0.0.1", &o]);
        expect(&direct, "REFUSED", "fallback direct TCP");
        assert_eq!(other.accepted(), 0);
    }
}

#[test]
fn net_rules_come_from_profiles_and_bad_values_are_refused() {
    for (value, needle) in [
        ("allow=", "allow="),
        ("connect=99999", "99999"),
        ("none,", "none,"),
        ("teleport", "teleport"),
    ] {
        let fx = Fixture::new(Who::User, "net-bad");
        let run = fx.jail(&["--net", value, "--", "true"]);
        assert_refused(&run, value, &[needle]);
    }
    let fx = Fixture::new(Who::User, "net-mix");
    let run = fx.jail(&["--net", "none", "--net", "connect=443", "--", "true"]);
    assert_refused(&run, "mixed modes", &["none", "connect=443"]);
}

/// `--net connect=443` resolves names: glibc's resolver is told `use-vc` (RES_OPTIONS), so a
/// lookup goes over TCP to the host's nameserver, on the DNS port jail opens with the mode; UDP
/// stays refused. Measured with a DNS server over TCP only (tests/helpers/dns_tcp.py) on the
/// loopback as the nameserver (a private mount namespace gives /etc/resolv.conf that line).
/// Control: the same lookup with the command's own RES_OPTIONS emptied goes over UDP and fails.
#[test]
fn connect_mode_resolves_names_over_tcp_and_keeps_udp_closed() {
    if !full_level_or_skip("connect_mode_resolves_names_over_tcp_and_keeps_udp_closed") {
        return;
    }
    if !common::is_root() {
        eprintln!(
            "skipping connect_mode_resolves_names_over_tcp_and_keeps_udp_closed: root only (port 53, a mount namespace)"
        );
        return;
    }
    let helper = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/helpers/dns_tcp.py");
    /// Stopped however the test ends (a server left on port 53 would fail the next run).
    struct Server(std::process::Child);
    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut server = Server(
        std::process::Command::new("python3")
            .arg(&helper)
            .args(["127.0.0.1", "53", "10.1.2.3"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut ready = [0u8; 6];
    server
        .0
        .stdout
        .take()
        .unwrap()
        .read_exact(&mut ready)
        .unwrap();
    assert_eq!(&ready, b"ready\n");
    let resolv = common::base_dir().join(format!("resolv-{}.conf", std::process::id()));
    std::fs::write(&resolv, "nameserver 127.0.0.1\n").unwrap();
    std::fs::set_permissions(&resolv, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let lookup = "import socket, sys\n\
        try:\n\
        \x20   print('RESOLVED', socket.getaddrinfo('some.host.test', 443, socket.AF_INET)[0][4][0])\n\
        except Exception as e:\n\
        \x20   print('FAILED', e)\n\
        try:\n\
        \x20   socket.socket(socket.AF_INET, socket.SOCK_DGRAM); print('UDP-OPEN')\n\
        except OSError as e:\n\
        \x20   print('UDP-REFUSED', e)\n";
    for who in users() {
        let fx = Fixture::new(who, "dns-tcp");
        let run = |inner: &[&str]| {
            let mut cmd = std::process::Command::new("unshare");
            cmd.args([
                "-m",
                "sh",
                "-c",
                "mount --bind \"$0\" /etc/resolv.conf && shift && exec \"$@\"",
            ])
            .arg(&resolv)
            .arg("--");
            if who == Who::User {
                cmd.args([
                    "setpriv",
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                ]);
            }
            cmd.arg(common::jail_bin())
                .args(["--net", "connect=443", "--"])
                .args(inner)
                .env("HOME", &fx.home)
                .env("PATH", "/usr/local/bin:/usr/bin:/bin")
                .current_dir(&fx.dir);
            Run::from(cmd.output().unwrap())
        };
        let r = run(&["python3", "-c", lookup]);
        assert!(
            r.stdout.contains("RESOLVED 10.1.2.3") && r.stdout.contains("UDP-REFUSED"),
            "as {who:?}\n{}",
            r.describe()
        );
        let r = run(&["env", "RES_OPTIONS=", "python3", "-c", lookup]);
        assert!(
            r.stdout.contains("FAILED") && r.stdout.contains("UDP-REFUSED"),
            "as {who:?}: the control resolved over UDP\n{}",
            r.describe()
        );
    }
    drop(server);
    let _ = std::fs::remove_file(&resolv);
}
