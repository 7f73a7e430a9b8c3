//! Reads this host for a request and resolves it into the one [`Policy`] every layer compiles:
//! the working directory, HOME (as its real path), the caller's environment, /etc/passwd and
//! PATH (for `--home hidden`), the profile files (embedded, then the user's), and the files the
//! profile protects (for the scripts they name). With a real run it also creates the profile's
//! missing state directories and seeds its protected files, so that the mount view has
//! something to bind. The command line and [`crate::Jail`] both come through here: one
//! resolution for both.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::JailError;
use crate::net;
use crate::policy::env::{EnvFlags, child_env};
use crate::policy::homes::{HOME_ROOTS, HomeMode, HomesInput, passwd_homes};
use crate::policy::profile::{Catalog, Expansion};
use crate::policy::settings::RunSettings;
use crate::policy::{self, Access, Policy, PolicyInput, ProfilePathRule};

/// The home directory `~` names: HOME when it is an absolute path, else the one the password
/// database gives this user (as a shell expands `~` without HOME: `setpriv` and `env -i` pass
/// none, or the previous user's). With why HOME was not taken, when it was set but relative.
fn home_dir() -> (Option<PathBuf>, Option<String>) {
    let var = std::env::var_os("HOME").filter(|h| !h.is_empty());
    if let Some(h) = var.as_ref().map(PathBuf::from).filter(|h| h.is_absolute()) {
        return (Some(h), None);
    }
    let passwd = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map(|u| u.dir)
        .filter(|d| d.is_absolute());
    let why = var.map(|h| {
        format!(
            "HOME '{}' is not an absolute path; ~ is {}",
            crate::text::path_text(Path::new(&h)),
            match &passwd {
                Some(d) => format!("{} (the password database's)", crate::text::path_text(d)),
                None => "nowhere (the password database names no home for this user)".into(),
            }
        )
    });
    (passwd, why)
}

/// $XDG_CONFIG_HOME/jail/profiles, or ~/.config/jail/profiles: never anything in the project.
/// None where the home is another user's that this one cannot enter (HOME=/root passed on by
/// `setpriv`): what is there is not this user's, and no run should stop over it.
fn user_profile_dir() -> Option<PathBuf> {
    if let Some(xdg) = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        return Some(xdg.join("jail/profiles"));
    }
    let home = home_dir().0?;
    let dir = home.join(".config/jail/profiles");
    let denied = matches!(std::fs::metadata(&dir), Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied);
    let others = std::fs::metadata(&home).is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid() != nix::unistd::geteuid().as_raw()
    });
    (!(denied && others)).then_some(dir)
}

/// What a resolved profile leaves out without failing, one sentence each: the embedded
/// default's protections (`base = false`), and each rule or variable whose `${VAR}` is unset
/// (a hidden path that names nothing has nothing to hide; any other rule the profile wanted is
/// missing from the run).
pub fn profile_warnings(prof: &policy::profile::Resolved, x: &Expansion) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(by) = &prof.base_left_out_by {
        out.push(format!(
            "profile {}: base = false (in profile {}) leaves out the default protections: \
             credentials and agent sockets are not hidden, secrets stay in the environment",
            crate::text::printable(&prof.name),
            crate::text::printable(by)
        ));
    }
    let unset = |template: &str| matches!(x.expand(template), Ok(None));
    let fix = "give it a default with ${VAR:-value}, or set VAR";
    for p in prof.paths.iter().filter(|p| p.access != Access::Hide) {
        if unset(&p.template) {
            out.push(format!(
                "profile {}: '{}' names an unset variable, so the rule is left out ({fix})",
                crate::text::printable(&p.profile),
                crate::text::printable(&p.template)
            ));
        }
    }
    for g in &prof.guards {
        if unset(&g.template) {
            out.push(format!(
                "profile {}: guard '{}' names an unset variable, so it is left out ({fix})",
                crate::text::printable(&g.profile),
                crate::text::printable(&g.template)
            ));
        }
    }
    for (k, v) in &prof.env.set {
        if unset(v) {
            out.push(format!(
                "profile {}: env.set {} = '{}' names an unset variable, so it is set empty ({fix})",
                crate::text::printable(&prof.name),
                crate::text::printable(k),
                crate::text::printable(v)
            ));
        }
    }
    out
}

