//! The accesses Landlock refused during a run, read from the kernel's audit records, for
//! `--report`. [`parse_record`] and the event assembly are pure and unit-tested; [`open`] and the
//! reader thread are the only places with syscalls.
//!
//! # What the kernel does (measured on Linux 6.18, Landlock ABI 7, CONFIG_AUDIT=y)
//!
//! Record texts, as they arrive on the netlink socket (the netlink message type is the record
//! type; the text starts with `audit(SECONDS.MILLIS:SERIAL): `):
//!
//! ```text
//! 1423 audit(1796051860.336:97): domain=1ef4c3257 blockers=fs.make_reg path="/tmp/llx" dev="vda" ino=10010814
//! 1424 audit(1796051860.336:97): domain=1ef4c3257 status=allocated mode=enforcing pid=21469 uid=0 exe="/var/tmp/auditexp/ll" comm="ll"
//! 1300 audit(1796051860.336:97): arch=c000003e syscall=257 success=no exit=-13 ... ppid=21445 pid=21469 auid=4294967295 uid=0 ... comm="sh" exe="/usr/bin/dash" key=(null)
//! 1327 audit(1796051860.336:97): proctitle=7368002D63...
//! 1320 audit(1796051860.336:97):
//! 1424 audit(1796051860.388:99): domain=1ef4c3257 status=deallocated denials=2
//! ```
//!
//! - `AUDIT_LANDLOCK_ACCESS` (1423) carries `domain=` (hex id), `blockers=` (the refused rights,
//!   comma-separated: `fs.write_file`, `fs.make_reg`, `fs.read_dir`, a rename lists many:
//!   `fs.write_file,fs.read_dir,...,fs.refer,fs.truncate`) and the object: `path= dev= ino=` for
//!   the filesystem, `saddr=127.0.0.1 src=4567` (`net.bind_tcp`), `daddr=::1 dest=22`
//!   (`net.connect_tcp`), `opid=24819 ocomm="sleep"` (`scope.signal`, `ptrace`),
//!   `path=00616273206E616D65` (`scope.abstract_unix_socket`, the name with its leading NUL).
//!   It has NO pid/comm/exe: those are in the `AUDIT_SYSCALL` (1300) record of the same event
//!   (same serial), which follows at syscall exit, then `PROCTITLE` (1327) and `EOE` (1320).
//!   A task without an audit context (audit enabled after it was forked, or an `-a never,task`
//!   rule, as Fedora's default rules have: kernel source, not tested here) gets no 1300/1320
//!   records: then pid and comm are unknown.
//! - For a file that does not exist yet (`fs.make_reg`, `fs.make_dir`, ...), `path=` is the
//!   directory it would be created in, not the file: `echo x > /tmp/llx/f` logs `path="/tmp/llx"`.
//!   A write to an existing file logs the file itself.
//! - `AUDIT_LANDLOCK_DOMAIN` (1424) `status=allocated` is emitted lazily, once per domain, in the
//!   same event as (right after) the first logged denial of that domain. `pid=` (host pid, also
//!   from inside a pid namespace), `uid=`, `exe=`, `comm=` describe the task that called
//!   `landlock_restrict_self`, as it was then (before its execve). `status=deallocated denials=N`
//!   comes as an event of its own when the last process of the domain is gone (~50 ms after
//!   exit); N counts every denial of the domain, also those the kernel failed to log (seen:
//!   `denials=20000` with half the records lost; and, per the kernel source, unlogged ones), and
//!   is only sent for a domain whose allocation was logged.
//! - The denial is attributed to the youngest domain that refused: a nested domain the sandboxed
//!   program makes itself is reported under its own id and creator (and not at all if jail's
//!   domain was enforced with `LOG_SUBDOMAINS_OFF`).
//! - Untrusted strings (`path`, `comm`, `exe`, `ocomm`) holding a space, a `"` or a byte outside
//!   0x21..0x7e are written as unquoted upper-case hex: `comm=6120622263` is `a b"c`,
//!   `path=2F746D702F6C6C782F64206920722F657820697374` is `/tmp/llx/d i r/ex ist`.
//! - Records only exist while audit is enabled (`AUDIT_GET` `enabled` = 1, or 2 when locked);
//!   with `enabled=0` nothing at all is sent. No auditd is needed: records are multicast to
//!   `AUDIT_NLGRP_READLOG` (1) on a `NETLINK_AUDIT` socket, and (with no auditd) also printed to
//!   the kernel log, one dmesg line per record.
//! - Binding to that group needs `CAP_AUDIT_READ` in the initial user namespace: EPERM for an
//!   ordinary user and for root of a user namespace. `AUDIT_GET` needs `CAP_AUDIT_CONTROL`
//!   (EPERM; ECONNREFUSED from a user namespace). The bind itself logs an
//!   `AUDIT_EVENT_LISTENER` (1335) record `nl-mcgrp=1 op=connect res=1`.
//! - Multicast records only reach sockets of the initial network namespace: a socket opened in
//!   another one (`unshare -n`) binds fine and receives nothing.
//! - By default Landlock logs only denials of the process that enforced the ruleset until it
//!   execs (`log_same_exec` on, `log_new_exec` off): with jail's ruleset enforced just before
//!   execve, nothing the command does is logged unless `landlock_restrict_self` gets
//!   `LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON` (2). With the landlock crate 0.4.8:
//!   `ruleset.create()?.log_new_exec(true)?.restrict_self()?` (trait `RulesetCreatedAttr`; on a
//!   `&mut RulesetCreated`: `created.as_mut().log_new_exec(true)?`). Under
//!   `CompatLevel::HardRequirement` this fails below ABI 7; `RestrictionStatus::log_new_exec` tells
//!   whether it was set. The flag makes every later denial of the tree go to the host's audit log
//!   (and dmesg without auditd), so set it only when a report was asked for and [`open`]
//!   succeeded.
//! - Bursts overflow the kernel's own audit queue (`backlog_limit`, 64 by default; Landlock logs
//!   with GFP_ATOMIC, so it never waits for room): 2000 to 20000 denials in 40-400 ms lost from
//!   0 to 95% of the records, exactly as many as AUDIT_GET's `lost` counter grew, while the 8 MiB
//!   socket buffer here never overflowed (no ENOBUFS). `auditctl -b 8192` (machine-wide, not
//!   jail's to change) makes room. Both the `lost` counter and the deallocation record's
//!   `denials=` reveal the loss: see [`Denials`].
//! - A write on a read-only mount (`mount -o remount,ro,bind` or `mount_setattr
//!   MOUNT_ATTR_RDONLY`, as root or in `unshare -rm`) inside a domain that also forbids it fails
//!   with EROFS and logs NO Landlock record: the VFS checks the mount (`mnt_want_write`) before
//!   the Landlock hooks, for open-for-write, O_TRUNC, create, mkdir, unlink and utimes alike.
//!   Likewise a DAC refusal (EACCES from file modes) comes first and logs nothing. So denials
//!   jail's read-only mount view stops never appear in the report.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

