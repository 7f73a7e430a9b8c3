//! seccomp layer: a BPF filter, installed last (it forbids `mount`), that refuses the syscalls a
//! confined program has no business making.
//!
//! Kernel facts behind the shape of the filter:
//! - The architecture field is checked first: i386 syscalls via `int 0x80` carry other numbers and
//!   would walk past a filter written for x86_64 numbers (they kill the process instead).
//! - x32 syscalls share AUDIT_ARCH_X86_64 but set bit 30 of the number: all are refused.
//! - `clone3` passes its flags in memory the filter cannot read, so it answers ENOSYS and libc
//!   falls back to `clone`, whose flags the filter can inspect.
//! - `ioctl`'s request is an `unsigned int` in the kernel: TIOCSTI, TIOCLINUX and the inode
//!   attribute ioctls are matched on the low 32 bits only, so high garbage bits cannot smuggle
//!   them past.

use std::collections::BTreeMap;

use serde::Serialize;

use super::bpf_tree::Refusal;
use crate::error::JailError;
use crate::policy::Policy;

/// When a denied syscall matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum When {
    Always,
    /// (arg & mask) == value, on the low 32 bits of the argument.
    ArgMasked {
        arg: u8,
        mask: u32,
        value: u32,
    },
    /// Every condition holds (on the low 32 bits of each argument).
    All(Vec<Cond>),
}

impl When {
    /// The conditions that must all hold, or None when the syscall is refused whatever its
    /// arguments.
    pub fn conditions(&self) -> Option<Vec<Cond>> {
        match self {
            When::Always => None,
            &When::ArgMasked { arg, mask, value } => Some(vec![Cond {
                arg,
                mask,
                value,
                ne: false,
            }]),
            When::All(conds) => Some(conds.clone()),
        }
    }
}

/// One argument test of [`When::All`], as the program compiles it.
pub use super::bpf_tree::Cond;

#[derive(Debug, Clone, Serialize)]
pub struct Deny {
    pub syscall: &'static str,
    pub when: When,
}

#[derive(Debug, Clone, Serialize)]
pub struct SeccompPlan {
    pub arch: &'static str,
    /// Refused with EPERM.
    pub deny: Vec<Deny>,
    /// Answered with ENOSYS so that libc falls back to an inspectable call.
    pub enosys: Vec<&'static str>,
    pub reject_x32: bool,
}

const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;
/// ioctls that change an inode's flags or attributes on a descriptor opened read-only:
/// FS_IOC_SETFLAGS (chattr) and its 32-bit twin, FS_IOC_FSSETXATTR, FS_IOC_SETVERSION and its
/// twin, FS_IOC_ENABLE_VERITY. Landlock (ABI 7) does not guard them and, without the mount
/// view's read-only binds (EROFS), nothing else does; immutable and append-only need
/// CAP_LINUX_IMMUTABLE, never kept, but the owner may set the others on a read-only path. No
/// agent needs them, so they are refused in every jail. x86_64 and aarch64 both use the
/// generic _IOW encoding: the numbers are the same on both.
const INODE_ATTR_IOCTLS: [u32; 6] = [
    0x4008_6602,
    0x4004_6602,
    0x401c_5820,
    0x4008_7602,
    0x4004_7602,
    0x4080_6685,
];
/// file_setattr(2) (Linux 6.17) sets the same attributes as FS_IOC_FSSETXATTR, by path; 469 in
/// the numbering every architecture shares from 424 on. libc does not name it yet.
const SYS_FILE_SETATTR: i64 = 469;
/// fchmodat2(2) (Linux 6.6), 452 in the same shared numbering; libc names it on x86_64 only.
const SYS_FCHMODAT2: i64 = 452;
/// kexec_file_load(2): musl's libc names it on x86_64 only, and the static build must refuse it
/// on arm64 as well (x86_64 320, arm64 294; the generic table's number).
#[cfg(target_arch = "x86_64")]
const SYS_KEXEC_FILE_LOAD: i64 = 320;
#[cfg(target_arch = "aarch64")]
const SYS_KEXEC_FILE_LOAD: i64 = 294;
const CLONE_NEWUSER: u32 = 0x1000_0000;
const AF_UNIX: u32 = 1;
const AF_INET: u32 = 2;
const AF_INET6: u32 = 10;
const AF_NETLINK: u32 = 16;
const AF_VSOCK: u32 = 40;
const SOCK_STREAM: u32 = 1;
const SOCK_SEQPACKET: u32 = 5;
/// The socket type is the low four bits of socket()'s second argument (the rest are flags).
const SOCK_TYPE_MASK: u32 = 0xf;
const IPPROTO_TCP: u32 = 6;
/// sendto/sendmsg flag that makes a TCP socket connect as it sends: the kernel takes that path
/// without the socket_connect hook Landlock's TCP rules hang on.
const MSG_FASTOPEN: u32 = 0x2000_0000;

