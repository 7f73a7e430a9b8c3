//! Profiles: TOML files compiled into the binary (profiles/*.toml) and the user's own in
//! $XDG_CONFIG_HOME/jail/profiles/. A profile may extend others: lists merge, scalars override,
//! and for the same path the later rule wins. Profiles are never read from the jailed project: an
//! untrusted repository must not be able to loosen its own jail.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::limits::Limits;
use super::{Access, Require};
use crate::error::JailError;

/// The profiles shipped inside the binary.
pub const EMBEDDED: &[(&str, &str)] = &[
    ("default", include_str!("../../profiles/default.toml")),
    ("review", include_str!("../../profiles/review.toml")),
    ("workspace", include_str!("../../profiles/workspace.toml")),
    ("ci", include_str!("../../profiles/ci.toml")),
    ("opencode", include_str!("../../profiles/opencode.toml")),
    (
        "claude-code",
        include_str!("../../profiles/claude-code.toml"),
    ),
    ("codex", include_str!("../../profiles/codex.toml")),
    ("gemini-cli", include_str!("../../profiles/gemini-cli.toml")),
    ("aider", include_str!("../../profiles/aider.toml")),
];

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    description: Option<String>,
    /// `base = false`: leave out the embedded default profile's protections, which every
    /// profile otherwise builds on whether or not it extends it. Said on every run.
    base: Option<bool>,
    #[serde(default)]
    extends: Vec<Spanned<String>>,
    #[serde(default)]
    paths: PathsSection,
    #[serde(default)]
    env: EnvSection,
    #[serde(default)]
    options: ProfileOptions,
    /// `[secrets]`: `NAME = ["api.host", ...]`, the agent's keys and the hosts they belong to.
    #[serde(default)]
    secrets: BTreeMap<String, Vec<String>>,
    /// `[limits]`: checked when the file is read, kept parsed below.
    #[serde(default)]
    limits: toml::Table,
    /// `[agent]`: the agent this profile is for, the command names that run it and its login.
    agent: Option<ProfileAgent>,
    #[serde(skip)]
    parsed_limits: Limits,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PathsSection {
    #[serde(default)]
    ro: Vec<String>,
    /// Read-only like `ro`, and moved aside after the run when the command created it: an
    /// agent's own settings inside its writable state directory.
    #[serde(default)]
    protect: Vec<String>,
    /// Protected files the agent would create on its first run (so they would be moved aside
    /// after every run): jail writes them first, with this content, and keeps them read-only.
    #[serde(default)]
    seed: BTreeMap<String, String>,
    /// JSON state files the agent must keep writable but that also hold settings that run
    /// code (MCP servers): the keys named here (dot-separated, `*` for any one key) must not
    /// change during a run, or the file is moved aside and its version from before is put back.
    #[serde(default)]
    guard: BTreeMap<String, Vec<String>>,
    /// An agent's state directory (also named in `rw`) and the data it writes there (names
    /// relative to it, `*` for any run of characters in one component): everything else in it
    /// is taken as code the agent's hooks and scripts may run, read-only where it exists and
    /// moved aside after the run where it appears ([`crate::protect::agent_state`]).
    #[serde(default)]
    state: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    rw: Vec<String>,
    /// Writable inside, every write kept in a per-run layer outside until `jail apply`.
    #[serde(default)]
    cow: Vec<String>,
    /// Writable inside through a throwaway layer: nothing written reaches the host.
    #[serde(default)]
    cache: Vec<String>,
    #[serde(default)]
    hide: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvSection {
    clear: Option<bool>,
    #[serde(default)]
    keep: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    set: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum TmpOption {
    Private,
    Host,
}

/// The agent a profile is for. Its login files are given to it (read-only where the homes
/// are hidden) when it is the one run, under its own profile or as a command of another
/// profile, and hidden from every other command: a reviewer running `claude` under `review`
/// still signs in, and nothing it starts reads Codex's or Gemini's login.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileAgent {
    /// Its name (`claude`).
    pub name: String,
    /// The names of the programs that run it (`claude`): a command of one of these names is
    /// this agent.
    #[serde(default)]
    pub commands: Vec<String>,
    /// The files it signs in with (`~/.claude/.credentials.json`), as path templates.
    #[serde(default)]
    pub login: Vec<String>,
}

/// Where a profile was read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "path")]
pub enum Source {
    Embedded,
    File(#[serde(with = "crate::byte_path")] PathBuf),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Embedded => write!(f, "embedded"),
            Source::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// One profile's text and where it came from.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub source: Source,
    pub text: String,
    /// An embedded profile of the same name that this user file shadows.
    pub shadows_embedded: bool,
    /// Why the file could not be read (not UTF-8, a directory, a bad name): only a run that
    /// uses this profile fails; `profile list` shows it.
    pub unreadable: Option<String>,
}

/// All profiles known: the embedded ones, then the user's, which may shadow them.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub entries: BTreeMap<String, Entry>,
}

/// A path rule from a profile, before `~` and `${…}` are expanded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProfilePath {
    pub template: String,
    pub access: Access,
    pub profile: String,
    /// From `protect`: read-only, and moved aside after the run if the command created it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub protect: bool,
    /// From `seed`: created with this content before the run when missing (then protected).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    /// From `cow`: writable through a copy-on-write layer (access is Rw).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cow: bool,
    /// From `cache`: writable through a throwaway layer (access is Rw).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cache: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProfileEnv {
    pub clear: bool,
    pub keep: Vec<String>,
    pub deny: Vec<String>,
    pub set: BTreeMap<String, String>,
}