/// A Landlock denial (`blockers=`, the object, the domain).
pub const AUDIT_LANDLOCK_ACCESS: u16 = 1423;
/// A Landlock domain's creation (`status=allocated`, creator) or end (`status=deallocated`).
pub const AUDIT_LANDLOCK_DOMAIN: u16 = 1424;
const AUDIT_SYSCALL: u16 = 1300;
const AUDIT_EOE: u16 = 1320;
const AUDIT_GET: u16 = 1000;
#[cfg(any(test, feature = "test-hooks"))]
const AUDIT_SET: u16 = 1001;
#[cfg(any(test, feature = "test-hooks"))]
const AUDIT_STATUS_ENABLED: u32 = 1;
const AUDIT_NLGRP_READLOG: u32 = 1;

/// Denials kept in full; the rest are only counted.
const KEEP: usize = 1000;
/// After `finish`, reading stops once nothing arrived for this long...
const QUIET: Duration = Duration::from_millis(100);
/// ...or this long after `finish`, whichever comes first.
const DRAIN_MAX: Duration = Duration::from_millis(160);
/// Longest wait of the reader for the socket, so that a stop request is seen quickly.
const POLL_MS: libc::c_int = 20;
/// Messages read in one go before checking for a stop request again.
const BATCH: usize = 256;
/// An event whose end-of-event record never came (no syscall context) is closed after this.
const EVENT_TIMEOUT: Duration = Duration::from_millis(100);
/// Open events, and closed ones waiting for `set_creator`, held at most.
const PENDING_MAX: usize = 10_000;
/// Domains remembered at most (every logging Landlock user of the machine makes some).
const DOMAINS_MAX: usize = 65_536;
/// Receive buffer asked for, so that a burst of records is not lost (ENOBUFS).
const RCVBUF: libc::c_int = 8 << 20;

/// Why denial records cannot be had, in one line for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One refused access.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Denial {
    /// When, from the record's timestamp (milliseconds since the epoch).
    pub unix_ms: u64,
    /// The refused process (host pid); None when the kernel sent no syscall record.
    pub pid: Option<i32>,
    pub comm: Option<String>,
    pub exe: Option<String>,
    /// The `blockers=` value, e.g. `fs.write_file` or `net.connect_tcp` (comma-separated if many).
    pub operation: String,
    /// The file, or for a creation or removal the directory it happens in.
    pub path: Option<String>,
    /// The other fields of the record: `daddr=::1 dest=22`, `opid=42 ocomm=sleep`, ...
    pub detail: Option<String>,
    /// The Landlock domain id (hex).
    pub domain: String,
}

/// What a run's reader collected.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Denials {
    /// The first 1000 denials, in order.
    pub denials: Vec<Denial>,
    /// All denials received for this run, kept or not.
    pub total: u64,
    /// Some records were lost (socket overflow, ENOBUFS, or a reader limit), so the list may
    /// miss denials.
    pub dropped_records: bool,
    /// Sum of `denials=` of the run's domains' deallocation records, when they came in time: the
    /// kernel's own count. Higher than `total` means denials were not logged (made before the
    /// execve without `log_same_exec`) or lost.
    pub kernel_count: Option<u64>,
}

/// The time and serial of an audit event, from `audit(SECONDS.MILLIS:SERIAL):`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub unix_ms: u64,
    pub serial: u64,
}

/// The records this module uses, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// 1423.
    Access {
        stamp: Stamp,
        domain: String,
        blockers: String,
        path: Option<String>,
        detail: Option<String>,
    },
    /// 1424 `status=allocated`.
    DomainAllocated {
        stamp: Stamp,
        domain: String,
        creator: i32,
        exe: Option<String>,
        comm: Option<String>,
    },
    /// 1424 `status=deallocated`.
    DomainDeallocated {
        stamp: Stamp,
        domain: String,
        denials: Option<u64>,
    },
    /// 1300: the task an event is about.
    Syscall {
        stamp: Stamp,
        pid: i32,
        comm: Option<String>,
        exe: Option<String>,
    },
    /// 1320: nothing more will come for this serial.
    EndOfEvent { stamp: Stamp },
}

impl Record {
    fn stamp(&self) -> Stamp {
        match self {
            Record::Access { stamp, .. }
            | Record::DomainAllocated { stamp, .. }
            | Record::DomainDeallocated { stamp, .. }
            | Record::Syscall { stamp, .. }
            | Record::EndOfEvent { stamp } => *stamp,
        }
    }
}

/// Parses one record of type `kind`; None for other types and malformed text.
pub fn parse_record(kind: u16, text: &str) -> Option<Record> {
    let text = text.trim_end_matches(['\0', '\n', ' ']);
    let (stamp, rest) = parse_stamp(text)?;
    let fields: Vec<(&str, &str)> = rest
        .split_ascii_whitespace()
        .filter_map(|t| t.split_once('='))
        .collect();
    let get = |key: &str| fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    match kind {
        AUDIT_LANDLOCK_ACCESS => {
            let detail: Vec<String> = fields
                .iter()
                .filter(|(k, _)| !matches!(*k, "domain" | "blockers" | "path" | "dev" | "ino"))
                .map(|(k, v)| match *k {
                    "ocomm" | "name" => format!("{k}={}", untrusted(v).unwrap_or_default()),
                    _ => format!("{k}={v}"),
                })
                .collect();
            Some(Record::Access {
                stamp,
                domain: get("domain")?.to_string(),
                blockers: get("blockers")?.to_string(),
                path: get("path").and_then(untrusted),
                detail: (!detail.is_empty()).then(|| detail.join(" ")),
            })
        }
        AUDIT_LANDLOCK_DOMAIN => {
            let domain = get("domain")?.to_string();
            match get("status")? {
                "allocated" => Some(Record::DomainAllocated {
                    stamp,
                    domain,
                    creator: get("pid")?.parse().ok()?,
                    exe: get("exe").and_then(untrusted),
                    comm: get("comm").and_then(untrusted),
                }),
                "deallocated" => Some(Record::DomainDeallocated {
                    stamp,
                    domain,
                    denials: get("denials").and_then(|v| v.parse().ok()),
                }),
                _ => None,
            }
        }
        AUDIT_SYSCALL => Some(Record::Syscall {
            stamp,
            pid: get("pid")?.parse().ok()?,
            comm: get("comm").and_then(untrusted),
            exe: get("exe").and_then(untrusted),
        }),
        AUDIT_EOE => Some(Record::EndOfEvent { stamp }),
        _ => None,
    }
}

