//! jail: confine a command, and everything it starts, with a read-only mount view, Landlock and
//! seccomp. The binary is a thin shell over [`run_cli`].

pub mod claims;
pub mod cli;
pub mod enforcement;
pub mod error;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod macos;
pub mod net;
pub mod notice;
pub mod policy;
pub mod policy_file;
pub mod probe;
#[cfg(target_os = "linux")]
pub mod run_report;
pub mod status;
pub mod text;
// Used where no sandbox exists; unit-tested everywhere.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub mod unconfined;

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Parser;
use serde::Serialize;

use crate::cli::{Cli, Command, ProfileCommand, RequireArg, RunArgs, TmpArg};
use crate::enforcement::Layers;
use crate::error::{EXIT_JAIL_ERROR, JailError};
use crate::policy::env::{EnvFlags, child_env};
use crate::policy::profile::{Catalog, Expansion, Resolved, TmpOption};
use crate::policy::{Access, Policy, PolicyInput, ProfilePathRule, Require};
use crate::probe::Features;

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
        Some(Command::Profile { command }) => profile_command(command),
        Some(Command::Status { json }) => Ok(status::status(json)),
        Some(Command::Notice { profile }) => notice(profile),
        None => launch(&cli.run),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            text::say(format!("jail: {e}"));
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
            level: enforcement::Level,
            gaps: Vec<String>,
            homes: String,
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
            level: layers.level(),
            gaps,
            limits: limits.map(|l| l.json),
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&out).expect("serializable")
        );
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
    let host = linux::limits::Host::detect();
    let plan = linux::limits::compile(&Policy::probe_default(), &host, layers.mount).ok()?;
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
    let denials = match linux::audit::open(f.landlock_abi) {
        Ok(_) => "yes (Landlock audit records)".to_string(),
        Err(why) => format!("no: {why}"),
    };
    #[cfg(not(target_os = "linux"))]
    let denials = "no (Linux only)".to_string();
    #[cfg(target_os = "linux")]
    let unix = match (f.seccomp, linux::unix_connect::available()) {
        (true, Ok(())) => "refused; when allowed, every connect mediated by the supervisor".into(),
        (true, Err(why)) => format!("refused; allowing them fails to start: {why}"),
        (false, _) => "not confined (no seccomp)".to_string(),
    };
    #[cfg(not(target_os = "linux"))]
    let unix = "see the Seatbelt profile".to_string();
    format!(
        "network (--net):  {net}\nreport denials:   {denials}\nunix sockets:     {unix}\nhomes (--home):   {}\n",
        home_text(f)
    )
}

/// What `--home hidden` gets here: the default run's read mode, and whether hiding works.
fn home_text(f: &Features) -> String {
    let by = match (f.user_namespaces, f.landlock_abi > 0) {
        (true, true) => "mount view and Landlock",
        (true, false) => "mount view",
        (false, true) => "Landlock (names listable)",
        (false, false) => return "visible; hidden needs the mount view or Landlock".into(),
    };
    format!("visible by default; hidden (--home hidden) enforced by {by}")
}

/// $XDG_CONFIG_HOME/jail/profiles, or ~/.config/jail/profiles: never anything in the project.
fn user_profile_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("jail/profiles"))
}

fn catalog() -> Result<Catalog, JailError> {
    Catalog::load(user_profile_dir().as_deref())
}

