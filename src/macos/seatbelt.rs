//! The Seatbelt (SBPL) profile: the same [`Policy`] the Linux layers compile, written as an Apple
//! sandbox profile for `sandbox-exec`.
//!
//! Pure: no syscalls, no filesystem access. The caller passes real (resolved) paths; the only
//! mapping done here is the string mapping of the three symlinked top-level directories macOS
//! ships ([`real_path`]: `/tmp`, `/var`, `/etc` → `/private/…`), because Seatbelt matches the real
//! path of the file, never the name a program used: a rule for `/tmp/x` would match nothing.
//!
//! # How SBPL is evaluated, and why the order of the rules is the design
//!
//! A profile is a list of `(allow OPERATION… FILTER…)` and `(deny OPERATION… FILTER…)` rules.
//! For each operation the kernel checks (an open, an unlink, a connect), the **last** rule that
//! matches decides. So the profile starts from `(deny default)`, opens broad things early and
//! narrows them later:
//!
//! - reads: `(allow file-read* (subpath "/"))` first, then the hidden paths denied after it;
//! - writes: the writable paths allowed, then the read-only carve-outs beneath them (protected
//!   names, `--ro` inside `--rw`) denied after them;
//! - a rule that re-opens something inside a hidden or read-only path (a flag naming a path
//!   inside a default-hidden one) comes after the rule it re-opens.
//!
//! Within the path rules that is exactly the policy's own semantics ("the rule with the longest
//! path wins", [`Policy::rule_for`]): every path rule is emitted parent-first (by depth), so a
//! deeper rule comes later and wins. Rules on paths of the same depth never contain each other.
//!
//! # What differs from the Linux layers
//!
//! - There is no private `/tmp`: the command writes to a per-run directory ([`Params::tmp_dir`],
//!   which `TMPDIR` names), and with `--tmp private` the host's `/private/tmp` is hidden (as the
//!   Linux tmpfs hides it).
//! - A hidden path is denied (EPERM), not shown empty. A hidden directory's own metadata stays
//!   readable (it exists, as the empty directory of the mount view does), nothing inside it.
//! - Rules are paths, not mounts: renaming a directory would carry a carve-out's contents out of
//!   it. So every writable root, and every directory between a writable root and a carve-out,
//!   is pinned (`file-write-unlink` denied, which covers rename), as the mount points of the
//!   Linux view are.
//! - Rules are paths, so a protected name that does not exist yet is refused too (the Linux
//!   layers can only move it aside after the run).
//! - Hard links are never allowed (`file-link` is denied by default and denied again on hidden
//!   and read-only paths): a link to a hidden or read-only file from a writable place would be a
//!   second name that the path rules do not cover.
//! - Every deny is also written for the data volume's name of the path (`/Users/u/.ssh` is also
//!   `/System/Volumes/Data/Users/u/.ssh`): the same file is reachable through the firmlink, and
//!   a rule for one spelling must not be walked around with the other.
//! - Unix sockets: `connect()` and `bind()` on a socket path are confined by path here (on Linux
//!   no layer confines them, so `socket(AF_UNIX)` is refused there). `socketpair` always works.
//!
//! Each of these, and the questions only a real Mac can answer (case-insensitive volumes, the
//! exact operations `rename`/`link`/`clonefile` are checked as), is for the macOS attack tests.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use crate::error::JailError;
use crate::policy::{Access, Kind, Policy, TmpMode};

/// What the profile needs besides the policy: the places only the launcher knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// The per-run temporary directory (a real path, created fresh for this run and removed
    /// after it): readable and writable, the equivalent of the Linux jail's private `/tmp`.
    pub tmp_dir: PathBuf,
    /// The terminals the command inherits (`ttyname` of descriptors 0, 1, 2), each under `/dev`:
    /// readable, writable and controllable (ioctl), like the terminal of the Linux jail.
    pub ttys: Vec<PathBuf>,
}

