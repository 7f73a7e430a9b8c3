//! What the command planted in the writable trees that something on the host would run later:
//! the one owner of that question, for runs with and without a report.
//!
//! One walk: a snapshot of every writable tree before the command starts, another after it ends
//! ([`crate::changes`]), and their comparison. Every change (created, modified, mode changed) is
//! classified against the protected list ([`crate::protect::PROTECTED`]), by name at any depth,
//! and against git's own test for a repository (`HEAD` with `objects/` and `refs/`, or a
//! `commondir`), whatever the directory is called: a bare repository, a new `.git`, a submodule's
//! git directory under `.git/modules`. What matches becomes a [`Unit`], the outermost entry to
//! move aside. The walk's bounds are the snapshot's: a baseline that hits them refuses the run
//! before it starts, an after-walk that hits the entry bound fails the run (`complete` false),
//! and a directory it could not list that the command created or changed is itself a unit.
//!
//! Its parts: `rules` (the paths the classification needs, decided at the start) and `guard`
//! (guarded JSON files, their values before and after).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::byte_path::BytePath;
use crate::changes::{self, ChangeKind, Changes, Limits, Snapshot, Touched, Tree};
use crate::error::JailError;
use crate::policy::Policy;
use crate::protect::git::is_git_layout;
use crate::protect::{PROTECTED_IN_GIT_DIRS, protected_name, protected_prefix};

mod guard;
mod rules;

use guard::{Guard, guarded_values};
pub use rules::Rules;

/// At most this many units are collected; beyond, the result is incomplete (and the run fails).
const MAX_UNITS: usize = 100_000;

/// One entry to move aside, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    pub path: PathBuf,
    pub why: String,
}

/// A guarded JSON file whose guarded keys the command changed: moved aside, and the version
/// from before the run put back (`restore`; none when there was no file before).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardHit {
    pub path: PathBuf,
    pub why: String,
    pub restore: Option<Vec<u8>>,
}

/// What the command planted.
#[derive(Debug, Default)]
pub struct Planted {
    /// Sorted, none inside another.
    pub units: Vec<Unit>,
    pub guards: Vec<GuardHit>,
    /// False when the after-walk hit its entry bound or there were more units than collected:
    /// something may be planted that was not found.
    pub complete: bool,
    /// Other filesystems mounted inside a writable tree: not entered by the walk.
    pub not_entered: Vec<PathBuf>,
}

pub use crate::protect::watched_roots as roots;

/// jail's own state directories in the policy (hidden by it whatever the flags).
pub fn own_state(policy: &Policy) -> Vec<PathBuf> {
    policy
        .rules
        .iter()
        .filter(|r| r.origin == crate::policy::Origin::JailState)
        .map(|r| r.path.clone())
        .collect()
}

/// The walk's bounds, with jail's own state left out of it (by device and inode: what the walk
/// meets is compared, not a path): jail writes there during the run. Only the state that lies
/// in a walked tree: the registry names every store of the user's, and one removed during the
/// run (another run's, discarded) frees its inode number for a directory the command makes,
/// which the walk would then skip with all it holds (a planted `.envrc` 140 levels down went
/// unseen when a suite removed its fixtures beside the run).
fn walk_limits(policy: &Policy) -> Limits {
    use std::os::unix::fs::MetadataExt;
    let roots = roots(policy);
    Limits {
        skip: own_state(policy)
            .iter()
            .filter(|p| roots.iter().any(|r| p.starts_with(r)))
            .filter_map(|p| std::fs::symlink_metadata(p).ok())
            .filter(|m| m.is_dir())
            .map(|m| (m.dev(), m.ino()))
            .collect(),
        ..Limits::default()
    }
}

/// The baseline, taken before the command starts.
pub struct Watch {
    roots: Vec<PathBuf>,
    limits: Limits,
    baseline: Snapshot,
    rules: Rules,
    guards: Vec<Guard>,
    /// HOME at the start: the configs the check reads after the run are resolved with it.
    home: Option<PathBuf>,
}

/// What a [`Watch`] is besides its baseline, as a run's journal keeps it
/// ([`Watch::encode`]): every rule decided at the start, so that the jail that finishes a run
/// whose supervisor was killed runs the same check, never one a path list from elsewhere
/// shapes.
#[derive(Serialize, Deserialize)]
struct WatchRecord {
    roots: Vec<BytePath>,
    skip: Vec<(u64, u64)>,
    home: Option<BytePath>,
    exempt: Vec<BytePath>,
    exact: Vec<BytePath>,
    path_dirs: Vec<BytePath>,
    hooks_dirs: Vec<BytePath>,
    rules_home: Option<BytePath>,
    host_code: Vec<(BytePath, String)>,
    rule_roots: Vec<BytePath>,
    /// The agents' state directories with their data patterns.
    #[serde(default)]
    states: Vec<(BytePath, Vec<String>)>,
    own: Vec<BytePath>,
    /// Guarded files: path, keys, and the bytes before the run (their values are read again).
    guards: Vec<(BytePath, Vec<String>, Option<Vec<u8>>)>,
}

fn bp(list: &[PathBuf]) -> Vec<BytePath> {
    list.iter().cloned().map(BytePath).collect()
}

