//! The evidence of isolation: the namespaces the process is in (made by jail, owned by a user
//! namespace above it), the network interfaces it sees, and whether the homes it should not
//! read are readable.

use std::path::{Path, PathBuf};

use super::{errno_name, show, shows_content};
use crate::claims::{Check, Claims, Finding};

/// What the kernel said about this process's namespaces (see [`namespaces`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceFacts {
    /// unshare(CLONE_NEWUSER) in a forked child.
    pub userns: UserNamespaces,
    /// The namespaces jail made (with the mount view) owned by a user namespace above ours.
    pub above: Vec<&'static str>,
    /// Those it asked about and owned by ours.
    pub ours: Vec<&'static str>,
    /// What could not be asked, and why.
    pub unknown: Vec<String>,
}

/// What the probe of user namespaces found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserNamespaces {
    /// The child made one.
    Creatable,
    /// Refused with EPERM (jail's filter, or the kernel's own rules for this process) or
    /// EUSERS (the nesting depth): no other process can bring either about.
    Refused(String),
    /// Anything else says nothing: a probe child that was killed or stopped (a process another
    /// exec of a session left can signal it), a fork that failed, ENOSPC (the count of user
    /// namespaces, which another process that may create them can fill).
    Unknown(String),
}

impl UserNamespaces {
    /// The probe's result as it came.
    pub fn of(probe: std::io::Result<Result<(), i32>>) -> UserNamespaces {
        match probe {
            Ok(Ok(())) => UserNamespaces::Creatable,
            Ok(Err(e)) if e == libc::EPERM || e == libc::EUSERS => {
                UserNamespaces::Refused(errno_name(e))
            }
            Ok(Err(e)) => UserNamespaces::Unknown(errno_name(e)),
            Err(e) => UserNamespaces::Unknown(format!("the probe failed: {e}")),
        }
    }
}

/// The namespaces jail makes with the mount view: mount, pid and IPC always, the network's
/// own with `--net none` or the proxy. The user namespace is the one they must belong to.
pub(super) fn jails_namespaces(claims: &Claims) -> Vec<&'static str> {
    if !claims.mount {
        return Vec::new();
    }
    let mut kinds = vec!["mnt", "pid", "ipc"];
    if claims.own_network {
        kinds.push("net");
    }
    kinds
}

pub(super) fn namespace_facts(claims: &Claims) -> NamespaceFacts {
    let mut facts = NamespaceFacts {
        userns: UserNamespaces::of(crate::linux::observe::view::can_create_user_namespace()),
        above: Vec::new(),
        ours: Vec::new(),
        unknown: Vec::new(),
    };
    let namespaces = crate::linux::observe::view::Namespaces::of_self();
    for kind in jails_namespaces(claims) {
        match namespaces.owned_by_ours(kind) {
            Ok(true) => facts.ours.push(kind),
            Ok(false) => facts.above.push(kind),
            Err(e) => facts.unknown.push(format!("{kind}: {e}")),
        }
    }
    facts
}