/// What the network policy asks of the filter (see [`compile`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct NetFilter {
    /// Only TCP over IPv4/IPv6 (plus unix and netlink sockets): Landlock's TCP rules hold the
    /// policy in the host's network.
    pub tcp_only: bool,
    /// listen() refused: Landlock checks bind(), but listen() on an unbound socket binds an
    /// ephemeral port on every address without asking.
    pub no_listen: bool,
}

/// Syscalls refused in every jail.
const ALWAYS_DENIED: &[&str] = &[
    // Debugging another process reads or writes its memory.
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "process_madvise",
    // Kernel and system state.
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "init_module",
    "finit_module",
    "delete_module",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "syslog",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "vhangup",
    // Large attack surface, no use to an agent.
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    // The session keyring is inherited (root's especially).
    "keyctl",
    "add_key",
    "request_key",
    // Opens any inode on a mount by handle, bypassing paths (and so Landlock).
    "open_by_handle_at",
];

/// Mount and namespace syscalls: refused unless `--allow-userns`, because a nested sandbox
/// (bubblewrap inside the agent) needs them in its own user namespace, where they cannot touch
/// the jail's mounts (those are locked read-only when copied into a less privileged namespace).
const MOUNT_FAMILY: &[&str] = &[
    "mount",
    "umount2",
    "pivot_root",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "setns",
];

#[cfg(target_arch = "x86_64")]
const X86_ONLY_DENIED: &[&str] = &["iopl", "ioperm", "uselib"];
#[cfg(not(target_arch = "x86_64"))]
const X86_ONLY_DENIED: &[&str] = &[];

/// `net.tcp_only`: the network policy is enforced by Landlock's TCP rules in the host's network
/// (`--net connect=`/`bind=`, or `none` without a network namespace). Landlock has no rule for
/// UDP, raw sockets, other protocols over IP (SCTP, MPTCP) or other families (SMC connects
/// through a TCP socket of the kernel's own), nor for TCP Fast Open's connect-on-send, so those
/// are refused here: a DNS query or a datagram to any host would otherwise leave freely.
/// `shared_host`: no pid and IPC namespace of the jail's own (no mount view): calls that name
/// another process by pid, and SysV/POSIX IPC, reach the host's.
pub fn compile(policy: &Policy, net: NetFilter, shared_host: bool) -> SeccompPlan {
    let mut deny: Vec<Deny> = ALWAYS_DENIED
        .iter()
        .chain(X86_ONLY_DENIED)
        .map(|s| Deny {
            syscall: s,
            when: When::Always,
        })
        .collect();
    deny.push(Deny {
        syscall: "file_setattr",
        when: When::Always,
    });
    deny.extend(set_id_modes());
    if shared_host {
        deny.extend(host_processes_and_ipc());
    }
    for request in [TIOCSTI, TIOCLINUX].into_iter().chain(INODE_ATTR_IOCTLS) {
        deny.push(Deny {
            syscall: "ioctl",
            when: When::ArgMasked {
                arg: 1,
                mask: u32::MAX,
                value: request,
            },
        });
    }
    if !policy.allow_userns {
        deny.extend(MOUNT_FAMILY.iter().map(|s| Deny {
            syscall: s,
            when: When::Always,
        }));
        for call in ["clone", "unshare"] {
            deny.push(Deny {
                syscall: call,
                when: When::ArgMasked {
                    arg: 0,
                    mask: CLONE_NEWUSER,
                    value: CLONE_NEWUSER,
                },
            });
        }
    }
    // vsock reaches the hypervisor's host directly, around any network policy: no agent needs it.
    deny.push(Deny {
        syscall: "socket",
        when: When::ArgMasked {
            arg: 0,
            mask: u32::MAX,
            value: AF_VSOCK,
        },
    });
    if !policy.allow_unix_sockets {
        // A filesystem socket's connect() is confined by no layer on this kernel class (Landlock
        // before ABI 9 has no right for it, a read-only mount does not stop it, seccomp cannot
        // see the path): refuse creating AF_UNIX sockets; stream socketpairs stay allowed.
        deny.push(Deny {
            syscall: "socket",
            when: When::ArgMasked {
                arg: 0,
                mask: u32::MAX,
                value: AF_UNIX,
            },
        });
    } else {
        // Allowed unix sockets are mediated by the supervisor at connect() (unix_connect.rs),
        // but a datagram socket sends to any path with sendto()/sendmsg(), whose address the
        // filter cannot read: only stream and seqpacket unix sockets.
        deny.extend(unix_datagram_sockets("socket"));
    }
    // A datagram pair sends to any path as well (sendto() on a connected datagram socket names
    // another peer), in every jail.
    deny.extend(unix_datagram_sockets("socketpair"));
    if refuses_landlock(policy) {
        deny.push(Deny {
            syscall: "landlock_restrict_self",
            when: When::Always,
        });
    }
    if net.tcp_only {
        deny.extend(non_tcp_inet_sockets());
    }
    if net.no_listen {
        deny.push(Deny {
            syscall: "listen",
            when: When::Always,
        });
    }
    SeccompPlan {
        arch: std::env::consts::ARCH,
        deny,
        enosys: vec!["clone3", "openat2"],
        reject_x32: cfg!(target_arch = "x86_64"),
    }
}

