//! Which of the run's bounds ended it, said in one line on stderr and in the run report: a run
//! that ends with 124, 137 or 152 and nothing else said leaves the user guessing whether the
//! command failed or jail stopped it.
//!
//! The kernel facts each is told by: the time bound is the supervisor's own (it sent SIGTERM
//! itself); the memory bound's OOM kills are counted by the run's memory cgroup (`oom_kill` in
//! memory.events, v1 memory.oom_control), and the tree's first process then ends with SIGKILL
//! (137, also when a shell passes its child's death on as its own exit code); RLIMIT_CPU sends
//! SIGXCPU (152), which nothing but the limit sends unasked.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::linux::layers::limits::{Enforcement, LimitsPlan, approx_size};

/// The bound that ended a run, with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndedBy {
    /// `--timeout`.
    Time(Duration),
    /// The memory cgroup's bound, in bytes; `default`: jail's, not asked for.
    Memory { bytes: u64, default: bool },
    /// RLIMIT_CPU, per process (`--limit cpu=`).
    Cpu(Duration),
}

/// How the run ended, as the supervisor saw it.
#[derive(Debug, Clone, Copy, Default)]
pub struct End {
    /// jail's exit code.
    pub code: i32,
    /// The supervisor's timeout ended it.
    pub timed_out: bool,
    /// The caller stopped it.
    pub stopped: bool,
}

const SIGKILLED: i32 = 128 + libc::SIGKILL;
const SIGXCPUED: i32 = 128 + libc::SIGXCPU;

impl EndedBy {
    /// The bound that ended the run `end`, if one did: the run's `timeout`, its `limits`, and the
    /// OOM kills its memory cgroup counted.
    pub fn of(
        end: End,
        timeout: Option<Duration>,
        limits: &LimitsPlan,
        oom_kills: Option<u64>,
    ) -> Option<EndedBy> {
        if end.stopped {
            return None;
        }
        if end.timed_out {
            return timeout.map(EndedBy::Time);
        }
        match end.code {
            SIGKILLED if oom_kills.is_some_and(|n| n > 0) => {
                let m = &limits.memory;
                match (m.value, &m.enforced_by) {
                    (Some(bytes), Enforcement::Cgroup) => Some(EndedBy::Memory {
                        bytes,
                        default: m.default,
                    }),
                    _ => None,
                }
            }
            SIGXCPUED => limits
                .cpu
                .value
                .map(|s| EndedBy::Cpu(Duration::from_secs(s))),
            _ => None,
        }
    }

    /// One word for the run report's `outcome.bound`: `time`, `memory` or `cpu`.
    pub fn name(&self) -> &'static str {
        match self {
            EndedBy::Time(_) => "time",
            EndedBy::Memory { .. } => "memory",
            EndedBy::Cpu(_) => "cpu",
        }
    }

    /// The line jail prints on stderr.
    pub fn line(&self) -> String {
        let (what, setting) = match self {
            EndedBy::Time(t) => ("time", format!("--timeout {}", duration_text(*t))),
            EndedBy::Memory {
                bytes,
                default: false,
            } => ("memory", format!("--limit memory={}", approx_size(*bytes))),
            EndedBy::Memory {
                bytes,
                default: true,
            } => (
                "memory",
                format!(
                    "memory={}, jail's default; --limit memory= sets it",
                    approx_size(*bytes)
                ),
            ),
            EndedBy::Cpu(t) => ("CPU", format!("--limit cpu={}", duration_text(*t))),
        };
        let how = match self {
            EndedBy::Time(_) => "jail stopped it",
            EndedBy::Memory { .. } => "the kernel's OOM killer ended it",
            EndedBy::Cpu(_) => "the kernel ended it with SIGXCPU",
        };
        format!("jail: the run reached its {what} bound ({setting}): {how}")
    }
}

