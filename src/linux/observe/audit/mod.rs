//! The accesses Landlock refused during a run, read from the kernel's audit records, for
//! `--report`. [`parse_record`] and the event assembly are pure and unit-tested; [`open`] and the
//! reader thread are the only places with syscalls.
//!
//! - `records` parses the record texts ([`parse_record`]).
//! - `collector` groups the records of one event and keeps the denials of this run's domains;
//!   pure, time comes in as an argument.
//! - `reader` opens the stream ([`open`]) and reads it on a thread of its own.
//! - `netlink` is the `NETLINK_AUDIT` plumbing: the socket, datagrams, `AUDIT_GET`/`AUDIT_SET`.
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

mod collector;
mod netlink;
mod reader;
mod records;

use serde::Serialize;

#[cfg(any(test, feature = "test-hooks"))]
pub use netlink::{enabled_for_tests, set_enabled_for_tests};
pub use reader::{AuditReader, AuditStream, DenialListener, open};
pub use records::{AUDIT_LANDLOCK_ACCESS, AUDIT_LANDLOCK_DOMAIN, Record, Stamp, parse_record};

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
