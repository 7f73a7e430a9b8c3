//! The Linux launch: compile each layer's plan from the policy, check the level the caller
//! requires, run the command under the supervisor (falling back without namespaces when they
//! cannot be used), and clean up what the command planted.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;

use serde::Serialize;

use super::net_setup::{NetPlan, NetRuntime, net_plan};
use super::planted::Watch;
use super::recorder::Recorder;
use super::run_state::{RunState, all_gaps};
use super::supervisor::{Confinement, Outcome, RunEnd};
use super::{landlock, limits, mounts, seccomp};
use crate::enforcement::{self, Layers};
use crate::error::{EXIT_JAIL_ERROR, JailError};
use crate::net::{self, NetPolicy};
use crate::policy::Policy;
use crate::policy_file::PolicyFile;
use crate::probe::{self, Features};
use crate::{RunOptions, notice};

/// The plans every active layer compiled from the one policy.
#[derive(Serialize)]
struct DryRun<'a> {
    policy: &'a Policy,
    features: &'a Features,
    layers: Layers,
    level: enforcement::Level,
    gaps: Vec<String>,
    net: &'a NetPlan,
    mount: Option<&'a mounts::MountPlan>,
    landlock: Option<&'a landlock::LandlockPlan>,
    seccomp: Option<&'a seccomp::SeccompPlan>,
    unix_sockets: UnixSockets<'a>,
    limits: &'a limits::LimitsPlan,
}

/// How unix sockets are handled in a run.
#[derive(Serialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
enum UnixSockets<'a> {
    /// socket(AF_UNIX) refused (socketpair stays).
    Refused,
    /// Every connect checked by the supervisor: the jail's own filesystems and these sockets.
    Mediated { allowed: &'a [std::path::PathBuf] },
    /// No seccomp layer: nothing confines them but the hidden places.
    NotConfined,
}

fn unix_sockets<'a>(policy: &'a Policy, layers: &Layers) -> UnixSockets<'a> {
    match (layers.seccomp, policy.allow_unix_sockets) {
        (false, _) => UnixSockets::NotConfined,
        (true, false) => UnixSockets::Refused,
        (true, true) => UnixSockets::Mediated {
            allowed: &policy.allow_sockets,
        },
    }
}

struct Plans {
    mount: Option<mounts::MountPlan>,
    landlock: Option<landlock::LandlockPlan>,
    seccomp: Option<seccomp::SeccompPlan>,
}

fn compile(
    policy: &Policy,
    layers: &Layers,
    f: &Features,
    net: &NetPlan,
    limits: &limits::LimitsPlan,
) -> Plans {
    Plans {
        mount: layers.mount.then(|| mounts::MountPlan {
            tmpfs: limits.tmpfs(),
            ..mounts::compile(policy)
        }),
        landlock: layers.landlock.then(|| {
            let mut plan =
                landlock::compile(policy, f.landlock_abi, layers.mount, &landlock::list_dir);
            plan.tcp_connect = net.tcp_connect.clone();
            plan.tcp_bind = net.tcp_bind.clone();
            plan
        }),
        seccomp: layers
            .seccomp
            .then(|| seccomp::compile(policy, net.filter(), !layers.mount)),
    }
}

