//! `jail runs`, `jail diff`, `jail apply`, `jail discard`: the review side of copy-on-write
//! runs. What they do is [`crate::workspace`]'s; this prints it.

use super::args::Command as WorkspaceCommand;
use crate::error::JailError;

#[cfg(not(target_os = "linux"))]
pub fn workspace_command(_: WorkspaceCommand) -> Result<i32, JailError> {
    Err(JailError::unsupported(
        "copy-on-write runs",
        "Linux only in this version",
    ))
}

#[cfg(target_os = "linux")]
pub fn workspace_command(cmd: WorkspaceCommand) -> Result<i32, JailError> {
    use crate::text::say;
    use crate::workspace::{self, ApplyRefused, apply::Selection, store::Store};
    let store = Store::locate()?;
    // Runs whose supervisor was killed are finished first (their planted files moved aside).
    crate::platform::finish_dead_runs();
    match cmd {
        WorkspaceCommand::Runs { json } => list_runs(&store, json),
        WorkspaceCommand::Diff { id } => show_diff(&store, &id),
        WorkspaceCommand::Apply {
            id,
            paths,
            include_flagged,
            skip_conflicts,
            merge,
        } => {
            let mut run = store.find(&id)?;
            let named = relative_paths(&run, &paths)?;
            let sel = Selection {
                named,
                include_flagged,
                skip_conflicts,
                merge,
            };
            match workspace::apply_run(&store, &mut run, &sel) {
                Ok(done) => {
                    for (p, why) in &done.left {
                        say(format!("jail: left in the layer: {}: {why}", p.display()));
                    }
                    for p in &done.merged {
                        say(format!(
                            "jail: merged with the host's changes: {}",
                            crate::text::printable(&p.display().to_string())
                        ));
                    }
                    let rest = if done.finished {
                        "the layer is removed".to_string()
                    } else {
                        format!(
                            "the rest stays: jail apply {} PATH... (or --include-flagged), jail discard {}",
                            run.record.id, run.record.id
                        )
                    };
                    say(format!(
                        "jail: applied {} change(s) of run {}; {rest}",
                        done.applied, run.record.id
                    ));
                    let here = std::env::current_dir()
                        .ok()
                        .map(|d| crate::policy::real_path(&d));
                    for offer in &done.offered {
                        say(format!(
                            "jail: {}",
                            crate::text::printable(&workspace::commits_advice(
                                offer,
                                here.as_deref()
                            ))
                        ));
                    }
                    Ok(0)
                }
                Err(ApplyRefused::Conflicts(list)) => {
                    for (p, why) in &list {
                        say(format!("jail: conflict: {}: {why}", p.display()));
                    }
                    say(format!(
                        "jail: apply {id} refused: {} conflicting path(s); nothing was applied (--skip-conflicts applies the rest, jail diff {id} shows the run's side)",
                        list.len()
                    ));
                    Ok(1)
                }
                Err(ApplyRefused::Error(e)) => Err(e),
            }
        }
        WorkspaceCommand::Discard { id } => {
            let run = store.find(&id)?;
            workspace::discard(&store, &run)?;
            say(format!("jail: run {} discarded", run.record.id));
            Ok(0)
        }
        _ => unreachable!("dispatched here for the workspace commands only"),
    }
}

