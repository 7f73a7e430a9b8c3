//! Gathers the facts of the run report, in the supervisor, outside the sandbox: a baseline of
//! the writable paths before the command starts, Landlock's audit records while it runs, and
//! after it ends the comparison, the tree's resource use and the proxy's decisions. The report
//! file is opened before the command exists and written through that descriptor at the end.

use std::cell::RefCell;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::SystemTime;

use super::audit::{self, AuditReader, AuditStream};
use crate::changes::Changes;
use crate::enforcement::Layers;
use crate::error::JailError;
use crate::linux::layers::NetRuntime;
use crate::linux::run::plan::RunPlan;
use crate::linux::run::run_state::RunState;
use crate::linux::run::supervisor::{CommandStarted, RunEnd};
use crate::policy::Policy;
use crate::run_report::{self, DenialFacts, DenialItem, EndFacts, Facts, Resources, RunReport};

/// The audit stream before the command exists, its reader while it runs.
enum AuditPhase {
    Waiting(AuditStream),
    Reading(AuditReader),
    Unavailable(String),
}

pub struct Recorder {
    file: Option<(PathBuf, File)>,
    /// The launch's working directory, for checking the report path again.
    base: PathBuf,
    started: SystemTime,
    audit: Rc<RefCell<AuditPhase>>,
    /// Told of each denial as it is read (the event stream).
    listener: Option<audit::DenialListener>,
}

impl Recorder {
    /// Before the command starts: opens the report file (refusing a place the command could
    /// write), and keeps the audit records' stream (opened with [`audit::open`] before the run
    /// was decided: whether it opened is a fact the plan depends on).
    pub fn start(
        report: Option<&Path>,
        policy: &Policy,
        layers: &Layers,
        audit: Result<AuditStream, audit::Unavailable>,
    ) -> Result<Recorder, JailError> {
        let started = SystemTime::now();
        let base = std::env::current_dir()
            .map_err(|e| JailError::io("cannot read the current directory", e))?;
        let file = match report {
            None => None,
            Some(path) => {
                let private = private_tmp(policy, layers);
                let abs = run_report::check_report_path(path, &base, policy, private)
                    .map_err(|reason| JailError::bad_path("--report", path, reason))?;
                let file = run_report::open_output(&abs, false)
                    .map_err(|reason| JailError::bad_path("--report", &abs, reason))?;
                Some((abs, file))
            }
        };
        let audit = match audit {
            Ok(stream) => AuditPhase::Waiting(stream),
            Err(why) => AuditPhase::Unavailable(why.0),
        };
        Ok(Recorder {
            file,
            base,
            started,
            audit: Rc::new(RefCell::new(audit)),
            listener: None,
        })
    }

    /// The layers changed before the command started (the namespaces could not be used after
    /// all): the report path must still be out of the command's reach with the layers it gets.
    /// Refused, the (still empty) file jail opened is removed and no report is written there.
    pub fn recheck(&mut self, policy: &Policy, layers: &Layers) -> Result<(), JailError> {
        if let Some((path, _)) = &self.file {
            let private = private_tmp(policy, layers);
            if let Err(reason) = run_report::check_report_path(path, &self.base, policy, private) {
                let (path, file) = self.file.take().expect("checked above");
                if file.metadata().is_ok_and(|m| m.len() == 0) {
                    let _ = std::fs::remove_file(&path);
                }
                return Err(JailError::bad_path("--report", &path, reason));
            }
        }
        Ok(())
    }

