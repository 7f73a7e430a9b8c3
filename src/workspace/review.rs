//! What a person reviewed is what is applied: `jail diff` records a digest of the exact change
//! set it showed, and `jail apply` recomputes it under the roots' apply locks and refuses when
//! it differs.
//!
//! Why: a layer is not always frozen when a person looks at it. Processes of a copy-based run
//! whose jail was killed go on writing the copy (see [`super::survivors`]); without this, a
//! review shows one state and an apply writes a later one, lines nobody saw included.
//!
//! Facts behind the design:
//! - The digest covers what decides what an apply writes: per root, the run's commits (the
//!   branch offered), and each change's path (as bytes), both sides' kinds, modes, content
//!   (SHA-256 of the bytes) and symlink targets, and each directory step with its mode. It is
//!   kept as one digest per change, so that what is left after a partial apply can be checked
//!   against what was shown ([`carry_over`]).
//! - SHA-256, not the SHA-1 the store names its locks with: the layer's content is chosen by
//!   the command, and SHA-1 collisions with chosen prefixes are practical.
//! - Reading a file twice (once to show it, once to hash or apply it) can see two versions of
//!   a file something still writes. So where the layer may still change (an interrupted run),
//!   its changed files are first copied into the run's directory, out of the command's reach
//!   (Landlock kept it to the copy), opened without following symlinks and only as regular
//!   files; the patch, the digest and the apply all read those copies ([`pin`]).
//! - An interrupted run that was never reviewed is not applied: nobody saw any state of it.

use std::collections::BTreeSet;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::RootChanges;
use super::changes::{ChangeSet, DirOp, Side, SideKind};
use super::store::Run;
use crate::error::JailError;

/// The record's name in the run's directory.
pub const FILE: &str = "review.json";

/// A SHA-256 digest.
pub type Digest = [u8; 32];

/// The digests of each element of one root's change set (see the module's notes): each file
/// or symlink change, each directory step, and the run's commit. `content` gives the SHA-256
/// of a file side's bytes (read from [`Side::abs`]); everything else comes from the set itself.
pub fn elements(
    root: &Path,
    commit: Option<&str>,
    set: &ChangeSet,
    content: &mut dyn FnMut(&Path) -> io::Result<Digest>,
) -> io::Result<Vec<Digest>> {
    let element = |tag: u8, body: &[u8]| {
        let mut h = Sha256::new();
        h.update(b"jail-review/1\0");
        field(&mut h, root.as_os_str().as_bytes());
        h.update(&[tag]);
        h.update(body);
        h.finish()
    };
    let mut out = Vec::new();
    if let Some(c) = commit {
        out.push(element(b'g', &framed(c.as_bytes())));
    }
    for it in &set.items {
        let mut body = framed(it.path.as_os_str().as_bytes());
        for side in [&it.old, &it.new] {
            side_bytes(side.as_ref(), &mut body, content)?;
        }
        out.push(element(b'i', &body));
    }
    for op in &set.dirs {
        let (tag, path, mode) = match op {
            DirOp::Remove(p) => (b'r', p, 0),
            DirOp::Make(p, m) => (b'm', p, *m),
        };
        let mut body = framed(path.as_os_str().as_bytes());
        body.extend(mode.to_be_bytes());
        out.push(element(tag, &body));
    }
    Ok(out)
}

fn side_bytes(
    side: Option<&Side>,
    out: &mut Vec<u8>,
    content: &mut dyn FnMut(&Path) -> io::Result<Digest>,
) -> io::Result<()> {
    match side {
        None => out.push(0),
        Some(s) => {
            match &s.kind {
                SideKind::File => {
                    out.push(1);
                    out.extend(content(&s.abs)?);
                }
                SideKind::Symlink(target) => {
                    out.push(2);
                    out.extend(framed(target.as_os_str().as_bytes()));
                }
            }
            out.extend(s.mode.to_be_bytes());
        }
    }
    Ok(())
}

/// `bytes` with its length before it: no two sequences of fields encode alike.
fn framed(bytes: &[u8]) -> Vec<u8> {
    let mut out = (bytes.len() as u64).to_be_bytes().to_vec();
    out.extend(bytes);
    out
}