/// `audit(1796051860.336:97): rest` → the stamp and `rest`.
fn parse_stamp(text: &str) -> Option<(Stamp, &str)> {
    let inner = text.strip_prefix("audit(")?;
    let (inner, rest) = inner.split_once("):")?;
    let (time, serial) = inner.split_once(':')?;
    let (secs, millis) = time.split_once('.')?;
    let secs: u64 = secs.parse().ok()?;
    let millis: u64 = millis.get(..3.min(millis.len()))?.parse().ok()?;
    let stamp = Stamp {
        unix_ms: secs.checked_mul(1000)?.checked_add(millis)?,
        serial: serial.parse().ok()?,
    };
    Some((stamp, rest))
}

/// An audit "untrusted string" value: `"quoted"`, hex when it holds a space, a quote or a
/// non-printable byte, `(null)`/`(none)` for nothing. An abstract socket name's NUL shows as `@`.
fn untrusted(value: &str) -> Option<String> {
    if value.is_empty() || value == "(null)" || value == "(none)" {
        return None;
    }
    if let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        return Some(inner.to_string());
    }
    match decode_hex(value) {
        Some(bytes) => {
            let bytes: Vec<u8> = bytes
                .into_iter()
                .map(|b| if b == 0 { b'@' } else { b })
                .collect();
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
        // Neither quoted nor hex: a marker such as `<too_long>` or `?`, kept as it is.
        None => Some(value.to_string()),
    }
}