/// The profiles there are: the embedded ones, then the user's directory.
pub fn catalog() -> Result<Catalog, JailError> {
    Catalog::load(user_profile_dir().as_deref())
}

/// Resolves the request's profile and rules into one policy, reading this host as it is now.
/// With `create_missing`, the profile's writable directories that do not exist yet are created
/// (an agent's state directory on its first run); a dry run creates nothing.
pub fn policy(req: &RunSettings, create_missing: bool) -> Result<Policy, JailError> {
    check_request(req)?;
    let base_dir = std::env::current_dir()
        .map_err(|e| JailError::io("cannot read the current directory", e))?;
    let cat = catalog()?;
    let prof = cat.resolve(req.profile_name())?;
    // Its real path: a HOME spelled through a symlink must still be refused as a writable
    // root and recognised under one.
    let (home, why) = home_dir();
    let home = home.map(|h| policy::real_path(&h));
    if let Some(why) = why {
        crate::text::say(format!("jail: warning: {why}"));
    }
    let vars = |name: &str| std::env::var(name).ok();
    let x = Expansion {
        home: home.as_deref(),
        cwd: &base_dir,
        var: &vars,
    };
    for warning in profile_warnings(&prof, &x) {
        crate::text::say(format!("jail: warning: {warning}"));
    }
    let mut cow = req.cow.clone();
    let mut caches = req.caches.clone();
    let mut profile_paths =
        profile_path_rules(&cat, &prof, &x, create_missing, &mut cow, &mut caches)?;
    // A run that stores something (a --cow layer) makes the store now; any other run makes
    // nothing of the user's unless its command could write where a missing one goes (below).
    #[cfg(target_os = "linux")]
    let jail_state = jail_state(create_missing && !cow.is_empty(), !cow.is_empty())?;
    #[cfg(not(target_os = "linux"))]
    let jail_state = Vec::new();
    let agent_states = more_path_rules(&prof, &x, &vars, home.as_deref(), &mut profile_paths)?;
    let guarded = guarded_paths(&prof, &x)?;
    // The environment first: the credential files its variables name are hidden too.
    let flags = EnvFlags::from_args(&req.env, &req.env_deny, req.env_clear)?;
    let caller: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let env = child_env(&caller, &prof.env, &flags, &x)
        .map_err(|e| JailError::bad_profile(&prof.name, None, e))?;
    // The flags over the profile's options, from here on.
    let s = req.over(&prof.options, &prof.name)?;
    let net = net::NetPolicy::parse(&s.net).map_err(|e| match req.net.is_empty() {
        true => JailError::bad_profile(&prof.name, None, format!("net {e}")),
        false => e.into(),
    })?;
    let mut env = env;
    let secrets = secret_rules(req, &prof, &net, &caller)?;
    put_placeholders(&mut env, &secrets);
    #[allow(unused_mut)]
    let mut input = PolicyInput {
        base_dir: base_dir.clone(),
        limits: prof
            .limits
            .merged(policy::limits::Limits::from_flags(&req.limits)?),
        net,
        secrets,
        home: home.clone(),
        profile_paths,
        jail_state,
        jail_state_links: jail_state_links(),
        guarded,
        agent_states,
        credential_files: env.credential_files.clone(),
        homes: homes_input(&s, home.as_deref(), &base_dir),
        agent_logins: agent_logins(&cat, &prof, &req.command, &x)?,
        env,
        caller_env: caller,
        settings: RunSettings { cow, caches, ..s },
    };
    let policy = policy::resolve(&input)?;
    // A state directory missing where this run's command could write it would let the
    // command plant a store (a fake pending run, a lock link, a registry) for the user's next
    // review: then it is made, and hidden, after all.
    // A run with writable trees journals what it must do after the command ends (the planted
    // files, the report) in the store, for the next jail if its supervisor is killed: the store
    // is made, and hidden, for it.
    #[cfg(target_os = "linux")]
    if create_missing && (!missing_state_dirs(&policy).is_empty() || journal_needs_store(&policy)) {
        input.jail_state = self::jail_state(true, false)?;
        return policy::resolve(&input);
    }
    Ok(policy)
}

