//! Enforcement level, named gaps, the `--require` check, and the text of `jail probe`.

use serde::Serialize;

use crate::error::JailError;
use crate::policy::{Policy, Require};
use crate::probe::Features;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Full,
    Partial,
    None,
}

impl Level {
    /// The level's name, as the JSON outputs spell it.
    pub fn name(self) -> &'static str {
        match self {
            Level::Full => "full",
            Level::Partial => "partial",
            Level::None => "none",
        }
    }
}

impl Layers {
    /// The layers a run gets, by name, comma-separated ("mount view, landlock, seccomp").
    pub fn names(&self) -> String {
        let named = [
            (self.mount, "mount view"),
            (self.landlock, "landlock"),
            (self.seccomp, "seccomp"),
            (self.seatbelt, "seatbelt"),
        ];
        let on: Vec<&str> = named
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| *n)
            .collect();
        if on.is_empty() {
            "none".into()
        } else {
            on.join(", ")
        }
    }
}

/// Which layers a run gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Layers {
    pub mount: bool,
    pub landlock: bool,
    pub seccomp: bool,
    /// macOS: the policy as a Seatbelt profile (files and network, no syscall filter).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub seatbelt: bool,
}

impl Layers {
    pub fn from_features(f: &Features) -> Layers {
        Layers {
            mount: f.user_namespaces,
            landlock: f.landlock_abi > 0,
            seccomp: f.seccomp,
            seatbelt: f.seatbelt,
        }
    }

    pub fn level(&self) -> Level {
        if self.mount && self.landlock && self.seccomp {
            Level::Full
        } else if self.files_protected() {
            Level::Partial
        } else {
            Level::None
        }
    }

    /// Whether at least one layer protects files.
    pub fn files_protected(&self) -> bool {
        self.mount || self.landlock || self.seatbelt
    }
}

/// What the run cannot enforce with these layers, each as a short named gap.
pub fn gaps(policy: &Policy, layers: &Layers, f: &Features) -> Vec<String> {
    let mut out = Vec::new();
    if layers.seatbelt {
        out.push(
            "no syscall filter (Seatbelt only): ptrace, mount and the like are left to macOS"
                .into(),
        );
        out.push("processes not isolated (no pid namespace)".into());
        out.push("no private /tmp: TMPDIR names a private directory, /tmp is the host's".into());
        return out;
    }
    if !layers.mount {
        out.extend(mount_view_gaps(policy, layers));
    }
    // With seccomp, allowed unix sockets are mediated by the supervisor (unix_connect.rs).
    if !layers.seccomp {
        out.push(if layers.mount {
            "unix sockets not confined by path (known socket places are hidden)".into()
        } else {
            "unix sockets not confined".into()
        });
    }
    if !layers.landlock {
        out.push("no Landlock: files are protected by the mount view alone".into());
    } else if policy.allow_userns {
        out.push(
            "Landlock filesystem rules off (--allow-userns: they forbid a nested sandbox's \
             mounts); files are protected by the mount view alone"
                .into(),
        );
        if f.euid == 0 {
            out.push(
                "as root, a nested sandbox cannot map uid 0 (the kernel requires CAP_SETFCAP, \
                 which jail never keeps)"
                    .into(),
            );
        }
    }
    if !layers.seccomp {
        out.push(
            "no seccomp filter: mount, ptrace, io_uring, keyctl, TIOCSTI and inode flags \
             (chattr) not refused"
                .into(),
        );
    }
    let scoped = layers.landlock && f.landlock_abi >= 6;
    if !scoped {
        out.push(if layers.landlock {
            "signals and abstract unix sockets not scoped (Landlock ABI < 6)".into()
        } else {
            "signals and abstract unix sockets not scoped (no Landlock)".into()
        });
        if policy.allow_unix_sockets && layers.seccomp {
            out.push(
                "abstract unix sockets refused unless the jail has a network namespace of its \
                 own (the mediation cannot scope them)"
                    .into(),
            );
        }
    }
    out.extend(network_gap(policy, layers));
    for root in &policy.protected_search_truncated {
        out.push(format!(
            "protected names searched only partly under {} (too many directories)",
            root.display()
        ));
    }
    if !policy.absent_protected.is_empty() {
        let n = policy.absent_protected.len();
        out.push(format!(
            "{n} protected {} yet and could be created (e.g. {})",
            if n == 1 {
                "name does not exist"
            } else {
                "names do not exist"
            },
            crate::text::path_text(&policy.absent_protected[0])
        ));
    }
    out
}

/// What is left open without the mount view (no namespaces): metadata, listing hidden names,
/// the shared /tmp and /dev/shm, processes and the carve-outs only Landlock can approximate.
fn mount_view_gaps(policy: &Policy, layers: &Layers) -> Vec<String> {
    let mut out = Vec::new();
    out.push(if layers.seccomp {
        "metadata not confined (chmod, chown, utimes, xattrs on read-only paths; inode flags \
         are refused by seccomp)"
            .into()
    } else {
        "metadata not confined (chmod, chown, utimes, xattrs, inode flags such as chattr's on \
         read-only paths)"
            .into()
    });
    out.push("hidden paths are unreadable but their names can be listed".into());
    out.push("no private /tmp: the host's /tmp is shared".into());
    out.push("processes not isolated (no pid namespace)".into());
    if policy
        .rules
        .iter()
        .any(|r| matches!(r.origin, crate::policy::Origin::Protected(_)))
    {
        out.push(
            "carve-outs approximate: new files directly in directories holding a protected \
             name are refused"
                .into(),
        );
    }
    out.push("no private /dev/shm: the host's is closed".into());
    out.push("a killed jail leaves the command's children running (no pid namespace)".into());
    out
}

