//! The Linux launch, one straight line: detect what this system offers, plan every layer
//! ([`super::plan`], pure), check the level the caller requires, apply under the supervisor
//! (replanning without namespaces when they cannot be used after all), then clean up what the
//! command planted and hand back the [`Outcome`].

use super::events::{self, Events};
use super::net_setup::NetRuntime;
use super::planted::Watch;
use super::recorder::Recorder;
use super::run_state::RunState;
use super::supervisor::{self, Confinement, RunEnd};
use super::{ended_by, limits, seccomp};
use crate::enforcement::{self, Layers};
use crate::error::{EXIT_JAIL_ERROR, JailError};
use crate::policy::Policy;
use crate::policy::settings::RunSettings;
use crate::probe::{self, Features};
use crate::sandbox::dry_run::DryRun;
use crate::sandbox::outcome::{Outcome, Status};
use crate::workspace::store::LayerKind;

/// What a run of `policy` would get here, every layer's plan included (`--dry-run`). The
/// namespaces are tried for real (a throwaway child, ~1 ms), so that it shows what a run would
/// get.
/// The options change nothing here (the macOS dry run refuses what macOS cannot do).
pub fn dry_run(policy: &Policy, _options: &RunSettings) -> Result<String, JailError> {
    let (_, run) = plan_run(policy, probe::detect(true))?;
    let out = DryRun {
        policy,
        features: &run.features,
        layers: run.plan.layers,
        level: run.plan.level(),
        gaps: &run.plan.gaps,
        plans: &run.plan,
    };
    Ok(crate::text::versioned_json(&out))
}

/// Runs `policy` (resolved by [`crate::prepare::policy`]) as `options` say.
pub fn launch(policy: &Policy, options: &RunSettings) -> Result<Outcome, JailError> {
    check_descriptors(policy, options)?;
    // Before this run's baseline: what a killed run planted is moved aside first, not taken for
    // part of the tree as this run found it.
    super::journal::finish_dead_runs();
    crate::timing::mark("journal looked at");
    // A real run tries the namespaces by running, and falls back if it must.
    let features = probe::detect(false);
    crate::timing::mark("features detected");
    let overlay = Layers::from_features(&features).mount;
    let mut events = match &options.events {
        Some(spec) => Some(Events::new(events::target(spec)?, &policy.command)),
        None => None,
    };
    let result = match attempt(policy, options, features, overlay, &mut events) {
        // The namespaces looked usable but were not: copy-on-write roots get a copied layer.
        Err(Attempt::NeedsCopy(features)) => {
            match attempt(policy, options, *features, false, &mut events) {
                Err(Attempt::NeedsCopy(_)) => unreachable!("a copied layer needs no namespaces"),
                Err(Attempt::Failed(e)) => Err(e),
                Ok(o) => Ok(o),
            }
        }
        Err(Attempt::Failed(e)) => Err(e),
        Ok(o) => Ok(o),
    };
    if let Some(stream) = events {
        match &result {
            Ok(o) => stream.exit(o.exit_code, o.status.name(), None),
            Err(e) => stream.exit(e.exit_code(), "jail_error", Some(e.to_string())),
        }
    }
    result
}

/// Why one attempt at a run ended without an outcome.
enum Attempt {
    Failed(JailError),
    /// Copy-on-write or throwaway roots, and the namespaces their overlays need could not be
    /// made (nothing ran): again with copies and read-only caches.
    NeedsCopy(Box<Features>),
}

impl From<JailError> for Attempt {
    fn from(e: JailError) -> Attempt {
        Attempt::Failed(e)
    }
}

