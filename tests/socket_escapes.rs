//! The ways around unix-socket mediation a red-team pass found, each closed: datagram sockets of
//! every kind, a notifying filter that is not jail's, an allowed socket's identity reused, a
//! nested sandbox's Landlock rules, sockets handed in with --keep-fd, and `..` in a relative
//! path (a legitimate use). Each shows the attack working where the rule is off.

mod common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::Path;

use common::{Fixture, full_level_or_skip, users};

fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// A host datagram socket anyone may send to; returns it (read with `received`).
fn host_datagram(path: &Path) -> UnixDatagram {
    let _ = std::fs::remove_file(path);
    let sock = UnixDatagram::bind(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    sock.set_nonblocking(true).unwrap();
    sock
}

fn received(sock: &UnixDatagram) -> Vec<String> {
    let mut out = Vec::new();
    let mut buf = [0u8; 256];
    while let Ok(n) = sock.recv(&mut buf) {
        out.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    out
}

/// A host stream daemon answering "HOST" until the test ends.
fn host_daemon(path: &Path) {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::thread::spawn(move || {
        for mut c in listener.incoming().flatten() {
            let _ = c.write_all(b"HOST");
        }
    });
}

fn each_user(test: &str, body: impl Fn(&Fixture)) {
    if !full_level_or_skip(test) {
        return;
    }
    for who in users() {
        body(&Fixture::new(who, test));
    }
}

const SEND_RAW: &str = r"
import socket, sys
for make in (lambda: socket.socket(socket.AF_UNIX, socket.SOCK_RAW),
             lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_RAW)[0],
             lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)[0]):
    try:
        make().sendto(b'FROM-JAIL', sys.argv[1]); print('sent')
    except OSError as e: print('refused', e)
";

/// unix_create() turns SOCK_RAW into SOCK_DGRAM, and sendto() names any host datagram socket
/// (journald, /dev/log, sd_notify, …): both types are refused, by socket() and socketpair().
#[test]
fn unix_raw_sockets_are_datagram_sockets_and_refused_like_them() {
    each_user("rt-sockraw", |fx| {
        let target = fx.dir.join("dgram.sock");
        let host = host_datagram(&target);
        let args = [
            "--allow-unix-sockets",
            "--",
            python(),
            "-c",
            SEND_RAW,
            target.to_str().unwrap(),
        ];
        let run = fx.jail(&args);
        let got = received(&host);
        assert!(
            got.is_empty(),
            "{:?}: host datagram socket reached: {got:?}\n{}",
            fx.who,
            run.describe()
        );
        // The control: with the filter off, the same datagrams arrive.
        let open = fx.jail_with(&args, &[common::Layer::Seccomp], &[]);
        assert!(!received(&host).is_empty(), "{}", open.describe());
    });
}

/// Without --allow-unix-sockets socket(AF_UNIX) is refused; a datagram pair would still send to
/// any host path, so socketpair() makes stream and seqpacket pairs only.
#[test]
fn datagram_socketpairs_are_refused_in_every_jail() {
    each_user("rt-pairdgram", |fx| {
        let target = fx.dir.join("dgram.sock");
        let host = host_datagram(&target);
        let args = ["--", python(), "-c", SEND_RAW, target.to_str().unwrap()];
        let run = fx.jail(&args);
        let got = received(&host);
        assert!(
            got.is_empty(),
            "{:?}: host datagram socket reached: {got:?}\n{}",
            fx.who,
            run.describe()
        );
        // The control: with the filter off, the same datagrams arrive.
        let open = fx.jail_with(&args, &[common::Layer::Seccomp], &[]);
        assert!(!received(&host).is_empty(), "{}", open.describe());
    });
}

