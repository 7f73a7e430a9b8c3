//! Paths in jail's own records (a run's record, an apply's journal, what jail wrote): Linux
//! paths are bytes, and a name the command chose may be any bytes but `/` and NUL. JSON strings
//! are UTF-8, so a path is written as a string when it is UTF-8 and as its list of bytes
//! otherwise; both forms read back to the same path. Never lossy: a record that named another
//! path than the one on disk would make an apply or a rollback act on the wrong file.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A path that serialises as a string when it is UTF-8 and as its bytes otherwise.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct BytePath(pub PathBuf);

impl Serialize for BytePath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize(&self.0, s)
    }
}

impl<'de> Deserialize<'de> for BytePath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<BytePath, D::Error> {
        deserialize(d).map(BytePath)
    }
}

/// `#[serde(with = "crate::byte_path")]` for a `PathBuf` field.
pub fn serialize<S: Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
    match path.to_str() {
        Some(text) => s.serialize_str(text),
        None => s.collect_seq(path.as_os_str().as_bytes()),
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Either {
    Text(String),
    Bytes(Vec<u8>),
}

/// `#[serde(with = "crate::byte_path")]` for a `PathBuf` field.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
    Ok(match Either::deserialize(d)? {
        Either::Text(t) => PathBuf::from(t),
        Either::Bytes(b) => PathBuf::from(OsString::from_vec(b)),
    })
}

/// `#[serde(with = "crate::byte_path::vec")]` for a `Vec<PathBuf>` field.
pub mod vec {
    use super::*;

    pub fn serialize<S: Serializer>(paths: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(paths.iter().map(|p| Ref(p)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
        Ok(Vec::<BytePath>::deserialize(d)?
            .into_iter()
            .map(|p| p.0)
            .collect())
    }
}

/// `#[serde(with = "crate::byte_path::option")]` for an `Option<PathBuf>` field.
pub mod option {
    use super::*;

    pub fn serialize<S: Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        match path {
            Some(p) => s.serialize_some(&Ref(p)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        Ok(Option::<BytePath>::deserialize(d)?.map(|p| p.0))
    }
}

/// `#[serde(with = "crate::byte_path::os_vec")]` for a `Vec<OsString>` field (a command line:
/// its arguments are bytes too).
pub mod os_vec {
    use super::*;

    pub fn serialize<S: Serializer>(args: &[OsString], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(args.iter().map(|a| Ref(Path::new(a))))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<OsString>, D::Error> {
        Ok(Vec::<BytePath>::deserialize(d)?
            .into_iter()
            .map(|p| p.0.into_os_string())
            .collect())
    }
}

/// A borrowed path that serialises as [`BytePath`] does.
#[derive(Debug, Clone, Copy)]
pub struct Ref<'a>(pub &'a Path);

impl Serialize for Ref<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize(self.0, s)
    }
}

/// A path read back from a JSON value in either form (a string, or a list of bytes).
pub fn from_value(v: &serde_json::Value) -> Option<PathBuf> {
    BytePath::deserialize(v).ok().map(|p| p.0)
}

/// An argument (or any OS string) that serialises as a string when it is UTF-8 and as its bytes
/// otherwise, as a path does.
pub fn os_str<S: Serializer>(arg: &std::ffi::OsStr, s: S) -> Result<S::Ok, S::Error> {
    serialize(Path::new(arg), s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_bytes_round_trip_and_utf8_stays_a_string() {
        for raw in [
            &b"plain/name.rs"[..],
            b"bad\xffname",
            b"new\nline\x1b[2J",
            b"\xc3\xa9t\xc3\xa9",
            b"",
        ] {
            let p = BytePath(PathBuf::from(OsString::from_vec(raw.to_vec())));
            let text = serde_json::to_string(&p).unwrap();
            let back: BytePath = serde_json::from_str(&text).unwrap();
            assert_eq!(back, p, "{text}");
            assert_eq!(text.starts_with('"'), std::str::from_utf8(raw).is_ok());
        }
    }
}