/// One attempt: with the copy-on-write roots as overlays, or (`overlay` false) as copies.
fn attempt(
    policy: &Policy,
    options: &RunSettings,
    features: Features,
    overlay: bool,
    events: &mut Option<Events>,
) -> Result<Outcome, Attempt> {
    // The copy-on-write layers first: their start stamp precedes every write, and a copied
    // layer changes the policy (the root read-only, the copy writable in its place).
    let kind = if overlay {
        LayerKind::Overlay
    } else {
        LayerKind::Copy
    };
    let mut cow = super::cow_run::start(policy, options.patch.as_deref(), kind)?;
    let adapted;
    let policy = if overlay {
        policy
    } else {
        let mut p = match &cow {
            Some(c) => c.copy_policy(policy),
            None => policy.clone(),
        };
        caches_read_only(&mut p);
        adapted = p;
        &adapted
    };
    let layers = match &cow {
        Some(c) if overlay => c.layers(),
        _ => Vec::new(),
    };
    let (mut net, mut run) = plan_run(policy, features)?;
    crate::timing::mark("planned");
    if let Some(c) = cow.as_mut() {
        c.hold_to(&run.plan.limits.layer);
    }
    check_level(policy, options.allow_unconfined, &run)?;
    // Before anything runs: the baseline of the writable trees, for what the command plants.
    let watch = Watch::start(policy)?;
    let protected_writes =
        super::protected_writes::ProtectedWrites::start(policy, run.plan.layers.mount);
    crate::timing::mark("writable trees' baseline taken");
    let mut recorder = match options.recording() {
        false => None,
        true => Some(Recorder::start(
            options.report.as_deref(),
            policy,
            &run.features,
            &run.plan.layers,
        )?),
    };
    // What the run must do after the command ends, journalled before it starts, for the next
    // jail to do if this supervisor is killed.
    let journal = super::journal::begin(
        &watch,
        recorder.as_ref().and_then(Recorder::report_file),
        policy,
    );
    if let Some(stream) = events.as_mut() {
        stream.bind(
            policy,
            super::recorder::private_tmp(policy, &run.plan.layers),
        )?;
        if let Some(c) = &cow {
            match c.layer_mounts() {
                Some(mounts) => stream.prepare_on_tmpfs(&c.roots(), mounts),
                None => stream.prepare(&c.watched(), kind),
            }
        }
        if let (Some(r), Some(listen)) = (recorder.as_mut(), stream.denial_listener()) {
            r.tell_denials(listen);
        }
    }
    if options.notice {
        eprintln!(
            "{}",
            crate::notice::notice_text(&crate::notice::Summary::of(policy))
        );
        if let Some(note) = policy.env.removal_note() {
            crate::text::say(note);
        }
    }
    tracing::info!(
        "launching {} at level {} (layers: {})",
        crate::text::printable(&shown_command(&policy.command)),
        run.plan.level().name(),
        run.plan.layers.names()
    );
    let hooks = CowHooks {
        layers: &layers,
        started: cow.as_ref().and_then(|c| c.started()),
        mounts: cow.as_ref().and_then(|c| c.layer_mounts()),
        tree: cow.as_ref().and_then(|c| c.tree_record()),
    };
    let result = apply(
        policy,
        options,
        (&mut run, &mut net),
        &mut recorder,
        hooks,
        events.as_ref(),
        journal.as_ref(),
    );
    if let Some(stream) = events.as_ref() {
        // The tree is gone: every write it made is in the watcher's queue.
        stream.stop_watch();
    }
    let result = match result {
        Ok(Applied::NeedsCopy) => {
            if let Some(c) = cow {
                c.abandon();
            }
            return Err(Attempt::NeedsCopy(Box::new(run.features.clone())));
        }
        Ok(Applied::Ended(end)) => Ok(end),
        Err(e) => Err(e),
    };
    // Said once, as the first thing after the run: a bound, not the command, ended it.
    if let Some(bound) = result.as_ref().ok().and_then(|end| end.ended_by) {
        crate::text::say(bound.line());
    }
    // Also after jail's own failure: the command may have run before it.
    let cow_roots: Vec<std::path::PathBuf> = cow
        .as_ref()
        .map(|c| c.watched().into_iter().map(|(root, _)| root).collect())
        .unwrap_or_default();
    let handed = cow.map(|c| c.finish()).transpose();
    let (mut changes, planted) = watch.finish();
    crate::timing::mark("planted files checked");
    // The copy-on-write roots' changes come from their layers (exact, O(changes)), not a walk.
    if let Ok(Some(items)) = &handed {
        changes.changes.extend(items.iter().cloned());
        changes.changes.sort_by(|a, b| a.path.cmp(&b.path));
    }
    let mut roots = watch.roots().to_vec();
    roots.extend(cow_roots);
    for path in protected_writes.finish() {
        crate::text::say(super::protected_writes::hint(&path));
    }
    let quarantined = super::quarantine::move_aside_all(&planted, !run.plan.layers.mount);
    let report = match recorder {
        Some(r) => Some(r.finish(
            policy,
            &run,
            &net,
            &result,
            (roots, changes),
            options.summary,
        )?),
        None => None,
    };
    let end = result?;
    handed?;
    Ok(Outcome {
        status: Status::of(end.code, end.signal, end.timed_out, end.stopped),
        exit_code: if quarantined {
            end.code
        } else {
            EXIT_JAIL_ERROR
        },
        level: run.plan.level(),
        gaps: run.plan.gaps.clone(),
        report: report.filter(|_| options.record),
    })
}

