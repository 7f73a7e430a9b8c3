//! The tree as the host will have it after an apply: a layer's entries over the host root, and
//! path resolution in it as the kernel will do it later, symlinks and `..` included.
//!
//! Why resolve rather than read the names: each link can stay inside the root on its own while a
//! chain leaves it (`a/b/up -> ../..` and `cfg.json -> a/b/up/../outside`: the lexical check
//! sees `a/b/up/../outside` as `a/b/outside`, the kernel goes to the root's parent). And a file
//! runs on the host because of where a name the host uses leads (`.husky -> tools/hooks`), not
//! because of its own name.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::fs;
use std::path::{Component, Path, PathBuf};

use super::layer::{Entry, Node};

/// The kernel's limit on symlinks followed in one lookup (ELOOP past it).
const MAX_LINKS: usize = 40;

/// What is at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Missing,
    File,
    Dir,
    Link(PathBuf),
}

/// Where a path leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// To this path beneath the root (relative; empty for the root itself), through these
    /// symlinks (relative paths, in the order followed); `guessed` when a `..` came right after a
    /// name that does not exist (yet): what is made there later (a link) decides where it goes.
    Inside {
        path: PathBuf,
        links: Vec<PathBuf>,
        guessed: bool,
    },
    /// Out of the root: why.
    Outside(String),
}

/// A layer's entries over a host root.
pub struct View<'a> {
    root: &'a Path,
    layer: BTreeMap<PathBuf, Node>,
}

impl<'a> View<'a> {
    /// The host's root with every entry of the layer over it.
    pub fn merged(root: &'a Path, entries: &[Entry]) -> View<'a> {
        let mut layer: BTreeMap<PathBuf, Node> = entries
            .iter()
            .map(|e| (e.path.clone(), e.node.clone()))
            .collect();
        // The directories an entry implies (a commit's files come without their directories).
        for e in entries {
            for anc in e.path.ancestors().skip(1) {
                if anc.as_os_str().is_empty() {
                    break;
                }
                layer.entry(anc.to_path_buf()).or_insert(Node::Dir {
                    mode: 0o755,
                    opaque: false,
                });
            }
        }
        View { root, layer }
    }

    /// The host's root with only `entries` over it (what a partial apply would leave).
    pub fn host_with(
        root: &'a Path,
        entries: impl IntoIterator<Item = (PathBuf, Node)>,
    ) -> View<'a> {
        View {
            root,
            layer: entries.into_iter().collect(),
        }
    }

    /// What is at `rel`, whose parents are directories in this view.
    pub fn kind(&self, rel: &Path) -> Kind {
        if let Some(node) = self.layer.get(rel) {
            return match node {
                Node::Whiteout => Kind::Missing,
                Node::File { .. } => Kind::File,
                Node::Dir { .. } => Kind::Dir,
                Node::Symlink { target } => Kind::Link(target.clone()),
            };
        }
        // Beneath a directory the run made anew (opaque) or that replaced something else,
        // nothing of the host shows.
        for anc in rel.ancestors().skip(1) {
            if anc.as_os_str().is_empty() {
                break;
            }
            match self.layer.get(anc) {
                Some(Node::Dir { opaque: false, .. })
                    if fs::symlink_metadata(self.root.join(anc)).is_ok_and(|m| !m.is_dir()) =>
                {
                    return Kind::Missing;
                }
                Some(Node::Dir { opaque: false, .. }) | None => {}
                Some(_) => return Kind::Missing,
            }
        }
        let abs = self.root.join(rel);
        match fs::symlink_metadata(&abs) {
            Ok(m) if m.file_type().is_symlink() => {
                fs::read_link(&abs).map_or(Kind::Missing, Kind::Link)
            }
            Ok(m) if m.is_dir() => Kind::Dir,
            Ok(_) => Kind::File,
            Err(_) => Kind::Missing,
        }
    }