/// The profile's path rules, `${VAR}`s expanded: its caches and `--cow` layers go to their
/// own lists, and with `create_missing` its missing writable directories and seeded files are
/// made (a dry run makes nothing).
fn profile_path_rules(
    cat: &Catalog,
    prof: &policy::profile::Resolved,
    x: &Expansion,
    create_missing: bool,
    cow: &mut Vec<PathBuf>,
    caches: &mut Vec<PathBuf>,
) -> Result<Vec<ProfilePathRule>, JailError> {
    let mut profile_paths = Vec::new();
    for p in &prof.paths {
        let expanded = x
            .expand(&p.template)
            .map_err(|e| JailError::bad_profile(&p.profile, None, e))?;
        let Some(path) = expanded else { continue };
        let path = PathBuf::from(path);
        if !path.is_absolute() {
            return Err(JailError::bad_profile(
                &p.profile,
                Some(cat.locate(&p.profile, &p.template)),
                format!("path '{}' is not absolute", path.display()),
            ));
        }
        if p.cache {
            // A cache that does not exist yet has nothing to protect: skipped.
            if path.is_dir() {
                caches.push(path);
            }
            continue;
        }
        if p.cow {
            // A layer over nothing has nothing to hand back: a missing path is skipped.
            if path.is_dir() {
                cow.push(path);
            }
            continue;
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
    Ok(profile_paths)
}

/// The rules a run adds to its profile's for what the host's agent or jail itself would run or
/// read later, and the environment's daemons; with the agents' state directories they came from.
fn more_path_rules(
    prof: &policy::profile::Resolved,
    x: &Expansion,
    vars: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
    profile_paths: &mut Vec<ProfilePathRule>,
) -> Result<Vec<crate::protect::agent_state::StateDir>, JailError> {
    // jail's own profiles decide every later run's confinement: inside a writable tree
    // (`--rw ~/.config`) they stay read-only, and one created during the run is moved aside.
    if let Some(dir) = user_profile_dir().filter(|d| !d.starts_with("/tmp")) {
        profile_paths.push(ProfilePathRule {
            path: dir,
            access: Access::Ro,
            profile: "jail".into(),
            protect: true,
        });
    }
    // A protected config may name a script inside the agent's writable state (a status line,
    // a hook, a notify command): the host's agent runs it, so it is protected too.
    let named = named_in_protected(profile_paths, home);
    profile_paths.extend(named);
    // Whatever the settings call it, what is in an agent's state directory outside the data
    // its profile names may run: read-only from the start.
    let (agent_states, code) = agent_state_rules(prof, x, profile_paths)?;
    profile_paths.extend(code);
    // The daemons the environment names are hidden wherever it says they are.
    for path in policy::sockets::env_named_sockets(vars, home) {
        profile_paths.push(ProfilePathRule {
            path,
            access: Access::Hide,
            profile: "environment".into(),
            protect: false,
        });
    }
    Ok(agent_states)
}

/// The profile's guarded files (`${VAR}`s expanded) and the keys guarded in each; a guard
/// whose path is unset or relative names nothing and is left out.
fn guarded_paths(
    prof: &policy::profile::Resolved,
    x: &Expansion,
) -> Result<Vec<(PathBuf, Vec<String>)>, JailError> {
    let mut guarded = Vec::new();
    for g in &prof.guards {
        let expanded = x
            .expand(&g.template)
            .map_err(|e| JailError::bad_profile(&g.profile, None, e))?;
        if let Some(path) = expanded.map(PathBuf::from).filter(|p| p.is_absolute()) {
            guarded.push((path, g.keys.clone()));
        }
    }
    Ok(guarded)
}

/// The run has writable trees to check after it (its journal goes in the store) and the store
/// does not exist yet.
#[cfg(target_os = "linux")]
fn journal_needs_store(policy: &Policy) -> bool {
    use crate::workspace::store::Store;
    !crate::protect::watched_roots(policy).is_empty()
        && Store::locate().is_ok_and(|s| std::fs::symlink_metadata(s.root()).is_err())
}

/// jail's state directories (the store and the registries) that do not exist yet and that the
/// command of `policy` could create: the most specific rule over the place is writable, or it
/// is in /tmp or /dev/shm (the host's, in some runs).
#[cfg(target_os = "linux")]
fn missing_state_dirs(policy: &Policy) -> Vec<PathBuf> {
    use crate::workspace::store::{self, Store};
    let mut dirs = store::registry_dirs();
    dirs.extend(Store::locate().ok().map(|s| s.root().to_path_buf()));
    // The sessions' directory too: a command that made it could bind a session's socket name
    // before the session does.
    dirs.push(crate::session::dir::location());
    dirs.retain(|d| std::fs::symlink_metadata(d).is_err() && could_create(policy, d));
    dirs
}

/// Whether the command of `policy` could create `dir`, a path that does not exist (pure).
#[cfg(target_os = "linux")]
fn could_create(policy: &Policy, dir: &std::path::Path) -> bool {
    if dir.starts_with("/tmp") || dir.starts_with("/dev/shm") {
        return true;
    }
    policy
        .rules
        .iter()
        .filter(|r| dir.starts_with(&r.path))
        .max_by_key(|r| r.path.components().count())
        .is_some_and(|r| r.access == policy::Access::Rw)
}

/// The symlinks on the way to jail's state directories as this environment spells them.
fn jail_state_links() -> Vec<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use crate::workspace::store;
        let mut out: Vec<PathBuf> = store::written_state_paths()
            .iter()
            .flat_map(|p| store::links_on_the_way(p))
            .collect();
        out.sort();
        out.dedup();
        out
    }
    #[cfg(not(target_os = "linux"))]
    Vec::new()
}