fn decode_hex(value: &str) -> Option<Vec<u8>> {
    let digits = value.as_bytes();
    if digits.is_empty() || digits.len() % 2 != 0 {
        return None;
    }
    digits
        .chunks(2)
        .map(|pair| {
            let hi = (pair[0] as char).to_digit(16)?;
            let lo = (pair[1] as char).to_digit(16)?;
            Some((hi * 16 + lo) as u8)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Assembling events and keeping this run's denials (pure: time comes in as an argument).

#[derive(Debug, Clone)]
struct Access {
    unix_ms: u64,
    domain: String,
    blockers: String,
    path: Option<String>,
    detail: Option<String>,
}

#[derive(Debug, Clone)]
struct Task {
    pid: i32,
    comm: Option<String>,
    exe: Option<String>,
}

#[derive(Debug)]
struct Event {
    accesses: Vec<Access>,
    task: Option<Task>,
    touched: Instant,
}

/// Groups records by serial into events, and keeps the denials of domains made by the creators.
#[derive(Debug, Default)]
struct Collector {
    creators: HashSet<i32>,
    /// Domain id → the pid that created it.
    domains: HashMap<String, i32>,
    /// Open events by serial (records of one event can be spread over several messages).
    events: BTreeMap<u64, Event>,
    /// Closed events' denials waiting for the first `set_creator`.
    waiting: VecDeque<(Access, Option<Task>)>,
    out: Denials,
}

impl Collector {
    fn feed(&mut self, record: Record, now: Instant) {
        let serial = record.stamp().serial;
        match record {
            Record::DomainAllocated {
                domain, creator, ..
            } => {
                let known = self.creators.contains(&creator);
                if self.domains.len() >= DOMAINS_MAX {
                    let creators = &self.creators;
                    self.domains.retain(|_, c| creators.contains(c));
                }
                if known || (self.creators.is_empty() && self.domains.len() < DOMAINS_MAX) {
                    self.domains.insert(domain, creator);
                }
            }
            Record::DomainDeallocated {
                domain, denials, ..
            } => {
                if self.is_ours(&domain) {
                    if let Some(n) = denials {
                        *self.out.kernel_count.get_or_insert(0) += n;
                    }
                }
            }
            Record::Access {
                stamp,
                domain,
                blockers,
                path,
                detail,
            } => {
                let access = Access {
                    unix_ms: stamp.unix_ms,
                    domain,
                    blockers,
                    path,
                    detail,
                };
                self.event(serial, now).accesses.push(access);
            }
            // The syscall record of an event comes at syscall exit, after the Landlock records of
            // the same serial: without an open event it is about something else.
            Record::Syscall { pid, comm, exe, .. } => {
                if let Some(event) = self.events.get_mut(&serial) {
                    event.task = Some(Task { pid, comm, exe });
                    event.touched = now;
                }
            }
            Record::EndOfEvent { .. } => {
                if let Some(event) = self.events.remove(&serial) {
                    self.close(event);
                }
            }
        }
    }

    fn event(&mut self, serial: u64, now: Instant) -> &mut Event {
        if !self.events.contains_key(&serial) && self.events.len() >= PENDING_MAX {
            if let Some((_, oldest)) = self.events.pop_first() {
                self.close(oldest);
            }
        }
        let event = self.events.entry(serial).or_insert_with(|| Event {
            accesses: Vec::new(),
            task: None,
            touched: now,
        });
        event.touched = now;
        event
    }

    /// Closes the events nothing was added to for [`EVENT_TIMEOUT`] (no end-of-event record).
    fn expire(&mut self, now: Instant) {
        let stale: Vec<u64> = self
            .events
            .iter()
            .filter(|(_, e)| now.saturating_duration_since(e.touched) >= EVENT_TIMEOUT)
            .map(|(serial, _)| *serial)
            .collect();
        for serial in stale {
            if let Some(event) = self.events.remove(&serial) {
                self.close(event);
            }
        }
    }

    fn close(&mut self, event: Event) {
        for access in event.accesses {
            if self.creators.is_empty() {
                if self.waiting.len() >= PENDING_MAX {
                    self.waiting.pop_front();
                    self.out.dropped_records = true;
                }
                self.waiting.push_back((access, event.task.clone()));
            } else {
                self.keep(access, event.task.as_ref());
            }
        }
    }

    fn is_ours(&self, domain: &str) -> bool {
        self.domains
            .get(domain)
            .is_some_and(|c| self.creators.contains(c))
    }

    fn keep(&mut self, access: Access, task: Option<&Task>) {
        if !self.is_ours(&access.domain) {
            return;
        }
        self.out.total += 1;
        if self.out.denials.len() < KEEP {
            self.out.denials.push(Denial {
                unix_ms: access.unix_ms,
                pid: task.map(|t| t.pid),
                comm: task.and_then(|t| t.comm.clone()),
                exe: task.and_then(|t| t.exe.clone()),
                operation: access.blockers,
                path: access.path,
                detail: access.detail,
                domain: access.domain,
            });
        }
    }

    fn set_creator(&mut self, pid: i32) {
        self.creators.insert(pid);
        let creators = &self.creators;
        self.domains.retain(|_, c| creators.contains(c));
        while let Some((access, task)) = self.waiting.pop_front() {
            self.keep(access, task.as_ref());
        }
    }

    fn lost(&mut self) {
        self.out.dropped_records = true;
    }

    fn finish(mut self) -> Denials {
        while let Some((_, event)) = self.events.pop_first() {
            self.close(event);
        }
        // With no creator ever named, nothing can be told to be this run's.
        self.out
    }
}

// ---------------------------------------------------------------------------------------------
// The netlink socket and the reader thread.

/// The audit multicast socket, bound before the child starts so no record is missed; records
/// queue in its buffer until [`AuditStream::start`].
#[derive(Debug)]
pub struct AuditStream {
    fd: OwnedFd,
    /// The kernel's count of records it dropped (`lost`), when it could be read.
    lost_at_open: Option<u32>,
}

/// Opens the audit record stream, or says why it cannot be had. `landlock_abi` is the kernel's
/// Landlock ABI (`sys::landlock_abi()`).
pub fn open(landlock_abi: u32) -> Result<AuditStream, Unavailable> {
    let no = |s: String| Err(Unavailable(s));
    if landlock_abi < 7 {
        return no(format!(
            "kernel has no Landlock audit (Landlock ABI {landlock_abi} < 7, needs Linux 6.15)"
        ));
    }
    let status = audit_status(Duration::from_secs(1));
    match &status {
        Ok(s) if s.enabled == 0 => return no("kernel audit is disabled (auditctl -e 1)".into()),
        Err(e) if e.raw_os_error() == Some(libc::EPROTONOSUPPORT) => {
            return no("kernel built without audit (CONFIG_AUDIT)".into());
        }
        // EPERM without CAP_AUDIT_CONTROL, ECONNREFUSED in a user namespace: cannot tell; the
        // bind below decides.
        Ok(_) | Err(_) => {}
    }
    let fd = netlink_socket().map_err(|e| Unavailable(format!("audit netlink socket: {e}")))?;
    set_rcvbuf(&fd);
    // SAFETY: a zeroed sockaddr_nl is valid; the fields are set below.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr.nl_groups = 1 << (AUDIT_NLGRP_READLOG - 1);
    // SAFETY: `addr` is a valid sockaddr_nl of the size given.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&raw const addr).cast(),
            size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EPERM) => {
                no("reading audit records needs CAP_AUDIT_READ (run as root)".into())
            }
            _ => no(format!("audit netlink bind: {e}")),
        };
    }
    if let (Ok(own), Ok(init)) = (
        std::fs::read_link("/proc/self/ns/net"),
        std::fs::read_link("/proc/1/ns/net"),
    ) {
        if own != init {
            return no("audit records are only sent to the initial network namespace".into());
        }
    }
    Ok(AuditStream {
        fd,
        lost_at_open: status.ok().map(|s| s.lost),
    })
}