/// A notifying filter already there (LXD/Incus syscall interception, sysbox, crun's
/// seccomp-notify, or an enclosing jail: they cannot be told apart) leaves no room for jail's
/// own: the launch stops rather than run unmediated.
#[test]
fn a_foreign_notifying_filter_stops_the_launch() {
    each_user("rt-foreign-notif", |fx| {
        let sock = fx.dir.join("host.sock");
        host_daemon(&sock);
        let wrap = common::compile_helper("notif_wrap");
        let jail = common::jail_bin().to_str().unwrap().to_string();
        let script = r"
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print('REACHED', s.recv(9))
except OSError as e: print('refused', e)
";
        let out = fx
            .command(
                &wrap,
                &[
                    &jail,
                    "--allow-unix-sockets",
                    "--",
                    python(),
                    "-c",
                    script,
                    sock.to_str().unwrap(),
                ],
            )
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            !stdout.contains("REACHED"),
            "{:?}: host daemon reached under a foreign notifier:\n{stdout}{}",
            fx.who,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(125), "{stdout}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("already has a notifying seccomp filter"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// `--allow-socket` is an inode: ext4 hands the number of a removed file to the next one, so the
/// supervisor holds the allowed socket open for the run and no later socket can take it.
#[test]
fn an_allowed_socket_identity_is_held_for_the_run() {
    each_user("rt-inode-reuse", |fx| {
        let allowed = fx.dir.join("allowed.sock");
        let l = UnixListener::bind(&allowed).unwrap();
        std::fs::set_permissions(&allowed, std::fs::Permissions::from_mode(0o777)).unwrap();
        // The command says when it runs (the supervisor holds the socket by then) and waits
        // for the host to have swapped it: ordered by conditions, never by times.
        let script = r"
import os, socket, sys, time
print('READY', flush=True)
while not os.path.exists(sys.argv[2]): time.sleep(0.02)
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print('REACHED', s.recv(9))
except OSError as e: print('refused', e)
";
        let victim = fx.dir.join("victim.sock");
        let go = fx.dir.join("go");
        let mut child = fx
            .command(
                common::jail_bin(),
                &[
                    "--allow-socket",
                    allowed.to_str().unwrap(),
                    "--",
                    python(),
                    "-c",
                    script,
                    victim.to_str().unwrap(),
                    go.to_str().unwrap(),
                ],
            )
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::BufRead;
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut ready = String::new();
        stdout.read_line(&mut ready).unwrap();
        assert_eq!(ready, "READY\n", "{:?}: the command did not start", fx.who);
        use std::os::unix::fs::MetadataExt;
        let ino = std::fs::metadata(&allowed).unwrap().ino();
        drop(l);
        std::fs::remove_file(&allowed).unwrap();
        host_daemon(&victim);
        let reused = std::fs::metadata(&victim).unwrap().ino() == ino;
        std::fs::write(&go, "").unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
        child.wait().unwrap();
        let stdout = rest;
        if !reused {
            eprintln!(
                "the filesystem under {} did not reuse the inode: nothing shown",
                fx.dir.display()
            );
            return;
        }
        assert!(
            !stdout.contains("REACHED"),
            "{:?}: a later host socket reached: {stdout}",
            fx.who
        );
    });
}

/// The connector connects TCP (and abstract) sockets in the domain it was forked in, so no nested
/// Landlock domain may be made under mediation: an inner jail's port rules are never bypassed
/// (it refuses to start without Landlock rather than run without them).
#[test]
fn an_inner_jails_tcp_port_rules_hold_under_an_enclosing_mediation() {
    each_user("rt-nested-tcp", |fx| {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port().to_string();
        let jail = common::jail_bin().to_str().unwrap().to_string();
        let script = r"
import socket, sys
s = socket.socket()
try:
    s.connect(('127.0.0.1', int(sys.argv[1]))); print('REACHED')
except OSError as e: print('refused', e)
";
        // Control: the inner jail alone refuses the port.
        let alone = fx.jail(&["--net", "connect=1", "--", python(), "-c", script, &port]);
        assert!(alone.stdout.contains("refused"), "{}", alone.describe());
        let nested = fx.jail(&[
            "--allow-userns",
            "--allow-unix-sockets",
            "--",
            &jail,
            "--net",
            "connect=1",
            "--",
            python(),
            "-c",
            script,
            &port,
        ]);
        assert!(
            !nested.stdout.contains("REACHED"),
            "{:?}: inner --net connect=1 bypassed:\n{}",
            fx.who,
            nested.describe()
        );
        assert_eq!(nested.code, Some(125), "{}", nested.describe());
        assert!(nested.stderr.contains("landlock"), "{}", nested.describe());
        drop(closed);
    });
}

/// A socket handed in unconnected (--keep-fd) would connect anywhere when unix sockets are
/// refused (nothing mediates then): the launch refuses it.
#[test]
fn a_kept_unconnected_unix_socket_is_refused() {
    each_user("rt-keepfd", |fx| {
        let sock = fx.dir.join("host.sock");
        host_daemon(&sock);
        let jail = common::jail_bin().to_str().unwrap().to_string();
        let inner = format!(
            "import socket\ns = socket.socket(fileno=7)\ntry:\n    s.connect({p:?}); print('REACHED')\nexcept OSError as e: print('refused', e)\n",
            p = sock.to_str().unwrap()
        );
        let script = format!(
            "import socket, os\ns = socket.socket(socket.AF_UNIX)\nos.dup2(s.fileno(), 7)\nos.execv({jail:?}, [{jail:?}, '--keep-fd', '7', '--', {py:?}, '-c', {inner:?}])\n",
            py = python(),
        );
        let out = fx
            .command(Path::new(python()), &["-c", &script])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            !stdout.contains("REACHED"),
            "{:?}: {stdout}{}",
            fx.who,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("--keep-fd 7: an unconnected unix socket"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// Legitimate use: a relative path with `..` names the parent of the working directory, as the
/// kernel reads it; RESOLVE_IN_ROOT on the cwd stops `..` at the cwd.
#[test]
fn a_relative_path_with_dotdot_reaches_the_jails_own_socket() {
    each_user("rt-dotdot", |fx| {
        let script = r"
import socket, os
os.makedirs('/tmp/d/sub')
l = socket.socket(socket.AF_UNIX); l.bind('/tmp/d/a.sock'); l.listen(1)
os.chdir('/tmp/d/sub')
s = socket.socket(socket.AF_UNIX)
try:
    s.connect('../a.sock'); print('CONNECTED')
except OSError as e: print('failed', e)
";
        let run = fx.jail(&["--allow-unix-sockets", "--", python(), "-c", script]);
        assert!(
            run.stdout.contains("CONNECTED"),
            "{:?}: {}",
            fx.who,
            run.describe()
        );
    });
}
