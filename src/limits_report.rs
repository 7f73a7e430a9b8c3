//! The limits section of the run report: how each bound was held and what the cgroups counted.
//! Pure data, written by the Linux limits layer and read by the report ([`crate::run_report`]),
//! so that neither reaches into the other.

use serde::Serialize;

/// How one bound is held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    /// For the whole tree, by a cgroup made for the run.
    Cgroup,
    /// For each process, by a resource limit (inherited by every descendant).
    Rlimit,
    /// By the size of jail's own tmpfs.
    Tmpfs,
    /// By the supervisor, which watches the disk use and stops the run past the bound, with
    /// RLIMIT_FSIZE holding each file to it.
    Watch,
    /// Not bounded by jail.
    None,
}

/// What the run's cgroups counted, read before they are removed: how often the tree met its
/// bounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Reached {
    /// Forks and clones refused at pids.max (pids.events `max`).
    pub procs_refused: Option<u64>,
    /// Processes the OOM killer ended at the memory bound (memory.events or, v1,
    /// memory.oom_control `oom_kill`).
    pub oom_kills: Option<u64>,
}

/// The run report's `limits`: each bound as held, and what the cgroups counted.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct LimitsReport {
    pub procs: ReportedBound,
    pub memory: ReportedBound,
    pub tmp: ReportedBound,
    pub shm: ReportedBound,
    pub cpu: ReportedBound,
    pub layer: ReportedBound,
    #[serde(flatten)]
    pub reached: Reached,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ReportedBound {
    pub value: Option<u64>,
    pub enforced_by: Enforcement,
}
