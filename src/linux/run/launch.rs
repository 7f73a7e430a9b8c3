//! The Linux launch, one straight line: detect what this system offers ([`Facts`]), decide the
//! whole run ([`plan::decide`], pure), check the level the caller requires, execute it under the
//! supervisor, then clean up what the command planted and hand back the [`Outcome`].
//!
//! Executing may find a fact wrong before the command runs: the namespaces cannot be used after
//! all, or no cgroup can be made. It then returns a named [`Fallback`], which becomes a fact,
//! and the run is decided again (`run`: one loop, bounded by the kinds of fallback). What an
//! attempt made once (the copy-on-write layers, the baselines, the report's file, the journal)
//! is kept while the new plan keeps their kind; a plan with copies where overlays were made
//! starts a new attempt (nothing ran).

use std::borrow::Cow;
use std::rc::Rc;
use std::sync::Arc;

use super::plan::{self, Denials, Facts, Fallback, RunPlan};
use super::run_state::RunState;
use super::supervisor::{self, CommandStarted, Confinement, RunEnd};
use super::{cow_run, ended_by};
use crate::enforcement::{self, Layers};
use crate::error::{EXIT_JAIL_ERROR, JailError};
use crate::linux::after::planted::Watch;
use crate::linux::after::protected_writes::ProtectedWrites;
use crate::linux::layers::net_setup::NetRuntime;
use crate::linux::layers::{exec_domain, limits, seccomp};
use crate::linux::observe::audit;
use crate::linux::observe::events::{self, Events};
use crate::linux::observe::execs::ExecLog;
use crate::linux::observe::recorder::Recorder;
use crate::policy::Policy;
use crate::policy::settings::RunSettings;
use crate::probe;
use crate::sandbox::dry_run::DryRun;
use crate::sandbox::outcome::{Outcome, Status};
use crate::workspace::store::LayerKind;