/// The symlinks at the top of every macOS system and the real directories they name.
pub const SYMLINKED_ROOTS: &[(&str, &str)] = &[
    ("/tmp", "/private/tmp"),
    ("/var", "/private/var"),
    ("/etc", "/private/etc"),
];

/// Where the data volume is mounted: `/Users`, `/private`, `/opt`, `/usr/local`… are firmlinks
/// into it, so every such file has a second absolute name beneath this.
pub const DATA_VOLUME: &str = "/System/Volumes/Data";

/// The Mach services every command may look up, and why. Every other one is refused: a Mach
/// service runs outside the sandbox with its own rights, so each allowed name is a door out.
/// Deliberately absent: the keychain (`com.apple.SecurityServer`, `com.apple.securityd.xpc`:
/// git-credential-osxkeychain's tokens), launch services (`com.apple.coreservices.launchservicesd`,
/// `com.apple.lsd.*`: `open` starts programs outside the sandbox), the pasteboard
/// (`com.apple.pasteboard.1`), preferences writes (`com.apple.cfprefsd.*`), file-system events
/// (`com.apple.FSEvents`: changes anywhere, hidden paths included), the window server, TCC and
/// Apple Events.
pub const MACH_SERVICES: &[(&str, &str)] = &[
    (
        "com.apple.system.opendirectoryd.libinfo",
        "user and group lookups (getpwuid: whoami, git, ssh, ~)",
    ),
    (
        "com.apple.system.opendirectoryd.membership",
        "group membership checks (id, access checks)",
    ),
    (
        "com.apple.system.notification_center",
        "notify(3): libc's change notices (time zone, resolver configuration)",
    ),
    ("com.apple.system.logger", "syslog(3): write-only"),
    ("com.apple.logd", "os_log: write-only"),
    (
        "com.apple.bsd.dirhelper",
        "confstr(_CS_DARWIN_USER_TEMP_DIR): names the per-user temp and cache directories",
    ),
];

/// The Mach services the network needs (part of the network policy, written by `network`).
pub const NETWORK_MACH_SERVICES: &[(&str, &str)] = &[
    (
        "com.apple.SystemConfiguration.DNSConfiguration",
        "the resolver configuration getaddrinfo reads",
    ),
    (
        "com.apple.SystemConfiguration.configd",
        "proxy and network settings",
    ),
    (
        "com.apple.dnssd.service",
        "name resolution through mDNSResponder",
    ),
    (
        "com.apple.trustd",
        "TLS certificate evaluation (Security.framework: Go, Rust native-tls, Swift)",
    ),
    (
        "com.apple.trustd.agent",
        "the same, with the user's trust settings",
    ),
];

/// The socket getaddrinfo talks to: name resolution works even when unix sockets are refused.
pub const DNS_SOCKET: &str = "/private/var/run/mDNSResponder";

/// The profile for `policy`. Fails (jail's own error, exit 125) on a path SBPL cannot name
/// safely: not absolute, with `..`, not UTF-8, or with a control character (a newline included):
/// refusing is safer than trusting the profile compiler's escapes, since a deny whose string
/// means another path is a silent hole.
pub fn profile(policy: &Policy, params: &Params) -> Result<String, JailError> {
    let tree = Tree::new(policy, params)?;
    let mut out = Out::default();

    out.line("(version 1)");
    writeln!(
        out.text,
        "; jail: the Seatbelt profile for profile '{}', generated from the resolved policy.",
        policy.profile.replace(['\n', '\r'], " ")
    )
    .expect("write to a String");
    out.comment(
        "The last rule that matches an operation decides; so the order below is the policy.",
    );
    out.rule("deny", "default", &[]);

    system_rules(&mut out);

    out.section("Reads: everything, then the hidden paths (later rules win).");
    out.rule(
        "allow",
        "file-read*",
        &[Filter::Subpath("/".into()).render(false)?],
    );
    out.entries(tree.read_entries())?;

    out.section("Writes: the writable paths, then the read-only paths beneath them.");
    out.entries(tree.write_entries())?;
    let pins = tree.pins();
    if !pins.is_empty() {
        out.comment(
            "Pinned: a writable root, or a directory above a carve-out inside one, cannot be",
        );
        out.comment("renamed (which would carry the carve-out's contents to a writable name).");
        out.rule("deny", "file-write-unlink", &render_all(&pins, false)?);
    }

    out.section("The run's own temporary directory (macOS has no private /tmp; TMPDIR names it).");
    out.rule(
        "allow",
        "file-read* file-write* process-exec",
        &[Filter::Subpath(tree.tmp_dir.clone()).render(false)?],
    );

    device_rules(&tree, &mut out)?;

    network(policy, &tree, &mut out)?;
    Ok(out.text)
}

