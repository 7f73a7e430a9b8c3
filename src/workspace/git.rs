//! The git side of a copy-on-write root: the commit checked out at the start (read from the
//! files, no git process: it is on the start-up path), and the run's own commits offered back
//! as a branch of the host repository, never with the layer's hooks or config.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::JailError;

/// The commit `HEAD` names in `git_dir` (loose or packed ref, or a detached head).
pub fn resolve_head(git_dir: &Path) -> Option<String> {
    let head = fs::read_to_string(git_dir.join("HEAD")).ok()?;
    let head = head.trim();
    match head.strip_prefix("ref: ") {
        None => is_sha(head).then(|| head.to_string()),
        Some(name) => resolve_ref(git_dir, name.trim()),
    }
}

fn resolve_ref(git_dir: &Path, name: &str) -> Option<String> {
    if !name.starts_with("refs/") || name.split('/').any(|c| c == ".." || c.is_empty()) {
        return None;
    }
    if let Ok(text) = fs::read_to_string(git_dir.join(name)) {
        let sha = text.trim();
        return is_sha(sha).then(|| sha.to_string());
    }
    let packed = fs::read_to_string(git_dir.join("packed-refs")).ok()?;
    packed.lines().find_map(|line| {
        let (sha, r) = line.split_once(' ')?;
        (r == name && is_sha(sha)).then(|| sha.to_string())
    })
}

