//! Why a person must look at a change before it reaches the host: the flags of a copy-on-write
//! hand-back, decided from how the host will use the tree after the apply, not from the
//! layer's names alone.
//!
//! A change is flagged when:
//! - its path is, or is inside, a protected name ([`crate::protect::PROTECTED`]) at any depth, a
//!   `.git` directory, or a git repository (git's own test of a layout);
//! - it is at or beneath a place the host's git runs code from ([`crate::protect::host_code`]:
//!   `core.hooksPath`, included config files, paths config values name, where symlinked hooks
//!   lead), read both from the host and from the tree as the apply would leave it;
//! - it is where a protected name that is a symlink leads (`.vscode -> config/vscode`, in the
//!   host's tree or the layer's), or a symlink on the way to such a place;
//! - it is a symlink that leads out of the root as the kernel will resolve it after the apply
//!   (chains and `..` through other links included), or after an apply of it alone;
//! - it makes a file executable;
//! - it deletes what git cannot bring back: a file not in the start commit (untracked, ignored,
//!   a nested repository's git directory), one changed since, or anything in a root that is no
//!   git work tree.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::changes::{Item, SideKind, executable};
use super::layer::{Entry, MAX_ENTRIES, Node};
use super::view::{Kind, Resolved, View};
use crate::protect::git::is_git_layout;
use crate::protect::host_code::{self, Place};
use crate::protect::{protected_at_or_above, protected_name, protected_prefix};

/// What the start commit holds, by path relative to the root: (git mode, object id).
type Tracked = HashMap<PathBuf, (String, String)>;

/// The one judge of a root's change set.
pub struct Judge<'a> {
    root: &'a Path,
    layer_root: &'a Path,
    view: View<'a>,
    /// Places the host runs code from, absolute (host paths).
    places: Vec<Place>,
    /// Layer symlinks on the way to a place: (relative path, the place's reason).
    links_to_places: Vec<(PathBuf, String)>,
    /// Every symlink the layer adds or changes.
    layer_links: std::collections::BTreeSet<PathBuf>,
    /// The layer's paths (what the start commit is asked about: a directory's whole subtree).
    paths: Vec<PathBuf>,
    /// The layer's paths git ignores (with every path beneath an ignored directory).
    ignored: std::collections::BTreeSet<PathBuf>,
    /// The start commit's files, read when a deletion first asks.
    tracked: std::cell::OnceCell<Result<Tracked, String>>,
    start: Option<String>,
    /// Why the host tree could not be checked whole (every change is then flagged).
    incomplete: Option<String>,
}

/// Where the protected names that are symlinks (`links`, relative to `root`) lead inside the
/// root, as places: what the tool reads is the link's target.
fn where_protected_links_lead(root: &Path, view: &View<'_>, links: Vec<PathBuf>) -> Vec<Place> {
    let mut places = Vec::new();
    for rel in links {
        let names: Vec<&[u8]> = rel.iter().map(|c| c.as_bytes()).collect();
        let Some(p) = protected_name(&names).or_else(|| protected_prefix(&names)) else {
            continue;
        };
        if let Resolved::Inside { path, .. } = view.resolve(&rel, true) {
            if path != rel {
                places.push(Place {
                    path: root.join(&path),
                    why: format!(
                        "where the protected name {} leads ({})",
                        rel.display(),
                        p.why
                    ),
                });
            }
        }
    }
    places
}

/// The layer's symlinks on the way to each place (with the place's reason), and the places as
/// the kernel reaches them through those links.
fn through_layer_links(
    root: &Path,
    view: &View<'_>,
    entries: &[Entry],
    places: &[Place],
) -> (Vec<(PathBuf, String)>, Vec<Place>) {
    let mut links_to_places = Vec::new();
    let mut resolved = Vec::new();
    for place in places {
        let Ok(rel) = place.path.strip_prefix(root) else {
            continue;
        };
        if let Resolved::Inside { path, links, .. } = view.resolve(rel, true) {
            for l in links {
                if entries.iter().any(|e| e.path == l) {
                    links_to_places.push((l, place.why.clone()));
                }
            }
            if path != rel {
                resolved.push(Place {
                    path: root.join(path),
                    why: place.why.clone(),
                });
            }
        }
    }
    (links_to_places, resolved)
}