fn profile_command(command: ProfileCommand) -> Result<i32, JailError> {
    let cat = catalog()?;
    match command {
        ProfileCommand::List => {
            for (name, entry) in &cat.entries {
                let description = cat
                    .resolve(name)
                    .ok()
                    .and_then(|r| r.description)
                    .unwrap_or_default();
                let source = match (&entry.source, entry.shadows_embedded) {
                    (policy::profile::Source::File(p), true) => {
                        format!("{} (shadows the embedded one)", p.display())
                    }
                    (src, _) => src.to_string(),
                };
                println!("{name:<12} {description}\n{:<12} from {source}", "");
            }
        }
        ProfileCommand::Show {
            name,
            resolved,
            json,
        } => {
            let entry = cat.entries.get(&name).ok_or_else(|| {
                JailError::BadInput(format!("unknown profile '{name}' (see jail profile list)"))
            })?;
            let r = cat.resolve(&name)?;
            match (resolved, json) {
                (false, false) => print!("{}", entry.text),
                (true, false) => print!("{}", resolved_toml(&r)),
                (_, true) => {
                    #[derive(Serialize)]
                    struct Out<'a> {
                        source: &'a policy::profile::Source,
                        #[serde(flatten)]
                        profile: &'a Resolved,
                    }
                    let out = Out {
                        source: &entry.source,
                        profile: &r,
                    };
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&out).expect("serializable")
                    );
                }
            }
        }
    }
    Ok(0)
}

/// A resolved profile written back as TOML, each rule with the profile it came from.
fn resolved_toml(r: &Resolved) -> String {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut out = format!(
        "# profile {} (resolved: {})\n",
        r.name,
        r.chain.join(" -> ")
    );
    if let Some(d) = &r.description {
        out.push_str(&format!("description = {}\n", q(d)));
    }
    out.push_str("\n[paths]\n");
    for (key, access, protect) in [
        ("ro", Access::Ro, false),
        ("rw", Access::Rw, false),
        ("hide", Access::Hide, false),
        ("protect", Access::Ro, true),
    ] {
        out.push_str(&format!("{key} = [\n"));
        for p in r
            .paths
            .iter()
            .filter(|p| p.access == access && p.protect == protect && p.seed.is_none())
        {
            out.push_str(&format!("    {},  # {}\n", q(&p.template), p.profile));
        }
        out.push_str("]\n");
    }
    out.push_str("\n[paths.guard]\n");
    for g in &r.guards {
        let keys: Vec<String> = g.keys.iter().map(|k| q(k)).collect();
        out.push_str(&format!(
            "{} = [{}]  # {}\n",
            q(&g.template),
            keys.join(", "),
            g.profile
        ));
    }
    out.push_str("\n[paths.seed]\n");
    for p in r.paths.iter().filter(|p| p.seed.is_some()) {
        let content = p.seed.as_deref().unwrap_or_default();
        out.push_str(&format!(
            "{} = {}  # {}\n",
            q(&p.template),
            q(content),
            p.profile
        ));
    }
    out.push_str(&format!("\n[env]\nclear = {}\n", r.env.clear));
    for (key, list) in [("keep", &r.env.keep), ("deny", &r.env.deny)] {
        let items: Vec<String> = list.iter().map(|s| q(s)).collect();
        out.push_str(&format!("{key} = [{}]\n", items.join(", ")));
    }
    out.push_str("\n[env.set]\n");
    for (k, v) in &r.env.set {
        out.push_str(&format!("{k} = {}\n", q(v)));
    }
    out.push_str("\n[options]\n");
    let o = &r.options;
    if let Some(t) = o.tmp {
        out.push_str(&format!(
            "tmp = {}\n",
            q(if t == TmpOption::Host {
                "host"
            } else {
                "private"
            })
        ));
    }
    if let Some(req) = o.require {
        out.push_str(&format!(
            "require = {}\n",
            serde_json::to_string(&req).expect("enum")
        ));
    }
    if let Some(b) = o.allow_userns {
        out.push_str(&format!("allow_userns = {b}\n"));
    }
    if let Some(b) = o.allow_unix_sockets {
        out.push_str(&format!("allow_unix_sockets = {b}\n"));
    }
    if let Some(h) = o.home {
        out.push_str(&format!(
            "home = {}\n",
            serde_json::to_string(&h).expect("enum")
        ));
    }
    if let Some(t) = &o.timeout {
        out.push_str(&format!("timeout = {}\n", q(t)));
    }
    if let Some(rules) = &o.net {
        let items: Vec<String> = rules.iter().map(|s| q(s)).collect();
        out.push_str(&format!("net = [{}]\n", items.join(", ")));
    }
    out.push_str("\n[limits]\n");
    out.push_str(&r.limits.to_toml());
    out
}