/// The `[options]` table: the run settings ([`super::settings::RunSettings`], of the same
/// names) a profile may set. Each is unset unless a profile of the chain sets it, and the later
/// profile's wins ([`ProfileOptions::or`]); the flags win over all ([`RunSettings::over`]).
/// Read, merged and printed (`jail profile show`) as derived: a new one is a field here.
///
/// [`RunSettings::over`]: super::settings::RunSettings::over
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileOptions {
    pub tmp: Option<TmpOption>,
    pub require: Option<Require>,
    pub allow_userns: Option<bool>,
    pub allow_unix_sockets: Option<bool>,
    /// `--home`: home directories visible or hidden but for the named paths.
    pub home: Option<super::homes::HomeMode>,
    /// `--timeout`, as text: a bad one is refused naming the profile, when a run uses it.
    pub timeout: Option<String>,
    /// `--net` rules; a profile that sets them replaces its parent's.
    pub net: Option<Vec<String>>,
}

impl ProfileOptions {
    /// These options (a later profile's) over `parent`'s: each one set here wins.
    pub fn or(&self, parent: &ProfileOptions) -> ProfileOptions {
        ProfileOptions {
            tmp: self.tmp.or(parent.tmp),
            require: self.require.or(parent.require),
            allow_userns: self.allow_userns.or(parent.allow_userns),
            allow_unix_sockets: self.allow_unix_sockets.or(parent.allow_unix_sockets),
            home: self.home.or(parent.home),
            timeout: self.timeout.clone().or_else(|| parent.timeout.clone()),
            net: self.net.clone().or_else(|| parent.net.clone()),
        }
    }
}

/// A profile with everything it extends merged in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolved {
    pub name: String,
    pub description: Option<String>,
    /// The profiles merged, parents first.
    pub chain: Vec<String>,
    pub paths: Vec<ProfilePath>,
    /// From `[paths.guard]`: JSON files whose named keys must not change.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub guards: Vec<ProfileGuard>,
    /// From `[paths.state]`: agent state directories with the data named in them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub states: Vec<ProfileState>,
    pub env: ProfileEnv,
    pub options: ProfileOptions,
    /// From `[secrets]`: each variable's hosts; a later profile's list for a name replaces the
    /// earlier one.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub secrets: BTreeMap<String, SecretHosts>,
    /// From `[limits]`: each bound the later profile sets wins.
    pub limits: Limits,
    /// The profile in the chain that set `base = false` (the embedded default's protections
    /// left out), if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_left_out_by: Option<String>,
    /// The agent the profile is for (the last one in the chain that names one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<ProfileAgent>,
}

/// The name the embedded default takes in a chain where a user file shadows `default`.
const EMBEDDED_DEFAULT: &str = "default (embedded)";

