//! Landlock layer: compiles the policy into path-beneath rules and applies them with
//! `landlock_restrict_self`.
//!
//! Landlock is allow-only and additive down a tree: a right granted on a directory holds for
//! everything beneath it. "Readable except ~/.ssh" or "writable except .git/hooks" cannot be one
//! rule, so a directory that holds a narrower rule somewhere beneath it is *split*: it keeps only
//! the rights every rule beneath it also has, and each of its existing entries is granted the full
//! rights separately (recursing into entries that lead to the narrower rule). Entries created later
//! directly in a split directory get the narrow rights only: stricter than the policy, never looser.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::rights::Rights;
use crate::error::JailError;
use crate::policy::{Access, Kind, Policy};

#[derive(Debug, Clone, Serialize)]
pub struct LandlockRule {
    #[serde(with = "crate::byte_path")]
    pub path: PathBuf,
    pub rights: Rights,
    /// The path is at or under a mount the view puts in place of the host's (a fresh /dev,
    /// /proc or /tmp, a hidden directory, an overlay): its inode exists only once the view is
    /// built. Every other rule names an inode the view shows unchanged (its mounts are the
    /// host's, made read-only in place, or a directory bound over itself), so it can be opened
    /// while init still builds the view ([`begin`]). Set by the run plan, which knows the view.
    pub needs_view: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct LandlockPlan {
    pub abi: u32,
    /// Whether filesystem access is handled at all. Not with --allow-userns: a Landlock domain
    /// that handles filesystem access forbids every mount, and a nested sandbox (bubblewrap in
    /// the agent) must mount in its own namespaces; the mount view alone then guards files.
    pub filesystem: bool,
    pub rules: Vec<LandlockRule>,
    /// Refuse signals to processes outside the sandbox (ABI 6).
    pub scope_signals: bool,
    /// Refuse connecting to abstract unix sockets created outside the sandbox (ABI 6).
    pub scope_abstract_unix: bool,
    /// TCP ports the command may connect to (`--net connect=`), or `None` when connecting is not
    /// restricted by Landlock (ABI 4). An empty list refuses every TCP connect.
    pub tcp_connect: Option<Vec<u16>>,
    /// TCP ports the command may bind (`--net bind=`), likewise.
    pub tcp_bind: Option<Vec<u16>>,
    /// Log the command's denials to the kernel's audit (ABI 7) for the run report. Off otherwise:
    /// then not even jail's own denials before its execve go to the host's audit log.
    pub log_denials: bool,
    /// What this layer alone cannot express exactly.
    pub notes: Vec<String>,
}

/// Device nodes a program needs; everything else under /dev stays unreadable (a raw disk is a
/// device node too, and root owns it).
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/console",
];

/// One node of the rule tree before splitting.
#[derive(Debug, Clone, Copy)]
struct Want {
    rights: Rights,
    kind: Kind,
    /// Enforced exactly by the mount layer when it is active (a read-only or hidden carve-out).
    mount_enforced: bool,
}