/// Whether the filter refuses `landlock_restrict_self`: with mediated unix sockets. The
/// connector makes every connect in the jail's Landlock domain; a nested domain's TCP port
/// rules and abstract-socket scope would not be the connector's, so none is made. Otherwise the
/// filter refuses nothing that applying Landlock needs (openat, fstat, landlock_add_rule,
/// landlock_restrict_self, prctl, close), and the command may load it first.
pub fn refuses_landlock(policy: &Policy) -> bool {
    policy.allow_unix_sockets
}

/// S_ISUID and S_ISGID.
const SET_ID_BITS: [u32; 2] = [0o4000, 0o2000];

/// Setuid and setgid modes, given by chmod or at creation: a file the command makes so in a
/// writable tree is a setuid program on the host (the view's nosuid holds only inside), and at
/// the partial level root owns most read-only files. openat2 passes its mode in memory the
/// filter cannot read: it answers ENOSYS (see [`compile`]'s `enosys`), as clone3 does.
fn set_id_modes() -> Vec<Deny> {
    // (call, argument holding the mode); the calls without an `at` exist on x86_64 only.
    let mut calls = vec![
        ("fchmod", 1),
        ("fchmodat", 2),
        ("fchmodat2", 2),
        ("openat", 3),
        ("mknodat", 2),
    ];
    if cfg!(target_arch = "x86_64") {
        calls.extend([("chmod", 1), ("open", 2), ("creat", 1), ("mknod", 1)]);
    }
    let mut out = Vec::new();
    for (call, arg) in calls {
        for bit in SET_ID_BITS {
            out.push(Deny {
                syscall: call,
                when: When::ArgMasked {
                    arg,
                    mask: bit,
                    value: bit,
                },
            });
        }
    }
    out
}

/// Without a pid and IPC namespace of its own: calls that act on another process by pid (its
/// rlimits, priority, scheduling; Landlock scopes signals only) and SysV/POSIX IPC objects
/// (keyed, shared with every host process of the user) are refused. Each call naming pid 0 or
/// PRIO_PROCESS/IOPRIO_WHO_PROCESS of 0 acts on the caller and stays.
fn host_processes_and_ipc() -> Vec<Deny> {
    let not_zero = |arg| Cond {
        arg,
        mask: u32::MAX,
        value: 0,
        ne: true,
    };
    let mut out = Vec::new();
    for call in [
        "prlimit64",
        "sched_setaffinity",
        "sched_setscheduler",
        "sched_setparam",
        "sched_setattr",
    ] {
        out.push(Deny {
            syscall: call,
            when: When::All(vec![not_zero(0)]),
        });
    }
    // setpriority(which, who, …): PRIO_PROCESS is 0; PRIO_PGRP and PRIO_USER reach others.
    for arg in [0, 1] {
        out.push(Deny {
            syscall: "setpriority",
            when: When::All(vec![not_zero(arg)]),
        });
    }
    // ioprio_set(which, who, …): IOPRIO_WHO_PROCESS is 1.
    out.push(Deny {
        syscall: "ioprio_set",
        when: When::All(vec![Cond {
            arg: 0,
            mask: u32::MAX,
            value: 1,
            ne: true,
        }]),
    });
    out.push(Deny {
        syscall: "ioprio_set",
        when: When::All(vec![not_zero(1)]),
    });
    out.extend(
        [
            "shmget",
            "shmat",
            "shmctl",
            "msgget",
            "msgsnd",
            "msgrcv",
            "msgctl",
            "semget",
            "semop",
            "semtimedop",
            "semctl",
            "mq_open",
            "mq_unlink",
            "mq_timedsend",
            "mq_timedreceive",
            "mq_notify",
            "mq_getsetattr",
        ]
        .into_iter()
        .map(|syscall| Deny {
            syscall,
            when: When::Always,
        }),
    );
    out
}

