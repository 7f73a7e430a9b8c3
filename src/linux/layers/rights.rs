//! Landlock filesystem rights as a small bit set of our own, so the policy compiler stays pure and
//! its plans serialize by name. Mapped onto the `landlock` crate only when applied.

use serde::{Serialize, Serializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Rights(pub u32);

/// Name and bit of every right, in Landlock's own order (bit = 1 << LANDLOCK_ACCESS_FS_* index).
pub const NAMES: &[(&str, u32)] = &[
    ("execute", 1 << 0),
    ("write_file", 1 << 1),
    ("read_file", 1 << 2),
    ("read_dir", 1 << 3),
    ("remove_dir", 1 << 4),
    ("remove_file", 1 << 5),
    ("make_char", 1 << 6),
    ("make_dir", 1 << 7),
    ("make_reg", 1 << 8),
    ("make_sock", 1 << 9),
    ("make_fifo", 1 << 10),
    ("make_block", 1 << 11),
    ("make_sym", 1 << 12),
    ("refer", 1 << 13),
    ("truncate", 1 << 14),
    ("ioctl_dev", 1 << 15),
];

impl Rights {
    pub const NONE: Rights = Rights(0);
    pub const EXECUTE: Rights = Rights(1 << 0);
    pub const WRITE_FILE: Rights = Rights(1 << 1);
    pub const READ_FILE: Rights = Rights(1 << 2);
    pub const READ_DIR: Rights = Rights(1 << 3);
    pub const TRUNCATE: Rights = Rights(1 << 14);
    pub const IOCTL_DEV: Rights = Rights(1 << 15);
    /// Every right Landlock knows (ABI 5+).
    pub const ALL: Rights = Rights((1 << 16) - 1);
    /// Read and run what is there.
    pub const READ: Rights = Rights(Self::EXECUTE.0 | Self::READ_FILE.0 | Self::READ_DIR.0);
    /// List a directory and nothing else: what an ancestor of a hidden path keeps.
    pub const LIST: Rights = Self::READ_DIR;
    /// A device node that is read, written and driven by ioctl (a terminal, /dev/null).
    pub const DEV: Rights = Rights(Self::READ_FILE.0 | Self::WRITE_FILE.0 | Self::IOCTL_DEV.0);
    /// Rights that only mean something on a regular file or device (the rest are directory rights:
    /// Landlock refuses them in a rule on a file).
    pub const FILE_ONLY: Rights = Rights(
        Self::EXECUTE.0
            | Self::WRITE_FILE.0
            | Self::READ_FILE.0
            | Self::TRUNCATE.0
            | Self::IOCTL_DEV.0,
    );

    /// Rights known to a kernel with this Landlock ABI.
    pub fn for_abi(abi: u32) -> Rights {
        match abi {
            0 => Rights::NONE,
            1 => Rights((1 << 13) - 1),
            2 => Rights((1 << 14) - 1),
            3 | 4 => Rights((1 << 15) - 1),
            _ => Rights::ALL,
        }
    }

    pub fn union(self, other: Rights) -> Rights {
        Rights(self.0 | other.0)
    }
    pub fn intersect(self, other: Rights) -> Rights {
        Rights(self.0 & other.0)
    }
    pub fn contains(self, other: Rights) -> bool {
        self.0 & other.0 == other.0
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn names(self) -> Vec<&'static str> {
        NAMES
            .iter()
            .filter(|(_, bit)| self.0 & bit != 0)
            .map(|(n, _)| *n)
            .collect()
    }
}

impl Serialize for Rights {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Rights::ALL => s.serialize_str("all"),
            Rights::READ => s.serialize_str("read"),
            other => s.collect_seq(other.names()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_masks_grow_with_the_abi() {
        assert!(Rights::for_abi(1).contains(Rights::READ));
        assert!(!Rights::for_abi(2).contains(Rights::TRUNCATE));
        assert!(Rights::for_abi(3).contains(Rights::TRUNCATE));
        assert!(!Rights::for_abi(4).contains(Rights::IOCTL_DEV));
        assert_eq!(Rights::for_abi(7), Rights::ALL);
    }

    #[test]
    fn names_match_landlock_bits() {
        assert_eq!(Rights::READ.names(), ["execute", "read_file", "read_dir"]);
        assert_eq!(
            Rights(landlock::AccessFs::Refer as u32),
            Rights(1 << 13),
            "our bit order must be Landlock's"
        );
        assert_eq!(
            Rights(landlock::AccessFs::IoctlDev as u32),
            Rights::IOCTL_DEV
        );
    }
}
