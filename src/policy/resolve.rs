//! Turns what the user asked for (flags, environment) into one validated [`Policy`].
//!
//! It only looks at the filesystem (lstat), never changes it: a path must exist, must not pass
//! through a symlink (the rule would protect something other than what was named), and rules must
//! not contradict each other.
//!
//! Its parts: `paths` (how a path it is given is checked and looked at, with the directory
//! listings) and `protected` (the protected names under the writable paths, the environment's
//! tool configurations, and a repository's shared git directory).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{Access, Kind, Origin, PathRule, Policy, TmpMode};
use crate::error::JailError;
use crate::paths::{absolute, real_path};

mod paths;
mod protected;

use paths::{Listings, checked_path, existing_target, kind_of, refuse_view_owned};
use protected::{protect_env_configs, protect_names};

/// Everything the resolver needs, already read from the command line and the environment.
#[derive(Debug, Clone, Default)]
pub struct PolicyInput {
    /// The run's settings over its profile's options ([`RunSettings::over`]), with the
    /// profile's copy-on-write and throwaway paths among `cow` and `caches`: the paths the
    /// flags name, the working directory, /tmp, the level, the descriptors, the timeout, the
    /// sockets and the command are read from here.
    ///
    /// [`RunSettings::over`]: super::settings::RunSettings::over
    pub settings: super::settings::RunSettings,
    /// The directory relative paths are resolved against (the launcher's current directory).
    pub base_dir: PathBuf,
    /// The network the settings' and the profile's rules make.
    pub net: crate::net::NetPolicy,
    pub secrets: Vec<crate::net::secrets::SecretRule>,
    pub limits: super::limits::Limits,
    /// HOME: a profile may not make it (or / or anything above it) writable.
    pub home: Option<PathBuf>,
    /// The profile's path rules, expanded (absolute), in merge order: a later one for the same
    /// path wins. Lenient: a missing ro or hide path is skipped, a missing rw path too (the
    /// launcher creates them before a real run).
    pub profile_paths: Vec<ProfilePathRule>,
    /// jail's own state directories (real paths of existing directories: the copy-on-write
    /// stores and the registry of them): hidden whatever the flags, and no flag may name a
    /// path inside one.
    pub jail_state: Vec<PathBuf>,
    /// The symlinks on the way to them as the environment spells them (`~/.local/state ->
    /// /data/state`): a run that may write where one lives is refused, since it could point
    /// jail's next review at a store of its own making.
    pub jail_state_links: Vec<PathBuf>,
    /// The profiles' guarded JSON files, expanded (absolute), with their keys.
    pub guarded: Vec<(PathBuf, Vec<String>)>,
    /// The profiles' agent state directories, expanded (absolute), with their data patterns.
    pub agent_states: Vec<crate::protect::agent_state::StateDir>,
    /// Credential files the caller's environment names (variable, absolute path): hidden like
    /// the profile's credential stores, unless a flag names them.
    pub credential_files: Vec<(String, PathBuf)>,
    /// `--home` and the home directories of this host.
    pub homes: super::homes::HomesInput,
    /// The login files of every agent a profile is for, expanded: hidden, but the run's own
    /// agent's, which are shown read-only where nothing else names them.
    pub agent_logins: Vec<AgentLoginPath>,
    /// The command's environment, as the profile and the flags make it from the caller's.
    pub env: super::env::ChildEnv,
    /// The caller's environment: the variables that name a host daemon's socket are removed
    /// from `env` unless that socket is allowed.
    pub caller_env: Vec<(OsString, OsString)>,
}

/// One login file of an agent.
#[derive(Debug, Clone)]
pub struct AgentLoginPath {
    pub agent: String,
    pub path: PathBuf,
    /// The run is this agent (its profile, or a command of its name).
    pub own: bool,
}

#[derive(Debug, Clone)]
pub struct ProfilePathRule {
    pub path: PathBuf,
    pub access: Access,
    pub profile: String,
    /// Moved aside after the run if it did not exist and the command created it.
    pub protect: bool,
}

/// `--allow-socket` paths: absolute, with no symlink on the way (the identity the supervisor
/// checks is the inode the path names), each a unix socket now.
fn allowed_sockets(raw: &[PathBuf], base: &Path) -> Result<Vec<PathBuf>, JailError> {
    use std::os::unix::fs::FileTypeExt;
    let mut out = Vec::new();
    for p in raw {
        let path = checked_path("--allow-socket", p, base)?;
        let meta = std::fs::metadata(&path)
            .map_err(|e| JailError::bad_path("--allow-socket", &path, e.to_string()))?;
        if !meta.file_type().is_socket() {
            return Err(JailError::bad_path(
                "--allow-socket",
                &path,
                "is not a unix socket; name the socket file itself",
            ));
        }
        if VIEW_OWNED.iter().any(|v| path.starts_with(v)) {
            return Err(JailError::bad_path(
                "--allow-socket",
                &path,
                "lies in a place the mount view builds itself (/proc, /dev, /sys)",
            ));
        }
        if !out.contains(&path) {
            out.push(path);
        }
    }
    Ok(out)
}

/// The flag (and rule origin) of a copy-on-write path: a writable rule whose writes land in a
/// layer, so nothing beneath it is searched for protected names (the layer never reaches the
/// host unreviewed, and `.git` is part of it).
pub const COW_FLAG: &str = "--cow";

/// The flag (and rule origin) of a throwaway path: writable inside, its layer discarded with the
/// run, so nothing beneath it is searched for protected names either.
pub const CACHE_FLAG: &str = "--cache";

/// Whether a flag's writes land in a layer rather than on the host.
fn layered(flag: &str) -> bool {
    flag == COW_FLAG || flag == CACHE_FLAG
}

/// Places whose contents the mount view builds itself: user rules there would be silently
/// shadowed, so they are refused.
const VIEW_OWNED: &[&str] = &["/proc", "/dev", "/sys"];

