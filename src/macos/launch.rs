//! The macOS launch: the policy as a Seatbelt profile, the level it gives, and the run.

use serde::Serialize;

use super::exec;
use super::seatbelt::{self, Params};
use crate::RunOptions;
use crate::enforcement::{self, Layers};
use crate::error::JailError;
use crate::notice;
use crate::policy::Policy;
use crate::policy_file::PolicyFile;
use crate::probe::{self, Features};

#[derive(Serialize)]
struct DryRun<'a> {
    policy: &'a Policy,
    features: &'a Features,
    layers: Layers,
    level: enforcement::Level,
    gaps: &'a [String],
    seatbelt_profile: Option<String>,
}

pub fn launch(policy: &Policy, args: &RunOptions) -> Result<i32, JailError> {
    if args.report.is_some() || args.summary {
        return Err(JailError::BadInput(
            "--report and --summary: Linux only in this version".into(),
        ));
    }
    if policy.net != crate::net::NetPolicy::Host {
        return Err(JailError::BadInput(format!(
            "--net {}: only `host` on macOS in this version (Seatbelt network rules are not \
             generated yet)",
            policy.net.summary()
        )));
    }
    if let Some(name) = policy.limits.first_set() {
        return Err(JailError::BadInput(format!(
            "--limit {name}: resource limits are not enforced on macOS in this version"
        )));
    }
    let features = probe::detect(false);
    let layers = Layers::from_features(&features);
    let gaps = enforcement::gaps(policy, &layers, &features);
    if args.dry_run {
        let params = Params {
            tmp_dir: std::env::temp_dir().join("jail-RUN/tmp"),
            ttys: Vec::new(),
        };
        let out = DryRun {
            policy,
            features: &features,
            layers,
            level: layers.level(),
            gaps: &gaps,
            seatbelt_profile: seatbelt::profile(policy, &params).ok(),
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&out).expect("serializable")
        );
        return Ok(0);
    }
    enforcement::check_level(policy.require, args.allow_unconfined, &layers, &features)?;
    if args.notice {
        eprintln!("{}", notice::notice_text(&notice::Summary::of(policy)));
    }
    if !layers.seatbelt {
        eprintln!(
            "jail: warning: UNCONFINED (--allow-unconfined): no Seatbelt (/usr/bin/sandbox-exec \
             is missing); nothing is enforced"
        );
        return crate::unconfined::run(policy);
    }
    // Seatbelt is one layer: say once per run what it leaves open.
    crate::text::say(format!(
        "jail: note: macOS Seatbelt (level partial); gaps: {}",
        gaps.join("; ")
    ));
    let file = PolicyFile::new(policy, &layers, gaps);
    let json = serde_json::to_string_pretty(&file).expect("serializable");
    exec::run(policy, &json)
}
