//! Resource bounds asked for: `--limit memory=4G,procs=512,tmp=2G,shm=256M,cpu=30m,layer=8G`
//! and a profile's `[limits]` table. Pure parsing and merging; how each bound is enforced
//! (cgroup, rlimit, tmpfs size, a watch of the layer) is the Linux limits layer's decision.

use std::time::Duration;

use serde::Serialize;

/// One bound: jail's default, lifted (`none` or `0`), or a value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "value")]
pub enum Limit<T> {
    #[default]
    Default,
    /// `none`/`0`: no bound from jail (for tmpfs sizes: the kernel's own, half of RAM).
    Lifted,
    Set(T),
}

impl<T: Copy> Limit<T> {
    /// The later setting wins unless it says nothing.
    fn or(self, earlier: Limit<T>) -> Limit<T> {
        match self {
            Limit::Default => earlier,
            other => other,
        }
    }
}

/// The bounds of one run, as asked (flags over profiles over jail's defaults).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Bytes of memory for the whole tree (cgroup), or per process (RLIMIT_DATA).
    pub memory: Limit<u64>,
    /// Processes and threads of the tree.
    pub procs: Limit<u64>,
    /// Size of the private /tmp, bytes.
    pub tmp: Limit<u64>,
    /// Size of the private /dev/shm, bytes.
    pub shm: Limit<u64>,
    /// CPU time of each process (RLIMIT_CPU).
    #[serde(serialize_with = "serialize_cpu")]
    pub cpu: Limit<Duration>,
    /// Bytes a copy-on-write run's layer may hold (what it adds to a copied tree).
    pub layer: Limit<u64>,
}

fn serialize_cpu<S: serde::Serializer>(l: &Limit<Duration>, s: S) -> Result<S::Ok, S::Error> {
    let secs = match l {
        Limit::Default => Limit::Default,
        Limit::Lifted => Limit::Lifted,
        Limit::Set(d) => Limit::Set(d.as_secs()),
    };
    secs.serialize(s)
}

/// The names `--limit` and `[limits]` accept.
pub const NAMES: &[&str] = &["memory", "procs", "tmp", "shm", "cpu", "layer"];

/// Smallest values that still let a jail start: init, the command and a shell need a few
/// processes and a few MiB.
const MIN_PROCS: u64 = 4;
const MIN_MEMORY: u64 = 16 << 20;
const MIN_TMPFS: u64 = 1 << 20;
const MIN_CPU: Duration = Duration::from_secs(1);

impl Limits {
    /// `later` applied over `self`: each bound it sets wins.
    pub fn merged(self, later: Limits) -> Limits {
        Limits {
            memory: later.memory.or(self.memory),
            procs: later.procs.or(self.procs),
            tmp: later.tmp.or(self.tmp),
            shm: later.shm.or(self.shm),
            cpu: later.cpu.or(self.cpu),
            layer: later.layer.or(self.layer),
        }
    }

    /// Parses `--limit` values: each `NAME=VALUE`, several per flag separated by commas.
    pub fn from_flags(flags: &[String]) -> Result<Limits, crate::JailError> {
        let mut out = Limits::default();
        for flag in flags {
            for item in flag.split(',').map(str::trim) {
                let bad = |message: String| crate::JailError::bad_flag("--limit", item, message);
                let (name, value) = item.split_once('=').ok_or_else(|| {
                    bad(format!(
                        "--limit '{item}': expected NAME=VALUE with NAME one of {} (e.g. \
                         --limit procs=512,tmp=2G)",
                        NAMES.join(", ")
                    ))
                })?;
                out.set(name.trim(), value.trim())
                    .map_err(|e| bad(format!("--limit {item}: {e}")))?;
            }
        }
        Ok(out)
    }