/// jail's own state, hidden in every jail whatever the flags: the store this environment names
/// and every store jail has used (the registry's, which records this one too). Pending
/// copy-on-write layers are no run's to read, and no run's to plant in. With `make` (a `--cow`
/// run, which needs the store and fails without it, or a run whose command could write where a missing one goes:
/// [`missing_state_dirs`]) the store and the registries are made first (the registries best
/// effort: where this user cannot make them, neither can the command), so that the command
/// cannot create a fake pending run, a lock link or a registry for the user's next review to
/// meet. Any other run makes nothing: a read-only run writes nothing of the user's.
#[cfg(target_os = "linux")]
fn jail_state(make: bool, cow: bool) -> Result<Vec<PathBuf>, JailError> {
    use crate::workspace::store::{self, Store};
    let registries = store::registry_dirs();
    if make {
        store::ensure_registries(&registries);
    }
    let mut own = Vec::new();
    if let Ok(current) = Store::locate() {
        if make && cow {
            current.ensure()?;
        } else if make {
            let _ = current.ensure();
        }
        let made = store::check_dir(current.root()).is_ok();
        if make && made && !current.register(&registries) && cow {
            crate::text::say(format!(
                "jail: warning: {} could not be recorded in jail's registry of stores \
                 (.local/state/jail/stores of your home directory): a later run under another \
                 XDG_STATE_HOME will not hide it",
                current.root().display()
            ));
        }
        own.push(current.root().to_path_buf());
    }
    own.extend(registries.iter().cloned());
    own.extend(store::registered(&registries));
    // The sessions' control sockets: nothing inside any jail may ask a session for a command.
    // Made now when missing: a jail that found the place free could take it.
    own.extend(crate::session::dir::to_hide(make));
    // Only real directories: a symlink in a store's place hides nothing (and the review
    // commands refuse it).
    own.retain(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()));
    own.sort();
    own.dedup();
    Ok(own)
}