/// `call` (socket or socketpair) making an AF_UNIX socket of any type but stream and seqpacket:
/// the kernel makes a datagram socket of SOCK_DGRAM and of SOCK_RAW alike. Every type is listed
/// (seccomp has no masked "not equal"), so that the flag bits of the argument do not matter.
fn unix_datagram_sockets(call: &'static str) -> impl Iterator<Item = Deny> {
    (0..=SOCK_TYPE_MASK)
        .filter(|t| *t != SOCK_STREAM && *t != SOCK_SEQPACKET)
        .map(move |ty| Deny {
            syscall: call,
            when: When::All(vec![
                Cond {
                    arg: 0,
                    mask: u32::MAX,
                    value: AF_UNIX,
                    ne: false,
                },
                Cond {
                    arg: 1,
                    mask: SOCK_TYPE_MASK,
                    value: ty,
                    ne: false,
                },
            ]),
        })
}

/// socket() calls that make anything but a TCP socket over IPv4 or IPv6 (unix sockets have their
/// own rule, netlink ones stay: name lookups ask the kernel's routing tables), and sends that
/// connect with TCP Fast Open.
fn non_tcp_inet_sockets() -> Vec<Deny> {
    let family = |value| Cond {
        arg: 0,
        mask: u32::MAX,
        value,
        ne: false,
    };
    let not_family = |value| Cond {
        arg: 0,
        mask: u32::MAX,
        value,
        ne: true,
    };
    // Every family but these four: an allow-list, so that families this kernel may not even
    // have (AF_SMC, AF_RDS, AF_TIPC) are covered too.
    let mut out = vec![Deny {
        syscall: "socket",
        when: When::All(
            [AF_UNIX, AF_INET, AF_INET6, AF_NETLINK]
                .into_iter()
                .map(not_family)
                .collect(),
        ),
    }];
    for (call, flags_arg) in [("sendto", 3), ("sendmsg", 2), ("sendmmsg", 3)] {
        out.push(Deny {
            syscall: call,
            when: When::ArgMasked {
                arg: flags_arg,
                mask: MSG_FASTOPEN,
                value: MSG_FASTOPEN,
            },
        });
    }
    for fam in [AF_INET, AF_INET6] {
        // Every type but SOCK_STREAM (seccomp has no masked "not equal": list them).
        for ty in (0..=SOCK_TYPE_MASK).filter(|t| *t != SOCK_STREAM) {
            out.push(Deny {
                syscall: "socket",
                when: When::All(vec![
                    family(fam),
                    Cond {
                        arg: 1,
                        mask: SOCK_TYPE_MASK,
                        value: ty,
                        ne: false,
                    },
                ]),
            });
        }
        // A stream socket of another protocol (SCTP, MPTCP): Landlock's TCP rules miss it.
        out.push(Deny {
            syscall: "socket",
            when: When::All(vec![
                family(fam),
                Cond {
                    arg: 2,
                    mask: u32::MAX,
                    value: 0,
                    ne: true,
                },
                Cond {
                    arg: 2,
                    mask: u32::MAX,
                    value: IPPROTO_TCP,
                    ne: true,
                },
            ]),
        });
    }
    out
}