/// The flags' paths: their access, kind, and the flag that named them.
type FlagRules = BTreeMap<PathBuf, (Access, Kind, &'static str)>;
/// Every rule so far, by path.
type Rules = BTreeMap<PathBuf, PathRule>;

/// Resolves flags, profile and environment into one policy, in phases: the flags' own rules
/// first (checked on their own), then the read-only root, the profile's rules, the credential
/// files the environment names, the flags over both, the homes hidden, and the protected names
/// under every writable path; last the policy is assembled and checked as a whole.
pub fn resolve(input: &PolicyInput) -> Result<Policy, JailError> {
    if input.settings.command.is_empty() {
        return Err(JailError::bad_command(
            "no command given: usage is jail [OPTIONS] -- CMD [ARGS...]",
        ));
    }
    let user = flag_rules(input)?;
    let mut rules = base_rules(input);
    let listed = Listings::default();
    let profile = add_profile_rules(input, &user, &mut rules, &listed)?;
    add_credential_hides(input, &user, &mut rules, &listed)?;
    add_agent_logins(input, &user, &mut rules, &listed);
    add_flag_rules(&user, &mut rules);
    // The working directory, resolved first: `--home hidden` shows it when it is in a home.
    let cwd = working_dir(input)?;
    super::homes::hide_homes(
        &mut rules,
        &input.homes,
        &cwd,
        !input.settings.tmp_host(),
        &super::homes::RealHost,
    )?;
    drop_nested_hides(&mut rules);
    show_tmp_working_dir(input, &cwd, &mut rules);
    let (mut absent_protected, search_notes) = protect_names(&user, &mut rules)?;
    let env_protected = protect_env_configs(input, &cwd, &mut rules, &mut absent_protected);
    hide_jail_state(input, &user, &mut rules)?;
    drop_nested_hides(&mut rules);
    if !cwd.is_dir() {
        return Err(JailError::bad_path(
            cwd_name(input.settings.cwd.is_some()),
            &cwd,
            "is not a directory",
        ));
    }
    absent_protected.extend(profile.absent);
    let allow_sockets = allowed_sockets(&input.settings.allow_sockets, &input.base_dir)?;
    // A socket the command is given on purpose is not hidden (the profile hides SSH_AUTH_SOCK).
    rules.retain(|path, rule| rule.access != Access::Hide || !allow_sockets.contains(path));
    let (cow, caches) = layered_dirs(&user)?;
    let mut policy = Policy {
        rules: rules.into_values().collect(),
        cow,
        caches,
        absent_protected,
        protected_search_truncated: search_notes,
        profile_rw_missing: profile.skipped,
        profile_protected: profile.protected.into_iter().chain(env_protected).collect(),
        guarded: input
            .guarded
            .iter()
            .map(|(p, keys)| (real_path(p), keys.clone()))
            .collect(),
        agent_states: input
            .agent_states
            .iter()
            .map(|s| crate::protect::agent_state::StateDir {
                dir: real_path(&s.dir),
                data: s.data.clone(),
            })
            .collect(),
        profile: input.settings.profile_name().to_string(),
        env: {
            let mut env = input.env.clone();
            super::sockets::strip_socket_variables(&mut env, &input.caller_env, &allow_sockets);
            env
        },
        cwd,
        tmp: if input.settings.tmp_host() {
            TmpMode::Host
        } else {
            TmpMode::Private
        },
        require: input.settings.require,
        keep_fds: input.settings.keep_fds.clone(),
        timeout: input.settings.timeout,
        allow_userns: input.settings.allow_userns,
        allow_unix_sockets: input.settings.allow_unix_sockets || !allow_sockets.is_empty(),
        allow_sockets,
        home: input.homes.mode,
        net: input.net.clone(),
        secrets: input.secrets.clone(),
        limits: input.limits,
        command: input.settings.command.clone(),
    };
    policy.absent_protected = creatable(&policy);
    check_whole(&policy, input.settings.cwd.is_some())?;
    Ok(policy)
}

/// The `--cow` layers and `--cache` directories the flags name, checked: a layer takes a
/// directory, and two nested layers would hand back the inner one twice.
fn layered_dirs(user: &FlagRules) -> Result<(Vec<PathBuf>, Vec<PathBuf>), JailError> {
    let cow: Vec<PathBuf> = user
        .iter()
        .filter(|(_, (_, kind, flag))| *flag == COW_FLAG && *kind == Kind::Dir)
        .map(|(p, _)| p.clone())
        .collect();
    if let Some((p, (_, _, flag))) = user
        .iter()
        .find(|(_, (_, kind, flag))| layered(flag) && *kind != Kind::Dir)
    {
        return Err(JailError::bad_path(
            flag,
            p,
            format!("is not a directory; {flag} takes a directory (use --rw for a single file)"),
        ));
    }
    let caches: Vec<PathBuf> = user
        .iter()
        .filter(|(_, (_, _, flag))| *flag == CACHE_FLAG)
        .map(|(p, _)| p.clone())
        .collect();
    if let Some(outer) = cow
        .iter()
        .find(|o| cow.iter().any(|i| i != *o && i.starts_with(o)))
    {
        return Err(JailError::bad_path(
            COW_FLAG,
            outer,
            "holds another --cow path; name only the outer one",
        ));
    }
    Ok((cow, caches))
}

/// The absent protected names the command could create: those where the policy makes their
/// place writable. One beneath a read-only or hidden place (a profile's protected file in a
/// home the run only reads) cannot appear in the run, so it is no gap.
fn creatable(policy: &Policy) -> Vec<PathBuf> {
    policy
        .absent_protected
        .iter()
        .filter(|p| policy.access_at(p) == Access::Rw)
        .cloned()
        .collect()
}

/// How a message names the working directory: the flag when `--cwd` gave it, else what it is
/// (the directory jail was started in), so that no message blames a flag that was not given.
fn cwd_name(given: bool) -> &'static str {
    if given { "--cwd" } else { "working directory" }
}

/// What only the assembled policy can tell: the working directory reachable, the kept
/// descriptors above the standard three. `cwd_given`: `--cwd` named it.
fn check_whole(policy: &Policy, cwd_given: bool) -> Result<(), JailError> {
    let name = cwd_name(cwd_given);
    let elsewhere = if cwd_given {
        "name a directory the policy shows"
    } else {
        "run from a directory the policy shows, or name one with --cwd"
    };
    if let Some(rule) = policy
        .rule_for(&policy.cwd)
        .filter(|r| r.access == Access::Hide)
    {
        let by = match &rule.origin {
            Origin::Flag(flag) => format!("{flag} {}", crate::text::path_text(&rule.path)),
            Origin::Profile(p) => format!("profile {p}'s {}", crate::text::path_text(&rule.path)),
            _ => format!("the policy ({})", crate::text::path_text(&rule.path)),
        };
        return Err(JailError::bad_path(
            name,
            &policy.cwd,
            format!("is hidden by {by}; {elsewhere}"),
        ));
    }
    if policy.tmp == TmpMode::Private && policy.cwd == Path::new("/tmp") {
        return Err(JailError::bad_path(
            name,
            &policy.cwd,
            format!(
                "/tmp is a private tmpfs in the jail, empty at the start; add --tmp host to work \
                 in the host's /tmp, or work from a directory in it (that directory is shown){}",
                if cwd_given {
                    ""
                } else {
                    " or elsewhere (--cwd DIR)"
                }
            ),
        ));
    }
    for fd in &policy.keep_fds {
        if *fd < 3 {
            return Err(JailError::bad_flag(
                "--keep-fd",
                fd.to_string(),
                format!("--keep-fd {fd}: descriptors 0, 1 and 2 are always kept; name 3 or higher"),
            ));
        }
    }
    Ok(())
}