/// What a run of `policy` would get here, every layer's plan included (`--dry-run`): the plan
/// [`plan::decide`] returns for the facts detected now. The namespaces are tried for real (a
/// throwaway child, ~1 ms), so that it shows what a run would get. Nothing records a dry run:
/// its plan is the one of a run without a report, summary or event stream.
/// A level the run would not reach is refused as the run would refuse it (`--require`), so a
/// dry run's exit 0 means the run would start.
pub fn dry_run(policy: &Policy, options: &RunSettings) -> Result<String, JailError> {
    let mut facts = Facts::new(probe::detect(true), limits::Host::detect());
    let mut net = NetRuntime::new(policy)?;
    facts.trust_ca = net.trust_ca();
    network_facts(&mut net, &mut facts)?;
    let plan = plan::decide(policy, &facts)?;
    check_level(policy, options.allow_unconfined, &plan, &facts)?;
    let out = DryRun {
        policy,
        features: &facts.features,
        layers: plan.layers,
        level: plan.level(),
        gaps: &plan.gaps,
        plans: &plan,
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
    let mut events = match &options.events {
        Some(spec) => Some(Events::new(events::target(spec)?, &policy.command)),
        // A session's report says which exec changed what: the layers are watched anyway.
        None if options.session.is_some() => {
            Some(Events::new(events::Target::Nowhere, &policy.command))
        }
        None => None,
    };
    let mut facts = Facts::new(features, limits::Host::detect());
    let result = run(policy, options, &mut facts, &mut events);
    if let Some(stream) = events {
        match &result {
            Ok(o) => stream.exit(o.exit_code, o.status.name(), None),
            Err(e) => stream.exit(e.exit_code(), "jail_error", Some(e.to_string())),
        }
    }
    result
}

/// Decides and executes until the run ends. Bounded: a round that does not end the run ends
/// in a fallback, and [`Facts::learn`] takes each kind of fallback once (a second is an
/// error), so there are at most `1 + Fallback::KINDS` rounds.
fn run(
    policy: &Policy,
    options: &RunSettings,
    facts: &mut Facts,
    events: &mut Option<Events>,
) -> Result<Outcome, JailError> {
    let mut attempt: Option<Attempt> = None;
    for _ in 0..=Fallback::KINDS {
        let mut a = match attempt.take() {
            Some(mut a) if !a.stale(facts) => match a.redecide(options, facts) {
                Ok(()) => a,
                Err(e) => return a.finish(options, facts, Err(e), events.as_ref()),
            },
            stale => {
                if let Some(a) = stale {
                    a.abandon(events.as_ref());
                }
                Attempt::start(policy, options, facts, events)?
            }
        };
        let fallback = match a.execute(options, facts, events.as_ref()) {
            Ok(Executed::Fallback(f)) => f,
            Ok(Executed::Ended(end, reached)) => {
                return a.finish(options, facts, Ok((end, reached)), events.as_ref());
            }
            Err(e) => return a.finish(options, facts, Err(e), events.as_ref()),
        };
        if let Err(e) = facts.learn(fallback) {
            return a.finish(options, facts, Err(e), events.as_ref());
        }
        attempt = Some(a);
    }
    unreachable!("each fallback is learned once, and the round after the last one ends the run")
}

/// The network's facts for the layers `facts` allow: without a network namespace the proxy
/// listens on the host's loopback (made once), and the plan names its port.
fn network_facts(net: &mut NetRuntime, facts: &mut Facts) -> Result<(), JailError> {
    net.prepare_fallback(&Layers::from_features(&facts.features))?;
    facts.fallback_proxy = net.fallback_addr()?;
    Ok(())
}

/// How one execution of a plan ended.
enum Executed {
    /// The command ran (what its cgroups counted, when read).
    Ended(RunEnd, limits::Reached),
    /// A fact was wrong; nothing ran.
    Fallback(Fallback),
}

/// What an attempt makes once for its copy-on-write layers' kind, and the plan it executes.
struct Attempt<'p> {
    /// The policy the plan is decided for: with copies, each root read-only and its copy
    /// writable in its place, the caches read-only.
    policy: Cow<'p, Policy>,
    /// The layers' kind, and whether the policy depends on it (copy-on-write roots or caches).
    kind: LayerKind,
    adapts: bool,
    plan: RunPlan,
    cow: Option<cow_run::CowRun>,
    net: NetRuntime,
    watch: Watch,
    protected_writes: ProtectedWrites,
    recorder: Option<Recorder>,
    /// A session's execs, for the event stream and the report.
    execs: Option<Arc<ExecLog>>,
    journal: Option<super::journal::Entry>,
    /// Told the command's pid once it exists: the layers' watch and the trash's emptying.
    janitor: Rc<Option<CommandStarted>>,
    /// Told the command's pid and the run's cgroups (copied layers, no pid namespace).
    tree: Option<cow_run::TreeRecord>,
}