/// `jail runs`: the pending runs, each with its state, counts and roots, and whether its
/// processes may still be running.
#[cfg(target_os = "linux")]
fn list_runs(store: &crate::workspace::store::Store, json: bool) -> Result<i32, JailError> {
    use crate::workspace::{self, survivors};
    let runs = store.list()?;
    let mut rows = Vec::new();
    for run in &runs {
        let _ = workspace::recover(store, run);
        let state = if run.interrupted() {
            "interrupted".to_string()
        } else {
            format!("{:?}", run.record.state).to_lowercase()
        };
        let counts = workspace::changes(run)
            .map(|c| workspace::total(&c))
            .unwrap_or_default();
        rows.push((run, state, counts, survivors::alive(run)));
    }
    if json {
        let out: Vec<serde_json::Value> = rows
            .iter()
            .map(|(run, state, c, alive)| {
                serde_json::json!({
                    "id": run.record.id,
                    "state": state,
                    "alive": alive,
                    "roots": run.record.layers.iter().map(|l| crate::byte_path::Ref(&l.root)).collect::<Vec<_>>(),
                    "changed": c.changed,
                    "flagged": c.flagged,
                    "conflicts": c.conflicts,
                    "created": run.record.created,
                    "command": run.record.command,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&out).expect("serializable")
        );
    } else if rows.is_empty() {
        println!("no pending copy-on-write runs");
    } else {
        for (run, state, c, alive) in rows {
            let roots: Vec<String> = run
                .record
                .layers
                .iter()
                .map(|l| crate::text::path_text(&l.root))
                .collect();
            println!(
                "{}",
                crate::text::printable(&format!(
                    "{}  {:<11}  {} changed, {} flagged, {} conflicts  {}  ({})",
                    run.record.id,
                    state,
                    c.changed,
                    c.flagged,
                    c.conflicts,
                    roots.join(" "),
                    run.record.command.join(" ")
                ))
            );
            if !alive.is_empty() {
                println!(
                    "          its layer may still change: {}",
                    alive_note(&alive)
                );
            }
        }
    }
    Ok(0)
}

/// `jail diff`: the run's changes as a patch (made safe for a terminal), recorded as reviewed.
#[cfg(target_os = "linux")]
fn show_diff(store: &crate::workspace::store::Store, id: &str) -> Result<i32, JailError> {
    use crate::text::say;
    use crate::workspace::{self, review, survivors};
    let run = store.find(id)?;
    workspace::recover(store, &run)?;
    use std::io::{IsTerminal, Write};
    let mut changes = workspace::changes(&run)?;
    // Where the layer may still change, what is shown is a copy no process writes, and
    // exactly what is recorded as reviewed.
    let pinned = review::pin(&run, &mut changes)?;
    if pinned.is_some() {
        let alive = survivors::alive(&run);
        let who = if alive.is_empty() {
            String::new()
        } else {
            format!("; {}", alive_note(&alive))
        };
        say(format!(
            "jail: run {id} was interrupted (its jail was killed): this is its layer as it \
             is now, and `jail apply {id}` applies exactly this or refuses if it \
             changed{who}",
            id = run.record.id
        ));
    }
    let stdout = std::io::stdout();
    let terminal = stdout.is_terminal();
    let mut out = std::io::BufWriter::new(stdout.lock());
    // To a file or a pipe the patch goes byte for byte (git apply takes it); to a
    // terminal every byte the run chose is shown, never obeyed.
    let written = if terminal {
        let mut patch = Vec::new();
        workspace::write_patch(&run, &changes, &mut patch)
            .and_then(|()| out.write_all(&crate::text::terminal_safe(&patch)))
    } else {
        workspace::write_patch(&run, &changes, &mut out)
    };
    written
        .and_then(|()| out.flush())
        .map_err(|e| JailError::io("writing the patch", e))?;
    review::record(&run, &changes)?;
    Ok(0)
}

/// "N processes of the run may still be running (pid …); stop them: kill …".
#[cfg(target_os = "linux")]
fn alive_note(pids: &[u32]) -> String {
    let list: Vec<String> = pids.iter().map(u32::to_string).collect();
    let n = if pids.len() == 1 {
        "1 process".to_string()
    } else {
        format!("{} processes", pids.len())
    };
    format!(
        "{n} of the run may still be running (pid {}); stop them: kill {}",
        list.join(" "),
        list.join(" ")
    )
}

/// Named paths, relative to the run's root (absolute ones must lie in a root).
#[cfg(target_os = "linux")]
fn relative_paths(
    run: &crate::workspace::store::Run,
    paths: &[std::path::PathBuf],
) -> Result<Vec<std::path::PathBuf>, JailError> {
    let base = std::env::current_dir()
        .map_err(|e| JailError::io("cannot read the current directory", e))?;
    paths
        .iter()
        .map(|p| {
            let abs = if p.is_absolute() {
                p.clone()
            } else {
                base.join(p)
            };
            // The parent's real path: the named entry itself may be a symlink (never followed).
            let abs = match (abs.parent(), abs.file_name()) {
                (Some(parent), Some(name)) => crate::policy::real_path(parent).join(name),
                _ => abs,
            };
            run.record
                .layers
                .iter()
                .find_map(|l| abs.strip_prefix(&l.root).ok().map(std::path::PathBuf::from))
                .ok_or_else(|| {
                    JailError::bad_path("apply", p, "is not inside the run's copy-on-write root")
                })
        })
        .collect()
}
