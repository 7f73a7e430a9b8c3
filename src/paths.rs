//! Paths as the kernel will resolve them, compared as strings: made absolute lexically, or with
//! every symlink in them resolved. Rules, the protected places and the after-run check all
//! compare paths this way, so they share one spelling.

use std::path::{Component, Path, PathBuf};

/// `path` with every symlink in it resolved: the longest prefix that exists, canonicalized, and
/// the rest as written. Rules compare paths as strings, and the tools follow links: a HOME,
/// PATH entry or hooks path spelled through a symlink must match the real tree it names.
pub fn real_path(path: &Path) -> PathBuf {
    let abs = absolute(Path::new("/"), path);
    let mut rest = Vec::new();
    let mut prefix = abs.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(prefix) {
            let mut out = real;
            for c in rest.iter().rev() {
                out.push(c);
            }
            return out;
        }
        match (prefix.parent(), prefix.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                prefix = parent;
            }
            _ => return abs,
        }
    }
}

/// `path` made absolute against `base`, with `.` and `..` removed lexically.
pub fn absolute(base: &Path, path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    let mut out = PathBuf::from("/");
    for comp in joined.components() {
        match comp {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(c) => out.push(c),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}