/// Runs `policy` (resolved by [`crate::prepare`]) as `args` say, and returns jail's exit code.
pub fn launch(policy: &Policy, args: &RunOptions) -> Result<i32, JailError> {
    for fd in &policy.keep_fds {
        if !super::privileges::fd_is_open(*fd) {
            return Err(JailError::BadInput(format!(
                "--keep-fd {fd}: not an open descriptor"
            )));
        }
        if let Some(why) = super::unix_connect::kept_descriptor_risk(*fd, policy.allow_unix_sockets)
        {
            return Err(JailError::BadInput(format!("--keep-fd {fd}: {why}")));
        }
    }
    // A dry run tries the namespaces for real (a throwaway child, ~1 ms), so that it shows what a
    // run would get; a real run tries them by running, and falls back if it must.
    let features = probe::detect(args.dry_run);
    let layers = Layers::from_features(&features);
    let mut net = NetRuntime::new(policy)?;
    net.prepare_fallback(&layers)?;
    let net_plan = net_plan(policy, &layers, &features, net.fallback_listener.as_ref())?;
    let limits_host = limits::Host::detect();
    let limits = limits::compile(policy, &limits_host, layers.mount)?;
    let plans = compile(policy, &layers, &features, &net_plan, &limits);
    if args.dry_run {
        let out = DryRun {
            policy,
            features: &features,
            layers,
            level: layers.level(),
            gaps: all_gaps(policy, &layers, &features, &limits),
            net: &net_plan,
            mount: plans.mount.as_ref(),
            landlock: plans.landlock.as_ref(),
            seccomp: plans.seccomp.as_ref(),
            unix_sockets: unix_sockets(policy, &layers),
            limits: &limits,
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&out).expect("serializable")
        );
        return Ok(0);
    }
    check_level(policy, args.allow_unconfined, &layers, &features)?;
    // Before anything runs: the baseline of the writable trees, for what the command plants.
    let watch = Watch::start(policy)?;
    let mut recorder = match (&args.report, args.summary) {
        (None, false) => None,
        (path, _) => Some(Recorder::start(
            path.as_deref(),
            policy,
            &features,
            &layers,
        )?),
    };
    if args.notice {
        eprintln!("{}", notice::notice_text(&notice::Summary::of(policy)));
        if let Some(note) = policy.env.removal_note() {
            crate::text::say(note);
        }
    }
    let mut run = RunState {
        layers,
        features,
        net_plan,
        limits,
        limits_host,
        limits_reached: Default::default(),
    };
    let bounds = run.prepare_limits(policy)?;
    let mut conf = confinement(policy, plans, &run, &net, bounds)?;
    if let Some(r) = &mut recorder {
        r.arm(&mut conf);
    }
    tracing::info!(level = ?layers.level(), ?layers, "launching {:?}", policy.command);
    let result = run_supervised(
        policy,
        conf,
        &mut run,
        args.allow_unconfined,
        &mut net,
        &mut recorder,
    );
    // Also after jail's own failure: the command may have run before it.
    let (changes, planted) = watch.finish();
    let quarantined = super::quarantine::move_aside_all(&planted, !run.layers.mount);
    if let Some(r) = recorder {
        r.finish(
            policy,
            &run,
            &net,
            &result,
            (watch.roots().to_vec(), changes),
            args.summary,
        )?;
    }
    let end = result?;
    if !quarantined {
        return Ok(EXIT_JAIL_ERROR);
    }
    Ok(end.code)
}

/// The level the caller requires, and files protected by some layer. With --allow-userns,
/// Landlock's filesystem rules are off (they forbid a nested sandbox's mounts): only the mount
/// view protects files then, and without it nothing does.
fn check_level(
    policy: &Policy,
    allow_unconfined: bool,
    layers: &Layers,
    f: &Features,
) -> Result<(), JailError> {
    enforcement::check_level(policy.require, allow_unconfined, layers, f)?;
    if policy.allow_userns && !layers.mount && !allow_unconfined {
        return Err(JailError::LevelNotMet {
            required: "partial".into(),
            missing: format!(
                "--allow-userns turns Landlock's filesystem rules off, and the mount view is \
                 unavailable ({}): no layer would protect files; --allow-unconfined runs anyway",
                f.user_namespaces_detail
                    .as_deref()
                    .unwrap_or("user namespaces cannot be created")
            ),
        });
    }
    Ok(())
}

fn run_supervised(
    policy: &Policy,
    conf: Confinement,
    run: &mut RunState,
    allow_unconfined: bool,
    net: &mut NetRuntime,
    recorder: &mut Option<Recorder>,
) -> Result<RunEnd, JailError> {
    match super::supervisor::run(policy, &conf)? {
        Outcome::Exited(end) => {
            run.limits_reached = conf.limits.reached();
            Ok(end)
        }
        Outcome::NoNamespaces(e) => {
            // User namespaces looked available but could not be used (a container's seccomp
            // profile, an LSM, an outer jail): continue without the mount view only if the
            // policy allows it.
            run.features.user_namespaces = false;
            run.features.user_namespaces_detail = Some(format!("clone failed: {}", e.0));
            run.layers.mount = false;
            tracing::info!("no mount view: {}", e.0);
            check_level(policy, allow_unconfined, &run.layers, &run.features)?;
            net.prepare_fallback(&run.layers)?;
            run.net_plan = net_plan(
                policy,
                &run.layers,
                &run.features,
                net.fallback_listener.as_ref(),
            )?;
            run.limits = limits::compile(policy, &run.limits_host, false)?;
            let plans = compile(
                policy,
                &run.layers,
                &run.features,
                &run.net_plan,
                &run.limits,
            );
            let bounds = run.prepare_limits(policy)?;
            let mut conf = confinement(policy, plans, run, net, bounds)?;
            if let Some(r) = recorder {
                r.recheck(policy, &run.layers)?;
                r.arm(&mut conf);
            }
            match super::supervisor::run(policy, &conf)? {
                Outcome::Exited(end) => {
                    run.limits_reached = conf.limits.reached();
                    Ok(end)
                }
                Outcome::NoNamespaces(_) => unreachable!("no namespaces are requested"),
            }
        }
    }
}

