//! Mount view layer: inside a new user + mount + pid namespace, the whole tree is made read-only
//! in one `mount_setattr(AT_RECURSIVE)`, then /dev, /proc and /tmp are rebuilt and each path rule
//! is bound over itself read-only or writable, or hidden.
//!
//! Kernel facts behind it:
//! - Mount flags are per mount and the namespace holds copies, so making them read-only changes
//!   nothing outside. Copied into a less privileged namespace they are *locked*: a nested user
//!   namespace cannot lift them again.
//! - A read-only bind returns EROFS for writes *and* for chmod/chown/utimes/xattrs, which Landlock
//!   on ABI 7 does not guard.
//! - A read-only mount does not stop `connect()` on a unix socket: sockets are hidden instead.
//! - Rules are placed through O_PATH|O_NOFOLLOW descriptors, so a symlink planted at a protected
//!   path is never followed; and only what the policy names is bound (no tree walks: no hangs on
//!   NFS or autofs) and nothing is created in the user's tree.
//!
//! This file compiles the plan (pure) and runs it step by step (`apply`); the mounts of each
//! step are in `steps`.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};
use serde::Serialize;

use crate::error::JailError;
use crate::policy::{Access, Kind, Origin, PathRule, Policy, TmpMode, depth};
use crate::sys;

mod steps;