fn field(h: &mut Sha256, bytes: &[u8]) {
    h.update(&framed(bytes));
}

/// The digest of a whole change set: of its elements, in order of their digests.
pub fn digest(elements: &BTreeSet<Digest>) -> Digest {
    let mut h = Sha256::new();
    for e in elements {
        h.update(e);
    }
    h.finish()
}

/// What `jail diff` showed (`review.json`): the digest of each element, and of them all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    digest: String,
    elements: Vec<String>,
}

fn hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The elements of every root's change set, file contents hashed from each side's `abs`.
fn all_elements(changes: &[RootChanges]) -> io::Result<BTreeSet<Digest>> {
    let mut out = BTreeSet::new();
    for rc in changes {
        out.extend(elements(
            &rc.root,
            rc.commit.as_deref(),
            &rc.set,
            &mut file_digest,
        )?);
    }
    Ok(out)
}

/// SHA-256 of a regular file's bytes, opened without following a symlink and without waiting
/// on a fifo (a layer something still writes may have swapped the file).
fn file_digest(path: &Path) -> io::Result<Digest> {
    let mut f = open_regular(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(h.finish());
        }
        h.update(&buf[..n]);
    }
}

fn open_regular(path: &Path) -> io::Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::other(format!(
            "{}: no longer a regular file",
            path.display()
        )));
    }
    Ok(f)
}

fn write_record(run: &Run, elements: &BTreeSet<Digest>) -> Result<(), JailError> {
    let record = Record {
        digest: hex(&digest(elements)),
        elements: elements.iter().map(hex).collect(),
    };
    let path = run.dir.join(FILE);
    let tmp = run.dir.join(format!("{FILE}.new"));
    std::fs::write(&tmp, serde_json::to_vec(&record).expect("serializable"))
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| JailError::bad_path("diff", &path, format!("recording the review: {e}")))
}

fn read_record(run: &Run) -> Option<Record> {
    let text = std::fs::read(run.dir.join(FILE)).ok()?;
    // A record that cannot be read is one that matches nothing: review again.
    Some(serde_json::from_slice(&text).unwrap_or(Record {
        digest: String::new(),
        elements: Vec::new(),
    }))
}

/// Whether the run's layer may still change: its jail was killed while its tree ran.
pub fn may_change(run: &Run) -> bool {
    run.interrupted() || super::survivors::unfinished(run)
}

/// Copies of the changed files of a layer that may still change, in the run's directory;
/// removed when dropped.
pub struct Pinned {
    dir: PathBuf,
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// When the run's layer may still change: copies every file the changes would write (each
/// run side) into the run's directory and points the changes at the copies, so that what is
/// shown, digested and applied is one version. None when the layer cannot change.
pub fn pin(run: &Run, changes: &mut [RootChanges]) -> Result<Option<Pinned>, JailError> {
    if !may_change(run) {
        return Ok(None);
    }
    // A name of its own: a review and an apply of the run may pin at once.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = run
        .dir
        .join(format!("pinned-{}-{nanos}", std::process::id()));
    let bad = |e: io::Error| {
        JailError::bad_path(
            "layer",
            &dir,
            format!("copying the changed files out of a layer that may still change: {e}"),
        )
    };
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(&dir)
        .map_err(bad)?;
    let pinned = Pinned { dir: dir.clone() };
    let mut n = 0usize;
    for rc in changes.iter_mut() {
        for it in rc.set.items.iter_mut() {
            let Some(new) = it.new.as_mut().filter(|s| s.kind == SideKind::File) else {
                continue;
            };
            let to = dir.join(n.to_string());
            n += 1;
            let mut from = open_regular(&new.abs).map_err(bad)?;
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&to)
                .map_err(bad)?;
            io::copy(&mut from, &mut out).map_err(bad)?;
            new.abs = to;
        }
    }
    Ok(Some(pinned))
}

/// `jail diff`: records what `changes` (as shown) hold.
pub fn record(run: &Run, changes: &[RootChanges]) -> Result<(), JailError> {
    let elements = all_elements(changes)
        .map_err(|e| JailError::bad_path("diff", &run.dir, format!("reading the layer: {e}")))?;
    write_record(run, &elements)
}