/// What the command may do outside files and the network: its processes, system information,
/// the Mach services and POSIX IPC it needs.
fn system_rules(out: &mut Out) {
    out.section("Processes: children inherit this profile; nothing outside it can be signalled.");
    out.rule("allow", "process-fork", &[]);
    out.rule("allow", "process-exec", &[]);
    out.rule("allow", "signal", &["(target same-sandbox)".into()]);
    out.rule("allow", "process-info*", &["(target same-sandbox)".into()]);

    out.section("System information.");
    out.rule("allow", "sysctl-read", &[]);
    out.comment("Not the argv and environment of other processes (the Linux jail's pid namespace");
    out.comment("hides them): they hold the tokens the environment filter removed from ours.");
    out.rule(
        "deny",
        "sysctl-read",
        &[
            "(sysctl-name \"kern.procargs\")".into(),
            "(sysctl-name \"kern.procargs2\")".into(),
        ],
    );
    out.comment("Java reads the CPU type through a sysctl write.");
    out.rule(
        "allow",
        "sysctl-write",
        &["(sysctl-name \"kern.grade_cputype\")".into()],
    );
    out.comment("host_processor_info: Node's os.cpus() sizes every worker pool with it.");
    out.rule("allow", "mach-host*", &[]);
    out.comment("Preferences are files, readable anyway; writing them (cfprefsd) is not allowed.");
    out.rule("allow", "user-preference-read", &[]);

    out.section("Mach services: each runs outside the sandbox, so only these (see MACH_SERVICES).");
    out.rule("allow", "mach-lookup", &global_names(MACH_SERVICES));

    out.section("POSIX IPC: the names are global, not per jail.");
    out.comment("Semaphores (Python multiprocessing locks): a count, no data.");
    out.rule("allow", "ipc-posix-sem", &[]);
    out.comment("Shared memory only for libnotify's read-only page: another program's segment of");
    out.comment("the same user could be read or changed (the Linux jail has its own /dev/shm).");
    out.rule(
        "allow",
        "ipc-posix-shm-read*",
        &["(ipc-posix-name \"apple.shm.notification_center\")".into()],
    );
}

/// The devices the command may write: the harmless ones, its descriptors, the pseudo-terminals
/// it opens and the terminal it was started on.
fn device_rules(tree: &Tree, out: &mut Out) -> Result<(), JailError> {
    out.section("Devices: reads are allowed above; writes only to these.");
    out.rule(
        "allow",
        "file-write-data file-ioctl",
        &render_all(
            &["/dev/null", "/dev/zero", "/dev/tty", "/dev/ptmx"].map(|p| Filter::Literal(p.into())),
            false,
        )?,
    );
    out.comment("/dev/stdout and friends: a descriptor the command already holds.");
    out.rule(
        "allow",
        "file-write-data",
        &[Filter::Subpath("/dev/fd".into()).render(false)?],
    );
    out.comment("New pseudo-terminals: only those opened inside the sandbox carry the extension.");
    out.rule("allow", "pseudo-tty", &[]);
    out.rule(
        "allow",
        "file-write-data file-ioctl",
        &[
            "(require-all (regex #\"^/dev/ttys[0-9]+$\") (extension \"com.apple.sandbox.pty\"))"
                .into(),
        ],
    );
    if !tree.ttys.is_empty() {
        out.comment("The terminal the command was started on (not the user's other terminals).");
        let ttys: Vec<Filter> = tree.ttys.iter().cloned().map(Filter::Literal).collect();
        out.rule(
            "allow",
            "file-write-data file-ioctl",
            &render_all(&ttys, false)?,
        );
    }
    Ok(())
}