/// What the network mode cannot hold to without a namespace of its own: ports to any host, or
/// a proxy's port reachable on any host.
fn network_gap(policy: &Policy, layers: &Layers) -> Option<String> {
    match &policy.net {
        crate::net::NetPolicy::Ports { connect, bind } => {
            let list = |ports: &Option<Vec<u16>>| match ports.as_deref() {
                None | Some([]) => "no port".to_string(),
                Some(p) => p.iter().map(u16::to_string).collect::<Vec<_>>().join(","),
            };
            let lookups = if connect.as_ref().is_some_and(|p| !p.is_empty()) {
                " (and 53, for lookups over TCP)"
            } else {
                ""
            };
            let listen = if bind.as_ref().is_some_and(|p| !p.is_empty()) {
                "listen() only on a socket bound to one of them"
            } else {
                "listen() refused on TCP sockets"
            };
            Some(format!(
                "network: TCP limited by port, to any host: connect to {}{lookups}; bind and \
                 listen on {} ({listen}); UDP and other non-TCP sockets refused (name lookups \
                 over UDP fail)",
                list(connect),
                list(bind),
            ))
        }
        crate::net::NetPolicy::Proxy { .. } if !layers.mount => Some(
            "network: no namespace of its own: TCP to the proxy's port of any host is possible; \
             UDP refused"
                .into(),
        ),
        crate::net::NetPolicy::Host => None,
        _ => None,
    }
}

/// Fails closed when the layers fall short of what was asked, or protect nothing.
pub fn check_level(
    require: Option<Require>,
    allow_unconfined: bool,
    layers: &Layers,
    f: &Features,
) -> Result<(), JailError> {
    let missing_mount = || {
        format!(
            "mount view unavailable: {}",
            f.user_namespaces_detail
                .as_deref()
                .unwrap_or("user namespaces cannot be created")
        )
    };
    let linux = cfg!(target_os = "linux");
    let missing_landlock = || {
        if linux {
            "Landlock unavailable (kernel < 5.13 or not enabled at boot)".to_string()
        } else {
            "Landlock unavailable (not Linux)".to_string()
        }
    };
    let missing_seccomp = || {
        if linux {
            "seccomp filters unavailable".to_string()
        } else {
            "seccomp filters unavailable (not Linux)".to_string()
        }
    };
    let fail = |required: &str, missing: String| {
        Err(JailError::LevelNotMet {
            required: required.into(),
            missing,
        })
    };
    match require {
        Some(Require::Full) => {
            if !layers.mount {
                return fail("full", missing_mount());
            }
            if !layers.landlock {
                return fail("full", missing_landlock());
            }
            if !layers.seccomp {
                return fail("full", missing_seccomp());
            }
        }
        Some(Require::Landlock) if !layers.landlock => return fail("landlock", missing_landlock()),
        Some(Require::Mount) if !layers.mount => return fail("mount", missing_mount()),
        _ => {}
    }
    if !layers.files_protected() && !allow_unconfined {
        let why = if cfg!(target_os = "macos") {
            "no Seatbelt: /usr/bin/sandbox-exec is missing".to_string()
        } else if linux {
            format!("{}; {}", missing_mount(), missing_landlock())
        } else {
            format!("no sandbox for {} in this build", std::env::consts::OS)
        };
        return fail(
            "partial",
            format!("no layer can protect files here ({why}); --allow-unconfined runs anyway"),
        );
    }
    Ok(())
}

/// `jail probe` as text.
pub fn probe_text(f: &Features, layers: &Layers) -> String {
    let yes = |b: bool| if b { "yes" } else { "no" };
    let mut s = String::new();
    s.push_str(&format!("kernel:           {} ({})\n", f.kernel, f.arch));
    s.push_str(&format!(
        "landlock:         {}\n",
        if f.landlock_abi > 0 {
            format!("yes, ABI {}", f.landlock_abi)
        } else {
            "no".into()
        }
    ));
    s.push_str(&format!("seccomp filters:  {}\n", yes(f.seccomp)));
    s.push_str(&format!(
        "user namespaces:  {}{}\n",
        yes(f.user_namespaces),
        f.user_namespaces_detail
            .as_ref()
            .map(|d| format!(" ({d})"))
            .unwrap_or_default()
    ));
    s.push_str(&format!(
        "container:        {}\n",
        f.in_container.as_deref().unwrap_or("none detected")
    ));
    s.push_str(&format!(
        "running as:       {}\n",
        if f.euid == 0 {
            "root".to_string()
        } else {
            format!("uid {}", f.euid)
        }
    ));
    s.push_str(&format!(
        "layers:           mount view {}, landlock {}, seccomp {}\n",
        yes(layers.mount),
        yes(layers.landlock),
        yes(layers.seccomp)
    ));
    if cfg!(target_os = "macos") {
        s.push_str(&format!("seatbelt:         {}\n", yes(layers.seatbelt)));
    }
    let level = match layers.level() {
        Level::Full => "full",
        Level::Partial => "partial",
        Level::None => "none (a run would be refused)",
    };
    s.push_str(&format!("level:            {level}\n"));
    // What a run with the default policy could not enforce here.
    let default = crate::policy::Policy::probe_default();
    for gap in gaps(&default, layers, f) {
        s.push_str(&format!("gap:              {gap}\n"));
    }
    s
}
