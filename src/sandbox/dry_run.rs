//! The document `--dry-run` prints, on every system: the policy, what this system offers, the
//! layers and level a run would get with its gaps, then the platform's own plans.

use serde::Serialize;

use crate::enforcement::{Layers, Level};
use crate::policy::Policy;
use crate::probe::Features;

#[derive(Serialize)]
pub struct DryRun<'a, P: Serialize> {
    pub policy: &'a Policy,
    pub features: &'a Features,
    pub layers: Layers,
    pub level: Level,
    pub gaps: &'a [String],
    /// The platform's plans (Linux: every layer's; macOS: the Seatbelt profile).
    #[serde(flatten)]
    pub plans: P,
}