fn notice(profile: Option<String>) -> Result<i32, JailError> {
    if profile.is_none() {
        if let Some(file) = policy_file::read_policy_file() {
            println!("{}", notice::notice_text(&notice::Summary::of_file(&file)));
            return Ok(0);
        }
    }
    let mut args = RunArgs::for_profile(profile.unwrap_or_else(|| "default".into()));
    // The sentences describe the profile, not a run from here: a profile that hides the homes
    // must not refuse because this is asked from HOME.
    args.cwd = Some("/".into());
    let policy = prepare(&args, false)?;
    println!("{}", notice::notice_text(&notice::Summary::of(&policy)));
    Ok(0)
}

/// Resolves the profile and the flags into one policy. With `create_missing`, the profile's
/// writable directories that do not exist yet are created (an agent's state directory on its
/// first run); a dry run creates nothing.
pub fn prepare(args: &RunArgs, create_missing: bool) -> Result<Policy, JailError> {
    let base_dir = std::env::current_dir()
        .map_err(|e| JailError::Io(format!("cannot read the current directory: {e}")))?;
    let cat = catalog()?;
    let prof = cat.resolve(&args.profile)?;
    // Its real path: a HOME spelled through a symlink must still be refused as a writable
    // root and recognised under one.
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .map(|h| policy::real_path(&h));
    let vars = |name: &str| std::env::var(name).ok();
    let x = Expansion {
        home: home.as_deref(),
        cwd: &base_dir,
        var: &vars,
    };
    let mut profile_paths = Vec::new();
    for p in &prof.paths {
        let expanded = x
            .expand(&p.template)
            .map_err(|e| JailError::BadInput(format!("profile {}: {e}", p.profile)))?;
        let Some(path) = expanded else { continue };
        let path = PathBuf::from(path);
        if !path.is_absolute() {
            return Err(JailError::BadInput(format!(
                "profile {} ({}): path '{}' is not absolute",
                p.profile,
                cat.locate(&p.profile, &p.template),
                path.display()
            )));
        }
        if create_missing && p.access == Access::Rw && path.is_absolute() && !path.exists() {
            create_private_dir(&path).map_err(|e| {
                JailError::bad_path(&format!("profile {}", p.profile), &path, e.to_string())
            })?;
        }
        if let (true, Some(content)) = (create_missing, &p.seed) {
            if std::fs::symlink_metadata(&path).is_err() {
                let seeded = if p.template.ends_with('/') {
                    create_private_dir(&path)
                } else {
                    seed_file(&path, content)
                };
                seeded.map_err(|e| {
                    JailError::bad_path(&format!("profile {}", p.profile), &path, e.to_string())
                })?;
            }
        }
        profile_paths.push(ProfilePathRule {
            path,
            access: p.access,
            profile: p.profile.clone(),
            protect: p.protect,
        });
    }
    // A protected config may name a script inside the agent's writable state (a status line,
    // a hook, a notify command): the host's agent runs it, so it is protected too.
    let named = named_in_protected(&profile_paths, home.as_deref());
    profile_paths.extend(named);
    // The daemons the environment names are hidden wherever it says they are.
    for path in policy::sockets::env_named_sockets(&vars, home.as_deref()) {
        profile_paths.push(ProfilePathRule {
            path,
            access: Access::Hide,
            profile: "environment".into(),
            protect: false,
        });
    }
    let mut guarded = Vec::new();
    for g in &prof.guards {
        let expanded = x
            .expand(&g.template)
            .map_err(|e| JailError::BadInput(format!("profile {}: {e}", g.profile)))?;
        if let Some(path) = expanded.map(PathBuf::from).filter(|p| p.is_absolute()) {
            guarded.push((path, g.keys.clone()));
        }
    }
    // The environment first: the credential files its variables name are hidden too.
    let flags = EnvFlags::from_args(&args.env, &args.env_deny, args.env_clear)
        .map_err(JailError::BadInput)?;
    let caller: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let env = child_env(&caller, &prof.env, &flags, &x)
        .map_err(|e| JailError::BadInput(format!("profile {}: {e}", prof.name)))?;
    let o = &prof.options;
    let timeout = match (args.timeout, &o.timeout) {
        (Some(t), _) => Some(t),
        (None, Some(text)) => Some(
            cli::parse_duration(text)
                .map_err(|e| JailError::BadInput(format!("profile {}: timeout {e}", prof.name)))?,
        ),
        (None, None) => None,
    };
    let input = PolicyInput {
        ro: args.ro.clone(),
        rw: args.rw.clone(),
        hide: args.hide.clone(),
        cwd: args.cwd.clone(),
        base_dir: base_dir.clone(),
        tmp_host: match args.tmp {
            Some(t) => t == TmpArg::Host,
            None => o.tmp == Some(TmpOption::Host),
        },
        require: args
            .require
            .map(|r| match r {
                RequireArg::Full => Require::Full,
                RequireArg::Landlock => Require::Landlock,
                RequireArg::Mount => Require::Mount,
                RequireArg::Any => Require::Any,
            })
            .or(o.require),
        keep_fds: args.keep_fd.clone(),
        timeout,
        allow_userns: args.allow_userns || o.allow_userns.unwrap_or(false),
        allow_unix_sockets: args.allow_unix_sockets || o.allow_unix_sockets.unwrap_or(false),
        allow_sockets: args.allow_socket.clone(),
        limits: prof
            .limits
            .merged(policy::limits::Limits::from_flags(&args.limit).map_err(JailError::BadInput)?),
        net: if args.net.is_empty() {
            net::NetPolicy::parse(o.net.as_deref().unwrap_or_default())
                .map_err(|e| JailError::BadInput(format!("profile {}: net {e}", prof.name)))?
        } else {
            net::NetPolicy::parse(&args.net).map_err(|e| JailError::BadInput(e.to_string()))?
        },
        command: args.command.clone(),
        profile: prof.name.clone(),
        home: home.clone(),
        profile_paths,
        guarded,
        credential_files: env.credential_files.clone(),
        homes: homes_input(args, o.home, home.as_deref(), &base_dir),
    };
    let mut policy = policy::resolve(&input)?;
    policy.env = env;
    policy::sockets::strip_socket_variables(&mut policy.env, &caller, &policy.allow_sockets);
    Ok(policy)
}

