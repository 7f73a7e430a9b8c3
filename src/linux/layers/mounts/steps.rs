//! The mounts each step of the view makes: the policy file and the run's CA written under
//! /dev/jail, binds of a path onto itself, the layers and overlays of copy-on-write roots,
//! hidden directories and files, the minimal /dev and a fresh /proc. Every path is reached
//! through an O_PATH|O_NOFOLLOW descriptor, never through a symlink planted on the way.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};

use super::*;

pub(super) fn write_policy_file(json: &str) -> Result<(), JailError> {
    let path = Path::new(POLICY_FILE);
    let dir = path.parent().expect("has a parent");
    std::fs::create_dir(dir).map_err(|e| fail("mkdir", dir, e))?;
    write_dev_file(POLICY_FILE, json.as_bytes())
}

/// The two trust files' contents: [`TRUST_CA`] (the command's Node extras, then the run CA)
/// and [`TRUST_BUNDLE`] (the command's own bundle or else the first system bundle, then the
/// run CA). A system without a bundle gets the run CA alone: its clients trust nothing else
/// anyway. A file the command named but that cannot be read stops the launch: its clients
/// would otherwise trust less, or more, than they asked for.
pub(super) fn trust_files(trust: &Trust) -> Result<(Vec<u8>, Vec<u8>), JailError> {
    let named = |p: &Option<PathBuf>| -> Result<Option<Vec<u8>>, JailError> {
        p.as_ref()
            .map(|p| std::fs::read(p).map_err(|e| fail("read the CA bundle", p, e)))
            .transpose()
    };
    let system = || SYSTEM_CA_BUNDLES.iter().find_map(|p| std::fs::read(p).ok());
    let bundle = named(&trust.bundle)?.or_else(system).unwrap_or_default();
    let extra = named(&trust.node_extra)?.unwrap_or_default();
    Ok((
        with_ca(extra, &trust.ca_pem),
        with_ca(bundle, &trust.ca_pem),
    ))
}

pub(super) fn with_ca(mut pem: Vec<u8>, ca_pem: &str) -> Vec<u8> {
    if !pem.is_empty() && !pem.ends_with(b"\n") {
        pem.push(b'\n');
    }
    pem.extend_from_slice(ca_pem.as_bytes());
    pem
}

/// Binds the trust bundle over the system bundle at `path` (its symlinks followed: a bundle
/// is often a link into the certificate directory), read-only; a path that is not a file here
/// is left alone.
pub(super) fn bind_trust_bundle(path: &Path) -> Result<(), JailError> {
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    let target = sys::open_path(path).map_err(|e| fail("open", path, e))?;
    let at = fd_path(target.as_raw_fd());
    mount(
        Some(TRUST_BUNDLE),
        at.as_str(),
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|e| fail("trust bundle over", path, e))?;
    let top = sys::open_path(path).map_err(|e| fail("open", path, e))?;
    sys::mount_setattr(
        top.as_raw_fd(),
        false,
        sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID,
        0,
    )
    .map_err(|e| fail("trust bundle read-only", path, e))
}

/// A read-only file on jail's /dev tmpfs (before it is sealed).
pub(super) fn write_dev_file(path: &str, bytes: &[u8]) -> Result<(), JailError> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = Path::new(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(path)
        .map_err(|e| fail("create", path, e))?;
    std::io::Write::write_all(&mut f, bytes).map_err(|e| fail("write", path, e))
}

pub(super) fn fd_path(fd: i32) -> String {
    format!("/proc/self/fd/{fd}")
}

/// Binds `path` over itself (with its submounts) and sets or clears read-only on the new mount.
/// Whether `path` is the root of a mount of its own: resolving its name from its parent with
/// RESOLVE_NO_XDEV crosses into another mount (EXDEV). Symlinks are not followed.
pub(super) fn is_mount_point(path: &Path) -> std::io::Result<bool> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(true); // "/" is a mount
    };
    let dir = sys::open_path_nofollow(parent)?;
    let name = std::ffi::CString::new(name.as_encoded_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in a name"))?;
    match sys::openat2_path(
        dir.as_raw_fd(),
        &name,
        libc::RESOLVE_NO_XDEV | libc::RESOLVE_NO_SYMLINKS,
    ) {
        Ok(_) => Ok(false),
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => Ok(true),
        Err(e) => Err(e),
    }
}