/// The `--ro`, `--rw` and `--hide` paths, checked: absolute and real, one rule a path, nothing
/// opened inside a hidden one, nothing in the private /tmp or the places the view builds.
fn flag_rules(input: &PolicyInput) -> Result<FlagRules, JailError> {
    let mut user = FlagRules::new();
    for (flag, access, paths) in [
        ("--ro", Access::Ro, &input.settings.ro),
        ("--rw", Access::Rw, &input.settings.rw),
        (COW_FLAG, Access::Rw, &input.settings.cow),
        (CACHE_FLAG, Access::Rw, &input.settings.caches),
        ("--hide", Access::Hide, &input.settings.hide),
    ] {
        for raw in paths {
            refuse_view_owned(flag, &absolute(&input.base_dir, raw))?;
            if access == Access::Rw && absolute(&input.base_dir, raw) == Path::new("/") {
                return Err(JailError::bad_path(flag, "/", "a writable / is no sandbox"));
            }
            let path = checked_path(flag, raw, &input.base_dir)?;
            let kind = kind_of(&path);
            // A path beneath /tmp is shown at its own place in the private /tmp (the mount view
            // binds it there); /tmp itself cannot be both private and the host's.
            if !input.settings.tmp_host() && path == Path::new("/tmp") && access != Access::Hide {
                return Err(JailError::bad_path(
                    flag,
                    &path,
                    "/tmp is a private tmpfs in the jail; add --tmp host to use the host's /tmp",
                ));
            }
            if let Some((other, _, other_flag)) = user.get(&path) {
                if *other != access || *other_flag != flag && (layered(other_flag) || layered(flag))
                {
                    return Err(JailError::bad_path(
                        flag,
                        &path,
                        format!("also given with {other_flag}; a path takes one rule"),
                    ));
                }
            }
            user.insert(path, (access, kind, flag));
        }
    }
    // Nothing may be opened up inside a hidden path: the hide would be a lie.
    for (hidden, (access, _, flag)) in &user {
        if *access != Access::Hide {
            continue;
        }
        for (inner, (inner_access, _, inner_flag)) in &user {
            if inner != hidden && inner.starts_with(hidden) && *inner_access != Access::Hide {
                return Err(JailError::bad_path(
                    inner_flag,
                    inner,
                    format!("is inside {} given with {flag}", hidden.display()),
                ));
            }
        }
    }
    Ok(user)
}

/// The read-only root, and the host's /tmp when it is shared.
fn base_rules(input: &PolicyInput) -> Rules {
    let mut rules = Rules::new();
    rules.insert(
        PathBuf::from("/"),
        PathRule {
            path: "/".into(),
            access: Access::Ro,
            kind: Kind::Dir,
            origin: Origin::Default,
        },
    );
    if input.settings.tmp_host() {
        rules.insert(
            PathBuf::from("/tmp"),
            PathRule {
                path: "/tmp".into(),
                access: Access::Rw,
                kind: Kind::Dir,
                origin: Origin::SharedTmp,
            },
        );
    }
    rules
}

/// What the profile's paths add (a flag naming the same path wins).
struct ProfileFacts {
    /// Writable paths of the profile that do not exist (created before a real run).
    skipped: Vec<PathBuf>,
    /// Protected paths of the profile that do not exist.
    absent: Vec<PathBuf>,
    /// Every protected path of the profile, as real paths.
    protected: Vec<PathBuf>,
}

/// The profile's rules, unless a flag decides for the same path.
fn add_profile_rules(
    input: &PolicyInput,
    user: &FlagRules,
    rules: &mut Rules,
    listed: &Listings,
) -> Result<ProfileFacts, JailError> {
    // Profile rules, unless a flag names the same path (the flag wins). A flag naming something
    // inside a hidden path opens only that (the mount view shows it inside the otherwise empty
    // hidden directory).
    let mut skipped = Vec::new();
    let mut profile_absent = Vec::new();
    let profile_protected: Vec<PathBuf> = input
        .profile_paths
        .iter()
        .filter(|r| r.protect)
        .map(|r| real_path(&r.path))
        .collect();
    for rule in &input.profile_paths {
        if !rule.path.is_absolute() {
            return Err(JailError::bad_profile(
                &rule.profile,
                None,
                format!("path '{}' is not absolute", rule.path.display()),
            ));
        }
        let Some(path) = existing_target(&rule.path, listed) else {
            if rule.access == Access::Rw {
                skipped.push(rule.path.clone());
            }
            if rule.protect {
                profile_absent.push(rule.path.clone());
            }
            continue;
        };
        if !input.settings.tmp_host() && path.starts_with("/tmp") {
            if rule.access == Access::Hide {
                continue; // already invisible: /tmp is private
            }
            return Err(JailError::bad_profile(
                &rule.profile,
                None,
                format!(
                    "{} is in /tmp, which is a private tmpfs in the jail",
                    path.display()
                ),
            ));
        }
        if rule.access != Access::Hide {
            refuse_view_owned(&format!("profile {}", rule.profile), &path)?;
        }
        let too_wide =
            path == Path::new("/") || input.home.as_deref().is_some_and(|h| h.starts_with(&path));
        if rule.access == Access::Rw && too_wide && !user.contains_key(&path) {
            return Err(JailError::bad_profile(
                &rule.profile,
                None,
                format!(
                    "refusing to make {} writable (it is / or holds your home directory, with \
                     every dotfile in it); run from the project's directory, or name it with \
                     --rw if you mean it",
                    path.display()
                ),
            ));
        }
        if user
            .keys()
            .any(|u| *u == path || path.starts_with(u) && user[u].0 == Access::Hide)
        {
            continue;
        }
        let kind = kind_of(&path);
        rules.insert(
            path.clone(),
            PathRule {
                path,
                access: rule.access,
                kind,
                origin: Origin::Profile(rule.profile.clone()),
            },
        );
    }
    Ok(ProfileFacts {
        skipped,
        absent: profile_absent,
        protected: profile_protected,
    })
}

/// The agents' logins: every other agent's hidden (what the command starts must not sign in
/// as another agent, or carry its token away), unless a flag or a profile names the file
/// itself; the run's own agent's shown read-only where the homes are hidden and no rule of
/// the profile already decides for it (the agent's profile makes its state writable).
fn add_agent_logins(input: &PolicyInput, user: &FlagRules, rules: &mut Rules, listed: &Listings) {
    for login in &input.agent_logins {
        // Most logins do not exist here: the listings answer for them without a lookup each.
        let Some(path) = existing_target(&login.path, listed) else {
            continue;
        };
        // A login is a file: one replaced by a link (an agent's state is writable to it) would
        // make jail show, or hide, whatever the link names.
        if std::fs::symlink_metadata(&login.path).map_or(true, |m| m.file_type().is_symlink()) {
            continue;
        }
        let named_by_flag = user
            .keys()
            .any(|u| *u == path || path.starts_with(u) && user[u].0 == Access::Hide);
        if named_by_flag || rules.contains_key(&path) {
            continue;
        }
        let covering = path.ancestors().find_map(|a| rules.get(a));
        let access = if !login.own {
            Access::Hide
        } else if covering.is_some_and(|r| r.access == Access::Ro && r.path == Path::new("/")) {
            Access::Ro
        } else {
            continue;
        };
        rules.insert(
            path.clone(),
            PathRule {
                kind: kind_of(&path),
                path,
                access,
                origin: Origin::AgentLogin(login.agent.clone()),
            },
        );
    }
}