fn is_sha(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The commit checked out in `root` when `root/.git` is a repository directory.
pub fn head_commit(root: &Path) -> Option<String> {
    let git = root.join(".git");
    if !fs::symlink_metadata(&git).ok()?.is_dir() {
        return None;
    }
    resolve_head(&git)
}

/// The run's `HEAD` as its layer shows it: the layer's files over the host's. None when the run
/// made no commit (or the layer's head is unreadable).
pub fn layer_head(upper_git: &Path, host_git: &Path) -> Option<String> {
    // HEAD and the ref it names, each from the layer when the layer has it.
    let pick = |rel: &str| {
        let up = upper_git.join(rel);
        if fs::symlink_metadata(&up).is_ok() {
            up
        } else {
            host_git.join(rel)
        }
    };
    let head = fs::read_to_string(pick("HEAD")).ok()?;
    let head = head.trim();
    let name = match head.strip_prefix("ref: ") {
        None => return is_sha(head).then(|| head.to_string()),
        Some(n) => n.trim(),
    };
    if !name.starts_with("refs/") || name.split('/').any(|c| c == ".." || c.is_empty()) {
        return None;
    }
    if let Ok(text) = fs::read_to_string(pick(name)) {
        let sha = text.trim();
        if is_sha(sha) {
            return Some(sha.to_string());
        }
    }
    let packed = fs::read_to_string(pick("packed-refs")).ok()?;
    packed.lines().find_map(|line| {
        let (sha, r) = line.split_once(' ')?;
        (r == name && is_sha(sha)).then(|| sha.to_string())
    })
}

/// Offers the run's commits as branch `branch` of the host repository at `root`: the layer's
/// objects are fetched into it through a repository jail builds in `scratch` (its own config,
/// no hooks, the layer's objects beside the host's), with every object checked. The host's
/// branches, index and work tree are not touched.
pub fn offer_branch(
    root: &Path,
    upper_git: &Path,
    commit: &str,
    branch: &str,
    scratch: &Path,
) -> Result<(), JailError> {
    let host_git = root.join(".git");
    let fail = |e: String| {
        JailError::bad_path(
            "apply",
            root,
            format!("offering the run's commits as {branch}: {e}"),
        )
    };
    let _ = fs::remove_dir_all(scratch);
    let objects = scratch.join("objects");
    fs::create_dir_all(objects.join("info")).map_err(|e| fail(e.to_string()))?;
    fs::create_dir_all(scratch.join("refs/heads")).map_err(|e| fail(e.to_string()))?;
    fs::write(scratch.join("HEAD"), "ref: refs/heads/jail\n").map_err(|e| fail(e.to_string()))?;
    fs::write(
        scratch.join("config"),
        "[core]\n\trepositoryformatversion = 0\n\tbare = true\n",
    )
    .map_err(|e| fail(e.to_string()))?;
    fs::write(scratch.join("refs/heads/jail"), format!("{commit}\n"))
        .map_err(|e| fail(e.to_string()))?;
    // Only object files come from the layer: loose objects and packs, by their plain names.
    copy_objects(&upper_git.join("objects"), &objects).map_err(|e| fail(e.to_string()))?;
    let alternates = std::iter::once(host_git.join("objects"))
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join("\n");
    fs::write(objects.join("info/alternates"), alternates + "\n")
        .map_err(|e| fail(e.to_string()))?;
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "fetch.fsckObjects=true",
            "-c",
            "transfer.fsckObjects=true",
            "-c",
            "protocol.file.allow=always",
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-recurse-submodules",
        ])
        .arg(scratch)
        .arg(format!("+refs/heads/jail:refs/heads/{branch}"))
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .map_err(|e| fail(format!("git: {e}")))?;
    let _ = fs::remove_dir_all(scratch);
    if !out.status.success() {
        return Err(fail(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    Ok(())
}

fn copy_objects(from: &Path, to: &Path) -> std::io::Result<()> {
    let Ok(entries) = fs::read_dir(from) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let ty = e.file_type()?;
        let plain = name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            && !name.starts_with('.');
        if !plain {
            continue;
        }
        if ty.is_dir() && (name.len() == 2 || name == "pack") {
            let dest: PathBuf = to.join(&*name);
            fs::create_dir_all(&dest)?;
            for f in fs::read_dir(e.path())?.flatten() {
                let fname = f.file_name();
                let fs_name = fname.to_string_lossy();
                if f.file_type()?.is_file()
                    && fs_name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
                    && !fs_name.starts_with('.')
                {
                    fs::copy(f.path(), dest.join(&fname))?;
                }
            }
        }
    }
    Ok(())
}

/// Three-way merge of one file the host and the run both changed (`jail apply --merge`): the
/// base is the file in `base_commit` (the commit checked out when the run started: the overlay
/// keeps no copy of what the run first saw), ours the host's file, theirs the run's. Writes the
/// merged text to `out` and returns Ok(true) when `git merge-file` merged cleanly; Ok(false)
/// with overlapping edits (nothing written), Err when there is no base to merge from.
pub fn merge_file(
    root: &Path,
    base_commit: &str,
    rel: &Path,
    host: &Path,
    run: &Path,
    out: &Path,
) -> Result<bool, String> {
    let git = |args: &[&std::ffi::OsStr]| {
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(["-c", "core.hooksPath=/dev/null"])
            .args(args)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .output()
            .map_err(|e| format!("git: {e}"))
    };
    let spec = format!("{base_commit}:{}", rel.display());
    let base = git(&["cat-file".as_ref(), "blob".as_ref(), spec.as_ref()])?;
    if !base.status.success() {
        return Err(format!(
            "not in the start commit {}",
            &base_commit[..12.min(base_commit.len())]
        ));
    }
    let base_file = out.with_extension("base");
    fs::write(&base_file, &base.stdout).map_err(|e| e.to_string())?;
    let merged = git(&[
        "merge-file".as_ref(),
        "-p".as_ref(),
        "-L".as_ref(),
        "host".as_ref(),
        "-L".as_ref(),
        "start".as_ref(),
        "-L".as_ref(),
        "run".as_ref(),
        host.as_os_str(),
        base_file.as_os_str(),
        run.as_os_str(),
    ]);
    let _ = fs::remove_file(&base_file);
    let merged = merged?;
    match merged.status.code() {
        Some(0) => {
            fs::write(out, &merged.stdout).map_err(|e| e.to_string())?;
            Ok(true)
        }
        Some(n) if n > 0 => Ok(false),
        _ => Err(String::from_utf8_lossy(&merged.stderr).trim().to_string()),
    }
}