    /// The report file opened for the run, as the journal records it.
    pub fn report_file(&self) -> Option<crate::linux::run::journal::ReportFile> {
        use std::os::unix::fs::MetadataExt;
        let (path, file) = self.file.as_ref()?;
        let meta = file.metadata().ok()?;
        Some(crate::linux::run::journal::ReportFile {
            path: crate::byte_path::BytePath(path.clone()),
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    /// The report as this attempt would leave it if the supervisor were killed: what is known
    /// before the command starts; the journal's finishing adds the end and the changes.
    pub fn provisional(&self, policy: &Policy, run: &RunState, net: &NetRuntime) -> RunReport {
        let gaps = run.plan.gaps.clone();
        let file = crate::policy_file::PolicyFile::new(policy, &run.plan.layers, gaps.clone());
        let killed = "the supervisor was killed before the run ended";
        RunReport::build(Facts {
            policy,
            policy_json: serde_json::to_value(&file).expect("serializable"),
            features: &run.facts.features,
            layers: &run.plan.layers,
            gaps,
            network_enforcement: network_enforcement(run, net),
            started: self.started,
            ended: self.started,
            end: EndFacts::JailError(killed.into()),
            resources: Resources::default(),
            limits: crate::linux::layers::limits_report(&run.plan.limits, Default::default()),
            decisions: None,
            roots: Vec::new(),
            changes: Err(format!("{killed}; not compared")),
            denials: DenialFacts::Unavailable(format!("{killed}; not read")),
        })
    }

    /// Each denial is also handed to `listener` as it is read.
    pub fn tell_denials(&mut self, listener: audit::DenialListener) {
        self.listener = Some(listener);
    }

    /// What the reader is told once the command exists, when `plan` has Landlock log the
    /// command's denials ([`crate::linux::run::plan::decide`] asks for that when the records can be read):
    /// which process creates this run's Landlock domain.
    pub fn command_started(&self, plan: &RunPlan) -> Option<CommandStarted> {
        if !plan.landlock.as_ref().is_some_and(|l| l.log_denials) {
            return None;
        }
        let audit = Rc::clone(&self.audit);
        let listener = self.listener.clone();
        Some(Box::new(move |pid| {
            let mut phase = audit.borrow_mut();
            let current = std::mem::replace(&mut *phase, AuditPhase::Unavailable(String::new()));
            *phase = match current {
                // The reader's thread starts only now: the command was forked from a
                // single-threaded process.
                AuditPhase::Waiting(stream) => {
                    let reader = stream.start(listener.clone());
                    reader.set_creator(pid);
                    AuditPhase::Reading(reader)
                }
                AuditPhase::Reading(reader) => {
                    reader.set_creator(pid);
                    AuditPhase::Reading(reader)
                }
                other => other,
            };
        }))
    }

    /// After the run (or jail's failure after the start): compares, collects, and writes the
    /// report and/or prints the summary.
    pub fn finish(
        self,
        policy: &Policy,
        run: &RunState,
        net: &NetRuntime,
        result: &Result<RunEnd, JailError>,
        (roots, changes, execs): (Vec<PathBuf>, Changes, Option<&super::execs::ExecLog>),
        summary: bool,
    ) -> Result<RunReport, JailError> {
        let changes = Ok(changes);
        let phase = Rc::try_unwrap(self.audit)
            .map(RefCell::into_inner)
            .unwrap_or_else(|_| AuditPhase::Unavailable("audit reader still shared".into()));
        let denials = match phase {
            AuditPhase::Reading(reader) => {
                let d = reader.finish();
                DenialFacts::Read {
                    items: d
                        .denials
                        .into_iter()
                        .map(|x| DenialItem {
                            unix_ms: x.unix_ms,
                            pid: x.pid,
                            command: x.comm,
                            exe: x.exe,
                            operation: x.operation,
                            path: x.path,
                            detail: x.detail,
                        })
                        .collect(),
                    total: d.total,
                    dropped_records: d.dropped_records,
                }
            }
            AuditPhase::Waiting(_) if !run.plan.layers.landlock => {
                DenialFacts::Unavailable("no Landlock layer in this run".into())
            }
            AuditPhase::Waiting(_) => DenialFacts::Unavailable("the command never started".into()),
            AuditPhase::Unavailable(why) => DenialFacts::Unavailable(why),
        };
        let end = match result {
            Ok(end) => EndFacts::Ended {
                code: end.code,
                timed_out: end.timed_out,
                stopped: end.stopped,
                signal: end.signal,
                bound: end.ended_by.map(|b| b.name()),
            },
            Err(e) => EndFacts::JailError(e.to_string()),
        };
        let mut resources = children_usage();
        resources.processes_started = result.as_ref().ok().and_then(|e| e.processes);
        let gaps = run.plan.gaps.clone();
        let file = crate::policy_file::PolicyFile::new(policy, &run.plan.layers, gaps.clone());
        let mut report = RunReport::build(Facts {
            policy,
            policy_json: serde_json::to_value(&file).expect("serializable"),
            features: &run.facts.features,
            layers: &run.plan.layers,
            gaps,
            network_enforcement: network_enforcement(run, net),
            started: self.started,
            ended: SystemTime::now(),
            end,
            resources,
            limits: crate::linux::layers::limits_report(&run.plan.limits, run.limits_reached),
            decisions: net.proxy.as_ref().map(|p| {
                (
                    p.decisions.allowed(),
                    p.decisions.refused(),
                    p.decisions.snapshot(),
                    p.decisions.dropped(),
                )
            }),
            roots,
            changes,
            denials,
        });
        report.execs = execs.map(super::execs::ExecLog::section);
        if summary {
            crate::text::say(report.summary());
        }
        if let Some((path, mut file)) = self.file {
            let mut text = serde_json::to_string_pretty(&report).expect("serializable");
            text.push('\n');
            file.write_all(text.as_bytes())
                .and_then(|_| file.sync_data())
                .map_err(|e| JailError::bad_path("--report", &path, e.to_string()))?;
        }
        Ok(report)
    }
}

/// Whether the command's /tmp is its own tmpfs, not the host's.
pub(in crate::linux) fn private_tmp(policy: &Policy, layers: &Layers) -> bool {
    layers.mount && policy.tmp == crate::policy::TmpMode::Private
}

fn network_enforcement(run: &RunState, net: &NetRuntime) -> &'static str {
    let p = &run.plan.net;
    match (
        p.namespace,
        net.proxy.is_some(),
        p.tcp_connect.is_some() || p.tcp_bind.is_some(),
    ) {
        (true, true, _) => "namespace+proxy",
        (true, false, _) => "namespace",
        (false, true, _) => "landlock-tcp+proxy",
        (false, false, true) => "landlock-tcp",
        (false, false, false) => "none",
    }
}

/// CPU and the largest resident set of every process of the tree that was waited for (the
/// command, its descendants reaped by init, init itself).
fn children_usage() -> Resources {
    // SAFETY: getrusage fills the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return Resources::default();
    }
    let ms = |t: libc::timeval| t.tv_sec as u64 * 1000 + t.tv_usec as u64 / 1000;
    Resources {
        peak_rss_kib: ru.ru_maxrss as u64,
        user_cpu_ms: ms(ru.ru_utime),
        system_cpu_ms: ms(ru.ru_stime),
        processes_started: None,
    }
}