/// Everything the child applies, compiled in advance, with the environment it execs with and the
/// read-only policy file it finds at JAIL_POLICY.
fn confinement(
    policy: &Policy,
    plans: Plans,
    run: &RunState,
    net: &NetRuntime,
    limits: limits::Prepared,
) -> Result<Confinement, JailError> {
    let (layers, net_plan) = (&run.layers, &run.net_plan);
    let file = PolicyFile::new(policy, layers, run.gaps(policy));
    let policy_json = serde_json::to_string_pretty(&file).expect("serializable");
    let mut envp = Vec::new();
    let allow_hosts = match &policy.net {
        NetPolicy::Proxy { allow_hosts, .. } => allow_hosts.as_slice(),
        _ => &[],
    };
    let proxy_env = net_plan
        .proxy
        .map(|addr| net::proxy_env(addr, allow_hosts))
        .unwrap_or_default();
    for (k, v) in &policy.env.vars {
        if ["JAIL", "JAIL_PROFILE", "JAIL_POLICY"]
            .iter()
            .any(|n| k.as_os_str() == *n)
        {
            continue;
        }
        // The proxy's variables replace whatever the caller had (names in either case).
        if proxy_env
            .iter()
            .any(|(name, _)| k.to_string_lossy().eq_ignore_ascii_case(name))
        {
            continue;
        }
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        if let Ok(c) = CString::new(kv) {
            envp.push(c);
        }
    }
    for (k, v) in &proxy_env {
        envp.push(CString::new(format!("{k}={v}")).expect("no NUL"));
    }
    envp.push(CString::new("JAIL=1").expect("no NUL"));
    envp.push(
        CString::new(format!("JAIL_PROFILE={}", policy.profile))
            .map_err(|_| JailError::BadInput("profile name contains a NUL byte".into()))?,
    );
    if layers.mount {
        envp.push(CString::new(format!("JAIL_POLICY={}", mounts::POLICY_FILE)).expect("no NUL"));
    }
    Ok(Confinement {
        mount: plans.mount,
        landlock: plans.landlock,
        seccomp: plans.seccomp.as_ref().map(seccomp::build).transpose()?,
        envp,
        policy_json,
        warning: degraded_warning(layers, run.gaps(policy)),
        unix: unix_mediation(policy, layers, &run.features, net_plan)?,
        net: net.setup(net_plan)?,
        limits,
        command_started: None,
    })
}

/// With unix sockets allowed and a seccomp layer, every connect is mediated: the channels are
/// made now, and the `--allow-socket` sockets identified as the host shows them.
fn unix_mediation(
    policy: &Policy,
    layers: &Layers,
    features: &Features,
    net_plan: &NetPlan,
) -> Result<Option<super::supervisor::UnixMediation>, JailError> {
    if !policy.allow_unix_sockets || !layers.seccomp {
        return Ok(None);
    }
    let mut allowed = std::collections::BTreeSet::new();
    let mut pins = Vec::new();
    for path in &policy.allow_sockets {
        let (id, pin) = super::unix_connect::allowed_socket(path)
            .map_err(|e| JailError::bad_path("--allow-socket", path, e))?;
        allowed.insert(id);
        pins.push(pin);
    }
    let channels = super::unix_connect::Channels::new()
        .map_err(|e| JailError::layer("unix sockets", "socketpair", e))?;
    let mut handed = vec![0, 1, 2];
    handed.extend(&policy.keep_fds);
    Ok(Some(super::supervisor::UnixMediation {
        channels: std::cell::RefCell::new(Some(channels)),
        allowed,
        pins,
        inherited: super::unix_connect::socket_inodes(&handed),
        // Landlock's abstract-socket scope (ABI 6) judges the connector's connects as the
        // command's; without it, only a network namespace of the jail's own keeps the host's
        // abstract sockets out of reach.
        abstract_refused: !(net_plan.namespace || layers.landlock && features.landlock_abi >= 6),
    }))
}

/// Never run half-confined without saying so: the line the supervisor prints once the layers
/// are known to hold (not before a fallback that may still refuse the run).
fn degraded_warning(layers: &Layers, gaps: Vec<String>) -> Option<String> {
    if layers.level() == enforcement::Level::Full {
        return None;
    }
    let missing: Vec<&str> = [
        (!layers.mount).then_some("mount view"),
        (!layers.landlock).then_some("landlock"),
        (!layers.seccomp).then_some("seccomp"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !layers.files_protected() {
        return Some(format!(
            "jail: warning: UNCONFINED (--allow-unconfined): no layer protects files; missing {}",
            missing.join(", ")
        ));
    }
    Some(format!(
        "jail: warning: partial confinement, missing {}; gaps: {}",
        missing.join(", "),
        gaps.join("; ")
    ))
}