/// An agent's state directory, before `~` and `${…}` are expanded, with the data it writes
/// there (relative name patterns).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProfileState {
    pub template: String,
    pub data: Vec<String>,
    pub profile: String,
}

/// The hosts a profile declares for a secret, and the profile that declared them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretHosts {
    pub hosts: Vec<String>,
    pub profile: String,
}

/// A guarded JSON file, before `~` and `${…}` are expanded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProfileGuard {
    pub template: String,
    pub keys: Vec<String>,
    pub profile: String,
}

impl Catalog {
    /// The embedded profiles and those in `user_dir` (`*.toml`; a missing directory is fine).
    pub fn load(user_dir: Option<&Path>) -> Result<Catalog, JailError> {
        let mut cat = Catalog::default();
        for (name, text) in EMBEDDED {
            cat.entries.insert(
                name.to_string(),
                Entry {
                    name: name.to_string(),
                    source: Source::Embedded,
                    text: text.to_string(),
                    shadows_embedded: false,
                    unreadable: None,
                },
            );
        }
        let Some(dir) = user_dir else {
            return Ok(cat);
        };
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(cat),
            // Unlike one bad file, a directory that cannot be listed may hold a default.toml
            // with protections of the user's own: running without them would drop them
            // silently, so every run stops and says where.
            Err(e) => {
                return Err(JailError::BadInput(format!(
                    "profile directory {}: {e}; jail reads your profiles there (point \
                     XDG_CONFIG_HOME, or HOME, at a directory this user can read)",
                    dir.display()
                )));
            }
        };
        let mut files: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        // One bad file costs only the runs that use it: every other profile, and `profile
        // list`, still work.
        for path in files {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let (text, unreadable) = if !valid_name(&name) {
                (
                    String::new(),
                    Some("the name must be letters, digits, '-' or '_'".to_string()),
                )
            } else if path.is_dir() {
                (
                    String::new(),
                    Some("is a directory, not a file".to_string()),
                )
            } else {
                match std::fs::read_to_string(&path) {
                    Ok(text) => (text, None),
                    Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                        (String::new(), Some("is not UTF-8 text".to_string()))
                    }
                    Err(e) => (String::new(), Some(e.to_string())),
                }
            };
            let shadows = cat.entries.contains_key(&name);
            if shadows {
                tracing::info!(
                    "user profile {} shadows the embedded '{name}'",
                    path.display()
                );
            }
            cat.entries.insert(
                name.clone(),
                Entry {
                    name,
                    source: Source::File(path),
                    text,
                    shadows_embedded: shadows,
                    unreadable,
                },
            );
        }
        Ok(cat)
    }

    /// "file:line:col" of the first place `needle` (as a TOML string) appears in `profile`.
    pub fn locate(&self, profile: &str, needle: &str) -> String {
        let Some(entry) = self.entries.get(profile) else {
            return profile.to_string();
        };
        let quoted = toml::Value::String(needle.to_string()).to_string();
        match entry.text.find(&quoted) {
            Some(offset) => {
                let (line, col) = line_col(&entry.text, offset);
                format!("{}:{line}:{col}", entry.source)
            }
            None => entry.source.to_string(),
        }
    }

    /// `name` with everything it extends merged in.
    pub fn resolve(&self, name: &str) -> Result<Resolved, JailError> {
        let entry = self
            .entries
            .get(name)
            .ok_or_else(|| JailError::UnknownProfile {
                name: name.to_string(),
                known: self.entries.keys().cloned().collect(),
            })?;
        let mut order = Vec::new();
        let mut parsed = BTreeMap::new();
        self.visit(entry, &mut Vec::new(), &mut order, &mut parsed)?;
        // Every profile builds on the embedded default (hidden credentials, secret variables
        // out of the environment) unless one in its chain says `base = false`: a profile that
        // forgets `extends`, or a user default.toml, must not drop them silently.
        let has_base = |order: &[String]| {
            order.iter().any(|n| {
                n == EMBEDDED_DEFAULT
                    || n == "default"
                        && self
                            .entries
                            .get("default")
                            .is_some_and(|e| e.source == Source::Embedded)
            })
        };
        // Named only when the base really is missing (another profile of the chain may still
        // extend the embedded default).
        let base_left_out_by = (!has_base(&order))
            .then(|| {
                order
                    .iter()
                    .find(|n| parsed[*n].base == Some(false))
                    .cloned()
            })
            .flatten();
        if base_left_out_by.is_none() && !has_base(&order) {
            let text = EMBEDDED
                .iter()
                .find(|(n, _)| *n == "default")
                .map(|(_, t)| *t)
                .unwrap_or_default();
            let embedded = Entry {
                name: EMBEDDED_DEFAULT.into(),
                source: Source::Embedded,
                text: text.into(),
                shadows_embedded: false,
                unreadable: None,
            };
            let mut with_base = Vec::new();
            self.visit(&embedded, &mut Vec::new(), &mut with_base, &mut parsed)?;
            with_base.extend(order);
            order = with_base;
        }
        let mut out = Resolved {
            name: name.to_string(),
            description: None,
            chain: Vec::new(),
            paths: Vec::new(),
            guards: Vec::new(),
            states: Vec::new(),
            env: ProfileEnv::default(),
            options: ProfileOptions::default(),
            limits: Limits::default(),
            secrets: BTreeMap::new(),
            base_left_out_by,
            agent: None,
        };
        for pname in order {
            let file: &ProfileFile = &parsed[&pname];
            merge(&mut out, &pname, file);
        }
        // Its own description, else the nearest one it builds on.
        out.description = out
            .chain
            .iter()
            .rev()
            .find_map(|n| parsed[n].description.clone());
        Ok(out)
    }

    /// Every agent a profile is for, embedded or the user's, each once: whose logins a run
    /// hides, but for its own agent's. A user file that shadows an embedded agent profile
    /// adds its login files to the embedded ones (it cannot take the embedded ones out of the
    /// hiding). A profile that cannot be read names no agent (a run that uses it fails).
    pub fn agents(&self) -> Vec<ProfileAgent> {
        let embedded = EMBEDDED.iter().map(|(name, text)| Entry {
            name: name.to_string(),
            source: Source::Embedded,
            text: text.to_string(),
            shadows_embedded: false,
            unreadable: None,
        });
        let mut out: Vec<ProfileAgent> = Vec::new();
        for entry in embedded.chain(self.entries.values().cloned()) {
            let Some(agent) = agent_section(&entry) else {
                continue;
            };
            match out.iter_mut().find(|a| a.name == agent.name) {
                Some(known) => {
                    extend_unique(&mut known.commands, &agent.commands);
                    extend_unique(&mut known.login, &agent.login);
                }
                None => out.push(agent),
            }
        }
        out
    }

    /// Depth-first over `extends`, parents before children, each profile once; a cycle is an
    /// error naming the file, line and column of the `extends` entry that closes it.
    fn visit(
        &self,
        entry: &Entry,
        stack: &mut Vec<String>,
        order: &mut Vec<String>,
        parsed: &mut BTreeMap<String, ProfileFile>,
    ) -> Result<(), JailError> {
        if order.contains(&entry.name) {
            return Ok(());
        }
        let file = parse(entry)?;
        stack.push(entry.name.clone());
        for parent in &file.extends {
            let pname = parent.get_ref();
            let (line, col) = line_col(&entry.text, parent.span().start);
            let at = Some(format!("{}:{line}:{col}", entry.source));
            // A user file that shadows an embedded profile may build on it by its own name.
            let base = (pname == &entry.name && entry.shadows_embedded)
                .then(|| EMBEDDED.iter().find(|(n, _)| n == pname))
                .flatten();
            if let Some((n, text)) = base {
                let embedded = Entry {
                    name: format!("{n} (embedded)"),
                    source: Source::Embedded,
                    text: text.to_string(),
                    shadows_embedded: false,
                    unreadable: None,
                };
                self.visit(&embedded, stack, order, parsed)?;
                continue;
            }
            if stack.contains(pname) {
                let mut cycle = stack.clone();
                cycle.push(pname.clone());
                return Err(JailError::bad_profile(
                    &entry.name,
                    at,
                    format!("extends cycle {}", cycle.join(" -> ")),
                ));
            }
            let parent_entry = self.entries.get(pname).ok_or_else(|| {
                JailError::bad_profile(
                    &entry.name,
                    at.clone(),
                    format!("extends unknown profile '{pname}'"),
                )
            })?;
            self.visit(parent_entry, stack, order, parsed)?;
        }
        stack.pop();
        order.push(entry.name.clone());
        parsed.insert(entry.name.clone(), file);
        Ok(())
    }
}

