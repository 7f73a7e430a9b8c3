//! What `jail status` asks the kernel: where the policy file came from, and whether each claim
//! of it holds for this process, checked by its effect where that is cheap.
//!
//! What each fact proves, against a process outside any jail that forges the rest:
//! - The fixed file is on a tmpfs whose mount is read-only, owned by us, with no write bit, in
//!   user, mount and pid namespaces other than the initial ones. Anyone who can create user
//!   namespaces (`unshare -rmpf`) can build exactly that, so these facts only make the file
//!   jail's *if* the process is also confined as the file says: they are necessary, not enough.
//! - So every claim is also checked by its effect: no_new_privs and empty capability sets (read
//!   from /proc/self/status); syscalls jail's filter always refuses answer with its errno, not
//!   the kernel's own (an allow-all filter passes "Seccomp: 2" but not this); Landlock's signal
//!   scope refuses kill(1, 0) where pid 1 is ours by uid; a path the policy calls read-only is on
//!   a read-only mount (the mount view) or refuses a write the file permissions would allow
//!   (Landlock); a hidden path is empty or unreadable.
//! - A forger who reproduces every effect has built the confinement it claims, for this
//!   process. Without the mount view the policy arrives as a sealed memfd, which anyone can
//!   make, and Landlock's rules cannot be read back: that evidence is advisory (exit 2).
//!
//! This module only gathers: it gets the claims ([`crate::claims::Claims`]) and returns one
//! [`Check`] per fact; the verdict and its output are `jail status`'s ([`crate::status`]).
//! The namespaces, network and homes checks are in `isolation`.

use std::path::{Path, PathBuf};

use crate::claims::{Check, Claims, Finding};
use crate::policy_file::POLICY_FILE;
use crate::sys::is_sealed_memfd;

mod isolation;

pub use isolation::{NamespaceFacts, UserNamespaces, judge_homes, namespaces, network};
use isolation::{homes, namespace_facts};

/// nsfs inode numbers of the initial namespaces (include/uapi/linux/nsfs.h). The initial mount
/// namespace has a fixed number since Linux 6.16 (0xEFFFFFF8); before, its number is dynamic
/// and the mount check can only compare against that constant (the user and pid checks hold on
/// every kernel, and jail creates the three together).
const INITIAL_NAMESPACES: &[(&str, u64)] = &[
    ("user", 0xEFFF_FFFD),
    ("pid", 0xEFFF_FFFC),
    ("mnt", 0xEFFF_FFF8),
];

/// Syscalls jail's filter refuses in every jail, each called so that it does nothing (a NULL
/// pointer, pid 0), with the errno the filter answers and the kernel's own answer without it.
pub const SECCOMP_PROBES: &[(&str, i32)] = &[
    // clone3 with size 0: EINVAL from the kernel; jail's filter answers ENOSYS.
    ("clone3", libc::ENOSYS),
    // ptrace of pid 0: ESRCH from the kernel.
    ("ptrace", libc::EPERM),
    // perf_event_open with a NULL attr: EFAULT from the kernel.
    ("perf_event_open", libc::EPERM),
    // keyctl(KEYCTL_GET_KEYRING_ID) of an invalid special id: EINVAL from the kernel.
    ("keyctl", libc::EPERM),
];

fn errno_of(rc: libc::c_long) -> i32 {
    if rc < 0 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    } else {
        0
    }
}

/// Calls one probe; returns the errno (0 for success).
fn call_probe(name: &str) -> i32 {
    // SAFETY: each call passes arguments that make the kernel fail before doing anything
    // (size 0, pid 0, NULL attr, an invalid keyring id); no memory is written.
    let rc = unsafe {
        match name {
            "clone3" => libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 0usize),
            "ptrace" => libc::syscall(libc::SYS_ptrace, libc::PTRACE_PEEKDATA, 0, 0, 0),
            "perf_event_open" => libc::syscall(
                libc::SYS_perf_event_open,
                std::ptr::null::<u8>(),
                0,
                -1,
                -1,
                0,
            ),
            "keyctl" => libc::syscall(libc::SYS_keyctl, 0, -100, 0),
            _ => unreachable!("a probe without a call"),
        }
    };
    errno_of(rc)
}

