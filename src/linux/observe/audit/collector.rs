//! Assembling events and keeping this run's denials (pure: time comes in as an argument).
//! Records of one event share its serial and may be spread over several messages; a denial is
//! kept when its domain was created by one of the run's creators, named at any time.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use super::records::Record;
use super::{Denial, Denials};

/// Denials kept in full; the rest are only counted.
const KEEP: usize = 1000;
/// An event whose end-of-event record never came (no syscall context) is closed after this.
const EVENT_TIMEOUT: Duration = Duration::from_millis(100);
/// Open events, and closed ones waiting for `set_creator`, held at most.
const PENDING_MAX: usize = 10_000;
/// Domains remembered at most (every logging Landlock user of the machine makes some).
const DOMAINS_MAX: usize = 65_536;

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
pub(super) struct Collector {
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
    pub(super) fn feed(&mut self, record: Record, now: Instant) {
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
    pub(super) fn expire(&mut self, now: Instant) {
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

    pub(super) fn set_creator(&mut self, pid: i32) {
        self.creators.insert(pid);
        let creators = &self.creators;
        self.domains.retain(|_, c| creators.contains(c));
        while let Some((access, task)) = self.waiting.pop_front() {
            self.keep(access, task.as_ref());
        }
    }

    /// The denials kept so far, in order.
    pub(super) fn kept(&self) -> &[Denial] {
        &self.out.denials
    }

    pub(super) fn lost(&mut self) {
        self.out.dropped_records = true;
    }

    pub(super) fn finish(mut self) -> Denials {
        while let Some((_, event)) = self.events.pop_first() {
            self.close(event);
        }
        // With no creator ever named, nothing can be told to be this run's.
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::super::records::parse_record;
    use super::super::records::samples::*;
    use super::*;

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
}