fn unbp(list: Vec<BytePath>) -> Vec<PathBuf> {
    list.into_iter().map(|p| p.0).collect()
}

impl Watch {
    /// Snapshots the writable trees; refuses (before anything runs) a tree too large to be
    /// checked whole after the run.
    pub fn start(policy: &Policy) -> Result<Watch, JailError> {
        let roots = roots(policy);
        let limits = walk_limits(policy);
        let baseline = changes::snapshot(&roots, &limits);
        if baseline.truncated() {
            let names: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
            return Err(JailError::bad_flag(
                "--rw",
                names.join(" "),
                format!(
                    "--rw {}: more than {} entries or {} levels deep; jail could not check it whole \
                 afterwards for files that run code on the host (hooks, configs, repositories); \
                 make a smaller directory writable",
                    names.join(" "),
                    limits.max_entries,
                    limits.max_depth
                ),
            ));
        }
        // Nothing writable to watch (--ro runs): no rules to gather.
        let rules = if roots.is_empty() {
            Rules::default()
        } else {
            Rules::of(policy, std::env::var_os("PATH").as_deref())
        };
        let guards = policy
            .guarded
            .iter()
            .filter(|(p, _)| roots.iter().any(|r| p.starts_with(r)))
            .map(|(p, keys)| Guard::start(p.clone(), keys.clone()))
            .collect();
        Ok(Watch {
            rules,
            roots,
            limits,
            baseline,
            guards,
            home: std::env::var_os("HOME").map(PathBuf::from),
        })
    }

    /// The watch as bytes for a run's journal: its rules (JSON, length first), then the
    /// baseline ([`Snapshot::encode`]).
    pub fn encode(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let r = &self.rules;
        let record = WatchRecord {
            roots: bp(&self.roots),
            skip: self.limits.skip.clone(),
            home: self.home.clone().map(BytePath),
            exempt: r.exempt.iter().cloned().map(BytePath).collect(),
            exact: bp(&r.exact),
            path_dirs: bp(&r.path_dirs),
            hooks_dirs: bp(&r.hooks_dirs),
            rules_home: r.home.clone().map(BytePath),
            host_code: r
                .host_code
                .iter()
                .map(|p| (BytePath(p.path.clone()), p.why.clone()))
                .collect(),
            rule_roots: bp(&r.roots),
            states: r
                .states
                .iter()
                .map(|st| (BytePath(st.dir.clone()), st.data.clone()))
                .collect(),
            own: bp(&r.own),
            guards: self
                .guards
                .iter()
                .map(|g| {
                    let before = g.before.as_ref().map(|(bytes, _)| bytes.clone());
                    (BytePath(g.path.clone()), g.keys.clone(), before)
                })
                .collect(),
        };
        let json = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
        out.write_all(&(json.len() as u64).to_le_bytes())?;
        out.write_all(&json)?;
        self.baseline.encode(out)
    }

    /// A watch [`Watch::encode`] wrote; None when the bytes are not one.
    pub fn decode(bytes: &[u8]) -> Option<Watch> {
        let len = usize::try_from(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)).ok()?;
        let json = bytes.get(8..8usize.checked_add(len)?)?;
        let record: WatchRecord = serde_json::from_slice(json).ok()?;
        let baseline = Snapshot::decode(&bytes[8 + len..])?;
        let guards = record
            .guards
            .into_iter()
            .map(|(path, keys, before)| {
                let before =
                    before.and_then(|bytes| guarded_values(&bytes, &keys).map(|v| (bytes, v)));
                Guard {
                    path: path.0,
                    keys,
                    before,
                }
            })
            .collect();
        Some(Watch {
            roots: unbp(record.roots),
            limits: Limits {
                skip: record.skip,
                ..Limits::default()
            },
            baseline,
            rules: Rules {
                exempt: record.exempt.into_iter().map(|p| p.0).collect(),
                exact: unbp(record.exact),
                path_dirs: unbp(record.path_dirs),
                hooks_dirs: unbp(record.hooks_dirs),
                home: record.rules_home.map(|p| p.0),
                host_code: record
                    .host_code
                    .into_iter()
                    .map(|(path, why)| crate::protect::host_code::Place { path: path.0, why })
                    .collect(),
                roots: unbp(record.rule_roots),
                states: record
                    .states
                    .into_iter()
                    .map(|(dir, data)| crate::protect::agent_state::StateDir { dir: dir.0, data })
                    .collect(),
                own: unbp(record.own),
            },
            guards,
            home: record.home.map(|p| p.0),
        })
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// After the run: the second walk, the change list (for the report) and what was planted.
    pub fn finish(&self) -> (Changes, Planted) {
        if self.roots.is_empty() {
            let changes = changes::compare(&self.baseline, &self.baseline);
            let planted = Planted {
                complete: true,
                ..Default::default()
            };
            return (changes, planted);
        }
        let after = changes::snapshot(&self.roots, &self.limits);
        let mut rules = self.rules.clone();
        let home = self.home.clone();
        let (hooks, included) = repository_configs(&[&self.baseline, &after], home.as_deref());
        rules.hooks_dirs.extend(hooks);
        rules.exact.extend(included);
        // Every repository inside the trees (a nested clone, a submodule, a linked worktree):
        // the places its git runs code from, as the copy-on-write judge reads them.
        for snap in [&self.baseline, &after] {
            for dotgit in snap.paths_named(".git").into_iter().take(10_000) {
                rules.host_code.extend(
                    crate::protect::host_code::nested_places(
                        &dotgit,
                        home.as_deref(),
                        &crate::protect::host_code::host_reader,
                    )
                    .into_iter()
                    .filter(|p| self.roots.iter().any(|r| p.path.starts_with(r))),
                );
            }
        }
        rules.normalize();
        let mut finder = Finder::new(&rules);
        let changes = changes::compare_with(&self.baseline, &after, &mut |t| finder.visit(t));
        let mut planted = finder.done();
        planted.guards = self.guards.iter().filter_map(Guard::check).collect();
        planted.complete &= !after.full();
        planted.not_entered = changes.mount_points.clone();
        (changes, planted)
    }
}

