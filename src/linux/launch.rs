//! The Linux launch: compile each layer's plan from the policy, check the level the caller
//! requires, run the command under the supervisor (falling back without namespaces when they
//! cannot be used), and clean up what the command planted.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use serde::Serialize;

use super::supervisor::{Confinement, Outcome};
use super::{landlock, mounts, seccomp};
use crate::cli::RunArgs;
use crate::error::{EXIT_JAIL_ERROR, JailError};
use crate::policy::{self, Policy};
use crate::probe::{self, Features};
use crate::report::{self, Layers};
use crate::{prepare, status};

/// The plans every active layer compiled from the one policy.
#[derive(Serialize)]
struct DryRun<'a> {
    policy: &'a Policy,
    features: &'a Features,
    layers: Layers,
    level: report::Level,
    gaps: Vec<String>,
    mount: Option<&'a mounts::MountPlan>,
    landlock: Option<&'a landlock::LandlockPlan>,
    seccomp: Option<&'a seccomp::SeccompPlan>,
}

struct Plans {
    mount: Option<mounts::MountPlan>,
    landlock: Option<landlock::LandlockPlan>,
    seccomp: Option<seccomp::SeccompPlan>,
}

fn compile(policy: &Policy, layers: &Layers, f: &Features) -> Plans {
    Plans {
        mount: layers.mount.then(|| mounts::compile(policy)),
        landlock: layers
            .landlock
            .then(|| landlock::compile(policy, f.landlock_abi, layers.mount, &landlock::list_dir)),
        seccomp: layers.seccomp.then(|| seccomp::compile(policy)),
    }
}

pub fn launch(args: &RunArgs) -> Result<i32, JailError> {
    let policy = prepare(args, !args.dry_run)?;
    for fd in &policy.keep_fds {
        if !super::privileges::fd_is_open(*fd) {
            return Err(JailError::BadInput(format!(
                "--keep-fd {fd}: not an open descriptor"
            )));
        }
    }
    // A dry run tries the namespaces for real (a throwaway child, ~1 ms), so that it shows what a
    // run would get; a real run tries them by running, and falls back if it must.
    let features = probe::detect(args.dry_run);
    let layers = Layers::from_features(&features);
    let plans = compile(&policy, &layers, &features);
    if args.dry_run {
        let out = DryRun {
            policy: &policy,
            features: &features,
            layers,
            level: layers.level(),
            gaps: report::gaps(&policy, &layers, &features),
            mount: plans.mount.as_ref(),
            landlock: plans.landlock.as_ref(),
            seccomp: plans.seccomp.as_ref(),
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&out).expect("serializable")
        );
        return Ok(0);
    }
    report::check_level(policy.require, args.allow_unconfined, &layers, &features)?;
    if args.notice {
        eprintln!("{}", status::notice_text(&status::Summary::of(&policy)));
    }
    let conf = confinement(&policy, plans, &layers, &features)?;
    tracing::info!(level = ?layers.level(), ?layers, "launching {:?}", policy.command);
    let code = run_supervised(&policy, conf, layers, features, args.allow_unconfined)?;
    if !quarantine_created_protected(&policy) {
        return Ok(EXIT_JAIL_ERROR);
    }
    Ok(code)
}

fn run_supervised(
    policy: &Policy,
    conf: Confinement,
    mut layers: Layers,
    features: Features,
    allow_unconfined: bool,
) -> Result<i32, JailError> {
    match super::supervisor::run(policy, &conf)? {
        Outcome::Exited(code) => Ok(code),
        Outcome::NoNamespaces(e) => {
            // User namespaces looked available but could not be used (a container's seccomp
            // profile, an LSM, an outer jail): continue without the mount view only if the
            // policy allows it.
            let mut features = features;
            features.user_namespaces = false;
            features.user_namespaces_detail = Some(format!("clone failed: {}", e.0));
            layers.mount = false;
            tracing::info!("no mount view: {}", e.0);
            report::check_level(policy.require, allow_unconfined, &layers, &features)?;
            let conf = confinement(
                policy,
                compile(policy, &layers, &features),
                &layers,
                &features,
            )?;
            match super::supervisor::run(policy, &conf)? {
                Outcome::Exited(code) => Ok(code),
                Outcome::NoNamespaces(_) => unreachable!("no namespaces are requested"),
            }
        }
    }
}

/// A protected name that did not exist at start could be created by the command: no layer can
/// refuse one new name while allowing others in the same directory. After the run, what appeared
/// is renamed aside (`NAME.jail-quarantine`), so that a planted `.git/commondir`, `.envrc` or
/// `.mcp.json` takes no effect outside, and the user is told.
fn quarantine_created_protected(policy: &Policy) -> bool {
    let mut all_moved = true;
    for path in policy.absent_protected.iter().chain(&new_git_dirs(policy)) {
        if std::fs::symlink_metadata(path).is_err() {
            continue;
        }
        match super::quarantine::rename_aside(path) {
            Ok(aside) => eprintln!(
                "jail: warning: the command created the protected path {}; moved it to {} \
                 (review it before putting it back)",
                path.display(),
                aside.display()
            ),
            Err(e) => {
                all_moved = false;
                eprintln!(
                    "jail: the command created the protected path {} and it could not be moved \
                     aside ({e}): do not run git or an agent there before reviewing it",
                    path.display()
                )
            }
        }
    }
    all_moved
}

/// `.git` entries (directories, gitfiles, symlinks) that appeared in the writable trees during the
/// run: git on the host would honour their config and hooks (an embedded repository's fsmonitor
/// runs on the user's next `git status`). Searched as deep as the protected names are.
fn new_git_dirs(policy: &Policy) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (root, before) in &policy.git_entries_at_start {
        let after = policy::find_git_entries(root);
        for git in after.entries {
            if before.entries.contains(&git) {
                continue;
            }
            let parent = git.parent().unwrap_or(root);
            // When the first scan stopped at its bound, a .git in a directory it never looked
            // at may be the user's own: say so rather than move it.
            if before.truncated && !before.visited.contains(parent) && parent.exists() {
                eprintln!(
                    "jail: warning: {} may be new, but {} is too large to tell; review it",
                    git.display(),
                    root.display()
                );
                continue;
            }
            out.push(git);
        }
        if after.truncated {
            eprintln!(
                "jail: warning: {} is too large to search whole for .git entries the command may \
                 have planted",
                root.display()
            );
        }
    }
    out
}

/// Everything the child applies, compiled in advance, with the environment it execs with and the
/// read-only policy file it finds at JAIL_POLICY.
fn confinement(
    policy: &Policy,
    plans: Plans,
    layers: &Layers,
    features: &Features,
) -> Result<Confinement, JailError> {
    let file = status::PolicyFile::new(policy, layers, report::gaps(policy, layers, features));
    let policy_json = serde_json::to_string_pretty(&file).expect("serializable");
    let mut envp = Vec::new();
    for (k, v) in &policy.env.vars {
        if ["JAIL", "JAIL_PROFILE", "JAIL_POLICY"]
            .iter()
            .any(|n| k.as_os_str() == *n)
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
        warning: degraded_warning(policy, layers, features),
    })
}

/// Never run half-confined without saying so: the line the supervisor prints once the layers
/// are known to hold (not before a fallback that may still refuse the run).
fn degraded_warning(policy: &Policy, layers: &Layers, f: &Features) -> Option<String> {
    if layers.level() == report::Level::Full {
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
    let gaps = report::gaps(policy, layers, f);
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