impl<'a> Judge<'a> {
    /// The judge of `entries` (the layer at `layer_root`) over the host `root`; `start` is the
    /// commit checked out when the run started, when the root was a repository's top.
    pub fn new(
        root: &'a Path,
        layer_root: &'a Path,
        entries: &[Entry],
        start: Option<&str>,
    ) -> Judge<'a> {
        let view = View::merged(root, entries);
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute());
        // The host's files as they are, and as the apply would leave those in the work tree.
        let merged_read = |p: &Path| -> Option<String> {
            let rel = p.strip_prefix(root).ok()?;
            match view.kind(rel) {
                Kind::File => match entries.iter().find(|e| e.path == rel) {
                    Some(_) => host_code::host_reader(&layer_root.join(rel)),
                    None => host_code::host_reader(p),
                },
                _ => None,
            }
        };
        let readers: [host_code::Reader<'_>; 2] = [&host_code::host_reader, &merged_read];
        let scan = scan_host(root);
        let mut places = Vec::new();
        for read in readers {
            // The root's repository and every one that holds it; every repository inside it
            // (a nested clone, a submodule, a linked worktree).
            places.extend(host_code::places(root, home.as_deref(), read));
            for dotgit in &scan.dotgits {
                places.extend(host_code::nested_places(
                    &root.join(dotgit),
                    home.as_deref(),
                    read,
                ));
            }
        }
        // What a protected file names runs when the tool runs it (a husky hook's `sh
        // scripts/lint.sh`, .npmrc's `node-options=--require ./x.cjs`, .yarnrc.yml's
        // yarnPath, a pre-commit `entry:`, a VS Code task's command), and what that names.
        let mut protected_files: Vec<PathBuf> = scan.protected.clone();
        protected_files.extend(
            entries
                .iter()
                .filter(|e| {
                    matches!(e.node, Node::File { .. })
                        && protected_at_or_above(&e.path).is_some()
                        && !prose(&e.path)
                })
                .map(|e| e.path.clone()),
        );
        places.extend(named_by(
            root,
            &protected_files,
            &view,
            &merged_read,
            home.as_deref(),
        ));
        // Protected names that are symlinks, on the host or in the layer: where they lead is
        // what the tool reads.
        let mut links = scan.links.clone();
        links.extend(entries.iter().filter_map(|e| match &e.node {
            Node::Symlink { .. } => Some(e.path.clone()),
            _ => None,
        }));
        places.extend(where_protected_links_lead(root, &view, links));
        // Places inside the root as the kernel will reach them after the apply: through the
        // layer's symlinks, which are then on the way.
        let (links_to_places, resolved) = through_layer_links(root, &view, entries, &places);
        places.extend(resolved);
        let layer_links = entries
            .iter()
            .filter(|e| matches!(e.node, Node::Symlink { .. }))
            .map(|e| e.path.clone())
            .collect();
        let ignored = ignored(root, entries);
        // The topmost entries only: a directory's pathspec takes what is beneath it.
        let mut paths: Vec<PathBuf> = Vec::new();
        for e in entries {
            if !paths.last().is_some_and(|p| e.path.starts_with(p)) {
                paths.push(e.path.clone());
            }
        }
        Judge {
            paths,
            root,
            layer_root,
            view,
            places,
            links_to_places,
            layer_links,
            ignored,
            tracked: std::cell::OnceCell::new(),
            start: start.map(str::to_string),
            incomplete: scan.incomplete,
        }
    }

    /// The flags of one change.
    pub fn flags(&self, it: &Item) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(why) = &self.incomplete {
            out.push(why.clone());
        }
        let names: Vec<&[u8]> = it.path.iter().map(|c| c.as_bytes()).collect();
        let host_use = |out: &mut Vec<String>, verb: &str| {
            if let Some(p) = protected_at_or_above(&it.path) {
                out.push(format!("{verb}protected name {} ({})", p.pattern, p.why));
            }
            if let Some(p) = host_code::place_of(&self.places, &self.root.join(&it.path)) {
                out.push(format!("{verb}{}", p.why));
            }
        };
        let Some(new) = &it.new else {
            // A deletion loses what git cannot bring back, or takes away what the host runs
            // (a secret-scanning hook, an .npmrc's ignore-scripts).
            out.extend(self.lost(it));
            host_use(&mut out, "deletes: ");
            out.dedup();
            return out;
        };
        // The host's side, when the old side is the host's (a commit's old side is the
        // commit's parent: the host's file there is judged by `overwrites`).
        let host_old = it.old.as_ref().filter(|o| o.abs.starts_with(self.root));
        // A file replaced by a link (or back): the patch shows the host's side deleted.
        if host_old.is_some_and(|o| o.kind.is_file() != new.kind.is_file()) {
            out.extend(self.lost(it));
        }
        host_use(&mut out, "");
        // What git ignores, git status never shows, and ignored trees are where code that
        // runs is kept (node_modules, a virtualenv's site-packages).
        if it.path.ancestors().any(|a| self.ignored.contains(a)) {
            out.push(
                "ignored by git: git status will not show it, and ignored trees hold code that \
                 runs (node_modules, .venv)"
                    .into(),
            );
        }
        // Writing over what git cannot bring back, where the diff cannot show what is lost (a
        // binary file) or the file is in no commit at all.
        if let (Some(old), SideKind::File) = (host_old, &new.kind) {
            if old.kind.is_file() && (self.untracked(&it.path) || binary(&old.abs)) {
                if let Some(why) = self.lost(it) {
                    out.push(format!(
                        "writes over {}",
                        why.trim_start_matches("a deletion git cannot bring back: ")
                    ));
                }
            }
        }
        if names[..names.len() - 1].contains(&&b".git"[..]) {
            out.push("inside a .git directory".into());
        }
        // A git repository on the way (new or changed, in the layer, the host or a commit):
        // git run anywhere beneath it takes its config and hooks.
        let mut dir = it.path.parent();
        while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
            let has = |n: &str| {
                self.view.kind(&d.join(n)) != Kind::Missing
                    || fs::symlink_metadata(self.layer_root.join(d).join(n)).is_ok()
            };
            if is_git_layout(has) {
                out.push(format!("inside the git repository {}", d.display()));
                break;
            }
            dir = d.parent();
        }
        if let Some((_, why)) = self.links_to_places.iter().find(|(l, _)| *l == it.path) {
            out.push(format!(
                "a symlink on the way to a place git runs code from: {why}"
            ));
        }
        match &new.kind {
            SideKind::File => {
                let was_exec = it
                    .old
                    .as_ref()
                    .filter(|o| o.kind == SideKind::File)
                    .is_some_and(|o| executable(o.mode));
                if executable(new.mode) && !was_exec {
                    out.push("executable".into());
                }
                if let Some(why) = hidden_code(&new.abs, &it.path, executable(new.mode)) {
                    out.push(why);
                }
            }
            SideKind::Symlink(target) => {
                if let Some(why) = self.link_leaves(&it.path, target) {
                    out.push(format!("symlink to {}: {why}", target.display()));
                }
            }
        }
        out.dedup();
        out
    }

    /// Why a symlink at `path` may lead out of the root, if it may: as the kernel resolves it
    /// with the whole layer applied and with it alone applied; or, either way, through another
    /// link of the layer (which may not be applied with it, or may be applied later) or past a
    /// name that does not exist yet (what is made there decides). Such a link is judged by what
    /// an apply of any part of the layer could make of it, not by one tree.
    fn link_leaves(&self, path: &Path, target: &Path) -> Option<String> {
        let alone = View::host_with(
            self.root,
            [(
                path.to_path_buf(),
                Node::Symlink {
                    target: target.to_path_buf(),
                },
            )],
        );
        for view in [&self.view, &alone] {
            match view.resolve(path, true) {
                Resolved::Outside(why) => return Some(format!("leads outside the root ({why})")),
                Resolved::Inside {
                    path: to,
                    links,
                    guessed,
                } => {
                    // A name that leads into a protected place: a host write through it (a
                    // tool that updates CHANGELOG.md, a server that publishes public/x) reaches
                    // what the host runs or keeps secret.
                    let lands = self.root.join(&to);
                    if protected_at_or_above(&to).is_some()
                        || to.iter().any(|c| c == ".git")
                        || host_code::place_of(&self.places, &lands).is_some()
                    {
                        return Some(format!(
                            "leads to {}, a protected place: a write or a read through it reaches that",
                            to.display()
                        ));
                    }
                    if let Some(other) = links
                        .iter()
                        .find(|l| *l != path && self.layer_links.contains(*l))
                    {
                        return Some(format!(
                            "leads through {}, another symlink of the run: where it goes depends on what is applied",
                            other.display()
                        ));
                    }
                    if guessed {
                        return Some(
                            "climbs back out of a name that does not exist yet: what is made there decides where it leads"
                                .into(),
                        );
                    }
                }
            }
        }
        None
    }

    /// Why writing the run's version of `rel` over what the host has there loses what git
    /// cannot bring back (a commit's file that a merge or checkout would write over an
    /// ignored or untracked one), if it does.
    pub fn overwrites(&self, rel: &Path) -> Option<String> {
        let abs = self.root.join(rel);
        let meta = fs::symlink_metadata(&abs).ok()?;
        let kind = if meta.file_type().is_symlink() {
            SideKind::Symlink(fs::read_link(&abs).ok()?)
        } else if meta.is_file() {
            SideKind::File
        } else {
            return None;
        };
        let host = Item {
            path: rel.to_path_buf(),
            old: Some(super::changes::Side {
                kind,
                abs,
                mode: std::os::unix::fs::MetadataExt::mode(&meta),
            }),
            new: None,
            conflict: None,
            flags: Vec::new(),
        };
        self.lost(&host).map(|why| {
            format!(
                "writes over the host's {} ({})",
                rel.display(),
                why.trim_start_matches("a deletion git cannot bring back: ")
            )
        })
    }

    /// Whether the root is a git work tree whose start commit does not hold `rel` (untracked
    /// or ignored). In a root that is no work tree, a text file's old lines are in the diff.
    fn untracked(&self, rel: &Path) -> bool {
        self.tracked
            .get_or_init(|| tracked(self.root, self.start.as_deref(), &self.paths))
            .as_ref()
            .is_ok_and(|t| !t.contains_key(rel))
    }

    /// Why deleting the host's side of `it` loses what git cannot bring back, if it does.
    fn lost(&self, it: &Item) -> Option<String> {
        let old = it.old.as_ref()?;
        let tracked = match self
            .tracked
            .get_or_init(|| tracked(self.root, self.start.as_deref(), &self.paths))
        {
            Ok(t) => t,
            Err(why) => {
                return Some(format!(
                    "a deletion git cannot bring back: {}",
                    if why.is_empty() {
                        "the root is no git work tree"
                    } else {
                        why
                    }
                ));
            }
        };
        let Some((mode, id)) = tracked.get(&it.path) else {
            return Some(
                "a deletion git cannot bring back: not in the start commit (untracked, ignored, or another repository's)"
                    .into(),
            );
        };
        let (want_mode, content) = match &old.kind {
            SideKind::Symlink(t) => ("120000", t.as_os_str().as_bytes().to_vec()),
            SideKind::File => (
                if executable(old.mode) {
                    "100755"
                } else {
                    "100644"
                },
                super::layer::read_regular(&old.abs).ok()?,
            ),
        };
        if id.len() != 40 {
            return Some(
                "a deletion git cannot bring back: the repository's object format is not checked"
                    .into(),
            );
        }
        let mut h = sha1_smol::Sha1::new();
        h.update(format!("blob {}\0", content.len()).as_bytes());
        h.update(&content);
        if mode != want_mode || h.digest().to_string() != *id {
            return Some("a deletion git cannot bring back: changed since the start commit".into());
        }
        None
    }
}