/// The network's runtime (the proxy, its socket on the host without a namespace) and the run's
/// first plan, for `features`.
fn plan_run(policy: &Policy, features: Features) -> Result<(NetRuntime, RunState), JailError> {
    let mut net = NetRuntime::new(policy)?;
    net.prepare_fallback(&Layers::from_features(&features))?;
    let fallback = net.fallback_addr()?;
    let run = RunState::new(
        policy,
        features,
        limits::Host::detect(),
        fallback,
        net.trust_ca(),
    )?;
    Ok((net, run))
}

/// `--keep-fd` descriptors are open and safe to hand over; `--control-fd` is not among them.
fn check_descriptors(policy: &Policy, options: &RunSettings) -> Result<(), JailError> {
    for fd in &policy.keep_fds {
        if !super::privileges::fd_is_open(*fd) {
            return Err(JailError::BadInput(format!(
                "--keep-fd {fd}: not an open descriptor"
            )));
        }
        let control = options.control_fd;
        if control.is_some_and(|c| c == *fd || crate::sandbox::control::same_file(c, *fd)) {
            return Err(JailError::BadInput(format!(
                "--keep-fd {fd}: is the control socket (--control-fd), which the command never gets"
            )));
        }
        let events = options
            .events
            .as_deref()
            .and_then(|s| events::target(s).ok());
        let same = match &events {
            Some(events::Target::Fd(e)) => *e == *fd || crate::sandbox::control::same_file(*e, *fd),
            // A named pipe (or file) given as FILE and also held open on a kept descriptor.
            Some(events::Target::File(path)) => same_inode(path, *fd),
            None => false,
        };
        if same {
            return Err(JailError::BadInput(format!(
                "--keep-fd {fd}: is the event stream (--events), which the command never gets: \
                 it could forge the run's events"
            )));
        }
        if let Some(why) = super::unix_connect::kept_descriptor_risk(*fd, policy.allow_unix_sockets)
        {
            return Err(JailError::BadInput(format!("--keep-fd {fd}: {why}")));
        }
    }
    Ok(())
}

/// Whether the descriptor `fd` is open on the file `path` names (not following a symlink).
fn same_inode(path: &std::path::Path, fd: i32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(named) = std::fs::symlink_metadata(path) else {
        return false;
    };
    // SAFETY: fstat into a zeroed stat; a closed descriptor only fails.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return false;
    }
    named.dev() == st.st_dev && named.ino() == st.st_ino
}

