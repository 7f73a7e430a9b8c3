//! Guarded JSON files: the values at their guarded keys (an agent's `mcpServers`, its hooks)
//! read before the run and again after it; a file whose guarded values changed is moved aside
//! and its version from before put back.

use std::path::{Path, PathBuf};

use super::GuardHit;

/// A guarded JSON file as it was before the run.
pub(super) struct Guard {
    pub(super) path: PathBuf,
    pub(super) keys: Vec<String>,
    /// Its bytes and guarded values, when it existed.
    pub(super) before: Option<(Vec<u8>, GuardedValues)>,
}

/// The values at a guarded file's keys, by concrete key path (`projects./w/repo.mcpServers`).
pub(super) type GuardedValues = std::collections::BTreeMap<String, serde_json::Value>;

/// Guarded files are read up to this size; a larger one counts as changed.
const MAX_GUARDED: u64 = 16 << 20;

/// The bytes of a guarded file: a regular file only, not followed through a symlink.
fn read_guarded(path: &Path) -> Option<Result<Vec<u8>, ()>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(_) => return Some(Err(())),
    };
    if !file
        .metadata()
        .is_ok_and(|m| m.is_file() && m.len() <= MAX_GUARDED)
    {
        return Some(Err(()));
    }
    let mut bytes = Vec::new();
    Some(
        file.take(MAX_GUARDED + 1)
            .read_to_end(&mut bytes)
            .map(|_| bytes)
            .map_err(|_| ()),
    )
}

/// The values at `keys` (dot-separated, `*` for any one key) in a JSON document; None when the
/// bytes are not JSON.
pub(super) fn guarded_values(bytes: &[u8], keys: &[String]) -> Option<GuardedValues> {
    let doc: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let mut out = GuardedValues::new();
    for key in keys {
        let parts: Vec<&str> = key.split('.').collect();
        collect(&doc, &parts, String::new(), &mut out);
    }
    Some(out)
}

fn collect(v: &serde_json::Value, parts: &[&str], at: String, out: &mut GuardedValues) {
    let Some((first, rest)) = parts.split_first() else {
        // Empty is as absent: the agent writes empty defaults (`"mcpServers": {}`,
        // `"hasTrustDialogAccepted": false`) for every new project.
        let empty = match v {
            serde_json::Value::Null | serde_json::Value::Bool(false) => true,
            serde_json::Value::Object(o) => o.is_empty(),
            serde_json::Value::Array(a) => a.is_empty(),
            serde_json::Value::String(s) => s.is_empty(),
            _ => false,
        };
        if !empty {
            out.insert(at, v.clone());
        }
        return;
    };
    let Some(obj) = v.as_object() else { return };
    let join = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    if *first == "*" {
        for (k, child) in obj {
            collect(child, rest, join(k), out);
        }
    } else if let Some(child) = obj.get(*first) {
        collect(child, rest, join(first), out);
    }
}

impl Guard {
    pub(super) fn start(path: PathBuf, keys: Vec<String>) -> Guard {
        let before = match read_guarded(&path) {
            Some(Ok(bytes)) => guarded_values(&bytes, &keys).map(|v| (bytes, v)),
            _ => None,
        };
        Guard { path, keys, before }
    }

    /// What the run did to it, if that touched a guarded key.
    pub(super) fn check(&self) -> Option<GuardHit> {
        let now = read_guarded(&self.path)?;
        let changed = match (&now, &self.before) {
            (Ok(bytes), Some((old, values))) => {
                bytes != old && guarded_values(bytes, &self.keys).as_ref() != Some(values)
            }
            // New: a concern only if it holds something at a guarded key (or is not JSON).
            (Ok(bytes), None) => guarded_values(bytes, &self.keys).is_none_or(|v| !v.is_empty()),
            (Err(()), _) => true,
        };
        changed.then(|| GuardHit {
            path: self.path.clone(),
            why: format!(
                "it changed {} (settings that start commands on the host)",
                self.keys.join(", ")
            ),
            restore: self.before.as_ref().map(|(bytes, _)| bytes.clone()),
        })
    }
}