/// The network, in one place so that a network policy changes one function. For now it is the
/// host's (as on Linux: network policy is a later issue); unix sockets follow
/// `policy.allow_unix_sockets`.
fn network(policy: &Policy, tree: &Tree, out: &mut Out) -> Result<(), JailError> {
    out.section("Network: the host's (network policy is a later issue).");
    out.rule("allow", "network*", &[]);
    out.comment("socket(): connect and bind on unix sockets are confined by path below.");
    out.rule("allow", "system-socket", &[]);
    out.rule("allow", "mach-lookup", &global_names(NETWORK_MACH_SERVICES));

    if policy.allow_unix_sockets {
        out.section(
            "Unix sockets (allowed by the policy): not into hidden paths; bound only where",
        );
        out.comment("the command may write.");
        let connect: Vec<Entry> = tree
            .read_entries()
            .into_iter()
            .filter(|e| e.ops != "file-read-metadata")
            .map(|e| Entry {
                ops: "network-outbound",
                socket: Some("remote"),
                ..e
            })
            .collect();
        out.entries(connect)?;
        out.rule("deny", "network-bind", &["(local unix-socket)".into()]);
        let mut bind: Vec<Entry> = tree
            .write_entries()
            .into_iter()
            .map(|e| Entry {
                ops: "network-bind",
                socket: Some("local"),
                ..e
            })
            .collect();
        bind.push(Entry {
            depth: usize::MAX,
            class: 0,
            allow: true,
            ops: "network-bind",
            socket: Some("local"),
            filters: vec![Filter::Subpath(tree.tmp_dir.clone())],
        });
        out.entries(bind)?;
    } else {
        out.section("Unix sockets: refused (a socket's connect() reaches whatever listens on it:");
        out.comment("docker, an ssh agent, a daemon outside any sandbox), as on Linux.");
        out.rule("deny", "network-outbound", &["(remote unix-socket)".into()]);
        out.rule("deny", "network-bind", &["(local unix-socket)".into()]);
    }
    out.comment("Name resolution: getaddrinfo() asks mDNSResponder over this socket.");
    out.rule(
        "allow",
        "network-outbound",
        &[format!(
            "(remote unix-socket {})",
            Filter::Literal(DNS_SOCKET.into()).render(true)?
        )],
    );
    Ok(())
}

/// `path` as Seatbelt sees it: `/tmp`, `/var` and `/etc` replaced by the real directories under
/// `/private` (a pure string mapping, component-wise: `/tmpfoo` is left alone; nothing is read
/// from the filesystem). Other paths are returned as they are.
pub fn real_path(path: &Path) -> PathBuf {
    for (link, target) in SYMLINKED_ROOTS {
        if let Ok(rest) = path.strip_prefix(link) {
            return if rest.as_os_str().is_empty() {
                PathBuf::from(target)
            } else {
                Path::new(target).join(rest)
            };
        }
    }
    path.to_path_buf()
}

