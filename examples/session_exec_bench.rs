//! Per-exec latency of a session from a long-lived caller (the library's `Session::exec`, no
//! `jail exec` process per command): what an orchestrator that keeps a `Session` pays per tool
//! call. `bench/session.sh` runs it beside the hyperfine table.
//!
//! Usage: session_exec_bench NAME SEQUENTIAL PARALLEL EACH -- CMD...
//!
//! Prints one line: `library: N sequential p50 X ms p99 Y ms; P×E parallel p50 … p99 … R execs/s`.

use std::ffi::OsString;
use std::time::Instant;

use jail::{ExecOptions, Session};

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let dash = args.iter().position(|a| a == "--");
    let (Some(dash), true) = (dash, args.len() >= 5) else {
        eprintln!("usage: session_exec_bench NAME SEQUENTIAL PARALLEL EACH -- CMD...");
        std::process::exit(2);
    };
    let number = |i: usize| -> usize {
        args[i]
            .to_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("argument {i}: a number"))
    };
    let name = args[0].to_string_lossy().into_owned();
    let (sequential, parallel, each) = (number(1), number(2), number(3));
    let command: Vec<OsString> = args[dash + 1..].to_vec();
    let session = Session::attach(&name).unwrap_or_else(|e| panic!("{e}"));
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&null);
    let one = |session: &Session| -> f64 {
        let t = Instant::now();
        let code = session
            .exec(
                &command,
                &ExecOptions::default(),
                [Some(fd), Some(fd), Some(fd)],
            )
            .and_then(|child| child.wait())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(code, 0, "the command failed");
        t.elapsed().as_secs_f64() * 1000.0
    };
    let seq: Vec<f64> = (0..sequential).map(|_| one(&session)).collect();
    let started = Instant::now();
    let par: Vec<f64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..parallel)
            .map(|_| {
                let session = session.clone();
                let one = &one;
                s.spawn(move || (0..each).map(|_| one(&session)).collect::<Vec<f64>>())
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let wall = started.elapsed().as_secs_f64();
    println!(
        "library: {sequential} sequential p50 {:.2} ms p99 {:.2} ms; {parallel}×{each} parallel p50 {:.2} ms p99 {:.2} ms, {:.0} execs/s",
        pct(&seq, 0.5),
        pct(&seq, 0.99),
        pct(&par, 0.5),
        pct(&par, 0.99),
        par.len() as f64 / wall
    );
}

fn pct(xs: &[f64], p: f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * p) as usize).min(v.len() - 1)]
}