impl AsFd for AuditStream {
    /// For closing it in children that do not exec (it is close-on-exec).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

struct Shared {
    collector: Mutex<Collector>,
    stop: Mutex<Option<Instant>>,
    abandon: AtomicBool,
}

/// The running reader of one run's records.
pub struct AuditReader {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    lost_at_open: Option<u32>,
}

impl AuditStream {
    /// Starts a background thread that reads and parses records until `finish`. Call it after
    /// forking the child, so the child is forked from a single-threaded process.
    pub fn start(self) -> AuditReader {
        let shared = Arc::new(Shared {
            collector: Mutex::new(Collector::default()),
            stop: Mutex::new(None),
            abandon: AtomicBool::new(false),
        });
        let for_thread = Arc::clone(&shared);
        let (fd, lost_at_open) = (self.fd, self.lost_at_open);
        let thread = std::thread::Builder::new()
            .name("jail-audit".into())
            .spawn(move || read_loop(&fd, &for_thread));
        match thread {
            Ok(handle) => AuditReader {
                shared,
                thread: Some(handle),
                lost_at_open,
            },
            Err(e) => {
                tracing::warn!("audit reader thread: {e}");
                lock(&shared.collector).lost();
                AuditReader {
                    shared,
                    thread: None,
                    lost_at_open,
                }
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl AuditReader {
    /// Tells the reader the host pid of the process that calls `landlock_restrict_self` for this
    /// run (the sandboxed command's own process, before it execs); only domains created by that
    /// pid (and their denials) are kept, so concurrent jails do not mix. May be called after
    /// records arrived (they wait), and more than once (each pid is added).
    pub fn set_creator(&self, pid: i32) {
        lock(&self.shared.collector).set_creator(pid);
    }

    /// Stops reading once nothing arrived for 100 ms (records still in flight), at most ~200 ms
    /// from now, and returns the denials.
    pub fn finish(mut self) -> Denials {
        *lock(&self.shared.stop) = Some(Instant::now());
        if let Some(handle) = self.thread.take() {
            if handle.join().is_err() {
                lock(&self.shared.collector).lost();
            }
        }
        let mut out = std::mem::take(&mut *lock(&self.shared.collector)).finish();
        // The kernel drops records itself when its queue is full (backlog limit, 64 by default,
        // easily reached without auditd, where every record is also printed to the kernel log).
        // The counter is the machine's, so this may also flag records of others.
        if let Some(before) = self.lost_at_open {
            match audit_status(Duration::from_millis(20)) {
                Ok(now) if now.lost == before => {}
                _ => out.dropped_records = true,
            }
        }
        out
    }
}

impl Drop for AuditReader {
    fn drop(&mut self) {
        // Not finished (an error path): let the thread end at its next wake-up, unjoined.
        self.shared.abandon.store(true, Ordering::Relaxed);
    }
}

fn read_loop(fd: &OwnedFd, shared: &Shared) {
    let mut buf = vec![0u8; 1 << 16];
    let mut last_record: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if shared.abandon.load(Ordering::Relaxed) {
            return;
        }
        if let Some(stop) = *lock(&shared.stop) {
            let quiet_since = last_record.map_or(stop, |t| t.max(stop));
            if now >= quiet_since + QUIET || now >= stop + DRAIN_MAX {
                return;
            }
        }
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, POLL_MS) };
        if rc <= 0 {
            lock(&shared.collector).expire(Instant::now());
            continue;
        }
        // A bounded batch, so that a flood of records cannot keep the stop check from running.
        for _ in 0..BATCH {
            let n = recv_now(fd, &mut buf);
            if n < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN) => break,
                    Some(libc::ENOBUFS) => {
                        lock(&shared.collector).lost();
                        continue;
                    }
                    _ => {
                        lock(&shared.collector).lost();
                        // A broken socket: nothing more will come.
                        return;
                    }
                }
            }
            let now = Instant::now();
            last_record = Some(now);
            let mut collector = lock(&shared.collector);
            for (kind, text) in netlink_messages(&buf[..n as usize]) {
                if !matches!(
                    kind,
                    AUDIT_LANDLOCK_ACCESS | AUDIT_LANDLOCK_DOMAIN | AUDIT_SYSCALL | AUDIT_EOE
                ) {
                    continue;
                }
                if let Some(record) = parse_record(kind, &String::from_utf8_lossy(text)) {
                    collector.feed(record, now);
                }
            }
        }
        lock(&shared.collector).expire(Instant::now());
    }
}

/// One datagram without waiting: its length, or -1 with errno set.
fn recv_now(fd: &impl AsRawFd, buf: &mut [u8]) -> isize {
    // SAFETY: `buf` is writable for its whole length.
    unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    }
}

const NLMSG_HDRLEN: usize = size_of::<libc::nlmsghdr>();

/// The (type, payload) of each netlink message in a datagram.
fn netlink_messages(mut data: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while data.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]) as usize;
        let kind = u16::from_ne_bytes([data[4], data[5]]);
        let len = len.clamp(NLMSG_HDRLEN, data.len());
        out.push((kind, &data[NLMSG_HDRLEN..len]));
        let aligned = (len + 3) & !3;
        data = data.get(aligned..).unwrap_or_default();
    }
    out
}

fn netlink_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_AUDIT,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A large receive buffer: SO_RCVBUFFORCE past rmem_max when allowed, else SO_RCVBUF (capped).
fn set_rcvbuf(fd: &OwnedFd) {
    let size: libc::c_int = RCVBUF;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: an int option of the right size.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&raw const size).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return;
        }
    }
}

/// Sends one request to the kernel (port 0) with NLM_F_ACK.
fn netlink_request(fd: RawFd, kind: u16, payload: &[u8]) -> io::Result<()> {
    let mut msg = Vec::with_capacity(NLMSG_HDRLEN + payload.len());
    msg.extend_from_slice(&((NLMSG_HDRLEN + payload.len()) as u32).to_ne_bytes());
    msg.extend_from_slice(&kind.to_ne_bytes());
    msg.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
    msg.extend_from_slice(payload);
    // SAFETY: a zeroed sockaddr_nl (port 0, no groups) addresses the kernel.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: `msg` and `kernel` are valid for the lengths given.
    let rc = unsafe {
        libc::sendto(
            fd,
            msg.as_ptr().cast(),
            msg.len(),
            0,
            (&raw const kernel).cast(),
            size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends `kind` and waits up to `timeout` for its answer: the `audit_status` payload of an
/// AUDIT_GET reply when `want_status`, else only the ack.
fn netlink_call(
    kind: u16,
    payload: &[u8],
    want_status: bool,
    timeout: Duration,
) -> io::Result<Option<Vec<u8>>> {
    let fd = netlink_socket()?;
    let deadline = Instant::now() + timeout;
    netlink_request(fd.as_raw_fd(), kind, payload)?;
    let mut buf = vec![0u8; 8192];
    let mut acked = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no answer from audit",
            ));
        }
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, left.as_millis() as libc::c_int + 1) } <= 0 {
            continue;
        }
        let n = recv_now(&fd, &mut buf);
        if n < 0 {
            let e = io::Error::last_os_error();
            if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN)) {
                continue;
            }
            return Err(e);
        }
        for (msg_kind, body) in netlink_messages(&buf[..n as usize]) {
            if msg_kind == libc::NLMSG_ERROR as u16 && body.len() >= 4 {
                let errno = i32::from_ne_bytes([body[0], body[1], body[2], body[3]]);
                if errno != 0 {
                    return Err(io::Error::from_raw_os_error(-errno));
                }
                acked = true;
            } else if want_status && msg_kind == AUDIT_GET {
                return Ok(Some(body.to_vec()));
            }
        }
        if acked && !want_status {
            return Ok(None);
        }
    }
}

struct Status {
    /// 0 off, 1 on, 2 on and locked.
    enabled: u32,
    /// Records the kernel dropped since boot.
    lost: u32,
}

/// AUDIT_GET. Needs CAP_AUDIT_CONTROL.
fn audit_status(timeout: Duration) -> io::Result<Status> {
    let status = netlink_call(AUDIT_GET, &[], true, timeout)?.unwrap_or_default();
    // struct audit_status { u32 mask, enabled, failure, pid, rate_limit, backlog_limit, lost, ... }
    let field = |i: usize| {
        status
            .get(i * 4..i * 4 + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "short audit status"))
    };
    Ok(Status {
        enabled: field(1)?,
        lost: field(6)?,
    })
}