/// `path` as an SBPL string literal: in double quotes, with `\` and `"` escaped. Everything else
/// (spaces, parentheses, `;`, unicode) is literal text inside a string. Refused: a path that is
/// not UTF-8 or holds a control character (newline, tab, NUL…), whose meaning would depend on
/// the profile compiler's escapes.
pub fn quote(path: &Path) -> Result<String, JailError> {
    let Some(text) = path.to_str() else {
        return Err(unsafe_path(path, "is not valid UTF-8"));
    };
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        return Err(unsafe_path(
            path,
            &format!("contains the control character U+{:04X}", c as u32),
        ));
    }
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    Ok(out)
}

fn unsafe_path(path: &Path, reason: &str) -> JailError {
    JailError::bad_path(
        "seatbelt profile",
        path,
        format!("{reason}: the macOS sandbox profile cannot name it safely"),
    )
}

/// Absolute, without `.` or `..`, without a trailing or doubled `/`, then mapped ([`real_path`]).
fn sbpl_path(path: &Path) -> Result<PathBuf, JailError> {
    if !path.is_absolute() {
        return Err(unsafe_path(path, "is not absolute"));
    }
    let mut out = PathBuf::from("/");
    for comp in path.components() {
        match comp {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(c) => out.push(c),
            Component::ParentDir | Component::Prefix(_) => {
                return Err(unsafe_path(path, "is not normalized (it has '..')"));
            }
        }
    }
    Ok(real_path(&out))
}

/// A path filter. A directory (or a path that does not exist yet) is a `subpath`: it and
/// everything beneath; a file is a `literal`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Filter {
    Literal(PathBuf),
    Subpath(PathBuf),
}

impl Filter {
    fn path(&self) -> &Path {
        match self {
            Filter::Literal(p) | Filter::Subpath(p) => p,
        }
    }

    /// Inside a unix-socket filter a literal is spelled `path-literal`.
    fn render(&self, socket: bool) -> Result<String, JailError> {
        let q = quote(self.path())?;
        Ok(match (self, socket) {
            (Filter::Literal(_), false) => format!("(literal {q})"),
            (Filter::Literal(_), true) => format!("(path-literal {q})"),
            (Filter::Subpath(_), _) => format!("(subpath {q})"),
        })
    }

    /// The same filter for the data volume's name of the path, for denies: `/Users/u/.ssh` is
    /// also `/System/Volumes/Data/Users/u/.ssh`.
    fn with_alias(self) -> Vec<Filter> {
        let p = self.path();
        if p == Path::new("/") || p.starts_with(DATA_VOLUME) || p.starts_with("/dev") {
            return vec![self];
        }
        let alias = Path::new(DATA_VOLUME).join(p.strip_prefix("/").unwrap_or(p));
        let other = match &self {
            Filter::Literal(_) => Filter::Literal(alias),
            Filter::Subpath(_) => Filter::Subpath(alias),
        };
        vec![self, other]
    }
}

fn render_all(filters: &[Filter], socket: bool) -> Result<Vec<String>, JailError> {
    filters.iter().map(|f| f.render(socket)).collect()
}

fn global_names(list: &[(&str, &str)]) -> Vec<String> {
    list.iter()
        .map(|(name, _)| format!("(global-name \"{name}\")"))
        .collect()
}

/// What the tree knows about a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Dir,
    File,
    /// A protected name that did not exist at start: refused whatever is created there.
    Absent,
}

#[derive(Debug, Clone)]
struct Node {
    access: Access,
    shape: Shape,
}

impl Node {
    fn filter(&self, path: &Path) -> Filter {
        match self.shape {
            Shape::File => Filter::Literal(path.to_path_buf()),
            Shape::Dir | Shape::Absent => Filter::Subpath(path.to_path_buf()),
        }
    }
}

/// One path rule of a section, before ordering: emitted by depth (parents first), then by class.
#[derive(Debug, Clone)]
struct Entry {
    depth: usize,
    class: u8,
    allow: bool,
    ops: &'static str,
    /// `Some("remote" | "local")`: the filters name unix sockets.
    socket: Option<&'static str>,
    filters: Vec<Filter>,
}