/// The credential files the caller's environment names: hidden, unless a flag names them.
fn add_credential_hides(
    input: &PolicyInput,
    user: &FlagRules,
    rules: &mut Rules,
    listed: &Listings,
) -> Result<(), JailError> {
    for (var, named) in &input.credential_files {
        let Some(path) = existing_target(named, listed) else {
            continue;
        };
        let named_by_flag = user
            .keys()
            .any(|u| *u == path || path.starts_with(u) && user[u].0 == Access::Hide);
        // A device, /proc or /sys entry (`AWS_CONFIG_FILE=/dev/null` turns a tool's config off)
        // or a socket is no credential store. One in /tmp is hidden too: without the mount view
        // (known only at launch) the jail's /tmp is the host's and Landlock hides it there; with
        // the view the private /tmp does not hold it, and the mount plan places nothing for it
        // (unless a tree shown in the private /tmp holds it).
        let cwd = input
            .settings
            .cwd
            .as_deref()
            .map(|c| absolute(&input.base_dir, c));
        let store = std::fs::metadata(&path).is_ok_and(|m| m.is_file() || m.is_dir());
        if !store || named_by_flag || VIEW_OWNED.iter().any(|v| path.starts_with(v)) {
            continue;
        }
        let holds = |p: &Path| p.starts_with(&path);
        if path == Path::new("/")
            || input.home.as_deref().is_some_and(holds)
            || holds(&input.base_dir)
            || cwd.as_deref().is_some_and(holds)
        {
            return Err(JailError::BadInput(format!(
                "{var} names {}, which holds your home or working directory: jail hides the \
                 files credential variables name; point {var} at the file itself, or keep it \
                 (and what it names) with --env {var}",
                path.display()
            )));
        }
        let kind = kind_of(&path);
        rules.insert(
            path.clone(),
            PathRule {
                path,
                access: Access::Hide,
                kind,
                origin: Origin::Env(var.clone()),
            },
        );
    }
    Ok(())
}

/// The flags' rules, over whatever a profile or the environment said of the same path.
fn add_flag_rules(user: &FlagRules, rules: &mut Rules) {
    for (path, (access, kind, flag)) in user {
        rules.insert(
            path.clone(),
            PathRule {
                path: path.clone(),
                access: *access,
                kind: *kind,
                origin: Origin::Flag(flag.to_string()),
            },
        );
    }
}

/// The working directory, as a real path.
fn working_dir(input: &PolicyInput) -> Result<PathBuf, JailError> {
    Ok(match &input.settings.cwd {
        Some(dir) => {
            let abs = absolute(&input.base_dir, dir);
            std::fs::canonicalize(&abs)
                .map_err(|e| JailError::bad_path("--cwd", &abs, e.to_string()))?
        }
        None => input.base_dir.clone(),
    })
}

/// A working directory beneath the private /tmp (`cd /tmp/x && jail -- …`) that no rule names
/// is shown there read-only, as it would be anywhere else: the rule makes the mount view bind it
/// into the private /tmp, and without the view it keeps Landlock from granting it with the
/// host's /tmp.
fn show_tmp_working_dir(input: &PolicyInput, cwd: &Path, rules: &mut Rules) {
    if input.settings.tmp_host() || !cwd.starts_with("/tmp") || cwd == Path::new("/tmp") {
        return;
    }
    let covered = rules
        .values()
        .any(|r| r.path != Path::new("/") && cwd.starts_with(&r.path));
    if !covered {
        rules.insert(
            cwd.to_path_buf(),
            PathRule {
                path: cwd.to_path_buf(),
                access: Access::Ro,
                kind: Kind::Dir,
                origin: Origin::TmpWorkingDir,
            },
        );
    }
}

/// jail's own state is hidden in every jail, last, over every other rule: nothing beneath it
/// stays (a protected name found in a pending layer, a profile's path, a credential file), and
/// a flag naming a path inside it, or a `--cow` root holding it (its copy would carry the
/// state into the layer), is refused. A writable tree around it keeps it hidden: the mount view
/// pins the directories between them, and Landlock grants around it.
fn hide_jail_state(
    input: &PolicyInput,
    user: &FlagRules,
    rules: &mut Rules,
) -> Result<(), JailError> {
    let why = "(pending copy-on-write layers and their locks, hidden in every jail)";
    for (path, (access, _, flag)) in user {
        if let Some(state) = input.jail_state.iter().find(|s| path.starts_with(s)) {
            if *access != Access::Hide {
                return Err(JailError::bad_path(
                    flag,
                    path,
                    format!(
                        "is inside jail's state directory {} {why}; name a path outside it",
                        crate::text::path_text(state)
                    ),
                ));
            }
        }
        if *flag == COW_FLAG {
            if let Some(state) = input.jail_state.iter().find(|s| s.starts_with(path)) {
                return Err(JailError::bad_path(
                    flag,
                    path,
                    format!(
                        "holds jail's state directory {} {why}; use a --cow path beside it, or \
                         set XDG_STATE_HOME elsewhere",
                        crate::text::path_text(state)
                    ),
                ));
            }
        }
    }
    for socket in &input.settings.allow_sockets {
        let socket = absolute(&input.base_dir, socket);
        if let Some(state) = input.jail_state.iter().find(|s| socket.starts_with(s)) {
            return Err(JailError::bad_path(
                "--allow-socket",
                &socket,
                format!("is inside jail's state directory {} {why}", state.display()),
            ));
        }
    }
    for link in &input.jail_state_links {
        let dir = link.parent().unwrap_or(link);
        let writable = user
            .iter()
            .filter(|(path, _)| dir.starts_with(path))
            .max_by_key(|(path, _)| path.components().count())
            .is_some_and(|(_, (access, _, flag))| *access == Access::Rw && *flag != COW_FLAG)
            || rules
                .values()
                .filter(|r| dir.starts_with(&r.path))
                .max_by_key(|r| r.path.components().count())
                .is_some_and(|r| {
                    r.access == Access::Rw && r.origin != Origin::Flag(COW_FLAG.into())
                });
        if writable {
            return Err(JailError::bad_path(
                "jail state",
                link,
                format!(
                    "is a symlink on the way to jail's state directory, in a directory this run \
                     may write: the command could point your next `jail apply` at a store of its \
                     own making; set XDG_STATE_HOME to the real path {}, or keep {} read-only",
                    crate::policy::real_path(link).display(),
                    dir.display()
                ),
            ));
        }
    }
    for state in &input.jail_state {
        rules.retain(|path, _| !path.starts_with(state));
        rules.insert(
            state.clone(),
            PathRule {
                path: state.clone(),
                access: Access::Hide,
                kind: Kind::Dir,
                origin: Origin::JailState,
            },
        );
    }
    Ok(())
}