    /// Sets one bound from its text (`4G`, `512`, `30m`, `none`, `0`).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        match name {
            "memory" => self.memory = size(value, MIN_MEMORY)?,
            "tmp" => self.tmp = size(value, MIN_TMPFS)?,
            "shm" => self.shm = size(value, MIN_TMPFS)?,
            "procs" => self.procs = count(value)?,
            "cpu" => self.cpu = cpu(value)?,
            "layer" => self.layer = size(value, MIN_TMPFS)?,
            _ => {
                return Err(format!("unknown limit '{name}' (use {})", NAMES.join(", ")));
            }
        }
        Ok(())
    }

    /// A profile's `[limits]` table: strings (`"4G"`, `"30m"`, `"none"`) or integers
    /// (`procs = 512`, bytes for sizes, seconds for cpu).
    pub fn from_table(table: &toml::Table) -> Result<Limits, String> {
        let mut out = Limits::default();
        for (name, value) in table {
            let text = match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(n) if *n >= 0 => n.to_string(),
                other => {
                    return Err(format!(
                        "limits.{name} = {other}: use a string such as \"4G\", \"30m\" or \
                         \"none\", or a non-negative integer"
                    ));
                }
            };
            out.set(name, &text)
                .map_err(|e| format!("limits.{name} = {value}: {e}"))?;
        }
        Ok(out)
    }

    /// The name of the first bound given a value (for a platform that enforces none).
    pub fn first_set(&self) -> Option<&'static str> {
        let set = [
            matches!(self.memory, Limit::Set(_)),
            matches!(self.procs, Limit::Set(_)),
            matches!(self.tmp, Limit::Set(_)),
            matches!(self.shm, Limit::Set(_)),
            matches!(self.cpu, Limit::Set(_)),
            matches!(self.layer, Limit::Set(_)),
        ];
        NAMES.iter().zip(set).find(|(_, s)| *s).map(|(n, _)| *n)
    }

    /// The bounds set, as `[limits]` lines (`jail profile show --resolved`).
    pub fn to_toml(&self) -> String {
        let size = |l: Limit<u64>| match l {
            Limit::Default => None,
            Limit::Lifted => Some("\"none\"".to_string()),
            Limit::Set(b) => Some(format!("\"{}\"", size_text(b))),
        };
        let lines = [
            ("memory", size(self.memory)),
            (
                "procs",
                match self.procs {
                    Limit::Default => None,
                    Limit::Lifted => Some("\"none\"".into()),
                    Limit::Set(n) => Some(n.to_string()),
                },
            ),
            ("tmp", size(self.tmp)),
            ("shm", size(self.shm)),
            (
                "cpu",
                match self.cpu {
                    Limit::Default => None,
                    Limit::Lifted => Some("\"none\"".into()),
                    Limit::Set(d) => Some(format!("\"{}s\"", d.as_secs())),
                },
            ),
            ("layer", size(self.layer)),
        ];
        lines
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| format!("{k} = {v}\n")))
            .collect()
    }
}

/// `2G`, `256M`, `640K` or bytes: the largest unit that divides the size.
pub fn size_text(bytes: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

fn lifted(value: &str) -> bool {
    value.eq_ignore_ascii_case("none") || value == "0"
}

/// `512K`, `64M`, `2G`, `1T` (powers of 1024; `KiB`/`KB`/`K` alike), or bytes.
fn size(value: &str, min: u64) -> Result<Limit<u64>, String> {
    if lifted(value) {
        return Ok(Limit::Lifted);
    }
    let bad = || format!("'{value}' is not a size (examples: 512M, 2G, 1T; or none)");
    let split = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let n: u64 = number.parse().map_err(|_| bad())?;
    let unit = unit.to_ascii_uppercase();
    let shift = match unit.trim_end_matches("IB").trim_end_matches('B') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(bad()),
    };
    let bytes = n
        .checked_mul(1u64 << shift)
        .filter(|b| *b < 1 << 60)
        .ok_or_else(|| format!("'{value}' is too large"))?;
    if bytes < min {
        return Err(format!(
            "'{value}' is too small to run anything (at least {}M; or none)",
            min >> 20
        ));
    }
    Ok(Limit::Set(bytes))
}

fn count(value: &str) -> Result<Limit<u64>, String> {
    if lifted(value) {
        return Ok(Limit::Lifted);
    }
    let n: u64 = value
        .parse()
        .map_err(|_| format!("'{value}' is not a number of processes (e.g. 512; or none)"))?;
    if n < MIN_PROCS {
        return Err(format!(
            "'{value}' is too few: init, the command and its shell need at least {MIN_PROCS}"
        ));
    }
    Ok(Limit::Set(n.min(u32::MAX as u64)))
}