pub(super) fn bind_self(path: &Path, read_only: bool) -> Result<(), JailError> {
    let target = sys::open_path_nofollow(path).map_err(|e| fail("open", path, e))?;
    let mode = sys::fstat_mode(target.as_raw_fd()).map_err(|e| fail("stat", path, e))?;
    if mode & libc::S_IFMT == libc::S_IFLNK {
        return Err(fail("bind", path, "is a symlink; jail does not follow it"));
    }
    let at = fd_path(target.as_raw_fd());
    mount(
        Some(at.as_str()),
        at.as_str(),
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| fail("bind", path, e))?;
    // Reopen: the path now resolves to the new mount on top.
    let top = sys::open_path_nofollow(path).map_err(|e| fail("open", path, e))?;
    let result = if read_only {
        sys::mount_setattr(top.as_raw_fd(), true, sys::MOUNT_ATTR_RDONLY, 0)
    } else {
        // Only the top mount: submounts beneath are other filesystems that stay read-only unless
        // named (and a host mount that is read-only itself cannot be made writable).
        sys::mount_setattr(top.as_raw_fd(), false, 0, sys::MOUNT_ATTR_RDONLY)
    };
    result.map_err(|e| {
        let hint = if !read_only && e.raw_os_error() == Some(libc::EPERM) {
            " (the filesystem is read-only on the host)"
        } else {
            ""
        };
        fail(
            if read_only { "read-only" } else { "writable" },
            path,
            format!("{e}{hint}"),
        )
    })
}

/// A detached, writable copy of the mount holding the layer directory `dir`, opened at `dir`.
pub(super) fn layer_mount(dir: &Path) -> Result<std::os::fd::OwnedFd, JailError> {
    let fd = sys::open_tree_clone(dir).map_err(|e| fail("open_tree", dir, e))?;
    sys::mount_setattr(fd.as_raw_fd(), false, 0, sys::MOUNT_ATTR_RDONLY).map_err(|e| {
        fail(
            "layer writable",
            dir,
            format!("{e} (the state directory's filesystem is read-only)"),
        )
    })?;
    Ok(fd)
}

/// A tmpfs of `size` (mount options) attached nowhere, holding a copy-on-write root's `upper`
/// (with the root's mode, which the overlay's root shows) and `work` directories: the layer's
/// bound (see [`crate::linux::layers::layer_bound`]).
pub(super) fn layer_tmpfs(root: &Path, size: &str) -> Result<OwnedFd, JailError> {
    let layer = sys::detached_tmpfs(Some(size)).map_err(|e| fail("tmpfs", root, e))?;
    for (dir, mode) in [("upper", 0o755), ("work", 0o700)] {
        sys::mkdir_at(&layer, dir, mode).map_err(|e| fail("mkdir", root, e))?;
    }
    let mode = std::fs::metadata(root)
        .map_err(|e| fail("stat", root, e))?
        .permissions();
    let upper = format!("{}/upper", fd_path(layer.as_raw_fd()));
    std::fs::set_permissions(&upper, mode).map_err(|e| fail("chmod", root, e))?;
    Ok(layer)
}

