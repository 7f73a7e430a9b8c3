//! The macOS launch: the policy as a Seatbelt profile, the level it gives, and the run.

use serde::Serialize;

use super::exec;
use super::seatbelt::{self, Params};
use crate::enforcement::{self, Layers};
use crate::error::JailError;
use crate::notice;
use crate::policy::Policy;
use crate::policy::settings::RunSettings;
use crate::probe;
use crate::sandbox::dry_run::DryRun;
use crate::sandbox::outcome::{Outcome, Status};

/// The macOS plans: the Seatbelt profile a run would get.
#[derive(Serialize)]
struct Plans {
    seatbelt_profile: Option<String>,
}

/// What the command line refuses on macOS in this version.
fn refuse_unsupported(policy: &Policy, args: &RunSettings) -> Result<(), JailError> {
    if args.recording() || args.control_fd.is_some() {
        return Err(JailError::unsupported(
            "--report, --summary and --control-fd",
            "Linux only in this version",
        ));
    }
    if !policy.cow.is_empty() || args.patch.is_some() || args.events.is_some() {
        return Err(JailError::unsupported(
            "--cow, --patch and --events",
            "Linux only in this version (the layer is an overlay in the jail's user namespace); \
             use --rw",
        ));
    }
    if policy.net != crate::net::NetPolicy::Host {
        return Err(JailError::unsupported(
            format!("--net {}", policy.net.summary()),
            "only `host` on macOS in this version (Seatbelt network rules are not generated yet)",
        ));
    }
    if let Some(name) = policy.limits.first_set() {
        return Err(JailError::unsupported(
            format!("--limit {name}"),
            "resource limits are not enforced on macOS in this version",
        ));
    }
    Ok(())
}

/// What a run of `policy` would get here (`--dry-run`).
pub fn dry_run(policy: &Policy, args: &RunSettings) -> Result<String, JailError> {
    refuse_unsupported(policy, args)?;
    let features = probe::detect(false);
    let layers = Layers::from_features(&features);
    let gaps = enforcement::gaps(policy, &layers, &features);
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
        plans: Plans {
            seatbelt_profile: seatbelt::profile(policy, &params).ok(),
        },
    };
    Ok(crate::text::versioned_json(&out))
}

/// Runs `policy` under Seatbelt.
pub fn launch(policy: &Policy, args: &RunSettings) -> Result<Outcome, JailError> {
    refuse_unsupported(policy, args)?;
    let features = probe::detect(false);
    let layers = Layers::from_features(&features);
    let gaps = enforcement::gaps(policy, &layers, &features);
    enforcement::check_level(policy.require, args.allow_unconfined, &layers, &features)?;
    if args.notice {
        eprintln!("{}", notice::notice_text(&notice::Summary::of(policy)));
    }
    if !layers.seatbelt {
        eprintln!(
            "jail: warning: UNCONFINED (--allow-unconfined): no Seatbelt (/usr/bin/sandbox-exec \
             is missing); nothing is enforced"
        );
        let code = crate::unconfined::run(policy)?;
        return Ok(outcome(code, &layers, gaps));
    }
    // Seatbelt is one layer: say once per run what it leaves open.
    crate::text::say(format!(
        "jail: note: macOS Seatbelt (level partial); gaps: {}",
        gaps.join("; ")
    ));
    let file = crate::policy_file::PolicyFile::new(policy, &layers, gaps.clone());
    let json = serde_json::to_string_pretty(&file).expect("serializable");
    let code = exec::run(policy, &json)?;
    Ok(outcome(code, &layers, gaps))
}

/// The outcome of a run that ended with `code` (128+N after signal N, 124 on timeout).
fn outcome(code: i32, layers: &Layers, gaps: Vec<String>) -> Outcome {
    let signal = (code > 128 && code < 160).then_some(code - 128);
    Outcome {
        cow_run: None,
        status: Status::of(code, signal, code == crate::error::EXIT_TIMEOUT, false),
        exit_code: code,
        level: layers.level(),
        gaps,
    }
}