/// Compiles the policy. `list` returns the names in a directory (it is the only filesystem access,
/// so tests can give a fake tree).
pub fn compile(
    policy: &Policy,
    abi: u32,
    mount_active: bool,
    list: &dyn Fn(&Path) -> Vec<OsString>,
) -> LandlockPlan {
    let mut wants: BTreeMap<PathBuf, Want> = BTreeMap::new();
    for rule in &policy.rules {
        let rights = match rule.access {
            Access::Ro => Rights::READ,
            Access::Rw => Rights::ALL,
            Access::Hide => Rights::NONE,
        };
        wants.insert(
            rule.path.clone(),
            Want {
                rights,
                kind: rule.kind,
                mount_enforced: rule.access != Access::Rw,
            },
        );
    }
    let system = |rights, kind| Want {
        rights,
        kind,
        mount_enforced: false,
    };
    wants.insert("/dev".into(), system(Rights::LIST, Kind::Dir));
    for dev in DEVICES {
        wants.insert(dev.into(), system(Rights::DEV, Kind::File));
    }
    wants.insert(
        "/dev/pts".into(),
        system(Rights::DEV.union(Rights::LIST), Kind::Dir),
    );
    // The policy file of the mount view (JAIL_POLICY), read-only.
    wants.insert("/dev/jail".into(), system(Rights::READ, Kind::Dir));
    // The mount view gives a private /dev/shm; without it /dev/shm is the host's, shared with
    // every process of the same user, and stays closed.
    if mount_active {
        wants.insert("/dev/shm".into(), system(Rights::ALL, Kind::Dir));
    }
    // /proc and /sys are readable, never writable: host root may write sysctls such as
    // core_pattern by file ownership alone, with no capability.
    wants.insert("/proc".into(), system(Rights::READ, Kind::Dir));
    wants.insert("/sys".into(), system(Rights::READ, Kind::Dir));
    wants.insert("/tmp".into(), system(Rights::ALL, Kind::Dir));

    let mut out: BTreeMap<PathBuf, Rights> = BTreeMap::new();
    let mut notes = Vec::new();
    let paths: Vec<PathBuf> = wants.keys().cloned().collect();
    for path in &paths {
        let want = wants[path];
        if want.rights.is_empty() {
            continue; // hidden: granted nothing
        }
        grant(
            path,
            want.rights,
            &wants,
            mount_active,
            list,
            &mut out,
            &mut notes,
        );
    }
    let mask = Rights::for_abi(abi);
    let rules = out
        .into_iter()
        .map(|(path, rights)| LandlockRule {
            path,
            rights: rights.intersect(mask),
            needs_view: true,
        })
        .filter(|r| !r.rights.is_empty())
        .collect();
    notes.sort();
    notes.dedup();
    let filesystem = !policy.allow_userns;
    if !filesystem {
        notes.push(
            "filesystem rules off (--allow-userns: they would forbid the nested sandbox's mounts)"
                .into(),
        );
    }
    LandlockPlan {
        abi,
        filesystem,
        rules: if filesystem { rules } else { Vec::new() },
        scope_signals: abi >= 6,
        scope_abstract_unix: abi >= 6,
        tcp_connect: None,
        tcp_bind: None,
        log_denials: false,
        notes,
    }
}

/// Grants `rights` at `path`, splitting it when a narrower rule lies beneath.
fn grant(
    path: &Path,
    rights: Rights,
    wants: &BTreeMap<PathBuf, Want>,
    mount_active: bool,
    list: &dyn Fn(&Path) -> Vec<OsString>,
    out: &mut BTreeMap<PathBuf, Rights>,
    notes: &mut Vec<String>,
) {
    // The ceiling each rule beneath puts on what may be granted here.
    let mut here = rights;
    let mut split = false;
    for (inner, want) in wants.range::<PathBuf, _>(path.to_path_buf()..) {
        if inner == path {
            continue;
        }
        if !inner.starts_with(path) {
            break;
        }
        let ceiling = match (want.rights.is_empty(), want.kind) {
            // An ancestor of a hidden path may still be listed: without the mount layer the
            // hidden names show (not their contents).
            (true, _) => Rights::LIST,
            (false, Kind::File) => want.rights.union(Rights::LIST),
            (false, Kind::Dir) => want.rights,
        };
        if ceiling.contains(rights) {
            continue; // at least as open beneath: nothing to hold back here
        }
        // A writable tree whose carve-outs the mount layer enforces exactly is left whole:
        // splitting it would forbid creating files in it (git could not write .git/index.lock).
        if mount_active && want.mount_enforced && rights.contains(Rights::WRITE_FILE) {
            continue;
        }
        if !mount_active && want.mount_enforced && rights.contains(Rights::WRITE_FILE) {
            notes.push(format!(
                "carve-outs approximate: new entries directly in {} are not writable",
                inner.parent().unwrap_or(inner).display()
            ));
        }
        here = here.intersect(ceiling);
        split = true;
    }
    let merged = out.get(path).copied().unwrap_or_default().union(here);
    out.insert(path.to_path_buf(), merged);
    if !split {
        return;
    }
    for name in list(path) {
        let child = path.join(&name);
        if wants.contains_key(&child) {
            continue; // its own rule grants it
        }
        let leads_to_rule = wants
            .range::<PathBuf, _>(child.clone()..)
            .take_while(|(p, _)| p.starts_with(&child))
            .next()
            .is_some();
        if leads_to_rule {
            grant(&child, rights, wants, mount_active, list, out, notes);
        } else if !here.contains(rights) {
            out.insert(child, rights);
        }
    }
}

