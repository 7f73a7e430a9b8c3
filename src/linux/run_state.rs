//! What a run ends up with: the features it found, the plan it applied (the namespaces may fail
//! at the start, a cgroup may not be made, and each time [`super::plan::compile`] replans), and
//! what the cgroups counted at the end.

use super::limits;
use super::plan::{self, RunPlan};
use crate::error::JailError;
use crate::policy::Policy;
use crate::probe::Features;

/// The run's facts and its current plan.
pub struct RunState {
    pub features: Features,
    pub limits_host: limits::Host,
    /// The proxy's socket on the host's loopback, when there is no namespace.
    pub fallback_proxy: Option<std::net::SocketAddr>,
    /// The run CA's certificate when the proxy adds secrets.
    pub trust_ca: Option<String>,
    pub plan: RunPlan,
    /// What the run's cgroups counted at its end.
    pub limits_reached: limits::Reached,
}

impl RunState {
    /// Plans the run for `features`.
    pub fn new(
        policy: &Policy,
        features: Features,
        limits_host: limits::Host,
        fallback_proxy: Option<std::net::SocketAddr>,
        trust_ca: Option<String>,
    ) -> Result<RunState, JailError> {
        let plan = compile(
            policy,
            &features,
            &limits_host,
            fallback_proxy,
            trust_ca.as_deref(),
        )?;
        Ok(RunState {
            features,
            limits_host,
            fallback_proxy,
            trust_ca,
            plan,
            limits_reached: Default::default(),
        })
    }

    /// The namespaces could not be used after all: the plan again, without them.
    pub fn without_namespaces(
        &mut self,
        policy: &Policy,
        why: String,
        fallback_proxy: Option<std::net::SocketAddr>,
    ) -> Result<(), JailError> {
        self.features.user_namespaces = false;
        self.features.user_namespaces_detail = Some(why);
        self.fallback_proxy = fallback_proxy;
        self.replan(policy)
    }

    fn replan(&mut self, policy: &Policy) -> Result<(), JailError> {
        self.plan = compile(
            policy,
            &self.features,
            &self.limits_host,
            self.fallback_proxy,
            self.trust_ca.as_deref(),
        )?;
        Ok(())
    }

    /// Makes the run's cgroups. When that fails and every bound they were to hold is jail's
    /// default, the run goes on with rlimits (the gaps say so); an asked bound stops it.
    pub fn prepare_limits(&mut self, policy: &Policy) -> Result<limits::Prepared, JailError> {
        match self.plan.limits.prepare() {
            Ok(p) => Ok(p),
            Err(e) if self.plan.limits.cgroup_bounds_are_defaults() => {
                tracing::info!("no cgroup: {e}");
                self.limits_host.forgo_cgroups(e.to_string());
                self.replan(policy)?;
                self.plan.limits.prepare()
            }
            Err(e) => Err(e),
        }
    }
}

fn compile(
    policy: &Policy,
    features: &Features,
    limits_host: &limits::Host,
    fallback_proxy: Option<std::net::SocketAddr>,
    trust_ca: Option<&str>,
) -> Result<RunPlan, JailError> {
    plan::compile(
        policy,
        &plan::Host {
            features,
            limits: limits_host,
            fallback_proxy,
            trust_ca,
            list_dir: &super::landlock::list_dir,
        },
    )
}