impl<'p> Attempt<'p> {
    /// Makes the copy-on-write layers of the kind `facts` allow (their start stamp precedes
    /// every write), decides the run, checks its level, and takes what must be known before
    /// anything runs: the writable trees' baseline, the report's file, the journal.
    fn start(
        policy: &'p Policy,
        options: &RunSettings,
        facts: &mut Facts,
        events: &mut Option<Events>,
    ) -> Result<Attempt<'p>, JailError> {
        let kind = plan::layer_kind(facts);
        let mut cow = cow_run::start(policy, options.patch.as_deref(), kind)?;
        let adapts = !policy.cow.is_empty() || !policy.caches.is_empty();
        // A copied layer changes the policy (the root read-only, the copy writable in its place).
        let policy = match kind {
            LayerKind::Overlay => Cow::Borrowed(policy),
            LayerKind::Copy => {
                let mut p = match &cow {
                    Some(c) => c.copy_policy(policy),
                    None => policy.clone(),
                };
                caches_read_only(&mut p);
                Cow::Owned(p)
            }
        };
        facts.overlays = match &cow {
            Some(c) if kind == LayerKind::Overlay => c.layers(),
            _ => Vec::new(),
        };
        let mut net = NetRuntime::new(&policy)?;
        facts.trust_ca = net.trust_ca();
        network_facts(&mut net, facts)?;
        // Opened now: whether the audit records can be read decides what Landlock logs.
        let audit = options
            .recording()
            .then(|| audit::open(facts.features.landlock_abi));
        facts.denials = match &audit {
            None => Denials::NotRead,
            Some(Ok(_)) => Denials::Readable,
            Some(Err(why)) => Denials::Unavailable(why.0.clone()),
        };
        let plan = plan::decide(&policy, facts)?;
        crate::timing::mark("planned");
        if let Some(c) = cow.as_mut() {
            c.hold_to(&plan.limits.layer);
        }
        check_level(&policy, options.allow_unconfined, &plan, facts)?;
        // Before anything runs: the baseline of the writable trees, for what the command plants.
        let watch = Watch::start(&policy)?;
        let protected_writes = ProtectedWrites::start(&policy, plan.layers.mount);
        crate::timing::mark("writable trees' baseline taken");
        let mut recorder = match audit {
            None => None,
            Some(audit) => Some(Recorder::start(
                options.report.as_deref(),
                &policy,
                &plan.layers,
                audit,
            )?),
        };
        // What the run must do after the command ends, journalled before it starts, for the
        // next jail to do if this supervisor is killed.
        let journal = super::journal::begin(
            &watch,
            recorder.as_ref().and_then(Recorder::report_file),
            &policy,
        );
        let execs = options.session.is_some().then(|| Arc::new(ExecLog::new()));
        if let Some(stream) = events.as_mut() {
            let found = (cow.as_ref(), recorder.as_mut(), execs.as_ref());
            watch_events(stream, &policy, &plan, found)?;
        }
        announce(&policy, options, &plan);
        Ok(Attempt {
            janitor: Rc::new(cow.as_ref().and_then(|c| c.started())),
            tree: cow.as_ref().and_then(|c| c.tree_record()),
            policy,
            kind,
            adapts,
            plan,
            cow,
            net,
            watch,
            protected_writes,
            recorder,
            execs,
            journal,
        })
    }

    /// Whether the plan for `facts` needs other layers than this attempt made: overlays need
    /// the namespaces, so without them the run starts again with copies and read-only caches.
    fn stale(&self, facts: &Facts) -> bool {
        self.adapts && self.kind != plan::layer_kind(facts)
    }

    /// Decides the run again with what a fallback taught, keeping this attempt's layers. The
    /// report's path must still be out of the command's reach if the layers changed.
    fn redecide(&mut self, options: &RunSettings, facts: &mut Facts) -> Result<(), JailError> {
        network_facts(&mut self.net, facts)?;
        let plan = plan::decide(&self.policy, facts)?;
        let changed = plan.layers != self.plan.layers;
        self.plan = plan;
        if changed {
            check_level(&self.policy, options.allow_unconfined, &self.plan, facts)?;
            if let Some(r) = self.recorder.as_mut() {
                r.recheck(&self.policy, &self.plan.layers)?;
            }
        }
        Ok(())
    }

    /// Applies the plan under the supervisor: the run's end, or the fallback that must be
    /// decided first (nothing ran).
    fn execute(
        &mut self,
        options: &RunSettings,
        facts: &Facts,
        events: Option<&Events>,
    ) -> Result<Executed, JailError> {
        let policy: &Policy = &self.policy;
        let limits = match self.plan.limits.prepare() {
            Ok(p) => p,
            // Every bound the cgroups were to hold is jail's default: rlimits instead.
            Err(e) if self.plan.limits.cgroup_bounds_are_defaults() => {
                tracing::info!("no cgroup: {e}");
                return Ok(Executed::Fallback(Fallback::NoCgroup(e)));
            }
            Err(e) => return Err(e),
        };
        crate::timing::mark("limits prepared");
        let hooks = self.command_started(&limits, events);
        let mounts = self.cow.as_ref().and_then(|c| c.layer_mounts());
        let conf = confinement(
            policy,
            options,
            &self.plan,
            &self.net,
            limits,
            (hooks, mounts, self.execs.clone()),
        )?;
        crate::timing::mark("confinement built");
        if let Some(j) = &self.journal {
            let report = self.recorder.as_ref().map(|r| {
                let run = RunState {
                    facts,
                    plan: &self.plan,
                    limits_reached: Default::default(),
                };
                r.provisional(policy, &run, &self.net)
            });
            j.attempt(&conf.limits.cgroup_dirs(), self.plan.layers.mount, report);
        }
        match supervisor::run(policy, &conf)? {
            supervisor::Outcome::Exited(mut end) => {
                // Read for the report, and to tell an end by SIGKILL at the memory bound.
                let reached = match self.recorder.is_some() || end.code == 128 + libc::SIGKILL {
                    true => conf.limits.reached(),
                    false => Default::default(),
                };
                let facts = ended_by::End {
                    code: end.code,
                    timed_out: end.timed_out,
                    stopped: end.stopped,
                };
                end.ended_by = ended_by::EndedBy::of(
                    facts,
                    policy.timeout,
                    &self.plan.limits,
                    reached.oom_kills,
                );
                Ok(Executed::Ended(end, reached))
            }
            // User namespaces looked available but could not be used (a container's seccomp
            // profile, an LSM, an outer jail): decided again without the mount view, which
            // goes on only if the policy allows it.
            supervisor::Outcome::NoNamespaces(e) => {
                tracing::info!("no mount view: {}", e.0);
                let why = format!("clone failed: {}", e.0);
                Ok(Executed::Fallback(Fallback::NoNamespaces(why)))
            }
        }
    }

    /// Who is told the command's pid once it exists, in this order: the audit reader, the
    /// record of the tree, the layers' janitor, the event stream.
    fn command_started(
        &self,
        limits: &limits::Prepared,
        events: Option<&Events>,
    ) -> Vec<CommandStarted> {
        let mut hooks: Vec<CommandStarted> = Vec::new();
        hooks.extend(
            self.recorder
                .as_ref()
                .and_then(|r| r.command_started(&self.plan)),
        );
        if let Some(tree) = &self.tree {
            let (tree, cgroups) = (Rc::clone(tree), limits.cgroup_dirs());
            hooks.push(Box::new(move |pid| tree(pid, &cgroups)));
        }
        if self.janitor.is_some() {
            let janitor = Rc::clone(&self.janitor);
            hooks.push(Box::new(move |pid| {
                if let Some(j) = janitor.as_ref() {
                    j(pid)
                }
            }));
        }
        if let Some(log) = &self.execs {
            let log = Arc::clone(log);
            hooks.push(Box::new(move |pid| log.forker_started(pid)));
        }
        if let Some(stream) = events {
            hooks.extend(stream.command_started(self.plan.denials_reported.clone()));
        }
        hooks
    }

    /// Nothing ran, and the layers were of the wrong kind: thrown away.
    fn abandon(self, events: Option<&Events>) {
        if let Some(stream) = events {
            stream.stop_watch();
        }
        if let Some(c) = self.cow {
            c.abandon();
        }
    }

    /// After the run, or jail's own failure once the attempt began (the command may have run
    /// before it): the layers handed over, what was planted moved aside, the report written.
    fn finish(
        self,
        options: &RunSettings,
        facts: &Facts,
        result: Result<(RunEnd, limits::Reached), JailError>,
        events: Option<&Events>,
    ) -> Result<Outcome, JailError> {
        if let Some(stream) = events {
            // The tree is gone: every write it made is in the watcher's queue.
            stream.stop_watch();
        }
        let (result, limits_reached) = match result {
            Ok((end, reached)) => (Ok(end), reached),
            Err(e) => (Err(e), Default::default()),
        };
        // Said once, as the first thing after the run: a bound, not the command, ended it.
        if let Some(bound) = result.as_ref().ok().and_then(|end| end.ended_by) {
            crate::text::say(bound.line());
        }
        let policy: &Policy = &self.policy;
        let cow_roots: Vec<std::path::PathBuf> = (self.cow.as_ref())
            .map(|c| c.watched().into_iter().map(|(root, _)| root).collect())
            .unwrap_or_default();
        let handed = self.cow.map(|c| c.finish()).transpose();
        let (mut changes, planted) = self.watch.finish();
        crate::timing::mark("planted files checked");
        // The copy-on-write roots' changes come from their layers (exact, O(changes)), not a
        // walk.
        if let Ok(Some((items, _))) = &handed {
            changes.changes.extend(items.iter().cloned());
            changes.changes.sort_by(|a, b| a.path.cmp(&b.path));
        }
        let mut roots = self.watch.roots().to_vec();
        roots.extend(cow_roots);
        for path in self.protected_writes.finish() {
            crate::text::say(crate::linux::after::protected_writes::hint(&path));
        }
        let plan = &self.plan;
        let quarantined =
            crate::linux::after::quarantine::move_aside_all(&planted, !plan.layers.mount);
        let run = RunState {
            facts,
            plan,
            limits_reached,
        };
        let report = match self.recorder {
            Some(r) => Some(r.finish(
                policy,
                &run,
                &self.net,
                &result,
                (roots, changes, self.execs.as_deref()),
                options.summary,
            )?),
            None => None,
        };
        let end = result?;
        let cow_run = handed?.and_then(|(_, id)| id);
        Ok(Outcome {
            cow_run,
            status: Status::of(end.code, end.signal, end.timed_out, end.stopped),
            exit_code: if quarantined {
                end.code
            } else {
                EXIT_JAIL_ERROR
            },
            level: plan.level(),
            gaps: plan.gaps.clone(),
            report: report.filter(|_| options.record),
        })
    }
}