/// The names in a real directory, for [`compile`].
pub fn list_dir(path: &Path) -> Vec<OsString> {
    match std::fs::read_dir(path) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// What applying the plan achieved.
#[derive(Debug, Clone, Serialize)]
pub struct LandlockApplied {
    pub rules: usize,
    pub skipped_missing: usize,
}

/// A ruleset being filled, not yet in force.
pub struct Pending {
    ruleset: landlock::RulesetCreated,
    applied: LandlockApplied,
    /// Rules [`begin`] left for [`finish`] (indices into the plan's rules).
    left: Vec<usize>,
}

/// Creates the ruleset and, with `before_view`, adds every rule that does not need the mount
/// view (see [`LandlockRule::needs_view`]), while init builds it: start-up pays for the opens
/// and rules on the other CPU. Such a rule is opened with RESOLVE_NO_SYMLINKS, so that only
/// the path's own components decide where it lands (a symlink could lead into a place the
/// view replaces); one that meets a symlink is left for [`finish`]. `None`: nothing to apply.
pub fn begin(plan: &LandlockPlan, before_view: bool) -> Result<Option<Pending>, JailError> {
    use landlock::{
        Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, Ruleset,
        RulesetAttr, RulesetCreatedAttr, Scope,
    };
    let abi = abi_of(plan);
    let err = |step: &str, e: &dyn std::fmt::Display| JailError::layer("landlock", step, e);
    let net = plan.tcp_connect.is_some() || plan.tcp_bind.is_some();
    if !(plan.filesystem || plan.scope_signals || plan.scope_abstract_unix || net) {
        return Ok(None);
    }
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    if plan.filesystem {
        ruleset = ruleset
            .handle_access(AccessFs::from_all(abi))
            .map_err(|e| err("handle access", &e))?;
    }
    if net {
        let mut handled = BitFlags::<AccessNet>::empty();
        if plan.tcp_connect.is_some() {
            handled |= AccessNet::ConnectTcp;
        }
        if plan.tcp_bind.is_some() {
            handled |= AccessNet::BindTcp;
        }
        // HardRequirement above: on a kernel before ABI 4 this fails, and the launch with it.
        ruleset = ruleset
            .handle_access(handled)
            .map_err(|e| err("handle TCP access (needs Landlock ABI 4)", &e))?;
    }
    if plan.scope_signals || plan.scope_abstract_unix {
        let mut scopes = BitFlags::<Scope>::empty();
        if plan.scope_signals {
            scopes |= Scope::Signal;
        }
        if plan.scope_abstract_unix {
            scopes |= Scope::AbstractUnixSocket;
        }
        ruleset = ruleset.scope(scopes).map_err(|e| err("scope", &e))?;
    }
    let mut created = ruleset.create().map_err(|e| err("create ruleset", &e))?;
    if plan.abi >= 7 {
        // Denials after the execve are logged only when asked for (LOG_NEW_EXEC_ON).
        created = created
            .log_same_exec(plan.log_denials)
            .and_then(|c| c.log_new_exec(plan.log_denials))
            .map_err(|e| err("audit log flags", &e))?;
    }
    for (ports, access) in [
        (&plan.tcp_connect, AccessNet::ConnectTcp),
        (&plan.tcp_bind, AccessNet::BindTcp),
    ] {
        for &port in ports.iter().flatten() {
            created = created
                .add_rule(NetPort::new(port, access))
                .map_err(|e| err(&format!("TCP port {port}"), &e))?;
        }
    }
    let mut pending = Pending {
        ruleset: created,
        applied: LandlockApplied {
            rules: 0,
            skipped_missing: 0,
        },
        left: Vec::new(),
    };
    for (i, rule) in plan.rules.iter().enumerate() {
        if !before_view || rule.needs_view {
            pending.left.push(i);
            continue;
        }
        match crate::sys::open_path_no_symlinks(&rule.path) {
            Ok(fd) => add_rule(&mut pending, plan, fd, rule.rights, &rule.path)?,
            // A symlink on the way, or a kernel without openat2: opened in the view instead.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOSYS)) => {
                pending.left.push(i)
            }
            Err(e) => skip_or_fail(&mut pending, &rule.path, e)?,
        }
    }
    Ok(Some(pending))
}