/// The syscall number of `name` on the architecture jail was built for.
pub fn syscall_number(name: &str) -> Option<i64> {
    // The table is matched on "SYS_<name>", the libc constant's own name.
    macro_rules! table {
        ($key:expr; $($n:ident),* $(,)?) => {
            match $key {
                $(stringify!($n) => Some(libc::$n as i64),)*
                _ => None,
            }
        };
    }
    match name {
        "file_setattr" => return Some(SYS_FILE_SETATTR),
        "fchmodat2" => return Some(SYS_FCHMODAT2),
        "kexec_file_load" => return Some(SYS_KEXEC_FILE_LOAD),
        _ => {}
    }
    let key = format!("SYS_{name}");
    #[cfg(target_arch = "x86_64")]
    if let Some(n) = table!(key.as_str(); SYS_iopl, SYS_ioperm, SYS_uselib, SYS_chmod, SYS_open,
        SYS_creat, SYS_mknod)
    {
        return Some(n);
    }
    table!(key.as_str();
        SYS_ptrace,
        SYS_process_vm_readv,
        SYS_process_vm_writev,
        SYS_pidfd_getfd,
        SYS_process_madvise,
        SYS_kexec_load,
        SYS_reboot,
        SYS_init_module,
        SYS_finit_module,
        SYS_delete_module,
        SYS_swapon,
        SYS_swapoff,
        SYS_acct,
        SYS_quotactl,
        SYS_syslog,
        SYS_settimeofday,
        SYS_clock_settime,
        SYS_clock_adjtime,
        SYS_vhangup,
        SYS_bpf,
        SYS_perf_event_open,
        SYS_userfaultfd,
        SYS_io_uring_setup,
        SYS_io_uring_enter,
        SYS_io_uring_register,
        SYS_keyctl,
        SYS_add_key,
        SYS_request_key,
        SYS_open_by_handle_at,
        SYS_mount,
        SYS_umount2,
        SYS_pivot_root,
        SYS_fsopen,
        SYS_fsconfig,
        SYS_fsmount,
        SYS_fspick,
        SYS_move_mount,
        SYS_open_tree,
        SYS_mount_setattr,
        SYS_setns,
        SYS_clone,
        SYS_clone3,
        SYS_unshare,
        SYS_ioctl,
        SYS_socket,
        SYS_socketpair,
        SYS_fchmod,
        SYS_fchmodat,
        SYS_openat,
        SYS_openat2,
        SYS_mknodat,
        SYS_prlimit64,
        SYS_sched_setaffinity,
        SYS_sched_setscheduler,
        SYS_sched_setparam,
        SYS_sched_setattr,
        SYS_setpriority,
        SYS_ioprio_set,
        SYS_shmget,
        SYS_shmat,
        SYS_shmctl,
        SYS_msgget,
        SYS_msgsnd,
        SYS_msgrcv,
        SYS_msgctl,
        SYS_semget,
        SYS_semop,
        SYS_semtimedop,
        SYS_semctl,
        SYS_mq_open,
        SYS_mq_unlink,
        SYS_mq_timedsend,
        SYS_mq_timedreceive,
        SYS_mq_notify,
        SYS_mq_getsetattr,
        SYS_landlock_restrict_self,
        SYS_sendto,
        SYS_sendmsg,
        SYS_sendmmsg,
        SYS_listen,
    )
}

/// Builds the BPF program for the running architecture: the prelude, then a search tree over
/// the refused numbers ([`super::bpf_tree`]).
pub fn build(plan: &SeccompPlan) -> Result<Vec<seccompiler::sock_filter>, JailError> {
    let err = |step: &str, e: &dyn std::fmt::Display| JailError::layer("seccomp", step, e);
    let mut refused: BTreeMap<u32, Refusal> = BTreeMap::new();
    for deny in &plan.deny {
        let nr = syscall_number(deny.syscall).ok_or_else(|| {
            err(
                "syscall table",
                &format!("unknown syscall {}", deny.syscall),
            )
        })? as u32;
        let conds = deny.when.conditions();
        // Refused always wins over any condition the same syscall also has.
        match (
            refused.entry(nr).or_insert(Refusal::AnyOf(Vec::new())),
            conds,
        ) {
            (entry, None) => *entry = Refusal::Always,
            (Refusal::AnyOf(rules), Some(conds)) => rules.push(conds),
            (Refusal::Always, Some(_)) => {}
        }
    }
    let refuse = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    let body = super::bpf_tree::compile(&refused, refuse, libc::SECCOMP_RET_ALLOW)
        .map_err(|e| err("compile", &e))?;
    let mut program = prelude(plan)?;
    program.extend(body);
    Ok(program)
}