/// What the judge needs from a walk of the host's tree.
#[derive(Default)]
struct Scan {
    /// Every symlink (relative paths).
    links: Vec<PathBuf>,
    /// Every `.git` entry below the root's own (a nested repository, a submodule, a linked
    /// worktree), not entered.
    dotgits: Vec<PathBuf>,
    /// Every regular file at or inside a protected name (at most [`MAX_PROTECTED`]).
    protected: Vec<PathBuf>,
    /// Why the walk is incomplete, when the tree is larger than a layer may be.
    incomplete: Option<String>,
}

/// Protected files read for the paths they name, at most.
const MAX_PROTECTED: usize = 4096;

/// One walk of the host's tree at `root` (file types from the directory entries, no stat).
fn scan_host(root: &Path) -> Scan {
    let mut out = Scan::default();
    let mut seen = 0usize;
    // (directory, whether it is a protected name or inside one)
    let mut stack = vec![(PathBuf::new(), false)];
    while let Some((rel, inside)) = stack.pop() {
        let Ok(entries) = fs::read_dir(root.join(&rel)) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                out.incomplete = Some(format!(
                    "not checked: the root holds more than {MAX_ENTRIES} entries, so where its symlinks lead is unknown"
                ));
                return out;
            }
            let Ok(ty) = e.file_type() else { continue };
            let name = e.file_name();
            let path = rel.join(&name);
            // One lookup per entry: the protected entry this path's last components are.
            let is_protected = || {
                let names: Vec<&[u8]> = path.iter().map(|c| c.as_bytes()).collect();
                protected_name(&names).is_some()
            };
            if name == ".git" {
                if !rel.as_os_str().is_empty() {
                    out.dotgits.push(path);
                }
            } else if ty.is_symlink() {
                out.links.push(path);
            } else if ty.is_dir() {
                let inside = inside || is_protected();
                stack.push((path, inside));
            } else if ty.is_file()
                && out.protected.len() < MAX_PROTECTED
                && (inside || is_protected())
                && !prose(&path)
            {
                out.protected.push(path);
            }
        }
    }
    out
}

