//! `jail probe`: what this kernel offers, the layers and level a run would get, and what
//! `--net`, `--report`, unix sockets, `--home` and `--limit` can use here.

use serde::Serialize;

use crate::enforcement::{self, Layers};
use crate::error::JailError;
use crate::policy::Policy;
use crate::probe::{self, Features};

/// `jail probe`: what this kernel offers and the level a run would get.
pub fn probe(json: bool) -> Result<i32, JailError> {
    let f = probe::detect(true);
    let layers = Layers::from_features(&f);
    if json {
        #[derive(Serialize)]
        struct Out<'a> {
            features: &'a Features,
            layers: Layers,
            level: enforcement::Level,
            gaps: Vec<String>,
            homes: String,
            cow: String,
            #[serde(skip_serializing_if = "Option::is_none")]
            limits: Option<serde_json::Value>,
        }
        let limits = limits_probe(&layers);
        let mut gaps = enforcement::gaps(&Policy::probe_default(), &layers, &f);
        gaps.extend(limits.iter().flat_map(|l| l.gaps.iter().cloned()));
        let out = Out {
            features: &f,
            layers,
            homes: home_text(&f),
            cow: cow_text(&f),
            level: layers.level(),
            gaps,
            limits: limits.map(|l| l.json),
        };
        println!("{}", crate::text::versioned_json(&out));
    } else {
        print!("{}", enforcement::probe_text(&f, &layers));
        print!("{}", extras_text(&f));
        if let Some(l) = limits_probe(&layers) {
            println!("limits:           {}", l.summary);
        }
    }
    Ok(0)
}

/// What `jail probe` says of the limits: how a run with jail's defaults is bounded here.
struct LimitsProbe {
    json: serde_json::Value,
    summary: String,
    gaps: Vec<String>,
}

#[cfg(target_os = "linux")]
fn limits_probe(layers: &Layers) -> Option<LimitsProbe> {
    // As a run with a copy-on-write root would be, so that its layer's bound is shown too.
    let mut policy = Policy::probe_default();
    policy.cow = vec![std::path::PathBuf::from("/")];
    let plan = crate::platform::limits_plan(&policy, layers.mount)?;
    Some(LimitsProbe {
        json: serde_json::to_value(&plan).expect("serializable"),
        summary: plan.summary(),
        gaps: plan.gaps,
    })
}

#[cfg(not(target_os = "linux"))]
fn limits_probe(_: &Layers) -> Option<LimitsProbe> {
    None
}

/// What `--net` and `--report` can use here (`jail probe`, text form).
fn extras_text(f: &Features) -> String {
    let net = match (f.user_namespaces, f.landlock_abi >= 4) {
        (true, true) => "all modes (namespace, proxy, Landlock TCP ports)",
        (true, false) => "none and allow= (namespace); connect=/bind= need Landlock ABI 4",
        (false, true) => {
            "none and connect=/bind= via Landlock TCP rules; allow= only with --require any"
        }
        (false, false) => "host only",
    };
    #[cfg(target_os = "linux")]
    let denials = match crate::platform::denials_readable(f.landlock_abi) {
        Ok(()) => "yes (Landlock audit records)".to_string(),
        Err(why) => format!("no: {why}"),
    };
    #[cfg(not(target_os = "linux"))]
    let denials = "no (Linux only)".to_string();
    #[cfg(target_os = "linux")]
    let unix = match (f.seccomp, crate::platform::unix_mediation_available()) {
        (true, Ok(())) => "refused; when allowed, every connect mediated by the supervisor".into(),
        (true, Err(why)) => format!("refused; allowing them fails to start: {why}"),
        (false, _) => "not confined (no seccomp)".to_string(),
    };
    #[cfg(not(target_os = "linux"))]
    let unix = "see the Seatbelt profile".to_string();
    format!(
        "network (--net):  {net}\nreport denials:   {denials}\nunix sockets:     {unix}\nhomes (--home):   {}\ncopy-on-write:    {}\n",
        home_text(f),
        cow_text(f)
    )
}

/// The layer a `--cow` run gets here.
fn cow_text(f: &Features) -> String {
    match (cfg!(target_os = "linux"), f.user_namespaces, f.landlock_abi > 0) {
        (false, _, _) => "no (Linux only)".into(),
        (true, true, _) => "overlay in the jail's user namespace (the live tree; O(changes))".into(),
        (true, false, true) => {
            "a copy of the root made at the start (no user namespaces; the root read-only by Landlock)"
                .into()
        }
        (true, false, false) => "no: neither user namespaces nor Landlock".into(),
    }
}

/// What the homes are in a default run here (hidden, every shipped profile), and what hides
/// them.
fn home_text(f: &Features) -> String {
    let by = match (f.user_namespaces, f.landlock_abi > 0) {
        (true, true) => "mount view and Landlock",
        (true, false) => "mount view",
        (false, true) => "Landlock (names listable)",
        (false, false) => {
            return "hidden by default, but neither the mount view nor Landlock is here to \
                    hide them (a run refuses unless --home visible)"
                .into();
        }
    };
    format!("hidden by default (--home visible shows them) enforced by {by}")
}