/// Mounts the overlay of a copy-on-write root over the root itself. Kernel facts: in a user
/// namespace overlayfs needs `userxattr` (its metadata in `user.overlay.*`, which also turns
/// directory-rename redirects off: renaming a directory that exists below gives EXDEV); the
/// upper and work directories must be on one writable mount; every path is given through
/// /proc/self/fd, so no name in them needs escaping. `volatile`: unmounting an overlay calls
/// sync_filesystem on the upper layer's filesystem, so without it every jail exit would wait
/// for all dirty pages of the user's filesystem (+6 ms measured after writing a tree, unbounded
/// on a busy host); the layer is then as durable as any unsynced file (a host crash during the
/// run loses the run, and the kernel marks its work directory so it is never mounted again).
pub(super) fn overlay(root: &Path, layer: &std::os::fd::OwnedFd) -> Result<(), JailError> {
    let lower = sys::open_path_nofollow(root).map_err(|e| fail("open", root, e))?;
    let l = fd_path(lower.as_raw_fd());
    let u = fd_path(layer.as_raw_fd());
    let options = format!("lowerdir={l},upperdir={u}/upper,workdir={u}/work,userxattr,volatile");
    mount(
        Some("overlay"),
        l.as_str(),
        Some("overlay"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options.as_str()),
    )
    .map_err(|e| fail("overlay", root, e))
}

/// Covers the directory `target` holds (at `path`) with an empty read-only tmpfs.
pub(super) fn hide_dir(path: &Path, target: &std::os::fd::OwnedFd) -> Result<(), JailError> {
    cover_with_empty_tmpfs(target).map_err(|e| fail("hide", path, e))
}

/// The mount of [`hide_dir`], its errno kept.
pub(super) fn cover_with_empty_tmpfs(target: &std::os::fd::OwnedFd) -> nix::Result<()> {
    mount(
        Some("tmpfs"),
        fd_path(target.as_raw_fd()).as_str(),
        Some("tmpfs"),
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("mode=0755,size=4k,nr_inodes=1"),
    )
}

pub(super) fn hide_dir_except(path: &Path, reveal: &[PathBuf]) -> Result<(), JailError> {
    // Hold what is to be shown before the directory is covered.
    let mut held = Vec::new();
    for r in reveal {
        let fd = sys::open_path_nofollow(r).map_err(|e| fail("open", r, e))?;
        let mode = sys::fstat_mode(fd.as_raw_fd()).map_err(|e| fail("stat", r, e))?;
        held.push((r, fd, mode & libc::S_IFMT == libc::S_IFDIR));
    }
    let target = sys::open_path_nofollow(path).map_err(|e| fail("open", path, e))?;
    mount(
        Some("tmpfs"),
        fd_path(target.as_raw_fd()).as_str(),
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("mode=0755,size=64k"),
    )
    .map_err(|e| fail("hide", path, e))?;
    for (r, fd, is_dir) in &held {
        show_at(r, fd, *is_dir)?;
    }
    let top = sys::open_path_nofollow(path).map_err(|e| fail("open", path, e))?;
    sys::mount_setattr(top.as_raw_fd(), false, sys::MOUNT_ATTR_RDONLY, 0)
        .map_err(|e| fail("hide read-only", path, e))
}

/// Binds what `fd` holds at `path`, making the mount point (and its parents) first.
pub(super) fn show_at(
    path: &Path,
    fd: &std::os::fd::OwnedFd,
    is_dir: bool,
) -> Result<(), JailError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| fail("mkdir", parent, e))?;
    }
    let made = if is_dir {
        std::fs::create_dir(path)
    } else {
        std::fs::File::create(path).map(|_| ())
    };
    made.map_err(|e| fail("create", path, e))?;
    let src = fd_path(fd.as_raw_fd());
    mount(
        Some(src.as_str()),
        path,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| fail("show", path, e))
}

pub(super) fn hide_file(path: &Path) -> Result<(), JailError> {
    let target = sys::open_path_nofollow(path).map_err(|e| fail("open", path, e))?;
    let at = fd_path(target.as_raw_fd());
    mount(
        Some(EMPTY_FILE),
        at.as_str(),
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|e| fail("hide", path, e))?;
    let top = sys::open_path_nofollow(path).map_err(|e| fail("open", path, e))?;
    sys::mount_setattr(top.as_raw_fd(), false, sys::MOUNT_ATTR_RDONLY, 0)
        .map_err(|e| fail("hide read-only", path, e))
}