/// Hand-written head of the program: architecture check, x32 refusal, ENOSYS answers. seccompiler
/// has no way to say "number >= X", which the x32 check needs.
fn prelude(plan: &SeccompPlan) -> Result<Vec<seccompiler::sock_filter>, JailError> {
    use seccompiler::sock_filter;
    const LD_W_ABS: u16 = 0x20; // BPF_LD (0) | BPF_W (0) | BPF_ABS (0x20)
    const JEQ_K: u16 = 0x05 | 0x10; // BPF_JMP | BPF_JEQ | BPF_K
    const JGE_K: u16 = 0x05 | 0x30; // BPF_JMP | BPF_JGE | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const NR_OFFSET: u32 = 0; // offsetof(struct seccomp_data, nr)
    const ARCH_OFFSET: u32 = 4; // offsetof(struct seccomp_data, arch)
    let audit_arch: u32 = match plan.arch {
        "x86_64" => 0xC000_003E,
        "aarch64" => 0xC000_00B7,
        other => {
            return Err(JailError::layer(
                "seccomp",
                "architecture",
                format!("{other} is not supported"),
            ));
        }
    };
    let stmt = |code, k| sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |code, k, jt, jf| sock_filter { code, jt, jf, k };
    let mut p = vec![
        stmt(LD_W_ABS, ARCH_OFFSET),
        jump(JEQ_K, audit_arch, 1, 0),
        stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(LD_W_ABS, NR_OFFSET),
    ];
    if plan.reject_x32 {
        p.push(jump(JGE_K, 0x4000_0000, 0, 1));
        p.push(stmt(RET_K, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32));
    }
    for name in &plan.enosys {
        let nr = syscall_number(name).ok_or_else(|| {
            JailError::layer(
                "seccomp",
                "syscall table",
                format!("unknown syscall {name}"),
            )
        })?;
        p.push(jump(JEQ_K, nr as u32, 0, 1));
        p.push(stmt(RET_K, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32));
    }
    Ok(p)
}