fn cpu(value: &str) -> Result<Limit<Duration>, String> {
    if lifted(value) {
        return Ok(Limit::Lifted);
    }
    let d = super::duration::parse(value)?;
    if d < MIN_CPU {
        return Err(format!("'{value}' is below one second of CPU time"));
    }
    Ok(Limit::Set(Duration::from_secs(d.as_secs())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_each_kind_and_lift() {
        let l = Limits::from_flags(&[
            "memory=4G,procs=512".into(),
            "tmp=2g, shm=256MiB".into(),
            "cpu=30m,layer=8G".into(),
        ])
        .unwrap();
        assert_eq!(l.memory, Limit::Set(4 << 30));
        assert_eq!(l.procs, Limit::Set(512));
        assert_eq!(l.tmp, Limit::Set(2 << 30));
        assert_eq!(l.shm, Limit::Set(256 << 20));
        assert_eq!(l.cpu, Limit::Set(Duration::from_secs(1800)));
        assert_eq!(l.layer, Limit::Set(8 << 30));
        assert_eq!(l.to_toml().lines().last(), Some("layer = \"8G\""));
        let l = Limits::from_flags(&["procs=none,memory=0,tmp=NONE,layer=none".into()]).unwrap();
        assert_eq!(l.layer, Limit::Lifted);
        assert_eq!(
            (l.procs, l.memory, l.tmp, l.shm),
            (Limit::Lifted, Limit::Lifted, Limit::Lifted, Limit::Default)
        );
    }

    #[test]
    fn bad_items_name_themselves_and_the_fix() {
        for (flag, needles) in [
            (
                "foo=1",
                &["foo=1", "unknown limit 'foo'", "memory, procs"][..],
            ),
            ("memory", &["'memory'", "NAME=VALUE"]),
            ("memory=4X", &["memory=4X", "not a size", "512M"]),
            ("memory=1M", &["too small"]),
            ("procs=many", &["procs=many", "not a number"]),
            ("procs=2", &["too few"]),
            ("cpu=5d", &["cpu=5d", "unit"]),
            ("cpu=0.5s", &["below one second"]),
            ("tmp=99999999999T", &["too large"]),
            ("layer=100K", &["layer=100K", "too small"]),
        ] {
            let e = Limits::from_flags(&[flag.into()]).unwrap_err();
            assert!(
                matches!(&e, crate::JailError::BadFlag { flag: f, value, .. } if f == "--limit" && value == flag),
                "{e:?}"
            );
            let e = e.to_string();
            for n in needles {
                assert!(e.contains(n), "{flag}: {e} lacks {n}");
            }
        }
    }

    #[test]
    fn the_first_bound_set_is_named() {
        assert_eq!(Limits::default().first_set(), None);
        let l = Limits::from_flags(&["memory=none,tmp=1G".into()]).unwrap();
        assert_eq!(l.first_set(), Some("tmp"));
    }

    #[test]
    fn later_wins_per_bound() {
        let profile = Limits::from_flags(&["procs=100,tmp=1G".into()]).unwrap();
        let cli = Limits::from_flags(&["procs=none".into()]).unwrap();
        let m = profile.merged(cli);
        assert_eq!(m.procs, Limit::Lifted, "the flag lifts it");
        assert_eq!(m.tmp, Limit::Set(1 << 30), "kept from the profile");
        assert_eq!(m.memory, Limit::Default);
    }

    #[test]
    fn tables_take_strings_and_integers() {
        let t: toml::Table = toml::from_str("procs = 64\ntmp = \"16M\"\ncpu = 90").unwrap();
        let l = Limits::from_table(&t).unwrap();
        assert_eq!(l.procs, Limit::Set(64));
        assert_eq!(l.tmp, Limit::Set(16 << 20));
        assert_eq!(l.cpu, Limit::Set(Duration::from_secs(90)));
        let t: toml::Table = toml::from_str("memory = true").unwrap();
        assert!(
            Limits::from_table(&t)
                .unwrap_err()
                .contains("limits.memory")
        );
        let t: toml::Table = toml::from_str("disk = \"1G\"").unwrap();
        assert!(
            Limits::from_table(&t)
                .unwrap_err()
                .contains("unknown limit 'disk'")
        );
    }
}
