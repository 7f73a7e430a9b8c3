//! The git side of a copy-on-write root: the commit checked out at the start (read from the
//! files, no git process: it is on the start-up path), and the run's own commits offered back
//! as a branch of the host repository, never with the layer's hooks or config.

use std::fs;
use std::os::unix::ffi::OsStringExt;
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
    // The layer's files are the run's: a regular file only (at most 1 MiB), never through a
    // link or a FIFO. The host's are read as they are.
    let read = |p: PathBuf| {
        if p.starts_with(upper_git) {
            crate::protect::gitconfig::read_small(&p)
        } else {
            fs::read_to_string(&p)
        }
    };
    let head = read(pick("HEAD")).ok()?;
    let head = head.trim();
    let name = match head.strip_prefix("ref: ") {
        None => return is_sha(head).then(|| head.to_string()),
        Some(n) => n.trim(),
    };
    if !name.starts_with("refs/") || name.split('/').any(|c| c == ".." || c.is_empty()) {
        return None;
    }
    if let Ok(text) = read(pick(name)) {
        let sha = text.trim();
        if is_sha(sha) {
            return Some(sha.to_string());
        }
    }
    let packed = read(pick("packed-refs")).ok()?;
    packed.lines().find_map(|line| {
        let (sha, r) = line.split_once(' ')?;
        (r == name && is_sha(sha)).then(|| sha.to_string())
    })
}

/// Builds in `scratch` a bare repository to read the run's commits from: its own config, no
/// hooks, branch `jail` at `commit`, the layer's object files (loose objects and packs, by their
/// plain names) beside the host's objects (an alternate). Nothing else of the layer's `.git` is
/// read: its config, hooks and alternates are the run's.
pub fn scratch_repo(
    root: &Path,
    upper_git: &Path,
    commit: &str,
    scratch: &Path,
) -> std::io::Result<()> {
    let host_git = root.join(".git");
    let _ = fs::remove_dir_all(scratch);
    let objects = scratch.join("objects");
    fs::create_dir_all(objects.join("info"))?;
    fs::create_dir_all(scratch.join("refs/heads"))?;
    fs::write(scratch.join("HEAD"), "ref: refs/heads/jail\n")?;
    fs::write(
        scratch.join("config"),
        "[core]\n\trepositoryformatversion = 0\n\tbare = true\n",
    )?;
    fs::write(scratch.join("refs/heads/jail"), format!("{commit}\n"))?;
    copy_objects(&upper_git.join("objects"), &objects)?;
    let mut alternates = host_git.join("objects").into_os_string().into_vec();
    alternates.push(b'\n');
    fs::write(objects.join("info/alternates"), alternates)
}

/// git on a scratch repository: no hooks, no external diff or text conversion, no pager.
fn scratch_git(scratch: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(scratch)
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
            "--no-pager",
        ])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_EXTERNAL_DIFF")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("git: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(out.stdout)
}

/// One path a run's commits changed: the modes and object ids on both sides of the commit that
/// changed it (git's raw diff), `000000` for a side without it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    pub path: PathBuf,
    pub old_mode: String,
    pub new_mode: String,
    pub new_id: String,
}

/// The most commits a review reads; a run with more is flagged whole.
pub const MAX_COMMITS: usize = 10_000;

/// What the run's commits change, each commit against each of its parents (so a file added by
/// one commit and removed by the next is seen), and the log with patches for a person to read.
/// `start` is the commit the run started from (None: every commit of `head` is the run's).
pub fn review(
    scratch: &Path,
    start: Option<&str>,
    head: &str,
) -> Result<(Vec<Changed>, Vec<u8>), String> {
    let range = match start {
        Some(s) => format!("{s}..{head}"),
        None => head.to_string(),
    };
    let list = scratch_git(scratch, &["rev-list", &range])?;
    if list
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count()
        > MAX_COMMITS
    {
        return Err(format!("more than {MAX_COMMITS} commits"));
    }
    // One process for every commit's changes against each of its parents.
    let raw = scratch_git(
        scratch,
        &[
            "-c",
            "log.showRoot=true",
            "log",
            "-z",
            "-m",
            "-r",
            "--raw",
            "--no-renames",
            "--no-abbrev",
            "--format=tformat:%H",
            &range,
        ],
    )?;
    let mut changed = parse_raw(&raw);
    if let Some(s) = start {
        // The tree the branch leaves against the start, whatever the history between (a run
        // that resets to an older commit and builds on it brings back what that one had).
        let whole = scratch_git(
            scratch,
            &[
                "diff-tree",
                "-r",
                "-z",
                "--no-renames",
                "--no-abbrev",
                s,
                head,
            ],
        )?;
        changed.extend(parse_raw(&whole));
    }
    changed.sort_by(|a: &Changed, b| a.path.cmp(&b.path));
    let log = scratch_git(
        scratch,
        &[
            "log",
            "-p",
            "-m",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-renames",
            "--format=commit %H%nAuthor: %an <%ae>%n%n%w(0,4,4)%B",
            &range,
        ],
    )?;
    Ok((changed, log))
}

