//! jail: confine a command, and everything it starts, with a read-only mount view, Landlock and
//! seccomp. The binary is a thin shell over [`run_cli`].

pub mod cli;
pub mod error;
pub mod linux;
pub mod policy;
pub mod probe;
pub mod report;

use std::path::PathBuf;

use clap::Parser;
use serde::Serialize;

use crate::cli::{Cli, Command, RequireArg, RunArgs, TmpArg};
use crate::error::{EXIT_JAIL_ERROR, JailError};
use crate::linux::supervisor::{Confinement, Outcome};
use crate::linux::{landlock, mounts, seccomp};
use crate::policy::{Policy, PolicyInput, Require};
use crate::probe::Features;
use crate::report::Layers;

/// Parses the command line, runs, and returns the process exit code.
pub fn run_cli() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_JAIL_ERROR } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    init_logging(cli.run.verbose);
    let result = match cli.subcommand {
        Some(Command::Probe { json }) => probe(json),
        None => launch(&cli.run),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("jail: {e}");
            EXIT_JAIL_ERROR
        }
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .with_target(false)
        .try_init();
}

fn probe(json: bool) -> Result<i32, JailError> {
    let f = probe::detect(true);
    let layers = Layers::from_features(&f);
    if json {
        #[derive(Serialize)]
        struct Out<'a> {
            features: &'a Features,
            layers: Layers,
            level: report::Level,
        }
        let out = Out {
            features: &f,
            layers,
            level: layers.level(),
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&out).expect("serializable")
        );
    } else {
        print!("{}", report::probe_text(&f, &layers));
    }
    Ok(0)
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn policy_input(args: &RunArgs) -> Result<PolicyInput, JailError> {
    let base_dir = std::env::current_dir()
        .map_err(|e| JailError::Io(format!("cannot read the current directory: {e}")))?;
    Ok(PolicyInput {
        ro: args.ro.clone(),
        rw: args.rw.clone(),
        hide: args.hide.clone(),
        cwd: args.cwd.clone(),
        base_dir,
        tmp_host: args.tmp == TmpArg::Host,
        require: args.require.map(|r| match r {
            RequireArg::Full => Require::Full,
            RequireArg::Landlock => Require::Landlock,
            RequireArg::Mount => Require::Mount,
            RequireArg::Any => Require::Any,
        }),
        keep_fds: args.keep_fd.clone(),
        timeout: args.timeout,
        allow_userns: args.allow_userns,
        allow_unix_sockets: args.allow_unix_sockets,
        command: args.command.clone(),
        home: env_path("HOME"),
        xdg_runtime_dir: env_path("XDG_RUNTIME_DIR"),
        ssh_auth_sock: env_path("SSH_AUTH_SOCK"),
        // GPG_AGENT_INFO is "socket:pid:protocol".
        gpg_agent_info: std::env::var("GPG_AGENT_INFO")
            .ok()
            .and_then(|v| v.split(':').next().map(PathBuf::from)),
    })
}

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

fn launch(args: &RunArgs) -> Result<i32, JailError> {
    let policy = policy::resolve(&policy_input(args)?)?;
    for fd in &policy.keep_fds {
        if !linux::privileges::fd_is_open(*fd) {
            return Err(JailError::BadInput(format!(
                "--keep-fd {fd}: not an open descriptor"
            )));
        }
    }
    let features = probe::detect(false);
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
    let conf = confinement(plans)?;
    warn_if_degraded(&policy, &layers, &features);
    tracing::info!(level = ?layers.level(), ?layers, "launching {:?}", policy.command);
    let code = run_supervised(&policy, conf, layers, features, args.allow_unconfined)?;
    quarantine_created_protected(&policy);
    Ok(code)
}

fn run_supervised(
    policy: &Policy,
    conf: Confinement,
    mut layers: Layers,
    features: Features,
    allow_unconfined: bool,
) -> Result<i32, JailError> {
    match linux::supervisor::run(policy, &conf)? {
        Outcome::Exited(code) => Ok(code),
        Outcome::NoNamespaces(e) => {
            // User namespaces looked available but could not be created (a container's seccomp
            // profile, an LSM): continue without the mount view only if the policy allows it.
            let mut features = features;
            features.user_namespaces = false;
            features.user_namespaces_detail = Some(format!("clone failed: {}", e.0));
            layers.mount = false;
            tracing::info!("no mount view: {}", e.0);
            report::check_level(policy.require, allow_unconfined, &layers, &features)?;
            let conf = confinement(compile(policy, &layers, &features))?;
            warn_if_degraded(policy, &layers, &features);
            match linux::supervisor::run(policy, &conf)? {
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
fn quarantine_created_protected(policy: &Policy) {
    for path in &policy.absent_protected {
        if std::fs::symlink_metadata(path).is_err() {
            continue;
        }
        match linux::quarantine::rename_aside(path) {
            Ok(aside) => eprintln!(
                "jail: warning: the command created the protected path {}; moved it to {} \
                 (review it before putting it back)",
                path.display(),
                aside.display()
            ),
            Err(e) => eprintln!(
                "jail: warning: the command created the protected path {} and it could not be \
                 moved aside ({e}); review it before trusting it outside the jail",
                path.display()
            ),
        }
    }
}

fn confinement(plans: Plans) -> Result<Confinement, JailError> {
    Ok(Confinement {
        mount: plans.mount,
        landlock: plans.landlock,
        seccomp: plans.seccomp.as_ref().map(seccomp::build).transpose()?,
    })
}

/// Never run half-confined without saying so.
fn warn_if_degraded(policy: &Policy, layers: &Layers, f: &Features) {
    if layers.level() == report::Level::Full {
        return;
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
        eprintln!(
            "jail: warning: UNCONFINED (--allow-unconfined): no layer protects files; missing {}",
            missing.join(", ")
        );
        return;
    }
    eprintln!(
        "jail: warning: partial confinement, missing {}; gaps: {}",
        missing.join(", "),
        gaps.join("; ")
    );
}