/// The event stream for an attempt: opened where the command cannot reach it, the watch of the
/// copy-on-write layers prepared, and told of the denials the recorder reads.
fn watch_events(
    stream: &mut Events,
    policy: &Policy,
    plan: &RunPlan,
    (cow, recorder, execs): (
        Option<&cow_run::CowRun>,
        Option<&mut Recorder>,
        Option<&Arc<ExecLog>>,
    ),
) -> Result<(), JailError> {
    stream.bind(
        policy,
        crate::linux::observe::recorder::private_tmp(policy, &plan.layers),
    )?;
    if let Some(log) = execs {
        stream.attach_execs(log);
    }
    if let Some(c) = cow {
        match c.layer_mounts() {
            Some(mounts) => stream.prepare_on_tmpfs(&c.roots(), mounts),
            None => stream.prepare(&c.watched(), plan.cow),
        }
    }
    if let (Some(r), Some(listen)) = (recorder, stream.denial_listener()) {
        r.tell_denials(listen);
    }
    Ok(())
}

/// The notice (`--notice`), and the log's line for the launch.
fn announce(policy: &Policy, options: &RunSettings, plan: &RunPlan) {
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
        plan.level().name(),
        plan.layers.names()
    );
}

/// `--keep-fd` descriptors are open and safe to hand over; `--control-fd` is not among them.
fn check_descriptors(policy: &Policy, options: &RunSettings) -> Result<(), JailError> {
    for fd in &policy.keep_fds {
        if !crate::linux::layers::privileges::fd_is_open(*fd) {
            return Err(JailError::bad_flag(
                "--keep-fd",
                fd.to_string(),
                format!("--keep-fd {fd}: not an open descriptor"),
            ));
        }
        let control = options.control_fd;
        if control.is_some_and(|c| c == *fd || crate::sandbox::control::same_file(c, *fd)) {
            return Err(JailError::bad_flag(
                "--keep-fd",
                fd.to_string(),
                format!(
                    "--keep-fd {fd}: is the control socket (--control-fd), which the command never gets"
                ),
            ));
        }
        let events = options
            .events
            .as_deref()
            .and_then(|s| events::target(s).ok());
        let same = match &events {
            Some(events::Target::Fd(e)) => *e == *fd || crate::sandbox::control::same_file(*e, *fd),
            // A named pipe (or file) given as FILE and also held open on a kept descriptor.
            Some(events::Target::File(path)) => same_inode(path, *fd),
            Some(events::Target::Nowhere) | None => false,
        };
        if same {
            return Err(JailError::bad_flag(
                "--keep-fd",
                fd.to_string(),
                format!(
                    "--keep-fd {fd}: is the event stream (--events), which the command never gets: \
                 it could forge the run's events"
                ),
            ));
        }
        if let Some(why) =
            crate::linux::layers::unix_connect::kept_descriptor_risk(*fd, policy.allow_unix_sockets)
        {
            return Err(JailError::bad_flag(
                "--keep-fd",
                fd.to_string(),
                format!("--keep-fd {fd}: {why}"),
            ));
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
fn check_level(
    policy: &Policy,
    allow_unconfined: bool,
    plan: &RunPlan,
    facts: &Facts,
) -> Result<(), JailError> {
    let (layers, f) = (&plan.layers, &facts.features);
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

/// Everything the child applies, from the plan, with the channels and sockets made now, and
/// who is told the command's pid.
fn confinement(
    policy: &Policy,
    options: &RunSettings,
    plan: &RunPlan,
    net: &NetRuntime,
    limits: limits::Prepared,
    (command_started, layer_mounts, execs): (
        Vec<CommandStarted>,
        Option<crate::linux::layers::layer_bound::Mounts>,
        Option<Arc<ExecLog>>,
    ),
) -> Result<Confinement, JailError> {
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
        command_started,
        stop_requests: options.control_fd,
        // Where init's tmpfs mounts for the layers go, with the view.
        layer_mounts: plan.mount.as_ref().and(layer_mounts),
        session: match &options.session {
            Some(spec) => Some(super::session::SessionSetup::new(
                spec.clone(),
                policy.profile.clone(),
                plan.level().name().to_string(),
                policy.cwd.clone(),
                execs.unwrap_or_default(),
                exec_domain::compile(
                    plan.landlock.as_ref(),
                    plan.seccomp.is_some() && seccomp::refuses_landlock(policy),
                ),
            )?),
            None => None,
        },
    })
}

/// With unix sockets mediated or listen() held to the bind ports, the channels are made now,
/// and the `--allow-socket` sockets identified as the host shows them.
fn unix_mediation(
    policy: &Policy,
    plan: &RunPlan,
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
        let (id, pin) = crate::linux::layers::unix_connect::allowed_socket(path)
            .map_err(|e| JailError::bad_path("--allow-socket", path, e))?;
        allowed.insert(id);
        pins.push(pin);
    }
    let channels = crate::linux::layers::unix_connect::Channels::new()
        .map_err(|e| JailError::layer("unix sockets", "socketpair", e))?;
    let mut handed = vec![0, 1, 2];
    handed.extend(&policy.keep_fds);
    Ok(Some(supervisor::UnixMediation {
        notified: crate::linux::layers::unix_connect::Notified {
            connect,
            listen: listen_ports.is_some(),
        },
        listen_ports,
        channels: std::cell::RefCell::new(Some(channels)),
        allowed,
        pins,
        inherited: crate::linux::layers::unix_connect::socket_inodes(&handed),
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