/// A hidden path inside another with nothing opened in between (`~/.aws/credentials` named by
/// AWS_SHARED_CREDENTIALS_FILE, under the hidden `~/.aws`) is hidden already; the mount view
/// could not even place it, since the enclosing empty tmpfs does not hold it.
fn drop_nested_hides(rules: &mut Rules) {
    let nested_hides: Vec<PathBuf> = rules
        .values()
        .filter(|r| r.access == Access::Hide)
        .filter(|r| {
            rules
                .values()
                .filter(|o| o.path != r.path && r.path.starts_with(&o.path))
                .max_by_key(|o| o.path.components().count())
                .is_some_and(|o| o.access == Access::Hide)
        })
        .map(|r| r.path.clone())
        .collect();
    for path in nested_hides {
        rules.remove(&path);
    }
}

#[cfg(test)]
mod tests {
    use super::paths::case_exact_names;
    use super::*;
    use crate::policy::profile::TmpOption;
    use crate::policy::settings::RunSettings;
    use std::fs;

    struct Tree(PathBuf);
    impl Tree {
        fn new(name: &str) -> Tree {
            let dir =
                std::env::temp_dir().join(format!("jail-resolve-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            Tree(dir)
        }
        fn p(&self, rel: &str) -> PathBuf {
            self.0.join(rel)
        }
    }
    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn input(t: &Tree) -> PolicyInput {
        PolicyInput {
            base_dir: t.0.clone(),
            settings: RunSettings {
                tmp: Some(TmpOption::Host), // test trees live under the host's temp dir
                command: vec!["true".into()],
                profile: Some("test".into()),
                ..RunSettings::default()
            },
            home: None,
            profile_paths: ["home/.ssh", "home/.aws", "home/.netrc", "home/.gnupg"]
                .iter()
                .map(|rel| ProfilePathRule {
                    path: t.p(rel),
                    access: Access::Hide,
                    profile: "test".into(),
                    protect: false,
                })
                .collect(),
            ..Default::default()
        }
    }

    fn rule<'a>(p: &'a Policy, path: &Path) -> Option<&'a PathRule> {
        p.rules.iter().find(|r| r.path == path)
    }

    #[test]
    fn relative_paths_resolve_against_base_and_missing_ones_fail() {
        let t = Tree::new("rel");
        fs::create_dir_all(t.p("repo/src")).unwrap();
        let mut i = input(&t);
        i.settings.ro = vec!["./repo/src/..".into()];
        let p = resolve(&i).unwrap();
        assert_eq!(rule(&p, &t.p("repo")).unwrap().access, Access::Ro);

        i.settings.ro = vec!["nope".into()];
        let e = resolve(&i).unwrap_err().to_string();
        assert!(e.contains("--ro") && e.contains("does not exist"), "{e}");
    }

    #[test]
    fn jail_state_is_hidden_whatever_the_flags_and_no_flag_opens_inside_it() {
        let t = Tree::new("state");
        let store = t.p("home/.local/state/jail");
        let other = t.p("other/jail");
        // A pending layer holding a protected name (found under --rw home), and a flag's hide.
        fs::create_dir_all(store.join("runs/0a1b2c3d/0/upper/.git/hooks")).unwrap();
        fs::create_dir_all(other.join("locks")).unwrap();
        fs::create_dir_all(t.p("repo")).unwrap();
        let mut i = input(&t);
        i.jail_state = vec![store.clone(), other.clone()];
        i.settings.rw = vec![t.p("home"), t.p("other")];
        i.settings.hide = vec![other.join("locks")];
        let p = resolve(&i).unwrap();
        for s in [&store, &other] {
            let r = rule(&p, s).unwrap();
            assert_eq!((r.access, &r.origin), (Access::Hide, &Origin::JailState));
            let beneath: Vec<&PathBuf> = p
                .rules
                .iter()
                .map(|r| &r.path)
                .filter(|r| *r != s && r.starts_with(s))
                .collect();
            assert!(beneath.is_empty(), "{beneath:?}");
        }
        // No flag names a path inside it, nor a copy-on-write root holding it (the copy-based
        // layer would copy it); an ancestor stays writable around it.
        let refused: [(&str, PathBuf); 6] = [
            ("--rw", store.clone()),
            ("--ro", store.join("runs")),
            ("--cow", other.join("locks")),
            ("--cache", store.join("runs")),
            ("--cow", t.p("other")),
            ("--allow-socket", store.join("runs/s")),
        ];
        for (flag, path) in refused {
            let mut i = input(&t);
            i.jail_state = vec![store.clone(), other.clone()];
            match flag {
                "--rw" => i.settings.rw = vec![path.clone()],
                "--ro" => i.settings.ro = vec![path.clone()],
                "--cow" => i.settings.cow = vec![path.clone()],
                "--cache" => i.settings.caches = vec![path.clone()],
                _ => i.settings.allow_sockets = vec![path.clone()],
            }
            let e = resolve(&i).unwrap_err().to_string();
            assert!(
                e.starts_with(flag) && e.contains("jail's state directory"),
                "{flag} {}: {e}",
                path.display()
            );
        }
    }

    #[test]
    fn symlinked_paths_are_refused_with_the_real_path() {
        let t = Tree::new("sym");
        fs::create_dir_all(t.p("real")).unwrap();
        std::os::unix::fs::symlink(t.p("real"), t.p("link")).unwrap();
        let mut i = input(&t);
        i.settings.rw = vec![t.p("link")];
        let e = resolve(&i).unwrap_err().to_string();
        assert!(e.contains("symlink") && e.contains("real"), "{e}");
    }

    #[test]
    fn conflicting_and_nested_in_hide_rules_are_refused() {
        let t = Tree::new("conf");
        fs::create_dir_all(t.p("a/b")).unwrap();
        let mut i = input(&t);
        i.settings.ro = vec![t.p("a")];
        i.settings.rw = vec![t.p("a")];
        assert!(
            resolve(&i)
                .unwrap_err()
                .to_string()
                .contains("also given with")
        );

        let mut i = input(&t);
        i.settings.hide = vec![t.p("a")];
        i.settings.ro = vec![t.p("a/b")];
        let e = resolve(&i).unwrap_err().to_string();
        assert!(e.contains("inside") && e.contains("--hide"), "{e}");
    }

    #[test]
    fn protected_names_stay_read_only_under_rw_unless_named() {
        let t = Tree::new("prot");
        fs::create_dir_all(t.p("repo/.git/hooks")).unwrap();
        fs::write(t.p("repo/.git/config"), "").unwrap();
        fs::write(t.p("repo/.envrc"), "").unwrap();
        let mut i = input(&t);
        i.settings.rw = vec![t.p("repo"), t.p("repo/.envrc")];
        let p = resolve(&i).unwrap();
        assert_eq!(p.access_at(&t.p("repo/src/x.rs")), Access::Rw);
        assert_eq!(p.access_at(&t.p("repo/.git/hooks/pre-commit")), Access::Ro);
        assert_eq!(p.access_at(&t.p("repo/.git/config")), Access::Ro);
        assert_eq!(p.access_at(&t.p("repo/.git/objects")), Access::Rw);
        assert_eq!(
            p.access_at(&t.p("repo/.envrc")),
            Access::Rw,
            "named exactly: the flag wins"
        );
        assert!(p.absent_protected.contains(&t.p("repo/.mcp.json")));
        assert_eq!(
            rule(&p, &t.p("repo/.git/hooks")).unwrap().origin,
            Origin::Protected(t.p("repo"))
        );
    }