/// The view: whether anything read from a path could be of this process's own making. A
/// process that can create a user namespace can mount over any path (`/dev/jail`, `/proc`,
/// `/etc/passwd`); one in a user namespace below the one that owns jail's namespaces made
/// that user namespace itself. Either is advisory where the policy lets the command create
/// user namespaces (`--allow-userns`), and contradicts it where it does not.
pub fn namespaces(claims: &Claims, facts: &NamespaceFacts) -> Check {
    const NAME: &str = "namespaces";
    let how = "unshare(CLONE_NEWUSER) in a forked child; NS_GET_USERNS of each namespace jail \
               makes, through a pidfd of this process (PIDFD_GET_*_NAMESPACE)";
    let kinds = |k: &[&str]| k.join(", ");
    let problem = if facts.userns == UserNamespaces::Creatable {
        Some(
            "this process can create user namespaces: in one of its own it can mount over any \
             path (/dev/jail, /proc, /etc/passwd), so the policy file and everything read from \
             a path may be its own making; each claim is checked by its effect on this process \
             only"
                .to_string(),
        )
    } else if !facts.above.is_empty() {
        Some(format!(
            "this process is in a user namespace jail did not make: its {} namespace(s) belong \
             to one above it",
            kinds(&facts.above)
        ))
    } else {
        None
    };
    match problem {
        Some(why) if claims.allow_userns => Check::new(NAME, Finding::Advisory, how, why),
        Some(why) => Check::new(
            NAME,
            Finding::Failed,
            how,
            format!("{why} (the policy says user namespaces are refused)"),
        ),
        None if !facts.unknown.is_empty() => Check::new(
            NAME,
            Finding::Advisory,
            how,
            format!("could not ask: {}", facts.unknown.join("; ")),
        ),
        None => {
            let refused = match &facts.userns {
                UserNamespaces::Refused(why) => why,
                UserNamespaces::Unknown(why) => {
                    return Check::new(
                        NAME,
                        Finding::Advisory,
                        how,
                        format!("could not tell whether user namespaces can be made: {why}"),
                    );
                }
                UserNamespaces::Creatable => unreachable!("a problem above"),
            };
            let owned = if facts.ours.is_empty() {
                String::new()
            } else {
                format!(
                    "; its {} namespaces belong to its own user namespace",
                    kinds(&facts.ours)
                )
            };
            Check::new(
                NAME,
                Finding::Verified,
                how,
                format!("cannot create user namespaces ({refused}){owned}"),
            )
        }
    }
}

/// `--net none` (and the proxy): the network namespace has loopback only.
pub fn network(links: &std::io::Result<Vec<String>>) -> Check {
    const NAME: &str = "network";
    let how = "the interfaces of this process's network namespace (netlink RTM_GETLINK dump)";
    match links {
        Err(e) => Check::new(
            NAME,
            Finding::Advisory,
            how,
            format!("could not list them: {e}"),
        ),
        Ok(names) => {
            let others: Vec<&str> = names
                .iter()
                .map(String::as_str)
                .filter(|n| *n != "lo")
                .collect();
            if others.is_empty() {
                Check::new(NAME, Finding::Verified, how, "loopback only")
            } else {
                Check::new(
                    NAME,
                    Finding::Failed,
                    how,
                    format!(
                        "interfaces beyond loopback: {} (the policy says a network of its own \
                         with loopback only)",
                        others.join(", ")
                    ),
                )
            }
        }
    }
}

/// The homes this process sees: HOME, /home, /root, and /etc/passwd's login users' (all of
/// them are the caller's to set in a view of its own; more candidates can only find more).
pub(super) fn home_candidates() -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = std::env::var_os("HOME")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    homes.extend(["/home", "/root"].map(PathBuf::from));
    if let Ok(text) = std::fs::read_to_string("/etc/passwd") {
        homes.extend(crate::policy::homes::passwd_homes(&text));
    }
    homes
}

/// `--home hidden`: each home lists nothing (the mount view) or opens no file (Landlock) but
/// the way to what a rule names inside it.
pub(super) fn homes(claims: &Claims) -> Check {
    let checked = claims.homes_to_check(&home_candidates());
    let readable: Vec<PathBuf> = checked
        .iter()
        .filter(|h| {
            shows_content(h, claims.mount, &|e: &Path| {
                claims.on_the_way_to_a_rule(e, claims.mount)
            })
        })
        .cloned()
        .collect();
    judge_homes(&checked, &readable)
}

pub fn judge_homes(checked: &[PathBuf], readable: &[PathBuf]) -> Check {
    let how = "read HOME, /home, /root and /etc/passwd's homes: with the mount view each must \
               list nothing but the way to what a rule shows, without it its files must not open";
    if readable.is_empty() {
        Check::new(
            "homes",
            Finding::Verified,
            how,
            format!(
                "{} homes show nothing but what the rules name",
                checked.len()
            ),
        )
    } else {
        Check::new(
            "homes",
            Finding::Failed,
            how,
            format!(
                "readable: {} (the policy says the homes are hidden)",
                show(readable)
            ),
        )
    }
}