/// `--home` (else the profile's), and when hidden the homes of this host, the PATH
/// directories and the command's programs, as real paths.
fn homes_input(
    args: &RunArgs,
    profile: Option<policy::homes::HomeMode>,
    home: Option<&std::path::Path>,
    base: &std::path::Path,
) -> policy::homes::HomesInput {
    use policy::homes::{HOME_ROOTS, HomeMode, HomesInput, passwd_homes};
    let mode = match args.home {
        Some(cli::HomeArg::Hidden) => HomeMode::Hidden,
        Some(cli::HomeArg::Visible) => HomeMode::Visible,
        None => profile.unwrap_or_default(),
    };
    if mode == HomeMode::Visible {
        return HomesInput::default();
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let mut homes: Vec<PathBuf> = HOME_ROOTS.iter().map(PathBuf::from).collect();
    homes.extend(passwd_homes(&passwd));
    homes.extend(home.map(PathBuf::from));
    let path_dirs = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    let programs = args
        .command
        .first()
        .map(|c| policy::homes::programs_of(c.as_ref(), &path_dirs, base))
        .unwrap_or_default();
    HomesInput {
        mode,
        homes: homes.iter().map(|h| policy::real_path(h)).collect(),
        path_dirs: path_dirs
            .iter()
            .filter(|d| d.is_absolute())
            .map(|d| policy::real_path(d))
            .collect(),
        programs,
    }
}

/// The files that the profile's protected files name (as `/abs/path`, `~/path`, `$HOME/path`)
/// inside one of the profile's writable directories: protected as well.
fn named_in_protected(
    paths: &[ProfilePathRule],
    home: Option<&std::path::Path>,
) -> Vec<ProfilePathRule> {
    let writable: Vec<&PathBuf> = paths
        .iter()
        .filter(|p| p.access == Access::Rw)
        .map(|p| &p.path)
        .collect();
    let mut out: Vec<ProfilePathRule> = Vec::new();
    for rule in paths.iter().filter(|p| p.protect) {
        let Ok(text) = policy::gitconfig::read_small(&rule.path) else {
            continue;
        };
        let separators = |c: char| c.is_whitespace() || "\"'`,;=()[]{}<>|&".contains(c);
        for token in text.split(separators) {
            let rest = ["~/", "$HOME/", "${HOME}/"]
                .iter()
                .find_map(|p| token.strip_prefix(p));
            let path = match (rest, home) {
                (Some(rest), Some(h)) => h.join(rest),
                (None, _) if token.starts_with('/') => PathBuf::from(token),
                _ => continue,
            };
            let path = policy::absolute(std::path::Path::new("/"), &path);
            let inside = writable.iter().any(|w| path.starts_with(w) && path != **w);
            let known = paths.iter().chain(&out).any(|p| p.path == path);
            if inside && !known && out.len() < 256 {
                out.push(ProfilePathRule {
                    path,
                    access: Access::Ro,
                    profile: rule.profile.clone(),
                    protect: true,
                });
            }
        }
    }
    out
}

/// A protected file the agent would otherwise create itself (and see moved aside after every
/// run): written new, never over anything, readable by its owner only.
fn seed_file(path: &std::path::Path, content: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = path.parent() {
        create_private_dir(parent)?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?
        .write_all(content.as_bytes())
}

fn create_private_dir(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

/// Runs the command confined by what this system offers.
/// How a resolved policy is run: what a caller chooses beside the policy itself (the command
/// line's `--dry-run`, `--report`, `--summary`, `--notice` and `--allow-unconfined`). The
/// launchers take this and the policy, never the command line.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Print the plans every layer compiled, as JSON, and run nothing.
    pub dry_run: bool,
    /// Write the run report (JSON) to this file.
    pub report: Option<PathBuf>,
    /// Print the run report's summary on stderr after the run.
    pub summary: bool,
    /// Print what the jail allows before the command starts.
    pub notice: bool,
    /// Run even when no layer can protect files.
    pub allow_unconfined: bool,
}

impl RunOptions {
    pub fn from_args(args: &RunArgs) -> RunOptions {
        RunOptions {
            dry_run: args.dry_run,
            report: args.report.clone(),
            summary: args.summary,
            notice: args.notice,
            allow_unconfined: args.allow_unconfined,
        }
    }
}

#[cfg(target_os = "linux")]
fn launch(args: &RunArgs) -> Result<i32, JailError> {
    let policy = prepare(args, !args.dry_run)?;
    linux::launch::launch(&policy, &RunOptions::from_args(args))
}

#[cfg(target_os = "macos")]
fn launch(args: &RunArgs) -> Result<i32, JailError> {
    let policy = prepare(args, !args.dry_run)?;
    macos::launch::launch(&policy, &RunOptions::from_args(args))
}

/// No sandbox this build knows of: refuse, unless the caller accepts running unconfined.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn launch(args: &RunArgs) -> Result<i32, JailError> {
    unconfined::launch(args)
}
