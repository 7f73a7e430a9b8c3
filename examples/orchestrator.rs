//! An orchestrator that starts sub-agents in parallel, each confined by jail, each required at
//! level full with a timeout and a run report of its own, and prints how each one ended. Small
//! shell commands stand in for the agents:
//!
//! - `reviewer` reads the project and exits 0;
//! - `fixer` tries to write into the project, which is read-only to it, and fails;
//! - `sleeper` outlives its 1-second timeout and is killed;
//! - `watcher` runs until the orchestrator is interrupted (SIGINT or SIGTERM): then every agent
//!   still running is stopped, its whole tree with it (the cascade stop).
//!
//! Usage: orchestrator WORKDIR [--interrupt-after SECONDS]
//!
//! WORKDIR receives the project (`WORKDIR/repo`) and the reports (`WORKDIR/reports/NAME.json`).
//! Each outcome is one line: `outcome NAME status=… exit_code=… level=… gaps=… denials=…`, or
//! `outcome NAME error=…` for an agent whose jail did not start or could not be set up. Exits 0
//! when every agent ran; 1, with a line on stderr naming the agents that did not, otherwise
//! (an orchestrator that started no jail must not report success).
//! `tests/orchestrator.rs` runs this and checks those lines.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use jail::{Jail, Outcome, Require, Status, Stopper};

/// One sub-agent: its name, its command, its timeout.
struct Agent {
    name: &'static str,
    script: String,
    timeout: Duration,
}

fn agents(repo: &Path) -> Vec<Agent> {
    let repo = repo.display();
    vec![
        Agent {
            name: "reviewer",
            script: format!("cat '{repo}/src.txt' >/dev/null && echo reviewed"),
            timeout: Duration::from_secs(60),
        },
        Agent {
            name: "fixer",
            script: format!("echo fixed > '{repo}/src.txt'"),
            timeout: Duration::from_secs(60),
        },
        Agent {
            name: "sleeper",
            script: "sleep 30".into(),
            timeout: Duration::from_secs(1),
        },
        Agent {
            name: "watcher",
            // A child of its own that ignores SIGTERM: the stop must still take the whole tree.
            script: "sh -c 'trap \"\" TERM; exec sleep 6001' & wait".into(),
            timeout: Duration::from_secs(120),
        },
    ]
}

/// The orchestrator's own SIGINT and SIGTERM, blocked in every thread and taken by one.
fn block_interrupts() -> libc::sigset_t {
    // SAFETY: sigset operations on a local set; pthread_sigmask before any thread starts, so
    // every thread inherits the mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn wait_for_interrupt(set: libc::sigset_t) -> i32 {
    let mut signal = 0;
    // SAFETY: sigwait on a set this process blocked, into a local.
    unsafe { libc::sigwait(&set, &mut signal) };
    signal
}

fn describe(outcome: &Outcome) -> String {
    let status = match outcome.status {
        Status::Exited { code } => format!("exited:{code}"),
        Status::Signaled { signal } => format!("signaled:{signal}"),
        Status::TimedOut => "timed_out".into(),
        Status::Stopped => "stopped".into(),
    };
    let denials = outcome
        .report
        .as_ref()
        .map(|r| r.denials.total.to_string())
        .unwrap_or_else(|| "none".into());
    format!(
        "status={status} exit_code={} level={:?} gaps={} denials={denials}",
        outcome.exit_code,
        outcome.level,
        outcome.gaps.len()
    )
    .to_lowercase()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(workdir) = args.next().map(PathBuf::from) else {
        eprintln!("usage: orchestrator WORKDIR [--interrupt-after SECONDS]");
        std::process::exit(2);
    };
    let interrupt_after = match (args.next().as_deref(), args.next()) {
        (Some("--interrupt-after"), Some(s)) => Some(Duration::from_secs_f64(
            s.parse().expect("--interrupt-after takes seconds"),
        )),
        (None, _) => None,
        _ => {
            eprintln!("usage: orchestrator WORKDIR [--interrupt-after SECONDS]");
            std::process::exit(2);
        }
    };
    let repo = workdir.join("repo");
    let reports = workdir.join("reports");
    std::fs::create_dir_all(&repo).expect("create WORKDIR/repo");
    std::fs::create_dir_all(&reports).expect("create WORKDIR/reports");
    std::fs::write(repo.join("src.txt"), "original\n").expect("write the project");

    let interrupts = block_interrupts();
    let (done_tx, done) = mpsc::channel::<(&'static str, Result<Outcome, jail::JailError>)>();
    let mut stoppers: BTreeMap<&'static str, Stopper> = BTreeMap::new();
    // The agents that did not run, with why: their jail did not start, or refused to set up.
    let mut failed: Vec<(&'static str, String)> = Vec::new();
    let all = agents(&repo).len();
    for agent in agents(&repo) {
        let child = Jail::new(["sh", "-c", &agent.script])
            .ro(&repo)
            .require(Require::Full)
            .timeout(agent.timeout)
            .report_file(reports.join(format!("{}.json", agent.name)))
            .record(true)
            .spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) => {
                println!("outcome {} error={e}", agent.name);
                failed.push((agent.name, e.to_string()));
                continue;
            }
        };
        stoppers.insert(agent.name, child.stopper().expect("a stop handle"));
        let tx = done_tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send((agent.name, child.wait()));
        });
    }
    drop(done_tx);
    println!("started {}", stoppers.len());

    // The cascade: the orchestrator interrupted stops every agent still running.
    let (interrupted_tx, interrupted) = mpsc::channel::<i32>();
    std::thread::spawn(move || {
        let _ = interrupted_tx.send(wait_for_interrupt(interrupts));
    });
    if let Some(after) = interrupt_after {
        std::thread::spawn(move || {
            std::thread::sleep(after);
            // SAFETY: kill to this very process.
            unsafe { libc::kill(libc::getpid(), libc::SIGINT) };
        });
    }
    let mut ended = 0;
    while ended < stoppers.len() {
        if let Ok(signal) = interrupted.try_recv() {
            println!("interrupted by signal {signal}: stopping the agents still running");
            for stopper in stoppers.values() {
                stopper.stop();
            }
        }
        match done.recv_timeout(Duration::from_millis(50)) {
            Ok((name, Ok(outcome))) => {
                ended += 1;
                println!("outcome {name} {}", describe(&outcome));
            }
            Ok((name, Err(e))) => {
                ended += 1;
                println!("outcome {name} error={e}");
                failed.push((name, e.to_string()));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let content = std::fs::read_to_string(repo.join("src.txt")).unwrap_or_default();
    println!("project unchanged: {}", content == "original\n");
    if !failed.is_empty() {
        let names: Vec<String> = failed
            .iter()
            .map(|(name, why)| format!("{name} ({why})"))
            .collect();
        eprintln!(
            "orchestrator: {} of {all} agents did not run{}: {}",
            failed.len(),
            if stoppers.is_empty() {
                ", no jail started"
            } else {
                ""
            },
            names.join("; ")
        );
        std::process::exit(1);
    }
}