fn status_field(name: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    field(&text, name)
}

fn field(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|l| {
        l.strip_prefix(name)?
            .strip_prefix(':')
            .map(|v| v.trim().to_string())
    })
}

/// Verified when the kernel's answer matches the claim, failed when it does not.
fn verified_if(holds: bool) -> Finding {
    if holds {
        Finding::Verified
    } else {
        Finding::Failed
    }
}

fn errno_name(e: i32) -> String {
    if e == 0 {
        "succeeded".into()
    } else {
        std::io::Error::from_raw_os_error(e).to_string()
    }
}

/// Every check, in order: the policy's source, then each claim by its effect.
pub fn gather(path: &str, claims: Option<&Claims>) -> Vec<Check> {
    let Some(claims) = claims else {
        return vec![Check::new(
            "policy file",
            Finding::Failed,
            "read JAIL_POLICY, or /dev/jail/policy.json",
            if path.is_empty() {
                "JAIL_POLICY is not set".to_string()
            } else {
                format!("{path}: not a readable policy file")
            },
        )];
    };
    let mut checks = vec![source(path, claims.mount), process_image()];
    checks.push(namespaces(claims, &namespace_facts(claims)));
    checks.push(no_new_privs());
    checks.push(capabilities(claims.mount));
    checks.push(seccomp(claims.seccomp));
    let (landlock_check, read_only_check) = read_only(claims);
    if claims.landlock {
        checks.push(landlock_check);
    } else if crate::sys::landlock_abi() > 0 {
        // jail uses Landlock wherever the kernel has it: a policy without it here is not
        // jail's own account of this process (or a test switched it off).
        checks.push(Check::new(
            "landlock",
            Finding::Advisory,
            "landlock_create_ruleset(LANDLOCK_CREATE_RULESET_VERSION)",
            format!(
                "the policy claims no Landlock, but this kernel has ABI {}",
                crate::sys::landlock_abi()
            ),
        ));
    }
    checks.push(read_only_check);
    if claims.mount {
        checks.push(writable_mounts(claims));
    }
    if !claims.hidden.is_empty() {
        checks.push(hidden(claims));
    }
    if claims.own_network {
        checks.push(network(&super::view::interface_names()));
    }
    if claims.homes_hidden {
        checks.push(homes(claims));
    }
    checks
}

/// The policy's source: jail's own file on its read-only /dev (the mount view, which the policy
/// claims when `mount`), or a sealed memfd (advisory: anyone can make one).
fn source(path: &str, mount: bool) -> Check {
    const NAME: &str = "policy file";
    if path == POLICY_FILE {
        let how = "fstat, fstatfs and fstatvfs of the open file; /proc/self/ns inode numbers";
        return match fixed_file_facts() {
            Err(why) => Check::new(NAME, Finding::Failed, how, why),
            Ok(_) if !mount => Check::new(
                NAME,
                Finding::Failed,
                how,
                "jail's file at the fixed place claims no mount view",
            ),
            Ok(facts) => Check::new(NAME, Finding::Verified, how, facts),
        };
    }
    let how = "readlink and F_GET_SEALS of JAIL_POLICY";
    if mount {
        return Check::new(
            NAME,
            Finding::Failed,
            how,
            format!("{path} claims the mount view but is not jail's file at {POLICY_FILE}"),
        );
    }
    if is_sealed_memfd(path) {
        Check::new(
            NAME,
            Finding::Advisory,
            how,
            "a sealed memfd (no mount view): any process can make one, so the policy is \
             believed only as far as the checks below confirm it",
        )
    } else {
        Check::new(
            NAME,
            Finding::Failed,
            how,
            format!("{path} is not jail's sealed memfd"),
        )
    }
}