/// A profile's `[agent]` section. Every run asks every profile for it: the embedded ones
/// keep it last, so only that table's text is parsed (a whole profile's TOML costs a run
/// about as much as the rest of its planning); a user's file is parsed whole.
fn agent_section(entry: &Entry) -> Option<ProfileAgent> {
    if entry.source == Source::Embedded {
        #[derive(Deserialize)]
        struct Only {
            agent: ProfileAgent,
        }
        let start = entry.text.find("\n[agent]")?;
        let table = &entry.text[start..];
        let end = table[1..].find("\n[").map_or(table.len(), |e| e + 1);
        return toml::from_str::<Only>(&table[..end]).ok().map(|o| o.agent);
    }
    parse(entry).ok().and_then(|f| f.agent)
}

pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn parse(entry: &Entry) -> Result<ProfileFile, JailError> {
    if let Some(why) = &entry.unreadable {
        return Err(JailError::bad_profile(
            &entry.name,
            Some(entry.source.to_string()),
            why,
        ));
    }
    let mut file = toml::from_str::<ProfileFile>(&entry.text).map_err(|e| {
        let (line, col) = e
            .span()
            .map(|s| line_col(&entry.text, s.start))
            .unwrap_or((0, 0));
        let message = e.message().trim().replace('\n', " ");
        let at = format!("{}:{line}:{col}", entry.source);
        JailError::bad_profile(&entry.name, Some(at), message)
    })?;
    file.parsed_limits = Limits::from_table(&file.limits)
        .map_err(|e| JailError::bad_profile(&entry.name, Some(entry.source.to_string()), e))?;
    for (name, hosts) in &file.secrets {
        let checked = crate::net::secrets::check_name(name).and_then(|()| {
            if hosts.is_empty() {
                return Err("no hosts: name the API hosts the key is for".into());
            }
            hosts
                .iter()
                .try_for_each(|h| crate::net::secrets::check_host(h))
        });
        checked.map_err(|why| {
            JailError::bad_profile(
                &entry.name,
                Some(entry.source.to_string()),
                format!("[secrets] {}: {why}", crate::text::printable(name)),
            )
        })?;
    }
    Ok(file)
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, col)
}