/// The secrets the proxy adds: each `--secret` (refused where it cannot hold), and each key
/// the profile declares that the caller has set and the command would get, when the network
/// goes through the proxy (`allow=`). A `--secret` without hosts takes the profile's.
fn secret_rules(
    req: &RunSettings,
    prof: &crate::policy::profile::Resolved,
    net: &net::NetPolicy,
    caller: &[(OsString, OsString)],
) -> Result<Vec<net::secrets::SecretRule>, JailError> {
    use net::secrets::{SecretRule, parse_flag, placeholder};
    let is_set = |name: &str| {
        caller
            .iter()
            .any(|(k, v)| k.as_os_str() == name && !v.is_empty())
    };
    let allow = net::AllowList::from_policy(net)?;
    let mut rules: Vec<SecretRule> = Vec::new();
    for spec in &req.secrets {
        let (name, hosts) =
            parse_flag(spec).map_err(|m| JailError::bad_flag("--secret", spec, m))?;
        let flag = format!("--secret {}", crate::text::printable(spec));
        let bad = |message: String| JailError::bad_flag("--secret", spec, message);
        let hosts = match hosts.or_else(|| prof.secrets.get(&name).map(|s| s.hosts.clone())) {
            Some(h) => h,
            None => {
                return Err(bad(format!(
                    "{flag}: no hosts: name them (--secret {name}@api.example.com), or use a \
                     profile whose [secrets] declares {name}"
                )));
            }
        };
        let Some(allow) = &allow else {
            return Err(bad(format!(
                "{flag}: needs the proxy (--net allow=HOSTS), which adds the value on the way \
                 out; this run's network is {}",
                net.summary()
            )));
        };
        if !is_set(&name) {
            return Err(bad(format!(
                "{flag}: {name} is not set (or empty) in jail's environment, where its value is \
                 read"
            )));
        }
        for h in &hosts {
            if allow.check_name(h).is_err() {
                return Err(bad(format!(
                    "{flag}: {h} is not on the allow list: add it (--net allow={h})"
                )));
            }
        }
        rules.retain(|r| r.name != name);
        rules.push(SecretRule {
            placeholder: placeholder(&name, random_bytes()?),
            name,
            hosts,
            not_allowed: Vec::new(),
            from: "--secret".into(),
            explicit: true,
        });
    }
    if let Some(allow) = &allow {
        for (name, declared) in &prof.secrets {
            let kept = req.env.iter().any(|n| n == name) || prof.env.keep.iter().any(|k| k == name);
            if rules.iter().any(|r| &r.name == name) || !is_set(name) || !kept {
                continue;
            }
            // A key whose hosts the network does not allow still stays outside: inside it could
            // reach no API it belongs to, only the hosts that are allowed (an exfiltration
            // path) and the files the run hands back. The command gets a placeholder the proxy
            // adds nowhere, and the dry run and the report name the hosts left out.
            let (hosts, not_allowed): (Vec<String>, Vec<String>) = declared
                .hosts
                .iter()
                .cloned()
                .partition(|h| allow.check_name(h).is_ok());
            rules.push(SecretRule {
                placeholder: placeholder(name, random_bytes()?),
                name: name.clone(),
                hosts,
                not_allowed,
                from: format!("profile {}", declared.profile),
                explicit: false,
            });
        }
    }
    Ok(rules)
}

/// The command's environment holds each secret's placeholder, never its value; a `--secret`
/// the environment rules would have removed is put back as its placeholder.
fn put_placeholders(env: &mut policy::env::ChildEnv, secrets: &[net::secrets::SecretRule]) {
    for rule in secrets {
        env.vars
            .retain(|(k, _)| k.as_os_str() != rule.name.as_str());
        env.why.remove(&rule.name);
        env.vars
            .push((rule.name.clone().into(), rule.placeholder.clone().into()));
    }
}

/// 16 bytes from the kernel's random pool, for a placeholder no other run shares.
fn random_bytes() -> Result<[u8; 16], JailError> {
    use std::io::Read;
    let mut out = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut out))
        .map_err(|e| JailError::os("secrets", "/dev/urandom", e))?;
    Ok(out)
}