/// Adds the rules [`begin`] left and those for `open_fds`, and restricts the calling thread (and
/// its future children) to the ruleset. Runs after the mount view is built (the rules left bind
/// the inodes of the view) and after no_new_privs. `open_fds` are descriptors the command
/// inherits (a terminal, a redirected output file): they get a rule of their own so that
/// reopening them through /dev/stdout keeps working.
pub fn finish(
    plan: &LandlockPlan,
    mut pending: Pending,
    open_fds: &[i32],
) -> Result<LandlockApplied, JailError> {
    use landlock::RulesetStatus;
    let err = |step: &str, e: &dyn std::fmt::Display| JailError::layer("landlock", step, e);
    for i in std::mem::take(&mut pending.left) {
        let rule = &plan.rules[i];
        match crate::sys::open_path(&rule.path) {
            Ok(fd) => add_rule(&mut pending, plan, fd, rule.rights, &rule.path)?,
            Err(e) => skip_or_fail(&mut pending, &rule.path, e)?,
        }
    }
    for &fd in open_fds.iter().filter(|_| plan.filesystem) {
        if let Some((target, rights)) = inherited_fd_rule(fd) {
            // Only a convenience (reopening /dev/stdout): a file Landlock cannot hold a rule for
            // (a memfd copy, a pipe) simply gets none.
            let _ = add_rule(
                &mut pending,
                plan,
                target,
                rights,
                Path::new(&format!("/proc/self/fd/{fd}")),
            );
        }
    }
    let status = pending
        .ruleset
        .restrict_self()
        .map_err(|e| err("restrict_self", &e))?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(err(
            "restrict_self",
            &format!("ruleset only {:?} on this kernel", status.ruleset),
        ));
    }
    Ok(pending.applied)
}

fn abi_of(plan: &LandlockPlan) -> landlock::ABI {
    abi(plan.abi)
}

/// The crate's name for ABI version `n` (7 for anything newer: the rights it knows).
pub(super) fn abi(n: u32) -> landlock::ABI {
    use landlock::ABI;
    match n {
        1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        _ => ABI::V7,
    }
}

/// A missing path (or one this user may not reach) holds nothing to grant: counted, not fatal.
fn skip_or_fail(pending: &mut Pending, path: &Path, e: std::io::Error) -> Result<(), JailError> {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::EACCES) => {
            pending.applied.skipped_missing += 1;
            Ok(())
        }
        _ => Err(JailError::layer(
            "landlock",
            format!("open {}", path.display()),
            e,
        )),
    }
}

/// One path-beneath rule for what `fd` holds; a file gets only the rights a file can have.
fn add_rule(
    pending: &mut Pending,
    plan: &LandlockPlan,
    fd: OwnedFd,
    rights: Rights,
    what: &Path,
) -> Result<(), JailError> {
    use landlock::{AccessFs, BitFlags, PathBeneath, RulesetCreatedAttr};
    let is_dir = crate::sys::fstat_mode(fd.as_raw_fd())
        .map(|m| m & libc::S_IFMT == libc::S_IFDIR)
        .unwrap_or(false);
    let rights = if is_dir {
        rights
    } else {
        rights.intersect(Rights::FILE_ONLY)
    };
    let access = BitFlags::<AccessFs>::from_bits_truncate(rights.0 as u64)
        & <AccessFs as landlock::Access>::from_all(abi_of(plan));
    if access.is_empty() {
        return Ok(());
    }
    pending
        .ruleset
        .as_mut()
        .add_rule(PathBeneath::new(fd, access))
        .map_err(|e| JailError::layer("landlock", format!("rule for {}", what.display()), e))?;
    pending.applied.rules += 1;
    Ok(())
}

