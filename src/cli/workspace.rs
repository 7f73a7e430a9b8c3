//! `jail runs`, `jail diff`, `jail apply`, `jail discard`: the review side of copy-on-write
//! runs. What they do is [`crate::workspace`]'s; this prints it.

use super::args::Command as WorkspaceCommand;
use crate::error::JailError;

#[cfg(not(target_os = "linux"))]
pub fn workspace_command(_: WorkspaceCommand) -> Result<i32, JailError> {
    Err(JailError::BadInput(
        "copy-on-write runs: Linux only in this version".into(),
    ))
}

#[cfg(target_os = "linux")]
pub fn workspace_command(cmd: WorkspaceCommand) -> Result<i32, JailError> {
    use crate::text::say;
    use crate::workspace::{self, ApplyRefused, apply::Selection, store::Store};
    let store = Store::locate()?;
    match cmd {
        WorkspaceCommand::Runs { json } => {
            let runs = store.list()?;
            let mut rows = Vec::new();
            for run in &runs {
                let _ = workspace::recover(&store, run);
                let state = if run.interrupted() {
                    "interrupted".to_string()
                } else {
                    format!("{:?}", run.record.state).to_lowercase()
                };
                let counts = workspace::changes(run)
                    .map(|c| workspace::total(&c))
                    .unwrap_or_default();
                rows.push((run, state, counts));
            }
            if json {
                let out: Vec<serde_json::Value> = rows
                    .iter()
                    .map(|(run, state, c)| {
                        serde_json::json!({
                            "id": run.record.id,
                            "state": state,
                            "roots": run.record.layers.iter().map(|l| l.root.display().to_string()).collect::<Vec<_>>(),
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
                for (run, state, c) in rows {
                    let roots: Vec<String> = run
                        .record
                        .layers
                        .iter()
                        .map(|l| l.root.display().to_string())
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
                }
            }
            Ok(0)
        }
        WorkspaceCommand::Diff { id } => {
            let run = store.find(&id)?;
            workspace::recover(&store, &run)?;
            let changes = workspace::changes(&run)?;
            use std::io::{IsTerminal, Write};
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
            Ok(0)
        }
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
                    if let Some(b) = &done.branch {
                        say(format!("jail: the run's commits are branch {b}"));
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