/// The directories `core.hooksPath` names in the config of every repository the snapshots hold
/// (before or after the run; at most 10,000 configs are read), and the files those configs
/// include (git reads them as config: the same commands).
fn repository_configs(snaps: &[&Snapshot], home: Option<&Path>) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut out = Vec::new();
    let mut included = Vec::new();
    let mut read = 0;
    for snap in snaps {
        for config in snap.paths_named("config") {
            if read >= 10_000 {
                continue;
            }
            let Some(code) = crate::protect::git::config_code_of(&config, home) else {
                continue;
            };
            read += 1;
            out.extend(code.hooks);
            included.extend(code.included);
        }
    }
    // Gitfiles (linked worktrees, submodules) lead to git directories that may be outside the
    // writable trees, whose hooks paths are resolved in the work trees inside them.
    for snap in snaps {
        for dotgit in snap.paths_named(".git").into_iter().take(10_000) {
            out.extend(crate::protect::git::hooks_dirs_behind(&dotgit, home));
        }
    }
    for list in [&mut out, &mut included] {
        list.sort();
        list.dedup();
    }
    (out, included)
}

/// Whether the entry at `kp` is the same before and after the run (it existed before).
fn same_before(t: &Touched<'_>, kp: &[u8]) -> bool {
    let (b, a) = (t.before.get(kp), t.after.get(kp));
    b.is_some() && b == a
}

/// Whether `path` is one tool's configuration in `home`: a dot entry of HOME, or one entry of
/// the shared containers (`.config/X`, `.cache/X`, `.local/share/X`, `.local/state/X`,
/// `.local/lib/X`) — the unit moved aside when the run changed something there.
fn home_config(home: &Path, path: &Path) -> bool {
    let Ok(rel) = path.strip_prefix(home) else {
        return false;
    };
    let c: Vec<&OsStr> = rel.iter().collect();
    let dot = |n: &OsStr| n.as_bytes().first() == Some(&b'.');
    match c.as_slice() {
        [a] => dot(a) && !matches!(a.as_bytes(), b".config" | b".cache" | b".local"),
        [a, _] => {
            matches!(a.as_bytes(), b".config" | b".cache")
                || (a.as_bytes() == b".local"
                    && !matches!(c[1].as_bytes(), b"share" | b"state" | b"lib"))
        }
        [a, b, _] => {
            a.as_bytes() == b".local" && matches!(b.as_bytes(), b"share" | b"state" | b"lib")
        }
        _ => false,
    }
}

/// What a path prefix was found to be.
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Clean,
    /// A git directory that was one before the run too: its parts are protected.
    GitDir,
    /// The `modules` directory of a git directory: each entry in it is a submodule's git
    /// directory, moved aside when the run created or changed it, complete or not.
    Modules,
    /// Moved aside whole; everything beneath belongs to it.
    Unit,
    /// Would be a unit, but holds jail's own state: each changed entry beneath it is moved
    /// aside instead (for the reason at this index of [`Finder::split_why`]), but the one on
    /// the way to the state, which is split in turn.
    Split(usize),
    /// jail's own state: not the command's, never judged.
    Own,
}

impl State {
    /// Nothing beneath is judged again.
    fn settled(self) -> bool {
        matches!(self, State::Unit | State::Own)
    }
}

/// Classifies changes in key order, remembering the verdicts of the previous key's prefixes
/// (sorted keys share them), so each directory is judged once.
struct Finder<'r> {
    rules: &'r Rules,
    units: Vec<Unit>,
    overflow: bool,
    root: PathBuf,
    /// The root's own components (patterns may span the root: `--rw repo/.cargo`).
    root_names: Vec<Vec<u8>>,
    /// (prefix length in key bytes, its state), outermost first; index 0 is the root itself.
    stack: Vec<(usize, State)>,
    prev: Vec<u8>,
    /// The reasons of the units that were split around jail's own state ([`State::Split`]).
    split_why: Vec<String>,
}

