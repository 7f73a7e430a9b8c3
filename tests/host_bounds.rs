//! What the host shares with a jail and must keep for itself, found by a red-team pass: SysV and
//! POSIX IPC (an IPC namespace, or seccomp without one), other processes' limits at the partial
//! level, setuid modes, per-user kernel pools (inotify, ptys), a memory bound an rlimit cannot
//! hold, cgroups a killed supervisor leaves, and credentials named through relocating variables
//! or in value shapes the first list missed. tests/helpers/host_bounds.c holds the attacks.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::*;

fn attack_helper() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| compile_helper("host_bounds"))
}

fn helper(args: &[&str]) -> Vec<String> {
    let mut v = vec![attack_helper().to_string_lossy().into_owned()];
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

fn outside(who: Who, args: &[&str]) -> Run {
    let mut cmd = as_user(who, attack_helper());
    cmd.args(args).stdin(Stdio::null());
    Run::from(cmd.output().unwrap())
}

fn jail_run(
    fx: &Fixture,
    flags: &[&str],
    cmd: &[String],
    off: &[Layer],
    env: &[(&str, &str)],
) -> Run {
    let mut args: Vec<&str> = flags.to_vec();
    args.push("--");
    args.extend(cmd.iter().map(String::as_str));
    fx.jail_with(&args, off, env)
}

/// Finding 1: no IPC namespace. A jailed process attaches and rewrites the host's SysV shared
/// memory (same uid; root's segments as root), and a segment it makes outlives the run (memory
/// no bound of the next run counts; "nothing outlives the run").
#[test]
fn sysv_ipc_of_the_host_is_unreachable_and_nothing_of_the_jails_outlives_it() {
    if !full_level_or_skip("sysv_ipc") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "hb-sysv");
        let key = format!(
            "{:#x}",
            0x4a00_0000u32 + std::process::id() % 0xffff + uid_of(who)
        );
        let leave = format!(
            "{:#x}",
            0x4b00_0000u32 + std::process::id() % 0xffff + uid_of(who)
        );
        assert!(outside(who, &["shm-create", &key]).ok());
        let out = jail_run(&fx, &[], &helper(&["shm-write", &key]), &[], &[]);
        let read = outside(who, &["shm-read", &key]);
        let left = jail_run(&fx, &[], &helper(&["shm-leave", &leave]), &[], &[]);
        let after = outside(who, &["shm-read", &leave]);
        outside(who, &["shm-remove", &key]);
        outside(who, &["shm-remove", &leave]);
        assert_eq!(
            verdict(&out),
            Verdict::Blocked,
            "{who:?}: host segment reached\n{}",
            out.describe()
        );
        assert!(
            read.stdout.contains("CONTENT host"),
            "{who:?}: {}",
            read.describe()
        );
        assert!(
            left.ok() || verdict(&left) == Verdict::Blocked,
            "{}",
            left.describe()
        );
        assert!(
            !after.ok(),
            "{who:?}: a segment made in the jail outlived it\n{}",
            after.describe()
        );
    }
}

/// Finding 2: without the pid namespace (partial level), prlimit(2) on a host process of the
/// same uid goes through (Landlock scopes signals, not prlimit): RLIMIT_FSIZE=0 kills the host
/// process with SIGXFSZ at its next write; as root, any root process of the host.
#[test]
fn a_partial_jail_cannot_change_a_host_processs_limits() {
    if !full_level_or_skip("prlimit_host") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "hb-prlimit");
        let victim = Outsider::spawn(who);
        let out = jail_run(
            &fx,
            &[],
            &helper(&["prlimit", &victim.pid()]),
            &[Layer::Mount],
            &[],
        );
        let limits = std::fs::read_to_string(format!("/proc/{}/limits", victim.pid())).unwrap();
        let fsize = limits
            .lines()
            .find(|l| l.starts_with("Max file size"))
            .unwrap_or("")
            .to_string();
        assert_eq!(
            verdict(&out),
            Verdict::Blocked,
            "{who:?}: {}\nvictim: {fsize}",
            out.describe()
        );
    }
}