/// A rule for the file behind an inherited descriptor: a terminal or device keeps DEV rights; a
/// regular file open for writing keeps read, write and truncate.
fn inherited_fd_rule(fd: i32) -> Option<(OwnedFd, Rights)> {
    let mode = crate::sys::fstat_mode(fd).ok()?;
    // SAFETY: F_GETFL on a descriptor number only reads its flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return None;
    }
    let writable = flags & libc::O_ACCMODE != libc::O_RDONLY;
    let rights = match mode & libc::S_IFMT {
        libc::S_IFCHR => Rights::DEV,
        libc::S_IFREG if writable => {
            Rights(Rights::READ_FILE.0 | Rights::WRITE_FILE.0 | Rights::TRUNCATE.0)
        }
        _ => return None,
    };
    let target = crate::sys::open_path(Path::new(&format!("/proc/self/fd/{fd}"))).ok()?;
    Some((target, rights))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Origin, PathRule, TmpMode};

    fn policy(rules: &[(&str, Access, Kind)]) -> Policy {
        let mut all = vec![PathRule {
            path: "/".into(),
            access: Access::Ro,
            kind: Kind::Dir,
            origin: Origin::Default,
        }];
        all.extend(rules.iter().map(|(p, a, k)| PathRule {
            path: p.into(),
            access: *a,
            kind: *k,
            origin: Origin::Default,
        }));
        all.sort_by(|a, b| a.path.cmp(&b.path));
        Policy {
            rules: all,
            profile: "test".into(),
            cwd: "/".into(),
            tmp: TmpMode::Private,
            allow_userns: false,
            allow_unix_sockets: false,
            command: vec!["true".into()],
            ..Policy::probe_default()
        }
    }

    /// A fake tree: every directory's children, as "path: a b c" lines.
    fn tree(spec: &'static str) -> impl Fn(&Path) -> Vec<OsString> {
        move |dir: &Path| {
            spec.lines()
                .filter_map(|l| l.trim().split_once(':'))
                .find(|(d, _)| Path::new(d.trim()) == dir)
                .map(|(_, kids)| kids.split_whitespace().map(OsString::from).collect())
                .unwrap_or_default()
        }
    }

    const FS: &str = "
        /: bin dev etc home proc run sys tmp usr
        /home: u other
        /home/u: .ssh .bashrc repo notes
        /home/u/repo: .git src README.md
        /home/u/repo/.git: hooks config objects HEAD
        /run: user lock systemd
        /dev: null zero tty pts shm sda
    ";

    /// Effective rights at `path` under the plan: Landlock unions the rules of all ancestors.
    fn effective(plan: &LandlockPlan, path: &str) -> Rights {
        plan.rules
            .iter()
            .filter(|r| Path::new(path).starts_with(&r.path))
            .fold(Rights::NONE, |acc, r| acc.union(r.rights))
    }

    #[test]
    fn hidden_paths_get_nothing_and_their_ancestors_only_listing() {
        let p = policy(&[
            ("/home/u/.ssh", Access::Hide, Kind::Dir),
            ("/run/user", Access::Hide, Kind::Dir),
        ]);
        let plan = compile(&p, 7, true, &tree(FS));
        assert_eq!(effective(&plan, "/home/u/.ssh/id_ed25519"), Rights::LIST);
        assert_eq!(effective(&plan, "/run/user/1000/bus"), Rights::LIST);
        assert_eq!(effective(&plan, "/home/u"), Rights::LIST);
        assert_eq!(effective(&plan, "/home/u/.bashrc"), Rights::READ);
        assert_eq!(effective(&plan, "/home/other/x"), Rights::READ);
        assert_eq!(effective(&plan, "/usr/bin/git"), Rights::READ);
        assert_eq!(effective(&plan, "/run/lock"), Rights::READ);
    }

    #[test]
    fn raw_devices_stay_closed_and_needed_ones_open() {
        let plan = compile(&policy(&[]), 7, true, &tree(FS));
        assert_eq!(effective(&plan, "/dev/sda"), Rights::LIST);
        assert_eq!(
            effective(&plan, "/dev/null"),
            Rights::DEV.union(Rights::LIST)
        );
        assert!(effective(&plan, "/dev/pts/3").contains(Rights::DEV));
        assert_eq!(effective(&plan, "/dev/shm/x"), Rights::ALL);
        assert_eq!(
            effective(&plan, "/proc/sys/kernel/core_pattern"),
            Rights::READ
        );
        assert_eq!(effective(&plan, "/etc/passwd"), Rights::READ);
        assert!(!effective(&plan, "/home/u/repo/src").contains(Rights::WRITE_FILE));
    }

    #[test]
    fn carve_outs_under_rw_are_left_whole_when_the_mount_layer_enforces_them() {
        let p = policy(&[
            ("/home/u/repo", Access::Rw, Kind::Dir),
            ("/home/u/repo/.git/hooks", Access::Ro, Kind::Dir),
            ("/home/u/repo/.git/config", Access::Ro, Kind::File),
        ]);
        let plan = compile(&p, 7, true, &tree(FS));
        assert_eq!(
            effective(&plan, "/home/u/repo/.git/index.lock"),
            Rights::ALL
        );
        assert!(plan.notes.is_empty(), "{:?}", plan.notes);
    }

    #[test]
    fn carve_outs_under_rw_are_split_without_the_mount_layer() {
        let p = policy(&[
            ("/home/u/repo", Access::Rw, Kind::Dir),
            ("/home/u/repo/.git/hooks", Access::Ro, Kind::Dir),
            ("/home/u/repo/.git/config", Access::Ro, Kind::File),
        ]);
        let plan = compile(&p, 7, false, &tree(FS));
        assert_eq!(
            effective(&plan, "/home/u/repo/.git/hooks/pre-commit"),
            Rights::READ
        );
        assert_eq!(effective(&plan, "/home/u/repo/.git/config"), Rights::READ);
        assert_eq!(
            effective(&plan, "/home/u/repo/.git/objects/ab"),
            Rights::ALL
        );
        assert_eq!(effective(&plan, "/home/u/repo/src/main.rs"), Rights::ALL);
        assert_eq!(effective(&plan, "/home/u/repo/README.md"), Rights::ALL);
        // Stricter than the policy, never looser: new entries in a split directory.
        assert_eq!(
            effective(&plan, "/home/u/repo/.git/index.lock"),
            Rights::READ
        );
        assert_eq!(effective(&plan, "/home/u/repo/NEW"), Rights::READ);
        assert!(
            plan.notes
                .iter()
                .any(|n| n.contains("carve-outs approximate"))
        );
    }

    #[test]
    fn hidden_path_inside_rw_is_closed_without_the_mount_layer() {
        let p = policy(&[
            ("/home/u", Access::Rw, Kind::Dir),
            ("/home/u/.ssh", Access::Hide, Kind::Dir),
        ]);
        let plan = compile(&p, 7, false, &tree(FS));
        assert_eq!(effective(&plan, "/home/u/.ssh/id_ed25519"), Rights::LIST);
        assert_eq!(effective(&plan, "/home/u/notes"), Rights::ALL);
    }

    #[test]
    fn jail_state_under_a_writable_home_is_closed_and_cannot_be_walked_away_from() {
        // --rw HOME with jail's store in it, without the mount layer (the copy-based layer: the
        // run's own copy is writable inside the store): the store's names may be listed, nothing
        // in it read or written, and no directory on the way to it moved or added to.
        const HOME: &str = "
            /: home tmp usr
            /home: u
            /home/u: .bashrc .local repo
            /home/u/.local: share state
            /home/u/.local/state: jail other
            /home/u/.local/state/jail: locks runs
            /home/u/.local/state/jail/runs: 0a1b2c3d 4e5f6a7b
            /home/u/.local/state/jail/runs/4e5f6a7b: 0 run.json
            /home/u/.local/state/jail/runs/4e5f6a7b/0: upper
        ";
        let p = policy(&[
            ("/home/u", Access::Rw, Kind::Dir),
            ("/home/u/.local/state/jail", Access::Hide, Kind::Dir),
            (
                "/home/u/.local/state/jail/runs/4e5f6a7b/0/upper",
                Access::Rw,
                Kind::Dir,
            ),
        ]);
        let plan = compile(&p, 7, false, &tree(HOME));
        for closed in [
            "/home/u/.local/state/jail/locks/0123456789abcdef",
            "/home/u/.local/state/jail/runs/0a1b2c3d/0/upper/a.txt",
            "/home/u/.local/state/jail/runs/4e5f6a7b/run.json",
            "/home/u/.local/state/jail/stores",
            "/home/u/.local/state",
            "/home/u/.local",
            "/home/u",
        ] {
            assert_eq!(effective(&plan, closed), Rights::LIST, "{closed}");
        }
        assert_eq!(
            effective(&plan, "/home/u/.local/state/jail/runs/4e5f6a7b/0/upper/f"),
            Rights::ALL
        );
        assert_eq!(
            effective(&plan, "/home/u/.local/state/other/x"),
            Rights::ALL
        );
        assert_eq!(effective(&plan, "/home/u/.local/share/x"), Rights::ALL);
        assert_eq!(effective(&plan, "/home/u/repo/x"), Rights::ALL);
    }

    #[test]
    fn rights_are_masked_to_the_abi_and_scopes_need_abi_6() {
        let plan = compile(
            &policy(&[("/home/u/repo", Access::Rw, Kind::Dir)]),
            2,
            true,
            &tree(FS),
        );
        assert!(
            plan.rules
                .iter()
                .all(|r| Rights::for_abi(2).contains(r.rights))
        );
        assert!(!plan.scope_signals && !plan.scope_abstract_unix);
        let plan = compile(&policy(&[]), 6, true, &tree(FS));
        assert!(plan.scope_signals && plan.scope_abstract_unix);
    }
}