use steps::*;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "op", content = "path")]
pub enum Step {
    /// Stop mount events propagating either way: back to the host, and in from it (a mount the
    /// host makes later, an automount or a USB stick, would appear writable inside).
    MakeRootPrivate,
    /// Every mount read-only and nosuid.
    ReadOnlyTree,
    /// A minimal /dev: null, zero, full, random, urandom, tty, a new devpts, a private /dev/shm.
    MinimalDev,
    /// A fresh /proc for the pid namespace, with /proc/sys and friends read-only.
    FreshProc,
    /// A private tmpfs on /tmp.
    PrivateTmp,
    BindReadOnly(#[serde(with = "crate::byte_path")] PathBuf),
    BindWritable(#[serde(with = "crate::byte_path")] PathBuf),
    /// A copy-on-write root: an overlay whose lower layer is the path itself and whose upper
    /// layer is the run's layer directory outside ([`MountPlan::layers`]).
    Overlay(#[serde(with = "crate::byte_path")] PathBuf),
    /// A throwaway root (a package cache): an overlay whose upper layer is on a tmpfs of the
    /// jail's own that is attached nowhere, so nothing written there outlives the namespace.
    Throwaway(#[serde(with = "crate::byte_path")] PathBuf),
    /// A directory between a writable root and a carve-out beneath it, bound over itself (still
    /// writable) only so that it is a mount point: a mount point cannot be renamed or removed, so
    /// `mv .git .git2 && mkdir .git` cannot walk away from a read-only `.git/hooks`.
    Pin(#[serde(with = "crate::byte_path")] PathBuf),
    HideDir(#[serde(with = "crate::byte_path")] PathBuf),
    /// jail's own state (a store of copy-on-write layers) hidden like [`Step::HideDir`]; one
    /// removed since the plan was made (nothing left to hide) is skipped, not a failed run.
    HideState(#[serde(with = "crate::byte_path")] PathBuf),
    /// A hidden directory that shows only the named paths beneath it (each bound in from the real
    /// tree, then given its own rule by a later step).
    HideDirExcept(
        #[serde(with = "crate::byte_path")] PathBuf,
        #[serde(with = "crate::byte_path::vec")] Vec<PathBuf>,
    ),
    HideFile(#[serde(with = "crate::byte_path")] PathBuf),
    /// A host socket named with `--allow-socket` shown at its own path inside the private /tmp
    /// (held open before /tmp is covered, bound onto a file made for it).
    ShowSocket(#[serde(with = "crate::byte_path")] PathBuf),
    /// A host tree beneath /tmp that a rule or the working directory names (a project in
    /// /tmp), shown at its own path inside the private /tmp: held open before /tmp is covered,
    /// bound with its submounts onto a directory (or file) made for it. Read-only as the rest
    /// of the tree is until its own rule's step, which follows.
    ShowInTmp(#[serde(with = "crate::byte_path")] PathBuf),
    /// A writable path inside a plainly writable tree (`--rw . --rw .git/config`): writable with
    /// the tree already, so nothing is mounted, unless it is a mount of its own (another
    /// filesystem, left read-only by the tree's step, which makes only its top mount writable);
    /// then it is made writable like [`Step::BindWritable`]. Never bound otherwise: a bind
    /// would make it a mount point, and the kernel refuses to rename onto one (EBUSY), which is
    /// how git writes its config (config.lock, then a rename).
    WritableInside(#[serde(with = "crate::byte_path")] PathBuf),
    /// Remove jail's helper file from /dev and make /dev read-only.
    SealDev,
    /// The trust bundle with the run's CA (`--secret`, [`TRUST_BUNDLE`]) bound read-only over a
    /// system CA bundle, where one is: what TLS clients that read the system's trust store find.
    TrustBundle(PathBuf),
}

#[derive(Debug, Clone, Serialize)]
pub struct MountPlan {
    pub steps: Vec<Step>,
    #[serde(with = "crate::byte_path")]
    pub cwd: PathBuf,
    /// The sizes of the private /tmp and /dev/shm (the limits layer's choice).
    pub tmpfs: TmpfsSizes,
    /// Each copy-on-write root's layer directory (holding `upper` and `work`), made by the
    /// launch for this run.
    #[serde(serialize_with = "serialize_layers")]
    pub layers: Vec<(PathBuf, PathBuf)>,
    /// The run CA and what it is added to, when the proxy adds secrets.
    pub trust: Option<Trust>,
}

/// What the command trusts when the proxy terminates TLS for its secrets' hosts: the run CA
/// added to the certificates it trusted before, never in place of them (a client that set its
/// own bundle keeps it).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Trust {
    /// The run CA's certificate (PEM).
    #[serde(skip)]
    pub ca_pem: String,
    /// The bundle the command named itself (its `SSL_CERT_FILE`), if any: the start of
    /// [`TRUST_BUNDLE`] instead of the system's.
    pub bundle: Option<PathBuf>,
    /// The extra certificates the command gave Node (its `NODE_EXTRA_CA_CERTS`), if any: the
    /// start of [`TRUST_CA`]. Node adds that file to its built-in roots and reads no other.
    pub node_extra: Option<PathBuf>,
}

fn serialize_layers<S: serde::Serializer>(
    layers: &[(PathBuf, PathBuf)],
    s: S,
) -> Result<S::Ok, S::Error> {
    use crate::byte_path::Ref;
    s.collect_seq(layers.iter().map(|(a, b)| (Ref(a), Ref(b))))
}

impl Step {
    /// The path beneath which this step puts other inodes than the host's: a new filesystem
    /// (tmpfs, proc, devpts, overlay) or a file bound over another. `None` for the steps that
    /// change only mount flags in place or bind a directory over itself: the same inodes show.
    /// Every variant is named, so a new step must say which it is.
    pub fn replaces(&self) -> Option<&Path> {
        match self {
            Step::MakeRootPrivate
            | Step::ReadOnlyTree
            | Step::BindReadOnly(_)
            | Step::BindWritable(_)
            | Step::Pin(_)
            | Step::WritableInside(_)
            | Step::ShowInTmp(_) => None,
            Step::MinimalDev | Step::SealDev => Some(Path::new("/dev")),
            Step::FreshProc => Some(Path::new("/proc")),
            Step::PrivateTmp => Some(Path::new("/tmp")),
            Step::Overlay(p)
            | Step::Throwaway(p)
            | Step::HideDir(p)
            | Step::HideState(p)
            | Step::HideDirExcept(p, _)
            | Step::HideFile(p)
            | Step::ShowSocket(p)
            | Step::TrustBundle(p) => Some(p),
        }
    }
}

impl MountPlan {
    /// Whether `path` is at or under a place the view fills with inodes of its own, so that
    /// what it names exists only once the view is built.
    pub fn replaces_inode_at(&self, path: &Path) -> bool {
        self.steps
            .iter()
            .filter_map(Step::replaces)
            .any(|r| path.starts_with(r))
    }
}

/// Extra tmpfs options (`size=…,nr_inodes=…`) for the writable tmpfs mounts; None leaves the
/// kernel's default (half of RAM). The others are fixed: a hidden directory's tmpfs holds one
/// inode in 4k (or 64k when it shows paths beneath, read-only after), jail's /dev 64k, sealed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TmpfsSizes {
    pub tmp: Option<String>,
    pub shm: Option<String>,
    /// Each copy-on-write root's upper layer, on a tmpfs of this size (None: in the state
    /// directory, on disk).
    pub layer: Option<String>,
}

fn tmpfs_options(base: &str, extra: &Option<String>) -> String {
    match extra {
        Some(x) => format!("{base},{x}"),
        None => base.to_string(),
    }
}

/// Device nodes bound from the host into the minimal /dev.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];
/// Proc entries that must never be writable (host root may write sysctls by file ownership).
const PROC_READ_ONLY: &[&str] = &["sys", "sysrq-trigger", "irq", "bus", "fs"];
/// Proc entries masked with an empty file.
const PROC_MASKED: &[&str] = &["kcore", "keys", "timer_list"];
/// A file on jail's own /dev tmpfs that hidden files are bound from; removed when sealing.
const EMPTY_FILE: &str = "/dev/.jail-empty";
pub use crate::policy_file::POLICY_FILE;
/// The run CA's certificate alone, for the clients that add to their own roots
/// (`NODE_EXTRA_CA_CERTS`).
pub const TRUST_CA: &str = "/dev/jail/ca.pem";
/// The system's CA bundle with the run CA's certificate after it (`SSL_CERT_FILE` and the
/// like), bound over the system bundles.
pub const TRUST_BUNDLE: &str = "/dev/jail/ca-bundle.pem";
/// Where distributions keep their CA bundle (Debian and Ubuntu, Fedora and RHEL, openSUSE,
/// Alpine and others): each that exists gets the trust bundle over it; the first one's content
/// is the bundle's start.
pub const SYSTEM_CA_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];
/// What /dev holds besides the policy file: a few empty files, symlinks and directories.
const DEV_BASE_BYTES: usize = 64 * 1024;

/// The size of jail's /dev tmpfs: its base plus the policy file, in whole pages. The file grows
/// with the policy (hundreds of protected paths in a monorepo), so a fixed size would refuse
/// some runs with ENOSPC; once written, /dev is sealed read-only, so the room cannot be used for
/// anything else.
fn dev_size(policy_bytes: usize) -> usize {
    DEV_BASE_BYTES + policy_bytes.div_ceil(4096) * 4096
}

pub fn compile(policy: &Policy) -> MountPlan {
    let mut steps = vec![
        Step::MakeRootPrivate,
        Step::ReadOnlyTree,
        Step::MinimalDev,
        Step::FreshProc,
    ];
    if policy.tmp == TmpMode::Private {
        steps.push(Step::PrivateTmp);
        steps.extend(shown_in_tmp(policy).into_iter().map(Step::ShowInTmp));
    }
    let mut placed: Vec<(PathBuf, Step)> = Vec::new();
    let mut pinned = std::collections::BTreeSet::new();
    let by_path = ByPath::of(policy);
    for rule in policy.rules.iter().filter(|r| r.path != Path::new("/")) {
        if not_there_to_hide(policy, &by_path, rule) {
            continue;
        }
        // A writable path inside a plainly writable tree (a protected name named exactly with
        // --rw): see Step::WritableInside.
        let plain_rw = |p: &Path| {
            !policy.cow.iter().any(|c| p.starts_with(c))
                && !policy.caches.iter().any(|c| p.starts_with(c))
        };
        // Not where a carve-out lies beneath: the directories between a writable root and a
        // carve-out must be mount points (pinned), or `mv a a2 && mkdir a` walks away from it.
        let narrower_beneath = by_path.beneath(&rule.path).any(|o| o.access != Access::Rw);
        if rule.access == Access::Rw
            && plain_rw(&rule.path)
            && !narrower_beneath
            && by_path
                .enclosing(&rule.path)
                .is_some_and(|o| o.access == Access::Rw && o.path != Path::new("/"))
        {
            placed.push((rule.path.clone(), Step::WritableInside(rule.path.clone())));
            continue;
        }
        placed.push((
            rule.path.clone(),
            match (rule.access, rule.kind) {
                (Access::Ro, _) => Step::BindReadOnly(rule.path.clone()),
                (Access::Rw, _) if policy.cow.contains(&rule.path) => {
                    Step::Overlay(rule.path.clone())
                }
                (Access::Rw, _) if policy.caches.contains(&rule.path) => {
                    Step::Throwaway(rule.path.clone())
                }
                (Access::Rw, _) => Step::BindWritable(rule.path.clone()),
                (Access::Hide, Kind::Dir) => hidden_dir_step(policy, rule),
                (Access::Hide, Kind::File) => Step::HideFile(rule.path.clone()),
            },
        ));
        pin_between(&by_path, rule, &mut pinned, &mut placed);
    }
    // Parents first, so that a more specific rule is placed on top of a less specific one.
    placed.sort_by(|a, b| (depth(&a.0), &a.0).cmp(&(depth(&b.0), &b.0)));
    steps.extend(placed.into_iter().map(|(_, step)| step));
    if policy.tmp == TmpMode::Private {
        let shown = shown_in_tmp(policy);
        steps.extend(
            policy
                .allow_sockets
                .iter()
                .filter(|s| s.starts_with("/tmp"))
                // One in a shown tree is there already.
                .filter(|s| !shown.iter().any(|t| s.starts_with(t)))
                .map(|s| Step::ShowSocket(s.clone())),
        );
    }
    steps.push(Step::SealDev);
    MountPlan {
        steps,
        cwd: policy.cwd.clone(),
        tmpfs: TmpfsSizes::default(),
        layers: Vec::new(),
        trust: None,
    }
}

/// The rule needs no mount: a hidden path inside a hidden one, or one in the private /tmp that
/// no shown tree holds.
fn not_there_to_hide(policy: &Policy, by_path: &ByPath, rule: &PathRule) -> bool {
    // A hidden path inside a hidden one is hidden already (`~/.ssh` under `--home hidden`):
    // covering it would need a mount point that is not there.
    if rule.access == Access::Hide
        && by_path
            .enclosing(&rule.path)
            .is_some_and(|o| o.access == Access::Hide)
    {
        return true;
    }
    // A hidden path in the private /tmp that no shown tree holds is not there to hide (the
    // rule is for Landlock, where /tmp is the host's without the view).
    if rule.access == Access::Hide
        && policy.tmp == TmpMode::Private
        && rule.path.starts_with("/tmp")
        && !shown_in_tmp(policy)
            .iter()
            .any(|t| rule.path.starts_with(t))
    {
        return true;
    }
    false
}

/// How a hidden directory is hidden: whole (the store's own step for jail's state), or with
/// what lies beneath it shown.
fn hidden_dir_step(policy: &Policy, rule: &PathRule) -> Step {
    // The outermost shown paths only: what lies beneath one comes in with it
    // (and gets its own rule by a later step).
    let shown = |o: &PathRule| {
        o.path != rule.path && o.path.starts_with(&rule.path) && o.access != Access::Hide
    };
    let reveal: Vec<PathBuf> = policy
        .rules
        .iter()
        .filter(|o| shown(o))
        .filter(|o| {
            !policy.rules.iter().any(|between| {
                shown(between) && between.path != o.path && o.path.starts_with(&between.path)
            })
        })
        .map(|o| o.path.clone())
        .chain(
            policy
                .allow_sockets
                .iter()
                .filter(|s| s.starts_with(&rule.path))
                .cloned(),
        )
        .collect();
    if reveal.is_empty() && rule.origin == Origin::JailState {
        Step::HideState(rule.path.clone())
    } else if reveal.is_empty() {
        Step::HideDir(rule.path.clone())
    } else {
        Step::HideDirExcept(rule.path.clone(), reveal)
    }
}

/// A carve-out (read-only or hidden) inside a writable tree: every directory between them is
/// pinned (placed once, unless a rule of its own places it).
fn pin_between(
    by_path: &ByPath,
    rule: &PathRule,
    pinned: &mut std::collections::BTreeSet<PathBuf>,
    placed: &mut Vec<(PathBuf, Step)>,
) {
    // A carve-out inside a writable tree: pin every directory in between.
    let enclosing = by_path.enclosing(&rule.path);
    if let Some(root) = enclosing.filter(|o| o.access == Access::Rw && rule.access != Access::Rw) {
        for dir in rule.path.ancestors().skip(1) {
            if dir == root.path {
                break;
            }
            if pinned.insert(dir.to_path_buf()) && by_path.at(dir).is_none() {
                placed.push((dir.to_path_buf(), Step::Pin(dir.to_path_buf())));
            }
        }
    }
}

/// The outermost host paths beneath /tmp that the private /tmp must show: every rule there
/// that is not a hiding one (the working directory has one, see the policy), outermost first.
fn shown_in_tmp(policy: &Policy) -> Vec<PathBuf> {
    let under: Vec<&PathBuf> = policy
        .rules
        .iter()
        .filter(|r| {
            r.access != Access::Hide && r.path.starts_with("/tmp") && r.path != Path::new("/tmp")
        })
        .map(|r| &r.path)
        .collect();
    let mut out: Vec<PathBuf> = under
        .iter()
        .filter(|p| !under.iter().any(|o| o != *p && p.starts_with(o)))
        .map(|p| (*p).clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The policy's rules by path, for what compile asks of each rule (the nearest rule above it,
/// the rules beneath it) in O(depth) and O(log n) rather than a pass over all rules each time: a
/// profile has a few hundred, and the passes were a fifth of a start's instructions.
struct ByPath<'a>(std::collections::BTreeMap<&'a Path, &'a PathRule>);

impl<'a> ByPath<'a> {
    /// The last rule of a path wins, as the passes it replaces took the last of equals.
    fn of(policy: &'a Policy) -> ByPath<'a> {
        ByPath(policy.rules.iter().map(|r| (r.path.as_path(), r)).collect())
    }

    fn at(&self, path: &Path) -> Option<&'a PathRule> {
        self.0.get(path).copied()
    }

    /// The most specific rule above `path` (not at it): its nearest ancestor with a rule.
    fn enclosing(&self, path: &Path) -> Option<&'a PathRule> {
        path.ancestors().skip(1).find_map(|a| self.at(a))
    }

    /// The rules strictly beneath `path`. Paths order component by component, so a path's
    /// descendants follow it at once, before any sibling (`/a/b/c` < `/a/bc`).
    fn beneath<'s>(&'s self, path: &'s Path) -> impl Iterator<Item = &'a PathRule> + 's {
        use std::ops::Bound::{Excluded, Unbounded};
        self.0
            .range::<Path, _>((Excluded(path), Unbounded))
            .take_while(move |(p, _)| p.starts_with(path))
            .map(|(_, r)| *r)
    }
}

fn fail(step: &str, path: &Path, e: impl std::fmt::Display) -> JailError {
    JailError::layer("mount", format!("{step} {}", path.display()), e)
}

/// Applies the plan. Runs as pid 1 of the new pid namespace, with full capabilities in the new
/// user namespace and before any confinement of its own. Returns the tmpfs mounts that hold the
/// copy-on-write roots' upper layers, in the plan's order, when they are on tmpfs
/// ([`TmpfsSizes::layer`]): the supervisor copies them to the state directory at the end.
pub fn apply(plan: &MountPlan, policy_json: &str) -> Result<Vec<OwnedFd>, MountError> {
    // The trust bundle is made from the host's own, read before anything covers it.
    let trust = plan
        .trust
        .as_ref()
        .map(trust_files)
        .transpose()
        .map_err(MountError::Failed)?;
    let dev_bytes =
        dev_size(policy_json.len() + trust.as_ref().map_or(0, |(c, b)| c.len() + b.len()));
    // Sockets and trees to show in the private /tmp, held before it covers them.
    let mut held = Vec::new();
    for step in &plan.steps {
        if let Step::ShowSocket(p) = step {
            let fd =
                sys::open_path_nofollow(p).map_err(|e| MountError::Failed(fail("open", p, e)))?;
            held.push((p, fd));
        }
        // A tree shown in the private /tmp: no symlink anywhere on the way (the policy named it
        // by its real path). The host's /tmp is shared, so a component there could be swapped
        // for a symlink between resolution and this open, and what is bound here is what every
        // later step (its rule, Landlock) then works on.
        if let Step::ShowInTmp(p) = step {
            let fd = sys::open_path_no_symlinks(p)
                .map_err(|e| MountError::Failed(fail("open", p, e)))?;
            held.push((p, fd));
        }
    }
    // The layers, as detached writable copies of their mounts taken before the tree is made
    // read-only (and before the store is hidden): the overlay writes through them alone.
    let mut layers = Vec::new();
    for (root, dir) in &plan.layers {
        let fd = match &plan.tmpfs.layer {
            Some(size) => layer_tmpfs(root, size),
            None => layer_mount(dir),
        };
        layers.push((root, fd.map_err(MountError::Failed)?));
    }
    for (i, step) in plan.steps.iter().enumerate() {
        if let Step::Overlay(p) = step {
            let (_, fd) = layers
                .iter()
                .find(|(r, _)| *r == p)
                .ok_or_else(|| MountError::Failed(fail("overlay", p, "no layer for this root")))?;
            overlay(p, fd).map_err(MountError::Failed)?;
            continue;
        }
        if *step == Step::SealDev {
            write_policy_file(policy_json).map_err(MountError::Failed)?;
            if let Some((ca, bundle)) = &trust {
                write_dev_file(TRUST_CA, ca).map_err(MountError::Failed)?;
                write_dev_file(TRUST_BUNDLE, bundle).map_err(MountError::Failed)?;
            }
        }
        if let Step::TrustBundle(p) = step {
            if trust.is_none() {
                return Err(MountError::Failed(fail(
                    "trust bundle",
                    p,
                    "no CA for this run",
                )));
            }
            bind_trust_bundle(p).map_err(MountError::Failed)?;
            continue;
        }
        if let Step::ShowSocket(p) = step {
            let (_, fd) = held.iter().find(|(h, _)| *h == p).expect("held above");
            show_at(p, fd, false).map_err(MountError::Failed)?;
            continue;
        }
        if let Step::ShowInTmp(p) = step {
            let (_, fd) = held.iter().find(|(h, _)| *h == p).expect("held above");
            let is_dir = nix::sys::stat::fstat(std::os::fd::AsFd::as_fd(fd))
                .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
            show_at(p, fd, is_dir).map_err(MountError::Failed)?;
            continue;
        }
        apply_step(step, dev_bytes, &plan.tmpfs).map_err(|e| {
            // The very first mount refused: this process may not mount at all (it is already in
            // a Landlock domain, or an LSM forbids it). A fresh /proc refused: the /proc we were
            // given has parts covered (an outer jail's read-only /proc/sys), and the kernel lets
            // no nested namespace mount a proc that would reveal them. Either way the view
            // cannot be built here; the launch goes on without it, or stops if it is required.
            let refused = matches!(&e, JailError::Layer { reason, .. } if reason.contains("EPERM"));
            if i == 0 || (*step == Step::FreshProc && refused) {
                MountError::Unusable(e)
            } else {
                MountError::Failed(e)
            }
        })?;
    }
    // The cwd inherited from before still points into the old, writable mounts: enter the view.
    std::env::set_current_dir(&plan.cwd)
        .map_err(|e| MountError::Failed(fail("chdir", &plan.cwd, e)))?;
    Ok(match plan.tmpfs.layer {
        Some(_) => layers.into_iter().map(|(_, fd)| fd).collect(),
        None => Vec::new(),
    })
}

/// Why the view was not built.
#[derive(Debug)]
pub enum MountError {
    /// Mounting is not permitted at all in this process: run without the mount layer.
    Unusable(JailError),
    /// A step failed part-way: the launch stops (fail closed).
    Failed(JailError),
}

/// `dev_bytes`: the size of the /dev tmpfs ([`dev_size`]); `sizes`: /tmp's and /dev/shm's.
fn apply_step(step: &Step, dev_bytes: usize, sizes: &TmpfsSizes) -> Result<(), JailError> {
    let none: Option<&str> = None;
    match step {
        Step::MakeRootPrivate => {
            mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
                .map_err(|e| fail("make-rprivate", Path::new("/"), e))
        }
        Step::ReadOnlyTree => {
            let root =
                sys::open_path(Path::new("/")).map_err(|e| fail("open", Path::new("/"), e))?;
            sys::mount_setattr(
                root.as_raw_fd(),
                true,
                sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID,
                0,
            )
            .map_err(|e| fail("mount_setattr read-only", Path::new("/"), e))
        }
        Step::MinimalDev => minimal_dev(dev_bytes, &sizes.shm),
        Step::FreshProc => fresh_proc(),
        Step::PrivateTmp => mount(
            Some("tmpfs"),
            "/tmp",
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(tmpfs_options("mode=1777", &sizes.tmp).as_str()),
        )
        .map_err(|e| fail("tmpfs", Path::new("/tmp"), e)),
        Step::BindReadOnly(p) => bind_self(p, true),
        Step::BindWritable(p) | Step::Pin(p) => bind_self(p, false),
        Step::WritableInside(p) => match is_mount_point(p) {
            Ok(true) => bind_self(p, false),
            Ok(false) => Ok(()),
            Err(e) => Err(fail("open", p, e)),
        },
        Step::HideDir(p) => {
            let target = sys::open_path_nofollow(p).map_err(|e| fail("open", p, e))?;
            hide_dir(p, &target)
        }
        // Another run's store may be removed between the open and the mount (its run ended):
        // the mount through the descriptor of a removed directory fails with ENOENT.
        Step::HideState(p) => match sys::open_path_nofollow(p) {
            Ok(target) => match cover_with_empty_tmpfs(&target) {
                Err(nix::errno::Errno::ENOENT) => Ok(()),
                done => done.map_err(|e| fail("hide", p, e)),
            },
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            Err(e) => Err(fail("open", p, e)),
        },
        Step::HideDirExcept(p, reveal) => hide_dir_except(p, reveal),
        Step::HideFile(p) => hide_file(p),
        Step::ShowSocket(_) | Step::ShowInTmp(_) => {
            unreachable!("applied with its held descriptor")
        }
        Step::TrustBundle(_) => unreachable!("applied with the bundle"),
        Step::Overlay(_) => unreachable!("applied with its layer"),
        Step::Throwaway(p) => {
            let layer =
                sys::detached_tmpfs(sizes.tmp.as_deref()).map_err(|e| fail("tmpfs", p, e))?;
            for (dir, mode) in [("upper", 0o755), ("work", 0o700)] {
                sys::mkdir_at(&layer, dir, mode).map_err(|e| fail("mkdir", p, e))?;
            }
            // The upper directory takes the root's mode (the overlay's root shows it).
            let mode = std::fs::metadata(p)
                .map_err(|e| fail("stat", p, e))?
                .permissions();
            let upper = format!("{}/upper", fd_path(layer.as_raw_fd()));
            std::fs::set_permissions(&upper, mode).map_err(|e| fail("chmod", p, e))?;
            overlay(p, &layer)
        }
        Step::SealDev => {
            std::fs::remove_file(EMPTY_FILE)
                .map_err(|e| fail("remove", Path::new(EMPTY_FILE), e))?;
            let dev = sys::open_path(Path::new("/dev"))
                .map_err(|e| fail("open", Path::new("/dev"), e))?;
            sys::mount_setattr(dev.as_raw_fd(), false, sys::MOUNT_ATTR_RDONLY, 0)
                .map_err(|e| fail("seal", Path::new("/dev"), e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Origin;

    fn rule(path: &str, access: Access, kind: Kind) -> PathRule {
        PathRule {
            path: path.into(),
            access,
            kind,
            origin: Origin::Default,
        }
    }

    /// The index answers as the passes over every rule did, siblings that share a prefix of
    /// bytes (`/a/b`, `/a/bc`, `/a/b.d`) included.
    #[test]
    fn rules_by_path_answer_as_a_pass_over_every_rule() {
        let paths = [
            "/", "/a", "/a/b", "/a/b/c", "/a/b/c/d", "/a/bc", "/a/b.d", "/a/b-", "/ab", "/a/bc/x",
        ];
        let p = policy(
            paths
                .iter()
                .enumerate()
                .map(|(i, p)| rule(p, [Access::Ro, Access::Rw, Access::Hide][i % 3], Kind::Dir))
                .collect(),
            TmpMode::Private,
        );
        let by_path = ByPath::of(&p);
        let queries = paths
            .iter()
            .chain(&["/a/b/c/d/e", "/a/bcd", "/z", "/a/b/x"]);
        for q in queries.map(Path::new) {
            let slow_enclosing = p
                .rules
                .iter()
                .filter(|o| o.path != q && q.starts_with(&o.path))
                .max_by_key(|o| depth(&o.path))
                .map(|o| &o.path);
            assert_eq!(
                by_path.enclosing(q).map(|o| &o.path),
                slow_enclosing,
                "{q:?}"
            );
            let mut slow_beneath: Vec<&PathBuf> = (p.rules.iter())
                .filter(|o| o.path != q && o.path.starts_with(q))
                .map(|o| &o.path)
                .collect();
            slow_beneath.sort();
            let fast: Vec<&PathBuf> = by_path.beneath(q).map(|o| &o.path).collect();
            assert_eq!(fast, slow_beneath, "{q:?}");
            assert_eq!(by_path.at(q).is_some(), p.rules.iter().any(|o| o.path == q));
        }
    }

    fn policy(rules: Vec<PathRule>, tmp: TmpMode) -> Policy {
        Policy {
            rules,
            profile: "test".into(),
            cwd: "/home/u/repo".into(),
            tmp,
            allow_userns: false,
            allow_unix_sockets: false,
            command: vec!["true".into()],
            ..Policy::probe_default()
        }
    }

    #[test]
    fn parents_are_placed_before_children_and_root_is_the_read_only_tree() {
        let p = policy(
            vec![
                rule("/", Access::Ro, Kind::Dir),
                rule("/home/u/.netrc", Access::Hide, Kind::File),
                rule("/home/u/repo", Access::Rw, Kind::Dir),
                rule("/home/u/repo/.git/hooks", Access::Ro, Kind::Dir),
                rule("/run/user", Access::Hide, Kind::Dir),
            ],
            TmpMode::Private,
        );
        let plan = compile(&p);
        assert_eq!(
            plan.steps,
            vec![
                Step::MakeRootPrivate,
                Step::ReadOnlyTree,
                Step::MinimalDev,
                Step::FreshProc,
                Step::PrivateTmp,
                Step::HideDir("/run/user".into()),
                Step::HideFile("/home/u/.netrc".into()),
                Step::BindWritable("/home/u/repo".into()),
                Step::Pin("/home/u/repo/.git".into()),
                Step::BindReadOnly("/home/u/repo/.git/hooks".into()),
                Step::SealDev,
            ]
        );
        assert_eq!(plan.cwd, Path::new("/home/u/repo"));
    }

    #[test]
    fn jail_state_in_a_writable_tree_is_hidden_with_every_directory_on_the_way_pinned() {
        // `mv ~/.local ~/.l2 && mkdir -p ~/.local/state/jail/locks` must not walk away from the
        // hidden store: the directories between the writable root and it are mount points.
        let p = policy(
            vec![
                rule("/", Access::Ro, Kind::Dir),
                rule("/home/u", Access::Rw, Kind::Dir),
                PathRule {
                    origin: Origin::JailState,
                    ..rule("/home/u/.local/state/jail", Access::Hide, Kind::Dir)
                },
            ],
            TmpMode::Private,
        );
        let steps = compile(&p).steps;
        let at = |s: &Step| steps.iter().position(|x| x == s).unwrap();
        let (pin_local, pin_state, hide) = (
            at(&Step::Pin("/home/u/.local".into())),
            at(&Step::Pin("/home/u/.local/state".into())),
            at(&Step::HideState("/home/u/.local/state/jail".into())),
        );
        assert!(at(&Step::BindWritable("/home/u".into())) < pin_local);
        assert!(pin_local < pin_state && pin_state < hide);
    }

    #[test]
    fn a_hidden_home_shows_its_outermost_named_paths_and_skips_hides_inside() {
        let p = policy(
            vec![
                rule("/", Access::Ro, Kind::Dir),
                rule("/home", Access::Hide, Kind::Dir),
                rule("/home/u/.gitconfig", Access::Ro, Kind::File),
                rule("/home/u/.ssh", Access::Hide, Kind::Dir),
                rule("/home/u/repo", Access::Rw, Kind::Dir),
                rule("/home/u/repo/.env", Access::Hide, Kind::File),
                rule("/home/u/repo/.git/hooks", Access::Ro, Kind::Dir),
            ],
            TmpMode::Private,
        );
        let steps = compile(&p).steps;
        assert!(steps.contains(&Step::HideDirExcept(
            "/home".into(),
            vec!["/home/u/.gitconfig".into(), "/home/u/repo".into()]
        )));
        assert!(!steps.contains(&Step::HideDir("/home/u/.ssh".into())));
        assert!(steps.contains(&Step::HideFile("/home/u/repo/.env".into())));
        assert!(steps.contains(&Step::BindReadOnly("/home/u/repo/.git/hooks".into())));
    }

    #[test]
    fn trees_under_the_private_tmp_are_shown_right_after_it_then_get_their_rules() {
        let p = policy(
            vec![
                rule("/", Access::Ro, Kind::Dir),
                rule("/tmp/a", Access::Rw, Kind::Dir),
                rule("/tmp/a/.git/hooks", Access::Ro, Kind::Dir),
                rule("/tmp/b", Access::Ro, Kind::Dir),
                rule("/tmp/c/.env", Access::Hide, Kind::File),
            ],
            TmpMode::Private,
        );
        let steps = compile(&p).steps;
        let at = |s: &Step| steps.iter().position(|x| x == s).unwrap();
        // Shown (outermost only, hidden ones are not shown at all) right after the tmpfs...
        assert_eq!(
            steps[at(&Step::PrivateTmp) + 1..at(&Step::PrivateTmp) + 3],
            [
                Step::ShowInTmp("/tmp/a".into()),
                Step::ShowInTmp("/tmp/b".into())
            ]
        );
        assert!(!steps.contains(&Step::ShowInTmp("/tmp/a/.git/hooks".into())));
        // ...and each then gets its own rule's step, as anywhere else.
        assert!(at(&Step::ShowInTmp("/tmp/a".into())) < at(&Step::BindWritable("/tmp/a".into())));
        assert!(
            at(&Step::BindWritable("/tmp/a".into()))
                < at(&Step::BindReadOnly("/tmp/a/.git/hooks".into()))
        );
        assert!(steps.contains(&Step::BindReadOnly("/tmp/b".into())));
        // With the host's /tmp nothing needs showing.
        let mut host = p.clone();
        host.tmp = TmpMode::Host;
        assert!(
            !compile(&host)
                .steps
                .iter()
                .any(|s| matches!(s, Step::ShowInTmp(_)))
        );
    }

    #[test]
    fn a_writable_path_inside_a_writable_tree_gets_no_bind_of_its_own() {
        // A bind would make it a mount point, which nothing can be renamed onto (EBUSY).
        let p = policy(
            vec![
                rule("/", Access::Ro, Kind::Dir),
                rule("/home/u/repo", Access::Rw, Kind::Dir),
                rule("/home/u/repo/.git/config", Access::Rw, Kind::File),
                rule("/home/u/repo/.git/hooks", Access::Ro, Kind::Dir),
            ],
            TmpMode::Private,
        );
        let steps = compile(&p).steps;
        assert!(!steps.contains(&Step::BindWritable("/home/u/repo/.git/config".into())));
        assert!(steps.contains(&Step::WritableInside("/home/u/repo/.git/config".into())));
        assert!(steps.contains(&Step::BindWritable("/home/u/repo".into())));
        assert!(steps.contains(&Step::BindReadOnly("/home/u/repo/.git/hooks".into())));
    }

    #[test]
    fn a_linked_worktree_binds_its_git_dir_and_the_shared_parts_not_the_main_repository() {
        // The rules the resolver makes for `--rw /w/wt`, a linked worktree of /w/main.
        let g = "/w/main/.git";
        let wt = format!("{g}/worktrees/wt");
        let p = policy(
            vec![
                rule("/", Access::Ro, Kind::Dir),
                rule(&format!("{g}/logs"), Access::Rw, Kind::Dir),
                rule(&format!("{g}/objects"), Access::Rw, Kind::Dir),
                rule(&format!("{g}/packed-refs"), Access::Rw, Kind::File),
                rule(&format!("{g}/refs"), Access::Rw, Kind::Dir),
                rule(&wt, Access::Rw, Kind::Dir),
                rule(&format!("{wt}/commondir"), Access::Ro, Kind::File),
                rule(&format!("{wt}/config.worktree"), Access::Ro, Kind::File),
                rule("/w/wt", Access::Rw, Kind::Dir),
                rule("/w/wt/.git", Access::Ro, Kind::File),
            ],
            TmpMode::Host,
        );
        let steps = compile(&p).steps;
        let pos = |s: Step| steps.iter().position(|x| *x == s).unwrap_or(usize::MAX);
        for part in ["logs", "objects", "packed-refs", "refs", "worktrees/wt"] {
            assert!(pos(Step::BindWritable(format!("{g}/{part}").into())) < steps.len());
        }
        // The read-only names inside the worktree's git dir come after the writable bind.
        let dir = pos(Step::BindWritable(wt.clone().into()));
        for name in ["commondir", "config.worktree"] {
            let ro = pos(Step::BindReadOnly(format!("{wt}/{name}").into()));
            assert!(dir < ro && ro < steps.len(), "{name}: {steps:?}");
        }
        assert!(pos(Step::BindReadOnly("/w/wt/.git".into())) < steps.len());
        // Nothing else of the main repository is bound writable: its config, hooks, index and
        // work tree stay in the read-only tree.
        let writable: Vec<&Step> = steps
            .iter()
            .filter(|s| matches!(s, Step::BindWritable(_)))
            .collect();
        assert_eq!(writable.len(), 6, "{steps:?}");
    }

    #[test]
    fn host_tmp_is_not_replaced() {
        let p = policy(vec![rule("/", Access::Ro, Kind::Dir)], TmpMode::Host);
        assert!(!compile(&p).steps.contains(&Step::PrivateTmp));
    }
}
