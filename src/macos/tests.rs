//! Tests of the Seatbelt profile, run on every system: snapshots of every shipped profile, a
//! small s-expression reader that checks the syntax of every output, and a small evaluator of
//! SBPL's last-match-wins rule that checks each generated profile against the policy it came
//! from (`Policy::access_at`, the same question the Linux layers answer).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::seatbelt::{DATA_VOLUME, DNS_SOCKET, Params, profile, quote, real_path};
use super::{NotRunnable, child_env, find_command};
use crate::policy::profile::{Catalog, EMBEDDED, Expansion, TmpOption};
use crate::policy::{Access, Kind, Origin, PathRule, Policy, TmpMode};
use crate::protect::PROTECTED;

const HOME: &str = "/Users/u";
const CWD: &str = "/Users/u/repo";
const TMP: &str = "/private/var/folders/zz/xyz/T/jail-42-0000abcd/tmp";
const TTY: &str = "/dev/ttys003";

fn params() -> Params {
    Params {
        tmp_dir: TMP.into(),
        ttys: vec![TTY.into()],
    }
}

fn rule(path: &str, access: Access, kind: Kind) -> PathRule {
    PathRule {
        path: path.into(),
        access,
        kind,
        origin: Origin::Default,
    }
}

fn policy_with(rules: Vec<PathRule>) -> Policy {
    let mut all = vec![rule("/", Access::Ro, Kind::Dir)];
    all.extend(rules);
    all.sort_by(|a, b| a.path.cmp(&b.path));
    Policy {
        rules: all,
        profile: "test".into(),
        cwd: CWD.into(),
        tmp: TmpMode::Private,
        allow_userns: false,
        allow_unix_sockets: false,
        command: vec!["true".into()],
        ..Policy::probe_default()
    }
}

// ---------------------------------------------------------------------------------------------
// The shipped profiles, on a fake Mac: HOME=/Users/u, the project at /Users/u/repo (a git
// repository with .git/hooks and .git/config), no variables set. Everything a profile names in
// HOME or /var/run exists (nothing else: there is no /run on macOS) except its `protect` paths (a
// fresh state directory). Nothing touches the real filesystem.
// ---------------------------------------------------------------------------------------------

fn fake_exists(path: &Path) -> bool {
    path.starts_with(HOME) || path.starts_with("/var/run")
}

/// The fake filesystem has no metadata: names with an extension, and the credential files the
/// default profile names, are files.
fn fake_kind(path: &Path) -> Kind {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let files = [
        ".netrc",
        ".git-credentials",
        ".npmrc",
        ".pypirc",
        "credentials",
    ];
    if name.trim_start_matches('.').contains('.') || files.contains(&name) {
        Kind::File
    } else {
        Kind::Dir
    }
}

/// What `policy::resolve` would build for profile `name` on the fake Mac.
fn fake_policy(name: &str) -> Policy {
    let prof = Catalog::load(None).unwrap().resolve(name).unwrap();
    let vars = |_: &str| None;
    let x = Expansion {
        home: Some(Path::new(HOME)),
        cwd: Path::new(CWD),
        var: &vars,
    };
    let mut rules: BTreeMap<PathBuf, PathRule> = BTreeMap::new();
    rules.insert("/".into(), rule("/", Access::Ro, Kind::Dir));
    let mut protect_absent = Vec::new();
    for p in &prof.paths {
        let Some(expanded) = x.expand(&p.template).unwrap() else {
            continue;
        };
        let path = PathBuf::from(expanded);
        if p.protect {
            protect_absent.push(path);
            continue;
        }
        if !fake_exists(&path) {
            continue;
        }
        let kind = if p.access == Access::Rw {
            Kind::Dir
        } else {
            fake_kind(&path)
        };
        rules.insert(
            path.clone(),
            PathRule {
                path,
                access: p.access,
                kind,
                origin: Origin::Profile(p.profile.clone()),
            },
        );
    }
    // `home = "hidden"`: the Mac's homes (HOME, /Users, /var/root) hidden, as resolve does.
    let homes = crate::policy::homes::HomesInput {
        mode: prof.options.home.unwrap_or_default(),
        homes: vec![HOME.into(), "/Users".into(), "/var/root".into()],
        path_dirs: vec![],
        programs: vec![],
    };
    crate::policy::homes::hide_homes(&mut rules, &homes, Path::new(CWD), true, &MacHomes).unwrap();
    let roots: Vec<PathBuf> = rules
        .values()
        .filter(|r| r.access == Access::Rw)
        .map(|r| r.path.clone())
        .collect();
    let mut absent = Vec::new();
    for root in roots {
        for protected in PROTECTED.iter().map(|p| p.pattern) {
            if protected.starts_with('*') {
                continue;
            }
            let path = root.join(protected);
            let kind = match protected {
                ".git/hooks" if root == Path::new(CWD) => Some(Kind::Dir),
                ".git/config" if root == Path::new(CWD) => Some(Kind::File),
                _ => None,
            };
            match kind {
                Some(kind) => {
                    rules.insert(
                        path.clone(),
                        PathRule {
                            path,
                            access: Access::Ro,
                            kind,
                            origin: Origin::Protected(root.clone()),
                        },
                    );
                }
                // resolve records no absent .git: a new one is caught after the run.
                None if protected != ".git" => absent.push(path),
                None => {}
            }
        }
    }
    absent.extend(protect_absent);
    let mut policy = policy_with(vec![]);
    policy.rules = rules.into_values().collect();
    policy.absent_protected = absent;
    policy.profile = name.to_string();
    policy.tmp = match prof.options.tmp {
        Some(TmpOption::Host) => TmpMode::Host,
        _ => TmpMode::Private,
    };
    policy.allow_unix_sockets = prof.options.allow_unix_sockets.unwrap_or(false);
    policy
}

