//! Times the `--report` machinery on one directory: a baseline snapshot, a second snapshot and
//! the comparison (bench/changes.sh runs it on a 100,000-file tree).
//!
//! Usage: changes_bench DIR [THREADS]   (THREADS 0 or absent: automatic)
//!
//! The snapshot walks with Linux syscalls (`jail::changes`): elsewhere the example only
//! says so, so that `--all-targets` builds on every system.

#[cfg(target_os = "linux")]
use std::path::PathBuf;
#[cfg(target_os = "linux")]
use std::time::Instant;

#[cfg(target_os = "linux")]
use jail::changes::{Limits, compare, snapshot};

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("changes_bench: the run report's snapshots exist on Linux only");
    std::process::exit(2);
}

#[cfg(target_os = "linux")]
fn vm(field: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .map(|l| l[field.len()..].trim().to_string())
        .unwrap_or_default()
}

#[cfg(target_os = "linux")]
fn main() {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next() else {
        eprintln!("usage: changes_bench DIR [THREADS]");
        std::process::exit(2);
    };
    let dir = std::path::absolute(PathBuf::from(dir)).expect("absolute path");
    let limits = Limits {
        threads: args
            .next()
            .map_or(0, |t| t.parse().expect("THREADS: a number")),
        ..Limits::default()
    };
    let roots = [dir];
    let t = Instant::now();
    let before = snapshot(&roots, &limits);
    let baseline = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let after = snapshot(&roots, &limits);
    let second = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let changes = compare(&before, &after);
    let cmp = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "entries={} baseline_ms={baseline:.1} snapshot2_ms={second:.1} compare_ms={cmp:.1} \
         total_ms={:.1} changes={} truncated={} snapshot_heap_kib={} VmHWM={}",
        before.entries(),
        baseline + second + cmp,
        changes.changes.len(),
        changes.truncated,
        before.heap_bytes() / 1024,
        vm("VmHWM:").replace(' ', ""),
    );
}
