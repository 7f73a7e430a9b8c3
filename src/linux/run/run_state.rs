//! What a run ended up with, for the report and the journal: the facts it was decided on
//! (after any fallback), the plan it applied last ([`super::plan::decide`]), and what the
//! cgroups counted at the end.

use super::plan::{Facts, RunPlan};
use crate::linux::layers::limits;

/// The run's facts and its last plan.
pub struct RunState<'a> {
    pub facts: &'a Facts,
    pub plan: &'a RunPlan,
    /// What the run's cgroups counted at its end.
    pub limits_reached: limits::Reached,
}