    #[test]
    fn protected_names_in_nested_projects_and_in_a_git_dir_root_are_kept() {
        let t = Tree::new("nested");
        fs::create_dir_all(t.p("projects/org/app/.git/hooks")).unwrap();
        fs::write(t.p("projects/org/app/.git/config"), "").unwrap();
        fs::create_dir_all(t.p("projects/node_modules/dep/.git/hooks")).unwrap();
        let mut i = input(&t);
        i.settings.rw = vec![t.p("projects")];
        let p = resolve(&i).unwrap();
        assert_eq!(
            p.access_at(&t.p("projects/org/app/.git/hooks/x")),
            Access::Ro
        );
        assert_eq!(
            p.access_at(&t.p("projects/org/app/.git/config")),
            Access::Ro
        );
        assert_eq!(p.access_at(&t.p("projects/org/app/src")), Access::Rw);
        assert_eq!(
            p.access_at(&t.p("projects/node_modules/dep/.git/hooks/x")),
            Access::Rw,
            "dependencies are not searched"
        );
        let mut i = input(&t);
        i.settings.rw = vec![t.p("projects/org/app/.git")];
        let p = resolve(&i).unwrap();
        assert_eq!(
            p.access_at(&t.p("projects/org/app/.git/hooks/x")),
            Access::Ro
        );
        assert_eq!(
            p.access_at(&t.p("projects/org/app/.git/config")),
            Access::Ro
        );
        assert_eq!(p.access_at(&t.p("projects/org/app/.git/index")), Access::Rw);
    }

    /// The test tree's input with a private /tmp (under the host's, all of the tree would be
    /// writable already), run from the worktree.
    fn private_tmp(t: &Tree) -> PolicyInput {
        let mut i = input(t);
        i.settings.tmp = None;
        i.settings.cwd = Some(t.p("wt"));
        i
    }

    /// A main repository at `main` and its linked worktree at `wt`, laid out as `git worktree
    /// add` leaves them (without git: the resolver reads only the files).
    fn worktree_layout(t: &Tree) {
        for d in [
            "main/.git/objects/pack",
            "main/.git/refs/heads",
            "main/.git/hooks",
        ] {
            fs::create_dir_all(t.p(d)).unwrap();
        }
        fs::create_dir_all(t.p("main/.git/info")).unwrap();
        fs::create_dir_all(t.p("main/.git/logs/refs/heads")).unwrap();
        fs::write(t.p("main/.git/HEAD"), "ref: refs/heads/master\n").unwrap();
        fs::write(t.p("main/.git/config"), "").unwrap();
        fs::write(t.p("main/.git/packed-refs"), "").unwrap();
        fs::write(t.p("main/file"), "").unwrap();
        let wtd = t.p("main/.git/worktrees/wt");
        fs::create_dir_all(&wtd).unwrap();
        fs::write(wtd.join("HEAD"), "ref: refs/heads/wt\n").unwrap();
        fs::write(wtd.join("commondir"), "../..\n").unwrap();
        fs::write(wtd.join("config.worktree"), "").unwrap();
        fs::write(
            wtd.join("gitdir"),
            format!("{}\n", t.p("wt/.git").display()),
        )
        .unwrap();
        fs::create_dir_all(t.p("wt")).unwrap();
        fs::write(t.p("wt/.git"), format!("gitdir: {}\n", wtd.display())).unwrap();
    }

    #[test]
    fn a_linked_worktree_under_rw_opens_its_git_dir_and_the_shared_parts_only() {
        let t = Tree::new("worktree");
        worktree_layout(&t);
        let mut i = private_tmp(&t);
        i.settings.rw = vec![t.p("wt")];
        let p = resolve(&i).unwrap();
        for rw in [
            "main/.git/worktrees/wt/index",
            "main/.git/worktrees/wt/logs/HEAD",
            "main/.git/objects/ab",
            "main/.git/refs/heads/x",
            "main/.git/logs/refs/heads/x",
            "main/.git/packed-refs",
            "wt/f",
        ] {
            assert_eq!(p.access_at(&t.p(rw)), Access::Rw, "{rw}");
        }
        for ro in [
            "main/.git/worktrees/wt/config.worktree",
            "main/.git/worktrees/wt/commondir",
            "main/.git/worktrees/other",
            "main/.git/hooks/pre-commit",
            "main/.git/config",
            "main/.git/info/exclude",
            "main/.git/HEAD",
            "main/.git/index",
            "main/file",
            "wt/.git",
        ] {
            assert_eq!(p.access_at(&t.p(ro)), Access::Ro, "{ro}");
        }
        let rule = p.rule_for(&t.p("main/.git/objects")).unwrap();
        assert_eq!(rule.origin, Origin::GitWorktree(t.p("wt")));
        // The tree is in the private /tmp: the main git directory is shown there, read-only.
        let rule = p.rule_for(&t.p("main/.git/HEAD")).unwrap();
        assert_eq!(
            (rule.path.clone(), rule.access),
            (t.p("main/.git"), Access::Ro)
        );
        // A hidden main repository stays hidden.
        let mut i = private_tmp(&t);
        i.settings.rw = vec![t.p("wt")];
        i.settings.hide = vec![t.p("main")];
        let p = resolve(&i).unwrap();
        assert_eq!(p.access_at(&t.p("main/.git/objects/x")), Access::Hide);
        assert!(
            p.rules
                .iter()
                .all(|r| !matches!(r.origin, Origin::GitWorktree(_)))
        );
        // Nested a few levels below the writable root, found the same way.
        let mut i = private_tmp(&t);
        i.settings.rw = vec![t.0.clone()];
        let p = resolve(&i).unwrap();
        assert_eq!(p.access_at(&t.p("main/.git/config")), Access::Ro);
        assert_eq!(
            p.access_at(&t.p("main/.git/worktrees/wt/config.worktree")),
            Access::Ro
        );
    }