// ---------------------------------------------------------------------------------------------
// Snapshots.
// ---------------------------------------------------------------------------------------------

/// Compares `actual` with src/macos/snapshots/NAME.sb; with JAIL_UPDATE_SNAPSHOTS=1, writes it.
fn check_snapshot(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/macos/snapshots")
        .join(format!("{name}.sb"));
    if std::env::var_os("JAIL_UPDATE_SNAPSHOTS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "snapshot {}: {e}; run with JAIL_UPDATE_SNAPSHOTS=1 to write it",
            path.display()
        )
    });
    if expected != actual {
        panic!(
            "snapshot {} differs (- snapshot, + generated; JAIL_UPDATE_SNAPSHOTS=1 accepts the \
             new one):\n{}",
            path.display(),
            line_diff(&expected, actual)
        );
    }
}

/// The lines only in `a` (-) and only in `b` (+), by longest common subsequence, with numbers.
fn line_diff(a: &str, b: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("{:>4} + {}\n", j + 1, b[j]));
            j += 1;
        } else {
            out.push_str(&format!("{:>4} - {}\n", i + 1, a[i]));
            i += 1;
        }
    }
    out
}

#[test]
fn every_shipped_profile_matches_its_snapshot() {
    for (name, _) in EMBEDDED {
        let text = profile(&fake_policy(name), &params()).unwrap();
        check_snapshot(name, &text);
    }
}