pub(super) fn minimal_dev(size: usize, shm_size: &Option<String>) -> Result<(), JailError> {
    let dev = Path::new("/dev");
    // Hold the host's device nodes before /dev is covered.
    let mut nodes = Vec::new();
    for name in DEVICES {
        let p = dev.join(name);
        match sys::open_path(&p) {
            Ok(fd) => nodes.push((p, fd)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => return Err(fail("open", &p, e)),
        }
    }
    let terminal = terminal_node();
    mount(
        Some("tmpfs"),
        "/dev",
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some(format!("mode=0755,size={size}").as_str()),
    )
    .map_err(|e| fail("tmpfs", dev, e))?;
    for (p, fd) in &nodes {
        std::fs::File::create(p).map_err(|e| fail("create", p, e))?;
        let src = fd_path(fd.as_raw_fd());
        mount(
            Some(src.as_str()),
            p,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| fail("bind", p, e))?;
    }
    if let Some(term) = &terminal {
        let console = dev.join("console");
        std::fs::File::create(&console).map_err(|e| fail("create", &console, e))?;
        let src = fd_path(term.as_raw_fd());
        mount(
            Some(src.as_str()),
            &console,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| fail("bind", &console, e))?;
    }
    let pts = dev.join("pts");
    std::fs::create_dir(&pts).map_err(|e| fail("mkdir", &pts, e))?;
    mount(
        Some("devpts"),
        &pts,
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        // Its own instance, bounded: the kernel's pool of ptys for every non-initial devpts
        // (pty.max - pty.reserve) is shared by every container and jail on the host.
        Some("newinstance,ptmxmode=0666,mode=620,max=1024"),
    )
    .map_err(|e| fail("devpts", &pts, e))?;
    let shm = dev.join("shm");
    std::fs::create_dir(&shm).map_err(|e| fail("mkdir", &shm, e))?;
    mount(
        Some("tmpfs"),
        &shm,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(tmpfs_options("mode=1777", shm_size).as_str()),
    )
    .map_err(|e| fail("tmpfs", &shm, e))?;
    for (link, target) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let p = dev.join(link);
        std::os::unix::fs::symlink(target, &p).map_err(|e| fail("symlink", &p, e))?;
    }
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(EMPTY_FILE)
        .map_err(|e| fail("create", Path::new(EMPTY_FILE), e))?;
    Ok(())
}

/// The user's terminal lives in the host's devpts, which is not shown (it holds the user's other
/// terminals too). Bound at /dev/console, as container runtimes do, ttyname() finds it by scanning
/// /dev, so `tty` and GPG_TTY=$(tty) keep working. The node is opened by its path in this mount
/// namespace: the inherited descriptor's own mount belongs to the host's namespace, and mount(2)
/// refuses a bind source from another namespace.
pub(super) fn terminal_node() -> Option<std::os::fd::OwnedFd> {
    let fd = (0..3).find(|fd| {
        // SAFETY: isatty only queries the descriptor.
        unsafe { libc::isatty(*fd) == 1 }
    })?;
    let path = std::fs::read_link(fd_path(fd)).ok()?;
    if !path.starts_with("/dev/pts/") && !path.starts_with("/dev/tty") {
        return None;
    }
    let node = sys::open_path_nofollow(&path).ok()?;
    let mode = sys::fstat_mode(node.as_raw_fd()).ok()?;
    (mode & libc::S_IFMT == libc::S_IFCHR).then_some(node)
}

pub(super) fn fresh_proc() -> Result<(), JailError> {
    let proc_ = Path::new("/proc");
    mount(
        Some("proc"),
        proc_,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| fail("mount", proc_, e))?;
    for name in PROC_READ_ONLY {
        let p = proc_.join(name);
        if p.exists() {
            bind_self(&p, true)?;
        }
    }
    for name in PROC_MASKED {
        let p = proc_.join(name);
        if p.exists() {
            hide_file(&p)?;
        }
    }
    Ok(())
}
