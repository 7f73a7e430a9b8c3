//! Parsing the record texts of the kernel's audit records (pure): the stamp, the fields this
//! module uses, and the "untrusted strings" that come quoted or hex-encoded.

/// A Landlock denial (`blockers=`, the object, the domain).
pub const AUDIT_LANDLOCK_ACCESS: u16 = 1423;
/// A Landlock domain's creation (`status=allocated`, creator) or end (`status=deallocated`).
pub const AUDIT_LANDLOCK_DOMAIN: u16 = 1424;
pub(super) const AUDIT_SYSCALL: u16 = 1300;
pub(super) const AUDIT_EOE: u16 = 1320;

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
    pub(super) fn stamp(&self) -> Stamp {
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

#[cfg(test)]
mod tests {
    use super::samples::*;
    use super::*;

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
}

/// Records captured on Linux 6.18 (see the module comment of `audit` for how), for the tests
/// here and the collector's.
#[cfg(test)]
pub(super) mod samples {
    pub(in crate::linux::observe::audit) const ACCESS_MAKE_REG: &str = r#"audit(1796051860.336:97): domain=1ef4c3257 blockers=fs.make_reg path="/tmp/llx" dev="vda" ino=10010814"#;
    pub(in crate::linux::observe::audit) const DOMAIN_ALLOCATED: &str = r#"audit(1796051860.336:97): domain=1ef4c3257 status=allocated mode=enforcing pid=21469 uid=0 exe="/var/tmp/auditexp/ll" comm="ll""#;
    pub(in crate::linux::observe::audit) const SYSCALL_SH: &str = r#"audit(1796051860.336:97): arch=c000003e syscall=257 success=no exit=-13 a0=ffffff9c a1=5635abbaea70 a2=241 a3=1b6 items=0 ppid=21445 pid=21469 auid=4294967295 uid=0 gid=0 euid=0 suid=0 fsuid=0 egid=0 sgid=0 fsgid=0 tty=(none) ses=4294967295 comm="sh" exe="/usr/bin/dash" key=(null)"#;
    pub(in crate::linux::observe::audit) const EOE: &str = "audit(1796051860.336:97): ";
    pub(in crate::linux::observe::audit) const ACCESS_AGAIN: &str = r#"audit(1796051860.336:98): domain=1ef4c3257 blockers=fs.make_reg path="/tmp/llx" dev="vda" ino=10010814"#;
    pub(in crate::linux::observe::audit) const SYSCALL_AGAIN: &str = r#"audit(1796051860.336:98): arch=c000003e syscall=257 success=no exit=-13 a0=ffffff9c a1=5635abbaea70 a2=241 a3=1b6 items=0 ppid=21445 pid=21469 auid=4294967295 uid=0 gid=0 euid=0 suid=0 fsuid=0 egid=0 sgid=0 fsgid=0 tty=(none) ses=4294967295 comm="sh" exe="/usr/bin/dash" key=(null)"#;
    pub(in crate::linux::observe::audit) const EOE_AGAIN: &str = "audit(1796051860.336:98): ";
    pub(in crate::linux::observe::audit) const DEALLOCATED: &str =
        "audit(1796051860.388:99): domain=1ef4c3257 status=deallocated denials=2";
    pub(in crate::linux::observe::audit) const ACCESS_HEX_PATH: &str = "audit(1796051898.132:113): domain=1ef4c328f blockers=fs.write_file path=2F746D702F6C6C782F64206920722F657820697374 dev=\"vda\" ino=10010873";
    pub(in crate::linux::observe::audit) const SYSCALL_HEX: &str = "audit(1796051924.940:302): arch=c000003e syscall=257 success=no exit=-13 a0=ffffff9c a1=7fe39781e390 a2=80441 a3=1b6 items=0 ppid=23111 pid=23187 auid=4294967295 uid=0 gid=0 euid=0 suid=0 fsuid=0 egid=0 sgid=0 fsgid=0 tty=(none) ses=4294967295 comm=70792074686F6E exe=2F7661722F746D702F61756469746578702F70792074686F6E key=(null)";
    pub(in crate::linux::observe::audit) const SYSCALL_HEX_COMM_QUOTE: &str = "audit(1796051924.920:301): arch=c000003e syscall=257 success=no exit=-13 a0=ffffff9c a1=7f389f8d6cf0 a2=80241 a3=1b6 items=0 ppid=23111 pid=23185 auid=4294967295 uid=0 gid=0 euid=0 suid=0 fsuid=0 egid=0 sgid=0 fsgid=0 tty=(none) ses=4294967295 comm=6120622263 exe=\"/usr/bin/python3.11\" key=(null)";
    pub(in crate::linux::observe::audit) const ACCESS_BIND: &str = "audit(1796051924.988:304): domain=1ef4c32cb blockers=net.bind_tcp saddr=127.0.0.1 src=4567";
    pub(in crate::linux::observe::audit) const ACCESS_CONNECT: &str =
        "audit(1796051924.988:305): domain=1ef4c32cb blockers=net.connect_tcp daddr=::1 dest=22";
    pub(in crate::linux::observe::audit) const ACCESS_SIGNAL: &str = r#"audit(1796051925.012:307): domain=1ef4c32ce blockers=scope.signal opid=23190 ocomm="sleep""#;
    pub(in crate::linux::observe::audit) const ACCESS_ABSTRACT: &str = "audit(1796051979.072:328): domain=1ef4c3347 blockers=scope.abstract_unix_socket path=00616273206E616D65";
    pub(in crate::linux::observe::audit) const ACCESS_RENAME: &str = r#"audit(1796051898.452:290): domain=1ef4c32a5 blockers=fs.write_file,fs.read_dir,fs.remove_dir,fs.remove_file,fs.make_char,fs.make_dir,fs.make_reg,fs.make_sock,fs.make_fifo,fs.make_block,fs.make_sym,fs.refer,fs.truncate path="/tmp/llx" dev="vda" ino=10010814"#;
    pub(in crate::linux::observe::audit) const LISTENER: &str = r#"audit(1796051924.444:300): pid=23121 uid=0 auid=4294967295 tty=(none) ses=4294967295 comm="listen" exe="/var/tmp/auditexp/listen" nl-mcgrp=1 op=connect res=1"#;
}
