//! The kernel's mount table (`/proc/PID/mountinfo`) as bytes. A mount point is any bytes but
//! NUL (a `--rw` path, a USB stick's label, a mount the user made): read as UTF-8 text, one
//! such name anywhere on the machine would make the whole table unreadable, and each reader
//! would then skip its check or lose its answer.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// One mount: where it is, and whether it is writable (`rw` in its per-mount options).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub point: PathBuf,
    pub writable: bool,
}

/// The mounts of a table, in its order.
pub fn mounts(raw: &[u8]) -> Vec<Mount> {
    raw.split(|&b| b == b'\n')
        .filter_map(|line| {
            let mut f = line.split(|&b| b == b' ');
            let point = unescape(f.nth(4)?);
            let writable = f.next()?.split(|&b| b == b',').any(|o| o == b"rw");
            Some(Mount { point, writable })
        })
        .collect()
}

/// The table as text for readers of its other fields (device numbers, filesystem types,
/// cgroup roots): a byte that is not UTF-8 can only be in a name, and shows as U+FFFD there.
pub fn text(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).into_owned()
}

/// The kernel writes space, tab, newline and backslash in a mount point as `\ooo`.
fn unescape(b: &[u8]) -> PathBuf {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    PathBuf::from(OsString::from_vec(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_keep_their_bytes_and_escapes_are_undone() {
        let raw = b"22 1 0:21 / / ro,relatime - ext4 /dev/sda1 rw\n\
                    23 22 0:22 / /w/bad\xffname rw,nosuid - ext4 /dev/sda1 rw\n\
                    24 22 0:23 / /w/a\\040b\\012c rw - tmpfs tmpfs rw\n";
        let m = mounts(raw);
        assert_eq!(m.len(), 3);
        assert_eq!(
            (m[0].point.clone(), m[0].writable),
            (PathBuf::from("/"), false)
        );
        assert_eq!(
            m[1].point,
            PathBuf::from(OsString::from_vec(b"/w/bad\xffname".to_vec()))
        );
        assert!(m[1].writable);
        assert_eq!(m[2].point, PathBuf::from("/w/a b\nc"));
        assert!(text(raw).contains("/w/bad\u{fffd}name"));
    }
}