/// Git's `-z` raw diff: `:oldmode newmode oldid newid status NUL path NUL`.
fn parse_raw(raw: &[u8]) -> Vec<Changed> {
    let mut out = Vec::new();
    let mut fields = raw.split(|b| *b == 0);
    while let Some(head) = fields.next() {
        // In a log, each commit's first record follows its header line.
        let head = head.strip_prefix(b"\n").unwrap_or(head);
        let Some(head) = head.strip_prefix(b":") else {
            continue;
        };
        let Some(path) = fields.next() else { break };
        let head = String::from_utf8_lossy(head);
        let parts: Vec<&str> = head.split(' ').collect();
        if parts.len() < 5 {
            continue;
        }
        out.push(Changed {
            path: PathBuf::from(std::ffi::OsString::from_vec(path.to_vec())),
            old_mode: parts[0].to_string(),
            new_mode: parts[1].to_string(),
            new_id: parts[3].to_string(),
        });
    }
    out
}

/// Whether `head` descends from `start` (a branch that does not rewrites history).
pub fn descends(scratch: &Path, start: &str, head: &str) -> bool {
    scratch_git(scratch, &["merge-base", "--is-ancestor", start, head]).is_ok()
}

/// A blob's bytes, from the scratch repository.
pub fn blob(scratch: &Path, id: &str) -> Option<Vec<u8>> {
    scratch_git(scratch, &["cat-file", "blob", id]).ok()
}

/// The first `head` bytes of each blob of `ids`, read by one `git cat-file --batch`.
pub fn blob_heads(
    scratch: &Path,
    ids: &[&str],
    head: usize,
) -> std::collections::HashMap<String, Vec<u8>> {
    let mut out = std::collections::HashMap::new();
    let mut cmd = Command::new("git");
    cmd.arg("--git-dir")
        .arg(scratch)
        .args(["cat-file", "--batch"]);
    let input: String = ids.iter().map(|i| format!("{i}\n")).collect();
    let Some(data) = with_input(cmd, input.into_bytes()) else {
        return out;
    };
    // "<id> <type> <size>\n<bytes>\n" for each, "<id> missing\n" for one it lacks.
    let mut at = 0;
    while at < data.len() {
        let Some(nl) = data[at..].iter().position(|b| *b == b'\n') else {
            break;
        };
        let line = String::from_utf8_lossy(&data[at..at + nl]).into_owned();
        at += nl + 1;
        let parts: Vec<&str> = line.split(' ').collect();
        let (Some(id), Some(size)) = (
            parts.first(),
            parts.get(2).and_then(|s| s.parse::<usize>().ok()),
        ) else {
            continue;
        };
        let end = (at + size).min(data.len());
        out.insert(id.to_string(), data[at..end.min(at + head)].to_vec());
        at = end + 1;
    }
    out
}

/// Runs `cmd` (git, no GIT_DIR or GIT_WORK_TREE from jail's environment) with `input` on its
/// stdin; its stdout, or None when it could not be started.
pub fn with_input(mut cmd: Command, input: Vec<u8>) -> Option<Vec<u8>> {
    let mut child = cmd
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let writer = feed(child.stdin.take(), input);
    let done = child.wait_with_output().ok();
    let _ = writer.join();
    done.map(|d| d.stdout)
}

/// Writes `input` to a child's stdin on a thread of its own (a child that reads it all only
/// after writing would otherwise wait on a full pipe), with SIGPIPE blocked on that thread:
/// a child that exits early (git outside a work tree) makes the write fail with EPIPE
/// instead of killing jail, whose SIGPIPE is the default one.
pub fn feed(
    stdin: Option<std::process::ChildStdin>,
    input: Vec<u8>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
        let mut pipe = SigSet::empty();
        pipe.add(Signal::SIGPIPE);
        let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&pipe), None);
        if let Some(mut s) = stdin {
            let _ = std::io::Write::write_all(&mut s, &input);
        }
    })
}

/// Offers the commits of the scratch repository (see [`scratch_repo`]) as branch `branch` of
/// the host repository at `root`, every object checked. The host's branches, index and work
/// tree are not touched.
pub fn offer_branch(root: &Path, scratch: &Path, branch: &str) -> Result<(), JailError> {
    let fail = |e: String| {
        JailError::bad_path(
            "apply",
            root,
            format!("offering the run's commits as {branch}: {e}"),
        )
    };
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
    if !out.status.success() {
        return Err(fail(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    Ok(())
}

/// Where the host repository at `root` stands against the branch an apply offered: the
/// branch checked out (None when the head is detached), and whether the branch fast-forwards
/// it (the head is an ancestor of the branch's commits).
pub fn head_against(root: &Path, branch: &str) -> (Option<String>, bool) {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .output()
            .ok()
    };
    let current = git(&["symbolic-ref", "--quiet", "--short", "HEAD"])
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|b| !b.is_empty());
    let forward = git(&[
        "merge-base",
        "--is-ancestor",
        "HEAD",
        &format!("refs/heads/{branch}"),
    ])
    .is_some_and(|o| o.status.success());
    (current, forward)
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
                    // A hard link where it can (the store is one filesystem): a copy-based
                    // layer holds the whole object store.
                    if fs::hard_link(f.path(), dest.join(&fname)).is_err() {
                        fs::copy(f.path(), dest.join(&fname))?;
                    }
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