/// A duration as `--timeout` takes it back: `2h`, `5m`, `30s` or `1500ms`.
fn duration_text(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 != 0 {
        return format!("{ms}ms");
    }
    let s = d.as_secs();
    match s {
        s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::layers::limits::Bound;

    fn bound(value: Option<u64>, by: Enforcement, default: bool) -> Bound {
        Bound {
            value,
            enforced_by: by,
            how: String::new(),
            default,
        }
    }

    fn plan(memory: Bound, cpu: Option<u64>) -> LimitsPlan {
        let none = || bound(None, Enforcement::None, true);
        LimitsPlan {
            procs: none(),
            memory,
            tmp: none(),
            shm: none(),
            cpu: match cpu {
                Some(s) => bound(Some(s), Enforcement::Rlimit, false),
                None => none(),
            },
            layer: none(),
            cgroups: Vec::new(),
            gaps: Vec::new(),
        }
    }

    fn end(code: i32) -> End {
        End {
            code,
            ..Default::default()
        }
    }

    #[test]
    fn each_bound_is_told_by_its_own_fact() {
        let mem = bound(Some(64 << 20), Enforcement::Cgroup, false);
        let p = plan(mem.clone(), Some(1));
        let t = Some(Duration::from_secs(2));
        let timed_out = End {
            code: 124,
            timed_out: true,
            ..Default::default()
        };
        assert_eq!(
            EndedBy::of(timed_out, t, &p, None),
            Some(EndedBy::Time(Duration::from_secs(2)))
        );
        // The caller's stop is not a bound.
        let stopped = End {
            stopped: true,
            ..timed_out
        };
        assert_eq!(EndedBy::of(stopped, t, &p, None), None);
        // 137: the memory bound only when the cgroup counted an OOM kill.
        assert_eq!(
            EndedBy::of(end(137), t, &p, Some(1)),
            Some(EndedBy::Memory {
                bytes: 64 << 20,
                default: false
            })
        );
        assert_eq!(EndedBy::of(end(137), t, &p, Some(0)), None);
        assert_eq!(EndedBy::of(end(137), t, &p, None), None);
        let unbounded = plan(bound(None, Enforcement::None, true), None);
        assert_eq!(EndedBy::of(end(137), t, &unbounded, Some(1)), None);
        // 152: SIGXCPU, when a CPU bound was set.
        assert_eq!(
            EndedBy::of(end(152), t, &p, None),
            Some(EndedBy::Cpu(Duration::from_secs(1)))
        );
        assert_eq!(EndedBy::of(end(152), t, &unbounded, None), None);
        // Any other end is the command's own.
        for code in [0, 1, 124, 130, 143] {
            assert_eq!(EndedBy::of(end(code), t, &p, Some(1)), None, "{code}");
        }
    }

    #[test]
    fn the_line_names_the_bound_and_the_setting_that_sets_it() {
        assert_eq!(
            EndedBy::Time(Duration::from_secs(2)).line(),
            "jail: the run reached its time bound (--timeout 2s): jail stopped it"
        );
        assert_eq!(
            EndedBy::Memory {
                bytes: 64 << 20,
                default: false
            }
            .line(),
            "jail: the run reached its memory bound (--limit memory=64M): the kernel's OOM \
             killer ended it"
        );
        assert!(
            EndedBy::Memory {
                bytes: 3 << 30,
                default: true
            }
            .line()
            .contains("(memory=3G, jail's default; --limit memory= sets it)")
        );
        assert_eq!(
            EndedBy::Cpu(Duration::from_secs(90)).line(),
            "jail: the run reached its CPU bound (--limit cpu=90s): the kernel ended it with \
             SIGXCPU"
        );
    }

    #[test]
    fn durations_are_shown_as_the_flag_takes_them() {
        assert_eq!(duration_text(Duration::from_secs(7200)), "2h");
        assert_eq!(duration_text(Duration::from_secs(300)), "5m");
        assert_eq!(duration_text(Duration::from_secs(90)), "90s");
        assert_eq!(duration_text(Duration::from_millis(1500)), "1500ms");
    }
}