/// Turns kernel audit on (what `auditctl -e 1` does), for test setups running as root. This
/// changes the whole machine: every Landlock denial that is logged, and with no auditd each
/// record, also lands in the kernel log.
#[cfg(any(test, feature = "test-hooks"))]
pub fn enable_for_tests() -> io::Result<()> {
    let timeout = Duration::from_secs(1);
    if audit_status(timeout)?.enabled != 0 {
        return Ok(());
    }
    // struct audit_status: mask, enabled, then nine more u32 left at 0 (ignored without a mask).
    let mut status = [0u8; 11 * 4];
    status[0..4].copy_from_slice(&AUDIT_STATUS_ENABLED.to_ne_bytes());
    status[4..8].copy_from_slice(&1u32.to_ne_bytes());
    netlink_call(AUDIT_SET, &status, false, timeout)?;
    if audit_status(timeout)?.enabled != 0 {
        Ok(())
    } else {
        Err(io::Error::other("audit still disabled after AUDIT_SET"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured on Linux 6.18 (see the module comment for how).
    const ACCESS_MAKE_REG: &str = r#"audit(1796051860.336:97): domain=1ef4c3257 blockers=fs.make_reg path="/tmp/llx" dev="vda" ino=10010814"#;
    const DOMAIN_ALLOCATED: &str = r#"audit(1796051860.336:97): domain=1ef4c3257 status=allocated mode=enforcing pid=21469 uid=0 exe="/var/tmp/auditexp/ll" comm="ll""#;
    const SYSCALL_SH: &str = r#"audit(1796051860.336:97): arch=c000003e syscall=257 success=no exit=-13 a0=ffffff9c a1=5635abbaea70 a2=241 a3=1b6 items=0 ppid=21445 pid=21469 auid=4294967295 uid=0 gid=0 euid=0 suid=0 fsuid=0 egid=0 sgid=0 fsgid=0 tty=(none) ses=4294967295 comm="sh" exe="/usr/bin/dash" key=(null)"#;
    const EOE: &str = "audit(1796051860.336:97): ";
    const ACCESS_AGAIN: &str = r#"audit(1796051860.336:98): domain=1ef4c3257 blockers=fs.make_reg path="/tmp/llx" dev="vda" ino=10010814"#;
    const SYSCALL_AGAIN: &str = r#"audit(1796051860.336:98): arch=c000003e syscall=257 success=no exit=-13 a0=ffffff9c a1=5635abbaea70 a2=241 a3=1b6 items=0 ppid=21445 pid=21469 auid=4294967295 uid=0 gid=0 euid=0 suid=0 fsuid=0 egid=0 sgid=0 fsgid=0 tty=(none) ses=4294967295 comm="sh" exe="/usr/bin/dash" key=(null)"#;
    const EOE_AGAIN: &str = "audit(1796051860.336:98): ";
    const DEALLOCATED: &str =
        "audit(1796051860.388:99): domain=1ef4c3257 status=deallocated denials=2";
    const ACCESS_HEX_PATH: &str = "audit(1796051898.132:113): domain=1ef4c328f blockers=fs.write_file path=2F746D702F6C6C782F64206920722F657820697374 dev=\"vda\" ino=10010873";
    const SYSCALL_HEX: &str = "audit(1796051924.940:302): arch=c000003e syscall=257 success=no exit=-13 a0=ffffff9c a1=7fe39781e390 a2=80441 a3=1b6 items=0 ppid=23111 pid=23187 auid=4294967295 uid=0 gid=0 euid=0 suid=0 fsuid=0 egid=0 sgid=0 fsgid=0 tty=(none) ses=4294967295 comm=70792074686F6E exe=2F7661722F746D702F61756469746578702F70792074686F6E key=(null)";
    const SYSCALL_HEX_COMM_QUOTE: &str = "audit(1796051924.920:301): arch=c000003e syscall=257 success=no exit=-13 a0=ffffff9c a1=7f389f8d6cf0 a2=80241 a3=1b6 items=0 ppid=23111 pid=23185 auid=4294967295 uid=0 gid=0 euid=0 suid=0 fsuid=0 egid=0 sgid=0 fsgid=0 tty=(none) ses=4294967295 comm=6120622263 exe=\"/usr/bin/python3.11\" key=(null)";
    const ACCESS_BIND: &str = "audit(1796051924.988:304): domain=1ef4c32cb blockers=net.bind_tcp saddr=127.0.0.1 src=4567";
    const ACCESS_CONNECT: &str =
        "audit(1796051924.988:305): domain=1ef4c32cb blockers=net.connect_tcp daddr=::1 dest=22";
    const ACCESS_SIGNAL: &str = r#"audit(1796051925.012:307): domain=1ef4c32ce blockers=scope.signal opid=23190 ocomm="sleep""#;
    const ACCESS_ABSTRACT: &str = "audit(1796051979.072:328): domain=1ef4c3347 blockers=scope.abstract_unix_socket path=00616273206E616D65";
    const ACCESS_RENAME: &str = r#"audit(1796051898.452:290): domain=1ef4c32a5 blockers=fs.write_file,fs.read_dir,fs.remove_dir,fs.remove_file,fs.make_char,fs.make_dir,fs.make_reg,fs.make_sock,fs.make_fifo,fs.make_block,fs.make_sym,fs.refer,fs.truncate path="/tmp/llx" dev="vda" ino=10010814"#;
    const LISTENER: &str = r#"audit(1796051924.444:300): pid=23121 uid=0 auid=4294967295 tty=(none) ses=4294967295 comm="listen" exe="/var/tmp/auditexp/listen" nl-mcgrp=1 op=connect res=1"#;

    fn stamp(unix_ms: u64, serial: u64) -> Stamp {
        Stamp { unix_ms, serial }
    }

    #[test]
    fn parses_a_filesystem_denial() {
        assert_eq!(
            parse_record(1423, ACCESS_MAKE_REG),
            Some(Record::Access {
                stamp: stamp(1_796_051_860_336, 97),
                domain: "1ef4c3257".into(),
                blockers: "fs.make_reg".into(),
                path: Some("/tmp/llx".into()),
                detail: None,
            })
        );
    }

    #[test]
    fn parses_domain_records() {
        assert_eq!(
            parse_record(1424, DOMAIN_ALLOCATED),
            Some(Record::DomainAllocated {
                stamp: stamp(1_796_051_860_336, 97),
                domain: "1ef4c3257".into(),
                creator: 21469,
                exe: Some("/var/tmp/auditexp/ll".into()),
                comm: Some("ll".into()),
            })
        );
        assert_eq!(
            parse_record(1424, DEALLOCATED),
            Some(Record::DomainDeallocated {
                stamp: stamp(1_796_051_860_388, 99),
                domain: "1ef4c3257".into(),
                denials: Some(2),
            })
        );
    }

    #[test]
    fn parses_the_syscall_record_and_end_of_event() {
        assert_eq!(
            parse_record(1300, SYSCALL_SH),
            Some(Record::Syscall {
                stamp: stamp(1_796_051_860_336, 97),
                pid: 21469,
                comm: Some("sh".into()),
                exe: Some("/usr/bin/dash".into()),
            })
        );
        assert_eq!(
            parse_record(1320, &format!("{EOE}\0")),
            Some(Record::EndOfEvent {
                stamp: stamp(1_796_051_860_336, 97)
            })
        );
    }

    #[test]
    fn decodes_hex_encoded_strings() {
        let Some(Record::Access { path, .. }) = parse_record(1423, ACCESS_HEX_PATH) else {
            panic!("not parsed");
        };
        assert_eq!(path.as_deref(), Some("/tmp/llx/d i r/ex ist"));
        let Some(Record::Syscall { comm, exe, .. }) = parse_record(1300, SYSCALL_HEX) else {
            panic!("not parsed");
        };
        assert_eq!(comm.as_deref(), Some("py thon"));
        assert_eq!(exe.as_deref(), Some("/var/tmp/auditexp/py thon"));
        let Some(Record::Syscall { comm, .. }) = parse_record(1300, SYSCALL_HEX_COMM_QUOTE) else {
            panic!("not parsed");
        };
        assert_eq!(comm.as_deref(), Some("a b\"c"));
    }

    #[test]
    fn keeps_network_and_scope_details() {
        let detail = |text| match parse_record(1423, text) {
            Some(Record::Access {
                blockers,
                path,
                detail,
                ..
            }) => (blockers, path, detail),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            detail(ACCESS_BIND),
            (
                "net.bind_tcp".into(),
                None,
                Some("saddr=127.0.0.1 src=4567".into())
            )
        );
        assert_eq!(
            detail(ACCESS_CONNECT),
            (
                "net.connect_tcp".into(),
                None,
                Some("daddr=::1 dest=22".into())
            )
        );
        assert_eq!(
            detail(ACCESS_SIGNAL),
            (
                "scope.signal".into(),
                None,
                Some("opid=23190 ocomm=sleep".into())
            )
        );
        assert_eq!(
            detail(ACCESS_ABSTRACT),
            (
                "scope.abstract_unix_socket".into(),
                Some("@abs name".into()),
                None
            )
        );
        let (blockers, path, _) = detail(ACCESS_RENAME);
        assert!(
            blockers.starts_with("fs.write_file,fs.read_dir,") && blockers.ends_with("fs.truncate")
        );
        assert_eq!(path.as_deref(), Some("/tmp/llx"));
    }

    #[test]
    fn ignores_other_records_and_garbage() {
        assert_eq!(parse_record(1335, LISTENER), None);
        assert_eq!(parse_record(1423, "domain=1 blockers=fs.write_file"), None);
        assert_eq!(
            parse_record(1423, "audit(1.000:5): blockers=fs.write_file"),
            None
        );
        assert_eq!(
            parse_record(1424, "audit(1.000:5): domain=1 status=allocated"),
            None
        );
        assert_eq!(parse_record(1300, "audit(x.000:5): pid=1"), None);
        assert_eq!(untrusted("<too_long>").as_deref(), Some("<too_long>"));
        assert_eq!(untrusted("(null)"), None);
        assert_eq!(untrusted("ABC").as_deref(), Some("ABC"));
    }

    #[test]
    fn splits_netlink_datagrams() {
        let mut data = Vec::new();
        for (kind, text) in [(1423u16, "abc"), (1320, "defgh")] {
            let len = NLMSG_HDRLEN + text.len();
            data.extend_from_slice(&(len as u32).to_ne_bytes());
            data.extend_from_slice(&kind.to_ne_bytes());
            data.extend_from_slice(&[0; 10]);
            data.extend_from_slice(text.as_bytes());
            data.resize((data.len() + 3) & !3, 0);
        }
        let got = netlink_messages(&data);
        assert_eq!(got, vec![(1423, &b"abc"[..]), (1320, &b"defgh"[..])]);
        // A length past the end is clamped, not trusted.
        data[0] = 0xff;
        assert_eq!(netlink_messages(&data[..20]).len(), 1);
    }

    fn feed(c: &mut Collector, kind: u16, text: &str, now: Instant) {
        c.feed(parse_record(kind, text).expect(text), now);
    }

    /// The records of the first captured run, in arrival order.
    fn first_run(c: &mut Collector, now: Instant) {
        for (kind, text) in [
            (1423, ACCESS_MAKE_REG),
            (1424, DOMAIN_ALLOCATED),
            (1300, SYSCALL_SH),
            (1320, EOE),
            (1423, ACCESS_AGAIN),
            (1300, SYSCALL_AGAIN),
            (1320, EOE_AGAIN),
            (1424, DEALLOCATED),
        ] {
            feed(c, kind, text, now);
        }
    }

    #[test]
    fn assembles_events_of_this_run() {
        let now = Instant::now();
        let mut c = Collector::default();
        c.set_creator(21469);
        first_run(&mut c, now);
        let out = c.finish();
        assert_eq!(out.total, 2);
        assert_eq!(out.kernel_count, Some(2));
        assert!(!out.dropped_records);
        assert_eq!(
            out.denials[0],
            Denial {
                unix_ms: 1_796_051_860_336,
                pid: Some(21469),
                comm: Some("sh".into()),
                exe: Some("/usr/bin/dash".into()),
                operation: "fs.make_reg".into(),
                path: Some("/tmp/llx".into()),
                detail: None,
                domain: "1ef4c3257".into(),
            }
        );
    }

    #[test]
    fn creator_may_be_named_after_the_records_came() {
        let now = Instant::now();
        let mut c = Collector::default();
        first_run(&mut c, now);
        c.set_creator(21469);
        assert_eq!(c.finish().total, 2);
    }

    #[test]
    fn other_creators_are_left_out() {
        let now = Instant::now();
        let mut c = Collector::default();
        first_run(&mut c, now);
        c.set_creator(4242);
        let out = c.finish();
        assert_eq!(out.total, 0);
        assert_eq!(out.kernel_count, None);
        // And with no creator named at all, nothing is claimed.
        let mut c = Collector::default();
        first_run(&mut c, now);
        assert_eq!(c.finish(), Denials::default());
    }

    #[test]
    fn domain_record_may_come_first_and_other_syscalls_are_ignored() {
        let now = Instant::now();
        let mut c = Collector::default();
        c.set_creator(21469);
        for (kind, text) in [
            (1424, DOMAIN_ALLOCATED),
            (1423, ACCESS_MAKE_REG),
            (1300, SYSCALL_SH),
            (1320, EOE),
            // A syscall event of something else: no Landlock record opened it.
            (1300, SYSCALL_HEX),
            (1320, "audit(1796051924.940:302): "),
        ] {
            feed(&mut c, kind, text, now);
        }
        let out = c.finish();
        assert_eq!(out.total, 1);
        assert_eq!(out.denials[0].comm.as_deref(), Some("sh"));
    }

    #[test]
    fn events_without_a_syscall_record_close_on_timeout() {
        let now = Instant::now();
        let mut c = Collector::default();
        c.set_creator(21469);
        feed(&mut c, 1423, ACCESS_MAKE_REG, now);
        feed(&mut c, 1424, DOMAIN_ALLOCATED, now);
        c.expire(now + EVENT_TIMEOUT / 2);
        assert_eq!(c.out.total, 0, "still open");
        c.expire(now + EVENT_TIMEOUT);
        assert_eq!(c.out.total, 1);
        let out = c.finish();
        assert_eq!(out.denials[0].pid, None);
        assert_eq!(out.denials[0].path.as_deref(), Some("/tmp/llx"));
    }

    #[test]
    fn keeps_the_first_denials_and_counts_all() {
        let now = Instant::now();
        let mut c = Collector::default();
        c.set_creator(21469);
        feed(&mut c, 1424, DOMAIN_ALLOCATED, now);
        for serial in 0..(KEEP as u64 + 500) {
            let text = format!(
                "audit(1796051860.336:{}): domain=1ef4c3257 blockers=fs.write_file path=\"/f{serial}\" dev=\"vda\" ino=1",
                1000 + serial
            );
            feed(&mut c, 1423, &text, now);
            feed(
                &mut c,
                1320,
                &format!("audit(1796051860.336:{}): ", 1000 + serial),
                now,
            );
        }
        let out = c.finish();
        assert_eq!(out.total, KEEP as u64 + 500);
        assert_eq!(out.denials.len(), KEEP);
        assert_eq!(out.denials[0].path.as_deref(), Some("/f0"));
    }

    #[test]
    fn open_says_why_not() {
        let err = open(6).unwrap_err();
        assert!(err.0.contains("ABI 6 < 7"), "{err}");
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            let err = open(7).unwrap_err();
            assert_eq!(
                err.0,
                "reading audit records needs CAP_AUDIT_READ (run as root)"
            );
        }
    }

    /// End to end, when this machine can: root, audit enabled, Landlock ABI 7. A child enforces a
    /// ruleset forbidding every write, with LOG_NEW_EXEC_ON, and execs a shell that writes; a
    /// second, unrelated child does the same and must not be reported.
    #[test]
    fn reports_a_denial_end_to_end() {
        use landlock::{
            ABI, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
        };
        use std::ffi::CString;

        let abi = crate::linux::sys::landlock_abi();
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: reading audit records needs root");
            return;
        }
        let stream = match open(abi) {
            Ok(s) => s,
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        };
        let dir = std::env::temp_dir().join(format!("jail audit {}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = format!("echo x > '{}/f'", dir.display());
        let argv: Vec<CString> = ["sh", "-c", &script]
            .iter()
            .map(|a| CString::new(*a).unwrap())
            .collect();
        let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        let sh = CString::new("/bin/sh").unwrap();

        let spawn = || -> libc::pid_t {
            // Everything that allocates happens before fork (the test harness is threaded).
            let ruleset = Ruleset::default()
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(AccessFs::from_write(ABI::V7))
                .unwrap()
                .create()
                .unwrap()
                .log_new_exec(true)
                .unwrap();
            // SAFETY: the child only restricts itself and execs (or _exits).
            match unsafe { libc::fork() } {
                0 => {
                    if ruleset.restrict_self().is_ok() {
                        // SAFETY: valid NUL-terminated program and argv.
                        unsafe { libc::execv(sh.as_ptr(), argv_ptrs.as_ptr()) };
                    }
                    // SAFETY: leaving the forked child without running the parent's destructors.
                    unsafe { libc::_exit(127) }
                }
                pid => {
                    assert!(pid > 0, "fork failed");
                    pid
                }
            }
        };
        let wait = |pid: libc::pid_t| {
            let mut status = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            status
        };

        let ours = spawn();
        let other = spawn();
        let reader = stream.start();
        reader.set_creator(ours);
        assert_ne!(wait(ours), 0, "the write should have failed");
        wait(other);
        let finishing = Instant::now();
        let out = reader.finish();
        assert!(
            finishing.elapsed() < Duration::from_millis(300),
            "finish was slow"
        );
        let _ = std::fs::remove_dir(&dir);

        assert!(out.total >= 1, "{out:?}");
        let denial = &out.denials[0];
        assert_eq!(denial.operation, "fs.make_reg");
        assert_eq!(denial.path.as_deref(), dir.to_str());
        assert_eq!(denial.comm.as_deref(), Some("sh"));
        assert_eq!(denial.pid, Some(ours));
        assert!(
            out.denials.iter().all(|d| d.pid == Some(ours)),
            "the other child's denial leaked in: {out:?}"
        );
    }
}