/// Installs the program on the calling thread. no_new_privs must already be set.
pub fn apply(program: &[seccompiler::sock_filter]) -> Result<(), JailError> {
    seccompiler::apply_filter(program).map_err(|e| JailError::layer("seccomp", "install", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Origin, PathRule, TmpMode};

    fn policy(allow_userns: bool, allow_unix: bool) -> Policy {
        Policy {
            rules: vec![PathRule {
                path: "/".into(),
                access: crate::policy::Access::Ro,
                kind: crate::policy::Kind::Dir,
                origin: Origin::Default,
            }],
            profile: "test".into(),
            cwd: "/".into(),
            tmp: TmpMode::Private,
            allow_userns,
            allow_unix_sockets: allow_unix,
            command: vec!["true".into()],
            ..Policy::probe_default()
        }
    }

    fn denies(plan: &SeccompPlan, name: &str) -> bool {
        plan.deny.iter().any(|d| d.syscall == name)
    }

    /// The body as seccompiler compiles it (one comparison after another): the oracle the
    /// search tree must agree with.
    fn seccompiler_program(plan: &SeccompPlan) -> Vec<seccompiler::sock_filter> {
        use seccompiler::{
            SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
            SeccompRule, TargetArch,
        };
        let mut rules: BTreeMap<i64, Option<Vec<SeccompRule>>> = BTreeMap::new();
        for deny in &plan.deny {
            let conds = deny.when.conditions();
            let entry = rules
                .entry(syscall_number(deny.syscall).unwrap())
                .or_insert(Some(Vec::new()));
            match (entry.as_mut(), conds) {
                (_, None) => *entry = None,
                (Some(list), Some(conds)) => {
                    let conds = conds
                        .iter()
                        .map(|c| {
                            let op = match (c.ne, c.mask) {
                                (true, _) => SeccompCmpOp::Ne,
                                (false, u32::MAX) => SeccompCmpOp::Eq,
                                (false, m) => SeccompCmpOp::MaskedEq(m as u64),
                            };
                            SeccompCondition::new(
                                c.arg,
                                SeccompCmpArgLen::Dword,
                                op,
                                c.value as u64,
                            )
                            .unwrap()
                        })
                        .collect();
                    list.push(SeccompRule::new(conds).unwrap());
                }
                (None, Some(_)) => {}
            }
        }
        // seccompiler: an empty rule list refuses the syscall whatever its arguments.
        let rules = rules
            .into_iter()
            .map(|(nr, r)| (nr, r.unwrap_or_default()))
            .collect();
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            TargetArch::try_from(plan.arch).unwrap(),
        )
        .unwrap();
        let body: seccompiler::BpfProgram = filter.try_into().unwrap();
        let mut program = prelude(plan).unwrap();
        program.extend(body);
        program
    }

    /// Every combination, across the arguments any rule of syscall `nr` tests, of values near
    /// each condition on them: a rule that decides only when several arguments hold at once
    /// (`socket(AF_INET, SOCK_STREAM, 132)`, which no type or family rule refuses) is tried.
    fn rule_combinations(plan: &SeccompPlan, nr: u32) -> Vec<[u64; 6]> {
        let mut per_arg: BTreeMap<u8, Vec<u32>> = BTreeMap::new();
        for d in plan.deny.iter() {
            if syscall_number(d.syscall) != Some(nr as i64) {
                continue;
            }
            let Some(conds) = d.when.conditions() else {
                continue;
            };
            for c in &conds {
                let near = [
                    c.value,
                    c.value ^ 1,
                    c.value.wrapping_add(1),
                    c.value.wrapping_sub(1),
                    c.value | !c.mask,
                    c.mask,
                    0,
                ];
                per_arg.entry(c.arg).or_default().extend(near);
            }
        }
        let mut combos = vec![[0u64; 6]];
        for (&arg, list) in per_arg.iter_mut() {
            list.sort_unstable();
            list.dedup();
            combos = combos
                .iter()
                .flat_map(|base| {
                    list.iter().map(move |&v| {
                        let mut next = *base;
                        next[arg as usize] = v as u64;
                        next
                    })
                })
                .collect();
        }
        combos
    }

    /// Every plan jail makes, every syscall number (and x32's, and past the table), with
    /// arguments made from each condition's own values (equal, one off, other bits set, the
    /// high half set): the tree and seccompiler's chain give the same answer.
    #[test]
    fn search_tree_decides_as_seccompilers_chain_on_every_plan() {
        use super::super::bpf_tree::tests::run;
        let arch = match std::env::consts::ARCH {
            "x86_64" => 0xC000_003E,
            _ => 0xC000_00B7,
        };
        let mut plans = Vec::new();
        for (userns, unix) in [(false, false), (true, false), (false, true), (true, true)] {
            for tcp_only in [false, true] {
                for no_listen in [false, true] {
                    for shared_host in [false, true] {
                        let net = NetFilter {
                            tcp_only,
                            no_listen,
                        };
                        plans.push(compile(&policy(userns, unix), net, shared_host));
                    }
                }
            }
        }
        let mut values: Vec<u32> = vec![0, 1, u32::MAX];
        for plan in &plans {
            for d in &plan.deny {
                let conds = d.when.conditions().unwrap_or_default();
                for c in conds {
                    for v in [
                        c.value,
                        c.value ^ 1,
                        c.value | !c.mask,
                        c.value & c.mask,
                        c.mask,
                    ] {
                        values.extend([v, v.wrapping_add(1), v.wrapping_sub(1)]);
                    }
                }
            }
        }
        values.sort_unstable();
        values.dedup();
        let mut checked = 0u64;
        for plan in &plans {
            let tree = build(plan).unwrap();
            let chain = seccompiler_program(plan);
            assert!(
                tree.len() < chain.len(),
                "{} vs {}",
                tree.len(),
                chain.len()
            );
            let numbers = (0..600u32).chain([0x4000_0000, 0x4000_0101, u32::MAX]);
            for nr in numbers {
                let refusable = plan
                    .deny
                    .iter()
                    .any(|d| syscall_number(d.syscall) == Some(nr as i64));
                let arg_sets: Vec<[u64; 6]> = if refusable {
                    (0..6)
                        .flat_map(|i| {
                            values.iter().flat_map(move |&v| {
                                let mut lo = [0u64; 6];
                                lo[i] = v as u64;
                                let mut hi = lo;
                                hi[i] |= 0xdead_0000_0000_0000;
                                [lo, hi]
                            })
                        })
                        .chain(values.iter().map(|&v| [v as u64; 6]))
                        .chain(rule_combinations(plan, nr))
                        .collect()
                } else {
                    vec![[0; 6], [u64::MAX; 6]]
                };
                for args in arg_sets {
                    for a in [arch, 0x4000_0003] {
                        assert_eq!(
                            run(&tree, nr, a, args),
                            run(&chain, nr, a, args),
                            "nr {nr} arch {a:#x} args {args:x?}"
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 100_000, "{checked}");
    }

    #[test]
    fn every_named_syscall_resolves_on_this_architecture() {
        let plan = compile(&policy(false, false), NetFilter::default(), false);
        for d in &plan.deny {
            assert!(syscall_number(d.syscall).is_some(), "{}", d.syscall);
        }
        assert!(build(&plan).unwrap().len() > 40);
    }

    #[test]
    fn numbers_jail_names_itself_match_glibcs() {
        // The constants kept here for musl (which lacks them) must be the kernel's numbers.
        #[cfg(target_env = "gnu")]
        assert_eq!(
            syscall_number("kexec_file_load"),
            Some(libc::SYS_kexec_file_load)
        );
        assert!(syscall_number("kexec_file_load").is_some());
    }

    #[test]
    fn userns_and_unix_sockets_are_refused_unless_allowed() {
        let strict = compile(&policy(false, false), NetFilter::default(), false);
        assert!(
            denies(&strict, "mount") && denies(&strict, "unshare") && denies(&strict, "socket")
        );
        let open = compile(&policy(true, true), NetFilter::default(), false);
        assert!(!denies(&open, "mount") && !denies(&open, "unshare"));
        let socket_families = |p: &SeccompPlan| -> Vec<u32> {
            p.deny
                .iter()
                .filter_map(|d| match (d.syscall, &d.when) {
                    ("socket", When::ArgMasked { value, .. }) => Some(*value),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(socket_families(&strict), [AF_VSOCK, AF_UNIX]);
        assert_eq!(socket_families(&open), [AF_VSOCK], "vsock stays refused");
        assert!(denies(&open, "ptrace") && denies(&open, "io_uring_setup"));
        assert_eq!(open.enosys, ["clone3", "openat2"]);
    }

    #[test]
    fn terminal_injection_ioctls_are_matched_on_the_low_32_bits() {
        let plan = compile(&policy(false, false), NetFilter::default(), false);
        let ioctls: Vec<_> = plan.deny.iter().filter(|d| d.syscall == "ioctl").collect();
        assert_eq!(ioctls.len(), 2 + INODE_ATTR_IOCTLS.len());
        for d in ioctls {
            assert!(matches!(
                d.when,
                When::ArgMasked {
                    arg: 1,
                    mask: u32::MAX,
                    ..
                }
            ));
        }
    }

    /// aarch64 uses the generic syscall table: every name the filter refuses there (all but the
    /// x86-only ones) must exist in it, or the aarch64 build would not compile or would miss a
    /// call. Checked against the kernel headers' asm-generic table when they are installed.
    #[test]
    fn every_refused_syscall_exists_in_the_generic_table_used_by_aarch64() {
        let Ok(table) = std::fs::read_to_string("/usr/include/asm-generic/unistd.h") else {
            eprintln!("skipping: no /usr/include/asm-generic/unistd.h");
            return;
        };
        let generic: std::collections::BTreeSet<&str> = table
            .lines()
            .filter_map(|l| l.strip_prefix("#define __NR_"))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        let names = ALWAYS_DENIED
            .iter()
            .chain(MOUNT_FAMILY)
            .chain(["clone", "clone3", "unshare", "ioctl", "socket"].iter());
        for name in names {
            assert!(
                generic.contains(name),
                "{name} is not in the generic (aarch64) table"
            );
        }
        for name in ["iopl", "ioperm", "uselib"] {
            assert!(
                !generic.contains(name),
                "{name} is x86-only and must stay cfg-gated"
            );
        }
    }

    #[test]
    fn prelude_checks_arch_first() {
        let plan = compile(&policy(false, false), NetFilter::default(), false);
        let p = prelude(&plan).unwrap();
        assert_eq!(p[0].k, 4, "loads seccomp_data.arch");
        assert_eq!(p[2].k, libc::SECCOMP_RET_KILL_PROCESS);
    }

    #[test]
    fn set_id_modes_are_refused_everywhere_and_host_calls_without_namespaces() {
        let plan = compile(&policy(false, false), NetFilter::default(), false);
        for call in ["fchmod", "fchmodat", "fchmodat2", "openat", "mknodat"] {
            assert!(
                plan.deny.iter().any(|d| d.syscall == call
                    && d.when
                        == When::ArgMasked {
                            arg: if call == "fchmod" {
                                1
                            } else if call == "openat" {
                                3
                            } else {
                                2
                            },
                            mask: 0o4000,
                            value: 0o4000
                        }),
                "{call}"
            );
        }
        assert!(plan.enosys.contains(&"openat2"));
        assert!(
            !plan
                .deny
                .iter()
                .any(|d| d.syscall == "shmget" || d.syscall == "prlimit64")
        );
        let shared = compile(&policy(false, false), NetFilter::default(), true);
        for call in [
            "shmget",
            "shmat",
            "msgget",
            "semget",
            "mq_open",
            "prlimit64",
            "setpriority",
        ] {
            assert!(shared.deny.iter().any(|d| d.syscall == call), "{call}");
        }
        build(&shared).expect("every call is in the syscall table");
    }
}