/// Finding 3: `--limit memory=SIZE` without a cgroup is RLIMIT_DATA, which counts private
/// writable mappings only: one process maps and touches 4x the bound through MAP_SHARED
/// anonymous memory or a memfd (and /tmp, /dev/shm, SysV shm are outside it too).
#[test]
fn a_per_process_memory_bound_holds_shared_memory_too() {
    if !full_level_or_skip("rlimit_data_shared") {
        return;
    }
    let fx = Fixture::new(Who::User, "hb-rlimit-data");
    let dry = fx.jail(&["--limit", "memory=64M", "--dry-run", "--", "true"]);
    if !dry.stdout.contains("RLIMIT_DATA") {
        eprintln!("skip: the user has a cgroup here");
        return;
    }
    for kind in ["shared", "memfd"] {
        let out = jail_run(
            &fx,
            &["--limit", "memory=64M"],
            &helper(&[kind, "256"]),
            &[],
            &[],
        );
        let contained = out.code == Some(128 + libc::SIGKILL) || verdict(&out) == Verdict::Blocked;
        assert!(
            contained,
            "{kind}: 256M past memory=64M\n{}",
            out.describe()
        );
    }
}

fn jail_cgroups_of(pid: u32) -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: usize, prefix: &str, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if !p.is_dir() || p.is_symlink() {
                continue;
            }
            if e.file_name().to_string_lossy().starts_with(prefix) {
                out.push(p);
            } else if depth > 0 {
                walk(&p, depth - 1, prefix, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(
        Path::new("/sys/fs/cgroup"),
        4,
        &format!("jail-{pid}-"),
        &mut out,
    );
    out
}

/// Finding 4: a supervisor killed with SIGKILL (OOM killer, `kill -9`, a CI runner's timeout)
/// leaves its empty cgroups behind (Drop never runs); every such run leaks two directories.
#[test]
fn a_killed_supervisor_leaves_no_cgroup_behind() {
    if !full_level_or_skip("cgroup_left") || !is_root() {
        return;
    }
    let mut child = Command::new(jail_bin())
        .args(["--", "sleep", "30"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    while jail_cgroups_of(pid).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!jail_cgroups_of(pid).is_empty(), "the run made no cgroup");
    child.kill().unwrap();
    child.wait().unwrap();
    // The next run removes them once the dead run's tree is gone (its init dies with the
    // supervisor, but on a loaded machine not at once): a condition, never a fixed wait.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let _ = Command::new(jail_bin()).args(["--", "true"]).output();
        let left = jail_cgroups_of(pid);
        if left.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            for d in &left {
                let _ = std::fs::remove_dir(d);
            }
            panic!("left behind: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Finding 5: variables that relocate a credential store, or name a key in a shape the lists
/// miss, leave the file readable (it lies outside HOME, so --home hidden does not help either).
#[test]
fn credential_files_named_by_relocating_variables_are_hidden() {
    if !full_level_or_skip("credfiles_relocated") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "hb-credfiles");
        let s = fx.scratch.clone();
        let files = [
            ("CARGO_HOME", "cargo", "cargo/credentials.toml"),
            ("XDG_CONFIG_HOME", "xdg", "xdg/gh/hosts.yml"),
            ("KUBE_CONFIG_PATH", "kubeconfig", "kubeconfig"),
            ("NOMAD_CLIENT_KEY", "nomad.key", "nomad.key"),
            ("RSYNC_RSH", "rsync.key", "rsync.key"),
        ];
        let mut env: Vec<(String, String)> = Vec::new();
        for (var, named, file) in files {
            let p = s.join(file);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, format!("SECRET-{var}\n")).unwrap();
            let v = s.join(named).to_string_lossy().into_owned();
            env.push((
                var.into(),
                if var == "RSYNC_RSH" {
                    format!("ssh -i {v}")
                } else {
                    v
                },
            ));
        }
        fx.give_to(who);
        let script = files
            .iter()
            .map(|(_, _, f)| format!("cat {} 2>/dev/null;", s.join(f).display()))
            .collect::<String>();
        let env_ref: Vec<(&str, &str)> =
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        for profile in ["default", "claude-code"] {
            let out = jail_run(
                &fx,
                &["--profile", profile],
                &["sh".into(), "-c".into(), script.clone()],
                &[],
                &env_ref,
            );
            let read: Vec<&str> = out
                .stdout
                .lines()
                .filter(|l| l.starts_with("SECRET-"))
                .collect();
            assert!(
                read.is_empty(),
                "{who:?} {profile}: read {read:?}\n{}",
                out.describe()
            );
        }
    }
}

/// Finding 6: secret values whose shapes the value check misses (Azure connection strings and
/// SAS tokens, docker `auths`, a JSON `token`, webhook URLs, base64 wrapped PEM, a base64 blob
/// longer than 8 KiB, a kubeconfig with an inline key), and ordinary values it removes.
#[test]
fn secret_values_of_common_shapes_are_removed_and_ordinary_urls_stay() {
    if !full_level_or_skip("secret_values") {
        return;
    }
    let fx = Fixture::new(Who::Root.min_user(), "hb-secrets");
    let pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n";
    let wrapped = {
        use std::io::Write;
        let mut c = Command::new("base64")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(pem.as_bytes()).unwrap();
        String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap()
    };
    // A base64 blob longer than 8 KiB is judged on its first 8 KiB.
    let long_blob: String = (0..9000u32)
        .map(|i| {
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                [(i.wrapping_mul(2654435761) >> 9) as usize % 64] as char
        })
        .collect();
    let secrets: Vec<(&str, String)> = vec![
        ("RT_AZ_STORAGE", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4MTIzNA==;EndpointSuffix=core.windows.net".into()),
        ("RT_AZ_BUS", "Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=Q2xhdWRlIGlzIGEgZ29vZCBib3QxMjM0NTY3OA==".into()),
        ("RT_AZ_SAS", "sv=2022-11-02&ss=b&srt=sco&sp=rwdlac&se=2026-01-01T00:00:00Z&sig=AbCdEf1234567890%2BGhIjKlMnOpQrStUvWxYz%3D".into()),
        ("RT_DOCKER_AUTHS", r#"{"auths":{"registry.example.com":{"auth":"dXNlcjpTM2NyM3RQYXNzd29yZDEyMw=="}}}"#.into()),
        ("RT_JSON_TOKEN", r#"{"token":"mF_9.B5f-4.1JqM2xZ8pQ7rT3uV6wY0aK"}"#.into()),
        ("RT_SLACK_HOOK", "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX".into()),
        ("RT_WRAPPED_PEM", wrapped),
        ("RT_LONG_BLOB", long_blob),
        ("RT_KUBECONFIG", "apiVersion: v1\nusers:\n- name: u\n  user:\n    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVBN\n".into()),
        ("RT_BASIC", "Basic dXNlcjpTM2NyM3RQYXNzd29yZDEyMw==".into()),
    ];
    let ordinary: Vec<(&str, String)> =
        vec![("RT_REPO_SSH", "ssh://git@github.com/owner/repo.git".into())];
    let mut env: Vec<(&str, &str)> = Vec::new();
    for (k, v) in secrets.iter().chain(ordinary.iter()) {
        env.push((k, v.as_str()));
    }
    let out = jail_run(&fx, &[], &["env".into()], &[], &env);
    let names: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    let kept: Vec<&str> = secrets
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| names.contains(k))
        .collect();
    let removed: Vec<&str> = ordinary
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| !names.contains(k))
        .collect();
    assert!(
        kept.is_empty() && removed.is_empty(),
        "secrets kept: {kept:?}; ordinary removed: {removed:?}"
    );
}

trait MinUser {
    fn min_user(self) -> Who;
}
impl MinUser for Who {
    /// The unprivileged user when the tests run as root, else the current one.
    fn min_user(self) -> Who {
        Who::User
    }
}

/// Finding 7: at the partial level (no mount view) the owner of a read-only file changes its
/// mode: as root that is any root-owned host file, setuid bits included (a setuid-root shell
/// left on the host after the run). The gap text says "chmod", not that.
#[test]
fn a_partial_jail_cannot_make_a_read_only_file_setuid() {
    if !full_level_or_skip("partial_setuid") || !is_root() {
        return;
    }
    let fx = Fixture::new(Who::Root, "hb-setuid");
    let target = fx.repo.join("tool");
    std::fs::copy("/bin/true", &target).unwrap();
    let t = target.to_string_lossy().into_owned();
    let out = jail_run(
        &fx,
        &["--ro", &fx.repo.to_string_lossy()],
        &["chmod".into(), "4755".into(), t.clone()],
        &[Layer::Mount],
        &[],
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&target).unwrap().permissions().mode();
    assert_eq!(
        mode & 0o6000,
        0,
        "setuid set from inside: {:o}\n{}",
        mode,
        out.describe()
    );
}

/// Finding 8: per-user kernel pools are shared with the host. inotify instances (and watches)
/// are counted per user up the user-namespace chain against the host's sysctl (128 instances,
/// ~190k watches here), with no lower maximum in the jail's namespace: a jail takes them all and
/// the same user's editors and file watchers on the host fail while it runs. Run as the
/// unprivileged user only, so that no root process of the host is disturbed.
#[test]
fn a_jail_cannot_take_all_of_the_users_inotify_instances() {
    if !full_level_or_skip("inotify_pool") || !is_root() {
        return;
    }
    let fx = Fixture::new(Who::User, "hb-inotify");
    let hold = "import ctypes,time\nlibc=ctypes.CDLL(None)\nn=0\nwhile n<100000 and libc.inotify_init1(0)>=0: n+=1\nprint('held',n,flush=True)\ntime.sleep(3)\n";
    let mut cmd = fx.command(jail_bin(), &["--", "python3", "-c", hold]);
    cmd.stdout(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let probe = "import ctypes,os\nlibc=ctypes.CDLL(None,use_errno=True)\nfd=libc.inotify_init1(0)\nprint('host fd',fd,os.strerror(ctypes.get_errno()) if fd<0 else '')\n";
    let host = Run::from(
        as_user(Who::User, Path::new("/usr/bin/env"))
            .args(["python3", "-c", probe])
            .output()
            .unwrap(),
    );
    let _ = child.wait();
    assert!(
        !host.stdout.contains("host fd -1"),
        "jail {line}; host: {}",
        host.describe()
    );
}

/// Finding 9: the jail's devpts has no max=: a jail can allocate every pty of the kernel's pool
/// for non-initial devpts instances (pty/max - pty/reserve, 3072 by default), shared by every
/// container and every other jail on the host.
#[test]
fn the_jails_devpts_is_bounded() {
    if !full_level_or_skip("devpts_max") {
        return;
    }
    let fx = Fixture::new(Who::User, "hb-devpts");
    let out = fx.jail(&[
        "--",
        "sh",
        "-c",
        "grep ' /dev/pts ' /proc/self/mountinfo | tail -1",
    ]);
    assert!(out.stdout.contains("max="), "{}", out.describe());
}

/// Setuid and setgid modes are refused in every jail, however they are asked for (chmod, fchmod,
/// the mode given at creation), also in a writable tree where nothing else stops them: a file
/// made so there is a setuid program on the host. Shown for root and the unprivileged user,
/// refused by seccomp alone, and allowed with it off.
#[test]
fn setuid_modes_are_refused_in_a_writable_tree() {
    if !full_level_or_skip("setuid_in_rw") {
        return;
    }
    let script = "import os,sys,stat\n\
        p=sys.argv[2]\n\
        try:\n\
        \x20   if sys.argv[1]=='chmod':\n\
        \x20       open(p,'w').close(); os.chmod(p, 0o4755)\n\
        \x20   elif sys.argv[1]=='fchmod':\n\
        \x20       fd=os.open(p, os.O_CREAT|os.O_WRONLY, 0o755); os.fchmod(fd, 0o2755); os.close(fd)\n\
        \x20   else:\n\
        \x20       os.close(os.open(p, os.O_CREAT|os.O_WRONLY, 0o4755))\n\
        except OSError as e:\n\
        \x20   print('BLOCKED', sys.argv[1], e); sys.exit(1)\n\
        m=os.stat(p).st_mode\n\
        if m & 0o6000: print('ALLOWED', sys.argv[1], oct(m)); sys.exit(0)\n\
        print('BLOCKED', sys.argv[1], 'mode', oct(m)); sys.exit(1)\n";
    for who in users() {
        let fx = Fixture::new(who, "hb-setuid-rw");
        let scratch = fx.scratch.to_string_lossy().into_owned();
        for how in ["chmod", "fchmod", "create"] {
            let path = fx.scratch.join(format!("tool-{how}"));
            let _ = std::fs::remove_file(&path);
            Attack::new(
                &format!("setuid by {how} in a writable tree"),
                &["--rw", &scratch],
                vec![
                    "python3".into(),
                    "-c".into(),
                    script.into(),
                    how.into(),
                    path.to_string_lossy().into_owned(),
                ],
                &[Layer::Seccomp],
            )
            .prove(&fx);
            let _ = std::fs::remove_file(&path);
        }
    }
}