impl<'r> Finder<'r> {
    fn new(rules: &'r Rules) -> Finder<'r> {
        Finder {
            rules,
            units: Vec::new(),
            overflow: false,
            root: PathBuf::new(),
            root_names: Vec::new(),
            stack: Vec::new(),
            prev: Vec::new(),
            split_why: Vec::new(),
        }
    }

    fn visit(&mut self, t: &Touched<'_>) {
        if t.kind == ChangeKind::Deleted {
            return;
        }
        if t.after.path() != self.root {
            self.root = t.after.path().to_path_buf();
            self.root_names = self
                .root
                .components()
                .skip(1)
                .map(|c| c.as_os_str().as_bytes().to_vec())
                .collect();
            self.stack.clear();
            self.prev.clear();
        }
        let key = t.key;
        // Prefix ends: 0 (the root), then the end of each component.
        let mut ends = vec![0usize];
        ends.extend(
            key.iter()
                .enumerate()
                .filter(|(_, b)| **b == 0)
                .map(|(i, _)| i),
        );
        if !key.is_empty() {
            ends.push(key.len());
        }
        // Keep the verdicts of the prefixes this key shares with the previous one.
        let mut keep = 0;
        while keep < self.stack.len() && keep < ends.len() {
            let (len, _) = self.stack[keep];
            if len != ends[keep] || self.prev.get(..len) != key.get(..len) {
                break;
            }
            // The previous key's prefix of this length must end at a component boundary there too.
            if len < self.prev.len() && self.prev[len] != 0 {
                break;
            }
            keep += 1;
        }
        self.stack.truncate(keep);
        if self.stack.last().is_some_and(|(_, s)| s.settled()) {
            self.prev = key.to_vec();
            return;
        }
        for (i, &end) in ends.iter().enumerate().skip(self.stack.len()) {
            let parent = i.checked_sub(1).map(|j| self.stack[j].1);
            let state = self.judge(t, &key[..end], parent);
            self.stack.push((end, state));
            if state.settled() {
                break;
            }
        }
        let judged_whole = self.stack.len() == ends.len();
        let open = |s: &State| matches!(s, State::Clean | State::GitDir | State::Modules);
        if judged_whole && self.stack.last().is_some_and(|(_, s)| open(s)) && t.unlisted {
            self.unit(
                t.after.abs_path(key),
                "a directory jail cannot list (unreadable, or deeper than it walks)".into(),
            );
            if let Some(last) = self.stack.last_mut() {
                last.1 = State::Unit;
            }
        }
        self.prev = key.to_vec();
    }

    /// The state of the prefix `kp`, given its parent's: jail's own state is never judged, and
    /// a unit that would hold it is split around it.
    fn judge(&mut self, t: &Touched<'_>, kp: &[u8], parent: Option<State>) -> State {
        let abs = t.after.abs_path(kp);
        let own = &self.rules.own;
        if own.contains(&abs) {
            return State::Own;
        }
        let holds_own = own.iter().any(|o| o.starts_with(&abs));
        if let Some(State::Split(why)) = parent {
            if holds_own {
                return State::Split(why);
            }
            let why = self.split_why[why].clone();
            self.unit(abs, why);
            return State::Unit;
        }
        let state = self.judge_rules(t, kp, parent);
        if state == State::Unit && holds_own {
            // The unit just recorded (when it was recorded: past the bound it was not).
            let why = match self.units.last() {
                Some(u) if u.path == abs => self.units.pop().map(|u| u.why),
                _ => None,
            };
            let why = why.unwrap_or_else(|| "changed by the command".into());
            self.split_why.push(format!(
                "{why}; in {}, which holds jail's own state: that stays, what is beside it moves",
                abs.display()
            ));
            return State::Split(self.split_why.len() - 1);
        }
        state
    }

    /// The state of the prefix `kp` by the rules, given its parent's.
    fn judge_rules(&mut self, t: &Touched<'_>, kp: &[u8], parent: Option<State>) -> State {
        let abs = t.after.abs_path(kp);
        let exempt = self.rules.exempt.contains(&abs);
        let last: &[u8] = kp.rsplit(|b| *b == 0).next().unwrap_or_default();
        if parent == Some(State::GitDir) && !exempt {
            if let Some(part) = PROTECTED_IN_GIT_DIRS
                .iter()
                .find(|p| p.pattern.as_bytes() == last)
            {
                self.unit(abs, format!("{}: {}", part.pattern, part.why));
                return State::Unit;
            }
        }
        if let Some(state) = self.listed_unit(&abs, exempt) {
            return state;
        }
        let mut names: Vec<&[u8]> = self.root_names.iter().map(Vec::as_slice).collect();
        if !kp.is_empty() {
            names.extend(kp.split(|b| *b == 0));
        }
        if let Some(why) = self.link_why(t, kp, &abs, &names, exempt) {
            self.unit(abs, why);
            return State::Unit;
        }
        if let Some(p) = protected_name(&names) {
            let kept_repository = p.pattern == ".git"
                && t.after
                    .get(kp)
                    .is_some_and(|n| n.file_type == libc::S_IFDIR)
                && same_before(t, kp);
            if !kept_repository && !exempt {
                self.unit(abs, format!("{}: {}", p.pattern, p.why));
                return State::Unit;
            }
        }
        self.layout_state(t, kp, abs, parent, exempt)
    }

    /// The unit the rules' own lists make of `abs` (the profile's paths, an agent's state, a
    /// dot entry of HOME, the host's git's places, hooks directories, PATH), if any.
    fn listed_unit(&mut self, abs: &Path, exempt: bool) -> Option<State> {
        if let Some(x) = self.rules.exact.iter().find(|x| **x == abs && !exempt) {
            let why = "a protected path of the profile (the agent's settings or code)";
            self.unit(x.clone(), why.into());
            return Some(State::Unit);
        }
        if let Some(s) = (!exempt)
            .then(|| crate::protect::agent_state::code_in(&self.rules.states, abs))
            .flatten()
        {
            let why = crate::protect::agent_state::why_code(&s.dir);
            self.unit(abs.to_path_buf(), why);
            return Some(State::Unit);
        }
        if !exempt
            && self
                .rules
                .home
                .as_deref()
                .is_some_and(|h| home_config(h, abs))
        {
            let why = "a dot entry of your home directory: tools read their configuration, and \
                       often code, there";
            self.unit(abs.to_path_buf(), why.into());
            return Some(State::Unit);
        }
        if let Some(p) = self
            .rules
            .host_code
            .iter()
            .find(|p| p.path == abs && !exempt)
        {
            self.unit(abs.to_path_buf(), p.why.clone());
            return Some(State::Unit);
        }
        if !exempt && self.rules.hooks_dirs.iter().any(|h| h == abs) {
            let why = "the directory core.hooksPath names: git runs the hooks there";
            self.unit(abs.to_path_buf(), why.into());
            return Some(State::Unit);
        }
        if let Some(d) = abs
            .parent()
            .filter(|d| self.rules.path_dirs.iter().any(|p| p == d))
        {
            let why = format!(
                "in {}, a directory on your PATH: it would shadow a command",
                d.display()
            );
            self.unit(abs.to_path_buf(), why);
            return Some(State::Unit);
        }
        None
    }

    /// Why a symlink the run created or retargeted at `kp` is a unit, if it is one.
    fn link_why(
        &self,
        t: &Touched<'_>,
        kp: &[u8],
        abs: &Path,
        names: &[&[u8]],
        exempt: bool,
    ) -> Option<String> {
        // A symlink the run created or retargeted on the way to a protected path: the path git,
        // the shell or the agent will follow is not the one the rules spell.
        let is_link = t
            .after
            .get(kp)
            .is_some_and(|n| n.file_type == libc::S_IFLNK);
        if is_link && !exempt && !same_before(t, kp) {
            let leads = self
                .rules
                .exact
                .iter()
                .chain(&self.rules.hooks_dirs)
                .chain(&self.rules.path_dirs)
                .any(|r| r.starts_with(abs));
            if leads {
                return Some(
                    "a symlink on the way to a protected path (hooks, PATH, the agent's settings)"
                        .into(),
                );
            }
            // Where it leads, read on the host: a git directory, something moved aside, or a
            // directory holding either is what a host tool told to use the link's path runs.
            if let Some(why) = crate::protect::git::link_leads_to_code(abs) {
                return Some(why.into());
            }
            let outside = std::fs::canonicalize(abs).is_ok_and(|target| {
                target.is_dir() && !self.rules.roots.iter().any(|r| target.starts_with(r))
            });
            if outside {
                let why = "a symlink to a directory outside the writable trees: what it leads to \
                           was not checked";
                return Some(why.into());
            }
            if let Some(p) = protected_prefix(names) {
                return Some(format!(
                    "a symlink where {} begins: it leads to a protected name elsewhere",
                    p.pattern
                ));
            }
        }
        None
    }

    /// The state of `kp` by git's layout: a git directory kept, a submodule's under `modules`,
    /// or a repository the run made.
    fn layout_state(
        &mut self,
        t: &Touched<'_>,
        kp: &[u8],
        abs: PathBuf,
        parent: Option<State>,
        exempt: bool,
    ) -> State {
        let last: &[u8] = kp.rsplit(|b| *b == 0).next().unwrap_or_default();
        let layout = |tree: Tree<'_>| {
            is_git_layout(|n| {
                let mut k = kp.to_vec();
                if !k.is_empty() {
                    k.push(0);
                }
                k.extend_from_slice(n.as_bytes());
                tree.get(&k).is_some()
            })
        };
        // What git keeps under a git directory's `modules` is a submodule's repository to be:
        // one that is not complete yet (`hooks`, `config`, no objects) is taken as it stands
        // by a later `git submodule add` or `update`, and is a repository once completed.
        if parent == Some(State::Modules) && !exempt {
            if same_before(t, kp) && layout(t.before) {
                if layout(t.after) {
                    return State::GitDir;
                }
            } else if same_before(t, kp)
                && t.after
                    .get(kp)
                    .is_some_and(|n| n.file_type == libc::S_IFDIR)
            {
                // A directory that was there before and is no repository: the part of a
                // submodule name with a slash (`lib` of `lib/foo`); its entries are judged
                // the same way.
                return State::Modules;
            }
            self.unit(
                abs,
                "a submodule's git directory under modules/ of a git directory, complete or \
                 not, that the run created or changed (git uses it, with its config and hooks, \
                 for the submodule)"
                    .into(),
            );
            return State::Unit;
        }
        if layout(t.after) {
            if same_before(t, kp) && layout(t.before) {
                return State::GitDir;
            }
            self.unit(
                abs,
                "a git repository that did not exist before the run (its config and hooks \
                 run on the host's next git command there)"
                    .into(),
            );
            return State::Unit;
        }
        if parent == Some(State::GitDir) && last == b"modules" && !exempt {
            return State::Modules;
        }
        State::Clean
    }