/// What the command line refuses as it parses (an empty path, an empty program, a timeout that
/// is not a positive duration of at most 1e9 s), refused for settings built otherwise too (the
/// library's, or a spawned jail's hand-over): a run must not depend on how it was asked for.
fn check_request(req: &RunSettings) -> Result<(), JailError> {
    let paths = [
        ("--ro", &req.ro),
        ("--rw", &req.rw),
        ("--cow", &req.cow),
        ("--cache", &req.caches),
        ("--hide", &req.hide),
        ("--allow-socket", &req.allow_sockets),
    ];
    for (flag, list) in paths {
        if list.iter().any(|p| p.as_os_str().is_empty()) {
            return Err(JailError::bad_path(flag, "", "is empty"));
        }
    }
    if req.cwd.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
        return Err(JailError::bad_path("--cwd", "", "is empty"));
    }
    // `jail -- ''` (an unset variable in a script): no program to look up, and "command not
    // found" would name nothing.
    if req.command.first().is_some_and(|c| c.is_empty()) {
        return Err(JailError::bad_command(
            "the command is empty: name a program after `--`, e.g. jail -- ls -la",
        ));
    }
    if let Some(t) = req.timeout {
        if t.is_zero() || t.as_secs_f64() > 1.0e9 {
            return Err(JailError::bad_flag(
                "--timeout",
                format!("{t:?}"),
                format!("timeout {t:?}: must be a positive duration of at most 1e9 s"),
            ));
        }
    }
    Ok(())
}

/// Every agent's login files, expanded, each marked whether the run is that agent: the
/// profile's own agent, else the one whose program the command names (`claude` run under
/// `review`).
fn agent_logins(
    cat: &Catalog,
    prof: &policy::profile::Resolved,
    command: &[OsString],
    x: &Expansion,
) -> Result<Vec<policy::AgentLoginPath>, JailError> {
    let agents = cat.agents();
    let program = command
        .first()
        .and_then(|c| Path::new(c).file_name())
        .map(|n| n.to_os_string());
    let own = prof.agent.as_ref().map(|a| a.name.clone()).or_else(|| {
        agents
            .iter()
            .find(|a| {
                a.commands
                    .iter()
                    .any(|c| program.as_deref() == Some(c.as_ref()))
            })
            .map(|a| a.name.clone())
    });
    let mut out = Vec::new();
    for agent in &agents {
        for template in &agent.login {
            let expanded = x
                .expand(template)
                .map_err(|e| JailError::bad_profile(format!("agent {}", agent.name), None, e))?;
            let Some(path) = expanded.map(PathBuf::from).filter(|p| p.is_absolute()) else {
                continue;
            };
            out.push(policy::AgentLoginPath {
                agent: agent.name.clone(),
                path,
                own: own.as_deref() == Some(agent.name.as_str()),
            });
        }
    }
    Ok(out)
}

/// `--home` (else the profile's), and when hidden the homes of this host, the PATH
/// directories and the command's programs, as real paths.
fn homes_input(s: &RunSettings, home: Option<&Path>, base: &Path) -> HomesInput {
    let mode = s.home.unwrap_or_default();
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
    let programs = s
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
            .map(|d| policy::homes::PathDir::of(d))
            .collect(),
        programs,
    }
}