/// The policy's paths as Seatbelt sees them, each with the access that applies there.
struct Tree {
    nodes: BTreeMap<PathBuf, Node>,
    tmp_dir: PathBuf,
    ttys: Vec<PathBuf>,
}

impl Tree {
    fn new(policy: &Policy, params: &Params) -> Result<Tree, JailError> {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            PathBuf::from("/"),
            Node {
                access: Access::Ro,
                shape: Shape::Dir,
            },
        );
        if policy.tmp == TmpMode::Private {
            // The Linux jail's /tmp is a private tmpfs: the host's is not seen.
            nodes.insert(
                PathBuf::from("/private/tmp"),
                Node {
                    access: Access::Hide,
                    shape: Shape::Dir,
                },
            );
        }
        for path in &policy.absent_protected {
            nodes.insert(
                sbpl_path(path)?,
                Node {
                    access: Access::Ro,
                    shape: Shape::Absent,
                },
            );
        }
        for rule in &policy.rules {
            let shape = match rule.kind {
                Kind::Dir => Shape::Dir,
                Kind::File => Shape::File,
            };
            nodes.insert(
                sbpl_path(&rule.path)?,
                Node {
                    access: rule.access,
                    shape,
                },
            );
        }
        let tmp_dir = sbpl_path(&params.tmp_dir)?;
        if tmp_dir == Path::new("/")
            || nodes
                .iter()
                .any(|(p, n)| p.starts_with(&tmp_dir) && n.access != Access::Rw && p != &tmp_dir)
        {
            return Err(JailError::bad_path(
                "seatbelt profile",
                &params.tmp_dir,
                "the run's temporary directory must be a fresh directory of its own, with no \
                 rule beneath it",
            ));
        }
        let mut ttys = Vec::new();
        for tty in &params.ttys {
            let tty = sbpl_path(tty)?;
            if tty.parent() != Some(Path::new("/dev")) {
                return Err(JailError::bad_path(
                    "seatbelt profile",
                    &tty,
                    "a terminal must be a device in /dev",
                ));
            }
            if !ttys.contains(&tty) {
                ttys.push(tty);
            }
        }
        Ok(Tree {
            nodes,
            tmp_dir,
            ttys,
        })
    }

    /// The access of the most specific rule strictly above `path`.
    fn parent_access(&self, path: &Path) -> Access {
        path.ancestors()
            .skip(1)
            .find_map(|a| self.nodes.get(a))
            .map_or(Access::Ro, |n| n.access)
    }

    /// The access at `path` itself (its own rule, or the one above it).
    fn access_at(&self, path: &Path) -> Access {
        path.ancestors()
            .find_map(|a| self.nodes.get(a))
            .map_or(Access::Ro, |n| n.access)
    }

    /// Every node but the root, with its depth.
    fn rules(&self) -> impl Iterator<Item = (&PathBuf, &Node, usize)> {
        self.nodes
            .iter()
            .filter(|(p, _)| p.as_path() != Path::new("/"))
            .map(|(p, n)| (p, n, p.components().count()))
    }

    /// Hidden paths (denied after the broad read allow), and paths re-opened inside them.
    fn read_entries(&self) -> Vec<Entry> {
        let mut out = Vec::new();
        for (path, node, depth) in self.rules() {
            let parent_hidden = self.parent_access(path) == Access::Hide;
            match (node.access, parent_hidden) {
                (Access::Hide, false) => {
                    out.push(Entry {
                        depth,
                        class: 0,
                        allow: false,
                        ops: "file-read* file-link process-exec",
                        socket: None,
                        filters: node.filter(path).with_alias(),
                    });
                    if node.shape == Shape::Dir {
                        out.push(Entry {
                            depth,
                            class: 1,
                            allow: true,
                            ops: "file-read-metadata",
                            socket: None,
                            filters: vec![Filter::Literal(path.clone())],
                        });
                    }
                }
                (Access::Ro | Access::Rw, true) => out.push(Entry {
                    depth,
                    class: 2,
                    allow: true,
                    ops: "file-read* process-exec",
                    socket: None,
                    filters: vec![node.filter(path)],
                }),
                _ => {}
            }
        }
        out
    }

    /// Writable roots, then what stays read-only (or hidden) beneath them.
    fn write_entries(&self) -> Vec<Entry> {
        let mut out = Vec::new();
        for (path, node, depth) in self.rules() {
            let parent_writable = self.parent_access(path) == Access::Rw;
            match (node.access, parent_writable) {
                (Access::Rw, false) => out.push(Entry {
                    depth,
                    class: 0,
                    allow: true,
                    ops: "file-write*",
                    socket: None,
                    filters: vec![node.filter(path)],
                }),
                (Access::Ro | Access::Hide, true) => out.push(Entry {
                    depth,
                    class: 1,
                    allow: false,
                    ops: "file-write* file-link",
                    socket: None,
                    filters: node.filter(path).with_alias(),
                }),
                _ => {}
            }
        }
        out
    }

    /// Directories that must not be renamed: each writable root, and each writable directory
    /// above a carve-out (up to its writable root).
    fn pins(&self) -> Vec<Filter> {
        let mut pins = BTreeSet::new();
        for (path, node, _) in self.rules() {
            let parent = self.parent_access(path);
            if node.access == Access::Rw && parent != Access::Rw {
                pins.insert(path.clone());
            }
            if node.access != Access::Rw && parent == Access::Rw {
                for a in path.ancestors().skip(1) {
                    if self.access_at(a) != Access::Rw {
                        break;
                    }
                    pins.insert(a.to_path_buf());
                }
            }
        }
        pins.into_iter()
            .flat_map(|p| Filter::Literal(p).with_alias())
            .collect()
    }
}