/// `jail apply`, under the roots' locks, before anything is written: the changes are the ones
/// `jail diff` showed (pinned first where the layer may still change), or, never reviewed, the
/// run is not one whose layer may still change. Returns the pinned copies, which the apply
/// reads.
pub fn hold(run: &Run, changes: &mut [RootChanges]) -> Result<Option<Pinned>, JailError> {
    let id = &run.record.id;
    let Some(recorded) = read_record(run) else {
        if may_change(run) {
            return Err(JailError::RunRefused {
                id: id.clone(),
                reason: format!(
                    "interrupted (its jail was killed) and never reviewed: processes of it may \
                     still write its layer; review it first (jail diff {id}), then apply what it \
                     showed"
                ),
            });
        }
        return Ok(None);
    };
    let pinned = pin(run, changes)?;
    let now = all_elements(changes)
        .map_err(|e| JailError::bad_path("apply", &run.dir, format!("reading the layer: {e}")))?;
    if hex(&digest(&now)) != recorded.digest {
        return Err(JailError::RunRefused {
            id: id.clone(),
            reason: format!(
                "its changes changed since `jail diff` showed them; nothing was applied; review \
                 it again (jail diff {id})"
            ),
        });
    }
    Ok(pinned)
}

/// After an apply that left part of the run (under the roots' locks, which the apply holds):
/// what is left is recorded as reviewed when every change of it was shown; otherwise the
/// record matches nothing (the next apply refuses until the run is reviewed again). The part
/// applied stays applied whatever happens here: a failure leaves the record as it was, which
/// matches nothing left either.
pub fn carry_over(run: &Run) {
    let Some(recorded) = read_record(run) else {
        return;
    };
    let shown: BTreeSet<&str> = recorded.elements.iter().map(String::as_str).collect();
    let left = super::changes(run).ok().and_then(|mut changes| {
        let _pinned = pin(run, &mut changes).ok()?;
        all_elements(&changes).ok()
    });
    let record = match left {
        Some(left) if left.iter().all(|e| shown.contains(hex(e).as_str())) => left,
        _ => BTreeSet::from([[0u8; 32]]),
    };
    let _ = write_record(run, &record);
}

/// SHA-256 for a review's digests (the `sha2` crate), as this module uses it.
#[derive(Default)]
pub struct Sha256(sha2::Sha256);

impl Sha256 {
    pub fn new() -> Sha256 {
        Sha256::default()
    }

    pub fn update(&mut self, data: &[u8]) {
        sha2::Digest::update(&mut self.0, data);
    }