/// The files that the profile's protected files name (as `/abs/path`, `~/path`, `$HOME/path`)
/// inside one of the profile's writable directories: protected as well.
fn named_in_protected(paths: &[ProfilePathRule], home: Option<&Path>) -> Vec<ProfilePathRule> {
    let writable: Vec<&PathBuf> = paths
        .iter()
        .filter(|p| p.access == Access::Rw)
        .map(|p| &p.path)
        .collect();
    let mut out: Vec<ProfilePathRule> = Vec::new();
    for rule in paths.iter().filter(|p| p.protect) {
        let Ok(text) = crate::protect::gitconfig::read_small(&rule.path) else {
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
            let path = policy::absolute(Path::new("/"), &path);
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

/// The profile's agent state directories, and a protected rule for each entry in them that is
/// not data (the agent's hooks and scripts may run it, however they spell its name). A symlink
/// there is not followed for its own rule (a read-only rule where it leads would show what
/// `--home hidden` hides); what it leads to is protected when that is in one of the profile's
/// writable directories, and the link itself, replaced during the run, is moved aside after it.
fn agent_state_rules(
    prof: &policy::profile::Resolved,
    x: &Expansion,
    paths: &[ProfilePathRule],
) -> Result<
    (
        Vec<crate::protect::agent_state::StateDir>,
        Vec<ProfilePathRule>,
    ),
    JailError,
> {
    use crate::protect::agent_state::{self, StateDir};
    let mut states = Vec::new();
    let mut out: Vec<ProfilePathRule> = Vec::new();
    let writable: Vec<&PathBuf> = paths
        .iter()
        .filter(|p| p.access == Access::Rw)
        .map(|p| &p.path)
        .collect();
    for st in &prof.states {
        let bad = |why: String| JailError::bad_profile(&st.profile, None, why);
        let Some(dir) = x.expand(&st.template).map_err(&bad)? else {
            continue;
        };
        let dir = PathBuf::from(dir);
        if !dir.is_absolute() {
            return Err(bad(format!(
                "[paths.state] '{}' is not absolute",
                dir.display()
            )));
        }
        if let Some(p) = st.data.iter().find(|p| !agent_state::valid_pattern(p)) {
            return Err(bad(format!(
                "[paths.state] '{}': '{p}' must be a name relative to it, without . or ..",
                st.template
            )));
        }
        let real = policy::real_path(&dir);
        states.push(StateDir {
            dir: real.clone(),
            data: st.data.clone(),
        });
        if !std::fs::symlink_metadata(&real).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let protected = |p: &Path| paths.iter().any(|r| r.protect && r.path == p);
        let entries =
            agent_state::code_entries(&real, &st.data, &protected, &agent_state::host_lister)
                .map_err(bad)?;
        for e in entries {
            let path = if e.link {
                match std::fs::canonicalize(&e.path) {
                    Ok(t) if writable.iter().any(|w| t.starts_with(w) && t != **w) => t,
                    _ => continue,
                }
            } else {
                e.path
            };
            if !paths.iter().chain(&out).any(|p| p.path == path) {
                out.push(ProfilePathRule {
                    path,
                    access: Access::Ro,
                    profile: st.profile.clone(),
                    protect: true,
                });
            }
        }
    }
    Ok((states, out))
}

/// A protected file the agent would otherwise create itself (and see moved aside after every
/// run): written new, never over anything, readable by its owner only.
fn seed_file(path: &Path, content: &str) -> std::io::Result<()> {
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

fn create_private_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Kind, Origin, PathRule};

    fn rule(path: &str, access: Access) -> PathRule {
        PathRule {
            path: path.into(),
            access,
            kind: Kind::Dir,
            origin: Origin::Flag("--rw".into()),
        }
    }

    #[test]
    fn a_missing_state_directory_is_made_only_where_the_command_could_write_it() {
        let mut p = Policy::probe_default();
        let store = Path::new("/home/u/.local/state/jail");
        // The read-only root: nothing to make.
        assert!(!could_create(&p, store));
        // A writable tree around it: made (and hidden), or the command could plant one.
        p.rules.push(rule("/home/u", Access::Rw));
        assert!(could_create(&p, store));
        // The most specific rule decides: a read-only or hidden one beneath the writable tree.
        p.rules.push(rule("/home/u/.local", Access::Ro));
        assert!(!could_create(&p, store));
        p.rules.push(rule("/home/u/.local/state", Access::Hide));
        assert!(!could_create(&p, store));
        // A writable sibling reaches nothing.
        let mut p = Policy::probe_default();
        p.rules.push(rule("/home/u/.local/state/tool", Access::Rw));
        assert!(!could_create(&p, store));
        // /tmp and /dev/shm are the host's in some runs.
        assert!(could_create(&p, Path::new("/tmp/state/jail")));
        assert!(could_create(&p, Path::new("/dev/shm/jail")));
    }
}