    #[test]
    fn a_gitfile_that_does_not_lead_to_a_real_worktree_opens_nothing() {
        let outside = |p: &Policy, t: &Tree| {
            ["main/.git/worktrees/wt/index", "main/.git/objects/x"]
                .iter()
                .all(|rel| p.access_at(&t.p(rel)) == Access::Ro)
        };
        // The worktree's git dir does not name this gitfile back (a gitfile alone claims it).
        let t = Tree::new("wt-claim");
        worktree_layout(&t);
        fs::write(t.p("main/.git/worktrees/wt/gitdir"), "/elsewhere/.git\n").unwrap();
        let mut i = private_tmp(&t);
        i.settings.rw = vec![t.p("wt")];
        assert!(outside(&resolve(&i).unwrap(), &t));
        // commondir names a directory that does not hold this one in its worktrees/.
        let t = Tree::new("wt-common");
        worktree_layout(&t);
        fs::create_dir_all(t.p("other/.git/objects")).unwrap();
        fs::create_dir_all(t.p("other/.git/refs")).unwrap();
        fs::write(t.p("other/.git/HEAD"), "").unwrap();
        let common = t.p("other/.git");
        fs::write(
            t.p("main/.git/worktrees/wt/commondir"),
            common.to_str().unwrap(),
        )
        .unwrap();
        let mut i = private_tmp(&t);
        i.settings.rw = vec![t.p("wt")];
        let p = resolve(&i).unwrap();
        assert!(outside(&p, &t));
        assert_eq!(p.access_at(&t.p("other/.git/objects/x")), Access::Ro);
        // A shared part that is a symlink would make its target writable: it stays as it is.
        let t = Tree::new("wt-link");
        worktree_layout(&t);
        fs::create_dir_all(t.p("secret")).unwrap();
        fs::remove_dir_all(t.p("main/.git/refs")).unwrap();
        fs::create_dir_all(t.p("main/.git/refs2")).unwrap();
        fs::remove_dir_all(t.p("main/.git/logs")).unwrap();
        std::os::unix::fs::symlink(t.p("secret"), t.p("main/.git/logs")).unwrap();
        let mut i = private_tmp(&t);
        i.settings.rw = vec![t.p("wt")];
        // (refs is missing: no git directory, nothing opened.)
        assert!(outside(&resolve(&i).unwrap(), &t));
        fs::rename(t.p("main/.git/refs2"), t.p("main/.git/refs")).unwrap();
        let p = resolve(&i).unwrap();
        assert_eq!(p.access_at(&t.p("main/.git/objects/x")), Access::Rw);
        assert_eq!(p.access_at(&t.p("main/.git/logs/x")), Access::Ro);
        assert_eq!(p.access_at(&t.p("secret/x")), Access::Ro);
        // A gitfile into a superproject's .git/modules that is not a submodule's git directory
        // (no config naming this checkout as its core.worktree): left as it was.
        let t = Tree::new("wt-sub");
        worktree_layout(&t);
        let m = t.p("main/.git/modules/x");
        fs::create_dir_all(m.join("objects")).unwrap();
        fs::create_dir_all(m.join("refs")).unwrap();
        fs::write(m.join("HEAD"), "").unwrap();
        fs::create_dir_all(t.p("main/x")).unwrap();
        fs::write(t.p("main/x/.git"), "gitdir: ../.git/modules/x\n").unwrap();
        let mut i = private_tmp(&t);
        i.settings.rw = vec![t.p("main/x")];
        let p = resolve(&i).unwrap();
        assert_eq!(p.access_at(&m.join("objects/x")), Access::Ro);
        assert_eq!(p.access_at(&t.p("main/x/.git")), Access::Ro);
        assert_eq!(p.access_at(&t.p("main/x/src")), Access::Rw);
    }

    #[test]
    fn a_submodule_under_rw_opens_its_git_dir_but_its_config_and_hooks() {
        let t = Tree::new("submodule");
        worktree_layout(&t);
        let m = t.p("main/.git/modules/lib/x");
        for d in [
            "objects",
            "refs/heads",
            "hooks",
            "modules/y/objects",
            "modules/y/refs",
        ] {
            fs::create_dir_all(m.join(d)).unwrap();
        }
        fs::write(m.join("HEAD"), "").unwrap();
        fs::write(m.join("modules/y/HEAD"), "").unwrap();
        fs::write(m.join("modules/y/config"), "").unwrap();
        fs::write(m.join("config"), "[core]\n\tworktree = ../../../../lib/x\n").unwrap();
        fs::create_dir_all(t.p("main/lib/x")).unwrap();
        fs::write(t.p("main/lib/x/.git"), "gitdir: ../../.git/modules/lib/x\n").unwrap();
        let mut i = private_tmp(&t);
        i.settings.rw = vec![t.p("main/lib/x")];
        let p = resolve(&i).unwrap();
        for rw in ["index", "objects/ab", "refs/heads/x"] {
            assert_eq!(p.access_at(&m.join(rw)), Access::Rw, "{rw}");
        }
        for ro in ["config", "hooks/pre-commit", "modules/y/config"] {
            assert_eq!(p.access_at(&m.join(ro)), Access::Ro, "{ro}");
        }
        assert_eq!(p.access_at(&t.p("main/.git/config")), Access::Ro);
        assert_eq!(p.access_at(&t.p("main/.git/objects/x")), Access::Ro);
        assert_eq!(
            p.rule_for(&m).unwrap().origin,
            Origin::GitSubmodule(t.p("main/lib/x"))
        );
        assert!(p.absent_protected.contains(&m.join("modules/y/hooks")));
        // Its core.worktree names another directory: the gitfile claims it alone.
        fs::write(
            m.join("config"),
            "[core]\n\tworktree = ../../../../elsewhere\n",
        )
        .unwrap();
        fs::create_dir_all(t.p("main/elsewhere")).unwrap();
        let p = resolve(&i).unwrap();
        assert_eq!(p.access_at(&m.join("index")), Access::Ro);
    }

    #[test]
    fn a_symlink_at_a_protected_name_fails_closed() {
        let t = Tree::new("protsym");
        fs::create_dir_all(t.p("repo/.git")).unwrap();
        fs::create_dir_all(t.p("elsewhere")).unwrap();
        std::os::unix::fs::symlink(t.p("elsewhere"), t.p("repo/.git/hooks")).unwrap();
        let mut i = input(&t);
        i.settings.rw = vec![t.p("repo")];
        let e = resolve(&i).unwrap_err().to_string();
        assert!(e.contains(".git/hooks") && e.contains("symlink"), "{e}");
    }

    #[test]
    fn default_hides_apply_when_present_and_yield_to_flags() {
        let t = Tree::new("hide");
        fs::create_dir_all(t.p("home/.ssh")).unwrap();
        fs::create_dir_all(t.p("home/.aws")).unwrap();
        fs::write(t.p("home/.netrc"), "machine x").unwrap();
        fs::write(t.p("home/.ssh/config"), "").unwrap();
        let mut i = input(&t);
        i.settings.ro = vec![t.p("home/.ssh/config")];
        let p = resolve(&i).unwrap();
        assert_eq!(p.access_at(&t.p("home/.aws/credentials")), Access::Hide);
        let netrc = rule(&p, &t.p("home/.netrc")).unwrap();
        assert_eq!((netrc.access, netrc.kind), (Access::Hide, Kind::File));
        assert_eq!(
            p.access_at(&t.p("home/.ssh/config")),
            Access::Ro,
            "flag beats default"
        );
        assert_eq!(
            p.access_at(&t.p("home/.ssh/id_ed25519")),
            Access::Hide,
            "only the named path is opened"
        );
        assert!(
            rule(&p, &t.p("home/.gnupg")).is_none(),
            "absent paths are not rules"
        );
    }

