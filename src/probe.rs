//! What this kernel offers: Landlock ABI, seccomp filters, user namespaces, and a container guess.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Features {
    pub kernel: String,
    pub arch: &'static str,
    pub landlock_abi: u32,
    pub seccomp: bool,
    pub user_namespaces: bool,
    /// Why user namespaces look unavailable, when they do.
    pub user_namespaces_detail: Option<String>,
    /// macOS: /usr/bin/sandbox-exec is there to run a Seatbelt profile.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub seatbelt: bool,
    pub in_container: Option<String>,
    pub euid: u32,
    /// Layers switched off by the test-only JAIL_TEST_DISABLE variable.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub test_disabled: Vec<String>,
}

/// Reads the kernel's features. With `try_userns`, user namespaces are tested by creating one in a
/// short-lived child (what `jail probe` reports); otherwise sysctls are read and a failed clone at
/// launch is the real test.
pub fn detect(try_userns: bool) -> Features {
    let kernel = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let euid = nix::unistd::geteuid().as_raw();
    let (mut userns, mut detail) = userns_sysctls(euid);
    if try_userns && userns {
        if let Err(e) = try_create_userns() {
            userns = false;
            detail = Some(format!("creating one failed: {e}"));
        }
    }
    let mut f = Features {
        kernel,
        arch: std::env::consts::ARCH,
        landlock_abi: kernel_layers().0,
        seccomp: kernel_layers().1,
        user_namespaces: userns,
        user_namespaces_detail: detail,
        seatbelt: cfg!(target_os = "macos")
            && std::path::Path::new("/usr/bin/sandbox-exec").is_file(),
        // Only `jail probe` shows it; a launch does not pay for the file reads.
        in_container: if try_userns { container_guess() } else { None },
        euid,
        test_disabled: Vec::new(),
    };
    apply_test_switches(&mut f);
    f
}

/// Landlock's ABI and whether seccomp filters can be installed.
#[cfg(target_os = "linux")]
fn kernel_layers() -> (u32, bool) {
    (
        crate::sys::landlock_abi(),
        crate::sys::seccomp_filters_supported(),
    )
}

#[cfg(not(target_os = "linux"))]
fn kernel_layers() -> (u32, bool) {
    (0, false)
}

#[cfg(feature = "test-hooks")]
fn apply_test_switches(f: &mut Features) {
    let Ok(list) = std::env::var("JAIL_TEST_DISABLE") else {
        return;
    };
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match item {
            "mount" | "userns" => {
                f.user_namespaces = false;
                f.user_namespaces_detail = Some("disabled by JAIL_TEST_DISABLE".into());
            }
            "landlock" => f.landlock_abi = 0,
            "seccomp" => f.seccomp = false,
            // One part of a `--net` port mode each (net_setup.rs): Landlock's TCP rules, and
            // the check of listen(); the run still goes on, to prove the other holds alone.
            "tcp-rules" | "listen-check" => {}
            _ => continue,
        }
        f.test_disabled.push(item.to_string());
    }
}

#[cfg(not(feature = "test-hooks"))]
fn apply_test_switches(_: &mut Features) {}

fn read_num(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn userns_sysctls(euid: u32) -> (bool, Option<String>) {
    if !cfg!(target_os = "linux") {
        return (false, Some("not Linux".into()));
    }
    if !std::path::Path::new("/proc/self/ns/user").exists() {
        return (false, Some("kernel built without user namespaces".into()));
    }
    if read_num("/proc/sys/user/max_user_namespaces") == Some(0) {
        return (false, Some("user.max_user_namespaces is 0".into()));
    }
    if euid != 0 {
        if read_num("/proc/sys/kernel/unprivileged_userns_clone") == Some(0) {
            return (false, Some("kernel.unprivileged_userns_clone is 0".into()));
        }
        if read_num("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == Some(1) {
            return (
                false,
                Some("kernel.apparmor_restrict_unprivileged_userns is 1".into()),
            );
        }
    }
    (true, None)
}

/// Does what a launch needs of the namespaces, in a throwaway child: create them, then, as pid 1
/// of the new pid namespace, make the mounts private and mount a fresh /proc (refused where the
/// /proc we have is partly covered, as in Docker, or where an LSM forbids mounting).
#[cfg(not(target_os = "linux"))]
fn try_create_userns() -> Result<(), String> {
    Err("not Linux".into())
}

#[cfg(target_os = "linux")]
fn try_create_userns() -> Result<(), String> {
    // SAFETY: the children only make syscalls and _exit; jail is single-threaded when probing.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(1);
            let flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID;
            // SAFETY: unshare affects only this short-lived child.
            if unsafe { libc::unshare(flags) } != 0 {
                // SAFETY: leave without running any of the parent's cleanup.
                unsafe { libc::_exit(errno()) }
            }
            // SAFETY: as above; the grandchild is pid 1 of the new pid namespace.
            let code = match unsafe { nix::unistd::fork() } {
                Ok(nix::unistd::ForkResult::Child) => {
                    let none: Option<&str> = None;
                    let private = nix::mount::MsFlags::MS_REC | nix::mount::MsFlags::MS_PRIVATE;
                    let proc_flags = nix::mount::MsFlags::MS_NOSUID
                        | nix::mount::MsFlags::MS_NODEV
                        | nix::mount::MsFlags::MS_NOEXEC;
                    let ok = nix::mount::mount(none, "/", none, private, none).is_ok()
                        && nix::mount::mount(Some("proc"), "/proc", Some("proc"), proc_flags, none)
                            .is_ok();
                    // SAFETY: as above.
                    unsafe { libc::_exit(if ok { 0 } else { 200 }) }
                }
                Ok(nix::unistd::ForkResult::Parent { child }) => {
                    match nix::sys::wait::waitpid(child, None) {
                        Ok(nix::sys::wait::WaitStatus::Exited(_, code)) => code,
                        _ => libc::EIO,
                    }
                }
                Err(_) => libc::EAGAIN,
            };
            // SAFETY: as above.
            unsafe { libc::_exit(code) }
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => match nix::sys::wait::waitpid(child, None)
        {
            Ok(nix::sys::wait::WaitStatus::Exited(_, 0)) => Ok(()),
            // 200: the namespaces were made but a fresh /proc was refused.
            Ok(nix::sys::wait::WaitStatus::Exited(_, 200)) => Err(
                "a fresh /proc cannot be mounted (the /proc here is partly covered, or mounting \
                 is forbidden)"
                    .into(),
            ),
            Ok(nix::sys::wait::WaitStatus::Exited(_, errno)) => {
                Err(nix::errno::Errno::from_raw(errno).desc().to_string())
            }
            other => Err(format!("{other:?}")),
        },
        Err(e) => Err(e.to_string()),
    }
}

fn container_guess() -> Option<String> {
    if std::path::Path::new("/.dockerenv").exists() {
        return Some("docker".into());
    }
    if std::path::Path::new("/run/.containerenv").exists() {
        return Some("podman".into());
    }
    if let Ok(v) = std::env::var("container") {
        if !v.is_empty() {
            return Some(v);
        }
    }
    let cgroup = std::fs::read_to_string("/proc/1/cgroup").unwrap_or_default();
    for (needle, name) in [
        ("docker", "docker"),
        ("kubepods", "kubernetes"),
        ("lxc", "lxc"),
    ] {
        if cgroup.contains(needle) {
            return Some(name.into());
        }
    }
    None
}
