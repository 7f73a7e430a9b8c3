//! The layers, network plan and limits a run ends up with: the namespaces may fail at the
//! start, and the fallback without them replans.

use super::limits;
use super::net_setup::NetPlan;
use crate::enforcement::{self, Layers};
use crate::error::JailError;
use crate::policy::Policy;
use crate::probe::Features;

/// The layers and network plan a run ends up with (the namespaces may fail at the start).
pub struct RunState {
    pub layers: Layers,
    pub features: Features,
    pub net_plan: NetPlan,
    pub limits: limits::LimitsPlan,
    pub limits_host: limits::Host,
    /// What the run's cgroups counted at its end.
    pub limits_reached: limits::Reached,
}

impl RunState {
    /// The gaps of this run, the limits' included.
    pub fn gaps(&self, policy: &Policy) -> Vec<String> {
        all_gaps(policy, &self.layers, &self.features, &self.limits)
    }

    /// Makes the run's cgroups. When that fails and every bound they were to hold is jail's
    /// default, the run goes on with rlimits (the gaps say so); an asked bound stops it.
    pub fn prepare_limits(&mut self, policy: &Policy) -> Result<limits::Prepared, JailError> {
        match self.limits.prepare() {
            Ok(p) => Ok(p),
            Err(e) if self.limits.cgroup_bounds_are_defaults() => {
                tracing::info!("no cgroup: {e}");
                self.limits_host.forgo_cgroups(e.to_string());
                self.limits = limits::compile(policy, &self.limits_host, self.layers.mount)?;
                self.limits.prepare()
            }
            Err(e) => Err(e),
        }
    }
}

/// What the run cannot enforce: the layers' gaps and the limits'.
pub fn all_gaps(
    policy: &Policy,
    layers: &Layers,
    f: &Features,
    l: &limits::LimitsPlan,
) -> Vec<String> {
    let mut gaps = enforcement::gaps(policy, layers, f);
    gaps.extend(l.gaps.iter().cloned());
    gaps
}