/// The facts about the fixed file and the namespaces, or the first that does not hold.
fn fixed_file_facts() -> Result<String, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(POLICY_FILE)
        .map_err(|e| format!("open {POLICY_FILE}: {e}"))?;
    let st = nix::sys::stat::fstat(&f).map_err(|e| format!("fstat: {e}"))?;
    let fs = nix::sys::statfs::fstatfs(&f).map_err(|e| format!("fstatfs: {e}"))?;
    let vfs = nix::sys::statvfs::fstatvfs(&f).map_err(|e| format!("fstatvfs: {e}"))?;
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(format!("{POLICY_FILE} is not a regular file"));
    }
    if fs.filesystem_type() != nix::sys::statfs::TMPFS_MAGIC {
        return Err(format!("{POLICY_FILE} is not on a tmpfs"));
    }
    if !vfs.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY) {
        return Err(format!("{POLICY_FILE} is on a writable mount"));
    }
    if st.st_uid != euid || st.st_mode & 0o7222 != 0 {
        return Err(format!(
            "{POLICY_FILE} is owned by uid {} mode {:o} (jail's: ours, no write bit)",
            st.st_uid,
            st.st_mode & 0o7777
        ));
    }
    let namespaces = super::view::Namespaces::of_self();
    for (ns, initial) in INITIAL_NAMESPACES {
        let ino = namespaces
            .inode(ns)
            .map_err(|e| format!("the {ns} namespace: {e}"))?;
        if ino == *initial {
            return Err(format!(
                "this process is in the initial {ns} namespace (jail makes a new one)"
            ));
        }
    }
    Ok(format!(
        "{POLICY_FILE}: a tmpfs, mounted read-only, owned by uid {euid}, mode {:o}; user, mount \
         and pid namespaces not the initial ones",
        st.st_mode & 0o7777
    ))
}

/// Every check runs in this process, through libc: a library the dynamic loader was told to
/// load first (LD_PRELOAD, LD_AUDIT, as the caller sets them) could answer for the kernel. It
/// can also remove the variable, so its absence proves nothing either; a statically linked
/// jail has no loader to tell.
fn process_image() -> Check {
    let how = "LD_PRELOAD and LD_AUDIT in the environment status started with";
    let set: Vec<&str> = ["LD_PRELOAD", "LD_AUDIT"]
        .into_iter()
        .filter(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()))
        .collect();
    if set.is_empty() {
        Check::new(
            "process image",
            Finding::Verified,
            how,
            "no library preloaded by variable",
        )
    } else {
        Check::new(
            "process image",
            Finding::Advisory,
            how,
            format!(
                "{} set: a preloaded library could answer these checks in this process",
                set.join(" and ")
            ),
        )
    }
}

/// Asked of the kernel by syscall, not read from /proc: a /proc of the caller's making (a
/// tmpfs over it, files bound over /proc/self/status) would say anything.
fn no_new_privs() -> Check {
    // SAFETY: PR_GET_NO_NEW_PRIVS only reads the calling thread's flag.
    let nnp = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) };
    Check::new(
        "no_new_privs",
        verified_if(nnp == 1),
        "prctl(PR_GET_NO_NEW_PRIVS)",
        format!("no_new_privs: {nnp}"),
    )
}