    fn unit(&mut self, path: PathBuf, why: String) {
        if self.units.len() >= MAX_UNITS {
            self.overflow = true;
            return;
        }
        self.units.push(Unit { path, why });
    }

    fn done(self) -> Planted {
        let mut units = self.units;
        units.sort_by(|a, b| a.path.cmp(&b.path));
        units.dedup_by(|a, b| a.path == b.path);
        // Nested writable roots see the same entries twice: keep the outermost unit.
        let mut out: Vec<Unit> = Vec::with_capacity(units.len());
        for u in units {
            if out.last().is_some_and(|o| u.path.starts_with(&o.path)) {
                continue;
            }
            out.push(u);
        }
        Planted {
            units: out,
            guards: Vec::new(),
            complete: !self.overflow,
            not_entered: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    struct T(PathBuf);
    impl T {
        fn new(name: &str) -> T {
            let d =
                std::env::temp_dir().join(format!("jail-planted-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&d);
            fs::create_dir_all(&d).unwrap();
            T(d)
        }
        fn p(&self, rel: &str) -> PathBuf {
            self.0.join(rel)
        }
        fn w(&self, rel: &str, text: &str) {
            let p = self.p(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        fn repo(&self, rel: &str) {
            for d in ["objects", "refs/heads"] {
                fs::create_dir_all(self.p(&format!("{rel}/{d}"))).unwrap();
            }
            self.w(&format!("{rel}/HEAD"), "ref: refs/heads/main\n");
            self.w(&format!("{rel}/config"), "[core]\n");
        }
    }
    impl Drop for T {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// The units found when `change` runs between two snapshots of the tree.
    fn planted(t: &T, rules: Rules, change: impl FnOnce()) -> Vec<String> {
        let roots = vec![t.0.clone()];
        let before = changes::snapshot(&roots, &Limits::default());
        change();
        let after = changes::snapshot(&roots, &Limits::default());
        let mut f = Finder::new(&rules);
        changes::compare_with(&before, &after, &mut |x| f.visit(x));
        let p = f.done();
        assert!(p.complete);
        p.units
            .iter()
            .map(|u| {
                u.path
                    .strip_prefix(&t.0)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
    }

    fn rules(t: &T) -> Rules {
        Rules {
            exempt: [t.0.clone()].into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_walk_skips_only_jails_state_inside_the_walked_trees() {
        use crate::policy::{Access, Kind, Origin, PathRule, Policy};
        let t = T::new("own-skip");
        std::fs::create_dir_all(t.p("work/state/jail")).unwrap();
        std::fs::create_dir_all(t.p("elsewhere/state/jail")).unwrap();
        let rule = |p: PathBuf, access, origin| PathRule {
            path: p,
            access,
            kind: Kind::Dir,
            origin,
        };
        let mut policy = Policy::probe_default();
        policy.rules.extend([
            rule(t.p("work"), Access::Rw, Origin::Default),
            rule(t.p("work/state/jail"), Access::Hide, Origin::JailState),
            rule(t.p("elsewhere/state/jail"), Access::Hide, Origin::JailState),
        ]);
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(t.p("work/state/jail")).unwrap();
        assert_eq!(walk_limits(&policy).skip, [(m.dev(), m.ino())]);
    }

    #[test]
    fn protected_names_at_any_depth_are_units_and_plain_files_are_not() {
        let t = T::new("names");
        t.repo(".git");
        let got = planted(&t, rules(&t), || {
            t.w("app/.envrc", "x");
            t.w("app/.claude/settings.json", "{}");
            t.w("a/b/c/d/e/f/.husky/pre-commit", "x");
            t.w("app/.cargo/config.toml", "x");
            t.w("app/src/main.rs", "x");
            t.w("app/.cargo/registry/x", "x");
            t.w("ws/x.code-workspace", "{}");
            t.w(".git/objects/ab/cdef", "blob");
            t.w(".git/index", "idx");
        });
        assert_eq!(
            got,
            [
                "a/b/c/d/e/f/.husky",
                "app/.cargo/config.toml",
                "app/.claude",
                "app/.envrc",
                "ws/x.code-workspace"
            ]
        );
    }

    #[test]
    fn repositories_are_found_by_layout_whatever_their_name() {
        let t = T::new("layout");
        t.repo(".git");
        fs::create_dir_all(t.p("half/objects")).unwrap();
        fs::create_dir_all(t.p("half/refs")).unwrap();
        let got = planted(&t, rules(&t), || {
            t.repo("vendor/lib.git");
            t.repo("deep/x/y/z/plain-name");
            t.repo(".git/modules/lib/foo");
            t.w(".git/hooks/pre-commit", "x");
            t.w(".git/commondir", "../x");
            t.w("half/HEAD", "ref: refs/heads/main\n");
            t.w("sub/.git", "gitdir: /elsewhere\n");
        });
        assert_eq!(
            got,
            [
                ".git/commondir",
                ".git/hooks",
                ".git/modules/lib",
                "deep/x/y/z/plain-name",
                "half",
                "sub/.git",
                "vendor/lib.git"
            ]
        );
    }

    #[test]
    fn what_the_run_puts_under_a_git_directorys_modules_is_a_unit_complete_or_not() {
        let t = T::new("modules");
        t.repo(".git");
        t.repo(".git/modules/kept");
        t.repo("bare.git");
        fs::create_dir_all(t.p(".git/modules/half-before")).unwrap();
        t.repo(".git/modules/lib/bar");
        let got = planted(&t, rules(&t), || {
            t.w(".git/modules/lib/foo/config", "[core]\n");
            t.w(".git/modules/lib/bar/objects/ab/cd", "blob");
            t.w(".git/modules/half/hooks/post-checkout", "x");
            t.w(".git/modules/half/config", "[core]\n");
            t.w(".git/modules/kept/objects/ab/cd", "blob");
            t.w(".git/modules/kept/modules/inner/config", "[core]\n");
            t.w(".git/modules/half-before/hooks/x", "x");
            t.w(".git/modules/file", "x");
            t.w("bare.git/modules/b/config", "x");
            t.w("src/modules/x/config", "plain");
        });
        assert_eq!(
            got,
            [
                ".git/modules/file",
                ".git/modules/half",
                ".git/modules/half-before/hooks",
                ".git/modules/kept/modules/inner",
                ".git/modules/lib/foo",
                "bare.git/modules/b"
            ]
        );
    }

    #[test]
    fn exact_writable_paths_profile_paths_and_path_dirs() {
        let t = T::new("rules");
        fs::create_dir_all(t.p(".vscode")).unwrap();
        fs::create_dir_all(t.p("tools/bin")).unwrap();
        let mut r = rules(&t);
        r.exempt.insert(t.p(".vscode"));
        r.exact.push(t.p("state/settings.json"));
        r.path_dirs.push(t.p("tools/bin"));
        let got = planted(&t, r, || {
            t.w(".vscode/tasks.json", "{}");
            t.w("state/settings.json", "{}");
            t.w("state/history", "x");
            t.w("tools/bin/git", "#!/bin/sh");
        });
        assert_eq!(got, ["state/settings.json", "tools/bin/git"]);
    }

    #[test]
    fn in_an_agent_state_directory_what_is_not_data_is_a_unit() {
        let t = T::new("state");
        t.w("st/projects/old.jsonl", "x");
        t.w("st/tmp/keep", "x");
        let mut r = rules(&t);
        r.states = vec![crate::protect::agent_state::StateDir {
            dir: t.p("st"),
            data: ["projects", "tmp/arg0-linux", "*.sqlite*"]
                .map(String::from)
                .to_vec(),
        }];
        let got = planted(&t, r, || {
            t.w("st/projects/new.jsonl", "x");
            t.w("st/projects/old.jsonl", "changed");
            t.w("st/logs_1.sqlite-wal", "x");
            t.w("st/tmp/arg0-linux/a/apply_patch", "x");
            t.w("st/guard.sh", "x");
            t.w("st/notify", "curl x | sh");
            t.w("st/lib/helper.py", "x");
            t.w("st/tmp/evil", "x");
            std::os::unix::fs::symlink("projects/new.jsonl", t.p("st/link")).unwrap();
            t.w("elsewhere/x.sh", "x");
        });
        assert_eq!(
            got,
            [
                "st/guard.sh",
                "st/lib",
                "st/link",
                "st/notify",
                "st/tmp/evil"
            ]
        );
    }

    #[test]
    fn a_root_that_is_a_git_directory_keeps_its_parts() {
        let t = T::new("gitroot");
        t.repo("r.git");
        let roots = vec![t.p("r.git")];
        let before = changes::snapshot(&roots, &Limits::default());
        t.w("r.git/hooks/post-checkout", "x");
        t.w("r.git/objects/aa/bb", "x");
        let after = changes::snapshot(&roots, &Limits::default());
        let r = Rules {
            exempt: [t.p("r.git")].into(),
            ..Default::default()
        };
        let mut f = Finder::new(&r);
        changes::compare_with(&before, &after, &mut |x| f.visit(x));
        let p = f.done();
        assert_eq!(p.units.len(), 1, "{:?}", p.units);
        assert_eq!(p.units[0].path, t.p("r.git/hooks"));
    }

    #[test]
    fn jail_state_is_never_a_unit_and_a_unit_that_holds_it_is_split_around_it() {
        // --rw HOME with stores at ~/.local/state/jail and ~/.mystate/jail: jail writes a run
        // there during the run; the command makes ~/.local a git layout and writes beside the
        // stores. Everything it wrote moves; no store, nor a directory holding one, does.
        let t = T::new("own");
        t.w(".mystate/jail/runs/.keep", "");
        t.w(".local/state/jail/locks/.keep", "");
        let mut r = rules(&t);
        r.home = Some(t.0.clone());
        r.own = vec![t.p(".local/state/jail"), t.p(".mystate/jail")];
        let got = planted(&t, r, || {
            t.w(".mystate/jail/runs/0a1b2c3d/run.json", "{}");
            t.w(".local/state/jail/locks/0123456789abcdef", "");
            t.w(".mystate/evil", "x");
            t.repo(".local");
            t.w(".local/state/other/x", "x");
            t.w(".vim/plugin/x.vim", "x");
        });
        assert_eq!(
            got,
            [
                ".local/HEAD",
                ".local/config",
                ".local/objects",
                ".local/refs",
                ".local/state/other",
                ".mystate/evil",
                ".vim"
            ]
        );
    }

    #[test]
    fn the_walk_leaves_jail_state_out_by_its_inode() {
        use std::os::unix::fs::MetadataExt;
        let t = T::new("skip");
        t.w("state/jail/runs/.keep", "");
        let m = fs::metadata(t.p("state/jail")).unwrap();
        let limits = Limits {
            skip: vec![(m.dev(), m.ino())],
            ..Limits::default()
        };
        let roots = vec![t.0.clone()];
        let before = changes::snapshot(&roots, &limits);
        t.w("state/jail/runs/0a1b2c3d/0/upper/f", "x");
        t.w("state/other", "x");
        let after = changes::snapshot(&roots, &limits);
        let paths: Vec<PathBuf> = changes::compare(&before, &after)
            .changes
            .into_iter()
            .map(|c| c.path)
            .collect();
        assert_eq!(paths, [t.p("state/other")]);
    }

    #[test]
    fn a_journalled_watch_finds_what_the_live_one_would() {
        // The jail that finishes a killed run decodes the watch and runs the same check.
        let t = T::new("journalled");
        t.repo(".git");
        t.w("state/settings.json", "{}");
        t.w("cfg.json", r#"{"mcpServers":{}}"#);
        let roots = vec![t.0.clone()];
        let mut rules = rules(&t);
        rules.exact.push(t.p("state/settings.json"));
        rules.host_code.push(crate::protect::host_code::Place {
            path: t.p("run-me"),
            why: "runs".into(),
        });
        let watch = Watch {
            baseline: changes::snapshot(&roots, &Limits::default()),
            roots,
            limits: Limits::default(),
            rules,
            guards: vec![Guard::start(t.p("cfg.json"), vec!["mcpServers".into()])],
            home: None,
        };
        let mut bytes = Vec::new();
        watch.encode(&mut bytes).unwrap();
        let back = Watch::decode(&bytes).unwrap();
        assert!(Watch::decode(&bytes[..bytes.len() - 1]).is_none());
        t.w("app/.envrc", "x");
        t.w("state/settings.json", r#"{"hooks":1}"#);
        t.w("run-me", "x");
        t.w(".git/hooks/pre-commit", "x");
        t.w("cfg.json", r#"{"mcpServers":{"x":{"command":"sh"}}}"#);
        let names = |w: &Watch| {
            let (_, p) = w.finish();
            let mut v: Vec<PathBuf> = p.units.into_iter().map(|u| u.path).collect();
            v.extend(p.guards.into_iter().map(|g| g.path));
            v
        };
        let want = [
            ".git/hooks",
            "app/.envrc",
            "run-me",
            "state/settings.json",
            "cfg.json",
        ]
        .map(|r| t.p(r));
        assert_eq!(names(&back), want);
        assert_eq!(names(&watch), want);
    }

    #[test]
    fn home_configuration_is_one_unit_per_tool() {
        let h = Path::new("/h");
        for yes in [
            "/h/.bashrc",
            "/h/.vim",
            "/h/.config/tmux",
            "/h/.cache/pip",
            "/h/.local/share/nvim",
            "/h/.local/lib/python3.11",
            "/h/.local/bin",
        ] {
            assert!(home_config(h, Path::new(yes)), "{yes}");
        }
        for no in [
            "/h/projects",
            "/h/.config",
            "/h/.local",
            "/h/.local/share",
            "/h/.vim/plugin",
            "/h/.config/tmux/x",
            "/elsewhere/.bashrc",
        ] {
            assert!(!home_config(h, Path::new(no)), "{no}");
        }
    }

    #[test]
    fn guarded_values_ignore_empty_defaults_and_see_real_entries() {
        let keys = vec![
            "mcpServers".to_string(),
            "projects.*.mcpServers".to_string(),
        ];
        let v = |t: &str| guarded_values(t.as_bytes(), &keys).unwrap();
        assert_eq!(
            v("{}"),
            v(r#"{"projects":{"/w":{"mcpServers":{}}},"mcpServers":{}}"#)
        );
        assert_ne!(
            v("{}"),
            v(r#"{"projects":{"/w":{"mcpServers":{"x":{"command":"sh"}}}}}"#)
        );
        assert!(guarded_values(b"not json", &keys).is_none());
    }

    #[test]
    fn what_a_directory_made_unreadable_hides_is_found_and_its_mode_put_back() {
        use std::os::unix::fs::PermissionsExt;
        let t = T::new("unlisted");
        let got = planted(&t, rules(&t), || {
            t.w("hidden/inner/.envrc", "x");
            fs::set_permissions(t.p("hidden"), fs::Permissions::from_mode(0o000)).unwrap();
        });
        let mode = fs::metadata(t.p("hidden")).unwrap().permissions().mode() & 0o777;
        fs::set_permissions(t.p("hidden"), fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(got, ["hidden/inner/.envrc"]);
        assert_eq!(mode, 0, "the walk puts the mode back");
    }
}