/// The profile text being written.
#[derive(Default)]
struct Out {
    text: String,
}

impl Out {
    fn line(&mut self, line: &str) {
        self.text.push_str(line);
        self.text.push('\n');
    }

    fn comment(&mut self, text: &str) {
        self.line(&format!("; {text}"));
    }

    fn section(&mut self, title: &str) {
        self.text.push('\n');
        self.comment(title);
    }

    /// `(ACTION OPS FILTER…)`: on one line when short, else one filter a line.
    fn rule(&mut self, action: &str, ops: &str, filters: &[String]) {
        let one = format!(
            "({action} {ops}{}{})",
            if filters.is_empty() { "" } else { " " },
            filters.join(" ")
        );
        if filters.len() <= 1 || one.len() <= 100 {
            self.line(&one);
            return;
        }
        self.line(&format!("({action} {ops}"));
        for (i, f) in filters.iter().enumerate() {
            let close = if i + 1 == filters.len() { ")" } else { "" };
            self.line(&format!("    {f}{close}"));
        }
    }

    /// Path entries parent-first (stable, so paths of one depth keep their order), adjacent ones
    /// of the same kind merged into one rule (which changes nothing: nothing stands between them).
    fn entries(&mut self, mut entries: Vec<Entry>) -> Result<(), JailError> {
        entries.sort_by_key(|e| (e.depth, e.class));
        let mut merged: Vec<Entry> = Vec::new();
        for e in entries {
            match merged.last_mut() {
                Some(last)
                    if last.allow == e.allow && last.ops == e.ops && last.socket == e.socket =>
                {
                    last.filters.extend(e.filters);
                }
                _ => merged.push(e),
            }
        }
        for e in merged {
            let mut filters = Vec::new();
            for f in &e.filters {
                let rendered = f.render(e.socket.is_some())?;
                filters.push(match e.socket {
                    Some(side) => format!("({side} unix-socket {rendered})"),
                    None => rendered,
                });
            }
            self.rule(if e.allow { "allow" } else { "deny" }, e.ops, &filters);
        }
        Ok(())
    }
}