    #[test]
    fn files_credential_variables_name_are_hidden_unless_too_wide_or_no_store() {
        let t = Tree::new("credvars");
        fs::create_dir_all(t.p("keys/kube")).unwrap();
        fs::write(t.p("keys/kube/config"), "x").unwrap();
        fs::create_dir_all(t.p("home")).unwrap();
        fs::write(t.p("keys/sa.json"), "{}").unwrap();
        fs::write(t.p("keys/open.pem"), "x").unwrap();
        std::os::unix::fs::symlink(t.p("keys/sa.json"), t.p("sa-link.json")).unwrap();
        let mut i = input(&t);
        i.settings.ro = vec![t.p("keys/open.pem")];
        i.credential_files = [
            ("GOOGLE_APPLICATION_CREDENTIALS", t.p("sa-link.json")),
            ("KUBECONFIG", t.p("keys/kube")),
            ("KUBE_CREDENTIALS_FILE", t.p("keys/kube/config")),
            ("AWS_CONFIG_FILE", "/dev/null".into()),
            ("MISSING_KEY_FILE", t.p("keys/none")),
            ("OPEN_KEY_FILE", t.p("keys/open.pem")),
        ]
        .into_iter()
        .map(|(v, p)| (v.to_string(), p))
        .collect();
        let p = resolve(&i).unwrap();
        let real = fs::canonicalize(t.p("keys/sa.json")).unwrap();
        let sa = rule(&p, &real).expect("the symlink's target is hidden");
        assert_eq!(
            (sa.access, sa.kind, &sa.origin),
            (
                Access::Hide,
                Kind::File,
                &Origin::Env("GOOGLE_APPLICATION_CREDENTIALS".into())
            )
        );
        assert_eq!(rule(&p, &t.p("keys/kube")).unwrap().kind, Kind::Dir);
        assert!(
            rule(&p, &t.p("keys/kube/config")).is_none(),
            "a hide inside a hide is the outer one's"
        );
        assert!(
            rule(&p, Path::new("/dev/null")).is_none(),
            "a device is no store"
        );
        assert_eq!(
            p.access_at(&t.p("keys/open.pem")),
            Access::Ro,
            "a flag wins"
        );

        // A variable naming a directory that holds HOME or the working directory stops the
        // launch, naming it.
        for wide in [t.p("home"), t.0.clone()] {
            let mut i = input(&t);
            i.home = Some(t.p("home"));
            i.credential_files = vec![("DOCKER_CONFIG".into(), wide)];
            let e = resolve(&i).unwrap_err().to_string();
            assert!(
                e.contains("DOCKER_CONFIG") && e.contains("--env DOCKER_CONFIG"),
                "{e}"
            );
        }
    }

    #[test]
    fn default_hide_through_a_symlink_hides_the_target() {
        let t = Tree::new("hidesym");
        fs::create_dir_all(t.p("dotfiles/ssh")).unwrap();
        fs::create_dir_all(t.p("home")).unwrap();
        std::os::unix::fs::symlink(t.p("dotfiles/ssh"), t.p("home/.ssh")).unwrap();
        let p = resolve(&input(&t)).unwrap();
        let real = fs::canonicalize(t.p("dotfiles/ssh")).unwrap();
        assert_eq!(p.access_at(&real), Access::Hide);
    }

    #[test]
    fn view_owned_places_and_private_tmp_are_refused() {
        let t = Tree::new("owned");
        let mut i = input(&t);
        i.settings.rw = vec!["/proc/self".into()];
        assert!(resolve(&i).unwrap_err().to_string().contains("/proc"));
        let mut i = input(&t);
        i.settings.tmp = None;
        i.settings.rw = vec![std::env::temp_dir()];
        if std::env::temp_dir().starts_with("/tmp") {
            assert!(resolve(&i).unwrap_err().to_string().contains("--tmp host"));
        }
    }

    #[test]
    fn bare_repositories_and_new_names_below_the_root_are_found_by_layout() {
        let t = Tree::new("bare");
        for d in [
            "w/fixtures/r.git/objects",
            "w/fixtures/r.git/refs",
            "w/fixtures/r.git/hooks",
        ] {
            fs::create_dir_all(t.p(d)).unwrap();
        }
        fs::write(t.p("w/fixtures/r.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        fs::write(t.p("w/fixtures/r.git/config"), "").unwrap();
        fs::create_dir_all(t.p("w/app/.cargo")).unwrap();
        fs::write(t.p("w/app/.cargo/config.toml"), "").unwrap();
        fs::write(t.p("w/app/x.code-workspace"), "{}").unwrap();
        let mut i = input(&t);
        i.settings.rw = vec![t.p("w")];
        let p = resolve(&i).unwrap();
        for ro in [
            "w/fixtures/r.git/hooks/x",
            "w/fixtures/r.git/config",
            "w/app/.cargo/config.toml",
            "w/app/x.code-workspace",
        ] {
            assert_eq!(p.access_at(&t.p(ro)), Access::Ro, "{ro}");
        }
        assert_eq!(p.access_at(&t.p("w/fixtures/r.git/objects/x")), Access::Rw);
        assert_eq!(p.access_at(&t.p("w/app/.cargo/registry")), Access::Rw);
    }

    #[test]
    fn keep_fd_below_three_is_refused() {
        let t = Tree::new("fd");
        let mut i = input(&t);
        i.settings.keep_fds = vec![2];
        assert!(resolve(&i).unwrap_err().to_string().contains("--keep-fd 2"));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn listings_answer_absence_only_for_names_their_directory_lacks() {
        let t = Tree::new("listings");
        fs::create_dir_all(t.p("home/.config")).unwrap();
        fs::write(t.p("home/.aws"), "").unwrap();
        let listed = Listings::default();
        if case_exact_names(&t.p("home")).is_none() {
            // A file system this code does not know to be case-exact: listings never answer.
            for _ in 0..2 * Listings::LIST_AFTER {
                assert!(!listed.surely_absent(&t.p("home/.ssh")));
            }
            return;
        }
        // Case-exact (ext4, btrfs, tmpfs, overlayfs): the listing answers once asked often enough.
        for _ in 1..Listings::LIST_AFTER {
            assert!(!listed.surely_absent(&t.p("home/.ssh")), "listed too early");
        }
        assert!(!listed.surely_absent(&t.p("home/.aws")));
        assert!(!listed.surely_absent(&t.p("home/.config")));
        assert!(listed.surely_absent(&t.p("home/.AWS")));
        assert!(listed.surely_absent(&t.p("home/.ssh")));
        // Below an absent directory, from its parent's listing.
        assert!(listed.surely_absent(&t.p("home/.var/app/org.x/config")));
        // A path spelled with `..` or `.` is looked up, never answered from a listing.
        assert!(!listed.surely_absent(&t.p("home/.config/../.ssh")));
        assert!(!listed.surely_absent(Path::new("relative/.ssh")));
        // And existing_target agrees with lstat on each.
        assert_eq!(
            existing_target(&t.p("home/.aws"), &listed),
            Some(t.p("home/.aws"))
        );
        assert_eq!(existing_target(&t.p("home/.ssh"), &listed), None);
    }
}