/// A file of prose (an agent's instructions, a readme) names paths that nothing runs.
/// (and a debugger's launch configuration names the program a person starts by hand, as a
/// Makefile does: following it would flag every source file).
fn prose(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "launch.json")
        || path.extension().is_some_and(|x| {
            matches!(
                x.as_bytes(),
                b"md" | b"mdc" | b"mdx" | b"txt" | b"rst" | b"adoc" | b"org"
            )
        })
}

/// The files that the protected `files` name (each read as the apply would leave it), and the
/// files those name, two steps deep: places, since the tool that reads the protected file runs
/// them. Only what is not a directory counts (a settings file names many directories).
fn named_by(
    root: &Path,
    files: &[PathBuf],
    view: &View<'_>,
    read: host_code::Reader<'_>,
    home: Option<&Path>,
) -> Vec<Place> {
    let mut out: Vec<Place> = Vec::new();
    let mut queue: Vec<(PathBuf, String, usize)> = files
        .iter()
        .filter_map(|f| {
            protected_at_or_above(f).map(|p| (f.clone(), format!("{} ({})", f.display(), p.why), 0))
        })
        .collect();
    let mut reads = 0;
    while let Some((rel, chain, depth)) = queue.pop() {
        reads += 1;
        if reads > MAX_PROTECTED {
            break;
        }
        let abs = root.join(&rel);
        let Some(text) = read(&abs) else { continue };
        let dir = abs.parent().unwrap_or(root).to_path_buf();
        for named in host_code::script_paths(&text, &[&dir, root], home) {
            let Ok(named_rel) = named.strip_prefix(root) else {
                continue;
            };
            let named_rel = crate::policy::absolute(Path::new("/"), named_rel);
            let named_rel = named_rel
                .strip_prefix("/")
                .unwrap_or(&named_rel)
                .to_path_buf();
            if named_rel.as_os_str().is_empty()
                || view.kind(&named_rel) == Kind::Dir
                || out.iter().any(|p| p.path == root.join(&named_rel))
            {
                continue;
            }
            out.push(Place {
                path: root.join(&named_rel),
                why: format!("named by {chain}: it runs when that does"),
            });
            // One step further only for what is plainly a script: a source file's imports are
            // the project's code, left to the reviewer.
            if depth < 2 && view.kind(&named_rel) == Kind::File && script_like(&named_rel) {
                queue.push((
                    named_rel.clone(),
                    format!("{}, which {chain} runs", named_rel.display()),
                    depth + 1,
                ));
            }
        }
    }
    out
}

