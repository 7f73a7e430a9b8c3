//! Each exec of a session in a Landlock domain of its own, nested in the session's.
//!
//! A session's execs are descendants of one forking process, so without this they share one
//! Landlock domain, and a process one exec leaves behind may `ptrace` another exec's processes
//! or open their `/proc/PID/fd/N`, `mem` and `environ` (the kernel asks only for the same uid).
//! It could write into a later exec's output: the text of a `jail status` an orchestrator runs
//! to check a session (it would forge "confined"), or of any command it trusts.
//!
//! Landlock's own rule closes that: a process may trace (and reach through /proc) only processes
//! in its domain or in domains nested under it (`ptrace_access_check`, since ABI 1). Sibling
//! domains reach each other in neither direction; the session's forking process and each
//! exec's monitor stay in the parent domain and keep reaching every command. So each command
//! restricts itself once more, just before its execve, with a ruleset that takes nothing away:
//! it handles every filesystem right the session's domain handles and grants all of them
//! beneath `/`. The session's own layer still decides every file access (a nested layer only
//! ever narrows, and this one grants everything the view shows). Signals between execs stay
//! as they were: no scope is set, so a later exec can still stop what an earlier one started.
//!
//! Not made, and said so (`SessionInfo.execs_isolated`): without Landlock; with
//! `--allow-userns` (a domain that handles filesystem access forbids every mount, which a
//! nested sandbox needs); and with mediated unix sockets (`--allow-unix-sockets`: the filter
//! refuses `landlock_restrict_self`, see `seccomp::refuses_landlock`).

use landlock::{
    Access, AccessFs, CompatLevel, Compatible, PathBeneath, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, RulesetStatus,
};
use serde::Serialize;

use super::landlock::{LandlockPlan, abi};
use crate::error::JailError;

/// Whether each exec gets a domain of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ExecDomain {
    /// Each command restricts itself with the rights of this ABI, all granted beneath `/`.
    Own { abi: u32 },
    /// Execs share the session's domain, for this reason.
    Shared { why: &'static str },
}

/// Decides it from the session's Landlock plan and whether its seccomp filter refuses
/// `landlock_restrict_self`.
pub fn compile(landlock: Option<&LandlockPlan>, filter_refuses_landlock: bool) -> ExecDomain {
    match landlock {
        None => ExecDomain::Shared {
            why: "no Landlock layer",
        },
        Some(plan) if !plan.filesystem => ExecDomain::Shared {
            why: "--allow-userns: a domain that handles files would forbid the mounts a nested sandbox makes",
        },
        Some(_) if filter_refuses_landlock => ExecDomain::Shared {
            why: "--allow-unix-sockets: the seccomp filter refuses landlock_restrict_self",
        },
        Some(plan) => ExecDomain::Own { abi: plan.abi },
    }
}

/// The ruleset every command of a session restricts itself with.
pub struct ExecRuleset(RulesetCreated);

/// Made once by the session's forking process (inside the view, so `/` is the view's root);
/// each command enters a copy with [`enter`].
pub fn prepare(domain: ExecDomain) -> Result<Option<ExecRuleset>, JailError> {
    let ExecDomain::Own { abi: n } = domain else {
        return Ok(None);
    };
    let err = |step: &str, e: &dyn std::fmt::Display| JailError::layer("landlock", step, e);
    let every = AccessFs::from_all(abi(n));
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(every)
        .map_err(|e| err("exec domain: handle access", &e))?
        .create()
        .map_err(|e| err("exec domain: create ruleset", &e))?;
    if n >= 7 {
        // It refuses nothing in the view; what it refuses across execs is not the report's.
        ruleset = ruleset
            .log_same_exec(false)
            .and_then(|r| r.log_new_exec(false))
            .map_err(|e| err("exec domain: audit log flags", &e))?;
    }
    let root = crate::sys::open_path(std::path::Path::new("/"))
        .map_err(|e| err("exec domain: open /", &e))?;
    let ruleset = ruleset
        .add_rule(PathBeneath::new(root, every))
        .map_err(|e| err("exec domain: rule for /", &e))?;
    Ok(Some(ExecRuleset(ruleset)))
}

/// In a command's process, just before its execve: the domain of its own.
pub fn enter(ruleset: &ExecRuleset) -> Result<(), JailError> {
    let err = |e: &dyn std::fmt::Display| JailError::layer("landlock", "exec domain", e);
    // A copy of the descriptor: restricting consumes it, and the forking process keeps its own.
    let status = ruleset
        .0
        .try_clone()
        .map_err(|e| err(&e))?
        .restrict_self()
        .map_err(|e| err(&e))?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(err(&format!("only {:?} on this kernel", status.ruleset)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(filesystem: bool) -> LandlockPlan {
        LandlockPlan {
            abi: 6,
            filesystem,
            rules: Vec::new(),
            scope_signals: true,
            scope_abstract_unix: true,
            tcp_connect: None,
            tcp_bind: None,
            log_denials: false,
            notes: Vec::new(),
        }
    }

    #[test]
    fn own_domain_where_landlock_handles_files_and_the_filter_lets_it() {
        assert_eq!(
            compile(Some(&plan(true)), false),
            ExecDomain::Own { abi: 6 }
        );
    }

    #[test]
    fn shared_and_said_why_otherwise() {
        let why = |d: ExecDomain| match d {
            ExecDomain::Shared { why } => why,
            ExecDomain::Own { .. } => panic!("{d:?}"),
        };
        assert!(why(compile(None, false)).contains("no Landlock"));
        assert!(why(compile(Some(&plan(false)), false)).contains("--allow-userns"));
        assert!(why(compile(Some(&plan(true)), true)).contains("--allow-unix-sockets"));
    }
}