/// The level the caller requires, and files protected by some layer. With --allow-userns,
/// Landlock's filesystem rules are off (they forbid a nested sandbox's mounts): only the mount
/// view protects files then, and without it nothing does.
fn check_level(policy: &Policy, allow_unconfined: bool, run: &RunState) -> Result<(), JailError> {
    let (layers, f) = (&run.plan.layers, &run.features);
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

/// Without the mount view no throwaway layer can be mounted: the caches stay readable and
/// become read-only (never writable on the host), said once.
fn caches_read_only(policy: &mut Policy) {
    if policy.caches.is_empty() {
        return;
    }
    for r in policy
        .rules
        .iter_mut()
        .filter(|r| policy.caches.contains(&r.path))
    {
        r.access = crate::policy::Access::Ro;
    }
    let names: Vec<String> = policy
        .caches
        .iter()
        .map(|c| c.display().to_string())
        .collect();
    crate::text::say(format!(
        "jail: note: --cache {} read-only: no mount view, so no throwaway layer",
        names.join(" ")
    ));
    policy.caches.clear();
}

/// How applying the plan ended.
enum Applied {
    Ended(RunEnd),
    /// The namespaces the layers need could not be made: nothing ran.
    NeedsCopy,
}

/// What a run's copy-on-write layers add to each attempt's confinement.
struct CowHooks<'a> {
    /// (root, layer directory) for the overlays.
    layers: &'a [(std::path::PathBuf, std::path::PathBuf)],
    /// Told the command's pid once it exists.
    started: Option<supervisor::CommandStarted>,
    /// Where the layers' tmpfs mounts go.
    mounts: Option<super::layer_bound::Mounts>,
    /// Told the command's pid and the run's cgroups.
    tree: Option<super::cow_run::TreeRecord>,
}

/// Applies the plan under the supervisor; when the namespaces turn out unusable, replans without
/// them and applies that.
fn apply(
    policy: &Policy,
    options: &RunSettings,
    (run, net): (&mut RunState, &mut NetRuntime),
    recorder: &mut Option<Recorder>,
    cow: CowHooks,
    events: Option<&Events>,
    journal: Option<&super::journal::Entry>,
) -> Result<Applied, JailError> {
    let CowHooks {
        layers,
        started: janitor,
        mounts,
        tree,
    } = cow;
    let janitor = std::rc::Rc::new(janitor);
    loop {
        let limits = run.prepare_limits(policy)?;
        crate::timing::mark("limits prepared");
        let mut conf = confinement(policy, options, run, net, limits)?;
        crate::timing::mark("confinement built");
        if let Some(m) = conf.mount.as_mut() {
            m.layers = layers.to_vec();
            conf.layer_mounts = mounts.clone();
        }
        if let Some(r) = recorder.as_mut() {
            r.arm(&mut conf);
        }
        if let Some(tree) = &tree {
            let (tree, cgroups) = (std::rc::Rc::clone(tree), conf.limits.cgroup_dirs());
            conf.command_started
                .push(Box::new(move |pid| tree(pid, &cgroups)));
        }
        if janitor.is_some() {
            let janitor = std::rc::Rc::clone(&janitor);
            conf.command_started.push(Box::new(move |pid| {
                if let Some(j) = janitor.as_ref() {
                    j(pid)
                }
            }));
        }
        if let Some(stream) = events {
            let denials = match recorder.as_ref().and_then(|r| r.denials_unavailable()) {
                Some(why) => Err(why),
                None if !conf.landlock.as_ref().is_some_and(|l| l.log_denials) => {
                    Err("Landlock does not log this run's denials".into())
                }
                None => Ok(()),
            };
            stream.arm(&mut conf, denials);
        }
        if let Some(j) = journal {
            let report = recorder.as_ref().map(|r| r.provisional(policy, run, net));
            j.attempt(&conf.limits.cgroup_dirs(), run.plan.layers.mount, report);
        }
        match supervisor::run(policy, &conf)? {
            supervisor::Outcome::Exited(mut end) => {
                // Read for the report, and to tell an end by SIGKILL at the memory bound.
                if recorder.is_some() || end.code == 128 + libc::SIGKILL {
                    run.limits_reached = conf.limits.reached();
                }
                let facts = ended_by::End {
                    code: end.code,
                    timed_out: end.timed_out,
                    stopped: end.stopped,
                };
                end.ended_by = ended_by::EndedBy::of(
                    facts,
                    policy.timeout,
                    &run.plan.limits,
                    run.limits_reached.oom_kills,
                );
                return Ok(Applied::Ended(end));
            }
            supervisor::Outcome::NoNamespaces(e)
                if !layers.is_empty() || !policy.caches.is_empty() =>
            {
                // Overlays need the namespaces: the run starts again with copied layers.
                run.features.user_namespaces = false;
                run.features.user_namespaces_detail = Some(format!("clone failed: {}", e.0));
                return Ok(Applied::NeedsCopy);
            }
            supervisor::Outcome::NoNamespaces(e) if run.plan.layers.mount => {
                // User namespaces looked available but could not be used (a container's seccomp
                // profile, an LSM, an outer jail): continue without the mount view only if the
                // policy allows it.
                tracing::info!("no mount view: {}", e.0);
                drop(conf);
                let mut layers = run.plan.layers;
                layers.mount = false;
                net.prepare_fallback(&layers)?;
                run.without_namespaces(
                    policy,
                    format!("clone failed: {}", e.0),
                    net.fallback_addr()?,
                )?;
                check_level(policy, options.allow_unconfined, run)?;
                if let Some(r) = recorder.as_mut() {
                    r.recheck(policy, &run.plan.layers)?;
                }
            }
            supervisor::Outcome::NoNamespaces(_) => {
                unreachable!("no namespaces are requested without the mount view")
            }
        }
    }
}