/// Whether a file's first 8000 bytes hold a NUL (git shows it as binary).
fn binary(path: &Path) -> bool {
    let mut head = Vec::new();
    super::layer::open_regular(path)
        .and_then(|f| std::io::Read::read_to_end(&mut std::io::Read::take(f, 8000), &mut head))
        .is_ok_and(|_| head.contains(&0))
}

/// The entries' paths git ignores in the root's repository (one `git check-ignore` for all).
fn ignored(root: &Path, entries: &[Entry]) -> std::collections::BTreeSet<PathBuf> {
    let mut out = std::collections::BTreeSet::new();
    if entries.is_empty() {
        return out;
    }
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(root).args([
        "-c",
        "core.fsmonitor=false",
        "check-ignore",
        "--stdin",
        "-z",
    ]);
    let mut input = Vec::new();
    for e in entries {
        input.extend(e.path.as_os_str().as_bytes());
        input.push(0);
    }
    if let Some(found) = super::git::with_input(cmd, input) {
        for p in found.split(|b| *b == 0).filter(|p| !p.is_empty()) {
            out.insert(PathBuf::from(OsString::from_vec(p.to_vec())));
        }
    }
    out
}

/// A shell script (or one with no extension, as hooks are): what it names runs as it does.
fn script_like(path: &Path) -> bool {
    path.extension()
        .is_none_or(|x| matches!(x.as_bytes(), b"sh" | b"bash" | b"zsh" | b"fish"))
}