/// Merges one profile on top of what its parents gave.
fn merge(out: &mut Resolved, name: &str, file: &ProfileFile) {
    out.chain.push(name.to_string());
    for (access, protect, (cow, cache), list) in [
        (Access::Ro, false, (false, false), &file.paths.ro),
        (Access::Rw, false, (false, false), &file.paths.rw),
        (Access::Rw, false, (true, false), &file.paths.cow),
        (Access::Rw, false, (false, true), &file.paths.cache),
        (Access::Hide, false, (false, false), &file.paths.hide),
        (Access::Ro, true, (false, false), &file.paths.protect),
    ] {
        for template in list {
            // The same path again: the later profile's rule replaces the earlier one.
            out.paths.retain(|p| &p.template != template);
            out.paths.push(ProfilePath {
                template: template.clone(),
                access,
                profile: name.to_string(),
                protect,
                seed: None,
                cow,
                cache,
            });
        }
    }
    for (template, keys) in &file.paths.guard {
        out.guards.retain(|g| &g.template != template);
        out.guards.push(ProfileGuard {
            template: template.clone(),
            keys: keys.clone(),
            profile: name.to_string(),
        });
    }
    for (template, data) in &file.paths.state {
        out.states.retain(|g| &g.template != template);
        out.states.push(ProfileState {
            template: template.clone(),
            data: data.clone(),
            profile: name.to_string(),
        });
    }
    for (template, content) in &file.paths.seed {
        out.paths.retain(|p| &p.template != template);
        out.paths.push(ProfilePath {
            template: template.clone(),
            access: Access::Ro,
            profile: name.to_string(),
            protect: true,
            seed: Some(content.clone()),
            cow: false,
            cache: false,
        });
    }
    if let Some(clear) = file.env.clear {
        out.env.clear = clear;
    }
    extend_unique(&mut out.env.keep, &file.env.keep);
    extend_unique(&mut out.env.deny, &file.env.deny);
    for (k, v) in &file.env.set {
        out.env.set.insert(k.clone(), v.clone());
    }
    out.options = file.options.or(&out.options);
    out.limits = out.limits.merged(file.parsed_limits);
    if file.agent.is_some() {
        out.agent = file.agent.clone();
    }
    for (secret, hosts) in &file.secrets {
        out.secrets.insert(
            secret.clone(),
            SecretHosts {
                hosts: hosts.clone(),
                profile: name.to_string(),
            },
        );
    }
}