/// Every capability set empty; the bounding set too with the mount view (jail holds
/// CAP_SETPCAP in its user namespace there; an unprivileged caller without one cannot shrink
/// it, and no_new_privs keeps execve from using it).
fn capabilities(mount: bool) -> Check {
    use caps::CapSet;
    let mut sets = vec![
        ("inheritable", CapSet::Inheritable),
        ("permitted", CapSet::Permitted),
        ("effective", CapSet::Effective),
        ("ambient", CapSet::Ambient),
    ];
    if mount {
        sets.push(("bounding", CapSet::Bounding));
    }
    // capget for the first three, prctl (PR_CAP_AMBIENT_IS_SET, PR_CAPBSET_READ) for the rest.
    let held: Vec<String> = sets
        .iter()
        .filter_map(|(name, set)| match caps::read(None, *set) {
            Ok(c) if c.is_empty() => None,
            Ok(c) => Some(format!("{name}: {} held", c.len())),
            Err(e) => Some(format!("{name}: {e}")),
        })
        .collect();
    let names: Vec<&str> = sets.iter().map(|(n, _)| *n).collect();
    Check::new(
        "capabilities",
        verified_if(held.is_empty()),
        format!("capget and prctl for the {} sets", names.join(", ")),
        if held.is_empty() {
            "all empty".to_string()
        } else {
            held.join(", ")
        },
    )
}

/// A filter is loaded, and it is jail's: the syscalls it always refuses answer with its errno.
fn seccomp(claimed: bool) -> Check {
    const NAME: &str = "seccomp filter";
    let how = format!(
        "prctl(PR_GET_SECCOMP), Seccomp_filters in /proc/self/status; {} called harmlessly",
        SECCOMP_PROBES
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    );
    // SAFETY: PR_GET_SECCOMP only reads the calling thread's mode (2: filters).
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) }.to_string();
    let filters = status_field("Seccomp_filters").unwrap_or_default();
    // A policy may claim no seccomp only where the kernel has none (else it is forged).
    if !claimed && !crate::sys::seccomp_filters_supported() {
        return Check::new(
            NAME,
            Finding::Advisory,
            how,
            "this kernel has no seccomp filters",
        );
    }
    if mode != "2" {
        return Check::new(
            NAME,
            Finding::Failed,
            how,
            format!("Seccomp: {mode} (no filter)"),
        );
    }
    let wrong: Vec<String> = SECCOMP_PROBES
        .iter()
        .filter_map(|(name, want)| {
            let got = call_probe(name);
            (got != *want).then(|| {
                format!(
                    "{name}: {} (jail's filter: {})",
                    errno_name(got),
                    errno_name(*want)
                )
            })
        })
        .collect();
    if wrong.is_empty() {
        Check::new(
            NAME,
            Finding::Verified,
            how,
            format!("Seccomp: 2, {filters} filter(s); every probe refused as jail refuses it"),
        )
    } else {
        Check::new(
            NAME,
            Finding::Failed,
            how,
            format!("a filter that is not jail's: {}", wrong.join("; ")),
        )
    }
}

/// How a write at a path the policy calls read-only went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    /// The mount is read-only (EROFS).
    ReadOnlyMount,
    /// The file permissions refuse it anyway: this path shows nothing.
    Permissions,
    /// The permissions and the mount allow it, and it was refused (Landlock).
    Refused,
    /// It could be made.
    Allowed,
    /// Absent, or a filesystem without O_TMPFILE: nothing learned.
    Unknown,
}