/// Why a file's content hides code from the reviewer, if it does: an executable, or a script
/// (`#!`), that git's test shows as binary (a NUL in the first 8000 bytes) runs all the same —
/// a shell stops only at a NUL on its first line.
pub fn hidden_code(content: &Path, name: &Path, executable: bool) -> Option<String> {
    let mut head = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(super::layer::open_regular(content).ok()?, 8000),
        &mut head,
    )
    .ok()?;
    hidden_code_in(&head, name, executable)
}

/// [`hidden_code`] of the first 8000 bytes of a file named `name`: an executable, a script
/// (`#!`) or a file of a language that runs (node runs a `.js` with a NUL in a comment; a jar,
/// a shared object or a native module are code by nature) that git shows as binary.
pub fn hidden_code_in(head: &[u8], name: &Path, executable: bool) -> Option<String> {
    let head = &head[..head.len().min(8000)];
    let code = name.extension().is_some_and(|x| {
        matches!(
            x.as_bytes(),
            b"js"
                | b"mjs"
                | b"cjs"
                | b"ts"
                | b"mts"
                | b"cts"
                | b"jsx"
                | b"tsx"
                | b"py"
                | b"pth"
                | b"sh"
                | b"bash"
                | b"zsh"
                | b"rb"
                | b"pl"
                | b"php"
                | b"lua"
                | b"ps1"
                | b"jar"
                | b"class"
                | b"so"
                | b"node"
                | b"dll"
                | b"dylib"
                | b"wasm"
                | b"pyc"
        )
    });
    ((executable || code || head.starts_with(b"#!")) && head.contains(&0)).then(|| {
        "code whose content is shown as binary (an executable, a script or a file of a language \
         that runs): read it whole before applying"
            .into()
    })
}

/// The files of the commit the root started from (or of the repository's HEAD for a root
/// inside a work tree), relative to the root.
fn tracked(root: &Path, start: Option<&str>, paths: &[PathBuf]) -> Result<Tracked, String> {
    let commit = start.unwrap_or("HEAD");
    // Only what the layer touches, when that is a short list (pathspecs taken literally);
    // the whole commit otherwise.
    let specs: &[PathBuf] = if paths.len() <= 4096 { paths } else { &[] };
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args([
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
            "ls-tree",
            "-r",
            "-z",
            "--no-abbrev",
            commit,
            "--",
        ])
        .args(specs)
        .env("GIT_LITERAL_PATHSPECS", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("git could not be run ({e})"))?;
    if !out.status.success() {
        return Err(String::new());
    }
    let mut map = Tracked::new();
    for rec in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        // "<mode> <type> <id>\t<path>"
        let Some(tab) = rec.iter().position(|b| *b == b'\t') else {
            continue;
        };
        let head = String::from_utf8_lossy(&rec[..tab]);
        let mut parts = head.split(' ');
        let (Some(mode), Some(_), Some(id)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let path = PathBuf::from(OsString::from_vec(rec[tab + 1..].to_vec()));
        map.insert(path, (mode.to_string(), id.to_string()));
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::changes::Side;

    fn item(path: &str, new_mode: u32, old_mode: Option<u32>) -> Item {
        let side = |mode| Side {
            kind: SideKind::File,
            abs: "/nonexistent".into(),
            mode,
        };
        Item {
            path: path.into(),
            old: old_mode.map(side),
            new: Some(side(new_mode)),
            conflict: None,
            flags: vec![],
        }
    }

    #[test]
    fn protected_names_executables_and_mode_changes_are_flagged_at_any_depth() {
        let none = Path::new("/nonexistent");
        let judge = Judge::new(none, none, &[], None);
        let f = |i: &Item| judge.flags(i);
        assert!(f(&item("a/b/.envrc", 0o644, None))[0].contains(".envrc"));
        assert!(f(&item("x/.husky/pre-commit", 0o644, None))[0].contains(".husky"));
        assert!(
            f(&item("sub/.git/hooks/post-checkout", 0o644, None))
                .iter()
                .any(|s| s.contains(".git"))
        );
        assert_eq!(f(&item("src/run.sh", 0o755, None)), vec!["executable"]);
        assert_eq!(
            f(&item("src/run.sh", 0o755, Some(0o755))),
            Vec::<String>::new()
        );
        assert!(f(&item("src/lib.rs", 0o644, Some(0o644))).is_empty());
    }
}