fn extend_unique(dst: &mut Vec<String>, src: &[String]) {
    for s in src {
        if !dst.contains(s) {
            dst.push(s.clone());
        }
    }
}

/// What `~` and `${…}` in a profile path or value expand to.
pub struct Expansion<'a> {
    pub home: Option<&'a Path>,
    pub cwd: &'a Path,
    pub var: &'a dyn Fn(&str) -> Option<String>,
}

impl Expansion<'_> {
    /// Expands `~`, `${VAR}`, `${VAR:-default}` and `${CWD}`. None when a variable without a
    /// default is unset or empty (the entry is dropped: `${SSH_AUTH_SOCK}` when there is none).
    pub fn expand(&self, template: &str) -> Result<Option<String>, String> {
        let mut out = String::new();
        let mut rest = template;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after
                .find('}')
                .ok_or_else(|| format!("'{template}': unclosed ${{"))?;
            let inner = &after[..end];
            let (name, default) = match inner.split_once(":-") {
                Some((n, d)) => (n, Some(d)),
                None => (inner, None),
            };
            let value = if name == "CWD" {
                Some(self.cwd.to_string_lossy().into_owned())
            } else {
                (self.var)(name).filter(|v| !v.is_empty())
            };
            match (value, default) {
                (Some(v), _) => out.push_str(&v),
                (None, Some(d)) => out.push_str(d),
                (None, None) => return Ok(None),
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        if out == "~" || out.starts_with("~/") {
            let home = self.home.ok_or_else(|| {
                format!(
                    "'{template}': no home directory for ~ (HOME is not set to an absolute \
                         path and the password database names none for this user); set HOME"
                )
            })?;
            out = format!("{}{}", home.display(), &out[1..]);
        }
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog(files: &[(&str, &str)]) -> Catalog {
        let mut cat = Catalog::default();
        for (name, text) in files {
            cat.entries.insert(
                name.to_string(),
                Entry {
                    name: name.to_string(),
                    source: Source::File(PathBuf::from(format!("/p/{name}.toml"))),
                    text: text.to_string(),
                    shadows_embedded: false,
                    unreadable: None,
                },
            );
        }
        cat
    }

    #[test]
    fn every_shipped_profile_resolves() {
        let cat = Catalog::load(None).unwrap();
        for (name, _) in EMBEDDED {
            let r = cat.resolve(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            if *name != "default" {
                assert_eq!(r.chain[0], "default", "{name} builds on default");
            }
        }
        let review = cat.resolve("review").unwrap();
        assert!(
            review.paths.iter().all(|p| p.access != Access::Rw),
            "review writes nothing"
        );
        assert_eq!(
            review.env.set["CARGO_TARGET_DIR"],
            "/tmp/jail-cache/cargo-target"
        );
        let ci = cat.resolve("ci").unwrap();
        assert!(ci.env.clear && ci.options.require == Some(Require::Full));
        assert_eq!(ci.chain, ["default", "workspace", "ci"]);
    }

    #[test]
    fn an_unlistable_profile_directory_stops_the_run_naming_it() {
        // A file where the directory should be: read_dir fails (as it does without permission).
        let file = std::env::temp_dir().join(format!("jail-not-a-dir-{}", std::process::id()));
        std::fs::write(&file, "").unwrap();
        let e = Catalog::load(Some(&file)).unwrap_err().to_string();
        let _ = std::fs::remove_file(&file);
        assert!(
            e.contains("profile directory") && e.contains("XDG_CONFIG_HOME"),
            "{e}"
        );
    }

    #[test]
    fn every_profile_builds_on_the_embedded_default_unless_it_says_base_false() {
        let embedded_hides = |r: &Resolved| r.paths.iter().any(|p| p.template == "~/.ssh");
        let mut cat = Catalog::load(None).unwrap();
        let user = |name: &str, text: &str| Entry {
            name: name.into(),
            source: Source::File(format!("/p/{name}.toml").into()),
            text: text.into(),
            shadows_embedded: name == "default",
            unreadable: None,
        };
        // One that extends the embedded default gets it once, where it says.
        assert_eq!(cat.resolve("review").unwrap().chain, ["default", "review"]);
        cat.entries
            .insert("mine".into(), user("mine", "[paths]\nrw = [\"/w\"]"));
        let r = cat.resolve("mine").unwrap();
        assert_eq!(r.chain, [EMBEDDED_DEFAULT, "mine"]);
        assert!(embedded_hides(&r) && !r.env.deny.is_empty() && r.base_left_out_by.is_none());
        // A user default.toml without extends: the base still holds for every plain run.
        cat.entries
            .insert("default".into(), user("default", "[paths]\nro = [\"/d\"]"));
        let r = cat.resolve("default").unwrap();
        assert_eq!(r.chain, [EMBEDDED_DEFAULT, "default"]);
        assert!(embedded_hides(&r));
        // Opting out is explicit, and named.
        cat.entries.insert(
            "bare".into(),
            user("bare", "base = false\n[paths]\nrw = [\"/w\"]"),
        );
        let r = cat.resolve("bare").unwrap();
        assert_eq!(r.chain, ["bare"]);
        assert!(!embedded_hides(&r));
        assert_eq!(r.base_left_out_by.as_deref(), Some("bare"));
    }

    /// Merge semantics, table-driven: (profiles, resolved name, check).
    #[test]
    fn lists_merge_scalars_override_and_the_later_rule_wins() {
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a dyn Fn(&Resolved));
        let cases: &[Case] = &[
            (
                &[
                    (
                        "a",
                        // Without the embedded base, so that only these lists merge.
                        "base = false\n[paths]\nro = [\"/x\"]\nhide = [\"/s\"]\n[env]\ndeny = [\"A*\"]\nset = { K = \"1\" }",
                    ),
                    (
                        "b",
                        "extends = [\"a\"]\n[paths]\nrw = [\"/x\"]\n[env]\ndeny = [\"B*\"]\nset = { K = \"2\", L = \"3\" }",
                    ),
                ],
                "b",
                &|r| {
                    let x: Vec<_> = r.paths.iter().filter(|p| p.template == "/x").collect();
                    assert_eq!(x.len(), 1);
                    assert_eq!((x[0].access, x[0].profile.as_str()), (Access::Rw, "b"));
                    assert!(
                        r.paths
                            .iter()
                            .any(|p| p.template == "/s" && p.profile == "a")
                    );
                    assert_eq!(r.env.deny, ["A*", "B*"]);
                    assert_eq!(r.env.set["K"], "2");
                    assert_eq!(r.env.set["L"], "3");
                },
            ),
            (
                &[
                    (
                        "a",
                        "[options]\nallow_userns = true\ntmp = \"host\"\n[env]\nclear = true",
                    ),
                    (
                        "b",
                        "extends = [\"a\"]\n[options]\ntmp = \"private\"\n[env]\nclear = false",
                    ),
                ],
                "b",
                &|r| {
                    assert_eq!(r.options.allow_userns, Some(true), "kept from the parent");
                    assert_eq!(r.options.tmp, Some(TmpOption::Private), "overridden");
                    assert!(!r.env.clear);
                },
            ),
            (
                // A diamond: the shared base is merged once, first.
                &[
                    ("base", "[paths]\nro = [\"/b\"]"),
                    ("l", "extends = [\"base\"]\n[paths]\nrw = [\"/l\"]"),
                    ("r", "extends = [\"base\"]\n[paths]\nhide = [\"/l\"]"),
                    ("top", "extends = [\"l\", \"r\"]"),
                ],
                "top",
                &|r| {
                    assert_eq!(r.chain, [EMBEDDED_DEFAULT, "base", "l", "r", "top"]);
                    let l: Vec<_> = r.paths.iter().filter(|p| p.template == "/l").collect();
                    assert_eq!(
                        (l.len(), l[0].access),
                        (1, Access::Hide),
                        "later parent wins"
                    );
                },
            ),
        ];
        for (files, name, check) in cases {
            check(&catalog(files).resolve(name).unwrap());
        }
    }

    #[test]
    fn a_user_file_may_extend_the_embedded_profile_it_shadows() {
        let mut cat = Catalog::load(None).unwrap();
        cat.entries.insert(
            "review".into(),
            Entry {
                name: "review".into(),
                source: Source::File("/p/review.toml".into()),
                text: "extends = [\"review\"]\n[paths]\nrw = [\"/srv/out\"]".into(),
                shadows_embedded: true,
                unreadable: None,
            },
        );
        let r = cat.resolve("review").unwrap();
        assert_eq!(r.chain, ["default", "review (embedded)", "review"]);
        assert!(
            r.env.set.contains_key("CARGO_TARGET_DIR"),
            "the embedded review is merged"
        );
        assert!(r.paths.iter().any(|p| p.template == "/srv/out"));
    }

    #[test]
    fn errors_name_the_file_line_and_column() {
        let err = |files: &[(&str, &str)], name: &str| {
            catalog(files).resolve(name).unwrap_err().to_string()
        };
        let e = err(
            &[("a", "extends = [\"b\"]"), ("b", "\n\nextends = [\"a\"]")],
            "a",
        );
        assert!(
            e.contains("cycle a -> b -> a") && e.contains("/p/b.toml:3:12"),
            "{e}"
        );
        let e = err(&[("a", "description = \"x\"\nextends = [\"nope\"]")], "a");
        assert!(
            e.contains("unknown profile 'nope'") && e.contains("/p/a.toml:2:12"),
            "{e}"
        );
        let e = err(&[("a", "[paths]\nro = [\"/x\"]\nwrite = [\"/y\"]")], "a");
        assert!(
            e.contains("/p/a.toml:3:1") && e.contains("unknown field"),
            "{e}"
        );
        let e = err(&[("a", "[paths\nro = 1")], "a");
        assert!(e.contains("/p/a.toml:1:"), "{e}");
        let e = err(&[("a", "[options]\ntmp = \"shared\"")], "a");
        assert!(e.contains("/p/a.toml:2:7"), "{e}");
        let e = err(&[], "missing");
        assert!(e.contains("unknown profile 'missing'"), "{e}");
    }

    #[test]
    fn expansion_of_home_variables_and_defaults() {
        let vars = |name: &str| match name {
            "XDG_CONFIG_HOME" => Some("/cfg".to_string()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        let x = Expansion {
            home: Some(Path::new("/home/u")),
            cwd: Path::new("/work/repo"),
            var: &vars,
        };
        assert_eq!(x.expand("~/.ssh").unwrap().unwrap(), "/home/u/.ssh");
        assert_eq!(
            x.expand("${XDG_CONFIG_HOME:-~/.config}/app")
                .unwrap()
                .unwrap(),
            "/cfg/app"
        );
        assert_eq!(
            x.expand("${XDG_DATA_HOME:-~/.local/share}/app")
                .unwrap()
                .unwrap(),
            "/home/u/.local/share/app"
        );
        assert_eq!(x.expand("${CWD}").unwrap().unwrap(), "/work/repo");
        assert_eq!(x.expand("${SSH_AUTH_SOCK}").unwrap(), None);
        assert_eq!(x.expand("${EMPTY}").unwrap(), None);
        assert!(x.expand("${OOPS").is_err());
    }

    #[test]
    fn the_agent_sections_text_says_what_the_whole_file_says() {
        let mut agents = 0;
        for (name, text) in EMBEDDED {
            let entry = Entry {
                name: name.to_string(),
                source: Source::Embedded,
                text: text.to_string(),
                shadows_embedded: false,
                unreadable: None,
            };
            let whole = parse(&entry).unwrap().agent;
            assert_eq!(agent_section(&entry), whole, "{name}");
            agents += usize::from(whole.is_some());
        }
        assert_eq!(agents, 5, "claude, codex, gemini, opencode, aider");
    }
}