/// Tries a write at `path` that leaves no trace: access(W_OK) asks the mount and the file
/// permissions, not Landlock; then O_TMPFILE (an unnamed file, gone at close) in a directory,
/// or an open for appending of a file, asks Landlock too.
fn try_write(path: &Path) -> Write {
    use nix::unistd::{AccessFlags, faccessat};
    let is_dir = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => return Write::Unknown,
        Ok(m) => m.is_dir(),
        Err(_) => return Write::Unknown,
    };
    match faccessat(
        nix::fcntl::AT_FDCWD,
        path,
        AccessFlags::W_OK,
        nix::fcntl::AtFlags::AT_EACCESS,
    ) {
        Err(nix::errno::Errno::EROFS) => return Write::ReadOnlyMount,
        Err(nix::errno::Errno::EACCES | nix::errno::Errno::EPERM) => return Write::Permissions,
        Err(_) => return Write::Unknown,
        Ok(()) => {}
    }
    let opened = if is_dir {
        nix::fcntl::open(
            path,
            nix::fcntl::OFlag::O_TMPFILE
                | nix::fcntl::OFlag::O_WRONLY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
    } else {
        nix::fcntl::open(
            path,
            nix::fcntl::OFlag::O_WRONLY
                | nix::fcntl::OFlag::O_APPEND
                | nix::fcntl::OFlag::O_NOFOLLOW
                | nix::fcntl::OFlag::O_NONBLOCK
                | nix::fcntl::OFlag::O_NOCTTY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
    };
    match opened {
        Ok(_fd) => Write::Allowed,
        Err(nix::errno::Errno::EACCES) => Write::Refused,
        Err(nix::errno::Errno::EROFS) => Write::ReadOnlyMount,
        Err(_) => Write::Unknown,
    }
}

/// Whether `path` is on a read-only mount.
fn on_read_only_mount(path: &Path) -> Option<bool> {
    let vfs = nix::sys::statvfs::statvfs(path).ok()?;
    Some(vfs.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
}

/// Landlock's signal scope: kill(1, 0) is refused when pid 1 is outside our domain (jail's
/// init in the pid namespace, or the host's init) and the file permissions would allow the
/// signal (pid 1 has our uid).
fn signal_scope() -> Option<bool> {
    if crate::sys::landlock_abi() < 6 {
        return None;
    }
    let init = std::fs::read_to_string("/proc/1/status").ok()?;
    let uid: u32 = field(&init, "Uid")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    // SAFETY: geteuid and getpid cannot fail.
    if uid != unsafe { libc::geteuid() } || unsafe { libc::getpid() } == 1 {
        return None;
    }
    // SAFETY: signal 0 sends nothing; it only checks permission.
    let rc = unsafe { libc::kill(1, 0) };
    Some(rc < 0 && errno_of(rc as libc::c_long) == libc::EPERM)
}

/// The read-only claims (with the mount view, every read-only path on a read-only mount) and
/// Landlock's (a write the permissions would allow, refused; the signal scope).
fn read_only(claims: &Claims) -> (Check, Check) {
    let mut failed = Vec::new();
    let mut by_mount = 0;
    let mut refused = Vec::new();
    for path in &claims.read_only {
        if claims.mount && on_read_only_mount(path) == Some(false) {
            failed.push(format!("{} is on a writable mount", path.display()));
            continue;
        }
        match try_write(path) {
            Write::Allowed => failed.push(format!("{} could be written", path.display())),
            Write::ReadOnlyMount => by_mount += 1,
            Write::Refused => refused.push(path.clone()),
            Write::Permissions | Write::Unknown => {}
        }
    }
    let ro_how = "statvfs (ST_RDONLY) of each path the policy calls read-only; access(W_OK), \
                  then O_TMPFILE in a directory or O_APPEND on a file (no trace)";
    let ro = if !failed.is_empty() {
        Check::new(
            "read-only paths",
            Finding::Failed,
            ro_how,
            failed.join("; "),
        )
    } else if claims.mount && by_mount > 0 {
        Check::new(
            "read-only paths",
            Finding::Verified,
            ro_how,
            format!("{} paths on read-only mounts", claims.read_only.len()),
        )
    } else if !refused.is_empty() {
        Check::new(
            "read-only paths",
            Finding::Verified,
            ro_how,
            format!("writes refused at {}", show(&refused)),
        )
    } else {
        Check::new(
            "read-only paths",
            Finding::Advisory,
            ro_how,
            "the file permissions refuse every write probed, so no refusal shows the jail",
        )
    };
    (landlock(claims, &refused), ro)
}

/// With the mount view, the only writable mounts are jail's own (/tmp, /dev/shm, /dev/pts,
/// /proc, whose sensitive parts are read-only mounts beneath) and the policy's writable paths:
/// any other would be a place the policy calls read-only. Read from /proc/self/mountinfo once
/// fstatfs shows it is procfs (not a file of the caller's making).
fn writable_mounts(claims: &Claims) -> Check {
    const NAME: &str = "writable mounts";
    let how = "/proc/self/mountinfo (fstatfs: procfs), every mount without ro";
    const OWN: &[&str] = &["/tmp", "/dev/shm", "/dev/pts", "/proc"];
    let text = match std::fs::File::open("/proc/self/mountinfo").and_then(|mut f| {
        let fs = nix::sys::statfs::fstatfs(&f).map_err(std::io::Error::from)?;
        if fs.filesystem_type() != nix::sys::statfs::PROC_SUPER_MAGIC {
            return Err(std::io::Error::other(
                "/proc/self/mountinfo is not on procfs",
            ));
        }
        let mut s = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut s)?;
        Ok(s)
    }) {
        Ok(t) => t,
        Err(e) => return Check::new(NAME, Finding::Failed, how, e.to_string()),
    };
    let unexpected: Vec<String> = crate::linux::mountinfo::mounts(&text)
        .into_iter()
        .filter_map(|m| {
            let point = m.point;
            let expected = OWN.iter().any(|o| point == Path::new(o))
                || claims.writable.iter().any(|w| point.starts_with(w));
            (m.writable && !expected).then(|| crate::text::path_text(&point))
        })
        .collect();
    if unexpected.is_empty() {
        Check::new(
            NAME,
            Finding::Verified,
            how,
            "only jail's own and the policy's writable paths",
        )
    } else {
        Check::new(
            NAME,
            Finding::Failed,
            how,
            format!("writable but not in the policy: {}", unexpected.join(", ")),
        )
    }
}

/// Our own /proc/self/comm: the file permissions let us write it and /proc is a writable mount
/// even in the view, but jail's Landlock rules grant no write beneath `/` but the writable
/// paths: an open for writing (nothing written) shows Landlock on every ABI.
const OWN_PROC_FILE: &str = "/proc/self/comm";

/// Landlock's claim: its signal scope (ABI 6), its refusal of our own /proc file, or of a write
/// at a read-only path that the permissions and the mount would allow.
fn landlock(claims: &Claims, refused: &[PathBuf]) -> Check {
    const NAME: &str = "landlock";
    let how = "kill(1, 0) where pid 1 has our uid (signal scope, ABI 6); an open for writing \
               of /proc/self/comm; a write the permissions allow at a read-only path";
    let mut seen = Vec::new();
    let mut failed = Vec::new();
    match signal_scope() {
        Some(true) => seen.push("kill(1, 0) refused".to_string()),
        Some(false) => failed.push("kill(1, 0) allowed: no Landlock signal scope"),
        None => {}
    }
    // --allow-userns turns the filesystem rules off (a nested sandbox must mount).
    if claims.landlock_filesystem {
        match try_write(Path::new(OWN_PROC_FILE)) {
            Write::Refused => seen.push(format!("{OWN_PROC_FILE} not writable")),
            Write::Allowed => failed.push("/proc/self/comm opens for writing: no Landlock rules"),
            _ => {}
        }
        if !refused.is_empty() {
            seen.push(format!("writes refused at {}", show(refused)));
        }
    }
    if !failed.is_empty() {
        Check::new(NAME, Finding::Failed, how, failed.join("; "))
    } else if !seen.is_empty() {
        Check::new(NAME, Finding::Verified, how, seen.join("; "))
    } else {
        Check::new(
            NAME,
            Finding::Advisory,
            how,
            "no probe could tell a Landlock refusal from the file permissions' or the mount's",
        )
    }
}

fn show(paths: &[PathBuf]) -> String {
    let mut list: Vec<String> = paths
        .iter()
        .take(3)
        .map(|p| p.display().to_string())
        .collect();
    if paths.len() > 3 {
        list.push("…".into());
    }
    list.join(", ")
}

/// Whether `p` shows anything of its own: with the mount view a directory lists a name that is
/// not `allowed`; without it (Landlock alone lets the names be listed, a named gap) a file in
/// it that is not `allowed` opens; a file gives its first byte.
fn shows_content(p: &Path, mount: bool, allowed: &dyn Fn(&Path) -> bool) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return false; // absent or unreachable: nothing to read
    };
    if meta.is_dir() {
        match std::fs::read_dir(p) {
            Err(_) => false,
            // The view covers it with an empty tmpfs.
            Ok(mut d) if mount => d.any(|e| e.is_ok_and(|e| !allowed(&e.path()))),
            Ok(d) => d
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()) && !allowed(&e.path()))
                .take(8)
                .any(|e| std::fs::File::open(e.path()).is_ok()),
        }
    } else if meta.is_file() {
        use std::io::Read;
        std::fs::File::open(p)
            .map(|mut f| f.read(&mut [0u8; 1]).unwrap_or(0) > 0)
            .unwrap_or(false)
    } else {
        false
    }
}