    /// Where `rel` leads, following every symlink on the way (the last one too when
    /// `follow_last`), as the kernel resolves it. A component that does not exist (yet) is
    /// taken as a directory: what is made there later decides, and `..` after it comes back.
    pub fn resolve(&self, rel: &Path, follow_last: bool) -> Resolved {
        let mut queue: VecDeque<OsString> = components(rel);
        let mut at: Vec<OsString> = Vec::new();
        let mut links = Vec::new();
        let mut guessed = false;
        let mut last_missing = false;
        while let Some(name) = queue.pop_front() {
            if name == ".." {
                guessed |= last_missing;
                if at.pop().is_none() {
                    return Resolved::Outside("climbs above the root".into());
                }
                continue;
            }
            at.push(name);
            if queue.is_empty() && !follow_last {
                break;
            }
            let here: PathBuf = at.iter().collect();
            let kind = self.kind(&here);
            last_missing = kind == Kind::Missing;
            if let Kind::Link(target) = kind {
                links.push(here.clone());
                if links.len() > MAX_LINKS {
                    return Resolved::Outside("a loop of symlinks".into());
                }
                if target.is_absolute() {
                    return Resolved::Outside(format!(
                        "{} is an absolute link to {}",
                        here.display(),
                        target.display()
                    ));
                }
                at.pop();
                let mut rest = components(&target);
                rest.extend(queue);
                queue = rest;
            }
        }
        Resolved::Inside {
            path: at.iter().collect(),
            links,
            guessed,
        }
    }
}

/// The names of a path, `.` and the root dropped, `..` kept.
pub fn components(p: &Path) -> VecDeque<OsString> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(path: &str, target: &str) -> Entry {
        Entry {
            path: path.into(),
            node: Node::Symlink {
                target: target.into(),
            },
            copied_up: false,
        }
    }

    fn dir(path: &str) -> Entry {
        Entry {
            path: path.into(),
            node: Node::Dir {
                mode: 0o755,
                opaque: false,
            },
            copied_up: false,
        }
    }

    fn inside(p: &str) -> Resolved {
        match View::merged(Path::new("/nonexistent"), &[]).resolve(Path::new(p), true) {
            Resolved::Inside { path, .. } => Resolved::Inside {
                path,
                links: vec![],
                guessed: false,
            },
            o => o,
        }
    }

    #[test]
    fn a_chain_of_links_that_each_stay_inside_is_followed_out() {
        let entries = [
            dir("a"),
            dir("a/b"),
            link("a/b/up", "../.."),
            link("cfg.json", "a/b/up/../outside/x"),
        ];
        let view = View::merged(Path::new("/nonexistent"), &entries);
        assert_eq!(
            view.resolve(Path::new("a/b/up"), true),
            Resolved::Inside {
                path: "".into(),
                links: vec!["a/b/up".into()],
                guessed: false
            }
        );
        assert!(matches!(
            view.resolve(Path::new("cfg.json"), true),
            Resolved::Outside(_)
        ));
        // Without the first link, the second stays inside.
        let alone = View::host_with(
            Path::new("/nonexistent"),
            [(
                PathBuf::from("cfg.json"),
                Node::Symlink {
                    target: "a/b/up/../outside/x".into(),
                },
            )],
        );
        // Without the first link, the second stays inside, but only by guessing what the
        // missing `a/b/up` will be.
        assert!(matches!(
            alone.resolve(Path::new("cfg.json"), true),
            Resolved::Inside { guessed: true, .. }
        ));
    }

    #[test]
    fn absolute_links_loops_and_climbs_leave_the_root() {
        let entries = [link("l", "/etc"), link("x", "y"), link("y", "x")];
        let view = View::merged(Path::new("/nonexistent"), &entries);
        assert!(matches!(
            view.resolve(Path::new("l/passwd"), true),
            Resolved::Outside(_)
        ));
        assert!(matches!(
            view.resolve(Path::new("x"), true),
            Resolved::Outside(_)
        ));
        assert!(matches!(inside("a/../.."), Resolved::Outside(_)));
        assert_eq!(
            inside("a/./b/../c"),
            Resolved::Inside {
                path: "a/c".into(),
                links: vec![],
                guessed: false
            }
        );
        // The last link is not followed when not asked.
        assert_eq!(
            view.resolve(Path::new("l"), false),
            Resolved::Inside {
                path: "l".into(),
                links: vec![],
                guessed: false
            }
        );
    }
}
