//! The run: the launch, the one pure plan, the supervisor (and init) that applies it, the
//! signals passed on, the journal of duties after the command ends, the copy-on-write layers.

pub mod cow_run;
pub mod ended_by;
pub mod forward;
pub mod journal;
pub mod launch;
pub mod plan;
pub mod run_state;
pub mod session;
pub mod supervisor;