/// Each hidden path is empty or unreadable, but for what a rule shows inside it.
fn hidden(claims: &Claims) -> Check {
    let shown = |p: &Path| claims.revealed.iter().any(|r| r.starts_with(p));
    let seen: Vec<PathBuf> = claims
        .hidden
        .iter()
        .filter(|p| shows_content(p, claims.mount, &shown))
        .cloned()
        .collect();
    let paths = &claims.hidden;
    Check::new(
        "hidden paths",
        verified_if(seen.is_empty()),
        "read each hidden path: with the mount view a directory must list nothing, without it \
         the files in it must not open; a file's first byte",
        if seen.is_empty() {
            format!("{} paths empty or unreadable", paths.len())
        } else {
            format!("readable: {}", show(&seen))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::isolation::jails_namespaces;
    use super::*;
    use crate::linux::layers::seccomp::{self, When};
    use crate::policy::Policy;

    #[test]
    fn every_seccomp_probe_is_a_syscall_jails_filter_always_refuses_with_that_errno() {
        for allow_userns in [false, true] {
            let policy = Policy {
                allow_userns,
                allow_unix_sockets: true,
                ..Policy::probe_default()
            };
            let plan = seccomp::compile(&policy, Default::default(), false);
            for (name, errno) in SECCOMP_PROBES {
                let denied = plan
                    .deny
                    .iter()
                    .any(|d| d.syscall == *name && d.when == When::Always);
                let enosys = plan.enosys.contains(name);
                assert!(
                    (*errno == libc::EPERM && denied) || (*errno == libc::ENOSYS && enosys),
                    "{name}: the filter does not refuse it with {errno}"
                );
            }
        }
    }

    fn claims(allow_userns: bool) -> Claims {
        let policy = Policy {
            allow_userns,
            ..Policy::probe_default()
        };
        let layers = crate::enforcement::Layers {
            mount: true,
            landlock: true,
            seccomp: true,
            seatbelt: false,
        };
        let file = crate::policy_file::PolicyFile::new(&policy, &layers, vec![]);
        Claims::of(&file, None)
    }

    fn facts(userns: UserNamespaces, above: &[&'static str]) -> NamespaceFacts {
        NamespaceFacts {
            userns,
            above: above.to_vec(),
            ours: vec!["mnt", "pid", "ipc"]
                .into_iter()
                .filter(|k| !above.contains(k))
                .collect(),
            unknown: vec![],
        }
    }

    #[test]
    fn a_view_the_process_could_have_made_is_advisory_under_allow_userns_and_contradicts_otherwise()
    {
        let refused = || UserNamespaces::of(Ok(Err(libc::EPERM)));
        // A plain jail: no user namespace can be made, jail's namespaces are ours.
        let c = namespaces(&claims(false), &facts(refused(), &[]));
        assert_eq!(c.finding, Finding::Verified, "{}", c.detail);
        assert!(c.detail.contains("mnt, pid, ipc namespaces belong"));
        // --allow-userns: the process could build any view, so the checks read from paths
        // are advisory; a policy that refuses user namespaces is contradicted by it.
        let c = namespaces(&claims(true), &facts(UserNamespaces::Creatable, &[]));
        assert_eq!(c.finding, Finding::Advisory);
        assert!(c.detail.contains("can create user namespaces"));
        let c = namespaces(&claims(false), &facts(UserNamespaces::Creatable, &[]));
        assert_eq!(c.finding, Finding::Failed);
        assert!(
            c.detail
                .contains("the policy says user namespaces are refused")
        );
        // A user namespace below jail's (a filter of its own then refusing new ones).
        let c = namespaces(&claims(true), &facts(refused(), &["pid", "ipc"]));
        assert_eq!(c.finding, Finding::Advisory);
        assert!(
            c.detail.contains("jail did not make: its pid, ipc"),
            "{}",
            c.detail
        );
        let c = namespaces(&claims(false), &facts(refused(), &["mnt"]));
        assert_eq!(c.finding, Finding::Failed);
        // Nothing could be asked: advisory.
        let mut f = facts(refused(), &[]);
        f.unknown.push("pid: Bad file descriptor".into());
        assert_eq!(namespaces(&claims(false), &f).finding, Finding::Advisory);
    }

    #[test]
    fn a_userns_probe_another_process_could_have_spoiled_proves_nothing() {
        // Killed (a leftover of an earlier exec can signal it), or the count of user
        // namespaces filled: never "cannot create", whatever the policy.
        let killed = UserNamespaces::of(Err(std::io::Error::other("the probe child did not exit")));
        let full = UserNamespaces::of(Ok(Err(libc::ENOSPC)));
        for userns in [killed, full] {
            for allow in [false, true] {
                let c = namespaces(&claims(allow), &facts(userns.clone(), &[]));
                assert_eq!(c.finding, Finding::Advisory, "{userns:?}: {}", c.detail);
            }
        }
        let nested = UserNamespaces::of(Ok(Err(libc::EUSERS)));
        let c = namespaces(&claims(false), &facts(nested, &[]));
        assert_eq!(c.finding, Finding::Verified, "{}", c.detail);
    }

    #[test]
    fn no_network_is_loopback_alone() {
        let names = |n: &[&str]| Ok(n.iter().map(|s| s.to_string()).collect());
        assert_eq!(network(&names(&["lo"])).finding, Finding::Verified);
        let c = network(&names(&["lo", "eth0"]));
        assert_eq!(c.finding, Finding::Failed);
        assert!(c.detail.contains("beyond loopback: eth0"));
        let err = Err(std::io::Error::from_raw_os_error(libc::EPERM));
        assert_eq!(network(&err).finding, Finding::Advisory);
    }

    #[test]
    fn a_home_that_shows_anything_contradicts_hidden_homes() {
        let homes = [PathBuf::from("/root"), PathBuf::from("/home")];
        assert_eq!(judge_homes(&homes, &[]).finding, Finding::Verified);
        let c = judge_homes(&homes, &homes[..1]);
        assert_eq!(c.finding, Finding::Failed);
        assert!(c.detail.contains("readable: /root"));
    }

    #[test]
    fn jail_makes_its_own_network_namespace_only_for_none_and_the_proxy() {
        let mut c = claims(false);
        assert_eq!(jails_namespaces(&c), ["mnt", "pid", "ipc"]);
        c.own_network = true;
        assert_eq!(jails_namespaces(&c), ["mnt", "pid", "ipc", "net"]);
        c.mount = false;
        assert!(jails_namespaces(&c).is_empty());
    }

    #[test]
    fn outside_any_filter_the_probes_get_the_kernels_own_answers() {
        // The test process runs under no filter (cargo's): none of the answers may be the
        // filter's, or the probe could not tell a forgery from jail.
        if status_field("Seccomp").as_deref() != Some("0") {
            return;
        }
        for (name, errno) in SECCOMP_PROBES {
            assert_ne!(call_probe(name), *errno, "{name}");
        }
    }
}