    pub fn finish(self) -> Digest {
        sha2::Digest::finalize(self.0).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::changes::Item;
    use std::ffi::OsStr;

    fn sha(data: &[u8]) -> String {
        let mut h = Sha256::new();
        h.update(data);
        hex(&h.finish())
    }

    #[test]
    fn sha256_gives_the_standards_answers() {
        assert_eq!(
            sha(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            sha(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        // Fed in pieces that straddle the blocks.
        let mut h = Sha256::new();
        for _ in 0..1000 {
            h.update(&[b'a'; 1000]);
        }
        assert_eq!(
            hex(&h.finish()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        );
    }

    fn side(kind: SideKind, abs: &str, mode: u32) -> Side {
        Side {
            kind,
            abs: abs.into(),
            mode,
        }
    }

    fn item(path: &Path, old: Option<Side>, new: Option<Side>) -> Item {
        Item {
            path: path.into(),
            old,
            new,
            conflict: None,
            flags: vec![],
        }
    }

    /// Contents by path: what a file side's bytes are.
    fn digest_of(set: &ChangeSet, files: &[(&str, &str)]) -> Digest {
        let mut content = |p: &Path| -> io::Result<Digest> {
            let text = files
                .iter()
                .find(|(n, _)| Path::new(n) == p)
                .map(|(_, t)| *t)
                .ok_or_else(|| io::Error::other("no such file"))?;
            let mut h = Sha256::new();
            h.update(text.as_bytes());
            Ok(h.finish())
        };
        let e = elements(Path::new("/r"), Some("c0ffee"), set, &mut content).unwrap();
        digest(&e.into_iter().collect())
    }

    fn base() -> ChangeSet {
        ChangeSet {
            items: vec![
                item(
                    Path::new("f"),
                    Some(side(SideKind::File, "/host/f", 0o644)),
                    Some(side(SideKind::File, "/layer/f", 0o644)),
                ),
                item(
                    Path::new("l"),
                    None,
                    Some(side(SideKind::Symlink("t".into()), "/layer/l", 0o777)),
                ),
            ],
            dirs: vec![DirOp::Make("d".into(), 0o755)],
            dir_conflicts: vec![],
        }
    }

    const FILES: &[(&str, &str)] = &[("/host/f", "a\n"), ("/layer/f", "a\nb\n")];

    #[test]
    fn the_digest_changes_with_every_part_of_a_change_and_nothing_else() {
        let d = digest_of(&base(), FILES);
        assert_eq!(d, digest_of(&base(), FILES), "deterministic");
        // The order of the set's lists does not matter; where the bytes are read does not.
        let mut s = base();
        s.items.reverse();
        for it in &mut s.items {
            if let Some(n) = it.new.as_mut().filter(|n| n.kind == SideKind::File) {
                n.abs = "/pinned/0".into();
            }
        }
        assert_eq!(
            d,
            digest_of(&s, &[("/host/f", "a\n"), ("/pinned/0", "a\nb\n")])
        );
        type Case<'a> = (&'a str, ChangeSet, &'a [(&'a str, &'a str)]);
        let changed: Vec<Case> = vec![
            (
                "new content",
                base(),
                &[("/host/f", "a\n"), ("/layer/f", "a\nb\nc\n")],
            ),
            (
                "old content",
                base(),
                &[("/host/f", "x\n"), ("/layer/f", "a\nb\n")],
            ),
            (
                "new mode",
                {
                    let mut s = base();
                    s.items[0].new.as_mut().unwrap().mode = 0o755;
                    s
                },
                FILES,
            ),
            (
                "symlink target",
                {
                    let mut s = base();
                    s.items[1].new.as_mut().unwrap().kind = SideKind::Symlink("u".into());
                    s
                },
                FILES,
            ),
            (
                "a side's kind",
                {
                    let mut s = base();
                    s.items[1].old = Some(side(SideKind::Symlink("t".into()), "/host/l", 0o777));
                    s
                },
                FILES,
            ),
            (
                "a path's bytes",
                {
                    let mut s = base();
                    s.items[1].path = Path::new(OsStr::from_bytes(b"l\xff")).into();
                    s
                },
                FILES,
            ),
            (
                "a directory's mode",
                {
                    let mut s = base();
                    s.dirs = vec![DirOp::Make("d".into(), 0o700)];
                    s
                },
                FILES,
            ),
            (
                "a directory step",
                {
                    let mut s = base();
                    s.dirs = vec![DirOp::Remove("d".into())];
                    s
                },
                FILES,
            ),
            (
                "one change more",
                {
                    let mut s = base();
                    s.items.push(item(
                        Path::new("g"),
                        Some(side(SideKind::File, "/host/f", 0o644)),
                        None,
                    ));
                    s
                },
                FILES,
            ),
        ];
        for (what, set, files) in changed {
            assert_ne!(d, digest_of(&set, files), "{what} went unseen");
        }
        // The commit the run made is part of it too.
        let e = |commit| {
            let mut c = |p: &Path| file_digest_fake(p);
            elements(Path::new("/r"), commit, &base(), &mut c).unwrap()
        };
        assert_ne!(e(Some("a")), e(Some("b")));
        assert_ne!(e(None), e(Some("a")));
    }

    fn file_digest_fake(p: &Path) -> io::Result<Digest> {
        let mut h = Sha256::new();
        h.update(p.as_os_str().as_bytes());
        Ok(h.finish())
    }

    #[test]
    fn an_unreadable_side_is_an_error_not_a_digest() {
        let mut content = |_: &Path| -> io::Result<Digest> { Err(io::Error::other("gone")) };
        assert!(elements(Path::new("/r"), None, &base(), &mut content).is_err());
    }
}