#[test]
fn every_shipped_profile_is_well_formed_and_enforces_its_policy() {
    for (name, _) in EMBEDDED {
        let policy = fake_policy(name);
        let text = profile(&policy, &params()).unwrap();
        let forms = parse(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        check_structure(&forms).unwrap_or_else(|e| panic!("{name}: {e}"));
        check_order(&forms).unwrap_or_else(|e| panic!("{name}: {e}"));
        check_semantics(&policy, &rules(&forms)).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn the_shipped_profiles_hide_credentials_and_protect_the_project() {
    let policy = fake_policy("workspace");
    let r = rules(&parse(&profile(&policy, &params()).unwrap()).unwrap());
    let f = |p: &str| Query::File(PathBuf::from(p));
    for secret in [
        "/Users/u/.ssh/id_ed25519",
        "/Users/u/.aws/credentials",
        "/Users/u/.netrc",
    ] {
        assert!(!allowed(&r, "file-read-data", &f(secret)), "{secret}");
        let alias = format!("{DATA_VOLUME}{secret}");
        assert!(!allowed(&r, "file-read-data", &f(&alias)), "{alias}");
    }
    // The homes are hidden (every shipped profile): not even listed.
    assert!(
        !allowed(&r, "file-read-data", &f("/Users/u/.ssh")),
        "no listing"
    );
    assert!(!allowed(&r, "file-read-data", &f("/Users/u/notes.txt")));
    assert!(allowed(
        &r,
        "file-write-data",
        &f("/Users/u/repo/src/main.rs")
    ));
    assert!(allowed(
        &r,
        "file-write-create",
        &f("/Users/u/repo/.git/objects/ab/cdef")
    ));
    for protected in [
        "/Users/u/repo/.git/hooks/pre-commit",
        "/Users/u/repo/.git/config",
        "/Users/u/repo/.envrc",
        "/Users/u/repo/.vscode/tasks.json",
        "/System/Volumes/Data/Users/u/repo/.git/hooks/pre-commit",
    ] {
        assert!(
            !allowed(&r, "file-write-create", &f(protected)),
            "{protected}"
        );
        assert!(
            !allowed(&r, "file-write-data", &f(protected)),
            "{protected}"
        );
    }
    for pinned in ["/Users/u/repo", "/Users/u/repo/.git"] {
        assert!(!allowed(&r, "file-write-unlink", &f(pinned)), "{pinned}");
    }
    assert!(allowed(&r, "file-write-unlink", &f("/Users/u/repo/src")));
    assert!(
        !allowed(&r, "file-link", &f("/Users/u/repo/x")),
        "no hard links"
    );
    assert!(!allowed(&r, "file-write-data", &f("/Users/u/.zshrc")));
    assert!(!allowed(
        &r,
        "file-read-data",
        &f("/private/tmp/other-users-file")
    ));
    assert!(allowed(&r, "file-write-create", &f(&format!("{TMP}/x"))));
    assert!(allowed(&r, "file-write-data", &f("/dev/null")));
    assert!(allowed(&r, "file-write-data", &f(TTY)));
    assert!(
        !allowed(&r, "file-write-data", &f("/dev/ttys009")),
        "another terminal"
    );
    assert!(!allowed(&r, "file-write-unlink", &f("/dev/null")));
    assert!(!allowed(&r, "process-exec", &f("/Users/u/.ssh/tool")));
    assert!(allowed(&r, "process-exec", &f("/usr/bin/git")));
}

#[test]
fn unix_sockets_follow_the_policy() {
    let sock = |side: &'static str, p: &str| Query::Socket(side, PathBuf::from(p));
    // default: refused, but for name resolution.
    let r = rules(&parse(&profile(&fake_policy("default"), &params()).unwrap()).unwrap());
    assert!(!allowed(
        &r,
        "network-outbound",
        &sock("remote", "/Users/u/repo/s")
    ));
    assert!(!allowed(
        &r,
        "network-outbound",
        &sock("remote", "/private/var/run/docker.sock")
    ));
    assert!(!allowed(
        &r,
        "network-bind",
        &sock("local", &format!("{TMP}/s"))
    ));
    assert!(allowed(&r, "network-outbound", &sock("remote", DNS_SOCKET)));
    // claude-code: allowed, except into hidden places; bound only where writable.
    let r = rules(&parse(&profile(&fake_policy("claude-code"), &params()).unwrap()).unwrap());
    assert!(allowed(
        &r,
        "network-outbound",
        &sock("remote", &format!("{TMP}/cc/s"))
    ));
    assert!(!allowed(
        &r,
        "network-outbound",
        &sock("remote", "/private/var/run/docker.sock")
    ));
    assert!(!allowed(
        &r,
        "network-outbound",
        &sock("remote", "/Users/u/.docker/run/docker.sock")
    ));
    assert!(allowed(
        &r,
        "network-bind",
        &sock("local", &format!("{TMP}/cc/s"))
    ));
    assert!(allowed(
        &r,
        "network-bind",
        &sock("local", "/Users/u/.claude/s")
    ));
    assert!(!allowed(&r, "network-bind", &sock("local", "/Users/u/s")));
    assert!(!allowed(
        &r,
        "network-bind",
        &sock("local", "/Users/u/.claude/hooks/s")
    ));
    assert!(allowed(&r, "network-outbound", &sock("remote", DNS_SOCKET)));
}

#[test]
fn host_tmp_is_the_real_private_tmp_and_writable() {
    let mut policy = policy_with(vec![rule("/tmp", Access::Rw, Kind::Dir)]);
    policy.tmp = TmpMode::Host;
    let text = profile(&policy, &params()).unwrap();
    assert!(
        text.contains("(allow file-write* (subpath \"/private/tmp\"))"),
        "{text}"
    );
    assert!(!text.contains("(subpath \"/tmp\")"), "{text}");
    let forms = parse(&text).unwrap();
    check_semantics(&policy, &rules(&forms)).unwrap();
    let r = rules(&forms);
    assert!(allowed(
        &r,
        "file-write-create",
        &Query::File("/private/tmp/x".into())
    ));
    assert!(allowed(
        &r,
        "file-read-data",
        &Query::File("/private/tmp/x".into())
    ));
}

#[test]
fn nested_rules_apply_deepest_last() {
    // --rw repo, --ro repo/vendor, --rw repo/vendor/out, --hide ~/.config/gh with
    // --ro ~/.config/gh/hosts.yml (a flag naming a path inside a hidden one).
    let policy = policy_with(vec![
        rule("/Users/u/repo", Access::Rw, Kind::Dir),
        rule("/Users/u/repo/vendor", Access::Ro, Kind::Dir),
        rule("/Users/u/repo/vendor/out", Access::Rw, Kind::Dir),
        rule("/Users/u/.config/gh", Access::Hide, Kind::Dir),
        rule("/Users/u/.config/gh/hosts.yml", Access::Ro, Kind::File),
    ]);
    let forms = parse(&profile(&policy, &params()).unwrap()).unwrap();
    check_order(&forms).unwrap();
    let r = rules(&forms);
    check_semantics(&policy, &r).unwrap();
    let f = |p: &str| Query::File(PathBuf::from(p));
    assert!(allowed(
        &r,
        "file-read-data",
        &f("/Users/u/.config/gh/hosts.yml")
    ));
    assert!(!allowed(
        &r,
        "file-read-data",
        &f("/Users/u/.config/gh/token")
    ));
    assert!(allowed(
        &r,
        "file-write-data",
        &f("/Users/u/repo/vendor/out/a.o")
    ));
    assert!(!allowed(
        &r,
        "file-write-data",
        &f("/Users/u/repo/vendor/lib.c")
    ));
    assert!(!allowed(
        &r,
        "file-write-unlink",
        &f("/Users/u/repo/vendor")
    ));
}

#[test]
fn deny_default_comes_first_after_version() {
    let forms = parse(&profile(&fake_policy("default"), &params()).unwrap()).unwrap();
    assert_eq!(forms[0], list(&["version", "1"]));
    assert_eq!(forms[1], list(&["deny", "default"]));
}

fn list(atoms: &[&str]) -> Sx {
    Sx::List(atoms.iter().map(|a| Sx::Atom(a.to_string())).collect())
}

#[test]
fn odd_paths_are_quoted_safely() {
    let odd = [
        "/Users/u/my repo (copy)",
        "/Users/u/we\"ird\\name",
        "/Users/u/a)b(c;d#e|f",
        "/Users/u/naïve ünïcødé 日本",
        "/Users/u/trailing\\",
    ];
    let mut rules = vec![];
    for (i, p) in odd.iter().enumerate() {
        rules.push(rule(
            p,
            if i % 2 == 0 { Access::Rw } else { Access::Hide },
            Kind::Dir,
        ));
    }
    rules.push(rule(
        "/Users/u/my repo (copy)/.git/hooks",
        Access::Ro,
        Kind::Dir,
    ));
    let policy = policy_with(rules);
    let text = profile(&policy, &params()).unwrap();
    let forms = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    check_structure(&forms).unwrap();
    check_order(&forms).unwrap();
    let r = self::rules(&forms);
    // The evaluator decodes the strings: each rule names exactly the path it was given.
    check_semantics(&policy, &r).unwrap();
    assert!(!allowed(
        &r,
        "file-read-data",
        &Query::File("/Users/u/we\"ird\\name/x".into())
    ));
    assert!(allowed(
        &r,
        "file-read-data",
        &Query::File("/Users/u/we\"ird".into())
    ));

    assert_eq!(
        quote(Path::new("/a b/\"q\"\\(x)")).unwrap(),
        r#""/a b/\"q\"\\(x)""#
    );
    assert_eq!(quote(Path::new("/ü")).unwrap(), "\"/ü\"");
}

#[test]
fn paths_sbpl_cannot_name_safely_are_refused() {
    use std::os::unix::ffi::OsStrExt;
    let refuse = |path: PathBuf, why: &str| {
        let policy = policy_with(vec![PathRule {
            path: path.clone(),
            access: Access::Hide,
            kind: Kind::Dir,
            origin: Origin::Default,
        }]);
        let e = profile(&policy, &params()).unwrap_err().to_string();
        assert!(e.contains(why), "{path:?}: {e}");
    };
    refuse("/Users/u/new\nline".into(), "control character U+000A");
    refuse("/Users/u/tab\there".into(), "control character U+0009");
    refuse("/Users/u/nul\u{7f}del".into(), "control character U+007F");
    refuse(
        PathBuf::from(std::ffi::OsStr::from_bytes(b"/Users/u/\xff")),
        "not valid UTF-8",
    );
    refuse("relative/path".into(), "not absolute");
    refuse("/Users/u/../etc".into(), "'..'");
    assert!(quote(Path::new("/a\nb")).is_err());
    assert!(quote(Path::new("/a\rb")).is_err());

    let mut p = params();
    p.tmp_dir = "/".into();
    assert!(profile(&policy_with(vec![]), &p).is_err());
    let mut p = params();
    p.tmp_dir = "/Users".into();
    let hide_in = policy_with(vec![rule("/Users/u/.ssh", Access::Hide, Kind::Dir)]);
    assert!(
        profile(&hide_in, &p).is_err(),
        "the run directory must hold no rule"
    );
    let mut p = params();
    p.ttys = vec!["/Users/u/notatty".into()];
    assert!(profile(&policy_with(vec![]), &p).is_err());
}

#[test]
fn symlinked_roots_map_to_their_real_paths() {
    for (from, to) in [
        ("/tmp", "/private/tmp"),
        ("/tmp/x/y", "/private/tmp/x/y"),
        ("/var/folders/zz/T", "/private/var/folders/zz/T"),
        ("/etc/hosts", "/private/etc/hosts"),
        ("/tmpfoo", "/tmpfoo"),
        ("/private/tmp/x", "/private/tmp/x"),
        ("/Users/u/tmp", "/Users/u/tmp"),
    ] {
        assert_eq!(real_path(Path::new(from)), Path::new(to), "{from}");
    }
    // A rule written for /var is emitted for /private/var, and a trailing slash goes.
    let policy = policy_with(vec![rule(
        "/var/run/docker.sock/",
        Access::Hide,
        Kind::File,
    )]);
    let text = profile(&policy, &params()).unwrap();
    assert!(
        text.contains("(literal \"/private/var/run/docker.sock\")"),
        "{text}"
    );
    assert!(!text.contains("\"/var/run"), "{text}");
}

#[test]
fn only_known_operations_and_filters_are_used() {
    const OPS: &[&str] = &[
        "default",
        "process-fork",
        "process-exec",
        "process-info*",
        "signal",
        "sysctl-read",
        "sysctl-write",
        "mach-host*",
        "user-preference-read",
        "mach-lookup",
        "ipc-posix-sem",
        "ipc-posix-shm-read*",
        "file-read*",
        "file-read-metadata",
        "file-write*",
        "file-write-data",
        "file-write-unlink",
        "file-ioctl",
        "file-link",
        "pseudo-tty",
        "network*",
        "network-outbound",
        "network-bind",
        "system-socket",
    ];
    const FILTERS: &[&str] = &[
        "literal",
        "subpath",
        "path-literal",
        "regex",
        "require-all",
        "extension",
        "target",
        "sysctl-name",
        "global-name",
        "ipc-posix-name",
        "remote",
        "local",
    ];
    fn filters_ok(f: &Sx) -> Result<(), String> {
        let Sx::List(items) = f else {
            return Ok(());
        };
        match items.first() {
            Some(Sx::Atom(a)) if FILTERS.contains(&a.as_str()) => {}
            other => return Err(format!("unknown filter {other:?}")),
        }
        items[1..].iter().try_for_each(filters_ok)
    }
    let mut texts: Vec<String> = EMBEDDED
        .iter()
        .map(|(n, _)| profile(&fake_policy(n), &params()).unwrap())
        .collect();
    let mut host = policy_with(vec![rule("/tmp", Access::Rw, Kind::Dir)]);
    host.tmp = TmpMode::Host;
    host.allow_unix_sockets = true;
    texts.push(profile(&host, &params()).unwrap());
    for text in texts {
        for form in parse(&text).unwrap().iter().skip(1) {
            let Sx::List(items) = form else {
                unreachable!()
            };
            for item in &items[1..] {
                match item {
                    Sx::Atom(op) => assert!(OPS.contains(&op.as_str()), "unknown operation {op}"),
                    f => filters_ok(f).unwrap(),
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The environment and the command lookup.
// ---------------------------------------------------------------------------------------------

#[test]
fn the_environment_points_tmp_at_the_run_directory() {
    let mut policy = policy_with(vec![]);
    policy.env.vars = [
        ("PATH", "/usr/bin:/bin"),
        ("CARGO_TARGET_DIR", "/tmp/jail-cache/cargo-target"),
        ("XDG_CACHE_HOME", "/private/tmp/jail-cache/xdg"),
        ("ODD", "/tmpfoo/x"),
        ("ROOT", "/tmp"),
        ("TMPDIR", "/var/folders/zz/xyz/T/"),
        ("JAIL", "0"),
    ]
    .iter()
    .map(|(k, v)| (OsString::from(k), OsString::from(v)))
    .collect();
    let env = child_env(&policy, Path::new(TMP), Some(Path::new("/run/policy.json")));
    let get = |k: &str| {
        let found: Vec<_> = env.iter().filter(|(n, _)| n == k).collect();
        assert!(found.len() <= 1, "{k} set twice");
        found.first().map(|(_, v)| v.to_string_lossy().into_owned())
    };
    assert_eq!(get("PATH").unwrap(), "/usr/bin:/bin");
    assert_eq!(
        get("CARGO_TARGET_DIR").unwrap(),
        format!("{TMP}/jail-cache/cargo-target")
    );
    assert_eq!(
        get("XDG_CACHE_HOME").unwrap(),
        format!("{TMP}/jail-cache/xdg")
    );
    assert_eq!(get("ODD").unwrap(), "/tmpfoo/x");
    assert_eq!(get("ROOT").unwrap(), TMP);
    assert_eq!(get("TMPDIR").unwrap(), TMP);
    assert_eq!(get("JAIL").unwrap(), "1");
    assert_eq!(get("JAIL_PROFILE").unwrap(), "test");
    assert_eq!(get("JAIL_POLICY").unwrap(), "/run/policy.json");

    policy.tmp = TmpMode::Host;
    let env = child_env(&policy, Path::new(TMP), None);
    let cargo = env.iter().find(|(k, _)| k == "CARGO_TARGET_DIR").unwrap();
    assert_eq!(
        cargo.1, "/tmp/jail-cache/cargo-target",
        "the host's /tmp is shared"
    );
    assert!(!env.iter().any(|(k, _)| k == "JAIL_POLICY"));
}

#[test]
fn commands_are_found_as_execvp_would() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("jail-macos-find-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::create_dir_all(dir.join("other")).unwrap();
    let tool = dir.join("bin/tool");
    std::fs::write(&tool, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("other/plain"), "").unwrap();
    std::fs::write(dir.join("bin/plain"), "").unwrap();
    let path = std::ffi::OsString::from(format!(
        "{}:{}",
        dir.join("other").display(),
        dir.join("bin").display()
    ));
    let find = |name: &str| find_command(name.as_ref(), Some(&path), &dir);
    assert_eq!(find("tool").unwrap(), tool);
    assert_eq!(find("./bin/tool").unwrap(), dir.join("./bin/tool"));
    let code = |r: Result<PathBuf, NotRunnable>| r.unwrap_err().code;
    assert_eq!(code(find("nope")), 127);
    assert_eq!(code(find("plain")), 126);
    assert_eq!(code(find("./other/plain")), 126);
    assert_eq!(code(find("./other")), 126, "a directory");
    assert_eq!(code(find("")), 127);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// A small reader for the SBPL that the generator writes: lists, atoms, "strings" (only \\ and \"
// escapes, no control characters), #"regexes" and ; comments.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Sx {
    Atom(String),
    Str(String),
    Regex(String),
    List(Vec<Sx>),
}

fn parse(text: &str) -> Result<Vec<Sx>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut stack: Vec<Vec<Sx>> = vec![vec![]];
    let (mut i, mut line) = (0, 1);
    let delimiter =
        |c: Option<&char>| c.is_none_or(|c| c.is_whitespace() || *c == ')' || *c == '(');
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            c if c.is_whitespace() => i += 1,
            ';' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '(' => {
                stack.push(vec![]);
                i += 1;
            }
            ')' => {
                if stack.len() == 1 {
                    return Err(format!("line {line}: ')' closes nothing"));
                }
                let done = stack.pop().unwrap();
                stack.last_mut().unwrap().push(Sx::List(done));
                i += 1;
            }
            '"' | '#' => {
                let regex = c == '#';
                if regex && chars.get(i + 1) != Some(&'"') {
                    return Err(format!("line {line}: '#' not followed by a string"));
                }
                i += if regex { 2 } else { 1 };
                let mut s = String::new();
                loop {
                    match chars.get(i) {
                        None => return Err(format!("line {line}: unterminated string")),
                        Some('"') => break,
                        Some('\\') if !regex => {
                            match chars.get(i + 1) {
                                Some(e @ ('\\' | '"')) => s.push(*e),
                                other => {
                                    return Err(format!("line {line}: escape \\{other:?}"));
                                }
                            }
                            i += 2;
                        }
                        Some(c) if c.is_control() => {
                            return Err(format!("line {line}: control character in a string"));
                        }
                        Some(c) => {
                            s.push(*c);
                            i += 1;
                        }
                    }
                }
                i += 1;
                if !delimiter(chars.get(i)) {
                    return Err(format!("line {line}: text right after a string"));
                }
                let form = if regex { Sx::Regex(s) } else { Sx::Str(s) };
                stack.last_mut().unwrap().push(form);
            }
            _ => {
                let start = i;
                while !delimiter(chars.get(i)) && chars[i] != '"' && chars[i] != ';' {
                    i += 1;
                }
                let atom: String = chars[start..i].iter().collect();
                stack.last_mut().unwrap().push(Sx::Atom(atom));
            }
        }
    }
    if stack.len() != 1 {
        return Err(format!("{} unclosed '('", stack.len() - 1));
    }
    Ok(stack.pop().unwrap())
}

/// Every top-level form is `(version 1)`, then `(allow|deny OPERATION… FILTER…)` with at least
/// one operation and the operations before the filters.
fn check_structure(forms: &[Sx]) -> Result<(), String> {
    for (n, form) in forms.iter().enumerate() {
        let Sx::List(items) = form else {
            return Err(format!("form {n} is not a list: {form:?}"));
        };
        if n == 0 {
            if *form != list(&["version", "1"]) {
                return Err(format!("first form {form:?}"));
            }
            continue;
        }
        match items.first() {
            Some(Sx::Atom(a)) if a == "allow" || a == "deny" => {}
            _ => return Err(format!("form {n}: {form:?}")),
        }
        let ops = items[1..]
            .iter()
            .take_while(|i| matches!(i, Sx::Atom(_)))
            .count();
        if ops == 0 || items[1 + ops..].iter().any(|i| !matches!(i, Sx::List(_))) {
            return Err(format!(
                "form {n}: operations then filters expected: {form:?}"
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// A small evaluator: the last rule whose operation and (any) filter match decides; path filters
// (literal, subpath, the unix-socket forms) only; any other filter never matches a path query.
// ---------------------------------------------------------------------------------------------

struct Rule {
    allow: bool,
    ops: Vec<String>,
    filters: Vec<Sx>,
    index: usize,
}

fn rules(forms: &[Sx]) -> Vec<Rule> {
    let mut out = Vec::new();
    for (index, form) in forms.iter().enumerate().skip(1) {
        let Sx::List(items) = form else { continue };
        let allow = items[0] == Sx::Atom("allow".into());
        let ops = items[1..]
            .iter()
            .filter_map(|i| match i {
                Sx::Atom(a) => Some(a.clone()),
                _ => None,
            })
            .collect();
        let filters = items[1..]
            .iter()
            .filter(|i| matches!(i, Sx::List(_)))
            .cloned()
            .collect();
        out.push(Rule {
            allow,
            ops,
            filters,
            index,
        });
    }
    out
}

#[derive(Debug)]
enum Query {
    File(PathBuf),
    /// "remote" (connect) or "local" (bind), and the socket's path.
    Socket(&'static str, PathBuf),
}

fn op_matches(pattern: &str, op: &str) -> bool {
    pattern == "default"
        || pattern == op
        || pattern.strip_suffix('*').is_some_and(|p| op.starts_with(p))
}

fn path_filter(f: &Sx, path: &Path, socket: bool) -> bool {
    let Sx::List(items) = f else { return false };
    let (Some(Sx::Atom(kind)), Some(Sx::Str(arg))) = (items.first(), items.get(1)) else {
        return false;
    };
    match kind.as_str() {
        "literal" if !socket => path == Path::new(arg),
        "path-literal" if socket => path == Path::new(arg),
        "subpath" => path.starts_with(arg),
        _ => false,
    }
}

fn filter_matches(f: &Sx, q: &Query) -> bool {
    match q {
        Query::File(p) => path_filter(f, p, false),
        Query::Socket(side, p) => {
            let Sx::List(items) = f else { return false };
            if items.first() != Some(&Sx::Atom(side.to_string()))
                || items.get(1) != Some(&Sx::Atom("unix-socket".into()))
            {
                return false;
            }
            match items.get(2) {
                None => true,
                Some(inner) => path_filter(inner, p, true),
            }
        }
    }
}

/// Index of the rule that decides, and whether it allows.
fn decide(rules: &[Rule], op: &str, q: &Query) -> Option<(usize, bool)> {
    rules
        .iter()
        .filter(|r| r.ops.iter().any(|o| op_matches(o, op)))
        .filter(|r| r.filters.is_empty() || r.filters.iter().any(|f| filter_matches(f, q)))
        .map(|r| (r.index, r.allow))
        .next_back()
}

fn allowed(rules: &[Rule], op: &str, q: &Query) -> bool {
    decide(rules, op, q).is_some_and(|(_, allow)| allow)
}

/// The profile answers as the policy does, for every rule's path, something beneath it and its
/// parent: Ro readable not writable, Rw both, Hide neither (nor executable); a protected name
/// that does not exist is not writable; the host's /tmp is hidden when /tmp is private; the data
/// volume's spelling of a path never opens what the path's own spelling denies.
fn check_semantics(policy: &Policy, r: &[Rule]) -> Result<(), String> {
    let mut probes: Vec<PathBuf> = vec![
        "/Users/u/notes.txt".into(),
        "/Users/u/repo/src/main.rs".into(),
        "/etc/passwd".into(),
        "/usr/bin/env".into(),
        "/tmp/x".into(),
    ];
    for rule in &policy.rules {
        probes.push(rule.path.clone());
        if rule.kind == Kind::Dir {
            probes.push(rule.path.join("probe"));
        }
        if let Some(parent) = rule.path.parent() {
            probes.push(parent.into());
        }
    }
    for p in &policy.absent_protected {
        probes.push(p.clone());
        probes.push(p.join("x"));
    }
    for p in probes {
        let real = real_path(&p);
        let absent = policy.absent_protected.iter().any(|a| p.starts_with(a));
        let expected = if policy.tmp == TmpMode::Private && real.starts_with("/private/tmp") {
            Access::Hide
        } else if absent && policy.access_at(&p) == Access::Rw {
            Access::Ro
        } else {
            policy.access_at(&p)
        };
        let q = Query::File(real.clone());
        let read = allowed(r, "file-read-data", &q);
        let write = allowed(r, "file-write-data", &q) || allowed(r, "file-write-create", &q);
        let exec = allowed(r, "process-exec", &q);
        let ok = match expected {
            Access::Ro => read && !write,
            Access::Rw => read && write,
            Access::Hide => !read && !write && !exec,
        };
        if !ok {
            return Err(format!(
                "{}: policy says {expected:?}, profile gives read={read} write={write} \
                 exec={exec}",
                p.display()
            ));
        }
        let alias = Query::File(Path::new(DATA_VOLUME).join(real.strip_prefix("/").unwrap()));
        for op in ["file-read-data", "file-write-data", "file-write-create"] {
            if !allowed(r, op, &q) && allowed(r, op, &alias) {
                return Err(format!("{op} {}: allowed through {alias:?}", p.display()));
            }
        }
    }
    Ok(())
}

/// The orderings the design rests on: the broad read allow before every read deny, each write
/// allow before the write denies beneath it, the pins after every write allow.
fn check_order(forms: &[Sx]) -> Result<(), String> {
    let r = rules(forms);
    let paths = |rule: &Rule| -> Vec<PathBuf> {
        rule.filters
            .iter()
            .filter_map(|f| match f {
                Sx::List(items) => match (items.first(), items.get(1)) {
                    (Some(Sx::Atom(k)), Some(Sx::Str(p))) if k == "literal" || k == "subpath" => {
                        Some(PathBuf::from(p))
                    }
                    _ => None,
                },
                _ => None,
            })
            .collect()
    };
    let has = |rule: &Rule, op: &str| rule.ops.iter().any(|o| o == op);
    let broad = r
        .iter()
        .find(|x| x.allow && has(x, "file-read*") && paths(x) == [PathBuf::from("/")])
        .ok_or("no (allow file-read* (subpath \"/\"))")?;
    for x in r.iter().filter(|x| !x.allow && has(x, "file-read*")) {
        if x.index < broad.index {
            return Err(format!("read deny {:?} before the broad allow", paths(x)));
        }
    }
    let write_allows: Vec<&Rule> = r
        .iter()
        .filter(|x| x.allow && has(x, "file-write*"))
        .collect();
    for deny in r.iter().filter(|x| !x.allow && has(x, "file-write*")) {
        for denied in paths(deny) {
            for allow in &write_allows {
                let under = paths(allow).iter().any(|a| denied.starts_with(a));
                if under
                    && allow.index > deny.index
                    && !paths(allow).iter().any(|a| a.starts_with(&denied))
                {
                    return Err(format!("carve-out {denied:?} before its write allow"));
                }
            }
        }
    }
    for pin in r.iter().filter(|x| !x.allow && has(x, "file-write-unlink")) {
        for pinned in paths(pin) {
            let later = write_allows
                .iter()
                .find(|a| a.index > pin.index && paths(a).iter().any(|p| pinned.starts_with(p)));
            if let Some(allow) = later {
                return Err(format!(
                    "write allow {:?} after the pin {pinned:?}",
                    paths(allow)
                ));
            }
        }
    }
    Ok(())
}

/// The Mac's homes as directories, nothing else looked at.
struct MacHomes;

impl crate::policy::homes::HostLook for MacHomes {
    fn kind(&self, p: &Path) -> Option<Kind> {
        (p.starts_with("/Users") || p == Path::new("/var/root")).then_some(Kind::Dir)
    }
    fn links_in(&self, _: &Path) -> Vec<(PathBuf, PathBuf)> {
        Vec::new()
    }
    fn venv_home(&self, _: &Path) -> Option<PathBuf> {
        None
    }
}