/// Everything the child applies, from the plan, with the channels and sockets made now.
fn confinement(
    policy: &Policy,
    options: &RunSettings,
    run: &RunState,
    net: &NetRuntime,
    limits: limits::Prepared,
) -> Result<Confinement, JailError> {
    let plan = &run.plan;
    Ok(Confinement {
        mount: plan.mount.clone(),
        landlock: plan.landlock.clone(),
        seccomp: plan.seccomp.as_ref().map(seccomp::build).transpose()?,
        envp: plan.envp.clone(),
        policy_json: plan.policy_json.clone(),
        warning: plan.warning.clone(),
        unix: unix_mediation(policy, plan)?,
        net: net.setup(&plan.net)?,
        limits,
        command_started: Vec::new(),
        stop_requests: options.control_fd,
        layer_mounts: None,
    })
}

/// With unix sockets mediated or listen() held to the bind ports, the channels are made now,
/// and the `--allow-socket` sockets identified as the host shows them.
fn unix_mediation(
    policy: &Policy,
    plan: &super::plan::RunPlan,
) -> Result<Option<supervisor::UnixMediation>, JailError> {
    let listen_ports = plan.net.listen.supervised().map(<[u16]>::to_vec);
    let (paths, abstract_refused, connect) = match &plan.unix_sockets {
        super::plan::UnixSockets::Mediated {
            allowed,
            abstract_refused,
        } => (allowed.as_slice(), *abstract_refused, true),
        _ if listen_ports.is_some() => (&[][..], false, false),
        _ => return Ok(None),
    };
    let mut allowed = std::collections::BTreeSet::new();
    let mut pins = Vec::new();
    for path in paths {
        let (id, pin) = super::unix_connect::allowed_socket(path)
            .map_err(|e| JailError::bad_path("--allow-socket", path, e))?;
        allowed.insert(id);
        pins.push(pin);
    }
    let channels = super::unix_connect::Channels::new()
        .map_err(|e| JailError::layer("unix sockets", "socketpair", e))?;
    let mut handed = vec![0, 1, 2];
    handed.extend(&policy.keep_fds);
    Ok(Some(supervisor::UnixMediation {
        notified: super::unix_connect::Notified {
            connect,
            listen: listen_ports.is_some(),
        },
        listen_ports,
        channels: std::cell::RefCell::new(Some(channels)),
        allowed,
        pins,
        inherited: super::unix_connect::socket_inodes(&handed),
        abstract_refused,
    }))
}

/// The command line as a shell would show it: each argument quoted only when it needs it.
fn shown_command(argv: &[std::ffi::OsString]) -> String {
    argv.iter()
        .map(|a| crate::text::shell_word(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}
